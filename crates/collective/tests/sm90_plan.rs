//! The SM90 TMA + wgmma mainloop plan: hand-derived goldens, errors, and a table.

use rcute_atom::tma::TmaSwizzle;
use rcute_atom::{Element, GmmaSwizzle, Major};
use rcute_collective::{
    Sm90EpilogueConfig, Sm90EpilogueError, Sm90EpiloguePlan, Sm90Mainloop, Sm90MainloopConfig, Sm90PlanError,
    Sm90Schedule, StorageOrder, SM90_SMEM_CAPACITY,
};
use rcute_layout::tuple;
use std::fmt::Write;

use Sm90Schedule::{Cooperative as Coop, PingPong as Pp, WarpSpecialized as Ws};

fn epi(tile: [i64; 3], s: Sm90Schedule, c: Option<Element>, d: Element) -> Sm90EpiloguePlan {
    Sm90EpiloguePlan::new(&Sm90EpilogueConfig::new(tile, s, c, d, StorageOrder::RowMajor)).unwrap()
}

fn ml(cfg: &Sm90MainloopConfig, e: &Sm90EpiloguePlan) -> Sm90Mainloop {
    Sm90Mainloop::new(cfg, e).unwrap_or_else(|err| panic!("{cfg:?}: {err}"))
}

#[test]
fn golden_128x256x64_bf16_cooperative() {
    // Epilogue: no C, bf16 D, cooperative auto tile 128x32, StagesD = 2:
    //   D buffers 128 * 32 * 2 stages * 2 B = 16384 B, no C barriers.
    // Mainloop: A stage 128 * 64 * 2 = 16384 B, B stage 256 * 64 * 2 = 32768 B, 49152 B per
    // stage plus 16 B of mbarriers. Separate storage (cooperative):
    //   total(s) = 49152 s + 16384 + 16 s + 128 (reserve), rounded to 128
    //   total(4) = 196608 + 16384 + 64 + 128 = 213184 -> 213248 <= 232448
    //   total(5) = 245760 + ...                          > 232448
    //   (= (232448 - 16384 - 128) / (49152 + 16) = 4.39 -> 4)
    let tile = [128, 256, 64];
    let e = epi(tile, Coop, None, Element::BF16);
    assert_eq!((e.epi_tile, e.smem_bytes), ([128, 32], 16384));
    let p = ml(&Sm90MainloopConfig::bf16_tn(tile, Coop), &e);
    assert_eq!((p.consumer_warpgroups, p.threads, p.wg_tile), (2, 384, [64, 256]));
    assert_eq!(p.mma_atom.name, "SM90_64x256x16_F32BF16BF16_SS<K,K>");
    assert_eq!((p.m_atoms_per_wg, p.n_atoms, p.k_atoms), (1, 1, 4));
    assert_eq!((p.stage_bytes, p.stages, p.barrier_bytes), (49152, 4, 64));
    assert_eq!(p.config.stages, Some(4));
    assert_eq!(
        (p.smem_offset_b, p.smem_offset_epilogue, p.smem_offset_barriers),
        (65536, 196608, 212992)
    );
    assert_eq!(p.smem_bytes, 213248);
    assert!(!p.storage_union);
    // 64 bf16 = 128 B of K per row: the 128B-swizzle K-major atom; TMA boxes of 64 x MN.
    assert_eq!(p.smem_atom_a.mode, GmmaSwizzle::B128);
    assert_eq!(p.smem_atom_b.to_string(), "Sw<3,3,3> o (8,64):(64,1)");
    assert_eq!(
        p.smem_layout_a.to_string(),
        "Sw<3,3,3> o 0 o ((8,16),(64,1),(1,4)):((64,512),(1,0),(0,8192))"
    );
    assert_eq!(
        p.smem_layout_b.to_string(),
        "Sw<3,3,3> o 0 o ((8,32),(64,1),(1,4)):((64,512),(1,0),(0,16384))"
    );
    assert_eq!((p.tma_box_a, p.tma_boxes_per_stage_a), ([64, 128], 1));
    assert_eq!((p.tma_box_b, p.tma_boxes_per_stage_b), ([64, 256], 1));
    assert_eq!((p.tma_swizzle_a, p.tma_swizzle_b), (TmaSwizzle::B128, TmaSwizzle::B128));
    assert_eq!(p.tx_bytes, 49152);
    assert!(!p.multicast_a && !p.multicast_b);
    assert_eq!(p.tma_load_a(), "SM90_TMA_LOAD");

    // With a bf16 C the epilogue reuses C's buffers: 128*32*4 stages*2 B = 32768 B + 64 B of
    // barriers = 32832 -> 32896. total(4) = 196608 + 32768 + 64 + 64 + 128 = 229632: still 4.
    let e = epi(tile, Coop, Some(Element::BF16), Element::BF16);
    assert_eq!(e.smem_bytes, 32896);
    let p = ml(&Sm90MainloopConfig::bf16_tn(tile, Coop), &e);
    assert_eq!((p.stages, p.smem_bytes), (4, 229632));
}

