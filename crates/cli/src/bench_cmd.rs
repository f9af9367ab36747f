//! `rcute bench gemm`: rcute's GEMM against cuBLAS on the same random buffers, in one
//! process, timed with CUDA events (warm-up, then the median of many runs; each variant is
//! sampled alternately with cuBLAS, so both see the same clocks and temperature). Samples
//! replay CUDA graphs of 10 calls (device time); `--eager` times plain launches instead.
//! B (the weight) rotates call by call over copies totalling more than three times the L2
//! (`--rotate-mb`), for rcute and cuBLAS alike, so decode shapes read it from HBM.

use crate::bench_random::random_bf16;
use crate::bench_timing::{host_us, max_rel_diff, median_us, parse_shapes, Rotation, ROTATE_BYTES};
use crate::lt_peer::LtGemm;
use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;
use half::bf16;
use rcute_kernel::Gpu;
use rcute_ops::select::Choice;
use rcute_ops::tuning::ConfigSpec;
use rcute_ops::{MatrixMut, MatrixRef, Ops};
use std::cell::Cell;

/// Options of `rcute bench gemm`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchGemmArgs {
    /// Problem shapes `MxNxK` (repeatable), e.g. `--shape 4096x4096x4096`.
    #[arg(long = "shape", required = true)]
    pub shapes: Vec<String>,
    /// Input element type: `bf16` (against cuBLAS), or `e4m3` (the SM90 FP8 scaled GEMM:
    /// row-wise f32 scales per row of A and per column of B, bf16 out, no bias; against
    /// cuBLASLt's e4m3 GEMM with the same row-wise scales, which `torch._scaled_mm` calls;
    /// `scripts/torch_peers.py` times torch itself).
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Timed samples per kernel, each the mean of 10 back-to-back launches (median reported).
    #[arg(long, default_value_t = 30)]
    pub iters: usize,
    /// Also time forced kernel configurations (repeatable): the SM80 kernel as
    /// `BMxBNxBK,WMxWN,STAGES|auto,SPLITK[,serial|parallel][,rN]` (e.g.
    /// `--config 64x64x64,2x2,4,4,serial`), the SM90 kernel as
    /// `sm90:BMxBNxBK,ws|coop|pp[,sSTAGES][,eEPI_MxEPI_N][,rLOG2_SWIZZLE][,am|an][,kSPLIT][,cCMxCN][,wMMA_PIPE][,sk|skPARTS]`
    /// (e.g. `--config sm90:128x256x64,coop`). Without it only the automatic selection runs.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// Time eager launches instead of replaying CUDA graphs of them (the default replays
    /// graphs, so small problems show device time rather than the host's launch cost; the
    /// host cost is reported separately as `host_us`).
    #[arg(long)]
    pub eager: bool,
    /// Write the table as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// B's rotated copies total at least this many MB (0: one copy, read from a warm L2).
    #[arg(long, default_value_t = ROTATE_BYTES / 1_000_000)]
    pub rotate_mb: usize,
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// `auto` or the forced configuration string.
    pub config: String,
    /// M, N, K.
    pub shape: (usize, usize, usize),
    /// rcute median time in microseconds.
    pub rcute_us: f64,
    /// cuBLAS median time in microseconds.
    pub cublas_us: f64,
    /// Host time to enqueue one rcute call (validation, selection, tensor maps, launches),
    /// in microseconds: when it exceeds `rcute_us` the call is launch-bound.
    pub host_us: f64,
    /// Max relative error of rcute vs cuBLAS (max |r - c| / max |c|).
    pub max_rel_err: f64,
    /// Copies of B rotated through (1: L2-warm).
    pub b_copies: usize,
}

/// A forced configuration (`rcute_ops::tuning::ConfigSpec`'s grammar) as a `gemm` choice.
fn parse_config(s: &str) -> Result<Choice, String> {
    let spec = s.parse::<ConfigSpec>().map_err(|e| format!("bad --config: {e}"))?;
    spec.gemm_choice()
        .ok_or_else(|| format!("bad --config: {spec} is not a gemm configuration"))
}

