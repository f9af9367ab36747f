//! Top-k softmax routing: router logits `[T, E]` (f32, bf16 or f16) -> `topk_ids [T, k]`
//! (int32) and `topk_weights [T, k]` (f32).
//!
//! One warp per token. Lane `l` holds the logits of experts `l, l + 32, ...` (coalesced
//! loads, `E <= 32 * V` for a kernel of `V` values per lane), converted to f32. The softmax
//! maximum and denominator are warp butterfly reductions (every lane ends with the same
//! value). Then `k` rounds each select the largest remaining logit of the warp, ties to
//! the lower expert index: softmax is monotonic, so selecting on the logits selects the
//! largest probabilities, exactly as the float64 reference does, with no ties introduced
//! by rounding. The winner's weight is `exp(x - max) / sum`, where `sum` is the softmax
//! denominator, or with renormalisation the sum of the `k` selected exponentials (the
//! weights then sum to 1). Lane `j` keeps round `j`'s result and the first `k` lanes
//! store them. Logits must be finite (`-inf` is allowed as long as one logit per token is
//! finite).
//!
//! ```
//! use rcute_kernel::moe_routing::topk_softmax::{generate, TopkSoftmaxArgs};
//! use rcute_atom::Element;
//! let g = generate(Element::F32, 8).unwrap();
//! assert_eq!(g.name, "rc_moe_topk_softmax_f32_e32");
//! let args = TopkSoftmaxArgs { logits: 0, topk_ids: 0, topk_weights: 0, tokens: 3, experts: 8, topk: 2, renormalize: true };
//! assert!(g.check(&args).is_ok());
//! assert!(g.check(&TopkSoftmaxArgs { topk: 9, ..args }).is_err());
//! assert!(generate(Element::E4M3, 8).is_err());
//! ```

use super::{MoeRoutingError, MAX_EXPERTS, MAX_TOPK};
use crate::emit::{index_expr, unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_atom::Element;
use rcute_layout::{tuple, Layout};

/// Warps (tokens in flight) per block.
pub const WARPS: u32 = 4;

/// The f32 bit pattern of `-inf` (NVRTC has no `<cmath>` constants).
const NEG_INF: &str = "__int_as_float(0xff800000)";

/// A generated top-k softmax kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedTopkSoftmax {
    /// Kernel (and unit) name: `rc_moe_topk_softmax_<f32|bf16|f16>_e<32 * values_per_lane>`.
    pub name: String,
    /// The logits' element type.
    pub element: Element,
    /// Logits held per lane: the kernel handles up to `32 * values_per_lane` experts.
    pub values_per_lane: u32,
    /// CUDA C++ source.
    pub source: String,
}

/// Run-time arguments: device pointers and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopkSoftmaxArgs {
    /// Router logits `[T, E]`, row-major, of the kernel's element type.
    pub logits: u64,
    /// Output: int32 `[T, k]`, the selected experts of each token in descending order.
    pub topk_ids: u64,
    /// Output: f32 `[T, k]`, their weights.
    pub topk_weights: u64,
    /// Tokens `T`.
    pub tokens: i32,
    /// Experts `E`.
    pub experts: i32,
    /// `k`.
    pub topk: i32,
    /// Divide the `k` weights by their sum (Mixtral) instead of the softmax denominator.
    pub renormalize: bool,
}

impl GeneratedTopkSoftmax {
    /// The largest number of experts this kernel handles.
    pub fn max_experts(&self) -> u32 {
        32 * self.values_per_lane
    }

    /// Checks `E` and `k` against the kernel (`1 <= E <= max_experts`, `1 <= k <= min(E,
    /// 32)`) and `T >= 0`.
    pub fn check(&self, a: &TopkSoftmaxArgs) -> Result<(), MoeRoutingError> {
        if a.experts < 1 || a.experts as u32 > self.max_experts() {
            return Err(MoeRoutingError::Experts {
                experts: a.experts.max(0) as u32,
                max: self.max_experts(),
            });
        }
        if a.topk < 1 || a.topk > a.experts || a.topk as u32 > MAX_TOPK {
            return Err(MoeRoutingError::TopK {
                k: a.topk.max(0) as u32,
                experts: a.experts as u32,
            });
        }
        if a.tokens < 0 {
            return Err(MoeRoutingError::TooLarge(format!("{} tokens", a.tokens)));
        }
        Ok(())
    }

    /// One warp per token, [`WARPS`] tokens per block.
    pub fn launch_config(&self, a: &TopkSoftmaxArgs) -> LaunchConfig {
        let blocks = (a.tokens.max(0) as u32).div_ceil(WARPS).max(1);
        LaunchConfig::new(Dim3::new(blocks, 1, 1), 32 * WARPS)
    }

