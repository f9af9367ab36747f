//! The SM90 grouped (MoE) GEMMs of the Hopper generator and the row gather in front of
//! GEMM1: names after their configuration, deterministic sources, typed errors for
//! configurations and arguments they cannot take, and every kernel compiles for sm_90a
//! without spills or local memory, with `wgmma` (HGMMA) and TMA loads (UTMALDG) in its SASS.

use rcute_atom::Element;
use rcute_kernel::gemm_sm90::{
    generate, GemmSm90Config, Sm90Grouped, Sm90GroupedArgs, Sm90Schedule, MAX_WALK_BAND, WALK_BAND,
};
use rcute_kernel::grouped_gemm::gather::{self, MoeGatherArgs};
use rcute_kernel::grouped_gemm::quant::{self, MoeQuantArgs, QuantSource};
use rcute_kernel::grouped_gemm::{
    sm90_cluster_config, sm90_config, sm90_fp8_config, sm90_gather_config, sm90_grouped_config, sm90_pingpong_config,
    sm90_rows64_config, GroupedEpilogue, SM90_FP8_NARROW_TILE, SM90_FP8_TILE, SM90_NARROW_TILE, SM90_PINGPONG_TILE,
    SM90_TILE,
};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::Arch;

fn configs() -> Vec<GemmSm90Config> {
    let mut v = Vec::new();
    for e in [Element::BF16, Element::F16] {
        for ep in [GroupedEpilogue::SwiGlu, GroupedEpilogue::Scatter] {
            v.push(sm90_config(e, ep, SM90_TILE));
        }
    }
    for ep in [GroupedEpilogue::SwiGlu, GroupedEpilogue::Scatter] {
        v.push(sm90_config(Element::BF16, ep, [128, 128, 64]));
        v.push(sm90_fp8_config(Element::BF16, ep));
        v.push(sm90_cluster_config(Element::BF16, ep, SM90_TILE));
        v.push(sm90_cluster_config(Element::BF16, ep, [128, 128, 64]));
        for tile in [SM90_FP8_TILE, SM90_FP8_NARROW_TILE] {
            v.push(sm90_grouped_config(Element::E4M3, Element::BF16, ep, tile, true));
        }
        v.push(sm90_grouped_config(
            Element::E4M3,
            Element::BF16,
            ep,
            SM90_FP8_NARROW_TILE,
            false,
        ));
        v.push(sm90_pingpong_config(Element::BF16, Element::BF16, ep));
        v.push(sm90_pingpong_config(Element::E4M3, Element::BF16, ep));
        v.push(sm90_rows64_config(Element::BF16, ep));
    }
    v.extend(gather_configs());
    v
}

/// The gathering GEMM1s: both cooperative tiles and the ping-pong one (bf16), and the
/// wide cooperative one of f16.
fn gather_configs() -> Vec<GemmSm90Config> {
    let (bf, coop) = (Element::BF16, Sm90Schedule::Cooperative);
    vec![
        sm90_gather_config(bf, SM90_TILE, coop),
        sm90_gather_config(bf, SM90_NARROW_TILE, coop),
        sm90_gather_config(bf, SM90_PINGPONG_TILE, Sm90Schedule::PingPong),
        sm90_gather_config(Element::F16, SM90_TILE, coop),
    ]
}