/// cuBLAS's configuration of the dense bf16 "TN" GEMM `D (M x N, row-major) = A (M x K,
/// row-major) @ B (K x N, column-major, i.e. K-contiguous)`, alpha 1, beta 0: cuBLAS is
/// column-major, so it computes `D^T (N x M) = B^T (N x K) * A^T (K x M)` with B first.
pub fn cublas_tn_bf16(m: usize, n: usize, k: usize) -> GemmConfig<bf16> {
    GemmConfig {
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
    }
}

/// Run the benchmark; returns the printed table.
pub fn run(args: &BenchGemmArgs) -> Result<String, String> {
    if args.dtype == "e4m3" {
        return run_fp8(args);
    }
    if args.dtype != "bf16" {
        return Err(format!("--dtype {}: bf16 or e4m3", args.dtype));
    }
    let shapes = parse_shapes(&args.shapes)?;
    let forced = args
        .configs
        .iter()
        .map(|s| parse_config(s).map(|c| (s.clone(), c)))
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: one stream only (every buffer here, and the ops handle's).
    let (gpu, stream) = unsafe { crate::bench_timing::one_stream_gpu("the benchmark") }?;
    let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS: {e}"))?;
    let ops = Ops::new(gpu.clone());
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let mut rows = Vec::new();
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        // A row-major MxK, B column-major KxN ("TN"), D row-major MxN: the layouts of
        // cuBLAS's fastest transposed case seen from row-major storage.
        let a: CudaSlice<bf16> = stream
            .clone_htod(&random_bf16(m * k, 1 + 3 * i as u64, 1.0))
            .map_err(e)?;
        let b = Rotation::upload(
            &stream,
            &random_bf16(k * n, 2 + 3 * i as u64, 1.0),
            args.rotate_mb * 1_000_000,
        )?;
        let mut d: CudaSlice<bf16> = stream.alloc_zeros(m * n).map_err(e)?;
        let mut dref: CudaSlice<bf16> = stream.alloc_zeros(m * n).map_err(e)?;
        let cfg = cublas_tn_bf16(m, n, k);
        let mut timed: Vec<(String, f64, f64, f64)> = Vec::new();
        let mut variants: Vec<(String, Option<Choice>)> = vec![("auto".into(), None)];
        variants.extend(forced.iter().map(|(n, c)| (n.clone(), Some(c.clone()))));
        for (label, sel) in &variants {
            let (rcur, ccur) = (Cell::new(0), Cell::new(0));
            let rc = || {
                let av = MatrixRef::new(&a, m, k);
                let bv = MatrixRef::new(b.next(&rcur), k, n).col_major();
                let mut dv = MatrixMut::new(&mut d, m, n);
                match sel {
                    None => ops.gemm(&av, &bv, None, &mut dv, 1.0, 0.0).map_err(|x| x.to_string()),
                    Some(sel) => {
                        let p = rcute_ops::validate(&av, &bv, None, &dv, 1.0, 0.0).map_err(|x| x.to_string())?;
                        ops.run_gemm_with(&p, Some(sel)).map_err(|x| x.to_string())
                    }
                }
            };
            // SAFETY: the buffers hold K*N, M*K and M*N elements as the config describes.
            let cublas = || unsafe { blas.gemm(cfg, b.next(&ccur), &a, &mut dref) }.map_err(|x| x.to_string());
            let (mut rc, mut cublas) = (rc, cublas);
            match median_us(&stream, args.iters, !args.eager, &mut [&mut rc, &mut cublas]) {
                Ok((t, graphed)) => {
                    if !graphed && !args.eager {
                        eprintln!("{m}x{n}x{k} {label}: stream capture failed, timed eager launches");
                    }
                    stream.synchronize().map_err(e)?;
                    let host = host_us(&stream, &mut rc)?;
                    timed.push((label.clone(), t[0], t[1], host))
                }
                Err(e) if sel.is_some() => eprintln!("{m}x{n}x{k} {label}: {e}"),
                Err(e) => return Err(e),
            }
        }
        // SAFETY: as above; the reference reads B's first copy, as the checks below do.
        unsafe { blas.gemm(cfg, b.first(), &a, &mut dref) }.map_err(|x| x.to_string())?;
        let want = stream.clone_dtoh(&dref).map_err(e)?;
        for (label, rcute_us, cublas_us, host_us) in timed {
            // Check each variant's own output.
            let sel = variants.iter().find(|v| v.0 == label).and_then(|v| v.1.clone());
            let mut dv = MatrixMut::new(&mut d, m, n);
            let av = MatrixRef::new(&a, m, k);
            let bv = MatrixRef::new(b.first(), k, n).col_major();
            match &sel {
                None => ops.gemm(&av, &bv, None, &mut dv, 1.0, 0.0).map_err(|x| x.to_string())?,
                Some(s) => {
                    let p = rcute_ops::validate(&av, &bv, None, &dv, 1.0, 0.0).map_err(|x| x.to_string())?;
                    ops.run_gemm_with(&p, Some(s)).map_err(|x| x.to_string())?;
                }
            }
            stream.synchronize().map_err(e)?;
            let got = stream.clone_dtoh(&d).map_err(e)?;
            rows.push(Row {
                config: label,
                shape: (m, n, k),
                rcute_us,
                cublas_us,
                host_us,
                max_rel_err: max_rel_diff(&got, &want),
                b_copies: b.count(),
            });
        }
    }
    report(&gpu, &rows, args.json.as_deref())
}

