//! The prepared op's 16-row register-streamed rule on a wide weight (9 to 16 rows, issue
//! 12): one 16-row tile of two 64-column blocks a CTA (one block at 8192 columns) with K =
//! 4096 of `x` staged in one split (`AwqGemmConfig::staged_k_tiles`), so each weight word is read once and its A
//! fragment multiplies both 8-row B fragments of the tile (two `mma.sync` n8 per word, the
//! swap-AB layout of `rcute_collective::awq_streamed`). `Ops::awq_gemm_prepared` asks it
//! before the SM90 wgmma kernels.
//!
//! Domain: 9 to 16 rows; K in whole k16 steps and at most 4096; the first tile of
//! [`WIDE16_TILES`] whose grid of `ceil(N / columns)` CTAs (one an SM: the 128 KB stage)
//! fills more than three quarters and at most one wave of the SMs. On 132 SMs: 16 x 128
//! columns at N = 12680 to 16896 (14336: 112 CTAs), 16 x 64 columns (16 warps along K) at
//! N = 6344 to 8448 (8192: 128 CTAs); not between (11008: 86 CTAs of 128 columns, measured
//! slower than the split-K wgmma kernel, or 172 of 64), below 6344 or above 16896.
//!
//! Measured (helper awq16, H100, `rcute bench awq --group 128 --iters 10 --config
//! prepared-auto`, random data, K = 4096, cuBLAS fp16 in the same rows; BENCHMARKS.md,
//! session 23, call 2): µs of the prepared op, main `460f0f0` (before: the split-K wgmma
//! kernel `16x256, 2x1`, 2 splits) against this rule, `before, after, after, before` in one
//! call (cuBLAS 44.5-47.1 µs at 14336, 32.2-34.3 at 11008):
//!
//! | M x N | before | after | after | before |
//! |---|---|---|---|---|
//! | 9 x 14336 | 22.32 | **17.85** | **17.89** | 20.18 |
//! | 12 x 14336 | 20.36 | **17.80** | **18.21** | 20.42 |
//! | 16 x 14336 | 21.05 | **18.41** | **18.78** | 21.02 |
//! | 8 x 14336 (control) | 15.98 | 15.76 | 15.86 | 15.98 |
//! | 16 x 11008 (control) | 16.84 | 16.94 | 16.67 | 16.72 |
//!
//! Call 1 (same GPU kind, the rule then also at 11008): 16 x 11008 took 17.81 / 17.84 µs
//! with this tile against 16.71 / 16.82 (86 CTAs: a third of the SMs idle), so not taken
//! there; at 16 x 14336 the forced forms a shared ring of 2 18.65 / 18.51, of 6 19.23, a
//! register ring of 2 18.64, 12 warps along K 18.94, all within 2 % of the ring of 4; the
//! 16x128 tile in two splits of the default stage (224 CTAs, cluster sum) 24.75. The
//! checkpoint twin of the tile (`streamed-checkpoint:16x128,8x2,R,1,x64`, rings of 4 and 2
//! in registers, bit-identical results) took 20.9-22.6 µs at 9 to 16 x 14336 (21.3 at 16 x
//! 11008) against 20.2-21.3 (one run 23.0) for the unprepared op's split-K wgmma kernel on
//! the checkpoint's words (17.0-17.2 at 16 x 11008): `Ops::awq_gemm` keeps that kernel
//! (unprepared / prepared 1.12-1.18x with this rule in call 2).
//!
//! The 64-column tile (helper awq8k, H100, the same bench, one call, BENCHMARKS.md session
//! 23): µs of the prepared op, main `460f0f0` (before: the split-K wgmma kernel) against
//! this rule, `before, after, after, before` (cuBLAS fp16 24.5-24.8 µs at 8192):
//!
//! | M x N | before | after | after | before |
//! |---|---|---|---|---|
//! | 9 x 8192 | 13.67 | **11.26** | **11.24** | 13.60 |
//! | 12 x 8192 | 13.88 | **11.66** | **11.70** | 14.00 |
//! | 16 x 8192 | 14.67 | **12.21** | **12.19** | 14.60 |
//! | 8 x 8192 (control) | 10.74 | 10.79 | 10.76 | 10.71 |
//! | 16 x 4096 (control) | 9.28 | 9.29 | 9.29 | 9.28 |
//!
//! Its checkpoint twin (`streamed-checkpoint:16x64,16x1,4,1,x64`, bit-identical results)
//! took 13.58-14.44 µs at 9 to 16 x 8192 against 14.18-15.42 for the unprepared op's
//! split-K wgmma kernel in the same rounds (2.5-6.4 % faster; at 12 rows 3.9 % and 2.5 %):
//! under the 3 % in both rounds that a new default needs, so `Ops::awq_gemm` keeps that
//! kernel (unprepared / prepared 1.22-1.26x at 9 to 16 x 8192 with this rule).
//!
//! ```
//! use rcute_ops::awq::select_streamed16::select_awq_streamed_wide16;
//! let f16 = rcute_atom::Element::F16;
//! let (cfg, splits) = select_awq_streamed_wide16(16, 14336, 4096, 132, f16).unwrap();
//! assert!(cfg.streamed && cfg.prepared && cfg.shared_ring && splits == 1);
//! assert_eq!((cfg.tile, cfg.warps, cfg.stages, cfg.staged_k_tiles), ([16, 128, 64], [8, 2], 4, 64));
//! assert!(select_awq_streamed_wide16(9, 14336, 2048, 132, f16).is_some());
//! // 8192 columns: the 64-column tile, 16 warps along K (128 CTAs)
//! let (cfg, splits) = select_awq_streamed_wide16(12, 8192, 4096, 132, f16).unwrap();
//! assert_eq!((cfg.tile, cfg.warps, cfg.stages, cfg.staged_k_tiles, splits), ([16, 64, 64], [16, 1], 4, 64, 1));
//! // not 8 rows (the 8-row wide rule) or 17; not 11008 columns (86 CTAs of 128, 172 of 64),
//! // 4096 (64 of 64) or 28672 (224 of 128); not K past 4096 or inside a k16 step
//! for (m, n, k) in [(8, 14336, 4096), (17, 14336, 4096), (16, 11008, 4096), (16, 4096, 4096), (8, 8192, 4096), (16, 28672, 4096), (16, 14336, 4160), (16, 8192, 4160), (16, 14336, 4088)] {
//!     assert!(select_awq_streamed_wide16(m, n, k, 132, f16).is_none(), "{m}x{n}x{k}");
//! }
//! ```

