//! `rcute bench scaled-mm`: rcute's INT8 scaled GEMM (`Ops::scaled_mm`: s8 x s8 -> s32,
//! per-token `a_scale`, per-channel `b_scale`, bias, f16 / bf16 out) timed with CUDA
//! events on random buffers: warm-up, then the median of many samples, each replaying a CUDA
//! graph of 10 calls (device time; where capture fails, with a message, or with `--eager`,
//! 10 back-to-back launches). `host_us` is the host time to enqueue one rcute call
//! (validation, selection, launch): with `--eager`, where it is not well below `rcute_us`,
//! the measurement is launch-bound.
//!
//! The in-process peer is cuBLASLt's INT8 GEMM (`CUBLAS_COMPUTE_32I`, "TN", `s32` output,
//! no scaling, no bias: less work than `scaled_mm`, which also reads scales and bias and
//! writes half the bytes), sampled alternately with rcute so both see the same clocks.
//! PyTorch peers (`torch._int_mm`, vLLM's `cutlass_scaled_mm`) are not reachable from Rust
//! and are run separately. rcute's output is checked against the peer's `s32` result:
//! `max_err` is the largest `|out - cast(acc * a_scale * b_scale + bias)|` in units of the
//! output type's rounding step at that value (<= 1 expected).

use crate::bench_random::SplitMix64;
use crate::bench_timing::{host_us, median_us, parse_shapes, Rotation, ROTATE_BYTES};
use crate::lt_peer::LtGemm;
use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_kernel::Gpu;
use rcute_ops::select::ScaledMmSelection;
use rcute_ops::tuning::ConfigSpec;
use rcute_ops::{validate_scaled_mm, MatrixMut, MatrixRef, Ops, Scale, VectorRef};
use std::cell::Cell;

/// Options of `rcute bench scaled-mm`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchScaledMmArgs {
    /// Problem shapes `MxNxK` (repeatable), e.g. `--shape 4096x4096x4096`; K a multiple of
    /// 16 and N of 8.
    #[arg(long = "shape", required = true)]
    pub shapes: Vec<String>,
    /// Output type: `bf16` or `f16`.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Timed samples per variant (median reported).
    #[arg(long, default_value_t = 30)]
    pub iters: usize,
    /// Scales: `token-channel` (per-row `a_scale`, per-column `b_scale`, the default) or
    /// `tensor` (one scale each).
    #[arg(long, default_value = "token-channel")]
    pub scales: String,
    /// No bias (the default adds a bias of the output type).
    #[arg(long)]
    pub no_bias: bool,
    /// Also time forced kernels (repeatable): the Ampere-class kernel as
    /// `BMxBNxBK,WMxWN,STAGES|auto,SPLITK[,serial|parallel][,rN][,turing]`, e.g.
    /// `--config 64x64x128,2x2,auto,4,serial`, or the SM90 kernel as
    /// `sm90:BMxBNxBK,ws|coop|pp[,sSTAGES][,eEPI_MxEPI_N][,rLOG2_SWIZZLE][,am|an][,kSPLIT][,cCMxCN]`
    /// (the same syntax as `rcute bench gemm`), e.g. `--config sm90:128x128x128,pp,c2x1`.
    /// Without it only the automatic selection runs.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// Time plain back-to-back launches instead of replaying CUDA graphs of them (the
    /// default replays graphs, so small problems show device time rather than the host's
    /// launch cost).
    #[arg(long)]
    pub eager: bool,
    /// Write the table as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// B's rotated copies (the weight, for rcute and the peer alike) total at least this
    /// many MB (0: one copy, read from a warm L2).
    #[arg(long, default_value_t = ROTATE_BYTES / 1_000_000)]
    pub rotate_mb: usize,
    /// A and B are uniform in `[-R, R)` (1 ..= 128; the default 128 is every int8 value).
    /// A GPU's power draw, and so its clock under the power cap, can depend on the bits: a
    /// narrow range such as 4 reproduces benchmarks whose inputs are small integers.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u16).range(1..=128))]
    pub int8_range: u16,
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
    /// Host time to enqueue one rcute call, in microseconds (median).
    pub host_us: f64,
    /// cuBLASLt (int8 -> int32, unscaled) median time in microseconds, if it ran.
    pub peer_us: Option<f64>,
    /// Largest error of rcute's output relative to its tolerance: one output rounding step
    /// plus the f32 rounding of the epilogue, `4 eps_f32 (|acc * scales| + |bias|)` (<= 1
    /// expected; NaN: not checked).
    pub max_err: f64,
}

