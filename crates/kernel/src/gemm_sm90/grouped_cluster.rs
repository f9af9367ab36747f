//! The grouped (MoE) member on 2x1 CTA clusters: the two CTAs of a cluster take two tiles
//! of one expert that share an operand, and each loads half of the shared operand's box
//! and multicasts it to both, so that a weight (B) tile is read from memory once for two
//! row tiles of its expert.
//!
//! * The walk ([`walk_helper`]) hands a cluster one *item* per work id. An expert of `cnt`
//!   row tiles has `cnt` items per pair of column tiles: its `cnt / 2` pairs of row tiles
//!   by the two column tiles (B shared: rank `r` takes row tile `2p + r` of the pair `p`),
//!   and, when `cnt` is odd, its last row tile by both column tiles (A shared: rank `r`
//!   takes column tile `2c + r`). Its items so fill exactly `cnt * ceil(tiles_n / 2)` work
//!   ids starting at `first_row_tile * ceil(tiles_n / 2)`: the work ids need no prefix sum
//!   over the experts, only the alignment's `offsets` and `block_expert`.
//! * Rows are walked in bands (of at most [`GemmSm90Config::walk_band`] row tiles, whole
//!   pairs, the odd row tile in the expert's last band), items of a band fastest, then the
//!   column pairs: the clusters of one wave cover one expert's row tiles by a few column
//!   tiles, and the odd row tile's cluster reads its B tiles while the pairs' clusters do.
//! * A CTA whose tile lies past the problem (`mine` false: the partner's column tile is the
//!   last of an odd count) still issues its half of the shared operand and waits for and
//!   releases every stage, but loads nothing else, runs no `wgmma` and stores nothing.
//!   Both CTAs skip the same work ids, so their pipelines and cluster barriers stay in step.
//! * Every operand box is half a tile (`BM / 2` A rows, `BN / 2` B rows: with SwiGLU the
//!   gate and up boxes): a CTA loads the unshared operand as two boxes of its own and the
//!   shared operand's half `rank` multicast to both CTAs. The full barrier of each stage
//!   expects A and B (or only A in a CTA without a tile: the shared A halves).

use super::*;

/// The cluster shape of the grouped member: two CTAs along M.
pub const GROUPED_CLUSTER: [i64; 2] = [2, 1];

/// Whether `cfg` is the cluster member ([`GROUPED_CLUSTER`]).
pub(super) fn clustered(cfg: &GemmSm90Config) -> bool {
    cfg.grouped.is_some() && cfg.cluster != [1, 1]
}

/// The cluster member's limits: 2x1 only.
pub(super) fn check(cfg: &GemmSm90Config) -> Result<(), GemmError> {
    if cfg.cluster != [1, 1] && cfg.cluster != GROUPED_CLUSTER {
        return Err(cfg_err(format!(
            "grouped: cluster 1x1 or 2x1, got {}x{}",
            cfg.cluster[0], cfg.cluster[1]
        )));
    }
    Ok(())
}

/// In every role's tile head: the tile of this work id for this CTA in the cluster walk
/// ([`walk_helper`]), or skip the id (both CTAs of the cluster alike).
pub(super) fn tile_walk() -> Vec<Stmt> {
    vec![
        Stmt::Decl {
            ty: "int".into(),
            name: "expert".into(),
            init: None,
            comment: Some("the tile's local expert".into()),
        },
        Stmt::Decl {
            ty: "bool".into(),
            name: "mine, shared_b".into(),
            init: None,
            comment: Some("this CTA has a tile; the cluster shares B (else A)".into()),
        },
        c("the cluster walk (rc_grouped_cluster_tile); both CTAs skip the same ids"),
        if_(
            "!rc_grouped_cluster_tile(work, N, rows_used, offsets, block_expert, rank_m, tile_m, tile_n, expert, mine, shared_b)",
            vec![Stmt::Continue],
        ),
        Stmt::assign("batch", "0"),
    ]
}

