//! [`Ops::fused_moe`]: the whole MoE layer on the GPU in five launches on the ops stream,
//! none waiting for the host (so a CUDA graph can capture it): top-k softmax (when routed
//! from logits), alignment, GEMM1 (gathered token rows x w13, SwiGLU), GEMM2 (x w2, router
//! weight, scattered to entry rows) and the deterministic finalize. Decode batches routed
//! from logits (T <= [`topk_align::MAX_TOKENS`]) run the top-k softmax and the alignment
//! as one launch; the smallest of them (at most 32 routed entries and
//! [`super::GEMM1_ROUTE_MAX_WEIGHT_BYTES`] of routed weights, [`super::gemm1_routes`]) are
//! routed by GEMM1 itself, with no routing launch at all
//! ([`rcute_kernel::grouped_gemm::route`]).

use super::kernels::spec_config;
use super::problem::{moe_tile, validate_fused_moe, MoeOptions, MoeProblem, MoeRouting, MoeWorkspace};
use crate::error::boxed;
use crate::error::OpsError;
use crate::stream::Uses;
use crate::tensor::{DType, MatrixMut, MatrixRef};
use crate::Ops;
use rcute_atom::Element;
use rcute_kernel::grouped_gemm::finalize;
use rcute_kernel::grouped_gemm::route::{RouteArgs, RouteLogits};
use rcute_kernel::grouped_gemm::{
    self, GeneratedGroupedGemm, GroupedA, GroupedEpilogue, GroupedGemmArgs, GroupedGemmConfig,
};
use rcute_kernel::moe_routing::topk_align;
use rcute_kernel::moe_routing::topk_softmax::{self, TopkSoftmaxArgs};
use rcute_kernel::moe_routing::{align, align_multi};
use rcute_kernel::{grid_dependency, CompileOptions, Function, KernelCache};

pub(crate) fn element(d: DType) -> Result<Element, OpsError> {
    Ok(match d {
        DType::BF16 => Element::BF16,
        DType::F16 => Element::F16,
        DType::F32 => Element::F32,
        other => return Err(OpsError::DType(format!("{} in a MoE op", other.name()))),
    })
}

/// cudarc's guards for one launch of a MoE layer on `stream`: reads of `x`, `w13`, `w2` and
/// the routing, writes of the workspace and `y`, held while the returned value lives.
pub(crate) fn layer_uses<'s>(
    stream: &'s cudarc::driver::CudaStream,
    inputs: [&MatrixRef<'s>; 3],
    routing: &MoeRouting<'s>,
    workspace: &'s mut MoeWorkspace<'_>,
    y: &'s mut MatrixMut<'_>,
) -> Result<Uses<'s>, OpsError> {
    let mut uses = Uses::new(stream)?;
    for v in inputs {
        uses.read(v.tracked());
    }
    match routing {
        MoeRouting::Logits { logits, .. } => uses.read(logits.tracked()),
        MoeRouting::Given { topk_ids, topk_weights } => {
            uses.read(topk_ids.tracked());
            uses.read(topk_weights.tracked());
        }
    }
    uses.write(workspace.tracked_mut());
    uses.write(y.tracked_mut());
    Ok(uses)
}

/// The fewest routed entries (`T * k`) from which [`align_on_ctas`] aligns them on several
/// CTAs ([`align_multi`]): two or more CTAs of [`align_multi::ENTRIES_PER_CTA`].
pub const ALIGN_CTAS_MIN_ENTRIES: usize = 4096;

/// The fewest local experts for which [`align_on_ctas`] aligns on several CTAs.
pub const ALIGN_CTAS_MIN_EXPERTS: usize = 16;