/// A forced kernel: the Ampere-class family, or the SM90 kernel with its split-K factor.
#[derive(Debug, Clone)]
pub enum Forced {
    /// `BMxBNxBK,WMxWN,...`
    Ampere(ScaledMmSelection),
    /// `sm90:...`
    Sm90(GemmSm90Config, u32),
}

/// Parse a forced configuration (`rcute_ops::tuning::ConfigSpec`'s grammar): `sm90:...`
/// or the Ampere-class `BMxBNxBK,WMxWN,STAGES|auto,SPLITK[,serial|parallel][,rN][,turing]`
/// (serial split-K unless it says `parallel`).
pub fn parse_forced(s: &str) -> Result<Forced, String> {
    match s.parse::<ConfigSpec>().map_err(|e| format!("bad --config: {e}"))? {
        ConfigSpec::Sm90(spec) => Ok(Forced::Sm90(
            spec.apply(GemmSm90Config::bf16(spec.tile, spec.schedule)),
            spec.split_k,
        )),
        ConfigSpec::Sm80(spec) => Ok(Forced::Ampere(spec.scaled_mm_selection())),
        other => Err(format!("bad --config: {other} is not a scaled-mm configuration")),
    }
}

/// Parse an Ampere-class forced configuration.
pub fn parse_config(s: &str) -> Result<ScaledMmSelection, String> {
    match parse_forced(s)? {
        Forced::Ampere(sel) => Ok(sel),
        Forced::Sm90(..) => Err(format!(
            "bad --config {s:?}: an Ampere-class configuration was expected"
        )),
    }
}

/// Random host inputs of an `m x n x k` problem: A and B (s8, uniform in `[-range,
/// range)`), the A and B scales (per token / per channel, or one each) and a bias of `n`
/// values.
#[allow(clippy::type_complexity)]
pub(crate) fn host_inputs(
    seed: u64,
    (m, n, k): (usize, usize, usize),
    per_token: bool,
    range: u16,
) -> (Vec<i8>, Vec<i8>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = SplitMix64(seed);
    let r = u64::from(range.clamp(1, 128));
    let mut int8 = |len: usize| -> Vec<i8> {
        (0..len)
            .map(|_| (rng.next_u64() % (2 * r)) as i64 - r as i64)
            .map(|v| v as i8)
            .collect()
    };
    let (ha, hb) = (int8(m * k), int8(k * n));
    let scale = (1.0 / (r as f64 * (k as f64).sqrt())) as f32;
    let hsa: Vec<f32> = (0..if per_token { m } else { 1 })
        .map(|_| rng.uniform(0.5, 1.5) as f32 * scale)
        .collect();
    let hsb: Vec<f32> = (0..if per_token { n } else { 1 })
        .map(|_| rng.uniform(0.5, 1.5) as f32 / r as f32)
        .collect();
    let hbias: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    (ha, hb, hsa, hsb, hbias)
}

