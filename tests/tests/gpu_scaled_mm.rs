//! GPU verification of the INT8 scaled GEMM (the s8 kernels of `rcute_kernel::gemm_sm80` and
//! `rcute_ops::Ops::scaled_mm`).
//!
//! * Exact integer accumulation: the generated kernel with a fusion that also stores the
//!   accumulator to an aux `s32` matrix (`acc.store("acc_out", s32)`, the debug path of the
//!   epilogue visitor tree) must reproduce a CPU `i64` reference *exactly* (the data keep
//!   `|acc| < 2^24`, where `float(acc)` is exact), for ragged shapes (M = 1, odd M, N a
//!   multiple of 8 but not of the tile, K = 16), padded leading dimensions, batches, serial
//!   and parallel split-K (the partials are summed as `s32` before the fusion), on the
//!   Ampere-class kernel and on the Turing kernel (its register-staged pipeline and
//!   `m8n8k16` composition run on any newer GPU too). The scaled output must be within one
//!   output rounding step of `f64(acc) * a_scale * b_scale`.
//! * `Ops::scaled_mm`: every combination of scalar / per-row `a_scale`, scalar / per-column
//!   `b_scale`, bias or none, f16 and bf16 output, 2-D and batched 3-D (also a broadcast
//!   B), ragged shapes, automatic selection (split-K on small M) and forced split-K modes
//!   and the Turing kernel: every output element within one rounding step of
//!   `cast(f64(acc_i64) * a_scale * b_scale + bias)` (plus the f32 rounding of the
//!   epilogue's arithmetic, `4 eps_f32 (|product| + |bias|)`, which shows when the bias
//!   cancels the product); outputs are poisoned (NaN) first.
//! * Typed errors for bad inputs through `Ops::scaled_mm`.
//!
//! Skips with a printed reason without a GPU (`RCUTE_REQUIRE_GPU=1` makes that a failure).
//! `RCUTE_SEED` fixes the random seed, which is printed.

mod common;

use common::Rng;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::{bf16, f16};
use rcute_atom::Element;
use rcute_collective::{Fusion, FusionArgs, Node};
use rcute_kernel::gemm_sm80::{generate, launch_fused, GemmArgs, GemmSm80Config, ScaleKind, SplitKMode};
use rcute_kernel::testing::gpu_for_test;
use rcute_kernel::{Arch, CompileOptions, Gpu, KernelCache};
use rcute_ops::scaled_mm::ScaledMmTarget;
use rcute_ops::select::ScaledMmSelection;
use rcute_ops::{validate_scaled_mm, DType, MatrixMut, MatrixRef, Ops, OpsError, Scale, VectorRef};
use std::sync::Arc;

fn e(x: cudarc::driver::DriverError) -> String {
    x.to_string()
}

fn random_i8(rng: &mut Rng, len: usize) -> Vec<i8> {
    (0..len).map(|_| rng.next_u32() as u8 as i8).collect()
}

/// Uniform in `[lo, hi)`.
fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (rng.next_u32() as f64 / 4294967296.0) * (hi - lo)
}

/// The spacing of `ty` (f16 or bf16) at magnitude `x`: one rounding step.
fn step(ty: DType, x: f64) -> f64 {
    let (mbits, emin) = if ty == DType::F16 { (10, -14) } else { (7, -126) };
    let e = if x == 0.0 {
        emin
    } else {
        (x.abs().log2().floor() as i32).max(emin)
    };
    2f64.powi(e - mbits)
}

/// `acc[l][i][j]` in i64 for A `(m,k)` at `a[l*sa + i*lda + k]`, B `(k,n)` at
/// `b[l*sb + j*ldb + k]`.
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[i8],
    b: &[i8],
    (m, n, k, l): (usize, usize, usize, usize),
    (lda, ldb): (usize, usize),
    (sa, sb): (usize, usize),
) -> Vec<i64> {
    let mut out = vec![0i64; m * n * l];
    for bi in 0..l {
        for i in 0..m {
            let ar = &a[bi * sa + i * lda..][..k];
            for j in 0..n {
                let br = &b[bi * sb + j * ldb..][..k];
                out[(bi * m + i) * n + j] = ar.iter().zip(br).map(|(&x, &y)| x as i64 * y as i64).sum();
            }
        }
    }
    out
}

