//! The MoE probe: the fused MoE layer of one shape (tokens `T`, hidden size `H`,
//! intermediate size `I`, `L` experts all here, top-`k` routing from random logits,
//! renormalised; the weights rotated over copies where one copy is under the rotation
//! target), its candidates the configurations of either grouped GEMM family that
//! [`Ops::run_fused_moe_spec`] takes ([`moe_candidates`]), each checked against the output
//! of the rules' choice (which the GPU suite checks against the float64
//! [`crate::moe::fused_moe_reference`]); and the [`Ops`] path that consults the tables,
//! and tunes on a miss, in [`Ops::fused_moe`] ([`moe_entry_runs`] says which entries a
//! layer can run).

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::probe::{copies, driver, probe_fields, random, Half, Sampled};
use super::space::moe_candidates;
use super::tuner::{copies_for, Compiler, Tunable};
use super::{moe_key, ConfigSpec, ProblemKey};
use crate::moe::{
    fused_moe_workspace_bytes, validate_fused_moe, MoeOptions, MoePath, MoeProblem, MoeRouting, MoeWorkspace,
};
use crate::tensor::{DType, MatrixMut, MatrixRef};
use crate::Ops;

/// The table key of a validated MoE layer ([`moe_key`] with its local experts).
pub fn moe_problem_key(p: &MoeProblem, arch: &str) -> ProblemKey {
    let dtype = p.dtype.name(); // bf16 or f16 (validated)
    moe_key(dtype, p.local_experts, p.topk, arch, p.tokens, p.hidden, p.inter)
}

/// A fused MoE layer of `T` (bf16 or f16) with its buffers and candidates.
pub struct MoeProbe<T: Half> {
    key: ProblemKey,
    /// `(T, H, I)`.
    shape: (usize, usize, usize),
    experts: usize,
    topk: usize,
    stream: Arc<CudaStream>,
    x: CudaSlice<T>,
    logits: CudaSlice<f32>,
    w13: Vec<CudaSlice<T>>,
    w2: Vec<CudaSlice<T>>,
    ws: RefCell<CudaSlice<u8>>,
    y: RefCell<CudaSlice<T>>,
    /// The rules' output on copy 0 at the sampled outputs.
    want: Sampled,
    candidates: Vec<ConfigSpec>,
}

impl<T: Half> MoeProbe<T> {
    /// Random inputs of `(T, H, I)` with `experts` experts and top-`topk` routing on `ops`'
    /// GPU, the candidates, and the output of the rules' choice.
    pub fn new(ops: &Ops, (t, h, i): (usize, usize, usize), (experts, topk): (usize, usize)) -> Result<Self, String> {
        let stream = ops.stream().clone();
        let (s13, s2) = (1.0 / (h as f32).sqrt(), 1.0 / (i as f32).sqrt());
        let w13 = random(experts * 2 * i * h, 11, |u| T::from_f32(u * s13));
        let w2 = random(experts * h * i, 12, |u| T::from_f32(u * s2));
        let n = copies_for((w13.len() + w2.len()) * 2);
        let ws = fused_moe_workspace_bytes(t, topk, experts, h, i, T::DTYPE).map_err(|e| e.to_string())?;
        let arch = ops.gpu().arch().ok_or("no rcute arch for this GPU")?;
        let gpu_cc = ops.gpu().compute_capability();
        let mut probe = MoeProbe {
            key: ProblemKey::new("moe", "", "", "", 0, 0, 0),
            shape: (t, h, i),
            experts,
            topk,
            x: stream.clone_htod(&random(t * h, 13, T::from_f32)).map_err(driver)?,
            logits: stream
                .clone_htod(&random(t * experts, 14, |u| u * 4.0))
                .map_err(driver)?,
            w13: copies(&stream, &w13, n)?,
            w2: copies(&stream, &w2, n)?,
            ws: RefCell::new(stream.alloc_zeros(ws.max(1)).map_err(driver)?),
            y: RefCell::new(stream.alloc_zeros(t * h).map_err(driver)?),
            want: Sampled::new(0, 0, |_, _| 0.0),
            candidates: moe_candidates(t, topk, experts, h, i, gpu_cc, ops.gpu().sm_count()),
            stream,
        };
        probe.key = probe.with_problem(0, |p| {
            ops.run_fused_moe_rules(p).map_err(|e| e.to_string())?;
            Ok(moe_problem_key(p, arch.as_str()))
        })?;
        let rules = probe.stream.clone_dtoh(&*probe.y.borrow()).map_err(driver)?;
        probe.want = Sampled::new(t, h, |r, c| rules[r * h + c].to_f64());
        Ok(probe)
    }

