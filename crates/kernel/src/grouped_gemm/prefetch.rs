//! The grouped kernel's work before its grid-dependency wait: an L2 prefetch of the first
//! k-tiles of the weight (B) tile its CTA will stream, so that the layer's weight stream
//! starts while the previous kernel of the chain still runs
//! ([`crate::grid_dependency::chain_link_with_prelude`]).
//!
//! # What a CTA can know before its wait
//!
//! A CTA's weight tile is `B + expert * expert_stride`, its rows and columns set by its
//! grid position; only the expert is data: `block_expert[tile_m]`, written by the
//! alignment. PTX guarantees a predecessor's writes to be visible only after
//! `griddepcontrol.wait`, and says nothing of a grid two links back, although in a chain
//! whose links wait before they trigger it has completed, in real time, before the
//! next-but-one link is launched. Hence the rule: what the prelude reads may steer L2
//! prefetches only, never a result.
//!
//! * **L2 prefetch (done).** A wrong (stale) expert prefetches lines that nobody reads;
//!   the expert is checked against `prefetch_experts` (the local experts B holds) and rows
//!   and columns against `N` and `K`, so every prefetched address (the row's first byte,
//!   then the start of each further 128-byte line up to its last) is a byte of B whatever
//!   was read. The reads go around the L1 (`__ldcg`), so the post-wait `__ldg`
//!   of the same words cannot hit a line cached here. The lines keep the normal eviction
//!   priority ([`rcute_atom::prefetch`]).
//! * **Weights into the shared-memory stages (not done).** Correct only with the expert
//!   proven, or re-read after the wait and the stages reloaded when it differs (an extra
//!   `cp.async` drain and a second copy of the shared mainloop's prologue); the L2 gets
//!   the same bytes moving with none of that.
//!
//! # Where the expert comes from
//!
//! * **GEMM2** (align -> GEMM1 -> GEMM2): `block_expert` and `total_rows`, two links back.
//! * **GEMM1** (align is its predecessor: its outputs are the very data in flight): from the
//!   routing two links back, `topk_ids` (`prefetch_ids`; the top-k kernel's output, or the
//!   caller's), when there are at most [`MAX_ID_ENTRIES`] routed entries (decode). Each
//!   warp recomputes the alignment's layout for its tile: local expert `e` owns row tiles
//!   `[sum_{e' < e} ceil(c_e' / BM), + ceil(c_e / BM))`; [`tile_expert_from_ids`] is the
//!   same computation on the host, tested against the alignment's reference.
//!
//! How much: [`super::GeneratedGroupedGemm::prefetch_k_tiles`], from the launch's byte
//! budget ([`super::GroupedGemmArgs::prefetch_bytes`]).

use super::kernel::rows;
use super::lane_layout::{lane_expert_tiles, tiles_below};
use super::stmt::{d, dc, if_};
use super::GroupedGemmConfig;
use crate::emit::Stmt;
use rcute_collective::Sm80Mainloop;

/// The most routed entries (`T * topk`) for which a CTA derives its expert from the top-k
/// ids before its wait (one warp, a lane per entry).
pub const MAX_ID_ENTRIES: i32 = 32;

