//! Plan goldens for the SM80 mainloop, error cases, and checks that the index formulas
//! the kernel emitter uses agree with the layouts (CuTe's TiledMMA / TiledCopy TV
//! layouts, the MMA atom's fragment layouts, the swizzled smem layouts).

use rcute_atom::{Element, Major, Operand};
use rcute_collective::{PlanError, Sm80Mainloop, Sm80MainloopConfig};
use rcute_layout::{tuple, Int, Tuple};
use std::collections::BTreeSet;

fn cfg(tile: [i64; 3], warps: [i64; 2], am: Major, bm: Major) -> Sm80MainloopConfig {
    let mut c = Sm80MainloopConfig::bf16_tn(tile, warps);
    c.a_major = am;
    c.b_major = bm;
    c
}

const MAJORS: [(Major, Major); 4] = [
    (Major::K, Major::K),
    (Major::MN, Major::K),
    (Major::K, Major::MN),
    (Major::MN, Major::MN),
];
const SHAPES: [([i64; 3], [i64; 2]); 5] = [
    ([128, 128, 32], [2, 2]),
    ([128, 256, 32], [2, 4]),
    ([64, 64, 64], [2, 2]),
    ([16, 64, 128], [1, 4]),
    ([32, 32, 16], [1, 1]),
];

#[test]
fn goldens_tn_128x128x32() {
    let p = Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn([128, 128, 32], [2, 2])).unwrap();
    assert_eq!(p.stages, 4);
    assert_eq!(p.smem_bytes, 4 * 256 * 32 * 2);
    assert_eq!(p.smem_atom_a.to_string(), "Sw<2,3,3> o 0 o (8,32):(32,1)");
    assert_eq!(
        p.smem_layout_a.to_string(),
        "Sw<2,3,3> o 0 o ((8,16),(32,1),(1,4)):((32,256),(1,0),(0,4096))"
    );
    assert_eq!(p.g2s_a.thr_layout.to_string(), "(32,4):(4,1)");
    assert_eq!(p.g2s_a.passes, 4);
    assert_eq!(p.s2r_a.name, "SM75_U32x4_LDSM_N");
    assert_eq!(p.mma_atom.name, "SM80_16x8x16_F32BF16BF16F32_TN");
    assert_eq!((p.mma_m, p.mma_n, p.k_blocks), (4, 8, 2));
    assert_eq!(p.tiled_mma.tile_size(1).as_static(), Some(32));
}

#[test]
fn goldens_64_wide_atoms_and_mn_major() {
    let p = Sm80Mainloop::new(&cfg([64, 64, 64], [2, 2], Major::MN, Major::MN)).unwrap();
    assert_eq!(p.smem_atom_a.to_string(), "Sw<3,3,3> o 0 o (64,8):(1,64)");
    assert_eq!(p.s2r_b.name, "SM75_U16x8_LDSM_T");
    assert_eq!(p.g2s_b.thr_layout.to_string(), "(8,16):(1,8)");
    let p = Sm80Mainloop::new(&cfg([64, 64, 64], [2, 2], Major::K, Major::K)).unwrap();
    assert_eq!(p.smem_atom_b.to_string(), "Sw<3,3,3> o 0 o (8,64):(64,1)");
    assert_eq!(p.stages, 4);
    // Explicit stages and the budget.
    let mut c = Sm80MainloopConfig::bf16_tn([128, 256, 32], [2, 4]);
    c.stages = Some(3);
    assert_eq!(Sm80Mainloop::new(&c).unwrap().smem_bytes, 73728);
    c.stages = Some(10);
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::SmemBudget { .. })));
    c.stages = Some(1);
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::Stages { stages: 1 })));
    c.stages = None;
    c.smem_budget = 100 * 1024;
    c.epilogue_smem = 32 * 1024;
    assert_eq!(Sm80Mainloop::new(&c).unwrap().stages, 2);
    c.smem_budget = 40 * 1024;
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::SmemBudget { .. })));
}

#[test]
fn refusals() {
    let bad = |t: [i64; 3], w: [i64; 2]| Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn(t, w));
    assert!(matches!(bad([128, 128, 24], [2, 2]), Err(PlanError::Tile { .. })));
    assert!(matches!(bad([48, 128, 32], [2, 2]), Err(PlanError::Tile { .. })));
    assert!(matches!(bad([128, 40, 32], [2, 2]), Err(PlanError::Tile { .. })));
    assert!(matches!(bad([16, 64, 16], [1, 4]), Err(PlanError::Tile { .. }))); // 128 threads for 32 vectors of A
    let mut c = Sm80MainloopConfig::bf16_tn([128, 128, 32], [2, 2]);
    c.b = Element::F16;
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::Types { .. })));
    c.b = Element::F32;
    c.a = Element::F32;
    assert!(matches!(Sm80Mainloop::new(&c), Err(PlanError::Types { .. })));
}

