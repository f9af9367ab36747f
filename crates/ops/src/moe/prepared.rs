//! The prepared expert weights ([`MoeWeights`]) and [`Ops::fused_moe_prepared`]: `w13` and
//! `w2` reordered once on the GPU (`rc_moe_prepare_swiglu_*` / `rc_moe_prepare_scatter_*`)
//! into the layout of [`rcute_collective::moe_prepared`], in which every warp load of the
//! register-streamed decode GEMMs (`moe:...,reg` read with `_prep` kernels) is 512
//! contiguous bytes and each warp walks one contiguous run of its 16 weight rows over all
//! of K; the checkpoint's own tensors stay borrowed for the batches the prepared form does
//! not take ([`prepared_spec`]).
//!
//! The layer is [`Ops::fused_moe`]'s: the same routing, alignment and finalize kernels,
//! the same summation order as the unprepared streamed form of the same configuration
//! (the prepared weight only moves elements), so the two are bit-identical. The `_prep`
//! kernels also prefetch each warp's first chunks into L2 before their grid-dependency
//! wait, as the `cp.async` kernels do, and GEMM1 lets GEMM2 launch early (its CTAs hold
//! an SM by their registers).
//!
//! Measured on an H100 (BENCHMARKS.md, session 16; layer of 10 in a CUDA graph, cuBLAS
//! GEMMs on pre-gathered rows in brackets): DeepSeek-V2-Lite T = 1 45.9 us with the rule's
//! configuration against 50.1 for [`Ops::fused_moe`] (70.4), T = 64 377.6 against 402.7
//! (747.4); Mixtral T = 1 245.3 against 256.3 (256.0), T = 16 925.0 against 977.5
//! (1003.7).

use super::fused::{element, layer_uses};
use super::problem::{dense, spec_layout, validate_fused_moe, MoeOptions, MoeProblem, MoeRouting, MoeWorkspace};
use crate::error::{boxed, OpsError};
use crate::stream::Uses;
use crate::tensor::{DType, MatrixMut, MatrixRef};
use crate::tuning::MoeSpec;
use crate::Ops;
use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use rcute_kernel::grouped_gemm::prepare::{self, MoePairing, MoePrepareArgs, MoePrepared};
use rcute_kernel::moe_routing::MAX_LOCAL_EXPERTS;

/// A prepared weight buffer of the experts' element type.
enum Buffer {
    Bf16(CudaSlice<bf16>),
    F16(CudaSlice<f16>),
}

impl Buffer {
    fn alloc(ops: &Ops, dtype: DType, len: usize) -> Result<Buffer, OpsError> {
        let s = ops.stream();
        Ok(match dtype {
            DType::BF16 => Buffer::Bf16(s.alloc_zeros::<bf16>(len)?),
            _ => Buffer::F16(s.alloc_zeros::<f16>(len)?),
        })
    }

    /// The device address.
    fn ptr(&self) -> u64 {
        match self {
            Buffer::Bf16(b) => crate::stream::address(b),
            Buffer::F16(b) => crate::stream::address(b),
        }
    }

    /// A `[batch, rows, cols]` view, `stride` elements per expert (the prepared expert's
    /// elements: at least `rows x cols`).
    fn view(&self, rows: usize, cols: usize, batch: usize, stride: i64) -> MatrixRef<'_> {
        match self {
            Buffer::Bf16(b) => MatrixRef::new(b, rows, cols),
            Buffer::F16(b) => MatrixRef::new(b, rows, cols),
        }
        .batched(batch, stride)
    }
}

/// The experts of one MoE layer prepared for [`Ops::fused_moe_prepared`] (module docs):
/// the reordered `w13` and `w2` (owned, on the GPU they were prepared on) and the
/// checkpoint's `w13` / `w2` views (borrowed).
pub struct MoeWeights<'a> {
    w13: MatrixRef<'a>,
    w2: MatrixRef<'a>,
    up_first: bool,
    /// `(L, H, I)`.
    dims: (usize, usize, usize),
    plan13: MoePrepared,
    plan2: MoePrepared,
    prep13: Buffer,
    prep2: Buffer,
}

