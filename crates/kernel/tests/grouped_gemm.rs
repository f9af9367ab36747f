//! The grouped (MoE) GEMM kernels and the finalize: deterministic, folded sources named
//! after their configuration, typed errors for configurations and arguments they cannot
//! take, and every kernel compiles for sm_80 and sm_90a without spills or local memory,
//! with `mma.sync` (HMMA), `cp.async` (LDGSTS) and `ldmatrix` (LDSM) in its SASS.

use rcute_atom::Element;
use rcute_kernel::grouped_gemm::finalize::{self, MoeFinalizeArgs};
use rcute_kernel::grouped_gemm::prepare::{self, MoePairing};
use rcute_kernel::grouped_gemm::route::RouteLogits;
use rcute_kernel::grouped_gemm::{
    generate, GroupedA, GroupedEpilogue, GroupedGemmArgs, GroupedGemmConfig, GroupedGemmError,
};
use rcute_kernel::testing::{assert_none_in, compile_clean, toolkit_for_test};
use rcute_kernel::Arch;

fn configs() -> Vec<GroupedGemmConfig> {
    let mut v = Vec::new();
    for e in [Element::BF16, Element::F16] {
        v.push(GroupedGemmConfig::new(e, GroupedA::Gathered, GroupedEpilogue::SwiGlu));
        v.push(GroupedGemmConfig::new(e, GroupedA::Rows, GroupedEpilogue::Scatter));
        v.push(GroupedGemmConfig::new(e, GroupedA::Gathered, GroupedEpilogue::Scatter));
    }
    v.push(
        GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu)
            .with_tile([16, 128, 64], [1, 4]),
    );
    v.push(
        GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
            .with_tile([16, 128, 64], [1, 4]),
    );
    for (a, ep) in [
        (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (GroupedA::Rows, GroupedEpilogue::Scatter),
    ] {
        v.push(GroupedGemmConfig::new(Element::BF16, a, ep).with_tile([128, 128, 32], [2, 2]));
        // The decode tiles with deep pipelines (the MoE space's `sN` candidates): 8 stages
        // and the most that fit.
        for tile in [[16, 128, 64], [32, 128, 64]] {
            let c = GroupedGemmConfig::new(Element::BF16, a, ep).with_tile(tile, [1, 4]);
            let most = c.max_stages();
            assert!(most > 8, "{tile:?}: {most} stages fit");
            v.push(c.clone().with_stages(Some(8)));
            v.push(c.with_stages(Some(most)));
        }
    }
    // GEMM1 routing its decode batch itself (f32 logits of 64 experts, bf16 of 8 with `l2`)
    for (logits, experts, l2) in [(Element::F32, 64, false), (Element::BF16, 8, true)] {
        v.push(
            GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu)
                .with_tile([16, 128, 64], [1, 4])
                .with_stages(Some(8))
                .with_b_l2_prefetch(l2)
                .with_route(Some(RouteLogits::new(logits, experts).unwrap())),
        );
    }
    // with the weights' L2 prefetch size (`l2`)
    for (a, ep) in [
        (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (GroupedA::Rows, GroupedEpilogue::Scatter),
    ] {
        v.push(
            GroupedGemmConfig::new(Element::BF16, a, ep)
                .with_tile([16, 128, 64], [1, 4])
                .with_stages(Some(8))
                .with_b_l2_prefetch(true),
        );
    }
    // the padding-row skip (`padskip`) on the decode tiles, and on a self-routing GEMM1
    for (a, ep) in [
        (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (GroupedA::Rows, GroupedEpilogue::Scatter),
    ] {
        for (tile, stages) in [([32, 128, 64], None), ([16, 128, 64], Some(8))] {
            v.push(
                GroupedGemmConfig::new(Element::BF16, a, ep)
                    .with_tile(tile, [1, 4])
                    .with_stages(stages)
                    .with_skip_padding(true),
            );
        }
    }
    v.push(
        GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu)
            .with_tile([16, 128, 64], [1, 4])
            .with_stages(Some(8))
            .with_route(Some(RouteLogits::new(Element::F32, 64).unwrap()))
            .with_skip_padding(true),
    );
    // GEMM2 with stream-K (the decode layers' `stream` configurations)
    for (tile, stages) in [([16, 128, 64], None), ([16, 128, 64], Some(8)), ([32, 128, 64], None)] {
        v.push(
            GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
                .with_tile(tile, [1, 4])
                .with_stages(stages)
                .with_stream_k(true),
        );
    }
    v
}

