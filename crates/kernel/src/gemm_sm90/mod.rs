//! The Hopper GEMM generator: TMA loads into 128B-swizzled shared memory, a pipeline of
//! full / empty `mbarrier`s, one elected producer thread, consumer warpgroups issuing
//! `wgmma` (SS), and the TMA warp-specialized epilogue (registers -> `stmatrix` -> shared
//! memory -> TMA store, optionally C loaded by a producer warp through TMA).
//!
//! Three kernel schedules (CUTLASS's `KernelTmaWarpSpecialized*`):
//!
//! | schedule | consumers | tiles per CTA | epilogue smem |
//! |---|---|---|---|
//! | [`Sm90Schedule::WarpSpecialized`] | 1 warpgroup | one (grid = tiles) | union with the mainloop |
//! | [`Sm90Schedule::Cooperative`] | 2 warpgroups share a tile (rows split) | persistent | separate |
//! | [`Sm90Schedule::PingPong`] | 2 warpgroups alternate tiles, ordered by named barriers | persistent | separate |
//!
//! The producer warpgroup drops to 40 registers (`setmaxnreg.dec`), the consumers rise to
//! 232. The persistent schedules walk the tiles with [`crate::tile_scheduler`]; with
//! [`GemmSm90Config::stream_k`] they walk [`crate::stream_k`]'s items instead (whole
//! tiles, then k ranges of the last partial wave's tiles, reduced by each tile's last
//! arriving CTA: `stream_k.rs`; a ping-pong item, whole tile or k range, is one
//! warpgroup's).
//!
//! The main kernel is assembled from one emitter per role (`kernel.rs` composes them):
//! `producer.rs` (TMA loads of A / B and of C; `grouped_gather.rs` the gathering MoE
//! GEMM1's producer, A rows by `cp.async`), `consumer.rs` (the `wgmma` mainloop),
//! `epilogue.rs` (fusion, `stmatrix`, TMA stores), `scheduler.rs` (the tile walk) and
//! `split_k.rs` (partials and the reduction kernel, emitted in every unit but the grouped
//! and the stream-K ones, which never run split-K); `wgmma_desc.rs` plans the consumers'
//! descriptor iteration ([`Sm90Descriptors`]). They read one plan ([`Sm90Plan`],
//! built on the collective's [`Sm90Mainloop`] and [`Sm90EpiloguePlan`]) and emit loops
//! over compile-time extents with every index declared from its layout.
//!
//! The plain GEMM's tile may be wider than one `wgmma` atom along N (`BN` above 256: the
//! widest atom dividing it, e.g. 128x320 as two `m64n160k16` atoms, cuBLAS's tile at bf16
//! 4096x14336x4096 on the H200), B then loaded in several TMA boxes a stage; a consumer
//! thread holds at most [`MAX_ACCUMULATORS`] accumulators.
//!
//! Run-time arguments are [`GemmArgs`] (shared with the Ampere-class path); the launch
//! helper encodes the four tensor maps (A, B, C, D) on the host. Limits (typed errors):
//! A and B K-major (row-major A, column-major B: BLAS "TN"), D / C row-major, 16-byte
//! aligned pointers, leading dimensions and batch strides multiples of 16 bytes, and K and
//! N multiples of 16 bytes too (TMA moves whole 16-byte chunks at a tensor's contiguous
//! edge); M arbitrary. TMA zero-fills loads and clips stores past the M and N edges of a
//! tile.
//!
//! ```
//! use rcute_kernel::gemm_sm90::{generate, GemmSm90Config, Sm90Schedule};
//! let cfg = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.name, "rc_gemm_sm90_bf16_tn_128x256x64_coop_c1x1_s4_e128x32");
//! assert_eq!(g.threads, 384);
//! assert!(g.source.contains("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
//! ```

