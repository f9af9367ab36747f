//! CPU-side checks of the INT8 scaled-mm kernels (the s8 kernels of `rcute_kernel::gemm_sm80`
//! with the scaled-mm fusion, `GemmSm80Config::scaled_mm`): names,
//! refused configurations and arguments, and NVRTC compilation of the Ampere-class kernels
//! for sm_80, sm_89 and sm_90a and of the Turing kernels for sm_75 (no spills, no stack, no
//! local memory; IMMA, LDSM and — Ampere only — LDGSTS in the SASS).

use rcute_atom::Element;
use rcute_collective::{Fusion, FusionArgs, FusionError, Node, PlanError};
use rcute_kernel::gemm_sm80::{
    generate, GemmArgs, GemmError, GemmSm80Config, GeneratedGemm, ScaleKind, Sm80Target, SplitKMode,
};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::{Arch, Dim3};

fn cfg(out: Element, a: ScaleKind, b: ScaleKind, bias: bool, tile: [i64; 3], warps: [i64; 2]) -> GemmSm80Config {
    GemmSm80Config::scaled_mm(out, a, b, bias, tile, warps).unwrap()
}

#[test]
fn dump_one() {
    let g = generate(&cfg(
        Element::BF16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        true,
        [128, 128, 64],
        [2, 2],
    ))
    .unwrap();
    if std::env::var("RCUTE_DUMP").is_ok() {
        println!("{}", g.source);
    }
}

#[test]
fn names_plans_and_sources() {
    let g = generate(&cfg(
        Element::BF16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        true,
        [128, 128, 64],
        [2, 2],
    ))
    .unwrap();
    assert_eq!(g.name, "rc_scaledmm_sm80_s8_bf16_rowcol_bias_bf16_128x128x64_s4_w2x2");
    assert_eq!(g.reduce_name, format!("{}_splitk_reduce", g.name));
    assert_eq!((g.threads, g.plan.stages, g.plan.k_blocks), (128, 4, 2));
    assert_eq!(g.smem_bytes as usize, g.epilogue.union_bytes + 16);
    assert_eq!(g.grid_split(129, 257, 3, 2), Dim3::new(2, 3, 6));
    assert_eq!(g.k_tiles_per_split(4096, 3), 22);
    assert_eq!(
        g.workspace_bytes_mode(10, 20, 2, 3, SplitKMode::Parallel),
        4 * 10 * 20 * 2 * 3
    );
    assert_eq!(
        g.workspace_bytes_mode(10, 20, 2, 3, SplitKMode::Serial),
        4 * 10 * 20 * 2
    );
    assert_eq!(g.workspace_bytes_mode(10, 20, 2, 1, SplitKMode::Serial), 0);
    assert_eq!(g.semaphore_count(129, 257, 3), 1 + 3 * 2 * 3);
    for needle in [
        "int32_t acc[4][8][4];",
        "rc_mma_m16n8k32_s32_s8_s8_s32(acc[mi][nj]",
        "rc_cp_async_cg_16_zfill(",
        "rc_ldmatrix_x4(",
        "const int a_k = tid % 4 * 16;",
        "int* const sE = reinterpret_cast<int*>(rc_smem);",
        "*reinterpret_cast<int2*>(sE + ",
        "(float)v[x], 0.0f, m, n + x, batch)",
        "const rc_fusion_params ep",
        "rc_fusion_visit(ep, (float)v[x], 0.0f, m, n + x, batch)",
        "s += (unsigned)workspace[",
        "__ldg(p.a_scale + m)",
        "__ldg(p.b_scale + n)",
        "rc_ld_acquire_gpu(sem) != split",
    ] {
        assert!(g.source.contains(needle), "{needle}\n{}", g.source);
    }
    assert!(!g.source.contains("alpha") && !g.source.contains("cuda_fp8.h"));
    let again = generate(&g.config).unwrap();
    assert_eq!(again.source, g.source, "deterministic");

    let c = cfg(
        Element::F16,
        ScaleKind::Scalar,
        ScaleKind::Scalar,
        false,
        [64, 64, 128],
        [2, 2],
    )
    .turing();
    let g = generate(&c).unwrap();
    assert_eq!(g.name, "rc_scaledmm_sm75_s8_f16_tensortensor_64x64x128_s2_w2x2");
    assert_eq!(g.config.target, Sm80Target::Turing);
    for needle in [
        "rc_mma_m8n8k16_s32_s8_s8_s32(lo, a0, b0, lo);",
        "__ldg(reinterpret_cast<const uint4*>(a_ptr))",
        "uint4 a_reg[",
        "_mma_m16n8k32(acc[mi][nj]",
    ] {
        assert!(g.source.contains(needle), "{needle}");
    }
    assert!(!g.source.contains("cp.async"), "no cp.async on Turing");

    let c = cfg(
        Element::F16,
        ScaleKind::PerRow,
        ScaleKind::Scalar,
        false,
        [16, 64, 128],
        [1, 4],
    );
    let mut c = c;
    c.raster_swizzle = 2;
    assert_eq!(
        generate(&c).unwrap().name,
        "rc_scaledmm_sm80_s8_f16_rowtensor_16x64x128_s4_w1x4_r2"
    );
}

