//! The SM90 MoE layer's kernel choice ([`rcute_ops::moe::sm90_gemms`]) for bf16 and FP8
//! operands at Mixtral and DeepSeek-V2-Lite shapes on 132 SMs, pinned: the table was
//! computed with the two layers' separate rule functions before they became one
//! (session 19), so a change of any entry is a change of which kernel a path runs.

use rcute_atom::Element;
use rcute_kernel::gemm_sm90::{GemmSm90Config, Sm90Grouped, Sm90Schedule};
use rcute_ops::moe::sm90_gemms;
use rcute_ops::moe::MoePath::{self, *};

/// A layer's experts, top-k, hidden and intermediate sizes.
type Model = (usize, usize, usize, usize);

/// Mixtral 8x7B: 8 experts, top-2, H = 4096, I = 14336.
const MIXTRAL: Model = (8, 2, 4096, 14336);
/// DeepSeek-V2-Lite: 64 experts, top-6, H = 2048, I = 1408.
const DEEPSEEK: Model = (64, 6, 2048, 1408);
const BF16: Element = Element::BF16;
const E4M3: Element = Element::E4M3;

/// `schedule ab>cd BMxBNxBK cMxN pipeP` of one configuration.
fn brief(c: &GemmSm90Config) -> String {
    let schedule = match c.schedule {
        Sm90Schedule::Cooperative => "coop",
        Sm90Schedule::PingPong => "pingpong",
        other => panic!("a grouped GEMM on {other:?}"),
    };
    let [bm, bn, bk] = c.tile;
    let [cm, cn] = c.cluster;
    let el = |e: Element| format!("{e:?}").to_lowercase();
    format!(
        "{schedule} {}>{} {bm}x{bn}x{bk} c{cm}x{cn} pipe{}",
        el(c.ab),
        el(c.cd),
        c.mma_pipe
    )
}

