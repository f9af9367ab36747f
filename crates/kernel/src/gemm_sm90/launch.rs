//! Launch side: the TMA tensor maps, the launch configuration, argument validation and
//! the launch functions.

use super::*;
use crate::stream_k::{StreamKError, StreamKPlan};

/// One scalar argument of the main kernel ([`GeneratedGemmSm90::tail_args`], and the
/// grouped launch's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TailArg {
    /// An `int`.
    I32(i32),
    /// A `long long`.
    I64(i64),
    /// A pointer or an `unsigned long long`.
    U64(u64),
}

impl TailArg {
    /// `ka` with this argument appended.
    pub(super) fn push(self, ka: KernelArgs) -> KernelArgs {
        match self {
            TailArg::I32(v) => ka.i32(v),
            TailArg::I64(v) => ka.i64(v),
            TailArg::U64(v) => ka.u64(v),
        }
    }
}

/// The tile scheduler's five kernel parameters, in order ([`SchedulerParams::device_args`]).
pub(super) const SCHED_PARAMS: [&str; 5] = [
    "sched_tiles_m",
    "sched_tiles_n",
    "sched_batches",
    "sched_along_n",
    "sched_log_swizzle",
];

/// The scheduler's arguments, each with the name of the parameter it fills.
pub(super) fn sched_args(p: &SchedulerParams) -> [(&'static str, TailArg); 5] {
    let values = p.device_args();
    std::array::from_fn(|i| (SCHED_PARAMS[i], TailArg::I32(values[i])))
}

pub(super) fn tmap(
    elem: Element,
    dims: [u64; 3],
    strides_elems: [u64; 2],
    boxd: [u32; 3],
    swizzle: rcute_atom::tma::TmaSwizzle,
) -> Result<TmaEncodeArgs, GemmError> {
    let eb = elem.bytes() as u64;
    Ok(TmaEncodeArgs {
        data_type: tma_data_type(elem).ok_or_else(|| cfg_err(format!("no TMA type for {}", elem.ptx())))?,
        rank: 3,
        global_dim: dims.to_vec(),
        global_strides: strides_elems.iter().map(|s| s * eb).collect(),
        box_dim: boxd.to_vec(),
        element_strides: vec![1, 1, 1],
        interleave: 0,
        swizzle: swizzle.code(),
        l2_promotion: rcute_atom::tma::L2Promotion::B256.code(),
        oob_fill: rcute_atom::tma::OobFill::Zero.code(),
    })
}

impl GeneratedGemmSm90 {
    /// Output tiles of a problem.
    pub fn tiles(&self, m: i32, n: i32, l: i32) -> u64 {
        let [bm, bn, _] = self.config.tile;
        (m as u64).div_ceil(bm as u64) * (n as u64).div_ceil(bn as u64) * l as u64
    }

    /// Bytes of f32 workspace split-K needs (`split_k * L * M * N` partial sums; 0 without
    /// split-K).
    pub fn workspace_bytes(&self, m: i32, n: i32, l: i32, split_k: u32) -> usize {
        if split_k <= 1 {
            return 0;
        }
        split_k as usize * l.max(0) as usize * m.max(0) as usize * n.max(0) as usize * 4
    }

    /// Bytes of f32 partial sums a stream-K kernel needs on at most `max_ctas` CTAs (two
    /// slots of one tile per CTA; 0 without stream-K), whatever the problem.
    pub fn stream_k_workspace_bytes(&self, max_ctas: u32) -> usize {
        if !self.config.stream_k {
            return 0;
        }
        let [bm, bn, _] = self.config.tile;
        2 * max_ctas as usize * (bm * bn) as usize * 4
    }

    /// Bytes of the stream-K tile counters on at most `max_ctas` CTAs (one `u32` per
    /// stream-K tile and reduction group; 0 without stream-K), zero before the first
    /// launch and left zero by each.
    pub fn stream_k_counter_bytes(&self, max_ctas: u32) -> usize {
        if !self.config.stream_k {
            return 0;
        }
        max_ctas as usize * self.stream_k_groups() * 4
    }

    /// The groups that reduce a stream-K tile on their own, each with its counter: the
    /// cooperative consumer warpgroups (each its rows), one ping-pong warpgroup (the tile).
    fn stream_k_groups(&self) -> usize {
        match self.config.schedule {
            Sm90Schedule::Cooperative => self.plan.consumers as usize,
            _ => 1,
        }
    }

    /// The stream-K plan of a launch on at most `max_ctas` CTAs (`None` without stream-K).
    pub fn stream_k_plan(&self, args: &GemmArgs, max_ctas: u32) -> Result<Option<StreamKPlan>, GemmError> {
        if !self.config.stream_k {
            return Ok(None);
        }
        let p = self.scheduler_params(args)?;
        let lc = self.launch_config(args, max_ctas)?;
        let ctas = lc.grid.x * lc.grid.y * lc.grid.z;
        let k_tiles = (args.k.max(0) as u64).div_ceil(self.config.tile[2] as u64);
        let k_tiles = u32::try_from(k_tiles).unwrap_or(u32::MAX);
        Ok(Some(StreamKPlan::with_parts(
            p.total_work,
            ctas,
            k_tiles,
            self.config.stream_k_parts,
        )?))
    }

    /// The stream-K kernel arguments (`sk_tiles`, `sk_units`, counters) after checking the
    /// workspace and the counters against the plan.
    fn stream_k_args(&self, args: &GemmArgs, max_ctas: u32) -> Result<Option<([i32; 2], u64)>, GemmError> {
        let Some(plan) = self.stream_k_plan(args, max_ctas)? else {
            return Ok(None);
        };
        if args.split_k > 1 {
            return Err(GemmError::Shape(format!(
                "split_k = {}: a stream-K kernel splits K itself",
                args.split_k
            )));
        }
        if plan.sk_tiles > 0 {
            let [bm, bn, _] = self.config.tile;
            let need = plan.slots() * (bm * bn) as usize * 4;
            let counters = plan.counters(self.stream_k_groups()) * 4;
            let small = |what, need, have| StreamKError::TooSmall { what, need, have };
            if args.workspace == 0 || !args.workspace.is_multiple_of(16) || args.workspace_bytes < need {
                return Err(small("16-byte aligned workspace", need, args.workspace_bytes).into());
            }
            if args.semaphores == 0 || !args.semaphores.is_multiple_of(4) || args.semaphore_bytes < counters {
                return Err(small("zeroed counters", counters, args.semaphore_bytes).into());
            }
        }
        Ok(Some((plan.device_args(), args.semaphores)))
    }

    /// The main kernel's arguments after its fusion struct, in parameter order, each with the
    /// name of the parameter it fills (the unit test below holds the names to the emitted
    /// signature): the workspace, `split_k` (not for stream-K, which splits K itself), the
    /// tile scheduler's five parameters, `early_trigger`, and for stream-K its plan and
    /// counters ([`Self::stream_k_args`]).
    fn tail_args(
        &self,
        args: &GemmArgs,
        early_trigger: bool,
        max_ctas: u32,
    ) -> Result<Vec<(&'static str, TailArg)>, GemmError> {
        let mut v = vec![];
        if self.config.takes_workspace() {
            v.push(("workspace", TailArg::U64(args.workspace)));
        }
        if self.config.takes_split_k() {
            v.push(("split_k", TailArg::I32(args.split_k as i32)));
        }
        v.extend(sched_args(&self.scheduler_params(args)?));
        v.push(("early_trigger", TailArg::I32(i32::from(early_trigger))));
        if let Some(([sk_tiles, units], counters)) = self.stream_k_args(args, max_ctas)? {
            v.extend([
                ("sk_tiles", TailArg::I32(sk_tiles)),
                ("sk_units", TailArg::I32(units)),
                ("sk_counters", TailArg::U64(counters)),
            ]);
        }
        Ok(v)
    }

    /// The tile scheduler's parameters for a problem (its batches are `(split, batch)`
    /// pairs with split-K).
    pub fn scheduler_params(&self, args: &GemmArgs) -> Result<SchedulerParams, GemmError> {
        let [bm, bn, _] = self.config.tile;
        scheduler(&self.config)
            .params(
                args.m.max(0) as u64,
                args.n.max(0) as u64,
                args.l.max(0) as u64 * args.split_k.max(1) as u64,
                bm as u32,
                bn as u32,
            )
            .map_err(|e| GemmError::Shape(e.to_string()))
    }

    /// The launch configuration: one CTA per work id for the non-persistent schedule; for
    /// the persistent ones at most `max_ctas` CTAs (usually the SM count), as the tile
    /// scheduler lays them out.
    pub fn launch_config(&self, args: &GemmArgs, max_ctas: u32) -> Result<LaunchConfig, GemmError> {
        self.launch_config_with(args, max_ctas, None)
    }

    /// [`Self::launch_config`] with, for a persistent kernel on clusters of several CTAs,
    /// at most `max_active_clusters` clusters (what [`Function::max_active_clusters`] says
    /// fit on the GPU at once: the tile scheduler's [`TileScheduler::grid`]).
    ///
    /// [`TileScheduler::grid`]: crate::tile_scheduler::TileScheduler::grid
    pub fn launch_config_with(
        &self,
        args: &GemmArgs,
        max_ctas: u32,
        max_active_clusters: Option<u32>,
    ) -> Result<LaunchConfig, GemmError> {
        let p = self.scheduler_params(args)?;
        let [cm, cn] = self.config.cluster;
        let ctas = if persistent(self.config.schedule) {
            max_ctas.max(1)
        } else {
            (p.total_work * (cm * cn) as u64).min(u32::MAX as u64) as u32
        };
        let grid = scheduler(&self.config)
            .grid(&p, ctas, max_active_clusters)
            .map_err(|e| GemmError::Shape(e.to_string()))?;
        // The kernel waits on its grid dependency first thing (`kernel::grid_dependency`).
        let lc = LaunchConfig::new(grid, self.threads)
            .with_dynamic_smem(self.smem_bytes)
            .with_programmatic_dependency(true);
        Ok(if cm * cn > 1 {
            lc.with_cluster(p.cluster_dim())
        } else {
            lc
        })
    }

    /// The tensor-map arguments of A, B, C and D for `args` (validated).
    pub fn tensor_maps(&self, args: &GemmArgs) -> Result<[TmaEncodeArgs; 4], GemmError> {
        let uses_c = self.uses_c(args)?;
        self.tensor_maps_with(args, uses_c)
    }

    /// The fusion arguments of the preset fusions from `args`: `alpha` and `beta` for the
    /// linear combination, `alpha` for the C-less scale; other trees need
    /// [`launch_fused`] with their own [`FusionArgs`].
    pub fn default_fusion_args(&self, args: &GemmArgs) -> Result<FusionArgs, GemmError> {
        let f = &self.config.fusion;
        let names: Vec<String> = f.params().into_iter().map(|p| p.name).collect();
        match names.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["alpha", "beta"] => Ok(FusionArgs::new().f32("alpha", args.alpha).f32("beta", args.beta)),
            ["alpha"] => {
                if args.beta != 0.0 {
                    return Err(GemmError::Shape(
                        "beta != 0 but this kernel was generated without C".into(),
                    ));
                }
                Ok(FusionArgs::new().f32("alpha", args.alpha))
            }
            _ => Err(GemmError::Config(format!(
                "fusion {} takes arguments {names:?}: launch it with launch_fused",
                f.name()
            ))),
        }
    }

    fn uses_c(&self, args: &GemmArgs) -> Result<bool, GemmError> {
        match self.default_fusion_args(args) {
            Ok(fa) => self
                .config
                .fusion
                .needs_source(&fa)
                .map_err(|e| GemmError::Config(format!("fusion: {e}"))),
            Err(GemmError::Config(_)) => Ok(self.config.with_c()),
            Err(e) => Err(e),
        }
    }

    fn tensor_maps_with(&self, args: &GemmArgs, uses_c: bool) -> Result<[TmaEncodeArgs; 4], GemmError> {
        self.validate_with(args, uses_c)?;
        let cfg = &self.config;
        // C and D move in the boxes of one epilogue group's subtile.
        let [em, en] = self.plan.group_tile;
        let (m, n, k, l) = (args.m as u64, args.n as u64, args.k.max(1) as u64, args.l as u64);
        // A batch stride is irrelevant for L = 1 but must still be a valid TMA stride.
        let bs = |s: i64, ld: i64, rows: u64| {
            if l == 1 {
                (ld as u64 * rows).div_ceil(8) * 8
            } else {
                s as u64
            }
        };
        // A and B: the collective mainloop's boxes (each CTA's multicast slice) and swizzles.
        let ml = &self.plan.mainloop;
        let [a_in, a_out] = ml.tma_multicast_box_a;
        let [b_in, b_out] = ml.tma_multicast_box_b;
        let a = tmap(
            cfg.ab,
            [k, m, l],
            [args.lda as u64, bs(args.batch_stride_a, args.lda, m)],
            [a_in, a_out, 1],
            ml.tma_swizzle_a,
        )?;
        let b = tmap(
            cfg.ab,
            [k, n, l],
            [args.ldb as u64, bs(args.batch_stride_b, args.ldb, n)],
            [b_in, b_out, 1],
            ml.tma_swizzle_b,
        )?;
        // C and D: the epilogue group's subtile box and D's swizzle (C is read with D's
        // swizzled addressing, so its map uses the same swizzle).
        let sw = self.plan.epilogue.tma_swizzle_d;
        let ldc = if !uses_c { args.ldd } else { args.ldc };
        let bsc = if !uses_c {
            args.batch_stride_d
        } else {
            args.batch_stride_c
        };
        let cmap = tmap(
            cfg.cd,
            [n, m, l],
            [ldc as u64, bs(bsc, ldc, m)],
            [en as u32, em as u32, 1],
            sw,
        )?;
        let dmap = tmap(
            cfg.cd,
            [n, m, l],
            [args.ldd as u64, bs(args.batch_stride_d, args.ldd, m)],
            [en as u32, em as u32, 1],
            sw,
        )?;
        Ok([a, b, cmap, dmap])
    }

    /// Check the arguments against the kernel's rules.
    pub fn validate(&self, a: &GemmArgs) -> Result<(), GemmError> {
        let uses_c = self.uses_c(a)?;
        self.validate_with(a, uses_c)
    }

    /// [`GeneratedGemmSm90::validate`] when the fusion reads C (`uses_c`) or not.
    fn validate_with(&self, a: &GemmArgs, uses_c: bool) -> Result<(), GemmError> {
        let shape = |s: String| Err(GemmError::Shape(s));
        let align = |s: String| Err(GemmError::Alignment(s));
        if a.m < 1 || a.n < 1 || a.l < 1 || a.k < 0 {
            return shape(format!(
                "need M, N, L >= 1 and K >= 0, got M={} N={} K={} L={}",
                a.m, a.n, a.k, a.l
            ));
        }
        if a.split_k < 1 || a.split_k > MAX_SPLIT_K {
            return shape(format!("split_k = {} must be in 1..={MAX_SPLIT_K}", a.split_k));
        }
        if a.split_k > 1 && (a.workspace == 0 || !a.workspace.is_multiple_of(16)) {
            return shape(format!(
                "split_k = {} needs a 16-byte aligned workspace of workspace_bytes()",
                a.split_k
            ));
        }
        let (n, k) = (a.n as i64, a.k as i64);
        // TMA moves whole 16-byte chunks at the contiguous edge of a tensor (a store
        // past N would overwrite the row's padding; a load past K would read it), so the
        // contiguous extents must be multiples of 16 bytes, as CUTLASS's TMA kernels
        // require of their alignment.
        if (k * self.config.ab.bytes() as i64) % 16 != 0 {
            return align(format!(
                "K = {k} is not a multiple of {} (16 bytes of A and B rows)",
                16 / self.config.ab.bytes()
            ));
        }
        if (n * self.config.cd.bytes() as i64) % 16 != 0 {
            return align(format!(
                "N = {n} is not a multiple of {} (16 bytes of C and D rows)",
                16 / self.config.cd.bytes()
            ));
        }
        let eb = self.config.ab.bytes() as i64;
        let db = self.config.cd.bytes() as i64;
        for (what, ld, min) in [("lda", a.lda, k), ("ldb", a.ldb, k), ("ldd", a.ldd, n)] {
            if ld < min.max(1) {
                return shape(format!("{what} = {ld} is smaller than {}", min.max(1)));
            }
        }
        if uses_c && a.c == 0 {
            return shape("the fusion reads C but C is null".into());
        }
        if uses_c && a.ldc < n {
            return shape(format!("ldc = {} is smaller than N = {n}", a.ldc));
        }
        for (what, v, bytes) in [("lda", a.lda, eb), ("ldb", a.ldb, eb), ("ldd", a.ldd, db)] {
            if (v * bytes) % 16 != 0 {
                return align(format!("{what} = {v} elements is not a multiple of 16 bytes (TMA)"));
            }
        }
        if a.l > 1 {
            for (what, v, bytes) in [
                ("batch_stride_a", a.batch_stride_a, eb),
                ("batch_stride_b", a.batch_stride_b, eb),
                ("batch_stride_d", a.batch_stride_d, db),
            ] {
                if v <= 0 || (v * bytes) % 16 != 0 {
                    return align(format!(
                        "{what} = {v} elements is not a positive multiple of 16 bytes (TMA)"
                    ));
                }
            }
        }
        if uses_c {
            if (a.ldc * db) % 16 != 0 || (a.l > 1 && (a.batch_stride_c <= 0 || (a.batch_stride_c * db) % 16 != 0)) {
                return align(format!(
                    "ldc = {} / batch_stride_c = {} are not multiples of 16 bytes (TMA)",
                    a.ldc, a.batch_stride_c
                ));
            }
            if !a.c.is_multiple_of(16) {
                return align(format!("C at {:#x} is not 16-byte aligned", a.c));
            }
        }
        for (what, ptr) in [("A", a.a), ("B", a.b), ("D", a.d)] {
            if ptr % 16 != 0 {
                return align(format!("{what} at {ptr:#x} is not 16-byte aligned"));
            }
        }
        Ok(())
    }
}

