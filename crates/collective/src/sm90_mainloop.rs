//! The Hopper (SM90) TMA + `wgmma` warp-specialized mainloop (CUTLASS's
//! `MainloopSm90TmaGmmaWarpSpecialized` as its `CollectiveBuilder` configures it), as a
//! plan: schedule and warpgroups, the `wgmma` atom, GMMA shared-memory atoms and layouts,
//! TMA boxes, pipeline depth and the kernel's shared-memory budget.
//!
//! Conventions as in [`crate::sm80_mainloop`]: A is `(M,K)`, B is `(N,K)`; an operand is
//! [`Major::K`] when K is contiguous.
//!
//! # Schedules
//!
//! | [`Sm90Schedule`] | consumer warpgroups | threads | each consumer computes | epilogue smem |
//! |---|---|---|---|---|
//! | `WarpSpecialized` | 1 | 256 | the `BM x BN` tile | union with the mainloop |
//! | `Cooperative` | 2 | 384 | half the tile, `BM/2 x BN` | separate |
//! | `PingPong` | 2 | 384 | alternate whole tiles, `BM x BN` | separate |
//!
//! One producer warpgroup issues the TMA loads. The non-persistent warp-specialized kernel
//! runs its epilogue only after the last k-tile, so its epilogue buffers share storage
//! with the A/B stages (`union { mainloop; epilogue }`, the kernel takes the larger of the
//! two). The persistent cooperative and ping-pong kernels load C for one tile while the
//! mainloop of the next tile runs, so the epilogue needs its own storage: CUTLASS then
//! sizes the mainloop with `StageCountAutoCarveout<sizeof(epilogue SharedStorage)>`, and
//! so does this plan (the epilogue schedule only decides whether that storage is empty).
//!
//! # Stage count
//!
//! Explicit `stages` are checked against the capacity. Automatic stages are the most that
//! fit, at most [`SM90_MAX_AUTO_STAGES`] and at least 2: with `stage = (BM + BN) * BK *
//! bytes` and 16 bytes of full/empty mbarriers per stage,
//! `stages = (capacity - carve-out - reserve) / (stage + 16)` where the carve-out is the
//! epilogue's buffers and barriers for cooperative / ping-pong and 0 for warp-specialized
//! (its union only matters when the epilogue is larger than all stages together), and the
//! reserve is [`SM90_KERNEL_RESERVE_BYTES`]. Every buffer starts on a 1024-byte boundary
//! (a 128B-swizzle atom), so the formula holds exactly when the buffers are multiples of
//! 1024 bytes; in general the plan takes the largest count whose total fits.
//!
//! # Shared-memory map (`smem_bytes`)
//!
//! `[A stages | B stages]` (each 1024-aligned), then the epilogue's C/D buffers (at offset
//! 0 in a union, after B otherwise), then the mainloop's mbarriers, the epilogue's C load
//! barriers and the kernel reserve; the total is rounded up to 128 bytes.
//!
//! # TMA boxes
//!
//! A box is `(inner, outer)` elements with `inner` the swizzle width (128 bytes for 128B
//! swizzle, 16 bytes for interleave) and `outer` the rest of the operand tile's other
//! extent up to TMA's 256 limit; a K-major tile with `BK` wider than the swizzle, or an
//! MN-major tile with `BM` wider than it, takes several boxes per stage
//! (`tma_boxes_per_stage_*`; CuTe folds them into one higher-rank box, one instruction).
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::*;
//! let epi = Sm90EpiloguePlan::new(&Sm90EpilogueConfig::new(
//!     [128, 256, 64], Sm90Schedule::Cooperative, None, Element::BF16, StorageOrder::RowMajor)).unwrap();
//! let p = Sm90Mainloop::new(&Sm90MainloopConfig::bf16_tn([128, 256, 64], Sm90Schedule::Cooperative), &epi).unwrap();
//! assert_eq!((p.threads, p.wg_tile, p.stage_bytes, p.stages), (384, [64, 256], 49152, 4));
//! assert_eq!(p.mma_atom.name, "SM90_64x256x16_F32BF16BF16_SS<K,K>");
//! assert_eq!(p.smem_atom_a.to_string(), "Sw<3,3,3> o (8,64):(64,1)");
//! assert_eq!((p.tma_box_a, p.tma_box_b, p.tx_bytes), ([64, 128], [64, 256], 49152));
//! ```