/// Whether the alignment of `entries` routed entries over `local` experts runs on several
/// CTAs when [`super::MoeOptions::align_ctas`] does not say: from
/// [`ALIGN_CTAS_MIN_ENTRIES`] entries over at least [`ALIGN_CTAS_MIN_EXPERTS`] experts.
/// On the H200 (BENCHMARKS.md, "Session 27 (helper align)" and the lead's confirmation
/// below it): at DeepSeek-V2-Lite T = 4096 (24576 entries, 12 CTAs) the alignment itself
/// takes 10.6-11.1 us against the single block's 22.8-23.7 (ncu), and the layer's CUDA
/// graph 901.5 / 902.9 against 906.1 / 906.8 us in one process (-0.5 %: the programmatic
/// dependent launch already hid part of the single block); at T = 1024 (3 CTAs) the
/// kernels take the same time and the layer -0.2 %. The helper's first process had shown
/// -5.6 % at T = 4096, mostly the rows' order. Mixtral T = 4096 (8192 entries over 8
/// experts) did not gain (4645.9 / 4669.6 -> 4707.1 / 4674.6 us): few experts keep the
/// single block (its pass 3 takes one ballot per bit of the expert, 4 for 8 experts
/// against 7 for 64).
///
/// ```
/// use rcute_ops::moe::align_on_ctas;
/// assert!(align_on_ctas(1024 * 6, 64)); // DeepSeek-V2-Lite T = 1024
/// assert!(!align_on_ctas(512 * 6, 64)); // T = 512: one block
/// assert!(!align_on_ctas(4096 * 2, 8)); // Mixtral T = 4096
/// ```
pub fn align_on_ctas(entries: usize, local: usize) -> bool {
    entries >= ALIGN_CTAS_MIN_ENTRIES && local >= ALIGN_CTAS_MIN_EXPERTS
}

/// The bytes of w2 that GEMM2 of the MoE layer may prefetch into L2 before it waits for
/// GEMM1: half the L2 (25 MiB on an H100 or H200), so that the prefetched lines and
/// GEMM1's last tiles in flight fit together. DeepSeek-V2-Lite at T = 1 (96 CTAs of 16 KiB
/// k-tiles) prefetches 16 of each CTA's 22 k-tiles; grids too large for one k-tile
/// each prefetch nothing. `RCUTE_MOE_PREFETCH` ([`super::MoePrefetch`]) turns parts off.
pub(crate) fn moe_prefetch_bytes(l2_bytes: u32) -> u64 {
    u64::from(l2_bytes) / 2
}

impl Ops {
    /// Compile (cached) and load the kernel `name` of a generated unit, once per name
    /// (the MoE units' names spell their whole configuration).
    pub(crate) fn moe_unit(&self, name: &str, source: &str) -> Result<Function, OpsError> {
        self.moe_units.get_or_try_build(&name.to_string(), || {
            let arch = self
                .gpu()
                .arch()
                .ok_or_else(|| OpsError::Arch(format!("compute capability {:?}", self.gpu().compute_capability())))?;
            crate::gemm::check_gemm_arch(self.gpu().compute_capability())?;
            let compiled = KernelCache::global()
                .get_or_compile(source, &format!("{name}.cu"), &CompileOptions::new(arch))
                .map_err(boxed)?;
            let module = self.gpu().load(&compiled).map_err(boxed)?;
            module.function(name).map_err(boxed)
        })
    }

    /// A grouped GEMM kernel, generated and loaded once per configuration.
    pub(crate) fn grouped_kernel(&self, cfg: &GroupedGemmConfig) -> Result<(GeneratedGroupedGemm, Function), OpsError> {
        self.moe_grouped.get_or_try_build(cfg, || {
            let g = grouped_gemm::generate(cfg).map_err(boxed)?;
            let f = self.moe_unit(&g.name, &g.source)?;
            Ok((g, f))
        })
    }

