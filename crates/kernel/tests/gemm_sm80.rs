//! CPU-side checks of the SM80 GEMM generator: names, plans, error cases, and NVRTC
//! compilation of every configuration for sm_80 and sm_90a (no spills, no local memory,
//! HMMA / LDSM / LDGSTS in the SASS).

use rcute_atom::{Element, Major};
use rcute_collective::{PlanError, StorageOrder};
use rcute_kernel::gemm_sm80::{generate, GemmArgs, GemmError, GemmSm80Config, SplitKMode};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::{compile, Arch, CompileOptions, Dim3};

fn cfg(a: Major, b: Major, tile: [i64; 3], warps: [i64; 2]) -> GemmSm80Config {
    GemmSm80Config::bf16(a, b, tile, warps)
}

#[test]
fn dump_one() {
    let g = generate(&cfg(Major::K, Major::K, [128, 128, 32], [2, 2])).unwrap();
    if std::env::var("RCUTE_DUMP").is_ok() {
        println!("{}", g.source);
    }
}

fn compile_check(g: &rcute_kernel::gemm_sm80::GeneratedGemm, arch: Arch) -> Option<(u32, u32)> {
    let tk = toolkit_for_test()?;
    let ck = compile_clean(tk, &g.name, &g.source, arch);
    ck.assert_opcodes(&["HMMA", "LDSM", "LDGSTS"], &[]);
    let rr = ck
        .compiled
        .resources
        .kernel(&g.reduce_name)
        .expect("reduce kernel")
        .registers;
    Some((ck.resources.registers, rr))
}

fn extra_configs() -> Vec<GemmSm80Config> {
    let mut v = rcute_kernel::catalogue::gemm_sm80_configs();
    v.push(cfg(Major::K, Major::MN, [64, 64, 64], [2, 2]));
    v.push(cfg(Major::MN, Major::MN, [64, 128, 32], [2, 2]));
    let mut c = cfg(Major::MN, Major::MN, [128, 128, 32], [2, 2]);
    c.c = Element::F32;
    c.d = Element::F32;
    c.c_major = StorageOrder::ColMajor;
    v.push(c);
    let mut c = cfg(Major::K, Major::K, [128, 128, 32], [2, 2]);
    (c.a, c.b, c.c, c.d) = (Element::F16, Element::F16, Element::F16, Element::F16);
    c.raster_swizzle = 2;
    v.push(c);
    let mut c = cfg(Major::K, Major::MN, [32, 32, 16], [1, 1]);
    c.c_major = StorageOrder::ColMajor;
    c.stages = Some(2);
    v.push(c);
    v
}

