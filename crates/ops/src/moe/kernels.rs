//! The kernels of the fused MoE layer a configuration names: the grouped GEMMs of a
//! [`MoeSpec`] (SM80 family) or a [`crate::tuning::MoeSm90Spec`] (SM90 family), as their generators'
//! configurations. Pure functions of the configuration and the element type, shared by
//! the layer's launches and loaders and the tuning tables' fingerprints
//! ([`crate::tuning::kernel_fingerprint`]).

use crate::error::OpsError;
use crate::tuning::{ConfigSpec, MoeSm90Spec, MoeSpec, TunedKernel};
use rcute_atom::Element;
use rcute_kernel::gemm_sm90::{GemmSm90Config, GroupedGrid, Sm90Schedule};
use rcute_kernel::grouped_gemm::{
    sm90_gather_config, sm90_grouped_config, sm90_operand_tile, sm90_pingpong_config, sm90_rows64_config, GroupedA,
    GroupedEpilogue, GroupedGemmConfig, SM90_NARROW_TILE, SM90_PINGPONG_TILE, SM90_TILE,
};

/// The grouped GEMM of `spec` with A rows `a` and epilogue `ep` for `el` operands: its
/// tile, warps and stages, GEMM2 (the scatter) on stream-K when `spec.stream`, the
/// weights' L2 prefetch size when `spec.l2_prefetch`, or the register-streamed form when
/// `spec.streamed` (its tile, warps and ring spelled by the same fields; the ring in
/// shared memory when `spec.shared_ring`).
pub(crate) fn spec_config(el: Element, spec: &MoeSpec, a: GroupedA, ep: GroupedEpilogue) -> GroupedGemmConfig {
    let mut c = GroupedGemmConfig::new(el, a, ep)
        .with_tile(spec.tile, spec.warps)
        .with_stages(spec.stages)
        .with_stream_k(spec.stream && ep == GroupedEpilogue::Scatter)
        .with_b_l2_prefetch(spec.l2_prefetch);
    c.streamed = spec.streamed;
    c.k_rotate = spec.k_rotate;
    c.shared_ring = spec.shared_ring;
    c.skip_padding = spec.skip_padding;
    c
}

/// GEMM1 of the SM90 layer (SwiGLU) for `el` operands on `tile` ([`super::sm90_gemm1_tile`]),
/// on 2x1 CTA clusters when `cluster`.
pub(crate) fn sm90_gemm1(el: Element, tile: [i64; 3], cluster: bool) -> GemmSm90Config {
    sm90_grouped_config(el, el, GroupedEpilogue::SwiGlu, tile, cluster)
}

/// GEMM2 of the SM90 layer (router weight and scatter) for `el` operands on `tile`, on 2x1
/// CTA clusters when `cluster` ([`super::sm90_gemm2_cluster`]).
pub(crate) fn sm90_gemm2(el: Element, tile: [i64; 3], cluster: bool) -> GemmSm90Config {
    sm90_grouped_config(el, el, GroupedEpilogue::Scatter, tile, cluster)
}

