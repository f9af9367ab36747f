//! The SM90 mixed-input kernel ([`crate::awq_wgmma`]) on AutoAWQ's checkpoint `qweight`
//! as it is ([`crate::awq_mainloop::AwqMainloopConfig::wgmma_checkpoint`]): the same
//! swap-AB RS `wgmma`s, accumulators, group registers and epilogue; what differs is how a
//! stage's weight arrives and how a lane gets its words into the order the conversion
//! expects.
//!
//! **Stage.** `qweight [K, N/8]` int32 is a plain row-major matrix, so the producer
//! TMA-loads it as it is: per k-tile and group of four 64-column blocks one 2-D box of
//! `(32 words, 64 rows)` ([`BOX_WORDS`] x [`crate::awq_wgmma::WGMMA_BK`], 8 KB) with the
//! 128-byte swizzle (row `r` at `128 r`, 16-byte chunk `c` at chunk `c ^ (r % 8)`:
//! [`smem_offset`]), rows past K and words past N/8 zero-filled. The stage's bytes equal
//! the prepared stage's (`32 BN`).
//!
//! **Lane words.** Lane `(g, t)` of the warp with 64-column block `wbl` (within the CTA)
//! needs, in a k16 step `kb`, rows `16 kb + 2t + d`, `d` in `0, 1, 8, 9`, of word column
//! `8 wbl + g` ([`lane_offset`]): the same 32 nibbles the prepared layout gives it as four
//! words ([`crate::awq_prepared`]). The swizzle makes each of the four shared loads of a
//! warp conflict-free (the four `t` land in four different chunks of their rows, the eight
//! `g` in two chunks of four banks).
//!
//! **Permutation.** Row word nibble `i` holds column `[0, 2, 4, 6, 1, 3, 5, 7][i]`, so
//! byte `b` holds columns `2b, 2b + 2` (`b` < 2) and byte `2 + b` columns `2b + 1, 2b +
//! 3`. One `PRMT` with [`pair_selector`]`(p)` (`0x6420 + 0x1111 p`) takes bytes `p, p + 2`
//! of row `2t` and then of row `2t + 1`: its nibbles `0, 1, 2, 3` are row `2t`'s columns
//! `4p, 4p + 2, 4p + 1, 4p + 3`, nibbles `4 .. 8` row `2t + 1`'s same columns. The
//! conversion pairs nibble `j` with `j + 4` (the two rows), so pair `j` of that word is
//! column `4p + 2j` (`j` < 2) or `4p + 2(j - 2) + 1`, at `k = 2t, 2t + 1`: the lane's
//! words `r = 2p` and `2p + 1` (columns `8g + 2r`, `+ 1`) take pairs `(r % 2, r % 2 +
//! 2)` of it and of the same `PRMT` of rows `2t + 8, 2t + 9`: the A fragment `{a0, a1, a2,
//! a3}` of word `r` is `{pair r % 2, pair r % 2 + 2}` of rows `(2t, 2t + 1)`, then of rows
//! `(2t + 8, 2t + 9)` ([`register_a`]). So two `PRMT`s and two conversions give two
//! words' fragments: as many conversions as the prepared kernel, plus two `PRMT`s and four
//! 4-byte shared loads instead of one 8-byte (two words a warpgroup) or 16-byte load. With
//! f16's one-shift conversion the odd pairs hold `16 q`: the whole fragment of odd `r`.
//! A warpgroup's words `r0 .. r0 + words` are whole pairs (`words` 2 or 4), so each lane
//! permutes with `pair_selector(r0 / 2 + i / 2)` for its word `i`.
//!
//! ```
//! use rcute_collective::awq_wgmma_checkpoint::{lane_offset, pair_selector, smem_offset};
//! assert_eq!((pair_selector(0), pair_selector(1)), (0x6420, 0x7531));
//! // row 3, word 5: chunk 1 ^ 3 = 2 of row 3, word 1 of it
//! assert_eq!(smem_offset(3, 5), 128 * 3 + 16 * 2 + 4);
//! // lane (g 5, t 1) of block 2, step 1, row d = 9: row 16 + 2 + 9 = 27, word 21
//! assert_eq!(lane_offset(1, 9, 2, 4 * 5 + 1), smem_offset(27, 21));
//! ```

use rcute_atom::convert_int4::{u4x8_to_16x2_biased, u4x8_to_f16x2_biased_x16, Biased16};

/// Words (32-bit) of one TMA box row: four 64-column blocks, 128 bytes (the swizzle span).
pub const BOX_WORDS: i64 = 32;

/// Bytes of one box: [`BOX_WORDS`] words of [`crate::awq_wgmma::WGMMA_BK`] rows.
pub const BOX_BYTES: i64 = 4 * BOX_WORDS * crate::awq_wgmma::WGMMA_BK;

/// The row offsets `d` (within a k16 step, after `2t`) of a lane's four words, in load
/// order: rows `2t, 2t + 1` (`a0`, `a1` of the fragments), `2t + 8, 2t + 9` (`a2`, `a3`).
pub const LANE_ROWS: [i64; 4] = [0, 1, 8, 9];

/// The `__byte_perm` selector of word pair `p` (words `2p`, `2p + 1` of a lane): bytes
/// `p`, `p + 2` of the first row, then of the second (module docs).
pub fn pair_selector(p: i64) -> u32 {
    0x6420 + 0x1111 * p as u32
}

