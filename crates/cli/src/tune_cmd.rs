//! `rcute tune gemm|scaled-mm --shape MxNxK [--budget S] [--out FILE]`: time every
//! candidate configuration of a problem on this GPU (`rcute_ops::tuning::space`), check
//! each one's output against a reference, and record the fastest in a tuning table.
//!
//! Per shape: the candidates are compiled in parallel (NVRTC programs are independent;
//! one thread per core), then checked and timed one by one, each paired round-robin with
//! the peer on the same buffers (CUDA-graph replay, medians), with the weight operand B
//! rotated over enough copies to exceed three times the L2 (as far as a graph of
//! `CALLS_PER_SAMPLE` calls reaches; the output says how many bytes were rotated). A
//! progress bar shows candidates compiled and timed, the best so far and the time left;
//! a summary table follows. `--out FILE` merges the winners into a tuning table
//! (`rcute_ops::tuning::TuningTable`), which `Ops` reads through `RCUTE_TUNING_FILE`.
//!
//! The problems: [`gemm`] (bf16, against cuBLAS) and [`scaled_mm`] (INT8 with per-token
//! and per-channel scales, a bias and bf16 out, checked against cuBLASLt's exact s32
//! accumulator and timed against cuBLASLt's INT8 GEMM).

pub mod gemm;
pub mod scaled_mm;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cudarc::cublas::CudaBlas;
use indicatif::{ProgressBar, ProgressStyle};
use rcute_kernel::Gpu;
use rcute_ops::tuning::{ConfigSpec, Entry, ProblemKey, TableHeader, TuningTable};
use rcute_ops::Ops;

use crate::bench_timing::{median_us, parse_shape, CALLS_PER_SAMPLE};

/// The ops `rcute tune` tunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneOp {
    /// bf16 GEMM (row-major A, column-major B, row-major D), against cuBLAS.
    Gemm,
    /// INT8 scaled_mm (per-token / per-channel scales, bias, bf16 out), against cuBLASLt.
    ScaledMm,
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
pub const ROTATE_BYTES: usize = 150 << 20;

/// Builds one candidate's kernel (called from several threads at once).
pub type Compiler = Box<dyn Fn(&Ops, &ConfigSpec) -> Result<(), String> + Sync>;

/// One problem under tuning, with its buffers on the GPU and its peer.
pub trait Tunable {
    /// `(M, N, K)`.
    fn shape(&self) -> (usize, usize, usize);
    /// The candidates, the rules' choice first.
    fn candidates(&self) -> &[ConfigSpec];
    /// What builds a candidate's kernel without running it.
    fn compiler(&self) -> Compiler;
    /// Run a candidate on B copy `turn`.
    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String>;
    /// Run the peer on B copy `turn`.
    fn peer(&self, turn: usize) -> Result<(), String>;
    /// Run a candidate once and compare its output with the reference; `Err` says why it
    /// is wrong.
    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String>;
    /// The table key of the problem.
    fn key(&self, arch: &str) -> Result<ProblemKey, String>;
    /// B copies and the bytes of one.
    fn rotated(&self) -> (usize, usize);
    /// The peer's name in the table.
    fn peer_name(&self) -> &'static str;
}

/// Copies of a weight of `bytes` that together exceed [`ROTATE_BYTES`] (at most 64).
pub fn copies_for(bytes: usize) -> usize {
    ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64)
}

/// One timed candidate.
struct Timed {
    spec: ConfigSpec,
    us: f64,
    peer_us: f64,
}

/// The summary of one shape.
struct ShapeResult {
    shape: (usize, usize, usize),
    key: ProblemKey,
    peer: &'static str,
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
    let gpu = crate::bench_timing::detect_gpu("tuning")?;
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
        let t: Box<dyn Tunable + '_> = match args.op {
            TuneOp::Gemm => Box::new(gemm::GemmTune::new(&ops, &blas, shape)?),
            TuneOp::ScaledMm => Box::new(scaled_mm::ScaledMmTune::new(&ops, shape)?),
        };
        results.push(tune_one(&ops, t.as_ref(), arch.as_str(), args)?);
    }
    let mut out = summary(&gpu, args.op, &results);
    if let Some(path) = &args.out {
        let header = TableHeader::of(&gpu).ok_or("cannot read the driver or NVRTC version")?;
        let entries: Vec<Entry> = results
            .iter()
            .filter_map(|r| {
                let b = r.best.as_ref()?;
                Some(Entry {
                    key: r.key.clone(),
                    config: b.spec.to_string(),
                    us: b.us,
                    peer: Some(r.peer.into()),
                    peer_us: Some(b.peer_us),
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
fn compile_all(
    ops: &Ops,
    specs: &[ConfigSpec],
    compile: &Compiler,
    bar: &ProgressBar,
) -> (Vec<ConfigSpec>, Vec<String>) {
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
                let r = compile(ops, spec);
                *results[i].lock().expect("no panics while holding it") = Some(r);
                bar.inc(1);
            });
        }
    });
    let mut ok = Vec::new();
    let mut rejected = Vec::new();
    for (spec, r) in specs.iter().zip(results) {
        match r.into_inner().expect("no panics while holding it") {
            Some(Ok(())) => ok.push(spec.clone()),
            Some(Err(e)) => rejected.push(format!("{spec}: {e}")),
            None => rejected.push(format!("{spec}: not compiled")),
        }
    }
    (ok, rejected)
}

