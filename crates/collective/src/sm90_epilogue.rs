//! The Hopper (SM90) TMA warp-specialized epilogue: the policy CUTLASS's epilogue
//! `CollectiveBuilder` picks for `Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize,
//! ReuseSmemC, DelayTmaStore>` and the types the collective derives from it (subtile,
//! shared-memory layouts and storage, TMA transaction size, store pipeline), as a plan.
//!
//! The epilogue walks the `(BM, BN)` CTA tile in `(EPI_M, EPI_N)` subtiles, N outer and
//! M inner ([`Sm90EpiloguePlan::subtile_order`]). A producer warp loads each subtile of C
//! with TMA into one of `StagesC` shared buffers; the consumer warpgroups combine it with
//! the accumulators, write D to one of `StagesD` buffers with `stmatrix` and one thread
//! stores it with TMA.
//!
//! # Builder rules
//!
//! * Epilogue tile, when not given ("EpilogueTileAuto"): cooperative
//!   `(min(128, BM), gcd(min(32, BN), BN))`; warp-specialized and ping-pong
//!   `(min(64, BM), gcd(min(Nperf, BN), BN))` with `Nperf = 64` when D is 8-bit and
//!   `BN % 64 == 0`, else 32.
//! * `EpiTiles = (BM / EPI_M) * (BN / EPI_N)`;
//!   `FragmentSize = EPI_M * EPI_N / threads` (256 threads cooperative, else 128).
//! * `ReuseSmemC = C present && bits(C) == bits(D) && bits(D) > 8`;
//!   `DelayTmaStore = no C && !ptr_array`.
//! * `StagesD = min(EpiTiles, 2)`; with C, `StagesC = reuse ? max(min(EpiTiles, 4),
//!   StagesD + 1) : min(EpiTiles, 4)`. Without C this plan has `StagesC = 0` (see
//!   Deviations).
//! * Smem atoms (CuTe's `ss_smem_selector`): row-major C/D take the K-major GMMA atom over
//!   `EPI_N`, column-major the MN-major atom over `EPI_M`, with the widest swizzle (128B,
//!   64B, 32B, interleave) whose width divides that extent. The layouts are
//!   `tile_to_shape(atom, (EPI_M, EPI_N, stages))` stepping M first for row-major and N first
//!   (`Step<_2,_1,_3>`) for column-major; D has `StagesC` stages when it reuses C's buffers.
//! * Storage: no C: a union holding only D; reuse: a union of C and D; otherwise a struct
//!   of C then D.
//! * Store pipeline: `PipelineTmaStore<StagesC, StagesD - 1>` when reusing C's buffers,
//!   else `PipelineTmaStore<StagesD>` (whose second parameter defaults to `StagesD - 1`).
//! * `CopyAtomC`: `SM90_U32x4_STSM_N` when `EPI_N % 16 == 0`, `SM90_U32x2_STSM_N` when
//!   `EPI_N % 8 == 0`.
//!
//! # Checks (typed [`Sm90EpilogueError`]s in place of CUTLASS's `static_assert`s)
//!
//! * `EPI_M | BM`, `EPI_N | BN` (the collective's asserts); `BN` a multiple of 8 (a wgmma N).
//! * `EPI_M` a multiple of the tiled MMA's M tile: 64 (one consumer warpgroup per output
//!   tile) or 128 (cooperative: two warpgroups stacked along M). The collective asserts
//!   `epi_tile_m % mma_tile_m == 0` in `store()`. (The builder's check on an *explicit*
//!   tile is stricter, `EPI_M == 64` / `128` exactly and `EPI_N % 16 == 0`; this plan only
//!   enforces the collective's rules, so taller or 8-wide subtiles are accepted.)
//! * The matching N rule: a subtile larger than the MMA tile must span whole MMA atoms
//!   along N, a smaller one must divide the atom's N.
//! * `FragmentSize` divides the accumulator values one thread holds per MMA atom
//!   (`atom_N / 2`, CUTLASS's `size<0>(tRS_rAcc) % FragmentSize`).
//! * The reuse requirements (C present, `StagesD <= StagesC`, equal 2D subtile cosizes)
//!   and the deadlock rule `!(DelayTmaStore && ReuseSmemC && StagesC <= StagesD)`.
//! * 16-byte TMA boxes: the subtile's contiguous extent times the element size is a
//!   multiple of 16 bytes, for C and D.
//! * `CopyAtomC` exists (`EPI_N % 8 == 0`).
//! * Types: C is f32, f16 or bf16; D is f32, f16, bf16, e4m3 or e5m2 (the converting
//!   store of this project handles those; integer outputs are not planned).
//!
//! The MMA atom's N is not part of the epilogue's input; the N and fragment checks assume
//! the SM90 mainloop's choice for a float A (the largest multiple of 8 up to 256 dividing
//! `BN`) and [`crate::Sm90Mainloop::new`] repeats them with the atom it actually picks.
//!
//! # Deviations from CUTLASS
//!
//! * Without C, `stages_c` is 0 and no load-pipeline barriers are counted; CUTLASS keeps
//!   `StagesC = min(EpiTiles, 4)` in the policy and allocates the (unused) barriers.
//! * Buffers are aligned to their swizzle atom (`8 x` the swizzle span: 1024 bytes for
//!   128B); CUTLASS's `alignment_for_swizzle` reads the swizzle of the element layout.
//! * D is never void (no aux-only epilogues) and no fusion storage is counted.
//! * The cooperative kernels of this project stage and store each subtile per consumer
//!   warpgroup, `EPI_M / 2` rows each ([`Sm90EpiloguePlan::warpgroup_subtile`]); the plan's
//!   buffers and bytes are CUTLASS's, split in two halves.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::{EpilogueStorage, Sm90EpilogueConfig, Sm90EpiloguePlan, Sm90Schedule, StorageOrder};
//! let cfg = Sm90EpilogueConfig::new(
//!     [128, 128, 64], Sm90Schedule::WarpSpecialized, Some(Element::F16), Element::F16, StorageOrder::RowMajor);
//! let p = Sm90EpiloguePlan::new(&cfg).unwrap();
//! assert_eq!(p.epi_tile, [64, 32]);
//! assert_eq!((p.epi_tiles, p.stages_d, p.stages_c, p.fragment_size), (8, 2, 4, 16));
//! assert!(p.reuse_smem_c && !p.delay_tma_store);
//! assert_eq!(p.storage, EpilogueStorage::UnionReuseC);
//! assert_eq!(p.subtile_order()[..3], [(0, 0), (1, 0), (0, 1)]);
//! ```

