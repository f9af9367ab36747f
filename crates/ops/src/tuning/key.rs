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

/// The key of an AWQ W4A16 GEMM (`x [M, K] @ w [K, N]`, group size `group`), activations
/// `dtype` (`f16` or `bf16`): what `rcute tune awq` writes and `Ops::awq_gemm` looks up.
///
/// ```
/// use rcute_ops::tuning::awq_key;
/// let k = awq_key("f16", 128, "sm_90a", 16, 4096, 4096);
/// assert_eq!((k.op.as_str(), k.fusion.as_str(), k.m), ("awq", "g128", 16));
/// ```
pub fn awq_key(dtype: &str, group: usize, arch: &str, m: usize, n: usize, k: usize) -> ProblemKey {
    ProblemKey::new("awq", dtype, &format!("g{group}"), arch, m, n, k)
}

/// The key of a fused MoE layer of `tokens` tokens, hidden size `hidden`, intermediate size
/// `inter`, `experts` experts on this GPU and top-`topk` routing, in `dtype`: what `rcute
/// tune moe` writes and `Ops::fused_moe` looks up (`m` = tokens, `n` = hidden, `k` = inter).
///
/// ```
/// use rcute_ops::tuning::moe_key;
/// let k = moe_key("bf16", 8, 2, "sm_90a", 64, 4096, 14336);
/// assert_eq!((k.op.as_str(), k.fusion.as_str(), k.n, k.k), ("moe", "e8-top2", 4096, 14336));
/// ```
pub fn moe_key(
    dtype: &str,
    experts: usize,
    topk: usize,
    arch: &str,
    tokens: usize,
    hidden: usize,
    inter: usize,
) -> ProblemKey {
    ProblemKey::new(
        "moe",
        dtype,
        &format!("e{experts}-top{topk}"),
        arch,
        tokens,
        hidden,
        inter,
    )
}
