//! A shared `cp.async` ring of per-lane slots for the streamed decode mainloops
//! ([`crate::awq_streamed`], [`crate::moe_streamed`]): each thread copies the 16-byte
//! units it will multiply into its own slots of shared memory (`cp.async.cg`, one commit
//! group per step of its loop), waits by count (`cp.async.wait_group slots - 1`) and
//! reads them back with 16-byte shared loads. No slot is shared between threads, so the
//! ring needs no barrier.
//!
//! Why not a ring of registers: a warp's global loads into registers share one
//! scoreboard in the SASS and a use of any of them waits until all are back (ptxas emits
//! no counted wait for `LDG`), so such a ring drains each time one of its loads (or any
//! other global load on that scoreboard) is used; `cp.async` groups have a counted wait
//! (SASS `DEPBAR.LE`). Measured on the AWQ kernels (BENCHMARKS.md, session 17, helper
//! awqdec).
//!
//! **Layout.** Unit `u` (of [`LaneRing::units`]) of slot `d` of thread `l` is the 16-byte
//! unit `(d units + u) threads + l` of the ring: consecutive threads hit consecutive 16
//! bytes (conflict-free `cp.async` and `LDS.128`).
//!
//! ```
//! use rcute_collective::lane_ring::LaneRing;
//! // 4 steps in flight, 2 units a step, 256 threads
//! let r = LaneRing::new(4, 2, 256).unwrap();
//! assert_eq!(r.bytes(), 4 * 2 * 256 * 16);
//! assert_eq!(r.unit(3, 1), (3 * 2 + 1) * 256);
//! assert_eq!(r.copy[0].name, "rc_cp_async_cg_16");
//! assert!(LaneRing::new(0, 1, 256).is_none());
//! ```

use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::Snippet;

/// Bytes of one unit of a slot (one `cp.async.cg` / `LDS.128`).
pub const UNIT_BYTES: i64 = 16;

/// The plan of a per-lane shared `cp.async` ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneRing {
    /// Slots (steps in flight per thread).
    pub slots: i64,
    /// 16-byte units of one slot of one thread.
    pub units: i64,
    /// Threads of the CTA (each owns its slots).
    pub threads: i64,
    /// The copy of one unit (`cp.async.cg` of 16 bytes), the group commit and the counted
    /// group wait (template parameter: the groups left pending).
    pub copy: [Snippet; 3],
}

impl LaneRing {
    /// The ring of `slots` slots of `units` 16-byte units for each of `threads` threads;
    /// `None` unless all three are positive.
    pub fn new(slots: i64, units: i64, threads: i64) -> Option<LaneRing> {
        if slots < 1 || units < 1 || threads < 1 {
            return None;
        }
        let copy = cp_async(CacheOp::CacheGlobal, UNIT_BYTES as usize, false).expect("cp.async.cg of 16 bytes exists");
        Some(LaneRing {
            slots,
            units,
            threads,
            copy: [copy.snippet, cp_async_commit_group(), cp_async_wait_group()],
        })
    }

    /// Bytes of shared memory the ring takes.
    pub fn bytes(&self) -> i64 {
        self.slots * self.units * self.threads * UNIT_BYTES
    }

    /// Unit `u` of slot `slot` of thread 0, in 16-byte units from the ring's start (thread
    /// `l`'s is `l` further).
    pub fn unit(&self, slot: i64, u: i64) -> i64 {
        (slot * self.units + u) * self.threads
    }

    /// Groups a step's wait leaves pending: `slots - 1` (group `s` = step `s`, committed
    /// `slots` steps ahead).
    pub fn pending(&self) -> i64 {
        self.slots - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (thread, slot, unit) has its own 16 bytes inside the ring, and a warp's 32
    /// threads read 512 contiguous bytes per unit.
    #[test]
    fn slots_are_private_and_contiguous_per_warp() {
        let r = LaneRing::new(3, 4, 64).unwrap();
        let mut seen = vec![false; (r.bytes() / UNIT_BYTES) as usize];
        for d in 0..r.slots {
            for u in 0..r.units {
                for l in 0..r.threads {
                    let at = (r.unit(d, u) + l) as usize;
                    assert!(!seen[at], "({d}, {u}, {l}) twice");
                    seen[at] = true;
                }
                assert_eq!(r.unit(d, u) % 32, 0);
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.pending(), 2);
        assert!(LaneRing::new(2, 0, 64).is_none() && LaneRing::new(2, 1, 0).is_none());
    }
}
