//! SM80 / SM89 warp-level `mma.sync.aligned` atoms with CuTe's `MMA_Traits` layouts
//! (`mma_traits_sm80.hpp`, `mma_traits_sm89.hpp`).

use crate::element::Element;
use crate::mma::{reg_count, reg_cty, MmaAtom, MmaKind, MmaTypes};
use crate::snippet::{asm_stmt, bind_array, operand_list, Arch, Dir, Param, Snippet};
use rcute_layout::{tuple, Layout};

fn lay(shape: rcute_layout::IntTuple, stride: rcute_layout::IntTuple) -> Layout {
    Layout::new(shape, stride).expect("static atom layouts are congruent")
}

/// `(T32,V4) -> (M16,N8)`: the accumulator layout of all m16n8 atoms.
pub fn sm80_16x8_row() -> Layout {
    lay(tuple!((4, 8), (2, 2)), tuple!((32, 1), (16, 8)))
}

/// The `(M, N, K)` shapes and types of the `mma.sync` atoms this module provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sm80Shape {
    /// m16n8k8 (16-bit inputs or TF32).
    M16N8K8,
    /// m16n8k16 (16-bit inputs).
    M16N8K16,
    /// m16n8k32 (8-bit inputs).
    M16N8K32,
}

fn layouts(shape_k: i64, a_bits: u32) -> (Layout, Layout) {
    match (shape_k, a_bits) {
        // 16-bit inputs, K = 8.
        (8, 16) => (sm80_16x8_row(), lay(tuple!((4, 8), 2), tuple!((16, 1), 8))),
        // 16-bit inputs, K = 16.
        (16, 16) => (
            lay(tuple!((4, 8), (2, 2, 2)), tuple!((32, 1), (16, 8, 128))),
            lay(tuple!((4, 8), (2, 2)), tuple!((16, 1), (8, 64))),
        ),
        // TF32, K = 8.
        (8, 32) => (
            lay(tuple!((4, 8), (2, 2)), tuple!((16, 1), (8, 64))),
            lay(tuple!((4, 8), 2), tuple!((8, 1), 32)),
        ),
        // 8-bit inputs, K = 32.
        (32, 8) => (
            lay(tuple!((4, 8), (4, 2, 2)), tuple!((64, 1), (16, 8, 256))),
            lay(tuple!((4, 8), (4, 2)), tuple!((32, 1), (8, 128))),
        ),
        _ => unreachable!("unsupported mma.sync shape"),
    }
}

/// A `mma.sync.aligned.m16n8k{K}.row.col` atom, `D = A * B + C` with types
/// `(d, a, b, c)`. Returns `None` for a combination PTX does not have.
pub fn mma_sync(d: Element, a: Element, b: Element, c: Element, k: i64) -> Option<MmaAtom> {
    use Element::*;
    let arch = match (d, a, b, c, k) {
        (F32, F16, F16, F32, 8 | 16) | (F16, F16, F16, F16, 8 | 16) | (F32, BF16, BF16, F32, 8 | 16) => Arch::SM80,
        (F32, TF32, TF32, F32, 8) => Arch::SM80,
        (S32, S8 | U8, S8 | U8, S32, 32) => Arch::SM80,
        (F32, E4M3 | E5M2, E4M3 | E5M2, F32, 32) => Arch::SM89,
        _ => return None,
    };
    let (a_tv, b_tv) = layouts(k, a.bits());
    let c_tv = sm80_16x8_row();
    let types = MmaTypes { d, a, b, c };
    let shape_mnk = [16, 8, k];
    let name = format!(
        "SM{}_16x8x{k}_{}{}{}{}_TN",
        arch.sm,
        d.cute_name(),
        a.cute_name(),
        b.cute_name(),
        c.cute_name()
    );
    let ptx = format!("mma.sync.aligned.m16n8k{k}.row.col.{}.{}.{}.{}", d.ptx(), a.ptx(), b.ptx(), c.ptx());
    let fn_name = format!("rc_mma_m16n8k{k}_{}_{}_{}_{}", d.ptx(), a.ptx(), b.ptx(), c.ptx());
    let va = a_tv.mode(1).ok()?.size().as_static()?;
    let vb = b_tv.mode(1).ok()?.size().as_static()?;
    let vc = c_tv.mode(1).ok()?.size().as_static()?;
    let (na, nb, nc) = (reg_count(a, va), reg_count(b, vb), reg_count(c, vc));
    let (dty, dcon) = reg_cty(d);
    let (cty, ccon) = reg_cty(c);
    let params = vec![
        Param::regs("d", dty, nc, Dir::Out),
        Param::regs("a", "uint32_t", na, Dir::In),
        Param::regs("b", "uint32_t", nb, Dir::In),
        Param::regs("c", cty, nc, Dir::In),
    ];
    let line = format!(
        "{ptx} {}, {}, {}, {};",
        operand_list(0, nc),
        operand_list(nc, na),
        operand_list(nc + na, nb),
        operand_list(nc + na + nb, nc)
    );
    let outs = bind_array(&format!("={dcon}"), "d", nc);
    let mut ins = bind_array("r", "a", na);
    ins.extend(bind_array("r", "b", nb));
    ins.extend(bind_array(ccon, "c", nc));
    let body = asm_stmt(&[line], &outs, &ins, false);
    let snippet = Snippet::build(fn_name, arch, 32, params, &body);
    Some(MmaAtom {
        name,
        arch,
        shape_mnk,
        thr_id: Layout::col_major(tuple!(32)),
        a_tv,
        b_tv,
        c_tv,
        types,
        kind: MmaKind::Sync,
        ptx,
        snippet,
    })
}

