//! Kernel selection for `gemm` and `scaled_mm`, in one place: tile, warps, stages and
//! split-K per shape.
//!
//! The rules target the shapes measured in `BENCHMARKS.md` on the H200 (132 SMs): large
//! problems get big tiles with a rasterization swizzle; decode shapes (small M) get a
//! narrow-M tile and split K until the grid fills the machine. The autotuner (a later
//! issue) replaces these rules with measured choices and keeps this interface.

use rcute_kernel::gemm_sm80::Sm80Target as ScaledMmTarget;
use rcute_kernel::gemm_sm80::{GemmElement, GemmSm80Config, Major, SplitKMode};
use rcute_kernel::gemm_sm90::{GemmSm90Config, Sm90Schedule};

/// Which generated kernel runs a GEMM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The Ampere-class `mma.sync` kernel (every architecture from sm_80), with split-K.
    Sm80(Selection),
    /// The Hopper TMA + `wgmma` kernel (sm_90 only; K-major A and B, row-major D) and
    /// its split-K factor (1 = none).
    Sm90(GemmSm90Config, u32),
}

/// The split-K factor of an SM90 decode-shape kernel with `tile`: double the splits while
/// the work items still fit in one wave and each split keeps at least 4 k-tiles.
fn decode_split_k(m: usize, n: usize, k: usize, l: usize, tile: [usize; 3], sms: u32) -> u32 {
    let tiles = m.div_ceil(tile[0]) * n.div_ceil(tile[1]) * l;
    let k_tiles = k.div_ceil(tile[2]);
    let mut split = 1u32;
    while tiles * (2 * split as usize) <= sms as usize && k_tiles / (2 * split as usize) >= 4 {
        split *= 2;
    }
    split
}

/// Pick the Hopper kernel of an 8-bit (s8 or e4m3) scaled GEMM.
///
/// Decode shapes (`m <= 128`): 64x128x128 ping-pong, splitting K until about one wave (as
/// [`select_sm90`] does for bf16).
///
/// Larger problems whose operands stay in the L2 (`large_swizzle_log2` 0): 128x128x128
/// ping-pong (one warpgroup's epilogue overlaps the other's mainloop) with the tile walk in
/// bands of 4 (`swizzle_log2` 2). Measured on an H100 against the cooperative 128x256x128
/// kernel this rule had before (BENCHMARKS.md, "Session 18 (helper q8pp)" and the lead's
/// calls Q and F), INT8 in two rounds: 512x4096x4096 23.4 -> 14.6 us, 2048x4096x4096 53.2 ->
/// 44.0, 1024x14336x4096 90-91 -> 79-83, 6144x4096x4096 151 -> 134, 4096x14336x4096 0.91-0.97x
/// -> 1.04-1.06x cuBLASLt's INT8 GEMM; FP8 in three rounds against cuBLASLt's e4m3 GEMM with
/// row-wise scales: 4096x14336x4096 1.05-1.17x -> 1.19-1.23x, 4096^3 1.07x -> 1.21-1.23x,
/// 512..2048 rows 12-38 % less time.
///
/// Larger operands (`large_swizzle_log2` 3, e.g. 8192^3): 128x256x128 cooperative with no
/// wgmma batch kept in flight (`mma_pipe = 0`: each stage is released as soon as both
/// consumer warpgroups finished it, so more TMA loads are in flight) and the tile walk in
/// bands of 8. There the ping-pong kernel took 3-11 % longer (FP8 in two of three runs of
/// call F, INT8 in both rounds of call Q). At 8192^3 the H100 runs these kernels at its 700 W
/// power cap (SM clock 1.1-1.5 GHz under load; a single profiled launch, at 1.70 GHz, took
/// 683 us with the SM 87.6 % busy): timed with ~1 s of load per row, raster along M,
/// cluster 2x1, stream-K and a 128x64 epilogue tile were all within 1.5 % of this kernel and
/// this kernel within 1.3 % of cuBLASLt, INT8 and FP8; in shorter samples the ping-pong
/// kernel (bands of 4 or 8, cluster 2x1 or none) took 9-19 % longer (BENCHMARKS.md,
/// "Session 19 (helper q8big)").
pub fn select_scaled_sm90(m: usize, n: usize, k: usize, l: usize, sms: u32) -> (GemmSm90Config, u32) {
    if m <= 128 {
        let cfg = GemmSm90Config::bf16([64, 128, 128], Sm90Schedule::PingPong);
        return (cfg, decode_split_k(m, n, k, l, [64, 128, 128], sms));
    }
    let swizzle = large_swizzle_log2(m, n, k, 1);
    if swizzle == 0 {
        let mut cfg = GemmSm90Config::bf16([128, 128, 128], Sm90Schedule::PingPong);
        cfg.swizzle_log2 = PINGPONG_8BIT_SWIZZLE_LOG2;
        return (cfg, 1);
    }
    let mut cfg = GemmSm90Config::bf16([128, 256, 128], Sm90Schedule::Cooperative);
    (cfg.mma_pipe, cfg.swizzle_log2) = (0, swizzle);
    (cfg, 1)
}

