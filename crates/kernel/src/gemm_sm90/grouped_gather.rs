//! The gathering form of the grouped SwiGLU GEMM ([`GemmSm90Config::gather_a`]; GEMM1 of
//! the MoE layer without the separate row gather of `grouped_gemm::gather`): A is the token
//! matrix `x [T, K]`, and tile row `m` is `x[sorted_ids[m] / topk]` (zeros for the
//! alignment's padding rows, `sorted_ids[m] == entries`).
//!
//! TMA cannot gather rows on sm_90, so the whole producer warpgroup loads A's stage: each
//! of its 128 threads copies 16-byte chunks with `cp.async` (`src-size` 0 zero-fills a
//! padding row or a chunk past K) into the place the TMA box would have written, the
//! 128-byte swizzle of the stage's GMMA atom applied to the chunk's byte offset
//! ([`a_chunk_offset`]), and then arrives on the stage's full mbarrier with
//! `cp.async.mbarrier.arrive.noinc` once its copies have landed. B stays TMA (one elected
//! thread expects B's bytes and issues the boxes), so the full barrier counts the 128
//! producer threads and that thread's `arrive.expect_tx`. The consumers run the family's
//! mainloop with one proxy fence after the full barrier (`cp.async` writes through the
//! generic proxy, `wgmma` reads through the async proxy).
//!
//! Measured on an H100 (BENCHMARKS.md, "Session 21 (helper moegat)"): the fence costs
//! nothing measurable (a build without it ran the layer within 1 % at every shape), and
//! publishing each stage from the producer instead (`cp.async` groups, `wait_group`, the
//! fence, a plain arrival `stages - 2` k-tiles later) was slower (Mixtral T = 1024: 1853
//! against 1660 us). The producer's copy loop is kept short ("Session 21 (helper gatpp)"):
//! each thread computes its rows' 64-bit addresses once per tile, a k-tile adds one 32-bit
//! byte offset to each, and the copies it skips (padding rows, chunks past K) are the bits
//! of one mask tested straight into `cp.async`'s `ignore-src` predicate: 57 SASS
//! instructions from a k-tile's empty-barrier wait to its arrival against 104 before. ncu of the ping-pong GEMM1
//! at Mixtral T = 1024 (two row tiles per expert, where the weight stream no longer bounds
//! it) had found the longer loop on the critical path: the producer warps issued for most
//! of each k-tile (with dispatch stalls beside the consumers' `wgmma` on the same SM
//! sub-partitions) instead of waiting for free stages, and the consumers' `wgmma` pipe ran
//! dry between k-tiles; with the short loop that GEMM1 took 948 instead of 1030 us (TMA:
//! 903). The ops' Auto runs this GEMM1 up to one row tile per expert, where it makes the
//! layer 5 % faster (DeepSeek-V2-Lite T = 1024), and the TMA one above, where the
//! ping-pong layer is still 1-2 % (DeepSeek-V2-Lite T = 2048, 4096) to 5-8 % (Mixtral
//! T = 1024) slower with this one.

use super::*;

/// Producer threads: one warpgroup.
const THREADS: i64 = WG;

/// Bytes of one `cp.async` chunk.
const CHUNK: i64 = 16;

/// The gathering form's own limits: the grouped SwiGLU member of bf16 / f16 operands,
/// without clusters, a stage's chunks a whole number per producer thread.
pub(super) fn check(cfg: &GemmSm90Config) -> Result<(), GemmError> {
    if cfg.grouped != Some(Sm90Grouped::SwiGlu) || !matches!(cfg.ab, Element::BF16 | Element::F16) {
        return Err(cfg_err(
            "gather_a: the grouped SwiGLU GEMM of bf16 / f16 operands only (MoE GEMM1)",
        ));
    }
    if cfg.cluster != [1, 1] {
        return Err(cfg_err(
            "gather_a: no clusters (A is not multicast and the cluster walk pairs tiles)",
        ));
    }
    let chunks = cfg.tile[0] * cfg.tile[2] * cfg.ab.bytes() as i64 / CHUNK;
    if chunks % THREADS != 0 {
        return Err(cfg_err(format!(
            "gather_a: {chunks} 16-byte chunks of an A stage are not a whole number per producer thread ({THREADS})"
        )));
    }
    Ok(())
}

/// The producer's `cp.async` atoms: the 16-byte copy to a shared address that a mask bit skips (zero-fills), the
/// barrier arrival when a thread's copies land, and the wait for them all.
pub(super) fn snippets() -> Vec<Snippet> {
    use rcute_atom::copy_cp_async::{cp_async_cg16_ignore_src_addr, cp_async_mbarrier_arrive_noinc, cp_async_wait_all};
    vec![
        cp_async_cg16_ignore_src_addr(),
        cp_async_mbarrier_arrive_noinc(),
        cp_async_wait_all(),
    ]
}

