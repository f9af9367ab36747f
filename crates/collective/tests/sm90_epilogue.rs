//! The SM90 TMA warp-specialized epilogue plan: the builder goldens of seed 003, every
//! error variant, a property test of the builder's own choices, and a decision table.

use proptest::prelude::*;
use rcute_atom::tma::TmaSwizzle;
use rcute_atom::{Element, GmmaSwizzle, Major};
use rcute_collective::{
    sm90_auto_epi_tile, EpilogueCopyAtom, EpilogueStorage, PipelineState, Sm90EpilogueConfig, Sm90EpilogueError,
    Sm90EpiloguePlan, Sm90Schedule, StorageOrder,
};
use rcute_layout::tuple;
use std::fmt::Write;

use Sm90Schedule::{Cooperative as Coop, PingPong as Pp, WarpSpecialized as Ws};
use StorageOrder::{ColMajor as Col, RowMajor as Row};

fn cfg(tile: [i64; 3], s: Sm90Schedule, c: Option<Element>, d: Element, o: StorageOrder) -> Sm90EpilogueConfig {
    Sm90EpilogueConfig::new(tile, s, c, d, o)
}

fn plan(c: &Sm90EpilogueConfig) -> Sm90EpiloguePlan {
    Sm90EpiloguePlan::new(c).unwrap_or_else(|e| panic!("{c:?}: {e}"))
}

fn err(c: &Sm90EpilogueConfig) -> Sm90EpilogueError {
    Sm90EpiloguePlan::new(c).expect_err("configuration must be refused")
}

#[test]
fn pipeline_state_golden() {
    // Seed 003, section C: 4 stages, advance 3, 2, 5 -> (3,0), (1,1), (2,0), count 10.
    let mut s = PipelineState::new(4);
    let mut seen = vec![];
    for n in [3, 2, 5] {
        s.advance(n);
        seen.push((s.index, s.phase));
    }
    assert_eq!(seen, [(3, 0), (1, 1), (2, 0)]);
    assert_eq!(s.count, 10);
    assert_eq!(
        s.next(),
        PipelineState {
            index: 3,
            phase: 0,
            count: 11,
            stages: 4
        }
    );
    let mut p = PipelineState::producer_start(2);
    p.advance(2);
    assert_eq!((p.index, p.phase), (0, 0));
}

#[test]
fn golden_policy_128x128_fp16_ws() {
    // Seed 003 golden: 128x128 tile, 64x32 epilogue tile, fp16, warp-specialized.
    let mut c = cfg([128, 128, 64], Ws, Some(Element::F16), Element::F16, Row);
    c.epi_tile = Some([64, 32]);
    let p = plan(&c);
    assert_eq!((p.epi_tiles, p.stages_d, p.stages_c, p.fragment_size), (8, 2, 4, 16));
    assert!(p.reuse_smem_c);
    assert!(!p.delay_tma_store);
    // The automatic tile is the same one.
    assert_eq!(sm90_auto_epi_tile([128, 128, 64], Ws, Element::F16), [64, 32]);
    let auto = plan(&cfg([128, 128, 64], Ws, Some(Element::F16), Element::F16, Row));
    assert_eq!(auto, p_with_epi_tile_none(p.clone()));

    // Derived types. fp16 row-major, EPI_N = 32 halves = 64 bytes: the K-major SW64 atom.
    assert_eq!(p.smem_atom_d.major, Major::K);
    assert_eq!(p.smem_atom_d.mode, GmmaSwizzle::B64);
    assert_eq!(p.smem_atom_d.to_string(), "Sw<2,3,3> o (8,32):(32,1)");
    assert_eq!(p.tma_swizzle_d, TmaSwizzle::B64);
    assert_eq!(p.tma_swizzle_c, Some(TmaSwizzle::B64));
    // D reuses C's 4 buffers.
    assert_eq!(p.smem_layout_d, p.smem_layout_c.clone().unwrap());
    assert_eq!(
        p.smem_layout_d.to_string(),
        "Sw<2,3,3> o 0 o ((8,8),(32,1),(1,4)):((32,256),(1,0),(0,2048))"
    );
    assert_eq!(p.storage, EpilogueStorage::UnionReuseC);
    assert_eq!(p.storage.cutlass_name(), "CollectiveStorageReuseC");
    // 64*32*4 halves = 16384 bytes, + 4 full + 4 empty mbarriers = 16448 -> 16512.
    assert_eq!((p.tensor_bytes, p.barrier_bytes, p.smem_bytes), (16384, 64, 16512));
    assert_eq!(p.tma_transaction_bytes, 64 * 32 * 2);
    assert_eq!(p.copy_atom_c, EpilogueCopyAtom::StsmX4);
    assert_eq!(p.copy_atom_c.op().name, "SM90_U32x4_STSM_N");
    // PipelineTmaStore<StagesC, StagesD - 1>.
    assert_eq!((p.store_pipeline_stages, p.store_pipeline_unacquired), (4, 1));
    // N outer, M inner.
    assert_eq!(
        p.subtile_order(),
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]
    );
}

