//! # rcute-ops
//!
//! What applications call. Each op takes matrix views over the application's device
//! buffers ([`tensor::MatrixRef`], [`tensor::MatrixMut`]), validates them into a typed
//! problem (every bad input is a typed [`OpsError`], never a panic or an out-of-bounds
//! access), picks a kernel configuration in one place per op, and runs the generated,
//! cached kernel.
//!
//! Today: `gemm` (issue 4): [`Ops::gemm`]; INT8 `scaled_mm` (issue 6, Turing and Ampere
//! class): [`Ops::scaled_mm`] (see [`scaled_mm`]); AWQ W4A16 on AutoAWQ checkpoints (issue
//! 12): [`Ops::awq_gemm`] and [`Ops::awq_dequantize`] (see [`awq`]). FP8 scaled GEMM and
//! fused MoE follow in later issues.
//!
//! Ops run on a stream the application chooses ([`Ops::on_stream`], or [`Gpu::from_stream`]
//! for a whole handle), in order with the application's own kernels and without any
//! device-wide synchronization; with `cudarc`'s event tracking they hold the buffers'
//! guards for the launch, and they can be captured in CUDA graphs. [`stream`] states the
//! rules. `gemm` and INT8 `scaled_mm` take leading dimensions, K and pointers that are not
//! 16-byte aligned (a narrow-vector kernel runs them; see [`gemm::copy_bytes`]).
//!
//! An application needs only this crate: it re-exports the GPU handle ([`Gpu`]), the
//! `cudarc` and `half` crates rcute is built against ([`cudarc`], [`half`], and the pieces
//! one GEMM names at the crate root: [`CudaSlice`], [`CudaStream`], [`bf16`], [`f16`](struct@f16)), and
//! [`OpsError`] converts from every error on the way (opening the GPU, allocating and
//! copying, the op, synchronising):
//!
//! ```
//! use rcute_ops::{bf16, Gpu, MatrixMut, MatrixRef, Ops, OpsError};
//!
//! fn run() -> Result<Option<Vec<bf16>>, OpsError> {
//!     let Some(gpu) = Gpu::detect()? else { return Ok(None) }; // no GPU here
//!     let ops = Ops::new(gpu);
//!     let stream = ops.gpu().stream().clone();
//!     let (m, n, k) = (64, 64, 64);
//!     let a = stream.clone_htod(&vec![bf16::from_f32(1.0); m * k])?;
//!     let b = stream.clone_htod(&vec![bf16::from_f32(0.5); k * n])?;
//!     let mut d = stream.alloc_zeros::<bf16>(m * n)?;
//!     let a_view = MatrixRef::new(&a, m, k);
//!     let b_view = MatrixRef::new(&b, k, n);
//!     ops.gemm(&a_view, &b_view, None, &mut MatrixMut::new(&mut d, m, n), 1.0, 0.0)?;
//!     ops.gpu().synchronize()?;
//!     Ok(Some(stream.clone_dtoh(&d)?))
//! }
//!
//! match run() {
//!     Ok(Some(d)) => assert!(d.iter().all(|x| x.to_f32() == 32.0)),
//!     Ok(None) => eprintln!("no CUDA GPU: nothing to run"),
//!     Err(OpsError::Detect(e)) => eprintln!("no usable GPU: {e}"),
//!     Err(e) => panic!("{e}"),
//! }
//! ```

pub mod awq;
pub mod context;
pub mod env_choice;
#[cfg(feature = "nccl")]
pub mod ep;
pub mod error;
pub mod gemm;
pub mod memo;
pub mod moe;
pub mod scaled_mm;
mod scaled_mm_config;
mod scaled_mm_kernel;
pub mod select;
pub mod stream;
pub mod tensor;
pub mod tuning;

pub use context::Ops;
pub use cudarc;
pub use cudarc::driver::{CudaSlice, CudaStream};
pub use error::OpsError;
pub use gemm::{check_gemm_arch, validate, GemmProblem};
pub use half;
pub use half::{bf16, f16};
pub use rcute_kernel::device::{DeviceError, DriverFailure};
pub use rcute_kernel::Gpu;
pub use scaled_mm::{
    check_scaled_mm_arch, sm90_scaled_config, validate_scaled_mm, Scale, ScaledMmKind, ScaledMmProblem,
};
pub use tensor::{DType, Element, Geometry, Major, MatrixMut, MatrixRef, VectorRef, E4M3};
