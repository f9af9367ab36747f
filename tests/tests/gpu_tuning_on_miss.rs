//! `RCUTE_TUNING=on-miss` on the GPU: the first `Ops::gemm` (and INT8 and, on sm_90, FP8
//! `Ops::scaled_mm`, `Ops::awq_gemm`, `Ops::fused_moe`) of a shape with no table entry
//! tunes it (within `RCUTE_TUNING_BUDGET` seconds), writes the winner to
//! `RCUTE_TUNING_FILE`, returns the right answer, and later calls and a fresh handle use
//! the written entry without tuning again (the MoE one on the caller's workspace of
//! `fused_moe_workspace_bytes`). Also: the fused MoE layer with a forced configuration
//! of either grouped GEMM family (`Ops::run_fused_moe_spec`, what `rcute tune moe` times;
//! the SM90 forms on sm_90, a typed error elsewhere) gives the answer of the op's own
//! choice.
//!
//! One test function sets the environment: it is process-wide, and each `Ops` handle
//! reads it once.

use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::moe::{
    fused_moe_workspace_bytes_with, validate_fused_moe, MoeOptions, MoePath, MoeRouting, MoeWorkspace,
};
use rcute_ops::scaled_mm::scaled_mm_key;
use rcute_ops::tuning::probe::Operand8;
use rcute_ops::tuning::{
    awq_key, gemm_key, moe_key, ConfigSpec, MoeSm90Spec, MoeSpec, ProblemKey, TableHeader, TuningMode, TuningTable,
};
use rcute_ops::{validate_scaled_mm, DType, MatrixMut, MatrixRef, Ops, Scale, VectorRef, E4M3};

fn lcg(seed: u64) -> impl FnMut() -> u32 {
    let mut x = seed;
    move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as u32
    }
}

/// `ops.gemm` of 16 x 256 x 512 (TN, bf16): the relative Frobenius error against float64
/// and the problem's table key.
fn gemm_case(ops: &Ops) -> (f64, rcute_ops::tuning::ProblemKey) {
    let (m, n, k) = (16usize, 256usize, 512usize);
    let s = ops.gpu().stream().clone();
    let mut r = lcg(7);
    let mut rnd = |len: usize| -> Vec<bf16> {
        (0..len)
            .map(|_| bf16::from_f32((r() % 2001) as f32 / 1000.0 - 1.0))
            .collect()
    };
    let (ha, hb) = (rnd(m * k), rnd(n * k));
    let (a, b) = (s.clone_htod(&ha).unwrap(), s.clone_htod(&hb).unwrap());
    let mut d = s.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
    let mut dv = MatrixMut::new(&mut d, m, n);
    let key = gemm_key(
        &rcute_ops::validate(&av, &bv, None, &dv, 1.0, 0.0).unwrap(),
        ops.gpu().arch().unwrap().as_str(),
    )
    .unwrap();
    ops.gemm(&av, &bv, None, &mut dv, 1.0, 0.0).unwrap();
    let got = s.clone_dtoh(&d).unwrap();
    let (mut num, mut den) = (0f64, 0f64);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|t| ha[i * k + t].to_f64() * hb[j * k + t].to_f64()).sum();
            let g = got[i * n + j].to_f64();
            num += if g.is_nan() { f64::INFINITY } else { (g - want).powi(2) };
            den += want * want;
        }
    }
    ((num / den).sqrt(), key)
}

