//! The validated shapes of a fused MoE layer or a grouped GEMM, their kernel choice and
//! workspace layout. Pure host code: every rejection here happens before anything is
//! launched (and is tested without a GPU).

use super::path::MoePath;
use crate::error::OpsError;
use crate::gemm::{check_layout, check_vector_alignment, overlaps, range};
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef};
use rcute_kernel::grouped_gemm::finalize::MoeFinalizeArgs;
use rcute_kernel::grouped_gemm::{route, SM90_TILE};
use rcute_kernel::moe_routing::align::{align_capacity, AlignCapacity, MoeAlignArgs};
use rcute_kernel::moe_routing::align_multi;
use rcute_kernel::moe_routing::{MAX_EXPERTS, MAX_LOCAL_EXPERTS, MAX_TOPK};

use crate::tuning::MoeSpec;

/// How tokens are routed.
#[derive(Clone, Copy, Debug)]
pub enum MoeRouting<'a> {
    /// Router logits `[T, E]` (f32, bf16 or f16, row-major): softmax, top-`k` (ties to the
    /// lower expert), and with `renormalize` the `k` weights divided by their sum
    /// (Mixtral), all on the GPU.
    Logits {
        /// `[T, E]`.
        logits: MatrixRef<'a>,
        /// `k`.
        topk: usize,
        /// Renormalise the `k` weights.
        renormalize: bool,
    },
    /// The caller's routing: `topk_ids [T, k]` (int32, global expert ids; ids outside the
    /// local range are skipped: another GPU computes them) and `topk_weights [T, k]` (f32).
    Given {
        /// `[T, k]` int32.
        topk_ids: MatrixRef<'a>,
        /// `[T, k]` f32.
        topk_weights: MatrixRef<'a>,
    },
}

impl MoeRouting<'_> {
    /// `k`: experts per token (the columns of `topk_ids` for the caller's routing).
    pub fn topk(&self) -> usize {
        match self {
            MoeRouting::Logits { topk, .. } => *topk,
            MoeRouting::Given { topk_ids, .. } => topk_ids.geo().cols,
        }
    }
}

/// Options of [`crate::Ops::fused_moe`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoeOptions {
    /// Expert parallelism: the global id of the first expert whose weights this GPU holds
    /// (`w13` / `w2` hold experts `expert_offset .. expert_offset + L`, `L` their batch).
    pub expert_offset: usize,
    /// `w13`'s `2I` rows per expert hold the up projection first (rows `0..I`) and the gate
    /// second; `false` (the default) is vLLM's order, the gate first.
    pub up_first: bool,
    /// The grouped GEMM family ([`MoePath::Auto`]: the rule of [`super::sm90_chosen`]).
    pub path: MoePath,
    /// The SM90 grouped GEMMs' tile walk: row tiles of one expert per band, at most
    /// ([`rcute_kernel::gemm_sm90::GemmSm90Config::walk_band`]; `None`: the rule's,
    /// [`super::sm90_gemms`]). Forces both SM90 GEMMs' band (even on 2x1 clusters, at
    /// most [`rcute_kernel::gemm_sm90::MAX_WALK_BAND`]: else the launch is an error before
    /// any kernel runs); the SM80 family ignores it.
    pub walk_band: Option<i64>,
    /// Whether GEMM1 of the bf16 / f16 SM90 layer gathers the token rows itself
    /// ([`rcute_kernel::gemm_sm90::GemmSm90Config::gather_a`], then never on clusters) on
    /// whatever schedule and tile the path and the rules pick (`None`: the rule's,
    /// [`super::sm90_gather`]; [`super::with_gather`]). The FP8 layer and the SM80 family
    /// ignore it.
    pub gather: Option<bool>,
    /// Whether the SM90 grouped GEMMs launch one CTA (cluster) per tile of their walk
    /// ([`rcute_kernel::gemm_sm90::GroupedGrid::PerTile`]: the tiles in flight stay one
    /// window of consecutive ids) instead of a persistent grid (`None`: the rule's,
    /// [`super::sm90_grid`]). Both GEMMs of the bf16 / f16 and FP8 layers; the SM80 family
    /// ignores it.
    pub per_tile: Option<bool>,
    /// Whether the SM90 grouped GEMMs on the cooperative schedule walk their tiles
    /// dynamically ([`rcute_kernel::gemm_sm90::GemmSm90Config::dynamic_walk`]: each cluster
    /// takes its next work id from a counter in the workspace, so the persistent CTAs cannot
    /// drift apart) instead of the static persistent walk (`None`: the rule's,
    /// [`super::sm90_dynamic`]; [`super::with_dynamic`]). Both GEMMs of the bf16 / f16 and FP8 layers; ping-pong
    /// GEMMs, gathering GEMM1s and the SM80 family ignore it.
    pub dynamic: Option<bool>,
    /// Whether GEMM1 of the SM80 layer routes a decode batch itself from the logits
    /// (`rcute_kernel::grouped_gemm::route`: no routing kernel in front of it; at most 32
    /// routed entries, the tile-grid GEMM1): `Some(true)` wherever it can, `Some(false)`
    /// never, `None` as `RCUTE_MOE_ROUTE` or the rule says ([`super::gemm1_routes`]). The
    /// output is the same bit for bit either way.
    pub route: Option<bool>,
    /// Whether the alignment of the routed entries runs on several CTAs
    /// ([`rcute_kernel::moe_routing::align_multi`]: two kernels) instead of one block:
    /// `Some(true)` always (but where the top-k softmax and the alignment run as one launch,
    /// at most 32 tokens routed from logits), `Some(false)` never, `None` as the rule says
    /// ([`super::align_on_ctas`]). The output is the same bit for bit either way.
    pub align_ctas: Option<bool>,
    /// The row tile of the bf16 / f16 SM90 layer, which is also the alignment's block:
    /// `Some(64)` runs both SM90 GEMMs on the ping-pong schedule with
    /// [`rcute_kernel::grouped_gemm::SM90_ROWS64_TILE`] tiles (each consumer warpgroup a
    /// whole 64-row tile; GEMM1 in its TMA form, on 1x1 CTAs), so an expert with up to 64
    /// routed rows pads to 64 rows instead of 128; `None` or `Some(128)`: the rules' 128-row
    /// tiles. Any other value, and 64 for the FP8 layer, is an error of the validation. The
    /// SM80 family ignores it.
    pub row_tile: Option<i64>,
    /// Whether the bf16 / f16 SM90 layer's cooperative grouped GEMMs without a cluster skip
    /// the rest of the work on all-padding rows too
    /// ([`rcute_kernel::gemm_sm90::GemmSm90Config::pad_skip`], [`super::with_pad_skip`]:
    /// the all-padding warpgroup's epilogue, A's upper half box or copies): `Some(true)`
    /// where it applies, `None` / `Some(false)` not (a forced option: no rule takes it). The
    /// output is the same bit for bit. Ping-pong and clustered GEMMs, the FP8 layer and the
    /// SM80 family ignore it.
    pub pad_skip: Option<bool>,
}

