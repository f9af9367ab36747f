//! AWQ dequantization: AutoAWQ's packed int4 weight (`qweight [K, N/8]`, `qzeros
//! [K/G, N/8]`, 16-bit `scales [K/G, N]`) to the dense 16-bit weight `w [K, N]`,
//! `w[k][n] = (q[k][n] - z[k/G][n]) * s[k/G][n]`.
//!
//! A bandwidth-bound kernel: one thread per packed word of `qweight` (eight columns) of
//! [`ROWS`] consecutive rows, whose loads it issues before it converts any of them (reads
//! in flight: one word per thread left the H200 at 76 % of its copy bandwidth);
//! grid-stride loops over the row blocks (`y`) and the words of a row (`x`). The word and its group's zero word go
//! through the `lop3` conversion atom ([`rcute_atom::convert_int4`]) into pairs `bias + q`
//! and `bias + z` for the adjacent columns `(2i, 2i+1)`; one packed subtraction gives
//! `q - z` exactly and one packed multiplication by the scales rounds once, so the output is
//! bit-exactly the formula rounded to the 16-bit type. Loads of the scales and the store of
//! the eight results are 16 bytes wide.
//!
//! [`generate_kmajor`] writes the transposed weight `w^T [N, K]` (row-major, K contiguous:
//! the K-major B operand that the SM90 dense GEMM reads) instead: one thread per four packed
//! word columns and eight rows; each column's 8 x 8 results are permuted (`prmt`) into column
//! vectors of eight K-consecutive values, each stored as 16 bytes (`K` a multiple of 8).
//! A warp takes four word columns and 32 consecutive eight-row blocks, so each of its
//! stores writes 512 contiguous bytes of a row of `w^T` (whole sectors: scattered
//! 16-byte stores, one per row, ran at 14 % of the copy bandwidth on an H100), a lane reads
//! a row's four words as one 16-byte load (where `N / 8` is a multiple of 4 and `qweight`
//! 16-byte aligned, else word by word), and the eight warps of a block read the 128 bytes
//! of one line of each row. One word column a warp, each lane reading 4 bytes of a row (32
//! lines an instruction), ran at 76.4 % of the copy bandwidth at 4096 x 14336 on an H200.
//!
//! ```
//! use rcute_kernel::awq_dequantize::{generate, generate_kmajor};
//! use rcute_atom::Element;
//! let g = generate(Element::F16).unwrap();
//! assert_eq!(g.name, "rc_awq_dequantize_f16");
//! assert!(g.source.contains("rc_cvt_u4x8_f16x2_biased"));
//! let t = generate_kmajor(Element::BF16).unwrap();
//! assert_eq!(t.name, "rc_awq_dequantize_kmajor_bf16");
//! assert!(t.kmajor && t.source.contains("__byte_perm"));
//! ```

use crate::emit::{index_expr, unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::gemm_sm80::GemmError;
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_atom::convert_int4::{u4x8_to_bf16x2_biased, u4x8_to_f16x2_biased};
use rcute_atom::Element;
use rcute_layout::{tuple, Layout};

/// Threads per block.
pub const THREADS: u32 = 256;

/// Rows of `qweight` a thread of the row-major kernel dequantizes (one packed word of each):
/// their loads are issued together, so that a thread keeps that many reads in flight.
pub const ROWS: u32 = 4;

/// Warps per block of the K-major kernel, each taking four word columns.
pub const KMAJOR_WORDS: u32 = THREADS / 32;

/// A generated dequantization kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedAwqDequantize {
    /// Kernel (and unit) name: `rc_awq_dequantize_<f16|bf16>`.
    pub name: String,
    /// The 16-bit element type of the scales and the output.
    pub element: Element,
    /// Whether the output is the transposed `[N, K]` weight ([`generate_kmajor`]).
    pub kmajor: bool,
    /// CUDA C++ source.
    pub source: String,
}

/// Run-time arguments: device pointers and sizes (`N` a multiple of 8, `K` of `G`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AwqDequantizeArgs {
    /// `qweight`, int32 `[K, N/8]`.
    pub qweight: u64,
    /// `qzeros`, int32 `[K/G, N/8]`.
    pub qzeros: u64,
    /// `scales`, 16-bit `[K/G, N]` (16-byte aligned).
    pub scales: u64,
    /// The output `[K, N]`, or `[N, K]` for the K-major kernel (16-byte aligned).
    pub out: u64,
    /// Rows.
    pub k: i32,
    /// Columns.
    pub n: i32,
    /// Group size.
    pub group: i32,
}

