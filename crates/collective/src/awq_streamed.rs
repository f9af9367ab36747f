//! The register-streamed AWQ decode mainloop ([`crate::awq_mainloop`] with `streamed`): the
//! prepared weight ([`crate::awq_prepared`]) goes from global memory straight into
//! registers, with no shared-memory stage, no `cp.async` and no CTA barrier in the loop;
//! or, with [`AwqStreamed::with_shared_ring`], each lane's 16 bytes a step through its own
//! slots of a shared `cp.async` ring (still no stage shared between lanes, no barrier).
//!
//! **Swap-AB.** In the prepared layout lane `(g, t)` of a warp owns 16 contiguous bytes per
//! (k16 block, 64-column block), and word `r` of them holds the nibble pairs
//!
//! ```text
//! pair 0 = column 8g + 2r,     k 2t, 2t+1      pair 1 = column 8g + 2r,     k 2t+8, 2t+9
//! pair 2 = column 8g + 2r + 1, k 2t, 2t+1      pair 3 = column 8g + 2r + 1, k 2t+8, 2t+9
//! ```
//!
//! which is exactly an `m16n8k16` **A** fragment (`a0 = pair 0`, `a1 = pair 2`, `a2 =
//! pair 1`, `a3 = pair 3`) of a 16-row "virtual tile" whose row `g` is weight column
//! `8g + 2r` and row `g + 8` column `8g + 2r + 1`. So the weight is the MMA's A operand
//! (4 MMAs per 16 bytes, one per word) and `x` its B operand (`k16 x n8`, `n` = the rows
//! of `x`: one B fragment per 8 rows of the `BM` = 8, 16, 24 or 32 rows of a CTA). The
//! accumulator `d` of word `r` holds output columns `8g + 2r` (`d0`, `d1`: rows `2t`,
//! `2t+1`) and `8g + 2r + 1` (`d2`, `d3`): lane `(g, t)` ends with columns `8g .. 8g + 8`
//! of rows `2t, 2t+1` (and `8 + 2t, 9 + 2t`), and needs per group only the scales of its
//! eight columns (one 16-byte load) and one `qzeros` word.
//!
//! **Pipeline.** Each warp walks a contiguous range of k16 steps of one 64-column block
//! (the CTA's K range split over its `k_slices` warps along K; `col_blocks` warps along
//! N), keeping `ring` steps of the weight in flight in registers (one 16-byte
//! `ld.global.nc.L1::no_allocate` per lane and step; with the shared ring one 16-byte
//! `cp.async.cg` into the lane's own slot, one commit group per step,
//! `cp.async.wait_group ring - 1` and one 16-byte shared load before the step's
//! conversion); the next group's scales and zero word are loaded one group ahead (with the
//! shared ring at 16 rows into the lane's group slots, [`AwqStreamed::group_slot_bytes`]).
//! `x` is staged once per CTA (or by each warp for its own steps,
//! [`AwqStreamed::warp_staged_x`]) into shared memory in the
//! fragment order `[row][t][j]` (word `w` of a row's K range at `(w % 4, w / 4)`, rows of
//! [`AwqStreamed::x_row_words`], `t` planes of [`AwqStreamed::x_t_words`] words: the two B
//! registers of a step are one conflict-free 8-byte load; rows past M read a zero row). The warps' partial sums meet
//! once at the end in shared memory (added in warp order, deterministic), then a direct
//! store, or with K splits: on sm_90 with at most [`MAX_CLUSTER_SPLITS`] splits the splits
//! of a tile run as one cluster and split 0 adds the others' partial tiles in rank order,
//! read through distributed shared memory or pushed by the others into its own
//! ([`AwqStreamed::clustered`], [`AwqStreamed::with_cluster_push`]); otherwise the
//! split-K slab reduction in global memory of the other AWQ kernels.
//!
//! **Weight layouts.** [`StreamedWeight::Prepared`] reads the prepared layout above;
//! [`StreamedWeight::Checkpoint`] AutoAWQ's checkpoint words as they are, four 4-byte
//! loads per lane and step turned into the same A fragments by byte permutations
//! ([`crate::awq_streamed_checkpoint`]); everything else is the same plan.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
//! // 8 rows, one 64-column block, 4 warps along K, 8 steps in flight per warp.
//! let cfg = AwqMainloopConfig::new(Element::F16, [8, 64, 64], [4, 1], 8, 4).streamed();
//! let p = AwqMainloop::new(&cfg).unwrap();
//! let s = p.streamed.as_ref().unwrap();
//! assert_eq!((p.threads, s.k_slices, s.col_blocks, s.b_frags, s.max_k_tiles), (128, 4, 1, 1, 64));
//! // (row, t, j) -> word: t planes of 8 * 32 + 2 words, rows of four planes.
//! assert_eq!((s.x_t_words, s.x_row_words), (514, 2056));
//! assert_eq!(p.smem_bytes, (8 + 1) * 2056 * 4);
//! // with the shared ring: after the staged rows and the zero row, 8 steps x 128 lanes x 16 bytes
//! let p = AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [8, 64, 64], [4, 1], 8, 4).streamed_shared_ring()).unwrap();
//! assert_eq!(p.smem_bytes, (8 + 1) * 2056 * 4 + 8 * 128 * 16);
//! assert!(AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [40, 64, 64], [4, 1], 8, 4).streamed()).is_err());
//! ```

