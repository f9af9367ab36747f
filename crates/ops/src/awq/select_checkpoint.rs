//! The unprepared op's decode choices (`Ops::awq_gemm` on AutoAWQ's checkpoint tensors as
//! they are, 1 to 16 rows), kept within 1.3x of the prepared op (issue 12): the
//! register-streamed kernel on the checkpoint words ([`select_awq_checkpoint_streamed`]:
//! the two-split rule for weights of half a wave of 64-column blocks, the wide rule for one
//! to two waves, and [`select_awq_streamed_checkpoint_wave`] for one wave), and the fused
//! kernel's configuration where no streamed rule applies
//! ([`select_awq_gemm_checkpoint`]: [`select_awq_gemm`] except at 9 to 16 rows of three
//! measured weight bands). On sm_90 the op asks
//! [`super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint`] first (the prepared
//! op's wgmma choice on the checkpoint's words: from 9 rows of a wide weight, N a multiple
//! of 64, K of 16, `x` and `qweight` fit for TMA): where it takes the shape, the rules here
//! are not reached by `Ops::awq_gemm` (16 x 11008 and 12 / 16 x 28672 below: the wgmma
//! kernel on the checkpoint's words, split-K at 11008 (1.01x of the prepared op on an
//! H200), one split at 28672 (0.72-0.85x of the prepared op on an H100, session 22)).
//!
//! Before / after in one call (helper awqun, H100, `rcute bench awq --group 128 --iters 10
//! --config prepared-auto`, main `8a000bd` against these rules, `before, after, after,
//! before`; BENCHMARKS.md, session 21), unprepared / prepared: 1 x 8192 1.21x -> 0.92-0.93x,
//! 8 x 8192 1.29-1.34x -> 0.84-0.85x, 12 x 8192 1.42-1.44x -> 1.20-1.21x, 16 x 8192
//! 1.55-1.56x -> 1.16-1.18x, 9 x 11008 1.30-1.36x -> 1.24-1.25x, 16 x 11008 1.38-1.39x ->
//! 1.28-1.31x (no existing form reaches 1.3x there), 12 x 28672 1.01-1.03x -> 0.84-0.87x, 16 x
//! 28672 1.28-1.29x -> 1.06-1.14x, 16 x 4096 x 14336 1.48-1.49x -> 1.09x (K = 4096 unless
//! named); the unchanged rows 12 x 11008, 12 and 8 x 14336, 4 x 4096 moved by under 1 %.
//!
//! ```
//! use rcute_ops::awq::select_checkpoint::{select_awq_checkpoint_streamed, select_awq_gemm_checkpoint};
//! let f16 = rcute_atom::Element::F16;
//! // 12 x 8192 x 4096: the 8-row streamed tile, two row tiles, a ring of 2, one split
//! let (cfg, splits) = select_awq_checkpoint_streamed(12, 8192, 4096, 132, f16).unwrap();
//! assert_eq!((cfg.tile, cfg.stages, splits), ([8, 64, 64], 2, 1));
//! // 16 x 11008 x 4096: no streamed rule; the fused 16x256 tile, 3 stages, 8 splits
//! assert!(select_awq_checkpoint_streamed(16, 11008, 4096, 132, f16).is_none());
//! let (cfg, splits) = select_awq_gemm_checkpoint(16, 11008, 4096, 132, f16);
//! assert_eq!((cfg.tile, cfg.stages, splits), ([16, 256, 64], 3, 8));
//! ```

use super::select::{
    select_awq_gemm, select_awq_streamed_checkpoint, select_awq_streamed_checkpoint_wide, streamed_one_split,
};
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// Most rows of `x` that [`select_awq_streamed_checkpoint_wave`] takes (two 8-row tiles).
pub const WAVE_CHECKPOINT_MAX_ROWS: usize = 16;

