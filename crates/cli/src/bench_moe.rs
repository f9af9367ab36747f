//! `rcute bench moe`: the fused MoE layer (`Ops::fused_moe`, routed from random router
//! logits: top-k softmax, alignment, GEMM1 + SwiGLU, GEMM2 + router weight, finalize)
//! timed with CUDA events: warm-up, then the median of many samples, each replaying a CUDA
//! graph of 10 layers (with `--eager`, 10 back-to-back calls).
//!
//! The in-process peer is the same layer's GEMMs from cuBLAS, one pair per touched expert
//! on rows gathered beforehand (routing done once on the host, not timed; no activation,
//! no weighting, no finalize: less work than the layer), sampled alternately with rcute.
//! Weights are random bf16; one copy of the experts exceeds 150 MB at the model shapes, so
//! every layer reads them from HBM. Reported: time, the bytes of the experts actually
//! touched (plus x and y) per second, and `6 T k H I` flops per second.

use crate::bench_random::random_bf16;
use crate::bench_timing::median_us;
use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use rcute_ops::moe::{
    fused_moe_fp8_workspace_bytes, fused_moe_workspace_bytes, fused_moe_workspace_bytes_with, topk_softmax_reference,
    validate_fused_moe, MoeFp8Weights, MoeOptions, MoePath, MoeRouting, MoeWeights, MoeWorkspace,
};
use rcute_ops::tuning::{ConfigSpec, MoeSpec};
use rcute_ops::{DType, MatrixMut, MatrixRef, Ops, E4M3};
use std::sync::Arc;

/// Options of `rcute bench moe`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchMoeArgs {
    /// Tokens T (repeatable).
    #[arg(long = "tokens", required = true)]
    pub tokens: Vec<usize>,
    /// Experts E.
    #[arg(long)]
    pub experts: usize,
    /// Experts per token k.
    #[arg(long)]
    pub topk: usize,
    /// Hidden size H (a multiple of 8).
    #[arg(long)]
    pub hidden: usize,
    /// Intermediate size I (a multiple of 8).
    #[arg(long)]
    pub inter: usize,
    /// Renormalise the top-k weights (Mixtral).
    #[arg(long)]
    pub renormalize: bool,
    /// Timed samples (median reported).
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Time back-to-back launches instead of CUDA graphs.
    #[arg(long)]
    pub eager: bool,
    /// The grouped GEMM family of the layer (repeatable; each is timed in the same run,
    /// alternating with the peer): `auto` (the op's rule), `sm80`, `sm90` (GEMM2 on 128x256
    /// tiles), `sm90-narrow` (GEMM2 on 128x128 tiles), `sm90-cluster`,
    /// `sm90-narrow-cluster` or `sm90-pingpong` (both GEMMs on the ping-pong schedule);
    /// `,b<BAND>` after any of them walks the SM90 GEMMs' tiles in bands of at most BAND
    /// row tiles of one expert (`MoeOptions::walk_band`, e.g. `sm90-pingpong,b4`);
    /// `,gather` / `,tma` forces GEMM1's gathering form (the token rows copied by its
    /// producer, no row gather) on or off (`MoeOptions::gather`, e.g. `sm90,gather` or
    /// `sm90-narrow,gather`; on `auto` it holds where the rule runs the SM90 family);
    /// `,tiles` / `,persistent` launches the cooperative SM90 GEMMs with one CTA (cluster)
    /// per tile or on persistent CTAs (`MoeOptions::per_tile`); `,dyn` / `,static` walks
    /// their tiles dynamically (a work counter, `MoeOptions::dynamic`) or statically;
    /// `,route` / `,noroute` makes GEMM1 route a decode batch itself (at most 32 routed
    /// entries, the SM80 family's tile grid) or the routing kernels run
    /// (`MoeOptions::route`, e.g. `auto,route`); `,alignc` / `,align1` aligns the routed
    /// entries on several CTAs or one block (`MoeOptions::align_ctas`, e.g. `auto,alignc`);
    /// `,m64` runs the bf16 / f16 SM90 layer on 64-row ping-pong tiles (`MoeOptions::row_tile`,
    /// e.g. `sm90-pingpong,m64`); `,pad` makes the cooperative SM90 GEMMs skip the rest of
    /// the work on all-padding rows too (`MoeOptions::pad_skip`, e.g. `sm90,gather,pad`).
    #[arg(long = "path", default_values_t = ["auto".to_string()])]
    pub path: Vec<String>,
    /// A MoE configuration of either family (repeatable; the tuning tables' text form,
    /// e.g. `moe:16x128x64,1x4,k4,s8` or `moe:sm90n`), timed beside the `--path` layers in
    /// the same run (`Ops::run_fused_moe_spec` on the same buffers).
    #[arg(long = "config")]
    pub config: Vec<String>,
    /// The prepared layer (`Ops::fused_moe_prepared_with` on `MoeWeights::prepare`d
    /// experts, prepared once before timing): a streamed configuration (repeatable, e.g.
    /// `moe:16x128x128,1x8,s3,reg`, or with the shared ring `moe:16x128x128,1x8,s3,reg,sring`),
    /// or `auto` (the rule of `rcute_ops::moe::prepared_spec`),
    /// timed beside the other layers in the same run; rows named `prep:<configuration>`.
    #[arg(long = "prepared")]
    pub prepared: Vec<String>,
    /// Expert parallelism over this many GPUs (NCCL; needs the `nccl` feature of
    /// rcute-cli): times the layer split over the ranks against one GPU.
    #[arg(long, default_value_t = 1)]
    pub ranks: usize,
    /// With `--ranks`: the combines to time (all-reduce, all-reduce-overlapped,
    /// reduce-scatter, dispatch).
    #[arg(long = "combine", default_values_t = ["all-reduce".to_string(), "all-reduce-overlapped".to_string(), "dispatch".to_string()])]
    pub combine: Vec<String>,
    /// The experts' weight type: `bf16`, or `e4m3` (sm_90): the FP8 layer
    /// (`Ops::fused_moe_fp8`, the bf16 weights quantized per output channel on the GPU) is
    /// timed beside the `--path` bf16 layers in the same run, with its relative error
    /// against the last bf16 layer's output.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// With `--dtype e4m3`: the paths of the FP8 layer (repeatable, as `--path`: `auto` runs
    /// its GEMMs on 128x256x128 tiles without clusters, the forced SM90 paths pick tiles and
    /// 2x1 clusters by the bf16 layer's rules: `rcute_ops::moe::sm90_gemms`), each timed
    /// in the same run; rows named `e4m3:<path>`.
    #[arg(long = "fp8-path", default_values_t = ["auto".to_string()])]
    pub fp8_path: Vec<String>,
}

