//! Programmatic dependent launch (PDL): the two `griddepcontrol` instructions that let a
//! kernel overlap its launch with the tail of the kernel before it in the stream.
//!
//! A kernel launched with the programmatic-stream-serialization attribute (see
//! `rcute_kernel::launch::LaunchConfig::with_programmatic_dependency`) may start while its
//! predecessor still runs. It must therefore execute [`grid_dependency_wait`] in every
//! thread before its first access to global memory that the predecessor may write (or
//! read, for the memory it writes itself): the wait returns once every prerequisite grid
//! has completed and its memory operations are visible. [`launch_dependents`] tells the
//! hardware that the *next* kernel may be launched now; without it the next launch waits
//! for this grid to finish.
//!
//! Both are `sm_90` instructions. Before `sm_90` the snippets compile to nothing (there is
//! no overlapping launch to wait for), so one kernel source serves every target.
//!
//! ```
//! use rcute_atom::grid_dependency::{grid_dependency_wait, launch_dependents};
//! assert!(grid_dependency_wait().code.contains("griddepcontrol.wait;"));
//! assert!(launch_dependents().code.contains("griddepcontrol.launch_dependents;"));
//! assert!(grid_dependency_wait().code.contains("__CUDA_ARCH__ >= 900"));
//! ```

use crate::arch::Arch;
use crate::snippet::{asm_stmt, Snippet};

/// A statement executed only where `griddepcontrol` exists (device code for `sm_90`+).
fn on_sm90(instruction: &str) -> String {
    format!(
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n{}#endif\n",
        asm_stmt(&[instruction.into()], &[], &[], true)
    )
}

/// `griddepcontrol.wait`: block until the prerequisite grids have completed and their
/// memory is visible (returns at once when the launch had no programmatic dependency).
pub fn grid_dependency_wait() -> Snippet {
    Snippet::build(
        "rc_grid_dependency_wait",
        Arch::SM80,
        1,
        vec![],
        &on_sm90("griddepcontrol.wait;"),
    )
}

/// `griddepcontrol.launch_dependents`: allow the dependent grid to launch once every CTA
/// of this grid has executed it (or exited).
pub fn launch_dependents() -> Snippet {
    Snippet::build(
        "rc_launch_dependents",
        Arch::SM80,
        1,
        vec![],
        &on_sm90("griddepcontrol.launch_dependents;"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_instructions_are_guarded_by_the_architecture() {
        for s in [grid_dependency_wait(), launch_dependents()] {
            let guard = s
                .code
                .find("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900")
                .expect("guard");
            let asm = s.code.find("griddepcontrol.").expect("instruction");
            let end = s.code.find("#endif").expect("endif");
            assert!(guard < asm && asm < end, "{}", s.code);
            assert!(s.code.contains("\"memory\""), "a compiler barrier: {}", s.code);
        }
    }
}