/// `ops.scaled_mm` of 16 x 256 x 512 INT8 (per-token / per-channel scales, bias, bf16 out):
/// the largest relative error against the exact result, and the table key.
fn scaled_mm_case(ops: &Ops) -> (f64, rcute_ops::tuning::ProblemKey) {
    let (m, n, k) = (16usize, 256usize, 512usize);
    let s = ops.gpu().stream().clone();
    let mut r = lcg(11);
    let ha: Vec<i8> = (0..m * k).map(|_| r() as u8 as i8).collect();
    let hb: Vec<i8> = (0..n * k).map(|_| r() as u8 as i8).collect();
    let hsa: Vec<f32> = (0..m).map(|_| 1e-4 * (1.0 + (r() % 100) as f32 / 100.0)).collect();
    let hsb: Vec<f32> = (0..n).map(|_| 1e-2 * (1.0 + (r() % 100) as f32 / 100.0)).collect();
    let hbias: Vec<bf16> = (0..n)
        .map(|_| bf16::from_f32((r() % 200) as f32 / 100.0 - 1.0))
        .collect();
    let (a, b) = (s.clone_htod(&ha).unwrap(), s.clone_htod(&hb).unwrap());
    let (sa, sb, bias) = (
        s.clone_htod(&hsa).unwrap(),
        s.clone_htod(&hsb).unwrap(),
        s.clone_htod(&hbias).unwrap(),
    );
    let mut d = s.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
    let (sav, sbv, biasv) = (VectorRef::new(&sa, m), VectorRef::new(&sb, n), VectorRef::new(&bias, n));
    let mut dv = MatrixMut::new(&mut d, m, n);
    let p = validate_scaled_mm(&av, &bv, Scale::Vector(sav), Scale::Vector(sbv), Some(&biasv), &dv).unwrap();
    let key = scaled_mm_key(&p, ops.gpu().arch().unwrap().as_str());
    ops.scaled_mm(&av, &bv, Scale::Vector(sav), Scale::Vector(sbv), Some(&biasv), &mut dv)
        .unwrap();
    let got = s.clone_dtoh(&d).unwrap();
    let mut worst = 0f64;
    for i in 0..m {
        for j in 0..n {
            let acc: i64 = (0..k).map(|t| ha[i * k + t] as i64 * hb[j * k + t] as i64).sum();
            let want = acc as f64 * hsa[i] as f64 * hsb[j] as f64 + hbias[j].to_f64();
            let e = (got[i * n + j].to_f64() - want).abs() / want.abs().max(1e-3);
            worst = if e.is_nan() { f64::INFINITY } else { worst.max(e) };
        }
    }
    (worst, key)
}

/// `ops.scaled_mm` of 16 x 256 x 512 FP8 e4m3 (per-token / per-channel scales, no bias,
/// bf16 out): the largest error relative to the largest exact value, and the table key.
fn fp8_case(ops: &Ops) -> (f64, ProblemKey) {
    let (m, n, k) = (16usize, 256usize, 512usize);
    let s = ops.gpu().stream().clone();
    let mut r = lcg(13);
    // Random bytes with bit 6 cleared: no NaN, |x| < 2.
    let mut fp8 = |len: usize| -> Vec<E4M3> { (0..len).map(|_| E4M3(r() as u8 & 0xBF)).collect() };
    let (ha, hb) = (fp8(m * k), fp8(n * k));
    let hsa: Vec<f32> = (0..m).map(|i| 0.05 + 0.01 * (i % 7) as f32).collect();
    let hsb: Vec<f32> = (0..n).map(|j| 0.05 + 0.01 * (j % 5) as f32).collect();
    let (a, b) = (s.clone_htod(&ha).unwrap(), s.clone_htod(&hb).unwrap());
    let (sa, sb) = (s.clone_htod(&hsa).unwrap(), s.clone_htod(&hsb).unwrap());
    let mut d = s.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
    let (sav, sbv) = (VectorRef::new(&sa, m), VectorRef::new(&sb, n));
    let mut dv = MatrixMut::new(&mut d, m, n);
    let p = validate_scaled_mm(&av, &bv, Scale::Vector(sav), Scale::Vector(sbv), None, &dv).unwrap();
    let key = scaled_mm_key(&p, ops.gpu().arch().unwrap().as_str());
    ops.scaled_mm(&av, &bv, Scale::Vector(sav), Scale::Vector(sbv), None, &mut dv)
        .unwrap();
    let got = s.clone_dtoh(&d).unwrap();
    let (mut err, mut max_ref) = (0f64, 1e-30f64);
    for i in 0..m {
        for j in 0..n {
            let acc: f64 = (0..k).map(|t| ha[i * k + t].to_f64() * hb[j * k + t].to_f64()).sum();
            let want = acc * hsa[i] as f64 * hsb[j] as f64;
            let g = got[i * n + j].to_f64();
            err = if g.is_nan() {
                f64::INFINITY
            } else {
                err.max((g - want).abs())
            };
            max_ref = max_ref.max(want.abs());
        }
    }
    (err / max_ref, key)
}

