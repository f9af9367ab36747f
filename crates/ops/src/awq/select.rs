//! The AWQ GEMM's path by shape ([`awq_dense_wins`]: the fused int4 kernel, or on sm_90
//! for prefill sizes dequantization + the dense SM90 GEMM; on a prepared weight first
//! [`select_awq_wgmma`], the SM90 mixed-input kernel, and on the checkpoint's tensors first
//! [`awq_reordered_wins`], that kernel on `qweight` reordered per call) and the fused kernel's
//! configuration: the CTA tile by M (decode rows in one m16 tile,
//! prefill in 128-row tiles) and the K splits that give every SM work when the output has
//! few tiles (decode: the weight is streamed by `tiles x splits` CTAs); see
//! [`select_awq_gemm`] for the rules and the measurements behind them.
//!
//! ```
//! use rcute_ops::awq::select::select_awq_gemm;
//! let (cfg, splits) = select_awq_gemm(1, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, splits), ([16, 256, 64], 10));
//! let (cfg, splits) = select_awq_gemm(16, 4096, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, splits), ([16, 256, 64], 5));
//! let (cfg, splits) = select_awq_gemm(16, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, cfg.stages, splits), ([16, 256, 64], 3, 10));
//! let (cfg, splits) = select_awq_gemm(32, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, splits), ([32, 256, 64], 4));
//! let (cfg, splits) = select_awq_gemm(128, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, splits), ([128, 256, 64], 2));
//! let (cfg, splits) = select_awq_gemm(4096, 14336, 4096, 132, rcute_atom::Element::F16);
//! assert_eq!((cfg.tile, splits), ([128, 256, 64], 1));
//! ```

use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// Columns from which a weight counts as wide for [`awq_dense_wins`].
pub const DENSE_WIDE_N: usize = 8192;

/// Whether `awq_gemm` of `M x N x K` on a GPU of compute capability `cc` runs the dense
/// path ([`crate::awq::dense`]: K-major dequantization + the SM90 GEMM) instead of the
/// fused int4 kernel. Only on sm_90. From the crossover measured on an H100 with
/// `rcute bench awq --config fused --config dense` (K = 4096, G = 128; BENCHMARKS.md, AWQ):
///
/// * wide weights (`N >= DENSE_WIDE_N`, measured at N = 14336): dense above M = 128
///   (fused 84.9 / dense 106.9 µs at M = 128, 150.3 / 111.5 at M = 192);
/// * narrower ones (measured at N = 4096): dense for M = 64 ..= 128 (33.5 / 29.0 µs at
///   64, 40.8 / 31.0 at 128) and above M = 256 (99.8 / 58.5 at 512); between them the
///   fused kernel (50.8 / 57.6 at 192, 54.6 / 58.5 at 256), where the SM90 GEMM's
///   128x256 tiles give a 4096-column output only 32 CTAs.
///
/// Re-measured with the reordered path (helper awqjit, H100; [`awq_reordered_wins`]'s
/// table), where this rule still decides (no wgmma tile, or M outside 65 ..= 3072): fused
/// 50.9 / dense 105.7 µs at 64 x 14336, 870.2 / 414.5 at 2048 x 14336, 1747.6 / 810.9 at
/// 4096 x 14336, 37.1 / 30.5 at 128 x 4096: the rule unchanged.
///
/// On a prepared weight, [`select_awq_wgmma`] (the SM90 mixed-input kernel) is asked
/// first: where it takes the shape, `Ops::awq_gemm_prepared` runs it instead of this choice;
/// on the checkpoint's tensors `Ops::awq_gemm` asks [`awq_reordered_wins`] first.
///
/// ```
/// use rcute_ops::awq::select::awq_dense_wins;
/// let h = (9, 0);
/// assert!(!awq_dense_wins(1, 14336, 4096, h) && !awq_dense_wins(128, 14336, 4096, h));
/// assert!(awq_dense_wins(192, 14336, 4096, h) && awq_dense_wins(4096, 14336, 4096, h));
/// assert!(!awq_dense_wins(32, 4096, 4096, h) && awq_dense_wins(64, 4096, 4096, h));
/// assert!(!awq_dense_wins(192, 4096, 4096, h) && awq_dense_wins(512, 4096, 4096, h));
/// assert!(!awq_dense_wins(4096, 14336, 4096, (8, 0)));
/// ```
pub fn awq_dense_wins(m: usize, n: usize, _k: usize, cc: (u32, u32)) -> bool {
    if cc != (9, 0) {
        return false;
    }
    if n >= DENSE_WIDE_N {
        m > 128
    } else {
        (64..=128).contains(&m) || m > 256
    }
}

/// Whether `Ops::awq_gemm_prepared` of `M x N x K` on compute capability `cc` runs the
/// dense path ahead of the SM90 mixed-input kernel: a wide weight (`N >= DENSE_WIDE_N`)
/// and more than [`REORDERED_MAX_M`] rows, where the unprepared op takes the dense path
/// too ([`awq_dense_wins`]). Measured (H200, `rcute bench awq --shape 4096x14336x4096
/// --group 128 --iters 10`, every row in one process, cuBLAS fp16 717.4 us; BENCHMARKS.md,
/// "Session 30 (helper awq4k)"): the dense path with its table tile
/// ([`Ops::awq_dense_gemm`](crate::Ops::awq_dense_gemm)) 776.6 us (0.924x), the prepared
/// op's 184-token kernel 802.8 (0.894x; forced 812.6, with chained step pairs 792.4), the
/// dense path with the rules' 128x256 tile 794.8; with the four-word K-major dequantization
/// too (a second call, main's binary before and after this one): the prepared op 782.2 us
/// (0.936x) against 808.6 / 817.8 (0.880 / 0.894x). At 3072 rows the kernel stays (569.4 us
/// prepared, 1.018x, against the dense path's 626.5-639.9); 3073 to 4095 rows were not
/// measured.
///
/// ```
/// use rcute_ops::awq::select::awq_prepared_dense_wins;
/// let h = (9, 0);
/// assert!(awq_prepared_dense_wins(4096, 14336, 4096, h) && awq_prepared_dense_wins(3073, 8192, 4096, h));
/// assert!(!awq_prepared_dense_wins(3072, 14336, 4096, h) && !awq_prepared_dense_wins(4096, 4096, 4096, h));
/// assert!(!awq_prepared_dense_wins(4096, 14336, 4096, (8, 0)));
/// ```
pub fn awq_prepared_dense_wins(m: usize, n: usize, k: usize, cc: (u32, u32)) -> bool {
    n >= DENSE_WIDE_N && m > REORDERED_MAX_M && awq_dense_wins(m, n, k, cc)
}

/// Most rows of `x` for which [`select_awq_wgmma`] takes the SM90 mixed-input kernel (the
/// largest prefill measured against the dense path; above it the dense path stays).
pub const WGMMA_MAX_M: usize = 4096;

/// The tiles [`select_awq_wgmma`] chooses from: `(tokens, warps, stages, µs)`, µs the
/// time of one wave of CTAs of the tile over K = 4096 on an H100 (G = 128, weight columns
/// 256 a CTA). The 64x256 tile (one consumer warpgroup) from one wave (39.6 µs at 128 x
/// 14336 x 4096, 39.6 a wave at 256 x 14336: BENCHMARKS.md, helper awqsm); the tiles of
/// two consumer warpgroups splitting the words from their waves at 1024 x 14336 x 4096
/// (BENCHMARKS.md, helper awqwave, first call): 128 tokens 199.6 µs in 4 waves (448 CTAs),
/// 152 tokens 170.9 in 3 (392), 192 tokens 202.2 in 3 (336), 184 tokens 194.1 in 3 (336).
/// A wider token tile costs less per token (0.39 µs a token and wave at 128, 0.375 at 152,
/// 0.352 at 184, 0.351 at 192: the conversion and the register-A `wgmma` issue are spread
/// over more tokens) but may leave a wave partly idle. The 184-token tile (word by word, as
/// 192) is the one whose waves fill best at 1536 rows (4 waves of 504 CTAs against 4 of
/// 448 with 192) and 4096 rows (23 row tiles: 10 waves of 1288 CTAs, 97.6 % full, against
/// 10 of 1232 with 192 and 12 of 1512 with 152); the 160- to 176-token tiles measured no
/// better than these at any shape (BENCHMARKS.md, helper awqwave).
pub const WGMMA_TILES: [(usize, [i64; 2], usize, f64); 5] = [
    (64, [1, 1], 8, 39.6),
    (128, [2, 1], 6, 49.9),
    (152, [2, 1], 7, 57.0),
    (184, [2, 1], 6, 64.7),
    (192, [2, 1], 6, 67.4),
];

