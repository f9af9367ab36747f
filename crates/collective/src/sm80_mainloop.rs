//! The Ampere (SM80) multistage mainloop: CuTe's `MainloopSm80CpAsync` collective with the
//! CUTLASS SM80 default shared-memory layouts, copies and tiled MMA, as a *plan* that a
//! kernel emitter renders (see `rcute_kernel::gemm_sm80`).
//!
//! Conventions. A is `(M,K)`, B is `(N,K)` (CuTe's view: both operands indexed by their
//! MN coordinate and K), C/D are `(M,N)`. An operand is [`Major::K`] when K is contiguous
//! in memory (A row-major, B column-major: BLAS "T" for A, "N" for B) and [`Major::MN`]
//! when M (resp. N) is contiguous.
//!
//! The pipeline (CuTe's `sm80_mma_multistage.hpp`): the CTA loads `(BM,BK)` and `(BN,BK)`
//! tiles with `cp.async` into `stages` shared-memory buffers, keeps `stages - 1` tiles in
//! flight, and for each tile walks its `BK / 16` k-blocks with `ldmatrix` into a double
//! buffer of register fragments and `mma.sync.m16n8k16`.
//!
//! 8-bit integer operands (`s8 x s8 -> s32`, both K-major: "TN") use the same plan in
//! bytes: 16-byte `cp.async` vectors of 16 elements, `Sw<B,4,3>` smem atoms with 128-, 64-
//! or 32-byte rows (CUTLASS's `Swizzle<2,4,3> o (16,64)` family), `ldmatrix` of 16-byte
//! rows and `mma.sync.m16n8k32` over `BK / 32` k-blocks (the A/B fragments of an
//! `m16n8k32` atom are, byte for byte, those of an `m16n8k16` atom on 16-bit data).
//!
//! ```
//! use rcute_atom::Major;
//! use rcute_collective::{PlanError, Sm80Mainloop, Sm80MainloopConfig};
//! let mut cfg = Sm80MainloopConfig::bf16_tn([128, 256, 32], [2, 4]);
//! cfg.stages = Some(3);
//! let p = Sm80Mainloop::new(&cfg).unwrap();
//! assert_eq!((p.threads, p.smem_bytes), (256, 3 * (128 + 256) * 32 * 2));
//! assert_eq!(p.warp_tile, [64, 64]);
//! cfg.a_major = Major::MN;
//! assert_eq!(Sm80Mainloop::new(&cfg).unwrap().smem_atom_a.to_string(), "Sw<3,3,3> o 0 o (64,8):(1,64)");
//! cfg.tile = [128, 256, 24];
//! assert!(matches!(Sm80Mainloop::new(&cfg), Err(PlanError::Tile { .. })));
//! ```

use rcute_atom::copy_cp_async::{cp_async, CacheOp};
use rcute_atom::copy_ldsm::ldmatrix;
use rcute_atom::mma_sm80::mma_sync;
use rcute_atom::{CopyOp, Element, Major, MmaAtom, TiledCopy, TiledMma};
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, AnyLayout, Layout, Swizzle};

/// The default shared-memory budget per CTA: 227 KiB, the opt-in maximum of SM90 (H100 /
/// H200). An A100 allows 163 KiB; pass a smaller budget to target it.
pub const DEFAULT_SMEM_BUDGET: usize = 227 * 1024;

/// The most stages the automatic choice picks (deeper pipelines do not help `mma.sync`
/// kernels and cost occupancy).
pub const MAX_AUTO_STAGES: usize = 4;

