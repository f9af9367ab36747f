//! `rcute bench awq`: rcute's AWQ W4A16 GEMM (`Ops::awq_gemm` on AutoAWQ's checkpoint
//! tensors) against cuBLAS fp16 GEMM on the dequantized weight, in one process, on random
//! data. Each side rotates over enough weight copies to total at least `--min-mb` MB (150 by
//! default, three times an H200's 50 MB L2; 1, 2, 5 or 10 copies, so that a graph's calls
//! never read one copy twice in a row), so weights come from HBM ("cold"); samples
//! replay CUDA graphs of 10 calls, all rows of a shape and cuBLAS sampled round-robin in
//! one timing (the rows see the same clocks; cuBLAS's median is every row's peer), and the
//! medians are reported with the achieved GB/s and
//! the device-to-device copy bandwidth measured in the same run. `--dequantize` also times
//! `Ops::awq_dequantize` of each shape's `[K, N]` weight and `Ops::awq_dequantize_kmajor`
//! (`[N, K]`) against that copy bandwidth.

use crate::bench_random::SplitMix64;
use crate::bench_timing::{copy_bandwidth, median_us, parse_shapes, rotation_copies};
use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_ops::awq::{pack_awq_matrix, validate_awq_gemm, AwqShape, AwqTensors, AwqWeight};
use rcute_ops::select::Choice;
use rcute_ops::tuning::ConfigSpec;
use rcute_ops::{MatrixMut, MatrixRef, Ops, VectorRef};
use std::cell::Cell;
use std::sync::Arc;

/// Options of `rcute bench awq`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchAwqArgs {
    /// Problem shapes `MxNxK` (repeatable): x is `[M, K]`, the weight `[K, N]`.
    #[arg(long = "shape", required = true)]
    pub shapes: Vec<String>,
    /// Quantization group size (32, 64, 128 or K).
    #[arg(long, default_value_t = 128)]
    pub group: usize,
    /// Timed samples per kernel (median reported), each a graph of 10 calls.
    #[arg(long, default_value_t = 30)]
    pub iters: usize,
    /// Each side's weight copies total at least this many MB (rotated call by call).
    #[arg(long, default_value_t = 150)]
    pub min_mb: usize,
    /// Also time `awq_dequantize` of each shape's weight against the copy bandwidth.
    #[arg(long)]
    pub dequantize: bool,
    /// Also time forced paths (repeatable): `fused` (the fused int4 kernel with the shape's
    /// configuration), `prepared` (the same on a prepared weight), `prepared-auto`
    /// (`Ops::awq_gemm_prepared`'s own choice on a prepared weight), `dense` (K-major
    /// dequantization + the SM90 GEMM, sm_90 only), `dense:` and an SM90 GEMM
    /// configuration (that path with its GEMM forced, e.g. `dense:sm90:256x160x64,coop,c1x2`), a
    /// fused configuration `BMxBN,WMxWN,STAGES,SPLITS`, e.g. `--config 16x256,1x4,4,8` (BK
    /// is 64; f16; 16-byte weight copies where N/8 allows), or `prepared:` and such a
    /// configuration (the prepared kernel forced to it), `bulk:` and such a configuration
    /// (the prepared kernel with the SM90 bulk producer, sm_90 only), or `streamed:` and
    /// `BMxBN,WKxWN,RING,SPLITS` (the register-streamed prepared kernel: BM 8, 16, 24 or 32 (8 or 16 on the checkpoint), BN = 64
    /// WN, WK warps along K, RING k16 steps in flight per warp), or `streamed-sring:` and
    /// such a configuration (the same kernel with each lane's steps through its own slots
    /// of a shared `cp.async` ring instead of registers; either with an optional `,xT`: T
    /// 64-row k-tiles of x staged per split, e.g. `streamed-sring:16x128,8x2,4,1,x64`, an
    /// optional `,cp`: the clustered split-K sum by pushes, an optional `,eg`: the ring
    /// issued before the grid-dependency wait, an optional `,sa`: the scales applied per group
    /// after the MMAs; forced options),
    /// or `streamed-checkpoint:`
    /// and such a configuration (the register-streamed kernel on the checkpoint tensors as
    /// they are, unprepared), or `wgmma:` and `BMxBN,WRxWN,STAGES,SPLITS[,rR][,p][,c2][,fN][,sk][,o2]` (the SM90 mixed-input
    /// prepared kernel, sm_90 only: BM tokens per CTA (8 ..= 192, a multiple of 8), BN = 256 WN weight columns, WR
    /// consumer warpgroups splitting a lane's four words, STAGES stages of x and the weight,
    /// SPLITS K splits (more than one: the split-K kernel, `AwqGemmConfig::split_k`),
    /// R > 0 the tile walk in groups of R token tiles, p the persistent kernel, c2 the
    /// k16 steps in chained pairs, fN N (2 or 3) wgmma groups of a consumer warpgroup
    /// in flight after each k16 step (`AwqGemmConfig::in_flight`), sk the split-K kernel even with one split, o2 the kernel
    /// built for two resident CTAs an SM, `AwqGemmConfig::resident`), or
    /// `wgmma-checkpoint:` and such a configuration (the same kernel on the checkpoint
    /// tensors as they are, unprepared; WR 1 or 2),
    /// `reordered` (`awq_gemm`'s reordered path: `qweight` reordered per call into stream
    /// scratch + the SM90 mixed-input kernel with `select_awq_wgmma`'s tile, sm_90 only) or
    /// `reordered:` and a `wgmma:` configuration (that path forced to the tile).
    #[arg(long = "config")]
    pub configs: Vec<String>,
}

