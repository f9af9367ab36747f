//! [`Ops::fused_moe_fp8`]: the fused MoE layer with FP8 e4m3 expert weights on the SM90
//! grouped GEMMs (sm_90 only): per-output-channel f32 weight scales and per-token dynamic
//! activation scales. The token rows are quantized to e4m3 per row while they are gathered
//! into the alignment's padded-row order ([`QuantSource::Gather`]); GEMM1 (e4m3 `wgmma`,
//! f32 accumulation) scales each accumulator by its row's and its w13 row's scale before
//! SwiGLU and writes bf16 / f16; that output is quantized per row again
//! ([`QuantSource::Rows`]); GEMM2 scales by its row's and w2 row's scale before the router
//! weight and scatters to entry rows; the deterministic finalize sums each token's rows.
//! Seven launches, none waiting for the host. The two GEMMs run on 128x256x128 tiles; a
//! forced SM90 [`super::MoePath`] picks their tiles and 2x1 clusters by the bf16 layer's
//! rules ([`super::sm90_gemms`]).

use super::fused::{element, layer_uses};
use super::fused_sm90::{sm90_layer_args, Sm90Operands};
use super::kernels::sm90_grid;
use super::problem::{fp8_layout, validate_moe, MoeProblem, MoeRouting, MoeWorkspace};
use crate::error::{boxed, OpsError};
use crate::gemm::{check_layout, overlaps, range};
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef};
use crate::Ops;
use rcute_atom::Element;
use rcute_kernel::gemm_sm90;
use rcute_kernel::grouped_gemm::finalize;
use rcute_kernel::grouped_gemm::quant::{self, MoeQuantArgs, QuantSource};

/// The e4m3 expert weights of [`Ops::fused_moe_fp8`] and their per-output-channel scales:
/// `w13 [L, 2I, H]` and `w2 [L, H, I]` (e4m3, batched row-major views, as
/// [`Ops::fused_moe`]'s), `w13_scale [L, 2I]` and `w2_scale [L, H]` (f32, dense row-major:
/// one scale per weight row, i.e. per output channel; a per-tensor scale is that value
/// repeated). Weight `(e, r, c)` stands for `w[e, r, c] * scale[e, r]`.
#[derive(Clone, Copy, Debug)]
pub struct MoeFp8Weights<'a> {
    /// `[L, 2I, H]` e4m3 (gate rows then up rows, or the reverse with `up_first`).
    pub w13: MatrixRef<'a>,
    /// `[L, H, I]` e4m3.
    pub w2: MatrixRef<'a>,
    /// `[L, 2I]` f32.
    pub w13_scale: MatrixRef<'a>,
    /// `[L, H]` f32.
    pub w2_scale: MatrixRef<'a>,
}

/// The workspace [`Ops::fused_moe_fp8`] needs for `tokens` tokens, top-`topk`,
/// `local_experts` experts here, hidden size `hidden` and intermediate size `inter` with
/// `dtype` (bf16 or f16) activations.
///
/// ```
/// use rcute_ops::moe::fused_moe_fp8_workspace_bytes;
/// use rcute_ops::DType;
/// let b = fused_moe_fp8_workspace_bytes(4, 2, 8, 4096, 14336, DType::BF16).unwrap();
/// assert!(b >= 8 * 14336 + 8 * 14336 * 2); // quantized rows + GEMM1's bf16 rows
/// assert!(fused_moe_fp8_workspace_bytes(4, 2, 0, 4096, 14336, DType::BF16).is_err());
/// ```
pub fn fused_moe_fp8_workspace_bytes(
    tokens: usize,
    topk: usize,
    local_experts: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
) -> Result<usize, OpsError> {
    Ok(fp8_layout(tokens, topk, local_experts, hidden, inter, dtype)?.1)
}

/// A dense f32 `[rows, cols]` scale matrix within its buffer.
fn check_scale(op: &'static str, g: &Geometry, rows: usize, cols: usize) -> Result<(), OpsError> {
    if g.dtype != DType::F32 {
        return Err(OpsError::DType(format!("{op} is {}, expected f32", g.dtype.name())));
    }
    if g.rows != rows || g.cols != cols || g.batch != 1 {
        return Err(OpsError::Shape(format!(
            "{op} [{}, {}] (batch {}): expected [{rows}, {cols}]",
            g.rows, g.cols, g.batch
        )));
    }
    check_layout(op, g, false)?;
    if g.col_stride != 1 || g.row_stride != cols as i64 || !g.ptr.is_multiple_of(4) {
        return Err(OpsError::Strides {
            operand: op,
            detail: "must be dense row-major and 4-byte aligned".into(),
        });
    }
    Ok(())
}

