//! `rcute`: the rcute command-line tool. Subcommands live in the `rcute_cli` library.

use clap::{Parser, Subcommand};
use rcute_cli::layout_cmd::{self, LayoutArgs};
use rcute_cli::{
    bench_awq, bench_cmd, bench_moe, bench_scaled_mm, bench_stream, gen_cmd, run_cmd, table_cmd, tune_cmd,
};
use std::io::Write;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "rcute", version, about = "rcute: CuTe's layout algebra and kernels in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a layout-algebra expression, e.g. `zipped_divide((128,64),[32,16])`.
    Layout(LayoutArgs),
    /// Write the standard catalogue's generated CUDA sources into kernels/ (--check: verify only).
    Gen(gen_cmd::GenArgs),
    /// The main job: generate the catalogue, compile it with NVRTC and show what was produced.
    Run(run_cmd::RunArgs),
    /// Benchmarks on the GPU against the vendor library (exit 1 without a GPU).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Time the candidate kernels of a problem on this GPU and record the fastest in a
    /// tuning table: `rcute tune gemm --shape MxNxK [--budget S] [--out FILE]`.
    Tune(tune_cmd::TuneArgs),
    /// Which entries of tuning tables this build applies (CPU only): `rcute table FILE...
    /// [--restamp OP] [--check]`.
    Table(table_cmd::TableArgs),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// rcute GEMM vs cuBLAS on the same random buffers: `--shape MxNxK [--shape ...]`.
    Gemm(bench_cmd::BenchGemmArgs),
    /// rcute INT8 scaled_mm (per-token / per-channel scales, bias) vs cuBLASLt int8:
    /// `--shape MxNxK [--shape ...]`.
    ScaledMm(bench_scaled_mm::BenchScaledMmArgs),
    /// rcute AWQ W4A16 GEMM vs cuBLAS fp16 on the dequantized weight, cold weights:
    /// `--shape MxNxK [--shape ...] [--group 128] [--dequantize]`.
    Awq(bench_awq::BenchAwqArgs),
    /// rcute fused MoE layer vs the same layer's GEMMs from cuBLAS per expert:
    /// `--tokens T [--tokens ...] --experts E --topk k --hidden H --inter I`.
    Moe(bench_moe::BenchMoeArgs),
    /// Load-only weight-streaming probes (register ring, cp.async, cp.async.bulk) against a
    /// device-to-device copy: which load recipe reaches the DRAM bandwidth on this GPU.
    Stream(bench_stream::BenchStreamArgs),
}

/// Print a (report, success) pair; failure exits 1.
fn report(r: Result<(String, bool), String>) -> ExitCode {
    match r {
        Ok((text, ok)) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Gen(args) => report(gen_cmd::run(&args).map_err(|e| e.to_string())),
        Command::Run(args) => report(run_cmd::run(&args)),
        Command::Table(args) => report(table_cmd::run(&args)),
        Command::Tune(args) => report(tune_cmd::run(&args).map(|t| (t, true))),
        Command::Bench(BenchCommand::Gemm(args)) => report(bench_cmd::run(&args).map(|t| (t, true))),
        Command::Bench(BenchCommand::ScaledMm(args)) => report(bench_scaled_mm::run(&args).map(|t| (t, true))),
        Command::Bench(BenchCommand::Awq(args)) => report(bench_awq::run(&args).map(|t| (t, true))),
        Command::Bench(BenchCommand::Stream(args)) => report(bench_stream::run(&args).map(|t| (t, true))),
        Command::Bench(BenchCommand::Moe(args)) => report(bench_moe_any(&args).map(|t| (t, true))),
        Command::Layout(args) => match layout_cmd::run(&args) {
            Ok(out) => {
                // A closed stdout (e.g. `| head`) is not an error worth a panic.
                let _ = std::io::stdout().write_all(out.as_bytes());
                ExitCode::SUCCESS
            }
            Err(f) => {
                let _ = std::io::stderr().write_all(f.render(&args.expr).as_bytes());
                ExitCode::from(f.exit_code())
            }
        },
    }
}

/// `rcute bench moe`: one GPU, or the expert-parallel layer over `--ranks` GPUs.
fn bench_moe_any(args: &bench_moe::BenchMoeArgs) -> Result<String, String> {
    if args.ranks <= 1 {
        return bench_moe::run(args);
    }
    #[cfg(feature = "nccl")]
    return rcute_cli::bench_moe_ep::run(args);
    #[cfg(not(feature = "nccl"))]
    Err("--ranks needs NCCL: build rcute with `cargo build -p rcute-cli --features nccl`".into())
}
