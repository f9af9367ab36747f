//! The register-streamed grouped decode kernel ([`rcute_collective::moe_streamed`]):
//! [`super::GroupedGemmConfig::streamed`]. Warp `w` of CTA `(tile_m, tile_n, split)`
//! multiplies 16 weight rows of the row tile's expert by the tile's (at most `BM`) rows
//! of A, over the split's K range, with the weight in a ring of registers loaded by
//! `ld.global.nc.L1::no_allocate` (16 bytes per lane and row) and A's rows by
//! `__ldg` (through the L1, which the CTA's warps share) when a chunk is multiplied; no
//! shared memory, no barrier. An 8-row fragment of A
//! in which no row is routed is neither loaded nor multiplied.
//!
//! * SwiGLU (GEMM1): the warp's rows are the gate rows (MMA rows `0..8`) and the up rows
//!   (`8..16`) of 8 output columns, so lane `(g, q)` ends with the gate and up sums of
//!   column `n0 + g` for A rows `8f + 2q`, `+1` and stores `silu(gate) * up`.
//! * Scatter (GEMM2): the warp's rows are 16 consecutive output columns, MMA row `g` =
//!   column `n0 + 2g`, row `g + 8` = column `n0 + 2g + 1`, so a lane stores column pairs
//!   of its two A rows to their entries' rows (times the router weight), in the K split's
//!   slab.
//!
//! With [`super::GroupedGemmConfig::k_rotate`] each warp starts its K range at its own
//! chunk and wraps around (`(warp + 37 tile_n + 11 tile_m) mod chunks`), so that the warps
//! of a wave read different offsets of their rows at the same time instead of all the
//! same one. The order of the sum is fixed by the configuration: runs are bit-identical.
//!
//! With [`super::GroupedGemmConfig::prepared`] (`_prep`) B is the prepared expert weight of
//! [`rcute_collective::moe_prepared`] ([`super::prepare`] writes it): each warp load is 512
//! contiguous bytes, a warp's chunk one contiguous run of its 16-row block, K padded to
//! whole 32-k parts with zeros; and before its grid-dependency wait each warp prefetches
//! its block's first chunks into L2 ([`super::prefetch`]).
//!
//! Measured on an H100 (BENCHMARKS.md, session 14): with chunks of 128-256 k it streams
//! the decode layers' weights at the `cp.async` kernels' rate, never faster (DeepSeek-V2-Lite
//! T = 1: 52.3 against 50.6 us), so it is in no table and not in the tuner's space; with
//! one 64-byte part per chunk it runs at half that rate. On the prepared weight with the
//! prefetch (session 16) the layer beats the `cp.async` form at every decode point measured
//! (DeepSeek-V2-Lite T = 1: 45.1 against 50.1 us; T = 64 377.6 against 402.7; Mixtral T = 1
//! 244.7 against 256.6, T = 16 925.0 against 977.5): `Ops::fused_moe_prepared` runs it.
//!
//! With [`super::GroupedGemmConfig::shared_ring`] (`_sring`) the weight pieces go through
//! each lane's own slots of a shared `cp.async` ring ([`rcute_collective::lane_ring`], the
//! AWQ `_sring` kernels' ring), waited by count, instead of the registers: in the register
//! ring's SASS every weight load and the chunk's `x` loads share one scoreboard, so each
//! chunk's first MMA waits for all loads in flight. Measured on an H100 (BENCHMARKS.md,
//! session 18) the shared ring was 1-11 % slower than the register ring at every decode
//! point the rule runs (the drained ring still holds a chunk of 4-8 KB per warp in flight)
//! and faster only in forms the rule does not pick: forced-only.

use super::stmt::{d, dc, if_};
use super::{GeneratedGroupedGemm, GroupedA, GroupedEpilogue, GroupedGemmConfig, GroupedGemmError};
use crate::emit::shorthand::{c, e, if_else};
use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit, UINTPTR_FOR_NVRTC};
use crate::lane_ring;
use rcute_atom::copy_ldst::ld_global_stream;
use rcute_atom::mma_sm80;
use rcute_atom::Element;
use rcute_collective::lane_ring::LaneRing;
pub use rcute_collective::moe_streamed::{MoeStreamed, CHUNK_K, WARP_ROWS};

