//! Weight-streaming probes: kernels that only read a buffer from global memory and reduce
//! it to one word per CTA, to measure how fast a load recipe streams bytes from DRAM (what
//! a memory-bound decode kernel can reach at best), without any math in the way.
//!
//! Every probe walks the buffer as *tiles* (one tile per loop step of a CTA; CTA `b` takes
//! tiles `b, b + gridDim.x, ...`, so the same kernel runs persistent (`k x SMs` CTAs) or one
//! CTA per tile (`gridDim.x` = tiles)) and keeps a fixed number of bytes in flight per CTA:
//!
//! * [`StreamLoad::Ldg`]: `ld.global.nc.L1::no_allocate` of 16 bytes per lane into a
//!   register ring of `depth` slots (a tile is `threads x depth` 16-byte units; slot `d` of
//!   lane `j` holds unit `d * threads + j`, so a warp reads 512 contiguous bytes a slot).
//!   Slot `d` is consumed and at once reloaded with the next tile's unit: `depth x 16`
//!   bytes in flight per lane at all times, as in `rcute_collective::awq_streamed`.
//! * [`StreamLoad::CpAsync`]: `cp.async.cg` of 16 bytes per lane into a shared ring of
//!   `stages` stages of `threads x depth` units (`stages - 1` stages in flight while one
//!   is read), as the SM80 multistage mainloops stream their operands. Each lane reads
//!   back only what it copied, so no CTA barrier is needed.
//! * [`StreamLoad::Bulk`] (SM90): one thread issues `cp.async.bulk` of a whole stage of
//!   `threads x depth x 16` contiguous bytes into shared memory, completed on an mbarrier;
//!   all threads read the stage, a `__syncthreads` frees it and the stage `stages` tiles
//!   ahead is issued into it.
//!
//! With [`StreamConfig::pieces`] (`CpAsync` only) a tile is not contiguous: the buffer is
//! read in a grouped GEMM's weight order ([`RowPieces`]): rows of `stride` bytes, a CTA's
//! *block* of `rows` rows walked one k-step at a time (`piece` bytes of each row per tile,
//! `stride / piece` tiles a block), CTA `b` taking blocks `b, b + gridDim.x, ...`: the
//! decode tiles' `cp.async` reads of B (128 rows x 128 bytes a stage at an 8 / 28 KB row
//! stride), against the contiguous tiles of the same bytes in flight.
//!
//! The reduction (`acc ^= word`) keeps every load alive; the result is written only when
//! it equals a run-time `magic` (to `out[threadIdx.x]`), so the output stays tiny and the compiler cannot drop
//! the loads. The loads are unrolled over constant slots, so no ring spills to local
//! memory.
//!
//! ```
//! use rcute_kernel::weight_stream::{generate, RowPieces, StreamConfig, StreamLoad};
//! let g = generate(&StreamConfig { load: StreamLoad::Ldg, threads: 256, depth: 8, stages: 1, pieces: None }).unwrap();
//! assert_eq!(g.name, "rc_stream_ldg_t256_d8");
//! assert!(g.source.contains("rc_ld_global_stream_b128"));
//! assert_eq!(g.config.bytes_in_flight_per_cta(), 256 * 8 * 16);
//! let b = StreamConfig { load: StreamLoad::Bulk, threads: 128, depth: 8, stages: 4, pieces: None };
//! assert_eq!(generate(&b).unwrap().name, "rc_stream_bulk_t128_d8_s4");
//! assert!(generate(&StreamConfig { threads: 100, ..b }).is_err());
//! // 128 rows x 128 B a tile at an 8 KB row stride (a decode tile's k-step of B).
//! let pieces = Some(RowPieces { rows: 128, piece: 128, stride: 8192, l2_256: false });
//! let r = StreamConfig { load: StreamLoad::CpAsync, threads: 128, depth: 8, stages: 4, pieces };
//! let g = generate(&r).unwrap();
//! assert_eq!(g.name, "rc_stream_cpasync_t128_d8_s4_r128x128s8192");
//! assert_eq!(g.tiles(8192 * 256), 2);
//! assert!(generate(&StreamConfig { depth: 4, ..r }).is_err());
//! assert!(generate(&StreamConfig { load: StreamLoad::Bulk, ..r }).is_err());
//! ```

