//! GPU verification of the generated SM90 GEMM kernels (`rcute_kernel::gemm_sm90`): every
//! schedule (warp-specialized, cooperative, ping-pong), with and without C, bf16 and f16;
//! random shapes (M, N, K not multiples of the tile, M = 1, K = 0; N and K multiples of 8
//! as TMA requires), batches, padded leading dimensions, alpha / beta (null C
//! when beta = 0), split-K (2 to 5 splits, through the reduction kernel), and problems
//! larger than the persistent grid (the tile walk wraps).
//! Outputs are poisoned before each launch; every in-bounds element must be written and
//! every padding element left alone; results are compared with a float64 CPU reference:
//! ||out - ref|| / ||ref|| < 1e-2.
//!
//! Skips with a printed reason without a GPU or without sm_90 (`RCUTE_REQUIRE_GPU=1`
//! makes that a failure). `RCUTE_SEED` fixes the random seed, which is printed.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use rcute_atom::Element;
use rcute_kernel::gemm_sm80::{GemmArgs, GemmError, SplitKMode};
use rcute_kernel::gemm_sm90::{
    generate, launch_fused, launch_split_k, FusionArgs, GemmSm90Config, GeneratedGemmSm90, Sm90Schedule,
};
use rcute_kernel::testing::gpu_for_test;
use rcute_kernel::tile_scheduler::RasterOrderOption;
use rcute_kernel::{Arch, CompileOptions, Function, Gpu, KernelCache};
use std::sync::Arc;

