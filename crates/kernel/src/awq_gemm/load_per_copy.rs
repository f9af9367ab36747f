//! The unprepared AWQ GEMM kernels' stage loader (AutoAWQ's row-major `qweight`): which
//! thread copies which 16-byte (or 4-byte) chunk of a stage, split into the part that does
//! not depend on the k-tile (each copy's source pointer at `k = 0`, computed once per
//! thread in the kernel's setup, `nullptr` where the copy's row or columns lie outside the
//! problem) and the per-stage part (`{name}_load_tile`: the k offset, the K bound and the
//! group rows, a few integer operations per copy). The prepared kernels use the leaner
//! running-source loader of [`super::load`], which measured 1-6 % slower than this one on
//! the unprepared kernels' table choices (H200, BENCHMARKS.md, AWQ helper awqdec).

use super::chunks::{decl, Chunks};
use super::{guarded, s, Emit};
use crate::emit::{Function as CFunction, Stmt};
use rcute_collective::awq_mainloop::{AWQ_BK, GROUP_SLOTS};

/// One kind of copy of a stage: its name prefix, copies per thread, chunks per stage, the
/// thread-constant coordinates of copy `c`, the k-invariant source (or `nullptr`), and the
/// per-stage bound, source offset and shared destination.
struct Copy {
    /// Which chunks the kind's copies move ([`Chunks`]; its fields read through `Deref`).
    which: Chunks,
    src0: String,
    k_ok: Option<String>,
    k_off: String,
    fallback: &'static str,
    dst: String,
    op: String,
}

impl std::ops::Deref for Copy {
    type Target = Chunks;
    fn deref(&self) -> &Chunks {
        &self.which
    }
}

