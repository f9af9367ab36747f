//! The one-time reorder of the experts' weights into the prepared layout of
//! [`rcute_collective::moe_prepared`] (what the streamed `_prep` decode GEMMs read):
//! `rc_moe_prepare_swiglu_<type>` (`w13 [E, 2N, K]`: the gate and up rows of 8 output
//! columns per block; `up_first` checkpoints are read up rows first) and
//! `rc_moe_prepare_scatter_<type>` (`w2 [E, N, K]`: 16 consecutive rows per block). One
//! thread per 16-byte piece of the output, i.e. per lane `(g, q)` of one (expert, block,
//! part, half): it reads 8 elements of one source row with one 16-byte load (zeros for rows
//! past N and k past K) and stores them with one 16-byte store; consecutive threads write
//! consecutive pieces.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::moe_prepared::MoePairing;
//! use rcute_kernel::grouped_gemm::prepare::generate;
//! let g = generate(Element::BF16, MoePairing::SwiGlu).unwrap();
//! assert_eq!(g.name, "rc_moe_prepare_swiglu_bf16");
//! assert!(g.source.contains("uint4"));
//! // 2 experts of 4 blocks of 3 parts: 2 * 4 * 3 * 64 pieces.
//! assert_eq!(g.launch_config(2, 4, 3).grid.x, 6);
//! ```

use super::GroupedGemmError;
use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_atom::Element;
pub use rcute_collective::moe_prepared::{MoePairing, MoePrepared};

/// Threads per block.
pub const THREADS: u32 = 256;

/// A generated reorder kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedMoePrepare {
    /// Kernel (and unit) name.
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
}

/// The reorder's arguments: the source weights (`[E, rows, K]`, row pitch `ld_src`,
/// expert stride `src_expert_stride`, 16-byte aligned, both pitches multiples of 8), the
/// prepared output (`experts * plan.expert_elems()` elements) and the plan.
#[derive(Clone, Copy, Debug)]
pub struct MoePrepareArgs {
    /// Source weights.
    pub src: u64,
    /// Prepared output.
    pub dst: u64,
    /// Experts `E`.
    pub experts: i32,
    /// Source row pitch (elements).
    pub ld_src: i64,
    /// Source expert stride (elements).
    pub src_expert_stride: i64,
    /// The layout (N, K, blocks, parts).
    pub plan: MoePrepared,
    /// `w13` holds the up rows first (SwiGLU only).
    pub up_first: bool,
}

impl GeneratedMoePrepare {
    /// One thread per 16-byte piece (`64` per block and part) along `x`; the kernel
    /// strides over pieces beyond `2^31 - 1` blocks.
    pub fn launch_config(&self, experts: i64, blocks: i64, parts: i64) -> LaunchConfig {
        let pieces = (experts.max(0) * blocks.max(0) * parts.max(0) * 64) as u64;
        let grid = pieces.div_ceil(u64::from(THREADS)).clamp(1, i32::MAX as u64) as u32;
        LaunchConfig::new(Dim3::new(grid, 1, 1), THREADS)
    }

    /// The kernel's arguments.
    pub fn args(&self, a: &MoePrepareArgs) -> KernelArgs {
        KernelArgs::new()
            .u64(a.src)
            .u64(a.dst)
            .i32(a.experts)
            .i32(a.plan.n as i32)
            .i32(a.plan.k as i32)
            .i64(a.ld_src)
            .i64(a.src_expert_stride)
            .i32(a.plan.blocks as i32)
            .i32(a.plan.parts as i32)
            .i32(i32::from(a.up_first))
    }
}

/// The source row of piece `(blk, h, g)`, as the layout's inverse ([`MoePrepared::source_row`]).
fn source_row(pairing: MoePairing) -> Vec<Stmt> {
    match pairing {
        MoePairing::SwiGlu => vec![
            Stmt::Comment("((8,NB,2),(8,4,P)):((32,512P,256),(1,8,512)): half h = 0 the gate row of column 8 blk + g, h = 1 its up row (rows 0..N gate, N..2N up; the reverse when up_first)".into()),
            Stmt::decl("const int", "row", "((h ^ up_first) ? N : 0) + 8 * blk + g"),
            Stmt::decl("const bool", "row_ok", "true"),
        ],
        MoePairing::Rows => vec![
            Stmt::Comment("((2,8,NB),(8,4,P)):((256,32,512P),(1,8,512)): half h of lane row g is row 16 blk + 2 g + h".into()),
            Stmt::decl("const int", "row", "16 * blk + 2 * g + h"),
            Stmt::decl("const bool", "row_ok", "row < N"),
        ],
    }
}

