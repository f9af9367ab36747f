//! The `scaled_mm` under `rcute tune scaled-mm`: `rcute_ops::tuning::probe::ScaledMmProbe`
//! with per-token and per-channel scales, a bias and bf16 out (the weight rotated over
//! copies, checked against the exact product). INT8 (`--dtype s8`) is timed against
//! cuBLASLt's INT8 GEMM on the same operands (unscaled, s32 out: less work than
//! `scaled_mm`); FP8 e4m3 (`--dtype e4m3`, sm_90 kernels only) has no peer here
//! (`scripts/torch_peers.py` times `torch._scaled_mm`).

use std::cell::RefCell;

use half::bf16;
use rcute_kernel::gemm_sm80::ScaleKind;
use rcute_ops::tensor::DType;
use rcute_ops::tuning::probe::ScaledMmProbe;
use rcute_ops::tuning::tuner::Tunable;
use rcute_ops::{Ops, ScaledMmKind, E4M3};

use super::peered::Peered;
use crate::lt_peer::LtGemm;

/// The kind of every problem this command tunes, with operands of `ab`.
fn kind(ab: DType) -> ScaledMmKind {
    ScaledMmKind {
        ab,
        out: DType::BF16,
        a_scale: ScaleKind::PerRow,
        b_scale: ScaleKind::PerCol,
        bias: true,
    }
}

/// The probe of `(M, N, K)` with `s8` (and its cuBLASLt peer) or `e4m3` operands.
pub fn tunable<'o>(
    ops: &'o Ops,
    dtype: &str,
    (m, n, k): (usize, usize, usize),
) -> Result<Box<dyn Tunable + 'o>, String> {
    match dtype {
        "s8" | "int8" => {
            let probe = ScaledMmProbe::<i8, bf16>::new(ops, kind(DType::S8), (m, n, k))?;
            let stream = ops.stream().clone();
            let lt = RefCell::new(LtGemm::int8(&stream, m, n, k)?);
            let acc = RefCell::new(stream.alloc_zeros::<i32>(m * n).map_err(|e| e.to_string())?);
            let peer = move |p: &ScaledMmProbe<i8, bf16>, turn: usize| {
                lt.borrow_mut().run(&stream, p.a(), p.b(turn), &mut acc.borrow_mut())
            };
            Ok(Box::new(Peered::new(probe, "cublaslt-int8", peer)))
        }
        "e4m3" | "fp8" => Ok(Box::new(ScaledMmProbe::<E4M3, bf16>::new(
            ops,
            kind(DType::E4M3),
            (m, n, k),
        )?)),
        other => Err(format!("--dtype {other}: s8 or e4m3")),
    }
}