/// A device buffer the MoE ops use for routing and intermediates (size:
/// [`fused_moe_workspace_bytes`] / [`grouped_gemm_workspace_bytes`]); reusable across
/// calls (a CUDA graph captures the same addresses every replay).
pub struct MoeWorkspace<'a> {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    /// The buffer whose uses `cudarc` tracks (`None` for raw parts).
    buf: Option<&'a mut (dyn crate::stream::TrackWrite + 'a)>,
}

impl std::fmt::Debug for MoeWorkspace<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoeWorkspace")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("tracked", &self.buf.is_some())
            .finish()
    }
}

impl<'a> MoeWorkspace<'a> {
    /// The whole of `buf`. (The address is read without recording a use: the op that
    /// uses the workspace holds `cudarc`'s guard for its launches; see [`crate::stream`].)
    pub fn new(buf: &'a mut cudarc::driver::CudaSlice<u8>) -> Self {
        MoeWorkspace {
            ptr: crate::stream::address(buf),
            len: buf.len(),
            buf: Some(buf),
        }
    }

    /// A workspace from raw parts.
    ///
    /// # Safety
    /// `ptr` must address `len` writable bytes valid for `'a`, used by nothing else
    /// while the op runs.
    pub unsafe fn from_raw(ptr: u64, len: usize) -> Self {
        MoeWorkspace { ptr, len, buf: None }
    }

    /// The buffer whose uses `cudarc` tracks.
    pub(crate) fn tracked_mut(&mut self) -> Option<&mut (dyn crate::stream::TrackWrite + 'a)> {
        self.buf.as_deref_mut()
    }

    /// Bytes available.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The tile of the grouped GEMMs for `entries` routed rows over `local` experts, by the
/// average rows per expert: up to 16, 16-row tiles (decode: the weights dominate); up to
/// 256, 64-row tiles; more, 128x128 tiles (prefill: tensor-core bound).
pub fn moe_tile(entries: usize, local: usize) -> ([i64; 3], [i64; 2]) {
    let local = local.max(1);
    if entries <= 16 * local {
        ([16, 128, 64], [1, 4])
    } else if entries <= 256 * local {
        ([64, 128, 32], [2, 2])
    } else {
        ([128, 128, 32], [2, 2])
    }
}

/// K splits of GEMM2 (each writes its own slab, summed in a fixed order by the finalize):
/// enough CTAs to keep every SM streaming weights when few row tiles are routed (decode),
/// about 512 CTAs for the most row tiles the routing can give, at most 8 splits and at
/// least 4 `BK` tiles of the intermediate size per split.
pub fn moe_splits(tokens: usize, topk: usize, local: usize, hidden: usize, inter: usize) -> usize {
    let (tile, _) = moe_tile(tokens.saturating_mul(topk), local);
    let Ok(cap) = align_capacity(tokens, topk, local, tile[0] as usize) else {
        return 1;
    };
    let ctas = cap.blocks.max(1) * hidden.div_ceil(tile[1] as usize).max(1);
    let by_k = (inter.div_ceil(tile[2] as usize) / 4).max(1);
    512usize.div_ceil(ctas).clamp(1, 8).min(by_k)
}

/// The alignment of a workspace and of each of its regions, in bytes.
pub(crate) const ALIGN: usize = 256;

/// `x` rounded up to a multiple of [`ALIGN`] (saturating).
pub(crate) fn round_up(x: usize) -> usize {
    x.div_ceil(ALIGN).saturating_mul(ALIGN)
}

/// A workspace laid out as regions one after another, each starting on an [`ALIGN`]-byte
/// boundary (the MoE layouts, the expert-parallel dispatch's).
pub(crate) struct Regions {
    at: usize,
    /// The workspace, as its [`OpsError::TooLarge`] names it.
    what: &'static str,
}

impl Regions {
    pub(crate) fn new(what: &'static str) -> Regions {
        Regions { at: 0, what }
    }

    /// The offset of a next region of `bytes` (`None`, or a layout past `usize`: the
    /// workspace is too large).
    pub(crate) fn take(&mut self, bytes: Option<usize>) -> Result<usize, OpsError> {
        let end = bytes
            .and_then(|b| b.checked_next_multiple_of(ALIGN))
            .and_then(|b| self.at.checked_add(b))
            .ok_or(OpsError::TooLarge { what: self.what })?;
        Ok(std::mem::replace(&mut self.at, end))
    }

