//! The epilogue fusion tree on the CPU: validation errors, names, parameter order, the
//! reference evaluation on hand-computed values (activations, clamp, conversions), the
//! packed parameter bytes, and snapshots of the generated C++.

use rcute_atom::Element;
use rcute_collective::fusion::MAX_DEPTH;
use rcute_collective::{
    decode_element, encode_element, round_to_element, ArgValue, ComputeOp, Fusion, FusionArgs, FusionError, HostInputs,
    Node, ParamKind, ScaleKind,
};

fn names(f: &Fusion) -> Vec<String> {
    f.params().into_iter().map(|p| p.name).collect()
}

/// The tree of the third snapshot: per-token / per-channel scales, a batched column
/// broadcast, a residual aux load, a bf16 aux store of the pre-activation, GELU, a clamp,
/// a per-tensor output scale and an e4m3 conversion.
fn deep_tree() -> Node {
    let scaled = Node::fma(
        Node::col_broadcast("a_scale", Element::F32, true),
        Node::row_broadcast("b_scale", Element::F32, false) * Node::acc(),
        Node::row_broadcast("bias", Element::BF16, false),
    );
    let pre = (scaled + Node::aux_load("residual", Element::BF16) + Node::scalar("beta") * Node::source())
        .store("pre_act", Element::BF16);
    (pre.gelu().clamp(-448.0, 448.0) * Node::scalar_ptr("out_scale", Element::F32)).convert(Element::E4M3)
}

#[test]
fn validation_errors() {
    let bad_name = |n: &str| Fusion::new(Node::scalar(n)).unwrap_err();
    for n in ["", "1x", "a-b", "ü", "int", "float", "__x", "_Big", &"x".repeat(65)] {
        assert!(matches!(bad_name(n), FusionError::InvalidName { .. }), "{n:?}");
    }
    assert!(Fusion::new(Node::scalar("_ok_1")).is_ok());

    // Two different leaves with one name.
    let e = Fusion::new(Node::scalar("x") * Node::aux_load("x", Element::BF16)).unwrap_err();
    assert!(
        matches!(e, FusionError::DuplicateName { ref name, .. } if name == "x"),
        "{e}"
    );
    let e = Fusion::new(Node::row_broadcast("v", Element::F32, false) * Node::row_broadcast("v", Element::F32, true))
        .unwrap_err();
    assert!(matches!(e, FusionError::DuplicateName { .. }));
    // The same leaf twice is one parameter.
    let x = Node::aux_load("x", Element::F16);
    let f = Fusion::new(x.clone() * x.sigmoid()).unwrap();
    assert_eq!(names(&f), ["x", "x_ld", "x_batch_stride"]);
    // Two stores with one name.
    let e = Fusion::new(Node::acc().store("o", Element::F32).store("o", Element::F32)).unwrap_err();
    assert!(matches!(e, FusionError::DuplicateName { .. }));
    // Generated field names colliding with a scalar.
    let e = Fusion::new(Node::aux_load("x", Element::F32) + Node::scalar("x_ld")).unwrap_err();
    assert!(
        matches!(e, FusionError::DuplicateName { ref name, .. } if name == "x_ld"),
        "{e}"
    );

    // Arity.
    let arity = |op, n: usize| Fusion::new(Node::compute(op, vec![Node::acc(); n])).unwrap_err();
    assert_eq!(
        arity(ComputeOp::Multiply, 1),
        FusionError::Arity {
            op: "multiply".into(),
            expected: "2 or more".into(),
            got: 1
        }
    );
    assert!(matches!(
        arity(ComputeOp::MultiplyAdd, 2),
        FusionError::Arity { got: 2, .. }
    ));
    assert!(matches!(arity(ComputeOp::Subtract, 3), FusionError::Arity { .. }));
    assert!(matches!(arity(ComputeOp::ReLU, 2), FusionError::Arity { .. }));
    assert!(matches!(arity(ComputeOp::Gelu, 0), FusionError::Arity { .. }));
    assert!(Fusion::new(Node::compute(ComputeOp::Add, vec![Node::acc(); 4])).is_ok());

    // Element types.
    for e in [Element::B128, Element::F64, Element::TF32, Element::U64, Element::S16] {
        let err = Fusion::new(Node::row_broadcast("v", e, false)).unwrap_err();
        assert!(
            matches!(err, FusionError::UnsupportedElement { elem, .. } if elem == e),
            "{err}"
        );
        assert!(Fusion::new(Node::acc().convert(e)).is_err());
        assert!(Fusion::new(Node::acc().store("o", e)).is_err());
    }
    for e in [
        Element::F32,
        Element::BF16,
        Element::F16,
        Element::E4M3,
        Element::E5M2,
        Element::S8,
        Element::U8,
        Element::S32,
    ] {
        assert!(Fusion::new(Node::aux_load("x", e).convert(e).store("o", e)).is_ok());
    }

    // Clamp bounds.
    assert_eq!(
        Fusion::new(Node::acc().clamp(1.0, -1.0)).unwrap_err(),
        FusionError::InvalidClamp { lo: 1.0, hi: -1.0 }
    );
    assert!(matches!(
        Fusion::new(Node::acc().clamp(f32::NAN, 1.0)).unwrap_err(),
        FusionError::InvalidClamp { .. }
    ));
    assert!(Fusion::new(Node::acc().clamp(f32::NEG_INFINITY, 0.0)).is_ok());

    // Depth.
    let mut deep = Node::acc();
    for _ in 0..MAX_DEPTH {
        deep = deep.relu();
    }
    assert_eq!(Fusion::new(deep).unwrap_err(), FusionError::TooDeep { max: MAX_DEPTH });

    // Scale kinds and names.
    assert!(matches!(
        Fusion::scaled_mm(ScaleKind::PerCol, ScaleKind::Scalar, None),
        Err(FusionError::ScaleKind { operand: "A", .. })
    ));
    assert!(matches!(
        Fusion::scaled_mm(ScaleKind::Scalar, ScaleKind::PerRow, None),
        Err(FusionError::ScaleKind { operand: "B", .. })
    ));
    assert!(Fusion::scaled_mm(ScaleKind::Scalar, ScaleKind::Scalar, Some(Element::B128)).is_err());
    assert!(Fusion::linear_combination().with_name("a b").is_err());
    assert!(Fusion::linear_combination().emit("9epi").is_err());
}

