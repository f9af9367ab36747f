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

/// The persistent tile walk: this CTA's work ids.
pub(super) fn work_loop(body: Vec<Stmt>) -> Stmt {
    Stmt::Loop {
        init: "unsigned long long work = sched.first_work()".into(),
        cond: "work < sched.total_work".into(),
        step: "work += sched.stride()".into(),
        body,
    }
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
    if needs != TileNeeds::TileOnly {
        v.push(dc(
            "const int",
            "split",
            "batch / L",
            "the scheduler's batches are (split, batch) pairs, split slowest",
        ));
    }
    v.push(Stmt::assign("batch", "batch % L"));
    if needs == TileNeeds::WithSplit {
        v.push(d("const int", "kt0", "split * k_iters"));
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
