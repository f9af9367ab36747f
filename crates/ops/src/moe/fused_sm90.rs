//! The fused MoE layer on the SM90 grouped GEMMs (TMA + `wgmma`,
//! [`rcute_kernel::gemm_sm90::Sm90Grouped`]): routing and alignment to 128-row tiles as for
//! the SM80 family, then the token rows gathered into padded-row order (TMA cannot gather
//! rows; where [`super::sm90_gather`] says (Auto up to one row tile per expert) or
//! [`super::MoeOptions::gather`] forces it,
//! GEMM1's producer warpgroup gathers them itself by `cp.async` and no gather kernel runs), GEMM1 with SwiGLU (on 2x1 CTA clusters sharing the weight tiles where
//! [`super::sm90_gemm1_cluster`] says, else on 128x256 or, with one row tile per expert,
//! 128x128 tiles: [`super::sm90_gemm1_tile`]), GEMM2 with the router weight scattered to entry rows (on
//! 128x256 or, when few row tiles are routed, 128x128 tiles: [`super::sm90_gemm2_tile`]; on
//! 2x1 clusters from two row tiles per expert: [`super::sm90_gemm2_cluster`]),
//! both GEMMs on the ping-pong schedule where [`super::sm90_pingpong`] says (up to two row
//! tiles per expert, or forced: [`super::sm90_gemms`]), and the deterministic finalize; six launches, none waiting for the host.
//! [`sm90_layer_args`] and [`Ops::route_sm90_layer`] build, check and route the GEMM and
//! finalize arguments that the FP8 layer ([`Ops::fused_moe_fp8`]) shares, with its own A
//! operands and scales ([`Sm90Operands`]).

use super::fused::element;
use super::kernels::{rows64_gemms, sm90_gemms, sm90_grid, with_dynamic, with_gather, with_pad_skip, with_walk_band};
use super::path::sm90_chosen;
use super::problem::MoeProblem;
use crate::error::{boxed, OpsError};
use crate::tensor::Geometry;
use crate::Ops;
use rcute_atom::Element;
use rcute_kernel::gemm_sm90::{self, GemmSm90Config, GeneratedGemmSm90, Sm90GroupedArgs};
use rcute_kernel::grouped_gemm::finalize::{self, GeneratedMoeFinalize, MoeFinalizeArgs};
use rcute_kernel::grouped_gemm::gather::{self, GeneratedMoeGather, MoeGatherArgs};
use rcute_kernel::Function;

impl Ops {
    /// Whether `p` runs on the SM90 family: [`sm90_chosen`] for its path, this GPU and its
    /// routed rows, and (for [`super::MoePath::Auto`]) a workspace large enough for the SM90
    /// layout ([`super::fused_moe_workspace_bytes`] always is).
    ///
    /// # Errors
    ///
    /// A forced SM90 path ([`super::MoePath::forces_sm90`]) on a GPU other than sm_90 ([`OpsError::Arch`]) or with a
    /// workspace smaller than the SM90 layout ([`OpsError::OutOfBounds`]).
    pub(crate) fn moe_sm90_runs(&self, p: &MoeProblem) -> Result<bool, OpsError> {
        let cc = self.gpu().compute_capability();
        if !sm90_chosen(p.options.path, cc, p.tokens * p.topk, p.local_experts) {
            return Ok(false);
        }
        let fits = p.layout90.bytes <= p.workspace_len;
        if p.options.path == super::MoePath::Auto {
            return Ok(fits);
        }
        if cc != (9, 0) {
            return Err(OpsError::Arch(format!(
                "the SM90 grouped GEMMs need sm_90, found {cc:?}"
            )));
        }
        if !fits {
            return Err(OpsError::OutOfBounds {
                operand: "workspace",
                needed: p.layout90.bytes,
                len: p.workspace_len,
            });
        }
        Ok(true)
    }

    /// An SM90 grouped GEMM, generated and loaded once per configuration.
    pub(crate) fn grouped_sm90_kernel(&self, cfg: &GemmSm90Config) -> Result<(GeneratedGemmSm90, Function), OpsError> {
        self.moe_grouped_sm90.get_or_try_build(cfg, || {
            let g = gemm_sm90::generate(cfg).map_err(boxed)?;
            let f = self.moe_unit(&g.name, &g.source)?;
            Ok((g, f))
        })
    }

