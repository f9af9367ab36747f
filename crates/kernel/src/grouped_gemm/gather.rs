//! The row gather in front of the SM90 grouped GEMM1 (TMA loads whole boxes and cannot
//! gather rows): `out[m] = x[sorted_ids[m] / topk]` for the alignment's padded rows `m <
//! total_rows`, zeros in padding rows (`sorted_ids[m] == entries`). Rows at or past the
//! device scalar `total_rows` are not touched, so the grid is sized by the capacity and
//! nothing waits for the host.
//!
//! A warp per row, a grid of warps stepping over the rows (one wave of CTAs, as many as
//! the SMs hold, not one CTA per capacity row): each lane loads `UNROLL` (8) 16-byte vectors
//! (`H % 8 == 0`) of its row before it stores them, so loads stay in flight.
//!
//! ```
//! use rcute_kernel::grouped_gemm::gather::generate;
//! let g = generate(rcute_atom::Element::BF16).unwrap();
//! assert_eq!(g.name, "rc_moe_gather_rows_bf16");
//! ```

use super::GroupedGemmError;
use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Function, KernelArgs, LaunchConfig};
use rcute_atom::Element;

/// Threads per CTA.
pub const THREADS: u32 = 256;

/// Warps per CTA, one row each at a time.
const WARPS: u32 = THREADS / 32;

/// 16-byte vectors a lane loads before it stores them (a row of `H = 2048` in one round).
const UNROLL: u32 = 8;

/// CTAs an SM holds at once (`__launch_bounds__` keeps a thread at 64 registers, the
/// [`UNROLL`] vectors take 32 of them), so the grid is one wave.
const CTAS_PER_SM: u32 = 4;

/// The generated gather kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedMoeGather {
    /// `rc_moe_gather_rows_<type>`.
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
}

/// Arguments of a gather launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoeGatherArgs {
    /// `x [T, H]`, row-major with `ldx`.
    pub x: u64,
    /// `out [rows, H]`, dense.
    pub out: u64,
    /// The alignment's `sorted_ids [rows]`.
    pub sorted_ids: u64,
    /// The alignment's `total_rows [1]`.
    pub total_rows: u64,
    /// The alignment's capacity (grid).
    pub rows: i32,
    /// `H`, a multiple of 8.
    pub hidden: i32,
    /// x's leading dimension (a multiple of 8).
    pub ldx: i64,
    /// Routed entries `T * topk` (the padding sentinel).
    pub entries: i32,
    /// `topk`.
    pub topk: i32,
}

/// Generates the gather kernel for bf16 or f16 rows.
pub fn generate(element: Element) -> Result<GeneratedMoeGather, GroupedGemmError> {
    if !matches!(element, Element::BF16 | Element::F16) {
        return Err(GroupedGemmError::Config(format!("gather of {element} (bf16 or f16)")));
    }
    let ta = element.cuda_type();
    let name = format!("rc_moe_gather_rows_{}", element.ptx());
    let (warps, unroll) = (WARPS, UNROLL);
    let copy = vec![
        Stmt::Array {
            ty: "uint4".into(),
            name: "r".into(),
            len: unroll as usize,
            comment: Some(format!(
                "vectors v0 + 32 * u of the row: {unroll} loads in flight per lane"
            )),
        },
        Stmt::unrolled(
            "u",
            unroll,
            vec![
                Stmt::decl("const int", "v", "v0 + 32 * u"),
                Stmt::assign(
                    "r[u]",
                    "entry < entries && v < vecs ? __ldg(src + v) : make_uint4(0u, 0u, 0u, 0u)",
                ),
            ],
        ),
        Stmt::unrolled(
            "u",
            unroll,
            vec![
                Stmt::decl("const int", "v", "v0 + 32 * u"),
                Stmt::If {
                    cond: "v < vecs".into(),
                    then: vec![Stmt::assign("dst[v]", "r[u]")],
                    otherwise: vec![],
                },
            ],
        ),
    ];
    let per_row = vec![
        Stmt::Decl {
            ty: "const int".into(),
            name: "entry".into(),
            init: Some("__ldg(sorted_ids + m)".into()),
            comment: Some("the routed entry t * topk + j of this row; `entries` in padding rows".into()),
        },
        Stmt::Decl {
            ty: "const uint4* const".into(),
            name: "src".into(),
            init: Some(
                "reinterpret_cast<const uint4*>(x + (long long)(entry < entries ? entry / topk : 0) * ldx)".into(),
            ),
            comment: Some("x (T,H):(ldx,1), the entry's token row (row 0, unread, for padding)".into()),
        },
        Stmt::Decl {
            ty: "uint4* const".into(),
            name: "dst".into(),
            init: Some("reinterpret_cast<uint4*>(out + (long long)m * H)".into()),
            comment: Some("out (rows,H):(H,1) in 8-element vectors".into()),
        },
        Stmt::Loop {
            init: "int v0 = lane".into(),
            cond: "v0 < vecs".into(),
            step: format!("v0 += {}", 32 * unroll),
            body: copy,
        },
    ];
    let body = vec![
        Stmt::decl("const int", "warp", "threadIdx.x / 32"),
        Stmt::decl("const int", "lane", "threadIdx.x % 32"),
        Stmt::Decl {
            ty: "const int".into(),
            name: "vecs".into(),
            init: Some("H / 8".into()),
            comment: Some("16-byte vectors per row".into()),
        },
        Stmt::Comment("rows past this routing's padded rows are never read by the GEMM".into()),
        Stmt::decl("const int", "total", "__ldg(total_rows)"),
        Stmt::Comment(format!(
            "warp w of CTA b copies rows b * {warps} + w, then a grid of warps further"
        )),
        Stmt::Loop {
            init: format!("int m = blockIdx.x * {warps} + warp"),
            cond: "m < total".into(),
            step: format!("m += gridDim.x * {warps}"),
            body: per_row,
        },
    ];
    let f = CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS}, {CTAS_PER_SM})"),
        ret: "void".into(),
        name: name.clone(),
        params: vec![
            (format!("const {ta}* __restrict__"), "x".into()),
            (format!("{ta}* __restrict__"), "out".into()),
            ("const int* __restrict__".into(), "sorted_ids".into()),
            ("const int* __restrict__".into(), "total_rows".into()),
            ("int".into(), "H".into()),
            ("long long".into(), "ldx".into()),
            ("int".into(), "entries".into()),
            ("int".into(), "topk".into()),
        ],
        doc: vec!["out[m] = x[sorted_ids[m] / topk] (zeros in padding rows) for m < total_rows; a warp per row".into()],
        body,
    };
    let mut items = unit_preamble(&crate::grid_dependency::snippets(), "");
    items.push(Item::Function(crate::grid_dependency::chain_link(f)));
    let unit = Unit {
        header: vec![
            format!(
                "{name}: token rows gathered into the MoE alignment's padded-row order (A of the SM90 grouped GEMM1)"
            ),
            "Generated by rcute (crates/kernel/src/grouped_gemm/gather.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedMoeGather {
        name,
        source: unit.render(),
    })
}

