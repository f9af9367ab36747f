//! Which grouped GEMM family runs the fused MoE layer: the SM80 `mma.sync` kernels
//! (any sm_80+ GPU, every tile size, the only one for decode) or the SM90 TMA + `wgmma`
//! kernels (sm_90, 128-row tiles, prefill).

/// The grouped GEMM family of [`crate::Ops::fused_moe`] ([`super::MoeOptions::path`]). On
/// every cooperative SM90 path GEMM2 runs on 2x1 CTA clusters where the routed rows say
/// ([`sm90_gemm2_cluster`]), and a GEMM1 on 1x1 on the narrow tile where they say
/// ([`sm90_gemm1_tile`]); the paths choose GEMM1's cluster and GEMM2's tile, or both GEMMs
/// on the ping-pong schedule ([`sm90_pingpong`]: [`MoePath::Sm90PingPong`], and
/// [`MoePath::Auto`] at up to [`SM90_PINGPONG_MAX_ROWS_PER_EXPERT`] rows per expert).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MoePath {
    /// The rule ([`sm90_chosen`]): SM90 on an sm_90 GPU once the experts average at least
    /// [`SM90_MIN_ROWS_PER_EXPERT`] routed rows, the SM80 family otherwise; on SM90, GEMM1
    /// gathers the token rows itself up to [`SM90_GATHER_MAX_ROWS_PER_EXPERT`] rows per
    /// expert ([`sm90_gather`]).
    #[default]
    Auto,
    /// Always the SM80 (`mma.sync`) family.
    Sm80,
    /// Always the SM90 (TMA + `wgmma`) family, GEMM2 on [`SM90_TILE`] (128x256) tiles: an
    /// error on other GPUs.
    Sm90,
    /// Always the SM90 family, GEMM2 on [`SM90_NARROW_TILE`] (128x128) tiles: an error on
    /// other GPUs.
    Sm90Narrow,
    /// [`MoePath::Sm90`] with GEMM1 on 2x1 CTA clusters that multicast each weight tile
    /// to two row tiles of its expert ([`rcute_kernel::grouped_gemm::sm90_cluster_config`]):
    /// an error on other GPUs.
    Sm90Cluster,
    /// [`MoePath::Sm90Narrow`] with GEMM1 on 2x1 CTA clusters: an error on other GPUs.
    Sm90NarrowCluster,
    /// Always the SM90 family, both GEMMs on the ping-pong schedule
    /// ([`rcute_kernel::grouped_gemm::sm90_pingpong_config`]: 128x128 tiles, each consumer
    /// warpgroup a whole tile in turn, one's epilogue under the other's mainloop), without
    /// clusters: an error on other GPUs.
    Sm90PingPong,
}

impl MoePath {
    /// Whether the path forces the SM90 family.
    pub fn forces_sm90(self) -> bool {
        !matches!(self, MoePath::Auto | MoePath::Sm80)
    }
}

use rcute_kernel::grouped_gemm::{SM90_NARROW_TILE, SM90_TILE};

/// Routed rows per local expert (on average) from which [`MoePath::Auto`] runs the bf16 /
/// f16 layer on the SM90 family ([`sm90_chosen`]). Its row tile is 128 rows; below the
/// bound the SM80 family's 16- to 64-row tiles waste less work on padding. Up to one row
/// tile per expert the SM90 layer's GEMM1 gathers the token rows itself
/// ([`sm90_gather`]), which saves the row-gather launch and moved the bound down from 64
/// (where it stood for the TMA-fed GEMM1); from 24 to 63 rows the layer runs the
/// cooperative kernels (ping-pong from [`SM90_PINGPONG_MIN_ROWS_PER_EXPERT`]). Measured on
/// an H100 (BENCHMARKS.md, "Session 21 (helper moe256)"), CUDA graphs of the layer, two
/// rounds A B B A, µs, the shipped table's SM80 entry (`auto`) against the SM90 layer with
/// the gathering GEMM1 (`moe:sm90`, the form Auto's rules pick there):
///
/// | layer (rows per expert) | SM80 | SM90, gathering GEMM1 | SM90 faster |
/// |---|---|---|---|
/// | DeepSeek-V2-Lite T = 64 (6) | 397.2 / 396.9 | 412.3 / 411.6 | -3.6..-3.7 % |
/// | DeepSeek-V2-Lite T = 128 (12) | 417.6 / 417.9 | 413.5 / 413.2 | 1.0-1.1 % |
/// | DeepSeek-V2-Lite T = 192 (18) | 421.9 / 420.9 | 414.9 / 414.4 | 1.6-1.7 % |
/// | DeepSeek-V2-Lite T = 256 (24) | 426.3 / 425.9 | 416.6 / 416.0 | 2.3-2.4 % |
/// | DeepSeek-V2-Lite T = 384 (36) | 516.5 / 515.8 | 423.7 / 422.8 | 22 % |
/// | Mixtral T = 32 (8) | 948.5 / 949.8 | 970.3 / 971.0 | -2.2 % |
/// | Mixtral T = 64 (16) | 981.6 / 982.4 | 975.2 / 975.3 | 0.7 % |
///
/// (DeepSeek-V2-Lite E = 64, top-6; Mixtral E = 8, top-2.) The bound is the fewest rows
/// at which the SM90 layer won by at least 2 % in both rounds.
pub const SM90_MIN_ROWS_PER_EXPERT: usize = 24;

