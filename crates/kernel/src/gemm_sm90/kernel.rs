//! The main SM90 GEMM kernel: producer (TMA loads), consumers (wgmma mainloop) and the
//! TMA warp-specialized epilogue.

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

pub(super) fn kernel(
    cfg: &GemmSm90Config,
    p: &Sm90Plan,
    name: &str,
    fusion: &FusionCode,
) -> Result<CFunction, GemmError> {
    let staged = p.bc_floats > 0;
    // The fusion at the accumulator element (gm + mm, gn + nn): with staged broadcasts, also
    // the element's position in the tile, where the staging area is indexed.
    let visit = |acc: &str, c: &str, mm: i64, nn: i64| -> String {
        if staged {
            format!(
                "rc_visit_staged_at(p, (float){acc}, {c}, gm + {mm}, gn + {nn}, batch, M, N, bc, gm + {mm} - m0, gn + {nn} - n0)"
            )
        } else {
            format!("rc_visit_at(p, (float){acc}, {c}, gm + {mm}, gn + {nn}, batch, M, N)")
        }
    };
    let [bm, bn, bk] = cfg.tile;
    let [em, en] = p.epi_tile;
    let s = p.stages;
    let sched = cfg.schedule;
    let coop = sched == Sm90Schedule::Cooperative;
    let pp = sched == Sm90Schedule::PingPong;
    let nacc = bn / 2;
    let ab_bytes = cfg.ab.bytes() as i64;
    let row_bytes = bk * ab_bytes;
    let db = cfg.cd.bytes() as i64;
    let sub_bytes = em * en * db;
    let epi_threads = if coop { 2 * WG } else { WG };
    let [cm, cn] = cfg.cluster;
    let clustered = cm * cn > 1;
    // Consumer warps release a stage to every CTA that writes into it: itself, the CTAs
    // of its cluster row (A multicast) and of its cluster column (B multicast).
    let empty_arrivals = if coop { 8 } else { 4 } * (cm + cn - 1);
    let tx = p.stage_bytes[0] + p.stage_bytes[1];
    let span = p.epi_swizzle.span_bytes();
    let swz_mask = (span / 16 - 1) << 4;
    let [off_a, off_b, off_epi, off_bar] = p.offsets;
    let epi_set_bytes = sub_bytes as usize * (p.d_bufs + if p.reuse_smem_c { 0 } else { p.c_bufs });
    let mut b: Vec<Stmt> = Vec::new();

    b.push(c("Shared memory (byte offsets from a 1 KiB-aligned base):"));
    b.push(c(format!(
        "  sA (BM,BK,PIPE) = ({bm},{bk},{s}) of {} at {off_a}",
        p.smem_atom
    )));
    b.push(c(format!("  sB (BN,BK,PIPE) = ({bn},{bk},{s}) at {off_b}")));
    b.push(c(format!(
        "  epilogue at {off_epi}{}: {} D buffer(s){} of ({em},{en}) row-major, Swizzle<{},4,3> on bytes (TMA {:?})",
        if off_epi == 0 {
            " (a union with the mainloop: the non-persistent schedule)"
        } else {
            ""
        },
        p.d_bufs,
        if p.reuse_smem_c {
            " = the C buffers (ReuseSmemC)".to_string()
        } else {
            format!(" + {} C buffer(s)", p.c_bufs)
        },
        (span / 16).trailing_zeros(),
        p.epi_swizzle
    )));
    b.push(c(format!(
        "  mbarriers at {off_bar}: full[{s}], empty[{s}], then C full/empty"
    )));
    b.push(e("extern __shared__ __align__(1024) unsigned char rc_smem_raw[]"));
    b.push(d(
        "unsigned char* const",
        "smem",
        "rc_smem_raw + ((1024u - (rc_smem_u32(rc_smem_raw) & 1023u)) & 1023u)",
    ));
    b.push(d("const uint32_t", "smem_u32", "rc_smem_u32(smem)"));
    b.push(d("const uint32_t", "bar_full", format!("smem_u32 + {off_bar}u")));
    b.push(d("const uint32_t", "bar_empty", format!("bar_full + {}u", 8 * s)));
    b.push(dc(
        "const uint32_t",
        "bar_c_full",
        format!("bar_full + {}u", 16 * s),
        "C pipeline: per C stage (and ping-pong group) a [full, empty] pair of mbarriers, 16 B apart",
    ));
    if cfg.with_c() {
        b.push(d("const uint32_t", "bar_c_empty", "bar_c_full + 8u"));
    }
    b.push(d("const int", "wg", "threadIdx.x / 128"));
    b.push(d("const int", "warp", "(threadIdx.x / 32) % 4"));
    b.push(d("const int", "lane", "threadIdx.x % 32"));
    b.push(d("const int", "k_tiles", format!("(K + {}) / {bk}", bk - 1)));
    b.push(dc(
        "const int",
        "k_iters",
        "split_k > 1 ? (k_tiles + split_k - 1) / split_k : k_tiles",
        "k-tiles per work item: every split runs the same count (TMA zero-fills past K)",
    ));
    b.push(c(
        "persistent tile scheduler: raster order and swizzle resolved on the host",
    ));
    b.push(e(format!(
        "const {name}_sched sched(sched_tiles_m, sched_tiles_n, sched_batches, sched_along_n, sched_log_swizzle)"
    )));
    b.push(c(format!(
        "cluster {cm}x{cn}: A is multicast along the cluster's N ranks (each loads BM/{cn} rows), B along its M ranks (BN/{cm} rows)"
    )));
    b.push(d("const int", "rank_m", "sched.rank_m()"));
    b.push(d("const int", "rank_n", "sched.rank_n()"));
    b.push(d("const int", "a_rows", format!("rank_n * {}", cfg.tile[0] / cn)));
    b.push(d("const int", "b_rows", format!("rank_m * {}", cfg.tile[1] / cm)));
    b.push(d("const int", "a_slice", format!("a_rows * {row_bytes}")));
    b.push(d("const int", "b_slice", format!("b_rows * {row_bytes}")));
    b.push(dc(
        "uint16_t",
        "mask_a",
        "0",
        "%cluster_ctarank = rank_m + rank_n * cluster_m",
    ));
    b.push(d("uint16_t", "mask_b", "0"));
    b.push(for_(
        "j",
        "0",
        cn.to_string(),
        vec![e(format!("mask_a |= (uint16_t)(1u << (rank_m + j * {cm}))"))],
    ));
    b.push(for_(
        "i",
        "0",
        cm.to_string(),
        vec![e(format!("mask_b |= (uint16_t)(1u << (i + rank_n * {cm}))"))],
    ));
    if clustered {
        b.push(dc(
            "const uint16_t",
            "peers",
            "mask_a | mask_b",
            "the CTAs whose loads land in this CTA's stages",
        ));
    }
    b.push(dc(
        "const bool",
        "load_c",
        format!("({}) && split_k == 1", fusion.source_needed),
        "is_source_needed (split-K applies the fusion in the reduction instead)",
    ));
    let c_groups = if pp { 2 } else { 1 };
    b.push(if_(
        "threadIdx.x == 0",
        vec![
            for_(
                "i",
                "0",
                s.to_string(),
                vec![
                    e("rc_mbarrier_init(bar_full + 8 * i, 1)"),
                    e(format!("rc_mbarrier_init(bar_empty + 8 * i, {empty_arrivals})")),
                ],
            ),
            for_(
                "i",
                "0",
                (p.c_bufs * c_groups).to_string(),
                vec![
                    e("rc_mbarrier_init(bar_c_full + 16 * i, 1)"),
                    e("rc_mbarrier_init(bar_c_full + 16 * i + 8, 1)"),
                ],
            ),
            e("rc_fence_mbarrier_init()"),
        ],
    ));
    b.push(if_(
        "threadIdx.x == 32",
        vec![
            e("rc_prefetch_tensormap(&tmap_a)"),
            e("rc_prefetch_tensormap(&tmap_b)"),
            e("rc_prefetch_tensormap(&tmap_d)"),
            if_("load_c", vec![e("rc_prefetch_tensormap(&tmap_c)")]),
        ],
    ));
    b.push(e("__syncthreads()"));
    if clustered {
        b.push(c(
            "every CTA's barriers are initialized before any partner multicasts into it",
        ));
        b.push(e("rc_cluster_arrive_relaxed()"));
        b.push(e("rc_cluster_wait()"));
    }

    // Tile walk (shared by producer and consumers so they agree on the order).
    let tile_of = |work: &str| -> Vec<Stmt> {
        vec![
            Stmt::Decl {
                ty: "int".into(),
                name: "tile_m, tile_n, batch".into(),
                init: None,
                comment: None,
            },
            c("work ids past the problem (padding of the swizzle bands) are skipped by every role alike"),
            if_(format!("!sched.cluster_valid({work})"), vec![Stmt::Continue]),
            c("a CTA whose tile lies past the edge still loads (TMA zero-fills) for its cluster partners"),
            e(format!("sched.tile({work}, tile_m, tile_n, batch)")),
            dc(
                "const int",
                "split",
                "batch / L",
                "the scheduler's batches are (split, batch) pairs, split slowest",
            ),
            Stmt::assign("batch", "batch % L"),
            d("const int", "kt0", "split * k_iters"),
            d("const int", "m0", format!("tile_m * {bm}")),
            d("const int", "n0", format!("tile_n * {bn}")),
        ]
    };

    // ---- producer warpgroup ----
    let mut prod = vec![e(format!("rc_setmaxnreg_dec<{PRODUCER_REGS}>()"))];
    let mut ml = vec![d("uint32_t", "stage", "0"), d("uint32_t", "phase", "0")];
    let mut body = tile_of("work");
    body.push(for_(
        "kt",
        "kt0",
        "kt0 + k_iters",
        vec![
            dc(
                "const uint32_t",
                "full",
                "bar_full + 8 * stage",
                "producer_acquire: wait for the consumers to free the stage",
            ),
            e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
            e(format!("rc_mbarrier_arrive_expect_tx(full, {tx}u)")),
            c("TMA boxes (BK, BM) / (BK, BN) at (k, row, batch); out-of-bounds elements are zero-filled"),
            e(format!(
                "{}(smem + {off_a} + stage * {} + a_slice, &tmap_a, full{}, kt * {bk}, m0 + a_rows, batch)",
                if cn > 1 {
                    "rc_tma_load_3d_multicast"
                } else {
                    "rc_tma_load_3d"
                },
                p.stage_bytes[0],
                if cn > 1 { ", mask_a" } else { "" },
            )),
            e(format!(
                "{}(smem + {off_b} + stage * {} + b_slice, &tmap_b, full{}, kt * {bk}, n0 + b_rows, batch)",
                if cm > 1 {
                    "rc_tma_load_3d_multicast"
                } else {
                    "rc_tma_load_3d"
                },
                p.stage_bytes[1],
                if cm > 1 { ", mask_b" } else { "" },
            )),
            e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")),
        ],
    ));
    ml.push(work_loop(body));
    let union = p.mainloop.storage_union;
    if union && cfg.with_c() {
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
    let mut ml_block = vec![
        c("Mainloop producer: one elected thread issues every TMA load"),
        Stmt::Block(ml),
    ];
    if cfg.with_c() {
        // Epilogue producer: C subtiles into the C buffers.
        let mut cl = vec![
            d("uint32_t", "cstage", "0u"),
            d("uint32_t", "cphase", "0u"),
            d("int", "local", "0"),
        ];
        if pp {
            cl.push(dc(
                "uint32_t",
                "cstage_other",
                "0u",
                "ping-pong: the other group's C pipeline state (groups alternate tiles)",
            ));
            cl.push(d("uint32_t", "cphase_other", "0u"));
        }
        let mut body = tile_of("work");
        body.retain(|st| !matches!(st, Stmt::Decl { name, .. } if name == "kt0" || name == "split"));
        body.push(d("const int", "grp", if pp { "local & 1" } else { "0" }));
        let mut sub = vec![];
        for sn in 0..bn / en {
            for sm in 0..bm / em {
                sub.push(e(format!(
                    "rc_mbarrier_wait_parity(bar_c_empty + 16 * (grp * {} + cstage), cphase ^ 1u)",
                    p.c_bufs
                )));
                sub.push(d(
                    "const uint32_t",
                    &format!("cf_{sn}_{sm}"),
                    format!("bar_c_full + 16 * (grp * {} + cstage)", p.c_bufs),
                ));
                sub.push(e(format!("rc_mbarrier_arrive_expect_tx(cf_{sn}_{sm}, {sub_bytes}u)")));
                sub.push(e(format!(
                    "rc_tma_load_3d(smem + {off_epi} + grp * {epi_set_bytes} + cstage * {sub_bytes}, &tmap_c, cf_{sn}_{sm}, n0 + {}, m0 + {}, batch)",
                    sn * en,
                    sm * em
                )));
                sub.push(e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", p.c_bufs)));
            }
        }
        body.push(if_("load_c", sub));
        if pp {
            body.push(e("uint32_t t = cstage; cstage = cstage_other; cstage_other = t"));
            body.push(e("t = cphase; cphase = cphase_other; cphase_other = t"));
        }
        body.push(e("++local"));
        cl.push(work_loop(body));
        let c_block = vec![
            c("Epilogue producer: TMA loads of C subtiles (StagesC buffers, transaction-count mbarriers)"),
            Stmt::Block(cl),
        ];
        if union {
            ml_block.extend(c_block);
        } else {
            prod.push(if_("warp == 1 && rc_elect_one_sync()", c_block));
        }
    }
    prod.insert(1, if_("warp == 0 && rc_elect_one_sync()", ml_block));

    // ---- consumer warpgroups ----
    let mut cons = vec![e(format!("rc_setmaxnreg_inc<{CONSUMER_REGS}>()"))];
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
        if pp { "cw" } else { "0" },
        "epilogue group: the warpgroups that store a tile together",
    ));
    cons.push(dc(
        "const bool",
        "epi_leader",
        if coop {
            "threadIdx.x == 128"
        } else {
            "(threadIdx.x % 128) == 0"
        },
        "issues the group's TMA stores",
    ));
    if staged {
        cons.push(dc(
            "const int",
            "epi_tid",
            if coop { "threadIdx.x - 128" } else { "threadIdx.x % 128" },
            "thread index within the epilogue group",
        ));
    }
    cons.push(d(
        "unsigned char* const",
        "epi_smem",
        format!("smem + {off_epi} + grp * {epi_set_bytes}"),
    ));
    cons.push(d(
        "const uint32_t",
        "epi_bar",
        if pp { "1u + (uint32_t)cw" } else { "1u".into() },
    ));
    cons.push(d("uint32_t", "stage", "0"));
    cons.push(d("uint32_t", "phase", "0"));
    cons.push(d("uint32_t", "cstage", "0"));
    cons.push(d("uint32_t", "cphase", "0"));
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
            "rc_pipe_advance(stage, phase, (uint32_t)(cw * k_iters), {s}u)"
        )));
    }
    cons.push(Stmt::Array {
        ty: acc_cty(cfg.ab).into(),
        name: format!("acc[{}]", p.m_atoms),
        len: nacc as usize,
        comment: Some(format!(
            "CLayout_64x{bn} per m64 atom: acc[a][4j+2h+e] = (row 16*warp + lane/4 + 8h, col 8j + 2*(lane%4) + e)"
        )),
    });

    let mut tile = tile_of("work");
    if pp {
        // After the validity check, so only real tiles alternate between the warpgroups.
        tile.insert(3, if_("(local & 1) != cw", vec![e("++local"), Stmt::Continue]));
    }
    let layout = fusion.staged.as_ref().map(|st| st.layout.clone()).unwrap_or_default();
    // Each slot's values this thread stages: (register, slot, index in the slot).
    let mut bc_regs: Vec<(usize, usize, i64)> = vec![];
    for (k, slot) in layout.iter().enumerate() {
        for j in 0..(slot.extent + epi_threads - 1) / epi_threads {
            bc_regs.push((bc_regs.len(), k, j * epi_threads));
        }
    }
    if staged {
        let fetch = &fusion.staged.as_ref().expect("staged fusion").fetch_name;
        tile.push(c(
            "Broadcast staging (1/2): this thread's share of the tile's broadcast vectors, loaded before the",
        ));
        tile.push(c(
            "mainloop so that their latency hides behind it (rc_fusion_broadcast has the slot layout)",
        ));
        tile.push(Stmt::Array {
            ty: "float".into(),
            name: "bc_r".into(),
            len: bc_regs.len(),
            comment: None,
        });
        let mut loads = vec![];
        for &(r, k, base) in &bc_regs {
            let slot = &layout[k];
            let (origin, lim) = match slot.broadcast.axis {
                rcute_collective::BroadcastAxis::Row => ("n0", "N"),
                rcute_collective::BroadcastAxis::Col => ("m0", "M"),
            };
            let i = format!("epi_tid + {base}");
            let in_slot = if base + epi_threads <= slot.extent {
                String::new()
            } else {
                format!("{i} < {} && ", slot.extent)
            };
            loads.push(Stmt::assign(
                format!("bc_r[{r}]"),
                format!("({in_slot}{origin} + {i} < {lim}) ? {fetch}(p, {k}, {origin} + {i}, batch) : 0.0f"),
            ));
        }
        tile.push(if_("split_k == 1", loads));
    }
    // Mainloop.
    let mut mainloop = vec![];
    mainloop.push(for_(
        "a",
        "0",
        p.m_atoms.to_string(),
        vec![Stmt::unrolled("i", nacc, vec![Stmt::assign("acc[a][i]", "0")])],
    ));
    if pp {
        mainloop.push(c(
            "Ordered math: wait for the other warpgroup's mainloop of the previous tile",
        ));
        mainloop.push(if_(
            "local > 0",
            vec![e("rc_named_barrier_sync(3u + (uint32_t)cw, 256u)")],
        ));
    }
    mainloop.push(d("uint32_t", "prev", "0"));
    let mut kloop = vec![
        c("consumer_wait: the stage's TMA transactions have landed"),
        e("rc_mbarrier_wait_parity(bar_full + 8 * stage, phase)"),
        d(
            "const uint32_t",
            "a_base",
            format!(
                "smem_u32 + {off_a}u + stage * {}u + (uint32_t)wg_row0 * {row_bytes}u",
                p.stage_bytes[0]
            ),
        ),
        d(
            "const uint32_t",
            "b_base",
            format!("smem_u32 + {off_b}u + stage * {}u", p.stage_bytes[1]),
        ),
        Stmt::unrolled(
            "a",
            p.m_atoms,
            vec![Stmt::unrolled("i", nacc, vec![e("rc_fence_acc(acc[a][i])")])],
        ),
        e("rc_wgmma_fence()"),
    ];
    let kk = p.mma.shape_mnk[2];
    for a in 0..p.m_atoms {
        for kb in 0..bk / kk {
            let kb_off = kblock_bytes(p, bk, kb)?;
            let da = desc_expr(p, 64, bk, &format!("a_base + {}u", a * 64 * row_bytes + kb_off))?;
            let dbx = desc_expr(p, bn, bk, &format!("b_base + {kb_off}u"))?;
            kloop.push(c(format!(
                "m64 atom {a}, k-block {kb}: K-major SW128 descriptors (LBO/SBO from make_gmma_desc)"
            )));
            kloop.push(e(format!("{}({da}, {dbx}, acc[{a}], 1)", p.mma.snippet.name)));
        }
    }
    kloop.push(e("rc_wgmma_commit_group()"));
    kloop.push(Stmt::unrolled(
        "a",
        p.m_atoms,
        vec![Stmt::unrolled("i", nacc, vec![e("rc_fence_acc(acc[a][i])")])],
    ));
    if cfg.mma_pipe == 0 {
        kloop.push(c(
            "K_PIPE_MMAS = 0: wait for this batch, then consumer_release its stage at once",
        ));
        kloop.push(e("rc_wgmma_wait_group<0>()"));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.push(if_("lane == 0", release(clustered, cm * cn)));
        kloop.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
        mainloop.push(for_("kt", "kt0", "kt0 + k_iters", kloop));
    } else {
        kloop.push(c(
            "keep one wgmma batch in flight; the previous one is done: consumer_release its stage",
        ));
        kloop.push(e("rc_wgmma_wait_group<1>()"));
        kloop.push(if_("kt > kt0 && lane == 0", release(clustered, cm * cn)));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
        mainloop.push(for_("kt", "kt0", "kt0 + k_iters", kloop));
        mainloop.push(e("rc_wgmma_wait_group<0>()"));
        mainloop.push(Stmt::unrolled(
            "a",
            p.m_atoms,
            vec![Stmt::unrolled("i", nacc, vec![e("rc_fence_acc(acc[a][i])")])],
        ));
        mainloop.push(if_("k_iters > 0 && lane == 0", release(clustered, cm * cn)));
    }
    if pp {
        mainloop.push(c(
            "Let the other warpgroup's next mainloop start (only if it has one), then skip its k-tiles",
        ));
        mainloop.push(d("bool", "other_next", "false"));
        mainloop.push(Stmt::Loop {
            init: "unsigned long long w = work + sched.stride()".into(),
            cond: "w < sched.total_work && !other_next".into(),
            step: "w += sched.stride()".into(),
            body: vec![Stmt::assign("other_next", "sched.cluster_valid(w)")],
        });
        mainloop.push(if_(
            "other_next",
            vec![e("rc_named_barrier_arrive(3u + (uint32_t)(1 - cw), 256u)")],
        ));
        mainloop.push(e(format!("rc_pipe_advance(stage, phase, (uint32_t)k_iters, {s}u)")));
    }
    tile.extend(mainloop);
    let tile_head = std::mem::take(&mut tile);

    // Epilogue.
    tile.push(c(format!(
        "Epilogue: {}x{} subtiles of {em}x{en}, N outer / M inner",
        bm / em,
        bn / en
    )));
    if staged {
        tile.push(c(
            "Broadcast staging (2/2): the registers into this group's staging area, read by every subtile below",
        ));
        tile.push(c(
            "(the previous tile's readers are done: each subtile's barrier follows its reads)",
        ));
        tile.push(d(
            "float* const",
            "bc",
            format!(
                "reinterpret_cast<float*>(smem + {} + grp * {})",
                p.bc_offset, p.bc_group_bytes
            ),
        ));
        for &(r, k, base) in &bc_regs {
            let slot = &layout[k];
            let st = Stmt::assign(format!("bc[{} + epi_tid + {base}]", slot.offset), format!("bc_r[{r}]"));
            if base + epi_threads <= slot.extent {
                tile.push(st);
            } else {
                tile.push(if_(format!("epi_tid + {base} < {}", slot.extent), vec![st]));
            }
        }
        tile.push(e(format!("rc_named_barrier_sync(epi_bar, {epi_threads}u)")));
    }
    if p.delay_tma_store {
        tile.push(dc(
            "unsigned char*",
            "sd_prev",
            "epi_smem",
            "DelayTmaStore: the subtile whose store is pending",
        ));
    }
    tile.push(dc(
        "const bool",
        "use_c",
        "load_c",
        "C subtiles arrive through the C pipeline",
    ));
    let sub_m = bm / em;
    for sn in 0..bn / en {
        for sm in 0..sub_m {
            let i = sn * sub_m + sm;
            let mut st = vec![c(format!(
                "subtile ({sm},{sn}): rows [{}, {}), cols [{}, {})",
                sm * em,
                (sm + 1) * em,
                sn * en,
                (sn + 1) * en
            ))];
            // Buffer choice.
            let buf = if p.reuse_smem_c {
                "(use_c ? cstage : dbuf)"
            } else {
                "dbuf"
            };
            let nbuf_rt = if p.reuse_smem_c {
                format!("(use_c ? {}u : {}u)", p.c_bufs, p.d_bufs)
            } else {
                format!("{}u", p.d_bufs)
            };
            let _ = &nbuf_rt;
            st.push(d("const uint32_t", "buf", buf));
            st.push(d("unsigned char* const", "sd", format!("epi_smem + buf * {sub_bytes}")));
            let c_base = if p.reuse_smem_c {
                "sd".to_string()
            } else {
                format!("epi_smem + {} + cstage * {sub_bytes}", p.d_bufs as i64 * sub_bytes)
            };
            // Values: which m64 atoms of this warpgroup fall into the subtile's rows.
            let mut vals = vec![];
            let jn = en / 16;
            vals.push(Stmt::Array {
                ty: "uint32_t".into(),
                name: format!("packed[{}]", p.m_atoms),
                len: (jn * 4) as usize,
                comment: Some("D fragment, stmatrix.x4 order".into()),
            });

            let mut per_atom = vec![];
            for a in 0..p.m_atoms {
                let row = format!("(wg_row0 + {})", a * 64);
                let r_sub = dc(
                    "const int",
                    "r_sub",
                    format!("{row} - {} + 16 * warp + (lane & 8) + (lane & 7)", sm * em),
                    "ldmatrix.x4 lane -> row of matrix lane/8",
                );
                let mut inner = vec![
                    dc(
                        "const int",
                        "gm",
                        format!("m0 + {row} + 16 * warp + lane / 4"),
                        "CLayout_64xN: global row of acc[a][4j + e] (+8 for acc[a][4j + 2 + e])",
                    ),
                    dc(
                        "const int",
                        "gn",
                        "n0 + 2 * (lane % 4)",
                        "global column of acc[a][0] (+8j + e)",
                    ),
                ];
                for jj in 0..jn {
                    let j = sn * en / 8 + 2 * jj;
                    let mut cv = vec![
                        c("source: ldmatrix.x4 gives the accumulator's fragment of C"),
                        r_sub.clone(),
                        dc(
                            "const uint32_t",
                            &format!("o{jj}"),
                            format!("(uint32_t)(r_sub * {} + {} + (lane >> 4) * 16)", en * db, jj * 32),
                            "byte offset (row, col) in the row-major subtile, before the swizzle",
                        ),
                        dc(
                            "const uint32_t",
                            &format!("s{jj}"),
                            format!("o{jj} ^ ((o{jj} >> 3) & {swz_mask}u)"),
                            format!("Swizzle<{},4,3> on bytes", (span / 16).trailing_zeros()),
                        ),
                        Stmt::Array {
                            ty: "uint32_t".into(),
                            name: "cr".into(),
                            len: 4,
                            comment: None,
                        },
                        e(format!("rc_ldmatrix_x4_addr(rc_smem_u32({c_base}) + s{jj}, cr)")),
                    ];
                    for q in 0..4 {
                        let idx = 4 * (j + q / 2) + 2 * (q % 2);
                        cv.push(Stmt::Decl {
                            ty: "float".into(),
                            name: format!("c{q}x, c{q}y"),
                            init: None,
                            comment: None,
                        });
                        cv.push(e(format!("rc_unpack2(cr[{q}], &c{q}x, &c{q}y)")));
                        let (mm, nn) = (8 * (q % 2), 8 * (j + q / 2));
                        cv.push(Stmt::assign(
                            format!("packed[{a}][{}]", 4 * jj + q),
                            format!(
                                "rc_pack2({}, {})",
                                visit(&format!("acc[{a}][{idx}]"), &format!("c{q}x"), mm, nn),
                                visit(&format!("acc[{a}][{}]", idx + 1), &format!("c{q}y"), mm, nn + 1)
                            ),
                        ));
                    }
                    let mut nv = vec![];
                    for q in 0..4 {
                        let idx = 4 * (j + q / 2) + 2 * (q % 2);
                        let (mm, nn) = (8 * (q % 2), 8 * (j + q / 2));
                        nv.push(Stmt::assign(
                            format!("packed[{a}][{}]", 4 * jj + q),
                            format!(
                                "rc_pack2({}, {})",
                                visit(&format!("acc[{a}][{idx}]"), "0.0f", mm, nn),
                                visit(&format!("acc[{a}][{}]", idx + 1), "0.0f", mm, nn + 1)
                            ),
                        ));
                    }
                    if cfg.with_c() {
                        inner.push(Stmt::If {
                            cond: "use_c".into(),
                            then: vec![Stmt::Block(cv)],
                            otherwise: nv,
                        });
                    } else {
                        inner.extend(nv);
                    }
                }
                let cond = if coop || p.m_atoms > 1 || sub_m > 1 {
                    format!("{row} / {em} == {sm}")
                } else {
                    "true".into()
                };
                per_atom.push(if_(cond, inner));
            }
            // Order: wait C, read C (inside per_atom), release or sync, write D.
            if cfg.with_c() {
                st.push(if_(
                    "use_c",
                    vec![e(
                        "rc_mbarrier_wait_parity(bar_c_full + 16 * (grp * CBUFS + cstage), cphase)"
                            .replace("CBUFS", &p.c_bufs.to_string()),
                    )],
                ));
            }
            st.push(Stmt::Block({
                let mut v = vals;
                v.extend(per_atom);
                let store_of = |buf: &str, sn: i64, sm: i64| {
                    vec![
                        e(format!(
                            "rc_tma_store_3d(&tmap_d, {buf}, n0 + {}, m0 + {}, batch)",
                            sn * en,
                            sm * em
                        )),
                        e("rc_bulk_commit_group()"),
                    ]
                };
                if p.delay_tma_store && i > 0 {
                    let (psn, psm) = ((i - 1) / sub_m, (i - 1) % sub_m);
                    v.push(c(
                        "DelayTmaStore: the previous subtile's store is issued now, after this subtile's visit",
                    ));
                    v.push(if_("epi_leader", store_of("sd_prev", psn, psm)));
                }
                v.push(c(format!(
                    "the buffer's previous store must have read it: at most {} store(s) still reading",
                    p.d_bufs - 1
                )));
                v.push(if_(
                    "epi_leader && !(use_c && REUSE)".replace("REUSE", if p.reuse_smem_c { "true" } else { "false" }),
                    vec![e(format!("rc_bulk_wait_group_read<{}>()", p.d_bufs - 1))],
                ));
                if cfg.with_c() {
                    v.push(c(
                        "C was read by the generic proxy: order it before later async-proxy (TMA) writes",
                    ));
                    v.push(if_("use_c", vec![e("rc_fence_proxy_async_shared()")]));
                }
                v.push(c("everyone has read C / the buffer's previous store is done: write D"));
                v.push(e(format!("rc_named_barrier_sync(epi_bar, {epi_threads}u)")));
                if cfg.with_c() && !p.reuse_smem_c {
                    v.push(c(
                        "every thread has its C values: release the C buffer to the epilogue producer",
                    ));
                    v.push(if_(
                        "use_c && epi_leader",
                        vec![e(format!(
                            "rc_mbarrier_arrive(bar_c_full + 16 * (grp * {} + cstage) + 8)",
                            p.c_bufs
                        ))],
                    ));
                }
                let mut wr = vec![];
                for a in 0..p.m_atoms {
                    let row = format!("(wg_row0 + {})", a * 64);
                    let mut inner = vec![d(
                        "const int",
                        "r_sub",
                        format!("{row} - {} + 16 * warp + (lane & 8) + (lane & 7)", sm * em),
                    )];
                    for jj in 0..jn {
                        inner.push(d(
                            "const uint32_t",
                            &format!("o{jj}"),
                            format!("(uint32_t)(r_sub * {} + {} + (lane >> 4) * 16)", en * db, jj * 32),
                        ));
                        inner.push(Stmt::Array {
                            ty: "uint32_t".into(),
                            name: format!("v{jj}"),
                            len: 4,
                            comment: None,
                        });
                        for q in 0..4 {
                            inner.push(Stmt::assign(
                                format!("v{jj}[{q}]"),
                                format!("packed[{a}][{}]", 4 * jj + q),
                            ));
                        }
                        inner.push(e(format!(
                            "rc_stmatrix_x4(sd + (o{jj} ^ ((o{jj} >> 3) & {swz_mask}u)), v{jj})"
                        )));
                    }
                    let cond = if coop || p.m_atoms > 1 || sub_m > 1 {
                        format!("{row} / {em} == {sm}")
                    } else {
                        "true".into()
                    };
                    wr.push(if_(cond, inner));
                }
                v.extend(wr);
                v.push(c(
                    "make the generic-proxy smem writes visible to TMA, then one thread stores the subtile",
                ));
                v.push(e("rc_fence_proxy_async_shared()"));
                v.push(e(format!("rc_named_barrier_sync(epi_bar, {epi_threads}u)")));
                let mut store = if p.delay_tma_store {
                    vec![]
                } else {
                    store_of("sd", sn, sm)
                };
                if cfg.with_c() && p.reuse_smem_c {
                    store.push(c(
                        "ReuseSmemC: the C buffer returns to the producer once its store has read it",
                    ));
                    store.push(if_(
                        "use_c",
                        vec![
                            e("rc_bulk_wait_group_read<0>()"),
                            e(format!(
                                "rc_mbarrier_arrive(bar_c_full + 16 * (grp * {} + cstage) + 8)",
                                p.c_bufs
                            )),
                        ],
                    ));
                }
                if !store.is_empty() {
                    v.push(if_("epi_leader", store));
                }
                if p.delay_tma_store {
                    v.push(Stmt::assign("sd_prev", "sd"));
                    if i == sub_m * (bn / en) - 1 {
                        v.push(c("DelayTmaStore: flush the tile's last store"));
                        v.push(if_("epi_leader", store_of("sd_prev", sn, sm)));
                    }
                }
                v.push(if_(
                    "use_c",
                    vec![e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", p.c_bufs))],
                ));
                if p.reuse_smem_c {
                    v.push(if_("!use_c", vec![e(format!("dbuf = (dbuf + 1u) % {}u", p.d_bufs))]));
                } else {
                    v.push(e(format!("dbuf = (dbuf + 1u) % {}u", p.d_bufs)));
                }
                let _ = i;
                v
            }));
            tile.push(Stmt::Block(st));
        }
    }
    let epi = std::mem::replace(&mut tile, tile_head);
    tile.push(Stmt::If {
        cond: "split_k > 1".into(),
        then: split_partials(p, cfg),
        otherwise: epi,
    });
    tile.push(e("++local"));
    cons.push(work_loop(tile));
    cons.push(c(
        "store tail: the last TMA stores must finish reading shared memory before the CTA exits",
    ));
    cons.push(if_("epi_leader", vec![e("rc_bulk_wait_group<0>()")]));

    b.push(Stmt::If {
        cond: "wg == 0".into(),
        then: prod,
        otherwise: cons,
    });
    if clustered {
        b.push(c(
            "no CTA leaves while a partner may still multicast into it or arrive on its barriers",
        ));
        b.push(e("__syncwarp()"));
        b.push(e("rc_cluster_arrive()"));
        b.push(e("rc_cluster_wait()"));
    }

    Ok(CFunction {
        qualifiers: format!(
            "extern \"C\" __global__ void __launch_bounds__({}, 1)",
            (1 + p.consumers) * WG
        )
        .replace(" void", ""),
        ret: "void".into(),
        name: name.into(),
        params: vec![
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_a".into()),
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_b".into()),
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_c".into()),
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_d".into()),
            ("int".into(), "M".into()),
            ("int".into(), "N".into()),
            ("int".into(), "K".into()),
            ("int".into(), "L".into()),
            (format!("const {}", fusion.struct_name), "p".into()),
            ("float* __restrict__".into(), "workspace".into()),
            ("int".into(), "split_k".into()),
            ("int".into(), "sched_tiles_m".into()),
            ("int".into(), "sched_tiles_n".into()),
            ("int".into(), "sched_batches".into()),
            ("int".into(), "sched_along_n".into()),
            ("int".into(), "sched_log_swizzle".into()),
        ],
        doc: vec![format!(
            "{name}: TMA + wgmma {:?} GEMM, D = fusion(acc = A * B, C), fusion {}",
            sched,
            cfg.fusion.describe()
        )],
        body: b,
    })
}
