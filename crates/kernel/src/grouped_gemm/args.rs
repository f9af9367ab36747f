//! Run-time arguments of a grouped GEMM, their checks and the launch.

use super::{GeneratedGroupedGemm, GroupedEpilogue, GroupedGemmError};
use crate::launch::{Dim3, Function, KernelArgs, LaunchConfig};

/// Device pointers and sizes of one grouped GEMM launch (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupedGemmArgs {
    /// A: `[tokens, K]` (gathered) or `[M, K]` (padded rows), row-major with `lda`.
    pub a: u64,
    /// B: `[experts, N or 2N, K]` K-major, `expert_stride` elements per expert.
    pub b: u64,
    /// D: `[M, N]` (SwiGLU) or `[entries, N]` (scatter), row-major with `ldd`.
    pub d: u64,
    /// The alignment's `sorted_ids [M]`.
    pub sorted_ids: u64,
    /// The alignment's `block_expert [M / BM]`.
    pub block_expert: u64,
    /// The alignment's `total_rows [1]`.
    pub total_rows: u64,
    /// `weights [entries]` (f32) of the scatter epilogue, or 0 for 1.
    pub weights: u64,
    /// Padded rows: the alignment's capacity `rows`, a multiple of `BM`.
    pub m: i32,
    /// Output columns (SwiGLU: the intermediate size; B holds `2N` rows per expert).
    pub n: i32,
    /// The reduction length.
    pub k: i32,
    /// A's leading dimension.
    pub lda: i64,
    /// B's leading dimension (elements between an expert's rows).
    pub ldb: i64,
    /// D's leading dimension.
    pub ldd: i64,
    /// Elements between consecutive experts' weights.
    pub expert_stride: i64,
    /// Routed entries `T * topk` (the padding sentinel).
    pub entries: i32,
    /// `topk` (entry `t * topk + j` belongs to token `t`).
    pub topk: i32,
    /// K splits (scatter only; 0 or 1: none): split `s` writes its partial to the slab
    /// `D + s * split_stride`, summed later in a fixed order (the finalize).
    pub splits: i32,
    /// Elements between the splits' output slabs.
    pub split_stride: i64,
    /// SwiGLU: B's `2N` rows per expert hold the up projection first (rows `0..N`) and the
    /// gate second; `false` (vLLM's `w13`): the gate first. Ignored by the scatter epilogue.
    pub up_first: bool,
    /// The most bytes of B that the whole grid may prefetch into L2 before its
    /// grid-dependency wait (0: none; see [`GeneratedGroupedGemm::prefetch_k_tiles`] and
    /// [`super::prefetch`]). Set it only where the routing the CTAs read then
    /// ([`GroupedGemmArgs::prefetch_ids`], or the alignment's `block_expert` and
    /// `total_rows`) was written at least two links of the launch chain before this launch:
    /// a read of newer data would prefetch lines nobody uses (never a wrong result).
    pub prefetch_bytes: u64,
    /// The local experts B holds (`expert < experts`): only their weights are prefetched.
    pub experts: i32,
    /// Where the prefetching CTAs find their expert: 0, the alignment's `block_expert`;
    /// else the routing's `topk_ids [entries]` (global expert ids; local expert `id -
    /// expert_offset`), used when `entries` is at most [`super::prefetch::MAX_ID_ENTRIES`]
    /// (GEMM1, whose predecessor is the alignment itself).
    pub prefetch_ids: u64,
    /// The first local expert's global id (with `prefetch_ids`).
    pub expert_offset: i32,
    /// Let the next kernel of the chain launch as soon as every CTA has passed its wait,
    /// whatever the grid's size ([`crate::grid_dependency::tail_trigger`]).
    pub tail_trigger: bool,
    /// A stream-K kernel's grid ([`super::stream_k`]; the SMs): its CTAs share this
    /// routing's k-tiles, each tile's segments in the `splits` slabs (at least 2).
    /// Ignored by other kernels.
    pub stream_ctas: u32,
    /// A self-routing GEMM1's logits and routing outputs ([`super::GroupedGemmConfig::route`];
    /// required by such a kernel, refused by others). `experts` is then the local experts
    /// `L` and `m` the alignment's capacity; no prefetch runs.
    pub route: Option<super::route::RouteArgs>,
}

