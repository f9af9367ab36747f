//! The weight-streaming probes (`rcute bench stream`): every swept configuration compiles
//! for sm_80 (the register and cp.async probes) and sm_90a without spills or local memory,
//! with the load instruction it is named after in its SASS, and bad configurations are
//! refused with a typed error.

use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::weight_stream::{generate, sweep, StreamConfig, StreamError, StreamLoad};
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

#[test]
fn bad_configurations_are_refused() {
    let ok = StreamConfig {
        load: StreamLoad::CpAsync,
        threads: 128,
        depth: 4,
        stages: 4,
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
