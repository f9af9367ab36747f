//! The AWQ W4A16 mixed-input mainloop (SM80 class): 16-bit activations `x [M, K]` times a
//! 4-bit weight in AutoAWQ's packing, `mma.sync.m16n8k16` with the weight dequantized in
//! registers. A *plan* (tile, warps, stages, shared-memory geometry, atoms and the thread
//! to fragment mapping) that `rcute_kernel::awq_gemm` renders.
//!
//! Pipeline: the CTA copies `(BM, BK)` tiles of `x` (16-byte `cp.async`, smem atom
//! `Sw<3,3,3> o (BM,64):(64,1)`: 16-byte chunk `c` of row `r` at chunk `c ^ (r % 8)`) and
//! `(BK, BN/8)` tiles of packed `qweight` words (16-byte `cp.async` along N, 4-byte where
//! N/8 is not a multiple of 4; rows padded to [`AwqMainloop::b_row_words`] words so that
//! the fragment reads are conflict-free) into `stages` buffers, `stages - 1` in flight,
//! together with the scales and packed zeros of the (at most [`GROUP_SLOTS`]) groups the
//! k-tile touches, so no global load stalls the math.
//!
//! The mapping that makes AWQ's packing usable without reordering the checkpoint: lane
//! `(g, t) = (lane / 4, lane % 4)` of a warp reads the packed words of rows
//! `2t, 2t+1, 2t+8, 2t+9` of a k16 step in word column `g` of the warp's 8-word slice. Each
//! word converts (the `lop3` atom, [`rcute_atom::convert_int4`]) to pairs of adjacent
//! columns `(2i, 2i+1)`; `(bias + q) - (bias + z)` is exact and one multiplication by the
//! scale pair rounds once (the dequantized value is bit-exactly `awq_dequantize`'s), and a
//! byte permutation turns the column pairs of two rows into the K pairs of an `m16n8k16`
//! B fragment. So `n8` tile `j` of the slice holds, in its column `g`, the weight column
//! `8g + j` ([`AwqMainloop::b_column`]): the MMA's N order is a permutation of the
//! weight's, and the accumulators of lane `(g, t)` are the 16 *contiguous* output columns
//! `16t .. 16t + 16` of the slice ([`AwqMainloop::acc_column`]): 16-byte stores.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
//! let p = AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4)).unwrap();
//! assert_eq!((p.threads, p.mi, p.ns, p.b_row_words), (128, 1, 1, 36));
//! // Lane 5 = (g 1, t 1): rows 2, 3, 10, 11 of word column 1; its accumulators are columns 16..32.
//! assert_eq!((p.b_rows(5), p.b_column(5, 3)), ([2, 3, 10, 11], 8 + 3));
//! assert_eq!((p.acc_column(5, 0, 0), p.acc_column(5, 7, 1)), (16, 31));
//! assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 192, 64], [1, 4], 4, 4)).is_err());
//! ```

use crate::awq_bulk::AwqBulkRing;
use crate::awq_streamed::{AwqStreamed, StreamedWeight};
use crate::awq_wgmma::{AwqWgmma, MAX_SMEM_BYTES};
use crate::sm80_mainloop::PlanError;
use rcute_atom::convert_int4::{
    u4x8_to_bf16x2_biased, u4x8_to_f16x2_biased, u4x8_to_f16x2_biased_x16_snippet, Biased16,
};
use rcute_atom::copy_cp_async::{cp_async, cp_async_addr, CacheOp};
use rcute_atom::copy_ldsm::ldmatrix_addr;
use rcute_atom::mma_sm80::mma_sync;
use rcute_atom::{CopyOp, Element, MmaAtom, Snippet};

/// The K extent of a CTA tile: one 128-byte row of `x` per stage row (the `Sw<3,3,3>` atom).
pub const AWQ_BK: i64 = 64;

/// Padding of a shared `qweight` row, in words: a row of `BN/8 + 4` words with `BN` a
/// multiple of 128 puts rows `2t` (t = 0..3) 8 banks apart.
pub const B_ROW_PAD_WORDS: i64 = 4;

/// Quantization groups a 64-row k-tile can touch (G = 32: rows `k0 .. k0+32` and
/// `k0+32 .. k0+64`; G a multiple of 64 or G = K: one). Slot `s` of a stage holds the scales
/// and zeros of group `min((k0 + 32 s) / G, K/G - 1)`; k16 step `kk` reads slot `kk / 2`.
pub const GROUP_SLOTS: i64 = 2;

/// Most token tiles a group of the wgmma kernel's tile walk
/// ([`AwqMainloopConfig::raster`]) takes.
pub const MAX_RASTER: i64 = 64;