/// The SM90 mixed-input kernel (`rcute_collective::awq_wgmma`: swap-AB RS `wgmma` on the
/// prepared weight, which the producer warpgroup bulk-copies with `x`'s TMA tile into the
/// stages) for a prepared weight on sm_90, or `None` (then `Ops::awq_gemm_prepared` takes
/// the dense path where [`awq_dense_wins`], else the fused kernels).
///
/// `Ops::awq_gemm_prepared` asks `crate::awq::select_split::select_awq_wgmma_split` (the
/// kernel's split-K variant at 9 ..= 128 rows of a wide weight and 17 ..= 64 of a narrower
/// one, which measured faster than this choice at 64 and 96 x 14336 and 128 x 8192 and
/// than the dense path at 64 x 4096) first, and at 97 ..= 128 rows of a wide weight runs
/// this function's 64-token tile on two consumer warpgroups with chained step pairs; the
/// reordered path asks this function only.
///
/// Taken for 32 < M <= [`WGMMA_MAX_M`] (N a multiple of 64, K of 16) where the 64x256
/// tile gives at least a quarter of the SMs a CTA; the tile is the one of [`WGMMA_TILES`]
/// whose waves of CTAs cost least (`waves x time per wave`, ties to the narrower tile):
/// the 64x256 tile where the output fills about one wave of it, 128 tokens where their
/// last wave is full enough, 152, 184 or 192 tokens where they save a wave.
///
/// Measured (H100, `rcute bench awq`, G = 128, K = 4096, cuBLAS fp16 in the same run;
/// BENCHMARKS.md, AWQ, helpers awqsm and awqwave, the second call of each; `prepared-auto`
/// where the rule ran): µs of the chosen kernel against the previous choice (the fused
/// prepared kernel, the dense path, or the 128x256 tile):
///
/// | M x N | chosen | µs | previous | cuBLAS |
/// |---|---|---|---|---|
/// | 64 x 14336 | 64x256 | 39.2 | 48.8 (fused) | 42.2 |
/// | 128 x 14336 | 64x256 | 39.8 | 75.3 (fused) | 44.8 |
/// | 192 x 14336 | 128x256 | 48.4 | 110.2 (dense) | 44.8 |
/// | 256 x 14336 | 128x256 | 49.9 | 110.9 (dense) | 49.6 |
/// | 300 x 14336 | 152x256 | 54.6 | 95.0 (128x256) | 54.2 |
/// | 512 x 14336 | 128x256 | 96.6 | 147.1 (dense) | 87.6 |
/// | 1024 x 14336 | 152x256 | 167.1 | 197.6 (128x256) | 165.1 |
/// | 2048 x 14336 | 192x256 | 355.5 | 389.8 (128x256) | 315.3 |
/// | 256 x 4096 | 64x256 | 39.0 | 50.6 (fused) | 17.8 |
/// | 512 x 4096 | 64x256 | 40.4 | 56.5 (dense) | 24.8 |
/// | 1024 x 4096 | 128x256 | 51.5 | 62.2 (dense) | 45.5 |
///
/// Above 1024 rows the clocks follow the board's power and cuBLAS itself drifts by up to
/// 10 % within a run, so the rows of the 184-token tile and of M > 2048 (helper awqpre:
/// main's rule and this one in one call, `before, after, after, before`) are µs with the
/// ratio to cuBLAS in the same row:
///
/// | M x N | chosen | µs (ratio), two runs | previous choice, two runs |
/// |---|---|---|---|
/// | 1536 x 14336 | 184x256 | 264.0 (0.956), 265.8 (0.968) | 272.7 (0.925), 272.2 (0.927) (192x256) |
/// | 3072 x 14336 | 192x256 | 511.9 (1.003), 547.1 (1.023) | 616.3 (0.910), 600.1 (0.927) (dense) |
/// | 4096 x 14336 | 184x256 | 708.2 (0.908), 720.3 (0.890) | 736.7 (0.897), 725.2 (0.884) (dense) |
/// | 4096 x 4096 | 184x256 | 197.3 (0.918) | 202.7 (0.896) (dense) |
///
/// At 4096 x 14336 the kernel and the dense path tie (forced in the same call: the 184
/// tile 0.881, 152 tokens 0.903, 192 tokens 0.867, the dense path 0.895); the kernel was
/// kept there for its scratch (none, against the dense path's 117 MB 16-bit weight). Since
/// the dense path runs the tuning table's 256x160 tile (H200: 776.6 against 802.8 us) the
/// prepared op takes the dense path above 3072 rows of a wide weight
/// ([`awq_prepared_dense_wins`]); this function still answers for those shapes (the
/// reordered path and forced runs).
/// Walking the tiles in groups of token tiles (`AwqGemmConfig::raster`, 4 to 12 token
/// tiles a group: each wave reads a third to a tenth of the weight) measured no faster at
/// 1024 to 4096 rows (0.883-0.886 against 0.881 at 4096 x 14336): not taken. Nor the
/// persistent walk (`AwqGemmConfig::persistent`, one CTA per SM taking every 132nd tile, the
/// next tile's stages loading during the stores; helper awq4k, `before, after, after,
/// before` with it as the rule's choice above one wave): 0.889-0.891 against 0.880-0.881 at
/// 4096 x 14336, 0.970-0.973 against 0.989 at 1024, 0.975-0.987 against 1.005-1.006 at
/// 3072, 0.900-0.904 against 0.874-0.875 at 2048 (forced: 184 tokens 0.753 persistent
/// against 0.816), 0.910-0.913 against 0.913-0.920 at 4096 x 4096. Not taken
/// either: 128 x 4096, where the 32 CTAs of the 64x256 tile (about 40 µs) lose to the
/// dense path's 31.0 (the measurement `awq_dense_wins` cites), and more than 4096 rows
/// (not measured).
///
/// ```
/// use rcute_ops::awq::select::select_awq_wgmma;
/// let (h, f16) = ((9, 0), rcute_atom::Element::F16);
/// let pick = |m, n| select_awq_wgmma(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile, c.warps, c.stages, s));
/// let t64 = ([64, 256, 64], [1, 1], 8, 1);
/// let (t128, t152, t192) = (([128, 256, 64], [2, 1], 6, 1), ([152, 256, 64], [2, 1], 7, 1), ([192, 256, 64], [2, 1], 6, 1));
/// let t184 = ([184, 256, 64], [2, 1], 6, 1);
/// assert_eq!((pick(64, 14336), pick(128, 14336)), (Some(t64), Some(t64)));
/// assert_eq!((pick(192, 14336), pick(512, 14336)), (Some(t128), Some(t128)));
/// // 1024 x 14336: 3 waves of 152 tokens (171 µs) against 4 of 128 (200); 2048: 5 waves
/// // of 192 (337) against 6 of 152 (342) and 7 of 128 (349)
/// assert_eq!((pick(1024, 14336), pick(2048, 14336)), (Some(t152), Some(t192)));
/// // 300 rows: one wave of 152 tokens (2 x 56 CTAs) against two of 128 (3 x 56)
/// assert_eq!(pick(300, 14336), Some(t152));
/// assert_eq!((pick(256, 4096), pick(512, 4096), pick(1024, 4096)), (Some(t64), Some(t64), Some(t128)));
/// // 1536 x 14336: 4 waves of 184 tokens (259) against 4 of 192 (270); 4096 (and the
/// // ragged 4095): 10 waves of 184 (647) against 10 of 192 (674) and 12 of 152 (684)
/// assert_eq!((pick(1536, 14336), pick(4096, 14336), pick(4095, 14336)), (Some(t184), Some(t184), Some(t184)));
/// assert_eq!((pick(3072, 14336), pick(2048, 4096)), (Some(t192), Some(t128)));
/// assert_eq!((pick(32, 14336), pick(4097, 14336), pick(128, 4096)), (None, None, None));
/// let (cfg, _) = select_awq_wgmma(1024, 14336, 4096, 132, h, f16).unwrap();
/// assert!(cfg.wgmma && cfg.prepared);
/// // the persistent walk measured no faster (helper awq4k): never chosen
/// assert!(!cfg.persistent && !select_awq_wgmma(4096, 14336, 4096, 132, h, f16).unwrap().0.persistent);
/// assert!(select_awq_wgmma(1024, 14336, 4096, 132, (8, 0), f16).is_none());
/// // K ending inside a k16 step, N inside a 64-column block: not this kernel
/// assert!(select_awq_wgmma(1024, 14336, 4104, 132, h, f16).is_none());
/// assert!(select_awq_wgmma(1024, 14344, 4096, 132, h, f16).is_none());
/// ```
pub fn select_awq_wgmma(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    cc: (u32, u32),
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    if !wgmma_fits(n, k, cc) || m <= 32 || m > WGMMA_MAX_M {
        return None;
    }
    let cols = n.div_ceil(256);
    let sms = sms.max(1);
    if 4 * m.div_ceil(64) * cols < sms {
        return None;
    }
    let cost = |bm: usize, us: f64| (m.div_ceil(bm) * cols).div_ceil(sms) as f64 * us;
    let (bm, warps, stages, _) = WGMMA_TILES
        .into_iter()
        .reduce(|best, t| if cost(t.0, t.3) < cost(best.0, best.3) { t } else { best })
        .expect("WGMMA_TILES is not empty");
    Some((
        AwqGemmConfig::new(element, [bm as i64, 256, 64], warps, stages, 4).wgmma(),
        1,
    ))
}

