//! Alignment of routed tokens to the grouped GEMM's tiles (the idea of vLLM's
//! `moe_align_block_size`), on the GPU, deterministic and with no host synchronisation.
//!
//! Input: `topk_ids [T, k]` (int32, global expert ids) and a local expert range
//! `[expert_offset, expert_offset + L)`; ids outside it are dropped (another GPU computes
//! them). Outputs, for local expert `e` with `c_e` routed entries:
//!
//! * `counts [L]`: `c_e`;
//! * `offsets [L + 1]`: `offsets[e] = sum_{e' < e} round_up(c_e', block_m)`, and
//!   `offsets[L]` the padded row count, also written to the device scalar `total_rows [1]`
//!   (and, where given, the two `walk_counters` zeroed: `MoeAlignArgs::walk_counters`);
//! * `sorted_ids [rows]`: rows `offsets[e] .. offsets[e] + c_e` hold the flattened indices
//!   `t * k + j` of the entries routed to `e` in ascending order, every other row the
//!   sentinel `T * k`;
//! * `block_expert [blocks]`: the local expert of each `block_m` block of rows, `-1` past
//!   `total_rows`.
//!
//! `rows` and `blocks` come from [`align_capacity`], the worst case over all routings.
//!
//! One block of [`THREADS`] threads, three block barriers, 32-bit index math. Warp `w`
//! owns a contiguous slice of the entries and zeroes its own row of counters (a warp
//! barrier: no other warp touches them before the first block barrier). Pass 1 counts each
//! warp's entries per expert in shared memory (shared atomics: a count does not depend on
//! their order). Thread `e` turns its expert's column of counts into per-warp starting
//! ranks and its total into `ceil(c_e / block_m)` blocks; a block scan of the blocks
//! (shuffles within a warp, then each thread adds the sums of the warps before its own)
//! gives every expert its first block, so the rows are `first block * block_m` and no
//! division runs per row. Pass 2 writes the padding and the block experts (one warp per
//! expert, the rows and blocks past the total strided over the block), pass 3 walks the
//! entries again and places each at `offset + warp's rank + rank within the group`, the
//! group being the lanes of one expert (found with one `__ballot_sync` per bit of the
//! expert; the group's lowest lane advances the warp's counter, so no two lanes of a warp
//! touch one counter): the order within an expert is the order of the flattened index,
//! whatever the scheduling. One `__match_any_sync` finds the same group in one instruction
//! but measured slower on the H100 (DeepSeek-V2-Lite T = 1024: 13.3 against 11.3 us, T =
//! 4096: 34 against 24 us; BENCHMARKS.md, session 21, helper moert).
//!
//! Staged rows: launched with [`GeneratedMoeAlign::staged_launch_config`], which gives the
//! block `4 * rows` bytes of dynamic shared memory where they fit, the kernel fills a
//! shared copy of `sorted_ids` with the sentinel, places the entries there (pass 3's
//! scattered 4-byte stores stay in the SM) and copies all `rows` out in coalesced stores
//! at the end: one 128-byte line per warp store instead of up to 32. The kernel stages
//! exactly when `max_rows` ints fit its dynamic shared memory (`%dynamic_smem_size`), so
//! a launch without it ([`GeneratedMoeAlign::launch_config`], and the fused top-k +
//! alignment) writes `sorted_ids` directly; the outputs are the same either way.
//!
//! The body reads the ids through a name (`body`'s `ids`): `topk_ids` in global memory
//! here, the fused top-k + alignment kernel's copy in shared memory there
//! ([`super::topk_align`]).
//!
//! ```
//! use rcute_kernel::moe_routing::align::{align_capacity, generate, MoeAlignArgs};
//! let g = generate();
//! assert_eq!(g.name, "rc_moe_align_l256");
//! // 3 tokens top-2 over 4 local experts, tiles of 16: at most one block per expert.
//! let cap = align_capacity(3, 2, 4, 16).unwrap();
//! assert_eq!((cap.rows, cap.blocks), (64, 4));
//! assert!(align_capacity(3, 2, 0, 16).is_err());
//! ```

