//! The shared -> register loads: `ldmatrix.x4` of the A and B fragments of one k-block.

use super::smem::Separable;
use super::stmt::{c, d, dc, e};
use crate::emit::Stmt;
use rcute_collective::Sm80Mainloop;

/// Load k-block `kb` of stage `stage` into fragment buffer `buf`.
pub(super) fn s2r(p: &Sm80Mainloop, sep: Separable, buf: &str, kb: &str, stage: &str, name: &str) -> Vec<Stmt> {
    let [wm, wn] = p.config.warps;
    let kbk = p.k_block;
    let ldsm_a = if p.lanes_a.trans() {
        "rc_ldmatrix_x4_trans"
    } else {
        "rc_ldmatrix_x4"
    };
    let ldsm_b = if p.lanes_b.trans() {
        "rc_ldmatrix_x4_trans"
    } else {
        "rc_ldmatrix_x4"
    };
    vec![
        Stmt::unrolled(
            "mi",
            p.mma_m,
            vec![e(if sep.s2r_a {
                format!(
                    "{ldsm_a}(sA + {stage} * {} + (lA_off ^ {name}_sA({} * mi, {kb} * {kbk})), fa[{buf}][mi])",
                    p.stage_elems_a,
                    16 * wm
                )
            } else {
                format!(
                    "{ldsm_a}(sA + {stage} * {} + {name}_sA(16 * (warp_m + {wm} * mi) + lA_mn, {kb} * {kbk} + lA_k), fa[{buf}][mi])",
                    p.stage_elems_a
                )
            })],
        ),
        Stmt::unrolled(
            "nj2",
            p.mma_n / 2,
            vec![
                Stmt::Array {
                    ty: "uint32_t".into(),
                    name: "t".into(),
                    len: 4,
                    comment: Some("b0,b1 of N-atom 2*nj2, then of 2*nj2+1".into()),
                },
                e(if sep.s2r_b {
                    format!(
                        "{ldsm_b}(sB + {stage} * {} + (lB_off ^ {name}_sB({} * nj2, {kb} * {kbk})), t)",
                        p.stage_elems_b,
                        16 * wn
                    )
                } else {
                    format!(
                        "{ldsm_b}(sB + {stage} * {} + {name}_sB({} * nj2 + 16 * warp_n + lB_mn, {kb} * {kbk} + lB_k), t)",
                        p.stage_elems_b,
                        16 * wn
                    )
                }),
                Stmt::assign(format!("fb[{buf}][2 * nj2][0]"), "t[0]"),
                Stmt::assign(format!("fb[{buf}][2 * nj2][1]"), "t[1]"),
                Stmt::assign(format!("fb[{buf}][2 * nj2 + 1][0]"), "t[2]"),
                Stmt::assign(format!("fb[{buf}][2 * nj2 + 1][1]"), "t[3]"),
            ],
        ),
    ]
}

/// The `ldmatrix` lane coordinates `lA_mn`, `lA_k`, `lB_mn`, `lB_k` and, where the swizzle
/// separates, the per-thread base offsets `lA_off`, `lB_off`.
pub(super) fn lane_setup(p: &Sm80Mainloop, sep: Separable, name: &str) -> Vec<Stmt> {
    let kbk = p.k_block;
    let mut b: Vec<Stmt> = Vec::new();
    let (amn, ak) = p.lanes_a.lane_coord_cpp_vec("lane", p.g2s_a.vec);
    let (bmn, bk_) = p.lanes_b.lane_coord_cpp_vec("lane", p.g2s_b.vec);
    b.push(c(format!(
        "ldmatrix.x4 lane -> (mn, k) row of a 16x{kbk} sub-tile: A {} ({}), B {} ({})",
        p.s2r_a.name,
        if p.lanes_a.trans() {
            "rows along K"
        } else {
            "rows along M"
        },
        p.s2r_b.name,
        if p.lanes_b.trans() {
            "rows along K"
        } else {
            "rows along N"
        }
    )));
    b.push(d("const int", "lA_mn", amn));
    b.push(d("const int", "lA_k", ak));
    b.push(d("const int", "lB_mn", bmn));
    b.push(d("const int", "lB_k", bk_));
    if sep.s2r_a {
        b.push(dc(
            "const int",
            "lA_off",
            format!("{name}_sA(16 * warp_m + lA_mn, lA_k)"),
            "sA(t + s) == sA(t) ^ sA(s) for every thread part t and unrolled part s (checked by the generator)",
        ));
    }
    if sep.s2r_b {
        b.push(dc(
            "const int",
            "lB_off",
            format!("{name}_sB(16 * warp_n + lB_mn, lB_k)"),
            "sB(t + s) == sB(t) ^ sB(s) (checked by the generator)",
        ));
    }
    b
}