#[derive(Clone)]
struct Rng(u64);
impl Rng {
    fn new(name: &str) -> Rng {
        let seed = std::env::var("RCUTE_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(7)
            });
        eprintln!("{name}: RCUTE_SEED={seed}");
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

fn encode(e: Element, v: f64) -> [u8; 2] {
    match e {
        Element::BF16 => half::bf16::from_f64(v).to_bits().to_le_bytes(),
        _ => half::f16::from_f64(v).to_bits().to_le_bytes(),
    }
}
fn decode(e: Element, b: &[u8]) -> f64 {
    let bits = u16::from_le_bytes([b[0], b[1]]);
    match e {
        Element::BF16 => half::bf16::from_bits(bits).to_f64(),
        _ => half::f16::from_bits(bits).to_f64(),
    }
}

struct Kernel {
    g: GeneratedGemmSm90,
    f: Function,
    /// The split-K reduction (`None` for stream-K units: they have none).
    reduce: Option<Function>,
}

/// Launch `k`: with its split-K reduction where the unit has one, else the GEMM alone.
///
/// # Safety
///
/// As for [`launch_split_k`].
unsafe fn launch_kernel(k: &Kernel, args: &GemmArgs, fa: &FusionArgs, ctas: u32) -> Result<(), GemmError> {
    match &k.reduce {
        // SAFETY: as documented for this function.
        Some(reduce) => unsafe { launch_split_k(&k.f, reduce, &k.g, args, fa, ctas) },
        // SAFETY: as documented for this function.
        None => unsafe { launch_fused(&k.f, &k.g, args, fa, ctas) },
    }
}

fn build(gpu: &Gpu, cfg: &GemmSm90Config) -> Kernel {
    let g = generate(cfg).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    let compiled = KernelCache::global()
        .get_or_compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{}: {e}", g.name));
    let module = gpu.load(&compiled).expect("load");
    let f = module.function(&g.name).expect("kernel");
    let reduce = g
        .reduce_name
        .as_ref()
        .map(|r| module.function(r).expect("reduce kernel"));
    eprintln!(
        "{}: {} registers, {} B dynamic smem",
        g.name,
        f.resources().registers,
        g.smem_bytes
    );
    Kernel { g, f, reduce }
}

#[derive(Clone, Copy, Debug)]
struct Case {
    m: i64,
    n: i64,
    k: i64,
    l: i64,
    pad: [i64; 4],
    alpha: f32,
    beta: f32,
    /// Persistent CTAs (fewer than tiles exercises the tile walk).
    ctas: u32,
    /// K splits.
    split: u32,
}

fn upload(stream: &Arc<CudaStream>, bytes: &[u8]) -> CudaSlice<u8> {
    stream
        .clone_htod(if bytes.is_empty() { &[0u8; 16][..] } else { bytes })
        .expect("htod")
}

/// Run one case against the float64 reference; returns the relative error and D's bytes.
fn run_case(gpu: &Gpu, k: &Kernel, c: Case, rng: &mut Rng) -> (f64, Vec<u8>) {
    let e = k.g.config.ab;
    let ed = k.g.config.cd;
    let stream = gpu.stream();
    let (m, n, kk, l) = (c.m, c.n, c.k, c.l);
    let r8 = |x: i64| (x + 7) / 8 * 8;
    let lda = r8(kk.max(1)) + 8 * c.pad[0];
    let ldb = r8(kk.max(1)) + 8 * c.pad[1];
    let ldc = r8(n) + 8 * c.pad[2];
    let ldd = r8(n) + 8 * c.pad[3];
    let (sa, sb, sc, sd) = (m * lda, n * ldb, m * ldc, m * ldd);
    let fill = |rng: &mut Rng, count: i64, e: Element| -> (Vec<f64>, Vec<u8>) {
        let vals: Vec<f64> = (0..count).map(|_| decode(e, &encode(e, rng.unit()))).collect();
        let bytes = vals.iter().flat_map(|&v| encode(e, v)).collect();
        (vals, bytes)
    };
    let (ha, ba) = fill(rng, sa * l, e);
    let (hb, bb) = fill(rng, sb * l, e);
    let use_c = c.beta != 0.0;
    let (hc, bc) = if use_c { fill(rng, sc * l, ed) } else { (vec![], vec![]) };
    let poison = vec![0xFFu8; (sd * l) as usize * 2];
    let d_a = upload(stream, &ba);
    let d_b = upload(stream, &bb);
    let d_c = upload(stream, &bc);
    let d_d = upload(stream, &poison);
    let ctas = c.ctas.max((k.g.config.cluster[0] * k.g.config.cluster[1]) as u32);
    // Split-K partials, or the stream-K slots and (zeroed) tile counters.
    let ws_bytes =
        k.g.workspace_bytes(m as i32, n as i32, l as i32, c.split)
            .max(k.g.stream_k_workspace_bytes(ctas))
            .max(16);
    let counter_bytes = k.g.stream_k_counter_bytes(ctas);
    let d_w = stream.alloc_zeros::<u8>(ws_bytes).expect("workspace");
    let d_s = stream.alloc_zeros::<u8>(counter_bytes.max(16)).expect("counters");
    {
        let (ps, _rs) = d_s.device_ptr(stream);
        let (pw, _rw) = d_w.device_ptr(stream);
        let (pa, _ra) = d_a.device_ptr(stream);
        let (pb, _rb) = d_b.device_ptr(stream);
        let (pc, _rc) = d_c.device_ptr(stream);
        let (pd, _rd) = d_d.device_ptr(stream);
        let args = GemmArgs {
            m: m as i32,
            n: n as i32,
            k: kk as i32,
            l: l as i32,
            a: pa,
            b: pb,
            c: if use_c { pc } else { 0 },
            d: pd,
            lda,
            ldb,
            ldc,
            ldd,
            batch_stride_a: sa,
            batch_stride_b: sb,
            batch_stride_c: sc,
            batch_stride_d: sd,
            alpha: c.alpha,
            beta: c.beta,
            split_k: c.split,
            workspace: if c.split > 1 || k.g.config.stream_k { pw } else { 0 },
            split_k_mode: SplitKMode::Parallel,
            semaphores: ps,
            workspace_bytes: ws_bytes,
            semaphore_bytes: counter_bytes,
        };
        // SAFETY: the buffers hold the matrices described by `args`.
        let fa = k.g.default_fusion_args(&args).unwrap();
        unsafe { launch_kernel(k, &args, &fa, ctas).unwrap_or_else(|err| panic!("{} {c:?}: {err}", k.g.name)) };
        gpu.synchronize()
            .unwrap_or_else(|err| panic!("{} {c:?}: {err}", k.g.name));
    }
    let out = stream.clone_dtoh(&d_d).expect("dtoh");
    // stream-K: the last arriver of every split tile left its counter zero (a graph replays it)
    let counters = stream.clone_dtoh(&d_s).expect("dtoh");
    assert!(
        counters.iter().all(|&b| b == 0),
        "{} {c:?}: stream-K tile counters not reset",
        k.g.name
    );
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for b in 0..l {
        for i in 0..m {
            for j in 0..ldd {
                let idx = (b * sd + i * ldd + j) as usize;
                let raw = &out[idx * 2..idx * 2 + 2];
                let poisoned = raw == [0xFF, 0xFF];
                if j >= n {
                    assert!(
                        poisoned,
                        "{} {c:?}: padding element (batch {b}, {i}, {j}) was overwritten",
                        k.g.name
                    );
                    continue;
                }
                assert!(!poisoned, "{} {c:?}: D({i},{j}) of batch {b} was not written", k.g.name);
                let mut acc = 0.0f64;
                for q in 0..kk {
                    acc += ha[(b * sa + i * lda + q) as usize] * hb[(b * sb + j * ldb + q) as usize];
                }
                let mut want = c.alpha as f64 * acc;
                if use_c {
                    want += c.beta as f64 * hc[(b * sc + i * ldc + j) as usize];
                }
                let got = decode(ed, raw);
                assert!(got.is_finite(), "{} {c:?}: D({i},{j}) = {got}", k.g.name);
                num += (got - want) * (got - want);
                den += want * want;
            }
        }
    }
    let rel = (num / den.max(1e-30)).sqrt();
    assert!(rel < 1e-2, "{} {c:?}: relative error {rel:.3e}", k.g.name);
    (rel, out)
}

fn cases(rng: &mut Rng, tile: [i64; 3], with_c: bool, count: usize) -> Vec<Case> {
    let [bm, bn, bk] = tile;
    let beta = |b: f32| if with_c { b } else { 0.0 };
    let mut v = vec![
        Case {
            m: 1,
            n: 8,
            k: 8,
            l: 1,
            pad: [0; 4],
            alpha: 1.0,
            beta: 0.0,
            ctas: 132,
            split: 1,
        },
        Case {
            m: bm,
            n: bn,
            k: bk,
            l: 1,
            pad: [0; 4],
            alpha: 1.0,
            beta: 0.0,
            ctas: 132,
            split: 1,
        },
        Case {
            m: bm + 1,
            n: bn - 8,
            k: 3 * bk + 8,
            l: 2,
            pad: [1, 0, 3, 1],
            alpha: 0.5,
            beta: beta(1.5),
            ctas: 132,
            split: 1,
        },
        Case {
            m: 5 * bm + 3,
            n: 3 * bn + 8,
            k: 2 * bk,
            l: 3,
            pad: [0, 1, 0, 0],
            alpha: 1.0,
            beta: beta(-1.0),
            ctas: 7,
            split: 3,
        },
        Case {
            m: 17,
            n: 24,
            k: 0,
            l: 1,
            pad: [0; 4],
            alpha: 1.0,
            beta: beta(0.5),
            ctas: 132,
            split: 1,
        },
        Case {
            m: 300,
            n: 200,
            k: 1000,
            l: 1,
            pad: [0, 0, 1, 1],
            alpha: 1.0,
            beta: beta(1.0),
            ctas: 3,
            split: 4,
        },
    ];
    for _ in 0..count {
        v.push(Case {
            m: rng.range(1, 3 * bm + 7),
            n: 8 * rng.range(1, (3 * bn) / 8 + 1),
            k: 8 * rng.range(1, (6 * bk) / 8 + 1),
            l: rng.range(1, 3),
            pad: [rng.range(0, 1), rng.range(0, 1), rng.range(0, 3), rng.range(0, 3)],
            alpha: [1.0, 0.5, -2.0][rng.range(0, 2) as usize],
            beta: beta([0.0, 0.0, 1.0, -0.5][rng.range(0, 3) as usize]),
            ctas: [132, 132, 5, 1][rng.range(0, 3) as usize],
            split: [1, 1, 2, 5][rng.range(0, 3) as usize],
        });
    }
    v
}

/// The configurations the suite covers (every schedule, with and without C, f16).
pub fn configs() -> Vec<GemmSm90Config> {
    let mut v = vec![
        GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative),
        GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative),
        GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::WarpSpecialized),
        GemmSm90Config::bf16([64, 128, 64], Sm90Schedule::PingPong),
        GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong),
        // Cooperative with two m64 atoms per warpgroup (two group subtiles along M).
        GemmSm90Config::bf16([256, 128, 64], Sm90Schedule::Cooperative),
    ];
    let mut f = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
    (f.ab, f.cd) = (Element::F16, Element::F16);
    f = f.without_c();
    v.push(f);
    let mut f = GemmSm90Config::bf16([64, 256, 64], Sm90Schedule::PingPong);
    f = f.without_c();
    f.swizzle_log2 = 2;
    v.push(f);
    // The bf16 rule's large-problem kernel (`select_sm90`): 128x128 ping-pong without C,
    // bands of 4 tiles.
    let mut f = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong).without_c();
    f.swizzle_log2 = 2;
    v.push(f);
    // Clusters with TMA multicast: 2x1 (B shared), 1x2 (A shared), 2x2 ping-pong.
    for (cluster, tile, sched) in [
        ([2, 1], [128, 256, 64], Sm90Schedule::Cooperative),
        ([1, 2], [128, 128, 64], Sm90Schedule::Cooperative),
        ([2, 2], [64, 128, 64], Sm90Schedule::PingPong),
        ([2, 1], [128, 128, 64], Sm90Schedule::WarpSpecialized),
    ] {
        let mut c = GemmSm90Config::bf16(tile, sched);
        c.cluster = cluster;
        v.push(c);
    }
    // The tile walk: swizzle bands along N and along M.
    let mut f = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative);
    (f.swizzle_log2, f.raster) = (3, RasterOrderOption::AlongN);
    v.push(f);
    let mut f = GemmSm90Config::bf16([64, 64, 64], Sm90Schedule::WarpSpecialized);
    (f.swizzle_log2, f.raster) = (1, RasterOrderOption::AlongM);
    v.push(f);
    // No wgmma batch in flight (stages released right after their batch), with multicast.
    let mut f = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
    (f.mma_pipe, f.cluster) = (0, [2, 1]);
    v.push(f);
    v
}