fn upload<T: cudarc::driver::DeviceRepr>(s: &Arc<CudaStream>, v: &[T]) -> Result<CudaSlice<T>, String> {
    s.clone_htod(v).map_err(e)
}

// ---------------------------------------------------------------------------------------
// Kernel level: exact accumulation through an aux store of the accumulator.

#[derive(Clone, Copy, Debug)]
struct KCase {
    m: usize,
    n: usize,
    k: usize,
    l: usize,
    pad: usize,
    split_k: u32,
    serial: bool,
}

struct Exact {
    g: rcute_kernel::gemm_sm80::GeneratedGemm,
    main: rcute_kernel::Function,
    reduce: rcute_kernel::Function,
    semaphores: CudaSlice<i32>,
}

fn exact_kernel(gpu: &Gpu, tile: [i64; 3], warps: [i64; 2], turing: bool) -> Exact {
    // a_scale[m] * (b_scale[n] * store(acc_out:s32, acc)): scaled_mm with the accumulator
    // also written out.
    let root = Node::col_broadcast("a_scale", Element::F32, false)
        * (Node::row_broadcast("b_scale", Element::F32, false) * Node::acc().store("acc_out", Element::S32));
    let f = Fusion::new(root).unwrap().with_name("scaledmm_rowcol_accout").unwrap();
    let mut cfg = GemmSm80Config::scaled_mm(Element::F16, ScaleKind::PerRow, ScaleKind::PerCol, false, tile, warps)
        .unwrap()
        .with_fusion(f);
    if turing {
        cfg = cfg.turing();
    }
    let g = generate(&cfg).unwrap_or_else(|x| panic!("{cfg:?}: {x}"));
    let arch = gpu.arch().unwrap_or(Arch::Sm80);
    let compiled = KernelCache::global()
        .get_or_compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(arch))
        .unwrap_or_else(|x| panic!("{}: {x}", g.name));
    let module = gpu.load(&compiled).expect("load");
    let main = module.function(&g.name).expect("main");
    let reduce = module.function(&g.reduce_name).expect("reduce");
    let r = main.resources();
    eprintln!("{}: {} registers, {} B dynamic smem", g.name, r.registers, g.smem_bytes);
    let semaphores = gpu.stream().alloc_zeros::<i32>(1 << 14).expect("semaphores");
    Exact {
        g,
        main,
        reduce,
        semaphores,
    }
}

