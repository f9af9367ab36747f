//! # rcute-atom
//!
//! MMA and copy atoms: the smallest hardware operations a kernel is built from, each with
//! its thread-value layouts in CuTe's convention, plus tiled MMA / tiled copy partitioning.
//!
//! Planned contents (issue 3): SM80 `mma.sync` and SM90 `wgmma` atoms; vectorized ld/st,
//! `cp.async`, `ldmatrix`/`stmatrix` and TMA copy atoms; the synchronization primitives
//! they need; `TiledMma` / `TiledCopy` with `partition_*` at generation time.
