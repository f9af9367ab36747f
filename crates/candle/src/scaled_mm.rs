//! INT8 / FP8 scaled GEMM on candle tensors ([`rcute_ops::Ops::scaled_mm`]).

use crate::error::ops;
use crate::launch::{launch, Output};
use crate::operand::{dense, geometry, vector, view, view_mut, PLACEHOLDER};
use candle_core::{DType, Result, Tensor};
use rcute_ops::{Geometry, OpsError, Scale};

/// `convert(float(A @ B) * a_scale * b_scale + bias)`: `A` `[M, K]` row-major and `B`
/// `[K, N]` column-major (`w.t()` of a row-major `[N, K]` weight), both `u8` tensors
/// holding `s8` bytes (candle has no `i8`) or both `f8e4m3` (sm_90); `a_scale` f32 `[1]`
/// (per tensor) or `[M]` (per token), `b_scale` f32 `[1]` or `[N]` (per channel), `bias`
/// `[N]` of the output type; the output is a new `[M, N]` tensor of `out` (bf16 or f16).
///
/// # Errors
///
/// rcute's validation errors ([`rcute_ops::validate_scaled_mm`]), its architecture rules,
/// a CPU tensor.
pub fn scaled_mm(
    a: &Tensor,
    b: &Tensor,
    a_scale: &Tensor,
    b_scale: &Tensor,
    bias: Option<&Tensor>,
    out: DType,
) -> Result<Tensor> {
    let out_dt = match out {
        DType::BF16 => rcute_ops::DType::BF16,
        DType::F16 => rcute_ops::DType::F16,
        other => {
            return Err(ops(rcute_ops::OpsError::DType(format!(
                "scaled_mm writes bf16 or f16, not {other:?}"
            ))))
        }
    };
    let (m, n) = (a.dims().first().copied().unwrap_or(0), b.dims().last().copied().unwrap_or(0));
    let dims = vec![m, n];
    let mut gs = vec![
        geometry("A", a, PLACEHOLDER, None)?,
        geometry("B", b, PLACEHOLDER << 1, None)?,
        geometry("a_scale", a_scale, PLACEHOLDER << 2, None)?,
        geometry("b_scale", b_scale, PLACEHOLDER << 3, None)?,
    ];
    if let Some(bias) = bias {
        gs.push(geometry("bias", bias, PLACEHOLDER << 4, None)?);
    }
    // SAFETY: validation only reads the geometry.
    unsafe { run(None, &gs, dense(out_dt, &dims, PLACEHOLDER << 5)) }.map_err(ops)?;
    let mut inputs = vec![("A", a), ("B", b), ("a_scale", a_scale), ("b_scale", b_scale)];
    inputs.extend(bias.map(|t| ("bias", t)));
    let out = Output {
        dtype: out_dt,
        dims,
        zeroed: false,
        workspace: 0,
    };
    // SAFETY: the device geometries of the locked, guarded buffers (see `launch`).
    launch(&inputs, out, &|o, g, d, _| unsafe { run(Some(o), g, d) })
}

/// Validate (`ops = None`) or run the op on geometries `[A, B, a_scale, b_scale, bias?]`.
///
/// # Safety
/// With `ops`, the geometries must describe live device buffers.
unsafe fn run(o: Option<&rcute_ops::Ops>, g: &[Geometry], d: Geometry) -> std::result::Result<(), OpsError> {
    let (a, b) = (view(g[0]), view(g[1]));
    let (sa, sb) = (Scale::auto(vector("a_scale", g[2])?), Scale::auto(vector("b_scale", g[3])?));
    let bias = g.get(4).map(|&x| vector("bias", x)).transpose()?;
    let mut out = view_mut(d);
    match o {
        None => rcute_ops::validate_scaled_mm(&a, &b, sa, sb, bias.as_ref(), &out).map(|_| ()),
        Some(o) => o.scaled_mm(&a, &b, sa, sb, bias.as_ref(), &mut out),
    }
}