/// The FP8 copy of the benchmark's experts: e4m3 weights and their per-row f32 scales.
struct Fp8Experts {
    w13: CudaSlice<E4M3>,
    w2: CudaSlice<E4M3>,
    s13: CudaSlice<f32>,
    s2: CudaSlice<f32>,
}

impl Fp8Experts {
    /// Quantizes `w13 [E * 2I, H]` and `w2 [E * H, I]` per row on the GPU.
    fn new(ops: &Ops, w13: &CudaSlice<bf16>, w2: &CudaSlice<bf16>, a: &BenchMoeArgs) -> Result<Fp8Experts, String> {
        let s = ops.gpu().stream().clone();
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let (r13, r2) = (a.experts * 2 * a.inter, a.experts * a.hidden);
        let mut f = Fp8Experts {
            w13: s.alloc_zeros::<E4M3>(r13 * a.hidden).map_err(e)?,
            w2: s.alloc_zeros::<E4M3>(r2 * a.inter).map_err(e)?,
            s13: s.alloc_zeros::<f32>(r13).map_err(e)?,
            s2: s.alloc_zeros::<f32>(r2).map_err(e)?,
        };
        for (src, q, sc, rows, k) in [
            (w13, &mut f.w13, &mut f.s13, r13, a.hidden),
            (w2, &mut f.w2, &mut f.s2, r2, a.inter),
        ] {
            ops.quantize_e4m3_rows(
                &MatrixRef::new(src, rows, k),
                &mut MatrixMut::new(q, rows, k),
                &mut MatrixMut::new(sc, rows, 1),
            )
            .map_err(|x| x.to_string())?;
        }
        Ok(f)
    }

