//! The SM90 mixed-input AWQ prefill mainloop ([`crate::awq_mainloop`] with `wgmma`):
//! swap-AB `wgmma` with the int4 weight as the register operand A (RS) and `x` as the
//! shared-memory operand B, warp-specialized.
//!
//! **Swap-AB.** The kernel computes `out^T = W^T x^T`. In the prepared layout
//! ([`crate::awq_prepared`]) lane `(g, t)` of a warp owns 16 contiguous bytes per (k16
//! block, 64-column block), and word `r` of them converts (the `lop3` atom,
//! [`rcute_atom::convert_int4`]) into an `m16n8k16` A fragment whose row `g` is weight
//! column `8g + 2r` and row `g + 8` column `8g + 2r + 1` ([`crate::awq_streamed`]).
//! `wgmma`'s register A of an `m64nNk16` (`ALayout_64x16`,
//! [`rcute_atom::mma_sm90::a_layout_64xk`]) is that fragment per warp, warp `w` holding
//! rows `16 w .. 16 w + 16`. So one word per lane is one `wgmma` A operand: warp `w` of a
//! consumer warpgroup takes the 64-column block `wb(w)`, and the `wgmma` of word `r` has
//! virtual row `16 w + g + 8 h` = weight column `64 wb(w) + 8 g + 2 r + h`
//! ([`AwqWgmma::virtual_column`]). A warpgroup issues `words` `wgmma`s per k16 step (words
//! `r0 .. r0 + words` of its lanes' 16 bytes), each `m64 x BM x k16` into its own f32
//! accumulators (`BM / 2` per thread and word).
//!
//! **Warpgroups.** Warpgroup 0 is the producer: per k-tile one elected thread TMA-loads
//! the `(BM, 64)` tile of `x` (row-major as it is, i.e. K-major, 128-byte swizzle, rows
//! past M and columns past K zero-filled) and copies, with 1-D `cp.async.bulk`, the CTA's
//! prepared weight (the k-tile's four k16 blocks of `BN` columns: four contiguous runs of
//! `8 BN` bytes, [`crate::awq_prepared`]), the scale row and the zero-word row of the
//! k-tile's group (and of its second half's group for `G = 32`) into one stage of a ring
//! of `stages`, all counted in the stage's *full* mbarrier transaction bytes; *empty*
//! mbarriers hand the stage back. With [`AwqWgmma::with_boxes`] the four weight runs are one
//! 3-D TMA box of the same shared image instead. The `wgs_r x wgs_n` consumer warpgroups take `wgs_n`
//! groups of four 64-column blocks along N (`BN = 256 wgs_n`); the `wgs_r` warpgroups of
//! one group split the four words of each lane (`words = 4 / wgs_r`: 4, 2 or 1). A consumer lane
//! reads its words of a k16 step with one shared load (a warp reads its block's 512
//! contiguous bytes: conflict-free), one step ahead of their conversion into A fragments
//! (double-buffered, so the conversion of step `s + 1` overlaps the `wgmma`s of step
//! `s`), reads the group's scales and zero word where the group starts, and, once the
//! `wgmma`s of the stage's last step have completed, arrives on the stage's *empty*
//! barrier (every consumer thread, after its own shared reads: `128 x consumers`
//! arrivals free a stage).
//!
//! **Stage layout** (dynamic shared memory, 1024-byte aligned base): the `x` ring
//! (`stages x BM x 128` bytes, the swizzle's 1024-byte period), then the weight ring
//! (`stages x 32 BN`: k16 block `kb` of a stage at `8 BN kb`, its 64-column block `wb` at
//! `+ 512 wb`, lane `l` at `+ 16 l`), the scale ring (`stages x 2 slots x 2 BN`), the zero
//! ring (`stages x 2 slots x BN / 2`), the barriers.
//!
//! **Forced variants** ([`crate::awq_mainloop::AwqMainloopConfig`]): `raster` walks the
//! tiles in groups of token tiles; `persistent` launches one CTA per SM that takes every
//! `CTAs`-th tile, its ring running on from tile to tile (the accumulators overwritten by
//! the tile's first `wgmma`, the tile's last stage handed back before the stores); `chained`
//! (two words per warpgroup) converts a word's fragments of two k16 steps and issues their
//! `wgmma`s back to back on its accumulators as one group; `ctas_per_sm = 2`
//! ([`AwqWgmma::new_resident`]) builds the plan for two resident CTAs an SM (half the
//! registers and shared memory each). No rule takes them.
//!
//! **K splits** (`split_k`, [`crate::awq_mainloop::AwqMainloopConfig::split_k`]): split `z`
//! of the grid takes the k-tiles `[z kt_per_split, (z + 1) kt_per_split)`, its producer
//! and consumers walking only those (the ring starts afresh per split; a k-tile reads its
//! own group rows, so a split may start inside a group); with several splits the
//! consumers' f32 partial tiles meet in a `[splits, M, N]` workspace and the tile's last
//! split sums them in slab order before the epilogue below (emitted by
//! `rcute_kernel`'s `awq_gemm/wgmma_split.rs`). Small token tiles (8, 16, 32: `wgmma` N of
//! 8 to 32, an `x` box of `BM` rows) leave room for more stages.
//!
//! **Epilogue.** Accumulator `acc[r][4 j + 2 h + e]` (`CLayout_64xN`) is virtual row `16 w
//! + g + 8 h`, token `8 j + 2 t + e`: per token a lane holds the eight contiguous output
//! columns `64 wb(w) + 8 g .. + 8` (with four words per warpgroup), one 16-byte store.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
//! // 64 tokens, two warpgroups along N (512 weight columns), 4 stages of x.
//! let p = AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [64, 512, 64], [1, 2], 4, 4).wgmma()).unwrap();
//! let w = p.wgmma.as_ref().unwrap();
//! assert_eq!((p.threads, w.words, w.acc_regs, w.x_stage_bytes), (384, 4, 128, 8192));
//! // the stage's weight (4 k16 blocks x 512 columns / 2), scales (2 slots) and zero words
//! assert_eq!((w.w_stage_bytes, w.s_stage_bytes, w.z_stage_bytes), (16384, 2048, 512));
//! assert_eq!(w.w_offset, 4 * 8192);
//! assert_eq!(w.mma.name, "SM90_64x64x16_F32F16F16_RS<K,K>");
//! // warp 1 of consumer warpgroup 1, word 2, lane (g 3, t 0), upper row: column 64 * 5 + 24 + 4 + 1
//! assert_eq!(w.virtual_column(1, 1, 2, 3, 1), 64 * 5 + 29);
//! assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [128, 512, 64], [1, 2], 4, 4).wgmma()).is_err());
//! ```

