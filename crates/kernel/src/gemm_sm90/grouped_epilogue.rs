//! The grouped member's register epilogue ([`super::grouped`]), in two phases per tile:
//!
//! 1. Loads: every value the stores need besides the accumulators, each loaded once per
//!    tile and all before the first store, independent of each other (no branch between
//!    them), so that their latencies overlap: with e4m3 operands the weight scale of each
//!    of the thread's output columns (SwiGLU: of its gate and its up B row), shared by the
//!    rows of every m64 atom and row half; per row of the thread the activation scale
//!    (e4m3) and, for the scatter, the routed entry and then that entry's router weight.
//!    A column past `N` (a row past `M`) loads column `N - 1` (row `M - 1`); its store is
//!    skipped. One load per accumulator behind each store's bounds check serialized the
//!    loads (a chain of L2 round trips per tile in the SASS of the e4m3 SwiGLU unit).
//! 2. Stores: per atom, row half and column pair, `silu(gate) * up` (SwiGLU, in padded-row
//!    order) or `weight * acc` (scatter, to the entry's row) from the registers, one 32-bit
//!    store of the pair.

use super::grouped::is_fp8;
use super::*;

/// The `wgmma` accumulator fragment of one m64 atom (CLayout_64xN) as the epilogue walks
/// it, and the slots of the per-tile register arrays.
struct Frag {
    /// Column pairs per row half: `BN / 8` (SwiGLU: `BN / 16` output pairs, each with its
    /// up pair `BN / 4` registers further).
    pairs: i64,
    /// (h, j) -> register of the pair's first accumulator.
    reg: Layout,
    /// (h, j) -> row offset from the thread's first row.
    row: Layout,
    /// (h, j) -> column offset from the thread's first column.
    col: Layout,
    /// (x, j) -> slot of column `col(j) + x` in the column-scale arrays.
    col_slot: Layout,
    /// (h, a) -> slot of atom `a`'s row half `h` in the row arrays.
    row_slot: Layout,
}

fn frag(k: &Ctx, g: Sm90Grouped) -> Result<Frag, GemmError> {
    let pairs = match g {
        Sm90Grouped::SwiGlu => k.bn / 16,
        Sm90Grouped::Scatter => k.bn / 8,
    };
    let atoms = k.p.m_atoms;
    Ok(Frag {
        pairs,
        reg: lay(tuple!(2, pairs), tuple!(2, 4))?,
        row: lay(tuple!(2, pairs), tuple!(8, 0))?,
        col: lay(tuple!(2, pairs), tuple!(0, 8))?,
        col_slot: lay(tuple!(2, pairs), tuple!(1, 2))?,
        row_slot: lay(tuple!(2, atoms), tuple!(1, 2))?,
    })
}

/// The column-scale arrays of each epilogue: (name, B row origin of its columns).
fn col_scale_arrays(g: Sm90Grouped) -> &'static [(&'static str, &'static str)] {
    match g {
        Sm90Grouped::SwiGlu => &[("sg", "gate_row0 + "), ("su", "up_row0 + ")],
        Sm90Grouped::Scatter => &[("sb", "")],
    }
}

/// e4m3: the weight scales of the thread's output columns, once per tile.
fn column_scales(g: Sm90Grouped, f: &Frag) -> Result<Vec<Stmt>, GemmError> {
    let rows = match g {
        Sm90Grouped::SwiGlu => "2 * N",
        Sm90Grouped::Scatter => "N",
    };
    let mut v = vec![
        dc(
            "const float* const",
            "bs",
            format!("b_scale + (long long)expert * {rows}"),
            format!("the expert's weight scales, one per B row: b_scale (L,{rows}):({rows},1)"),
        ),
        c(match g {
            Sm90Grouped::SwiGlu => {
                "weight scales of this thread's columns gn + col + x, once per tile: sg (gate row), su (up row)"
            }
            Sm90Grouped::Scatter => "weight scales of this thread's columns gn + col + x, once per tile: sb",
        }),
    ];
    let arrays = col_scale_arrays(g);
    for (name, _) in arrays {
        v.push(Stmt::Array {
            ty: "float".into(),
            name: name.to_string(),
            len: 2 * f.pairs as usize,
            comment: None,
        });
    }
    let mut per_x = vec![
        dl("const int", "cs", &f.col_slot, &[var("x"), var("j")])?,
        dc(
            "const int",
            "cn",
            "min(gn + col + x, N - 1)",
            "a column past N loads column N - 1 (its store is skipped)",
        ),
    ];
    for (name, origin) in arrays {
        per_x.push(Stmt::assign(format!("{name}[cs]"), format!("__ldg(bs + {origin}cn)")));
    }
    v.push(unroll(
        "j",
        f.pairs,
        vec![
            dl("const int", "col", &f.col, &[Expr::lit(0), var("j")])?,
            unroll("x", 2, per_x),
        ],
    ));
    Ok(v)
}