impl GeneratedAwqDequantize {
    /// One thread per packed word of a row (`x`), [`ROWS`] rows per block row (`y`, at
    /// most 65535: the kernel strides over the rest); for the K-major kernel one warp per
    /// four word columns and 32 eight-row blocks per block row.
    pub fn launch_config(&self, a: &AwqDequantizeArgs) -> LaunchConfig {
        let words = (a.n.max(0) / 8) as u32;
        let (x, rows) = if self.kmajor {
            (words.div_ceil(4 * KMAJOR_WORDS), (a.k.max(8) as u32 / 8).div_ceil(32))
        } else {
            (words.div_ceil(THREADS), (a.k.max(1) as u32).div_ceil(ROWS))
        };
        let (x, y) = (x.max(1), rows.min(65_535));
        LaunchConfig::new(Dim3::new(x, y, 1), THREADS)
    }

    /// The kernel's arguments in order.
    pub fn args(&self, a: &AwqDequantizeArgs) -> KernelArgs {
        KernelArgs::new()
            .u64(a.qweight)
            .u64(a.qzeros)
            .u64(a.scales)
            .u64(a.out)
            .i32(a.k)
            .i32(a.n / 8)
            .i32(a.group)
    }
}

/// Generates the dequantization kernel for f16 or bf16 scales and output.
pub fn generate(element: Element) -> Result<GeneratedAwqDequantize, GemmError> {
    generate_with(element, false)
}

/// Generates the K-major dequantization kernel: the output is `w^T [N, K]` (row-major),
/// `K` must be a multiple of 8 (16-byte column vectors).
pub fn generate_kmajor(element: Element) -> Result<GeneratedAwqDequantize, GemmError> {
    generate_with(element, true)
}

fn generate_with(element: Element, kmajor: bool) -> Result<GeneratedAwqDequantize, GemmError> {
    let (ty, ty2, convert) = match element {
        Element::F16 => ("__half", "__half2", u4x8_to_f16x2_biased()),
        Element::BF16 => ("__nv_bfloat16", "__nv_bfloat162", u4x8_to_bf16x2_biased()),
        other => {
            return Err(GemmError::Config(format!(
                "AWQ scales must be f16 or bf16, got {other}"
            )))
        }
    };
    let name = if kmajor {
        format!("rc_awq_dequantize_kmajor_{element}")
    } else {
        format!("rc_awq_dequantize_{element}")
    };
    let mut items = unit_preamble(std::slice::from_ref(&convert), "");
    let f = if kmajor {
        kernel_kmajor(&name, ty, ty2, &convert.name)?
    } else {
        kernel(&name, ty, ty2, &convert.name)?
    };
    items.push(Item::Function(f));
    let what = if kmajor { "transposed [N, K]" } else { "[K, N]" };
    let unit = Unit {
        header: vec![
            format!("{name}: AutoAWQ int4 (qweight, qzeros, {ty} scales) -> dense {what} {ty} weight"),
            "Generated by rcute (crates/kernel/src/awq_dequantize.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedAwqDequantize {
        name,
        element,
        kmajor,
        source: unit.render(),
    })
}

/// Index expression of `layout` at `coord`, commented with the layout.
fn at(layout: &Layout, coord: &[&str]) -> Result<(String, String), GemmError> {
    let e = index_expr(layout, coord).map_err(|e| GemmError::Config(e.to_string()))?;
    Ok((e.expr, e.comment))
}

/// The row-major layouts both kernels read: `qweight` / `qzeros` as `(K, N8):(ld_q, 1)`
/// packed words and the scales as `(K, N):(ld_w, 1)` elements (run-time extents, 64-bit
/// leading dimensions, so offsets never wrap).
fn row_major_layouts() -> Result<(Layout, Layout), GemmError> {
    let cfg = |e: rcute_layout::LayoutError| GemmError::Config(e.to_string());
    let packed = Layout::new(tuple!("K", "N8"), tuple!("ld_q", 1)).map_err(cfg)?;
    let dense = Layout::new(tuple!("K", "N"), tuple!("ld_w", 1)).map_err(cfg)?;
    Ok((packed, dense))
}

