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

/// The rule: whether GEMM1 routes a layer of `tokens` tokens top-`topk` itself where it
/// can. Off: not measured to win yet.
pub fn gemm1_routes_by_rule(tokens: usize, topk: usize) -> bool {
    let _ = (tokens, topk);
    false
}

/// Whether GEMM1 routes itself: only where it can (`logits`: routed from logits; at most
/// [`MAX_ENTRIES`] routed entries; `tile_grid`: GEMM1 is the SM80 tile grid kernel, not
/// the streamed form), then as `forced` ([`super::MoeOptions::route`]) says, else as
/// `RCUTE_MOE_ROUTE`, else the rule.
///
/// ```
/// use rcute_ops::moe::gemm1_routes;
/// assert!(gemm1_routes(Some(true), true, 1, 6, true));
/// assert!(!gemm1_routes(Some(true), true, 6, 6, true)); // 36 entries
/// assert!(!gemm1_routes(Some(true), false, 1, 6, true)); // the caller's ids
/// assert!(!gemm1_routes(Some(true), true, 1, 6, false)); // streamed GEMM1
/// assert!(!gemm1_routes(Some(false), true, 1, 6, true));
/// ```
pub fn gemm1_routes(forced: Option<bool>, logits: bool, tokens: usize, topk: usize, tile_grid: bool) -> bool {
    let can = logits && tile_grid && tokens.saturating_mul(topk) <= MAX_ENTRIES as usize;
    can && match forced {
        Some(on) => on,
        None => match MoeRouteChoice::from_env() {
            MoeRouteChoice::Gemm1 => true,
            MoeRouteChoice::Kernel => false,
            MoeRouteChoice::Auto => gemm1_routes_by_rule(tokens, topk),
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