/// The row values of the thread's rows (atom `a`, half `h`, slot `rs`), once per tile:
/// the activation scale `sa` (e4m3); the scatter's routed entry, then its router weight.
fn row_values(k: &Ctx, g: Sm90Grouped, f: &Frag) -> Result<Vec<Stmt>, GemmError> {
    let fp8 = is_fp8(k.cfg);
    let scatter = g == Sm90Grouped::Scatter;
    if !fp8 && !scatter {
        return Ok(vec![]);
    }
    let slots = 2 * k.p.m_atoms as usize;
    let array = |ty: &str, name: &str, what: &str| Stmt::Array {
        ty: ty.into(),
        name: name.into(),
        len: slots,
        comment: Some(what.into()),
    };
    let mut v = vec![c("this thread's rows (atom a, half h: slot rs), once per tile")];
    let mut per_row = vec![
        dl("const int", "row", &f.row, &[var("h"), Expr::lit(0)])?,
        dl("const int", "rs", &f.row_slot, &[var("h"), var("a")])?,
    ];
    if fp8 {
        v.push(array("float", "sa", "the row's (token's) activation scale"));
        per_row.push(Stmt::Assign {
            lhs: "sa[rs]".into(),
            rhs: "__ldg(a_scale + min(gm + row, M - 1))".into(),
            comment: Some("a row past M loads row M - 1 (not stored)".into()),
        });
    }
    if scatter {
        v.push(array(
            "int",
            "entry",
            "the routed (token, j) entry of the row; `entries` in padding rows",
        ));
        v.push(array("float", "w", "the entry's router weight"));
        per_row.push(Stmt::assign(
            "entry[rs]",
            "gm + row < M ? __ldg(sorted_ids + gm + row) : entries",
        ));
    }
    v.push(unroll("a", k.p.m_atoms, vec![gm_decl(), unroll("h", 2, per_row)]));
    if scatter {
        v.push(c(
            "the router weights once every entry is loaded (the loads of each kind overlap)",
        ));
        v.push(unroll(
            "rs",
            slots,
            vec![Stmt::assign(
                "w[rs]",
                "weights != nullptr && entry[rs] < entries ? __ldg(weights + entry[rs]) : 1.0f",
            )],
        ));
    }
    Ok(v)
}

fn gm_decl() -> Stmt {
    dc(
        "const int",
        "gm",
        "m0 + wg_row0 + a * 64 + 16 * warp + lane / 4",
        "CLayout_64xN rows (+8 for the second half)",
    )
}

/// `*reinterpret_cast<T2*>(ptr) = (x, y)` in the output's pair type.
fn store_pair(el: Element, ptr: &str, x: &str, y: &str) -> Stmt {
    let (t2, f) = match el {
        Element::BF16 => ("__nv_bfloat162", "__floats2bfloat162_rn"),
        _ => ("__half2", "__floats2half2_rn"),
    };
    Stmt::assign(format!("*reinterpret_cast<{t2}*>({ptr})"), format!("{f}({x}, {y})"))
}