pub use crate::gmma_smem::{gmma_tma_swizzle, ss_smem_selector};
use crate::sm90_epilogue::{check_mma_nesting, Sm90EpilogueError, Sm90EpiloguePlan};
pub use crate::sm90_schedule::Sm90Schedule;
use rcute_atom::mma_sm90::{valid_n, wgmma};
use rcute_atom::tma::TmaSwizzle;
use rcute_atom::{Element, GmmaSmemAtom, GmmaSource, Major, MmaAtom};
use rcute_layout::{tuple, AnyLayout};

/// Opt-in shared memory per CTA of an SM90 GPU: 227 KiB (CUTLASS's
/// `sm90_smem_capacity_bytes`).
pub const SM90_SMEM_CAPACITY: usize = 232448;

/// The most stages the automatic choice picks.
pub const SM90_MAX_AUTO_STAGES: usize = 8;

/// Shared bytes kept for the kernel's own barriers (the load-warp order barrier, the
/// ping-pong math order barrier) and their alignment.
pub const SM90_KERNEL_RESERVE_BYTES: usize = 128;

/// Alignment of every A, B and epilogue buffer (one 128B-swizzle atom).
pub const SM90_BUFFER_ALIGN: usize = 1024;

/// Elements per swizzle span of an atom (the TMA box's inner extent).
fn atom_width(atom: &GmmaSmemAtom) -> i64 {
    atom.mode.span_bytes() * 8 / atom.elem.bits() as i64
}

/// The input of the SM90 mainloop builder.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sm90MainloopConfig {
    /// Element type of A.
    pub a: Element,
    /// Element type of B.
    pub b: Element,
    /// Accumulator type.
    pub acc: Element,
    /// Contiguous mode of A.
    pub a_major: Major,
    /// Contiguous mode of B.
    pub b_major: Major,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Cluster shape `(CM, CN)` in CTAs.
    pub cluster: [i64; 2],
    /// Kernel schedule.
    pub schedule: Sm90Schedule,
    /// Pipeline depth; `None` picks as many as fit (at most [`SM90_MAX_AUTO_STAGES`]).
    pub stages: Option<usize>,
    /// Shared memory per CTA, in bytes.
    pub smem_capacity: usize,
}

impl Sm90MainloopConfig {
    /// bf16 x bf16 -> f32, both operands K-major ("TN"), cluster `1x1`, automatic stages,
    /// [`SM90_SMEM_CAPACITY`].
    pub fn bf16_tn(tile: [i64; 3], schedule: Sm90Schedule) -> Sm90MainloopConfig {
        Sm90MainloopConfig {
            a: Element::BF16,
            b: Element::BF16,
            acc: Element::F32,
            a_major: Major::K,
            b_major: Major::K,
            tile,
            cluster: [1, 1],
            schedule,
            stages: None,
            smem_capacity: SM90_SMEM_CAPACITY,
        }
    }
}