use rcute_atom::copy_tma::{bulk_load, prefetch_tensormap, tma_load};
use rcute_atom::gmma_desc::{make_gmma_desc, GmmaDescriptor};
use rcute_atom::mma::{GmmaSource, Major};
use rcute_atom::mma_sm90::{wgmma, wgmma_commit_group, wgmma_fence, wgmma_wait_group, GmmaSwizzle};
use rcute_atom::sync::{
    elect_one_sync, fence_mbarrier_init, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait_parity, setmaxnreg_dec, setmaxnreg_inc,
};
use rcute_atom::{CopyOp, Element, MmaAtom, Snippet};
use rcute_layout::{tuple, Layout};

/// K of one `x` stage (64 16-bit elements: one 128-byte swizzle row).
pub const WGMMA_BK: i64 = 64;

/// Most f32 accumulator registers a consumer thread may hold (and at most its
/// `setmaxnreg` count less [`ACC_HEADROOM`]): two consumer warpgroups of 192 tokens x 2
/// words (word by word) compile without spills in 232 registers, up to R225.
pub const MAX_ACC_REGS: i64 = 192;

/// Registers a consumer thread keeps beside its accumulators (fragments, words, group
/// registers, addresses).
pub const ACC_HEADROOM: i64 = 24;

/// [`ACC_HEADROOM`] of a plan for two resident CTAs an SM
/// ([`AwqWgmma::new_resident`]): at 96 consumer registers ptxas serialized the `wgmma`s of
/// 64 tokens x 2 words (64 accumulators) for want of registers, not those of 48.
pub const RESIDENT_ACC_HEADROOM: i64 = 48;

/// Registers the producer warpgroup keeps (`setmaxnreg.dec`).
pub const PRODUCER_REGS: i64 = 40;

/// Group slots per stage: the groups of the k-tile's two halves (different only for G = 32).
pub const WGMMA_GROUP_SLOTS: i64 = 2;

