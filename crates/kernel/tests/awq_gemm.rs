//! The AWQ GEMM kernels generate deterministically, compile for sm_80 and sm_90a without
//! spills or local memory, and use the instructions of the plan (cp.async, ldmatrix, the
//! LOP3 conversion, PRMT, HMMA); bad configurations are errors.

use rcute_atom::Element;
use rcute_kernel::awq_gemm::{generate, AwqGemmConfig, GeneratedAwqGemm};
use rcute_kernel::testing::{
    assert_none_in, awq_wgmma_checkpoint_configs, awq_wgmma_split_k_configs, compile_clean, toolkit_for_test,
    CleanKernel,
};
use rcute_kernel::{Arch, Toolkit};

/// Compile `g` for `arch` ([`compile_clean`]: no spills, stack frame or local memory).
fn clean(tk: &Toolkit, g: &GeneratedAwqGemm, arch: Arch) -> CleanKernel {
    compile_clean(tk, &g.name, &g.source, arch)
}

fn configs() -> Vec<AwqGemmConfig> {
    vec![
        AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4),
        AwqGemmConfig::new(Element::BF16, [16, 256, 64], [1, 4], 4, 1),
        AwqGemmConfig::new(Element::F16, [64, 128, 64], [2, 2], 4, 4),
        AwqGemmConfig::new(Element::BF16, [128, 256, 64], [2, 4], 3, 4),
        AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4).prepared(),
        AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 3, 4).prepared(),
        AwqGemmConfig::new(Element::F16, [32, 256, 64], [1, 4], 4, 4),
        AwqGemmConfig::new(Element::F16, [64, 256, 64], [1, 4], 3, 4),
        AwqGemmConfig::new(Element::BF16, [64, 128, 64], [2, 2], 4, 4).prepared(),
    ]
}

/// The prepared kernels with the SM90 bulk producer (sm_90a only): the catalogue's and more.
fn bulk_configs() -> Vec<AwqGemmConfig> {
    let mut v = rcute_kernel::catalogue::awq_bulk_configs();
    v.extend([
        AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 8, 4).bulk(),
        AwqGemmConfig::new(Element::BF16, [16, 256, 64], [1, 4], 6, 4).bulk(),
        AwqGemmConfig::new(Element::F16, [32, 256, 64], [1, 4], 6, 4).bulk(),
        AwqGemmConfig::new(Element::F16, [16, 512, 64], [1, 8], 9, 4).bulk(),
    ]);
    v
}

/// The register-streamed kernels: 8 and 16 rows, warps along K and N, rings of 2..12; the
/// catalogue's configurations in their register-ring form (the shared-ring test takes each
/// of these with shared slots).
fn streamed_configs() -> Vec<AwqGemmConfig> {
    let mut v: Vec<AwqGemmConfig> = rcute_kernel::catalogue::awq_streamed_configs()
        .into_iter()
        .map(|mut cfg| {
            // the base kernels: the clustered sum by pushes and the scales after the MMAs
            // (a shared-ring option) have tests of their own
            cfg.shared_ring = false;
            cfg.cluster_push = false;
            cfg.scale_after = false;
            cfg
        })
        .fold(Vec::new(), |mut v, cfg| {
            if !v.contains(&cfg) {
                v.push(cfg);
            }
            v
        });
    v.extend([
        AwqGemmConfig::new(Element::F16, [8, 64, 64], [4, 1], 8, 4).streamed(),
        AwqGemmConfig::new(Element::BF16, [8, 64, 64], [8, 1], 4, 4).streamed(),
        AwqGemmConfig::new(Element::F16, [16, 64, 64], [4, 1], 6, 4).streamed(),
        AwqGemmConfig::new(Element::BF16, [16, 128, 64], [2, 2], 8, 4).streamed(),
        AwqGemmConfig::new(Element::F16, [8, 256, 64], [1, 4], 12, 4).streamed(),
        AwqGemmConfig::new(Element::F16, [16, 64, 64], [1, 1], 2, 4).streamed(),
        AwqGemmConfig::new(Element::F16, [8, 64, 64], [8, 1], 16, 4).streamed(),
        AwqGemmConfig::new(Element::F16, [16, 64, 64], [8, 1], 6, 4).streamed(),
        // 16 rows with K = 4096 staged (one split of a wide weight): 8 and 12 warps along K
        AwqGemmConfig::new(Element::F16, [16, 128, 64], [8, 2], 4, 4)
            .streamed()
            .staged_k_tiles(64),
        AwqGemmConfig::new(Element::BF16, [16, 128, 64], [12, 2], 2, 4)
            .streamed()
            .staged_k_tiles(64),
    ]);
    v
}