/// The tile-walk bands of the 8-bit ping-pong kernel of [`select_scaled_sm90`]: `1 << 2`
/// tiles (INT8: bands of 2 lost 2-11 % at 1024x14336x4096 and 2048x4096x4096, at 4096^3 and
/// 6144x4096x4096 they were within 2 %; unswizzled, the ping-pong kernel lost 7-37 %).
const PINGPONG_8BIT_SWIZZLE_LOG2: u32 = 2;

/// The tile-walk swizzle of a large-problem SM90 kernel: bands of `1 << 3` tiles across the
/// raster's minor mode where the smaller operand (`min(m, n)` rows of `k` elements of
/// `elem_bytes`) exceeds [`SWIZZLE_MIN_OPERAND_BYTES`], else none (the scheduler also
/// narrows the band for small grids).
///
/// Without the swizzle a wave of 132 persistent 128x256 tiles spans every tile of the
/// raster's short mode, so that operand is re-read from DRAM each wave once it no longer
/// stays in the L2 (50 MB on H100 / H200): at 8192^3 the INT8 kernel ran with a 65% L2 hit
/// rate and the L2 at 95% of its throughput (ncu). Bands of 8 make a wave 8 x 16.5 tiles,
/// about 40% fewer distinct rows of A and B per k-slice: on an H100, 8192^3 took 9% less
/// time in bf16 and 10-20% less in INT8 (two rounds each), while at 4096^3 and
/// 4096x14336x4096 (operands of at most 32 MiB, which stay in the L2) it changed nothing
/// beyond noise (BENCHMARKS.md, "Session 9 (helper hopper)").
fn large_swizzle_log2(m: usize, n: usize, k: usize, elem_bytes: usize) -> u32 {
    if m.min(n).saturating_mul(k).saturating_mul(elem_bytes) > SWIZZLE_MIN_OPERAND_BYTES {
        3
    } else {
        0
    }
}

/// Operand size above which [`large_swizzle_log2`] swizzles the tile walk: 32 MiB, so that
/// the operand a wave re-reads no longer fits the L2 beside the other operand's stream.
const SWIZZLE_MIN_OPERAND_BYTES: usize = 32 << 20;

/// Pick the Hopper kernel for an `m x n x k` problem, or `None` where the Ampere-class
/// path is the better (or only) choice. The caller checks that the operands qualify
/// (majors, types, alignment). Large problems (`m > 128`) get the 128x256x64 (128x128x64
/// below N = 256) cooperative kernel, the tile walk swizzled where an operand outgrows the
/// L2 (`large_swizzle_log2`), with hybrid stream-K where that pays (`stream_k_pays`); where
/// neither applies and its grid fills at most four waves, the 128x128x64 ping-pong kernel
/// in bands of 4 tiles instead (`pingpong_pays`).
pub fn select_sm90(m: usize, n: usize, k: usize, l: usize, sms: u32) -> Option<(GemmSm90Config, u32)> {
    if m <= 128 {
        // Decode shapes: 64x128 tiles, ping-pong, and split K until about one wave.
        let cfg = GemmSm90Config::bf16([64, 128, 64], Sm90Schedule::PingPong);
        return Some((cfg, decode_split_k(m, n, k, l, [64, 128, 64], sms)));
    }
    let tile = if n >= 256 { [128, 256, 64] } else { [128, 128, 64] };
    let mut cfg = GemmSm90Config::bf16(tile, Sm90Schedule::Cooperative);
    cfg.swizzle_log2 = large_swizzle_log2(m, n, k, 2);
    cfg.stream_k = stream_k_pays(&cfg, m, n, k, l, sms);
    if pingpong_pays(&cfg, m, n, l, sms) {
        let mut pp = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::PingPong);
        pp.swizzle_log2 = PINGPONG_BF16_SWIZZLE_LOG2;
        return Some((pp, 1));
    }
    Some((cfg, 1))
}

