//! The alignment of [`super::align`] on several CTAs: the same outputs, bit for bit, for
//! routings with many entries, where one block's passes over `T * k` entries are the
//! alignment's time (DeepSeek-V2-Lite at T = 4096: 24576 entries, 768 per warp).
//!
//! Two kernels on the same `C` CTAs ([`ctas`]) of [`THREADS`] threads; CTA `c` owns the
//! `c`-th of `C` contiguous slices of the flattened entries, and its warp `w` the `w`-th
//! of 32 contiguous slices of those:
//!
//! * `rc_moe_align_count_l256` counts its slice per local expert (per-warp shared
//!   counters, summed per expert) into row `c` of a global table `[C, L]` (int32, in the
//!   workspace: [`table_bytes`]).
//! * `rc_moe_align_place_l256` counts its slice again per warp, reads the table's column
//!   of every expert (its total `c_e` and the entries of the CTAs before its own), scans
//!   the totals' blocks exactly as the single block does (so every CTA knows every
//!   expert's offset), writes its share of the padding rows and block experts (CTA `c`'s
//!   warp `w` the experts `c * 32 + w`, `c * 32 + w + 32 * C`, ...; the rows and blocks
//!   past the total strided over all threads), and places its entries at offset + the
//!   CTAs' rank + the warp's rank + the rank in the group, as pass 3 of the single block.
//!   CTA 0 alone writes `counts`, `offsets`, `total_rows` and zeroes the walk counters.
//!
//! No CTA waits for another: the second kernel is the first's successor in the stream
//! (a link of the same programmatic-dependency chain, so it reads the table after the
//! first kernel's memory is flushed), and the next call's first kernel cannot overwrite
//! the table before this call's second has finished (each link waits for its
//! predecessor). Within an expert the entries are in ascending flattened index, whatever
//! the scheduling: the ranks are sums of counts, none depends on the order of atomics.
//!
//! ```
//! use rcute_kernel::moe_routing::align_multi::{ctas, generate, table_bytes};
//! let g = generate();
//! assert_eq!(g.count.0, "rc_moe_align_count_l256");
//! assert_eq!(ctas(24576), 12);
//! assert_eq!(table_bytes(24576, 64), 12 * 64 * 4);
//! ```

use super::align::{self, AlignCapacity, GeneratedMoeAlign, MoeAlignArgs, Spread, THREADS};
use super::{MoeRoutingError, MAX_LOCAL_EXPERTS};
use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Dim3, KernelArgs, LaunchConfig};

/// Routed entries per CTA: 64 per warp (the single block's pass loads 128 per warp at once).
pub const ENTRIES_PER_CTA: usize = 2048;

/// The most CTAs: 64 (the table at most `64 * 256` ints).
pub const MAX_CTAS: usize = 64;

/// CTAs for `n` routed entries: `ceil(n / ENTRIES_PER_CTA)`, 1 to [`MAX_CTAS`].
pub fn ctas(n: usize) -> usize {
    n.div_ceil(ENTRIES_PER_CTA).clamp(1, MAX_CTAS)
}

/// Bytes of the table `[C, L]` for `n` entries over `local` experts.
pub fn table_bytes(n: usize, local: usize) -> usize {
    ctas(n) * local * 4
}

/// The two generated kernels, `(name, source)` each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedMoeAlignMulti {
    /// `rc_moe_align_count_l256`: the per-CTA counts into the table.
    pub count: (String, String),
    /// `rc_moe_align_place_l256`: the scan, padding and placement.
    pub place: (String, String),
}

impl GeneratedMoeAlignMulti {
    /// Validates the sizes (as [`GeneratedMoeAlign::check`]) and that `table_len` bytes
    /// hold the table.
    pub fn check(&self, a: &MoeAlignArgs, table_len: usize) -> Result<AlignCapacity, MoeRoutingError> {
        let cap = GeneratedMoeAlign::check_args(a)?;
        let need = table_bytes(a.tokens as usize * a.topk as usize, cap.experts);
        if table_len < need {
            return Err(MoeRoutingError::TooLarge(format!(
                "the alignment table needs {need} bytes, the workspace holds {table_len}"
            )));
        }
        Ok(cap)
    }

