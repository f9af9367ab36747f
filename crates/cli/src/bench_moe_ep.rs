//! `rcute bench moe ... --ranks W` (cargo feature `nccl`): the expert-parallel MoE layer
//! (`rcute_ops::ep::ExpertParallel`) on `W` GPUs against the one-GPU fused MoE on GPU 0,
//! in one process, one thread per rank.
//!
//! Per `T`: the one-GPU layer (all `E` experts, `T` tokens routed from random logits),
//! then each combine asked for on `W` GPUs (rank `r` holds experts `[r E / W, (r + 1) E /
//! W)`; all-reduce: every rank the same `T` tokens; dispatch: `T / W` tokens per rank, `T`
//! in all). Both sides are timed the same way: CUDA graphs of `CALLS_PER_SAMPLE` layers
//! (the NCCL calls captured too), replayed after a barrier across the rank threads, the
//! median over samples; a rank's time is its stream's, the layer's the slowest rank's.
//! NCCL's share comes from eager runs of the same layer with CUDA events recorded around
//! the collectives (events inside a captured graph cannot be timed); in those, a
//! collective's time includes waiting for the slower rank. Weights and activations are
//! random bf16.

use crate::bench_moe::{device_random, BenchMoeArgs};
use crate::bench_random::random_bf16;
use crate::bench_timing::CALLS_PER_SAMPLE;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};
use half::bf16;
use rcute_ops::ep::{ep_moe_workspace_bytes, Communicator, EpCombine, EpMark, ExpertParallel, Nccl};
use rcute_ops::moe::{fused_moe_workspace_bytes, MoeOptions, MoeRouting, MoeWorkspace};
use rcute_ops::{DType, Gpu, MatrixMut, MatrixRef, Ops};
use std::sync::{Arc, Barrier};

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// CUDA events recorded right before and after the collectives of one layer.
type Marks = Vec<(CudaEvent, CudaEvent)>;

/// Median of `v` (non-empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn event(st: &Arc<CudaStream>) -> Result<CudaEvent, String> {
    st.context().new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(s)
}

/// Median microseconds per call of `f` on `st` (`iters` samples of `CALLS_PER_SAMPLE`
/// calls), and the median microseconds per call between the marks `f` records in the
/// events it is handed (0 when it records none).
fn time_calls(
    st: &Arc<CudaStream>,
    iters: usize,
    barrier: Option<&Barrier>,
    f: &mut dyn FnMut(&mut Marks) -> Result<(), String>,
) -> Result<(f64, f64), String> {
    let mut marks = Vec::new();
    for _ in 0..3 {
        f(&mut marks)?;
    }
    st.synchronize().map_err(s)?;
    let (mut total, mut inside) = (Vec::new(), Vec::new());
    for _ in 0..iters.max(1) {
        marks.clear();
        if let Some(b) = barrier {
            b.wait();
        }
        let (a, z) = (event(st)?, event(st)?);
        a.record(st).map_err(s)?;
        for _ in 0..CALLS_PER_SAMPLE {
            f(&mut marks)?;
        }
        z.record(st).map_err(s)?;
        z.synchronize().map_err(s)?;
        total.push(f64::from(a.elapsed_ms(&z).map_err(s)?) * 1e3 / CALLS_PER_SAMPLE as f64);
        let mut n = 0.0;
        for (b, e) in &marks {
            n += f64::from(b.elapsed_ms(e).map_err(s)?) * 1e3;
        }
        inside.push(n / CALLS_PER_SAMPLE as f64);
    }
    Ok((median(total), median(inside)))
}