/// The input of the SM80 mainloop builder.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sm80MainloopConfig {
    /// Element type of A (`bf16`, `f16` or `s8`).
    pub a: Element,
    /// Element type of B (must equal `a`).
    pub b: Element,
    /// Accumulator type (`f32`; `s32` for `s8` operands).
    pub acc: Element,
    /// Contiguous mode of A.
    pub a_major: Major,
    /// Contiguous mode of B.
    pub b_major: Major,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N (`(WM, WN, 1)` atom layout of the tiled MMA).
    pub warps: [i64; 2],
    /// Pipeline depth; `None` picks as many as fit (at most [`MAX_AUTO_STAGES`]).
    pub stages: Option<usize>,
    /// Shared memory available per CTA, in bytes.
    pub smem_budget: usize,
    /// Bytes of the budget reserved for the epilogue (0 for direct stores).
    pub epilogue_smem: usize,
    /// Bytes one thread copies from global to shared memory per access: 16 (`cp.async.cg`,
    /// the fast path), or, for operands whose addresses, leading dimensions (or K) are not
    /// 16-byte aligned, 8 or 4 (`cp.async.ca`) or 2 (one 16-bit element through a
    /// register). The shared-memory layouts are the same for every width.
    pub copy_bytes: usize,
}

impl Sm80MainloopConfig {
    /// bf16 x bf16 -> f32, both operands K-major ("TN"), automatic stages, the default
    /// budget.
    pub fn bf16_tn(tile: [i64; 3], warps: [i64; 2]) -> Self {
        Sm80MainloopConfig {
            a: Element::BF16,
            b: Element::BF16,
            acc: Element::F32,
            a_major: Major::K,
            b_major: Major::K,
            tile,
            warps,
            stages: None,
            smem_budget: DEFAULT_SMEM_BUDGET,
            epilogue_smem: 0,
            copy_bytes: 16,
        }
    }

    /// s8 x s8 -> s32, both operands K-major ("TN", the only layout 8-bit `ldmatrix`
    /// supports), automatic stages, the default budget.
    pub fn s8_tn(tile: [i64; 3], warps: [i64; 2]) -> Self {
        Sm80MainloopConfig {
            a: Element::S8,
            b: Element::S8,
            acc: Element::S32,
            ..Sm80MainloopConfig::bf16_tn(tile, warps)
        }
    }
}

/// Why a configuration has no plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The element types are not a supported `mma.sync` combination.
    #[error("unsupported types A={a}, B={b}, accumulator={acc}: the SM80 mainloop takes bf16 or f16 operands of one type with f32 accumulation, or s8 operands with s32 accumulation")]
    Types {
        /// A's type.
        a: Element,
        /// B's type.
        b: Element,
        /// Accumulator type.
        acc: Element,
    },
    /// 8-bit operands that are not both K-major (`ldmatrix.trans` moves 16-bit elements,
    /// so an MN-major 8-bit tile cannot be loaded into `mma` fragments with it).
    #[error("8-bit operands must both be K-major, got A {a_major:?}-major and B {b_major:?}-major")]
    Major {
        /// A's contiguous mode.
        a_major: Major,
        /// B's contiguous mode.
        b_major: Major,
    },
    /// The tile and warp arrangement do not divide.
    #[error("tile {tile:?} with warps {warps:?}: {reason}")]
    Tile {
        /// `(BM, BN, BK)`.
        tile: [i64; 3],
        /// `(WM, WN)`.
        warps: [i64; 2],
        /// What does not divide.
        reason: String,
    },
    /// Fewer than two stages.
    #[error("{stages} stage(s): the cp.async pipeline needs at least 2")]
    Stages {
        /// Requested stages.
        stages: usize,
    },
    /// The stages do not fit the shared-memory budget.
    #[error(
        "{stages} stage(s) of {stage_bytes} bytes plus {epilogue} epilogue bytes exceed the budget of {budget} bytes"
    )]
    SmemBudget {
        /// Stages requested (or the 2 the automatic choice needs at least).
        stages: usize,
        /// Bytes per stage (A and B tiles).
        stage_bytes: usize,
        /// Epilogue carve-out.
        epilogue: usize,
        /// The budget.
        budget: usize,
    },
    /// The layout algebra refused a step (a bug or an unsupported shape).
    #[error("layout algebra: {0}")]
    Layout(String),
}

fn lerr(e: rcute_layout::LayoutError) -> PlanError {
    PlanError::Layout(e.to_string())
}