/// Whether the SM90 mixed-input kernel (one-split or split-K) can take an `N x K` weight on
/// compute capability `cc`: sm_90, N in whole 64-column blocks, K in whole k16 steps.
pub(crate) fn wgmma_fits(n: usize, k: usize, cc: (u32, u32)) -> bool {
    cc == (9, 0) && n.is_multiple_of(64) && k.is_multiple_of(16)
}

/// Fewest rows of `x` for which [`awq_reordered_wins`] takes the reordered path.
pub const REORDERED_MIN_M: usize = 65;

/// Most rows of `x` for which [`awq_reordered_wins`] takes the reordered path.
pub const REORDERED_MAX_M: usize = 3072;

/// Whether `Ops::awq_gemm` (checkpoint tensors as they are) of `M x N x K` on `sms` SMs of
/// compute capability `cc` takes the reordered path ([`crate::awq::reordered`]: `qweight`
/// reordered per call into stream scratch, then the SM90 mixed-input kernel of
/// [`select_awq_wgmma`]) ahead of [`awq_dense_wins`] and the fused kernels: where
/// [`select_awq_wgmma`] takes the shape and [`REORDERED_MIN_M`] <= M <=
/// [`REORDERED_MAX_M`]. Since session 22 `Ops::awq_gemm` asks
/// `crate::awq::select_checkpoint_wgmma::select_awq_wgmma_checkpoint` first (the same
/// kernel on the checkpoint's words, no reorder pass: 8 % faster than this path at 1024 x
/// 14336 on an H100): this path remains where that kernel cannot run (a `qweight` not
/// 16-byte aligned for its TMA map).
///
/// Measured (H100, `rcute bench awq --group 128 --iters 20 --config fused --config dense
/// --config reordered --config prepared-auto`, K = 4096, cuBLAS fp16 in the same run;
/// BENCHMARKS.md, AWQ, helper awqjit): µs of each path (the prepared op for the reorder's
/// cost):
///
/// | M x N | fused | dense | reordered | prepared op | cuBLAS | chosen |
/// |---|---|---|---|---|---|---|
/// | 64 x 14336 | **50.9** | 105.7 | 59.3 | 40.2 | 42.8 | fused |
/// | 96 x 14336 | 74.3 | 106.1 | **58.0** | 39.3 | 43.0 | reordered |
/// | 128 x 14336 | 79.4 | 106.0 | **59.0** | 39.9 | 45.0 | reordered |
/// | 256 x 14336 | 151.2 | 110.8 | **70.1** | 50.5 | 49.6 | reordered |
/// | 1024 x 14336 | 468.7 | 254.2 | **203.0** | 184.1 | 180.4 | reordered |
/// | 2048 x 14336 | 870.2 | **414.5** | 431.3 | 349.7 | 355.9 | dense (then; reordered now, below) |
/// | 256 x 4096 | 51.5 | 56.3 | **44.7** | 38.9 | 19.1 | reordered |
/// | 1024 x 4096 | 115.2 | 63.5 | **59.2** | 53.2 | 47.1 | reordered |
///
/// The reorder costs about 19 µs at 14336 x 4096 (one read and one write of the 29 MB int4
/// weight), 6 at 4096 x 4096. Above 1024 rows (helper awqpre, H100, `before` = the dense
/// path, `after` = the reordered one, in one call, `before, after, after, before`; µs and the
/// ratio to cuBLAS in the same row, which drifts by up to 10 % there):
///
/// | M x N | reordered | dense |
/// |---|---|---|
/// | 1536 x 14336 | 281.8 (0.894), 301.8 (0.858), 286.1 (0.881) | 319.3 (0.789), 319.0 (0.790), 322.5 (0.801) |
/// | 2048 x 14336 | 390.8 (0.832), 376.2 (0.849), 359.8 (0.883) | 401.7 (0.836), 379.6 (0.913), 370.4 (0.859) |
/// | 3072 x 14336 | 504.7 (0.991), 570.7 (0.970) | 577.6 (0.905), 617.1 (0.904) |
/// | 4096 x 14336 | 729.1 (0.873), 780.7 (0.870), 815.2 (0.868) | 766.4 (0.923), 727.4 (0.891), 748.5 (0.895) |
/// | 4096 x 4096 | 203.8 (0.890) | 202.7 (0.896) |
///
/// So the path runs up to 3072 rows (a win at 1536 and 3072, a tie at 2048 with a quarter
/// of the dense path's scratch) and the dense path above (4096 rows: the reorder's 19 µs
/// on a kernel that ties with the dense path lose); 128 x 4096 has no wgmma tile (the
/// dense path, 30.5 µs).
///
/// ```
/// use rcute_ops::awq::select::awq_reordered_wins;
/// let h = (9, 0);
/// assert!(awq_reordered_wins(96, 14336, 4096, 132, h) && awq_reordered_wins(1024, 14336, 4096, 132, h));
/// assert!(!awq_reordered_wins(64, 14336, 4096, 132, h) && awq_reordered_wins(2048, 14336, 4096, 132, h));
/// assert!(awq_reordered_wins(3072, 14336, 4096, 132, h) && !awq_reordered_wins(4096, 14336, 4096, 132, h));
/// assert!(!awq_reordered_wins(128, 4096, 4096, 132, h) && awq_reordered_wins(256, 4096, 4096, 132, h));
/// assert!(awq_reordered_wins(1024, 4096, 4096, 132, h));
/// assert!(!awq_reordered_wins(1024, 14336, 4096, 132, (8, 0)));
/// // the GPU test's op cases: 64, 152, 192 and 184 tokens, all on the reordered path
/// use rcute_ops::awq::select::select_awq_wgmma;
/// for (m, n, k, bm) in [(100, 8192, 256, 64), (1000, 14336, 64, 152), (384, 14336, 128, 192), (2000, 8192, 64, 184)] {
///     let (cfg, _) = select_awq_wgmma(m, n, k, 132, h, rcute_atom::Element::F16).unwrap();
///     assert!(awq_reordered_wins(m, n, k, 132, h) && cfg.tile[0] == bm);
/// }
/// ```
pub fn awq_reordered_wins(m: usize, n: usize, k: usize, sms: usize, cc: (u32, u32)) -> bool {
    (REORDERED_MIN_M..=REORDERED_MAX_M).contains(&m) && select_awq_wgmma(m, n, k, sms, cc, Element::F16).is_some()
}

