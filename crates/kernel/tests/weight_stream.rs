//! The weight-streaming probes (`rcute bench stream`): every swept configuration compiles
//! for sm_80 (the register and cp.async probes) and sm_90a without spills or local memory,
//! with the load instruction it is named after in its SASS, and bad configurations are
//! refused with a typed error.

use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::weight_stream::{generate, sweep, RowPieces, StreamConfig, StreamError, StreamLoad};
use rcute_kernel::Arch;

#[test]
fn swept_probes_compile_without_spills() {
    let Some(tk) = toolkit_for_test() else { return };
    for cfg in sweep() {
        let g = generate(&cfg).unwrap();
        let archs: &[Arch] = match cfg.load {
            StreamLoad::Bulk => &[Arch::Sm90a],
            _ => &[Arch::Sm80, Arch::Sm90a],
        };
        // The SASS opcode of the load each probe is named after.
        let opcode = match cfg.load {
            StreamLoad::Ldg => "LDG",
            StreamLoad::CpAsync => "LDGSTS",
            StreamLoad::Bulk => "UBLKCP",
        };
        for &arch in archs {
            compile_clean(tk, &g.name, &g.source, arch).assert_opcodes(&[opcode], &[]);
        }
    }
}

/// The row-piece probes (a decode GEMM's weight order) compile without spills and copy
/// with `LDGSTS`; pieces that do not make up the tile, or on another load, are refused.
#[test]
fn row_piece_probes_compile_and_check_their_shape() {
    let base = StreamConfig {
        load: StreamLoad::CpAsync,
        threads: 128,
        depth: 8,
        stages: 4,
        pieces: Some(RowPieces {
            rows: 128,
            piece: 128,
            stride: 8192,
            l2_256: false,
        }),
    };
    let g = generate(&base).unwrap();
    assert!(g.source.contains("constexpr long long KS = 64"), "{}", g.source);
    // 3 blocks of 128 rows x 8 KB and a partial fourth.
    assert_eq!(g.tiles(3 * 128 * 8192 + 16), 4);
    if let Some(tk) = toolkit_for_test() {
        compile_clean(tk, &g.name, &g.source, Arch::Sm90a).assert_opcodes(&["LDGSTS"], &[]);
    }
    let wrong = |rows, piece, stride| StreamConfig {
        pieces: Some(RowPieces {
            rows,
            piece,
            stride,
            l2_256: false,
        }),
        ..base
    };
    for bad in [
        wrong(64, 128, 8192),
        wrong(128, 128, 8200),
        wrong(128, 120, 8160),
        StreamConfig {
            load: StreamLoad::Ldg,
            stages: 1,
            ..base
        },
    ] {
        assert!(matches!(generate(&bad), Err(StreamError::Config(_))), "{bad:?}");
    }
    assert!(generate(&wrong(16, 1024, 28672)).is_ok());
    let mut hint = base;
    hint.pieces.as_mut().unwrap().l2_256 = true;
    let g = generate(&hint).unwrap();
    assert!(
        g.name.ends_with("_l2pf") && g.source.contains(".L2::256B"),
        "{}",
        g.name
    );
}

#[test]
fn bad_configurations_are_refused() {
    let ok = StreamConfig {
        load: StreamLoad::CpAsync,
        threads: 128,
        depth: 4,
        stages: 4,
        pieces: None,
    };
    assert!(generate(&ok).is_ok());
    for bad in [
        StreamConfig { threads: 100, ..ok },
        StreamConfig { threads: 0, ..ok },
        StreamConfig { depth: 0, ..ok },
        StreamConfig { depth: 33, ..ok },
        StreamConfig { stages: 1, ..ok },
        StreamConfig {
            load: StreamLoad::Ldg,
            ..ok
        },
        StreamConfig {
            load: StreamLoad::Bulk,
            threads: 1024,
            depth: 32,
            stages: 16,
            pieces: None,
        },
    ] {
        assert!(matches!(generate(&bad), Err(StreamError::Config(_))), "{bad:?}");
    }
}

#[test]
fn names_and_sources_follow_the_configuration() {
    let g = generate(&StreamConfig {
        load: StreamLoad::CpAsync,
        threads: 256,
        depth: 2,
        stages: 8,
        pieces: None,
    })
    .unwrap();
    assert_eq!(g.name, "rc_stream_cpasync_t256_d2_s8");
    assert!(g.source.contains("rc_cp_async_wait_group<7>()"));
    assert_eq!(g.config.bytes_in_flight_per_cta(), 7 * 256 * 2 * 16);
    assert_eq!(g.config.smem_bytes(), 8 * 256 * 2 * 16);
    assert_eq!(g.tiles(256 * 2 * 16 * 3 + 16), 4);
    // Deterministic.
    assert_eq!(g, generate(&g.config).unwrap());
}