    /// The bytes of the regions taken so far.
    pub(crate) fn bytes(&self) -> usize {
        self.at
    }
}

/// Byte offsets of the workspace regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkspaceLayout {
    pub cap: AlignCapacity,
    pub block_m: usize,
    pub topk_ids: usize,
    pub topk_weights: usize,
    pub counts: usize,
    pub offsets: usize,
    pub total_rows: usize,
    /// The SM90 GEMMs' dynamic-walk counters `[2]` (u32: GEMM1, GEMM2), zeroed by the
    /// alignment every call of an SM90 layer ([`MoeAlignArgs::walk_counters`], where
    /// `zero_walk`; the SM80 family's layouts leave the region untouched).
    pub walk: usize,
    /// Whether the alignment zeroes `walk` (the SM90 layouts: [`layouts`], [`fp8_layout`]).
    pub zero_walk: bool,
    pub sorted_ids: usize,
    pub block_expert: usize,
    /// The multi-CTA alignment's table `[C, L]` (int32; [`align_multi::table_bytes`]).
    pub align_table: usize,
    /// Its bytes.
    pub align_table_len: usize,
    /// GEMM1's `[rows, I]` output (fused MoE only).
    pub inter: usize,
    /// GEMM2's `[splits, T * k, H]` entry rows (fused MoE only).
    pub entry_out: usize,
    /// The token rows gathered into padded-row order `[rows, H]` (the SM90 family's GEMM1
    /// A; empty for the SM80 family, which gathers in its load stage).
    pub gathered: usize,
    /// GEMM2's K splits.
    pub splits: usize,
    pub bytes: usize,
}