/// Most dynamic shared memory of an SM90 CTA (227 KB).
pub const MAX_SMEM_BYTES: i64 = 232448;

/// Shared memory of an SM90 SM (228 KB), of which every resident CTA also takes
/// [`CTA_RESERVED_SMEM_BYTES`].
pub const SM_SMEM_BYTES: i64 = 233472;

/// Shared memory the hardware reserves per resident CTA (1 KB on SM90).
pub const CTA_RESERVED_SMEM_BYTES: i64 = 1024;

/// The plan of the SM90 mixed-input kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct AwqWgmma {
    /// Tokens (rows of `x`) per CTA: the `wgmma`'s N.
    pub bm: i64,
    /// Consumer warpgroups sharing one group of four 64-column blocks (splitting the words).
    pub wgs_r: i64,
    /// Groups of four 64-column blocks along N.
    pub wgs_n: i64,
    /// Words (one `wgmma` each) per lane, k16 step and consumer warpgroup: `4 / wgs_r`.
    pub words: i64,
    /// f32 accumulators per consumer thread: `words * BM / 2`.
    pub acc_regs: i64,
    /// Stages of the `x` ring.
    pub stages: i64,
    /// Bytes of one `x` stage: `BM * 64 * 2` (a multiple of 1024 bytes: the swizzle's period).
    pub x_stage_bytes: i64,
    /// Bytes of one weight stage: four k16 blocks of `BN` prepared columns (`32 BN`).
    pub w_stage_bytes: i64,
    /// Bytes of one scale stage: [`WGMMA_GROUP_SLOTS`] rows of `BN` 16-bit scales.
    pub s_stage_bytes: i64,
    /// Bytes of one zero stage: [`WGMMA_GROUP_SLOTS`] rows of `BN / 8` zero words.
    pub z_stage_bytes: i64,
    /// Byte offset of the weight ring (after the `x` ring).
    pub w_offset: i64,
    /// Byte offset of the scale ring.
    pub s_offset: i64,
    /// Byte offset of the zero ring.
    pub z_offset: i64,
    /// Byte offset of the mbarriers (after the rings): `full[s]` at `+ 8 s`, `empty[s]` at
    /// `+ 8 (stages + s)`.
    pub barrier_offset: i64,
    /// Registers per consumer thread after `setmaxnreg.inc`.
    pub consumer_regs: i64,
    /// Whether a k16 step's `words` fragments are converted first and its `wgmma`s issued
    /// as one group (two steps' fragments live, up to `2 words` `wgmma`s in flight), or,
    /// where the registers do not allow it, word by word (one fragment converted while the
    /// previous word's `wgmma` runs: two in flight). Batched where
    /// [`AwqWgmma::batched_regs`] fit the consumers' register count; with one word always
    /// (its fragments alternate by step; the plan is refused where they do not fit).
    pub batched: bool,
    /// The RS `wgmma` (`m64 x BM x k16`, f32 accumulators, A from registers, B K-major).
    pub mma: MmaAtom,
    /// The `wgmma` descriptor of the B operand of one k16 step: `(BM, 16)` of `x` in the
    /// K-major 128-byte-swizzle atom (`Sw<3,4,3> o (8,64):(64,1)` on bytes: rows 128 bytes
    /// apart, 8-row groups 1024), the start address left to the kernel.
    pub desc_b: GmmaDescriptor,
    /// The producer's 2-D TMA load of one `(BM, 64)` box of `x`.
    pub tma: CopyOp,
    /// The producer's 1-D bulk copies (global -> shared, mbarrier transaction bytes) of
    /// the weight runs, scale and zero rows.
    pub bulk: CopyOp,
    /// The mbarrier, election, register-reallocation and `wgmma` fence snippets.
    pub sync: Vec<Snippet>,
    /// Whether the weight is AutoAWQ's checkpoint `qweight` as it is, TMA-loaded in
    /// swizzled `(32 words, 64 rows)` boxes and byte-permuted by each lane
    /// ([`crate::awq_wgmma_checkpoint`]), instead of the prepared layout's bulk-copied runs
    /// ([`AwqWgmma::with_checkpoint`]).
    pub checkpoint: bool,
    /// CTAs the plan keeps resident on one SM (1 or 2: [`AwqWgmma::new_resident`]); the
    /// kernel's `__launch_bounds__` minimum.
    pub ctas_per_sm: i64,
    /// Whether the producer loads a stage of the prepared weight as one 3-D TMA tensor box
    /// (`(128, BN/64, 4)` 32-bit words of the prepared weight seen as `(128, N/64, K/16)`:
    /// [`AwqWgmma::with_boxes`]) instead of one 1-D bulk copy per k16 block; the same
    /// shared image.
    pub boxes: bool,
    /// `wgmma` groups a consumer warpgroup leaves in flight after each k16 step
    /// (`wgmma.wait_group`): 1 with two fragment buffers (steps of parity 0 / 1), or 2 or 3
    /// ([`AwqWgmma::with_in_flight`]) with one buffer per k16 step of a k-tile (four), the
    /// stage handed back at the k-tile's step `in_flight - 1` (when the previous k-tile's
    /// last group has retired).
    pub in_flight: i64,
}

