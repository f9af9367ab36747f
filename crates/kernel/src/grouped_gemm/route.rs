//! GEMM1 routing its decode batch itself ([`super::GroupedGemmConfig::route`]): no top-k
//! kernel and no alignment in front of it, so the layer's chain loses a link.
//!
//! After its grid-dependency wait every CTA reads the router logits `[T, E]` (the
//! predecessor's output), routes the `T` tokens with the statements of
//! [`crate::moe_routing::topk_softmax`] (warp `w` takes tokens `w, w + warps, ...`; the
//! same operations in the same order, so the ids and weights are those of the routing
//! kernels bit for bit) into a shared copy of the `N = T * k <= `[`MAX_ENTRIES`] ids, then
//! one warp, lane `l` holding entry `l`, derives the alignment's layout locally (no global
//! prefix sums): local expert `e` owns the row tiles `[before_e, before_e + ceil(c_e /
//! BM))`, `before_e` the tiles of the local experts below it, and its entries in entry
//! order (the alignment is stable). From that each CTA knows its row tile's expert and
//! the entry of each of its rows. CTA `(0, 0, 0)` also writes what GEMM2 and the finalize
//! read: `topk_ids`, `topk_weights` and the alignment (`counts`, `offsets`, `sorted_ids`,
//! `block_expert`, `total_rows`), exactly as [`crate::moe_routing::align`] writes them.
//! [`tile_rows_from_ids`] is the same computation on the host.
//!
//! Nothing is read before the wait (GEMM1's prefetch needs routing written one link
//! earlier, which no longer exists: the launch sets no prefetch budget). GEMM2's prelude
//! still reads `block_expert` and `total_rows` for its L2 prefetch, now written by its
//! immediate predecessor: a hint as before ([`super::prefetch`]); CTA `(0, 0, 0)` writes
//! them right after its wait, long before GEMM1's tail lets GEMM2's CTAs start.

use super::lane_layout::{lane_expert_tiles, tiles_below};
use super::stmt::{d, dc, if_};
use super::GroupedGemmConfig;
use crate::emit::Stmt;
use crate::moe_routing::topk_softmax;
use crate::moe_routing::MoeRoutingError;
use rcute_atom::Element;

/// The most routed entries (`T * k`) GEMM1 routes itself: one lane of a warp each.
pub const MAX_ENTRIES: i32 = 32;

/// The router logits a self-routing GEMM1 reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RouteLogits {
    /// f32, bf16 or f16.
    pub element: Element,
    /// The experts the kernel handles: 32, 64, 128 or 256 (32 times the logits per lane).
    pub max_experts: u32,
}

impl RouteLogits {
    /// Logits of `element` for up to `experts` experts (rounded up as
    /// [`topk_softmax::generate`] rounds).
    pub fn new(element: Element, experts: u32) -> Result<RouteLogits, MoeRoutingError> {
        let (_, v) = topk_softmax::logits_kind(element, experts)?;
        Ok(RouteLogits {
            element,
            max_experts: 32 * v,
        })
    }

    /// The kernel name's part: `_route_<f32|bf16|f16>_e<max_experts>`.
    pub fn name(&self) -> String {
        format!("_route_{}_e{}", self.element, self.max_experts)
    }
}

/// Run-time arguments of a self-routing GEMM1 ([`super::GroupedGemmArgs::route`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteArgs {
    /// Router logits `[T, E]` row-major (`T = entries / topk`).
    pub logits: u64,
    /// `E`.
    pub experts: i32,
    /// Divide the `k` weights by their sum.
    pub renormalize: bool,
    /// Output `topk_ids [T, k]` (int32).
    pub topk_ids: u64,
    /// Output `topk_weights [T, k]` (f32).
    pub topk_weights: u64,
    /// Output: the alignment's `counts [L]`.
    pub counts: u64,
    /// Output: the alignment's `offsets [L + 1]`.
    pub offsets: u64,
}

/// The extra parameters of a self-routing kernel (after `expert_offset`).
pub(super) fn params(r: &RouteLogits) -> Vec<(String, String)> {
    vec![
        (
            format!("const {}* __restrict__", r.element.cuda_type()),
            "logits".into(),
        ),
        ("int* __restrict__".into(), "topk_ids".into()),
        ("float* __restrict__".into(), "topk_weights".into()),
        ("int".into(), "route_experts".into()),
        ("int".into(), "renormalize".into()),
        ("int* __restrict__".into(), "counts".into()),
        ("int* __restrict__".into(), "offsets".into()),
    ]
}

