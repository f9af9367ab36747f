//! The prepared op's 24- and 32-row register-streamed rule on a wide weight (17 to 32 rows,
//! issue 12): the streamed tile of [`super::select_streamed16`] with three or four 8-row B
//! fragments of `x` per weight fragment, so each weight word is still read once and its A
//! fragment multiplies every 8 rows of the tile (`mma.sync` n8 per 8 rows and word, the
//! swap-AB layout of `rcute_collective::awq_streamed`). `Ops::awq_gemm_prepared` asks it
//! after the 16-row rule and before the SM90 wgmma kernels.
//!
//! The obstacle is the staged `x`: K = 4096 of 32 rows is 256 KB, past the 227 KB of
//! shared memory. So
//!
//! * **17 to 24 rows**: a 24-row tile stages K = 4096 (25 staged rows of 8 KB with the
//!   zero row, 200 KB) beside a shared ring of 2 steps (16 KB) and the group slots (10 KB):
//!   232 224 of the 232 448 bytes, one split, the weight read once;
//! * **25 to 32 rows**: a 32-row tile stages K = 2048 (33 rows of 4 KB, 133 KB; ring of 4)
//!   and K = 4096 runs in two splits summed in a `(1, 1, 2)` cluster (the clustered split-K
//!   sum by loads), each split reading its half of the weight once: 128 columns (8 warps
//!   along K x 2 along N), so only where `2 ceil(N / 128)` CTAs fill one wave (8192
//!   columns: 128 CTAs). At 14336 columns that is 224 CTAs, and the 256-column form (4 x 4
//!   warps, 112 CTAs) measured 9-11 % slower than the split-K wgmma kernel the op keeps.
//!
//! Domain: the rows of a tile of [`WIDE32_TILES`] (the first whose row range holds M), K in
//! whole k16 steps with exactly the tile's splits (K within `splits` staged ranges and
//! past `splits - 1`), and the first of its column choices whose `ceil(N / columns) x
//! splits` CTAs fill more than three quarters and at most one wave of the SMs (one CTA an
//! SM: the staged `x`). On 132 SMs: 17 to 24 rows at N = 12680 to 16896 (128 columns) and
//! 6344 to 8448 (64 columns); 25 to 32 rows at N = 6344 to 8448.
//!
//! Measured (helper awq32, H100, `rcute bench awq --group 128 --iters 10 --config
//! prepared-auto`, random data, K = 4096, cuBLAS fp16 in the same rows; BENCHMARKS.md,
//! session 25): µs of the prepared op, main `9ba4a24` (before: the split-K wgmma kernel)
//! against this rule, `before, after, after, before` in one call (the 32-row tile at 14336
//! in call 1 only, then taken out of the rule; 28 x 8192 in call 2):
//!
//! | M x N | before | after | after | before | cuBLAS |
//! |---|---|---|---|---|---|
//! | 17 x 14336 | 21.77 | **20.16** | **19.69** | 21.32 | 44.5-45.9 |
//! | 24 x 14336 | 21.70 | **20.53** | **20.54** | 21.91 | 45.3-45.8 |
//! | 24 x 8192 | 16.63 | **15.11** | **13.70** | 16.84 | 24.9-26.2 |
//! | 28 x 8192 | 17.02 | **16.40** | **16.40** | 17.22 | 24.8-25.3 |
//! | 32 x 8192 | 17.94 | **16.93** | **16.92** | 17.96 | 24.9-25.1 |
//! | 32 x 14336 (call 1: 32x256, 4x4) | 22.71 | 25.12 | 24.96 | 22.93 | 41.7-41.9 |
//!
//! ```
//! use rcute_ops::awq::select_streamed32::select_awq_streamed_wide32;
//! let f16 = rcute_atom::Element::F16;
//! // 24 rows of 14336: 112 CTAs of 128 columns, one split
//! let (cfg, splits) = select_awq_streamed_wide32(24, 14336, 4096, 132, f16).unwrap();
//! assert_eq!((cfg.tile, cfg.warps, cfg.stages, cfg.staged_k_tiles, splits), ([24, 128, 64], [8, 2], 2, 64, 1));
//! // 32 rows of 8192: 64 tiles of 128 columns in two splits
//! let (cfg, splits) = select_awq_streamed_wide32(28, 8192, 4096, 132, f16).unwrap();
//! assert_eq!((cfg.tile, cfg.warps, splits), ([32, 128, 64], [8, 2], 2));
//! // not 16 or 33 rows, 25 to 32 rows of 14336 (measured slower), 11008 or 4096 columns, K past
//! // 4096 or (32 rows) within one split
//! for (m, n, k) in [(16, 14336, 4096), (33, 14336, 4096), (25, 14336, 4096), (32, 14336, 4096), (24, 11008, 4096), (32, 4096, 4096), (24, 14336, 4160), (32, 8192, 2048), (32, 8192, 4088)] {
//!     assert!(select_awq_streamed_wide32(m, n, k, 132, f16).is_none(), "{m}x{n}x{k}");
//! }
//! ```

