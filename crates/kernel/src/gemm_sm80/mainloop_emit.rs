//! [`MainloopEmit`]: what the SM80 mainloop emitters (the CTA setup, the MMA consumer and
//! their composition in [`super::mainloop`]) need besides the collective's plan.

use super::producer::{G2sMode, G2sRows};
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