/// Whether the layer of `entries` routed rows over `local` experts runs the SM90 family on
/// a GPU of compute capability `cc` with `path`, before the workspace is considered.
///
/// ```
/// use rcute_ops::moe::{sm90_chosen, MoePath};
/// // Mixtral, 8 experts: T = 1024 tokens top-2 average 256 rows per expert.
/// assert!(sm90_chosen(MoePath::Auto, (9, 0), 2048, 8));
/// assert!(!sm90_chosen(MoePath::Auto, (9, 0), 128, 8)); // T = 64: decode-like
/// // DeepSeek-V2-Lite, 64 experts, top-6: T = 256 averages 24 rows per expert, T = 192 18.
/// assert!(sm90_chosen(MoePath::Auto, (9, 0), 1536, 64));
/// assert!(!sm90_chosen(MoePath::Auto, (9, 0), 1152, 64));
/// assert!(!sm90_chosen(MoePath::Auto, (8, 0), 2048, 8)); // an A100
/// assert!(sm90_chosen(MoePath::Sm90, (9, 0), 2, 8));
/// ```
pub fn sm90_chosen(path: MoePath, cc: (u32, u32), entries: usize, local: usize) -> bool {
    match path {
        MoePath::Sm80 => false,
        MoePath::Sm90
        | MoePath::Sm90Narrow
        | MoePath::Sm90Cluster
        | MoePath::Sm90NarrowCluster
        | MoePath::Sm90PingPong => true,
        MoePath::Auto => cc == (9, 0) && entries >= SM90_MIN_ROWS_PER_EXPERT * local.max(1),
    }
}

/// Routed rows per local expert (on average) from which [`MoePath::Auto`] runs GEMM1 on
/// 2x1 clusters ([`sm90_gemm1_cluster`]): two row tiles, so that most clusters pair two
/// row tiles of one expert and read each weight tile once for both.
pub const SM90_CLUSTER_MIN_ROWS_PER_EXPERT: usize = 256;

/// Bytes of one expert's `w13` from which [`MoePath::Auto`] runs GEMM1 on 2x1 clusters:
/// larger than the L2 (50 MiB on an H100 / H200), where a weight tile that two row tiles
/// read at different times comes from DRAM twice. Measured on an H200 (BENCHMARKS.md,
/// "GEMM1 on 2x1 clusters"): Mixtral (224 MiB per expert) reads 29-49% fewer GEMM1 DRAM
/// bytes and runs 8% faster; DeepSeek-V2-Lite (11 MiB, in L2 anyway) runs 21% slower.
pub const SM90_CLUSTER_MIN_EXPERT_BYTES: usize = 64 << 20;

/// Whether GEMM1 of the SM90 family runs on 2x1 CTA clusters
/// ([`rcute_kernel::grouped_gemm::sm90_cluster_config`]) for `entries` routed rows over
/// `local` experts of `w13_expert_bytes` each: always with [`MoePath::Sm90Cluster`] and
/// [`MoePath::Sm90NarrowCluster`], never with the other forced paths, and for
/// [`MoePath::Auto`] once the experts average [`SM90_CLUSTER_MIN_ROWS_PER_EXPERT`] rows and
/// hold at least [`SM90_CLUSTER_MIN_EXPERT_BYTES`].
///
/// ```
/// use rcute_ops::moe::{sm90_gemm1_cluster, MoePath};
/// let mixtral = 2 * 14336 * 4096 * 2; // w13 bytes of one Mixtral expert (bf16)
/// assert!(sm90_gemm1_cluster(MoePath::Auto, 2048, 8, mixtral)); // T = 1024, top-2
/// assert!(!sm90_gemm1_cluster(MoePath::Auto, 512, 8, mixtral)); // T = 256: one row tile
/// let deepseek = 2 * 1408 * 2048 * 2; // DeepSeek-V2-Lite: in L2
/// assert!(!sm90_gemm1_cluster(MoePath::Auto, 24576, 64, deepseek));
/// assert!(sm90_gemm1_cluster(MoePath::Sm90Cluster, 2, 8, deepseek));
/// assert!(!sm90_gemm1_cluster(MoePath::Sm90, 8192, 8, mixtral));
/// ```
pub fn sm90_gemm1_cluster(path: MoePath, entries: usize, local: usize, w13_expert_bytes: usize) -> bool {
    match path {
        MoePath::Sm90Cluster | MoePath::Sm90NarrowCluster => true,
        MoePath::Auto => {
            entries >= SM90_CLUSTER_MIN_ROWS_PER_EXPERT * local.max(1)
                && w13_expert_bytes >= SM90_CLUSTER_MIN_EXPERT_BYTES
        }
        MoePath::Sm80 | MoePath::Sm90 | MoePath::Sm90Narrow | MoePath::Sm90PingPong => false,
    }
}