/// The largest error of the scaled output `got` (M x N row-major) against the exact
/// `acc * a_scale * b_scale (+ bias)` from the peer's accumulator `acc`, in units of one
/// output step (bf16 or f16) plus the f32 rounding of the epilogue. A scale vector of
/// length 1 is a tensor scale; a NaN output counts as infinite.
pub(crate) fn max_scaled_err(
    acc: &[i32],
    got: &[f64],
    (m, n): (usize, usize),
    (sa, sb): (&[f32], &[f32]),
    bias: Option<&[f64]>,
    bf: bool,
) -> f64 {
    let (mbits, emin) = if bf { (7, -126) } else { (10, -14) };
    let mut worst = 0f64;
    for i in 0..m {
        for j in 0..n {
            // acc is N x M column-major = M x N row-major.
            let a = acc[i * n + j] as f64;
            let prod = a * sa[if sa.len() > 1 { i } else { 0 }] as f64 * sb[if sb.len() > 1 { j } else { 0 }] as f64;
            let bias = bias.map_or(0.0, |b| b[j]);
            let r = prod + bias;
            let ex = if r == 0.0 {
                emin
            } else {
                (r.abs().log2().floor() as i32).max(emin)
            };
            // One output step plus the f32 rounding of the epilogue (cancellation).
            let tol = 2f64.powi(ex - mbits) + 4.0 * f32::EPSILON as f64 * (prod.abs() + bias.abs());
            let err = (got[i * n + j] - r).abs() / tol;
            worst = if err.is_nan() { f64::INFINITY } else { worst.max(err) };
        }
    }
    worst
}

/// The output buffer of either type.
enum Out {
    F16(CudaSlice<f16>),
    BF16(CudaSlice<bf16>),
}

