//! The statements of a per-lane shared `cp.async` ring ([`rcute_collective::lane_ring`]),
//! shared by the streamed decode kernels that take one instead of a ring of registers
//! (the AWQ `_sring` kernels, [`crate::awq_gemm`]; the MoE `_sring` kernels,
//! [`crate::grouped_gemm::streamed`]): the copy of one unit into the thread's slot, the
//! group commit, the counted wait and the drain. Each kernel places the ring (its
//! `uint4*` to the thread's first unit) and says which units a step holds.
//!
//! ```
//! use rcute_collective::lane_ring::LaneRing;
//! use rcute_kernel::lane_ring;
//! let r = LaneRing::new(3, 1, 128).unwrap();
//! let w = lane_ring::wait(&r, "s", "step");
//! assert_eq!(w.len(), 2);
//! assert_eq!(w[1].clone(), rcute_kernel::emit::Stmt::Expr("rc_cp_async_wait_group<2>()".into()));
//! ```

use crate::emit::Stmt;
use rcute_atom::Snippet;
use rcute_collective::lane_ring::LaneRing;

/// The ring's snippets (copy, commit, wait), for a unit's preamble.
pub fn snippets(r: &LaneRing) -> Vec<Snippet> {
    r.copy.to_vec()
}

/// `copy(base + at, src)`: one 16-byte unit from global `src` into the thread's ring
/// (`base` its `uint4*`, `at` the unit's offset in 16-byte units).
pub fn copy(r: &LaneRing, base: &str, at: &str, src: &str) -> Stmt {
    Stmt::Expr(format!("{}({base} + {at}, {src})", r.copy[0].name))
}

/// The commit of the step's group (empty when the step copied nothing, so that group `s`
/// is always step `s`).
pub fn commit(r: &LaneRing) -> Stmt {
    Stmt::Expr(format!("{}()", r.copy[1].name))
}

/// The wait before step `index` (`what`: "step", "chunk"): groups `0 .. index + slots - 1`
/// are committed, so at most `slots - 1` pending means group `index` has landed.
pub fn wait(r: &LaneRing, index: &str, what: &str) -> Vec<Stmt> {
    let p = r.pending();
    vec![
        Stmt::Comment(format!(
            "groups 0 .. {index} + {p} committed: at most {p} pending, so {what} {index} has landed"
        )),
        Stmt::Expr(format!("{}<{p}>()", r.copy[2].name)),
    ]
}

/// The wait for every copy the thread issued (before its shared memory is used otherwise).
pub fn drain(r: &LaneRing) -> Stmt {
    Stmt::Expr(format!("{}<0>()", r.copy[2].name))
}