#[test]
fn every_config_compiles_for_sm80_and_sm90a_without_spills() {
    for c in extra_configs() {
        let g = generate(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        for arch in [Arch::Sm80, Arch::Sm90a] {
            if let Some((regs, rr)) = compile_check(&g, arch) {
                eprintln!("{} {}: {regs} registers (reduce {rr})", g.name, arch.as_str());
            }
        }
    }
}

#[test]
fn names_plans_and_grids() {
    let g = generate(&cfg(Major::K, Major::K, [128, 128, 32], [2, 2])).unwrap();
    assert_eq!(g.name, "rc_gemm_sm80_bf16_tn_128x128x32_s4_w2x2");
    assert_eq!(g.reduce_name, "rc_gemm_sm80_bf16_tn_128x128x32_s4_w2x2_splitk_reduce");
    assert_eq!((g.threads, g.smem_bytes, g.plan.stages), (128, 65536 + 16, 4));
    assert_eq!(g.grid(129, 257, 3), Dim3::new(2, 3, 3));
    assert_eq!(g.grid_split(129, 257, 3, 4), Dim3::new(2, 3, 12));
    assert_eq!(g.k_tiles_per_split(1000, 4), 8); // 32 tiles of 32 (rounded up) over 4 splits
    assert_eq!(g.workspace_bytes(10, 20, 2, 3), 4 * 10 * 20 * 2 * 3);
    assert!(g.source.contains("rc_ldmatrix_x4(") && !g.source.contains("rc_ldmatrix_x4_trans("));
    assert!(g.source.contains("lA_off ^ "), "separable swizzle offsets are used");
    // staged epilogue: 2 slabs of 64 rows, 16-byte bf16 stores, union with the mainloop smem
    assert_eq!(
        (g.epilogue.passes, g.epilogue.vec, g.epilogue.union_bytes),
        (2, 8, 65536)
    );
    assert!(g.epilogue.conflict_free());
    assert!(g.source.contains("*reinterpret_cast<uint4*>(gD + dof) = make_uint4("));
    // serial split-K: ticket order, acquire wait, release, split slowest-varying
    for needle in [
        "atomicAdd(semaphores, 1)",
        "rc_ld_acquire_gpu(sem) != split",
        "rc_st_release_gpu(sem, split == split_k - 1 ? 0 : split + 1)",
        "const int split = bz / L;",
    ] {
        assert!(g.source.contains(needle), "{needle}");
    }
    assert_eq!(
        g.workspace_bytes_mode(10, 20, 2, 3, SplitKMode::Serial),
        4 * 10 * 20 * 2
    );
    assert_eq!(g.workspace_bytes_mode(10, 20, 2, 1, SplitKMode::Serial), 0);
    assert_eq!(
        g.workspace_bytes_mode(10, 20, 2, 3, SplitKMode::Parallel),
        4 * 10 * 20 * 2 * 3
    );
    assert_eq!(g.semaphore_count(129, 257, 3), 1 + 3 * 2 * 3);
    let mut c = cfg(Major::MN, Major::K, [128, 256, 32], [2, 4]);
    c.stages = Some(3);
    c.raster_swizzle = 3;
    c.c_major = StorageOrder::ColMajor;
    (c.c, c.d) = (Element::F32, Element::F32);
    let g = generate(&c).unwrap();
    assert_eq!(g.name, "rc_gemm_sm80_bf16_cf32_df32_nn_ccol_128x256x32_s3_w2x4_r3");
    assert!(g.source.contains("rc_ldmatrix_x4_trans("));
    // the staged epilogue: column-major staging, f32 16-byte vectors along M
    assert!(
        g.source
            .contains("*reinterpret_cast<float4*>(gD + dof) = make_float4(v[0], v[1], v[2], v[3])"),
        "{}",
        g.source
    );
    assert_eq!((g.epilogue.vec, g.epilogue.extents), (4, [256, 64]));
    assert!(g.smem_bytes as usize >= g.epilogue.smem_bytes);
    // grid: 3 M tiles << 3, ceil(5 N tiles / 8) = 1
    assert_eq!(g.grid(300, 1100, 1), Dim3::new(24, 1, 1));
    assert_eq!(generate(&c).unwrap().source, g.source, "deterministic");
}

#[test]
fn refused_configs() {
    let mut c = cfg(Major::K, Major::K, [128, 128, 24], [2, 2]);
    assert!(matches!(generate(&c), Err(GemmError::Plan(PlanError::Tile { .. }))));
    c.tile = [128, 128, 32];
    c.stages = Some(20);
    assert!(matches!(
        generate(&c),
        Err(GemmError::Plan(PlanError::SmemBudget { .. }))
    ));
    c.stages = None;
    c.raster_swizzle = 9;
    assert!(matches!(generate(&c), Err(GemmError::Config(_))));
    c.raster_swizzle = 0;
    c.d = Element::S8;
    assert!(matches!(generate(&c), Err(GemmError::Epilogue(_))));
    c.d = Element::BF16;
    c.a = Element::F32;
    assert!(matches!(generate(&c), Err(GemmError::Plan(PlanError::Types { .. }))));
}

#[test]
fn argument_validation() {
    let c = cfg(Major::K, Major::K, [64, 64, 64], [2, 2]);
    let g = generate(&c).unwrap();
    let ok = GemmArgs::packed(&c, 100, 50, 64, 2, 0x1000, 0x2000, 0, 0x3000);
    ok.validate(&g).unwrap();
    let mut a = ok;
    a.k = 60; // K-major operands need K % 8 == 0
    a.lda = 64;
    a.ldb = 64;
    assert!(matches!(a.validate(&g), Err(GemmError::Alignment(_))));
    let mut a = ok;
    a.lda = 68;
    assert!(matches!(a.validate(&g), Err(GemmError::Alignment(_))));
    let mut a = ok;
    a.a = 0x1008;
    assert!(matches!(a.validate(&g), Err(GemmError::Alignment(_))));
    let mut a = ok;
    a.lda = 32;
    assert!(matches!(a.validate(&g), Err(GemmError::Shape(_))));
    let mut a = ok;
    a.beta = 1.0; // C is null
    assert!(matches!(a.validate(&g), Err(GemmError::Shape(_))));
    let mut a = ok;
    a.split_k = 2; // no workspace
    assert!(matches!(a.validate(&g), Err(GemmError::Shape(_))));
    a.workspace = 0x8000;
    a.validate(&g).unwrap();
    a.split_k_mode = SplitKMode::Serial; // no semaphores
    assert!(matches!(a.validate(&g), Err(GemmError::Shape(_))));
    a.semaphores = 0x9000;
    a.validate(&g).unwrap();
    let mut a = ok;
    a.m = 0;
    assert!(matches!(a.validate(&g), Err(GemmError::Shape(_))));
    // An MN-major A only needs K % 8 when B is K-major; both MN-major: any K.
    let c2 = cfg(Major::MN, Major::MN, [64, 64, 64], [2, 2]);
    let g2 = generate(&c2).unwrap();
    let mut a = GemmArgs::packed(&c2, 96, 48, 61, 1, 0x1000, 0x2000, 0, 0x3000);
    a.validate(&g2).unwrap();
    a.m = 95; // lda = 96 still a multiple of 8 and >= M
    a.validate(&g2).unwrap();
}

/// Developer aid: `RCUTE_SRC=file.cu cargo test -p rcute-kernel --test gemm_sm80 compile_file -- --ignored --nocapture`
/// prints ptxas' resource lines for a hand-edited unit (sm_80 and sm_90a).
#[test]
#[ignore]
fn compile_file() {
    let Ok(path) = std::env::var("RCUTE_SRC") else { return };
    let src = std::fs::read_to_string(&path).unwrap();
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let c = compile(&src, "x.cu", &CompileOptions::new(arch)).unwrap();
        for r in &c.resources.kernels {
            eprintln!(
                "{} {}: {} regs, spills {}/{}, stack {}",
                arch.as_str(),
                r.name,
                r.registers,
                r.spill_stores_bytes,
                r.spill_loads_bytes,
                r.stack_frame_bytes
            );
        }
    }
}