/// `ops.awq_gemm` of 16 x 256 x 512, group 128, f16: the largest error relative to the
/// largest float64 value, and the table key.
fn awq_case(ops: &Ops) -> (f64, ProblemKey) {
    use half::f16;
    use rcute_ops::awq::{pack_awq_matrix, AwqTensors};
    let (m, n, k, g) = (16usize, 256usize, 512usize, 128usize);
    let groups = k / g;
    let s = ops.gpu().stream().clone();
    let mut r = lcg(17);
    let hx: Vec<f16> = (0..m * k)
        .map(|_| f16::from_f32((r() % 2001) as f32 / 1000.0 - 1.0))
        .collect();
    let q: Vec<u8> = (0..k * n).map(|_| (r() % 16) as u8).collect();
    let z: Vec<u8> = (0..groups * n).map(|_| (r() % 16) as u8).collect();
    let sc: Vec<f16> = (0..groups * n)
        .map(|_| f16::from_f32(1e-3 + (r() % 100) as f32 * 2e-4))
        .collect();
    let x = s.clone_htod(&hx).unwrap();
    let qw = s.clone_htod(&pack_awq_matrix(&q, k, n).unwrap()).unwrap();
    let qz = s.clone_htod(&pack_awq_matrix(&z, groups, n).unwrap()).unwrap();
    let scales = s.clone_htod(&sc).unwrap();
    let mut out = s.clone_htod(&vec![f16::NAN; m * n]).unwrap();
    let w = AwqTensors {
        qweight: MatrixRef::new(&qw, k, n / 8),
        scales: MatrixRef::new(&scales, groups, n),
        qzeros: MatrixRef::new(&qz, groups, n / 8),
        group: g,
    };
    ops.awq_gemm(&MatrixRef::new(&x, m, k), &w, None, &mut MatrixMut::new(&mut out, m, n))
        .unwrap();
    let got = s.clone_dtoh(&out).unwrap();
    let (mut err, mut max_ref) = (0f64, 1e-30f64);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|t| {
                    let gi = (t / g) * n + j;
                    hx[i * k + t].to_f64() * (q[t * n + j] as f64 - z[gi] as f64) * sc[gi].to_f64()
                })
                .sum();
            let v = got[i * n + j].to_f64();
            err = if v.is_nan() {
                f64::INFINITY
            } else {
                err.max((v - want).abs())
            };
            max_ref = max_ref.max(want.abs());
        }
    }
    let key = awq_key("f16", g, ops.gpu().arch().unwrap().as_str(), m, n, k);
    (err / max_ref, key)
}

/// `ops.fused_moe` of 24 tokens, 8 experts, top-2, H = 256, I = 512 (bf16, the caller's
/// routing) on a workspace of `fused_moe_workspace_bytes`: the largest error relative to
/// the largest float64 value, and the table key.
fn moe_case(ops: &Ops) -> (f64, ProblemKey) {
    use rcute_ops::moe::reference::MoeShape;
    use rcute_ops::moe::{fused_moe_reference, fused_moe_workspace_bytes};
    let (t, e, k, h, i) = (24usize, 8usize, 2usize, 256usize, 512usize);
    let s = ops.gpu().stream().clone();
    let mut r = lcg(19);
    let mut rnd = |len: usize, scale: f32| -> Vec<bf16> {
        (0..len)
            .map(|_| bf16::from_f32(((r() % 2001) as f32 / 1000.0 - 1.0) * scale))
            .collect()
    };
    let (hx, h13, h2) = (rnd(t * h, 1.0), rnd(e * 2 * i * h, 0.0625), rnd(e * h * i, 0.0442));
    let ids: Vec<i32> = (0..t)
        .flat_map(|x| [(x % e) as i32, ((x * 3 + 1) % e) as i32])
        .collect();
    let ids: Vec<i32> = ids
        .chunks(2)
        .flat_map(|c| {
            if c[0] == c[1] {
                [c[0], (c[0] + 1) % e as i32]
            } else {
                [c[0], c[1]]
            }
        })
        .collect();
    let wts: Vec<f32> = (0..t * k).map(|x| 0.25 + 0.5 * ((x % 3) as f32 / 2.0)).collect();
    let (x, w13, w2) = (
        s.clone_htod(&hx).unwrap(),
        s.clone_htod(&h13).unwrap(),
        s.clone_htod(&h2).unwrap(),
    );
    let (di, dw) = (s.clone_htod(&ids).unwrap(), s.clone_htod(&wts).unwrap());
    let mut ws = s
        .alloc_zeros::<u8>(fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap())
        .unwrap();
    let mut y = s.clone_htod(&vec![bf16::NAN; t * h]).unwrap();
    let routing = MoeRouting::Given {
        topk_ids: MatrixRef::new(&di, t, k),
        topk_weights: MatrixRef::new(&dw, t, k),
    };
    ops.fused_moe(
        &MatrixRef::new(&x, t, h),
        &MatrixRef::new(&w13, 2 * i, h).batched(e, (2 * i * h) as i64),
        &MatrixRef::new(&w2, h, i).batched(e, (h * i) as i64),
        &routing,
        &MoeOptions::default(),
        &mut MoeWorkspace::new(&mut ws),
        &mut MatrixMut::new(&mut y, t, h),
    )
    .unwrap();
    let got = s.clone_dtoh(&y).unwrap();
    let f = |v: &[bf16]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    let shape = MoeShape {
        tokens: t,
        hidden: h,
        inter: i,
        topk: k,
        expert_offset: 0,
        local_experts: e,
    };
    let wts64: Vec<f64> = wts.iter().map(|&w| w as f64).collect();
    let want = fused_moe_reference(&shape, &f(&hx), &f(&h13), &f(&h2), &ids, &wts64).unwrap();
    let max_ref = want.iter().fold(1e-30f64, |a, b| a.max(b.abs()));
    let err = got.iter().zip(&want).fold(0f64, |a, (g, w)| {
        let g = g.to_f64();
        if g.is_nan() {
            f64::INFINITY
        } else {
            a.max((g - w).abs())
        }
    });
    let key = moe_key("bf16", e, k, ops.gpu().arch().unwrap().as_str(), t, h, i);
    (err / max_ref, key)
}