use crate::epilogue::StorageOrder;
use crate::gmma_smem::{gmma_tma_swizzle, ss_smem_selector};
use crate::sm90_schedule::Sm90Schedule;
use rcute_atom::tma::TmaSwizzle;
use rcute_atom::{CopyOp, Element, GmmaSmemAtom, Major};
use rcute_layout::{tuple, AnyLayout};

/// The input of the SM90 epilogue builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sm90EpilogueConfig {
    /// CTA tile `(BM, BN, BK)`.
    pub cta_tile: [i64; 3],
    /// The kernel schedule (cooperative selects the cooperative epilogue).
    pub schedule: Sm90Schedule,
    /// Element type of the source C; `None` for a sourceless epilogue (CUTLASS's void C).
    pub c: Option<Element>,
    /// Element type of the output D.
    pub d: Element,
    /// Storage order of C and D.
    pub order: StorageOrder,
    /// Epilogue subtile `(EPI_M, EPI_N)`; `None` for the automatic choice.
    pub epi_tile: Option<[i64; 2]>,
    /// Pointer-array (grouped) GEMM: disables the delayed TMA store.
    pub ptr_array: bool,
    /// Override of `StagesC` (`None`: builder rule).
    pub stages_c: Option<usize>,
    /// Override of `StagesD` (`None`: builder rule).
    pub stages_d: Option<usize>,
    /// Override of `ReuseSmemC` (`None`: builder rule).
    pub reuse_smem_c: Option<bool>,
    /// Override of `DelayTmaStore` (`None`: builder rule).
    pub delay_tma_store: Option<bool>,
}

impl Sm90EpilogueConfig {
    /// A configuration with the automatic epilogue tile, no pointer array and every
    /// policy decision left to the builder rules.
    pub fn new(
        cta_tile: [i64; 3],
        schedule: Sm90Schedule,
        c: Option<Element>,
        d: Element,
        order: StorageOrder,
    ) -> Sm90EpilogueConfig {
        Sm90EpilogueConfig {
            cta_tile,
            schedule,
            c,
            d,
            order,
            epi_tile: None,
            ptr_array: false,
            stages_c: None,
            stages_d: None,
            reuse_smem_c: None,
            delay_tma_store: None,
        }
    }
}

