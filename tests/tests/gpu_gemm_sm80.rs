//! GPU verification of the generated SM80 GEMM kernels (`rcute_kernel::gemm_sm80`):
//! random shapes (M, N not multiples of the tile, 1, K a multiple of 8 down to 8), every
//! operand major, row- and column-major outputs, batches, padded and odd leading
//! dimensions (odd `ldd`: the staged epilogue's element-wise fallback), alpha / beta (with
//! a null C when beta = 0), f32 / f16 / bf16 outputs through the shared-memory epilogue,
//! parallel and serial split-K (2, 3, 7 splits, more splits than K tiles, batched; the
//! serial semaphores are shared by all cases of a kernel and must be zero after each). Outputs are poisoned (NaN) before each launch; every
//! in-bounds element must be written and every padding element left alone; results are
//! compared with a float64 CPU reference: ||out - ref|| / ||ref|| < 1e-2.
//!
//! Skips with a printed reason without a GPU (`RCUTE_REQUIRE_GPU=1` makes that a
//! failure). `RCUTE_SEED` fixes the random seed, which is printed.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use rcute_kernel::gemm_sm80::{
    generate, launch, launch_split_k, GemmArgs, GemmElement as Element, GemmSm80Config, GeneratedGemm, Major,
    SplitKMode, StorageOrder,
};
use rcute_kernel::testing::gpu_for_test;
use rcute_kernel::{Arch, CompileOptions, Function, Gpu, KernelCache};
use std::sync::Arc;

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

fn encode(e: Element, v: f64) -> Vec<u8> {
    match e {
        Element::BF16 => half::bf16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        Element::F16 => half::f16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        _ => (v as f32).to_le_bytes().to_vec(),
    }
}
fn decode(e: Element, b: &[u8]) -> f64 {
    match e {
        Element::BF16 => half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Element::F16 => half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
    }
}
/// Round-trip through the element type.
fn quant(e: Element, v: f64) -> f64 {
    decode(e, &encode(e, v))
}

struct Kernels {
    g: GeneratedGemm,
    main: Function,
    reduce: Function,
    semaphores: CudaSlice<i32>,
}

/// Semaphores for every serial case of the suite (zeroed once, reused).
const SEMAPHORES: usize = 1 << 16;

fn build(gpu: &Gpu, cfg: &GemmSm80Config) -> Kernels {
    let g = generate(cfg).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    let arch = gpu.arch().unwrap_or(Arch::Sm80);
    let compiled = KernelCache::global()
        .get_or_compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(arch))
        .unwrap_or_else(|e| panic!("{}: {e}", g.name));
    let module = gpu.load(&compiled).expect("load");
    let main = module.function(&g.name).expect("main kernel");
    let reduce = module.function(&g.reduce_name).expect("reduce kernel");
    let r = main.resources();
    eprintln!(
        "{}: {} registers, {} spill bytes, {} B dynamic smem",
        g.name,
        r.registers,
        r.spill_stores_bytes + r.spill_loads_bytes,
        g.smem_bytes
    );
    let semaphores = gpu.stream().alloc_zeros::<i32>(SEMAPHORES).expect("semaphores");
    Kernels {
        g,
        main,
        reduce,
        semaphores,
    }
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
    split_k: u32,
    serial: bool,
}

fn upload(stream: &Arc<CudaStream>, bytes: &[u8]) -> CudaSlice<u8> {
    stream
        .clone_htod(if bytes.is_empty() { &[0u8; 16][..] } else { bytes })
        .expect("htod")
}