#[test]
fn names_and_descriptions() {
    let lc = Fusion::linear_combination();
    assert_eq!(lc.name(), "lincomb");
    assert_eq!(lc.describe(), "multiply_add(beta, C, multiply(alpha, acc))");
    assert_eq!(Fusion::default(), lc);
    use ScaleKind::*;
    let cases = [
        (
            Scalar,
            Scalar,
            None,
            "scaledmm_tensortensor",
            "multiply(*a_scale:f32, multiply(*b_scale:f32, acc))",
        ),
        (
            PerRow,
            PerCol,
            None,
            "scaledmm_rowcol",
            "multiply(col(a_scale:f32), multiply(row(b_scale:f32), acc))",
        ),
        (
            PerRow,
            PerCol,
            Some(Element::BF16),
            "scaledmm_rowcol_bias_bf16",
            "multiply_add(col(a_scale:f32), multiply(row(b_scale:f32), acc), row(bias:bf16))",
        ),
        (
            Scalar,
            PerCol,
            Some(Element::F16),
            "scaledmm_tensorcol_bias_f16",
            "multiply_add(*a_scale:f32, multiply(row(b_scale:f32), acc), row(bias:f16))",
        ),
        (
            PerRow,
            Scalar,
            None,
            "scaledmm_rowtensor",
            "multiply(col(a_scale:f32), multiply(*b_scale:f32, acc))",
        ),
    ];
    for (a, b, bias, name, desc) in cases {
        let f = Fusion::scaled_mm(a, b, bias).unwrap();
        assert_eq!(f.name(), name);
        assert_eq!(f.describe(), desc);
        assert!(!f.reads_source());
    }
    // Generic trees: a deterministic hash of the tree.
    let f = Fusion::new(deep_tree()).unwrap();
    assert_eq!(f.name(), Fusion::new(deep_tree()).unwrap().name());
    assert!(f.name().starts_with("evt_") && f.name().len() == 12, "{}", f.name());
    assert_ne!(f.name(), Fusion::new(deep_tree().relu()).unwrap().name());
    assert_eq!(f.clone().with_name("mine").unwrap().name(), "mine");
    assert_eq!(
        f.describe(),
        "convert<e4m3>(multiply(clamp[-448.0,448.0](gelu(store(pre_act:bf16, add(add(multiply_add(col(a_scale:f32,batched), \
         multiply(row(b_scale:f32), acc), row(bias:bf16)), aux(residual:bf16)), multiply(beta, C))))), *out_scale:f32))"
    );
    assert_eq!((-(Node::acc() - Node::source())).describe(), "negate(subtract(acc, C))");
}

