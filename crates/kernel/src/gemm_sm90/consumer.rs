//! The consumer warpgroups: per tile, the `wgmma` mainloop over the stage ring (SS
//! descriptors from the layouts of the shared-memory atoms), then the split-K partial store
//! or the epilogue ([`super::epilogue`]).

use super::*;

/// The descriptor expression (upper fields constant) of the K-major operand block of 64
/// (or BN) rows and one k-block of 16 elements, at the shared address `addr`.
pub(super) fn desc_expr(p: &Sm90Plan, rows: i64, bk: i64, addr: &str) -> Result<String, GemmError> {
    let tile = p
        .smem_atom
        .layout
        .tile_to_shape(&tuple!(rows, bk), None)
        .map_err(|e| cfg_err(e.to_string()))?;
    let k = p.mma.shape_mnk[2];
    let kblock = tile
        .compose_tiler(&Tiler::shape(&[rows, k]))
        .map_err(|e| cfg_err(e.to_string()))?;
    let desc =
        make_gmma_desc(Major::K, p.smem_atom.mode, &kblock, p.smem_atom.elem).map_err(|e| cfg_err(e.to_string()))?;
    desc.device_expr(addr).map_err(|e| cfg_err(e.to_string()))
}

/// Byte offset of k-block `kb` in a K-major tile (the unswizzled column offset).
pub(super) fn kblock_bytes(p: &Sm90Plan, bk: i64, kb: i64) -> Result<i64, GemmError> {
    let tile: Layout = p
        .smem_atom
        .layout
        .tile_to_shape(&tuple!(8, bk), None)
        .map_err(|e| cfg_err(e.to_string()))?;
    let k = p.mma.shape_mnk[2];
    let kk = kb * k;
    let off = tile.crd2idx(&tuple!(0, kk)).map_err(|e| cfg_err(e.to_string()))?;
    Ok(off.as_static().unwrap_or(0) * p.smem_atom.elem.bytes() as i64)
}

/// consumer_release of stage `prev`: a local arrive, or (in a cluster) a remote arrive on
/// every CTA whose producer writes into this stage.
fn release(k: &Ctx) -> Vec<Stmt> {
    if !k.clustered {
        return vec![e("rc_mbarrier_arrive(bar_empty + 8 * prev)")];
    }
    vec![for_(
        "r",
        "0",
        (k.cm * k.cn).to_string(),
        vec![if_(
            "(peers >> r) & 1",
            vec![e("rc_mbarrier_arrive_cluster(bar_empty + 8 * prev, (uint32_t)r)")],
        )],
    )]
}

/// The consumer warpgroups' body: their state, then per tile the mainloop and the
/// epilogue (or split-K partials).
pub(super) fn consumer(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let mut cons = state(k);
    let mut tile = tile_of(k, TileNeeds::WithSplit);
    if k.pp {
        // After the validity check, so only real tiles alternate between the warpgroups.
        tile.insert(3, if_("(local & 1) != cw", vec![e("++local"), Stmt::Continue]));
    }
    tile.extend(epilogue::broadcast_loads(k));
    tile.extend(mainloop(k)?);
    match k.cfg.grouped {
        Some(g) => tile.extend(grouped::epilogue(k, g)?),
        None => tile.push(Stmt::If {
            cond: "split_k > 1".into(),
            then: split_partials(k)?,
            otherwise: epilogue::epilogue(k)?,
        }),
    }
    tile.push(e("++local"));
    cons.push(work_loop(tile));
    cons.push(c(
        "store tail: the last TMA stores must finish reading shared memory before the CTA exits",
    ));
    cons.push(if_("epi_leader", vec![e("rc_bulk_wait_group<0>()")]));
    Ok(cons)
}

