//! The grouped family's SM90 member: the configurations of the Hopper generator
//! ([`crate::gemm_sm90`], TMA + `wgmma`, persistent cooperative schedule) for the MoE
//! GEMMs, with the [`Sm90Grouped`] epilogues. GEMM1's A is the token rows gathered into the
//! alignment's padded-row order first ([`super::gather`]); GEMM2's A is GEMM1's output.
//!
//! ```
//! use rcute_kernel::grouped_gemm::{sm90_config, GroupedEpilogue, SM90_TILE};
//! use rcute_atom::Element;
//! let g = rcute_kernel::gemm_sm90::generate(&sm90_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE)).unwrap();
//! assert!(g.name.starts_with("rc_moe_grouped_sm90_bf16_swiglu_128x256x64_coop_s"));
//! assert!(g.source.contains("wgmma.mma_async"));
//! ```

use super::GroupedEpilogue;
use crate::gemm_sm90::{GemmSm90Config, Sm90Grouped, Sm90Schedule};
use crate::tile_scheduler::RasterOrderOption;
use rcute_atom::Element;

/// The SM90 grouped tile: `BM = 128` rows (two consumer warpgroups of 64; the alignment's
/// block), `BN = 256` B rows (SwiGLU: 128 gate + 128 up rows), `BK = 64`.
pub const SM90_TILE: [i64; 3] = [128, 256, 64];

/// GEMM2's narrow SM90 grouped tile: `BN = 128` output columns, twice the tiles of
/// [`SM90_TILE`] for a shorter wave tail when few row tiles are routed (K = I is long, so
/// each tile is a long share of a CTA's time).
pub const SM90_NARROW_TILE: [i64; 3] = [128, 128, 64];

/// The FP8 grouped tile: `BK = 128` e4m3 elements (128-byte rows, the `SWIZZLE_128B`
/// atom), as the FP8 scaled GEMM's.
pub const SM90_FP8_TILE: [i64; 3] = [128, 256, 128];

/// GEMM2's narrow FP8 grouped tile: [`SM90_NARROW_TILE`]'s 128x128 with the FP8 `BK = 128`.
pub const SM90_FP8_NARROW_TILE: [i64; 3] = [128, 128, 128];

/// `tile` with the `BK` of `ab` operands: a 128-byte row of the k-tile (the `SWIZZLE_128B`
/// atom), 64 bf16 / f16 or 128 e4m3 elements.
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_operand_tile, SM90_FP8_NARROW_TILE, SM90_FP8_TILE, SM90_NARROW_TILE, SM90_TILE};
/// use rcute_atom::Element;
/// assert_eq!(sm90_operand_tile(Element::BF16, SM90_TILE), SM90_TILE);
/// assert_eq!(sm90_operand_tile(Element::E4M3, SM90_TILE), SM90_FP8_TILE);
/// assert_eq!(sm90_operand_tile(Element::E4M3, SM90_NARROW_TILE), SM90_FP8_NARROW_TILE);
/// ```
pub fn sm90_operand_tile(ab: Element, tile: [i64; 3]) -> [i64; 3] {
    [tile[0], tile[1], 128 / i64::from(ab.bytes().max(1))]
}

