//! The consumer warpgroups: per tile, the `wgmma` mainloop over the stage ring (SS
//! descriptors from the layouts of the shared-memory atoms), then the split-K partial store
//! or the epilogue ([`super::epilogue`]).

use super::*;

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
    let mut tile = if decodes_ahead(k) {
        cons.extend(decode_first(k));
        tile_decoded_ahead(k, TileNeeds::SplitOnly)
    } else {
        tile_of(k, TileNeeds::SplitOnly)
    };
    if k.pp {
        // After the validity check, so only real tiles alternate between the warpgroups.
        tile.insert(3, if_("(local & 1) != cw", pingpong_skip(k)));
    }
    tile.extend(epilogue::broadcast_loads(k));
    tile.extend(mainloop(k)?);
    match k.cfg.grouped {
        // pad_skip: a warpgroup of padding rows only (no wgmma) stores nothing either.
        Some(g) if k.cfg.pad_skip => tile.push(if_("wg_routed", grouped_epilogue::epilogue(k, g)?)),
        Some(g) => tile.extend(grouped_epilogue::epilogue(k, g)?),
        None if k.sk => tile.extend(stream_k::reduce_then_epilogue(k)?),
        None => tile.push(Stmt::If {
            cond: "split_k > 1".into(),
            then: split_partials(k)?,
            otherwise: epilogue::epilogue(k)?,
        }),
    }
    tile.push(e("++local"));
    cons.push(if k.cfg.dynamic_walk {
        dynamic::consumer_loop(tile)
    } else {
        work_loop(k, tile, false)
    });
    cons.push(c(
        "store tail: the last TMA stores must finish reading shared memory before the CTA exits",
    ));
    cons.push(if_("epi_leader", vec![e("rc_bulk_wait_group<0>()")]));
    Ok(cons)
}

/// Ping-pong: the other warpgroup's item. With stream-K the items' k-tile counts differ,
/// so this warpgroup's view of the stage ring skips the item's own k-tiles here; without
/// it every tile has `k_iters` k-tiles and the view skips them after this warpgroup's own
/// mainloop instead ([`state`], [`mainloop`]).
fn pingpong_skip(k: &Ctx) -> Vec<Stmt> {
    let mut v = vec![];
    if k.sk {
        v.push(c(
            "stream-K: skip the other warpgroup's item, its own k-tiles, in this warpgroup's view of the ring",
        ));
        v.push(e(format!("rc_pipe_advance(stage, phase, (uint32_t)k_iters, {}u)", k.s)));
    }
    v.extend([e("++local"), Stmt::Continue]);
    v
}

