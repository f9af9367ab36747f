//! The AWQ kernels an [`crate::Ops`] handle generated, compiled and loaded (once per
//! configuration, through [`Memo`]).

use crate::memo::Memo;
use cudarc::driver::CudaSlice;
use rcute_atom::Element;
use rcute_kernel::awq_dequantize::GeneratedAwqDequantize;
use rcute_kernel::awq_gemm::{AwqGemmConfig, GeneratedAwqGemm};
use rcute_kernel::Function;
use std::sync::{Arc, Mutex};

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
    pub(crate) dequantize: Memo<Element, LoadedAwqDequantize>,
    pub(crate) gemm: Memo<AwqGemmConfig, LoadedAwqGemm>,
    /// The split-K accumulation workspace: f32, allocated zeroed and left zeroed by every
    /// completed launch (not the handle's scratch workspace, which other ops leave dirty).
    pub(crate) accumulators: Mutex<Option<CudaSlice<u8>>>,
}

impl AwqKernels {
    /// How many kernels were built.
    pub fn builds(&self) -> usize {
        self.dequantize.builds() + self.gemm.builds()
    }
}
