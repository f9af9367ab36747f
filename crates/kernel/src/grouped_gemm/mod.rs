//! The grouped (MoE) GEMM family on the SM80 mainloop (`mma.sync`; runs on sm_80 and
//! newer, the H200 included): one launch multiplies every expert's routed rows by that
//! expert's weight, over the alignment of [`crate::moe_routing::align`] that lives on the
//! GPU.
//!
//! * Rows are the alignment's padded rows: row tile `tile_m` (of `BM` rows) belongs to
//!   local expert `block_expert[tile_m]`, whose weight is `B + expert * expert_stride`
//!   (`[N, K]`, K-major). The grid is sized on the host by the padded maximum
//!   ([`crate::moe_routing::align::align_capacity`]); tiles at or past the device scalar
//!   `total_rows` exit, so nothing waits for the host and the launch can be captured in a
//!   CUDA graph and replayed with new routing.
//! * [`GroupedA::Gathered`]: A rows are gathered in the load stage: padded row `m` reads
//!   token row `sorted_ids[m] / topk` of A; padding rows (`sorted_ids[m] == entries`) are
//!   zero-filled. [`GroupedA::Rows`]: A is already in padded-row order (GEMM2 reads
//!   GEMM1's output).
//! * [`GroupedEpilogue::SwiGlu`] (GEMM1): B is `w13 [2N, K]` (rows `0..N` the gate, `N..2N`
//!   the up projection, or the reverse with [`GroupedGemmArgs::up_first`]); a CTA's B tile
//!   holds `BN / 2` gate rows then the `BN / 2` up rows of the same output columns (a row
//!   gather of B), so each thread holds the gate and up accumulators of its columns and
//!   writes `D[m, n] = silu(gate) * up` (`[rows, N]`, never `[rows, 2N]`).
//! * [`GroupedEpilogue::Scatter`] (GEMM2, and [`GroupedA::Gathered`] callers): row `m`
//!   goes to `D[sorted_ids[m]]`, one row per routed (token, j) entry, scaled by
//!   `weights[sorted_ids[m]]` (the router weight; `1` when `weights` is null); padding
//!   rows are not stored.
//!
//! [`finalize`] sums each token's `k` entry rows in a fixed order (no atomics), so two
//! runs of the layer are bit-identical.
//!
//! Every kernel is a link of the layer's launch chain ([`crate::grid_dependency`]) whose
//! prelude, before the wait for its predecessor, can prefetch into L2 the first k-tiles of
//! the weight (B) tile the CTA will stream ([`GroupedGemmArgs::prefetch_bytes`];
//! [`prefetch`] says why into L2, and where GEMM1 and GEMM2 find their experts that
//! early). The prefetch is a hint: D never depends on it, so output stays bit-identical
//! and graph replays with new routing stay exact.
//!
//! The SM90 member ([`sm90_config`]) is the Hopper generator's grouped mode
//! ([`crate::gemm_sm90::Sm90Grouped`]: TMA + `wgmma`, persistent cooperative schedule,
//! the same SwiGLU / scatter epilogues from registers), with A in padded-row order
//! ([`gather`] puts GEMM1's token rows there first).
//!
//! ```
//! use rcute_kernel::grouped_gemm::{generate, GroupedA, GroupedEpilogue, GroupedGemmConfig};
//! use rcute_atom::Element;
//! let cfg = GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu);
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.name, "rc_moe_grouped_sm80_bf16_gather_swiglu_64x128x32_s4_w2x2");
//! assert!(g.source.contains("rc_mma_m16n8k16_f32_bf16_bf16_f32"));
//! // 3 tokens top-2, 4 local experts: at most 4 row tiles of 64; 256 output columns.
//! assert_eq!(g.grid(4, 256), rcute_kernel::Dim3::new(4, 4, 1));
//! ```

mod args;
mod epilogue;
pub mod finalize;
pub mod gather;
mod kernel;
mod lane_layout;
pub mod prefetch;
pub mod prepare;
pub mod quant;
pub mod route;
pub(crate) mod silu;
mod sm90;
mod stmt;
pub mod stream_k;
pub mod streamed;
mod tile;

