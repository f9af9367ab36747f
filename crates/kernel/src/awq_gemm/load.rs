//! The prepared AWQ GEMM kernels' stage loader: which thread copies which 16-byte chunk of
//! a stage, split into the part that does not depend on the k-tile and the per-stage part.
//! (The unprepared kernels keep the per-copy pointers of [`super::load_per_copy`].)
//!
//! Set up once per thread: each copy's source at the split's first k-tile (the tensor's
//! base where the copy's row or columns lie outside the problem), its source size (the copy
//! size, or 0: `cp.async` then writes zeros) and, for `x` and `qweight`, its advance per
//! k-tile (0 outside the problem, so such a copy never leaves the tensor). Per stage
//! (`{name}_load_tile`): a 32-bit shared address, the copy, and one 64-bit add per running
//! source; the K bound is checked only on a k-tile that reaches past K (one uniform branch),
//! and the scales and zero words add their group row. No 64-bit multiply, division or
//! generic-to-shared conversion per copy.

use super::chunks::{decl, Chunks};
use super::{guarded, s, Emit};
use crate::emit::{Function as CFunction, Stmt};
use rcute_collective::awq_mainloop::{AWQ_BK, GROUP_SLOTS};

/// One kind of copy of a stage: its name prefix, copies per thread, chunks per stage, the
/// thread-constant coordinates of copy `c`, the k-invariant source, the per-stage bound,
/// advance or group offset, and the shared destination.
struct Copy {
    /// Which chunks the kind's copies move ([`Chunks`]; its fields read through `Deref`).
    which: Chunks,
    /// Source of the copy at k = 0 (where `valid`); for the scales and zero words, which
    /// keep no state, its element offset from the tensor's base.
    src0: String,
    /// The K bound of a k-tile that reaches past K (`x`, `qweight`).
    k_ok: Option<String>,
    /// Advance of the source per k-tile (`x`, `qweight`); `None`: the group row's offset
    /// `g_off` is added per stage instead (scales, zero words).
    k_step: Option<String>,
    /// Whether the copy keeps only its running source and rechecks its (cheap) bound per
    /// stage for its size and advance (`x`, whose copies lie in different rows: no
    /// per-copy size or advance registers).
    recheck: bool,
    g_off: String,
    /// The tensor's base: the source of copies outside the problem.
    base: &'static str,
    /// Destination, in elements of `elem_bytes`, within the kind's stage.
    dst: String,
    elem_bytes: i64,
    /// Byte offset of the kind's first stage in dynamic shared memory, and bytes per stage.
    region: i64,
    stage_bytes: i64,
    op: String,
    /// Bytes per copy.
    bytes: i64,
    /// Rows of `qweight` between a thread's consecutive copies when they all share one
    /// column (then one source pointer and a stride replace the per-copy pointers).
    row_step: Option<i64>,
}

impl std::ops::Deref for Copy {
    type Target = Chunks;
    fn deref(&self) -> &Chunks {
        &self.which
    }
}