impl GeneratedMoeGather {
    /// Checks the sizes: positive, `H % 8 == 0`, `ldx >= H` a multiple of 8, 16-byte
    /// aligned `x` and `out`.
    pub fn check(&self, a: &MoeGatherArgs) -> Result<(), GroupedGemmError> {
        let err = |s: String| Err(GroupedGemmError::Args(s));
        if a.rows < 1 || a.hidden < 8 || a.hidden % 8 != 0 || a.entries < 1 || a.topk < 1 {
            return err(format!(
                "gather rows={} H={} (a multiple of 8) entries={} topk={}",
                a.rows, a.hidden, a.entries, a.topk
            ));
        }
        if a.ldx < i64::from(a.hidden) || a.ldx % 8 != 0 {
            return err(format!("ldx = {} (at least H, a multiple of 8)", a.ldx));
        }
        if !a.x.is_multiple_of(16) || !a.out.is_multiple_of(16) || a.sorted_ids == 0 || a.total_rows == 0 {
            return err("x and out must be 16-byte aligned, the alignment's pointers set".into());
        }
        Ok(())
    }

    /// A CTA per `WARPS` (8) rows of the capacity, at most one wave of `sms` SMs (the warps
    /// step over the rest).
    ///
    /// ```
    /// use rcute_kernel::grouped_gemm::gather::{generate, MoeGatherArgs};
    /// let g = generate(rcute_atom::Element::BF16).unwrap();
    /// let a = MoeGatherArgs { rows: 100, ..Default::default() };
    /// assert_eq!(g.launch_config(&a, 132).grid.x, 13);
    /// let a = MoeGatherArgs { rows: 1 << 20, ..a };
    /// assert_eq!(g.launch_config(&a, 132).grid.x, 132 * 4);
    /// ```
    pub fn launch_config(&self, a: &MoeGatherArgs, sms: u32) -> LaunchConfig {
        let ctas = (a.rows.max(1) as u32).div_ceil(WARPS);
        LaunchConfig::new((ctas.min(sms.max(1) * CTAS_PER_SM), 1, 1), THREADS)
    }

    /// The kernel's arguments in order, but its last (the early-trigger flag that
    /// [`crate::grid_dependency::launch_chained`] adds: the kernel is a link of the MoE
    /// layer's chain).
    pub(crate) fn args(&self, a: &MoeGatherArgs) -> KernelArgs {
        KernelArgs::new()
            .u64(a.x)
            .u64(a.out)
            .u64(a.sorted_ids)
            .u64(a.total_rows)
            .i32(a.hidden)
            .i64(a.ldx)
            .i32(a.entries)
            .i32(a.topk)
    }

    /// Checks `a` and launches `f` (this kernel, loaded).
    ///
    /// # Safety
    ///
    /// `x` must hold `T` rows of `ldx` (every entry below `entries` names a token below
    /// `T`), `out` `rows * H` elements, the alignment's buffers its capacity for `rows`,
    /// valid until the kernel finishes.
    pub unsafe fn launch(&self, f: &Function, a: &MoeGatherArgs) -> Result<(), GroupedGemmError> {
        self.check(a)?;
        // SAFETY: the caller guarantees the buffers; the arguments match the signature.
        unsafe { crate::grid_dependency::launch_chained(f, self.launch_config(a, f.gpu().sm_count()), self.args(a))? };
        Ok(())
    }
}