use super::{warp_scan, MoeRoutingError, MAX_LOCAL_EXPERTS};
use crate::emit::{index_expr, unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_layout::{tuple, Layout};

/// Threads of the (single) block.
pub const THREADS: u32 = 1024;

/// Warps of the block: each owns a contiguous slice of the routed entries.
const WARPS: u32 = THREADS / 32;

/// Entries a warp loads before processing them (32 each): independent loads in flight.
/// 8 measured the same and 16 slower (DeepSeek-V2-Lite, T = 1024, H100; BENCHMARKS.md,
/// session 14, helper moegather).
const UNROLL: u32 = 4;

/// The most rows [`GeneratedMoeAlign::staged_launch_config`] stages in shared memory
/// (160 KiB; DeepSeek-V2-Lite at T = 4096 and tiles of 128 has 32704).
pub const STAGED_ROWS_MAX: usize = 40960;

/// The largest `T * k + L * (block_m - 1)` the 32-bit indices allow.
pub const MAX_ROWS_BOUND: i64 = 1 << 30;

/// The output sizes of an alignment, from the shapes alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlignCapacity {
    /// Length of `sorted_ids`: the most padded rows any routing can produce, a multiple
    /// of `block_m`.
    pub rows: usize,
    /// Length of `block_expert`: `rows / block_m`.
    pub blocks: usize,
    /// Length of `counts` (`L`); `offsets` has `L + 1` entries, `total_rows` one.
    pub experts: usize,
}

/// Buffer sizes for `T` tokens, top-`k`, `L` local experts and tiles of `block_m` rows.
///
/// With `N = T * k` entries, expert `e` receiving `c_e` of them uses `ceil(c_e / block_m)`
/// blocks; summed, at most `N` (every non-empty expert has an entry per block) and at
/// most `floor((N + L * (block_m - 1)) / block_m)` (each expert pads by at most `block_m -
/// 1`). So `blocks = min(N, (N + L * (block_m - 1)) / block_m)` and `rows = blocks *
/// block_m`: no device data is needed, and both bounds are reached by some routing.
pub fn align_capacity(
    tokens: usize,
    topk: usize,
    local_experts: usize,
    block_m: usize,
) -> Result<AlignCapacity, MoeRoutingError> {
    if local_experts == 0 || local_experts > MAX_LOCAL_EXPERTS as usize {
        return Err(MoeRoutingError::ExpertRange {
            offset: 0,
            local: local_experts as i64,
        });
    }
    if block_m == 0 {
        return Err(MoeRoutingError::BlockM(0));
    }
    let n = tokens
        .checked_mul(topk)
        .ok_or_else(|| MoeRoutingError::TooLarge(format!("{tokens} tokens x top-{topk}")))?;
    let bound = (local_experts as u128) * (block_m as u128 - 1) + n as u128;
    if bound > MAX_ROWS_BOUND as u128 {
        return Err(MoeRoutingError::TooLarge(format!(
            "T * k + L * (block_m - 1) = {bound} > {MAX_ROWS_BOUND}"
        )));
    }
    let blocks = n.min(bound as usize / block_m);
    Ok(AlignCapacity {
        rows: blocks * block_m,
        blocks,
        experts: local_experts,
    })
}

/// The generated alignment kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedMoeAlign {
    /// Kernel (and unit) name: `rc_moe_align_l256` (up to 256 local experts).
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
}

