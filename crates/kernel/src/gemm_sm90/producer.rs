//! The producer warpgroup: one elected thread issues the mainloop's TMA loads of A and B
//! into the stage ring; with C, an elected thread of another warp (or the same thread
//! after the mainloop, where the epilogue's buffers alias the stages) loads C subtiles.

use super::*;

/// The producer warpgroup's body.
pub(super) fn producer(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let mut prod = vec![e(format!("rc_setmaxnreg_dec<{}>()", warpgroup_regs(k.cfg)[0]))];
    if k.cfg.gather_a {
        // The gathering GEMM1 (no C): the whole warpgroup copies A's rows.
        prod.push(c(
            "Mainloop producer: every thread gathers A's rows by cp.async, one elected thread loads B by TMA",
        ));
        prod.push(Stmt::Block(grouped_gather::mainloop_loads(k)));
        return Ok(prod);
    }
    let mut ml_block = vec![
        c("Mainloop producer: one elected thread issues every TMA load"),
        Stmt::Block(mainloop_loads(k)),
    ];
    let mut c_warp = None;
    if k.cfg.with_c() {
        let c_block = vec![
            c("Epilogue producer: TMA loads of C subtiles (StagesC buffers, transaction-count mbarriers)"),
            Stmt::Block(c_loads(k)?),
        ];
        if k.p.mainloop.storage_union {
            ml_block.extend(c_block);
        } else {
            c_warp = Some(if_("warp == 1 && rc_elect_one_sync()", c_block));
        }
    }
    prod.push(if_("warp == 0 && rc_elect_one_sync()", ml_block));
    prod.extend(c_warp);
    Ok(prod)
}

/// The TMA loads of one operand's stage slice: multicast to the cluster's `mask` CTAs when
/// `multicast`; a slice wider than one box (`boxes` boxes of `box_rows` rows: a B tile of
/// more than 256 rows) in consecutive boxes.
fn operand_load(k: &Ctx, op: &str, offset: usize, stage_bytes: usize, origin: &str, multicast: bool) -> Stmt {
    let (f, mask) = if multicast {
        ("rc_tma_load_3d_multicast", format!(", mask_{op}"))
    } else {
        ("rc_tma_load_3d", String::new())
    };
    let dst = var("stage")
        .mul(&Expr::lit(stage_bytes as i64))
        .add(&Expr::lit(offset as i64));
    let ml = &k.p.mainloop;
    let (boxes, box_rows) = match op {
        "a" => (ml.tma_boxes_per_stage_a, ml.tma_multicast_box_a[1]),
        _ => (ml.tma_boxes_per_stage_b, ml.tma_multicast_box_b[1]),
    };
    if boxes == 1 {
        return e(format!(
            "{f}(smem + {} + {op}_slice, &tmap_{op}, full{mask}, kt * {}, {origin} + {op}_rows, batch)",
            dst.to_cpp(),
            k.bk
        ));
    }
    let q_bytes = box_rows as i64 * k.row_bytes;
    Stmt::Block(vec![
        c(format!("{boxes} boxes of {box_rows} rows, {q_bytes} B apart")),
        unroll(
            "q",
            boxes as i64,
            vec![e(format!(
                "{f}(smem + {} + {op}_slice + q * {q_bytes}, &tmap_{op}, full{mask}, kt * {}, {origin} + {op}_rows + q * {box_rows}, batch)",
                dst.to_cpp(),
                k.bk
            ))],
        ),
    ])
}

