//! Property tests of the parser and evaluator: nothing panics, and printing a layout
//! then parsing it gives the same layout back.

use proptest::prelude::*;
use rcute_layout::eval::{eval_str, Value, FUNCTIONS};
use rcute_layout::parse::{parse, parse_tuple};
use rcute_layout::{d, s, Int, IntTuple, Layout, Tuple};

fn leaf() -> BoxedStrategy<Int> {
    prop_oneof![
        4 => (-8i64..40).prop_map(s),
        1 => prop::sample::select(vec!["M", "N", "K", "ldA", "batch_stride"]).prop_map(d),
        1 => any::<i64>().prop_map(s),
    ]
    .boxed()
}

fn tuple_of(leaf: BoxedStrategy<Int>) -> impl Strategy<Value = IntTuple> {
    leaf.prop_map(Tuple::Leaf).prop_recursive(3, 16, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Tuple::Node)
    })
}

fn layout() -> impl Strategy<Value = Layout> {
    tuple_of(leaf()).prop_flat_map(|shape| {
        let n = shape.leaves().len();
        (Just(shape), prop::collection::vec(leaf(), n)).prop_map(|(shape, strides)| {
            let flat = Tuple::Node(strides.into_iter().map(Tuple::Leaf).collect::<Vec<_>>());
            let stride = flat.unflatten(&shape).unwrap();
            Layout::new(shape, stride).unwrap()
        })
    })
}

/// Small static layouts, for random calls.
fn small_layout_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![4 => (1i64..9).prop_map(s), 1 => (-4i64..0).prop_map(s), 1 => Just(s(0))].boxed();
    tuple_of(leaf).prop_flat_map(|shape| {
        let n = shape.leaves().len();
        (Just(shape), prop::collection::vec(-6i64..64, n)).prop_map(|(shape, st)| {
            let flat = Tuple::Node(st.into_iter().map(|v| Tuple::Leaf(s(v))).collect::<Vec<_>>());
            match flat.unflatten(&shape) {
                Some(stride) => format!("{shape}:{stride}"),
                None => format!("{shape}"),
            }
        })
    })
}

fn arg_text() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        4 => small_layout_text(),
        1 => (-3i64..40).prop_map(|v| v.to_string()),
        1 => Just("_".to_string()),
        1 => Just("M".to_string()),
        1 => Just("Sw<3,3,3>".to_string()),
    ];
    base.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (
                prop::sample::select(FUNCTIONS.iter().map(|f| f.0).collect::<Vec<_>>()),
                prop::collection::vec(inner.clone(), 1..4)
            )
                .prop_map(|(f, args)| format!("{f}({})", args.join(","))),
            prop::collection::vec(inner, 1..4).prop_map(|v| format!("[{}]", v.join(","))),
        ]
    })
}

/// 512 cases per test, or `RCUTE_PROPTEST_CASES` (see `fuzz.rs` for the long runs).
fn config() -> ProptestConfig {
    let cases = std::env::var("RCUTE_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_strings_never_panic(input in ".{0,64}") {
        let _ = eval_str(&input);
    }

    #[test]
    fn grammar_alphabet_never_panics(input in "[0-9MN_a-z(),:\\[\\]<> -]{0,48}") {
        let _ = eval_str(&input);
    }

    #[test]
    fn random_calls_never_panic(input in arg_text()) {
        let _ = eval_str(&input);
    }

    #[test]
    fn print_then_parse_round_trips(l in layout()) {
        let text = l.to_string();
        match eval_str(&text) {
            Ok(Value::Layout(back)) => prop_assert_eq!(back, l.clone()),
            other => prop_assert!(false, "{} gave {:?}", text, other),
        }
        prop_assert_eq!(parse_tuple(&l.shape().to_string()).unwrap(), l.shape().clone());
    }

    #[test]
    fn parse_errors_point_inside_the_input(input in "[0-9(),:\\[\\]]{0,24}") {
        if let Err(e) = parse(&input) {
            prop_assert!(e.pos <= input.len());
        }
    }
}