#[test]
fn golden_warp_specialized_union() {
    // Warp-specialized: the epilogue (64x32 fp16... here bf16, reusing C: 16384 B + 64 B of
    // barriers) is a union with the stages, so there is no carve-out:
    //   total(s) = max(32768 s, 16384) + 16 s + 64 + 128
    //   total(7) = 229376 + 112 + 192 = 229680 -> 229760 <= 232448; total(8) > capacity.
    // (CUTLASS's carve-out rule would give (232448 - 16512) / 32784 = 6.)
    let tile = [128, 128, 64];
    let e = epi(tile, Ws, Some(Element::BF16), Element::BF16);
    let p = ml(&Sm90MainloopConfig::bf16_tn(tile, Ws), &e);
    assert_eq!(
        (p.consumer_warpgroups, p.threads, p.wg_tile, p.m_atoms_per_wg),
        (1, 256, [128, 128], 2)
    );
    assert_eq!((p.stage_bytes, p.stages, p.smem_bytes), (32768, 7, 229760));
    assert!(p.storage_union);
    assert_eq!(p.smem_offset_epilogue, 0);
    assert_eq!(p.mma_atom.name, "SM90_64x128x16_F32BF16BF16_SS<K,K>");
}

#[test]
fn golden_pingpong() {
    // Ping-pong, no C: epilogue 64x32 bf16 x 2 stages = 8192 B, carved out:
    //   (232448 - 8192 - 128) / (32768 + 16) = 6.84 -> 6 stages;
    //   total(6) = 196608 + 8192 + 96 + 128 = 205024 -> 205056.
    let tile = [128, 128, 64];
    let e = epi(tile, Pp, None, Element::BF16);
    let p = ml(&Sm90MainloopConfig::bf16_tn(tile, Pp), &e);
    assert_eq!(
        (p.consumer_warpgroups, p.threads, p.wg_tile, p.m_atoms_per_wg),
        (2, 384, [128, 128], 2)
    );
    assert_eq!((p.stages, p.smem_bytes), (6, 205056));
}

#[test]
fn mn_major_operands_and_boxes() {
    let tile = [128, 128, 64];
    let e = epi(tile, Ws, None, Element::BF16);
    let mut c = Sm90MainloopConfig::bf16_tn(tile, Ws);
    c.a_major = Major::MN;
    c.stages = Some(4);
    let p = ml(&c, &e);
    assert_eq!(p.mma_atom.name, "SM90_64x128x16_F32BF16BF16_SS<MN,K>");
    assert_eq!(p.smem_atom_a.to_string(), "Sw<3,3,3> o (64,8):(1,64)");
    // 64 elements of M per 128B swizzle span: two 64 x 64 boxes per stage.
    assert_eq!((p.tma_box_a, p.tma_boxes_per_stage_a), ([64, 64], 2));
    // tile_to_shape(atom, (BM,BK,PIPE), Step<_2,_1,_3>): K blocks before the M block.
    let inner = p.smem_layout_a.nonswizzle_portion();
    let at = |m: i64, k: i64, s: i64| inner.crd2idx(&tuple!(m, k, s)).unwrap().as_static().unwrap();
    assert_eq!((at(0, 8, 0), at(64, 0, 0), at(0, 0, 1)), (512, 8 * 512, 128 * 64));
    // K-major BK = 128: two 64-wide boxes per stage.
    let mut c = Sm90MainloopConfig::bf16_tn([128, 128, 128], Ws);
    c.stages = Some(3);
    let p = ml(&c, &epi([128, 128, 128], Ws, None, Element::BF16));
    assert_eq!((p.tma_box_a, p.tma_boxes_per_stage_a, p.k_atoms), ([64, 128], 2, 8));
}

