//! Launch tests. They skip without a GPU (set RCUTE_REQUIRE_GPU=1 to make that a failure).

use rcute_kernel::testing::{gpu_for_test, toolkit_for_test};
use rcute_kernel::{Arch, CompileOptions, Gpu, KernelArgs, KernelCache, LaunchConfig, LaunchError, Module};

const SRC: &str = r#"
#include <cuda_bf16.h>
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
// Reverses each block's slice through dynamic shared memory.
extern "C" __global__ void reverse_smem(const float* in, float* out, int per_block) {
    extern __shared__ float smem[];
    const float* src = in + blockIdx.x * per_block;
    for (int i = threadIdx.x; i < per_block; i += blockDim.x) smem[i] = src[i];
    __syncthreads();
    for (int i = threadIdx.x; i < per_block; i += blockDim.x) out[blockIdx.x * per_block + i] = smem[per_block - 1 - i];
}
// Records each block's rank within its cluster.
extern "C" __global__ void cluster_rank(unsigned* out) {
#if __CUDA_ARCH__ >= 900
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) out[blockIdx.x] = rank;
#endif
}
extern "C" __global__ void trap() { __trap(); }
"#;

fn setup() -> Option<(Gpu, Module)> {
    toolkit_for_test()?;
    let gpu = gpu_for_test()?;
    let arch = gpu.arch().expect("a supported GPU architecture");
    let compiled = KernelCache::memory_only()
        .get_or_compile(SRC, "gpu_test.cu", &CompileOptions::new(arch))
        .unwrap();
    let module = gpu.load(&compiled).unwrap();
    Some((gpu, module))
}

#[test]
fn add_kernel_gives_a_plus_b() {
    let Some((gpu, module)) = setup() else { return };
    let add = module.function("add").unwrap();
    // From ptxas' report or, once the driver is up (NVRTC then logs nothing), the driver.
    assert!(add.resources().registers > 0, "{:?}", add.resources());
    let n = 100_003usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32 + 0.5).collect();
    let stream = gpu.stream();
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let mut dc = stream.alloc_zeros::<f32>(n).unwrap();
    let args = KernelArgs::new().slice(&da).slice(&db).slice(&dc).i32(n as i32);
    let cfg = LaunchConfig::for_elements(n as u32, 256).with_checked(true);
    // SAFETY: (const float*, const float*, float*, int) with n-element buffers.
    unsafe { add.launch(&cfg, &args) }.unwrap();
    let c = stream.clone_dtoh(&dc).unwrap();
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }

    // The raw-pointer interface does the same.
    stream.memset_zeros(&mut dc).unwrap();
    let mut params = args.params();
    // SAFETY: as above.
    unsafe { add.launch_raw(&cfg, &mut params) }.unwrap();
    assert_eq!(stream.clone_dtoh(&dc).unwrap()[n - 1], a[n - 1] + b[n - 1]);
}

#[test]
fn large_dynamic_shared_memory_is_opted_into() {
    let Some((gpu, module)) = setup() else { return };
    let f = module.function("reverse_smem").unwrap();
    let per_block = ((gpu.max_shared_per_block_optin() - f.static_smem_bytes()) / 4).min(48 * 1024) as usize;
    assert!(
        per_block * 4 > 48 * 1024,
        "device should allow more than 48 KiB per block"
    );
    let blocks = 3;
    let input: Vec<f32> = (0..per_block * blocks).map(|i| i as f32).collect();
    let stream = gpu.stream();
    let din = stream.clone_htod(&input).unwrap();
    let dout = stream.alloc_zeros::<f32>(input.len()).unwrap();
    let args = KernelArgs::new().slice(&din).slice(&dout).i32(per_block as i32);
    let cfg = LaunchConfig::new(blocks as u32, 256)
        .with_dynamic_smem((per_block * 4) as u32)
        .with_checked(true);
    // SAFETY: (const float*, float*, int), buffers of blocks * per_block floats.
    unsafe { f.launch(&cfg, &args) }.unwrap();
    let out = stream.clone_dtoh(&dout).unwrap();
    for blk in 0..blocks {
        for i in 0..per_block {
            assert_eq!(out[blk * per_block + i], input[blk * per_block + per_block - 1 - i]);
        }
    }
    // One byte more than the device allows is refused before launching.
    let too_much = cfg.with_dynamic_smem(gpu.max_shared_per_block_optin() - f.static_smem_bytes() + 1);
    // SAFETY: never launched.
    let err = unsafe { f.launch(&too_much, &args) }.unwrap_err();
    assert!(matches!(err, LaunchError::SharedMemory { .. }), "{err}");
}

