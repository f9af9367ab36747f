//! The tile-scheduler role: the persistent walk over work ids and the tile one work id
//! names, emitted alike for the producer and the consumers so that they agree on the order.

use super::*;

/// The tile scheduler of a configuration.
pub(super) fn scheduler(cfg: &GemmSm90Config) -> TileScheduler {
    TileScheduler {
        raster: cfg.raster,
        swizzle_log2: cfg.swizzle_log2,
        cluster: [cfg.cluster[0] as u32, cfg.cluster[1] as u32],
    }
}

/// Whether the schedule walks several tiles per CTA.
pub(super) fn persistent(s: Sm90Schedule) -> bool {
    s != Sm90Schedule::WarpSpecialized
}

/// The launch configuration `build` gives for at most `max_active_clusters` clusters
/// (`None`: as many as the SMs hold), capped for a persistent kernel on clusters at what
/// [`Function::max_active_clusters`] says `f`'s GPU holds at once: every cluster of a
/// persistent walk must be resident together, or the ones left over run as a second wave.
pub(super) fn fitting_launch(
    f: &Function,
    schedule: Sm90Schedule,
    build: impl Fn(Option<u32>) -> Result<LaunchConfig, GemmError>,
) -> Result<LaunchConfig, GemmError> {
    let lc = build(None)?;
    match lc.cluster {
        Some(_) if persistent(schedule) => build(Some(f.max_active_clusters(&lc)?)),
        _ => Ok(lc),
    }
}

/// The persistent tile walk: this CTA's work ids; with stream-K ([`Ctx::sk`]) its work
/// items, each a work id and its k-tiles `[kb, kb + k_iters)`, read from the walk in
/// shared memory at the item's head (`producer`: by the producers' one elected thread, else
/// by whole warps, broadcast from lane 0: [`stream_k::uniform`]).
pub(super) fn work_loop(k: &Ctx, body: Vec<Stmt>, producer: bool) -> Stmt {
    if !k.sk {
        return Stmt::Loop {
            init: "unsigned long long work = sched.first_work()".into(),
            cond: "work < sched.total_work".into(),
            step: "work += sched.stride()".into(),
            body,
        };
    }
    let u = |x: &str| stream_k::uniform(k, x, producer);
    let mut item = vec![
        dc(
            "const unsigned long long",
            "work",
            u("walk.work(item)"),
            "whole tiles first, then this CTA's stream-K parts",
        ),
        d("const int", "kb", u("walk.k_begin(item)")),
        dc(
            "const int",
            "k_iters",
            format!("{} - kb", u("walk.k_end(item)")),
            "this item's k-tiles: all of the tile's, or a stream-K part of them",
        ),
    ];
    item.extend(body);
    Stmt::Block(vec![
        d("const int", "items", u("walk.items")),
        Stmt::Loop {
            init: "int item = 0".into(),
            cond: "item < items".into(),
            step: "++item".into(),
            body: item,
        },
    ])
}

/// What a role needs of the work item: its k-tiles (mainloop roles) or only its tile.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum TileNeeds {
    /// Tile origin, batch and the split's first k-tile `kt0` (the mainloop producer).
    WithSplit,
    /// Tile origin, batch and split (the consumers: they count the split's k-tiles from 0).
    SplitOnly,
    /// Tile origin and batch only (the C producer).
    TileOnly,
}

/// The head of one work item: skip padding work ids, then the tile `(m0, n0)`, the batch
/// and (for the mainloop roles) the split's first k-tile.
pub(super) fn tile_of(k: &Ctx, needs: TileNeeds) -> Vec<Stmt> {
    let mut v = vec![Stmt::Decl {
        ty: "int".into(),
        name: "tile_m, tile_n, batch".into(),
        init: None,
        comment: None,
    }];
    if k.cfg.grouped.is_some() {
        v.extend(grouped::tile_walk(k.cfg));
    } else {
        v.extend([
            c("work ids past the problem (padding of the swizzle bands) are skipped by every role alike"),
            if_("!sched.cluster_valid(work)", vec![Stmt::Continue]),
            c("a CTA whose tile lies past the edge still loads (TMA zero-fills) for its cluster partners"),
            e("sched.tile(work, tile_m, tile_n, batch)"),
        ]);
    }
    v.extend(tile_fields(k, needs));
    v
}

