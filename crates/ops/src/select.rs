//! Kernel selection for `gemm`, in one place: tile, warps, stages and split-K per shape.
//!
//! The rules target the shapes measured in `BENCHMARKS.md` on the H200 (132 SMs): large
//! problems get big tiles with a rasterization swizzle; decode shapes (small M) get a
//! narrow-M tile and split K until the grid fills the machine. The autotuner (a later
//! issue) replaces these rules with measured choices and keeps this interface.

use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};

/// A kernel configuration and its run-time split-K factor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The generated kernel's configuration.
    pub config: GemmSm80Config,
    /// K-splits (1 = none); >1 runs the parallel split-K path.
    pub split_k: u32,
}

/// Pick a configuration for an `m x n x k` problem with `l` batches on `sms` multiprocessors.
pub fn select(m: usize, n: usize, k: usize, l: usize, a_major: Major, b_major: Major, sms: u32) -> Selection {
    // Measured on the H200 (BENCHMARKS.md): 128x128x32 with 4 stages and a raster
    // swizzle of 8 is the fastest large-problem kernel of this path (368 TFLOP/s at 4096^3
    // against 328 for 128x256x32).
    let (tile, warps, swizzle) = if m <= 16 {
        ([16, 64, 128], [1, 4], 0)
    } else if m <= 64 {
        ([64, 64, 64], [2, 2], 0)
    } else {
        ([128, 128, 32], [2, 2], 3)
    };
    let mut config = GemmSm80Config::bf16(a_major, b_major, tile, warps);
    config.raster_swizzle = swizzle;
    let ctas = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize) * l;
    let k_tiles = k.div_ceil(tile[2] as usize);
    // Split K while the grid covers less than one wave and each split keeps >= 4 k-tiles.
    let mut split_k = 1u32;
    while (ctas * split_k as usize) < sms as usize && k_tiles / (2 * split_k as usize) >= 4 && split_k < 16 {
        split_k *= 2;
    }
    Selection { config, split_k }
}
