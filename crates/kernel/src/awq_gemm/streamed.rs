//! The register-streamed decode kernel ([`rcute_collective::awq_streamed`]): each lane
//! loads its 16 bytes of the prepared weight per k16 step straight into a ring of
//! registers (`ring` steps in flight), converts every word into a swap-AB A fragment (the
//! weight's columns are the MMA's rows) and multiplies it by `x` as the B operand, staged
//! once per CTA in shared memory in fragment order. No shared-memory weight stage, no
//! `cp.async`, no CTA barrier in the loop: the warps along K meet once at the end, add
//! their partial tiles in warp order, and store (or hand the split's tile to the split-K
//! slab reduction of the other AWQ kernels).

use super::{s, semaphore_reset, split_gate, Emit};
use crate::emit::{Function as CFunction, Stmt};
use crate::lane_ring;
use rcute_collective::awq_streamed::{AwqStreamed, StreamedWeight};
use rcute_collective::lane_ring::LaneRing;

/// `ty name = init; // comment`.
pub(super) fn decl_c(ty: &str, name: &str, init: impl Into<String>, comment: &str) -> Stmt {
    Stmt::Decl {
        ty: ty.into(),
        name: name.into(),
        init: Some(init.into()),
        comment: Some(comment.into()),
    }
}

/// `if (cond) { then }`.
pub(super) fn when(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise: vec![],
    }
}