/// The narrow-vector variants (operands not 16-byte aligned): every copy width and operand
/// major compiles for sm_80 and sm_90a without spills or local memory, with `cp.async`
/// (LDGSTS) for 8 and 4 bytes and 16-bit loads (LDG.E.U16) into shared stores for 2 bytes;
/// names say the width, and the 16-byte configuration keeps its name and source.
#[test]
fn narrow_copies_compile_for_sm80_and_sm90a_without_spills() {
    let fast = cfg(Major::K, Major::K, [64, 64, 32], [2, 2]);
    assert_eq!(fast.clone().narrow(16), fast);
    assert!(!generate(&fast).unwrap().name.contains("_g2s"));
    for bytes in [8, 4, 2] {
        for (a, b) in [
            (Major::K, Major::K),
            (Major::MN, Major::MN),
            (Major::K, Major::MN),
            (Major::MN, Major::K),
        ] {
            let c = cfg(a, b, [64, 64, 32], [2, 2]).narrow(bytes);
            let g = generate(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
            assert!(g.name.ends_with(&format!("_g2s{bytes}")), "{}", g.name);
            assert!(
                !g.source.contains("rc_cp_async_cg_16_zfill("),
                "{}: 16-byte copies",
                g.name
            );
            let Some(tk) = toolkit_for_test() else { return };
            for arch in [Arch::Sm80, Arch::Sm90a] {
                let ck = compile_clean(tk, &g.name, &g.source, arch);
                if bytes == 2 {
                    // 16-bit loads into shared stores, no cp.async
                    ck.assert_opcodes(&["HMMA", "LDSM", "LDG", "STS"], &["LDGSTS"]);
                } else {
                    ck.assert_opcodes(&["HMMA", "LDSM", "LDGSTS"], &[]);
                }
            }
        }
    }
    // Widths the kernel has no copy for, and the Turing kernel, are refused.
    assert!(matches!(generate(&fast.clone().narrow(3)), Err(GemmError::Config(_))));
    let turing = GemmSm80Config::scaled_mm(
        Element::F16,
        rcute_collective::ScaleKind::Scalar,
        rcute_collective::ScaleKind::Scalar,
        false,
        [128, 128, 64],
        [2, 2],
    )
    .unwrap()
    .turing()
    .narrow(4);
    assert!(matches!(generate(&turing), Err(GemmError::Config(_))));
}

/// Argument validation follows the copy width: a 4-byte kernel takes 4-byte leading
/// dimensions, pointers and K, not 2-byte ones.
#[test]
fn narrow_argument_validation() {
    let g = generate(&cfg(Major::K, Major::K, [64, 64, 32], [2, 2]).narrow(4)).unwrap();
    let mut a = GemmArgs::tn(64, 64, 30, 1, 0x1000, 0x2000, 0, 0x3000);
    (a.lda, a.ldb) = (30, 30);
    assert!(a.validate(&g).is_ok(), "{:?}", a.validate(&g));
    a.lda = 31;
    assert!(matches!(a.validate(&g), Err(GemmError::Alignment(_))));
    a.lda = 30;
    a.a = 0x1002;
    assert!(matches!(a.validate(&g), Err(GemmError::Alignment(_))));
}

/// The INT8 scaled-mm kernel's narrow variants compile for sm_80 and sm_90a without spills.
#[test]
fn narrow_scaled_mm_compiles_without_spills() {
    use rcute_collective::ScaleKind;
    for bytes in [8, 4, 2] {
        let c = GemmSm80Config::scaled_mm(
            Element::BF16,
            ScaleKind::PerRow,
            ScaleKind::PerCol,
            true,
            [64, 64, 64],
            [2, 2],
        )
        .unwrap()
        .narrow(bytes);
        let g = generate(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(g.name.ends_with(&format!("_g2s{bytes}")), "{}", g.name);
        let Some(tk) = toolkit_for_test() else { return };
        for arch in [Arch::Sm80, Arch::Sm90a] {
            compile_clean(tk, &g.name, &g.source, arch);
        }
    }
}