    fn weights(&self, a: &BenchMoeArgs) -> MoeFp8Weights<'_> {
        let (e, h, i) = (a.experts, a.hidden, a.inter);
        MoeFp8Weights {
            w13: MatrixRef::new(&self.w13, 2 * i, h).batched(e, (2 * i * h) as i64),
            w2: MatrixRef::new(&self.w2, h, i).batched(e, (h * i) as i64),
            w13_scale: MatrixRef::new(&self.s13, e, 2 * i),
            w2_scale: MatrixRef::new(&self.s2, e, h),
        }
    }
}

/// Relative Frobenius distance of `got` from `want`.
fn rel_error(got: &[bf16], want: &[bf16]) -> f64 {
    let (n, d) = got.iter().zip(want).fold((0.0f64, 0.0f64), |(n, d), (g, w)| {
        let (g, w) = (g.to_f64(), w.to_f64());
        (n + (g - w) * (g - w), d + w * w)
    });
    (n / d.max(1e-300)).sqrt()
}

/// `n` random bf16 on the device: a 16M-element random block repeated.
pub(crate) fn device_random(s: &Arc<CudaStream>, n: usize, seed: u64, scale: f32) -> Result<CudaSlice<bf16>, String> {
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let block = n.min(1 << 24);
    let host = random_bf16(block, seed, scale);
    let mut d = s.alloc_zeros::<bf16>(n).map_err(e)?;
    let mut at = 0;
    while at < n {
        let len = block.min(n - at);
        let mut dst = d.slice_mut(at..at + len);
        s.memcpy_htod(&host[..len], &mut dst).map_err(e)?;
        at += len;
    }
    Ok(d)
}

/// The cuBLAS peer: per touched expert, GEMM1 `[c_e, H] x [H, 2I]` and GEMM2 `[c_e, I] x
/// [I, H]` on pre-gathered rows.
struct Peer {
    xg: CudaSlice<bf16>,
    h1: CudaSlice<bf16>,
    out: CudaSlice<bf16>,
    /// (expert, first gathered row, rows).
    groups: Vec<(usize, usize, usize)>,
}

impl Peer {
    fn new(s: &Arc<CudaStream>, x: &[bf16], ids: &[i32], a: &BenchMoeArgs, t: usize) -> Result<Peer, String> {
        let e = |x: cudarc::driver::DriverError| x.to_string();
        let (h, i, k) = (a.hidden, a.inter, a.topk);
        let mut rows = Vec::with_capacity(t * k * h);
        let mut groups = Vec::new();
        for ex in 0..a.experts {
            let start = rows.len() / h;
            for (entry, id) in ids.iter().enumerate() {
                if *id as usize == ex {
                    rows.extend_from_slice(&x[(entry / k) * h..(entry / k + 1) * h]);
                }
            }
            let c = rows.len() / h - start;
            if c > 0 {
                groups.push((ex, start, c));
            }
        }
        Ok(Peer {
            xg: s.clone_htod(&rows).map_err(e)?,
            h1: s.alloc_zeros(t * k * 2 * i).map_err(e)?,
            out: s.alloc_zeros(t * k * h).map_err(e)?,
            groups,
        })
    }

    fn run(
        &mut self,
        blas: &CudaBlas,
        w13: &CudaSlice<bf16>,
        w2: &CudaSlice<bf16>,
        a: &BenchMoeArgs,
    ) -> Result<(), String> {
        let (h, i) = (a.hidden, a.inter);
        for &(ex, r0, c) in &self.groups {
            // The gathered rows [c, H] @ W13_e^T ([H, 2I], K-contiguous) -> [c, 2I].
            let g1 = crate::bench_cmd::cublas_tn_bf16(c, 2 * i, h);
            let w = w13.slice(ex * 2 * i * h..(ex + 1) * 2 * i * h);
            let xr = self.xg.slice(r0 * h..(r0 + c) * h);
            let mut hr = self.h1.slice_mut(r0 * 2 * i..(r0 + c) * 2 * i);
            // SAFETY: slices sized for the GEMM shapes above.
            unsafe { blas.gemm(g1, &w, &xr, &mut hr) }.map_err(|x| x.to_string())?;
            let g2 = GemmConfig {
                transa: cublasOperation_t::CUBLAS_OP_T,
                transb: cublasOperation_t::CUBLAS_OP_N,
                m: h as i32,
                n: c as i32,
                k: i as i32,
                alpha: bf16::ONE,
                lda: i as i32,
                ldb: (2 * i) as i32,
                beta: bf16::ZERO,
                ldc: h as i32,
            };
            let w = w2.slice(ex * h * i..(ex + 1) * h * i);
            let hr = self.h1.slice(r0 * 2 * i..(r0 + c) * 2 * i);
            let mut or = self.out.slice_mut(r0 * h..(r0 + c) * h);
            // SAFETY: as above (the first I columns of each h1 row).
            unsafe { blas.gemm(g2, &w, &hr, &mut or) }.map_err(|x| x.to_string())?;
        }
        Ok(())
    }
}