impl WorkspaceLayout {
    /// The alignment's arguments (the routed `ids` counted and ordered into this layout's
    /// regions of the workspace at device address `ws`), for the alignment kernel alone
    /// and for the fused top-k + alignment.
    pub(crate) fn align_args(
        &self,
        ws: u64,
        ids: u64,
        tokens: usize,
        topk: usize,
        expert_offset: usize,
        local: usize,
    ) -> MoeAlignArgs {
        MoeAlignArgs {
            topk_ids: ids,
            counts: ws + self.counts as u64,
            offsets: ws + self.offsets as u64,
            sorted_ids: ws + self.sorted_ids as u64,
            block_expert: ws + self.block_expert as u64,
            total_rows: ws + self.total_rows as u64,
            tokens: tokens as i32,
            topk: topk as i32,
            expert_offset: expert_offset as i32,
            local_experts: local as i32,
            block_m: self.block_m as i32,
            walk_counters: if self.zero_walk { ws + self.walk as u64 } else { 0 },
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        tokens: usize,
        topk: usize,
        local: usize,
        block_m: usize,
        inter_bytes_per_row: usize,
        entry_bytes_per_row: usize,
        splits: usize,
        gather_bytes_per_row: usize,
    ) -> Result<WorkspaceLayout, OpsError> {
        let cap = align_capacity(tokens, topk, local, block_m).map_err(crate::error::boxed)?;
        let too_large = || OpsError::TooLarge { what: "MoE workspace" };
        let n = tokens.checked_mul(topk).ok_or_else(too_large)?;
        let mut r = Regions::new("MoE workspace");
        let mut take = |bytes| r.take(bytes);
        let topk_ids = take(n.checked_mul(4))?;
        let topk_weights = take(n.checked_mul(4))?;
        let counts = take(Some(local * 4))?;
        let offsets = take(Some((local + 1) * 4))?;
        let total_rows = take(Some(4))?;
        let walk = take(Some(8))?;
        let sorted_ids = take(cap.rows.checked_mul(4))?;
        let block_expert = take(cap.blocks.checked_mul(4))?;
        let align_table_len = align_multi::table_bytes(n, local);
        let align_table = take(Some(align_table_len))?;
        let inter = take(cap.rows.checked_mul(inter_bytes_per_row))?;
        let entry_out = take(n.checked_mul(entry_bytes_per_row).and_then(|b| b.checked_mul(splits)))?;
        let gathered = take(cap.rows.checked_mul(gather_bytes_per_row))?;
        Ok(WorkspaceLayout {
            cap,
            block_m,
            topk_ids,
            topk_weights,
            counts,
            offsets,
            total_rows,
            walk,
            zero_walk: false,
            sorted_ids,
            block_expert,
            align_table,
            align_table_len,
            inter,
            entry_out,
            gathered,
            splits,
            bytes: r.bytes(),
        })
    }
}

/// The grouped GEMMs' `(tile, warps)` geometries of the configuration space
/// ([`moe_space`]).
const MOE_GEOMETRIES: [([i64; 3], [i64; 2]); 5] = [
    ([16, 128, 64], [1, 4]),
    ([32, 128, 64], [1, 4]),
    ([64, 128, 32], [2, 2]),
    ([64, 128, 64], [2, 2]),
    ([128, 128, 32], [2, 2]),
];

/// GEMM2 CTAs (row tiles x column tiles x K splits) beyond which more K splits are not in
/// [`moe_space`]: splits pay only while few CTAs stream the weights, and each split adds
/// a `[T * k, H]` slab to the workspace.
const MAX_SPLIT_CTAS: usize = 2048;

/// The fused MoE layer's configurations for `tokens` tokens, top-`topk`, `local` experts,
/// hidden size `hidden` and intermediate size `inter`: the rules' choice ([`moe_tile`],
/// [`moe_splits`]) first, then row tiles up to four times the average rows per expert
/// (rounded up to 16) with GEMM2 K splits 1 to 8 that keep four k-tiles each and at most
/// 2048 GEMM2 CTAs, then each of those with a decode row tile (at most 32 rows) again with
/// the deep pipelines of [`deep_stages`], then those deep ones again with the weights
/// loaded with the L2 prefetch size (`l2`), then the decode ones on the automatic stages
/// with `l2`, then (where the rule does not route a decode batch in GEMM1) each with GEMM1's own
/// routing, then every decode tile-grid spec with the padding rows skipped (`padskip`).
/// GEMM2 on stream-K (`stream`) is not in the space: slower on
/// every decode row measured (BENCHMARKS.md, session 13); `--config` and tables take it. The tuner's candidates are the ones the generator accepts; a tuning
/// table entry in this space always fits a workspace of [`fused_moe_workspace_bytes`].
///
/// ```
/// use rcute_ops::moe::moe_space;
/// let s = moe_space(16, 2, 8, 4096, 14336);
/// assert_eq!(s[0].tile, [16, 128, 64]); // the rules' choice first
/// assert!(s.iter().any(|c| c.splits > 1));
/// assert!(s.iter().any(|c| c.skip_padding && c.stages == Some(8)));
/// // Prefill: no K splits (enough CTAs), so the workspace stays the rules' size.
/// assert!(moe_space(4096, 2, 8, 4096, 14336).iter().all(|c| c.splits == 1));
/// ```
pub fn moe_space(tokens: usize, topk: usize, local: usize, hidden: usize, inter: usize) -> Vec<MoeSpec> {
    let entries = tokens.saturating_mul(topk);
    let (tile, warps) = moe_tile(entries, local);
    let rules = MoeSpec::new(tile, warps, moe_splits(tokens, topk, local, hidden, inter) as u32);
    let mut out = vec![rules];
    let rows = entries.div_ceil(local.max(1)).next_power_of_two().max(16);
    for (tile, warps) in MOE_GEOMETRIES {
        if tile[0] as usize > 4 * rows {
            continue;
        }
        let blocks = align_capacity(tokens, topk, local, tile[0] as usize).map_or(usize::MAX, |c| c.blocks.max(1));
        let ctas = blocks.saturating_mul(hidden.div_ceil(tile[1] as usize).max(1));
        for splits in [1u32, 2, 4, 8] {
            let by_k = inter.div_ceil(tile[2] as usize) / 4 >= splits as usize;
            let by_ctas = ctas.saturating_mul(splits as usize) <= MAX_SPLIT_CTAS;
            let spec = MoeSpec::new(tile, warps, splits);
            if (splits == 1 || (by_k && by_ctas)) && !out.contains(&spec) {
                out.push(spec);
            }
        }
    }
    // deep pipelines, and the shallow one that fits one more CTA on an SM (a decode
    // grid of a few hundred CTAs in one wave: Mixtral T = 1, BENCHMARKS.md session 29,
    // helper moedec)
    let deep: Vec<MoeSpec> = out
        .iter()
        .filter(|s| s.tile[0] <= DEEP_MAX_BM)
        .flat_map(|s| {
            let stages = deep_stages(s.tile).into_iter().chain(wave_stages(s.tile));
            stages.map(|st| s.with_stages(st))
        })
        .collect();
    // the deep ones again with the weights' L2 prefetch size (`l2`), then the decode
    // tiles on the automatic stages with it (several CTAs a SM: DeepSeek-V2-Lite T = 80
    // to 156 on an H100, BENCHMARKS.md session 25, helper moeds)
    let hinted: Vec<MoeSpec> = deep.iter().map(|s| s.with_l2_prefetch()).collect();
    let shallow: Vec<MoeSpec> = out
        .iter()
        .filter(|s| s.tile[0] <= DEEP_MAX_BM)
        .map(|s| s.with_l2_prefetch())
        .collect();
    out.extend(deep);
    out.extend(hinted);
    out.extend(shallow);
    // GEMM1 routing the batch itself where the rule's weight bound (set on an H100) says
    // no: Mixtral T = 1 on an H200 (BENCHMARKS.md, session 29, lead)
    let bf16_expert = 3 * hidden * inter * 2;
    if entries <= route::MAX_ENTRIES as usize && !super::gemm1_routes_by_rule(tokens, topk, local, bf16_expert) {
        let routed: Vec<MoeSpec> = out.iter().filter(|s| !s.streamed).map(|s| s.with_route()).collect();
        out.extend(routed);
    }
    // every decode tile-grid spec again with the padding rows skipped (`padskip`: GEMM1
    // stores no padding row, GEMM2 zero-fills them; Mixtral T = 16 / 64 and
    // DeepSeek-V2-Lite T = 64 on an H200, BENCHMARKS.md session 31, helper moel2)
    let skipped: Vec<MoeSpec> = out
        .iter()
        .filter(|s| s.tile[0] <= DEEP_MAX_BM && !s.streamed)
        .map(|s| s.with_skip_padding())
        .collect();
    out.extend(skipped);
    out
}

/// Row tiles up to which [`moe_space`] also offers deep pipelines ([`deep_stages`]): the
/// decode tiles, whose CTAs (one or two per SM) stream weights and wait on them.
const DEEP_MAX_BM: i64 = 32;

/// The stage counts beyond the automatic four that [`moe_space`] offers for a decode
/// `tile`: 8, and the most that fit the SM80 mainloop's shared-memory budget (bf16 or f16
/// operands), where that is more.
///
/// ```
/// use rcute_ops::moe::deep_stages;
/// assert_eq!(deep_stages([16, 128, 64]), vec![8, 12]); // 18 KiB a stage, 227 KiB
/// assert_eq!(deep_stages([128, 128, 128]), Vec::<usize>::new()); // 64 KiB a stage
/// ```
pub fn deep_stages(tile: [i64; 3]) -> Vec<usize> {
    use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmConfig};
    let most = GroupedGemmConfig::new(rcute_atom::Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
        .with_tile(tile, [1, 1])
        .max_stages();
    let mut v: Vec<usize> = [8, most].into_iter().filter(|&s| s > 4 && s <= most).collect();
    v.dedup();
    v
}

/// The stage count below the automatic four that [`moe_space`] offers for a decode `tile`:
/// the most stages (at least 3) at which one more CTA fits the SM80 mainloop's
/// shared-memory budget than at four, so that a decode grid of a few hundred CTAs runs in
/// one wave instead of one and a fraction. Mixtral T = 1 on the H200 (GEMM1 448 CTAs of
/// 16 or 32 rows: 264 at a time at 80 KiB, 528 at 54 KiB): `moe:16x128x64,1x4,k4,s3` 185.6
/// against the table's `moe:32x128x64,1x4,k4` 188.3 / 188.6 µs in one process
/// (BENCHMARKS.md, "Session 29 (helper moedec)").
///
/// ```
/// use rcute_ops::moe::wave_stages;
/// assert_eq!(wave_stages([16, 128, 64]), Some(3)); // 18 KiB a stage: 3 -> 4 CTAs an SM
/// assert_eq!(wave_stages([32, 128, 64]), Some(3)); // 20 KiB: 2 -> 3
/// assert_eq!(wave_stages([128, 128, 128]), None); // 64 KiB: the automatic count is 3
/// ```
pub fn wave_stages(tile: [i64; 3]) -> Option<usize> {
    use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmConfig};
    let cfg = GroupedGemmConfig::new(rcute_atom::Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter);
    // the budget holds `most` stages, so `most / s` CTAs of `s` stages
    let most = cfg.with_tile(tile, [1, 1]).max_stages();
    let auto = most.min(4); // the mainloop's automatic count: as many as fit, at most 4
    (3..auto).rev().find(|&s| most / s > most / auto)
}