/// Decode configurations with deep pipelines (more stages than the automatic cap), as the
/// tuner's decode space has them: 64x32 ping-pong with A multicast (1x2), 64x64
/// warp-specialized, 64x64 ping-pong with a 2x1 cluster.
pub fn deep_configs() -> Vec<GemmSm90Config> {
    [
        ([1, 2], [64, 32, 64], Sm90Schedule::PingPong, 16),
        ([1, 1], [64, 64, 64], Sm90Schedule::WarpSpecialized, 13),
        ([2, 1], [64, 64, 64], Sm90Schedule::PingPong, 12),
    ]
    .into_iter()
    .map(|(cluster, tile, sched, stages)| {
        let mut c = GemmSm90Config::bf16(tile, sched);
        (c.cluster, c.stages) = (cluster, Some(stages));
        c
    })
    .collect()
}

/// Epilogue subtiles smaller than the automatic ones: `h200.json`'s 2048^3 entry
/// `sm90:128x128x64,pp,r2,e64x64` (128x128 ping-pong without C, bands of 4 tiles, the
/// epilogue in four 64x64 subtiles), and with C.
pub fn subtile_configs() -> Vec<GemmSm90Config> {
    let mut c = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong).without_c();
    (c.swizzle_log2, c.epi_tile) = (2, Some([64, 64]));
    let mut with_c = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong);
    with_c.epi_tile = Some([64, 64]);
    vec![c, with_c]
}