/// The local expert of row tile `tile_m` and the entry of each of its `block_m` rows
/// (`entries` = `ids.len()` in padding rows), or `None` past the routing's tiles: the
/// kernel's warp computation on the host, lane `l` holding entry `l` of `ids` (global
/// expert ids, at most [`MAX_ENTRIES`]) over `[expert_offset, expert_offset + local)`.
///
/// ```
/// use rcute_kernel::grouped_gemm::route::tile_rows_from_ids;
/// // 3 tokens top-2 over experts 0..4, tiles of 2: expert 0 has entries 1, 2; expert 2
/// // has 0, 3, 4 (two tiles); expert 3 has 5.
/// let ids = [2, 0, 0, 2, 2, 3];
/// assert_eq!(tile_rows_from_ids(&ids, 0, 4, 2, 0), Some((0, vec![1, 2])));
/// assert_eq!(tile_rows_from_ids(&ids, 0, 4, 2, 2), Some((2, vec![4, 6])));
/// assert_eq!(tile_rows_from_ids(&ids, 0, 4, 2, 3), Some((3, vec![5, 6])));
/// assert_eq!(tile_rows_from_ids(&ids, 0, 4, 2, 4), None);
/// ```
pub fn tile_rows_from_ids(
    ids: &[i32],
    expert_offset: i32,
    local: i32,
    block_m: i32,
    tile_m: i32,
) -> Option<(i32, Vec<i32>)> {
    if ids.len() > MAX_ENTRIES as usize || block_m < 1 {
        return None;
    }
    let n = ids.len() as i32;
    let local_of = |id: i32| {
        let e = id.wrapping_sub(expert_offset);
        (0..local).contains(&e).then_some(e)
    };
    let mut before = 0;
    for e in 0..local {
        let mine: Vec<i32> = (0..n).filter(|&l| local_of(ids[l as usize]) == Some(e)).collect();
        let tiles = (mine.len() as i32 + block_m - 1) / block_m;
        if (before..before + tiles).contains(&tile_m) {
            let first = ((tile_m - before) * block_m) as usize;
            let rows = (0..block_m as usize)
                .map(|r| mine.get(first + r).copied().unwrap_or(n))
                .collect();
            return Some((e, rows));
        }
        before += tiles;
    }
    None
}

/// The routing of the `T` tokens by every CTA (see the module docs): the shared ids
/// `rt_ids`, and in CTA `(0, 0, 0)` (`rt_first`) the global ids and weights.
fn route_tokens(cfg: &GroupedGemmConfig, r: &RouteLogits) -> Result<Vec<Stmt>, MoeRoutingError> {
    let (load, v) = topk_softmax::logits_kind(r.element, r.max_experts)?;
    let warps = cfg.warps[0] * cfg.warps[1];
    let mut token = topk_softmax::token_state(v);
    token.extend(topk_softmax::select_ids(
        r.element.cuda_type(),
        load,
        v,
        Some("rt_ids"),
        Some("rt_first"),
    )?);
    token.push(if_("rt_first", topk_softmax::weights(v)?));
    Ok(vec![
        Stmt::Comment("the routing kernels' names: T tokens, E experts, top-K (shadowing GEMM1's K here)".into()),
        d("const int", "K", "topk"),
        d("const int", "E", "route_experts"),
        d("const int", "T", "entries / topk"),
        d("const long long", "ld_x", "E"),
        d("const long long", "ld_k", "K"),
        Stmt::Loop {
            init: "int t = tid / 32".into(),
            cond: "t < T".into(),
            step: format!("t += {warps}"),
            body: token,
        },
    ])
}

/// Lane `l`'s entry, its local expert's group and row tiles
/// ([`super::lane_layout::lane_expert_tiles`] on the routed ids), its row among its expert's
/// (`rank`), and `before`: the row tiles of the local experts below its own (where its
/// expert's tiles start).
fn lane_layout(bm: i64) -> Vec<Stmt> {
    let mut v = lane_expert_tiles(bm, "lane < entries ? rt_ids[lane] : -1");
    v.push(dc(
        "const int",
        "rank",
        "__popc(group & ((1u << lane) - 1u))",
        "this entry's row among its expert's (the alignment is stable)",
    ));
    v.push(tiles_below("before", "e"));
    v
}