/// The workspace [`crate::Ops::fused_moe`] needs for `tokens` tokens, top-`topk`,
/// `local_experts` experts on this GPU, hidden size `hidden` and intermediate size
/// `inter` in `dtype` (bf16 or f16): the largest layout of any configuration of
/// [`moe_space`], so the op can run whichever one a tuning table holds.
///
/// ```
/// use rcute_ops::moe::fused_moe_workspace_bytes;
/// use rcute_ops::DType;
/// let b = fused_moe_workspace_bytes(4, 2, 8, 4096, 14336, DType::BF16).unwrap();
/// assert!(b >= 8 * 4096 * 2 + 8 * 14336 * 2);
/// assert!(fused_moe_workspace_bytes(4, 2, 0, 4096, 14336, DType::BF16).is_err());
/// ```
pub fn fused_moe_workspace_bytes(
    tokens: usize,
    topk: usize,
    local_experts: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
) -> Result<usize, OpsError> {
    let [sm80, sm90] = layouts(tokens, topk, local_experts, hidden, inter, dtype.bytes())?;
    let mut bytes = sm80.bytes.max(sm90.bytes);
    for spec in moe_space(tokens, topk, local_experts, hidden, inter) {
        bytes = bytes.max(spec_layout(tokens, topk, local_experts, hidden, inter, dtype, &spec)?.bytes);
    }
    Ok(bytes)
}

/// The workspace layout of the layer run on the SM80 family with `spec`'s row tile and
/// GEMM2 splits.
pub(crate) fn spec_layout(
    tokens: usize,
    topk: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
    spec: &MoeSpec,
) -> Result<WorkspaceLayout, OpsError> {
    let too_large = || OpsError::TooLarge { what: "MoE workspace" };
    if spec.tile.iter().chain(&spec.warps).any(|&x| x <= 0) || spec.splits == 0 {
        return Err(OpsError::Shape(format!(
            "MoE configuration {spec}: non-positive extent"
        )));
    }
    if spec.stream && spec.splits < 2 {
        return Err(OpsError::Shape(format!(
            "MoE configuration {spec}: stream-K needs at least 2 slabs (k2 or more)"
        )));
    }
    let e = dtype.bytes();
    WorkspaceLayout::new(
        tokens,
        topk,
        local,
        spec.tile[0] as usize,
        inter.checked_mul(e).ok_or_else(too_large)?,
        hidden.checked_mul(e).ok_or_else(too_large)?,
        spec.splits as usize,
        0,
    )
}

/// The workspace layouts of the two grouped GEMM families for a layer: the SM80 family's
/// (the rules' tile and GEMM2 splits) and the SM90 family's (128-row tiles, the gathered
/// token rows, no split).
pub(crate) fn layouts(
    tokens: usize,
    topk: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    e: usize,
) -> Result<[WorkspaceLayout; 2], OpsError> {
    let (tile, _) = moe_tile(tokens.saturating_mul(topk), local);
    let too_large = || OpsError::TooLarge { what: "MoE workspace" };
    let (ib, hb) = (
        inter.checked_mul(e).ok_or_else(too_large)?,
        hidden.checked_mul(e).ok_or_else(too_large)?,
    );
    let splits = moe_splits(tokens, topk, local, hidden, inter);
    Ok([
        WorkspaceLayout::new(tokens, topk, local, tile[0] as usize, ib, hb, splits, 0)?,
        sm90_layout(tokens, topk, local, ib, hb, SM90_TILE[0] as usize)?,
    ])
}

/// The bf16 / f16 SM90 layout on 64-row blocks ([`MoeOptions::row_tile`]).
fn rows64_layout(
    tokens: usize,
    topk: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
) -> Result<WorkspaceLayout, OpsError> {
    let e = dtype.bytes();
    sm90_layout(tokens, topk, local, inter * e, hidden * e, 64)
}

/// The SM90 family's workspace layout with row tiles (alignment blocks) of `block_m` rows:
/// `ib` / `hb` bytes of an intermediate / hidden row, the gathered token rows, one slab.
fn sm90_layout(
    tokens: usize,
    topk: usize,
    local: usize,
    ib: usize,
    hb: usize,
    block_m: usize,
) -> Result<WorkspaceLayout, OpsError> {
    Ok(WorkspaceLayout {
        zero_walk: true,
        ..WorkspaceLayout::new(tokens, topk, local, block_m, ib, hb, 1, hb)?
    })
}

/// The FP8 layer's workspace layout and its total bytes: the SM90 layout with a `[rows,
/// max(H, I)]` e4m3 region (`gathered`: GEMM1's quantized A, then GEMM2's) and, after it,
/// the `[rows]` f32 activation scales (at `layout.bytes`).
pub(crate) fn fp8_layout(
    tokens: usize,
    topk: usize,
    local: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
) -> Result<(WorkspaceLayout, usize), OpsError> {
    let too_large = || OpsError::TooLarge { what: "MoE workspace" };
    let e = dtype.bytes();
    let l = WorkspaceLayout {
        zero_walk: true,
        ..WorkspaceLayout::new(
            tokens,
            topk,
            local,
            rcute_kernel::grouped_gemm::SM90_FP8_TILE[0] as usize,
            inter.checked_mul(e).ok_or_else(too_large)?,
            hidden.checked_mul(e).ok_or_else(too_large)?,
            1,
            hidden.max(inter),
        )?
    };
    let scales = round_up(l.cap.rows.checked_mul(4).ok_or_else(too_large)?);
    Ok((l, l.bytes.checked_add(scales).ok_or_else(too_large)?))
}

