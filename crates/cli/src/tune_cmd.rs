//! `rcute tune gemm --shape MxNxK [--budget S] [--out FILE]`: time every candidate
//! configuration of a problem on this GPU (`rcute_ops::tuning::space`), check each one's
//! output against cuBLAS, and record the fastest in a tuning table.
//!
//! Per shape: the candidates are compiled in parallel (NVRTC programs are independent;
//! one thread per core), then timed one by one, each paired round-robin with cuBLAS on
//! the same buffers (CUDA-graph replay, medians), with the weight operand B rotated over
//! enough copies to exceed three times the L2 (as far as a graph of
//! `CALLS_PER_SAMPLE` calls reaches; the output says how many bytes were rotated). A
//! progress bar shows candidates compiled and timed, the best so far and the time left;
//! a summary table follows. `--out FILE` merges the winners into a tuning table
//! (`rcute_ops::tuning::TuningTable`), which `Ops` reads through `RCUTE_TUNING_FILE`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;
use half::bf16;
use indicatif::{ProgressBar, ProgressStyle};
use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_kernel::Gpu;
use rcute_ops::tuning::space::gemm_candidates;
use rcute_ops::tuning::{ConfigSpec, Entry, ProblemKey, TableHeader, TuningTable};
use rcute_ops::{MatrixMut, MatrixRef, Ops};

use crate::bench_timing::{median_us, parse_shape, CALLS_PER_SAMPLE};

/// The ops `rcute tune` tunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneOp {
    /// bf16 GEMM (row-major A, column-major B, row-major D), against cuBLAS.
    Gemm,
}

/// `rcute tune` arguments.
#[derive(clap::Args, Debug)]
pub struct TuneArgs {
    /// The op to tune.
    #[arg(value_enum)]
    pub op: TuneOp,
    /// Problem shapes `MxNxK` (repeatable).
    #[arg(long = "shape", required = true)]
    pub shapes: Vec<String>,
    /// Seconds per shape for timing (compilation comes first and is not counted).
    #[arg(long, default_value_t = 45.0)]
    pub budget: f64,
    /// Timed samples per candidate (median reported).
    #[arg(long, default_value_t = 15)]
    pub iters: usize,
    /// Merge the winners into this tuning table.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Bytes the rotated weight copies must exceed: three times the H200's 50 MB L2.
const ROTATE_BYTES: usize = 150 << 20;

/// One timed candidate.
struct Timed {
    spec: ConfigSpec,
    us: f64,
    cublas_us: f64,
}

/// The summary of one shape.
struct ShapeResult {
    shape: (usize, usize, usize),
    rules: Option<Timed>,
    best: Option<Timed>,
    candidates: usize,
    timed: usize,
    rejected: Vec<String>,
    rotated_mb: f64,
}

/// Run `rcute tune`; returns the summary table.
pub fn run(args: &TuneArgs) -> Result<String, String> {
    let shapes = args
        .shapes
        .iter()
        .map(|s| parse_shape(s))
        .collect::<Result<Vec<_>, _>>()?;
    let gpu = match Gpu::detect() {
        Ok(Some(g)) => g,
        Ok(None) => return Err("no CUDA GPU found: tuning needs one".into()),
        Err(e) => return Err(format!("no CUDA GPU usable: {e}")),
    };
    let arch = gpu
        .arch()
        .ok_or_else(|| format!("no rcute arch for {:?}", gpu.compute_capability()))?;
    let stream = gpu.stream().clone();
    // SAFETY: one stream; graph capture of the timed calls then sees no foreign events.
    unsafe { stream.context().disable_event_tracking() };
    let ops = Ops::new(gpu.clone());
    let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS: {e}"))?;
    let mut results = Vec::new();
    for &shape in &shapes {
        results.push(tune_gemm(&gpu, &ops, &blas, shape, args)?);
    }
    let mut out = summary(&gpu, &results);
    if let Some(path) = &args.out {
        let header = TableHeader::of(&gpu).ok_or("cannot read the driver or NVRTC version")?;
        let entries: Vec<Entry> = results
            .iter()
            .filter_map(|r| {
                let b = r.best.as_ref()?;
                let (m, n, k) = r.shape;
                Some(Entry {
                    key: ProblemKey::new("gemm", "bf16", "lincomb", arch.as_str(), m, n, k),
                    config: b.spec.to_string(),
                    us: b.us,
                    peer: Some("cublas".into()),
                    peer_us: Some(b.cublas_us),
                })
            })
            .collect();
        TuningTable::merge_into_file(path, &header, &entries).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push_str(&format!("{} entries merged into {}\n", entries.len(), path.display()));
    }
    Ok(out)
}

/// Compile every candidate's kernel on all cores (through the `Ops` kernel tables, so the
/// timed calls find them built); returns the candidates that compiled and why the others
/// did not.
fn compile_all(ops: &Ops, specs: Vec<ConfigSpec>, bar: &ProgressBar) -> (Vec<ConfigSpec>, Vec<String>) {
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(specs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<(), String>>>> =
        specs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { break };
                let r = match spec {
                    ConfigSpec::Sm80(x) => ops
                        .load_gemm(&x.apply(GemmSm80Config::bf16(Major::K, Major::K, x.tile, x.warps)))
                        .map(|_| ()),
                    ConfigSpec::Sm90(x) => ops
                        .load_gemm_sm90(&x.apply(GemmSm90Config::bf16(x.tile, x.schedule)).without_c())
                        .map(|_| ()),
                };
                *results[i].lock().expect("no panics while holding it") = Some(r.map_err(|e| e.to_string()));
                bar.inc(1);
            });
        }
    });
    let mut ok = Vec::new();
    let mut rejected = Vec::new();
    for (spec, r) in specs.into_iter().zip(results) {
        match r.into_inner().expect("no panics while holding it") {
            Some(Ok(())) => ok.push(spec),
            Some(Err(e)) => rejected.push(format!("{spec}: {e}")),
            None => rejected.push(format!("{spec}: not compiled")),
        }
    }
    (ok, rejected)
}