    /// GEMM1 and GEMM2 of the validated layer `p` for `ab` operands with an `out` D on this
    /// GPU's SMs ([`sm90_gemms`]: the bf16 / f16 layer and the FP8 one), their walk's band
    /// GEMM1's gathering form, the dynamic walk and (bf16 / f16) the padding skip forced
    /// where `p` asks ([`with_walk_band`], [`with_gather`], [`with_dynamic`],
    /// [`with_pad_skip`]).
    pub(crate) fn layer_sm90_gemms(&self, p: &MoeProblem, ab: Element, out: Element) -> [GemmSm90Config; 2] {
        let (entries, sms) = (p.tokens * p.topk, self.gpu().sm_count());
        let gemms = if p.options.row_tile == Some(64) && ab != Element::E4M3 {
            rows64_gemms(ab)
        } else {
            let gemms = sm90_gemms(
                ab,
                out,
                p.options.path,
                entries,
                p.local_experts,
                p.hidden,
                p.inter,
                sms,
            );
            with_gather(gemms, p.options.gather)
        };
        let gemms = with_dynamic(with_walk_band(gemms, p.options.walk_band), p.options.dynamic);
        if ab == Element::E4M3 {
            return gemms;
        }
        with_pad_skip(gemms, p.options.pad_skip)
    }

    /// Launch a validated layer on the SM90 family (its workspace layout `p.layout90`);
    /// every kernel is loaded before the first launch.
    pub(crate) fn launch_fused_moe_sm90(&self, p: &MoeProblem) -> Result<(), OpsError> {
        let _scope = self.launch_scope();
        let el = element(p.dtype)?;
        let sms = self.gpu().sm_count();
        let [c1, c2] = self.layer_sm90_gemms(p, el, el);
        let (g1, f1) = self.grouped_sm90_kernel(&c1)?;
        let (g2, f2) = self.grouped_sm90_kernel(&c2)?;
        let gf = finalize::generate(el).map_err(boxed)?;
        let ff = self.moe_unit(&gf.name, &gf.source)?;
        let l = &p.layout90;
        let ws = p.workspace;
        // A gathering GEMM1 (`sm90_gather`, `MoeOptions::gather`) reads x's rows itself: no
        // row gather.
        let gathers = c1.gather_a;
        let operands = Sm90Operands {
            a: [
                if gathers { p.x.ptr } else { ws + l.gathered as u64 },
                ws + l.inter as u64,
            ],
            ..Default::default()
        };
        let mut args = sm90_layer_args(p, &operands);
        if gathers {
            args.gemm1.lda = p.x.row_stride;
            args.gemm1.topk = p.topk as i32;
        }
        let row_gather = if gathers {
            None
        } else {
            Some(self.row_gather(p, el, &args.gemm1)?)
        };
        let routed = self.route_sm90_layer(p, [&g1, &g2], &gf, args)?;
        // SAFETY: validated views (x [T, H], w13 [L, 2I, H], w2 [L, H, I], y [T, H]) and
        // workspace regions sized for these shapes by the SM90 layout (its capacity rows);
        // the gathered rows name tokens below T (the alignment's entries).
        unsafe {
            if let Some((gg, fg, ga)) = &row_gather {
                gg.launch(fg, ga).map_err(boxed)?;
            }
            gemm_sm90::launch_grouped(&f1, &g1, &routed.gemm1, sm90_grid(&c1, p.options.per_tile, sms))
                .map_err(boxed)?;
            gemm_sm90::launch_grouped(&f2, &g2, &routed.gemm2, sm90_grid(&c2, p.options.per_tile, sms))
                .map_err(boxed)?;
            gf.launch(&ff, &routed.fin).map_err(boxed)?;
        }
        Ok(())
    }

    /// The row gather in front of a (non-gathering) GEMM1 of `gemm1`'s alignment, loaded and
    /// its arguments checked: x's token rows into the layout's padded-row buffer.
    fn row_gather(
        &self,
        p: &MoeProblem,
        el: Element,
        args: &Sm90GroupedArgs,
    ) -> Result<(GeneratedMoeGather, Function, MoeGatherArgs), OpsError> {
        let gg = gather::generate(el).map_err(boxed)?;
        let fg = self.moe_unit(&gg.name, &gg.source)?;
        let gather = MoeGatherArgs {
            x: p.x.ptr,
            out: p.workspace + p.layout90.gathered as u64,
            sorted_ids: args.sorted_ids,
            total_rows: args.total_rows,
            rows: args.m,
            hidden: p.hidden as i32,
            ldx: p.x.row_stride,
            entries: args.entries,
            topk: p.topk as i32,
        };
        gg.check(&gather).map_err(boxed)?;
        Ok((gg, fg, gather))
    }

