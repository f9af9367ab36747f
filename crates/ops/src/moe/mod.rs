//! Fused MoE: the layer on the GPU ([`crate::Ops::fused_moe`], [`crate::Ops::grouped_gemm`])
//! and its float64 references.
//!
//! * [`routing`]: router logits -> top-k expert ids and weights (softmax, top-k with ties
//!   to the lower expert, optional renormalisation).
//! * [`align`]: top-k ids and a local expert range -> per-expert counts, offsets padded to
//!   the GEMM tile, the routed entries sorted by expert, the expert of every tile.
//! * [`reference`](mod@reference): the whole layer in float64; [`reference_fp8`]: the FP8
//!   layer's quantized semantics ([`crate::Ops::fused_moe_fp8`]).
//! * [`problem`]: validation, workspace sizes ([`fused_moe_workspace_bytes`]) and the
//!   routing / options types.
//!
//! ```
//! use rcute_ops::moe::{align_reference, topk_softmax_reference};
//! // Two tokens, four experts, top-2, renormalised.
//! let logits = [0.1, 2.0, -1.0, 1.5, 3.0, 3.0, 0.0, 0.5];
//! let r = topk_softmax_reference(&logits, 2, 4, 2, true).unwrap();
//! assert_eq!(r.topk_ids, vec![1, 3, 0, 1]); // the tie 3.0 = 3.0 goes to expert 0 first
//! assert!((r.topk_weights[2] - 0.5).abs() < 1e-15);
//! // Experts [1, 3) on this GPU, tiles of 2 rows.
//! let a = align_reference(&r.topk_ids, 2, 2, 1, 2, 2).unwrap();
//! assert_eq!(a.counts, vec![2, 0]); // entries 0 and 3 go to expert 1; expert 2 gets none
//! assert_eq!(a.sorted_ids, vec![0, 3]);
//! assert_eq!(a.block_expert, vec![0]);
//! ```

pub mod align;
mod forced;
pub(crate) mod fused;
mod fused_fp8;
pub(crate) mod fused_sm90;
mod grouped;
pub(crate) mod kernels;
pub mod path;
mod prefetch;
mod prepared;
pub mod problem;
mod quantize;
pub mod reference;
pub mod reference_fp8;
pub mod routing;
mod self_route;

pub use align::{align_reference, Alignment};
pub use forced::fused_moe_workspace_bytes_with;
pub use fused::{align_on_ctas, ALIGN_CTAS_MIN_ENTRIES, ALIGN_CTAS_MIN_EXPERTS};
pub use fused_fp8::{fused_moe_fp8_workspace_bytes, MoeFp8Weights};
pub use grouped::{validate_grouped_gemm, GroupedProblem};
pub use kernels::{sm90_gemms, sm90_grid, with_dynamic, with_gather, with_pad_skip, with_walk_band};
pub use path::{
    sm90_chosen, sm90_dynamic, sm90_fp8_pingpong, sm90_gather, sm90_gemm1_cluster, sm90_gemm1_tile, sm90_gemm2_cluster,
    sm90_gemm2_tile, sm90_pingpong, MoePath, SM90_CLUSTER_MIN_EXPERT_BYTES, SM90_CLUSTER_MIN_ROWS_PER_EXPERT,
    SM90_DYNAMIC_MIN_ROWS_PER_EXPERT, SM90_FP8_PINGPONG_MAX_ROWS_PER_EXPERT, SM90_GATHER_MAX_ROWS_PER_EXPERT,
    SM90_GEMM1_NARROW_COST, SM90_MIN_ROWS_PER_EXPERT, SM90_NARROW_TILE_COST, SM90_PINGPONG_MAX_ROWS_PER_EXPERT,
    SM90_PINGPONG_MIN_ROWS_PER_EXPERT,
};
pub use prefetch::MoePrefetch;
pub use prepared::{prepared_spec, MoeWeights};
pub use problem::{
    deep_stages, fused_moe_workspace_bytes, grouped_gemm_workspace_bytes, moe_space, moe_splits, moe_tile,
    validate_fused_moe, wave_stages, MoeOptions, MoeProblem, MoeRouting, MoeWorkspace,
};
pub use reference::fused_moe_reference;
pub use routing::{topk_softmax_reference, Routing};
pub use self_route::{gemm1_routes, gemm1_routes_by_rule, MoeRouteChoice, RouteCase, GEMM1_ROUTE_MAX_WEIGHT_BYTES};
