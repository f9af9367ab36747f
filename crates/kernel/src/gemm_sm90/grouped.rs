//! The grouped (MoE) member of the SM90 family: the same producer / consumer / scheduler
//! roles over the row tiles of an alignment that lives on the GPU
//! ([`crate::moe_routing::align`]).
//!
//! * A is `[M, K]` in the alignment's padded-row order (GEMM1 reads the token rows
//!   gathered into that order beforehand, GEMM2 reads GEMM1's output), loaded by TMA at the
//!   tile's rows. Row tile `tile_m` (of `BM` rows, the alignment's block) belongs to local
//!   expert `block_expert[tile_m]`.
//! * B is one tensor map over `[L, rows, K]` (the experts are its third mode): a tile loads
//!   its expert's rows. With [`Sm90Grouped::SwiGlu`] every B stage is two TMA boxes of
//!   `BN / 2` rows, the gate rows of the tile's output columns `n0 ..` at smem rows
//!   `0 .. BN/2` and their up rows (`N + n0 ..`, or the reverse with `up_first`) at
//!   `BN/2 .. BN`, so the thread holding gate column `c` holds its up column `c + BN/2`
//!   (register `+ BN/4` in the `wgmma` accumulator layout).
//! * The tile walk is the group's own ([`walk_helper`]): bands of one expert's row tiles
//!   walked row tile fastest, so a wave of CTAs shares its experts' B tiles in L2; work ids
//!   past the device scalar `total_rows` are skipped by every role alike (no host
//!   synchronisation: the launch can be captured in a CUDA graph and replayed with new
//!   routing). The scheduler only hands out the work ids.
//! * The epilogue writes from the accumulator registers ([`super::grouped_epilogue`]):
//!   SwiGLU `D[m, n] = silu(gate) * up` in padded-row order (`[M, N]`); scatter
//!   `D[sorted_ids[m]] = weight * acc`, padding rows not stored.

use super::*;

/// What a grouped SM90 kernel's epilogue writes (the mainloop is the family's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sm90Grouped {
    /// GEMM1: B holds `2N` rows per expert (gate then up); a tile covers `BN / 2` output
    /// columns and writes `silu(gate) * up` to padded row `m`.
    SwiGlu,
    /// GEMM2: row `m` goes to `D[sorted_ids[m]]`, times `weights[sorted_ids[m]]`.
    Scatter,
}

impl Sm90Grouped {
    /// The name's tag.
    pub fn tag(self) -> &'static str {
        match self {
            Sm90Grouped::SwiGlu => "swiglu",
            Sm90Grouped::Scatter => "scatter",
        }
    }
}

/// Output columns of one tile: `BN`, or `BN / 2` with SwiGLU.
pub(super) fn tile_n_out(cfg: &GemmSm90Config) -> i64 {
    match cfg.grouped {
        Some(Sm90Grouped::SwiGlu) => cfg.tile[1] / 2,
        _ => cfg.tile[1],
    }
}