/// The local expert of row tile `tile_m` (tiles of `block_m` rows) in the alignment of
/// `ids` (global expert ids, at most [`MAX_ID_ENTRIES`]) over `[expert_offset,
/// expert_offset + local_experts)`, or `-1` past its tiles: the kernel's warp computation
/// step by step, lane `l` holding entry `l`.
///
/// ```
/// use rcute_kernel::grouped_gemm::prefetch::tile_expert_from_ids;
/// // 3 tokens top-2 over experts 0..4, tiles of 2: expert 0 has 2 entries (1 tile),
/// // expert 2 has 3 (2 tiles), expert 3 has 1 (1 tile).
/// let ids = [2, 0, 0, 2, 2, 3];
/// let tiles: Vec<i32> = (0..5).map(|t| tile_expert_from_ids(&ids, 0, 4, 2, t)).collect();
/// assert_eq!(tiles, vec![0, 2, 2, 3, -1]);
/// ```
pub fn tile_expert_from_ids(ids: &[i32], expert_offset: i32, local_experts: i32, block_m: i32, tile_m: i32) -> i32 {
    if ids.len() > MAX_ID_ENTRIES as usize || block_m < 1 {
        return -1;
    }
    let lanes = 0..32usize;
    // per lane: its local expert, or -1 (no entry, or an expert held elsewhere)
    let e: Vec<i32> = lanes
        .clone()
        .map(|l| match ids.get(l) {
            Some(&id) if (0..local_experts).contains(&id.wrapping_sub(expert_offset)) => id - expert_offset,
            _ => -1,
        })
        .collect();
    // __match_any_sync: the lanes holding the same key
    let group = |l: usize| lanes.clone().filter(|&j| e[j] == e[l]).collect::<Vec<_>>();
    let tiles: Vec<i32> = lanes
        .clone()
        .map(|l| (group(l).len() as i32 + block_m - 1) / block_m)
        .collect();
    let leader: Vec<bool> = lanes.clone().map(|l| e[l] >= 0 && group(l)[0] == l).collect();
    let before: Vec<i32> = lanes
        .clone()
        .map(|l| {
            lanes
                .clone()
                .filter(|&j| leader[j] && e[j] < e[l])
                .map(|j| tiles[j])
                .sum()
        })
        .collect();
    // __ballot_sync, then the expert of the lowest lane whose tiles hold tile_m
    lanes
        .clone()
        .find(|&l| e[l] >= 0 && before[l] <= tile_m && tile_m < before[l] + tiles[l])
        .map_or(-1, |l| e[l])
}

/// The statements that derive `expert` from the top-k ids in every warp (see the module
/// docs); `-1` when no tile of the routing is `tile_m`.
fn expert_from_ids(bm: i64) -> Vec<Stmt> {
    let full = "0xffffffffu";
    let mut v = vec![dc(
        "const int",
        "lane",
        "threadIdx.x % 32",
        "lane l holds routed entry l (t * topk + j)",
    )];
    v.extend(lane_expert_tiles(
        bm,
        "lane < entries ? __ldcg(prefetch_ids + lane) : -1",
    ));
    v.push(tiles_below("before", "e"));
    v.push(d(
        "const unsigned",
        "hit",
        format!("__ballot_sync({full}, local && before <= tile_m && tile_m < before + tiles)"),
    ));
    v.push(Stmt::assign(
        "expert",
        format!("hit != 0u ? __shfl_sync({full}, e, __ffs(hit) - 1) : -1"),
    ));
    v
}

/// `expert` of this CTA's row tile before the wait: from the top-k ids (GEMM1, at most
/// [`MAX_ID_ENTRIES`] entries) or the alignment two links back (GEMM2).
fn prelude_expert(bm: i64) -> Vec<Stmt> {
    vec![
        d("const int", "tile_m", "blockIdx.x"),
        dc(
            "int",
            "expert",
            "-1",
            "from the routing written two or more links back, read around the L1",
        ),
        Stmt::If {
            cond: "prefetch_ids != nullptr".into(),
            then: vec![if_(format!("entries <= {MAX_ID_ENTRIES}"), expert_from_ids(bm))],
            otherwise: vec![Stmt::assign(
                "expert",
                format!("tile_m * {bm} < __ldcg(total_rows) ? __ldcg(block_expert + tile_m) : -1"),
            )],
        },
    ]
}