/// GEMM1 and GEMM2 of an SM90 layer of `ab` operands with an `out` D: the bf16 / f16 layer
/// ([`crate::Ops::fused_moe`], `out` = `ab`) or the FP8 layer ([`crate::Ops::fused_moe_fp8`],
/// `ab` e4m3, `out` bf16 / f16), for `entries` routed rows over `local` experts of hidden
/// size `hidden` and intermediate size `inter` on `sms` persistent CTAs. The tiles are the
/// 16-bit ones with `ab`'s `BK` ([`sm90_operand_tile`]: 128 for e4m3).
///
/// Both GEMMs run on the ping-pong schedule where [`super::sm90_pingpong`] says (always with
/// [`super::MoePath::Sm90PingPong`]; [`rcute_kernel::grouped_gemm::SM90_PINGPONG_TILE`]),
/// for e4m3 operands where [`super::sm90_fp8_pingpong`] says (up to
/// [`super::SM90_FP8_PINGPONG_MAX_ROWS_PER_EXPERT`] rows per expert for experts larger than
/// the L2, the walk in bands of [`rcute_kernel::grouped_gemm::SM90_FP8_PINGPONG_WALK_BAND`]).
/// Otherwise the cooperative kernels: GEMM1 on 2x1 clusters where
/// [`super::sm90_gemm1_cluster`] says for an expert's `w13` (`2 I H` elements of `ab`),
/// GEMM2 on [`super::sm90_gemm2_tile`]'s tile and on 2x1 clusters where
/// [`super::sm90_gemm2_cluster`] says. GEMM1's tile is [`super::sm90_gemm1_tile`]'s for
/// 16-bit operands and always the wide one for e4m3 (the narrow GEMM1 tile is unmeasured
/// there).
///
/// The FP8 layer's [`super::MoePath::Auto`] takes none of these rules above its ping-pong
/// shapes (measured on an H100, Mixtral T = 256 / 512 / 1024: ping-pong 1.15-1.20x faster
/// than the cooperative kernels in every round; BENCHMARKS.md, "Session 17 (helper
/// moepp)"): both GEMMs run on the wide tile without clusters. Why (H100, Mixtral T = 1024
/// / 4096; BENCHMARKS.md, "Session 17 (helper moefp8)"): GEMM1 on clusters takes 2.5 % /
/// 14 % less time (ncu: 751 -> 732 us, 2.49 -> 2.14 ms), but GEMM2 on clusters is no
/// faster at T = 1024 and 10 % slower at T = 4096 (791 -> 874 us), and the whole layer,
/// timed in CUDA graphs right after the bf16 layer on a GPU held at its 700 W power cap,
/// measured within 3 % of the 1x1 kernels either way. Re-measured with the grouped
/// epilogue's per-tile scale loads (H100, BENCHMARKS.md, "Session 18 (helper moe8)"): at
/// T = 1024 ping-pong 805-809 us against 907-910 (GEMM1 on clusters, GEMM2 1x1) and 931-940
/// (`Sm90Cluster`); at T = 2048 / 4096 `Sm90Cluster` within 1 % / 2 % of the 1x1 kernels in
/// the same position of the run, the faster one changing with the round: `Auto` unchanged.
///
/// ```
/// use rcute_atom::Element;
/// use rcute_kernel::gemm_sm90::Sm90Schedule;
/// use rcute_ops::moe::{sm90_gemms, MoePath};
/// let (bf, e4m3) = (Element::BF16, Element::E4M3);
/// // Mixtral T = 1024 (top-2, 8 experts) on 132 SMs: 256 rows per expert, ping-pong.
/// let [g1, g2] = sm90_gemms(bf, bf, MoePath::Auto, 2048, 8, 4096, 14336, 132);
/// assert_eq!((g1.tile, g1.cluster, g1.schedule), ([128, 128, 64], [1, 1], Sm90Schedule::PingPong));
/// assert_eq!((g2.tile, g2.cluster, g2.schedule), ([128, 128, 64], [1, 1], Sm90Schedule::PingPong));
/// let [g1, g2] = sm90_gemms(e4m3, bf, MoePath::Auto, 2048, 8, 4096, 14336, 132);
/// assert_eq!((g1.tile, g1.ab, g1.cd, g2.tile), ([128, 128, 128], e4m3, bf, [128, 128, 128]));
/// // Forced onto the cooperative kernels: GEMM1 on clusters, GEMM2 narrow on clusters.
/// let [g1, g2] = sm90_gemms(bf, bf, MoePath::Sm90NarrowCluster, 2048, 8, 4096, 14336, 132);
/// assert_eq!((g1.tile, g1.cluster, g1.schedule), ([128, 256, 64], [2, 1], Sm90Schedule::Cooperative));
/// assert_eq!((g2.tile, g2.cluster), ([128, 128, 64], [2, 1]));
/// // T = 2048 (512 rows per expert): the FP8 layer on ping-pong, its walk in bands of 4.
/// let [g1, g2] = sm90_gemms(e4m3, bf, MoePath::Auto, 4096, 8, 4096, 14336, 132);
/// assert_eq!((g1.schedule, g1.walk_band, g2.walk_band), (Sm90Schedule::PingPong, 4, 4));
/// let [g1, g2] = sm90_gemms(e4m3, bf, MoePath::Sm90NarrowCluster, 2048, 8, 4096, 14336, 132);
/// assert_eq!((g1.tile, g1.cluster), ([128, 256, 128], [2, 1]));
/// assert_eq!((g2.tile, g2.cluster), ([128, 128, 128], [2, 1]));
/// // T = 4096: the cooperative kernels (bf16: GEMM1 on clusters, GEMM2 wide on clusters;
/// // FP8: both wide without clusters).
/// let [g1, g2] = sm90_gemms(bf, bf, MoePath::Auto, 8192, 8, 4096, 14336, 132);
/// assert_eq!((g1.tile, g1.cluster, g1.schedule), ([128, 256, 64], [2, 1], Sm90Schedule::Cooperative));
/// assert_eq!((g2.tile, g2.cluster), ([128, 256, 64], [2, 1]));
/// let [g1, g2] = sm90_gemms(e4m3, bf, MoePath::Auto, 8192, 8, 4096, 14336, 132);
/// assert_eq!((g1.tile, g1.cluster), ([128, 256, 128], [1, 1]));
/// assert_eq!((g2.tile, g2.cluster), ([128, 256, 128], [1, 1]));
/// // From 512 rows per expert of experts streamed from DRAM both layers' cooperative
/// // GEMMs walk their tiles dynamically (`sm90_dynamic`), the bf16 layer's from T = 2048;
/// // at T = 1024 its ping-pong GEMMs statically.
/// assert!(g1.dynamic_walk && g2.dynamic_walk);
/// let [g1, g2] = sm90_gemms(bf, bf, MoePath::Auto, 4096, 8, 4096, 14336, 132);
/// assert!(g1.dynamic_walk && g2.dynamic_walk);
/// let [g1, g2] = sm90_gemms(bf, bf, MoePath::Auto, 2048, 8, 4096, 14336, 132);
/// assert!(!g1.dynamic_walk && !g2.dynamic_walk);
/// ```
///
/// Where [`super::sm90_gather`] says ([`super::MoePath::Auto`] up to one row tile per
/// expert) the bf16 / f16 GEMM1 on 1x1 is the gathering one ([`GemmSm90Config::gather_a`])
/// of the same tile and schedule; [`with_gather`] forces either form on any path:
///
/// ```
/// use rcute_atom::Element;
/// use rcute_kernel::gemm_sm90::Sm90Schedule;
/// use rcute_ops::moe::{sm90_gemms, MoePath};
/// let bf = Element::BF16;
/// // DeepSeek-V2-Lite T = 1024 (96 rows per expert): ping-pong, GEMM1 gathering.
/// let [g1, g2] = sm90_gemms(bf, bf, MoePath::Auto, 6144, 64, 2048, 1408, 132);
/// assert_eq!((g1.schedule, g1.gather_a, g2.gather_a), (Sm90Schedule::PingPong, true, false));
/// // The FP8 layer's GEMM1 never gathers (it quantizes the gathered rows).
/// let [g1, _] = sm90_gemms(Element::E4M3, bf, MoePath::Auto, 6144, 64, 2048, 1408, 132);
/// assert!(!g1.gather_a);
/// // Forced paths keep the TMA-fed GEMM1.
/// let [g1, _] = sm90_gemms(bf, bf, MoePath::Sm90PingPong, 6144, 64, 2048, 1408, 132);
/// assert!(!g1.gather_a);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn sm90_gemms(
    ab: Element,
    out: Element,
    path: super::MoePath,
    entries: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    sms: u32,
) -> [GemmSm90Config; 2] {
    let mut gemms = sm90_rule_gemms(ab, out, path, entries, local, hidden, inter, sms);
    if gemm1_gathers(ab, path, gemms[0].cluster != [1, 1], entries, local) {
        gemms[0].gather_a = true;
    }
    let dynamic = super::sm90_dynamic(path, entries, local, w13_expert_bytes(ab, hidden, inter));
    with_dynamic(gemms, Some(dynamic))
}