    /// The kernel's arguments in order, but its last ([`crate::grid_dependency::launch_chained`]
    /// adds the early-trigger flag: this kernel is a link of the MoE layer's chain).
    pub fn args(&self, a: &TopkSoftmaxArgs) -> KernelArgs {
        KernelArgs::new()
            .u64(a.logits)
            .u64(a.topk_ids)
            .u64(a.topk_weights)
            .i32(a.tokens)
            .i32(a.experts)
            .i32(a.topk)
            .i32(i32::from(a.renormalize))
    }
}

/// Generates the top-k softmax kernel for logits of `element` (f32, bf16 or f16) and up to
/// `max_experts` experts (rounded up to 32, 64, 128 or 256: the values each lane holds).
pub fn generate(element: Element, max_experts: u32) -> Result<GeneratedTopkSoftmax, MoeRoutingError> {
    let (load, values_per_lane) = logits_kind(element, max_experts)?;
    let name = format!("rc_moe_topk_softmax_{element}_e{}", 32 * values_per_lane);
    let mut items = unit_preamble(&crate::grid_dependency::snippets(), "");
    items.push(Item::Function(crate::grid_dependency::chain_link(kernel(
        &name,
        element.cuda_type(),
        load,
        values_per_lane,
    )?)));
    let unit = Unit {
        header: vec![
            format!(
                "{name}: {element} router logits [T, E <= {}] -> top-k expert ids (int32) and f32 weights",
                32 * values_per_lane
            ),
            "Generated by rcute (crates/kernel/src/moe_routing/topk_softmax.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedTopkSoftmax {
        name,
        element,
        values_per_lane,
        source: unit.render(),
    })
}

/// The conversion of a loaded logit `raw` to f32 and the values per lane for
/// `max_experts` experts (rounded up to 32, 64, 128 or 256).
pub(crate) fn logits_kind(element: Element, max_experts: u32) -> Result<(&'static str, u32), MoeRoutingError> {
    let load = match element {
        Element::F32 => "raw",
        Element::BF16 => "__bfloat162float(raw)",
        Element::F16 => "__half2float(raw)",
        other => return Err(MoeRoutingError::Element(other)),
    };
    if max_experts == 0 || max_experts > MAX_EXPERTS {
        return Err(MoeRoutingError::Experts {
            experts: max_experts,
            max: MAX_EXPERTS,
        });
    }
    Ok((load, max_experts.div_ceil(32).next_power_of_two()))
}

/// `const T v = op(v, __shfl_xor_sync(~0u, v, o))` for `o = 16, 8, 4, 2, 1`.
fn butterfly(var: &str, combine: &str) -> Stmt {
    Stmt::Loop {
        init: "int o = 16".into(),
        cond: "o > 0".into(),
        step: "o /= 2".into(),
        body: vec![Stmt::assign(
            var,
            combine.replace("OTHER", &format!("__shfl_xor_sync(0xffffffffu, {var}, o)")),
        )],
    }
}

/// Lane `lane`'s best remaining candidate, then the warp's best: the largest logit, ties
/// to the lower expert index. Each logit becomes an order-preserving 32-bit key (the float
/// bits with the sign flipped for positives, all bits flipped for negatives; `-0` taken as
/// `+0`, so equal logits have equal keys), 0 for a taken or absent slot (below the key of
/// `-inf`). A lane keeps its largest key, ties to its lower slot (the lower index); the
/// warp's largest key is one `redux.sync` maximum and its lowest index among the lanes
/// holding it one minimum: the same winner as comparing (logit, index) pairs.
fn select_round(v: u32) -> Vec<Stmt> {
    vec![
        Stmt::decl("unsigned", "lk", "0u"),
        Stmt::decl("int", "li", "0x7fffffff"),
        Stmt::unrolled(
            "i",
            v,
            vec![
                Stmt::decl("const int", "ci", "lane + 32 * i"),
                Stmt::If {
                    cond: "ci < E && !((taken >> i) & 1u)".into(),
                    then: vec![
                        Stmt::decl("unsigned", "u", "__float_as_uint(x[i])"),
                        Stmt::assign("u", "u == 0x80000000u ? 0u : u"),
                        Stmt::decl("const unsigned", "key", "(u & 0x80000000u) ? ~u : (u | 0x80000000u)"),
                        Stmt::If {
                            cond: "key > lk".into(),
                            then: vec![Stmt::assign("lk", "key"), Stmt::assign("li", "ci")],
                            otherwise: vec![],
                        },
                    ],
                    otherwise: vec![],
                },
            ],
        ),
        Stmt::decl("const unsigned", "best", "__reduce_max_sync(0xffffffffu, lk)"),
        Stmt::decl(
            "const int",
            "bi",
            "(int)__reduce_min_sync(0xffffffffu, lk == best ? (unsigned)li : 0x7fffffffu)",
        ),
        Stmt::Comment("the winning logit back from its key".into()),
        Stmt::decl(
            "const float",
            "bv",
            "__uint_as_float((best & 0x80000000u) ? (best & 0x7fffffffu) : ~best)",
        ),
        Stmt::Comment("the owner lane (bi % 32) retires the winner's slot (bi / 32)".into()),
        Stmt::If {
            cond: "bi % 32 == lane".into(),
            then: vec![Stmt::assign("taken", "taken | (1u << (bi / 32))")],
            otherwise: vec![],
        },
        Stmt::If {
            cond: "lane == j".into(),
            then: vec![Stmt::assign("my_id", "bi"), Stmt::assign("my_v", "bv")],
            otherwise: vec![],
        },
    ]
}