impl Ops {
    /// The fused MoE layer with FP8 e4m3 expert weights ([`MoeFp8Weights`]): as
    /// [`Ops::fused_moe`] with `W[e, r, c] = w[e, r, c] * scale[e, r]`, the token rows and
    /// GEMM1's SwiGLU output quantized to e4m3 per row on the GPU (dynamic per-token scale
    /// `max |row| / 448`), f32 accumulation, both scales applied to the accumulators
    /// before SwiGLU (GEMM1) and before the router weight (GEMM2). `x` and `y` are bf16
    /// or f16. The workspace is [`fused_moe_fp8_workspace_bytes`]; two runs are
    /// bit-identical, and nothing waits for the host (a CUDA graph can capture it).
    /// `opts.path` picks the GEMMs' tiles and 2x1 clusters ([`super::sm90_gemms`]).
    ///
    /// # Errors
    ///
    /// Those of [`Ops::fused_moe`] (with e4m3 weights, `H` and `I` multiples of 16), scale
    /// matrices that are not f32 ([`OpsError::DType`]), not `[L, 2I]` / `[L, H]`
    /// ([`OpsError::Shape`]) or not dense ([`OpsError::Strides`]) or overlap `y` / the
    /// workspace, [`super::MoePath::Sm80`], and any GPU other than sm_90
    /// ([`OpsError::Arch`]); nothing is launched then.
    ///
    /// ```no_run
    /// use rcute_ops::moe::{fused_moe_fp8_workspace_bytes, MoeFp8Weights, MoeOptions, MoeRouting, MoeWorkspace};
    /// use rcute_ops::{bf16, DType, Gpu, MatrixMut, MatrixRef, Ops, OpsError, E4M3};
    ///
    /// fn main() -> Result<(), OpsError> {
    ///     let Some(gpu) = Gpu::detect()? else { return Ok(()) };
    ///     let ops = Ops::new(gpu);
    ///     let s = ops.gpu().stream().clone();
    ///     let (t, e, k, h, i) = (1024, 8, 2, 4096, 14336); // Mixtral
    ///     let x = s.alloc_zeros::<bf16>(t * h)?;
    ///     let logits = s.alloc_zeros::<f32>(t * e)?;
    ///     let w13 = s.alloc_zeros::<E4M3>(e * 2 * i * h)?;
    ///     let w2 = s.alloc_zeros::<E4M3>(e * h * i)?;
    ///     let s13 = s.alloc_zeros::<f32>(e * 2 * i)?;
    ///     let s2 = s.alloc_zeros::<f32>(e * h)?;
    ///     let mut y = s.alloc_zeros::<bf16>(t * h)?;
    ///     let mut ws = s.alloc_zeros::<u8>(fused_moe_fp8_workspace_bytes(t, k, e, h, i, DType::BF16)?)?;
    ///     let w = MoeFp8Weights {
    ///         w13: MatrixRef::new(&w13, 2 * i, h).batched(e, (2 * i * h) as i64),
    ///         w2: MatrixRef::new(&w2, h, i).batched(e, (h * i) as i64),
    ///         w13_scale: MatrixRef::new(&s13, e, 2 * i),
    ///         w2_scale: MatrixRef::new(&s2, e, h),
    ///     };
    ///     let routing = MoeRouting::Logits { logits: MatrixRef::new(&logits, t, e), topk: k, renormalize: true };
    ///     ops.fused_moe_fp8(
    ///         &MatrixRef::new(&x, t, h),
    ///         &w,
    ///         &routing,
    ///         &MoeOptions::default(),
    ///         &mut MoeWorkspace::new(&mut ws),
    ///         &mut MatrixMut::new(&mut y, t, h),
    ///     )?;
    ///     ops.gpu().synchronize()?;
    ///     Ok(())
    /// }
    /// ```
    pub fn fused_moe_fp8(
        &self,
        x: &MatrixRef<'_>,
        weights: &MoeFp8Weights<'_>,
        routing: &MoeRouting<'_>,
        opts: &super::MoeOptions,
        workspace: &mut MoeWorkspace<'_>,
        y: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let p = validate_moe(x, &weights.w13, &weights.w2, routing, opts, workspace, y, true)?;
        let (s13, s2) = (weights.w13_scale.geo(), weights.w2_scale.geo());
        check_scale("w13_scale", &s13, p.local_experts, 2 * p.inter)?;
        check_scale("w2_scale", &s2, p.local_experts, p.hidden)?;
        let ws = (p.workspace, p.workspace.saturating_add(p.workspace_len as u64));
        for (op, g) in [("w13_scale", &s13), ("w2_scale", &s2)] {
            let r = range(g)?;
            if overlaps(r, range(&p.y)?) || overlaps(r, ws) {
                return Err(OpsError::Strides {
                    operand: op,
                    detail: "overlaps y or the workspace".into(),
                });
            }
        }
        if p.options.path == super::MoePath::Sm80 {
            return Err(OpsError::Arch(
                "the FP8 MoE layer runs only on the SM90 grouped GEMMs".into(),
            ));
        }
        let cc = self.gpu().compute_capability();
        if cc != (9, 0) {
            return Err(OpsError::Arch(format!("the FP8 MoE layer needs sm_90, found {cc:?}")));
        }
        self.check_devices(&[
            ("x", &p.x),
            ("w13", &p.w13),
            ("w2", &p.w2),
            ("y", &p.y),
            ("w13_scale", &s13),
            ("w2_scale", &s2),
        ])?;
        let mut uses = layer_uses(self.stream(), [x, &weights.w13, &weights.w2], routing, workspace, y)?;
        uses.read(weights.w13_scale.tracked());
        uses.read(weights.w2_scale.tracked());
        self.launch_fused_moe_fp8(&p, s13.ptr, s2.ptr)
    }