/// (model, tokens, path, operands, [GEMM1, GEMM2]).
#[rustfmt::skip]
const TABLE: &[(Model, usize, MoePath, Element, [&str; 2])] = &[
    (MIXTRAL, 256, Auto, BF16, ["pingpong bf16>bf16 128x128x64 c1x1 pipe1", "pingpong bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 256, Auto, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (MIXTRAL, 256, Sm90, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c1x1 pipe1"]),
    (MIXTRAL, 256, Sm90, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (MIXTRAL, 256, Sm90Narrow, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 256, Sm90Narrow, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x128x128 c1x1 pipe0"]),
    (MIXTRAL, 256, Sm90Cluster, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x256x64 c1x1 pipe1"]),
    (MIXTRAL, 256, Sm90Cluster, E4M3, ["coop e4m3>bf16 128x256x128 c2x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (MIXTRAL, 256, Sm90NarrowCluster, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 256, Sm90NarrowCluster, E4M3, ["coop e4m3>bf16 128x256x128 c2x1 pipe0", "coop e4m3>bf16 128x128x128 c1x1 pipe0"]),
    (MIXTRAL, 256, Sm90PingPong, BF16, ["pingpong bf16>bf16 128x128x64 c1x1 pipe1", "pingpong bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 256, Sm90PingPong, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (MIXTRAL, 1024, Auto, BF16, ["pingpong bf16>bf16 128x128x64 c1x1 pipe1", "pingpong bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 1024, Auto, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (MIXTRAL, 1024, Sm90, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (MIXTRAL, 1024, Sm90, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c2x1 pipe0"]),
    (MIXTRAL, 1024, Sm90Narrow, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x128x64 c2x1 pipe1"]),
    (MIXTRAL, 1024, Sm90Narrow, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x128x128 c2x1 pipe0"]),
    (MIXTRAL, 1024, Sm90Cluster, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (MIXTRAL, 1024, Sm90Cluster, E4M3, ["coop e4m3>bf16 128x256x128 c2x1 pipe0", "coop e4m3>bf16 128x256x128 c2x1 pipe0"]),
    (MIXTRAL, 1024, Sm90NarrowCluster, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x128x64 c2x1 pipe1"]),
    (MIXTRAL, 1024, Sm90NarrowCluster, E4M3, ["coop e4m3>bf16 128x256x128 c2x1 pipe0", "coop e4m3>bf16 128x128x128 c2x1 pipe0"]),
    (MIXTRAL, 1024, Sm90PingPong, BF16, ["pingpong bf16>bf16 128x128x64 c1x1 pipe1", "pingpong bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 1024, Sm90PingPong, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (MIXTRAL, 2048, Auto, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    // Session 19 (helper moeband): the FP8 layer's Auto on ping-pong up to 512 rows per
    // expert for experts larger than the L2 (Mixtral, not DeepSeek-V2-Lite).
    (MIXTRAL, 2048, Auto, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (MIXTRAL, 4096, Auto, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (MIXTRAL, 4096, Auto, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (MIXTRAL, 4096, Sm90, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (MIXTRAL, 4096, Sm90, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c2x1 pipe0"]),
    (MIXTRAL, 4096, Sm90Narrow, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x128x64 c2x1 pipe1"]),
    (MIXTRAL, 4096, Sm90Narrow, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x128x128 c2x1 pipe0"]),
    (MIXTRAL, 4096, Sm90Cluster, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (MIXTRAL, 4096, Sm90Cluster, E4M3, ["coop e4m3>bf16 128x256x128 c2x1 pipe0", "coop e4m3>bf16 128x256x128 c2x1 pipe0"]),
    (MIXTRAL, 4096, Sm90NarrowCluster, BF16, ["coop bf16>bf16 128x256x64 c2x1 pipe1", "coop bf16>bf16 128x128x64 c2x1 pipe1"]),
    (MIXTRAL, 4096, Sm90NarrowCluster, E4M3, ["coop e4m3>bf16 128x256x128 c2x1 pipe0", "coop e4m3>bf16 128x128x128 c2x1 pipe0"]),
    (MIXTRAL, 4096, Sm90PingPong, BF16, ["pingpong bf16>bf16 128x128x64 c1x1 pipe1", "pingpong bf16>bf16 128x128x64 c1x1 pipe1"]),
    (MIXTRAL, 4096, Sm90PingPong, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (DEEPSEEK, 256, Auto, BF16, ["coop bf16>bf16 128x128x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c1x1 pipe1"]),
    (DEEPSEEK, 256, Auto, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (DEEPSEEK, 256, Sm90, BF16, ["coop bf16>bf16 128x128x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c1x1 pipe1"]),
    (DEEPSEEK, 256, Sm90, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (DEEPSEEK, 256, Sm90Narrow, BF16, ["coop bf16>bf16 128x128x64 c1x1 pipe1", "coop bf16>bf16 128x128x64 c1x1 pipe1"]),
    (DEEPSEEK, 256, Sm90Narrow, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x128x128 c1x1 pipe0"]),
    (DEEPSEEK, 1024, Auto, BF16, ["pingpong bf16>bf16 128x128x64 c1x1 pipe1", "pingpong bf16>bf16 128x128x64 c1x1 pipe1"]),
    (DEEPSEEK, 1024, Auto, E4M3, ["pingpong e4m3>bf16 128x128x128 c1x1 pipe1", "pingpong e4m3>bf16 128x128x128 c1x1 pipe1"]),
    (DEEPSEEK, 1024, Sm90, BF16, ["coop bf16>bf16 128x128x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c1x1 pipe1"]),
    (DEEPSEEK, 1024, Sm90, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (DEEPSEEK, 1024, Sm90Narrow, BF16, ["coop bf16>bf16 128x128x64 c1x1 pipe1", "coop bf16>bf16 128x128x64 c1x1 pipe1"]),
    (DEEPSEEK, 1024, Sm90Narrow, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x128x128 c1x1 pipe0"]),
    (DEEPSEEK, 4096, Auto, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (DEEPSEEK, 4096, Auto, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c1x1 pipe0"]),
    (DEEPSEEK, 4096, Sm90, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x256x64 c2x1 pipe1"]),
    (DEEPSEEK, 4096, Sm90, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x256x128 c2x1 pipe0"]),
    (DEEPSEEK, 4096, Sm90Narrow, BF16, ["coop bf16>bf16 128x256x64 c1x1 pipe1", "coop bf16>bf16 128x128x64 c2x1 pipe1"]),
    (DEEPSEEK, 4096, Sm90Narrow, E4M3, ["coop e4m3>bf16 128x256x128 c1x1 pipe0", "coop e4m3>bf16 128x128x128 c2x1 pipe0"]),
];

#[test]
fn sm90_gemms_select_the_pinned_kernels() {
    for &((experts, topk, hidden, inter), tokens, path, ab, want) in TABLE {
        let out = Element::BF16;
        let got = sm90_gemms(ab, out, path, tokens * topk, experts, hidden, inter, 132);
        let case = format!("E = {experts} T = {tokens} {path:?} {ab:?}");
        assert_eq!(got.each_ref().map(brief), want, "{case}");
        assert_eq!(got[0].grouped, Some(Sm90Grouped::SwiGlu), "{case}");
        assert_eq!(got[1].grouped, Some(Sm90Grouped::Scatter), "{case}");
    }
}

/// The e4m3 ping-pong kernels walk in bands of 4 row tiles, the 16-bit ones of 16, the
/// cooperative ones of 16; whatever path picked them.
#[test]
fn walk_bands_of_the_selected_kernels() {
    for (ab, path, entries, band) in [
        (E4M3, Auto, 4096, 4),
        (E4M3, Sm90PingPong, 8192, 4),
        (E4M3, Auto, 8192, 16),
        (BF16, Auto, 2048, 16),
        (BF16, Sm90PingPong, 8192, 16),
    ] {
        let gemms = sm90_gemms(ab, Element::BF16, path, entries, 8, 4096, 14336, 132);
        assert_eq!(gemms.map(|g| g.walk_band), [band; 2], "{ab:?} {path:?} {entries}");
    }
}

#[test]
fn the_fp8_layer_keeps_its_f16_output() {
    let [g1, g2] = sm90_gemms(E4M3, Element::F16, Sm90Cluster, 8192, 8, 4096, 14336, 132);
    assert_eq!(brief(&g1), "coop e4m3>f16 128x256x128 c2x1 pipe0");
    assert_eq!(brief(&g2), "coop e4m3>f16 128x256x128 c2x1 pipe0");
    let [g1, _] = sm90_gemms(Element::F16, Element::F16, Auto, 2048, 8, 4096, 14336, 132);
    assert_eq!(brief(&g1), "pingpong f16>f16 128x128x64 c1x1 pipe1");
}

/// GEMM1 gathers its rows itself (bf16 / f16 only, 1x1 only) where `sm90_gather` says:
/// Auto up to one row tile per expert, the forced paths never; `MoeOptions::gather =
/// Some(true)` (`with_gather`) forces it on a forced SM90 path; the rest of the layer's
/// kernels stay those of the same path without it.
#[test]
fn gathering_gemm1_where_the_rule_says() {
    use rcute_ops::moe::with_gather;
    let gathers = |ab, path, (e, k, h, i): Model, tokens: usize, gather: Option<bool>| {
        let rules = sm90_gemms(ab, Element::BF16, path, tokens * k, e, h, i, 132);
        let gemms = with_gather(rules.clone(), gather);
        assert!(!gemms[1].gather_a, "GEMM2 never gathers");
        // the same kernels as the TMA form but for `gather_a`
        let tma = with_gather(gemms.clone(), Some(false));
        assert_eq!(gemms.each_ref().map(brief), tma.each_ref().map(brief));
        assert_eq!(gemms.each_ref().map(brief), rules.each_ref().map(brief));
        gemms[0].gather_a
    };
    for (model, tokens, path, gather, want) in [
        (DEEPSEEK, 1024, Auto, None, true),  // 96 rows per expert
        (DEEPSEEK, 2048, Auto, None, false), // 192
        (DEEPSEEK, 4096, Auto, None, false), // 384
        (MIXTRAL, 256, Auto, None, true),    // 64
        (MIXTRAL, 512, Auto, None, true),    // 128
        (MIXTRAL, 1024, Auto, None, false),  // 256
        (MIXTRAL, 1024, Sm90, Some(true), true),
        (MIXTRAL, 1024, Sm90PingPong, Some(true), true),
        (DEEPSEEK, 1024, Sm90PingPong, None, false),
        (DEEPSEEK, 1024, Sm90, None, false),
    ] {
        assert_eq!(
            gathers(BF16, path, model, tokens, gather),
            want,
            "{model:?} T = {tokens} {path:?} gather {gather:?}"
        );
    }
    assert!(
        !gathers(E4M3, Auto, DEEPSEEK, 1024, None),
        "the FP8 layer quantizes its gathered rows"
    );
    assert!(!gathers(E4M3, Sm90, DEEPSEEK, 1024, Some(true)));
}