/// The printed table of `rows` (and the JSON file when `json` is given).
fn report(gpu: &Gpu, rows: &[Row], json: Option<&std::path::Path>) -> Result<String, String> {
    let mut out = String::new();
    out.push_str(&format!("device: {} ({} SMs)\n", gpu.name(), gpu.sm_count()));
    out.push_str(&format!(
        "{:<20} {:<28} {:>11} {:>11} {:>17} {:>13} {:>9} {:>12} {:>8}\n",
        "shape (MxNxK)",
        "config",
        "rcute_us",
        "cublas_us",
        "ratio (cuBLAS/rc)",
        "rcute_TFLOPs",
        "host_us",
        "max_rel_err",
        "B copies"
    ));
    for r in rows {
        let (m, n, k) = r.shape;
        let tflops = 2.0 * m as f64 * n as f64 * k as f64 / (r.rcute_us * 1e-6) / 1e12;
        out.push_str(&format!(
            "{:<20} {:<28} {:>11.1} {:>11.1} {:>17.3} {:>13.1} {:>9.1} {:>12.2e} {:>8}\n",
            format!("{m}x{n}x{k}"),
            r.config,
            r.rcute_us,
            r.cublas_us,
            r.cublas_us / r.rcute_us,
            tflops,
            r.host_us,
            r.max_rel_err,
            r.b_copies
        ));
    }
    if let Some(path) = json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"config": r.config, "m": r.shape.0, "n": r.shape.1, "k": r.shape.2, "rcute_us": r.rcute_us,
                    "cublas_us": r.cublas_us, "ratio": r.cublas_us / r.rcute_us, "host_us": r.host_us, "max_rel_err": r.max_rel_err, "b_copies": r.b_copies})
            })
            .collect();
        write_json(path, &v)?;
    }
    Ok(out)
}

/// Write `rows` to `path` as a pretty-printed JSON array (the `--json` file).
fn write_json(path: &std::path::Path, rows: &[serde_json::Value]) -> Result<(), String> {
    std::fs::write(path, serde_json::to_string_pretty(rows).unwrap_or_default()).map_err(|x| x.to_string())
}