/// Tiles of more than 128 accumulators a thread (160): cuBLAS's 128x320 cooperative tile,
/// two 160-wide `wgmma` atoms along N and B in two TMA boxes a stage, with and without the
/// 2x1 cluster (B multicast in two boxes of 80 rows a CTA), without C as `gemm` runs it at
/// beta = 0; and 256x160 (two m64 atoms of one 160-wide atom).
pub fn wide_configs() -> Vec<GemmSm90Config> {
    let mut v = vec![GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative)];
    let mut c = GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative).without_c();
    (c.cluster, c.swizzle_log2) = ([2, 1], 1);
    v.push(c);
    let mut c = GemmSm90Config::bf16([128, 320, 64], Sm90Schedule::Cooperative);
    c.cluster = [2, 1];
    v.push(c);
    v.push(GemmSm90Config::bf16([256, 160, 64], Sm90Schedule::Cooperative));
    v
}

/// Whether the test may run: an sm_90 GPU (a missing or other GPU skips, or fails with
/// `RCUTE_REQUIRE_GPU=1`).
fn sm90_gpu() -> Option<Gpu> {
    let gpu = gpu_for_test()?;
    if gpu.arch() != Some(Arch::Sm90a) && gpu.compute_capability() != (9, 0) {
        if std::env::var("RCUTE_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!(
                "RCUTE_REQUIRE_GPU=1 but the GPU is not sm_90: {:?}",
                gpu.compute_capability()
            );
        }
        eprintln!(
            "skipping: the SM90 GEMM needs an sm_90 GPU, found {:?}",
            gpu.compute_capability()
        );
        return None;
    }
    Some(gpu)
}

/// Every configuration of `configs` built and checked against the float64 reference on
/// `RCUTE_CASES` random cases (10 by default); `check` runs on each built kernel first.
/// Skips (or fails under `RCUTE_REQUIRE_GPU=1`) without an sm_90 GPU.
fn check_configs(test: &str, configs: Vec<GemmSm90Config>, check: impl Fn(&Kernel, &GemmSm90Config)) {
    let Some(gpu) = sm90_gpu() else { return };
    let mut rng = Rng::new(test);
    let count: usize = std::env::var("RCUTE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    for cfg in configs {
        let k = build(&gpu, &cfg);
        check(&k, &cfg);
        let mut worst = 0.0f64;
        let cs = cases(&mut rng, cfg.tile, cfg.with_c(), count);
        for c in &cs {
            worst = worst.max(run_case(&gpu, &k, *c, &mut rng).0);
        }
        eprintln!("{}: {} cases, worst relative error {worst:.2e}", k.g.name, cs.len());
    }
}

#[test]
fn sm90_gemm_deep_pipelines() {
    check_configs("sm90_gemm_deep_pipelines", deep_configs(), |k, cfg| {
        assert_eq!(k.g.config.stages, cfg.stages, "{}", k.g.name);
    });
}

#[test]
fn sm90_gemm_matches_reference() {
    check_configs("sm90_gemm_matches_reference", configs(), |_, _| {});
}

#[test]
fn sm90_gemm_wide_tiles() {
    check_configs("sm90_gemm_wide_tiles", wide_configs(), |k, cfg| {
        let accumulators = k.g.plan.m_atoms * cfg.tile[1] / 2;
        assert!(accumulators > 128, "{}: {accumulators} accumulators a thread", k.g.name);
    });
}

#[test]
fn sm90_gemm_epilogue_subtiles() {
    check_configs("sm90_gemm_epilogue_subtiles", subtile_configs(), |_, _| {});
}

