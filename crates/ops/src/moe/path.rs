//! Which grouped GEMM family runs the fused MoE layer: the SM80 `mma.sync` kernels
//! (any sm_80+ GPU, every tile size, the only one for decode) or the SM90 TMA + `wgmma`
//! kernels (sm_90, 128-row tiles, prefill).

/// The grouped GEMM family of [`crate::Ops::fused_moe`] ([`super::MoeOptions::path`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MoePath {
    /// The rule ([`sm90_chosen`]): SM90 on an sm_90 GPU once the experts average at least
    /// [`SM90_MIN_ROWS_PER_EXPERT`] routed rows, the SM80 family otherwise.
    #[default]
    Auto,
    /// Always the SM80 (`mma.sync`) family.
    Sm80,
    /// Always the SM90 (TMA + `wgmma`) family: an error on other GPUs.
    Sm90,
}

/// Routed rows per local expert (on average) from which the SM90 family runs. Its row tile
/// is 128 rows; below that the SM80 family's 16- and 64-row tiles waste less work on
/// padding. Measured on an H200 (BENCHMARKS.md, "Fused MoE on the SM90 grouped GEMM"): SM90
/// faster at 64 rows per expert (Mixtral T = 256: 794 against 1102 us) and above, slower at
/// 48 (DeepSeek-V2-Lite T = 512: 408 against 382 us) and below.
pub const SM90_MIN_ROWS_PER_EXPERT: usize = 64;

/// Whether the layer of `entries` routed rows over `local` experts runs the SM90 family on
/// a GPU of compute capability `cc` with `path`, before the workspace is considered.
///
/// ```
/// use rcute_ops::moe::{sm90_chosen, MoePath};
/// // Mixtral, 8 experts: T = 1024 tokens top-2 average 256 rows per expert.
/// assert!(sm90_chosen(MoePath::Auto, (9, 0), 2048, 8));
/// assert!(!sm90_chosen(MoePath::Auto, (9, 0), 128, 8)); // T = 64: decode-like
/// assert!(!sm90_chosen(MoePath::Auto, (8, 0), 2048, 8)); // an A100
/// assert!(sm90_chosen(MoePath::Sm90, (9, 0), 2, 8));
/// ```
pub fn sm90_chosen(path: MoePath, cc: (u32, u32), entries: usize, local: usize) -> bool {
    match path {
        MoePath::Sm80 => false,
        MoePath::Sm90 => true,
        MoePath::Auto => cc == (9, 0) && entries >= SM90_MIN_ROWS_PER_EXPERT * local.max(1),
    }
}