impl AwqWgmma {
    /// The plan for `bm` tokens (8 ..= 256, a multiple of 8, `words x bm / 2` accumulators
    /// within [`MAX_ACC_REGS`] and the consumers' register count less [`ACC_HEADROOM`]),
    /// `warps = [wgs_r, wgs_n]` (`wgs_r` 1, 2 or 4; at most three consumer warpgroups, or
    /// `[4, 1]`: four splitting the words, one `wgmma` each per k16 step, batched steps
    /// within the registers: up to 80 tokens) and
    /// `stages` (2 ..= 8, the ring within [`MAX_SMEM_BYTES`]) on 16-bit `e`; `None` for
    /// anything else.
    pub fn new(e: Element, bm: i64, warps: [i64; 2], stages: usize) -> Option<AwqWgmma> {
        Self::new_resident(e, bm, warps, stages, 1)
    }

    /// The plan of [`AwqWgmma::new`] built for `ctas` (1 or 2) CTAs resident on one SM: the
    /// consumers' register count from the SM's registers shared by `ctas` CTAs
    /// ([`AwqWgmma::consumer_regs_at`]: 96 for two consumer warpgroups, 216 for one, less
    /// [`RESIDENT_ACC_HEADROOM`]: at most 48 / 168 accumulators, 48 / 84 tokens, batched
    /// steps up to 24 / 60 tokens) and `ctas` rings,
    /// each with the CTA's reserved 1 KB, within the SM's [`SM_SMEM_BYTES`].
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_wgmma::AwqWgmma;
    /// let two = |bm, warps, stages| AwqWgmma::new_resident(Element::F16, bm, warps, stages, 2);
    /// let p = two(32, [2, 1], 6).unwrap();
    /// assert_eq!((p.consumer_regs, p.batched, p.ctas_per_sm), (96, false, 2));
    /// assert!(two(16, [2, 1], 8).unwrap().batched && two(32, [1, 1], 8).unwrap().batched);
    /// // 64 tokens x 2 words: 64 accumulators of 96 registers; one warpgroup: 6 stages fit, 7 do not
    /// assert!(two(48, [2, 1], 6).is_some() && two(64, [2, 1], 4).is_none());
    /// assert!(two(64, [1, 1], 6).is_some() && two(64, [1, 1], 7).is_none() && two(88, [1, 1], 4).is_none());
    /// assert!(AwqWgmma::new_resident(Element::F16, 32, [2, 1], 6, 3).is_none());
    /// ```
    pub fn new_resident(e: Element, bm: i64, warps: [i64; 2], stages: usize, ctas: i64) -> Option<AwqWgmma> {
        let [wgs_r, wgs_n] = warps;
        if !(1..=2).contains(&ctas) {
            return None;
        }
        if !matches!(e, Element::F16 | Element::BF16) {
            return None;
        }
        // at most three consumer warpgroups, or four splitting the words (one each)
        if !matches!(wgs_r, 1 | 2 | 4) || !(1..=3).contains(&wgs_n) || (wgs_r * wgs_n > 3 && warps != [4, 1]) {
            return None;
        }
        let words = 4 / wgs_r;
        let consumer_regs = Self::consumer_regs_at(wgs_r * wgs_n, ctas);
        let headroom = if ctas > 1 { RESIDENT_ACC_HEADROOM } else { ACC_HEADROOM };
        let max_acc = MAX_ACC_REGS.min(consumer_regs - headroom);
        if !(8..=256).contains(&bm) || bm % 8 != 0 || words * bm / 2 > max_acc || !(2..=8).contains(&stages) {
            return None;
        }
        let mma = wgmma(Element::F32, e, e, bm, GmmaSource::RS, Major::K, Major::K)?;
        let x_stage_bytes = bm * WGMMA_BK * 2;
        let bn = 256 * wgs_n;
        // 64 rows of BN nibbles; group rows of BN scales and BN / 8 zero words per slot
        let (w_stage_bytes, s_stage_bytes, z_stage_bytes) = (
            WGMMA_BK * bn / 2,
            WGMMA_GROUP_SLOTS * bn * 2,
            WGMMA_GROUP_SLOTS * bn / 2,
        );
        let st = stages as i64;
        let w_offset = st * x_stage_bytes;
        let s_offset = w_offset + st * w_stage_bytes;
        let z_offset = s_offset + st * s_stage_bytes;
        let barrier_offset = z_offset + st * z_stage_bytes;
        // the CTA's dynamic shared memory (with the base's alignment slack), `ctas` times
        // with each CTA's reserved 1 KB on the SM
        let smem = barrier_offset + 16 * st + 1024;
        if smem > MAX_SMEM_BYTES || ctas * (smem + CTA_RESERVED_SMEM_BYTES) > SM_SMEM_BYTES {
            return None;
        }
        let step = Layout::new(tuple!(bm, 16), tuple!(WGMMA_BK, 1)).ok()?;
        let desc_b = make_gmma_desc(Major::K, GmmaSwizzle::B128, &step, e).ok()?;
        // ptxas allocates the consumers' code after `setmaxnreg.inc` within its count
        let budget = consumer_regs.min(255) / 8 * 8;
        let batched = Self::batched_regs(words, bm) <= budget;
        // one word: always step by step (word by word would reuse one fragment), so only
        // where that fits (four consumers: up to 80 tokens; 128 spill in 104 registers)
        if words == 1 && !batched {
            return None;
        }
        Some(AwqWgmma {
            bm,
            wgs_r,
            wgs_n,
            words,
            acc_regs: words * bm / 2,
            stages: stages as i64,
            x_stage_bytes,
            w_stage_bytes,
            s_stage_bytes,
            z_stage_bytes,
            w_offset,
            s_offset,
            z_offset,
            barrier_offset,
            consumer_regs,
            batched,
            mma,
            desc_b,
            tma: tma_load(2, false, x_stage_bytes * 8),
            bulk: bulk_load(16),
            sync: vec![
                mbarrier_init(),
                fence_mbarrier_init(),
                mbarrier_arrive(),
                mbarrier_arrive_expect_tx(),
                mbarrier_wait_parity(),
                elect_one_sync(),
                setmaxnreg_dec(),
                setmaxnreg_inc(),
                prefetch_tensormap(),
                wgmma_fence(),
                wgmma_commit_group(),
                wgmma_wait_group(),
            ],
            checkpoint: false,
            ctas_per_sm: ctas,
            boxes: false,
            in_flight: 1,
        })
    }