fn run_exact(gpu: &Gpu, kx: &Exact, c: KCase, rng: &mut Rng) -> Result<(), String> {
    let s = gpu.stream().clone();
    let KCase { m, n, k, l, pad, .. } = c;
    let (lda, ldb, ldd) = (k + 16 * pad, k + 16 * pad, n + pad);
    let (sa, sb, sd) = (m * lda, n * ldb, m * ldd + 8 * pad);
    let ha = random_i8(rng, l * sa);
    let hb = random_i8(rng, l * sb);
    let hsa: Vec<f32> = (0..m).map(|_| uniform(rng, 0.5, 1.5) as f32 / 128.0).collect();
    let hsb: Vec<f32> = (0..n).map(|_| uniform(rng, 0.5, 1.5) as f32 / 128.0).collect();
    let want = reference(&ha, &hb, (m, n, k, l), (lda, ldb), (sa, sb));
    assert!(
        want.iter().all(|x| x.abs() < 1 << 24),
        "test data keep float(acc) exact"
    );
    let da = upload(&s, &ha)?;
    let db = upload(&s, &hb)?;
    let dsa = upload(&s, &hsa)?;
    let dsb = upload(&s, &hsb)?;
    let dd = upload(&s, &vec![f16::NAN; l * sd])?;
    let dacc = upload(&s, &vec![i32::MIN; m * n * l])?;
    let ws_bytes =
        kx.g.workspace_bytes_mode(m as i32, n as i32, l as i32, c.split_k, SplitKMode::Parallel)
            .max(16);
    let ws = s.alloc_zeros::<u8>(ws_bytes).map_err(e)?;
    let ptr = |x: &CudaSlice<u8>| x.device_ptr(&s).0;
    let fusion = FusionArgs::new()
        .ptr("a_scale", dsa.device_ptr(&s).0)
        .ptr("b_scale", dsb.device_ptr(&s).0)
        .ptr("acc_out", dacc.device_ptr(&s).0)
        .i64("acc_out_ld", n as i64)
        .i64("acc_out_batch_stride", (m * n) as i64);
    let mut args = GemmArgs::tn(
        m as i32,
        n as i32,
        k as i32,
        l as i32,
        da.device_ptr(&s).0,
        db.device_ptr(&s).0,
        0,
        dd.device_ptr(&s).0,
    );
    (args.lda, args.ldb, args.ldd) = (lda as i64, ldb as i64, ldd as i64);
    (args.batch_stride_a, args.batch_stride_b, args.batch_stride_d) = (sa as i64, sb as i64, sd as i64);
    args.split_k = c.split_k;
    args.split_k_mode = if c.serial {
        SplitKMode::Serial
    } else {
        SplitKMode::Parallel
    };
    args.workspace = ptr(&ws);
    args.semaphores = kx.semaphores.device_ptr(&s).0;
    // SAFETY: every buffer holds what the arguments describe.
    unsafe { launch_fused(&kx.main, &kx.reduce, &kx.g, &args, &fusion) }.map_err(|x| format!("{c:?}: {x}"))?;
    s.synchronize().map_err(e)?;
    let acc = s.clone_dtoh(&dacc).map_err(e)?;
    let out = s.clone_dtoh(&dd).map_err(e)?;
    let sems = s.clone_dtoh(&kx.semaphores).map_err(e)?;
    if sems.iter().any(|&x| x != 0) {
        return Err(format!("{c:?}: serial semaphores not reset"));
    }
    for bi in 0..l {
        for i in 0..m {
            for j in 0..n {
                let w = want[(bi * m + i) * n + j];
                let got = acc[(bi * m + i) * n + j];
                if got as i64 != w {
                    return Err(format!("{c:?} {}: acc[{bi}][{i}][{j}] = {got}, want {w}", kx.g.name));
                }
                let r = w as f64 * hsb[j] as f64 * hsa[i] as f64;
                let o = out[bi * sd + i * ldd + j].to_f64();
                if !(o - r).abs().le(&step(DType::F16, r)) {
                    return Err(format!("{c:?}: out[{bi}][{i}][{j}] = {o}, want {r}"));
                }
            }
            // Padding columns of D are never written.
            for j in n..ldd {
                if !out[bi * sd + i * ldd + j].is_nan() {
                    return Err(format!("{c:?}: padding out[{bi}][{i}][{j}] written"));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn kernel_accumulates_int8_exactly() {
    let Some(gpu) = gpu_for_test() else { return };
    let mut rng = Rng::for_test("gpu_scaled_mm_exact");
    let cases = [
        KCase {
            m: 1,
            n: 8,
            k: 16,
            l: 1,
            pad: 0,
            split_k: 1,
            serial: false,
        },
        KCase {
            m: 77,
            n: 136,
            k: 304,
            l: 1,
            pad: 1,
            split_k: 1,
            serial: false,
        },
        KCase {
            m: 129,
            n: 264,
            k: 1024,
            l: 3,
            pad: 0,
            split_k: 1,
            serial: false,
        },
        KCase {
            m: 3,
            n: 520,
            k: 4096,
            l: 1,
            pad: 0,
            split_k: 4,
            serial: true,
        },
        KCase {
            m: 65,
            n: 72,
            k: 2048,
            l: 2,
            pad: 1,
            split_k: 3,
            serial: false,
        },
        KCase {
            m: 16,
            n: 40,
            k: 768,
            l: 2,
            pad: 0,
            split_k: 5,
            serial: true,
        },
        KCase {
            m: 200,
            n: 24,
            k: 128,
            l: 1,
            pad: 0,
            split_k: 7,
            serial: false,
        },
    ];
    let mut failures = Vec::new();
    for (tile, warps, turing) in [
        ([128, 128, 64], [2, 2], false),
        ([16, 64, 128], [1, 4], false),
        ([64, 64, 64], [2, 2], true),
    ] {
        let kx = exact_kernel(&gpu, tile, warps, turing);
        for c in cases {
            if let Err(x) = run_exact(&gpu, &kx, c, &mut rng) {
                failures.push(x);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Ops level.

#[derive(Clone, Copy, Debug)]
struct OCase {
    m: usize,
    n: usize,
    k: usize,
    l: usize,
    a_vec: bool,
    b_vec: bool,
    bias: bool,
    bf16: bool,
    broadcast_b: bool,
}

fn run_ops(ops: &Ops, rng: &mut Rng, c: OCase, forced: Option<&ScaledMmSelection>) -> Result<(), String> {
    let s = ops.gpu().stream().clone();
    let OCase { m, n, k, l, .. } = c;
    let lb = if c.broadcast_b { 1 } else { l };
    let ha = random_i8(rng, l * m * k);
    let hb = random_i8(rng, lb * n * k);
    let hsa: Vec<f32> = (0..if c.a_vec { m } else { 1 })
        .map(|_| uniform(rng, 0.25, 2.0) as f32 / 256.0)
        .collect();
    let hsb: Vec<f32> = (0..if c.b_vec { n } else { 1 })
        .map(|_| uniform(rng, 0.25, 2.0) as f32 / 256.0)
        .collect();
    let hbias: Vec<f64> = (0..n).map(|_| uniform(rng, -4.0, 4.0)).collect();
    let want = reference(
        &ha,
        &hb,
        (m, n, k, l),
        (k, k),
        (m * k, if c.broadcast_b { 0 } else { n * k }),
    );
    let da = upload(&s, &ha)?;
    let db = upload(&s, &hb)?;
    let dsa = upload(&s, &hsa)?;
    let dsb = upload(&s, &hsb)?;
    let (bias16, biasb) = (
        upload(&s, &hbias.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>())?,
        upload(&s, &hbias.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>())?,
    );
    let bias_q: Vec<f64> = hbias
        .iter()
        .map(|&x| {
            if c.bf16 {
                bf16::from_f64(x).to_f64()
            } else {
                f16::from_f64(x).to_f64()
            }
        })
        .collect();
    let mut d16 = upload(&s, &vec![f16::NAN; l * m * n])?;
    let mut db16 = upload(&s, &vec![bf16::NAN; l * m * n])?;
    let av = MatrixRef::new(&da, m, k).batched(l, (m * k) as i64);
    let bv = MatrixRef::new(&db, k, n).col_major().batched(lb, (n * k) as i64);
    let sav = VectorRef::new(&dsa, hsa.len());
    let sbv = VectorRef::new(&dsb, hsb.len());
    let a_scale = if c.a_vec {
        Scale::Vector(sav)
    } else {
        Scale::Scalar(sav)
    };
    let b_scale = Scale::auto(sbv);
    let biasv = if c.bf16 {
        VectorRef::new(&biasb, n)
    } else {
        VectorRef::new(&bias16, n)
    };
    let bias = c.bias.then_some(&biasv);
    {
        let mut outv = if c.bf16 {
            MatrixMut::new(&mut db16, m, n)
        } else {
            MatrixMut::new(&mut d16, m, n)
        }
        .batched(l, (m * n) as i64);
        let r = match forced {
            None => ops.scaled_mm(&av, &bv, a_scale, b_scale, bias, &mut outv),
            Some(sel) => validate_scaled_mm(&av, &bv, a_scale, b_scale, bias, &outv)
                .and_then(|p| ops.run_scaled_mm(&p, Some(sel))),
        };
        r.map_err(|x| format!("{c:?} {forced:?}: {x}"))?;
    }
    s.synchronize().map_err(e)?;
    let got: Vec<f64> = if c.bf16 {
        s.clone_dtoh(&db16).map_err(e)?.iter().map(|x| x.to_f64()).collect()
    } else {
        s.clone_dtoh(&d16).map_err(e)?.iter().map(|x| x.to_f64()).collect()
    };
    let ty = if c.bf16 { DType::BF16 } else { DType::F16 };
    for bi in 0..l {
        for i in 0..m {
            for j in 0..n {
                let idx = (bi * m + i) * n + j;
                let sa = hsa[if c.a_vec { i } else { 0 }] as f64;
                let sb = hsb[if c.b_vec { j } else { 0 }] as f64;
                let prod = want[idx] as f64 * sa * sb;
                let bias = if c.bias { bias_q[j] } else { 0.0 };
                let r = prod + bias;
                let o = got[idx];
                // One output step, plus the f32 rounding of the epilogue's two products and
                // its fused add (visible when the bias cancels the product).
                let tol = step(ty, r) + 4.0 * f32::EPSILON as f64 * (prod.abs() + bias.abs());
                if !(o - r).abs().le(&tol) {
                    return Err(format!("{c:?} {forced:?}: out[{bi}][{i}][{j}] = {o}, want {r}"));
                }
            }
        }
    }
    Ok(())
}

fn sel(target: ScaledMmTarget, tile: [i64; 3], warps: [i64; 2], split_k: u32, mode: SplitKMode) -> ScaledMmSelection {
    ScaledMmSelection {
        target,
        tile,
        warps,
        stages: if target == ScaledMmTarget::Turing {
            Some(2)
        } else {
            None
        },
        raster_swizzle: if tile[0] == 128 { 2 } else { 0 },
        split_k,
        split_k_mode: mode,
    }
}

#[test]
fn ops_scaled_mm_matches_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("gpu_scaled_mm_ops");
    let mut failures = Vec::new();
    let mut count = 0;
    let mut run = |c: OCase, f: Option<&ScaledMmSelection>, rng: &mut Rng| {
        count += 1;
        if let Err(x) = run_ops(&ops, rng, c, f) {
            failures.push(x);
        }
    };
    let base = OCase {
        m: 77,
        n: 200,
        k: 272,
        l: 1,
        a_vec: true,
        b_vec: true,
        bias: true,
        bf16: true,
        broadcast_b: false,
    };
    // Every scale / bias / output combination, on one forced kernel (one compile each).
    let fixed = sel(ScaledMmTarget::Ampere, [64, 64, 128], [2, 2], 1, SplitKMode::Serial);
    for combo in 0..16 {
        let c = OCase {
            a_vec: combo & 1 != 0,
            b_vec: combo & 2 != 0,
            bias: combo & 4 != 0,
            bf16: combo & 8 != 0,
            ..base
        };
        run(c, Some(&fixed), &mut rng);
    }
    // Automatic selection over the M buckets, ragged shapes, batches (and a broadcast B).
    for (m, n, k, l, bb) in [
        (1, 4096, 4096, 1, false),
        (7, 1032, 2048, 1, false),
        (33, 264, 512, 2, false),
        (100, 8200, 256, 1, false),
        (301, 520, 1040, 1, false),
        (2048, 2048, 256, 1, false),
        (130, 96, 160, 3, true),
    ] {
        run(
            OCase {
                m,
                n,
                k,
                l,
                broadcast_b: bb,
                ..base
            },
            None,
            &mut rng,
        );
    }
    // Forced split-K, both modes, and the Turing kernel (f16).
    for (f, c) in [
        (
            sel(ScaledMmTarget::Ampere, [64, 64, 128], [2, 2], 3, SplitKMode::Parallel),
            base,
        ),
        (
            sel(ScaledMmTarget::Ampere, [64, 64, 128], [2, 2], 2, SplitKMode::Serial),
            OCase { l: 2, ..base },
        ),
        (
            sel(ScaledMmTarget::Turing, [64, 64, 64], [2, 2], 1, SplitKMode::Serial),
            OCase {
                bf16: false,
                l: 2,
                ..base
            },
        ),
        (
            sel(ScaledMmTarget::Turing, [128, 128, 64], [2, 4], 2, SplitKMode::Parallel),
            OCase {
                m: 300,
                bf16: false,
                ..base
            },
        ),
    ] {
        run(c, Some(&f), &mut rng);
    }
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The Turing kernel writes f16 only: bf16 is a typed error, not a launch.
    let c = OCase { bf16: true, ..base };
    let t = sel(ScaledMmTarget::Turing, [64, 64, 64], [2, 2], 1, SplitKMode::Serial);
    let r = run_ops(&ops, &mut rng, c, Some(&t));
    assert!(r.as_ref().is_err_and(|x| x.contains("f16 only")), "{r:?}");
}

#[test]
fn ops_scaled_mm_typed_errors() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let s = ops.gpu().stream().clone();
    let a: CudaSlice<i8> = s.alloc_zeros(64 * 64).unwrap();
    let b: CudaSlice<i8> = s.alloc_zeros(64 * 64).unwrap();
    let ah: CudaSlice<f16> = s.alloc_zeros(64 * 64).unwrap();
    let sc: CudaSlice<f32> = s.alloc_zeros(64).unwrap();
    let sc16: CudaSlice<f16> = s.alloc_zeros(64).unwrap();
    let bias: CudaSlice<f16> = s.alloc_zeros(64).unwrap();
    let biasb: CudaSlice<bf16> = s.alloc_zeros(64).unwrap();
    let mut d: CudaSlice<f16> = s.alloc_zeros(64 * 64).unwrap();
    let mut d32: CudaSlice<f32> = s.alloc_zeros(64 * 64).unwrap();
    let one = || Scale::Scalar(VectorRef::new(&sc, 1));
    let av = MatrixRef::new(&a, 64, 64);
    let bv = MatrixRef::new(&b, 64, 64).col_major();
    macro_rules! check {
        ($r:expr, $pat:pat) => {{
            let r = $r;
            assert!(matches!(r, Err($pat)), "{}: {r:?}", stringify!($r));
        }};
    }
    // Works (the baseline for the errors below).
    ops.scaled_mm(
        &av,
        &bv,
        one(),
        one(),
        Some(&VectorRef::new(&bias, 64)),
        &mut MatrixMut::new(&mut d, 64, 64),
    )
    .unwrap();
    s.synchronize().unwrap();
    // dtypes: f16 A, f32 out, f16 scale, bf16 bias for f16 out.
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&ah, 64, 64),
            &bv,
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::DType(_)
    );
    check!(
        ops.scaled_mm(&av, &bv, one(), one(), None, &mut MatrixMut::new(&mut d32, 64, 64)),
        OpsError::DType(_)
    );
    check!(
        ops.scaled_mm(
            &av,
            &bv,
            Scale::Scalar(VectorRef::new(&sc16, 1)),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::DType(_)
    );
    check!(
        ops.scaled_mm(
            &av,
            &bv,
            one(),
            one(),
            Some(&VectorRef::new(&biasb, 64)),
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::DType(_)
    );
    // Shapes: K of A and B differ; out has the wrong shape; batch mismatch.
    check!(
        ops.scaled_mm(
            &av,
            &MatrixRef::new(&b, 32, 64).col_major(),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::Shape(_)
    );
    check!(
        ops.scaled_mm(&av, &bv, one(), one(), None, &mut MatrixMut::new(&mut d, 64, 32)),
        OpsError::Shape(_)
    );
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 16, 64).batched(2, 1024),
            &MatrixRef::new(&b, 64, 16).col_major().batched(3, 1024),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 16, 16).batched(2, 256)
        ),
        OpsError::Shape(_)
    );
    // K odd (with 16-aligned leading dimensions; even K off the 16-byte grid runs the
    // narrow-vector kernel); N not a multiple of 8.
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 64, 23).strides(32, 1),
            &MatrixRef::new(&b, 23, 64).strides(1, 32),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::Alignment { operand: "A", .. }
    );
    check!(
        ops.scaled_mm(
            &av,
            &MatrixRef::new(&b, 64, 12).col_major(),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 12)
        ),
        OpsError::Alignment { operand: "out", .. }
    );
    // An odd leading dimension of A (even ones off the 16-byte grid are valid).
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 32, 32).strides(41, 1),
            &MatrixRef::new(&b, 32, 64).col_major(),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 32, 64)
        ),
        OpsError::Alignment { operand: "A", .. }
    );
    // Layouts: column-major A, row-major B, column-major out.
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 64, 64).col_major(),
            &bv,
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::Strides { operand: "A", .. }
    );
    check!(
        ops.scaled_mm(
            &av,
            &MatrixRef::new(&b, 64, 64),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::Strides { operand: "B", .. }
    );
    check!(
        ops.scaled_mm(
            &av,
            &bv,
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64).col_major()
        ),
        OpsError::Strides { operand: "out", .. }
    );
    // Scale and bias lengths.
    check!(
        ops.scaled_mm(
            &av,
            &bv,
            Scale::Vector(VectorRef::new(&sc, 32)),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::VectorLength { operand: "a_scale", .. }
    );
    check!(
        ops.scaled_mm(
            &av,
            &bv,
            one(),
            Scale::Scalar(VectorRef::new(&sc, 2)),
            None,
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::VectorLength { operand: "b_scale", .. }
    );
    check!(
        ops.scaled_mm(
            &av,
            &bv,
            one(),
            one(),
            Some(&VectorRef::new(&bias, 48)),
            &mut MatrixMut::new(&mut d, 64, 64)
        ),
        OpsError::VectorLength { operand: "bias", .. }
    );
    // A scale view longer than its buffer.
    let big: CudaSlice<f32> = s.alloc_zeros(16).unwrap();
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 32, 64),
            &bv,
            Scale::Vector(VectorRef::new(&big, 32)),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 32, 64)
        ),
        OpsError::OutOfBounds { operand: "a_scale", .. }
    );
    // Empty and out-of-bounds problems.
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 0, 64),
            &bv,
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 0, 64)
        ),
        OpsError::Empty(_)
    );
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 128, 64),
            &bv,
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut d, 128, 64)
        ),
        OpsError::OutOfBounds { .. }
    );
    // Huge sizes: a batch count beyond the grid's z limit (one A and B broadcast).
    let mut dbig: CudaSlice<f16> = s.alloc_zeros(70000 * 256).unwrap();
    check!(
        ops.scaled_mm(
            &MatrixRef::new(&a, 16, 64),
            &MatrixRef::new(&b, 64, 16).col_major(),
            one(),
            one(),
            None,
            &mut MatrixMut::new(&mut dbig, 16, 16).batched(70000, 256)
        ),
        OpsError::TooLarge { .. }
    );
    // The output overlapping an input.
    // SAFETY: the raw view describes memory inside `d`'s allocation, reinterpreted as s8.
    let alias = unsafe {
        MatrixRef::from_raw(rcute_ops::Geometry {
            dtype: DType::S8,
            ..MatrixMut::new(&mut d, 64, 64).geo()
        })
    };
    check!(
        ops.scaled_mm(&alias, &bv, one(), one(), None, &mut MatrixMut::new(&mut d, 64, 64)),
        OpsError::Strides { operand: "out", .. }
    );
    // The Ampere-class target everywhere from sm_80 (the sm_90 dispatch point included).
    let t = ops.scaled_mm_target().unwrap();
    let cc = ops.gpu().compute_capability();
    assert_eq!(t == ScaledMmTarget::Turing, cc == (7, 5));
}