pub use args::GroupedGemmArgs;
pub use sm90::{
    sm90_cluster_config, sm90_config, sm90_fp8_config, sm90_gather_config, sm90_grouped_config, sm90_operand_tile,
    sm90_pingpong_config, sm90_rows64_config, SM90_FP8_NARROW_TILE, SM90_FP8_PINGPONG_TILE,
    SM90_FP8_PINGPONG_WALK_BAND, SM90_FP8_TILE, SM90_NARROW_TILE, SM90_PINGPONG_TILE, SM90_ROWS64_TILE, SM90_TILE,
};

use crate::emit::{unit_preamble, Item, Unit, UINTPTR_FOR_NVRTC};
use crate::gemm_sm80::smem_offset_fn;
use crate::launch::Dim3;
use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::Element;
use rcute_collective::{Sm80Mainloop, Sm80MainloopConfig};
use thiserror::Error;

/// Where A's rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupedA {
    /// Padded row `m` reads A row `sorted_ids[m] / topk` (the token of the routed entry).
    Gathered,
    /// Padded row `m` reads A row `m`.
    Rows,
}

impl GroupedA {
    /// The A operand's part of a kernel name.
    pub fn name(self) -> &'static str {
        match self {
            GroupedA::Gathered => "gather",
            GroupedA::Rows => "rows",
        }
    }

    /// The A operand in a generated unit's header.
    pub fn describe(self) -> &'static str {
        match self {
            GroupedA::Gathered => "rows gathered by sorted entry",
            GroupedA::Rows => "padded rows",
        }
    }
}

/// What the epilogue writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupedEpilogue {
    /// `D[m, n] = silu(acc_gate[m, n]) * acc_up[m, n]` in padded-row order; B holds `2N`
    /// rows (gate then up).
    SwiGlu,
    /// `D[sorted_ids[m], n] = weight * acc[m, n]`, padding rows skipped.
    Scatter,
}

impl GroupedEpilogue {
    /// The epilogue's part of a kernel name.
    pub fn name(self) -> &'static str {
        match self {
            GroupedEpilogue::SwiGlu => "swiglu",
            GroupedEpilogue::Scatter => "scatter",
        }
    }

    /// The epilogue in a generated unit's header.
    pub fn describe(self) -> &'static str {
        match self {
            GroupedEpilogue::SwiGlu => "SwiGLU (gate rows 0..N, up rows N..2N of B)",
            GroupedEpilogue::Scatter => "router weight, scattered to entry rows",
        }
    }
}

