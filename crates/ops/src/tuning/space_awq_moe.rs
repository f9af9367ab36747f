//! The candidates a tuner times for the AWQ GEMM and the fused MoE layer: the
//! configurations those ops can be forced to ([`crate::Ops::run_awq_gemm`],
//! [`crate::Ops::run_fused_moe_with`]), the rules' choice first, each accepted by the
//! generator.
//!
//! ```
//! use rcute_ops::tuning::space::{awq_candidates, moe_candidates};
//! let awq = awq_candidates(16, 4096, 4096, 132);
//! assert!(awq[0].to_string().starts_with("awq:16x256x64"));
//! assert!(awq.len() > 4);
//! let moe = moe_candidates(16, 2, 8, 4096, 14336);
//! assert!(moe[0].to_string().starts_with("moe:16x128x64"));
//! assert!(moe.len() > 4);
//! ```

use rcute_atom::Element;
use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmConfig};

use super::op_specs::{AwqSpec, MoeSpec};
use super::spec::ConfigSpec;
use crate::awq::select::select_awq_gemm;
use crate::moe::moe_space;

/// The AWQ GEMM's `(tile, warps, stages)` geometries the tuner tries.
const AWQ_GEOMETRIES: [([i64; 3], [i64; 2], usize); 6] = [
    ([16, 256, 64], [1, 4], 4),
    ([16, 256, 64], [1, 4], 3),
    ([32, 256, 64], [1, 4], 3),
    ([64, 256, 64], [1, 4], 3),
    ([64, 256, 64], [2, 4], 3),
    ([128, 256, 64], [2, 4], 3),
];

/// The AWQ GEMM's candidates (f16) for `M x N x K` on `sms` SMs: the rules' choice
/// ([`select_awq_gemm`]) first, then tiles of at most four times M's rows (rounded up to
/// 16) with K splits from 1 to 20 that keep at least two 64-deep k-tiles per split.
pub fn awq_candidates(m: usize, n: usize, k: usize, sms: u32) -> Vec<ConfigSpec> {
    let (rules, splits) = select_awq_gemm(m, n, k, sms as usize, Element::F16);
    let vw = rules.b_vector_words;
    let mut all = vec![AwqSpec::of(&rules, splits)];
    let k_tiles = k.div_ceil(64);
    for (tile, warps, stages) in AWQ_GEOMETRIES {
        if tile[0] as usize > 4 * m.next_power_of_two().max(16) {
            continue;
        }
        for splits in [1u32, 2, 4, 5, 8, 10, 16, 20] {
            if splits > 1 && k_tiles / (splits as usize) < 2 {
                continue;
            }
            all.push(AwqSpec {
                tile,
                warps,
                stages,
                b_vector_words: vw,
                splits,
            });
        }
    }
    let mut out: Vec<ConfigSpec> = Vec::new();
    for s in all {
        let generates = rcute_kernel::awq_gemm::generate(&s.config(Element::F16).0).is_ok();
        let spec = ConfigSpec::Awq(s);
        if generates && !out.contains(&spec) {
            out.push(spec);
        }
    }
    out.truncate(super::space::MAX_CANDIDATES);
    out
}

/// The fused MoE layer's candidates (bf16) for `tokens` tokens, top-`topk`, `local`
/// experts, hidden size `hidden` and intermediate size `inter`: the configurations of
/// [`moe_space`] (the rules' choice first) that the generator accepts.
pub fn moe_candidates(tokens: usize, topk: usize, local: usize, hidden: usize, inter: usize) -> Vec<ConfigSpec> {
    let all = moe_space(tokens, topk, local, hidden, inter);
    let generates = |s: &MoeSpec| {
        [
            (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
            (GroupedA::Rows, GroupedEpilogue::Scatter),
        ]
        .into_iter()
        .all(|(a, e)| {
            rcute_kernel::grouped_gemm::generate(
                &GroupedGemmConfig::new(Element::BF16, a, e).with_tile(s.tile, s.warps),
            )
            .is_ok()
        })
    };
    let mut out: Vec<ConfigSpec> = Vec::new();
    for s in all {
        let spec = ConfigSpec::Moe(s);
        if generates(&s) && !out.contains(&spec) {
            out.push(spec);
        }
    }
    out.truncate(super::space::MAX_CANDIDATES);
    out
}
