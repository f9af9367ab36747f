//! The configuration of one SM90 GEMM kernel and its tile scheduler.

use super::*;

/// The configuration of one generated SM90 GEMM kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmSm90Config {
    /// Element type of A and B (`bf16` or `f16`).
    pub ab: Element,
    /// Element type of C and D (`bf16` or `f16`).
    pub cd: Element,
    /// The epilogue fusion (a visitor tree): what D is, per element, from the
    /// accumulator, C and broadcast operands. The default is the linear combination
    /// `alpha * acc + beta * C`; C is loaded only when the tree reads it, and then only when
    /// it is needed at run time (`beta != 0`).
    pub fusion: Fusion,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Cluster shape `(M, N)` (only `[1, 1]` for now).
    pub cluster: [i64; 2],
    /// Kernel schedule.
    pub schedule: Sm90Schedule,
    /// Pipeline stages (`None`: as many as fit).
    pub stages: Option<usize>,
    /// Epilogue subtile `(EPI_M, EPI_N)` (`None`: the builder's automatic choice).
    pub epi_tile: Option<[i64; 2]>,
    /// Shared memory capacity per CTA.
    pub smem_capacity: usize,
    /// Raster order of the persistent tile walk (resolved per problem for `Heuristic`).
    pub raster: RasterOrderOption,
    /// log2 of the tile-walk swizzle (bands of `2^swizzle_log2` tiles; clamped per problem).
    pub swizzle_log2: u32,
    /// `wgmma` batches a consumer warpgroup keeps in flight before it waits (CUTLASS's
    /// `K_PIPE_MMAS`): 1 waits for the previous k-tile's batch and releases its stage while
    /// the current one runs; 0 waits for the current batch and releases its stage at once,
    /// which frees stages a k-tile earlier (more loads in flight) and, with the cooperative
    /// schedule's two consumer warpgroups, still keeps the tensor cores busy with the other
    /// warpgroup's batch.
    pub mma_pipe: u32,
    /// The grouped (MoE) member of the family ([`Sm90Grouped`]): rows in the alignment's
    /// padded order, B per expert, no C, the register epilogue of the mode; `None` for the
    /// plain GEMM.
    pub grouped: Option<Sm90Grouped>,
    /// The grouped member's tile walk: row tiles of one expert per band, at most
    /// (`crate::gemm_sm90::WALK_BAND` by default; the plain GEMM ignores it). A wave of
    /// CTAs covers a band's row tiles by many column tiles; a narrower band, more column
    /// tiles of fewer row tiles. Even on clusters (whole row-tile pairs). Name suffix
    /// `_b<band>` where it is not the default.
    pub walk_band: i64,
    /// Hybrid stream-K ([`crate::stream_k`]): whole waves of tiles data-parallel, the last
    /// partial wave's k-tiles spread over the CTAs and reduced by each tile's last arriving
    /// contributor (name suffix `_sk`; cooperative or ping-pong schedule, no cluster, no
    /// split-K).
    pub stream_k: bool,
    /// Stream-K: the ranges each stream-K tile is cut into, at most (2 to 16; 2, the
    /// default, keeps every range at half a tile or more; name suffix `_sk<parts>` where
    /// not 2). Only the launch's plan reads it ([`crate::stream_k::StreamKPlan::with_parts`]).
    pub stream_k_parts: u32,
    /// The grouped SwiGLU member's gathering form (GEMM1 of the MoE layer, name tag
    /// `gather_swiglu`): A is the token matrix `x`, and the producer warpgroup copies each
    /// tile row `x[sorted_ids[m] / topk]` into the stage itself by `cp.async` (padding rows
    /// zero-filled) instead of a TMA box of pre-gathered rows; B stays TMA
    /// ([`crate::grouped_gemm::sm90_gather_config`]; `gemm_sm90/grouped_gather.rs`). No
    /// clusters.
    pub gather_a: bool,
    /// The grouped member's dynamic persistent walk (name suffix `_dyn`;
    /// `gemm_sm90/dynamic.rs`): each cluster (CTA) takes its next work id from a global
    /// counter in launch order (`work_counter`, zero at launch and left zero), so the tiles
    /// in flight are always about one grid of consecutive ids of the walk however the CTAs'
    /// speeds differ, where the static walk's CTAs (`c, c + grid, ...`) drift apart over
    /// many waves. Cooperative schedule, without `gather_a`.
    pub dynamic_walk: bool,
    /// The cooperative grouped member's padding skip beyond the `wgmma`s (name suffix
    /// `_pad`; `gemm_sm90/grouped.rs`, `pad_skip_check`): a consumer
    /// warpgroup whose 64 rows are all padding (which already issues no `wgmma`) also skips
    /// its epilogue (no zero rows written, no router weights loaded); A's TMA loads are two
    /// boxes of `BM / 2` rows, the second only where row `BM / 2` of the tile is routed; the
    /// gathering producer skips its copies of such an all-padding upper half. The rows it
    /// skips are read by no one, so every routed row's output is bit for bit the same.
    /// GEMM1 then leaves the padding rows of its output as they were. No clusters.
    pub pad_skip: bool,
}