/// The input of the AWQ mainloop builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AwqMainloopConfig {
    /// The 16-bit type of `x`, the scales and the MMA (f16 or bf16).
    pub element: Element,
    /// CTA tile `(BM, BN, BK)`; `BK` must be [`AWQ_BK`].
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Shared-memory stages (at least 2).
    pub stages: usize,
    /// `qweight` words per `cp.async` (4: 16 bytes, needs N/8 a multiple of 4; or 1).
    pub b_vector_words: i64,
    /// Whether `qweight` comes in the prepared layout of [`crate::awq_prepared`] (16-byte
    /// copies of contiguous runs, unpadded shared rows, one 16-byte shared load per lane
    /// and k16 step) instead of AutoAWQ's row-major words.
    pub prepared: bool,
    /// Whether one producer warp streams the stages with `cp.async.bulk` into an mbarrier
    /// ring ([`crate::awq_bulk`]; sm_90, prepared layout only) instead of every thread
    /// issuing `cp.async` copies.
    pub bulk: bool,
    /// Whether the weight is streamed from global memory straight into registers
    /// ([`crate::awq_streamed`]: swap-AB, no shared-memory stages; the prepared layout
    /// with `prepared`, else AutoAWQ's checkpoint words, 1 word per load). Then `tile` is
    /// `(BM, 64 col_blocks, 64)` with `BM` 8 or 16 (24 or 32 prepared), `warps` is `[k_slices, col_blocks]`
    /// (warps along K, then along N) and `stages` the k16 steps in flight per warp.
    pub streamed: bool,
    /// Whether the SM90 mixed-input kernel runs it ([`crate::awq_wgmma`]: swap-AB RS
    /// `wgmma`, the prepared weight converted in registers as operand A, `x` TMA-loaded and
    /// the prepared weight, scales and zeros bulk-copied into the stages by a producer
    /// warpgroup; sm_90a). Then `tile` is `(BM tokens, 256 wgs_n, 64)`, `warps` is
    /// `[wgs_r, wgs_n]` (consumer warpgroups splitting a lane's four words, then along N)
    /// and `stages` the ring's stages.
    pub wgmma: bool,
    /// With `streamed` on the prepared layout: each lane's weight steps through its own
    /// slots of a shared `cp.async` ring instead of a ring of registers
    /// ([`crate::awq_streamed::AwqStreamed::with_shared_ring`]).
    pub shared_ring: bool,
    /// The SM90 mixed-input kernel's walk over the output tiles: 0 takes them in launch
    /// order (column tile fastest, so a wave of CTAs shares a few token tiles and reads
    /// every weight column); `R > 0` takes them in groups of `R` token tiles, token tile
    /// fastest within a group (a wave shares `R` token tiles and reads `SMs / R` weight
    /// column tiles, each by `R` CTAs at about the same time). `wgmma` kernels only.
    pub raster: i64,
    /// Whether the SM90 mixed-input kernel is persistent: a grid of at most one CTA per SM
    /// walks the output tiles (tile `blockIdx.x + gridDim.x * blockIdx.y`, then every
    /// `gridDim.x * gridDim.y`-th, each mapped as `raster` says), the producer's ring
    /// running on into the CTA's next tile while the consumers store the last one.
    /// `wgmma` kernels only.
    pub persistent: bool,
    /// Whether the SM90 mixed-input kernel with two words per consumer warpgroup takes its
    /// k16 steps in pairs: per word, both steps' fragments converted, then their two
    /// `wgmma`s issued back to back on the word's accumulators as one group (consecutive
    /// `wgmma`s of a warpgroup chain on one accumulator instead of alternating between the
    /// words'). `wgmma` kernels with `wgs_r = 2` only.
    pub chained: bool,
    /// `wgmma` groups (one k16 step's `wgmma`s each) a consumer warpgroup of the SM90
    /// mixed-input kernel leaves in flight after each step (`wgmma.wait_group`): 1 (two
    /// fragment buffers, the default) or, with batched steps
    /// ([`crate::awq_wgmma::AwqWgmma::batched`]), 2 or 3 (one fragment buffer per k16 step
    /// of a k-tile: [`crate::awq_wgmma::AwqWgmma::with_in_flight`]). `wgmma` kernels
    /// only, not `chained` nor `persistent`. A forced option: no rule takes it (session 26,
    /// helper awqdeep, H100: 2 or 3 within 1.7 % of 1 at 32 to 128 x 14336 x 4096 and 64 x
    /// 4096 x 4096; BENCHMARKS.md).
    pub in_flight: i64,
    /// Whether the SM90 mixed-input kernel splits K over the grid's z (split `z` walks
    /// k-tiles `[z kt_per_split, (z + 1) kt_per_split)`; with several splits the consumers
    /// write f32 partial tiles to the `[splits, M, N]` workspace and the last split of a
    /// tile sums them in slab order, as the fused kernels do). Without it the wgmma kernel
    /// runs one split. `wgmma` kernels only, not `persistent`.
    pub split_k: bool,
    /// CTAs of the SM90 mixed-input kernel the plan keeps resident on one SM (1 or 2): with
    /// 2 the kernel is built for two (`__launch_bounds__(threads, 2)`, the consumers'
    /// `setmaxnreg` count from half the SM's registers, the ring within half its shared
    /// memory: [`crate::awq_wgmma::AwqWgmma::new_resident`]), so one CTA's conversion and
    /// waits overlap the other's `wgmma`s. `wgmma` kernels only; 1 for every other kernel.
    pub ctas_per_sm: i64,
    /// With `streamed`: the 64-row k-tiles of `x` one split stages in shared memory, i.e.
    /// the most K a split takes ([`AwqMainloopConfig::staged_k_tiles`]); 0 takes
    /// [`crate::awq_streamed::X_ROW_TILES`]` / BM` (64 KB of staged `x`: K = 4096 at 8
    /// rows, 2048 at 16).
    pub staged_k_tiles: i64,
    /// Whether the SM90 mixed-input kernel's producer loads a stage of the prepared weight
    /// as one 3-D TMA tensor box (the prepared weight seen as `(128, N/64, K/16)` 32-bit
    /// words: a 64-column block's lanes, the column blocks, the k16 blocks; the box `(128,
    /// BN/64, 4)` is exactly the stage's bytes, the same shared image;
    /// [`crate::awq_wgmma::AwqWgmma::with_boxes`]) instead of one 1-D bulk copy per k16
    /// block. Prepared `wgmma` kernels only.
    pub weight_boxes: bool,
    /// With `streamed`: the clustered split-K sum by pushes into rank 0's shared memory
    /// ([`crate::awq_streamed::AwqStreamed::with_cluster_push`]) instead of rank 0's loads
    /// from its peers between two cluster barriers.
    pub cluster_push: bool,
    /// With the shared ring: the ring's first steps and the first group's scales and zero
    /// word are issued before the grid-dependency wait instead of after it (`_eg`; a forced
    /// option: the launch must guarantee that no earlier kernel of the stream still writes
    /// `qweight`, `scales` or `qzeros`, see [`AwqMainloopConfig::eager_ring`]).
    pub eager_ring: bool,
    /// With the shared ring: each group's `(q - z) x` summed by the MMAs in f32 on exact
    /// `q - z` (no scale in the A fragment), times the group's scales once when the group
    /// ends (`_sa`; [`AwqMainloopConfig::scale_after`]).
    pub scale_after: bool,
}