/// The SM90 grouped GEMM configuration of `ab` operands (bf16, f16 or e4m3) with an `out` D
/// (`ab` itself for 16-bit operands; bf16 or f16 for e4m3), `epilogue` and `tile` (`BM` 128:
/// the cooperative schedule's two warpgroups of 64 rows; `BK` as [`sm90_operand_tile`]), on
/// 2x1 CTA clusters when `cluster` ([`sm90_cluster_config`]). With e4m3 operands: f32
/// accumulation, the per-row activation scale and the per-output-channel weight scale
/// applied in the register epilogue before SwiGLU / the router weight. Every other SM90
/// grouped configuration is this one with fixed arguments.
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_grouped_config, GroupedEpilogue, SM90_FP8_NARROW_TILE, SM90_FP8_TILE};
/// use rcute_atom::Element;
/// let e4m3 = Element::E4M3;
/// let g = rcute_kernel::gemm_sm90::generate(&sm90_grouped_config(e4m3, Element::BF16, GroupedEpilogue::SwiGlu, SM90_FP8_TILE, true)).unwrap();
/// assert!(g.name.starts_with("rc_moe_grouped_sm90_e4m3_swiglu_128x256x128_coop_c2x1_s"));
/// assert!(g.source.contains("rc_tma_load_3d_multicast"));
/// let n = rcute_kernel::gemm_sm90::generate(&sm90_grouped_config(e4m3, Element::BF16, GroupedEpilogue::Scatter, SM90_FP8_NARROW_TILE, false)).unwrap();
/// assert!(n.name.starts_with("rc_moe_grouped_sm90_e4m3_scatter_128x128x128_coop_s"));
/// ```
pub fn sm90_grouped_config(
    ab: Element,
    out: Element,
    epilogue: GroupedEpilogue,
    tile: [i64; 3],
    cluster: bool,
) -> GemmSm90Config {
    let mut c = GemmSm90Config::bf16(tile, Sm90Schedule::Cooperative).without_c();
    // The kernel walks its tiles in expert-aligned bands (gemm_sm90's grouped mode); the
    // scheduler only hands out the work ids, unswizzled (no padding ids).
    c.raster = RasterOrderOption::AlongN;
    c.swizzle_log2 = 0;
    c.ab = ab;
    c.cd = out;
    if cluster {
        c.cluster = crate::gemm_sm90::GROUPED_CLUSTER;
    }
    c.grouped = Some(match epilogue {
        GroupedEpilogue::SwiGlu => Sm90Grouped::SwiGlu,
        GroupedEpilogue::Scatter => Sm90Grouped::Scatter,
    });
    if ab == Element::E4M3 {
        // As the FP8 scaled GEMM: no extra wgmma batch in flight. One batch in flight
        // (`mma_pipe` 1) measured no faster on an H100 (ncu, Mixtral GEMM1 at T = 4096: 2.18
        // against 2.17 ms; BENCHMARKS.md, "Session 17 (helper moefp8)").
        c.mma_pipe = 0;
    }
    c
}

/// [`sm90_grouped_config`] of e4m3 operands with an `out` (bf16 or f16) D and `epilogue`
/// at [`SM90_FP8_TILE`], without clusters.
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_fp8_config, GroupedEpilogue};
/// use rcute_atom::Element;
/// let g = rcute_kernel::gemm_sm90::generate(&sm90_fp8_config(Element::BF16, GroupedEpilogue::Scatter)).unwrap();
/// assert!(g.name.starts_with("rc_moe_grouped_sm90_e4m3_scatter_128x256x128_coop_s"));
/// assert!(g.name.ends_with("_dbf16"));
/// assert!(g.source.contains("e4m3.e4m3"));
/// ```
pub fn sm90_fp8_config(out: Element, epilogue: GroupedEpilogue) -> GemmSm90Config {
    sm90_grouped_config(Element::E4M3, out, epilogue, SM90_FP8_TILE, false)
}

/// The ping-pong grouped tile of bf16 / f16 operands, [`SM90_NARROW_TILE`]: `BM = 128`
/// rows (the alignment's block) by `BN = 128` B rows (SwiGLU: 64 gate + 64 up rows), all
/// of it one consumer warpgroup's (two m64 atoms of 64 accumulators per thread).
pub const SM90_PINGPONG_TILE: [i64; 3] = SM90_NARROW_TILE;

/// The ping-pong grouped tile of e4m3 operands, [`SM90_FP8_NARROW_TILE`]:
/// [`SM90_PINGPONG_TILE`] with `BK = 128`.
pub const SM90_FP8_PINGPONG_TILE: [i64; 3] = SM90_FP8_NARROW_TILE;

