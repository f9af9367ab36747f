//! The bf16 GEMM under `rcute tune gemm`: `rcute_ops::tuning::probe::GemmProbe` (row-major
//! A, column-major B rotated over copies, row-major D, checked against float64) with
//! cuBLAS on the same buffers as the peer.

use std::cell::RefCell;

use cudarc::cublas::{CudaBlas, Gemm};
use half::bf16;
use rcute_ops::tuning::probe::GemmProbe;
use rcute_ops::tuning::tuner::Tunable;
use rcute_ops::Ops;

use super::peered::Peered;
use crate::bench_cmd::cublas_tn_bf16;

/// The probe of `(M, N, K)` and its cuBLAS peer (writing an output of its own).
pub fn tunable<'b>(
    ops: &Ops,
    blas: &'b CudaBlas,
    (m, n, k): (usize, usize, usize),
) -> Result<Box<dyn Tunable + 'b>, String> {
    let probe = GemmProbe::<bf16>::new(ops, (m, n, k))?;
    let dref = RefCell::new(ops.stream().alloc_zeros::<bf16>(m * n).map_err(|e| e.to_string())?);
    let peer = move |p: &GemmProbe<bf16>, turn: usize| {
        let mut d = dref.borrow_mut();
        // SAFETY: the buffers hold K*N, M*K and M*N elements as the configuration says.
        unsafe { blas.gemm(cublas_tn_bf16(m, n, k), p.b(turn), p.a(), &mut *d) }.map_err(|x| x.to_string())
    };
    Ok(Box::new(Peered::new(probe, "cublas", peer)))
}