fn p_with_epi_tile_none(mut p: Sm90EpiloguePlan) -> Sm90EpiloguePlan {
    p.config.epi_tile = None;
    p
}

#[test]
fn golden_tma_transaction_bytes_64x64_fp16() {
    let mut c = cfg([128, 128, 64], Ws, Some(Element::F16), Element::F16, Row);
    c.epi_tile = Some([64, 64]);
    let p = plan(&c);
    assert_eq!(p.tma_transaction_bytes, 8192);
    assert_eq!(p.smem_atom_c.as_ref().unwrap().mode, GmmaSwizzle::B128);
    assert_eq!(p.fragment_size, 32);
    assert_eq!(p.epi_tiles, 4);
}

#[test]
fn auto_epilogue_tiles() {
    assert_eq!(sm90_auto_epi_tile([256, 128, 64], Coop, Element::BF16), [128, 32]);
    assert_eq!(sm90_auto_epi_tile([128, 16, 64], Coop, Element::BF16), [128, 16]);
    assert_eq!(sm90_auto_epi_tile([128, 24, 64], Ws, Element::F16), [64, 24]);
    assert_eq!(sm90_auto_epi_tile([128, 40, 64], Ws, Element::F16), [64, 8]);
    assert_eq!(sm90_auto_epi_tile([64, 128, 64], Pp, Element::E4M3), [64, 64]);
    assert_eq!(sm90_auto_epi_tile([64, 96, 64], Pp, Element::E4M3), [64, 32]); // 96 % 64 != 0
}

#[test]
fn sourceless_delays_the_store() {
    let p = plan(&cfg([128, 128, 64], Coop, None, Element::BF16, Row));
    assert_eq!(p.epi_tile, [128, 32]);
    assert!(p.delay_tma_store && !p.reuse_smem_c);
    assert_eq!((p.stages_c, p.stages_d, p.fragment_size), (0, 2, 16));
    assert_eq!(p.storage, EpilogueStorage::UnionWithoutC);
    assert_eq!(
        (p.tensor_bytes, p.barrier_bytes, p.smem_bytes, p.tma_transaction_bytes),
        (16384, 0, 16384, 0)
    );
    assert!(p.smem_atom_c.is_none() && p.smem_layout_c.is_none() && p.tma_swizzle_c.is_none());
    assert_eq!((p.store_pipeline_stages, p.store_pipeline_unacquired), (2, 1));
    // A pointer-array GEMM does not delay.
    let mut c = cfg([128, 128, 64], Coop, None, Element::BF16, Row);
    c.ptr_array = true;
    assert!(!plan(&c).delay_tma_store);
}

#[test]
fn struct_storage_without_reuse() {
    // f32 C, bf16 D: different widths, so C and D have their own buffers.
    let p = plan(&cfg([128, 256, 64], Coop, Some(Element::F32), Element::BF16, Row));
    assert_eq!(p.epi_tile, [128, 32]);
    assert_eq!((p.epi_tiles, p.stages_c, p.stages_d), (8, 4, 2));
    assert!(!p.reuse_smem_c && !p.delay_tma_store);
    assert_eq!(p.storage, EpilogueStorage::StructWithC);
    // C: 128*32*4 floats = 65536 B; D after it: 128*32*2 bf16 = 16384 B; 4 stages of barriers.
    assert_eq!((p.smem_offset_d, p.tensor_bytes, p.barrier_bytes), (65536, 81920, 64));
    assert_eq!(p.smem_bytes, 82048);
    assert_eq!(p.smem_atom_c.as_ref().unwrap().mode, GmmaSwizzle::B128); // 32 floats = 128 B
    assert_eq!(p.smem_atom_d.mode, GmmaSwizzle::B64); // 32 bf16 = 64 B
    assert_eq!((p.store_pipeline_stages, p.store_pipeline_unacquired), (2, 1));
}

