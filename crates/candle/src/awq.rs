//! AWQ W4A16 on candle tensors: [`awq_gemm`] and [`awq_dequantize`]
//! ([`rcute_ops::Ops::awq_gemm`], [`rcute_ops::Ops::awq_dequantize`]).

use crate::error::ops;
use crate::launch::{launch, Output};
use crate::operand::{dense, geometry, vector, view, view_mut, PLACEHOLDER};
use candle_core::{Result, Tensor};
use rcute_ops::awq::AwqTensors;
use rcute_ops::{Geometry, OpsError};

/// One AWQ weight as AutoAWQ's checkpoint stores it (`version="gemm"`): `qweight` i32
/// `[K, N/8]`, `scales` f16 or bf16 `[K/G, N]`, `qzeros` i32 `[K/G, N/8]`, all dense
/// row-major, and the group size `G` (32, 64, 128 or K). Pack host weights with
/// [`rcute_ops::awq::pack_awq_matrix`].
#[derive(Clone, Debug)]
pub struct AwqWeight {
    /// Packed 4-bit weights.
    pub qweight: Tensor,
    /// Per-group scales.
    pub scales: Tensor,
    /// Packed 4-bit zero points.
    pub qzeros: Tensor,
    /// Rows per group.
    pub group: usize,
}

impl AwqWeight {
    /// K (rows of the weight, the GEMM's reduction dimension).
    pub fn k(&self) -> usize {
        self.qweight.dims().first().copied().unwrap_or(0)
    }
    /// N (columns of the weight).
    pub fn n(&self) -> usize {
        self.scales.dims().last().copied().unwrap_or(0)
    }
    fn inputs(&self) -> [(&'static str, &Tensor); 3] {
        [("qweight", &self.qweight), ("scales", &self.scales), ("qzeros", &self.qzeros)]
    }
}

/// The [`AwqTensors`] of geometries `[qweight, scales, qzeros]`.
///
/// # Safety
/// As [`view`].
unsafe fn tensors<'a>(g: &[Geometry], group: usize) -> AwqTensors<'a> {
    AwqTensors {
        qweight: view(g[0]),
        scales: view(g[1]),
        qzeros: view(g[2]),
        group,
    }
}

/// `x @ W (+ bias)` with `W` dequantized on the fly: `x` `[M, K]` of the scales' type
/// (row-major, K contiguous), `bias` `[N]`; the output is a new `[M, N]` tensor.
///
/// # Errors
///
/// rcute's validation errors ([`rcute_ops::awq::validate_awq_gemm`]), a CPU tensor.
pub fn awq_gemm(x: &Tensor, w: &AwqWeight, bias: Option<&Tensor>) -> Result<Tensor> {
    let mut inputs = vec![("x", x)];
    inputs.extend(w.inputs());
    inputs.extend(bias.map(|b| ("bias", b)));
    let mut gs = Vec::new();
    for (i, (name, t)) in inputs.iter().enumerate() {
        gs.push(geometry(name, t, PLACEHOLDER << i, None)?);
    }
    let dt = gs[2].dtype;
    let dims = vec![x.dims().first().copied().unwrap_or(0), w.n()];
    // SAFETY: validation only reads the geometry.
    unsafe { gemm(None, &gs, dense(dt, &dims, PLACEHOLDER << 6), w.group) }.map_err(ops)?;
    let out = Output {
        dtype: dt,
        dims,
        zeroed: false,
        workspace: 0,
    };
    // SAFETY: the device geometries of the locked, guarded buffers (see `launch`).
    launch(&inputs, out, &|o, g, d, _| unsafe { gemm(Some(o), g, d, w.group) })
}

/// Validate (`o = None`) or run `awq_gemm` on geometries `[x, qweight, scales, qzeros, bias?]`.
///
/// # Safety
/// With `o`, the geometries must describe live device buffers.
unsafe fn gemm(o: Option<&rcute_ops::Ops>, g: &[Geometry], d: Geometry, group: usize) -> std::result::Result<(), OpsError> {
    let (x, w) = (view(g[0]), tensors(&g[1..4], group));
    let bias = g.get(4).map(|&b| vector("bias", b)).transpose()?;
    let mut out = view_mut(d);
    match o {
        None => rcute_ops::awq::validate_awq_gemm(&x, &w, bias.as_ref(), &out).map(|_| ()),
        Some(o) => o.awq_gemm(&x, &w, bias.as_ref(), &mut out),
    }
}

/// The dense `[K, N]` weight `(q - z) * s` of an AWQ weight, in the scales' type.
///
/// # Errors
///
/// rcute's validation errors ([`rcute_ops::awq::validate_awq_dequantize`]), a CPU tensor.
pub fn awq_dequantize(w: &AwqWeight) -> Result<Tensor> {
    let inputs = w.inputs();
    let mut gs = Vec::new();
    for (i, (name, t)) in inputs.iter().enumerate() {
        gs.push(geometry(name, t, PLACEHOLDER << i, None)?);
    }
    let dt = gs[1].dtype;
    let dims = vec![w.k(), w.n()];
    // SAFETY: validation only reads the geometry.
    unsafe { dequantize(None, &gs, dense(dt, &dims, PLACEHOLDER << 6), w.group) }.map_err(ops)?;
    let out = Output {
        dtype: dt,
        dims,
        zeroed: false,
        workspace: 0,
    };
    // SAFETY: as in `awq_gemm`.
    launch(&inputs, out, &|o, g, d, _| unsafe { dequantize(Some(o), g, d, w.group) })
}

/// Validate (`o = None`) or run `awq_dequantize` on geometries `[qweight, scales, qzeros]`.
///
/// # Safety
/// As [`gemm`].
unsafe fn dequantize(o: Option<&rcute_ops::Ops>, g: &[Geometry], d: Geometry, group: usize) -> std::result::Result<(), OpsError> {
    let w = tensors(g, group);
    let mut out = view_mut(d);
    match o {
        None => rcute_ops::awq::validate_awq_dequantize(&w, &out).map(|_| ()),
        Some(o) => o.awq_dequantize(&w, &mut out),
    }
}