/// How the epilogue's C and D buffers share shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EpilogueStorage {
    /// No C: a union whose only member is D (`CollectiveStorageWithoutC`).
    UnionWithoutC,
    /// C and D in one union, D written over consumed C subtiles (`CollectiveStorageReuseC`).
    UnionReuseC,
    /// C then D, separate buffers (`CollectiveStorageWithC`).
    StructWithC,
}

impl EpilogueStorage {
    /// CUTLASS's name of the storage type.
    pub fn cutlass_name(self) -> &'static str {
        match self {
            EpilogueStorage::UnionWithoutC => "CollectiveStorageWithoutC",
            EpilogueStorage::UnionReuseC => "CollectiveStorageReuseC",
            EpilogueStorage::StructWithC => "CollectiveStorageWithC",
        }
    }
}

/// The `stmatrix` atom that retiles the accumulators for the register -> shared copies
/// (CUTLASS's `CopyAtomC`, value type `half_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EpilogueCopyAtom {
    /// `SM90_U32x4_STSM_N` (`EPI_N % 16 == 0`).
    StsmX4,
    /// `SM90_U32x2_STSM_N` (`EPI_N % 8 == 0`).
    StsmX2,
}

impl EpilogueCopyAtom {
    /// CuTe's name.
    pub fn name(self) -> &'static str {
        match self {
            EpilogueCopyAtom::StsmX4 => "SM90_U32x4_STSM_N",
            EpilogueCopyAtom::StsmX2 => "SM90_U32x2_STSM_N",
        }
    }
    /// Matrices per instruction (4 or 2).
    pub fn matrices(self) -> usize {
        match self {
            EpilogueCopyAtom::StsmX4 => 4,
            EpilogueCopyAtom::StsmX2 => 2,
        }
    }
    /// The copy operation (`stmatrix.sync.aligned.x{4,2}.m8n8.shared.b16`).
    pub fn op(self) -> CopyOp {
        rcute_atom::copy_ldsm::stmatrix(self.matrices(), false)
    }
}

/// Why an SM90 epilogue configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Sm90EpilogueError {
    /// C or D has a type this epilogue does not handle.
    #[error("unsupported {operand} type {elem}: C must be f32, f16 or bf16; D must be f32, f16, bf16, e4m3 or e5m2")]
    Type {
        /// `"C"` or `"D"`.
        operand: &'static str,
        /// The type.
        elem: Element,
    },
    /// The CTA tile or epilogue tile is malformed.
    #[error("CTA tile {cta_tile:?}, epilogue tile {epi_tile:?}: {reason}")]
    Tile {
        /// `(BM, BN, BK)`.
        cta_tile: [i64; 3],
        /// `(EPI_M, EPI_N)` (auto-resolved when possible).
        epi_tile: Option<[i64; 2]>,
        /// What is wrong.
        reason: String,
    },
    /// An epilogue tile extent does not divide the CTA tile.
    #[error("EPI_TILE_{mode} = {epi} must divide CTA_{mode} = {cta}")]
    Divide {
        /// `'M'` or `'N'`.
        mode: char,
        /// Epilogue tile extent.
        epi: i64,
        /// CTA tile extent.
        cta: i64,
    },
    /// `EPI_M` is not a multiple of the tiled MMA's M tile.
    #[error("EPI_TILE_M = {epi_m} must be a multiple of the MMA tile M = {mma_m} (64 per consumer warpgroup stacked along M)")]
    EpiM {
        /// `EPI_M`.
        epi_m: i64,
        /// The MMA tile's M (64, or 128 for cooperative).
        mma_m: i64,
    },
    /// The subtile and the MMA atom do not nest along N.
    #[error("EPI_TILE_N = {epi_n} and the MMA tile N = {mma_n} do not nest: a subtile {epi_m}x{epi_n} {rule}")]
    MmaN {
        /// `EPI_M`.
        epi_m: i64,
        /// `EPI_N`.
        epi_n: i64,
        /// The MMA atom's N.
        mma_n: i64,
        /// The violated rule.
        rule: &'static str,
    },
    /// No `stmatrix` atom fits the subtile width.
    #[error("no CopyAtomC for EPI_TILE_N = {epi_n}: stmatrix needs a multiple of 8")]
    CopyAtom {
        /// `EPI_N`.
        epi_n: i64,
    },
    /// A TMA box row of C or D is not a multiple of 16 bytes.
    #[error("{operand}: the subtile's contiguous extent {extent} x {bytes} B is not a multiple of the 16-byte TMA alignment")]
    Alignment {
        /// `"C"` or `"D"`.
        operand: &'static str,
        /// Contiguous extent in elements (`EPI_N` row-major, `EPI_M` column-major).
        extent: i64,
        /// Element size in bytes.
        bytes: u32,
    },
    /// `FragmentSize` does not divide the accumulator values per thread and MMA atom.
    #[error("FragmentSize {fragment} does not divide the {acc_values} accumulator values a thread holds per MMA atom")]
    Fragment {
        /// `FragmentSize`.
        fragment: i64,
        /// Accumulators per thread and MMA atom (`atom_N / 2`).
        acc_values: i64,
    },
    /// A stage count is impossible.
    #[error("{0}")]
    Stages(String),
    /// Shared-memory reuse of C's buffers for D is requested but not supported.
    #[error("smem reuse requirements not met: {0}")]
    Reuse(String),
    /// A delayed TMA store with reused C buffers and `StagesC <= StagesD` would deadlock.
    #[error("this TMA epilogue configuration will deadlock: delayed TMA store with reused C buffers needs StagesC ({stages_c}) > StagesD ({stages_d})")]
    Deadlock {
        /// `StagesC`.
        stages_c: usize,
        /// `StagesD`.
        stages_d: usize,
    },
    /// The layout algebra refused a step.
    #[error("layout algebra: {0}")]
    Layout(String),
}