#[test]
fn column_major_tiles_n_first() {
    // Col-major D: the MN-major atom (64,8):(1,64) over EPI_M; tile_to_shape steps N
    // blocks before M blocks (CuTe's Step<_2,_1,_3>).
    let p = plan(&cfg([256, 128, 64], Coop, Some(Element::BF16), Element::BF16, Col));
    assert_eq!(p.epi_tile, [128, 32]);
    assert_eq!(p.smem_atom_d.major, Major::MN);
    assert_eq!(p.smem_atom_d.to_string(), "Sw<3,3,3> o (64,8):(1,64)");
    let inner = p.smem_layout_d.nonswizzle_portion();
    let at = |m: i64, n: i64, s: i64| inner.crd2idx(&tuple!(m, n, s)).unwrap().as_static().unwrap();
    assert_eq!(at(0, 8, 0), 512); // next N block first
    assert_eq!(at(64, 0, 0), 4 * 512); // then the M block
    assert_eq!(at(0, 0, 1), 128 * 32); // then the stage
    assert_eq!(p.tma_swizzle_d, TmaSwizzle::B128);
}

#[test]
fn explicit_overrides_are_honoured() {
    let mut c = cfg([128, 128, 64], Ws, Some(Element::BF16), Element::BF16, Row);
    c.reuse_smem_c = Some(false);
    c.stages_c = Some(3);
    c.stages_d = Some(1);
    let p = plan(&c);
    assert_eq!((p.stages_c, p.stages_d, p.reuse_smem_c), (3, 1, false));
    assert_eq!(p.storage, EpilogueStorage::StructWithC);
    assert_eq!((p.store_pipeline_stages, p.store_pipeline_unacquired), (1, 0));
    // A delayed store with reuse is fine when StagesC > StagesD.
    let mut c = cfg([128, 128, 64], Ws, Some(Element::BF16), Element::BF16, Row);
    c.delay_tma_store = Some(true);
    let p = plan(&c);
    assert!(p.delay_tma_store && p.reuse_smem_c && p.stages_c > p.stages_d);
}

#[test]
fn error_types() {
    let e = err(&cfg([128, 128, 64], Ws, Some(Element::E4M3), Element::BF16, Row));
    assert_eq!(
        e,
        Sm90EpilogueError::Type {
            operand: "C",
            elem: Element::E4M3
        }
    );
    let e = err(&cfg([128, 128, 64], Ws, None, Element::S32, Row));
    assert_eq!(
        e,
        Sm90EpilogueError::Type {
            operand: "D",
            elem: Element::S32
        }
    );
    assert!(e.to_string().contains("unsupported D type s32"));
}

#[test]
fn error_tiles() {
    assert!(matches!(
        err(&cfg([0, 128, 64], Ws, None, Element::BF16, Row)),
        Sm90EpilogueError::Tile { .. }
    ));
    let e = err(&cfg([128, 12, 64], Ws, None, Element::BF16, Row));
    assert!(
        matches!(&e, Sm90EpilogueError::Tile { reason, .. } if reason.contains("multiple of 8")),
        "{e}"
    );
    let mut c = cfg([128, 128, 64], Ws, None, Element::BF16, Row);
    c.epi_tile = Some([0, 32]);
    assert!(matches!(err(&c), Sm90EpilogueError::Tile { .. }));

    c.epi_tile = Some([128, 32]);
    c.cta_tile = [64, 128, 64];
    assert_eq!(
        err(&c),
        Sm90EpilogueError::Divide {
            mode: 'M',
            epi: 128,
            cta: 64
        }
    );
    c.epi_tile = Some([64, 48]);
    assert_eq!(
        err(&c),
        Sm90EpilogueError::Divide {
            mode: 'N',
            epi: 48,
            cta: 128
        }
    );
    assert_eq!(err(&c).to_string(), "EPI_TILE_N = 48 must divide CTA_N = 128");

    c.epi_tile = Some([32, 32]);
    assert_eq!(err(&c), Sm90EpilogueError::EpiM { epi_m: 32, mma_m: 64 });
    let mut c = cfg([256, 128, 64], Coop, None, Element::BF16, Row);
    c.epi_tile = Some([64, 32]);
    assert_eq!(err(&c), Sm90EpilogueError::EpiM { epi_m: 64, mma_m: 128 });
}

#[test]
fn error_mma_nesting_and_fragment() {
    // A 256x16 subtile is larger than the 64x48 MMA tile but 16 is not a multiple of 48.
    let mut c = cfg([256, 48, 64], Ws, None, Element::BF16, Row);
    c.epi_tile = Some([256, 16]);
    assert!(matches!(
        err(&c),
        Sm90EpilogueError::MmaN {
            epi_n: 16,
            mma_n: 48,
            ..
        }
    ));
    // 128x64 over 128 threads is 64 values per thread, but a 64x64 atom gives 32.
    let mut c = cfg([128, 64, 64], Ws, None, Element::BF16, Row);
    c.epi_tile = Some([128, 64]);
    assert_eq!(
        err(&c),
        Sm90EpilogueError::Fragment {
            fragment: 64,
            acc_values: 32
        }
    );
}

