//! Launch side of the grouped (MoE) SM90 kernels ([`Sm90Grouped`]): run-time arguments,
//! their checks, the two tensor maps and the persistent launch.

use super::launch::{sched_args, tmap, TailArg};
use super::*;

/// Device pointers and sizes of one grouped SM90 launch (see [`Sm90Grouped`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sm90GroupedArgs {
    /// A `[M, K]` in padded-row order, row-major with `lda`; for a gathering GEMM1
    /// ([`GemmSm90Config::gather_a`]) the token matrix `x [T, K]` with `lda` between rows,
    /// whose row `sorted_ids[m] / topk` the kernel copies into tile row `m`.
    pub a: u64,
    /// B `[experts, rows, K]` K-major (`rows` = `2N` with SwiGLU, else `N`), `ldb`
    /// between rows, `expert_stride` elements between experts.
    pub b: u64,
    /// D: `[M, N]` (SwiGLU) or `[entries, N]` (scatter), row-major with `ldd`.
    pub d: u64,
    /// The alignment's `sorted_ids [M]`.
    pub sorted_ids: u64,
    /// The alignment's `block_expert [M / BM]`.
    pub block_expert: u64,
    /// The alignment's `total_rows [1]`.
    pub total_rows: u64,
    /// The alignment's `offsets [experts + 1]` (padded rows, multiples of `BM`).
    pub offsets: u64,
    /// `weights [entries]` (f32) of the scatter epilogue, or 0 for 1.
    pub weights: u64,
    /// Padded rows: the alignment's capacity, a multiple of `BM`.
    pub m: i32,
    /// Output columns.
    pub n: i32,
    /// The reduction length (a multiple of 16 bytes of A / B).
    pub k: i32,
    /// Local experts (B's third mode).
    pub experts: i32,
    /// A's leading dimension.
    pub lda: i64,
    /// B's leading dimension.
    pub ldb: i64,
    /// D's leading dimension.
    pub ldd: i64,
    /// Elements between consecutive experts' weights.
    pub expert_stride: i64,
    /// Routed entries `T * topk` (the padding sentinel of `sorted_ids`).
    pub entries: i32,
    /// SwiGLU: the up rows come first in each expert's `2N` rows.
    pub up_first: bool,
    /// e4m3 operands only: `a_scale [M]` (f32), the activation scale of each padded row.
    pub a_scale: u64,
    /// e4m3 operands only: `b_scale [experts, rows]` (f32, dense), the weight scale of each
    /// B row (output channel; SwiGLU: `2N` rows per expert, gate and up).
    pub b_scale: u64,
    /// A gathering GEMM1 only: `topk` (entry `e` of `sorted_ids` is token `e / topk`).
    pub topk: i32,
    /// The dynamic walk only ([`GemmSm90Config::dynamic_walk`]): its ticket counter, one
    /// u32 that holds 0 when the launch starts (the kernel leaves it 0 when it ends; the
    /// MoE layer's alignment also zeroes it every call). Launches sharing one counter must
    /// be ordered (one stream).
    pub work_counter: u64,
}

impl GeneratedGemmSm90 {
    /// The grouped kernel's arguments after its fusion struct, in parameter order, each with
    /// the name of the parameter it fills (a unit test holds the names to the emitted
    /// signature): the tile scheduler's five parameters, `early_trigger`, D, the alignment,
    /// the router weights and sizes, then the e4m3 scales or the gathering form's `x`.
    fn grouped_tail_args(
        &self,
        a: &Sm90GroupedArgs,
        early_trigger: bool,
    ) -> Result<Vec<(&'static str, TailArg)>, GemmError> {
        let mut v = sched_args(&self.grouped_scheduler_params(a)?).to_vec();
        v.extend([
            ("early_trigger", TailArg::I32(i32::from(early_trigger))),
            ("D", TailArg::U64(a.d)),
            ("sorted_ids", TailArg::U64(a.sorted_ids)),
            ("block_expert", TailArg::U64(a.block_expert)),
            ("total_rows", TailArg::U64(a.total_rows)),
            ("offsets", TailArg::U64(a.offsets)),
            ("weights", TailArg::U64(a.weights)),
            ("ldd", TailArg::I64(a.ldd)),
            ("entries", TailArg::I32(a.entries)),
            ("up_first", TailArg::I32(i32::from(a.up_first))),
        ]);
        if grouped::is_fp8(&self.config) {
            v.extend([
                ("a_scale", TailArg::U64(a.a_scale)),
                ("b_scale", TailArg::U64(a.b_scale)),
            ]);
        }
        if self.config.gather_a {
            v.extend([
                ("x", TailArg::U64(a.a)),
                ("ldx", TailArg::I64(a.lda)),
                ("topk", TailArg::I32(a.topk)),
            ]);
        }
        if self.config.dynamic_walk {
            v.push(("work_counter", TailArg::U64(a.work_counter)));
        }
        Ok(v)
    }

