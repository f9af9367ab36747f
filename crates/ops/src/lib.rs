//! # rcute-ops
//!
//! What applications call: bf16/fp16 GEMM, INT8 `scaled_mm`, FP8 scaled GEMM, AWQ int4
//! GEMM and fused MoE, with per-architecture dispatch and autotuning.
//!
//! Planned contents (issues 4-6 and later): validated tensor views over `cudarc` buffers,
//! the op entry points, and one kernel-selection module per op.