use crate::emit::{index_expr_at, plus, unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::gemm_sm80::{GemmArgs, GemmError};
use crate::launch::{Function, KernelArgs, LaunchConfig};
use crate::tile_scheduler::{RasterOrderOption, SchedulerParams, TileScheduler};
use crate::tma::encode_tiled_cached;
use rcute_atom::copy_ldsm::{ldmatrix_addr, stmatrix};
use rcute_atom::copy_tma::{
    bulk_commit_group, bulk_wait_group, bulk_wait_group_read, prefetch_tensormap, tma_load, tma_store,
};
use rcute_atom::mma_sm90::{wgmma_commit_group, wgmma_fence, wgmma_wait_group};
use rcute_atom::sync::{
    cluster_arrive, cluster_arrive_relaxed, cluster_wait, elect_one_sync, fence_mbarrier_init,
    fence_proxy_async_shared, mbarrier_arrive, mbarrier_arrive_cluster, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait_parity, named_barrier_arrive, named_barrier_sync, setmaxnreg_dec, setmaxnreg_inc,
};
use rcute_atom::tma::tma_data_type;
use rcute_atom::{
    make_gmma_desc, Element, GmmaDescriptor, GmmaSmemAtom, GmmaSwizzle, Major, MmaAtom, Snippet, TmaEncodeArgs,
};
use rcute_collective::fusion::FusionCode;
pub use rcute_collective::Fusion;
pub use rcute_collective::Node;
pub use rcute_collective::Sm90Schedule;
use rcute_collective::{
    EpilogueCopyAtom, Sm90EpilogueConfig, Sm90EpiloguePlan, Sm90Mainloop, Sm90MainloopConfig, StorageOrder,
};
pub use rcute_collective::{FusionArgs, ScaleKind};
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, Expr, Int, IntTuple, Layout, Swizzle};

/// Threads per warpgroup.
const WG: i64 = 128;
/// Shared memory an SM90 CTA may use (227 KiB) and the most stages the automatic choice
/// picks: the collective's constants.
pub use rcute_collective::{SM90_MAX_AUTO_STAGES, SM90_SMEM_CAPACITY};
/// Registers per thread of the producer warpgroup after `setmaxnreg.dec`.
pub const PRODUCER_REGS: u32 = 40;
/// Registers per thread of the consumer warpgroups after `setmaxnreg.inc`.
pub const CONSUMER_REGS: u32 = 232;
/// The grouped member on clusters ([`GROUPED_CLUSTER`]): its producer runs the cluster
/// walk and needs more than 40 registers; 56 + 2 * 224 = 504 of the 512 per thread slot.
pub const CLUSTER_PRODUCER_REGS: u32 = 56;
/// The consumers' registers beside [`CLUSTER_PRODUCER_REGS`].
pub const CLUSTER_CONSUMER_REGS: u32 = 224;

/// `[producer, consumer]` registers per thread after `setmaxnreg` for `cfg`.
fn warpgroup_regs(cfg: &GemmSm90Config) -> [u32; 2] {
    if grouped_cluster::clustered(cfg) {
        [CLUSTER_PRODUCER_REGS, CLUSTER_CONSUMER_REGS]
    } else {
        [PRODUCER_REGS, CONSUMER_REGS]
    }
}

/// Alignment slack requested on top of the layout (the kernel aligns its base to 1 KiB).
const ALIGN_SLACK: usize = 1024;

mod config;
mod consumer;
mod dynamic;
mod epilogue;
mod grouped;
mod grouped_cluster;
mod grouped_epilogue;
mod grouped_gather;
mod grouped_launch;
mod kernel;
mod launch;
mod plan;
mod producer;
mod scheduler;
mod split_k;
mod stmt;
mod stream_k;
mod wgmma_desc;

pub use config::*;
pub use grouped::{Sm90Grouped, MAX_WALK_BAND, WALK_BAND};
pub use grouped_cluster::GROUPED_CLUSTER;
pub use grouped_gather::a_chunk_offset;
pub use grouped_launch::*;
use kernel::*;
pub use launch::*;
pub use plan::*;
use scheduler::*;
pub use split_k::*;
use stmt::*;
pub use wgmma_desc::*;

/// A generated SM90 GEMM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedGemmSm90 {
    /// Kernel (and unit) name.
    pub name: String,
    /// The split-K reduction kernel's name (`<name>_splitk_reduce`), in the same unit; `None`
    /// where the unit has none: a grouped unit, and a stream-K one (it splits K itself and
    /// refuses `split_k > 1`, so nothing would launch a reduction).
    pub reduce_name: Option<String>,
    /// CUDA C++ source.
    pub source: String,
    /// Threads per CTA.
    pub threads: u32,
    /// Dynamic shared memory per CTA.
    pub smem_bytes: u32,
    /// The configuration, stages resolved.
    pub config: GemmSm90Config,
    /// The plan.
    pub plan: Sm90Plan,
}

