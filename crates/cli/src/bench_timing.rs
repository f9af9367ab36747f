//! What the GPU benchmarks share: GPU detection, shape parsing, host-side timing, and (from
//! `rcute_ops::tuning::timing`, which the tuner shares) CUDA-event timing of calls.

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};
use std::cell::Cell;
use std::sync::Arc;

pub use rcute_ops::tuning::timing::CALLS_PER_SAMPLE;
use std::time::Duration;

/// The benchmarks' CUDA-event timing ([`rcute_ops::tuning::timing::median_us_settled`]):
/// medians of samples taken round-robin, after [`settle_time`] of untimed round-robin runs
/// so that the clock of a power-capped GPU has settled before the first sample.
pub fn median_us(
    stream: &Arc<CudaStream>,
    iters: usize,
    graphs: bool,
    fs: &mut [&mut dyn FnMut() -> Result<(), String>],
) -> Result<(Vec<f64>, bool), String> {
    rcute_ops::tuning::timing::median_us_settled(stream, iters, graphs, settle_time(), fs)
}

/// How long a benchmark row runs its functions before timing them:
/// `RCUTE_BENCH_SETTLE_MS` milliseconds, 500 by default (the H100's clock under its 700 W
/// cap took a few hundred milliseconds of load to settle; 0 turns settling off).
pub fn settle_time() -> Duration {
    settle_ms(std::env::var("RCUTE_BENCH_SETTLE_MS").ok().as_deref())
}

/// [`settle_time`] of the variable's value: a whole number of milliseconds, else the
/// default.
fn settle_ms(var: Option<&str>) -> Duration {
    Duration::from_millis(var.and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_SETTLE_MS))
}

/// Default settling time of a benchmark row, in milliseconds.
const DEFAULT_SETTLE_MS: u64 = 500;

/// Bytes that a benchmark's rotated weight copies exceed by default: three times the H200's
/// 50 MB L2, so that each call reads its weights from HBM, as in a model whose layers take
/// turns, and not from the L2 the previous call of the same layer filled.
pub const ROTATE_BYTES: usize = 150_000_000;

/// Copies of a weight operand that a benchmark cycles through call by call, for rcute and
/// its peer alike. The count divides [`CALLS_PER_SAMPLE`] (1, 2, 5 or 10 copies), so a CUDA
/// graph of that many calls ends on the copy it started from and no replay reads the copy
/// its predecessor just read. With `min_bytes = 0` there is one copy (L2-warm timing).
pub struct Rotation<T> {
    copies: Vec<CudaSlice<T>>,
}