use crate::lane_ring::LaneRing;
use rcute_atom::cluster_dsmem::{
    cluster_size_sm90, cluster_sync_relaxed_sm90, cluster_sync_sm90, ld_dsmem_f32x4, mbarrier_wait_parity_sm90,
    push_barrier_init_sm90, st_async_b32,
};
use rcute_atom::copy_cp_async::{cp_async, CacheOp};
use rcute_atom::copy_ldst::ld_global_stream;
use rcute_atom::{CopyOp, Snippet};

/// `x` rows a CTA stages (and k-tiles per split), in rows x k-tiles: `BM * max_k_tiles`
/// (64 KB of 16-bit `x` at most per CTA: K = 4096 in one split of 8 rows).
pub const X_ROW_TILES: i64 = 512;

/// Padding of a `t` plane of the staged `x` (words): planes `2 (mod 32)` words apart and
/// rows `8 (mod 32)`, so the 8-byte fragment loads of lanes `(g, t)`, `g < 4`, hit 16
/// distinct bank pairs.
pub const X_PLANE_PAD_WORDS: i64 = 2;

/// Padding of a row of the partial-sum tile (floats): 16-byte aligned rows.
pub const RED_ROW_PAD: i64 = 4;

/// Most K splits summed in a cluster. Two: on an H100 (BENCHMARKS.md, AWQ, helper awqreg)
/// clusters of 2 splits ran 0.5-0.7 us faster than the global slab sum (1 and 16 x 4096 x
/// 4096), while clusters of 4 ran up to 6 us slower than the slabs (16 x 4096 x 4096, 16
/// rows, 8 warps: 17.6 against 11.5 us), so more splits take the slabs.
pub const MAX_CLUSTER_SPLITS: i32 = 2;

/// Bytes reserved for the push barrier (one 8-byte mbarrier) at the start of the
/// clustered split-K sum's area ([`AwqStreamed::cluster_offset_for`]), so that the partial
/// chunks after it stay 16-byte aligned.
pub const CLUSTER_BARRIER_BYTES: i64 = 16;

/// The layout of the weight a streamed kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamedWeight {
    /// The prepared layout ([`crate::awq_prepared`]): one 16-byte load per lane and step,
    /// each word one A fragment.
    Prepared,
    /// AutoAWQ's checkpoint layout as it is ([`crate::awq_streamed_checkpoint`]): four
    /// word loads per lane and step (rows `2t, 2t+1, 2t+8, 2t+9` of word column `g`),
    /// byte permutations of row pairs into the same A fragments.
    Checkpoint,
}

