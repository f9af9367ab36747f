//! The prepared AWQ weight layout: AutoAWQ's `qweight [K, N/8]` words reordered once so
//! that the AWQ mainloop ([`crate::awq_mainloop`], with `prepared`) streams them in the
//! order its lanes consume them.
//!
//! In a k16 step, lane `(g, t) = (lane / 4, lane % 4)` of a warp needs the words of rows
//! `2t, 2t+1, 2t+8, 2t+9` in word column `g` of its 8-word slice ([`crate::awq_mainloop`]
//! explains why). The prepared layout stores exactly these four words next to each other,
//! the 32 lanes of one (k16 block, 8-word block) after each other (512 bytes), and the
//! 8-word blocks of one k16 block along N after each other. So a CTA's `(64, BN/8)` tile is
//! four contiguous runs of `BN * 8` bytes (16-byte `cp.async` chunks, no padding), and each
//! lane reads its four words with one conflict-free 16-byte shared load.
//!
//! As a layout from the natural coordinate `(k, word)` of `qweight` to the word offset:
//!
//! ```text
//! ((2, 4, 2, K/16), (8, N/64)) : ((1, 4, 2, 2N), (16, 128))
//!   k    = k0 + 2 t + 8 k2 + 16 kb      offset = k0 + 2 k2 + 4 t + 16 g + 128 wb + 2N kb
//!   word = g + 8 wb
//! ```
//!
//! (register `r = k0 + 2 k2` of lane `4 g + t`), for `K` a multiple of 16 and `N` of 64.
//! `rcute layout '((2,4,2,2),(8,2)):((1,4,2,256),(16,128))' --svg w.svg` draws it for a 32 x
//! 128 weight.
//!
//! ```
//! use rcute_collective::awq_prepared::{prepared_offset, prepared_qweight_layout};
//! use rcute_layout::tuple;
//! let l = prepared_qweight_layout(32, 128).unwrap();
//! assert_eq!(l.to_string(), "((2,4,2,2),(8,2)):((1,4,2,256),(16,128))");
//! // Row 9 (t 0, k2 1, k0 1), word 3 (g 3): register 3 of lane 12.
//! assert_eq!(prepared_offset(9, 3, 128), 12 * 4 + 3);
//! assert_eq!(l.crd2idx(&tuple!(9, 3)).unwrap().as_static(), Some(51));
//! assert!(prepared_qweight_layout(24, 128).is_err());
//! ```

use crate::sm80_mainloop::PlanError;
use rcute_layout::{tuple, Layout};

/// Rows of one prepared block (one k16 step).
pub const PREPARED_K: i64 = 16;

/// Columns of one prepared block (one 8-word slice).
pub const PREPARED_N: i64 = 64;

/// The prepared layout of a `K x N` weight (see the module docs): `K` a multiple of 16,
/// `N` of 64.
pub fn prepared_qweight_layout(k: i64, n: i64) -> Result<Layout, PlanError> {
    if k <= 0 || n <= 0 || k % PREPARED_K != 0 || n % PREPARED_N != 0 {
        return Err(PlanError::Layout(format!(
            "the prepared AWQ weight needs K a multiple of {PREPARED_K} and N of {PREPARED_N}, got {k} x {n}"
        )));
    }
    let (kb, wb, kb_stride) = (k / PREPARED_K, n / PREPARED_N, 2 * n);
    Layout::new(tuple!((2, 4, 2, kb), (8, wb)), tuple!((1, 4, 2, kb_stride), (16, 128)))
        .map_err(|e| PlanError::Layout(e.to_string()))
}

/// The word offset of `qweight[k][word]` in the prepared weight of `N` columns: the
/// layout's function in closed form (the reorder and the kernel use this).
pub fn prepared_offset(k: i64, word: i64, n: i64) -> i64 {
    let (k0, t, k2, kb) = (k % 2, (k / 2) % 4, (k / 8) % 2, k / 16);
    let (g, wb) = (word % 8, word / 8);
    k0 + 2 * k2 + 4 * t + 16 * g + 128 * wb + 2 * n * kb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    use rcute_atom::Element;

    /// The layout's function is the reorder, it is a bijection onto `0 .. K N / 8`, and
    /// lane `l`'s four words at `16 l .. 16 l + 16` bytes of a block are the rows and the
    /// word column the mainloop plan says it reads, in register order.
    #[test]
    fn layout_matches_the_reorder_and_the_lane_mapping() {
        let (k, n) = (48, 192);
        let l = prepared_qweight_layout(k, n).unwrap();
        let mut seen = vec![false; (k * n / 8) as usize];
        for kk in 0..k {
            for w in 0..n / 8 {
                let got = l.crd2idx(&tuple!(kk, w)).unwrap().as_static().unwrap();
                assert_eq!(got, prepared_offset(kk, w, n), "({kk}, {w})");
                assert!(!std::mem::replace(&mut seen[got as usize], true));
            }
        }
        assert!(seen.iter().all(|&s| s));
        let p = AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4)).unwrap();
        for lane in 0..32 {
            for (r, row) in p.b_rows(lane).into_iter().enumerate() {
                assert_eq!(prepared_offset(row, p.b_word(lane), n), 4 * lane + r as i64);
            }
        }
        for (bk, bn) in [(24, 128), (32, 96), (0, 64)] {
            assert!(prepared_qweight_layout(bk, bn).is_err());
        }
    }
}