/// CTAs per SM the decode split choice aims at.
pub const CTAS_PER_SM: usize = 4;

/// Most K splits.
pub const MAX_SPLITS: usize = 20;

/// The configuration and requested K splits for `M x N x K` on `sms` SMs.
///
/// Decode (M < 16, and M = 16 on a narrow weight) takes the 16x256 tile with
/// `4 x SMs / tiles` splits (at most 20, and at most `80 / M`: each split writes its f32
/// partial slab to the L2 workspace and the last one sums them, which costs in proportion
/// to `splits x M x N`). Larger M takes, when the weight has many 256-column tiles (at
/// least a quarter of the SMs), at M = 16 the 16x256 tile with 3 stages and 10 splits
/// (H200, 16 x 14336 x 4096: 26.5 µs fused / 26.7 µs prepared against 28.1 / 30.2 for the
/// 32x256 tile with 4 splits), up to M = 32 the 32x256 tile with 4 splits (H100, M = 32:
/// 33.3 µs against 40.5 for the earlier 64x256 / 4 choice; H200: 32.7 against 43.2 for
/// 16x256 / 3 / 10), the 64x256 tile with 4 splits up to M = 64 and the
/// 128x256 tile with 2 splits above; with few column tiles, the 16x256 tile with 5 splits
/// up to M = 64 and the 64x256 tile with 4 splits above; no split when the output already
/// has a tile for every SM (prefill). Each choice is the fastest of those measured on an
/// H100 (or, where named, an H200) for `N x K = 14336 x 4096` and `4096 x 4096`
/// (BENCHMARKS.md).
pub fn select_awq_gemm(m: usize, n: usize, k: usize, sms: usize, element: Element) -> (AwqGemmConfig, u32) {
    let vw = if (n / 8).is_multiple_of(4) { 4 } else { 1 };
    let k_tiles = k.div_ceil(64).max(1) as u32;
    let m = m.max(1);
    let wide = n.div_ceil(256) * 4 >= sms;
    let decode = ([16, 256, 64], [1, 4], 4);
    let mid = ([64, 256, 64], [1, 4], 3);
    let (tile, warps, stages, splits) = if m < 16 || (m == 16 && !wide) {
        let tiles = n.div_ceil(256);
        let want = (CTAS_PER_SM * sms.max(1)).div_ceil(tiles.max(1));
        let splits = want.clamp(1, MAX_SPLITS).min((80 / m).max(1));
        (decode.0, decode.1, decode.2, splits as u32)
    } else if m == 16 && wide {
        // 3 stages (5 CTAs per SM for the prepared kernel), 10 splits: measured at
        // 16 x 14336 x 4096 on an H200 faster than the 32x256 tile with 4 splits.
        ([16, 256, 64], [1, 4], 3, 10)
    } else if m <= 32 && wide {
        // One 32-row tile, 4 splits: at M = 16 and 32 (N = 14336) faster than the 16-row
        // tile with its M-proportional slab reduction and than the half-empty 64-row tile.
        ([32, 256, 64], [1, 4], 4, 4)
    } else if m <= 64 {
        if wide {
            (mid.0, mid.1, mid.2, 4)
        } else {
            (decode.0, decode.1, decode.2, 5)
        }
    } else if wide {
        ([128, 256, 64], [2, 4], 3, 2)
    } else {
        (mid.0, mid.1, mid.2, 4)
    };
    // Prefill: with a CTA for every SM already, K splits only add reduction traffic.
    let tiles = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize);
    let splits = if m > 16 && tiles >= sms { 1 } else { splits };
    (
        AwqGemmConfig::new(element, tile, warps, stages, vw),
        splits.min(k_tiles),
    )
}

/// The prepared kernel's configuration and requested K splits for `M x N x K` on `sms`
/// SMs ([`Ops::awq_gemm_prepared`](crate::Ops::awq_gemm_prepared)): [`select_awq_gemm`]'s
/// choice, except where the prepared kernels with their running-source stage loader
/// measured faster otherwise (H200, `rcute bench awq --config prepared:...`, G = 128,
/// BENCHMARKS.md, AWQ helper awqdec):
///
/// * M < 16 on a narrow weight: at most 8 splits (1 x 4096 x 4096: 9.97 µs against 10.84
///   with 20 and 10.82 with 16);
/// * M = 16: the 16x256 tile with 4 stages and 4 splits on a wide weight (16 x 14336 x
///   4096: 22.20 µs against 25.3-25.6 for 3 stages / 10 splits, 24.04 for 8 splits), 8
///   splits on a narrow one (16 x 4096 x 4096: 14.24 µs against 15.64 with 5);
/// * 16 < M <= 32 on a wide weight: the 32x256 tile with 3 stages, 4 splits (32 x 14336 x
///   4096: 29.92 µs against 33.45 with 4 stages).
///
/// ```
/// use rcute_ops::awq::select::select_awq_gemm_prepared;
/// let f16 = rcute_atom::Element::F16;
/// let (cfg, splits) = select_awq_gemm_prepared(1, 14336, 4096, 132, f16);
/// assert_eq!((cfg.tile, cfg.stages, splits), ([16, 256, 64], 4, 10));
/// let (cfg, splits) = select_awq_gemm_prepared(1, 4096, 4096, 132, f16);
/// assert_eq!((cfg.tile, splits), ([16, 256, 64], 8));
/// let (cfg, splits) = select_awq_gemm_prepared(16, 14336, 4096, 132, f16);
/// assert_eq!((cfg.tile, cfg.stages, splits), ([16, 256, 64], 4, 4));
/// let (cfg, splits) = select_awq_gemm_prepared(16, 4096, 4096, 132, f16);
/// assert_eq!((cfg.tile, cfg.stages, splits), ([16, 256, 64], 4, 8));
/// let (cfg, splits) = select_awq_gemm_prepared(32, 14336, 4096, 132, f16);
/// assert_eq!((cfg.tile, cfg.stages, splits), ([32, 256, 64], 3, 4));
/// let (cfg, splits) = select_awq_gemm_prepared(64, 14336, 4096, 132, f16);
/// assert_eq!((cfg.tile, cfg.stages, splits), ([64, 256, 64], 3, 4));
/// ```
pub fn select_awq_gemm_prepared(m: usize, n: usize, k: usize, sms: usize, element: Element) -> (AwqGemmConfig, u32) {
    let (cfg, splits) = select_awq_gemm(m, n, k, sms, element);
    let k_tiles = k.div_ceil(64).max(1) as u32;
    let wide = n.div_ceil(256) * 4 >= sms;
    let vw = cfg.b_vector_words;
    let m = m.max(1);
    let (cfg, splits) = if m < 16 && !wide {
        (cfg, splits.min(8))
    } else if m == 16 {
        let cfg = AwqGemmConfig::new(element, [16, 256, 64], [1, 4], 4, vw);
        (cfg, if wide { 4 } else { 8 })
    } else if m <= 32 && wide && cfg.tile == [32, 256, 64] {
        (AwqGemmConfig::new(element, [32, 256, 64], [1, 4], 3, vw), splits)
    } else {
        (cfg, splits)
    };
    (cfg, splits.min(k_tiles))
}