/// Whether GEMM2 of the SM90 family runs on 2x1 CTA clusters
/// ([`rcute_kernel::grouped_gemm::sm90_cluster_config`] with the scatter epilogue: two row
/// tiles of one expert share each `w2` tile by multicast, an expert's odd last row tile
/// shares its A rows across two column tiles) for `entries` routed rows over `local`
/// experts: on every SM90 path once the experts average
/// [`SM90_CLUSTER_MIN_ROWS_PER_EXPERT`] rows (two row tiles). `w2` is re-read from DRAM by
/// the row tiles of an expert that run at different times whatever its size (K = I is
/// long, so the row tiles of a wave drift apart), so unlike GEMM1's rule
/// ([`sm90_gemm1_cluster`]) there is no weight-size condition. Measured on an H100
/// (BENCHMARKS.md, "Session 13 (helper moepre)"): GEMM2 at Mixtral T = 1024 (128x128
/// tiles) 518 -> 466 us, DRAM reads 1.28 -> 1.09 GB; T = 4096 (128x256) 1531 -> 1481 us,
/// 3.55 -> 3.01 GB; the DeepSeek-V2-Lite T = 4096 layer 3 % faster; T = 1024 (96 rows per
/// expert, mostly one row tile) unchanged, so it stays on 1x1 there.
///
/// ```
/// use rcute_ops::moe::sm90_gemm2_cluster;
/// assert!(sm90_gemm2_cluster(2048, 8)); // Mixtral T = 1024, top-2: 256 rows per expert
/// assert!(!sm90_gemm2_cluster(512, 8)); // T = 256: one row tile per expert
/// assert!(sm90_gemm2_cluster(24576, 64)); // DeepSeek-V2-Lite T = 4096, top-6
/// assert!(!sm90_gemm2_cluster(6144, 64)); // T = 1024
/// ```
pub fn sm90_gemm2_cluster(entries: usize, local: usize) -> bool {
    entries >= SM90_CLUSTER_MIN_ROWS_PER_EXPERT * local.max(1)
}

/// Routed rows per local expert (on average) from which [`MoePath::Auto`] runs the SM90
/// GEMMs on the ping-pong schedule ([`sm90_pingpong`], [`sm90_fp8_pingpong`]): below it
/// an expert's one row tile is less than half filled on average, and the cooperative
/// kernels ran faster there. Measured on an H100 (BENCHMARKS.md, "Session 21 (helper moe256)"),
/// the layer with the gathering GEMM1, µs, cooperative against ping-pong, two rounds:
/// DeepSeek-V2-Lite T = 256 (24 rows per expert) 416.6 / 416.0 against 420.4 / 420.1,
/// T = 384 (36) 423.7 / 422.8 against 427.6 / 426.3; Mixtral T = 128 (32) 979.6 / 980.1
/// against 998.7 / 1000.2.
pub const SM90_PINGPONG_MIN_ROWS_PER_EXPERT: usize = 64;

/// Routed rows per local expert (on average) up to which [`MoePath::Auto`] runs both SM90
/// GEMMs on the ping-pong schedule ([`sm90_pingpong`]): at most two row tiles per expert,
/// where the weight stream bounds the layer and the cooperative kernels' epilogue, tile
/// switch and pipeline refill between tiles are not hidden. Measured on an H100, layer
/// order alternated, ping-pong faster in every round (BENCHMARKS.md, "Session 17 (helper
/// moepp)"): Mixtral (E = 8, top-2) at T = 256, 512, 1024 (64 to 256 rows per expert) bf16
/// 1.01-1.10x and FP8 1.15-1.20x faster, DeepSeek-V2-Lite (E = 64, top-6) at T = 1024 and
/// 2048 (96, 192) 1.02x and 1.46x. Above it the 128x128 ping-pong tile's lower operand reuse
/// costs more than the overlap gains: DeepSeek-V2-Lite T = 4096 (384 rows) 6-8 % slower,
/// Mixtral T = 4096 (1024) 15-22 % slower in bf16 and even in FP8.
pub const SM90_PINGPONG_MAX_ROWS_PER_EXPERT: usize = 256;