/// The register-streamed kernels on AutoAWQ's checkpoint words: the catalogue's and more
/// (8 and 16 rows, warps along K and N, rings of 2..12, f16 and bf16).
fn checkpoint_configs() -> Vec<AwqGemmConfig> {
    // the base kernels: the clustered sum by pushes has its own test
    let mut v: Vec<AwqGemmConfig> = rcute_kernel::catalogue::awq_streamed_checkpoint_configs()
        .into_iter()
        .map(|mut cfg| {
            cfg.cluster_push = false;
            cfg
        })
        .collect();
    v.extend([
        AwqGemmConfig::new(Element::F16, [8, 64, 64], [8, 1], 8, 4).streamed_checkpoint(),
        AwqGemmConfig::new(Element::BF16, [16, 64, 64], [16, 1], 4, 4).streamed_checkpoint(),
        AwqGemmConfig::new(Element::F16, [16, 64, 64], [8, 1], 6, 4).streamed_checkpoint(),
        AwqGemmConfig::new(Element::BF16, [16, 128, 64], [2, 2], 8, 4).streamed_checkpoint(),
        AwqGemmConfig::new(Element::F16, [8, 256, 64], [1, 4], 12, 4).streamed_checkpoint(),
        AwqGemmConfig::new(Element::F16, [16, 128, 64], [8, 2], 2, 4)
            .streamed_checkpoint()
            .staged_k_tiles(64),
        AwqGemmConfig::new(Element::F16, [16, 64, 64], [1, 1], 2, 4).streamed_checkpoint(),
        // warps along N read adjacent 32-byte segments of the same rows (a CTA: 128 bytes)
        AwqGemmConfig::new(Element::F16, [8, 256, 64], [4, 4], 4, 4).streamed_checkpoint(),
        AwqGemmConfig::new(Element::F16, [16, 128, 64], [8, 2], 4, 4).streamed_checkpoint(),
    ]);
    v
}

#[test]
fn generated_source_is_deterministic_and_rejects_bad_configs() {
    for cfg in configs()
        .into_iter()
        .chain(bulk_configs())
        .chain(streamed_configs())
        .chain(checkpoint_configs())
    {
        let g = generate(&cfg).unwrap();
        assert_eq!(g, generate(&cfg).unwrap());
        for pat in ["+ 0)", "- 0)", "* 1)", "% 1)", "/ 1)", ">> 0", "<< 0"] {
            assert!(!g.source.contains(pat), "unfolded {pat:?} in\n{}", g.source);
        }
        if let Some(dir) = std::env::var_os("RCUTE_DUMP") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{}.cu", g.name)), &g.source).unwrap();
        }
    }
    assert!(generate(&AwqGemmConfig::new(Element::F32, [16, 256, 64], [1, 4], 4, 4)).is_err());
    assert!(generate(&AwqGemmConfig::new(Element::F16, [16, 256, 32], [1, 4], 4, 4)).is_err());
    let mut unprepared_bulk = AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4);
    unprepared_bulk.bulk = true;
    assert!(generate(&unprepared_bulk).is_err());
    // the checkpoint's streamed kernel loads single words; the prepared one 16 bytes
    let mut wide_checkpoint = AwqGemmConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4).streamed_checkpoint();
    wide_checkpoint.b_vector_words = 4;
    assert!(generate(&wide_checkpoint).is_err());
    let mut narrow_prepared = AwqGemmConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4).streamed();
    narrow_prepared.b_vector_words = 1;
    assert!(generate(&narrow_prepared).is_err());
    assert!(generate(&AwqGemmConfig::new(Element::F16, [32, 64, 64], [4, 1], 4, 4).streamed_checkpoint()).is_err());
    let g = generate(&configs()[0]).unwrap();
    // K = 4096 in 64-wide tiles over 5 requested splits: 13 tiles each, 5 splits run.
    assert_eq!(g.split_plan(4096, 5), (13, 5));
    assert_eq!(g.split_plan(100, 8), (1, 2));
    assert_eq!(
        (g.workspace_bytes(3, 64, 2), g.workspace_bytes(3, 64, 1)),
        (2 * 3 * 64 * 4, 0)
    );
    assert_eq!(g.semaphore_count(17, 512), 2 * 2);
}

#[test]
fn compiles_without_spills_and_uses_the_planned_instructions() {
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in configs() {
        let g = generate(&cfg).unwrap();
        for arch in [Arch::Sm80, Arch::Sm90a] {
            clean(tk, &g, arch).assert_opcodes(&["LDGSTS", "LDSM", "LOP3", "PRMT", "HMMA"], &[]);
        }
    }
}

/// The bulk-producer kernels compile for sm_90a without spills or local memory, copy the
/// weight and group rows with `cp.async.bulk` (UBLKCP) and `x` with `cp.async` (LDGSTS),
/// and keep the consumers' ldmatrix, conversion and HMMA.
#[test]
fn bulk_kernels_compile_for_sm90a_without_spills() {
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in bulk_configs() {
        let g = generate(&cfg).unwrap();
        let k = clean(tk, &g, Arch::Sm90a);
        k.assert_opcodes(&["UBLKCP", "LDGSTS", "SYNCS", "LDSM", "LOP3", "HMMA"], &[]);
        // the weight, scale and zero rows: four runs and four group rows per stage, no more
        // bulk copies than that in the loop (x comes by cp.async)
        k.assert_at_most("UBLKCP", 8);
    }
}

/// The reorder into the prepared layout compiles without spills and stores 16 bytes at a
/// time.
#[test]
fn prepare_kernel_compiles_and_stores_16_bytes() {
    let g = rcute_kernel::awq_prepare::generate().unwrap();
    assert_eq!(g, rcute_kernel::awq_prepare::generate().unwrap());
    let Some(tk) = toolkit_for_test() else { return };
    compile_clean(tk, &g.name, &g.source, Arch::Sm80).assert_opcodes(&["STG.E.128"], &[]);
}

