//! The MoE routing kernels: deterministic sources, typed errors for unsupported requests,
//! and every kernel compiles for sm_80 and sm_90a without spills or local memory, with the
//! warp-level instructions its design rests on.

use rcute_atom::Element;
use rcute_kernel::moe_routing::{align, align_multi, ep_dispatch, topk_align, topk_softmax, MoeRoutingError};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::Arch;

fn kernels() -> Vec<(String, String, Vec<&'static str>)> {
    let mut v = Vec::new();
    for e in [Element::F32, Element::BF16, Element::F16] {
        for experts in [8, 64, 128, 256] {
            let g = topk_softmax::generate(e, experts).unwrap();
            v.push((g.name, g.source, vec!["SHFL.BFLY", "MUFU.EX2", "REDUX"]));
        }
    }
    let g = align::generate();
    v.push((
        g.name,
        g.source,
        vec!["VOTE.ANY", "ATOMS", "SHFL.UP", "POPC", "BAR.SYNC"],
    ));
    let m = align_multi::generate();
    v.push((m.count.0, m.count.1, vec!["ATOMS", "BAR.SYNC"]));
    v.push((
        m.place.0,
        m.place.1,
        vec!["VOTE.ANY", "ATOMS", "SHFL.UP", "POPC", "BAR.SYNC"],
    ));
    for (e, experts) in [(Element::F32, 64), (Element::BF16, 8), (Element::F32, 256)] {
        let g = topk_align::generate(e, experts).unwrap();
        v.push((
            g.name,
            g.source,
            vec!["SHFL.BFLY", "MUFU.EX2", "REDUX", "VOTE.ANY", "ATOMS", "BAR.SYNC"],
        ));
    }
    let g = ep_dispatch::generate_pack();
    v.push((g.name, g.source, vec!["SHFL.UP", "BAR.SYNC"]));
    let g = ep_dispatch::generate_gather();
    v.push((g.name, g.source, vec!["LDG.E.128"]));
    for e in [Element::BF16, Element::F16] {
        let g = ep_dispatch::generate_combine(e).unwrap();
        v.push((g.name, g.source, vec!["LDG.E.128"]));
    }
    v
}

#[test]
fn sources_are_deterministic_and_folded() {
    assert_eq!(kernels(), kernels());
    for (name, src, _) in kernels() {
        for pat in ["+ 0)", "- 0)", "* 1)", ">> 0", "<< 0"] {
            assert!(!src.contains(pat), "{name}: unfolded {pat:?} in\n{src}");
        }
        if let Some(dir) = std::env::var_os("RCUTE_DUMP") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.cu")), &src).unwrap();
        }
    }
}

#[test]
fn unsupported_requests_are_typed_errors() {
    assert_eq!(
        topk_softmax::generate(Element::S8, 8).unwrap_err(),
        MoeRoutingError::Element(Element::S8)
    );
    assert!(matches!(
        topk_softmax::generate(Element::BF16, 257),
        Err(MoeRoutingError::Experts { experts: 257, .. })
    ));
    assert!(topk_softmax::generate(Element::BF16, 0).is_err());
    // Experts round up to the values each lane holds.
    assert_eq!(topk_softmax::generate(Element::F32, 65).unwrap().max_experts(), 128);
    let g = topk_softmax::generate(Element::BF16, 64).unwrap();
    let args = topk_softmax::TopkSoftmaxArgs {
        logits: 0,
        topk_ids: 0,
        topk_weights: 0,
        tokens: 5,
        experts: 64,
        topk: 6,
        renormalize: false,
    };
    assert!(g.check(&args).is_ok());
    for bad in [
        topk_softmax::TopkSoftmaxArgs { experts: 65, ..args },
        topk_softmax::TopkSoftmaxArgs { experts: 0, ..args },
        topk_softmax::TopkSoftmaxArgs { topk: 0, ..args },
        topk_softmax::TopkSoftmaxArgs { experts: 4, ..args },
        topk_softmax::TopkSoftmaxArgs { tokens: -1, ..args },
    ] {
        assert!(g.check(&bad).is_err(), "{bad:?}");
    }
    let g = topk_softmax::generate(Element::BF16, 256).unwrap();
    assert!(matches!(
        g.check(&topk_softmax::TopkSoftmaxArgs {
            experts: 256,
            topk: 33,
            ..args
        }),
        Err(MoeRoutingError::TopK { k: 33, experts: 256 })
    ));

    let a = align::generate();
    let args = align::MoeAlignArgs {
        topk_ids: 0,
        counts: 0,
        offsets: 0,
        sorted_ids: 0,
        block_expert: 0,
        total_rows: 0,
        tokens: 64,
        topk: 6,
        expert_offset: 0,
        local_experts: 64,
        block_m: 64,
        walk_counters: 0,
    };
    assert_eq!(a.check(&args).unwrap(), align::align_capacity(64, 6, 64, 64).unwrap());
    for bad in [
        align::MoeAlignArgs {
            local_experts: 0,
            ..args
        },
        align::MoeAlignArgs {
            local_experts: 257,
            ..args
        },
        align::MoeAlignArgs {
            expert_offset: -1,
            ..args
        },
        align::MoeAlignArgs { block_m: 0, ..args },
        align::MoeAlignArgs { topk: 0, ..args },
        align::MoeAlignArgs { tokens: -3, ..args },
        align::MoeAlignArgs {
            tokens: 1 << 28,
            topk: 8,
            ..args
        },
    ] {
        assert!(a.check(&bad).is_err(), "{bad:?}");
        assert!(a.args(&bad).is_err());
    }
}