/// The unprepared op's register-streamed kernel on AutoAWQ's checkpoint words at one to
/// [`WAVE_CHECKPOINT_MAX_ROWS`] rows on a weight of more than half and at most one wave of
/// 64-column blocks (`sms / 2 < ceil(N / 64) <= sms`: N = 8192 on 132 SMs), with whole
/// k16 steps and K up to what one split of the 8-row tile stages (4096): 8 rows a CTA, 16
/// warps along K, one split; a ring of 4 steps in registers up to 8 rows (one row tile:
/// at most one CTA per SM) and of 2 at 9 to 16 rows (two row tiles, two CTAs an SM); or
/// `None`.
///
/// Measured (helper awqun, H100, `rcute bench awq --group 128 --iters 10 --config
/// prepared-auto --config streamed-checkpoint:...` with main's binary `8a000bd`, K = 4096,
/// random data, cuBLAS fp16 in the same rows; BENCHMARKS.md, session 21): µs of the
/// unprepared op's previous choice (the fused `cp.async` kernel: 16x256, 4 stages, 6 to 17
/// splits), this rule's kernel and the prepared op (the `cp.async` prepared kernel at 1 to
/// 8 rows, the split-K wgmma kernel at 9 to 16):
///
/// | M x 8192 | before | ring 4 | ring 2 | prepared | cuBLAS |
/// |---|---|---|---|---|---|
/// | 1 | 15.17 | **11.67** | 12.15 | 12.67 | 24.2 |
/// | 4 | 16.36 | **12.15** | 12.67 | 13.10 | 24.3 |
/// | 8 | 19.26 | **12.43** | 13.17 | 14.79 | 24.5 |
/// | 9 | 17.02 | 22.60 | **16.07** | 13.49 | 24.7 |
/// | 12 | 19.79 | 23.24 | **16.53** | 13.80 | 24.8 |
/// | 16 | 22.57 | 23.59 | **17.52** | 14.54 | 24.9 |
///
/// So unprepared / prepared goes from 1.20-1.57x to 0.84-1.20x. Not taken at 11008
/// columns (172 blocks: the wide rule's one to two waves; at 12 and 16 rows two row
/// tiles make 344 CTAs, 28.4-29.1 µs against the fused kernel's 20.5-23.4), nor with the
/// 16-row tile (it stages half the K: two splits, 19.0-21.8 µs at 9 to 16 x 8192).
///
/// ```
/// use rcute_ops::awq::select_checkpoint::select_awq_streamed_checkpoint_wave;
/// let f16 = rcute_atom::Element::F16;
/// let pick = |m, n, k| select_awq_streamed_checkpoint_wave(m, n, k, 132, f16).map(|(c, s)| (c.tile, c.warps, c.stages, s));
/// assert_eq!(pick(1, 8192, 4096), Some(([8, 64, 64], [16, 1], 4, 1)));
/// assert_eq!(pick(8, 8192, 4096), Some(([8, 64, 64], [16, 1], 4, 1)));
/// assert_eq!(pick(9, 8192, 4096), Some(([8, 64, 64], [16, 1], 2, 1)));
/// assert_eq!(pick(16, 8448, 2048), Some(([8, 64, 64], [16, 1], 2, 1)));
/// let (cfg, _) = select_awq_streamed_checkpoint_wave(16, 8192, 4096, 132, f16).unwrap();
/// assert!(cfg.streamed && !cfg.prepared && !cfg.shared_ring && cfg.b_vector_words == 1);
/// // 17 rows, K past one split's staged x, K inside a k16 step, N of half a wave or of
/// // more than one: other rules
/// assert_eq!((pick(17, 8192, 4096), pick(8, 8192, 4160), pick(8, 8192, 4088)), (None, None, None));
/// assert_eq!((pick(8, 4096, 4096), pick(8, 8512, 4096), pick(8, 14336, 4096)), (None, None, None));
/// ```
pub fn select_awq_streamed_checkpoint_wave(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    let ring = if m <= 8 { 4 } else { 2 };
    let cfg = AwqGemmConfig::new(element, [8, 64, 64], [16, 1], ring, 1).streamed_checkpoint();
    streamed_one_split(cfg, (m, n, k), sms, WAVE_CHECKPOINT_MAX_ROWS, 1)
}

/// The unprepared op's register-streamed kernel: the first of
/// [`select_awq_streamed_checkpoint`] (half a wave of 64-column blocks, two splits),
/// [`select_awq_streamed_checkpoint_wide`] (one to two waves, up to 8 rows) and
/// [`select_awq_streamed_checkpoint_wave`] (one wave, up to 16 rows) that takes the shape
/// (their domains do not overlap), or `None`.
///
/// ```
/// use rcute_ops::awq::select_checkpoint::select_awq_checkpoint_streamed;
/// let f16 = rcute_atom::Element::F16;
/// let splits = |m, n| select_awq_checkpoint_streamed(m, n, 4096, 132, f16).map(|(c, s)| (c.stages, s));
/// assert_eq!((splits(16, 4096), splits(8, 14336), splits(12, 8192)), (Some((4, 2)), Some((2, 1)), Some((2, 1))));
/// assert_eq!((splits(9, 14336), splits(1, 28672)), (None, None));
/// ```
pub fn select_awq_checkpoint_streamed(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    select_awq_streamed_checkpoint(m, n, k, sms, element)
        .or_else(|| select_awq_streamed_checkpoint_wide(m, n, k, sms, element))
        .or_else(|| select_awq_streamed_checkpoint_wave(m, n, k, sms, element))
}

