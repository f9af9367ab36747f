//! Why a configuration cannot be generated or a launch is refused.

use crate::launch::LaunchError;
use rcute_collective::epilogue::EpilogueError;
use rcute_collective::{FusionError, PlanError};

/// Why a configuration cannot be generated or a launch is refused.
#[derive(Debug, thiserror::Error)]
pub enum GemmError {
    /// The mainloop builder refused the configuration.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The epilogue refused the C / D types.
    #[error(transparent)]
    Epilogue(#[from] EpilogueError),
    /// The fusion (or its arguments) was refused.
    #[error(transparent)]
    Fusion(#[from] FusionError),
    /// Another configuration problem.
    #[error("invalid GEMM configuration: {0}")]
    Config(String),
    /// A problem size, leading dimension or split count is invalid.
    #[error("invalid GEMM arguments: {0}")]
    Shape(String),
    /// An alignment rule is broken (see the module documentation).
    #[error("alignment: {0}")]
    Alignment(String),
    /// The function passed to a launch helper is not this GEMM's kernel.
    #[error("function {got:?} is not {expected:?}")]
    WrongFunction {
        /// The expected kernel name.
        expected: String,
        /// The function's name.
        got: String,
    },
    /// The launch failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The stream-K plan or its buffers were refused.
    #[error(transparent)]
    StreamK(#[from] crate::stream_k::StreamKError),
}
