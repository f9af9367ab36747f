//! `rcute tune gemm|scaled-mm|awq|moe --shape MxNxK [--budget S] [--out FILE]`: time every
//! candidate configuration of a problem on this GPU (`rcute_ops::tuning::space`), check
//! each one's output against a reference, and record the fastest in a tuning table.
//!
//! The tuning itself is `rcute_ops::tuning::tuner::tune`, the code `RCUTE_TUNING=on-miss`
//! runs inside the ops: candidates compiled in parallel (one thread per core), then each
//! checked and timed, paired round-robin with the peer where there is one (CUDA-graph
//! replay, medians), the weights rotated over copies that exceed three times the L2 (as
//! far as a graph of `CALLS_PER_SAMPLE` calls reaches; the output says how many bytes were
//! rotated). The problems are the ops' own probes (`rcute_ops::tuning::probe`: buffers,
//! candidates, the sampled check); this command adds the peers ([`peered`]), a progress
//! bar (candidates compiled and timed, the best so far, the time left) and a summary
//! table. `--out FILE` merges the winners into a tuning table
//! (`rcute_ops::tuning::TuningTable`), which `Ops` reads through `RCUTE_TUNING_FILE`.
//!
//! The problems: [`gemm`] (bf16, checked against float64, timed against cuBLAS),
//! [`scaled_mm`] (INT8 or FP8 e4m3 with per-token and per-channel scales, a bias and bf16
//! out, checked against the exact product; INT8 timed against cuBLASLt's INT8 GEMM), AWQ
//! (W4A16 on AutoAWQ tensors, f16, checked against float64, no peer) and MoE (the fused
//! layer, bf16, checked against the rules' choice, no peer).

pub mod gemm;
pub mod peered;
pub mod scaled_mm;

use std::path::PathBuf;

use cudarc::cublas::CudaBlas;
use half::{bf16, f16};
use indicatif::{ProgressBar, ProgressStyle};
use rcute_kernel::Gpu;
use rcute_ops::tuning::probe::{AwqProbe, MoeProbe};
use rcute_ops::tuning::tuner::{tune, Timed, Tunable, TuneBudget, TuneObserver, TuneOutcome};
use rcute_ops::tuning::{Entry, TableHeader, TuningTable};
use rcute_ops::Ops;

use crate::bench_timing::{parse_shapes, CALLS_PER_SAMPLE};

/// The ops `rcute tune` tunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneOp {
    /// bf16 GEMM (row-major A, column-major B, row-major D), against cuBLAS.
    Gemm,
    /// scaled_mm (per-token / per-channel scales, bias, bf16 out; `--dtype s8`, against
    /// cuBLASLt's INT8 GEMM, or `e4m3`, no peer).
    ScaledMm,
    /// AWQ W4A16 gemm (f16, AutoAWQ layout; `--group`), over the op's tiles and K splits.
    Awq,
    /// Fused MoE (`--shape TOKENSxHIDDENxINTER`, bf16, `--experts`, `--topk`), over the
    /// grouped GEMMs' tiles, pipeline stages and GEMM2's K splits.
    Moe,
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
    /// scaled-mm: operand type, `s8` or `e4m3`.
    #[arg(long, default_value = "s8")]
    pub dtype: String,
    /// AWQ: quantization group size.
    #[arg(long, default_value_t = 128)]
    pub group: usize,
    /// MoE: experts (all local).
    #[arg(long, default_value_t = 8)]
    pub experts: usize,
    /// MoE: experts per token.
    #[arg(long, default_value_t = 2)]
    pub topk: usize,
}

/// The progress bar of one shape: candidates compiled, then checked and timed, with the
/// best so far and the time left.
struct Bar(ProgressBar, String);

impl TuneObserver for Bar {
    fn compiling(&self, total: usize) {
        self.0.set_prefix(format!("{} compile", self.1));
        self.0.set_length(total as u64);
    }
    fn compiled(&self) {
        self.0.inc(1);
    }
    fn timing(&self, total: usize) {
        self.0.set_prefix(format!("{} time", self.1));
        self.0.set_position(0);
        self.0.set_length(total as u64);
    }
    fn timed(&self, best: Option<&Timed>) {
        if let Some(b) = best {
            let vs = b.peer_us.map_or(String::new(), |p| format!(" ({:.3}x peer)", p / b.us));
            self.0.set_message(format!("best {} {:.1} us{vs}", b.spec, b.us));
        }
        self.0.inc(1);
    }
}

/// The summary of one shape.
struct ShapeResult {
    shape: (usize, usize, usize),
    peer: Option<&'static str>,
    outcome: TuneOutcome,
    rotated_mb: f64,
}

