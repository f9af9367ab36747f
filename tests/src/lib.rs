//! Cross-crate integration tests of rcute: the catalogue in `kernels/` (sync, NVRTC
//! compilation, resources, SASS), and the GPU suites (atoms, a kernel built from atoms,
//! the SM80 GEMM and `Ops::gemm`), which skip with a printed reason without a GPU and fail
//! under `RCUTE_REQUIRE_GPU=1`.
//!
//! The README's Rust examples are compiled here:
#![doc = include_str!("../../README.md")]
