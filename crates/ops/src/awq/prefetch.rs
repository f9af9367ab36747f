//! Whether the streamed AWQ decode kernels on the prepared weight prefetch their first
//! weight steps into L2 before their grid-dependency wait and trigger their dependents
//! early (`rcute_kernel::awq_gemm`, `streamed_prefetch.rs`): both by default;
//! `RCUTE_AWQ_PREFETCH` turns parts off, so that one binary can time each against the
//! others in one run.
//!
//! Measured (H100, `rcute bench awq --config prepared-auto`, graphs of 10 calls, session
//! 16, BENCHMARKS.md, helper awqpf; main / this in the order main, this, this, main):
//! `all` took the prepared op from 16.22 / 16.30 to 15.64 / 15.83 us at 1 x 14336 x 4096,
//! 8.04 / 8.06 to 7.70 / 7.55 at 1 x 4096 x 4096 and 10.33 / 10.53 to 10.01 / 9.96 at 16 x
//! 4096 x 4096; the prefetch without the trigger (`notrigger`) was slower than main (16.79,
//! 8.40, 10.60). The unprepared op's streamed kernel on the checkpoint words (one
//! prefetch per 32-byte row piece: four times the lines' requests) lost with `all` (8.97 /
//! 8.97 -> 9.30 / 9.20 us at 1 x 4096, 11.16 / 11.44 -> 11.96 / 11.84 at 16 x 4096), so
//! its launches ask for neither whatever this says (`rcute_ops::awq::run`).

use crate::env_choice::EnvChoice;
use std::sync::OnceLock;

/// The streamed kernels' work before their wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AwqPrefetch {
    /// The L2 prefetch and the early trigger (the prepared weight's kernels).
    All,
    /// The prefetch only: the dependents launch when the grid exits.
    NoTrigger,
    /// Neither: the kernels as before the prefetch.
    Off,
}

impl EnvChoice for AwqPrefetch {
    const VAR: &'static str = "RCUTE_AWQ_PREFETCH";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("all", AwqPrefetch::All),
        ("notrigger", AwqPrefetch::NoTrigger),
        ("off", AwqPrefetch::Off),
    ];
}

impl AwqPrefetch {
    /// The setting of `RCUTE_AWQ_PREFETCH`: `all` (also unset or empty), `notrigger` or
    /// `off`; anything else is read as `all`, with a warning printed. Read once per process.
    ///
    /// ```
    /// use rcute_ops::awq::prefetch::AwqPrefetch;
    /// use rcute_ops::env_choice::EnvChoice;
    /// assert_eq!(AwqPrefetch::parse(None), (AwqPrefetch::All, None));
    /// assert_eq!(AwqPrefetch::parse(Some(" off ")), (AwqPrefetch::Off, None));
    /// assert!(AwqPrefetch::parse(Some("early")).1.is_some());
    /// assert!(AwqPrefetch::NoTrigger.prefetch() && !AwqPrefetch::NoTrigger.trigger());
    /// assert!(!AwqPrefetch::Off.prefetch() && !AwqPrefetch::Off.trigger());
    /// ```
    pub fn from_env() -> AwqPrefetch {
        static SETTING: OnceLock<AwqPrefetch> = OnceLock::new();
        *SETTING.get_or_init(AwqPrefetch::read_env_warning_printed)
    }

    /// Whether the warps prefetch before their wait.
    pub fn prefetch(self) -> bool {
        self != AwqPrefetch::Off
    }

    /// Whether the kernel triggers its dependents right after its wait.
    pub fn trigger(self) -> bool {
        self == AwqPrefetch::All
    }
}

/// `RCUTE_AWQ_PREFETCH_STEPS=N`: with the prefetch on, each warp prefetches its first `N`
/// k16 steps instead of a ring's worth (`GeneratedAwqGemm::prefetch_steps`), so that one
/// binary can time deeper prefetches against the default in one run (the kernels take the
/// count as an argument: no other source). `None` unset, empty or not a positive integer.
/// Read once per process. Measured (H100, BENCHMARKS.md, Session 24, helper awqfix): 4, 8
/// and 16 steps were slower than the default 2 at 1 x 14336 x 4096 (15.4 / 16.7 / 17.5
/// against 14.9 us) and at 1 and 16 x 4096 x 4096 at 8 and 16 steps.
///
/// ```
/// use rcute_ops::awq::prefetch::parse_steps;
/// assert_eq!(parse_steps(Some(" 8 ")), Some(8));
/// assert_eq!(parse_steps(Some("0")), None);
/// assert_eq!(parse_steps(Some("deep")), None);
/// assert_eq!(parse_steps(None), None);
/// ```
pub fn steps_override() -> Option<i32> {
    static STEPS: OnceLock<Option<i32>> = OnceLock::new();
    *STEPS.get_or_init(|| parse_steps(std::env::var("RCUTE_AWQ_PREFETCH_STEPS").ok().as_deref()))
}

/// [`steps_override`]'s reading of the variable's value.
pub fn parse_steps(v: Option<&str>) -> Option<i32> {
    v?.trim().parse::<i32>().ok().filter(|&n| n > 0)
}