/// Why an SM90 mainloop configuration has no plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Sm90PlanError {
    /// The element types are not a supported `wgmma` combination.
    #[error("unsupported types A={a}, B={b}, accumulator={acc}: the SM90 mainloop takes bf16 or f16 (one type) with f32, s8/u8 with s32, or e4m3/e5m2 with f32 accumulation")]
    Types {
        /// A's type.
        a: Element,
        /// B's type.
        b: Element,
        /// Accumulator type.
        acc: Element,
    },
    /// 8-bit operands must be K-major.
    #[error("8-bit operands ({elem}) must be K-major for wgmma (A is {a_major:?}, B is {b_major:?})")]
    Major {
        /// The 8-bit type.
        elem: Element,
        /// A's major mode.
        a_major: Major,
        /// B's major mode.
        b_major: Major,
    },
    /// The tile does not divide into warpgroups, `wgmma` atoms or smem atoms.
    #[error("tile {tile:?} ({schedule:?}): {reason}")]
    Tile {
        /// `(BM, BN, BK)`.
        tile: [i64; 3],
        /// The schedule.
        schedule: Sm90Schedule,
        /// What does not divide.
        reason: String,
    },
    /// Unsupported cluster shape.
    #[error("cluster {cluster:?}: {reason}")]
    Cluster {
        /// `(CM, CN)`.
        cluster: [i64; 2],
        /// Why.
        reason: String,
    },
    /// Fewer than two stages.
    #[error("{stages} stage(s): the TMA pipeline needs at least 2")]
    Stages {
        /// Requested stages.
        stages: usize,
    },
    /// The stages do not fit the shared memory.
    #[error("{stages} stage(s) of {stage_bytes} bytes with {epilogue} epilogue bytes need {needed} bytes, more than the capacity of {capacity}")]
    SmemCapacity {
        /// Stages requested (or the 2 the automatic choice needs at least).
        stages: usize,
        /// A and B bytes per stage.
        stage_bytes: usize,
        /// The epilogue's shared bytes.
        epilogue: usize,
        /// The kernel's total at that stage count.
        needed: usize,
        /// The capacity.
        capacity: usize,
    },
    /// The epilogue plan was built for another tile or schedule.
    #[error("epilogue plan does not match the mainloop: {0}")]
    EpilogueMismatch(String),
    /// The epilogue's subtile does not fit the MMA atom this mainloop picks.
    #[error("epilogue: {0}")]
    Epilogue(Sm90EpilogueError),
    /// The layout algebra refused a step.
    #[error("layout algebra: {0}")]
    Layout(String),
}

/// The plan of the SM90 TMA + `wgmma` mainloop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90Mainloop {
    /// The configuration (with `stages` resolved).
    pub config: Sm90MainloopConfig,
    /// Consumer (MMA) warpgroups: 1 warp-specialized, 2 cooperative / ping-pong.
    pub consumer_warpgroups: usize,
    /// Threads per CTA: `128 * (1 + consumer_warpgroups)`.
    pub threads: usize,
    /// The tile one consumer warpgroup computes: `(BM/2, BN)` cooperative, `(BM, BN)`
    /// otherwise.
    pub wg_tile: [i64; 2],
    /// The `wgmma` atom (SS, N the largest PTX-valid N dividing `BN`).
    pub mma_atom: MmaAtom,
    /// M atoms per warpgroup (`wg_tile[0] / 64`).
    pub m_atoms_per_wg: i64,
    /// N atoms per warpgroup (`BN / atom N`, 1 unless `BN > 256`).
    pub n_atoms: i64,
    /// K atoms per k-tile (`BK / atom K`).
    pub k_atoms: i64,
    /// GMMA smem atom of A (`ss_smem_selector`).
    pub smem_atom_a: GmmaSmemAtom,
    /// GMMA smem atom of B.
    pub smem_atom_b: GmmaSmemAtom,
    /// `(BM, BK, PIPE)` -> element offset of A (`tile_to_shape` of the atom, MN first
    /// for MN-major operands).
    pub smem_layout_a: AnyLayout,
    /// `(BN, BK, PIPE)` -> element offset of B.
    pub smem_layout_b: AnyLayout,
    /// Bytes of A and B per stage.
    pub stage_bytes: usize,
    /// Bytes of A's and of B's tile per stage.
    pub stage_bytes_ab: [usize; 2],
    /// Pipeline depth.
    pub stages: usize,
    /// The mainloop pipeline's full and empty mbarriers (`16 * stages`).
    pub barrier_bytes: usize,
    /// TMA box of A, `(inner, outer)` elements.
    pub tma_box_a: [u32; 2],
    /// TMA box of B.
    pub tma_box_b: [u32; 2],
    /// The box each CTA of A's multicast group issues: a K-major A's box with its rows
    /// split across the cluster's N CTAs (each loads its slice for all of them; equal to
    /// `tma_box_a` without multicast or for MN-major A).
    pub tma_multicast_box_a: [u32; 2],
    /// The box each CTA of B's multicast group issues (B's outer extent split across the
    /// cluster's M CTAs).
    pub tma_multicast_box_b: [u32; 2],
    /// TMA boxes per stage of A.
    pub tma_boxes_per_stage_a: usize,
    /// TMA boxes per stage of B.
    pub tma_boxes_per_stage_b: usize,
    /// TMA swizzle of A's descriptor.
    pub tma_swizzle_a: TmaSwizzle,
    /// TMA swizzle of B's descriptor.
    pub tma_swizzle_b: TmaSwizzle,
    /// Bytes the full barrier of a stage expects (A and B tiles).
    pub tx_bytes: u32,
    /// The epilogue's buffers are a union with the A/B stages (warp-specialized).
    pub storage_union: bool,
    /// Byte offset of B's stages.
    pub smem_offset_b: usize,
    /// Byte offset of the epilogue's buffers.
    pub smem_offset_epilogue: usize,
    /// Byte offset of the mbarriers.
    pub smem_offset_barriers: usize,
    /// The kernel's dynamic shared memory.
    pub smem_bytes: usize,
    /// A is multicast across the cluster's CTAs along N (cluster N > 1).
    pub multicast_a: bool,
    /// B is multicast across the cluster's CTAs along M (cluster M > 1).
    pub multicast_b: bool,
}

