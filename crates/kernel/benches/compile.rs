//! Times an NVRTC compilation of a small kernel against a cache hit.
//!
//! Run with `cargo bench -p rcute-kernel --bench compile`; does nothing without NVRTC.

use criterion::{criterion_group, criterion_main, Criterion};
use rcute_kernel::{compile, Arch, CompileOptions, KernelCache, Toolkit};

const SRC: &str = r#"#include <cuda_bf16.h>
extern "C" __global__ void axpy(const __nv_bfloat16* x, __nv_bfloat16* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2bfloat16(a * __bfloat162float(x[i]) + __bfloat162float(y[i]));
}
"#;

fn bench(c: &mut Criterion) {
    // Generation needs no NVRTC: time building every catalogue unit from the atoms.
    c.bench_function("generate_catalogue", |b| b.iter(rcute_kernel::catalogue::standard));
    if let Err(e) = Toolkit::locate() {
        eprintln!("skipping compile benchmarks: {e}");
        return;
    }
    let opts = CompileOptions::new(Arch::Sm90a);
    c.bench_function("nvrtc_compile_sm90a", |b| {
        b.iter(|| compile(SRC, "axpy.cu", &opts).unwrap())
    });

    // A generated unit: the SM80 atom check unit (44 kernels calling every SM80 atom).
    let unit = rcute_kernel::catalogue::standard()
        .into_iter()
        .find(|k| k.name == "atoms_sm80")
        .unwrap();
    let mut g = c.benchmark_group("generated");
    g.sample_size(10);
    g.bench_function("nvrtc_compile_atoms_sm80_unit", |b| {
        b.iter(|| compile(&unit.source, "atoms_sm80.cu", &CompileOptions::new(Arch::Sm80)).unwrap())
    });
    g.finish();

    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::with_dir(dir.path());
    cache.get_or_compile(SRC, "axpy.cu", &opts).unwrap();
    c.bench_function("cache_hit_memory", |b| {
        b.iter(|| cache.get_or_compile(SRC, "axpy.cu", &opts).unwrap())
    });
    c.bench_function("cache_hit_disk", |b| {
        b.iter(|| {
            cache.clear_memory();
            cache.get_or_compile(SRC, "axpy.cu", &opts).unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
