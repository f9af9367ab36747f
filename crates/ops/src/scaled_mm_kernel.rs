//! The loaded INT8 scaled-mm kernels of the SM80 class an [`crate::Ops`] handle keeps, and
//! the key it finds them by (see [`crate::scaled_mm`]).

use crate::tensor::DType;
use rcute_kernel::gemm_sm80::{GeneratedGemm, ScaleKind, Sm80Target as ScaledMmTarget};
use rcute_kernel::Function;
use std::sync::Arc;

/// What selects a loaded kernel of [`crate::Ops::run_scaled_mm`] (everything its configuration
/// depends on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ScaledMmKey {
    pub(crate) target: ScaledMmTarget,
    pub(crate) tile: [i64; 3],
    pub(crate) warps: [i64; 2],
    pub(crate) stages: Option<usize>,
    pub(crate) raster_swizzle: u32,
    pub(crate) smem_budget: usize,
    pub(crate) out: DType,
    pub(crate) a_scale: ScaleKind,
    pub(crate) b_scale: ScaleKind,
    pub(crate) bias: bool,
    pub(crate) copy_bytes: usize,
}

/// A generated scaled-mm kernel loaded on the GPU.
#[derive(Clone)]
pub struct LoadedScaledMm {
    /// The generated source and its launch geometry.
    pub generated: Arc<GeneratedGemm>,
    pub(crate) main: Function,
    pub(crate) reduce: Function,
}