fn round_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Largest box extent `<= 256` dividing `extent`, and how many such boxes cover it.
fn split_box(extent: i64) -> (i64, i64) {
    let d = (1..=extent.min(256)).rev().find(|d| extent % d == 0).unwrap_or(1);
    (d, extent / d)
}

/// `(box, boxes per stage)` of an `(mn, bk)` operand tile in `atom`.
fn tma_box(atom: &GmmaSmemAtom, mn: i64, bk: i64) -> ([u32; 2], usize) {
    let w = atom_width(atom);
    let (outer_extent, inner_extent) = match atom.major {
        Major::K => (mn, bk),
        Major::MN => (bk, mn),
    };
    let (outer, n_outer) = split_box(outer_extent);
    ([w as u32, outer as u32], ((inner_extent / w) * n_outer) as usize)
}

/// The box one CTA of a multicast group of `ctas` issues: a K-major box's rows split
/// across the group (MN-major boxes are not split).
fn multicast_box(atom: &GmmaSmemAtom, tma_box: [u32; 2], ctas: i64) -> [u32; 2] {
    match atom.major {
        Major::K => [tma_box[0], tma_box[1] / ctas.max(1) as u32],
        Major::MN => tma_box,
    }
}

struct SmemMap {
    offset_b: usize,
    offset_epi: usize,
    offset_barriers: usize,
    total: usize,
}

fn types_ok(a: Element, b: Element, acc: Element) -> bool {
    use Element::*;
    matches!(
        (a, b, acc),
        (BF16, BF16, F32) | (F16, F16, F32) | (S8 | U8, S8 | U8, S32) | (E4M3 | E5M2, E4M3 | E5M2, F32)
    )
}

/// `(BM, BN, BK)` with the schedule, for [`Sm90PlanError::Tile`].
fn tile_err(cfg: &Sm90MainloopConfig, reason: String) -> Sm90PlanError {
    Sm90PlanError::Tile {
        tile: cfg.tile,
        schedule: cfg.schedule,
        reason,
    }
}

