//! The prepared AWQ weight layout: AutoAWQ's `qweight [K, N/8]` nibbles reordered once so
//! that the AWQ mainloop ([`crate::awq_mainloop`], with `prepared`) streams them in the
//! order its lanes consume them and converts each word straight into `mma.sync` B
//! fragments (no byte permutation).
//!
//! In a k16 step, lane `(g, t) = (lane / 4, lane % 4)` of a warp holds, for the `n8` tiles
//! `j = 0..8` of its 64-column slice, the B fragment of weight column `8g + j`
//! ([`crate::awq_mainloop`] explains the column order): register `b0` = rows `(2t, 2t+1)`,
//! `b1` = rows `(2t+8, 2t+9)`. The prepared layout stores these 32 nibbles as the lane's
//! four words, word `r` holding tiles `2r` and `2r+1` so that the conversion's pair `i`
//! (nibbles `i` and `i + 4`, [`rcute_atom::convert_int4`]) is one B register:
//!
//! ```text
//! pair 0 (nibbles 0, 4) = b0 of tile 2r      pair 1 (nibbles 1, 5) = b1 of tile 2r
//! pair 2 (nibbles 2, 6) = b0 of tile 2r + 1  pair 3 (nibbles 3, 7) = b1 of tile 2r + 1
//! ```
//!
//! The 32 lanes of one (k16 block, 64-column block) follow each other (512 bytes), and the
//! 64-column blocks of one k16 block along N: a CTA's `(64, BN/8)` stage is four contiguous
//! runs of `BN * 8` bytes (16-byte `cp.async` chunks, no padding), and each lane reads its
//! four words with one conflict-free 16-byte shared load.
//!
//! As a layout from the weight coordinate `(k, n)` to the nibble offset (nibble `i` of word
//! `w` is nibble `8 w + i`):
//!
//! ```text
//! ((2, 4, 2, K/16), (2, 4, 8, N/64)) : ((4, 32, 1, 16N), (2, 8, 128, 1024))
//!   k = k0 + 2 t + 8 k2 + 16 kb     n = j1 + 2 r + 8 g + 64 wb
//!   nibble = 4 k0 + k2 + 2 j1 + 8 r + 32 t + 128 g + 1024 wb + 16 N kb
//! ```
//!
//! for `K` a multiple of 16 and `N` of 64. `rcute layout
//! '((2,4,2,2),(2,4,8,2)):((4,32,1,2048),(2,8,128,1024))' --svg w.svg` draws it for a
//! 32 x 128 weight.
//!
//! ```
//! use rcute_collective::awq_prepared::{prepared_nibble, prepared_qweight_layout};
//! use rcute_layout::tuple;
//! let l = prepared_qweight_layout(32, 128).unwrap();
//! assert_eq!(l.to_string(), "((2,4,2,2),(2,4,8,2)):((4,32,1,2048),(2,8,128,1024))");
//! // Row 9 (t 0, k2 1, k0 1), column 3 (g 0, r 1, j1 1): lane 0, word 1, nibble 7.
//! assert_eq!(prepared_nibble(9, 3, 128), 8 * 1 + 7);
//! assert_eq!(l.crd2idx(&tuple!(9, 3)).unwrap().as_static(), Some(15));
//! assert!(prepared_qweight_layout(24, 128).is_err());
//! ```

use crate::sm80_mainloop::PlanError;
use rcute_atom::convert_int4::AWQ_ORDER;
use rcute_layout::{tuple, Layout};

/// Rows of one prepared block (one k16 step).
pub const PREPARED_K: i64 = 16;

/// Columns of one prepared block (one 8-word slice).
pub const PREPARED_N: i64 = 64;

/// The prepared layout of a `K x N` weight, weight coordinate to nibble offset (see the
/// module docs): `K` a multiple of 16, `N` of 64.
pub fn prepared_qweight_layout(k: i64, n: i64) -> Result<Layout, PlanError> {
    if k <= 0 || n <= 0 || k % PREPARED_K != 0 || n % PREPARED_N != 0 {
        return Err(PlanError::Layout(format!(
            "the prepared AWQ weight needs K a multiple of {PREPARED_K} and N of {PREPARED_N}, got {k} x {n}"
        )));
    }
    let (kb, wb, kb_stride) = (k / PREPARED_K, n / PREPARED_N, 16 * n);
    Layout::new(
        tuple!((2, 4, 2, kb), (2, 4, 8, wb)),
        tuple!((4, 32, 1, kb_stride), (2, 8, 128, 1024)),
    )
    .map_err(|e| PlanError::Layout(e.to_string()))
}

/// The nibble offset of weight `(k, n)` in the prepared weight of `N` columns: the layout's
/// function in closed form.
pub fn prepared_nibble(k: i64, n: i64, cols: i64) -> i64 {
    let (k0, t, k2, kb) = (k % 2, (k / 2) % 4, (k / 8) % 2, k / 16);
    let (j1, r, g, wb) = (n % 2, (n / 2) % 4, (n / 8) % 8, n / 64);
    4 * k0 + k2 + 2 * j1 + 8 * r + 32 * t + 128 * g + 1024 * wb + 16 * cols * kb
}