/// Parse `BMxBN,WMxWN,STAGES,SPLITS` into a configuration (element and weight copy width
/// are set per problem) and the requested splits.
pub fn parse_awq_config(s: &str) -> Result<(AwqGemmConfig, u32), String> {
    parse_awq_config_as(s, |c| c)
}

/// [`parse_awq_config`] for the configuration that `kind` makes of the parsed one (the
/// prepared, bulk or streamed kernel), checked by generating it.
fn parse_awq_config_as(s: &str, kind: fn(AwqGemmConfig) -> AwqGemmConfig) -> Result<(AwqGemmConfig, u32), String> {
    let bad = || format!("bad --config {s:?}: expected BMxBN,WMxWN,STAGES,SPLITS");
    let parts: Vec<&str> = s.split(',').collect();
    let pair = |t: &str| -> Result<(i64, i64), String> {
        let v: Vec<i64> = t
            .split('x')
            .map(|x| x.trim().parse::<i64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        match v.as_slice() {
            [a, b] => Ok((*a, *b)),
            _ => Err(bad()),
        }
    };
    // optional parts after the fourth: `rR` (the wgmma kernel's tile walk in groups of R
    // token tiles), `p` (the persistent wgmma kernel), `c2`, `fN`, `sk`, and `xT` (a streamed
    // kernel's staged x of T k-tiles per split), `cp` (a streamed kernel's clustered split-K
    // sum by pushes), `eg` (a shared-ring streamed kernel's ring issued before its wait) and
    // `sa` (its scales applied per group after the MMAs)
    let [tile, warps, stages, splits, rest @ ..] = parts.as_slice() else {
        return Err(bad());
    };
    let (mut raster, mut persistent, mut chained, mut split_k) = (0, false, false, false);
    let (mut ctas, mut staged, mut in_flight) = (1, 0, 1);
    let (mut push, mut eager, mut after) = (false, false, false);
    for part in rest.iter().map(|p| p.trim()) {
        match part {
            "o2" if ctas == 1 => ctas = 2,
            "cp" if !push => push = true,
            "eg" if !eager => eager = true,
            "sa" if !after => after = true,
            x if x.starts_with('x') && staged == 0 => {
                staged = x[1..].parse().map_err(|_| bad())?;
            }
            "p" if !persistent => persistent = true,
            "sk" if !split_k => split_k = true,
            "c2" if !chained => chained = true,
            f if f.starts_with('f') && in_flight == 1 => {
                in_flight = f[1..].parse().map_err(|_| bad())?;
            }
            r if r.starts_with('r') && raster == 0 => {
                raster = r[1..].parse().map_err(|_| bad())?;
            }
            _ => return Err(bad()),
        }
    }
    let ((bm, bn), (wm, wn)) = (pair(tile)?, pair(warps)?);
    let stages: usize = stages.trim().parse().map_err(|_| bad())?;
    let splits: u32 = splits.trim().parse().map_err(|_| bad())?;
    let cfg = kind(AwqGemmConfig::new(
        rcute_kernel::awq_gemm::Element::F16,
        [bm, bn, 64],
        [wm, wn],
        stages,
        4,
    ))
    .raster(raster)
    .in_flight(in_flight)
    .resident(ctas)
    .staged_k_tiles(staged);
    let cfg = if persistent { cfg.persistent() } else { cfg };
    let cfg = if chained { cfg.chained() } else { cfg };
    let cfg = if push { cfg.cluster_push() } else { cfg };
    let cfg = if eager { cfg.eager_ring() } else { cfg };
    let cfg = if after { cfg.scale_after() } else { cfg };
    // the wgmma kernel splits K only as its split-K variant
    let cfg = if split_k || (cfg.wgmma && splits > 1) {
        cfg.split_k()
    } else {
        cfg
    };
    rcute_kernel::awq_gemm::generate(&cfg).map_err(|e| format!("{s}: {e}"))?;
    Ok((cfg, splits))
}

/// How a row runs `awq_gemm`.
#[derive(Clone, Debug)]
enum Variant {
    /// `Ops::awq_gemm`'s own choice.
    Auto,
    /// The fused kernel, forced configuration or the shape's.
    Fused(Option<(AwqGemmConfig, u32)>),
    /// The dense path: its GEMM's forced SM90 configuration and K splits, or its own choice.
    Dense(Option<(GemmSm90Config, u32)>),
    /// The prepared kernel (`AwqWeight::prepare` once per weight copy, outside the timing),
    /// forced configuration or the shape's.
    Prepared(Option<(AwqGemmConfig, u32)>),
    /// `Ops::awq_gemm_prepared`'s own choice (the SM90 mixed-input kernel, the dense path
    /// or the prepared kernels) on the prepared weight.
    PreparedAuto,
    /// The unprepared op's reordered path (`qweight` reordered per call into stream scratch,
    /// then the SM90 mixed-input kernel): forced wgmma configuration or the shape's tile.
    Reordered(Option<(AwqGemmConfig, u32)>),
}

/// What a `--config` prefix makes of a parsed configuration.
type Kind = fn(AwqGemmConfig) -> AwqGemmConfig;

/// A `--config` value as a [`Variant`]: `prefix:` forms force the prepared (`prepared:`,
/// `bulk:`, `streamed:`, `streamed-sring:`, `wgmma:`, `wgmma-box:` (its weight stages as
/// tensor boxes)) or the unprepared (`streamed-checkpoint:`,
/// `wgmma-checkpoint:`, none) kernels,
/// or the reordered path's tile (`reordered:`).
fn parse_variant(s: &str) -> Result<Variant, String> {
    match s {
        "dense" => Ok(Variant::Dense(None)),
        "fused" => Ok(Variant::Fused(None)),
        "prepared" => Ok(Variant::Prepared(None)),
        "prepared-auto" => Ok(Variant::PreparedAuto),
        "reordered" => Ok(Variant::Reordered(None)),
        _ => {
            if let Some(c) = s.strip_prefix("dense:") {
                return match c.parse::<ConfigSpec>().map_err(|e| format!("{s}: {e}"))?.gemm_choice() {
                    Some(Choice::Sm90(cfg, split)) => Ok(Variant::Dense(Some((cfg, split)))),
                    _ => Err(format!("{s}: the dense path takes an sm90: GEMM configuration")),
                };
            }
            if let Some(c) = s.strip_prefix("reordered:") {
                return parse_awq_config_as(c, AwqGemmConfig::wgmma).map(|c| Variant::Reordered(Some(c)));
            }
            let forms: [(&str, Kind, bool); 8] = [
                ("prepared:", |c| c, true),
                ("wgmma:", AwqGemmConfig::wgmma, true),
                ("wgmma-box:", |c| c.wgmma().weight_boxes(), true),
                ("bulk:", AwqGemmConfig::bulk, true),
                ("streamed:", AwqGemmConfig::streamed, true),
                ("streamed-sring:", AwqGemmConfig::streamed_shared_ring, true),
                ("streamed-checkpoint:", AwqGemmConfig::streamed_checkpoint, false),
                ("wgmma-checkpoint:", AwqGemmConfig::wgmma_checkpoint, false),
            ];
            match forms
                .iter()
                .find_map(|(pre, kind, prepared)| Some((s.strip_prefix(pre)?, kind, prepared)))
            {
                Some((c, kind, true)) => parse_awq_config_as(c, *kind).map(|c| Variant::Prepared(Some(c))),
                Some((c, kind, false)) => parse_awq_config_as(c, *kind).map(|c| Variant::Fused(Some(c))),
                None => parse_awq_config(s).map(|c| Variant::Fused(Some(c))),
            }
        }
    }
}

/// One AWQ weight on the device.
struct Weight {
    q: CudaSlice<i32>,
    s: CudaSlice<f16>,
    z: CudaSlice<i32>,
}

impl Weight {
    fn tensors(&self, shape: AwqShape) -> AwqTensors<'_> {
        let (k, n, g) = (shape.k, shape.n, shape.groups());
        AwqTensors {
            qweight: MatrixRef::new(&self.q, k, n / 8),
            scales: MatrixRef::new(&self.s, g, n),
            qzeros: MatrixRef::new(&self.z, g, n / 8),
            group: shape.group,
        }
    }
    /// Bytes of the three checkpoint tensors.
    fn bytes(shape: AwqShape) -> usize {
        shape.k * shape.n / 2 + shape.groups() * shape.n * 2 + shape.groups() * shape.n / 2
    }
}