/// Whether the bf16 128x128x64 ping-pong kernel (tile walk in bands of
/// [`PINGPONG_BF16_SWIZZLE_LOG2`]) beats the cooperative kernel of `cfg` on an `m x n`
/// problem: where `cfg` walks plainly (the operands stay in the L2), without stream-K, and
/// its grid fills at most [`PINGPONG_MAX_COOP_WAVES`] waves of `sms` CTAs.
///
/// Ping-pong overlaps one warpgroup's epilogue with the other's mainloop, which the
/// cooperative kernel (128 accumulators per thread) cannot, and its half-size tiles fill a
/// last wave more evenly; but its 128x128 tiles move a third more operand bytes per FLOP
/// through the L2, and on the 700 W H100 that power likely (clocks were not logged) lowers
/// the clock of every kernel that runs alongside. Where it wins, the gain is the short
/// grid's last wave: at 1024x14336x4096 the cooperative kernel's SMs finish 18 % apart,
/// ping-pong's 4 % (ncu), and at the 6.8-wave 1024x28672x4096 ping-pong is 12 % slower
/// (BENCHMARKS.md, "Session 19 (helper moepp2)"). Measured on an H100 (BENCHMARKS.md,
/// "Session 19 (helper hbf16)"), main (`coop`) against `pp,r2` in A B B A runs, rcute us
/// (ratio to cuBLAS in the same process):
/// * 1024x14336x4096 (448 cooperative tiles, 3.4 waves): 170-193 -> 159-169 us (0.85-0.91
///   -> 0.97-1.01);
/// * 2048^3 (64 tiles): 24.4-24.7 -> 24.1 us (0.99 -> 1.00); 2048x4096x4096 (128 tiles):
///   91.2-92.3 -> 90.5-90.6 us (0.96 -> 0.98);
/// * 4096^3 (512 tiles, 3.9 waves): 183-201 -> 186-204 us, the same (ratios 0.97-1.02 ->
///   0.94-1.02; the sweep, two rounds: `pp,r2` 0.995 / 1.024, `pp,r3` 1.032 / 1.037, `coop`
///   0.978 / 0.997);
/// * 4096x14336x4096 (896 tiles, 6.8 waves): 676-727 -> 714-726 us, **5 % slower**, while
///   cuBLAS beside it slowed from 665-715 to 731-740 us, so the ratio rose from 0.98 to
///   1.02: a gain of the ratio, not of the time; it keeps the cooperative kernel;
/// * 8192^3 (operands past the L2, `coop,r3`): `pp,r2` 1.033 / 1.034 against 1.017 / 1.015,
///   under 2 %, the rule unchanged.
///
/// Unswizzled, the ping-pong kernel lost 6-37 % at 2048^3, 4096^3, 4096x14336x4096 and
/// 8192^3 (no earlier sweep, nor the tuner, whose space had only plain walks, chose it);
/// `pp,r2,w0` lost about 25 %, `pp,r2,c2x1` 3-18 %.
fn pingpong_pays(cfg: &GemmSm90Config, m: usize, n: usize, l: usize, sms: u32) -> bool {
    let tiles = m.div_ceil(cfg.tile[0] as usize) * n.div_ceil(cfg.tile[1] as usize) * l;
    cfg.swizzle_log2 == 0 && !cfg.stream_k && tiles <= PINGPONG_MAX_COOP_WAVES * sms as usize
}

/// The most waves of cooperative tiles for which [`select_sm90`] runs the ping-pong kernel
/// (4096^3, 3.9 waves, was a tie; 4096x14336x4096, 6.8 waves, 5 % slower).
const PINGPONG_MAX_COOP_WAVES: usize = 4;