    fn grouped_mode(&self) -> Result<Sm90Grouped, GemmError> {
        self.config
            .grouped
            .ok_or_else(|| GemmError::Config(format!("{} is not a grouped kernel", self.name)))
    }

    /// B rows per expert: `2N` with SwiGLU, else `N`.
    pub fn grouped_b_rows(&self, n: i32) -> Result<i64, GemmError> {
        Ok(match self.grouped_mode()? {
            Sm90Grouped::SwiGlu => 2 * i64::from(n),
            Sm90Grouped::Scatter => i64::from(n),
        })
    }

    /// Checks what the grouped kernel assumes: positive sizes, `M` a multiple of `BM`, K
    /// rows of whole 16-byte chunks (TMA), even `N` and `ldd` (column-pair stores),
    /// leading dimensions and the expert stride at least a row / an expert and multiples of
    /// 16 bytes, 16-byte aligned A and B, 4-byte aligned D, no null pointer.
    pub fn grouped_check(&self, a: &Sm90GroupedArgs) -> Result<(), GemmError> {
        let shape = |s: String| Err(GemmError::Shape(s));
        let align = |s: String| Err(GemmError::Alignment(s));
        let bm = self.config.tile[0] as i32;
        let eb = self.config.ab.bytes() as i64;
        if a.m < 1 || a.n < 1 || a.k < 1 || a.experts < 1 || a.entries < 1 {
            return shape(format!(
                "M={} N={} K={} experts={} entries={} must be positive",
                a.m, a.n, a.k, a.experts, a.entries
            ));
        }
        if a.m % bm != 0 {
            return shape(format!("M={} is not a multiple of the row tile {bm}", a.m));
        }
        let rows = self.grouped_b_rows(a.n)?;
        let k = i64::from(a.k);
        if a.lda < k || a.ldb < k || a.ldd < i64::from(a.n) || a.expert_stride < rows * a.ldb {
            return shape(format!(
                "lda={} ldb={} ldd={} expert_stride={} shorter than a row / an expert",
                a.lda, a.ldb, a.ldd, a.expert_stride
            ));
        }
        if (k * eb) % 16 != 0 || a.n % 2 != 0 || a.ldd % 2 != 0 {
            return align(format!(
                "K={} must be a multiple of {} (TMA), N={} and ldd={} even",
                a.k,
                16 / eb,
                a.n,
                a.ldd
            ));
        }
        for (what, v) in [("lda", a.lda), ("ldb", a.ldb), ("expert_stride", a.expert_stride)] {
            if (v * eb) % 16 != 0 {
                return align(format!("{what} = {v} elements is not a multiple of 16 bytes (TMA)"));
            }
        }
        if !a.a.is_multiple_of(16) || !a.b.is_multiple_of(16) || !a.d.is_multiple_of(4) {
            return align("A and B must be 16-byte aligned, D 4-byte aligned".into());
        }
        if [a.a, a.b, a.d, a.sorted_ids, a.block_expert, a.total_rows, a.offsets].contains(&0) {
            return shape("null pointer".into());
        }
        if self.config.gather_a && a.topk < 1 {
            return shape(format!("topk = {} must be positive (a gathering GEMM1)", a.topk));
        }
        if grouped::is_fp8(&self.config) && (a.a_scale == 0 || a.b_scale == 0) {
            return shape("e4m3 operands need a_scale and b_scale".into());
        }
        if self.config.dynamic_walk && (a.work_counter == 0 || !a.work_counter.is_multiple_of(4)) {
            return align(format!(
                "the dynamic walk needs a 4-byte aligned work_counter, got {:#x}",
                a.work_counter
            ));
        }
        Ok(())
    }