/// The global -> shared tiled copy of one operand: `cp.async.cg` of 16 bytes (8 16-bit or
/// 16 8-bit elements) per thread and pass, zero-filling predicated-off vectors; or, with
/// narrower [`Sm80MainloopConfig::copy_bytes`], `cp.async.ca` of 8 or 4 bytes or 16-bit
/// register copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct G2sCopy {
    /// The contiguous mode of the operand in global and shared memory.
    pub major: Major,
    /// `(MN, K)` thread coordinate -> thread index (CuTe's `thr_layout`).
    pub thr_layout: Layout,
    /// `(MN, K)` values of one thread (CuTe's `val_layout`): `(1,vec)` K-major, `(vec,1)`
    /// MN-major.
    pub val_layout: Layout,
    /// `make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, T>, thr, val)`.
    pub tiled: TiledCopy,
    /// Elements per 16-byte vector (8 for 16-bit elements, 16 for 8-bit): the unit of the
    /// shared-memory swizzle.
    pub vec: i64,
    /// Elements one thread copies per access (`vec` on the 16-byte path).
    pub copy_vec: i64,
    /// Bytes one thread copies per access.
    pub copy_bytes: usize,
    /// Passes over the operand tile: `tile_elems / (threads * copy_vec)`.
    pub passes: i64,
    /// `(MN, K)` step between passes.
    pub pass_step: [i64; 2],
}

impl G2sCopy {
    /// The `(MN, K)` coordinate of thread `t`'s first vector (pass 0, value 0).
    pub fn thread_origin(&self, t: i64) -> (i64, i64) {
        let (tmn, tk) = self.thread_extents();
        match self.major {
            Major::K => (t / tk, (t % tk) * self.copy_vec),
            Major::MN => ((t % tmn) * self.copy_vec, t / tmn),
        }
    }
    /// Threads along MN and K.
    pub fn thread_extents(&self) -> (i64, i64) {
        let sh = self.thr_layout.shape();
        let get = |i: usize| sh.modes().get(i).and_then(|m| m.static_leaf()).unwrap_or(1);
        (get(0), get(1))
    }
}

/// Which shared-memory row each lane hands to `ldmatrix.x4` for a 16 x 16 `(MN, K)`
/// sub-tile of an operand, so that the four result registers are exactly the MMA atom's
/// fragment registers (for B: two `n8` atoms, registers `b0,b1` of the first then the
/// second).
///
/// Lane `l` names matrix `i = l / 8`, row `r = l % 8`. Rows run along MN for K-major
/// operands (`ldmatrix`) and along K for MN-major ones (`ldmatrix.trans`). Matrix bit 0
/// steps MN by 8 for A and K by 8 for B; bit 1 steps K by 8 for A and MN by 8 for B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LdmatrixLanes {
    /// A (`true`) or B.
    pub is_a: bool,
    /// Contiguous mode.
    pub major: Major,
}

impl LdmatrixLanes {
    /// True for `ldmatrix.trans` (MN-major operands).
    pub fn trans(&self) -> bool {
        self.major == Major::MN
    }
    /// `(mn, k)` of the row lane `l` addresses (16-bit elements).
    pub fn lane_coord(&self, l: i64) -> (i64, i64) {
        self.lane_coord_vec(l, 8)
    }
    /// `(mn, k)` of the row lane `l` addresses, for elements with `vec` per 16-byte
    /// matrix row (8 for 16-bit elements, 16 for 8-bit): a matrix step along the
    /// contiguous dimension is `vec` elements, along the other one 8 rows.
    pub fn lane_coord_vec(&self, l: i64, vec: i64) -> (i64, i64) {
        let (i, r) = (l / 8, l % 8);
        let (b0, b1) = (i & 1, i >> 1);
        let (mn_step, k_step) = if self.is_a { (b0, b1) } else { (b1, b0) };
        match self.major {
            Major::K => (r + 8 * mn_step, vec * k_step),
            Major::MN => (vec * mn_step, r + 8 * k_step),
        }
    }
    /// The same as C++ expressions of a lane variable (16-bit elements).
    pub fn lane_coord_cpp(&self, lane: &str) -> (String, String) {
        self.lane_coord_cpp_vec(lane, 8)
    }
    /// [`LdmatrixLanes::lane_coord_vec`] as C++ expressions of a lane variable.
    pub fn lane_coord_cpp_vec(&self, lane: &str, vec: i64) -> (String, String) {
        let b0 = format!("(({lane} >> 3) & 1)");
        let b1 = format!("({lane} >> 4)");
        let row = format!("({lane} & 7)");
        let (mn_step, k_step) = if self.is_a { (b0, b1) } else { (b1, b0) };
        match self.major {
            Major::K => (format!("{row} + 8 * {mn_step}"), format!("{vec} * {k_step}")),
            Major::MN => (format!("{vec} * {mn_step}"), format!("{row} + 8 * {k_step}")),
        }
    }
}

