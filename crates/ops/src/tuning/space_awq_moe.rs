//! The candidates a tuner times for the AWQ GEMM and the fused MoE layer: the
//! configurations those ops can be forced to ([`crate::Ops::run_awq_gemm`],
//! [`crate::Ops::run_fused_moe_spec`]), the rules' choice first, each accepted by the
//! generator.
//!
//! ```
//! use rcute_ops::tuning::space::{awq_candidates, moe_candidates};
//! let awq = awq_candidates(16, 4096, 4096, 132);
//! assert!(awq[0].to_string().starts_with("awq:16x256x64"));
//! assert!(awq.len() > 4);
//! let moe = moe_candidates(16, 2, 8, 4096, 14336, (9, 0), 132);
//! assert!(moe[0].to_string().starts_with("moe:16x128x64"));
//! assert!(moe.len() > 4);
//! // Prefill on an H100 / H200: the rules run the SM90 family (ping-pong at 256 rows per expert).
//! let prefill = moe_candidates(1024, 2, 8, 4096, 14336, (9, 0), 132);
//! assert_eq!(prefill[0].to_string(), "moe:sm90pp");
//! ```

use rcute_atom::Element;
use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmConfig};

use super::op_specs::{AwqSpec, MoeSm90Spec, MoeSpec};
use super::spec::ConfigSpec;
use crate::awq::select::select_awq_gemm;
use crate::moe::{moe_space, sm90_chosen, sm90_gemm1_cluster, sm90_gemm2_tile, sm90_pingpong, MoePath};

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
/// experts, hidden size `hidden` and intermediate size `inter` on a GPU of compute
/// capability `cc` with `sms` SMs: the rules' choice first (what [`MoePath::Auto`] runs:
/// the SM90 form of [`sm90_gemm2_tile`] where [`sm90_chosen`] picks the SM90 family, else
/// the SM80 rules of [`moe_space`]), then on sm_90 the SM90 forms ([`MoeSm90Spec`], at any
/// row count), then the rest of [`moe_space`]; only those the generator accepts.
pub fn moe_candidates(
    tokens: usize,
    topk: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    cc: (u32, u32),
    sms: u32,
) -> Vec<ConfigSpec> {
    let entries = tokens.saturating_mul(topk);
    let sm90: Vec<ConfigSpec> = if cc == (9, 0) {
        let w13_bytes = 2 * inter * hidden * 2;
        let rules = if sm90_pingpong(MoePath::Auto, entries, local) {
            MoeSm90Spec::PingPong
        } else {
            MoeSm90Spec::of_rules(
                sm90_gemm2_tile(MoePath::Auto, entries, local, hidden, sms),
                sm90_gemm1_cluster(MoePath::Auto, entries, local, w13_bytes),
            )
        };
        let mut forms = vec![rules];
        forms.extend(MoeSm90Spec::ALL.into_iter().filter(|&s| s != rules));
        forms
            .into_iter()
            .filter(|&s| sm90_generates(s))
            .map(ConfigSpec::MoeSm90)
            .collect()
    } else {
        Vec::new()
    };
    let sm80: Vec<ConfigSpec> = moe_space(tokens, topk, local, hidden, inter)
        .into_iter()
        .filter(sm80_generates)
        .map(ConfigSpec::Moe)
        .collect();
    let all = if sm90_chosen(MoePath::Auto, cc, entries, local) {
        sm90.into_iter().chain(sm80).collect::<Vec<_>>()
    } else {
        let mut v = sm80.iter().take(1).cloned().collect::<Vec<_>>();
        v.extend(sm90);
        v.extend(sm80.into_iter().skip(1));
        v
    };
    let mut out: Vec<ConfigSpec> = Vec::new();
    for spec in all {
        if !out.contains(&spec) {
            out.push(spec);
        }
    }
    out.truncate(super::space::MAX_CANDIDATES);
    out
}

/// Whether the generator accepts both SM80 grouped GEMMs of `s` (bf16).
fn sm80_generates(s: &MoeSpec) -> bool {
    [
        (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (GroupedA::Rows, GroupedEpilogue::Scatter),
    ]
    .into_iter()
    .all(|(a, e)| {
        rcute_kernel::grouped_gemm::generate(&GroupedGemmConfig::new(Element::BF16, a, e).with_tile(s.tile, s.warps))
            .is_ok()
    })
}

/// Whether the generator accepts every kernel of the SM90 layer `s` runs (bf16): the
/// layer's own kernel list ([`crate::moe::kernels::fused_moe_spec_kernels`]).
fn sm90_generates(s: MoeSm90Spec) -> bool {
    crate::moe::kernels::fused_moe_spec_kernels(Element::BF16, &ConfigSpec::MoeSm90(s))
        .is_ok_and(|kernels| kernels.iter().all(|k| k.source().is_ok()))
}

#[cfg(test)]
mod tests {
    use super::moe_candidates;
    use crate::moe::{moe_space, sm90_chosen, MoePath};
    use crate::tuning::{ConfigSpec, MoeSm90Spec};

    /// `(tokens, topk, experts, hidden, inter)`: Mixtral and DeepSeek-V2-Lite, decode to
    /// prefill, and a small layer.
    const LAYERS: [(usize, usize, usize, usize, usize); 9] = [
        (1, 2, 8, 4096, 14336),
        (64, 2, 8, 4096, 14336),
        (256, 2, 8, 4096, 14336),
        (1024, 2, 8, 4096, 14336),
        (4096, 2, 8, 4096, 14336),
        (64, 6, 64, 2048, 1408),
        (1024, 6, 64, 2048, 1408),
        (4096, 6, 64, 2048, 1408),
        (24, 2, 8, 256, 512),
    ];

    fn is_sm90(c: &ConfigSpec) -> bool {
        matches!(c, ConfigSpec::MoeSm90(_))
    }

    #[test]
    fn sm90_forms_join_the_space_on_sm90_only_and_the_rules_come_first() {
        for (t, k, e, h, i) in LAYERS {
            let hopper = moe_candidates(t, k, e, h, i, (9, 0), 132);
            let ampere = moe_candidates(t, k, e, h, i, (8, 0), 108);
            for s in MoeSm90Spec::ALL {
                assert!(hopper.contains(&ConfigSpec::MoeSm90(s)), "{t} tokens: {s} missing");
            }
            assert!(!ampere.iter().any(is_sm90), "{t} tokens on sm_80: {ampere:?}");
            assert_eq!(ampere[0], ConfigSpec::Moe(moe_space(t, k, e, h, i)[0]), "{t} tokens");
            if sm90_chosen(MoePath::Auto, (9, 0), t * k, e) {
                assert!(
                    is_sm90(&hopper[0]),
                    "{t} tokens: the rules pick SM90, got {}",
                    hopper[0]
                );
            } else {
                assert_eq!(hopper[0], ampere[0], "{t} tokens: the SM80 rules first");
            }
            for (n, c) in hopper.iter().enumerate() {
                assert!(!hopper[..n].contains(c), "{t} tokens: {c} twice");
            }
        }
        // What Auto runs at Mixtral prefill: ping-pong up to 256 rows per expert
        // (`sm90_pingpong`), then `sm90_gemm2_tile`'s own examples (GEMM1 on clusters from
        // two row tiles per expert, `sm90_gemm1_cluster`).
        let first = |t: usize| moe_candidates(t, 2, 8, 4096, 14336, (9, 0), 132)[0].clone();
        assert_eq!(first(1024), ConfigSpec::MoeSm90(MoeSm90Spec::PingPong));
        assert_eq!(first(4096), ConfigSpec::MoeSm90(MoeSm90Spec::WideCluster));
    }
}