fn plans() -> Vec<Sm80Mainloop> {
    let mut v = Vec::new();
    for (t, w) in SHAPES {
        for (am, bm) in MAJORS {
            v.push(Sm80Mainloop::new(&cfg(t, w, am, bm)).unwrap_or_else(|e| panic!("{t:?} {w:?}: {e}")));
        }
    }
    v
}

/// The accumulator formula `acc_coord` owns exactly the elements CuTe's TiledMMA
/// `get_layoutC_TV` gives each thread, and the whole CTA tile is covered once.
#[test]
fn acc_coords_match_tiled_mma_layout_c_tv() {
    for p in plans() {
        let tv = p.tiled_mma.layout_c_tv().unwrap();
        let tm = p.tiled_mma.tile_size(0).as_static().unwrap();
        let _tn = p.tiled_mma.tile_size(1).as_static().unwrap();
        let nv = tv.mode(1).unwrap().size().as_static().unwrap();
        let mut seen = BTreeSet::new();
        for t in 0..p.threads {
            let from_tv: BTreeSet<(i64, i64)> = (0..nv)
                .map(|v| {
                    let i = tv
                        .crd2idx(&Tuple::node([Tuple::Leaf(Int::Static(t)), Tuple::Leaf(Int::Static(v))]))
                        .unwrap();
                    let i = i.as_static().unwrap();
                    (i % tm, i / tm)
                })
                .collect();
            // One TiledMMA tile = M-atom 0 and N-atoms 0,1 of each warp.
            let mine: BTreeSet<(i64, i64)> = (0..2)
                .flat_map(|nj| (0..4).map(move |v| (nj, v)))
                .map(|(nj, v)| p.acc_coord(t, 0, nj, v))
                .collect();
            assert_eq!(from_tv, mine, "thread {t} of {:?}", p.config.tile);
            for mi in 0..p.mma_m {
                for nj in 0..p.mma_n {
                    for v in 0..4 {
                        let c = p.acc_coord(t, mi, nj, v);
                        assert!(c.0 < p.config.tile[0] && c.1 < p.config.tile[1]);
                        assert!(seen.insert(c), "{c:?} twice");
                    }
                }
            }
        }
        assert_eq!(seen.len() as i64, p.config.tile[0] * p.config.tile[1]);
    }
}

/// `ldmatrix.x4` with the plan's lane addressing delivers the MMA atom's fragment:
/// simulate the instruction (lane `8j + r` names row `r` of matrix `j`; without `.trans`
/// thread `t` receives row `t/4`, elements `2(t%4)`, `+1` of each matrix; with `.trans`
/// it receives column `t/4`, rows `2(t%4)`, `+1`) and compare with the atom's A / B TV
/// layouts.
#[test]
fn ldmatrix_lanes_deliver_the_mma_fragments() {
    let p = Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn([64, 64, 64], [2, 2])).unwrap();
    for (is_a, major) in [
        (true, Major::K),
        (true, Major::MN),
        (false, Major::K),
        (false, Major::MN),
    ] {
        let lanes = rcute_collective::LdmatrixLanes { is_a, major };
        for t in 0..32 {
            for j in 0..4 {
                for h in 0..2 {
                    // (row-provider lane, offset along the contiguous dimension)
                    let (lane, off) = if lanes.trans() {
                        (8 * j + 2 * (t % 4) + h, t / 4)
                    } else {
                        (8 * j + t / 4, 2 * (t % 4) + h)
                    };
                    let (mn, k) = lanes.lane_coord(lane);
                    let got = match major {
                        Major::K => (mn, k + off),
                        Major::MN => (mn + off, k),
                    };
                    let want = if is_a {
                        p.mma_atom.coord(Operand::A, t, 2 * j + h).unwrap()
                    } else {
                        let (n, k) = p.mma_atom.coord(Operand::B, t, 2 * (j % 2) + h).unwrap();
                        (n + 8 * (j / 2), k)
                    };
                    assert_eq!(got, want, "is_a={is_a} {major:?} t={t} reg={j} half={h}");
                }
            }
            // The C++ rendering agrees with the Rust formula.
            let (mn_cpp, k_cpp) = lanes.lane_coord_cpp("l");
            let eval = |e: &str| -> i64 {
                let e = e.replace('l', &t.to_string());
                eval_cpp(&e)
            };
            assert_eq!((eval(&mn_cpp), eval(&k_cpp)), lanes.lane_coord(t));
        }
    }
}

