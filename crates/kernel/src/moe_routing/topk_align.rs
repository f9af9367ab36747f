//! Top-k softmax and the alignment in one launch, for decode batches: one block of
//! [`align::THREADS`] threads first routes the tokens (warp `t` takes token `t`, exactly
//! the [`topk_softmax`] kernel's per-token code), writes `topk_ids` and
//! `topk_weights`, and keeps a copy of the ids in shared memory (at most [`MAX_TOKENS`] x
//! [`super::MAX_TOPK`] of them), synchronizes, then runs the [`align`] kernel's body on that
//! copy: no global round trip between the two halves. The outputs are those of the two
//! kernels launched one after the other, bit for bit; the layer's chain has one link less
//! (at T = 1 both kernels are one block, and a link costs the wait for its predecessor's
//! end).
//!
//! The early trigger of the chain ([`crate::grid_dependency`]) comes after the ids are
//! stored (then the block synchronizes for the shared copy) and before the weights (the
//! rounds select on the logits; the softmax and the weights follow the trigger, off the
//! path to the next link), not right after the wait: the next link (GEMM1) may prefetch its weights from those ids before its own wait (hints
//! only; PTX promises their visibility only after that wait). No fence orders the stores
//! before the trigger: a fence would promise nothing more to a grid that has not waited,
//! and it held the trigger, which starts the layer's weight stream, for the stores' round
//! trip to the L2 (the dependent's launch takes longer than the stores' way there).
//!
//! ```
//! use rcute_kernel::moe_routing::topk_align::{generate, MAX_TOKENS};
//! use rcute_atom::Element;
//! let g = generate(Element::F32, 64).unwrap();
//! assert_eq!(g.name, "rc_moe_topk_align_f32_e64_l256");
//! assert!(MAX_TOKENS >= 16);
//! ```

use super::{align, topk_softmax, MoeRoutingError};
use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_atom::Element;

/// The most tokens the fused kernel is for: one per warp of its block.
pub const MAX_TOKENS: usize = (align::THREADS / 32) as usize;

/// The shared array holding the routed ids for the alignment.
const SHARED_IDS: &str = "routed_ids";

/// A generated top-k + alignment kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedTopkAlign {
    /// `rc_moe_topk_align_<f32|bf16|f16>_e<32 * values per lane>_l256`.
    pub name: String,
    /// The top-k half, for its checks ([`topk_softmax::GeneratedTopkSoftmax::check`]).
    pub topk: topk_softmax::GeneratedTopkSoftmax,
    /// The alignment half, for its checks ([`align::GeneratedMoeAlign::check`]).
    pub align: align::GeneratedMoeAlign,
    /// CUDA C++ source.
    pub source: String,
}

impl GeneratedTopkAlign {
    /// Checks both halves' arguments (the alignment reads the top-k's ids: `a.topk_ids`
    /// must be `t.topk_ids`) and returns the kernel's arguments in order but its last
    /// (the early-trigger flag of [`crate::grid_dependency::launch_chained`]).
    pub fn args(
        &self,
        t: &topk_softmax::TopkSoftmaxArgs,
        a: &align::MoeAlignArgs,
    ) -> Result<KernelArgs, MoeRoutingError> {
        self.topk.check(t)?;
        if t.tokens as usize > MAX_TOKENS {
            return Err(MoeRoutingError::TooLarge(format!(
                "{} tokens in the fused top-k + alignment (at most {MAX_TOKENS})",
                t.tokens
            )));
        }
        if a.topk_ids != t.topk_ids || a.tokens != t.tokens || a.topk != t.topk {
            return Err(MoeRoutingError::Mismatch(
                "the alignment must read the top-k's ids, tokens and k".into(),
            ));
        }
        let cap = self.align.check(a)?;
        let topk = KernelArgs::new()
            .u64(t.logits)
            .u64(t.topk_ids)
            .u64(t.topk_weights)
            .i32(t.tokens)
            .i32(t.experts)
            .i32(t.topk)
            .i32(i32::from(t.renormalize));
        Ok(align::GeneratedMoeAlign::push_after_ids(topk, a, cap.rows))
    }