use super::select::staged_k;
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// Fewest rows of `x` the rule takes (fewer: the 8-row streamed rules).
pub const WIDE16_MIN_ROWS: usize = 9;

/// Most rows of `x` the rule takes (one row tile).
pub const WIDE16_MAX_ROWS: usize = 16;

/// The rule's tiles, widest first: columns a CTA and warps along K x N. Each stages K =
/// 4096 of `x` (64 k-tiles: 17 staged rows of 8 KB and the 32 KB lane ring, one CTA an SM)
/// and reads each weight word once in one split; the rule takes the first whose
/// `ceil(N / columns)` CTAs fill more than 3/4 and at most one wave.
pub const WIDE16_TILES: [(i64, [i64; 2]); 2] = [(128, [8, 2]), (64, [16, 1])];

/// The rule's tile of `columns` (128: two 64-column blocks, 8 warps along K each; 64: one
/// block, 16 warps along K): 16 rows, a shared ring of 4 steps per lane, K = 4096 staged.
pub fn wide16_config(element: Element, columns: i64) -> AwqGemmConfig {
    let warps = WIDE16_TILES
        .iter()
        .find_map(|&(c, w)| (c == columns).then_some(w))
        .unwrap_or([8, 2]);
    AwqGemmConfig::new(element, [16, columns, 64], warps, 4, 4)
        .streamed_shared_ring()
        .staged_k_tiles(64)
}

/// The prepared op's 16-row streamed choice on `sms` SMs (see the module docs): the first
/// tile of [`WIDE16_TILES`] (as [`wide16_config`]) whose grid fills more than three quarters
/// and at most one wave, in one split, or `None`.
pub fn select_awq_streamed_wide16(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    if !(WIDE16_MIN_ROWS..=WIDE16_MAX_ROWS).contains(&m) || !k.is_multiple_of(16) {
        return None;
    }
    WIDE16_TILES.iter().find_map(|&(columns, _)| {
        let cfg = wide16_config(element, columns);
        let ctas = n.div_ceil(columns as usize);
        let fills = 4 * ctas > 3 * sms && ctas <= sms;
        (fills && k <= staged_k(&cfg)).then_some((cfg, 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq::rule_launch::{cases, choices};

    /// Wherever chosen, the rule runs one split of its tile in more than three quarters and
    /// at most one wave of CTAs, K within the staged x, 9 to 16 rows in one row tile.
    #[test]
    fn wide16_runs_one_split_in_most_of_one_wave() {
        let e = Element::BF16;
        let ks = [64, 1024, 4096, 4104, 4160, 8192];
        let shapes = cases(&[108, 114, 132], 1..=20, (64..=30000).step_by(320), &ks);
        let select = |m, n, k, sms| select_awq_streamed_wide16(m, n, k, sms, e);
        for ((m, n, k, sms), _, _, (run, ctas)) in choices(shapes, select) {
            assert!(
                (9..=16).contains(&m) && k % 16 == 0 && run == 1 && 4 * ctas > 3 * sms && ctas <= sms,
                "{m}x{n}x{k} on {sms}: {ctas} CTAs, {run} splits"
            );
        }
    }

    /// The rule's kernels (f16, bf16) are catalogue units.
    #[test]
    fn wide16_kernels_are_in_the_catalogue() {
        let units = rcute_kernel::catalogue::awq_streamed_configs();
        for e in [Element::F16, Element::BF16] {
            for (columns, _) in WIDE16_TILES {
                assert!(units.contains(&wide16_config(e, columns)), "{e} {columns}");
            }
        }
    }
}