/// Run-time arguments: device pointers (int32 buffers sized by [`align_capacity`]) and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeAlignArgs {
    /// `topk_ids [T, k]`.
    pub topk_ids: u64,
    /// Output `counts [L]`.
    pub counts: u64,
    /// Output `offsets [L + 1]`.
    pub offsets: u64,
    /// Output `sorted_ids [rows]`.
    pub sorted_ids: u64,
    /// Output `block_expert [blocks]`.
    pub block_expert: u64,
    /// Output `total_rows [1]`.
    pub total_rows: u64,
    /// `T`.
    pub tokens: i32,
    /// `k`.
    pub topk: i32,
    /// First global expert id of this GPU.
    pub expert_offset: i32,
    /// `L`, the experts of this GPU.
    pub local_experts: i32,
    /// The GEMM tile's rows.
    pub block_m: i32,
    /// Optional (0: none): `walk_counters [2]` (u32), zeroed with `total_rows`: the
    /// counters of the SM90 grouped GEMMs' dynamic walks
    /// (`rcute_kernel::gemm_sm90::GemmSm90Config::dynamic_walk`) that follow this alignment,
    /// so that they start from 0 whatever the workspace held.
    pub walk_counters: u64,
}

impl GeneratedMoeAlign {
    /// Validates the sizes and returns the buffer sizes they need.
    pub fn check(&self, a: &MoeAlignArgs) -> Result<AlignCapacity, MoeRoutingError> {
        Self::check_args(a)
    }

    /// [`Self::check`] without a generated kernel (shared with the multi-CTA alignment,
    /// [`super::align_multi`]).
    pub fn check_args(a: &MoeAlignArgs) -> Result<AlignCapacity, MoeRoutingError> {
        if a.expert_offset < 0 || a.local_experts < 1 || a.local_experts as u32 > MAX_LOCAL_EXPERTS {
            return Err(MoeRoutingError::ExpertRange {
                offset: a.expert_offset.into(),
                local: a.local_experts.into(),
            });
        }
        if a.block_m < 1 {
            return Err(MoeRoutingError::BlockM(a.block_m.into()));
        }
        if a.tokens < 0 || a.topk < 1 {
            return Err(MoeRoutingError::TooLarge(format!(
                "{} tokens x top-{}",
                a.tokens, a.topk
            )));
        }
        align_capacity(
            a.tokens as usize,
            a.topk as usize,
            a.local_experts as usize,
            a.block_m as usize,
        )
    }

    /// One block of [`THREADS`] threads, `sorted_ids` written directly.
    pub fn launch_config(&self) -> LaunchConfig {
        LaunchConfig::new(Dim3::new(1, 1, 1), THREADS)
    }

    /// One block of [`THREADS`] threads with the rows staged in shared memory when their
    /// `4 * rows` bytes fit in `free_smem` (the device's opt-in limit less the kernel's
    /// static shared memory) and [`STAGED_ROWS_MAX`]; else [`Self::launch_config`].
    pub fn staged_launch_config(&self, a: &MoeAlignArgs, free_smem: u32) -> Result<LaunchConfig, MoeRoutingError> {
        let cap = self.check(a)?;
        let bytes = cap.rows * 4;
        Ok(if cap.rows <= STAGED_ROWS_MAX && bytes <= free_smem as usize {
            self.launch_config().with_dynamic_smem(bytes as u32)
        } else {
            self.launch_config()
        })
    }

    /// The kernel's arguments in order (after [`Self::check`]), but its last
    /// ([`crate::grid_dependency::launch_chained`] adds the early-trigger flag: this kernel
    /// is a link of the MoE layer's chain).
    pub fn args(&self, a: &MoeAlignArgs) -> Result<KernelArgs, MoeRoutingError> {
        let cap = self.check(a)?;
        Ok(Self::push_after_ids(KernelArgs::new().u64(a.topk_ids), a, cap.rows))
    }

    /// `args` followed by the alignment's parameters after its ids (outputs, entries,
    /// expert range, tile rows, `rows` of capacity): shared with the fused top-k +
    /// alignment kernel, whose parameters continue the same way.
    pub(crate) fn push_after_ids(args: KernelArgs, a: &MoeAlignArgs, rows: usize) -> KernelArgs {
        args.u64(a.counts)
            .u64(a.offsets)
            .u64(a.sorted_ids)
            .u64(a.block_expert)
            .u64(a.total_rows)
            .i32(a.tokens * a.topk)
            .i32(a.expert_offset)
            .i32(a.local_experts)
            .i32(a.block_m)
            .i32(rows as i32)
            .u64(a.walk_counters)
    }
}

