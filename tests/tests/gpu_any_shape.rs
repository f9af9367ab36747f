//! GPU tests of `Ops::gemm` on problems whose leading dimensions, K, pointers or batch
//! strides are not multiples of 16 bytes (the narrow-vector SM80-class kernel: 8-, 4- and
//! 2-byte copies): 3x5x7, 129x257x65, a row-major B of 70 columns, odd leading
//! dimensions, pointers 2, 4 and 8 bytes off the 16-byte grid, batched problems with odd
//! batch strides, every operand major, C with beta, and f32 output.
//!
//! Outputs are poisoned (NaN) first, and padding between rows / batches of D is checked to
//! stay poisoned (untouched); every element of D is compared with a float64 CPU reference
//! (relative Frobenius error < 1e-2, no NaN).
//!
//! On a machine without a GPU it prints why it skips, and fails under RCUTE_REQUIRE_GPU=1.

mod common;

use common::Rng;
use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::gemm::copy_bytes;
use rcute_ops::{validate, Geometry, MatrixMut, MatrixRef, Ops};

/// One problem: sizes, majors (A row-major, B column-major, D row-major when true), leading
/// dimensions (elements), element offsets of A and B from their buffers' starts, batch.
#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    l: usize,
    a_row: bool,
    b_col: bool,
    d_row: bool,
    lda: usize,
    ldb: usize,
    ldd: usize,
    a_off: usize,
    b_off: usize,
    beta: f32,
    f32_out: bool,
}

impl Case {
    fn new(m: usize, n: usize, k: usize) -> Case {
        Case {
            m,
            n,
            k,
            l: 1,
            a_row: true,
            b_col: true,
            d_row: true,
            lda: k,
            ldb: k,
            ldd: n,
            a_off: 0,
            b_off: 0,
            beta: 0.0,
            f32_out: false,
        }
    }
}

/// Offset of element (r, c) of batch `b` of a matrix with the given order, leading
/// dimension and batch stride.
fn at(row_major: bool, ld: usize, bs: usize, r: usize, c: usize, b: usize) -> usize {
    b * bs + if row_major { r * ld + c } else { c * ld + r }
}

fn span(row_major: bool, ld: usize, rows: usize, cols: usize) -> usize {
    if row_major {
        (rows - 1) * ld + cols
    } else {
        (cols - 1) * ld + rows
    }
}

fn run_case(ops: &Ops, rng: &mut Rng, cs: Case) -> Result<(), String> {
    let Case { m, n, k, l, .. } = cs;
    let s = ops.stream().clone();
    let e = |x: cudarc::driver::DriverError| x.to_string();
    // Odd batch strides: one matrix plus 3 elements.
    let bsa = span(cs.a_row, cs.lda, m, k) + 3;
    let bsb = span(cs.b_col, cs.ldb, n, k) + 3;
    let bsd = span(cs.d_row, cs.ldd, m, n) + 3;
    let (a_len, b_len, d_len) = (cs.a_off + l * bsa, cs.b_off + l * bsb, l * bsd);
    let mut rnd = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| bf16::from_f32((rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0).to_f32())
            .collect()
    };
    let (ha, hb, hc) = (rnd(a_len), rnd(b_len), rnd(d_len));
    let to16 = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
    let da = s.clone_htod(&to16(&ha)).map_err(e)?;
    let db = s.clone_htod(&to16(&hb)).map_err(e)?;
    let view = |g: Geometry, off: usize, ld: usize, bs: usize, row: bool, rows: usize, cols: usize| Geometry {
        ptr: g.ptr + (off * 2) as u64,
        len: g.len - off,
        rows,
        cols,
        batch: l,
        row_stride: if row { ld as i64 } else { 1 },
        col_stride: if row { 1 } else { ld as i64 },
        batch_stride: bs as i64,
        ..g
    };
    let ga = view(MatrixRef::new(&da, 1, 1).geo(), cs.a_off, cs.lda, bsa, cs.a_row, m, k);
    let gb = view(MatrixRef::new(&db, 1, 1).geo(), cs.b_off, cs.ldb, bsb, !cs.b_col, k, n);
    // The reference, in f64.
    let mut want = vec![0f64; l * m * n];
    for b in 0..l {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f64;
                for p in 0..k {
                    let x = ha[cs.a_off + at(cs.a_row, cs.lda, bsa, i, p, b)] as f64;
                    let y = hb[cs.b_off + at(!cs.b_col, cs.ldb, bsb, p, j, b)] as f64;
                    acc += x * y;
                }
                let c = hc[at(cs.d_row, cs.ldd, bsd, i, j, b)] as f64;
                want[(b * m + i) * n + j] = 1.5 * acc + cs.beta as f64 * c;
            }
        }
    }
    // D (and C, in place) poisoned except where C supplies beta's operand.
    let mut init: Vec<f32> = vec![f32::NAN; d_len];
    if cs.beta != 0.0 {
        for b in 0..l {
            for i in 0..m {
                for j in 0..n {
                    let o = at(cs.d_row, cs.ldd, bsd, i, j, b);
                    init[o] = hc[o];
                }
            }
        }
    }
    let got: Vec<f64> = if cs.f32_out {
        let dd = s.clone_htod(&init).map_err(e)?;
        let gd = view(MatrixRef::new(&dd, 1, 1).geo(), 0, cs.ldd, bsd, cs.d_row, m, n);
        launch(ops, &ga, &gb, gd, cs)?;
        s.clone_dtoh(&dd).map_err(e)?.into_iter().map(f64::from).collect()
    } else {
        let dd = s.clone_htod(&to16(&init)).map_err(e)?;
        let gd = view(MatrixRef::new(&dd, 1, 1).geo(), 0, cs.ldd, bsd, cs.d_row, m, n);
        launch(ops, &ga, &gb, gd, cs)?;
        s.clone_dtoh(&dd).map_err(e)?.into_iter().map(|x| x.to_f64()).collect()
    };
    // Every element written and right; the padding untouched.
    let (mut err, mut norm) = (0f64, 0f64);
    let mut inside = vec![false; d_len];
    for b in 0..l {
        for i in 0..m {
            for j in 0..n {
                let o = at(cs.d_row, cs.ldd, bsd, i, j, b);
                inside[o] = true;
                let (g, w) = (got[o], want[(b * m + i) * n + j]);
                if g.is_nan() {
                    return Err(format!("D[{b},{i},{j}] not written"));
                }
                err += (g - w) * (g - w);
                norm += w * w;
            }
        }
    }
    if let Some(o) = (0..d_len).find(|&o| !inside[o] && !got[o].is_nan()) {
        return Err(format!("padding element {o} of D was written"));
    }
    let rel = (err / norm.max(1e-30)).sqrt();
    if rel >= 1e-2 {
        return Err(format!("relative error {rel}"));
    }
    Ok(())
}