impl GeneratedGroupedGemm {
    /// Checks what the kernel assumes: positive sizes, `M` a multiple of `BM`, `K` a
    /// multiple of 8 (16-byte vectors), even `N` and `ldd` (column-pair stores), leading
    /// dimensions at least a row and multiples of 8, 16-byte aligned A and B, 4-byte D.
    pub fn check(&self, a: &GroupedGemmArgs) -> Result<(), GroupedGemmError> {
        let err = |s: String| Err(GroupedGemmError::Args(s));
        let bm = self.config.tile[0] as i32;
        if a.m < 1 || a.n < 1 || a.k < 1 || a.entries < 1 || a.topk < 1 {
            return err(format!(
                "M={} N={} K={} entries={} topk={} must be positive",
                a.m, a.n, a.k, a.entries, a.topk
            ));
        }
        if a.m % bm != 0 {
            return err(format!("M={} is not a multiple of the row tile {bm}", a.m));
        }
        if a.k % 8 != 0 || a.n % 2 != 0 || a.ldd % 2 != 0 {
            return err(format!(
                "K={} must be a multiple of 8, N={} and ldd={} even",
                a.k, a.n, a.ldd
            ));
        }
        if a.lda < i64::from(a.k) || a.ldb < i64::from(a.k) || a.ldd < i64::from(a.n) {
            return err(format!(
                "leading dimensions lda={} ldb={} ldd={} shorter than a row",
                a.lda, a.ldb, a.ldd
            ));
        }
        if a.lda % 8 != 0 || a.ldb % 8 != 0 || a.expert_stride % 8 != 0 {
            return err("lda, ldb and the expert stride must be multiples of 8 elements".into());
        }
        if !a.a.is_multiple_of(16) || !a.b.is_multiple_of(16) || !a.d.is_multiple_of(4) {
            return err("A and B must be 16-byte aligned, D 4-byte aligned".into());
        }
        if (i64::from(a.n) + self.config.tile_n_out() - 1) / self.config.tile_n_out() > 65535 {
            return err(format!("N={} needs more than 65535 column tiles (grid y)", a.n));
        }
        if a.splits > 1 && self.config.epilogue == GroupedEpilogue::SwiGlu {
            return err(format!("{} K splits: SwiGLU needs the whole sum", a.splits));
        }
        if a.splits > 64 || (a.splits > 1 && a.split_stride < i64::from(a.entries) * a.ldd) {
            return err(format!(
                "{} splits {} elements apart (at most 64, slabs of entries x ldd)",
                a.splits, a.split_stride
            ));
        }
        if self.config.stream_k && (a.splits < 2 || a.stream_ctas < 1 || a.stream_ctas > 65535) {
            return err(format!(
                "stream-K needs at least 2 slabs (K splits, got {}) and 1..=65535 CTAs (got {})",
                a.splits, a.stream_ctas
            ));
        }
        if a.prefetch_bytes > 0 && a.experts < 1 {
            return err(format!("a prefetch needs the local experts ({})", a.experts));
        }
        if a.sorted_ids == 0 || a.block_expert == 0 || a.total_rows == 0 || a.a == 0 || a.b == 0 || a.d == 0 {
            return err("null pointer".into());
        }
        self.check_route(a)
    }