use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::copy_ldst::ld_global_stream;
use rcute_atom::copy_tma::bulk_load;
use rcute_atom::sync::{fence_mbarrier_init, mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait_parity};
use rcute_atom::Arch;

/// How a probe moves the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamLoad {
    /// `ld.global.nc.L1::no_allocate.v4` into a register ring.
    Ldg,
    /// `cp.async.cg` 16 bytes per lane into a shared ring of stages.
    CpAsync,
    /// `cp.async.bulk` (SM90) of a whole stage by one thread, mbarrier completion.
    Bulk,
}

impl StreamLoad {
    /// The short name used in kernel names and on the command line.
    pub fn tag(self) -> &'static str {
        match self {
            StreamLoad::Ldg => "ldg",
            StreamLoad::CpAsync => "cpasync",
            StreamLoad::Bulk => "bulk",
        }
    }
}

/// A tile of row pieces (see the module doc): `rows` rows x `piece` bytes, the rows
/// `stride` bytes apart; consecutive tiles of a block are the next `piece` bytes of the
/// same rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowPieces {
    /// Rows of a tile (and of a block).
    pub rows: u32,
    /// Bytes of each row a tile reads (a multiple of 16).
    pub piece: u32,
    /// Bytes from one row to the next (a multiple of `piece`).
    pub stride: u32,
    /// The copies carry the `.L2::256B` prefetch size (as the decode tiles' `,l2` form:
    /// [`rcute_atom::copy_cp_async::cp_async_cg16_l2_256`]); name suffix `_l2pf`.
    pub l2_256: bool,
}

impl RowPieces {
    /// Tiles (k-steps) per block: `stride / piece`.
    pub fn k_steps(&self) -> u64 {
        (self.stride / self.piece) as u64
    }

    /// Bytes of a block: `rows x stride`.
    pub fn block_bytes(&self) -> u64 {
        self.rows as u64 * self.stride as u64
    }
}

/// One probe configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamConfig {
    /// The load kind.
    pub load: StreamLoad,
    /// Threads per CTA (a multiple of 32, at most 1024).
    pub threads: u32,
    /// 16-byte units per lane per tile (register slots for `Ldg`, units per stage
    /// otherwise; 1..=32).
    pub depth: u32,
    /// Shared-memory stages (`CpAsync` 2..=16, `Bulk` 1..=16; must be 1 for `Ldg`).
    pub stages: u32,
    /// Tiles of row pieces in a GEMM's weight order (`CpAsync` only; `rows x piece` must
    /// be the tile's bytes); `None`: contiguous tiles.
    pub pieces: Option<RowPieces>,
}

impl StreamConfig {
    /// Bytes of one tile (`threads x depth x 16`).
    pub fn tile_bytes(&self) -> u64 {
        self.threads as u64 * self.depth as u64 * 16
    }

    /// Bytes a CTA keeps in flight in the steady state: the register ring, `stages - 1`
    /// cp.async stages, or `stages` bulk stages.
    pub fn bytes_in_flight_per_cta(&self) -> u64 {
        let tiles = match self.load {
            StreamLoad::Ldg => 1,
            StreamLoad::CpAsync => self.stages as u64 - 1,
            StreamLoad::Bulk => self.stages as u64,
        };
        tiles * self.tile_bytes()
    }

    /// Dynamic shared memory of a CTA (the stages).
    pub fn smem_bytes(&self) -> u32 {
        match self.load {
            StreamLoad::Ldg => 0,
            _ => (self.stages as u64 * self.tile_bytes()) as u32,
        }
    }