/// The workspace [`crate::Ops::grouped_gemm`] needs (the alignment's buffers only).
pub fn grouped_gemm_workspace_bytes(tokens: usize, topk: usize, local_experts: usize) -> Result<usize, OpsError> {
    Ok(WorkspaceLayout::new(tokens, topk, local_experts, GROUPED_BLOCK_M, 0, 0, 1, 0)?.bytes)
}

/// The row tile of [`crate::Ops::grouped_gemm`].
pub(crate) const GROUPED_BLOCK_M: usize = 64;

/// A validated fused MoE problem.
#[derive(Clone, Copy, Debug)]
pub struct MoeProblem {
    /// `T`.
    pub tokens: usize,
    /// `H`.
    pub hidden: usize,
    /// `I`.
    pub inter: usize,
    /// `k`.
    pub topk: usize,
    /// `E` when routed from logits.
    pub experts: Option<usize>,
    /// `L`: the experts whose weights are here.
    pub local_experts: usize,
    /// The options the layer was validated with (the expert offset, `w13`'s row order and
    /// every forced choice of the grouped GEMMs).
    pub options: MoeOptions,
    /// The activations' and weights' type.
    pub dtype: DType,
    pub(crate) x: Geometry,
    pub(crate) w13: Geometry,
    pub(crate) w2: Geometry,
    pub(crate) y: Geometry,
    pub(crate) logits: Option<(Geometry, bool)>,
    pub(crate) ids: Option<(Geometry, Geometry)>,
    pub(crate) layout: WorkspaceLayout,
    /// The SM90 family's layout of the same workspace (used when that family runs).
    pub(crate) layout90: WorkspaceLayout,
    pub(crate) workspace: u64,
    /// Bytes of the workspace (a forced configuration's layout must fit them).
    pub(crate) workspace_len: usize,
}

impl MoeProblem {
    /// The problem on the bf16 / f16 SM90 layer's 64-row tiles ([`MoeOptions::row_tile`]):
    /// the row tile asked for, and the SM90 layout of the same workspace on 64-row blocks
    /// (the SM90 launch checks that it fits, [`crate::Ops::moe_sm90_runs`]).
    pub(crate) fn on_rows64(self) -> Result<MoeProblem, OpsError> {
        let (t, k, l, h, i) = (self.tokens, self.topk, self.local_experts, self.hidden, self.inter);
        Ok(MoeProblem {
            options: MoeOptions {
                row_tile: Some(64),
                ..self.options
            },
            layout90: rows64_layout(t, k, l, h, i, self.dtype)?,
            ..self
        })
    }

    /// The finalize's arguments over workspace layout `l` with the routed `topk_ids`: the
    /// entry rows of GEMM2's `l.splits` slabs (`[splits, T * k, H]`) summed into `y`. Both
    /// families build their finalize from this (the SM90 layouts have one slab).
    pub(crate) fn finalize_args(&self, l: &WorkspaceLayout, topk_ids: u64) -> MoeFinalizeArgs {
        MoeFinalizeArgs {
            out: self.workspace + l.entry_out as u64,
            topk_ids,
            y: self.y.ptr,
            tokens: self.tokens as i32,
            topk: self.topk as i32,
            hidden: self.hidden as i32,
            expert_offset: self.options.expert_offset as i32,
            local_experts: self.local_experts as i32,
            splits: l.splits as i32,
            split_stride: (self.tokens * self.topk * self.hidden) as i64,
        }
    }
}

fn shape(s: String) -> OpsError {
    OpsError::Shape(s)
}

/// A dense row-major matrix (batch stride checked separately): layout, bounds, and for
/// bf16 / f16 operands 16-byte vectors.
pub(crate) fn dense(op: &'static str, g: &Geometry, output: bool, vectors: bool) -> Result<(), OpsError> {
    check_layout(op, g, output)?;
    if g.col_stride != 1 {
        return Err(OpsError::Strides {
            operand: op,
            detail: "must be row-major (unit column stride)".into(),
        });
    }
    if vectors {
        check_vector_alignment(op, g)?;
    }
    Ok(())
}

fn dtype_is(op: &str, g: &Geometry, want: &[DType]) -> Result<(), OpsError> {
    if want.contains(&g.dtype) {
        Ok(())
    } else {
        Err(OpsError::DType(format!(
            "{op} is {}, expected {want:?}",
            g.dtype.name()
        )))
    }
}

/// The routing part of the validation: `(k, E, logits, ids)`.
type Routed = (
    usize,
    Option<usize>,
    Option<(Geometry, bool)>,
    Option<(Geometry, Geometry)>,
);

fn validate_routing(routing: &MoeRouting<'_>, tokens: usize) -> Result<Routed, OpsError> {
    Ok(match routing {
        MoeRouting::Logits {
            logits,
            topk,
            renormalize,
        } => {
            let g = logits.geo();
            dtype_is("router logits", &g, &[DType::F32, DType::BF16, DType::F16])?;
            dense("logits", &g, false, false)?;
            let e = g.cols;
            if g.rows != tokens || g.batch != 1 || g.row_stride != e as i64 {
                return Err(shape(format!(
                    "router logits [{}, {e}] for {tokens} tokens (dense rows)",
                    g.rows
                )));
            }
            if e == 0 || e > MAX_EXPERTS as usize {
                return Err(shape(format!("{e} experts: supported are 1..={MAX_EXPERTS}")));
            }
            if *topk == 0 || *topk > e || *topk > MAX_TOPK as usize {
                return Err(shape(format!(
                    "top-{topk} of {e} experts (1 <= k <= min(E, {MAX_TOPK}))"
                )));
            }
            (*topk, Some(e), Some((g, *renormalize)), None)
        }
        MoeRouting::Given { topk_ids, topk_weights } => {
            let (i, w) = (topk_ids.geo(), topk_weights.geo());
            dtype_is("topk_ids", &i, &[DType::S32])?;
            dtype_is("topk_weights", &w, &[DType::F32])?;
            dense("topk_ids", &i, false, false)?;
            dense("topk_weights", &w, false, false)?;
            let k = i.cols;
            if i.rows != tokens || w.rows != tokens || w.cols != k || i.batch != 1 || w.batch != 1 {
                return Err(shape(format!(
                    "topk_ids [{}, {}] and topk_weights [{}, {}] for {tokens} tokens",
                    i.rows, i.cols, w.rows, w.cols
                )));
            }
            if i.row_stride != k as i64 || w.row_stride != k as i64 {
                return Err(OpsError::Strides {
                    operand: "topk_ids",
                    detail: "routing must be dense [T, k]".into(),
                });
            }
            if k == 0 || k > MAX_TOPK as usize {
                return Err(shape(format!("top-{k}: supported are 1..={MAX_TOPK}")));
            }
            (k, None, None, Some((i, w)))
        }
    })
}