/// Register raise, warpgroup roles, epilogue group, pipeline states and accumulators.
fn state(k: &Ctx) -> Vec<Stmt> {
    let (p, coop, pp) = (k.p, k.coop, k.pp);
    let mut cons = vec![e(format!("rc_setmaxnreg_inc<{}>()", warpgroup_regs(k.cfg)[1]))];
    if coop || pp {
        cons.push(dc("const int", "cw", "wg - 1", "consumer warpgroup index"));
    }
    cons.push(dc(
        "const int",
        "wg_row0",
        if coop {
            format!("cw * {}", p.wg_rows)
        } else {
            "0".into()
        },
        "first tile row of this warpgroup's accumulators",
    ));
    cons.push(dc(
        "const int",
        "grp",
        if pp || coop { "cw" } else { "0" },
        if coop {
            "epilogue group: this warpgroup stages and stores its own rows of every subtile"
        } else {
            "epilogue group: the warpgroup that stores the tile"
        },
    ));
    cons.push(dc(
        "const bool",
        "epi_leader",
        "(threadIdx.x % 128) == 0",
        "issues the group's TMA stores",
    ));
    if k.staged {
        cons.push(dc(
            "const int",
            "epi_tid",
            "threadIdx.x % 128",
            "thread index within the epilogue group",
        ));
    }
    let epi_smem = var("grp")
        .mul(&Expr::lit(k.epi_set_bytes as i64))
        .add(&Expr::lit(p.offsets[2] as i64));
    cons.push(d(
        "unsigned char* const",
        "epi_smem",
        format!("smem + {}", epi_smem.to_cpp()),
    ));
    cons.push(dc(
        "const uint32_t",
        "epi_bar",
        if pp || coop { "1u + (uint32_t)cw" } else { "1u" },
        "the group's named barrier (128 threads; 0 is __syncthreads)",
    ));
    let states: &[&str] = if k.cfg.with_c() {
        &["stage", "phase", "cstage", "cphase"]
    } else {
        &["stage", "phase"]
    };
    for v in states {
        cons.push(d("uint32_t", v, "0"));
    }
    cons.push(dc(
        "uint32_t",
        "dbuf",
        "0",
        "D buffer ring index (when not reusing C's buffers)",
    ));
    cons.push(d("int", "local", "0"));
    if pp {
        cons.push(c(
            "Ping-pong: warpgroup cw takes the CTA's tiles cw, cw+2, ...; its pipeline view skips the other's k-tiles",
        ));
        cons.push(e(format!(
            "rc_pipe_advance(stage, phase, (uint32_t)(cw * k_iters), {}u)",
            k.s
        )));
    }
    cons.push(Stmt::Array {
        ty: acc_cty(k.cfg.ab).into(),
        name: format!("acc[{}]", p.m_atoms),
        len: k.nacc as usize,
        comment: Some(format!(
            "CLayout_64x{} per m64 atom: acc[a][4j+2h+e] = (row 16*warp + lane/4 + 8h, col 8j + 2*(lane%4) + e)",
            k.bn
        )),
    });
    cons
}

/// `rc_fence_acc` on every accumulator (CuTe's `warpgroup_fence_operand`).
fn fence_acc(k: &Ctx) -> Stmt {
    unroll(
        "a",
        k.p.m_atoms,
        vec![unroll("i", k.nacc, vec![e("rc_fence_acc(acc[a][i])")])],
    )
}