/// The prepared path's configuration on sm_90 where the SM90 bulk-producer kernel
/// (`rcute_collective::awq_bulk`: a producer warp streams the prepared weight with
/// `cp.async.bulk` into an mbarrier ring) measured faster than the `cp.async` kernel of
/// [`select_awq_gemm_prepared`], or `None` (H200, `rcute bench awq --config bulk:...`,
/// G = 128, BENCHMARKS.md, AWQ helper awq90):
///
/// * 16 < M <= 32 on a wide weight: the 32x256 tile, warps 1x4 + the producer, 4 stages,
///   4 splits (32 x 14336 x 4096: 28.73 µs against 30.47 for the `cp.async` 32x256 / 3
///   stages / 4 splits).
///
/// At M = 1 and 16 the bulk kernel measured no faster (1 x 14336: 17.74 µs at best against
/// 17.32; 16 x 14336: 22.56 against 22.42; 1 and 16 x 4096: 10.89 / 15.17 against 9.99 /
/// 14.32): there the kernel is bound by the consumers' dequantization, not by the bytes in
/// flight.
///
/// ```
/// use rcute_ops::awq::select::select_awq_bulk;
/// let f16 = rcute_atom::Element::F16;
/// let (cfg, splits) = select_awq_bulk(32, 14336, 4096, 132, f16).unwrap();
/// assert!(cfg.bulk && cfg.prepared);
/// assert_eq!((cfg.tile, cfg.stages, splits), ([32, 256, 64], 4, 4));
/// assert!(select_awq_bulk(17, 14336, 4096, 132, f16).is_some());
/// assert!(select_awq_bulk(16, 14336, 4096, 132, f16).is_none());
/// assert!(select_awq_bulk(1, 14336, 4096, 132, f16).is_none());
/// assert!(select_awq_bulk(32, 4096, 4096, 132, f16).is_none());
/// assert!(select_awq_bulk(64, 14336, 4096, 132, f16).is_none());
/// ```
pub fn select_awq_bulk(m: usize, n: usize, k: usize, sms: usize, element: Element) -> Option<(AwqGemmConfig, u32)> {
    let wide = n.div_ceil(256) * 4 >= sms;
    let k_tiles = k.div_ceil(64).max(1) as u32;
    if !(17..=32).contains(&m) || !wide || !(n / 8).is_multiple_of(4) {
        return None;
    }
    let cfg = AwqGemmConfig::new(element, [32, 256, 64], [1, 4], 4, 4).bulk();
    Some((cfg, 4.min(k_tiles)))
}