/// The gathering form's kernel parameters after the grouped ones: the token matrix, its
/// leading dimension (elements) and `topk` (entry `e` is token `e / topk`).
pub(super) fn params(cfg: &GemmSm90Config) -> Vec<(String, String)> {
    vec![
        (format!("const {}* __restrict__", cfg.ab.cuda_type()), "x".into()),
        ("long long".into(), "ldx".into()),
        ("int".into(), "topk".into()),
    ]
}

/// Arrivals that complete a stage's full mbarrier: the producer threads' `cp.async`
/// arrivals and the elected thread's `arrive.expect_tx` for B.
pub(super) fn full_arrivals() -> i64 {
    THREADS + 1
}

/// The byte offset of 16-byte chunk `chunk` of row `row` in an A stage: the row-major
/// `(BM, BK)` tile of 128-byte rows through the byte swizzle of the stage's GMMA atom
/// (`Sw<3,4,3>` for 128B), as the TMA box writes it. The producer emits it for its
/// run-time `(g_row, g_chunk)`; the tests evaluate it at every static chunk against the
/// collective's `smem_layout_a`.
pub fn a_chunk_offset(p: &Sm90Plan, row: &Int, chunk: &Int) -> Int {
    let row_bytes = p.mainloop.tma_box_a[0] as i64 * p.mainloop.config.a.bytes() as i64;
    let first = row.mul(&Int::Static(row_bytes)).add(&chunk.mul(&Int::Static(CHUNK)));
    p.smem_atom.byte_swizzle.apply_expr(&first)
}

/// The producer warpgroup's mainloop: per tile the gathered rows' tokens, per k-tile wait
/// for the stage, B's TMA boxes from the elected thread and every thread's A chunks.
pub(super) fn mainloop_loads(k: &Ctx) -> Vec<Stmt> {
    let p = k.p;
    let s = k.s;
    let per_row = k.row_bytes / CHUNK;
    let elems = CHUNK / k.cfg.ab.bytes() as i64;
    let rows_per_pass = THREADS / per_row;
    let passes = k.bm * per_row / THREADS;
    let sw = p.smem_atom.byte_swizzle;
    let dst = a_chunk_offset(
        p,
        &Int::Dynamic(Expr::var("g_row")),
        &Int::Dynamic(Expr::var("g_chunk")),
    )
    .to_cpp();
    let pass_bytes = rows_per_pass * k.row_bytes;
    let mut ml = vec![
        dc(
            "const int",
            "g_chunk",
            format!("threadIdx.x % {per_row}"),
            format!("this thread's {CHUNK}-byte chunk of a {}-byte k-tile row", k.row_bytes),
        ),
        dc(
            "const int",
            "g_row",
            format!("threadIdx.x / {per_row}"),
            format!("its first tile row; it copies rows g_row + {rows_per_pass} * i, i < {passes}"),
        ),
        dc(
            "const int",
            "g_col",
            format!("g_chunk * {elems} < K ? g_chunk * {elems} : 0"),
            "its chunk's column in a row of x; 0 past K, where its copies read nothing (the address stays in x)",
        ),
        c(format!(
            "the chunk's byte offset in an A stage: row-major ({}, {}) rows of {} B through {sw} on bytes",
            k.bm, k.bk, k.row_bytes
        )),
        c(format!(
            "(the GMMA atom's byte swizzle, rcute_layout::Swizzle::apply_expr; {pass_bytes} B per pass, a multiple of its 1024-B period)"
        )),
        d("const uint32_t", "g_dst", dst),
        dc(
            "const bool",
            "leader",
            "warp == 0 && rc_elect_one_sync()",
            "B's TMA loads and the expect_tx arrival",
        ),
        d("uint32_t", "stage", "0"),
        d("uint32_t", "phase", "0"),
    ];
    let mut body = tile_of(k, TileNeeds::WithSplit);
    body.extend(tile_tokens(passes, rows_per_pass));
    body.extend(grouped::pad_upper(k));
    let mut kt_body = vec![
        dc(
            "const uint32_t",
            "full",
            "bar_full + 8 * stage",
            "producer_acquire: every producer thread waits for the consumers to free the stage",
        ),
        e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
    ];
    let mut b = vec![e(format!("rc_mbarrier_arrive_expect_tx(full, {}u)", p.stage_bytes[1]))];
    b.extend(grouped::b_loads(k, Sm90Grouped::SwiGlu));
    kt_body.push(if_("leader", b));
    kt_body.extend(a_copies(k, passes, pass_bytes));
    kt_body.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
    body.push(for_("kt", "kt0", "kt0 + k_iters", kt_body));
    ml.push(work_loop(k, body, true));
    ml.push(c("no producer thread leaves with copies in flight"));
    ml.push(e("rc_cp_async_wait_all()"));
    ml
}

