//! [`MainloopEmit`]: what the SM80 mainloop emitters (the CTA setup, the MMA consumer and
//! their composition in [`super::mainloop`]) need besides the collective's plan.

use super::producer::G2sMode;
use crate::emit::Stmt;

/// What the shared mainloop emitter ([`super::mainloop::mainloop_stmts`]) needs besides
/// the plan.
pub(crate) struct MainloopEmit<'a> {
    /// The kernel name: prefix of the `{name}_sA` / `{name}_sB` smem offset functions.
    pub name: &'a str,
    /// log2 of the rasterization swizzle.
    pub raster_swizzle: u32,
    /// Byte offset of the serial split-K ticket in dynamic shared memory (after the
    /// mainloop / epilogue union).
    pub ticket_offset: usize,
    /// How tiles reach shared memory.
    pub g2s: G2sMode,
    /// The device function that issues one MMA atom on `(d, a, b, c)` fragments.
    pub mma_fn: &'a str,
    /// Replaces the CTA setup of [`super::cta::cta_setup`] (the grouped kernels pick their
    /// tile and expert from device-resident routing): it must declare the same names
    /// the rest of the mainloop uses (`rc_smem`, `sA`, `sB`, `tid`, `lane`, `warp_m`,
    /// `warp_n`, `m0`, `n0`, `k_begin`, `k_end`, `k_tile_count`, `gA`, `gB`).
    pub cta: Option<Vec<Stmt>>,
    /// Operands whose rows are gathered in the load stage.
    pub rows: G2sRows,
}

/// Row gathers of the K-major operands in the load stage: for an operand with `Some`
/// statements, they run once per load pass with the tile row `r` (an `int`, `0 <= r <
/// BM` or `BN`) in scope and must declare `src_row` (`int`: the operand's row that tile
/// row `r` reads) and `src_ok` (`bool`: whether that row exists; if not, the row is
/// zero-filled). `None`: row `m0 + r` (`n0 + r`), in bounds when below `M` (`N`).
#[derive(Clone, Debug, Default)]
pub(crate) struct G2sRows {
    /// A's row map.
    pub a: Option<Vec<Stmt>>,
    /// B's row map.
    pub b: Option<Vec<Stmt>>,
}

impl G2sRows {
    pub(crate) fn of(&self, is_a: bool) -> Option<&[Stmt]> {
        if is_a {
            self.a.as_deref()
        } else {
            self.b.as_deref()
        }
    }
}
