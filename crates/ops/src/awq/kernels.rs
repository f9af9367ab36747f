//! The AWQ kernels an [`crate::Ops`] handle generated, compiled and loaded (once per
//! configuration, through [`Memo`]).

use crate::memo::Memo;
use rcute_atom::Element;
use rcute_kernel::awq_dequantize::GeneratedAwqDequantize;
use rcute_kernel::awq_gemm::{AwqGemmConfig, GeneratedAwqGemm};
use rcute_kernel::awq_prepare::GeneratedAwqPrepare;
use rcute_kernel::Function;
use std::sync::Arc;

/// A loaded dequantization kernel.
#[derive(Clone)]
pub struct LoadedAwqDequantize {
    /// The generated source and launch geometry.
    pub generated: Arc<GeneratedAwqDequantize>,
    pub(crate) function: Function,
}

/// A loaded AWQ GEMM kernel.
#[derive(Clone)]
pub struct LoadedAwqGemm {
    /// The generated source and its plan.
    pub generated: Arc<GeneratedAwqGemm>,
    pub(crate) function: Function,
}

/// The AWQ kernels an [`crate::Ops`] handle loaded.
#[derive(Default)]
pub struct AwqKernels {
    /// By element type and whether the output is K-major (`[N, K]`).
    pub(crate) dequantize: Memo<(Element, bool), LoadedAwqDequantize>,
    pub(crate) gemm: Memo<AwqGemmConfig, LoadedAwqGemm>,
    /// The reorder into the prepared layout (its launch geometry and function).
    pub(crate) prepare: Memo<(), (Arc<GeneratedAwqPrepare>, rcute_kernel::Function)>,
    /// Held while the dense prefill path dequantizes into its stream's weight scratch and
    /// launches the GEMM that reads it, so no other op reuses that scratch in between.
    pub(crate) dense: std::sync::Mutex<()>,
}

impl AwqKernels {
    /// How many kernels were built.
    pub fn builds(&self) -> usize {
        self.dequantize.builds() + self.gemm.builds() + self.prepare.builds()
    }
}