#[test]
fn params_and_source() {
    let lc = Fusion::linear_combination();
    assert_eq!(names(&lc), ["alpha", "beta"]);
    assert!(lc.params().iter().all(|p| p.kind == ParamKind::F32));
    assert!(lc.reads_source());
    assert_eq!(lc.emit("epi").unwrap().source_needed, "p.beta != 0.0f");
    let args = FusionArgs::new().f32("alpha", 1.0).f32("beta", 0.0);
    assert!(!lc.needs_source(&args).unwrap());
    assert!(lc.needs_source(&args.clone().f32("beta", -0.5)).unwrap());

    let f = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    assert_eq!(names(&f), ["a_scale", "b_scale", "bias"]);
    assert_eq!(
        f.params()[2].kind,
        ParamKind::Ptr {
            elem: Element::BF16,
            writable: false
        }
    );
    assert_eq!(f.params()[2].kind.cpp_type(), "const __nv_bfloat16*");
    assert_eq!(f.emit("x").unwrap().source_needed, "false");

    let f = Fusion::new(deep_tree()).unwrap();
    assert_eq!(
        names(&f),
        [
            "a_scale",
            "a_scale_batch_stride",
            "b_scale",
            "beta",
            "bias",
            "out_scale",
            "pre_act",
            "pre_act_ld",
            "pre_act_batch_stride",
            "residual",
            "residual_ld",
            "residual_batch_stride"
        ]
    );
    let kinds: Vec<String> = f.params().iter().map(|p| p.kind.cpp_type()).collect();
    assert_eq!(kinds[6], "__nv_bfloat16*");
    assert_eq!(kinds[1], "long long");
    assert_eq!(f.emit("x").unwrap().source_needed, "p.beta != 0.0f");

    // A source that is not multiplied by a scalar is always read.
    let f = Fusion::new(Node::acc() + Node::source()).unwrap();
    assert_eq!(f.emit("x").unwrap().source_needed, "true");
    let f = Fusion::new(Node::scalar("s") * Node::source() + Node::scalar("t") * Node::source().relu()).unwrap();
    assert_eq!(f.emit("x").unwrap().source_needed, "true");
    let f = Fusion::new(Node::scalar("t") * Node::source() + Node::source() * Node::scalar("s")).unwrap();
    assert_eq!(f.emit("x").unwrap().source_needed, "p.s != 0.0f || p.t != 0.0f");
    for (k, v) in [(0.0, false), (2.0, true)] {
        let a = FusionArgs::new().f32("s", 0.0).f32("t", k);
        assert_eq!(f.needs_source(&a).unwrap(), v);
    }
    let f = Fusion::new(Node::acc().silu()).unwrap();
    assert!(!f.reads_source());
    assert!(f.params().is_empty());
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn eval_hand_computed() {
    let lc = Fusion::linear_combination();
    let host = HostInputs::new(1, 2, 1)
        .with_acc(vec![3.0, -1.0])
        .with_c(vec![4.0, f64::NAN]);
    let args = FusionArgs::new().f32("alpha", 2.0).f32("beta", 0.5);
    assert_eq!(lc.eval(&args, &host, 0, 0, 0).unwrap(), 8.0);
    // beta = 0: C is not read (a NaN in C does not leak), as on the device.
    let args0 = FusionArgs::new().f32("alpha", 2.0).f32("beta", 0.0);
    assert_eq!(lc.eval(&args0, &host, 0, 1, 0).unwrap(), -2.0);
    assert!(lc.eval(&args, &host, 0, 1, 0).unwrap().is_nan());
    // C is only required when it is read.
    let no_c = HostInputs::new(1, 2, 1).with_acc(vec![3.0, -1.0]);
    assert_eq!(lc.eval(&args0, &no_c, 0, 0, 0).unwrap(), 6.0);
    assert_eq!(
        lc.eval(&args, &no_c, 0, 0, 0).unwrap_err(),
        FusionError::MissingHostInput { name: "c".into() }
    );
    assert!(matches!(
        lc.eval(&args, &host, 1, 0, 0),
        Err(FusionError::HostIndex { .. })
    ));
    assert_eq!(
        lc.eval(&FusionArgs::new().f32("alpha", 1.0), &host, 0, 0, 0)
            .unwrap_err(),
        FusionError::MissingArg { name: "beta".into() }
    );
    assert!(matches!(
        lc.eval(&FusionArgs::new().f32("alpha", 1.0).i64("beta", 0), &host, 0, 0, 0),
        Err(FusionError::ArgType {
            expected: "f32",
            got: "i64",
            ..
        })
    ));

    // scaled_mm, per-row / per-col with bias: acc * a[m] * b[n] + bias[n].
    let f = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    let host = HostInputs::new(2, 3, 1)
        .with_acc(vec![1.0, 2.0, 3.0, 4.0, 5.0, 10.0])
        .with_tensor("a_scale", vec![0.25, 0.5])
        .with_tensor("b_scale", vec![1.0, 2.0, 3.0])
        .with_tensor("bias", vec![0.0, 0.5, 1.0]);
    assert_eq!(
        f.eval(&FusionArgs::new(), &host, 1, 2, 0).unwrap(),
        10.0 * 0.5 * 3.0 + 1.0
    );
    assert_eq!(
        f.eval(&FusionArgs::new(), &host, 0, 1, 0).unwrap(),
        2.0 * 0.25 * 2.0 + 0.5
    );
    let f = Fusion::scaled_mm(ScaleKind::Scalar, ScaleKind::Scalar, None).unwrap();
    let host = host.with_tensor("a_scale", vec![0.5]).with_tensor("b_scale", vec![4.0]);
    assert_eq!(f.eval(&FusionArgs::new(), &host, 1, 1, 0).unwrap(), 10.0);
    assert_eq!(
        f.eval(
            &FusionArgs::new(),
            &HostInputs::new(2, 3, 1).with_acc(vec![0.0; 6]),
            0,
            0,
            0
        )
        .unwrap_err(),
        FusionError::MissingHostInput { name: "a_scale".into() }
    );

    // Activations on acc.
    let act = |node: Node, x: f64| {
        let f = Fusion::new(node).unwrap();
        f.eval(&FusionArgs::new(), &HostInputs::new(1, 1, 1).with_acc(vec![x]), 0, 0, 0)
            .unwrap()
    };
    let acc = Node::acc;
    assert!(close(act(acc().gelu(), 1.0), 0.8413447460685429));
    assert!(close(act(acc().gelu(), -2.0), -0.04550026389635842));
    assert!(close(act(acc().gelu(), 0.5), 0.34573123063700656));
    assert_eq!(act(acc().gelu(), 0.0), 0.0);
    assert!(close(act(acc().gelu_tanh(), 1.0), 0.8411919906082768));
    assert!(close(act(acc().silu(), 1.0), 0.7310585786300049));
    assert!(close(act(acc().silu(), -3.0), -0.14227761953270035));
    assert!(close(act(acc().sigmoid(), 0.0), 0.5));
    assert!(close(act(acc().sigmoid(), 2.0), 0.8807970779778823));
    assert_eq!(act(acc().relu(), -3.0), 0.0);
    assert_eq!(act(acc().relu(), 3.0), 3.0);
    assert_eq!(act(acc().relu(), f64::NAN), 0.0); // fmaxf
    assert_eq!(act(acc().clamp(-1.0, 2.0), 5.0), 2.0);
    assert_eq!(act(acc().clamp(-1.0, 2.0), -5.0), -1.0);
    assert_eq!(act(acc().clamp(-1.0, 2.0), 0.25), 0.25);
    assert_eq!(act(acc().clamp(-1.0, 2.0), f64::NAN), -1.0);
    assert_eq!(act(acc().clamp(f32::NEG_INFINITY, 2.0), -1e30), -1e30f32 as f64);
    assert_eq!(act(-acc(), 2.0), -2.0);
    // The accumulator is a float: an f64 input is rounded to f32 first.
    assert_eq!(act(acc(), 0.1), 0.1f32 as f64);

    // Conversions: round to nearest even in the type, then back.
    let bf16 = |x: f64| act(acc().convert(Element::BF16), x);
    assert_eq!(bf16(1.0 + 1.0 / 256.0), 1.0); // tie -> even
    assert_eq!(bf16(1.0 + 3.0 / 256.0), 1.015625); // tie -> even (up)
    assert_eq!(bf16(1.0 + 1.0 / 256.0 + 1.0 / 4096.0), 1.0078125);
    assert_eq!(bf16(3.140625), 3.140625);
    assert_eq!(bf16(1.234567), 1.234375);
    assert_eq!(bf16(-3.15), -3.15625);
    assert!(bf16(f32::MAX as f64).is_infinite());
    let f16 = |x: f64| act(acc().convert(Element::F16), x);
    assert_eq!(f16(65519.0), 65504.0);
    assert_eq!(f16(65520.0), f64::INFINITY);
    assert_eq!(f16(1e-8), 0.0);
    assert_eq!(f16(6e-8), 2f64.powi(-24)); // the smallest subnormal
    assert_eq!(f16(1.0 / 3.0), 0.333251953125);
    let e4m3 = |x: f64| act(acc().convert(Element::E4M3), x);
    assert_eq!(e4m3(0.3), 0.3125);
    assert_eq!(e4m3(470.0), 448.0);
    assert_eq!(e4m3(-1e6), -448.0);
    assert_eq!(e4m3(f64::INFINITY), 448.0);
    assert!(e4m3(f64::NAN).is_nan());
    assert_eq!(e4m3(2f64.powi(-10)), 0.0); // half the smallest subnormal, tie -> 0
    assert_eq!(e4m3(1.5 * 2f64.powi(-9)), 2f64.powi(-8));
    let e5m2 = |x: f64| act(acc().convert(Element::E5M2), x);
    assert_eq!(e5m2(0.3), 0.3125);
    assert_eq!(e5m2(60000.0), 57344.0);
    assert_eq!(e5m2(f64::NEG_INFINITY), -57344.0);
    let s8 = |x: f64| act(acc().convert(Element::S8), x);
    assert_eq!(
        (s8(2.5), s8(3.5), s8(-2.5), s8(-200.0), s8(300.0), s8(f64::NAN)),
        (2.0, 4.0, -2.0, -128.0, 127.0, 0.0)
    );
    let u8_ = |x: f64| act(acc().convert(Element::U8), x);
    assert_eq!((u8_(-3.0), u8_(254.5), u8_(1e9)), (0.0, 254.0, 255.0));
    let s32 = |x: f64| act(acc().convert(Element::S32), x);
    assert_eq!((s32(7.5), s32(-1e12)), (8.0, -2147483648.0));
    assert_eq!(act(acc().convert(Element::F32), 0.1), 0.1f32 as f64);

    // Stores round; the value passes on unrounded.
    let f = Fusion::new(Node::acc().store("o", Element::BF16).relu()).unwrap();
    let a = FusionArgs::new().i64("o_ld", 1).i64("o_batch_stride", 1);
    let (v, stores) = f
        .eval_with_stores(&a, &HostInputs::new(1, 1, 1).with_acc(vec![-1.234567]), 0, 0, 0)
        .unwrap();
    assert_eq!(v, 0.0);
    assert_eq!(stores, vec![("o".to_string(), -1.234375)]);
    assert!(matches!(
        f.eval(
            &FusionArgs::new(),
            &HostInputs::new(1, 1, 1).with_acc(vec![1.0]),
            0,
            0,
            0
        ),
        Err(FusionError::MissingArg { .. })
    ));

    // Batched broadcasts and aux matrices follow the device's index arithmetic.
    let f = Fusion::new(
        Node::col_broadcast("s", Element::F16, true) * Node::aux_load("x", Element::S8) - Node::scalar("t"),
    )
    .unwrap();
    let a = FusionArgs::new()
        .i64("s_batch_stride", 4)
        .f32("t", 0.5)
        .i64("x_ld", 5)
        .i64("x_batch_stride", 100);
    let x: Vec<f64> = (0..200).map(|i| (i % 50) as f64).collect();
    let host = HostInputs::new(2, 3, 2)
        .with_acc(vec![0.0; 12])
        .with_tensor("s", vec![1.0, 2.0, 0.0, 0.0, 3.0, 4.0])
        .with_tensor("x", x);
    // l = 1, m = 1, n = 2: s[1 + 4] * x[100 + 5 + 2] - t.
    assert_eq!(f.eval(&a, &host, 1, 2, 1).unwrap(), 4.0 * 7.0 - 0.5);
    let short = host.clone().with_tensor("s", vec![1.0, 2.0]);
    assert!(matches!(
        f.eval(&a, &short, 1, 2, 1),
        Err(FusionError::HostIndex { index: 5, len: 2, .. })
    ));

    // The deep tree, at one point: e4m3(clamp(gelu(a*b*acc + bias + res + beta*c)) * out_scale).
    let f = Fusion::new(deep_tree()).unwrap();
    let a = FusionArgs::new()
        .i64("a_scale_batch_stride", 0)
        .f32("beta", 0.5)
        .i64("pre_act_ld", 1)
        .i64("pre_act_batch_stride", 1)
        .i64("residual_ld", 1)
        .i64("residual_batch_stride", 1);
    let host = HostInputs::new(1, 1, 1)
        .with_acc(vec![2.0])
        .with_c(vec![1.0])
        .with_tensor("a_scale", vec![0.5])
        .with_tensor("b_scale", vec![3.0])
        .with_tensor("bias", vec![-2.75])
        .with_tensor("residual", vec![0.25])
        .with_tensor("out_scale", vec![16.0]);
    // pre = 0.5 * (3 * 2) - 2.75 + 0.25 + 0.5 * 1 = 1, gelu(1) * 16 = 13.46 -> e4m3 13.
    let (v, stores) = f.eval_with_stores(&a, &host, 0, 0, 0).unwrap();
    assert_eq!(
        v,
        round_to_element(Element::E4M3, (0.8413447460685429 * 16.0) as f32) as f64
    );
    assert_eq!(v, 13.0);
    assert_eq!(stores, vec![("pre_act".to_string(), 1.0)]);
}

#[test]
fn element_bytes_round_trip() {
    let cases: [(Element, f32, &[u8]); 12] = [
        (Element::BF16, 1.0, &[0x80, 0x3f]),
        (Element::BF16, -2.0, &[0x00, 0xc0]),
        (Element::F16, 1.0, &[0x00, 0x3c]),
        (Element::F16, 65520.0, &[0x00, 0x7c]),
        (Element::E4M3, 1.0, &[0x38]),
        (Element::E4M3, -448.0, &[0xfe]),
        (Element::E4M3, 2f32.powi(-9), &[0x01]),
        (Element::E5M2, 1.0, &[0x3c]),
        (Element::E5M2, 57344.0, &[0x7b]),
        (Element::S8, -3.0, &[0xfd]),
        (Element::U8, 200.0, &[200]),
        (Element::S32, -2.0, &[0xfe, 0xff, 0xff, 0xff]),
    ];
    for (e, x, bytes) in cases {
        assert_eq!(encode_element(e, x).unwrap(), bytes, "{e} {x}");
        assert_eq!(
            decode_element(e, bytes).unwrap(),
            round_to_element(e, x) as f64,
            "{e} {x}"
        );
    }
    // Every e4m3 / e5m2 / bf16-ish pattern decodes to a value that encodes back to it.
    for e in [Element::E4M3, Element::E5M2] {
        for b in 0..=255u8 {
            let v = decode_element(e, &[b]).unwrap();
            if v.is_nan() || v.is_infinite() {
                continue;
            }
            assert_eq!(encode_element(e, v as f32).unwrap(), [b], "{e} {b:#x} = {v}");
        }
    }
    for bits in (0..=0xffffu32).step_by(7) {
        let b = (bits as u16).to_le_bytes();
        for e in [Element::BF16, Element::F16] {
            let v = decode_element(e, &b).unwrap();
            if v.is_finite() {
                assert_eq!(encode_element(e, v as f32).unwrap(), b, "{e} {bits:#x}");
            }
        }
    }
    assert!(encode_element(Element::F64, 1.0).is_err());
    assert!(decode_element(Element::F16, &[1]).is_err());
}

#[test]
fn pack_layout_and_errors() {
    let lc = Fusion::linear_combination();
    let bytes = FusionArgs::new().f32("alpha", 1.5).f32("beta", -2.0).pack(&lc).unwrap();
    assert_eq!(bytes, [0, 0, 0xc0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0]);

    let f = Fusion::new(deep_tree()).unwrap();
    let args = FusionArgs::new()
        .ptr("a_scale", 0x1000)
        .i64("a_scale_batch_stride", -1)
        .ptr("b_scale", 0x2000)
        .f32("beta", 1.0)
        .ptr("bias", 0x3002)
        .ptr("out_scale", 0x4004)
        .ptr("pre_act", 0x5000)
        .i64("pre_act_ld", 64)
        .i64("pre_act_batch_stride", 1 << 40)
        .ptr("residual", 0x6000)
        .i64("residual_ld", 32)
        .i64("residual_batch_stride", 0);
    let bytes = args.pack(&f).unwrap();
    assert_eq!(bytes.len(), 12 * 8);
    let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
    assert_eq!(word(0), 0x1000);
    assert_eq!(word(1), u64::MAX);
    assert_eq!(word(3), 1.0f32.to_bits() as u64);
    assert_eq!(word(4), 0x3002);
    assert_eq!(word(8), 1 << 40);
    assert_eq!(word(9), 0x6000);

    let missing = FusionArgs::new()
        .ptr("a_scale", 0x1000)
        .i64("a_scale_batch_stride", 0)
        .f32("beta", 0.0);
    assert_eq!(
        missing.pack(&f).unwrap_err(),
        FusionError::MissingArg { name: "b_scale".into() }
    );
    let extra = args.clone().f32("gamma", 1.0);
    assert_eq!(
        extra.pack(&f).unwrap_err(),
        FusionError::UnknownArg { name: "gamma".into() }
    );
    let mut wrong = args.clone();
    wrong.set("beta", ArgValue::Ptr(8));
    assert_eq!(
        wrong.pack(&f).unwrap_err(),
        FusionError::ArgType {
            name: "beta".into(),
            expected: "f32",
            got: "pointer"
        }
    );
    let wrong = args.clone().f32("pre_act_ld", 1.0);
    assert!(matches!(
        wrong.pack(&f),
        Err(FusionError::ArgType {
            expected: "i64",
            got: "f32",
            ..
        })
    ));
    let wrong = args.clone().i64("bias", 0x3000);
    assert!(matches!(
        wrong.pack(&f),
        Err(FusionError::ArgType {
            expected: "pointer",
            got: "i64",
            ..
        })
    ));
    let null = args.clone().ptr("bias", 0);
    assert_eq!(
        null.pack(&f).unwrap_err(),
        FusionError::NullPointer { name: "bias".into() }
    );
    let odd = args.clone().ptr("bias", 0x3001);
    assert_eq!(
        odd.pack(&f).unwrap_err(),
        FusionError::Misaligned {
            name: "bias".into(),
            ptr: 0x3001,
            align: 2
        }
    );
    assert!(args.ptr("out_scale", 0x4002).pack(&f).is_err());
    assert_eq!(
        FusionArgs::new().pack(&Fusion::new(Node::acc()).unwrap()).unwrap(),
        Vec::<u8>::new()
    );
}

fn snapshot_text(f: &Fusion, prefix: &str) -> String {
    let c = f.emit(prefix).unwrap();
    assert_eq!(c.fn_name, format!("{prefix}_visit"));
    assert_eq!(c.struct_name, format!("{prefix}_params"));
    assert_eq!(c, f.emit(prefix).unwrap(), "deterministic");
    format!(
        "{}\n{}\n// source_needed: {}\n",
        c.params_struct, c.device_fn, c.source_needed
    )
}

#[test]
fn emitted_linear_combination() {
    insta::assert_snapshot!(snapshot_text(&Fusion::linear_combination(), "epi"));
}

#[test]
fn emitted_scaled_mm_rowcol_bias() {
    let f = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    insta::assert_snapshot!(snapshot_text(&f, "smm"));
}

#[test]
fn emitted_deep_tree() {
    let f = Fusion::new(deep_tree()).unwrap().with_name("deep").unwrap();
    insta::assert_snapshot!(snapshot_text(&f, "evt"));
}

#[test]
fn emitted_code_uses_only_the_cuda_type_headers() {
    let every = Node::compute(
        ComputeOp::Add,
        [
            Element::F32,
            Element::BF16,
            Element::F16,
            Element::E4M3,
            Element::E5M2,
            Element::S8,
            Element::U8,
            Element::S32,
        ]
        .into_iter()
        .enumerate()
        .map(|(i, e)| Node::aux_load(format!("x{i}"), e).convert(e).store(format!("y{i}"), e))
        .collect(),
    );
    let c = Fusion::new(every).unwrap().emit("all").unwrap().source();
    for banned in ["int8_t", "int32_t", "uint8_t", "int64_t", "#include", "std::"] {
        assert!(!c.contains(banned), "{banned} in\n{c}");
    }
    assert!(
        c.contains("__ldg(reinterpret_cast<const unsigned char*>(p.x3) + ("),
        "{c}"
    );
    assert!(c.contains("p.y5[(long long)l * p.y5_batch_stride + (long long)m * p.y5_ld + n] = (signed char)max(-128"));
}
