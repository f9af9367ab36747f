//! `Ops` and tuning tables on the GPU: a matching table's entry is the kernel `Ops::gemm`
//! runs (and its answer is right); tables from another device, another generator, a
//! truncated file and an entry with an unknown configuration string are ignored (the
//! lookup finds nothing from them) and the op still returns the right answer.
//!
//! The same for `Ops::scaled_mm` (INT8, per-token / per-channel scales, bias, bf16 out):
//! a matching entry (keyed as `rcute_ops::scaled_mm::scaled_mm_key` says) is what the op
//! runs, and the answer is right.
//!
//! One test function: `RCUTE_TUNING_FILE` is process-wide, and each `Ops` handle reads the
//! tables once, so the cases run in sequence, each with a fresh handle.

use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::scaled_mm::scaled_mm_key;
use rcute_ops::tuning::{Entry, ProblemKey, TableHeader, TuningTable};
use rcute_ops::{validate_scaled_mm, MatrixMut, MatrixRef, Ops, Scale, VectorRef};

/// A named way of spoiling the tuning table.
type Case<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// `Ops::gemm` of a 16 x 256 x 512 TN problem on random data; the relative Frobenius
/// error against a float64 reference, and what the tables chose for it.
fn gemm_error(ops: &Ops) -> (f64, Option<String>) {
    let (m, n, k) = (16usize, 256usize, 512usize);
    let stream = ops.gpu().stream().clone();
    let mut x = 7u64;
    let mut rnd = |len: usize| -> Vec<bf16> {
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                bf16::from_f32(((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
            })
            .collect()
    };
    let (ha, hb) = (rnd(m * k), rnd(n * k));
    let a = stream.clone_htod(&ha).unwrap();
    let b = stream.clone_htod(&hb).unwrap();
    let mut d = stream.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
    let mut dv = MatrixMut::new(&mut d, m, n);
    let p = rcute_ops::validate(&av, &bv, None, &dv, 1.0, 0.0).unwrap();
    let arch = ops.gpu().arch().unwrap();
    let chosen = ops.tuning().gemm(&p, arch.as_str()).map(|s| s.to_string());
    ops.gemm(&av, &bv, None, &mut dv, 1.0, 0.0).unwrap();
    let got = stream.clone_dtoh(&d).unwrap();
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let r: f64 = (0..k).map(|t| ha[i * k + t].to_f64() * hb[j * k + t].to_f64()).sum();
            let g = got[i * n + j].to_f64();
            num += if g.is_nan() { f64::INFINITY } else { (g - r) * (g - r) };
            den += r * r;
        }
    }
    ((num / den).sqrt(), chosen)
}

/// `Ops::scaled_mm` of a 16 x 256 x 512 INT8 problem (per-token and per-channel scales, a
/// bias, bf16 out) on random data: the largest error against the exact result in units of
/// the result's magnitude, what the tables chose, and the problem's table key.
fn scaled_mm_error(ops: &Ops) -> (f64, Option<String>, ProblemKey) {
    let (m, n, k) = (16usize, 256usize, 512usize);
    let stream = ops.gpu().stream().clone();
    let mut x = 11u64;
    let mut next = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    let ha: Vec<i8> = (0..m * k).map(|_| next() as u8 as i8).collect();
    let hb: Vec<i8> = (0..n * k).map(|_| next() as u8 as i8).collect();
    let hsa: Vec<f32> = (0..m).map(|_| 1e-4 * (1.0 + (next() % 100) as f32 / 100.0)).collect();
    let hsb: Vec<f32> = (0..n).map(|_| 1e-2 * (1.0 + (next() % 100) as f32 / 100.0)).collect();
    let hbias: Vec<bf16> = (0..n)
        .map(|_| bf16::from_f32((next() % 200) as f32 / 100.0 - 1.0))
        .collect();
    let a = stream.clone_htod(&ha).unwrap();
    let b = stream.clone_htod(&hb).unwrap();
    let sa = stream.clone_htod(&hsa).unwrap();
    let sb = stream.clone_htod(&hsb).unwrap();
    let bias = stream.clone_htod(&hbias).unwrap();
    let mut d = stream.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
    let biasv = VectorRef::new(&bias, n);
    let (sav, sbv) = (VectorRef::new(&sa, m), VectorRef::new(&sb, n));
    let mut dv = MatrixMut::new(&mut d, m, n);
    let p = validate_scaled_mm(&av, &bv, Scale::auto(sav), Scale::auto(sbv), Some(&biasv), &dv).unwrap();
    let arch = ops.gpu().arch().unwrap();
    let key = scaled_mm_key(&p, arch.as_str());
    let chosen = ops.tuning().lookup(&key).map(|s| s.to_string());
    ops.scaled_mm(&av, &bv, Scale::auto(sav), Scale::auto(sbv), Some(&biasv), &mut dv)
        .unwrap();
    let got = stream.clone_dtoh(&d).unwrap();
    let mut worst = 0f64;
    for i in 0..m {
        for j in 0..n {
            let acc: i64 = (0..k).map(|t| ha[i * k + t] as i64 * hb[j * k + t] as i64).sum();
            let r = acc as f64 * hsa[i] as f64 * hsb[j] as f64 + hbias[j].to_f64();
            let e = (got[i * n + j].to_f64() - r).abs() / r.abs().max(1e-3);
            worst = if e.is_nan() { f64::INFINITY } else { worst.max(e) };
        }
    }
    (worst, chosen, key)
}

