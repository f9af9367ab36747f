//! The fused MoE layer under `rcute tune moe`: `--shape TxHxI` (tokens, hidden size,
//! intermediate size), bf16, `--experts` experts all on this GPU, top-`--topk` routing
//! from random logits (renormalised); the candidates are the configurations
//! `Ops::run_fused_moe_with` takes (`rcute_ops::tuning::space::moe_candidates`: the
//! grouped GEMMs' tile, GEMM2's K splits). Each is checked against the output of the
//! op's own choice (`Ops::run_fused_moe`, which the GPU suite checks against the float64
//! `fused_moe_reference`). The weights are rotated over copies where one copy is smaller
//! than the rotation target. No peer is timed (`rcute bench moe` compares with cuBLAS).

use std::cell::RefCell;

use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use rcute_ops::moe::{fused_moe_workspace_bytes, fused_moe_workspace_bytes_with, validate_fused_moe, MoeOptions, MoeRouting, MoeWorkspace};
use rcute_ops::tuning::space::moe_candidates;
use rcute_ops::tuning::tuner::{copies_for, Compiler, Tunable};
use rcute_ops::tuning::{ConfigSpec, ProblemKey};
use rcute_ops::{DType, MatrixMut, MatrixRef, Ops};
use std::sync::Arc;

/// A fused MoE problem with its buffers.
pub struct MoeTune {
    /// `(T, H, I)`.
    shape: (usize, usize, usize),
    experts: usize,
    topk: usize,
    arch: String,
    stream: Arc<CudaStream>,
    x: CudaSlice<bf16>,
    logits: CudaSlice<f32>,
    weights: Vec<(CudaSlice<bf16>, CudaSlice<bf16>)>,
    ws: RefCell<CudaSlice<u8>>,
    y: RefCell<CudaSlice<bf16>>,
    /// The op's own output on copy 0.
    want: Vec<bf16>,
    candidates: Vec<ConfigSpec>,
}

fn random(len: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn bf(v: Vec<f32>) -> Vec<bf16> {
    v.into_iter().map(bf16::from_f32).collect()
}

impl MoeTune {
    /// Random inputs on `ops`' GPU, the candidates, and the op's own output.
    pub fn new(
        ops: &Ops,
        (t, h, i): (usize, usize, usize),
        (experts, topk): (usize, usize),
        arch: &str,
    ) -> Result<Self, String> {
        let stream = ops.gpu().stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let w13 = bf(random(experts * 2 * i * h, 11, 1.0 / (h as f32).sqrt()));
        let w2 = bf(random(experts * h * i, 12, 1.0 / (i as f32).sqrt()));
        let weights = (0..copies_for((w13.len() + w2.len()) * 2))
            .map(|_| Ok((stream.clone_htod(&w13).map_err(e)?, stream.clone_htod(&w2).map_err(e)?)))
            .collect::<Result<Vec<_>, String>>()?;
        let candidates = moe_candidates(t, topk, experts, h, i);
        // The layer's validation asks for the rules' workspace (either family's layout).
        let mut bytes = fused_moe_workspace_bytes(t, topk, experts, h, i, DType::BF16).map_err(|x| x.to_string())?;
        for c in &candidates {
            if let ConfigSpec::Moe(s) = c {
                let b = fused_moe_workspace_bytes_with(t, topk, experts, h, i, DType::BF16, s)
                    .map_err(|x| x.to_string())?;
                bytes = bytes.max(b);
            }
        }
        let mut tune = MoeTune {
            shape: (t, h, i),
            experts,
            topk,
            arch: arch.into(),
            x: stream.clone_htod(&bf(random(t * h, 13, 1.0))).map_err(e)?,
            logits: stream.clone_htod(&random(t * experts, 14, 4.0)).map_err(e)?,
            weights,
            ws: RefCell::new(stream.alloc_zeros(bytes.max(1)).map_err(e)?),
            y: RefCell::new(stream.alloc_zeros(t * h).map_err(e)?),
            want: Vec::new(),
            candidates,
            stream,
        };
        tune.call(0, |p| ops.run_fused_moe(p).map_err(|x| x.to_string()))?;
        tune.want = tune.stream.clone_dtoh(&*tune.y.borrow()).map_err(e)?;
        Ok(tune)
    }

    /// `f` of the validated layer on weight copy `turn`.
    fn call(
        &self,
        turn: usize,
        f: impl FnOnce(&rcute_ops::moe::MoeProblem) -> Result<(), String>,
    ) -> Result<(), String> {
        let (t, h, i) = self.shape;
        let (w13, w2) = &self.weights[turn % self.weights.len()];
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

impl Tunable for MoeTune {
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }

    fn key(&self) -> ProblemKey {
        let (t, h, i) = self.shape;
        rcute_ops::tuning::moe_key("bf16", self.experts, self.topk, &self.arch, t, h, i)
    }

    fn candidates(&self) -> &[ConfigSpec] {
        &self.candidates
    }

    fn compiler(&self) -> Compiler {
        Box::new(|ops: &Ops, spec: &ConfigSpec| match spec {
            ConfigSpec::Moe(s) => ops.load_fused_moe_spec(DType::BF16, s).map_err(|e| e.to_string()),
            other => Err(format!("{other} is not a MoE configuration")),
        })
    }

    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        let ConfigSpec::Moe(s) = spec else {
            return Err(format!("{spec} is not a MoE configuration"));
        };
        self.call(turn, |p| ops.run_fused_moe_with(p, s).map_err(|x| x.to_string()))
    }

    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.stream
            .memset_zeros(&mut *self.y.borrow_mut())
            .map_err(|x| x.to_string())?;
        self.run(ops, spec, 0)?;
        let got = self.stream.clone_dtoh(&*self.y.borrow()).map_err(|x| x.to_string())?;
        let max_ref = self.want.iter().map(|v| v.to_f64().abs()).fold(1e-30, f64::max);
        let err = got
            .iter()
            .zip(&self.want)
            .map(|(a, b)| {
                if a.is_nan() {
                    f64::INFINITY
                } else {
                    (a.to_f64() - b.to_f64()).abs()
                }
            })
            .fold(0.0, f64::max);
        if err / max_ref > 2e-2 {
            return Err(format!(
                "max relative error {:.2e} against the op's own choice",
                err / max_ref
            ));
        }
        Ok(())
    }

    fn rotated(&self) -> (usize, usize) {
        let (_, h, i) = self.shape;
        (self.weights.len(), self.experts * 3 * h * i * 2)
    }
}