impl Eq for GemmSm90Config {}

impl std::hash::Hash for GemmSm90Config {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (
            self.ab,
            self.cd,
            self.tile,
            self.cluster,
            self.schedule,
            self.stages,
            self.epi_tile,
        )
            .hash(h);
        (
            self.smem_capacity,
            self.raster,
            self.swizzle_log2,
            self.mma_pipe,
            self.grouped,
            self.stream_k,
            self.stream_k_parts,
            self.walk_band,
            self.gather_a,
            self.dynamic_walk,
            self.pad_skip,
        )
            .hash(h);
        (self.fusion.name(), self.fusion.describe()).hash(h);
    }
}

impl GemmSm90Config {
    /// Whether the main kernel takes the `workspace` pointer: split-K partial sums and
    /// stream-K's partial tiles live there; a grouped kernel splits nothing and has none.
    pub fn takes_workspace(&self) -> bool {
        self.grouped.is_none()
    }

    /// Whether the main kernel takes `split_k` (its K splits, 1 for none): not a stream-K
    /// kernel, which splits K itself, and not a grouped one, whose launch never splits K.
    pub fn takes_split_k(&self) -> bool {
        !self.stream_k && self.grouped.is_none()
    }

    /// The plain GEMM: not grouped, gathering, stream-K or on the dynamic walk (the
    /// members whose loads and walks assume one `wgmma` atom along N and one TMA box per
    /// operand).
    pub fn plain(&self) -> bool {
        self.grouped.is_none() && !self.gather_a && !self.stream_k && !self.dynamic_walk
    }

    /// Whether the kernel can read a source C (its fusion reads C).
    pub fn with_c(&self) -> bool {
        self.fusion.reads_source()
    }

    /// The same configuration with `D = alpha * acc` (no C: the epilogue's smem holds D
    /// only and the TMA stores are delayed, as CUTLASS's builder does without C).
    pub fn without_c(mut self) -> Self {
        self.fusion = Fusion::new(Node::scalar("alpha") * Node::acc())
            .and_then(|f| f.with_name("scale"))
            .expect("a valid two-node tree");
        self
    }

    /// bf16 in and out, K-major A and B, C readable, cluster 1x1, automatic stages and
    /// epilogue tile.
    pub fn bf16(tile: [i64; 3], schedule: Sm90Schedule) -> Self {
        GemmSm90Config {
            ab: Element::BF16,
            cd: Element::BF16,
            fusion: Fusion::linear_combination(),
            tile,
            cluster: [1, 1],
            schedule,
            stages: None,
            epi_tile: None,
            smem_capacity: SM90_SMEM_CAPACITY,
            raster: RasterOrderOption::Heuristic,
            swizzle_log2: 0,
            mma_pipe: 1,
            grouped: None,
            stream_k: false,
            stream_k_parts: 2,
            walk_band: super::grouped::WALK_BAND,
            gather_a: false,
            dynamic_walk: false,
            pad_skip: false,
        }
    }
}