/// The SM90 TMA warp-specialized epilogue plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90EpiloguePlan {
    /// The configuration it was built from.
    pub config: Sm90EpilogueConfig,
    /// `(EPI_M, EPI_N)`.
    pub epi_tile: [i64; 2],
    /// Subtiles per CTA tile.
    pub epi_tiles: i64,
    /// Accumulators converted per vector step (`EPI_M * EPI_N / threads`).
    pub fragment_size: i64,
    /// C buffers (0 without C).
    pub stages_c: usize,
    /// D buffers (D uses `stages_c` buffers when it reuses C's).
    pub stages_d: usize,
    /// D is written into C's consumed buffers.
    pub reuse_smem_c: bool,
    /// The TMA store of a subtile is issued one iteration late.
    pub delay_tma_store: bool,
    /// The shared-memory layout atom of C.
    pub smem_atom_c: Option<GmmaSmemAtom>,
    /// The shared-memory layout atom of D.
    pub smem_atom_d: GmmaSmemAtom,
    /// `(EPI_M, EPI_N, StagesC)` -> element offset of C.
    pub smem_layout_c: Option<AnyLayout>,
    /// `(EPI_M, EPI_N, stages)` -> element offset of D.
    pub smem_layout_d: AnyLayout,
    /// TMA swizzle of C's descriptor.
    pub tma_swizzle_c: Option<TmaSwizzle>,
    /// TMA swizzle of D's descriptor.
    pub tma_swizzle_d: TmaSwizzle,
    /// The storage kind.
    pub storage: EpilogueStorage,
    /// Byte offset of D's buffers in the storage (after C in a struct, else 0).
    pub smem_offset_d: usize,
    /// Bytes of the C and D buffers (the collective's tensor storage).
    pub tensor_bytes: usize,
    /// Bytes of the C load pipeline's full and empty mbarriers (`16 * StagesC`).
    pub barrier_bytes: usize,
    /// All shared bytes of the epilogue (tensors then barriers), rounded up to 128.
    pub smem_bytes: usize,
    /// Bytes one TMA load of a C subtile delivers (0 without C).
    pub tma_transaction_bytes: usize,
    /// The accumulator retiling atom.
    pub copy_atom_c: EpilogueCopyAtom,
    /// Stages of the TMA store pipeline (`StagesC` when reusing, else `StagesD`).
    pub store_pipeline_stages: usize,
    /// Committed stores allowed in flight before a buffer is acquired again (`StagesD - 1`).
    pub store_pipeline_unacquired: usize,
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn round_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// CUTLASS's automatic epilogue tile for a CTA tile, schedule and D type.
///
/// ```
/// use rcute_atom::Element;
/// use rcute_collective::{sm90_auto_epi_tile, Sm90Schedule};
/// assert_eq!(sm90_auto_epi_tile([128, 128, 64], Sm90Schedule::WarpSpecialized, Element::F16), [64, 32]);
/// assert_eq!(sm90_auto_epi_tile([256, 128, 64], Sm90Schedule::Cooperative, Element::BF16), [128, 32]);
/// assert_eq!(sm90_auto_epi_tile([128, 128, 64], Sm90Schedule::PingPong, Element::E4M3), [64, 64]);
/// ```
pub fn sm90_auto_epi_tile(cta_tile: [i64; 3], schedule: Sm90Schedule, d: Element) -> [i64; 2] {
    let [bm, bn, _] = cta_tile;
    if schedule.is_cooperative() {
        [bm.min(128), gcd(bn.min(32), bn)]
    } else {
        let n_perf = if d.bits() == 8 && bn % 64 == 0 { 64 } else { 32 };
        [bm.min(64), gcd(bn.min(n_perf), bn)]
    }
}