/// The prelude of the streamed kernels on the prepared weight
/// ([`super::GroupedGemmConfig::prepared`]): with `prepared_k_tiles > 0` each warp
/// prefetches into L2 its 16-row block's first `prefetch_k_tiles` chunks of the split, one
/// contiguous run of the prepared weight (`16 k` elements into the block for k a multiple
/// of 32; lane `l` the 128-byte lines `l`, `l + 32`, ...). Every address is inside the
/// block's run of the expert whatever `expert` was read, as long as it is a local expert.
pub(super) fn prelude_prepared(cfg: &GroupedGemmConfig, warps: i64) -> Vec<Stmt> {
    let [bm, _, chunk] = cfg.tile;
    let cols = match cfg.epilogue {
        super::GroupedEpilogue::SwiGlu => 8,
        super::GroupedEpilogue::Scatter => 16,
    };
    let mut body = prelude_expert(bm);
    body.extend([
        d("const int", "k_begin", "blockIdx.z * k_per_split"),
        d(
            "const int",
            "k_end",
            format!("min(K, k_begin + min(k_per_split, prefetch_k_tiles * {chunk}))"),
        ),
        dc(
            "const int",
            "blk",
            format!("blockIdx.y * {warps} + (int)(threadIdx.x >> 5)"),
            "this warp's 16-row block (offset 512 P blk + 16 k for k a multiple of 32)",
        ),
        if_(
            format!("expert >= 0 && expert < prefetch_experts && k_end > k_begin && {cols} * blk < N"),
            vec![
                dc(
                    "const char* const",
                    "run",
                    "reinterpret_cast<const char*>(B + (long long)expert * expert_stride + (long long)blk * ldb + 16 * k_begin)",
                    "parts k_begin / 32 .. ceil(k_end / 32): contiguous, inside the block (its K is padded to 32)",
                ),
                d(
                    "const int",
                    "bytes",
                    "32 * (((k_end + 31) & ~31) - k_begin)",
                ),
                Stmt::Loop {
                    init: "int at = 128 * (int)(threadIdx.x & 31)".into(),
                    cond: "at < bytes".into(),
                    step: "at += 4096".into(),
                    body: vec![Stmt::Expr("rc_prefetch_l2(run + at)".into())],
                },
            ],
        ),
    ]);
    vec![
        Stmt::Comment(
            "before the wait: L2 prefetch of each warp's first chunks of the prepared weight; what is read here steers hints only (rcute_kernel::grouped_gemm::prefetch)".into(),
        ),
        if_("prefetch_k_tiles > 0", body),
    ]
}

/// The prelude: with `prefetch_k_tiles > 0` each thread prefetches into L2 the lines of
/// its B tile rows over the first `prefetch_k_tiles` k-tiles of the CTA's split.
pub(super) fn prelude(cfg: &GroupedGemmConfig, p: &Sm80Mainloop) -> Vec<Stmt> {
    let [bm, bn, bk] = cfg.tile;
    let ta = cfg.element.cuda_type();
    let mut per_row = rows(cfg).b.unwrap_or_else(|| {
        vec![
            d("const int", "src_row", "n0 + r"),
            d("const bool", "src_ok", "src_row < N"),
        ]
    });
    per_row.push(if_(
        "src_ok",
        vec![
            dc(
                "const uintptr_t",
                "first",
                "reinterpret_cast<uintptr_t>(gB + (long long)src_row * ldb + k_begin)",
                "B row src_row, columns [k_begin, k_end): one address in each of its 128-byte lines, all inside the row",
            ),
            d(
                "const uintptr_t",
                "last",
                "reinterpret_cast<uintptr_t>(gB + (long long)src_row * ldb + k_end - 1)",
            ),
            Stmt::Loop {
                init: "uintptr_t at = first".into(),
                cond: "at <= last".into(),
                step: "at = (at | (uintptr_t)127) + 1".into(),
                body: vec![Stmt::Expr("rc_prefetch_l2(reinterpret_cast<const void*>(at))".into())],
            },
        ],
    ));
    let prefetch = vec![if_(
        "expert >= 0 && expert < prefetch_experts && k_end > k_begin",
        vec![
            d(
                &format!("const {ta}* const"),
                "gB",
                "B + (long long)expert * expert_stride",
            ),
            Stmt::Loop {
                init: "int r = threadIdx.x".into(),
                cond: format!("r < {bn}"),
                step: format!("r += {}", p.threads),
                body: per_row,
            },
        ],
    )];
    if cfg.stream_k {
        let mut body = super::stream_k::prelude_segment(cfg);
        body.extend(prefetch);
        return vec![
            Stmt::Comment(
                "before the wait: L2 prefetch of the first weight k-tiles of this CTA's first stream-K segment; what is read here steers hints only (rcute_kernel::grouped_gemm::prefetch)".into(),
            ),
            if_("prefetch_k_tiles > 0", body),
        ];
    }
    let mut body = prelude_expert(bm);
    body.extend([
        d("const int", "n0", format!("blockIdx.y * {}", cfg.tile_n_out())),
        d("const int", "k_begin", "blockIdx.z * k_per_split"),
        d(
            "const int",
            "k_end",
            format!("min(K, k_begin + min(k_per_split, prefetch_k_tiles * {bk}))"),
        ),
    ]);
    body.extend(prefetch);
    vec![
        Stmt::Comment(
            "before the wait: L2 prefetch of this CTA's first weight k-tiles; what is read here steers hints only (rcute_kernel::grouped_gemm::prefetch)".into(),
        ),
        if_("prefetch_k_tiles > 0", body),
    ]
}
