//! Typed errors of the ops: every bad input is rejected before anything is launched.
//!
//! [`OpsError`] is also the one error type an application needs around an op: it converts
//! from the errors of opening a GPU ([`rcute_kernel::DeviceError`]), of a driver call such
//! as [`rcute_kernel::Gpu::synchronize`] ([`rcute_kernel::device::DriverFailure`]) and of
//! `cudarc`'s own calls (allocation, copies: [`cudarc::driver::DriverError`]), so `?`
//! works on all of them in a function returning `Result<_, OpsError>`.

/// Why an op refused its input or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Operand shapes do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A dimension is zero.
    #[error("empty problem: {0}")]
    Empty(String),
    /// A size or offset does not fit the kernel's index arithmetic.
    #[error("too large: {what}")]
    TooLarge {
        /// Which quantity.
        what: &'static str,
    },
    /// An element-type combination the op does not implement.
    #[error("unsupported element types: {0}")]
    DType(String),
    /// Strides that are neither row- nor column-major, negative, or overlapping.
    #[error("unsupported strides for {operand}: {detail}")]
    Strides {
        /// `A`, `B`, `C` or `D`.
        operand: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A pointer, leading dimension or batch stride breaks the vector-access alignment.
    #[error("misaligned {operand}: {detail}")]
    Alignment {
        /// `A`, `B`, `C` or `D`.
        operand: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The view reaches past the end of its buffer.
    #[error("{operand} reaches element {needed} but its buffer holds {len}")]
    OutOfBounds {
        /// `A`, `B`, `C` or `D`.
        operand: &'static str,
        /// Elements the view needs.
        needed: usize,
        /// Elements the buffer holds.
        len: usize,
    },
    /// A scale or bias vector of the wrong length.
    #[error("{operand} has {len} elements, expected {expected}")]
    VectorLength {
        /// `a_scale`, `b_scale` or `bias`.
        operand: &'static str,
        /// Elements of the view.
        len: usize,
        /// What the problem needs, e.g. `"1 (per tensor) or M = 77 (per row)"`.
        expected: String,
    },
    /// An operand lives on another device than the ops handle's GPU.
    #[error("{operand} is on device {found}, the ops handle on device {expected}")]
    Device {
        /// `A`, `B`, `C` or `D`.
        operand: &'static str,
        /// The operand's device ordinal.
        found: usize,
        /// The handle's device ordinal.
        expected: usize,
    },
    /// A scalar argument (`alpha`, `beta`) is NaN or infinite.
    #[error("{what} = {value} is not finite")]
    NonFinite {
        /// `alpha` or `beta`.
        what: &'static str,
        /// The value given.
        value: f32,
    },
    /// A stream that cannot run this handle's ops (another CUDA context).
    #[error("unusable stream: {0}")]
    Stream(String),
    /// What the op needs cannot happen while its stream captures a CUDA graph (allocating
    /// scratch; see [`crate::stream`]).
    #[error("not possible during stream capture: {0}")]
    Capture(String),
    /// The GPU's architecture has no kernel for this op.
    #[error("unsupported architecture: {0}")]
    Arch(String),
    /// No GPU could be opened ([`rcute_kernel::Gpu::open`]).
    #[error(transparent)]
    Detect(#[from] rcute_kernel::DeviceError),
    /// A driver call failed (e.g. [`rcute_kernel::Gpu::synchronize`]).
    #[error(transparent)]
    Driver(#[from] rcute_kernel::device::DriverFailure),
    /// A `cudarc` call of the application failed (allocation, copy, ...).
    #[error("CUDA driver call failed: {0}")]
    Cuda(#[from] cudarc::driver::DriverError),
    /// NCCL is missing (the message lists where it was looked for) or a call of it
    /// failed (expert parallelism, cargo feature `nccl`: `rcute_ops::ep`).
    #[error("NCCL: {0}")]
    Nccl(String),
    /// Generation, compilation or launch failed.
    #[error(transparent)]
    Kernel(#[from] Box<dyn std::error::Error + Send + Sync>),
}

/// A kernel-layer error (generation, compilation, launch) as an [`OpsError::Kernel`].
pub(crate) fn boxed<E: std::error::Error + Send + Sync + 'static>(e: E) -> OpsError {
    OpsError::Kernel(Box::new(e))
}