/// One op's case: its relative error and table key.
type Case = fn(&Ops) -> (f64, ProblemKey);

/// Run `case` on an on-miss handle: it tunes once (the count goes from `before` to
/// `before + 1`), the winner lands in `path`, and a second call tunes nothing.
fn tunes_once(
    ops: &Ops,
    path: &std::path::Path,
    here: &TableHeader,
    before: usize,
    what: &str,
    case: Case,
) -> ProblemKey {
    let (err, key) = case(ops);
    assert!(err < 2e-2, "on-miss {what}: relative error {err}");
    assert_eq!(
        ops.tuning().tunings(),
        before + 1,
        "{what}: the first call tunes its key"
    );
    let written = TuningTable::load(path, here);
    assert!(written.warnings.is_empty(), "{:?}", written.warnings);
    // stamped with the fingerprint of the kernels that ran: it applies
    let spec = written
        .entries
        .iter()
        .find(|e| e.key == key && e.applies())
        .map(|e| e.spec.clone());
    assert!(spec.is_some(), "{what}: the winner {key:?} is in the file");
    assert_eq!(ops.tuning().lookup(&key), spec, "{what}");
    let (err, _) = case(ops);
    assert!(err < 2e-2, "second {what}: relative error {err}");
    assert_eq!(
        ops.tuning().tunings(),
        before + 1,
        "{what}: the second call uses the entry"
    );
    key
}