/// GEMM1 (SwiGLU) and GEMM2 (scatter) of the bf16 / f16 SM90 layer on 64-row tiles
/// ([`super::MoeOptions::row_tile`], `moe:sm90pp64`): both ping-pong, GEMM1 in its TMA form.
pub(crate) fn rows64_gemms(ab: Element) -> [GemmSm90Config; 2] {
    [GroupedEpilogue::SwiGlu, GroupedEpilogue::Scatter].map(|ep| sm90_rows64_config(ab, ep))
}

/// Bytes of one expert's `w13` (`2 inter x hidden` weights of `ab`): what the rules on the
/// weights' size read ([`super::sm90_gemm1_cluster`], [`super::sm90_dynamic`]).
pub(crate) fn w13_expert_bytes(ab: Element, hidden: usize, inter: usize) -> usize {
    2 * inter * hidden * ab.bytes() as usize
}

/// Whether the rule ([`super::sm90_gather`] for `path` and `entries` routed rows over
/// `local` experts) makes GEMM1 of an SM90 layer of `ab` operands the gathering one
/// ([`GemmSm90Config::gather_a`]): 16-bit operands only (the FP8 layer gathers while it
/// quantizes), and a GEMM1 on 1x1 only (`gemm1_cluster` false: the rule keeps a clustered
/// GEMM1 as it is). The one decision of [`sm90_gemms`] and of
/// [`crate::Ops::run_fused_moe_sm90_with`] (a tuning table's SM90 entry, whose schedule
/// and tiles replace [`super::MoePath::Auto`]'s).
pub(crate) fn gemm1_gathers(
    ab: Element,
    path: super::MoePath,
    gemm1_cluster: bool,
    entries: usize,
    local: usize,
) -> bool {
    ab != Element::E4M3 && !gemm1_cluster && super::sm90_gather(path, entries, local)
}