/// The plan of the register-streamed kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct AwqStreamed {
    /// The weight's layout.
    pub weight: StreamedWeight,
    /// Warps along K (each walks a contiguous share of the CTA's k16 steps).
    pub k_slices: i64,
    /// Warps along N (one 64-column block each).
    pub col_blocks: i64,
    /// k16 steps of the weight in flight per warp (registers: 4 words each).
    pub ring: i64,
    /// B fragments (8 rows of `x` each) per step: `BM / 8`.
    pub b_frags: i64,
    /// Most 64-row k-tiles of one split (the staged `x` holds that many): by default
    /// [`X_ROW_TILES`]` / BM` rounded down to a multiple of 4 (the fragment loads' bank
    /// pattern needs it: 20 at 24 rows).
    pub max_k_tiles: i64,
    /// Words of one `t` plane of a staged `x` row: `8 max_k_tiles` (`j` = word / 4) plus
    /// [`X_PLANE_PAD_WORDS`].
    pub x_t_words: i64,
    /// Words of one staged `x` row: four planes.
    pub x_row_words: i64,
    /// Floats of one row of a warp's partial-sum tile (`64 + RED_ROW_PAD`).
    pub red_row_floats: i64,
    /// Bytes of the partial-sum tiles: `warps x BM x red_row_floats` f32 (they reuse the
    /// staged `x`'s memory after the loop).
    pub red_bytes: i64,
    /// Bytes of one clustered split's partial chunks (32 bytes per 8 columns of a row):
    /// `col_blocks x BM x 8` chunks, the layout of each peer's share of rank 0's push area
    /// ([`AwqStreamed::cluster_offset_for`]).
    pub part_bytes: i64,
    /// The weight's streaming load (read-only path, no L1 allocation): 16 bytes of the
    /// prepared layout, or one 4-byte checkpoint word (four per lane and step).
    pub load: CopyOp,
    /// The prepared weight's shared ring ([`crate::lane_ring`]: `ring` slots of one 16-byte
    /// unit per thread), with [`AwqStreamed::with_shared_ring`]; `None` with the ring of
    /// registers.
    pub lane_ring: Option<LaneRing>,
    /// The copy of a lane's group zero word into its group slot (`cp.async.ca`, 4 bytes;
    /// the scales take the ring's 16-byte copy), with the shared ring at 16 rows only: see
    /// [`AwqStreamed::group_slot_bytes`].
    pub group_copy: Option<Snippet>,
    /// Whether each warp stages the `x` words of its own steps and meets only itself
    /// before its loop (`__syncwarp`, no CTA barrier): with the shared ring, one warp
    /// along N and 16 rows (see [`AwqStreamed::with_shared_ring`]).
    pub warp_staged_x: bool,
    /// The clustered split-K sum ([`rcute_atom::cluster_dsmem`]; each 1 / a no-op / zeros
    /// before sm_90): by loads, the cluster barrier (release: the warps that published
    /// partial chunks), cluster size, peer shared-memory load, cluster barrier without
    /// memory ordering (the other warps, and the barrier that keeps the peers' shared
    /// memory alive until rank 0 has read it); by pushes ([`AwqStreamed::push`]), cluster
    /// size, rank 0's push barrier init, the relaxed cluster barrier of the prelude that
    /// publishes it, the 16-byte push (`st.async` into rank 0's shared memory, bytes
    /// completed on its mbarrier) and rank 0's parity wait.
    pub cluster: Vec<Snippet>,
    /// Whether the clustered split-K sum pushes the peers' partial chunks into rank 0's
    /// shared memory ([`AwqStreamed::with_cluster_push`]).
    pub push: bool,
}

impl AwqStreamed {
    /// The plan for `bm` rows of `x` (8 or 16; 24 or 32 on the prepared weight), `warps = [k_slices, col_blocks]` and `ring`
    /// steps in flight on a `weight` of that layout; `None` for another `bm`, no warps or
    /// an empty ring.
    pub fn new(bm: i64, warps: [i64; 2], ring: i64, weight: StreamedWeight) -> Option<AwqStreamed> {
        let [k_slices, col_blocks] = warps;
        let rows_ok = matches!(bm, 8 | 16) || (matches!(bm, 24 | 32) && weight == StreamedWeight::Prepared);
        if !rows_ok || k_slices < 1 || col_blocks < 1 || k_slices * col_blocks > 32 || ring < 1 {
            return None;
        }
        // a multiple of 4 tiles keeps the planes 2 (mod 32) words apart (24 rows: 20, not 21)
        let max_k_tiles = X_ROW_TILES / bm / 4 * 4;
        let x_t_words = 8 * max_k_tiles + X_PLANE_PAD_WORDS;
        let red_row_floats = 64 + RED_ROW_PAD;
        Some(AwqStreamed {
            weight,
            k_slices,
            col_blocks,
            ring,
            b_frags: bm / 8,
            max_k_tiles,
            x_t_words,
            x_row_words: 4 * x_t_words,
            red_row_floats,
            red_bytes: k_slices * col_blocks * bm * red_row_floats * 4,
            part_bytes: col_blocks * bm * 8 * 32,
            load: ld_global_stream(match weight {
                StreamedWeight::Prepared => 16,
                StreamedWeight::Checkpoint => 4,
            }),
            lane_ring: None,
            group_copy: None,
            warp_staged_x: false,
            cluster: vec![
                cluster_sync_sm90(),
                cluster_size_sm90(),
                ld_dsmem_f32x4(),
                cluster_sync_relaxed_sm90(),
            ],
            push: false,
        })
    }

