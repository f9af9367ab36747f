//! Conversion atoms for 4-bit weights: eight unsigned 4-bit values packed in one 32-bit
//! word become four pairs of 16-bit floats, one `lop3` per pair (the magic-number trick of
//! mixed-input GEMMs such as AWQ's and Marlin's).
//!
//! A 16-bit float whose exponent field makes its mantissa step exactly 1 holds a small
//! integer in its low mantissa bits: `0x6400` is f16 1024.0 (10 mantissa bits, step 1 from
//! 1024 to 2048) and `0x4300` is bf16 128.0 (7 mantissa bits, step 1 from 128 to 256). OR-ing
//! a nibble `q` into those bits gives the float `bias + q` exactly, for both halves of a
//! 32-bit word at once: `lop3.b32 d, w >> 4i, 0x000f000f, bias|bias<<16, (a & b) | c` puts
//! nibble `i` into the low half and nibble `i + 4` into the high half. The caller removes the
//! bias (and the zero point) with one packed subtraction, `(bias + q) - (bias + z) = q - z`,
//! which is exact, then scales.
//!
//! That pairing is why AutoAWQ packs columns in the order `[0, 2, 4, 6, 1, 3, 5, 7]`
//! ([`AWQ_ORDER`]): nibbles `i` and `i + 4` of a word hold columns `2i` and `2i + 1`, so pair
//! `i` of the conversion is the adjacent column pair `(2i, 2i + 1)` a `mma.sync` B fragment
//! or a 32-bit store wants.
//!
//! ```
//! use rcute_atom::convert_int4::{pack_awq, u4x8_to_16x2_biased, Biased16};
//! let cols = [3u8, 0, 15, 7, 1, 9, 12, 5]; // eight columns of one row
//! let pairs = u4x8_to_16x2_biased(pack_awq(&cols), Biased16::F16);
//! // Pair i holds columns (2i, 2i+1) as f16 1024 + q.
//! assert_eq!(Biased16::F16.values(pairs[1]), [1024.0 + 15.0, 1024.0 + 7.0]);
//! assert!(rcute_atom::convert_int4::u4x8_to_f16x2_biased().code.contains("lop3.b32"));
//! ```

use crate::arch::Arch;
use crate::element::Element;
use crate::snippet::{Dir, Param, Snippet};

/// Column held by nibble `i` of an AutoAWQ-packed word (bits `4i..4i+3`): the word `j` of a
/// row holds columns `8j + AWQ_ORDER[i]`.
pub const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// Packs eight 4-bit values (columns `0..8` of one row) the way AutoAWQ does.
pub fn pack_awq(cols: &[u8; 8]) -> u32 {
    AWQ_ORDER
        .iter()
        .enumerate()
        .fold(0u32, |w, (i, &c)| w | (u32::from(cols[c] & 0xf) << (4 * i)))
}

/// Unpacks an AutoAWQ-packed word into columns `0..8`.
pub fn unpack_awq(word: u32) -> [u8; 8] {
    let mut cols = [0u8; 8];
    for (i, &c) in AWQ_ORDER.iter().enumerate() {
        cols[c] = ((word >> (4 * i)) & 0xf) as u8;
    }
    cols
}

/// The 16-bit float format of a biased conversion and its magic bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Biased16 {
    /// IEEE half: `0x6400 | q` is `1024 + q`.
    F16,
    /// bfloat16: `0x4300 | q` is `128 + q`.
    BF16,
}

impl Biased16 {
    /// The 16-bit pattern OR-ed with a nibble.
    pub fn magic(self) -> u16 {
        match self {
            Biased16::F16 => 0x6400,
            Biased16::BF16 => 0x4300,
        }
    }

    /// The value of [`Self::magic`]: what the caller subtracts (with the zero point).
    pub fn bias(self) -> f32 {
        match self {
            Biased16::F16 => 1024.0,
            Biased16::BF16 => 128.0,
        }
    }

    /// The element type of the converted halves.
    pub fn element(self) -> Element {
        match self {
            Biased16::F16 => Element::F16,
            Biased16::BF16 => Element::BF16,
        }
    }

