//! The kernels of the fused MoE layer a configuration names: the grouped GEMMs of a
//! [`MoeSpec`] (SM80 family) or a [`crate::tuning::MoeSm90Spec`] (SM90 family), as their generators'
//! configurations. Pure functions of the configuration and the element type, shared by
//! the layer's launches and loaders and the tuning tables' fingerprints
//! ([`crate::tuning::kernel_fingerprint`]).

use crate::error::OpsError;
use crate::tuning::{ConfigSpec, MoeSpec, TunedKernel};
use rcute_atom::Element;
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_kernel::grouped_gemm::{
    sm90_cluster_config, sm90_config, GroupedA, GroupedEpilogue, GroupedGemmConfig, SM90_NARROW_TILE, SM90_TILE,
};

/// The grouped GEMM of `spec` with A rows `a` and epilogue `ep` for `el` operands: its
/// tile, warps and stages, GEMM2 (the scatter) on stream-K when `spec.stream`, the
/// weights' L2 prefetch size when `spec.l2_prefetch`, or the register-streamed form when
/// `spec.streamed` (its tile, warps and ring spelled by the same fields).
pub(crate) fn spec_config(el: Element, spec: &MoeSpec, a: GroupedA, ep: GroupedEpilogue) -> GroupedGemmConfig {
    let mut c = GroupedGemmConfig::new(el, a, ep)
        .with_tile(spec.tile, spec.warps)
        .with_stages(spec.stages)
        .with_stream_k(spec.stream && ep == GroupedEpilogue::Scatter)
        .with_b_l2_prefetch(spec.l2_prefetch);
    c.streamed = spec.streamed;
    c.k_rotate = spec.k_rotate;
    c
}

/// An SM90 grouped GEMM of the layer for `el` operands with epilogue `ep` on `tile`, on
/// 2x1 CTA clusters when `cluster`.
fn sm90_grouped(el: Element, ep: GroupedEpilogue, tile: [i64; 3], cluster: bool) -> GemmSm90Config {
    let config = if cluster { sm90_cluster_config } else { sm90_config };
    config(el, ep, tile)
}

/// GEMM1 of the SM90 layer (SwiGLU) for `el` operands on `tile` ([`super::sm90_gemm1_tile`]),
/// on 2x1 CTA clusters when `cluster`.
pub(crate) fn sm90_gemm1(el: Element, tile: [i64; 3], cluster: bool) -> GemmSm90Config {
    sm90_grouped(el, GroupedEpilogue::SwiGlu, tile, cluster)
}

/// GEMM2 of the SM90 layer (router weight and scatter) for `el` operands on `tile`, on 2x1
/// CTA clusters when `cluster` ([`super::sm90_gemm2_cluster`]).
pub(crate) fn sm90_gemm2(el: Element, tile: [i64; 3], cluster: bool) -> GemmSm90Config {
    sm90_grouped(el, GroupedEpilogue::Scatter, tile, cluster)
}

/// The kernels of the fused MoE layer that `spec` decides, for `el` operands: the SM80
/// family's two grouped GEMMs (GEMM1 gathers and applies SwiGLU, GEMM2 scatters); the
/// SM90 family's row gather (only that family runs it), GEMM1 (on 1x1 at both tiles: the
/// routed rows pick one per call, `sm90_gemm1_tile`), and GEMM2 on 1x1 and 2x1 clusters
/// (the routed rows pick one per call: `sm90_gemm2_cluster`). The routing, the
/// alignment and the finalize run whatever the configuration. What
/// [`crate::Ops::load_fused_moe_spec`] builds and a tuning entry's fingerprint covers.
pub(crate) fn fused_moe_spec_kernels(el: Element, spec: &ConfigSpec) -> Result<Vec<TunedKernel>, OpsError> {
    Ok(match spec {
        ConfigSpec::Moe(s) => [
            (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
            (GroupedA::Rows, GroupedEpilogue::Scatter),
        ]
        .into_iter()
        .map(|(a, e)| TunedKernel::Grouped(spec_config(el, s, a, e)))
        .collect(),
        ConfigSpec::MoeSm90(s) => {
            let gemm2 = |cluster| sm90_gemm2(el, s.gemm2_tile(), cluster);
            let mut v = vec![
                TunedKernel::MoeGather(el),
                TunedKernel::Sm90(sm90_gemm1(el, SM90_TILE, s.gemm1_cluster())),
            ];
            if !s.gemm1_cluster() {
                // GEMM1 on 1x1 takes the narrow tile where the routed rows say.
                v.push(TunedKernel::Sm90(sm90_gemm1(el, SM90_NARROW_TILE, false)));
            }
            v.extend([TunedKernel::Sm90(gemm2(false)), TunedKernel::Sm90(gemm2(true))]);
            v
        }
        other => return Err(not_moe(other)),
    })
}

/// The error of a configuration of another op given to a MoE entry point.
pub(crate) fn not_moe(spec: &ConfigSpec) -> OpsError {
    OpsError::Shape(format!("MoE configuration: {spec} is not a MoE configuration"))
}
