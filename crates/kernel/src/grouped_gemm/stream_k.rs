//! Stream-K for the scatter grouped GEMM (GEMM2 of the MoE layer) at decode, where its
//! tile grid is smaller than the GPU: DeepSeek-V2-Lite at T = 1 has 6 row tiles x 16
//! column tiles = 96 tiles of 22 k-tiles for 132 SMs, so a CTA per tile leaves 36 SMs
//! idle and a K split per tile spills into a second wave.
//!
//! The grid has a fixed number of CTAs ([`super::GroupedGemmArgs::stream_ctas`], the
//! SMs). On the device, after the wait for its predecessor, each CTA reads this
//! routing's row tiles (`total_rows / BM`) and cuts the *work*, every (row tile, column
//! tile, k-tile) in that order (k fastest, then row tiles, so the tiles of one column
//! block follow each other), into `gridDim.x` ranges of `per` consecutive k-tiles
//! ([`per_cta`]). A CTA walks its range as *segments*, the runs of its k-tiles inside one
//! tile: for each, the SM80 mainloop over the segment's K range, then the scatter
//! epilogue into K-split slab `blockIdx.x - first CTA of the tile`. `per` is at least
//! `ceil(k_tiles / (slabs - 1))`, so no tile has more than `slabs` segments
//! ([`segments`]); the CTA of a tile's last segment writes zeros to the tile's slabs past
//! it. The finalize then sums every entry's `slabs` slabs in their fixed order, as for
//! K splits: two runs are bit-identical (which CTA computes a segment never changes the
//! sum's order), nothing waits for the host, and a graph replays with new routing.
//!
//! DeepSeek-V2-Lite T = 1 on 132 SMs: 96 x 22 = 2112 k-tiles, 16 per CTA (the busiest SM
//! streams 16 k-tiles of 16 KiB instead of 22), at most 3 segments a tile (3 slabs). On an
//! H100 that layer is nevertheless 3 us slower than on the tile grid (BENCHMARKS.md,
//! session 13, helper moedec2): with every SM pulling, each pulls slower; the aggregate
//! read rate, not the idle SMs, bounds GEMM2 there.
//!
//! ```
//! use rcute_kernel::grouped_gemm::stream_k::{per_cta, segments};
//! // DeepSeek-V2-Lite GEMM2 at T = 1: 96 tiles of 22 k-tiles, 132 CTAs, 3 slabs
//! assert_eq!(per_cta(96 * 22, 22, 132, 3), 16);
//! assert!((0..96).all(|t| segments(t, 22, 16).1 <= 3));
//! // one row tile (expert slices): the slabs bound the segments, not the grid
//! assert_eq!(per_cta(16 * 22, 22, 132, 3), 11);
//! ```

use super::stmt::{d, dc, if_};
use super::GroupedGemmConfig;
use crate::emit::Stmt;

/// The k-tiles of each CTA's range: `max(ceil(work / ctas), ceil(k_tiles / (slabs -
/// 1)))` (host mirror of the kernel's `per`; `slabs >= 2`).
pub fn per_cta(work: i64, k_tiles: i64, ctas: i64, slabs: i64) -> i64 {
    let even = (work + ctas.max(1) - 1) / ctas.max(1);
    let bound = (k_tiles + slabs.max(2) - 2) / (slabs.max(2) - 1);
    even.max(bound).max(1)
}

/// The first CTA of tile `tile` and its segment count, for ranges of `per` k-tiles.
pub fn segments(tile: i64, k_tiles: i64, per: i64) -> (i64, i64) {
    let first = tile * k_tiles / per;
    let last = (tile * k_tiles + k_tiles - 1) / per;
    (first, last - first + 1)
}

/// The statements before the segment loop (after the thread indices): the work and the
/// CTA's range `[w_begin, w_end)`.
/// `load` reads the device scalar (`__ldg` after the wait, `__ldcg` before it).
pub(super) fn setup(cfg: &GroupedGemmConfig, load: &str) -> Vec<Stmt> {
    let [bm, _, bk] = cfg.tile;
    let bn = cfg.tile_n_out();
    vec![
        Stmt::Comment(
            "stream-K: this routing's (row tile, column tile, k-tile) work, k fastest, in gridDim.x equal ranges"
                .into(),
        ),
        dc(
            "const int",
            "tiles_m",
            format!("{load}(total_rows) / {bm}"),
            "row tiles of this routing",
        ),
        d("const int", "tiles_n", format!("(N + {}) / {bn}", bn - 1)),
        d("const int", "k_tiles", format!("(K + {}) / {bk}", bk - 1)),
        d("const long long", "work", "(long long)tiles_m * tiles_n * k_tiles"),
        dc(
            "const long long",
            "per",
            "max((work + gridDim.x - 1) / gridDim.x, (long long)((k_tiles + slabs - 2) / (slabs - 1)))",
            "at least ceil(k_tiles / (slabs - 1)): a tile has at most `slabs` segments",
        ),
        d("const long long", "w_begin", "min(work, (long long)blockIdx.x * per)"),
        d("const long long", "w_end", "min(work, w_begin + per)"),
    ]
}

