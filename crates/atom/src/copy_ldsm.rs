//! `ldmatrix` (SM75+, shared -> registers) and `stmatrix` (SM90, registers -> shared):
//! a warp moves one, two or four 8x8 matrices of 16-bit elements, optionally transposed
//! (CuTe's `SM75_U32x{1,2,4}_LDSM_N`, `SM75_U16x{2,4,8}_LDSM_T`, `SM90_U32x{1,2,4}_STSM_N`,
//! `SM90_U16x{2,4,8}_STSM_T`).

use crate::arch::Arch;
use crate::copy::{CopyKind, CopyOp};
use crate::snippet::{asm_stmt, bind_array, operand_list, smem_cvt, Dir, Param, ParamTy, Snippet};
use rcute_layout::{tuple, Layout};

fn lay(shape: rcute_layout::IntTuple, stride: rcute_layout::IntTuple) -> Layout {
    Layout::new(shape, stride).expect("static atom layouts are congruent")
}

/// The shared-memory side of `ldmatrix` / `stmatrix` with `x` matrices, in bits: thread
/// `t` names one 128-bit row; with fewer than four matrices the upper threads repeat.
pub fn ldsm_smem_bits(x: usize) -> Layout {
    match x {
        1 => lay(tuple!((8, 4), 128), tuple!((128, 0), 1)),
        2 => lay(tuple!((16, 2), 128), tuple!((128, 0), 1)),
        4 => lay(tuple!(32, 128), tuple!(128, 1)),
        _ => panic!("x must be 1, 2 or 4"),
    }
}

/// The register side of `ldmatrix` / `stmatrix` with `x` matrices, in bits.
pub fn ldsm_reg_bits(x: usize, trans: bool) -> Layout {
    match (x, trans) {
        (1, false) => lay(tuple!(32, 32), tuple!(32, 1)),
        (2, false) => lay(tuple!(32, (32, 2)), tuple!(32, (1, 1024))),
        (4, false) => lay(tuple!(32, (32, 4)), tuple!(32, (1, 1024))),
        (1, true) => lay(tuple!((4, 8), (16, 2)), tuple!((256, 16), (1, 128))),
        (2, true) => lay(tuple!((4, 8), (16, 2, 2)), tuple!((256, 16), (1, 128, 1024))),
        (4, true) => lay(tuple!((4, 8), (16, 2, 4)), tuple!((256, 16), (1, 128, 1024))),
        _ => panic!("x must be 1, 2 or 4"),
    }
}

fn cute_name(sm: &str, x: usize, trans: bool, kind: &str) -> String {
    if trans {
        format!("{sm}_U16x{}_{kind}_T", 2 * x)
    } else {
        format!("{sm}_U32x{x}_{kind}_N")
    }
}

/// `ldmatrix.sync.aligned.x{1,2,4}[.trans].m8n8.shared.b16`: each thread passes the
/// shared address of one row (threads `8*i .. 8*i+7` address matrix `i`) and receives
/// `x` 32-bit registers.
pub fn ldmatrix(x: usize, trans: bool) -> CopyOp {
    let t = if trans { ".trans" } else { "" };
    let fname = format!("rc_ldmatrix_x{x}{}", if trans { "_trans" } else { "" });
    let params = vec![
        Param::new(
            "smem_src",
            ParamTy::SmemPtr {
                bytes: 16,
                constant: true,
            },
        ),
        Param::regs("d", "uint32_t", x, Dir::Out),
    ];
    let line = format!(
        "ldmatrix.sync.aligned.x{x}{t}.m8n8.shared.b16 {}, [%{x}];",
        operand_list(0, x)
    );
    let body =
        smem_cvt("saddr", "smem_src") + &asm_stmt(&[line], &bind_array("=r", "d", x), &["\"r\"(saddr)".into()], true);
    let dst = ldsm_reg_bits(x, trans);
    CopyOp {
        name: cute_name("SM75", x, trans, "LDSM"),
        arch: Arch::SM80,
        kind: CopyKind::Ldmatrix,
        thr_id: Layout::col_major(tuple!(32)),
        src: ldsm_smem_bits(x),
        dst: dst.clone(),
        reference: dst,
        snippet: Snippet::build(fname, Arch::SM80, 32, params, &body),
    }
}

/// The [`ldmatrix`] instruction as a snippet taking a 32-bit shared-state-space address
/// (`rc_ldmatrix_x{x}[_trans]_addr(uint32_t saddr, uint32_t (&d)[x])`), for kernels that
/// compute shared addresses as `uint32_t` offsets from one converted base. Volatile, without
/// a memory clobber (the caller orders the shared writes it reads with a barrier).
///
/// ```
/// let s = rcute_atom::copy_ldsm::ldmatrix_addr(4, false);
/// assert_eq!(s.name, "rc_ldmatrix_x4_addr");
/// assert!(s.code.contains("ldmatrix.sync.aligned.x4.m8n8.shared.b16"));
/// ```
pub fn ldmatrix_addr(x: usize, trans: bool) -> Snippet {
    let t = if trans { ".trans" } else { "" };
    let fname = format!("rc_ldmatrix_x{x}{}_addr", if trans { "_trans" } else { "" });
    let params = vec![
        Param::new("saddr", ParamTy::SmemAddr { bytes: 16 }),
        Param::regs("d", "uint32_t", x, Dir::Out),
    ];
    let line = format!(
        "ldmatrix.sync.aligned.x{x}{t}.m8n8.shared.b16 {}, [%{x}];",
        operand_list(0, x)
    );
    let body = asm_stmt(&[line], &bind_array("=r", "d", x), &["\"r\"(saddr)".into()], false);
    Snippet::build(fname, Arch::SM80, 32, params, &body)
}

/// `stmatrix.sync.aligned.x{1,2,4}[.trans].m8n8.shared.b16`: the inverse of
/// [`ldmatrix`].
pub fn stmatrix(x: usize, trans: bool) -> CopyOp {
    let t = if trans { ".trans" } else { "" };
    let fname = format!("rc_stmatrix_x{x}{}", if trans { "_trans" } else { "" });
    let params = vec![
        Param::new(
            "smem_dst",
            ParamTy::SmemPtr {
                bytes: 16,
                constant: false,
            },
        ),
        Param::regs("s", "uint32_t", x, Dir::In),
    ];
    let line = format!(
        "stmatrix.sync.aligned.x{x}{t}.m8n8.shared.b16 [%0], {};",
        operand_list(1, x)
    );
    let mut ins = vec!["\"r\"(saddr)".to_string()];
    ins.extend(bind_array("r", "s", x));
    let body = smem_cvt("saddr", "smem_dst") + &asm_stmt(&[line], &[], &ins, true);
    let src = ldsm_reg_bits(x, trans);
    CopyOp {
        name: cute_name("SM90", x, trans, "STSM"),
        arch: Arch::SM90,
        kind: CopyKind::Stmatrix,
        thr_id: Layout::col_major(tuple!(32)),
        src: src.clone(),
        dst: ldsm_smem_bits(x),
        reference: src,
        snippet: Snippet::build(fname, Arch::SM90, 32, params, &body),
    }
}

/// Every `ldmatrix` and `stmatrix` op.
pub fn all_ldsm_stsm() -> Vec<CopyOp> {
    let mut v = Vec::new();
    for trans in [false, true] {
        for x in [1, 2, 4] {
            v.push(ldmatrix(x, trans));
            v.push(stmatrix(x, trans));
        }
    }
    v
}
