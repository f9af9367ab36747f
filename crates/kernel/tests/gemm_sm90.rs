//! CPU-side checks of the SM90 GEMM generator: names, plans, error cases, and NVRTC
//! compilation of every schedule for sm_90a (no spills, no local memory; HGMMA,
//! UTMALDG, UTMASTG and STSM in the SASS, and no R2UR inside a wgmma batch).

use rcute_atom::Element;
use rcute_kernel::gemm_sm90::{generate, GemmSm90Config, GeneratedGemmSm90, Sm90Schedule};
use rcute_kernel::testing::toolkit_for_test;
use rcute_kernel::{compile, Arch, CompileOptions, Sass};

fn configs() -> Vec<GemmSm90Config> {
    let mut v = vec![
        GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative),
        GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative),
        GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::WarpSpecialized),
        GemmSm90Config::bf16([64, 128, 64], Sm90Schedule::PingPong),
        GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong),
        // Two m64 atoms per warpgroup: each warpgroup's rows hold two 64-row group subtiles.
        GemmSm90Config::bf16([256, 128, 64], Sm90Schedule::Cooperative),
    ];
    for cluster in [[2, 1], [1, 2]] {
        let mut c = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
        c.cluster = cluster;
        v.push(c);
    }
    let mut c = GemmSm90Config::bf16([64, 128, 64], Sm90Schedule::PingPong);
    c.cluster = [2, 2];
    v.push(c);
    let mut c = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
    (c.mma_pipe, c.cluster) = (0, [2, 1]);
    v.push(c);
    // 8-bit inputs (BK = 128): INT8 and FP8 scaled GEMMs with the scaled_mm fusion.
    for ab in [Element::S8, Element::E4M3] {
        for (tile, sched) in [
            ([128, 256, 128], Sm90Schedule::Cooperative),
            ([64, 128, 128], Sm90Schedule::PingPong),
            ([128, 128, 128], Sm90Schedule::PingPong),
        ] {
            let mut c = GemmSm90Config::bf16(tile, sched);
            c.ab = ab;
            c.fusion = rcute_collective::Fusion::scaled_mm(
                rcute_collective::fusion::ScaleKind::PerRow,
                rcute_collective::fusion::ScaleKind::PerCol,
                Some(Element::BF16),
            )
            .unwrap();
            v.push(c);
        }
    }
    let mut f = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
    f.ab = Element::F16;
    f.cd = Element::F16;
    f = f.without_c();
    v.push(f);
    v
}

#[test]
fn dump_one() {
    let g = generate(&configs()[0]).unwrap();
    if let Ok(path) = std::env::var("RCUTE_DUMP") {
        std::fs::write(path, &g.source).unwrap();
    }
}

fn compile_check(g: &GeneratedGemmSm90) {
    let Some(tk) = toolkit_for_test() else { return };
    let c = compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{} does not compile: {e}", g.name));
    let r = c
        .resources
        .kernel(&g.name)
        .unwrap_or_else(|| panic!("no resources for {}", g.name));
    println!("{}: {} registers, {} B smem", g.name, r.registers, g.smem_bytes);
    assert!(
        !c.log.contains("serialized"),
        "{}: wgmma serialized:\n{}",
        g.name,
        c.log
    );
    assert_eq!(
        r.spill_stores_bytes + r.spill_loads_bytes,
        0,
        "{} spills: {r:?}",
        g.name
    );
    assert_eq!(r.stack_frame_bytes, 0, "{} stack frame", g.name);
    if let Some(objdump) = tk.cuobjdump.as_ref() {
        let sass = Sass::disassemble_with(objdump, &c.cubin).expect("cuobjdump");
        assert!(!sass.uses_local_memory(), "{}: local memory", g.name);
        let k = sass.kernel(&g.name).expect("kernel in SASS");
        let mma = match g.config.ab {
            Element::S8 => "IGMMA",
            Element::E4M3 | Element::E5M2 => "QGMMA",
            _ => "HGMMA",
        };
        for op in [mma, "UTMALDG", "UTMASTG", "STSM", "SYNCS"] {
            assert!(k.contains_opcode(op), "{}: no {op}", g.name);
        }
        let moves = r2ur_inside_wgmma_batches(k, mma);
        assert_eq!(
            moves, 0,
            "{}: {moves} R2UR between the wgmmas of a batch (descriptors computed per thread)",
            g.name
        );
    }
}