/// Whether both SM90 GEMMs of the layer (bf16 and FP8 alike) run on the ping-pong schedule
/// ([`rcute_kernel::grouped_gemm::sm90_pingpong_config`]) for `entries` routed rows over
/// `local` experts: always with [`MoePath::Sm90PingPong`], never with the other forced
/// paths, and for [`MoePath::Auto`] while the experts average at least
/// [`SM90_PINGPONG_MIN_ROWS_PER_EXPERT`] (the FP8 layer's decode shapes stay on the
/// cooperative kernels, unmeasured) and at most [`SM90_PINGPONG_MAX_ROWS_PER_EXPERT`] rows.
///
/// ```
/// use rcute_ops::moe::{sm90_pingpong, MoePath};
/// assert!(sm90_pingpong(MoePath::Auto, 2048, 8)); // Mixtral T = 1024, top-2: 256 rows per expert
/// assert!(!sm90_pingpong(MoePath::Auto, 8192, 8)); // T = 4096
/// assert!(sm90_pingpong(MoePath::Auto, 12288, 64)); // DeepSeek-V2-Lite T = 2048, top-6
/// assert!(!sm90_pingpong(MoePath::Auto, 24576, 64)); // T = 4096: 384 rows per expert
/// assert!(!sm90_pingpong(MoePath::Auto, 64, 8)); // T = 32: decode
/// assert!(!sm90_pingpong(MoePath::Auto, 1536, 64)); // DeepSeek-V2-Lite T = 256: 24 rows, cooperative
/// assert!(sm90_pingpong(MoePath::Sm90PingPong, 8192, 8));
/// assert!(!sm90_pingpong(MoePath::Sm90, 2048, 8));
/// ```
pub fn sm90_pingpong(path: MoePath, entries: usize, local: usize) -> bool {
    match path {
        MoePath::Sm90PingPong => true,
        MoePath::Auto => {
            let local = local.max(1);
            (SM90_PINGPONG_MIN_ROWS_PER_EXPERT * local..=SM90_PINGPONG_MAX_ROWS_PER_EXPERT * local).contains(&entries)
        }
        _ => false,
    }
}

/// Routed rows per local expert (on average) up to which [`MoePath::Auto`] runs the FP8
/// layer's two GEMMs on the ping-pong schedule when its experts stream from DRAM
/// ([`sm90_fp8_pingpong`]): four row tiles, twice the bf16 bound
/// ([`SM90_PINGPONG_MAX_ROWS_PER_EXPERT`]), with the e4m3 ping-pong kernels' walk in bands
/// of [`rcute_kernel::grouped_gemm::SM90_FP8_PINGPONG_WALK_BAND`] = 4 row tiles, so that
/// a wave of CTAs reads each weight tile for all four row tiles of its expert at once.
/// Measured on an H100, RCUTE_TUNING=off (BENCHMARKS.md, "Session 19 (helper moeband)"):
/// Mixtral (E = 8, top-2, 112 MiB of e4m3 `w13` per expert) T = 2048 (512 rows per expert)
/// before / after as B A A B, 1520 / 1552 -> 1440 / 1424 us (5.2-9.0 % faster), and in six
/// runs of many layers ping-pong band 4 3.3-11.2 % faster than the cooperative 128x256x128
/// kernels. DeepSeek-V2-Lite (E = 64, top-6, 5.5 MiB per expert, in L2) T = 4096 (384 rows)
/// stays cooperative: ping-pong 733-735 against 723-725 us timed alone (1.3 % slower; 2-7 %
/// faster only when timed after other layers). Above the bound (Mixtral T = 4096, 1024
/// rows) ping-pong loses at every band (band 2: 0-7 %, band 4: 10-26 % slower).
pub const SM90_FP8_PINGPONG_MAX_ROWS_PER_EXPERT: usize = 512;

/// Whether both SM90 GEMMs of the FP8 layer run on the ping-pong schedule for `entries`
/// routed rows over `local` experts of `w13_expert_bytes` each: where [`sm90_pingpong`]
/// says, and for [`MoePath::Auto`] up to [`SM90_FP8_PINGPONG_MAX_ROWS_PER_EXPERT`] rows per
/// expert when an expert's `w13` holds at least [`SM90_CLUSTER_MIN_EXPERT_BYTES`] (larger
/// than the L2: its weight tiles come from DRAM).
///
/// ```
/// use rcute_ops::moe::{sm90_fp8_pingpong, MoePath};
/// let mixtral = 2 * 14336 * 4096; // e4m3 w13 bytes of one Mixtral expert
/// assert!(sm90_fp8_pingpong(MoePath::Auto, 4096, 8, mixtral)); // T = 2048: 512 rows per expert
/// assert!(!sm90_fp8_pingpong(MoePath::Auto, 8192, 8, mixtral)); // T = 4096
/// assert!(sm90_fp8_pingpong(MoePath::Auto, 2048, 8, mixtral)); // T = 1024, as sm90_pingpong
/// assert!(!sm90_fp8_pingpong(MoePath::Sm90, 4096, 8, mixtral));
/// let deepseek = 2 * 1408 * 2048; // DeepSeek-V2-Lite: in L2
/// assert!(!sm90_fp8_pingpong(MoePath::Auto, 24576, 64, deepseek)); // T = 4096: 384 rows
/// assert!(sm90_fp8_pingpong(MoePath::Auto, 12288, 64, deepseek)); // T = 2048: 192 rows
/// ```
pub fn sm90_fp8_pingpong(path: MoePath, entries: usize, local: usize, w13_expert_bytes: usize) -> bool {
    let local = local.max(1);
    let streamed = w13_expert_bytes >= SM90_CLUSTER_MIN_EXPERT_BYTES;
    sm90_pingpong(path, entries, local)
        || (path == MoePath::Auto
            && streamed
            && (SM90_PINGPONG_MIN_ROWS_PER_EXPERT * local..=SM90_FP8_PINGPONG_MAX_ROWS_PER_EXPERT * local)
                .contains(&entries))
}

