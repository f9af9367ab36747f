//! The candidates a tuner times for one problem: the generator's configuration space,
//! pruned to what can run well on the problem's shape.
//!
//! For a bf16 `gemm` on `m x n x k` (batch `l`) and a GPU with `sms` multiprocessors:
//! Ampere-class tiles from 16 to 128 rows (64 to 256 columns) with split-K 1 to 16
//! (serial and parallel) on every GPU; on sm_90 also the Hopper kernel's tiles (32 to 256
//! columns), schedules, clusters 1x1 / 2x1 and split-K, and for decode shapes (M <= 128)
//! the 64-row tiles again with the deepest pipeline that fits (clusters 1x1 / 1x2 / 2x1,
//! split-K 1 and 2); above decode shapes the 128-row ping-pong and 128x256 cooperative
//! tiles also with swizzled tile walks (bands of 2, 4, 8 tiles), and from 1024 rows the wide
//! cooperative tiles `256x160x64` (1x2 clusters) and `128x320x64`. Split-K stays where each split
//! keeps at least 4 k-tiles and the grid stays within four waves; tiles whose rows exceed
//! M several times over are left out. Every candidate generates (the generator accepts
//! it); the rules' own choice is first.
//!
//! ```
//! use rcute_ops::tuning::space::gemm_candidates;
//! let c = gemm_candidates(16, 4096, 4096, 1, (9, 0), 132);
//! assert!(c.len() >= 8 && c.len() <= rcute_ops::tuning::space::MAX_CANDIDATES);
//! assert!(c.iter().any(|s| s.to_string().starts_with("sm90:")));
//! assert!(gemm_candidates(16, 4096, 4096, 1, (8, 0), 108).iter().all(|s| !s.to_string().starts_with("sm90:")));
//! ```

use rcute_kernel::gemm_sm80::{GemmElement as Element, GemmSm80Config, Major, ScaleKind, SplitKMode};
use rcute_kernel::gemm_sm90::{GemmSm90Config, Sm90Schedule};

pub use super::space_awq_moe::{awq_candidates, moe_candidates};
use super::spec::{ConfigSpec, Sm80Spec, Sm90Spec};
use crate::select::{select, select_scaled_mm, select_scaled_sm90, select_sm90};
use rcute_kernel::gemm_sm80::Sm80Target as ScaledMmTarget;

/// The most candidates one problem gets.
pub const MAX_CANDIDATES: usize = 192;

/// Waves of CTAs split-K may fill at most.
const SPLIT_WAVES: usize = 4;

/// Split counts worth timing for `tiles` output tiles and `k_tiles` k-tiles on `sms` SMs:
/// each split keeps at least 4 k-tiles and the grid stays within [`SPLIT_WAVES`] waves.
fn splits(tiles: usize, k_tiles: usize, sms: u32) -> Vec<u32> {
    [1u32, 2, 3, 4, 6, 8, 16]
        .into_iter()
        .filter(|&s| s == 1 || (k_tiles / s as usize >= 4 && tiles * s as usize <= SPLIT_WAVES * sms as usize))
        .collect()
}

/// Ampere-class candidates.
fn sm80(m: usize, n: usize, k: usize, l: usize, sms: u32) -> Vec<ConfigSpec> {
    let geometries: [([i64; 3], [i64; 2], u32); 7] = [
        ([16, 64, 128], [1, 4], 0),
        ([32, 64, 128], [1, 4], 0),
        ([32, 64, 64], [2, 2], 0),
        ([64, 64, 64], [2, 2], 0),
        ([64, 128, 32], [2, 2], 0),
        ([128, 128, 32], [2, 2], 3),
        ([128, 256, 32], [2, 4], 3),
    ];
    sm80_specs(&geometries, m, n, k, l, sms)
}

