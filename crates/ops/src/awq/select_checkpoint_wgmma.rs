//! The unprepared op's SM90 mixed-input kernel on AutoAWQ's checkpoint words
//! ([`select_awq_wgmma_checkpoint`]; `AwqGemmConfig::wgmma_checkpoint`,
//! `rcute_collective::awq_wgmma_checkpoint`): the prepared op's wgmma choice (the split-K
//! kernel of `super::select_split` at small batches, the one-split kernel of
//! `super::select::select_awq_wgmma` from 33 rows; at 97 to 128 rows of a wide weight
//! that kernel, not the prepared op's chained one) with the checkpoint flag, the same
//! kernel reading the checkpoint's `qweight` as it is (TMA boxes of the row-major words,
//! two byte permutations per lane and word pair). The unprepared op runs it ahead of the
//! fused `cp.async` kernels and the reordered path (a reorder pass per call + the prepared
//! kernel), where it measured faster than they; above [`WGMMA_CHECKPOINT_MAX_ROWS`] the
//! dense path stays.

use super::select::select_awq_wgmma;
use super::select_split::select_awq_wgmma_prepared;
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// Fewest rows of `x` that [`select_awq_wgmma_checkpoint`] takes.
pub const WGMMA_CHECKPOINT_MIN_ROWS: usize = 9;

/// Most rows of `x` that [`select_awq_wgmma_checkpoint`] takes: the reordered path's last
/// row count (`super::select::REORDERED_MAX_M`); above it the dense path (which ties with
/// the prepared op's kernel there) measured faster (4096 x 14336 x 4096).
pub const WGMMA_CHECKPOINT_MAX_ROWS: usize = super::select::REORDERED_MAX_M;