/// The prepared path's register-streamed kernel (`rcute_collective::awq_streamed`: the
/// prepared weight streamed into registers, swap-AB `mma.sync`, so on every architecture
/// of the prepared path) where it measured faster than the kernels of
/// [`select_awq_gemm_prepared`] and [`select_awq_bulk`], or `None`.
///
/// Measured (H100, `rcute bench awq --config prepared --config streamed:...`, G = 128,
/// cuBLAS fp16 in the same run; BENCHMARKS.md, AWQ, helper awqreg): on a weight of N =
/// 4096 columns (64 column blocks) the kernel with 16 warps along K, 64 columns a CTA, 4
/// steps in flight per warp and 2 K splits (128 CTAs, one wave; the two splits summed in a
/// cluster on sm_90) took 9.15 us at 1 x 4096 x 4096 (8 rows) against 10.16 for the
/// prepared `cp.async` kernel, and 11.18 us at 16 x 4096 x 4096 (16 rows) against 14.66.
/// On the wide 14336-column weight no streamed configuration beat it (1 x 14336 x 4096:
/// 19.48 against 18.63-18.78 us; 16 rows: 26.68 against 22.67), so the rule takes the
/// streamed kernel where its grid of `2 N / 64` CTAs fills between half and one wave of
/// the SMs, for M <= 16 and K up to what two splits stage (8192 at 8 rows, 4096 at 16).
/// (Session 14, helper awqtail: with `x`'s row 0 loaded with the ring, 8.0 us at 1 x 4096
/// and 10.3 at 16 x 4096 against 9.1 and 11.15 before; the one-row wide weight then takes
/// [`select_awq_streamed_wide`].)
///
/// Session 17 (lead call A, H100, `rcute bench awq --config prepared-auto --config
/// streamed-sring:8x64,16x1,2,2 --config streamed:8x64,16x1,2,2 ...`, two rounds with the
/// order reversed, cuBLAS fp16 13.6-15.9 us in the same runs; BENCHMARKS.md): a ring of 2
/// steps instead of 4, at up to 8 rows in each lane's own shared-memory slots
/// ([`AwqGemmConfig::streamed_shared_ring`], helper awqdec: `cp.async` waited on by count
/// instead of a register ring that drains at every trip), took 7.11 / 7.13 us at 1 x 4096 x
/// 4096 against 7.56 / 7.59 for ring 4 in registers, 8.14 / 8.15 against 8.53 / 8.52 at 8
/// rows; at 16 rows ring 2 in registers 9.40 / 9.45 (the shared ring 9.49 / 9.50) against
/// 9.85 / 9.88.
///
/// ```
/// use rcute_ops::awq::select::select_awq_streamed;
/// let f16 = rcute_atom::Element::F16;
/// let (cfg, splits) = select_awq_streamed(1, 4096, 4096, 132, f16).unwrap();
/// assert!(cfg.streamed && cfg.prepared && cfg.shared_ring);
/// assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([8, 64, 64], [16, 1], 2, 2));
/// let (cfg, splits) = select_awq_streamed(16, 4096, 4096, 132, f16).unwrap();
/// assert!(!cfg.shared_ring);
/// assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([16, 64, 64], [16, 1], 2, 2));
/// assert!(select_awq_streamed(1, 14336, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed(16, 14336, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed(17, 4096, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed(16, 4096, 8192, 132, f16).is_none());
/// assert!(select_awq_streamed(1, 1024, 4096, 132, f16).is_none());
/// ```
pub fn select_awq_streamed(m: usize, n: usize, k: usize, sms: usize, element: Element) -> Option<(AwqGemmConfig, u32)> {
    let ctas = 2 * (n / 64);
    let cfg = if m <= 8 {
        AwqGemmConfig::new(element, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring()
    } else {
        AwqGemmConfig::new(element, [16, 64, 64], [16, 1], 2, 4).streamed()
    };
    if m > 16 || 2 * ctas <= sms || ctas > sms || k > 2 * staged_k(&cfg) {
        return None;
    }
    Some(two_splits_pushed(cfg, k))
}

/// Most rows of `x` that [`select_awq_streamed_wide`] takes (measured at 1, 4, 5 and 8
/// rows).
pub const WIDE_STREAMED_MAX_ROWS: usize = 8;

/// The prepared path's register-streamed kernel at one to [`WIDE_STREAMED_MAX_ROWS`] rows
/// on a weight wider than one wave of 64-column blocks (`sms < N / 64 <= 2 sms`: N = 14336
/// on 132 SMs, 224 CTAs): 16 warps along K, 2 steps in flight per warp in each lane's
/// shared-memory slots ([`AwqGemmConfig::streamed_shared_ring`]), one split (K up to what
/// one split of 8 rows stages), or `None`.
///
/// Measured (H100, BENCHMARKS.md, AWQ, helper awqtail): with all of `x`'s row 0 loaded
/// with the ring (the stage no longer waits for one chunk after another behind the weight
/// loads), this kernel took 16.25 us at
/// 1 x 14336 x 4096 against 18.88-18.92 us for the prepared `cp.async` kernel of
/// [`select_awq_gemm_prepared`] in the same run (cuBLAS fp16 45.1). Rows past the first
/// are staged after the ring; still (helper awqx, same bench, `before` / `after` binaries
/// of one call) it took 16.88-17.03 us at 4 x 14336 x 4096 against 19.20-19.28 us for the
/// prepared `cp.async` kernel (cuBLAS 45.5-45.7), but 31.6-34.3 us at 16 rows (two row tiles)
/// against 23.1: M <= 4 (2 and 3 rows lie between the measured 1 and 4; 5 to 8 rows are
/// not measured). That kernel had 8 warps along K and a ring of 12 in registers. Session 17
/// (lead, H100, BENCHMARKS.md): 16 warps along K with a ring of 2 in shared-memory slots
/// took 14.48 / 14.44 us at 1 x 14336 x 4096 against 15.81 / 15.72 for the 8-warp ring of 12
/// (call A, two rounds, the order reversed; cuBLAS fp16 43.4-44.2; 70 % of the copy
/// bandwidth), and in call V (one round, the final binary) 15.81 against 16.86 at 4 rows,
/// 15.34 and 15.69 at 5 and 8 rows against 19.93 and 21.72 for the prepared `cp.async`
/// kernel the rules ran there (cuBLAS 43.2-43.9); at 16 rows (two row tiles) 30.2 against
/// 23.0, so M <= 8. (9 to 16 rows: the 16-row tile with K = 4096 staged in one split,
/// `crate::awq::select_streamed16::select_awq_streamed_wide16`, session 23.)
///
/// ```
/// use rcute_ops::awq::select::select_awq_streamed_wide;
/// let f16 = rcute_atom::Element::F16;
/// let (cfg, splits) = select_awq_streamed_wide(1, 14336, 4096, 132, f16).unwrap();
/// assert!(cfg.streamed && cfg.prepared && cfg.shared_ring);
/// assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([8, 64, 64], [16, 1], 2, 1));
/// assert_eq!(select_awq_streamed_wide(8, 14336, 4096, 132, f16), Some((cfg, 1)));
/// assert!(select_awq_streamed_wide(9, 14336, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed_wide(1, 4096, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed_wide(1, 14336, 8192, 132, f16).is_none());
/// assert!(select_awq_streamed_wide(1, 28672, 4096, 132, f16).is_none());
/// ```
pub fn select_awq_streamed_wide(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    let cfg = AwqGemmConfig::new(element, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring();
    streamed_one_split(cfg, (m, n, k), sms, WIDE_STREAMED_MAX_ROWS, 2)
}

/// `cfg` with one split where a one-split streamed rule applies: 1 to `max_rows` rows, a
/// grid of `ceil(N / 64)` 64-column blocks that fills more than half of `waves` waves of
/// the SMs and at most all of them (`waves sms / 2 < blocks <= waves sms`: the wide rules'
/// one to two waves with `waves = 2`, the one-wave rules' half to one with `waves = 1`),
/// whole k16 steps and K up to what one split of `cfg` stages.
pub(crate) fn streamed_one_split(
    cfg: AwqGemmConfig,
    (m, n, k): (usize, usize, usize),
    sms: usize,
    max_rows: usize,
    waves: usize,
) -> Option<(AwqGemmConfig, u32)> {
    let blocks = n.div_ceil(64);
    let fills = 2 * blocks > waves * sms && blocks <= waves * sms;
    let one_split = k <= staged_k(&cfg) && k.is_multiple_of(16);
    (m > 0 && m <= max_rows && fills && one_split).then_some((cfg, 1))
}

/// Most rows of `x` that [`select_awq_streamed_wave`] takes (one 8-row tile).
pub const WAVE_STREAMED_MAX_ROWS: usize = 8;

/// The prepared path's register-streamed kernel at one to [`WAVE_STREAMED_MAX_ROWS`] rows
/// on a weight of more than half and at most one wave of 64-column blocks (`sms / 2 <
/// ceil(N / 64) <= sms`: N = 8192 on 132 SMs, 128 CTAs), with whole k16 steps and K up to
/// what one split of the 8-row tile stages (4096): 16 warps along K, 4 steps in flight per
/// warp in each lane's shared-memory slots ([`AwqGemmConfig::streamed_shared_ring`]), one
/// split; or `None`. The prepared counterpart of the unprepared op's
/// `crate::awq::select_checkpoint::select_awq_streamed_checkpoint_wave`: between the
/// two-split rule of [`select_awq_streamed`] (half a wave) and the wide rule of
/// [`select_awq_streamed_wide`] (one to two waves) the prepared op ran the `cp.async`
/// kernel of [`select_awq_gemm_prepared`] (16x256, 4 stages, 8 splits), slower than the
/// unprepared op's one-wave streamed kernel there.
///
/// Measured (helper awqp8, H100, `rcute bench awq --group 128 --iters 10 --config
/// prepared-auto --config streamed:... --config streamed-sring:...` with main's code
/// (`08c45b0`), K = 4096, random data, cuBLAS fp16 in the same rows; BENCHMARKS.md, session
/// 21), µs of the prepared op's previous choice, the 8x64 streamed forms with 16 warps
/// along K and one split (rings of 4 and 2, in shared-memory slots or registers) and the
/// unprepared op (`auto`: the checkpoint streamed kernel, ring 4, one split):
///
/// | M x 8192 | before | shared ring 4 | shared ring 2 | registers, ring 4 | registers, ring 2 | unprepared op | cuBLAS |
/// |---|---|---|---|---|---|---|---|
/// | 1 | 12.50 | **9.53** | 9.86 | 9.77 | 10.94 | 11.61 | 24.3-24.6 |
/// | 4 | 13.05 | **10.17** | 10.30 | 10.42 | 11.91 | 12.52 | 24.3-24.8 |
/// | 8 | 14.75 | **10.68** | 10.60 | 10.65 | 11.81 | 12.42 | 24.4-24.6 |
///
/// Before / after in one call (helper awqp8, H100, `--config prepared-auto`, main's code
/// against this rule, `before, after, after, before`), µs of the prepared op: 1 x 8192
/// 12.60 / **9.49** / **9.54** / 12.70, 4 rows 13.05 / **10.41** / **10.37** / 12.99, 8 rows
/// 14.80 / **11.00** / **10.88** / 14.78 (the unprepared op 11.66-12.48, cuBLAS 24.4-25.0),
/// so unprepared / prepared goes from 0.84-0.93x to 1.13-1.23x there; the controls 12 x
/// 8192 and 1 x 11008 moved by under 1.3 %. The shared ring of 2 took 10.60 and 10.73 µs
/// at 8 rows in the two calls against 10.68 and 10.89 for the ring of 4 (9.86 / 9.91
/// against 9.53 / 9.79 at one row): one ring for the 8-row tile. Not taken at 9 to
/// 16 rows: the split-K wgmma kernel of `crate::awq::select_split::select_awq_wgmma_split`
/// (asked first on sm_90) took 13.77 and 14.59 µs at 12 and 16 rows against 14.37 and
/// 15.05 for the best streamed form (two 8-row tiles, ring 2 in registers; the 16-row tile
/// in 2 splits 17.28 and 19.40); nor at 11008 columns (172 blocks: the wide rule, whose
/// shared ring of 2 took 13.35 and 14.79 µs at 1 and 8 rows against 14.13 and 15.87 for
/// the ring of 4). The kernel applies each group's scales after its MMAs
/// ([`AwqGemmConfig::scale_after`]: no scale product per weight pair; H200, session 28,
/// helper awqh2, BENCHMARKS.md, `main, this, this, main` in one call): 1 x 8192 9.32 /
/// **8.86** / **8.86** / 9.21 µs, 8 rows 10.27 / **9.74** / **9.75** / 10.19 (-4.3 to
/// -4.6 %); the same option lost at the two-split rule's 1 x 4096 (6.72-6.77 against
/// 6.53-6.56) and moved nothing at the wide rule's 1 x 14336 (14.00-14.04 against
/// 14.01-14.04), whose kernels keep the scale products.
///
/// ```
/// use rcute_ops::awq::select::select_awq_streamed_wave;
/// let f16 = rcute_atom::Element::F16;
/// let pick = |m, n, k| select_awq_streamed_wave(m, n, k, 132, f16).map(|(c, s)| (c.tile, c.warps, c.stages, s));
/// assert_eq!(pick(1, 8192, 4096), Some(([8, 64, 64], [16, 1], 4, 1)));
/// assert_eq!(pick(8, 8192, 4096), Some(([8, 64, 64], [16, 1], 4, 1)));
/// assert_eq!(pick(3, 8448, 2048), Some(([8, 64, 64], [16, 1], 4, 1)));
/// let (cfg, _) = select_awq_streamed_wave(8, 8192, 4096, 132, f16).unwrap();
/// assert!(cfg.streamed && cfg.prepared && cfg.shared_ring && cfg.b_vector_words == 4 && cfg.scale_after);
/// // 9 rows, K past one split's staged x, K inside a k16 step, N of half a wave (4096:
/// // the two-split rule) or of more than one (8512, 11008: the wide rule): other rules
/// assert_eq!((pick(9, 8192, 4096), pick(8, 8192, 4160), pick(8, 8192, 4088)), (None, None, None));
/// assert_eq!((pick(8, 4096, 4096), pick(8, 8512, 4096), pick(1, 11008, 4096)), (None, None, None));
/// ```
pub fn select_awq_streamed_wave(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    let cfg = AwqGemmConfig::new(element, [8, 64, 64], [16, 1], 4, 4)
        .streamed_shared_ring()
        .scale_after();
    streamed_one_split(cfg, (m, n, k), sms, WAVE_STREAMED_MAX_ROWS, 1)
}

/// The unprepared op's register-streamed kernel on AutoAWQ's checkpoint words
/// (`rcute_collective::awq_streamed_checkpoint`: the kernel of [`select_awq_streamed`]
/// with four word loads and byte permutations per lane and step instead of one 16-byte
/// load), on the same domain as [`select_awq_streamed`]: M <= 16, a grid of
/// `2 ceil(N / 64)` CTAs between half and one wave of the SMs, K up to what two splits
/// stage, and K a multiple of 16 (whole k16 steps: `G = K` allows K = 8 (mod 16)), with
/// the same configuration (16 warps along K, 4 steps in flight, 2 splits). Not measured
/// yet: chosen because the kernel is the streamed kernel plus 4 loads and 4 `PRMT`s per
/// step (the static SASS loop per k16 step of the f16 8-row kernel: 124 / 133 instructions
/// on sm_80 / sm_90a against the prepared one's 113 / 115), where the prepared streamed
/// kernel measured 0.76-0.90x the `cp.async` kernels that the unprepared op runs otherwise.
///
/// ```
/// use rcute_ops::awq::select::select_awq_streamed_checkpoint;
/// let f16 = rcute_atom::Element::F16;
/// let (cfg, splits) = select_awq_streamed_checkpoint(1, 4096, 4096, 132, f16).unwrap();
/// assert!(cfg.streamed && !cfg.prepared && cfg.b_vector_words == 1);
/// assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([8, 64, 64], [16, 1], 4, 2));
/// let (cfg, splits) = select_awq_streamed_checkpoint(16, 4096, 4096, 132, f16).unwrap();
/// assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([16, 64, 64], [16, 1], 4, 2));
/// // N ending inside a 64-column block: the grid counts it
/// assert!(select_awq_streamed_checkpoint(3, 4104, 4096, 132, f16).is_some());
/// assert!(select_awq_streamed_checkpoint(1, 14336, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed_checkpoint(17, 4096, 4096, 132, f16).is_none());
/// assert!(select_awq_streamed_checkpoint(16, 4096, 8192, 132, f16).is_none());
/// assert!(select_awq_streamed_checkpoint(1, 4096, 4104, 132, f16).is_none());
/// ```
pub fn select_awq_streamed_checkpoint(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    let ctas = 2 * n.div_ceil(64);
    let bm: i64 = if m <= 8 { 8 } else { 16 };
    let cfg = AwqGemmConfig::new(element, [bm, 64, 64], [16, 1], 4, 1).streamed_checkpoint();
    if m > 16 || 2 * ctas <= sms || ctas > sms || k > 2 * staged_k(&cfg) || !k.is_multiple_of(16) {
        return None;
    }
    Some(two_splits_pushed(cfg, k))
}

/// `cfg` with two K splits (one where K is one 64-row k-tile), summed in a cluster by
/// pushes into split 0's shared memory ([`AwqGemmConfig::cluster_push`]) where two.
/// Measured (H100, BENCHMARKS.md, Session 25, helper awqpush: the push barrier published
/// by a full relaxed cluster barrier in the prelude, which racecheck completes on; the
/// same kernels in every unit but the prelude's barrier and the epilogue): prepared 1 / 8
/// / 16 x 4096 x 4096 6.99-7.07 / 7.87-7.94 / 9.09-9.12 us with the sum by loads,
/// 6.66-6.74 / 7.41-7.46 / 8.47-8.58 by pushes; unprepared 8.64-8.71 / 9.54-9.55 /
/// 11.06-11.11 against 8.18-8.23 / 9.01-9.09 / 10.71-10.78 (session 24's form, helper
/// awqclu: the same gains).
///
/// ```
/// use rcute_ops::awq::select::select_awq_streamed;
/// let (cfg, splits) = select_awq_streamed(1, 4096, 4096, 132, rcute_atom::Element::F16).unwrap();
/// assert!(cfg.cluster_push && splits == 2);
/// let (cfg, splits) = select_awq_streamed(1, 4096, 64, 132, rcute_atom::Element::F16).unwrap();
/// assert!(!cfg.cluster_push && splits == 1);
/// ```
fn two_splits_pushed(cfg: AwqGemmConfig, k: usize) -> (AwqGemmConfig, u32) {
    let splits = 2.min(k.div_ceil(64).max(1) as u32);
    (if splits == 2 { cfg.cluster_push() } else { cfg }, splits)
}

/// Most rows of `x` that [`select_awq_streamed_checkpoint_wide`] takes (measured at 1, 4
/// and 8 rows).
pub const WIDE_CHECKPOINT_MAX_ROWS: usize = 8;

/// The unprepared op's register-streamed kernel on AutoAWQ's checkpoint words at one to
/// [`WIDE_CHECKPOINT_MAX_ROWS`] rows on a weight wider than one wave of 64-column blocks
/// (`sms < ceil(N / 64) <= 2 sms`: N = 14336 on 132 SMs), with whole k16 steps and K up to
/// what one split stages: 16 warps along K, a ring of 2 steps, one split; or `None`.
///
/// Measured (session 17, lead call B, H100, `rcute bench awq --config
/// streamed-checkpoint:8x64,16x1,2,1 ...`, two rounds with the order reversed, cuBLAS fp16
/// 43.7-45.6 us in the same runs; BENCHMARKS.md): 16.60 / 16.48 us at 1 x 14336 x 4096,
/// 17.86 / 17.62 at 4 rows and 17.94 / 17.91 at 8 rows, against 20.36 / 20.18, 21.28 /
/// 21.24 and 22.65 / 22.64 for the `cp.async` kernel the op ran there (8 warps with a ring
/// of 12 took 18.9-20.3, 16 warps with a ring of 4 22.0-23.6; at 16 rows the 16-row
/// streamed kernels took 42-44 us against 25.1, so 9 to 16 rows keep the `cp.async` one).
/// This keeps the unprepared op within 1.15x of the prepared one at 1 to 8 rows.
///
/// ```
/// use rcute_ops::awq::select::select_awq_streamed_checkpoint_wide;
/// let bf16 = rcute_atom::Element::BF16;
/// let (cfg, splits) = select_awq_streamed_checkpoint_wide(1, 14336, 4096, 132, bf16).unwrap();
/// assert!(cfg.streamed && !cfg.prepared && !cfg.shared_ring && cfg.b_vector_words == 1);
/// assert_eq!((cfg.tile, cfg.warps, cfg.stages, splits), ([8, 64, 64], [16, 1], 2, 1));
/// assert!(select_awq_streamed_checkpoint_wide(8, 14336, 4096, 132, bf16).is_some());
/// assert!(select_awq_streamed_checkpoint_wide(9, 14336, 4096, 132, bf16).is_none());
/// assert!(select_awq_streamed_checkpoint_wide(1, 4096, 4096, 132, bf16).is_none());
/// assert!(select_awq_streamed_checkpoint_wide(1, 28672, 4096, 132, bf16).is_none());
/// assert!(select_awq_streamed_checkpoint_wide(1, 14336, 4104, 132, bf16).is_none());
/// ```
pub fn select_awq_streamed_checkpoint_wide(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    let cfg = AwqGemmConfig::new(element, [8, 64, 64], [16, 1], 2, 1).streamed_checkpoint();
    streamed_one_split(cfg, (m, n, k), sms, WIDE_CHECKPOINT_MAX_ROWS, 2)
}

/// The K one split of a register-streamed configuration takes (the `x` it stages).
pub(crate) fn staged_k(cfg: &AwqGemmConfig) -> usize {
    cfg.streamed_split_k_capacity().map_or(0, |k| k as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq::rule_launch::{cases, choices, launch_of};

    /// Wherever the streamed kernel is chosen, it is a valid streamed configuration whose
    /// splits stay the two it asks for (the staged `x` holds each split's K range, so the
    /// sm_90 cluster sum applies), M fits its rows, and the grid is at most one wave (at
    /// least half of one with two splits).
    #[test]
    fn streamed_choice_keeps_two_splits_and_one_wave() {
        let e = Element::F16;
        let ks = [64, 1024, 4096, 8192, 12288];
        let shapes = cases(&[108, 132], 1..=24, (64..=16384).step_by(320), &ks);
        let select = |m, n, k, sms| select_awq_streamed(m, n, k, sms, e);
        for ((m, n, k, sms), cfg, _, (run, ctas)) in choices(shapes, select) {
            assert!(cfg.streamed && m <= cfg.tile[0] as usize, "{m}x{n}x{k}");
            assert!(run <= 2, "{m}x{n}x{k}: {run} splits");
            // half to one wave (with both splits: K of one 64-row tile runs one)
            assert!(
                ctas <= sms && (run == 1 || 2 * ctas > sms),
                "{m}x{n}x{k} on {sms}: {ctas} CTAs"
            );
        }
        assert!(select_awq_streamed(1, 4096, 4096, 132, e).is_some());
    }

    /// The wide rule (1 to 8 rows) runs one split of its ring in one to two waves
    /// of CTAs, never where the 16-warp rule already chose, and its K fits the staged x.
    #[test]
    fn wide_streamed_choice_runs_one_split_in_one_to_two_waves() {
        let e = Element::F16;
        let ks = [64, 1024, 4096, 4104, 8192];
        let shapes = cases(&[108, 132], 1..=10, (64..=20000).step_by(328), &ks);
        let select = |m, n, k, sms| select_awq_streamed_wide(m, n, k, sms, e);
        for ((m, n, k, sms), _, _, (run, ctas)) in choices(shapes, select) {
            assert!(select_awq_streamed(m, n, k, sms, e).is_none(), "{m}x{n}x{k}");
            assert!(
                m <= WIDE_STREAMED_MAX_ROWS && run == 1 && ctas > sms && ctas <= 2 * sms,
                "{m}x{n}x{k} on {sms}"
            );
        }
    }

    /// The one-wave rule (1 to 8 rows) runs one split of its shared ring of 4 in more than
    /// half and at most one wave of CTAs (one CTA an SM), never where the two-split or the
    /// wide rule already chose, only with whole k16 steps and K within the staged x.
    #[test]
    fn wave_streamed_choice_runs_one_split_in_one_wave() {
        let e = Element::F16;
        let ks = [64, 1024, 4096, 4104, 4160, 8192];
        let shapes = cases(&[108, 114, 132], 1..=12, (64..=20000).step_by(192), &ks);
        let select = |m, n, k, sms| select_awq_streamed_wave(m, n, k, sms, e);
        for ((m, n, k, sms), cfg, _, (run, ctas)) in choices(shapes, select) {
            assert!(select_awq_streamed(m, n, k, sms, e).is_none(), "{m}x{n}x{k}");
            assert!(select_awq_streamed_wide(m, n, k, sms, e).is_none(), "{m}x{n}x{k}");
            assert!(cfg.streamed && cfg.prepared && cfg.shared_ring && cfg.stages == 4);
            assert!(
                m <= WAVE_STREAMED_MAX_ROWS && k % 16 == 0 && run == 1 && 2 * ctas > sms && ctas <= sms,
                "{m}x{n}x{k} on {sms}: {ctas} CTAs, {run} splits"
            );
        }
    }

    /// The unprepared op's streamed kernel is chosen on the prepared one's domain (every
    /// shape with N a multiple of 64 where [`select_awq_streamed`] takes the streamed
    /// kernel, with the same tile, warps and splits; its register ring keeps 4 steps), only
    /// with whole k16 steps, and
    /// wherever chosen it is a valid checkpoint configuration whose grid is at most one
    /// wave (at least half of one with two splits), ragged N included.
    #[test]
    fn checkpoint_choice_mirrors_the_prepared_one() {
        let e = Element::BF16;
        let mut chosen = 0;
        let ks = [32, 40, 1024, 4096, 4104, 8192, 12288];
        for (m, n, k, sms) in cases(&[108, 132], 1..=20, (8..=9000).step_by(136), &ks) {
            let got = select_awq_streamed_checkpoint(m, n, k, sms, e);
            if n % 64 == 0 && k % 16 == 0 {
                let want = select_awq_streamed(m, n, k, sms, e);
                assert_eq!(
                    got.map(|(c, s)| (c.tile, c.warps, s)),
                    want.map(|(c, s)| (c.tile, c.warps, s)),
                    "{m}x{n}x{k} on {sms}"
                );
            }
            let Some((cfg, splits)) = got else { continue };
            chosen += 1;
            assert!(k % 16 == 0 && cfg.streamed && !cfg.prepared && m <= cfg.tile[0] as usize);
            assert!(cfg.stages == 4 && !cfg.shared_ring, "{m}x{n}x{k}: ring {}", cfg.stages);
            let g = rcute_kernel::awq_gemm::generate(&cfg).unwrap();
            // two splits sum in a cluster by pushes
            let name = if splits == 2 {
                "_v1_streamed_cpush"
            } else {
                "_v1_streamed"
            };
            assert!(g.name.ends_with(name), "{}", g.name);
            assert_eq!(cfg.cluster_push, splits == 2);
            let (run, ctas) = launch_of(&g, m, n, k, splits);
            assert!(
                run <= 2 && ctas <= sms && (run == 1 || 2 * ctas > sms),
                "{m}x{n}x{k} on {sms}: {ctas} CTAs, {run} splits"
            );
        }
        assert!(chosen > 0);
    }
}