/// The grouped member's own limits.
pub(super) fn check(cfg: &GemmSm90Config, g: Sm90Grouped) -> Result<(), GemmError> {
    // Ping-pong: each consumer warpgroup owns whole BM-row tiles (the alignment's block),
    // so every tile it takes has a routed first row; its look-ahead walks the grouped ids
    // ([`pingpong_lookahead`]). Not on clusters (their walk pairs tiles across CTAs).
    if cfg.schedule == Sm90Schedule::PingPong && grouped_cluster::clustered(cfg) {
        return Err(cfg_err(
            "grouped: the ping-pong schedule runs without a cluster (the cluster walk pairs tiles across CTAs)",
        ));
    }
    if cfg.with_c() {
        return Err(cfg_err("grouped: no C"));
    }
    let band = cfg.walk_band;
    if !(1..=MAX_WALK_BAND).contains(&band) || (grouped_cluster::clustered(cfg) && band % 2 != 0) {
        return Err(cfg_err(format!(
            "grouped: walk band {band} must lie in 1..={MAX_WALK_BAND} (even on clusters: whole row-tile pairs)"
        )));
    }
    grouped_cluster::check(cfg)?;
    let same = cfg.ab == cfg.cd && matches!(cfg.ab, Element::BF16 | Element::F16);
    let fp8 = is_fp8(cfg) && matches!(cfg.cd, Element::BF16 | Element::F16);
    if !same && !fp8 {
        return Err(cfg_err(format!(
            "grouped: bf16 or f16 A/B and D of one type, or e4m3 A/B with a bf16 / f16 D; got {} -> {}",
            cfg.ab.ptx(),
            cfg.cd.ptx()
        )));
    }
    // The up box starts BN/2 rows into the stage: whole 8-row (1 KiB) swizzle atoms.
    if g == Sm90Grouped::SwiGlu && cfg.tile[1] % 16 != 0 {
        return Err(cfg_err(format!(
            "grouped SwiGLU: BN = {} must be a multiple of 16 (two boxes of whole swizzle atoms)",
            cfg.tile[1]
        )));
    }
    Ok(())
}

/// The padding skip's limits ([`GemmSm90Config::pad_skip`]): the grouped member on the
/// cooperative schedule (two consumer warpgroups, each of `BM / 2` rows) without a cluster.
pub(super) fn pad_skip_check(cfg: &GemmSm90Config) -> Result<(), GemmError> {
    if cfg.grouped.is_none() || cfg.schedule != Sm90Schedule::Cooperative || cfg.cluster != [1, 1] {
        return Err(cfg_err(format!(
            "pad_skip: the grouped member on the cooperative schedule without a cluster, got {:?} on {}x{}{}",
            cfg.schedule,
            cfg.cluster[0],
            cfg.cluster[1],
            if cfg.grouped.is_some() { "" } else { ", not grouped" }
        )));
    }
    Ok(())
}

/// With the padding skip, in a producer's tile head: whether row `BM / 2` of the tile (the
/// first row of consumer warpgroup 1) is routed. An expert's padding rows follow its
/// routed rows, so where it is not, the tile's upper half is all padding and that
/// warpgroup reads nothing of it.
pub(super) fn pad_upper(k: &Ctx) -> Vec<Stmt> {
    if !k.cfg.pad_skip {
        return vec![];
    }
    vec![dc(
        "const bool",
        "upper_routed",
        format!("__ldg(sorted_ids + m0 + {}) < entries", k.bm / 2),
        format!(
            "tile row {} is routed: else rows {}..{} are padding, read by no warpgroup (pad_skip)",
            k.bm / 2,
            k.bm / 2,
            k.bm
        ),
    )]
}

/// FP8 (e4m3) operands: the epilogue scales each accumulator by its row's activation
/// scale `a_scale[m]` (per padded row, i.e. per token) and its B row's weight scale
/// `b_scale[expert][row]` (per output channel) before SwiGLU / the router weight.
pub(super) fn is_fp8(cfg: &GemmSm90Config) -> bool {
    cfg.ab == Element::E4M3
}

/// The kernel's parameters after the family's: D, the alignment, the router weights and
/// the sizes of the epilogue (and with e4m3 operands the two scale vectors).
pub(super) fn params(cfg: &GemmSm90Config) -> Vec<(String, String)> {
    let t = cfg.cd.cuda_type();
    let scales: &[(&str, &str)] = if is_fp8(cfg) {
        &[
            ("const float* __restrict__", "a_scale"),
            ("const float* __restrict__", "b_scale"),
        ]
    } else {
        &[]
    };
    [
        (format!("{t}* __restrict__"), "D"),
        ("const int* __restrict__".into(), "sorted_ids"),
        ("const int* __restrict__".into(), "block_expert"),
        ("const int* __restrict__".into(), "total_rows"),
        ("const int* __restrict__".into(), "offsets"),
        ("const float* __restrict__".into(), "weights"),
        ("long long".into(), "ldd"),
        ("int".into(), "entries"),
        ("int".into(), "up_first"),
    ]
    .into_iter()
    .chain(scales.iter().map(|&(t, n)| (t.to_string(), n)))
    .map(|(t, n)| (t, n.to_string()))
    .collect()
}