    /// The alignment of `ids` (device `[T, k]` int32) into the workspace regions of `p`'s
    /// layout: on several CTAs where `ctas` (`None`: [`align_on_ctas`]) says so, else one
    /// block.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn moe_align(
        &self,
        ids: u64,
        tokens: usize,
        topk: usize,
        expert_offset: usize,
        local: usize,
        ws: u64,
        l: &super::problem::WorkspaceLayout,
        ctas: Option<bool>,
    ) -> Result<(), OpsError> {
        if ctas.unwrap_or_else(|| align_on_ctas(tokens.saturating_mul(topk), local)) {
            return self.moe_align_ctas(ids, tokens, topk, expert_offset, local, ws, l);
        }
        let g = align::generate();
        let f = self.moe_unit(&g.name, &g.source)?;
        let a = l.align_args(ws, ids, tokens, topk, expert_offset, local);
        let ka = g.args(&a).map_err(boxed)?;
        let free_smem = f
            .gpu()
            .max_shared_per_block_optin()
            .saturating_sub(f.static_smem_bytes());
        let cfg = g.staged_launch_config(&a, free_smem).map_err(boxed)?;
        // SAFETY: `ids` holds T * k int32 (validated view or workspace region); the output
        // regions are sized by `align_capacity` for these shapes (the workspace layout).
        unsafe { grid_dependency::launch_chained(&f, cfg, ka) }.map_err(boxed)
    }

    /// [`Ops::moe_align`] on several CTAs: the count kernel, then the place kernel, both
    /// links of the chain ([`align_multi`]), the table in the layout's region.
    #[allow(clippy::too_many_arguments)]
    fn moe_align_ctas(
        &self,
        ids: u64,
        tokens: usize,
        topk: usize,
        expert_offset: usize,
        local: usize,
        ws: u64,
        l: &super::problem::WorkspaceLayout,
    ) -> Result<(), OpsError> {
        let g = align_multi::generate();
        let fc = self.moe_unit(&g.count.0, &g.count.1)?;
        let fp = self.moe_unit(&g.place.0, &g.place.1)?;
        let a = l.align_args(ws, ids, tokens, topk, expert_offset, local);
        let table = ws + l.align_table as u64;
        let count = g.count_args(&a, table, l.align_table_len).map_err(boxed)?;
        let place = g.place_args(&a, table, l.align_table_len).map_err(boxed)?;
        let cfg = g.launch_config(&a);
        // SAFETY: `ids` holds T * k int32; the table and the output regions are sized for
        // these shapes by the workspace layout (checked by `count_args` / `place_args`).
        unsafe {
            grid_dependency::launch_chained(&fc, cfg, count).map_err(boxed)?;
            grid_dependency::launch_chained(&fp, cfg, place).map_err(boxed)
        }
    }

    /// Top-k softmax of validated logits `lg [T, E]` into device `ids` / `weights`
    /// (`T * k` int32 / f32 each).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn moe_topk_softmax(
        &self,
        lg: &crate::tensor::Geometry,
        experts: usize,
        tokens: usize,
        topk: usize,
        renormalize: bool,
        ids: u64,
        weights: u64,
    ) -> Result<(), OpsError> {
        let g = topk_softmax::generate(element(lg.dtype)?, experts as u32).map_err(boxed)?;
        let f = self.moe_unit(&g.name, &g.source)?;
        let a = TopkSoftmaxArgs {
            logits: lg.ptr,
            topk_ids: ids,
            topk_weights: weights,
            tokens: tokens as i32,
            experts: experts as i32,
            topk: topk as i32,
            renormalize,
        };
        g.check(&a).map_err(boxed)?;
        // SAFETY: logits validated [T, E]; the caller's ids / weights hold T * k each.
        unsafe { grid_dependency::launch_chained(&f, g.launch_config(&a), g.args(&a)) }.map_err(boxed)
    }

    /// Top-k softmax of validated logits `lg [T, E]` into the workspace regions of `l`,
    /// then their alignment, in one launch (T <= [`topk_align::MAX_TOKENS`]).
    #[allow(clippy::too_many_arguments)]
    fn moe_topk_align(
        &self,
        lg: &crate::tensor::Geometry,
        experts: usize,
        renormalize: bool,
        p: &MoeProblem,
        l: &super::problem::WorkspaceLayout,
    ) -> Result<(u64, u64), OpsError> {
        let ws = p.workspace;
        let g = topk_align::generate(element(lg.dtype)?, experts as u32).map_err(boxed)?;
        let f = self.moe_unit(&g.name, &g.source)?;
        let (ids, weights) = (ws + l.topk_ids as u64, ws + l.topk_weights as u64);
        let t = TopkSoftmaxArgs {
            logits: lg.ptr,
            topk_ids: ids,
            topk_weights: weights,
            tokens: p.tokens as i32,
            experts: experts as i32,
            topk: p.topk as i32,
            renormalize,
        };
        let a = l.align_args(ws, ids, p.tokens, p.topk, p.options.expert_offset, p.local_experts);
        let ka = g.args(&t, &a).map_err(boxed)?;
        // SAFETY: logits validated [T, E]; the ids / weights and the alignment's regions
        // are workspace regions sized by the layout for these shapes.
        unsafe { grid_dependency::launch_chained(&f, g.launch_config(), ka) }.map_err(boxed)?;
        Ok((ids, weights))
    }

    /// GEMM1's own routing of layer `p` run on `spec` (the streamed forms and the prepared
    /// weight never route: [`super::gemm1_routes`]): the logits' kind for GEMM1's
    /// configuration and its routing arguments (ids and weights in the workspace regions
    /// of `p`'s layout), or `None` for the routing kernels.
    fn gemm1_route(
        &self,
        p: &MoeProblem,
        spec: &crate::tuning::MoeSpec,
        prepared: bool,
    ) -> Result<(Option<RouteLogits>, Option<RouteArgs>), OpsError> {
        let Some((lg, renormalize)) = p.logits else {
            return Ok((None, None));
        };
        let case = super::RouteCase {
            tokens: p.tokens,
            topk: p.topk,
            local: p.local_experts,
            expert_bytes: 3 * p.hidden * p.inter * p.dtype.bytes(),
            logits: true,
            tile_grid: !spec.streamed && !prepared,
            tuned: spec.route,
        };
        if !super::gemm1_routes(p.options.route, &case) {
            return Ok((None, None));
        }
        let (ws, l) = (p.workspace, &p.layout);
        let experts = p.experts.unwrap_or(lg.cols);
        let logits = RouteLogits::new(element(lg.dtype)?, experts as u32).map_err(boxed)?;
        let args = RouteArgs {
            logits: lg.ptr,
            experts: experts as i32,
            renormalize,
            topk_ids: ws + l.topk_ids as u64,
            topk_weights: ws + l.topk_weights as u64,
            counts: ws + l.counts as u64,
            offsets: ws + l.offsets as u64,
        };
        Ok((Some(logits), Some(args)))
    }

    /// The routing of a validated layer into the regions of `l`: top-k softmax of the
    /// logits (or the caller's ids and weights as they are), then the alignment (one
    /// launch for both from logits of at most [`topk_align::MAX_TOKENS`] tokens); returns
    /// the device `(topk_ids, topk_weights)`.
    pub(crate) fn moe_route(
        &self,
        p: &MoeProblem,
        l: &super::problem::WorkspaceLayout,
    ) -> Result<(u64, u64), OpsError> {
        let ws = p.workspace;
        let (ids, weights) = match (p.logits, p.ids) {
            (Some((lg, renorm)), _) if p.tokens <= topk_align::MAX_TOKENS => {
                let e = p.experts.unwrap_or(lg.cols);
                return self.moe_topk_align(&lg, e, renorm, p, l);
            }
            (Some((lg, renorm)), _) => {
                let e = p.experts.unwrap_or(lg.cols);
                let (ids, w) = (ws + l.topk_ids as u64, ws + l.topk_weights as u64);
                self.moe_topk_softmax(&lg, e, p.tokens, p.topk, renorm, ids, w)?;
                (ids, w)
            }
            (None, Some((i, w))) => (i.ptr, w.ptr),
            (None, None) => return Err(OpsError::Shape("no routing".into())),
        };
        self.moe_align(
            ids,
            p.tokens,
            p.topk,
            p.options.expert_offset,
            p.local_experts,
            ws,
            l,
            p.options.align_ctas,
        )?;
        Ok((ids, weights))
    }

    /// The fused MoE layer: `y[t] = sum over the routed local experts e of weight(t, e) *
    /// W2_e (silu(Wgate_e x_t) * (Wup_e x_t))`, with `x [T, H]`, `w13 [L, 2I, H]` (rows
    /// `0..I` the gate, `I..2I` the up projection; a batched row-major view, batch `L`),
    /// `w2 [L, H, I]`, `y [T, H]` (bf16 or f16, all one type) and routing from logits or
    /// the caller ([`MoeRouting`]). With expert parallelism (`opts.expert_offset`, `L` the
    /// experts held here) tokens routed elsewhere contribute nothing, so the GPUs' outputs
    /// sum to the full layer. The workspace ([`super::fused_moe_workspace_bytes`]) can be
    /// reused; the layer never synchronizes with the host, and two runs are bit-identical.
    /// The grouped GEMMs are the SM80 (`mma.sync`) family, or on sm_90 once the experts
    /// average [`super::SM90_MIN_ROWS_PER_EXPERT`] routed rows the SM90 (TMA + `wgmma`)
    /// family; [`MoeOptions::path`] forces either ([`super::MoePath`]).
    ///
    /// # Errors
    ///
    /// Before any launch: element types ([`OpsError::DType`]), shapes (w13 / w2 / y / the
    /// routing not matching x, `k > E`, `k > 32`, more than 256 experts, the local range
    /// past the logits' experts: [`OpsError::Shape`]), empty `x` or weights
    /// ([`OpsError::Empty`]), `H` or `I` not multiples of 8, misaligned operands
    /// ([`OpsError::Alignment`]), views past their buffers or a workspace that is too
    /// small ([`OpsError::OutOfBounds`]), non-row-major or overlapping operands
    /// ([`OpsError::Strides`]).
    ///
    /// ```no_run
    /// use rcute_ops::moe::{fused_moe_workspace_bytes, MoeOptions, MoeRouting, MoeWorkspace};
    /// use rcute_ops::{bf16, DType, Gpu, MatrixMut, MatrixRef, Ops, OpsError};
    ///
    /// fn main() -> Result<(), OpsError> {
    ///     let Some(gpu) = Gpu::detect()? else { return Ok(()) };
    ///     let ops = Ops::new(gpu);
    ///     let s = ops.gpu().stream().clone();
    ///     let (t, e, k, h, i) = (4, 8, 2, 4096, 14336); // Mixtral
    ///     let x = s.alloc_zeros::<bf16>(t * h)?;
    ///     let logits = s.alloc_zeros::<f32>(t * e)?;
    ///     let w13 = s.alloc_zeros::<bf16>(e * 2 * i * h)?;
    ///     let w2 = s.alloc_zeros::<bf16>(e * h * i)?;
    ///     let mut y = s.alloc_zeros::<bf16>(t * h)?;
    ///     let mut ws = s.alloc_zeros::<u8>(fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16)?)?;
    ///     let routing = MoeRouting::Logits { logits: MatrixRef::new(&logits, t, e), topk: k, renormalize: true };
    ///     ops.fused_moe(
    ///         &MatrixRef::new(&x, t, h),
    ///         &MatrixRef::new(&w13, 2 * i, h).batched(e, (2 * i * h) as i64),
    ///         &MatrixRef::new(&w2, h, i).batched(e, (h * i) as i64),
    ///         &routing,
    ///         &MoeOptions::default(),
    ///         &mut MoeWorkspace::new(&mut ws),
    ///         &mut MatrixMut::new(&mut y, t, h),
    ///     )?;
    ///     ops.gpu().synchronize()?;
    ///     Ok(())
    /// }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn fused_moe(
        &self,
        x: &MatrixRef<'_>,
        w13: &MatrixRef<'_>,
        w2: &MatrixRef<'_>,
        routing: &MoeRouting<'_>,
        opts: &MoeOptions,
        workspace: &mut MoeWorkspace<'_>,
        y: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let p = validate_fused_moe(x, w13, w2, routing, opts, workspace, y)?;
        self.check_devices(&[("x", &p.x), ("w13", &p.w13), ("w2", &p.w2), ("y", &p.y)])?;
        let _uses = layer_uses(self.stream(), [x, w13, w2], routing, workspace, y)?;
        self.run_fused_moe(&p)
    }

    /// Launch a validated layer (the kernels are loaded first, so a failed compilation
    /// leaves `y` untouched): a forced SM90 path ([`super::MoePath::Sm90`],
    /// [`super::MoePath::Sm90Narrow`], [`super::MoePath::Sm90Cluster`],
    /// [`super::MoePath::Sm90PingPong`], ...) as asked; else the configuration of either family a
    /// tuning table holds for it (or `RCUTE_TUNING=on-miss` measures:
    /// `crate::tuning::moe_problem_key`; with [`super::MoePath::Sm80`] only SM80 entries),
    /// else the rules' choice (`Ops::run_fused_moe_rules`).
    pub fn run_fused_moe(&self, p: &MoeProblem) -> Result<(), OpsError> {
        if p.options.path.forces_sm90() {
            self.moe_sm90_runs(p)?;
            return self.launch_fused_moe_sm90(p);
        }
        if let Some(spec) = self.tuned_moe(p) {
            return self.run_fused_moe_spec(p, &spec);
        }
        self.run_fused_moe_rules(p)
    }

    /// [`Ops::run_fused_moe`] with the rules' choice, whatever the tables say: the SM90
    /// family where [`super::sm90_chosen`] picks it (GEMM2's tile by
    /// [`super::sm90_gemm2_tile`]), else the SM80 family with the rules' tile
    /// ([`moe_tile`]) and GEMM2 splits ([`super::moe_splits`]).
    pub(crate) fn run_fused_moe_rules(&self, p: &MoeProblem) -> Result<(), OpsError> {
        if self.moe_sm90_runs(p)? {
            return self.launch_fused_moe_sm90(p);
        }
        let (tile, warps) = moe_tile(p.tokens * p.topk, p.local_experts);
        self.launch_fused_moe(p, &crate::tuning::MoeSpec::new(tile, warps, p.layout.splits as u32))
    }

    /// Launch a validated layer whose workspace layout was made for `spec`'s row tile and
    /// GEMM2 splits (see [`Ops::run_fused_moe_with`]; the layout's splits are the ones
    /// run), both grouped GEMMs on `spec`'s tile, warps, stages (`None`: the mainloop's
    /// automatic count) and weight loads (`l2_prefetch`), GEMM2 on stream-K over the SMs
    /// when `spec.stream` (its segments in the layout's split slabs, at least 2).
    pub(crate) fn launch_fused_moe(&self, p: &MoeProblem, spec: &crate::tuning::MoeSpec) -> Result<(), OpsError> {
        self.launch_fused_moe_on(p, spec, None)
    }

    /// [`Ops::launch_fused_moe`], with `prepared` = the block strides of the prepared
    /// `w13` / `w2` ([`super::MoeWeights`]) in `p` for the streamed `_prep` kernels.
    pub(crate) fn launch_fused_moe_on(
        &self,
        p: &MoeProblem,
        spec: &crate::tuning::MoeSpec,
        prepared: Option<[i64; 2]>,
    ) -> Result<(), OpsError> {
        let _scope = self.launch_scope();
        let el = element(p.dtype)?;
        let l = &p.layout;
        let ws = p.workspace;
        let config = |a, ep| spec_config(el, spec, a, ep).with_prepared(prepared.is_some());
        let (route, route_args) = self.gemm1_route(p, spec, prepared.is_some())?;
        let (g1, f1) = self.grouped_kernel(&config(GroupedA::Gathered, GroupedEpilogue::SwiGlu).with_route(route))?;
        let (g2, f2) = self.grouped_kernel(&config(GroupedA::Rows, GroupedEpilogue::Scatter))?;
        let [ldb13, ldb2] = prepared.unwrap_or([p.w13.row_stride, p.w2.row_stride]);
        let gf = finalize::generate(el).map_err(boxed)?;
        let ff = self.moe_unit(&gf.name, &gf.source)?;
        let (ids, weights) = match route_args {
            // GEMM1's first CTA writes them
            Some(r) => (r.topk_ids, r.topk_weights),
            None => self.moe_route(p, l)?,
        };
        let (h, i) = (p.hidden as i32, p.inter as i32);
        let entries = (p.tokens * p.topk) as i32;
        let (prefetch, budget) = (
            super::MoePrefetch::from_env(),
            moe_prefetch_bytes(self.gpu().l2_bytes()),
        );
        let common = GroupedGemmArgs {
            sorted_ids: ws + l.sorted_ids as u64,
            block_expert: ws + l.block_expert as u64,
            total_rows: ws + l.total_rows as u64,
            m: l.cap.rows as i32,
            entries,
            topk: p.topk as i32,
            ..Default::default()
        };
        let gemm1 = GroupedGemmArgs {
            a: p.x.ptr,
            b: p.w13.ptr,
            d: ws + l.inter as u64,
            n: i,
            k: h,
            lda: p.x.row_stride,
            ldb: ldb13,
            ldd: i64::from(i),
            expert_stride: p.w13.batch_stride,
            up_first: p.options.up_first,
            ..common
        };
        let gemm2 = GroupedGemmArgs {
            a: ws + l.inter as u64,
            b: p.w2.ptr,
            d: ws + l.entry_out as u64,
            weights,
            n: h,
            k: i,
            lda: i64::from(i),
            ldb: ldb2,
            ldd: i64::from(h),
            expert_stride: p.w2.batch_stride,
            splits: l.splits as i32,
            split_stride: (p.tokens * p.topk * p.hidden) as i64,
            // the alignment ran two links before GEMM2: its CTAs may prefetch their w2
            // tiles into L2 before they wait for GEMM1 (`moe_prefetch_bytes`)
            prefetch_bytes: if prefetch.gemm2() { budget } else { 0 },
            experts: p.local_experts as i32,
            // one CTA per SM (stream-K kernels only; their CTAs do not prefetch)
            stream_ctas: self.gpu().sm_count(),
            ..common
        };
        // GEMM1's CTAs find their experts in the top-k ids (two links back: the top-k
        // kernel's or the caller's) and prefetch while the alignment runs; GEMM2's CTAs
        // fill GEMM1's tail where they cannot share an SM with GEMM1's
        let gemm1 = GroupedGemmArgs {
            prefetch_bytes: if prefetch.gemm1() { budget } else { 0 },
            experts: p.local_experts as i32,
            prefetch_ids: if route_args.is_some() { 0 } else { ids },
            expert_offset: p.options.expert_offset as i32,
            route: route_args,
            // (the prepared streamed kernels hold an SM by their registers, not shared memory)
            tail_trigger: prefetch.tail()
                && g2.prefetch_k_tiles(&gemm2) > 0
                && (prepared.is_some()
                    || grid_dependency::tail_trigger(
                        g1.smem_bytes,
                        g2.smem_bytes,
                        self.gpu().max_shared_per_block_optin(),
                    )),
            ..gemm1
        };
        let fin = p.finalize_args(l, ids);
        g1.check(&gemm1).map_err(boxed)?;
        g2.check(&gemm2).map_err(boxed)?;
        gf.check(&fin).map_err(boxed)?;
        // SAFETY: validated views (x [T, H], w13 [L, 2I, H], w2 [L, H, I], y [T, H]) and
        // workspace regions sized for these shapes by the layout; A rows gathered by the
        // alignment's entries are tokens < T.
        unsafe {
            g1.launch(&f1, &gemm1).map_err(boxed)?;
            g2.launch(&f2, &gemm2).map_err(boxed)?;
            gf.launch(&ff, &fin).map_err(boxed)?;
        }
        Ok(())
    }
}