/// The tile-walk bands of the bf16 ping-pong kernel of [`select_sm90`]: `1 << 2` tiles.
/// Bands of 2 or 8 were within 2 % of it in at least one of two rounds at every shape
/// where [`pingpong_pays`] picks the kernel (bands of 8 1-4 % better by ratio at 4096^3).
/// At 8192^3 bands of 2 lost 10 %.
const PINGPONG_BF16_SWIZZLE_LOG2: u32 = 2;

/// Whether the 128x256x64 cooperative kernel of `cfg` runs an `m x n x k` problem faster
/// with hybrid stream-K ([`rcute_kernel::stream_k`]): one to four whole waves of tiles and
/// a last wave of at most an eighth of the SMs, whose tiles (of at least 32 k-tiles) the
/// plan then halves over twice as many CTAs. Measured on an H100 (BENCHMARKS.md, "Session
/// 16 (helper sk3)"), in both ABBA pairs: 2176x2048x4096 (136 tiles, 4 left over) 84-88
/// -> 72-75 us, 4096x4352x4096 (544 tiles, 16 left over) 245-256 -> 236-240 us. Where the
/// last wave is fuller every CTA writes partial sums of two tiles and the reduction's
/// traffic outweighs the wave it saves: 4096^3 (116 left over) 25 % slower,
/// 4096x14336x4096 (76) 3 % slower, 8192^3 (68) within the noise; so those keep the
/// data-parallel walk.
fn stream_k_pays(cfg: &GemmSm90Config, m: usize, n: usize, k: usize, l: usize, sms: u32) -> bool {
    if cfg.tile != [128, 256, 64] || sms == 0 {
        return false;
    }
    let Ok(p) = rcute_kernel::tile_scheduler::TileScheduler {
        raster: cfg.raster,
        swizzle_log2: cfg.swizzle_log2,
        cluster: [1, 1],
    }
    .params(m as u64, n as u64, l as u64, 128, 256) else {
        return false;
    };
    let k_tiles = k.div_ceil(64) as u64;
    let (waves, tail) = (p.total_work / u64::from(sms), p.total_work % u64::from(sms));
    (1..=4).contains(&waves) && tail > 0 && tail * 8 <= u64::from(sms) && k_tiles >= 32
}

/// A kernel configuration and its run-time split-K factor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The generated kernel's configuration.
    pub config: GemmSm80Config,
    /// K-splits (1 = none).
    pub split_k: u32,
    /// How splits are combined when `split_k > 1`.
    pub split_k_mode: SplitKMode,
}

/// Pick a configuration for an `m x n x k` problem with `l` batches on `sms` multiprocessors.
pub fn select(m: usize, n: usize, k: usize, l: usize, a_major: Major, b_major: Major, sms: u32) -> Selection {
    // Measured on the H200 (BENCHMARKS.md, `rcute bench gemm --config ...` sweeps; the
    // forced configurations run exactly the kernels chosen here):
    // * M <= 32: 16x64x128 (1x4 warps), K split only below half a wave: 16x4096x4096
    //   13.3 us with 2 serial splits (16.0 unsplit), 32x4096x4096 16.0 us, 16x14336x4096
    //   33.5 us, 32x14336x4096 41.7 us unsplit (splitting those was slower, e.g. 18.5 vs
    //   16.6 us at 32x4096);
    // * M <= 128: 64x64x64 (2x2), K split below one wave: 64x14336x4096 42.2 us unsplit
    //   (every split >= 52 us), 128x4096x4096 28.1 us with 2 serial splits (29.4 unsplit,
    //   28.6 parallel); with M > 64 and N >= 8192, 64x128x32 (128x14336x4096: 63.7 us against
    //   80.4 us for 64x64x64);
    // * larger: 128x128x32, 4 stages, raster swizzle 8 (364 TFLOP/s at 4096^3).
    let (tile, warps, swizzle, wave_fraction) = if m <= 32 {
        ([16, 64, 128], [1, 4], 0, 2)
    } else if m <= 128 {
        if m > 64 && n >= 8192 {
            ([64, 128, 32], [2, 2], 0, 1)
        } else {
            ([64, 64, 64], [2, 2], 0, 1)
        }
    } else {
        ([128, 128, 32], [2, 2], 3, 2)
    };
    let mut config = GemmSm80Config::bf16(a_major, b_major, tile, warps);
    config.raster_swizzle = swizzle;
    Selection {
        config,
        // serial mode (one kernel, no reduction launch)
        split_k: rule_split_k(tile, (m, n, k, l), sms, wave_fraction),
        split_k_mode: SplitKMode::Serial,
    }
}