/// Time of a 128x128 GEMM2 tile over a 128x256 one ([`sm90_gemm2_tile`]): a little more
/// than half (less operand reuse per `wgmma`). Measured on an H200 (ncu, Mixtral T = 1024:
/// 445 us for 5 rounds of narrow tiles against 467 us for 3 of wide ones; BENCHMARKS.md,
/// "GEMM2's wave tail").
pub const SM90_NARROW_TILE_COST: f64 = 0.57;

/// GEMM2's tile on the SM90 family for `entries` routed rows over `local` experts, `hidden`
/// output columns and `sms` persistent CTAs: [`SM90_NARROW_TILE`] for
/// [`MoePath::Sm90Narrow`], [`SM90_TILE`] for [`MoePath::Sm90`], and for the other paths the
/// one whose waves of equal tiles (the CTAs' longest share; K = I is long) are expected to
/// take less time. The row tiles are estimated on the host (no sync with the routing): an
/// expert of `mu = entries / local` rows on average fills `mu / 128` tiles and pads half of
/// one more, at least one.
///
/// ```
/// use rcute_ops::moe::{sm90_gemm2_tile, MoePath};
/// // Mixtral T = 1024 (top-2, 8 experts, H = 4096) on 132 SMs: ~20 row tiles by 16 column
/// // tiles are 2.4 waves of 128x256 tiles (3 rounds); 128x128 tiles: 4.8 (5 rounds of half).
/// assert_eq!(sm90_gemm2_tile(MoePath::Auto, 2048, 8, 4096, 132), [128, 128, 64]);
/// // T = 4096: 8.2 waves (9 rounds) against 16.5 (17 rounds of half): the wide tile.
/// assert_eq!(sm90_gemm2_tile(MoePath::Auto, 8192, 8, 4096, 132), [128, 256, 64]);
/// assert_eq!(sm90_gemm2_tile(MoePath::Sm90, 2048, 8, 4096, 132), [128, 256, 64]);
/// ```
pub fn sm90_gemm2_tile(path: MoePath, entries: usize, local: usize, hidden: usize, sms: u32) -> [i64; 3] {
    match path {
        MoePath::Sm90 | MoePath::Sm90Cluster => return SM90_TILE,
        MoePath::Sm90Narrow | MoePath::Sm90NarrowCluster => return SM90_NARROW_TILE,
        MoePath::Auto | MoePath::Sm80 | MoePath::Sm90PingPong => {}
    }
    let row_tiles = sm90_row_tiles(entries, local);
    let rounds = |bn: i64| (row_tiles * hidden.div_ceil(bn as usize) as f64 / f64::from(sms.max(1))).ceil();
    if rounds(SM90_NARROW_TILE[1]) * SM90_NARROW_TILE_COST < rounds(SM90_TILE[1]) {
        SM90_NARROW_TILE
    } else {
        SM90_TILE
    }
}

/// The SM90 family's row tiles for `entries` routed rows over `local` experts, estimated
/// on the host (no sync with the routing): an expert of `mu = entries / local` rows on
/// average fills `mu / 128` tiles and pads half of one more, at least one.
fn sm90_row_tiles(entries: usize, local: usize) -> f64 {
    let bm = SM90_TILE[0] as f64;
    let mu = entries as f64 / local.max(1) as f64;
    let per_expert = if mu <= bm { 1.0 } else { mu / bm + 0.5 };
    (per_expert * local.max(1) as f64).round()
}

/// Time of a 128x128 GEMM1 tile (64 SwiGLU output columns) over a 128x256 one
/// ([`sm90_gemm1_tile`]) when each expert holds one row tile: half. Such a GEMM1 streams
/// each weight byte to one row tile only, so a tile takes the time of its weight bytes, and
/// the narrow tile has half of them. Measured on an H100 (ncu, BENCHMARKS.md "Session 17
/// (helper moepf)"): DeepSeek-V2-Lite T = 1024, 11 rounds of narrow tiles 298 us against 6
/// rounds of wide ones 328 us (0.50 per round).
pub const SM90_GEMM1_NARROW_COST: f64 = 0.5;

