//! The FP8 MoE layer's quantized semantics in float64 ([`crate::Ops::fused_moe_fp8`]'s
//! reference): e4m3 rounding, per-row dynamic quantization and the layer built on them.

use super::reference::{check_lengths, silu, MoeShape};
use crate::error::OpsError;

/// e4m3's largest finite magnitude.
pub const E4M3_MAX: f64 = 448.0;

/// `v` rounded to the nearest e4m3 value (ties to even), saturating at ±448 (the
/// conversion the GPU's quantize kernel does: `cvt.rn.satfinite`).
///
/// ```
/// use rcute_ops::moe::reference_fp8::e4m3_round;
/// assert_eq!(e4m3_round(1.0625), 1.0); // halfway between 1 and 1.125: to even
/// assert_eq!(e4m3_round(1.1), 1.125);
/// assert_eq!(e4m3_round(1000.0), 448.0);
/// assert_eq!(e4m3_round(-0.001), -0.001953125); // subnormal step 2^-9
/// ```
pub fn e4m3_round(v: f64) -> f64 {
    let a = v.abs();
    if a.is_nan() {
        return f64::NAN;
    }
    // Normal exponents from -6; below 2^-6 the subnormal step 2^-9.
    let e = a.log2().floor().max(-6.0);
    let step = (e - 3.0).exp2();
    ((a / step).round_ties_even() * step).min(E4M3_MAX).copysign(v)
}

/// The e4m3 bit pattern of an e4m3 value `v` (one [`e4m3_round`] returns).
///
/// ```
/// use rcute_ops::moe::reference_fp8::e4m3_bits;
/// assert_eq!(e4m3_bits(1.0), 0x38);
/// assert_eq!(e4m3_bits(-448.0), 0xfe);
/// assert_eq!(e4m3_bits(0.001953125), 0x01);
/// ```
pub fn e4m3_bits(v: f64) -> u8 {
    let s = if v.is_sign_negative() { 0x80u8 } else { 0 };
    let a = e4m3_round(v).abs();
    if a == 0.0 {
        return s;
    }
    if a < (-6.0f64).exp2() {
        return s | (a / (-9.0f64).exp2()) as u8;
    }
    let e = a.log2().floor();
    let m = (a / e.exp2() * 8.0 - 8.0) as u8;
    s | (((e + 7.0) as u8) << 3) | m
}

/// Per-row dynamic quantization: `(q, s)` with `s = max |row| / 448` and `q = e4m3(row /
/// s)` (a zero row: `s = 0`, zeros).
pub fn quantize_row(row: &[f64]) -> (Vec<f64>, f64) {
    let amax = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        return (vec![0.0; row.len()], 0.0);
    }
    let inv = E4M3_MAX / amax;
    (row.iter().map(|v| e4m3_round(v * inv)).collect(), amax / E4M3_MAX)
}

/// The FP8 layer: `w13 [L, 2I, H]` and `w2 [L, H, I]` e4m3 values (decoded) with per-row
/// scales `s13 [L, 2I]` and `s2 [L, H]`; each token row quantized per row
/// ([`quantize_row`]), GEMM1 scaled by the row's and the weight row's scale, SwiGLU,
/// rounded to bf16 (the layer's intermediate), quantized per row again, GEMM2 scaled the
/// same way, times the router weight, summed over the token's local experts.
///
/// ```
/// use rcute_ops::moe::reference::MoeShape;
/// use rcute_ops::moe::reference_fp8::fused_moe_fp8_reference;
/// // One token, one expert, H = I = 1: x = 2 quantizes to 448 with scale 2 / 448, so
/// // gate = 448 * 1 * (2 / 448) * 0.5 = 1 and up = 448 * 1.5 * (2 / 448) * 2 = 6.
/// let s = MoeShape { tokens: 1, hidden: 1, inter: 1, topk: 1, expert_offset: 0, local_experts: 1 };
/// let y = fused_moe_fp8_reference(&s, &[2.0], &[1.0, 1.5], &[0.5, 2.0], &[1.0], &[0.25], &[0], &[1.0]).unwrap();
/// let act = 1.0 / (1.0 + (-1.0f64).exp()) * 6.0; // silu(1) * 6
/// let act = half::bf16::from_f64(act).to_f64();
/// assert!((y[0] - 0.25 * act).abs() < 1e-12);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn fused_moe_fp8_reference(
    s: &MoeShape,
    x: &[f64],
    w13: &[f64],
    s13: &[f64],
    w2: &[f64],
    s2: &[f64],
    topk_ids: &[i32],
    topk_weights: &[f64],
) -> Result<Vec<f64>, OpsError> {
    let (t, h, i, k, l) = (s.tokens, s.hidden, s.inter, s.topk, s.local_experts);
    check_lengths(&[
        ("x", x.len(), t * h),
        ("w13", w13.len(), l * 2 * i * h),
        ("w13_scale", s13.len(), l * 2 * i),
        ("w2", w2.len(), l * h * i),
        ("w2_scale", s2.len(), l * h),
        ("topk_ids", topk_ids.len(), t * k),
        ("topk_weights", topk_weights.len(), t * k),
    ])?;
    let mut y = vec![0.0; t * h];
    let mut act = vec![0.0; i];
    for tok in 0..t {
        let (xq, xs) = quantize_row(&x[tok * h..(tok + 1) * h]);
        for j in 0..k {
            let e = i64::from(topk_ids[tok * k + j]) - s.expert_offset as i64;
            if e < 0 || e >= l as i64 {
                continue;
            }
            let e = e as usize;
            let w1 = &w13[e * 2 * i * h..(e + 1) * 2 * i * h];
            let dot = |row: usize| -> f64 {
                let acc: f64 = w1[row * h..(row + 1) * h].iter().zip(&xq).map(|(p, q)| p * q).sum();
                acc * xs * s13[e * 2 * i + row]
            };
            for (c, a) in act.iter_mut().enumerate() {
                *a = half::bf16::from_f64(silu(dot(c)) * dot(i + c)).to_f64();
            }
            let (aq, as_) = quantize_row(&act);
            let wt = topk_weights[tok * k + j];
            let w2e = &w2[e * h * i..(e + 1) * h * i];
            for (r, yv) in y[tok * h..(tok + 1) * h].iter_mut().enumerate() {
                let o: f64 = w2e[r * i..(r + 1) * i].iter().zip(&aq).map(|(p, q)| p * q).sum();
                *yv += wt * o * as_ * s2[e * h + r];
            }
        }
    }
    Ok(y)
}