/// The cluster walk: for work id `work` and the CTA of rank `rank`, its tile, the expert,
/// whether the CTA has a tile and which operand the cluster shares; `cfg`'s output column
/// tiles and walk band.
pub(super) fn walk_helper(bm: i64, cfg: &GemmSm90Config) -> Item {
    let bn_out = super::grouped::tile_n_out(cfg);
    let half_band = cfg.walk_band / 2;
    Item::Snippet {
        origin: "rcute grouped cluster walk".into(),
        code: format!(
            r#"// The item of work id `work` in the 2x1 cluster walk over the alignment's row tiles of {bm}
// rows (offsets: the experts' padded row offsets [L + 1]) and the N / {bn_out} column tiles,
// for the CTA of rank `rank`; false past the routed rows and for items past the columns.
// An expert of cnt row tiles owns the cnt * pairs_n work ids from its first row tile
// times pairs_n: per pair of column tiles, its row-tile pairs by the two column tiles
// (B shared), then its odd last row tile by both (A shared).
__device__ __forceinline__ bool rc_grouped_cluster_tile(unsigned long long work, int n, int rows_used,
    const int* __restrict__ offsets, const int* __restrict__ block_expert, int rank,
    int& tile_m, int& tile_n, int& expert, bool& mine, bool& shared_b) {{
  const int tiles_n = (n + {bn1}) / {bn_out};
  const int pairs_n = (tiles_n + 1) / 2;                  // column-tile pairs
  const int t = (int)(work / (unsigned long long)pairs_n);  // the row tile whose slot holds this id
  if (t >= rows_used / {bm}) return false;
  const int e = __ldg(block_expert + t);
  if (e < 0) return false;
  const int f = __ldg(offsets + e) / {bm};           // the expert's first row tile
  const int cnt = __ldg(offsets + e + 1) / {bm} - f;  // and its row tiles
  const int pairs = cnt / 2, odd = cnt % 2;
  // Bands of at most {half_band} row-tile pairs, near-equal (rem of base + 1, then base); the
  // odd row tile joins the last band.
  const int nb = pairs > 0 ? (pairs + {hb1}) / {half_band} : 1;
  const int base = pairs / nb, rem = pairs % nb;
  const int q = min((t - f) / 2, pairs - 1);          // the row tile's pair (-1: no pair)
  const int j = q < 0 ? 0 : (q < rem * (base + 1) ? q / (base + 1) : rem + (q - rem * (base + 1)) / base);
  const int psize = base + (j < rem ? 1 : 0);
  const int start = f + 2 * (j * base + min(j, rem));  // the band's first row tile
  const int rows = 2 * psize + (j == nb - 1 ? odd : 0);  // its row tiles: its items per column pair
  const int local = (int)(work - (unsigned long long)start * pairs_n);  // < rows * pairs_n
  const int c = local / rows, i = local % rows;
  expert = e;
  shared_b = i < 2 * psize;
  if (shared_b) {{
    tile_m = start + (i & ~1) + rank;  // the pair's row tile of this rank
    tile_n = 2 * c + (i & 1);
    mine = true;
    return tile_n < tiles_n;           // past an odd column count: both skip
  }}
  tile_m = start + i;                  // the odd last row tile
  tile_n = 2 * c + rank;
  mine = tile_n < tiles_n;             // the partner of the last odd column only lends its A half
  return true;
}}
"#,
            bn1 = bn_out - 1,
            hb1 = half_band - 1,
        ),
    }
}

