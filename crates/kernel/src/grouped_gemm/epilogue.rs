//! The grouped kernels' epilogues, straight from the accumulator fragments (each thread
//! stores its adjacent column pairs; no shared-memory staging):
//!
//! * SwiGLU: with `NJ` n-atoms per warp, the column of n-atom `nj + NJ/2` is the column of
//!   `nj` plus `BN / 2` (checked on the layouts by [`check_swiglu_pairs`]), so the thread
//!   holding a gate accumulator (B tile rows `0..BN/2`) holds its up accumulator too.
//! * Scatter: row `m` to `D[sorted_ids[m]]`, times `weights[sorted_ids[m]]`.

use super::{GroupedEpilogue, GroupedGemmConfig, GroupedGemmError};
use crate::emit::{index_expr, Stmt};
use crate::gemm_sm80::fragment_layouts;
use rcute_atom::Element;
use rcute_collective::Sm80Mainloop;
use rcute_layout::{Int, Layout, Tuple};

fn at(l: &Layout, c: &[i64]) -> Option<i64> {
    let coord = Tuple::Node(c.iter().map(|&v| Tuple::Leaf(Int::Static(v))).collect());
    l.crd2idx(&coord).ok()?.as_static()
}

/// SwiGLU needs, for every lane, warp column and `nj < NJ/2`: column(nj) < BN/2 and
/// column(nj + NJ/2) = column(nj) + BN/2.
pub(super) fn check_swiglu_pairs(p: &Sm80Mainloop) -> Result<(), GroupedGemmError> {
    let (_, col) = fragment_layouts(p, p.mma_m);
    let bn = p.config.tile[1];
    let nj = p.mma_n;
    let bad = || {
        GroupedGemmError::Config(format!(
            "SwiGLU pairs gate and up columns in one thread: tile {:?} with warps {:?} has {nj} n-atoms per warp (need a multiple of 4)",
            p.config.tile, p.config.warps
        ))
    };
    if nj % 2 != 0 {
        return Err(bad());
    }
    for lane in 0..32 {
        for wn in 0..p.config.warps[1] {
            for j in 0..nj / 2 {
                let g = at(&col, &[lane, j, wn]).ok_or_else(bad)?;
                let u = at(&col, &[lane, j + nj / 2, wn]).ok_or_else(bad)?;
                if g >= bn / 2 || u != g + bn / 2 {
                    return Err(bad());
                }
            }
        }
    }
    Ok(())
}

/// `*reinterpret_cast<T2*>(ptr) = (x, y)` in the element's pair type.
fn store_pair(e: Element, ptr: &str, x: &str, y: &str) -> Stmt {
    let (t2, f) = match e {
        Element::BF16 => ("__nv_bfloat162", "__floats2bfloat162_rn"),
        _ => ("__half2", "__floats2half2_rn"),
    };
    Stmt::assign(format!("*reinterpret_cast<{t2}*>({ptr})"), format!("{f}({x}, {y})"))
}

/// The epilogue statements (after the mainloop).
pub(super) fn epilogue(cfg: &GroupedGemmConfig, p: &Sm80Mainloop) -> Vec<Stmt> {
    let (row, col) = fragment_layouts(p, p.mma_m);
    let row = index_expr(&row, &["lane", "h", "warp_m", "mi"]).expect("rank-matched coordinate");
    let col = index_expr(&col, &["lane", "nj", "warp_n"]).expect("rank-matched coordinate");
    let ta = cfg.element.cuda_type();
    let acc = |nj: &str, x: &str| format!("acc[mi][{nj}][2 * h + {x}]");
    let row_decls = vec![Stmt::Decl {
        ty: "const int".into(),
        name: "m".into(),
        init: Some(format!("m0 + {}", row.expr)),
        comment: Some(format!("row: {}", row.comment)),
    }];
    let col_decl = Stmt::Decl {
        ty: "const int".into(),
        name: "n".into(),
        init: Some(format!("n0 + {}", col.expr)),
        comment: Some(format!("column pair (n, n + 1): {}", col.comment)),
    };
    let per_row = match cfg.epilogue {
        GroupedEpilogue::SwiGlu => {
            let half = p.mma_n / 2;
            // a self-routing GEMM1 writes `sorted_ids` itself in this kernel: it stores every row
            let cond = if cfg.skip_padding && cfg.route.is_none() {
                format!("m < M && n < N && {}", super::routed_row("m"))
            } else {
                "m < M && n < N".to_string()
            };
            let mut v = row_decls;
            v.push(Stmt::decl(&format!("{ta}* const"), "drow", "D + (long long)m * ldd"));
            v.push(Stmt::unrolled(
                "nj",
                half,
                vec![
                    col_decl,
                    Stmt::If {
                        cond,
                        then: vec![store_pair(
                            cfg.element,
                            "drow + n",
                            &format!("rc_silu({}) * {}", acc("nj", "0"), acc(&format!("nj + {half}"), "0")),
                            &format!("rc_silu({}) * {}", acc("nj", "1"), acc(&format!("nj + {half}"), "1")),
                        )],
                        otherwise: vec![],
                    },
                ],
            ));
            v
        }
        GroupedEpilogue::Scatter => {
            let mut v = row_decls;
            v.push(Stmt::Decl {
                ty: "const int".into(),
                name: "entry".into(),
                init: Some("m < M ? __ldg(sorted_ids + m) : entries".into()),
                comment: Some("the routed entry of this row (entries: padding)".into()),
            });
            v.push(Stmt::If {
                cond: "entry < entries".into(),
                then: vec![
                    Stmt::decl("const float", "w", "weights != nullptr ? __ldg(weights + entry) : 1.0f"),
                    Stmt::Decl {
                        ty: format!("{ta}* const"),
                        name: "drow".into(),
                        init: Some("D + split * split_stride + (long long)entry * ldd".into()),
                        comment: Some("slab of this K split, row of the entry".into()),
                    },
                    Stmt::unrolled(
                        "nj",
                        p.mma_n,
                        vec![
                            col_decl,
                            Stmt::If {
                                cond: "n < N".into(),
                                then: vec![store_pair(
                                    cfg.element,
                                    "drow + n",
                                    &format!("w * {}", acc("nj", "0")),
                                    &format!("w * {}", acc("nj", "1")),
                                )],
                                otherwise: vec![],
                            },
                        ],
                    ),
                ],
                otherwise: vec![],
            });
            v
        }
    };
    vec![
        Stmt::Comment(format!(
            "Epilogue from the fragments: acc[mi][nj][2 * h + x] is row {}, column {} + x",
            row.comment, col.comment
        )),
        Stmt::unrolled("mi", p.mma_m, vec![Stmt::unrolled("h", 2, per_row)]),
    ]
}
