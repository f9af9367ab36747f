//! SM80 / SM89 warp-level `mma.sync.aligned` atoms with CuTe's `MMA_Traits` layouts
//! (`mma_traits_sm80.hpp`, `mma_traits_sm89.hpp`).

use crate::arch::Arch;
use crate::element::Element;
use crate::mma::{reg_count, reg_cty, MmaAtom, MmaKind, MmaTypes};
use crate::snippet::{asm_stmt, bind_array, operand_list, Dir, Param, Snippet};
use rcute_layout::{tuple, Layout};

fn lay(shape: rcute_layout::IntTuple, stride: rcute_layout::IntTuple) -> Layout {
    Layout::new(shape, stride).expect("static atom layouts are congruent")
}

/// `(T32,V4) -> (M16,N8)`: the accumulator layout of all m16n8 atoms.
pub fn sm80_16x8_row() -> Layout {
    lay(tuple!((4, 8), (2, 2)), tuple!((32, 1), (16, 8)))
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
        arch.sm(),
        d.cute_name(),
        a.cute_name(),
        b.cute_name(),
        c.cute_name()
    );
    let ptx = format!(
        "mma.sync.aligned.m16n8k{k}.row.col.{}.{}.{}.{}",
        d.ptx(),
        a.ptx(),
        b.ptx(),
        c.ptx()
    );
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

/// The Turing integer atom `mma.sync.aligned.m8n8k16.row.col.s32.{a}.{b}.s32` (CuTe's
/// `SM80_8x8x16_S32S8S8S32_TN` family; the PTX needs only `sm_75`): A `8x16` and B `8x16`
/// (`(N,K)`) with four 8-bit values per thread, C `8x8` with two `s32` values per thread
/// (CuTe's `SM80_8x16_Row` / `SM80_8x8_Row` layouts). `a` and `b` are `S8` or `U8`;
/// `None` otherwise. Not part of [`all_sm80_atoms`] (the catalogue's check units): the
/// Turing kernels of `rcute-kernel` use it and compile it for `sm_75`.
pub fn mma_sync_m8n8k16(a: Element, b: Element) -> Option<MmaAtom> {
    use Element::*;
    if !matches!(a, S8 | U8) || !matches!(b, S8 | U8) {
        return None;
    }
    let arch = Arch::SM75;
    // (T32,V4) -> (8,16) column-major: m (or n) = lane / 4, k = 4 * (lane % 4) + v.
    let ab_tv = lay(tuple!((4, 8), 4), tuple!((32, 1), 8));
    // (T32,V2) -> (8,8): m = lane / 4, n = 2 * (lane % 4) + v.
    let c_tv = lay(tuple!((4, 8), 2), tuple!((16, 1), 8));
    let types = MmaTypes { d: S32, a, b, c: S32 };
    let name = format!("SM80_8x8x16_S32{}{}S32_TN", a.cute_name(), b.cute_name());
    let ptx = format!("mma.sync.aligned.m8n8k16.row.col.s32.{}.{}.s32", a.ptx(), b.ptx());
    let fn_name = format!("rc_mma_m8n8k16_s32_{}_{}_s32", a.ptx(), b.ptx());
    let params = vec![
        Param::regs("d", "int32_t", 2, Dir::Out),
        Param::regs("a", "uint32_t", 1, Dir::In),
        Param::regs("b", "uint32_t", 1, Dir::In),
        Param::regs("c", "int32_t", 2, Dir::In),
    ];
    let line = format!(
        "{ptx} {}, {}, {}, {};",
        operand_list(0, 2),
        operand_list(2, 1),
        operand_list(3, 1),
        operand_list(4, 2)
    );
    let outs = bind_array("=r", "d", 2);
    let mut ins = bind_array("r", "a", 1);
    ins.extend(bind_array("r", "b", 1));
    ins.extend(bind_array("r", "c", 2));
    let body = asm_stmt(&[line], &outs, &ins, false);
    let snippet = Snippet::build(fn_name, arch, 32, params, &body);
    Some(MmaAtom {
        name,
        arch,
        shape_mnk: [8, 8, 16],
        thr_id: Layout::col_major(tuple!(32)),
        a_tv: ab_tv.clone(),
        b_tv: ab_tv,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mma::{is_bijection, Operand};

    #[test]
    fn turing_m8n8k16_layouts() {
        let atom = mma_sync_m8n8k16(Element::S8, Element::S8).unwrap();
        assert_eq!(atom.name, "SM80_8x8x16_S32S8S8S32_TN");
        assert_eq!(atom.snippet.name, "rc_mma_m8n8k16_s32_s8_s8_s32");
        assert!(atom
            .snippet
            .code
            .contains("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32"));
        assert!(is_bijection(&atom.a_tv, 8 * 16) && is_bijection(&atom.b_tv, 8 * 16));
        assert!(is_bijection(&atom.c_tv, 8 * 8));
        // Thread 5 holds A row 1, k 4..8 and C row 1, columns 2 and 3.
        assert_eq!(atom.coord(Operand::A, 5, 0), Some((1, 4)));
        assert_eq!(atom.coord(Operand::A, 5, 3), Some((1, 7)));
        assert_eq!(atom.coord(Operand::C, 5, 1), Some((1, 3)));
        assert!(mma_sync_m8n8k16(Element::F16, Element::S8).is_none());
    }
}