/// The `--json` row of one FP8 timing: `scripts/bench_table.py` reads `config`, `m`, `n`,
/// `k`, `rcute_us` and the peer's `cublaslt_e4m3_us` (null without a peer).
fn fp8_json_row(
    config: &str,
    (m, n, k): (usize, usize, usize),
    us: f64,
    tflops: f64,
    peer_us: Option<f64>,
) -> serde_json::Value {
    serde_json::json!({"config": config, "m": m, "n": n, "k": k, "rcute_us": us, "rcute_tflops": tflops,
        "cublaslt_e4m3_us": peer_us})
}

/// `--dtype e4m3`: FP8 `Ops::scaled_mm` (per-row and per-column f32 scales, bf16 out; the
/// SM90 kernel that `ops` selects, or each forced `sm90:` configuration through
/// `Ops::run_scaled_mm_sm90`), each sample alternating with the cuBLASLt FP8 peer on the
/// same buffers (CUDA-graph replay of 10 calls, median of `--iters`); the peer's output
/// checks rcute's.
fn run_fp8(args: &BenchGemmArgs) -> Result<String, String> {
    use rcute_ops::{validate_scaled_mm, Scale, VectorRef, E4M3};
    let shapes = parse_shapes(&args.shapes)?;
    // SAFETY: one stream only (every buffer here, and the ops handle's).
    let (gpu, stream) = unsafe { crate::bench_timing::one_stream_gpu("the benchmark") }?;
    let ops = Ops::new(gpu.clone());
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let mut out = format!(
        "device: {} ({} SMs); FP8 e4m3 x e4m3 -> f32, row-wise scales, bf16 out; peer: cuBLASLt e4m3 with row-wise (outer-vector) scales, bf16 out, sampled alternately; B rotated over copies of at least {} MB in all\n",
        gpu.name(),
        gpu.sm_count(),
        args.rotate_mb
    );
    out.push_str(&format!(
        "{:<20} {:<28} {:>11} {:>13} {:>11} {:>8} {:>11}\n",
        "shape (MxNxK)", "config", "rcute_us", "rcute_TFLOPs", "cublasLt_us", "ratio", "max_rel_err"
    ));
    let mut json_rows = Vec::new();
    for &(m, n, k) in &shapes {
        // Random e4m3 bytes (no NaN encodings 0x7F / 0xFF, |x| < 2 keeps sums finite),
        // positive f32 scales.
        let mut x = 0x1234_5678u64 ^ (m * n * k) as u64;
        let mut bytes = |count: usize| -> Vec<E4M3> {
            (0..count)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    E4M3((x >> 56) as u8 & 0xBF)
                })
                .collect()
        };
        let a: CudaSlice<E4M3> = stream.clone_htod(&bytes(m * k)).map_err(e)?;
        let b = Rotation::upload(&stream, &bytes(n * k), args.rotate_mb * 1_000_000)?;
        // Scales that differ by row and by column, so that the peer's check would see them
        // swapped or dropped.
        let ramp = |count: usize, base: f32| {
            (0..count)
                .map(|i| base * (1.0 + (i % 7) as f32 / 8.0))
                .collect::<Vec<_>>()
        };
        let sa: CudaSlice<f32> = stream.clone_htod(&ramp(m, 0.5)).map_err(e)?;
        let sb: CudaSlice<f32> = stream.clone_htod(&ramp(n, 0.25)).map_err(e)?;
        let mut d: CudaSlice<bf16> = stream.alloc_zeros(m * n).map_err(e)?;
        let mut d_peer: CudaSlice<bf16> = stream.alloc_zeros(m * n).map_err(e)?;
        let mut peer = match LtGemm::e4m3_rowwise(&stream, (m, n, k), &sa, &sb) {
            Ok(p) => Some(p),
            Err(x) => {
                out.push_str(&format!("note: {m}x{n}x{k}: no cuBLASLt FP8 peer ({x})\n"));
                None
            }
        };
        let mut variants: Vec<(String, Option<(rcute_kernel::gemm_sm90::GemmSm90Config, u32)>)> =
            vec![("auto".to_string(), None)];
        variants.extend(args.configs_fp8().into_iter().map(|(l, c)| (l, Some(c))));
        for (label, forced) in variants {
            let cur = Cell::new(0);
            let mut call = || -> Result<(), String> {
                let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(b.next(&cur), k, n).col_major());
                let (sav, sbv) = (VectorRef::new(&sa, m), VectorRef::new(&sb, n));
                let dv = MatrixMut::new(&mut d, m, n);
                let p = validate_scaled_mm(&av, &bv, Scale::auto(sav), Scale::auto(sbv), None, &dv)
                    .map_err(|x| x.to_string())?;
                // `auto`: what `Ops::scaled_mm` runs (the tuning table's entry, else the rules)
                match &forced {
                    None => ops.run_scaled_mm(&p, None),
                    Some((c, k)) => ops.run_scaled_mm_sm90(&p, Some((c, *k))),
                }
                .map_err(|x| x.to_string())
            };
            let pcur = Cell::new(0);
            let (t, graphed) = match peer.as_mut() {
                Some(p) => {
                    let mut pf = || p.run(&stream, &a, b.next(&pcur), &mut d_peer);
                    median_us(&stream, args.iters, !args.eager, &mut [&mut call, &mut pf])?
                }
                None => median_us(&stream, args.iters, !args.eager, &mut [&mut call])?,
            };
            let (us, peer_us) = (t[0], t.get(1).copied());
            if !graphed && !args.eager {
                eprintln!("{m}x{n}x{k} {label}: stream capture failed, timed eager launches");
            }
            // Every copy of B holds the same values: the last outputs of both compare.
            let err = match peer_us {
                Some(_) => {
                    let got = stream.clone_dtoh(&d).map_err(e)?;
                    max_rel_diff(&got, &stream.clone_dtoh(&d_peer).map_err(e)?)
                }
                None => f64::NAN,
            };
            let tflops = 2.0 * m as f64 * n as f64 * k as f64 / (us * 1e-6) / 1e12;
            let fmt_opt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
            out.push_str(&format!(
                "{:<20} {:<28} {:>11.1} {:>13.1} {:>11} {:>8} {:>11.2e}\n",
                format!("{m}x{n}x{k}"),
                label,
                us,
                tflops,
                fmt_opt(peer_us, 1),
                fmt_opt(peer_us.map(|p| p / us), 3),
                err
            ));
            json_rows.push(fp8_json_row(&label, (m, n, k), us, tflops, peer_us));
        }
    }
    if let Some(path) = args.json.as_deref() {
        write_json(path, &json_rows)?;
    }
    Ok(out)
}