/// The 16-byte load of the eight scales of columns `n0 ..` in group `g`, at `s_idx`
/// (commented `s_doc`), as the pairs `s[4]`.
fn load_scales(s_idx: &str, s_doc: String) -> Vec<Stmt> {
    vec![
        Stmt::Comment(s_doc),
        Stmt::decl(
            "const uint4",
            "s4",
            format!("*reinterpret_cast<const uint4*>(scales + {s_idx})"),
        ),
        Stmt::decl("const uint32_t", "s[4]", "{s4.x, s4.y, s4.z, s4.w}"),
    ]
}

/// `target = (q[i] - z[i]) * s[i]` for the pair `i` in `ty2`, from the biased pairs.
fn dequantize_pair(ty2: &str, target: &str) -> Vec<Stmt> {
    let as2 = |x: &str| format!("*reinterpret_cast<const {ty2}*>(&{x})");
    vec![
        Stmt::Comment("(bias + q) - (bias + z) = q - z exactly; one rounding in the product".into()),
        Stmt::decl(
            &format!("const {ty2}"),
            "v",
            format!("__hmul2(__hsub2({}, {}), {})", as2("q[i]"), as2("z[i]"), as2("s[i]")),
        ),
        Stmt::assign(target, "*reinterpret_cast<const uint32_t*>(&v)"),
    ]
}

/// The leading dimensions of the row-major layouts ([`row_major_layouts`]).
fn leading_dims() -> Vec<Stmt> {
    vec![
        Stmt::decl("const long long", "ld_q", "N8"),
        Stmt::decl("const long long", "ld_w", "8ll * N8"),
    ]
}

/// The kernel function `name` with the arguments of [`GeneratedAwqDequantize::args`].
fn kernel_fn(name: &str, ty: &str, doc: &str, body: Vec<Stmt>) -> CFunction {
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS})"),
        ret: "void".into(),
        name: name.into(),
        params: vec![
            ("const uint32_t* __restrict__".into(), "qweight".into()),
            ("const uint32_t* __restrict__".into(), "qzeros".into()),
            (format!("const {ty}* __restrict__"), "scales".into()),
            (format!("{ty}* __restrict__"), "out".into()),
            ("int".into(), "K".into()),
            ("int".into(), "N8".into()),
            ("int".into(), "G".into()),
        ],
        doc: vec![doc.into()],
        body,
    }
}

fn kernel(name: &str, ty: &str, ty2: &str, convert: &str) -> Result<CFunction, GemmError> {
    // `ld_q` = N / 8 packed words per row, `ld_w` = N elements.
    let (packed, dense) = row_major_layouts()?;
    let (q_idx, q_doc) = at(&packed, &["k", "j"])?;
    let (z_idx, z_doc) = at(&packed, &["g", "j"])?;
    let (s_idx, s_doc) = at(&dense, &["g", "n0"])?;
    let (o_idx, o_doc) = at(&dense, &["k", "n0"])?;
    let row_k = || Stmt::decl("const int", "k", format!("{ROWS} * kb + r"));
    let loads = vec![
        Stmt::Array {
            ty: "uint32_t".into(),
            name: "qw".into(),
            len: ROWS as usize,
            comment: Some(format!(
                "the word of each of rows {ROWS} kb + r, all loaded first ({ROWS} reads in flight)"
            )),
        },
        Stmt::For {
            var: "r".into(),
            start: "0".into(),
            end: ROWS.to_string(),
            unroll: true,
            body: vec![
                row_k(),
                Stmt::Comment(q_doc),
                Stmt::assign("qw[r]", format!("k < K ? qweight[{q_idx}] : 0u")),
            ],
        },
    ];
    let row = [
        vec![
            Stmt::decl("const int", "g", "k / G"),
            Stmt::Array {
                ty: "uint32_t".into(),
                name: "q".into(),
                len: 4,
                comment: Some("pairs {bias + q} of columns (n0 + 2i, n0 + 2i + 1)".into()),
            },
            Stmt::Array {
                ty: "uint32_t".into(),
                name: "z".into(),
                len: 4,
                comment: Some("pairs {bias + z}".into()),
            },
            Stmt::Array {
                ty: "uint32_t".into(),
                name: "w".into(),
                len: 4,
                comment: Some("pairs of the result".into()),
            },
            Stmt::Expr(format!("{convert}(qw[r], q)")),
            Stmt::Comment(z_doc),
            Stmt::Expr(format!("{convert}(qzeros[{z_idx}], z)")),
        ],
        load_scales(&s_idx, s_doc),
        vec![
            Stmt::For {
                var: "i".into(),
                start: "0".into(),
                end: "4".into(),
                unroll: true,
                body: dequantize_pair(ty2, "w[i]"),
            },
            Stmt::Comment(o_doc),
            Stmt::assign(
                format!("*reinterpret_cast<uint4*>(out + {o_idx})"),
                "make_uint4(w[0], w[1], w[2], w[3])",
            ),
        ],
    ]
    .concat();
    let column = [
        vec![Stmt::decl("const int", "n0", "8 * j")],
        loads,
        vec![Stmt::For {
            var: "r".into(),
            start: "0".into(),
            end: ROWS.to_string(),
            unroll: true,
            body: vec![row_k(), crate::emit::shorthand::if_("k < K", row)],
        }],
    ]
    .concat();
    let mut body = leading_dims();
    body.push(Stmt::decl("const int", "KB", format!("(K + {}) / {ROWS}", ROWS - 1)));
    body.push(Stmt::Loop {
        init: "int kb = blockIdx.y".into(),
        cond: "kb < KB".into(),
        step: "kb += gridDim.y".into(),
        body: vec![Stmt::Loop {
            init: "int j = blockIdx.x * blockDim.x + threadIdx.x".into(),
            cond: "j < N8".into(),
            step: "j += gridDim.x * blockDim.x".into(),
            body: column,
        }],
    });
    Ok(kernel_fn(
        name,
        ty,
        &format!("w[k][n] = (q[k][n] - z[k/G][n]) * s[k/G][n]; one thread per packed word (8 columns) of {ROWS} rows."),
        body,
    ))
}