/// The `--path` values: each path with its fields after commas as layer options:
/// `b<BAND>` (the walk band), `gather` / `tma` (GEMM1 gathering its rows itself or not),
/// `tiles` / `persistent` (the cooperative SM90 GEMMs' grid: one CTA per tile or not),
/// `dyn` / `static` (their walk: dynamic or static),
/// `route` / `noroute` (GEMM1 routing a decode batch itself or the routing kernels:
/// `MoeOptions::route`), `alignc` / `align1` (the alignment on several CTAs or one block:
/// `MoeOptions::align_ctas`), `m64` (the SM90 layer on 64-row tiles: `MoeOptions::row_tile`),
/// `pad` (the cooperative SM90 GEMMs' padding skip: `MoeOptions::pad_skip`).
fn parse_paths(v: &[String]) -> Result<Vec<MoeOptions>, String> {
    v.iter()
        .map(|p| {
            let mut fields = p.split(',');
            let mut opts = MoeOptions {
                path: parse_path(fields.next().unwrap_or_default())?,
                ..MoeOptions::default()
            };
            for f in fields {
                match f {
                    "gather" => opts.gather = Some(true),
                    "tma" => opts.gather = Some(false),
                    "tiles" => opts.per_tile = Some(true),
                    "persistent" => opts.per_tile = Some(false),
                    "dyn" => opts.dynamic = Some(true),
                    "static" => opts.dynamic = Some(false),
                    "route" => opts.route = Some(true),
                    "noroute" => opts.route = Some(false),
                    "alignc" => opts.align_ctas = Some(true),
                    "align1" => opts.align_ctas = Some(false),
                    "m64" => opts.row_tile = Some(64),
                    "pad" => opts.pad_skip = Some(true),
                    _ => {
                        let b = f.strip_prefix('b').ok_or(format!("--path {p}: unknown field {f:?}"))?;
                        let band = b
                            .parse::<i64>()
                            .map_err(|_| format!("--path {p}: band {b:?} is not a number"))?;
                        opts.walk_band = Some(band);
                    }
                }
            }
            Ok(opts)
        })
        .collect()
}

/// The row name of a layer on `opts`' path, band, GEMM1 form and grid, e.g.
/// `sm90pingpong,b4,gather` or `auto,tiles`.
fn path_name(opts: &MoeOptions) -> String {
    let mut name = format!("{:?}", opts.path).to_lowercase();
    if let Some(b) = opts.walk_band {
        name += &format!(",b{b}");
    }
    match opts.gather {
        Some(true) => name += ",gather",
        Some(false) => name += ",tma",
        None => {}
    }
    match opts.per_tile {
        Some(true) => name += ",tiles",
        Some(false) => name += ",persistent",
        None => {}
    }
    match opts.dynamic {
        Some(true) => name += ",dyn",
        Some(false) => name += ",static",
        None => {}
    }
    match opts.route {
        Some(true) => name += ",route",
        Some(false) => name += ",noroute",
        None => {}
    }
    match opts.align_ctas {
        Some(true) => name += ",alignc",
        Some(false) => name += ",align1",
        None => {}
    }
    if opts.pad_skip == Some(true) {
        name += ",pad";
    }
    if let Some(r) = opts.row_tile {
        name += &format!(",m{r}");
    }
    name
}