#[test]
fn error_copy_atom_and_alignment() {
    let mut c = cfg([128, 128, 64], Ws, None, Element::BF16, Row);
    c.epi_tile = Some([64, 4]);
    assert_eq!(err(&c), Sm90EpilogueError::CopyAtom { epi_n: 4 });
    // EPI_N = 8 e4m3 values = 8 bytes: not a 16-byte TMA row.
    let e = err(&cfg([64, 8, 64], Ws, None, Element::E4M3, Row));
    assert_eq!(
        e,
        Sm90EpilogueError::Alignment {
            operand: "D",
            extent: 8,
            bytes: 1
        }
    );
    // Column-major: the contiguous extent is EPI_M (64), fine.
    assert!(Sm90EpiloguePlan::new(&cfg([64, 8, 64], Ws, None, Element::E4M3, Col)).is_ok());
    // bf16 with 8 columns is 16 bytes and takes the x2 stmatrix.
    let p = plan(&cfg([64, 8, 64], Ws, None, Element::BF16, Row));
    assert_eq!(
        (p.copy_atom_c, p.smem_atom_d.mode),
        (EpilogueCopyAtom::StsmX2, GmmaSwizzle::Interleave)
    );
    assert_eq!(p.tma_swizzle_d, TmaSwizzle::None);
}

#[test]
fn error_stages_reuse_deadlock() {
    let base = cfg([128, 128, 64], Ws, Some(Element::BF16), Element::BF16, Row);
    let mut c = base;
    c.stages_d = Some(0);
    assert!(matches!(err(&c), Sm90EpilogueError::Stages(_)));
    let mut c = base;
    c.stages_c = Some(0);
    assert!(matches!(err(&c), Sm90EpilogueError::Stages(_)));
    let mut c = cfg([128, 128, 64], Ws, None, Element::BF16, Row);
    c.stages_c = Some(3);
    assert!(matches!(err(&c), Sm90EpilogueError::Stages(m) if m.contains("without a source C")));

    c.stages_c = None;
    c.reuse_smem_c = Some(true);
    assert!(matches!(err(&c), Sm90EpilogueError::Reuse(m) if m.contains("needs a source C")));
    let mut c = base;
    c.stages_c = Some(2);
    c.stages_d = Some(3);
    assert!(matches!(err(&c), Sm90EpilogueError::Reuse(m) if m.contains("must not exceed")));

    let mut c = base;
    c.delay_tma_store = Some(true);
    c.stages_c = Some(2);
    c.stages_d = Some(2);
    let e = err(&c);
    assert_eq!(
        e,
        Sm90EpilogueError::Deadlock {
            stages_c: 2,
            stages_d: 2
        }
    );
    assert!(e.to_string().contains("will deadlock"));
}

fn elem_strategy(with_8bit: bool) -> impl Strategy<Value = Element> {
    let mut v = vec![Element::F32, Element::F16, Element::BF16];
    if with_8bit {
        v.extend([Element::E4M3, Element::E5M2]);
    }
    proptest::sample::select(v)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// The builder's own choices (no overrides) never trip the reuse or deadlock asserts,
    /// and every plan it accepts is self-consistent.
    #[test]
    fn builder_choices_are_consistent(
        bm in proptest::sample::select(vec![64i64, 128, 192, 256]),
        bn in (1i64..=32).prop_map(|i| 8 * i),
        sched in proptest::sample::select(Sm90Schedule::ALL.to_vec()),
        c in proptest::option::of(elem_strategy(false)),
        d in elem_strategy(true),
        col in any::<bool>(),
        ptr_array in any::<bool>(),
    ) {
        let mut cfg = Sm90EpilogueConfig::new([bm, bn, 64], sched, c, d, if col { Col } else { Row });
        cfg.ptr_array = ptr_array;
        match Sm90EpiloguePlan::new(&cfg) {
            Ok(p) => {
                prop_assert!(!(p.delay_tma_store && p.reuse_smem_c && p.stages_c <= p.stages_d));
                if p.reuse_smem_c {
                    prop_assert!(c.is_some() && p.stages_d <= p.stages_c);
                    prop_assert_eq!(p.storage, EpilogueStorage::UnionReuseC);
                }
                prop_assert_eq!(p.delay_tma_store, c.is_none() && !ptr_array);
                prop_assert!(p.stages_d >= 1 && p.stages_d <= 2);
                prop_assert_eq!(p.stages_c == 0, c.is_none());
                prop_assert_eq!(p.epi_tiles as usize, p.subtile_order().len());
                prop_assert_eq!(p.fragment_size * sched.epilogue_threads(), p.epi_tile[0] * p.epi_tile[1]);
                prop_assert!(p.smem_bytes >= p.tensor_bytes + p.barrier_bytes && p.smem_bytes % 128 == 0);
                // The D layout is a compact bijection onto its buffers.
                let size = p.smem_layout_d.size().as_static().unwrap();
                prop_assert_eq!(p.smem_layout_d.cosize().as_static(), Some(size));
                let mut v = p.smem_layout_d.values().unwrap();
                v.sort_unstable();
                v.dedup();
                prop_assert_eq!(v.len() as i64, size);
            }
            Err(e) => prop_assert!(
                !matches!(e, Sm90EpilogueError::Reuse(_) | Sm90EpilogueError::Deadlock { .. }
                    | Sm90EpilogueError::Stages(_) | Sm90EpilogueError::Layout(_)),
                "builder rule produced {:?} for {:?}", e, cfg
            ),
        }
    }
}

