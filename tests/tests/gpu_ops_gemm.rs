//! GPU correctness suite of `rcute_ops::Ops::gemm` (the Ampere-class path): >= 200 random
//! shapes including non-multiples of every tile and M, N or K = 1, all four operand
//! majors, both output orders, batched problems, alpha/beta with C, and split-K
//! (selected automatically for small M and large K). Outputs are poisoned (NaN) before
//! every run; every element must be written and match a float64 CPU reference within
//! bf16 rounding (relative Frobenius error < 1e-2, no NaN).
//!
//! On a machine without a GPU it prints why it skips, and fails under RCUTE_REQUIRE_GPU=1.

mod common;

use common::Rng;
use cudarc::driver::CudaSlice;
use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::{Geometry, MatrixMut, MatrixRef, Ops, OpsError};

#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    l: usize,
    a_row: bool,
    b_col: bool,
    d_row: bool,
    beta: f32,
}

/// Leading dimension padded to 8 elements (16 bytes) as the vector loads require.
fn ld8(x: usize) -> usize {
    x.div_ceil(8) * 8
}

/// Element (r, c, batch) of a matrix stored with the given order and leading dimension.
fn at(row_major: bool, ld: usize, rows: usize, cols: usize, r: usize, c: usize, b: usize) -> usize {
    let span = if row_major { rows * ld } else { cols * ld };
    b * span + if row_major { r * ld + c } else { c * ld + r }
}

