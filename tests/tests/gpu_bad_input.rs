//! The GPU half of the bad-input catalogue (`crates/ops/tests/bad_input.rs` has the rest,
//! without a GPU), the batch-broadcast GEMMs of issue 19 item 7 and the shared-`Ops`
//! concurrency of item 3:
//!
//! * every class of bad input through `Ops::gemm` / `Ops::scaled_mm` returns a typed error
//!   and leaves the output (poisoned with a sentinel) untouched;
//! * batched GEMMs that broadcast A, B or C over the batch (batch stride 0) run (on sm_90
//!   they take the SM80-class path, not the TMA kernel) and match a CPU reference;
//! * one `Ops` shared by 8 threads builds the kernel once and every thread's result is right.
//!
//! Only `rcute_ops` is needed to run an op (its re-exports); `rcute_kernel::testing` gives
//! the skip-or-fail GPU fixture. On a machine without a GPU each test prints why it skips,
//! and fails under RCUTE_REQUIRE_GPU=1.

use rcute_kernel::testing::gpu_for_test;
use rcute_ops::{bf16, CudaSlice, Geometry, MatrixMut, MatrixRef, Ops, OpsError, Scale, VectorRef, E4M3};

const SENTINEL: f32 = 7.0;

/// Asserts that `$call` is the typed error `$pattern` and that `$d` still holds the
/// sentinel everywhere.
macro_rules! rejects_untouched {
    ($ops:expr, $d:expr, $what:expr, $call:expr, $pattern:pat) => {{
        let result = $call;
        assert!(matches!(result, Err($pattern)), "{}: {result:?}", $what);
        $ops.gpu().synchronize().unwrap();
        let host = $ops.gpu().stream().clone_dtoh(&$d).unwrap();
        assert!(
            host.iter().all(|x| x.to_f32() == SENTINEL),
            "{}: the output was written",
            $what
        );
    }};
}

#[test]
fn gemm_bad_inputs_leave_the_output_untouched() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let s = ops.gpu().stream().clone();
    let a: CudaSlice<bf16> = s.clone_htod(&vec![bf16::ONE; 64 * 64]).unwrap();
    let b: CudaSlice<bf16> = s.clone_htod(&vec![bf16::ONE; 64 * 64]).unwrap();
    let f: CudaSlice<f32> = s.alloc_zeros(64 * 64).unwrap();
    let mut d: CudaSlice<bf16> = s.clone_htod(&vec![bf16::from_f32(SENTINEL); 64 * 64]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, 64, 64), MatrixRef::new(&b, 64, 64));
    rejects_untouched!(
        ops,
        d,
        "shape mismatch",
        ops.gemm(
            &av,
            &MatrixRef::new(&b, 32, 64),
            None,
            &mut MatrixMut::new(&mut d, 64, 64),
            1.0,
            0.0
        ),
        OpsError::Shape(_)
    );
    rejects_untouched!(
        ops,
        d,
        "zero size",
        ops.gemm(
            &MatrixRef::new(&a, 0, 64),
            &bv,
            None,
            &mut MatrixMut::new(&mut d, 0, 64),
            1.0,
            0.0
        ),
        OpsError::Empty(_)
    );
    // `usize::MAX / 2` rows: a typed overflow, not a wrapped stride.
    let huge = MatrixRef::new(&a, usize::MAX / 2, 64);
    rejects_untouched!(
        ops,
        d,
        "usize::MAX / 2 rows",
        ops.gemm(
            &huge,
            &bv,
            None,
            &mut MatrixMut::new(&mut d, usize::MAX / 2, 64),
            1.0,
            0.0
        ),
        OpsError::TooLarge { .. }
    );
    rejects_untouched!(
        ops,
        d,
        "batch 70000",
        ops.gemm(
            &av,
            &bv,
            None,
            &mut MatrixMut::new(&mut d, 64, 64).batched(70000, 4096),
            1.0,
            0.0
        ),
        OpsError::TooLarge { .. }
    );
    rejects_untouched!(
        ops,
        d,
        "leading dimension < row",
        ops.gemm(
            &av.strides(32, 1),
            &bv,
            None,
            &mut MatrixMut::new(&mut d, 64, 64),
            1.0,
            0.0
        ),
        OpsError::Strides { operand: "A", .. }
    );
    let dgeo = MatrixMut::new(&mut d, 64, 64).geo();
    // SAFETY: the raw views describe memory inside `d`'s and `a`'s allocations.
    let (alias, misaligned) = unsafe {
        (
            MatrixRef::from_raw(dgeo),
            // 63 rows one byte in: inside the buffer, off the 2-byte element grid.
            MatrixRef::from_raw(Geometry {
                ptr: av.geo().ptr + 1,
                len: av.geo().len - 1,
                rows: 63,
                ..av.geo()
            }),
        )
    };
    rejects_untouched!(
        ops,
        d,
        "output overlaps an input",
        ops.gemm(&alias, &bv, None, &mut MatrixMut::new(&mut d, 64, 64), 1.0, 0.0),
        OpsError::Strides { operand: "D", .. }
    );
    rejects_untouched!(
        ops,
        d,
        "misaligned A",
        ops.gemm(&misaligned, &bv, None, &mut MatrixMut::new(&mut d, 63, 64), 1.0, 0.0),
        OpsError::Alignment { operand: "A", .. }
    );
    rejects_untouched!(
        ops,
        d,
        "f32 inputs",
        ops.gemm(
            &MatrixRef::new(&f, 64, 64),
            &MatrixRef::new(&f, 64, 64),
            None,
            &mut MatrixMut::new(&mut d, 64, 64),
            1.0,
            0.0
        ),
        OpsError::DType(_)
    );
    for (alpha, beta) in [(f32::NAN, 0.0), (1.0, f32::INFINITY)] {
        rejects_untouched!(
            ops,
            d,
            format!("alpha {alpha}, beta {beta}"),
            ops.gemm(&av, &bv, Some(&av), &mut MatrixMut::new(&mut d, 64, 64), alpha, beta),
            OpsError::NonFinite { .. }
        );
    }
}