impl AwqMainloopConfig {
    /// A configuration from its parts.
    pub fn new(element: Element, tile: [i64; 3], warps: [i64; 2], stages: usize, b_vector_words: i64) -> Self {
        AwqMainloopConfig {
            element,
            tile,
            warps,
            stages,
            b_vector_words,
            prepared: false,
            bulk: false,
            streamed: false,
            wgmma: false,
            shared_ring: false,
            raster: 0,
            persistent: false,
            chained: false,
            in_flight: 1,
            split_k: false,
            ctas_per_sm: 1,
            staged_k_tiles: 0,
            weight_boxes: false,
            cluster_push: false,
            eager_ring: false,
            scale_after: false,
        }
    }

    /// The same streamed configuration with the clustered split-K sum by pushes (field
    /// `cluster_push`; [`crate::awq_streamed::AwqStreamed::with_cluster_push`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring();
    /// assert!(AwqMainloop::new(&cfg.cluster_push()).unwrap().streamed.unwrap().push);
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).cluster_push()).is_err());
    /// ```
    pub fn cluster_push(mut self) -> Self {
        self.cluster_push = true;
        self
    }

    /// The same shared-ring streamed configuration with the ring's first `stages` steps (and
    /// the first group's scales and zero word) copied before the grid-dependency wait
    /// (field `eager_ring`), so that they are in flight while the previous kernel of the
    /// chain finishes. Those reads happen before the wait: they are correct only where no
    /// earlier kernel of the stream can still be writing `qweight`, `scales` or `qzeros`
    /// (e.g. not right after the kernel that prepares the weight). A forced option for
    /// measurements; no rule takes it. Measured (H200, BENCHMARKS.md, session 28, helper
    /// awqh2, one process each): 1 x 14336 x 4096 13.75-13.81 µs against the rule's
    /// 13.98-14.02 (ring 2, one split), 1 x 4096 x 4096 6.17-6.24 against 6.63-6.76 (ring 4
    /// against the rule's ring 2, two splits pushed), 8 x 4096 7.17 against 7.42 (ring 2);
    /// with the L2 prefetch off (`RCUTE_AWQ_PREFETCH=off`) it gains nothing.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring();
    /// assert!(AwqMainloop::new(&cfg.eager_ring()).is_ok());
    /// // the register ring has no shared slots to fill before the wait
    /// let reg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 2, 4).streamed();
    /// assert!(AwqMainloop::new(&reg.eager_ring()).is_err());
    /// ```
    pub fn eager_ring(mut self) -> Self {
        self.eager_ring = true;
        self
    }

    /// The same shared-ring streamed configuration with the scales applied per group after
    /// the MMAs (field `scale_after`): the A fragments hold `q - z` exactly (no `HMUL2` per
    /// pair: 16 fewer instructions a k16 step), and the accumulators are kept in units of
    /// the current group's scales: where a group starts they are multiplied by `s_old /
    /// s_new` per column (f32; a zero scale counts as 1e-20), after the loop by the last
    /// group's scales, so no register holds a second sum. The products are not rounded to 16
    /// bits first, so the result is not bit-identical to the kernels that multiply the
    /// dequantized weight.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring();
    /// assert!(AwqMainloop::new(&cfg.scale_after()).is_ok());
    /// let reg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 2, 4).streamed();
    /// assert!(AwqMainloop::new(&reg.scale_after()).is_err());
    /// ```
    pub fn scale_after(mut self) -> Self {
        self.scale_after = true;
        self
    }

    /// The same configuration as the SM90 mixed-input kernel on the prepared layout
    /// ([`crate::awq_wgmma`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::BF16, [128, 256, 64], [2, 1], 4, 4).wgmma();
    /// assert!(cfg.prepared && AwqMainloop::new(&cfg).unwrap().wgmma.is_some());
    /// ```
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 128, 64], [2, 2], 6, 4).streamed();
    /// assert!(cfg.prepared && AwqMainloop::new(&cfg).unwrap().streamed.is_some());
    /// ```
    pub fn wgmma(mut self) -> Self {
        self.wgmma = true;
        self.prepared()
    }

    /// The same configuration as the SM90 mixed-input kernel on AutoAWQ's checkpoint
    /// `qweight` as it is ([`crate::awq_wgmma_checkpoint`]: TMA boxes of the row-major
    /// words, so `b_vector_words` 1; not `prepared`); two or four words per consumer
    /// warpgroup.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 256, 64], [2, 1], 8, 4).wgmma_checkpoint().split_k();
    /// assert!(cfg.wgmma && !cfg.prepared && cfg.b_vector_words == 1);
    /// assert!(AwqMainloop::new(&cfg).unwrap().wgmma.unwrap().checkpoint);
    /// // one word per warpgroup: refused
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [4, 1], 8, 4).wgmma_checkpoint()).is_err());
    /// ```
    pub fn wgmma_checkpoint(mut self) -> Self {
        self.wgmma = true;
        self.prepared = false;
        self.weight_boxes = false;
        self.bulk = false;
        self.streamed = false;
        self.shared_ring = false;
        self.b_vector_words = 1;
        self
    }

    /// The same configuration with the wgmma kernel's tile walk in groups of `rows` token
    /// tiles (field `raster`; 0: launch order).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [184, 256, 64], [2, 1], 6, 4).wgmma().raster(8);
    /// assert!(AwqMainloop::new(&cfg).is_ok());
    /// // not for the other kernels, not negative
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [128, 256, 64], [2, 4], 3, 4).raster(8)).is_err());
    /// assert!(AwqMainloop::new(&cfg.raster(-1)).is_err());
    /// ```
    pub fn raster(mut self, rows: i64) -> Self {
        self.raster = rows;
        self
    }

    /// The same configuration with the wgmma kernel persistent (field `persistent`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [184, 256, 64], [2, 1], 6, 4).wgmma().persistent();
    /// assert!(AwqMainloop::new(&cfg).is_ok() && AwqMainloop::new(&cfg.raster(4)).is_ok());
    /// // not for the other kernels
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [128, 256, 64], [2, 4], 3, 4).persistent()).is_err());
    /// ```
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// The same configuration with the wgmma kernel's steps in chained pairs (field
    /// `chained`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [184, 256, 64], [2, 1], 6, 4).wgmma().chained();
    /// assert!(AwqMainloop::new(&cfg).is_ok());
    /// // two words per warpgroup only (not one warpgroup of four words), wgmma only
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [64, 256, 64], [1, 1], 8, 4).wgmma().chained()).is_err());
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [128, 256, 64], [2, 4], 3, 4).chained()).is_err());
    /// ```
    pub fn chained(mut self) -> Self {
        self.chained = true;
        self
    }

    /// The same configuration with `groups` `wgmma` groups of the wgmma kernel's consumer
    /// warpgroups in flight after each k16 step (field `in_flight`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [64, 256, 64], [2, 1], 6, 4).wgmma().split_k().in_flight(3);
    /// assert_eq!(AwqMainloop::new(&cfg).unwrap().wgmma.unwrap().in_flight, 3);
    /// // 1 ..= 3; wgmma only, not chained nor persistent; batched steps only (192 tokens go word by word)
    /// assert!(AwqMainloop::new(&cfg.in_flight(4)).is_err() && AwqMainloop::new(&cfg.in_flight(0)).is_err());
    /// assert!(AwqMainloop::new(&cfg.chained()).is_err());
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [64, 256, 64], [2, 1], 6, 4).wgmma().persistent().in_flight(2)).is_err());
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [192, 256, 64], [2, 1], 6, 4).wgmma().in_flight(2)).is_err());
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).in_flight(2)).is_err());
    /// ```
    pub fn in_flight(mut self, groups: i64) -> Self {
        self.in_flight = groups;
        self
    }

    /// The same configuration with the wgmma kernel's K split over the grid's z (field
    /// `split_k`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 1], 8, 4).wgmma().split_k();
    /// assert!(AwqMainloop::new(&cfg).is_ok());
    /// // wgmma only, and not persistent (a persistent CTA walks whole tiles)
    /// assert!(AwqMainloop::new(&cfg.persistent()).is_err());
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).split_k()).is_err());
    /// ```
    pub fn split_k(mut self) -> Self {
        self.split_k = true;
        self
    }

    /// The same configuration with `ctas` CTAs of the wgmma kernel resident on one SM
    /// (field `ctas_per_sm`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [32, 256, 64], [2, 1], 6, 4).wgmma().split_k().resident(2);
    /// assert_eq!(AwqMainloop::new(&cfg).unwrap().wgmma.unwrap().consumer_regs, 96);
    /// // wgmma only; 1 or 2; the ring within half the SM's shared memory (64 tokens: 6 stages, not 7)
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).resident(2)).is_err());
    /// assert!(AwqMainloop::new(&cfg.resident(3)).is_err() && AwqMainloop::new(&cfg.resident(0)).is_err());
    /// let wide = AwqMainloopConfig::new(Element::F16, [64, 256, 64], [1, 1], 6, 4).wgmma().resident(2);
    /// assert!(AwqMainloop::new(&wide).is_ok() && AwqMainloop::new(&AwqMainloopConfig { stages: 7, ..wide }).is_err());
    /// ```
    pub fn resident(mut self, ctas: i64) -> Self {
        self.ctas_per_sm = ctas;
        self
    }

    /// The same configuration with the prepared weight's stages TMA-loaded as one tensor
    /// box each (field `weight_boxes`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [64, 256, 64], [1, 1], 6, 4).wgmma().weight_boxes();
    /// assert!(AwqMainloop::new(&cfg).unwrap().wgmma.unwrap().boxes);
    /// // prepared wgmma kernels only (the checkpoint's kernel loads its own boxes: the flag
    /// // goes with `wgmma_checkpoint`)
    /// assert!(!cfg.wgmma_checkpoint().weight_boxes);
    /// assert!(AwqMainloop::new(&AwqMainloopConfig { weight_boxes: true, ..cfg.wgmma_checkpoint() }).is_err());
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 128, 64], [2, 2], 6, 4).streamed().weight_boxes()).is_err());
    /// ```
    pub fn weight_boxes(mut self) -> Self {
        self.weight_boxes = true;
        self
    }

    /// The same configuration as the register-streamed kernel on the prepared layout
    /// ([`crate::awq_streamed`]).
    pub fn streamed(mut self) -> Self {
        self.streamed = true;
        self.prepared()
    }

    /// The register-streamed kernel on the prepared layout with the weight's steps
    /// through each lane's own slots of a shared `cp.async` ring
    /// ([`crate::awq_streamed::AwqStreamed::with_shared_ring`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4).streamed_shared_ring();
    /// assert!(cfg.streamed && cfg.prepared && cfg.shared_ring);
    /// assert_eq!(AwqMainloop::new(&cfg).unwrap().streamed.unwrap().ring_bytes(), 4 * 512 * 16);
    /// let plain = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4).streamed();
    /// assert_eq!(AwqMainloop::new(&plain).unwrap().streamed.unwrap().ring_bytes(), 0);
    /// // the checkpoint words keep their register ring
    /// assert!(!cfg.streamed_checkpoint().shared_ring);
    /// ```
    pub fn streamed_shared_ring(mut self) -> Self {
        self.shared_ring = true;
        self.streamed()
    }

    /// The same configuration as the register-streamed kernel on AutoAWQ's checkpoint
    /// layout as it is ([`crate::awq_streamed_checkpoint`]: 4-byte word loads, so
    /// `b_vector_words` 1; not `prepared`).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// use rcute_collective::awq_streamed::StreamedWeight;
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 64, 64], [16, 1], 4, 4).streamed_checkpoint();
    /// assert!(cfg.streamed && !cfg.prepared && cfg.b_vector_words == 1);
    /// let p = AwqMainloop::new(&cfg).unwrap();
    /// assert_eq!(p.streamed.unwrap().weight, StreamedWeight::Checkpoint);
    /// ```
    pub fn streamed_checkpoint(mut self) -> Self {
        self.streamed = true;
        self.shared_ring = false;
        self.prepared = false;
        self.bulk = false;
        self.b_vector_words = 1;
        self
    }

    /// The same configuration on the prepared layout with the SM90 bulk producer
    /// ([`crate::awq_bulk`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 12, 4).bulk();
    /// assert!(cfg.prepared && AwqMainloop::new(&cfg).unwrap().bulk.is_some());
    /// ```
    pub fn bulk(mut self) -> Self {
        self.bulk = true;
        self.prepared()
    }

    /// The same register-streamed configuration with `tiles` 64-row k-tiles of `x` staged
    /// per split (field `staged_k_tiles`; 0: the default of
    /// [`crate::awq_streamed::X_ROW_TILES`]` / BM`). A 16-row tile takes K = 4096 in one
    /// split with 64 (128 KB of staged `x`: one CTA an SM, which a tile of two or more
    /// 64-column blocks fills with its warps; see
    /// [`crate::awq_streamed::AwqStreamed::with_staged_k_tiles`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 128, 64], [8, 2], 4, 4).streamed_shared_ring().staged_k_tiles(64);
    /// assert_eq!(cfg.streamed_split_k_capacity(), Some(4096));
    /// let st = AwqMainloop::new(&cfg).unwrap().streamed.unwrap();
    /// assert_eq!((st.max_k_tiles, st.x_t_words, st.x_row_words), (64, 514, 2056));
    /// // 17 staged rows of 8 KB, a ring of 4 x 512 lanes x 16 bytes and the group slots
    /// assert_eq!(st.smem_bytes_for(16), 17 * 2056 * 4 + 4 * 512 * 16 + 512 * 20);
    /// // not for the other kernels, not past 227 KB of shared memory
    /// assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).staged_k_tiles(64)).is_err());
    /// assert!(AwqMainloop::new(&cfg.staged_k_tiles(128)).is_err());
    /// assert!(AwqMainloop::new(&cfg.staged_k_tiles(-1)).is_err());
    /// ```
    pub fn staged_k_tiles(mut self, tiles: i64) -> Self {
        self.staged_k_tiles = tiles;
        self
    }

    /// The most K one split of a register-streamed kernel takes: its staged `x` holds
    /// `staged_k_tiles` (by default [`crate::awq_streamed::X_ROW_TILES`]` / BM`) k-tiles of
    /// [`AWQ_BK`] (the plan's `max_k_tiles`); `None` for the other kernels, whose splits
    /// take any K.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::AwqMainloopConfig;
    /// let cfg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [8, 1], 12, 4).streamed();
    /// assert_eq!(cfg.streamed_split_k_capacity(), Some(4096));
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 64, 64], [16, 1], 4, 4).streamed();
    /// assert_eq!(cfg.streamed_split_k_capacity(), Some(2048));
    /// assert_eq!(cfg.prepared().streamed_split_k_capacity(), Some(2048));
    /// let fused = AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).prepared();
    /// assert_eq!(fused.streamed_split_k_capacity(), None);
    /// ```
    pub fn streamed_split_k_capacity(&self) -> Option<i64> {
        let tiles = match self.staged_k_tiles {
            0 if self.tile[0] > 0 => crate::awq_streamed::X_ROW_TILES / self.tile[0],
            t => t,
        };
        (self.streamed && self.tile[0] > 0).then_some(tiles * AWQ_BK)
    }

    /// The same configuration on the prepared weight layout (16-byte copies).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let cfg = AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).prepared();
    /// assert_eq!(AwqMainloop::new(&cfg).unwrap().b_row_words, 32);
    /// ```
    pub fn prepared(mut self) -> Self {
        self.prepared = true;
        self.b_vector_words = 4;
        self
    }
}