/// A grouped GEMM configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupedGemmConfig {
    /// A, B and D element type: bf16 or f16 (f32 accumulation).
    pub element: Element,
    /// CTA tile `(BM, BN, BK)`; `BM` is the alignment's `block_m`. With
    /// [`GroupedEpilogue::SwiGlu`] a tile covers `BN / 2` output columns.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Pipeline stages (`None`: as many as fit, at most 4).
    pub stages: Option<usize>,
    /// A's rows.
    pub a: GroupedA,
    /// The epilogue.
    pub epilogue: GroupedEpilogue,
    /// Stream-K ([`GroupedEpilogue::Scatter`] only; see [`stream_k`]): a grid of
    /// [`GroupedGemmArgs::stream_ctas`] CTAs cuts this routing's (row tile, column tile,
    /// k-tile) space into equal ranges, each tile's segments written to the K-split slabs.
    pub stream_k: bool,
    /// Load B (the weights) with the `.L2::256B` prefetch size (see
    /// [`rcute_atom::copy_cp_async::cp_async_cg16_l2_256`]), where its copies are 16 bytes;
    /// the kernel name then ends in `_l2pf`. Off by default (the tables opt in: `moe:...,l2`).
    /// On the H100 the hint cut Mixtral's decode layers (T = 1, 16) by 3 % and
    /// DeepSeek-V2-Lite T = 64 by 2 %, and cost DeepSeek T = 1 1.6 % (BENCHMARKS.md,
    /// session 13, helper moedec2).
    pub b_l2_prefetch: bool,
    /// The register-streamed decode form ([`streamed`]): no shared-memory stage, the
    /// weights loaded straight into a ring of registers as swap-AB A fragments. Its tile
    /// is `[BM, 16 W, 32]` with warps `[1, W]`, `stages` the ring's chunks; kernel names
    /// `rc_moe_grouped_reg_...`.
    pub streamed: bool,
    /// With [`GroupedGemmConfig::streamed`]: each warp starts its K range at its own chunk
    /// (`_rot`), so a wave's warps do not read the same offset of their rows at once.
    pub k_rotate: bool,
    /// With [`GroupedGemmConfig::streamed`]: B is the prepared expert weight of
    /// [`rcute_collective::moe_prepared`] (`_prep`; [`prepare`] writes it), `ldb` its block
    /// stride and `up_first` unused (the prepared weight pairs gate and up rows itself);
    /// the kernel prefetches each warp's first chunks into L2 before its wait
    /// ([`GroupedGemmArgs::prefetch_bytes`]).
    pub prepared: bool,
    /// With [`GroupedGemmConfig::streamed`]: the weight chunks go through each lane's own
    /// slots of a shared `cp.async` ring waited by count
    /// ([`rcute_collective::moe_streamed::MoeStreamed::with_shared_ring`], `_sring`)
    /// instead of a ring of registers.
    pub shared_ring: bool,
    /// GEMM1 ([`GroupedA::Gathered`], [`GroupedEpilogue::SwiGlu`], the tile grid) routing
    /// its decode batch itself from router logits of this kind ([`route`]; kernel names
    /// end in `_route_<logits>_e<experts>`): no routing kernel in front of it.
    pub route: Option<route::RouteLogits>,
    /// The tile grid skips the alignment's padding rows (`entries` in `sorted_ids`): the
    /// SwiGLU GEMM1 stores none of them (a self-routing GEMM1 still stores them all), and
    /// GEMM2 ([`GroupedA::Rows`]) zero-fills them instead of loading them. Kernel names end
    /// in `_ps`; not with stream-K or the streamed form. GEMM2 with it needs nothing of
    /// the padding rows, so it pairs with a GEMM1 with or without it. Off by default; the
    /// H200 table's Mixtral m = 16 / 64 and DeepSeek-V2-Lite m = 64 entries take it
    /// (`moe:...,padskip`): on the H200 those layers lost 0.6-0.7 % (Mixtral T = 64),
    /// 1.3-1.7 % (T = 16) and 1.1-1.4 % (DeepSeek-V2-Lite T = 64) of their time in two
    /// calls (BENCHMARKS.md, "Session 31 (helper moel2)" and "Session 31 (lead)").
    pub skip_padding: bool,
}

/// Whether the alignment's row `row` (a C expression) holds a routed entry rather than
/// padding ([`GroupedGemmConfig::skip_padding`]): its `sorted_ids` value is below `entries`.
/// GEMM1's store guard and GEMM2's load predicate (`epilogue.rs`, `kernel.rs`).
fn routed_row(row: &str) -> String {
    format!("__ldg(sorted_ids + {row}) < entries")
}

impl GroupedGemmConfig {
    /// The default tile `64x128x32` with 2x2 warps and automatic stages.
    pub fn new(element: Element, a: GroupedA, epilogue: GroupedEpilogue) -> Self {
        GroupedGemmConfig {
            element,
            tile: [64, 128, 32],
            warps: [2, 2],
            stages: None,
            a,
            epilogue,
            stream_k: false,
            b_l2_prefetch: false,
            streamed: false,
            k_rotate: false,
            prepared: false,
            shared_ring: false,
            route: None,
            skip_padding: false,
        }
    }

    /// The same configuration skipping the padding rows when `on`
    /// ([`GroupedGemmConfig::skip_padding`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::grouped_gemm::{generate, GroupedA, GroupedEpilogue, GroupedGemmConfig};
    /// let c = GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter)
    ///     .with_tile([32, 128, 64], [1, 4])
    ///     .with_skip_padding(true);
    /// let g = generate(&c).unwrap();
    /// assert_eq!(g.name, "rc_moe_grouped_sm80_bf16_rows_scatter_32x128x64_s4_w1x4_ps");
    /// assert!(g.source.contains("__ldg(sorted_ids + m0 + a_mn + p * 16) < entries"));
    /// assert!(generate(&c.with_stream_k(true)).is_err());
    /// ```
    pub fn with_skip_padding(mut self, on: bool) -> Self {
        self.skip_padding = on;
        self
    }

