//! The fused MoE layer with a forced configuration ([`Ops::run_fused_moe_with`]): the
//! grouped GEMMs' tile and GEMM2's K splits of a [`MoeSpec`] instead of the rules'
//! ([`super::moe_tile`], [`super::moe_splits`]); `rcute tune moe` times its candidates
//! through it.

use super::problem::{MoeProblem, WorkspaceLayout};
use crate::error::OpsError;
use crate::tensor::DType;
use crate::tuning::MoeSpec;
use crate::Ops;

/// The workspace [`Ops::run_fused_moe_with`] needs for `spec` (as
/// [`super::fused_moe_workspace_bytes`] for the rules' choice).
///
/// ```
/// use rcute_ops::moe::{fused_moe_workspace_bytes, fused_moe_workspace_bytes_with};
/// use rcute_ops::tuning::MoeSpec;
/// use rcute_ops::DType;
/// let spec = MoeSpec { tile: [64, 128, 32], warps: [2, 2], splits: 8 };
/// let forced = fused_moe_workspace_bytes_with(4, 2, 8, 4096, 14336, DType::BF16, &spec).unwrap();
/// assert!(forced > 0);
/// assert!(fused_moe_workspace_bytes(4, 2, 8, 4096, 14336, DType::BF16).is_ok());
/// ```
pub fn fused_moe_workspace_bytes_with(
    tokens: usize,
    topk: usize,
    local_experts: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
    spec: &MoeSpec,
) -> Result<usize, OpsError> {
    Ok(layout_for(tokens, topk, local_experts, hidden, inter, dtype, spec)?.bytes)
}

fn layout_for(
    tokens: usize,
    topk: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
    spec: &MoeSpec,
) -> Result<WorkspaceLayout, OpsError> {
    let too_large = || OpsError::TooLarge { what: "MoE workspace" };
    if spec.tile.iter().chain(&spec.warps).any(|&x| x <= 0) || spec.splits == 0 {
        return Err(OpsError::Shape(format!(
            "MoE configuration {spec}: non-positive extent"
        )));
    }
    let e = dtype.bytes();
    WorkspaceLayout::new(
        tokens,
        topk,
        local,
        spec.tile[0] as usize,
        inter.checked_mul(e).ok_or_else(too_large)?,
        hidden.checked_mul(e).ok_or_else(too_large)?,
        spec.splits as usize,
        0,
    )
}

impl Ops {
    /// Launch a validated layer with the grouped GEMMs' tile and GEMM2's K splits of
    /// `spec` (tests, benchmarks and the tuner cover every configuration this way).
    ///
    /// # Errors
    ///
    /// A workspace smaller than [`fused_moe_workspace_bytes_with`] for `spec`
    /// ([`OpsError::OutOfBounds`]), a configuration the generator rejects, and what
    /// [`Ops::run_fused_moe`] reports; all before any launch.
    pub fn run_fused_moe_with(&self, p: &MoeProblem, spec: &MoeSpec) -> Result<(), OpsError> {
        let layout = layout_for(p.tokens, p.topk, p.local_experts, p.hidden, p.inter, p.dtype, spec)?;
        if layout.bytes > p.workspace_len {
            return Err(OpsError::OutOfBounds {
                operand: "workspace",
                needed: layout.bytes,
                len: p.workspace_len,
            });
        }
        let forced = MoeProblem { layout, ..*p };
        self.launch_fused_moe(&forced, spec.tile, spec.warps)
    }
}

impl Ops {
    /// Generate, compile (cached) and load the two grouped GEMMs of `spec` for `dtype`
    /// operands without running them (the tuner compiles its candidates in parallel
    /// through this).
    pub fn load_fused_moe_spec(&self, dtype: DType, spec: &MoeSpec) -> Result<(), OpsError> {
        use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmConfig};
        let el = super::fused::element(dtype)?;
        for (a, e) in [
            (GroupedA::Gathered, GroupedEpilogue::SwiGlu),
            (GroupedA::Rows, GroupedEpilogue::Scatter),
        ] {
            self.grouped_kernel(&GroupedGemmConfig::new(el, a, e).with_tile(spec.tile, spec.warps))?;
        }
        Ok(())
    }
}