/// The plan of the SM80 multistage mainloop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm80Mainloop {
    /// The configuration it was built from (with `stages` resolved).
    pub config: Sm80MainloopConfig,
    /// Threads per CTA (`32 * WM * WN`).
    pub threads: i64,
    /// Pipeline depth.
    pub stages: usize,
    /// The swizzled smem layout atom of A, `(MN,K)`.
    pub smem_atom_a: AnyLayout,
    /// The swizzled smem layout atom of B, `(MN,K)`.
    pub smem_atom_b: AnyLayout,
    /// `tile_to_shape(atom_a, (BM,BK,stages))`.
    pub smem_layout_a: AnyLayout,
    /// `tile_to_shape(atom_b, (BN,BK,stages))`.
    pub smem_layout_b: AnyLayout,
    /// Elements of one stage of A (`BM * BK`).
    pub stage_elems_a: i64,
    /// Elements of one stage of B (`BN * BK`).
    pub stage_elems_b: i64,
    /// Shared memory of all stages of A and B, in bytes.
    pub smem_bytes: usize,
    /// Global -> shared copy of A.
    pub g2s_a: G2sCopy,
    /// Global -> shared copy of B.
    pub g2s_b: G2sCopy,
    /// Shared -> register copy op of A (`SM75_U32x4_LDSM_N` or `SM75_U16x8_LDSM_T`; 8-bit
    /// operands: `SM75_U32x4_LDSM_N` on 16-byte rows).
    pub s2r_a: CopyOp,
    /// Shared -> register copy op of B.
    pub s2r_b: CopyOp,
    /// Lane addressing of `s2r_a`.
    pub lanes_a: LdmatrixLanes,
    /// Lane addressing of `s2r_b`.
    pub lanes_b: LdmatrixLanes,
    /// The MMA atom (`SM80_16x8x16_F32{BF16,F16}..._TN`, `SM80_16x8x32_S32S8S8S32_TN`).
    pub mma_atom: MmaAtom,
    /// The tiled MMA: atom layout `(WM,WN,1)`, permutation `(_, (8,WN,2):(1,16,8), k_block)`.
    pub tiled_mma: TiledMma,
    /// `(BM / WM, BN / WN)`: the accumulator tile of one warp.
    pub warp_tile: [i64; 2],
    /// MMA atoms per warp along M (`BM / (16 * WM)`).
    pub mma_m: i64,
    /// MMA atoms per warp along N (`BN / (8 * WN)`, even).
    pub mma_n: i64,
    /// k-blocks per tile (`BK / k_block`).
    pub k_blocks: i64,
    /// K of one MMA instruction, the k-block: 16 for 16-bit operands, 32 for 8-bit.
    pub k_block: i64,
}

/// CuTe's SM80 smem layout atom for a 16-bit operand with `mn` rows and `bk` columns of
/// the CTA tile: the widest of `Sw<3,3,3> o (8,64)`, `Sw<2,3,3> o (8,32)`,
/// `Sw<1,3,3> o (8,16)` (K-major, `(MN,K):(w,1)`) or their transposes (MN-major) that
/// divides the tile.
pub fn smem_atom(major: Major, mn: i64, bk: i64) -> Option<AnyLayout> {
    smem_atom_for(Element::BF16, major, mn, bk)
}