/// GEMM1's tile on the SM90 family for `entries` routed rows over `local` experts of
/// `inter` intermediate columns and `sms` persistent CTAs. On 2x1 clusters
/// ([`sm90_gemm1_cluster`]) always [`SM90_TILE`]. Otherwise, where the experts average at
/// most one row tile (128 rows), [`SM90_NARROW_TILE`] when its rounds of tiles, each
/// [`SM90_GEMM1_NARROW_COST`] of a wide one, are expected to take less time than the wide
/// tile's: the weight stream then bounds GEMM1, and the wide tile's last, partly filled
/// round is a long idle tail (DeepSeek-V2-Lite T = 1024: 704 wide tiles are 5.3 waves on
/// 132 SMs, 1408 narrow ones 10.7). From two row tiles per expert the wide tile (twice the
/// work per A row read) stays: measured at T = 4096 the narrow tile was 12 % slower.
///
/// ```
/// use rcute_ops::moe::{sm90_gemm1_tile, MoePath};
/// // DeepSeek-V2-Lite T = 1024 (top-6, 64 experts, I = 1408) on 132 SMs: 64 row tiles by
/// // 11 column tiles are 6 rounds of 128x256; 128x128: 11 rounds of half the time.
/// assert_eq!(sm90_gemm1_tile(MoePath::Auto, 6144, 64, 1408, 132), [128, 128, 64]);
/// assert_eq!(sm90_gemm1_tile(MoePath::Sm90, 6144, 64, 1408, 132), [128, 128, 64]);
/// // T = 4096: 384 rows per expert.
/// assert_eq!(sm90_gemm1_tile(MoePath::Auto, 24576, 64, 1408, 132), [128, 256, 64]);
/// // Mixtral T = 256 (64 rows per expert, I = 14336): 7 rounds either way: wide.
/// assert_eq!(sm90_gemm1_tile(MoePath::Auto, 512, 8, 14336, 132), [128, 256, 64]);
/// assert_eq!(sm90_gemm1_tile(MoePath::Sm90Cluster, 6144, 64, 1408, 132), [128, 256, 64]);
/// ```
pub fn sm90_gemm1_tile(path: MoePath, entries: usize, local: usize, inter: usize, sms: u32) -> [i64; 3] {
    let bm = SM90_TILE[0] as usize;
    if matches!(path, MoePath::Sm90Cluster | MoePath::Sm90NarrowCluster) || entries > bm * local.max(1) {
        return SM90_TILE;
    }
    let row_tiles = sm90_row_tiles(entries, local);
    // SwiGLU: a tile of BN weight rows writes BN / 2 output columns.
    let rounds = |bn: i64| (row_tiles * inter.div_ceil(bn as usize / 2) as f64 / f64::from(sms.max(1))).ceil();
    if rounds(SM90_NARROW_TILE[1]) * SM90_GEMM1_NARROW_COST < rounds(SM90_TILE[1]) {
        SM90_NARROW_TILE
    } else {
        SM90_TILE
    }
}

/// Routed rows per local expert (on average) up to which [`MoePath::Auto`] runs the
/// gathering GEMM1 ([`sm90_gather`]): one row tile, where GEMM1 streams each weight tile
/// to one row tile only and the weight stream bounds it, so the producer's `cp.async`
/// copies cost nothing (ncu, DeepSeek-V2-Lite T = 1024, ping-pong: GEMM1 282 us either
/// way) and the layer saves the row gather. Measured on an H100, the layer in CUDA graphs
/// with GEMM1's form forced on each schedule (BENCHMARKS.md, "Session 21 (helper
/// moegat2)"; µs, TMA -> gathering): DeepSeek-V2-Lite T = 1024 (96 rows per expert)
/// ping-pong 478.0 -> 453.9, cooperative 482.0 -> 459.2; Mixtral T = 256 (64 rows)
/// 1011.5 -> 1000.6 and 1000.7 -> 989.6. From two row tiles per expert, where the layer
/// turns compute-bound, ping-pong loses: DeepSeek-V2-Lite T = 2048 (192 rows) 562.5 ->
/// 608.6, T = 4096 1010.5 -> 1131.3, Mixtral T = 1024 (256 rows) 1388.5 -> 1724.9 (ncu:
/// GEMM1 903 -> 1030 us, 13 % of the warp samples stalled on dispatch against 1 %); the
/// cooperative kernels are mixed there (DeepSeek-V2-Lite T = 2048 687 -> 753, T = 4096
/// 1031 -> 995 and 1036 -> 1028), so they keep the TMA form too. With the producer's
/// shorter copy loop ("Session 21 (helper gatpp)", A B B A) ping-pong still loses there,
/// by less: T = 2048 555.1 / 554.4 -> 563.9 / 558.3, T = 4096 999.1 / 998.0 -> 1017.0 /
/// 1010.2, Mixtral T = 1024 1473.5 / 1509.5 -> 1597.6 / 1576.6.
pub const SM90_GATHER_MAX_ROWS_PER_EXPERT: usize = 128;