/// The head of one segment: its tile, K range, expert and slab (the names the mainloop
/// needs, as [`super::kernel`]'s CTA setup declares them for a tile grid).
pub(super) fn segment(cfg: &GroupedGemmConfig) -> Vec<Stmt> {
    let [bm, _, bk] = cfg.tile;
    let mut v = vec![
        dc(
            "const long long",
            "tile",
            "w / k_tiles",
            "tile = tile_m + tiles_m * tile_n",
        ),
        d("const int", "kt0", "(int)(w % k_tiles)"),
        d("const int", "kt1", "(int)min((long long)k_tiles, kt0 + (w_end - w))"),
        Stmt::assign("w", "w + (kt1 - kt0)"),
        d("const int", "tile_m", "(int)(tile % tiles_m)"),
        d("const int", "tile_n", "(int)(tile / tiles_m)"),
        d("const int", "m0", format!("tile_m * {bm}")),
    ];
    v.extend(super::tile::tile_expert(cfg, Stmt::Continue));
    v.extend([
        dc(
            "const int",
            "first",
            "(int)(tile * k_tiles / per)",
            "the CTA of the tile's first segment",
        ),
        d("const int", "last", "(int)((tile * k_tiles + k_tiles - 1) / per)"),
        dc(
            "const int",
            "split",
            "(int)blockIdx.x - first",
            "the slab of this segment",
        ),
        d("const int", "k_begin", format!("kt0 * {bk}")),
        d("const int", "k_end", format!("min(K, kt1 * {bk})")),
        d("int", "k_tile_count", "kt1 - kt0"),
    ]);
    v.extend(super::tile::operands(cfg));
    v
}

/// After the epilogue: the CTA of the tile's last segment zeroes the tile's rows in the
/// slabs past it, so the finalize's sum over all slabs adds nothing there (a zero bit
/// pattern is +0 in bf16 and f16; column pairs, as the epilogue stores them).
pub(super) fn zero_unused_slabs(cfg: &GroupedGemmConfig, threads: i64) -> Stmt {
    let [bm, _, _] = cfg.tile;
    let pairs = cfg.tile_n_out() / 2;
    let per_slab = bm * pairs;
    if_(
        "(int)blockIdx.x == last",
        vec![Stmt::Loop {
            init: "int i = tid".into(),
            cond: format!("i < (slabs - 1 - split) * {per_slab}"),
            step: format!("i += {threads}"),
            body: vec![
                dc(
                    "const int",
                    "s",
                    format!("split + 1 + i / {per_slab}"),
                    format!("i = (slab past the last segment, row, column pair): (slabs - 1 - split, {bm}, {pairs}):({per_slab}, {pairs}, 1)"),
                ),
                d("const int", "r", format!("(i / {pairs}) % {bm}")),
                d("const int", "n", format!("n0 + 2 * (i % {pairs})")),
                d("const int", "m", "m0 + r"),
                d("const int", "entry", "m < M ? __ldg(sorted_ids + m) : entries"),
                if_(
                    "entry < entries && n < N",
                    vec![Stmt::assign(
                        "*reinterpret_cast<unsigned*>(D + s * split_stride + (long long)entry * ldd + n)",
                        "0u",
                    )],
                ),
            ],
        }],
    )
}

/// The prelude's view of a stream-K CTA (before the wait, from the alignment two links
/// back, read around the L1; hints only): the tile and K range of its first segment, at
/// most `prefetch_k_tiles` k-tiles, in the names the prefetch loop reads (`expert`, `n0`,
/// `k_begin`, `k_end`).
pub(super) fn prelude_segment(cfg: &GroupedGemmConfig) -> Vec<Stmt> {
    let bk = cfg.tile[2];
    let mut v = setup(cfg, "__ldcg");
    v.extend([
        d("int", "expert", "-1"),
        d("int", "n0", "0"),
        d("int", "k_begin", "0"),
        d("int", "k_end", "0"),
        Stmt::Comment(
            "a total read before the wait may be stale: the tile's expert is read only inside the capacity M".into(),
        ),
        if_(
            format!("w_begin < w_end && tiles_m <= M / {}", cfg.tile[0]),
            vec![
                dc(
                    "const long long",
                    "tile",
                    "w_begin / k_tiles",
                    "tile = tile_m + tiles_m * tile_n",
                ),
                d("const int", "kt0", "(int)(w_begin % k_tiles)"),
                d(
                    "const int",
                    "kt1",
                    "(int)min((long long)k_tiles, kt0 + min(w_end - w_begin, (long long)prefetch_k_tiles))",
                ),
                Stmt::assign("expert", "__ldcg(block_expert + (int)(tile % tiles_m))"),
                Stmt::assign("n0", format!("(int)(tile / tiles_m) * {}", cfg.tile_n_out())),
                Stmt::assign("k_begin", format!("kt0 * {bk}")),
                Stmt::assign("k_end", format!("min(K, kt1 * {bk})")),
            ],
        ),
    ]);
    v
}