    /// The same plan with `groups` (1 ..= 3) `wgmma` groups in flight after each k16 step;
    /// `None` for more than one where the steps are not batched (word by word, a fragment
    /// per word of parity 0 / 1). The four buffers cost no registers over two: ptxas already
    /// gives the four unrolled steps of a k-tile their own fragment registers (the
    /// 64-token kernels of one and two consumer warpgroups, 128, 152 and 160 tokens compile
    /// without spills at depths 2 and 3, as at 1).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_wgmma::AwqWgmma;
    /// let p = AwqWgmma::new(Element::F16, 64, [2, 1], 6).unwrap();
    /// assert_eq!(p.clone().with_in_flight(3).unwrap().in_flight, 3);
    /// assert!(p.clone().with_in_flight(0).is_none() && p.with_in_flight(4).is_none());
    /// // 192 tokens x 2 words go word by word: one group in flight only
    /// let word_by_word = AwqWgmma::new(Element::F16, 192, [2, 1], 6).unwrap();
    /// assert!(word_by_word.clone().with_in_flight(1).is_some() && word_by_word.with_in_flight(2).is_none());
    /// ```
    pub fn with_in_flight(self, groups: i64) -> Option<AwqWgmma> {
        let fits = groups == 1 || self.batched;
        ((1..=3).contains(&groups) && fits).then_some(AwqWgmma {
            in_flight: groups,
            ..self
        })
    }