use super::select::staged_k;
use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;

/// One tile of the rule: the rows it takes, its shared ring, staged k-tiles of `x` per
/// split and splits, and its column choices (columns a CTA, warps along K x N), widest
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wide32Tile {
    /// Rows of `x` of the tile (`BM`).
    pub rows: i64,
    /// Fewest rows of `x` the rule gives this tile.
    pub min_rows: usize,
    /// k16 steps in flight per warp (the lanes' shared ring).
    pub ring: usize,
    /// 64-row k-tiles of `x` staged per split.
    pub staged_k_tiles: i64,
    /// K splits (2: a `(1, 1, 2)` cluster on sm_90).
    pub splits: u32,
    /// Columns a CTA and warps along K x N, widest first.
    pub columns: &'static [(i64, [i64; 2])],
}

/// The rule's tiles (see the module docs): 24 rows in one split of K = 4096 staged, 32
/// rows in two splits of K = 2048 staged.
pub const WIDE32_TILES: [Wide32Tile; 2] = [
    Wide32Tile {
        rows: 24,
        min_rows: 17,
        ring: 2,
        staged_k_tiles: 64,
        splits: 1,
        columns: &[(128, [8, 2]), (64, [16, 1])],
    },
    Wide32Tile {
        rows: 32,
        min_rows: 25,
        ring: 4,
        staged_k_tiles: 32,
        splits: 2,
        columns: &[(128, [8, 2])],
    },
];

/// The configuration of `tile` at `columns` columns a CTA with `warps` (the shared ring,
/// the staged `x`).
pub fn wide32_config(element: Element, tile: &Wide32Tile, columns: i64, warps: [i64; 2]) -> AwqGemmConfig {
    AwqGemmConfig::new(element, [tile.rows, columns, 64], warps, tile.ring, 4)
        .streamed_shared_ring()
        .staged_k_tiles(tile.staged_k_tiles)
}

/// The prepared op's 24- / 32-row streamed choice on `sms` SMs (see the module docs), or
/// `None`.
pub fn select_awq_streamed_wide32(
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    element: Element,
) -> Option<(AwqGemmConfig, u32)> {
    let tile = WIDE32_TILES
        .iter()
        .find(|t| (t.min_rows..=t.rows as usize).contains(&m))?;
    if !k.is_multiple_of(16) {
        return None;
    }
    let splits = tile.splits as usize;
    tile.columns.iter().find_map(|&(columns, warps)| {
        let cfg = wide32_config(element, tile, columns, warps);
        let ctas = n.div_ceil(columns as usize) * splits;
        let fills = 4 * ctas > 3 * sms && ctas <= sms;
        let cap = staged_k(&cfg);
        let k_fits = k <= splits * cap && k > (splits - 1) * cap;
        (fills && k_fits).then_some((cfg, tile.splits))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq::rule_launch::{cases, choices};

    /// Wherever chosen, the rule runs its tile's splits (exactly) in more than three
    /// quarters and at most one wave of CTAs, M within one row tile of 17 to 32 rows.
    #[test]
    fn wide32_runs_its_splits_in_most_of_one_wave() {
        let e = Element::F16;
        let ks = [64, 2048, 2064, 4096, 4160];
        let shapes = cases(&[108, 114, 132], 1..=40, (64..=30000).step_by(448), &ks);
        let select = |m, n, k, sms| select_awq_streamed_wide32(m, n, k, sms, e);
        for ((m, n, k, sms), cfg, splits, (run, ctas)) in choices(shapes, select) {
            assert!(
                (17..=32).contains(&m)
                    && m <= cfg.tile[0] as usize
                    && run == splits as i32
                    && ctas == n.div_ceil(cfg.tile[1] as usize) * splits as usize
                    && 4 * ctas > 3 * sms
                    && ctas <= sms,
                "{m}x{n}x{k} on {sms}: {ctas} CTAs, {run} splits"
            );
        }
    }

    /// The rule's kernels (f16, bf16) are catalogue units.
    #[test]
    fn wide32_kernels_are_in_the_catalogue() {
        let units = rcute_kernel::catalogue::awq_streamed_configs();
        for e in [Element::F16, Element::BF16] {
            for tile in &WIDE32_TILES {
                for &(columns, warps) in tile.columns {
                    assert!(
                        units.contains(&wide32_config(e, tile, columns, warps)),
                        "{e} {} x {columns}",
                        tile.rows
                    );
                }
            }
        }
    }
}