#[test]
fn on_miss_tunes_once_writes_the_winner_and_later_lookups_use_it() {
    let Some(gpu) = gpu_for_test() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("on-miss.json");
    // SAFETY (of set_var): the only test that touches the environment; the others of this
    // binary read none of these variables.
    unsafe {
        std::env::set_var("RCUTE_TUNING", "on-miss");
        std::env::set_var("RCUTE_TUNING_FILE", &path);
        std::env::set_var("RCUTE_TUNING_BUDGET", "8");
    }
    let ops = Ops::new(gpu.clone());
    assert_eq!(ops.tuning().mode(), TuningMode::OnMiss);
    let (err, gemm_k) = gemm_case(&ops);
    assert!(err < 1e-2, "on-miss gemm: relative error {err}");
    assert_eq!(ops.tuning().tunings(), 1, "the first call tunes its key");
    let here = TableHeader::of(&gpu).unwrap();
    let written = TuningTable::load(&path, &here);
    assert!(written.warnings.is_empty(), "{:?}", written.warnings);
    let winner = written
        .entries
        .iter()
        .find(|e| e.key == gemm_k)
        .expect("the winner is in the file");
    assert!(winner.applies(), "its fingerprint is the kernels' that ran");
    assert_eq!(ops.tuning().lookup(&gemm_k).as_ref(), Some(&winner.spec));
    let (err, _) = gemm_case(&ops);
    assert!(err < 1e-2, "second gemm: relative error {err}");
    assert_eq!(ops.tuning().tunings(), 1, "the second call uses the entry");

    let (err, sm_k) = scaled_mm_case(&ops);
    assert!(err < 1e-2, "on-miss scaled_mm: relative error {err}");
    assert_eq!(ops.tuning().tunings(), 2);
    let written = TuningTable::load(&path, &here);
    let sm_spec = written
        .entries
        .iter()
        .find(|e| e.key == sm_k && e.applies())
        .map(|e| e.spec.clone());
    assert!(sm_spec.is_some(), "the scaled-mm winner is in the file too");

    let mut cases: Vec<(&str, Case)> = vec![("awq_gemm", awq_case), ("fused_moe", moe_case)];
    if gpu.compute_capability() == (9, 0) {
        cases.push(("FP8 scaled_mm", fp8_case));
    }
    let mut keys = Vec::new();
    for (what, case) in &cases {
        let before = ops.tuning().tunings();
        keys.push((*what, *case, tunes_once(&ops, &path, &here, before, what, *case)));
    }

    // A fresh handle reading the file (cached) runs the written entries.
    unsafe { std::env::set_var("RCUTE_TUNING", "cached") };
    let fresh = Ops::new(gpu.clone());
    assert_eq!(fresh.tuning().lookup(&gemm_k).as_ref(), Some(&winner.spec));
    assert_eq!(fresh.tuning().lookup(&sm_k), sm_spec);
    let (err, _) = gemm_case(&fresh);
    assert!(err < 1e-2, "cached gemm: relative error {err}");
    for (what, case, key) in keys {
        assert!(
            fresh.tuning().lookup(&key).is_some(),
            "cached {what}: the entry is read"
        );
        let (err, _) = case(&fresh);
        assert!(err < 2e-2, "cached {what}: relative error {err}");
    }
    assert_eq!(fresh.tuning().tunings(), 0);
    unsafe {
        std::env::remove_var("RCUTE_TUNING");
        std::env::remove_var("RCUTE_TUNING_FILE");
        std::env::remove_var("RCUTE_TUNING_BUDGET");
    }
}