    /// The plan with the prepared weight's steps through each lane's own slots of a shared
    /// `cp.async` ring ([`AwqStreamed::ring_bytes`]) instead of the ring of registers; the
    /// checkpoint words keep their registers. Why: a warp's global loads into registers
    /// share one scoreboard in the SASS and a use of any of them waits until all are back
    /// (ptxas emits no counted wait for `LDG`), so the register ring drains at every trip
    /// of the unrolled loop and at every group start (the zero word's load shares that
    /// scoreboard); `cp.async` groups have a counted wait (`cp.async.wait_group`, SASS
    /// `DEPBAR.LE`), and the ring leaves the registers (ncu and SASS, BENCHMARKS.md, AWQ,
    /// helper awqdec). The ring is a [`LaneRing`] of one unit per slot.
    ///
    /// At 16 rows (two B fragments a step) a group's scales and zero word take the same
    /// road ([`AwqStreamed::group_slot_bytes`]), and with one warp along N each warp stages
    /// `x` for its own steps ([`AwqStreamed::warp_staged_x`]). Measured together (H100,
    /// BENCHMARKS.md, Session 24, helper awqfix): 16 x 14336 x 4096 (`16x128, 8x2`, slots
    /// only) 18.3 -> 17.0-17.2 us and 16 x 8192 x 4096 (`16x64, 16x1`, both) 12.2 -> 11.5
    /// us, but the 8-row kernels (`8x64, 16x1`, rings 2) with both lost 2.5-5 % (1 x 14336 x
    /// 4096 14.3-14.6 -> 14.8 us, 1 x 4096 x 4096 7.0-7.1 -> 7.4): they keep the register
    /// loads and the CTA's staging.
    ///
    /// ```
    /// use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight};
    /// let s = AwqStreamed::new(8, [8, 1], 12, StreamedWeight::Prepared).unwrap().with_shared_ring();
    /// assert_eq!(s.ring_bytes(), 12 * 256 * 16);
    /// assert_eq!(s.lane_ring.as_ref().map(|r| (r.slots, r.units, r.threads)), Some((12, 1, 256)));
    /// let c = AwqStreamed::new(8, [8, 1], 12, StreamedWeight::Checkpoint).unwrap().with_shared_ring();
    /// assert_eq!((c.ring_bytes(), c.lane_ring), (0, None));
    /// ```
    pub fn with_shared_ring(mut self) -> Self {
        if self.weight == StreamedWeight::Prepared {
            let ring =
                LaneRing::new(self.ring, 1, 32 * self.k_slices * self.col_blocks).expect("a positive ring and warps");
            self.lane_ring = Some(ring);
            if self.b_frags > 1 {
                let zero = cp_async(CacheOp::CacheAlways, 4, false).expect("cp.async.ca of 4 bytes exists");
                self.group_copy = Some(zero.snippet);
                self.warp_staged_x = self.col_blocks == 1;
            }
        }
        self
    }