    /// The self-routing kernel's arguments: present exactly for such a kernel, at most
    /// [`super::route::MAX_ENTRIES`] entries of whole tokens, `1 <= k <= min(E, 32)`, `E`
    /// within the kernel's experts, at least one local expert, no null pointer.
    fn check_route(&self, a: &GroupedGemmArgs) -> Result<(), GroupedGemmError> {
        let err = |s: String| Err(GroupedGemmError::Args(s));
        let (cfg, r) = match (&self.config.route, &a.route) {
            (None, None) => return Ok(()),
            (Some(cfg), Some(r)) => (cfg, r),
            _ => return err("routing arguments are for (and only for) a self-routing kernel".into()),
        };
        if a.entries > super::route::MAX_ENTRIES || a.entries % a.topk != 0 {
            return err(format!(
                "{} entries of top-{}: a self-routing GEMM1 takes whole tokens, at most {} entries",
                a.entries,
                a.topk,
                super::route::MAX_ENTRIES
            ));
        }
        if r.experts < 1 || r.experts as u32 > cfg.max_experts || a.topk > r.experts || a.topk > 32 {
            return err(format!(
                "top-{} of {} experts (the kernel routes 1 <= k <= min(E, 32), E <= {})",
                a.topk, r.experts, cfg.max_experts
            ));
        }
        if a.experts < 1 || a.experts > 256 {
            return err(format!("{} local experts (1..=256)", a.experts));
        }
        if r.logits == 0 || r.topk_ids == 0 || r.topk_weights == 0 || r.counts == 0 || r.offsets == 0 {
            return err("null routing pointer".into());
        }
        Ok(())
    }

    /// The launch geometry for `args`: `(M / BM, ceil(N / output columns per tile),
    /// splits)`, or `(stream_ctas, 1, 1)` for a stream-K kernel.
    pub fn launch_config(&self, a: &GroupedGemmArgs) -> LaunchConfig {
        let blocks = (a.m / self.config.tile[0] as i32).max(0) as u32;
        let mut grid = self.grid(blocks, a.n.max(0) as u32);
        grid.z = a.splits.max(1) as u32;
        if self.config.stream_k {
            grid = Dim3::new(a.stream_ctas.max(1), 1, 1);
        }
        LaunchConfig::new(grid, self.threads).with_dynamic_smem(self.smem_bytes)
    }

    /// K per split: whole `BK` tiles, `ceil(ceil(K / BK) / splits) * BK`.
    pub fn k_per_split(&self, a: &GroupedGemmArgs) -> i32 {
        let bk = self.config.tile[2] as i32;
        let tiles = (a.k.max(0) + bk - 1) / bk;
        (tiles + a.splits.max(1) - 1) / a.splits.max(1) * bk
    }

    /// The k-tiles of its split's B tile each CTA prefetches into L2 before its wait: as
    /// many as `prefetch_bytes` allows when every CTA of the grid (the alignment's
    /// capacity, not this routing's tiles) prefetches as many, at most the split's; none
    /// when the experts come from more top-k ids than one warp holds.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::grouped_gemm::{generate, GroupedA, GroupedEpilogue, GroupedGemmArgs, GroupedGemmConfig};
    /// let cfg = GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
    ///     .with_tile([16, 128, 64], [1, 4]);
    /// let g = generate(&cfg).unwrap();
    /// // DeepSeek-V2-Lite GEMM2 at T = 1: 6 row tiles x 16 column tiles, K = 1408 (22 k-tiles
    /// // of 16 KiB), a 24 MiB budget: 16 k-tiles each.
    /// let a = GroupedGemmArgs { m: 96, n: 2048, k: 1408, experts: 64, prefetch_bytes: 24 << 20, ..Default::default() };
    /// assert_eq!(g.prefetch_k_tiles(&a), 16);
    /// assert_eq!(g.prefetch_k_tiles(&GroupedGemmArgs { prefetch_bytes: 1 << 40, ..a }), 22);
    /// assert_eq!(g.prefetch_k_tiles(&GroupedGemmArgs { prefetch_bytes: 0, ..a }), 0);
    /// ```
    pub fn prefetch_k_tiles(&self, a: &GroupedGemmArgs) -> i32 {
        let [_, bn, bk] = self.config.tile;
        let ids_too_many = a.prefetch_ids != 0 && a.entries > super::prefetch::MAX_ID_ENTRIES;
        // a self-routing GEMM1 has no routing written before its wait
        let routes = self.config.route.is_some();
        if a.prefetch_bytes == 0 || a.experts < 1 || bk < 1 || ids_too_many || routes {
            return 0;
        }
        let ctas = self.launch_config(a).grid.volume().map_or(u64::MAX, u64::from).max(1);
        let tile_bytes = (bn * bk) as u64 * u64::from(self.config.element.bytes());
        let fit = a.prefetch_bytes / ctas.saturating_mul(tile_bytes).max(1);
        // a stream-K CTA's first segment may be any part of a tile's K (the device clamps)
        let k = if self.config.stream_k {
            a.k.max(0) + bk as i32 - 1
        } else {
            self.k_per_split(a)
        };
        let split_tiles = (k as i64 / bk).max(0) as u64;
        fit.min(split_tiles) as i32
    }