impl Emit<'_> {
    fn per_copy_copies(&self) -> Vec<Copy> {
        let p = self.p;
        let bn = p.config.tile[1];
        let vw = p.config.b_vector_words;
        let a = Copy {
            which: self.x_chunks(),
            src0: "x + (long long)(m0 + r) * ldx + 8 * ch".into(),
            k_ok: Some("k0 + 8 * ch < K".into()),
            k_off: "k0".into(),
            fallback: "x",
            dst: "sA + r * 64 + ((ch ^ (r & 7)) << 3)".into(),
            op: p.copy_a.snippet.name.clone(),
        };
        let b = {
            let cpr = bn / 8 / vw;
            Copy {
                which: Chunks {
                    prefix: "b",
                    ty: "const uint32_t*".into(),
                    copies: p.b_copies,
                    chunks: AWQ_BK * bn / 8 / vw,
                    coords: vec![
                        decl("r", format!("c / {cpr}")),
                        decl(
                            "w",
                            if vw == 1 {
                                format!("c % {cpr}")
                            } else {
                                format!("(c % {cpr}) * {vw}")
                            },
                        ),
                    ],
                    comment: format!(
                        "copy c of the (64, BN/8) qweight word tile: row c / {cpr}, word (c % {cpr}) * {vw}; padded shared rows of {} words",
                        p.b_row_words
                    ),
                    valid: "n0w + w < N8".into(),
                },
            src0: "qweight + (long long)r * N8 + (n0w + w)".into(),
            k_ok: Some("k0 + r < K".into()),
            k_off: "kw".into(),
            fallback: "qweight",
            dst: format!("sB + r * {} + w", p.b_row_words),
            op: p.copy_b.snippet.name.clone(),
            // Per-copy pointers: one pointer and a stride measured 4-5 % slower on these
            // kernels (H200, BENCHMARKS.md, AWQ helper awq3).
        }
        };
        let sc = Copy {
            which: self.scale_chunks(),
            src0: "scales + 8 * (n0w + w)".into(),
            k_ok: None,
            k_off: "(long long)(slot ? g1 : g0) * N".into(),
            fallback: "scales",
            dst: format!("sS + slot * {bn} + 8 * w"),
            op: p.copy_a.snippet.name.clone(),
        };
        let z = Copy {
            which: self.zero_chunks(),
            src0: "qzeros + (n0w + w)".into(),
            k_ok: None,
            k_off: "(long long)(slot ? g1 : g0) * N8".into(),
            fallback: "qzeros",
            dst: format!("sZ + slot * {} + w", bn / 8),
            op: p.copy_b.snippet.name.clone(),
        };
        vec![a, b, sc, z]
    }

    /// Setup statements: each copy's k-invariant source pointer (`{a,b,s,z}_src[i]`), or
    /// `nullptr` where the copy is outside the problem.
    pub(super) fn per_copy_sources(&self) -> Vec<Stmt> {
        let mut out = vec![Stmt::Comment(
            "each copy's k-invariant source (nullptr: outside the problem); the mainloop adds the k-tile's offset"
                .into(),
        )];
        for cp in self.per_copy_copies() {
            let arr = format!("{}_src", cp.prefix);
            out.push(Stmt::Array {
                ty: cp.ty.clone(),
                name: arr.clone(),
                len: cp.copies as usize,
                comment: None,
            });
            let mut body = vec![self.copy_index()];
            body.extend(cp.coords.clone());
            let valid = cp.in_stage_and_problem(self.p.threads);
            body.push(Stmt::assign(
                format!("{arr}[i]"),
                format!("{valid} ? {} : nullptr", cp.src0),
            ));
            out.push(Stmt::unrolled("i", cp.copies, body));
        }
        out
    }

    /// The copy sources as `{name}_load_tile` takes them (after the four tensors).
    pub(super) fn per_copy_args(&self) -> String {
        self.per_copy_copies()
            .iter()
            .map(|cp| format!("{}_src", cp.prefix))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `{name}_load_tile`: one stage of `x`, `qweight`, scales and zero words with
    /// zero-filled edges, from the precomputed sources.
    pub(super) fn per_copy_load_tile(&self) -> CFunction {
        let p = self.p;
        let mut body = vec![
            Stmt::Comment("the k-tile's word offset in qweight (both layouts: k0 rows of N8 words)".into()),
            Stmt::decl("const long long", "kw", "(long long)k0 * N8"),
            Stmt::Comment(format!(
                "group rows of the stage's {GROUP_SLOTS} slots (rows k0 and k0 + 32); G is a power of two or G = K (one group)"
            )),
            Stmt::decl("const int", "g0", "min(k0 >> gshift, groups - 1)"),
            Stmt::decl("const int", "g1", "min((k0 + 32) >> gshift, groups - 1)"),
        ];
        let mut params = vec![
            (format!("{}*", self.ty), "sA".to_string()),
            ("uint32_t*".into(), "sB".into()),
            (format!("{}*", self.ty), "sS".into()),
            ("uint32_t*".into(), "sZ".into()),
            (format!("const {}* __restrict__", self.ty), "x".into()),
            ("const uint32_t* __restrict__".into(), "qweight".into()),
            (format!("const {}* __restrict__", self.ty), "scales".into()),
            ("const uint32_t* __restrict__".into(), "qzeros".into()),
        ];
        for cp in self.per_copy_copies() {
            params.push((
                format!("{} const", cp.ty),
                format!("(&{}_src)[{}]", cp.prefix, cp.copies),
            ));
            let (src, off) = (format!("{}_src[i]", cp.prefix), cp.k_off.clone());
            let ok = match &cp.k_ok {
                Some(k) => format!("{src} != nullptr && {k}"),
                None => format!("{src} != nullptr"),
            };
            let mut b = vec![Stmt::Comment(cp.comment.clone())];
            b.extend(cp.coords.clone());
            b.push(Stmt::decl("const bool", "ok", ok));
            b.push(s(format!(
                "{}({}, ok ? {src} + {off} : {}, ok)",
                cp.op, cp.dst, cp.fallback
            )));
            let mut l = vec![self.copy_index()];
            l.extend(guarded(cp.chunks, cp.copies * p.threads, b));
            body.push(Stmt::unrolled("i", cp.copies, l));
        }
        for (t, n) in [
            ("int", "k0"),
            ("int", "K"),
            ("int", "N8"),
            ("int", "N"),
            ("int", "gshift"),
            ("int", "groups"),
        ] {
            params.push((t.into(), n.into()));
        }
        CFunction {
            qualifiers: "__device__ __forceinline__".into(),
            ret: "void".into(),
            name: format!("{}_load_tile", self.name),
            params,
            doc: vec![
                "One pipeline stage: the (BM, 64) tile of x, the (64, BN/8) tile of qweight words, and the scales and zero words of the tile's groups.".into(),
            ],
            body,
        }
    }
}