/// `align_capacity` is the exact worst case: brute force over every distribution of `N`
/// local entries (N <= T * k) on small shapes.
/// The fused top-k + alignment checks both halves and that they describe one routing.
#[test]
fn fused_routing_arguments_are_checked() {
    use rcute_kernel::moe_routing::align::MoeAlignArgs;
    use rcute_kernel::moe_routing::topk_softmax::TopkSoftmaxArgs;
    let g = topk_align::generate(Element::F32, 64).unwrap();
    assert_eq!(g.name, "rc_moe_topk_align_f32_e64_l256");
    assert!(
        g.source.contains("int* topk_ids,"),
        "ids are read back: no const __restrict__"
    );
    let t = TopkSoftmaxArgs {
        logits: 256,
        topk_ids: 512,
        topk_weights: 768,
        tokens: 1,
        experts: 64,
        topk: 6,
        renormalize: false,
    };
    let a = MoeAlignArgs {
        topk_ids: 512,
        counts: 1024,
        offsets: 2048,
        sorted_ids: 4096,
        block_expert: 8192,
        total_rows: 16384,
        tokens: 1,
        topk: 6,
        expert_offset: 0,
        local_experts: 64,
        block_m: 16,
        walk_counters: 0,
    };
    assert!(g.args(&t, &a).is_ok());
    assert!(matches!(
        g.args(&t, &MoeAlignArgs { topk_ids: 4, ..a }),
        Err(MoeRoutingError::Mismatch(_))
    ));
    assert!(matches!(
        g.args(&t, &MoeAlignArgs { tokens: 2, ..a }),
        Err(MoeRoutingError::Mismatch(_))
    ));
    assert!(matches!(
        g.args(&TopkSoftmaxArgs { topk: 65, ..t }, &a),
        Err(MoeRoutingError::TopK { .. })
    ));
    assert!(matches!(
        g.args(&t, &MoeAlignArgs { block_m: 0, ..a }),
        Err(MoeRoutingError::BlockM(0))
    ));
}

#[test]
fn align_capacity_is_the_worst_case() {
    fn worst(n: usize, l: usize, bm: usize) -> usize {
        // The most blocks `n` entries over `l` experts can need (dynamic programming over experts).
        let mut best = vec![0usize; n + 1];
        for _ in 0..l {
            let prev = best.clone();
            for total in 0..=n {
                for c in 0..=total {
                    best[total] = best[total].max(prev[total - c] + c.div_ceil(bm));
                }
            }
        }
        (0..=n).map(|m| best[m]).max().unwrap_or(0)
    }
    for t in 0..6 {
        for k in 1..4 {
            for l in 1..6 {
                for bm in [1, 2, 3, 4, 16] {
                    let cap = align::align_capacity(t, k, l, bm).unwrap();
                    assert_eq!(cap.blocks, worst(t * k, l, bm), "T={t} k={k} L={l} bm={bm}");
                    assert_eq!(cap.rows, cap.blocks * bm);
                    assert_eq!(cap.experts, l);
                }
            }
        }
    }
}