/// The registers one token's routing keeps between its two halves ([`select_ids`],
/// [`weights`]): the logits `x`, and in lane `j` the expert and the logit of round `j`.
pub(crate) fn token_state(v: u32) -> Vec<Stmt> {
    vec![
        Stmt::Array {
            ty: "float".into(),
            name: "x".into(),
            len: v as usize,
            comment: Some("logits of experts lane + 32 * i, -inf past E".into()),
        },
        Stmt::decl("int", "my_id", "0"),
        Stmt::decl("float", "my_v", "0.0f"),
    ]
}

fn layout_err(e: rcute_layout::LayoutError) -> MoeRoutingError {
    MoeRoutingError::TooLarge(e.to_string())
}

/// Where lane `lane` of token `t` stores its round's id and weight: the row-major `[T, K]`
/// outputs with a 64-bit row stride `ld_k` (both halves of the routing store through it).
fn topk_out_index() -> Result<crate::emit::IndexExpr, MoeRoutingError> {
    let topk = Layout::new(tuple!("T", "K"), tuple!("ld_k", 1)).map_err(layout_err)?;
    index_expr(&topk, &["t", "lane"]).map_err(layout_err)
}

/// The first half of token `t`'s routing (one warp; `lane`, `ld_x`, `ld_k` and
/// [`token_state`] in scope): load its logits, `k` rounds of a warp arg-max, and the
/// stores of its ids (with `shared_ids`, also the shared copy `[T, K]`, row-major, for the
/// fused top-k + alignment's alignment, [`super::topk_align`]; with `global_if`, the global
/// ids are stored only where that condition holds). The ids need no softmax: the rounds
/// select on the logits.
pub(crate) fn select_ids(
    ty: &str,
    load: &str,
    v: u32,
    shared_ids: Option<&str>,
    global_if: Option<&str>,
) -> Result<Vec<Stmt>, MoeRoutingError> {
    // Row-major [T, E] logits with a 64-bit row stride.
    let logits = Layout::new(tuple!("T", "E"), tuple!("ld_x", 1)).map_err(layout_err)?;
    let x_ix = index_expr(&logits, &["t", "e"]).map_err(layout_err)?;
    let o_ix = topk_out_index()?;
    let global = vec![
        Stmt::Comment(o_ix.comment.clone()),
        Stmt::assign(format!("topk_ids[{}]", o_ix.expr), "my_id"),
    ];
    let mut store = match global_if {
        None => global,
        Some(cond) => vec![Stmt::If {
            cond: cond.into(),
            then: global,
            otherwise: vec![],
        }],
    };
    if let Some(ids) = shared_ids {
        let packed = Layout::new(tuple!("T", "K"), tuple!("K", 1)).map_err(layout_err)?;
        let s_ix = index_expr(&packed, &["t", "lane"]).map_err(layout_err)?;
        store.push(Stmt::Comment(format!("the shared copy: {}", s_ix.comment)));
        store.push(Stmt::assign(format!("{ids}[{}]", s_ix.expr), "my_id"));
    }
    Ok(vec![
        Stmt::unrolled(
            "i",
            v,
            vec![
                Stmt::decl("const int", "e", "lane + 32 * i"),
                Stmt::If {
                    cond: "e < E".into(),
                    then: vec![
                        Stmt::Decl {
                            ty: format!("const {ty}"),
                            name: "raw".into(),
                            init: Some(format!("logits[{}]", x_ix.expr)),
                            comment: Some(x_ix.comment.clone()),
                        },
                        Stmt::assign("x[i]", load),
                    ],
                    otherwise: vec![Stmt::assign("x[i]", NEG_INF)],
                },
            ],
        ),
        Stmt::Comment("k rounds of a warp arg-max; lane j keeps round j".into()),
        Stmt::decl("unsigned", "taken", "0u"),
        Stmt::For {
            var: "j".into(),
            start: "0".into(),
            end: "K".into(),
            unroll: false,
            body: select_round(v),
        },
        Stmt::If {
            cond: "lane < K".into(),
            then: store,
            otherwise: vec![],
        },
    ])
}

