//! Copy atoms: [`CopyOp`] (CuTe's `Copy_Traits`: thread id and source / destination /
//! reference thread-value layouts in bits, plus the CUDA snippet) and [`CopyAtom`]
//! (CuTe's `Copy_Atom<Op, ValType>`: the same layouts recast to elements).
//!
//! The kinds live in their own files: [`crate::copy_ldst`] (vectorized ld/st),
//! [`crate::copy_cp_async`] (`cp.async`), [`crate::copy_ldsm`] (`ldmatrix` /
//! `stmatrix`) and [`crate::copy_tma`] (TMA and bulk copies).

use crate::arch::Arch;
use crate::element::Element;
use crate::snippet::Snippet;
use rcute_layout::{tuple, Layout, Result};

/// The family of a copy operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// Plain (vectorized) loads and stores through registers.
    Universal,
    /// Global -> shared asynchronous copy (`cp.async`).
    CpAsync,
    /// Shared -> registers matrix load (`ldmatrix`).
    Ldmatrix,
    /// Registers -> shared matrix store (`stmatrix`).
    Stmatrix,
    /// Tensor Memory Accelerator (`cp.async.bulk.tensor`).
    Tma,
    /// Non-tensor bulk copy (`cp.async.bulk`).
    Bulk,
}

/// A copy operation with CuTe's `Copy_Traits` layouts, in bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyOp {
    /// CuTe's name, e.g. `SM75_U32x4_LDSM_N`.
    pub name: String,
    /// Minimum architecture.
    pub arch: Arch,
    /// Family.
    pub kind: CopyKind,
    /// Logical thread id -> thread index.
    pub thr_id: Layout,
    /// `(thread, value)` -> bit of the source.
    pub src: Layout,
    /// `(thread, value)` -> bit of the destination.
    pub dst: Layout,
    /// The reference layout (`src` or `dst`) the tiled copy's TV layout is written in.
    pub reference: Layout,
    /// The CUDA device function.
    pub snippet: Snippet,
}

impl CopyOp {
    /// Number of threads of the operation.
    pub fn num_threads(&self) -> i64 {
        self.thr_id.size().as_static().unwrap_or(0)
    }
    /// Bind a value type: CuTe's `Copy_Atom<Op, T>`.
    pub fn atom(&self, val: Element) -> Result<CopyAtom> {
        CopyAtom::new(self.clone(), val)
    }
}

/// `(1, bits)` single-thread layouts of CuTe's `Layout<Shape<_1, Int<bits>>>`.
pub fn one_thread_bits(bits: i64) -> Layout {
    Layout::col_major(tuple!(1, bits))
}

/// A copy operation bound to a value type (CuTe's `Copy_Atom<Op, ValType>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyAtom {
    /// The operation.
    pub op: CopyOp,
    /// The value type.
    pub val: Element,
    /// `(thread, value)` -> element of the source.
    pub val_src: Layout,
    /// `(thread, value)` -> element of the destination.
    pub val_dst: Layout,
    /// `(thread, value)` -> element of the reference.
    pub val_ref: Layout,
}

impl CopyAtom {
    /// Recast the op's bit layouts to `val` (CuTe's `recast_layout<uint1_t, ValType>`),
    /// and check that each has one thread mode entry per thread of the op.
    pub fn new(op: CopyOp, val: Element) -> Result<CopyAtom> {
        let bits = val.bits() as i64;
        let val_src = op.src.recast(1, bits)?;
        let val_dst = op.dst.recast(1, bits)?;
        let val_ref = op.reference.recast(1, bits)?;
        for l in [&val_src, &val_dst, &val_ref] {
            if l.mode(0)?.size() != op.thr_id.size() {
                return Err(rcute_layout::LayoutError::new(
                    "Copy_Atom",
                    vec![op.name.clone(), val.to_string()],
                    rcute_layout::ErrorKind::Invalid("copy operation is not valid for this value type".into()),
                ));
            }
        }
        Ok(CopyAtom {
            op,
            val,
            val_src,
            val_dst,
            val_ref,
        })
    }
    /// Values per thread on the source side (`NumValSrc`).
    pub fn num_val_src(&self) -> i64 {
        self.val_src
            .mode(1)
            .ok()
            .and_then(|m| m.size().as_static())
            .unwrap_or(0)
    }
    /// Values per thread on the destination side (`NumValDst`).
    pub fn num_val_dst(&self) -> i64 {
        self.val_dst
            .mode(1)
            .ok()
            .and_then(|m| m.size().as_static())
            .unwrap_or(0)
    }
    /// Threads of the atom.
    pub fn num_threads(&self) -> i64 {
        self.op.num_threads()
    }
}