/// Whether the consumers decode each next work item ahead, during the current tile's
/// `mma_tail` ([`decode_next`]): the cooperative plain GEMM with a `wgmma` batch kept in
/// flight (`mma_pipe = 1`), whose two warpgroups leave the tensor cores idle from the last
/// `wgmma` of one tile to the first of the next (the epilogue and the next tile's head).
/// The tile walk's 64-bit divisions by run-time extents (`cluster_valid` and `tile`: about
/// 200 instructions with three `MUFU.RCP` chains) sat in that gap, 1.6 % of all warp
/// samples at bf16 4096^3 on an H100, 0.6 % after (BENCHMARKS.md, "Session 14 (helper
/// hopper5)"). With `mma_pipe = 0` the last batch is waited for inside the k-tile loop, so
/// there is no tail to hide the decode in and those kernels keep it at the tile's head;
/// ping-pong consumers decode while the other warpgroup's mainloop runs; the grouped
/// members walk their own way.
fn decodes_ahead(k: &Ctx) -> bool {
    k.coop && k.cfg.grouped.is_none() && k.cfg.mma_pipe != 0
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
        let what = if k.sk { "items" } else { "tiles" };
        cons.push(c(format!(
            "Ping-pong: warpgroup cw takes the CTA's {what} cw, cw+2, ...; its pipeline view skips the other's k-tiles"
        )));
        if !k.sk {
            // stream-K: the items' k-tile counts differ; `pingpong_skip` advances per item
            cons.push(e(format!(
                "rc_pipe_advance(stage, phase, (uint32_t)(cw * k_iters), {}u)",
                k.s
            )));
        }
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

/// The `wgmma` batch of one k-tile: per k-block and m64 atom, the descriptors' low words of
/// the stage (`a_desc`, `b_desc`) advanced by the atom's rows and the k-block's column, in
/// 16-byte units of the start address field, under the constant high word.
fn wgmma_batch(k: &Ctx) -> Vec<Stmt> {
    let dsc = &k.p.descriptors;
    let [a_hi, b_hi] = [dsc.a_words[1], dsc.b_words[1]];
    let a_off = var("a")
        .mul(&Expr::lit(dsc.atom_field as i64))
        .add(&var("kb").mul(&Expr::lit(dsc.kblock_field as i64)));
    let kb_off = var("kb").mul(&Expr::lit(dsc.kblock_field as i64));
    let n_atoms = k.p.mainloop.n_atoms;
    // Several wgmma atoms along N (BN wider than one atom): atom j reads B's rows from
    // j * atom_n and accumulates into the j-th run of acc[a] (the atoms' CLayout_64xN runs
    // laid end to end are the tile's CLayout_64xBN, so the epilogue indexes them as one).
    let (b_off, acc) = if n_atoms > 1 {
        let j_off = var("j").mul(&Expr::lit(dsc.natom_field as i64));
        let run = k.nacc / n_atoms;
        let ty = acc_cty(k.cfg.ab);
        (
            j_off.add(&kb_off),
            format!("*reinterpret_cast<{ty} (*)[{run}]>(acc[a] + j * {run})"),
        )
    } else {
        (kb_off, "acc[a]".to_string())
    };
    let wgmma = e(format!(
        "{}(0x{:016x}ull | (a_desc + {}), 0x{:016x}ull | (b_desc + {}), {acc}, 1)",
        k.p.mma.snippet.name,
        (a_hi as u64) << 32,
        a_off.to_cpp(),
        (b_hi as u64) << 32,
        b_off.to_cpp(),
    ));
    let per_atom = if n_atoms > 1 {
        vec![unroll("j", n_atoms, vec![wgmma])]
    } else {
        vec![wgmma]
    };
    let mut batch = vec![c(format!(
        "per k-block kb, then m64 atom a (CuTe's order: consecutive wgmmas accumulate into different registers): K-major {:?} descriptors (SBO, swizzle in the high word, from make_gmma_desc), m64 atoms {} B and k-blocks {} B apart",
        k.p.smem_atom.mode,
        dsc.atom_field * 16,
        dsc.kblock_field * 16
    ))];
    if n_atoms > 1 {
        batch.push(c(format!(
            "then {n_atoms} wgmma atoms j along N, {} B of B's rows apart, each into its run of {} accumulators",
            dsc.natom_field * 16,
            k.nacc / n_atoms
        )));
    }
    batch.push(unroll("kb", dsc.kblocks, vec![unroll("a", k.p.m_atoms, per_atom)]));
    batch
}

/// The grouped member: a warpgroup whose 64 rows are all padding (its first row is, and an
/// expert's routed rows come before its padding) skips its `wgmma` batches and only waits
/// for and releases each stage, so that the other warpgroup has the tensor cores to itself;
/// its accumulators stay zero, as the products of zero-filled padding rows were. Other
/// members: the mainloop `mma` as it is.
fn grouped_rows_or_drain(k: &Ctx, mma: Vec<Stmt>) -> Vec<Stmt> {
    // Ping-pong: the warpgroup owns the whole tile, whose first row is routed (an
    // expert's padding follows its entries within its last row tile).
    if k.cfg.grouped.is_none() || k.pp {
        return mma;
    }
    let s = k.s;
    let drain = for_(
        "kt",
        "0",
        "k_iters",
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
        if k.cfg.grouped.is_some() {
            ml.extend(grouped::pingpong_lookahead(k.bm));
        } else {
            ml.extend(order_lookahead(k));
        }
        ml.push(c(
            "Ordered math: wait for the other warpgroup's mainloop of the previous tile",
        ));
        ml.push(if_(
            "local > 0",
            vec![e("rc_named_barrier_sync(3u + (uint32_t)cw, 256u)")],
        ));
    }
    ml.push(d("uint32_t", "prev", "0"));
    let mut kloop = vec![
        c("consumer_wait: the stage's TMA transactions have landed"),
        e("rc_mbarrier_wait_parity(bar_full + 8 * stage, phase)"),
    ];
    if k.cfg.gather_a {
        kloop.extend(grouped_gather::consumer_fence());
    }
    kloop.extend([fence_acc(k), e("rc_wgmma_fence()")]);
    kloop.extend(wgmma_batch(k));
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
        kloop.extend(stage_step(k));
        let mut issued = stage_descriptors(k)?;
        issued.push(for_("kt", "0", "k_iters", kloop));
        if pp {
            issued.extend(order_arrive());
        }
        ml.extend(grouped_rows_or_drain(k, issued));
    } else {
        kloop.push(c(
            "keep one wgmma batch in flight; the previous one is done: consumer_release its stage",
        ));
        kloop.push(e("rc_wgmma_wait_group<1>()"));
        kloop.push(if_("kt > 0 && lane == 0", release.clone()));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.extend(stage_step(k));
        let mut pipelined = stage_descriptors(k)?;
        pipelined.push(for_("kt", "0", "k_iters", kloop));
        if pp {
            pipelined.extend(order_arrive());
        }
        if decodes_ahead(k) {
            pipelined.extend(decode_next(k));
        }
        pipelined.extend([
            c("mma_tail: the last batch is done; consumer_release its stage"),
            e("rc_wgmma_wait_group<0>()"),
            fence_acc(k),
            if_("k_iters > 0 && lane == 0", release),
        ]);
        ml.extend(grouped_rows_or_drain(k, pipelined));
    }
    if pp && !k.sk {
        ml.push(c(
            "skip the other warpgroup's k-tiles in this warpgroup's view of the stage ring",
        ));
        ml.push(e(format!("rc_pipe_advance(stage, phase, (uint32_t)k_iters, {s}u)")));
    }
    Ok(ml)
}