/// `gemms` ([`sm90_gemms`]) with GEMM1's gathering form forced where `gather` is given
/// ([`super::MoeOptions::gather`]; `None`: as they are): `Some(true)` makes a bf16 / f16
/// GEMM1 the gathering one of the same tile and schedule, on 1x1 (a clustered GEMM1 loses
/// its cluster, and a dynamic walk: [`super::sm90_dynamic`]); `Some(false)` the TMA one.
/// e4m3 GEMMs stay as they are.
///
/// ```
/// use rcute_atom::Element;
/// use rcute_ops::moe::{sm90_gemms, with_gather, MoePath};
/// let bf = Element::BF16;
/// // Mixtral T = 4096: GEMM1 on 2x1 clusters; gathering, on 1x1.
/// let gemms = sm90_gemms(bf, bf, MoePath::Auto, 8192, 8, 4096, 14336, 132);
/// assert_eq!(with_gather(gemms.clone(), None), gemms);
/// let [g1, g2] = with_gather(gemms.clone(), Some(true));
/// assert_eq!((g1.gather_a, g1.cluster, g1.tile), (true, [1, 1], gemms[0].tile));
/// assert!(gemms[0].dynamic_walk && !g1.dynamic_walk);
/// assert_eq!(g2, gemms[1]);
/// // DeepSeek-V2-Lite T = 1024: Auto's GEMM1 gathers; the TMA form instead.
/// let gathering = sm90_gemms(bf, bf, MoePath::Auto, 6144, 64, 2048, 1408, 132);
/// assert!(gathering[0].gather_a);
/// assert!(!with_gather(gathering, Some(false))[0].gather_a);
/// // A forced SM90 path with GEMM1 gathering (`rcute bench moe --path sm90,gather`).
/// let [g1, _] = with_gather(sm90_gemms(bf, bf, MoePath::Sm90, 6144, 64, 2048, 1408, 132), Some(true));
/// assert!(g1.gather_a);
/// ```
pub fn with_gather(gemms: [GemmSm90Config; 2], gather: Option<bool>) -> [GemmSm90Config; 2] {
    let [mut g1, g2] = gemms;
    match gather {
        Some(true) if g1.ab != Element::E4M3 => {
            // The gathering GEMM1 walks statically (its producer is a whole warpgroup).
            g1.gather_a = true;
            g1.cluster = [1, 1];
            g1.dynamic_walk = false;
        }
        Some(false) => g1.gather_a = false,
        _ => {}
    }
    [g1, g2]
}

