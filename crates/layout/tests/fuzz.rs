//! Fuzzing of the expression parser, the evaluator and the algebra: arbitrary strings,
//! generated well-formed expressions (static, dynamic and extreme integers, both
//! spellings) and random layouts run through every operation; nothing may panic, every
//! failure must be a typed error.
//!
//! Each test runs 256 cases by default (a few seconds in debug); set
//! `RCUTE_PROPTEST_CASES` (e.g. `RCUTE_PROPTEST_CASES=10000`) for a long run.

use proptest::prelude::*;
use rcute_layout::algebra::Tiler;
use rcute_layout::eval::{eval_str, eval_str_exact, Value, FUNCTIONS};
use rcute_layout::parse::{parse, parse_exact, MAX_DEPTH};
use rcute_layout::{d, s, Int, IntTuple, Layout, Swizzle, Tuple};

/// Cases per test: `RCUTE_PROPTEST_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("RCUTE_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Integers that stress the arithmetic: small, zero, negative, powers of two around 32-bit
/// limits, and the ends of i64.
fn int_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (-4i64..40).prop_map(|v| v.to_string()),
        1 => prop::sample::select(vec![
            1i64 << 31, (1 << 31) - 1, 1 << 32, 1 << 40, 1 << 62, i64::MAX, i64::MIN + 1, -(1 << 31),
        ])
        .prop_map(|v| v.to_string()),
        1 => any::<i64>().prop_map(|v| v.to_string()),
    ]
}

/// An integer leaf in either spelling (`_8` static, `8`, a name).
fn leaf_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => int_text(),
        2 => int_text().prop_map(|v| if v.starts_with('-') { v } else { format!("_{v}") }),
        1 => prop::sample::select(vec!["M", "N", "K", "ldA"]).prop_map(str::to_string),
    ]
}

/// A tuple of leaves, nested up to depth 3.
fn tuple_text() -> impl Strategy<Value = String> {
    leaf_text().prop_recursive(3, 12, 3, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(|v| format!("({})", v.join(",")))
    })
}

/// A layout literal: a shape and a stride of the same (or, sometimes, another) profile.
fn layout_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => tuple_text().prop_flat_map(|shape| {
            let n = shape.matches(|c: char| c.is_ascii_alphanumeric()).count().max(1);
            let strides = prop::collection::vec(leaf_text(), n);
            (Just(shape), strides).prop_map(|(shape, st)| {
                // Replace every leaf of the shape by a stride, keeping the nesting.
                let mut it = st.into_iter();
                let mut out = String::new();
                let mut in_leaf = false;
                for c in shape.chars() {
                    if c == '(' || c == ')' || c == ',' {
                        in_leaf = false;
                        out.push(c);
                    } else if !in_leaf {
                        in_leaf = true;
                        out.push_str(&it.next().unwrap_or_else(|| "1".into()));
                    }
                }
                format!("{shape}:{out}")
            })
        }),
        1 => (tuple_text(), tuple_text()).prop_map(|(a, b)| format!("{a}:{b}")),
        1 => tuple_text(),
        1 => (-2i64..6, -2i64..6, -2i64..8).prop_map(|(b, m, s)| format!("Sw<{b},{m},{s}>")),
    ]
}

/// A well-formed expression: calls of every known function (with right and wrong
/// arities), tilers, `_`, nested up to depth 4.
fn expr_text() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        5 => layout_text(),
        1 => int_text(),
        1 => Just("_".to_string()),
    ];
    base.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            4 => (
                prop::sample::select(FUNCTIONS.iter().map(|f| f.0).collect::<Vec<_>>()),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
            1 => prop::collection::vec(inner, 1..4).prop_map(|v| format!("[{}]", v.join(","))),
        ]
    })
}

/// Evaluates `input` in both spellings; printing a result must not panic either.
fn eval_both(input: &str) {
    for v in [eval_str(input), eval_str_exact(input)] {
        match v {
            Ok(v) => {
                let _ = (v.notation(), v.notation_exact());
                if let Some(l) = v.as_any() {
                    let _ = l.to_table();
                }
            }
            Err(e) => {
                let _ = e.render(input);
            }
        }
    }
}

fn leaf() -> impl Strategy<Value = Int> {
    prop_oneof![
        8 => (-4i64..33).prop_map(s),
        1 => prop::sample::select(vec![1i64 << 31, 1 << 32, 1 << 62, i64::MAX, i64::MIN]).prop_map(s),
        1 => prop::sample::select(vec!["M", "N", "ldA"]).prop_map(d),
        1 => (0i64..9).prop_map(Int::dyn_lit),
    ]
}