/// The SM90 mixed-input kernel on the checkpoint's words for the unprepared op on sm_90,
/// or `None`: for [`WGMMA_CHECKPOINT_MIN_ROWS`] to [`WGMMA_CHECKPOINT_MAX_ROWS`] rows, the
/// prepared op's wgmma choice with the checkpoint flag (tile, warps, stages and splits as
/// [`select_awq_wgmma_prepared`]: the split-K tile, else the one-split tile, else at 9 to
/// 16 rows of a weight too wide for two splits the 16-token tile in one split; where that
/// is the chained one-split 64-token tile on two consumer warpgroups, 97 to 128 rows of a
/// wide weight, `super::select::select_awq_wgmma`'s one-consumer tile instead). N a
/// multiple of 64, K of 16; the caller checks that `x` and `qweight` fit the kernel's TMA
/// maps.
///
/// Measured (helper awqckw2, session 22, **H100** 80GB HBM3 (132 SMs, 700 W), `rcute bench
/// awq --shape MxNx4096 --group 128 --iters 10 --config prepared-auto`, random data,
/// weights rotated over >= 150 MB, CUDA graphs of 10 calls, median of 10; main `75fb91e`
/// (`before`) against this rule (`after`) in one call, order before, after, after,
/// before; BENCHMARKS.md, session 22, helper awqckw2): µs of the unprepared op (`auto`),
/// after / before in each round, unprepared / prepared (the prepared op in the same
/// process), cuBLAS fp16 in the same rows:
///
/// | M x N | before's path | before (µs) | after (µs) | after / before | unprepared / prepared: after, before | cuBLAS |
/// |---|---|---|---|---|---|---|
/// | 24 x 14336 | fused | 30.20 / 30.28 | 23.05 / 23.08 | 0.76x / 0.76x | 1.00-1.01x, 1.31-1.32x | 41.7-43.7 |
/// | 32 x 14336 | fused | 32.94 / 32.78 | 24.32 / 24.36 | 0.74x / 0.74x | 1.01-1.02x, 1.35x | 42.0-42.3 |
/// | 48 x 14336 | fused | 44.48 / 44.37 | 27.64 / 27.84 | 0.62x / 0.63x | 0.99x, 1.58-1.59x | 42.2-42.6 |
/// | 64 x 14336 | fused | 49.07 / 48.84 | 31.49 / 31.50 | 0.64x / 0.65x | 1.01-1.02x, 1.58x | 42.6-42.9 |
/// | 96 x 14336 | reordered | 57.79 / 57.91 | 41.44 / 41.47 | 0.72x / 0.72x | 0.98-1.00x, 1.33-1.38x | 43.2-43.3 |
/// | 128 x 14336 | reordered | 59.26 / 59.35 | 40.95 / 40.86 | 0.69x / 0.69x | 0.85-0.86x, 1.25x | 45.3-45.5 |
/// | 32 x 4096 | fused | 18.45 / 18.43 | 14.63 / 14.58 | 0.79x / 0.79x | 1.02x, 1.29x | 14.2-14.3 |
/// | 64 x 4096 | dense | 28.94 / 29.01 | 18.37 / 18.13 | 0.63x / 0.62x | 1.03x, 1.62-1.64x | 14.4-15.2 |
/// | 9 x 28672 | fused | 37.73 / 39.15 | 31.83 / 31.67 | 0.84x / 0.81x | 0.72x, 0.86-0.89x | 79.3-79.6 |
/// | 16 x 28672 | fused | 41.04 / 41.06 | 32.26 / 32.01 | 0.79x / 0.78x | 0.84-0.85x, 1.07-1.08x | 79.6-83.1 |
/// | 1024 x 14336 | reordered | 204.74 / 219.40 | 189.28 / 188.10 | 0.92x / 0.86x | 1.02x, 1.10-1.18x | 183.1-198.2 |
/// | 4096 x 14336 | dense | 775.56 / 784.54 | 828.96 / 776.29 | 1.07x / 0.99x | 1.02-1.09x, 1.02x | 674.4-724.8 |
///
/// (rounds' cuBLAS drift at the two large rows: by the ratio to cuBLAS in the same row,
/// 1024 x 14336 0.970 / 0.973 after against 0.895 / 0.904 before, 4096 x 14336 0.874 /
/// 0.869 against 0.895 / 0.896.) So taken at 9 to 3072 rows, not at 4096 (the dense path
/// stays). Forced in the same call (`after` binary, one run): 1024 x 14336 this rule's
/// kernel 188.97 µs, the reordered path 205.33, the dense path 241.53, the prepared op
/// 186.11; 4096 x 14336 768.87, 829.08, 773.10 (the dense path 0.885x cuBLAS against
/// 0.870x), 757.19; at 128 x 14336 the rule's one-split 64x256 tile forced 47.38 µs (the
/// op's own call 40.09 in the same run: the op's rows at 128 rows measured 40.1-41.0 in
/// three runs, the prepared op's twin 42.9-47.8), two splits of 64x256 / 128x256 on two
/// warpgroups 58.98 / 47.89; at 9 / 16 x 28672 the one-split 16-token kernel 31.86 /
/// 32.79 on the checkpoint's words and 31.28 / 31.30 prepared (then not the prepared
/// op's choice: 44.27 / 38.84 there; now it is, [`select_awq_wgmma_prepared`]). Not
/// measured: 2048 and 3072 rows (taken: the rule replaces the reordered path, which ran
/// there, with the same kernel less the reorder pass; at 1024 and 4096 rows it was 8 % faster than that path in the same process).
///
/// ```
/// use rcute_ops::awq::select_checkpoint_wgmma::select_awq_wgmma_checkpoint;
/// use rcute_ops::awq::select_split::select_awq_wgmma_prepared;
/// let (h, f16) = ((9, 0), rcute_atom::Element::F16);
/// let pick = |m, n| select_awq_wgmma_checkpoint(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile, c.warps, c.stages, c.split_k, s));
/// let t = [16, 256, 64];
/// assert_eq!((pick(9, 8192), pick(16, 11008), pick(12, 14336)), (Some((t, [2, 1], 8, true, 4)), Some((t, [2, 1], 8, true, 3)), Some((t, [2, 1], 8, true, 2))));
/// // 9 to 16 rows of 28672 columns: the 16-token tile in one split
/// assert_eq!((pick(9, 28672), pick(16, 28672)), (Some((t, [2, 1], 8, false, 1)), Some((t, [2, 1], 8, false, 1))));
/// // 17 to 32 rows of 28672 columns: the 32-token tile in one split
/// assert_eq!(pick(24, 28672), Some(([32, 256, 64], [2, 1], 6, false, 1)));
/// // 97 to 128 rows of a wide weight: not the prepared op's chained one-split tile but the
/// // one-consumer 64-token tile; at 8192 the prepared op's split-K tile (2 splits); no
/// // chained step pairs anywhere
/// assert_eq!((pick(97, 14336), pick(128, 11008)), (Some(([64, 256, 64], [1, 1], 8, false, 1)), Some(([64, 256, 64], [1, 1], 8, false, 1))));
/// assert_eq!(pick(128, 8192), Some(([64, 256, 64], [2, 1], 6, true, 2)));
/// let chained = |m, n| select_awq_wgmma_checkpoint(m, n, 4096, 132, h, f16).unwrap().0.chained;
/// assert_eq!((chained(112, 14336), chained(112, 8192), chained(40, 14336)), (false, false, false));
/// let (cfg, _) = select_awq_wgmma_checkpoint(16, 11008, 4096, 132, h, f16).unwrap();
/// assert!(cfg.wgmma && cfg.split_k && !cfg.prepared && cfg.b_vector_words == 1);
/// // elsewhere the prepared op's choice with the checkpoint flag
/// for (m, n) in [(9, 28672), (16, 28672), (32, 28672), (24, 14336), (48, 14336), (64, 14336), (96, 14336), (32, 4096), (64, 4096), (128, 8192), (129, 14336), (1024, 14336), (3072, 14336)] {
///     let (p, s) = select_awq_wgmma_prepared(m, n, 4096, 132, h, f16).unwrap();
///     let (c, cs) = select_awq_wgmma_checkpoint(m, n, 4096, 132, h, f16).unwrap();
///     assert_eq!((c.tile, c.warps, c.stages, c.split_k, cs), (p.tile, p.warps, p.stages, p.split_k, s));
///     assert!(!c.prepared && c.wgmma && c.b_vector_words == 1);
/// }
/// // 8 rows, 16 rows of a narrower weight, 128 x 4096 (no wgmma tile), more than 3072
/// // rows (the dense path), N inside a 64-column block, K inside a k16 step, not sm_90:
/// // other rules
/// assert_eq!((pick(8, 11008), pick(16, 4096), pick(128, 4096), pick(3073, 14336)), (None, None, None, None));
/// assert_eq!(select_awq_wgmma_checkpoint(16, 11000, 4096, 132, h, f16), None);
/// assert_eq!(select_awq_wgmma_checkpoint(16, 11008, 4104, 132, h, f16), None);
/// assert_eq!(select_awq_wgmma_checkpoint(16, 11008, 4096, 132, (8, 0), f16), None);
/// ```
pub fn select_awq_wgmma_checkpoint(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    cc: (u32, u32),
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    if !(WGMMA_CHECKPOINT_MIN_ROWS..=WGMMA_CHECKPOINT_MAX_ROWS).contains(&m) {
        return None;
    }
    let (cfg, splits) = select_awq_wgmma_prepared(m, n, k, sms, cc, element)?;
    // the prepared op's one-split chained tile (97 to 128 rows of a wide weight) measured
    // no gain on the checkpoint's words: the one-consumer 64-token tile stays
    let (cfg, splits) = if cfg.chained && !cfg.split_k {
        select_awq_wgmma(m, n, k, sms, cc, element)?
    } else {
        (cfg, splits)
    };
    // the prepared op's chained step pairs of the split-K tiles (33 to 48 and 97 to 128
    // rows) were not timed on the checkpoint's words
    let cfg = AwqGemmConfig {
        chained: false,
        ..cfg.wgmma_checkpoint()
    };
    Some((cfg, splits))
}