/// The plan of the AWQ mainloop.
#[derive(Clone, Debug, PartialEq)]
pub struct AwqMainloop {
    /// The configuration it was built from.
    pub config: AwqMainloopConfig,
    /// Threads per CTA (32 per warp).
    pub threads: i64,
    /// `m16` MMA tiles per warp along M.
    pub mi: i64,
    /// 64-column (8-word) slices per warp along N.
    pub ns: i64,
    /// Words per shared `qweight` row (`BN/8` plus [`B_ROW_PAD_WORDS`]).
    pub b_row_words: i64,
    /// Bytes of one stage of `x`.
    pub a_stage_bytes: i64,
    /// Bytes of one stage of `qweight`.
    pub b_stage_bytes: i64,
    /// Bytes of one stage of scales: the [`GROUP_SLOTS`] group rows of the k-tile, `BN`
    /// 16-bit values each.
    pub s_stage_bytes: i64,
    /// Bytes of one stage of packed zeros: [`GROUP_SLOTS`] rows of `BN/8` words.
    pub z_stage_bytes: i64,
    /// Dynamic shared memory of the mainloop.
    pub smem_bytes: i64,
    /// 16-byte scale copies per thread per stage.
    pub s_copies: i64,
    /// Zero-word copies (`b_vector_words` words each) per thread per stage.
    pub z_copies: i64,
    /// 16-byte `x` copies per thread per stage.
    pub a_copies: i64,
    /// `qweight` copies per thread per stage.
    pub b_copies: i64,
    /// The MMA atom (`m16n8k16`, f32 accumulators).
    pub mma: MmaAtom,
    /// `x` global -> shared copy (16-byte `cp.async.cg` with zero fill).
    pub copy_a: CopyOp,
    /// `qweight` global -> shared copy (`cp.async` of `b_vector_words` words, zero fill).
    pub copy_b: CopyOp,
    /// [`Self::copy_a`] (also the scale copies) on a 32-bit shared address with the source
    /// size in a register: the stage loader's form.
    pub copy_a_addr: Snippet,
    /// [`Self::copy_b`] (also the zero-word copies) in the same form.
    pub copy_b_addr: Snippet,
    /// `ldmatrix.x4` of the A fragments.
    pub ldsm_a: Snippet,
    /// The int4 -> 16-bit conversion atom.
    pub convert: Snippet,
    /// The prepared kernel's word conversion: f16's one-shift `x16` atom (odd pairs hold
    /// `bias + 16 q`), or [`Self::convert`] for bf16.
    pub convert_x16: Snippet,
    /// Its float format (magic bias).
    pub biased: Biased16,
    /// The SM90 bulk producer's ring (with `bulk`).
    pub bulk: Option<AwqBulkRing>,
    /// The register-streamed kernel's plan (with `streamed`).
    pub streamed: Option<AwqStreamed>,
    /// The SM90 mixed-input kernel's plan (with `wgmma`).
    pub wgmma: Option<AwqWgmma>,
}