/// `SM80_16x8x16_F32F16F16F32_TN`.
pub fn sm80_16x8x16_f32_f16_f16_f32() -> MmaAtom {
    mma_sync(Element::F32, Element::F16, Element::F16, Element::F32, 16).expect("valid")
}
/// `SM80_16x8x16_F32BF16BF16F32_TN`.
pub fn sm80_16x8x16_f32_bf16_bf16_f32() -> MmaAtom {
    mma_sync(Element::F32, Element::BF16, Element::BF16, Element::F32, 16).expect("valid")
}
/// `SM80_16x8x16_F16F16F16F16_TN`.
pub fn sm80_16x8x16_f16_f16_f16_f16() -> MmaAtom {
    mma_sync(Element::F16, Element::F16, Element::F16, Element::F16, 16).expect("valid")
}
/// `SM80_16x8x8_F32TF32TF32F32_TN`.
pub fn sm80_16x8x8_f32_tf32_tf32_f32() -> MmaAtom {
    mma_sync(Element::F32, Element::TF32, Element::TF32, Element::F32, 8).expect("valid")
}
/// `SM80_16x8x32_S32S8S8S32_TN`.
pub fn sm80_16x8x32_s32_s8_s8_s32() -> MmaAtom {
    mma_sync(Element::S32, Element::S8, Element::S8, Element::S32, 32).expect("valid")
}
/// `SM89_16x8x32_F32E4M3E4M3F32_TN`.
pub fn sm89_16x8x32_f32_e4m3_e4m3_f32() -> MmaAtom {
    mma_sync(Element::F32, Element::E4M3, Element::E4M3, Element::F32, 32).expect("valid")
}

/// Every `mma.sync` atom of this module.
pub fn all_sm80_atoms() -> Vec<MmaAtom> {
    use Element::*;
    let mut v = Vec::new();
    for k in [8, 16] {
        v.push(mma_sync(F32, F16, F16, F32, k));
        v.push(mma_sync(F16, F16, F16, F16, k));
        v.push(mma_sync(F32, BF16, BF16, F32, k));
    }
    v.push(mma_sync(F32, TF32, TF32, F32, 8));
    for a in [S8, U8] {
        for b in [S8, U8] {
            v.push(mma_sync(S32, a, b, S32, 32));
        }
    }
    for a in [E4M3, E5M2] {
        for b in [E4M3, E5M2] {
            v.push(mma_sync(F32, a, b, F32, 32));
        }
    }
    v.into_iter().flatten().collect()
}