/// The register-streamed kernels compile for sm_80 and sm_90a without spills or local
/// memory; the weight comes by 16-byte non-allocating loads straight into registers (LDG,
/// no LDGSTS, no LDSM), the MMAs are HMMA, and the only CTA barriers are the one after
/// staging `x` and the epilogue's (none in the loop).
#[test]
fn streamed_kernels_compile_without_spills_and_stream_into_registers() {
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in streamed_configs() {
        let g = generate(&cfg).unwrap();
        assert!(g.name.ends_with("_prepared_streamed"), "{}", g.name);
        for arch in [Arch::Sm80, Arch::Sm90a] {
            let ck = clean(tk, &g, arch);
            let Some(k) = &ck.sass else { continue };
            let ops = ["LDG", "PRMT", "LOP3", "HMMA"];
            let (per_step, steps, counts) = loop_per_step(k, g.plan.streamed.as_ref().unwrap().b_frags as usize, &ops);
            eprintln!(
                "{} on {arch}: loop {steps} steps x {per_step} instructions per step; {ops:?} {counts:?}",
                g.name
            );
            ck.assert_opcodes(
                &["LDG.E.NA.128.CONSTANT", "LDS.64", "LOP3", "HMMA"],
                &["LDGSTS", "LDSM"],
            );
            // one after staging x, then the epilogue's: before and after the partial tiles,
            // around the split's semaphore, and on sm_90 the cluster barriers of the
            // clustered split-K sum (each with a CTA-barrier fallback: the first twice, a
            // release arrive for the warps that publish partial chunks and a relaxed one for
            // the others, then the relaxed one that keeps the peers' shared memory alive; the
            // sum by pushes has fewer, `clustered_streamed_sum_pushes_without_a_gpu_fence`)
            ck.assert_at_most("BAR", if arch == Arch::Sm90a { 8 } else { 5 });
        }
    }
}

/// The streamed kernels of the shared ring (`_sring`): the same configurations. They
/// compile for sm_80 and sm_90a without spills or local memory; the weight arrives by
/// 16-byte `cp.async` (LDGSTS) with counted group waits (`DEPBAR.LE`) and one 16-byte
/// shared load a step, never a 16-byte global load into registers; the ring leaves the
/// registers (fewer than the register ring's kernel of the same configuration where that
/// ring is at least 8 steps); the CTA barriers are the register ring's. At 16 rows: less
/// the one after staging `x` with one warp along N (each warp stages its own steps' words
/// and meets only itself: `__syncwarp`), and the groups' scales and zero words come
/// through the lanes' group slots (LDGSTS, 4 bytes for the zero word): the steady-state
/// loop loads nothing from global memory into registers. At 8 rows neither.
#[test]
fn shared_ring_streamed_kernels_compile_without_spills_and_wait_by_count() {
    let Some(tk) = toolkit_for_test() else { return };
    for base in streamed_configs() {
        let mut cfg = base;
        cfg.shared_ring = true;
        let g = generate(&cfg).unwrap();
        assert!(g.name.ends_with("_prepared_streamed_sring"), "{}", g.name);
        let st = g.plan.streamed.as_ref().unwrap();
        assert_eq!(st.ring_bytes(), st.ring * g.plan.threads * 16, "{}", g.name);
        for arch in [Arch::Sm80, Arch::Sm90a] {
            let ck = clean(tk, &g, arch);
            let has = [
                "LDGSTS.E.BYPASS.128",
                "LDGDEPBAR",
                "DEPBAR.LE",
                "LDS.128",
                "LDS.64",
                "LOP3",
                "HMMA",
            ];
            ck.assert_opcodes(&has, &["LDG.E.NA.128", "LDSM"]);
            let bars = if arch == Arch::Sm90a { 8 } else { 5 } - usize::from(st.warp_staged_x);
            ck.assert_at_most("BAR", bars);
            if let Some(k) = &ck.sass {
                let ops = ["LDG", "LDGSTS.E.BYPASS.128", "LDGSTS"];
                let (_, steps, counts) = loop_per_step(k, st.b_frags as usize, &ops);
                let slots = st.group_slot_bytes() > 0;
                assert_eq!(
                    counts[0] == 0,
                    slots,
                    "{} on {arch}: {} LDG in the {steps}-step loop",
                    g.name,
                    counts[0]
                );
                assert_eq!(
                    counts[2] > counts[1],
                    slots,
                    "{} on {arch}: 4-byte zero-word copies",
                    g.name
                );
            }
            if st.ring >= 8 {
                let shared = ck.resources.registers;
                let reg_ring = clean(tk, &generate(&base).unwrap(), arch).resources.registers;
                assert!(
                    shared < reg_ring,
                    "{} on {arch}: {shared} registers, the register ring {reg_ring}",
                    g.name
                );
            }
        }
        // the loop follows the staging without a CTA barrier where each warp stages its own
        // 16 to 32 rows have group slots, and with one warp along N stage x per warp
        assert_eq!(st.group_slot_bytes() > 0, st.b_frags >= 2, "{}", g.name);
        assert_eq!(st.warp_staged_x, st.b_frags >= 2 && st.col_blocks == 1, "{}", g.name);
        let before_loop = &g.source[..g.source.find("for (int s0 = 0;").expect("the step loop")];
        assert_eq!(before_loop.contains("__syncthreads()"), !st.warp_staged_x, "{}", g.name);
        assert_eq!(before_loop.contains("__syncwarp()"), st.warp_staged_x, "{}", g.name);
        let slot_copy = g.source.contains("rc_cp_async_ca_4(zslot, qzeros + gz)");
        assert_eq!(slot_copy, st.group_slot_bytes() > 0, "{}", g.name);
    }
}