    /// The two values (low half, high half) of a converted pair.
    pub fn values(self, pair: u32) -> [f32; 2] {
        let half = |bits: u16| match self {
            Biased16::F16 => half::f16::from_bits(bits).to_f32(),
            Biased16::BF16 => half::bf16::from_bits(bits).to_f32(),
        };
        [half(pair as u16), half((pair >> 16) as u16)]
    }
}

/// CPU model of the conversion atoms: pair `i` = `(magic | nibble i, magic | nibble i+4)`.
pub fn u4x8_to_16x2_biased(word: u32, f: Biased16) -> [u32; 4] {
    let magic = u32::from(f.magic()) * 0x0001_0001;
    std::array::from_fn(|i| ((word >> (4 * i)) & 0x000f_000f) | magic)
}

fn biased_snippet(name: &str, f: Biased16) -> Snippet {
    let magic = u32::from(f.magic()) * 0x0001_0001;
    let body = format!(
        "// out[i] = {{bias + nibble i, bias + nibble i+4}} (bias {bias}): (q >> 4i) & 0x000f000f | {magic:#010x}\n\
         #pragma unroll\n\
         for (int i = 0; i < 4; ++i) {{\n  \
         asm(\"lop3.b32 %0, %1, %2, %3, 0xea;\" : \"=r\"(out[i]) : \"r\"(q >> (4 * i)), \"n\"(0x000f000f), \"n\"({magic:#010x}));\n\
         }}\n",
        bias = f.bias(),
    );
    let params = vec![
        Param::scalar("q", "uint32_t"),
        Param::regs("out", "uint32_t", 4, Dir::Out),
    ];
    Snippet::build(name, Arch::SM80, 1, params, &body)
}

/// `rc_cvt_u4x8_f16x2_biased(q, out)`: eight unsigned nibbles to four f16 pairs `1024 + q`.
pub fn u4x8_to_f16x2_biased() -> Snippet {
    biased_snippet("rc_cvt_u4x8_f16x2_biased", Biased16::F16)
}

/// `rc_cvt_u4x8_bf16x2_biased(q, out)`: eight unsigned nibbles to four bf16 pairs `128 + q`.
pub fn u4x8_to_bf16x2_biased() -> Snippet {
    biased_snippet("rc_cvt_u4x8_bf16x2_biased", Biased16::BF16)
}

/// CPU model of [`u4x8_to_f16x2_biased_x16`]: pairs `(n0, n4)`, `(16 n1, 16 n5)`,
/// `(n2, n6)`, `(16 n3, 16 n7)`, each plus the f16 bias 1024.
pub fn u4x8_to_f16x2_biased_x16(word: u32) -> [u32; 4] {
    let magic = 0x6400_6400u32;
    let hi = word >> 8;
    [
        (word & 0x000f_000f) | magic,
        (word & 0x00f0_00f0) | magic,
        (hi & 0x000f_000f) | magic,
        (hi & 0x00f0_00f0) | magic,
    ]
}

