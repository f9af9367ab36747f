//! # rcute-kernel
//!
//! Whole kernels and the machinery to run them: a structured CUDA C++ emitter, NVRTC
//! compilation, an in-memory and on-disk kernel cache, and launching through `cudarc`.
//!
//! ## Code generation
//!
//! * [`catalogue`] — the standard catalogue of generated units, checked in under `kernels/`.
//! * [`gemm_sm80`] — the Ampere-class GEMM family (`generate`, `GemmArgs`, `launch`,
//!   `launch_fused`): bf16 / f16 with the linear combination or any C-less `Fusion`
//!   epilogue, and INT8 `scaled_mm` (s8 x s8 -> s32 with the scaled-mm fusion, f16 / bf16
//!   out) for the Ampere class and Turing.
//! * [`emit`] — a structured CUDA C++ emitter; index arithmetic comes from layouts, with
//!   comments naming the layout behind each expression.
//! * [`tile_scheduler`] — the SM90 persistent tile scheduler: raster order, swizzle and
//!   cluster-aware work ids on the host, and the same mapping as generated device code.
//!
//! ## Run-time modules
//!
//! * [`toolkit`] — finds NVRTC, the CUDA headers and `cuobjdump` at run time (a system
//!   toolkit, or NVIDIA's pip wheels installed by `scripts/setup-cuda.sh`). Nothing CUDA is
//!   needed to build the crate.
//! * [`nvrtc`] — compiles CUDA C++ to a CUBIN for an [`Arch`], with compiler diagnostics
//!   parsed into [`Diagnostic`]s.
//! * [`resources`] — registers, spills, shared and constant memory per kernel, from the
//!   `ptxas -v` report every compilation produces.
//! * [`cache`] — [`KernelCache`]: compiled kernels cached in memory and on disk, keyed by a
//!   hash of everything that affects the output.
//! * [`device`] — [`Gpu`]: a CUDA device (or `None` where there is none) and module loading.
//! * [`launch`] — [`Function`]s, [`LaunchConfig`] (clusters, large dynamic shared memory,
//!   checked mode) and [`KernelArgs`].
//! * [`lane_ring`] — the statements of the per-lane shared `cp.async` ring
//!   ([`rcute_collective::lane_ring`]) of the streamed AWQ and MoE decode kernels.
//! * [`grid_dependency`] — the opening statements of kernels launched with a programmatic
//!   dependency (Hopper's programmatic dependent launch).
//! * [`sass`] — the SASS of a CUBIN via `cuobjdump`, for asserting on generated code
//!   without a GPU.
//! * [`tma`] — `cuTensorMapEncodeTiled` on an atom's [`rcute_atom::TmaEncodeArgs`].
//! * [`testing`] — skip-or-fail helpers for tests needing NVRTC or a GPU.
//!
//! ```no_run
//! use rcute_kernel::{Arch, CompileOptions, Gpu, KernelArgs, KernelCache, LaunchConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let src = r#"extern "C" __global__ void fill(float* p, float v, int n) {
//!     int i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) p[i] = v;
//! }"#;
//! let Some(gpu) = Gpu::detect()? else { return Ok(()) };
//! let arch = gpu.arch().unwrap_or(Arch::Sm80);
//! let compiled = KernelCache::global().get_or_compile(src, "fill.cu", &CompileOptions::new(arch))?;
//! let fill = gpu.load(&compiled)?.function("fill")?;
//! let buf = gpu.stream().alloc_zeros::<f32>(1000)?;
//! let args = KernelArgs::new().slice(&buf).f32(1.0).i32(1000);
//! // SAFETY: the arguments match `fill`'s parameters and `buf` holds 1000 floats.
//! unsafe { fill.launch(&LaunchConfig::for_elements(1000, 256).with_checked(true), &args)? };
//! # Ok(())
//! # }
//! ```

pub mod awq_dequantize;
pub mod awq_gemm;
pub mod awq_prepare;
pub mod cache;
pub mod catalogue;
pub mod device;
pub mod emit;
pub mod gemm_sm80;
pub mod gemm_sm90;
pub mod grid_dependency;
pub mod grouped_gemm;
pub mod lane_ring;
pub mod launch;
pub mod moe_routing;
pub mod nvrtc;
pub mod resources;
pub mod sass;
pub mod stream_k;
pub mod stream_scope;
pub mod testing;
pub mod tile_scheduler;
pub mod tma;
pub mod toolkit;
pub mod weight_stream;

pub use cache::KernelCache;
pub use device::{DeviceError, Gpu};
pub use launch::{Dim3, Function, KernelArgs, LaunchConfig, LaunchError, Module};
pub use nvrtc::{compile, nvrtc_version, Arch, CompileError, CompileOptions, Compiled, Diagnostic, Severity};
pub use resources::{KernelResources, ResourceReport, ResourceSource};
pub use sass::{Sass, SassError};
pub use tma::{encode_tiled, TmaEncodeError};
pub use toolkit::{Toolkit, ToolkitError};