/// The wgmma kernel's forced variants (`raster`, `persistent`, `chained`) on a plan that
/// takes them (`wgmma` the configuration's wgmma plan, if any).
fn check_wgmma_variants(cfg: &AwqMainloopConfig, wgmma: Option<&AwqWgmma>) -> Result<(), PlanError> {
    if cfg.raster != 0 && (wgmma.is_none() || !(1..=MAX_RASTER).contains(&cfg.raster)) {
        return Err(tile_err(
            cfg,
            format!("raster: 1 ..= {MAX_RASTER} token tiles a group, wgmma kernels only"),
        ));
    }
    if cfg.persistent && wgmma.is_none() {
        return Err(tile_err(cfg, "persistent: wgmma kernels only"));
    }
    if cfg.chained && wgmma.is_none_or(|w| w.words != 2) {
        return Err(tile_err(
            cfg,
            "chained: wgmma kernels with two words per consumer warpgroup only",
        ));
    }
    if cfg.in_flight != 1 && (wgmma.is_none() || cfg.chained || cfg.persistent) {
        return Err(tile_err(
            cfg,
            "in_flight: 1 ..= 3 wgmma groups, wgmma kernels that are neither chained nor persistent only",
        ));
    }
    if cfg.cluster_push && !cfg.streamed {
        return Err(tile_err(cfg, "cluster_push: streamed kernels only"));
    }
    if cfg.eager_ring && !(cfg.streamed && cfg.shared_ring) {
        return Err(tile_err(cfg, "eager_ring: shared-ring streamed kernels only"));
    }
    if cfg.scale_after && !(cfg.streamed && cfg.shared_ring) {
        return Err(tile_err(cfg, "scale_after: shared-ring streamed kernels only"));
    }
    if cfg.staged_k_tiles != 0 && !cfg.streamed {
        return Err(tile_err(cfg, "staged_k_tiles: streamed kernels only"));
    }
    if cfg.split_k && (wgmma.is_none() || cfg.persistent) {
        return Err(tile_err(cfg, "split_k: wgmma kernels that are not persistent only"));
    }
    if cfg.ctas_per_sm != 1 && wgmma.is_none() {
        return Err(tile_err(cfg, "two resident CTAs an SM: wgmma kernels only"));
    }
    if cfg.weight_boxes && wgmma.is_none_or(|w| w.checkpoint) {
        return Err(tile_err(cfg, "weight boxes: prepared wgmma kernels only"));
    }
    Ok(())
}