impl Emit<'_> {
    pub(super) fn st(&self) -> &AwqStreamed {
        self.p.streamed.as_ref().expect("streamed kernels have a streamed plan")
    }

    /// Whether the weight is AutoAWQ's checkpoint (`streamed_checkpoint.rs`), not prepared.
    fn checkpoint(&self) -> bool {
        self.st().weight == StreamedWeight::Checkpoint
    }

    /// Whether the weight's steps go through the lanes' own slots of a shared `cp.async`
    /// ring ([`AwqStreamed::with_shared_ring`](rcute_collective::awq_streamed::AwqStreamed::with_shared_ring)), not a ring of registers.
    fn shared_ring(&self) -> bool {
        self.st().lane_ring.is_some()
    }

    /// The lane's word column of `scales` (in 16-byte units) and `qzeros`: `8 wb + g`, or
    /// the checkpoint kernel's `wcol` (clamped to the last column past N).
    pub(super) fn group_col(&self) -> &'static str {
        if self.checkpoint() {
            "wcol"
        } else {
            "8 * wb + g"
        }
    }

    /// `{name}_scale` (`scale_after` kernels): a column's scale as the accumulators'
    /// unit, a zero scale as 1e-20 ([`Self::scale_rebase`]).
    pub(super) fn streamed_scale_fn(&self) -> CFunction {
        CFunction {
            qualifiers: "__device__ __forceinline__".into(),
            ret: "float".into(),
            name: format!("{}_scale", self.name),
            params: vec![("const float".into(), "s".into())],
            doc: vec!["A group's scale as the unit of the accumulators (scale_after): 1e-20 for a zero scale.".into()],
            body: vec![s("return s == 0.f ? 1e-20f : s")],
        }
    }

    /// `{name}_group`: a group's registers from its raw scales (8 columns) and zero word:
    /// pairs `i` = columns `(2i, 2i + 1)` (the step picks a column's half with
    /// `__low2half2` / `__high2half2`, an operand selector of the half-precision ops).
    pub(super) fn streamed_group_fn(&self) -> CFunction {
        let cvt = &self.p.convert.name;
        let mut params = vec![
            ("const uint4".to_string(), "s_raw".to_string()),
            ("const uint32_t".into(), "z_raw".into()),
            ("uint32_t".into(), "(&sc)[4]".into()),
            ("uint32_t".into(), "(&zl)[4]".into()),
        ];
        let mut body = vec![
            Stmt::assign("sc[0]", "s_raw.x"),
            Stmt::assign("sc[1]", "s_raw.y"),
            Stmt::assign("sc[2]", "s_raw.z"),
            Stmt::assign("sc[3]", "s_raw.w"),
            Stmt::Comment("{bias + z} of columns (2i, 2i + 1) (AutoAWQ's nibble order)".into()),
            s(format!("{cvt}(z_raw, zl)")),
        ];
        if self.x16() {
            params.push(("uint32_t".into(), "(&zh)[4]".into()));
            body.push(Stmt::unrolled(
                "i",
                4,
                vec![
                    Stmt::Comment("960 - (1024 + z) = -(64 + z), exact (the x16 words' odd pairs)".into()),
                    Stmt::decl(
                        "const __half2",
                        "zn",
                        "__hsub2(__float2half2_rn(960.f), *reinterpret_cast<const __half2*>(&zl[i]))",
                    ),
                    Stmt::assign("zh[i]", "*reinterpret_cast<const uint32_t*>(&zn)"),
                ],
            ));
        }
        CFunction {
            qualifiers: "__device__ __forceinline__".into(),
            ret: "void".into(),
            name: format!("{}_group", self.name),
            params,
            doc: vec![
                "A lane's group: scale pairs {s(2i), s(2i+1)} and biased zero pairs {bias + z(2i), bias + z(2i+1)} of its columns 8g + 2i, + 1.".into(),
            ],
            body,
        }
    }

    /// Coordinates of the CTA, the warp and its k16 steps; zeroed accumulators; the
    /// clustered split-K sum's barrier (`streamed_cluster.rs`).
    fn streamed_setup(&self) -> Vec<Stmt> {
        let p = self.p;
        let st = self.st();
        let (bm, wk, wn) = (p.config.tile[0], st.k_slices, st.col_blocks);
        let fold = |v: &str, w: i64, op: &str| {
            if w == 1 {
                "0".to_string()
            } else {
                format!("{v} {op} {w}")
            }
        };
        vec![
            s("extern __shared__ __align__(128) unsigned char smem[]"),
            Stmt::Decl {
                ty: "uint32_t*".into(),
                name: "sx".into(),
                init: Some("reinterpret_cast<uint32_t*>(smem)".into()),
                comment: Some(format!(
                    "staged x: word w of row r of the CTA's K range at r * {} + (w % 4) * {} + w / 4",
                    st.x_row_words, st.x_t_words
                )),
            },
            s("__shared__ int is_last"),
            Stmt::decl("const int", "N8", "N >> 3"),
            Stmt::decl("const int", "groups", "K / G"),
            Stmt::decl("const int", "lane", "threadIdx.x & 31"),
            Stmt::decl("const int", "warp", "threadIdx.x >> 5"),
            Stmt::decl("const int", "g", "lane >> 2"),
            Stmt::decl("const int", "t", "lane & 3"),
            Stmt::Comment(format!("warps {wk} along K (fastest) x {wn} along N")),
            Stmt::decl("const int", "wk", fold("warp", wk, "%")),
            Stmt::decl(
                "const int",
                "wn",
                if wk == 1 {
                    "warp".to_string()
                } else {
                    fold("warp", wk, "/")
                },
            ),
            Stmt::decl("const int", "m0", format!("blockIdx.y * {bm}")),
            Stmt::decl("const int", "rows", format!("min({bm}, M - m0)")),
            Stmt::decl("const int", "tile", "blockIdx.y * gridDim.x + blockIdx.x"),
            decl_c(
                "const int",
                "wb",
                if wn == 1 {
                    "blockIdx.x".to_string()
                } else {
                    format!("blockIdx.x * {wn} + wn")
                },
                "this warp's 64-column block",
            ),
            Stmt::decl("const int", "k0", "blockIdx.z * kt_per_split * 64"),
            decl_c(
                "const int",
                "steps",
                "max(0, min(4 * kt_per_split, (K - k0) >> 4))",
                "the CTA's k16 steps (K is a multiple of 16)",
            ),
            Stmt::decl(
                "const int",
                "per_warp",
                if wk == 1 {
                    "steps".to_string()
                } else {
                    format!("(steps + {}) / {wk}", wk - 1)
                },
            ),
            Stmt::decl(
                "const int",
                "s_begin",
                if wk == 1 {
                    "0".to_string()
                } else {
                    "min(steps, wk * per_warp)".to_string()
                },
            ),
            decl_c(
                "const int",
                "n_my",
                "wb * 64 < N ? min(steps, s_begin + per_warp) - s_begin : 0",
                "this warp's steps: s_begin .. s_begin + n_my",
            ),
            Stmt::Decl {
                ty: "float".into(),
                name: format!("acc[{}][4][4]", st.b_frags),
                init: None,
                comment: Some(
                    "(8-row fragment of x, word r: columns 8g + 2r, 8g + 2r + 1, mma.sync D register)".into(),
                ),
            },
            Stmt::unrolled(
                "f",
                st.b_frags,
                vec![Stmt::unrolled(
                    "r",
                    4,
                    vec![Stmt::unrolled("v", 4, vec![Stmt::assign("acc[f][r][v]", "0.f")])],
                )],
            ),
        ]
        .into_iter()
        .chain(self.cluster_prelude())
        .collect()
    }

    /// With `scale_after`: where a group starts (before its registers replace `sc`), the
    /// accumulators go from units of the ending group's scales (`sc`) to the new group's
    /// (`s_raw`): times `s_old / s_new` per column (f32; D of word r: registers 0, 1 column
    /// 8g + 2r, registers 2, 3 column 8g + 2r + 1), so the MMAs add `(q - z) x` unscaled and
    /// no register holds a second sum. A zero scale counts as 1e-20 (both ways), so a group
    /// of zero scales adds its sums times 1e-20 instead of removing the others.
    pub(super) fn scale_rebase(&self) -> Vec<Stmt> {
        if !self.p.config.scale_after {
            return vec![];
        }
        let f = |v: &str, half: &str| self.scale_of(v, half);
        vec![
            Stmt::Comment("the accumulators from the ending group's scales to the new group's (scale_after)".into()),
            Stmt::unrolled(
                "r",
                4,
                vec![
                    Stmt::decl(
                        "const uint32_t",
                        "s_new",
                        "reinterpret_cast<const uint32_t*>(&s_raw)[r]",
                    ),
                    Stmt::decl(
                        "const float",
                        "r_lo",
                        format!("__fdividef({}, {})", f("sc[r]", "low"), f("s_new", "low")),
                    ),
                    Stmt::decl(
                        "const float",
                        "r_hi",
                        format!("__fdividef({}, {})", f("sc[r]", "high"), f("s_new", "high")),
                    ),
                    self.scale_accumulators("r_lo", "r_hi"),
                ],
            ),
        ]
    }

    /// `{name}_scale` of the low or high (`half`) 16-bit scale of the packed pair `v`.
    fn scale_of(&self, v: &str, half: &str) -> String {
        format!(
            "{}_scale(__{half}2float(*reinterpret_cast<const {}*>(&{v})))",
            self.name, self.ty2
        )
    }

    /// Every fragment's accumulators of word `r` times `lo` (registers 0, 1: column
    /// 8g + 2r) and `hi` (registers 2, 3: column 8g + 2r + 1).
    fn scale_accumulators(&self, lo: &str, hi: &str) -> Stmt {
        Stmt::unrolled(
            "f",
            self.st().b_frags,
            vec![Stmt::unrolled(
                "v",
                4,
                vec![Stmt::assign(
                    "acc[f][r][v]",
                    format!("acc[f][r][v] * (v < 2 ? {lo} : {hi})"),
                )],
            )],
        )
    }

    /// With `scale_after`: after the loop, the accumulators times the last group's scales.
    fn scale_final(&self) -> Vec<Stmt> {
        if !self.p.config.scale_after {
            return vec![];
        }
        vec![
            Stmt::Comment("the accumulators were in units of the last group's scales (scale_after)".into()),
            Stmt::unrolled(
                "r",
                4,
                vec![
                    Stmt::decl("const float", "s_lo", self.scale_of("sc[r]", "low")),
                    Stmt::decl("const float", "s_hi", self.scale_of("sc[r]", "high")),
                    self.scale_accumulators("s_lo", "s_hi"),
                ],
            ),
        ]
    }

    /// Before the loop: the ring's first loads, the first group's scales (or their copy
    /// into the group slots, `streamed_group_slots.rs`), `x` staged into shared memory (one
    /// CTA barrier; or each warp its own steps' words, `streamed_warp_x.rs`). Returned as
    /// (before the wait, after it): with `eager_ring` the weight's part (its pointers, the
    /// first group and the ring) comes before the grid-dependency wait, else nothing does.
    fn streamed_prologue(&self) -> (Vec<Stmt>, Vec<Stmt>) {
        let st = self.st();
        let d = st.ring;
        let stage_rows = vec![when(
            "r > 0 && r < rows",
            vec![
                Stmt::decl(
                    "const uint4",
                    "v",
                    "__ldg(reinterpret_cast<const uint4*>(x + (long long)(m0 + r) * ldx + k0) + c)",
                ),
                Stmt::Comment("words 4c .. 4c + 3 of the row: t = 0..3, j = c".into()),
                Stmt::decl("uint32_t*", "dst", format!("sx + r * {} + c", st.x_row_words)),
                s("dst[0] = v.x"),
                s(format!("dst[{}] = v.y", st.x_t_words)),
                s(format!("dst[{}] = v.z", 2 * st.x_t_words)),
                s(format!("dst[{}] = v.w", 3 * st.x_t_words)),
            ],
        )];
        let (source, ptr, slot) = if self.checkpoint() {
            (
                self.checkpoint_source(),
                "const uint32_t*",
                "the words of rows 2t, 2t+1, 2t+8, 2t+9 of step s",
            )
        } else {
            (
                vec![
                    Stmt::Comment(
                        "prepared weight, k16 block kb, 64-column block wb, lane: 16-byte unit (N / 2) kb + 32 wb + lane (awq_prepared::prepared_lane_word / 4)".into(),
                    ),
                    Stmt::decl("const long long", "wstride", "N >> 1"),
                    Stmt::decl(
                        "const uint4*",
                        "wsrc",
                        "reinterpret_cast<const uint4*>(qweight) + (long long)((k0 >> 4) + s_begin) * wstride + 32 * wb + lane",
                    ),
                ],
                "const uint4*",
                "the lane's 16 bytes of step s",
            )
        };
        let ring = if !self.shared_ring() {
            vec![
                Stmt::Decl {
                    ty: "uint32_t".into(),
                    name: format!("wr[{d}][4]"),
                    init: None,
                    comment: Some(format!("ring slot d: {slot} with s % ring = d")),
                },
                Stmt::Comment(format!("the ring: steps 0 .. {d} in flight")),
                Stmt::unrolled(
                    "d",
                    d,
                    vec![when("d < n_my", vec![self.streamed_load("wsrc + d * wstride")])],
                ),
                Stmt::decl(ptr, "wnext", format!("wsrc + {d} * wstride")),
            ]
        } else {
            self.shared_ring_prologue()
        };
        let group_col = self.group_col();
        let first_group = if self.group_slots() {
            self.group_slots_prologue()
        } else {
            vec![
            Stmt::Comment("group gnext's scales of columns 64 wb + 8g .. + 8 and its zero word (same 16-byte / word index), ahead of the ring (step 0 needs them)".into()),
            Stmt::decl("int", "gnext", "(k0 + 16 * s_begin) / G"),
            Stmt::decl("uint4", "s_raw", "make_uint4(0u, 0u, 0u, 0u)"),
            Stmt::decl("uint32_t", "z_raw", "0u"),
            when(
                "n_my > 0",
                vec![
                    Stmt::decl("const long long", "gz", format!("(long long)gnext * N8 + {group_col}")),
                    Stmt::assign("s_raw", "__ldg(reinterpret_cast<const uint4*>(scales) + gz)"),
                    Stmt::assign("z_raw", "__ldg(qzeros + gz)"),
                ],
            ),
            ]
        };
        let (x0_first, x0_store) = if self.warp_x() {
            self.warp_x_row0()
        } else {
            self.streamed_x_row0()
        };
        let rest = if self.warp_x() {
            self.warp_x_rows(stage_rows)
        } else {
            self.cta_x_rows(stage_rows)
        };
        if self.p.config.eager_ring {
            return (
                [source, first_group, ring].concat(),
                [x0_first, x0_store, rest].concat(),
            );
        }
        (vec![], [source, x0_first, first_group, ring, x0_store, rest].concat())
    }

    /// `x` rows past row 0 and the zero row staged by the CTA's threads, then one CTA
    /// barrier (`stage_rows`: one chunk `c` of every row).
    fn cta_x_rows(&self, stage_rows: Vec<Stmt>) -> Vec<Stmt> {
        let (p, st) = (self.p, self.st());
        let (bm, threads) = (p.config.tile[0], p.threads);
        vec![
            Stmt::Comment(format!(
                "x rows m0 + 1 .. m0 + rows (row 0 above), k0 .. k0 + 16 steps in 16-byte chunks c (words 4c .. 4c + 3) -> [row][t][j = c]; up to {bm} rows"
            )),
            Stmt::Loop {
                init: "int c = threadIdx.x".into(),
                cond: "c < 2 * steps".into(),
                step: format!("c += {threads}"),
                body: vec![Stmt::unrolled("r", bm, stage_rows)],
            },
            Stmt::Comment(
                "row `rows`: zeros, the B fragments of rows past M (shared memory holds rows + 1 staged rows: AwqStreamed::smem_bytes_for)".into(),
            ),
            Stmt::Loop {
                init: "int c = threadIdx.x".into(),
                cond: format!("c < {}", st.x_row_words),
                step: format!("c += {threads}"),
                body: vec![Stmt::assign(format!("sx[rows * {} + c]", st.x_row_words), "0u")],
            },
            s("__syncthreads()"),
        ]
    }

    /// Row 0 of the CTA's `x` (every CTA has it): all of a thread's 16-byte chunks loaded
    /// into registers ahead of the ring's weight loads (ptxas may interleave them), then
    /// stored into the stage after the ring is issued. Staged by the loop after the ring,
    /// each chunk's load waited behind the ring's weight loads from DRAM (a warp's loads
    /// come back in order) and the next trip's load waited for that store: no step could
    /// start until then (ncu, BENCHMARKS.md, helper awqtail: 15-18 % of the warps' stall
    /// samples at 1 x 4096 / 14336 sat on those `x` stores); `x` comes from L2. Rows past
    /// 0 (M > 1) are staged after the ring, as before: holding them in registers would
    /// cost `4 BM` registers per chunk. Returns (loads, stores).
    fn streamed_x_row0(&self) -> (Vec<Stmt>, Vec<Stmt>) {
        let (p, st) = (self.p, self.st());
        let threads = p.threads;
        // chunks of a row: 2 per k16 step, at most 4 steps x max_k_tiles
        let chunks = 8 * st.max_k_tiles;
        let its = (chunks + threads - 1) / threads;
        let loads = vec![
            Stmt::Comment(format!(
                "x row m0 first: chunk c = threadIdx.x + {threads} i of the CTA's 2 * steps chunks (16 bytes, words 4c .. 4c + 3), from L2, ahead of the ring"
            )),
            Stmt::Decl {
                ty: "uint4".into(),
                name: format!("x0[{its}]"),
                init: None,
                comment: None,
            },
            Stmt::unrolled(
                "i",
                its,
                vec![
                    Stmt::decl("const int", "c", format!("threadIdx.x + {threads} * i")),
                    Stmt::assign(
                        "x0[i]",
                        "c < 2 * steps ? __ldg(reinterpret_cast<const uint4*>(x + (long long)m0 * ldx + k0) + c) : make_uint4(0u, 0u, 0u, 0u)",
                    ),
                ],
            ),
        ];
        let stores = vec![
            Stmt::Comment("row 0 into the stage: words 4c .. 4c + 3 at t = 0..3, j = c".into()),
            Stmt::unrolled(
                "i",
                its,
                vec![
                    Stmt::decl("const int", "c", format!("threadIdx.x + {threads} * i")),
                    when(
                        "c < 2 * steps",
                        vec![
                            s("sx[c] = x0[i].x"),
                            s(format!("sx[{} + c] = x0[i].y", st.x_t_words)),
                            s(format!("sx[{} + c] = x0[i].z", 2 * st.x_t_words)),
                            s(format!("sx[{} + c] = x0[i].w", 3 * st.x_t_words)),
                        ],
                    ),
                ],
            ),
        ];
        (loads, stores)
    }

    /// The load of one step of the lane's weight at `src` into ring slot `wr[d]`.
    fn streamed_load(&self, src: &str) -> Stmt {
        if self.checkpoint() {
            s(format!("{}_rows({src}, N8, wr[d])", self.name))
        } else {
            s(format!("{}({src}, wr[d])", self.st().load.snippet.name))
        }
    }

    /// The dequantized A fragment of word `r` and its MMAs: `regs` the converted pairs
    /// that are `a0 .. a3` (columns `8g + 2r` for `a0`, `a2` and `8g + 2r + 1` for `a1`,
    /// `a3`: the low and high halves of group pair `r`), `x16` whether each holds `16 q`
    /// (f16's one-shift conversion): `None` never, `Some("")` always, `Some(cond)` where
    /// `cond` holds.
    pub(super) fn streamed_word(&self, regs: [&str; 4], x16: [Option<&str>; 4]) -> Vec<Stmt> {
        let mma = &self.p.mma.snippet.name;
        [
            self.swap_ab_halves(regs, x16, "r"),
            vec![
            Stmt::decl(
                "const uint32_t",
                "a[4]",
                "{*reinterpret_cast<const uint32_t*>(&a0), *reinterpret_cast<const uint32_t*>(&a1), *reinterpret_cast<const uint32_t*>(&a2), *reinterpret_cast<const uint32_t*>(&a3)}",
            ),
            Stmt::unrolled("f", self.st().b_frags, vec![s(format!("{mma}(acc[f][r], a, b[f], acc[f][r])"))]),
            ],
        ]
        .concat()
    }

    /// The swap-AB A fragment `a0 .. a3` (16-bit pairs) of one word, as in
    /// [`Self::streamed_word`], with the group registers `sc`, `zl`, `zh` of pair `pair`
    /// (an index expression).
    pub(super) fn swap_ab_halves(&self, regs: [&str; 4], x16: [Option<&str>; 4], pair: &str) -> Vec<Stmt> {
        let ty2 = self.ty2;
        let (lo, hi) = if self.x16() {
            ("__low2half2", "__high2half2")
        } else {
            ("__low2bfloat162", "__high2bfloat162")
        };
        let h = |v: &str| format!("*reinterpret_cast<const {ty2}*>(&{v})");
        // the group pair r's half of column 2r (low) or 2r + 1 (high), in both halves
        let col = |v: &str, high: bool| format!("{}({})", if high { hi } else { lo }, h(&format!("{v}[{pair}]")));
        let even = |q: &str, high: bool| format!("__hsub2({}, {})", h(q), col("zl", high));
        // (1024 + 16 q) / 16 - (64 + z) = q - z, exact
        let scaled = |q: &str, high: bool| format!("__hfma2({}, x16_inv, {})", h(q), col("zh", high));
        let term = |i: usize| {
            let (q, high) = (regs[i], i % 2 == 1);
            match x16[i].filter(|_| self.x16()) {
                None => even(q, high),
                Some("") => scaled(q, high),
                Some(cond) => format!("({cond}) ? {} : {}", scaled(q, high), even(q, high)),
            }
        };
        let what = [
            "row g (column 8g + 2r), k 2t, 2t+1",
            "row g + 8 (column 8g + 2r + 1), k 2t, 2t+1",
            "row g, k 2t+8, 2t+9",
            "row g + 8, k 2t+8, 2t+9",
        ];
        let after = self.p.config.scale_after;
        let frag = (0..4).map(|i| {
            decl_c(
                &format!("const {ty2}"),
                &format!("a{i}"),
                if after {
                    term(i)
                } else {
                    format!("__hmul2({}, {})", term(i), col("sc", i % 2 == 1))
                },
                what[i],
            )
        });
        let why = if after {
            "(q - z) exactly; the group's scales come after its MMAs (scale_after)"
        } else {
            "(q - z) exactly, one rounding in the scale product: the weight awq_dequantize gives"
        };
        [vec![Stmt::Comment(why.into())], frag.collect()].concat()
    }

    /// One k16 step `s` of the warp from ring slot `d`: refill the slot `ring` steps ahead,
    /// the group's registers where a group starts, the B fragments of `x`, four words.
    fn streamed_step(&self) -> Vec<Stmt> {
        let p = self.p;
        let st = self.st();
        let d = st.ring;
        let cvt = &p.convert_x16.name;
        // the step's words: ring slot d's registers, or the shared slot's 16 bytes
        let (word, mut ring_wait) = if self.shared_ring() {
            ("w[r]", self.shared_ring_wait())
        } else {
            ("wr[d][r]", vec![])
        };
        let group_args = if self.x16() {
            "s_raw, z_raw, sc, zl, zh"
        } else {
            "s_raw, z_raw, sc, zl"
        };
        let frag = vec![
            Stmt::Comment(
                "row 8f + g (the zero row past M), CTA step s_begin + s: b0 = x[row][16 step + 2t, +1] = word (t, 2 step), b1 = k + 8 = word (t, 2 step + 1)".into(),
            ),
            Stmt::decl(
                "const uint2",
                "xv",
"*reinterpret_cast<const uint2*>(xf[f] + 2 * d)",
            ),
            Stmt::assign("b[f][0]", "xv.x"),
            Stmt::assign("b[f][1]", "xv.y"),
        ];
        let group = if self.group_slots() {
            // the step's words first: the wait also lands the group slots (group_slots.rs)
            [std::mem::take(&mut ring_wait), self.group_from_slots(group_args)].concat()
        } else {
            vec![
                Stmt::Comment(
                    "a group starts: its registers, then the next group's raw scales and zero word in flight".into(),
                ),
                when(
                    "krem == 0",
                    [
                        self.scale_rebase(),
                        vec![
                            s(format!("{}_group({group_args})", self.name)),
                            Stmt::assign("krem", "(gnext + 1) * G - (k0 + 16 * (s_begin + s))"),
                            s("++gnext"),
                            when(
                                "gnext < groups",
                                vec![
                                    Stmt::decl(
                                        "const long long",
                                        "gz",
                                        format!("(long long)gnext * N8 + {}", self.group_col()),
                                    ),
                                    Stmt::assign("s_raw", "__ldg(reinterpret_cast<const uint4*>(scales) + gz)"),
                                    Stmt::assign("z_raw", "__ldg(qzeros + gz)"),
                                ],
                            ),
                        ],
                    ]
                    .concat(),
                ),
            ]
        };
        group
            .into_iter()
            .chain([
                s("krem -= 16"),
                Stmt::Decl {
                    ty: "uint32_t".into(),
                    name: format!("b[{}][2]", st.b_frags),
                    init: None,
                    comment: Some("B fragments: 8 rows of x each (the MMA's n = the row of x)".into()),
                },
                Stmt::unrolled("f", st.b_frags, frag),
            ])
            .chain(if self.checkpoint() {
                self.checkpoint_fragments()
            } else {
                [
                    ring_wait,
                    vec![Stmt::unrolled(
                        "r",
                        4,
                        [
                            vec![
                                Stmt::Decl {
                                    ty: "uint32_t".into(),
                                    name: "q[4]".into(),
                                    init: None,
                                    comment: Some(
                                        "biased pairs 0..3 of word r (nibbles (0,4), (1,5), (2,6), (3,7))".into(),
                                    ),
                                },
                                s(format!("{cvt}({word}, q)")),
                            ],
                            self.streamed_word(["q[0]", "q[2]", "q[1]", "q[3]"], [None, None, Some(""), Some("")]),
                        ]
                        .concat(),
                    )],
                ]
                .concat()
            })
            .chain([Stmt::Comment(format!("slot d is free: step s + {d} into it"))])
            .chain(if self.shared_ring() {
                self.shared_ring_refill()
            } else {
                vec![when(format!("s + {d} < n_my"), vec![self.streamed_load("wnext")])]
            })
            .chain([s("wnext += wstride")])
            .collect()
    }

    /// The warp's loop over its steps, `ring` steps per iteration (ring slot = step % ring).
    fn streamed_loop(&self) -> Vec<Stmt> {
        let st = self.st();
        let d = st.ring;
        let mut regs = vec![
            Stmt::decl("uint32_t", "sc[4]", "{}"),
            Stmt::decl("uint32_t", "zl[4]", "{}"),
        ];
        if self.x16() {
            regs.push(Stmt::decl("uint32_t", "zh[4]", "{}"));
            regs.push(Stmt::decl("const __half2", "x16_inv", "__float2half2_rn(0.0625f)"));
        }
        regs.push(decl_c(
            "int",
            "krem",
            "0",
            "rows left in the current group (0: a group starts)",
        ));
        regs.push(Stmt::Decl {
            ty: "const uint32_t*".into(),
            name: format!("xf[{}]", st.b_frags),
            init: None,
            comment: Some("plane t of row 8f + g (the zero row `rows` past M) at step s0".into()),
        });
        regs.push(Stmt::unrolled(
            "f",
            st.b_frags,
            vec![Stmt::assign(
                "xf[f]",
                format!(
                    "sx + (8 * f + g < rows ? 8 * f + g : rows) * {} + t * {} + 2 * s_begin",
                    st.x_row_words, st.x_t_words
                ),
            )],
        ));
        regs.push(Stmt::Loop {
            init: "int s0 = 0".into(),
            cond: "s0 < n_my".into(),
            step: format!("s0 += {d}"),
            body: vec![
                Stmt::unrolled(
                    "d",
                    d,
                    vec![
                        Stmt::decl("const int", "s", "s0 + d"),
                        when("s < n_my", self.streamed_step()),
                    ],
                ),
                Stmt::Comment(format!(
                    "the fragment pointers follow the steps (loop-carried: {d} steps, 2 words each)"
                )),
                Stmt::unrolled("f", st.b_frags, vec![s(format!("xf[f] += {}", 2 * d))]),
            ],
        });
        regs.extend(self.scale_final());
        regs
    }

    /// After the loop: the warps' partial tiles through shared memory, added in warp order.
    fn streamed_epilogue(&self) -> Vec<Stmt> {
        let p = self.p;
        let st = self.st();
        let (bm, wk, wn, rr) = (p.config.tile[0], st.k_slices, st.col_blocks, st.red_row_floats);
        let store = format!("{}_store", self.name);
        // 64-column block of chunk c (0 with one block along N)
        let cblock = if wn == 1 {
            String::new()
        } else {
            format!("c / {} * {wk} + ", bm * 8)
        };
        let cblock = if wn > 1 && wk == 1 {
            format!("c / {} + ", bm * 8)
        } else {
            cblock
        };
        let each_chunk = |body: Vec<Stmt>| self.each_chunk(body);
        let sum = vec![
            Stmt::decl("float", "v[8]", "{0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}"),
            Stmt::unrolled(
                "kk",
                wk,
                vec![
                    Stmt::decl(
                        "const float4*",
                        "pp",
                        format!("reinterpret_cast<const float4*>(red + (({cblock}kk) * rows + ((c >> 3) % {bm})) * {rr} + 8 * (c & 7))"),
                    ),
                    Stmt::decl("const float4", "lo", "pp[0]"),
                    Stmt::decl("const float4", "hi", "pp[1]"),
                    s("v[0] += lo.x; v[1] += lo.y; v[2] += lo.z; v[3] += lo.w"),
                    s("v[4] += hi.x; v[5] += hi.y; v[6] += hi.z; v[7] += hi.w"),
                ],
            ),
            Stmt::If {
                cond: "splits == 1".into(),
                then: vec![s(format!("{store}(out, bias, (long long)row * ldo + 8 * wc, 8 * wc, v)"))],
                otherwise: vec![Stmt::If {
                    cond: "clustered".into(),
                    then: self.cluster_partial(&store),
                    otherwise: vec![
                    Stmt::Comment("this split's f32 partial tile to its slab blockIdx.z of the [splits, M, N] workspace (kept in L2)".into()),
                    Stmt::decl("float4*", "wsp", "reinterpret_cast<float4*>(ws + ((long long)blockIdx.z * M + row) * N + 8 * wc)"),
                    s("__stcg(wsp, make_float4(v[0], v[1], v[2], v[3]))"),
                    s("__stcg(wsp + 1, make_float4(v[4], v[5], v[6], v[7]))"),
                ],
                }],
            },
        ];
        let drain = if !self.shared_ring() {
            vec![]
        } else {
            vec![
                Stmt::Comment(
                    "the ring's copies past the warp's steps were never issued: nothing lands in the partial tiles"
                        .into(),
                ),
                lane_ring::drain(self.lane_ring()),
            ]
        };
        [drain, vec![
            Stmt::Comment("every warp is done with the staged x: its memory takes the partial tiles".into()),
            s("__syncthreads()"),
            Stmt::Decl {
                ty: "float*".into(),
                name: "red".into(),
                init: Some("reinterpret_cast<float*>(smem)".into()),
                comment: Some(format!(
                    "partial tile of warp (wn, wk), rows < rows only: red[((wn * {wk} + wk) * rows + row) * {rr} + column]"
                )),
            },
        ]
        .into_iter()
        .chain(self.cluster_part_off())
        .chain([
            Stmt::decl("float*", "rw", format!("red + warp * rows * {rr} + 8 * g")),
            Stmt::unrolled(
                "f",
                st.b_frags,
                vec![Stmt::unrolled(
                    "h",
                    2,
                    vec![
                        Stmt::Comment(
                            "row 8f + 2t + h (rows past M are not stored): D of word r holds column 8g + 2r in d0 (row 2t) / d1 (2t + 1), column 8g + 2r + 1 in d2 / d3".into(),
                        ),
                        Stmt::decl("const int", "row", "8 * f + 2 * t + h"),
                        when(
                            "row < rows",
                            vec![Stmt::unrolled(
                                "r",
                                4,
                                vec![
                                    s(format!("rw[row * {rr} + 2 * r] = acc[f][r][h]")),
                                    s(format!("rw[row * {rr} + 2 * r + 1] = acc[f][r][2 + h]")),
                                ],
                            )],
                        ),
                    ],
                )],
            ),
            s("__syncthreads()"),
            Stmt::Comment(format!(
                "chunk c: 64-column block c / {}, row (c / 8) % {bm}, columns 8 (c % 8) .. + 8",
                bm * 8
            )),
        ])
        .chain(self.cluster_before_chunks())
        .chain([each_chunk(sum)])
        .chain(self.cluster_after_chunks())
        .chain(split_gate("__syncthreads()"))
        .chain([each_chunk(self.slab_sum(&store))])
        .chain(semaphore_reset("0"))
        .collect()]
        .concat()
    }

    /// The prepared weight's shared ring ([`AwqStreamed::ring_bytes`]) after the staged
    /// rows and the zero row: slot `d` of lane `threadIdx.x` at 16-byte unit `d threads +
    /// threadIdx.x`, steps `0 .. ring` copied into it, one commit group each (empty past
    /// the warp's steps, so that group `s` is always step `s`).
    fn shared_ring_prologue(&self) -> Vec<Stmt> {
        let st = self.st();
        let (d, threads) = (st.ring, self.p.threads);
        let ring = self.lane_ring();
        vec![
            decl_c(
                "uint4* const",
                "wring",
                format!("reinterpret_cast<uint4*>(smem + (rows + 1) * {}) + threadIdx.x", 4 * st.x_row_words),
                &format!("ring slot d: the lane's 16 bytes of step s with s % ring = d, at wring[{threads} d] (after the staged rows and the zero row)"),
            ),
            Stmt::Comment(format!("the ring: steps 0 .. {d} in flight, one cp.async group per step")),
            Stmt::unrolled(
                "d",
                d,
                vec![
                    when(
                        "d < n_my",
                        vec![lane_ring::copy(ring, "wring", &format!("{threads} * d"), "wsrc + d * wstride")],
                    ),
                    lane_ring::commit(ring),
                ],
            ),
            Stmt::decl("const uint4*", "wnext", format!("wsrc + {d} * wstride")),
        ]
    }

    /// The shared ring's plan (shared-ring kernels only).
    fn lane_ring(&self) -> &LaneRing {
        self.st()
            .lane_ring
            .as_ref()
            .expect("shared-ring kernels have a lane ring")
    }

    /// Step `s`'s words from the shared ring: at most `ring - 1` groups pending, so group
    /// `s` (the lane's own copy into slot `d`) has landed; one 16-byte shared load.
    fn shared_ring_wait(&self) -> Vec<Stmt> {
        let threads = self.p.threads;
        let mut v = lane_ring::wait(self.lane_ring(), "s", "step");
        v.extend([
            Stmt::decl("const uint4", "wv", format!("wring[{threads} * d]")),
            Stmt::decl("const uint32_t", "w[4]", "{wv.x, wv.y, wv.z, wv.w}"),
        ]);
        v
    }

    /// Refill slot `d` with step `s + ring` (its words are in registers) and commit the
    /// step's group, empty past the warp's steps.
    fn shared_ring_refill(&self) -> Vec<Stmt> {
        let (d, threads) = (self.st().ring, self.p.threads);
        let ring = self.lane_ring();
        vec![
            when(
                format!("s + {d} < n_my"),
                vec![lane_ring::copy(ring, "wring", &format!("{threads} * d"), "wnext")],
            ),
            lane_ring::commit(ring),
        ]
    }

    /// The loop over the output chunks of the CTA, running `body` where `row` and `wc` are
    /// in bounds: chunk `c` is row `(c / 8) % BM` and columns `8 (c % 8) .. + 8` of the
    /// CTA's 64-column block `c / (8 BM)`.
    fn each_chunk(&self, body: Vec<Stmt>) -> Stmt {
        let p = self.p;
        let st = self.st();
        let (bm, wn) = (p.config.tile[0], st.col_blocks);
        let wc = if wn == 1 {
            "blockIdx.x * 8 + (c & 7)".to_string()
        } else {
            format!("(blockIdx.x * {wn} + c / {}) * 8 + (c & 7)", bm * 8)
        };
        Stmt::Loop {
            init: "int c = threadIdx.x".into(),
            cond: format!("c < {}", wn * bm * 8),
            step: format!("c += {}", p.threads),
            body: vec![
                Stmt::decl("const int", "row", format!("m0 + ((c >> 3) % {bm})")),
                decl_c("const int", "wc", wc, "word column: output columns 8 wc .. 8 wc + 8"),
                when("row < M && wc < N8", body),
            ],
        }
    }

    /// The split-K sum of a clustered tile (sm_90): every split's partial chunks are in its
    /// shared memory; rank 0 (split 0) adds them through distributed shared memory in rank
    /// order (deterministic) and stores; the second cluster barrier keeps the peers'
    /// shared memory alive until then. Only the first barrier orders memory, and only in
    /// the warps that wrote partial chunks: on sm_90 a release arrive is a GPU-scope fence,
    /// which (in rank 0, after its output stores) would wait for those stores.
    pub(super) fn streamed_cluster_sum(&self) -> Vec<Stmt> {
        let st = self.st();
        let store = format!("{}_store", self.name);
        let sum = vec![
            Stmt::decl("float", "v[8]", "{0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}"),
            Stmt::decl(
                "const uint32_t",
                "pa",
                "static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + part_off + 32 * c",
            ),
            Stmt::Loop {
                init: "int r = 0".into(),
                cond: "r < splits".into(),
                step: "++r".into(),
                body: vec![
                    Stmt::Decl {
                        ty: "float".into(),
                        name: "lo[4], hi[4]".into(),
                        init: None,
                        comment: Some("part[c] of cluster rank r".into()),
                    },
                    s("rc_ld_dsmem_f32x4(pa, r, lo)"),
                    s("rc_ld_dsmem_f32x4(pa + 16, r, hi)"),
                    Stmt::unrolled("j", 4, vec![s("v[j] += lo[j]"), s("v[4 + j] += hi[j]")]),
                ],
            },
            s(format!("{store}(out, bias, (long long)row * ldo + 8 * wc, 8 * wc, v)")),
        ];
        let producers = st.col_blocks * self.p.config.tile[0] * 8;
        vec![
            Stmt::Comment(format!(
                "every split's partial chunks are in its shared memory: the warps that wrote them (threads below {producers}, the chunks) publish them (release: a GPU-scope fence on sm_90), the others only arrive"
            )),
            Stmt::If {
                cond: format!("threadIdx.x < {producers}"),
                then: vec![s("rc_cluster_sync_sm90()")],
                otherwise: vec![s("rc_cluster_sync_relaxed_sm90()")],
            },
            when("blockIdx.z == 0", vec![self.each_chunk(sum)]),
            Stmt::Comment(
                "the peers keep their shared memory until rank 0 has read it (its loads are done: their values are stored), no memory to order".into(),
            ),
            s("rc_cluster_sync_relaxed_sm90()"),
            Stmt::Return,
        ]
    }

    /// The streamed kernel: a link of a chain of programmatically dependent kernels
    /// ([`crate::grid_dependency::chain_link_with_prelude`]) whose setup (no memory access)
    /// and L2 prefetch of the warp's first steps (`streamed_prefetch.rs`) come before the
    /// wait; its parameters end with `prefetch_steps` and `early_trigger`.
    pub(super) fn streamed_kernel(&self) -> CFunction {
        let (before_wait, after_wait) = self.streamed_prologue();
        let prelude = [self.streamed_setup(), self.streamed_prefetch(), before_wait].concat();
        let body = [after_wait, self.streamed_loop(), self.streamed_epilogue()].concat();
        let mut f = self.kernel_function(body);
        f.params.push(("int".into(), "prefetch_steps".into()));
        crate::grid_dependency::chain_link_with_prelude(prelude, f)
    }
}

/// `dst[j] = a_j` for `j < 4`: the swap-AB A fragment of `Emit::swap_ab_halves` (four
/// 16-bit pairs) as the 32-bit words of a `wgmma` register operand.
pub(super) fn a_fragment_words(dst: &str) -> Vec<Stmt> {
    (0..4)
        .map(|j| {
            Stmt::assign(
                format!("{dst}[{j}]"),
                format!("*reinterpret_cast<const uint32_t*>(&a{j})"),
            )
        })
        .collect()
}