    /// The same configuration routing its tokens itself from logits `r` (`None`: from the
    /// alignment): see [`GroupedGemmConfig::route`].
    pub fn with_route(mut self, r: Option<route::RouteLogits>) -> Self {
        self.route = r;
        self
    }

    /// The same configuration as the register-streamed form ([`streamed`]) on `bm`
    /// routed rows per tile, `warps` warps of 16 weight rows, chunks of `chunk_k` (32, 64,
    /// 128 or 256), `ring` chunks in flight, the K order rotated per warp when `rotate`.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::grouped_gemm::{generate, GroupedA, GroupedEpilogue, GroupedGemmConfig};
    /// let c = GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu)
    ///     .with_streamed(16, 8, 128, 2, false);
    /// assert_eq!((c.tile, c.warps), ([16, 128, 128], [1, 8]));
    /// let g = generate(&c).unwrap();
    /// assert_eq!(g.name, "rc_moe_grouped_reg_bf16_gather_swiglu_16x128x128_r2_w8");
    /// assert_eq!((g.threads, g.smem_bytes), (256, 0));
    /// assert!(g.source.contains("ld.global.nc.L1::no_allocate.v4"));
    /// ```
    pub fn with_streamed(mut self, bm: i64, warps: i64, chunk_k: i64, ring: usize, rotate: bool) -> Self {
        self.tile = [bm, streamed::WARP_ROWS * warps, chunk_k];
        self.warps = [1, warps];
        self.stages = Some(ring);
        self.streamed = true;
        self.k_rotate = rotate;
        self
    }

    /// The same configuration with the weights' shared ring (`on`; the streamed form
    /// only): see [`GroupedGemmConfig::shared_ring`].
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::grouped_gemm::{generate, GroupedA, GroupedEpilogue, GroupedGemmConfig};
    /// let c = GroupedGemmConfig::new(Element::BF16, GroupedA::Gathered, GroupedEpilogue::SwiGlu)
    ///     .with_streamed(16, 8, 128, 3, false)
    ///     .with_prepared(true)
    ///     .with_shared_ring(true);
    /// let g = generate(&c).unwrap();
    /// assert_eq!(g.name, "rc_moe_grouped_reg_bf16_gather_swiglu_16x128x128_r3_w8_prep_sring");
    /// assert_eq!((g.threads, g.smem_bytes), (256, 3 * 8 * 256 * 16));
    /// assert!(g.source.contains("cp.async.cg.shared.global") && g.source.contains("cp.async.wait_group"));
    /// ```
    pub fn with_shared_ring(mut self, on: bool) -> Self {
        self.shared_ring = on;
        self
    }

    /// The same configuration reading the prepared expert weight (`on`; the streamed form
    /// only): see [`GroupedGemmConfig::prepared`].
    pub fn with_prepared(mut self, on: bool) -> Self {
        self.prepared = on;
        self
    }

    /// The same configuration with another tile and warp arrangement.
    pub fn with_tile(mut self, tile: [i64; 3], warps: [i64; 2]) -> Self {
        self.tile = tile;
        self.warps = warps;
        self
    }

    /// The same configuration with `stages` pipeline stages (`None`: as many as fit, at
    /// most 4).
    pub fn with_stages(mut self, stages: Option<usize>) -> Self {
        self.stages = stages;
        self
    }

    /// The same configuration with stream-K on or off ([`stream_k`]).
    pub fn with_stream_k(mut self, on: bool) -> Self {
        self.stream_k = on;
        self
    }

    /// The same configuration with B's `.L2::256B` prefetch size on or off.
    pub fn with_b_l2_prefetch(mut self, on: bool) -> Self {
        self.b_l2_prefetch = on;
        self
    }

    /// The most pipeline stages of this tile that fit the SM80 mainloop's shared-memory
    /// budget ([`rcute_collective::DEFAULT_SMEM_BUDGET`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmConfig};
    /// let c = GroupedGemmConfig::new(Element::BF16, GroupedA::Rows, GroupedEpilogue::Scatter);
    /// assert_eq!(c.with_tile([16, 128, 64], [1, 4]).max_stages(), 12); // 18 KiB a stage
    /// ```
    pub fn max_stages(&self) -> usize {
        let [bm, bn, bk] = self.tile;
        let stage = ((bm + bn) * bk).max(1) as usize * self.element.bytes() as usize;
        rcute_collective::DEFAULT_SMEM_BUDGET / stage
    }