/// A fused epilogue on the SM90 kernel: `D = a_scale[m] * (b_scale[n] * acc) + bias[n]`
/// (the scaled_mm tree with f32 per-row / per-column scales and a bf16 bias) checked
/// against the fusion's own CPU evaluation of the float64 product.
#[test]
fn sm90_gemm_with_fused_epilogue() {
    use rcute_collective::fusion::{FusionArgs, HostInputs, ScaleKind};
    use rcute_collective::Fusion;
    let Some(gpu) = gpu_for_test() else { return };
    if gpu.compute_capability() != (9, 0) {
        if std::env::var("RCUTE_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!(
                "RCUTE_REQUIRE_GPU=1 but the GPU is not sm_90: {:?}",
                gpu.compute_capability()
            );
        }
        eprintln!("skipping: the SM90 GEMM needs an sm_90 GPU");
        return;
    }
    let mut rng = Rng::new("sm90_gemm_with_fused_epilogue");
    let fusion = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    for sched in [
        Sm90Schedule::Cooperative,
        Sm90Schedule::PingPong,
        Sm90Schedule::WarpSpecialized,
    ] {
        let mut cfg = GemmSm90Config::bf16([128, 128, 64], sched);
        cfg.fusion = fusion.clone();
        let k = build(&gpu, &cfg);
        let stream = gpu.stream();
        for &(m, n, kk, l) in &[(300i64, 264i64, 200i64, 2i64), (1, 8, 64, 1), (129, 136, 8, 1)] {
            let unit = |rng: &mut Rng, count: i64| -> Vec<f64> {
                (0..count)
                    .map(|_| decode(Element::BF16, &encode(Element::BF16, rng.unit())))
                    .collect()
            };
            let (ha, hb) = (unit(&mut rng, m * kk * l), unit(&mut rng, n * kk * l));
            let a_scale: Vec<f32> = (0..m).map(|_| 0.5 + rng.unit().abs() as f32).collect();
            let b_scale: Vec<f32> = (0..n).map(|_| 0.5 + rng.unit().abs() as f32).collect();
            let bias = unit(&mut rng, n);
            let bytes = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|&x| encode(Element::BF16, x)).collect() };
            let f32_bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            let (d_a, d_b) = (upload(stream, &bytes(&ha)), upload(stream, &bytes(&hb)));
            let (d_as, d_bs, d_bias) = (
                upload(stream, &f32_bytes(&a_scale)),
                upload(stream, &f32_bytes(&b_scale)),
                upload(stream, &bytes(&bias)),
            );
            let d_d = upload(stream, &vec![0xFFu8; (m * n * l * 2) as usize]);
            {
                let (pa, _r1) = d_a.device_ptr(stream);
                let (pb, _r2) = d_b.device_ptr(stream);
                let (pd, _r3) = d_d.device_ptr(stream);
                let (pas, _r4) = d_as.device_ptr(stream);
                let (pbs, _r5) = d_bs.device_ptr(stream);
                let (pbias, _r6) = d_bias.device_ptr(stream);
                let mut args = GemmArgs::tn(m as i32, n as i32, kk as i32, l as i32, pa, pb, 0, pd);
                // The first shape runs split-K: the fusion then runs in the reduction kernel.
                let split = if m == 300 { 3 } else { 1 };
                let d_w = stream
                    .alloc_zeros::<u8>(k.g.workspace_bytes(m as i32, n as i32, l as i32, split).max(16))
                    .unwrap();
                let (pw, _r7) = d_w.device_ptr(stream);
                (args.split_k, args.workspace) = (split, if split > 1 { pw } else { 0 });
                let fa = FusionArgs::new()
                    .ptr("a_scale", pas)
                    .ptr("b_scale", pbs)
                    .ptr("bias", pbias);
                // SAFETY: the buffers hold the matrices and vectors described.
                unsafe { launch_kernel(&k, &args, &fa, 132) }.unwrap_or_else(|e| panic!("{}: {e}", k.g.name));
                gpu.synchronize().unwrap();
                let out = stream.clone_dtoh(&d_d).unwrap();
                let mut acc = vec![0.0f64; (m * n * l) as usize];
                for b in 0..l {
                    for i in 0..m {
                        for j in 0..n {
                            let mut s = 0.0;
                            for q in 0..kk {
                                s += ha[(b * m * kk + i * kk + q) as usize] * hb[(b * n * kk + j * kk + q) as usize];
                            }
                            acc[((b * m + i) * n + j) as usize] = s;
                        }
                    }
                }
                let host = HostInputs::new(m, n, l)
                    .with_acc(acc)
                    .with_tensor("a_scale", a_scale.iter().map(|&x| x as f64).collect())
                    .with_tensor("b_scale", b_scale.iter().map(|&x| x as f64).collect())
                    .with_tensor("bias", bias.clone());
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for b in 0..l {
                    for i in 0..m {
                        for j in 0..n {
                            let idx = ((b * m + i) * n + j) as usize;
                            let got = decode(Element::BF16, &out[idx * 2..idx * 2 + 2]);
                            let want = fusion.eval(&fa, &host, i, j, b).unwrap();
                            assert!(
                                got.is_finite(),
                                "{} ({m},{n},{kk},{l}): D({i},{j},{b}) = {got}",
                                k.g.name
                            );
                            num += (got - want) * (got - want);
                            den += want * want;
                        }
                    }
                }
                let rel = (num / den.max(1e-30)).sqrt();
                assert!(rel < 1e-2, "{} ({m},{n},{kk},{l}): relative error {rel:.3e}", k.g.name);
                eprintln!("{} fused ({m},{n},{kk},{l}): relative error {rel:.2e}", k.g.name);
            }
        }
    }
}

