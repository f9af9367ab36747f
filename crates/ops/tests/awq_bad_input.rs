//! The AWQ ops' bad-input catalogue without a GPU: `validate_awq_dequantize` and
//! `validate_awq_gemm` give the typed error named here for each class the issue lists
//! (shapes that disagree, K not a multiple of G, an unsupported G, N not a multiple of 8,
//! misaligned pointers, wrong dtypes, M = 0) and a few more (strides, overlap, bounds, bias
//! length). The views describe fake device addresses; nothing is launched.
//! `tests/tests/gpu_awq_ops.rs` runs these classes through `Ops` and checks that nothing
//! is written.

use rcute_ops::awq::{validate_awq_dequantize, validate_awq_gemm, AwqTensors};
use rcute_ops::{DType, Geometry, MatrixMut, MatrixRef, OpsError, VectorRef};

const MIB: u64 = 1 << 20;

fn dense(base: u64, dtype: DType, rows: usize, cols: usize) -> Geometry {
    Geometry::dense(base * MIB, rows * cols, dtype, rows, cols)
}

fn r(g: Geometry) -> MatrixRef<'static> {
    // SAFETY: validation reads only the geometry; nothing is launched with these views.
    unsafe { MatrixRef::from_raw(g) }
}

fn w(g: Geometry) -> MatrixMut<'static> {
    // SAFETY: as in `r`.
    unsafe { MatrixMut::from_raw(g) }
}

fn v(base: u64, dtype: DType, len: usize) -> VectorRef<'static> {
    // SAFETY: as in `r`.
    unsafe { VectorRef::from_raw(base * MIB, len, dtype, len, None) }
}

/// A weight `[K, N]` in groups of `g` with scales of `t`, tensors 1 MiB apart.
fn weight(k: usize, n: usize, g: usize, t: DType) -> AwqTensors<'static> {
    AwqTensors {
        qweight: r(dense(1, DType::S32, k, n / 8)),
        scales: r(dense(2, t, k / g, n)),
        qzeros: r(dense(3, DType::S32, k / g, n / 8)),
        group: g,
    }
}

macro_rules! rejects {
    ($what:expr, $result:expr, $pattern:pat) => {{
        let result = $result;
        assert!(matches!(result, Err($pattern)), "{}: {result:?}", $what);
    }};
}

#[test]
fn dequantize_accepts_the_format_and_rejects_each_bad_input() {
    let ok = weight(256, 64, 128, DType::F16);
    let out = || w(dense(4, DType::F16, 256, 64));
    assert!(validate_awq_dequantize(&ok, &out()).is_ok());
    assert!(validate_awq_dequantize(&weight(96, 8, 96, DType::BF16), &w(dense(4, DType::BF16, 96, 8))).is_ok());
    for g in [32, 64, 128] {
        assert!(
            validate_awq_dequantize(&weight(256, 64, g, DType::F16), &out()).is_ok(),
            "G = {g}"
        );
    }
    // Shapes that disagree.
    let short_scales = AwqTensors {
        scales: r(dense(2, DType::F16, 1, 64)),
        ..ok
    };
    rejects!(
        "scales rows",
        validate_awq_dequantize(&short_scales, &out()),
        OpsError::Shape(_)
    );
    let wide_zeros = AwqTensors {
        qzeros: r(dense(3, DType::S32, 2, 16)),
        ..ok
    };
    rejects!(
        "qzeros cols",
        validate_awq_dequantize(&wide_zeros, &out()),
        OpsError::Shape(_)
    );
    rejects!(
        "out shape",
        validate_awq_dequantize(&ok, &w(dense(4, DType::F16, 256, 56))),
        OpsError::Shape(_)
    );
    // K not a multiple of G; unsupported G.
    let k_ragged = AwqTensors {
        qweight: r(dense(1, DType::S32, 200, 8)),
        ..ok
    };
    rejects!("K % G", validate_awq_dequantize(&k_ragged, &out()), OpsError::Shape(_));
    rejects!(
        "G = 16",
        validate_awq_dequantize(&AwqTensors { group: 16, ..ok }, &out()),
        OpsError::Shape(_)
    );
    rejects!(
        "G = 0",
        validate_awq_dequantize(&AwqTensors { group: 0, ..ok }, &out()),
        OpsError::Shape(_)
    );
    // N not a multiple of 8: scales of 60 columns never match N = 8 * (N / 8).
    let n60 = AwqTensors {
        scales: r(dense(2, DType::F16, 2, 60)),
        ..ok
    };
    rejects!(
        "N = 60",
        validate_awq_dequantize(&n60, &w(dense(4, DType::F16, 256, 60))),
        OpsError::Shape(_)
    );
    rejects!(
        "K = 0",
        validate_awq_dequantize(&weight(0, 64, 128, DType::F16), &out()),
        OpsError::Empty(_) | OpsError::Shape(_)
    );
    // Wrong dtypes.
    let f32_scales = AwqTensors {
        scales: r(dense(2, DType::F32, 2, 64)),
        ..ok
    };
    rejects!(
        "f32 scales",
        validate_awq_dequantize(&f32_scales, &out()),
        OpsError::DType(_)
    );
    let s8_q = AwqTensors {
        qweight: r(dense(1, DType::S8, 256, 8)),
        ..ok
    };
    rejects!("s8 qweight", validate_awq_dequantize(&s8_q, &out()), OpsError::DType(_));
    rejects!(
        "bf16 out",
        validate_awq_dequantize(&ok, &w(dense(4, DType::BF16, 256, 64))),
        OpsError::DType(_)
    );
    // Misaligned pointers.
    let mut s = dense(2, DType::F16, 2, 64);
    s.ptr += 2;
    rejects!(
        "scales +2 B",
        validate_awq_dequantize(&AwqTensors { scales: r(s), ..ok }, &out()),
        OpsError::Alignment { .. }
    );
    let mut o = dense(4, DType::F16, 256, 64);
    o.ptr += 8;
    rejects!(
        "out +8 B",
        validate_awq_dequantize(&ok, &w(o)),
        OpsError::Alignment { .. }
    );
    // Strides, bounds, overlap.
    let q_col = AwqTensors {
        qweight: r(dense(1, DType::S32, 256, 8).to_col_major()),
        ..ok
    };
    rejects!(
        "col-major qweight",
        validate_awq_dequantize(&q_col, &out()),
        OpsError::Strides { .. }
    );
    let mut q_short = dense(1, DType::S32, 256, 8);
    q_short.len -= 1;
    rejects!(
        "qweight past its buffer",
        validate_awq_dequantize(
            &AwqTensors {
                qweight: r(q_short),
                ..ok
            },
            &out()
        ),
        OpsError::OutOfBounds { .. }
    );
    rejects!(
        "out over qweight",
        validate_awq_dequantize(&ok, &w(dense(1, DType::F16, 256, 64))),
        OpsError::Strides { .. }
    );
}