/// One `--path` name.
fn parse_path(p: &str) -> Result<MoePath, String> {
    match p {
        "auto" => Ok(MoePath::Auto),
        "sm80" => Ok(MoePath::Sm80),
        "sm90" => Ok(MoePath::Sm90),
        "sm90-narrow" => Ok(MoePath::Sm90Narrow),
        "sm90-cluster" => Ok(MoePath::Sm90Cluster),
        "sm90-narrow-cluster" => Ok(MoePath::Sm90NarrowCluster),
        "sm90-pingpong" => Ok(MoePath::Sm90PingPong),
        other => Err(format!(
            "--path {other}: auto, sm80, sm90, sm90-narrow, sm90-cluster, sm90-narrow-cluster or sm90-pingpong (GEMM1 gathering: `,gather`)"
        )),
    }
}

/// The `--config` values: MoE configurations of either family.
fn parse_configs(v: &[String]) -> Result<Vec<ConfigSpec>, String> {
    v.iter()
        .map(|c| {
            let spec: ConfigSpec = c.parse().map_err(|e| format!("--config {c}: {e}"))?;
            match spec {
                ConfigSpec::Moe(_) | ConfigSpec::MoeSm90(_) => Ok(spec),
                other => Err(format!("--config {other}: not a MoE configuration")),
            }
        })
        .collect()
}

/// The `--prepared` values: `auto` (`None`) or streamed MoE configurations.
fn parse_prepared(v: &[String]) -> Result<Vec<Option<MoeSpec>>, String> {
    v.iter()
        .map(|c| match c.as_str() {
            "auto" => Ok(None),
            _ => match c.parse::<ConfigSpec>().map_err(|e| format!("--prepared {c}: {e}"))? {
                ConfigSpec::Moe(s) if s.streamed => Ok(Some(s)),
                other => Err(format!(
                    "--prepared {other}: not a streamed MoE configuration (moe:...,reg)"
                )),
            },
        })
        .collect()
}

/// The table's title and column heads.
fn header(args: &BenchMoeArgs, gpu: &str) -> String {
    let (e_n, k, h, i) = (args.experts, args.topk, args.hidden, args.inter);
    format!(
        "MoE E={e_n} top-{k} H={h} I={i} bf16, {} (experts {:.1} MB, one copy)\n{:>6} {:>5} {:>10} {:>9} {:>9} {:>10} {:>8} {:>7}\n",
        gpu,
        (3 * e_n * h * i * 2) as f64 / 1e6,
        "T",
        "path",
        "rcute_us",
        "TB/s",
        "TFLOP/s",
        "cublas_us",
        "ratio",
        "graphs"
    )
}

/// The benchmark's experts prepared for `Ops::fused_moe_prepared` (once, before timing).
fn prepare_experts<'a>(
    ops: &Ops,
    w13: &'a CudaSlice<bf16>,
    w2: &'a CudaSlice<bf16>,
    a: &BenchMoeArgs,
) -> Result<MoeWeights<'a>, String> {
    let (e, h, i) = (a.experts, a.hidden, a.inter);
    let w13v = MatrixRef::new(w13, 2 * i, h).batched(e, (2 * i * h) as i64);
    let w2v = MatrixRef::new(w2, h, i).batched(e, (h * i) as i64);
    MoeWeights::prepare(ops, &w13v, &w2v, false).map_err(|x| x.to_string())
}

/// The workspace every timed bf16 layer of `t` tokens fits.
fn workspace_bytes(
    a: &BenchMoeArgs,
    t: usize,
    configs: &[ConfigSpec],
    prepared: &[Option<MoeSpec>],
) -> Result<usize, String> {
    let (e, k, h, i) = (a.experts, a.topk, a.hidden, a.inter);
    let mut bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).map_err(|x| x.to_string())?;
    let specs = configs.iter().filter_map(|c| match c {
        ConfigSpec::Moe(s) => Some(s),
        _ => None,
    });
    for s in specs.chain(prepared.iter().flatten()) {
        let b = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, s).map_err(|x| x.to_string())?;
        bytes = bytes.max(b);
    }
    Ok(bytes)
}