    /// The plan with the clustered split-K sum by pushes (`streamed_cluster.rs` of the
    /// kernel crate): rank 0 initialises a push barrier (an mbarrier expecting the peers'
    /// bytes) after everything it uses itself ([`AwqStreamed::cluster_offset_for`]) before
    /// the stream and publishes it with one relaxed cluster barrier (arrive and wait, every
    /// thread of the cluster); after the loop each peer pushes its partial chunks into
    /// rank 0's shared memory (`st.async`, completing bytes on the mbarrier) and exits;
    /// rank 0 waits on the mbarrier and adds in rank order. Why: the sum by loads costs two
    /// cluster barriers after the loop, the first a release arrive (a GPU-scope fence,
    /// `MEMBAR.ALL.GPU`, in every thread that wrote partial chunks). Measured (H100,
    /// BENCHMARKS.md, Session 24, helper awqclu; Session 25, helper awqpush, this form):
    /// 1 / 8 / 16 x 4096 x 4096 prepared 6.99-7.07 / 7.87-7.94 / 9.09-9.12 us -> 6.66-6.74
    /// / 7.41-7.46 / 8.47-8.58; the same kernel with the push code ran one split (1 x 14336
    /// x 4096) 4.6-5.0 % slower, so only the clustered rules take it.
    ///
    /// ```
    /// use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight};
    /// let s = AwqStreamed::new(8, [16, 1], 2, StreamedWeight::Prepared).unwrap().with_shared_ring();
    /// let p = s.clone().with_cluster_push();
    /// assert_eq!((s.cluster.len(), p.cluster.len()), (4, 5));
    /// assert_eq!((s.cluster_bytes(), p.cluster_bytes()), (0, 16 + 64 * 32));
    /// // by loads, rank 0 reads the peers' chunks after the partial tiles
    /// assert_eq!(s.smem_bytes_for(8), p.smem_bytes_for(8).max(s.red_bytes_for(8) + s.part_bytes));
    /// ```
    pub fn with_cluster_push(mut self) -> Self {
        self.push = true;
        self.cluster = vec![
            cluster_size_sm90(),
            push_barrier_init_sm90(),
            cluster_sync_relaxed_sm90(),
            st_async_b32(4).expect("a 16-byte st.async exists"),
            mbarrier_wait_parity_sm90(),
        ];
        self
    }

    /// Bytes of the lanes' group slots after the shared ring (the shared ring at 16 rows): per
    /// thread the 16 bytes of its eight columns' scales (16-byte unit `threadIdx.x`) and
    /// its zero word (after all the scale units, word `threadIdx.x`). A group's slots are
    /// copied at the start of the group before it (`cp.async`, in that step's commit
    /// group) and read at its start, so that the scales reach the registers by a counted
    /// wait: loaded by `__ldg` into registers one group ahead, ptxas copied them out of the
    /// load's registers right after the load (predicated, for the groups past K), which
    /// waited for the load from memory at every group start (sm_90a SASS; 1.0 us of the
    /// 14.6 at 1 x 14336 x 4096 on an H100, BENCHMARKS.md, Session 24, helper awqfix).
    ///
    /// ```
    /// use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight};
    /// let s = AwqStreamed::new(16, [16, 1], 4, StreamedWeight::Prepared).unwrap();
    /// assert_eq!(s.group_slot_bytes(), 0);
    /// let r = s.with_shared_ring();
    /// assert_eq!(r.group_slot_bytes(), 512 * 20);
    /// assert!(r.warp_staged_x);
    /// assert_eq!(r.smem_bytes_for(1), 2 * 1032 * 4 + 4 * 512 * 16 + 512 * 20);
    /// // 8 rows: the scales by register loads, x staged by the CTA
    /// let e = AwqStreamed::new(8, [16, 1], 2, StreamedWeight::Prepared).unwrap().with_shared_ring();
    /// assert_eq!((e.group_slot_bytes(), e.warp_staged_x), (0, false));
    /// // two warps along N read the same x: the CTA stages it
    /// let w = AwqStreamed::new(16, [8, 2], 4, StreamedWeight::Prepared).unwrap().with_shared_ring();
    /// assert_eq!((w.group_slot_bytes(), w.warp_staged_x), (512 * 20, false));
    /// ```
    pub fn group_slot_bytes(&self) -> i64 {
        match (&self.lane_ring, &self.group_copy) {
            (Some(r), Some(_)) => r.threads * 20,
            _ => 0,
        }
    }