/// The plan of a streamed configuration: tile `[BM, 16 x warps, 32 x loads]`, warps
/// `[1, W]`, stages = the ring's chunks (absent: 2).
pub fn plan(cfg: &GroupedGemmConfig) -> Result<MoeStreamed, GroupedGemmError> {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let bad = |why: &str| {
        GroupedGemmError::Config(format!(
            "streamed grouped GEMM tile {bm}x{bn}x{bk} warps {wm}x{wn}: {why}"
        ))
    };
    if cfg.stream_k || cfg.b_l2_prefetch {
        return Err(bad("no stream-K or L2 prefetch size (cp.async-only options)"));
    }
    if wm != 1 || bn != WARP_ROWS * wn || bk % CHUNK_K != 0 {
        return Err(bad("needs warps 1xW and tile BMx(16 W)x(32 loads)"));
    }
    let ring = cfg.stages.unwrap_or(2) as i64;
    let p = MoeStreamed::new(bm, wn, ring, bk / CHUNK_K).ok_or_else(|| {
        bad("BM 8, 16 or 32, 1 to 16 warps, BK 32, 64, 128 or 256, at most 16 parts of 32 k in flight")
    })?;
    if !cfg.shared_ring {
        return Ok(p);
    }
    p.with_shared_ring().ok_or_else(|| {
        bad(&format!(
            "the shared ring (ring x parts x 2 x 16 bytes per lane) holds at most {} bytes",
            rcute_collective::moe_streamed::MAX_RING_BYTES
        ))
    })
}

