//! M buckets: the row counts a tuning table is keyed by.
//!
//! Serving workloads see every M from 1 to thousands; a table cannot hold them all. M is
//! rounded to a bucket (the powers of two, plus the batch sizes serving engines capture
//! CUDA graphs for that are not powers of two), and a lookup takes the nearest bucket
//! that the table has, nearest on a log scale (ties to the larger bucket, whose kernel
//! covers the smaller M with predication), but only within [`REACH`] of M: a kernel tuned
//! for a decode batch says nothing about a prefill of thousands of rows, which falls back
//! to the rules.
//!
//! ```
//! use rcute_ops::tuning::bucket::{m_bucket, nearest_bucket, nearest_within_reach};
//! assert_eq!(m_bucket(1), 1);
//! assert_eq!(m_bucket(100), 96);
//! assert_eq!(m_bucket(5000), 4096);
//! assert_eq!(nearest_bucket(40, &[16, 64, 256]), Some(64));
//! assert_eq!(nearest_bucket(40, &[]), None);
//! assert_eq!(nearest_within_reach(40, &[16, 64, 256]), Some(64));
//! assert_eq!(nearest_within_reach(4096, &[16, 64, 128]), None);
//! ```

/// Powers of two up to 64 Ki rows, plus 24, 48, 96, 192 and 384 (graph-captured batch
/// sizes that are not powers of two), ascending.
pub const M_BUCKETS: [usize; 22] = [
    1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];

/// The bucket of `m`: the nearest entry of [`M_BUCKETS`] on a log scale (M above the last
/// bucket maps to it).
pub fn m_bucket(m: usize) -> usize {
    nearest_bucket(m, &M_BUCKETS).unwrap_or(1)
}

/// How far (a factor on M) a tuned entry reaches: an entry tuned at M = b serves every M
/// in [b / 2, 2 b].
pub const REACH: f64 = 2.0;

/// [`nearest_bucket`], but `None` when the nearest entry is more than [`REACH`] away
/// from `m`.
pub fn nearest_within_reach(m: usize, have: &[usize]) -> Option<usize> {
    let b = nearest_bucket(m, have)?;
    let ratio = b.max(1) as f64 / m.max(1) as f64;
    (1.0 / REACH - 1e-12..=REACH + 1e-12).contains(&ratio).then_some(b)
}

/// The entry of `have` nearest to `m` on a log scale, ties to the larger; `None` when
/// `have` is empty.
pub fn nearest_bucket(m: usize, have: &[usize]) -> Option<usize> {
    let lm = (m.max(1) as f64).log2();
    let mut best: Option<(f64, usize)> = None;
    for &b in have {
        let d = ((b.max(1) as f64).log2() - lm).abs();
        let better = match best {
            None => true,
            Some((bd, bb)) => d < bd - 1e-12 || ((d - bd).abs() <= 1e-12 && b > bb),
        };
        if better {
            best = Some((d, b));
        }
    }
    best.map(|(_, b)| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reaches_a_factor_of_two_and_no_further() {
        assert_eq!(nearest_within_reach(128, &[128]), Some(128));
        assert_eq!(nearest_within_reach(256, &[128]), Some(128));
        assert_eq!(nearest_within_reach(64, &[128]), Some(128));
        assert_eq!(nearest_within_reach(257, &[128]), None);
        assert_eq!(nearest_within_reach(63, &[128]), None);
        assert_eq!(nearest_within_reach(4096, &[1, 16, 128]), None);
        assert_eq!(nearest_within_reach(1, &[1, 16, 128]), Some(1));
    }

    #[test]
    fn every_bucket_is_its_own_bucket_and_buckets_ascend() {
        assert!(M_BUCKETS.windows(2).all(|w| w[0] < w[1]));
        for b in M_BUCKETS {
            assert_eq!(m_bucket(b), b);
        }
    }

    #[test]
    fn rounding_is_monotone_and_stays_within_a_factor_of_sqrt2() {
        let mut last = 0;
        for m in 1..70_000usize {
            let b = m_bucket(m);
            assert!(b >= last, "m = {m}");
            last = b;
            if m <= 65536 {
                let r = b as f64 / m as f64;
                assert!((0.70..=1.42).contains(&r), "m = {m} -> {b}");
            }
        }
        assert_eq!(m_bucket(0), 1);
        assert_eq!(m_bucket(usize::MAX), 65536);
    }

    #[test]
    fn ties_go_to_the_larger_bucket() {
        assert_eq!(nearest_bucket(32, &[16, 64]), Some(64));
        assert_eq!(nearest_bucket(20, &[16, 64]), Some(16));
    }
}