/// The PTX snippets the kernel calls: the common barriers and copies, the cluster's
/// multicast and barriers where the cluster has several CTAs, the MMA atom, the members'.
fn snippets(cfg: &GemmSm90Config, p: &Sm90Plan) -> Vec<Snippet> {
    let [_, en] = p.epi_tile;
    let [gem, _] = p.group_tile;
    let sub_bits = gem * en * cfg.cd.bits() as i64;
    let [bm, bn, bk] = cfg.tile;
    let box_bits = (bm * bk * cfg.ab.bits() as i64).max(bn * bk * cfg.ab.bits() as i64);
    let mut snippets: Vec<Snippet> = vec![
        mbarrier_init(),
        mbarrier_arrive(),
        mbarrier_arrive_expect_tx(),
        mbarrier_wait_parity(),
        fence_mbarrier_init(),
        fence_proxy_async_shared(),
        named_barrier_sync(),
        named_barrier_arrive(),
        elect_one_sync(),
        setmaxnreg_inc(),
        setmaxnreg_dec(),
        prefetch_tensormap(),
    ];
    snippets.extend(crate::grid_dependency::snippets());
    if cfg.cluster[0] * cfg.cluster[1] > 1 {
        // Multicast loads and cluster barriers: only a cluster of several CTAs uses them.
        snippets.extend([
            tma_load(3, true, box_bits).snippet,
            mbarrier_arrive_cluster(),
            cluster_arrive(),
            cluster_arrive_relaxed(),
            cluster_wait(),
        ]);
    }
    snippets.extend([
        tma_load(3, false, box_bits).snippet,
        tma_store(3, sub_bits).snippet,
        bulk_commit_group(),
        bulk_wait_group_read(),
        bulk_wait_group(),
        stmatrix(4, false).snippet,
        ldmatrix_addr(4, false),
        wgmma_fence(),
        wgmma_commit_group(),
        wgmma_wait_group(),
        p.mma.snippet.clone(),
    ]);
    snippets.extend(member_snippets(cfg));
    snippets
}

/// The fusion's device code and `rc_visit_at` (and `rc_visit_staged_at`), which evaluate it
/// at one element of the tile: guarded by the problem's bounds where the tree reads memory
/// at the element's coordinates.
fn fusion_items(cfg: &GemmSm90Config, fusion: &FusionCode) -> [Item; 2] {
    // Only trees that index memory by the element's coordinates (broadcast vectors, aux
    // matrices) need the bounds guard; scalars (also `ScalarPtr`'s element 0) are safe at
    // any coordinate and, unguarded, are loaded once instead of under every element's
    // predicate.
    let guarded = !cfg.fusion.broadcasts().is_empty() || cfg.fusion.has_aux();
    let visit_body = if guarded {
        format!(
            "return (m < M && n < N) ? {}(p, acc, c, m, n, l) : 0.0f;",
            fusion.fn_name
        )
    } else {
        format!(
            "return {}(p, acc, c, m, n, l);  // no pointer loads: no guard needed",
            fusion.fn_name
        )
    };
    let guard = Item::Snippet {
        origin: "rcute sm90 fusion guard".into(),
        code: format!(
            "// The fusion at one element, or 0 outside the problem (broadcast loads stay in bounds).\n\
             __device__ __forceinline__ float rc_visit_at(const {s}& p, float acc, float c, int m, int n, int l, int M, int N) {{\n\
             \x20 {visit_body}\n\
             }}\n{staged}",
            s = fusion.struct_name,
            staged = match &fusion.staged {
                None => String::new(),
                Some(st) => format!(
                    "// The same with the broadcast vectors read from the tile's staging area `bc` at the\n\
                     // element's tile position (lm, ln) = (m - m0, n - n0).\n\
                     __device__ __forceinline__ float rc_visit_staged_at(const {s}& p, float acc, float c, int m, int n, int l, int M, int N, const float* bc, int lm, int ln) {{\n\
                     \x20 {body}\n\
                     }}\n",
                    s = fusion.struct_name,
                    body = if cfg.fusion.has_aux() {
                        format!("return (m < M && n < N) ? {}(p, acc, c, m, n, l, bc, lm, ln) : 0.0f;", st.visit_name)
                    } else {
                        format!(
                            "return {}(p, acc, c, m, n, l, bc, lm, ln);  // staged vectors are 0 past the edge and no aux matrix is touched: no guard (TMA stores only in-bounds elements)",
                            st.visit_name
                        )
                    },
                ),
            },
        ),
    };
    let source = Item::Snippet {
        origin: format!("rcute-collective fusion {}", cfg.fusion.name()),
        code: fusion.source(),
    };
    [source, guard]
}