fn random_weight(stream: &Arc<CudaStream>, shape: AwqShape, rng: &mut SplitMix64) -> Result<Weight, String> {
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let (k, n, g) = (shape.k, shape.n, shape.groups());
    let q: Vec<u8> = (0..k * n).map(|_| (rng.next_u64() % 16) as u8).collect();
    let z: Vec<u8> = (0..g * n).map(|_| (rng.next_u64() % 16) as u8).collect();
    // Scales in [1e-3, 2e-2]: outputs of order one for K in the thousands.
    let s: Vec<f16> = (0..g * n).map(|_| f16::from_f32(1e-3 + 1.9e-2 * rng.unit())).collect();
    Ok(Weight {
        q: stream
            .clone_htod(&pack_awq_matrix(&q, k, n).map_err(|x| x.to_string())?)
            .map_err(e)?,
        s: stream.clone_htod(&s).map_err(e)?,
        z: stream
            .clone_htod(&pack_awq_matrix(&z, g, n).map_err(|x| x.to_string())?)
            .map_err(e)?,
    })
}

/// Run the benchmark; returns the printed table.
pub fn run(args: &BenchAwqArgs) -> Result<String, String> {
    let shapes = parse_shapes(&args.shapes)?;
    // SAFETY: one stream only (every buffer here, and the ops handle's).
    let (gpu, stream) = unsafe { crate::bench_timing::one_stream_gpu("the benchmark") }?;
    let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS: {e}"))?;
    let ops = Ops::new(gpu.clone());
    let min_bytes = args.min_mb * 1_000_000;
    let (copy_us, copy_gbs) = copy_bandwidth(&stream, 256 << 20, args.iters)?;
    let mut out = format!(
        "device: {} ({} SMs); device-to-device copy of 256 MiB: {copy_us:.1} us = {copy_gbs:.0} GB/s (read + write)\n",
        gpu.name(),
        gpu.sm_count()
    );
    out.push_str(&format!(
        "{:<18} {:<18} {:>4} {:>7} {:>9} {:>10} {:>8} {:>9} {:>7} {:>8} {:>11}\n",
        "shape (MxNxK)",
        "config",
        "G",
        "copies",
        "rcute_us",
        "cublas_us",
        "ratio",
        "rc_GB/s",
        "%copy",
        "host_us",
        "max_rel_err"
    ));
    let forced = args
        .configs
        .iter()
        .map(|c| parse_variant(c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rng = SplitMix64(0x5eed);
    for &(m, n, k) in &shapes {
        let shape = AwqShape::new(k, n, args.group).map_err(|e| e.to_string())?;
        let mut variants: Vec<(String, Variant)> = vec![("auto".into(), Variant::Auto)];
        for (c, v) in args.configs.iter().zip(&forced) {
            let mut v = v.clone();
            if let Variant::Fused(Some((cfg, _))) = &mut v {
                if !(n / 8).is_multiple_of(4) {
                    cfg.b_vector_words = 1;
                }
            }
            variants.push((c.clone(), v));
        }
        out.push_str(&bench_shape(
            &ops, &blas, &stream, shape, m, min_bytes, args.iters, copy_gbs, &mut rng, &variants,
        )?);
        if args.dequantize {
            out.push_str(&bench_dequantize(
                &ops, &stream, shape, min_bytes, args.iters, copy_gbs, &mut rng,
            )?);
        }
    }
    Ok(out)
}

/// What every row of a shape reads: the activations, the bias and the rotated weight copies
/// (checkpoint tensors, and prepared where a row needs them).
struct Operands<'a> {
    ops: &'a Ops,
    shape: AwqShape,
    m: usize,
    x: &'a CudaSlice<f16>,
    bias: &'a CudaSlice<f16>,
    weights: &'a [Weight],
    prepared: &'a [AwqWeight<'a>],
}