/// CTA `(0, 0, 0)`'s alignment outputs, by warp 0 (its lanes' layout in scope): first
/// the padding values everywhere, then the entries, the counts and the experts' tiles.
fn write_alignment(bm: i64) -> Vec<Stmt> {
    vec![
        Stmt::Comment("the alignment as rc_moe_align writes it: sentinels and empty experts first".into()),
        Stmt::Loop {
            init: "int r = lane".into(),
            cond: "r < M".into(),
            step: "r += 32".into(),
            body: vec![Stmt::assign("sorted_ids[r]", "entries")],
        },
        Stmt::Loop {
            init: "int b = lane".into(),
            cond: format!("b < M / {bm}"),
            step: "b += 32".into(),
            body: vec![Stmt::assign("block_expert[b]", "-1")],
        },
        Stmt::Loop {
            init: "int q = lane".into(),
            cond: "q < prefetch_experts".into(),
            step: "q += 32".into(),
            body: vec![Stmt::assign("counts[q]", "0")],
        },
        Stmt::Expr("__syncwarp()".into()),
        if_(
            "local",
            vec![Stmt::assign(format!("sorted_ids[before * {bm} + rank]"), "lane")],
        ),
        if_(
            "leader",
            vec![
                Stmt::assign("counts[e]", "__popc(group)"),
                Stmt::Loop {
                    init: "int b = 0".into(),
                    cond: "b < tiles".into(),
                    step: "++b".into(),
                    body: vec![Stmt::assign("block_expert[before + b]", "e")],
                },
            ],
        ),
        Stmt::Comment("offsets[q] = BM x the row tiles of the local experts below q (q = L: all)".into()),
        Stmt::Loop {
            init: "int base = 0".into(),
            cond: "base <= prefetch_experts".into(),
            step: "base += 32".into(),
            body: vec![
                d("const int", "q", "base + lane"),
                d("int", "below", "0"),
                tiles_below("below", "q"),
                if_(
                    "q <= prefetch_experts",
                    vec![Stmt::assign("offsets[q]", format!("below * {bm}"))],
                ),
                if_(
                    "q == prefetch_experts",
                    vec![Stmt::assign("total_rows[0]", format!("below * {bm}"))],
                ),
            ],
        },
    ]
}

/// The CTA setup's routing (replacing the alignment's `total_rows` exit and
/// `block_expert` read): declares `expert` (the row tile's local expert, `-1`: none) and
/// fills `rt_rows` (the entry of each row of the tile); every thread passes the block
/// barrier after it before any returns.
pub(super) fn cta_route(cfg: &GroupedGemmConfig, r: &RouteLogits) -> Result<Vec<Stmt>, MoeRoutingError> {
    let bm = cfg.tile[0];
    let full = "0xffffffffu";
    let mut layout = lane_layout(bm);
    layout.extend([
        d(
            "const unsigned",
            "hit",
            format!("__ballot_sync({full}, local && before <= tile_m && tile_m < before + tiles)"),
        ),
        Stmt::assign(
            "expert",
            format!("hit != 0u ? __shfl_sync({full}, e, __ffs(hit) - 1) : -1"),
        ),
        if_(
            "tid < 32",
            vec![
                Stmt::Loop {
                    init: "int r = lane".into(),
                    cond: format!("r < {bm}"),
                    step: "r += 32".into(),
                    body: vec![Stmt::assign("rt_rows[r]", "entries")],
                },
                Stmt::Expr("__syncwarp()".into()),
                if_(
                    format!("local && e == expert && before + rank / {bm} == tile_m"),
                    vec![Stmt::assign(format!("rt_rows[rank % {bm}]"), "lane")],
                ),
            ],
        ),
        if_("rt_first && tid < 32", write_alignment(bm)),
    ]);
    Ok(vec![
        Stmt::Comment(
            "GEMM1 routes the decode batch itself (rcute_kernel::grouped_gemm::route): top-k softmax of the logits, then this tile's expert and rows".into(),
        ),
        shared_array(&format!("rt_ids[{MAX_ENTRIES}]"), "the routed ids [T, K], T * K <= 32"),
        shared_array(&format!("rt_rows[{bm}]"), "the entry of each row of this tile"),
        dc(
            "const bool",
            "rt_first",
            "blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0",
            "this CTA writes the routing and the alignment for GEMM2 and the finalize",
        ),
        Stmt::Block(route_tokens(cfg, r)?),
        Stmt::Expr("__syncthreads()".into()),
        d("int", "expert", "-1"),
        Stmt::Block(layout),
        Stmt::Comment("rt_rows complete; a tile past the routing's rows exits (every thread)".into()),
        Stmt::Expr("__syncthreads()".into()),
        if_("expert < 0", vec![Stmt::Return]),
    ])
}

fn shared_array(name: &str, comment: &str) -> Stmt {
    Stmt::Decl {
        ty: "__shared__ int".into(),
        name: name.into(),
        init: None,
        comment: Some(comment.into()),
    }
}
