//! The grouped kernel: its parameters, the CTA setup (row tile, expert and the exit past
//! the routed rows, all read on the device), the row gathers of A and B, the SM80
//! mainloop of [`crate::gemm_sm80`] and the epilogue of [`super::epilogue`].

use super::epilogue::epilogue;
use super::stmt::{d, dc, if_};
use super::stream_k;
use super::tile;
use super::{GroupedA, GroupedEpilogue, GroupedGemmConfig};
use crate::emit::{Function as CFunction, Stmt};
use crate::gemm_sm80::{mainloop_stmts, G2sMode, G2sRows, MainloopEmit};
use rcute_collective::Sm80Mainloop;

/// The shared-memory carve-up and the thread's indices (the part of the CTA setup that
/// does not depend on the tile).
fn cta_threads(cfg: &GroupedGemmConfig, p: &Sm80Mainloop) -> Vec<Stmt> {
    let ta = cfg.element.cuda_type();
    let [bm, bn, bk] = cfg.tile;
    let [wm, _] = cfg.warps;
    let stages = p.stages;
    vec![
        Stmt::Comment(format!(
            "Shared memory: sA {} | sB {}",
            p.smem_layout_a, p.smem_layout_b
        )),
        Stmt::Expr("extern __shared__ __align__(128) unsigned char rc_smem[]".into()),
        dc(
            &format!("{ta}* const"),
            "sA",
            format!("reinterpret_cast<{ta}*>(rc_smem)"),
            format!("(BM,BK,PIPE) = ({bm},{bk},{stages})"),
        ),
        dc(
            &format!("{ta}* const"),
            "sB",
            format!("sA + {}", p.stage_elems_a * stages as i64),
            format!("(BN,BK,PIPE) = ({bn},{bk},{stages})"),
        ),
        d("const int", "tid", "threadIdx.x"),
        dc(
            "const int",
            "lane",
            "tid % 32",
            "thr_layout_vmnk = 32 x (WM,WN,1): thread = lane + 32 * (warp_m + WM * warp_n)",
        ),
        d("const int", "warp_m", format!("(tid / 32) % {wm}")),
        d("const int", "warp_n", format!("(tid / 32) / {wm}")),
    ]
}

/// The CTA setup: the names [`MainloopEmit::cta`] requires, from the device-resident
/// alignment (`total_rows`, `block_expert`), or with `route` (the statements of
/// [`super::route::cta_route`]) from the CTA's own routing.
fn cta_tile(cfg: &GroupedGemmConfig, route: Option<Vec<Stmt>>) -> Vec<Stmt> {
    let [bm, _, bk] = cfg.tile;
    let mut v = vec![
        dc(
            "const int",
            "tile_m",
            "blockIdx.x",
            "row tile: fastest, so the tiles of one expert share its B tile in L2",
        ),
        d("const int", "tile_n", "blockIdx.y"),
        d("const int", "m0", format!("tile_m * {bm}")),
    ];
    match route {
        Some(route) => {
            v.extend(route);
            v.push(dc(
                "const int",
                "n0",
                format!("tile_n * {}", cfg.tile_n_out()),
                "first output column of this tile",
            ));
        }
        None => {
            v.extend([
                Stmt::Comment(
                    "the grid covers the most padded rows any routing gives; tiles past this routing's rows exit"
                        .into(),
                ),
                if_("m0 >= __ldg(total_rows)", vec![Stmt::Return]),
            ]);
            v.extend(tile::tile_expert(cfg, Stmt::Return));
        }
    }
    v.extend(tile::split_k_range());
    v.extend([d(
        "int",
        "k_tile_count",
        format!("k_end > k_begin ? (k_end - k_begin + {}) / {bk} : 0", bk - 1),
    )]);
    v.extend(tile::operands(cfg));
    v
}

/// The row maps of the load stage ([`G2sRows`]).
pub(super) fn rows(cfg: &GroupedGemmConfig) -> G2sRows {
    let a = match cfg.a {
        GroupedA::Rows => None,
        GroupedA::Gathered => {
            // The row's routed entry: from the CTA's own routing, or the alignment's order.
            let (mut v, entry, whose) = if cfg.route.is_some() {
                (vec![], "rt_rows[r]", " (the CTA's routing)")
            } else {
                let m = d("const int", "m", "m0 + r");
                (vec![m], "m < M ? __ldg(sorted_ids + m) : entries", "")
            };
            v.extend([
                dc(
                    "const int",
                    "entry",
                    entry,
                    format!("the routed (token, j) entry t * topk + j of this row{whose}; `entries` in padding rows"),
                ),
                d("const bool", "src_ok", "entry < entries"),
                dc("const int", "src_row", "entry / topk", "its token"),
            ]);
            Some(v)
        }
    };
    let b = match cfg.epilogue {
        GroupedEpilogue::Scatter => None,
        GroupedEpilogue::SwiGlu => {
            let half = cfg.tile[1] / 2;
            Some(vec![
                dc(
                    "const int",
                    "col",
                    format!("n0 + r % {half}"),
                    "the output column of this B row",
                ),
                dc(
                    "const bool",
                    "gate",
                    format!("r < {half}"),
                    format!("tile rows 0..{half} load gate rows, {half}..{} up rows", 2 * half),
                ),
                dc(
                    "const int",
                    "src_row",
                    "(gate != (up_first != 0) ? 0 : N) + col",
                    "w13 holds the gate rows at 0..N and the up rows at N..2N, or the reverse when up_first",
                ),
                d("const bool", "src_ok", "col < N"),
            ])
        }
    };
    // padding rows: GEMM1 stored nothing there, so they are not loaded either
    let a_live = (cfg.skip_padding && cfg.a == GroupedA::Rows).then_some(super::routed_row as fn(&str) -> String);
    G2sRows { a, b, a_live }
}