/// The gathering GEMM1: named `gather_swiglu`, no A tensor map, the token matrix and
/// `topk` among its parameters, each row's address computed once per tile and a k-tile's
/// copies skipped by the bits of one mask, 129 arrivals on each full barrier (128 producer threads'
/// `cp.async` completions and the B TMA's expect_tx), the producer's copies through the
/// A atom's 128B swizzle, and the consumers' proxy fence after each full barrier; the
/// plain GEMM1 has none of these.
#[test]
fn gathering_gemm1_copies_rows_into_the_swizzled_stage() {
    for c in gather_configs() {
        let g = generate(&c).unwrap();
        let s = &g.source;
        assert!(
            g.name.contains(&format!("_{}_gather_swiglu_", c.ab.ptx())),
            "{}",
            g.name
        );
        assert!(!s.contains("tmap_a"), "{}", g.name);
        for want in [
            "const __grid_constant__ rc_tmap_t tmap_b",
            "__restrict__ x,\n    long long ldx,\n    int topk\n) {",
            "rc_mbarrier_init(bar_full + 8 * i, 129)",
            // each row's 64-bit address once per tile (row 0 of x for a padding row, column
            // 0 for a chunk past K); a k-tile adds one 32-bit byte offset
            "const int g_col = g_chunk * 8 < K ? g_chunk * 8 : 0;",
            "row[i] = reinterpret_cast<unsigned long long>(x + (token_row ? (long long)(id / topk) * ldx : 0) + g_col)",
            "const bool in_k = kt * 64 + g_chunk * 8 < K;",
            "const uint32_t skip = in_k ? ~live : 0xffffffffu;",
            "const uint32_t koff = in_k ? (uint32_t)kt * 128u : 0u;",
            "const uint32_t g_dst = (g_row * 128 + g_chunk * 16) ^ (((g_row * 128 + g_chunk * 16) & 896) >> 3)",
            // the skipped copies (padding rows, past K) through cp.async's ignore-src predicate
            "rc_cp_async_cg_16_ignore_src_addr(a_stage + 2048u * i, reinterpret_cast<const void*>(row[i] + koff), skip & (1u << i))",
            "setp.ne.b32 rc_skip, %2, 0;",
            "rc_cp_async_mbarrier_arrive_noinc(full)",
            "rc_fence_proxy_async_shared();",
            "Sw<3,4,3> on bytes",
        ] {
            assert!(s.contains(want), "{}: no `{want}`", g.name);
        }
        assert_eq!(s, &generate(&c).unwrap().source, "deterministic");
    }
    let plain = generate(&sm90_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE)).unwrap();
    assert!(plain.source.contains("rc_mbarrier_init(bar_full + 8 * i, 1)"));
    assert!(!plain.source.contains("cp_async") && !plain.source.contains("rc_fence_proxy_async_shared();"));
}

#[test]
fn pingpong_members_alternate_tiles_under_the_math_barrier() {
    for ab in [Element::BF16, Element::E4M3] {
        for ep in [GroupedEpilogue::SwiGlu, GroupedEpilogue::Scatter] {
            let g = generate(&sm90_pingpong_config(ab, Element::BF16, ep)).unwrap();
            assert!(g.name.contains("_128x128x"), "{}", g.name);
            assert!(g.name.contains("_pingpong_s"), "{}", g.name);
            assert_eq!(g.threads, 384);
            // Each warpgroup takes every other tile of the grouped walk ...
            assert!(g.source.contains("if ((local & 1) != cw) {"), "{}", g.name);
            assert!(g
                .source
                .contains("rc_grouped_tile(work, sched_tiles_n, rows_used, offsets"));
            // ... its mainloop ordered after the other's, which it releases once its last
            // batch is issued, when the walk names another tile for the other warpgroup.
            assert!(g.source.contains("rc_named_barrier_sync(3u + (uint32_t)cw, 256u)"));
            assert!(g
                .source
                .contains("rc_named_barrier_arrive(3u + (uint32_t)(1 - cw), 256u)"));
            assert!(g
                .source
                .contains("rc_grouped_tile(w, sched_tiles_n, rows_used, offsets, block_expert, other_m, other_n)"));
            assert!(
                !g.source.contains("sched.cluster_valid(w)"),
                "the plain walk's look-ahead"
            );
            // The warpgroup owns the whole tile: rows from 0, no padding drain.
            assert!(g.source.contains("const int wg_row0 = 0;"), "{}", g.name);
            assert!(!g.source.contains("if (wg_routed) {"));
            // One wgmma batch in flight.
            assert!(g.source.contains("rc_wgmma_wait_group<1>()"));
            // The other warpgroup's k-tiles are skipped in each view of the stage ring.
            assert!(g
                .source
                .contains("rc_pipe_advance(stage, phase, (uint32_t)(cw * k_iters)"));
            assert_eq!(
                g.source,
                generate(&sm90_pingpong_config(ab, Element::BF16, ep)).unwrap().source
            );
        }
    }
}