/// Run `rcute tune`; returns the summary table.
pub fn run(args: &TuneArgs) -> Result<String, String> {
    let shapes = parse_shapes(&args.shapes)?;
    // SAFETY: one stream only (every buffer here, and the ops handle's).
    let (gpu, stream) = unsafe { crate::bench_timing::one_stream_gpu("tuning") }?;
    gpu.arch()
        .ok_or_else(|| format!("no rcute arch for {:?}", gpu.compute_capability()))?;
    let ops = Ops::new(gpu.clone());
    let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS: {e}"))?;
    let mut results = Vec::new();
    for &shape in &shapes {
        let t: Box<dyn Tunable + '_> = match args.op {
            TuneOp::Gemm => gemm::tunable(&ops, &blas, shape)?,
            TuneOp::ScaledMm => scaled_mm::tunable(&ops, &args.dtype, shape)?,
            TuneOp::Awq => Box::new(AwqProbe::<f16>::new(&ops, shape, args.group)?),
            TuneOp::Moe => Box::new(MoeProbe::<bf16>::new(&ops, shape, (args.experts, args.topk))?),
        };
        results.push(tune_one(&ops, t.as_ref(), args)?);
    }
    let mut out = summary(&gpu, args, &results);
    if let Some(path) = &args.out {
        let header = TableHeader::of(&gpu).ok_or("cannot read the driver or NVRTC version")?;
        let entries: Vec<Entry> = results.iter().filter_map(|r| r.outcome.entry(r.peer)).collect();
        TuningTable::merge_into_file(path, &header, &entries).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push_str(&format!("{} entries merged into {}\n", entries.len(), path.display()));
    }
    Ok(out)
}

/// Tune one problem (`rcute_ops::tuning::tuner::tune`) with a progress bar.
fn tune_one(ops: &Ops, t: &dyn Tunable, args: &TuneArgs) -> Result<ShapeResult, String> {
    let (m, n, k) = t.shape();
    let bar = ProgressBar::new(t.candidates().len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({elapsed}, {eta} left)")
            .map_err(|x| x.to_string())?
            .progress_chars("=> "),
    );
    let budget = TuneBudget {
        seconds: args.budget,
        include_compile: false,
        iters: args.iters,
        graphs: true,
    };
    let bar = Bar(bar, format!("{m}x{n}x{k}"));
    let outcome = tune(ops, t, &budget, &bar)?;
    bar.0.finish_and_clear();
    let (copies, bytes) = t.rotated();
    Ok(ShapeResult {
        shape: (m, n, k),
        peer: t.peer_name(),
        outcome,
        rotated_mb: (copies.min(CALLS_PER_SAMPLE) * bytes) as f64 / 1e6,
    })
}

/// The summary table.
fn summary(gpu: &Gpu, args: &TuneArgs, results: &[ShapeResult]) -> String {
    let what = match args.op {
        TuneOp::Gemm => "bf16 gemm, TN, peer cuBLAS".to_string(),
        TuneOp::ScaledMm if args.dtype == "e4m3" || args.dtype == "fp8" => {
            "FP8 e4m3 scaled_mm, token/channel scales + bias, bf16 out, no peer".to_string()
        }
        TuneOp::ScaledMm => {
            "INT8 scaled_mm, token/channel scales + bias, bf16 out, peer cuBLASLt INT8 (s32 out)".to_string()
        }
        TuneOp::Awq => format!("AWQ W4A16 gemm, f16, group {}, no peer", args.group),
        TuneOp::Moe => format!(
            "fused MoE (shape = tokens x hidden x inter), bf16, {} experts, top-{}, no peer",
            args.experts, args.topk
        ),
    };
    let mut out = format!(
        "device: {} ({} SMs); {what}; random data, weights rotated, CUDA-graph medians\n",
        gpu.name(),
        gpu.sm_count()
    );
    out.push_str(&format!(
        "{:<18} {:>6} {:>9} {:<34} {:>9} {:>9} {:>8} {:>9} {:>8}\n",
        "shape", "tried", "rules_us", "best", "best_us", "peer_us", "vs_peer", "vs_rules", "rot_MB"
    ));
    for r in results {
        let (m, n, k) = r.shape;
        let o = &r.outcome;
        let rules_us = o.rules.as_ref().map_or(f64::NAN, |t| t.us);
        match &o.best {
            Some(b) => {
                let (peer_us, vs_peer) = match b.peer_us {
                    Some(p) => (format!("{p:.1}"), format!("{:.3}", p / b.us)),
                    None => ("-".into(), "-".into()),
                };
                out.push_str(&format!(
                    "{:<18} {:>6} {:>9.1} {:<34} {:>9.1} {:>9} {:>8} {:>9.3} {:>8.0}\n",
                    format!("{m}x{n}x{k}"),
                    format!("{}/{}", o.timed, o.candidates),
                    rules_us,
                    b.spec.to_string(),
                    b.us,
                    peer_us,
                    vs_peer,
                    rules_us / b.us,
                    r.rotated_mb
                ))
            }
            None => out.push_str(&format!("{:<18} no candidate ran\n", format!("{m}x{n}x{k}"))),
        }
        for why in &o.rejected {
            out.push_str(&format!("    rejected {why}\n"));
        }
    }
    out
}
