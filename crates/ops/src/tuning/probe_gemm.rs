//! On-miss tuning of `gemm`: a [`Tunable`] on buffers of the problem's shape (random
//! data, the weight B rotated over copies), checked against a float64 reference on a
//! sample of the output, and the [`Ops`] path that runs it on a miss.

use std::cell::RefCell;

use cudarc::driver::{CudaSlice, CudaStream};
use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};
use rcute_kernel::gemm_sm90::GemmSm90Config;
use std::sync::Arc;

use super::space::gemm_candidates;
use super::tuner::{copies_for, tune, Compiler, Quiet, Tunable};
use super::{gemm_key, ConfigSpec, Entry, ProblemKey};
use crate::gemm::GemmProblem;
use crate::tensor::{DType, Element, MatrixMut, MatrixRef};
use crate::Ops;

/// A 16-bit floating type the GEMM probe fills with random values.
pub(crate) trait Half: Element + cudarc::driver::ValidAsZeroBits + Copy + Default + Unpin + 'static {
    fn from_f32(x: f32) -> Self;
    fn to_f64(self) -> f64;
}
impl Half for half::bf16 {
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
    fn to_f64(self) -> f64 {
        half::bf16::to_f64(self)
    }
}
impl Half for half::f16 {
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
}

/// `len` values uniform in [-1, 1) from a fixed seed (a 64-bit LCG).
pub(crate) fn uniform(len: usize, seed: u64) -> impl Iterator<Item = f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len).map(move |_| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    })
}

/// Up to `count` indices spread over `0..len`, the last one included.
pub(crate) fn sample(len: usize, count: usize) -> Vec<usize> {
    let count = count.min(len).max(1);
    let mut v: Vec<usize> = (0..count).map(|i| i * len / count).collect();
    v.push(len - 1);
    v.dedup();
    v
}

/// A TN GEMM problem (row-major A, column-major B, row-major D, no C) of one shape.
struct GemmProbe<T: Half> {
    key: ProblemKey,
    shape: (usize, usize, usize),
    dtype: DType,
    stream: Arc<CudaStream>,
    a: CudaSlice<T>,
    bs: Vec<CudaSlice<T>>,
    d: RefCell<CudaSlice<T>>,
    host_a: Vec<T>,
    host_b: Vec<T>,
    candidates: Vec<ConfigSpec>,
}

impl<T: Half> GemmProbe<T> {
    fn new(ops: &Ops, key: ProblemKey, (m, n, k): (usize, usize, usize), dtype: DType) -> Result<Self, String> {
        let stream = ops.stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let host_a: Vec<T> = uniform(m * k, 1).map(T::from_f32).collect();
        let host_b: Vec<T> = uniform(n * k, 2).map(T::from_f32).collect();
        let bs = (0..copies_for(n * k * 2))
            .map(|_| stream.clone_htod(&host_b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        let gpu = ops.gpu();
        Ok(GemmProbe {
            key,
            shape: (m, n, k),
            dtype,
            a: stream.clone_htod(&host_a).map_err(e)?,
            bs,
            d: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            stream,
            host_a,
            host_b,
            candidates: gemm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count()),
        })
    }
}

impl<T: Half> Tunable for GemmProbe<T> {
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
        let e = match self.dtype {
            DType::F16 => rcute_atom::Element::F16,
            _ => rcute_atom::Element::BF16,
        };
        Box::new(move |ops: &Ops, spec: &ConfigSpec| {
            match spec {
                ConfigSpec::Sm80(x) => {
                    let mut cfg = x.apply(GemmSm80Config::bf16(Major::K, Major::K, x.tile, x.warps));
                    (cfg.a, cfg.b, cfg.c, cfg.d) = (e, e, e, e);
                    ops.load_gemm(&cfg).map(|_| ())
                }
                ConfigSpec::Sm90(x) => {
                    let mut cfg = x.apply(GemmSm90Config::bf16(x.tile, x.schedule));
                    (cfg.ab, cfg.cd) = (e, e);
                    ops.load_gemm_sm90(&cfg.without_c()).map(|_| ())
                }
                other => return Err(format!("{other} is not a gemm configuration")),
            }
            .map_err(|x| x.to_string())
        })
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        let (m, n, k) = self.shape;
        let choice = spec
            .gemm_choice()
            .ok_or_else(|| format!("{spec} is not a gemm configuration"))?;
        let mut d = self.d.borrow_mut();
        let b = &self.bs[turn % self.bs.len()];
        let p = crate::validate(
            &MatrixRef::new(&self.a, m, k),
            &MatrixRef::new(b, k, n).col_major(),
            None,
            &MatrixMut::new(&mut d, m, n),
            1.0,
            0.0,
        )
        .map_err(|x| x.to_string())?;
        ops.run_gemm_with(&p, Some(&choice)).map_err(|x| x.to_string())
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        let (m, n, k) = self.shape;
        self.stream
            .memset_zeros(&mut *self.d.borrow_mut())
            .map_err(|x| x.to_string())?;
        self.run(ops, spec, 0)?;
        let got = self.stream.clone_dtoh(&*self.d.borrow()).map_err(|x| x.to_string())?;
        let (mut err, mut max_ref) = (0f64, 1e-30f64);
        for i in sample(m, 16) {
            for j in sample(n, 64) {
                let r: f64 = (0..k)
                    .map(|t| self.host_a[i * k + t].to_f64() * self.host_b[j * k + t].to_f64())
                    .sum();
                let g = got[i * n + j].to_f64();
                err = if g.is_nan() {
                    f64::INFINITY
                } else {
                    err.max((g - r).abs())
                };
                max_ref = max_ref.max(r.abs());
            }
        }
        if err / max_ref > 2e-2 {
            return Err(format!("max relative error {:.2e} against float64", err / max_ref));
        }
        Ok(())
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
        let tuning = self.tuning();
        if !tuning.active() {
            return None;
        }
        let arch = self.gpu().arch()?;
        let key = gemm_key(p, arch.as_str())?;
        let shape = (p.m(), p.n(), p.k());
        tuning.choose(&key, || {
            if crate::stream::is_capturing(self.stream()).map_err(|e| e.to_string())? {
                return Err("the stream captures a graph".into());
            }
            let t: Box<dyn Tunable> = match p.a().dtype {
                DType::F16 => Box::new(GemmProbe::<half::f16>::new(self, key.clone(), shape, DType::F16)?),
                _ => Box::new(GemmProbe::<half::bf16>::new(self, key.clone(), shape, DType::BF16)?),
            };
            on_miss_entry(self, t.as_ref())
        })
    }
}

/// Tune `t` within the handle's on-miss budget; the winner as a table entry.
pub(crate) fn on_miss_entry(ops: &Ops, t: &dyn Tunable) -> Result<Option<Entry>, String> {
    let outcome = tune(ops, t, ops.tuning().budget(), &Quiet)?;
    // Wait for the probe's work before its buffers are freed and the caller's op runs.
    ops.stream().synchronize().map_err(|e| e.to_string())?;
    Ok(outcome.entry(None))
}