    /// The tile scheduler's parameters: `M / BM` row tiles by the output column tiles (the
    /// scheduler hands out the work ids; the kernel's expert-aligned walk maps them to
    /// tiles). On 2x1 clusters a work id is one cluster's item: `M / BM` row tiles by the
    /// column-tile pairs, counted as `M / BM` row tiles in pairs (one cluster each) by
    /// twice the column pairs.
    pub fn grouped_scheduler_params(&self, a: &Sm90GroupedArgs) -> Result<SchedulerParams, GemmError> {
        let bm = self.config.tile[0] as u32;
        let bn = grouped::tile_n_out(&self.config) as u32;
        let n = a.n.max(0) as u64;
        let n = if grouped_cluster::clustered(&self.config) {
            n.div_ceil(2 * u64::from(bn)) * 2 * u64::from(bn)
        } else {
            n
        };
        scheduler(&self.config)
            .params(a.m.max(0) as u64, n, 1, bm, bn)
            .map_err(|e| GemmError::Shape(e.to_string()))
    }

    /// The launch configuration: at most `max_ctas` persistent CTAs (usually the SM
    /// count), or one CTA per tile for the warp-specialized schedule.
    pub fn grouped_launch_config(&self, a: &Sm90GroupedArgs, max_ctas: u32) -> Result<LaunchConfig, GemmError> {
        self.grouped_launch_config_with(a, max_ctas, None)
    }

    /// [`Self::grouped_launch_config`] with at most `max_active_clusters` clusters for a
    /// persistent kernel on clusters (what [`Function::max_active_clusters`] reports), as
    /// [`Self::launch_config_with`] does for the plain GEMM.
    pub fn grouped_launch_config_with(
        &self,
        a: &Sm90GroupedArgs,
        max_ctas: u32,
        max_active_clusters: Option<u32>,
    ) -> Result<LaunchConfig, GemmError> {
        let p = self.grouped_scheduler_params(a)?;
        let ctas = if persistent(self.config.schedule) {
            max_ctas.max(1)
        } else {
            p.total_work.min(u32::MAX as u64) as u32
        };
        self.grouped_grid_config(&p, ctas, max_active_clusters)
    }

    /// [`GroupedGrid::PerTile`]'s launch configuration: one CTA (on 2x1 clusters, one
    /// cluster) per work id of the scheduler, up to the alignment's capacity `M / BM` row
    /// tiles (ids past this routing's rows return at once).
    pub fn grouped_per_tile_launch_config(&self, a: &Sm90GroupedArgs) -> Result<LaunchConfig, GemmError> {
        let p = self.grouped_scheduler_params(a)?;
        let ctas = p.total_work.saturating_mul(u64::from(p.cluster[0] * p.cluster[1]));
        self.grouped_grid_config(&p, ctas.min(u64::from(u32::MAX)) as u32, None)
    }

    /// The launch configuration of the scheduler's grid for `ctas` CTAs (at most
    /// `max_active_clusters` clusters where given): this kernel's threads and shared memory,
    /// a programmatic dependency on the previous launch, its cluster shape where clustered.
    fn grouped_grid_config(
        &self,
        p: &SchedulerParams,
        ctas: u32,
        max_active_clusters: Option<u32>,
    ) -> Result<LaunchConfig, GemmError> {
        let grid = scheduler(&self.config)
            .grid(p, ctas, max_active_clusters)
            .map_err(|e| GemmError::Shape(e.to_string()))?;
        let lc = LaunchConfig::new(grid, self.threads)
            .with_dynamic_smem(self.smem_bytes)
            .with_programmatic_dependency(true);
        Ok(if grouped_cluster::clustered(&self.config) {
            lc.with_cluster(p.cluster_dim())
        } else {
            lc
        })
    }