    /// The architecture the probe needs.
    pub fn arch(&self) -> Arch {
        match self.load {
            StreamLoad::Bulk => Arch::SM90,
            _ => Arch::SM80,
        }
    }

    /// The kernel name: `rc_stream_<load>_t<threads>_d<depth>[_s<stages>][_r<rows>x<piece>s<stride>]`.
    pub fn name(&self) -> String {
        let s = match self.load {
            StreamLoad::Ldg => String::new(),
            _ => format!("_s{}", self.stages),
        };
        let r = match self.pieces {
            Some(p) => format!(
                "_r{}x{}s{}{}",
                p.rows,
                p.piece,
                p.stride,
                if p.l2_256 { "_l2pf" } else { "" }
            ),
            None => String::new(),
        };
        format!("rc_stream_{}_t{}_d{}{s}{r}", self.load.tag(), self.threads, self.depth)
    }

    fn check(&self) -> Result<(), StreamError> {
        let bad = |m: String| Err(StreamError::Config(format!("{}: {m}", self.name())));
        if self.threads == 0 || !self.threads.is_multiple_of(32) || self.threads > 1024 {
            return bad("threads must be a positive multiple of 32, at most 1024".into());
        }
        if !(1..=32).contains(&self.depth) {
            return bad("depth must be 1..=32".into());
        }
        let stages_ok = match self.load {
            StreamLoad::Ldg => self.stages == 1,
            StreamLoad::CpAsync => (2..=16).contains(&self.stages),
            StreamLoad::Bulk => (1..=16).contains(&self.stages),
        };
        if !stages_ok {
            return bad(format!("{} stages not allowed", self.stages));
        }
        if self.smem_bytes() > 227 * 1024 {
            return bad(format!("{} B of shared memory", self.smem_bytes()));
        }
        if let Some(p) = self.pieces {
            if self.load != StreamLoad::CpAsync {
                return bad("row pieces need the cpasync load".into());
            }
            if p.rows == 0 || p.piece == 0 || !p.piece.is_multiple_of(16) || !p.stride.is_multiple_of(p.piece) {
                return bad("pieces: rows > 0, piece a positive multiple of 16, stride a multiple of piece".into());
            }
            if p.rows as u64 * p.piece as u64 != self.tile_bytes() {
                return bad(format!(
                    "{} rows x {} B is not the tile's {} B",
                    p.rows,
                    p.piece,
                    self.tile_bytes()
                ));
            }
        }
        Ok(())
    }
}

/// A refused probe configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The configuration is out of range.
    #[error("invalid stream probe: {0}")]
    Config(String),
}

/// A generated probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedStream {
    /// Kernel (and unit) name, [`StreamConfig::name`].
    pub name: String,
    /// The configuration.
    pub config: StreamConfig,
    /// CUDA C++ source.
    pub source: String,
}

impl GeneratedStream {
    /// A CTA's units of work in a buffer of `bytes` (a multiple of 16): its tiles, or
    /// with [`StreamConfig::pieces`] its blocks.
    pub fn tiles(&self, bytes: u64) -> u64 {
        match self.config.pieces {
            Some(p) => bytes.div_ceil(p.block_bytes()),
            None => bytes.div_ceil(self.config.tile_bytes()),
        }
    }

    /// `ctas` CTAs (persistent: `k x SMs`; one per tile or block: [`GeneratedStream::tiles`]).
    pub fn launch_config(&self, ctas: u32) -> LaunchConfig {
        LaunchConfig::new(Dim3::new(ctas.max(1), 1, 1), self.config.threads).with_dynamic_smem(self.config.smem_bytes())
    }

    /// Arguments: the buffer, its size in 16-byte units, the output (`threads` words,
    /// written only by a CTA whose reduction equals `magic`) and the magic value.
    pub fn args(&self, src: u64, bytes: u64, out: u64, magic: u32) -> KernelArgs {
        KernelArgs::new().u64(src).i64((bytes / 16) as i64).u64(out).u32(magic)
    }
}