/// Ampere-class specs of `(tile, warps, raster swizzle)` geometries: tiles of at most M's
/// rows (rounded up to a power of two, at least 32), every useful split-K in both modes.
fn sm80_specs(
    geometries: &[([i64; 3], [i64; 2], u32)],
    m: usize,
    n: usize,
    k: usize,
    l: usize,
    sms: u32,
) -> Vec<ConfigSpec> {
    let mut out = Vec::new();
    for &(tile, warps, raster_swizzle) in geometries {
        if tile[0] as usize > m.next_power_of_two().max(32) {
            continue;
        }
        let tiles = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize) * l;
        for split_k in splits(tiles, k.div_ceil(tile[2] as usize), sms) {
            let modes: &[Option<SplitKMode>] = if split_k == 1 {
                &[None]
            } else {
                &[Some(SplitKMode::Serial), Some(SplitKMode::Parallel)]
            };
            // Unsplit narrow decode tiles also with a 3-stage pipeline: one more CTA fits
            // per SM, which beat the automatic depth at 32x14336x4096 on the H200 (session
            // 10: 32x64x128 at 3 stages 31.9-32.1 us, at the automatic 4 32.4-32.8).
            let shallow = split_k == 1 && tile[0] <= 32 && m <= 128;
            let depths: &[Option<usize>] = if shallow { &[None, Some(3)] } else { &[None] };
            for &split_k_mode in modes {
                for &stages in depths {
                    out.push(ConfigSpec::Sm80(Sm80Spec {
                        tile,
                        warps,
                        stages,
                        split_k,
                        split_k_mode,
                        raster_swizzle,
                        turing: false,
                    }));
                }
            }
        }
    }
    out
}

/// Hopper candidates.
fn sm90(m: usize, n: usize, k: usize, l: usize, sms: u32) -> Vec<ConfigSpec> {
    use Sm90Schedule::WarpSpecialized;
    use Sm90Schedule::{Cooperative, PingPong};
    let geometries: [([i64; 3], Sm90Schedule, Option<u32>); 9] = [
        ([64, 32, 64], PingPong, None),
        ([64, 64, 64], PingPong, None),
        ([64, 64, 64], WarpSpecialized, None),
        ([64, 96, 64], PingPong, None),
        ([64, 128, 64], PingPong, None),
        ([64, 256, 64], PingPong, None),
        ([128, 128, 64], PingPong, None),
        ([128, 128, 64], Cooperative, None),
        ([128, 256, 64], Cooperative, None),
    ];
    let mut out = sm90_specs(&geometries, m, n, k, l, sms);
    out.extend(sm90_swizzled(
        &[([128, 128, 64], PingPong, None), ([128, 256, 64], Cooperative, None)],
        m,
    ));
    out.extend(sm90_wide(m, n));
    out
}

/// The cooperative tiles past one `wgmma` atom's accumulators a warpgroup usually holds
/// (`GemmSm90Config`'s wide tiles, up to 160 accumulators a thread): `256x160x64` on 1x2
/// clusters and `128x320x64`, for problems of at least 1024 rows and two column tiles. They
/// are cuBLAS's geometries at 4096x14336x4096 on an H200, where `256x160x64,coop,c1x2`
/// runs at 1.000-1.002x cuBLAS against the 128x256 tile's 0.983-0.985x (BENCHMARKS.md,
/// session 29, helper bf16h and lead); nothing else in the space reaches them.
fn sm90_wide(m: usize, n: usize) -> Vec<ConfigSpec> {
    if m < 1024 || n <= 320 {
        return Vec::new();
    }
    [([256, 160, 64], [1, 2]), ([128, 320, 64], [1, 1])]
        .into_iter()
        .map(|(tile, cluster)| {
            ConfigSpec::Sm90(Sm90Spec {
                cluster,
                ..Sm90Spec::new(tile, Sm90Schedule::Cooperative)
            })
        })
        .collect()
}

/// The tile-walk swizzles ([`Sm90Spec::swizzle_log2`]) that [`sm90_swizzled`] adds.
const SWIZZLES_LOG2: [u32; 3] = [1, 2, 3];