    /// Check the layer's two GEMMs against their kernels `g`, route (top-k and alignment
    /// launches into `p.layout90`) and check the finalize `gf` with the routed ids: `args`
    /// with GEMM2's router weights and the finalize's `topk_ids` filled in.
    pub(super) fn route_sm90_layer(
        &self,
        p: &MoeProblem,
        g: [&GeneratedGemmSm90; 2],
        gf: &GeneratedMoeFinalize,
        args: Sm90LayerArgs,
    ) -> Result<Sm90LayerArgs, OpsError> {
        g[0].grouped_check(&args.gemm1).map_err(boxed)?;
        g[1].grouped_check(&args.gemm2).map_err(boxed)?;
        let (ids, weights) = self.moe_route(p, &p.layout90)?;
        let fin = MoeFinalizeArgs {
            topk_ids: ids,
            ..args.fin
        };
        gf.check(&fin).map_err(boxed)?;
        let gemm2 = Sm90GroupedArgs { weights, ..args.gemm2 };
        Ok(Sm90LayerArgs { gemm2, fin, ..args })
    }
}

/// What differs between the SM90 layers over `p.layout90` (bf16 / f16 and FP8 e4m3): the A
/// operands of GEMM1 and GEMM2 and the e4m3 scales (0 for bf16 / f16).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sm90Operands {
    /// GEMM1's and GEMM2's A (`[rows, H]` and `[rows, I]` in padded-row order).
    pub a: [u64; 2],
    /// The activation scale of each padded row (`[rows]` f32), both GEMMs.
    pub a_scale: u64,
    /// w13's and w2's per-output-channel scales (`[L, 2I]` and `[L, H]` f32).
    pub b_scale: [u64; 2],
}

/// The launch arguments of an SM90 layer: GEMM1 (SwiGLU into the intermediate rows),
/// GEMM2 (router weight, scatter to entry rows) and the finalize.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sm90LayerArgs {
    pub gemm1: Sm90GroupedArgs,
    pub gemm2: Sm90GroupedArgs,
    pub fin: MoeFinalizeArgs,
}

/// The arguments of the SM90 layer `p` over its layout `p.layout90` with `operands`, before
/// routing: GEMM2's `weights` and the finalize's `topk_ids` stay 0 until
/// [`Ops::route_sm90_layer`] fills them.
pub(super) fn sm90_layer_args(p: &MoeProblem, operands: &Sm90Operands) -> Sm90LayerArgs {
    let l = &p.layout90;
    let ws = p.workspace;
    let (h, i) = (p.hidden as i32, p.inter as i32);
    let common = Sm90GroupedArgs {
        sorted_ids: ws + l.sorted_ids as u64,
        block_expert: ws + l.block_expert as u64,
        total_rows: ws + l.total_rows as u64,
        offsets: ws + l.offsets as u64,
        m: l.cap.rows as i32,
        experts: p.local_experts as i32,
        entries: (p.tokens * p.topk) as i32,
        a_scale: operands.a_scale,
        ..Default::default()
    };
    // GEMM `g` (0 or 1) of weight `w` into the workspace region at `d`, `(N, K)`: A
    // `[rows, K]` and D `[rows or entries, N]` dense row-major (lda = K, ldd = N).
    let gemm = |g: usize, w: &Geometry, d: usize, (n, k): (i32, i32)| Sm90GroupedArgs {
        a: operands.a[g],
        b: w.ptr,
        b_scale: operands.b_scale[g],
        d: ws + d as u64,
        n,
        k,
        lda: i64::from(k),
        ldb: w.row_stride,
        ldd: i64::from(n),
        expert_stride: w.batch_stride,
        ..common
    };
    // The dynamic walks' counters (read only by `_dyn` kernels): GEMM1's, then GEMM2's.
    let gemm1 = Sm90GroupedArgs {
        up_first: p.options.up_first,
        work_counter: ws + l.walk as u64,
        ..gemm(0, &p.w13, l.inter, (i, h))
    };
    let gemm2 = Sm90GroupedArgs {
        work_counter: ws + l.walk as u64 + 4,
        ..gemm(1, &p.w2, l.entry_out, (h, i))
    };
    let fin = p.finalize_args(l, 0);
    Sm90LayerArgs { gemm1, gemm2, fin }
}
