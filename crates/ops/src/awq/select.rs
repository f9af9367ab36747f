//! The AWQ GEMM's configuration by shape: the CTA tile by M (decode rows in one m16 tile,
//! prefill in 128-row tiles) and the K splits that give every SM work when the output has
//! few tiles (decode: the weight is streamed by `tiles x splits` CTAs).
//!
//! ```
//! use rcute_ops::awq::select::select_awq_gemm;
//! let (cfg, splits) = select_awq_gemm(1, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, splits), ([16, 256, 64], 5));
//! let (cfg, splits) = select_awq_gemm(4096, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile[0], splits), (128, 1));
//! ```

use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// CTAs per SM the split choice aims at.
pub const CTAS_PER_SM: usize = 2;

/// Most K splits.
pub const MAX_SPLITS: usize = 32;

/// The configuration and requested K splits for `M x N x K` on `sms` SMs.
pub fn select_awq_gemm(m: usize, n: usize, k: usize, sms: usize, element: Element) -> (AwqGemmConfig, u32) {
    let (tile, warps, stages) = if m <= 16 {
        ([16, 256, 64], [1, 4], 4)
    } else if m <= 64 {
        ([64, 128, 64], [2, 2], 4)
    } else {
        ([128, 256, 64], [2, 4], 3)
    };
    let vw = if (n / 8).is_multiple_of(4) { 4 } else { 1 };
    let cfg = AwqGemmConfig::new(element, tile, warps, stages, vw);
    let tiles = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize);
    let k_tiles = k.div_ceil(64).max(1);
    let want = (CTAS_PER_SM * sms.max(1)).div_ceil(tiles.max(1));
    let splits = want.clamp(1, MAX_SPLITS).min(k_tiles);
    (cfg, splits as u32)
}