/// Launch the SM90 GEMM with at most `max_ctas` persistent CTAs (usually the SM count) on
/// the thread's launch stream: the one a [`crate::stream_scope::StreamScope`] entered, else
/// the function's GPU's stream.
///
/// # Safety
///
/// The pointers in `args` must be device addresses of buffers that hold the matrices
/// described by the sizes, leading dimensions and batch strides, valid until the kernel
/// finishes.
pub unsafe fn launch(f: &Function, g: &GeneratedGemmSm90, args: &GemmArgs, max_ctas: u32) -> Result<(), GemmError> {
    let fa = g.default_fusion_args(args)?;
    // SAFETY: as documented for this function.
    unsafe { launch_fused(f, g, args, &fa, max_ctas) }
}

/// Launch with the arguments of the configuration's fusion (scales, bias pointers, ...);
/// `args.alpha` and `args.beta` are ignored.
///
/// # Safety
///
/// As for [`launch`]; additionally every pointer in `fusion_args` must address the
/// vectors / matrices the fusion reads or writes, valid until the kernel finishes.
pub unsafe fn launch_fused(
    f: &Function,
    g: &GeneratedGemmSm90,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
    max_ctas: u32,
) -> Result<(), GemmError> {
    // SAFETY: as documented for this function.
    unsafe { launch_inner(f, None, g, args, fusion_args, max_ctas) }
}