/// [`smem_atom`] for elements of any width up to 16 bits, in bytes the same atoms: rows
/// of 128, 64 or 32 bytes (`w = 8, 4, 2` 16-byte vectors), `Sw<3|2|1, log2(vec), 3>`,
/// where `vec` elements make 16 bytes. For 8-bit K-major operands:
/// `Sw<3,4,3> o (8,128)`, `Sw<2,4,3> o (8,64)` (CUTLASS's `Swizzle<2,4,3> o (16,64)` int8
/// atom, one period), `Sw<1,4,3> o (8,32)`.
pub fn smem_atom_for(elem: Element, major: Major, mn: i64, bk: i64) -> Option<AnyLayout> {
    let bits = elem.bits() as i64;
    if !(8..=16).contains(&bits) || 128 % bits != 0 {
        return None;
    }
    let vec = 128 / bits;
    let vec_log2 = vec.trailing_zeros() as i32;
    let contiguous = match major {
        Major::K => bk,
        Major::MN => mn,
    };
    let (bits, w) = [(3, 8 * vec), (2, 4 * vec), (1, 2 * vec)]
        .into_iter()
        .find(|(_, w)| contiguous % w == 0)?;
    let sw = Swizzle::new(bits, vec_log2, 3).ok()?;
    let inner = match major {
        Major::K => Layout::new(tuple!(8, w), tuple!(w, 1)).ok()?,
        Major::MN => Layout::new(tuple!(w, 8), tuple!(1, w)).ok()?,
    };
    Some(sw.compose_layout(&inner))
}

fn g2s_copy(elem: Element, major: Major, mn: i64, bk: i64, threads: i64, bytes: usize) -> Result<G2sCopy, String> {
    let chunk = 128 / elem.bits() as i64;
    let op = match bytes {
        16 => cp_async(CacheOp::CacheGlobal, 16, true),
        8 | 4 => cp_async(CacheOp::CacheAlways, bytes, true),
        2 => Some(rcute_atom::copy_ldst::g2s_u16_zfill()),
        _ => None,
    }
    .ok_or_else(|| format!("no global -> shared copy of {bytes} bytes (16, 8, 4 or 2)"))?;
    if !((bytes * 8) as u32).is_multiple_of(elem.bits()) {
        return Err(format!(
            "a {bytes}-byte copy does not hold whole {} elements",
            elem.ptx()
        ));
    }
    let vec = (bytes * 8) as i64 / elem.bits() as i64;
    let atom = op.atom(elem).map_err(|e| e.to_string())?;
    let (thr, val, passes, step) = match major {
        Major::K => {
            let tk = bk / vec;
            if tk == 0 || bk % vec != 0 || threads % tk != 0 {
                return Err(format!(
                    "BK={bk} must be a multiple of {vec} with BK/{vec} dividing {threads} threads"
                ));
            }
            let tm = threads / tk;
            if mn % tm != 0 {
                return Err(format!(
                    "the {tm}x{tk} cp.async thread layout does not divide the {mn}x{bk} K-major tile"
                ));
            }
            let thr = Layout::new(tuple!(tm, tk), tuple!(tk, 1)).map_err(|e| e.to_string())?;
            (thr, Layout::col_major(tuple!(1, vec)), mn / tm, [tm, 0])
        }
        Major::MN => {
            let tm = mn / vec;
            if tm == 0 || mn % vec != 0 || threads % tm != 0 {
                return Err(format!(
                    "MN tile {mn} must be a multiple of {vec} with {mn}/{vec} dividing {threads} threads"
                ));
            }
            let tk = threads / tm;
            if bk % tk != 0 {
                return Err(format!(
                    "the {tm}x{tk} cp.async thread layout does not divide the {mn}x{bk} MN-major tile"
                ));
            }
            let thr = Layout::new(tuple!(tm, tk), tuple!(1, tm)).map_err(|e| e.to_string())?;
            (thr, Layout::col_major(tuple!(vec, 1)), bk / tk, [0, tk])
        }
    };
    let tiled = TiledCopy::make(atom, &thr, &val).map_err(|e| e.to_string())?;
    if major == Major::K && passes > 32 {
        return Err(format!(
            "{passes} copy passes per thread (at most 32: the M/N predicates are one 32-bit mask)"
        ));
    }
    Ok(G2sCopy {
        major,
        thr_layout: thr,
        val_layout: val,
        tiled,
        vec: chunk,
        copy_vec: vec,
        copy_bytes: bytes,
        passes,
        pass_step: step,
    })
}