    /// `f` of the validated layer on weight copy `turn`.
    fn with_problem<R>(&self, turn: usize, f: impl FnOnce(&MoeProblem) -> Result<R, String>) -> Result<R, String> {
        let (t, h, i) = self.shape;
        let (w13, w2) = (&self.w13[turn % self.w13.len()], &self.w2[turn % self.w2.len()]);
        let mut ws = self.ws.borrow_mut();
        let mut y = self.y.borrow_mut();
        let routing = MoeRouting::Logits {
            logits: MatrixRef::new(&self.logits, t, self.experts),
            topk: self.topk,
            renormalize: true,
        };
        let p = validate_fused_moe(
            &MatrixRef::new(&self.x, t, h),
            &MatrixRef::new(w13, 2 * i, h).batched(self.experts, (2 * i * h) as i64),
            &MatrixRef::new(w2, h, i).batched(self.experts, (h * i) as i64),
            &routing,
            &MoeOptions::default(),
            &MoeWorkspace::new(&mut ws),
            &MatrixMut::new(&mut y, t, h),
        )
        .map_err(|x| x.to_string())?;
        f(&p)
    }
}

impl<T: Half> Tunable for MoeProbe<T> {
    probe_fields!();

    fn compiler(&self) -> Compiler {
        Box::new(|ops: &Ops, spec: &ConfigSpec| ops.load_fused_moe_spec(T::DTYPE, spec).map_err(|e| e.to_string()))
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        self.with_problem(turn, |p| ops.run_fused_moe_spec(p, spec).map_err(|x| x.to_string()))
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.want
            .check_output(&self.stream, &self.y, self.shape.1, "the rules' choice", || {
                self.run(ops, spec, 0)
            })
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, h, i) = self.shape;
        (self.w13.len(), self.experts * 3 * h * i * 2)
    }
}

/// Whether a layer forced to `path` on a GPU of compute capability `cc` runs the MoE
/// table entry `spec`: `Ok(true)` it does; `Ok(false)` the caller forced the other family
/// (or the spec is not a MoE configuration); `Err(warning)` an SM90 entry on a GPU other
/// than sm_90, which the layer ignores (falling back to the rules) after the one-line
/// warning.
///
/// ```
/// use rcute_ops::moe::MoePath;
/// use rcute_ops::tuning::{moe_entry_runs, ConfigSpec};
/// let sm90: ConfigSpec = "moe:sm90n".parse().unwrap();
/// assert_eq!(moe_entry_runs(&sm90, MoePath::Auto, (9, 0)), Ok(true));
/// assert_eq!(moe_entry_runs(&sm90, MoePath::Sm80, (9, 0)), Ok(false));
/// assert!(moe_entry_runs(&sm90, MoePath::Auto, (8, 0)).unwrap_err().contains("sm_90"));
/// ```
pub fn moe_entry_runs(spec: &ConfigSpec, path: MoePath, cc: (u32, u32)) -> Result<bool, String> {
    let forced90 = path.forces_sm90();
    match spec {
        ConfigSpec::Moe(_) => Ok(!forced90),
        ConfigSpec::MoeSm90(_) if path != MoePath::Auto => Ok(false),
        ConfigSpec::MoeSm90(_) if cc == (9, 0) => Ok(true),
        ConfigSpec::MoeSm90(_) => Err(format!(
            "tuning table entry {spec} ignored: the SM90 grouped GEMMs need sm_90, found compute capability {}.{}: using the rules",
            cc.0, cc.1
        )),
        _ => Ok(false),
    }
}

