//! The MoE finalize: `y[t] = sum_{j < k, topk_ids[t, j] local} sum_{s < splits} out[s][t *
//! k + j]` (`out[s]` the slab of GEMM2's K split `s`), summed in f32 in the order `j = 0,
//! 1, ..., k - 1`, then `s` (no atomics: bit-identical on every run).
//! Entries routed to experts outside `[expert_offset, expert_offset + L)` contribute
//! nothing (another GPU computes them); a token with none gets zeros.
//!
//! One thread per 16-byte vector (8 elements) of `y`; `H` must be a multiple of 8. A thread
//! loads the ids and the rows of up to 8 (entry, split) pairs together, then adds the rows
//! of the local pairs in order: one global round trip per 8 pairs (one token of
//! DeepSeek-V2-Lite, k = 6, in one batch). A row is loaded whether or not its entry is
//! local (every entry's row lies in `out`; GEMM2 writes only the local ones), so the row
//! loads do not wait for the ids; a non-local row's value is never added, so `y` is the
//! same bit for bit as with the rows loaded after the ids (the kernel of session 21), one
//! round trip earlier on the layer's last link.
//!
//! ```
//! use rcute_kernel::grouped_gemm::finalize::generate;
//! let g = generate(rcute_atom::Element::BF16).unwrap();
//! assert_eq!(g.name, "rc_moe_finalize_bf16");
//! ```

use super::GroupedGemmError;
use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Function, KernelArgs, LaunchConfig};
use rcute_atom::Element;

/// Threads per block.
pub const THREADS: u32 = 256;

/// The generated finalize kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedMoeFinalize {
    /// `rc_moe_finalize_<type>`.
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
    /// The element type of `out` and `y`.
    pub element: Element,
}

/// Arguments of a finalize launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeFinalizeArgs {
    /// `out [T * k, H]`, the scattered, weighted expert rows.
    pub out: u64,
    /// `topk_ids [T, k]` (int32, global expert ids).
    pub topk_ids: u64,
    /// `y [T, H]`.
    pub y: u64,
    /// `T`.
    pub tokens: i32,
    /// `k`.
    pub topk: i32,
    /// `H`, a multiple of 8.
    pub hidden: i32,
    /// First local expert.
    pub expert_offset: i32,
    /// Local experts.
    pub local_experts: i32,
    /// GEMM2's K splits (slabs of `out`), at least 1.
    pub splits: i32,
    /// Elements between the slabs (at least `T * k * H` when `splits > 1`).
    pub split_stride: i64,
}

/// The 16-bit pair type of a row sum over `element` (bf16 or f16) and its conversions to
/// and from `float2`: `(pair, to_float2, from_float2)`.
pub(crate) fn pair_types(element: Element) -> Option<(&'static str, &'static str, &'static str)> {
    match element {
        Element::BF16 => Some(("__nv_bfloat162", "__bfloat1622float2", "__floats2bfloat162_rn")),
        Element::F16 => Some(("__half2", "__half22float2", "__floats2half2_rn")),
        _ => None,
    }
}

/// The body of a per-token sum of 16-bit rows into `y [T, H]` in a fixed order (no
/// atomics), one thread per 8 elements (`H` a multiple of 8, blocks of `threads`): the
/// thread's token `t` and column `c`, the f32 sum `s[8]` (zeroed; `order` names its order
/// in the comment), `rows` (the loop adding the rows with [`add_row`]) and the store of `s`
/// rounded to `t2` pairs (made by `from_f2`). Shared by this kernel and the
/// expert-parallel combine ([`crate::moe_routing::ep_dispatch::generate_combine`]).
pub(crate) fn row_sum_body(threads: u32, t2: &str, from_f2: &str, order: &str, rows: Stmt) -> Vec<Stmt> {
    vec![
        Stmt::decl(
            "const long long",
            "i",
            format!("(long long)blockIdx.x * {threads} + threadIdx.x"),
        ),
        Stmt::decl("const int", "vecs", "H / 8"),
        Stmt::If {
            cond: "i >= (long long)T * vecs".into(),
            then: vec![Stmt::Return],
            otherwise: vec![],
        },
        Stmt::Decl {
            ty: "const int".into(),
            name: "t".into(),
            init: Some("(int)(i / vecs)".into()),
            comment: Some("y (T,H):(H,1) in 8-element vectors: (T,H/8):(H/8,1)".into()),
        },
        Stmt::decl("const int", "c", "(int)(i % vecs) * 8"),
        Stmt::Array {
            ty: "float".into(),
            name: "s".into(),
            len: 8,
            comment: Some(format!("the sum, in the fixed order {order}")),
        },
        Stmt::unrolled("x", 8, vec![Stmt::assign("s[x]", "0.0f")]),
        rows,
        Stmt::Array {
            ty: t2.into(),
            name: "o".into(),
            len: 4,
            comment: None,
        },
        Stmt::unrolled(
            "x",
            4,
            vec![Stmt::assign("o[x]", format!("{from_f2}(s[2 * x], s[2 * x + 1])"))],
        ),
        Stmt::assign(
            "*reinterpret_cast<uint4*>(y + (long long)t * H + c)",
            "*reinterpret_cast<const uint4*>(o)",
        ),
    ]
}

