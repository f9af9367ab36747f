//! The global -> shared producer: per-thread `cp.async` (or, on Turing, register-staged
//! `ld.global.nc` + `st.shared`) copies of the A and B tiles into the pipeline stages.

use super::smem::{smem_setup, Separable};
use super::stmt::{c, d, dc, e};
use crate::emit::Stmt;
use rcute_atom::Major;
use rcute_collective::Sm80Mainloop;

/// Row gathers of the K-major operands in the load stage: for an operand with `Some`
/// statements, they run once per load pass with the tile row `r` (an `int`, `0 <= r <
/// BM` or `BN`) in scope and must declare `src_row` (`int`: the operand's row that tile
/// row `r` reads) and `src_ok` (`bool`: whether that row exists; if not, the row is
/// zero-filled). `None`: row `m0 + r` (`n0 + r`), in bounds when below `M` (`N`).
#[derive(Clone, Debug, Default)]
pub(crate) struct G2sRows {
    /// A's row map.
    pub a: Option<Vec<Stmt>>,
    /// B's row map.
    pub b: Option<Vec<Stmt>>,
    /// Without a row map for A: a further condition for A's row to be loaded, the C
    /// expression it makes of the row's index expression (`m0 + r`); rows failing it are
    /// zero-filled like those past `M`.
    pub a_live: Option<fn(&str) -> String>,
}

impl G2sRows {
    pub(crate) fn of(&self, is_a: bool) -> Option<&[Stmt]> {
        if is_a {
            self.a.as_deref()
        } else {
            self.b.as_deref()
        }
    }
}

/// How the mainloop emitter moves tiles from global to shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum G2sMode {
    /// `cp.async.cg` with zero fill and a `stages`-deep pipeline (sm_80 and newer).
    CpAsync,
    /// Turing (sm_75, no `cp.async`): the loads of a tile go to registers (16-byte
    /// `ld.global.nc`, zeros when predicated off) while the previous tile is multiplied,
    /// and are stored to shared memory after its last k-block: CUTLASS's two-stage SM75
    /// pipeline. Needs 2 stages and at least 2 k-blocks per tile.
    Registers,
}

/// The G2S copy of one operand for tile `kt_var` into stage `stage_var` (with
/// [`G2sMode::Registers`]: the loads into `{x}_reg`; [`r2s_tile`] stores them).
#[allow(clippy::too_many_arguments)]
pub(super) fn g2s_tile(
    p: &Sm80Mainloop,
    sep: Separable,
    name: &str,
    is_a: bool,
    stage: &str,
    kt: &str,
    mode: G2sMode,
    rows: &G2sRows,
) -> Vec<Stmt> {
    let gathered = rows.of(is_a).is_some() && g2s_major(p, is_a) == Major::K;
    let (x, g, st_elems, ld, gsep) = if is_a {
        ("a", &p.g2s_a, p.stage_elems_a, "lda", sep.g2s_a)
    } else {
        ("b", &p.g2s_b, p.stage_elems_b, "ldb", sep.g2s_b)
    };
    let sx = if is_a { "sA" } else { "sB" };
    let gx = if is_a { "gA" } else { "gB" };
    let sfn = if is_a {
        format!("{name}_sA")
    } else {
        format!("{name}_sB")
    };
    let _ = ld;
    let bk = p.config.tile[2];
    let ta = p.config.a.cuda_type();
    let v = g.copy_vec;
    let dst = if gsep {
        format!(
            "{sx} + {stage} * {st_elems} + ({x}_s0 ^ {sfn}(p * {}, p * {}))",
            g.pass_step[0], g.pass_step[1]
        )
    } else {
        format!("{sx} + {stage} * {st_elems} + {x}_smem[p]")
    };
    let mut body = Vec::new();
    let (tile_ptr, pred) = match g.major {
        Major::K => {
            body.push(dc(
                "const bool",
                &format!("{x}_kp"),
                format!("{kt} * {bk} < {x}_krem"),
                format!("whole {v}-vectors along K: K % {v} == 0"),
            ));
            (
                format!("{x}_src + {kt} * {bk}"),
                format!("{x}_kp && (({x}_pred_mn >> p) & 1)"),
            )
        }
        Major::MN => (
            format!("{x}_src + (long long)({kt} * {bk}) * {ld}"),
            format!("{x}_pred_mn && ({kt} * {bk} + p * {} < {x}_krem)", g.pass_step[1]),
        ),
    };
    let mut passes = Vec::new();
    if gathered {
        // gathered rows: one source row per pass (see `G2sRows`)
        passes.push(d(
            &format!("const {ta}*"),
            &format!("{x}_ptr"),
            format!("{x}_row[p] + {kt} * {bk}"),
        ));
    } else {
        body.push(d(&format!("const {ta}*"), &format!("{x}_ptr"), tile_ptr));
    }
    let step = if gathered {
        vec![]
    } else {
        vec![e(format!("{x}_ptr += {x}_pass"))]
    };
    passes.extend(match mode {
        G2sMode::CpAsync => vec![
            d("const bool", "pred", pred),
            c(format!(
                "predicated off: src-size 0 zero-fills; the address is then only the kernel parameter {}",
                &gx[1..]
            )),
            e(format!(
                "{}({dst}, pred ? static_cast<const void*>({x}_ptr) : static_cast<const void*>({}), pred)",
                g.tiled.atom.op.snippet.name,
                &gx[1..]
            )),
        ],
        G2sMode::Registers => vec![
            d("const bool", "pred", pred),
            Stmt::Assign {
                lhs: format!("{x}_reg[p]"),
                rhs: format!("pred ? __ldg(reinterpret_cast<const uint4*>({x}_ptr)) : make_uint4(0u, 0u, 0u, 0u)"),
                comment: Some("predicated off: zeros".into()),
            },
        ],
    });
    passes.extend(step);
    body.push(Stmt::unrolled("p", g.passes, passes));
    body
}

