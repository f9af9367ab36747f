//! Prefetches of global memory into the L2 cache: hints that never change a result.
//!
//! `prefetch.global.L2` brings the 128-byte line holding an address into L2 without
//! waiting for it and without touching a register or the L1. A kernel that knows early
//! which read-only bytes it will stream (a grouped GEMM's weight tiles) can issue them
//! before it may read anything else, e.g. before `griddepcontrol.wait`
//! ([`crate::grid_dependency`]); its later loads then find them in L2. The eviction
//! priority is the normal one (no `::evict_last`): the lines are read once, and a
//! lingering high priority would only crowd out the next kernels' working sets.
//!
//! ```
//! use rcute_atom::prefetch::prefetch_l2;
//! let s = prefetch_l2();
//! assert_eq!(s.name, "rc_prefetch_l2");
//! assert!(s.code.contains("prefetch.global.L2 [%0];"));
//! ```

use crate::arch::Arch;
use crate::snippet::{asm_stmt, Param, ParamTy, Snippet};

/// `prefetch.global.L2 [gmem]`: start fetching the 128-byte line that holds `gmem` into
/// L2. `gmem` must be a byte of global memory the kernel may read (the line around it lies
/// in the same mapped page).
pub fn prefetch_l2() -> Snippet {
    let params = vec![Param::new(
        "gmem",
        ParamTy::GmemPtr {
            bytes: 16,
            constant: true,
        },
    )];
    let body = asm_stmt(&["prefetch.global.L2 [%0];".into()], &[], &["\"l\"(gmem)".into()], true);
    Snippet::build("rc_prefetch_l2", Arch::SM80, 1, params, &body)
}