impl BenchGemmArgs {
    /// The `sm90:` forced configurations (for `--dtype e4m3`).
    fn configs_fp8(&self) -> Vec<(String, (rcute_kernel::gemm_sm90::GemmSm90Config, u32))> {
        self.configs
            .iter()
            .filter_map(|s| match parse_config(s) {
                Ok(Choice::Sm90(c, k)) => Some((s.clone(), (c, k))),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::fp8_json_row;

    #[test]
    fn fp8_json_rows_carry_what_bench_table_reads() {
        let r = fp8_json_row("auto", (8192, 8192, 4096), 850.0, 647.0, Some(900.0));
        assert_eq!(
            (r["config"].as_str(), r["m"].as_u64(), r["n"].as_u64()),
            (Some("auto"), Some(8192), Some(8192))
        );
        assert_eq!((r["k"].as_u64(), r["rcute_us"].as_f64()), (Some(4096), Some(850.0)));
        // bench_table.py reads the FP8 peer under its own key (not cuBLAS's bf16 one).
        assert_eq!(r["cublaslt_e4m3_us"].as_f64(), Some(900.0));
        assert!(r.get("cublas_us").is_none());
        // Without a peer the key holds null: bench_table.py prints no ratio.
        assert!(fp8_json_row("auto", (1, 8, 16), 1.0, 1.0, None)["cublaslt_e4m3_us"].is_null());
    }
}