/// The wgmma N the SM90 mainloop picks for a float A: the largest multiple of 8 up to 256
/// dividing `bn` (`None` when `bn` is not a multiple of 8).
pub(crate) fn assumed_mma_n(bn: i64) -> Option<i64> {
    (1..=32).rev().map(|i| 8 * i).find(|n| bn % n == 0)
}

/// The N-nesting and fragment rules of the collective's `store()` for an MMA atom of N
/// `mma_n` (shared with the mainloop's compatibility check).
pub(crate) fn check_mma_nesting(
    schedule: Sm90Schedule,
    epi: [i64; 2],
    fragment: i64,
    mma_n: i64,
) -> Result<(), Sm90EpilogueError> {
    let [em, en] = epi;
    let mma_m = schedule.mma_tile_m();
    if em * en > mma_m * mma_n {
        if en % mma_n != 0 {
            let rule = "larger than the MMA tile must span whole MMA atoms along N";
            return Err(Sm90EpilogueError::MmaN {
                epi_m: em,
                epi_n: en,
                mma_n,
                rule,
            });
        }
    } else if mma_n % en != 0 {
        let rule = "no larger than the MMA tile must divide the MMA atom's N";
        return Err(Sm90EpilogueError::MmaN {
            epi_m: em,
            epi_n: en,
            mma_n,
            rule,
        });
    }
    let acc_values = mma_n / 2;
    if fragment <= 0 || acc_values % fragment != 0 {
        return Err(Sm90EpilogueError::Fragment { fragment, acc_values });
    }
    Ok(())
}

/// Alignment of a buffer built from `atom`: one swizzle atom (8 rows of the span).
pub(crate) fn atom_alignment(atom: &GmmaSmemAtom) -> usize {
    8 * atom.mode.span_bytes() as usize
}

fn supported_c(e: Element) -> bool {
    matches!(e, Element::F32 | Element::F16 | Element::BF16)
}

fn supported_d(e: Element) -> bool {
    matches!(
        e,
        Element::F32 | Element::F16 | Element::BF16 | Element::E4M3 | Element::E5M2
    )
}

fn tile_err(cfg: &Sm90EpilogueConfig, epi_tile: Option<[i64; 2]>, reason: &str) -> Sm90EpilogueError {
    Sm90EpilogueError::Tile {
        cta_tile: cfg.cta_tile,
        epi_tile,
        reason: reason.to_string(),
    }
}

/// C and D have types the epilogue handles.
fn check_types(cfg: &Sm90EpilogueConfig) -> Result<(), Sm90EpilogueError> {
    if let Some(c) = cfg.c {
        if !supported_c(c) {
            return Err(Sm90EpilogueError::Type { operand: "C", elem: c });
        }
    }
    if !supported_d(cfg.d) {
        return Err(Sm90EpilogueError::Type {
            operand: "D",
            elem: cfg.d,
        });
    }
    Ok(())
}

/// The subtile `(EPI_M, EPI_N)` (given or automatic) and its `FragmentSize`, checked
/// against the CTA tile and the MMA tile the mainloop picks.
fn choose_subtile(cfg: &Sm90EpilogueConfig) -> Result<([i64; 2], i64), Sm90EpilogueError> {
    let [bm, bn, bk] = cfg.cta_tile;
    if bm <= 0 || bn <= 0 || bk <= 0 {
        return Err(tile_err(cfg, cfg.epi_tile, "CTA tile extents must be positive"));
    }
    let mma_n =
        assumed_mma_n(bn).ok_or_else(|| tile_err(cfg, cfg.epi_tile, "BN must be a multiple of 8 (a wgmma N)"))?;
    let epi_tile = cfg
        .epi_tile
        .unwrap_or_else(|| sm90_auto_epi_tile(cfg.cta_tile, cfg.schedule, cfg.d));
    let [em, en] = epi_tile;
    if em <= 0 || en <= 0 {
        return Err(tile_err(cfg, Some(epi_tile), "epilogue tile extents must be positive"));
    }
    if bm % em != 0 {
        return Err(Sm90EpilogueError::Divide {
            mode: 'M',
            epi: em,
            cta: bm,
        });
    }
    if bn % en != 0 {
        return Err(Sm90EpilogueError::Divide {
            mode: 'N',
            epi: en,
            cta: bn,
        });
    }
    let mma_m = cfg.schedule.mma_tile_m();
    if em % mma_m != 0 {
        return Err(Sm90EpilogueError::EpiM { epi_m: em, mma_m });
    }
    let threads = cfg.schedule.epilogue_threads();
    // Always integral here (EPI_M is a multiple of 64 per 128 threads); kept as a check.
    if (em * en) % threads != 0 {
        return Err(Sm90EpilogueError::Fragment {
            fragment: 0,
            acc_values: mma_n / 2,
        });
    }
    let fragment_size = em * en / threads;
    check_mma_nesting(cfg.schedule, epi_tile, fragment_size, mma_n)?;
    Ok((epi_tile, fragment_size))
}