impl<T: DeviceRepr + Clone> Rotation<T> {
    /// Upload `host` as many times as `min_bytes` needs (at most [`CALLS_PER_SAMPLE`]).
    pub fn upload(stream: &Arc<CudaStream>, host: &[T], min_bytes: usize) -> Result<Self, String> {
        let count = rotation_copies(std::mem::size_of_val(host), min_bytes);
        let copies = (0..count)
            .map(|_| stream.clone_htod(host).map_err(|e| format!("weight copy: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Rotation { copies })
    }

    /// The copy after the one `cursor` names last; advances `cursor` (each caller keeps
    /// its own, so rcute and the peer both cycle through every copy).
    pub fn next(&self, cursor: &Cell<usize>) -> &CudaSlice<T> {
        let i = cursor.get();
        cursor.set((i + 1) % self.copies.len());
        &self.copies[i]
    }

    /// The first copy (what a correctness check reads).
    pub fn first(&self) -> &CudaSlice<T> {
        &self.copies[0]
    }

    /// How many copies there are.
    pub fn count(&self) -> usize {
        self.copies.len()
    }
}

/// How many copies of an operand of `bytes` bytes a benchmark rotates over so that they
/// total at least `min_bytes`: the fewest of 1, 2, 5 or [`CALLS_PER_SAMPLE`] that do (at
/// most [`CALLS_PER_SAMPLE`]). A count that divides the calls of a graph sample makes each
/// replay end on the copy before the one it starts from, so no call reads the copy that
/// the call before it just read (3 copies would end a replay of 10 calls on the copy the
/// next replay starts with); a graph reads no more than its own calls' copies, so more
/// than [`CALLS_PER_SAMPLE`] would never be read.
pub fn rotation_copies(bytes: usize, min_bytes: usize) -> usize {
    let want = min_bytes.div_ceil(bytes.max(1)).max(1);
    [1, 2, 5, CALLS_PER_SAMPLE]
        .into_iter()
        .find(|&c| c >= want)
        .unwrap_or(CALLS_PER_SAMPLE)
}

/// The GPU to run on; `Err` says that `what` (e.g. "the benchmark") needs one.
pub fn detect_gpu(what: &str) -> Result<rcute_kernel::Gpu, String> {
    match rcute_kernel::Gpu::detect() {
        Ok(Some(g)) => Ok(g),
        Ok(None) => Err(format!("no CUDA GPU found: {what} needs one")),
        Err(e) => Err(format!("no CUDA GPU usable: {e}")),
    }
}

/// [`detect_gpu`] and its stream, with `cudarc`'s per-slice event tracking off (a wait and a
/// record per use of a buffer cost host time, and CUDA-graph capture must see no events of
/// uncaptured work).
///
/// # Safety
///
/// The caller uses every buffer on the GPU (its own and its `Ops` handle's) on the returned
/// stream only, so that no use needs synchronizing with another stream.
pub(crate) unsafe fn one_stream_gpu(what: &str) -> Result<(rcute_kernel::Gpu, Arc<CudaStream>), String> {
    let gpu = detect_gpu(what)?;
    let stream = gpu.stream().clone();
    // SAFETY: the caller's contract: one stream.
    unsafe { stream.context().disable_event_tracking() };
    Ok((gpu, stream))
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

/// Every `--shape` value parsed with [`parse_shape`]; the first bad one is the error.
pub fn parse_shapes(shapes: &[String]) -> Result<Vec<(usize, usize, usize)>, String> {
    shapes.iter().map(|s| parse_shape(s)).collect()
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

/// [`max_abs_diff`] relative to the largest `|want|` (at least 1e-30): the benches'
/// `max_rel_err` of an output (f16, bf16 or f64 values) against its peer's.
pub fn max_rel_diff<T: Copy + Into<f64>>(got: &[T], want: &[T]) -> f64 {
    fn f64s<T: Copy + Into<f64>>(v: &[T]) -> impl Iterator<Item = f64> + '_ {
        v.iter().map(|&x| x.into())
    }
    let scale = f64s(want).fold(1e-30, |m: f64, w| m.max(w.abs()));
    max_abs_diff(f64s(got), f64s(want)) / scale
}

/// The largest `|got - want|`, NaN when any pair differs by NaN (a NaN output, or an
/// infinity against an infinity): `f64::max` alone would skip NaN and report 0 for an
/// output that is NaN everywhere.
pub fn max_abs_diff(got: impl IntoIterator<Item = f64>, want: impl IntoIterator<Item = f64>) -> f64 {
    got.into_iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, |m, d| {
        if m.is_nan() || d.is_nan() {
            f64::NAN
        } else {
            m.max(d)
        }
    })
}

/// Median microseconds of a device-to-device copy of `bytes` and its bandwidth in GB/s
/// (read + write).
pub fn copy_bandwidth(stream: &Arc<CudaStream>, bytes: usize, iters: usize) -> Result<(f64, f64), String> {
    let e = |x: cudarc::driver::DriverError| x.to_string();
    let src: CudaSlice<u8> = stream.alloc_zeros(bytes).map_err(e)?;
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(bytes).map_err(e)?;
    let mut f = || stream.memcpy_dtod(&src, &mut dst).map_err(|x| x.to_string());
    let (t, _) = median_us(stream, iters, true, &mut [&mut f])?;
    Ok((t[0], 2.0 * bytes as f64 / (t[0] * 1e-6) / 1e9))
}

#[cfg(test)]
mod tests {
    use super::{
        max_abs_diff, max_rel_diff, parse_shape, parse_shapes, rotation_copies, settle_ms, CALLS_PER_SAMPLE,
        DEFAULT_SETTLE_MS,
    };
    use std::time::Duration;

    #[test]
    fn max_rel_diff_scales_by_the_largest_reference() {
        assert_eq!(max_rel_diff(&[1.0, 2.0, -3.0], &[1.5, 2.0, -4.0]), 0.25);
        assert!(max_rel_diff(&[f64::NAN], &[1.0]).is_nan());
        assert_eq!(max_rel_diff(&[0.0], &[0.0]), 0.0);
    }

    #[test]
    fn max_abs_diff_keeps_nan() {
        assert_eq!(max_abs_diff([1.0, 2.0, -3.0], [1.5, 2.0, 1.0]), 4.0);
        assert!(max_abs_diff([f64::NAN, 2.0], [1.0, 2.0]).is_nan());
        assert!(max_abs_diff([1.0, f64::NAN], [1.0, 2.0]).is_nan());
        assert!(max_abs_diff([f64::INFINITY], [f64::INFINITY]).is_nan());
        assert_eq!(max_abs_diff(Vec::<f64>::new(), Vec::new()), 0.0);
    }

    /// The copy count divides the calls of a graph sample: an AWQ weight of 28672 x 4096
    /// at G = 128 (61.0 MB) takes 5 copies, not 3, for 150 MB; one of 14336 x 4096 (30.5 MB) 5; a dense
    /// one of 117 MB 2; small operands stop at 10; no rotation asked, one copy.
    #[test]
    fn rotation_copies_divide_a_graph_sample() {
        let mb = 1_000_000;
        assert_eq!(rotation_copies(61_014_016, 150 * mb), 5);
        assert_eq!(rotation_copies(30_507_008, 150 * mb), 5);
        assert_eq!(rotation_copies(117_440_512, 150 * mb), 2);
        assert_eq!(rotation_copies(235 * mb, 150 * mb), 1);
        assert_eq!(rotation_copies(8 * mb, 150 * mb), CALLS_PER_SAMPLE);
        assert_eq!(
            rotation_copies(50 * mb, 150 * mb),
            5,
            "exactly three would not divide 10"
        );
        assert_eq!(rotation_copies(75 * mb, 150 * mb), 2);
        assert_eq!(rotation_copies(1 << 20, 0), 1);
        assert_eq!(rotation_copies(0, 10), CALLS_PER_SAMPLE);
        for bytes in [1, 999, 12_345_678, 99 * mb] {
            let c = rotation_copies(bytes, 150 * mb);
            assert_eq!(CALLS_PER_SAMPLE % c, 0, "{bytes} bytes: {c} copies");
        }
    }

    #[test]
    fn settling_time_comes_from_the_variable() {
        assert_eq!(settle_ms(None), Duration::from_millis(DEFAULT_SETTLE_MS));
        assert_eq!(settle_ms(Some("0")), Duration::ZERO);
        assert_eq!(settle_ms(Some(" 1200 ")), Duration::from_millis(1200));
        assert_eq!(settle_ms(Some("soon")), Duration::from_millis(DEFAULT_SETTLE_MS));
    }

    #[test]
    fn shapes_parse() {
        assert_eq!(parse_shape("16x4096x4096").unwrap(), (16, 4096, 4096));
        assert_eq!(parse_shape("2X3X4").unwrap(), (2, 3, 4));
        assert!(parse_shape("0x1x1").is_err());
        assert!(parse_shape("1x2").is_err());
        assert!(parse_shape("ax2x3").is_err());
        let both = ["16x4096x4096".to_string(), "2x3x4".to_string()];
        assert_eq!(parse_shapes(&both).unwrap(), vec![(16, 4096, 4096), (2, 3, 4)]);
        let err = parse_shapes(&["1x1x1".to_string(), "0x1x1".to_string()]).unwrap_err();
        assert!(err.contains("\"0x1x1\""), "{err}");
    }
}