/// The element types form a `wgmma` combination, and 8-bit operands are K-major.
fn check_types(cfg: &Sm90MainloopConfig) -> Result<(), Sm90PlanError> {
    if !types_ok(cfg.a, cfg.b, cfg.acc) {
        return Err(Sm90PlanError::Types {
            a: cfg.a,
            b: cfg.b,
            acc: cfg.acc,
        });
    }
    if cfg.a.bits() == 8 && (cfg.a_major != Major::K || cfg.b_major != Major::K) {
        return Err(Sm90PlanError::Major {
            elem: cfg.a,
            a_major: cfg.a_major,
            b_major: cfg.b_major,
        });
    }
    Ok(())
}

/// The schedule's tile checks and the `wgmma` atom: `BM` in 64-row atoms per consumer
/// warpgroup, N the largest PTX-valid N dividing `BN`, `BK` a multiple of the atom's K.
fn choose_mma_atom(cfg: &Sm90MainloopConfig) -> Result<MmaAtom, Sm90PlanError> {
    let [bm, bn, bk] = cfg.tile;
    let schedule = cfg.schedule;
    if bm <= 0 || bn <= 0 || bk <= 0 {
        return Err(tile_err(cfg, "extents must be positive".into()));
    }
    if bm % schedule.mma_tile_m() != 0 {
        return Err(tile_err(
            cfg,
            if schedule.is_cooperative() {
                format!("BM={bm} must be a multiple of 128: each of the two consumer warpgroups takes BM/2 rows in 64-row wgmma atoms")
            } else {
                format!("BM={bm} must be a multiple of the 64-row wgmma atom")
            },
        ));
    }
    let n = valid_n(cfg.a)
        .into_iter()
        .rev()
        .find(|n| bn % n == 0)
        .ok_or_else(|| tile_err(cfg, format!("BN={bn} is not a multiple of any wgmma N for {}", cfg.a)))?;
    let mma_atom =
        wgmma(cfg.acc, cfg.a, cfg.b, n, GmmaSource::SS, cfg.a_major, cfg.b_major).ok_or(Sm90PlanError::Types {
            a: cfg.a,
            b: cfg.b,
            acc: cfg.acc,
        })?;
    let atom_k = mma_atom.shape_mnk[2];
    if bk % atom_k != 0 {
        return Err(tile_err(
            cfg,
            format!("BK={bk} must be a multiple of the wgmma K={atom_k}"),
        ));
    }
    Ok(mma_atom)
}

/// Cluster extents of 1, 2 or 4 and at most 8 CTAs (the portable limit).
fn check_cluster(cfg: &Sm90MainloopConfig) -> Result<(), Sm90PlanError> {
    let [cm, cn] = cfg.cluster;
    let cerr = |reason: &str| Sm90PlanError::Cluster {
        cluster: cfg.cluster,
        reason: reason.into(),
    };
    if ![1, 2, 4].contains(&cm) || ![1, 2, 4].contains(&cn) {
        return Err(cerr("each cluster extent must be 1, 2 or 4"));
    }
    if cm * cn > 8 {
        return Err(cerr("at most 8 CTAs per cluster (the portable limit)"));
    }
    Ok(())
}

/// The epilogue must follow this tile and schedule and nest with the atom's N.
fn check_epilogue(cfg: &Sm90MainloopConfig, epi: &Sm90EpiloguePlan, atom_n: i64) -> Result<(), Sm90PlanError> {
    let ec = &epi.config;
    if ec.cta_tile[0] != cfg.tile[0] || ec.cta_tile[1] != cfg.tile[1] || ec.schedule != cfg.schedule {
        return Err(Sm90PlanError::EpilogueMismatch(format!(
            "epilogue for {:?} tile {:?}, mainloop {:?} tile {:?}",
            ec.schedule, ec.cta_tile, cfg.schedule, cfg.tile
        )));
    }
    check_mma_nesting(cfg.schedule, epi.epi_tile, epi.fragment_size, atom_n).map_err(Sm90PlanError::Epilogue)
}

