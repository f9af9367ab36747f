//! How long and how carefully the tuner ([`super::tuner`]) may work on one problem.

/// How long and how carefully to tune one problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuneBudget {
    /// Seconds for checking and timing (with `include_compile`, for everything).
    pub seconds: f64,
    /// Whether compilation counts against `seconds` (candidates not compiled by then are
    /// skipped).
    pub include_compile: bool,
    /// Timed samples per candidate (the median is kept).
    pub iters: usize,
    /// Replay CUDA graphs of the calls (device time only); only where nothing else uses
    /// the stream while it captures.
    pub graphs: bool,
}