    /// The tensor maps of A (`[K, M]`, boxes `(BK, BM)`) and B (`[K, rows, experts]`,
    /// boxes `(BK, BN)`, or `(BK, BN / 2)` with SwiGLU: a gate and an up box per stage).
    /// On 2x1 clusters every box is half a tile: `(BK, BM / 2)` and `(BK, BN / 2)`; with the
    /// padding skip ([`GemmSm90Config::pad_skip`]) A's box is `(BK, BM / 2)`, loaded twice per stage.
    pub fn grouped_tensor_maps(&self, a: &Sm90GroupedArgs) -> Result<[TmaEncodeArgs; 2], GemmError> {
        self.grouped_check(a)?;
        let ml = &self.plan.mainloop;
        let [a_in, a_out] = ml.tma_box_a;
        let [b_in, b_out] = ml.tma_box_b;
        let halves = grouped_cluster::clustered(&self.config);
        // On clusters, and with the padding skip's two boxes (TMA A only), half a tile.
        let a_box = if halves || (self.config.pad_skip && !self.config.gather_a) {
            a_out / 2
        } else {
            a_out
        };
        let b_box = match self.grouped_mode()? {
            Sm90Grouped::Scatter if !halves => b_out,
            _ => b_out / 2,
        };
        let (m, k) = (a.m as u64, a.k as u64);
        let am = tmap(
            self.config.ab,
            [k, m, 1],
            [a.lda as u64, (a.lda as u64 * m).div_ceil(8) * 8],
            [a_in, a_box, 1],
            ml.tma_swizzle_a,
        )?;
        let bmap = tmap(
            self.config.ab,
            [k, self.grouped_b_rows(a.n)? as u64, a.experts as u64],
            [a.ldb as u64, a.expert_stride as u64],
            [b_in, b_box, 1],
            ml.tma_swizzle_b,
        )?;
        Ok([am, bmap])
    }
}

/// How the work ids of a grouped SM90 launch meet its CTAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedGrid {
    /// At most this many persistent CTAs (usually the SM count; on clusters at most as many
    /// clusters as the GPU holds at once), CTA `c` walking ids `c, c + grid, ...`. Over many
    /// waves the CTAs drift apart, and the ids in flight at once spread over more than one
    /// wave of the walk.
    Persistent(u32),
    /// One CTA (cluster) per work id ([`GeneratedGemmSm90::grouped_per_tile_launch_config`]):
    /// the hardware starts them in id order as SMs free up, so the tiles in flight are
    /// always about one wave of consecutive ids of the walk (the kernel is the same; its
    /// persistent loop runs once). Meant for the cooperative schedule: on ping-pong a CTA
    /// would hold one tile, and one of its two consumer warpgroups would idle.
    PerTile,
}