#[test]
fn fp8_int8_and_wide_n() {
    let tile = [128, 128, 128];
    let mut c = Sm90MainloopConfig::bf16_tn(tile, Pp);
    (c.a, c.b) = (Element::E4M3, Element::E4M3);
    let p = ml(&c, &epi(tile, Pp, None, Element::E4M3));
    assert_eq!(p.mma_atom.name, "SM90_64x128x32_F32E4M3E4M3_SS<K,K>");
    assert_eq!((p.k_atoms, p.stage_bytes), (4, 32768));
    assert_eq!((p.tma_box_a, p.smem_atom_a.mode), ([128, 128], GmmaSwizzle::B128));

    let mut c = Sm90MainloopConfig::bf16_tn(tile, Coop);
    (c.a, c.b, c.acc) = (Element::S8, Element::S8, Element::S32);
    let p = ml(&c, &epi([128, 128, 128], Coop, None, Element::BF16));
    assert_eq!(p.mma_atom.name, "SM90_64x128x32_S32S8S8_SS<K,K>");

    // BN = 512 takes two 64x256 atoms per warpgroup and two 256-row boxes of B.
    let tile = [128, 512, 64];
    let p = ml(
        &Sm90MainloopConfig::bf16_tn(tile, Ws),
        &epi(tile, Ws, None, Element::BF16),
    );
    assert_eq!((p.mma_atom.shape_mnk, p.n_atoms), ([64, 256, 16], 2));
    assert_eq!((p.tma_box_b, p.tma_boxes_per_stage_b), ([64, 256], 2));
    assert_eq!(p.stage_bytes, 81920);
    assert_eq!(p.stages, 2);
}

#[test]
fn clusters_multicast() {
    let tile = [128, 128, 64];
    let e = epi(tile, Coop, None, Element::BF16);
    let mut c = Sm90MainloopConfig::bf16_tn(tile, Coop);
    c.cluster = [2, 1];
    let p = ml(&c, &e);
    assert!(!p.multicast_a && p.multicast_b);
    assert_eq!(
        (p.tma_load_a(), p.tma_load_b()),
        ("SM90_TMA_LOAD", "SM90_TMA_LOAD_MULTICAST")
    );
    c.cluster = [1, 2];
    let p = ml(&c, &e);
    assert!(p.multicast_a && !p.multicast_b);
    c.cluster = [4, 2];
    assert_eq!(ml(&c, &e).multicast_ctas(), (2, 4));
}