fn run_case(ops: &Ops, rng: &mut Rng, cs: Case) -> Result<(), String> {
    let Case {
        m,
        n,
        k,
        l,
        a_row,
        b_col,
        d_row,
        beta,
    } = cs;
    let stream = ops.gpu().stream().clone();
    let lda = if a_row { ld8(k) } else { ld8(m) };
    let ldb = if b_col { ld8(k) } else { ld8(n) };
    let ldd = if d_row { ld8(n) } else { ld8(m) };
    let a_len = l * if a_row { m * lda } else { k * lda };
    let b_len = l * if b_col { n * ldb } else { k * ldb };
    let d_len = l * if d_row { m * ldd } else { n * ldd };
    let mut rnd = |len: usize| -> Vec<bf16> {
        (0..len)
            .map(|_| bf16::from_f32((rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0))
            .collect()
    };
    let ha = rnd(a_len);
    let hb = rnd(b_len);
    let hc = rnd(d_len);
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let da: CudaSlice<bf16> = stream.clone_htod(&ha).map_err(e)?;
    let db: CudaSlice<bf16> = stream.clone_htod(&hb).map_err(e)?;
    let dc: CudaSlice<bf16> = stream.clone_htod(&hc).map_err(e)?;
    let poison = vec![bf16::NAN; d_len];
    let mut dd: CudaSlice<bf16> = stream.clone_htod(&poison).map_err(e)?;
    let alpha = 1.5f32;
    let view_a = {
        let v = MatrixRef::new(&da, m, k).batched(l, (a_len / l) as i64);
        if a_row {
            v.strides(lda as i64, 1)
        } else {
            v.strides(1, lda as i64)
        }
    };
    let view_b = {
        let v = MatrixRef::new(&db, k, n).batched(l, (b_len / l) as i64);
        if b_col {
            v.strides(1, ldb as i64)
        } else {
            v.strides(ldb as i64, 1)
        }
    };
    let view_c = {
        let v = MatrixRef::new(&dc, m, n).batched(l, (d_len / l) as i64);
        if d_row {
            v.strides(ldd as i64, 1)
        } else {
            v.strides(1, ldd as i64)
        }
    };
    {
        let mut view_d = MatrixMut::new(&mut dd, m, n).batched(l, (d_len / l) as i64);
        view_d = if d_row {
            view_d.strides(ldd as i64, 1)
        } else {
            view_d.strides(1, ldd as i64)
        };
        let c = if beta != 0.0 { Some(&view_c) } else { None };
        ops.gemm(&view_a, &view_b, c, &mut view_d, alpha, beta)
            .map_err(|x| format!("{cs:?}: {x}"))?;
    }
    stream.synchronize().map_err(e)?;
    let got = stream.clone_dtoh(&dd).map_err(e)?;
    let (mut num, mut den) = (0f64, 0f64);
    for bi in 0..l {
        for r in 0..m {
            for c in 0..n {
                let mut acc = 0f64;
                for kk in 0..k {
                    let x = ha[at(a_row, lda, m, k, r, kk, bi)].to_f64();
                    let y = hb[at(!b_col, ldb, k, n, kk, c, bi)].to_f64();
                    acc += x * y;
                }
                let idx = at(d_row, ldd, m, n, r, c, bi);
                let want = alpha as f64 * acc + beta as f64 * hc[idx].to_f64();
                let g = got[idx].to_f64();
                if !g.is_finite() {
                    return Err(format!("{cs:?}: D[{bi}][{r}][{c}] not written (or NaN)"));
                }
                num += (g - want).powi(2);
                den += want.powi(2);
            }
        }
    }
    let rel = (num / den.max(1e-30)).sqrt();
    if rel >= 1e-2 {
        return Err(format!("{cs:?}: relative error {rel:.3e}"));
    }
    Ok(())
}

fn cases(rng: &mut Rng) -> Vec<Case> {
    let mut v = Vec::new();
    // Edge extents: 1 in each of M, N, K, and tiny/odd shapes.
    for &(m, n, k) in &[
        (1usize, 1usize, 1usize),
        (1, 77, 300),
        (77, 1, 304),
        (65, 33, 1),
        (1, 4096, 64),
        (16, 14336 / 8, 512),
        (129, 257, 31),
    ] {
        for order in 0..4 {
            let (a_row, b_col) = (order & 1 == 0, order & 2 == 0);
            // Odd K only where K is not the contiguous dimension of A or B.
            let k = if (a_row || b_col) && k % 8 != 0 {
                k.div_ceil(8) * 8
            } else {
                k
            };
            v.push(Case {
                m,
                n,
                k,
                l: 1,
                a_row,
                b_col,
                d_row: true,
                beta: 0.0,
            });
        }
    }
    // Random shapes across every tile family, all majors, both D orders, batches, beta.
    while v.len() < 220 {
        let big = rng.range(0, 4) == 0;
        let m = if rng.range(0, 3) == 0 {
            rng.range(1, 17)
        } else {
            rng.range(1, if big { 400 } else { 200 })
        } as usize;
        let n = rng.range(1, if big { 400 } else { 200 }) as usize;
        let mut k = rng.range(1, if big { 700 } else { 300 }) as usize;
        let l = if rng.range(0, 5) == 0 {
            rng.range(2, 4) as usize
        } else {
            1
        };
        let o = rng.range(0, 8);
        // K contiguous in A (row-major) or B (column-major) needs K % 8 == 0 (16-byte
        // vectors along K); with both operands MN-major any K is allowed.
        if o & 1 == 0 || o & 2 == 0 {
            k = k.div_ceil(8) * 8;
        }
        let beta = if rng.range(0, 2) == 0 { 0.0 } else { -0.5 };
        v.push(Case {
            m,
            n,
            k,
            l,
            a_row: o & 1 == 0,
            b_col: o & 2 == 0,
            d_row: o & 4 == 0,
            beta,
        });
    }
    v
}

#[test]
fn gemm_matches_f64_reference_on_random_shapes() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("gpu_ops_gemm");
    let cases = cases(&mut rng);
    assert!(cases.len() >= 200);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|&c| run_case(&ops, &mut rng, c).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn bad_inputs_are_typed_errors() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let stream = ops.gpu().stream().clone();
    let a: CudaSlice<bf16> = stream.alloc_zeros(64 * 64).unwrap();
    let b: CudaSlice<bf16> = stream.alloc_zeros(64 * 64).unwrap();
    let mut d: CudaSlice<bf16> = stream.alloc_zeros(64 * 64).unwrap();
    let mut d32: CudaSlice<f32> = stream.alloc_zeros(64 * 64).unwrap();
    let av = MatrixRef::new(&a, 64, 64);
    // Shape mismatch.
    let r = ops.gemm(
        &av,
        &MatrixRef::new(&b, 32, 64),
        None,
        &mut MatrixMut::new(&mut d, 64, 64),
        1.0,
        0.0,
    );
    assert!(matches!(r, Err(OpsError::Shape(_))), "{r:?}");
    // Out of bounds: a 128x64 view of a 64x64 buffer.
    let r = ops.gemm(
        &MatrixRef::new(&a, 128, 64),
        &MatrixRef::new(&b, 64, 64),
        None,
        &mut MatrixMut::new(&mut d, 128, 32),
        1.0,
        0.0,
    );
    assert!(
        matches!(r, Err(OpsError::OutOfBounds { .. }) | Err(OpsError::Shape(_))),
        "{r:?}"
    );
    // K contiguous but not a multiple of 8, and a leading dimension of 3 elements: valid
    // (the narrow-vector kernel runs them; `gpu_any_shape` checks the results). A pointer
    // off its 2-byte element stays an alignment error.
    let r = ops.gemm(
        &MatrixRef::new(&a, 8, 7).strides(8, 1),
        &MatrixRef::new(&b, 7, 8).strides(1, 8),
        None,
        &mut MatrixMut::new(&mut d, 8, 8),
        1.0,
        0.0,
    );
    assert!(r.is_ok(), "{r:?}");
    let r = ops.gemm(
        &MatrixRef::new(&a, 8, 3),
        &MatrixRef::new(&b, 3, 8).col_major(),
        None,
        &mut MatrixMut::new(&mut d, 8, 8),
        1.0,
        0.0,
    );
    assert!(r.is_ok(), "{r:?}");
    let ag = MatrixRef::new(&a, 8, 8).geo();
    // SAFETY: one byte into `a`'s allocation; rejected before any launch.
    let odd = unsafe {
        MatrixRef::from_raw(rcute_ops::Geometry {
            ptr: ag.ptr + 1,
            len: ag.len - 1,
            ..ag
        })
    };
    let r = ops.gemm(
        &odd,
        &MatrixRef::new(&b, 8, 8),
        None,
        &mut MatrixMut::new(&mut d, 8, 8),
        1.0,
        0.0,
    );
    assert!(matches!(r, Err(OpsError::Alignment { operand: "A", .. })), "{r:?}");
    // Empty problem.
    let r = ops.gemm(
        &MatrixRef::new(&a, 0, 64),
        &MatrixRef::new(&b, 64, 64),
        None,
        &mut MatrixMut::new(&mut d, 0, 64),
        1.0,
        0.0,
    );
    assert!(matches!(r, Err(OpsError::Empty(_))), "{r:?}");
    // beta without C.
    let r = ops.gemm(
        &av,
        &MatrixRef::new(&b, 64, 64),
        None,
        &mut MatrixMut::new(&mut d, 64, 64),
        1.0,
        1.0,
    );
    assert!(matches!(r, Err(OpsError::Shape(_))), "{r:?}");
    // f32 inputs are not a supported combination.
    let af: CudaSlice<f32> = stream.alloc_zeros(64 * 64).unwrap();
    let r = ops.gemm(
        &MatrixRef::new(&af, 64, 64),
        &MatrixRef::new(&af, 64, 64),
        None,
        &mut MatrixMut::new(&mut d32, 64, 64),
        1.0,
        0.0,
    );
    assert!(matches!(r, Err(OpsError::DType(_))), "{r:?}");
    // Overlapping output and input.
    // SAFETY: the raw view describes memory inside `a`'s allocation.
    let alias = unsafe { MatrixMut::from_raw(Geometry { ..av.geo() }) };
    let mut alias = alias;
    let r = ops.gemm(&av, &MatrixRef::new(&b, 64, 64), None, &mut alias, 1.0, 0.0);
    assert!(matches!(r, Err(OpsError::Strides { .. })), "{r:?}");
}