/// The SM90 mixed-input kernel's plan of a `wgmma` configuration: the prepared layout in
/// bulk-copied runs (`prepared`, 4 words a copy) or the checkpoint's words in TMA boxes (not
/// `prepared`, 1 word), no other producer, `BN = 256 wgs_n`.
fn wgmma_plan(cfg: &AwqMainloopConfig) -> Result<AwqWgmma, PlanError> {
    let checkpoint = match (cfg.prepared, cfg.b_vector_words) {
        (true, 4) => false,
        (false, 1) => true,
        _ => {
            return Err(tile_err(
                cfg,
                "the wgmma kernel reads the prepared layout (4 words a copy) or the checkpoint's words (1)",
            ))
        }
    };
    if cfg.bulk || cfg.streamed {
        return Err(tile_err(cfg, "the wgmma kernel has its own producer warpgroup"));
    }
    let plan = AwqWgmma::new_resident(cfg.element, cfg.tile[0], cfg.warps, cfg.stages, cfg.ctas_per_sm).ok_or_else(|| {
        tile_err(cfg, "wgmma: BM a multiple of 8 with words x BM / 2 <= 192 accumulators (128 with three warpgroups; 80 tokens with four; fewer with two CTAs an SM), warps [1 or 2, along N] (at most 3 warpgroups) or [4, 1], 2 ..= 8 stages within 227 KB of shared memory (half the SM's with two CTAs), 1 or 2 CTAs an SM")
    })?;
    if cfg.tile[1] != plan.bn() {
        return Err(tile_err(cfg, "wgmma: BN must be 256 x warpgroups along N"));
    }
    let plan = plan
        .with_in_flight(cfg.in_flight)
        .ok_or_else(|| tile_err(cfg, "in_flight: 1 ..= 3 wgmma groups; 2 or 3 only with batched steps"))?;
    if !checkpoint {
        return Ok(if cfg.weight_boxes { plan.with_boxes() } else { plan });
    }
    plan.with_checkpoint().ok_or_else(|| {
        tile_err(
            cfg,
            "wgmma on the checkpoint's words: two or four words per consumer warpgroup",
        )
    })
}

fn tile_err(cfg: &AwqMainloopConfig, reason: impl Into<String>) -> PlanError {
    PlanError::Tile {
        tile: cfg.tile,
        warps: cfg.warps,
        reason: reason.into(),
    }
}

/// The streamed kernel's plan (`None` unless `cfg.streamed`): the prepared layout in
/// 16-byte loads or the checkpoint's words one by one, 64 columns per warp along N, the
/// shared ring, the cluster push and the staged k-tiles as asked, within the shared memory.
fn streamed_plan(cfg: &AwqMainloopConfig) -> Result<Option<AwqStreamed>, PlanError> {
    if !cfg.streamed {
        return Ok(None);
    }
    let [bm, bn, _] = cfg.tile;
    let wn = cfg.warps[1];
    // the prepared layout in 16-byte loads, or the checkpoint's words one by one
    let weight = match (cfg.prepared, cfg.b_vector_words) {
        (true, 4) => StreamedWeight::Prepared,
        (false, 1) => StreamedWeight::Checkpoint,
        _ => return Err(tile_err(
            cfg,
            "the streamed kernel reads the prepared layout 4 words at a time or the checkpoint's one word at a time",
        )),
    };
    if cfg.bulk || bn != 64 * wn {
        return Err(tile_err(
            cfg,
            "the streamed kernel takes 64 columns per warp along N, without a producer",
        ));
    }
    if cfg.shared_ring && weight != StreamedWeight::Prepared {
        return Err(tile_err(cfg, "the shared ring streams the prepared layout"));
    }
    let plan = AwqStreamed::new(bm, cfg.warps, cfg.stages as i64, weight)
        .ok_or_else(|| tile_err(cfg, "streamed: BM 8, 16, 24 or 32, 1 ..= 32 warps, a step in flight"))?;
    let plan = if cfg.shared_ring { plan.with_shared_ring() } else { plan };
    let plan = if cfg.cluster_push {
        plan.with_cluster_push()
    } else {
        plan
    };
    let plan = match cfg.staged_k_tiles {
        0 => plan,
        t if t > 0 => plan.with_staged_k_tiles(t),
        _ => {
            return Err(tile_err(
                cfg,
                "staged_k_tiles: a positive count of k-tiles (0: the default)",
            ))
        }
    };
    if plan.smem_bytes(bm) > MAX_SMEM_BYTES {
        return Err(tile_err(
            cfg,
            format!("streamed: the staged x and the ring exceed {MAX_SMEM_BYTES} bytes of shared memory"),
        ));
    }
    Ok(Some(plan))
}