/// INT8 (s8 x s8 -> s32) and FP8 (e4m3 x e4m3 -> f32) GEMMs on the SM90 kernel with the
/// scaled_mm fusion (per-row / per-column f32 scales, bf16 bias, bf16 out). INT8: the
/// integer sum is exact (checked against an i64 reference), so every output must be within
/// one bf16 rounding step of `bf16(f64(acc) * a_scale * b_scale + bias)`; FP8: against a
/// float64 product of the dequantized inputs, ||out - ref|| / ||ref|| < 1e-2. Split-K
/// (int32 partials for INT8) and ragged shapes included; the ping-pong 128x128x128 tile
/// with hybrid stream-K on 7 CTAs, 2 and 4 ranges a tile (its partial last wave cut into k
/// ranges: 18 tiles of 4 k-tiles, 10 tiles of 9), its split-K case skipped.
#[test]
fn sm90_int8_and_fp8_scaled_gemm() {
    use rcute_collective::fusion::{decode_element, encode_element, FusionArgs, ScaleKind};
    use rcute_collective::Fusion;
    let Some(gpu) = gpu_for_test() else { return };
    if gpu.compute_capability() != (9, 0) {
        if std::env::var("RCUTE_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!(
                "RCUTE_REQUIRE_GPU=1 but the GPU is not sm_90: {:?}",
                gpu.compute_capability()
            );
        }
        eprintln!("skipping: the SM90 GEMM needs an sm_90 GPU");
        return;
    }
    let mut rng = Rng::new("sm90_int8_and_fp8_scaled_gemm");
    let fusion = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    let stream = gpu.stream();
    for ab in [Element::S8, Element::E4M3] {
        // The kernels `ops` selects (128x256x128 cooperative without a wgmma batch in
        // flight; 64x128x128 ping-pong), the latter with a 2x1 cluster.
        for (tile, sched, cluster, mma_pipe, sk_parts) in [
            ([128, 256, 128], Sm90Schedule::Cooperative, [1, 1], 0, None),
            ([64, 128, 128], Sm90Schedule::PingPong, [2, 1], 1, None),
            ([128, 128, 128], Sm90Schedule::PingPong, [1, 1], 1, Some(2)),
            ([128, 128, 128], Sm90Schedule::PingPong, [1, 1], 1, Some(4)),
        ] {
            let mut cfg = GemmSm90Config::bf16(tile, sched);
            (cfg.ab, cfg.cluster, cfg.fusion, cfg.mma_pipe) = (ab, cluster, fusion.clone(), mma_pipe);
            let stream_k = sk_parts.is_some();
            (cfg.stream_k, cfg.stream_k_parts) = (stream_k, sk_parts.unwrap_or(2));
            let k = build(&gpu, &cfg);
            let ctas = if stream_k { 7 } else { 132 };
            for &(m, n, kk, l, split) in &[
                (300i64, 264i64, 512i64, 2i64, 1u32),
                (1, 16, 128, 1, 1),
                (129, 520, 1040, 1, if stream_k { 1 } else { 3 }),
            ] {
                // Inputs: s8 in [-127, 127]; e4m3 from random values in [-2, 2].
                let gen = |rng: &mut Rng, count: i64| -> (Vec<f64>, Vec<u8>) {
                    let mut vals = Vec::with_capacity(count as usize);
                    let mut bytes = Vec::with_capacity(count as usize);
                    for _ in 0..count {
                        if ab == Element::S8 {
                            let v = rng.range(-127, 127) as i8;
                            vals.push(v as f64);
                            bytes.push(v as u8);
                        } else {
                            let b = encode_element(Element::E4M3, (2.0 * rng.unit()) as f32).unwrap();
                            vals.push(decode_element(Element::E4M3, &b).unwrap());
                            bytes.push(b[0]);
                        }
                    }
                    (vals, bytes)
                };
                let (ha, ba) = gen(&mut rng, m * kk * l);
                let (hb, bb) = gen(&mut rng, n * kk * l);
                let a_scale: Vec<f32> = (0..m).map(|_| (0.5 + rng.unit().abs()) as f32 / 128.0).collect();
                let b_scale: Vec<f32> = (0..n).map(|_| (0.5 + rng.unit().abs()) as f32 / 128.0).collect();
                let bias: Vec<f64> = (0..n)
                    .map(|_| decode(Element::BF16, &encode(Element::BF16, rng.unit())))
                    .collect();
                let f32_bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
                let bias_bytes: Vec<u8> = bias.iter().flat_map(|&x| encode(Element::BF16, x)).collect();
                let (d_a, d_b) = (upload(stream, &ba), upload(stream, &bb));
                let (d_as, d_bs, d_bias) = (
                    upload(stream, &f32_bytes(&a_scale)),
                    upload(stream, &f32_bytes(&b_scale)),
                    upload(stream, &bias_bytes),
                );
                let d_d = upload(stream, &vec![0xFFu8; (m * n * l * 2) as usize]);
                let ws_bytes =
                    k.g.workspace_bytes(m as i32, n as i32, l as i32, split)
                        .max(k.g.stream_k_workspace_bytes(ctas))
                        .max(16);
                let counter_bytes = k.g.stream_k_counter_bytes(ctas);
                let d_w = stream.alloc_zeros::<u8>(ws_bytes).unwrap();
                let d_s = stream.alloc_zeros::<u8>(counter_bytes.max(16)).unwrap();
                let (pa, _r1) = d_a.device_ptr(stream);
                let (pb, _r2) = d_b.device_ptr(stream);
                let (pd, _r3) = d_d.device_ptr(stream);
                let (pas, _r4) = d_as.device_ptr(stream);
                let (pbs, _r5) = d_bs.device_ptr(stream);
                let (pbias, _r6) = d_bias.device_ptr(stream);
                let (pw, _r7) = d_w.device_ptr(stream);
                let (ps, _r8) = d_s.device_ptr(stream);
                let mut args = GemmArgs::tn(m as i32, n as i32, kk as i32, l as i32, pa, pb, 0, pd);
                (args.split_k, args.workspace) = (split, if split > 1 || stream_k { pw } else { 0 });
                (args.workspace_bytes, args.semaphores, args.semaphore_bytes) = (ws_bytes, ps, counter_bytes);
                let fa = FusionArgs::new()
                    .ptr("a_scale", pas)
                    .ptr("b_scale", pbs)
                    .ptr("bias", pbias);
                // SAFETY: the buffers hold the matrices and vectors described.
                unsafe { launch_kernel(&k, &args, &fa, ctas) }.unwrap_or_else(|e| panic!("{}: {e}", k.g.name));
                gpu.synchronize().unwrap();
                let out = stream.clone_dtoh(&d_d).unwrap();
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for b in 0..l {
                    for i in 0..m {
                        for j in 0..n {
                            let mut acc = 0.0f64;
                            let mut iacc = 0i64;
                            for q in 0..kk {
                                let (x, y) = (
                                    ha[(b * m * kk + i * kk + q) as usize],
                                    hb[(b * n * kk + j * kk + q) as usize],
                                );
                                acc += x * y;
                                iacc += x as i64 * y as i64;
                            }
                            let want = acc * a_scale[i as usize] as f64 * b_scale[j as usize] as f64 + bias[j as usize];
                            let idx = ((b * m + i) * n + j) as usize;
                            let got = decode(Element::BF16, &out[idx * 2..idx * 2 + 2]);
                            assert!(
                                got.is_finite(),
                                "{} ({m},{n},{kk},{l}): D({i},{j},{b}) = {got}",
                                k.g.name
                            );
                            if ab == Element::S8 {
                                assert_eq!(acc, iacc as f64);
                                // One bf16 step (8 bits of mantissa) plus the f32 scaling's rounding.
                                let step = want.abs().max(1e-30) * 2f64.powi(-7) + 1e-6;
                                assert!(
                                    (got - want).abs() <= step,
                                    "{} ({m},{n},{kk},{l},split {split}): D({i},{j},{b}) = {got}, want {want}",
                                    k.g.name
                                );
                            }
                            num += (got - want) * (got - want);
                            den += want * want;
                        }
                    }
                }
                let rel = (num / den.max(1e-30)).sqrt();
                assert!(rel < 1e-2, "{} ({m},{n},{kk},{l}): relative error {rel:.3e}", k.g.name);
                eprintln!(
                    "{} ({m},{n},{kk},{l}, split {split}): relative error {rel:.2e}",
                    k.g.name
                );
            }
        }
    }
}