/// The steady-state loop of a streamed kernel: of the backward branches, the one whose
/// body (branch target .. branch) holds the most HMMAs; its instructions per k16 step and
/// warp (the steps it runs: `HMMA / (4 b_frags)`), the steps, and its count of `op`s.
fn loop_per_step(k: &rcute_kernel::sass::SassKernel, b_frags: usize, ops: &[&str]) -> (usize, usize, Vec<usize>) {
    let ins = &k.instructions;
    let target = |i: &rcute_kernel::sass::Instruction| {
        let hex = i.operands.split("0x").nth(1)?;
        u32::from_str_radix(hex.trim_end_matches(|c: char| !c.is_ascii_hexdigit()), 16).ok()
    };
    let mut best: Option<&[rcute_kernel::sass::Instruction]> = None;
    for (end, b) in ins.iter().enumerate() {
        let Some(to) = (b.base_opcode() == "BRA").then(|| target(b)).flatten() else {
            continue;
        };
        if to >= b.offset {
            continue;
        }
        let Some(start) = ins.iter().position(|i| i.offset == to) else {
            continue;
        };
        let body = &ins[start..=end];
        let hmma = |b: &[rcute_kernel::sass::Instruction]| b.iter().filter(|i| i.base_opcode() == "HMMA").count();
        if best.is_none_or(|x| hmma(body) > hmma(x)) {
            best = Some(body);
        }
    }
    let body = best.expect("a loop");
    let steps = (body.iter().filter(|i| i.base_opcode() == "HMMA").count() / (4 * b_frags)).max(1);
    let counts = ops
        .iter()
        .map(|op| {
            body.iter()
                .filter(|i| i.opcode == *op || i.opcode.starts_with(&format!("{op}.")))
                .count()
        })
        .collect();
    (body.len() / steps, steps, counts)
}

/// The checkpoint's streamed kernels compile for sm_80 and sm_90a without spills or local
/// memory; the weight comes by 4-byte non-allocating loads straight into registers (no
/// LDGSTS, no LDSM), row pairs meet in PRMTs before the LOP3 conversion, the MMAs are
/// HMMA and the only CTA barriers are the prepared streamed kernel's.
#[test]
fn checkpoint_streamed_kernels_compile_without_spills() {
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in checkpoint_configs() {
        let g = generate(&cfg).unwrap();
        assert!(
            g.name.ends_with("_v1_streamed") && !g.name.contains("prepared"),
            "{}",
            g.name
        );
        for arch in [Arch::Sm80, Arch::Sm90a] {
            let ck = clean(tk, &g, arch);
            let Some(k) = &ck.sass else { continue };
            ck.assert_opcodes(
                &["LDG.E.NA.CONSTANT", "LDS.64", "PRMT", "LOP3", "HMMA"],
                &["LDGSTS", "LDSM", "LDG.E.NA.128"],
            );
            // as the prepared streamed kernel's (same epilogue)
            ck.assert_at_most("BAR", if arch == Arch::Sm90a { 8 } else { 5 });
            let ops = ["LDG", "PRMT", "LOP3", "HMMA"];
            let b_frags = g.plan.streamed.as_ref().unwrap().b_frags as usize;
            let (per_step, steps, counts) = loop_per_step(k, b_frags, &ops);
            // the prepared streamed kernel of the same configuration, compiled alike
            let mut prepared_cfg = cfg.streamed();
            prepared_cfg.element = cfg.element;
            let pg = generate(&prepared_cfg).unwrap();
            let pk = clean(tk, &pg, arch).sass.expect("cuobjdump found above");
            let (prepared_per_step, _, _) = loop_per_step(&pk, b_frags, &ops);
            eprintln!(
                "{} on {arch}: loop {steps} steps x {per_step} instructions per step (prepared: {prepared_per_step}); {ops:?} {counts:?}",
                g.name
            );
            // per step: 4 word loads (3 more than the prepared kernel's one 16-byte load), 4
            // PRMTs, their addresses
            assert_eq!(counts[1], 4 * steps, "{} on {arch}: PRMT per step", g.name);
            assert!(
                per_step <= prepared_per_step + 28,
                "{} on {arch}: {per_step} instructions per step against the prepared kernel's {prepared_per_step}",
                g.name
            );
        }
    }
}