/// The register-streamed decode form (`moe:...,reg`): both GEMMs, each row tile size,
/// rings and the rotated K order.
fn streamed_configs() -> Vec<GroupedGemmConfig> {
    let mut v = Vec::new();
    for (e, a, ep) in [
        (Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter),
        (Element::F16, GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (Element::F16, GroupedA::Rows, GroupedEpilogue::Scatter),
    ] {
        for (bm, warps, ck, ring, rot) in [
            (16, 8, 32, 4, false),
            (16, 4, 32, 8, true),
            (32, 8, 128, 2, false),
            (8, 8, 64, 3, true),
            (16, 8, 256, 2, false),
        ] {
            let c = GroupedGemmConfig::new(e, a, ep).with_streamed(bm, warps, ck, ring, rot);
            v.push(c.clone().with_prepared(true));
            v.push(c);
        }
    }
    v
}

fn kernels() -> Vec<(String, String, Vec<&'static str>)> {
    let mut v: Vec<_> = configs()
        .iter()
        .map(|c| {
            let g = generate(c).unwrap();
            (g.name, g.source, vec!["HMMA", "LDGSTS", "LDSM"])
        })
        .collect();
    for c in streamed_configs() {
        let g = generate(&c).unwrap();
        v.push((g.name, g.source, vec!["HMMA", "LDG.E.128"]));
    }
    for e in [Element::BF16, Element::F16] {
        let g = finalize::generate(e).unwrap();
        v.push((g.name, g.source, vec!["LDG.E.128"]));
        for pairing in [MoePairing::SwiGlu, MoePairing::Rows] {
            let g = prepare::generate(e, pairing).unwrap();
            v.push((g.name, g.source, vec!["LDG.E.128", "STG.E.128"]));
        }
    }
    v
}

#[test]
fn sources_are_deterministic_named_and_folded() {
    assert_eq!(kernels(), kernels());
    let names: Vec<String> = kernels().into_iter().map(|k| k.0).collect();
    assert!(names.contains(&"rc_moe_grouped_sm80_bf16_gather_swiglu_64x128x32_s4_w2x2".to_string()));
    assert!(names.contains(&"rc_moe_grouped_sm80_f16_rows_scatter_64x128x32_s4_w2x2".to_string()));
    assert!(names.contains(&"rc_moe_finalize_bf16".to_string()));
    assert!(names.contains(&"rc_moe_grouped_reg_bf16_rows_scatter_16x64x32_r8_w4_rot".to_string()));
    assert!(names.contains(&"rc_moe_grouped_reg_f16_gather_swiglu_16x128x256_r2_w8_prep".to_string()));
    assert!(names.contains(&"rc_moe_prepare_scatter_bf16".to_string()));
    for (name, src, _) in kernels() {
        for pat in ["+ 0)", "- 0)", "* 1)", ">> 0", "<< 0"] {
            assert!(!src.contains(pat), "{name}: unfolded {pat:?} in\n{src}");
        }
        if let Some(dir) = std::env::var_os("RCUTE_DUMP") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.cu")), &src).unwrap();
        }
    }
}