/// The GMMA smem atoms of A and B (`ss_smem_selector`).
fn smem_atoms(cfg: &Sm90MainloopConfig) -> Result<(GmmaSmemAtom, GmmaSmemAtom), Sm90PlanError> {
    let [bm, bn, bk] = cfg.tile;
    let a = ss_smem_selector(cfg.a_major, cfg.a, bm, bk)
        .ok_or_else(|| tile_err(cfg, "no GMMA smem atom divides the A tile".into()))?;
    let b = ss_smem_selector(cfg.b_major, cfg.b, bn, bk)
        .ok_or_else(|| tile_err(cfg, "no GMMA smem atom divides the B tile".into()))?;
    Ok((a, b))
}

/// The shared-memory budget: per-stage A/B bytes and the epilogue's carve-out (or union).
struct SmemBudget {
    a_stage: usize,
    b_stage: usize,
    union: bool,
    epi_tensor_bytes: usize,
    epi_barrier_bytes: usize,
    epi_smem_bytes: usize,
    capacity: usize,
}

impl SmemBudget {
    fn new(cfg: &Sm90MainloopConfig, epi: &Sm90EpiloguePlan) -> SmemBudget {
        let [bm, bn, bk] = cfg.tile;
        SmemBudget {
            a_stage: (bm * bk) as usize * cfg.a.bytes() as usize,
            b_stage: (bn * bk) as usize * cfg.b.bytes() as usize,
            union: cfg.schedule.epilogue_union(),
            epi_tensor_bytes: epi.tensor_bytes,
            epi_barrier_bytes: epi.barrier_bytes,
            epi_smem_bytes: epi.smem_bytes,
            capacity: cfg.smem_capacity,
        }
    }

    fn stage_bytes(&self) -> usize {
        self.a_stage + self.b_stage
    }

    /// The shared-memory map at `stages`.
    fn map(&self, stages: usize) -> SmemMap {
        let offset_b = round_up(stages * self.a_stage, SM90_BUFFER_ALIGN);
        let ml = offset_b + round_up(stages * self.b_stage, SM90_BUFFER_ALIGN);
        let ep = round_up(self.epi_tensor_bytes, SM90_BUFFER_ALIGN);
        let (offset_epi, tensors) = if self.union { (0, ml.max(ep)) } else { (ml, ml + ep) };
        let barriers = 16 * stages + self.epi_barrier_bytes + SM90_KERNEL_RESERVE_BYTES;
        SmemMap {
            offset_b,
            offset_epi,
            offset_barriers: tensors,
            total: round_up(tensors + barriers, 128),
        }
    }

    fn too_big(&self, stages: usize) -> Sm90PlanError {
        Sm90PlanError::SmemCapacity {
            stages,
            stage_bytes: self.stage_bytes(),
            epilogue: self.epi_smem_bytes,
            needed: self.map(stages).total,
            capacity: self.capacity,
        }
    }

    /// Explicit stages checked against the capacity, or the most that fit (at least 2, at
    /// most [`SM90_MAX_AUTO_STAGES`]).
    fn stages(&self, requested: Option<usize>) -> Result<usize, Sm90PlanError> {
        match requested {
            Some(s) if s < 2 => Err(Sm90PlanError::Stages { stages: s }),
            Some(s) if self.map(s).total > self.capacity => Err(self.too_big(s)),
            Some(s) => Ok(s),
            None => (2..=SM90_MAX_AUTO_STAGES)
                .rev()
                .find(|&s| self.map(s).total <= self.capacity)
                .ok_or_else(|| self.too_big(2)),
        }
    }
}

/// `(mn, BK, PIPE)` -> element offset: `tile_to_shape` of the swizzled atom, MN first for
/// MN-major operands.
fn smem_layout(atom: &GmmaSmemAtom, mn: i64, bk: i64, stages: usize) -> Result<AnyLayout, Sm90PlanError> {
    let order = (atom.major == Major::MN).then(|| tuple!(2, 1, 3));
    let st = stages as i64;
    atom.swizzle
        .compose_layout(&atom.layout)
        .tile_to_shape(&tuple!(mn, bk, st), order.as_ref())
        .map_err(|e| Sm90PlanError::Layout(e.to_string()))
}