/// Hopper specs of `(tile, schedule, MMA pipelining)` geometries with a swizzled tile walk
/// (bands of 2, 4 and 8 tiles), for problems above decode shapes (`m > 128`), cluster 1x1,
/// no split-K. The swizzle is a launch argument (the same kernel as the unswizzled
/// candidate), but it decides which operand tiles a wave shares in the L2: unswizzled, the
/// 8-bit `128x128x128` ping-pong kernel lost 7-37 % to the rule, with bands of 4 tiles it won
/// 4-19 % (BENCHMARKS.md, "Session 18 (helper q8pp)"), which no tuner run could find
/// without these candidates.
fn sm90_swizzled(geometries: &[([i64; 3], Sm90Schedule, Option<u32>)], m: usize) -> Vec<ConfigSpec> {
    if m <= 128 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for &(tile, schedule, mma_pipe) in geometries {
        for swizzle_log2 in SWIZZLES_LOG2 {
            out.push(ConfigSpec::Sm90(Sm90Spec {
                swizzle_log2,
                mma_pipe,
                ..Sm90Spec::new(tile, schedule)
            }));
        }
    }
    out
}

/// Hopper specs of `(tile, schedule, MMA pipelining)` geometries: tiles of at most M's rows
/// (rounded up to a power of two, at least 64), clusters 1x1 and (with two tiles along M)
/// 2x1, every useful split-K (at most 2 with a 2x1 cluster).
fn sm90_specs(
    geometries: &[([i64; 3], Sm90Schedule, Option<u32>)],
    m: usize,
    n: usize,
    k: usize,
    l: usize,
    sms: u32,
) -> Vec<ConfigSpec> {
    let mut out = Vec::new();
    for &(tile, schedule, mma_pipe) in geometries {
        if tile[0] as usize > m.next_power_of_two().max(64) {
            continue;
        }
        let tiles = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize) * l;
        for cluster in [[1, 1], [2, 1]] {
            if cluster[0] > 1 && m <= tile[0] as usize {
                continue; // a 2x1 cluster needs two tiles along M
            }
            for split_k in splits(tiles, k.div_ceil(tile[2] as usize), sms) {
                if cluster[0] > 1 && split_k > 2 {
                    continue; // fine splits are for grids too small to pair CTAs
                }
                out.push(ConfigSpec::Sm90(Sm90Spec {
                    split_k,
                    cluster,
                    mma_pipe,
                    ..Sm90Spec::new(tile, schedule)
                }));
            }
        }
    }
    out
}

/// Hopper decode candidates (M <= 128; bf16, or 8-bit with K tiles of 128) with the deepest
/// pipeline that fits: the narrow 64-row tiles stream B from HBM, and the automatic stage
/// count (at most
/// `SM90_MAX_AUTO_STAGES`) leaves too few bytes in flight per SM (BENCHMARKS.md, session 9,
/// helper decode: cuBLAS's kernels at these sizes run 13 to 16 stages); clusters 1x1, 1x2
/// (A multicast along N) and, with two tiles along M, 2x1; split-K 1 and 2.
fn sm90_deep(m: usize, n: usize, k: usize, l: usize, sms: u32, family: Family) -> Vec<ConfigSpec> {
    use Sm90Schedule::{PingPong, WarpSpecialized};
    if m > 128 {
        return Vec::new();
    }
    // One 128-byte swizzle row of K per stage: 64 bf16 or 128 8-bit elements.
    let bk = family.k_tile();
    // Each 64-row tile with both one-tile-per-CTA schedules: with as many CTAs as tiles the
    // warp-specialized kernel (one consumer warpgroup, 256 threads) can beat the ping-pong
    // one (64x32 at 64x4096x4096 on the H200: 12.0 against 13.1 us).
    let geometries: [([i64; 3], Sm90Schedule); 8] = [
        ([64, 32, bk], PingPong),
        ([64, 32, bk], WarpSpecialized),
        ([64, 64, bk], PingPong),
        ([64, 64, bk], WarpSpecialized),
        ([64, 96, bk], PingPong),
        ([64, 96, bk], WarpSpecialized),
        ([64, 128, bk], PingPong),
        ([64, 128, bk], WarpSpecialized),
    ];
    let mut out = Vec::new();
    for (tile, schedule) in geometries {
        let tiles = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize) * l;
        for cluster in [[1, 1], [1, 2], [2, 1]] {
            if cluster[0] > 1 && m <= tile[0] as usize {
                continue; // a 2x1 cluster needs two tiles along M
            }
            let base = Sm90Spec {
                cluster,
                ..Sm90Spec::new(tile, schedule)
            };
            let Some(stages) = deepest_stages(&base, family) else {
                continue;
            };
            for split_k in splits(tiles, k.div_ceil(tile[2] as usize), sms) {
                if split_k <= 2 {
                    out.push(ConfigSpec::Sm90(Sm90Spec {
                        stages: Some(stages),
                        split_k,
                        ..base.clone()
                    }));
                }
            }
        }
    }
    out
}