/// The persistent walk's state of a role that decodes its next work item ahead
/// ([`tile_decoded_ahead`]): the first work id's validity and tile, decoded before the walk.
pub(super) fn decode_first(k: &Ctx) -> Vec<Stmt> {
    let first = if k.sk {
        stream_k::uniform(k, "walk.work(0)", false)
    } else {
        "sched.first_work()".into()
    };
    vec![
        c("the walk decodes each work id's tile one work item ahead: the first one here, every next one while the"),
        c("tensor cores still run the current tile's last wgmma batch (the scheduler's divisions stay off the idle"),
        c("time between two tiles)"),
        d("bool", "next_valid", format!("sched.cluster_valid({first})")),
        Stmt::Decl {
            ty: "int".into(),
            name: "next_m, next_n, next_batch".into(),
            init: None,
            comment: None,
        },
        e(format!("sched.tile({first}, next_m, next_n, next_batch)")),
    ]
}

/// Decode the work item after `work` into the look-ahead state of [`decode_first`] (with
/// stream-K the walk's next item; past the last one it names no tile).
pub(super) fn decode_next(k: &Ctx) -> Vec<Stmt> {
    let next = if k.sk {
        stream_k::uniform(k, "walk.work(item + 1)", false)
    } else {
        "work + sched.stride()".into()
    };
    vec![
        c("look-ahead: decode the next work id's tile (the walk's divisions) while the tensor cores are busy"),
        Stmt::assign("next_valid", format!("sched.cluster_valid({next})")),
        e(format!("sched.tile({next}, next_m, next_n, next_batch)")),
    ]
}

/// The head of one work item whose tile was decoded ahead ([`decode_first`] /
/// [`decode_next`]): a padding work id decodes its successor and is skipped, as in
/// [`tile_of`]; then the same fields.
pub(super) fn tile_decoded_ahead(k: &Ctx, needs: TileNeeds) -> Vec<Stmt> {
    let mut v = vec![
        d("int", "tile_m", "next_m"),
        d("int", "tile_n", "next_n"),
        d("int", "batch", "next_batch"),
        c("work ids past the problem (padding of the swizzle bands) are skipped by every role alike"),
        if_("!next_valid", {
            let mut skip = decode_next(k);
            skip.push(Stmt::Continue);
            skip
        }),
        c("a CTA whose tile lies past the edge still loads (TMA zero-fills) for its cluster partners"),
    ];
    v.extend(tile_fields(k, needs));
    v
}

/// The fields of a decoded work item: split, batch, the split's first k-tile (`WithSplit`)
/// and the tile origin.
fn tile_fields(k: &Ctx, needs: TileNeeds) -> Vec<Stmt> {
    let mut v = Vec::new();
    // Stream-K kernels have no K splits (their batches are the problem's).
    if needs != TileNeeds::TileOnly && !k.sk {
        v.push(dc(
            "const int",
            "split",
            "batch / L",
            "the scheduler's batches are (split, batch) pairs, split slowest",
        ));
    }
    v.push(Stmt::assign("batch", "batch % L"));
    if needs == TileNeeds::WithSplit {
        v.push(if k.sk {
            dc("const int", "kt0", "kb", "stream-K: the item's first k-tile")
        } else {
            d("const int", "kt0", "split * k_iters")
        });
    }
    v.push(d("const int", "m0", format!("tile_m * {}", k.bm)));
    if k.cfg.grouped == Some(Sm90Grouped::SwiGlu) {
        v.push(dc(
            "const int",
            "n0",
            format!("tile_n * {}", k.bn / 2),
            "first output column: a SwiGLU tile's BN B rows are BN/2 gate + BN/2 up rows",
        ));
    } else {
        v.push(d("const int", "n0", format!("tile_n * {}", k.bn)));
    }
    if k.cfg.grouped.is_some() && !k.clustered {
        v.push(dc(
            "const int",
            "expert",
            "__ldg(block_expert + tile_m)",
            "the local expert of this row tile",
        ));
    }
    v
}
