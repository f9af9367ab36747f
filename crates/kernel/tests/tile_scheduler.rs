//! The SM90 persistent tile scheduler: every output tile exactly once, cluster blocks,
//! CUTLASS's raster and swizzle rules, typed errors, and the device code (snapshot, NVRTC,
//! a host C++ compiler run and a GPU run, each checked against the Rust model).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;
use rcute_kernel::testing::{gpu_for_test, toolkit_for_test};
use rcute_kernel::tile_scheduler::{
    RasterOrder, RasterOrderOption, SchedulerError, SchedulerParams, TileScheduler, MAX_CLUSTER_CTAS,
};
use rcute_kernel::{compile, Arch, CompileOptions, KernelArgs, LaunchConfig};

type Grid = (u32, u32, u32);
/// `(tile_m, tile_n, batch)`.
type Tile = (u32, u32, u32);
/// `(cluster x, cluster y, work id)` to the `(rank_m, rank_n, tile)` of each CTA there.
type ClusterVisits = BTreeMap<(u32, u32, u64), Vec<(u32, u32, Option<Tile>)>>;

/// One visit of the persistent loop: a CTA, the work id and the tile it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Visit {
    block: Grid,
    work: u64,
    tile: Option<Tile>,
}

/// Runs every CTA's persistent loop over `grid` as the device code does.
fn simulate(s: &TileScheduler, p: &SchedulerParams, grid: Grid) -> Vec<Visit> {
    let stride = s.work_stride(p, grid);
    assert!(stride > 0, "{grid:?}");
    let mut visits = Vec::new();
    for bz in 0..grid.2 {
        for by in 0..grid.1 {
            for bx in 0..grid.0 {
                let block = (bx, by, bz);
                let (mut work, rank) = s.first_work(p, block, grid);
                while work < p.total_work {
                    visits.push(Visit {
                        block,
                        work,
                        tile: s.tile(p, work, rank),
                    });
                    work += stride;
                }
            }
        }
    }
    visits
}

/// Every output tile exactly once; the CTAs of one cluster walk the same work ids and get the
/// tiles of one cluster block; the grid is whole clusters within the SM count.
fn check_schedule(s: &TileScheduler, p: &SchedulerParams, grid: Grid, sm_count: u32) {
    let ctx = format!("{s:?} {p:?} grid {grid:?}");
    let [cm, cn] = p.cluster;
    assert_eq!(p.cluster_dim(), (cm, cn, 1));
    assert_eq!((grid.0 % cm, grid.1 % cn, grid.2), (0, 0, 1), "{ctx}");
    let ctas = grid.0 * grid.1 * grid.2;
    assert!(ctas <= sm_count, "{ctx}");
    let clusters = u64::from(ctas / (cm * cn));
    assert_eq!(s.work_stride(p, grid), clusters, "{ctx}");
    assert!(clusters <= p.total_work, "{ctx}");
    // The grid's shape is CUTLASS's: clusters stacked along y (raster along N) or x (along M).
    match p.raster {
        RasterOrder::AlongN => assert_eq!(grid.0, cm, "{ctx}"),
        RasterOrder::AlongM => assert_eq!(grid.1, cn, "{ctx}"),
    }

    let mut count = vec![0u32; p.output_tiles() as usize];
    let mut per_cluster = ClusterVisits::new();
    for v in simulate(s, p, grid) {
        if let Some((m, n, l)) = v.tile {
            assert!(m < p.tiles_m && n < p.tiles_n && l < p.batches, "{ctx}: {v:?}");
            count[((l * p.tiles_m + m) * p.tiles_n + n) as usize] += 1;
        }
        let cluster = (v.block.0 / cm, v.block.1 / cn, v.work);
        per_cluster
            .entry(cluster)
            .or_default()
            .push((v.block.0 % cm, v.block.1 % cn, v.tile));
    }
    assert!(count.iter().all(|&c| c == 1), "{ctx}: visit counts {count:?}");

    for ((_, _, work), members) in &per_cluster {
        // Every CTA of the cluster is at this work id, each rank once.
        assert_eq!(members.len() as u32, cm * cn, "{ctx}: work {work}");
        let base = s.tile(p, *work, (0, 0));
        for &(rm, rn, tile) in members {
            assert_eq!(tile, s.tile(p, *work, (rm, rn)));
            if let Some((m, n, l)) = tile {
                let (bm, bn, bl) = base.unwrap_or_else(|| panic!("{ctx}: rank ({rm},{rn}) valid, rank 0 not"));
                assert_eq!((bm % cm, bn % cn), (0, 0), "{ctx}: block origin ({bm},{bn})");
                assert_eq!(
                    (m, n, l),
                    (bm + rm, bn + rn, bl),
                    "{ctx}: rank ({rm},{rn}) of work {work}"
                );
            }
        }
    }
}