impl Operands<'_> {
    /// One call of `forced`'s path on weight copy `i % copies`, writing `y`.
    fn call(&self, forced: &Variant, i: usize, y: &mut CudaSlice<f16>) -> Result<(), String> {
        let (m, n, k) = (self.m, self.shape.n, self.shape.k);
        let i = i % self.weights.len();
        let b = VectorRef::new(self.bias, n);
        let xv = MatrixRef::new(self.x, m, k);
        let wt = self.weights[i].tensors(self.shape);
        let mut yv = MatrixMut::new(y, m, n);
        let p = validate_awq_gemm(&xv, &wt, Some(&b), &yv).map_err(|x| x.to_string())?;
        let ops = self.ops;
        match forced {
            Variant::Auto => ops.awq_gemm(&xv, &wt, Some(&b), &mut yv),
            Variant::Fused(f) => ops.run_awq_gemm(&p, *f),
            Variant::Dense(f) => ops.run_awq_gemm_dense_with(&p, f.clone()),
            Variant::Prepared(f) => ops.run_awq_gemm_prepared(&xv, &self.prepared[i], Some(&b), &mut yv, *f),
            Variant::PreparedAuto => ops.awq_gemm_prepared(&xv, &self.prepared[i], Some(&b), &mut yv),
            Variant::Reordered(f) => ops.run_awq_gemm_reordered(&p, *f),
        }
        .map_err(|x| x.to_string())
    }
}