/// The Ampere-class rules' K splits for `tile` over an `m x n x k` problem with `l`
/// batches on `sms` SMs: doubled (up to 16) while the grid with the splits fills less
/// than `1 / wave_fraction` of a wave and each split keeps at least 4 k-tiles.
fn rule_split_k(tile: [i64; 3], (m, n, k, l): (usize, usize, usize, usize), sms: u32, wave_fraction: usize) -> u32 {
    let ctas = m.div_ceil(tile[0] as usize) * n.div_ceil(tile[1] as usize) * l;
    let k_tiles = k.div_ceil(tile[2] as usize);
    let mut split_k = 1u32;
    while wave_fraction * ctas * (split_k as usize) < sms as usize
        && k_tiles / (2 * split_k as usize) >= 4
        && split_k < 16
    {
        split_k *= 2;
    }
    split_k
}

/// A scaled-mm kernel geometry and its run-time split-K factor (the fusion, output type and
/// target come from the problem and the GPU; see [`crate::scaled_mm`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaledMmSelection {
    /// The GPU family the kernel is generated for.
    pub target: ScaledMmTarget,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Pipeline stages (`None`: as many as the GPU's shared memory allows, at most 4).
    pub stages: Option<usize>,
    /// log2 of the rasterization swizzle.
    pub raster_swizzle: u32,
    /// K-splits (1 = none).
    pub split_k: u32,
    /// How splits are combined when `split_k > 1`.
    pub split_k_mode: SplitKMode,
}

/// Pick the INT8 scaled-mm kernel for an `m x n x k` problem with `l` batches on `sms`
/// multiprocessors of the `target` family, by M bucket as vLLM's / InfiniOP's
/// `sm{75,80,89}_dispatch_shape` do. Measured on the H200 (132 SMs) with
/// `rcute bench scaled-mm --eager` (per-token / per-channel scales, bias, bf16 out; forced
/// configurations, microseconds):
///
/// * M <= 16: 16x64x256 (1x4 warps): 16x4096x4096 14.3 (16x64x128 split 2: 15.2),
///   16x14336x4096 20.2 (16x64x128: 20.9);
/// * M <= 64: 32x64x128 (1x4): 32x4096x4096 14.1 (split 2: 15.0), 64x4096x4096 14.2
///   (64x64x128: 16.2, split 2: 19.5);
/// * M <= 128: 64x128x64 (2x2) for N >= 8192 (128x14336x4096 35.6 against 39.8), else
///   64x64x128 (128x4096x4096 16.2; split 2: 18.2);
/// * larger: 128x128x64 (2x2, 4 stages, rasterization swizzle 8): 2048^3 34.3 (128x256x64:
///   38.7 to 55.5), 4096^3 209 (256x128x64: 224), 8192^3 1718, 4096x14336x4096 781.
///
/// K is split (serially: one kernel, exact s32 partials) only when the grid fills less than
/// a quarter of the machine and each split keeps at least 4 k-tiles: at K = 4096 splitting
/// a grid of 64 CTAs was slower in every measured case.
/// Turing (two stages, 64 KiB of shared memory; not measured): M <= 32: 32x64x128 (1x4);
/// M <= 64: 64x64x64 (2x2); larger: 128x128x64 (2x4); the same split-K rule.
pub fn select_scaled_mm(target: ScaledMmTarget, m: usize, n: usize, k: usize, l: usize, sms: u32) -> ScaledMmSelection {
    let (tile, warps, swizzle) = match target {
        ScaledMmTarget::Ampere => {
            if m <= 16 {
                ([16, 64, 256], [1, 4], 0)
            } else if m <= 64 {
                ([32, 64, 128], [1, 4], 0)
            } else if m <= 128 {
                if n >= 8192 {
                    ([64, 128, 64], [2, 2], 0)
                } else {
                    ([64, 64, 128], [2, 2], 0)
                }
            } else {
                ([128, 128, 64], [2, 2], 3)
            }
        }
        ScaledMmTarget::Turing => {
            if m <= 32 {
                ([32, 64, 128], [1, 4], 0)
            } else if m <= 64 {
                ([64, 64, 64], [2, 2], 0)
            } else {
                ([128, 128, 64], [2, 4], 2)
            }
        }
    };
    let split_k = rule_split_k(tile, (m, n, k, l), sms, 4);
    ScaledMmSelection {
        target,
        tile,
        warps,
        stages: match target {
            ScaledMmTarget::Ampere => None,
            ScaledMmTarget::Turing => Some(2),
        },
        raster_swizzle: swizzle,
        split_k,
        split_k_mode: SplitKMode::Serial,
    }
}