#[test]
fn refused_configs() {
    let base = cfg(
        Element::BF16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        false,
        [128, 128, 64],
        [2, 2],
    );
    assert!(matches!(
        GemmSm80Config::scaled_mm(
            Element::BF16,
            ScaleKind::PerCol,
            ScaleKind::PerCol,
            false,
            [64, 64, 64],
            [2, 2]
        ),
        Err(GemmError::Fusion(FusionError::ScaleKind { operand: "A", .. }))
    ));
    let mut c = base.clone();
    c.d = Element::F32;
    assert!(matches!(generate(&c), Err(GemmError::Config(_))));
    let mut c = base.clone();
    c.tile = [128, 128, 48];
    assert!(matches!(generate(&c), Err(GemmError::Plan(PlanError::Tile { .. }))));
    let mut c = base.clone();
    c.raster_swizzle = 6;
    assert!(matches!(generate(&c), Err(GemmError::Config(_))));
    let mut c = base.clone();
    c.stages = Some(40);
    assert!(matches!(
        generate(&c),
        Err(GemmError::Plan(PlanError::SmemBudget { .. }))
    ));
    // A fusion that reads C.
    let c = base.clone().with_fusion(Fusion::linear_combination());
    assert!(matches!(generate(&c), Err(GemmError::Config(m)) if m.contains("source")));
    // Turing: f16 only, two stages and at least two k-blocks, 64 KiB.
    assert!(matches!(generate(&base.clone().turing()), Err(GemmError::Config(m)) if m.contains("f16")));
    let mut t = cfg(
        Element::F16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        false,
        [64, 64, 32],
        [2, 2],
    )
    .turing();
    assert!(matches!(generate(&t), Err(GemmError::Config(m)) if m.contains("BK >= 64")));
    t.tile = [256, 128, 128];
    t.warps = [4, 2];
    assert!(matches!(
        generate(&t),
        Err(GemmError::Plan(PlanError::SmemBudget { .. }))
    ));
}

fn args() -> GemmArgs {
    GemmArgs::tn(100, 48, 64, 2, 0x1000, 0x2000, 0, 0x3000)
}

fn fusion_args() -> FusionArgs {
    FusionArgs::new().ptr("a_scale", 0x4000).ptr("b_scale", 0x5000)
}

#[test]
fn argument_validation() {
    let g = generate(&cfg(
        Element::F16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        false,
        [64, 64, 64],
        [2, 2],
    ))
    .unwrap();
    let ok = args();
    ok.validate(&g).unwrap();
    g.pack_fusion_args(&fusion_args()).unwrap();
    let shape = |a: &GemmArgs| matches!(a.validate(&g), Err(GemmError::Shape(_)));
    let align = |a: &GemmArgs| matches!(a.validate(&g), Err(GemmError::Alignment(_)));
    let mut a = ok;
    a.k = 56; // K % 16
    a.lda = 64;
    a.ldb = 64;
    assert!(align(&a));
    let mut a = ok;
    a.lda = 72;
    assert!(align(&a));
    let mut a = ok;
    a.batch_stride_b = 48 * 64 + 8;
    assert!(align(&a));
    let mut a = ok;
    a.b = 0x2008;
    assert!(align(&a));
    let mut a = ok;
    a.d = 0x3001;
    assert!(align(&a));
    let mut a = ok;
    a.lda = 48;
    assert!(shape(&a));
    let mut a = ok;
    a.m = 0;
    assert!(shape(&a));
    let mut a = ok;
    a.batch_stride_d = 10;
    assert!(shape(&a));
    let mut a = ok;
    a.split_k = 2;
    assert!(shape(&a)); // no workspace
    a.workspace = 0x8000;
    a.validate(&g).unwrap();
    a.split_k_mode = SplitKMode::Serial;
    assert!(shape(&a)); // no semaphores
    a.semaphores = 0x9000;
    a.validate(&g).unwrap();
    // The fusion's arguments: missing, null, unknown.
    let fa = FusionArgs::new().ptr("a_scale", 0x4000);
    assert!(matches!(
        g.pack_fusion_args(&fa),
        Err(GemmError::Fusion(FusionError::MissingArg { .. }))
    ));
    let fa = FusionArgs::new().ptr("a_scale", 0x4000).ptr("b_scale", 0);
    assert!(matches!(
        g.pack_fusion_args(&fa),
        Err(GemmError::Fusion(FusionError::NullPointer { .. }))
    ));
    let fa = fusion_args().ptr("bias", 0x6000);
    assert!(matches!(
        g.pack_fusion_args(&fa),
        Err(GemmError::Fusion(FusionError::UnknownArg { .. }))
    ));
}