/// [`sm90_gemms`] before the rule's gathering GEMM1 ([`gemm1_gathers`]): the rules' GEMMs of
/// the path.
#[allow(clippy::too_many_arguments)]
fn sm90_rule_gemms(
    ab: Element,
    out: Element,
    path: super::MoePath,
    entries: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    sms: u32,
) -> [GemmSm90Config; 2] {
    let eps = [GroupedEpilogue::SwiGlu, GroupedEpilogue::Scatter];
    let fp8 = ab == Element::E4M3;
    let w13_bytes = w13_expert_bytes(ab, hidden, inter);
    let pingpong = if fp8 {
        super::sm90_fp8_pingpong(path, entries, local, w13_bytes)
    } else {
        super::sm90_pingpong(path, entries, local)
    };
    if pingpong {
        return eps.map(|ep| sm90_pingpong_config(ab, out, ep));
    }
    // The FP8 layer's Auto: the wide tile, no clusters (see above).
    let rules = !(fp8 && path == super::MoePath::Auto);
    let cluster1 = rules && super::sm90_gemm1_cluster(path, entries, local, w13_bytes);
    let tile1 = if fp8 {
        SM90_TILE
    } else {
        super::sm90_gemm1_tile(path, entries, local, inter, sms)
    };
    let tile2 = if rules {
        super::sm90_gemm2_tile(path, entries, local, hidden, sms)
    } else {
        SM90_TILE
    };
    let cluster2 = rules && super::sm90_gemm2_cluster(entries, local);
    let config = |ep, tile, cluster| sm90_grouped_config(ab, out, ep, sm90_operand_tile(ab, tile), cluster);
    [config(eps[0], tile1, cluster1), config(eps[1], tile2, cluster2)]
}

/// `gemms` ([`sm90_gemms`]) with their tile walk in bands of at most `band` row tiles of
/// one expert where `band` is given ([`super::MoeOptions::walk_band`]; `None`: as they
/// are).
///
/// ```
/// use rcute_atom::Element;
/// use rcute_ops::moe::{sm90_gemms, with_walk_band, MoePath};
/// let gemms = sm90_gemms(Element::BF16, Element::BF16, MoePath::Sm90PingPong, 8192, 8, 4096, 14336, 132);
/// assert_eq!(with_walk_band(gemms.clone(), None), gemms);
/// let [g1, g2] = with_walk_band(gemms, Some(4));
/// assert_eq!((g1.walk_band, g2.walk_band), (4, 4));
/// ```
pub fn with_walk_band(gemms: [GemmSm90Config; 2], band: Option<i64>) -> [GemmSm90Config; 2] {
    gemms.map(|mut g| {
        if let Some(b) = band {
            g.walk_band = b;
        }
        g
    })
}

/// `gemms` ([`sm90_gemms`]) with the dynamic persistent walk
/// ([`GemmSm90Config::dynamic_walk`]) forced where `dynamic` is given
/// ([`super::MoeOptions::dynamic`]; `None`: as they are, the rule's, [`super::sm90_dynamic`]):
/// on the GEMMs of the cooperative schedule that read A by TMA; ping-pong and gathering
/// GEMMs stay as they are.
///
/// ```
/// use rcute_atom::Element;
/// use rcute_ops::moe::{sm90_gemms, with_dynamic, MoePath};
/// let bf = Element::BF16;
/// // Mixtral T = 2048: both GEMMs cooperative on 2x1 clusters, walked dynamically by the
/// // rule; forced static.
/// let gemms = sm90_gemms(bf, bf, MoePath::Auto, 4096, 8, 4096, 14336, 132);
/// assert_eq!(with_dynamic(gemms.clone(), None), gemms);
/// let [g1, g2] = with_dynamic(gemms.clone(), Some(false));
/// assert!(!g1.dynamic_walk && !g2.dynamic_walk);
/// assert_eq!(with_dynamic([g1, g2], Some(true)), gemms);
/// // T = 1536 (384 rows per expert): cooperative, static by the rule; forced dynamic.
/// let [g1, g2] = with_dynamic(sm90_gemms(bf, bf, MoePath::Auto, 3072, 8, 4096, 14336, 132), Some(true));
/// assert!(g1.dynamic_walk && g2.dynamic_walk);
/// // T = 1024: ping-pong, unchanged.
/// let pp = sm90_gemms(bf, bf, MoePath::Auto, 2048, 8, 4096, 14336, 132);
/// assert_eq!(with_dynamic(pp.clone(), Some(true)), pp);
/// ```
pub fn with_dynamic(gemms: [GemmSm90Config; 2], dynamic: Option<bool>) -> [GemmSm90Config; 2] {
    gemms.map(|mut g| {
        if let Some(on) = dynamic {
            g.dynamic_walk = on && g.schedule == Sm90Schedule::Cooperative && !g.gather_a;
        }
        g
    })
}