/// Stream-K exists for the scatter epilogue on padded rows only, and needs two slabs and a
/// grid; its grid is the CTAs asked for, each prefetching its share of the budget.
#[test]
fn stream_k_configurations_and_arguments() {
    for (a, ep) in [
        (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
        (GroupedA::Gathered, GroupedEpilogue::Scatter),
    ] {
        let c = GroupedGemmConfig::new(Element::BF16, a, ep).with_tile([16, 128, 64], [1, 4]);
        assert!(matches!(
            generate(&c.with_stream_k(true)),
            Err(GroupedGemmError::Config(_))
        ));
    }
    let c = GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
        .with_tile([16, 128, 64], [1, 4])
        .with_stream_k(true);
    let g = generate(&c).unwrap();
    assert_eq!(
        g.name,
        "rc_moe_grouped_sm80_bf16_rows_scatter_16x128x64_s4_w1x4_streamk"
    );
    assert!(g.source.contains("int slabs"));
    // the weights' copies carry the L2 prefetch size only where the configuration says `l2`
    assert!(!g.source.contains("L2::256B"));
    let on = generate(&c.clone().with_b_l2_prefetch(true)).unwrap();
    assert_eq!(
        on.name,
        "rc_moe_grouped_sm80_bf16_rows_scatter_16x128x64_s4_w1x4_streamk_l2pf"
    );
    assert!(on.source.contains("cp.async.cg.shared.global.L2::256B"));
    let ok = GroupedGemmArgs {
        a: 256,
        b: 256,
        d: 256,
        sorted_ids: 256,
        block_expert: 256,
        total_rows: 256,
        m: 96,
        n: 2048,
        k: 1408,
        lda: 1408,
        ldb: 1408,
        ldd: 2048,
        expert_stride: 2048 * 1408,
        entries: 6,
        topk: 6,
        splits: 3,
        split_stride: 6 * 2048,
        stream_ctas: 132,
        experts: 64,
        prefetch_bytes: 24 << 20,
        ..Default::default()
    };
    g.check(&ok).unwrap();
    assert_eq!(g.launch_config(&ok).grid, rcute_kernel::Dim3::new(132, 1, 1));
    // 24 MiB over 132 CTAs of 16 KiB k-tiles: 11 each (the first segment's, on the device)
    assert_eq!(g.prefetch_k_tiles(&ok), 11);
    for bad in [
        GroupedGemmArgs { splits: 1, ..ok },
        GroupedGemmArgs { stream_ctas: 0, ..ok },
        GroupedGemmArgs {
            stream_ctas: 70000,
            ..ok
        },
    ] {
        assert!(matches!(g.check(&bad), Err(GroupedGemmError::Args(_))), "{bad:?}");
    }
}

#[test]
fn bad_configurations_and_arguments_are_typed_errors() {
    let bad_elem = GroupedGemmConfig::new(Element::F32, GroupedA::Rows, GroupedEpilogue::Scatter);
    assert!(matches!(generate(&bad_elem), Err(GroupedGemmError::Config(_))));
    // 2x4 warps on BN = 64: two n-atoms per warp, gate and up in different threads.
    let narrow = GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu)
        .with_tile([64, 64, 32], [2, 4]);
    assert!(matches!(generate(&narrow), Err(GroupedGemmError::Config(_))));
    // The same tile without SwiGLU is fine.
    let scatter = GroupedGemmConfig {
        epilogue: GroupedEpilogue::Scatter,
        ..narrow
    };
    assert!(generate(&scatter).is_ok());
    // The streamed form: tile BMx(16 W)x(32 parts), BM 8 / 16 / 32, at most 16 parts in
    // flight, no stream-K or L2 size; K rotation only with it.
    let reg = GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
        .with_streamed(16, 8, 128, 2, false);
    assert!(generate(&reg).is_ok());
    let rotated_cp_async = GroupedGemmConfig {
        k_rotate: true,
        ..GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
    };
    for bad in [
        reg.clone().with_tile([16, 64, 128], [1, 8]),
        reg.clone().with_tile([24, 128, 128], [1, 8]),
        reg.clone().with_tile([16, 128, 96], [1, 8]),
        reg.clone().with_stages(Some(8)),
        reg.clone().with_stream_k(true),
        reg.clone().with_b_l2_prefetch(true),
        rotated_cp_async,
        GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter).with_prepared(true),
        // the shared ring: the streamed form only, at most 227 KB (16 warps x 16 parts)
        GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter).with_shared_ring(true),
        GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
            .with_streamed(16, 16, 256, 2, false)
            .with_shared_ring(true),
    ] {
        assert!(matches!(generate(&bad), Err(GroupedGemmError::Config(_))), "{bad:?}");
    }
    assert!(matches!(
        generate(
            &GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
                .with_tile([64, 128, 24], [2, 2])
        ),
        Err(GroupedGemmError::Plan(_))
    ));

    let g = generate(&GroupedGemmConfig::new(
        Element::BF16,
        GroupedA::Gathered,
        GroupedEpilogue::SwiGlu,
    ))
    .unwrap();
    let ok = GroupedGemmArgs {
        a: 0x1000,
        b: 0x2000,
        d: 0x3000,
        sorted_ids: 0x4000,
        block_expert: 0x5000,
        total_rows: 0x6000,
        weights: 0,
        m: 128,
        n: 96,
        k: 40,
        lda: 40,
        ldb: 40,
        ldd: 96,
        expert_stride: 192 * 40,
        entries: 10,
        topk: 2,
        splits: 1,
        split_stride: 0,
        up_first: false,
        ..Default::default()
    };
    assert!(g.check(&ok).is_ok());
    assert_eq!(g.b_rows(96), 192);
    assert_eq!(g.launch_config(&ok).grid, rcute_kernel::Dim3::new(2, 2, 1));
    for bad in [
        GroupedGemmArgs { m: 100, ..ok },
        GroupedGemmArgs { m: 0, ..ok },
        GroupedGemmArgs {
            k: 36,
            lda: 36,
            ldb: 36,
            ..ok
        },
        GroupedGemmArgs { n: 95, ..ok },
        GroupedGemmArgs { lda: 32, ..ok },
        GroupedGemmArgs { a: 0x1008, ..ok },
        GroupedGemmArgs { sorted_ids: 0, ..ok },
        GroupedGemmArgs { entries: 0, ..ok },
        GroupedGemmArgs { expert_stride: 7, ..ok },
        GroupedGemmArgs {
            splits: 2,
            split_stride: 960,
            ..ok
        },
        // a prefetch without the local experts that bound it
        GroupedGemmArgs {
            prefetch_bytes: 1 << 20,
            experts: 0,
            ..ok
        },
    ] {
        assert!(matches!(g.check(&bad), Err(GroupedGemmError::Args(_))), "{bad:?}");
    }
    // The prefetch: 2 x 2 CTAs, B k-tiles of 128 rows x 32 (8 KiB), K = 40 in 2 k-tiles.
    let pf = GroupedGemmArgs {
        prefetch_bytes: 32 << 10,
        experts: 4,
        ..ok
    };
    assert!(g.check(&pf).is_ok());
    assert_eq!(g.prefetch_k_tiles(&pf), 1);
    assert_eq!(
        g.prefetch_k_tiles(&GroupedGemmArgs {
            prefetch_bytes: 1 << 30,
            ..pf
        }),
        2
    );
    // experts from the top-k ids: at most 32 entries (one warp), else none
    let ids = GroupedGemmArgs {
        prefetch_ids: 0x7000,
        ..pf
    };
    assert_eq!(g.prefetch_k_tiles(&ids), 1);
    assert_eq!(g.prefetch_k_tiles(&GroupedGemmArgs { entries: 33, ..ids }), 0);

    assert!(finalize::generate(Element::F32).is_err());
    let f = finalize::generate(Element::BF16).unwrap();
    let fa = MoeFinalizeArgs {
        out: 0x1000,
        topk_ids: 0x2000,
        y: 0x3000,
        tokens: 3,
        topk: 2,
        hidden: 64,
        expert_offset: 0,
        local_experts: 8,
        splits: 1,
        split_stride: 0,
    };
    assert!(f.check(&fa).is_ok());
    for bad in [
        MoeFinalizeArgs { hidden: 60, ..fa },
        MoeFinalizeArgs { tokens: 0, ..fa },
        MoeFinalizeArgs { y: 0x3008, ..fa },
        MoeFinalizeArgs { local_experts: 0, ..fa },
        MoeFinalizeArgs { splits: 0, ..fa },
        MoeFinalizeArgs {
            splits: 2,
            split_stride: 64,
            ..fa
        },
    ] {
        assert!(f.check(&bad).is_err(), "{bad:?}");
    }
}