#[test]
fn cluster_launch() {
    let Some((gpu, module)) = setup() else { return };
    if gpu.compute_capability().0 < 9 {
        eprintln!("skipping: clusters need sm_90");
        return;
    }
    let f = module.function("cluster_rank").unwrap();
    for cluster in [2u32, 4, 16] {
        let blocks = 64u32;
        let out = gpu.stream().alloc_zeros::<u32>(blocks as usize).unwrap();
        let args = KernelArgs::new().slice(&out);
        let cfg = LaunchConfig::new(blocks, 128).with_cluster(cluster).with_checked(true);
        // SAFETY: (unsigned*) with one element per block.
        unsafe { f.launch(&cfg, &args) }.unwrap_or_else(|e| panic!("cluster {cluster}: {e}"));
        let ranks = gpu.stream().clone_dtoh(&out).unwrap();
        for (b, r) in ranks.iter().enumerate() {
            assert_eq!(*r, b as u32 % cluster, "block {b} cluster {cluster}");
        }
    }
    // A grid that is not a multiple of the cluster is refused.
    let out = gpu.stream().alloc_zeros::<u32>(3).unwrap();
    // SAFETY: never launched.
    let err = unsafe {
        f.launch(
            &LaunchConfig::new(3, 32).with_cluster(2),
            &KernelArgs::new().slice(&out),
        )
    }
    .unwrap_err();
    assert!(matches!(err, LaunchError::InvalidConfig { .. }), "{err}");
}

#[test]
fn bad_requests_are_typed_errors() {
    let Some((gpu, module)) = setup() else { return };
    assert!(matches!(
        module.function("no_such_kernel"),
        Err(LaunchError::FunctionNotFound { .. })
    ));
    assert!(matches!(
        module.function("bad\0name"),
        Err(LaunchError::FunctionNotFound { .. })
    ));
    let add = module.function("add").unwrap();
    for cfg in [
        LaunchConfig::new(0, 32),
        LaunchConfig::new(1, 0),
        LaunchConfig::new(1, 2048),
    ] {
        // SAFETY: never launched.
        let err = unsafe { add.launch(&cfg, &KernelArgs::new()) }.unwrap_err();
        assert!(matches!(err, LaunchError::InvalidConfig { .. }), "{err}");
    }
    // A cubin for another architecture generation is refused at load time.
    let other = if gpu.compute_capability().0 == 8 {
        Arch::Sm75
    } else {
        Arch::Sm80
    };
    let compiled = rcute_kernel::compile(SRC, "gpu_test.cu", &CompileOptions::new(other)).unwrap();
    assert!(matches!(gpu.load(&compiled), Err(LaunchError::ArchMismatch { .. })));
}

const TRAP_CHILD: &str = "RCUTE_GPU_TEST_TRAP_CHILD";

/// Runs in a child process: a kernel fault poisons the CUDA context for the whole process.
#[test]
fn trap_child_process() {
    if std::env::var_os(TRAP_CHILD).is_none() {
        return;
    }
    let Some((_gpu, module)) = setup() else {
        return;
    };
    let trap = module.function("trap").unwrap();
    // SAFETY: the kernel takes no parameters.
    let err = unsafe { trap.launch(&LaunchConfig::new(1, 1).with_checked(true), &KernelArgs::new()) }.unwrap_err();
    match err {
        LaunchError::Kernel { kernel, failure } => {
            assert_eq!(kernel, "trap");
            println!("TRAP_REPORTED {}", failure.name);
        }
        other => panic!("expected a kernel error, got {other}"),
    }
}

#[test]
fn checked_mode_reports_kernel_faults() {
    if setup().is_none() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "trap_child_process", "--nocapture", "--test-threads=1"])
        .env(TRAP_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("TRAP_REPORTED"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
