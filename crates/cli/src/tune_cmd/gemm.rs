//! The bf16 GEMM under `rcute tune gemm`: row-major A, column-major B (the weight, rotated
//! over copies), row-major D, no C; checked and timed against cuBLAS on the same buffers.

use std::cell::RefCell;

use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_ops::tuning::space::gemm_candidates;
use rcute_ops::tuning::{ConfigSpec, ProblemKey};
use rcute_ops::{MatrixMut, MatrixRef, Ops};
use std::sync::Arc;

use crate::bench_cmd::{cublas_tn_bf16, random_bf16};
use rcute_ops::tuning::tuner::{copies_for, Compiler, Tunable};

/// A bf16 GEMM problem with its buffers and its cuBLAS peer.
pub struct GemmTune<'b> {
    shape: (usize, usize, usize),
    arch: String,
    stream: Arc<CudaStream>,
    blas: &'b CudaBlas,
    a: CudaSlice<bf16>,
    bs: Vec<CudaSlice<bf16>>,
    d: RefCell<CudaSlice<bf16>>,
    dref: RefCell<CudaSlice<bf16>>,
    want: Vec<bf16>,
    candidates: Vec<ConfigSpec>,
}

impl<'b> GemmTune<'b> {
    /// Random inputs on `ops`' GPU, the candidates, and cuBLAS's output as the reference.
    pub fn new(ops: &Ops, blas: &'b CudaBlas, (m, n, k): (usize, usize, usize), arch: &str) -> Result<Self, String> {
        let gpu = ops.gpu();
        let stream = gpu.stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let copies = copies_for(n * k * 2);
        let a = stream.clone_htod(&random_bf16(m * k, 11)).map_err(e)?;
        let bs = (0..copies)
            .map(|i| stream.clone_htod(&random_bf16(k * n, 12 + i as u64)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        let mut t = GemmTune {
            shape: (m, n, k),
            arch: arch.into(),
            d: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            dref: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            stream,
            blas,
            a,
            bs,
            want: Vec::new(),
            candidates: gemm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count()),
        };
        t.peer(0)?;
        t.want = t.stream.clone_dtoh(&*t.dref.borrow()).map_err(e)?;
        Ok(t)
    }
}

impl Tunable for GemmTune<'_> {
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }

    fn candidates(&self) -> &[ConfigSpec] {
        &self.candidates
    }

    fn compiler(&self) -> Compiler {
        Box::new(|ops: &Ops, spec: &ConfigSpec| {
            match spec {
                ConfigSpec::Sm80(x) => ops
                    .load_gemm(&x.apply(GemmSm80Config::bf16(Major::K, Major::K, x.tile, x.warps)))
                    .map(|_| ()),
                ConfigSpec::Sm90(x) => ops
                    .load_gemm_sm90(&x.apply(GemmSm90Config::bf16(x.tile, x.schedule)).without_c())
                    .map(|_| ()),
                other => return Err(format!("{other} is not a gemm configuration")),
            }
            .map_err(|e| e.to_string())
        })
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        let (m, n, k) = self.shape;
        let mut d = self.d.borrow_mut();
        let b = &self.bs[turn % self.bs.len()];
        let p = rcute_ops::validate(
            &MatrixRef::new(&self.a, m, k),
            &MatrixRef::new(b, k, n).col_major(),
            None,
            &MatrixMut::new(&mut d, m, n),
            1.0,
            0.0,
        )
        .map_err(|x| x.to_string())?;
        let choice = spec
            .gemm_choice()
            .ok_or_else(|| format!("{spec} is not a gemm configuration"))?;
        ops.run_gemm_with(&p, Some(&choice)).map_err(|x| x.to_string())
    }

    fn peer(&self, turn: usize) -> Result<(), String> {
        let b = &self.bs[turn % self.bs.len()];
        let mut d = self.dref.borrow_mut();
        // SAFETY: the buffers hold K*N, M*K and M*N elements as the configuration says.
        unsafe {
            self.blas.gemm(
                cublas_tn_bf16(self.shape.0, self.shape.1, self.shape.2),
                b,
                &self.a,
                &mut *d,
            )
        }
        .map_err(|x| x.to_string())
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.run(ops, spec, 0)?;
        let got = self.stream.clone_dtoh(&*self.d.borrow()).map_err(|x| x.to_string())?;
        let max_ref = self
            .want
            .iter()
            .map(|x| x.to_f64().abs())
            .fold(0.0, f64::max)
            .max(1e-30);
        let err = got
            .iter()
            .zip(&self.want)
            .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
            .fold(0.0, f64::max);
        if got.iter().any(|x| x.is_nan()) || err / max_ref > 2e-2 {
            return Err(format!("max relative error {:.2e} against cuBLAS", err / max_ref));
        }
        Ok(())
    }

    fn key(&self) -> ProblemKey {
        let (m, n, k) = self.shape;
        ProblemKey::new("gemm", "bf16", "lincomb", &self.arch, m, n, k)
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, n, k) = self.shape;
        (self.bs.len(), n * k * 2)
    }

    fn peer_name(&self) -> Option<&'static str> {
        Some("cublas")
    }
}