impl Ops {
    /// The configuration (either family) the tuning tables hold for a validated MoE layer
    /// under `RCUTE_TUNING` ([`moe_problem_key`]; on a miss with `on-miss`, tuned here on
    /// buffers of the layer's shape, never the caller's), if the layer can run it
    /// ([`moe_entry_runs`]; an SM90 entry on another GPU: a warning, once) and its
    /// workspace layout fits the caller's workspace (always, for a configuration of
    /// [`crate::moe::moe_space`] or the SM90 family).
    pub(crate) fn tuned_moe(&self, p: &MoeProblem) -> Option<ConfigSpec> {
        static WARNED: std::sync::Once = std::sync::Once::new();
        let (shape, routed) = ((p.tokens, p.hidden, p.inter), (p.local_experts, p.topk));
        let spec = self.tuned_spec(
            |arch| Some(moe_problem_key(p, arch)),
            || {
                Ok(match p.dtype {
                    DType::F16 => Box::new(MoeProbe::<half::f16>::new(self, shape, routed)?),
                    _ => Box::new(MoeProbe::<half::bf16>::new(self, shape, routed)?),
                })
            },
        )?;
        match moe_entry_runs(&spec, p.options.path, self.gpu().compute_capability()) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(warning) => {
                WARNED.call_once(|| eprintln!("rcute: {warning}"));
                return None;
            }
        }
        let need = match &spec {
            ConfigSpec::Moe(s) => crate::moe::fused_moe_workspace_bytes_with(
                p.tokens,
                p.topk,
                p.local_experts,
                p.hidden,
                p.inter,
                p.dtype,
                s,
            )
            .ok()?,
            _ => p.layout90.bytes,
        };
        (need <= p.workspace_len).then_some(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::moe_entry_runs;
    use crate::moe::MoePath;
    use crate::tuning::ConfigSpec;

    #[test]
    fn entries_run_where_their_family_can_and_the_path_allows() {
        let sm80: ConfigSpec = "moe:16x128x64,1x4,k4".parse().unwrap();
        let gemm: ConfigSpec = "sm90:128x256x64,coop".parse().unwrap();
        for cc in [(9, 0), (8, 0), (8, 9)] {
            assert_eq!(moe_entry_runs(&sm80, MoePath::Auto, cc), Ok(true));
            assert_eq!(moe_entry_runs(&sm80, MoePath::Sm80, cc), Ok(true));
            assert_eq!(moe_entry_runs(&gemm, MoePath::Auto, cc), Ok(false));
            for forced in [MoePath::Sm90, MoePath::Sm90Narrow] {
                assert_eq!(moe_entry_runs(&sm80, forced, cc), Ok(false), "{forced:?} wins");
            }
        }
        for text in ["moe:sm90", "moe:sm90n"] {
            let sm90: ConfigSpec = text.parse().unwrap();
            assert_eq!(moe_entry_runs(&sm90, MoePath::Auto, (9, 0)), Ok(true));
            for path in [MoePath::Sm80, MoePath::Sm90, MoePath::Sm90Narrow] {
                assert_eq!(moe_entry_runs(&sm90, path, (9, 0)), Ok(false), "{text} {path:?}");
            }
            for cc in [(8, 0), (8, 9), (10, 0)] {
                let warning = moe_entry_runs(&sm90, MoePath::Auto, cc).unwrap_err();
                assert!(!warning.contains('\n'), "one line: {warning}");
                assert!(
                    warning.contains(text) && warning.contains("using the rules"),
                    "{warning}"
                );
            }
        }
    }
}