/// A random layout: any nesting, any strides, static, dynamic and extreme leaves.
fn layout() -> impl Strategy<Value = Layout> {
    let shape = leaf().prop_map(Tuple::Leaf).prop_recursive(2, 8, 3, |inner| {
        prop::collection::vec(inner, 1..4).prop_map(Tuple::Node)
    });
    shape.prop_flat_map(|shape: IntTuple| {
        let n = shape.leaves().len();
        (Just(shape), prop::collection::vec(leaf(), n)).prop_map(|(shape, strides)| {
            let flat = Tuple::Node(strides.into_iter().map(Tuple::Leaf).collect::<Vec<_>>());
            let stride = flat.unflatten(&shape).expect("same leaf count");
            Layout::new(shape, stride).expect("congruent")
        })
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_strings_never_panic(input in ".{0,96}") {
        eval_both(&input);
    }

    #[test]
    fn grammar_soup_never_panics(input in "[0-9MN_a-zS<>w(),:\\[\\] -]{0,64}") {
        eval_both(&input);
    }

    #[test]
    fn generated_expressions_never_panic(input in expr_text()) {
        eval_both(&input);
    }

    #[test]
    fn parse_errors_point_inside_the_input(input in ".{0,48}") {
        for r in [parse(&input), parse_exact(&input)] {
            if let Err(e) = r {
                prop_assert!(e.pos <= input.len());
            }
        }
    }

    #[test]
    fn algebra_on_random_layouts_never_panics(a in layout(), b in layout(), n in -3i64..=8) {
        let t = Tiler::Layout(b.clone());
        let by_mode = Tiler::Tuple(vec![Tiler::Layout(b.clone()), Tiler::Int(s(n)), Tiler::Underscore]);
        let _ = (a.size(), a.cosize(), a.to_string(), format!("{a:#}"));
        let _ = a.compose(&b);
        let _ = a.compose_tiler(&by_mode);
        let _ = a.complement(&IntTuple::from(n));
        let _ = a.complement(b.shape());
        let _ = a.complement_full();
        let _ = a.coalesce();
        let _ = a.coalesce_by(b.shape());
        let _ = a.filter_by(b.shape());
        let _ = a.filter();
        let _ = a.filter_zeros();
        let _ = a.left_inverse();
        let _ = a.right_inverse();
        for t in [&t, &by_mode] {
            let _ = a.logical_divide(t);
            let _ = a.zipped_divide(t);
            let _ = a.tiled_divide(t);
            let _ = a.flat_divide(t);
            let _ = a.logical_product(t);
            let _ = a.zipped_product(t);
            let _ = a.tiled_product(t);
            let _ = a.flat_product(t);
        }
        let _ = a.blocked_product(&b);
        let _ = a.raked_product(&b);
        let _ = a.tile_to_shape(b.shape(), None);
        let _ = a.upcast(n);
        let _ = a.downcast(n);
        let _ = a.max_common_vector(&b);
        let _ = a.max_common_layout(&b);
        let _ = a.layout_like();
        let _ = a.to_table();
        if let Ok(sw) = Swizzle::new(n as i32 % 4, 3, 3) {
            let _ = rcute_layout::composed::compose_with_swizzle(&a, &sw);
        }
    }
}

/// Deep nesting stays a typed error (bounded recursion), in every bracket kind.
#[test]
fn deep_nesting_is_an_error() {
    for open in ["(", "[", "size(", "composition(_,"] {
        let input = open.repeat(MAX_DEPTH + 8);
        assert!(eval_str(&input).is_err(), "{open}");
        assert!(eval_str_exact(&input).is_err(), "{open}");
    }
    // Just inside the bound, a well-formed nested tuple is accepted.
    let ok = format!("{}1{}", "(".repeat(MAX_DEPTH - 2), ")".repeat(MAX_DEPTH - 2));
    assert!(matches!(eval_str(&ok), Ok(Value::Shape(_))), "{ok}");
}

/// The panics fuzzing found (integer overflow in `make_layout_like`, `upcast` and the
/// divisibility checks, a table of zero rows and 2^40 columns) are typed results now.
#[test]
fn fuzz_findings_stay_fixed() {
    let lay = |sh: i64, st: i64| Layout::new(Tuple::Leaf(s(sh)), Tuple::Leaf(s(st))).unwrap();
    // make_layout_like with an i64::MAX stride: the order still ranks correctly.
    assert_eq!(lay(0, i64::MAX).layout_like().unwrap().to_string(), "0:1");
    // upcast of an i64::MIN stride: |stride| / N in range.
    let up = lay(4, i64::MIN).upcast(2).unwrap();
    assert_eq!(up.stride().to_string(), (i64::MIN / 2).to_string());
    // i64::MIN % -1 in the divisibility checks of composition.
    let _ = lay(2, -1).compose(&lay(0, i64::MIN));
    let _ = Layout::new(
        Tuple::Node(vec![Tuple::Leaf(s(-1)), Tuple::Leaf(s(2))]),
        Tuple::Node(vec![Tuple::Leaf(s(1)), Tuple::Leaf(s(1))]),
    )
    .unwrap()
    .compose(&lay(2, i64::MIN));
    // A table with no rows but 2^40 columns is refused, not printed.
    let wide = Layout::new(
        Tuple::Node(vec![Tuple::Leaf(s(0)), Tuple::Leaf(s(1 << 40))]),
        Tuple::Node(vec![Tuple::Leaf(s(1)), Tuple::Leaf(s(1))]),
    )
    .unwrap();
    assert!(wide.to_table().is_err());
}
