//! The fused SM80-class kernel's body ([`rcute_collective::awq_mainloop`]): the `cp.async`
//! multistage loop over k-tiles (`setup`, `load_call`), each k16 step's weight words
//! converted in registers and multiplied by `ldmatrix`-loaded `x` (`b_words`,
//! `k16_step`, shared with the bulk producer kernel of `bulk.rs`), then the epilogue of
//! `awq_gemm.rs` (direct stores or the split-K slab sum).

use super::*;

impl Emit<'_> {
    /// The four packed words of lane `(g, t)` for slice `si` of k16 step `kk` (rows
    /// `16 kk + (2t, 2t+1, 2t+8, 2t+9)`, word column `wword + 8 si + g`), converted to
    /// `q[row][pair]`: four 4-byte reads of the padded row-major stage, or one 16-byte read
    /// of the prepared stage.
    fn b_words(&self) -> Vec<Stmt> {
        let p = self.p;
        let row = p.b_row_words;
        let cvt = &p.convert.name;
        let q_decl = Stmt::Decl {
            ty: "uint32_t".into(),
            name: "q[4][4]".into(),
            init: None,
            comment: Some("pairs {bias + q} of columns (2i, 2i + 1) of the word, per row".into()),
        };
        if p.config.prepared {
            let blocks = p.config.tile[1] / 64;
            vec![
                Stmt::Comment(format!(
                    "prepared stage [k16 block][{blocks} 8-word blocks][32 lanes][4 words]: this lane's words of rows 16 kk + (2t, 2t+1, 2t+8, 2t+9), word column wword + 8 si + g"
                )),
                Stmt::decl(
                    "const uint4",
                    "bv",
                    format!(
                        "*reinterpret_cast<const uint4*>(sB + slot * {} + ((kk * {blocks} + (wword >> 3) + si) * 32 + lane) * 4)",
                        AWQ_BK * row
                    ),
                ),
                q_decl,
                s(format!("{cvt}(bv.x, q[0])")),
                s(format!("{cvt}(bv.y, q[1])")),
                s(format!("{cvt}(bv.z, q[2])")),
                s(format!("{cvt}(bv.w, q[3])")),
            ]
        } else {
            vec![
                Stmt::Comment(format!(
                    "word column wword + 8 si + g of rows 16 kk + (2t, 2t+1, 2t+8, 2t+9): padded rows of {row} words"
                )),
                Stmt::decl(
                    "const uint32_t*",
                    "bw",
                    format!(
                        "sB + slot * {} + (16 * kk + 2 * t) * {row} + wword + 8 * si + g",
                        AWQ_BK * row
                    ),
                ),
                q_decl,
                s(format!("{cvt}(bw[0], q[0])")),
                s(format!("{cvt}(bw[{row}], q[1])")),
                s(format!("{cvt}(bw[{}], q[2])", 8 * row)),
                s(format!("{cvt}(bw[{}], q[3])", 9 * row)),
            ]
        }
    }

    /// One k16 step of the mainloop on stage `slot`: A fragments by `ldmatrix`, the
    /// group's scales and zeros when the group changes, then per 8-word slice the four
    /// packed words of the lane, converted, dequantized, permuted into B fragments, and
    /// sixteen `mma.sync`s per m16 tile.
    pub(super) fn k16_step(&self) -> Vec<Stmt> {
        let p = self.p;
        let ty2 = self.ty2;
        let cvt = &p.convert.name;
        let as2 = |v: &str| format!("*reinterpret_cast<const {ty2}*>(&{v})");
        let mma = &p.mma.snippet.name;
        let a_frag = vec![
            Stmt::decl("const int", "r", "wrow + 16 * mi + (lane & 15)"),
            Stmt::decl("const int", "ch", "2 * kk + (lane >> 4)"),
            Stmt::Comment("Sw<3,3,3> o (BM,64):(64,1), 2 bytes per element".into()),
            s(format!(
                "{}(sA_base + 2 * (slot * {} + r * 64 + ((ch ^ (r & 7)) << 3)), a[mi])",
                p.ldsm_a.name,
                p.config.tile[0] * AWQ_BK
            )),
        ];
        let bn = p.config.tile[1];
        let load_group = vec![
            Stmt::decl("const int", "wl", "wword + 8 * si + g"),
            Stmt::Comment(format!(
                "group slot kk / 2 of this stage: scales ({GROUP_SLOTS}, {bn}), zero words ({GROUP_SLOTS}, {})",
                bn / 8
            )),
            Stmt::decl(
                "const uint4",
                "s4",
                format!(
                    "*reinterpret_cast<const uint4*>(sS + slot * {} + (kk >> 1) * {bn} + 8 * wl)",
                    GROUP_SLOTS * bn
                ),
            ),
            Stmt::assign("sc[si][0]", "s4.x"),
            Stmt::assign("sc[si][1]", "s4.y"),
            Stmt::assign("sc[si][2]", "s4.z"),
            Stmt::assign("sc[si][3]", "s4.w"),
            s(format!(
                "{cvt}(sZ[slot * {} + (kk >> 1) * {} + wl], zb[si])",
                GROUP_SLOTS * bn / 8,
                bn / 8
            )),
        ];
        let pair = vec![
            Stmt::Array {
                ty: "uint32_t".into(),
                name: "d".into(),
                len: 4,
                comment: Some("rows 2t, 2t+1, 2t+8, 2t+9: columns (8g' + 2i, 8g' + 2i + 1)".into()),
            },
            Stmt::unrolled(
                "r",
                4,
                vec![
                    Stmt::Comment("(bias + q) - (bias + z) = q - z exactly; one rounding in the product".into()),
                    Stmt::decl(
                        &format!("const {ty2}"),
                        "v",
                        format!(
                            "{}({}({}, {}), {})",
                            "__hmul2",
                            "__hsub2",
                            as2("q[r][i]"),
                            as2("zb[si][i]"),
                            as2("sc[si][i]")
                        ),
                    ),
                    Stmt::assign("d[r]", "*reinterpret_cast<const uint32_t*>(&v)"),
                ],
            ),
            Stmt::Comment(
                "column pairs of two rows -> K pairs of one column: n8 tiles 2i (low halves), 2i+1 (high)".into(),
            ),
            Stmt::decl(
                "const uint32_t",
                "b_lo[2]",
                "{__byte_perm(d[0], d[1], 0x5410), __byte_perm(d[2], d[3], 0x5410)}",
            ),
            Stmt::decl(
                "const uint32_t",
                "b_hi[2]",
                "{__byte_perm(d[0], d[1], 0x7632), __byte_perm(d[2], d[3], 0x7632)}",
            ),
            Stmt::unrolled(
                "mi",
                p.mi,
                vec![
                    s(format!("{mma}(acc[mi][si][2 * i], a[mi], b_lo, acc[mi][si][2 * i])")),
                    s(format!(
                        "{mma}(acc[mi][si][2 * i + 1], a[mi], b_hi, acc[mi][si][2 * i + 1])"
                    )),
                ],
            ),
        ];
        let mut slice = self.b_words();
        slice.push(Stmt::unrolled("i", 4, pair));
        let a = vec![
            Stmt::Decl {
                ty: "uint32_t".into(),
                name: format!("a[{}][4]", p.mi),
                init: None,
                comment: Some("A fragments of the m16 tiles".into()),
            },
            Stmt::unrolled("mi", p.mi, a_frag),
        ];
        if p.config.prepared {
            return [a, self.prepared_k16_tail()].concat();
        }
        vec![
            a[0].clone(),
            a[1].clone(),
            Stmt::Comment("the group's scales and zeros: k16 steps 0, 1 use slot 0, steps 2, 3 slot 1".into()),
            Stmt::If {
                cond: "(kk & 1) == 0".into(),
                then: vec![Stmt::unrolled("si", p.ns, load_group)],
                otherwise: vec![],
            },
            Stmt::unrolled("si", p.ns, slice),
        ]
    }

    /// Kernel setup: shared-memory carve-up, lane / warp / tile coordinates, this split's
    /// k-tiles, zeroed accumulators and the group cache.
    fn setup(&self) -> Vec<Stmt> {
        let p = self.p;
        let [bm, bn, _] = p.config.tile;
        let stages = p.config.stages;
        let ty = self.ty;
        vec![
            Stmt::Comment(format!(
                "dynamic smem: {stages} stages each of x (BM, 64) {ty}, qweight (64, {}) words, scales ({GROUP_SLOTS}, BN) and zero words ({GROUP_SLOTS}, BN/8)",
                p.b_row_words
            )),
            s("extern __shared__ __align__(128) unsigned char smem[]"),
            Stmt::decl(&format!("{ty}*"), "sA", format!("reinterpret_cast<{ty}*>(smem)")),
            Stmt::decl(
                "uint32_t*",
                "sB",
                format!(
                    "reinterpret_cast<uint32_t*>(smem + {})",
                    stages as i64 * p.a_stage_bytes
                ),
            ),
            Stmt::decl(
                &format!("{ty}*"),
                "sS",
                format!(
                    "reinterpret_cast<{ty}*>(smem + {})",
                    stages as i64 * (p.a_stage_bytes + p.b_stage_bytes)
                ),
            ),
            Stmt::decl(
                "uint32_t*",
                "sZ",
                format!(
                    "reinterpret_cast<uint32_t*>(smem + {})",
                    stages as i64 * (p.a_stage_bytes + p.b_stage_bytes + p.s_stage_bytes)
                ),
            ),
            Stmt::decl(
                "const uint32_t",
                "sA_base",
                "static_cast<uint32_t>(__cvta_generic_to_shared(sA))",
            ),
            s("__shared__ int is_last"),
            Stmt::decl("const int", "N8", "N >> 3"),
            Stmt::decl("const int", "groups", "K / G"),
            Stmt::Comment("group of row k: min(k >> gshift, groups - 1) (G is 32, 64, 128, or K: one group)".into()),
            Stmt::decl("const int", "gshift", "__ffs(G) - 1"),
            Stmt::decl("const int", "lane", "threadIdx.x & 31"),
            Stmt::decl("const int", "warp", "threadIdx.x >> 5"),
            Stmt::decl("const int", "g", "lane >> 2"),
            Stmt::decl("const int", "t", "lane & 3"),
            Stmt::decl("const int", "m0", format!("blockIdx.y * {bm}")),
            Stmt::decl("const int", "n0w", format!("blockIdx.x * {}", bn / 8)),
            Stmt::decl("const int", "tile", "blockIdx.y * gridDim.x + blockIdx.x"),
            Stmt::Comment(format!(
                "warps {}x{} (M fastest): {} rows and {} words each",
                p.config.warps[0],
                p.config.warps[1],
                16 * p.mi,
                8 * p.ns
            )),
            Stmt::decl(
                "const int",
                "wrow",
                warp_origin("warp % ", p.config.warps[0], 16 * p.mi, p.config.warps[0] == 1),
            ),
            Stmt::decl(
                "const int",
                "wword",
                warp_origin(
                    "warp / ",
                    p.config.warps[0],
                    8 * p.ns,
                    p.config.warps[0] * p.config.warps[1] == p.config.warps[0],
                ),
            ),
            Stmt::decl("const int", "kt0", "blockIdx.z * kt_per_split"),
            Stmt::decl(
                "const int",
                "nkt",
                format!("min(kt_per_split, (K + {}) / {AWQ_BK} - kt0)", AWQ_BK - 1),
            ),
            Stmt::Decl {
                ty: "float".into(),
                name: format!("acc[{}][{}][8][4]", p.mi, p.ns),
                init: None,
                comment: Some("(m16 tile, slice, n8 tile, mma.sync C register)".into()),
            },
            Stmt::unrolled(
                "mi",
                p.mi,
                vec![Stmt::unrolled(
                    "si",
                    p.ns,
                    vec![Stmt::unrolled(
                        "j",
                        8,
                        vec![Stmt::unrolled("v", 4, vec![Stmt::assign("acc[mi][si][j][v]", "0.f")])],
                    )],
                )],
            ),
        ]
        .into_iter()
        .chain(if p.config.prepared {
            self.prepared_group_regs()
        } else {
            vec![
                Stmt::decl("uint32_t", &format!("sc[{}][4]", p.ns), "{}"),
                Stmt::decl("uint32_t", &format!("zb[{}][4]", p.ns), "{}"),
            ]
        })
        .collect()
    }

    /// The call of `{name}_load_tile` for k-tile row `k` into stage slot `slot`.
    fn load_call(&self, k: &str, slot: &str) -> String {
        let name = self.name;
        if self.p.config.prepared {
            return format!(
                "{name}_load_tile(sA_base, {slot}, x, qweight, scales, qzeros, {}, {k}, K, N8, N, gshift, groups, n0w, m0, M)",
                self.copy_args()
            );
        }
        let p = self.p;
        let bn = p.config.tile[1];
        let (a_elems, b_words) = (p.config.tile[0] * AWQ_BK, AWQ_BK * p.b_row_words);
        let (s_elems, z_words) = (GROUP_SLOTS * bn, GROUP_SLOTS * bn / 8);
        format!(
            "{name}_load_tile(sA + {slot} * {a_elems}, sB + {slot} * {b_words}, sS + {slot} * {s_elems}, sZ + {slot} * {z_words}, x, qweight, scales, qzeros, {}, {k}, K, N8, N, gshift, groups)",
            self.per_copy_args()
        )
    }

    /// The kernel: setup, the multistage mainloop, the epilogue.
    pub(super) fn kernel(&self) -> CFunction {
        let p = self.p;
        let stages = p.config.stages;
        let load = |k: &str, slot: &str| s(self.load_call(k, slot));
        let mut body = self.setup();
        if p.bulk.is_some() {
            body.extend(self.ring_setup());
            body.extend(self.producer());
            body.extend(self.consumer_loop());
            body.extend(self.epilogue());
            return self.kernel_function(body);
        }
        body.extend(if p.config.prepared {
            self.copy_sources()
        } else {
            self.per_copy_sources()
        });
        body.extend([
            Stmt::Comment(format!("prologue: stages 0 .. {} in flight", stages - 2)),
            Stmt::For {
                var: "st".into(),
                start: "0".into(),
                end: (stages - 1).to_string(),
                unroll: true,
                body: vec![
                    Stmt::If {
                        cond: "st < nkt".into(),
                        then: vec![load(&format!("(kt0 + st) * {AWQ_BK}"), "st")],
                        otherwise: vec![],
                    },
                    s("rc_cp_async_commit_group()"),
                ],
            },
        ]);
        let mut step = vec![Stmt::decl("const int", "k0", format!("(kt0 + it) * {AWQ_BK}"))];
        step.push(Stmt::decl("const int", "slot", format!("it % {stages}")));
        step.push(Stmt::unrolled("kk", AWQ_BK / 16, self.k16_step()));
        body.push(Stmt::Loop {
            init: "int it = 0".into(),
            cond: "it < nkt".into(),
            step: "++it".into(),
            body: [
                vec![
                    Stmt::Comment(format!(
                        "tile it has landed (at most {} younger groups pending)",
                        stages - 2
                    )),
                    s(format!("rc_cp_async_wait_group<{}>()", stages - 2)),
                    s("__syncthreads()"),
                    Stmt::Comment("refill the stage every warp finished with in the previous iteration".into()),
                    Stmt::decl("const int", "nx", format!("it + {}", stages - 1)),
                    Stmt::If {
                        cond: "nx < nkt".into(),
                        then: vec![load(&format!("(kt0 + nx) * {AWQ_BK}"), &format!("(nx % {stages})"))],
                        otherwise: vec![],
                    },
                    s("rc_cp_async_commit_group()"),
                ],
                step,
            ]
            .concat(),
        });
        body.extend(self.epilogue());
        self.kernel_function(body)
    }
}
