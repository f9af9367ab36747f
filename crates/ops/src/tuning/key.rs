//! The key a tuning table is looked up by.

use serde::{Deserialize, Serialize};

/// What a measured choice applies to: the op, its element types and fused epilogue, the
/// architecture, and the problem's N, K and M bucket. (The device and its SM count are
/// the table header's.)
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProblemKey {
    /// `gemm`, `scaled_mm`, `awq` or `moe`.
    pub op: String,
    /// Element types, e.g. `bf16` or `s8->bf16`.
    pub dtypes: String,
    /// The fused epilogue's tag (`lincomb` for `alpha * AB + beta * C`).
    pub fusion: String,
    /// The compile target, e.g. `sm_90a`.
    pub arch: String,
    /// The M bucket ([`super::bucket::m_bucket`]).
    pub m: usize,
    /// Columns of the output.
    pub n: usize,
    /// The reduction extent.
    pub k: usize,
}

impl ProblemKey {
    /// The key of an `m x n x k` problem; `m` is rounded to its bucket.
    pub fn new(op: &str, dtypes: &str, fusion: &str, arch: &str, m: usize, n: usize, k: usize) -> ProblemKey {
        ProblemKey {
            op: op.into(),
            dtypes: dtypes.into(),
            fusion: fusion.into(),
            arch: arch.into(),
            m: super::bucket::m_bucket(m),
            n,
            k,
        }
    }

    /// Whether `self` and `other` differ at most in M.
    pub fn same_but_m(&self, other: &ProblemKey) -> bool {
        (&self.op, &self.dtypes, &self.fusion, &self.arch, self.n, self.k)
            == (&other.op, &other.dtypes, &other.fusion, &other.arch, other.n, other.k)
    }
}
