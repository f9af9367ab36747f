//! CPU-side checks of the SM90 GEMM generator: names, plans, error cases, and NVRTC
//! compilation of every schedule for sm_90a (no spills, no local memory; HGMMA,
//! UTMALDG, UTMASTG and STSM in the SASS, no R2UR inside a wgmma batch, and a bound on the
//! k-tile loop's instructions), and the consumers' descriptor iteration against the encoder.

use rcute_atom::Element;
use rcute_kernel::gemm_sm90::{generate, GemmSm90Config, GeneratedGemmSm90, Sm90Schedule};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::{compile, Arch, CompileOptions};

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
            v.push(scaled_8bit(tile, sched, ab));
        }
    }
    let mut f = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
    f.ab = Element::F16;
    f.cd = Element::F16;
    f = f.without_c();
    v.push(f);
    // Two 160-wide wgmma atoms along N, B in two TMA boxes a stage (cuBLAS's 128x320 tile),
    // alone and on a 2x1 cluster (each CTA multicasts two boxes of 80 rows).
    v.push(GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative));
    let mut c = GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative).without_c();
    c.cluster = [2, 1];
    v.push(c);
    v.extend(stream_k_configs());
    v
}

/// The hybrid stream-K units: the bf16 rules' cooperative tile with and without C, and two
/// m64 atoms per warpgroup.
fn stream_k_configs() -> Vec<GemmSm90Config> {
    let mut v = vec![];
    for (tile, with_c) in [([128, 256, 64], true), ([128, 256, 64], false), ([256, 128, 64], true)] {
        let mut c = GemmSm90Config::bf16(tile, Sm90Schedule::Cooperative);
        c.stream_k = true;
        v.push(if with_c { c } else { c.without_c() });
    }
    // Ping-pong (one warpgroup an item): bf16 with and without C, and the FP8 / INT8
    // scaled-mm fusions at the 128x128x128 tile of the H200 table's e4m3 and s8 entries.
    for with_c in [true, false] {
        let mut c = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong);
        c.stream_k = true;
        v.push(if with_c { c } else { c.without_c() });
    }
    for ab in [Element::E4M3, Element::S8] {
        let mut c = scaled_8bit([128, 128, 128], Sm90Schedule::PingPong, ab);
        c.stream_k = true;
        v.push(c);
    }
    v
}

/// An 8-bit (`ab`: INT8 or FP8) GEMM with the scaled_mm fusion (per-row and per-column
/// scales, bf16 out) on `tile` and `sched`.
fn scaled_8bit(tile: [i64; 3], sched: Sm90Schedule, ab: Element) -> GemmSm90Config {
    let mut c = GemmSm90Config::bf16(tile, sched);
    c.ab = ab;
    c.fusion = rcute_collective::Fusion::scaled_mm(
        rcute_collective::fusion::ScaleKind::PerRow,
        rcute_collective::fusion::ScaleKind::PerCol,
        Some(Element::BF16),
    )
    .unwrap();
    c
}