/// SM90 mixed-input configurations: one, two and three (word by word) consumer
/// warpgroups along N with four words each, two splitting the words (4 and 8 stages:
/// 208,000 bytes of shared memory; 128 to 192 tokens), f16 and bf16.
fn wgmma_configs() -> Vec<AwqGemmConfig> {
    let mut v = Vec::new();
    for e in [Element::F16, Element::BF16] {
        v.push(AwqGemmConfig::new(e, [64, 512, 64], [1, 2], 4, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 4, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [64, 256, 64], [1, 1], 6, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [32, 512, 64], [1, 2], 6, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 8, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [32, 768, 64], [1, 3], 4, 4).wgmma());
        // the prepared op's one-split 32-token tile (two warpgroups splitting the words)
        v.push(AwqGemmConfig::new(e, [32, 256, 64], [2, 1], 6, 4).wgmma());
        // wider token tiles (fewer waves): 152 and 160 tokens batched, 184 and 192 word by
        // word (184 and 192 accumulators), 96 tokens x 4 words on two warpgroups along N
        v.push(AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [160, 256, 64], [2, 1], 6, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma());
        v.push(AwqGemmConfig::new(e, [192, 256, 64], [2, 1], 6, 4).wgmma());
        // the tile walk in groups of token tiles (raster) at the fullest register counts
        v.push(AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma().raster(8));
        v.push(AwqGemmConfig::new(e, [192, 256, 64], [2, 1], 6, 4).wgmma().raster(4));
        v.push(AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma().raster(8));
        // the persistent walk (the accumulators zeroed per tile, the ring running on)
        v.push(AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma().persistent());
        v.push(AwqGemmConfig::new(e, [192, 256, 64], [2, 1], 6, 4).wgmma().persistent());
        v.push(AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma().persistent());
        v.push(
            AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 6, 4)
                .wgmma()
                .raster(4)
                .persistent(),
        );
        // the steps in chained pairs (two more fragments a word: 184 tokens word by word at
        // the fullest register count, 152 batched, 184 persistent)
        v.push(AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma().chained());
        v.push(AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma().chained());
        v.push(
            AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4)
                .wgmma()
                .persistent()
                .chained(),
        );
        v.push(AwqGemmConfig::new(e, [96, 512, 64], [1, 2], 4, 4).wgmma());
        // two and three wgmma groups in flight (four fragment buffers): one consumer
        // warpgroup of 64 tokens x 4 words at the fullest register count, 128 and 160 tokens
        // batched, the split-K box tiles of 48 and 64 tokens
        v.push(AwqGemmConfig::new(e, [64, 256, 64], [1, 1], 8, 4).wgmma().in_flight(3));
        v.push(AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 6, 4).wgmma().in_flight(2));
        v.push(AwqGemmConfig::new(e, [160, 256, 64], [2, 1], 6, 4).wgmma().in_flight(3));
        for (bm, stages) in [(48, 8), (64, 6)] {
            let sk = AwqGemmConfig::new(e, [bm, 256, 64], [2, 1], stages, 4)
                .wgmma()
                .split_k();
            v.push(sk.in_flight(2));
            v.push(sk.in_flight(3));
        }
        // K split over the grid's z (f32 slabs, semaphores, the last split's sum), with the
        // small token tiles of decode and small batches (wgmma N 8, 16, 32), two warpgroups
        // along N, two splitting the words (the 4-column partial stores), a raster
        v.extend(awq_wgmma_split_k_configs(e));
    }
    v
}

/// The SM90 mixed-input kernels compile for sm_90a without spills or local memory, and run
/// the plan: RS `wgmma` (HGMMA with a register A), `x` by TMA (UTMALDG) and the weight,
/// scales and zeros by 1-D bulk copies (UBLKCP) in the producer's loop, the weight read from
/// shared memory (LDS, no LDG in the mainloop, no LDGSTS / LDSM), the `lop3` conversion,
/// mbarriers and register reallocation; ptxas does not serialize the `wgmma`s.
#[test]
fn wgmma_kernels_compile_for_sm90a_with_register_a() {
    for cfg in wgmma_configs() {
        let g = generate(&cfg).unwrap();
        assert_eq!(g, generate(&cfg).unwrap());
        let suffix = match cfg.raster {
            0 => "_prepared_wgmma".to_string(),
            r => format!("_prepared_wgmma_r{r}"),
        } + if cfg.persistent { "_p" } else { "" }
            + if cfg.chained { "_c2" } else { "" }
            + &match cfg.in_flight {
                1 => String::new(),
                d => format!("_f{d}"),
            }
            + if cfg.ctas_per_sm == 2 { "_o2" } else { "" }
            + if cfg.split_k { "_sk" } else { "" };
        assert!(g.name.ends_with(&suffix), "{}", g.name);
        let bounds = format!("__launch_bounds__({}, {})", g.plan.threads, cfg.ctas_per_sm);
        assert!(g.source.contains(&bounds), "{}", g.name);
        let w = g.plan.wgmma.as_ref().unwrap();
        let frag = if cfg.chained {
            "af[i][0]"
        } else if w.in_flight > 1 {
            "af[kk][i]"
        } else if w.batched {
            "af[kk & 1][i]"
        } else {
            "af[i & 1]"
        };
        assert!(
            g.source.contains(&format!("{}({frag}, ", w.mma.snippet.name)),
            "{}",
            g.name
        );
    }
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in wgmma_configs() {
        let g = generate(&cfg).unwrap();
        let ck = clean(tk, &g, Arch::Sm90a);
        assert!(
            !ck.compiled.log.contains("serialized"),
            "{}: {}",
            g.name,
            ck.compiled.log
        );
        ck.assert_opcodes(
            &["HGMMA", "UTMALDG", "UBLKCP", "LDS", "LOP3", "SYNCS", "USETMAXREG"],
            &["LDGSTS", "LDSM"],
        );
        // the launch's registers let `ctas_per_sm` CTAs share an SM's 65536 (80 a thread
        // for two CTAs of 384 threads)
        let launch_regs = 65536 / cfg.ctas_per_sm / g.plan.threads / 8 * 8;
        assert!(
            i64::from(ck.resources.registers) <= launch_regs,
            "{}: {} registers at launch, {launch_regs} for {} CTAs an SM",
            g.name,
            ck.resources.registers,
            cfg.ctas_per_sm
        );
        let Some(k) = &ck.sass else { continue };
        // the consumers' mainloop reads the weight from shared memory only; the
        // producer's loop issues the bulk copies
        let main = k.innermost_loop_with("HGMMA").expect("a mainloop around the wgmmas");
        let has = |body: &[rcute_kernel::sass::Instruction], op: &str| body.iter().any(|i| i.base_opcode() == op);
        assert!(
            has(main, "LDS") && !has(main, "LDG"),
            "{}: the mainloop's loads",
            g.name
        );
        // every wait of the mainloop leaves the plan's groups in flight (ptxas adds no
        // deeper wait for the fragment buffers)
        let waits: Vec<&str> = main
            .iter()
            .filter(|i| i.opcode.starts_with("WARPGROUP.DEPBAR"))
            .map(|i| i.operands.as_str())
            .collect();
        let depth = format!("gsb0, 0x{}", cfg.in_flight);
        assert!(
            !waits.is_empty() && waits.iter().all(|o| o.contains(&depth)),
            "{}: the mainloop's waits {waits:?}",
            g.name
        );
        let producer = k
            .innermost_loop_with("UBLKCP")
            .expect("a producer loop around the bulk copies");
        assert!(
            has(producer, "UTMALDG") && !has(producer, "HGMMA"),
            "{}: the producer loop",
            g.name
        );
    }
}