/// The fused kernel's configuration and requested K splits for the unprepared op
/// (`Ops::awq_gemm` where no streamed rule, tuning table, reordered or dense path takes the
/// shape): [`select_awq_gemm`]'s, except at 9 to 16 rows on three bands of weights, where
/// that choice ran more than 1.3x the prepared op. With `tiles = ceil(N / 256)`:
///
/// * `sms / 2 < tiles <= sms` (N = 28672 on 132 SMs, 112 tiles): the 16x256 tile, 3
///   stages, 4 splits (448 CTAs) instead of 4 stages and 5 splits (3 stages and 10 splits
///   at 16 rows);
/// * `sms / 4 <= tiles <= 3 sms / 8` (N = 11008, 43 tiles): 4 stages and 6 splits at 9 to
///   12 rows (the choice of [`select_awq_gemm`] at 12 rows), 3 stages and 8 splits at 13
///   to 16 rows instead of 4 stages and 8 splits at 9 rows and 3 stages and 10 splits at
///   16;
/// * `4 tiles < sms` with K > 8192 (N = 4096, K = 14336: K past what the streamed kernels
///   stage): 3 stages, 16 splits instead of 4 stages and `80 / M` splits (6 at 12 rows,
///   5 at 16).
///
/// Measured (helper awqun, H100, `rcute bench awq --group 128 --iters 10 --config
/// prepared-auto --config BMxBN,WMxWN,STAGES,SPLITS` with main's binary `8a000bd`, random
/// data; BENCHMARKS.md, session 21), µs (two runs where two calls measured the row):
///
/// | M x N x K | before | chosen | other forms | prepared op | cuBLAS |
/// |---|---|---|---|---|---|
/// | 12 x 28672 x 4096 | 46.84 (4, 5) | **39.46** (3, 4) | 40.83 (4, 4), 41.96 (3, 5), 46.00 (6, 4) | 44.69 | 78.7 |
/// | 16 x 28672 x 4096 | 48.03 (3, 10) | **40.59** (3, 4) | 42.13 (4, 4), 46.51 (3, 5), 49.30 (4, 5) | 38.25 | 79.0 |
/// | 9 x 11008 x 4096 | 20.88 (4, 8) | **19.81** (4, 6) | 19.98 (3, 6), 20.52 (3, 8), 20.86 (6, 6), 21.86 (4, 10) | 15.95 | 31.9 |
/// | 12 x 11008 x 4096 | 20.55 / 20.52 (4, 6) | **20.59** (4, 6) | 20.71 (3, 6), 21.14 / 20.82 (3, 8), 21.44 (4, 8), 21.82 (6, 6) | 16.36 / 16.12 | 32.6 |
/// | 16 x 11008 x 4096 | 23.09 / 23.40 (3, 10) | **21.90 / 22.04** (3, 8) | 22.44 (3, 6), 22.74 (4, 8), 23.68 (6, 6), 23.84 (4, 6) | 16.77 / 16.70 | 33.9 |
/// | 12 x 4096 x 14336 | 32.76 (4, 6) | **26.20** (3, 16) | 27.61 (4, 8), 27.81 (4, 16), 30.06 (4, 12) | 29.48 | 42.3 |
/// | 16 x 4096 x 14336 | 37.43 (4, 5) | **27.70** (3, 16) | 28.45 (4, 8), 28.99 (4, 16), 31.37 (4, 12), 32.68 (6, 8) | 25.71 | 42.6 |
///
/// (`(stages, splits)` of the 16x256 tile, warps 1x4; the 32x256 tile with 4 splits took
/// 26.8-27.9 µs at 11008.) Unprepared / prepared becomes 0.88x and 1.06x at 28672
/// columns, 1.24x, 1.26x and **1.31-1.32x** at 9, 12 and 16 x 11008 (1.28-1.31x in the
/// before / after call of the module docs; no form measured reaches 1.3x at 16 rows:
/// BENCHMARKS.md proposes the kernel for it), 0.89x and 1.08x at 4096 x 14336. 13 to 15 rows of 11008, 9 rows of 28672, 9 rows and K = 8192 to 14336 of
/// the narrow weight are not measured (they take the neighbouring rows' choice; K of 8192
/// and below keep [`select_awq_gemm`]'s).
///
/// ```
/// use rcute_ops::awq::select_checkpoint::select_awq_gemm_checkpoint;
/// use rcute_ops::awq::select::select_awq_gemm;
/// let f16 = rcute_atom::Element::F16;
/// let pick = |m, n, k| { let (c, s) = select_awq_gemm_checkpoint(m, n, k, 132, f16); (c.tile, c.stages, s) };
/// let t = [16, 256, 64];
/// assert_eq!((pick(9, 28672, 4096), pick(16, 28672, 4096)), ((t, 3, 4), (t, 3, 4)));
/// assert_eq!((pick(9, 11008, 4096), pick(12, 11008, 4096), pick(13, 11008, 4096)), ((t, 4, 6), (t, 4, 6), (t, 3, 8)));
/// assert_eq!((pick(12, 4096, 14336), pick(16, 4096, 14336)), ((t, 3, 16), (t, 3, 16)));
/// // elsewhere select_awq_gemm's choice: 14336 columns, 8 and 17 rows, K of 8192
/// for (m, n, k) in [(12, 14336, 4096), (8, 28672, 4096), (17, 11008, 4096), (16, 4096, 8192)] {
///     assert_eq!(select_awq_gemm_checkpoint(m, n, k, 132, f16), select_awq_gemm(m, n, k, 132, f16));
/// }
/// // fewer k-tiles than splits: at most one split a k-tile
/// assert_eq!(pick(16, 11008, 256), (t, 3, 4));
/// ```
pub fn select_awq_gemm_checkpoint(m: usize, n: usize, k: usize, sms: usize, element: Element) -> (AwqGemmConfig, u32) {
    let rules = select_awq_gemm(m, n, k, sms, element);
    if !(9..=16).contains(&m) {
        return rules;
    }
    let tiles = n.div_ceil(256);
    let (stages, splits) = if 2 * tiles > sms && tiles <= sms {
        (3, 4)
    } else if 4 * tiles >= sms && 8 * tiles <= 3 * sms {
        if m <= 12 {
            (4, 6)
        } else {
            (3, 8)
        }
    } else if 4 * tiles < sms && k > 8192 {
        (3, 16)
    } else {
        return rules;
    };
    let cfg = AwqGemmConfig::new(element, [16, 256, 64], [1, 4], stages, rules.0.b_vector_words);
    (cfg, splits.min(k.div_ceil(64).max(1) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq::rule_launch::{cases, choices};

    /// The one-wave streamed rule never overlaps the two other streamed rules, and wherever
    /// it is chosen its grid (row tiles x 64-column blocks, one split) is more than half a
    /// wave and at most two, with one CTA per SM up to 8 rows (the ring of 4 in registers).
    #[test]
    fn wave_rule_is_disjoint_and_fills_one_to_two_waves() {
        let e = Element::F16;
        let ks = [64, 2048, 4096, 4104, 8192];
        let shapes = cases(&[108, 114, 132], 1..=20, (64..=20000).step_by(192), &ks);
        let select = |m, n, k, sms| select_awq_streamed_checkpoint_wave(m, n, k, sms, e);
        for ((m, n, k, sms), cfg, _, (run, ctas)) in choices(shapes, select) {
            assert!(select_awq_streamed_checkpoint(m, n, k, sms, e).is_none(), "{m}x{n}x{k}");
            assert!(
                select_awq_streamed_checkpoint_wide(m, n, k, sms, e).is_none(),
                "{m}x{n}x{k}"
            );
            assert!(
                run == 1 && 2 * ctas > sms && ctas <= 2 * sms,
                "{m}x{n}x{k} on {sms}: {ctas}"
            );
            assert_eq!(
                cfg.stages == 4,
                ctas <= sms,
                "{m}x{n}x{k} on {sms}: ring {}",
                cfg.stages
            );
        }
    }

    /// The fused choice differs from `select_awq_gemm` only at 9 to 16 rows, always in the
    /// 16x256 tile with warps 1x4, the rules' copy width, and at most one split a k-tile.
    #[test]
    fn fused_choice_changes_only_the_measured_bands() {
        let e = Element::BF16;
        let ks = [64, 1024, 4096, 8192, 8256, 14336];
        for (m, n, k, sms) in cases(&[108, 132], 1..=24, (8..=30000).step_by(296), &ks) {
            let got = select_awq_gemm_checkpoint(m, n, k, sms, e);
            let rules = select_awq_gemm(m, n, k, sms, e);
            if got == rules {
                continue;
            }
            assert!((9..=16).contains(&m), "{m}x{n}x{k}");
            let (cfg, splits) = got;
            assert_eq!((cfg.tile, cfg.warps), ([16, 256, 64], [1, 4]));
            assert_eq!(cfg.b_vector_words, rules.0.b_vector_words);
            assert!(
                splits >= 1 && splits as usize <= k.div_ceil(64),
                "{m}x{n}x{k}: {splits}"
            );
        }
    }
}