/// The op a candidate list is for: its rules, its geometries, its deep pipelines' K tile
/// and its kernel configurations (the 8-bit scaled-mm epilogue stages its scale and bias
/// vectors in shared memory too).
#[derive(Clone, Copy)]
enum Family {
    /// bf16 `gemm`.
    Bf16,
    /// INT8 / FP8 `scaled_mm` with per-token and per-channel scales and a bias.
    Scaled8,
}

impl Family {
    fn k_tile(self) -> i64 {
        match self {
            Family::Bf16 => 64,
            Family::Scaled8 => 128,
        }
    }

    /// `spec`'s Hopper kernel in this family.
    fn config(self, spec: &Sm90Spec) -> Option<GemmSm90Config> {
        let base = spec.apply(GemmSm90Config::bf16(spec.tile, spec.schedule));
        match self {
            Family::Bf16 => Some(base),
            Family::Scaled8 => crate::scaled_mm::sm90_scaled_config(
                base,
                Element::S8,
                Element::BF16,
                ScaleKind::PerRow,
                ScaleKind::PerCol,
                true,
            )
            .ok(),
        }
    }

    /// `spec`'s Ampere-class kernel in this family.
    fn sm80_config(self, spec: &Sm80Spec) -> Option<GemmSm80Config> {
        let base = match self {
            Family::Bf16 => GemmSm80Config::bf16(Major::K, Major::K, spec.tile, spec.warps),
            Family::Scaled8 => GemmSm80Config::scaled_mm(
                Element::BF16,
                ScaleKind::PerRow,
                ScaleKind::PerCol,
                true,
                spec.tile,
                spec.warps,
            )
            .ok()?,
        };
        Some(spec.apply(base))
    }

    /// Whether the generator accepts `spec` for this family's benchmark kernel (K-major
    /// operands; bf16 out, for the 8-bit one with per-token and per-channel scales and a
    /// bias).
    fn generates(self, spec: &ConfigSpec) -> bool {
        match spec {
            ConfigSpec::Sm80(s) => self
                .sm80_config(s)
                .is_some_and(|c| rcute_kernel::gemm_sm80::generate(&c).is_ok()),
            ConfigSpec::Sm90(s) => self
                .config(s)
                .is_some_and(|c| rcute_kernel::gemm_sm90::generate(&c).is_ok()),
            ConfigSpec::Awq(_) | ConfigSpec::Moe(_) | ConfigSpec::MoeSm90(_) => false,
        }
    }
}

/// The most stages of `spec`'s kernel in `family` that fit the shared memory, when that is
/// more than the automatic choice's cap; `None` otherwise.
fn deepest_stages(spec: &Sm90Spec, family: Family) -> Option<usize> {
    use rcute_kernel::gemm_sm90::{plan, SM90_MAX_AUTO_STAGES};
    let fits = |s: usize| {
        family.config(spec).is_some_and(|mut cfg| {
            cfg.stages = Some(s);
            plan(&cfg).is_ok()
        })
    };
    (SM90_MAX_AUTO_STAGES + 1..=24).rev().find(|&s| fits(s))
}