/// `gemms` ([`sm90_gemms`]) with the padding skip
/// ([`GemmSm90Config::pad_skip`], [`super::MoeOptions::pad_skip`]) on the GEMMs of the
/// cooperative schedule without a cluster where `pad` is `Some(true)` (`None` and
/// `Some(false)`: off); ping-pong and clustered GEMMs stay as they are.
///
/// ```
/// use rcute_atom::Element;
/// use rcute_ops::moe::{sm90_gemms, with_pad_skip, MoePath};
/// let bf = Element::BF16;
/// // Mixtral T = 256: both GEMMs cooperative on 1x1.
/// let gemms = sm90_gemms(bf, bf, MoePath::Sm90, 512, 8, 4096, 14336, 132);
/// assert_eq!(with_pad_skip(gemms.clone(), None), gemms);
/// let [g1, g2] = with_pad_skip(gemms, Some(true));
/// assert!(g1.pad_skip && g2.pad_skip);
/// // Ping-pong and clustered GEMMs: unchanged.
/// let pp = sm90_gemms(bf, bf, MoePath::Sm90PingPong, 512, 8, 4096, 14336, 132);
/// assert_eq!(with_pad_skip(pp.clone(), Some(true)), pp);
/// let c = sm90_gemms(bf, bf, MoePath::Sm90Cluster, 512, 8, 4096, 14336, 132);
/// assert!(!with_pad_skip(c, Some(true))[0].pad_skip);
/// ```
pub fn with_pad_skip(gemms: [GemmSm90Config; 2], pad: Option<bool>) -> [GemmSm90Config; 2] {
    gemms.map(|g| padding_skipped(g, pad == Some(true)))
}

/// `g` with the padding skip where `on` and `g` can take it (the cooperative schedule
/// without a cluster).
fn padding_skipped(mut g: GemmSm90Config, on: bool) -> GemmSm90Config {
    g.pad_skip = on && g.schedule == Sm90Schedule::Cooperative && g.cluster == [1, 1];
    g
}

/// The grid of the SM90 grouped GEMM `cfg` of the layer on `sms` SMs: one CTA (cluster)
/// per tile where `per_tile` asks ([`super::MoeOptions::per_tile`]) and `cfg` runs the
/// cooperative schedule, else persistent CTAs, one per SM at most (a ping-pong CTA needs
/// two tiles to alternate its consumer warpgroups).
///
/// ```
/// use rcute_atom::Element;
/// use rcute_kernel::gemm_sm90::GroupedGrid;
/// use rcute_ops::moe::{sm90_gemms, sm90_grid, MoePath};
/// let bf = Element::BF16;
/// let [g1, _] = sm90_gemms(bf, bf, MoePath::Sm90Cluster, 8192, 8, 4096, 14336, 132);
/// assert_eq!(sm90_grid(&g1, None, 132), GroupedGrid::Persistent(132));
/// assert_eq!(sm90_grid(&g1, Some(true), 132), GroupedGrid::PerTile);
/// let [pp, _] = sm90_gemms(bf, bf, MoePath::Sm90PingPong, 8192, 8, 4096, 14336, 132);
/// assert_eq!(sm90_grid(&pp, Some(true), 132), GroupedGrid::Persistent(132));
/// ```
pub fn sm90_grid(cfg: &GemmSm90Config, per_tile: Option<bool>, sms: u32) -> GroupedGrid {
    match per_tile {
        Some(true) if cfg.schedule == Sm90Schedule::Cooperative => GroupedGrid::PerTile,
        _ => GroupedGrid::Persistent(sms),
    }
}

