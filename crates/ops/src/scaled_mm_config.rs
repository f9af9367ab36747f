//! What a scaled-mm problem's kernel is built from: the problem's kind
//! ([`ScaledMmKind`]: types, scales, bias) and the kernel configuration a selection or a
//! tuning spec names for it. Pure functions of their inputs (the device enters as its
//! opt-in shared memory), shared by [`crate::Ops`]' loaders and the tuning tables'
//! fingerprints ([`crate::tuning::kernel_fingerprint`]).

use crate::error::{boxed, OpsError};
use crate::select::ScaledMmSelection;
use crate::tensor::DType;
use crate::tuning::{ConfigSpec, ProblemKey, TunedKernel};
use rcute_kernel::gemm_sm80::{
    GemmElement as Element, GemmSm80Config, ScaleKind, Sm80Target as ScaledMmTarget, TICKET_SMEM, TURING_SMEM_BUDGET,
};

/// What of a scaled-mm problem decides its kernel besides the configuration: operand and
/// output types, how the scales apply, whether there is a bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaledMmKind {
    /// Operand type (`S8` or `E4M3`).
    pub ab: DType,
    /// Output type (`F16` or `BF16`).
    pub out: DType,
    /// How A's scale applies.
    pub a_scale: ScaleKind,
    /// How B's scale applies.
    pub b_scale: ScaleKind,
    /// Whether a bias (of the output type) is added.
    pub bias: bool,
}

impl ScaledMmKind {
    /// The kind a table key of [`crate::scaled_mm::scaled_mm_key`] names (types `ab:out`, fusion
    /// `A-B[+bias]`); a key's `token` (`channel`) also stands for a one-row (one-column)
    /// problem's tensor scale, and reads back as the per-row (per-column) kind.
    ///
    /// ```
    /// use rcute_ops::tuning::ProblemKey;
    /// use rcute_ops::{DType, ScaledMmKind};
    /// let key = ProblemKey::new("scaled_mm", "e4m3:bf16", "token-channel+bias", "sm_90a", 16, 4096, 4096);
    /// let kind = ScaledMmKind::of_key(&key).unwrap();
    /// assert_eq!((kind.ab, kind.out, kind.bias), (DType::E4M3, DType::BF16, true));
    /// assert!(ScaledMmKind::of_key(&ProblemKey { fusion: "row-col".into(), ..key }).is_err());
    /// ```
    pub fn of_key(key: &ProblemKey) -> Result<ScaledMmKind, String> {
        let bad = || format!("{}/{} is not a scaled-mm kind", key.dtypes, key.fusion);
        let (ab, out) = key.dtypes.split_once(':').ok_or_else(bad)?;
        let ab = match ab {
            "s8" => DType::S8,
            "e4m3" => DType::E4M3,
            _ => return Err(bad()),
        };
        let out = match out {
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            _ => return Err(bad()),
        };
        let (scales, bias) = match key.fusion.strip_suffix("+bias") {
            Some(s) => (s, true),
            None => (key.fusion.as_str(), false),
        };
        let scale = |s: &str, vector: &str, vector_kind: ScaleKind| match s {
            "tensor" => Ok(ScaleKind::Scalar),
            s if s == vector => Ok(vector_kind),
            _ => Err(bad()),
        };
        let (a, b) = scales.split_once('-').ok_or_else(bad)?;
        Ok(ScaledMmKind {
            ab,
            out,
            a_scale: scale(a, "token", ScaleKind::PerRow)?,
            b_scale: scale(b, "channel", ScaleKind::PerCol)?,
            bias,
        })
    }

    /// The output type as the generator's element.
    pub(crate) fn out_element(&self) -> Element {
        match self.out {
            DType::F16 => Element::F16,
            _ => Element::BF16,
        }
    }
}