/// Generates the probe for `cfg`.
pub fn generate(cfg: &StreamConfig) -> Result<GeneratedStream, StreamError> {
    cfg.check()?;
    let name = cfg.name();
    let (snippets, body) = match cfg.load {
        StreamLoad::Ldg => (vec![ld_global_stream(16).snippet], ldg_body(cfg)),
        StreamLoad::CpAsync => {
            let copy = match cfg.pieces {
                Some(RowPieces { l2_256: true, .. }) => rcute_atom::copy_cp_async::cp_async_cg16_l2_256(),
                _ => cp_async(CacheOp::CacheGlobal, 16, true).expect("cp.async.cg 16 B exists"),
            };
            let copy_fn = copy.snippet.name.clone();
            (
                vec![copy.snippet, cp_async_commit_group(), cp_async_wait_group()],
                match cfg.pieces {
                    Some(p) => pieces_body(cfg, &p, &copy_fn),
                    None => cp_async_body(cfg),
                },
            )
        }
        StreamLoad::Bulk => (
            vec![
                bulk_load(16).snippet,
                mbarrier_init(),
                fence_mbarrier_init(),
                mbarrier_arrive_expect_tx(),
                mbarrier_wait_parity(),
            ],
            bulk_body(cfg),
        ),
    };
    let mut items = unit_preamble(&snippets, "");
    let (t, d) = (cfg.threads, cfg.depth);
    let mut head = vec![
        Stmt::Comment(format!(
            "tile = {t} lanes x {d} units of 16 B; tile i covers units [i * TILE, (i + 1) * TILE)"
        )),
        Stmt::decl("constexpr long long", "TILE", format!("{}", t * d)),
        Stmt::decl("const uint4* __restrict__", "src", "static_cast<const uint4*>(src_v)"),
        Stmt::decl("const long long", "tiles", "rc_ceil_div(units, TILE)"),
        Stmt::decl("const int", "tid", "threadIdx.x"),
        Stmt::decl("uint32_t", "acc", "0u"),
    ];
    head.extend(body);
    head.push(Stmt::Comment(
        "never true for the data the benchmark writes: keeps the loads alive".into(),
    ));
    head.push(Stmt::If {
        cond: "acc == magic".into(),
        then: vec![Stmt::assign("out[tid]", "acc")],
        otherwise: vec![],
    });
    items.push(Item::Function(CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({t})"),
        ret: "void".into(),
        name: name.clone(),
        params: vec![
            ("const void* __restrict__".into(), "src_v".into()),
            ("long long".into(), "units".into()),
            ("uint32_t* __restrict__".into(), "out".into()),
            ("uint32_t".into(), "magic".into()),
        ],
        doc: vec![format!(
            "Reads `units` x 16 B with {} ({} B in flight per CTA), xor-reduces them.",
            cfg.load.tag(),
            cfg.bytes_in_flight_per_cta()
        )],
        body: head,
    }));
    let unit = Unit {
        header: vec![
            format!("{name}: weight-streaming probe (reads a buffer, reduces it to one word per CTA)"),
            "Generated by rcute (crates/kernel/src/weight_stream.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedStream {
        name,
        config: *cfg,
        source: unit.render(),
    })
}

/// `acc ^= ` the four words of `v`.
fn xor4(v: &str) -> Stmt {
    Stmt::Expr(format!("acc ^= {v}.x ^ {v}.y ^ {v}.z ^ {v}.w"))
}