    /// One block of [`align::THREADS`] threads.
    pub fn launch_config(&self) -> LaunchConfig {
        LaunchConfig::new(Dim3::new(1, 1, 1), align::THREADS)
    }
}

/// Generates the fused kernel for logits of `element` and up to `max_experts` experts
/// (as [`topk_softmax::generate`]).
pub fn generate(element: Element, max_experts: u32) -> Result<GeneratedTopkAlign, MoeRoutingError> {
    let topk = topk_softmax::generate(element, max_experts)?;
    let (load, v) = topk_softmax::logits_kind(element, max_experts)?;
    let name = format!("rc_moe_topk_align_{element}_e{}_l{}", 32 * v, super::MAX_LOCAL_EXPERTS);
    let ty = element.cuda_type();
    let mut body = crate::grid_dependency::prologue(None);
    body.push(Stmt::Decl {
        ty: "__shared__ int".into(),
        name: format!("{SHARED_IDS}[{}]", MAX_TOKENS as u32 * super::MAX_TOPK),
        init: None,
        comment: Some("the ids [T, K] for the alignment (T <= 32, K <= 32)".into()),
    });
    let t_lt = |then| Stmt::If {
        cond: "t < T".into(),
        then,
        otherwise: vec![],
    };
    let mut route = topk_softmax::lane_decls();
    route.extend(topk_softmax::token_state(v));
    route.push(Stmt::Decl {
        ty: "const int".into(),
        name: "t".into(),
        init: Some("threadIdx.x / 32".into()),
        comment: Some("top-k softmax: warp t routes token t (T <= 32): its ids, then its weights".into()),
    });
    route.push(t_lt(topk_softmax::select_ids(ty, load, v, Some(SHARED_IDS), None)?));
    route.extend([
        Stmt::Comment(
            "the shared ids are visible to the whole block (the global ones are not fenced: hints for the next link)"
                .into(),
        ),
        Stmt::Expr("__syncthreads()".into()),
        Stmt::If {
            cond: crate::grid_dependency::EARLY_TRIGGER.into(),
            then: vec![
                Stmt::Comment("the next kernel may launch now; its prelude may read the ids (hints only)".into()),
                Stmt::Expr("rc_launch_dependents()".into()),
            ],
            otherwise: vec![],
        },
        Stmt::Comment("the weights after the trigger: the next link's prelude needs only the ids".into()),
    ]);
    route.push(t_lt(topk_softmax::weights(v)?));
    body.push(Stmt::Block(route));
    body.push(Stmt::Comment("the alignment of the shared copy of the ids".into()));
    body.push(Stmt::Block(align::body(SHARED_IDS)));
    let mut params = topk_softmax::params(ty, "int*");
    params.extend(align::params_after_ids());
    params.push(crate::grid_dependency::early_trigger_param());
    let f = CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({}, 1)", align::THREADS),
        ret: "void".into(),
        name: name.clone(),
        params,
        doc: vec![
            "top-k softmax of T tokens' logits [T, E] (warp per token), then the alignment of the N = T * K ids; one block".into(),
            "the alignment reads the block's shared copy of the ids, T <= 32".into(),
        ],
        body,
    };
    let mut items = unit_preamble(&crate::grid_dependency::snippets(), "");
    items.push(Item::Function(f));
    let unit = Unit {
        header: vec![
            format!(
                "{name}: {element} router logits [T, E <= {}] -> top-k ids and weights -> per-expert counts, padded offsets, sorted ids, block experts",
                32 * v
            ),
            "Generated by rcute (crates/kernel/src/moe_routing/topk_align.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedTopkAlign {
        name,
        topk,
        align: align::generate(),
        source: unit.render(),
    })
}
