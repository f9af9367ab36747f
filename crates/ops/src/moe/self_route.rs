//! Whether GEMM1 of the SM80 layer routes its decode batch itself
//! ([`rcute_kernel::grouped_gemm::route`]: no top-k + alignment kernel in front of it):
//! [`super::MoeOptions::route`], else `RCUTE_MOE_ROUTE`, else the rule
//! ([`gemm1_routes_by_rule`]).

use crate::env_choice::EnvChoice;
use rcute_kernel::grouped_gemm::route::MAX_ENTRIES;
use std::sync::OnceLock;

/// The setting of `RCUTE_MOE_ROUTE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeRouteChoice {
    /// The rule ([`gemm1_routes_by_rule`]).
    Auto,
    /// GEMM1 routes wherever it can (logits, at most 32 routed entries, the tile grid).
    Gemm1,
    /// Always the routing kernel(s) in front of GEMM1.
    Kernel,
}

impl EnvChoice for MoeRouteChoice {
    const VAR: &'static str = "RCUTE_MOE_ROUTE";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("auto", MoeRouteChoice::Auto),
        ("gemm1", MoeRouteChoice::Gemm1),
        ("kernel", MoeRouteChoice::Kernel),
    ];
}

impl MoeRouteChoice {
    /// The setting of `RCUTE_MOE_ROUTE`: `auto` (also unset or empty), `gemm1` or
    /// `kernel`; anything else is read as `auto`, with a warning printed. Read once per
    /// process.
    ///
    /// ```
    /// use rcute_ops::env_choice::EnvChoice;
    /// use rcute_ops::moe::MoeRouteChoice;
    /// assert_eq!(MoeRouteChoice::parse(None), (MoeRouteChoice::Auto, None));
    /// assert_eq!(MoeRouteChoice::parse(Some("gemm1")), (MoeRouteChoice::Gemm1, None));
    /// assert!(MoeRouteChoice::parse(Some("on")).1.is_some());
    /// ```
    pub fn from_env() -> MoeRouteChoice {
        static SETTING: OnceLock<MoeRouteChoice> = OnceLock::new();
        *SETTING.get_or_init(MoeRouteChoice::read_env_warning_printed)
    }
}

/// The most bytes of expert weights a layer may stream for [`gemm1_routes_by_rule`] to
/// let GEMM1 route it: the routed experts (at most `T * k`) times `3 H I` elements each.
/// GEMM1's own routing saves a fixed ~1.7 us of the routing link (the link costs ~3.2 us;
/// GEMM1's CTAs then spend the rest routing before their first weight load, and lose the
/// prefetch they made while the routing kernel ran), so it pays 2 % only on layers of
/// less than ~85 us, ~130 MB of weights at the H100's 2.2-2.5 TB/s. Measured on an H100
/// (BENCHMARKS.md, "Session 26 (helper moeroute)"), CUDA graphs of 10 layers, two rounds,
/// µs, routing kernel -> GEMM1 routing:
///
/// | layer (weights streamed) | round 1 | round 2 |
/// |---|---|---|
/// | DeepSeek-V2-Lite T = 1 (104 MB) | 46.8 -> 45.2 (-3.4 %) | 47.2 -> 45.4 (-3.8 %) |
/// | DeepSeek-V2-Lite T = 4 (<= 415 MB) | 158.1 -> 156.9 (-0.8 %) | 158.5 -> 157.2 (-0.8 %) |
/// | Mixtral T = 1 (704 MB) | 253.1 -> 252.1 (-0.4 %) | |
/// | Mixtral T = 4 (<= 1.4 GB) | 631.2 -> 628.7 (-0.4 %) | |
/// | Mixtral T = 16 (2.8 GB) | 974.0 -> 975.7 (+0.2 %) | |
pub const GEMM1_ROUTE_MAX_WEIGHT_BYTES: usize = 128 << 20;

/// The rule: whether GEMM1 routes a layer of `tokens` tokens top-`topk` over `local`
/// experts of `expert_bytes` bytes of weights each (`w13` and `w2`: `3 H I` elements)
/// itself where it can: when the routed experts' weights (at most `min(T k, L)` experts)
/// are at most [`GEMM1_ROUTE_MAX_WEIGHT_BYTES`].
///
/// ```
/// use rcute_ops::moe::gemm1_routes_by_rule;
/// let deepseek = 3 * 2048 * 1408 * 2; // DeepSeek-V2-Lite, bf16: 17.3 MB an expert
/// assert!(gemm1_routes_by_rule(1, 6, 64, deepseek)); // 104 MB
/// assert!(!gemm1_routes_by_rule(4, 6, 64, deepseek));
/// let mixtral = 3 * 4096 * 14336 * 2; // 352 MB an expert
/// assert!(!gemm1_routes_by_rule(1, 2, 8, mixtral));
/// ```
pub fn gemm1_routes_by_rule(tokens: usize, topk: usize, local: usize, expert_bytes: usize) -> bool {
    let experts = tokens.saturating_mul(topk).min(local);
    experts.saturating_mul(expert_bytes) <= GEMM1_ROUTE_MAX_WEIGHT_BYTES
}