/// Generate the kernel of a configuration.
pub fn generate(cfg: &GemmSm90Config) -> Result<GeneratedGemmSm90, GemmError> {
    let p = plan(cfg)?;
    let name = kernel_name(cfg, &p);
    let mut config = cfg.clone();
    config.stages = Some(p.stages);
    let [bm, bn, _] = cfg.tile;
    let snippets = snippets(cfg, &p);
    let mut items = unit_preamble(&snippets, "");
    items.push(scheduler(cfg).device_item(&name));
    if cfg.stream_k {
        items.push(crate::stream_k::device_item(&name));
    }
    items.push(Item::Snippet {
        origin: "rcute sm90 helpers".into(),
        code: helpers(cfg.cd),
    });
    if cfg.dynamic_walk {
        items.push(dynamic::helper(grouped_cluster::clustered(cfg)));
    }
    let fusion = if p.bc_floats > 0 {
        cfg.fusion.emit_staged("rc_fusion", bm, bn)
    } else {
        cfg.fusion.emit("rc_fusion")
    }
    .map_err(|e| cfg_err(format!("fusion: {e}")))?;
    items.extend(fusion_items(cfg, &fusion));
    if grouped_cluster::clustered(cfg) {
        items.push(grouped_cluster::walk_helper(bm, cfg));
    } else if cfg.grouped.is_some() {
        items.push(grouped::walk_helper(bm, cfg.walk_band));
    }
    if cfg.grouped == Some(Sm90Grouped::SwiGlu) {
        items.push(crate::grouped_gemm::silu::silu_helper());
    }
    items.push(Item::Function(kernel(&config, &p, &name, &fusion)?));
    let reduce_name = (cfg.grouped.is_none() && !cfg.stream_k).then(|| format!("{name}_splitk_reduce"));
    if reduce_name.is_some() {
        items.push(Item::Function(reduce_kernel(&config, &name, &fusion)));
    }
    let unit = Unit {
        header: unit_header(cfg, &p, &name),
        includes: vec![],
        items,
    };
    Ok(GeneratedGemmSm90 {
        reduce_name,
        name,
        source: unit.render(),
        threads: ((1 + p.consumers) * WG) as u32,
        smem_bytes: p.smem_bytes as u32,
        config,
        plan: p,
    })
}

/// The snippets of the family's members beyond the common ones: the gathering GEMM1's
/// `cp.async` atoms, the dynamic walk's and stream-K's.
fn member_snippets(cfg: &GemmSm90Config) -> Vec<Snippet> {
    let mut v = Vec::new();
    if cfg.gather_a {
        v.extend(grouped_gather::snippets());
    }
    if cfg.dynamic_walk {
        v.extend(dynamic::snippets(grouped_cluster::clustered(cfg)));
    }
    if cfg.stream_k {
        v.extend([
            rcute_atom::sync::atom_add_acq_rel_gpu(),
            rcute_atom::sync::st_release_gpu(),
            rcute_atom::sync::named_barrier_red_or(),
        ]);
    }
    v
}

/// The unit's header lines: configuration, shared-memory atoms, epilogue policy, MMA, and
/// for the grouped member its mode.
fn unit_header(cfg: &GemmSm90Config, p: &Sm90Plan, name: &str) -> Vec<String> {
    let [bm, bn, bk] = cfg.tile;
    let [em, en] = p.epi_tile;
    let mut v = vec![
        format!("{name}: generated by rcute (crates/kernel/src/gemm_sm90/); do not edit."),
        format!(
            "A {} K-major, B {} K-major, C/D {} row-major{}, tile {bm}x{bn}x{bk}, schedule {:?}, cluster {}x{}, {} stages",
            cfg.ab.ptx(),
            cfg.ab.ptx(),
            cfg.cd.ptx(),
            if cfg.with_c() { "" } else { " (no C)" },
            cfg.schedule,
            cfg.cluster[0],
            cfg.cluster[1],
            p.stages
        ),
        format!("smem atom A/B: {} (TMA SWIZZLE_128B boxes {bk}x{bm} / {bk}x{bn})", p.smem_atom),
        format!(
            "epilogue: subtile {em}x{en}, D buffers {} (StagesD {}), StagesC {}, ReuseSmemC {}, DelayTmaStore {}, {:?} swizzle",
            p.d_bufs, p.epilogue.stages_d, p.c_bufs, p.reuse_smem_c, p.delay_tma_store, p.epi_swizzle
        ),
        format!("MMA {} ({} per warpgroup along M)", p.mma.name, p.m_atoms),
    ];
    if let Some(g) = cfg.grouped {
        v.push(format!(
            "grouped (MoE), epilogue {}: A in the alignment's padded-row order, B per expert (tensor-map mode 3), registers to global (no C / D tensor maps, no split-K reduction)",
            g.tag()
        ));
    }
    if cfg.dynamic_walk {
        v.push("dynamic walk: each cluster takes its next work id from work_counter (atomicAdd) in launch order; the last end ticket's holder resets it".into());
    }
    if cfg.gather_a {
        v.push("gather: A's rows x[sorted_ids[m] / topk] copied by the producer warpgroup (cp.async, 128B swizzle, cp.async.mbarrier.arrive.noinc); B by TMA".into());
    }
    v
}
