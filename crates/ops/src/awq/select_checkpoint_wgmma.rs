//! The unprepared op's split-K SM90 mixed-input kernel on AutoAWQ's checkpoint words
//! ([`select_awq_wgmma_checkpoint`]; `AwqGemmConfig::wgmma_checkpoint`,
//! `rcute_collective::awq_wgmma_checkpoint`): at 9 to 16 rows of a wide weight the prepared
//! op wins with the split-K wgmma kernel (`super::select_split`), and this is the same
//! kernel reading the checkpoint's `qweight` as it is (TMA boxes of the row-major words,
//! two byte permutations per lane and word pair), so the unprepared op runs within a few
//! percent of it instead of the fused `cp.async` kernel or the one-wave streamed kernel.

use super::select::{wgmma_fits, DENSE_WIDE_N};
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// Fewest rows of `x` that [`select_awq_wgmma_checkpoint`] takes.
pub const WGMMA_CHECKPOINT_MIN_ROWS: usize = 9;

/// Most rows of `x` that [`select_awq_wgmma_checkpoint`] takes (one 16-token tile).
pub const WGMMA_CHECKPOINT_MAX_ROWS: usize = 16;

/// The split-K wgmma kernel on the checkpoint's words for the unprepared op on sm_90, or
/// `None`: at [`WGMMA_CHECKPOINT_MIN_ROWS`] to [`WGMMA_CHECKPOINT_MAX_ROWS`] rows of a
/// weight of at least `DENSE_WIDE_N` (8192) columns (N a multiple of 64, K of 16), the
/// prepared op's 16-token tile (two consumer warpgroups splitting the words, 8 stages) with
/// `splits = SMs / tiles` (at most one wave of CTAs; at most the k-tiles), taken where that
/// is at least 2 (N up to 16896 on 132 SMs). The caller checks that `x` and `qweight` fit
/// the kernel's TMA maps.
///
/// Measured (helper awqckw, **H200** (132 SMs, 700 W), `rcute bench awq --shape MxNx4096
/// --group 128 --iters 10 --config prepared-auto`, random data, weights rotated over >= 150
/// MB, CUDA graphs of 10 calls, median of 10; main `5b85ae0` (`before`) against this rule
/// (`after`) in one call, order before, after, after, before; BENCHMARKS.md, session 22),
/// µs of the unprepared op (`auto`) in the two `after` / two `before` runs, and
/// unprepared / prepared in the same process (the prepared op runs this kernel's prepared
/// twin, `super::select_split`):
///
/// | M x N | after (µs) | before (µs) | after: unprepared / prepared | before | cuBLAS |
/// |---|---|---|---|---|---|
/// | 9 x 8192 | 13.87 / 13.94 | 16.34 / 16.36 | 1.03-1.04x | 1.21x | 18.4-18.6 |
/// | 12 x 8192 | 14.24 / 14.21 | 16.54 / 16.79 | 1.03x | 1.19-1.20x | 18.3-18.4 |
/// | 16 x 8192 | 14.74 / 14.78 | 17.05 / 16.90 | 1.02x | 1.17-1.19x | 18.2-18.4 |
/// | 9 x 11008 | 16.17 / 16.21 | 19.69 / 19.78 | 1.00-1.02x | 1.24x | 25.3-25.5 |
/// | 12 x 11008 | 16.48 / 16.43 | 20.45 / 20.45 | 1.01-1.02x | 1.25-1.26x | 25.4-25.8 |
/// | 16 x 11008 | 16.94 / 16.84 | 21.88 / 21.96 | 1.01x | 1.30-1.31x | 25.3-25.7 |
/// | 9 x 14336 | 20.36 / 20.44 | 23.21 / 23.32 | 0.99-1.00x | 1.13x | 29.8-30.1 |
/// | 12 x 14336 | 20.73 / 20.60 | 23.77 / 23.79 | 1.00x | 1.14-1.15x | 29.9-30.3 |
/// | 16 x 14336 | 21.17 / 21.07 | 24.55 / 24.32 | 0.99x | 1.15-1.16x | 30.1-30.3 |
///
/// (before: the one-wave streamed kernel at 8192 columns, the fused kernel at 11008 and
/// 14336.) Other splits at 16 x 11008 (forced, the same call): 2 splits 20.68 µs, 4 (more
/// than one wave) 24.70, 6 stages and 3 splits 17.04 against 17.07 for the rule's 8
/// stages. Not taken at 28672 columns (one split): there the one-split kernel
/// (`wgmma-checkpoint:16x256,2x1,8,1`) measured 32.08 / 32.22 µs at 9 / 16 rows against
/// the op's 37.92 / 39.89 (the fused kernel) and the prepared op's 33.93 / 34.37, once
/// each and without its GPU test and sanitizer runs: a candidate for the next session.
///
/// ```
/// use rcute_ops::awq::select_checkpoint_wgmma::select_awq_wgmma_checkpoint;
/// let (h, f16) = ((9, 0), rcute_atom::Element::F16);
/// let pick = |m, n| select_awq_wgmma_checkpoint(m, n, 4096, 132, h, f16).map(|(c, s)| (c.tile, c.warps, c.stages, s));
/// let t = [16, 256, 64];
/// assert_eq!((pick(9, 8192), pick(16, 11008), pick(12, 14336)), (Some((t, [2, 1], 8, 4)), Some((t, [2, 1], 8, 3)), Some((t, [2, 1], 8, 2))));
/// let (cfg, _) = select_awq_wgmma_checkpoint(16, 11008, 4096, 132, h, f16).unwrap();
/// assert!(cfg.wgmma && cfg.split_k && !cfg.prepared && cfg.b_vector_words == 1);
/// // 8 and 17 rows, a narrower weight, one split (28672 columns), N inside a 64-column
/// // block, K inside a k16 step, not sm_90: other rules
/// assert_eq!((pick(8, 11008), pick(17, 11008), pick(16, 4096), pick(16, 28672)), (None, None, None, None));
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
    if !(WGMMA_CHECKPOINT_MIN_ROWS..=WGMMA_CHECKPOINT_MAX_ROWS).contains(&m)
        || n < DENSE_WIDE_N
        || !wgmma_fits(n, k, cc)
    {
        return None;
    }
    let splits = (sms / n.div_ceil(256)).min(k.div_ceil(64));
    if splits < 2 {
        return None;
    }
    let cfg = AwqGemmConfig::new(element, [16, 256, 64], [2, 1], 8, 4)
        .wgmma_checkpoint()
        .split_k();
    Some((cfg, splits as u32))
}