/// x bf16 / f16, y of x's type, the weights of x's type or (`fp8`) e4m3.
fn check_dtypes(xg: &Geometry, ag: &Geometry, bg: &Geometry, yg: &Geometry, fp8: bool) -> Result<(), OpsError> {
    dtype_is("x", xg, &[DType::BF16, DType::F16])?;
    let wdt = if fp8 { DType::E4M3 } else { xg.dtype };
    for (op, g, want) in [("w13", ag, wdt), ("w2", bg, wdt), ("y", yg, xg.dtype)] {
        if g.dtype != want {
            return Err(OpsError::DType(format!(
                "{op} is {}, expected {} (x is {})",
                g.dtype.name(),
                want.name(),
                xg.dtype.name()
            )));
        }
    }
    Ok(())
}

/// Validates a fused MoE layer's inputs (see [`crate::Ops::fused_moe`]).
pub fn validate_fused_moe(
    x: &MatrixRef<'_>,
    w13: &MatrixRef<'_>,
    w2: &MatrixRef<'_>,
    routing: &MoeRouting<'_>,
    opts: &MoeOptions,
    workspace: &MoeWorkspace<'_>,
    y: &MatrixMut<'_>,
) -> Result<MoeProblem, OpsError> {
    validate_moe(x, w13, w2, routing, opts, workspace, y, false)
}

/// The layer's extents `(tokens, hidden, local experts, inter)` from x, w13, w2 and y,
/// checked against each other, the 16-byte vectors and the 32-bit index range.
fn check_shapes(xg: &Geometry, ag: &Geometry, bg: &Geometry, yg: &Geometry, fp8: bool) -> Result<[usize; 4], OpsError> {
    let (tokens, hidden) = (xg.rows, xg.cols);
    if tokens == 0 || hidden == 0 || xg.batch != 1 {
        return Err(OpsError::Empty(format!("x [{tokens}, {hidden}] (batch {})", xg.batch)));
    }
    let (local, inter) = (ag.batch, ag.rows / 2);
    if local == 0 || inter == 0 {
        return Err(OpsError::Empty(format!("w13 [{local}, {}, {}]", ag.rows, ag.cols)));
    }
    if ag.rows != 2 * inter || ag.cols != hidden {
        return Err(shape(format!(
            "w13 [{local}, {}, {}]: expected [L, 2I, H = {hidden}]",
            ag.rows, ag.cols
        )));
    }
    if bg.batch != local || bg.rows != hidden || bg.cols != inter {
        return Err(shape(format!(
            "w2 [{}, {}, {}]: expected [L = {local}, H = {hidden}, I = {inter}]",
            bg.batch, bg.rows, bg.cols
        )));
    }
    if yg.rows != tokens || yg.cols != hidden || yg.batch != 1 {
        return Err(shape(format!(
            "y [{}, {}]: expected [{tokens}, {hidden}]",
            yg.rows, yg.cols
        )));
    }
    let vec = if fp8 { 16 } else { 8 };
    if !hidden.is_multiple_of(vec) || !inter.is_multiple_of(vec) {
        return Err(OpsError::Alignment {
            operand: "w13",
            detail: format!("H = {hidden} and I = {inter} must be multiples of {vec} (16-byte vectors)"),
        });
    }
    if local > MAX_LOCAL_EXPERTS as usize {
        return Err(shape(format!("{local} local experts: at most {MAX_LOCAL_EXPERTS}")));
    }
    dense("x", xg, false, true)?;
    dense("w13", ag, false, true)?;
    dense("w2", bg, false, true)?;
    dense("y", yg, true, true)?;
    if yg.row_stride != hidden as i64 {
        return Err(OpsError::Strides {
            operand: "y",
            detail: "y must be dense [T, H]".into(),
        });
    }
    Ok([tokens, hidden, local, inter])
}

/// The workspace layouts of both families (`[SM80, SM90]`, the FP8 layout in the second
/// when `fp8`) and the bytes the workspace must hold; a workspace that is too small or
/// misaligned is an error.
fn check_workspace(
    [tokens, hidden, local, inter]: [usize; 4],
    topk: usize,
    dtype: DType,
    workspace: &MoeWorkspace<'_>,
    fp8: bool,
) -> Result<([WorkspaceLayout; 2], usize), OpsError> {
    let [layout, mut layout90] = layouts(tokens, topk, local, hidden, inter, dtype.bytes())?;
    // Room for either family's layout and any SM80 configuration a table may pick (FP8: its own).
    let needed = if fp8 {
        let (l, bytes) = fp8_layout(tokens, topk, local, hidden, inter, dtype)?;
        layout90 = l;
        bytes
    } else {
        fused_moe_workspace_bytes(tokens, topk, local, hidden, inter, dtype)?
    };
    if workspace.len < needed {
        return Err(OpsError::OutOfBounds {
            operand: "workspace",
            needed,
            len: workspace.len,
        });
    }
    if !workspace.ptr.is_multiple_of(ALIGN as u64) {
        return Err(OpsError::Alignment {
            operand: "workspace",
            detail: format!("address {:#x} is not a multiple of {ALIGN} bytes", workspace.ptr),
        });
    }
    Ok(([layout, layout90], needed))
}

