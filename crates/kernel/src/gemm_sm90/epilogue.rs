//! The consumers' TMA warp-specialized epilogue: per subtile (N outer, M inner), the
//! accumulators through the fusion (with C read by `ldmatrix` from the C buffer), packed
//! and written by `stmatrix` into a swizzled buffer, then one TMA store per subtile. The
//! subtile, atom and fragment loops are emitted as `#pragma unroll` loops over
//! compile-time extents; every index into registers or shared memory is declared from the
//! layout that defines it.

use super::*;

/// Each broadcast slot's values one thread stages: `(register, slot, index in the slot)`.
fn bc_regs(k: &Ctx) -> Vec<(usize, usize, i64)> {
    let mut regs = vec![];
    if let Some(st) = &k.fusion.staged {
        for (slot_i, slot) in st.layout.iter().enumerate() {
            for j in 0..(slot.extent + k.epi_threads - 1) / k.epi_threads {
                regs.push((regs.len(), slot_i, j * k.epi_threads));
            }
        }
    }
    regs
}

/// Broadcast staging (1/2), before the mainloop: this thread's share of the tile's
/// broadcast vectors into registers (empty without staged broadcasts).
pub(super) fn broadcast_loads(k: &Ctx) -> Vec<Stmt> {
    let Some(st) = k.fusion.staged.as_ref() else {
        return vec![];
    };
    let regs = bc_regs(k);
    let mut loads = vec![];
    for &(r, slot_i, base) in &regs {
        let slot = &st.layout[slot_i];
        let (origin, lim) = match slot.broadcast.axis {
            rcute_collective::BroadcastAxis::Row => ("n0", "N"),
            rcute_collective::BroadcastAxis::Col => ("m0", "M"),
        };
        let i = plus("epi_tid", base);
        let in_slot = if base + k.epi_threads <= slot.extent {
            String::new()
        } else {
            format!("{i} < {} && ", slot.extent)
        };
        loads.push(Stmt::assign(
            format!("bc_r[{r}]"),
            format!(
                "({in_slot}{origin} + {i} < {lim}) ? {}(p, {slot_i}, {origin} + {i}, batch) : 0.0f",
                st.fetch_name
            ),
        ));
    }
    let mut v = vec![
        c("Broadcast staging (1/2): this thread's share of the tile's broadcast vectors, loaded before the"),
        c("mainloop so that their latency hides behind it (rc_fusion_broadcast has the slot layout)"),
        Stmt::Array {
            ty: "float".into(),
            name: "bc_r".into(),
            len: regs.len(),
            comment: None,
        },
    ];
    // Split-K partials skip the fusion (the reduction applies it); a stream-K kernel (it
    // splits K itself) and a grouped one have no split_k and always run the fusion.
    if !k.cfg.takes_split_k() {
        v.extend(loads);
    } else {
        v.push(if_("split_k == 1", loads));
    }
    v
}

/// Broadcast staging (2/2), at the epilogue: the registers into the group's staging area.
fn broadcast_stores(k: &Ctx) -> Vec<Stmt> {
    let Some(st) = k.fusion.staged.as_ref() else {
        return vec![];
    };
    let mut v = vec![
        c("Broadcast staging (2/2): the registers into this group's staging area, read by every subtile below"),
        c("(the previous tile's readers are done: each subtile's barrier follows its reads)"),
        d(
            "float* const",
            "bc",
            format!(
                "reinterpret_cast<float*>(smem + {} + grp * {})",
                k.p.bc_offset, k.p.bc_group_bytes
            ),
        ),
    ];
    for (r, slot_i, base) in bc_regs(k) {
        let slot = &st.layout[slot_i];
        let at = plus("epi_tid", slot.offset + base);
        let store = Stmt::assign(format!("bc[{at}]"), format!("bc_r[{r}]"));
        if base + k.epi_threads <= slot.extent {
            v.push(store);
        } else {
            v.push(if_(format!("{} < {}", plus("epi_tid", base), slot.extent), vec![store]));
        }
    }
    v.push(e(format!("rc_named_barrier_sync(epi_bar, {}u)", k.epi_threads)));
    v
}