/// Byte offset, within a box, of word `word` (0 .. 32) of row `row` (0 .. 64) under the
/// TMA's 128-byte swizzle: `128 row + 16 ((word / 4) ^ (row % 8)) + 4 (word % 4)`.
pub fn smem_offset(row: i64, word: i64) -> i64 {
    128 * row + 16 * ((word / 4) ^ (row % 8)) + 4 * (word % 4)
}

/// Byte offset, within the stage's box of its group of four blocks, of the word that lane
/// `lane` of the warp with 64-column block `wbl` reads for row `16 kb + 2t + d` (`d` of
/// [`LANE_ROWS`]): word column `8 (wbl % 4) + g`.
pub fn lane_offset(kb: i64, d: i64, wbl: i64, lane: i64) -> i64 {
    let (g, t) = (lane / 4, lane % 4);
    smem_offset(16 * kb + 2 * t + d, 8 * (wbl % 4) + g)
}

/// The A fragment `{a0, a1, a2, a3}` of the lane's word `r` (0 .. 4: columns `8g + 2r`,
/// `8g + 2r + 1`) built on the CPU as the kernel does from its four checkpoint words
/// `rows` (rows of [`LANE_ROWS`]): the pair-`r / 2` `PRMT`s of rows `(2t, 2t + 1)` and
/// `(2t + 8, 2t + 9)`, converted, pairs `r % 2` and `r % 2 + 2` of each. With
/// [`Biased16::F16`] the one-shift conversion: the fragments of odd `r` hold `bias + 16 q`.
pub fn register_a(rows: [u32; 4], r: usize, f: Biased16) -> [u32; 4] {
    let cvt = |w: u32| match f {
        Biased16::F16 => u4x8_to_f16x2_biased_x16(w),
        Biased16::BF16 => u4x8_to_16x2_biased(w, f),
    };
    let sel = pair_selector((r / 2) as i64);
    let lo = cvt(crate::awq_streamed_checkpoint::byte_perm(rows[0], rows[1], sel));
    let hi = cvt(crate::awq_streamed_checkpoint::byte_perm(rows[2], rows[3], sel));
    let j = r % 2;
    [lo[j], lo[j + 2], hi[j], hi[j + 2]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awq_wgmma::AwqWgmma;
    use rcute_atom::convert_int4::pack_awq;
    use rcute_atom::mma_sm90::a_layout_64xk;
    use rcute_atom::Element;
    use rcute_layout::tuple;

    /// Every register value of `wgmma`'s register A (`ALayout_64x16`), filled from the
    /// checkpoint words through the swizzled box the way the kernel does, is the weight at
    /// the planned column ([`AwqWgmma::virtual_column`]), for every consumer warpgroup of
    /// the two- and four-word plans, in both formats (f16's odd words scaled by 16).
    #[test]
    fn checkpoint_words_are_wgmma_register_a() {
        let (k, n) = (16i64, 256i64);
        let q: Vec<u8> = (0..k * n).map(|i| ((i * 5 + i / 11 + i * i % 7) % 16) as u8).collect();
        // the box as the TMA writes it: word (row, col) at smem_offset(row, col)
        let mut sm = vec![0u32; (BOX_BYTES / 4) as usize];
        for row in 0..k {
            for col in 0..BOX_WORDS {
                let w = pack_awq(&std::array::from_fn(|c| q[(row * n + 8 * col + c as i64) as usize]));
                sm[(smem_offset(row, col) / 4) as usize] = w;
            }
        }
        let a = a_layout_64xk(16);
        for f in [Biased16::F16, Biased16::BF16] {
            for warps in [[2, 1], [1, 1]] {
                let p = AwqWgmma::new(Element::F16, 16, warps, 4).unwrap();
                for wg in 0..warps[0] * warps[1] {
                    for thr in 0..128i64 {
                        let (warp, lane) = (thr / 32, thr % 32);
                        let (wb, r0) = p.block_and_word(wg, warp);
                        let rows = LANE_ROWS.map(|d| sm[(lane_offset(0, d, wb, lane) / 4) as usize]);
                        for i in 0..p.words {
                            let r = (r0 + i) as usize;
                            let regs = register_a(rows, r, f);
                            let scale = if f == Biased16::F16 && r % 2 == 1 { 16.0 } else { 1.0 };
                            for v in 0..8i64 {
                                let idx = a.crd2idx(&tuple!(thr, v)).unwrap().as_static().unwrap();
                                let (row, kk) = (idx % 64, idx / 64);
                                let (g, h) = (row % 8, (row % 16) / 8);
                                let col = p.virtual_column(wg, warp, i, g, h);
                                let got = (f.values(regs[(v / 2) as usize])[(v % 2) as usize] - f.bias()) / scale;
                                assert_eq!(got, f32::from(q[(kk * n + col) as usize]), "wg {wg} thr {thr} v {v}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Each of a warp's four shared loads (one row offset `d` of [`LANE_ROWS`]) touches 32
    /// different banks, in every block and step; the box offsets are a bijection.
    #[test]
    fn lane_loads_are_conflict_free() {
        for wbl in 0..4 {
            for kb in 0..4 {
                for d in LANE_ROWS {
                    let mut banks: Vec<i64> = (0..32).map(|l| lane_offset(kb, d, wbl, l) / 4 % 32).collect();
                    banks.sort();
                    banks.dedup();
                    assert_eq!(banks.len(), 32, "block {wbl} step {kb} row {d}");
                }
            }
        }
        let mut all: Vec<i64> = (0..64)
            .flat_map(|r| (0..BOX_WORDS).map(move |c| smem_offset(r, c)))
            .collect();
        all.sort();
        assert_eq!(all, (0..BOX_BYTES / 4).map(|w| 4 * w).collect::<Vec<_>>());
    }
}