/// The second half of token `t`'s routing ([`select_ids`] ran): the softmax maximum and
/// denominator (butterflies, every lane gets the result), each round's exponential in its
/// lane, their sum in round order (shuffles, the order the rounds found them), and the
/// stores of the weights.
pub(crate) fn weights(v: u32) -> Result<Vec<Stmt>, MoeRoutingError> {
    let o_ix = topk_out_index()?;
    Ok(vec![
        Stmt::Comment("softmax max and denominator: butterflies, every lane gets the result".into()),
        Stmt::decl("float", "m", "x[0]"),
        Stmt::unrolled("i", v, vec![Stmt::assign("m", "fmaxf(m, x[i])")]),
        butterfly("m", "fmaxf(m, OTHER)"),
        Stmt::decl("float", "sum", "0.0f"),
        Stmt::unrolled(
            "i",
            v,
            vec![Stmt::If {
                cond: "lane + 32 * i < E".into(),
                then: vec![Stmt::assign("sum", "sum + expf(x[i] - m)")],
                otherwise: vec![],
            }],
        ),
        butterfly("sum", "sum + OTHER"),
        Stmt::decl("const float", "my_e", "expf(my_v - m)"),
        Stmt::decl("float", "sel_sum", "0.0f"),
        Stmt::For {
            var: "j".into(),
            start: "0".into(),
            end: "K".into(),
            unroll: false,
            body: vec![Stmt::assign("sel_sum", "sel_sum + __shfl_sync(0xffffffffu, my_e, j)")],
        },
        Stmt::If {
            cond: "lane < K".into(),
            then: vec![
                Stmt::Comment(o_ix.comment.clone()),
                Stmt::assign(
                    format!("topk_weights[{}]", o_ix.expr),
                    "my_e / (renormalize ? sel_sum : sum)",
                ),
            ],
            otherwise: vec![],
        },
    ])
}

/// The lane and the row strides of the routing statements.
pub(super) fn lane_decls() -> Vec<Stmt> {
    vec![
        Stmt::decl("const int", "lane", "threadIdx.x % 32"),
        Stmt::decl("const long long", "ld_x", "E"),
        Stmt::decl("const long long", "ld_k", "K"),
    ]
}

/// The routing of tokens `first, first + step, ...` below `T`, one warp each: both halves
/// of every token in turn.
fn token_loop(ty: &str, load: &str, v: u32, (first, step): (&str, &str)) -> Result<Vec<Stmt>, MoeRoutingError> {
    let mut token = token_state(v);
    token.extend(select_ids(ty, load, v, None, None)?);
    token.extend(weights(v)?);
    let mut body = lane_decls();
    body.push(Stmt::Loop {
        init: format!("int t = {first}"),
        cond: "t < T".into(),
        step: format!("t += {step}"),
        body: token,
    });
    Ok(body)
}

/// The parameters `logits .. renormalize` (`ids` the type of `topk_ids`).
pub(super) fn params(ty: &str, ids: &str) -> Vec<(String, String)> {
    vec![
        (format!("const {ty}* __restrict__"), "logits".into()),
        (ids.into(), "topk_ids".into()),
        ("float* __restrict__".into(), "topk_weights".into()),
        ("int".into(), "T".into()),
        ("int".into(), "E".into()),
        ("int".into(), "K".into()),
        ("int".into(), "renormalize".into()),
    ]
}

fn kernel(name: &str, ty: &str, load: &str, v: u32) -> Result<CFunction, MoeRoutingError> {
    let body = token_loop(
        ty,
        load,
        v,
        (
            &format!("blockIdx.x * {WARPS} + threadIdx.x / 32"),
            &format!("gridDim.x * {WARPS}"),
        ),
    )?;
    Ok(CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({})", 32 * WARPS),
        ret: "void".into(),
        name: name.into(),
        params: params(ty, "int* __restrict__"),
        doc: vec!["softmax over E experts in f32, the K largest (ties to the lower index), one warp per token".into()],
        body,
    })
}
