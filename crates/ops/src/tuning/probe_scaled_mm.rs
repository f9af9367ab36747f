//! On-miss tuning of INT8 `scaled_mm`: a [`Tunable`] of the problem's kind and shape
//! (random s8 operands, the weight B rotated over copies, the problem's scale kinds and
//! bias), checked against the exact integer result on a sample of the output, and the
//! [`Ops`] path that runs it on a miss.

use std::cell::RefCell;

use cudarc::driver::{CudaSlice, CudaStream};
use rcute_kernel::gemm_sm80::ScaleKind;
use std::sync::Arc;

use super::probe_gemm::{on_miss_entry, sample, uniform, Half};
use super::space::scaled_mm_candidates;
use super::tuner::{copies_for, Compiler, Tunable};
use super::{ConfigSpec, ProblemKey};
use crate::scaled_mm::{scaled_mm_key, ScaledMmKind, ScaledMmProblem};
use crate::tensor::{DType, MatrixMut, MatrixRef, VectorRef};
use crate::{validate_scaled_mm, Ops, Scale};

/// An INT8 scaled-mm problem of one kind and shape, output type `T`.
struct ScaledMmProbe<T: Half> {
    key: ProblemKey,
    kind: ScaledMmKind,
    shape: (usize, usize, usize),
    stream: Arc<CudaStream>,
    a: CudaSlice<i8>,
    bs: Vec<CudaSlice<i8>>,
    sa: CudaSlice<f32>,
    sb: CudaSlice<f32>,
    bias: CudaSlice<T>,
    out: RefCell<CudaSlice<T>>,
    host: Host<T>,
    candidates: Vec<ConfigSpec>,
}

/// Host copies of the inputs, for the check.
struct Host<T> {
    a: Vec<i8>,
    b: Vec<i8>,
    sa: Vec<f32>,
    sb: Vec<f32>,
    bias: Vec<T>,
}

fn int8(len: usize, seed: u64) -> Vec<i8> {
    uniform(len, seed).map(|x| (x * 127.0) as i8).collect()
}

impl<T: Half> ScaledMmProbe<T> {
    fn new(ops: &Ops, key: ProblemKey, kind: ScaledMmKind, (m, n, k): (usize, usize, usize)) -> Result<Self, String> {
        let stream = ops.stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let (ha, hb) = (int8(m * k, 3), int8(n * k, 4));
        let rows = if kind.a_scale == ScaleKind::PerRow { m } else { 1 };
        let cols = if kind.b_scale == ScaleKind::PerCol { n } else { 1 };
        let hsa: Vec<f32> = uniform(rows, 5).map(|x| 1e-3 * (1.5 + x)).collect();
        let hsb: Vec<f32> = uniform(cols, 6).map(|x| 1e-3 * (1.5 + x)).collect();
        let hbias: Vec<T> = uniform(n, 7).map(T::from_f32).collect();
        let bs = (0..copies_for(n * k))
            .map(|_| stream.clone_htod(&hb))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        let gpu = ops.gpu();
        Ok(ScaledMmProbe {
            key,
            kind,
            shape: (m, n, k),
            a: stream.clone_htod(&ha).map_err(e)?,
            bs,
            sa: stream.clone_htod(&hsa).map_err(e)?,
            sb: stream.clone_htod(&hsb).map_err(e)?,
            bias: stream.clone_htod(&hbias).map_err(e)?,
            out: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            stream,
            host: Host {
                a: ha,
                b: hb,
                sa: hsa,
                sb: hsb,
                bias: hbias,
            },
            candidates: scaled_mm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count()),
        })
    }

    /// `f` of the validated problem on B copy `turn`.
    fn with_problem<R>(
        &self,
        turn: usize,
        f: impl FnOnce(&ScaledMmProblem<'_>) -> Result<R, String>,
    ) -> Result<R, String> {
        let (m, n, k) = self.shape;
        let b = &self.bs[turn % self.bs.len()];
        let mut out = self.out.borrow_mut();
        let (sa, sb) = (
            VectorRef::new(&self.sa, self.host.sa.len()),
            VectorRef::new(&self.sb, self.host.sb.len()),
        );
        let sa = if self.kind.a_scale == ScaleKind::PerRow {
            Scale::Vector(sa)
        } else {
            Scale::Scalar(sa)
        };
        let sb = if self.kind.b_scale == ScaleKind::PerCol {
            Scale::Vector(sb)
        } else {
            Scale::Scalar(sb)
        };
        let bias = VectorRef::new(&self.bias, n);
        let p = validate_scaled_mm(
            &MatrixRef::new(&self.a, m, k),
            &MatrixRef::new(b, k, n).col_major(),
            sa,
            sb,
            self.kind.bias.then_some(&bias),
            &MatrixMut::new(&mut out, m, n),
        )
        .map_err(|x| x.to_string())?;
        f(&p)
    }
}