/// A tiny evaluator for the integer C++ the lane formulas render (`+ * >> & ()`).
fn eval_cpp(e: &str) -> i64 {
    let toks: Vec<String> = {
        let mut v = Vec::new();
        let cs: Vec<char> = e.chars().filter(|c| !c.is_whitespace()).collect();
        let mut i = 0;
        while i < cs.len() {
            if cs[i].is_ascii_digit() {
                let mut j = i;
                while j < cs.len() && cs[j].is_ascii_digit() {
                    j += 1;
                }
                v.push(cs[i..j].iter().collect());
                i = j;
            } else if cs[i] == '>' {
                v.push(">>".into());
                i += 2;
            } else {
                v.push(cs[i].to_string());
                i += 1;
            }
        }
        v
    };
    fn prec(op: &str) -> u8 {
        match op {
            "*" => 4,
            "+" => 3,
            ">>" => 2,
            "&" => 1,
            _ => 0,
        }
    }
    fn parse(t: &[String], pos: &mut usize, min: u8) -> i64 {
        let mut lhs = if t[*pos] == "(" {
            *pos += 1;
            let v = parse(t, pos, 1);
            *pos += 1;
            v
        } else {
            let v = t[*pos].parse().unwrap();
            *pos += 1;
            v
        };
        while *pos < t.len() && prec(&t[*pos]) >= min && prec(&t[*pos]) > 0 {
            let op = t[*pos].clone();
            *pos += 1;
            let rhs = parse(t, pos, prec(&op) + 1);
            lhs = match op.as_str() {
                "*" => lhs * rhs,
                "+" => lhs + rhs,
                ">>" => lhs >> rhs,
                _ => lhs & rhs,
            };
        }
        lhs
    }
    let mut pos = 0;
    parse(&toks, &mut pos, 1)
}

/// The G2S thread origins and pass steps cover the operand tile exactly once, and agree
/// with CuTe's `make_tiled_copy` TV layout (`get_layoutS_TV`).
#[test]
fn g2s_copies_cover_the_tiles() {
    for p in plans() {
        let [bm, bn, bk] = p.config.tile;
        for (g, mn) in [(&p.g2s_a, bm), (&p.g2s_b, bn)] {
            let tv = g.tiled.layout_s_tv().unwrap();
            let rows = g.tiled.tiler_mn.modes()[0].static_leaf().unwrap();
            let mut seen = BTreeSet::new();
            for t in 0..p.threads {
                let (m0, k0) = g.thread_origin(t);
                for v in 0..g.vec {
                    let (dm, dk) = if g.major == Major::K { (0, v) } else { (v, 0) };
                    let i = tv.crd2idx(&tuple!(t, v)).unwrap().as_static().unwrap();
                    assert_eq!((i % rows, i / rows), (m0 + dm, k0 + dk), "thread {t} value {v}");
                    for pass in 0..g.passes {
                        let c = (m0 + dm + pass * g.pass_step[0], k0 + dk + pass * g.pass_step[1]);
                        assert!(c.0 < mn && c.1 < bk);
                        assert!(seen.insert(c));
                    }
                }
            }
            assert_eq!(seen.len() as i64, mn * bk);
        }
    }
}

/// The swizzled smem layouts are bijections onto `0..BM*BK*stages`, keep each 8-element
/// vector contiguous (16-byte cp.async / ldmatrix rows), and the stage mode has stride
/// `BM*BK`.
#[test]
fn smem_layouts_are_vector_preserving_bijections() {
    for p in plans() {
        let [bm, bn, bk] = p.config.tile;
        for (l, mn, major) in [
            (&p.smem_layout_a, bm, p.config.a_major),
            (&p.smem_layout_b, bn, p.config.b_major),
        ] {
            let st = p.stages as i64;
            let mut seen = vec![false; (mn * bk * st) as usize];
            for s in 0..st {
                for k in 0..bk {
                    for m in 0..mn {
                        let o = l.crd2idx(&tuple!(m, k, s)).unwrap().as_static().unwrap();
                        assert!(!seen[o as usize]);
                        seen[o as usize] = true;
                        assert_eq!(o / (mn * bk), s);
                        let (vm, vk) = if major == Major::K {
                            (m, k - k % 8)
                        } else {
                            (m - m % 8, k)
                        };
                        let base = l.crd2idx(&tuple!(vm, vk, s)).unwrap().as_static().unwrap();
                        assert_eq!(o - base, if major == Major::K { k % 8 } else { m % 8 });
                    }
                }
            }
        }
    }
}