/// The 64-row ping-pong grouped tile of bf16 / f16 operands: `BM = 64` rows (the
/// alignment's block), `BN = 256` B rows (SwiGLU: 128 gate + 128 up rows), all of it one
/// consumer warpgroup's (one m64n256 atom, 128 accumulators per thread). An expert with
/// up to 64 routed rows pads to 64 rows instead of [`SM90_PINGPONG_TILE`]'s 128.
pub const SM90_ROWS64_TILE: [i64; 3] = [64, 256, 64];

/// [`sm90_pingpong_config`] of bf16 / f16 operands on [`SM90_ROWS64_TILE`].
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_rows64_config, GroupedEpilogue};
/// use rcute_atom::Element;
/// let g = rcute_kernel::gemm_sm90::generate(&sm90_rows64_config(Element::BF16, GroupedEpilogue::SwiGlu)).unwrap();
/// assert!(g.name.starts_with("rc_moe_grouped_sm90_bf16_swiglu_64x256x64_pingpong_s"));
/// assert_eq!(g.plan.wg_rows, 64);
/// ```
pub fn sm90_rows64_config(ab: Element, epilogue: GroupedEpilogue) -> GemmSm90Config {
    let mut c = sm90_pingpong_config(ab, ab, epilogue);
    c.tile = SM90_ROWS64_TILE;
    c
}

/// The SM90 grouped GEMM configuration of `ab` operands (bf16, f16 or e4m3) with an `out`
/// D (`ab` itself for 16-bit operands) and `epilogue` on the ping-pong schedule: the two
/// consumer warpgroups take turns at the CTA's tiles of the persistent walk, each a whole
/// [`SM90_PINGPONG_TILE`] (e4m3: [`SM90_FP8_PINGPONG_TILE`]), their mainloops ordered by
/// the math barrier, so that one warpgroup's register epilogue (SwiGLU or the scatter, with
/// the scales) and its switch to the next tile run under the other's mainloop. One
/// `wgmma` batch in flight (`mma_pipe` 1) in both: a warpgroup alone on the tensor cores
/// would idle between batches without it.
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_pingpong_config, GroupedEpilogue};
/// use rcute_atom::Element;
/// let g = rcute_kernel::gemm_sm90::generate(&sm90_pingpong_config(Element::BF16, Element::BF16, GroupedEpilogue::SwiGlu)).unwrap();
/// assert!(g.name.starts_with("rc_moe_grouped_sm90_bf16_swiglu_128x128x64_pingpong_s"));
/// assert!(g.source.contains("rc_named_barrier_sync(3u + (uint32_t)cw, 256u)"));
/// let f = rcute_kernel::gemm_sm90::generate(&sm90_pingpong_config(Element::E4M3, Element::BF16, GroupedEpilogue::Scatter)).unwrap();
/// assert!(f.name.starts_with("rc_moe_grouped_sm90_e4m3_scatter_128x128x128_pingpong_s"));
/// assert!(f.name.ends_with("_dbf16_b4")); // SM90_FP8_PINGPONG_WALK_BAND
/// ```
pub fn sm90_pingpong_config(ab: Element, out: Element, epilogue: GroupedEpilogue) -> GemmSm90Config {
    let mut c = sm90_grouped_config(ab, out, epilogue, sm90_operand_tile(ab, SM90_PINGPONG_TILE), false);
    c.schedule = Sm90Schedule::PingPong;
    c.mma_pipe = 1;
    if ab == Element::E4M3 {
        c.walk_band = SM90_FP8_PINGPONG_WALK_BAND;
    }
    c
}

/// The tile walk's band of the e4m3 ping-pong grouped GEMMs ([`sm90_pingpong_config`];
/// [`GemmSm90Config::walk_band`]): at most 4 row tiles of one expert per band, so that a
/// wave of CTAs covers few row tiles by many column tiles (the default,
/// [`crate::gemm_sm90::WALK_BAND`] = 16, stays for the 16-bit ones). Where the experts hold
/// at most 4 row tiles (512 routed rows; every shape at which the FP8 layer ran ping-pong
/// before) the walk is the default's. Measured on an H100 (BENCHMARKS.md, "Session 19
/// (helper moeband)"), the FP8 layer at Mixtral T = 2048 (512 rows per expert) in six runs,
/// order varied: band 4 1.5-9.8 % faster than band 16 and 3.3-11 % faster than the
/// cooperative 128x256x128 kernels; at T = 4096 (8 row tiles) no band made ping-pong
/// win (band 2: 0-7 % slower than the cooperative kernels, band 4: 10-26 %).
pub const SM90_FP8_PINGPONG_WALK_BAND: i64 = 4;

