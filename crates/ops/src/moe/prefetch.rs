//! Which of the MoE layer's weight prefetches before the grid-dependency wait run
//! (`rcute_kernel::grouped_gemm::prefetch`): all by default; `RCUTE_MOE_PREFETCH` turns
//! parts off, so that one binary can time each part against the others in one run.

use crate::env_choice::EnvChoice;
use std::sync::OnceLock;

/// The prefetches of the SM80 layer ([`crate::Ops::fused_moe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoePrefetch {
    /// GEMM1 (experts from the top-k ids), GEMM2 (from the alignment) and GEMM1's tail
    /// trigger (`rcute_kernel::grid_dependency::tail_trigger`).
    All,
    /// GEMM2's prefetch and GEMM1's tail trigger only.
    Gemm2,
    /// Both prefetches, GEMM1 triggering by its grid's size as before.
    NoTail,
    /// None: the layer as before the prefetch.
    Off,
}

impl EnvChoice for MoePrefetch {
    const VAR: &'static str = "RCUTE_MOE_PREFETCH";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("all", MoePrefetch::All),
        ("gemm2", MoePrefetch::Gemm2),
        ("notail", MoePrefetch::NoTail),
        ("off", MoePrefetch::Off),
    ];
}

impl MoePrefetch {
    /// The setting of `RCUTE_MOE_PREFETCH`: `all` (also unset or empty), `gemm2`, `notail`
    /// or `off`; anything else is read as `all`, with a warning printed. Read once per
    /// process.
    ///
    /// ```
    /// use rcute_ops::env_choice::EnvChoice;
    /// use rcute_ops::moe::MoePrefetch;
    /// assert_eq!(MoePrefetch::parse(None), (MoePrefetch::All, None));
    /// assert_eq!(MoePrefetch::parse(Some("off")), (MoePrefetch::Off, None));
    /// assert!(MoePrefetch::parse(Some("gemm1")).1.is_some());
    /// assert!(MoePrefetch::Gemm2.tail() && !MoePrefetch::Gemm2.gemm1());
    /// ```
    pub fn from_env() -> MoePrefetch {
        static SETTING: OnceLock<MoePrefetch> = OnceLock::new();
        *SETTING.get_or_init(MoePrefetch::read_env_warning_printed)
    }

    /// Whether GEMM1 prefetches.
    pub fn gemm1(self) -> bool {
        matches!(self, MoePrefetch::All | MoePrefetch::NoTail)
    }

    /// Whether GEMM2 prefetches.
    pub fn gemm2(self) -> bool {
        self != MoePrefetch::Off
    }

    /// Whether GEMM1 may trigger early for GEMM2's prefetch.
    pub fn tail(self) -> bool {
        matches!(self, MoePrefetch::All | MoePrefetch::Gemm2)
    }
}