/// Run the benchmark; returns the printed table.
pub fn run(args: &BenchScaledMmArgs) -> Result<String, String> {
    let bf = match args.dtype.as_str() {
        "bf16" => true,
        "f16" => false,
        other => return Err(format!("--dtype {other}: bf16 or f16")),
    };
    let per_token = match args.scales.as_str() {
        "token-channel" => true,
        "tensor" => false,
        other => return Err(format!("--scales {other}: token-channel or tensor")),
    };
    let shapes = parse_shapes(&args.shapes)?;
    let forced = args
        .configs
        .iter()
        .map(|s| parse_forced(s).map(|c| (s.clone(), c)))
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: one stream only (every buffer here, and the ops handle's).
    let (gpu, stream) = unsafe { crate::bench_timing::one_stream_gpu("the benchmark") }?;
    let ops = Ops::new(gpu.clone());
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let mut rows = Vec::new();
    let mut peer_note = String::new();
    for (si, &(m, n, k)) in shapes.iter().enumerate() {
        let (ha, hb, hsa, hsb, hbias) = host_inputs(0x5EED + si as u64, (m, n, k), per_token, args.int8_range);
        let da: CudaSlice<i8> = stream.clone_htod(&ha).map_err(e)?;
        let db = Rotation::upload(&stream, &hb, args.rotate_mb * 1_000_000)?;
        let dsa: CudaSlice<f32> = stream.clone_htod(&hsa).map_err(e)?;
        let dsb: CudaSlice<f32> = stream.clone_htod(&hsb).map_err(e)?;
        let bias16: CudaSlice<f16> = stream
            .clone_htod(&hbias.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>())
            .map_err(e)?;
        let biasb: CudaSlice<bf16> = stream
            .clone_htod(&hbias.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>())
            .map_err(e)?;
        let bias_q: Vec<f64> = hbias
            .iter()
            .map(|&x| {
                if bf {
                    bf16::from_f32(x).to_f64()
                } else {
                    f16::from_f32(x).to_f64()
                }
            })
            .collect();
        let mut out = if bf {
            Out::BF16(stream.alloc_zeros(m * n).map_err(e)?)
        } else {
            Out::F16(stream.alloc_zeros(m * n).map_err(e)?)
        };
        let mut acc: CudaSlice<i32> = stream.alloc_zeros(m * n).map_err(e)?;
        let mut peer = match LtGemm::int8(&stream, m, n, k) {
            Ok(p) => Some(p),
            Err(x) => {
                peer_note = format!("note: no cuBLASLt INT8 peer ({x})\n");
                None
            }
        };
        let mut variants: Vec<(String, Option<Forced>)> = vec![("auto".into(), None)];
        variants.extend(forced.iter().map(|(s, c)| (s.clone(), Some(c.clone()))));
        // The reference accumulator from the peer (or none).
        let mut want_acc: Option<Vec<i32>> = None;
        if let Some(p) = peer.as_mut() {
            p.run(&stream, &da, db.first(), &mut acc)?;
            stream.synchronize().map_err(e)?;
            want_acc = Some(stream.clone_dtoh(&acc).map_err(e)?);
        }
        for (label, sel) in &variants {
            let (rcur, pcur) = (Cell::new(0), Cell::new(0));
            // Every copy of B holds the same values: any copy's result checks against `want_acc`.
            let mut rc = || -> Result<(), String> {
                let av = MatrixRef::new(&da, m, k);
                let bv = MatrixRef::new(db.next(&rcur), k, n).col_major();
                let sa = Scale::auto(VectorRef::new(&dsa, hsa.len()));
                let sb = Scale::auto(VectorRef::new(&dsb, hsb.len()));
                let biasv = if bf {
                    VectorRef::new(&biasb, n)
                } else {
                    VectorRef::new(&bias16, n)
                };
                let bias = (!args.no_bias).then_some(&biasv);
                let mut ov = match &mut out {
                    Out::F16(d) => MatrixMut::new(d, m, n),
                    Out::BF16(d) => MatrixMut::new(d, m, n),
                };
                let p = validate_scaled_mm(&av, &bv, sa, sb, bias, &ov).map_err(|x| x.to_string())?;
                let _ = &mut ov;
                match sel {
                    None => ops.run_scaled_mm(&p, None),
                    Some(Forced::Ampere(f)) => ops.run_scaled_mm(&p, Some(f)),
                    Some(Forced::Sm90(c, k)) => ops.run_scaled_mm_sm90(&p, Some((c, *k))),
                }
                .map_err(|x| x.to_string())
            };
            let res = match peer.as_mut() {
                Some(p) => {
                    let mut pf = || p.run(&stream, &da, db.next(&pcur), &mut acc);
                    median_us(&stream, args.iters, !args.eager, &mut [&mut rc, &mut pf])
                        .map(|(v, _)| (v[0], Some(v[1])))
                }
                None => median_us(&stream, args.iters, !args.eager, &mut [&mut rc]).map(|(v, _)| (v[0], None)),
            };
            let (rcute_us, peer_us) = match res {
                Ok(x) => x,
                Err(x) if sel.is_some() => {
                    eprintln!("{m}x{n}x{k} {label}: {x}");
                    continue;
                }
                Err(x) => return Err(x),
            };
            let host = host_us(&stream, &mut rc)?;
            // Check this variant's output against the peer's accumulator.
            rc()?;
            stream.synchronize().map_err(e)?;
            let got: Vec<f64> = match &out {
                Out::F16(d) => stream.clone_dtoh(d).map_err(e)?.iter().map(|x| x.to_f64()).collect(),
                Out::BF16(d) => stream.clone_dtoh(d).map_err(e)?.iter().map(|x| x.to_f64()).collect(),
            };
            let max_err = match &want_acc {
                None => f64::NAN,
                Some(w) => {
                    let bias = (!args.no_bias).then_some(&bias_q[..]);
                    max_scaled_err(w, &got, (m, n), (&hsa, &hsb), bias, bf)
                }
            };
            rows.push(Row {
                config: label.clone(),
                shape: (m, n, k),
                rcute_us,
                host_us: host,
                peer_us,
                max_err,
            });
        }
    }
    report(&gpu, args, &rows, &peer_note)
}

/// The printed table of `rows` (and the JSON file when `--json` is given).
fn report(gpu: &Gpu, args: &BenchScaledMmArgs, rows: &[Row], peer_note: &str) -> Result<String, String> {
    let mut s = String::new();
    s.push_str(&format!(
        "device: {} ({} SMs); scaled_mm {} out, {} scales, {}; peer: cuBLASLt int8 -> s32 (TN, unscaled); {}; B rotated over copies of at least {} MB in all\n",
        gpu.name(),
        gpu.sm_count(),
        args.dtype,
        args.scales,
        if args.no_bias { "no bias" } else { "bias" },
        if args.eager {
            "10 back-to-back launches per sample"
        } else {
            "CUDA graphs of 10 calls"
        },
        args.rotate_mb
    ));
    s.push_str(peer_note);
    s.push_str(&format!(
        "{:<20} {:<34} {:>10} {:>8} {:>10} {:>11} {:>11} {:>16} {:>8}\n",
        "shape (MxNxK)",
        "config",
        "rcute_us",
        "host_us",
        "rcute_TOPS",
        "cublasLt_us",
        "cuLt_TOPS",
        "ratio (cuLt/rc)",
        "max_err"
    ));
    for r in rows {
        let (m, n, k) = r.shape;
        let ops2 = 2.0 * m as f64 * n as f64 * k as f64;
        let tops = |us: f64| ops2 / (us * 1e-6) / 1e12;
        let peer = |f: &dyn Fn(f64) -> String| r.peer_us.map(f).unwrap_or_else(|| "-".into());
        s.push_str(&format!(
            "{:<20} {:<34} {:>10.1} {:>8.1} {:>10.1} {:>11} {:>11} {:>16} {:>8.2}\n",
            format!("{m}x{n}x{k}"),
            r.config,
            r.rcute_us,
            r.host_us,
            tops(r.rcute_us),
            peer(&|p| format!("{p:.1}")),
            peer(&|p| format!("{:.1}", tops(p))),
            peer(&|p| format!("{:.3}", p / r.rcute_us)),
            r.max_err
        ));
    }
    if let Some(path) = &args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"config": r.config, "m": r.shape.0, "n": r.shape.1, "k": r.shape.2,
                    "rcute_us": r.rcute_us, "host_us": r.host_us, "cublaslt_int8_us": r.peer_us, "max_err": r.max_err,
                    "dtype": args.dtype, "scales": args.scales, "bias": !args.no_bias})
            })
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&v).unwrap_or_default()).map_err(|x| x.to_string())?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcute_kernel::gemm_sm80::SplitKMode;
    use rcute_ops::scaled_mm::ScaledMmTarget;

    #[test]
    fn configs_parse() {
        let s = parse_config("64x64x128,2x2,auto,4,parallel,r2").unwrap();
        assert_eq!((s.tile, s.warps, s.stages, s.split_k), ([64, 64, 128], [2, 2], None, 4));
        assert_eq!(
            (s.split_k_mode, s.raster_swizzle, s.target),
            (SplitKMode::Parallel, 2, ScaledMmTarget::Ampere)
        );
        let t = parse_config("128x128x64,2x4,2,1,turing").unwrap();
        assert_eq!((t.target, t.stages), (ScaledMmTarget::Turing, Some(2)));
        assert!(parse_config("64x64,2x2,auto,1").is_err());
        assert!(parse_config("64x64x64,2x2,auto,1,bogus").is_err());
        match parse_forced("sm90:128x128x128,pp,c2x1,k2").unwrap() {
            Forced::Sm90(c, k) => {
                assert_eq!((c.tile, c.cluster, k), ([128, 128, 128], [2, 1], 2));
                assert_eq!(c.schedule, rcute_kernel::gemm_sm90::Sm90Schedule::PingPong);
            }
            other => panic!("expected an SM90 configuration, got {other:?}"),
        }
        assert!(matches!(parse_forced("64x64x128,2x2,auto,1"), Ok(Forced::Ampere(_))));
        assert!(parse_forced("sm90:128x128,pp").is_err());
    }

    #[test]
    fn int8_inputs_span_the_asked_range() {
        let span = |r: u16| {
            let (a, b, sa, sb, bias) = host_inputs(7, (64, 32, 128), true, r);
            assert_eq!(
                (a.len(), b.len(), sa.len(), sb.len(), bias.len()),
                (64 * 128, 128 * 32, 64, 32, 32)
            );
            let all = a.iter().chain(&b).map(|&v| i32::from(v));
            all.fold((i32::MAX, i32::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
        };
        assert_eq!(span(128), (-128, 127));
        assert_eq!(span(4), (-4, 3));
        assert_eq!(span(1), (-1, 0));
    }
}
