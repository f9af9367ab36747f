//! rcute-candle's checks on candle tensors: bad element types, shapes, layouts and CPU
//! tensors are candle errors with rcute's message (no GPU needed; every tensor is on the
//! CPU, where validation runs the same way).

use candle_core::{DType, Device, Tensor};
use rcute_candle::{awq_dequantize, awq_gemm, fused_moe, matmul, scaled_mm, AwqWeight, MoeOptions, MoeRouting};

fn zeros(dims: &[usize], dt: DType) -> Tensor {
    Tensor::zeros(dims, dt, &Device::Cpu).unwrap()
}

/// The error message of `r`, which must be an error.
fn err(r: candle_core::Result<Tensor>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got a {:?} tensor", t.dims()),
        Err(e) => e.to_string(),
    }
}

fn assert_has(msg: &str, want: &str) {
    assert!(msg.contains(want), "`{msg}` does not contain `{want}`");
    assert!(msg.starts_with("rcute: "), "`{msg}` is not rcute's message");
}

/// A matrix whose rows and columns are both strided (every other element of a row).
fn strided(rows: usize, cols: usize, dt: DType) -> Tensor {
    let t = zeros(&[rows, cols, 2], dt).narrow(2, 0, 1).unwrap().squeeze(2).unwrap();
    assert_eq!(t.stride(), &[2 * cols, 2]);
    t
}

#[test]
fn matmul_rejects_element_types() {
    let a = zeros(&[64, 64], DType::U32);
    assert_has(&err(matmul(&a, &a)), "unsupported element types");
    let (a, b) = (zeros(&[64, 64], DType::BF16), zeros(&[64, 64], DType::F16));
    assert_has(&err(matmul(&a, &b)), "unsupported element types");
}

#[test]
fn matmul_rejects_shapes() {
    let (a, b) = (zeros(&[64, 32], DType::BF16), zeros(&[48, 64], DType::BF16));
    assert_has(&err(matmul(&a, &b)), "shape mismatch");
    let four = zeros(&[2, 2, 64, 64], DType::BF16);
    assert_has(&err(matmul(&four, &b)), "shape mismatch");
    let (a3, b3) = (zeros(&[2, 64, 64], DType::BF16), zeros(&[3, 64, 64], DType::BF16));
    assert_has(&err(matmul(&a3, &b3)), "shape mismatch");
}

#[test]
fn matmul_rejects_layouts_and_takes_transposes() {
    let b = zeros(&[64, 64], DType::BF16);
    assert_has(&err(matmul(&strided(64, 64, DType::BF16), &b)), "unsupported strides for A");
    // A transposed (column-major) weight is a valid operand: only the device is refused.
    let w = zeros(&[64, 64], DType::BF16).t().unwrap();
    assert!(!w.is_contiguous());
    assert_has(&err(matmul(&b, &w)), "A is on the cpu");
}

#[test]
fn cpu_tensors_are_refused_after_validation() {
    let (a, b) = (zeros(&[64, 32], DType::BF16), zeros(&[32, 64], DType::BF16));
    assert_has(&err(matmul(&a, &b)), "A is on the cpu: rcute's ops run on CUDA tensors");
    let c = zeros(&[64, 64], DType::BF16);
    assert_has(&err(rcute_candle::gemm(&a, &b, Some(&c), 1.0, 1.0)), "A is on the cpu");
    assert_has(&err(rcute_candle::gemm(&a, &b, Some(&c), f32::NAN, 1.0)), "not finite");
}

fn awq(k: usize, n: usize, g: usize, scales: DType) -> AwqWeight {
    AwqWeight {
        qweight: zeros(&[k, n / 8], DType::I32),
        scales: zeros(&[k / g, n], scales),
        qzeros: zeros(&[k / g, n / 8], DType::I32),
        group: g,
    }
}