/// The mainloop producer: per k-tile, wait for the stage to be free, expect its bytes and
/// load A's and B's boxes.
fn mainloop_loads(k: &Ctx) -> Vec<Stmt> {
    let p = k.p;
    let s = k.s;
    let tx = p.mainloop.tx_bytes;
    let mut ml = vec![d("uint32_t", "stage", "0"), d("uint32_t", "phase", "0")];
    let mut body = tile_of(k, TileNeeds::WithSplit);
    body.extend(grouped::pad_upper(k));
    let mut kt_body = vec![
        dc(
            "const uint32_t",
            "full",
            "bar_full + 8 * stage",
            "producer_acquire: wait for the consumers to free the stage",
        ),
        e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
    ];
    match k.cfg.grouped {
        Some(g) => kt_body.extend(grouped::operand_loads(k, g)),
        None => kt_body.extend([
            e(format!("rc_mbarrier_arrive_expect_tx(full, {tx}u)")),
            c("TMA boxes (BK, BM) / (BK, BN) at (k, row, batch); out-of-bounds elements are zero-filled"),
            operand_load(k, "a", p.offsets[0], p.stage_bytes[0], "m0", k.cn > 1),
            operand_load(k, "b", p.offsets[1], p.stage_bytes[1], "n0", k.cm > 1),
        ]),
    }
    if k.cfg.dynamic_walk {
        kt_body.insert(2, dynamic::post_work());
    }
    kt_body.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
    body.push(for_("kt", "kt0", "kt0 + k_iters", kt_body));
    if k.cfg.dynamic_walk {
        ml.extend(dynamic::producer_loop(k, body));
    } else {
        ml.push(work_loop(k, body, true));
    }
    if p.mainloop.storage_union && k.cfg.with_c() {
        ml.push(c(
            "load_tail: the epilogue's buffers alias the mainloop's (union), so wait until the consumers",
        ));
        ml.push(c("have released every stage before C is loaded into them"));
        ml.push(for_(
            "i",
            "0",
            s.to_string(),
            vec![
                e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
                e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")),
            ],
        ));
    }
    ml
}

/// The epilogue producer: per tile, the C subtiles in the consumers' order (N outer, M
/// inner) into the StagesC ring (cooperative: each subtile's two halves, one into each
/// warpgroup's ring).
fn c_loads(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let p = k.p;
    let mut cl = vec![
        d("uint32_t", "cstage", "0u"),
        d("uint32_t", "cphase", "0u"),
        d("int", "local", "0"),
    ];
    if k.pp {
        cl.push(dc(
            "uint32_t",
            "cstage_other",
            "0u",
            "ping-pong: the other group's C pipeline state (groups alternate tiles)",
        ));
        cl.push(d("uint32_t", "cphase_other", "0u"));
    }
    let mut body = tile_of(k, TileNeeds::TileOnly);
    if !k.coop {
        body.push(d("const int", "grp", if k.pp { "local & 1" } else { "0" }));
    }
    let [sm, sn] = k.subtile_coord("sm", "sn", var("i"))?;
    let slot = format!("16 * (grp * {} + cstage)", p.c_bufs);
    let buf = format!(
        "smem + {} + cstage * {}",
        var("grp")
            .mul(&Expr::lit(k.epi_set_bytes as i64))
            .add(&Expr::lit(p.offsets[2] as i64))
            .to_cpp(),
        k.sub_bytes
    );
    // The group's first tile row: its warpgroup's rows (cooperative), else the tile's.
    let row0 = if k.coop {
        format!("m0 + grp * {} + sm * {}", p.wg_rows, k.gem)
    } else {
        format!("m0 + sm * {}", k.gem)
    };
    let load = vec![
        e(format!("rc_mbarrier_wait_parity(bar_c_empty + {slot}, cphase ^ 1u)")),
        d("const uint32_t", "cf", format!("bar_c_full + {slot}")),
        e(format!("rc_mbarrier_arrive_expect_tx(cf, {}u)", k.sub_bytes)),
        e(format!(
            "rc_tma_load_3d({buf}, &tmap_c, cf, n0 + sn * {}, {row0}, batch)",
            k.en
        )),
    ];
    let mut per_sub = vec![sm, sn];
    if k.coop {
        per_sub.push(c("each consumer warpgroup's half of the subtile into its own ring"));
        per_sub.push(unroll("grp", p.epi_groups, load));
    } else {
        per_sub.extend(load);
    }
    per_sub.push(e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", p.c_bufs)));
    let sub = unroll("i", k.sub_m * k.sub_n, per_sub);
    body.push(if_("load_c", vec![sub]));
    if k.pp {
        body.push(e("uint32_t t = cstage; cstage = cstage_other; cstage_other = t"));
        body.push(e("t = cphase; cphase = cphase_other; cphase_other = t"));
    }
    body.push(e("++local"));
    cl.push(work_loop(k, body, true));
    Ok(cl)
}