#[test]
fn names_and_sources() {
    let g = generate(&sm90_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE)).unwrap();
    assert!(
        g.name.starts_with("rc_moe_grouped_sm90_bf16_swiglu_128x256x64_coop_s"),
        "{}",
        g.name
    );
    assert_eq!(g.threads, 384);
    // The gate and up halves of a B stage: two TMA boxes per k-tile, the up box 128 rows
    // (16 KiB) into the stage; the up accumulator of a gate column is 64 registers further.
    assert!(g.source.contains("gate_row0 + n0, expert"), "{}", g.source);
    assert!(g.source.contains("up_row0 + n0, expert"));
    assert!(g.source.contains("ri + 64"));
    assert!(g
        .source
        .contains("rc_grouped_tile(work, sched_tiles_n, rows_used, offsets"));
    // A warpgroup of padding rows only skips its wgmma batches.
    assert!(g.source.contains("__ldg(sorted_ids + m0 + wg_row0) < entries"));
    assert!(g.source.contains("if (wg_routed) {"));
    assert!(!g.source.contains("tmap_d"), "grouped units have no D tensor map");
    assert!(!g.source.contains("_splitk_reduce"));
    let s = generate(&sm90_config(Element::F16, GroupedEpilogue::Scatter, SM90_TILE)).unwrap();
    assert!(s.name.starts_with("rc_moe_grouped_sm90_f16_scatter_128x256x64_coop_s"));
    // The router weights load after every row's entry, before the stores.
    assert!(s.source.contains("__ldg(weights + entry[rs])"));
    assert!(s.source.find("w[rs] = ").unwrap() < s.source.find("reinterpret_cast<__half2*>(drow").unwrap());
    assert!(!s.source.contains("gate_row0"));
    for c in configs() {
        assert_eq!(generate(&c).unwrap().source, generate(&c).unwrap().source);
    }
    assert_eq!(gather::generate(Element::BF16).unwrap().name, "rc_moe_gather_rows_bf16");
    // 2x1 clusters: the cluster walk; B shared: A's two halves of this CTA, B's half rank_m
    // multicast (gate or up box); A shared: A's half rank_m multicast, B only with a tile.
    let k = generate(&sm90_cluster_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE)).unwrap();
    assert!(k.name.contains("_coop_c2x1_s"), "{}", k.name);
    assert!(k.source.contains("rc_grouped_cluster_tile(work, N, rows_used, offsets"));
    assert!(!k.source.contains("rc_grouped_tile("));
    assert!(
        k.source.contains("(rank_m ? up_row0 : gate_row0) + n0, expert)"),
        "{}",
        k.source
    );
    assert!(k.source.contains("mine && __ldg(sorted_ids + m0 + wg_row0) < entries"));
    assert!(k.source.contains("rc_cluster_wait()"));
    let ks = generate(&sm90_cluster_config(Element::BF16, GroupedEpilogue::Scatter, SM90_TILE)).unwrap();
    assert!(ks.source.contains("n0 + rank_m * 128, expert)"), "{}", ks.source);
    // FP8: e4m3 operands, a bf16 D, both scales applied to the accumulators before SwiGLU
    // (gate and up rows' own channel scales) and before the router weight.
    let f = generate(&sm90_fp8_config(Element::BF16, GroupedEpilogue::SwiGlu)).unwrap();
    assert!(
        f.name.starts_with("rc_moe_grouped_sm90_e4m3_swiglu_128x256x128_coop_s"),
        "{}",
        f.name
    );
    assert!(f.name.ends_with("_dbf16"));
    // The scales load once per tile into registers (a column's gate and up scales, a row's
    // activation scale), before the stores: no load in a store's expression.
    assert!(f.source.contains("sg[cs] = __ldg(bs + gate_row0 + cn)"), "{}", f.source);
    assert!(f.source.contains("su[cs] = __ldg(bs + up_row0 + cn)"));
    assert!(f.source.contains("sa[rs] = __ldg(a_scale + min(gm + row, M - 1))"));
    assert!(f
        .source
        .contains("rc_silu((acc[a][ri] * sa[rs] * sg[cs])) * (acc[a][ru] * sa[rs] * su[cs])"));
    assert!(f.source.contains("b_scale + (long long)expert * 2 * N"));
    assert!(f.source.contains("__fdividef(x, 1.0f + __expf(-x))"));
    let s = generate(&sm90_fp8_config(Element::BF16, GroupedEpilogue::Scatter)).unwrap();
    assert!(s.source.contains("sb[cs] = __ldg(bs + cn)"));
    assert!(s.source.contains("w[rs] * (acc[a][ri] * sa[rs] * sb[cs])"));
    for src in [&f.source, &s.source] {
        for line in src
            .lines()
            .filter(|l| l.contains("reinterpret_cast<__nv_bfloat162*>(drow"))
        {
            assert!(!line.contains("__ldg"), "a load in a store: {line}");
        }
    }
    assert!(s.source.contains("b_scale + (long long)expert * N"));
    assert!(
        !generate(&sm90_config(Element::BF16, GroupedEpilogue::Scatter, SM90_TILE))
            .unwrap()
            .source
            .contains("a_scale")
    );
    for src in [QuantSource::Gather, QuantSource::Rows] {
        let q = quant::generate(Element::BF16, src).unwrap();
        assert_eq!(q.source, quant::generate(Element::BF16, src).unwrap().source);
    }
    assert_eq!(
        quant::generate(Element::F16, QuantSource::Rows).unwrap().name,
        "rc_moe_quant_e4m3_f16_rows"
    );
}