#[test]
fn awq_rejects_bad_weights() {
    let w = awq(256, 64, 128, DType::F16);
    assert_has(&err(awq_dequantize(&w)), "qweight is on the cpu");
    let bad_type = awq(256, 64, 128, DType::F32);
    assert!(err(awq_dequantize(&bad_type)).starts_with("rcute: "));
    let bad_group = AwqWeight { group: 96, ..w.clone() };
    assert_has(&err(awq_dequantize(&bad_group)), "group size 96");
    let transposed = AwqWeight {
        qweight: zeros(&[8, 256], DType::I32).t().unwrap(),
        ..w.clone()
    };
    assert_has(&err(awq_dequantize(&transposed)), "qweight");
    let x = zeros(&[16, 128], DType::F16);
    assert_has(&err(awq_gemm(&x, &w, None)), "shape mismatch");
    let x = zeros(&[16, 256], DType::BF16);
    assert_has(&err(awq_gemm(&x, &w, None)), "unsupported element types");
    let x = zeros(&[16, 256], DType::F16);
    assert_has(&err(awq_gemm(&x, &w, None)), "x is on the cpu");
    let bias = zeros(&[63], DType::F16);
    assert!(err(awq_gemm(&x, &w, Some(&bias))).contains("bias"));
}

#[test]
fn scaled_mm_rejects_bad_operands() {
    let (m, n, k) = (32, 64, 128);
    let a = zeros(&[m, k], DType::U8);
    let b = zeros(&[n, k], DType::U8).t().unwrap();
    let (sa, sb) = (zeros(&[m], DType::F32), zeros(&[1], DType::F32));
    assert_has(&err(scaled_mm(&a, &b, &sa, &sb, None, DType::BF16)), "A is on the cpu");
    assert_has(&err(scaled_mm(&a, &b, &sa, &sb, None, DType::F32)), "unsupported element types");
    let wrong = zeros(&[m + 1], DType::F32);
    assert_has(&err(scaled_mm(&a, &b, &wrong, &sb, None, DType::BF16)), "a_scale has 33 elements");
    let a16 = zeros(&[m, k], DType::BF16);
    assert_has(&err(scaled_mm(&a16, &b, &sa, &sb, None, DType::BF16)), "unsupported element types");
    let row_b = zeros(&[k, n], DType::U8);
    assert!(err(scaled_mm(&a, &row_b, &sa, &sb, None, DType::BF16)).starts_with("rcute: "));
    let scale2d = zeros(&[m, 2], DType::F32).narrow(1, 0, 1).unwrap().squeeze(1).unwrap();
    assert_has(&err(scaled_mm(&a, &b, &scale2d, &sb, None, DType::BF16)), "unsupported strides for a_scale");
}

#[test]
fn fused_moe_rejects_bad_layers() {
    let (t, e, h, i) = (4, 8, 64, 128);
    let x = zeros(&[t, h], DType::BF16);
    let w13 = zeros(&[e, 2 * i, h], DType::BF16);
    let w2 = zeros(&[e, h, i], DType::BF16);
    let logits = zeros(&[t, e], DType::F32);
    let routing = |topk| MoeRouting::Logits {
        logits: &logits,
        topk,
        renormalize: true,
    };
    let opts = MoeOptions::default();
    assert_has(&err(fused_moe(&x, &w13, &w2, routing(2), opts)), "x is on the cpu");
    assert_has(&err(fused_moe(&x, &w13, &w2, routing(9), opts)), "shape mismatch");
    let w2_f16 = zeros(&[e, h, i], DType::F16);
    assert_has(&err(fused_moe(&x, &w13, &w2_f16, routing(2), opts)), "unsupported element types");
    let w2_t = zeros(&[e, i, h], DType::BF16).transpose(1, 2).unwrap();
    assert!(err(fused_moe(&x, &w13, &w2_t, routing(2), opts)).contains("w2"));
    let ids = zeros(&[t, 2], DType::U32);
    let weights = zeros(&[t, 2], DType::F32);
    let given = MoeRouting::Given {
        topk_ids: &ids,
        topk_weights: &weights,
    };
    assert_has(&err(fused_moe(&x, &w13, &w2, given, opts)), "U32");
}
