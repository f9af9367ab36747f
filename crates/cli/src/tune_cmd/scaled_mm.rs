//! The INT8 `scaled_mm` under `rcute tune scaled-mm`: s8 row-major A, s8 column-major B (the
//! weight, rotated over copies), per-token and per-channel scales, a bias, bf16 out; checked
//! against cuBLASLt's exact s32 accumulator and timed against cuBLASLt's INT8 GEMM on the
//! same operands (unscaled, s32 out: less work than `scaled_mm`).

use std::cell::RefCell;

use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use rcute_kernel::gemm_sm80::ScaleKind;
use rcute_ops::scaled_mm::scaled_mm_key;
use rcute_ops::tensor::DType;
use rcute_ops::tuning::space::scaled_mm_candidates;
use rcute_ops::tuning::{ConfigSpec, ProblemKey};
use rcute_ops::{validate_scaled_mm, MatrixMut, MatrixRef, Ops, Scale, ScaledMmKind, ScaledMmProblem, VectorRef};
use std::sync::Arc;

use crate::bench_scaled_mm::{host_inputs, max_scaled_err, LtInt8};
use rcute_ops::tuning::tuner::{copies_for, Compiler, Tunable};

/// The kind of every problem this tuner times.
const KIND: ScaledMmKind = ScaledMmKind {
    ab: DType::S8,
    out: DType::BF16,
    a_scale: ScaleKind::PerRow,
    b_scale: ScaleKind::PerCol,
    bias: true,
};

/// An INT8 scaled-mm problem with its buffers and its cuBLASLt peer.
pub struct ScaledMmTune {
    shape: (usize, usize, usize),
    arch: String,
    stream: Arc<CudaStream>,
    a: CudaSlice<i8>,
    bs: Vec<CudaSlice<i8>>,
    sa: CudaSlice<f32>,
    sb: CudaSlice<f32>,
    bias: CudaSlice<bf16>,
    out: RefCell<CudaSlice<bf16>>,
    acc: RefCell<CudaSlice<i32>>,
    lt: RefCell<LtInt8>,
    /// Host copies for the check: the exact accumulator of copy 0, scales, bias.
    want: (Vec<i32>, Vec<f32>, Vec<f32>, Vec<f64>),
    candidates: Vec<ConfigSpec>,
}

impl ScaledMmTune {
    /// Random inputs on `ops`' GPU, the candidates, and the peer's exact accumulator.
    pub fn new(ops: &Ops, (m, n, k): (usize, usize, usize), arch: &str) -> Result<Self, String> {
        let gpu = ops.gpu();
        let stream = gpu.stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let (ha, _, hsa, hsb, hbias) = host_inputs(0x7E5E, (m, n, k), true);
        let copies = copies_for(n * k);
        let bs = (0..copies)
            .map(|i| stream.clone_htod(&host_inputs(0x7E5F + i as u64, (1, n, k), false).1))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        let bias_q: Vec<f64> = hbias.iter().map(|&x| bf16::from_f32(x).to_f64()).collect();
        let bias16: Vec<bf16> = hbias.iter().map(|&x| bf16::from_f32(x)).collect();
        let t = ScaledMmTune {
            shape: (m, n, k),
            arch: arch.into(),
            a: stream.clone_htod(&ha).map_err(e)?,
            bs,
            sa: stream.clone_htod(&hsa).map_err(e)?,
            sb: stream.clone_htod(&hsb).map_err(e)?,
            bias: stream.clone_htod(&bias16).map_err(e)?,
            out: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            acc: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            lt: RefCell::new(LtInt8::new(&stream, m, n, k)?),
            want: (Vec::new(), hsa, hsb, bias_q),
            candidates: scaled_mm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count()),
            stream,
        };
        if t.with_problem(0, |p| Ok(ScaledMmKind::of(p)))? != KIND {
            return Err("the tuned problem is not of the kind its kernels are built for".into());
        }
        t.peer(0)?;
        let acc = t.stream.clone_dtoh(&*t.acc.borrow()).map_err(e)?;
        Ok(ScaledMmTune {
            want: (acc, t.want.1.clone(), t.want.2.clone(), t.want.3.clone()),
            ..t
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
        let bias = VectorRef::new(&self.bias, n);
        let p = validate_scaled_mm(
            &MatrixRef::new(&self.a, m, k),
            &MatrixRef::new(b, k, n).col_major(),
            Scale::Vector(VectorRef::new(&self.sa, m)),
            Scale::Vector(VectorRef::new(&self.sb, n)),
            Some(&bias),
            &MatrixMut::new(&mut out, m, n),
        )
        .map_err(|x| x.to_string())?;
        f(&p)
    }

    /// Run `spec` on B copy `turn` through the op's own entry point for tuning specs.
    fn call(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        self.with_problem(turn, |p| ops.run_scaled_mm_spec(p, spec).map_err(|x| x.to_string()))
    }
}

impl Tunable for ScaledMmTune {
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }

    fn candidates(&self) -> &[ConfigSpec] {
        &self.candidates
    }

    fn compiler(&self) -> Compiler {
        Box::new(|ops: &Ops, spec: &ConfigSpec| ops.load_scaled_mm_spec(&KIND, spec).map_err(|e| e.to_string()))
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        self.call(ops, spec, turn)
    }

    fn peer(&self, turn: usize) -> Result<(), String> {
        let b = &self.bs[turn % self.bs.len()];
        self.lt
            .borrow_mut()
            .run(&self.stream, &self.a, b, &mut self.acc.borrow_mut())
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        let (m, n, _) = self.shape;
        self.call(ops, spec, 0)?;
        let got: Vec<f64> = self
            .stream
            .clone_dtoh(&*self.out.borrow())
            .map_err(|x| x.to_string())?
            .iter()
            .map(|x| x.to_f64())
            .collect();
        let (acc, sa, sb, bias) = &self.want;
        let err = max_scaled_err(acc, &got, (m, n), (sa, sb), Some(bias), true);
        if err > 1.0 {
            return Err(format!("error {err:.2} output steps against the exact result"));
        }
        Ok(())
    }

    fn key(&self) -> ProblemKey {
        // The key the op itself looks up for this problem.
        let (m, n, k) = self.shape;
        self.with_problem(0, |p| Ok(scaled_mm_key(p, &self.arch)))
            .unwrap_or_else(|_| ProblemKey::new("scaled_mm", "s8:bf16", "token-channel+bias", &self.arch, m, n, k))
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, n, k) = self.shape;
        (self.bs.len(), n * k)
    }

    fn peer_name(&self) -> Option<&'static str> {
        Some("cublaslt-int8")
    }
}
