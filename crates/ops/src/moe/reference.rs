//! The fused MoE layer in float64 (the reference the GPU layer is checked against).

use crate::error::OpsError;

/// The sizes of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeShape {
    /// `T`.
    pub tokens: usize,
    /// `H`.
    pub hidden: usize,
    /// `I`.
    pub inter: usize,
    /// `k`.
    pub topk: usize,
    /// First local expert (global id).
    pub expert_offset: usize,
    /// `L`: the experts of `w13` / `w2`.
    pub local_experts: usize,
}

pub(super) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// Each operand `(name, elements, expected)` has its expected number of elements.
pub(super) fn check_lengths(want: &[(&str, usize, usize)]) -> Result<(), OpsError> {
    for &(op, got, need) in want {
        if got != need {
            return Err(OpsError::Shape(format!("{op} has {got} elements, expected {need}")));
        }
    }
    Ok(())
}

/// `y [T, H]`: for each token `t` and each `j < k` whose expert `e = topk_ids[t, j]` lies
/// in `[expert_offset, expert_offset + L)`, `weights[t, j] * W2_e (silu(Wgate_e x_t) *
/// (Wup_e x_t))`, with `x [T, H]`, `w13 [L, 2I, H]` (gate rows first) and `w2 [L, H, I]`
/// row-major; other entries contribute nothing.
///
/// ```
/// use rcute_ops::moe::fused_moe_reference;
/// use rcute_ops::moe::reference::MoeShape;
/// // One token, one expert, H = I = 1: y = w * w2 * silu(g x) * (u x).
/// let s = MoeShape { tokens: 1, hidden: 1, inter: 1, topk: 1, expert_offset: 0, local_experts: 1 };
/// let y = fused_moe_reference(&s, &[2.0], &[1.0, 3.0], &[0.5], &[0], &[0.25]).unwrap();
/// let silu2 = 2.0 / (1.0 + (-2.0f64).exp());
/// assert!((y[0] - 0.25 * 0.5 * silu2 * 6.0).abs() < 1e-12);
/// ```
pub fn fused_moe_reference(
    s: &MoeShape,
    x: &[f64],
    w13: &[f64],
    w2: &[f64],
    topk_ids: &[i32],
    topk_weights: &[f64],
) -> Result<Vec<f64>, OpsError> {
    let (t, h, i, k, l) = (s.tokens, s.hidden, s.inter, s.topk, s.local_experts);
    check_lengths(&[
        ("x", x.len(), t * h),
        ("w13", w13.len(), l * 2 * i * h),
        ("w2", w2.len(), l * h * i),
        ("topk_ids", topk_ids.len(), t * k),
        ("topk_weights", topk_weights.len(), t * k),
    ])?;
    let mut y = vec![0.0; t * h];
    let mut act = vec![0.0; i];
    for tok in 0..t {
        let xt = &x[tok * h..(tok + 1) * h];
        for j in 0..k {
            let e = i64::from(topk_ids[tok * k + j]) - s.expert_offset as i64;
            if e < 0 || e >= l as i64 {
                continue;
            }
            let e = e as usize;
            let w1 = &w13[e * 2 * i * h..(e + 1) * 2 * i * h];
            for (c, a) in act.iter_mut().enumerate() {
                let dot = |row: usize| -> f64 { w1[row * h..(row + 1) * h].iter().zip(xt).map(|(p, q)| p * q).sum() };
                *a = silu(dot(c)) * dot(i + c);
            }
            let wt = topk_weights[tok * k + j];
            let w2e = &w2[e * h * i..(e + 1) * h * i];
            for (r, yv) in y[tok * h..(tok + 1) * h].iter_mut().enumerate() {
                let o: f64 = w2e[r * i..(r + 1) * i].iter().zip(&act).map(|(p, q)| p * q).sum();
                *yv += wt * o;
            }
        }
    }
    Ok(y)
}