/// Adds one row's 16-byte vector to the sum `s[8]` of [`row_sum_body`] in f32: loads `v`
/// from the address `at` (commented with its `layout`) and reads it through the `t2` pair
/// pointer `ptr`, converted by `to_f2`.
pub(crate) fn add_row(t2: &str, to_f2: &str, at: &str, layout: &str, ptr: &str) -> Vec<Stmt> {
    let mut v = vec![Stmt::Decl {
        ty: "const uint4".into(),
        name: "v".into(),
        init: Some(format!("__ldg(reinterpret_cast<const uint4*>({at}))")),
        comment: Some(layout.into()),
    }];
    v.extend(add_vector(t2, to_f2, "v", ptr));
    v
}

/// Adds the loaded 16-byte vector `v` (8 elements) to the sum `s[8]` in f32, read through
/// the `t2` pair pointer `ptr` and converted by `to_f2`.
fn add_vector(t2: &str, to_f2: &str, v: &str, ptr: &str) -> Vec<Stmt> {
    vec![
        Stmt::decl(
            &format!("const {t2}*"),
            ptr,
            format!("reinterpret_cast<const {t2}*>(&{v})"),
        ),
        Stmt::unrolled(
            "x",
            4,
            vec![
                Stmt::decl("const float2", "f", format!("{to_f2}({ptr}[x])")),
                Stmt::assign("s[2 * x]", "s[2 * x] + f.x"),
                Stmt::assign("s[2 * x + 1]", "s[2 * x + 1] + f.y"),
            ],
        ),
    ]
}

/// Pairs (entry `j`, split `sp`) a thread loads before adding them: their ids, then their
/// rows, in flight together.
const BATCH: u32 = 8;

/// The finalize's rows: the pairs `q = j * splits + sp` (`j < k`, `sp < splits`) in
/// batches of [`BATCH`]. A batch loads the ids and the rows of its pairs (every pair's
/// row, local or not: independent loads, one round trip), then adds the rows of the local
/// pairs in the order of `q`: the order of one pair at a time (`j` then `sp`).
fn batched_rows(t2: &str, to_f2: &str) -> Stmt {
    let arr = |ty: &str, name: &str, comment: &str| Stmt::Array {
        ty: ty.into(),
        name: name.into(),
        len: BATCH as usize,
        comment: Some(comment.into()),
    };
    let mut add = vec![Stmt::decl("const uint4", "w", "v[u]")];
    add.extend(add_vector(t2, to_f2, "w", "p"));
    Stmt::Block(vec![
        Stmt::decl("const int", "pairs", "k * splits"),
        Stmt::Comment("the pair q0 of the batch: entry j, split sp".into()),
        Stmt::decl("int", "j", "0"),
        Stmt::decl("int", "sp", "0"),
        Stmt::Loop {
            init: "int q0 = 0".into(),
            cond: "q0 < pairs".into(),
            step: format!("q0 += {BATCH}"),
            body: vec![
                arr("int", "jq", "entry of pair q0 + u"),
                arr("int", "sq", "split of pair q0 + u"),
                arr("int", "eq", "local expert of pair q0 + u (-1 past the pairs)"),
                Stmt::unrolled(
                    "u",
                    BATCH,
                    vec![
                        Stmt::assign("jq[u]", "j"),
                        Stmt::assign("sq[u]", "sp"),
                        Stmt::assign(
                            "eq[u]",
                            "q0 + u < pairs ? __ldg(topk_ids + (long long)t * k + j) - expert_offset : -1",
                        ),
                        Stmt::assign("sp", "sp + 1"),
                        Stmt::If {
                            cond: "sp == splits".into(),
                            then: vec![Stmt::assign("sp", "0"), Stmt::assign("j", "j + 1")],
                            otherwise: vec![],
                        },
                    ],
                ),
                arr("uint4", "v", "the rows of the pairs, local or not (not waiting for the ids)"),
                Stmt::unrolled(
                    "u",
                    BATCH,
                    vec![Stmt::If {
                        cond: "q0 + u < pairs".into(),
                        then: vec![Stmt::Assign {
                            lhs: "v[u]".into(),
                            rhs: "__ldg(reinterpret_cast<const uint4*>(out + sq[u] * split_stride + ((long long)t * k + jq[u]) * H + c))".into(),
                            comment: Some("out (splits,T*k,H):(split_stride,H,1), slab sq[u], row t * k + jq[u]".into()),
                        }],
                        otherwise: vec![Stmt::assign("v[u]", "make_uint4(0u, 0u, 0u, 0u)")],
                    }],
                ),
                Stmt::unrolled(
                    "u",
                    BATCH,
                    vec![Stmt::If {
                        cond: "(unsigned)eq[u] < (unsigned)L".into(),
                        then: add,
                        otherwise: vec![],
                    }],
                ),
            ],
        },
    ])
}