    /// The same plan on the checkpoint's `qweight` ([`crate::awq_wgmma_checkpoint`]), or
    /// `None` with one word per warpgroup (a lane's words must be whole `PRMT` pairs).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_wgmma::AwqWgmma;
    /// let p = AwqWgmma::new(Element::F16, 16, [2, 1], 8).unwrap().with_checkpoint().unwrap();
    /// assert!(p.checkpoint && p.w_stage_bytes == 8192 && p.w_offset % 1024 == 0);
    /// assert!(AwqWgmma::new(Element::F16, 16, [4, 1], 8).unwrap().with_checkpoint().is_none());
    /// ```
    pub fn with_checkpoint(self) -> Option<AwqWgmma> {
        // the boxes' 128-byte swizzle repeats every 1024 bytes: stages start on it
        debug_assert!(self.w_offset % 1024 == 0 && self.w_stage_bytes % 1024 == 0);
        (self.words >= 2).then_some(AwqWgmma {
            checkpoint: true,
            ..self
        })
    }

    /// The same plan with the prepared weight's stages TMA-loaded as one tensor box each:
    /// the prepared weight (`2 N` words a k16 block, `128` words a 64-column block of it,
    /// [`crate::awq_prepared`]) as a `(128, N/64, K/16)` tensor of 32-bit words (strides
    /// 512 and `8 N` bytes), the box `(128, BN/64, 4)`: `4 e0 + 512 wb + 8 BN kb` in the
    /// stage, the bulk runs' image (k16 block `kb` at `8 BN kb`, 64-column block `wb` at
    /// `512 wb`). Columns past N and k16 blocks past K are zero-filled and counted: the
    /// stage always takes `w_stage_bytes`.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_wgmma::AwqWgmma;
    /// let p = AwqWgmma::new(Element::F16, 64, [1, 1], 6).unwrap().with_boxes();
    /// assert!(p.boxes && !p.checkpoint && p.w_stage_bytes == 4 * 8 * p.bn());
    /// ```
    pub fn with_boxes(self) -> AwqWgmma {
        AwqWgmma { boxes: true, ..self }
    }

    /// Registers per consumer thread after `setmaxnreg.inc` with `consumers` consumer
    /// warpgroups: the CTA's pool (the launch's registers per thread, `65536 / threads`
    /// rounded down to the allocation's 8, at most 256, times the threads) less the
    /// producer's [`PRODUCER_REGS`], shared by the consumers, a multiple of 8 (`setmaxnreg`),
    /// at most 256: 256, 232, 152 and 104 for one to four consumers.
    ///
    /// ```
    /// use rcute_collective::awq_wgmma::AwqWgmma;
    /// assert_eq!([1, 2, 3, 4].map(AwqWgmma::consumer_regs), [256, 232, 152, 104]);
    /// ```
    pub fn consumer_regs(consumers: i64) -> i64 {
        Self::consumer_regs_at(consumers, 1)
    }

    /// [`AwqWgmma::consumer_regs`] with `ctas` CTAs resident on one SM: the launch's
    /// registers per thread are `65536 / ctas / threads` rounded down to 8 (the
    /// `__launch_bounds__` cap), the rest as there: with two CTAs 96 for two consumer
    /// warpgroups (80 at launch), 216 for one (128 at launch).
    ///
    /// ```
    /// use rcute_collective::awq_wgmma::AwqWgmma;
    /// assert_eq!([1, 2].map(|c| AwqWgmma::consumer_regs_at(c, 2)), [216, 96]);
    /// assert_eq!(AwqWgmma::consumer_regs_at(2, 1), AwqWgmma::consumer_regs(2));
    /// ```
    pub fn consumer_regs_at(consumers: i64, ctas: i64) -> i64 {
        let threads = 128 * (1 + consumers);
        let pool_per_wg = (65536 / ctas / threads / 8 * 8).min(256) * threads / 128;
        ((pool_per_wg - PRODUCER_REGS) / consumers / 8 * 8).min(256)
    }