/// The word offset of lane `(g, t)`'s first word in the prepared weight: the lane's four
/// words of k16 block `kb` and 64-column block `wb` start there (what the reorder kernel
/// writes with one 16-byte store).
pub fn prepared_lane_word(kb: i64, wb: i64, lane: i64, cols: i64) -> i64 {
    2 * cols * kb + 128 * wb + 4 * lane
}

/// The reorder of one lane on the CPU: AutoAWQ's words of rows `2t, 2t+1, 2t+8, 2t+9` in
/// word column `8 wb + g` in, the lane's four prepared words out (word `r`: nibbles
/// `(0, 4, 1, 5)` = column `2r` of rows `(2t, 2t+1, 2t+8, 2t+9)`, `(2, 6, 3, 7)` = column
/// `2r + 1`). The reorder kernel computes the same with shifts and masks.
pub fn prepare_lane_words(rows: [u32; 4]) -> [u32; 4] {
    // Nibble of column c in an AutoAWQ word.
    let pos = |c: usize| AWQ_ORDER.iter().position(|&o| o == c).unwrap() as u32;
    let nib = |w: u32, c: usize| (w >> (4 * pos(c))) & 0xf;
    std::array::from_fn(|r| {
        let (c0, c1) = (2 * r, 2 * r + 1);
        // nibble slot -> (row of the lane, column)
        let slots = [(0, c0), (2, c0), (0, c1), (2, c1), (1, c0), (3, c0), (1, c1), (3, c1)];
        slots
            .iter()
            .enumerate()
            .fold(0u32, |w, (i, &(row, c))| w | (nib(rows[row], c) << (4 * i)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq_mainloop::{AwqMainloop, AwqMainloopConfig};
    use rcute_atom::convert_int4::{pack_awq, u4x8_to_16x2_biased, Biased16};
    use rcute_atom::Element;

    /// The layout's function is the closed form, a bijection onto the `K N` nibbles; the
    /// CPU reorder puts every nibble where the layout says; and converting a lane's words
    /// (pair `i` = nibbles `(i, i + 4)`) gives exactly the B fragments the mainloop plan
    /// wants: tile `j`'s column is `b_column(lane, j)`, `b0` rows `(2t, 2t+1)`, `b1` rows
    /// `(2t+8, 2t+9)`.
    #[test]
    fn layout_reorder_and_fragments_agree() {
        let (k, n) = (48i64, 192i64);
        let l = prepared_qweight_layout(k, n).unwrap();
        let mut seen = vec![false; (k * n) as usize];
        for kk in 0..k {
            for c in 0..n {
                let got = l.crd2idx(&tuple!(kk, c)).unwrap().as_static().unwrap();
                assert_eq!(got, prepared_nibble(kk, c, n), "({kk}, {c})");
                assert!(!std::mem::replace(&mut seen[got as usize], true));
            }
        }
        assert!(seen.iter().all(|&s| s));
        // A random weight, packed the AutoAWQ way, reordered lane by lane.
        let q: Vec<u8> = (0..k * n).map(|i| ((i * 7 + i / 13 + i * i % 5) % 16) as u8).collect();
        let words: Vec<u32> = (0..k * n / 8)
            .map(|w| {
                let (row, j) = (w / (n / 8), w % (n / 8));
                pack_awq(&std::array::from_fn(|c| q[(row * n + 8 * j + c as i64) as usize]))
            })
            .collect();
        let mut prepared = vec![0u32; (k * n / 8) as usize];
        for kb in 0..k / 16 {
            for wb in 0..n / 64 {
                for lane in 0..32 {
                    let (g, t) = (lane / 4, lane % 4);
                    let rows = [0, 1, 8, 9].map(|d| words[((16 * kb + 2 * t + d) * (n / 8) + 8 * wb + g) as usize]);
                    let at = prepared_lane_word(kb, wb, lane, n) as usize;
                    prepared[at..at + 4].copy_from_slice(&prepare_lane_words(rows));
                }
            }
        }
        for kk in 0..k {
            for c in 0..n {
                let off = prepared_nibble(kk, c, n);
                let got = (prepared[(off / 8) as usize] >> (4 * (off % 8))) & 0xf;
                assert_eq!(got, u32::from(q[(kk * n + c) as usize]), "({kk}, {c})");
            }
        }
        let p =
            AwqMainloop::new(&AwqMainloopConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).prepared()).unwrap();
        for lane in 0..32i64 {
            let (t, at) = (lane % 4, prepared_lane_word(1, 2, lane, n) as usize);
            for r in 0..4usize {
                let pairs = u4x8_to_16x2_biased(prepared[at + r], Biased16::F16);
                for (i, pair) in pairs.iter().enumerate() {
                    let j = 2 * r as i64 + (i as i64 / 2);
                    let row0 = 16 + 2 * t + if i % 2 == 1 { 8 } else { 0 };
                    let col = 128 + p.b_column(lane, j);
                    let want = [row0, row0 + 1].map(|kk| 1024.0 + f32::from(q[(kk * n + col) as usize]));
                    assert_eq!(Biased16::F16.values(*pair), want, "lane {lane} word {r} pair {i}");
                }
            }
        }
        for (bk, bn) in [(24, 128), (32, 96), (0, 64)] {
            assert!(prepared_qweight_layout(bk, bn).is_err());
        }
    }
}
