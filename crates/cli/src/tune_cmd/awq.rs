//! The AWQ W4A16 GEMM under `rcute tune awq`: f16 `x [M, K]`, an AutoAWQ `version="gemm"`
//! weight `[K, N]` with group size `--group` (rotated over copies), no bias; the candidates
//! are the configurations `Ops::run_awq_gemm` can be forced to
//! (`rcute_ops::tuning::space::awq_candidates`), each checked against a float64 reference
//! on a sample of the output. No peer is timed (`rcute bench awq` compares with cuBLAS).

use std::cell::RefCell;

use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use rcute_ops::awq::{pack_awq_matrix, validate_awq_gemm, AwqShape, AwqTensors};
use rcute_ops::tuning::space::awq_candidates;
use rcute_ops::tuning::tuner::{copies_for, Compiler, Tunable};
use rcute_ops::tuning::{ConfigSpec, ProblemKey};
use rcute_ops::{MatrixMut, MatrixRef, Ops};
use std::sync::Arc;

/// One weight's device tensors.
struct Weight {
    q: CudaSlice<i32>,
    s: CudaSlice<f16>,
    z: CudaSlice<i32>,
}

/// An AWQ GEMM problem with its buffers.
pub struct AwqTune {
    shape: (usize, usize, usize),
    awq: AwqShape,
    arch: String,
    stream: Arc<CudaStream>,
    x: CudaSlice<f16>,
    ws: Vec<Weight>,
    out: RefCell<CudaSlice<f16>>,
    /// Host copies for the check: x, the 4-bit weights and zeros (unpacked), the scales.
    host: (Vec<f16>, Vec<u8>, Vec<u8>, Vec<f16>),
    candidates: Vec<ConfigSpec>,
}

/// `len` values from a fixed seed (SplitMix64).
fn random_u64(len: usize, seed: u64) -> Vec<u64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}

fn unit(z: u64) -> f32 {
    (z >> 40) as f32 / (1u64 << 24) as f32
}

impl AwqTune {
    /// Random inputs on `ops`' GPU (weights uploaded `copies_for` times) and the candidates.
    pub fn new(ops: &Ops, (m, n, k): (usize, usize, usize), group: usize, arch: &str) -> Result<Self, String> {
        let awq = AwqShape::new(k, n, group).map_err(|e| e.to_string())?;
        let stream = ops.gpu().stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let g = awq.groups();
        let x: Vec<f16> = random_u64(m * k, 1)
            .into_iter()
            .map(|z| f16::from_f32(unit(z) * 2.0 - 1.0))
            .collect();
        let q: Vec<u8> = random_u64(k * n, 2).into_iter().map(|z| (z % 16) as u8).collect();
        let zr: Vec<u8> = random_u64(g * n, 3).into_iter().map(|z| (z % 16) as u8).collect();
        // Scales in [1e-3, 2e-2]: outputs of order one for K in the thousands.
        let s: Vec<f16> = random_u64(g * n, 4)
            .into_iter()
            .map(|z| f16::from_f32(1e-3 + 1.9e-2 * unit(z)))
            .collect();
        let (qp, zp) = (
            pack_awq_matrix(&q, k, n).map_err(|x| x.to_string())?,
            pack_awq_matrix(&zr, g, n).map_err(|x| x.to_string())?,
        );
        let bytes = k * n / 2 + g * n * 2 + g * n / 2;
        let ws = (0..copies_for(bytes))
            .map(|_| -> Result<Weight, String> {
                Ok(Weight {
                    q: stream.clone_htod(&qp).map_err(e)?,
                    s: stream.clone_htod(&s).map_err(e)?,
                    z: stream.clone_htod(&zp).map_err(e)?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AwqTune {
            shape: (m, n, k),
            awq,
            arch: arch.into(),
            x: stream.clone_htod(&x).map_err(e)?,
            ws,
            out: RefCell::new(stream.alloc_zeros(m * n).map_err(e)?),
            host: (x, q, zr, s),
            candidates: awq_candidates(m, n, k, ops.gpu().sm_count()),
            stream,
        })
    }
}

impl Tunable for AwqTune {
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }

    fn key(&self) -> ProblemKey {
        let (m, n, k) = self.shape;
        rcute_ops::tuning::awq_key("f16", self.awq.group, &self.arch, m, n, k)
    }

    fn candidates(&self) -> &[ConfigSpec] {
        &self.candidates
    }

    fn compiler(&self) -> Compiler {
        Box::new(|ops: &Ops, spec: &ConfigSpec| match spec {
            ConfigSpec::Awq(s) => ops
                .load_awq_gemm(&s.config(rcute_kernel::awq_gemm::Element::F16).0)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            other => Err(format!("{other} is not an AWQ configuration")),
        })
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        let ConfigSpec::Awq(s) = spec else {
            return Err(format!("{spec} is not an AWQ configuration"));
        };
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
        ops.run_awq_gemm(&p, Some(s.config(rcute_kernel::awq_gemm::Element::F16)))
            .map_err(|e| e.to_string())
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        let (m, n, k) = self.shape;
        self.stream
            .memset_zeros(&mut *self.out.borrow_mut())
            .map_err(|x| x.to_string())?;
        self.run(ops, spec, 0)?;
        let got = self.stream.clone_dtoh(&*self.out.borrow()).map_err(|x| x.to_string())?;
        let (x, q, z, s) = &self.host;
        let group = self.awq.group;
        let (mut err, mut max_ref) = (0f64, 1e-30f64);
        let pick = |len: usize, count: usize| -> Vec<usize> {
            (0..count.min(len)).map(|i| i * len / count.min(len)).collect()
        };
        for i in pick(m, 16) {
            for j in pick(n, 64) {
                let r: f64 = (0..k)
                    .map(|t| {
                        let gi = (t / group) * n + j;
                        let w = (f64::from(q[t * n + j]) - f64::from(z[gi])) * s[gi].to_f64();
                        x[i * k + t].to_f64() * w
                    })
                    .sum();
                let v = got[i * n + j].to_f64();
                err = if v.is_nan() {
                    f64::INFINITY
                } else {
                    err.max((v - r).abs())
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
        let g = self.awq.groups();
        (self.ws.len(), k * n / 2 + g * n * 2 + g * n / 2)
    }
}
