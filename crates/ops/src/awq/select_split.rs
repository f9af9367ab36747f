//! The split-K SM90 mixed-input kernel at small batches ([`select_awq_wgmma_split`]):
//! where the output has few tiles, the wgmma kernel's K is split over the grid's z
//! (`AwqGemmConfig::split_k`) so that `tiles x splits` CTAs fill about one wave (the
//! kernel holds one CTA per SM), instead of a one-split grid that leaves most SMs idle
//! (56 CTAs of the 64x256 tile on 132 SMs at 64 x 14336).

use super::select::{select_awq_wgmma, wgmma_fits, DENSE_WIDE_N};
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// The split-K tiles of [`select_awq_wgmma_split`]: `(fewest rows, most rows, wide
/// weight, tokens, warps, stages)`, `wide` meaning `N >= DENSE_WIDE_N`. Every tile has two
/// consumer warpgroups splitting each lane's four words (`[2, 1]`, 256 weight columns).
pub const WGMMA_SPLIT_TILES: [(usize, usize, bool, i64, [i64; 2], usize); 9] = [
    (9, 16, true, 16, [2, 1], 8),
    (17, 32, true, 32, [2, 1], 6),
    (33, 48, true, 48, [2, 1], 8),
    (49, 64, true, 64, [2, 1], 6),
    (65, 80, true, 80, [2, 1], 6),
    (81, 96, true, 96, [2, 1], 6),
    (97, 128, true, 64, [2, 1], 6),
    (17, 32, false, 16, [2, 1], 8),
    (33, 64, false, 32, [2, 1], 6),
];

