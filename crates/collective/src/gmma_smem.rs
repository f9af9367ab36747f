//! GMMA shared-memory atom choice ([`ss_smem_selector`]) and its TMA swizzle, shared by the
//! SM90 mainloop and epilogue builders.

use rcute_atom::tma::TmaSwizzle;
use rcute_atom::{Element, GmmaSmemAtom, GmmaSwizzle, Major};

/// CuTe's `ss_smem_selector`: the GMMA shared-memory atom for an `(mn, k)` operand tile of
/// `elem` — for K-major the widest swizzle (128B, 64B, 32B, interleave) whose width in
/// elements divides `k`, for MN-major the widest dividing `mn`. `None` when `mn` or `k`
/// is not a positive multiple of 8 or no atom divides.
///
/// ```
/// use rcute_atom::{Element, GmmaSwizzle, Major};
/// use rcute_collective::ss_smem_selector;
/// assert_eq!(ss_smem_selector(Major::K, Element::BF16, 128, 64).unwrap().mode, GmmaSwizzle::B128);
/// assert_eq!(ss_smem_selector(Major::K, Element::F32, 64, 8).unwrap().mode, GmmaSwizzle::B32);
/// assert_eq!(ss_smem_selector(Major::MN, Element::F16, 24, 64).unwrap().mode, GmmaSwizzle::Interleave);
/// ```
pub fn ss_smem_selector(major: Major, elem: Element, mn: i64, k: i64) -> Option<GmmaSmemAtom> {
    if mn <= 0 || k <= 0 || mn % 8 != 0 || k % 8 != 0 {
        return None;
    }
    let contiguous = match major {
        Major::K => k,
        Major::MN => mn,
    };
    let bits = elem.bits() as i64;
    [
        GmmaSwizzle::B128,
        GmmaSwizzle::B64,
        GmmaSwizzle::B32,
        GmmaSwizzle::Interleave,
    ]
    .into_iter()
    .find(|m| contiguous % (m.span_bytes() * 8 / bits) == 0)
    .map(|m| GmmaSmemAtom::new(major, m, elem))
}

/// The TMA swizzle of a GMMA atom.
pub fn gmma_tma_swizzle(mode: GmmaSwizzle) -> TmaSwizzle {
    match mode {
        GmmaSwizzle::Interleave => TmaSwizzle::None,
        GmmaSwizzle::B32 => TmaSwizzle::B32,
        GmmaSwizzle::B64 => TmaSwizzle::B64,
        GmmaSwizzle::B128 => TmaSwizzle::B128,
    }
}