#[test]
fn scaled_mm_bad_inputs_leave_the_output_untouched() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let s = ops.gpu().stream().clone();
    let a: CudaSlice<i8> = s.alloc_zeros(64 * 64).unwrap();
    let b: CudaSlice<i8> = s.alloc_zeros(64 * 64).unwrap();
    let one: CudaSlice<f32> = s.clone_htod(&[1.0f32]).unwrap();
    let mut d: CudaSlice<bf16> = s.clone_htod(&vec![bf16::from_f32(SENTINEL); 64 * 64]).unwrap();
    let sc = || Scale::Scalar(VectorRef::new(&one, 1));
    let (av, bv) = (MatrixRef::new(&a, 64, 64), MatrixRef::new(&b, 64, 64).col_major());
    let b56 = MatrixRef::new(&b, 64, 56).col_major();
    rejects_untouched!(
        ops,
        d,
        "out leading dimension 60",
        ops.scaled_mm(
            &av,
            &b56,
            sc(),
            sc(),
            None,
            &mut MatrixMut::new(&mut d, 64, 56).strides(60, 1)
        ),
        OpsError::Alignment { operand: "out", .. }
    );
    let dgeo = MatrixMut::new(&mut d, 64, 64).geo();
    // SAFETY: inside `d`'s allocation (one element shorter, moved by one element).
    let mut shifted = unsafe {
        MatrixMut::from_raw(Geometry {
            ptr: dgeo.ptr + 2,
            len: dgeo.len - 1,
            cols: 56,
            ..dgeo
        })
    };
    rejects_untouched!(
        ops,
        d,
        "out pointer not 16-byte aligned",
        ops.scaled_mm(&av, &b56, sc(), sc(), None, &mut shifted),
        OpsError::Alignment { operand: "out", .. }
    );
    rejects_untouched!(
        ops,
        d,
        "shape mismatch",
        ops.scaled_mm(&av, &bv, sc(), sc(), None, &mut MatrixMut::new(&mut d, 32, 64)),
        OpsError::Shape(_)
    );
    // FP8 with a broadcast B: typed, on every architecture.
    let a8: CudaSlice<E4M3> = s.alloc_zeros(2 * 64 * 64).unwrap();
    let b8: CudaSlice<E4M3> = s.alloc_zeros(64 * 64).unwrap();
    let mut d2: CudaSlice<bf16> = s.clone_htod(&vec![bf16::from_f32(SENTINEL); 2 * 64 * 64]).unwrap();
    rejects_untouched!(
        ops,
        d2,
        "FP8 with a broadcast B",
        ops.scaled_mm(
            &MatrixRef::new(&a8, 64, 64).batched(2, 4096),
            &MatrixRef::new(&b8, 64, 64).col_major(),
            sc(),
            sc(),
            None,
            &mut MatrixMut::new(&mut d2, 64, 64).batched(2, 4096)
        ),
        OpsError::Strides { operand: "B", .. }
    );
    if ops.gpu().compute_capability() != (9, 0) {
        rejects_untouched!(
            ops,
            d,
            "FP8 off sm_90",
            ops.scaled_mm(
                &MatrixRef::new(&a8, 64, 64),
                &MatrixRef::new(&b8, 64, 64).col_major(),
                sc(),
                sc(),
                None,
                &mut MatrixMut::new(&mut d, 64, 64)
            ),
            OpsError::Arch(_)
        );
    }
}

