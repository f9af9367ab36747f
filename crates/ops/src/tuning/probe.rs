//! The problems a tuner measures, on buffers of their own: [`GemmProbe`], [`ScaledMmProbe`]
//! (INT8 and FP8), [`AwqProbe`] and [`MoeProbe`], each a [`Tunable`]
//! with random inputs of one shape, the weight rotated over copies, its candidates and a
//! check of each candidate's output. `RCUTE_TUNING=on-miss` tunes them inside the ops
//! ([`crate::Ops`]); `rcute tune` wraps the same probes and adds its peers (cuBLAS,
//! cuBLASLt) and a progress bar.
//!
//! Every check is the same sampled comparison ([`check_sampled`]): the largest absolute
//! error over sampled outputs, relative to the largest reference magnitude, at most
//! [`TOLERANCE`]; a NaN output fails.
//!
//! ```
//! use rcute_ops::tuning::probe::{check_sampled, max_rel_err, sample};
//! let want = |i: usize, j: usize| (i * 10 + j) as f64;
//! let (rows, cols) = (sample(8, 4), sample(8, 8));
//! assert_eq!(max_rel_err(&rows, &cols, want, want), 0.0);
//! assert!(check_sampled(8, 8, |i, j| want(i, j) * 1.05, want, "float64").is_err());
//! assert!(check_sampled(8, 8, |_, _| f64::NAN, want, "float64").is_err());
//! ```

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

pub use super::probe_awq::AwqProbe;
pub use super::probe_gemm::GemmProbe;
pub use super::probe_moe::MoeProbe;
pub use super::probe_scaled_mm::{Operand8, ScaledMmProbe};
use super::tuner::{tune, Quiet, Tunable};
use super::{ConfigSpec, Entry};
use crate::tensor::Element;
use crate::Ops;

/// The largest error [`check_sampled`] accepts, relative to the largest reference value.
pub const TOLERANCE: f64 = 2e-2;

/// A 16-bit floating type the probes fill with random values.
pub trait Half: Element + DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + Send + Sync + 'static {
    /// The nearest value of `x`.
    fn from_f32(x: f32) -> Self;
    /// The exact value.
    fn to_f64(self) -> f64;
    /// The kernels' name of the type.
    const ELEMENT: rcute_atom::Element;
}

impl Half for half::bf16 {
    const ELEMENT: rcute_atom::Element = rcute_atom::Element::BF16;
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
    fn to_f64(self) -> f64 {
        half::bf16::to_f64(self)
    }
}

impl Half for half::f16 {
    const ELEMENT: rcute_atom::Element = rcute_atom::Element::F16;
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
}

/// Values per independently seeded chunk of [`random`].
const CHUNK: usize = 1 << 20;