fn launch(ops: &Ops, ga: &Geometry, gb: &Geometry, gd: Geometry, cs: Case) -> Result<(), String> {
    // SAFETY: the geometries lie inside the buffers `run_case` allocated, which outlive the
    // launch (it synchronizes by reading D back on the same stream).
    let (a, b, mut d, c) = unsafe {
        (
            MatrixRef::from_raw(*ga),
            MatrixRef::from_raw(*gb),
            MatrixMut::from_raw(gd),
            MatrixRef::from_raw(gd),
        )
    };
    let c = (cs.beta != 0.0).then_some(&c);
    let p = validate(&a, &b, c, &d, 1.5, cs.beta).map_err(|e| format!("validate: {e}"))?;
    let width = copy_bytes(&p);
    eprintln!("{cs:?}: {width}-byte copies");
    ops.gemm(&a, &b, c, &mut d, 1.5, cs.beta)
        .map_err(|e| format!("gemm: {e}"))
}

#[test]
fn gemm_takes_any_shape_and_leading_dimension() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("gemm_takes_any_shape_and_leading_dimension");
    let mut cases = vec![
        Case::new(3, 7, 5),
        Case::new(129, 257, 65),
        // A row-major B of 70 columns.
        Case {
            b_col: false,
            ldb: 70,
            ..Case::new(96, 70, 64)
        },
        Case {
            lda: 67,
            ldb: 131,
            ldd: 101,
            ..Case::new(100, 77, 61)
        },
        // Pointers 2, 4 and 8 bytes off the 16-byte grid (with 16-byte strides).
        Case {
            a_off: 1,
            ..Case::new(64, 64, 64)
        },
        Case {
            b_off: 2,
            ..Case::new(64, 64, 64)
        },
        Case {
            a_off: 4,
            b_off: 4,
            ..Case::new(128, 64, 256)
        },
        // K-major B with K = 1 and M = N = 1.
        Case::new(1, 1, 1),
        Case::new(17, 9, 1),
        // C with beta, in place; f32 output; column-major D.
        Case {
            beta: 0.5,
            ..Case::new(33, 45, 27)
        },
        Case {
            f32_out: true,
            d_row: false,
            ldd: 35,
            ..Case::new(33, 45, 27)
        },
        // Large enough for split-K and several CTAs.
        Case {
            lda: 2051,
            ..Case::new(48, 200, 2049)
        },
    ];
    // Every operand major with odd leading dimensions, batched with odd batch strides.
    for (a_row, b_col) in [(true, true), (false, false), (true, false), (false, true)] {
        let (m, n, k) = (37, 29, 23);
        cases.push(Case {
            l: 3,
            a_row,
            b_col,
            lda: if a_row { k + 2 } else { m + 1 },
            ldb: if b_col { k + 1 } else { n + 2 },
            ..Case::new(m, n, k)
        });
    }
    let mut failures = Vec::new();
    for cs in cases {
        if let Err(e) = run_case(&ops, &mut rng, cs) {
            failures.push(format!("{cs:?}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// INT8 `scaled_mm` with even K, leading dimensions and pointers off the 16-byte grid
/// (the narrow-vector kernel), per-token / per-channel scales and a bias, against a
/// float64 reference of the exact integer products.
#[test]
fn scaled_mm_takes_even_leading_dimensions() {
    use rcute_ops::scaled_mm::scaled_mm_copy_bytes;
    use rcute_ops::{validate_scaled_mm, Scale, VectorRef};
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let s = ops.stream().clone();
    let mut rng = Rng::for_test("scaled_mm_takes_even_leading_dimensions");
    // (m, n, k, lda, ldb, a_off, b_off): offsets in elements (bytes) from the buffers.
    let cases = [
        (3, 8, 2, 2, 2, 0, 0),
        (77, 40, 30, 34, 38, 2, 0),
        (64, 64, 64, 66, 64, 0, 4),
        (129, 136, 250, 250, 252, 8, 2),
    ];
    let mut failures = Vec::new();
    for (m, n, k, lda, ldb, a_off, b_off) in cases {
        let ha: Vec<i8> = (0..a_off + m * lda).map(|_| (rng.next_u32() % 255) as i8).collect();
        let hb: Vec<i8> = (0..b_off + n * ldb).map(|_| (rng.next_u32() % 255) as i8).collect();
        let sa: Vec<f32> = (0..m).map(|_| 1e-3 * (1 + rng.next_u32() % 100) as f32).collect();
        let sb: Vec<f32> = (0..n).map(|_| 1e-3 * (1 + rng.next_u32() % 100) as f32).collect();
        let bias: Vec<bf16> = (0..n)
            .map(|_| bf16::from_f32((rng.next_u32() % 100) as f32 / 10.0))
            .collect();
        let (da, db) = (s.clone_htod(&ha).unwrap(), s.clone_htod(&hb).unwrap());
        let (dsa, dsb, dbias) = (
            s.clone_htod(&sa).unwrap(),
            s.clone_htod(&sb).unwrap(),
            s.clone_htod(&bias).unwrap(),
        );
        let mut out = s.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
        let shift = |g: Geometry, off: usize, rows: usize, cols: usize, row_stride: i64, col_stride: i64| Geometry {
            ptr: g.ptr + off as u64,
            len: g.len - off,
            rows,
            cols,
            row_stride,
            col_stride,
            ..g
        };
        // SAFETY: the shifted views lie inside `da` / `db`, which outlive the call.
        let (a, b) = unsafe {
            (
                MatrixRef::from_raw(shift(MatrixRef::new(&da, 1, 1).geo(), a_off, m, k, lda as i64, 1)),
                MatrixRef::from_raw(shift(MatrixRef::new(&db, 1, 1).geo(), b_off, k, n, 1, ldb as i64)),
            )
        };
        let (vsa, vsb, vbias) = (
            VectorRef::new(&dsa, m),
            VectorRef::new(&dsb, n),
            VectorRef::new(&dbias, n),
        );
        let mut ov = MatrixMut::new(&mut out, m, n);
        let width = scaled_mm_copy_bytes(
            &validate_scaled_mm(&a, &b, Scale::auto(vsa), Scale::auto(vsb), Some(&vbias), &ov).unwrap(),
        );
        eprintln!("scaled_mm {m}x{n}x{k} lda {lda} ldb {ldb} offsets {a_off}/{b_off}: {width}-byte copies");
        if let Err(e) = ops.scaled_mm(&a, &b, Scale::auto(vsa), Scale::auto(vsb), Some(&vbias), &mut ov) {
            failures.push(format!("{m}x{n}x{k}: {e}"));
            continue;
        }
        let got = s.clone_dtoh(&out).unwrap();
        let (mut err, mut norm) = (0f64, 0f64);
        for i in 0..m {
            for j in 0..n {
                let acc: i64 = (0..k)
                    .map(|p| ha[a_off + i * lda + p] as i64 * hb[b_off + j * ldb + p] as i64)
                    .sum();
                let want = acc as f64 * sa[i] as f64 * sb[j] as f64 + bias[j].to_f64();
                let g = got[i * n + j].to_f64();
                if g.is_nan() {
                    failures.push(format!("{m}x{n}x{k}: out[{i},{j}] not written"));
                }
                err += (g - want) * (g - want);
                norm += want * want;
            }
        }
        let rel = (err / norm.max(1e-30)).sqrt();
        if rel >= 1e-2 {
            failures.push(format!("{m}x{n}x{k}: relative error {rel}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