/// The SM90 mixed-input kernels on the checkpoint's `qweight` compile for sm_90a without
/// spills or local memory: the weight by TMA (two maps: `x`, then `qweight`), scales and
/// zeros by bulk copies, the lane's words from shared memory (LDS, no LDG in the mainloop)
/// byte-permuted (PRMT) before the `lop3` conversion, RS `wgmma`s that ptxas does not
/// serialize; deterministic sources named `..._v1_wgmma...`.
#[test]
fn wgmma_checkpoint_kernels_compile_for_sm90a() {
    let cfgs: Vec<AwqGemmConfig> = [Element::F16, Element::BF16]
        .into_iter()
        .flat_map(awq_wgmma_checkpoint_configs)
        .collect();
    for cfg in &cfgs {
        let g = generate(cfg).unwrap();
        assert_eq!(g, generate(cfg).unwrap());
        assert!(
            g.name.contains("_v1_wgmma") && !g.name.contains("prepared"),
            "{}",
            g.name
        );
        assert!(g.plan.wgmma.as_ref().unwrap().checkpoint);
        assert!(
            g.source.contains("&tmap_w, full") && g.source.contains("__byte_perm"),
            "{}",
            g.name
        );
    }
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in &cfgs {
        let g = generate(cfg).unwrap();
        let ck = clean(tk, &g, Arch::Sm90a);
        assert!(
            !ck.compiled.log.contains("serialized"),
            "{}: {}",
            g.name,
            ck.compiled.log
        );
        ck.assert_opcodes(
            &[
                "HGMMA",
                "UTMALDG",
                "UBLKCP",
                "LDS",
                "PRMT",
                "LOP3",
                "SYNCS",
                "USETMAXREG",
            ],
            &["LDGSTS", "LDSM"],
        );
        let Some(k) = &ck.sass else { continue };
        let main = k.innermost_loop_with("HGMMA").expect("a mainloop around the wgmmas");
        let has = |body: &[rcute_kernel::sass::Instruction], op: &str| body.iter().any(|i| i.base_opcode() == op);
        assert!(
            has(main, "LDS") && has(main, "PRMT") && !has(main, "LDG"),
            "{}: the mainloop's loads and permutations",
            g.name
        );
    }
}