impl Sm80Mainloop {
    /// Build the plan, or say why not.
    pub fn new(cfg: &Sm80MainloopConfig) -> Result<Sm80Mainloop, PlanError> {
        let [bm, bn, bk] = cfg.tile;
        let [wm, wn] = cfg.warps;
        let k_block = match (cfg.a, cfg.b, cfg.acc) {
            (Element::BF16, Element::BF16, Element::F32) | (Element::F16, Element::F16, Element::F32) => 16,
            (Element::S8, Element::S8, Element::S32) => 32,
            _ => {
                return Err(PlanError::Types {
                    a: cfg.a,
                    b: cfg.b,
                    acc: cfg.acc,
                })
            }
        };
        if cfg.a.bits() == 8 && (cfg.a_major != Major::K || cfg.b_major != Major::K) {
            return Err(PlanError::Major {
                a_major: cfg.a_major,
                b_major: cfg.b_major,
            });
        }
        let terr = |reason: String| PlanError::Tile {
            tile: cfg.tile,
            warps: cfg.warps,
            reason,
        };
        if bm <= 0 || bn <= 0 || bk <= 0 || wm <= 0 || wn <= 0 {
            return Err(terr("extents must be positive".into()));
        }
        if wm * wn > 32 {
            return Err(terr("at most 32 warps (1024 threads) per CTA".into()));
        }
        if bk % k_block != 0 {
            return Err(terr(format!("BK={bk} must be a multiple of the MMA's K={k_block}")));
        }
        if bm % (16 * wm) != 0 {
            return Err(terr(format!("BM={bm} must be a multiple of 16*WM={}", 16 * wm)));
        }
        if bn % (16 * wn) != 0 {
            return Err(terr(format!(
                "BN={bn} must be a multiple of 16*WN={} (ldmatrix.x4 loads two n8 atoms)",
                16 * wn
            )));
        }
        let threads = 32 * wm * wn;
        let smem_atom_a = smem_atom_for(cfg.a, cfg.a_major, bm, bk)
            .ok_or_else(|| terr("no SM80 smem atom divides the A tile".into()))?;
        let smem_atom_b = smem_atom_for(cfg.b, cfg.b_major, bn, bk)
            .ok_or_else(|| terr("no SM80 smem atom divides the B tile".into()))?;
        let g2s_a =
            g2s_copy(cfg.a, cfg.a_major, bm, bk, threads, cfg.copy_bytes).map_err(|r| terr(format!("A: {r}")))?;
        let g2s_b =
            g2s_copy(cfg.b, cfg.b_major, bn, bk, threads, cfg.copy_bytes).map_err(|r| terr(format!("B: {r}")))?;

        // Stages.
        let ebytes = cfg.a.bytes() as usize;
        let stage_bytes = ((bm + bn) * bk) as usize * ebytes;
        let avail = cfg.smem_budget.saturating_sub(cfg.epilogue_smem);
        let stages = match cfg.stages {
            Some(s) if s < 2 => return Err(PlanError::Stages { stages: s }),
            Some(s) => s,
            None => (avail / stage_bytes).min(MAX_AUTO_STAGES),
        };
        if stages < 2 || stages * stage_bytes > avail {
            return Err(PlanError::SmemBudget {
                stages: stages.max(2),
                stage_bytes,
                epilogue: cfg.epilogue_smem,
                budget: cfg.smem_budget,
            });
        }
        let st = stages as i64;
        let smem_layout_a = smem_atom_a.tile_to_shape(&tuple!(bm, bk, st), None).map_err(lerr)?;
        let smem_layout_b = smem_atom_b.tile_to_shape(&tuple!(bn, bk, st), None).map_err(lerr)?;

        let s2r_a = ldmatrix(4, cfg.a_major == Major::MN);
        let s2r_b = ldmatrix(4, cfg.b_major == Major::MN);
        let mma_atom = mma_sync(cfg.acc, cfg.a, cfg.b, cfg.acc, k_block).ok_or(PlanError::Types {
            a: cfg.a,
            b: cfg.b,
            acc: cfg.acc,
        })?;
        let perm_n = Layout::new(tuple!(8, wn, 2), tuple!(1, 16, 8)).map_err(lerr)?;
        let tiled_mma = TiledMma::new(
            mma_atom.clone(),
            &Layout::col_major(tuple!(wm, wn, 1)),
            &[
                Tiler::Underscore,
                Tiler::Layout(perm_n),
                Tiler::Int(rcute_layout::s(k_block)),
            ],
        )
        .map_err(lerr)?;
        let mut config = cfg.clone();
        config.stages = Some(stages);
        Ok(Sm80Mainloop {
            config,
            threads,
            stages,
            smem_atom_a,
            smem_atom_b,
            smem_layout_a,
            smem_layout_b,
            stage_elems_a: bm * bk,
            stage_elems_b: bn * bk,
            smem_bytes: stages * stage_bytes,
            g2s_a,
            g2s_b,
            s2r_a,
            s2r_b,
            lanes_a: LdmatrixLanes {
                is_a: true,
                major: cfg.a_major,
            },
            lanes_b: LdmatrixLanes {
                is_a: false,
                major: cfg.b_major,
            },
            mma_atom,
            tiled_mma,
            warp_tile: [bm / wm, bn / wn],
            mma_m: bm / (16 * wm),
            mma_n: bn / (8 * wn),
            k_blocks: bk / k_block,
            k_block,
        })
    }