/// Compile for `arch`; returns (registers of the main kernel, of the reduction kernel).
fn compile_check(g: &GeneratedGemm, arch: Arch) -> Option<(u32, u32)> {
    let tk = toolkit_for_test()?;
    let ck = compile_clean(tk, &g.name, &g.source, arch);
    let rr = ck.compiled.resources.kernel(&g.reduce_name).expect("reduce kernel");
    assert_eq!(rr.spill_stores_bytes + rr.spill_loads_bytes + rr.stack_frame_bytes, 0);
    ck.assert_opcodes(&["IMMA", "LDSM"], &["HMMA"]);
    // cp.async (LDGSTS) on Ampere and later, not on Turing
    if g.config.target == Sm80Target::Ampere {
        ck.assert_opcodes(&["LDGSTS"], &[]);
    } else {
        ck.assert_opcodes(&[], &["LDGSTS"]);
    }
    Some((ck.resources.registers, rr.registers))
}

/// The configurations `rcute_ops::select` picks from, and a few more.
fn ampere_configs() -> Vec<GemmSm80Config> {
    let mut v = Vec::new();
    for (tile, warps, a, b, bias, out) in [
        (
            [128, 128, 64],
            [2, 2],
            ScaleKind::PerRow,
            ScaleKind::PerCol,
            true,
            Element::BF16,
        ),
        (
            [128, 256, 64],
            [2, 4],
            ScaleKind::PerRow,
            ScaleKind::PerCol,
            true,
            Element::F16,
        ),
        (
            [64, 64, 128],
            [2, 2],
            ScaleKind::Scalar,
            ScaleKind::PerCol,
            false,
            Element::BF16,
        ),
        (
            [64, 128, 64],
            [2, 2],
            ScaleKind::PerRow,
            ScaleKind::Scalar,
            true,
            Element::F16,
        ),
        (
            [16, 64, 128],
            [1, 4],
            ScaleKind::Scalar,
            ScaleKind::Scalar,
            false,
            Element::F16,
        ),
        (
            [16, 64, 256],
            [1, 4],
            ScaleKind::Scalar,
            ScaleKind::PerCol,
            true,
            Element::BF16,
        ),
        (
            [32, 64, 128],
            [1, 4],
            ScaleKind::PerRow,
            ScaleKind::PerCol,
            true,
            Element::BF16,
        ),
    ] {
        v.push(cfg(out, a, b, bias, tile, warps));
    }
    // A long name (bias, raster swizzle).
    let mut c = cfg(
        Element::BF16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        true,
        [128, 256, 64],
        [2, 4],
    );
    c.raster_swizzle = 3;
    v.push(c);
    v
}

fn turing_configs() -> Vec<GemmSm80Config> {
    let mut v = Vec::new();
    for (tile, warps) in [
        ([128, 128, 64], [2, 4]),
        ([64, 64, 64], [2, 2]),
        ([32, 64, 128], [1, 4]),
    ] {
        v.push(cfg(Element::F16, ScaleKind::PerRow, ScaleKind::PerCol, true, tile, warps).turing());
    }
    v
}

#[test]
fn ampere_configs_compile_for_sm80_sm89_sm90a_without_spills() {
    for c in ampere_configs() {
        let g = generate(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        for arch in [Arch::Sm80, Arch::Sm89, Arch::Sm90a] {
            if let Some((regs, rr)) = compile_check(&g, arch) {
                eprintln!("{} {arch}: {regs} registers (reduce {rr})", g.name);
            }
        }
    }
}

#[test]
fn turing_configs_compile_for_sm75_without_spills() {
    for c in turing_configs() {
        let g = generate(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(g.smem_bytes as usize <= 64 * 1024);
        for arch in [Arch::Sm75, Arch::Sm80] {
            if let Some((regs, rr)) = compile_check(&g, arch) {
                eprintln!("{} {arch}: {regs} registers (reduce {rr})", g.name);
            }
        }
    }
}

/// A fusion with an aux store of the accumulator (the GPU test's exact path) compiles too.
#[test]
fn aux_store_fusion_compiles() {
    let root = Node::col_broadcast("a_scale", Element::F32, false)
        * (Node::row_broadcast("b_scale", Element::F32, false) * Node::acc().store("acc_out", Element::S32));
    let f = Fusion::new(root).unwrap().with_name("scaledmm_rowcol_accout").unwrap();
    let c = cfg(
        Element::F16,
        ScaleKind::PerRow,
        ScaleKind::PerCol,
        false,
        [64, 64, 128],
        [2, 2],
    )
    .with_fusion(f);
    let g = generate(&c).unwrap();
    assert!(g.source.contains("p.acc_out["));
    compile_check(&g, Arch::Sm80);
}

#[test]
fn catalogue_units_compile_without_warnings() {
    use rcute_kernel::testing::toolkit_for_test;
    use rcute_kernel::{compile, Arch, CompileOptions};
    if toolkit_for_test().is_none() {
        return;
    }
    for (cfg, arch) in rcute_kernel::catalogue::scaled_mm_sm80_configs() {
        let g = rcute_kernel::gemm_sm80::generate(&cfg).unwrap();
        for a in [arch, Arch::Sm90a] {
            let c = compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(a)).unwrap();
            let warnings: Vec<&str> = c.log.lines().filter(|l| l.contains("warning")).collect();
            assert!(
                warnings.is_empty(),
                "{} for {}: NVRTC warnings:\n{}",
                g.name,
                a.as_str(),
                warnings.join("\n")
            );
        }
    }
}
