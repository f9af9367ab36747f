//! CUDA-event timing of calls, shared by the tuner ([`super::tuner`]) and the CLI's
//! benchmarks: medians of samples taken round-robin, so every timed function sees the
//! same clocks, each sample `CALLS_PER_SAMPLE` back-to-back calls (or a CUDA graph of
//! them).

use cudarc::driver::{CudaGraph, CudaStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Calls per timed sample: back-to-back calls keep the GPU busy, so host-side launch
/// overhead does not count as kernel time.
pub const CALLS_PER_SAMPLE: usize = 10;

/// A CUDA graph of `CALLS_PER_SAMPLE` calls of `f`, or `None` (after saying why on stderr)
/// when something in `f` cannot be captured, e.g. a call that synchronizes.
fn capture(stream: &Arc<CudaStream>, f: &mut dyn FnMut() -> Result<(), String>) -> Option<CudaGraph> {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    if let Err(x) = stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED) {
        eprintln!("graph capture not started: {x}");
        return None;
    }
    let r = (0..CALLS_PER_SAMPLE).try_for_each(|_| f());
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    match (r, graph) {
        (Ok(()), Ok(Some(g))) => Some(g),
        (r, g) => {
            eprintln!(
                "graph capture failed (timing eager launches): calls {r:?}, capture {:?}",
                g.err()
            );
            None
        }
    }
}

/// Median per-call microseconds of each of `fs`, sampled round-robin (f0, f1, ..., f0,
/// f1, ...) so all see the same clocks and temperature: a GPU that heats up during a long
/// benchmark would otherwise favour whichever runs first. With `graphs`, each sample
/// replays a CUDA graph of `CALLS_PER_SAMPLE` calls (device time without the host's
/// launch cost) when every function could be captured; the bool says whether graphs were
/// timed (else back-to-back eager calls were, for all alike). No settling: the tuner's
/// form ([`median_us_settled`] with a zero `settle`).
pub fn median_us(
    stream: &Arc<CudaStream>,
    iters: usize,
    graphs: bool,
    fs: &mut [&mut dyn FnMut() -> Result<(), String>],
) -> Result<(Vec<f64>, bool), String> {
    median_us_settled(stream, iters, graphs, Duration::ZERO, fs)
}

/// [`median_us`], after the functions have first run round-robin, untimed, for `settle` of
/// wall time. A GPU under a power cap (the H100's 700 W) lowers its clock over the first
/// few hundred milliseconds of sustained load: samples taken before the clock settles mix
/// two clock levels, which showed as bimodal medians (up to 12 % apart for one kernel in
/// one process at 8192^3; BENCHMARKS.md, "Session 19 (helper q8big)").
pub fn median_us_settled(
    stream: &Arc<CudaStream>,
    iters: usize,
    graphs: bool,
    settle: Duration,
    fs: &mut [&mut dyn FnMut() -> Result<(), String>],
) -> Result<(Vec<f64>, bool), String> {
    let e = |what: &'static str| move |x: cudarc::driver::DriverError| format!("{what}: {x}");
    for _ in 0..5 {
        for f in fs.iter_mut() {
            f()?;
        }
    }
    stream.synchronize().map_err(e("warm-up"))?;
    let mut gs: Vec<Option<CudaGraph>> = Vec::new();
    if graphs {
        for f in fs.iter_mut() {
            gs.push(capture(stream, *f));
        }
    }
    let graphed = graphs && gs.iter().all(Option::is_some);
    // Replay graphs only when every function captured; else every sample calls eagerly.
    let graph = |i: usize| if graphed { gs[i].as_ref() } else { None };
    stream.synchronize().map_err(e("after capture"))?;
    let begin = Instant::now();
    let mut round = || -> Result<(), String> {
        for (i, f) in fs.iter_mut().enumerate() {
            sample(graph(i), *f)?;
        }
        stream.synchronize().map_err(e("settling"))
    };
    settle_rounds(settle, &mut || begin.elapsed(), &mut round)?;
    let ctx = stream.context();
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut times = vec![Vec::with_capacity(iters); fs.len()];
    for _ in 0..iters.max(1) {
        for (i, f) in fs.iter_mut().enumerate() {
            let start = ctx.new_event(timing).map_err(e("event"))?;
            let end = ctx.new_event(timing).map_err(e("event"))?;
            start.record(stream).map_err(e("record"))?;
            sample(graph(i), *f)?;
            end.record(stream).map_err(e("record"))?;
            end.synchronize().map_err(e("event sync"))?;
            times[i].push(start.elapsed_ms(&end).map_err(e("elapsed"))? as f64 * 1e3 / CALLS_PER_SAMPLE as f64);
        }
    }
    let medians = times
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect();
    Ok((medians, graphed))
}

/// One sample's calls of `f`: a replay of its graph, else `CALLS_PER_SAMPLE` eager calls.
fn sample(graph: Option<&CudaGraph>, f: &mut dyn FnMut() -> Result<(), String>) -> Result<(), String> {
    match graph {
        Some(g) => g.launch().map_err(|x| format!("graph launch: {x}")),
        None => (0..CALLS_PER_SAMPLE).try_for_each(|_| f()),
    }
}

/// Runs `round` until `elapsed()` reaches `settle` (none for a zero `settle`); the number
/// of rounds run.
fn settle_rounds(
    settle: Duration,
    elapsed: &mut dyn FnMut() -> Duration,
    round: &mut dyn FnMut() -> Result<(), String>,
) -> Result<usize, String> {
    let mut rounds = 0;
    while elapsed() < settle {
        round()?;
        rounds += 1;
    }
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that advances 1 ms each time it is read.
    fn ticking() -> impl FnMut() -> Duration {
        let mut t = Duration::ZERO;
        move || {
            let now = t;
            t += Duration::from_millis(1);
            now
        }
    }

    #[test]
    fn settling_runs_rounds_until_the_time_is_up() {
        let mut n = 0;
        let rounds = settle_rounds(Duration::from_millis(3), &mut ticking(), &mut || {
            n += 1;
            Ok(())
        });
        assert_eq!(rounds, Ok(3));
        assert_eq!(n, 3);
        assert_eq!(
            settle_rounds(Duration::ZERO, &mut ticking(), &mut || Err("ran".into())),
            Ok(0)
        );
        let failing = settle_rounds(Duration::from_millis(5), &mut ticking(), &mut || Err("gpu".into()));
        assert_eq!(failing, Err("gpu".to_string()));
    }
}