/// `base` (tile, schedule, cluster, stages...) as the SM90 scaled-mm kernel of `ab` operands
/// and `out` output with the scaled-mm fusion of the given scales and bias (of the output
/// type). Used by the op and by the tuner's candidate space, so both build the same kernels.
pub fn sm90_scaled_config(
    mut base: rcute_kernel::gemm_sm90::GemmSm90Config,
    ab: Element,
    out: Element,
    a_scale: ScaleKind,
    b_scale: ScaleKind,
    bias: bool,
) -> Result<rcute_kernel::gemm_sm90::GemmSm90Config, OpsError> {
    base.ab = ab;
    base.cd = out;
    base.fusion = rcute_kernel::gemm_sm90::Fusion::scaled_mm(a_scale, b_scale, bias.then_some(out)).map_err(boxed)?;
    Ok(base)
}

/// The shared memory an SM80-class scaled-mm CTA of `target` may use on a device of
/// `smem_optin` bytes of opt-in shared memory per block (less the split-K ticket).
pub(crate) fn scaled_mm_smem_budget(target: ScaledMmTarget, smem_optin: u32) -> usize {
    let optin = (smem_optin as usize).saturating_sub(TICKET_SMEM);
    match target {
        ScaledMmTarget::Ampere => optin,
        ScaledMmTarget::Turing => TURING_SMEM_BUDGET.min(optin),
    }
}

/// The SM80-class kernel of a problem of `kind` under the selection `sel`, with
/// `copy_bytes` global loads and `smem_budget` bytes of shared memory (which set an
/// automatic stage count).
pub(crate) fn scaled_mm_sm80_config(
    kind: &ScaledMmKind,
    sel: &ScaledMmSelection,
    copy_bytes: usize,
    smem_budget: usize,
) -> Result<GemmSm80Config, OpsError> {
    let out = kind.out_element();
    if sel.target == ScaledMmTarget::Turing && out != Element::F16 {
        return Err(OpsError::DType(format!(
            "{} output on sm_75 (the Turing kernel writes f16 only)",
            kind.out.name()
        )));
    }
    let mut cfg =
        GemmSm80Config::scaled_mm(out, kind.a_scale, kind.b_scale, kind.bias, sel.tile, sel.warps).map_err(boxed)?;
    if sel.target == ScaledMmTarget::Turing {
        cfg = cfg.turing();
    }
    cfg.smem_budget = smem_budget;
    cfg.stages = sel.stages.or(cfg.stages);
    cfg.raster_swizzle = sel.raster_swizzle;
    cfg.copy_bytes = copy_bytes;
    Ok(cfg)
}

/// The kernel a scaled-mm problem of `kind` runs with the tuning spec `spec` on the fast
/// path (16-byte copies), on a device of `smem_optin` bytes of opt-in shared memory per
/// block (an SM80-class spec with automatic stages fills it): the SM80-class kernel for
/// an SM80-class spec, the Hopper kernel for an `sm90:` one (types and fusion from
/// `kind`). What [`crate::Ops::load_scaled_mm_spec`] builds and a tuning entry's fingerprint
/// covers.
pub(crate) fn scaled_mm_spec_kernel(
    kind: &ScaledMmKind,
    spec: &ConfigSpec,
    smem_optin: u32,
) -> Result<TunedKernel, OpsError> {
    match spec {
        ConfigSpec::Sm80(s) => {
            let sel = s.scaled_mm_selection();
            let budget = scaled_mm_smem_budget(sel.target, smem_optin);
            Ok(TunedKernel::Sm80(scaled_mm_sm80_config(kind, &sel, 16, budget)?))
        }
        ConfigSpec::Sm90(s) => {
            let ab = if kind.ab == DType::E4M3 {
                Element::E4M3
            } else {
                Element::S8
            };
            let base = s.apply(rcute_kernel::gemm_sm90::GemmSm90Config::bf16(s.tile, s.schedule));
            let cfg = sm90_scaled_config(base, ab, kind.out_element(), kind.a_scale, kind.b_scale, kind.bias)?;
            Ok(TunedKernel::Sm90(cfg))
        }
        other => Err(not_scaled_mm(other)),
    }
}

/// The error of a tuning spec of another op's kernel family given to a scaled-mm entry point.
pub(crate) fn not_scaled_mm(spec: &ConfigSpec) -> OpsError {
    OpsError::Shape(format!("{spec} is not a scaled-mm configuration"))
}
