//! # rcute-kernel
//!
//! Whole kernels and the machinery to run them: a structured CUDA C++ emitter, NVRTC
//! compilation, an in-memory and on-disk kernel cache, and launching through `cudarc`.