/// The epilogue of one tile.
pub(super) fn epilogue(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let p = k.p;
    let mut tile = vec![c(format!(
        "Epilogue: {}x{} subtiles of {}x{}, N outer / M inner",
        k.sub_m, k.sub_n, k.gem, k.en
    ))];
    if k.coop {
        tile.push(c(format!(
            "(of this warpgroup's rows [wg_row0, +{}): each warpgroup stages and stores its half of the tile",
            k.p.wg_rows
        )));
        tile.push(c(
            "on its own, with its own buffers, C ring, staging area and 128-thread named barrier)",
        ));
    }
    tile.extend(broadcast_stores(k));
    if p.delay_tma_store {
        tile.push(dc(
            "unsigned char*",
            "sd_prev",
            "epi_smem",
            "DelayTmaStore: the subtile whose store is pending",
        ));
    }
    if k.cfg.with_c() {
        tile.push(dc(
            "const bool",
            "use_c",
            "load_c",
            "C subtiles arrive through the C pipeline",
        ));
    }
    let buf = if p.reuse_smem_c && k.cfg.with_c() {
        "(use_c ? cstage : dbuf)"
    } else {
        "dbuf"
    };
    let [sm, sn] = k.subtile_coord("sm", "sn", var("i"))?;
    let mut body = vec![
        sm,
        sn,
        d("const uint32_t", "buf", buf),
        d(
            "unsigned char* const",
            "sd",
            format!("epi_smem + buf * {}", k.sub_bytes),
        ),
    ];
    if k.cfg.with_c() {
        body.push(if_(
            "use_c",
            vec![e(format!(
                "rc_mbarrier_wait_parity(bar_c_full + 16 * (grp * {} + cstage), cphase)",
                p.c_bufs
            ))],
        ));
    }
    let mut inner = vec![Stmt::Array {
        ty: "uint32_t".into(),
        name: format!("packed[{}][{}]", p.m_atoms, k.en / 16),
        len: 4,
        comment: Some("D fragment: packed[a][jj] = the four 8x8 matrices of block jj, stmatrix.x4 order".into()),
    }];
    inner.push(per_atom(k, fragment_values(k)?));
    inner.extend(store_subtile(k)?);
    body.push(Stmt::Block(inner));
    tile.push(c(format!(
        "subtile i = (sm, sn): rows {}[sm * {gem}, +{gem}), cols [sn * {en}, +{en})",
        if k.coop { "wg_row0 + " } else { "" },
        gem = k.gem,
        en = k.en
    )));
    tile.push(unroll("i", k.sub_m * k.sub_n, body));
    if p.delay_tma_store {
        let last = k.sub_m * k.sub_n - 1;
        tile.push(c("DelayTmaStore: flush the tile's last store"));
        tile.push(if_(
            "epi_leader",
            tma_store(
                "sd_prev",
                &plus("n0", last / k.sub_m * k.en),
                &plus(row_origin(k), last % k.sub_m * k.gem),
            ),
        ));
    }
    Ok(tile)
}

/// The first global row of the group's subtiles: the tile's, or (cooperative) its
/// warpgroup's.
fn row_origin(k: &Ctx) -> &'static str {
    if k.coop {
        "m0 + wg_row0"
    } else {
        "m0"
    }
}

/// `body` for each m64 atom of this warpgroup whose rows lie in subtile row `sm`.
fn per_atom(k: &Ctx, body: Vec<Stmt>) -> Stmt {
    let cond = if k.p.m_atoms > 1 || k.sub_m > 1 {
        format!("a * 64 / {} == sm", k.gem)
    } else {
        "true".into()
    };
    unroll("a", k.p.m_atoms, vec![if_(cond, body)])
}

/// `r_sub`: the group subtile's row of this lane's `ldmatrix` / `stmatrix` address in
/// atom `a` (a group's subtiles start at its first row, `wg_row0`).
fn r_sub(k: &Ctx, comment: bool) -> Stmt {
    let init = format!("a * 64 - sm * {} + 16 * warp + (lane & 8) + (lane & 7)", k.gem);
    if comment {
        dc("const int", "r_sub", init, "ldmatrix.x4 lane -> row of matrix lane/8")
    } else {
        d("const int", "r_sub", init)
    }
}

/// `o`: the byte offset of this lane's 16-byte row chunk of 16-column block `jj` in the
/// row-major subtile, before the swizzle.
fn chunk_offset(k: &Ctx) -> Result<Stmt, GemmError> {
    let (em, jn, row_b, chunk_b, block_b) = (k.gem, k.en / 16, k.en * k.db, 8 * k.db, 16 * k.db);
    let rows = lay(tuple!(em, 2, jn), tuple!(row_b, chunk_b, block_b))?;
    dl(
        "const uint32_t",
        "o",
        &rows,
        &[var("r_sub"), var("lane").shr(&Expr::lit(4)), var("jj")],
    )
}