/// The hybrid stream-K units (`_sk`): the bf16 rules' cooperative tile with and without C,
/// two m64 atoms per warpgroup, and the ping-pong 128x128 tile (an item is one
/// warpgroup's) with and without C, and cut into up to 4 ranges a tile (`sk4`: up to five
/// contributors).
pub fn stream_k_configs() -> Vec<GemmSm90Config> {
    let mut v = vec![];
    for (tile, schedule, with_c, parts) in [
        ([128, 256, 64], Sm90Schedule::Cooperative, true, 2),
        ([128, 256, 64], Sm90Schedule::Cooperative, false, 2),
        ([256, 128, 64], Sm90Schedule::Cooperative, true, 2),
        ([128, 128, 64], Sm90Schedule::PingPong, true, 2),
        ([128, 128, 64], Sm90Schedule::PingPong, false, 2),
        ([128, 128, 64], Sm90Schedule::PingPong, true, 4),
    ] {
        let mut c = GemmSm90Config::bf16(tile, schedule);
        (c.stream_k, c.stream_k_parts) = (true, parts);
        v.push(if with_c { c } else { c.without_c() });
    }
    v
}

/// Problems whose tiles leave a partial last wave on the given CTAs (stream-K tiles of one
/// to eleven k-tiles cut between two or three CTAs, batches, padding, one k-tile per
/// tile, K = 0), and `count` random ones.
fn stream_k_cases(rng: &mut Rng, tile: [i64; 3], with_c: bool, count: usize) -> Vec<Case> {
    let [bm, bn, bk] = tile;
    let beta = |b: f32| if with_c { b } else { 0.0 };
    let case = |m, n, k, l, ctas, beta| Case {
        m,
        n,
        k,
        l,
        pad: [0, 0, 1, 1],
        alpha: 1.0,
        beta,
        ctas,
        split: 1,
    };
    let mut v = vec![
        // 24 tiles on 7 CTAs: 3 stream-K tiles of 11 k-tiles over 6 CTAs
        case(5 * bm + 3, 3 * bn + 8, 10 * bk + 8, 1, 7, beta(1.0)),
        // 6 tiles on 5 CTAs: one tile of 64 k-tiles, halved
        case(3 * bm, 2 * bn, 64 * bk, 1, 5, beta(0.0)),
        // 4 tiles (2 batches) on 3 CTAs, alpha and beta
        Case {
            alpha: 0.5,
            pad: [1, 0, 3, 1],
            ..case(bm + 1, bn - 8, 3 * bk + 8, 2, 3, beta(1.5))
        },
        // 32 tiles on 12 CTAs: 8 tiles of 8 k-tiles over 12 CTAs (three contributors)
        case(8 * bm, 4 * bn, 8 * bk, 1, 12, beta(-1.0)),
        // one k-tile a tile: the tail stays whole tiles
        case(3 * bm, bn, bk, 1, 2, beta(0.5)),
        // 45 tiles (3 batches) on 4 CTAs: one tile of 2 k-tiles, one each
        case(2 * bm + 5, 5 * bn, 2 * bk, 3, 4, beta(1.0)),
        case(17, 24, 0, 1, 132, beta(0.5)),
    ];
    for _ in 0..count {
        v.push(Case {
            m: rng.range(1, 4 * bm + 7),
            n: 8 * rng.range(1, (4 * bn) / 8 + 1),
            k: 8 * rng.range(1, (12 * bk) / 8 + 1),
            l: rng.range(1, 2),
            pad: [rng.range(0, 1), rng.range(0, 1), rng.range(0, 3), rng.range(0, 3)],
            alpha: [1.0, 0.5, -2.0][rng.range(0, 2) as usize],
            beta: beta([0.0, 1.0, -0.5][rng.range(0, 2) as usize]),
            ctas: [3, 5, 7, 11, 132][rng.range(0, 4) as usize],
            split: 1,
        });
    }
    v
}

