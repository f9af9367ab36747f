//! Programmatic dependent launch in generated kernels: the statements a kernel opens with
//! when its launches carry [`LaunchConfig::with_programmatic_dependency`], and the
//! snippets they call.
//!
//! Such a kernel may be resident before the previous kernel of its stream has finished
//! (its CTAs set up shared memory and barriers meanwhile), so every thread executes
//! `rc_grid_dependency_wait()` before its first global memory access, including threads
//! that return early; then `rc_launch_dependents()` lets the next kernel launch, which
//! waits for this one in the same way. The chain stays ordered: a kernel cannot complete
//! before its predecessor, because each of its threads waited for it.
//!
//! On a split-K GEMM this hides the reduction kernel's launch behind the main kernel's
//! tail, and in a sequence of GEMMs (a decoder layer, a CUDA graph) each launch behind the
//! previous kernel's.
//!
//! [`LaunchConfig::with_programmatic_dependency`]: crate::launch::LaunchConfig::with_programmatic_dependency

use crate::emit::Stmt;
use rcute_atom::grid_dependency::{grid_dependency_wait, launch_dependents};
use rcute_atom::Snippet;

/// The snippets [`prologue`] calls.
pub fn snippets() -> [Snippet; 2] {
    [grid_dependency_wait(), launch_dependents()]
}

/// The statements, placed before the kernel's first global memory access and before any
/// early return.
///
/// ```
/// use rcute_kernel::emit::Stmt;
/// let s = rcute_kernel::grid_dependency::prologue();
/// assert_eq!(s[1], Stmt::Expr("rc_grid_dependency_wait()".into()));
/// assert_eq!(s[2], Stmt::Expr("rc_launch_dependents()".into()));
/// ```
pub fn prologue() -> Vec<Stmt> {
    vec![
        Stmt::Comment(
            "programmatic dependent launch: wait for the previous kernel's memory before touching global memory, then let the next kernel launch".into(),
        ),
        Stmt::Expr("rc_grid_dependency_wait()".into()),
        Stmt::Expr("rc_launch_dependents()".into()),
    ]
}