/// `CopyAtomC`: the widest `stmatrix` whose width divides `EPI_N`.
fn choose_copy_atom(epi_n: i64) -> Result<EpilogueCopyAtom, Sm90EpilogueError> {
    if epi_n % 16 == 0 {
        Ok(EpilogueCopyAtom::StsmX4)
    } else if epi_n % 8 == 0 {
        Ok(EpilogueCopyAtom::StsmX2)
    } else {
        Err(Sm90EpilogueError::CopyAtom { epi_n })
    }
}

/// The subtile's GMMA major mode and contiguous extent for the storage order.
fn subtile_major(order: StorageOrder, [em, en]: [i64; 2]) -> (Major, i64) {
    match order {
        StorageOrder::RowMajor => (Major::K, en),
        StorageOrder::ColMajor => (Major::MN, em),
    }
}

/// Each TMA box row of C and D is a multiple of 16 bytes.
fn check_alignment(cfg: &Sm90EpilogueConfig, epi_tile: [i64; 2]) -> Result<(), Sm90EpilogueError> {
    let (_, contiguous) = subtile_major(cfg.order, epi_tile);
    for (operand, e) in [("C", cfg.c), ("D", Some(cfg.d))] {
        if let Some(e) = e {
            if (contiguous * e.bytes() as i64) % 16 != 0 {
                return Err(Sm90EpilogueError::Alignment {
                    operand,
                    extent: contiguous,
                    bytes: e.bytes(),
                });
            }
        }
    }
    Ok(())
}

/// The builder's policy: `StagesC`, `StagesD`, `ReuseSmemC` and `DelayTmaStore`.
struct Policy {
    stages_c: usize,
    stages_d: usize,
    reuse: bool,
    delay: bool,
}

/// C/D stages, smem reuse and store delay (builder rules unless overridden), with the
/// collective's checks.
fn choose_policy(cfg: &Sm90EpilogueConfig, epi_tiles: i64) -> Result<Policy, Sm90EpilogueError> {
    let tiles = epi_tiles as usize;
    let rule_reuse = cfg.c.is_some_and(|c| c.bits() == cfg.d.bits()) && cfg.d.bits() > 8;
    let reuse = cfg.reuse_smem_c.unwrap_or(rule_reuse);
    let delay = cfg.delay_tma_store.unwrap_or(cfg.c.is_none() && !cfg.ptr_array);
    let stages_d = cfg.stages_d.unwrap_or(tiles.min(2));
    if stages_d == 0 {
        return Err(Sm90EpilogueError::Stages("StagesD must be at least 1".into()));
    }
    let stages_c = match (cfg.c, cfg.stages_c) {
        (None, None) | (None, Some(0)) => 0,
        (None, Some(s)) => {
            return Err(Sm90EpilogueError::Stages(format!("StagesC = {s} without a source C")));
        }
        (Some(_), Some(0)) => {
            return Err(Sm90EpilogueError::Stages(
                "StagesC must be at least 1 with a source C".into(),
            ))
        }
        (Some(_), Some(s)) => s,
        (Some(_), None) if reuse => tiles.min(4).max(stages_d + 1),
        (Some(_), None) => tiles.min(4),
    };
    if reuse {
        if cfg.c.is_none() {
            return Err(Sm90EpilogueError::Reuse("reusing C's buffers needs a source C".into()));
        }
        if stages_d > stages_c {
            return Err(Sm90EpilogueError::Reuse(format!(
                "StagesD ({stages_d}) must not exceed StagesC ({stages_c})"
            )));
        }
    }
    if delay && reuse && stages_c <= stages_d {
        return Err(Sm90EpilogueError::Deadlock { stages_c, stages_d });
    }
    Ok(Policy {
        stages_c,
        stages_d,
        reuse,
        delay,
    })
}

