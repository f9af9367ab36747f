//! AWQ int4 weight-only quantization (W4A16) on AutoAWQ's `version="gemm"` checkpoints
//! (issue 12): the format and its float64 reference ([`mod@format`]), validation into typed
//! errors ([`validate`]), the shape-based kernel choice ([`select`]), and the ops
//! [`crate::Ops::awq_dequantize`] and [`crate::Ops::awq_gemm`] ([`run`]), whose kernels are
//! generated from `rcute_collective::awq_mainloop` by `rcute_kernel::awq_gemm` and
//! `rcute_kernel::awq_dequantize`. Not done yet: the prepared-weight fast path and an SM90
//! (`wgmma`) path.

pub mod format;
pub mod kernels;
pub mod run;
pub mod select;
pub mod validate;

pub use format::{dequantize_reference, gemm_reference, pack_awq_matrix, unpack_awq_matrix, AwqShape, AWQ_GROUP_SIZES};
pub use kernels::AwqKernels;
pub use validate::{
    validate_awq_dequantize, validate_awq_gemm, validate_awq_weight, AwqGemmProblem, AwqTensors, AwqWeightProblem,
};