/// Generates the reorder kernel of `pairing` for `element` weights (bf16 or f16; the
/// elements are moved, never changed).
pub fn generate(element: Element, pairing: MoePairing) -> Result<GeneratedMoePrepare, GroupedGemmError> {
    if !matches!(element, Element::BF16 | Element::F16) {
        return Err(GroupedGemmError::Config(format!(
            "prepared MoE weight of {element} (bf16 or f16)"
        )));
    }
    let kind = match pairing {
        MoePairing::SwiGlu => "swiglu",
        MoePairing::Rows => "scatter",
    };
    let name = format!("rc_moe_prepare_{kind}_{}", element.ptx());
    let ta = element.cuda_type();
    let mut piece = vec![
        Stmt::Comment("piece c = ((expert * blocks + blk) * parts + p) * 64 + 32 h + lane: elements 8 c .. 8 c + 8 of the prepared weight".into()),
        Stmt::decl("const int", "lane", "(int)(c & 31)"),
        Stmt::decl("const int", "h", "(int)((c >> 5) & 1)"),
        Stmt::decl("long long", "r", "c >> 6"),
        Stmt::decl("const int", "p", "(int)(r % parts)"),
        Stmt::assign("r", "r / parts"),
        Stmt::decl("const int", "blk", "(int)(r % blocks)"),
        Stmt::decl("const long long", "expert", "r / blocks"),
        Stmt::decl("const int", "g", "lane >> 2"),
        Stmt::decl("const int", "k0", "32 * p + 8 * (lane & 3)"),
    ];
    piece.extend(source_row(pairing));
    piece.extend([
        Stmt::decl("uint4", "v", "make_uint4(0u, 0u, 0u, 0u)"),
        Stmt::Comment("K is a multiple of 8: a piece is wholly inside K or wholly past it (zeros)".into()),
        Stmt::If {
            cond: "row_ok && k0 < K".into(),
            then: vec![Stmt::assign(
                "v",
                "__ldg(reinterpret_cast<const uint4*>(src + expert * src_expert_stride + (long long)row * ld_src + k0))",
            )],
            otherwise: vec![],
        },
        Stmt::assign("reinterpret_cast<uint4*>(dst)[c]", "v"),
    ]);
    let body = vec![
        Stmt::decl("const long long", "pieces", "(long long)experts * blocks * parts * 64"),
        Stmt::Loop {
            init: "long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x".into(),
            cond: "c < pieces".into(),
            step: "c += (long long)gridDim.x * blockDim.x".into(),
            body: piece,
        },
    ];
    let f = CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS})"),
        ret: "void".into(),
        name: name.clone(),
        params: vec![
            (format!("const {ta}* __restrict__"), "src".into()),
            (format!("{ta}* __restrict__"), "dst".into()),
            ("int".into(), "experts".into()),
            ("int".into(), "N".into()),
            ("int".into(), "K".into()),
            ("long long".into(), "ld_src".into()),
            ("long long".into(), "src_expert_stride".into()),
            ("int".into(), "blocks".into()),
            ("int".into(), "parts".into()),
            ("int".into(), "up_first".into()),
        ],
        doc: vec![format!(
            "dst = src reordered into the prepared {kind} layout of rcute_collective::moe_prepared (K % 8 == 0, 16-byte aligned rows)"
        )],
        body,
    };
    let mut items = unit_preamble(&[], "");
    items.push(Item::Function(f));
    let unit = Unit {
        header: vec![
            format!("{name}: expert weights -> the prepared {kind} layout of rcute_collective::moe_prepared"),
            "Generated by rcute (crates/kernel/src/grouped_gemm/prepare.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedMoePrepare {
        name,
        source: unit.render(),
    })
}