#[test]
fn errors() {
    let tile = [128, 128, 64];
    let e = epi(tile, Ws, None, Element::BF16);
    let base = Sm90MainloopConfig::bf16_tn(tile, Ws);
    let run = |c: &Sm90MainloopConfig, e: &Sm90EpiloguePlan| Sm90Mainloop::new(c, e).expect_err("must be refused");

    let mut c = base.clone();
    c.a = Element::F32;
    assert!(matches!(run(&c, &e), Sm90PlanError::Types { .. }));
    c.a = Element::F16;
    assert!(matches!(run(&c, &e), Sm90PlanError::Types { .. }));

    let mut c = base.clone();
    (c.a, c.b, c.a_major) = (Element::E4M3, Element::E5M2, Major::MN);
    assert!(matches!(
        run(&c, &e),
        Sm90PlanError::Major {
            elem: Element::E4M3,
            ..
        }
    ));

    for (t, s, needle) in [
        ([96, 128, 64], Ws, "multiple of the 64-row"),
        ([64, 128, 64], Coop, "multiple of 128"),
        ([128, 128, 24], Ws, "multiple of the wgmma K=16"),
        ([128, 12, 64], Ws, "not a multiple of any wgmma N"),
        ([0, 128, 64], Ws, "positive"),
    ] {
        let err = run(&Sm90MainloopConfig::bf16_tn(t, s), &e);
        assert!(
            matches!(&err, Sm90PlanError::Tile { reason, .. } if reason.contains(needle)),
            "{err}"
        );
    }

    let mut c = base.clone();
    c.cluster = [3, 1];
    assert!(matches!(run(&c, &e), Sm90PlanError::Cluster { .. }));
    c.cluster = [4, 4];
    assert!(matches!(run(&c, &e), Sm90PlanError::Cluster { reason, .. } if reason.contains("at most 8")));

    let mut c = base.clone();
    c.stages = Some(1);
    assert_eq!(run(&c, &e), Sm90PlanError::Stages { stages: 1 });
    c.stages = Some(8); // 8 * 32768 > 227 KiB
    assert!(matches!(
        run(&c, &e),
        Sm90PlanError::SmemCapacity {
            stages: 8,
            stage_bytes: 32768,
            ..
        }
    ));
    let mut c = base.clone();
    c.smem_capacity = 60_000;
    assert!(matches!(run(&c, &e), Sm90PlanError::SmemCapacity { stages: 2, .. }));
    assert_eq!(SM90_SMEM_CAPACITY, 227 * 1024);

    let other = epi([128, 256, 64], Ws, None, Element::BF16);
    assert!(matches!(run(&base, &other), Sm90PlanError::EpilogueMismatch(_)));
    let coop = epi(tile, Coop, None, Element::BF16);
    assert!(matches!(run(&base, &coop), Sm90PlanError::EpilogueMismatch(_)));

    // s8 with BN = 40: the widest integer wgmma N dividing 40 is 8, so a thread holds 4
    // accumulators per atom, and a 64x40 subtile's FragmentSize of 20 does not divide them.
    let t = [64, 40, 64];
    let mut ec = Sm90EpilogueConfig::new(t, Ws, None, Element::BF16, StorageOrder::RowMajor);
    ec.epi_tile = Some([64, 40]);
    let e8 = Sm90EpiloguePlan::new(&ec).unwrap();
    let mut c = Sm90MainloopConfig::bf16_tn(t, Ws);
    (c.a, c.b, c.acc) = (Element::S8, Element::S8, Element::S32);
    assert_eq!(
        run(&c, &e8),
        Sm90PlanError::Epilogue(Sm90EpilogueError::Fragment {
            fragment: 20,
            acc_values: 4
        })
    );
}

