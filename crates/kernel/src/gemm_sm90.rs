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
//! 232. The persistent schedules walk the tiles with [`crate::tile_scheduler`].
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

use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::gemm_sm80::{GemmArgs, GemmError};
use crate::launch::{Function, KernelArgs, LaunchConfig};
use crate::tile_scheduler::{RasterOrderOption, SchedulerParams, TileScheduler};
use crate::tma::encode_tiled_cached;
use rcute_atom::copy_ldsm::stmatrix;
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
use rcute_atom::{make_gmma_desc, Element, GmmaSmemAtom, GmmaSwizzle, Major, MmaAtom, Snippet, TmaEncodeArgs};
use rcute_collective::fusion::FusionCode;
pub use rcute_collective::Fusion;
use rcute_collective::Node;
pub use rcute_collective::Sm90Schedule;
use rcute_collective::{
    EpilogueCopyAtom, Sm90EpilogueConfig, Sm90EpiloguePlan, Sm90Mainloop, Sm90MainloopConfig, StorageOrder,
};
pub use rcute_collective::{FusionArgs, ScaleKind};
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, Layout};

/// Threads per warpgroup.
const WG: i64 = 128;
/// Shared memory an SM90 CTA may use (227 KiB).
pub const SM90_SMEM_CAPACITY: usize = 232_448;
/// Registers per thread of the producer warpgroup after `setmaxnreg.dec`.
pub const PRODUCER_REGS: u32 = 40;
/// Registers per thread of the consumer warpgroups after `setmaxnreg.inc`.
pub const CONSUMER_REGS: u32 = 232;
/// Alignment slack requested on top of the layout (the kernel aligns its base to 1 KiB).
const ALIGN_SLACK: usize = 1024;

/// The tile scheduler of a configuration.
fn scheduler(cfg: &GemmSm90Config) -> TileScheduler {
    TileScheduler {
        raster: cfg.raster,
        swizzle_log2: cfg.swizzle_log2,
        cluster: [cfg.cluster[0] as u32, cfg.cluster[1] as u32],
    }
}

/// Whether the schedule walks several tiles per CTA.
fn persistent(s: Sm90Schedule) -> bool {
    s != Sm90Schedule::WarpSpecialized
}

/// The configuration of one generated SM90 GEMM kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmSm90Config {
    /// Element type of A and B (`bf16` or `f16`).
    pub ab: Element,
    /// Element type of C and D (`bf16` or `f16`).
    pub cd: Element,
    /// The epilogue fusion (a visitor tree): what D is, per element, from the
    /// accumulator, C and broadcast operands. The default is the linear combination
    /// `alpha * acc + beta * C`; C is loaded only when the tree reads it, and then only when
    /// it is needed at run time (`beta != 0`).
    pub fusion: Fusion,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Cluster shape `(M, N)` (only `[1, 1]` for now).
    pub cluster: [i64; 2],
    /// Kernel schedule.
    pub schedule: Sm90Schedule,
    /// Pipeline stages (`None`: as many as fit).
    pub stages: Option<usize>,
    /// Epilogue subtile `(EPI_M, EPI_N)` (`None`: the builder's automatic choice).
    pub epi_tile: Option<[i64; 2]>,
    /// Shared memory capacity per CTA.
    pub smem_capacity: usize,
    /// Raster order of the persistent tile walk (resolved per problem for `Heuristic`).
    pub raster: RasterOrderOption,
    /// log2 of the tile-walk swizzle (bands of `2^swizzle_log2` tiles; clamped per problem).
    pub swizzle_log2: u32,
    /// `wgmma` batches a consumer warpgroup keeps in flight before it waits (CUTLASS's
    /// `K_PIPE_MMAS`): 1 waits for the previous k-tile's batch and releases its stage while
    /// the current one runs; 0 waits for the current batch and releases its stage at once,
    /// which frees stages a k-tile earlier (more loads in flight) and, with the cooperative
    /// schedule's two consumer warpgroups, still keeps the tensor cores busy with the other
    /// warpgroup's batch.
    pub mma_pipe: u32,
}

impl Eq for GemmSm90Config {}

impl std::hash::Hash for GemmSm90Config {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (
            self.ab,
            self.cd,
            self.tile,
            self.cluster,
            self.schedule,
            self.stages,
            self.epi_tile,
        )
            .hash(h);
        (self.smem_capacity, self.raster, self.swizzle_log2, self.mma_pipe).hash(h);
        (self.fusion.name(), self.fusion.describe()).hash(h);
    }
}

impl GemmSm90Config {
    /// Whether the kernel can read a source C (its fusion reads C).
    pub fn with_c(&self) -> bool {
        self.fusion.reads_source()
    }

    /// The same configuration with `D = alpha * acc` (no C: the epilogue's smem holds D
    /// only and the TMA stores are delayed, as CUTLASS's builder does without C).
    pub fn without_c(mut self) -> Self {
        self.fusion = Fusion::new(Node::scalar("alpha") * Node::acc())
            .and_then(|f| f.with_name("scale"))
            .expect("a valid two-node tree");
        self
    }

    /// bf16 in and out, K-major A and B, C readable, cluster 1x1, automatic stages and
    /// epilogue tile.
    pub fn bf16(tile: [i64; 3], schedule: Sm90Schedule) -> Self {
        GemmSm90Config {
            ab: Element::BF16,
            cd: Element::BF16,
            fusion: Fusion::linear_combination(),
            tile,
            cluster: [1, 1],
            schedule,
            stages: None,
            epi_tile: None,
            smem_capacity: SM90_SMEM_CAPACITY,
            raster: RasterOrderOption::Heuristic,
            swizzle_log2: 0,
            mma_pipe: 1,
        }
    }
}

/// The resolved plan of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90Plan {
    /// Stages of the mainloop pipeline.
    pub stages: usize,
    /// Consumer warpgroups.
    pub consumers: i64,
    /// Rows of the tile one consumer warpgroup computes.
    pub wg_rows: i64,
    /// `wgmma` m64 atoms per consumer warpgroup along M.
    pub m_atoms: i64,
    /// The `wgmma` atom (m64 x BN x 16).
    pub mma: MmaAtom,
    /// The K-major shared-memory atom of A and B.
    pub smem_atom: GmmaSmemAtom,
    /// Bytes of one stage of A / B.
    pub stage_bytes: [usize; 2],
    /// Epilogue subtile.
    pub epi_tile: [i64; 2],
    /// D buffers (`StagesD`, or `StagesC` with reuse).
    pub d_bufs: usize,
    /// C buffers (`StagesC`, 0 without C).
    pub c_bufs: usize,
    /// D is written into C's buffers.
    pub reuse_smem_c: bool,
    /// The TMA store of subtile `i` is issued in iteration `i + 1`.
    pub delay_tma_store: bool,
    /// Swizzle of the epilogue's subtile buffers (bytes of a row: the span).
    pub epi_swizzle: GmmaSwizzle,
    /// Byte offsets in the 1 KiB-aligned dynamic smem: A, B, epilogue, barriers.
    pub offsets: [usize; 4],
    /// Floats of one epilogue group's broadcast staging area (0: the fusion has no
    /// broadcast vectors): the tile's slices of the row / column vectors, loaded once per
    /// tile instead of at every element ([`rcute_collective::Fusion::staging_layout`]).
    pub bc_floats: i64,
    /// Byte offset of the staging areas (one per epilogue group, `bc_group_bytes` apart;
    /// outside the mainloop's storage even where the epilogue's buffers alias it).
    pub bc_offset: usize,
    /// Bytes of one group's staging area (16-byte multiple).
    pub bc_group_bytes: usize,
    /// Dynamic smem to request.
    pub smem_bytes: usize,
    /// The collective mainloop plan (stages, atoms, TMA boxes).
    pub mainloop: Sm90Mainloop,
    /// The collective epilogue plan (the builder's policy decisions).
    pub epilogue: Sm90EpiloguePlan,
}

/// A generated SM90 GEMM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedGemmSm90 {
    /// Kernel (and unit) name.
    pub name: String,
    /// The split-K reduction kernel's name (`<name>_splitk_reduce`), in the same unit.
    pub reduce_name: String,
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

fn cfg_err(s: impl Into<String>) -> GemmError {
    GemmError::Config(s.into())
}