#[test]
fn fused_moe_with_forced_configurations_matches_the_ops_choice() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let s = ops.gpu().stream().clone();
    let (t, e, k, h, i) = (24usize, 8usize, 2usize, 256usize, 512usize);
    let mut r = lcg(5);
    let mut rnd = |len: usize, scale: f32| -> Vec<bf16> {
        (0..len)
            .map(|_| bf16::from_f32(((r() % 2001) as f32 / 1000.0 - 1.0) * scale))
            .collect()
    };
    let x = s.clone_htod(&rnd(t * h, 1.0)).unwrap();
    let w13 = s.clone_htod(&rnd(e * 2 * i * h, 0.0625)).unwrap();
    let w2 = s.clone_htod(&rnd(e * h * i, 0.0442)).unwrap();
    let logits = s.clone_htod(&rnd(t * e, 4.0)).unwrap();
    let specs = [
        MoeSpec::new([16, 128, 64], [1, 4], 1),
        MoeSpec::new([64, 128, 32], [2, 2], 4),
        MoeSpec::new([128, 128, 32], [2, 2], 2),
    ];
    let bytes = specs
        .iter()
        .map(|sp| fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, sp).unwrap())
        .chain([rcute_ops::moe::fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap()])
        .max()
        .unwrap();
    let mut ws = s.alloc_zeros::<u8>(bytes).unwrap();
    let mut y = s.alloc_zeros::<bf16>(t * h).unwrap();
    let routing = MoeRouting::Logits {
        logits: MatrixRef::new(&logits, t, e),
        topk: k,
        renormalize: true,
    };
    // The layer with `spec` forced (`None`: the op's own choice, under `path`).
    let mut run = |spec: Option<&ConfigSpec>, path: MoePath| -> Result<Vec<bf16>, rcute_ops::OpsError> {
        let p = validate_fused_moe(
            &MatrixRef::new(&x, t, h),
            &MatrixRef::new(&w13, 2 * i, h).batched(e, (2 * i * h) as i64),
            &MatrixRef::new(&w2, h, i).batched(e, (h * i) as i64),
            &routing,
            &MoeOptions {
                path,
                ..MoeOptions::default()
            },
            &MoeWorkspace::new(&mut ws),
            &MatrixMut::new(&mut y, t, h),
        )
        .unwrap();
        match spec {
            Some(sp) => ops.run_fused_moe_spec(&p, sp)?,
            None => ops.run_fused_moe(&p)?,
        }
        Ok(s.clone_dtoh(&y).unwrap())
    };
    let want = run(None, MoePath::Auto).unwrap();
    let max_ref = want.iter().map(|v| v.to_f64().abs()).fold(1e-30, f64::max);
    assert!(max_ref > 1e-3, "a layer with some output");
    let close = |sp: &ConfigSpec, got: &[bf16]| {
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a.to_f64() - b.to_f64()).abs())
            .fold(0.0, f64::max);
        assert!(err / max_ref < 2e-2, "{sp}: relative error {}", err / max_ref);
    };
    for sp in &specs {
        let spec = ConfigSpec::Moe(*sp);
        close(&spec, &run(Some(&spec), MoePath::Auto).unwrap());
    }
    // The SM90 forms at any row count (here 6 rows per expert, where the rules run SM80):
    // the op's answer on sm_90, bit for bit what the path option forcing them gives; a
    // typed error before any launch elsewhere.
    let hopper = ops.gpu().compute_capability() == (9, 0);
    for form in MoeSm90Spec::ALL {
        let spec = ConfigSpec::MoeSm90(form);
        match run(Some(&spec), MoePath::Auto) {
            Ok(got) => {
                assert!(hopper, "{spec} ran on {:?}", ops.gpu().compute_capability());
                close(&spec, &got);
                assert_eq!(
                    got,
                    run(None, form.path()).unwrap(),
                    "{spec} against MoePath {:?}",
                    form.path()
                );
            }
            Err(err) => {
                assert!(!hopper, "{spec} on sm_90: {err}");
                assert!(matches!(err, rcute_ops::OpsError::Arch(_)), "{spec}: {err}");
                eprintln!("{spec}: {err} (skipped: not an sm_90 GPU)");
            }
        }
    }
    // A workspace too small for a forced layout is a typed error, before any launch.
    let mut small = s
        .alloc_zeros::<u8>(rcute_ops::moe::fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap())
        .unwrap();
    let p = validate_fused_moe(
        &MatrixRef::new(&x, t, h),
        &MatrixRef::new(&w13, 2 * i, h).batched(e, (2 * i * h) as i64),
        &MatrixRef::new(&w2, h, i).batched(e, (h * i) as i64),
        &routing,
        &MoeOptions::default(),
        &MoeWorkspace::new(&mut small),
        &MatrixMut::new(&mut y, t, h),
    )
    .unwrap();
    let big = MoeSpec::new([16, 128, 64], [1, 4], 8);
    let need = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, &big).unwrap();
    if need > small.len() {
        assert!(matches!(
            ops.run_fused_moe_with(&p, &big),
            Err(rcute_ops::OpsError::OutOfBounds { .. })
        ));
    }
}

/// One row of A has one scale either way: a per-tensor A scale at M = 1 looks up the
/// per-token entries (the benchmarks' and tables' key); at M = 2 the two kinds stay apart.
#[test]
fn a_single_rows_per_tensor_scale_keys_as_per_token() {
    let Some(gpu) = gpu_for_test() else { return };
    let s = gpu.stream().clone();
    let arch = gpu.arch().unwrap();
    let (n, k) = (256usize, 512usize);
    let a = s.alloc_zeros::<i8>(2 * k).unwrap();
    let b = s.alloc_zeros::<i8>(n * k).unwrap();
    let (sa, sb) = (s.alloc_zeros::<f32>(2).unwrap(), s.alloc_zeros::<f32>(n).unwrap());
    let mut d = s.alloc_zeros::<bf16>(2 * n).unwrap();
    let key = |m: usize, scalar: bool, d: &mut cudarc::driver::CudaSlice<bf16>| {
        let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
        let sav = if scalar {
            Scale::Scalar(VectorRef::new(&sa, 1))
        } else {
            Scale::Vector(VectorRef::new(&sa, m))
        };
        let dv = MatrixMut::new(d, m, n);
        let p = validate_scaled_mm(&av, &bv, sav, Scale::Vector(VectorRef::new(&sb, n)), None, &dv).unwrap();
        scaled_mm_key(&p, arch.as_str())
    };
    let one_scalar = key(1, true, &mut d);
    assert_eq!(one_scalar.fusion, "token-channel");
    assert_eq!(one_scalar, key(1, false, &mut d));
    assert_eq!(key(2, true, &mut d).fusion, "tensor-channel");
    assert_eq!(key(2, false, &mut d).fusion, "token-channel");
}