/// Run one case; returns the relative error.
fn run_case(gpu: &Gpu, k: &Kernels, c: Case, rng: &mut Rng) -> f64 {
    let cfg = &k.g.config;
    let stream = gpu.stream();
    let (m, n, kk, l) = (c.m, c.n, c.k, c.l);
    let r8 = |x: i64| (x + 7) / 8 * 8;
    // Leading dimensions (A, B multiples of 8; C, D arbitrary >= extent).
    let (a_rows, a_cols) = if cfg.a_major == Major::K { (m, kk) } else { (kk, m) };
    let (b_rows, b_cols) = if cfg.b_major == Major::K { (n, kk) } else { (kk, n) };
    let (o_rows, o_cols) = if cfg.c_major == StorageOrder::RowMajor {
        (m, n)
    } else {
        (n, m)
    };
    let lda = r8(a_cols) + 8 * c.pad[0];
    let ldb = r8(b_cols) + 8 * c.pad[1];
    let ldc = o_cols + c.pad[2];
    let ldd = o_cols + c.pad[3];
    let (sa, sb) = (a_rows * lda, b_rows * ldb);
    let (sc, sd) = (o_rows * ldc, o_rows * ldd + c.pad[3] % 2);
    let (ea, ec, ed) = (cfg.a, cfg.c, cfg.d);
    let fill = |rng: &mut Rng, count: i64, e: Element| -> (Vec<f64>, Vec<u8>) {
        let vals: Vec<f64> = (0..count).map(|_| quant(e, rng.unit())).collect();
        let bytes = vals.iter().flat_map(|&v| encode(e, v)).collect();
        (vals, bytes)
    };
    let (ha, ba) = fill(rng, sa * l, ea);
    let (hb, bb) = fill(rng, sb * l, ea);
    let use_c = c.beta != 0.0;
    let (hc, bc) = if use_c { fill(rng, sc * l, ec) } else { (vec![], vec![]) };
    let poison = vec![0xFFu8; (sd * l) as usize * ed.bytes() as usize];
    let d_a = upload(stream, &ba);
    let d_b = upload(stream, &bb);
    let d_c = upload(stream, &bc);
    let d_d = upload(stream, &poison);
    let mode = if c.serial {
        SplitKMode::Serial
    } else {
        SplitKMode::Parallel
    };
    let ws_bytes =
        k.g.workspace_bytes_mode(m as i32, n as i32, l as i32, c.split_k, mode)
            .max(16);
    assert!(k.g.semaphore_count(m as i32, n as i32, l as i32) <= SEMAPHORES);
    let d_w = stream.alloc_zeros::<u8>(ws_bytes).expect("workspace");
    {
        let (pa, _ra) = d_a.device_ptr(stream);
        let (pb, _rb) = d_b.device_ptr(stream);
        let (pc, _rc) = d_c.device_ptr(stream);
        let (pd, _rd) = d_d.device_ptr(stream);
        let (pw, _rw) = d_w.device_ptr(stream);
        let (ps, _rs) = k.semaphores.device_ptr(stream);
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
            split_k: c.split_k,
            workspace: if c.split_k > 1 { pw } else { 0 },
            split_k_mode: mode,
            semaphores: ps,
            workspace_bytes: 0,
            semaphore_bytes: 0,
        };
        // SAFETY: the buffers hold the matrices described by `args`.
        unsafe {
            if c.split_k > 1 {
                launch_split_k(&k.main, &k.reduce, &k.g, &args).unwrap_or_else(|e| panic!("{}: {e}", k.g.name));
            } else {
                launch(&k.main, &k.g, &args).unwrap_or_else(|e| panic!("{}: {e}", k.g.name));
            }
        }
        gpu.synchronize().unwrap_or_else(|e| panic!("{} {c:?}: {e}", k.g.name));
    }
    let out = stream.clone_dtoh(&d_d).expect("dtoh");
    if c.serial {
        let sems = stream.clone_dtoh(&k.semaphores).expect("dtoh");
        assert!(
            sems.iter().all(|&x| x == 0),
            "{} {c:?}: serial split-K left semaphores non-zero",
            k.g.name
        );
    }
    let eb = ed.bytes() as usize;
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for b in 0..l {
        for i in 0..o_rows {
            for j in 0..ldd {
                let idx = (b * sd + i * ldd + j) as usize;
                let raw = &out[idx * eb..(idx + 1) * eb];
                let poisoned = raw.iter().all(|&x| x == 0xFF);
                if j >= o_cols {
                    assert!(
                        poisoned,
                        "{} {c:?}: padding element (batch {b}, {i}, {j}) was overwritten",
                        k.g.name
                    );
                    continue;
                }
                let (mm, nn) = if cfg.c_major == StorageOrder::RowMajor {
                    (i, j)
                } else {
                    (j, i)
                };
                assert!(
                    !poisoned,
                    "{} {c:?}: D({mm},{nn}) of batch {b} was not written",
                    k.g.name
                );
                let mut acc = 0.0f64;
                for q in 0..kk {
                    let av = if cfg.a_major == Major::K {
                        ha[(b * sa + mm * lda + q) as usize]
                    } else {
                        ha[(b * sa + q * lda + mm) as usize]
                    };
                    let bv = if cfg.b_major == Major::K {
                        hb[(b * sb + nn * ldb + q) as usize]
                    } else {
                        hb[(b * sb + q * ldb + nn) as usize]
                    };
                    acc += av * bv;
                }
                let mut want = c.alpha as f64 * acc;
                if use_c {
                    want += c.beta as f64 * hc[(b * sc + i * ldc + j) as usize];
                }
                let got = decode(ed, raw);
                num += (got - want) * (got - want);
                den += want * want;
            }
        }
        // Elements past the last row of a batch's padding stay poisoned too.
        for idx in (b * sd + o_rows * ldd)..((b + 1) * sd) {
            let raw = &out[idx as usize * eb..(idx as usize + 1) * eb];
            assert!(
                raw.iter().all(|&x| x == 0xFF),
                "{}: write past the end of batch {b}",
                k.g.name
            );
        }
    }
    let rel = (num / den.max(1e-30)).sqrt();
    assert!(rel < 1e-2, "{} {c:?}: relative error {rel:.3e}", k.g.name);
    rel
}