/// The swizzled address expression of `o` in the subtile buffer (the span's byte swizzle
/// `Swizzle<B,4,3>`, `B = log2(span / 16)`), and the comment naming it: row `r`'s 16-byte
/// chunk `c` moves to chunk `c ^ (r >> (7 - log2 span)) % 2^B`, so the eight rows of one
/// `stmatrix` / `ldmatrix` 8x8 matrix (one chunk each) fall in eight distinct 4-bank
/// groups: the staging stores and C reads are free of bank conflicts (checked in the
/// tests against the plan's layout).
fn swizzled(k: &Ctx) -> Result<(String, String), GemmError> {
    let span = k.p.epi_swizzle.span_bytes();
    let bits = (span / 16).trailing_zeros() as i32;
    let sw = Swizzle::new(bits, 4, 3).map_err(|e| cfg_err(e.to_string()))?;
    let shift = 7 - span.trailing_zeros() as i32;
    let rows = if shift > 0 {
        format!("(r >> {shift})")
    } else {
        "r".to_string()
    };
    Ok((
        sw.apply_expr(&Int::from("o")).to_cpp(),
        format!(
            "{sw} on bytes: chunk c of row r -> c ^ {rows} % {}, the 8 rows of an 8x8 matrix in distinct banks",
            1 << bits
        ),
    ))
}

/// The values of atom `a` in the subtile: the fusion of each accumulator pair (with C
/// from `ldmatrix` when C is read, every block's `ldmatrix` issued before the first
/// visit), packed to the output type.
fn fragment_values(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let jn = k.en / 16;
    let (sub_n, reg_n, en) = (k.sub_n, k.en / 2, k.en);
    let q_shape = tuple!((2, 2), jn, sub_n);
    let reg = lay(q_shape.clone(), tuple!((2, 4), 8, reg_n))?;
    let dm = lay(q_shape.clone(), tuple!((8, 0), 0, 0))?;
    let dn = lay(q_shape, tuple!((0, 8), 16, en))?;
    let qc = [var("q"), var("jj"), var("sn")];
    let pair = |cx: &str, cy: &str| -> Result<Vec<Stmt>, GemmError> {
        Ok(vec![
            dl("const int", "ri", &reg, &qc)?,
            dl("const int", "row", &dm, &qc)?,
            dl("const int", "col", &dn, &qc)?,
            Stmt::assign(
                "packed[a][jj][q]",
                format!(
                    "rc_pack2({}, {})",
                    visit(k, "acc[a][ri]", cx, "col"),
                    visit(k, "acc[a][ri + 1]", cy, "col + 1")
                ),
            ),
        ])
    };
    let no_c = vec![unroll("jj", jn, vec![unroll("q", 4, pair("0.0f", "0.0f")?)])];
    let values = if k.cfg.with_c() {
        let (s, sw) = swizzled(k)?;
        let mut q = vec![
            Stmt::Decl {
                ty: "float".into(),
                name: "cx, cy".into(),
                init: None,
                comment: None,
            },
            e("rc_unpack2(cr[jj][q], &cx, &cy)"),
        ];
        q.extend(pair("cx", "cy")?);
        let with_c = vec![
            c("source: ldmatrix.x4 gives the accumulator's fragment of C, block jj into cr[jj]"),
            r_sub(k, true),
            Stmt::Array {
                ty: "uint32_t".into(),
                name: format!("cr[{jn}]"),
                len: 4,
                comment: None,
            },
            unroll(
                "jj",
                jn,
                vec![
                    chunk_offset(k)?,
                    dc("const uint32_t", "s", s, sw),
                    e("rc_ldmatrix_x4_addr(rc_smem_u32(sd) + s, cr[jj])"),
                ],
            ),
            unroll("jj", jn, vec![unroll("q", 4, q)]),
        ];
        vec![Stmt::If {
            cond: "use_c".into(),
            then: with_c,
            otherwise: no_c,
        }]
    } else {
        no_c
    };
    let mut v = vec![
        dc(
            "const int",
            "gm",
            "m0 + wg_row0 + a * 64 + 16 * warp + lane / 4",
            "CLayout_64xN: global row of acc[a][4j + e] (+8 for acc[a][4j + 2 + e])",
        ),
        dc(
            "const int",
            "gn",
            "n0 + 2 * (lane % 4)",
            "global column of acc[a][0] (+8j + e)",
        ),
    ];
    v.extend(values);
    Ok(v)
}