    /// Registers a batched consumer thread needs (estimate): the accumulators, two steps'
    /// fragments (`2 x words x 4`), two steps' shared-memory words (`2 x words`) and 52 for
    /// the group registers, addresses and loop state; batched where it fits the consumers'
    /// `setmaxnreg` count (ptxas allocates the code after `setmaxnreg.inc` within it: the
    /// 2-consumer kernels of 128 tokens x 2 words and 64 x 4 words, 200 and 220 by this
    /// estimate, compile without spills at 232, up to R191 in their mainloop).
    pub fn batched_regs(words: i64, bm: i64) -> i64 {
        words * bm / 2 + 8 * words + 2 * words + 52
    }

    /// Threads of a CTA: the producer warpgroup and the consumers.
    pub fn threads(&self) -> i64 {
        128 * (1 + self.wgs_r * self.wgs_n)
    }

    /// Weight columns of a CTA.
    pub fn bn(&self) -> i64 {
        256 * self.wgs_n
    }

    /// Dynamic shared memory: the rings, their barriers, and the
    /// 1024 bytes the kernel may skip to align the base.
    pub fn smem_bytes(&self) -> i64 {
        self.barrier_offset + 16 * self.stages + 1024
    }

    /// The 64-column block (within the CTA) of warp `warp` of consumer warpgroup `wg`
    /// (0-based among the consumers), and its first word.
    pub fn block_and_word(&self, wg: i64, warp: i64) -> (i64, i64) {
        (4 * (wg / self.wgs_r) + warp, (wg % self.wgs_r) * self.words)
    }