impl<T: Half> Tunable for ScaledMmProbe<T> {
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }

    fn key(&self) -> ProblemKey {
        self.key.clone()
    }

    fn candidates(&self) -> &[ConfigSpec] {
        &self.candidates
    }

    fn compiler(&self) -> Compiler {
        let kind = self.kind;
        Box::new(move |ops: &Ops, spec: &ConfigSpec| ops.load_scaled_mm_spec(&kind, spec).map_err(|e| e.to_string()))
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        self.with_problem(turn, |p| ops.run_scaled_mm_spec(p, spec).map_err(|x| x.to_string()))
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        let (m, n, k) = self.shape;
        self.stream
            .memset_zeros(&mut *self.out.borrow_mut())
            .map_err(|x| x.to_string())?;
        self.run(ops, spec, 0)?;
        let got = self.stream.clone_dtoh(&*self.out.borrow()).map_err(|x| x.to_string())?;
        let Host {
            a: ha,
            b: hb,
            sa,
            sb,
            bias,
        } = &self.host;
        let (mut err, mut max_ref) = (0f64, 1e-30f64);
        for i in sample(m, 16) {
            for j in sample(n, 64) {
                let acc: i64 = (0..k)
                    .map(|t| i64::from(ha[i * k + t]) * i64::from(hb[j * k + t]))
                    .sum();
                let s = f64::from(sa[i.min(sa.len() - 1)]) * f64::from(sb[j.min(sb.len() - 1)]);
                let b = if self.kind.bias { bias[j].to_f64() } else { 0.0 };
                let r = acc as f64 * s + b;
                let g = got[i * n + j].to_f64();
                err = if g.is_nan() {
                    f64::INFINITY
                } else {
                    err.max((g - r).abs())
                };
                max_ref = max_ref.max(r.abs());
            }
        }
        if err / max_ref > 1e-2 {
            return Err(format!(
                "max relative error {:.2e} against the exact result",
                err / max_ref
            ));
        }
        Ok(())
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, n, k) = self.shape;
        (self.bs.len(), n * k)
    }
}

impl Ops {
    /// The tuning tables' choice for a scaled-mm problem under `RCUTE_TUNING` (one batch;
    /// on a miss with `on-miss`, INT8 problems are tuned here on buffers of their kind and
    /// shape, never the caller's; FP8 ones use the tables only).
    pub(crate) fn tuned_scaled_mm_spec(&self, p: &ScaledMmProblem<'_>) -> Option<ConfigSpec> {
        let tuning = self.tuning();
        if p.l() != 1 || !tuning.active() {
            return None;
        }
        let arch = self.gpu().arch()?;
        let key = scaled_mm_key(p, arch.as_str());
        if p.a().dtype != DType::S8 {
            return tuning.lookup(&key);
        }
        let kind = ScaledMmKind::of(p);
        let shape = (p.m(), p.n(), p.k());
        tuning.choose(&key, || {
            if crate::stream::is_capturing(self.stream()).map_err(|e| e.to_string())? {
                return Err("the stream captures a graph".into());
            }
            let t: Box<dyn Tunable> = match kind.out {
                DType::F16 => Box::new(ScaledMmProbe::<half::f16>::new(self, key.clone(), kind, shape)?),
                _ => Box::new(ScaledMmProbe::<half::bf16>::new(self, key.clone(), kind, shape)?),
            };
            on_miss_entry(self, t.as_ref())
        })
    }
}