/// The streamed kernels (prepared and checkpoint words) prefetch their first weight steps
/// and their first group's scale and zero lines into L2 before the grid-dependency wait
/// (when the launch asks: `prefetch_steps > 0`) and read nothing there; after the wait
/// they trigger their dependents when the launch asks (`early_trigger`). In the sm_90a
/// SASS the L2 prefetches (`CCTL.PF2`) precede the wait (`ACQBULK`), with no global load,
/// store or atomic before it.
#[test]
fn streamed_kernels_prefetch_before_the_grid_dependency_wait() {
    let tk = toolkit_for_test();
    let cfgs: Vec<AwqGemmConfig> = streamed_configs().into_iter().chain(checkpoint_configs()).collect();
    for (i, cfg) in cfgs.iter().enumerate() {
        let g = generate(cfg).unwrap();
        let body = &g.source[g.source.find(&format!("void {}(", g.name)).expect("kernel")..];
        let wait = body.find("rc_grid_dependency_wait();").expect("wait");
        let prefetch = body.find("rc_prefetch_l2(").expect("prefetch in the kernel");
        assert!(prefetch < wait, "{}: the prefetch follows the wait", g.name);
        assert!(
            body[..wait].contains("if (prefetch_steps > 0 && n_my > 0) {"),
            "{}",
            g.name
        );
        // the weight, then the scale and zero lines
        assert_eq!(body[..wait].matches("rc_prefetch_l2(").count(), 3, "{}", g.name);
        for bad in ["__ldg(", "__ldcg(", "(x + ", " x[", "(out", "(ws +", "sem +", "sem["] {
            assert!(!body[..wait].contains(bad), "{}: {bad} before the wait", g.name);
        }
        let trigger = body.find("rc_launch_dependents();").expect("trigger");
        assert!(
            trigger > wait && body[wait..trigger].contains("if (early_trigger) {"),
            "{}",
            g.name
        );
        let params = body[..body.find(") {").unwrap()]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            params.ends_with("int prefetch_steps, int early_trigger"),
            "{}: the launch parameters end with the prefetch and trigger",
            g.name
        );
        // SASS: the catalogue's first and the last checkpoint configuration (NVRTC time)
        if i != 0 && i + 1 != cfgs.len() {
            continue;
        }
        let Some(ck) = tk.map(|tk| clean(tk, &g, Arch::Sm90a)) else {
            continue;
        };
        let Some(head) = ck.before_wait_with_l2_prefetch() else {
            continue;
        };
        let bad = ["LDG", "STG", "LDGSTS", "ATOMG", "RED", "LDS", "STS"];
        assert_none_in(head, &bad, &format!("{}: before the wait", g.name));
    }
}

/// The split-K wgmma kernels: the one-split kernel of the same configuration is the same
/// text but for the split's k-tile range, the partial stores, the semaphore and the slab
/// sum; the split range starts both loops and gates the stage hand-back; the slabs are
/// summed in slab order into the accumulators before the one-split epilogue.
#[test]
fn split_k_wgmma_kernels_add_only_the_split() {
    for e in [Element::F16, Element::BF16] {
        for cfg in awq_wgmma_split_k_configs(e) {
            let one = generate(&AwqGemmConfig { split_k: false, ..cfg }).unwrap();
            let g = generate(&cfg).unwrap();
            assert_eq!(g.name, format!("{}_sk", one.name));
            assert!(
                !one.source.contains("kt0") && !one.source.contains("sem["),
                "{}",
                one.name
            );
            for want in [
                "const int kt0 = blockIdx.z * kt_per_split;",
                "const int kt1 = min(ktiles, kt0 + kt_per_split);",
                "for (int kt = kt0; kt < kt1; ++kt) {",
                "kk == 0 && kt > kt0",
                "ws + ((long long)(blockIdx.z) * M + row) * N + 64 * wb + 8 * g + 2 * r0",
                "ws + ((long long)(p) * M + row) * N + 64 * wb + 8 * g + 2 * r0",
                "for (int p = 0; p < splits; ++p) {",
                "atomicAdd(sem + tile, 1) == splits - 1",
                "sem[tile] = 0;",
            ] {
                assert!(g.source.contains(want), "{}: {want}", g.name);
            }
            assert_eq!(
                g.source.matches("for (int kt = kt0; kt < kt1; ++kt) {").count(),
                2,
                "{}",
                g.name
            );
            assert!(!g.source.contains("kt < ktiles;"), "{}", g.name);
            // the stores of the epilogue are the one-split kernel's
            let tail =
                |src: &str, name: &str| src[src.rfind("// token 8j + 2t + e: columns").unwrap()..].replace(name, "K");
            assert_eq!(tail(&g.source, &g.name), tail(&one.source, &one.name), "{}", g.name);
            let w = g.plan.wgmma.as_ref().unwrap();
            let quads = 2 * w.words / 4;
            assert_eq!(
                g.source.matches("__stcg(reinterpret_cast<float4*>(w)").count() as i64,
                quads
            );
            assert_eq!(
                g.source.matches("__ldcg(reinterpret_cast<const float4*>(w)").count() as i64,
                quads
            );
        }
    }
}