/// The `wgmma` batch of one k-tile: per m64 atom and k-block, the SS descriptors at the
/// atom's rows and the k-block's column (a loop where the k-blocks are evenly spaced in the
/// swizzled layout, as for every K-major atom; unrolled in Rust otherwise).
fn wgmma_batch(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let p = k.p;
    let kblocks = k.bk / p.mma.shape_mnk[2];
    let step = kblock_bytes(p, k.bk, 1.min(kblocks - 1))?;
    let even = (0..kblocks)
        .map(|kb| kblock_bytes(p, k.bk, kb))
        .collect::<Result<Vec<_>, _>>()?
        == (0..kblocks).map(|kb| kb * step).collect::<Vec<_>>();
    let call = |a: Expr, kb: Expr| -> Result<Stmt, GemmError> {
        let a_off = a.mul(&Expr::lit(64 * k.row_bytes)).add(&kb.mul(&Expr::lit(step)));
        let b_off = kb.mul(&Expr::lit(step));
        let addr = |base: &str, off: &Expr| var(base).add(off).to_cpp();
        let da = desc_expr(p, 64, k.bk, &addr("a_base", &a_off))?;
        let dbx = desc_expr(p, k.bn, k.bk, &addr("b_base", &b_off))?;
        Ok(e(format!(
            "{}({da}, {dbx}, acc[{}], 1)",
            p.mma.snippet.name,
            a.to_cpp()
        )))
    };
    if even {
        return Ok(vec![
            c(format!(
                "per k-block kb, then m64 atom a (CuTe's order: consecutive wgmmas accumulate into different registers): K-major {:?} descriptors (LBO/SBO from make_gmma_desc), k-blocks {step} B apart",
                p.smem_atom.mode
            )),
            unroll("kb", kblocks, vec![unroll("a", p.m_atoms, vec![call(var("a"), var("kb"))?])]),
        ]);
    }
    let mut v = vec![];
    for kb in 0..kblocks {
        for a in 0..p.m_atoms {
            let kb_off = kblock_bytes(p, k.bk, kb)?;
            let addr = |base: &str, off: i64| plus(base, off);
            let da = desc_expr(p, 64, k.bk, &addr("a_base", a * 64 * k.row_bytes + kb_off))?;
            let dbx = desc_expr(p, k.bn, k.bk, &addr("b_base", kb_off))?;
            v.push(c(format!(
                "m64 atom {a}, k-block {kb}: K-major descriptors (LBO/SBO from make_gmma_desc)"
            )));
            v.push(e(format!("{}({da}, {dbx}, acc[{a}], 1)", p.mma.snippet.name)));
        }
    }
    Ok(v)
}

/// The grouped member: a warpgroup whose 64 rows are all padding (its first row is, and an
/// expert's routed rows come before its padding) skips its `wgmma` batches and only waits
/// for and releases each stage, so that the other warpgroup has the tensor cores to itself;
/// its accumulators stay zero, as the products of zero-filled padding rows were. Other
/// members: the mainloop `mma` as it is.
fn grouped_rows_or_drain(k: &Ctx, mma: Vec<Stmt>) -> Vec<Stmt> {
    if k.cfg.grouped.is_none() {
        return mma;
    }
    let s = k.s;
    let drain = for_(
        "kt",
        "kt0",
        "kt0 + k_iters",
        vec![
            e("rc_mbarrier_wait_parity(bar_full + 8 * stage, phase)"),
            Stmt::assign("prev", "stage"),
            if_("lane == 0", release(k)),
            e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")),
        ],
    );
    vec![
        dc(
            "const bool",
            "wg_routed",
            if k.clustered {
                "mine && __ldg(sorted_ids + m0 + wg_row0) < entries"
            } else {
                "__ldg(sorted_ids + m0 + wg_row0) < entries"
            },
            if k.clustered {
                "this CTA has a tile and the warpgroup's first row is a routed entry (padding rows follow an expert's entries)"
            } else {
                "this warpgroup's first row is a routed entry (padding rows follow an expert's entries)"
            },
        ),
        Stmt::If {
            cond: "wg_routed".into(),
            then: mma,
            otherwise: vec![
                c("all 64 rows padding: no wgmma, only consumer_wait / consumer_release of each stage"),
                drain,
            ],
        },
    ]
}