/// y and the first `needed` bytes of the workspace (both written) overlap none of the
/// `read` operands and not each other.
fn check_overlaps(read: &[(&str, &Geometry)], yg: &Geometry, ws: (u64, u64)) -> Result<(), OpsError> {
    let yr = range(yg)?;
    for (op, g) in read {
        let r = range(g)?;
        if overlaps(r, yr) || overlaps(r, ws) {
            return Err(OpsError::Strides {
                operand: "y",
                detail: format!("y or the workspace overlaps {op}"),
            });
        }
    }
    if overlaps(yr, ws) {
        return Err(OpsError::Strides {
            operand: "y",
            detail: "y overlaps the workspace".into(),
        });
    }
    Ok(())
}

/// [`validate_fused_moe`], or with `fp8` for e4m3 weights (x and y bf16 / f16, `H` and `I`
/// multiples of 16, the FP8 workspace layout in `layout90`: see
/// [`fp8_layout`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn validate_moe(
    x: &MatrixRef<'_>,
    w13: &MatrixRef<'_>,
    w2: &MatrixRef<'_>,
    routing: &MoeRouting<'_>,
    opts: &MoeOptions,
    workspace: &MoeWorkspace<'_>,
    y: &MatrixMut<'_>,
    fp8: bool,
) -> Result<MoeProblem, OpsError> {
    let (xg, ag, bg, yg) = (x.geo(), w13.geo(), w2.geo(), y.geo());
    check_dtypes(&xg, &ag, &bg, &yg, fp8)?;
    let extents = check_shapes(&xg, &ag, &bg, &yg, fp8)?;
    let [tokens, hidden, local, inter] = extents;
    let (topk, experts, logits, ids) = validate_routing(routing, tokens)?;
    if let Some(e) = experts.filter(|&e| opts.expert_offset + local > e) {
        return Err(shape(format!(
            "local experts [{}, {}) outside the {e} experts of the logits",
            opts.expert_offset,
            opts.expert_offset + local
        )));
    }
    if opts.expert_offset > i32::MAX as usize {
        return Err(OpsError::TooLarge { what: "expert offset" });
    }
    let entries = tokens.checked_mul(topk).filter(|n| *n < (1 << 30));
    if entries.is_none() || tokens.saturating_mul(hidden) > i32::MAX as usize {
        return Err(OpsError::TooLarge {
            what: "tokens x top-k (32-bit indices)",
        });
    }
    let ([layout, layout90], needed) = check_workspace(extents, topk, xg.dtype, workspace, fp8)?;
    let rows64 = match opts.row_tile {
        None | Some(128) => false,
        Some(64) if !fp8 => true,
        Some(r) => {
            return Err(shape(format!(
                "row tile {r}: the SM90 layer's row tiles are 64 (bf16 / f16) or 128 rows"
            )))
        }
    };
    let ws = (workspace.ptr, workspace.ptr.saturating_add(needed as u64));
    let mut read = vec![("x", &xg), ("w13", &ag), ("w2", &bg)];
    if let Some((l, _)) = &logits {
        read.push(("logits", l));
    }
    if let Some((i, w)) = &ids {
        read.extend([("topk_ids", i), ("topk_weights", w)]);
    }
    check_overlaps(&read, &yg, ws)?;
    let p = MoeProblem {
        tokens,
        hidden,
        inter,
        topk,
        experts,
        local_experts: local,
        options: *opts,
        dtype: xg.dtype,
        x: xg,
        w13: ag,
        w2: bg,
        y: yg,
        logits,
        ids,
        layout,
        layout90,
        workspace: workspace.ptr,
        workspace_len: workspace.len,
    };
    if rows64 {
        p.on_rows64()
    } else {
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At prefill sizes the tuning space adds no split slabs: the workspace is exactly the
    /// larger of the two families' layouts for the rules' configuration.
    #[test]
    fn prefill_workspace_is_the_larger_family_layout() {
        for (t, k, e, h, i) in [
            (4096, 2, 8, 4096, 14336),
            (1024, 6, 64, 2048, 1408),
            (4096, 6, 64, 2048, 1408),
        ] {
            let [sm80, sm90] = layouts(t, k, e, h, i, 2).unwrap();
            let bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
            assert_eq!(bytes, sm80.bytes.max(sm90.bytes), "{t} tokens, E={e}");
        }
    }

    /// The SM90 layout on 64-row blocks ([`MoeOptions::row_tile`]) never needs more bytes
    /// than the 128-row one the workspace size is computed from, from decode to prefill.
    #[test]
    fn the_64_row_layout_fits_the_128_row_workspace() {
        for (t, k, e, h, i) in [
            (1, 2, 8, 4096, 14336),
            (256, 2, 8, 4096, 14336),
            (4096, 2, 8, 4096, 14336),
            (1, 6, 64, 2048, 1408),
            (64, 6, 64, 2048, 1408),
            (4096, 6, 64, 2048, 1408),
            (3, 1, 256, 64, 64),
        ] {
            let rows64 = rows64_layout(t, k, e, h, i, DType::BF16).unwrap();
            let [_, rows128] = layouts(t, k, e, h, i, 2).unwrap();
            assert_eq!(rows64.block_m, 64);
            assert!(
                rows64.bytes <= rows128.bytes,
                "{t} tokens, E={e}: {} > {}",
                rows64.bytes,
                rows128.bytes
            );
        }
    }

    /// The alignment zeroes the dynamic walks' counters for the SM90 layers (bf16 and FP8
    /// layouts) and leaves the region alone for the SM80 family, whose workspace stays the
    /// same whether GEMM1 routes itself or the routing kernels run; every layout has room.
    #[test]
    fn only_the_sm90_layouts_zero_the_walk_counters() {
        let ws = 1 << 20;
        let [sm80, sm90] = layouts(4096, 2, 8, 4096, 14336, 2).unwrap();
        let (fp8, _) = fp8_layout(4096, 2, 8, 4096, 14336, DType::BF16).unwrap();
        assert_eq!(sm80.align_args(ws, 0, 4096, 2, 0, 8).walk_counters, 0);
        for l in [sm90, fp8] {
            assert_eq!(l.align_args(ws, 0, 4096, 2, 0, 8).walk_counters, ws + l.walk as u64);
        }
        for l in [sm80, sm90, fp8] {
            assert!(l.walk >= l.total_rows + 4 && l.walk + 8 <= l.sorted_ids);
        }
    }
}