/// Generates the alignment kernel (up to [`MAX_LOCAL_EXPERTS`] local experts).
pub fn generate() -> GeneratedMoeAlign {
    let name = format!("rc_moe_align_l{MAX_LOCAL_EXPERTS}");
    let mut items = unit_preamble(&crate::grid_dependency::snippets(), "");
    items.push(Item::Function(crate::grid_dependency::chain_link(kernel(&name))));
    let unit = Unit {
        header: vec![
            format!(
                "{name}: top-k expert ids -> per-expert counts, offsets padded to block_m, sorted ids, block experts (L <= {MAX_LOCAL_EXPERTS})"
            ),
            "Generated by rcute (crates/kernel/src/moe_routing/align.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    GeneratedMoeAlign {
        name,
        source: unit.render(),
    }
}

/// The per-warp counters `[WARPS, MAX_LOCAL_EXPERTS]` in shared memory, at `(w, e)`.
pub(super) fn counter(warp: &str) -> (String, String) {
    let (w, l) = (i64::from(WARPS), i64::from(MAX_LOCAL_EXPERTS));
    let l = Layout::new(tuple!(w, l), tuple!(l, 1)).expect("a static row-major layout");
    let ix = index_expr(&l, &[warp, "e"]).expect("two modes, two coordinates");
    (format!("warp_count[{}]", ix.expr), ix.comment)
}

/// Walks warp `w`'s entries `[begin, end)`, `UNROLL * 32` at a time, reading their ids
/// from the array `ids`; for each entry, `e` is its local expert and `local` whether it is
/// one.
///
/// * `place` empty (pass 1): a local entry adds one to the warp's counter of `e` (a shared
///   atomic: the sum does not depend on the order).
/// * else (pass 3): `peers` are the lanes with the same value (`e`, or `L` for entries of
///   no local expert) and `before` those of lower lanes, found with one ballot per bit of
///   the value (`bits` of them); `place` runs, then the group's lowest lane advances the
///   warp's counter of `e` by the group's size, so the ranks follow the lane order.
pub(super) fn walk_entries(ids: &str, place: Vec<Stmt>) -> Stmt {
    let (cnt, cnt_doc) = counter("w");
    let mut per_entry = vec![
        Stmt::decl("const int", "e", "id[u]"),
        Stmt::decl("const bool", "local", "(unsigned)e < (unsigned)L"),
    ];
    if place.is_empty() {
        per_entry.extend([
            Stmt::Comment(cnt_doc),
            Stmt::If {
                cond: "local".into(),
                then: vec![Stmt::Expr(format!("atomicAdd(&{cnt}, 1)"))],
                otherwise: vec![],
            },
        ]);
    } else {
        per_entry.extend([
            Stmt::decl("const int", "v", "local ? e : L"),
            Stmt::Comment("the lanes holding v: the lanes agreeing with this one on every bit".into()),
            Stmt::decl("unsigned", "peers", "0xffffffffu"),
            Stmt::Loop {
                init: "int b = 0".into(),
                cond: "b < bits".into(),
                step: "++b".into(),
                body: vec![
                    Stmt::decl("const bool", "set", "(v >> b) & 1"),
                    Stmt::decl("const unsigned", "m", "__ballot_sync(0xffffffffu, set)"),
                    Stmt::assign("peers", "peers & (set ? m : ~m)"),
                ],
            },
            Stmt::decl("const unsigned", "before", "peers & ((1u << lane) - 1u)"),
        ]);
        per_entry.extend(place);
        per_entry.extend([
            Stmt::Comment(cnt_doc),
            Stmt::If {
                cond: "local && before == 0u".into(),
                then: vec![Stmt::assign(cnt.clone(), format!("{cnt} + __popc(peers)"))],
                otherwise: vec![],
            },
            Stmt::Expr("__syncwarp()".into()),
        ]);
    }
    Stmt::Loop {
        init: "int base = begin".into(),
        cond: "base < end".into(),
        step: format!("base += {}", 32 * UNROLL),
        body: vec![
            Stmt::Array {
                ty: "int".into(),
                name: "id".into(),
                len: UNROLL as usize,
                comment: Some("local expert of entries base + 32 * u + lane (-1 past end)".into()),
            },
            Stmt::unrolled(
                "u",
                UNROLL,
                vec![
                    Stmt::decl("const int", "i", "base + 32 * u + lane"),
                    Stmt::assign(
                        "id[u]",
                        format!("i < end ? (int)((unsigned){ids}[i] - (unsigned)expert_offset) : -1"),
                    ),
                ],
            ),
            Stmt::unrolled("u", UNROLL, per_entry),
        ],
    }
}

/// Turns the column of expert `e`'s per-warp counts into exclusive ranks from `var` (an
/// `int` holding the first rank), leaving `var` past the last.
pub(super) fn warp_ranks(var: &str) -> Stmt {
    let (cnt, cnt_doc) = counter("v");
    Stmt::For {
        var: "v".into(),
        start: "0".into(),
        end: WARPS.to_string(),
        unroll: false,
        body: vec![
            Stmt::Comment(cnt_doc),
            Stmt::decl("const int", "n", cnt.clone()),
            Stmt::assign(cnt, var),
            Stmt::assign(var, format!("{var} + n")),
        ],
    }
}

/// `stmts`, or one `if (guard)` around them.
fn guarded(guard: Option<&str>, stmts: Vec<Stmt>) -> Vec<Stmt> {
    match guard {
        None => stmts,
        Some(g) => vec![Stmt::If {
            cond: g.into(),
            then: stmts,
            otherwise: vec![],
        }],
    }
}

/// Per-expert totals, per-warp exclusive ranks (in place) and the first block of every
/// expert: thread `e` sums its expert's column of counts into `c_e` and
/// `ceil(c_e / block_m)` blocks; the blocks' exclusive scan over the block (warp scans,
/// then each thread adds the sums of the warps before its own, at most 7 of them) gives
/// `block_first[e]`, and `row_offset[e] = block_first[e] * block_m`. Two block barriers.
fn scan() -> Vec<Stmt> {
    scan_with(vec![Stmt::decl("int", "c", "0"), warp_ranks("c")], None)
}

/// [`scan`] with `totals` the statements that declare `c` (`c_e`, thread `e`'s expert's
/// routed entries) and rank the warps; the global outputs (`counts`, `offsets`,
/// `total_rows`, the walk counters) written only where `publish` holds (`None`: always).
pub(super) fn scan_with(totals: Vec<Stmt>, publish: Option<&str>) -> Vec<Stmt> {
    let mut publish_total = vec![
        Stmt::decl("const int", "total_blocks", "first + blocks"),
        Stmt::assign("block_first[L]", "total_blocks"),
        Stmt::assign("row_offset[L]", "total_blocks * block_m"),
    ];
    publish_total.extend(guarded(
        publish,
        vec![
            Stmt::assign("offsets[L]", "total_blocks * block_m"),
            Stmt::assign("total_rows[0]", "total_blocks * block_m"),
            Stmt::Comment("the dynamic walks of the GEMMs that follow start from 0 (none: a null pointer)".into()),
            Stmt::If {
                cond: "walk_counters != nullptr".into(),
                then: vec![
                    Stmt::assign("walk_counters[0]", "0u"),
                    Stmt::assign("walk_counters[1]", "0u"),
                ],
                otherwise: vec![],
            },
        ],
    ));
    let mut per_expert = vec![Stmt::decl("const int", "e", "threadIdx.x")];
    per_expert.extend(totals);
    per_expert.extend(guarded(publish, vec![Stmt::assign("counts[e]", "c")]));
    per_expert.extend([
        Stmt::assign("expert_count[e]", "c"),
        Stmt::Comment("c + block_m - 1 <= T * k + L * (block_m - 1) <= 2^30: no overflow".into()),
        Stmt::assign("blocks", "(c + block_m - 1) / block_m"),
    ]);
    let mut first = vec![
        Stmt::decl("int", "first", "incl - blocks"),
        Stmt::Loop {
            init: "int v = 0".into(),
            cond: "v < w".into(),
            step: "++v".into(),
            body: vec![Stmt::assign("first", "first + warp_sum[v]")],
        },
        Stmt::assign("block_first[threadIdx.x]", "first"),
        Stmt::assign("row_offset[threadIdx.x]", "first * block_m"),
    ];
    first.extend(guarded(
        publish,
        vec![Stmt::assign("offsets[threadIdx.x]", "first * block_m")],
    ));
    first.push(Stmt::If {
        cond: "(int)threadIdx.x == L - 1".into(),
        then: publish_total,
        otherwise: vec![],
    });
    vec![
        Stmt::decl("int", "blocks", "0"),
        Stmt::If {
            cond: "(int)threadIdx.x < L".into(),
            then: per_expert,
            otherwise: vec![],
        },
        Stmt::decl("int", "incl", "blocks"),
        warp_scan("incl"),
        Stmt::If {
            cond: "lane == 31".into(),
            then: vec![Stmt::assign("warp_sum[w]", "incl")],
            otherwise: vec![],
        },
        Stmt::Expr("__syncthreads()".into()),
        Stmt::If {
            cond: "(int)threadIdx.x < L".into(),
            then: first,
            otherwise: vec![],
        },
        Stmt::Expr("__syncthreads()".into()),
    ]
}

/// Who writes pass 2's rows and blocks: thread `thread` of `threads` strides over the
/// rows and blocks past the total, warp `warp` of `warps` over the experts; `unstaged` the
/// condition prefix of the sentinel stores (`"!staged && "`, or empty where no rows are
/// staged).
pub(super) struct Spread {
    pub thread: String,
    pub threads: String,
    pub warp: String,
    pub warps: String,
    pub unstaged: String,
}

impl Spread {
    /// The single block: thread `threadIdx.x`, warp `w`.
    fn block() -> Spread {
        Spread {
            thread: "threadIdx.x".into(),
            threads: THREADS.to_string(),
            warp: "w".into(),
            warps: WARPS.to_string(),
            unstaged: "!staged && ".into(),
        }
    }
}

/// Pass 2: the sentinel in every padding row (unless `staged`), the expert of every block
/// (-1 past the total): the rows and blocks past the total strided over the block, then
/// warp `w` the padding rows and the blocks of experts `w, w + WARPS, ...` (`sp`: over
/// several blocks). No division per row.
pub(super) fn pad_rows(sp: &Spread) -> Vec<Stmt> {
    let Spread {
        thread,
        threads,
        warp,
        warps,
        unstaged,
    } = sp;
    let mut v = vec![];
    if !unstaged.is_empty() {
        v.push(Stmt::Comment(
            "staged: the sentinel is in the shared rows already".into(),
        ));
    }
    v.extend([
        Stmt::Loop {
            init: format!("int r = total + {thread}"),
            cond: format!("{unstaged}r < max_rows"),
            step: format!("r += {threads}"),
            body: vec![Stmt::assign("sorted_ids[r]", "N")],
        },
        Stmt::Comment("the blocks starting below max_rows".into()),
        Stmt::decl(
            "const int",
            "max_blocks",
            "max_rows / block_m + (max_rows % block_m != 0 ? 1 : 0)",
        ),
        Stmt::Loop {
            init: format!("int b = total_blocks + {thread}"),
            cond: "b < max_blocks".into(),
            step: format!("b += {threads}"),
            body: vec![Stmt::assign("block_expert[b]", "-1")],
        },
        Stmt::Loop {
            init: format!("int e = {warp}"),
            cond: "e < L".into(),
            step: format!("e += {warps}"),
            body: vec![
                Stmt::decl("const int", "last", "row_offset[e + 1]"),
                Stmt::Loop {
                    init: "int r = row_offset[e] + expert_count[e] + lane".into(),
                    cond: format!("{unstaged}r < last"),
                    step: "r += 32".into(),
                    body: vec![Stmt::assign("sorted_ids[r]", "N")],
                },
                Stmt::decl("const int", "last_block", "block_first[e + 1]"),
                Stmt::Loop {
                    init: "int b = block_first[e] + lane".into(),
                    cond: "b < last_block".into(),
                    step: "b += 32".into(),
                    body: vec![Stmt::assign("block_expert[b]", "e")],
                },
            ],
        },
    ]);
    v
}

fn kernel(name: &str) -> CFunction {
    let mut params = vec![("const int* __restrict__".to_string(), "topk_ids".to_string())];
    params.extend(params_after_ids());
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS}, 1)"),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec!["N = T * k routed entries; local experts [expert_offset, expert_offset + L); one block".into()],
        body: body("topk_ids"),
    }
}