impl AwqMainloop {
    /// Checks and plans a configuration: f16 or bf16; `BK = 64`; `BM` a multiple of 16
    /// warps-along-M; `BN` a multiple of 64 per warp along N and of 128 (padding rule);
    /// at least two stages; 4 or 1 words per `qweight` copy.
    pub fn new(cfg: &AwqMainloopConfig) -> Result<AwqMainloop, PlanError> {
        let e = cfg.element;
        let types = PlanError::Types {
            a: e,
            b: e,
            acc: Element::F32,
        };
        let (convert, convert_x16, biased) = match e {
            Element::F16 => (
                u4x8_to_f16x2_biased(),
                u4x8_to_f16x2_biased_x16_snippet(),
                Biased16::F16,
            ),
            Element::BF16 => (u4x8_to_bf16x2_biased(), u4x8_to_bf16x2_biased(), Biased16::BF16),
            _ => return Err(types),
        };
        let mma = mma_sync(Element::F32, e, e, Element::F32, 16).ok_or(types)?;
        let [bm, bn, bk] = cfg.tile;
        let [wm, wn] = cfg.warps;
        if bk != AWQ_BK {
            return Err(tile_err(cfg, format!("BK must be {AWQ_BK}")));
        }
        let streamed = streamed_plan(cfg)?;
        let wgmma = if cfg.wgmma { Some(wgmma_plan(cfg)?) } else { None };
        check_wgmma_variants(cfg, wgmma.as_ref())?;
        let generic = streamed.is_none() && wgmma.is_none();
        if generic && (wm < 1 || wn < 1 || bm <= 0 || bm % (16 * wm) != 0) {
            return Err(tile_err(cfg, "BM must be a positive multiple of 16 x warps along M"));
        }
        if generic && (bn <= 0 || bn % (64 * wn) != 0 || bn % 128 != 0) {
            return Err(tile_err(cfg, "BN must be a multiple of 128 and of 64 x warps along N"));
        }
        if generic && cfg.stages < 2 {
            return Err(tile_err(cfg, "at least two stages"));
        }
        let copy_b = match cfg.b_vector_words {
            4 => cp_async(CacheOp::CacheGlobal, 16, true),
            1 => cp_async(CacheOp::CacheAlways, 4, true),
            _ => None,
        }
        .ok_or_else(|| tile_err(cfg, "qweight copies are 4 words (16 bytes) or 1 word"))?;
        let copy_a = cp_async(CacheOp::CacheGlobal, 16, true).ok_or_else(|| tile_err(cfg, "no 16-byte cp.async"))?;
        let copy_a_addr =
            cp_async_addr(CacheOp::CacheGlobal, 16).ok_or_else(|| tile_err(cfg, "no 16-byte cp.async"))?;
        let copy_b_addr = match cfg.b_vector_words {
            4 => cp_async_addr(CacheOp::CacheGlobal, 16),
            _ => cp_async_addr(CacheOp::CacheAlways, 4),
        }
        .ok_or_else(|| tile_err(cfg, "no qweight cp.async"))?;
        if cfg.bulk && !cfg.prepared {
            return Err(tile_err(cfg, "the bulk producer streams the prepared layout only"));
        }
        let threads = match &wgmma {
            Some(w) => w.threads(),
            None => 32 * wm * wn + if cfg.bulk { 32 } else { 0 },
        };
        // The prepared layout needs no padding: each lane reads its own 16 contiguous bytes.
        let b_row_words = if cfg.prepared { bn / 8 } else { bn / 8 + B_ROW_PAD_WORDS };
        let a_stage_bytes = bm * bk * 2;
        let b_stage_bytes = bk * b_row_words * 4;
        let s_stage_bytes = GROUP_SLOTS * bn * 2;
        let z_stage_bytes = GROUP_SLOTS * bn / 8 * 4;
        let s_chunks = GROUP_SLOTS * bn * 2 / 16;
        let z_chunks = GROUP_SLOTS * bn / 8 / cfg.b_vector_words;
        let a_chunks = bm * bk / 8;
        let b_chunks = bk * bn / 8 / cfg.b_vector_words;
        let stage_bytes = a_stage_bytes + b_stage_bytes + s_stage_bytes + z_stage_bytes;
        let bulk = cfg.bulk.then(|| AwqBulkRing::new(wm * wn, bm, cfg.stages, stage_bytes));
        let ring_bytes = if cfg.bulk {
            AwqBulkRing::barrier_bytes(cfg.stages)
        } else {
            0
        };
        Ok(AwqMainloop {
            config: *cfg,
            threads,
            mi: bm / (16 * wm),
            ns: bn / (64 * wn),
            b_row_words,
            a_stage_bytes,
            b_stage_bytes,
            s_stage_bytes,
            z_stage_bytes,
            smem_bytes: match (&streamed, &wgmma) {
                (Some(st), _) => st.smem_bytes(bm),
                (_, Some(w)) => w.smem_bytes(),
                _ => stage_bytes * cfg.stages as i64 + ring_bytes,
            },
            s_copies: (s_chunks + threads - 1) / threads,
            z_copies: (z_chunks + threads - 1) / threads,
            a_copies: (a_chunks + threads - 1) / threads,
            b_copies: (b_chunks + threads - 1) / threads,
            mma,
            copy_a,
            copy_b,
            copy_a_addr,
            copy_b_addr,
            ldsm_a: ldmatrix_addr(4, false),
            convert,
            convert_x16,
            biased,
            bulk,
            streamed,
            wgmma,
        })
    }