/// The smem atoms and `(EPI_M, EPI_N, stages)` layouts of C and D.
struct SmemBuffers {
    atom_c: Option<GmmaSmemAtom>,
    atom_d: GmmaSmemAtom,
    layout_c: Option<AnyLayout>,
    layout_d: AnyLayout,
}

/// The C and D buffers: D takes `StagesC` buffers when it reuses C's, and then their
/// subtiles must have equal cosizes.
fn smem_buffers(cfg: &Sm90EpilogueConfig, epi_tile: [i64; 2], p: &Policy) -> Result<SmemBuffers, Sm90EpilogueError> {
    let [em, en] = epi_tile;
    let (major, contiguous) = subtile_major(cfg.order, epi_tile);
    let order = match cfg.order {
        StorageOrder::RowMajor => None,
        StorageOrder::ColMajor => Some(tuple!(2, 1, 3)),
    };
    let atom_for = |e: Element, operand: &'static str| {
        ss_smem_selector(major, e, em, en).ok_or(Sm90EpilogueError::Alignment {
            operand,
            extent: contiguous,
            bytes: e.bytes(),
        })
    };
    let layout_for = |atom: &GmmaSmemAtom, stages: usize| -> Result<AnyLayout, Sm90EpilogueError> {
        let st = stages as i64;
        atom.swizzle
            .compose_layout(&atom.layout)
            .tile_to_shape(&tuple!(em, en, st), order.as_ref())
            .map_err(|e| Sm90EpilogueError::Layout(e.to_string()))
    };
    let cosize_2d = |l: &AnyLayout| l.take(0, 2).ok().and_then(|t| t.cosize().as_static());
    let atom_d = atom_for(cfg.d, "D")?;
    let layout_d = layout_for(&atom_d, if p.reuse { p.stages_c } else { p.stages_d })?;
    let (atom_c, layout_c) = match cfg.c {
        Some(c) => {
            let atom = atom_for(c, "C")?;
            let layout = layout_for(&atom, p.stages_c)?;
            (Some(atom), Some(layout))
        }
        None => (None, None),
    };
    if p.reuse {
        let lc = layout_c.as_ref().and_then(cosize_2d);
        if lc.is_none() || lc != cosize_2d(&layout_d) {
            return Err(Sm90EpilogueError::Reuse(
                "C and D subtiles must have equal cosizes".into(),
            ));
        }
    }
    Ok(SmemBuffers {
        atom_c,
        atom_d,
        layout_c,
        layout_d,
    })
}

fn cosize_bytes(l: &AnyLayout, e: Element) -> Result<usize, Sm90EpilogueError> {
    let n = l
        .cosize()
        .as_static()
        .ok_or_else(|| Sm90EpilogueError::Layout("dynamic cosize".into()))?;
    Ok(n as usize * e.bytes() as usize)
}

/// The storage kind, D's byte offset in it and the tensor bytes.
fn storage_map(
    cfg: &Sm90EpilogueConfig,
    reuse: bool,
    b: &SmemBuffers,
) -> Result<(EpilogueStorage, usize, usize), Sm90EpilogueError> {
    let d_bytes = cosize_bytes(&b.layout_d, cfg.d)?;
    let c_bytes = match (&b.layout_c, cfg.c) {
        (Some(l), Some(c)) => cosize_bytes(l, c)?,
        _ => 0,
    };
    let storage = match (cfg.c, reuse) {
        (None, _) => EpilogueStorage::UnionWithoutC,
        (Some(_), true) => EpilogueStorage::UnionReuseC,
        (Some(_), false) => EpilogueStorage::StructWithC,
    };
    let (smem_offset_d, tensor_bytes) = match storage {
        EpilogueStorage::UnionWithoutC => (0, d_bytes),
        EpilogueStorage::UnionReuseC => (0, c_bytes.max(d_bytes)),
        EpilogueStorage::StructWithC => {
            let off = round_up(c_bytes, atom_alignment(&b.atom_d));
            (off, off + d_bytes)
        }
    };
    Ok((storage, smem_offset_d, tensor_bytes))
}