/// The register ring: slot `d` of lane `tid` holds unit `tile * TILE + d * threads + tid`.
fn ldg_body(cfg: &StreamConfig) -> Vec<Stmt> {
    let t = cfg.threads;
    let load = |tile: &str| {
        vec![
            Stmt::decl("const long long", "u", format!("{tile} * TILE + d * {t} + tid")),
            Stmt::Expr("r[d] = make_uint4(0u, 0u, 0u, 0u)".into()),
            Stmt::If {
                cond: format!("{tile} < tiles && u < units"),
                then: vec![Stmt::Expr(
                    "rc_ld_global_stream_b128(src + u, *reinterpret_cast<uint32_t(*)[4]>(&r[d]))".into(),
                )],
                otherwise: vec![],
            },
        ]
    };
    let mut consume = vec![xor4("r[d]")];
    consume.extend(load("next"));
    vec![
        Stmt::Array {
            ty: "uint4".into(),
            name: "r".into(),
            len: cfg.depth as usize,
            comment: Some("the register ring: one 16-byte slot per unit in flight".into()),
        },
        Stmt::decl("long long", "t", "blockIdx.x"),
        Stmt::Comment("prologue: the CTA's first tile".into()),
        Stmt::unrolled("d", cfg.depth, load("t")),
        Stmt::Loop {
            init: String::new(),
            cond: "t < tiles".into(),
            step: "t += gridDim.x".into(),
            body: vec![
                Stmt::decl("const long long", "next", "t + gridDim.x"),
                Stmt::Comment("consume slot d, then refill it with the next tile's unit".into()),
                Stmt::unrolled("d", cfg.depth, consume),
            ],
        },
    ]
}

/// The shared ring of `stages` stages; unit `v` of lane `tid` in stage `s` sits at
/// `smem[(s * depth + v) * threads + tid]`.
fn cp_async_body(cfg: &StreamConfig) -> Vec<Stmt> {
    let (t, d) = (cfg.threads, cfg.depth);
    let copies = vec![Stmt::unrolled(
        "v",
        d,
        vec![
            Stmt::decl("const long long", "u", format!("issue * TILE + v * {t} + tid")),
            Stmt::decl("const bool", "ok", "issue < tiles && u < units"),
            Stmt::Expr(format!(
                "rc_cp_async_cg_16_zfill(&smem[(slot_w * {d} + v) * {t} + tid], src + (ok ? u : 0), ok)"
            )),
        ],
    )];
    let walk = RingWalk {
        first: "blockIdx.x",
        next: "issue + gridDim.x",
        init: "long long t = blockIdx.x",
        cond: "t < tiles",
        step: "t += gridDim.x",
    };
    shared_ring(cfg, vec![], copies, walk)
}

/// How a shared `cp.async` ring walks its tiles: `issue` starts at `first` and moves to
/// `next` after each stage's copies; the steady loop is `for (init; cond; step)`.
struct RingWalk {
    first: &'static str,
    next: &'static str,
    init: &'static str,
    cond: &'static str,
    step: &'static str,
}

/// A shared `cp.async` ring of `stages` stages after the declarations `head`: `copies`
/// issue one stage at slot `slot_w` (tile `issue`), then each step of `walk`'s loop
/// issues the next stage, waits for the oldest and consumes it from slot `slot_r`; the
/// zero-filled copies past the last tile are waited for before the exit.
fn shared_ring(cfg: &StreamConfig, head: Vec<Stmt>, copies: Vec<Stmt>, walk: RingWalk) -> Vec<Stmt> {
    let (t, d, s) = (cfg.threads, cfg.depth, cfg.stages);
    let mut issue = copies;
    issue.push(Stmt::Expr("rc_cp_async_commit_group()".into()));
    issue.push(Stmt::assign("issue", walk.next));
    issue.push(Stmt::assign("slot_w", format!("slot_w + 1 == {s} ? 0 : slot_w + 1")));
    let mut steady = issue.clone();
    steady.push(Stmt::Comment(format!(
        "at most {} groups pending: the oldest stage has landed",
        s - 1
    )));
    steady.push(Stmt::Expr(format!("rc_cp_async_wait_group<{}>()", s - 1)));
    steady.push(Stmt::unrolled(
        "v",
        d,
        vec![
            Stmt::decl("const uint4", "x", format!("smem[(slot_r * {d} + v) * {t} + tid]")),
            xor4("x"),
        ],
    ));
    steady.push(Stmt::assign("slot_r", format!("slot_r + 1 == {s} ? 0 : slot_r + 1")));
    let mut body = head;
    body.extend([
        Stmt::Expr("extern __shared__ uint4 smem[]".into()),
        Stmt::decl("long long", "issue", walk.first),
        Stmt::decl("int", "slot_w", "0"),
        Stmt::decl("int", "slot_r", "0"),
        Stmt::Comment(format!("prologue: {} stages in flight", s - 1)),
        Stmt::unrolled("p", s - 1, issue),
        Stmt::Loop {
            init: walk.init.into(),
            cond: walk.cond.into(),
            step: walk.step.into(),
            body: steady,
        },
        Stmt::Comment("the zero-filled copies past the last tile: none left pending at exit".into()),
        Stmt::Expr("rc_cp_async_wait_group<0>()".into()),
    ]);
    body
}