/// Launch with split-K (`args.split_k > 1`; 1 runs only `main`): `main` writes f32
/// partial sums of each split into `args.workspace`
/// ([`GeneratedGemmSm90::workspace_bytes`]), then `reduce` (the unit's
/// `<name>_splitk_reduce`) sums them and applies the fusion, C and D. A unit without a
/// reduction ([`GeneratedGemmSm90::reduce_name`] `None`: stream-K, grouped) is an error
/// here; launch it with [`launch_fused`].
///
/// # Safety
///
/// As for [`launch_fused`]; additionally `args.workspace` must hold
/// [`GeneratedGemmSm90::workspace_bytes`] bytes.
pub unsafe fn launch_split_k(
    main: &Function,
    reduce: &Function,
    g: &GeneratedGemmSm90,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
    max_ctas: u32,
) -> Result<(), GemmError> {
    let Some(reduce_name) = &g.reduce_name else {
        return Err(GemmError::Config(format!(
            "{} has no split-K reduction kernel: launch it with launch_fused",
            g.name
        )));
    };
    crate::gemm_sm80::check_name(reduce, reduce_name)?;
    // SAFETY: as documented for this function.
    unsafe { launch_inner(main, Some(reduce), g, args, fusion_args, max_ctas) }
}

pub(super) unsafe fn launch_inner(
    f: &Function,
    reduce: Option<&Function>,
    g: &GeneratedGemmSm90,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
    max_ctas: u32,
) -> Result<(), GemmError> {
    crate::gemm_sm80::check_name(f, &g.name)?;
    let fusion = &g.config.fusion;
    let fe = |e: rcute_collective::FusionError| GemmError::Config(format!("fusion arguments: {e}"));
    let uses_c = fusion.needs_source(fusion_args).map_err(fe)?;
    let blob = fusion_args.pack(fusion).map_err(fe)?;
    let maps = g.tensor_maps_with(args, uses_c)?;
    let c_ptr = if uses_c { args.c } else { args.d };
    let enc = |m: &TmaEncodeArgs, ptr: u64| {
        encode_tiled_cached(m, ptr).map_err(|e| GemmError::Config(format!("tensor map: {e}")))
    };
    let ta = enc(&maps[0], args.a)?;
    let tb = enc(&maps[1], args.b)?;
    let tc = enc(&maps[2], c_ptr)?;
    let td = enc(&maps[3], args.d)?;
    let mut ka = KernelArgs::new()
        .tensor_map(&ta)
        .tensor_map(&tb)
        .tensor_map(&tc)
        .tensor_map(&td)
        .i32(args.m)
        .i32(args.n)
        .i32(args.k)
        .i32(args.l);
    // A parameter-less fusion has an empty struct: C++ still passes one byte.
    ka = if blob.is_empty() {
        ka.blob(&[0u8])
    } else {
        ka.blob(&blob)
    };
    let lc = fitting_launch(f, g.config.schedule, |c| g.launch_config_with(args, max_ctas, c))?;
    let early_trigger = crate::grid_dependency::early_trigger_for(f, &lc);
    let ka = g
        .tail_args(args, early_trigger, max_ctas)?
        .into_iter()
        .fold(ka, |ka, (_, v)| v.push(ka));
    // SAFETY: the parameter list matches the generated kernel's signature; the caller
    // guarantees the buffers.
    unsafe { f.launch(&lc, &ka)? };
    if args.split_k > 1 {
        let Some(reduce) = reduce else {
            return Err(GemmError::Shape(
                "split_k > 1 needs the reduction kernel: use launch_split_k".into(),
            ));
        };
        let groups = (args.m as u64 * (args.n as u64 / 8))
            .div_ceil(REDUCE_THREADS as u64)
            .max(1) as u32;
        let cfg = LaunchConfig::new((groups, args.l as u32), REDUCE_THREADS).with_programmatic_dependency(true);
        let rk = KernelArgs::new()
            .u64(args.workspace)
            .u64(c_ptr)
            .u64(args.d)
            .i32(args.m)
            .i32(args.n)
            .i32(args.l)
            .i32(args.split_k as i32)
            .i64(args.ldc)
            .i64(args.ldd)
            .i64(args.batch_stride_c)
            .i64(args.batch_stride_d);
        let rk = if blob.is_empty() {
            rk.blob(&[0u8])
        } else {
            rk.blob(&blob)
        };
        // SAFETY: matches the reduction kernel's signature; the workspace holds the
        // partials the main kernel just wrote (same stream).
        unsafe { reduce.launch(&cfg, &rk)? };
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The names of the parameters of `name`'s `__global__` function in `source`.
    pub(crate) fn kernel_params(source: &str, name: &str) -> Vec<String> {
        let head = format!("void {name}(");
        let at = source.find(&head).unwrap_or_else(|| panic!("no {head}")) + head.len();
        let list = &source[at..at + source[at..].find(')').unwrap()];
        list.split(',')
            .map(|p| p.trim().rsplit(' ').next().unwrap().to_string())
            .collect()
    }

    /// The launch's arguments after the fusion struct are the emitted main kernel's last
    /// parameters, name for name, with and without stream-K (whose kernel has no
    /// `split_k`), so that one side cannot drop or add a parameter without the other.
    #[test]
    fn tail_args_fill_the_emitted_parameters() {
        for (stream_k, tile, schedule) in [
            (false, [128, 256, 64], Sm90Schedule::Cooperative),
            (false, [128, 128, 64], Sm90Schedule::PingPong),
            (true, [128, 256, 64], Sm90Schedule::Cooperative),
            (true, [128, 128, 64], Sm90Schedule::PingPong),
        ] {
            let mut cfg = GemmSm90Config::bf16(tile, schedule);
            cfg.stream_k = stream_k;
            let g = generate(&cfg).unwrap();
            let mut args = GemmArgs::tn(1000, 2048, 4096, 1, 0x1000, 0x2000, 0, 0x3000);
            (args.workspace, args.workspace_bytes) = (0x10_0000, 1 << 40);
            (args.semaphores, args.semaphore_bytes) = (0x20_0000, 1 << 30);
            let tail: Vec<&str> = g
                .tail_args(&args, true, 132)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let params = kernel_params(&g.source, &g.name);
            let fixed = ["tmap_a", "tmap_b", "tmap_c", "tmap_d", "M", "N", "K", "L", "p"];
            assert_eq!(params[..fixed.len()], fixed, "{}", g.name);
            assert_eq!(params[fixed.len()..], tail, "{}", g.name);
            assert_eq!(tail.contains(&"split_k"), !stream_k, "{}", g.name);
            assert_eq!(tail.contains(&"sk_counters"), stream_k, "{}", g.name);
        }
    }
}