/// The split-K SM90 mixed-input kernel for a prepared weight on sm_90 at small batches,
/// or `None` (then `Ops::awq_gemm_prepared` asks `select_awq_wgmma` and the other rules).
///
/// The tile of [`WGMMA_SPLIT_TILES`] for the rows and the weight's width (N a multiple of
/// 64, K of 16), with `splits = SMs / tiles` (rounded down: at most one wave of CTAs,
/// each CTA's k-tiles one contiguous range; at most the k-tiles), taken where that is at
/// least 2. Each tile is 256 weight columns on two consumer warpgroups that split the
/// words of a lane (each `wgmma` chain half as long as one warpgroup's: the kernel holds
/// one CTA per SM and is bound by that chain's latency at these sizes, not by the weight's
/// bytes):
///
/// * a wide weight: 16 tokens (8 stages) at 9 ..= 16 rows, 32 (6 stages) at 17 ..= 32, 48
///   (8 stages) at 33 ..= 48, 64 (6 stages) at 49 ..= 64, 80 (6 stages) at 65 ..= 80 and
///   96 (6 stages) at 81 ..= 96 (128 tokens at 65 ..= 96 before session 26): one token
///   tile, 2 splits at N = 14336 (112 CTAs); 64 (6 stages, chained step pairs) at 97 ..=
///   128: two token tiles, 2 splits at N = 8192 (128 CTAs), one split (not taken here) at
///   N = 14336;
/// * a narrower weight: 16 tokens (8 stages) at 17 ..= 32 rows, 32 (6 stages) at 33 ..=
///   64: two token tiles, 4 splits at N = 4096 (128 CTAs).
///
/// Measured (H100, G = 128, K = 4096, random data, cuBLAS fp16 in the same run;
/// BENCHMARKS.md, session 20, helper awqsk2): the sweep `rcute bench awq --config
/// prepared-auto --config wgmma:...` with main's binary, two rounds (the list reversed in
/// the second), µs of rounds 1 / 2 (main's choice: helper awqsk's rule of one consumer
/// warpgroup at 32 tokens, two at 128 tokens, two along N at 16 x 512; the fused kernel at
/// 16 rows):
///
/// | M x N | chosen (splits) | µs | main's choice | µs |
/// |---|---|---|---|---|
/// | 16 x 14336 | 16x256 s8 (2) | 21.39 / 21.10 | fused 16x256 (4) | 22.18 / 22.27 |
/// | 24 x 14336 | 32x256 s6 (2) | 22.88 / 22.82 | 32x256 w1x1 (2) | 24.84 / 24.95 |
/// | 32 x 14336 | 32x256 s6 (2) | 23.97 / 24.22 | 32x256 w1x1 (2) | 27.00 / 26.98 |
/// | 48 x 14336 | 48x256 s8 (2) | 27.74 / 27.89 | 128x256 (2) | 33.73 / 33.68 |
/// | 64 x 14336 | 64x256 s6 (2) | 30.84 / 30.97 | 128x256 (2) | 35.88 / 35.89 |
/// | 32 x 4096 | 16x256 s8 (4) | 14.44 / 14.25 | fused | 20.33 / 19.99 |
/// | 64 x 4096 | 32x256 s6 (4) | 17.55 / 17.68 | 16x512 w1x2 (4) | 21.60 / 21.47 |
///
/// Then main's binary and this rule's in one call (`before, after, after, before`,
/// `--config prepared-auto`), after against before in µs: 16 x 14336 21.16 / 21.18
/// against 22.48 / 22.44, 24 x 14336 22.83 / 23.02 against 24.95 / 25.13, 32 x 14336 24.08
/// / 24.05 against 26.82 / 27.16, 40 x 14336 26.86 / 26.98 against 33.11 / 33.01, 48 x
/// 14336 27.61 / 27.54 against 34.08 / 33.72, 64 x 14336 30.60 / 30.41 against 35.50 /
/// 36.05, 16 x 8192 14.44 / 14.61 against 19.26 / 19.30, 32 x 4096 14.26 / 14.27 against
/// 20.09 / 19.96, 64 x 4096 17.54 / 17.65 against 21.34 / 21.34 (cuBLAS 43-44, 24.8, 14.2,
/// 14.4).
///
/// The 64-token tile at 48 rows: 28.84 / 28.89; 32 tokens in 8 splits at 32 x 4096: 16.58
/// / 16.57. Not taken at 16 rows of a narrower weight (16 x 4096: 12.45 / 12.34 at best in
/// 8 splits against the fused kernel's 9.24 / 9.22), nor at 1 ..= 8 rows (the streamed
/// decode kernels). More splits than one wave lose (3 splits at 14336 columns: 28.4 µs at
/// 16 rows, 33.3 at 32, 43.4 at 64).
///
/// 9 ..= 15 and 65 ..= 96 rows of a wide weight (BENCHMARKS.md, session 20, helper
/// awqsk3: the same sweep, `--iters 10`, main's rule as `prepared-auto`), µs of rounds 1 / 2:
///
/// | M x N | chosen (splits) | µs | main's choice | µs |
/// |---|---|---|---|---|
/// | 9 x 14336 | 16x256 s8 (2) | 20.25 / 20.25 | fused | 22.42 / 22.49 |
/// | 12 x 14336 | 16x256 s8 (2) | 20.69 / 20.56 | fused | 21.79 / 21.93 |
/// | 15 x 14336 | 16x256 s8 (2) | 20.88 / 21.15 | fused | 25.02 / 25.10 |
/// | 96 x 14336 | 128x256 s6 (2) | 41.56 / 41.50 | 64x256 w1x1, one split | 44.91 / 43.18 |
///
/// (cuBLAS 45.0-45.9 and 43.2-43.4.) Session 26 (helper awqdeep, **H100**): the 96-token
/// tile at 65 ..= 96 rows instead of 128 tokens (whose last 32 of 128 `wgmma` columns ran
/// on zero-filled rows), main `fc55318` (`before`) against this rule (`after`), `rcute
/// bench awq --shape 72x14336x4096 --shape 96x14336x4096 --shape 96x8192x4096 --group 128
/// --iters 10 --config prepared-auto`, order before, after, after, before, µs: 72 x 14336
/// 36.60 / 37.54 -> 34.06 / 33.51 (-6.9 / -10.7 %), 96 x 14336 41.00 / 40.77 -> 37.55 /
/// 37.48 (-8.4 / -8.1 %), 96 x 8192 (4 splits) 35.56 / 35.40 -> 32.38 / 32.44 (-8.9 /
/// -8.4 %); the unprepared op on the checkpoint's words (the same tile) 37.07 / 38.07 ->
/// 35.38 / 34.80, 41.44 / 41.28 -> 38.85 / 38.80, 35.81 / 35.88 -> 33.58 / 33.10 (cuBLAS
/// 42.9-43.5, 26.2-26.3). Not taken: chained step pairs on the 96-token tile (one sweep
/// run: 36.49 against 37.05 at 96 rows).
///
/// Session 26 (helper awq128, **H100**, main `cd86555` (`before`: the 96-token tile at 65
/// ..= 96 rows, the one-split 64-token tile of one consumer warpgroup at 97 ..= 128)
/// against this rule (`after`), `rcute bench awq --group 128 --iters 10 --config
/// prepared-auto`, order before, after, after, before, µs of rounds 1 / 2): the 80-token
/// tile at 65 ..= 80 rows, 72 x 14336 33.15 / 33.15 -> 31.73 / 31.70 (-4.3 / -4.4 %), 80
/// x 14336 34.54 / 34.59 -> 32.84 / 33.01 (-4.9 / -4.6 %); the unprepared op (the same
/// tile) 34.41 / 34.46 -> 32.88 / 32.87, 35.91 / 35.79 -> 33.93 / 34.05 (cuBLAS 42.4-42.7).
/// The 64-token tile with chained step pairs in 2 splits at 97 ..= 128 rows of 8192
/// columns (128 CTAs, against 64 CTAs of the one-split tile): 112 x 8192 38.32 / 38.32 ->
/// 28.93 / 29.90 (-24.5 / -22.0 %), 128 x 8192 39.57 / 38.65 -> 29.45 / 29.63 (-25.6 /
/// -23.3 %); the unprepared op (the same tile, no chained pairs) 37.42 / 37.36 -> 31.26 /
/// 32.02, 38.64 / 37.78 -> 31.51 / 31.82 (cuBLAS 26.3-27.0). Not taken: the chained pairs on
/// the checkpoint's words there, -2.6 to -3.3 % against the same tile without them in the
/// four runs (`wgmma-checkpoint:64x256,2x1,6,2,c2` 30.16-32.25 µs against 31.10-33.15).
///
/// Not taken: 8 rows and fewer (16x256: 19.97 / 20.35
/// against the streamed kernel's 15.70 / 15.85 at 8 x 14336), 128 rows (128x256 in 2
/// splits 47.03 / 46.76 against 47.52 / 45.18), and four consumer warpgroups of one word
/// each (`[4, 1]`), slower than two everywhere (16x256 at 16 x 14336: 25.70 / 25.79 against
/// 21.14 / 21.26; 64x256 at 64 x 14336: 42.87 / 43.09 against 30.86 / 31.74).
///
/// ```
/// use rcute_ops::awq::select_split::select_awq_wgmma_split;
/// let (h, f16) = ((9, 0), rcute_atom::Element::F16);
/// let pick = |m, n| select_awq_wgmma_split(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile[0], c.stages, s));
/// assert_eq!((pick(16, 14336), pick(17, 14336), pick(32, 14336)), (Some((16, 8, 2)), Some((32, 6, 2)), Some((32, 6, 2))));
/// assert_eq!((pick(33, 14336), pick(48, 14336), pick(64, 14336)), (Some((48, 8, 2)), Some((48, 8, 2)), Some((64, 6, 2))));
/// // 32 x 4096: 2 token tiles x 16 column tiles = 32 CTAs a split, 4 splits
/// assert_eq!((pick(32, 4096), pick(64, 4096)), (Some((16, 8, 4)), Some((32, 6, 4))));
/// // 16 x 8192: 32 tiles, 4 splits
/// assert_eq!(pick(16, 8192), Some((16, 8, 4)));
/// // 9 ..= 16 and 65 ..= 96 rows of a wide weight
/// assert_eq!((pick(9, 14336), pick(15, 14336), pick(12, 8192)), (Some((16, 8, 2)), Some((16, 8, 2)), Some((16, 8, 4))));
/// assert_eq!((pick(81, 14336), pick(96, 14336), pick(96, 8192)), (Some((96, 6, 2)), Some((96, 6, 2)), Some((96, 6, 4))));
/// assert_eq!((pick(65, 14336), pick(80, 14336), pick(72, 8192)), (Some((80, 6, 2)), Some((80, 6, 2)), Some((80, 6, 4))));
/// assert_eq!((pick(97, 8192), pick(128, 8192)), (Some((64, 6, 2)), Some((64, 6, 2))));
/// assert_eq!((pick(8, 14336), pick(1, 14336), pick(97, 14336), pick(65, 4096), pick(16, 4096)), (None, None, None, None, None));
/// assert_eq!((pick(15, 4096), pick(128, 14336), pick(129, 8192)), (None, None, None));
/// let (cfg, _) = select_awq_wgmma_split(64, 14336, 4096, 132, h, f16).unwrap();
/// assert!(cfg.wgmma && cfg.split_k && cfg.prepared && cfg.tile == [64, 256, 64] && cfg.warps == [2, 1]);
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
    if !wgmma_fits(n, k, cc) {
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

/// The SM90 mixed-input kernel's choice for a prepared weight, or `None` (then the other
/// rules of `Ops::awq_gemm_prepared`): the split-K tile of [`select_awq_wgmma_split`],
/// else the one-split tile of `super::select::select_awq_wgmma`, else at 9 to 16 rows of a
/// wide weight whose split tile gets one split (N above 16896 on 132 SMs) that 16-token
/// tile in one split (two consumer warpgroups, 8 stages, no split-K), and at 17 to 32 rows
/// the 32-token tile in one split (`one_split_small`: 6 stages). The unprepared op's
/// `super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint` runs the same choice on
/// the checkpoint's words. The split-K choices load their weight stages as one TMA tensor
/// box (`AwqGemmConfig::weight_boxes`), the one-split ones as one bulk run per k16 block;
/// at 33 to 48 rows of a wide weight the split-K kernel runs its steps in chained pairs
/// ([`WGMMA_CHAINED_SPLIT_ROWS`]), and at 97 to 128 rows the 64-token tile on two consumer
/// warpgroups, split-K or one split, as well ([`WGMMA_CHAINED_WIDE_ROWS`]).
///
/// Measured (helper awqbox, session 23, **H100**, `rcute bench awq --group 128 --iters 10
/// --config prepared-auto`, K = 4096, random data, weights rotated over >= 150 MB; main
/// (bulk runs) against the boxes for every choice, in the order main, boxes, boxes, main;
/// BENCHMARKS.md): the split-K tiles 16 x 14336 21.29 / 21.17 -> 19.74 / 19.84 µs (-7 %),
/// 32 x 14336 23.95 / 24.05 -> 23.02 / 23.07 (-4 %), 64 x 14336 30.68 / 31.00 -> 31.02 /
/// 30.17, 96 x 14336 42.36 / 43.46 -> 42.05 / 41.35; the one-split tiles no better in both
/// rounds (128 x 14336 49.05 / 48.28 -> 47.41 / 48.11, 64 x 28672 42.73 / 44.88 -> 43.37 /
/// 43.96, 1024 x 14336 186.50 / 184.48 -> 186.88 / 186.48): they keep the bulk runs.
///
/// Measured (helper awqckw2, session 22, H100, `rcute bench awq --group 128 --config
/// prepared-auto --config wgmma:16x256,2x1,8,1`, one call, one run each; BENCHMARKS.md):
/// at 9 / 16 x 28672 x 4096 the one-split 16-token tile took 31.28 / 31.30 µs against
/// 44.27 / 38.84 for the rules without it (the `cp.async` kernel of
/// `super::select::select_awq_gemm_prepared`).
///
/// ```
/// use rcute_ops::awq::select_split::{select_awq_wgmma_prepared, select_awq_wgmma_split};
/// let (h, f16) = ((9, 0), rcute_atom::Element::F16);
/// let pick = |m, n| select_awq_wgmma_prepared(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile[0], c.split_k, s));
/// // the split rule where it applies, the one-split 16-token tile where it gets one split
/// assert_eq!(pick(16, 14336), select_awq_wgmma_split(16, 14336, 4096, 132, h, f16).map(|(c, s)| (c.tile[0], c.split_k, s)));
/// assert_eq!((pick(9, 28672), pick(16, 28672)), (Some((16, false, 1)), Some((16, false, 1))));
/// // 17 to 32 rows of 28672: the 32-token tile in one split (two consumer warpgroups, 6 stages)
/// assert_eq!((pick(17, 28672), pick(32, 28672), pick(33, 28672)), (Some((32, false, 1)), Some((32, false, 1)), Some((64, false, 1))));
/// let (c32, _) = select_awq_wgmma_prepared(24, 28672, 4096, 132, h, f16).unwrap();
/// assert!(c32.warps == [2, 1] && c32.stages == 6 && !c32.split_k);
/// let (cfg, _) = select_awq_wgmma_prepared(16, 28672, 4096, 132, h, f16).unwrap();
/// assert!(cfg.wgmma && cfg.prepared && cfg.warps == [2, 1] && cfg.stages == 8 && !cfg.weight_boxes);
/// // the split-K choices take the tensor boxes; 33 to 48 rows of a wide weight chained step pairs
/// assert!(select_awq_wgmma_prepared(16, 14336, 4096, 132, h, f16).unwrap().0.weight_boxes);
/// let chained = |m, n| select_awq_wgmma_prepared(m, n, 4096, 132, h, f16).unwrap().0.chained;
/// assert_eq!((chained(33, 14336), chained(40, 14336), chained(48, 14336)), (true, true, true));
/// assert_eq!((chained(32, 14336), chained(49, 14336), chained(64, 14336), chained(48, 4096)), (false, false, false, false));
/// // 97 to 128 rows of a wide weight: the 64-token tile on two consumer warpgroups with
/// // chained step pairs, 2 splits (boxes) at 8192, one split (bulk runs) at 14336; 128 x
/// // 28672 keeps 128 tokens
/// let full = |m, n| select_awq_wgmma_prepared(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile[0], c.warps, c.stages, c.chained, c.split_k, s));
/// assert_eq!((full(97, 14336), full(128, 11008)), (Some((64, [2, 1], 6, true, false, 1)), Some((64, [2, 1], 6, true, false, 1))));
/// assert_eq!((full(97, 8192), full(128, 8192)), (Some((64, [2, 1], 6, true, true, 2)), Some((64, [2, 1], 6, true, true, 2))));
/// assert!(select_awq_wgmma_prepared(112, 8192, 4096, 132, h, f16).unwrap().0.weight_boxes);
/// assert!(!select_awq_wgmma_prepared(112, 14336, 4096, 132, h, f16).unwrap().0.weight_boxes);
/// assert_eq!((full(128, 28672), full(129, 14336)), (Some((128, [2, 1], 6, false, false, 1)), Some((128, [2, 1], 6, false, false, 1))));
/// assert_eq!(full(128, 4096), None);
/// // 8 rows, a narrow weight at 16 rows, not sm_90: other rules
/// assert_eq!((pick(8, 28672), pick(16, 4096)), (None, None));
/// assert!(select_awq_wgmma_prepared(16, 28672, 4096, 132, (8, 0), f16).is_none());
/// ```
pub fn select_awq_wgmma_prepared(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    cc: (u32, u32),
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    select_awq_wgmma_split(m, n, k, sms, cc, element)
        .map(|(cfg, splits)| (chained_split(cfg.weight_boxes(), m, n), splits))
        .or_else(|| {
            select_awq_wgmma(m, n, k, sms, cc, element).map(|(cfg, splits)| (chained_one_split(cfg, m, n), splits))
        })
        .or_else(|| one_split_small(m, n, k, cc, element))
}

/// The rows (97 ..= 128) of a wide weight at which the prepared op runs the 64-token tile
/// on two consumer warpgroups (6 stages) with chained step pairs (`AwqGemmConfig::chained`):
/// split-K in 2 splits where [`select_awq_wgmma_split`] gives it 2 (N up to 8448 on 132
/// SMs: 128 CTAs at N = 8192), else one split in place of the one-consumer 64-token tile
/// of `super::select::select_awq_wgmma` (`chained_one_split`: 112 CTAs at N = 14336).
/// `chained_one_split` has the measurement.
pub const WGMMA_CHAINED_WIDE_ROWS: std::ops::RangeInclusive<usize> = 97..=128;

/// `cfg` (the one-split choice of `super::select::select_awq_wgmma` for `m` rows of `n`
/// columns) as the 64-token tile on two consumer warpgroups (6 stages, chained step pairs,
/// bulk runs) where it is the 64-token tile at [`WGMMA_CHAINED_WIDE_ROWS`] of a wide
/// weight; elsewhere `cfg`. The unprepared op does not follow it
/// (`super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint` keeps the one-consumer
/// tile there).
///
/// Measured (helper awq128, session 26, **H100**, BENCHMARKS.md; `rcute bench awq --group
/// 128 --iters 10 --config prepared-auto`, random data, K = 4096, main `cd86555`
/// (`before`) against this rule (`after`) in two calls, each in the order before, after,
/// after, before; µs of rounds 1 / 2): 112 x 14336 39.16 / 39.24 -> 36.53 / 36.38 (-6.7 /
/// -7.3 %), 128 x 14336 40.00 / 39.86 -> 36.67 / 37.08 (-8.3 / -7.0 %); the first call 128
/// x 14336 39.79 / 39.76 -> 37.90 / 37.42 (-4.7 / -5.9 %), 112 x 8192 (one split; now the
/// split-K rule's) 38.03 / 38.26 -> 35.61 / 35.53, 112 x 14336 39.39 / 39.78 -> 39.82 /
/// 36.90 (its first `after` run slow on every row of the shape, the same forced kernels of
/// both binaries included: 41.37 against 38.04-38.43). The same tile without the chained
/// pairs (`wgmma:64x256,2x1,6,1`) took 38.04-41.37 at 112 x 14336 (cuBLAS 43.4-44.2). On
/// the checkpoint's words (the unprepared op) the chained tile gained nothing: 128 x 14336
/// 38.84 / 38.87 -> 39.02 / 38.46, 112 x 14336 38.43 / 38.88 -> 40.81 / 37.90, so
/// `super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint` keeps the one-consumer
/// tile.
fn chained_one_split(cfg: AwqGemmConfig, m: usize, n: usize) -> AwqGemmConfig {
    let t64 = cfg.tile[0] == 64 && !cfg.split_k && !cfg.persistent;
    if t64 && n >= DENSE_WIDE_N && WGMMA_CHAINED_WIDE_ROWS.contains(&m) {
        AwqGemmConfig::new(cfg.element, [64, 256, 64], [2, 1], 6, 4)
            .wgmma()
            .chained()
    } else {
        cfg
    }
}

/// The rows (33 ..= 48) of a wide weight whose split-K box kernel (48 tokens) runs its
/// k16 steps in chained pairs (`AwqGemmConfig::chained`): per word, two steps' A fragments
/// converted and their two `wgmma`s issued back to back as one group, so each
/// `wgmma.wait_group` covers twice the tensor work.
///
/// Measured (helper awq64, session 25, **H100**, K = 4096, G = 128, random data;
/// BENCHMARKS.md): `ncu` of the 64-token split-K kernel at 64 x 14336 shows it neither
/// memory- nor tensor-bound (DRAM 30 % of peak, the tensor pipe 23 %, one instruction
/// issued every 2.9 cycles a scheduler, 2.2 active warps a scheduler, 112 CTAs on 132
/// SMs): latency. Of a forced sweep (stages 4 / 6 / 8, one consumer warpgroup, 3 splits,
/// 32 tokens with two resident CTAs, 128 tokens, the 32-row streamed tile) only the chained
/// pairs gain (about -3 % at 40, 48 and 64 rows). `rcute bench awq --config prepared-auto`,
/// main then this rule then this rule then main in one call, µs: 33 x 14336 24.92 -> 24.12,
/// 24.02 <- 25.00 (-3.2 / -3.9 %), 48 x 14336 26.76 -> 25.65, 25.80 <- 26.69 (-4.1 / -3.3
/// %), 40 x 14336 25.64 -> 24.91, 25.61 <- 25.70 (-2.8 / -0.4 %; the sweep's two runs -3.2
/// / -3.3 %). The 64-token tile chained (49 ..= 64 rows) is not taken: 64 x 14336 30.12 ->
/// 29.39, 29.15 <- 30.49 (-2.4 / -4.4 %, short of 3 % in one round); `--config
/// wgmma-box:64x256,2x1,6,2,c2` forces it.
pub const WGMMA_CHAINED_SPLIT_ROWS: std::ops::RangeInclusive<usize> = 33..=48;

/// `cfg` (the split-K choice of [`select_awq_wgmma_split`] for `m` rows of `n` columns)
/// with chained step pairs at [`WGMMA_CHAINED_SPLIT_ROWS`] (its 48-token tile) and
/// [`WGMMA_CHAINED_WIDE_ROWS`] (its 64-token tile) of a wide weight.
fn chained_split(cfg: AwqGemmConfig, m: usize, n: usize) -> AwqGemmConfig {
    if n >= DENSE_WIDE_N && (WGMMA_CHAINED_SPLIT_ROWS.contains(&m) || WGMMA_CHAINED_WIDE_ROWS.contains(&m)) {
        cfg.chained()
    } else {
        cfg
    }
}

/// The first two split tiles of [`WGMMA_SPLIT_TILES`] (a wide weight's 16 tokens at 9 to
/// 16 rows, 8 stages; 32 tokens at 17 to 32 rows, 6 stages; two consumer warpgroups
/// splitting the words) in one split, where the split rule's `SMs / tiles` is below 2 (N
/// above 16896 on 132 SMs; `select_awq_wgmma` starts at 33 rows).
///
/// Measured (helper awqmid, session 23, H100, BENCHMARKS.md; `rcute bench awq --group 128
/// --iters 10`, random data, in the order main, this, this, main): at 24 / 32 x 28672 x 4096
/// `wgmma:32x256,2x1,6,1` took 33.10, 33.13 / 33.22, 33.36 µs against main's
/// `prepared-auto` (the `cp.async` kernel of `super::select::select_awq_gemm_prepared`)
/// 47.09, 46.72 / 50.43, 49.81 (cuBLAS fp16 80-85); the split-K kernel of the same tile in
/// one split 34.2-35.6, built for two resident CTAs an SM 35.4-35.7. The 16-token tile: see
/// [`select_awq_wgmma_prepared`].
fn one_split_small(m: usize, n: usize, k: usize, cc: (u32, u32), element: Element) -> Option<(AwqGemmConfig, u32)> {
    let &(_, _, _, bm, warps, stages) = WGMMA_SPLIT_TILES[..2]
        .iter()
        .find(|t| (t.0..=t.1).contains(&m) && t.2)?;
    let fits = n >= DENSE_WIDE_N && wgmma_fits(n, k, cc);
    fits.then(|| (AwqGemmConfig::new(element, [bm, 256, 64], warps, stages, 4).wgmma(), 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq::select::select_awq_wgmma;

    /// At 97 to 128 rows of a wide weight the choice is the 64-token tile on two consumer
    /// warpgroups with chained step pairs: split-K (tensor boxes) where the split rule
    /// gives it 2 splits or more, else in place of exactly the one-split 64-token tile of
    /// `select_awq_wgmma` (every other one-split choice is `select_awq_wgmma`'s as it is);
    /// every choice of [`select_awq_wgmma_prepared`] generates (a valid kernel configuration).
    #[test]
    fn chained_64_token_tile_at_97_to_128_rows() {
        let (h, e) = ((9, 0), Element::BF16);
        let (mut replaced, mut split_k) = (0, 0);
        for sms in [114, 132] {
            for m in (1..=200).chain([1024, 4096]) {
                for n in [4096, 8192, 11008, 14336, 16384, 18432, 28672] {
                    let Some((cfg, splits)) = select_awq_wgmma_prepared(m, n, 4096, sms, h, e) else {
                        continue;
                    };
                    let one = select_awq_wgmma(m, n, 4096, sms, h, e);
                    let split = select_awq_wgmma_split(m, n, 4096, sms, h, e);
                    let t64 = one.is_some_and(|(c, _)| c.tile[0] == 64);
                    let rows = n >= DENSE_WIDE_N && (97..=128).contains(&m);
                    if let Some((_, s)) = split.filter(|_| rows) {
                        split_k += 1;
                        assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([64, 256, 64], [2, 1], 6, s));
                        assert!(
                            s >= 2 && cfg.chained && cfg.split_k && cfg.weight_boxes,
                            "{m}x{n} on {sms}"
                        );
                    } else if split.is_none() && t64 && rows {
                        replaced += 1;
                        assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([64, 256, 64], [2, 1], 6, 1));
                        assert!(cfg.chained && cfg.wgmma && cfg.prepared && !cfg.split_k && !cfg.weight_boxes);
                    } else if split.is_none() && one.is_some() {
                        assert_eq!(Some((cfg, splits)), one, "{m}x{n} on {sms}");
                    }
                    rcute_kernel::awq_gemm::generate(&cfg).unwrap_or_else(|err| panic!("{m}x{n} on {sms}: {err:?}"));
                }
            }
        }
        // one split: 97 ..= 128 rows of 11008, 14336 and 16384 columns on 132 SMs, of 8192,
        // 11008 and 14336 on 114; split-K: 8192 columns on 132 SMs
        assert!(replaced >= 6 * 32 && split_k == 32, "{replaced} {split_k}");
    }
}
