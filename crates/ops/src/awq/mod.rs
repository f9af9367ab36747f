//! AWQ int4 weight-only quantization (W4A16): the checkpoint format and its reference.
//! The GPU ops (`awq_dequantize`, `awq_gemm`, prepared weights) build on these (issue 12).

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