/// The low words of the `wgmma` descriptors of this warpgroup's A rows and of B in the
/// tile's first stage, k-block 0 (CuTe's `make_gmma_desc` at the stage's start: LBO | start
/// address >> 4), carried through the k-tile loop with the stage ([`stage_step`]).
fn stage_descriptors(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let (p, dsc) = (k.p, &k.p.descriptors);
    let low = |d: &GmmaDescriptor, addr: String| d.device_low_word_expr(&addr).map_err(|e| cfg_err(e.to_string()));
    let at = |off: usize, bytes: usize| match off {
        0 => format!("smem_u32 + stage * {bytes}u"),
        _ => format!("smem_u32 + {off}u + stage * {bytes}u"),
    };
    let a_addr = format!(
        "{} + (uint32_t)wg_row0 * {}u",
        at(p.offsets[0], p.stage_bytes[0]),
        k.row_bytes
    );
    Ok(vec![
        dc(
            "uint32_t",
            "a_desc",
            low(&dsc.a, a_addr)?,
            format!(
                "wgmma descriptor low words (CuTe's GmmaDescriptor) of the stage's A and B; m64 atoms, k-blocks and stages add bytes / 16 (all start addresses stay below {} B of the shared window: no carry out of the 14-bit field)",
                (dsc.max_start_field + 1) << 4
            ),
        ),
        d("uint32_t", "b_desc", low(&dsc.b, at(p.offsets[1], p.stage_bytes[1]))?),
    ])
}

/// CUTLASS's `PipelineState::operator++` (the index wraps at the stage count and flips the
/// phase), with the stage's descriptors moving along (`rc_pipe_next`): one add each, and a
/// subtraction of the ring's bytes at the wrap, so that nothing is rebuilt from the shared
/// address per k-tile.
fn stage_step(k: &Ctx) -> Vec<Stmt> {
    let [fa, fb] = k.p.descriptors.stage_field;
    vec![e(format!(
        "rc_pipe_next(stage, phase, a_desc, b_desc, {}u, {fa}u, {fb}u)",
        k.s
    ))]
}

/// Ping-pong, before the ordered wait (off the tensor cores' critical path): whether the
/// other warpgroup has a next tile to wait for this one's mainloop (the scheduler's
/// look-ahead divides 64-bit work ids).
/// With stream-K the next items are the walk's (`items` of them; past the whole tiles, the
/// CTA's stream-K parts).
fn order_lookahead(k: &Ctx) -> Vec<Stmt> {
    let walk = if k.sk {
        Stmt::Loop {
            init: "int j = item + 1".into(),
            cond: "j < items && !other_next".into(),
            step: "++j".into(),
            body: vec![Stmt::assign(
                "other_next",
                format!("sched.cluster_valid({})", stream_k::uniform(k, "walk.work(j)", false)),
            )],
        }
    } else {
        Stmt::Loop {
            init: "unsigned long long w = work + sched.stride()".into(),
            cond: "w < sched.total_work && !other_next".into(),
            step: "w += sched.stride()".into(),
            body: vec![Stmt::assign("other_next", "sched.cluster_valid(w)")],
        }
    };
    vec![
        c("whether the other warpgroup has a next tile (it waits for this mainloop only then)"),
        d("bool", "other_next", "false"),
        walk,
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