/// [`sm90_config`] on 2x1 CTA clusters ([`crate::gemm_sm90::GROUPED_CLUSTER`]): the two
/// CTAs of a cluster take two row tiles of one expert by one column tile and multicast
/// the B (weight) tile to both, so that each weight tile is read once per pair of row
/// tiles (an expert's odd last row tile: by two column tiles, sharing A).
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_cluster_config, GroupedEpilogue, SM90_TILE};
/// use rcute_atom::Element;
/// let g = rcute_kernel::gemm_sm90::generate(&sm90_cluster_config(Element::BF16, GroupedEpilogue::SwiGlu, SM90_TILE)).unwrap();
/// assert!(g.name.starts_with("rc_moe_grouped_sm90_bf16_swiglu_128x256x64_coop_c2x1_s"));
/// assert!(g.source.contains("rc_tma_load_3d_multicast"));
/// ```
pub fn sm90_cluster_config(element: Element, epilogue: GroupedEpilogue, tile: [i64; 3]) -> GemmSm90Config {
    sm90_grouped_config(element, element, epilogue, tile, true)
}

/// The gathering SwiGLU GEMM1 of `element` (bf16 or f16) operands on `tile` and
/// `schedule` (cooperative, or ping-pong with its one batch in flight), without clusters:
/// [`sm90_config`] / [`sm90_pingpong_config`] with [`GemmSm90Config::gather_a`], so that
/// the producer warpgroup copies the token rows `x[sorted_ids[m] / topk]` into the stages
/// itself (`cp.async`) and the layer runs no separate row gather ([`super::gather`]).
///
/// ```
/// use rcute_kernel::grouped_gemm::{sm90_gather_config, SM90_TILE, SM90_PINGPONG_TILE};
/// use rcute_kernel::gemm_sm90::Sm90Schedule;
/// use rcute_atom::Element;
/// let g = rcute_kernel::gemm_sm90::generate(&sm90_gather_config(Element::BF16, SM90_TILE, Sm90Schedule::Cooperative)).unwrap();
/// assert!(g.name.starts_with("rc_moe_grouped_sm90_bf16_gather_swiglu_128x256x64_coop_s"));
/// assert!(g.source.contains("rc_cp_async_mbarrier_arrive_noinc(full)"));
/// assert!(!g.source.contains("tmap_a"));
/// let p = rcute_kernel::gemm_sm90::generate(&sm90_gather_config(Element::F16, SM90_PINGPONG_TILE, Sm90Schedule::PingPong)).unwrap();
/// assert!(p.name.starts_with("rc_moe_grouped_sm90_f16_gather_swiglu_128x128x64_pingpong_s"));
/// ```
pub fn sm90_gather_config(element: Element, tile: [i64; 3], schedule: Sm90Schedule) -> GemmSm90Config {
    let mut c = match schedule {
        Sm90Schedule::PingPong => sm90_pingpong_config(element, element, GroupedEpilogue::SwiGlu),
        _ => sm90_config(element, GroupedEpilogue::SwiGlu, tile),
    };
    c.tile = tile;
    c.gather_a = true;
    c
}

/// The SM90 grouped GEMM configuration of `element` (bf16 or f16) operands and D with
/// `epilogue` and `tile`, without clusters ([`sm90_grouped_config`]).
pub fn sm90_config(element: Element, epilogue: GroupedEpilogue, tile: [i64; 3]) -> GemmSm90Config {
    sm90_grouped_config(element, element, epilogue, tile, false)
}
