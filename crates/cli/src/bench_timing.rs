//! What the GPU benchmarks share: GPU detection, shape parsing, host-side timing, and (from
//! `rcute_ops::tuning::timing`, which the tuner shares) CUDA-event timing of calls.

use cudarc::driver::CudaStream;
use std::sync::Arc;

pub use rcute_ops::tuning::timing::{median_us, CALLS_PER_SAMPLE};

/// The GPU to run on; `Err` says that `what` (e.g. "the benchmark") needs one.
pub fn detect_gpu(what: &str) -> Result<rcute_kernel::Gpu, String> {
    match rcute_kernel::Gpu::detect() {
        Ok(Some(g)) => Ok(g),
        Ok(None) => Err(format!("no CUDA GPU found: {what} needs one")),
        Err(e) => Err(format!("no CUDA GPU usable: {e}")),
    }
}

/// Parse `MxNxK` with positive extents.
pub fn parse_shape(s: &str) -> Result<(usize, usize, usize), String> {
    let v: Vec<usize> = s
        .split(['x', 'X'])
        .map(|x| x.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad shape {s:?}: {e}"))?;
    match v.as_slice() {
        [m, n, k] if *m > 0 && *n > 0 && *k > 0 => Ok((*m, *n, *k)),
        _ => Err(format!("bad shape {s:?}: expected MxNxK with positive extents")),
    }
}

/// Median host microseconds to enqueue one call of `f` (5 samples of `CALLS_PER_SAMPLE`
/// calls, each followed by a synchronize that is not timed).
pub fn host_us(stream: &Arc<CudaStream>, f: &mut dyn FnMut() -> Result<(), String>) -> Result<f64, String> {
    let mut v = Vec::new();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        for _ in 0..CALLS_PER_SAMPLE {
            f()?;
        }
        v.push(t.elapsed().as_secs_f64() * 1e6 / CALLS_PER_SAMPLE as f64);
        stream.synchronize().map_err(|x| x.to_string())?;
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::parse_shape;

    #[test]
    fn shapes_parse() {
        assert_eq!(parse_shape("16x4096x4096").unwrap(), (16, 4096, 4096));
        assert_eq!(parse_shape("2X3X4").unwrap(), (2, 3, 4));
        assert!(parse_shape("0x1x1").is_err());
        assert!(parse_shape("1x2").is_err());
        assert!(parse_shape("ax2x3").is_err());
    }
}