/// FP8 through `Ops::scaled_mm` (sm_90 only): e4m3 A (row-major) and B (column-major),
/// per-row / per-column f32 scales, optional bf16 / f16 bias; against a float64 product of
/// the dequantized inputs, ||out - ref|| / ||ref|| < 1e-2, every output finite; mixed
/// s8 / e4m3 inputs are a typed `DType` error. Elsewhere FP8 is a typed `Arch` error.
#[test]
fn ops_fp8_scaled_mm_matches_reference() {
    use rcute_collective::fusion::decode_element;
    use rcute_ops::E4M3;
    let Some(gpu) = gpu_for_test() else { return };
    if gpu.compute_capability() != (9, 0) {
        eprintln!("skipping: FP8 scaled_mm runs on sm_90 only (elsewhere it is an OpsError::Arch)");
        return;
    }
    let ops = Ops::new(gpu.clone());
    let stream = gpu.stream().clone();
    let mut rng = Rng::for_test("ops_fp8_scaled_mm_matches_reference");
    for &(m, n, k, bias_ty) in &[
        (300usize, 264usize, 512usize, Some(DType::BF16)),
        (1, 16, 128, None),
        (129, 520, 1040, Some(DType::F16)),
        (64, 4096, 4096, Some(DType::BF16)),
    ] {
        let bytes = |rng: &mut Rng, len: usize| -> Vec<E4M3> {
            (0..len)
                .map(|_| {
                    let b = (rng.next_u32() as u8) & 0xBF; // |x| < 2, never NaN
                    E4M3(b)
                })
                .collect()
        };
        let (ha, hb) = (bytes(&mut rng, m * k), bytes(&mut rng, n * k));
        let dec = |v: &E4M3| decode_element(Element::E4M3, &[v.0]).unwrap();
        let a_scale: Vec<f32> = (0..m).map(|_| uniform(&mut rng, 0.5, 1.5) as f32).collect();
        let b_scale: Vec<f32> = (0..n).map(|_| uniform(&mut rng, 0.5, 1.5) as f32).collect();
        let bias: Vec<f64> = (0..n).map(|_| uniform(&mut rng, -1.0, 1.0)).collect();
        let out_ty = bias_ty.unwrap_or(DType::BF16);
        let da = upload(&stream, &ha).unwrap();
        let db = upload(&stream, &hb).unwrap();
        let dsa = upload(&stream, &a_scale).unwrap();
        let dsb = upload(&stream, &b_scale).unwrap();
        let (got, bias_q): (Vec<f64>, Vec<f64>) = if out_ty == DType::BF16 {
            let hbias: Vec<bf16> = bias.iter().map(|&x| bf16::from_f64(x)).collect();
            let dbias = upload(&stream, &hbias).unwrap();
            let mut dout: CudaSlice<bf16> = stream.alloc_zeros(m * n).unwrap();
            let bv = VectorRef::new(&dbias, n);
            ops.scaled_mm(
                &MatrixRef::new(&da, m, k),
                &MatrixRef::new(&db, k, n).col_major(),
                Scale::auto(VectorRef::new(&dsa, m)),
                Scale::auto(VectorRef::new(&dsb, n)),
                bias_ty.map(|_| &bv),
                &mut MatrixMut::new(&mut dout, m, n),
            )
            .unwrap_or_else(|err| panic!("fp8 ({m},{n},{k}): {err}"));
            gpu.synchronize().unwrap();
            let o = stream.clone_dtoh(&dout).unwrap();
            (
                o.iter().map(|x| x.to_f64()).collect(),
                hbias.iter().map(|x| x.to_f64()).collect(),
            )
        } else {
            let hbias: Vec<f16> = bias.iter().map(|&x| f16::from_f64(x)).collect();
            let dbias = upload(&stream, &hbias).unwrap();
            let mut dout: CudaSlice<f16> = stream.alloc_zeros(m * n).unwrap();
            let bv = VectorRef::new(&dbias, n);
            ops.scaled_mm(
                &MatrixRef::new(&da, m, k),
                &MatrixRef::new(&db, k, n).col_major(),
                Scale::auto(VectorRef::new(&dsa, m)),
                Scale::auto(VectorRef::new(&dsb, n)),
                Some(&bv),
                &mut MatrixMut::new(&mut dout, m, n),
            )
            .unwrap_or_else(|err| panic!("fp8 ({m},{n},{k}): {err}"));
            gpu.synchronize().unwrap();
            let o = stream.clone_dtoh(&dout).unwrap();
            (
                o.iter().map(|x| x.to_f64()).collect(),
                hbias.iter().map(|x| x.to_f64()).collect(),
            )
        };
        // Decode every operand once (decoding inside the dot products made the 64x4096x4096
        // reference take minutes).
        let (fa, fb): (Vec<f64>, Vec<f64>) = (ha.iter().map(dec).collect(), hb.iter().map(dec).collect());
        let (mut num, mut den) = (0.0f64, 0.0f64);
        for i in 0..m {
            for j in 0..n {
                let acc: f64 = fa[i * k..(i + 1) * k]
                    .iter()
                    .zip(&fb[j * k..(j + 1) * k])
                    .map(|(x, y)| x * y)
                    .sum();
                let mut want = acc * a_scale[i] as f64 * b_scale[j] as f64;
                if bias_ty.is_some() {
                    want += bias_q[j];
                }
                let g = got[i * n + j];
                assert!(g.is_finite(), "fp8 ({m},{n},{k}): out({i},{j}) = {g}");
                num += (g - want) * (g - want);
                den += want * want;
            }
        }
        let rel = (num / den.max(1e-30)).sqrt();
        assert!(rel < 1e-2, "fp8 ({m},{n},{k}): relative error {rel:.3e}");
        eprintln!("fp8 scaled_mm ({m},{n},{k}) bias {bias_ty:?}: relative error {rel:.2e}");
    }
    // Mixed input types are refused before any launch.
    let a8 = upload(&stream, &random_i8(&mut rng, 64 * 64)).unwrap();
    let b8 = upload(&stream, &vec![E4M3(0); 64 * 64]).unwrap();
    let s = upload(&stream, &[1.0f32]).unwrap();
    let mut dout: CudaSlice<bf16> = stream.alloc_zeros(64 * 64).unwrap();
    let r = ops.scaled_mm(
        &MatrixRef::new(&a8, 64, 64),
        &MatrixRef::new(&b8, 64, 64).col_major(),
        Scale::auto(VectorRef::new(&s, 1)),
        Scale::auto(VectorRef::new(&s, 1)),
        None,
        &mut MatrixMut::new(&mut dout, 64, 64),
    );
    assert!(matches!(r, Err(OpsError::DType(_))), "{r:?}");
}