/// The shared ring of [`cp_async_body`] over tiles of row pieces: the CTA's `j`-th tile is
/// k-step `j % KS` of block `blockIdx.x + (j / KS) * gridDim.x`; its unit `i = v * threads
/// + tid` is 16 bytes `i % PU` of row `i / PU`.
fn pieces_body(cfg: &StreamConfig, p: &RowPieces, copy_fn: &str) -> Vec<Stmt> {
    let (t, d) = (cfg.threads, cfg.depth);
    let copies = vec![
        Stmt::decl("const long long", "blk", "blockIdx.x + (issue / KS) * gridDim.x"),
        Stmt::decl("const long long", "base", "blk * BLOCK + (issue % KS) * PU"),
        Stmt::unrolled(
            "v",
            d,
            vec![
                Stmt::decl("const int", "i", format!("v * {t} + tid")),
                Stmt::decl("const long long", "u", "base + (i / PU) * SU + i % PU"),
                Stmt::decl("const bool", "ok", "blk < blocks && u < units"),
                Stmt::Expr(format!(
                    "{copy_fn}(&smem[(slot_w * {d} + v) * {t} + tid], src + (ok ? u : 0), ok)"
                )),
            ],
        ),
    ];
    let head = vec![
        Stmt::Comment(format!(
            "blocks of {} rows x {} B; tiles of {} B of each row, {} tiles a block",
            p.rows,
            p.stride,
            p.piece,
            p.k_steps()
        )),
        Stmt::decl("constexpr long long", "KS", p.k_steps().to_string()),
        Stmt::decl("constexpr long long", "PU", (p.piece / 16).to_string()),
        Stmt::decl("constexpr long long", "SU", (p.stride / 16).to_string()),
        Stmt::decl("constexpr long long", "BLOCK", (p.block_bytes() / 16).to_string()),
        Stmt::decl("const long long", "blocks", "rc_ceil_div(units, BLOCK)"),
    ];
    let walk = RingWalk {
        first: "0",
        next: "issue + 1",
        init: "long long j = 0",
        cond: "blockIdx.x + (j / KS) * gridDim.x < blocks",
        step: "++j",
    };
    shared_ring(cfg, head, copies, walk)
}

