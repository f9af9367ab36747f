//! [`Arch`]: the GPU architectures rcute emits code for, and the rules between them.
//!
//! One type serves every layer: an atom [`Snippet`](crate::Snippet) records the
//! architecture it needs, and the kernel crate compiles for one (`rcute_kernel::Arch` is
//! this type).
//!
//! ```
//! use rcute_atom::Arch;
//!
//! let a: Arch = "sm_90a".parse().unwrap();
//! assert_eq!(a, Arch::Sm90a);
//! assert_eq!(a.to_string(), "sm_90a");
//! assert_eq!((a.sm(), a.is_arch_specific()), (90, true));
//! // Portable code runs on newer targets; arch-specific code only on its own target.
//! assert!(Arch::SM80.supported_on(Arch::Sm90a));
//! assert!(!Arch::SM90A.supported_on(Arch::Sm90));
//! ```

use std::fmt;
use std::str::FromStr;

/// A GPU architecture: what a snippet needs, or what a kernel is compiled for.
///
/// Ordered oldest first; `Sm90 < Sm90a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Arch {
    /// Turing (`sm_75`): `mma.sync.m8n8k16` on 8-bit integers, `ldmatrix`; no `cp.async`.
    Sm75,
    /// Ampere A100 (`sm_80`): `mma.sync`, `cp.async`, `ldmatrix`.
    Sm80,
    /// Ampere consumer (`sm_86`).
    Sm86,
    /// Ada (`sm_89`): FP8 `mma.sync`.
    Sm89,
    /// Hopper, portable subset (`sm_90`): TMA, mbarrier transactions, clusters,
    /// `stmatrix`, `elect.sync`.
    Sm90,
    /// Hopper with the arch-specific features `wgmma` and `setmaxnreg` (`sm_90a`).
    Sm90a,
}

impl Arch {
    /// [`Arch::Sm75`].
    pub const SM75: Arch = Arch::Sm75;
    /// [`Arch::Sm80`].
    pub const SM80: Arch = Arch::Sm80;
    /// [`Arch::Sm89`].
    pub const SM89: Arch = Arch::Sm89;
    /// [`Arch::Sm90`].
    pub const SM90: Arch = Arch::Sm90;
    /// [`Arch::Sm90a`].
    pub const SM90A: Arch = Arch::Sm90a;

    /// Every supported architecture, oldest first.
    pub const ALL: [Arch; 6] = [Arch::Sm75, Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90, Arch::Sm90a];

    /// The architecture for a device of compute capability `major.minor`.
    ///
    /// With `arch_specific`, the `a` variant is chosen where one exists (`9.0` →
    /// [`Arch::Sm90a`]); such code runs only on exactly that architecture, which is what
    /// you want when compiling for the device at hand. Returns `None` for capabilities
    /// there is no variant for.
    pub fn from_compute_capability(major: u32, minor: u32, arch_specific: bool) -> Option<Arch> {
        Some(match (major, minor) {
            (7, 5) => Arch::Sm75,
            (8, 0) => Arch::Sm80,
            (8, 6) => Arch::Sm86,
            (8, 9) => Arch::Sm89,
            (9, 0) if arch_specific => Arch::Sm90a,
            (9, 0) => Arch::Sm90,
            _ => return None,
        })
    }

    /// The `(major, minor)` compute capability this architecture targets.
    pub fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm75 => (7, 5),
            Arch::Sm80 => (8, 0),
            Arch::Sm86 => (8, 6),
            Arch::Sm89 => (8, 9),
            Arch::Sm90 | Arch::Sm90a => (9, 0),
        }
    }

    /// The compute capability times ten (75, 80, 86, 89, 90); `sm_90a` gives 90.
    pub fn sm(self) -> u32 {
        let (major, minor) = self.compute_capability();
        major * 10 + minor
    }

    /// Whether this is an arch-specific (`a`) target: its features exist on exactly that
    /// architecture.
    pub fn is_arch_specific(self) -> bool {
        matches!(self, Arch::Sm90a)
    }

    /// The name NVRTC and ptxas use, e.g. `"sm_90a"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Sm75 => "sm_75",
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    /// The NVRTC / nvcc option selecting this architecture, e.g. `--gpu-architecture=sm_90a`.
    pub fn nvrtc_option(self) -> String {
        format!("--gpu-architecture={}", self.as_str())
    }

    /// True when code needing `self` compiles for `target`: an arch-specific `self` needs
    /// exactly `target`, a portable one any `target` of the same or a higher capability.
    pub fn supported_on(self, target: Arch) -> bool {
        if self.is_arch_specific() {
            target == self
        } else {
            target.sm() >= self.sm()
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing an [`Arch`] from a string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown GPU architecture {0:?} (expected one of sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a)")]
pub struct UnknownArch(pub String);

impl FromStr for Arch {
    type Err = UnknownArch;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownArch(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_rules() {
        assert!(Arch::SM80.supported_on(Arch::SM90A));
        assert!(Arch::SM80.supported_on(Arch::Sm86));
        assert!(!Arch::SM90A.supported_on(Arch::SM90));
        assert!(Arch::SM90.supported_on(Arch::SM90A));
        assert!(!Arch::SM89.supported_on(Arch::SM80));
        assert!(!Arch::SM89.supported_on(Arch::Sm86));
        assert_eq!(Arch::SM90A.nvrtc_option(), "--gpu-architecture=sm_90a");
    }

    #[test]
    fn names_round_trip_and_order() {
        for (i, a) in Arch::ALL.into_iter().enumerate() {
            assert_eq!(a.to_string().parse::<Arch>(), Ok(a));
            let (major, minor) = a.compute_capability();
            assert_eq!(
                Arch::from_compute_capability(major, minor, a.is_arch_specific()),
                Some(a)
            );
            assert!(Arch::ALL[..i].iter().all(|b| *b < a));
        }
        assert_eq!("sm_100".parse::<Arch>(), Err(UnknownArch("sm_100".into())));
    }
}
