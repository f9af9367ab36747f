//! The split-K SM90 mixed-input kernel at small batches ([`select_awq_wgmma_split`]):
//! where the output has few tiles, the wgmma kernel's K is split over the grid's z
//! (`AwqGemmConfig::split_k`) so that `tiles x splits` CTAs fill about one wave (the
//! kernel holds one CTA per SM), instead of a one-split grid that leaves most SMs idle
//! (56 CTAs of the 64x256 tile on 132 SMs at 64 x 14336).

use super::select::DENSE_WIDE_N;
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// The split-K tiles of [`select_awq_wgmma_split`]: `(fewest rows, most rows, wide
/// weight, tokens, warps, stages)`, `wide` meaning `N >= DENSE_WIDE_N`.
pub const WGMMA_SPLIT_TILES: [(usize, usize, bool, i64, [i64; 2], usize); 3] = [
    (17, 32, true, 32, [1, 1], 8),
    (33, 64, true, 128, [2, 1], 6),
    (33, 64, false, 16, [1, 2], 6),
];

/// The split-K SM90 mixed-input kernel for a prepared weight on sm_90 at small batches,
/// or `None` (then `Ops::awq_gemm_prepared` asks `select_awq_wgmma` and the other rules).
///
/// The tile of [`WGMMA_SPLIT_TILES`] for the rows and the weight's width (N a multiple of
/// 64, K of 16), with `splits = SMs / tiles` (rounded down: at most one wave of CTAs,
/// each CTA's k-tiles one contiguous range; at most the k-tiles), taken where that is at
/// least 2:
///
/// * 17 ..= 32 rows of a wide weight: 32 tokens, one consumer warpgroup, 8 stages;
/// * 33 ..= 64 rows of a wide weight: 128 tokens, two consumer warpgroups splitting the
///   words (each `wgmma` chain half as long as one warpgroup's: the kernel is bound by
///   that chain's latency at these sizes, not by the weight's bytes), 6 stages;
/// * 33 ..= 64 rows of a narrower weight: 16 tokens, two consumer warpgroups along N
///   (512 columns), 6 stages (where the 64-token tile gives 16 CTAs at N = 4096).
///
/// Measured (H100, G = 128, K = 4096, random data, cuBLAS fp16 in the same run;
/// BENCHMARKS.md, session 20, helper awqsk): the sweep `rcute bench awq --config
/// prepared-auto --config wgmma:...` (first call), then main's binary (`before`) and this
/// rule's (`after`) in one call, `before, after, after, before`, `--config prepared-auto`:
/// µs (ratio cuBLAS / rcute) of the two runs of each:
///
/// | M x N | chosen (splits) | after | before | previous choice |
/// |---|---|---|---|---|
/// | 32 x 14336 | 32x256 (2) | 26.82 (1.564), 26.97 (1.561) | 28.21 (1.494), 28.21 (1.498) | bulk fused, 4 splits |
/// | 64 x 14336 | 128x256 w2x1 (2) | 35.69 (1.190), 35.89 (1.185) | 38.46 (1.095), 38.66 (1.094) | 64x256, one split |
/// | 64 x 4096 | 16x512 w1x2 (4) | 21.47 (0.669), 21.49 (0.668) | 28.70 (0.521), 28.83 (0.520) | dense |
///
/// The sweep (two rounds, the list reversed in the second) gave 32 x 14336: 26.90 / 27.17
/// against 28.13 / 28.38; 64 x 14336: 36.02 / 36.32 against 38.62 / 38.87; 64 x 4096:
/// 21.78 / 21.78 against 29.03 / 29.01. Not at 128 x 14336, where the 128x256 tile in 2
/// splits won the sweep's first round (46.74 µs against 49.76), lost its second (48.74
/// against 41.50) and tied in the before / after call (47.34 and 48.13 against 47.04 and
/// 48.81: ratios 0.969, 0.956 against 0.968, 0.936); the rule stops at 64 rows there.
///
/// Not taken at 16 rows (16x256 in 2 splits 22.40 µs and 16x512 in 4 22.35 against the
/// fused kernel's 22.30 at 14336 columns; 16x4096: 13.74 at best against 9.36) nor at 1
/// and 8 rows (the streamed decode kernels: 14.65 / 15.89 µs against 16.76 / 18.82 at
/// best). More splits than one wave lose (16 x 14336: 2 splits 22.40, 4 27.90, 8 39.12).
///
/// ```
/// use rcute_ops::awq::select_split::select_awq_wgmma_split;
/// let (h, f16) = ((9, 0), rcute_atom::Element::F16);
/// let pick = |m, n| select_awq_wgmma_split(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile[0], c.warps, c.stages, s));
/// assert_eq!(pick(32, 14336), Some((32, [1, 1], 8, 2)));
/// assert_eq!((pick(64, 14336), pick(33, 14336)), (Some((128, [2, 1], 6, 2)), Some((128, [2, 1], 6, 2))));
/// // 64 x 4096: 4 token tiles x 8 column tiles = 32 CTAs a split, 4 splits
/// assert_eq!(pick(64, 4096), Some((16, [1, 2], 6, 4)));
/// assert_eq!((pick(16, 14336), pick(1, 14336), pick(65, 14336), pick(65, 4096), pick(32, 4096)), (None, None, None, None, None));
/// assert_eq!(pick(128, 14336), None);
/// let (cfg, _) = select_awq_wgmma_split(64, 14336, 4096, 132, h, f16).unwrap();
/// assert!(cfg.wgmma && cfg.split_k && cfg.prepared && cfg.tile == [128, 256, 64]);
/// // K of 2 k-tiles: at most 2 splits; fewer SMs: fewer splits (one: not taken)
/// assert_eq!(select_awq_wgmma_split(64, 4096, 128, 132, h, f16).map(|(_, s)| s), Some(2));
/// assert_eq!(select_awq_wgmma_split(64, 14336, 4096, 100, h, f16), None);
/// assert!(select_awq_wgmma_split(64, 14336, 4096, 132, (8, 0), f16).is_none());
/// assert!(select_awq_wgmma_split(64, 14336, 4104, 132, h, f16).is_none());
/// ```
pub fn select_awq_wgmma_split(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    cc: (u32, u32),
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    if cc != (9, 0) || !n.is_multiple_of(64) || !k.is_multiple_of(16) {
        return None;
    }
    let wide = n >= DENSE_WIDE_N;
    let &(_, _, _, bm, warps, stages) = WGMMA_SPLIT_TILES
        .iter()
        .find(|t| (t.0..=t.1).contains(&m) && t.2 == wide)?;
    let bn = 256 * warps[1] as usize;
    let tiles = m.div_ceil(bm as usize) * n.div_ceil(bn);
    let splits = (sms / tiles).min(k.div_ceil(64));
    if splits < 2 {
        return None;
    }
    let cfg = AwqGemmConfig::new(element, [bm, bn as i64, 64], warps, stages, 4)
        .wgmma()
        .split_k();
    Some((cfg, splits as u32))
}
