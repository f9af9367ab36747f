//! The `bias_gelu_gemm` example of `rcute-kernel` (a new GEMM variant, `D = gelu(A @ B +
//! bias[n])` in bf16, for sm_80 and sm_90a): NVRTC compiles both kernels (the example's
//! `main`), and on a GPU both run (the sm_90a one on sm_90 only) on random bf16 operands and
//! every output is compared with the fusion's CPU reference (`Fusion::eval` of the float64
//! product): within `2e-2 * (1 + |ref|)` (bf16 rounding of D plus f32 accumulation).
//!
//! Skips with a printed reason without NVRTC or a GPU (`RCUTE_REQUIRE_GPU=1` makes a missing
//! GPU a failure). `RCUTE_SEED` fixes the random seed, which is printed.

#[path = "../../crates/kernel/examples/bias_gelu_gemm.rs"]
mod example;

mod common;

use cudarc::driver::{CudaSlice, DevicePtr};
use rcute_collective::{FusionArgs, HostInputs};
use rcute_kernel::gemm_sm80::GemmArgs;
use rcute_kernel::testing::{gpu_for_test, toolkit_for_test};
use rcute_kernel::{gemm_sm80, gemm_sm90, Arch, CompileOptions, Gpu, KernelCache};

/// bf16 bytes of `v` (at least 16: empty operands still get a valid buffer).
fn bf16_bytes(v: &[f64]) -> Vec<u8> {
    let mut b: Vec<u8> = v
        .iter()
        .flat_map(|&x| half::bf16::from_f64(x).to_bits().to_le_bytes())
        .collect();
    b.resize(b.len().max(16), 0);
    b
}

/// Random bf16-representable values in [-1, 1).
fn random_bf16(rng: &mut common::Rng, count: i64) -> Vec<f64> {
    (0..count)
        .map(|_| half::bf16::from_f64(rng.range(-1000, 999) as f64 / 1000.0).to_f64())
        .collect()
}

#[test]
fn example_compiles_for_sm80_and_sm90a() {
    if toolkit_for_test().is_none() {
        return;
    }
    example::main().expect("both variants compile");
    let sm80 = example::sm80().source;
    assert!(sm80.contains("rc_fusion_visit"));
    for unfolded in ["+ 0)", "- 0)", "* 1)", ">> 0", "<< 0"] {
        assert!(!sm80.contains(unfolded), "unfolded `{unfolded}` in the sm_80 unit");
    }
    assert!(example::sm90().name.ends_with("_bias_gelu"));
}

/// `(M, N, K)` on the GPU, for one architecture's kernel; returns the largest error.
fn run(gpu: &Gpu, arch: Arch, (m, n, k): (i64, i64, i64), rng: &mut common::Rng) -> f64 {
    let (ha, hb, hbias) = (random_bf16(rng, m * k), random_bf16(rng, n * k), random_bf16(rng, n));
    let s = gpu.stream();
    let up = |v: &[f64]| -> CudaSlice<u8> { s.clone_htod(&bf16_bytes(v)).expect("htod") };
    let (da, db, dbias) = (up(&ha), up(&hb), up(&hbias));
    let dd = s.alloc_zeros::<u8>((m * n * 2) as usize).expect("alloc");
    // The sm_80 kernel runs on any newer GPU once compiled for it (a CUBIN is loadable only on
    // the architecture it was built for).
    let target = if arch == Arch::Sm80 {
        gpu.arch().expect("a supported GPU")
    } else {
        arch
    };
    let fused = |name: &str, source: &str| {
        let c = KernelCache::global().get_or_compile(source, &format!("{name}.cu"), &CompileOptions::new(target));
        gpu.load(&c.expect("compiles")).expect("loads")
    };
    {
        let ptr = |b: &CudaSlice<u8>| b.device_ptr(s).0;
        let args = GemmArgs::tn(m as i32, n as i32, k as i32, 1, ptr(&da), ptr(&db), 0, ptr(&dd));
        let fa = FusionArgs::new().ptr("bias", ptr(&dbias));
        // SAFETY: the buffers hold the packed matrices and the bias that `args` describe.
        match arch {
            Arch::Sm80 => {
                let g = example::sm80();
                let module = fused(&g.name, &g.source);
                let (f, r) = (
                    module.function(&g.name).unwrap(),
                    module.function(&g.reduce_name).unwrap(),
                );
                unsafe { gemm_sm80::launch_fused(&f, &r, &g, &args, &fa) }.expect("sm80 launch");
            }
            _ => {
                let g = example::sm90();
                let module = fused(&g.name, &g.source);
                let f = module.function(&g.name).unwrap();
                unsafe { gemm_sm90::launch_fused(&f, &g, &args, &fa, gpu.sm_count()) }.expect("sm90 launch");
            }
        }
        gpu.synchronize().expect("kernel runs");
    }
    let out = s.clone_dtoh(&dd).expect("dtoh");
    let acc: Vec<f64> = (0..m * n)
        .map(|i| {
            (0..k)
                .map(|q| ha[((i / n) * k + q) as usize] * hb[((i % n) * k + q) as usize])
                .sum()
        })
        .collect();
    let host = HostInputs::new(m, n, 1).with_acc(acc).with_tensor("bias", hbias);
    let fusion = example::bias_gelu();
    let mut worst = 0.0f64;
    for i in 0..m * n {
        let want = fusion
            .eval(&FusionArgs::new().ptr("bias", 1), &host, i / n, i % n, 0)
            .unwrap();
        let got = half::bf16::from_le_bytes([out[2 * i as usize], out[2 * i as usize + 1]]).to_f64();
        let err = (got - want).abs() / (1.0 + want.abs());
        assert!(
            err < 2e-2,
            "{arch:?} ({m},{n},{k}): D({},{}) = {got}, want {want}",
            i / n,
            i % n
        );
        worst = worst.max(err);
    }
    worst
}

#[test]
fn example_matches_the_cpu_reference_on_the_gpu() {
    let Some(gpu) = gpu_for_test() else { return };
    let mut rng = common::Rng::for_test("bias_gelu_example");
    let mut archs = vec![Arch::Sm80];
    if gpu.compute_capability().0 == 9 {
        archs.push(Arch::Sm90a);
    } else {
        eprintln!("bias_gelu_example: no sm_90 GPU, the sm_90a kernel is only compiled");
    }
    for arch in archs {
        for shape in [(128, 128, 32), (200, 136, 72), (1, 8, 8)] {
            let worst = run(&gpu, arch, shape, &mut rng);
            eprintln!("bias_gelu_example {arch:?} {shape:?}: max error {worst:.2e}");
        }
    }
}