fn elem_name(e: Option<Element>) -> String {
    e.map_or("-".to_string(), |e| e.to_string())
}

fn swz(m: GmmaSwizzle) -> &'static str {
    match m {
        GmmaSwizzle::Interleave => "INTER",
        GmmaSwizzle::B32 => "SW32",
        GmmaSwizzle::B64 => "SW64",
        GmmaSwizzle::B128 => "SW128",
    }
}

#[test]
fn decision_table() {
    use Element::*;
    let rows: Vec<Sm90EpilogueConfig> = vec![
        cfg([64, 128, 64], Ws, None, BF16, Row),
        cfg([64, 128, 64], Pp, Some(BF16), BF16, Row),
        cfg([64, 128, 64], Coop, None, BF16, Row),
        cfg([128, 128, 64], Ws, Some(F16), F16, Row),
        cfg([128, 128, 64], Ws, Some(F32), F32, Col),
        cfg([128, 128, 64], Coop, Some(BF16), BF16, Row),
        cfg([128, 128, 64], Coop, Some(F32), BF16, Col),
        cfg([128, 128, 128], Pp, None, E4M3, Row),
        cfg([128, 128, 128], Pp, Some(BF16), E4M3, Row),
        cfg([128, 256, 64], Coop, None, BF16, Row),
        cfg([128, 256, 64], Coop, Some(BF16), F32, Row),
        cfg([128, 256, 64], Ws, Some(F32), F32, Row),
        cfg([128, 256, 128], Pp, None, E4M3, Col),
        cfg([256, 128, 64], Coop, Some(BF16), BF16, Col),
        cfg([256, 128, 64], Coop, Some(F32), F32, Row),
        cfg([256, 128, 64], Ws, None, F16, Col),
        cfg([256, 128, 64], Coop, None, E4M3, Row),
    ];
    let mut out = String::new();
    writeln!(
        out,
        "tile        sched    C    D    ord | epi      tiles frag sC sD reuse delay storage              atomC atomD copy smem   tx    store"
    )
    .unwrap();
    for c in &rows {
        let t = c.cta_tile;
        write!(
            out,
            "{:<11} {:<8} {:<4} {:<4} {:<3} | ",
            format!("{}x{}x{}", t[0], t[1], t[2]),
            c.schedule.tag(),
            elem_name(c.c),
            c.d.to_string(),
            c.order.tag()
        )
        .unwrap();
        match Sm90EpiloguePlan::new(c) {
            Ok(p) => writeln!(
                out,
                "{:<8} {:<5} {:<4} {:<2} {:<2} {:<5} {:<5} {:<20} {:<5} {:<5} x{:<3} {:<6} {:<5} <{},{}>",
                format!("{}x{}", p.epi_tile[0], p.epi_tile[1]),
                p.epi_tiles,
                p.fragment_size,
                p.stages_c,
                p.stages_d,
                p.reuse_smem_c,
                p.delay_tma_store,
                format!("{:?}", p.storage),
                p.smem_atom_c.as_ref().map_or("-", |a| swz(a.mode)),
                swz(p.smem_atom_d.mode),
                p.copy_atom_c.matrices(),
                p.smem_bytes,
                p.tma_transaction_bytes,
                p.store_pipeline_stages,
                p.store_pipeline_unacquired,
            )
            .unwrap(),
            Err(e) => writeln!(out, "error: {e}").unwrap(),
        }
    }
    insta::assert_snapshot!(out);
}
