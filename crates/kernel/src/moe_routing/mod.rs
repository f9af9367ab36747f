//! MoE routing on the GPU: the kernels between the router's logits and the grouped GEMM.
//!
//! * [`topk_softmax`]: router logits `[T, E]` -> `topk_ids [T, k]` (int32) and
//!   `topk_weights [T, k]` (f32): softmax in f32, the `k` largest (ties to the lower expert
//!   index), optional renormalisation of the `k` weights. One warp per token.
//! * [`align`]: `topk_ids` and a local expert range -> per-expert counts, row offsets padded
//!   to the GEMM tile `block_m`, the routed entries sorted by expert (stable), the expert of
//!   every `block_m` block and the padded row count, all on the GPU with no host
//!   synchronisation (the idea of vLLM's `moe_align_block_size`). Its buffers are sized by
//!   [`align::align_capacity`], a host function of the shapes only. [`align_multi`] does the
//!   same on several CTAs (two kernels and a `[C, L]` table) for routings of many entries.
//!
//! Both are deterministic: no result depends on the order of atomics.
//!
//! ```
//! use rcute_kernel::moe_routing::{align, topk_softmax};
//! use rcute_atom::Element;
//! let g = topk_softmax::generate(Element::BF16, 64).unwrap();
//! assert_eq!(g.name, "rc_moe_topk_softmax_bf16_e64");
//! let cap = align::align_capacity(4, 2, 8, 16).unwrap();
//! assert_eq!((cap.rows, cap.blocks), (128, 8));
//! ```

pub mod align;
pub mod align_multi;
pub mod ep_dispatch;
pub mod topk_align;
pub mod topk_softmax;

use crate::emit::Stmt;
use thiserror::Error;

/// The largest number of experts [`topk_softmax`] handles (eight per lane of a warp).
pub const MAX_EXPERTS: u32 = 256;

/// The largest `k` of [`topk_softmax`] (one selected expert per lane).
pub const MAX_TOPK: u32 = 32;

/// The largest number of local experts [`align`] handles (its shared-memory counters).
pub const MAX_LOCAL_EXPERTS: u32 = 256;

/// Why a routing kernel cannot be generated or launched for a request.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MoeRoutingError {
    /// The router logits' element type is not f32, bf16 or f16.
    #[error("router logits must be f32, bf16 or f16, got {0}")]
    Element(rcute_atom::Element),
    /// The number of experts is 0 or above the kernel's limit.
    #[error("{experts} experts: supported are 1..={max}")]
    Experts { experts: u32, max: u32 },
    /// `k` is 0, larger than the experts or above [`MAX_TOPK`].
    #[error("top-{k} of {experts} experts: supported are 1 <= k <= min(experts, {MAX_TOPK})")]
    TopK { k: u32, experts: u32 },
    /// The local expert range is empty, too large or starts below 0.
    #[error("local experts [{offset}, {offset} + {local}): need offset >= 0 and 1 <= local <= {MAX_LOCAL_EXPERTS}")]
    ExpertRange { offset: i64, local: i64 },
    /// The GEMM tile `block_m` is not positive.
    #[error("block_m = {0} must be at least 1")]
    BlockM(i64),
    /// A size does not fit the kernels' 32-bit indices.
    #[error("too large for 32-bit indices: {0}")]
    TooLarge(String),
    /// The arguments of two routing steps launched as one do not describe one routing.
    #[error("fused routing arguments disagree: {0}")]
    Mismatch(String),
}

/// An inclusive scan of the `int` variable `var` over the 32 lanes of a warp (Hillis-Steele
/// with `__shfl_up_sync`: at step `o` a lane adds the value `o` lanes below it, and lanes
/// below `o` keep theirs). The emitted code names the lane index `lane`.
pub(crate) fn warp_scan(var: &str) -> Stmt {
    Stmt::Loop {
        init: "int o = 1".into(),
        cond: "o < 32".into(),
        step: "o *= 2".into(),
        body: vec![
            Stmt::decl("const int", "y", format!("__shfl_up_sync(0xffffffffu, {var}, o)")),
            Stmt::If {
                cond: "lane >= o".into(),
                then: vec![Stmt::assign(var, format!("{var} + y"))],
                otherwise: vec![],
            },
        ],
    }
}