#[test]
fn plan_table() {
    use Element::*;
    struct Row {
        tile: [i64; 3],
        sched: Sm90Schedule,
        ab: Element,
        majors: (Major, Major),
        cluster: [i64; 2],
        c: Option<Element>,
        d: Element,
    }
    let k = (Major::K, Major::K);
    let r = |tile, sched, ab, majors, cluster, c, d| Row {
        tile,
        sched,
        ab,
        majors,
        cluster,
        c,
        d,
    };
    let rows = vec![
        r([128, 256, 64], Coop, BF16, k, [1, 1], None, BF16),
        r([128, 256, 64], Coop, BF16, k, [2, 1], Some(BF16), BF16),
        r([128, 128, 64], Ws, BF16, k, [1, 1], Some(BF16), BF16),
        r([128, 128, 64], Pp, F16, k, [1, 2], None, F16),
        r([128, 128, 64], Ws, F16, (Major::MN, Major::MN), [1, 1], Some(F32), F32),
        r(
            [256, 128, 64],
            Coop,
            BF16,
            (Major::K, Major::MN),
            [2, 2],
            Some(F32),
            BF16,
        ),
        r([64, 128, 64], Ws, BF16, k, [1, 1], None, BF16),
        r([64, 256, 64], Pp, BF16, k, [1, 1], Some(BF16), BF16),
        r([128, 128, 128], Pp, E4M3, k, [1, 1], None, E4M3),
        r([128, 256, 128], Coop, E4M3, k, [2, 1], Some(BF16), BF16),
        r([128, 128, 128], Coop, S8, k, [1, 1], None, BF16),
        r([256, 256, 64], Coop, BF16, k, [1, 1], Some(F32), F32),
        r([128, 64, 32], Ws, BF16, k, [1, 1], None, BF16),
        r([128, 192, 64], Coop, F16, k, [4, 1], None, F16),
    ];
    let mut out = String::new();
    writeln!(out, "tile         sched    ab   maj   cl  C/D       | thr wg_tile atom          mnk    atomA     atomB     stage  st boxA(n)     boxB(n)     tx     union epi    smem   mc").unwrap();
    let swz = |m: GmmaSwizzle| match m {
        GmmaSwizzle::Interleave => "INTER",
        GmmaSwizzle::B32 => "SW32",
        GmmaSwizzle::B64 => "SW64",
        GmmaSwizzle::B128 => "SW128",
    };
    for row in &rows {
        let t = row.tile;
        let mut c = Sm90MainloopConfig::bf16_tn(t, row.sched);
        c.a = row.ab;
        c.b = row.ab;
        c.acc = if row.ab == S8 { S32 } else { F32 };
        (c.a_major, c.b_major) = row.majors;
        c.cluster = row.cluster;
        write!(
            out,
            "{:<12} {:<8} {:<4} {:<2}/{:<2} {}x{} {:<4}/{:<4} | ",
            format!("{}x{}x{}", t[0], t[1], t[2]),
            row.sched.tag(),
            row.ab.to_string(),
            row.majors.0.tag(),
            row.majors.1.tag(),
            row.cluster[0],
            row.cluster[1],
            row.c.map_or("-".into(), |e| e.to_string()),
            row.d.to_string(),
        )
        .unwrap();
        let e = match Sm90EpiloguePlan::new(&Sm90EpilogueConfig::new(
            t,
            row.sched,
            row.c,
            row.d,
            StorageOrder::RowMajor,
        )) {
            Ok(e) => e,
            Err(err) => {
                writeln!(out, "epilogue error: {err}").unwrap();
                continue;
            }
        };
        match Sm90Mainloop::new(&c, &e) {
            Ok(p) => writeln!(
                out,
                "{:<3} {:<7} {:<13} {:<6} {:<9} {:<9} {:<6} {:<2} {:<12} {:<12} {:<6} {:<5} {:<6} {:<6} {}{}",
                p.threads,
                format!("{}x{}", p.wg_tile[0], p.wg_tile[1]),
                format!("64x{}x{}", p.mma_atom.shape_mnk[1], p.mma_atom.shape_mnk[2]),
                format!("{}/{}/{}", p.m_atoms_per_wg, p.n_atoms, p.k_atoms),
                format!("{}-{}", p.smem_atom_a.major.tag(), swz(p.smem_atom_a.mode)),
                format!("{}-{}", p.smem_atom_b.major.tag(), swz(p.smem_atom_b.mode)),
                p.stage_bytes,
                p.stages,
                format!("{}x{}({})", p.tma_box_a[0], p.tma_box_a[1], p.tma_boxes_per_stage_a),
                format!("{}x{}({})", p.tma_box_b[0], p.tma_box_b[1], p.tma_boxes_per_stage_b),
                p.tx_bytes,
                p.storage_union,
                e.smem_bytes,
                p.smem_bytes,
                if p.multicast_a { "A" } else { "-" },
                if p.multicast_b { "B" } else { "-" },
            )
            .unwrap(),
            Err(err) => writeln!(out, "error: {err}").unwrap(),
        }
    }
    insta::assert_snapshot!(out);
}