#[test]
fn gemm_rejects_each_bad_input() {
    let (k, n) = (256, 64);
    let ok = weight(k, n, 128, DType::F16);
    let x = |m: usize| r(dense(5, DType::F16, m, k));
    let out = |m: usize| w(dense(6, DType::F16, m, n));
    let bias = v(7, DType::F16, n);
    assert!(validate_awq_gemm(&x(3), &ok, None, &out(3)).is_ok());
    assert_eq!(validate_awq_gemm(&x(1), &ok, Some(&bias), &out(1)).unwrap().m(), 1);
    rejects!(
        "M = 0",
        validate_awq_gemm(&x(0), &ok, None, &out(0)),
        OpsError::Empty(_)
    );
    rejects!(
        "x K",
        validate_awq_gemm(&r(dense(5, DType::F16, 3, 128)), &ok, None, &out(3)),
        OpsError::Shape(_)
    );
    rejects!(
        "out M",
        validate_awq_gemm(&x(3), &ok, None, &out(4)),
        OpsError::Shape(_)
    );
    rejects!(
        "bias length",
        validate_awq_gemm(&x(3), &ok, Some(&v(7, DType::F16, 32)), &out(3)),
        OpsError::VectorLength { .. }
    );
    rejects!(
        "bf16 x",
        validate_awq_gemm(&r(dense(5, DType::BF16, 3, k)), &ok, None, &out(3)),
        OpsError::DType(_)
    );
    rejects!(
        "f32 out",
        validate_awq_gemm(&x(3), &ok, None, &w(dense(6, DType::F32, 3, n))),
        OpsError::DType(_)
    );
    rejects!(
        "bf16 bias",
        validate_awq_gemm(&x(3), &ok, Some(&v(7, DType::BF16, n)), &out(3)),
        OpsError::DType(_)
    );
    let mut xm = dense(5, DType::F16, 3, k);
    xm.ptr += 4;
    rejects!(
        "x +4 B",
        validate_awq_gemm(&r(xm), &ok, None, &out(3)),
        OpsError::Alignment { .. }
    );
    let x_ld = r(dense(5, DType::F16, 3, k * 2)).strides(k as i64 + 4, 1);
    let x_ld = r(Geometry { cols: k, ..x_ld.geo() });
    rejects!(
        "x ld not 16 B",
        validate_awq_gemm(&x_ld, &ok, None, &out(3)),
        OpsError::Alignment { .. }
    );
    // G = K = 20: a legal weight whose K is not a multiple of 8.
    let odd = weight(20, n, 20, DType::F16);
    rejects!(
        "K = 20",
        validate_awq_gemm(&r(dense(5, DType::F16, 2, 20)), &odd, None, &out(2)),
        OpsError::Alignment { .. }
    );
    rejects!(
        "out over x",
        validate_awq_gemm(&x(3), &ok, None, &w(dense(5, DType::F16, 3, n))),
        OpsError::Strides { .. }
    );
    rejects!(
        "col-major x",
        validate_awq_gemm(&r(dense(5, DType::F16, 3, k).to_col_major()), &ok, None, &out(3)),
        OpsError::Strides { .. }
    );
    rejects!(
        "weight G = 48",
        validate_awq_gemm(&x(3), &AwqTensors { group: 48, ..ok }, None, &out(3)),
        OpsError::Shape(_)
    );
}