/// Launch a grouped SM90 kernel on `grid` ([`GroupedGrid`]) on the thread's launch stream.
///
/// # Safety
///
/// Every pointer in `a` must address a device buffer large enough for its shapes (A: `M`
/// rows of `lda`; B: `experts` experts of `expert_stride`; D: `M` (SwiGLU) or `entries`
/// (scatter) rows of `ldd`; the alignment's buffers sized by its capacity for `M` rows;
/// `weights` `entries` floats) and stay valid until the kernel finishes.
pub unsafe fn launch_grouped(
    f: &Function,
    g: &GeneratedGemmSm90,
    a: &Sm90GroupedArgs,
    grid: GroupedGrid,
) -> Result<(), GemmError> {
    crate::gemm_sm80::check_name(f, &g.name)?;
    let maps = g.grouped_tensor_maps(a)?;
    let fe = |e: rcute_collective::FusionError| GemmError::Config(format!("fusion arguments: {e}"));
    let blob = FusionArgs::new().f32("alpha", 1.0).pack(&g.config.fusion).map_err(fe)?;
    let enc = |m: &TmaEncodeArgs, ptr: u64| {
        encode_tiled_cached(m, ptr).map_err(|e| GemmError::Config(format!("tensor map: {e}")))
    };
    let tb = enc(&maps[1], a.b)?;
    // A gathering GEMM1 copies A's rows itself: no A tensor map (x comes last).
    let ka = if g.config.gather_a {
        KernelArgs::new()
    } else {
        KernelArgs::new().tensor_map(&enc(&maps[0], a.a)?)
    };
    let ka = ka.tensor_map(&tb).i32(a.m).i32(a.n).i32(a.k).i32(1).blob(&blob);
    let lc = match grid {
        GroupedGrid::Persistent(max_ctas) => {
            fitting_launch(f, g.config.schedule, |c| g.grouped_launch_config_with(a, max_ctas, c))?
        }
        GroupedGrid::PerTile => g.grouped_per_tile_launch_config(a)?,
    };
    let early_trigger = crate::grid_dependency::early_trigger_for(f, &lc);
    let ka = g
        .grouped_tail_args(a, early_trigger)?
        .into_iter()
        .fold(ka, |ka, (_, v)| v.push(ka));
    // SAFETY: the parameter list matches the generated kernel's signature; the caller
    // guarantees the buffers.
    unsafe { f.launch(&lc, &ka)? };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm_sm90::launch::tests::kernel_params;
    use crate::grouped_gemm::{
        sm90_config, sm90_fp8_config, sm90_gather_config, sm90_grouped_config, sm90_pingpong_config, GroupedEpilogue,
        SM90_TILE,
    };

    /// The per-tile grid ([`GroupedGrid::PerTile`]) holds one CTA per work id (the
    /// persistent grid at most the SMs given): at Mixtral T = 4096 (72 capacity row tiles),
    /// GEMM1 on 2x1 clusters is 72 row tiles by 56 column-tile pairs, one cluster each, and
    /// GEMM2 on 1x1 128x256 tiles 72 by 16 CTAs.
    #[test]
    fn the_per_tile_grid_holds_one_cta_per_work_id() {
        let a = Sm90GroupedArgs {
            m: 72 * 128,
            n: 14336,
            k: 4096,
            experts: 8,
            entries: 8192,
            ..Default::default()
        };
        let bf = Element::BF16;
        let g1 = generate(&sm90_grouped_config(bf, bf, GroupedEpilogue::SwiGlu, SM90_TILE, true)).unwrap();
        let lc = g1.grouped_per_tile_launch_config(&a).unwrap();
        assert_eq!(lc.grid.volume(), Some(72 * 56 * 2));
        assert_eq!(lc.cluster.map(|c| (c.x, c.y)), Some((2, 1)));
        let persistent = g1.grouped_launch_config(&a, 132).unwrap();
        assert_eq!(persistent.grid.volume(), Some(132));
        let a2 = Sm90GroupedArgs { n: 4096, k: 14336, ..a };
        let g2 = generate(&sm90_config(Element::BF16, GroupedEpilogue::Scatter, SM90_TILE)).unwrap();
        let lc = g2.grouped_per_tile_launch_config(&a2).unwrap();
        assert_eq!(lc.grid.volume(), Some(72 * 16));
        assert_eq!(lc.cluster, None);
    }

    /// The grouped launch's arguments after the fusion struct are the emitted kernel's last
    /// parameters, name for name, for each member of the family (SwiGLU, scatter, e4m3 with
    /// its scales, the gathering GEMM1 with `x`), and none of them takes `workspace` or
    /// `split_k`: a grouped kernel splits nothing.
    #[test]
    fn grouped_tail_args_fill_the_emitted_parameters() {
        let configs = [
            sm90_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE),
            sm90_config(Element::F16, GroupedEpilogue::Scatter, SM90_TILE),
            sm90_pingpong_config(Element::BF16, Element::BF16, GroupedEpilogue::Scatter),
            sm90_fp8_config(Element::BF16, GroupedEpilogue::SwiGlu),
            sm90_gather_config(Element::BF16, SM90_TILE, Sm90Schedule::Cooperative),
        ];
        for cfg in configs {
            let g = generate(&cfg).unwrap();
            let a = Sm90GroupedArgs {
                m: 1024,
                n: 2048,
                k: 1408,
                experts: 64,
                entries: 600,
                ..Default::default()
            };
            let tail: Vec<&str> = g
                .grouped_tail_args(&a, true)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let params = kernel_params(&g.source, &g.name);
            let fixed: &[&str] = if cfg.gather_a {
                &["tmap_b", "M", "N", "K", "L", "p"]
            } else {
                &["tmap_a", "tmap_b", "M", "N", "K", "L", "p"]
            };
            assert_eq!(params[..fixed.len()], *fixed, "{}", g.name);
            assert_eq!(params[fixed.len()..], tail, "{}", g.name);
            assert!(!params.iter().any(|p| p == "workspace" || p == "split_k"), "{}", g.name);
            assert!(!g.source.contains("split_k"), "{}", g.name);
        }
    }
}