    /// Launch a validated FP8 layer (`p.layout90` is the FP8 layout); every kernel is
    /// loaded and every argument checked before the first launch.
    fn launch_fused_moe_fp8(&self, p: &MoeProblem, s13: u64, s2: u64) -> Result<(), OpsError> {
        let _scope = self.launch_scope();
        let el = element(p.dtype)?;
        let sms = self.gpu().sm_count();
        let [c1, c2] = self.layer_sm90_gemms(p, Element::E4M3, el);
        let (g1, f1) = self.grouped_sm90_kernel(&c1)?;
        let (g2, f2) = self.grouped_sm90_kernel(&c2)?;
        let qg = quant::generate(el, QuantSource::Gather).map_err(boxed)?;
        let fqg = self.moe_unit(&qg.name, &qg.source)?;
        let qr = quant::generate(el, QuantSource::Rows).map_err(boxed)?;
        let fqr = self.moe_unit(&qr.name, &qr.source)?;
        let gf = finalize::generate(el).map_err(boxed)?;
        let ff = self.moe_unit(&gf.name, &gf.source)?;
        let l = &p.layout90;
        let ws = p.workspace;
        let (h, i) = (p.hidden as i32, p.inter as i32);
        let (q, a_scale) = (ws + l.gathered as u64, ws + l.bytes as u64);
        let operands = Sm90Operands {
            a: [q, q],
            a_scale,
            b_scale: [s13, s2],
        };
        let args = sm90_layer_args(p, &operands);
        let quant_x = MoeQuantArgs {
            src: p.x.ptr,
            q,
            scale: a_scale,
            sorted_ids: args.gemm1.sorted_ids,
            total_rows: args.gemm1.total_rows,
            rows: args.gemm1.m,
            k: h,
            ld: p.x.row_stride,
            entries: args.gemm1.entries,
            topk: p.topk as i32,
        };
        let quant_inter = MoeQuantArgs {
            src: ws + l.inter as u64,
            k: i,
            ld: i64::from(i),
            ..quant_x
        };
        qg.check(&quant_x).map_err(boxed)?;
        qr.check(&quant_inter).map_err(boxed)?;
        let routed = self.route_sm90_layer(p, [&g1, &g2], &gf, args)?;
        // SAFETY: validated views (x [T, H], w13 [L, 2I, H] and w2 [L, H, I] e4m3, their
        // scales [L, 2I] / [L, H], y [T, H]) and workspace regions sized for these shapes by
        // the FP8 layout (its capacity rows: e4m3 rows of max(H, I), f32 scales after the
        // layout); the gathered rows name tokens below T (the alignment's entries).
        unsafe {
            qg.launch(&fqg, &quant_x).map_err(boxed)?;
            gemm_sm90::launch_grouped(&f1, &g1, &routed.gemm1, sm90_grid(&c1, p.options.per_tile, sms))
                .map_err(boxed)?;
            qr.launch(&fqr, &quant_inter).map_err(boxed)?;
            gemm_sm90::launch_grouped(&f2, &g2, &routed.gemm2, sm90_grid(&c2, p.options.per_tile, sms))
                .map_err(boxed)?;
            gf.launch(&ff, &routed.fin).map_err(boxed)?;
        }
        Ok(())
    }
}