impl Sm90Mainloop {
    /// Build the plan for a mainloop configuration and the epilogue that follows it.
    pub fn new(cfg: &Sm90MainloopConfig, epi: &Sm90EpiloguePlan) -> Result<Sm90Mainloop, Sm90PlanError> {
        let [bm, bn, bk] = cfg.tile;
        check_types(cfg)?;
        let mma_atom = choose_mma_atom(cfg)?;
        let [_, atom_n, atom_k] = mma_atom.shape_mnk;
        check_cluster(cfg)?;
        check_epilogue(cfg, epi, atom_n)?;
        let (smem_atom_a, smem_atom_b) = smem_atoms(cfg)?;
        let budget = SmemBudget::new(cfg, epi);
        let stages = budget.stages(cfg.stages)?;
        let m = budget.map(stages);
        let smem_layout_a = smem_layout(&smem_atom_a, bm, bk, stages)?;
        let smem_layout_b = smem_layout(&smem_atom_b, bn, bk, stages)?;
        let (tma_box_a, tma_boxes_per_stage_a) = tma_box(&smem_atom_a, bm, bk);
        let (tma_box_b, tma_boxes_per_stage_b) = tma_box(&smem_atom_b, bn, bk);
        let tma_multicast_box_a = multicast_box(&smem_atom_a, tma_box_a, cfg.cluster[1]);
        let tma_multicast_box_b = multicast_box(&smem_atom_b, tma_box_b, cfg.cluster[0]);
        let consumer_warpgroups = cfg.schedule.consumer_warpgroups();
        let wg_tile = if cfg.schedule.is_cooperative() {
            [bm / 2, bn]
        } else {
            [bm, bn]
        };
        let mut config = cfg.clone();
        config.stages = Some(stages);
        Ok(Sm90Mainloop {
            config,
            consumer_warpgroups,
            threads: 128 * (1 + consumer_warpgroups),
            wg_tile,
            m_atoms_per_wg: wg_tile[0] / 64,
            n_atoms: bn / atom_n,
            k_atoms: bk / atom_k,
            mma_atom,
            tma_swizzle_a: gmma_tma_swizzle(smem_atom_a.mode),
            tma_swizzle_b: gmma_tma_swizzle(smem_atom_b.mode),
            smem_atom_a,
            smem_atom_b,
            smem_layout_a,
            smem_layout_b,
            stage_bytes: budget.stage_bytes(),
            stage_bytes_ab: [budget.a_stage, budget.b_stage],
            stages,
            barrier_bytes: 16 * stages,
            tma_box_a,
            tma_box_b,
            tma_multicast_box_a,
            tma_multicast_box_b,
            tma_boxes_per_stage_a,
            tma_boxes_per_stage_b,
            tx_bytes: budget.stage_bytes() as u32,
            storage_union: budget.union,
            smem_offset_b: m.offset_b,
            smem_offset_epilogue: m.offset_epi,
            smem_offset_barriers: m.offset_barriers,
            smem_bytes: m.total,
            multicast_a: cfg.cluster[1] > 1,
            multicast_b: cfg.cluster[0] > 1,
        })
    }

    /// CuTe's name of A's TMA load op (`SM90_TMA_LOAD_MULTICAST` when multicast).
    pub fn tma_load_a(&self) -> &'static str {
        if self.multicast_a {
            "SM90_TMA_LOAD_MULTICAST"
        } else {
            "SM90_TMA_LOAD"
        }
    }

    /// CuTe's name of B's TMA load op.
    pub fn tma_load_b(&self) -> &'static str {
        if self.multicast_b {
            "SM90_TMA_LOAD_MULTICAST"
        } else {
            "SM90_TMA_LOAD"
        }
    }

    /// CTAs that share one A tile (cluster N) and one B tile (cluster M).
    pub fn multicast_ctas(&self) -> (i64, i64) {
        (self.config.cluster[1], self.config.cluster[0])
    }
}