/// `rc_cvt_u4x8_f16x2_biased_x16(q, out)`: eight nibbles to four f16 pairs with one shift:
/// `out[0] = {1024 + n0, 1024 + n4}`, `out[1] = {1024 + 16 n1, 1024 + 16 n5}`, `out[2]` and
/// `out[3]` the same of nibbles 2, 6 and 3, 7 (the masks `0x000f000f` / `0x00f000f0` of
/// `q` and `q >> 8`, Marlin's trick). Pair `i` holds nibbles `(i, i + 4)` as in
/// [`u4x8_to_f16x2_biased`]; the odd pairs are 16 times the value, which the caller
/// removes exactly with `hfma2(v, 1/16, -(64 + z))` (`(1024 + 16 q) / 16 = 64 + q`). f16
/// only: bf16's 7 mantissa bits cannot hold `16 q`.
///
/// ```
/// use rcute_atom::convert_int4::{u4x8_to_f16x2_biased_x16, Biased16};
/// let pairs = u4x8_to_f16x2_biased_x16(0x7654_3210);
/// assert_eq!(Biased16::F16.values(pairs[0]), [1024.0, 1024.0 + 4.0]);
/// assert_eq!(Biased16::F16.values(pairs[3]), [1024.0 + 16.0 * 3.0, 1024.0 + 16.0 * 7.0]);
/// assert!(rcute_atom::convert_int4::u4x8_to_f16x2_biased_x16_snippet().code.contains("0x00f000f0"));
/// ```
pub fn u4x8_to_f16x2_biased_x16_snippet() -> Snippet {
    let body = "// out[0] = {1024 + n0, 1024 + n4}, out[1] = {1024 + 16 n1, 1024 + 16 n5}; out[2], out[3] the same of q >> 8
                const uint32_t q8 = q >> 8;
                asm(\"lop3.b32 %0, %1, %2, %3, 0xea;\" : \"=r\"(out[0]) : \"r\"(q), \"n\"(0x000f000f), \"n\"(0x64006400));
                asm(\"lop3.b32 %0, %1, %2, %3, 0xea;\" : \"=r\"(out[1]) : \"r\"(q), \"n\"(0x00f000f0), \"n\"(0x64006400));
                asm(\"lop3.b32 %0, %1, %2, %3, 0xea;\" : \"=r\"(out[2]) : \"r\"(q8), \"n\"(0x000f000f), \"n\"(0x64006400));
                asm(\"lop3.b32 %0, %1, %2, %3, 0xea;\" : \"=r\"(out[3]) : \"r\"(q8), \"n\"(0x00f000f0), \"n\"(0x64006400));
";
    let params = vec![
        Param::scalar("q", "uint32_t"),
        Param::regs("out", "uint32_t", 4, Dir::Out),
    ];
    Snippet::build("rc_cvt_u4x8_f16x2_biased_x16", Arch::SM80, 1, params, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awq_packing_round_trips_and_pairs_adjacent_columns() {
        let mut x = 0x9e37_79b9u32;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let cols: [u8; 8] = std::array::from_fn(|i| ((x >> (4 * i)) & 0xf) as u8);
            let w = pack_awq(&cols);
            assert_eq!(unpack_awq(w), cols);
            for f in [Biased16::F16, Biased16::BF16] {
                let pairs = u4x8_to_16x2_biased(w, f);
                for (i, p) in pairs.iter().enumerate() {
                    let want = [f.bias() + f32::from(cols[2 * i]), f.bias() + f32::from(cols[2 * i + 1])];
                    assert_eq!(f.values(*p), want, "{f:?} word {w:#x} pair {i}");
                }
            }
        }
        // AutoAWQ's order: nibble 1 holds column 2, nibble 4 column 1.
        assert_eq!(pack_awq(&[0, 1, 2, 0, 0, 0, 0, 0]), (2 << 4) | (1 << 16));
    }

    #[test]
    fn every_nibble_is_exact_in_both_formats() {
        for f in [Biased16::F16, Biased16::BF16] {
            for q in 0..16u32 {
                let pairs = u4x8_to_16x2_biased(q | (q << 16), f);
                assert_eq!(f.values(pairs[0]), [f.bias() + q as f32; 2]);
                assert_eq!(f.values(pairs[1]), [f.bias(); 2]);
            }
        }
    }

    #[test]
    fn the_x16_conversion_recovers_every_nibble_exactly() {
        let mut x = 0x1234_5678u32;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let p = u4x8_to_f16x2_biased_x16(x);
            let base = u4x8_to_16x2_biased(x, Biased16::F16);
            for i in 0..4 {
                let [lo, hi] = Biased16::F16.values(p[i]);
                let [blo, bhi] = Biased16::F16.values(base[i]);
                // Odd pairs hold 1024 + 16 q: (v / 16) - 64 = q.
                let f = |v: f32| if i % 2 == 1 { v / 16.0 - 64.0 + 1024.0 } else { v };
                assert_eq!([f(lo), f(hi)], [blo, bhi], "word {x:#x} pair {i}");
            }
        }
    }

    #[test]
    fn snippets_name_their_magic() {
        assert!(u4x8_to_f16x2_biased().code.contains("0x64006400"));
        assert!(u4x8_to_bf16x2_biased().code.contains("0x43004300"));
        assert_eq!(u4x8_to_bf16x2_biased().params.len(), 2);
    }
}