fn random_cases(rng: &mut Rng, tile: [i64; 3], count: usize) -> Vec<Case> {
    let [bm, bn, bk] = tile;
    let mut v = vec![
        Case {
            m: 1,
            n: 1,
            k: 8,
            l: 1,
            pad: [0, 0, 0, 0],
            alpha: 1.0,
            beta: 0.0,
            split_k: 1,
            serial: false,
        },
        Case {
            m: bm,
            n: bn,
            k: bk,
            l: 1,
            pad: [0, 0, 0, 0],
            alpha: 1.0,
            beta: 0.0,
            split_k: 1,
            serial: false,
        },
        Case {
            m: bm + 1,
            n: bn - 1,
            k: 3 * bk + 8,
            l: 2,
            pad: [1, 0, 3, 1],
            alpha: 0.5,
            beta: 1.5,
            split_k: 1,
            serial: false,
        },
        Case {
            m: 2 * bm + 3,
            n: 1,
            k: 8 * bk + 24,
            l: 1,
            pad: [0, 1, 0, 0],
            alpha: 1.0,
            beta: 0.0,
            split_k: 3,
            serial: false,
        },
        Case {
            m: 17,
            n: 2 * bn + 5,
            k: 40,
            l: 3,
            pad: [0, 0, 1, 2],
            alpha: -1.0,
            beta: 0.25,
            split_k: 7,
            serial: false,
        },
        // Serial split-K: 2, 3, 7 splits, more splits than K tiles, batched, odd ldd.
        Case {
            m: 2 * bm + 3,
            n: bn + 9,
            k: 8 * bk + 24,
            l: 1,
            pad: [0, 1, 0, 0],
            alpha: 1.0,
            beta: 0.0,
            split_k: 2,
            serial: true,
        },
        Case {
            m: bm - 1,
            n: 2 * bn + 1,
            k: 5 * bk + 8,
            l: 2,
            pad: [0, 0, 1, 3],
            alpha: 0.5,
            beta: -1.0,
            split_k: 3,
            serial: true,
        },
        Case {
            m: 17,
            n: 2 * bn + 5,
            k: 40,
            l: 3,
            pad: [0, 0, 1, 2],
            alpha: -1.0,
            beta: 0.25,
            split_k: 7,
            serial: true,
        },
        Case {
            m: bm + 5,
            n: bn,
            k: 3 * bk,
            l: 2,
            pad: [0, 0, 0, 1],
            alpha: 1.0,
            beta: 1.0,
            split_k: 7,
            serial: true,
        },
    ];
    for _ in 0..count {
        v.push(Case {
            m: rng.range(1, 3 * bm + 7),
            n: rng.range(1, 3 * bn + 7),
            k: 8 * rng.range(1, (6 * bk) / 8 + 3),
            l: rng.range(1, 3),
            pad: [rng.range(0, 1), rng.range(0, 1), rng.range(0, 3), rng.range(0, 3)],
            alpha: [1.0, 0.5, -2.0][rng.range(0, 2) as usize],
            beta: [0.0, 0.0, 1.0, -0.5][rng.range(0, 3) as usize],
            split_k: [1, 1, 2, 4][rng.range(0, 3) as usize],
            serial: rng.range(0, 1) == 1,
        });
    }
    v
}