/// The kernel function (`route`: the CTA setup's routing of a self-routing GEMM1).
pub(super) fn grouped_kernel(
    cfg: &GroupedGemmConfig,
    p: &Sm80Mainloop,
    name: &str,
    route: Option<Vec<Stmt>>,
) -> CFunction {
    let mma_fn = p.mma_atom.fn_name().to_string();
    let mut opts = MainloopEmit {
        name,
        raster_swizzle: 0,
        ticket_offset: 0,
        g2s: G2sMode::CpAsync,
        mma_fn: &mma_fn,
        cta: None,
        rows: rows(cfg),
    };
    let mut body = cta_threads(cfg, p);
    if cfg.stream_k {
        // one segment per iteration: its tile and K range, the mainloop, the epilogue
        // into its slab and, after a tile's last segment, zeros in the slabs past it
        opts.cta = Some(stream_k::segment(cfg));
        let mut segment = mainloop_stmts(p, &opts);
        segment.extend(epilogue(cfg, p));
        segment.push(stream_k::zero_unused_slabs(cfg, p.threads));
        body.extend(stream_k::setup(cfg, "__ldg"));
        body.push(Stmt::Loop {
            init: "long long w = w_begin".into(),
            cond: "w < w_end".into(),
            step: String::new(),
            body: segment,
        });
    } else {
        opts.cta = Some(cta_tile(cfg, route));
        body.extend(mainloop_stmts(p, &opts));
        body.extend(epilogue(cfg, p));
    }
    let [bm, bn, bk] = cfg.tile;
    let mut params = params(cfg);
    let mut doc = vec![
        format!(
            "grouped GEMM over M padded rows (row tiles of {bm}, expert block_expert[tile]), tile {bm}x{bn}x{bk}, {} stages",
            p.stages
        ),
        "grid (max row tiles, ceil(N / output columns per tile), K splits); entries = T * topk routed entries".into(),
        "prefetch_k_tiles > 0: before the grid-dependency wait, prefetch that many k-tiles of this CTA's B tile into L2 (experts below prefetch_experts)".into(),
    ];
    if let Some(r) = &cfg.route {
        params.extend(super::route::params(r));
        doc.push("routes its T = entries / topk tokens itself from the logits (CTA (0, 0, 0) writes the routing and the alignment)".into());
    }
    if cfg.stream_k {
        params.push(("int".into(), "slabs".into()));
        doc[1] = "grid (CTAs): stream-K over this routing's (row tile, column tile, k-tile) work, each tile's segments in slabs 0..slabs-1 (split_stride apart); k_per_split unused".into();
    }
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({}, 1)", p.threads),
        ret: "void".into(),
        name: name.into(),
        params,
        doc,
        body,
    }
}

/// The grouped kernels' parameters (the tile grid's and the streamed form's; a stream-K
/// kernel adds `slabs`), in the order of [`super::GeneratedGroupedGemm`]'s arguments.
pub(super) fn params(cfg: &GroupedGemmConfig) -> Vec<(String, String)> {
    let ta = cfg.element.cuda_type();
    // a self-routing GEMM1's first CTA writes the alignment
    let align = if cfg.route.is_some() {
        "int*"
    } else {
        "const int* __restrict__"
    };
    vec![
        (format!("const {ta}* __restrict__"), "A".into()),
        (format!("const {ta}* __restrict__"), "B".into()),
        (format!("{ta}* __restrict__"), "D".into()),
        (align.into(), "sorted_ids".into()),
        (align.into(), "block_expert".into()),
        (align.into(), "total_rows".into()),
        ("const float* __restrict__".into(), "weights".into()),
        ("int".into(), "M".into()),
        ("int".into(), "N".into()),
        ("int".into(), "K".into()),
        ("long long".into(), "lda".into()),
        ("long long".into(), "ldb".into()),
        ("long long".into(), "ldd".into()),
        ("long long".into(), "expert_stride".into()),
        ("int".into(), "entries".into()),
        ("int".into(), "topk".into()),
        ("int".into(), "k_per_split".into()),
        ("long long".into(), "split_stride".into()),
        ("int".into(), "up_first".into()),
        ("int".into(), "prefetch_k_tiles".into()),
        ("int".into(), "prefetch_experts".into()),
        ("const int* __restrict__".into(), "prefetch_ids".into()),
        ("int".into(), "expert_offset".into()),
    ]
}