/// `(dtype, L, H, I)` of the experts `w13 [L, 2I, H]`, `w2 [L, H, I]`, or why they cannot
/// be prepared.
fn validate_weights(w13: &MatrixRef<'_>, w2: &MatrixRef<'_>) -> Result<(DType, usize, usize, usize), OpsError> {
    let (a, b) = (w13.geo(), w2.geo());
    if !matches!(a.dtype, DType::BF16 | DType::F16) || b.dtype != a.dtype {
        return Err(OpsError::DType(format!(
            "prepared MoE weights w13 {} / w2 {}: both bf16 or both f16",
            a.dtype.name(),
            b.dtype.name()
        )));
    }
    let (local, hidden, inter) = (a.batch, a.cols, a.rows / 2);
    if local == 0 || hidden == 0 || inter == 0 {
        return Err(OpsError::Empty(format!("w13 [{local}, {}, {hidden}]", a.rows)));
    }
    if a.rows != 2 * inter || b.batch != local || b.rows != hidden || b.cols != inter {
        return Err(OpsError::Shape(format!(
            "w13 [{local}, {}, {hidden}] and w2 [{}, {}, {}]: expected [L, 2I, H] and [L, H, I]",
            a.rows, b.batch, b.rows, b.cols
        )));
    }
    if !hidden.is_multiple_of(8) || !inter.is_multiple_of(8) {
        return Err(OpsError::Alignment {
            operand: "w13",
            detail: format!("H = {hidden} and I = {inter} must be multiples of 8 (16-byte vectors)"),
        });
    }
    if local > MAX_LOCAL_EXPERTS as usize {
        return Err(OpsError::Shape(format!(
            "{local} local experts: at most {MAX_LOCAL_EXPERTS}"
        )));
    }
    dense("w13", &a, false, true)?;
    dense("w2", &b, false, true)?;
    Ok((a.dtype, local, hidden, inter))
}

impl<'a> MoeWeights<'a> {
    /// Reorders `w13 [L, 2I, H]` (gate rows first, or up rows first when `up_first`) and
    /// `w2 [L, H, I]` into the prepared layout on `ops`'s GPU (two kernels on its stream;
    /// the result is ready for any op later on that stream).
    ///
    /// # Errors
    ///
    /// Weights other than both bf16 or both f16 ([`OpsError::DType`]); empty weights
    /// ([`OpsError::Empty`]); shapes that do not match, more than 256 experts
    /// ([`OpsError::Shape`]); `H` or `I` not multiples of 8 or misaligned weights
    /// ([`OpsError::Alignment`]); non-row-major views ([`OpsError::Strides`]); views past
    /// their buffers ([`OpsError::OutOfBounds`]); a weight on another device
    /// ([`OpsError::Device`]). Nothing is launched then.
    pub fn prepare(ops: &Ops, w13: &MatrixRef<'a>, w2: &MatrixRef<'a>, up_first: bool) -> Result<Self, OpsError> {
        let (dtype, local, hidden, inter) = validate_weights(w13, w2)?;
        let (g13, g2) = (w13.geo(), w2.geo());
        ops.check_devices(&[("w13", &g13), ("w2", &g2)])?;
        let plan = |pairing, n: usize, k: usize| {
            MoePrepared::new(pairing, n as i64, k as i64).map_err(|e| OpsError::Shape(e.to_string()))
        };
        let (plan13, plan2) = (
            plan(MoePairing::SwiGlu, inter, hidden)?,
            plan(MoePairing::Rows, hidden, inter)?,
        );
        let len = |p: &MoePrepared| local * p.expert_elems() as usize;
        let (prep13, prep2) = (
            Buffer::alloc(ops, dtype, len(&plan13))?,
            Buffer::alloc(ops, dtype, len(&plan2))?,
        );
        let el = element(dtype)?;
        let mut uses = Uses::new(ops.stream())?;
        uses.read(w13.tracked());
        uses.read(w2.tracked());
        let _scope = ops.launch_scope();
        for (src, plan, dst) in [(&g13, plan13, &prep13), (&g2, plan2, &prep2)] {
            let g = prepare::generate(el, plan.pairing).map_err(boxed)?;
            let f = ops.moe_unit(&g.name, &g.source)?;
            let args = MoePrepareArgs {
                src: src.ptr,
                dst: dst.ptr(),
                experts: local as i32,
                ld_src: src.row_stride,
                src_expert_stride: src.batch_stride,
                plan,
                up_first,
            };
            // SAFETY: the source was validated as [L, rows, K] row-major, 16-byte vectors;
            // the destination holds L * expert_elems elements (allocated above).
            unsafe { f.launch(&g.launch_config(local as i64, plan.blocks, plan.parts), &g.args(&args)) }
                .map_err(boxed)?;
        }
        drop(uses);
        Ok(MoeWeights {
            w13: *w13,
            w2: *w2,
            up_first,
            dims: (local, hidden, inter),
            plan13,
            plan2,
            prep13,
            prep2,
        })
    }