/// An entry of `key` measured with this build's kernels on the device of `here`.
fn stamped(key: ProblemKey, config: &str, here: &TableHeader) -> Entry {
    Entry {
        fingerprint: config
            .parse()
            .ok()
            .and_then(|spec| rcute_ops::tuning::kernel_fingerprint(&key, &spec, here.smem_optin).ok()),
        key,
        config: config.into(),
        us: 1.0,
        peer: None,
        peer_us: None,
    }
}

#[test]
fn tables_are_used_where_they_match_and_ignored_elsewhere() {
    let Some(gpu) = gpu_for_test() else { return };
    let here = TableHeader::of(&gpu).expect("driver and NVRTC versions");
    let arch = gpu.arch().unwrap().as_str();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("table.json");
    // An Ampere-class configuration the rules never pick for this shape (they take
    // 16x64x128 for M <= 32): it runs on every GPU the suite supports.
    let forced = "64x64x64,2x2,auto,2,serial";
    let gemm_key = ProblemKey::new("gemm", "bf16", "lincomb", arch, 16, 256, 512);
    let write_entry = |header: &TableHeader, e: Entry| {
        let t = TuningTable {
            header: header.clone(),
            entries: vec![e],
        };
        std::fs::write(&path, t.to_json()).unwrap();
    };
    let write = |header: &TableHeader, config: &str| write_entry(header, stamped(gemm_key.clone(), config, &here));
    // SAFETY (of set_var): this binary has one test, so no other thread reads the environment.
    unsafe { std::env::set_var("RCUTE_TUNING_FILE", &path) };

    write(&here, forced);
    let (err, chosen) = gemm_error(&Ops::new(gpu.clone()));
    assert_eq!(chosen.as_deref(), Some(forced));
    assert!(err < 1e-2, "tuned: relative error {err}");

    let mut other_device = here.clone();
    other_device.device = format!("{} (another one)", here.device);
    // measured with other kernels than this build generates for the forced configuration
    let other_kernels = Entry {
        fingerprint: Some("0123456789abcdef".into()),
        ..stamped(gemm_key.clone(), forced, &here)
    };
    let cases: [Case; 4] = [
        ("another device", Box::new(|| write(&other_device, forced))),
        ("other kernels", Box::new(|| write_entry(&here, other_kernels.clone()))),
        (
            "a truncated file",
            Box::new(|| {
                write(&here, forced);
                let text = std::fs::read_to_string(&path).unwrap();
                std::fs::write(&path, &text[..text.len() / 3]).unwrap();
            }),
        ),
        (
            "an unknown configuration",
            Box::new(|| write(&here, "64x64x64,2x2,auto,2,warp-drive")),
        ),
    ];
    for (what, make) in cases {
        make();
        let ops = Ops::new(gpu.clone());
        let (err, chosen) = gemm_error(&ops);
        assert_eq!(chosen, None, "{what}: the table must be ignored");
        assert!(err < 1e-2, "{what}: relative error {err}");
    }
    // scaled_mm: an Ampere-class INT8 configuration the rules do not pick for M = 16 (they
    // take 16x64x256, or the SM90 kernel on sm_90), under the key the op looks up.
    let (_, _, key) = scaled_mm_error(&Ops::new(gpu.clone()));
    let forced_s8 = "64x64x128,2x2,auto,2,serial";
    let t = TuningTable {
        header: here.clone(),
        // its automatic stage count fills this device's shared memory: the fingerprint too
        entries: vec![stamped(key, forced_s8, &here)],
    };
    std::fs::write(&path, t.to_json()).unwrap();
    let (err, chosen, _) = scaled_mm_error(&Ops::new(gpu.clone()));
    assert_eq!(chosen.as_deref(), Some(forced_s8));
    assert!(err < 1e-2, "tuned scaled_mm: relative error {err}");
    unsafe { std::env::remove_var("RCUTE_TUNING_FILE") };
}