/// Median microseconds per call of `f` replayed from a CUDA graph of `CALLS_PER_SAMPLE`
/// calls captured on `st` (after 3 eager warm-up calls), `iters` samples, each after
/// `barrier`; `None` when the capture fails (then the caller times eager calls).
fn time_graph(
    st: &Arc<CudaStream>,
    iters: usize,
    barrier: Option<&Barrier>,
    f: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Option<f64>, String> {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    for _ in 0..3 {
        f()?;
    }
    st.synchronize().map_err(s)?;
    st.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .map_err(s)?;
    let r = (0..CALLS_PER_SAMPLE).try_for_each(|_| f());
    let g = st.end_capture(CUgraphInstantiate_flags(0));
    let graph = match (r, g) {
        (Ok(()), Ok(Some(g))) => g,
        (r, g) => {
            eprintln!("graph capture failed ({r:?}, {:?}): eager timing", g.err());
            return Ok(None);
        }
    };
    let mut v = Vec::new();
    for _ in 0..iters.max(1) {
        if let Some(b) = barrier {
            b.wait();
        }
        let (a, z) = (event(st)?, event(st)?);
        a.record(st).map_err(s)?;
        graph.launch().map_err(s)?;
        z.record(st).map_err(s)?;
        z.synchronize().map_err(s)?;
        v.push(f64::from(a.elapsed_ms(&z).map_err(s)?) * 1e3 / CALLS_PER_SAMPLE as f64);
    }
    Ok(Some(median(v)))
}

/// The one-GPU layer on `gpu`: median microseconds per layer.
fn one_gpu(gpu: &Gpu, a: &BenchMoeArgs, t: usize, x_h: &[bf16], logits_h: &[f32]) -> Result<f64, String> {
    let (e_n, k, h, i) = (a.experts, a.topk, a.hidden, a.inter);
    let st = gpu.stream().clone();
    let ops = Ops::new(gpu.clone());
    let w13 = device_random(&st, e_n * 2 * i * h, 11, 1.0 / (h as f32).sqrt())?;
    let w2 = device_random(&st, e_n * h * i, 12, 1.0 / (i as f32).sqrt())?;
    let x = st.clone_htod(x_h).map_err(s)?;
    let logits = st.clone_htod(logits_h).map_err(s)?;
    let mut y = st.alloc_zeros::<bf16>(t * h).map_err(s)?;
    let mut ws = st
        .alloc_zeros::<u8>(fused_moe_workspace_bytes(t, k, e_n, h, i, DType::BF16).map_err(s)?)
        .map_err(s)?;
    let (xv, w13v, w2v) = (
        MatrixRef::new(&x, t, h),
        MatrixRef::new(&w13, 2 * i, h).batched(e_n, (2 * i * h) as i64),
        MatrixRef::new(&w2, h, i).batched(e_n, (h * i) as i64),
    );
    let routing = MoeRouting::Logits {
        logits: MatrixRef::new(&logits, t, e_n),
        topk: k,
        renormalize: a.renormalize,
    };
    let mut wsv = MoeWorkspace::new(&mut ws);
    let mut yv = MatrixMut::new(&mut y, t, h);
    let mut call = || {
        ops.fused_moe(&xv, &w13v, &w2v, &routing, &MoeOptions::default(), &mut wsv, &mut yv)
            .map_err(s)
    };
    if let Some(us) = time_graph(&st, a.iters, None, &mut call)? {
        return Ok(us);
    }
    let (us, _) = time_calls(&st, a.iters, None, &mut |_| call())?;
    Ok(us)
}

/// One rank's timing of `combine`: (microseconds per layer, of which in NCCL).
fn rank_time(
    ep: &ExpertParallel,
    a: &BenchMoeArgs,
    combine: EpCombine,
    t_all: usize,
    x_h: &[bf16],
    logits_h: &[f32],
    barrier: &Barrier,
) -> Result<(f64, f64), String> {
    let (e_n, k, h, i) = (a.experts, a.topk, a.hidden, a.inter);
    let (r, w) = (ep.comm().rank(), ep.comm().world_size());
    let l = e_n / w;
    let st = ep.ops().stream().clone();
    let w13 = device_random(&st, l * 2 * i * h, 11 + 10 * r as u64, 1.0 / (h as f32).sqrt())?;
    let w2 = device_random(&st, l * h * i, 12 + 10 * r as u64, 1.0 / (i as f32).sqrt())?;
    let (t0, t) = match combine {
        EpCombine::Dispatch => (r * t_all / w, t_all / w),
        _ => (0, t_all),
    };
    let x = st.clone_htod(&x_h[t0 * h..(t0 + t) * h]).map_err(s)?;
    let logits = st.clone_htod(&logits_h[t0 * e_n..(t0 + t) * e_n]).map_err(s)?;
    let rows = if combine == EpCombine::ReduceScatter { t / w } else { t };
    let mut y = st.alloc_zeros::<bf16>(rows * h).map_err(s)?;
    let bytes = ep_moe_workspace_bytes(combine, t, k, l, w, h, i, DType::BF16).map_err(s)?;
    let mut ws = st.alloc_zeros::<u8>(bytes).map_err(s)?;
    let (xv, w13v, w2v) = (
        MatrixRef::new(&x, t, h),
        MatrixRef::new(&w13, 2 * i, h).batched(l, (2 * i * h) as i64),
        MatrixRef::new(&w2, h, i).batched(l, (h * i) as i64),
    );
    let routing = MoeRouting::Logits {
        logits: MatrixRef::new(&logits, t, e_n),
        topk: k,
        renormalize: a.renormalize,
    };
    let mut wsv = MoeWorkspace::new(&mut ws);
    let mut yv = MatrixMut::new(&mut y, rows, h);
    let graphed = time_graph(&st, a.iters, Some(barrier), &mut || {
        ep.fused_moe(&xv, &w13v, &w2v, &routing, combine, &mut wsv, &mut yv)
            .map_err(s)
    })?;
    // NCCL's share: eager layers with CUDA events around the collectives (the eager
    // layer's own time is host-bound: the op generates its kernels' sources per call).
    let (eager, nccl) = time_calls(&st, a.iters, Some(barrier), &mut |marks| {
        let mut err = Ok(());
        let mut mark = |m: EpMark, on: &Arc<CudaStream>| {
            let r = match m {
                EpMark::CollectiveBegin => event(on).and_then(|b| {
                    b.record(on).map_err(s)?;
                    marks.push((b, event(on)?));
                    Ok(())
                }),
                EpMark::CollectiveEnd => marks.last().map_or(Ok(()), |(_, e)| e.record(on).map_err(s)),
            };
            if err.is_ok() {
                err = r;
            }
        };
        ep.fused_moe_marked(&xv, &w13v, &w2v, &routing, combine, &mut wsv, &mut yv, &mut mark)
            .map_err(s)?;
        err
    })?;
    Ok((graphed.unwrap_or(eager), nccl))
}

/// The combine named on the command line.
fn parse_combine(name: &str) -> Result<EpCombine, String> {
    match name {
        "all-reduce" => Ok(EpCombine::AllReduce),
        "all-reduce-overlapped" => Ok(EpCombine::AllReduceOverlapped),
        "reduce-scatter" => Ok(EpCombine::ReduceScatter),
        "dispatch" => Ok(EpCombine::Dispatch),
        other => Err(format!(
            "--combine {other}: all-reduce, all-reduce-overlapped, reduce-scatter or dispatch"
        )),
    }
}

/// Runs the benchmark on `args.ranks` GPUs; returns the table.
pub fn run(args: &BenchMoeArgs) -> Result<String, String> {
    let w = args.ranks;
    if !args.experts.is_multiple_of(w) {
        return Err(format!("{} experts do not split over {w} ranks", args.experts));
    }
    let gpus: Vec<Gpu> = (0..w)
        .map(|o| Gpu::open(o).map_err(|e| format!("GPU {o} of the {w} ranks: {e}")))
        .collect::<Result<_, _>>()?;
    let lib = Nccl::get().map_err(s)?;
    let streams: Vec<_> = gpus.iter().map(|g| g.stream().clone()).collect();
    for st in &streams {
        // SAFETY: each rank's buffers are used on its stream only.
        unsafe { st.context().disable_event_tracking() };
    }
    let comms = Communicator::from_streams(&streams).map_err(s)?;
    let eps: Vec<ExpertParallel> = gpus
        .iter()
        .zip(comms)
        .map(|(g, c)| ExpertParallel::new(&Ops::new(g.clone()), c))
        .collect::<Result<_, _>>()
        .map_err(s)?;
    let (e_n, k, h, i) = (args.experts, args.topk, args.hidden, args.inter);
    let combines: Vec<EpCombine> = args
        .combine
        .iter()
        .map(|c| parse_combine(c))
        .collect::<Result<_, _>>()?;
    let mut out = format!(
        "expert-parallel MoE E={e_n} top-{k} H={h} I={i} bf16 over {w} x {} (NCCL {} from {}), CUDA graphs\n{:>6} {:>10}",
        gpus[0].name(),
        lib.version().map_err(s)?,
        lib.path,
        "T",
        "1gpu_us"
    );
    for c in &combines {
        let n = format!("{c:?}").to_lowercase();
        out.push_str(&format!(
            " {:>14} {:>14} {:>9}",
            format!("{n}_us"),
            format!("{n}_nccl_us"),
            "speedup"
        ));
    }
    out.push('\n');
    for (n, &t) in args.tokens.iter().enumerate() {
        if !t.is_multiple_of(w) {
            return Err(format!("T = {t} does not split over {w} ranks"));
        }
        let x_h = random_bf16(t * h, 100 + n as u64, 1.0);
        let logits_h: Vec<f32> = random_bf16(t * e_n, 200 + n as u64, 4.0)
            .iter()
            .map(|v| v.to_f32())
            .collect();
        let single = one_gpu(&gpus[0], args, t, &x_h, &logits_h)?;
        out.push_str(&format!("{t:>6} {single:>10.1}"));
        for &c in &combines {
            let barrier = Barrier::new(w);
            let per_rank: Vec<(f64, f64)> = std::thread::scope(|sc| {
                let hs: Vec<_> = eps
                    .iter()
                    .map(|ep| {
                        let (x_h, logits_h, barrier) = (&x_h, &logits_h, &barrier);
                        sc.spawn(move || rank_time(ep, args, c, t, x_h, logits_h, barrier))
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("a rank thread panicked".into())))
                    .collect::<Result<Vec<_>, String>>()
            })?;
            let us = per_rank.iter().map(|p| p.0).fold(0.0, f64::max);
            let nccl = per_rank.iter().map(|p| p.1).fold(0.0, f64::max);
            out.push_str(&format!(" {us:>14.1} {nccl:>14.1} {:>9.2}", single / us));
        }
        out.push('\n');
    }
    out.push_str("speedup = 1gpu_us / <combine>_us; <combine>_nccl_us: time between CUDA events around the collectives (slowest rank; overlapped: on the side stream, partly hidden behind the experts)\n");
    Ok(out)
}