    /// `(L, H, I)`.
    pub fn dims(&self) -> (usize, usize, usize) {
        self.dims
    }

    /// Whether `w13` held the up rows first.
    pub fn up_first(&self) -> bool {
        self.up_first
    }

    /// The prepared `w13` and `w2` as `[L, 2I, H]` and `[L, H, I]` views with the prepared
    /// experts' strides (what the layer validates; the kernels read them with the block
    /// stride as `ldb`).
    fn prepared_views(&self) -> (MatrixRef<'_>, MatrixRef<'_>) {
        let (l, h, i) = self.dims;
        (
            self.prep13.view(2 * i, h, l, self.plan13.expert_elems()),
            self.prep2.view(h, i, l, self.plan2.expert_elems()),
        )
    }
}

/// The prepared layer's configuration for `tokens` tokens routed to `topk` of `local`
/// experts of hidden size `hidden` on a GPU of `sms` SMs, or `None` where the checkpoint's
/// layer ([`Ops::fused_moe`]) runs instead: decode batches (at most 16 routed rows per
/// expert on average, the 16-row tiles of [`super::moe_tile`]) take the streamed form on
/// 16-row tiles. With `touched = min(T k, L)` experts, 16 warps (256 weight rows, chunks
/// of 128 k) where GEMM2 then still has an SM's worth of CTAs (`touched ceil(H / 256) >=
/// sms`), else 8 warps with chunks of 256 k; GEMM2 in `sms / CTAs` K splits (1 to 4) where
/// it has fewer CTAs than SMs. Measured on an H100 (BENCHMARKS.md, session 16).
///
/// ```
/// use rcute_ops::moe::prepared_spec;
/// // DeepSeek-V2-Lite decode on 132 SMs: T = 1 (6 experts) and T = 64.
/// assert_eq!(prepared_spec(1, 6, 64, 2048, 132).unwrap().to_string(), "moe:16x128x256,1x8,s2,reg");
/// assert_eq!(prepared_spec(64, 6, 64, 2048, 132).unwrap().to_string(), "moe:16x256x128,1x16,s2,reg");
/// // Mixtral T = 1: 2 experts, GEMM2 in two K splits; prefill: the checkpoint's layer.
/// assert_eq!(prepared_spec(1, 2, 8, 4096, 132).unwrap().to_string(), "moe:16x128x256,1x8,k2,s2,reg");
/// assert_eq!(prepared_spec(1024, 2, 8, 4096, 132), None);
/// ```
pub fn prepared_spec(tokens: usize, topk: usize, local: usize, hidden: usize, sms: usize) -> Option<MoeSpec> {
    let entries = tokens.saturating_mul(topk);
    if entries == 0 || local == 0 || entries > 16 * local {
        return None;
    }
    let touched = entries.min(local);
    let wide = touched * hidden.div_ceil(256) >= sms;
    let (warps, chunk) = if wide { (16, 128) } else { (8, 256) };
    let ctas2 = touched * hidden.div_ceil(16 * warps as usize);
    let splits = (sms / ctas2.max(1)).clamp(1, 4) as u32;
    Some(MoeSpec::streamed(16, warps, chunk, 2, splits, false))
}

/// The prepared experts' element type.
fn w13_dtype(w: &MoeWeights<'_>) -> DType {
    w.w13.geo().dtype
}

impl Ops {
    /// The fused MoE layer of [`Ops::fused_moe`] on prepared experts: the prepared
    /// streamed form where [`prepared_spec`] picks it and the workspace holds its layout
    /// (a workspace of [`super::fused_moe_workspace_bytes`] does), else [`Ops::fused_moe`]
    /// on the checkpoint's weights. `opts.up_first` must be the order the weights were prepared
    /// with.
    ///
    /// # Errors
    ///
    /// As [`Ops::fused_moe`] (with the prepared weights' shapes); `opts.up_first` other
    /// than the preparation's ([`OpsError::Shape`]); nothing is launched then.
    pub fn fused_moe_prepared(
        &self,
        x: &MatrixRef<'_>,
        w: &MoeWeights<'_>,
        routing: &MoeRouting<'_>,
        opts: &MoeOptions,
        workspace: &mut MoeWorkspace<'_>,
        y: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        self.fused_moe_prepared_with(x, w, routing, opts, workspace, y, None)
    }