/// What [`gemm1_routes`] decides on: the layer's tokens, `k`, local experts and bytes of
/// weights per expert, whether it is routed from logits, and whether GEMM1 is the SM80
/// tile grid (not the streamed form, not the prepared weight).
#[derive(Clone, Copy, Debug)]
pub struct RouteCase {
    /// `T`.
    pub tokens: usize,
    /// `k`.
    pub topk: usize,
    /// `L`.
    pub local: usize,
    /// `3 H I` elements' bytes.
    pub expert_bytes: usize,
    /// Routed from logits.
    pub logits: bool,
    /// GEMM1 is the tile grid kernel.
    pub tile_grid: bool,
    /// The layer's configuration asks GEMM1 to route (a tuning table's `,route`,
    /// [`crate::tuning::MoeSpec::route`]): taken where the rule would decide.
    pub tuned: bool,
}

/// Whether GEMM1 routes layer `c` itself: only where it can (routed from logits; at most
/// [`MAX_ENTRIES`] routed entries; GEMM1 the tile grid kernel), then as `forced`
/// ([`super::MoeOptions::route`]) says, else as `RCUTE_MOE_ROUTE`, else as the layer's
/// configuration asks (`c.tuned`), else the rule ([`gemm1_routes_by_rule`]).
///
/// ```
/// use rcute_ops::moe::{gemm1_routes, RouteCase};
/// let c = RouteCase { tokens: 1, topk: 6, local: 64, expert_bytes: 3 * 2048 * 1408 * 2, logits: true, tile_grid: true, tuned: false };
/// assert!(gemm1_routes(Some(true), &c));
/// assert!(!gemm1_routes(Some(true), &RouteCase { tokens: 6, ..c })); // 36 entries
/// assert!(!gemm1_routes(Some(true), &RouteCase { logits: false, ..c })); // the caller's ids
/// assert!(!gemm1_routes(Some(true), &RouteCase { tile_grid: false, ..c })); // streamed GEMM1
/// assert!(!gemm1_routes(Some(false), &c));
/// let mixtral = RouteCase { topk: 2, local: 8, expert_bytes: 3 * 4096 * 14336 * 2, ..c };
/// assert!(!gemm1_routes(None, &mixtral)); // 704 MB: over the rule's bound
/// assert!(gemm1_routes(None, &RouteCase { tuned: true, ..mixtral })); // the table's `,route`
/// ```
pub fn gemm1_routes(forced: Option<bool>, c: &RouteCase) -> bool {
    let can = c.logits && c.tile_grid && c.tokens.saturating_mul(c.topk) <= MAX_ENTRIES as usize;
    can && match forced {
        Some(on) => on,
        None => match MoeRouteChoice::from_env() {
            MoeRouteChoice::Gemm1 => true,
            MoeRouteChoice::Kernel => false,
            MoeRouteChoice::Auto => c.tuned || gemm1_routes_by_rule(c.tokens, c.topk, c.local, c.expert_bytes),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::align_reference;
    use rcute_kernel::grouped_gemm::route::tile_rows_from_ids;

    /// The kernel's local layout (its host model) is the alignment's: every row tile's
    /// expert and rows, and no tile past them, for random routings of up to 32 entries
    /// over expert-parallel ranges.
    #[test]
    fn gemm1_layout_is_the_alignment() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as i32
        };
        for case in 0..400 {
            let (experts, topk) = [(64, 6), (8, 2), (16, 4), (256, 8)][case % 4];
            let tokens = 1 + next((32 / topk) as u32) as usize;
            let ids: Vec<i32> = (0..tokens * topk).map(|_| next(experts as u32)).collect();
            let (offset, local) = [(0, experts), (experts / 4, experts / 2), (experts - 1, 1)][case % 3];
            let bm = [16, 2, 1, 64][case % 4];
            let a = align_reference(&ids, tokens, topk, offset, local, bm).unwrap();
            let n = (tokens * topk) as i32;
            for tile in 0..=a.block_expert.len() + 1 {
                let got = tile_rows_from_ids(&ids, offset as i32, local as i32, bm as i32, tile as i32);
                let want = a.block_expert.get(tile).map(|&e| {
                    let rows = (0..bm).map(|r| a.sorted_ids.get(tile * bm + r).copied().unwrap_or(n));
                    (e, rows.collect::<Vec<i32>>())
                });
                assert_eq!(
                    got, want,
                    "case {case}: ids {ids:?} [{offset}, +{local}) tiles of {bm}, tile {tile}"
                );
            }
        }
    }
}