/// Resolve the plan: the collective builders ([`Sm90EpiloguePlan`], [`Sm90Mainloop`])
/// choose the epilogue policy and the stage count; this generator adds its own limits (one
/// 128-byte TMA box per operand row, `stmatrix.x4`, row-major C / D, 16-bit types) and
/// lays out the shared memory.
pub fn plan(cfg: &GemmSm90Config) -> Result<Sm90Plan, GemmError> {
    let [bm, bn, bk] = cfg.tile;
    if !matches!(
        cfg.ab,
        Element::BF16 | Element::F16 | Element::S8 | Element::E4M3 | Element::E5M2
    ) {
        return Err(cfg_err(format!(
            "A/B must be bf16, f16, s8, e4m3 or e5m2, got {}",
            cfg.ab.ptx()
        )));
    }
    if !matches!(cfg.cd, Element::BF16 | Element::F16) {
        return Err(cfg_err(format!("C/D must be bf16 or f16, got {}", cfg.cd.ptx())));
    }
    let [cm, cn] = cfg.cluster;
    if !matches!(cm, 1 | 2 | 4) || !matches!(cn, 1 | 2 | 4) || cm * cn > 8 {
        return Err(cfg_err(format!(
            "cluster {cm}x{cn}: each extent must be 1, 2 or 4, at most 8 CTAs"
        )));
    }
    // Multicast slices: A's BM rows split across the cn CTAs of a cluster row, B's BN rows
    // across the cm CTAs of a cluster column; a slice must keep whole 8-row swizzle atoms.
    if cfg.tile[0] % (8 * cn) != 0 || cfg.tile[1] % (8 * cm) != 0 {
        return Err(cfg_err(format!(
            "tile {:?} with cluster {cm}x{cn}: BM / cluster_n and BN / cluster_m must be multiples of 8",
            cfg.tile
        )));
    }
    if cfg.mma_pipe > 1 {
        return Err(cfg_err(format!(
            "mma_pipe {}: the generator keeps 0 or 1 wgmma batches in flight",
            cfg.mma_pipe
        )));
    }
    let eb = cfg.ab.bytes() as i64;
    if bk * eb != 128 {
        return Err(cfg_err(format!(
            "BK * element bytes must be 128 (one 128B swizzle row), got BK={bk}"
        )));
    }
    let mut ecfg = Sm90EpilogueConfig::new(
        cfg.tile,
        cfg.schedule,
        cfg.with_c().then_some(cfg.cd),
        cfg.cd,
        StorageOrder::RowMajor,
    );
    ecfg.epi_tile = cfg.epi_tile;
    let epi = Sm90EpiloguePlan::new(&ecfg).map_err(|e| cfg_err(e.to_string()))?;
    let [em, en] = epi.epi_tile;
    let db = cfg.cd.bytes() as i64;
    if epi.copy_atom_c != EpilogueCopyAtom::StsmX4 {
        return Err(cfg_err(format!(
            "epilogue tile {em}x{en}: this generator stores with stmatrix.x4 (EPI_N % 16 == 0)"
        )));
    }
    let epi_swizzle = epi.smem_atom_d.mode;
    if epi.smem_atom_d.major != Major::K || epi_swizzle.span_bytes() != en * db {
        return Err(cfg_err(format!(
            "epilogue tile {em}x{en}: the generator needs one swizzle atom per subtile row (EPI_N * bytes = 32, 64 or 128), the builder chose {}",
            epi.smem_atom_d
        )));
    }
    if em % 64 != 0 {
        return Err(cfg_err(format!(
            "epilogue tile {em}x{en}: EPI_M must be a multiple of 64"
        )));
    }
    let pp = cfg.schedule == Sm90Schedule::PingPong;
    // Ping-pong: each consumer warpgroup gets its own epilogue buffers (the two epilogues
    // may overlap), so the mainloop sees one more epilogue's worth of carve-out.
    let epi_sets = if pp { 2 } else { 1 };
    let sub_bytes = (em * en * db) as usize;
    let epi_set_bytes = sub_bytes
        * (epi.stages_d.max(if epi.reuse_smem_c { epi.stages_c } else { 0 })
            + if epi.reuse_smem_c { 0 } else { epi.stages_c });
    let d_bufs = if epi.reuse_smem_c { epi.stages_c } else { epi.stages_d };
    let c_bar_bytes = epi_sets * epi.stages_c * 16;
    let bc_floats = cfg.fusion.staging_layout(bm, bn).iter().map(|b| b.extent).sum::<i64>();
    let bc_group_bytes = (bc_floats as usize * 4).div_ceil(16) * 16;
    let extra = ALIGN_SLACK + c_bar_bytes + epi_sets * bc_group_bytes + if pp { epi.smem_bytes } else { 0 };
    let mcfg = Sm90MainloopConfig {
        a: cfg.ab,
        b: cfg.ab,
        acc: acc_element(cfg.ab),
        a_major: Major::K,
        b_major: Major::K,
        tile: cfg.tile,
        cluster: cfg.cluster,
        schedule: cfg.schedule,
        stages: cfg.stages,
        smem_capacity: cfg.smem_capacity.saturating_sub(extra),
    };
    let ml = Sm90Mainloop::new(&mcfg, &epi).map_err(|e| cfg_err(e.to_string()))?;
    if ml.n_atoms != 1 || ml.tma_boxes_per_stage_a != 1 || ml.tma_boxes_per_stage_b != 1 {
        return Err(cfg_err(format!(
            "tile {bm}x{bn}x{bk}: the generator issues one wgmma atom along N and one TMA box per operand"
        )));
    }
    let consumers = ml.consumer_warpgroups as i64;
    let wg_rows = ml.wg_tile[0];
    let m_atoms = ml.m_atoms_per_wg;
    if m_atoms * bn / 2 > 128 {
        return Err(cfg_err(format!(
            "{} accumulators per thread exceed 128",
            m_atoms * bn / 2
        )));
    }
    let stages = ml.stages;
    let stage_bytes = [(bm * bk * eb) as usize, (bn * bk * eb) as usize];
    let main_bytes = stages * (stage_bytes[0] + stage_bytes[1]);
    let epi_bytes = epi_sets * epi_set_bytes;
    let (off_epi, after) = if ml.storage_union {
        (0, main_bytes.max(epi_bytes))
    } else {
        (main_bytes, main_bytes + epi_bytes)
    };
    let bc_offset = after.div_ceil(16) * 16;
    let off_bar = (bc_offset + epi_sets * bc_group_bytes).div_ceil(8) * 8;
    let smem_bytes = off_bar + stages * 16 + c_bar_bytes + ALIGN_SLACK;
    if smem_bytes > cfg.smem_capacity {
        return Err(cfg_err(format!(
            "needs {smem_bytes} B of shared memory, capacity {}",
            cfg.smem_capacity
        )));
    }
    Ok(Sm90Plan {
        stages,
        consumers,
        wg_rows,
        m_atoms,
        mma: ml.mma_atom.clone(),
        smem_atom: ml.smem_atom_a.clone(),
        stage_bytes,
        epi_tile: epi.epi_tile,
        d_bufs,
        c_bufs: epi.stages_c,
        reuse_smem_c: epi.reuse_smem_c,
        delay_tma_store: epi.delay_tma_store,
        epi_swizzle,
        offsets: [0, stages * stage_bytes[0], off_epi, off_bar],
        bc_floats,
        bc_offset,
        bc_group_bytes,
        smem_bytes,
        mainloop: ml,
        epilogue: epi,
    })
}

/// The byte offset of `(row, col)` in one epilogue subtile buffer, as the kernel computes
/// it: row-major rows of `EPI_N * bytes` (one swizzle span) and the span's byte swizzle
/// `Swizzle<B,4,3>` (`B = log2(span / 16)`). Equal to the epilogue plan's
/// `smem_layout_d` (checked in the tests).
pub fn epi_byte_offset(p: &Sm90Plan, row: i64, col: i64, elem_bytes: i64) -> i64 {
    let o = row * p.epi_tile[1] * elem_bytes + col * elem_bytes;
    let mask = (p.epi_swizzle.span_bytes() / 16 - 1) << 4;
    o ^ ((o >> 3) & mask)
}

/// The accumulator type of an input type: s32 for s8, f32 otherwise.
pub fn acc_element(ab: Element) -> Element {
    if ab == Element::S8 {
        Element::S32
    } else {
        Element::F32
    }
}

/// The C++ type of an accumulator register.
fn acc_cty(ab: Element) -> &'static str {
    if ab == Element::S8 {
        "int32_t"
    } else {
        "float"
    }
}

/// The kernel name, e.g. `rc_gemm_sm90_bf16_tn_128x256x64_coop_c1x1_s4_e128x32`.
pub fn kernel_name(cfg: &GemmSm90Config, p: &Sm90Plan) -> String {
    let [bm, bn, bk] = cfg.tile;
    let out = if cfg.cd == cfg.ab {
        String::new()
    } else {
        format!("_d{}", cfg.cd.ptx())
    };
    // The default tree adds nothing; the C-less scale is `_noc`; other trees add their name.
    let noc = match cfg.fusion.name().as_str() {
        "lincomb" => String::new(),
        "scale" => "_noc".to_string(),
        other => format!("_{other}"),
    };
    // The default wgmma pipelining (one batch in flight) adds nothing.
    let pipe = if cfg.mma_pipe == 1 {
        String::new()
    } else {
        format!("_w{}", cfg.mma_pipe)
    };
    format!(
        "rc_gemm_sm90_{}{out}_tn_{bm}x{bn}x{bk}_{}_c{}x{}_s{}_e{}x{}{pipe}{noc}",
        cfg.ab.ptx(),
        cfg.schedule.tag(),
        cfg.cluster[0],
        cfg.cluster[1],
        p.stages,
        p.epi_tile[0],
        p.epi_tile[1]
    )
}

fn e(s: impl Into<String>) -> Stmt {
    Stmt::Expr(s.into())
}
fn c(s: impl Into<String>) -> Stmt {
    Stmt::Comment(s.into())
}
fn d(ty: &str, name: &str, init: impl Into<String>) -> Stmt {
    Stmt::decl(ty, name, init)
}
fn dc(ty: &str, name: &str, init: impl Into<String>, comment: impl Into<String>) -> Stmt {
    Stmt::Decl {
        ty: ty.into(),
        name: name.into(),
        init: Some(init.into()),
        comment: Some(comment.into()),
    }
}
fn if_(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise: vec![],
    }
}
/// consumer_release of stage `prev`: a local arrive, or (in a cluster) a remote arrive on
/// every CTA whose producer writes into this stage.
fn release(clustered: bool, ctas: i64) -> Vec<Stmt> {
    if !clustered {
        return vec![e("rc_mbarrier_arrive(bar_empty + 8 * prev)")];
    }
    vec![for_(
        "r",
        "0",
        ctas.to_string(),
        vec![if_(
            "(peers >> r) & 1",
            vec![e("rc_mbarrier_arrive_cluster(bar_empty + 8 * prev, (uint32_t)r)")],
        )],
    )]
}

/// The persistent tile walk: this CTA's work ids.
fn work_loop(body: Vec<Stmt>) -> Stmt {
    Stmt::Loop {
        init: "unsigned long long work = sched.first_work()".into(),
        cond: "work < sched.total_work".into(),
        step: "work += sched.stride()".into(),
        body,
    }
}
fn for_(var: &str, start: impl Into<String>, end: impl Into<String>, body: Vec<Stmt>) -> Stmt {
    Stmt::For {
        var: var.into(),
        start: start.into(),
        end: end.into(),
        unroll: false,
        body,
    }
}