    /// The plan with `tiles` 64-row k-tiles of `x` staged per split instead of
    /// [`X_ROW_TILES`]` / BM` (`max_k_tiles`, the `t` planes and rows of the staged `x`
    /// follow; planes stay `2 (mod 32)` words apart and rows `8 (mod 32)` where `tiles` is
    /// a multiple of 4, so the fragment loads stay conflict-free). Why: at 16 rows the
    /// default stage holds K = 2048, so a wide weight's K = 4096 ran in two splits of
    /// twice the CTAs; with 64 tiles (128 KB: one CTA an SM) a tile of two 64-column
    /// blocks reads each weight word once in one split, the two B fragments of its 16
    /// rows multiplied by the same A fragment.
    ///
    /// ```
    /// use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight};
    /// let s = AwqStreamed::new(16, [8, 2], 4, StreamedWeight::Prepared).unwrap();
    /// assert_eq!((s.max_k_tiles, s.x_t_words, s.x_row_words), (32, 258, 1032));
    /// let s = s.with_staged_k_tiles(64);
    /// assert_eq!((s.max_k_tiles, s.x_t_words, s.x_row_words), (64, 514, 2056));
    /// assert_eq!(s.smem_bytes_for(16), 17 * 2056 * 4);
    /// ```
    pub fn with_staged_k_tiles(mut self, tiles: i64) -> Self {
        self.max_k_tiles = tiles;
        self.x_t_words = 8 * tiles + X_PLANE_PAD_WORDS;
        self.x_row_words = 4 * self.x_t_words;
        self
    }

    /// Bytes of the prepared weight's shared ring (after the staged `x` and its zero row):
    /// `ring x threads x 16`, lane `l` of the CTA's threads owning bytes `16 (d threads + l)
    /// ..` of slot `d`; 0 with the ring of registers.
    pub fn ring_bytes(&self) -> i64 {
        self.lane_ring.as_ref().map_or(0, LaneRing::bytes)
    }

    /// Bytes of the staged `x` of `rows` rows and the zero row after them (the B fragments
    /// of rows past M read it).
    pub fn x_bytes(&self, rows: i64) -> i64 {
        (rows + 1) * self.x_row_words * 4
    }

    /// Bytes of the warps' partial-sum tiles in a CTA of `rows` rows of `x` (`rows` rows
    /// each; they reuse the staged `x`'s memory after the loop).
    pub fn red_bytes_for(&self, rows: i64) -> i64 {
        self.k_slices * self.col_blocks * rows * self.red_row_floats * 4
    }

    /// Byte offset of a clustered split's partial chunks with the sum by loads, in a CTA of
    /// `rows` rows of `x`: after the warps' partial tiles ([`AwqStreamed::red_bytes_for`]).
    pub fn part_offset_for(&self, rows: i64) -> i64 {
        self.red_bytes_for(rows)
    }

    /// Dynamic shared memory of a CTA of at most `rows` rows of `x` (`1 ..= BM`) launched
    /// without clusters: the staged rows, the zero row, the weight's shared ring
    /// ([`AwqStreamed::ring_bytes`]) and the group slots
    /// ([`AwqStreamed::group_slot_bytes`]), or the warps' partial tiles of those rows (and,
    /// with the clustered sum by loads, a split's partial chunks after them) where
    /// larger; the sum by pushes adds [`AwqStreamed::cluster_bytes`] to a clustered
    /// launch. The kernel lays shared memory out by its CTA's row count, so a launch of `M
    /// < BM` rows needs only `smem_bytes_for(M)`: at one row an eighth of the full stage,
    /// which leaves the L1 (the shared-memory carveout's other side) for the weight loads
    /// in flight.
    ///
    /// ```
    /// use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight};
    /// let s = AwqStreamed::new(8, [16, 1], 4, StreamedWeight::Prepared).unwrap();
    /// assert_eq!(s.smem_bytes_for(1), 2 * 2056 * 4);
    /// assert_eq!(s.smem_bytes(8), s.smem_bytes_for(8) + s.cluster_bytes());
    /// assert_eq!(s.smem_bytes_for(8), 9 * 2056 * 4);
    /// let r = s.with_shared_ring();
    /// assert_eq!(r.smem_bytes_for(1), 2 * 2056 * 4 + 4 * 512 * 16);
    /// ```
    pub fn smem_bytes_for(&self, rows: i64) -> i64 {
        let parts = if self.push { 0 } else { self.part_bytes };
        (self.x_bytes(rows) + self.ring_bytes() + self.group_slot_bytes()).max(self.red_bytes_for(rows) + parts)
    }