#[test]
fn compiles_without_spills_or_local_memory() {
    let Some(tk) = toolkit_for_test() else { return };
    for (name, src, ops) in kernels() {
        for arch in [Arch::Sm80, Arch::Sm90a] {
            let ck = compile_clean(tk, &name, &src, arch);
            let registers = ck.resources.registers;
            assert!(registers <= 64, "{name} on {arch}: {registers} registers");
            ck.assert_opcodes(&ops, &[]);
        }
    }
}

/// The fused top-k + alignment keeps its ids in a shared array of 32 tokens x top-32: a
/// 33-token launch is a typed error.
#[test]
fn fused_routing_refuses_more_than_32_tokens() {
    use rcute_kernel::moe_routing::align::MoeAlignArgs;
    use rcute_kernel::moe_routing::topk_softmax::TopkSoftmaxArgs;
    let g = topk_align::generate(Element::BF16, 8).unwrap();
    let t = TopkSoftmaxArgs {
        logits: 256,
        topk_ids: 512,
        topk_weights: 768,
        tokens: topk_align::MAX_TOKENS as i32,
        experts: 8,
        topk: 2,
        renormalize: true,
    };
    let a = MoeAlignArgs {
        topk_ids: 512,
        counts: 1024,
        offsets: 2048,
        sorted_ids: 4096,
        block_expert: 8192,
        total_rows: 16384,
        tokens: t.tokens,
        topk: 2,
        expert_offset: 0,
        local_experts: 8,
        block_m: 16,
        walk_counters: 0,
    };
    assert!(g.args(&t, &a).is_ok());
    let more = topk_align::MAX_TOKENS as i32 + 1;
    assert!(matches!(
        g.args(
            &TopkSoftmaxArgs { tokens: more, ..t },
            &MoeAlignArgs { tokens: more, ..a }
        ),
        Err(MoeRoutingError::TooLarge(_))
    ));
}

/// The fused top-k + alignment triggers the next link right after the ids are stored and
/// the block has synchronized: no fence holds the trigger (its prelude reads the ids as
/// hints only), and the trigger precedes the weights and the alignment's body.
#[test]
fn fused_routing_triggers_without_a_fence() {
    let g = topk_align::generate(Element::F32, 64).unwrap();
    assert!(!g.source.contains("__threadfence"), "{}", g.source);
    let store = g.source.find("topk_ids[").expect("the ids are stored");
    let trigger = g.source.rfind("rc_launch_dependents()").expect("an early trigger");
    let weights = g.source.find("topk_weights[").expect("the weights are stored");
    let align = g
        .source
        .find("the alignment of the shared copy")
        .expect("the alignment");
    assert!(store < trigger && trigger < weights && weights < align);
}

/// The multi-CTA alignment's table and CTAs follow the entries, and its checks are the
/// single block's plus the table's size.
#[test]
fn multi_cta_alignment_sizes_and_checks() {
    assert_eq!(align_multi::ctas(0), 1);
    assert_eq!(align_multi::ctas(2048), 1);
    assert_eq!(align_multi::ctas(2049), 2);
    assert_eq!(align_multi::ctas(1 << 30), align_multi::MAX_CTAS);
    assert_eq!(align_multi::table_bytes(6144, 64), 3 * 64 * 4);
    let g = align_multi::generate();
    let a = align::MoeAlignArgs {
        topk_ids: 1,
        counts: 2,
        offsets: 3,
        sorted_ids: 4,
        block_expert: 5,
        total_rows: 6,
        tokens: 1024,
        topk: 6,
        expert_offset: 0,
        local_experts: 64,
        block_m: 128,
        walk_counters: 0,
    };
    let table = align_multi::table_bytes(6144, 64);
    assert_eq!(
        g.check(&a, table).unwrap(),
        align::align_capacity(1024, 6, 64, 128).unwrap()
    );
    assert_eq!(g.launch_config(&a).grid.x, 3);
    assert!(matches!(g.check(&a, table - 4), Err(MoeRoutingError::TooLarge(_))));
    assert!(matches!(
        g.place_args(&align::MoeAlignArgs { block_m: 0, ..a }, 7, table),
        Err(MoeRoutingError::BlockM(0))
    ));
    assert!(g.count_args(&a, 7, table).is_ok());
    // the place kernel takes the ids, the table and the single block's parameters
    assert!(g.place.1.contains("int* __restrict__ table"));
    assert!(g.place.1.contains("if (blockIdx.x == 0)"));
}