/// Tune one bf16 GEMM shape.
fn tune_gemm(
    gpu: &Gpu,
    ops: &Ops,
    blas: &CudaBlas,
    shape: (usize, usize, usize),
    args: &TuneArgs,
) -> Result<ShapeResult, String> {
    let (m, n, k) = shape;
    let stream = gpu.stream().clone();
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let specs = gemm_candidates(m, n, k, 1, gpu.compute_capability(), gpu.sm_count());
    let total = specs.len();
    let rules_spec = specs[0].clone(); // gemm_candidates puts the rules' choice first
    let bar = ProgressBar::new(total as u64).with_prefix(format!("{m}x{n}x{k} compile"));
    bar.set_style(
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({elapsed}, {eta} left)")
            .map_err(|x| x.to_string())?
            .progress_chars("=> "),
    );
    let (specs, mut rejected) = compile_all(ops, specs, &bar);
    // Inputs: A, and B rotated over copies that together exceed ROTATE_BYTES.
    let b_bytes = n * k * 2;
    let copies = ROTATE_BYTES.div_ceil(b_bytes).clamp(1, 64);
    let a: CudaSlice<bf16> = stream
        .clone_htod(&crate::bench_cmd::random_bf16(m * k, 11))
        .map_err(e)?;
    let bs: Vec<CudaSlice<bf16>> = (0..copies)
        .map(|i| stream.clone_htod(&crate::bench_cmd::random_bf16(k * n, 12 + i as u64)))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let mut d: CudaSlice<bf16> = stream.alloc_zeros(m * n).map_err(e)?;
    let mut dref: CudaSlice<bf16> = stream.alloc_zeros(m * n).map_err(e)?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: bf16::ONE,
        lda: k as i32,
        ldb: k as i32,
        beta: bf16::ZERO,
        ldc: n as i32,
    };
    // The reference: cuBLAS on the first copy.
    // SAFETY: the buffers hold K*N, M*K and M*N elements as `cfg` describes.
    unsafe { blas.gemm(cfg, &bs[0], &a, &mut dref) }.map_err(|x| x.to_string())?;
    let want = stream.clone_dtoh(&dref).map_err(e)?;
    let max_ref = want.iter().map(|x| x.to_f64().abs()).fold(0.0, f64::max).max(1e-30);
    bar.set_prefix(format!("{m}x{n}x{k} time"));
    bar.set_position(0);
    bar.set_length(specs.len() as u64);
    let start = Instant::now();
    let mut timed: Vec<Timed> = Vec::new();
    for spec in &specs {
        if start.elapsed().as_secs_f64() > args.budget {
            break;
        }
        let choice = spec.gemm_choice();
        // Correctness first, on the first copy.
        {
            let p = rcute_ops::validate(
                &MatrixRef::new(&a, m, k),
                &MatrixRef::new(&bs[0], k, n).col_major(),
                None,
                &MatrixMut::new(&mut d, m, n),
                1.0,
                0.0,
            )
            .map_err(|x| x.to_string())?;
            let run = ops.run_gemm_with(&p, Some(&choice)).map_err(|x| x.to_string());
            let got = run.and_then(|()| stream.clone_dtoh(&d).map_err(e))?;
            let err = got
                .iter()
                .zip(&want)
                .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
                .fold(0.0, f64::max);
            if got.iter().any(|x| x.is_nan()) || err / max_ref > 2e-2 {
                rejected.push(format!(
                    "{spec}: max relative error {:.2e} against cuBLAS",
                    err / max_ref
                ));
                bar.inc(1);
                continue;
            }
        }
        let mut turn = 0usize;
        let mut rc = || -> Result<(), String> {
            turn += 1;
            let bv = MatrixRef::new(&bs[turn % copies], k, n).col_major();
            let av = MatrixRef::new(&a, m, k);
            let p = rcute_ops::validate(&av, &bv, None, &MatrixMut::new(&mut d, m, n), 1.0, 0.0)
                .map_err(|x| x.to_string())?;
            ops.run_gemm_with(&p, Some(&choice)).map_err(|x| x.to_string())
        };
        let mut turn_c = 0usize;
        let mut cublas = || -> Result<(), String> {
            turn_c += 1;
            // SAFETY: as for the reference call.
            unsafe { blas.gemm(cfg, &bs[turn_c % copies], &a, &mut dref) }.map_err(|x| x.to_string())
        };
        match median_us(&stream, args.iters, true, &mut [&mut rc, &mut cublas]) {
            Ok((t, _)) => timed.push(Timed {
                spec: spec.clone(),
                us: t[0],
                cublas_us: t[1],
            }),
            Err(x) => rejected.push(format!("{spec}: {x}")),
        }
        if let Some(b) = timed.iter().min_by(|x, y| x.us.total_cmp(&y.us)) {
            bar.set_message(format!(
                "best {} {:.1} us ({:.3}x cuBLAS)",
                b.spec,
                b.us,
                b.cublas_us / b.us
            ));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let n_timed = timed.len();
    let rules = timed
        .iter()
        .position(|t| t.spec == rules_spec)
        .map(|i| timed.swap_remove(i));
    let best = timed.into_iter().chain(rules.iter().map(|r| Timed {
        spec: r.spec.clone(),
        us: r.us,
        cublas_us: r.cublas_us,
    }));
    let best = best.min_by(|x, y| x.us.total_cmp(&y.us));
    Ok(ShapeResult {
        shape,
        rules,
        best,
        candidates: total,
        timed: n_timed,
        rejected,
        rotated_mb: (copies.min(CALLS_PER_SAMPLE) * b_bytes) as f64 / 1e6,
    })
}

/// The summary table.
fn summary(gpu: &Gpu, results: &[ShapeResult]) -> String {
    let mut out = format!(
        "device: {} ({} SMs); bf16 gemm, TN, random data, B rotated, CUDA-graph medians\n",
        gpu.name(),
        gpu.sm_count()
    );
    out.push_str(&format!(
        "{:<18} {:>6} {:>9} {:<34} {:>9} {:>10} {:>9} {:>9} {:>8}\n",
        "shape", "tried", "rules_us", "best", "best_us", "cublas_us", "vs_cublas", "vs_rules", "rot_MB"
    ));
    for r in results {
        let (m, n, k) = r.shape;
        let rules_us = r.rules.as_ref().map_or(f64::NAN, |t| t.us);
        match &r.best {
            Some(b) => out.push_str(&format!(
                "{:<18} {:>6} {:>9.1} {:<34} {:>9.1} {:>10.1} {:>9.3} {:>9.3} {:>8.0}\n",
                format!("{m}x{n}x{k}"),
                format!("{}/{}", r.timed, r.candidates),
                rules_us,
                b.spec.to_string(),
                b.us,
                b.cublas_us,
                b.cublas_us / b.us,
                rules_us / b.us,
                r.rotated_mb
            )),
            None => out.push_str(&format!("{:<18} no candidate ran\n", format!("{m}x{n}x{k}"))),
        }
        for why in &r.rejected {
            out.push_str(&format!("    rejected {why}\n"));
        }
    }
    out
}