/// The clustered split-K sum by pushes (`cluster_push`, named `_cpush`) of the streamed
/// kernels (both rings, the catalogue's and the test's configurations, and on the
/// checkpoint's words) on sm_90a: no GPU-scope fence anywhere in the kernel (the release
/// cluster arrive of the sum by loads is a `MEMBAR.ALL.GPU`, asserted below; the slab
/// path's fences are `MEMBAR.SC.GPU`), one relaxed cluster barrier in the prelude
/// (`UCGABAR_ARV`, `UCGABAR_WAIT` with the one CTA barrier ptxas puts after it: 6 in all,
/// less the one before the loop where each warp stages its `x`, against the sum by loads'
/// 8), the pushes as 16-byte `st.async` (`STAS.128`), rank 0's parity wait (`SYNCS`) and
/// no remote load. In the source: the push barrier is initialised in the prelude and
/// published by the cluster barrier, both before the grid-dependency wait, and after the
/// loop no cluster barrier.
#[test]
fn clustered_streamed_sum_pushes_without_a_gpu_fence() {
    let mut cfgs: Vec<AwqGemmConfig> = Vec::new();
    for base in streamed_configs() {
        let mut sring = base;
        sring.shared_ring = true;
        cfgs.extend([base, sring]);
    }
    cfgs.extend(checkpoint_configs());
    for cfg in cfgs {
        let loads = generate(&cfg).unwrap();
        let Ok(g) = generate(&cfg.cluster_push()) else {
            // the 24-row tile's stage leaves no room for the pushed partial chunks
            let st = loads.plan.streamed.as_ref().unwrap();
            let pushed = st.clone().with_cluster_push();
            assert!(
                pushed.smem_bytes(cfg.tile[0]) > rcute_collective::awq_wgmma::MAX_SMEM_BYTES,
                "{}",
                loads.name
            );
            continue;
        };
        assert_eq!(g.name, format!("{}_cpush", loads.name));
        assert!(
            !loads.source.contains("rc_st_async") && !g.source.contains("rc_ld_dsmem"),
            "{}",
            g.name
        );
        let src = &g.source;
        let init = src
            .find("rc_push_barrier_init_sm90(cbar,")
            .expect("the push barrier init");
        let dep_wait = src
            .find("  rc_grid_dependency_wait();")
            .expect("the grid-dependency wait");
        assert!(init < dep_wait, "{}: the init comes before the wait", g.name);
        // every thread of the cluster arrives and waits once, after the init, before the
        // grid-dependency wait (an arrive without its wait kept racecheck from finishing)
        let sync = src
            .find("rc_cluster_sync_relaxed_sm90();")
            .expect("the prelude's cluster barrier");
        assert!(init < sync && sync < dep_wait, "{}", g.name);
        assert_eq!(src.matches("rc_cluster_sync_relaxed_sm90();").count(), 1, "{}", g.name);
        let after_loop = &src[src.find("for (int s0 = 0;").expect("the step loop")..];
        assert!(
            !after_loop.contains("rc_cluster_sync"),
            "{}: no cluster barrier after the loop",
            g.name
        );
        assert_eq!(after_loop.matches("rc_st_async_b32x4(").count(), 2, "{}", g.name);
        let Some(tk) = toolkit_for_test() else { continue };
        let ck = clean(tk, &g, Arch::Sm90a);
        let Some(k) = &ck.sass else { continue };
        assert!(!k.opcodes().any(|o| o == "MEMBAR.ALL.GPU"), "{}", g.name);
        ck.assert_opcodes(
            &["UCGABAR_ARV", "UCGABAR_WAIT", "STAS.128", "SYNCS"],
            &["LDS.U.128.CLUSTER"],
        );
        let warp_x = g.plan.streamed.as_ref().is_some_and(|st| st.warp_staged_x);
        ck.assert_at_most("BAR", 6 - usize::from(warp_x));
        if let Some(l) = &clean(tk, &loads, Arch::Sm90a).sass {
            assert!(
                l.opcodes().any(|o| o == "MEMBAR.ALL.GPU"),
                "{}: the sum by loads",
                loads.name
            );
        }
    }
}

/// The forced streamed options of helper awqh2 (BENCHMARKS.md, session 28). `scale_after`
/// (`_sa`): the A fragments are `q - z` without a scale product (no `HMUL2` in the sm_90a
/// steady-state loop; the loop's code grows by the rebase at a group start) and the
/// accumulators are rebased per group; the registers stay those of the kernel without it
/// (two CTAs of 512 threads an SM). `eager_ring` (`_eg`): the ring's
/// copies and the first group's scale and zero loads come before the grid-dependency wait,
/// `x` only after it. Neither goes with the register ring.
#[test]
fn scale_after_and_eager_ring_kernels() {
    let base = AwqGemmConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4).streamed_shared_ring();
    assert!(generate(
        &AwqGemmConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4)
            .streamed()
            .scale_after()
    )
    .is_err());
    assert!(generate(
        &AwqGemmConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4)
            .streamed()
            .eager_ring()
    )
    .is_err());
    let sa = generate(&base.scale_after()).unwrap();
    assert!(sa.name.ends_with("_sring_sa"), "{}", sa.name);
    assert!(
        !sa.source.contains("__hmul2(") && sa.source.contains("__fdividef("),
        "{}",
        sa.name
    );
    let eg = generate(&base.eager_ring()).unwrap();
    assert!(eg.name.ends_with("_sring_eg"), "{}", eg.name);
    let body = &eg.source[eg.source.find(&format!("void {}(", eg.name)).expect("kernel")..];
    let wait = body.find("rc_grid_dependency_wait();").expect("wait");
    for before in ["rc_cp_async_cg_16(wring", "s_raw = __ldg(", "z_raw = __ldg("] {
        assert!(body[..wait].contains(before), "{}: {before} after the wait", eg.name);
    }
    for after in ["(x + ", "sx["] {
        assert!(!body[..wait].contains(after), "{}: {after} before the wait", eg.name);
    }
    let Some(tk) = toolkit_for_test() else { return };
    let plain = clean(tk, &generate(&base).unwrap(), Arch::Sm90a);
    let after = clean(tk, &sa, Arch::Sm90a);
    assert!(
        after.resources.registers <= plain.resources.registers.max(64),
        "{}",
        sa.name
    );
    if let (Some(p), Some(a)) = (&plain.sass, &after.sass) {
        let (_, _, with) = loop_per_step(p, 1, &["HMUL2"]);
        let (_, _, without) = loop_per_step(a, 1, &["HMUL2"]);
        assert!(
            with[0] > 0 && without[0] == 0,
            "{}: HMUL2 {with:?} -> {without:?}",
            sa.name
        );
    }
    clean(tk, &eg, Arch::Sm90a);
}
