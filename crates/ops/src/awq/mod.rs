//! AWQ int4 weight-only quantization (W4A16) on AutoAWQ's `version="gemm"` checkpoints
//! (issue 12): the format and its float64 reference ([`mod@format`]), validation into typed
//! errors ([`validate`]), the shape-based choice of path and kernel ([`select`]), and the
//! ops [`crate::Ops::awq_dequantize`] and [`crate::Ops::awq_gemm`] ([`run`]), whose kernels
//! are generated from `rcute_collective::awq_mainloop` by `rcute_kernel::awq_gemm` and
//! `rcute_kernel::awq_dequantize`; for prefill sizes on sm_90, `awq_gemm` dequantizes into
//! a K-major scratch weight and runs the dense SM90 GEMM ([`dense`],
//! [`crate::Ops::awq_dequantize_kmajor`]); [`AwqWeight::prepare`] reorders `qweight` once
//! for [`crate::Ops::awq_gemm_prepared`] ([`prepared`]), which on sm_90 runs the SM90
//! mixed-input kernel (swap-AB RS `wgmma` on the prepared weight,
//! `rcute_collective::awq_wgmma`) for 32 < M <= 4096 where
//! [`select::select_awq_wgmma`] takes the shape, and before that its split-K variant at
//! small batches where [`select_split::select_awq_wgmma_split`] takes the shape (9 to 96
//! rows of a wide weight, 17 to 64 of a narrower one); on sm_90 `awq_gemm` runs the same
//! kernels on the checkpoint's own words, the prepared op's wgmma choice with the
//! checkpoint flag, from 9 to 3072 rows ([`select_checkpoint_wgmma`]), else at prefill
//! sizes the one-split kernel on `qweight` reordered per call into stream scratch
//! ([`reordered`], where [`select::awq_reordered_wins`]); at 1 to 16 rows `awq_gemm` takes
//! the streamed and fused kernels of [`select_checkpoint`] where the wgmma kernel does not
//! apply; at 9 to 16 rows of a wide weight `awq_gemm_prepared` takes the 16-row streamed
//! tile of [`select_streamed16`] first, at 17 to 32 rows the 24- / 32-row tiles of
//! [`select_streamed32`].

pub mod dense;
pub mod format;
pub mod kernels;
pub mod prefetch;
pub mod prepared;
pub mod reordered;
#[cfg(test)]
pub(crate) mod rule_launch;
pub mod run;
pub mod select;
pub mod select_checkpoint;
pub mod select_checkpoint_wgmma;
pub mod select_split;
pub mod select_streamed16;
pub mod select_streamed32;
pub mod validate;

pub use format::{dequantize_reference, gemm_reference, pack_awq_matrix, unpack_awq_matrix, AwqShape, AWQ_GROUP_SIZES};
pub use kernels::AwqKernels;
pub use prepared::AwqWeight;
pub use validate::{
    validate_awq_dequantize, validate_awq_dequantize_kmajor, validate_awq_gemm, validate_awq_weight, AwqGemmProblem,
    AwqTensors, AwqWeightProblem,
};
