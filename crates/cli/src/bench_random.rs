//! The benches' random inputs: one SplitMix64 stream, so that a seed gives the same data
//! on every run and machine.

use half::bf16;

/// A SplitMix64 stream from its seed.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` (24 bits).
    pub(crate) fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `[lo, hi)` (53 bits).
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
}

/// `n` values of the stream from `seed` as bf16, uniform in `[-scale, scale)`.
pub(crate) fn random_bf16(n: usize, seed: u64, scale: f32) -> Vec<bf16> {
    let mut rng = SplitMix64(seed);
    (0..n)
        .map(|_| bf16::from_f32((rng.unit() * 2.0 - 1.0) * scale))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream is SplitMix64 (its published first outputs from seed 0), and the bf16
    /// values stay within their scale.
    #[test]
    fn splitmix64_stream_and_bf16_range() {
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let v = random_bf16(4096, 7, 4.0);
        assert!(v.iter().all(|x| x.to_f32().abs() <= 4.0));
        assert!(v.iter().any(|x| x.to_f32() < -2.0) && v.iter().any(|x| x.to_f32() > 2.0));
    }
}