/// Prologue: this routing's padded rows, and the B row origins of the gate and up halves.
pub(super) fn prologue(g: Sm90Grouped) -> Vec<Stmt> {
    let mut v = vec![dc(
        "const int",
        "rows_used",
        "__ldg(total_rows)",
        "the alignment's padded rows (a multiple of BM): tiles from here on have no rows",
    )];
    if g == Sm90Grouped::SwiGlu {
        v.push(dc(
            "const int",
            "gate_row0",
            "up_first ? N : 0",
            "w13 per expert: gate rows 0..N and up rows N..2N, or the reverse when up_first",
        ));
        v.push(d("const int", "up_row0", "up_first ? 0 : N"));
    }
    v
}

/// Row tiles of one band of the grouped tile walk, at most, by default
/// ([`GemmSm90Config::walk_band`]).
pub const WALK_BAND: i64 = 16;

/// The largest [`GemmSm90Config::walk_band`] (an expert of more row tiles than the walk
/// can hold in one band is split anyway).
pub const MAX_WALK_BAND: i64 = 64;

/// In every role's tile head: the tile of this work id in the expert-aligned walk
/// ([`walk_helper`]), or skip it (past this routing's rows).
pub(super) fn tile_walk(cfg: &GemmSm90Config) -> Vec<Stmt> {
    if grouped_cluster::clustered(cfg) {
        return grouped_cluster::tile_walk();
    }
    vec![
        c("the expert-aligned walk (rc_grouped_tile); ids past this routing's rows are skipped by every role alike"),
        if_(
            "!rc_grouped_tile(work, sched_tiles_n, rows_used, offsets, block_expert, tile_m, tile_n)",
            vec![Stmt::Continue],
        ),
        Stmt::assign("batch", "0"),
    ]
}

/// The grouped tile walk, the same in every role. Work id `w` lies in row tile `t = w /
/// tiles_n`'s band: each expert's row tiles (contiguous in the alignment) are split into
/// bands of at most `band` tiles ([`GemmSm90Config::walk_band`]) of near-equal size, and the `size * tiles_n` ids of
/// band `[start, start + size)` (ids `start * tiles_n ..`) walk its row tiles fastest, then
/// the column tiles. A wave of CTAs so covers one expert's row tiles by many column tiles:
/// each B tile is shared by every row tile of its expert at once, and no band straddles
/// two experts. A bijection of `[0, used_tiles * tiles_n)`; ids past it are skipped.
pub(super) fn walk_helper(bm: i64, band: i64) -> Item {
    Item::Snippet {
        origin: "rcute grouped tile walk".into(),
        code: format!(
            r#"// The tile of work id `work` in the expert-aligned walk over the alignment's row tiles of
// {bm} rows (offsets: the experts' padded row offsets [L + 1]); false past the routed rows.
__device__ __forceinline__ bool rc_grouped_tile(unsigned long long work, int tiles_n, int rows_used,
    const int* __restrict__ offsets, const int* __restrict__ block_expert, int& tile_m, int& tile_n) {{
  const int t = (int)(work / (unsigned long long)tiles_n);  // the row tile whose band holds this id
  if (t >= rows_used / {bm}) return false;
  const int e = __ldg(block_expert + t);
  if (e < 0) return false;
  const int f = __ldg(offsets + e) / {bm};           // the expert's first row tile
  const int cnt = __ldg(offsets + e + 1) / {bm} - f;  // and its row tiles
  const int nb = (cnt + {band} - 1) / {band};        // bands: rem of base + 1 tiles, then base tiles
  const int base = cnt / nb, rem = cnt % nb;
  const int r = t - f;
  const int j = r < rem * (base + 1) ? r / (base + 1) : rem + (r - rem * (base + 1)) / base;
  const int start = f + j * base + min(j, rem);
  const int size = base + (j < rem ? 1 : 0);
  const int local = (int)(work - (unsigned long long)start * tiles_n);  // < size * tiles_n
  tile_n = local / size;
  tile_m = start + local % size;
  return true;
}}
"#,
        ),
    }
}

