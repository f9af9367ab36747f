//! The `scaled_mm` probe: an INT8 or FP8 e4m3 problem of one kind and shape (random
//! operands, the weight B rotated over copies, the problem's scale kinds and bias),
//! checked against the exact product on a sample of the output, and the [`Ops`] path that
//! tunes it on a miss.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use rcute_kernel::gemm_sm80::ScaleKind;

use super::probe::{copies, driver, probe_fields, random, Half, Sampled};
use super::space::scaled_mm_candidates;
use super::tuner::{copies_for, Compiler, Tunable};
use super::{ConfigSpec, ProblemKey};
use crate::scaled_mm::{scaled_mm_key, ScaledMmKind, ScaledMmProblem};
use crate::tensor::{DType, Element, MatrixMut, MatrixRef, VectorRef, E4M3};
use crate::{validate_scaled_mm, Ops, Scale};

/// An 8-bit operand type of `scaled_mm`: `i8` or [`E4M3`].
pub trait Operand8: Element + DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + Send + Sync + 'static {
    /// A value for `u` uniform in [-1, 1) (no NaN; magnitudes that keep K-long sums finite).
    fn from_unit(u: f32) -> Self;
    /// The exact value.
    fn to_f64(self) -> f64;
}

impl Operand8 for i8 {
    fn from_unit(u: f32) -> Self {
        (u * 127.0) as i8
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Operand8 for E4M3 {
    /// A uniform byte with bit 6 cleared: no NaN (`0x7F` / `0xFF`), `|x| < 2`.
    fn from_unit(u: f32) -> Self {
        E4M3((((u + 1.0) * 128.0) as u32).min(255) as u8 & 0xBF)
    }
    /// Sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal.
    ///
    /// ```
    /// use rcute_ops::tuning::probe::Operand8;
    /// use rcute_ops::E4M3;
    /// assert_eq!(E4M3(0x38).to_f64(), 1.0);
    /// assert_eq!(E4M3(0xB4).to_f64(), -0.75);
    /// assert_eq!(E4M3(0x01).to_f64(), 2f64.powi(-9));
    /// ```
    fn to_f64(self) -> f64 {
        let b = self.0;
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = (i32::from((b >> 3) & 0xF), f64::from(b & 7));
        let mag = if e == 0 {
            m / 8.0 * 2f64.powi(-6)
        } else {
            (1.0 + m / 8.0) * 2f64.powi(e - 7)
        };
        sign * mag
    }
}

/// A `scaled_mm` problem (row-major A `[M, K]`, column-major B `[K, N]`, both `Q`, output
/// `T`) of one [`ScaledMmKind`] and shape, with its candidates (FP8: the `sm90:` ones).
pub struct ScaledMmProbe<Q: Operand8, T: Half> {
    key: ProblemKey,
    kind: ScaledMmKind,
    shape: (usize, usize, usize),
    stream: Arc<CudaStream>,
    a: CudaSlice<Q>,
    bs: Vec<CudaSlice<Q>>,
    sa: CudaSlice<f32>,
    sb: CudaSlice<f32>,
    bias: CudaSlice<T>,
    out: RefCell<CudaSlice<T>>,
    /// Scale lengths (1 for a tensor scale).
    scales: (usize, usize),
    /// The exact result at the sampled outputs.
    want: Sampled,
    candidates: Vec<ConfigSpec>,
}

impl<Q: Operand8, T: Half> ScaledMmProbe<Q, T> {
    /// Random inputs of `(M, N, K)` of `kind` (its operand and output types must be `Q`
    /// and `T`) on `ops`' GPU, B copied until the copies exceed
    /// [`super::tuner::ROTATE_BYTES`], and the candidates of [`scaled_mm_candidates`].
    pub fn new(ops: &Ops, kind: ScaledMmKind, (m, n, k): (usize, usize, usize)) -> Result<Self, String> {
        if kind.ab != Q::DTYPE || kind.out != T::DTYPE {
            return Err(format!(
                "a probe of {} -> {} for a problem of {} -> {}",
                Q::DTYPE.name(),
                T::DTYPE.name(),
                kind.ab.name(),
                kind.out.name()
            ));
        }
        let stream = ops.stream().clone();
        let (ha, hb) = (random(m * k, 3, Q::from_unit), random(n * k, 4, Q::from_unit));
        let rows = if kind.a_scale == ScaleKind::PerRow { m } else { 1 };
        let cols = if kind.b_scale == ScaleKind::PerCol { n } else { 1 };
        // Scales that keep the outputs of order one (INT8 products reach 127^2 K).
        let unit = if Q::DTYPE == DType::S8 { 1e-3 } else { 0.1 };
        let hsa: Vec<f32> = random(rows, 5, |x| unit * (1.5 + x));
        let hsb: Vec<f32> = random(cols, 6, |x| unit * (1.5 + x));
        let hbias: Vec<T> = random(n, 7, T::from_f32);
        let gpu = ops.gpu();
        let arch = gpu.arch().ok_or("no rcute arch for this GPU")?;
        let mut candidates = scaled_mm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count());
        if Q::DTYPE == DType::E4M3 {
            candidates.retain(|c| matches!(c, ConfigSpec::Sm90(_)));
        }
        // Products of 8-bit values and their K-long sums are exact in float64.
        let dec = |v: &[Q]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
        let (fa, fb) = (dec(&ha), dec(&hb));
        let want = Sampled::new(m, n, |i, j| {
            let acc: f64 = (0..k).map(|t| fa[i * k + t] * fb[j * k + t]).sum();
            let s = f64::from(hsa[i.min(rows - 1)]) * f64::from(hsb[j.min(cols - 1)]);
            acc * s + if kind.bias { hbias[j].to_f64() } else { 0.0 }
        });
        let mut probe = ScaledMmProbe {
            key: ProblemKey::new("scaled_mm", "", "", "", 0, 0, 0),
            kind,
            shape: (m, n, k),
            a: stream.clone_htod(&ha).map_err(driver)?,
            bs: copies(&stream, &hb, copies_for(n * k))?,
            sa: stream.clone_htod(&hsa).map_err(driver)?,
            sb: stream.clone_htod(&hsb).map_err(driver)?,
            bias: stream.clone_htod(&hbias).map_err(driver)?,
            out: RefCell::new(stream.alloc_zeros(m * n).map_err(driver)?),
            stream,
            scales: (rows, cols),
            want,
            candidates,
        };
        // The key (and kind) the op itself sees for this problem.
        let (key, seen) = probe.with_problem(0, |p| Ok((scaled_mm_key(p, arch.as_str()), ScaledMmKind::of(p))))?;
        if seen != kind {
            return Err(format!("the probe's problem is {seen:?}, not {kind:?}"));
        }
        probe.key = key;
        Ok(probe)
    }

    /// A, on the GPU.
    pub fn a(&self) -> &CudaSlice<Q> {
        &self.a
    }

    /// B copy `turn` (modulo the copies), on the GPU.
    pub fn b(&self, turn: usize) -> &CudaSlice<Q> {
        &self.bs[turn % self.bs.len()]
    }

    /// `f` of the validated problem on B copy `turn`.
    fn with_problem<R>(
        &self,
        turn: usize,
        f: impl FnOnce(&ScaledMmProblem<'_>) -> Result<R, String>,
    ) -> Result<R, String> {
        let (m, n, k) = self.shape;
        let mut out = self.out.borrow_mut();
        let (sa, sb) = (
            VectorRef::new(&self.sa, self.scales.0),
            VectorRef::new(&self.sb, self.scales.1),
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
            &MatrixRef::new(self.b(turn), k, n).col_major(),
            sa,
            sb,
            self.kind.bias.then_some(&bias),
            &MatrixMut::new(&mut out, m, n),
        )
        .map_err(|x| x.to_string())?;
        f(&p)
    }
}

impl<Q: Operand8, T: Half> Tunable for ScaledMmProbe<Q, T> {
    probe_fields!();

    fn compiler(&self) -> Compiler {
        let kind = self.kind;
        Box::new(move |ops: &Ops, spec: &ConfigSpec| ops.load_scaled_mm_spec(&kind, spec).map_err(|e| e.to_string()))
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        self.with_problem(turn, |p| ops.run_scaled_mm_spec(p, spec).map_err(|x| x.to_string()))
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.want
            .check_output(&self.stream, &self.out, self.shape.1, "the exact result", || {
                self.run(ops, spec, 0)
            })
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, n, k) = self.shape;
        (self.bs.len(), n * k)
    }
}

impl Ops {
    /// The tuning tables' choice for a scaled-mm problem under `RCUTE_TUNING` (one batch;
    /// on a miss with `on-miss`, tuned here on buffers of its kind and shape, never the
    /// caller's: INT8 everywhere, FP8 on sm_90, where its kernel runs).
    pub(crate) fn tuned_scaled_mm_spec(&self, p: &ScaledMmProblem<'_>) -> Option<ConfigSpec> {
        if p.l() != 1 {
            return None;
        }
        let kind = ScaledMmKind::of(p);
        let shape = (p.m(), p.n(), p.k());
        self.tuned_spec(
            |arch| Some(scaled_mm_key(p, arch)),
            || {
                Ok(match (kind.ab, kind.out) {
                    (DType::S8, DType::F16) => Box::new(ScaledMmProbe::<i8, half::f16>::new(self, kind, shape)?),
                    (DType::S8, _) => Box::new(ScaledMmProbe::<i8, half::bf16>::new(self, kind, shape)?),
                    (_, DType::F16) => Box::new(ScaledMmProbe::<E4M3, half::f16>::new(self, kind, shape)?),
                    _ => Box::new(ScaledMmProbe::<E4M3, half::bf16>::new(self, kind, shape)?),
                })
            },
        )
    }
}