/// Small integers: exact in bf16 and in f32 sums.
fn ints(len: usize, seed: u64) -> Vec<bf16> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bf16::from_f32((x % 5) as f32 - 2.0)
        })
        .collect()
}

/// `D = A @ B + beta * C` (TN: A row-major M x K, B column-major K x N, C and D
/// row-major), batched over `l` with the given batch strides (0: broadcast).
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[bf16],
    b: &[bf16],
    c: &[bf16],
    (m, n, k, l): (usize, usize, usize, usize),
    (sa, sb, sc): (usize, usize, usize),
    beta: f32,
) -> Vec<f32> {
    let mut d = vec![0.0f32; l * m * n];
    for p in 0..l {
        for i in 0..m {
            for j in 0..n {
                let dot: f32 = (0..k)
                    .map(|q| a[p * sa + i * k + q].to_f32() * b[p * sb + j * k + q].to_f32())
                    .sum();
                d[p * m * n + i * n + j] = dot + beta * c[p * sc + i * n + j].to_f32();
            }
        }
    }
    d
}

#[test]
fn batch_broadcast_gemms_run() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let s = ops.gpu().stream().clone();
    // TN bf16 shapes the SM90 kernel would take on sm_90 were nothing broadcast.
    let (m, n, k, l) = (256, 256, 128, 3);
    for (what, ba, bb, bc) in [
        ("A", true, false, false),
        ("B", false, true, false),
        ("C", false, false, true),
    ] {
        let (la, lb, lc) = (if ba { 1 } else { l }, if bb { 1 } else { l }, if bc { 1 } else { l });
        let (ha, hb, hc) = (ints(la * m * k, 1), ints(lb * n * k, 2), ints(lc * m * n, 3));
        let (da, db, dc) = (
            s.clone_htod(&ha).unwrap(),
            s.clone_htod(&hb).unwrap(),
            s.clone_htod(&hc).unwrap(),
        );
        let mut dd: CudaSlice<bf16> = s.clone_htod(&vec![bf16::NAN; l * m * n]).unwrap();
        let stride = |broadcast: bool, span: usize| if broadcast { 0 } else { span };
        let av = MatrixRef::new(&da, m, k).batched(la, (m * k) as i64);
        let bv = MatrixRef::new(&db, k, n).col_major().batched(lb, (n * k) as i64);
        let cv = MatrixRef::new(&dc, m, n).batched(lc, (m * n) as i64);
        ops.gemm(
            &av,
            &bv,
            Some(&cv),
            &mut MatrixMut::new(&mut dd, m, n).batched(l, (m * n) as i64),
            1.0,
            0.5,
        )
        .unwrap_or_else(|e| panic!("{what} broadcast: {e}"));
        let got = s.clone_dtoh(&dd).unwrap();
        let want = reference(
            &ha,
            &hb,
            &hc,
            (m, n, k, l),
            (stride(ba, m * k), stride(bb, n * k), stride(bc, m * n)),
            0.5,
        );
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let g = g.to_f32();
            assert!(
                (g - w).abs() <= 1e-2 * w.abs().max(1.0),
                "{what} broadcast: D[{i}] = {g}, want {w}"
            );
        }
    }
}