    /// Byte offset of the clustered split-K sum's area in a CTA of `rows` rows of `x`: after
    /// everything the CTA uses itself ([`AwqStreamed::smem_bytes_for`]), since the peers
    /// push into rank 0's while rank 0 still streams. The push barrier (an mbarrier, 8 of
    /// [`CLUSTER_BARRIER_BYTES`]) first, then rank `r > 0`'s partial chunk `c` at
    /// [`CLUSTER_BARRIER_BYTES`]` + (r - 1) part_bytes + 32 c` (chunk `c`: the epilogue's
    /// row `(c / 8) % BM`, columns `8 (c % 8) ..` of 64-column block `c / (8 BM)`).
    ///
    /// ```
    /// use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight, CLUSTER_BARRIER_BYTES};
    /// let s = AwqStreamed::new(8, [16, 1], 2, StreamedWeight::Prepared).unwrap().with_shared_ring().with_cluster_push();
    /// // one row: 2 staged rows + the ring of 2 x 512 lanes x 16 bytes; then 16 + 2048 bytes
    /// assert_eq!(s.cluster_offset_for(1), 2 * 2056 * 4 + 2 * 512 * 16);
    /// assert_eq!(s.cluster_bytes(), CLUSTER_BARRIER_BYTES + 8 * 8 * 32);
    /// // 8 rows: the 9 staged rows and the ring are larger than the 16 warps' partial tiles
    /// assert_eq!(s.cluster_offset_for(8), 9 * 2056 * 4 + 2 * 512 * 16);
    /// assert!(s.red_bytes_for(8) < s.cluster_offset_for(8));
    /// ```
    pub fn cluster_offset_for(&self, rows: i64) -> i64 {
        self.smem_bytes_for(rows)
    }

    /// Bytes of the clustered split-K sum's area with the sum by pushes: the push barrier
    /// and the partial chunks of [`MAX_CLUSTER_SPLITS`]` - 1` peers; 0 with the sum by
    /// loads.
    pub fn cluster_bytes(&self) -> i64 {
        if self.push {
            CLUSTER_BARRIER_BYTES + (MAX_CLUSTER_SPLITS as i64 - 1) * self.part_bytes
        } else {
            0
        }
    }

    /// Dynamic shared memory of a CTA of at most `rows` rows, launched in clusters or not.
    pub fn smem_bytes_launch(&self, rows: i64, clustered: bool) -> i64 {
        self.smem_bytes_for(rows) + if clustered { self.cluster_bytes() } else { 0 }
    }

    /// Dynamic shared memory of a CTA of `bm` rows (the plan's most: launched in clusters).
    pub fn smem_bytes(&self, bm: i64) -> i64 {
        self.smem_bytes_launch(bm, true)
    }

    /// Whether `splits` K splits of this kernel run as one `(1, 1, splits)` cluster per
    /// output tile on a GPU of compute capability `cc` (sm_90, 2 ..= [`MAX_CLUSTER_SPLITS`]
    /// splits), summing the splits through distributed shared memory instead of the
    /// split-K slabs in global memory.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    /// let p = AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [8, 64, 64], [8, 1], 8, 4).streamed()).unwrap();
    /// let s = p.streamed.unwrap();
    /// assert!(s.clustered(2, (9, 0)) && !s.clustered(1, (9, 0)) && !s.clustered(4, (9, 0)));
    /// assert!(!s.clustered(2, (8, 0)));
    /// ```
    pub fn clustered(&self, splits: i32, cc: (u32, u32)) -> bool {
        cc == (9, 0) && (2..=MAX_CLUSTER_SPLITS).contains(&splits)
    }

    /// The word of staged `x` that holds `x[row][2 w .. 2 w + 2]` (`w` the word within the
    /// CTA's K range): `(row, w % 4, w / 4)` of `[row][t][j]`.
    pub fn x_word(&self, row: i64, w: i64) -> i64 {
        row * self.x_row_words + (w % 4) * self.x_t_words + w / 4
    }