#[test]
fn sm90_stream_k_matches_reference_and_repeats_bit_for_bit() {
    let Some(gpu) = sm90_gpu() else { return };
    let mut rng = Rng::new("sm90_stream_k_matches_reference_and_repeats_bit_for_bit");
    let count: usize = std::env::var("RCUTE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    // RCUTE_SK_UNITS: only the units whose name contains it (the sanitizers' narrower runs)
    let only = std::env::var("RCUTE_SK_UNITS").unwrap_or_default();
    for cfg in stream_k_configs() {
        if generate(&cfg).is_ok_and(|g| !g.name.contains(&only)) {
            continue;
        }
        let k = build(&gpu, &cfg);
        let mut worst = 0.0f64;
        let cs = stream_k_cases(&mut rng, cfg.tile, cfg.with_c(), count);
        for (i, c) in cs.iter().enumerate() {
            // the first four cases twice, on the same data: the same bits (the reduction sums
            // the partials in k order whatever the order the CTAs arrive in)
            let again = rng.clone();
            let (rel, out) = run_case(&gpu, &k, *c, &mut rng);
            worst = worst.max(rel);
            if i < 4 {
                let (_, out2) = run_case(&gpu, &k, *c, &mut again.clone());
                assert!(out == out2, "{} {c:?}: two runs differ", k.g.name);
            }
        }
        eprintln!("{}: {} cases, worst relative error {worst:.2e}", k.g.name, cs.len());
    }
}

#[test]
fn sm90_stream_k_rejects_small_buffers() {
    let Some(gpu) = sm90_gpu() else { return };
    let k = build(&gpu, &stream_k_configs()[1]);
    let stream = gpu.stream();
    let d = stream.alloc_zeros::<u8>(1 << 20).expect("alloc");
    let (p, _r) = d.device_ptr(stream);
    // 6 tiles on 5 CTAs: one stream-K tile
    let mut args = GemmArgs::tn(384, 512, 4096, 1, p, p, 0, p);
    args.workspace = p;
    args.semaphores = p;
    args.workspace_bytes = 1 << 20;
    args.semaphore_bytes = 16;
    let fa = k.g.default_fusion_args(&args).unwrap();
    let need = k.g.stream_k_workspace_bytes(5);
    assert!(need > 1 << 20);
    // SAFETY: refused before any launch (the workspace is too small).
    let err = unsafe { launch_kernel(&k, &args, &fa, 5) }.unwrap_err();
    assert!(err.to_string().contains("workspace"), "{err}");
    args.workspace_bytes = need;
    args.semaphore_bytes = 0;
    // SAFETY: refused before any launch (no counters).
    let err = unsafe { launch_kernel(&k, &args, &fa, 5) }.unwrap_err();
    assert!(err.to_string().contains("counters"), "{err}");
    // The unit has no split-K reduction to launch.
    assert!(k.reduce.is_none());
    // SAFETY: refused before any launch (no reduction kernel).
    let err = unsafe { launch_split_k(&k.f, &k.f, &k.g, &args, &fa, 5) }.unwrap_err();
    assert!(err.to_string().contains("no split-K reduction"), "{err}");
}