fn configs() -> Vec<GemmSm80Config> {
    let mut v = rcute_kernel::catalogue::gemm_sm80_configs();
    // The other two majors, a column-major f32 output, f16, and a rasterization swizzle.
    v.push(GemmSm80Config::bf16(Major::K, Major::MN, [64, 64, 64], [2, 2]));
    v.push(GemmSm80Config::bf16(Major::MN, Major::MN, [64, 128, 32], [2, 2]));
    let mut c = GemmSm80Config::bf16(Major::MN, Major::MN, [128, 128, 32], [2, 2]);
    c.c = Element::F32;
    c.d = Element::F32;
    c.c_major = StorageOrder::ColMajor;
    v.push(c);
    let mut c = GemmSm80Config::bf16(Major::K, Major::K, [128, 128, 32], [2, 2]);
    c.a = Element::F16;
    c.b = Element::F16;
    c.c = Element::F16;
    c.d = Element::F16;
    c.raster_swizzle = 2;
    v.push(c);
    let mut c = GemmSm80Config::bf16(Major::K, Major::MN, [32, 32, 16], [1, 1]);
    c.c_major = StorageOrder::ColMajor;
    c.stages = Some(2);
    v.push(c);
    // Staged epilogue outputs: f16 (row-major) and f32 (row-major), bf16 column-major.
    let mut c = GemmSm80Config::bf16(Major::K, Major::K, [64, 64, 64], [2, 2]);
    (c.a, c.b, c.c, c.d) = (Element::F16, Element::F16, Element::F16, Element::F16);
    v.push(c);
    let mut c = GemmSm80Config::bf16(Major::K, Major::K, [128, 256, 32], [2, 4]);
    c.stages = Some(3);
    (c.c, c.d) = (Element::F32, Element::F32);
    v.push(c);
    let mut c = GemmSm80Config::bf16(Major::MN, Major::K, [16, 64, 128], [1, 4]);
    c.c_major = StorageOrder::ColMajor;
    v.push(c);
    v
}

#[test]
fn gemm_sm80_matches_the_f64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let mut rng = Rng::new("gemm_sm80_matches_the_f64_reference");
    let mut total = 0;
    for cfg in configs() {
        let k = build(&gpu, &cfg);
        let mut worst: f64 = 0.0;
        let cases = random_cases(&mut rng, cfg.tile, 6);
        for c in &cases {
            worst = worst.max(run_case(&gpu, &k, *c, &mut rng));
        }
        total += cases.len();
        eprintln!("{}: {} cases, worst relative error {worst:.2e}", k.g.name, cases.len());
    }
    eprintln!("{total} cases passed");
}

/// Throughput of the catalogue's large-tile kernels on a 4096^3 bf16 TN GEMM (printed;
/// no assertion beyond a plausibility floor).
#[test]
fn gemm_sm80_throughput_report() {
    let Some(gpu) = gpu_for_test() else { return };
    let stream = gpu.stream();
    let (m, n, kk) = (4096i64, 4096i64, 4096i64);
    let d_a = stream.alloc_zeros::<u16>((m * kk) as usize).unwrap();
    let d_b = stream.alloc_zeros::<u16>((n * kk) as usize).unwrap();
    let d_d = stream.alloc_zeros::<u16>((m * n) as usize).unwrap();
    let (pa, _ra) = d_a.device_ptr(stream);
    let (pb, _rb) = d_b.device_ptr(stream);
    let (pd, _rd) = d_d.device_ptr(stream);
    for (a_major, tile, warps, stages, raster) in [
        (Major::K, [128, 128, 32], [2, 2], 4, 0),
        (Major::K, [128, 128, 32], [2, 2], 4, 3),
        (Major::K, [128, 256, 32], [2, 4], 3, 3),
        (Major::K, [128, 128, 64], [2, 2], 3, 3),
        (Major::MN, [128, 256, 32], [2, 4], 3, 3),
    ] {
        let mut cfg = GemmSm80Config::bf16(a_major, Major::K, tile, warps);
        cfg.stages = Some(stages);
        cfg.raster_swizzle = raster;
        let k = build(&gpu, &cfg);
        let args = GemmArgs::packed(&cfg, m as i32, n as i32, kk as i32, 1, pa, pb, 0, pd);
        // SAFETY: packed buffers of the right sizes.
        let run = || unsafe { launch(&k.main, &k.g, &args).unwrap() };
        run();
        gpu.synchronize().unwrap();
        let iters = 20;
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            run();
        }
        gpu.synchronize().unwrap();
        let dt = t0.elapsed().as_secs_f64() / iters as f64;
        let tflops = 2.0 * (m * n * kk) as f64 / dt / 1e12;
        eprintln!("PERF {}: {:.3} ms, {tflops:.1} TFLOP/s", k.g.name, dt * 1e3);
        assert!(tflops > 1.0, "{}: implausibly slow", k.g.name);
    }
}