#[test]
fn bad_configurations_and_arguments_are_typed_errors() {
    let mut pp = sm90_cluster_config(Element::BF16, GroupedEpilogue::Scatter, [128, 128, 64]);
    pp.schedule = Sm90Schedule::PingPong;
    assert!(generate(&pp).is_err(), "ping-pong on a cluster");
    let mut wide = sm90_pingpong_config(Element::BF16, Element::BF16, GroupedEpilogue::SwiGlu);
    wide.tile = SM90_TILE;
    assert!(
        generate(&wide).is_err(),
        "ping-pong 128x256: 256 accumulators per thread"
    );
    let mut cl = sm90_config(Element::BF16, GroupedEpilogue::Scatter, SM90_TILE);
    cl.cluster = [1, 2];
    assert!(generate(&cl).is_err(), "cluster 1x2");
    cl.cluster = [4, 1];
    assert!(generate(&cl).is_err(), "cluster 4x1");
    let mut with_c = GemmSm90Config::bf16(SM90_TILE, Sm90Schedule::Cooperative);
    with_c.grouped = Some(Sm90Grouped::Scatter);
    assert!(generate(&with_c).is_err(), "a fusion reading C");
    let mut s8 = sm90_config(Element::BF16, GroupedEpilogue::Scatter, [128, 128, 128]);
    s8.ab = Element::S8;
    assert!(generate(&s8).is_err(), "s8");
    assert!(gather::generate(Element::F32).is_err());
    assert!(quant::generate(Element::E4M3, QuantSource::Rows).is_err());
    let mut f8_to_f32 = sm90_fp8_config(Element::BF16, GroupedEpilogue::Scatter);
    f8_to_f32.cd = Element::F32;
    assert!(generate(&f8_to_f32).is_err(), "e4m3 -> f32");
    let gather = sm90_gather_config(Element::BF16, SM90_TILE, Sm90Schedule::Cooperative);
    for (bad, why) in [
        (
            GemmSm90Config {
                cluster: [2, 1],
                ..gather.clone()
            },
            "gather on a cluster",
        ),
        (
            GemmSm90Config {
                grouped: Some(Sm90Grouped::Scatter),
                ..gather.clone()
            },
            "gather with the scatter epilogue",
        ),
        (
            GemmSm90Config {
                grouped: None,
                ..gather.clone()
            },
            "gather in the plain GEMM",
        ),
        (
            sm90_gather_config(Element::E4M3, [128, 256, 128], Sm90Schedule::Cooperative),
            "gather of e4m3",
        ),
    ] {
        assert!(generate(&bad).is_err(), "{why}");
    }
    let q = quant::generate(Element::BF16, QuantSource::Gather).unwrap();
    let qa = MoeQuantArgs {
        src: 1 << 20,
        q: 2 << 20,
        scale: 3 << 20,
        sorted_ids: 4 << 20,
        total_rows: 5 << 20,
        rows: 256,
        k: 208,
        ld: 208,
        entries: 90,
        topk: 2,
    };
    q.check(&qa).unwrap();
    for bad in [
        MoeQuantArgs { k: 200, ld: 200, ..qa },
        MoeQuantArgs { ld: 100, ..qa },
        MoeQuantArgs { q: (2 << 20) + 8, ..qa },
        MoeQuantArgs { scale: 0, ..qa },
        MoeQuantArgs { sorted_ids: 0, ..qa },
        MoeQuantArgs { total_rows: 0, ..qa },
        MoeQuantArgs { rows: 0, ..qa },
    ] {
        assert!(q.check(&bad).is_err(), "{bad:?}");
    }

    let g = generate(&sm90_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE)).unwrap();
    let ok = Sm90GroupedArgs {
        a: 1 << 20,
        b: 2 << 20,
        d: 3 << 20,
        sorted_ids: 4 << 20,
        block_expert: 5 << 20,
        total_rows: 6 << 20,
        offsets: 7 << 20,
        weights: 0,
        m: 256,
        n: 136,
        k: 200,
        experts: 8,
        lda: 200,
        ldb: 200,
        ldd: 136,
        expert_stride: 2 * 136 * 200,
        entries: 90,
        up_first: false,
        a_scale: 0,
        b_scale: 0,
        topk: 0,
        work_counter: 0,
    };
    g.grouped_check(&ok).unwrap();
    // The gathering GEMM1 needs topk (its A is x, read through sorted_ids / topk).
    let gg1 = generate(&sm90_gather_config(Element::BF16, SM90_TILE, Sm90Schedule::Cooperative)).unwrap();
    assert!(gg1.grouped_check(&ok).is_err(), "gather without topk");
    gg1.grouped_check(&Sm90GroupedArgs { topk: 2, ..ok }).unwrap();
    assert_eq!(g.grouped_b_rows(136).unwrap(), 272);
    let p = g.grouped_scheduler_params(&ok).unwrap();
    // 2 row tiles of 128, ceil(136 / 128) = 2 column tiles of 128 output columns.
    assert_eq!(p.output_tiles(), 4);
    for bad in [
        Sm90GroupedArgs { m: 200, ..ok },
        Sm90GroupedArgs {
            k: 196,
            lda: 196,
            ldb: 196,
            ..ok
        },
        Sm90GroupedArgs { n: 135, ..ok },
        Sm90GroupedArgs { lda: 100, ..ok },
        Sm90GroupedArgs {
            expert_stride: 136 * 200,
            ..ok
        },
        Sm90GroupedArgs { a: (1 << 20) + 8, ..ok },
        Sm90GroupedArgs { total_rows: 0, ..ok },
        Sm90GroupedArgs { offsets: 0, ..ok },
        Sm90GroupedArgs { entries: 0, ..ok },
    ] {
        assert!(g.grouped_check(&bad).is_err(), "{bad:?}");
    }
    // e4m3 operands: the two scale vectors are required, K a multiple of 16 elements.
    let f8 = generate(&sm90_fp8_config(Element::BF16, GroupedEpilogue::SwiGlu)).unwrap();
    let ok8 = Sm90GroupedArgs {
        k: 208,
        lda: 208,
        ldb: 208,
        expert_stride: 2 * 136 * 208,
        a_scale: 8 << 20,
        b_scale: 9 << 20,
        ..ok
    };
    f8.grouped_check(&ok8).unwrap();
    for bad in [
        Sm90GroupedArgs { a_scale: 0, ..ok8 },
        Sm90GroupedArgs { b_scale: 0, ..ok8 },
        Sm90GroupedArgs {
            k: 200,
            lda: 200,
            ldb: 200,
            expert_stride: 2 * 136 * 200,
            ..ok8
        },
    ] {
        assert!(f8.grouped_check(&bad).is_err(), "{bad:?}");
    }
    let plain = generate(&GemmSm90Config::bf16(SM90_TILE, Sm90Schedule::Cooperative)).unwrap();
    assert!(plain.grouped_check(&ok).is_err(), "not a grouped kernel");

    let gg = gather::generate(Element::BF16).unwrap();
    let ga = MoeGatherArgs {
        x: 1 << 20,
        out: 2 << 20,
        sorted_ids: 3 << 20,
        total_rows: 4 << 20,
        rows: 256,
        hidden: 200,
        ldx: 200,
        entries: 90,
        topk: 2,
    };
    gg.check(&ga).unwrap();
    for bad in [
        MoeGatherArgs {
            hidden: 204,
            ldx: 204,
            ..ga
        },
        MoeGatherArgs { ldx: 100, ..ga },
        MoeGatherArgs {
            out: (2 << 20) + 4,
            ..ga
        },
        MoeGatherArgs { rows: 0, ..ga },
    ] {
        assert!(gg.check(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn compiles_for_sm90a_without_spills_with_wgmma_and_tma() {
    let Some(tk) = toolkit_for_test() else { return };
    let mut units: Vec<(String, String, Vec<&str>)> = configs()
        .iter()
        .map(|c| {
            let g = generate(c).unwrap();
            let mma = if c.ab == Element::E4M3 { "QGMMA" } else { "HGMMA" };
            let mut ops = vec![mma, "UTMALDG", "SYNCS"];
            if c.gather_a {
                // The producer's row copies (cp.async) and their barrier arrivals.
                ops.extend(["LDGSTS", "ARRIVES"]);
            }
            (g.name, g.source, ops)
        })
        .collect();
    let gg = gather::generate(Element::BF16).unwrap();
    units.push((gg.name, gg.source, vec!["LDG.E.128"]));
    for src in [QuantSource::Gather, QuantSource::Rows] {
        let q = quant::generate(Element::BF16, src).unwrap();
        units.push((q.name, q.source, vec!["LDG.E.128", "SHFL.BFLY", "F2FP"]));
    }
    for (name, src, ops) in units {
        let ck = compile_clean(tk, &name, &src, Arch::Sm90a);
        // The padding warpgroup's drain loop beside the wgmma mainloop keeps the batches
        // asynchronous.
        let log = &ck.compiled.log;
        assert!(!log.contains("serialized"), "{name}: wgmma serialized:\n{log}");
        ck.assert_opcodes(&ops, &[]);
    }
}

/// A band outside 1..=MAX_WALK_BAND, or odd on clusters, is a configuration error; a
/// band other than the default names the unit `_b<band>`, the default adds nothing.
#[test]
fn walk_band_is_checked_and_named() {
    let cfg = |band, cluster| {
        let mut c = sm90_grouped_config(
            Element::BF16,
            Element::BF16,
            GroupedEpilogue::Scatter,
            SM90_TILE,
            cluster,
        );
        c.walk_band = band;
        c
    };
    for (band, cluster) in [(0, false), (MAX_WALK_BAND + 1, false), (3, true), (-2, true)] {
        assert!(generate(&cfg(band, cluster)).is_err(), "band {band} cluster {cluster}");
    }
    let default = generate(&cfg(WALK_BAND, true)).unwrap();
    assert!(!default.name.ends_with("_b16"), "{}", default.name);
    let four = generate(&cfg(4, true)).unwrap();
    assert_eq!(four.name, format!("{}_b4", default.name));
    assert!(
        four.source.contains("(pairs + 1) / 2"),
        "half band 2 in the cluster walk"
    );
    let three = generate(&cfg(3, false)).unwrap();
    assert!(three.source.contains("(cnt + 3 - 1) / 3"));
}

/// The dynamic walk (`dynamic_walk`, `_dyn`): refused with a typed error on the ping-pong
/// schedule, with `gather_a` and for the plain GEMM; the cooperative bf16 and e4m3 units on
/// 1x1 and 2x1 clusters take `work_counter` last (a launch without one is refused), take
/// tickets with one atomic (the cluster's rank 0 pushes them to rank 1 with `st.async`),
/// and compile for sm_90a without spills at the static walk's stage count; the static units
/// have none of it.
#[test]
fn dynamic_walk_is_checked_named_and_compiles() {
    let dynamic = |c: GemmSm90Config| GemmSm90Config {
        dynamic_walk: true,
        ..c
    };
    let (bf, e4m3) = (Element::BF16, Element::E4M3);
    for bad in [
        sm90_pingpong_config(bf, bf, GroupedEpilogue::Scatter),
        sm90_gather_config(bf, SM90_TILE, Sm90Schedule::Cooperative),
        GemmSm90Config::bf16(SM90_TILE, Sm90Schedule::Cooperative).without_c(),
    ] {
        let err = generate(&dynamic(bad.clone())).unwrap_err().to_string();
        assert!(err.contains("dynamic walk"), "{err}");
    }
    let tk = toolkit_for_test();
    for (ab, ep, cluster) in [
        (bf, GroupedEpilogue::SwiGlu, true),
        (bf, GroupedEpilogue::Scatter, true),
        (bf, GroupedEpilogue::Scatter, false),
        (e4m3, GroupedEpilogue::SwiGlu, false),
    ] {
        let tile = if ab == e4m3 { SM90_FP8_TILE } else { SM90_TILE };
        let stat = generate(&sm90_grouped_config(ab, bf, ep, tile, cluster)).unwrap();
        let g = generate(&dynamic(stat.config.clone())).unwrap();
        assert_eq!(g.name, format!("{}_dyn", stat.name));
        assert_eq!(g.config.stages, stat.config.stages, "{}", g.name);
        assert!(!stat.source.contains("work_counter") && !stat.source.contains("rc_dyn_"));
        assert!(
            g.source.contains("unsigned* __restrict__ work_counter\n)"),
            "{}",
            g.name
        );
        assert!(g.source.contains("atomicAdd(counter, 1u)"));
        assert!(g.source.contains("if (t == last_ticket) atomicExch(counter, 0u);"));
        assert!(g.source.contains("dyn_wid[stage] = (uint32_t)work;"));
        assert_eq!(g.source.contains("st.async.shared::cluster"), cluster, "{}", g.name);
        assert!(
            !g.source.contains("work < sched.total_work; work +="),
            "{}: a static walk left",
            g.name
        );
        let a = Sm90GroupedArgs {
            a_scale: 4,
            b_scale: 4,
            ..layer_args()
        };
        assert!(g.grouped_check(&a).is_err(), "{}: no work_counter", g.name);
        assert!(g.grouped_check(&Sm90GroupedArgs { work_counter: 6, ..a }).is_err());
        g.grouped_check(&Sm90GroupedArgs { work_counter: 8, ..a }).unwrap();
        stat.grouped_check(&a).unwrap();
        if let Some(tk) = tk {
            let ck = compile_clean(tk, &g.name, &g.source, Arch::Sm90a);
            let mma = if ab == e4m3 { "QGMMA" } else { "HGMMA" };
            ck.assert_opcodes(&[mma, "UTMALDG", "SYNCS", "ATOMG"], &[]);
        }
    }
}

/// The padding skip (`pad_skip`, `_pad`): refused with a typed error on the ping-pong
/// schedule, on clusters and for the plain GEMM; on the cooperative bf16 units (TMA and
/// gathering GEMM1, GEMM2, static and dynamic walk) the all-padding warpgroup's epilogue
/// sits under `wg_routed`, the TMA units expect one box of A less where the upper half is
/// padding and the gathering one skips those copies; A's TMA box is half a tile, and the
/// units compile for sm_90a without spills.
#[test]
fn pad_skip_is_checked_named_and_compiles() {
    let pad = |c: GemmSm90Config| GemmSm90Config { pad_skip: true, ..c };
    let bf = Element::BF16;
    for bad in [
        sm90_pingpong_config(bf, bf, GroupedEpilogue::Scatter),
        sm90_grouped_config(bf, bf, GroupedEpilogue::SwiGlu, SM90_TILE, true),
        GemmSm90Config::bf16(SM90_TILE, Sm90Schedule::Cooperative).without_c(),
    ] {
        let err = generate(&pad(bad.clone())).unwrap_err().to_string();
        assert!(err.contains("pad_skip"), "{err}");
    }
    let tk = toolkit_for_test();
    let dynamic = |c: GemmSm90Config| GemmSm90Config {
        dynamic_walk: true,
        ..c
    };
    for base in [
        sm90_gather_config(bf, SM90_TILE, Sm90Schedule::Cooperative),
        sm90_grouped_config(bf, bf, GroupedEpilogue::SwiGlu, SM90_TILE, false),
        sm90_grouped_config(bf, bf, GroupedEpilogue::Scatter, SM90_TILE, false),
        dynamic(sm90_grouped_config(bf, bf, GroupedEpilogue::Scatter, SM90_TILE, false)),
    ] {
        let plain = generate(&base).unwrap();
        let g = generate(&pad(base.clone())).unwrap();
        assert_eq!(g.name, format!("{}_pad", plain.name));
        assert!(!plain.source.contains("upper_routed"));
        assert!(g
            .source
            .contains("const bool upper_routed = __ldg(sorted_ids + m0 + 64) < entries;"));
        assert!(
            g.source.contains("if (wg_routed) {\n        // grouped epilogue"),
            "{}",
            g.name
        );
        if base.gather_a {
            assert!(g.source.contains("if (i < 4 || upper_routed) {"), "{}", g.name);
        } else {
            assert!(g
                .source
                .contains("rc_mbarrier_arrive_expect_tx(full, upper_routed ? 49152u : 40960u)"));
            assert!(g.source.contains("&tmap_a, full, kt * 64, m0 + 64, 0)"), "{}", g.name);
        }
        let a = Sm90GroupedArgs {
            topk: 2,
            work_counter: if base.dynamic_walk { 8 } else { 0 },
            ..layer_args()
        };
        if !base.gather_a {
            let [am, _] = g.grouped_tensor_maps(&a).unwrap();
            let [am0, _] = plain.grouped_tensor_maps(&a).unwrap();
            assert_eq!((am.box_dim[1], am0.box_dim[1]), (64, 128), "{}", g.name);
        }
        if let Some(tk) = tk {
            let ck = compile_clean(tk, &g.name, &g.source, Arch::Sm90a);
            ck.assert_opcodes(&["HGMMA", "SYNCS"], &[]);
        }
    }
}

/// Arguments of a 1024 x 2048 x 1024 layer of 8 experts and 600 routed entries (aligned
/// pointers, no scales or counter): what the kernels' argument checks accept unless a test
/// changes a field.
fn layer_args() -> Sm90GroupedArgs {
    Sm90GroupedArgs {
        a: 256,
        b: 256,
        d: 256,
        sorted_ids: 4,
        block_expert: 4,
        total_rows: 4,
        offsets: 4,
        m: 1024,
        n: 2048,
        k: 1024,
        experts: 8,
        lda: 1024,
        ldb: 1024,
        ldd: 2048,
        expert_stride: 1024 * 4096,
        entries: 600,
        ..Default::default()
    }
}