/// Accumulator register `r` as a value of the epilogue: with e4m3 operands times the row's
/// activation scale and the column's weight scale `scale`.
fn scaled(fp8: bool, r: &str, scale: &str) -> String {
    if fp8 {
        format!("(acc[a][{r}] * sa[rs] * {scale})")
    } else {
        format!("acc[a][{r}]")
    }
}

/// The stores of one tile from the registers and the loaded values.
fn stores(k: &Ctx, g: Sm90Grouped, f: &Frag) -> Result<Vec<Stmt>, GemmError> {
    let el = k.cfg.cd;
    let fp8 = is_fp8(k.cfg);
    let t = el.cuda_type();
    let hj = [var("h"), var("j")];
    let pair = |x: &str, y: &str| if_("gn + col < N", vec![store_pair(el, "drow + gn + col", x, y)]);
    let mut per_j = vec![
        dl("const int", "ri", &f.reg, &hj)?,
        dl("const int", "col", &f.col, &hj)?,
    ];
    if fp8 {
        per_j.push(dl("const int", "cs", &f.col_slot, &[Expr::lit(0), var("j")])?);
    }
    match g {
        Sm90Grouped::SwiGlu => {
            let v = |r: &str, up: &str, cs: &str| {
                format!(
                    "rc_silu({}) * {}",
                    scaled(fp8, r, &format!("sg[{cs}]")),
                    scaled(fp8, up, &format!("su[{cs}]"))
                )
            };
            per_j.push(dc(
                "const int",
                "ru",
                format!("ri + {}", k.bn / 4),
                format!(
                    "the up accumulator: column col + {} (B rows {}..{})",
                    k.bn / 2,
                    k.bn / 2,
                    k.bn
                ),
            ));
            per_j.push(pair(&v("ri", "ru", "cs"), &v("ri + 1", "ru + 1", "cs + 1")));
        }
        Sm90Grouped::Scatter => per_j.push(pair(
            &format!("w[rs] * {}", scaled(fp8, "ri", "sb[cs]")),
            &format!("w[rs] * {}", scaled(fp8, "ri + 1", "sb[cs + 1]")),
        )),
    }
    let mut per_row = vec![dl("const int", "row", &f.row, &[var("h"), Expr::lit(0)])?];
    if fp8 || g == Sm90Grouped::Scatter {
        per_row.push(dl("const int", "rs", &f.row_slot, &[var("h"), var("a")])?);
    }
    let j_loop = unroll("j", f.pairs, per_j);
    match g {
        Sm90Grouped::SwiGlu => {
            per_row.push(d(&format!("{t}* const"), "drow", "D + (long long)(gm + row) * ldd"));
            per_row.push(if_("gm + row < M", vec![j_loop]));
        }
        Sm90Grouped::Scatter => per_row.push(if_(
            "entry[rs] < entries",
            vec![
                d(&format!("{t}* const"), "drow", "D + (long long)entry[rs] * ldd"),
                j_loop,
            ],
        )),
    }
    Ok(vec![unroll("a", k.p.m_atoms, vec![gm_decl(), unroll("h", 2, per_row)])])
}

/// The register epilogue of one tile: the loads, then the stores.
pub(super) fn epilogue(k: &Ctx, g: Sm90Grouped) -> Result<Vec<Stmt>, GemmError> {
    let f = frag(k, g)?;
    let mut body = vec![dc(
        "const int",
        "gn",
        "n0 + 2 * (lane % 4)",
        "output column of acc[a][0] (CLayout_64xN)",
    )];
    if is_fp8(k.cfg) {
        body.extend(column_scales(g, &f)?);
    }
    body.extend(row_values(k, g, &f)?);
    body.extend(stores(k, g, &f)?);
    let mut v = vec![c(match g {
        Sm90Grouped::SwiGlu => "grouped epilogue: silu(gate) * up, column pairs from the registers to padded rows",
        Sm90Grouped::Scatter => "grouped epilogue: router weight times the row, scattered to its entry row",
    })];
    if k.clustered {
        v.push(c(
            "a cluster CTA without a tile (its partner's column tile is the last) loads and stores nothing",
        ));
        v.push(if_("mine", body));
    } else {
        v.extend(body);
    }
    Ok(v)
}