impl Emit<'_> {
    /// The `x` and `qweight` copies of a stage.
    fn tile_copies(&self) -> Vec<Copy> {
        let p = self.p;
        let bn = p.config.tile[1];
        let stages = p.config.stages as i64;
        let vw = p.config.b_vector_words;
        let (a_op, b_op) = (p.copy_a_addr.name.clone(), p.copy_b_addr.name.clone());
        let b_region = stages * p.a_stage_bytes;
        let a = Copy {
            which: self.x_chunks(),
            src0: "x + (long long)(m0 + r) * ldx + 8 * ch".into(),
            k_ok: Some("k0 + 8 * ch < K".into()),
            k_step: Some(AWQ_BK.to_string()),
            recheck: true,
            g_off: String::new(),
            base: "x",
            dst: "r * 64 + ((ch ^ (r & 7)) << 3)".into(),
            elem_bytes: 2,
            region: 0,
            stage_bytes: p.a_stage_bytes,
            op: a_op.clone(),
            bytes: 16,
            row_step: None,
        };
        let b = {
            let per = bn / 2; // 16-byte chunks per k16 block
            Copy {
                which: Chunks {
                    prefix: "b",
                    ty: "const uint32_t*".into(),
                    copies: p.b_copies,
                    chunks: AWQ_BK * bn / 8 / vw,
                    coords: vec![decl("kbi", format!("c / {per}")), decl("cc", format!("c % {per}"))],
                    comment: format!(
                        "chunk c of the prepared (64, BN/8) tile: k16 block c / {per}, chunk c % {per} of its run (the lanes' 16-byte words of rcute_collective::awq_prepared); k16 block kb starts at word 16 kb N8"
                    ),
                    valid: "(n0w >> 3) + (cc >> 5) < (N8 >> 3)".into(),
                },
                src0: "qweight + ((long long)kbi * (N8 >> 3) + (n0w >> 3)) * 128 + 4 * cc".into(),
                k_ok: Some("(k0 >> 4) + kbi < (K >> 4)".into()),
                k_step: Some(format!("{AWQ_BK} * N8")),
                recheck: false,
                g_off: String::new(),
                base: "qweight",
                dst: format!("kbi * {} + 4 * cc", 2 * bn),
                elem_bytes: 4,
                region: b_region,
                stage_bytes: p.b_stage_bytes,
                op: b_op.clone(),
                bytes: 4 * vw,
                row_step: (p.threads % per == 0).then_some(16 * p.threads / per),
            }
        };
        vec![a, b]
    }

    /// The scale and zero-word copies of a stage (one group row per slot).
    fn group_copies(&self) -> Vec<Copy> {
        let p = self.p;
        let stages = p.config.stages as i64;
        let vw = p.config.b_vector_words;
        let (a_op, b_op) = (p.copy_a_addr.name.clone(), p.copy_b_addr.name.clone());
        let s_region = stages * (p.a_stage_bytes + p.b_stage_bytes);
        let z_region = s_region + stages * p.s_stage_bytes;
        let sc = Copy {
            which: self.scale_chunks(),
            src0: "8 * (n0w + w)".into(),
            k_ok: None,
            k_step: None,
            recheck: false,
            g_off: "(long long)(slot ? g1 : g0) * N".into(),
            base: "scales",
            // slot * BN + 8 w = 8 c: the chunks lie in copy order
            dst: "8 * c".into(),
            elem_bytes: 2,
            region: s_region,
            stage_bytes: p.s_stage_bytes,
            op: a_op,
            bytes: 16,
            row_step: None,
        };
        let z = Copy {
            which: self.zero_chunks(),
            src0: "n0w + w".into(),
            k_ok: None,
            k_step: None,
            recheck: false,
            g_off: "(long long)(slot ? g1 : g0) * N8".into(),
            base: "qzeros",
            // slot * BN/8 + w = vw c: the copies lie in copy order
            dst: if vw == 1 { "c".into() } else { format!("{vw} * c") },
            elem_bytes: 4,
            region: z_region,
            stage_bytes: p.z_stage_bytes,
            op: b_op,
            bytes: 4 * vw,
            row_step: None,
        };
        vec![sc, z]
    }

    /// Every copy kind of a stage: `x`, `qweight`, scales, zero words.
    fn copies(&self) -> Vec<Copy> {
        let mut v = self.tile_copies();
        v.extend(self.group_copies());
        v
    }

    /// Setup statements (after `kt0`): per copy its source at the split's first k-tile
    /// (`{a,b,s,z}_src[i]`, the tensor's base outside the problem), its source size
    /// (`_sz`, 0 outside) and, for `x` and `qweight`, its advance per k-tile (`_adv`, 0
    /// outside); a `qweight` kind whose copies share a column keeps one source and a stride.
    pub(super) fn copy_sources(&self) -> Vec<Stmt> {
        let mut out = vec![Stmt::Comment(
            "each copy's source at k-tile kt0 (the tensor's base outside the problem), its source size (0 outside: zeros) and its advance per k-tile"
                .into(),
        )];
        for cp in self.copies() {
            let pre = cp.prefix;
            let arr = format!("{pre}_src");
            let adv = cp.k_step.as_ref();
            if let Some(rows) = cp.row_step {
                out.push(Stmt::Comment(format!(
                    "a thread's {pre} copies share one column, {rows} rows apart: one source and a stride"
                )));
                let mut body = vec![Stmt::decl("const int", "c", "threadIdx.x")];
                body.extend(cp.coords.clone());
                body.push(Stmt::decl("const bool", "ok", cp.valid.clone()));
                body.push(Stmt::assign(
                    format!("{arr}0"),
                    format!("ok ? {} : {}", cp.src0, cp.base),
                ));
                body.push(Stmt::assign(format!("{pre}_sz"), format!("ok ? {}u : 0u", cp.bytes)));
                body.push(Stmt::assign(format!("{pre}_step"), format!("ok ? {rows} * N8 : 0")));
                body.push(s(format!("{arr}0 += (long long)kt0 * {pre}_step * {}", AWQ_BK / rows)));
                for (t, n) in [
                    (cp.ty.clone(), format!("{arr}0")),
                    ("uint32_t".into(), format!("{pre}_sz")),
                    ("int".into(), format!("{pre}_step")),
                ] {
                    out.push(Stmt::Decl {
                        ty: t,
                        name: n,
                        init: None,
                        comment: None,
                    });
                }
                out.push(Stmt::Block(body));
                continue;
            }
            if adv.is_none() {
                // scales and zero words keep no state: load_tile recomputes their few copies
                continue;
            }
            let n = cp.copies as usize;
            out.push(Stmt::Array {
                ty: cp.ty.clone(),
                name: arr.clone(),
                len: n,
                comment: None,
            });
            if !cp.recheck {
                out.push(Stmt::Array {
                    ty: "uint32_t".into(),
                    name: format!("{pre}_sz"),
                    len: n,
                    comment: None,
                });
                out.push(Stmt::Array {
                    ty: "int".into(),
                    name: format!("{pre}_adv"),
                    len: n,
                    comment: None,
                });
            }
            let mut body = vec![self.copy_index()];
            body.extend(cp.coords.clone());
            let valid = cp.in_stage_and_problem(self.p.threads);
            body.push(Stmt::decl("const bool", "ok", valid));
            body.push(Stmt::assign(
                format!("{arr}[i]"),
                format!("ok ? {} : {}", cp.src0, cp.base),
            ));
            match (adv, cp.recheck) {
                (Some(k), true) => body.push(s(format!("{arr}[i] += (long long)kt0 * (ok ? {k} : 0)"))),
                (Some(k), false) => {
                    body.push(Stmt::assign(format!("{pre}_sz[i]"), format!("ok ? {}u : 0u", cp.bytes)));
                    body.push(Stmt::assign(format!("{pre}_adv[i]"), format!("ok ? {k} : 0")));
                    body.push(s(format!("{arr}[i] += (long long)kt0 * {pre}_adv[i]")));
                }
                (None, _) => {}
            }
            out.push(Stmt::unrolled("i", cp.copies, body));
        }
        out
    }

    /// The copy state as `{name}_load_tile` takes it (after the four tensors).
    pub(super) fn copy_args(&self) -> String {
        self.copies()
            .iter()
            .map(|cp| {
                let pre = cp.prefix;
                match (cp.row_step, &cp.k_step, cp.recheck) {
                    (Some(_), _, _) => format!("{pre}_src0, {pre}_sz, {pre}_step"),
                    (None, Some(_), false) => format!("{pre}_src, {pre}_sz, {pre}_adv"),
                    (None, Some(_), true) => format!("{pre}_src"),
                    _ => String::new(),
                }
            })
            .filter(|a| !a.is_empty())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The parameters of one copy kind's state in `{name}_load_tile`.
    fn copy_params(cp: &Copy) -> Vec<(String, String)> {
        let (pre, n) = (cp.prefix, cp.copies);
        if cp.row_step.is_some() {
            return vec![
                (format!("{}&", cp.ty), format!("{pre}_src0")),
                ("uint32_t".into(), format!("{pre}_sz")),
                ("int".into(), format!("{pre}_step")),
            ];
        }
        if cp.k_step.is_none() {
            return vec![];
        }
        let mut v = vec![(cp.ty.clone(), format!("(&{pre}_src)[{n}]"))];
        if !cp.recheck {
            v.push(("const uint32_t".into(), format!("(&{pre}_sz)[{n}]")));
            v.push(("const int".into(), format!("(&{pre}_adv)[{n}]")));
        }
        v
    }

    /// The copies of one kind into stage `stage`: `careful` checks the K bound (a k-tile
    /// that reaches past K) and copies nothing (zeros) from rows past it.
    fn kind_copies(&self, cp: &Copy, careful: bool) -> Stmt {
        let pre = cp.prefix;
        let (src, sz) = match (cp.row_step, &cp.k_step) {
            (Some(_), _) => (format!("{pre}_src0 + (long long)i * {pre}_step"), format!("{pre}_sz")),
            (None, Some(_)) if cp.recheck => (format!("{pre}_src[i]"), format!("(in_b ? {}u : 0u)", cp.bytes)),
            (None, Some(_)) => (format!("{pre}_src[i]"), format!("{pre}_sz[i]")),
            (None, None) => (
                format!("{} + ((in_n ? {} : 0) + {})", cp.base, cp.src0, cp.g_off),
                format!("in_n ? {}u : 0u", cp.bytes),
            ),
        };
        let region = if cp.region == 0 {
            String::new()
        } else {
            format!(" + {}", cp.region)
        };
        let dst = format!(
            "sm{region} + stage * {} + {} * ({})",
            cp.stage_bytes, cp.elem_bytes, cp.dst
        );
        let mut b = vec![Stmt::Comment(cp.comment.clone())];
        b.extend(cp.coords.clone());
        if cp.k_step.is_none() {
            b.push(Stmt::decl("const bool", "in_n", cp.valid.clone()));
        } else if cp.recheck {
            b.push(Stmt::decl("const bool", "in_b", cp.valid.clone()));
        }
        match (&cp.k_ok, careful) {
            (Some(k), true) => {
                b.push(Stmt::decl("const bool", "ok", k.clone()));
                b.push(s(format!("{}({dst}, ok ? {src} : {}, ok ? {sz} : 0u)", cp.op, cp.base)));
            }
            _ => b.push(s(format!("{}({dst}, {src}, {sz})", cp.op))),
        }
        let mut l = vec![self.copy_index()];
        l.extend(guarded(cp.chunks, cp.copies * self.p.threads, b));
        Stmt::unrolled("i", cp.copies, l)
    }

    /// `{name}_load_tile`: one stage of `x`, `qweight`, scales and zero words with
    /// zero-filled edges, from the running sources, which it advances by one k-tile.
    pub(super) fn load_tile(&self) -> CFunction {
        let copies = self.copies();
        let (bounded, grouped): (Vec<&Copy>, Vec<&Copy>) = copies.iter().partition(|c| c.k_ok.is_some());
        let mut body = vec![
            Stmt::Comment(format!(
                "group rows of the stage's {GROUP_SLOTS} slots (rows k0 and k0 + 32); G is a power of two or G = K (one group)"
            )),
            Stmt::decl("const int", "g0", "min(k0 >> gshift, groups - 1)"),
            Stmt::decl("const int", "g1", "min((k0 + 32) >> gshift, groups - 1)"),
            Stmt::Comment(format!("x and qweight: K bounds only on a k-tile that reaches past K (k0 + {AWQ_BK} > K)")),
            Stmt::If {
                cond: format!("k0 + {AWQ_BK} <= K"),
                then: bounded.iter().map(|c| self.kind_copies(c, false)).collect(),
                otherwise: bounded.iter().map(|c| self.kind_copies(c, true)).collect(),
            },
        ];
        body.extend(grouped.iter().map(|c| self.kind_copies(c, false)));
        body.push(Stmt::Comment("advance the running sources by one k-tile".into()));
        for cp in &copies {
            let pre = cp.prefix;
            let rows_per_tile = cp.row_step.map(|r| AWQ_BK / r);
            match (rows_per_tile, &cp.k_step, cp.recheck) {
                (Some(f), _, _) => body.push(s(format!("{pre}_src0 += (long long){pre}_step * {f}"))),
                (None, Some(k), true) => {
                    let mut b = cp.coords.clone();
                    b.push(s(format!("{pre}_src[i] += {} ? {k} : 0", cp.valid)));
                    let mut l = vec![self.copy_index()];
                    l.extend(guarded(cp.chunks, cp.copies * self.p.threads, b));
                    body.push(Stmt::unrolled("i", cp.copies, l));
                }
                (None, Some(_), false) => body.push(Stmt::unrolled(
                    "i",
                    cp.copies,
                    vec![s(format!("{pre}_src[i] += {pre}_adv[i]"))],
                )),
                _ => {}
            }
        }
        let mut params = vec![
            ("uint32_t".to_string(), "sm".to_string()),
            ("int".into(), "stage".into()),
            (format!("const {}* __restrict__", self.ty), "x".into()),
            ("const uint32_t* __restrict__".into(), "qweight".into()),
            (format!("const {}* __restrict__", self.ty), "scales".into()),
            ("const uint32_t* __restrict__".into(), "qzeros".into()),
        ];
        for cp in &copies {
            params.extend(Self::copy_params(cp));
        }
        for (t, n) in [
            ("int", "k0"),
            ("int", "K"),
            ("int", "N8"),
            ("int", "N"),
            ("int", "gshift"),
            ("int", "groups"),
            ("int", "n0w"),
            ("int", "m0"),
            ("int", "M"),
        ] {
            params.push((t.into(), n.into()));
        }
        CFunction {
            qualifiers: "__device__ __forceinline__".into(),
            ret: "void".into(),
            name: format!("{}_load_tile", self.name),
            params,
            doc: vec![
                "One pipeline stage (stage slot `stage` of dynamic shared memory at shared address `sm`): the (BM, 64) tile of x, the (64, BN/8) tile of qweight words, and the scales and zero words of the tile's groups.".into(),
            ],
            body,
        }
    }
}