    /// The weight column (within the CTA) that virtual row `16 warp + g + 8 h` of the
    /// `wgmma` of the warpgroup's word `i` (`0 .. words`) stands for.
    pub fn virtual_column(&self, wg: i64, warp: i64, i: i64, g: i64, h: i64) -> i64 {
        let (wb, r0) = self.block_and_word(wg, warp);
        64 * wb + 8 * g + 2 * (r0 + i) + h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq_prepared::{prepare_lane_words, prepared_lane_word};
    use rcute_atom::convert_int4::{pack_awq, u4x8_to_16x2_biased, Biased16};
    use rcute_atom::mma_sm90::a_layout_64xk;

    /// Every register value of `wgmma`'s register A (`ALayout_64x16`: thread, value ->
    /// (row, k)), filled from the prepared words the way the kernel does (`a = {pair 0,
    /// pair 2, pair 1, pair 3}` of word `r0 + i`), is the weight at the row's planned
    /// column: a 64 x 16 block of `q` read through the layout and through the plan agree.
    #[test]
    fn prepared_words_are_wgmma_register_a() {
        let (k, n) = (16i64, 512i64);
        let q: Vec<u8> = (0..k * n).map(|i| ((i * 5 + i / 11 + i * i % 7) % 16) as u8).collect();
        let word = |row: i64, j: i64| pack_awq(&std::array::from_fn(|c| q[(row * n + 8 * j + c as i64) as usize]));
        let mut prepared = vec![0u32; (k * n / 8) as usize];
        for wb in 0..n / 64 {
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                let at = prepared_lane_word(0, wb, lane, n) as usize;
                let rows = [0, 1, 8, 9].map(|d| word(2 * t + d, 8 * wb + g));
                prepared[at..at + 4].copy_from_slice(&prepare_lane_words(rows));
            }
        }
        let a = a_layout_64xk(16);
        for warps in [[1, 2], [2, 1], [1, 1], [4, 1]] {
            let p = AwqWgmma::new(Element::F16, 64, warps, 4).unwrap();
            for wg in 0..warps[0] * warps[1] {
                for i in 0..p.words {
                    for thr in 0..128i64 {
                        let (warp, lane) = (thr / 32, thr % 32);
                        let (wb, r0) = p.block_and_word(wg, warp);
                        let w = prepared[prepared_lane_word(0, wb, lane, n) as usize + (r0 + i) as usize];
                        let pairs = u4x8_to_16x2_biased(w, Biased16::F16);
                        let regs = [pairs[0], pairs[2], pairs[1], pairs[3]];
                        for v in 0..8i64 {
                            // (row, k) of register value v: index = row + 64 k
                            let idx = a.crd2idx(&tuple!(thr, v)).unwrap().as_static().unwrap();
                            let (row, kk) = (idx % 64, idx / 64);
                            assert_eq!(row / 16, warp);
                            let (g, h) = (row % 8, (row % 16) / 8);
                            let col = p.virtual_column(wg, warp, i, g, h);
                            let got = Biased16::F16.values(regs[(v / 2) as usize])[(v % 2) as usize] - 1024.0;
                            assert_eq!(got, f32::from(q[(kk * n + col) as usize]), "wg {wg} thr {thr} v {v}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn refused_configurations() {
        assert!(AwqWgmma::new(Element::F16, 128, [1, 1], 4).is_none()); // 256 accumulators
        assert!(AwqWgmma::new(Element::F16, 128, [2, 1], 4).is_some());
        // two consumers splitting the words: up to 192 tokens (192 accumulators of 232
        // registers; word by word above 160 tokens); three consumers (152 registers) up to 128
        let big = AwqWgmma::new(Element::F16, 192, [2, 1], 6).unwrap();
        assert_eq!((big.acc_regs, big.consumer_regs, big.batched), (192, 232, false));
        assert!(AwqWgmma::new(Element::F16, 160, [2, 1], 6).unwrap().batched);
        assert!(AwqWgmma::new(Element::F16, 200, [2, 1], 4).is_none());
        assert!(AwqWgmma::new(Element::F16, 64, [1, 3], 4).is_some());
        assert!(AwqWgmma::new(Element::F16, 72, [1, 3], 4).is_none());
        assert!(AwqWgmma::new(Element::BF16, 64, [3, 1], 4).is_none());
        assert!(AwqWgmma::new(Element::F16, 64, [1, 4], 4).is_none());
        assert!(AwqWgmma::new(Element::F16, 64, [2, 2], 4).is_none());
        // four consumers splitting the words: one word each, 104 registers (the pool of 640
        // threads at 96, less the producer's 40), batched steps up to 80 tokens
        let four = AwqWgmma::new(Element::F16, 64, [4, 1], 8).unwrap();
        assert_eq!(
            (four.words, four.acc_regs, four.consumer_regs, four.threads(), four.bn()),
            (1, 32, 104, 640, 256)
        );
        assert!(four.batched && AwqWgmma::new(Element::F16, 80, [4, 1], 4).unwrap().batched);
        assert!(AwqWgmma::new(Element::F16, 88, [4, 1], 4).is_none());
        assert!(AwqWgmma::new(Element::F16, 64, [4, 2], 4).is_none());
        assert_eq!(
            (four.virtual_column(3, 2, 0, 5, 1), four.block_and_word(2, 1)),
            (64 * 2 + 40 + 6 + 1, (1, 2))
        );
        assert!(AwqWgmma::new(Element::F16, 64, [1, 1], 1).is_none());
        assert!(AwqWgmma::new(Element::E4M3, 64, [1, 1], 4).is_none());
        let p = AwqWgmma::new(Element::BF16, 128, [2, 1], 4).unwrap();
        // the SM90 GEMM's K-major B128 descriptor: LBO 1, SBO 64 (1024 bytes), layout type 1
        assert_eq!(
            p.desc_b.device_expr("a").unwrap(),
            "(0x4000004000010000ull | (uint64_t)(((uint32_t)(a) & 0x3FFFFu) >> 4))"
        );
        assert_eq!(
            (p.threads(), p.bn(), p.consumer_regs, p.smem_bytes()),
            (384, 256, 232, 4 * (16384 + 8192 + 1024 + 256) + 64 + 1024)
        );
        // eight stages of 128 tokens x 256 columns fit (208,000 bytes); 64 x 768 only to 6
        assert_eq!(
            AwqWgmma::new(Element::F16, 128, [2, 1], 8).unwrap().smem_bytes(),
            208000
        );
        assert!(AwqWgmma::new(Element::F16, 64, [1, 3], 6).is_some());
        assert!(AwqWgmma::new(Element::F16, 64, [1, 3], 7).is_none());
        // batched steps where the registers allow: one consumer warpgroup (248), two (232),
        // three only up to 24 tokens x 4 words (152)
        assert!(p.batched && AwqWgmma::new(Element::F16, 64, [1, 2], 4).unwrap().batched);
        assert!(AwqWgmma::new(Element::F16, 64, [1, 1], 4).unwrap().batched);
        assert!(AwqWgmma::new(Element::F16, 32, [1, 2], 4).unwrap().batched);
        assert!(AwqWgmma::new(Element::F16, 24, [1, 3], 4).unwrap().batched);
        assert!(!AwqWgmma::new(Element::F16, 32, [1, 3], 4).unwrap().batched);
    }
}