/// The kernels of the fused MoE layer that `spec` decides, for `el` operands: the SM80
/// family's two grouped GEMMs (GEMM1 gathers and applies SwiGLU, GEMM2 scatters); the
/// SM90 family's row gather (only that family runs it), GEMM1 (on 1x1 at both tiles: the
/// routed rows pick one per call, `sm90_gemm1_tile`), and GEMM2 on 1x1 and 2x1 clusters
/// (the routed rows pick one per call: `sm90_gemm2_cluster`); or with
/// [`MoeSm90Spec::PingPong`] the gather and the two ping-pong GEMMs; on a 1x1 GEMM1 also
/// its gathering forms (Auto's rule, [`super::sm90_gather`], holds inside an entry), and
/// the cooperative GEMMs' dynamic walks ([`super::sm90_dynamic`], likewise). The routing, the
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
        ConfigSpec::MoeSm90(MoeSm90Spec::PingPong) => {
            let [g1, g2] =
                [GroupedEpilogue::SwiGlu, GroupedEpilogue::Scatter].map(|ep| sm90_pingpong_config(el, el, ep));
            let gathering = sm90_gather_config(el, SM90_PINGPONG_TILE, Sm90Schedule::PingPong);
            vec![
                TunedKernel::MoeGather(el),
                TunedKernel::Sm90(g1),
                TunedKernel::Sm90(gathering),
                TunedKernel::Sm90(g2),
            ]
        }
        ConfigSpec::MoeSm90(MoeSm90Spec::PingPong64) => rows64_gemms(el)
            .map(TunedKernel::Sm90)
            .into_iter()
            .chain([TunedKernel::MoeGather(el)])
            .collect(),
        ConfigSpec::MoeSm90(s) => {
            let gemm2 = |cluster| sm90_gemm2(el, s.gemm2_tile(), cluster);
            let mut v = vec![
                TunedKernel::MoeGather(el),
                TunedKernel::Sm90(sm90_gemm1(el, SM90_TILE, s.gemm1_cluster())),
            ];
            if !s.gemm1_cluster() {
                // GEMM1 on 1x1 takes the narrow tile where the routed rows say, and
                // gathers its rows where `sm90_gather` says.
                v.push(TunedKernel::Sm90(sm90_gemm1(el, SM90_NARROW_TILE, false)));
                for tile in [SM90_TILE, SM90_NARROW_TILE] {
                    v.push(TunedKernel::Sm90(sm90_gather_config(
                        el,
                        tile,
                        Sm90Schedule::Cooperative,
                    )));
                }
            }
            v.extend([TunedKernel::Sm90(gemm2(false)), TunedKernel::Sm90(gemm2(true))]);
            // Auto's dynamic walk (`sm90_dynamic`, from four row tiles per expert: GEMM1's
            // wide TMA form) holds inside an entry too.
            let dynamic = |mut g: GemmSm90Config| {
                g.dynamic_walk = true;
                TunedKernel::Sm90(g)
            };
            v.extend([
                dynamic(sm90_gemm1(el, SM90_TILE, s.gemm1_cluster())),
                dynamic(gemm2(false)),
                dynamic(gemm2(true)),
            ]);
            // `moe:sm90pad`: the same kernels with the padding skip where they take it.
            if s.pad_skip() {
                for k in &mut v {
                    if let TunedKernel::Sm90(g) = k {
                        *g = padding_skipped(g.clone(), true);
                    }
                }
            }
            v
        }
        other => return Err(not_moe(other)),
    })
}

/// The error of a configuration of another op given to a MoE entry point.
pub(crate) fn not_moe(spec: &ConfigSpec) -> OpsError {
    OpsError::Shape(format!("MoE configuration: {spec} is not a MoE configuration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `moe:sm90pad` builds `moe:sm90`'s kernels, with the padding skip on exactly the
    /// cooperative 1x1 ones (so its tuning entries fingerprint other kernels).
    #[test]
    fn the_padding_form_is_the_wide_form_with_the_skip() {
        let el = Element::BF16;
        let wide = fused_moe_spec_kernels(el, &ConfigSpec::MoeSm90(MoeSm90Spec::Wide)).unwrap();
        let pad = fused_moe_spec_kernels(el, &ConfigSpec::MoeSm90(MoeSm90Spec::WidePad)).unwrap();
        assert_eq!(wide.len(), pad.len());
        let mut skipping = 0;
        for (w, p) in wide.iter().zip(&pad) {
            match (w, p) {
                (TunedKernel::Sm90(w), TunedKernel::Sm90(p)) => {
                    let can = w.schedule == Sm90Schedule::Cooperative && w.cluster == [1, 1];
                    assert!(!w.pad_skip);
                    assert_eq!(p.pad_skip, can, "{p:?}");
                    assert_eq!(
                        GemmSm90Config {
                            pad_skip: false,
                            ..p.clone()
                        },
                        *w
                    );
                    skipping += usize::from(can);
                }
                (TunedKernel::MoeGather(w), TunedKernel::MoeGather(p)) => assert_eq!(w, p),
                (w, p) => panic!("{w:?} against {p:?}"),
            }
        }
        assert!(skipping >= 4, "{skipping} kernels skip padding");
    }
}
