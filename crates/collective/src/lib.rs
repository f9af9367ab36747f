//! # rcute-collective
//!
//! Collective mainloops and epilogues: builders that pick schedules, stage counts,
//! shared-memory layouts and reuse, and fuse epilogue work as a visitor tree.
//!
//! Planned contents (issues 4-6): the SM80 multistage mainloop, the SM90 TMA + `wgmma`
//! warp-specialized mainloops, the TMA warp-specialized epilogue and the epilogue
//! visitor tree (scales, bias, activations).