    /// The staged words lane `lane` loads as the B fragment of CTA step `step` (row
    /// `lane / 4` of the fragment): `b0` = `x` k `16 step + 2t, +1`, `b1` = `+8, +9`.
    pub fn b_words(&self, lane: i64, step: i64) -> [i64; 2] {
        let (g, t) = (lane / 4, lane % 4);
        [self.x_word(g, 8 * step + t), self.x_word(g, 8 * step + t + 4)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq_prepared::{prepare_lane_words, prepared_lane_word};
    use rcute_atom::convert_int4::{pack_awq, u4x8_to_16x2_biased, Biased16};

    /// The prepared words of every lane, read as swap-AB A fragments (`a0 = pair 0`, `a1 =
    /// pair 2`, `a2 = pair 1`, `a3 = pair 3`) with `mma.sync`'s A layout (`a0`: row `g`,
    /// k `2t, 2t+1`; `a1`: row `g + 8`; `a2`: row `g`, k `2t+8`; `a3`: row `g + 8`, k
    /// `2t+8`), are the weight with virtual row `g` = column `8g + 2r` and row `g + 8` =
    /// column `8g + 2r + 1`.
    #[test]
    fn prepared_words_are_swap_ab_a_fragments() {
        let (k, n) = (16i64, 64i64);
        let q: Vec<u8> = (0..k * n).map(|i| ((i * 11 + i / 7) % 16) as u8).collect();
        let word = |row: i64, j: i64| pack_awq(&std::array::from_fn(|c| q[(row * n + 8 * j + c as i64) as usize]));
        for lane in 0..32i64 {
            let (g, t) = (lane / 4, lane % 4);
            let words = prepare_lane_words([0, 1, 8, 9].map(|d| word(2 * t + d, g)));
            assert_eq!(prepared_lane_word(0, 0, lane, n), 4 * lane);
            for (r, w) in words.iter().enumerate() {
                let pairs = u4x8_to_16x2_biased(*w, Biased16::F16);
                let a = [pairs[0], pairs[2], pairs[1], pairs[3]];
                for (i, reg) in a.iter().enumerate() {
                    let row = g + 8 * (i as i64 % 2);
                    let col = 8 * g + 2 * r as i64 + row / 8;
                    let k0 = 2 * t + 8 * (i as i64 / 2);
                    let want = [k0, k0 + 1].map(|kk| 1024.0 + f32::from(q[(kk * n + col) as usize]));
                    assert_eq!(Biased16::F16.values(*reg), want, "lane {lane} word {r} a{i}");
                }
            }
        }
    }

    /// The staged `x` holds every word of a row once, and the B-fragment loads of the
    /// first and second 16 lanes (the two phases of an 8-byte shared load) hit 16
    /// distinct bank pairs.
    #[test]
    fn staged_x_is_a_bijection_and_fragment_loads_are_conflict_free() {
        for (bm, tiles) in [(8, 0), (16, 0), (16, 64), (24, 0), (24, 64), (32, 0), (32, 32)] {
            let s = AwqStreamed::new(bm, [4, 1], 8, StreamedWeight::Prepared).unwrap();
            let s = if tiles > 0 { s.with_staged_k_tiles(tiles) } else { s };
            let words = 32 * s.max_k_tiles;
            let mut seen = std::collections::HashSet::new();
            for row in 0..bm {
                for w in 0..words {
                    let at = s.x_word(row, w);
                    assert!(at < bm * s.x_row_words && seen.insert(at));
                }
            }
            for step in [0, 5, 4 * s.max_k_tiles - 1] {
                for half in 0..2 {
                    let mut pairs: Vec<i64> = (16 * half..16 * half + 16)
                        .map(|l| {
                            let [b0, b1] = s.b_words(l, step);
                            assert_eq!((b0 % 2, b1, s.b_words(l, step)[0] + 1), (0, b0 + 1, b1));
                            (b0 % 32) / 2
                        })
                        .collect();
                    pairs.sort();
                    pairs.dedup();
                    assert_eq!(pairs.len(), 16, "bm {bm} step {step}");
                }
            }
        }
        assert!(AwqStreamed::new(40, [4, 1], 8, StreamedWeight::Prepared).is_none());
        assert!(AwqStreamed::new(24, [4, 1], 8, StreamedWeight::Checkpoint).is_none());
        assert!(AwqStreamed::new(8, [4, 1], 0, StreamedWeight::Prepared).is_none());
        assert!(AwqStreamed::new(8, [33, 1], 4, StreamedWeight::Prepared).is_none());
    }
}
