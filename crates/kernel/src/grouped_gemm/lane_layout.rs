//! One warp's layout of a decode batch's routed entries (at most 32, lane `l` holding entry
//! `l`): each entry's local expert, the lanes of that expert, its row tiles and the row tiles
//! in front of it, in the order the alignment (`rc_moe_align`) lays them out. GEMM1's weight
//! prefetch ([`super::prefetch`]) finds its row tile's expert from it; GEMM1's own routing
//! ([`super::route`]) writes the whole alignment from it.

use super::stmt::{d, dc, if_};
use crate::emit::Stmt;

/// One warp's view of up to 32 routed entries, lane `l` holding entry `l` (its id from
/// `id_expr`): `e` (its local expert, wrapping), `local`, `group` (the lanes of its expert),
/// `tiles` (its expert's row tiles of `bm` rows), `leader` (the expert's first lane) and
/// `before` declared 0 (summed by [`tiles_below`]). GEMM1's prefetch and its own routing
/// ([`super::route`]) both lay the alignment out from this.
pub(super) fn lane_expert_tiles(bm: i64, id_expr: &str) -> Vec<Stmt> {
    let full = "0xffffffffu";
    vec![
        d("const int", "id", id_expr),
        dc(
            "const int",
            "e",
            "(int)((unsigned)id - (unsigned)expert_offset)",
            "wrapping: ids may be any value",
        ),
        d(
            "const bool",
            "local",
            "lane < entries && e >= 0 && e < prefetch_experts",
        ),
        dc(
            "const unsigned",
            "group",
            format!("__match_any_sync({full}, local ? e : -1)"),
            "the lanes routed to this lane's expert",
        ),
        dc(
            "const int",
            "tiles",
            format!("(__popc(group) + {}) / {bm}", bm - 1),
            "row tiles of this lane's expert (meaningful where local)",
        ),
        d("const int", "leader", "local && lane == __ffs(group) - 1"),
        dc(
            "int",
            "before",
            "0",
            "row tiles of the local experts below this lane's: where its tiles start",
        ),
    ]
}

/// `out += tiles` of every leader lane whose expert is below `of` (the warp's layout of
/// [`lane_expert_tiles`] in scope): the row tiles in front of expert `of`.
pub(super) fn tiles_below(out: &str, of: &str) -> Stmt {
    let full = "0xffffffffu";
    Stmt::For {
        var: "j".into(),
        start: "0".into(),
        end: "32".into(),
        unroll: false,
        body: vec![
            d("const int", "ej", format!("__shfl_sync({full}, e, j)")),
            d("const int", "tj", format!("__shfl_sync({full}, tiles, j)")),
            d("const int", "lj", format!("__shfl_sync({full}, leader, j)")),
            if_(
                format!("lj && ej < {of}"),
                vec![Stmt::assign(out, format!("{out} + tj"))],
            ),
        ],
    }
}