/// The K-major kernel's loads of a lane's eight rows of four words into `qq[r][c]`: one
/// 16-byte load a row where `quad` (N8 % 4 == 0, `qweight` 16-byte aligned), else word by
/// word, zero past `N8`. `q4_idx` / `q_idx` index the row's first / `c`-th word.
fn kmajor_loads(q4_idx: String, q4_doc: String, q_idx: &str) -> Vec<Stmt> {
    vec![
        Stmt::Decl {
            ty: "uint32_t".into(),
            name: "qq[8][4]".into(),
            init: None,
            comment: Some("row k0 + r: the words of columns 4 j4 + c, all loaded first (8 reads in flight)".into()),
        },
        Stmt::unrolled(
            "r",
            8,
            vec![crate::emit::shorthand::if_else(
                "quad",
                vec![
                    Stmt::Comment(q4_doc),
                    Stmt::decl(
                        "const uint4",
                        "v",
                        format!("*reinterpret_cast<const uint4*>(qweight + {q4_idx})"),
                    ),
                    Stmt::assign("qq[r][0]", "v.x"),
                    Stmt::assign("qq[r][1]", "v.y"),
                    Stmt::assign("qq[r][2]", "v.z"),
                    Stmt::assign("qq[r][3]", "v.w"),
                ],
                vec![Stmt::unrolled(
                    "c",
                    4,
                    vec![Stmt::assign(
                        "qq[r][c]",
                        format!("4 * j4 + c < N8 ? qweight[{q_idx}] : 0u"),
                    )],
                )],
            )],
        ),
    ]
}