/// A gemm operand type as the kernels name it (f16, bf16 or f32).
pub(crate) fn element(d: crate::tensor::DType) -> Result<GemmElement, crate::OpsError> {
    use crate::tensor::DType;
    Ok(match d {
        DType::F16 => GemmElement::F16,
        DType::BF16 => GemmElement::BF16,
        DType::F32 => GemmElement::F32,
        other => return Err(crate::OpsError::DType(format!("{other:?} in a floating-point GEMM"))),
    })
}

/// The tile of the narrow-vector kernel (operands not 16-byte aligned): 128 threads copy
/// a 64 x 32 slab of A or B in at most 16 passes even with 2-byte copies (the tile and
/// warps the GPU tests ran; with 2-byte copies of K-major A and B the kernel takes 248
/// registers on sm_80 and 254 on sm_90a, without spills, when not rasterized).
pub const NARROW_TILE: [i64; 3] = [64, 64, 32];
/// The warps of the narrow-vector kernel.
pub const NARROW_WARPS: [i64; 2] = [2, 2];

/// The SM80-class kernel configuration that runs validated problem `p` with selection
/// `sel`: the problem's element types, operand majors and output order, and the copy
/// width of [`crate::gemm::copy_bytes`]. Where that is below the configuration's (16 bytes
/// for every selection), the narrow-vector kernel runs, on [`NARROW_TILE`] without a
/// rasterization swizzle unless the selection was `forced` (then its tile is kept).
///
/// ```
/// use rcute_ops::select::{select, sm80_config, NARROW_TILE};
/// use rcute_ops::{validate, DType, Geometry, MatrixMut, MatrixRef};
/// use rcute_kernel::gemm_sm80::Major;
/// // SAFETY: nothing is launched; this reads only the geometry.
/// let view = |ptr, r, c| unsafe { MatrixRef::from_raw(Geometry::dense(ptr, r * c, DType::BF16, r, c)) };
/// let d = unsafe { MatrixMut::from_raw(Geometry::dense(0x30000, 3 * 7, DType::BF16, 3, 7)) };
/// let (a, b) = (view(0x10000, 3, 5), view(0x20000, 5, 7));
/// let p = validate(&a, &b, None, &d, 1.0, 0.0).unwrap();
/// let sel = select(3, 7, 5, 1, Major::K, Major::MN, 132);
/// let cfg = sm80_config(&p, &sel, false).unwrap();
/// assert_eq!((cfg.copy_bytes, cfg.tile), (2, NARROW_TILE));
/// ```
pub fn sm80_config(
    p: &crate::gemm::GemmProblem<'_>,
    sel: &Selection,
    forced: bool,
) -> Result<GemmSm80Config, crate::OpsError> {
    use crate::tensor::Major as ViewMajor;
    use rcute_kernel::gemm_sm80::StorageOrder;
    let mut cfg = sel.config.clone();
    let copy = crate::gemm::copy_bytes(p).min(cfg.copy_bytes);
    if copy < cfg.copy_bytes && !forced {
        (cfg.tile, cfg.warps, cfg.stages, cfg.raster_swizzle) = (NARROW_TILE, NARROW_WARPS, None, 0);
    }
    cfg.copy_bytes = copy;
    cfg.a = element(p.a.dtype)?;
    cfg.b = element(p.b.dtype)?;
    cfg.d = element(p.d.dtype)?;
    cfg.c = cfg.d;
    cfg.a_major = if p.a.major() == Some(ViewMajor::Row) {
        Major::K
    } else {
        Major::MN
    };
    cfg.b_major = if p.b.major() == Some(ViewMajor::Col) {
        Major::K
    } else {
        Major::MN
    };
    cfg.c_major = if p.d.major() == Some(ViewMajor::Row) {
        StorageOrder::RowMajor
    } else {
        StorageOrder::ColMajor
    };
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_mm_buckets() {
        let s = |m, n, k| select_scaled_mm(ScaledMmTarget::Ampere, m, n, k, 1, 132);
        assert_eq!((s(1, 4096, 4096).tile, s(1, 4096, 4096).split_k), ([16, 64, 256], 1));
        assert_eq!((s(64, 4096, 4096).tile, s(64, 4096, 4096).split_k), ([32, 64, 128], 1));
        assert_eq!(
            (s(128, 14336, 4096).tile, s(128, 14336, 4096).split_k),
            ([64, 128, 64], 1)
        );
        let big = s(4096, 4096, 4096);
        assert_eq!(
            (big.tile, big.warps, big.split_k, big.raster_swizzle),
            ([128, 128, 64], [2, 2], 1, 3)
        );
        // A small grid with a long K splits: 1x1024x8192 has 16 CTAs.
        let x = s(1, 1024, 8192);
        assert_eq!((x.split_k, x.split_k_mode), (4, SplitKMode::Serial));
        let t = select_scaled_mm(ScaledMmTarget::Turing, 4096, 4096, 4096, 1, 40);
        assert_eq!((t.tile, t.stages), ([128, 128, 64], Some(2)));
        // Small K never splits below 4 k-tiles per split.
        assert_eq!(s(1, 64, 256).split_k, 1);
    }

    #[test]
    fn sm90_large_problems_swizzle_the_tile_walk() {
        let (big, split) = select_sm90(8192, 8192, 8192, 1, 132).unwrap();
        assert_eq!((big.tile, big.swizzle_log2, split), ([128, 256, 64], 3, 1));
        // Operands of at most 32 MiB stay in the L2: no bands of 8 (the ping-pong kernel's
        // bands of 4 within four waves, else the plain walk).
        assert_eq!(select_sm90(4096, 4096, 4096, 1, 132).unwrap().0.swizzle_log2, 2);
        assert_eq!(select_sm90(4096, 14336, 4096, 1, 132).unwrap().0.swizzle_log2, 0);
        // Decode shapes walk plainly.
        assert_eq!(select_sm90(16, 65536, 65536, 1, 132).unwrap().0.swizzle_log2, 0);
        let (s8, _) = select_scaled_sm90(8192, 8192, 8192, 1, 132);
        assert_eq!((s8.tile, s8.mma_pipe, s8.swizzle_log2), ([128, 256, 128], 0, 3));
        assert_eq!(select_scaled_sm90(128, 65536, 65536, 1, 132).0.swizzle_log2, 0);
    }

    #[test]
    fn bf16_above_decode_runs_the_swizzled_pingpong_kernel_within_four_cooperative_waves() {
        for (m, n, k) in [
            (129, 4096, 4096),
            (1024, 14336, 4096),
            (2048, 2048, 2048),
            (2048, 4096, 4096),
            (4096, 4096, 4096),
            (4224, 4096, 4096), // 528 cooperative tiles: four waves exactly
            (300, 200, 1040),
        ] {
            let (c, split) = select_sm90(m, n, k, 1, 132).unwrap();
            // The measured kernel is `sm90:128x128x64,pp,r2`: default stages, pipe, cluster.
            assert_eq!(
                (c.tile, c.schedule, c.swizzle_log2, split),
                ([128, 128, 64], Sm90Schedule::PingPong, 2, 1),
                "{m}x{n}x{k}"
            );
            assert_eq!((c.stages, c.mma_pipe, c.cluster, c.stream_k), (None, 1, [1, 1], false));
        }
        // More than four waves of cooperative tiles (measured: 4096x14336x4096, 896 tiles):
        // the cooperative kernel, plain walk.
        for (m, n, k) in [(4096, 14336, 4096), (8192, 4096, 4096), (4480, 4096, 4096)] {
            let (c, _) = select_sm90(m, n, k, 1, 132).unwrap();
            assert_eq!(
                (c.tile, c.schedule, c.swizzle_log2),
                ([128, 256, 64], Sm90Schedule::Cooperative, 0),
                "{m}x{n}x{k}"
            );
        }
        // Operands past 32 MiB: the cooperative kernel in bands of 8.
        let (c, _) = select_sm90(8192, 8192, 8192, 1, 132).unwrap();
        assert_eq!(
            (c.tile, c.schedule, c.swizzle_log2),
            ([128, 256, 64], Sm90Schedule::Cooperative, 3)
        );
        // Where stream-K pays: the cooperative kernel it was measured on.
        let (c, _) = select_sm90(2176, 2048, 4096, 1, 132).unwrap();
        assert_eq!(
            (c.tile, c.schedule, c.stream_k),
            ([128, 256, 64], Sm90Schedule::Cooperative, true)
        );
    }

    #[test]
    fn eight_bit_above_decode_runs_the_swizzled_pingpong_kernel_where_operands_fit_the_l2() {
        for (m, n, k) in [
            (129, 4096, 4096),
            (4096, 14336, 4096),
            (8192, 8192, 4096),
            (512, 4096, 4096),
        ] {
            let (c, split) = select_scaled_sm90(m, n, k, 1, 132);
            assert_eq!(
                (c.tile, c.schedule, c.swizzle_log2, split),
                ([128, 128, 128], Sm90Schedule::PingPong, 2, 1)
            );
            // The measured kernel is `sm90:128x128x128,pp,r2`: default stages, pipe, cluster.
            assert_eq!((c.stages, c.mma_pipe, c.cluster), (None, 1, [1, 1]), "{m}x{n}x{k}");
        }
        // Operands past 32 MiB: the cooperative kernel in bands of 8.
        let (c, _) = select_scaled_sm90(8192, 8192, 8192, 1, 132);
        assert_eq!(
            (c.tile, c.schedule, c.mma_pipe, c.swizzle_log2),
            ([128, 256, 128], Sm90Schedule::Cooperative, 0, 3)
        );
        // Decode shapes split K on the 64x128x128 ping-pong kernel.
        let (c, split) = select_scaled_sm90(16, 4096, 4096, 1, 132);
        assert_eq!((c.tile, c.schedule), ([64, 128, 128], Sm90Schedule::PingPong));
        assert!(split > 1);
    }

    #[test]
    fn sm90_stream_k_only_for_a_nearly_empty_last_wave() {
        let sk = |m, n, k| select_sm90(m, n, k, 1, 132).unwrap().0.stream_k;
        // measured wins: 136 tiles (4 left over), 544 tiles (16 left over)
        assert!(sk(2176, 2048, 4096) && sk(4096, 4352, 4096));
        // measured losses or no tail: 512, 1792 and 2048 tiles; 128 tiles (one wave)
        assert!(!sk(4096, 4096, 4096) && !sk(4096, 14336, 4096) && !sk(8192, 8192, 8192));
        assert!(!sk(2048, 2048, 2048));
        // short K, more than four waves, 128x128 tiles
        assert!(!sk(2176, 2048, 1024) && !sk(4224 * 2, 4352, 4096) && !sk(2176, 128, 4096));
    }

    #[test]
    fn decode_and_large_choices() {
        let s = |m, n, k| select(m, n, k, 1, Major::K, Major::K, 132);
        assert_eq!(
            (s(16, 4096, 4096).config.tile, s(16, 4096, 4096).split_k),
            ([16, 64, 128], 2)
        );
        assert_eq!(
            (s(32, 4096, 4096).config.tile, s(32, 4096, 4096).split_k),
            ([16, 64, 128], 1)
        );
        assert_eq!(
            (s(64, 14336, 4096).config.tile, s(64, 14336, 4096).split_k),
            ([64, 64, 64], 1)
        );
        let x = s(128, 4096, 4096);
        assert_eq!(
            (x.config.tile, x.split_k, x.split_k_mode),
            ([64, 64, 64], 2, SplitKMode::Serial)
        );
        assert_eq!(
            (s(128, 14336, 4096).config.tile, s(128, 14336, 4096).split_k),
            ([64, 128, 32], 1)
        );
        let big = s(4096, 4096, 4096);
        assert_eq!(
            (big.config.tile, big.split_k, big.config.raster_swizzle),
            ([128, 128, 32], 1, 3)
        );
    }
}