    /// [`Ops::fused_moe_prepared`] with a forced streamed configuration (`Some`: the
    /// prepared form with `spec`'s row tile, warps, chunk, ring, GEMM2 splits and K
    /// rotation, whatever the batch), or the rule's choice (`None`).
    ///
    /// # Errors
    ///
    /// Those of [`Ops::fused_moe_prepared`]; a `spec` that is not the streamed form
    /// (`moe:...,reg`: [`OpsError::Shape`]); a workspace smaller than
    /// [`super::fused_moe_workspace_bytes_with`] for `spec` ([`OpsError::OutOfBounds`]).
    #[allow(clippy::too_many_arguments)]
    pub fn fused_moe_prepared_with(
        &self,
        x: &MatrixRef<'_>,
        w: &MoeWeights<'_>,
        routing: &MoeRouting<'_>,
        opts: &MoeOptions,
        workspace: &mut MoeWorkspace<'_>,
        y: &mut MatrixMut<'_>,
        spec: Option<&MoeSpec>,
    ) -> Result<(), OpsError> {
        if opts.up_first != w.up_first {
            return Err(OpsError::Shape(format!(
                "the experts were prepared with up_first = {}, the layer asks for {}",
                w.up_first, opts.up_first
            )));
        }
        let (l, h, i) = w.dims;
        let (tokens, sms) = (x.geo().rows, self.gpu().sm_count() as usize);
        let ruled = spec.is_none();
        let chosen = spec
            .cloned()
            .or_else(|| prepared_spec(tokens, routing.topk(), l, h, sms));
        let fits = |s: &MoeSpec| {
            spec_layout(tokens, routing.topk(), l, h, i, w13_dtype(w), s).is_ok_and(|lay| lay.bytes <= workspace.len())
        };
        let Some(spec) = chosen.filter(|s| !ruled || fits(s)) else {
            // the rule's choice where the workspace holds it, else the checkpoint's layer
            return self.fused_moe(x, &w.w13, &w.w2, routing, opts, workspace, y);
        };
        if !spec.streamed || spec.stream || spec.l2_prefetch {
            return Err(OpsError::Shape(format!(
                "prepared MoE configuration {spec}: the streamed form (moe:BMx(16W)xCHUNK,1xW[,kS][,sR],reg[,rot][,sring])"
            )));
        }
        let (w13, w2) = w.prepared_views();
        // the prepared w13 pairs the gate and up rows itself (gate first)
        let gate_first = MoeOptions {
            up_first: false,
            ..*opts
        };
        let p = validate_fused_moe(x, &w13, &w2, routing, &gate_first, workspace, y)?;
        self.check_devices(&[("x", &p.x), ("w13", &p.w13), ("w2", &p.w2), ("y", &p.y)])?;
        let layout = spec_layout(p.tokens, p.topk, p.local_experts, p.hidden, p.inter, p.dtype, &spec)?;
        if layout.bytes > p.workspace_len {
            return Err(OpsError::OutOfBounds {
                operand: "workspace",
                needed: layout.bytes,
                len: p.workspace_len,
            });
        }
        let _uses = layer_uses(self.stream(), [x, &w13, &w2], routing, workspace, y)?;
        let forced = MoeProblem { layout, ..p };
        let ldb = [w.plan13.block_stride(), w.plan2.block_stride()];
        self.launch_fused_moe_on(&forced, &spec, Some(ldb))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moe::{fused_moe_workspace_bytes, fused_moe_workspace_bytes_with};

    /// The rule's configurations fit the layer's documented workspace (so a caller's
    /// workspace of `fused_moe_workspace_bytes` runs them), on the model and test shapes.
    #[test]
    fn rule_fits_the_layer_workspace() {
        for (e, k, h, i) in [
            (64, 6, 2048, 1408),
            (8, 2, 4096, 14336),
            (64, 6, 1032, 712),
            (8, 2, 1032, 712),
            (4, 2, 40, 24),
        ] {
            for t in [1, 2, 3, 5, 16, 40, 64, 100, 170, 1024] {
                for sms in [78, 114, 132] {
                    let Some(spec) = prepared_spec(t, k, e, h, sms) else {
                        assert!(t * k > 16 * e, "T={t} k={k} E={e}: no spec");
                        continue;
                    };
                    let any = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
                    let need = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, &spec).unwrap();
                    assert!(need <= any, "{spec} T={t} E={e}: {need} > {any}");
                    assert!(spec.streamed && !spec.stream && !spec.l2_prefetch);
                }
            }
        }
    }
}