/// The rules' choice as a spec.
fn rules_choice(m: usize, n: usize, k: usize, l: usize, cc: (u32, u32), sms: u32) -> ConfigSpec {
    if cc == (9, 0) {
        if let Some((cfg, split_k)) = select_sm90(m, n, k, l, sms) {
            return ConfigSpec::Sm90(Sm90Spec::of(&cfg, split_k));
        }
    }
    let s = select(m, n, k, l, Major::K, Major::K, sms);
    ConfigSpec::Sm80(Sm80Spec {
        tile: s.config.tile,
        warps: s.config.warps,
        stages: s.config.stages,
        split_k: s.split_k,
        split_k_mode: Some(s.split_k_mode),
        raster_swizzle: s.config.raster_swizzle,
        turing: false,
    })
}

/// The candidates for a bf16 `gemm` (K-major A and B) on a GPU of compute capability `cc`
/// with `sms` SMs, the rules' choice first, at most [`MAX_CANDIDATES`], each accepted by
/// the generator.
pub fn gemm_candidates(m: usize, n: usize, k: usize, l: usize, cc: (u32, u32), sms: u32) -> Vec<ConfigSpec> {
    candidates(Family::Bf16, (m, n, k, l), cc, sms)
}

/// The candidates of `family`'s op (see [`gemm_candidates`], [`scaled_mm_candidates`]): its
/// rules' choice, on sm_90 its Hopper and deep-pipeline candidates, its Ampere-class ones;
/// the first [`MAX_CANDIDATES`] distinct ones that the generator accepts, in that order.
fn candidates(family: Family, (m, n, k, l): (usize, usize, usize, usize), cc: (u32, u32), sms: u32) -> Vec<ConfigSpec> {
    type Specs = fn(usize, usize, usize, usize, u32) -> Vec<ConfigSpec>;
    let (rules, hopper, ampere): (ConfigSpec, Specs, Specs) = match family {
        Family::Bf16 => (rules_choice(m, n, k, l, cc, sms), sm90, sm80),
        Family::Scaled8 => (scaled_rules_choice(m, n, k, l, cc, sms), sm90_scaled, sm80_scaled),
    };
    let mut all = vec![rules];
    if cc == (9, 0) {
        all.extend(hopper(m, n, k, l, sms));
        all.extend(sm90_deep(m, n, k, l, sms, family));
    }
    all.extend(ampere(m, n, k, l, sms));
    let mut out: Vec<ConfigSpec> = Vec::new();
    for c in all {
        if out.len() < MAX_CANDIDATES && !out.contains(&c) && family.generates(&c) {
            out.push(c);
        }
    }
    out
}

/// Ampere-class INT8 scaled-mm candidates (K tiles of 64 to 256 bytes of s8).
fn sm80_scaled(m: usize, n: usize, k: usize, l: usize, sms: u32) -> Vec<ConfigSpec> {
    let geometries: [([i64; 3], [i64; 2], u32); 6] = [
        ([16, 64, 256], [1, 4], 0),
        ([32, 64, 128], [1, 4], 0),
        ([64, 64, 128], [2, 2], 0),
        ([64, 128, 64], [2, 2], 0),
        ([128, 128, 64], [2, 2], 3),
        ([128, 256, 64], [2, 4], 3),
    ];
    sm80_specs(&geometries, m, n, k, l, sms)
}

/// Hopper INT8 / FP8 scaled-mm candidates (K tiles of 128 bytes).
fn sm90_scaled(m: usize, n: usize, k: usize, l: usize, sms: u32) -> Vec<ConfigSpec> {
    use Sm90Schedule::{Cooperative, PingPong};
    let geometries: [([i64; 3], Sm90Schedule, Option<u32>); 5] = [
        ([64, 128, 128], PingPong, None),
        ([64, 256, 128], PingPong, None),
        ([128, 128, 128], PingPong, None),
        ([128, 128, 128], Cooperative, None),
        ([128, 256, 128], Cooperative, Some(0)),
    ];
    let mut out = sm90_specs(&geometries, m, n, k, l, sms);
    // `w1` spelled out for ping-pong as the rules' choice spells it (the same kernel).
    out.extend(sm90_swizzled(
        &[
            ([128, 128, 128], PingPong, Some(1)),
            ([128, 256, 128], Cooperative, Some(0)),
        ],
        m,
    ));
    out
}