/// The streamed kernels with the weights' shared ring (`_sring`): every prepared streamed
/// test configuration, bf16, for sm_80 and sm_90a: no spills or local memory; the weight
/// goes by `cp.async` (LDGSTS, one LDGDEPBAR per chunk) into shared memory and comes back
/// by `LDS.128` after a counted wait (`DEPBAR.LE`), with no streaming `LDG` left (only
/// `x`'s L1-cached loads); fewer registers than the ring of registers; the smem is the
/// ring's.
#[test]
fn shared_ring_streamed_kernels_wait_by_count_without_spills() {
    let Some(tk) = toolkit_for_test() else { return };
    for base in streamed_configs() {
        if !base.prepared || base.element != Element::BF16 {
            continue;
        }
        let g = generate(&base.clone().with_shared_ring(true)).unwrap();
        assert!(g.name.ends_with("_prep_sring"), "{}", g.name);
        let [bm, bn, bk] = base.tile;
        let ring = base.stages.unwrap() as u32;
        assert_eq!(
            g.smem_bytes,
            ring * (bk as u32 / 32) * 2 * 16 * g.threads,
            "{} ({bm}x{bn})",
            g.name
        );
        for arch in [Arch::Sm80, Arch::Sm90a] {
            let ck = compile_clean(tk, &g.name, &g.source, arch);
            let reg_ring = generate(&base).unwrap();
            let reg_ring = compile_clean(tk, &reg_ring.name, &reg_ring.source, arch)
                .resources
                .registers;
            let shared = ck.resources.registers;
            assert!(
                shared < reg_ring,
                "{} on {arch}: {shared} registers, the register ring {reg_ring}",
                g.name
            );
            let has = [
                "LDGSTS.E.BYPASS.128",
                "LDGDEPBAR",
                "DEPBAR.LE",
                "LDS.128",
                "HMMA",
                "LDG.E.128.CONSTANT",
            ];
            // no streaming LDG
            ck.assert_opcodes(&has, &["LDG.E.NA.128"]);
        }
    }
}