    /// The mainloop's configuration: both operands K-major.
    pub fn mainloop(&self) -> Sm80MainloopConfig {
        let mut m = Sm80MainloopConfig::bf16_tn(self.tile, self.warps);
        m.a = self.element;
        m.b = self.element;
        m.stages = self.stages;
        m
    }

    /// Output columns of one CTA tile: `BN`, or `BN / 2` with SwiGLU.
    pub fn tile_n_out(&self) -> i64 {
        match self.epilogue {
            GroupedEpilogue::SwiGlu => self.tile[1] / 2,
            GroupedEpilogue::Scatter => self.tile[1],
        }
    }
}

/// Why a grouped GEMM cannot be generated or launched.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum GroupedGemmError {
    /// The configuration has no kernel.
    #[error("grouped GEMM configuration: {0}")]
    Config(String),
    /// The mainloop builder rejected the tile.
    #[error(transparent)]
    Plan(#[from] rcute_collective::PlanError),
    /// Run-time arguments the kernel cannot take.
    #[error("grouped GEMM arguments: {0}")]
    Args(String),
    /// A launch failed.
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
}

/// A generated grouped GEMM.
#[derive(Clone, Debug)]
pub struct GeneratedGroupedGemm {
    /// Kernel (and unit) name, e.g. `rc_moe_grouped_sm80_bf16_gather_swiglu_64x128x32_s4_w2x2`.
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
    /// Threads per CTA.
    pub threads: u32,
    /// Dynamic shared memory per CTA.
    pub smem_bytes: u32,
    /// The configuration, with the stage count filled in.
    pub config: GroupedGemmConfig,
}

impl GeneratedGroupedGemm {
    /// The grid for `blocks` row tiles (the alignment's capacity) and `n` output columns:
    /// `(blocks, ceil(n / tile_n_out))`.
    pub fn grid(&self, blocks: u32, n: u32) -> Dim3 {
        let bn = self.config.tile_n_out() as u32;
        Dim3::new(blocks, n.div_ceil(bn), 1)
    }
}

/// The kernel name of a configuration with `stages` stages.
pub fn kernel_name(cfg: &GroupedGemmConfig, stages: usize) -> String {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let (a, ep) = (cfg.a.name(), cfg.epilogue.name());
    let sk = if cfg.stream_k { "_streamk" } else { "" };
    let l2 = if cfg.b_l2_prefetch { "_l2pf" } else { "" };
    let route = cfg.route.map(|r| r.name()).unwrap_or_default();
    let ps = if cfg.skip_padding { "_ps" } else { "" };
    format!(
        "rc_moe_grouped_sm80_{}_{a}_{ep}_{bm}x{bn}x{bk}_s{stages}_w{wm}x{wn}{sk}{l2}{route}{ps}",
        cfg.element.ptx()
    )
}