/// Generates the finalize kernel for bf16 or f16.
pub fn generate(element: Element) -> Result<GeneratedMoeFinalize, GroupedGemmError> {
    let (t2, to_f2, from_f2) =
        pair_types(element).ok_or_else(|| GroupedGemmError::Config(format!("finalize of {element} (bf16 or f16)")))?;
    let ta = element.cuda_type();
    let name = format!("rc_moe_finalize_{}", element.ptx());
    let rows = batched_rows(t2, to_f2);
    let body = row_sum_body(THREADS, t2, from_f2, "j = 0..k-1", rows);
    let f = CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS})"),
        ret: "void".into(),
        name: name.clone(),
        params: vec![
            (format!("const {ta}* __restrict__"), "out".into()),
            ("const int* __restrict__".into(), "topk_ids".into()),
            (format!("{ta}* __restrict__"), "y".into()),
            ("int".into(), "T".into()),
            ("int".into(), "k".into()),
            ("int".into(), "H".into()),
            ("int".into(), "expert_offset".into()),
            ("int".into(), "L".into()),
            ("int".into(), "splits".into()),
            ("long long".into(), "split_stride".into()),
        ],
        doc: vec!["y[t] = sum over the token's local entries j and the K splits s of out[s][t * k + j], j then s ascending; one thread per 8 elements".into()],
        body,
    };
    let mut items = unit_preamble(&crate::grid_dependency::snippets(), "");
    items.push(Item::Function(crate::grid_dependency::chain_link(f)));
    let unit = Unit {
        header: vec![
            format!("{name}: per token, the sum of its k expert rows in a fixed order (deterministic, no atomics)"),
            "Generated by rcute (crates/kernel/src/grouped_gemm/finalize.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedMoeFinalize {
        name,
        source: unit.render(),
        element,
    })
}

impl GeneratedMoeFinalize {
    /// Checks the sizes (positive, `H % 8 == 0`, 16-byte aligned `out` and `y`).
    pub fn check(&self, a: &MoeFinalizeArgs) -> Result<(), GroupedGemmError> {
        let err = |s: String| Err(GroupedGemmError::Args(s));
        if a.tokens < 1 || a.topk < 1 || a.hidden < 8 || a.hidden % 8 != 0 || a.local_experts < 1 || a.expert_offset < 0
        {
            return err(format!(
                "finalize T={} k={} H={} (a multiple of 8) experts [{}, +{})",
                a.tokens, a.topk, a.hidden, a.expert_offset, a.local_experts
            ));
        }
        if a.splits < 1
            || (a.splits > 1 && a.split_stride < i64::from(a.tokens) * i64::from(a.topk) * i64::from(a.hidden))
            || a.split_stride % 8 != 0
        {
            return err(format!("{} splits {} elements apart", a.splits, a.split_stride));
        }
        if !a.out.is_multiple_of(16) || !a.y.is_multiple_of(16) || !a.topk_ids.is_multiple_of(4) {
            return err("out and y must be 16-byte aligned".into());
        }
        if (a.tokens as i64) * (a.hidden as i64 / 8) > (i32::MAX as i64) * i64::from(THREADS) {
            return err("too many vectors for the grid".into());
        }
        Ok(())
    }

    /// One thread per 8-element vector of `y`.
    pub fn launch_config(&self, a: &MoeFinalizeArgs) -> LaunchConfig {
        let n = (a.tokens.max(0) as u64) * (a.hidden.max(0) as u64 / 8);
        LaunchConfig::new((n.div_ceil(u64::from(THREADS)).max(1) as u32, 1, 1), THREADS)
    }

    /// The kernel's arguments in order, but its last (the early-trigger flag that
    /// [`crate::grid_dependency::launch_chained`] adds: the kernel is a link of the MoE
    /// layer's chain).
    pub(crate) fn args(&self, a: &MoeFinalizeArgs) -> KernelArgs {
        KernelArgs::new()
            .u64(a.out)
            .u64(a.topk_ids)
            .u64(a.y)
            .i32(a.tokens)
            .i32(a.topk)
            .i32(a.hidden)
            .i32(a.expert_offset)
            .i32(a.local_experts)
            .i32(a.splits)
            .i64(a.split_stride)
    }

    /// Checks `a` and launches `f` (this kernel, loaded).
    ///
    /// # Safety
    ///
    /// `out` must hold `splits` slabs of `T * k * H` (`split_stride` apart), `topk_ids` `T * k`, `y` `T * H` elements, valid until
    /// the kernel finishes.
    pub unsafe fn launch(&self, f: &Function, a: &MoeFinalizeArgs) -> Result<(), GroupedGemmError> {
        self.check(a)?;
        // SAFETY: the caller guarantees the buffers; the arguments match the signature.
        unsafe { crate::grid_dependency::launch_chained(f, self.launch_config(a), self.args(a))? };
        Ok(())
    }
}
