//! [`MmaAtom`]: one hardware matrix-multiply-accumulate instruction with CuTe's
//! thread-value layouts.
//!
//! Conventions (CuTe's `MMA_Traits`): `thr_id` maps a logical thread of the atom to its
//! thread index; `a_tv`, `b_tv` and `c_tv` map `(thread, value)` to the column-major
//! index of the element in the `(M,K)`, `(N,K)` and `(M,N)` tile. Value `v` of a thread
//! is element `v` of its register fragment, packed into 32-bit registers low half first.
//! Shared-memory operands of `wgmma` have layouts with thread stride 0 (every thread of
//! the warpgroup names the whole tile through a descriptor).

use crate::arch::Arch;
use crate::element::Element;
use crate::snippet::Snippet;
use rcute_layout::{Int, Layout};

/// The major (contiguous) mode of an operand in shared memory (CuTe's `GMMA::Major`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// K is contiguous (CuTe `Major::K`, "T" for A and "N" for B in BLAS terms).
    K,
    /// M (for A) or N (for B) is contiguous.
    MN,
}

impl Major {
    /// The `tnspA` / `tnspB` immediate of `wgmma` (0 = K-major, 1 = MN-major).
    pub fn imm(self) -> u32 {
        match self {
            Major::K => 0,
            Major::MN => 1,
        }
    }
    /// Short name used in function names.
    pub fn tag(self) -> &'static str {
        match self {
            Major::K => "k",
            Major::MN => "mn",
        }
    }
}

/// Where the A operand of a `wgmma` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GmmaSource {
    /// A and B from shared memory through descriptors (`_SS`).
    SS,
    /// A from registers, B from shared memory (`_RS`).
    RS,
}

/// Which family of instruction an atom is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaKind {
    /// Warp-synchronous `mma.sync.aligned` (SM80/SM89).
    Sync,
    /// Warpgroup `wgmma.mma_async` (SM90a).
    Wgmma {
        /// Operand sources.
        source: GmmaSource,
        /// Major mode of A in shared memory (K for register A).
        a_major: Major,
        /// Major mode of B in shared memory.
        b_major: Major,
    },
}

/// The element types of an MMA: `D = A * B + C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaTypes {
    /// Result.
    pub d: Element,
    /// Left operand.
    pub a: Element,
    /// Right operand.
    pub b: Element,
    /// Accumulator input.
    pub c: Element,
}

/// An operand of an MMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// `(M,K)` operand.
    A,
    /// `(N,K)` operand.
    B,
    /// `(M,N)` accumulator.
    C,
}

/// One MMA instruction with CuTe's layouts and its CUDA snippet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmaAtom {
    /// CuTe's name of the operation, e.g. `SM80_16x8x16_F32BF16BF16F32_TN`.
    pub name: String,
    /// Minimum architecture.
    pub arch: Arch,
    /// `(M, N, K)` of one instruction.
    pub shape_mnk: [i64; 3],
    /// Logical thread id -> thread index (`32:1` or `128:1`).
    pub thr_id: Layout,
    /// `(thread, value)` -> column-major index in the `(M,K)` tile.
    pub a_tv: Layout,
    /// `(thread, value)` -> column-major index in the `(N,K)` tile.
    pub b_tv: Layout,
    /// `(thread, value)` -> column-major index in the `(M,N)` tile.
    pub c_tv: Layout,
    /// Element types.
    pub types: MmaTypes,
    /// Instruction family and operand sources.
    pub kind: MmaKind,
    /// The PTX instruction (without operands).
    pub ptx: String,
    /// The CUDA device function.
    pub snippet: Snippet,
}

impl MmaAtom {
    /// The name of the emitted device function.
    pub fn fn_name(&self) -> &str {
        &self.snippet.name
    }
    /// Number of threads that execute the instruction together.
    pub fn num_threads(&self) -> i64 {
        self.thr_id.size().as_static().unwrap_or(0)
    }
    /// The TV layout of an operand.
    pub fn tv(&self, op: Operand) -> &Layout {
        match op {
            Operand::A => &self.a_tv,
            Operand::B => &self.b_tv,
            Operand::C => &self.c_tv,
        }
    }
    /// The `(rows, cols)` of an operand's tile: `(M,K)`, `(N,K)` or `(M,N)`.
    pub fn tile(&self, op: Operand) -> (i64, i64) {
        let [m, n, k] = self.shape_mnk;
        match op {
            Operand::A => (m, k),
            Operand::B => (n, k),
            Operand::C => (m, n),
        }
    }
    /// The element type of an operand.
    pub fn element(&self, op: Operand) -> Element {
        match op {
            Operand::A => self.types.a,
            Operand::B => self.types.b,
            Operand::C => self.types.c,
        }
    }
    /// Values per thread of an operand (`size<1>(tv)`).
    pub fn values_per_thread(&self, op: Operand) -> i64 {
        self.tv(op).mode(1).ok().and_then(|m| m.size().as_static()).unwrap_or(0)
    }
    /// True when the operand is read through a shared-memory descriptor.
    pub fn from_smem(&self, op: Operand) -> bool {
        matches!(
            (self.kind, op),
            (MmaKind::Wgmma { .. }, Operand::B)
                | (
                    MmaKind::Wgmma {
                        source: GmmaSource::SS,
                        ..
                    },
                    Operand::A
                )
        )
    }
    /// The `(row, col)` of the element that thread `t` holds as value `v` of an operand.
    pub fn coord(&self, op: Operand, t: i64, v: i64) -> Option<(i64, i64)> {
        let (rows, _) = self.tile(op);
        let idx = self
            .tv(op)
            .crd2idx(&rcute_layout::Tuple::node([
                rcute_layout::Tuple::Leaf(Int::Static(t)),
                rcute_layout::Tuple::Leaf(Int::Static(v)),
            ]))
            .ok()?
            .as_static()?;
        Some((idx % rows, idx / rows))
    }
}

/// Check that a TV layout maps `(thread, value)` one-to-one onto `0..tile_size`.
pub fn is_bijection(tv: &Layout, tile_size: i64) -> bool {
    let Ok(vals) = tv.values() else { return false };
    if vals.len() as i64 != tile_size {
        return false;
    }
    let mut seen = vec![false; tile_size as usize];
    for v in vals {
        if v < 0 || v >= tile_size || seen[v as usize] {
            return false;
        }
        seen[v as usize] = true;
    }
    true
}

/// Check that every thread's value mode of a TV layout covers `0..tile_size` one-to-one
/// (operands that all threads read whole, like `wgmma` shared-memory operands).
pub fn is_broadcast_bijection(tv: &Layout, tile_size: i64) -> bool {
    match (tv.mode(0), tv.mode(1)) {
        (Ok(t), Ok(v)) => t.values().is_ok_and(|x| x.iter().all(|&o| o == 0)) && is_bijection(&v, tile_size),
        _ => false,
    }
}

pub(crate) fn reg_cty(e: Element) -> (&'static str, &'static str) {
    // (C++ register type, asm constraint) of a packed fragment of `e`.
    match e {
        Element::F32 => ("float", "f"),
        Element::S32 => ("int32_t", "r"),
        Element::F64 => ("double", "d"),
        _ => ("uint32_t", "r"),
    }
}

/// Number of 32-bit registers holding `values` elements of `e` (64-bit for F64).
pub(crate) fn reg_count(e: Element, values: i64) -> usize {
    if e.bits() >= 32 {
        values as usize
    } else {
        ((values * e.bits() as i64) / 32) as usize
    }
}