/// [`G2sMode::Registers`]: store the registers loaded by [`g2s_tile`] into stage `stage`.
pub(super) fn r2s_tile(p: &Sm80Mainloop, sep: Separable, name: &str, is_a: bool, stage: &str) -> Vec<Stmt> {
    let (x, g, st_elems, gsep) = if is_a {
        ("a", &p.g2s_a, p.stage_elems_a, sep.g2s_a)
    } else {
        ("b", &p.g2s_b, p.stage_elems_b, sep.g2s_b)
    };
    let sx = if is_a { "sA" } else { "sB" };
    let dst = if gsep {
        format!(
            "{sx} + {stage} * {st_elems} + ({x}_s0 ^ {name}_s{}(p * {}, p * {}))",
            if is_a { "A" } else { "B" },
            g.pass_step[0],
            g.pass_step[1]
        )
    } else {
        format!("{sx} + {stage} * {st_elems} + {x}_smem[p]")
    };
    vec![Stmt::unrolled(
        "p",
        g.passes,
        vec![Stmt::assign(
            format!("*reinterpret_cast<uint4*>({dst})"),
            format!("{x}_reg[p]"),
        )],
    )]
}

/// Both operands of the tile in `{a,b}_reg` into stage `stage` ([`G2sMode::Registers`]).
pub(super) fn r2s_both(p: &Sm80Mainloop, sep: Separable, name: &str, stage: &str) -> Vec<Stmt> {
    let mut v = r2s_tile(p, sep, name, true, stage);
    v.extend(r2s_tile(p, sep, name, false, stage));
    v
}

