//! # rcute-candle
//!
//! rcute's ops on [candle](https://github.com/huggingface/candle) tensors: GEMM
//! ([`matmul`], [`gemm`] with its fused `alpha * A @ B + beta * C` epilogue), the INT8 /
//! FP8 [`scaled_mm`], AWQ W4A16 ([`awq_gemm`], [`awq_dequantize`]) and the fused MoE
//! layer ([`fused_moe`]). Each is a plain function over `&Tensor` that returns a new
//! tensor on the inputs' CUDA device.
//!
//! * **Streams.** An op runs on the candle device's own stream (rcute is opened on it with
//!   `Gpu::from_stream`, once per device: [`ops`]), in order with candle's kernels and
//!   without any synchronization; it returns once launched.
//! * **Validation.** Element type, shape, layout (strides and start offset from candle's
//!   `Layout`: row- or column-major matrices, contiguous vectors) and device are checked
//!   before anything runs; a rejection is a candle error (`Error::Wrapped`) whose message
//!   is rcute's [`OpsError`](rcute_ops::OpsError) message (see [`Error`]). The checks run
//!   on CPU tensors too, so they are testable without a GPU; a CPU tensor that passes them
//!   is then refused ([`Error::NotCuda`]).
//! * **Element types.** candle's `bf16`, `f16`, `f32`, `i32` and `f8e4m3` are rcute's;
//!   candle has no `i8`, so INT8 operands are `u8` tensors holding the `s8` bytes.
//! * **Build.** The `cuda` feature turns on candle's CUDA backend (which compiles its
//!   kernels with `nvcc`); without it every op validates and then fails with
//!   [`Error::NoCudaFeature`]. See `scripts/build-candle.sh` and the crate README.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! // Validation needs no GPU: a K mismatch is rcute's shape error.
//! let a = Tensor::zeros((64, 32), DType::BF16, &Device::Cpu).unwrap();
//! let b = Tensor::zeros((48, 64), DType::BF16, &Device::Cpu).unwrap();
//! let e = rcute_candle::matmul(&a, &b).unwrap_err();
//! assert!(e.to_string().contains("shape mismatch"), "{e}");
//! ```

mod awq;
mod device;
mod error;
mod gemm;
mod launch;
mod moe;
mod operand;
mod scaled_mm;

pub use awq::{awq_dequantize, awq_gemm, AwqWeight};
pub use device::cuda_device;
pub use error::Error;
pub use gemm::{gemm, matmul};
#[cfg(feature = "cuda")]
pub use launch::ops;
pub use moe::{fused_moe, MoeRouting};
pub use rcute_ops;
pub use rcute_ops::moe::MoeOptions;
pub use scaled_mm::scaled_mm;