/// Whether GEMM1 of the bf16 / f16 SM90 layer gathers the token rows itself
/// ([`rcute_kernel::gemm_sm90::GemmSm90Config::gather_a`]: no separate row gather) for
/// `entries` routed rows over `local` experts by [`MoePath::Auto`]'s rule (also inside a
/// tuning table's SM90 entry, [`crate::Ops::run_fused_moe_sm90_with`]): while the experts
/// average at most [`SM90_GATHER_MAX_ROWS_PER_EXPERT`] rows; never on a forced path, where
/// [`crate::moe::MoeOptions::gather`] forces the gathering form instead (`Some(true)` with
/// a forced SM90 path). A clustered GEMM1 never gathers by the rule
/// ([`crate::moe::sm90_gemms`]).
///
/// ```
/// use rcute_ops::moe::{sm90_gather, MoePath};
/// assert!(sm90_gather(MoePath::Auto, 6144, 64)); // DeepSeek-V2-Lite T = 1024, top-6: 96 rows per expert
/// assert!(!sm90_gather(MoePath::Auto, 12288, 64)); // T = 2048: 192
/// assert!(sm90_gather(MoePath::Auto, 512, 8)); // Mixtral T = 256, top-2: 64
/// assert!(!sm90_gather(MoePath::Auto, 2048, 8)); // T = 1024: 256
/// assert!(!sm90_gather(MoePath::Sm90PingPong, 6144, 64));
/// ```
pub fn sm90_gather(path: MoePath, entries: usize, local: usize) -> bool {
    match path {
        MoePath::Auto => entries <= SM90_GATHER_MAX_ROWS_PER_EXPERT * local.max(1),
        _ => false,
    }
}

/// Routed rows per local expert (on average) from which [`MoePath::Auto`] walks the
/// cooperative SM90 GEMMs' tiles dynamically ([`sm90_dynamic`]): four row tiles, where the
/// static persistent walk's CTAs drift apart over its many waves and read each weight tile
/// from DRAM several times (Mixtral T = 4096, GEMM1: 5.93 GB for 1.88 GB of `w13`; the
/// dynamic walk 2.15 GB, BENCHMARKS.md "Session 26 (helper moedyn)"). Measured on an H100
/// (BENCHMARKS.md, "Session 26 (helper moedyn2)"), the layer in CUDA graphs, three
/// processes of rows static / dynamic / dynamic / static, µs, static -> dynamic (means):
/// Mixtral (E = 8, top-2) T = 4096 (1024 rows per expert) bf16 4817 -> 4716, 4832 ->
/// 4697, 4834 -> 4690 (2.1 / 2.8 / 3.0 % faster), FP8 2957 -> 2794, 2947 -> 2783,
/// 2937 -> 2790 (5.0-5.6 %); Mixtral bf16 T = 2048 (512 rows) 2611 -> 2566 (1.7 %), and on
/// an H200 (BENCHMARKS.md, "Session 27 (helper moe1k)", four processes, two calls) 2720 ->
/// 2618, 2644 -> 2592, 2676 -> 2570, 2639 -> 2590 (2.0-4.0 %, 2.9 % on the mean). Not
/// measured between 256 and 512 rows (T = 1025..2047, where Auto's bf16 layer is
/// cooperative too); DeepSeek-V2-Lite (experts in L2) T = 4096 994 -> 988 (0.6 %) stays
/// static by the weight-size condition.
pub const SM90_DYNAMIC_MIN_ROWS_PER_EXPERT: usize = 512;