/// A benchmark call: runs once per call, cycling through its weight copies.
type Call<'a> = Box<dyn FnMut() -> Result<(), String> + 'a>;

/// Each row's timing `(rcute µs, cuBLAS µs, graphed)`: every row's calls and cuBLAS's are
/// sampled round-robin in ONE [`median_us`], after one settling period, so every row sees
/// the same clocks. Timed one row (with cuBLAS) after the other, each row's samples fell on
/// another phase of the SM clock's swings once an H100's 700 W power cap engaged (about
/// 0.8 s into the sustained load, past the first row's settling): the row right after the
/// first one read 5-9 µs (13-22 %) slower at 128 x 14336 x 4096 than the same kernel in
/// the first or third row (BENCHMARKS.md, "Session 23 (helper awqrow)"). Should some call not be
/// capturable in a CUDA graph (every function of one `median_us` is then timed eagerly),
/// each row is timed on its own with cuBLAS instead, so only that row is eager.
fn time_rows(
    stream: &Arc<CudaStream>,
    iters: usize,
    calls: &mut [Call<'_>],
    cublas: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Vec<(f64, f64, bool)>, String> {
    let rows = calls.len();
    let mut fs: Vec<&mut dyn FnMut() -> Result<(), String>> = calls
        .iter_mut()
        .map(|f| f.as_mut() as &mut dyn FnMut() -> Result<(), String>)
        .collect();
    fs.push(&mut *cublas);
    let (t, graphed) = median_us(stream, iters, true, &mut fs)?;
    drop(fs);
    if graphed || rows <= 1 {
        return Ok(t[..rows].iter().map(|&r| (r, t[rows], graphed)).collect());
    }
    calls
        .iter_mut()
        .map(|f| {
            let (t, graphed) = median_us(stream, iters, true, &mut [f.as_mut(), &mut *cublas])?;
            Ok((t[0], t[1], graphed))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn bench_shape(
    ops: &Ops,
    blas: &CudaBlas,
    stream: &Arc<CudaStream>,
    shape: AwqShape,
    m: usize,
    min_bytes: usize,
    iters: usize,
    copy_gbs: f64,
    rng: &mut SplitMix64,
    variants: &[(String, Variant)],
) -> Result<String, String> {
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let (k, n) = (shape.k, shape.n);
    let awq_copies = rotation_copies(Weight::bytes(shape), min_bytes);
    let dense_copies = rotation_copies(k * n * 2, min_bytes);
    let weights: Vec<Weight> = (0..awq_copies)
        .map(|_| random_weight(stream, shape, rng))
        .collect::<Result<_, _>>()?;
    // cuBLAS's weights: the dequantized copies (copy i from AWQ copy i % awq_copies).
    let mut dense: Vec<CudaSlice<f16>> = Vec::new();
    for i in 0..dense_copies {
        let mut d: CudaSlice<f16> = stream.alloc_zeros(k * n).map_err(e)?;
        let w = weights[i % awq_copies].tensors(shape);
        ops.awq_dequantize(&w, &mut MatrixMut::new(&mut d, k, n))
            .map_err(|x| x.to_string())?;
        dense.push(d);
    }
    let prepared: Vec<AwqWeight<'_>> = if variants
        .iter()
        .any(|(_, v)| matches!(v, Variant::Prepared(_) | Variant::PreparedAuto))
    {
        weights
            .iter()
            .map(|w| AwqWeight::prepare(ops, &w.tensors(shape)))
            .collect::<Result<_, _>>()
            .map_err(|x| x.to_string())?
    } else {
        Vec::new()
    };
    let x: CudaSlice<f16> = stream
        .clone_htod(
            &(0..m * k)
                .map(|_| f16::from_f32(2.0 * rng.unit() - 1.0))
                .collect::<Vec<_>>(),
        )
        .map_err(e)?;
    let bias: CudaSlice<f16> = stream.clone_htod(&vec![f16::ZERO; n]).map_err(e)?;
    let operands = Operands {
        ops,
        shape,
        m,
        x: &x,
        bias: &bias,
        weights: &weights,
        prepared: &prepared,
    };
    // every row its own output, so that all rows' calls can live side by side
    let mut ys: Vec<CudaSlice<f16>> = (0..variants.len())
        .map(|_| stream.alloc_zeros(m * n))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let mut yref: CudaSlice<f16> = stream.alloc_zeros(m * n).map_err(e)?;
    // cuBLAS is column-major: out^T (N x M) = W^T (N x K, W row-major [K, N]) * x^T (K x M).
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: f16::ONE,
        lda: n as i32,
        ldb: k as i32,
        beta: f16::ZERO,
        ldc: n as i32,
    };
    let ci = Cell::new(0usize);
    let cublas = |yref: &mut CudaSlice<f16>| {
        let d = &dense[ci.get() % dense_copies];
        ci.set(ci.get() + 1);
        // SAFETY: the buffers hold N*K, K*M and N*M elements as the config describes.
        unsafe { blas.gemm(cfg, d, &x, yref) }.map_err(|x| x.to_string())
    };
    // A path that refuses the shape (a typed error, nothing launched) gets a row saying so;
    // the other rows go on.
    let refused: Vec<Option<String>> = variants
        .iter()
        .zip(&mut ys)
        .map(|((_, v), y)| operands.call(v, 0, y).err())
        .collect();
    let (timings, host) = {
        let cursors: Vec<Cell<usize>> = variants.iter().map(|_| Cell::new(0)).collect();
        let mut calls: Vec<Call<'_>> = Vec::new();
        for (((_, v), y), (cursor, why)) in variants.iter().zip(&mut ys).zip(cursors.iter().zip(&refused)) {
            if why.is_none() {
                let operands = &operands;
                calls.push(Box::new(move || {
                    cursor.set(cursor.get() + 1);
                    operands.call(v, cursor.get() - 1, y)
                }));
            }
        }
        let timings = time_rows(stream, iters, &mut calls, &mut || cublas(&mut yref))?;
        let host = calls
            .iter_mut()
            .map(|f| crate::bench_timing::host_us(stream, f.as_mut()))
            .collect::<Result<Vec<_>, _>>()?;
        (timings, host)
    };
    // Correctness on copy 0 for all.
    ci.set(0);
    cublas(&mut yref)?;
    let want = stream.clone_dtoh(&yref).map_err(e)?;
    let mut timed = timings.iter().zip(&host);
    let mut rows = String::new();
    for (((label, v), y), why) in variants.iter().zip(&mut ys).zip(&refused) {
        let name = format!("{m}x{n}x{k}");
        if let Some(why) = why {
            rows.push_str(&format!("{name:<18} {label:<18} refused: {why}\n"));
            continue;
        }
        let (&(t, peer, graphed), &host) = timed.next().ok_or("a timed row is missing")?;
        operands.call(v, 0, y)?;
        stream.synchronize().map_err(e)?;
        let max_rel_err = crate::bench_timing::max_rel_diff(&stream.clone_dtoh(y).map_err(e)?, &want);
        let bytes = Weight::bytes(shape) + m * k * 2 + m * n * 2 + n * 2;
        let gbs = bytes as f64 / (t * 1e-6) / 1e9;
        rows.push_str(&format!(
            "{name:<18} {label:<18} {:>4} {:>7} {t:>9.2} {peer:>10.2} {:>8.3} {gbs:>9.0} {:>6.1}% {host:>8.1} {max_rel_err:>11.2e}{}\n",
            shape.group,
            format!("{awq_copies}/{dense_copies}"),
            peer / t,
            100.0 * gbs / copy_gbs,
            if graphed { "" } else { " (eager)" }
        ));
    }
    Ok(rows)
}

fn bench_dequantize(
    ops: &Ops,
    stream: &Arc<CudaStream>,
    shape: AwqShape,
    min_bytes: usize,
    iters: usize,
    copy_gbs: f64,
    rng: &mut SplitMix64,
) -> Result<String, String> {
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let (k, n) = (shape.k, shape.n);
    let per = Weight::bytes(shape) + k * n * 2;
    let copies = rotation_copies(per, min_bytes);
    let weights: Vec<Weight> = (0..copies)
        .map(|_| random_weight(stream, shape, rng))
        .collect::<Result<_, _>>()?;
    let mut outs: Vec<CudaSlice<f16>> = (0..copies)
        .map(|_| stream.alloc_zeros(k * n))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let mut rows = String::new();
    for kmajor in [false, true] {
        let i = Cell::new(0usize);
        let mut f = || {
            let c = i.get() % copies;
            i.set(i.get() + 1);
            let w = weights[c].tensors(shape);
            if kmajor {
                ops.awq_dequantize_kmajor(&w, &mut MatrixMut::new(&mut outs[c], n, k))
            } else {
                ops.awq_dequantize(&w, &mut MatrixMut::new(&mut outs[c], k, n))
            }
            .map_err(|x| x.to_string())
        };
        let (t, _) = median_us(stream, iters, true, &mut [&mut f])?;
        let gbs = per as f64 / (t[0] * 1e-6) / 1e9;
        rows.push_str(&format!(
            "awq_dequantize{} K x N = {k} x {n}, G = {}: {copies} copies, {:.2} us, {gbs:.0} GB/s (int4 + scales/zeros read, 16-bit write) = {:.1}% of the copy bandwidth\n",
            if kmajor { "_kmajor" } else { "" },
            shape.group,
            t[0],
            100.0 * gbs / copy_gbs
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `--config` form forces its kernel: `streamed-checkpoint:` the unprepared op's
    /// streamed kernel (single-word loads, not prepared), `streamed:` the prepared one,
    /// `streamed-sring:` the prepared one with the shared ring.
    #[test]
    fn config_forms_pick_their_kernels() {
        let Ok(Variant::Fused(Some((cfg, 2)))) = parse_variant("streamed-checkpoint:16x64,16x1,4,2") else {
            panic!("streamed-checkpoint: is an unprepared configuration")
        };
        assert!(cfg.streamed && !cfg.prepared && cfg.b_vector_words == 1 && cfg.tile == [16, 64, 64]);
        let Ok(Variant::Prepared(Some((cfg, 2)))) = parse_variant("streamed:8x64,16x1,4,2") else {
            panic!("streamed: is a prepared configuration")
        };
        assert!(cfg.streamed && cfg.prepared && !cfg.shared_ring);
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("streamed-sring:8x64,16x1,4,1") else {
            panic!("streamed-sring: is a prepared configuration")
        };
        assert!(cfg.streamed && cfg.prepared && cfg.shared_ring);
        // a streamed kernel's staged x per split: streamed only, within shared memory
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("streamed-sring:16x128,8x2,4,1,x64") else {
            panic!("streamed-sring: takes a staged x")
        };
        assert!(cfg.shared_ring && cfg.staged_k_tiles == 64 && cfg.streamed_split_k_capacity() == Some(4096));
        assert!(parse_variant("streamed:16x128,8x2,4,1,x128").is_err());
        // the clustered sum by pushes, the ring before the wait, the scales after the MMAs
        let Ok(Variant::Prepared(Some((cfg, 2)))) = parse_variant("streamed-sring:8x64,16x1,4,2,cp,eg,sa") else {
            panic!("streamed-sring: takes cp, eg and sa")
        };
        assert!(cfg.cluster_push && cfg.eager_ring && cfg.scale_after);
        // eg and sa need the shared ring; none twice
        assert!(parse_variant("streamed:8x64,16x1,4,1,eg").is_err());
        assert!(parse_variant("streamed:8x64,16x1,4,1,sa").is_err());
        assert!(parse_variant("streamed-sring:8x64,16x1,4,1,sa,sa").is_err());
        assert!(parse_variant("wgmma:16x256,1x1,8,1,x64").is_err());
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma:64x512,1x2,4,1") else {
            panic!("wgmma: is a prepared configuration")
        };
        assert!(cfg.wgmma && cfg.prepared && cfg.tile == [64, 512, 64]);
        assert!(matches!(parse_variant("prepared-auto"), Ok(Variant::PreparedAuto)));
        // the dense path with its GEMM forced: an SM90 configuration only
        let Ok(Variant::Dense(Some((cfg, 1)))) = parse_variant("dense:sm90:256x160x64,coop,c1x2") else {
            panic!("dense: takes an sm90: configuration")
        };
        assert!(cfg.tile == [256, 160, 64] && cfg.cluster == [1, 2]);
        assert!(matches!(parse_variant("dense"), Ok(Variant::Dense(None))));
        assert!(parse_variant("dense:128x128x32,2x2,4,1").is_err() && parse_variant("dense:sm90:1x2").is_err());
        assert!(matches!(parse_variant("reordered"), Ok(Variant::Reordered(None))));
        let Ok(Variant::Reordered(Some((cfg, 1)))) = parse_variant("reordered:152x256,2x1,7,1") else {
            panic!("reordered: forces the reordered path's wgmma tile")
        };
        assert!(cfg.wgmma && cfg.tile == [152, 256, 64] && cfg.stages == 7);
        // the wgmma kernel's tile walk in groups of token tiles: wgmma only
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma:184x256,2x1,6,1,r8") else {
            panic!("wgmma: takes a raster")
        };
        assert!(cfg.wgmma && cfg.tile == [184, 256, 64] && cfg.raster == 8);
        assert!(parse_variant("prepared:128x256,2x4,3,1,r8").is_err());
        // the persistent wgmma kernel, with or without a raster
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma:184x256,2x1,6,1,p") else {
            panic!("wgmma: takes p")
        };
        assert!(cfg.persistent && cfg.raster == 0);
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma:184x256,2x1,6,1,r4,p") else {
            panic!("wgmma: takes a raster and p")
        };
        assert!(cfg.persistent && cfg.raster == 4);
        assert!(parse_variant("wgmma:184x256,2x1,6,1,p,p").is_err());
        // K splits: the split-K kernel (also forced with one split by sk), small token tiles
        let Ok(Variant::Prepared(Some((cfg, 8)))) = parse_variant("wgmma:16x256,1x1,8,8") else {
            panic!("wgmma: takes splits")
        };
        assert!(cfg.wgmma && cfg.split_k && cfg.tile == [16, 256, 64]);
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma:8x256,1x1,8,1,sk") else {
            panic!("wgmma: takes sk")
        };
        assert!(
            cfg.split_k
                && !parse_variant("wgmma:64x256,1x1,8,1")
                    .is_ok_and(|v| matches!(v, Variant::Prepared(Some((c, _))) if c.split_k))
        );
        // not persistent, not for the other kernels; BM a multiple of 8
        assert!(parse_variant("wgmma:16x256,1x1,8,4,p").is_err());
        assert!(parse_variant("prepared:16x256,1x4,4,4,sk").is_err());
        assert!(parse_variant("wgmma:12x256,1x1,8,4").is_err());
        // the steps in chained pairs: two words per warpgroup only
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma:184x256,2x1,6,1,c2") else {
            panic!("wgmma: takes c2")
        };
        assert!(cfg.chained && !cfg.persistent);
        assert!(parse_variant("wgmma:64x256,1x1,8,1,c2").is_err());
        assert!(parse_variant("prepared:128x256,2x4,3,1,p").is_err());
        assert!(parse_variant("wgmma:184x256,2x1,6,1,8").is_err());
        assert!(parse_variant("wgmma:128x512,1x2,4,1").is_err());
        assert!(matches!(parse_variant("16x256,1x4,4,8"), Ok(Variant::Fused(Some(_)))));
        // the wgmma kernel on the checkpoint's words: unprepared, two or four words a warpgroup
        let Ok(Variant::Fused(Some((cfg, 3)))) = parse_variant("wgmma-checkpoint:16x256,2x1,8,3") else {
            panic!("wgmma-checkpoint: is an unprepared configuration")
        };
        assert!(cfg.wgmma && cfg.split_k && !cfg.prepared && cfg.b_vector_words == 1);
        assert!(parse_variant("wgmma-checkpoint:16x256,4x1,8,3").is_err());
        assert!(parse_variant("streamed-checkpoint:32x64,4x1,4,2").is_err());
        assert!(parse_variant("streamed:40x64,4x1,4,2").is_err());
        assert!(parse_variant("streamed-checkpoint:16x64,16x1").is_err());
        // the prepared wgmma kernel with its weight stages as tensor boxes
        let Ok(Variant::Prepared(Some((cfg, 1)))) = parse_variant("wgmma-box:64x256,1x1,8,1") else {
            panic!("wgmma-box: is a prepared configuration")
        };
        assert!(cfg.wgmma && cfg.prepared && cfg.weight_boxes);
        // wgmma groups in flight: 1 ..= 3, batched steps, not chained
        let Ok(Variant::Prepared(Some((cfg, 2)))) = parse_variant("wgmma-box:64x256,2x1,6,2,f3") else {
            panic!("wgmma-box: takes f3")
        };
        assert!(cfg.split_k && cfg.weight_boxes && cfg.in_flight == 3);
        let Ok(Variant::Fused(Some((cfg, 1)))) = parse_variant("wgmma-checkpoint:64x256,1x1,8,1,f2") else {
            panic!("wgmma-checkpoint: takes f2")
        };
        assert!(!cfg.prepared && cfg.in_flight == 2);
        for bad in ["f4", "f0", "fx", "f2,f2", "c2,f2"] {
            assert!(parse_variant(&format!("wgmma:64x256,2x1,6,2,{bad}")).is_err(), "{bad}");
        }
        assert!(parse_variant("wgmma:192x256,2x1,6,1,f2").is_err());
    }
}