#[test]
fn dump_one() {
    let i = std::env::var("RCUTE_DUMP_INDEX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let g = generate(&configs()[i]).unwrap();
    if let Ok(path) = std::env::var("RCUTE_DUMP") {
        std::fs::write(path, &g.source).unwrap();
    }
}

fn compile_check(g: &GeneratedGemmSm90) {
    let Some(tk) = toolkit_for_test() else { return };
    let ck = compile_clean(tk, &g.name, &g.source, Arch::Sm90a);
    println!("{}: {} B smem", g.name, g.smem_bytes);
    let log = &ck.compiled.log;
    assert!(!log.contains("serialized"), "{}: wgmma serialized:\n{log}", g.name);
    let mma = match g.config.ab {
        Element::S8 => "IGMMA",
        Element::E4M3 | Element::E5M2 => "QGMMA",
        _ => "HGMMA",
    };
    ck.assert_opcodes(&[mma, "UTMALDG", "UTMASTG", "STSM", "SYNCS"], &[]);
    if let Some(k) = &ck.sass {
        if g.config.stream_k {
            // the last-arriver reduction: the counter's atomic and the barrier that
            // broadcasts who is last; no CTA waits on another (no acquire-load spin)
            ck.assert_opcodes(&["ATOMG", "BAR"], &[]);
            assert!(
                k.instructions.iter().any(|i| i.opcode.starts_with("BAR.RED.OR")),
                "{}: no BAR.RED.OR",
                g.name
            );
        }
        if g.plan.bc_floats > 0 && !g.config.stream_k {
            broadcast_loads_once_per_tile(g, k, mma);
        }
        let moves = r2ur_inside_wgmma_batches(k, mma);
        assert_eq!(
            moves, 0,
            "{}: {moves} R2UR between the wgmmas of a batch (descriptors computed per thread)",
            g.name
        );
        if g.config.schedule == Sm90Schedule::Cooperative && g.config.mma_pipe == 1 {
            let divisions = divisions_in_mma_tail(k, mma);
            assert!(
                divisions > 0,
                "{}: no division of the tile walk between the k-tile loop and the mma_tail wait",
                g.name
            );
        }
        let (per_ktile, bound) = ktile_instructions(g, k, mma);
        println!("{}: {per_ktile} SASS instructions per k-tile (bound {bound})", g.name);
        assert!(
            per_ktile <= bound,
            "{}: the k-tile loop issues {per_ktile} instructions per k-tile, more than {bound}",
            g.name
        );
    }
}

/// SASS instructions per k-tile of the consumer's k-tile loop (the innermost loop around
/// the `wgmma`s; ptxas may unroll it, so the count is scaled by the k-tiles it covers), and
/// its bound: 6 per `wgmma` (the descriptors' low word adds and ptxas's reloads of their
/// constant high words, 2 to 4 uniform instructions between two wgmmas), 24 for the
/// stage's wait, fence, commit, wait_group, release and `PipelineState` step, 8 per CTA of
/// a cluster (the remote releases). Rebuilding each descriptor from the stage address
/// (`(addr & 0x3FFFF) >> 4 | constant` per wgmma, hopper3's generator) took 67-100 per
/// k-tile for these units and fails it.
fn ktile_instructions(g: &GeneratedGemmSm90, k: &rcute_kernel::sass::SassKernel, mma: &str) -> (usize, usize) {
    let body = k
        .innermost_loop_with(mma)
        .unwrap_or_else(|| panic!("{}: no loop around {mma}", g.name));
    let per_ktile_mmas = (g.plan.m_atoms * g.plan.descriptors.kblocks) as usize;
    let mmas = body.iter().filter(|i| i.base_opcode() == mma).count();
    assert_eq!(mmas % per_ktile_mmas, 0, "{}: {mmas} {mma} in the k-tile loop", g.name);
    let [cm, cn] = g.config.cluster;
    let ctas = (cm * cn) as usize;
    let cluster = if ctas > 1 { 8 * ctas } else { 0 };
    (body.len() * per_ktile_mmas / mmas, 6 * per_ktile_mmas + 24 + cluster)
}

/// `MUFU.RCP` instructions (the tile walk's divisions by run-time extents) between the end
/// of the consumers' k-tile loop and their `mma_tail` wait (`WARPGROUP.DEPBAR.LE gsb0,
/// 0x0`): the cooperative consumers decode the next work item's tile there, while the
/// tensor cores still run the last batch, instead of at the next tile's head, when the
/// tensor cores are idle (BENCHMARKS.md, "Session 14 (helper hopper5)"). 0 before.
fn divisions_in_mma_tail(k: &rcute_kernel::sass::SassKernel, mma: &str) -> usize {
    let body = k.innermost_loop_with(mma).expect("a k-tile loop");
    let end = body.last().expect("a non-empty loop").offset;
    k.instructions
        .iter()
        .skip_while(|i| i.offset <= end)
        .take_while(|i| !(i.opcode.starts_with("WARPGROUP.DEPBAR") && i.operands.contains("0x0")))
        .filter(|i| i.opcode.starts_with("MUFU.RCP"))
        .count()
}

/// The fusion's broadcast vectors (scales, bias) are read from global memory once per tile:
/// the kernel's only `LDG`s are the staging loads of `rc_fusion_broadcast` (one per staging
/// register of a thread), all ahead of the first `wgmma`, so their latency hides behind the
/// mainloop and the epilogue reads the vectors from shared memory. A per-element load in
/// the epilogue (one `__ldg` per accumulator behind each store's bounds check, which made
/// the grouped MoE epilogue a chain of dependent L2 round trips: BENCHMARKS.md, "Session 18
/// (helper moe8)") adds `LDG`s after the mainloop and fails this.
fn broadcast_loads_once_per_tile(g: &GeneratedGemmSm90, k: &rcute_kernel::sass::SassKernel, mma: &str) {
    let staged = g.source.matches("? rc_fusion_broadcast(p, ").count();
    assert!(staged > 0, "{}: no broadcast staging loads in the source", g.name);
    let loads: Vec<_> = k.instructions.iter().filter(|i| i.base_opcode() == "LDG").collect();
    assert_eq!(
        loads.len(),
        staged,
        "{}: {} LDG in the SASS, {staged} staging loads in the source",
        g.name,
        loads.len()
    );
    let first_mma = k
        .instructions
        .iter()
        .find(|i| i.base_opcode() == mma)
        .expect("a wgmma")
        .offset;
    for l in &loads {
        assert!(
            l.offset < first_mma,
            "{}: LDG at {:#x} after the first {mma} at {first_mma:#x}",
            g.name,
            l.offset
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

/// The split-K reduction kernel is in the units that can run split-K only: a stream-K unit
/// splits K itself (its launch refuses `split_k > 1`), so nothing would launch one there.
#[test]
fn only_split_k_capable_units_carry_the_reduction() {
    for cfg in configs() {
        let g = generate(&cfg).unwrap();
        let reduce = format!("{}_splitk_reduce", g.name);
        let want = (!cfg.stream_k).then_some(&reduce);
        assert_eq!(g.reduce_name.as_ref(), want, "{}", g.name);
        assert_eq!(
            g.source.contains(&format!("void {reduce}(")),
            !cfg.stream_k,
            "{}",
            g.name
        );
        assert_eq!(g.source.matches("__global__").count(), 1 + usize::from(!cfg.stream_k));
    }
}

#[test]
fn every_schedule_compiles_for_sm90a() {
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
    // More than 160 accumulators a thread (ping-pong 128x320: 320), and several wgmma atoms
    // along N outside the plain GEMM (stream-K).
    bad(&|c| (c.tile, c.schedule) = ([128, 320, 64], Sm90Schedule::PingPong));
    bad(&|c| (c.tile, c.stream_k) = ([128, 320, 64], true));
    // Stream-K: the persistent schedules without a cluster only, 2 to 16 ranges a tile.
    bad(&|c| (c.schedule, c.stream_k) = (Sm90Schedule::WarpSpecialized, true));
    bad(&|c| (c.schedule, c.cluster, c.stream_k) = (Sm90Schedule::PingPong, [2, 1], true));
    bad(&|c| (c.stream_k, c.stream_k_parts) = (true, 1));
    bad(&|c| (c.stream_k, c.stream_k_parts) = (true, 17));
    for parts in [2, 16] {
        let mut c = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong);
        (c.stream_k, c.stream_k_parts) = (true, parts);
        let name = generate(&c).unwrap().name;
        assert_eq!(name.ends_with("_sk"), parts == 2, "{name}");
        assert_eq!(name.ends_with("_sk16"), parts == 16, "{name}");
    }
}

/// A tile wider than one `wgmma` atom: cuBLAS's 128x320 cooperative tile is two 160-wide
/// atoms along N, each into its run of 80 of the thread's 160 accumulators, and B in two
/// TMA boxes of 160 rows a stage (on a 2x1 cluster each CTA multicasts two boxes of 80
/// rows, its half of the tile); the 128x256 tile keeps one atom and one box.
#[test]
fn wide_tiles_issue_several_atoms_and_boxes() {
    let g = generate(&GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative)).unwrap();
    let ml = &g.plan.mainloop;
    assert_eq!((ml.n_atoms, ml.tma_boxes_per_stage_b, ml.tma_box_b[1]), (2, 2, 160));
    assert_eq!(g.plan.descriptors.natom_field, 160 * 128 / 16);
    assert!(g.source.contains("float acc[1][160];"), "{}", g.name);
    assert!(g.source.contains("rc_wgmma_m64n160k16_f32_bf16_bf16_ss_k_k"));
    assert!(g.source.contains("*reinterpret_cast<float (*)[80]>(acc[a] + j * 80)"));
    assert!(g.source.contains("n0 + b_rows + q * 160"));
    let mut c = GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative);
    c.cluster = [2, 1];
    let g = generate(&c).unwrap();
    assert_eq!(g.plan.mainloop.tma_multicast_box_b[1], 80);
    assert!(g.source.contains("const int b_rows = rank_m * 160;"));
    assert!(g.source.contains("n0 + b_rows + q * 80"));
    let g = generate(&GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative)).unwrap();
    assert_eq!(g.plan.mainloop.n_atoms, 1);
    assert!(!g.source.contains("boxes of") && !g.source.contains("acc[a] + j"));
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

/// The consumers' descriptor iteration equals the encoder's descriptor of every address a
/// `wgmma` reads: the low word built at the tile's first stage as the kernel builds it
/// (`LBO | (addr & 0x3FFFF) >> 4` at the warpgroup's first row), carried around the stage
/// ring twice by `rc_pipe_next`'s steps and advanced by each `wgmma`'s m64 atom and k-block
/// offset, for a shared window at cluster ranks 0, 1 and 7 (bits 24 and up of the address)
/// and both alignments of the dynamic shared memory. A carry out of the 14-bit start
/// address field would change the leading byte offset and fail the comparison.
#[test]
fn descriptor_iteration_matches_the_encoder() {
    use rcute_atom::GmmaDescriptor;
    use rcute_kernel::gemm_sm90::{plan, SMEM_SYSTEM_RESERVE};
    for cfg in configs() {
        let p = plan(&cfg).unwrap();
        let d = &p.descriptors;
        let eb = cfg.ab.bytes();
        let row_bytes = cfg.tile[2] as u32 * eb;
        let kblock_bytes = p.mma.shape_mnk[2] as u32 * eb;
        let [sa, sb] = p.stage_bytes.map(|b| b as u32);
        let [oa, ob] = [p.offsets[0] as u32, p.offsets[1] as u32];
        let s = p.stages as u32;
        let (n_atoms, atom_n) = (p.mainloop.n_atoms, p.mma.shape_mnk[1] as u32);
        let low = |w: u32, addr: u32| w | ((addr & 0x3FFFF) >> 4);
        let full = |hi: u32, lo: u32| ((hi as u64) << 32) | lo as u64;
        let enc = |desc: &GmmaDescriptor, addr: u32| {
            GmmaDescriptor {
                start_address: addr & 0x3FFFF,
                ..*desc
            }
            .encode()
            .unwrap()
        };
        let warpgroups = if cfg.schedule == Sm90Schedule::Cooperative {
            p.consumers
        } else {
            1
        };
        for rank in [0u32, 1, 7] {
            for window in [SMEM_SYSTEM_RESERVE as u32, SMEM_SYSTEM_RESERVE as u32 + 1024] {
                let smem = (rank << 24) + window;
                for cw in 0..warpgroups as u32 {
                    let wg_bytes = cw * p.wg_rows as u32 * row_bytes;
                    for first in 0..s {
                        let mut stage = first;
                        let mut a_desc = low(d.a_words[0], smem + oa + stage * sa + wg_bytes);
                        let mut b_desc = low(d.b_words[0], smem + ob + stage * sb);
                        for _ in 0..2 * s {
                            for kb in 0..d.kblocks {
                                for (a, j) in (0..p.m_atoms).flat_map(|a| (0..n_atoms).map(move |j| (a, j))) {
                                    let [da, db] = d.batch_offsets(kb, a);
                                    let db = db + j as u32 * d.natom_field;
                                    let col = kb as u32 * kblock_bytes;
                                    let addr_a = smem + oa + stage * sa + wg_bytes + a as u32 * 64 * row_bytes + col;
                                    let addr_b = smem + ob + stage * sb + j as u32 * atom_n * row_bytes + col;
                                    let ctx = format!(
                                        "{:?}: rank {rank} window {window} cw {cw} stage {stage} kb {kb} atom {a} n-atom {j}",
                                        cfg.tile
                                    );
                                    assert_eq!(full(d.a_words[1], a_desc + da), enc(&d.a, addr_a), "A {ctx}");
                                    assert_eq!(full(d.b_words[1], b_desc + db), enc(&d.b, addr_b), "B {ctx}");
                                    assert!(((a_desc + da) & 0x3FFF).max((b_desc + db) & 0x3FFF) <= d.max_start_field);
                                }
                            }
                            // rc_pipe_next
                            a_desc += d.stage_field[0];
                            b_desc += d.stage_field[1];
                            stage += 1;
                            if stage == s {
                                stage = 0;
                                a_desc -= s * d.stage_field[0];
                                b_desc -= s * d.stage_field[1];
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A plan whose stages would put a descriptor's start address past the 14-bit field (256
/// KiB of shared window, reachable only with a capacity above the GPU's) is refused with a
/// typed error instead of generating descriptors that carry into the leading byte offset.
#[test]
fn descriptor_start_field_overflow_is_a_typed_error() {
    use rcute_kernel::gemm_sm80::GemmError;
    let mut c = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
    (c.smem_capacity, c.stages) = (1 << 20, Some(8));
    match generate(&c) {
        Err(GemmError::Config(m)) => assert!(m.contains("14-bit start address field"), "{m}"),
        other => panic!("expected a configuration error, got {:?}", other.map(|g| g.name)),
    }
    c.stages = Some(4);
    assert!(generate(&c).is_ok());
}