/// `R2UR` instructions between consecutive `mma` instructions of one batch (no branch and
/// no `wgmma` wait between them). With warp-uniform warpgroup indices the descriptors are
/// computed in uniform registers; a per-thread index (`threadIdx.x / 128`) made ptxas
/// compute them in vector registers and move each into uniform ones before every wgmma,
/// which left the ping-pong consumers issue-bound (BENCHMARKS.md, helper hopper3).
fn r2ur_inside_wgmma_batches(k: &rcute_kernel::sass::SassKernel, mma: &str) -> usize {
    let mut moves = 0;
    let mut pending = None;
    for i in &k.instructions {
        let op = i.base_opcode();
        if op == mma {
            moves += pending.take().unwrap_or(0);
            pending = Some(0);
        } else if op == "BRA" || i.opcode.starts_with("WARPGROUP.DEPBAR") {
            pending = None;
        } else if op == "R2UR" {
            if let Some(n) = pending.as_mut() {
                *n += 1;
            }
        }
    }
    moves
}

#[test]
fn every_schedule_compiles_for_sm90a() {
    if let Ok(dir) = std::env::var("RCUTE_SASS_DIR") {
        dump_kloops(&dir);
    }
    for cfg in configs() {
        let g = generate(&cfg).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
        compile_check(&g);
    }
}

fn args(m: i32, n: i32, k: i32) -> rcute_kernel::gemm_sm80::GemmArgs {
    rcute_kernel::gemm_sm80::GemmArgs::tn(m, n, k, 1, 0x1000, 0x2000, 0, 0x3000)
}

#[test]
fn arguments_are_checked_with_typed_errors() {
    use rcute_kernel::gemm_sm80::GemmError;
    let g = generate(&GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative)).unwrap();
    assert!(g.validate(&args(100, 64, 64)).is_ok());
    assert!(g.tensor_maps(&args(100, 64, 64)).is_ok());
    // TMA needs 16-byte contiguous extents: N and K multiples of 8 bf16.
    assert!(matches!(g.validate(&args(100, 60, 64)), Err(GemmError::Alignment(_))));
    assert!(matches!(g.validate(&args(100, 64, 60)), Err(GemmError::Alignment(_))));
    assert!(matches!(g.validate(&args(0, 64, 64)), Err(GemmError::Shape(_))));
    let mut a = args(100, 64, 64);
    a.lda = 68;
    assert!(matches!(g.validate(&a), Err(GemmError::Alignment(_))));
    let mut a = args(100, 64, 64);
    a.a = 0x1008;
    assert!(matches!(g.validate(&a), Err(GemmError::Alignment(_))));
    let mut a = args(100, 64, 64);
    a.split_k = 2;
    assert!(matches!(g.validate(&a), Err(GemmError::Shape(_))));
    let mut a = args(100, 64, 64);
    a.ldd = 32;
    assert!(matches!(g.validate(&a), Err(GemmError::Shape(_))));
    // beta != 0 on a kernel generated without C.
    let mut cfg = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative);
    cfg = cfg.without_c();
    let g = generate(&cfg).unwrap();
    let mut a = args(100, 64, 64);
    a.beta = 1.0;
    assert!(matches!(g.validate(&a), Err(GemmError::Shape(_))));
}