/// The G2S setup of both operands: each thread's first vector (`x_mn`, `x_k`), its global
/// source, the M/N predicates, the gmem step between passes, and its smem offsets.
pub(super) fn g2s_setup(p: &Sm80Mainloop, sep: Separable, name: &str, mode: G2sMode, rows: &G2sRows) -> Vec<Stmt> {
    let ta = p.config.a.cuda_type();
    let mut b: Vec<Stmt> = Vec::new();
    for (is_a, x, g, mn_total, m_or_n0, ld, sfn) in [
        (true, "a", &p.g2s_a, "M", "m0", "lda", format!("{name}_sA")),
        (false, "b", &p.g2s_b, "N", "n0", "ldb", format!("{name}_sB")),
    ] {
        let gx = if is_a { "gA" } else { "gB" };
        let gsep = if is_a { sep.g2s_a } else { sep.g2s_b };
        let (tmn, tk) = g.thread_extents();
        let v = g.copy_vec;
        b.push(c(format!(
            "G2S {}: {}, thr_layout {} x val_layout {}, {} passes",
            if is_a { "A" } else { "B" },
            match (mode, g.copy_bytes) {
                (G2sMode::CpAsync, 16) => "cp.async.cg 16 B (zero fill)",
                (G2sMode::CpAsync, 8) => "cp.async.ca 8 B (zero fill; operands not 16-byte aligned)",
                (G2sMode::CpAsync, 4) => "cp.async.ca 4 B (zero fill; operands not 8-byte aligned)",
                (G2sMode::CpAsync, _) =>
                    "16-bit loads stored to shared memory (zeros when predicated off; operands not 4-byte aligned)",
                (G2sMode::Registers, _) =>
                    "ld.global.nc 16 B into registers (zeros when predicated off), st.shared after the tile",
            },
            g.thr_layout,
            g.val_layout,
            g.passes
        )));
        match g.major {
            Major::K if rows.of(is_a).is_some() => {
                b.extend(gathered_rows_setup(
                    p,
                    is_a,
                    rows.of(is_a).unwrap_or_default(),
                    &sfn,
                    gsep,
                ));
            }
            Major::K => {
                b.push(dc(
                    "const int",
                    &format!("{x}_mn"),
                    format!("tid / {tk}"),
                    format!("thr_layout ({tmn},{tk}):({tk},1)"),
                ));
                b.push(d("const int", &format!("{x}_k"), format!("tid % {tk} * {v}")));
                b.push(dc(
                    &format!("const {ta}* const"),
                    &format!("{x}_src"),
                    format!("{gx} + (long long)({m_or_n0} + {x}_mn) * {ld} + (k_begin + {x}_k)"),
                    format!("K-major: ({mn_total},K):({ld},1)"),
                ));
                b.push(d("uint32_t", &format!("{x}_pred_mn"), "0"));
                let row = format!("{m_or_n0} + {x}_mn + p * {}", g.pass_step[0]);
                let live = match (rows.a_live, is_a) {
                    (Some(live), true) => format!(" && {}", live(&row)),
                    _ => String::new(),
                };
                b.push(Stmt::unrolled(
                    "p",
                    g.passes,
                    vec![e(format!("{x}_pred_mn |= ({row} < {mn_total}{live} ? 1u : 0u) << p"))],
                ));
                b.push(dc(
                    "const long long",
                    &format!("{x}_pass"),
                    format!("{} * {ld}", g.pass_step[0]),
                    "gmem step between passes",
                ));
                b.push(dc(
                    "const int",
                    &format!("{x}_krem"),
                    format!("k_end - k_begin - {x}_k"),
                    "K left for this thread's first vector",
                ));
                b.extend(smem_setup(gsep, &sfn, x, g));
            }
            Major::MN => {
                b.push(dc(
                    "const int",
                    &format!("{x}_mn"),
                    format!("tid % {tmn} * {v}"),
                    format!("thr_layout ({tmn},{tk}):(1,{tmn})"),
                ));
                b.push(d("const int", &format!("{x}_k"), format!("tid / {tmn}")));
                b.push(dc(
                    &format!("const {ta}* const"),
                    &format!("{x}_src"),
                    format!("{gx} + (long long)(k_begin + {x}_k) * {ld} + ({m_or_n0} + {x}_mn)"),
                    format!("MN-major: ({mn_total},K):(1,{ld})"),
                ));
                b.push(dc(
                    "const bool",
                    &format!("{x}_pred_mn"),
                    format!("{m_or_n0} + {x}_mn < {mn_total}"),
                    "a vector past the edge reads ld padding that only feeds unstored outputs",
                ));
                b.push(dc(
                    "const long long",
                    &format!("{x}_pass"),
                    format!("{} * {ld}", g.pass_step[1]),
                    "gmem step between passes",
                ));
                b.push(dc(
                    "const int",
                    &format!("{x}_krem"),
                    format!("k_end - k_begin - {x}_k"),
                    "K left for this thread's first vector",
                ));
                b.extend(smem_setup(gsep, &sfn, x, g));
            }
        }
    }
    b
}

