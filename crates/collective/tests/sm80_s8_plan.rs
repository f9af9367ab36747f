//! The SM80 mainloop plan for 8-bit integer operands (`s8 x s8 -> s32`, "TN"): goldens,
//! refusals, and a simulation of `ldmatrix.x4` on 8-bit data showing that the plan's lane
//! addressing delivers exactly the `m16n8k32` atom's A and B fragments.

use rcute_atom::{Element, Major, Operand};
use rcute_collective::sm80_mainloop::{smem_atom, smem_atom_for};
use rcute_collective::{PlanError, Sm80Mainloop, Sm80MainloopConfig};
use rcute_layout::{Int, Tuple};
use std::collections::BTreeSet;

#[test]
fn goldens_s8_tn() {
    let p = Sm80Mainloop::new(&Sm80MainloopConfig::s8_tn([128, 128, 64], [2, 2])).unwrap();
    assert_eq!(p.stages, 4);
    assert_eq!(p.smem_bytes, 4 * 256 * 64);
    assert_eq!((p.k_block, p.k_blocks, p.g2s_a.vec), (32, 2, 16));
    assert_eq!(p.smem_atom_a.to_string(), "Sw<2,4,3> o 0 o (8,64):(64,1)");
    assert_eq!(p.mma_atom.name, "SM80_16x8x32_S32S8S8S32_TN");
    assert_eq!((p.g2s_a.passes, p.g2s_a.pass_step), (4, [32, 0]));
    let p = Sm80Mainloop::new(&Sm80MainloopConfig::s8_tn([16, 64, 128], [1, 4])).unwrap();
    assert_eq!(p.smem_atom_b.to_string(), "Sw<3,4,3> o 0 o (8,128):(128,1)");
    assert_eq!(p.k_blocks, 4);
    // The 16-bit atoms are unchanged by the generalization.
    for (bk, want) in [(64, "Sw<3,3,3>"), (32, "Sw<2,3,3>"), (16, "Sw<1,3,3>")] {
        let a = smem_atom(Major::K, 64, bk).unwrap().to_string();
        assert!(a.starts_with(want), "{a}");
        assert_eq!(smem_atom_for(Element::F16, Major::K, 64, bk).unwrap().to_string(), a);
    }
    assert_eq!(
        smem_atom_for(Element::S8, Major::K, 64, 32).unwrap().to_string(),
        "Sw<1,4,3> o 0 o (8,32):(32,1)"
    );
    assert!(smem_atom_for(Element::F32, Major::K, 64, 64).is_none());
}

#[test]
fn s8_refusals() {
    let mut c = Sm80MainloopConfig::s8_tn([128, 128, 48], [2, 2]);
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::Tile { reason, .. }) if reason.contains("K=32")));
    c.tile = [128, 128, 64];
    c.a_major = Major::MN;
    assert!(matches!(
        Sm80Mainloop::new(&c),
        Err(PlanError::Major {
            a_major: Major::MN,
            b_major: Major::K
        })
    ));
    c.a_major = Major::K;
    c.acc = Element::F32;
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::Types { .. })));
}

/// `ldmatrix.x4` (b16) on 8-bit data: lane `8j + r` names a 16-byte row of matrix `j`;
/// thread `t` receives bytes `4 (t % 4) .. 4 (t % 4) + 3` of row `t / 4` of each matrix
/// (register `j`). Those must be the atom's values `4j .. 4j + 3` (A) and, for B (two
/// `n8` atoms), values `4 (j % 2) ..` of atom `j / 2`.
#[test]
fn ldmatrix_lanes_deliver_the_m16n8k32_fragments() {
    let p = Sm80Mainloop::new(&Sm80MainloopConfig::s8_tn([64, 64, 64], [2, 2])).unwrap();
    for lanes in [p.lanes_a, p.lanes_b] {
        for t in 0..32 {
            for j in 0..4 {
                for byte in 0..4 {
                    let (mn, k) = lanes.lane_coord_vec(8 * j + t / 4, 16);
                    let got = (mn, k + 4 * (t % 4) + byte);
                    let want = if lanes.is_a {
                        p.mma_atom.coord(Operand::A, t, 4 * j + byte).unwrap()
                    } else {
                        let (n, k) = p.mma_atom.coord(Operand::B, t, 4 * (j % 2) + byte).unwrap();
                        (n + 8 * (j / 2), k)
                    };
                    assert_eq!(got, want, "is_a={} t={t} reg={j} byte={byte}", lanes.is_a);
                }
            }
            let (mn, k) = lanes.lane_coord_cpp_vec("lane", 16);
            assert!(k.starts_with("16 * "), "{k}");
            assert!(mn.contains("(lane & 7)"), "{mn}");
        }
    }
}

/// Every `ldmatrix` phase (8 lanes reading 16-byte rows) hits 8 distinct 16-byte bank
/// groups of the swizzled 8-bit smem layout: conflict-free.
#[test]
fn s8_ldmatrix_is_bank_conflict_free() {
    for (tile, warps) in [
        ([128, 128, 64], [2, 2]),
        ([16, 64, 128], [1, 4]),
        ([64, 64, 32], [2, 2]),
    ] {
        let p = Sm80Mainloop::new(&Sm80MainloopConfig::s8_tn(tile, warps)).unwrap();
        for (layout, lanes) in [(&p.smem_layout_a, p.lanes_a), (&p.smem_layout_b, p.lanes_b)] {
            for kb in 0..p.k_blocks {
                for phase in 0..4 {
                    let mut groups = BTreeSet::new();
                    for r in 0..8 {
                        let (mn, k) = lanes.lane_coord_vec(8 * phase + r, 16);
                        let c = Tuple::node([
                            Tuple::Leaf(Int::Static(mn)),
                            Tuple::Leaf(Int::Static(k + kb * 32)),
                            Tuple::Leaf(Int::Static(0)),
                        ]);
                        let off = layout.crd2idx(&c).unwrap().as_static().unwrap();
                        assert_eq!(off % 16, 0, "16-byte aligned rows");
                        groups.insert((off / 16) % 8);
                    }
                    assert_eq!(groups.len(), 8, "{tile:?} kb={kb} phase={phase}");
                }
            }
        }
    }
}
