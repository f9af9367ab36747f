//! GEMM on candle tensors: `D = alpha * A @ B + beta * C` ([`rcute_ops::Ops::gemm`]).

use crate::error::ops;
use crate::launch::{launch, Output};
use crate::operand::{dense, geometry, view, view_mut, PLACEHOLDER};
use candle_core::{Result, Tensor};

/// `A @ B` for bf16 or f16 tensors: `A` `[M, K]` or `[L, M, K]`, `B` `[K, N]` or
/// `[L, K, N]` (a 2-dim operand is broadcast over the other's batch), each row- or
/// column-major (a transposed weight `w.t()` of a `[N, K]` weight is column-major);
/// the output is a new row-major `[M, N]` / `[L, M, N]` tensor of the same type.
///
/// # Errors
///
/// rcute's validation errors (element types, shapes, strides, alignment: see
/// [`rcute_ops::validate`]), a CPU tensor, an unsupported GPU.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    gemm(a, b, None, 1.0, 0.0)
}

/// `alpha * A @ B + beta * C` (the fused epilogue: `C` is the residual, bias matrix or
/// previous output; same shape as the result, any row- or column-major strides). See
/// [`matmul`] for `A` and `B`.
pub fn gemm(a: &Tensor, b: &Tensor, c: Option<&Tensor>, alpha: f32, beta: f32) -> Result<Tensor> {
    let dims = out_dims(a, b)?;
    let dt = crate::operand::dtype("A", a.dtype())?;
    let broadcast = |name, t: &Tensor, base| -> Result<rcute_ops::Geometry> {
        let mut g = geometry(name, t, base, None)?;
        if let ([l, _, _], 1) = (dims.as_slice(), g.batch) {
            (g.batch, g.batch_stride) = (*l, 0);
        }
        Ok(g)
    };
    // Validate first, at placeholder addresses: bad input fails the same way on any device.
    let (ga, gb) = (broadcast("A", a, PLACEHOLDER)?, broadcast("B", b, PLACEHOLDER << 1)?);
    let gc = c.map(|c| broadcast("C", c, PLACEHOLDER << 2)).transpose()?;
    let gd = dense(dt, &dims, PLACEHOLDER << 3);
    // SAFETY: validation only reads the geometry.
    unsafe {
        rcute_ops::validate(&view(ga), &view(gb), gc.map(|g| view(g)).as_ref(), &view_mut(gd), alpha, beta)
            .map_err(ops)?;
    }
    let mut inputs = vec![("A", a), ("B", b)];
    inputs.extend(c.map(|c| ("C", c)));
    let out = Output {
        dtype: dt,
        dims: dims.clone(),
        zeroed: false,
        workspace: 0,
    };
    launch(&inputs, out, &|o, g, d, _| {
        let bc = |mut x: rcute_ops::Geometry| {
            if let ([l, _, _], 1) = (dims.as_slice(), x.batch) {
                (x.batch, x.batch_stride) = (*l, 0);
            }
            x
        };
        // SAFETY: the geometries are the inputs' and the output's device buffers, locked
        // and guarded for the launch (see `launch`).
        unsafe {
            let c = g.get(2).map(|&x| view(bc(x)));
            o.gemm(&view(bc(g[0])), &view(bc(g[1])), c.as_ref(), &mut view_mut(d), alpha, beta)
        }
    })
}

/// The output dims of `A @ B` (`[M, N]` or `[L, M, N]`), or rcute's shape error.
fn out_dims(a: &Tensor, b: &Tensor) -> Result<Vec<usize>> {
    let shape = |m: String| ops(rcute_ops::OpsError::Shape(m));
    let (ad, bd) = (a.dims(), b.dims());
    let batch = match (ad.len(), bd.len()) {
        (2, 2) => None,
        (3, 2) => Some(ad[0]),
        (2, 3) => Some(bd[0]),
        (3, 3) if ad[0] == bd[0] => Some(ad[0]),
        _ => return Err(shape(format!("A {ad:?} @ B {bd:?}: need 2- or 3-dim operands with one batch size"))),
    };
    let (m, n) = (ad[ad.len() - 2], bd[bd.len() - 1]);
    Ok(match batch {
        None => vec![m, n],
        Some(l) => vec![l, m, n],
    })
}