/// `stages` bulk stages of `TILE` units each, mbarrier `bar[s]` per stage.
fn bulk_body(cfg: &StreamConfig) -> Vec<Stmt> {
    let (t, d, s) = (cfg.threads, cfg.depth, cfg.stages);
    let issue = |tile: &str, slot: &str| Stmt::If {
        cond: format!("tid == 0 && {tile} < tiles"),
        then: vec![
            Stmt::decl(
                "const uint32_t",
                "nb",
                format!("(uint32_t)(16 * rc_min(TILE, units - {tile} * TILE))"),
            ),
            Stmt::Expr(format!("rc_mbarrier_arrive_expect_tx(bar_addr({slot}), nb)")),
            Stmt::Expr(format!(
                "rc_bulk_load(&smem[{slot} * TILE], src + {tile} * TILE, bar_addr({slot}), nb)"
            )),
        ],
        otherwise: vec![],
    };
    vec![
        Stmt::Expr("extern __shared__ __align__(128) uint4 smem[]".into()),
        Stmt::Expr(format!("__shared__ __align__(8) unsigned long long bar[{s}]")),
        Stmt::Expr("auto bar_addr = [&](int i) { return (uint32_t)__cvta_generic_to_shared(&bar[i]); }".into()),
        Stmt::If {
            cond: "tid == 0".into(),
            then: vec![
                Stmt::unrolled("i", s, vec![Stmt::Expr("rc_mbarrier_init(bar_addr(i), 1)".into())]),
                Stmt::Expr("rc_fence_mbarrier_init()".into()),
            ],
            otherwise: vec![],
        },
        Stmt::Expr("__syncthreads()".into()),
        Stmt::Comment(format!("prologue: the CTA's first {s} tiles, one per stage")),
        Stmt::unrolled(
            "i",
            s,
            vec![
                Stmt::decl("const long long", "first", "blockIdx.x + (long long)i * gridDim.x"),
                issue("first", "i"),
            ],
        ),
        Stmt::decl("int", "slot", "0"),
        Stmt::decl("uint32_t", "phase", "0u"),
        Stmt::Loop {
            init: "long long t = blockIdx.x".into(),
            cond: "t < tiles".into(),
            step: "t += gridDim.x".into(),
            body: vec![
                Stmt::Expr("rc_mbarrier_wait_parity(bar_addr(slot), phase)".into()),
                Stmt::decl("const long long", "n", "rc_min(TILE, units - t * TILE)"),
                Stmt::unrolled(
                    "v",
                    d,
                    vec![Stmt::If {
                        cond: format!("v * {t} + tid < n"),
                        then: vec![
                            Stmt::decl("const uint4", "x", format!("smem[slot * TILE + v * {t} + tid]")),
                            xor4("x"),
                        ],
                        otherwise: vec![],
                    }],
                ),
                Stmt::Comment("every lane has read the stage: refill it with the tile `stages` ahead".into()),
                Stmt::Expr("__syncthreads()".into()),
                Stmt::decl("const long long", "ahead", format!("t + {s}LL * gridDim.x")),
                issue("ahead", "slot"),
                Stmt::If {
                    cond: format!("++slot == {s}"),
                    then: vec![Stmt::assign("slot", "0"), Stmt::assign("phase", "phase ^ 1u")],
                    otherwise: vec![],
                },
            ],
        },
    ]
}

/// The configurations `rcute bench stream` sweeps by default (every one compiles for
/// sm_90a without spills; the non-bulk ones also for sm_80).
pub fn sweep() -> Vec<StreamConfig> {
    let mut v = Vec::new();
    let c = |load, threads, depth, stages| StreamConfig {
        load,
        threads,
        depth,
        stages,
        pieces: None,
    };
    for threads in [128, 256, 512] {
        for depth in [2, 4, 8, 16] {
            v.push(c(StreamLoad::Ldg, threads, depth, 1));
        }
    }
    v.push(c(StreamLoad::Ldg, 128, 32, 1));
    for threads in [128, 256] {
        for (depth, stages) in [(1, 4), (2, 4), (4, 4), (2, 8), (4, 8), (8, 4)] {
            v.push(c(StreamLoad::CpAsync, threads, depth, stages));
        }
    }
    // Bulk stages of 8-64 KB, 32-192 KB per CTA.
    for (depth, stages) in [(4, 4), (8, 2), (8, 4), (16, 4), (8, 8), (16, 6)] {
        v.push(c(StreamLoad::Bulk, 128, depth, stages));
    }
    for (depth, stages) in [(4, 4), (8, 4), (4, 8), (8, 6)] {
        v.push(c(StreamLoad::Bulk, 256, depth, stages));
    }
    v
}