/// Per tile: the global address of each row this thread copies at its chunk's column
/// (row 0 of `x` for a padding row, whose copies read nothing) and which of them are token
/// rows. A k-tile's copy then adds one 32-bit byte offset to a 64-bit address (`IADD3` +
/// `IADD3.X`): ncu found the producer's copy loop on the critical path of the ping-pong
/// schedule ("Session 21 (helper gatpp)"), and pointers of the element type made ptxas
/// recompute `x + 2 * (row + k)` per copy.
fn tile_tokens(passes: i64, rows_per_pass: i64) -> Vec<Stmt> {
    vec![
        Stmt::Array {
            ty: "unsigned long long".into(),
            name: "row".into(),
            len: passes as usize,
            comment: Some(format!(
                "address of x's row for tile row g_row + {rows_per_pass} * i at column g_col (row 0 for a padding row)"
            )),
        },
        dc(
            "uint32_t",
            "live",
            "0u",
            format!("bit i: tile row g_row + {rows_per_pass} * i is a token row (else zero-filled)"),
        ),
        unroll(
            "i",
            passes,
            vec![
                d(
                    "const int",
                    "id",
                    format!("__ldg(sorted_ids + m0 + g_row + {rows_per_pass} * i)"),
                ),
                d("const bool", "token_row", "id < entries"),
                Stmt::assign(
                    "row[i]",
                    "reinterpret_cast<unsigned long long>(x + (token_row ? (long long)(id / topk) * ldx : 0) + g_col)",
                ),
                Stmt::assign("live", "live | (uint32_t)token_row << i"),
            ],
        ),
    ]
}

/// One k-tile's A chunks of this thread: `cp.async` of 16 bytes at the row's address plus
/// the k-tile's byte offset, skipped (nothing read, zeros written) for a padding row or a
/// chunk past K, then the thread's arrival on the full barrier when they land.
fn a_copies(k: &Ctx, passes: i64, pass_bytes: i64) -> Vec<Stmt> {
    let p = k.p;
    let elems = CHUNK / k.cfg.ab.bytes() as i64;
    let copy = e(format!(
        "rc_cp_async_cg_16_ignore_src_addr(a_stage + {pass_bytes}u * i, reinterpret_cast<const void*>(row[i] + koff), skip & (1u << i))"
    ));
    // pad_skip: passes from half of them on copy the tile's upper half, which no warpgroup
    // reads where its first row is padding (`upper_routed`).
    let copy = if k.cfg.pad_skip {
        if_(format!("i < {} || upper_routed", passes / 2), vec![copy])
    } else {
        copy
    };
    let base = var("stage")
        .mul(&Expr::lit(p.stage_bytes[0] as i64))
        .add(&Expr::lit(p.offsets[0] as i64))
        .to_cpp();
    vec![
        dc(
            "const bool",
            "in_k",
            format!("kt * {} + g_chunk * {elems} < K", k.bk),
            "this thread's chunk of the k-tile lies inside K (K is a whole number of chunks)",
        ),
        dc(
            "const uint32_t",
            "skip",
            "in_k ? ~live : 0xffffffffu",
            "bit i: row i's copy reads nothing and zero-fills (a padding row, or past K)",
        ),
        dc(
            "const uint32_t",
            "koff",
            format!("in_k ? (uint32_t)kt * {}u : 0u", k.row_bytes),
            "the k-tile's byte offset in a row (0 past K: the address stays in x)",
        ),
        d("const uint32_t", "a_stage", format!("smem_u32 + {base} + g_dst")),
        unroll("i", passes, vec![copy]),
        c("the stage's full barrier counts this thread once its copies have landed (noinc: the init count holds it)"),
        e("rc_cp_async_mbarrier_arrive_noinc(full)"),
    ]
}

/// The consumers' proxy fence after a stage's full barrier: the A rows came through
/// `cp.async` (generic proxy), `wgmma` reads shared memory through the async proxy.
pub(super) fn consumer_fence() -> Vec<Stmt> {
    vec![
        c("the stage's A rows were written by cp.async (generic proxy): order them before wgmma's async-proxy reads"),
        e("rc_fence_proxy_async_shared()"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grouped_gemm::{sm90_gather_config, SM90_NARROW_TILE, SM90_TILE};

    /// Every chunk lands where the collective's swizzled `(BM, BK, PIPE)` layout of A puts
    /// its first element (stage 0), for both SwiGLU tiles and both 16-bit types.
    #[test]
    fn chunks_land_where_the_smem_layout_puts_them() {
        for el in [Element::BF16, Element::F16] {
            for tile in [SM90_TILE, SM90_NARROW_TILE] {
                let cfg = sm90_gather_config(el, tile, Sm90Schedule::Cooperative);
                let p = plan(&cfg).unwrap();
                let lay = &p.mainloop.smem_layout_a;
                let eb = el.bytes() as i64;
                for row in 0..tile[0] {
                    for chunk in 0..tile[2] * eb / CHUNK {
                        let col = chunk * CHUNK / eb;
                        let want = lay.crd2idx(&tuple!(row, col, 0)).unwrap().as_static().unwrap() * eb;
                        let got = a_chunk_offset(&p, &Int::Static(row), &Int::Static(chunk)).known();
                        assert_eq!(got, Some(want), "{el:?} {tile:?} ({row}, {chunk})");
                    }
                }
            }
        }
    }
}