/// The fusion at accumulator `acc` of element `(gm + row, gn + col)` (with staged
/// broadcasts, also at its tile position).
fn visit(k: &Ctx, acc: &str, c: &str, col: &str) -> String {
    if k.staged {
        format!(
            "rc_visit_staged_at(p, (float){acc}, {c}, gm + row, gn + {col}, batch, M, N, bc, gm + row - m0, gn + {col} - n0)"
        )
    } else {
        format!("rc_visit_at(p, (float){acc}, {c}, gm + row, gn + {col}, batch, M, N)")
    }
}

/// The TMA store of subtile buffer `buf` at `(n, m)` and its commit.
fn tma_store(buf: &str, n: &str, m: &str) -> Vec<Stmt> {
    vec![
        e(format!("rc_tma_store_3d(&tmap_d, {buf}, {n}, {m}, batch)")),
        e("rc_bulk_commit_group()"),
    ]
}

/// `stmatrix` of atom `a`'s packed fragment into the swizzled subtile buffer.
fn fragment_write(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let (s, sw) = swizzled(k)?;
    Ok(vec![
        r_sub(k, false),
        unroll(
            "jj",
            k.en / 16,
            vec![
                chunk_offset(k)?,
                Stmt::Comment(sw),
                e(format!("rc_stmatrix_x4(sd + ({s}), packed[a][jj])")),
            ],
        ),
    ])
}

/// After the subtile's values: the pending (delayed) store, the barriers around the
/// `stmatrix` writes, the TMA store, the release of C's buffer and the ring advance.
fn store_subtile(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let p = k.p;
    let with_c = k.cfg.with_c();
    let sync = e(format!("rc_named_barrier_sync(epi_bar, {}u)", k.epi_threads));
    let c_release = e(format!(
        "rc_mbarrier_arrive(bar_c_full + 16 * (grp * {} + cstage) + 8)",
        p.c_bufs
    ));
    let mut v = vec![];
    if p.delay_tma_store {
        let [psm, psn] = k.subtile_coord("psm", "psn", var("i").sub(&Expr::lit(1)))?;
        v.push(c(
            "DelayTmaStore: the previous subtile's store is issued now, after this subtile's visit",
        ));
        let mut prev = vec![psm, psn];
        prev.push(if_(
            "epi_leader",
            tma_store(
                "sd_prev",
                &format!("n0 + psn * {}", k.en),
                &format!("{} + psm * {}", row_origin(k), k.gem),
            ),
        ));
        v.push(if_("i > 0", prev));
    }
    v.push(c(format!(
        "the buffer's previous store must have read it: at most {} store(s) still reading",
        p.d_bufs - 1
    )));
    v.push(if_(
        if p.reuse_smem_c && with_c {
            "epi_leader && !use_c"
        } else {
            "epi_leader"
        },
        vec![e(format!("rc_bulk_wait_group_read<{}>()", p.d_bufs - 1))],
    ));
    if with_c {
        v.push(c(
            "C was read by the generic proxy: order it before later async-proxy (TMA) writes",
        ));
        v.push(if_("use_c", vec![e("rc_fence_proxy_async_shared()")]));
    }
    v.push(c("everyone has read C / the buffer's previous store is done: write D"));
    v.push(sync.clone());
    if with_c && !p.reuse_smem_c {
        v.push(c(
            "every thread has its C values: release the C buffer to the epilogue producer",
        ));
        v.push(if_("use_c && epi_leader", vec![c_release.clone()]));
    }
    v.push(per_atom(k, fragment_write(k)?));
    v.push(c(
        "make the generic-proxy smem writes visible to TMA, then one thread stores the subtile",
    ));
    v.push(e("rc_fence_proxy_async_shared()"));
    v.push(sync);
    let mut store = if p.delay_tma_store {
        vec![]
    } else {
        tma_store(
            "sd",
            &format!("n0 + sn * {}", k.en),
            &format!("{} + sm * {}", row_origin(k), k.gem),
        )
    };
    if with_c && p.reuse_smem_c {
        store.push(c(
            "ReuseSmemC: the C buffer returns to the producer once its store has read it",
        ));
        store.push(if_("use_c", vec![e("rc_bulk_wait_group_read<0>()"), c_release]));
    }
    if !store.is_empty() {
        v.push(if_("epi_leader", store));
    }
    if p.delay_tma_store {
        v.push(Stmt::assign("sd_prev", "sd"));
    }
    if with_c {
        v.push(if_(
            "use_c",
            vec![e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", p.c_bufs))],
        ));
    }
    let dbuf = e(format!("dbuf = (dbuf + 1u) % {}u", p.d_bufs));
    v.push(if p.reuse_smem_c && with_c {
        if_("!use_c", vec![dbuf])
    } else {
        dbuf
    });
    Ok(v)
}