/// Generate the kernel of a configuration.
pub fn generate(cfg: &GroupedGemmConfig) -> Result<GeneratedGroupedGemm, GroupedGemmError> {
    if !matches!(cfg.element, Element::BF16 | Element::F16) {
        return Err(GroupedGemmError::Config(format!(
            "element {} (bf16 or f16)",
            cfg.element
        )));
    }
    if cfg.route.is_some()
        && (cfg.streamed || cfg.stream_k || cfg.a != GroupedA::Gathered || cfg.epilogue != GroupedEpilogue::SwiGlu)
    {
        return Err(GroupedGemmError::Config(
            "only GEMM1 of the tile grid (gathered rows, SwiGLU, not streamed) routes itself".into(),
        ));
    }
    if cfg.skip_padding && (cfg.streamed || cfg.stream_k) {
        return Err(GroupedGemmError::Config(
            "the padding-row skip is an option of the tile grid without stream-K".into(),
        ));
    }
    if cfg.streamed {
        return streamed::generate(cfg);
    }
    if cfg.k_rotate || cfg.prepared || cfg.shared_ring {
        return Err(GroupedGemmError::Config(
            "K rotation, the prepared weight and the shared ring are options of the streamed form".into(),
        ));
    }
    if cfg.stream_k && (cfg.epilogue != GroupedEpilogue::Scatter || cfg.a != GroupedA::Rows) {
        return Err(GroupedGemmError::Config(
            "stream-K needs padded A rows and the scatter epilogue (partial sums go to K-split slabs)".into(),
        ));
    }
    let mut plan = Sm80Mainloop::new(&cfg.mainloop())?;
    // the weights stream once, 128 bytes of each B row per k-tile of 64: a miss fetches
    // the row's next 128 bytes into L2 too (`.L2::256B`), for the next k-tile
    let wide_b = cfg.b_l2_prefetch && plan.g2s_b.copy_bytes == 16;
    if wide_b {
        plan.g2s_b.tiled.atom.op = rcute_atom::copy_cp_async::cp_async_cg16_l2_256();
    }
    if cfg.epilogue == GroupedEpilogue::SwiGlu {
        epilogue::check_swiglu_pairs(&plan)?;
    }
    let name = kernel_name(cfg, plan.stages);
    let no = |what: &str| GroupedGemmError::Config(format!("no {what} atom"));
    let cp = cp_async(CacheOp::CacheGlobal, 16, true).ok_or_else(|| no("cp.async"))?;
    let mut snippets = vec![cp.snippet, cp_async_commit_group(), cp_async_wait_group()];
    if wide_b {
        snippets.push(plan.g2s_b.tiled.atom.op.snippet.clone());
    }
    snippets.push(plan.s2r_a.snippet.clone());
    if plan.s2r_b.snippet.name != plan.s2r_a.snippet.name {
        snippets.push(plan.s2r_b.snippet.clone());
    }
    snippets.push(plan.mma_atom.snippet.clone());
    snippets.extend(crate::grid_dependency::snippets());
    snippets.push(rcute_atom::prefetch::prefetch_l2());
    let mut items = unit_preamble(&snippets, UINTPTR_FOR_NVRTC);
    let smem_err = |e: crate::gemm_sm80::GemmError| GroupedGemmError::Config(e.to_string());
    items.push(Item::Function(
        smem_offset_fn(&format!("{name}_sA"), &plan.smem_layout_a, "A").map_err(smem_err)?,
    ));
    items.push(Item::Function(
        smem_offset_fn(&format!("{name}_sB"), &plan.smem_layout_b, "B").map_err(smem_err)?,
    ));
    if cfg.epilogue == GroupedEpilogue::SwiGlu {
        items.push(silu::silu_helper());
    }
    let routing = match &cfg.route {
        Some(r) => Some(route::cta_route(cfg, r).map_err(|e| GroupedGemmError::Config(e.to_string()))?),
        None => None,
    };
    items.push(Item::Function(crate::grid_dependency::chain_link_with_prelude(
        prefetch::prelude(cfg, &plan),
        kernel::grouped_kernel(cfg, &plan, &name, routing),
    )));
    let [bm, bn, bk] = cfg.tile;
    let unit = Unit {
        header: vec![
            format!("{name}: generated by rcute (crates/kernel/src/grouped_gemm); do not edit."),
            format!(
                "grouped (MoE) GEMM, sm_80 class (cp.async, mma.sync): A {} K-major ({}), B {} K-major per expert, epilogue {}",
                cfg.element.ptx(),
                cfg.a.describe(),
                cfg.element.ptx(),
                cfg.epilogue.describe()
            ),
            format!(
                "tile {bm}x{bn}x{bk}, warps {}x{}, {} stages{}",
                cfg.warps[0],
                cfg.warps[1],
                plan.stages,
                if cfg.stream_k { ", stream-K over the K-split slabs" } else { "" }
            ),
            format!("smem atoms: A {} | B {}", plan.smem_atom_a, plan.smem_atom_b),
        ],
        includes: vec![],
        items,
    };
    let mut config = cfg.clone();
    config.stages = Some(plan.stages);
    Ok(GeneratedGroupedGemm {
        name,
        source: unit.render(),
        threads: plan.threads as u32,
        smem_bytes: plan.smem_bytes as u32,
        config,
    })
}