    /// `(warp_m, warp_n)` of a warp index (the `(WM,WN)` atom layout is column-major).
    pub fn warp_coord(&self, warp: i64) -> (i64, i64) {
        let wm = self.config.warps[0];
        (warp % wm, warp / wm)
    }

    /// First row of M-atom `mi` of warp row `wm` in the CTA tile: `16 * (wm + WM * mi)`.
    pub fn atom_row(&self, wm: i64, mi: i64) -> i64 {
        16 * (wm + self.config.warps[0] * mi)
    }

    /// First column of N-atom `nj` of warp column `wn`: the permutation
    /// `(8,WN,2):(1,16,8)` repeated every `16 * WN` columns gives
    /// `16 * WN * (nj / 2) + 16 * wn + 8 * (nj % 2)`.
    pub fn atom_col(&self, wn: i64, nj: i64) -> i64 {
        16 * self.config.warps[1] * (nj / 2) + 16 * wn + 8 * (nj % 2)
    }

    /// The `(m, n)` in the CTA tile of accumulator value `v` (0..4) of N-atom `nj` and
    /// M-atom `mi` held by thread `t` (the atom's C layout `((4,8),(2,2)):((32,1),(16,8))`:
    /// `m = lane / 4 + 8 * (v / 2)`, `n = 2 * (lane % 4) + v % 2`).
    pub fn acc_coord(&self, t: i64, mi: i64, nj: i64, v: i64) -> (i64, i64) {
        let (wm, wn) = self.warp_coord(t / 32);
        let lane = t % 32;
        (
            self.atom_row(wm, mi) + lane / 4 + 8 * (v / 2),
            self.atom_col(wn, nj) + 2 * (lane % 4) + v % 2,
        )
    }

    /// Accumulator registers per thread (`4 * mma_m * mma_n`).
    pub fn acc_per_thread(&self) -> i64 {
        4 * self.mma_m * self.mma_n
    }
}