    /// The four rows (within a k16 step) whose packed words lane `lane` reads: `2t, 2t+1`
    /// (B fragment register 0) and `2t+8, 2t+9` (register 1).
    pub fn b_rows(&self, lane: i64) -> [i64; 4] {
        let t = lane % 4;
        [2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9]
    }

    /// The word column (within the warp's 8-word slice) lane `lane` reads.
    pub fn b_word(&self, lane: i64) -> i64 {
        lane / 4
    }

    /// The weight column (within the 64-column slice) that `n8` tile `j` holds in the
    /// B-fragment column of lane `lane`: `8 * (lane / 4) + j`.
    pub fn b_column(&self, lane: i64, j: i64) -> i64 {
        8 * self.b_word(lane) + j
    }

    /// The output column (within the slice) of accumulator `v` (0..4) of `n8` tile `j` of
    /// lane `lane`: the tile's column `2t + v % 2` is the weight's `8 (2t + v % 2) + j`.
    pub fn acc_column(&self, lane: i64, j: i64, v: i64) -> i64 {
        8 * (2 * (lane % 4) + v % 2) + j
    }

    /// The row (within the m16 tile) of accumulator `v` of lane `lane`.
    pub fn acc_row(&self, lane: i64, v: i64) -> i64 {
        lane / 4 + 8 * (v / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcute_atom::convert_int4::{pack_awq, u4x8_to_16x2_biased};

    fn plan() -> AwqMainloop {
        AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4)).unwrap()
    }

    /// The split capacity the selection rules read is the plan's own: `max_k_tiles` k-tiles.
    #[test]
    fn streamed_split_capacity_is_the_plans_staged_x() {
        for bm in [8, 16] {
            let prepared = AwqMainloopConfig::new(Element::F16, [bm, 64, 64], [16, 1], 4, 4).streamed();
            let checkpoint = prepared.streamed_checkpoint();
            for cfg in [prepared, checkpoint] {
                let st = AwqMainloop::new(&cfg).unwrap().streamed.unwrap();
                assert_eq!(cfg.streamed_split_k_capacity(), Some(st.max_k_tiles * AWQ_BK));
            }
        }
    }

    /// `__byte_perm(x, y, s)` for the two selectors the kernel uses.
    fn prmt(x: u32, y: u32, hi: bool) -> u32 {
        if hi {
            (x >> 16) | (y & 0xffff_0000)
        } else {
            (x & 0xffff) | (y << 16)
        }
    }

    /// One k16 step of one warp on the CPU: every lane builds its B fragments from the
    /// packed words exactly as the kernel does (convert, then permute pairs), and the
    /// fragments, read with `mma.sync`'s B layout, must be the weight at the columns the
    /// plan says; the accumulator columns of each lane are 16 contiguous columns.
    #[test]
    fn fragments_hold_the_weight_at_the_planned_columns() {
        let p = plan();
        // q[k][c] for a 16 x 64 slice, packed into 16 x 8 words.
        let q: Vec<u8> = (0..16 * 64).map(|i| ((i * 7 + i / 64) % 16) as u8).collect();
        let words: Vec<u32> = (0..16 * 8)
            .map(|w| {
                let (k, j) = (w / 8, w % 8);
                pack_awq(&std::array::from_fn(|c| q[k * 64 + 8 * j + c]))
            })
            .collect();
        for lane in 0..32i64 {
            let rows = p.b_rows(lane);
            let pairs: Vec<[u32; 4]> = rows
                .iter()
                .map(|&r| u4x8_to_16x2_biased(words[(r * 8 + p.b_word(lane)) as usize], Biased16::F16))
                .collect();
            for j in 0..8i64 {
                let (i, hi) = ((j / 2) as usize, j % 2 == 1);
                let b = [prmt(pairs[0][i], pairs[1][i], hi), prmt(pairs[2][i], pairs[3][i], hi)];
                // mma.sync B fragment: b[r] holds rows (2t + 8r, 2t + 8r + 1) of column g.
                for (r, reg) in b.iter().enumerate() {
                    for h in 0..2 {
                        let k = 2 * (lane % 4) + 8 * r as i64 + h;
                        let got = Biased16::F16.values(*reg)[h as usize] - 1024.0;
                        let want = q[(k * 64 + p.b_column(lane, j)) as usize];
                        assert_eq!(got, f32::from(want), "lane {lane} tile {j} k {k}");
                    }
                }
            }
            let cols: Vec<i64> = (0..2)
                .flat_map(|v| (0..8).map(move |j| (v, j)))
                .map(|(v, j)| p.acc_column(lane, j, v))
                .collect();
            let first = 16 * (lane % 4);
            assert_eq!(cols, (first..first + 16).collect::<Vec<_>>());
        }
    }

    #[test]
    fn shared_reads_are_conflict_free_and_shapes_check() {
        let p = plan();
        // Lanes read word (row 2t, column g): banks (2t * row_words + g) % 32 all distinct.
        let mut banks: Vec<i64> = (0..32)
            .map(|l| (p.b_rows(l)[0] * p.b_row_words + p.b_word(l)) % 32)
            .collect();
        banks.sort();
        banks.dedup();
        assert_eq!(banks.len(), 32);
        assert_eq!(p.smem_bytes, 4 * (16 * 64 * 2 + 64 * 36 * 4 + 2 * 256 * 2 + 2 * 32 * 4));
        let big = AwqMainloop::new(&AwqMainloopConfig::new(Element::BF16, [128, 256, 64], [2, 4], 3, 1)).unwrap();
        assert_eq!((big.mi, big.ns, big.threads, big.b_copies), (4, 1, 256, 8));
        for bad in [
            AwqMainloopConfig::new(Element::F32, [16, 256, 64], [1, 4], 4, 4),
            AwqMainloopConfig::new(Element::F16, [16, 256, 32], [1, 4], 4, 4),
            AwqMainloopConfig::new(Element::F16, [24, 256, 64], [1, 4], 4, 4),
            AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 1, 4),
            AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 2),
        ] {
            assert!(AwqMainloop::new(&bad).is_err(), "{bad:?}");
        }
    }
}
