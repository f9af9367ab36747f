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