#[test]
fn one_ops_shared_by_8_threads_builds_each_kernel_once() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let (m, n, k) = (128, 128, 64);
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let ops = &ops;
                scope.spawn(move || -> Result<(), String> {
                    let s = ops.gpu().stream().clone();
                    let (ha, hb) = (ints(m * k, 10 + t), ints(k * n, 20 + t));
                    let da = s.clone_htod(&ha).map_err(|e| e.to_string())?;
                    let db = s.clone_htod(&hb).map_err(|e| e.to_string())?;
                    let mut dd: CudaSlice<f32> = s.alloc_zeros(m * n).map_err(|e| e.to_string())?;
                    ops.gemm(
                        &MatrixRef::new(&da, m, k),
                        &MatrixRef::new(&db, k, n),
                        None,
                        &mut MatrixMut::new(&mut dd, m, n),
                        1.0,
                        0.0,
                    )
                    .map_err(|e| e.to_string())?;
                    let got = s.clone_dtoh(&dd).map_err(|e| e.to_string())?;
                    for i in 0..m {
                        for j in 0..n {
                            let want: f32 = (0..k).map(|q| ha[i * k + q].to_f32() * hb[q * n + j].to_f32()).sum();
                            if got[i * n + j] != want {
                                return Err(format!("thread {t}: D({i},{j}) = {}, want {want}", got[i * n + j]));
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        r.unwrap();
    }
    assert_eq!(ops.kernels_built(), 1, "8 threads, one shape: one kernel build");
}

#[test]
fn one_ops_shared_by_8_threads_builds_the_scaled_mm_kernel_once() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let (m, n, k) = (128, 128, 64);
    let run = |t: u64| -> Result<(), String> {
        let s = ops.gpu().stream().clone();
        let e = |e: rcute_ops::cudarc::driver::DriverError| e.to_string();
        let ha: Vec<i8> = ints(m * k, 30 + t).iter().map(|x| x.to_f32() as i8).collect();
        let hb: Vec<i8> = ints(n * k, 40 + t).iter().map(|x| x.to_f32() as i8).collect();
        let (da, db) = (s.clone_htod(&ha).map_err(e)?, s.clone_htod(&hb).map_err(e)?);
        let one = s.clone_htod(&[1.0f32]).map_err(e)?;
        let mut dd: CudaSlice<bf16> = s.alloc_zeros(m * n).map_err(e)?;
        let sc = || Scale::Scalar(VectorRef::new(&one, 1));
        ops.scaled_mm(
            &MatrixRef::new(&da, m, k),
            &MatrixRef::new(&db, k, n).col_major(),
            sc(),
            sc(),
            None,
            &mut MatrixMut::new(&mut dd, m, n),
        )
        .map_err(|x| x.to_string())?;
        let got = s.clone_dtoh(&dd).map_err(e)?;
        for i in 0..m {
            for j in 0..n {
                // B column-major: B(q, j) at j * k + q.
                let want: i32 = (0..k).map(|q| ha[i * k + q] as i32 * hb[j * k + q] as i32).sum();
                if got[i * n + j].to_f32() != want as f32 {
                    return Err(format!("thread {t}: out({i},{j}) = {}, want {want}", got[i * n + j]));
                }
            }
        }
        Ok(())
    };
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..8u64).map(|t| scope.spawn(move || run(t))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        r.unwrap();
    }
    assert_eq!(ops.kernels_built(), 1, "8 threads, one shape: one kernel build");
}
