//! The `gemm` probe: a TN GEMM of one shape (random data, the weight B rotated over
//! copies), checked against float64 on a sample of the output, and the [`Ops`] path that
//! tunes it on a miss.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::fingerprint::gemm_kernel;
use super::probe::{copies, driver, probe_fields, random, Half, Sampled};
use super::space::gemm_candidates;
use super::tuner::{copies_for, Compiler, Tunable};
use super::{gemm_key, ConfigSpec, ProblemKey, TunedKernel};
use crate::gemm::GemmProblem;
use crate::tensor::{DType, MatrixMut, MatrixRef};
use crate::Ops;

/// A TN GEMM problem (row-major A `[M, K]`, column-major B `[K, N]`, row-major D, no C,
/// `alpha = 1`, `beta = 0`) of one shape in `T` (bf16 or f16), with its candidates.
pub struct GemmProbe<T: Half> {
    key: ProblemKey,
    shape: (usize, usize, usize),
    stream: Arc<CudaStream>,
    a: CudaSlice<T>,
    bs: Vec<CudaSlice<T>>,
    d: RefCell<CudaSlice<T>>,
    /// The float64 product at the sampled outputs.
    want: Sampled,
    candidates: Vec<ConfigSpec>,
}

impl<T: Half> GemmProbe<T> {
    /// Random inputs of `(M, N, K)` on `ops`' GPU (B copied until the copies exceed
    /// [`super::tuner::ROTATE_BYTES`]) and the candidates of
    /// [`gemm_candidates`] (the rules' choice first).
    pub fn new(ops: &Ops, (m, n, k): (usize, usize, usize)) -> Result<Self, String> {
        let stream = ops.stream().clone();
        let host_a: Vec<T> = random(m * k, 1, T::from_f32);
        let host_b: Vec<T> = random(n * k, 2, T::from_f32);
        let gpu = ops.gpu();
        let arch = gpu.arch().ok_or("no rcute arch for this GPU")?;
        let mut probe = GemmProbe {
            key: ProblemKey::new("gemm", "", "", "", 0, 0, 0),
            shape: (m, n, k),
            a: stream.clone_htod(&host_a).map_err(driver)?,
            bs: copies(&stream, &host_b, copies_for(n * k * 2))?,
            d: RefCell::new(stream.alloc_zeros(m * n).map_err(driver)?),
            stream,
            want: Sampled::new(m, n, |i, j| {
                (0..k)
                    .map(|t| host_a[i * k + t].to_f64() * host_b[j * k + t].to_f64())
                    .sum()
            }),
            candidates: gemm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count()),
        };
        // The key the op itself looks up for this problem.
        probe.key = probe.with_problem(0, |p| {
            gemm_key(p, arch.as_str()).ok_or("not a tuned GEMM layout".into())
        })?;
        Ok(probe)
    }

    /// A, on the GPU.
    pub fn a(&self) -> &CudaSlice<T> {
        &self.a
    }

    /// B copy `turn` (of [`Tunable::rotated`]'s count, modulo), on the GPU.
    pub fn b(&self, turn: usize) -> &CudaSlice<T> {
        &self.bs[turn % self.bs.len()]
    }

    /// `f` of the validated problem on B copy `turn`.
    fn with_problem<R>(&self, turn: usize, f: impl FnOnce(&GemmProblem<'_>) -> Result<R, String>) -> Result<R, String> {
        let (m, n, k) = self.shape;
        let mut d = self.d.borrow_mut();
        let p = crate::validate(
            &MatrixRef::new(&self.a, m, k),
            &MatrixRef::new(self.b(turn), k, n).col_major(),
            None,
            &MatrixMut::new(&mut d, m, n),
            1.0,
            0.0,
        )
        .map_err(|x| x.to_string())?;
        f(&p)
    }
}

impl<T: Half> Tunable for GemmProbe<T> {
    probe_fields!();

    fn compiler(&self) -> Compiler {
        Box::new(move |ops: &Ops, spec: &ConfigSpec| {
            match gemm_kernel(spec, T::ELEMENT)? {
                TunedKernel::Sm80(cfg) => ops.load_gemm(&cfg).map(|_| ()),
                TunedKernel::Sm90(cfg) => ops.load_gemm_sm90(&cfg).map(|_| ()),
                other => return Err(format!("{other:?} is not a gemm kernel")),
            }
            .map_err(|x| x.to_string())
        })
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        let choice = spec
            .gemm_choice()
            .ok_or_else(|| format!("{spec} is not a gemm configuration"))?;
        self.with_problem(turn, |p| ops.run_gemm_with(p, Some(&choice)).map_err(|x| x.to_string()))
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.want
            .check_output(&self.stream, &self.d, self.shape.1, "float64", || {
                self.run(ops, spec, 0)
            })
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, n, k) = self.shape;
        (self.bs.len(), n * k * 2)
    }
}

impl Ops {
    /// The tuning tables' choice for a GEMM problem under `RCUTE_TUNING` (on a miss with
    /// `on-miss`: tuned here, on buffers of the problem's shape, never the caller's).
    pub(crate) fn tuned_gemm(&self, p: &GemmProblem<'_>) -> Option<ConfigSpec> {
        let shape = (p.m(), p.n(), p.k());
        self.tuned_spec(
            |arch| gemm_key(p, arch),
            || {
                Ok(match p.a().dtype {
                    DType::F16 => Box::new(GemmProbe::<half::f16>::new(self, shape)?),
                    _ => Box::new(GemmProbe::<half::bf16>::new(self, shape)?),
                })
            },
        )
    }
}