/// The parameters after `topk_ids`: the outputs and the sizes.
pub(super) fn params_after_ids() -> Vec<(String, String)> {
    let int_out = |n: &str| ("int* __restrict__".to_string(), n.to_string());
    vec![
        int_out("counts"),
        int_out("offsets"),
        int_out("sorted_ids"),
        int_out("block_expert"),
        int_out("total_rows"),
        ("int".into(), "N".into()),
        ("int".into(), "expert_offset".into()),
        ("int".into(), "L".into()),
        ("int".into(), "block_m".into()),
        ("int".into(), "max_rows".into()),
        ("unsigned* __restrict__".into(), "walk_counters".into()),
    ]
}

/// `__shared__ int` arrays `decls` (`name[len]`).
pub(super) fn shared_ints(decls: &[String]) -> Vec<Stmt> {
    decls
        .iter()
        .map(|d| Stmt::Decl {
            ty: "__shared__ int".into(),
            name: d.clone(),
            init: None,
            comment: None,
        })
        .collect()
}

/// The shared array of the per-warp, per-expert counters (the counting pass's only one).
pub(super) fn warp_count_array() -> String {
    format!("warp_count[{}]", WARPS * MAX_LOCAL_EXPERTS)
}

/// The shared arrays of the alignment's passes.
pub(super) fn pass_arrays() -> Vec<String> {
    vec![
        warp_count_array(),
        format!("row_offset[{}]", MAX_LOCAL_EXPERTS + 1),
        format!("block_first[{}]", MAX_LOCAL_EXPERTS + 1),
        format!("expert_count[{MAX_LOCAL_EXPERTS}]"),
        format!("warp_sum[{WARPS}]"),
    ]
}