/// The producer's loads of one k-tile in the cluster member: expect the stage's bytes,
/// then the unshared operand's two half boxes (own) and the shared operand's half `rank_m`
/// (multicast to both CTAs).
pub(super) fn operand_loads(k: &Ctx, g: Sm90Grouped) -> Vec<Stmt> {
    let p = k.p;
    let (half_a, half_b) = (k.bm / 2, k.bn / 2);
    // `base` moved `h` halves of `size` on (`h` a literal 0 / 1 or a run-time rank).
    let moved = |base: String, h: &str, size: i64| match h {
        "0" => base,
        "1" => format!("{base} + {size}"),
        _ => format!("{base} + {h} * {size}"),
    };
    let stage = |off: usize, bytes: usize| {
        var("stage")
            .mul(&Expr::lit(bytes as i64))
            .add(&Expr::lit(off as i64))
            .to_cpp()
    };
    let a_dst = |h: &str| moved(stage(p.offsets[0], p.stage_bytes[0]), h, half_a * k.row_bytes);
    let b_dst = |h: &str| moved(stage(p.offsets[1], p.stage_bytes[1]), h, half_b * k.row_bytes);
    let a_row = |h: &str| moved("m0".into(), h, half_a);
    let b_row = |h: &str| match (g, h) {
        (Sm90Grouped::SwiGlu, "0") => "gate_row0 + n0".to_string(),
        (Sm90Grouped::SwiGlu, "1") => "up_row0 + n0".to_string(),
        (Sm90Grouped::SwiGlu, _) => format!("({h} ? up_row0 : gate_row0) + n0"),
        (Sm90Grouped::Scatter, _) => moved("n0".into(), h, half_b),
    };
    let own = |dst: String, map: &str, row: String, batch: &str| {
        e(format!(
            "rc_tma_load_3d(smem + {dst}, &tmap_{map}, full, kt * {}, {row}, {batch})",
            k.bk
        ))
    };
    let shared = |dst: String, map: &str, row: String, batch: &str| {
        e(format!(
            "rc_tma_load_3d_multicast(smem + {dst}, &tmap_{map}, full, peers, kt * {}, {row}, {batch})",
            k.bk
        ))
    };
    let b_half = match g {
        Sm90Grouped::SwiGlu => "the gate (0) or up (1) box",
        Sm90Grouped::Scatter => "half",
    };
    vec![
        dc(
            "const uint32_t",
            "tx",
            format!(
                "mine ? {}u : {}u",
                p.mainloop.tx_bytes,
                k.bm * k.row_bytes
            ),
            "A and B land here, or only the shared A halves in a CTA without a tile",
        ),
        e("rc_mbarrier_arrive_expect_tx(full, tx)"),
        Stmt::If {
            cond: "shared_b".into(),
            then: vec![
                c(format!(
                    "B shared: A's two ({}, {half_a}) boxes of this CTA's rows; B's {b_half} rank_m, (BK, {half_b}), to both CTAs",
                    k.bk
                )),
                own(a_dst("0"), "a", a_row("0"), "0"),
                own(a_dst("1"), "a", a_row("1"), "0"),
                shared(b_dst("rank_m"), "b", b_row("rank_m"), "expert"),
            ],
            otherwise: vec![
                c(format!(
                    "A shared: A's half rank_m, ({}, {half_a}), to both CTAs; B's two ({}, {half_b}) boxes of this CTA's columns",
                    k.bk, k.bk
                )),
                shared(a_dst("rank_m"), "a", a_row("rank_m"), "0"),
                if_(
                    "mine",
                    vec![
                        own(b_dst("0"), "b", b_row("0"), "expert"),
                        own(b_dst("1"), "b", b_row("1"), "expert"),
                    ],
                ),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    /// The device walk (`rc_grouped_cluster_tile`) line by line on the host: `(tile_m,
    /// tile_n, mine, shared_b)` of work id `w` for rank `rank`, or `None` (skipped).
    fn item(
        w: usize,
        rank: usize,
        tiles_n: usize,
        offsets: &[usize],
        band: usize,
    ) -> Option<(usize, usize, bool, bool)> {
        let half_band = band / 2;
        let pairs_n = tiles_n.div_ceil(2);
        let t = w / pairs_n;
        let e = (0..offsets.len() - 1).find(|&e| offsets[e] <= t && t < offsets[e + 1])?;
        let (f, cnt) = (offsets[e], offsets[e + 1] - offsets[e]);
        let (pairs, odd) = (cnt / 2, cnt % 2);
        let nb = if pairs > 0 { pairs.div_ceil(half_band) } else { 1 };
        let (base, rem) = (pairs / nb, pairs % nb);
        let q = ((t - f) / 2).min(pairs.max(1) - 1);
        let j = if pairs == 0 {
            0
        } else if q < rem * (base + 1) {
            q / (base + 1)
        } else {
            rem + (q - rem * (base + 1)) / base
        };
        let psize = base + usize::from(j < rem);
        let start = f + 2 * (j * base + j.min(rem));
        let rows = 2 * psize + if j == nb - 1 { odd } else { 0 };
        let local = w - start * pairs_n;
        assert!(local < rows * pairs_n, "work id {w} outside its band");
        let (c, i) = (local / rows, local % rows);
        if i < 2 * psize {
            let tn = 2 * c + (i & 1);
            return (tn < tiles_n).then_some((start + (i & !1) + rank, tn, true, true));
        }
        Some((start + i, 2 * c + rank, 2 * c + rank < tiles_n, false))
    }

    /// Every (row tile, column tile) of every expert is one CTA's tile exactly once; a
    /// cluster's two CTAs share B (same column, two row tiles of one expert) or A (one row
    /// tile), and skip the same ids; at every even band.
    #[test]
    fn the_cluster_walk_covers_each_tile_once() {
        for band in [2, 4, 8, 16] {
            cluster_walk_covers(band);
        }
    }

    fn cluster_walk_covers(band: usize) {
        for counts in super::super::grouped::tests::ROW_TILE_COUNTS {
            let offsets = super::super::grouped::tests::offsets_of(counts);
            let used = *offsets.last().unwrap();
            for tiles_n in 1..6 {
                let mut seen = vec![0u8; used * tiles_n];
                for w in 0..used.div_ceil(2) * 2 * tiles_n.div_ceil(2) + 3 {
                    let (a, b) = (item(w, 0, tiles_n, &offsets, band), item(w, 1, tiles_n, &offsets, band));
                    assert_eq!(a.is_some(), b.is_some());
                    let (Some(a), Some(b)) = (a, b) else { continue };
                    assert_eq!(a.3, b.3);
                    if a.3 {
                        assert_eq!((a.1, a.0 + 1), (b.1, b.0));
                    } else {
                        assert_eq!(a.0, b.0);
                    }
                    let expert = |t: usize| offsets.iter().rposition(|&o| o <= t).unwrap();
                    assert_eq!(expert(a.0), expert(b.0), "one expert per cluster");
                    for (tm, tn, mine, _) in [a, b] {
                        if mine {
                            seen[tm * tiles_n + tn] += 1;
                        }
                    }
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "band {band} {counts:?} tiles_n {tiles_n}: {seen:?}"
                );
            }
        }
    }
}