/// Tune one problem: compile, check and time its candidates within the budget.
fn tune_one(ops: &Ops, t: &dyn Tunable, arch: &str, args: &TuneArgs) -> Result<ShapeResult, String> {
    let (m, n, k) = t.shape();
    let stream = ops.gpu().stream().clone();
    let total = t.candidates().len();
    let rules_spec = t.candidates()[0].clone();
    let bar = ProgressBar::new(total as u64).with_prefix(format!("{m}x{n}x{k} compile"));
    bar.set_style(
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({elapsed}, {eta} left)")
            .map_err(|x| x.to_string())?
            .progress_chars("=> "),
    );
    let (specs, mut rejected) = compile_all(ops, t.candidates(), &t.compiler(), &bar);
    bar.set_prefix(format!("{m}x{n}x{k} time"));
    bar.set_position(0);
    bar.set_length(specs.len() as u64);
    let start = Instant::now();
    let mut timed: Vec<Timed> = Vec::new();
    for spec in &specs {
        if start.elapsed().as_secs_f64() > args.budget {
            break;
        }
        if let Err(why) = t.check(ops, spec) {
            rejected.push(format!("{spec}: {why}"));
            bar.inc(1);
            continue;
        }
        let mut turn = 0usize;
        let mut rc = || {
            turn += 1;
            t.run(ops, spec, turn)
        };
        let mut turn_p = 0usize;
        let mut peer = || {
            turn_p += 1;
            t.peer(turn_p)
        };
        match median_us(&stream, args.iters, true, &mut [&mut rc, &mut peer]) {
            Ok((v, _)) => timed.push(Timed {
                spec: spec.clone(),
                us: v[0],
                peer_us: v[1],
            }),
            Err(x) => rejected.push(format!("{spec}: {x}")),
        }
        if let Some(b) = timed.iter().min_by(|x, y| x.us.total_cmp(&y.us)) {
            bar.set_message(format!(
                "best {} {:.1} us ({:.3}x peer)",
                b.spec,
                b.us,
                b.peer_us / b.us
            ));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let n_timed = timed.len();
    let rules = timed
        .iter()
        .position(|x| x.spec == rules_spec)
        .map(|i| timed.swap_remove(i));
    let best = timed.into_iter().chain(rules.iter().map(|r| Timed {
        spec: r.spec.clone(),
        us: r.us,
        peer_us: r.peer_us,
    }));
    let best = best.min_by(|x, y| x.us.total_cmp(&y.us));
    let (copies, bytes) = t.rotated();
    Ok(ShapeResult {
        shape: (m, n, k),
        key: t.key(arch)?,
        peer: t.peer_name(),
        rules,
        best,
        candidates: total,
        timed: n_timed,
        rejected,
        rotated_mb: (copies.min(CALLS_PER_SAMPLE) * bytes) as f64 / 1e6,
    })
}

/// The summary table.
fn summary(gpu: &Gpu, op: TuneOp, results: &[ShapeResult]) -> String {
    let what = match op {
        TuneOp::Gemm => "bf16 gemm, TN, peer cuBLAS",
        TuneOp::ScaledMm => "INT8 scaled_mm, token/channel scales + bias, bf16 out, peer cuBLASLt INT8 (s32 out)",
    };
    let mut out = format!(
        "device: {} ({} SMs); {what}; random data, B rotated, CUDA-graph medians\n",
        gpu.name(),
        gpu.sm_count()
    );
    out.push_str(&format!(
        "{:<18} {:>6} {:>9} {:<34} {:>9} {:>9} {:>8} {:>9} {:>8}\n",
        "shape", "tried", "rules_us", "best", "best_us", "peer_us", "vs_peer", "vs_rules", "rot_MB"
    ));
    for r in results {
        let (m, n, k) = r.shape;
        let rules_us = r.rules.as_ref().map_or(f64::NAN, |t| t.us);
        match &r.best {
            Some(b) => out.push_str(&format!(
                "{:<18} {:>6} {:>9.1} {:<34} {:>9.1} {:>9.1} {:>8.3} {:>9.3} {:>8.0}\n",
                format!("{m}x{n}x{k}"),
                format!("{}/{}", r.timed, r.candidates),
                rules_us,
                b.spec.to_string(),
                b.us,
                b.peer_us,
                b.peer_us / b.us,
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