/// The bf16 layers' row names: the paths, the configurations, the prepared layers.
fn layer_names(paths: &[MoeOptions], configs: &[ConfigSpec], prepared: &[Option<MoeSpec>]) -> Vec<String> {
    paths
        .iter()
        .map(path_name)
        .chain(configs.iter().map(|c| c.to_string()))
        .chain(prepared.iter().map(|c| match c {
            Some(s) => format!("prep:{s}"),
            None => "prep:auto".to_string(),
        }))
        .collect()
}

/// The operands of the timed FP8 layers (one per `--fp8-path`), shared by them in turn.
#[derive(Clone, Copy)]
struct Fp8Layer<'a, 'w> {
    ops: &'a Ops,
    x: &'a MatrixRef<'w>,
    routing: &'a MoeRouting<'w>,
    bufs: &'a std::cell::RefCell<(MoeWorkspace<'w>, MatrixMut<'w>)>,
    w: &'a MoeFp8Weights<'w>,
}

impl<'a, 'w> Fp8Layer<'a, 'w> {
    /// The FP8 layer on `opts`' path and band, as a timed closure.
    fn timed(self, opts: MoeOptions) -> Box<dyn FnMut() -> Result<(), String> + 'a> {
        Box::new(move || {
            let mut b = self.bufs.borrow_mut();
            let (wsv, yv) = &mut *b;
            self.ops
                .fused_moe_fp8(self.x, self.w, self.routing, &opts, wsv, yv)
                .map_err(|x| x.to_string())
        })
    }
}

/// The FP8 layers' lines at `t` tokens: each path's speed-up over the bf16 layer `bf16`
/// (its path and median) and the relative error `err` of the FP8 output.
fn fp8_lines(t: usize, bf16: (&MoeOptions, f64), fp8_paths: &[MoeOptions], fp8_us: &[f64], err: f64) -> String {
    fp8_paths
        .iter()
        .zip(fp8_us)
        .map(|(p8, us)| {
            format!(
                "{t:>6} e4m3:{} vs bf16 ({}): {:.2}x faster, relative error {err:.2e}\n",
                path_name(p8),
                path_name(bf16.0),
                bf16.1 / us
            )
        })
        .collect()
}