#[test]
fn configurations_are_checked_with_typed_errors() {
    use rcute_kernel::gemm_sm80::GemmError;
    let bad = |f: &dyn Fn(&mut GemmSm90Config)| {
        let mut c = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative);
        f(&mut c);
        assert!(
            matches!(generate(&c), Err(GemmError::Config(_))),
            "{c:?} should be refused"
        );
    };
    bad(&|c| c.tile = [128, 128, 32]);
    bad(&|c| c.tile = [96, 128, 64]);
    bad(&|c| c.tile = [128, 136, 64]);
    bad(&|c| c.ab = Element::F32);
    bad(&|c| c.cd = Element::S8);
    bad(&|c| c.stages = Some(1));
    bad(&|c| c.stages = Some(9));
    bad(&|c| c.epi_tile = Some([128, 24]));
    bad(&|c| c.epi_tile = Some([96, 32]));
    bad(&|c| c.mma_pipe = 2);
    bad(&|c| c.smem_capacity = 64 * 1024);
    bad(&|c| c.cluster = [3, 1]);
    bad(&|c| c.cluster = [4, 4]);
}

#[test]
fn epilogue_offsets_match_the_builders_smem_layout() {
    use rcute_kernel::gemm_sm90::{epi_byte_offset, plan};
    use rcute_layout::{Int, Tuple};
    for cfg in configs() {
        let p = plan(&cfg).unwrap();
        let eb = cfg.cd.bytes() as i64;
        let [em, en] = p.epi_tile;
        let l = &p.epilogue.smem_layout_d;
        for r in 0..em {
            for c in 0..en {
                let crd = Tuple::node([
                    Tuple::Leaf(Int::Static(r)),
                    Tuple::Leaf(Int::Static(c)),
                    Tuple::Leaf(Int::Static(0)),
                ]);
                let want = l.crd2idx(&crd).unwrap().as_static().unwrap() * eb;
                assert_eq!(epi_byte_offset(&p, r, c, eb), want, "{cfg:?} ({r},{c}) in {l}");
            }
        }
    }
}

#[test]
fn generated_units_compile_without_warnings() {
    if toolkit_for_test().is_none() {
        return;
    }
    for cfg in configs() {
        let g = generate(&cfg).unwrap();
        let c = compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(Arch::Sm90a)).unwrap();
        let warnings: Vec<&str> = c.log.lines().filter(|l| l.contains("warning")).collect();
        assert!(
            warnings.is_empty(),
            "{}: NVRTC warnings:\n{}",
            g.name,
            warnings.join("\n")
        );
    }
}

/// The cooperative epilogue stages and stores per consumer warpgroup: two groups of
/// half-height subtiles in the collective's bytes, 128-thread named barriers with one id per
/// warpgroup (no 256-thread barrier left), a TMA-issuing thread per warpgroup and C / D
/// boxes of the group's subtile.
#[test]
fn cooperative_epilogue_stores_per_warpgroup() {
    for cfg in configs() {
        let g = generate(&cfg).unwrap();
        let p = &g.plan;
        let [em, en] = p.epi_tile;
        let want = match cfg.schedule {
            Sm90Schedule::Cooperative => (2, [em / 2, en], p.epilogue.tensor_bytes / 2),
            Sm90Schedule::PingPong => (2, [em, en], p.epilogue.tensor_bytes),
            _ => (1, [em, en], p.epilogue.tensor_bytes),
        };
        assert_eq!((p.epi_groups, p.group_tile, p.epi_set_bytes), want, "{}", g.name);
        let maps = g.tensor_maps(&args(1000, 1024, 512)).unwrap();
        for m in &maps[2..] {
            assert_eq!(m.box_dim, vec![en as u32, p.group_tile[0] as u32, 1], "{}", g.name);
        }
        if cfg.schedule == Sm90Schedule::Cooperative {
            assert!(
                g.source.contains("const uint32_t epi_bar = 1u + (uint32_t)cw;"),
                "{}",
                g.name
            );
            assert!(
                g.source.contains("const bool epi_leader = (threadIdx.x % 128) == 0;"),
                "{}",
                g.name
            );
            assert!(g.source.contains("rc_named_barrier_sync(epi_bar, 128u)"), "{}", g.name);
            assert!(!g.source.contains("256u)"), "{}: a 256-thread barrier is left", g.name);
        }
    }
}