/// The K-major kernel: thread `(j4, kb)` dequantizes word columns `4 j4 .. 4 j4 + 4` of rows
/// `8 kb .. 8 kb + 8` (one group: `G` is a multiple of 8 or `K`) and stores each of their
/// eight columns as one 16-byte vector of K-consecutive values of `w^T [N, K]`.
fn kernel_kmajor(name: &str, ty: &str, ty2: &str, convert: &str) -> Result<CFunction, GemmError> {
    let (packed, dense) = row_major_layouts()?;
    let transposed = Layout::new(tuple!("N", "K"), tuple!("ld_t", 1)).map_err(|e| GemmError::Config(e.to_string()))?;
    let (q4_idx, q4_doc) = at(&packed, &["(k0 + r)", "(4 * j4)"])?;
    let (q_idx, _) = at(&packed, &["(k0 + r)", "(4 * j4 + c)"])?;
    let (z_idx, z_doc) = at(&packed, &["g", "j"])?;
    let (s_idx, s_doc) = at(&dense, &["g", "n0"])?;
    let (lo_idx, o_doc) = at(&transposed, &["(n0 + 2 * i)", "k0"])?;
    let (hi_idx, _) = at(&transposed, &["(n0 + 2 * i + 1)", "k0"])?;
    let u4 = |a: &str| format!("make_uint4({a}[0], {a}[1], {a}[2], {a}[3])");
    let loads = kmajor_loads(q4_idx, q4_doc, &q_idx);
    let column = [
        vec![
            Stmt::decl("const int", "n0", "8 * j"),
            Stmt::Array {
                ty: "uint32_t".into(),
                name: "z".into(),
                len: 4,
                comment: Some("pairs {bias + z} of columns (n0 + 2i, n0 + 2i + 1)".into()),
            },
            Stmt::Comment(z_doc),
            Stmt::Expr(format!("{convert}(qzeros[{z_idx}], z)")),
        ],
        load_scales(&s_idx, s_doc),
        vec![Stmt::unrolled(
            "i",
            4,
            vec![
                Stmt::Array {
                    ty: "uint32_t".into(),
                    name: "w".into(),
                    len: 8,
                    comment: Some("row k0 + r: the pair of columns (n0 + 2i, n0 + 2i + 1)".into()),
                },
                Stmt::unrolled(
                    "r",
                    8,
                    [
                        vec![
                            Stmt::Array {
                                ty: "uint32_t".into(),
                                name: "q".into(),
                                len: 4,
                                comment: Some("pairs {bias + q}; pair i is used".into()),
                            },
                            Stmt::Expr(format!("{convert}(qq[r][c], q)")),
                        ],
                        dequantize_pair(ty2, "w[r]"),
                    ]
                    .concat(),
                ),
                Stmt::Array {
                    ty: "uint32_t".into(),
                    name: "lo".into(),
                    len: 4,
                    comment: Some("column n0 + 2i, rows (k0 + 2p, k0 + 2p + 1): low halves".into()),
                },
                Stmt::Array {
                    ty: "uint32_t".into(),
                    name: "hi".into(),
                    len: 4,
                    comment: Some("column n0 + 2i + 1: high halves".into()),
                },
                Stmt::unrolled(
                    "p",
                    4,
                    vec![
                        Stmt::assign("lo[p]", "__byte_perm(w[2 * p], w[2 * p + 1], 0x5410)"),
                        Stmt::assign("hi[p]", "__byte_perm(w[2 * p], w[2 * p + 1], 0x7632)"),
                    ],
                ),
                Stmt::Comment(o_doc),
                Stmt::assign(format!("*reinterpret_cast<uint4*>(out + {lo_idx})"), u4("lo")),
                Stmt::assign(format!("*reinterpret_cast<uint4*>(out + {hi_idx})"), u4("hi")),
            ],
        )],
    ]
    .concat();
    let mut body = leading_dims();
    body.extend([
        Stmt::decl("const long long", "ld_t", "K"),
        Stmt::Comment(format!(
            "warp w of block x takes the word columns 4 j4 .. 4 j4 + 3, j4 = {KMAJOR_WORDS} x + w (each row's four words one 16-byte load where N8 % 4 == 0 and qweight is 16-byte aligned); its lanes take 32 consecutive 8-row blocks, so each 16-byte store of a warp fills 512 contiguous bytes of one row of w^T"
        )),
        Stmt::decl("const int", "j4", format!("blockIdx.x * {KMAJOR_WORDS} + (threadIdx.x >> 5)")),
        Stmt::If {
            cond: "4 * j4 >= N8".into(),
            then: vec![Stmt::Return],
            otherwise: vec![],
        },
        Stmt::decl(
            "const bool",
            "quad",
            "(N8 & 3) == 0 && (reinterpret_cast<unsigned long long>(qweight) & 15ull) == 0",
        ),
        Stmt::Loop {
            init: "int kb = blockIdx.y * 32 + (threadIdx.x & 31)".into(),
            cond: "kb < K / 8".into(),
            step: "kb += gridDim.y * 32".into(),
            body: [
                vec![
                    Stmt::decl("const int", "k0", "8 * kb"),
                    Stmt::decl("const int", "g", "k0 / G"),
                ],
                loads,
                vec![Stmt::unrolled(
                    "c",
                    4,
                    vec![
                        Stmt::decl("const int", "j", "4 * j4 + c"),
                        crate::emit::shorthand::if_("j < N8", column),
                    ],
                )],
            ]
            .concat(),
        },
    ]);
    Ok(kernel_fn(
        name,
        ty,
        "w^T[n][k] = (q[k][n] - z[k/G][n]) * s[k/G][n]; one thread per four packed word columns and 8 rows (K % 8 == 0).",
        body,
    ))
}