    /// The kernel's arguments in order, but its last (the early-trigger flag that
    /// [`crate::grid_dependency::launch_chained`] adds: the kernel is a link of the MoE
    /// layer's chain).
    pub(crate) fn args(&self, a: &GroupedGemmArgs) -> KernelArgs {
        let args = KernelArgs::new()
            .u64(a.a)
            .u64(a.b)
            .u64(a.d)
            .u64(a.sorted_ids)
            .u64(a.block_expert)
            .u64(a.total_rows)
            .u64(a.weights)
            .i32(a.m)
            .i32(a.n)
            .i32(a.k)
            .i64(a.lda)
            .i64(a.ldb)
            .i64(a.ldd)
            .i64(a.expert_stride)
            .i32(a.entries)
            .i32(a.topk)
            .i32(self.k_per_split(a))
            .i64(a.split_stride)
            .i32(i32::from(a.up_first))
            .i32(self.prefetch_k_tiles(a))
            .i32(a.experts.max(0))
            .u64(a.prefetch_ids)
            .i32(a.expert_offset);
        let args = match (&self.config.route, &a.route) {
            (Some(_), Some(r)) => args
                .u64(r.logits)
                .u64(r.topk_ids)
                .u64(r.topk_weights)
                .i32(r.experts)
                .i32(i32::from(r.renormalize))
                .u64(r.counts)
                .u64(r.offsets),
            _ => args,
        };
        if self.config.stream_k {
            args.i32(a.splits)
        } else {
            args
        }
    }

    /// The rows of B per expert the kernel reads: `2N` with SwiGLU, else `N`.
    pub fn b_rows(&self, n: i32) -> i64 {
        match self.config.epilogue {
            GroupedEpilogue::SwiGlu => 2 * i64::from(n),
            GroupedEpilogue::Scatter => i64::from(n),
        }
    }

    /// Checks `args` and launches `f` (this kernel, loaded) on its stream.
    ///
    /// # Safety
    ///
    /// Every pointer must address a device buffer large enough for the shapes in `args`
    /// (A: `tokens` or `M` rows of `lda`; B: the local experts' `b_rows(N)` rows of `ldb`,
    /// `expert_stride` apart; D: `M` or `entries` rows of `ldd`; the alignment's buffers
    /// sized by its capacity for `M` rows) and stay valid until the kernel finishes.
    pub unsafe fn launch(&self, f: &Function, a: &GroupedGemmArgs) -> Result<(), GroupedGemmError> {
        self.check(a)?;
        if f.name() != self.name {
            return Err(GroupedGemmError::Args(format!(
                "function {} is not {}",
                f.name(),
                self.name
            )));
        }
        // SAFETY: the caller guarantees the buffers; the arguments match the signature.
        unsafe { crate::grid_dependency::launch_chained_with(f, self.launch_config(a), self.args(a), a.tail_trigger)? };
        Ok(())
    }
}