/// The kernel name of a streamed configuration.
pub fn kernel_name(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> String {
    let (a, ep) = (cfg.a.name(), cfg.epilogue.name());
    let rot = if cfg.k_rotate { "_rot" } else { "" };
    let prep = if cfg.prepared { "_prep" } else { "" };
    let sring = if p.lane_ring.is_some() { "_sring" } else { "" };
    format!(
        "rc_moe_grouped_reg_{}_{a}_{ep}_{}x{}x{}_r{}_w{}{rot}{prep}{sring}",
        cfg.element.ptx(),
        p.bm,
        p.rows_per_cta(),
        p.chunk_k,
        p.ring,
        p.warps
    )
}

/// The warp's weight rows in the prepared weight ([`rcute_collective::moe_prepared`]):
/// its 16-row block `blk` (the CTA's `W` blocks are one contiguous run), `w_lo_src` its
/// first part's `lo` load (256 elements, 8 per lane), `w_hi_src` the `hi` load after it.
fn prepared_rows(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> Vec<Stmt> {
    let ta = cfg.element.cuda_type();
    let cols = match cfg.epilogue {
        GroupedEpilogue::SwiGlu => 8,
        GroupedEpilogue::Scatter => WARP_ROWS,
    };
    vec![
        dc(
            "const int",
            "blk",
            format!("blockIdx.y * {} + warp", p.warps),
            format!(
                "16-row block of the prepared weight: output columns {cols} blk .. + {cols}; offset 512 P blk + 512 p + 256 h + 8 lane + e (ldb = 512 P)"
            ),
        ),
        dc(
            "const bool",
            "blk_ok",
            format!("{cols} * blk < N"),
            "the block exists (warp-uniform); its rows past N are zeros",
        ),
        dc(
            &format!("const {ta}* const"),
            "w_lo_src",
            "gB + (long long)blk * ldb + 16 * k_begin + 8 * lane",
            "part k_begin / 32, half 0 (MMA row g): 512 contiguous bytes per warp load",
        ),
        dc(
            &format!("const {ta}* const"),
            "w_hi_src",
            "w_lo_src + 256",
            "half 1 (MMA row g + 8): the next 512 bytes",
        ),
    ]
}

/// The warp's output column and the source pointers of its two weight rows (gate and up
/// rows of w13 for SwiGLU, two adjacent rows of w2 for the scatter; the prepared layout's
/// own pointers when the weight is prepared).
fn weight_rows(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> Vec<Stmt> {
    let ta = cfg.element.cuda_type();
    let w = p.warps;
    let mut v = vec![];
    match cfg.epilogue {
        GroupedEpilogue::SwiGlu => v.extend([
            dc(
                "const int",
                "col",
                format!("blockIdx.y * {} + warp * 8 + g", 8 * w),
                "the output column of MMA rows g (gate) and g + 8 (up)",
            ),
            d("const bool", "col_ok", "col < N"),
        ]),
        GroupedEpilogue::Scatter => v.extend([
            dc(
                "const int",
                "col",
                format!("blockIdx.y * {} + warp * {WARP_ROWS} + 2 * g", WARP_ROWS * w),
                "output columns col (MMA row g) and col + 1 (row g + 8); N is even",
            ),
            d("const bool", "col_ok", "col < N"),
        ]),
    }
    match (cfg.prepared, cfg.epilogue) {
        (true, _) => v.extend(prepared_rows(cfg, p)),
        (false, GroupedEpilogue::SwiGlu) => v.extend([
            dc(
                "const int",
                "gate_row",
                "(up_first ? N : 0) + col",
                "w13 holds the gate rows at 0..N and the up rows at N..2N, or the reverse when up_first",
            ),
            d("const int", "up_row", "(up_first ? 0 : N) + col"),
            d(
                &format!("const {ta}* const"),
                "w_lo_src",
                "gB + (long long)gate_row * ldb + k_begin + 8 * q",
            ),
            d(
                &format!("const {ta}* const"),
                "w_hi_src",
                "gB + (long long)up_row * ldb + k_begin + 8 * q",
            ),
        ]),
        (false, GroupedEpilogue::Scatter) => v.extend([
            d(
                &format!("const {ta}* const"),
                "w_lo_src",
                "gB + (long long)col * ldb + k_begin + 8 * q",
            ),
            d(&format!("const {ta}* const"), "w_hi_src", "w_lo_src + ldb"),
        ]),
    }
    v
}

/// Per 8-row fragment of A: this lane's source row (gathered through the sorted entries,
/// or the row itself), whether it is routed, and whether any row of the fragment is.
fn a_fragments(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> Vec<Stmt> {
    let ta = cfg.element.cuda_type();
    let mut v = vec![];
    let f = p.frags;
    v.push(Stmt::Decl {
        ty: format!("const {ta}*"),
        name: format!("x_src[{f}]"),
        init: None,
        comment: Some("row g of each 8-row fragment of A (this lane's 8 k of a chunk)".into()),
    });
    v.push(Stmt::Decl {
        ty: "bool".into(),
        name: format!("x_ok[{f}]"),
        init: None,
        comment: None,
    });
    v.push(Stmt::Decl {
        ty: "bool".into(),
        name: format!("live[{f}]"),
        init: None,
        comment: Some("whether any row of the fragment is routed (warp-uniform)".into()),
    });
    let row = match cfg.a {
        GroupedA::Gathered => "(entry < entries ? entry / topk : 0)",
        GroupedA::Rows => "m",
    };
    v.push(Stmt::unrolled(
        "f",
        f,
        vec![
            d("const int", "m", "m0 + 8 * f + g"),
            dc(
                "const int",
                "entry",
                "__ldg(sorted_ids + m)",
                "the routed (token, j) entry of this row; `entries` in padding rows",
            ),
            Stmt::assign("x_ok[f]", "entry < entries"),
            Stmt::assign("x_src[f]", format!("A + (long long){row} * lda + k_begin + 8 * q")),
            Stmt::assign("live[f]", "__any_sync(0xffffffffu, x_ok[f])"),
        ],
    ));
    v
}

/// The warp's coordinates, its rows of B and A, its K range.
fn setup(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> Vec<Stmt> {
    let ta = cfg.element.cuda_type();
    let (bm, ck) = (p.bm, p.chunk_k);
    let mut v = vec![
        d("const int", "lane", "threadIdx.x & 31"),
        d("const int", "warp", "threadIdx.x >> 5"),
        dc(
            "const int",
            "g",
            "lane >> 2",
            "MMA row g (and g + 8) of the weight, row g of an A fragment",
        ),
        dc(
            "const int",
            "q",
            "lane & 3",
            "the lane's 8 k of a 32-k chunk: 8q .. 8q + 8",
        ),
        dc("const int", "tile_m", "blockIdx.x", "row tile"),
        d("const int", "m0", format!("tile_m * {bm}")),
        c("the grid covers the most padded rows any routing gives; tiles past this routing's rows exit"),
        if_("m0 >= __ldg(total_rows)", vec![Stmt::Return]),
    ];
    v.extend(super::tile::row_tile_expert(Stmt::Return));
    v.extend(super::tile::split_k_range());
    v.extend([
        dc(
            "const int",
            "chunks",
            format!("k_end > k_begin ? (k_end - k_begin + {}) / {ck} : 0", ck - 1),
            format!("{ck}-k chunks of this split"),
        ),
        dc(
            &format!("const {ta}* const"),
            "gB",
            "B + (long long)expert * expert_stride",
            "the expert's weight (rows,K):(ldb,1)",
        ),
    ]);
    v.extend(weight_rows(cfg, p));
    v.extend(a_fragments(cfg, p));
    if cfg.k_rotate {
        v.push(dc(
            "const int",
            "rot",
            "chunks > 0 ? (warp + 37 * blockIdx.y + 11 * tile_m) % chunks : 0",
            "this warp's first chunk: the warps of a wave start at different offsets of their rows",
        ));
    }
    v
}

/// Load chunk `c` (if below `chunks`) into ring slot `slot`: its parts' two weight rows,
/// each row's parts back to back (`64 loads` contiguous bytes; zeros past K and N).
fn load_chunk(cfg: &GroupedGemmConfig, p: &MoeStreamed, c_expr: &str, slot: &str) -> Vec<Stmt> {
    let ck = p.chunk_k;
    let chunk = if cfg.k_rotate {
        vec![
            d("int", "cc", format!("{c_expr} + rot")),
            if_("cc >= chunks", vec![e("cc -= chunks")]),
        ]
    } else {
        vec![d("const int", "cc", c_expr)]
    };
    let mut body = chunk;
    if cfg.prepared {
        body.extend(load_prepared_chunk(p, slot));
        return vec![if_(format!("{c_expr} < chunks"), body)];
    }
    let part_ok = format!("k_begin + kk + {CHUNK_K} * u + 8 * q < k_end");
    let load = |row: &str| load_part(p, row, &format!("w_{row}_src + kk + {CHUNK_K} * u"), slot);
    let loads = |row: &str| Stmt::unrolled("u", p.loads, vec![load(row)]);
    let guarded = |row: &str| {
        Stmt::unrolled(
            "u",
            p.loads,
            vec![if_else(
                format!("col_ok && {part_ok}"),
                vec![load(row)],
                zero_parts(p, &[row], slot),
            )],
        )
    };
    body.extend([
        dc(
            "const int",
            "kk",
            format!("cc * {ck}"),
            "offset of the chunk in the split's K range",
        ),
        if_else(
            format!("col_ok && k_begin + kk + {ck} <= k_end"),
            vec![
                c("a whole chunk: the row's parts back to back"),
                loads("lo"),
                loads("hi"),
            ],
            vec![
                c("the split's last chunk, or rows past N: part by part, zeros past K"),
                guarded("lo"),
                guarded("hi"),
            ],
        ),
    ]);
    vec![if_(format!("{c_expr} < chunks"), body)]
}

/// [`load_chunk`]'s loads from the prepared weight: part `kk / 32 + u` of the block is
/// `512 (kk / 32 + u)` elements into its run, its `lo` and `hi` loads adjacent, so the
/// chunk is one run of `1024 loads` contiguous bytes (parts past K are zeros there; parts
/// past the split's range are not loaded).
fn load_prepared_chunk(p: &MoeStreamed, slot: &str) -> Vec<Stmt> {
    let ck = p.chunk_k;
    let part = |u_ok: Option<String>| {
        let loads = ["lo", "hi"].map(|row| load_part(p, row, &format!("w_{row}_src + 16 * kk + 512 * u"), slot));
        let body = match u_ok {
            None => loads.to_vec(),
            Some(ok) => vec![if_else(ok, loads.to_vec(), zero_parts(p, &["lo", "hi"], slot))],
        };
        Stmt::unrolled("u", p.loads, body)
    };
    vec![
        dc(
            "const int",
            "kk",
            format!("cc * {ck}"),
            "offset of the chunk in the split's K range",
        ),
        if_else(
            format!("blk_ok && k_begin + kk + {ck} <= k_end"),
            vec![c("a whole chunk: one contiguous run of the block"), part(None)],
            vec![
                c("the split's last chunk, or no block: part by part"),
                part(Some(format!("blk_ok && k_begin + kk + {CHUNK_K} * u < k_end"))),
            ],
        ),
    ]
}

/// The components of a `uint4`.
const XYZW: [&str; 4] = ["x", "y", "z", "w"];

/// The shared-ring unit (16-byte units from the lane's `wring`) of part `u` of weight row
/// `row` (`lo` / `hi`) in ring slot `slot`: `(slot 2 loads + 2 u + h) threads`
/// ([`MoeStreamed::ring_unit`]).
fn ring_unit(p: &MoeStreamed, row: &str, slot: &str) -> String {
    let h = i64::from(row == "hi");
    let [per_slot, per_part, at] = [p.ring_unit(1, 0, 0), p.ring_unit(0, 1, 0), p.ring_unit(0, 0, h)]
        .map(|x| x.expect("shared-ring plans have a lane ring"));
    let at = if at > 0 { format!(" + {at}") } else { String::new() };
    format!("{per_slot} * {slot} + {per_part} * u{at}")
}

/// Part `u` of weight row `row` (`lo` / `hi`) from `src` into ring slot `slot`: a 16-byte
/// streaming load into `w_{row}[slot][u]`, or the lane's `cp.async` into its shared slot.
fn load_part(p: &MoeStreamed, row: &str, src: &str, slot: &str) -> Stmt {
    match &p.lane_ring {
        None => e(format!(
            "{}({src}, w_{row}[{slot}][u])",
            ld_global_stream(16).snippet.name
        )),
        Some(r) => lane_ring::copy(r, "wring", &ring_unit(p, row, slot), src),
    }
}

/// Zeros for part `u` of `rows` in ring slot `slot` (past K, or no weight rows): in the
/// registers, or stored to the lane's own shared slots (no copy is pending there: the
/// slot's previous chunk was waited for and read).
fn zero_parts(p: &MoeStreamed, rows: &[&str], slot: &str) -> Vec<Stmt> {
    match &p.lane_ring {
        None => vec![Stmt::unrolled(
            "i",
            4,
            rows.iter()
                .map(|row| Stmt::assign(format!("w_{row}[{slot}][u][i]"), "0u"))
                .collect(),
        )],
        Some(_) => rows
            .iter()
            .map(|row| {
                Stmt::assign(
                    format!("wring[{}]", ring_unit(p, row, slot)),
                    "make_uint4(0u, 0u, 0u, 0u)",
                )
            })
            .collect(),
    }
}

/// Ring slot `s`'s chunk from the lane's shared slots into `w_lo[s]` / `w_hi[s]` (after
/// the counted wait for chunk `cnow`).
fn read_shared_slot(p: &MoeStreamed, r: &LaneRing) -> Vec<Stmt> {
    let mut v = lane_ring::wait(r, "cnow", "chunk");
    let mut reads = vec![];
    for row in ["lo", "hi"] {
        reads.push(d(
            "const uint4",
            &format!("v_{row}"),
            format!("wring[{}]", ring_unit(p, row, "s")),
        ));
        reads.extend(
            XYZW.iter()
                .enumerate()
                .map(|(i, c)| Stmt::assign(format!("w_{row}[s][u][{i}]"), format!("v_{row}.{c}"))),
        );
    }
    v.push(Stmt::unrolled("u", p.loads, reads));
    v
}

/// The live fragments' A rows of chunk `cnow` (`xc`; zeros past K and for unrouted rows),
/// read through the L1 (the CTA's warps read the same rows).
fn load_x(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> Vec<Stmt> {
    let ck = p.chunk_k;
    let mut v = vec![Stmt::Decl {
        ty: "uint4".into(),
        name: format!("xc[{}][{}]", p.loads, p.frags),
        init: None,
        comment: Some("A row g of each live fragment, per part".into()),
    }];
    if cfg.k_rotate {
        v.push(d("int", "cx", "cnow + rot"));
        v.push(if_("cx >= chunks", vec![e("cx -= chunks")]));
    } else {
        v.push(d("const int", "cx", "cnow"));
    }
    v.push(d("const int", "kx", format!("cx * {ck}")));
    v.push(Stmt::unrolled(
        "f",
        p.frags,
        vec![if_(
            "live[f]",
            vec![Stmt::unrolled(
                "u",
                p.loads,
                vec![if_else(
                    format!("x_ok[f] && k_begin + kx + {CHUNK_K} * u + 8 * q < k_end"),
                    vec![Stmt::assign(
                        "xc[u][f]",
                        format!("__ldg(reinterpret_cast<const uint4*>(x_src[f] + kx + {CHUNK_K} * u))"),
                    )],
                    vec![Stmt::assign("xc[u][f]", "make_uint4(0u, 0u, 0u, 0u)")],
                )],
            )],
        )],
    ));
    v
}

/// The MMAs of ring slot `s`: two per part and live fragment.
fn mma_chunk(p: &MoeStreamed, mma: &str) -> Vec<Stmt> {
    let mut v = vec![];
    for j in 0..2 {
        let a = p.a_regs(j).map(|(arr, i)| format!("{arr}[s][u][{i}]")).join(", ");
        let [b0, b1] = p.b_regs(j);
        v.push(Stmt::Block(vec![
            dc(
                "const uint32_t",
                "a[4]",
                format!("{{{a}}}"),
                format!(
                    "MMA {j} of part u: logical k 2q, 2q+1 / 2q+8, 2q+9 = physical {CHUNK_K} u + 8q + {} .. + {}",
                    4 * j,
                    4 * j + 3
                ),
            ),
            Stmt::unrolled(
                "f",
                p.frags,
                vec![if_(
                    "live[f]",
                    vec![
                        d(
                            "const uint32_t",
                            "b[2]",
                            format!("{{xc[u][f].{}, xc[u][f].{}}}", XYZW[b0], XYZW[b1]),
                        ),
                        e(format!("{mma}(acc[f], a, b, acc[f])")),
                    ],
                )],
            ),
        ]));
    }
    vec![Stmt::unrolled("u", p.loads, v)]
}

/// The ring: fill, then per chunk multiply the slot and refill it `ring` chunks ahead.
/// With the shared ring each fill / refill is one `cp.async` group (committed even when
/// empty, so group `c` is chunk `c`) and the slot is read back after the counted wait.
fn mainloop(cfg: &GroupedGemmConfig, p: &MoeStreamed, mma: &str) -> Vec<Stmt> {
    let (r, f, u) = (p.ring, p.frags, p.loads);
    let commit = |mut v: Vec<Stmt>| {
        v.extend(p.lane_ring.as_ref().map(lane_ring::commit));
        v
    };
    let read = p.lane_ring.as_ref().map_or(vec![], |ring| read_shared_slot(p, ring));
    let consume = vec![
        d("const int", "cnow", "c0 + s"),
        if_(
            "cnow < chunks",
            [
                load_x(cfg, p),
                read,
                mma_chunk(p, mma),
                vec![c(format!(
                    "the slot's registers were read by the MMAs: refill it with chunk cnow + {r}"
                ))],
                commit(load_chunk(cfg, p, &format!("cnow + {r}"), "s")),
            ]
            .concat(),
        ),
    ];
    let mut v = match &p.lane_ring {
        None => vec![Stmt::Comment(format!(
            "ring of {r} chunks of {u} parts: weight rows g / g + 8 (w_lo / w_hi), 16 bytes each"
        ))],
        Some(ring) => vec![
            Stmt::Comment(format!(
                "shared ring of {r} chunks of {u} parts, one cp.async group per chunk: the lane's 16 bytes of part u of row g (lo) / g + 8 (hi) in slot s at wring[{} s + {} u (+ {} for hi)]",
                ring.unit(1, 0),
                ring.unit(0, 2),
                ring.unit(0, 1)
            )),
            Stmt::Expr("extern __shared__ __align__(128) unsigned char rc_smem[]".into()),
            dc(
                "uint4* const",
                "wring",
                "reinterpret_cast<uint4*>(rc_smem) + threadIdx.x",
                "the lane's own slots (rcute_collective::lane_ring): no other lane reads them, so no barrier",
            ),
        ],
    };
    v.extend([
        Stmt::Decl {
            ty: "uint32_t".into(),
            name: format!("w_lo[{r}][{u}][4]"),
            init: None,
            comment: None,
        },
        Stmt::Decl {
            ty: "uint32_t".into(),
            name: format!("w_hi[{r}][{u}][4]"),
            init: None,
            comment: None,
        },
        Stmt::Decl {
            ty: "float".into(),
            name: format!("acc[{f}][4]"),
            init: None,
            comment: Some("fragment f: d0, d1 = MMA row g, A rows 8f + 2q, +1; d2, d3 = row g + 8".into()),
        },
        Stmt::unrolled(
            "f",
            f,
            vec![Stmt::unrolled("i", 4, vec![Stmt::assign("acc[f][i]", "0.f")])],
        ),
        Stmt::unrolled("s", r, commit(load_chunk(cfg, p, "s", "s"))),
        Stmt::Loop {
            init: "int c0 = 0".into(),
            cond: "c0 < chunks".into(),
            step: format!("c0 += {r}"),
            body: vec![Stmt::unrolled("s", r, consume)],
        },
    ]);
    v
}

/// `*reinterpret_cast<T2*>(ptr) = (x, y)` in the element's pair type.
fn store_pair(el: Element, ptr: &str, x: &str, y: &str) -> Stmt {
    let (t2, f) = match el {
        Element::BF16 => ("__nv_bfloat162", "__floats2bfloat162_rn"),
        _ => ("__half2", "__floats2half2_rn"),
    };
    Stmt::assign(format!("*reinterpret_cast<{t2}*>({ptr})"), format!("{f}({x}, {y})"))
}

/// The epilogue from the accumulators.
fn epilogue(cfg: &GroupedGemmConfig, p: &MoeStreamed) -> Vec<Stmt> {
    let ta = cfg.element.cuda_type();
    let cvt = match cfg.element {
        Element::BF16 => "__float2bfloat16_rn",
        _ => "__float2half_rn",
    };
    match cfg.epilogue {
        GroupedEpilogue::SwiGlu => vec![
            c("D[m, col] = silu(gate) * up for the tile's rows (padding rows get silu(0) * 0 = 0)"),
            if_(
                "col_ok",
                vec![Stmt::unrolled(
                    "f",
                    p.frags,
                    vec![Stmt::unrolled(
                        "h",
                        2,
                        vec![
                            d("const int", "m", "m0 + 8 * f + 2 * q + h"),
                            Stmt::assign(
                                "D[(long long)m * ldd + col]",
                                format!("{cvt}(rc_silu(acc[f][h]) * acc[f][2 + h])"),
                            ),
                        ],
                    )],
                )],
            ),
        ],
        GroupedEpilogue::Scatter => vec![
            c("row m to D[sorted_ids[m]] (the K split's slab), columns col, col + 1, times the router weight"),
            if_(
                "col_ok",
                vec![Stmt::unrolled(
                    "f",
                    p.frags,
                    vec![if_(
                        "live[f]",
                        vec![Stmt::unrolled(
                            "h",
                            2,
                            vec![
                                d("const int", "m", "m0 + 8 * f + 2 * q + h"),
                                d("const int", "entry", "__ldg(sorted_ids + m)"),
                                if_(
                                    "entry < entries",
                                    vec![
                                        d("const float", "w", "weights != nullptr ? __ldg(weights + entry) : 1.0f"),
                                        d(
                                            &format!("{ta}* const"),
                                            "drow",
                                            "D + split * split_stride + (long long)entry * ldd",
                                        ),
                                        store_pair(cfg.element, "drow + col", "w * acc[f][h]", "w * acc[f][2 + h]"),
                                    ],
                                ),
                            ],
                        )],
                    )],
                )],
            ),
        ],
    }
}

/// Generate a streamed configuration's kernel (the parameters of the grouped kernels,
/// so [`GeneratedGroupedGemm::launch`] runs it).
pub(super) fn generate(cfg: &GroupedGemmConfig) -> Result<GeneratedGroupedGemm, GroupedGemmError> {
    let p = plan(cfg)?;
    let name = kernel_name(cfg, &p);
    let atom = match cfg.element {
        Element::BF16 => mma_sm80::sm80_16x8x16_f32_bf16_bf16_f32(),
        _ => mma_sm80::sm80_16x8x16_f32_f16_f16_f32(),
    };
    let mma = atom.fn_name().to_string();
    let mut snippets = match &p.lane_ring {
        None => vec![ld_global_stream(16).snippet],
        Some(ring) => lane_ring::snippets(ring),
    };
    snippets.push(atom.snippet.clone());
    snippets.extend(crate::grid_dependency::snippets());
    if cfg.prepared {
        snippets.push(rcute_atom::prefetch::prefetch_l2());
    }
    let mut items = unit_preamble(&snippets, UINTPTR_FOR_NVRTC);
    if cfg.epilogue == GroupedEpilogue::SwiGlu {
        items.push(super::silu::silu_helper());
    }
    let mut body = setup(cfg, &p);
    body.extend(mainloop(cfg, &p, &mma));
    body.extend(epilogue(cfg, &p));
    let [bm, bn, bk] = cfg.tile;
    let f = CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({})", p.threads()),
        ret: "void".into(),
        name: name.clone(),
        params: super::kernel::params(cfg),
        doc: vec![
            format!(
                "register-streamed grouped GEMM over M padded rows (row tiles of {bm}, expert block_expert[tile]), {} warps of 16 weight rows, {bn} rows per CTA, {bk}-k chunks, {} in flight per warp",
                p.warps, p.ring
            ),
            if cfg.prepared {
                "grid (max row tiles, ceil(N / output columns per CTA), K splits); entries = T * topk routed entries; prefetch_k_tiles > 0: before the grid-dependency wait, each warp prefetches that many chunks of its block into L2".into()
            } else {
                "grid (max row tiles, ceil(N / output columns per CTA), K splits); entries = T * topk routed entries; the prefetch parameters are unused".into()
            },
        ],
        body,
    };
    let prelude = if cfg.prepared {
        super::prefetch::prelude_prepared(cfg, p.warps)
    } else {
        vec![]
    };
    items.push(Item::Function(crate::grid_dependency::chain_link_with_prelude(
        prelude, f,
    )));
    let unit = Unit {
        header: vec![
            format!("{name}: generated by rcute (crates/kernel/src/grouped_gemm/streamed.rs); do not edit."),
            format!(
                "grouped (MoE) decode GEMM, register-streamed swap-AB (ld.global.nc, mma.sync m16n8k16: weight rows = MMA rows, A rows = MMA columns): A {} ({}), epilogue {}",
                cfg.element.ptx(),
                cfg.a.describe(),
                cfg.epilogue.describe()
            ),
            format!(
                "tile {bm}x{bn}x{bk}, {} warps, ring of {} chunks{}{}{}",
                p.warps,
                p.ring,
                if p.lane_ring.is_some() {
                    " in each lane's own slots of a shared cp.async ring (rcute_collective::lane_ring, waited by count)"
                } else {
                    ""
                },
                if cfg.k_rotate { ", K rotated per warp" } else { "" },
                if cfg.prepared {
                    ", B the prepared expert weight (rcute_collective::moe_prepared: 512-byte warp loads, one run per 16-row block)"
                } else {
                    ""
                }
            ),
        ],
        includes: vec![],
        items,
    };
    let mut config = cfg.clone();
    config.stages = Some(p.ring as usize);
    Ok(GeneratedGroupedGemm {
        name,
        source: unit.render(),
        threads: p.threads() as u32,
        smem_bytes: p.smem_bytes() as u32,
        config,
    })
}
