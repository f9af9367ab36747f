//! The register-streamed AWQ decode kernel ([`crate::awq_streamed`]) on AutoAWQ's
//! checkpoint layout as it is (`qweight [K, N/8]` int32, nibble `i` of word `j` = column
//! `8j + [0, 2, 4, 6, 1, 3, 5, 7][i]`): the same swap-AB `m16n8k16` fragments, the same
//! output columns per lane, built from whole checkpoint words.
//!
//! **Loads.** In a k16 step lane `(g, t) = (lane / 4, lane % 4)` of the warp's 64-column
//! block `wb` needs, for its columns `8g .. 8g + 8`, rows `k = 2t, 2t+1, 2t+8, 2t+9`
//! ([`lane_rows`]): four checkpoint words, one per row, all in word column `8 wb + g`
//! ([`lane_word`]). Lanes of one `t` and consecutive `g` read consecutive words of one
//! row: each 4-byte load of the warp is four 32-byte row segments (`ld.global.nc`, no L1
//! allocation), 512 bytes per step and warp, as the prepared kernel's one 16-byte load.
//!
//! **Fragments.** A byte permutation puts the same bytes of two rows side by side:
//! `prmt(w(2t), w(2t+1), 0x5410)` ([`PRMT_LOW_BYTES`]) holds bytes 0, 1 of both rows
//! (nibbles 0..3: columns 0, 2, 4, 6) and `0x7632` ([`PRMT_HIGH_BYTES`]) bytes 2, 3
//! (nibbles 4..7: columns 1, 3, 5, 7), row `2t` in the low half and `2t+1` in the high
//! half. The conversion atoms ([`rcute_atom::convert_int4`]) pair nibble `i` with nibble
//! `i + 4`, i.e. the same nibble of the two rows: pair `r` of the low-byte word is column
//! `2r` at `k = 2t, 2t+1`, of the high-byte word column `2r + 1`, exactly the `K` pairs of
//! a swap-AB A fragment. So, as in the prepared kernel, "word" `r` of the lane is the A
//! fragment of the virtual tile whose row `g` is weight column `8g + 2r` and row `g + 8`
//! column `8g + 2r + 1` ([`a_fragments`]): `a0` = pair `r` of rows `(2t, 2t+1)`, low
//! bytes; `a1` = high bytes; `a2`, `a3` the same of rows `(2t+8, 2t+9)`. The accumulators,
//! the epilogue, the scales and the zero word of a group are the prepared kernel's
//! unchanged; per step a lane spends 4 more loads and 4 `PRMT`s than it. With f16's
//! one-shift conversion the odd pairs hold `16 q`: here those are the whole fragments of
//! odd `r` (columns `8g + 2, 3` and `8g + 6, 7`).
//!
//! Columns past `N` in the last block (N a multiple of 8, not of 64) read word column
//! `N/8 - 1` instead (in bounds; their outputs are never stored).
//!
//! ```
//! use rcute_atom::convert_int4::{pack_awq, Biased16};
//! use rcute_collective::awq_streamed_checkpoint::{a_fragments, lane_rows, lane_word};
//! // Lane 9 = (g 2, t 1): rows 2, 3, 10, 11 of word column 2.
//! assert_eq!((lane_rows(9), lane_word(9)), ([2, 3, 10, 11], 2));
//! // Rows 2t, 2t+1, 2t+8, 2t+9 (index i) whose column c holds (i + 3 c) % 16.
//! let rows = [0u8, 1, 2, 3].map(|r| pack_awq(&std::array::from_fn(|c| ((r + 3 * c as u8) % 16))));
//! let a = a_fragments(rows, Biased16::BF16);
//! // Word 1, a1 = column 3 of rows (2t, 2t+1): q = 9, 10.
//! assert_eq!(Biased16::BF16.values(a[1][1]), [128.0 + 9.0, 128.0 + 10.0]);
//! ```

use rcute_atom::convert_int4::{u4x8_to_16x2_biased, u4x8_to_f16x2_biased_x16, Biased16};

/// `__byte_perm` selector: bytes 0, 1 of the first word, then bytes 0, 1 of the second
/// (nibbles 0..3, AutoAWQ's columns 0, 2, 4, 6, of two rows).
pub const PRMT_LOW_BYTES: u32 = 0x5410;

/// `__byte_perm` selector: bytes 2, 3 of the first word, then of the second (nibbles
/// 4..7: columns 1, 3, 5, 7).
pub const PRMT_HIGH_BYTES: u32 = 0x7632;

/// The rows (within a k16 step) whose checkpoint words lane `lane` loads, in load order:
/// `2t, 2t+1` (fragment registers `a0`, `a1`) and `2t+8, 2t+9` (`a2`, `a3`).
pub fn lane_rows(lane: i64) -> [i64; 4] {
    let t = lane % 4;
    [2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9]
}