/// The mainloop of one tile: zero the accumulators, then per k-tile wait for the stage,
/// issue its `wgmma` batch and release the stage the finished batch read.
fn mainloop(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let (p, s, pp) = (k.p, k.s, k.pp);
    let mut ml = vec![for_(
        "a",
        "0",
        p.m_atoms.to_string(),
        vec![unroll("i", k.nacc, vec![Stmt::assign("acc[a][i]", "0")])],
    )];
    if pp {
        ml.extend(order_lookahead());
        ml.push(c(
            "Ordered math: wait for the other warpgroup's mainloop of the previous tile",
        ));
        ml.push(if_(
            "local > 0",
            vec![e("rc_named_barrier_sync(3u + (uint32_t)cw, 256u)")],
        ));
    }
    ml.push(d("uint32_t", "prev", "0"));
    // The stage's operand addresses: the operand's offset, then the stage.
    let base = |off: usize, bytes: usize| {
        let stage = format!("stage * {bytes}u");
        if off == 0 {
            stage
        } else {
            format!("{off}u + {stage}")
        }
    };
    let mut kloop = vec![
        c("consumer_wait: the stage's TMA transactions have landed"),
        e("rc_mbarrier_wait_parity(bar_full + 8 * stage, phase)"),
        d(
            "const uint32_t",
            "a_base",
            format!(
                "smem_u32 + {} + (uint32_t)wg_row0 * {}u",
                base(p.offsets[0], p.stage_bytes[0]),
                k.row_bytes
            ),
        ),
        d(
            "const uint32_t",
            "b_base",
            format!("smem_u32 + {}", base(p.offsets[1], p.stage_bytes[1])),
        ),
        fence_acc(k),
        e("rc_wgmma_fence()"),
    ];
    kloop.extend(wgmma_batch(k)?);
    kloop.push(e("rc_wgmma_commit_group()"));
    kloop.push(fence_acc(k));
    let release = release(k);
    if k.cfg.mma_pipe == 0 {
        kloop.push(c(
            "K_PIPE_MMAS = 0: wait for this batch, then consumer_release its stage at once",
        ));
        kloop.push(e("rc_wgmma_wait_group<0>()"));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.push(if_("lane == 0", release));
        kloop.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
        let mut issued = vec![for_("kt", "kt0", "kt0 + k_iters", kloop)];
        if pp {
            issued.extend(order_arrive());
        }
        ml.extend(grouped_rows_or_drain(k, issued));
    } else {
        kloop.push(c(
            "keep one wgmma batch in flight; the previous one is done: consumer_release its stage",
        ));
        kloop.push(e("rc_wgmma_wait_group<1>()"));
        kloop.push(if_("kt > kt0 && lane == 0", release.clone()));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
        let mut pipelined = vec![for_("kt", "kt0", "kt0 + k_iters", kloop)];
        if pp {
            pipelined.extend(order_arrive());
        }
        pipelined.extend([
            c("mma_tail: the last batch is done; consumer_release its stage"),
            e("rc_wgmma_wait_group<0>()"),
            fence_acc(k),
            if_("k_iters > 0 && lane == 0", release),
        ]);
        ml.extend(grouped_rows_or_drain(k, pipelined));
    }
    if pp {
        ml.push(c(
            "skip the other warpgroup's k-tiles in this warpgroup's view of the stage ring",
        ));
        ml.push(e(format!("rc_pipe_advance(stage, phase, (uint32_t)k_iters, {s}u)")));
    }
    Ok(ml)
}

/// Ping-pong, before the ordered wait (off the tensor cores' critical path): whether the
/// other warpgroup has a next tile to wait for this one's mainloop (the scheduler's
/// look-ahead divides 64-bit work ids).
fn order_lookahead() -> Vec<Stmt> {
    vec![
        c("whether the other warpgroup has a next tile (it waits for this mainloop only then)"),
        d("bool", "other_next", "false"),
        Stmt::Loop {
            init: "unsigned long long w = work + sched.stride()".into(),
            cond: "w < sched.total_work && !other_next".into(),
            step: "w += sched.stride()".into(),
            body: vec![Stmt::assign("other_next", "sched.cluster_valid(w)")],
        },
    ]
}

/// Ping-pong: the other warpgroup's next mainloop may start as soon as this one's last
/// `wgmma` batch is issued (CUTLASS's `math_wg_order_barrier.arrive()` between `mma` and
/// `mma_tail`), so the tensor cores get its first batch while this batch still runs,
/// instead of idling through this batch's drain and the stage release.
fn order_arrive() -> Vec<Stmt> {
    vec![
        c("Ordered math: every batch of this tile is issued; let the other warpgroup's next mainloop start"),
        if_(
            "other_next",
            vec![e("rc_named_barrier_arrive(3u + (uint32_t)(1 - cw), 256u)")],
        ),
    ]
}