    /// `C` CTAs ([`ctas`]) of [`THREADS`] threads, both kernels.
    pub fn launch_config(&self, a: &MoeAlignArgs) -> LaunchConfig {
        let c = ctas((a.tokens.max(0) as usize) * (a.topk.max(0) as usize));
        LaunchConfig::new(Dim3::new(c as u32, 1, 1), THREADS)
    }

    /// The count kernel's arguments but the early-trigger flag (after [`Self::check`]).
    pub fn count_args(&self, a: &MoeAlignArgs, table: u64, table_len: usize) -> Result<KernelArgs, MoeRoutingError> {
        self.check(a, table_len)?;
        Ok(KernelArgs::new()
            .u64(a.topk_ids)
            .u64(table)
            .i32(a.tokens * a.topk)
            .i32(a.expert_offset)
            .i32(a.local_experts))
    }

    /// The place kernel's arguments but the early-trigger flag (after [`Self::check`]).
    pub fn place_args(&self, a: &MoeAlignArgs, table: u64, table_len: usize) -> Result<KernelArgs, MoeRoutingError> {
        let cap = self.check(a, table_len)?;
        let args = KernelArgs::new().u64(a.topk_ids).u64(table);
        Ok(GeneratedMoeAlign::push_after_ids(args, a, cap.rows))
    }
}

/// Generates both kernels (up to [`MAX_LOCAL_EXPERTS`] local experts).
pub fn generate() -> GeneratedMoeAlignMulti {
    let count = format!("rc_moe_align_count_l{MAX_LOCAL_EXPERTS}");
    let place = format!("rc_moe_align_place_l{MAX_LOCAL_EXPERTS}");
    GeneratedMoeAlignMulti {
        count: (count.clone(), unit(&count, count_kernel(&count), "per-CTA counts of the routed entries per local expert into a table [C, L]")),
        place: (place.clone(), unit(&place, place_kernel(&place), "the table [C, L] -> per-expert counts, offsets padded to block_m, sorted ids, block experts; each CTA its slice")),
    }
}