impl Sm90EpiloguePlan {
    /// Apply the builder rules and the collective's checks, or say why not.
    pub fn new(cfg: &Sm90EpilogueConfig) -> Result<Sm90EpiloguePlan, Sm90EpilogueError> {
        let [bm, bn, _] = cfg.cta_tile;
        check_types(cfg)?;
        let (epi_tile, fragment_size) = choose_subtile(cfg)?;
        let [em, en] = epi_tile;
        let copy_atom_c = choose_copy_atom(en)?;
        check_alignment(cfg, epi_tile)?;
        let epi_tiles = (bm / em) * (bn / en);
        let p = choose_policy(cfg, epi_tiles)?;
        let buffers = smem_buffers(cfg, epi_tile, &p)?;
        let (storage, smem_offset_d, tensor_bytes) = storage_map(cfg, p.reuse, &buffers)?;
        let barrier_bytes = if cfg.c.is_some() { 16 * p.stages_c } else { 0 };
        let SmemBuffers {
            atom_c: smem_atom_c,
            atom_d: smem_atom_d,
            layout_c: smem_layout_c,
            layout_d: smem_layout_d,
        } = buffers;
        Ok(Sm90EpiloguePlan {
            config: *cfg,
            epi_tile,
            epi_tiles,
            fragment_size,
            stages_c: p.stages_c,
            stages_d: p.stages_d,
            reuse_smem_c: p.reuse,
            delay_tma_store: p.delay,
            tma_swizzle_c: smem_atom_c.as_ref().map(|a| gmma_tma_swizzle(a.mode)),
            tma_swizzle_d: gmma_tma_swizzle(smem_atom_d.mode),
            smem_atom_c,
            smem_atom_d,
            smem_layout_c,
            smem_layout_d,
            storage,
            smem_offset_d,
            tensor_bytes,
            barrier_bytes,
            smem_bytes: round_up(round_up(tensor_bytes, 8) + barrier_bytes, 128),
            tma_transaction_bytes: cfg.c.map_or(0, |c| (em * en) as usize * c.bytes() as usize),
            copy_atom_c,
            store_pipeline_stages: if p.reuse { p.stages_c } else { p.stages_d },
            store_pipeline_unacquired: p.stages_d - 1,
        })
    }

    /// Subtiles along M and N: `(BM / EPI_M, BN / EPI_N)`.
    pub fn epi_tiles_mn(&self) -> [i64; 2] {
        [
            self.config.cta_tile[0] / self.epi_tile[0],
            self.config.cta_tile[1] / self.epi_tile[1],
        ]
    }

    /// The `(epi_m, epi_n)` subtile indices in the order the epilogue visits them: N outer,
    /// M inner. Subtile `(i, j)` covers rows `[i * EPI_M, (i + 1) * EPI_M)` and columns
    /// `[j * EPI_N, (j + 1) * EPI_N)` of the CTA tile.
    pub fn subtile_order(&self) -> Vec<(i64, i64)> {
        let [tm, tn] = self.epi_tiles_mn();
        (0..tn).flat_map(|n| (0..tm).map(move |m| (m, n))).collect()
    }

    /// The subtile one consumer warpgroup stages and stores on its own: `(EPI_M / 2,
    /// EPI_N)` for the cooperative schedule (its two warpgroups stacked along M each take
    /// their 64-row half of every subtile), the subtile itself otherwise.
    ///
    /// This project's cooperative kernels store per warpgroup (a deviation from CUTLASS,
    /// whose cooperative epilogue stores each subtile from all 256 threads): every
    /// warpgroup has its own buffers, TMA boxes of this shape and 128-thread barriers, so
    /// neither waits for the other between subtiles. The shared bytes are unchanged (two
    /// sets of half-height buffers).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_collective::{Sm90EpilogueConfig, Sm90EpiloguePlan, Sm90Schedule, StorageOrder};
    /// let cfg = Sm90EpilogueConfig::new(
    ///     [128, 256, 64], Sm90Schedule::Cooperative, None, Element::BF16, StorageOrder::RowMajor);
    /// let p = Sm90EpiloguePlan::new(&cfg).unwrap();
    /// assert_eq!((p.epi_tile, p.warpgroup_subtile()), ([128, 32], [64, 32]));
    /// ```
    pub fn warpgroup_subtile(&self) -> [i64; 2] {
        let [em, en] = self.epi_tile;
        let groups = self.config.schedule.epilogue_threads() / 128;
        [em / groups, en]
    }

    /// Whether the epilogue loads a source C.
    pub fn has_c(&self) -> bool {
        self.config.c.is_some()
    }
}
