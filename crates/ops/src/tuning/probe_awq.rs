//! The AWQ probe: a W4A16 GEMM of one shape and group size on AutoAWQ `version="gemm"`
//! tensors (random activations, 4-bit weights and zeros, scales; the weight rotated over
//! copies; no bias), its candidates the configurations [`Ops::run_awq_gemm`] can be
//! forced to ([`awq_candidates`]), checked against float64 on a sample of the output; and
//! the [`Ops`] path that tunes it on a miss.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::fingerprint::awq_kernel;
use super::probe::{driver, probe_fields, random, Half, Sampled};
use super::space::awq_candidates;
use super::tuner::{copies_for, Compiler, Tunable};
use super::{awq_key, AwqSpec, ConfigSpec, ProblemKey, TunedKernel};
use crate::awq::{pack_awq_matrix, validate_awq_gemm, AwqGemmProblem, AwqShape, AwqTensors};
use crate::tensor::{DType, MatrixMut, MatrixRef};
use crate::Ops;

/// One weight's device tensors.
struct Weight<T> {
    q: CudaSlice<i32>,
    s: CudaSlice<T>,
    z: CudaSlice<i32>,
}

/// An AWQ GEMM problem (`x [M, K]` of `T`, f16 or bf16, times the dequantized `[K, N]`
/// weight of group size `group`) with its candidates.
pub struct AwqProbe<T: Half> {
    key: ProblemKey,
    shape: (usize, usize, usize),
    awq: AwqShape,
    stream: Arc<CudaStream>,
    x: CudaSlice<T>,
    ws: Vec<Weight<T>>,
    out: RefCell<CudaSlice<T>>,
    /// The float64 product with the dequantized weight at the sampled outputs.
    want: Sampled,
    candidates: Vec<ConfigSpec>,
}

impl<T: Half> AwqProbe<T> {
    /// Random inputs of `(M, N, K)` with group size `group` on `ops`' GPU (the weight
    /// tensors copied until the copies exceed [`super::tuner::ROTATE_BYTES`]) and the
    /// candidates of [`awq_candidates`].
    pub fn new(ops: &Ops, (m, n, k): (usize, usize, usize), group: usize) -> Result<Self, String> {
        let awq = AwqShape::new(k, n, group).map_err(|e| e.to_string())?;
        let stream = ops.stream().clone();
        let g = awq.groups();
        let x: Vec<T> = random(m * k, 1, T::from_f32);
        let q: Vec<u8> = random(k * n, 2, |u| ((u + 1.0) * 8.0).min(15.0) as u8);
        let z: Vec<u8> = random(g * n, 3, |u| ((u + 1.0) * 8.0).min(15.0) as u8);
        // Scales in [1e-3, 2e-2]: outputs of order one for K in the thousands.
        let s: Vec<T> = random(g * n, 4, |u| T::from_f32(1e-3 + 0.95e-2 * (u + 1.0)));
        let e = |x: crate::OpsError| x.to_string();
        let (qp, zp) = (
            pack_awq_matrix(&q, k, n).map_err(e)?,
            pack_awq_matrix(&z, g, n).map_err(e)?,
        );
        let bytes = k * n / 2 + g * n * 2 + g * n / 2;
        let ws = (0..copies_for(bytes))
            .map(|_| -> Result<Weight<T>, String> {
                Ok(Weight {
                    q: stream.clone_htod(&qp).map_err(driver)?,
                    s: stream.clone_htod(&s).map_err(driver)?,
                    z: stream.clone_htod(&zp).map_err(driver)?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let arch = ops.gpu().arch().ok_or("no rcute arch for this GPU")?;
        let want = Sampled::new(m, n, |i, j| {
            (0..k)
                .map(|t| {
                    let gi = (t / group) * n + j;
                    let w = (f64::from(q[t * n + j]) - f64::from(z[gi])) * s[gi].to_f64();
                    x[i * k + t].to_f64() * w
                })
                .sum()
        });
        Ok(AwqProbe {
            key: awq_key(T::DTYPE.name(), group, arch.as_str(), m, n, k),
            shape: (m, n, k),
            awq,
            x: stream.clone_htod(&x).map_err(driver)?,
            ws,
            out: RefCell::new(stream.alloc_zeros(m * n).map_err(driver)?),
            want,
            candidates: awq_candidates(m, n, k, ops.gpu().sm_count()),
            stream,
        })
    }

    /// `f` of the validated problem on weight copy `turn`.
    fn with_problem<R>(
        &self,
        turn: usize,
        f: impl FnOnce(&AwqGemmProblem<'_>) -> Result<R, String>,
    ) -> Result<R, String> {
        let (m, n, k) = self.shape;
        let w = &self.ws[turn % self.ws.len()];
        let g = self.awq.groups();
        let t = AwqTensors {
            qweight: MatrixRef::new(&w.q, k, n / 8),
            scales: MatrixRef::new(&w.s, g, n),
            qzeros: MatrixRef::new(&w.z, g, n / 8),
            group: self.awq.group,
        };
        let mut out = self.out.borrow_mut();
        let p = validate_awq_gemm(
            &MatrixRef::new(&self.x, m, k),
            &t,
            None,
            &MatrixMut::new(&mut out, m, n),
        )
        .map_err(|e| e.to_string())?;
        f(&p)
    }
}

impl<T: Half> Tunable for AwqProbe<T> {
    probe_fields!();

    fn compiler(&self) -> Compiler {
        Box::new(|ops: &Ops, spec: &ConfigSpec| match awq_kernel(spec, T::ELEMENT)? {
            TunedKernel::Awq(cfg) => ops.load_awq_gemm(&cfg).map(|_| ()).map_err(|e| e.to_string()),
            other => Err(format!("{other:?} is not an AWQ kernel")),
        })
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        let forced = spec.op_spec::<AwqSpec>()?.config(T::ELEMENT);
        self.with_problem(turn, |p| ops.run_awq_gemm(p, Some(forced)).map_err(|e| e.to_string()))
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.want
            .check_output(&self.stream, &self.out, self.shape.1, "float64", || {
                self.run(ops, spec, 0)
            })
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, n, k) = self.shape;
        let g = self.awq.groups();
        (self.ws.len(), k * n / 2 + g * n * 2 + g * n / 2)
    }
}

impl Ops {
    /// The fused configuration the tuning tables hold for `p` under `RCUTE_TUNING`
    /// ([`awq_key`]; on a miss with `on-miss`, tuned here on buffers of the problem's shape,
    /// never the caller's), or `None` for the rules.
    pub(crate) fn tuned_awq(&self, p: &AwqGemmProblem<'_>) -> Option<AwqSpec> {
        let w = p.weight();
        let (dtype, shape) = (w.dtype(), w.shape());
        let (m, n, k) = (p.m(), shape.n, shape.k);
        let spec = self.tuned_spec(
            |arch| {
                let half = matches!(dtype, DType::F16 | DType::BF16);
                half.then(|| awq_key(dtype.name(), shape.group, arch, m, n, k))
            },
            || {
                Ok(match dtype {
                    DType::BF16 => Box::new(AwqProbe::<half::bf16>::new(self, (m, n, k), shape.group)?),
                    _ => Box::new(AwqProbe::<half::f16>::new(self, (m, n, k), shape.group)?),
                })
            },
        )?;
        match spec {
            ConfigSpec::Awq(s) => Some(s),
            _ => None,
        }
    }
}