/// The word column (within the warp's 8-word block) lane `lane` loads: `g`.
pub fn lane_word(lane: i64) -> i64 {
    lane / 4
}

/// `__byte_perm(x, y, s)` on the CPU.
pub fn byte_perm(x: u32, y: u32, s: u32) -> u32 {
    let bytes = [x.to_le_bytes(), y.to_le_bytes()].concat();
    u32::from_le_bytes(std::array::from_fn(|i| bytes[((s >> (4 * i)) & 7) as usize]))
}

/// The lane's A fragments on the CPU, as the kernel builds them from its four checkpoint
/// words (`rows` = the words of [`lane_rows`]): fragment `r` = `[a0, a1, a2, a3]` of the
/// virtual tile of columns `8g + 2r` (row `g`) and `8g + 2r + 1` (row `g + 8`), each
/// register `{bias + q(k), bias + q(k + 1)}`. With [`Biased16::F16`] the kernel's one-shift
/// conversion: fragments of odd `r` hold `bias + 16 q` (the caller's `hfma2(v, 1/16,
/// -(64 + z))` removes it exactly).
pub fn a_fragments(rows: [u32; 4], f: Biased16) -> [[u32; 4]; 4] {
    let cvt = |w: u32| match f {
        Biased16::F16 => u4x8_to_f16x2_biased_x16(w),
        Biased16::BF16 => u4x8_to_16x2_biased(w, f),
    };
    // columns 2r of rows (2t, 2t+1); 2r + 1; then rows (2t+8, 2t+9)
    let lo = cvt(byte_perm(rows[0], rows[1], PRMT_LOW_BYTES));
    let hi = cvt(byte_perm(rows[0], rows[1], PRMT_HIGH_BYTES));
    let lo8 = cvt(byte_perm(rows[2], rows[3], PRMT_LOW_BYTES));
    let hi8 = cvt(byte_perm(rows[2], rows[3], PRMT_HIGH_BYTES));
    std::array::from_fn(|r| [lo[r], hi[r], lo8[r], hi8[r]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcute_atom::convert_int4::pack_awq;

    /// Every lane's fragments, read with `mma.sync`'s A layout (`a0`: row `g`, k `2t, 2t+1`;
    /// `a1`: row `g + 8`; `a2`, `a3`: k `+8`), are the weight with virtual row `g` = column
    /// `8g + 2r` and row `g + 8` = column `8g + 2r + 1`, in both formats (f16's odd
    /// fragments scaled by 16), built from the checkpoint words of [`lane_rows`] in word
    /// column [`lane_word`].
    #[test]
    fn checkpoint_words_become_swap_ab_a_fragments() {
        let (k, n) = (16i64, 64i64);
        let q: Vec<u8> = (0..k * n).map(|i| ((i * 13 + i / 5 + i * i % 7) % 16) as u8).collect();
        let word = |row: i64, j: i64| pack_awq(&std::array::from_fn(|c| q[(row * n + 8 * j + c as i64) as usize]));
        for f in [Biased16::F16, Biased16::BF16] {
            for lane in 0..32i64 {
                let (g, t) = (lane / 4, lane % 4);
                let a = a_fragments(lane_rows(lane).map(|row| word(row, lane_word(lane))), f);
                for (r, frag) in a.iter().enumerate() {
                    let scale = if f == Biased16::F16 && r % 2 == 1 { 16.0 } else { 1.0 };
                    for (i, reg) in frag.iter().enumerate() {
                        let row = g + 8 * (i as i64 % 2);
                        let col = 8 * g + 2 * r as i64 + row / 8;
                        let k0 = 2 * t + 8 * (i as i64 / 2);
                        let want = [k0, k0 + 1].map(|kk| f.bias() + scale * f32::from(q[(kk * n + col) as usize]));
                        assert_eq!(f.values(*reg), want, "{f:?} lane {lane} fragment {r} a{i}");
                    }
                }
            }
        }
    }

    /// The loads of one warp instruction (one of the four rows of each lane) cover, for
    /// each `t`, the eight consecutive words of one row: four 32-byte segments.
    #[test]
    fn warp_loads_are_row_segments() {
        for i in 0..4 {
            let mut by_row = std::collections::BTreeMap::<i64, Vec<i64>>::new();
            for lane in 0..32 {
                by_row.entry(lane_rows(lane)[i]).or_default().push(lane_word(lane));
            }
            assert_eq!(by_row.len(), 4);
            assert!(by_row.values().all(|w| *w == (0..8).collect::<Vec<_>>()));
        }
        assert_eq!(byte_perm(0x3322_1100, 0x7766_5544, PRMT_LOW_BYTES), 0x5544_1100);
        assert_eq!(byte_perm(0x3322_1100, 0x7766_5544, PRMT_HIGH_BYTES), 0x7766_3322);
    }
}