/// The scaled-mm rules' choice as a spec.
fn scaled_rules_choice(m: usize, n: usize, k: usize, l: usize, cc: (u32, u32), sms: u32) -> ConfigSpec {
    if cc == (9, 0) {
        let (cfg, split_k) = select_scaled_sm90(m, n, k, l, sms);
        // The scaled kernels' rules also fix the MMA pipelining (w0 for 128x256x128).
        return ConfigSpec::Sm90(Sm90Spec {
            mma_pipe: Some(cfg.mma_pipe),
            ..Sm90Spec::of(&cfg, split_k)
        });
    }
    let s = select_scaled_mm(ScaledMmTarget::Ampere, m, n, k, l, sms);
    ConfigSpec::Sm80(Sm80Spec {
        tile: s.tile,
        warps: s.warps,
        stages: s.stages,
        split_k: s.split_k,
        split_k_mode: Some(s.split_k_mode),
        raster_swizzle: s.raster_swizzle,
        turing: false,
    })
}

/// The candidates for the INT8 `scaled_mm` (s8 operands, K-major) on a GPU of compute
/// capability `cc` with `sms` SMs, the rules' choice first, at most [`MAX_CANDIDATES`],
/// each accepted by the generator. (Specs carry no element types: the same candidates
/// serve FP8 e4m3 on sm_90, where only the `sm90:` ones run.)
///
/// ```
/// use rcute_ops::tuning::space::scaled_mm_candidates;
/// let c = scaled_mm_candidates(16, 4096, 4096, 1, (9, 0), 132);
/// assert!(c[0].to_string().starts_with("sm90:64x128x128"));
/// assert!(c.iter().any(|s| !s.to_string().starts_with("sm90:")));
/// // Above decode shapes, where the operands stay in the L2: the swizzled ping-pong kernel.
/// let big = scaled_mm_candidates(4096, 4096, 4096, 1, (9, 0), 132);
/// assert_eq!(big[0].to_string(), "sm90:128x128x128,pp,r2,w1");
/// ```
pub fn scaled_mm_candidates(m: usize, n: usize, k: usize, l: usize, cc: (u32, u32), sms: u32) -> Vec<ConfigSpec> {
    candidates(Family::Scaled8, (m, n, k, l), cc, sms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_choice_comes_first_and_candidates_are_distinct() {
        for &(m, n, k) in &[(1, 4096, 4096), (64, 14336, 4096), (4096, 4096, 4096), (300, 520, 1040)] {
            for (cc, sms) in [((9, 0), 132), ((8, 0), 108)] {
                let c = gemm_candidates(m, n, k, 1, cc, sms);
                assert_eq!(c[0], rules_choice(m, n, k, 1, cc, sms), "{m}x{n}x{k}");
                assert!(c.len() > 1 && c.len() <= MAX_CANDIDATES);
                for (i, x) in c.iter().enumerate() {
                    assert!(!c[i + 1..].contains(x), "{x} twice");
                }
            }
        }
    }

    #[test]
    fn swizzled_tile_walks_are_candidates_above_decode_shapes() {
        let names = |c: Vec<ConfigSpec>| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for &(m, n, k) in &[
            (256, 4096, 4096),
            (4096, 4096, 4096),
            (8192, 8192, 8192),
            (4096, 14336, 4096),
        ] {
            let bf16 = names(gemm_candidates(m, n, k, 1, (9, 0), 132));
            let s8 = names(scaled_mm_candidates(m, n, k, 1, (9, 0), 132));
            for r in 1..=3 {
                let (pp, coop) = (format!("sm90:128x128x64,pp,r{r}"), format!("sm90:128x256x64,coop,r{r}"));
                assert!(bf16.contains(&pp) && bf16.contains(&coop), "{m}x{n}x{k} r{r}: {bf16:?}");
                let pp8 = format!("sm90:128x128x128,pp,r{r},w1");
                let coop8 = format!("sm90:128x256x128,coop,r{r},w0");
                assert!(s8.contains(&pp8) && s8.contains(&coop8), "{m}x{n}x{k} r{r}: {s8:?}");
            }
            // Nothing crowded out: the SM80-class candidates still close both spaces.
            assert!(bf16.len() < MAX_CANDIDATES && s8.len() < MAX_CANDIDATES, "{m}x{n}x{k}");
        }
        for m in [16, 64, 128] {
            let c = gemm_candidates(m, 4096, 4096, 1, (9, 0), 132);
            let s = scaled_mm_candidates(m, 4096, 4096, 1, (9, 0), 132);
            assert!(
                c.iter()
                    .chain(&s)
                    .all(|x| !matches!(x, ConfigSpec::Sm90(s) if s.swizzle_log2 > 0)),
                "{m}: decode shapes keep the plain walk"
            );
        }
    }

    #[test]
    fn wide_tiles_are_candidates_of_large_problems_only() {
        let names = |c: Vec<ConfigSpec>| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for &(m, n, k) in &[(4096, 14336, 4096), (8192, 8192, 8192), (1024, 4096, 4096)] {
            let bf16 = names(gemm_candidates(m, n, k, 1, (9, 0), 132));
            for wide in ["sm90:256x160x64,coop,c1x2", "sm90:128x320x64,coop"] {
                assert!(bf16.contains(&wide.to_string()), "{m}x{n}x{k}: {bf16:?}");
            }
        }
        for &(m, n) in &[(512, 14336), (128, 14336), (4096, 256)] {
            let bf16 = names(gemm_candidates(m, n, 4096, 1, (9, 0), 132));
            assert!(
                !bf16.iter().any(|s| s.contains("x160x") || s.contains("x320x")),
                "{m}x{n}: {bf16:?}"
            );
        }
        // The 8-bit space has no wide tiles (the plain GEMM's option).
        let s8 = names(scaled_mm_candidates(4096, 14336, 4096, 1, (9, 0), 132));
        assert!(!s8.iter().any(|s| s.contains("x160x") || s.contains("x320x")), "{s8:?}");
    }

    #[test]
    fn splits_keep_four_k_tiles_and_two_waves() {
        for c in gemm_candidates(16, 4096, 4096, 1, (9, 0), 132) {
            let (tile, split, rows) = match &c {
                ConfigSpec::Sm80(s) => (s.tile, s.split_k, s.tile[0]),
                ConfigSpec::Sm90(s) => (s.tile, s.split_k, s.tile[0]),
                other => panic!("{other} is not a gemm candidate"),
            };
            if split > 1 {
                assert!(4096 / tile[2] as u32 / split >= 4, "{c}");
                let tiles = 16usize.div_ceil(rows as usize) * 4096usize.div_ceil(tile[1] as usize);
                assert!(tiles * split as usize <= 4 * 132, "{c}");
            }
        }
        // Large problems do not split.
        let big = gemm_candidates(8192, 8192, 8192, 1, (9, 0), 132);
        assert!(big
            .iter()
            .skip(1)
            .all(|c| !c.to_string().contains(",k") && !c.to_string().contains("serial")));
    }

    #[test]
    fn decode_shapes_get_narrow_tiles_and_finer_splits() {
        for m in [32, 64, 128] {
            let s = scaled_mm_candidates(m, 4096, 4096, 1, (9, 0), 132);
            assert!(s.len() < MAX_CANDIDATES, "{m}: scaled-mm space cut off at {}", s.len());
            let c = gemm_candidates(m, 4096, 4096, 1, (9, 0), 132);
            let names: Vec<String> = c.iter().map(|s| s.to_string()).collect();
            eprintln!("{m}x4096x4096: {} candidates: {}", c.len(), names.join(" "));
            assert!(c.len() < MAX_CANDIDATES, "{m}: the space is not cut off");
            assert!(
                names.iter().any(|s| s.starts_with("sm90:64x64x64")),
                "{m}: 64-wide Hopper tiles"
            );
            assert!(
                names.iter().any(|s| s.starts_with("sm90:") && s.contains(",k3")),
                "{m}: split-K 3"
            );
            assert!(
                names.iter().any(|s| !s.starts_with("sm90:") && s.contains("serial")),
                "{m}: SM80 split-K"
            );
            let deep = |c: &ConfigSpec| matches!(c, ConfigSpec::Sm90(s) if s.stages.is_some_and(|st| st > 8));
            assert!(
                c.iter().any(|s| deep(s)
                    && s.to_string().starts_with("sm90:64x32x64,pp")
                    && s.to_string().contains("c1x2")),
                "{m}: deep pipelines with A multicast"
            );
            assert!(
                c.iter().filter(|s| deep(s)).all(|c| Family::Bf16.generates(c)),
                "{m}: deep candidates generate"
            );
        }
        for m in [32, 64, 128] {
            let s = scaled_mm_candidates(m, 4096, 4096, 1, (9, 0), 132);
            let deep: Vec<&ConfigSpec> = s
                .iter()
                .filter(|c| matches!(c, ConfigSpec::Sm90(s) if s.stages.is_some_and(|st| st > 8)))
                .collect();
            assert!(
                deep.iter().any(|c| c.to_string().starts_with("sm90:64x64x128,ws")),
                "{m}: deep 8-bit pipelines"
            );
            assert!(
                deep.iter().all(|c| Family::Scaled8.generates(c)),
                "{m}: deep 8-bit candidates generate"
            );
        }
        let c32: Vec<String> = gemm_candidates(32, 14336, 4096, 1, (9, 0), 132)
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(
            c32.iter().any(|s| s == "32x64x128,1x4,3,1"),
            "3-stage narrow tiles: {c32:?}"
        );
        assert!(c32.iter().any(|s| s == "32x64x128,1x4,auto,1"), "{c32:?}");
        for m in [256, 4096] {
            let c = gemm_candidates(m, 4096, 4096, 1, (9, 0), 132);
            assert!(
                c.iter()
                    .all(|s| !matches!(s, ConfigSpec::Sm90(s) if s.stages.is_some())),
                "{m}: no deep decode variants"
            );
        }
    }

    #[test]
    fn scaled_mm_candidates_start_with_the_rules_and_fit_the_gpu() {
        for &(m, n, k) in &[(16, 4096, 4096), (128, 14336, 4096), (4096, 4096, 4096)] {
            let hopper = scaled_mm_candidates(m, n, k, 1, (9, 0), 132);
            assert_eq!(hopper[0], scaled_rules_choice(m, n, k, 1, (9, 0), 132), "{m}x{n}x{k}");
            assert!(hopper.iter().any(|c| matches!(c, ConfigSpec::Sm80(_))));
            let ampere = scaled_mm_candidates(m, n, k, 1, (8, 0), 108);
            assert_eq!(ampere[0], scaled_rules_choice(m, n, k, 1, (8, 0), 108));
            assert!(
                ampere.iter().all(|c| matches!(c, ConfigSpec::Sm80(_))),
                "no sm90 kernel on sm_80"
            );
            for c in [&hopper, &ampere] {
                assert!(c.len() > 1 && c.len() <= MAX_CANDIDATES);
                for (i, x) in c.iter().enumerate() {
                    assert!(!c[i + 1..].contains(x), "{x} twice");
                    let k_tile = match x {
                        ConfigSpec::Sm80(s) => s.tile[2],
                        ConfigSpec::Sm90(s) => s.tile[2],
                        other => panic!("{other} is not a scaled-mm candidate"),
                    };
                    assert!(k_tile >= 64, "{x}: s8 K tiles are at least 64 bytes");
                }
            }
        }
    }
}