fn unit(name: &str, f: CFunction, what: &str) -> String {
    let mut items = unit_preamble(&crate::grid_dependency::snippets(), "");
    items.push(Item::Function(crate::grid_dependency::chain_link(f)));
    Unit {
        header: vec![
            format!("{name}: {what} (L <= {MAX_LOCAL_EXPERTS}; the two kernels of a multi-CTA alignment)"),
            "Generated by rcute (crates/kernel/src/moe_routing/align_multi.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    }
    .render()
}

/// The parameters up to the table.
fn ids_and_table() -> Vec<(String, String)> {
    vec![
        ("const int* __restrict__".into(), "topk_ids".into()),
        ("int* __restrict__".into(), "table".into()),
    ]
}

/// Lane, warp, this CTA's slice `[cbeg, cend)` of the entries and warp `w`'s `[begin, end)`
/// of it; the counters zeroed, pass 1 (per-warp counts) and a block barrier.
fn count_slice() -> Vec<Stmt> {
    let mut v = vec![
        Stmt::decl("const int", "lane", "threadIdx.x % 32"),
        Stmt::decl("const int", "w", "threadIdx.x / 32"),
    ];
    v.extend(align::zero_counters());
    v.extend([
        Stmt::Comment(
            "CTA c owns the entries [cbeg, cend), warp w [begin, end) of them (N <= 2^30, C <= 64: 32-bit)".into(),
        ),
        Stmt::decl("const int", "cper", "(N + (int)gridDim.x - 1) / (int)gridDim.x"),
        Stmt::decl("const int", "cbeg", "min(N, (int)blockIdx.x * cper)"),
        Stmt::decl("const int", "cend", "min(N, cbeg + cper)"),
        Stmt::decl("const int", "per", "(cend - cbeg + 31) / 32"),
        Stmt::decl("const int", "begin", "min(cend, cbeg + w * per)"),
        Stmt::decl("const int", "end", "min(cend, begin + per)"),
        Stmt::Comment("pass 1: per-warp counts".into()),
        align::walk_entries("topk_ids", vec![]),
        Stmt::Expr("__syncthreads()".into()),
    ]);
    v
}

fn count_kernel(name: &str) -> CFunction {
    let (cnt, cnt_doc) = align::counter("v");
    let mut body = align::shared_ints(&[align::warp_count_array()]);
    body.extend(count_slice());
    body.push(Stmt::If {
        cond: "(int)threadIdx.x < L".into(),
        then: vec![
            Stmt::decl("const int", "e", "threadIdx.x"),
            Stmt::decl("int", "c", "0"),
            Stmt::For {
                var: "v".into(),
                start: "0".into(),
                end: (THREADS / 32).to_string(),
                unroll: false,
                body: vec![Stmt::Comment(cnt_doc), Stmt::assign("c", format!("c + {cnt}"))],
            },
            Stmt::Comment("row blockIdx.x of the table [C, L]".into()),
            Stmt::assign("table[blockIdx.x * L + e]", "c"),
        ],
        otherwise: vec![],
    });
    let mut params = ids_and_table();
    params.extend([
        ("int".into(), "N".into()),
        ("int".into(), "expert_offset".into()),
        ("int".into(), "L".into()),
    ]);
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS}, 1)"),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec!["N = T * k routed entries; local experts [expert_offset, expert_offset + L); C CTAs".into()],
        body,
    }
}

fn place_kernel(name: &str) -> CFunction {
    let mut body = align::shared_ints(&align::pass_arrays());
    body.extend(count_slice());
    let totals = vec![
        Stmt::Comment("c_e over all CTAs, and start the entries of the CTAs before this one".into()),
        Stmt::decl("int", "c", "0"),
        Stmt::decl("int", "start", "0"),
        Stmt::Loop {
            init: "int cc = 0".into(),
            cond: "cc < (int)gridDim.x".into(),
            step: "++cc".into(),
            body: vec![
                Stmt::decl("const int", "n", "table[cc * L + e]"),
                Stmt::assign("start", "start + (cc < (int)blockIdx.x ? n : 0)"),
                Stmt::assign("c", "c + n"),
            ],
        },
        align::warp_ranks("start"),
    ];
    body.extend(align::scan_with(totals, Some("blockIdx.x == 0")));
    body.extend([
        Stmt::Comment("pass 2 over all CTAs: global thread gt of gthreads, global warp gw of gwarps".into()),
        Stmt::decl(
            "const int",
            "gt",
            format!("(int)blockIdx.x * {THREADS} + (int)threadIdx.x"),
        ),
        Stmt::decl("const int", "gthreads", format!("(int)gridDim.x * {THREADS}")),
        Stmt::decl("const int", "gw", format!("(int)blockIdx.x * {} + w", THREADS / 32)),
        Stmt::decl("const int", "gwarps", format!("(int)gridDim.x * {}", THREADS / 32)),
    ]);
    let sp = Spread {
        thread: "gt".into(),
        threads: "gthreads".into(),
        warp: "gw".into(),
        warps: "gwarps".into(),
        unstaged: String::new(),
    };
    body.extend(align::after_scan("topk_ids", &sp, false));
    let mut params = ids_and_table();
    params.extend(align::params_after_ids());
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS}, 1)"),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec!["N = T * k routed entries; local experts [expert_offset, expert_offset + L); C CTAs, the table of the count kernel".into()],
        body,
    }
}