/// The staging layout is free of bank conflicts: for every configuration, the 32 lane
/// addresses of each `stmatrix.x4` / `ldmatrix.x4` (four 8x8 matrices, lane `8q + r`
/// addressing row `r` of matrix `q`, as the kernel computes them) put each matrix's eight
/// 16-byte rows in eight distinct groups of four 4-byte banks.
#[test]
fn epilogue_staging_is_free_of_bank_conflicts() {
    use rcute_kernel::gemm_sm90::{epi_byte_offset, plan};
    for cfg in configs() {
        let p = plan(&cfg).unwrap();
        let eb = cfg.cd.bytes() as i64;
        let [gem, en] = p.group_tile;
        for r0 in (0..gem).step_by(16) {
            for jj in 0..en / 16 {
                for q in 0..4 {
                    let mut banks = std::collections::BTreeSet::new();
                    for r in 0..8 {
                        // Matrix q: rows +8 for q odd, columns +8 for q >= 2 (the kernel's
                        // r_sub and (lane >> 4) * 16 bytes).
                        let row = r0 + 8 * (q % 2) + r;
                        let col = 16 * jj + 8 * (q / 2);
                        let o = epi_byte_offset(&p, row, col, eb);
                        assert_eq!(o % 16, 0);
                        for b in 0..4 {
                            banks.insert((o / 4 + b) % 32);
                        }
                    }
                    assert_eq!(banks.len(), 32, "{cfg:?}: rows {r0}.. block {jj} matrix {q}");
                }
            }
        }
    }
}

/// The k-tile loop of a kernel: the shortest backward branch's range (target ..= branch)
/// that holds an `mma` instruction; `(instructions, mmas)` in it.
fn kloop(k: &rcute_kernel::sass::SassKernel, mma: &str) -> Option<(usize, usize, u32, u32)> {
    let ins = &k.instructions;
    let mut best: Option<(usize, usize, u32, u32)> = None;
    for b in ins.iter().filter(|i| i.base_opcode() == "BRA") {
        let Some(t) = b.operands.split_whitespace().find_map(|w| {
            u32::from_str_radix(w.trim_start_matches("0x").trim_end_matches(';'), 16)
                .ok()
                .filter(|_| w.starts_with("0x"))
        }) else {
            continue;
        };
        if t > b.offset {
            continue;
        }
        let body: Vec<_> = ins.iter().filter(|i| i.offset >= t && i.offset <= b.offset).collect();
        let mmas = body.iter().filter(|i| i.base_opcode() == mma).count();
        if mmas > 0 && best.is_none_or(|x| body.len() < x.0) {
            best = Some((body.len(), mmas, t, b.offset));
        }
    }
    best
}

fn dump_kloops(dir: &str) {
    let Some(tk) = toolkit_for_test() else { return };
    let objdump = tk.cuobjdump.as_ref().expect("cuobjdump");
    for cfg in configs() {
        let g = generate(&cfg).unwrap();
        let c = compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(Arch::Sm90a)).unwrap();
        let sass = Sass::disassemble_with(objdump, &c.cubin).unwrap();
        let k = sass.kernel(&g.name).unwrap();
        let mma = match g.config.ab {
            Element::S8 => "IGMMA",
            Element::E4M3 | Element::E5M2 => "QGMMA",
            _ => "HGMMA",
        };
        let l = kloop(k, mma);
        println!(
            "KLOOP {} {:?} mma/ktile {}",
            g.name,
            l,
            g.plan.m_atoms * (cfg.tile[2] / g.plan.mma.shape_mnk[2])
        );
        let mut text = String::new();
        for i in &k.instructions {
            text.push_str(&format!(
                "/*{:04x}*/ {} {} {}\n",
                i.offset,
                i.predicate.clone().unwrap_or_default(),
                i.opcode,
                i.operands
            ));
        }
        std::fs::write(format!("{dir}/{}.sass", g.name), text).unwrap();
    }
}