/// Whether the SM90 layer's GEMMs on the cooperative schedule (bf16 / f16 and FP8 alike;
/// not the gathering GEMM1) walk their tiles dynamically
/// ([`rcute_kernel::gemm_sm90::GemmSm90Config::dynamic_walk`]) by [`MoePath::Auto`]'s rule
/// for `entries` routed rows over `local` experts of `w13_expert_bytes` each: never on a
/// forced path (where [`super::MoeOptions::dynamic`] forces it instead), and for
/// [`MoePath::Auto`] (also inside a tuning table's SM90 entry,
/// [`crate::Ops::run_fused_moe_sm90_with`]) once the experts average
/// [`SM90_DYNAMIC_MIN_ROWS_PER_EXPERT`] rows and an expert's `w13` holds at least
/// [`SM90_CLUSTER_MIN_EXPERT_BYTES`] (larger than the L2: the weight tiles come from DRAM).
///
/// ```
/// use rcute_ops::moe::{sm90_dynamic, MoePath};
/// let mixtral = 2 * 14336 * 4096 * 2; // w13 bytes of one Mixtral expert (bf16)
/// assert!(sm90_dynamic(MoePath::Auto, 8192, 8, mixtral)); // T = 4096, top-2: 1024 rows per expert
/// assert!(sm90_dynamic(MoePath::Auto, 8192, 8, mixtral / 2)); // the FP8 layer's e4m3 experts
/// assert!(sm90_dynamic(MoePath::Auto, 4096, 8, mixtral)); // T = 2048: 512
/// assert!(!sm90_dynamic(MoePath::Auto, 4088, 8, mixtral)); // T = 2044: 511
/// assert!(!sm90_dynamic(MoePath::Sm90Cluster, 8192, 8, mixtral)); // a forced path
/// let deepseek = 2 * 1408 * 2048 * 2; // DeepSeek-V2-Lite: in L2
/// assert!(!sm90_dynamic(MoePath::Auto, 98304, 64, deepseek)); // T = 16384: 1536 rows
/// ```
pub fn sm90_dynamic(path: MoePath, entries: usize, local: usize, w13_expert_bytes: usize) -> bool {
    path == MoePath::Auto
        && entries >= SM90_DYNAMIC_MIN_ROWS_PER_EXPERT * local.max(1)
        && w13_expert_bytes >= SM90_CLUSTER_MIN_EXPERT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Auto's SM90 layer below [`SM90_PINGPONG_MIN_ROWS_PER_EXPERT`]: from
    /// [`SM90_MIN_ROWS_PER_EXPERT`] rows per expert the cooperative kernels on 1x1 clusters
    /// with the gathering GEMM1 (the form measured against the SM80 family), below it the
    /// SM80 family, on an sm_90 GPU only.
    #[test]
    fn auto_runs_the_cooperative_gathering_layer_from_24_rows_per_expert() {
        let deepseek = (64, 6, 2 * 1408 * 2048 * 2);
        let mixtral = (8, 2, 2 * 14336 * 4096 * 2);
        // (layer, tokens, SM90, ping-pong)
        let cases = [
            (deepseek, 64, false, false),
            (deepseek, 192, false, false),
            (deepseek, 255, false, false), // 23.9 rows per expert
            (deepseek, 256, true, false),  // 24
            (deepseek, 384, true, false),
            (deepseek, 682, true, false), // 63.9
            (deepseek, 683, true, true),  // 64.03
            (mixtral, 64, false, false),
            (mixtral, 95, false, false),
            (mixtral, 96, true, false),
            (mixtral, 192, true, false),
            (mixtral, 256, true, true),
        ];
        for ((local, topk, w13_bytes), tokens, sm90, pingpong) in cases {
            let entries = tokens * topk;
            let what = format!("{local} experts, top-{topk}, T = {tokens}");
            assert_eq!(sm90_chosen(MoePath::Auto, (9, 0), entries, local), sm90, "{what}");
            assert!(!sm90_chosen(MoePath::Auto, (8, 0), entries, local), "{what} on an A100");
            assert!(!sm90_chosen(MoePath::Auto, (8, 9), entries, local), "{what} on an L40S");
            if !sm90 {
                continue;
            }
            assert_eq!(sm90_pingpong(MoePath::Auto, entries, local), pingpong, "{what}");
            assert!(sm90_gather(MoePath::Auto, entries, local), "{what}");
            assert!(!sm90_gemm1_cluster(MoePath::Auto, entries, local, w13_bytes), "{what}");
            assert!(!sm90_gemm2_cluster(entries, local), "{what}");
        }
        // The FP8 layer's ping-pong bound did not move with the bf16 layer's SM90 bound.
        let (local, topk, w13_e4m3) = (8, 2, 2 * 14336 * 4096);
        assert!(!sm90_fp8_pingpong(MoePath::Auto, 128 * topk, local, w13_e4m3));
        assert!(sm90_fp8_pingpong(MoePath::Auto, 256 * topk, local, w13_e4m3));
    }

    /// Auto's dynamic walk: from four row tiles per expert of experts streamed from DRAM,
    /// where the bf16 layer runs cooperative (not ping-pong, not gathering) GEMMs; the FP8
    /// layer from five (its ping-pong kernels reach four); never on forced paths.
    #[test]
    fn auto_walks_dynamically_from_512_rows_per_streamed_expert() {
        let (local, topk) = (8, 2);
        for w13 in [2 * 14336 * 4096 * 2, 2 * 14336 * 4096] {
            for (tokens, on) in [(1024, false), (2047, false), (2048, true), (4096, true), (16384, true)] {
                let entries = tokens * topk;
                assert_eq!(
                    sm90_dynamic(MoePath::Auto, entries, local, w13),
                    on,
                    "T = {tokens}, {w13} B"
                );
                if on {
                    assert!(!sm90_pingpong(MoePath::Auto, entries, local));
                    // The FP8 layer runs ping-pong up to 512 rows, which walks statically.
                    let fp8_pp = sm90_fp8_pingpong(MoePath::Auto, entries, local, w13);
                    assert_eq!(fp8_pp, tokens == 2048, "T = {tokens}, {w13} B");
                    assert!(!sm90_gather(MoePath::Auto, entries, local));
                }
                for forced in [
                    MoePath::Sm90,
                    MoePath::Sm90Cluster,
                    MoePath::Sm90PingPong,
                    MoePath::Sm80,
                ] {
                    assert!(!sm90_dynamic(forced, entries, local, w13));
                }
            }
        }
        // Experts that fit the L2 (DeepSeek-V2-Lite) stay static at any T.
        assert!(!sm90_dynamic(MoePath::Auto, 1 << 20, 64, 2 * 1408 * 2048 * 2));
        assert!(!sm90_dynamic(
            MoePath::Auto,
            16384,
            8,
            SM90_CLUSTER_MIN_EXPERT_BYTES - 1
        ));
    }
}