fn scheduler(raster: RasterOrderOption, swizzle_log2: u32, cluster: [u32; 2]) -> TileScheduler {
    TileScheduler {
        raster,
        swizzle_log2,
        cluster,
    }
}

const RASTERS: [RasterOrderOption; 3] = [
    RasterOrderOption::AlongM,
    RasterOrderOption::AlongN,
    RasterOrderOption::Heuristic,
];
const CLUSTERS: [[u32; 2]; 9] = [[1, 1], [2, 1], [1, 2], [2, 2], [4, 1], [1, 4], [4, 2], [2, 4], [8, 2]];

#[test]
fn every_tile_exactly_once_over_many_shapes() {
    let extents = [1u64, 100, 129, 700, 2050];
    let mut checked = 0;
    for &(tile_m, tile_n) in &[(128u32, 128u32), (64, 192)] {
        for &m in &extents {
            for &n in &extents {
                for l in [1u64, 3] {
                    for cluster in CLUSTERS {
                        for raster in RASTERS {
                            for swizzle in [0u32, 1, 2, 3, 5] {
                                let s = scheduler(raster, swizzle, cluster);
                                let p = s.params(m, n, l, tile_m, tile_n).unwrap();
                                assert_eq!(u64::from(p.tiles_m), m.div_ceil(u64::from(tile_m)));
                                assert_eq!(u64::from(p.tiles_n), n.div_ceil(u64::from(tile_n)));
                                for (sm_count, max_active) in [(16u32, None), (132, None), (132, Some(7))] {
                                    let grid = s.grid(&p, sm_count, max_active).unwrap();
                                    check_schedule(&s, &p, grid, sm_count);
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 2 * 5 * 5 * 2 * 9 * 3 * 5 * 3);
}

#[test]
fn single_tile_and_ragged_edges() {
    // One tile, any cluster: exactly one CTA of one cluster does it.
    for cluster in CLUSTERS {
        let s = TileScheduler::new(cluster);
        let p = s.params(1, 1, 1, 128, 128).unwrap();
        assert_eq!((p.tiles_m, p.tiles_n, p.total_work), (1, 1, 1));
        let grid = s.grid(&p, 132, None).unwrap();
        assert_eq!(grid.0 * grid.1, cluster[0] * cluster[1], "one cluster");
        let visits = simulate(&s, &p, grid);
        let done: Vec<_> = visits.iter().filter_map(|v| v.tile).collect();
        assert_eq!(done, [(0, 0, 0)], "{cluster:?}");
        assert_eq!(visits.iter().find(|v| v.tile.is_some()).unwrap().block, (0, 0, 0));
    }
    // A 2x2 cluster over 3x3 tiles: the last cluster row and column overhang the edge.
    let s = TileScheduler::new([2, 2]);
    let p = s.params(300, 300, 1, 128, 128).unwrap();
    assert_eq!((p.tiles_m, p.tiles_n, p.total_work), (3, 3, 4));
    assert_eq!(s.tile(&p, 3, (1, 1)), None, "tile (3, 3) is past both edges");
    assert!(s.tile(&p, 3, (0, 0)).is_some());
    check_schedule(&s, &p, s.grid(&p, 132, None).unwrap(), 132);
}

#[test]
fn grid_is_whole_clusters_capped_by_work_and_sms() {
    let s = TileScheduler::new([2, 1]);
    let p = s.params(8192, 8192, 1, 128, 256).unwrap(); // 64 x 32 tiles: along N
    assert_eq!(p.raster, RasterOrder::AlongN);
    assert_eq!(s.grid(&p, 132, None).unwrap(), (2, 66, 1));
    assert_eq!(
        s.grid(&p, 133, None).unwrap(),
        (2, 66, 1),
        "rounded down to whole clusters"
    );
    assert_eq!(
        s.grid(&p, 132, Some(60)).unwrap(),
        (2, 60, 1),
        "occupancy's answer is used"
    );
    assert_eq!(
        s.grid(&p, 132, Some(67)).unwrap(),
        (2, 66, 1),
        "an answer past the SMs is not"
    );
    assert_eq!(s.grid(&p, 132, Some(0)).unwrap(), (2, 66, 1), "0 means unknown");
    // Along M: clusters side by side in x.
    let p = s.params(1024, 8192, 1, 128, 128).unwrap(); // 8 x 64 tiles
    assert_eq!(p.raster, RasterOrder::AlongM);
    assert_eq!(s.grid(&p, 132, None).unwrap(), (132, 1, 1));
    // Capped by the work: 2 tiles along M, 1 along N, one cluster.
    let p = s.params(256, 128, 1, 128, 128).unwrap();
    assert_eq!(s.grid(&p, 132, None).unwrap(), (2, 1, 1));
    // One-CTA clusters ignore the occupancy answer, as CUTLASS does.
    let s1 = TileScheduler::new([1, 1]);
    let p = s1.params(8192, 8192, 1, 128, 128).unwrap();
    assert_eq!(s1.grid(&p, 132, Some(10)).unwrap(), (1, 132, 1));
}

#[test]
fn first_work_and_stride_follow_clusters_in_any_grid() {
    // A hand-made grid with several clusters along x, y and z.
    let s = TileScheduler::new([2, 2]);
    let p = s.params(3000, 2000, 2, 128, 128).unwrap();
    let grid = (4, 6, 2);
    assert_eq!(s.work_stride(&p, grid), 2 * 3 * 2);
    assert_eq!(s.first_work(&p, (0, 0, 0), grid), (0, (0, 0)));
    assert_eq!(s.first_work(&p, (3, 1, 0), grid), (1, (1, 1)));
    assert_eq!(s.first_work(&p, (1, 2, 0), grid), (2, (1, 0)));
    assert_eq!(s.first_work(&p, (2, 5, 1), grid), (6 + 5, (0, 1)));
    let mut count = vec![0; p.output_tiles() as usize];
    for v in simulate(&s, &p, grid) {
        if let Some((m, n, l)) = v.tile {
            count[((l * p.tiles_m + m) * p.tiles_n + n) as usize] += 1;
        }
    }
    assert!(count.iter().all(|&c| c == 1));
}

#[test]
fn swizzle_bands_walk_the_major_mode() {
    // 8 x 8 tiles, no cluster, bands of 4 along M (minor for raster along N): work ids 0..3
    // cover column 0 of rows 0..3, then column 1, ... and the second band starts at id 32.
    let s = scheduler(RasterOrderOption::AlongN, 2, [1, 1]);
    let p = s.params(1024, 1024, 1, 128, 128).unwrap();
    assert_eq!(p.swizzle_log2, 2);
    let tiles: Vec<_> = (0..64).map(|w| s.tile(&p, w, (0, 0)).unwrap()).collect();
    assert_eq!(
        &tiles[..6],
        &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0), (0, 1, 0), (1, 1, 0)]
    );
    assert_eq!(tiles[31], (3, 7, 0));
    assert_eq!(tiles[32], (4, 0, 0));
    // Raster along M: the same with the modes swapped.
    let s = scheduler(RasterOrderOption::AlongM, 2, [1, 1]);
    let p = s.params(1024, 1024, 1, 128, 128).unwrap();
    let tiles: Vec<_> = (0..6).map(|w| s.tile(&p, w, (0, 0)).unwrap()).collect();
    assert_eq!(
        tiles,
        [(0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 3, 0), (1, 0, 0), (1, 1, 0)]
    );
    // With clusters, a band is (1 << log) clusters wide: 2x1 clusters, bands of 2 clusters = 4 rows.
    let s = scheduler(RasterOrderOption::AlongN, 1, [2, 1]);
    let p = s.params(1024, 1024, 1, 128, 128).unwrap();
    let blocks: Vec<_> = (0..4).map(|w| s.tile(&p, w, (0, 0)).unwrap()).collect();
    assert_eq!(blocks, [(0, 0, 0), (2, 0, 0), (0, 1, 0), (2, 1, 0)]);
    // Batches follow one another: batch 1 starts where batch 0's ids end.
    let p = s.params(1024, 1024, 2, 128, 128).unwrap();
    assert_eq!(p.total_work, 2 * 32);
    assert_eq!(s.tile(&p, 32, (1, 0)), Some((1, 0, 1)));
}

/// CUTLASS's raster heuristic, `get_rasterization_order` in tile_scheduler_params.h: with
/// `RasterOrderOptions::Heuristic` it rasterizes along M when the problem has strictly more
/// CTA tiles along N than along M, and along N otherwise, ties included. It counts the tiles
/// after padding them to whole clusters and then to whole swizzle bands.
#[test]
fn heuristic_raster_matches_cutlass() {
    let h = |m_tiles: u64, n_tiles: u64, swizzle: u32, cluster: [u32; 2]| {
        let s = scheduler(RasterOrderOption::Heuristic, swizzle, cluster);
        s.params(m_tiles * 128, n_tiles * 128, 1, 128, 128).unwrap().raster
    };
    assert_eq!(h(8, 24, 0, [1, 1]), RasterOrder::AlongM);
    assert_eq!(h(24, 8, 0, [1, 1]), RasterOrder::AlongN);
    assert_eq!(h(8, 8, 0, [1, 1]), RasterOrder::AlongN, "a tie goes along N");
    assert_eq!(h(8, 9, 0, [1, 1]), RasterOrder::AlongM);
    // Padding to clusters: 3 x 3 tiles with 1x2 clusters count as 3 x 4.
    assert_eq!(h(3, 3, 0, [1, 2]), RasterOrder::AlongM);
    assert_eq!(h(3, 3, 0, [2, 1]), RasterOrder::AlongN);
    // Padding to swizzle bands: 5 x 7 tiles with bands of 4 count as 8 x 8, a tie.
    assert_eq!(h(5, 7, 0, [1, 1]), RasterOrder::AlongM);
    assert_eq!(h(5, 7, 2, [1, 1]), RasterOrder::AlongN);
    // The rule itself, on padded counts.
    for (m, n) in [(1u64, 1u64), (1, 2), (2, 1), (100, 101), (101, 100)] {
        let want = if n > m {
            RasterOrder::AlongM
        } else {
            RasterOrder::AlongN
        };
        assert_eq!(RasterOrderOption::Heuristic.resolve(m, n), want);
        assert_eq!(RasterOrderOption::AlongM.resolve(m, n), RasterOrder::AlongM);
        assert_eq!(RasterOrderOption::AlongN.resolve(m, n), RasterOrder::AlongN);
    }
    assert_eq!(RasterOrderOption::default(), RasterOrderOption::Heuristic);
    assert_eq!(RasterOrder::AlongN.device_int(), 1);
    assert_eq!(RasterOrder::AlongM.device_int(), 0);
}

/// CUTLASS's swizzle clamp, `get_log_swizzle_size`: bands of 8 need at least 6 tiles along
/// both modes, bands of 4 at least 3, bands of 2 at least 2 (tile counts padded to clusters);
/// the band never exceeds the configured one nor 8.
#[test]
fn swizzle_is_clamped_as_cutlass() {
    let eff = |max_log: u32, m_tiles: u64, n_tiles: u64, cluster: [u32; 2]| {
        let s = scheduler(RasterOrderOption::Heuristic, max_log, cluster);
        s.params(m_tiles * 64, n_tiles * 64, 1, 64, 64).unwrap().swizzle_log2
    };
    for max_log in 0..=9 {
        assert_eq!(eff(max_log, 100, 100, [1, 1]), max_log.min(3), "max {max_log}");
    }
    assert_eq!(eff(3, 6, 6, [1, 1]), 3);
    assert_eq!(eff(3, 5, 100, [1, 1]), 2);
    assert_eq!(eff(3, 100, 3, [1, 1]), 2);
    assert_eq!(eff(3, 2, 100, [1, 1]), 1);
    assert_eq!(eff(3, 1, 100, [1, 1]), 0);
    assert_eq!(eff(2, 2, 2, [1, 1]), 1);
    assert_eq!(eff(1, 1, 1, [1, 1]), 0);
    // Counted after padding to clusters: 1 tile along M in a 2x1 cluster counts as 2.
    assert_eq!(eff(3, 1, 100, [2, 1]), 1);
    assert_eq!(eff(3, 5, 5, [2, 2]), 3);
    // The padded work covers whole bands of clusters.
    let s = scheduler(RasterOrderOption::AlongN, 3, [2, 1]);
    let p = s.params(13 * 64, 7 * 64, 1, 64, 64).unwrap(); // 13 x 7 tiles, 14 x 7 by clusters
    assert_eq!(p.swizzle_log2, 3);
    assert_eq!(p.total_work, (16 / 2) * 8, "clusters padded to 8 x 8");
}

#[test]
fn bad_input_is_a_typed_error() {
    let ok = TileScheduler::new([2, 1]);
    assert_eq!(
        ok.params(128, 128, 1, 0, 128),
        Err(SchedulerError::ZeroTile { tile_m: 0, tile_n: 128 })
    );
    assert_eq!(
        ok.params(0, 128, 1, 128, 128),
        Err(SchedulerError::EmptyProblem { m: 0, n: 128, l: 1 })
    );
    assert_eq!(
        ok.params(128, 128, 0, 128, 128),
        Err(SchedulerError::EmptyProblem { m: 128, n: 128, l: 0 })
    );
    for (cluster, want) in [
        ([0, 1], SchedulerError::ZeroCluster { cluster: [0, 1] }),
        ([1, 0], SchedulerError::ZeroCluster { cluster: [1, 0] }),
        ([3, 1], SchedulerError::ClusterNotPowerOfTwo { cluster: [3, 1] }),
        ([2, 6], SchedulerError::ClusterNotPowerOfTwo { cluster: [2, 6] }),
        ([8, 4], SchedulerError::ClusterTooLarge { cluster: [8, 4] }),
        (
            [1 << 31, 1 << 31],
            SchedulerError::ClusterTooLarge {
                cluster: [1 << 31, 1 << 31],
            },
        ),
    ] {
        let s = TileScheduler::new(cluster);
        assert_eq!(s.validate(), Err(want.clone()));
        assert_eq!(s.params(128, 128, 1, 128, 128), Err(want.clone()));
        assert!(!want.to_string().is_empty());
    }
    assert!(
        TileScheduler::new([4, 4]).validate().is_ok(),
        "16 CTAs is Hopper's non-portable maximum"
    );
    assert_eq!(MAX_CLUSTER_CTAS, 16);

    // Counts past the device's 32-bit tile coordinates, batches and 63-bit work ids.
    let over = |r: Result<SchedulerParams, SchedulerError>| match r {
        Err(SchedulerError::Overflow { what, value, limit }) => {
            assert!(value > limit, "{what}");
            what
        }
        other => panic!("expected an overflow, got {other:?}"),
    };
    assert_eq!(over(ok.params(u64::MAX, 128, 1, 1, 128)), "padded tiles along M");
    assert_eq!(over(ok.params(128, 1 << 31, 1, 128, 1)), "padded tiles along N");
    assert_eq!(over(ok.params(128, 128, 1 << 31, 128, 128)), "batches");
    let big = (1u64 << 30) - 2;
    assert_eq!(over(ok.params(big, big, 1 << 30, 1, 1)), "work ids");
    // The largest counts that fit are fine.
    let p = TileScheduler::new([1, 1]).params(i32::MAX as u64, 1, 1, 1, 1).unwrap();
    assert_eq!(p.tiles_m, i32::MAX as u32);
    assert_eq!(p.device_args(), [i32::MAX, 1, 1, 1, 0]);

    // Grids: nothing fits, or too many clusters along y.
    let p = TileScheduler::new([4, 2]).params(4096, 4096, 1, 128, 128).unwrap();
    assert_eq!(
        TileScheduler::new([4, 2]).grid(&p, 4, None),
        Err(SchedulerError::NoClusterFits {
            cluster_ctas: 8,
            sm_count: 4
        })
    );
    assert!(matches!(
        TileScheduler::new([4, 2]).grid(&p, 0, Some(3)),
        Err(SchedulerError::NoClusterFits { .. })
    ));
    let s = scheduler(RasterOrderOption::AlongN, 0, [1, 1]);
    let p = s.params(1 << 20, 1 << 20, 1, 1, 1).unwrap();
    assert!(matches!(
        s.grid(&p, 100_000, None),
        Err(SchedulerError::Overflow { what: "grid y", .. })
    ));
    assert_eq!(s.grid(&p, 65_535, None).unwrap(), (1, 65_535, 1));
}

#[test]
fn hand_made_params_never_panic() {
    let s = TileScheduler::default();
    let good = s.params(1000, 1000, 2, 128, 128).unwrap();
    let bad = [
        SchedulerParams {
            cluster: [0, 1],
            ..good
        },
        SchedulerParams {
            swizzle_log2: 40,
            ..good
        },
        SchedulerParams { tiles_m: 0, ..good },
        SchedulerParams {
            total_work: u64::MAX,
            ..good
        },
        SchedulerParams { total_work: 0, ..good },
        SchedulerParams {
            tiles_m: u32::MAX,
            tiles_n: u32::MAX,
            batches: u32::MAX,
            total_work: u64::MAX,
            ..good
        },
    ];
    for p in bad {
        for w in [0, 1, 63, 64, 1 << 40, u64::MAX] {
            let _ = s.tile(&p, w, (0, 0));
            let _ = s.tile(&p, w, (u32::MAX, u32::MAX));
        }
        let _ = s.grid(&p, 132, Some(u32::MAX));
        let _ = s.first_work(&p, (u32::MAX, u32::MAX, u32::MAX), (u32::MAX, u32::MAX, u32::MAX));
        let _ = s.work_stride(&p, (u32::MAX, u32::MAX, u32::MAX));
        let _ = p.device_args();
    }
    assert_eq!(
        s.grid(&bad[0], 132, None),
        Err(SchedulerError::InvalidParams(
            "zero cluster or swizzle past the maximum"
        ))
    );
    assert_eq!(
        s.grid(&bad[4], 132, None),
        Err(SchedulerError::InvalidParams("no work"))
    );
    assert_eq!(s.tile(&bad[3], 1 << 40, (0, 0)), None, "past the batches");
}

fn cluster_strategy() -> impl Strategy<Value = [u32; 2]> {
    (0u32..=4, 0u32..=4).prop_filter_map("at most 16 CTAs", |(a, b)| (a + b <= 4).then_some([1 << a, 1 << b]))
}

fn raster_strategy() -> impl Strategy<Value = RasterOrderOption> {
    prop_oneof![
        Just(RasterOrderOption::AlongM),
        Just(RasterOrderOption::AlongN),
        Just(RasterOrderOption::Heuristic)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_schedules_cover_every_tile_once(
        m in 1u64..6000,
        n in 1u64..6000,
        l in 1u64..4,
        tile_m in prop::sample::select(vec![16u32, 64, 128, 192, 256]),
        tile_n in prop::sample::select(vec![16u32, 64, 128, 192, 256]),
        cluster in cluster_strategy(),
        raster in raster_strategy(),
        swizzle in 0u32..6,
        sm_count in 1u32..200,
        max_active in prop::option::of(0u32..40),
    ) {
        let s = scheduler(raster, swizzle, cluster);
        let p = s.params(m, n, l, tile_m, tile_n).unwrap();
        prop_assert!(p.swizzle_log2 <= swizzle.min(3));
        prop_assert!(p.total_work * u64::from(cluster[0] * cluster[1]) >= p.output_tiles());
        match s.grid(&p, sm_count, max_active) {
            Ok(grid) => check_schedule(&s, &p, grid, sm_count),
            Err(e) => {
                let cluster_ctas = cluster[0] * cluster[1];
                prop_assert_eq!(e, SchedulerError::NoClusterFits { cluster_ctas, sm_count })
            }
        }
    }
}

/// The device code of one configuration: a 2x1 cluster, heuristic raster, swizzle up to 8.
fn snapshot_scheduler() -> TileScheduler {
    scheduler(RasterOrderOption::Heuristic, 3, [2, 1])
}

#[test]
fn device_code_snapshot() {
    let code = snapshot_scheduler().device_code("gemm");
    assert_eq!(code, snapshot_scheduler().device_code("gemm"), "deterministic");
    assert!(!code.contains("#include") && !code.contains("int32_t") && !code.contains("uint64_t"));
    assert!(code.lines().all(|l| l.len() <= 120), "lines of at most 120 columns");
    insta::assert_snapshot!(code);
}

#[test]
fn first_tiles_snapshot() {
    // A small problem of 6 x 8 tiles (1-CTA clusters), then 2x1 clusters.
    let mut out = String::new();
    for (title, s) in [
        ("along M, no swizzle", scheduler(RasterOrderOption::AlongM, 0, [1, 1])),
        ("along N, no swizzle", scheduler(RasterOrderOption::AlongN, 0, [1, 1])),
        (
            "along N, swizzle 2 (bands of 4)",
            scheduler(RasterOrderOption::AlongN, 2, [1, 1]),
        ),
        (
            "along M, swizzle 2 (bands of 4)",
            scheduler(RasterOrderOption::AlongM, 2, [1, 1]),
        ),
        (
            "along N, swizzle 1, 2x1 clusters",
            scheduler(RasterOrderOption::AlongN, 1, [2, 1]),
        ),
    ] {
        let p = s.params(6 * 128, 8 * 128, 1, 128, 128).unwrap();
        let _ = writeln!(out, "{title}: total_work {}", p.total_work);
        let ranks: Vec<(u32, u32)> = (0..s.cluster[0]).map(|rm| (rm, 0)).collect();
        // The first 16 tiles: 16 work ids, or 8 of two CTAs each (in brackets).
        let mut line = String::new();
        for w in 0..16 / ranks.len() as u64 {
            let tiles: Vec<String> = ranks
                .iter()
                .map(|&rank| match s.tile(&p, w, rank) {
                    Some((m, n, _)) => format!("({m},{n})"),
                    None => "-".into(),
                })
                .collect();
            match tiles.len() {
                1 => line.push_str(&format!(" {}", tiles[0])),
                _ => line.push_str(&format!(" [{}]", tiles.join(" "))),
            }
        }
        let _ = writeln!(out, " {}", line.trim());
    }
    insta::assert_snapshot!(out);
}

/// A kernel that runs the persistent loop and records which CTA did each tile; with
/// `__CUDA_ARCH__ >= 900` it also checks the CTA's rank against the hardware's cluster ids.
fn probe_kernel(s: &TileScheduler) -> String {
    let mut src = s.device_code("probe");
    src.push_str(
        r#"
extern "C" __global__ void sched_probe(int* owner, int* count, int* bad_rank, int tiles_m, int tiles_n,
                                       int batches, int along_n, int log_swizzle) {
  if (threadIdx.x != 0) return;
  const probe_sched sched(tiles_m, tiles_n, batches, along_n, log_swizzle);
  const int cta = (int)(blockIdx.x + blockIdx.y * gridDim.x);
#if __CUDA_ARCH__ >= 900
  unsigned cx, cy;
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(cx));
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(cy));
  if ((int)cx != sched.rank_m() || (int)cy != sched.rank_n()) atomicAdd(bad_rank, 1);
#endif
  for (unsigned long long work = sched.first_work(); work < sched.total_work; work += sched.stride()) {
    if (!sched.cluster_valid(work)) continue;
    int tile_m, tile_n, batch;
    if (!sched.tile(work, tile_m, tile_n, batch)) continue;
    const long long at = ((long long)batch * tiles_m + tile_m) * tiles_n + tile_n;
    owner[at] = cta;
    atomicAdd(&count[at], 1);
  }
}
"#,
    );
    src
}

#[test]
fn device_code_compiles_with_nvrtc_for_sm90a() {
    if toolkit_for_test().is_none() {
        return;
    }
    for cluster in [[1, 1], [2, 1], [2, 4]] {
        let s = scheduler(RasterOrderOption::Heuristic, 3, cluster);
        let c = compile(&probe_kernel(&s), "sched_probe.cu", &CompileOptions::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{cluster:?}: {e}"));
        // From the ptxas log, or from `cuobjdump -res-usage` where NVRTC 13.0 returns an
        // empty log (once the driver is initialized in the process): always present.
        let r = c
            .resources
            .kernel("sched_probe")
            .unwrap_or_else(|| panic!("no report in\n{}", c.log));
        assert!(!r.spills() && r.stack_frame_bytes == 0, "{r:?}");
    }
}

/// The owner of every tile by the Rust model: `blockIdx.x + blockIdx.y * gridDim.x`.
fn model_owners(s: &TileScheduler, p: &SchedulerParams, grid: Grid) -> Vec<i32> {
    let mut owner = vec![-1; p.output_tiles() as usize];
    for v in simulate(s, p, grid) {
        if let Some((m, n, l)) = v.tile {
            owner[((l * p.tiles_m + m) * p.tiles_n + n) as usize] = (v.block.0 + v.block.1 * grid.0) as i32;
        }
    }
    owner
}

#[test]
fn device_code_matches_the_model_on_the_gpu() {
    if toolkit_for_test().is_none() {
        return;
    }
    let Some(gpu) = gpu_for_test() else { return };
    if gpu.compute_capability().0 < 9 {
        eprintln!("skipping: clusters need sm_90");
        return;
    }
    let arch = gpu.arch().expect("a supported GPU architecture");
    let stream = gpu.stream();
    let mut runs = 0;
    for cluster in [[1, 1], [2, 1], [1, 2], [2, 2], [4, 2]] {
        let s0 = scheduler(RasterOrderOption::Heuristic, 0, cluster);
        let compiled = compile(&probe_kernel(&s0), "sched_probe.cu", &CompileOptions::new(arch)).unwrap();
        let f = gpu.load(&compiled).unwrap().function("sched_probe").unwrap();
        for (m, n, l) in [
            (1u64, 1u64, 1u64),
            (1000, 3000, 2),
            (3000, 1000, 1),
            (129, 4100, 3),
            (8192, 8192, 1),
        ] {
            for raster in RASTERS {
                for swizzle in [0, 1, 3] {
                    let s = scheduler(raster, swizzle, cluster);
                    let p = s.params(m, n, l, 128, 128).unwrap();
                    for (sm_count, max_active) in [(gpu.sm_count(), None), (16, None), (gpu.sm_count(), Some(3))] {
                        let grid = s.grid(&p, sm_count, max_active).unwrap();
                        let tiles = p.output_tiles() as usize;
                        let owner = stream.clone_htod(&vec![-1i32; tiles]).unwrap();
                        let count = stream.alloc_zeros::<i32>(tiles).unwrap();
                        let bad_rank = stream.alloc_zeros::<i32>(1).unwrap();
                        let [tm, tn, tl, along_n, log] = p.device_args();
                        let args = KernelArgs::new()
                            .slice(&owner)
                            .slice(&count)
                            .slice(&bad_rank)
                            .i32(tm)
                            .i32(tn)
                            .i32(tl)
                            .i32(along_n)
                            .i32(log);
                        let cfg = LaunchConfig::new(grid, 32)
                            .with_cluster(p.cluster_dim())
                            .with_checked(true);
                        // SAFETY: the arguments match sched_probe's; the buffers hold one int per tile.
                        unsafe { f.launch(&cfg, &args) }.unwrap_or_else(|e| panic!("{p:?} {grid:?}: {e}"));
                        let ctx = format!("{p:?} grid {grid:?}");
                        assert_eq!(
                            stream.clone_dtoh(&bad_rank).unwrap(),
                            [0],
                            "{ctx}: ranks vs cluster_ctaid"
                        );
                        assert!(stream.clone_dtoh(&count).unwrap().iter().all(|&c| c == 1), "{ctx}");
                        assert_eq!(stream.clone_dtoh(&owner).unwrap(), model_owners(&s, &p, grid), "{ctx}");
                        runs += 1;
                    }
                }
            }
        }
    }
    eprintln!("{runs} scheduler launches matched the model");
}

/// A C++ compiler on this machine, if any (`CXX`, `c++`, `g++`, `clang++`).
fn host_cxx() -> Option<String> {
    let candidates = std::env::var("CXX")
        .into_iter()
        .chain(["c++", "g++", "clang++"].map(String::from));
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Compiles the device code for the host: CUDA's qualifiers become plain `inline` and
/// `blockIdx`/`gridDim` become globals the harness sets.
fn build_host_harness(cxx: &str, s: &TileScheduler, dir: &Path) -> std::path::PathBuf {
    let src = format!(
        r#"#include <cstdio>
#include <cstdlib>
struct rc_dim3 {{ unsigned x, y, z; }};
static rc_dim3 blockIdx, gridDim;
#define __device__
#define __forceinline__ inline
{code}
// argv: tiles_m tiles_n batches along_n log_swizzle grid_x grid_y grid_z
int main(int argc, char** argv) {{
  if (argc != 9) return 2;
  int a[8];
  for (int i = 0; i < 8; ++i) a[i] = atoi(argv[i + 1]);
  const host_sched sched(a[0], a[1], a[2], a[3], a[4]);
  gridDim = rc_dim3{{(unsigned)a[5], (unsigned)a[6], (unsigned)a[7]}};
  printf("total %llu stride %llu\n", sched.total_work, sched.stride());
  for (unsigned z = 0; z < gridDim.z; ++z)
    for (unsigned y = 0; y < gridDim.y; ++y)
      for (unsigned x = 0; x < gridDim.x; ++x) {{
        blockIdx = rc_dim3{{x, y, z}};
        for (unsigned long long w = sched.first_work(); w < sched.total_work; w += sched.stride()) {{
          int m, n, l;
          if (sched.tile(w, m, n, l))
            printf("%u %u %u %llu %d %d %d %d\n", x, y, z, w, m, n, l, (int)sched.cluster_valid(w));
          else
            printf("%u %u %u %llu - %d\n", x, y, z, w, (int)sched.cluster_valid(w));
        }}
      }}
  return 0;
}}
"#,
        code = s.device_code("host")
    );
    let [cm, cn] = s.cluster;
    let cpp = dir.join(format!("sched_{cm}x{cn}.cpp"));
    let exe = dir.join(format!("sched_{cm}x{cn}"));
    std::fs::write(&cpp, src).unwrap();
    let out = Command::new(cxx)
        .args(["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&cpp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cxx} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What the harness prints, by the Rust model.
fn model_trace(s: &TileScheduler, p: &SchedulerParams, grid: Grid) -> String {
    let mut out = format!("total {} stride {}\n", p.total_work, s.work_stride(p, grid));
    for v in simulate(s, p, grid) {
        let (x, y, z) = v.block;
        let cluster_valid = i32::from(s.tile(p, v.work, (0, 0)).is_some());
        match v.tile {
            Some((m, n, l)) => writeln!(out, "{x} {y} {z} {} {m} {n} {l} {cluster_valid}", v.work),
            None => writeln!(out, "{x} {y} {z} {} - {cluster_valid}", v.work),
        }
        .unwrap();
    }
    out
}

#[test]
fn device_code_matches_the_model_on_the_host_compiler() {
    let Some(cxx) = host_cxx() else {
        eprintln!("skipping: no host C++ compiler");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut runs = 0;
    for cluster in [[1, 1], [2, 1], [1, 2], [2, 2], [4, 2], [1, 8]] {
        let exe = build_host_harness(&cxx, &TileScheduler::new(cluster), dir.path());
        for (m, n, l) in [
            (1u64, 1u64, 1u64),
            (300, 300, 1),
            (1000, 3000, 2),
            (2050, 700, 3),
            (129, 1100, 1),
        ] {
            for raster in RASTERS {
                for swizzle in [0, 1, 2, 3] {
                    let s = scheduler(raster, swizzle, cluster);
                    let p = s.params(m, n, l, 128, 128).unwrap();
                    let [cm, cn] = cluster;
                    for grid in [
                        s.grid(&p, 16, None).unwrap(),
                        s.grid(&p, 132, Some(5)).unwrap(),
                        (cm * 2, cn * 3, 2),
                    ] {
                        let [a0, a1, a2, a3, a4] = p.device_args();
                        let out = Command::new(&exe)
                            .args([a0, a1, a2, a3, a4].map(|a| a.to_string()))
                            .args([grid.0, grid.1, grid.2].map(|g| g.to_string()))
                            .output()
                            .unwrap();
                        assert!(out.status.success());
                        let got = String::from_utf8(out.stdout).unwrap();
                        let want = model_trace(&s, &p, grid);
                        assert!(
                            got == want,
                            "{p:?} grid {grid:?}:\n--- device\n{got}\n--- model\n{want}"
                        );
                        runs += 1;
                    }
                }
            }
        }
    }
    assert_eq!(runs, 6 * 5 * 3 * 4 * 3);
}
