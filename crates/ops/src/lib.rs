//! # rcute-ops
//!
//! What applications call. Each op takes matrix views over the application's device
//! buffers ([`tensor::MatrixRef`], [`tensor::MatrixMut`]), validates them into a typed
//! problem (every bad input is a typed [`OpsError`], never a panic or an out-of-bounds
//! access), picks a kernel configuration in one place per op, and runs the generated,
//! cached kernel.
//!
//! Today: `gemm` (issue 4): [`Ops::gemm`]; INT8 `scaled_mm` (issue 6, Turing and Ampere
//! class): [`Ops::scaled_mm`] (see [`scaled_mm`]). FP8 scaled GEMM, AWQ int4 GEMM and fused
//! MoE follow in later issues.

pub mod awq;
pub mod context;
pub mod error;
pub mod gemm;
pub mod moe;
pub mod scaled_mm;
pub mod select;
pub mod tensor;

pub use context::Ops;
pub use error::OpsError;
pub use gemm::{validate, GemmProblem};
pub use scaled_mm::{validate_scaled_mm, Scale, ScaledMmProblem};
pub use tensor::{DType, Element, Geometry, Major, MatrixMut, MatrixRef, VectorRef, E4M3};