/// `len` values `map(u)`, `u` uniform in [-1, 1), from `seed` (a 64-bit LCG per chunk of
/// 2^20 values, the chunks filled on all cores: the same values on any machine).
///
/// ```
/// use rcute_ops::tuning::probe::random;
/// let v = random(5, 1, |u| u);
/// assert!(v.iter().all(|u| (-1.0..1.0).contains(u)));
/// assert_eq!(v, random(5, 1, |u| u));
/// assert_ne!(v, random(5, 2, |u| u));
/// ```
pub fn random<T: Copy + Default + Send>(len: usize, seed: u64, map: impl Fn(f32) -> T + Sync) -> Vec<T> {
    let mut out = vec![T::default(); len];
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(len.div_ceil(CHUNK).max(1));
    let chunks: Vec<(usize, &mut [T])> = out.chunks_mut(CHUNK).enumerate().collect();
    let per = chunks.len().div_ceil(threads).max(1);
    let mut groups: Vec<Vec<(usize, &mut [T])>> = Vec::new();
    let mut it = chunks.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(per).collect());
    }
    std::thread::scope(|s| {
        for group in groups {
            let map = &map;
            s.spawn(move || {
                for (c, chunk) in group {
                    let mut x =
                        (seed ^ (c as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for v in chunk.iter_mut() {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        *v = map(((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0);
                    }
                }
            });
        }
    });
    out
}

/// Up to `count` indices spread over `0..len`, the last one included.
///
/// ```
/// use rcute_ops::tuning::probe::sample;
/// assert_eq!(sample(10, 4), vec![0, 2, 5, 7, 9]);
/// assert_eq!(sample(3, 16), vec![0, 1, 2]);
/// ```
pub fn sample(len: usize, count: usize) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    let count = count.min(len).max(1);
    let mut v: Vec<usize> = (0..count).map(|i| i * len / count).collect();
    v.push(len - 1);
    v.dedup();
    v
}

/// The largest `|got - want|` over `rows x cols`, divided by the largest `|want|` there
/// (infinite where `got` is NaN).
pub fn max_rel_err(
    rows: &[usize],
    cols: &[usize],
    got: impl Fn(usize, usize) -> f64,
    want: impl Fn(usize, usize) -> f64,
) -> f64 {
    let (mut err, mut max_ref) = (0f64, 1e-30f64);
    for &i in rows {
        for &j in cols {
            let (g, r) = (got(i, j), want(i, j));
            err = if g.is_nan() {
                f64::INFINITY
            } else {
                err.max((g - r).abs())
            };
            max_ref = max_ref.max(r.abs());
        }
    }
    err / max_ref
}

impl Sampled {
    /// A probe's check of one candidate that writes `out` (row-major, `cols` columns):
    /// `out` zeroed, the candidate `run` once on `stream`, then [`Sampled::check`] of
    /// what it wrote against this reference (`against` names it).
    pub(crate) fn check_output<T: Half>(
        &self,
        stream: &Arc<CudaStream>,
        out: &RefCell<CudaSlice<T>>,
        cols: usize,
        against: &str,
        run: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        stream.memset_zeros(&mut *out.borrow_mut()).map_err(driver)?;
        run()?;
        let got = stream.clone_dtoh(&*out.borrow()).map_err(driver)?;
        self.check(|i, j| got[i * cols + j].to_f64(), against)
    }
}

/// [`Tunable::shape`], [`Tunable::key`] and [`Tunable::candidates`] of a probe that keeps
/// them in its fields `shape`, `key` and `candidates` (every probe here), for its
/// `impl Tunable`.
macro_rules! probe_fields {
    () => {
        fn shape(&self) -> (usize, usize, usize) {
            self.shape
        }

        fn key(&self) -> $crate::tuning::ProblemKey {
            self.key.clone()
        }

        fn candidates(&self) -> &[$crate::tuning::ConfigSpec] {
            &self.candidates
        }
    };
}
pub(crate) use probe_fields;

/// The reference of a probe's check: the wanted values of an `m x n` output at 16 sampled
/// rows and 64 sampled columns, computed once (the check runs for every candidate).
pub struct Sampled {
    rows: Vec<usize>,
    cols: Vec<usize>,
    want: Vec<f64>,
}

impl Sampled {
    /// `want(i, j)` at the sampled rows `i` and columns `j` of an `m x n` output.
    pub fn new(m: usize, n: usize, want: impl Fn(usize, usize) -> f64) -> Sampled {
        let (rows, cols) = (sample(m, 16), sample(n, 64));
        let want = rows
            .iter()
            .flat_map(|&i| cols.iter().map(move |&j| (i, j)))
            .map(|(i, j)| want(i, j))
            .collect();
        Sampled { rows, cols, want }
    }

    /// [`max_rel_err`] of `got` against the reference at most [`TOLERANCE`]; `Err` says by
    /// how much it missed, against what.
    pub fn check(&self, got: impl Fn(usize, usize) -> f64, against: &str) -> Result<(), String> {
        let at = |i: usize, j: usize| {
            let r = self.rows.binary_search(&i).unwrap_or(0);
            let c = self.cols.binary_search(&j).unwrap_or(0);
            self.want[r * self.cols.len() + c]
        };
        let err = max_rel_err(&self.rows, &self.cols, got, at);
        if err.is_nan() || err > TOLERANCE {
            return Err(format!("max relative error {err:.2e} against {against}"));
        }
        Ok(())
    }
}

/// The check of every probe: [`max_rel_err`] over 16 sampled rows and 64 sampled columns
/// of an `m x n` output at most [`TOLERANCE`] ([`Sampled`] once and its check); `Err` says
/// by how much it missed, against what.
pub fn check_sampled(
    m: usize,
    n: usize,
    got: impl Fn(usize, usize) -> f64,
    want: impl Fn(usize, usize) -> f64,
    against: &str,
) -> Result<(), String> {
    Sampled::new(m, n, want).check(got, against)
}

/// `count` device copies of `host` (the rotated weight).
pub(crate) fn copies<T: DeviceRepr + Unpin>(
    stream: &Arc<CudaStream>,
    host: &[T],
    count: usize,
) -> Result<Vec<CudaSlice<T>>, String> {
    (0..count)
        .map(|_| stream.clone_htod(host).map_err(|e| e.to_string()))
        .collect()
}

/// The string of a driver error.
pub(crate) fn driver(e: cudarc::driver::DriverError) -> String {
    e.to_string()
}

impl Ops {
    /// The tuning tables' choice under `RCUTE_TUNING` for the problem whose table key on
    /// this GPU's rcute arch `key` gives (`None`: not a tuned problem); on a miss with
    /// `on-miss`, [`Ops::tune_on_miss`] of the probe `build` makes (buffers of the
    /// problem's shape, never the caller's). `None` (the rules) when tuning is off or the
    /// GPU has no rcute arch.
    pub(crate) fn tuned_spec(
        &self,
        key: impl FnOnce(&str) -> Option<super::ProblemKey>,
        build: impl FnOnce() -> Result<Box<dyn Tunable>, String>,
    ) -> Option<ConfigSpec> {
        let tuning = self.tuning();
        if !tuning.active() {
            return None;
        }
        let key = key(self.gpu().arch()?.as_str())?;
        tuning.choose(&key, || self.tune_on_miss(build))
    }

    /// The on-miss tuning of one problem under [`super::OpsTuning::choose`]: not while the
    /// stream captures a graph (`Err`: the next miss tries again); a probe that cannot be
    /// built (e.g. out of memory) is a miss the rules serve from then on (`Ok(None)`);
    /// else [`tune`] within the handle's budget, the winner as a table entry.
    pub(crate) fn tune_on_miss(
        &self,
        build: impl FnOnce() -> Result<Box<dyn Tunable>, String>,
    ) -> Result<Option<Entry>, String> {
        if crate::stream::is_capturing(self.stream()).map_err(|e| e.to_string())? {
            return Err("the stream captures a graph".into());
        }
        let t = match build() {
            Ok(t) => t,
            Err(why) => {
                eprintln!("rcute: on-miss tuning skipped: {why}");
                return Ok(None);
            }
        };
        let outcome = tune(self, t.as_ref(), self.tuning().budget(), &Quiet)?;
        // Wait for the probe's work before its buffers are freed and the caller's op runs.
        self.stream().synchronize().map_err(|e| e.to_string())?;
        Ok(outcome.entry(None))
    }
}