/// Ping-pong, before the ordered wait: whether the other warpgroup has a next tile, i.e.
/// whether a later work id of this CTA is a tile of the grouped walk ([`walk_helper`]).
/// The walk's ids are valid up to `used_tiles * tiles_n` (minus any row tile without an
/// expert), so the search stops at that bound: one id in the walk's body, none past it.
pub(super) fn pingpong_lookahead(bm: i64) -> Vec<Stmt> {
    vec![
        c("whether the other warpgroup has a next tile (it waits for this mainloop only then): the next id of"),
        c("the expert-aligned walk below this routing's row tiles that names a tile"),
        d("bool", "other_next", "false"),
        d(
            "const unsigned long long",
            "walk_end",
            format!("(unsigned long long)(rows_used / {bm}) * (unsigned long long)sched_tiles_n"),
        ),
        Stmt::Loop {
            init: "unsigned long long w = work + sched.stride()".into(),
            cond: "w < sched.total_work && w < walk_end && !other_next".into(),
            step: "w += sched.stride()".into(),
            body: vec![
                d("int", "other_m", "0"),
                d("int", "other_n", "0"),
                Stmt::assign(
                    "other_next",
                    "rc_grouped_tile(w, sched_tiles_n, rows_used, offsets, block_expert, other_m, other_n)",
                ),
            ],
        },
    ]
}

/// The producer's loads of one k-tile: A at the tile's padded rows; B at the expert's rows
/// (SwiGLU: the gate box, then the up box `BN / 2` rows further into the stage).
pub(super) fn operand_loads(k: &Ctx, g: Sm90Grouped) -> Vec<Stmt> {
    if k.clustered {
        return grouped_cluster::operand_loads(k, g);
    }
    let p = k.p;
    let tx = p.mainloop.tx_bytes;
    let dst = stage_dst(p.offsets[0], p.stage_bytes[0], 0);
    let load_a = |dst: &str, row: &str| {
        e(format!(
            "rc_tma_load_3d(smem + {dst}, &tmap_a, full, kt * {}, {row}, 0)",
            k.bk
        ))
    };
    let mut v = vec![];
    if k.cfg.pad_skip {
        // A in two boxes of BM / 2 rows; the upper one only where warpgroup 1 reads it.
        let half = k.bm / 2;
        let half_bytes = half * k.row_bytes;
        v.push(e(format!(
            "rc_mbarrier_arrive_expect_tx(full, upper_routed ? {tx}u : {}u)",
            tx as i64 - half_bytes
        )));
        v.push(c(format!(
            "pad_skip: A's rows in two boxes (BK, {half}), the upper one only where row {half} is routed"
        )));
        v.push(load_a(&dst, "m0"));
        v.push(if_(
            "upper_routed",
            vec![load_a(
                &stage_dst(p.offsets[0], p.stage_bytes[0], half_bytes),
                &format!("m0 + {half}"),
            )],
        ));
        v.extend(b_loads(k, g));
        return v;
    }
    let a = load_a(&dst, "m0");
    v.push(e(format!("rc_mbarrier_arrive_expect_tx(full, {tx}u)")));
    v.push(match g {
        Sm90Grouped::Scatter => c(
            "TMA boxes (BK, BM) of A's padded rows and (BK, BN) of the expert's B rows; zero-filled past the edges",
        ),
        Sm90Grouped::SwiGlu => c(format!(
            "TMA boxes (BK, BM) of A's padded rows; B: (BK, {h}) gate rows to stage rows 0..{h}, (BK, {h}) up rows to {h}..{}",
            k.bn,
            h = k.bn / 2
        )),
    });
    v.push(a);
    v.extend(b_loads(k, g));
    v
}