/// Warp `w` zeroes its own row of counters: no other warp touches them before the first
/// block barrier.
pub(super) fn zero_counters() -> Vec<Stmt> {
    let (cnt, _) = counter("w");
    vec![
        Stmt::Comment(
            "warp w zeroes its own counters: no other warp touches them before the first block barrier".into(),
        ),
        Stmt::Loop {
            init: "int e = lane".into(),
            cond: format!("e < {MAX_LOCAL_EXPERTS}"),
            step: "e += 32".into(),
            body: vec![Stmt::assign(cnt, "0")],
        },
        Stmt::Expr("__syncwarp()".into()),
    ]
}

/// Pass 3's placement of one entry (`walk_entries`' `place`): at its expert's offset + the
/// warp's rank + its rank in the group, into the shared rows where `staged` (a run-time
/// flag) holds, if `stageable`, else into `sorted_ids`.
pub(super) fn place(stageable: bool) -> Vec<Stmt> {
    let (cnt, _) = counter("w");
    let store = |to: &str| Stmt::assign(format!("{to}[row]"), "base + 32 * u + lane");
    let store = if stageable {
        Stmt::If {
            cond: "staged".into(),
            then: vec![store("staged_rows")],
            otherwise: vec![store("sorted_ids")],
        }
    } else {
        store("sorted_ids")
    };
    vec![
        Stmt::If {
            cond: "local".into(),
            then: vec![
                Stmt::decl("const int", "row", format!("row_offset[e] + {cnt} + __popc(before)")),
                store,
            ],
            otherwise: vec![],
        },
        Stmt::Expr("__syncwarp()".into()),
    ]
}

