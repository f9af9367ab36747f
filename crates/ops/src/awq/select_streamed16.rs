//! The 16-row register-streamed rule on a wide weight (9 to 16 rows, issue 12): one 16-row
//! tile of two 64-column blocks a CTA with K = 4096 of `x` staged in one split
//! (`AwqGemmConfig::staged_k_tiles`), so each weight word is read once and its A fragment
//! multiplies both 8-row B fragments of the tile (two `mma.sync` n8 per word, the swap-AB
//! layout of `rcute_collective::awq_streamed`); the prepared op's form
//! ([`select_awq_streamed_wide16`]) and its twin on the checkpoint's words
//! ([`select_awq_streamed_checkpoint_wide16`]: the same tile, warps and ring, bit-identical
//! results). Both ops ask these rules before the SM90 wgmma kernels at 9 to 16 rows.
//!
//! The domain is the 8-row wide rule's ([`super::select::select_awq_streamed_wide`]): more
//! than one and at most two waves of 64-column blocks (`sms < ceil(N / 64) <= 2 sms`: N =
//! 11008 and 14336 on 132 SMs), whose 128-column tiles then fill more than half and at
//! most one wave of CTAs of one CTA an SM (the 128 KB stage); K in whole k16 steps and at
//! most 4096.
//!
//! ```
//! use rcute_ops::awq::select_streamed16::{select_awq_streamed_checkpoint_wide16, select_awq_streamed_wide16};
//! let f16 = rcute_atom::Element::F16;
//! let (cfg, splits) = select_awq_streamed_wide16(16, 14336, 4096, 132, f16).unwrap();
//! assert!(cfg.streamed && cfg.prepared && cfg.shared_ring && splits == 1);
//! assert_eq!((cfg.tile, cfg.warps, cfg.stages, cfg.staged_k_tiles), ([16, 128, 64], [8, 2], 4, 64));
//! let (twin, splits) = select_awq_streamed_checkpoint_wide16(16, 14336, 4096, 132, f16).unwrap();
//! assert!(twin.streamed && !twin.prepared && !twin.shared_ring && splits == 1);
//! assert_eq!((twin.tile, twin.warps, twin.stages, twin.staged_k_tiles), (cfg.tile, cfg.warps, cfg.stages, 64));
//! // 9 .. 16 rows of 11008 and 14336 columns, K up to 4096 in whole k16 steps
//! for (m, n) in [(9, 14336), (12, 11008), (16, 11008)] {
//!     assert!(select_awq_streamed_wide16(m, n, 4096, 132, f16).is_some());
//! }
//! // not 8 rows (the 8-row wide rule) or 17; not 8192 columns (one wave of 64-column
//! // blocks) or 28672 (four); not K past 4096 or inside a k16 step
//! for (m, n, k) in [(8, 14336, 4096), (17, 14336, 4096), (16, 8192, 4096), (16, 28672, 4096), (16, 14336, 4160), (16, 14336, 4088)] {
//!     assert!(select_awq_streamed_wide16(m, n, k, 132, f16).is_none(), "{m}x{n}x{k}");
//!     assert!(select_awq_streamed_checkpoint_wide16(m, n, k, 132, f16).is_none(), "{m}x{n}x{k}");
//! }
//! ```

use super::select::streamed_one_split;
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// Fewest rows of `x` the 16-row rules take (fewer: the 8-row wide rules).
pub const WIDE16_MIN_ROWS: usize = 9;

/// Most rows of `x` the 16-row rules take (one row tile).
pub const WIDE16_MAX_ROWS: usize = 16;

/// The 16-row tile of the rules on the prepared weight: 16 x 128 columns (two 64-column
/// blocks, 8 warps along K each), a shared ring of 4 steps per lane, K = 4096 staged (64
/// k-tiles: 17 staged rows of 8 KB and the 32 KB ring, one CTA an SM).
pub fn wide16_config(element: Element) -> AwqGemmConfig {
    AwqGemmConfig::new(element, [16, 128, 64], [8, 2], 4, 4)
        .streamed_shared_ring()
        .staged_k_tiles(64)
}

/// The prepared op's 16-row streamed choice (see the module docs), or `None`.
pub fn select_awq_streamed_wide16(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    wide16(wide16_config(element), (m, n, k), sms)
}

/// The unprepared op's twin of [`select_awq_streamed_wide16`] on AutoAWQ's checkpoint words
/// (the same tile, warps, ring depth and staged `x`; the ring in registers: the
/// checkpoint's 4-byte loads have no shared ring), or `None`.
pub fn select_awq_streamed_checkpoint_wide16(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    wide16(wide16_config(element).streamed_checkpoint(), (m, n, k), sms)
}

/// `cfg` in one split on the rules' domain.
fn wide16(cfg: AwqGemmConfig, (m, n, k): (usize, usize, usize), sms: usize) -> Option<(AwqGemmConfig, u32)> {
    if m < WIDE16_MIN_ROWS {
        return None;
    }
    streamed_one_split(cfg, (m, n, k), sms, WIDE16_MAX_ROWS, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wherever chosen, both rules run one split of the same tile in more than half and at
    /// most one wave of CTAs, K within the staged x, 9 to 16 rows in one row tile; and the
    /// kernels are twins (same tile, warps, ring, stage).
    #[test]
    fn wide16_runs_one_split_in_one_wave_and_the_ops_agree() {
        let e = Element::BF16;
        let mut chosen = 0;
        for sms in [108, 114, 132] {
            for m in 1..=20 {
                for n in (64..=30000).step_by(320) {
                    for k in [64, 1024, 4096, 4104, 4160, 8192] {
                        let got = select_awq_streamed_wide16(m, n, k, sms, e);
                        let twin = select_awq_streamed_checkpoint_wide16(m, n, k, sms, e);
                        assert_eq!(got.is_some(), twin.is_some(), "{m}x{n}x{k}");
                        let (Some((cfg, splits)), Some((tw, ts))) = (got, twin) else {
                            continue;
                        };
                        chosen += 1;
                        assert_eq!(
                            (cfg.tile, cfg.warps, cfg.stages, cfg.staged_k_tiles, splits),
                            (tw.tile, tw.warps, tw.stages, tw.staged_k_tiles, ts)
                        );
                        let g = rcute_kernel::awq_gemm::generate(&cfg).unwrap();
                        let (_, run) = g.split_plan(k as i32, splits as i32);
                        let lc = g.launch_config(m as i32, n as i32, run);
                        let ctas = (lc.grid.x * lc.grid.y * lc.grid.z) as usize;
                        assert!(
                            (9..=16).contains(&m) && k % 16 == 0 && run == 1 && 2 * ctas > sms && ctas <= sms,
                            "{m}x{n}x{k} on {sms}: {ctas} CTAs, {run} splits"
                        );
                    }
                }
            }
        }
        assert!(chosen > 0);
    }
}