#[test]
fn compiles_without_spills_or_local_memory() {
    let Some(tk) = toolkit_for_test() else { return };
    for (name, src, ops) in kernels() {
        for arch in [Arch::Sm80, Arch::Sm90a] {
            compile_clean(tk, &name, &src, arch).assert_opcodes(&ops, &[]);
        }
    }
}

/// Every SM80 grouped kernel prefetches its weight tiles before the grid-dependency wait
/// (when the launch asks for it: `prefetch_k_tiles > 0`), and does nothing else there: in
/// the source the prefetch precedes `rc_grid_dependency_wait()`; in the sm_90a SASS the
/// L2 prefetch precedes the wait (`ACQBULK`), and the only other global accesses before it
/// are the three L1-bypassing loads of the routing (a top-k id, or `total_rows` and
/// `block_expert`), no store or copy.
#[test]
fn weights_are_prefetched_before_the_grid_dependency_wait() {
    // the streamed kernels on the prepared weight: each warp's block run, before the wait
    for cfg in streamed_configs() {
        let g = generate(&cfg).unwrap();
        let body = &g.source[g.source.find(&format!("void {}(", g.name)).expect("kernel")..];
        let wait = body.find("rc_grid_dependency_wait();").expect("wait");
        assert_eq!(
            body[..wait].contains("rc_prefetch_l2(run + at)"),
            cfg.prepared,
            "{}: prefetch before the wait only on the prepared weight",
            g.name
        );
        assert!(
            !body[..wait].contains("__ldg("),
            "{}: L1-cached loads before the wait",
            g.name
        );
    }
    let tk = toolkit_for_test();
    let cfgs = configs();
    for (i, cfg) in cfgs.iter().enumerate() {
        let g = generate(cfg).unwrap();
        let src = &g.source;
        let body = &src[src.find(&format!("void {}(", g.name)).expect("kernel")..];
        let prefetch = body.find("rc_prefetch_l2(").expect("prefetch in the kernel");
        let wait = body.find("rc_grid_dependency_wait();").expect("wait");
        assert!(prefetch < wait, "{}: the prefetch follows the wait", g.name);
        assert!(body[..wait].contains("if (prefetch_k_tiles > 0) {"), "{}", g.name);
        assert!(
            !body[..wait].contains("__ldg("),
            "{}: L1-cached loads before the wait",
            g.name
        );
        // SASS: the first and the deepest configurations are enough (NVRTC time).
        if i != 0 && i + 1 != cfgs.len() {
            continue;
        }
        let Some(ck) = tk.map(|tk| compile_clean(tk, &g.name, src, Arch::Sm90a)) else {
            continue;
        };
        let Some(head) = ck.before_wait_with_l2_prefetch() else {
            continue;
        };
        let loads: Vec<&str> = head
            .iter()
            .filter(|i| i.base_opcode() == "LDG")
            .map(|i| i.opcode.as_str())
            .collect();
        assert!(loads.len() <= 3, "{}: {loads:?} before the wait", g.name);
        // `__ldcg`: the loads bypass the L1 (.STRONG.GPU), so no line they bring is read later
        assert!(loads.iter().all(|o| o.contains("STRONG.GPU")), "{}: {loads:?}", g.name);
        let bad = ["STG", "LDGSTS", "ATOMG", "RED", "UBLKCP"];
        assert_none_in(head, &bad, &format!("{}: before the wait", g.name));
    }
}