/// Local device helpers: shared address of a generic pointer, an accumulator register
/// fence (CuTe's `warpgroup_fence_operand`), packing two floats, pipeline advance.
fn helpers(cd: Element) -> String {
    let pack = match cd {
        Element::BF16 => "__nv_bfloat162 h = __floats2bfloat162_rn(x, y);",
        _ => "__half2 h = __floats2half2_rn(x, y);",
    };
    let unpack = match cd {
        Element::BF16 => "__nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162*>(&v);\n  *x = __low2float(h);\n  *y = __high2float(h);",
        _ => "__half2 h = *reinterpret_cast<__half2*>(&v);\n  *x = __low2float(h);\n  *y = __high2float(h);",
    };
    format!(
        r#"// rcute sm90 GEMM helpers.
__device__ __forceinline__ uint32_t rc_smem_u32(const void* p) {{
  return (uint32_t)__cvta_generic_to_shared(p);
}}
// Keep the compiler from moving accumulator accesses across wgmma (warpgroup_fence_operand).
__device__ __forceinline__ void rc_fence_acc(float& r) {{ asm volatile("" : "+f"(r)::"memory"); }}
__device__ __forceinline__ void rc_fence_acc(int32_t& r) {{ asm volatile("" : "+r"(r)::"memory"); }}
// Two floats rounded to the output type, packed in 32 bits.
__device__ __forceinline__ uint32_t rc_pack2(float x, float y) {{
  {pack}
  return *reinterpret_cast<uint32_t*>(&h);
}}
// Two output-type values packed in 32 bits, widened to float.
__device__ __forceinline__ void rc_unpack2(uint32_t v, float* x, float* y) {{
  {unpack}
}}
// PipelineState: advance (index, phase) by n stages of a ring of `stages`.
__device__ __forceinline__ void rc_pipe_advance(uint32_t& index, uint32_t& phase, uint32_t n, uint32_t stages) {{
  index += n;
  phase ^= (index / stages) & 1u;
  index %= stages;
}}
// ldmatrix x4 (no transpose) at a shared address.
__device__ __forceinline__ void rc_ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {{
  asm volatile("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {{%0, %1, %2, %3}}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}}
struct __align__(64) rc_tmap_t {{ unsigned long long opaque[16]; }};
"#
    )
}

/// Generate the kernel of a configuration.
pub fn generate(cfg: &GemmSm90Config) -> Result<GeneratedGemmSm90, GemmError> {
    let p = plan(cfg)?;
    let name = kernel_name(cfg, &p);
    let mut config = cfg.clone();
    config.stages = Some(p.stages);
    let [em, en] = p.epi_tile;
    let sub_bits = em * en * cfg.cd.bits() as i64;
    let [bm, bn, bk] = cfg.tile;
    let snippets: Vec<Snippet> = vec![
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
        tma_load(
            3,
            true,
            (bm * bk * cfg.ab.bits() as i64).max(bn * bk * cfg.ab.bits() as i64),
        )
        .snippet,
        mbarrier_arrive_cluster(),
        cluster_arrive(),
        cluster_arrive_relaxed(),
        cluster_wait(),
        tma_load(
            3,
            false,
            (bm * bk * cfg.ab.bits() as i64).max(bn * bk * cfg.ab.bits() as i64),
        )
        .snippet,
        tma_store(3, sub_bits).snippet,
        bulk_commit_group(),
        bulk_wait_group_read(),
        bulk_wait_group(),
        stmatrix(4, false).snippet,
        wgmma_fence(),
        wgmma_commit_group(),
        wgmma_wait_group(),
        p.mma.snippet.clone(),
    ];
    let mut items = unit_preamble(&snippets, "");
    items.push(scheduler(cfg).device_item(&name));
    items.push(Item::Snippet {
        origin: "rcute sm90 helpers".into(),
        code: helpers(cfg.cd),
    });
    let fusion = if p.bc_floats > 0 {
        cfg.fusion.emit_staged("rc_fusion", bm, bn)
    } else {
        cfg.fusion.emit("rc_fusion")
    }
    .map_err(|e| cfg_err(format!("fusion: {e}")))?;
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
    items.push(Item::Snippet {
        origin: format!("rcute-collective fusion {}", cfg.fusion.name()),
        code: fusion.source(),
    });
    items.push(Item::Snippet {
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
    });
    items.push(Item::Function(kernel(&config, &p, &name, &fusion)?));
    items.push(Item::Function(reduce_kernel(&config, &name, &fusion)));
    let unit = Unit {
        header: vec![
            format!("{name}: generated by rcute (crates/kernel/src/gemm_sm90.rs); do not edit."),
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
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedGemmSm90 {
        reduce_name: format!("{name}_splitk_reduce"),
        name,
        source: unit.render(),
        threads: ((1 + p.consumers) * WG) as u32,
        smem_bytes: p.smem_bytes as u32,
        config,
        plan: p,
    })
}

/// The descriptor expression (upper fields constant) of the K-major operand block of 64
/// (or BN) rows and one k-block of 16 elements, at the shared address `addr`.
fn desc_expr(p: &Sm90Plan, rows: i64, bk: i64, addr: &str) -> Result<String, GemmError> {
    let tile = p
        .smem_atom
        .layout
        .tile_to_shape(&tuple!(rows, bk), None)
        .map_err(|e| cfg_err(e.to_string()))?;
    let k = p.mma.shape_mnk[2];
    let kblock = tile
        .compose_tiler(&Tiler::shape(&[rows, k]))
        .map_err(|e| cfg_err(e.to_string()))?;
    let desc =
        make_gmma_desc(Major::K, p.smem_atom.mode, &kblock, p.smem_atom.elem).map_err(|e| cfg_err(e.to_string()))?;
    desc.device_expr(addr).map_err(|e| cfg_err(e.to_string()))
}

/// Byte offset of k-block `kb` in a K-major tile (the unswizzled column offset).
fn kblock_bytes(p: &Sm90Plan, bk: i64, kb: i64) -> Result<i64, GemmError> {
    let tile: Layout = p
        .smem_atom
        .layout
        .tile_to_shape(&tuple!(8, bk), None)
        .map_err(|e| cfg_err(e.to_string()))?;
    let k = p.mma.shape_mnk[2];
    let kk = kb * k;
    let off = tile.crd2idx(&tuple!(0, kk)).map_err(|e| cfg_err(e.to_string()))?;
    Ok(off.as_static().unwrap_or(0) * p.smem_atom.elem.bytes() as i64)
}

fn kernel(cfg: &GemmSm90Config, p: &Sm90Plan, name: &str, fusion: &FusionCode) -> Result<CFunction, GemmError> {
    let staged = p.bc_floats > 0;
    // The fusion at the accumulator element (gm + mm, gn + nn): with staged broadcasts, also
    // the element's position in the tile, where the staging area is indexed.
    let visit = |acc: &str, c: &str, mm: i64, nn: i64| -> String {
        if staged {
            format!(
                "rc_visit_staged_at(p, (float){acc}, {c}, gm + {mm}, gn + {nn}, batch, M, N, bc, gm + {mm} - m0, gn + {nn} - n0)"
            )
        } else {
            format!("rc_visit_at(p, (float){acc}, {c}, gm + {mm}, gn + {nn}, batch, M, N)")
        }
    };
    let [bm, bn, bk] = cfg.tile;
    let [em, en] = p.epi_tile;
    let s = p.stages;
    let sched = cfg.schedule;
    let coop = sched == Sm90Schedule::Cooperative;
    let pp = sched == Sm90Schedule::PingPong;
    let nacc = bn / 2;
    let ab_bytes = cfg.ab.bytes() as i64;
    let row_bytes = bk * ab_bytes;
    let db = cfg.cd.bytes() as i64;
    let sub_bytes = em * en * db;
    let epi_threads = if coop { 2 * WG } else { WG };
    let [cm, cn] = cfg.cluster;
    let clustered = cm * cn > 1;
    // Consumer warps release a stage to every CTA that writes into it: itself, the CTAs
    // of its cluster row (A multicast) and of its cluster column (B multicast).
    let empty_arrivals = if coop { 8 } else { 4 } * (cm + cn - 1);
    let tx = p.stage_bytes[0] + p.stage_bytes[1];
    let span = p.epi_swizzle.span_bytes();
    let swz_mask = (span / 16 - 1) << 4;
    let [off_a, off_b, off_epi, off_bar] = p.offsets;
    let epi_set_bytes = sub_bytes as usize * (p.d_bufs + if p.reuse_smem_c { 0 } else { p.c_bufs });
    let mut b: Vec<Stmt> = Vec::new();

    b.push(c("Shared memory (byte offsets from a 1 KiB-aligned base):"));
    b.push(c(format!(
        "  sA (BM,BK,PIPE) = ({bm},{bk},{s}) of {} at {off_a}",
        p.smem_atom
    )));
    b.push(c(format!("  sB (BN,BK,PIPE) = ({bn},{bk},{s}) at {off_b}")));
    b.push(c(format!(
        "  epilogue at {off_epi}{}: {} D buffer(s){} of ({em},{en}) row-major, Swizzle<{},4,3> on bytes (TMA {:?})",
        if off_epi == 0 {
            " (a union with the mainloop: the non-persistent schedule)"
        } else {
            ""
        },
        p.d_bufs,
        if p.reuse_smem_c {
            " = the C buffers (ReuseSmemC)".to_string()
        } else {
            format!(" + {} C buffer(s)", p.c_bufs)
        },
        (span / 16).trailing_zeros(),
        p.epi_swizzle
    )));
    b.push(c(format!(
        "  mbarriers at {off_bar}: full[{s}], empty[{s}], then C full/empty"
    )));
    b.push(e("extern __shared__ __align__(1024) unsigned char rc_smem_raw[]"));
    b.push(d(
        "unsigned char* const",
        "smem",
        "rc_smem_raw + ((1024u - (rc_smem_u32(rc_smem_raw) & 1023u)) & 1023u)",
    ));
    b.push(d("const uint32_t", "smem_u32", "rc_smem_u32(smem)"));
    b.push(d("const uint32_t", "bar_full", format!("smem_u32 + {off_bar}u")));
    b.push(d("const uint32_t", "bar_empty", format!("bar_full + {}u", 8 * s)));
    b.push(dc(
        "const uint32_t",
        "bar_c_full",
        format!("bar_full + {}u", 16 * s),
        "C pipeline: per C stage (and ping-pong group) a [full, empty] pair of mbarriers, 16 B apart",
    ));
    if cfg.with_c() {
        b.push(d("const uint32_t", "bar_c_empty", "bar_c_full + 8u"));
    }
    b.push(d("const int", "wg", "threadIdx.x / 128"));
    b.push(d("const int", "warp", "(threadIdx.x / 32) % 4"));
    b.push(d("const int", "lane", "threadIdx.x % 32"));
    b.push(d("const int", "k_tiles", format!("(K + {}) / {bk}", bk - 1)));
    b.push(dc(
        "const int",
        "k_iters",
        "split_k > 1 ? (k_tiles + split_k - 1) / split_k : k_tiles",
        "k-tiles per work item: every split runs the same count (TMA zero-fills past K)",
    ));
    b.push(c(
        "persistent tile scheduler: raster order and swizzle resolved on the host",
    ));
    b.push(e(format!(
        "const {name}_sched sched(sched_tiles_m, sched_tiles_n, sched_batches, sched_along_n, sched_log_swizzle)"
    )));
    b.push(c(format!(
        "cluster {cm}x{cn}: A is multicast along the cluster's N ranks (each loads BM/{cn} rows), B along its M ranks (BN/{cm} rows)"
    )));
    b.push(d("const int", "rank_m", "sched.rank_m()"));
    b.push(d("const int", "rank_n", "sched.rank_n()"));
    b.push(d("const int", "a_rows", format!("rank_n * {}", cfg.tile[0] / cn)));
    b.push(d("const int", "b_rows", format!("rank_m * {}", cfg.tile[1] / cm)));
    b.push(d("const int", "a_slice", format!("a_rows * {row_bytes}")));
    b.push(d("const int", "b_slice", format!("b_rows * {row_bytes}")));
    b.push(dc(
        "uint16_t",
        "mask_a",
        "0",
        "%cluster_ctarank = rank_m + rank_n * cluster_m",
    ));
    b.push(d("uint16_t", "mask_b", "0"));
    b.push(for_(
        "j",
        "0",
        cn.to_string(),
        vec![e(format!("mask_a |= (uint16_t)(1u << (rank_m + j * {cm}))"))],
    ));
    b.push(for_(
        "i",
        "0",
        cm.to_string(),
        vec![e(format!("mask_b |= (uint16_t)(1u << (i + rank_n * {cm}))"))],
    ));
    if clustered {
        b.push(dc(
            "const uint16_t",
            "peers",
            "mask_a | mask_b",
            "the CTAs whose loads land in this CTA's stages",
        ));
    }
    b.push(dc(
        "const bool",
        "load_c",
        format!("({}) && split_k == 1", fusion.source_needed),
        "is_source_needed (split-K applies the fusion in the reduction instead)",
    ));
    let c_groups = if pp { 2 } else { 1 };
    b.push(if_(
        "threadIdx.x == 0",
        vec![
            for_(
                "i",
                "0",
                s.to_string(),
                vec![
                    e("rc_mbarrier_init(bar_full + 8 * i, 1)"),
                    e(format!("rc_mbarrier_init(bar_empty + 8 * i, {empty_arrivals})")),
                ],
            ),
            for_(
                "i",
                "0",
                (p.c_bufs * c_groups).to_string(),
                vec![
                    e("rc_mbarrier_init(bar_c_full + 16 * i, 1)"),
                    e("rc_mbarrier_init(bar_c_full + 16 * i + 8, 1)"),
                ],
            ),
            e("rc_fence_mbarrier_init()"),
        ],
    ));
    b.push(if_(
        "threadIdx.x == 32",
        vec![
            e("rc_prefetch_tensormap(&tmap_a)"),
            e("rc_prefetch_tensormap(&tmap_b)"),
            e("rc_prefetch_tensormap(&tmap_d)"),
            if_("load_c", vec![e("rc_prefetch_tensormap(&tmap_c)")]),
        ],
    ));
    b.push(e("__syncthreads()"));
    if clustered {
        b.push(c(
            "every CTA's barriers are initialized before any partner multicasts into it",
        ));
        b.push(e("rc_cluster_arrive_relaxed()"));
        b.push(e("rc_cluster_wait()"));
    }

    // Tile walk (shared by producer and consumers so they agree on the order).
    let tile_of = |work: &str| -> Vec<Stmt> {
        vec![
            Stmt::Decl {
                ty: "int".into(),
                name: "tile_m, tile_n, batch".into(),
                init: None,
                comment: None,
            },
            c("work ids past the problem (padding of the swizzle bands) are skipped by every role alike"),
            if_(format!("!sched.cluster_valid({work})"), vec![Stmt::Continue]),
            c("a CTA whose tile lies past the edge still loads (TMA zero-fills) for its cluster partners"),
            e(format!("sched.tile({work}, tile_m, tile_n, batch)")),
            dc(
                "const int",
                "split",
                "batch / L",
                "the scheduler's batches are (split, batch) pairs, split slowest",
            ),
            Stmt::assign("batch", "batch % L"),
            d("const int", "kt0", "split * k_iters"),
            d("const int", "m0", format!("tile_m * {bm}")),
            d("const int", "n0", format!("tile_n * {bn}")),
        ]
    };

    // ---- producer warpgroup ----
    let mut prod = vec![e(format!("rc_setmaxnreg_dec<{PRODUCER_REGS}>()"))];
    let mut ml = vec![d("uint32_t", "stage", "0"), d("uint32_t", "phase", "0")];
    let mut body = tile_of("work");
    body.push(for_(
        "kt",
        "kt0",
        "kt0 + k_iters",
        vec![
            dc(
                "const uint32_t",
                "full",
                "bar_full + 8 * stage",
                "producer_acquire: wait for the consumers to free the stage",
            ),
            e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
            e(format!("rc_mbarrier_arrive_expect_tx(full, {tx}u)")),
            c("TMA boxes (BK, BM) / (BK, BN) at (k, row, batch); out-of-bounds elements are zero-filled"),
            e(format!(
                "{}(smem + {off_a} + stage * {} + a_slice, &tmap_a, full{}, kt * {bk}, m0 + a_rows, batch)",
                if cn > 1 {
                    "rc_tma_load_3d_multicast"
                } else {
                    "rc_tma_load_3d"
                },
                p.stage_bytes[0],
                if cn > 1 { ", mask_a" } else { "" },
            )),
            e(format!(
                "{}(smem + {off_b} + stage * {} + b_slice, &tmap_b, full{}, kt * {bk}, n0 + b_rows, batch)",
                if cm > 1 {
                    "rc_tma_load_3d_multicast"
                } else {
                    "rc_tma_load_3d"
                },
                p.stage_bytes[1],
                if cm > 1 { ", mask_b" } else { "" },
            )),
            e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")),
        ],
    ));
    ml.push(work_loop(body));
    let union = p.mainloop.storage_union;
    if union && cfg.with_c() {
        ml.push(c(
            "load_tail: the epilogue's buffers alias the mainloop's (union), so wait until the consumers",
        ));
        ml.push(c("have released every stage before C is loaded into them"));
        ml.push(for_(
            "i",
            "0",
            s.to_string(),
            vec![
                e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
                e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")),
            ],
        ));
    }
    let mut ml_block = vec![
        c("Mainloop producer: one elected thread issues every TMA load"),
        Stmt::Block(ml),
    ];
    if cfg.with_c() {
        // Epilogue producer: C subtiles into the C buffers.
        let mut cl = vec![
            d("uint32_t", "cstage", "0u"),
            d("uint32_t", "cphase", "0u"),
            d("int", "local", "0"),
        ];
        if pp {
            cl.push(dc(
                "uint32_t",
                "cstage_other",
                "0u",
                "ping-pong: the other group's C pipeline state (groups alternate tiles)",
            ));
            cl.push(d("uint32_t", "cphase_other", "0u"));
        }
        let mut body = tile_of("work");
        body.retain(|st| !matches!(st, Stmt::Decl { name, .. } if name == "kt0" || name == "split"));
        body.push(d("const int", "grp", if pp { "local & 1" } else { "0" }));
        let mut sub = vec![];
        for sn in 0..bn / en {
            for sm in 0..bm / em {
                sub.push(e(format!(
                    "rc_mbarrier_wait_parity(bar_c_empty + 16 * (grp * {} + cstage), cphase ^ 1u)",
                    p.c_bufs
                )));
                sub.push(d(
                    "const uint32_t",
                    &format!("cf_{sn}_{sm}"),
                    format!("bar_c_full + 16 * (grp * {} + cstage)", p.c_bufs),
                ));
                sub.push(e(format!("rc_mbarrier_arrive_expect_tx(cf_{sn}_{sm}, {sub_bytes}u)")));
                sub.push(e(format!(
                    "rc_tma_load_3d(smem + {off_epi} + grp * {epi_set_bytes} + cstage * {sub_bytes}, &tmap_c, cf_{sn}_{sm}, n0 + {}, m0 + {}, batch)",
                    sn * en,
                    sm * em
                )));
                sub.push(e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", p.c_bufs)));
            }
        }
        body.push(if_("load_c", sub));
        if pp {
            body.push(e("uint32_t t = cstage; cstage = cstage_other; cstage_other = t"));
            body.push(e("t = cphase; cphase = cphase_other; cphase_other = t"));
        }
        body.push(e("++local"));
        cl.push(work_loop(body));
        let c_block = vec![
            c("Epilogue producer: TMA loads of C subtiles (StagesC buffers, transaction-count mbarriers)"),
            Stmt::Block(cl),
        ];
        if union {
            ml_block.extend(c_block);
        } else {
            prod.push(if_("warp == 1 && rc_elect_one_sync()", c_block));
        }
    }
    prod.insert(1, if_("warp == 0 && rc_elect_one_sync()", ml_block));

    // ---- consumer warpgroups ----
    let mut cons = vec![e(format!("rc_setmaxnreg_inc<{CONSUMER_REGS}>()"))];
    if coop || pp {
        cons.push(dc("const int", "cw", "wg - 1", "consumer warpgroup index"));
    }
    cons.push(dc(
        "const int",
        "wg_row0",
        if coop {
            format!("cw * {}", p.wg_rows)
        } else {
            "0".into()
        },
        "first tile row of this warpgroup's accumulators",
    ));
    cons.push(dc(
        "const int",
        "grp",
        if pp { "cw" } else { "0" },
        "epilogue group: the warpgroups that store a tile together",
    ));
    cons.push(dc(
        "const bool",
        "epi_leader",
        if coop {
            "threadIdx.x == 128"
        } else {
            "(threadIdx.x % 128) == 0"
        },
        "issues the group's TMA stores",
    ));
    if staged {
        cons.push(dc(
            "const int",
            "epi_tid",
            if coop { "threadIdx.x - 128" } else { "threadIdx.x % 128" },
            "thread index within the epilogue group",
        ));
    }
    cons.push(d(
        "unsigned char* const",
        "epi_smem",
        format!("smem + {off_epi} + grp * {epi_set_bytes}"),
    ));
    cons.push(d(
        "const uint32_t",
        "epi_bar",
        if pp { "1u + (uint32_t)cw" } else { "1u".into() },
    ));
    cons.push(d("uint32_t", "stage", "0"));
    cons.push(d("uint32_t", "phase", "0"));
    cons.push(d("uint32_t", "cstage", "0"));
    cons.push(d("uint32_t", "cphase", "0"));
    cons.push(dc(
        "uint32_t",
        "dbuf",
        "0",
        "D buffer ring index (when not reusing C's buffers)",
    ));
    cons.push(d("int", "local", "0"));
    if pp {
        cons.push(c(
            "Ping-pong: warpgroup cw takes the CTA's tiles cw, cw+2, ...; its pipeline view skips the other's k-tiles",
        ));
        cons.push(e(format!(
            "rc_pipe_advance(stage, phase, (uint32_t)(cw * k_iters), {s}u)"
        )));
    }
    cons.push(Stmt::Array {
        ty: acc_cty(cfg.ab).into(),
        name: format!("acc[{}]", p.m_atoms),
        len: nacc as usize,
        comment: Some(format!(
            "CLayout_64x{bn} per m64 atom: acc[a][4j+2h+e] = (row 16*warp + lane/4 + 8h, col 8j + 2*(lane%4) + e)"
        )),
    });

    let mut tile = tile_of("work");
    if pp {
        // After the validity check, so only real tiles alternate between the warpgroups.
        tile.insert(3, if_("(local & 1) != cw", vec![e("++local"), Stmt::Continue]));
    }
    let layout = fusion.staged.as_ref().map(|st| st.layout.clone()).unwrap_or_default();
    // Each slot's values this thread stages: (register, slot, index in the slot).
    let mut bc_regs: Vec<(usize, usize, i64)> = vec![];
    for (k, slot) in layout.iter().enumerate() {
        for j in 0..(slot.extent + epi_threads - 1) / epi_threads {
            bc_regs.push((bc_regs.len(), k, j * epi_threads));
        }
    }
    if staged {
        let fetch = &fusion.staged.as_ref().expect("staged fusion").fetch_name;
        tile.push(c(
            "Broadcast staging (1/2): this thread's share of the tile's broadcast vectors, loaded before the",
        ));
        tile.push(c(
            "mainloop so that their latency hides behind it (rc_fusion_broadcast has the slot layout)",
        ));
        tile.push(Stmt::Array {
            ty: "float".into(),
            name: "bc_r".into(),
            len: bc_regs.len(),
            comment: None,
        });
        let mut loads = vec![];
        for &(r, k, base) in &bc_regs {
            let slot = &layout[k];
            let (origin, lim) = match slot.broadcast.axis {
                rcute_collective::BroadcastAxis::Row => ("n0", "N"),
                rcute_collective::BroadcastAxis::Col => ("m0", "M"),
            };
            let i = format!("epi_tid + {base}");
            let in_slot = if base + epi_threads <= slot.extent {
                String::new()
            } else {
                format!("{i} < {} && ", slot.extent)
            };
            loads.push(Stmt::assign(
                format!("bc_r[{r}]"),
                format!("({in_slot}{origin} + {i} < {lim}) ? {fetch}(p, {k}, {origin} + {i}, batch) : 0.0f"),
            ));
        }
        tile.push(if_("split_k == 1", loads));
    }
    // Mainloop.
    let mut mainloop = vec![];
    mainloop.push(for_(
        "a",
        "0",
        p.m_atoms.to_string(),
        vec![Stmt::unrolled("i", nacc, vec![Stmt::assign("acc[a][i]", "0")])],
    ));
    if pp {
        mainloop.push(c(
            "Ordered math: wait for the other warpgroup's mainloop of the previous tile",
        ));
        mainloop.push(if_(
            "local > 0",
            vec![e("rc_named_barrier_sync(3u + (uint32_t)cw, 256u)")],
        ));
    }
    mainloop.push(d("uint32_t", "prev", "0"));
    let mut kloop = vec![
        c("consumer_wait: the stage's TMA transactions have landed"),
        e("rc_mbarrier_wait_parity(bar_full + 8 * stage, phase)"),
        d(
            "const uint32_t",
            "a_base",
            format!(
                "smem_u32 + {off_a}u + stage * {}u + (uint32_t)wg_row0 * {row_bytes}u",
                p.stage_bytes[0]
            ),
        ),
        d(
            "const uint32_t",
            "b_base",
            format!("smem_u32 + {off_b}u + stage * {}u", p.stage_bytes[1]),
        ),
        Stmt::unrolled(
            "a",
            p.m_atoms,
            vec![Stmt::unrolled("i", nacc, vec![e("rc_fence_acc(acc[a][i])")])],
        ),
        e("rc_wgmma_fence()"),
    ];
    let kk = p.mma.shape_mnk[2];
    for a in 0..p.m_atoms {
        for kb in 0..bk / kk {
            let kb_off = kblock_bytes(p, bk, kb)?;
            let da = desc_expr(p, 64, bk, &format!("a_base + {}u", a * 64 * row_bytes + kb_off))?;
            let dbx = desc_expr(p, bn, bk, &format!("b_base + {kb_off}u"))?;
            kloop.push(c(format!(
                "m64 atom {a}, k-block {kb}: K-major SW128 descriptors (LBO/SBO from make_gmma_desc)"
            )));
            kloop.push(e(format!("{}({da}, {dbx}, acc[{a}], 1)", p.mma.snippet.name)));
        }
    }
    kloop.push(e("rc_wgmma_commit_group()"));
    kloop.push(Stmt::unrolled(
        "a",
        p.m_atoms,
        vec![Stmt::unrolled("i", nacc, vec![e("rc_fence_acc(acc[a][i])")])],
    ));
    if cfg.mma_pipe == 0 {
        kloop.push(c(
            "K_PIPE_MMAS = 0: wait for this batch, then consumer_release its stage at once",
        ));
        kloop.push(e("rc_wgmma_wait_group<0>()"));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.push(if_("lane == 0", release(clustered, cm * cn)));
        kloop.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
        mainloop.push(for_("kt", "kt0", "kt0 + k_iters", kloop));
    } else {
        kloop.push(c(
            "keep one wgmma batch in flight; the previous one is done: consumer_release its stage",
        ));
        kloop.push(e("rc_wgmma_wait_group<1>()"));
        kloop.push(if_("kt > kt0 && lane == 0", release(clustered, cm * cn)));
        kloop.push(Stmt::assign("prev", "stage"));
        kloop.push(e(format!("rc_pipe_advance(stage, phase, 1u, {s}u)")));
        mainloop.push(for_("kt", "kt0", "kt0 + k_iters", kloop));
        mainloop.push(e("rc_wgmma_wait_group<0>()"));
        mainloop.push(Stmt::unrolled(
            "a",
            p.m_atoms,
            vec![Stmt::unrolled("i", nacc, vec![e("rc_fence_acc(acc[a][i])")])],
        ));
        mainloop.push(if_("k_iters > 0 && lane == 0", release(clustered, cm * cn)));
    }
    if pp {
        mainloop.push(c(
            "Let the other warpgroup's next mainloop start (only if it has one), then skip its k-tiles",
        ));
        mainloop.push(d("bool", "other_next", "false"));
        mainloop.push(Stmt::Loop {
            init: "unsigned long long w = work + sched.stride()".into(),
            cond: "w < sched.total_work && !other_next".into(),
            step: "w += sched.stride()".into(),
            body: vec![Stmt::assign("other_next", "sched.cluster_valid(w)")],
        });
        mainloop.push(if_(
            "other_next",
            vec![e("rc_named_barrier_arrive(3u + (uint32_t)(1 - cw), 256u)")],
        ));
        mainloop.push(e(format!("rc_pipe_advance(stage, phase, (uint32_t)k_iters, {s}u)")));
    }
    tile.extend(mainloop);
    let tile_head = std::mem::take(&mut tile);

    // Epilogue.
    tile.push(c(format!(
        "Epilogue: {}x{} subtiles of {em}x{en}, N outer / M inner",
        bm / em,
        bn / en
    )));
    if staged {
        tile.push(c(
            "Broadcast staging (2/2): the registers into this group's staging area, read by every subtile below",
        ));
        tile.push(c(
            "(the previous tile's readers are done: each subtile's barrier follows its reads)",
        ));
        tile.push(d(
            "float* const",
            "bc",
            format!(
                "reinterpret_cast<float*>(smem + {} + grp * {})",
                p.bc_offset, p.bc_group_bytes
            ),
        ));
        for &(r, k, base) in &bc_regs {
            let slot = &layout[k];
            let st = Stmt::assign(format!("bc[{} + epi_tid + {base}]", slot.offset), format!("bc_r[{r}]"));
            if base + epi_threads <= slot.extent {
                tile.push(st);
            } else {
                tile.push(if_(format!("epi_tid + {base} < {}", slot.extent), vec![st]));
            }
        }
        tile.push(e(format!("rc_named_barrier_sync(epi_bar, {epi_threads}u)")));
    }
    if p.delay_tma_store {
        tile.push(dc(
            "unsigned char*",
            "sd_prev",
            "epi_smem",
            "DelayTmaStore: the subtile whose store is pending",
        ));
    }
    tile.push(dc(
        "const bool",
        "use_c",
        "load_c",
        "C subtiles arrive through the C pipeline",
    ));
    let sub_m = bm / em;
    for sn in 0..bn / en {
        for sm in 0..sub_m {
            let i = sn * sub_m + sm;
            let mut st = vec![c(format!(
                "subtile ({sm},{sn}): rows [{}, {}), cols [{}, {})",
                sm * em,
                (sm + 1) * em,
                sn * en,
                (sn + 1) * en
            ))];
            // Buffer choice.
            let buf = if p.reuse_smem_c {
                "(use_c ? cstage : dbuf)"
            } else {
                "dbuf"
            };
            let nbuf_rt = if p.reuse_smem_c {
                format!("(use_c ? {}u : {}u)", p.c_bufs, p.d_bufs)
            } else {
                format!("{}u", p.d_bufs)
            };
            let _ = &nbuf_rt;
            st.push(d("const uint32_t", "buf", buf));
            st.push(d("unsigned char* const", "sd", format!("epi_smem + buf * {sub_bytes}")));
            let c_base = if p.reuse_smem_c {
                "sd".to_string()
            } else {
                format!("epi_smem + {} + cstage * {sub_bytes}", p.d_bufs as i64 * sub_bytes)
            };
            // Values: which m64 atoms of this warpgroup fall into the subtile's rows.
            let mut vals = vec![];
            let jn = en / 16;
            vals.push(Stmt::Array {
                ty: "uint32_t".into(),
                name: format!("packed[{}]", p.m_atoms),
                len: (jn * 4) as usize,
                comment: Some("D fragment, stmatrix.x4 order".into()),
            });

            let mut per_atom = vec![];
            for a in 0..p.m_atoms {
                let row = format!("(wg_row0 + {})", a * 64);
                let r_sub = dc(
                    "const int",
                    "r_sub",
                    format!("{row} - {} + 16 * warp + (lane & 8) + (lane & 7)", sm * em),
                    "ldmatrix.x4 lane -> row of matrix lane/8",
                );
                let mut inner = vec![
                    dc(
                        "const int",
                        "gm",
                        format!("m0 + {row} + 16 * warp + lane / 4"),
                        "CLayout_64xN: global row of acc[a][4j + e] (+8 for acc[a][4j + 2 + e])",
                    ),
                    dc(
                        "const int",
                        "gn",
                        "n0 + 2 * (lane % 4)",
                        "global column of acc[a][0] (+8j + e)",
                    ),
                ];
                for jj in 0..jn {
                    let j = sn * en / 8 + 2 * jj;
                    let mut cv = vec![
                        c("source: ldmatrix.x4 gives the accumulator's fragment of C"),
                        r_sub.clone(),
                        dc(
                            "const uint32_t",
                            &format!("o{jj}"),
                            format!("(uint32_t)(r_sub * {} + {} + (lane >> 4) * 16)", en * db, jj * 32),
                            "byte offset (row, col) in the row-major subtile, before the swizzle",
                        ),
                        dc(
                            "const uint32_t",
                            &format!("s{jj}"),
                            format!("o{jj} ^ ((o{jj} >> 3) & {swz_mask}u)"),
                            format!("Swizzle<{},4,3> on bytes", (span / 16).trailing_zeros()),
                        ),
                        Stmt::Array {
                            ty: "uint32_t".into(),
                            name: "cr".into(),
                            len: 4,
                            comment: None,
                        },
                        e(format!("rc_ldsm_x4(rc_smem_u32({c_base}) + s{jj}, cr)")),
                    ];
                    for q in 0..4 {
                        let idx = 4 * (j + q / 2) + 2 * (q % 2);
                        cv.push(Stmt::Decl {
                            ty: "float".into(),
                            name: format!("c{q}x, c{q}y"),
                            init: None,
                            comment: None,
                        });
                        cv.push(e(format!("rc_unpack2(cr[{q}], &c{q}x, &c{q}y)")));
                        let (mm, nn) = (8 * (q % 2), 8 * (j + q / 2));
                        cv.push(Stmt::assign(
                            format!("packed[{a}][{}]", 4 * jj + q),
                            format!(
                                "rc_pack2({}, {})",
                                visit(&format!("acc[{a}][{idx}]"), &format!("c{q}x"), mm, nn),
                                visit(&format!("acc[{a}][{}]", idx + 1), &format!("c{q}y"), mm, nn + 1)
                            ),
                        ));
                    }
                    let mut nv = vec![];
                    for q in 0..4 {
                        let idx = 4 * (j + q / 2) + 2 * (q % 2);
                        let (mm, nn) = (8 * (q % 2), 8 * (j + q / 2));
                        nv.push(Stmt::assign(
                            format!("packed[{a}][{}]", 4 * jj + q),
                            format!(
                                "rc_pack2({}, {})",
                                visit(&format!("acc[{a}][{idx}]"), "0.0f", mm, nn),
                                visit(&format!("acc[{a}][{}]", idx + 1), "0.0f", mm, nn + 1)
                            ),
                        ));
                    }
                    if cfg.with_c() {
                        inner.push(Stmt::If {
                            cond: "use_c".into(),
                            then: vec![Stmt::Block(cv)],
                            otherwise: nv,
                        });
                    } else {
                        inner.extend(nv);
                    }
                }
                let cond = if coop || p.m_atoms > 1 || sub_m > 1 {
                    format!("{row} / {em} == {sm}")
                } else {
                    "true".into()
                };
                per_atom.push(if_(cond, inner));
            }
            // Order: wait C, read C (inside per_atom), release or sync, write D.
            if cfg.with_c() {
                st.push(if_(
                    "use_c",
                    vec![e(
                        "rc_mbarrier_wait_parity(bar_c_full + 16 * (grp * CBUFS + cstage), cphase)"
                            .replace("CBUFS", &p.c_bufs.to_string()),
                    )],
                ));
            }
            st.push(Stmt::Block({
                let mut v = vals;
                v.extend(per_atom);
                let store_of = |buf: &str, sn: i64, sm: i64| {
                    vec![
                        e(format!(
                            "rc_tma_store_3d(&tmap_d, {buf}, n0 + {}, m0 + {}, batch)",
                            sn * en,
                            sm * em
                        )),
                        e("rc_bulk_commit_group()"),
                    ]
                };
                if p.delay_tma_store && i > 0 {
                    let (psn, psm) = ((i - 1) / sub_m, (i - 1) % sub_m);
                    v.push(c(
                        "DelayTmaStore: the previous subtile's store is issued now, after this subtile's visit",
                    ));
                    v.push(if_("epi_leader", store_of("sd_prev", psn, psm)));
                }
                v.push(c(format!(
                    "the buffer's previous store must have read it: at most {} store(s) still reading",
                    p.d_bufs - 1
                )));
                v.push(if_(
                    "epi_leader && !(use_c && REUSE)".replace("REUSE", if p.reuse_smem_c { "true" } else { "false" }),
                    vec![e(format!("rc_bulk_wait_group_read<{}>()", p.d_bufs - 1))],
                ));
                if cfg.with_c() {
                    v.push(c(
                        "C was read by the generic proxy: order it before later async-proxy (TMA) writes",
                    ));
                    v.push(if_("use_c", vec![e("rc_fence_proxy_async_shared()")]));
                }
                v.push(c("everyone has read C / the buffer's previous store is done: write D"));
                v.push(e(format!("rc_named_barrier_sync(epi_bar, {epi_threads}u)")));
                if cfg.with_c() && !p.reuse_smem_c {
                    v.push(c(
                        "every thread has its C values: release the C buffer to the epilogue producer",
                    ));
                    v.push(if_(
                        "use_c && epi_leader",
                        vec![e(format!(
                            "rc_mbarrier_arrive(bar_c_full + 16 * (grp * {} + cstage) + 8)",
                            p.c_bufs
                        ))],
                    ));
                }
                let mut wr = vec![];
                for a in 0..p.m_atoms {
                    let row = format!("(wg_row0 + {})", a * 64);
                    let mut inner = vec![d(
                        "const int",
                        "r_sub",
                        format!("{row} - {} + 16 * warp + (lane & 8) + (lane & 7)", sm * em),
                    )];
                    for jj in 0..jn {
                        inner.push(d(
                            "const uint32_t",
                            &format!("o{jj}"),
                            format!("(uint32_t)(r_sub * {} + {} + (lane >> 4) * 16)", en * db, jj * 32),
                        ));
                        inner.push(Stmt::Array {
                            ty: "uint32_t".into(),
                            name: format!("v{jj}"),
                            len: 4,
                            comment: None,
                        });
                        for q in 0..4 {
                            inner.push(Stmt::assign(
                                format!("v{jj}[{q}]"),
                                format!("packed[{a}][{}]", 4 * jj + q),
                            ));
                        }
                        inner.push(e(format!(
                            "rc_stmatrix_x4(sd + (o{jj} ^ ((o{jj} >> 3) & {swz_mask}u)), v{jj})"
                        )));
                    }
                    let cond = if coop || p.m_atoms > 1 || sub_m > 1 {
                        format!("{row} / {em} == {sm}")
                    } else {
                        "true".into()
                    };
                    wr.push(if_(cond, inner));
                }
                v.extend(wr);
                v.push(c(
                    "make the generic-proxy smem writes visible to TMA, then one thread stores the subtile",
                ));
                v.push(e("rc_fence_proxy_async_shared()"));
                v.push(e(format!("rc_named_barrier_sync(epi_bar, {epi_threads}u)")));
                let mut store = if p.delay_tma_store {
                    vec![]
                } else {
                    store_of("sd", sn, sm)
                };
                if cfg.with_c() && p.reuse_smem_c {
                    store.push(c(
                        "ReuseSmemC: the C buffer returns to the producer once its store has read it",
                    ));
                    store.push(if_(
                        "use_c",
                        vec![
                            e("rc_bulk_wait_group_read<0>()"),
                            e(format!(
                                "rc_mbarrier_arrive(bar_c_full + 16 * (grp * {} + cstage) + 8)",
                                p.c_bufs
                            )),
                        ],
                    ));
                }
                if !store.is_empty() {
                    v.push(if_("epi_leader", store));
                }
                if p.delay_tma_store {
                    v.push(Stmt::assign("sd_prev", "sd"));
                    if i == sub_m * (bn / en) - 1 {
                        v.push(c("DelayTmaStore: flush the tile's last store"));
                        v.push(if_("epi_leader", store_of("sd_prev", sn, sm)));
                    }
                }
                v.push(if_(
                    "use_c",
                    vec![e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", p.c_bufs))],
                ));
                if p.reuse_smem_c {
                    v.push(if_("!use_c", vec![e(format!("dbuf = (dbuf + 1u) % {}u", p.d_bufs))]));
                } else {
                    v.push(e(format!("dbuf = (dbuf + 1u) % {}u", p.d_bufs)));
                }
                let _ = i;
                v
            }));
            tile.push(Stmt::Block(st));
        }
    }
    let epi = std::mem::replace(&mut tile, tile_head);
    tile.push(Stmt::If {
        cond: "split_k > 1".into(),
        then: split_partials(p, cfg),
        otherwise: epi,
    });
    tile.push(e("++local"));
    cons.push(work_loop(tile));
    cons.push(c(
        "store tail: the last TMA stores must finish reading shared memory before the CTA exits",
    ));
    cons.push(if_("epi_leader", vec![e("rc_bulk_wait_group<0>()")]));

    b.push(Stmt::If {
        cond: "wg == 0".into(),
        then: prod,
        otherwise: cons,
    });
    if clustered {
        b.push(c(
            "no CTA leaves while a partner may still multicast into it or arrive on its barriers",
        ));
        b.push(e("__syncwarp()"));
        b.push(e("rc_cluster_arrive()"));
        b.push(e("rc_cluster_wait()"));
    }

    Ok(CFunction {
        qualifiers: format!(
            "extern \"C\" __global__ void __launch_bounds__({}, 1)",
            (1 + p.consumers) * WG
        )
        .replace(" void", ""),
        ret: "void".into(),
        name: name.into(),
        params: vec![
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_a".into()),
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_b".into()),
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_c".into()),
            ("const __grid_constant__ rc_tmap_t".into(), "tmap_d".into()),
            ("int".into(), "M".into()),
            ("int".into(), "N".into()),
            ("int".into(), "K".into()),
            ("int".into(), "L".into()),
            (format!("const {}", fusion.struct_name), "p".into()),
            ("float* __restrict__".into(), "workspace".into()),
            ("int".into(), "split_k".into()),
            ("int".into(), "sched_tiles_m".into()),
            ("int".into(), "sched_tiles_n".into()),
            ("int".into(), "sched_batches".into()),
            ("int".into(), "sched_along_n".into()),
            ("int".into(), "sched_log_swizzle".into()),
        ],
        doc: vec![format!(
            "{name}: TMA + wgmma {:?} GEMM, D = fusion(acc = A * B, C), fusion {}",
            sched,
            cfg.fusion.describe()
        )],
        body: b,
    })
}

/// Split-K: the work item's f32 partial sums go straight from the accumulator registers
/// to `workspace[(split * L + batch) * M * N + m * N + n]` (8-byte stores of column pairs);
/// the reduction kernel sums the splits and applies the fusion.
fn split_partials(p: &Sm90Plan, cfg: &GemmSm90Config) -> Vec<Stmt> {
    let bn = cfg.tile[1];
    // Partial sums keep the accumulator type: int32 partials of s8 GEMMs add up exactly.
    let at = if cfg.ab == Element::S8 { "int" } else { "float" };
    let mut v = vec![
        c("split-K: store this split's partial sums (the fusion runs once, in the reduction kernel)"),
        d(
            &format!("{at}* const"),
            "ws",
            format!("reinterpret_cast<{at}*>(workspace) + ((long long)(split * L + batch) * M) * N"),
        ),
    ];
    for a in 0..p.m_atoms {
        let mut inner = vec![
            dc(
                "const int",
                "gm",
                format!("m0 + wg_row0 + {} + 16 * warp + lane / 4", a * 64),
                "CLayout_64xN rows",
            ),
            d("const int", "gn", "n0 + 2 * (lane % 4)"),
        ];
        for h in 0..2 {
            let mut row = vec![];
            for j in 0..bn / 8 {
                row.push(if_(
                    format!("gn + {} < N", 8 * j),
                    vec![e(format!(
                        "*reinterpret_cast<{at}2*>(ws + (long long)(gm + {}) * N + gn + {}) = make_{at}2(acc[{a}][{}], acc[{a}][{}])",
                        8 * h,
                        8 * j,
                        4 * j + 2 * h,
                        4 * j + 2 * h + 1
                    ))],
                ));
            }
            inner.push(if_(format!("gm + {} < M", 8 * h), row));
        }
        v.push(Stmt::Block(inner));
    }
    v
}

/// The largest split-K factor.
pub const MAX_SPLIT_K: u32 = 64;

/// Threads per CTA of the split-K reduction kernel.
pub const REDUCE_THREADS: u32 = 256;

/// The split-K reduction: each thread sums the splits of 8 consecutive outputs (N is a
/// multiple of 8), applies the fusion with C, and stores 16 bytes of D.
fn reduce_kernel(cfg: &GemmSm90Config, name: &str, fusion: &FusionCode) -> CFunction {
    let t = cfg.cd.cuda_type();
    let at = if cfg.ab == Element::S8 { "int" } else { "float" };
    let conv = match cfg.cd {
        Element::BF16 => "__bfloat162float",
        _ => "__half2float",
    };
    let body = vec![
        d("const int", "batch", "blockIdx.y"),
        d("const long long", "idx", "(long long)blockIdx.x * blockDim.x + threadIdx.x"),
        d("const int", "groups", "N / 8"),
        d("const int", "m", "(int)(idx / groups)"),
        d("const int", "n", "(int)(idx % groups) * 8"),
        if_("m >= M", vec![Stmt::Return]),
        Stmt::Array { ty: at.into(), name: "acc".into(), len: 8, comment: Some("sum over the splits (the accumulator type)".into()) },
        Stmt::unrolled("i", 8, vec![Stmt::assign("acc[i]", "0")]),
        for_(
            "s",
            "0",
            "split_k",
            vec![
                d(&format!("const {at}4*"), "src", format!("reinterpret_cast<const {at}4*>(workspace) + (((long long)(s * L + batch) * M + m) * N + n) / 4")),
                d(&format!("const {at}4"), "x", "src[0]"),
                d(&format!("const {at}4"), "y", "src[1]"),
                e("acc[0] += x.x; acc[1] += x.y; acc[2] += x.z; acc[3] += x.w"),
                e("acc[4] += y.x; acc[5] += y.y; acc[6] += y.z; acc[7] += y.w"),
            ],
        ),
        Stmt::Array { ty: "float".into(), name: "cv".into(), len: 8, comment: Some("C, when the fusion reads it".into()) },
        Stmt::unrolled("i", 8, vec![Stmt::assign("cv[i]", "0.0f")]),
        if_(
            fusion.source_needed.clone(),
            vec![
                d("const uint4", "craw", format!("*reinterpret_cast<const uint4*>(C + batch * bsc + (long long)m * ldc + n)")),
                d(&format!("const {t}*"), "ce", format!("reinterpret_cast<const {t}*>(&craw)")),
                Stmt::unrolled("i", 8, vec![Stmt::assign("cv[i]", format!("{conv}(ce[i])"))]),
            ],
        ),
        Stmt::Array { ty: "uint32_t".into(), name: "out".into(), len: 4, comment: None },
        Stmt::unrolled(
            "i",
            4,
            vec![Stmt::assign(
                "out[i]",
                "rc_pack2(rc_visit_at(p, (float)acc[2 * i], cv[2 * i], m, n + 2 * i, batch, M, N), rc_visit_at(p, (float)acc[2 * i + 1], cv[2 * i + 1], m, n + 2 * i + 1, batch, M, N))",
            )],
        ),
        e("*reinterpret_cast<uint4*>(D + batch * bsd + (long long)m * ldd + n) = make_uint4(out[0], out[1], out[2], out[3])"),
    ];
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({REDUCE_THREADS})"),
        ret: "void".into(),
        name: format!("{name}_splitk_reduce"),
        params: vec![
            ("const float* __restrict__".into(), "workspace".into()),
            (format!("const {t}* __restrict__"), "C".into()),
            (format!("{t}* __restrict__"), "D".into()),
            ("int".into(), "M".into()),
            ("int".into(), "N".into()),
            ("int".into(), "L".into()),
            ("int".into(), "split_k".into()),
            ("long long".into(), "ldc".into()),
            ("long long".into(), "ldd".into()),
            ("long long".into(), "bsc".into()),
            ("long long".into(), "bsd".into()),
            (format!("const {}", fusion.struct_name), "p".into()),
        ],
        doc: vec![format!(
            "{name}: split-K reduction (sum of the f32 partials, then the fusion and D)"
        )],
        body,
    }
}

fn tmap(
    elem: Element,
    dims: [u64; 3],
    strides_elems: [u64; 2],
    boxd: [u32; 3],
    swizzle: GmmaSwizzle,
) -> Result<TmaEncodeArgs, GemmError> {
    let eb = elem.bytes() as u64;
    Ok(TmaEncodeArgs {
        data_type: tma_data_type(elem).ok_or_else(|| cfg_err(format!("no TMA type for {}", elem.ptx())))?,
        rank: 3,
        global_dim: dims.to_vec(),
        global_strides: strides_elems.iter().map(|s| s * eb).collect(),
        box_dim: boxd.to_vec(),
        element_strides: vec![1, 1, 1],
        interleave: 0,
        swizzle: rcute_collective::sm90_mainloop::gmma_tma_swizzle(swizzle).code(),
        l2_promotion: rcute_atom::tma::L2Promotion::B256.code(),
        oob_fill: rcute_atom::tma::OobFill::Zero.code(),
    })
}

impl GeneratedGemmSm90 {
    /// Output tiles of a problem.
    pub fn tiles(&self, m: i32, n: i32, l: i32) -> u64 {
        let [bm, bn, _] = self.config.tile;
        (m as u64).div_ceil(bm as u64) * (n as u64).div_ceil(bn as u64) * l as u64
    }

    /// Bytes of f32 workspace split-K needs (`split_k * L * M * N` partial sums; 0 without
    /// split-K).
    pub fn workspace_bytes(&self, m: i32, n: i32, l: i32, split_k: u32) -> usize {
        if split_k <= 1 {
            return 0;
        }
        split_k as usize * l.max(0) as usize * m.max(0) as usize * n.max(0) as usize * 4
    }

    /// The tile scheduler's parameters for a problem (its batches are `(split, batch)`
    /// pairs with split-K).
    pub fn scheduler_params(&self, args: &GemmArgs) -> Result<SchedulerParams, GemmError> {
        let [bm, bn, _] = self.config.tile;
        scheduler(&self.config)
            .params(
                args.m.max(0) as u64,
                args.n.max(0) as u64,
                args.l.max(0) as u64 * args.split_k.max(1) as u64,
                bm as u32,
                bn as u32,
            )
            .map_err(|e| GemmError::Shape(e.to_string()))
    }

    /// The launch configuration: one CTA per work id for the non-persistent schedule; for
    /// the persistent ones at most `max_ctas` CTAs (usually the SM count), as the tile
    /// scheduler lays them out.
    pub fn launch_config(&self, args: &GemmArgs, max_ctas: u32) -> Result<LaunchConfig, GemmError> {
        let p = self.scheduler_params(args)?;
        let [cm, cn] = self.config.cluster;
        let ctas = if persistent(self.config.schedule) {
            max_ctas.max(1)
        } else {
            (p.total_work * (cm * cn) as u64).min(u32::MAX as u64) as u32
        };
        let grid = scheduler(&self.config)
            .grid(&p, ctas, None)
            .map_err(|e| GemmError::Shape(e.to_string()))?;
        let lc = LaunchConfig::new(grid, self.threads).with_dynamic_smem(self.smem_bytes);
        Ok(if cm * cn > 1 {
            lc.with_cluster(p.cluster_dim())
        } else {
            lc
        })
    }

    /// The tensor-map arguments of A, B, C and D for `args` (validated).
    pub fn tensor_maps(&self, args: &GemmArgs) -> Result<[TmaEncodeArgs; 4], GemmError> {
        let uses_c = self.uses_c(args)?;
        self.tensor_maps_with(args, uses_c)
    }

    /// The fusion arguments of the preset fusions from `args`: `alpha` and `beta` for the
    /// linear combination, `alpha` for the C-less scale; other trees need
    /// [`launch_fused`] with their own [`FusionArgs`].
    pub fn default_fusion_args(&self, args: &GemmArgs) -> Result<FusionArgs, GemmError> {
        let f = &self.config.fusion;
        let names: Vec<String> = f.params().into_iter().map(|p| p.name).collect();
        match names.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["alpha", "beta"] => Ok(FusionArgs::new().f32("alpha", args.alpha).f32("beta", args.beta)),
            ["alpha"] => {
                if args.beta != 0.0 {
                    return Err(GemmError::Shape(
                        "beta != 0 but this kernel was generated without C".into(),
                    ));
                }
                Ok(FusionArgs::new().f32("alpha", args.alpha))
            }
            _ => Err(GemmError::Config(format!(
                "fusion {} takes arguments {names:?}: launch it with launch_fused",
                f.name()
            ))),
        }
    }

    fn uses_c(&self, args: &GemmArgs) -> Result<bool, GemmError> {
        match self.default_fusion_args(args) {
            Ok(fa) => self
                .config
                .fusion
                .needs_source(&fa)
                .map_err(|e| GemmError::Config(format!("fusion: {e}"))),
            Err(GemmError::Config(_)) => Ok(self.config.with_c()),
            Err(e) => Err(e),
        }
    }

    fn tensor_maps_with(&self, args: &GemmArgs, uses_c: bool) -> Result<[TmaEncodeArgs; 4], GemmError> {
        self.validate_with(args, uses_c)?;
        let cfg = &self.config;
        let [bm, bn, bk] = cfg.tile;
        let [em, en] = self.plan.epi_tile;
        let (m, n, k, l) = (args.m as u64, args.n as u64, args.k.max(1) as u64, args.l as u64);
        // A batch stride is irrelevant for L = 1 but must still be a valid TMA stride.
        let bs = |s: i64, ld: i64, rows: u64| {
            if l == 1 {
                (ld as u64 * rows).div_ceil(8) * 8
            } else {
                s as u64
            }
        };
        let a = tmap(
            cfg.ab,
            [k, m, l],
            [args.lda as u64, bs(args.batch_stride_a, args.lda, m)],
            [bk as u32, (bm / cfg.cluster[1]) as u32, 1],
            GmmaSwizzle::B128,
        )?;
        let b = tmap(
            cfg.ab,
            [k, n, l],
            [args.ldb as u64, bs(args.batch_stride_b, args.ldb, n)],
            [bk as u32, (bn / cfg.cluster[0]) as u32, 1],
            GmmaSwizzle::B128,
        )?;
        let sw = self.plan.epi_swizzle;
        let ldc = if !uses_c { args.ldd } else { args.ldc };
        let bsc = if !uses_c {
            args.batch_stride_d
        } else {
            args.batch_stride_c
        };
        let cmap = tmap(
            cfg.cd,
            [n, m, l],
            [ldc as u64, bs(bsc, ldc, m)],
            [en as u32, em as u32, 1],
            sw,
        )?;
        let dmap = tmap(
            cfg.cd,
            [n, m, l],
            [args.ldd as u64, bs(args.batch_stride_d, args.ldd, m)],
            [en as u32, em as u32, 1],
            sw,
        )?;
        Ok([a, b, cmap, dmap])
    }

    /// Check the arguments against the kernel's rules.
    pub fn validate(&self, a: &GemmArgs) -> Result<(), GemmError> {
        let uses_c = self.uses_c(a)?;
        self.validate_with(a, uses_c)
    }

    /// [`GeneratedGemmSm90::validate`] when the fusion reads C (`uses_c`) or not.
    fn validate_with(&self, a: &GemmArgs, uses_c: bool) -> Result<(), GemmError> {
        let shape = |s: String| Err(GemmError::Shape(s));
        let align = |s: String| Err(GemmError::Alignment(s));
        if a.m < 1 || a.n < 1 || a.l < 1 || a.k < 0 {
            return shape(format!(
                "need M, N, L >= 1 and K >= 0, got M={} N={} K={} L={}",
                a.m, a.n, a.k, a.l
            ));
        }
        if a.split_k < 1 || a.split_k > MAX_SPLIT_K {
            return shape(format!("split_k = {} must be in 1..={MAX_SPLIT_K}", a.split_k));
        }
        if a.split_k > 1 && (a.workspace == 0 || a.workspace % 16 != 0) {
            return shape(format!(
                "split_k = {} needs a 16-byte aligned workspace of workspace_bytes()",
                a.split_k
            ));
        }
        let (n, k) = (a.n as i64, a.k as i64);
        // TMA moves whole 16-byte chunks at the contiguous edge of a tensor (a store
        // past N would overwrite the row's padding; a load past K would read it), so the
        // contiguous extents must be multiples of 16 bytes, as CUTLASS's TMA kernels
        // require of their alignment.
        if (k * self.config.ab.bytes() as i64) % 16 != 0 {
            return align(format!(
                "K = {k} is not a multiple of {} (16 bytes of A and B rows)",
                16 / self.config.ab.bytes()
            ));
        }
        if (n * self.config.cd.bytes() as i64) % 16 != 0 {
            return align(format!(
                "N = {n} is not a multiple of {} (16 bytes of C and D rows)",
                16 / self.config.cd.bytes()
            ));
        }
        let eb = self.config.ab.bytes() as i64;
        let db = self.config.cd.bytes() as i64;
        for (what, ld, min) in [("lda", a.lda, k), ("ldb", a.ldb, k), ("ldd", a.ldd, n)] {
            if ld < min.max(1) {
                return shape(format!("{what} = {ld} is smaller than {}", min.max(1)));
            }
        }
        if uses_c && a.c == 0 {
            return shape("the fusion reads C but C is null".into());
        }
        if uses_c && a.ldc < n {
            return shape(format!("ldc = {} is smaller than N = {n}", a.ldc));
        }
        for (what, v, bytes) in [("lda", a.lda, eb), ("ldb", a.ldb, eb), ("ldd", a.ldd, db)] {
            if (v * bytes) % 16 != 0 {
                return align(format!("{what} = {v} elements is not a multiple of 16 bytes (TMA)"));
            }
        }
        if a.l > 1 {
            for (what, v, bytes) in [
                ("batch_stride_a", a.batch_stride_a, eb),
                ("batch_stride_b", a.batch_stride_b, eb),
                ("batch_stride_d", a.batch_stride_d, db),
            ] {
                if v <= 0 || (v * bytes) % 16 != 0 {
                    return align(format!(
                        "{what} = {v} elements is not a positive multiple of 16 bytes (TMA)"
                    ));
                }
            }
        }
        if uses_c {
            if (a.ldc * db) % 16 != 0 || (a.l > 1 && (a.batch_stride_c <= 0 || (a.batch_stride_c * db) % 16 != 0)) {
                return align(format!(
                    "ldc = {} / batch_stride_c = {} are not multiples of 16 bytes (TMA)",
                    a.ldc, a.batch_stride_c
                ));
            }
            if a.c % 16 != 0 {
                return align(format!("C at {:#x} is not 16-byte aligned", a.c));
            }
        }
        for (what, ptr) in [("A", a.a), ("B", a.b), ("D", a.d)] {
            if ptr % 16 != 0 {
                return align(format!("{what} at {ptr:#x} is not 16-byte aligned"));
            }
        }
        Ok(())
    }
}

/// Launch the SM90 GEMM on the function's GPU's default stream with at most `max_ctas`
/// persistent CTAs (usually the SM count).
///
/// # Safety
///
/// The pointers in `args` must be device addresses of buffers that hold the matrices
/// described by the sizes, leading dimensions and batch strides, valid until the kernel
/// finishes.
pub unsafe fn launch(f: &Function, g: &GeneratedGemmSm90, args: &GemmArgs, max_ctas: u32) -> Result<(), GemmError> {
    let fa = g.default_fusion_args(args)?;
    // SAFETY: as documented for this function.
    unsafe { launch_fused(f, g, args, &fa, max_ctas) }
}

/// Launch with the arguments of the configuration's fusion (scales, bias pointers, ...);
/// `args.alpha` and `args.beta` are ignored.
///
/// # Safety
///
/// As for [`launch`]; additionally every pointer in `fusion_args` must address the
/// vectors / matrices the fusion reads or writes, valid until the kernel finishes.
pub unsafe fn launch_fused(
    f: &Function,
    g: &GeneratedGemmSm90,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
    max_ctas: u32,
) -> Result<(), GemmError> {
    // SAFETY: as documented for this function.
    unsafe { launch_inner(f, None, g, args, fusion_args, max_ctas) }
}

/// Launch with split-K (`args.split_k > 1`; 1 runs only `main`): `main` writes f32
/// partial sums of each split into `args.workspace`
/// ([`GeneratedGemmSm90::workspace_bytes`]), then `reduce` (the unit's
/// `<name>_splitk_reduce`) sums them and applies the fusion, C and D.
///
/// # Safety
///
/// As for [`launch_fused`]; additionally `args.workspace` must hold
/// [`GeneratedGemmSm90::workspace_bytes`] bytes.
pub unsafe fn launch_split_k(
    main: &Function,
    reduce: &Function,
    g: &GeneratedGemmSm90,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
    max_ctas: u32,
) -> Result<(), GemmError> {
    if reduce.name() != g.reduce_name {
        return Err(GemmError::WrongFunction {
            expected: g.reduce_name.clone(),
            got: reduce.name().into(),
        });
    }
    // SAFETY: as documented for this function.
    unsafe { launch_inner(main, Some(reduce), g, args, fusion_args, max_ctas) }
}

unsafe fn launch_inner(
    f: &Function,
    reduce: Option<&Function>,
    g: &GeneratedGemmSm90,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
    max_ctas: u32,
) -> Result<(), GemmError> {
    if f.name() != g.name {
        return Err(GemmError::WrongFunction {
            expected: g.name.clone(),
            got: f.name().into(),
        });
    }
    let fusion = &g.config.fusion;
    let fe = |e: rcute_collective::FusionError| GemmError::Config(format!("fusion arguments: {e}"));
    let uses_c = fusion.needs_source(fusion_args).map_err(fe)?;
    let blob = fusion_args.pack(fusion).map_err(fe)?;
    let maps = g.tensor_maps_with(args, uses_c)?;
    let c_ptr = if uses_c { args.c } else { args.d };
    let enc = |m: &TmaEncodeArgs, ptr: u64| {
        encode_tiled_cached(m, ptr).map_err(|e| GemmError::Config(format!("tensor map: {e}")))
    };
    let ta = enc(&maps[0], args.a)?;
    let tb = enc(&maps[1], args.b)?;
    let tc = enc(&maps[2], c_ptr)?;
    let td = enc(&maps[3], args.d)?;
    let mut ka = KernelArgs::new()
        .tensor_map(&ta)
        .tensor_map(&tb)
        .tensor_map(&tc)
        .tensor_map(&td)
        .i32(args.m)
        .i32(args.n)
        .i32(args.k)
        .i32(args.l);
    // A parameter-less fusion has an empty struct: C++ still passes one byte.
    ka = if blob.is_empty() {
        ka.blob(&[0u8])
    } else {
        ka.blob(&blob)
    };
    ka = ka.u64(args.workspace).i32(args.split_k as i32);
    let sp = g.scheduler_params(args)?;
    let ka = sp.device_args().iter().fold(ka, |ka, &v| ka.i32(v));
    let lc = g.launch_config(args, max_ctas)?;
    // SAFETY: the parameter list matches the generated kernel's signature; the caller
    // guarantees the buffers.
    unsafe { f.launch(&lc, &ka)? };
    if args.split_k > 1 {
        let Some(reduce) = reduce else {
            return Err(GemmError::Shape(
                "split_k > 1 needs the reduction kernel: use launch_split_k".into(),
            ));
        };
        let groups = (args.m as u64 * (args.n as u64 / 8))
            .div_ceil(REDUCE_THREADS as u64)
            .max(1) as u32;
        let cfg = LaunchConfig::new((groups, args.l as u32), REDUCE_THREADS);
        let rk = KernelArgs::new()
            .u64(args.workspace)
            .u64(c_ptr)
            .u64(args.d)
            .i32(args.m)
            .i32(args.n)
            .i32(args.l)
            .i32(args.split_k as i32)
            .i64(args.ldc)
            .i64(args.ldd)
            .i64(args.batch_stride_c)
            .i64(args.batch_stride_d);
        let rk = if blob.is_empty() {
            rk.blob(&[0u8])
        } else {
            rk.blob(&blob)
        };
        // SAFETY: matches the reduction kernel's signature; the workspace holds the
        // partials the main kernel just wrote (same stream).
        unsafe { reduce.launch(&cfg, &rk)? };
    }
    Ok(())
}
