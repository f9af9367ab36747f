//! The fused MoE layer's configuration space against its workspace size, without a GPU:
//! every configuration a tuning table can hold for a layer (`moe_space`, of which the
//! tuner's candidates are a part) fits a workspace of `fused_moe_workspace_bytes`, which
//! validation requires, so `Ops::fused_moe` can run a table's `moe:` entry on the
//! caller's workspace; and where the space has no K splits (prefill) the size is the
//! rules' own.

use rcute_ops::moe::{
    fused_moe_workspace_bytes, fused_moe_workspace_bytes_with, moe_space, moe_splits, moe_tile, validate_fused_moe,
    MoeOptions, MoeRouting, MoeWorkspace,
};
use rcute_ops::tensor::Geometry;
use rcute_ops::tuning::space::moe_candidates;
use rcute_ops::tuning::{ConfigSpec, MoeSpec};
use rcute_ops::{DType, MatrixMut, MatrixRef, OpsError};

/// `(tokens, topk, experts, hidden, inter)`: Mixtral and DeepSeek-V2-Lite at decode and
/// prefill sizes, and a small layer.
const LAYERS: [(usize, usize, usize, usize, usize); 10] = [
    (1, 2, 8, 4096, 14336),
    (16, 2, 8, 4096, 14336),
    (64, 2, 8, 4096, 14336),
    (256, 2, 8, 4096, 14336),
    (4096, 2, 8, 4096, 14336),
    (1, 6, 64, 2048, 1408),
    (64, 6, 64, 2048, 1408),
    (1024, 6, 64, 2048, 1408),
    (4096, 6, 64, 2048, 1408),
    (24, 2, 8, 256, 512),
];

#[test]
fn every_configuration_of_the_space_fits_the_workspace_size() {
    for (t, k, e, h, i) in LAYERS {
        let space = moe_space(t, k, e, h, i);
        let (tile, warps) = moe_tile(t * k, e);
        let rules = MoeSpec::new(tile, warps, moe_splits(t, k, e, h, i) as u32);
        assert_eq!(space[0], rules, "the rules' choice first ({t} tokens)");
        let bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
        for s in &space {
            let need = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, s).unwrap();
            assert!(need <= bytes, "{s} needs {need} > {bytes} ({t}x{h}x{i}, E={e})");
            // The register-streamed form (slower where measured: not in the space) on a
            // row tile and K splits of the space fits the same workspace.
            assert!(!s.streamed && !s.k_rotate, "{s} in the space");
            if matches!(s.tile[0], 8 | 16 | 32) {
                let reg = MoeSpec::streamed(s.tile[0], 8, 128, 2, s.splits, true);
                let need = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, &reg).unwrap();
                assert!(need <= bytes, "{reg} needs {need} > {bytes} ({t}x{h}x{i}, E={e})");
            }
        }
        for cc in [(9, 0), (8, 0)] {
            for c in moe_candidates(t, k, e, h, i, cc, 132) {
                match c {
                    ConfigSpec::Moe(s) => assert!(space.contains(&s), "candidate {s} outside the space"),
                    // The SM90 layout is one of those the workspace size covers.
                    ConfigSpec::MoeSm90(_) => assert_eq!(cc, (9, 0), "{c} on {cc:?}"),
                    other => panic!("{other} is not a MoE candidate"),
                }
            }
        }
        // Splits only while GEMM2 has few CTAs: a prefill layer's workspace is the larger
        // of the rules' SM80 layout and the SM90 family's (unit test in `moe::problem`).
        if t >= 1024 {
            assert!(space.iter().all(|s| s.splits == 1), "{t} tokens: {space:?}");
            let rules_bytes = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, &rules).unwrap();
            assert!(bytes >= rules_bytes, "{t} tokens");
        }
    }
}

#[test]
fn validation_asks_for_the_whole_space() {
    const GB: u64 = 8 << 30; // slots far enough apart for the Mixtral weights
    let (t, k, e, h, i) = (16usize, 2usize, 8usize, 4096usize, 14336usize);
    let mat = |slot: u64, rows: usize, cols: usize, batch: usize| -> Geometry {
        let mut g = Geometry::dense(slot * GB, rows * cols * batch * 2, DType::BF16, rows, cols);
        g.batch = batch;
        g.batch_stride = (rows * cols) as i64;
        g
    };
    let logits = Geometry::dense(5 * GB, t * e * 4, DType::F32, t, e);
    let bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
    let run = |len: usize| -> Result<(), OpsError> {
        // SAFETY: host-side validation only; nothing is launched or dereferenced.
        unsafe {
            let routing = MoeRouting::Logits {
                logits: MatrixRef::from_raw(logits),
                topk: k,
                renormalize: true,
            };
            validate_fused_moe(
                &MatrixRef::from_raw(mat(1, t, h, 1)),
                &MatrixRef::from_raw(mat(2, 2 * i, h, e)),
                &MatrixRef::from_raw(mat(3, h, i, e)),
                &routing,
                &MoeOptions::default(),
                &MoeWorkspace::from_raw(6 * GB, len),
                &MatrixMut::from_raw(mat(4, t, h, 1)),
            )
            .map(|_| ())
        }
    };
    run(bytes).unwrap();
    match run(bytes - 1) {
        Err(OpsError::OutOfBounds { needed, .. }) => assert_eq!(needed, bytes),
        other => panic!("a workspace one byte short: {other:?}"),
    }
    // The decode layer's space has K splits, so it asks for more than the rules' layout.
    let rules = moe_space(t, k, e, h, i)[0];
    let rules_bytes = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, &rules).unwrap();
    assert!(bytes > rules_bytes, "{bytes} vs {rules_bytes}");
}

/// The space offers GEMM1's own routing (`,route`) exactly where it can run (at most 32
/// routed entries, the tile grid) and the rule's weight bound says no: Mixtral T = 1 / 16
/// (2 / 32 entries over 704 MB+), not DeepSeek-V2-Lite T = 1 (the rule routes its 104 MB)
/// nor any layer of more than 32 routed entries.
#[test]
fn the_space_offers_gemm1_routing_where_the_rule_does_not_route() {
    let routed = |t, k, e, h, i| moe_space(t, k, e, h, i).iter().filter(|s| s.route).count();
    for (t, k, e, h, i) in LAYERS {
        let space = moe_space(t, k, e, h, i);
        let n = routed(t, k, e, h, i);
        let expect = t * k <= 32 && !rcute_ops::moe::gemm1_routes_by_rule(t, k, e, 3 * h * i * 2);
        assert_eq!(n > 0, expect, "{t} tokens, E={e}: {n} routed specs");
        for s in space.iter().filter(|s| s.route) {
            let plain = MoeSpec { route: false, ..*s };
            assert!(space.contains(&plain), "{s} without its plain twin");
            assert_eq!(s.to_string().replace(",route", ""), plain.to_string());
            assert!(s.to_string().contains(",route"));
        }
    }
    assert!(routed(1, 2, 8, 4096, 14336) > 0 && routed(16, 2, 8, 4096, 14336) > 0);
    assert_eq!(routed(1, 6, 64, 2048, 1408), 0);
}
