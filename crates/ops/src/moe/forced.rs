//! The fused MoE layer with a forced configuration: on the SM80 family the grouped GEMMs'
//! tile, stages and GEMM2's K splits of a [`MoeSpec`] instead of the rules' ([`super::moe_tile`],
//! [`super::moe_splits`]; [`Ops::run_fused_moe_with`]), or the SM90 family with GEMM2's
//! tile of a [`MoeSm90Spec`] ([`Ops::run_fused_moe_sm90_with`]); `rcute tune moe` times
//! its candidates, and [`Ops::fused_moe`] runs a tuning table's entry, through
//! [`Ops::run_fused_moe_spec`].

use super::kernels::{fused_moe_spec_kernels, not_moe};
use super::problem::{spec_layout, MoeOptions, MoeProblem};
use crate::error::OpsError;
use crate::tensor::DType;
use crate::tuning::{ConfigSpec, MoeSm90Spec, MoeSpec, TunedKernel};
use crate::Ops;

/// The workspace [`Ops::run_fused_moe_with`] needs for `spec` (at most
/// [`super::fused_moe_workspace_bytes`] for a configuration of [`super::moe_space`]).
///
/// ```
/// use rcute_ops::moe::{fused_moe_workspace_bytes, fused_moe_workspace_bytes_with, moe_space};
/// use rcute_ops::tuning::MoeSpec;
/// use rcute_ops::DType;
/// let spec = MoeSpec::new([64, 128, 32], [2, 2], 8);
/// let forced = fused_moe_workspace_bytes_with(4, 2, 8, 4096, 14336, DType::BF16, &spec).unwrap();
/// assert!(forced > 0);
/// let any = fused_moe_workspace_bytes(4, 2, 8, 4096, 14336, DType::BF16).unwrap();
/// for s in moe_space(4, 2, 8, 4096, 14336) {
///     assert!(fused_moe_workspace_bytes_with(4, 2, 8, 4096, 14336, DType::BF16, &s).unwrap() <= any);
/// }
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
    Ok(spec_layout(tokens, topk, local_experts, hidden, inter, dtype, spec)?.bytes)
}

impl Ops {
    /// Launch a validated layer with the grouped GEMMs' tile and stages and GEMM2's K splits of
    /// `spec` (tests, benchmarks and the tuner cover every configuration this way).
    ///
    /// # Errors
    ///
    /// A workspace smaller than [`fused_moe_workspace_bytes_with`] for `spec`
    /// ([`OpsError::OutOfBounds`]), a configuration the generator rejects, and what
    /// [`Ops::run_fused_moe`] reports; all before any launch.
    pub fn run_fused_moe_with(&self, p: &MoeProblem, spec: &MoeSpec) -> Result<(), OpsError> {
        let layout = spec_layout(p.tokens, p.topk, p.local_experts, p.hidden, p.inter, p.dtype, spec)?;
        if layout.bytes > p.workspace_len {
            return Err(OpsError::OutOfBounds {
                operand: "workspace",
                needed: layout.bytes,
                len: p.workspace_len,
            });
        }
        let forced = MoeProblem { layout, ..*p };
        self.launch_fused_moe(&forced, spec)
    }

    /// Launch a validated layer on the SM90 family with GEMM2 on `spec`'s tile, over the
    /// SM90 workspace layout ([`super::fused_moe_workspace_bytes`] covers it), whatever
    /// the routed row count; GEMM1 gathering the token rows itself where `p` asks
    /// ([`super::MoeOptions::gather`]) or, for [`super::MoePath::Auto`], where
    /// [`super::sm90_gather`] says and `spec`'s GEMM1 runs on 1x1; its cooperative GEMMs
    /// walking their tiles dynamically where `p` asks ([`super::MoeOptions::dynamic`]) or,
    /// for [`super::MoePath::Auto`], where [`super::sm90_dynamic`] says.
    ///
    /// # Errors
    ///
    /// A GPU other than sm_90 ([`OpsError::Arch`]), a workspace smaller than the SM90
    /// layout ([`OpsError::OutOfBounds`]), and what [`Ops::run_fused_moe`] reports; all
    /// before any launch.
    pub fn run_fused_moe_sm90_with(&self, p: &MoeProblem, spec: MoeSm90Spec) -> Result<(), OpsError> {
        // Auto's gathering GEMM1 rule holds inside the configuration's schedule (a table
        // entry names the schedule and tiles, not where the rows come from).
        let auto_gathers = super::kernels::gemm1_gathers(
            super::fused::element(p.dtype)?,
            p.options.path,
            spec.gemm1_cluster(),
            p.tokens * p.topk,
            p.local_experts,
        );
        // And Auto's dynamic walk (it applies to the cooperative GEMMs the entry names).
        let w13 = super::kernels::w13_expert_bytes(super::fused::element(p.dtype)?, p.hidden, p.inter);
        let auto_dynamic = super::sm90_dynamic(p.options.path, p.tokens * p.topk, p.local_experts, w13);
        let options = MoeOptions {
            path: spec.path(),
            gather: p.options.gather.or(Some(auto_gathers)),
            dynamic: p.options.dynamic.or(Some(auto_dynamic)),
            pad_skip: p.options.pad_skip.or(Some(spec.pad_skip())),
            ..p.options
        };
        let mut forced = MoeProblem { options, ..*p };
        if spec.row_tile() == 64 && p.options.row_tile.is_none() {
            // The 64-row form aligns to 64-row blocks: its layout of the same workspace.
            forced = forced.on_rows64()?;
        }
        // A forced SM90 path either runs or is an error (never `Ok(false)`).
        self.moe_sm90_runs(&forced)?;
        self.launch_fused_moe_sm90(&forced)
    }

    /// Launch a validated layer with a MoE configuration of either family
    /// ([`ConfigSpec::Moe`]: [`Ops::run_fused_moe_with`]; [`ConfigSpec::MoeSm90`]:
    /// [`Ops::run_fused_moe_sm90_with`]).
    ///
    /// # Errors
    ///
    /// Those of the family's method; a configuration of another op ([`OpsError::Shape`]).
    pub fn run_fused_moe_spec(&self, p: &MoeProblem, spec: &ConfigSpec) -> Result<(), OpsError> {
        match spec {
            ConfigSpec::Moe(s) => self.run_fused_moe_with(p, s),
            ConfigSpec::MoeSm90(s) => self.run_fused_moe_sm90_with(p, *s),
            other => Err(not_moe(other)),
        }
    }
}

impl Ops {
    /// Generate, compile (cached) and load the kernels `spec` (either family) decides for
    /// `dtype` operands ([`crate::tuning::tuned_kernels`]) without running them (the tuner
    /// compiles its candidates in parallel through this).
    pub fn load_fused_moe_spec(&self, dtype: DType, spec: &ConfigSpec) -> Result<(), OpsError> {
        for kernel in fused_moe_spec_kernels(super::fused::element(dtype)?, spec)? {
            match kernel {
                TunedKernel::Grouped(cfg) => self.grouped_kernel(&cfg).map(|_| ())?,
                TunedKernel::Sm90(cfg) => self.grouped_sm90_kernel(&cfg).map(|_| ())?,
                TunedKernel::MoeGather(el) => {
                    let g = rcute_kernel::grouped_gemm::gather::generate(el).map_err(crate::error::boxed)?;
                    self.moe_unit(&g.name, &g.source).map(|_| ())?
                }
                other => return Err(OpsError::Shape(format!("{other:?} is not a MoE kernel"))),
            }
        }
        Ok(())
    }
}