/// `stage * bytes + off + extra`: a stage slice's byte offset in the shared memory.
fn stage_dst(off: usize, bytes: usize, extra: i64) -> String {
    var("stage")
        .mul(&Expr::lit(bytes as i64))
        .add(&Expr::lit(off as i64 + extra))
        .to_cpp()
}

/// The TMA loads of one k-tile's B stage at the expert's rows: one `(BK, BN)` box, or with
/// SwiGLU the gate box, then the up box `BN / 2` rows further into the stage.
pub(super) fn b_loads(k: &Ctx, g: Sm90Grouped) -> Vec<Stmt> {
    let p = k.p;
    let load = |extra: i64, row: &str| {
        e(format!(
            "rc_tma_load_3d(smem + {}, &tmap_b, full, kt * {}, {row}, expert)",
            stage_dst(p.offsets[1], p.stage_bytes[1], extra),
            k.bk
        ))
    };
    match g {
        Sm90Grouped::Scatter => vec![load(0, "n0")],
        Sm90Grouped::SwiGlu => vec![
            load(0, "gate_row0 + n0"),
            load((k.bn / 2) * k.row_bytes, "up_row0 + n0"),
        ],
    }
}

#[cfg(test)]
pub(super) mod tests {
    /// Experts' row-tile counts the walk tests cover: empty experts, one tile, long runs.
    pub(in crate::gemm_sm90) const ROW_TILE_COUNTS: [&[usize]; 4] =
        [&[0, 1, 2, 3], &[5, 0, 40, 7], &[1], &[17, 16, 33]];

    /// The alignment's per-expert first row tiles (and the total last) of `counts`.
    pub(in crate::gemm_sm90) fn offsets_of(counts: &[usize]) -> Vec<usize> {
        let mut offsets = vec![0];
        for c in counts {
            offsets.push(offsets.last().unwrap() + c);
        }
        offsets
    }

    /// The device walk (`rc_grouped_tile`) line by line on the host: `(tile_m, tile_n)` of
    /// work id `w`, or `None` (past the routed row tiles).
    fn tile(w: usize, tiles_n: usize, offsets: &[usize], band: usize) -> Option<(usize, usize)> {
        let t = w / tiles_n;
        let e = (0..offsets.len() - 1).find(|&e| offsets[e] <= t && t < offsets[e + 1])?;
        let (f, cnt) = (offsets[e], offsets[e + 1] - offsets[e]);
        let nb = cnt.div_ceil(band);
        let (base, rem) = (cnt / nb, cnt % nb);
        let r = t - f;
        let j = if r < rem * (base + 1) {
            r / (base + 1)
        } else {
            rem + (r - rem * (base + 1)) / base
        };
        let start = f + j * base + j.min(rem);
        let size = base + usize::from(j < rem);
        let local = w - start * tiles_n;
        assert!(local < size * tiles_n, "work id {w} outside its band");
        assert!(size <= band, "band of {size} row tiles over {band}");
        Some((start + local % size, local / size))
    }

    /// Every (row tile, column tile) is one work id's tile exactly once, at every band.
    #[test]
    fn the_walk_covers_each_tile_once_at_every_band() {
        for band in [1, 2, 3, 4, 8, 16] {
            for counts in ROW_TILE_COUNTS {
                let offsets = offsets_of(counts);
                let used = *offsets.last().unwrap();
                for tiles_n in 1..6 {
                    let mut seen = vec![0u8; used * tiles_n];
                    for w in 0..used * tiles_n + 3 {
                        if let Some((tm, tn)) = tile(w, tiles_n, &offsets, band) {
                            seen[tm * tiles_n + tn] += 1;
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
}