/// Runs the benchmark; returns the table.
pub fn run(args: &BenchMoeArgs) -> Result<String, String> {
    let paths = parse_paths(&args.path)?;
    let fp8_paths = parse_paths(&args.fp8_path)?;
    let configs = parse_configs(&args.config)?;
    let prepared = parse_prepared(&args.prepared)?;
    if args.ranks > 1 {
        return Err("--ranks above 1: the expert-parallel layer is `bench_moe_ep::run` (feature nccl), which `rcute bench moe` calls".into());
    }
    let (e_n, k, h, i) = (args.experts, args.topk, args.hidden, args.inter);
    // SAFETY: one stream only (every buffer here, and the ops handle's).
    let (gpu, s) = unsafe { crate::bench_timing::one_stream_gpu("the benchmark") }?;
    let blas = CudaBlas::new(s.clone()).map_err(|e| format!("cuBLAS: {e}"))?;
    let ops = Ops::new(gpu.clone());
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let w13 = device_random(&s, e_n * 2 * i * h, 11, 1.0 / (h as f32).sqrt())?;
    let w2 = device_random(&s, e_n * h * i, 12, 1.0 / (i as f32).sqrt())?;
    let fp8 = match args.dtype.as_str() {
        "bf16" => None,
        "e4m3" => Some(Fp8Experts::new(&ops, &w13, &w2, args)?),
        other => return Err(format!("--dtype {other}: bf16 or e4m3")),
    };
    let experts = match prepared.is_empty() {
        true => None,
        false => Some(prepare_experts(&ops, &w13, &w2, args)?),
    };
    let mut out = header(args, gpu.name());
    for (n, &t) in args.tokens.iter().enumerate() {
        let x_h = random_bf16(t * h, 100 + n as u64, 1.0);
        let logits_h: Vec<f32> = random_bf16(t * e_n, 200 + n as u64, 4.0)
            .iter()
            .map(|v| v.to_f32())
            .collect();
        let lf: Vec<f64> = logits_h.iter().map(|v| f64::from(*v)).collect();
        let r = topk_softmax_reference(&lf, t, e_n, k, args.renormalize).map_err(|x| x.to_string())?;
        let x = s.clone_htod(&x_h).map_err(e)?;
        let logits = s.clone_htod(&logits_h).map_err(e)?;
        let mut y = s.alloc_zeros::<bf16>(t * h).map_err(e)?;
        let mut ws = s
            .alloc_zeros::<u8>(workspace_bytes(args, t, &configs, &prepared)?)
            .map_err(e)?;
        let mut y8 = s.alloc_zeros::<bf16>(t * h).map_err(e)?;
        let bytes8 = fused_moe_fp8_workspace_bytes(t, k, e_n, h, i, DType::BF16).map_err(|x| x.to_string())?;
        let mut ws8 = s.alloc_zeros::<u8>(if fp8.is_some() { bytes8 } else { 1 }).map_err(e)?;
        let mut peer = Peer::new(&s, &x_h, &r.topk_ids, args, t)?;
        let touched = peer.groups.len();
        let xv = MatrixRef::new(&x, t, h);
        let w13v = MatrixRef::new(&w13, 2 * i, h).batched(e_n, (2 * i * h) as i64);
        let w2v = MatrixRef::new(&w2, h, i).batched(e_n, (h * i) as i64);
        let routing = MoeRouting::Logits {
            logits: MatrixRef::new(&logits, t, e_n),
            topk: k,
            renormalize: args.renormalize,
        };
        // One closure per path on the same buffers (borrowed in turn), then the peer:
        // timed alternately.
        let bufs = std::cell::RefCell::new((MoeWorkspace::new(&mut ws), MatrixMut::new(&mut y, t, h)));
        let bufs8 = std::cell::RefCell::new((MoeWorkspace::new(&mut ws8), MatrixMut::new(&mut y8, t, h)));
        let w8 = fp8.as_ref().map(|f| f.weights(args));
        let mut layers: Vec<Box<dyn FnMut() -> Result<(), String> + '_>> = Vec::new();
        for &opts in &paths {
            let (ops, xv, w13v, w2v, routing, bufs) = (&ops, &xv, &w13v, &w2v, &routing, &bufs);
            layers.push(Box::new(move || {
                let mut b = bufs.borrow_mut();
                let (wsv, yv) = &mut *b;
                ops.fused_moe(xv, w13v, w2v, routing, &opts, wsv, yv)
                    .map_err(|x| x.to_string())
            }));
        }
        for spec in &configs {
            let (ops, xv, w13v, w2v, routing, bufs) = (&ops, &xv, &w13v, &w2v, &routing, &bufs);
            layers.push(Box::new(move || {
                let mut b = bufs.borrow_mut();
                let (wsv, yv) = &mut *b;
                let p = validate_fused_moe(xv, w13v, w2v, routing, &MoeOptions::default(), wsv, yv)
                    .map_err(|x| x.to_string())?;
                ops.run_fused_moe_spec(&p, spec).map_err(|x| x.to_string())
            }));
        }
        for spec in &prepared {
            let (ops, xv, routing, bufs, pw) = (&ops, &xv, &routing, &bufs, experts.as_ref());
            layers.push(Box::new(move || {
                let mut b = bufs.borrow_mut();
                let (wsv, yv) = &mut *b;
                let pw = pw.ok_or("no prepared experts")?;
                ops.fused_moe_prepared_with(xv, pw, routing, &MoeOptions::default(), wsv, yv, spec.as_ref())
                    .map_err(|x| x.to_string())
            }));
        }
        let fp8_layers = if w8.is_some() { &fp8_paths[..] } else { &[] };
        if let Some(w8) = &w8 {
            let layer = Fp8Layer {
                ops: &ops,
                x: &xv,
                routing: &routing,
                bufs: &bufs8,
                w: w8,
            };
            layers.extend(fp8_layers.iter().map(|&opts| layer.timed(opts)));
        }
        let mut pc = || peer.run(&blas, &w13, &w2, args);
        let mut all: Vec<&mut dyn FnMut() -> Result<(), String>> = layers
            .iter_mut()
            .map(|f| f.as_mut() as &mut dyn FnMut() -> Result<(), String>)
            .collect();
        all.push(&mut pc);
        let (med, graphed) = median_us(&s, args.iters, !args.eager, &mut all)?;
        let peer_us = med[med.len() - 1];
        drop(all);
        drop(layers);
        let flops = 6.0 * (t * k * h * i) as f64;
        // One row per timed layer: the paths, then the FP8 layer when there is one (the last
        // median is the peer's, printed in its own column).
        let names = layer_names(&paths, &configs, &prepared).into_iter();
        let bf16_layers = paths.len() + configs.len() + prepared.len();
        let fp8_names = fp8_layers.iter().map(|p| format!("e4m3:{}", path_name(p)));
        for (n, (path, us)) in names.chain(fp8_names).zip(&med[..med.len() - 1]).enumerate() {
            let wb = if n < bf16_layers { 2 } else { 1 };
            let moved = (touched * 3 * h * i * wb + 2 * t * h * 2) as f64;
            out.push_str(&format!(
                "{t:>6} {path:>5} {us:>10.1} {:>9.2} {:>9.1} {peer_us:>10.1} {:>8.2} {:>7}\n",
                moved / us / 1e6,
                flops / us / 1e6,
                peer_us / us,
                graphed
            ));
        }
        if fp8.is_some() {
            // y8 holds the output of the FP8 layer timed last: the error printed for every path.
            let (yb, y8h) = (s.clone_dtoh(&y).map_err(e)?, s.clone_dtoh(&y8).map_err(e)?);
            let last = paths.len() - 1;
            let fp8_us = &med[bf16_layers..bf16_layers + fp8_layers.len()];
            out.push_str(&fp8_lines(
                t,
                (&paths[last], med[last]),
                fp8_layers,
                fp8_us,
                rel_error(&y8h, &yb),
            ));
        }
    }
    out.push_str("ratio = cublas_us / rcute_us (> 1: rcute faster); the peer is GEMMs only, on pre-gathered rows\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{parse_paths, path_name};
    use rcute_ops::moe::MoePath;

    /// `--path` fields after the name: the band, GEMM1's form and the grid, in any order; the row
    /// name spells them back; an unknown field is an error.
    #[test]
    fn path_fields_force_the_band_and_gemm1s_form() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let [pp, auto] =
            <[_; 2]>::try_from(parse_paths(&v(&["sm90-pingpong,gather,b4", "auto,tma"])).unwrap()).unwrap();
        assert_eq!(
            (pp.path, pp.walk_band, pp.gather),
            (MoePath::Sm90PingPong, Some(4), Some(true))
        );
        assert_eq!(
            (auto.path, auto.walk_band, auto.gather),
            (MoePath::Auto, None, Some(false))
        );
        assert_eq!(path_name(&pp), "sm90pingpong,b4,gather");
        assert_eq!(path_name(&auto), "auto,tma");
        assert!(parse_paths(&v(&["sm90,gatherx"])).is_err());
        assert!(parse_paths(&v(&["sm90,bx"])).is_err());
        // GEMM1's gathering form is an option of a path, not a path of its own.
        let [g] = <[_; 1]>::try_from(parse_paths(&v(&["sm90,gather"])).unwrap()).unwrap();
        assert_eq!((g.path, g.gather), (MoePath::Sm90, Some(true)));
        assert_eq!(path_name(&g), "sm90,gather");
        assert!(parse_paths(&v(&["sm90-gather"])).is_err());
        // The SM90 GEMMs' grid: one CTA per tile or persistent.
        let [t, p] = <[_; 2]>::try_from(parse_paths(&v(&["auto,tiles", "sm90-cluster,persistent"])).unwrap()).unwrap();
        assert_eq!(
            (t.path, t.per_tile, p.path, p.per_tile),
            (MoePath::Auto, Some(true), MoePath::Sm90Cluster, Some(false))
        );
        assert_eq!(
            (path_name(&t).as_str(), path_name(&p).as_str()),
            ("auto,tiles", "sm90cluster,persistent")
        );
        // The SM90 GEMMs' walk: dynamic or static.
        let [d, st] = <[_; 2]>::try_from(parse_paths(&v(&["auto,dyn", "sm90,static"])).unwrap()).unwrap();
        assert_eq!((d.dynamic, st.dynamic), (Some(true), Some(false)));
        assert_eq!(
            (path_name(&d).as_str(), path_name(&st).as_str()),
            ("auto,dyn", "sm90,static")
        );
    }
}