/// The prologue: the loads of the first `stages - 1` tiles (with [`G2sMode::Registers`]
/// the register array of the tile in flight is declared here).
pub(super) fn prologue(p: &Sm80Mainloop, sep: Separable, name: &str, mode: G2sMode, rows: &G2sRows) -> Vec<Stmt> {
    let stages = p.stages;
    let mut b: Vec<Stmt> = Vec::new();
    b.push(c(format!(
        "Prologue: start the loads of the first {} tiles",
        stages - 1
    )));
    b.push(d("int", "k_tile_next", "0"));
    if mode == G2sMode::Registers {
        for (x, g) in [("a", &p.g2s_a), ("b", &p.g2s_b)] {
            b.push(Stmt::Array {
                ty: "uint4".into(),
                name: format!("{x}_reg"),
                len: g.passes as usize,
                comment: Some("the tile in flight: loaded while the previous one is multiplied".into()),
            });
        }
    }
    let mut pro = g2s_tile(p, sep, name, true, "s", "k_tile_next", mode, rows);
    pro.extend(g2s_tile(p, sep, name, false, "s", "k_tile_next", mode, rows));
    match mode {
        G2sMode::CpAsync => pro.push(e("rc_cp_async_commit_group()")),
        G2sMode::Registers => pro.extend(r2s_both(p, sep, name, "s")),
    }
    pro.push(e("++k_tile_next"));
    pro.push(e("--k_tile_count"));
    b.push(Stmt::unrolled("s", stages - 1, pro));
    b
}

fn g2s_major(p: &Sm80Mainloop, is_a: bool) -> Major {
    if is_a {
        p.g2s_a.major
    } else {
        p.g2s_b.major
    }
}

/// The G2S setup of a K-major operand whose rows are gathered ([`G2sRows`]): per pass, the
/// tile row `r = x_mn + p * step` is mapped by the caller's statements to `src_row` /
/// `src_ok`; `x_row[p]` points at the thread's first vector of that row and bit `p` of
/// `x_pred_mn` says whether it exists (otherwise the vector is zero-filled).
fn gathered_rows_setup(p: &Sm80Mainloop, is_a: bool, map: &[Stmt], sfn: &str, gsep: bool) -> Vec<Stmt> {
    let (x, g, gx, ld) = if is_a {
        ("a", &p.g2s_a, "gA", "lda")
    } else {
        ("b", &p.g2s_b, "gB", "ldb")
    };
    let ta = p.config.a.cuda_type();
    let (_, tk) = g.thread_extents();
    let mut b = vec![
        dc(
            "const int",
            &format!("{x}_mn"),
            format!("tid / {tk}"),
            format!("thr_layout (*,{tk}):({tk},1)"),
        ),
        d("const int", &format!("{x}_k"), format!("tid % {tk} * {}", g.vec)),
        Stmt::Array {
            ty: format!("const {ta}*"),
            name: format!("{x}_row"),
            len: g.passes as usize,
            comment: Some("gathered rows: the thread's first vector of each pass's source row".into()),
        },
        d("uint32_t", &format!("{x}_pred_mn"), "0"),
    ];
    let mut per_pass = vec![dc(
        "const int",
        "r",
        format!("{x}_mn + p * {}", g.pass_step[0]),
        "tile row",
    )];
    per_pass.extend(map.iter().cloned());
    per_pass.push(Stmt::assign(
        format!("{x}_row[p]"),
        format!("{gx} + (long long)(src_ok ? src_row : 0) * {ld} + (k_begin + {x}_k)"),
    ));
    per_pass.push(e(format!("{x}_pred_mn |= (src_ok ? 1u : 0u) << p")));
    b.push(Stmt::unrolled("p", g.passes, per_pass));
    b.push(dc(
        "const int",
        &format!("{x}_krem"),
        format!("k_end - k_begin - {x}_k"),
        "K left for this thread's first vector",
    ));
    b.extend(smem_setup(gsep, sfn, x, g));
    b
}