/// The padding-row skip (`GroupedGemmConfig::skip_padding`): GEMM1 stores a row only where
/// the alignment routed an entry to it, GEMM2 loads only those rows (the others zero-fill),
/// a self-routing GEMM1 stores every row (its own CTA 0 writes `sorted_ids`), and the rest
/// of each kernel is the kernel without it; not with stream-K or the streamed form.
#[test]
fn padding_skip_guards_stores_and_loads() {
    let tile = |a, ep| {
        GroupedGemmConfig::new(Element::BF16, a, ep)
            .with_tile([32, 128, 64], [1, 4])
            .with_stages(Some(4))
    };
    let g1 = tile(GroupedA::Gathered, GroupedEpilogue::SwiGlu);
    let g2 = tile(GroupedA::Rows, GroupedEpilogue::Scatter);
    let (base1, skip1) = (
        generate(&g1).unwrap(),
        generate(&g1.clone().with_skip_padding(true)).unwrap(),
    );
    let (base2, skip2) = (
        generate(&g2).unwrap(),
        generate(&g2.clone().with_skip_padding(true)).unwrap(),
    );
    assert_eq!(skip1.name, format!("{}_ps", base1.name));
    assert_eq!(skip2.name, format!("{}_ps", base2.name));
    let store = "if (m < M && n < N) {";
    let guarded = "if (m < M && n < N && __ldg(sorted_ids + m) < entries) {";
    assert!(base1.source.contains(store) && !base1.source.contains(guarded));
    assert_eq!(
        skip1.source.replace(&skip1.name, &base1.name),
        base1.source.replace(store, guarded),
        "GEMM1: only the store guard differs"
    );
    let load = "a_pred_mn |= (m0 + a_mn + p * 16 < M ? 1u : 0u) << p;";
    let live =
        "a_pred_mn |= (m0 + a_mn + p * 16 < M && __ldg(sorted_ids + m0 + a_mn + p * 16) < entries ? 1u : 0u) << p;";
    assert!(base2.source.contains(load));
    assert_eq!(
        skip2.source.replace(&skip2.name, &base2.name),
        base2.source.replace(load, live),
        "GEMM2: only A's row predicate differs"
    );
    // a self-routing GEMM1 keeps its stores
    let routed = g1.clone().with_route(Some(RouteLogits::new(Element::F32, 64).unwrap()));
    let (r, rs) = (
        generate(&routed).unwrap(),
        generate(&routed.with_skip_padding(true)).unwrap(),
    );
    assert_eq!(rs.source.replace(&rs.name, &r.name), r.source);
    for bad in [
        g2.clone().with_stream_k(true).with_skip_padding(true),
        GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
            .with_streamed(16, 8, 128, 2, false)
            .with_skip_padding(true),
    ] {
        assert!(matches!(generate(&bad), Err(GroupedGemmError::Config(_))), "{bad:?}");
    }
}
