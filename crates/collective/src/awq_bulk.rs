//! The SM90 producer of the prepared AWQ mainloop ([`crate::awq_mainloop`] with `bulk`):
//! one producer warp streams every stage with 1-D `cp.async.bulk` copies into a ring of
//! `stages` buffers guarded by mbarriers, and the consumer warps only dequantize and
//! multiply (no copy instructions, no CTA-wide barrier in the mainloop).
//!
//! A stage is the same `(BM, 64)` tile of `x`, `(64, BN/8)` prepared `qweight` tile, group
//! scales and zero words as the `cp.async` kernel's, in the same shared layout (so the
//! consumers' k16 step is the same code):
//!
//! * `qweight`: the prepared tile is four contiguous runs of `8 BN` bytes (one per k16
//!   block, [`crate::awq_prepared`]): lanes `0..4` copy one run each (`8 min(BN, N - n0)`
//!   bytes; a k16 block past K is not copied and its k16 step is skipped);
//! * scales / zero words: lanes 4, 5 copy scale rows of group slots 0, 1 (`2 min(BN, N - n0)`
//!   bytes), lanes 6, 7 the zero rows (`min(BN, N - n0) / 2` bytes); slot 1 only for G = 32;
//! * `x` (a few KB, from L2): 16-byte `cp.async` with zero fill, chunk `c = lane + 32 j` is
//!   row `c / 8`, chunk `c % 8` of the k-tile, at the `Sw<3,3,3>` position of the `cp.async`
//!   kernel (chunk `ch ^ (r % 8)`); rows past M and chunks past K are zero-filled. Each lane
//!   then arrives on the *full* barrier through `cp.async.mbarrier.arrive.noinc` (once its
//!   copies landed). Bulk copies of 16 bytes would be one serialized `UBLKCP` per lane and
//!   chunk: at M = 16 the 128 per stage made the kernel 2.5x slower (H200, BENCHMARKS.md).
//!
//! The lanes add their bulk bytes (`__reduce_add_sync`), lane 0 arrives on the stage's
//! *full* barrier with that transaction count, then every lane issues its copies; the full
//! barrier completes after `1 + 32` arrivals and the bytes. Each consumer
//! thread arrives on the stage's *empty* barrier once it has read the stage; the producer
//! waits for it (parity `phase ^ 1`, so a fresh ring is free) before refilling. The
//! epilogue's CTA barriers become named barriers over the consumer threads.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
//! let p = AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 8, 4).bulk()).unwrap();
//! let ring = p.bulk.as_ref().unwrap();
//! assert_eq!((p.threads, ring.producer_warp, ring.consumer_threads, ring.x_copies), (160, 4, 128, 4));
//! // Barriers after the eight stages of 11,520 bytes: full[s] at +8 s, empty[s] at +8 (8 + s).
//! assert_eq!((ring.barrier_offset, p.smem_bytes), (8 * 11520, 8 * 11520 + 8 * 16));
//! ```

use rcute_atom::copy_cp_async::{cp_async_addr, cp_async_mbarrier_arrive_noinc, CacheOp};
use rcute_atom::copy_tma::bulk_load;
use rcute_atom::sync::{
    fence_mbarrier_init, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait_parity,
    named_barrier_sync,
};
use rcute_atom::{CopyOp, Snippet};

/// Lanes of the producer warp that copy the four `qweight` runs of a stage.
pub const WEIGHT_LANES: i64 = 4;

/// The producer lanes of the group rows: scales of slots 0, 1, then zero words of slots 0, 1.
pub const SCALE_LANE: i64 = 4;
/// See [`SCALE_LANE`].
pub const ZERO_LANE: i64 = 6;

/// Named barrier of the consumer threads (0 is `__syncthreads`).
pub const CONSUMER_BARRIER: i64 = 1;

/// Arrivals that complete a *full* barrier: lane 0's (with the transaction bytes) and one
/// `cp.async` arrival per producer lane.
pub const FULL_ARRIVALS: i64 = 33;

/// The ring of the SM90 bulk producer.
#[derive(Clone, Debug, PartialEq)]
pub struct AwqBulkRing {
    /// The producer warp: the last one (after the consumer warps).
    pub producer_warp: i64,
    /// Consumer threads: the arrivals that free a stage, and the named barrier's count.
    pub consumer_threads: i64,
    /// `x` chunks per producer lane and stage (`BM * 8 / 32`, rounded up).
    pub x_copies: i64,
    /// Byte offset of the barriers in dynamic shared memory: `full[s]` at `+ 8 s`,
    /// `empty[s]` at `+ 8 (stages + s)`.
    pub barrier_offset: i64,
    /// The 1-D bulk copy (global -> shared, mbarrier transaction bytes).
    pub copy: CopyOp,
    /// The 16-byte zero-filling `cp.async` of `x` (32-bit shared address, source size).
    pub copy_x: Snippet,
    /// `cp.async.mbarrier.arrive.noinc`: a lane's arrival once its `x` copies landed.
    pub x_arrive: Snippet,
    /// mbarrier init / init fence / arrive / arrive with transaction count / parity wait
    /// and the consumers' named barrier.
    pub sync: Vec<Snippet>,
}

impl AwqBulkRing {
    /// The ring of a mainloop with `warps` consumer warps, `bm` rows of `x` per stage and
    /// `stage_bytes` bytes per stage (barriers after `stages` of them).
    pub fn new(warps: i64, bm: i64, stages: usize, stage_bytes: i64) -> AwqBulkRing {
        AwqBulkRing {
            producer_warp: warps,
            consumer_threads: 32 * warps,
            x_copies: (bm * 8 + 31) / 32,
            barrier_offset: stages as i64 * stage_bytes,
            copy: bulk_load(16),
            copy_x: cp_async_addr(CacheOp::CacheGlobal, 16).expect("16-byte cp.async.cg exists"),
            x_arrive: cp_async_mbarrier_arrive_noinc(),
            sync: vec![
                mbarrier_init(),
                fence_mbarrier_init(),
                mbarrier_arrive(),
                mbarrier_arrive_expect_tx(),
                mbarrier_wait_parity(),
                named_barrier_sync(),
            ],
        }
    }

    /// Bytes of the barriers (`full` and `empty`, 8 each per stage).
    pub fn barrier_bytes(stages: usize) -> i64 {
        16 * stages as i64
    }
}