/// The alignment of one block of [`THREADS`] threads, reading the `N` ids from the array
/// named `ids` (global `topk_ids`, or a shared copy).
pub(super) fn body(ids: &str) -> Vec<Stmt> {
    let mut body = shared_ints(&pass_arrays());
    body.extend([
        Stmt::Decl {
            ty: "extern __shared__ int".into(),
            name: "staged_rows[]".into(),
            init: None,
            comment: Some("the rows, where the launch gives max_rows ints of dynamic shared memory".into()),
        },
        Stmt::decl("unsigned", "dyn_bytes", "0u"),
        Stmt::Expr("asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(dyn_bytes))".into()),
        Stmt::decl("const bool", "staged", "max_rows <= (int)(dyn_bytes / 4u)"),
        Stmt::decl("const int", "lane", "threadIdx.x % 32"),
        Stmt::decl("const int", "w", "threadIdx.x / 32"),
        Stmt::Comment("staged: every row starts as the sentinel (before the first block barrier)".into()),
        Stmt::Loop {
            init: "int r = threadIdx.x".into(),
            cond: "staged && r < max_rows".into(),
            step: format!("r += {THREADS}"),
            body: vec![Stmt::assign("staged_rows[r]", "N")],
        },
    ]);
    body.extend(zero_counters());
    body.extend([
        Stmt::Comment(format!(
            "warp w owns the flattened entries [begin, end), {WARPS} contiguous slices (N <= 2^30: 32-bit)"
        )),
        Stmt::decl("const int", "per", format!("(N + {}) / {WARPS}", WARPS - 1)),
        Stmt::decl("const int", "begin", "min(N, w * per)"),
        Stmt::decl("const int", "end", "min(N, begin + per)"),
        Stmt::Comment("pass 1: per-warp counts".into()),
        walk_entries(ids, vec![]),
        Stmt::Expr("__syncthreads()".into()),
    ]);
    body.extend(scan());
    body.extend(after_scan(ids, &Spread::block(), true));
    body.push(Stmt::If {
        cond: "staged".into(),
        then: vec![
            Stmt::Comment("the staged rows out, coalesced".into()),
            Stmt::Expr("__syncthreads()".into()),
            Stmt::Loop {
                init: "int r = threadIdx.x".into(),
                cond: "r < max_rows".into(),
                step: format!("r += {THREADS}"),
                body: vec![Stmt::assign("sorted_ids[r]", "staged_rows[r]")],
            },
        ],
        otherwise: vec![],
    });
    body
}

/// Passes 2 and 3 after the scan: padding rows and block experts spread as `sp` says,
/// then every entry of the warps' slices placed ([`place`]).
pub(super) fn after_scan(ids: &str, sp: &Spread, stageable: bool) -> Vec<Stmt> {
    vec![
        Stmt::decl("const int", "total", "row_offset[L]"),
        Stmt::decl("const int", "total_blocks", "block_first[L]"),
        Stmt::Comment("pass 2: padding rows and block experts".into()),
        Stmt::Block(pad_rows(sp)),
        Stmt::Comment("bits of a value in [0, L]: the ballots that find a warp's lanes of one expert".into()),
        Stmt::decl("const int", "bits", "32 - __clz(L)"),
        Stmt::Comment("pass 3: each entry at its expert's offset + the warp's rank + its rank in the group".into()),
        walk_entries(ids, place(stageable)),
    ]
}
