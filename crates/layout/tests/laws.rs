//! Property tests: the laws CuTe's own unit tests check for its algebra.

use proptest::prelude::*;
use rcute_layout::algebra::Tiler;
use rcute_layout::{s, IntTuple, Layout, Tuple};
use std::collections::HashSet;

/// A random static shape: rank 1..=3, depth <= 2, extents 1..=6.
fn shape() -> impl Strategy<Value = IntTuple> {
    let leaf = (1i64..=6).prop_map(IntTuple::from);
    let mode = prop_oneof![
        3 => leaf.clone(),
        1 => prop::collection::vec(leaf.clone(), 1..=2).prop_map(Tuple::Node),
    ];
    prop_oneof![
        1 => leaf,
        3 => prop::collection::vec(mode, 1..=3).prop_map(Tuple::Node),
    ]
}

/// A compact layout of a random shape with its modes packed in a random order (injective).
fn compact_permuted() -> impl Strategy<Value = Layout> {
    shape()
        .prop_flat_map(|sh| {
            let n = sh.leaves().len();
            (Just(sh), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
        })
        .prop_map(|(sh, perm)| {
            let order = IntTuple::from_static(&perm.iter().map(|&x| x as i64).collect::<Vec<_>>())
                .unflatten(&sh)
                .expect("same leaf count");
            Layout::ordered(&sh, &order).expect("valid order")
        })
}

/// A layout with arbitrary strides in 0..=24 (often non-injective).
fn any_layout() -> impl Strategy<Value = Layout> {
    shape()
        .prop_flat_map(|sh| {
            let n = sh.leaves().len();
            (Just(sh), prop::collection::vec(0i64..=24, n))
        })
        .prop_map(|(sh, st)| {
            let stride = IntTuple::from_static(&st).unflatten(&sh).expect("same leaf count");
            Layout::new(sh, stride).expect("congruent")
        })
}

/// A compact column-major `a` and a `b` whose modes are runs of `a`'s modes, in random
/// order and nesting: the strongly admissible case where `a ∘ b` is exact.
fn compact_and_admissible() -> impl Strategy<Value = (Layout, Layout)> {
    prop::collection::vec(1i64..=4, 1..=5)
        .prop_flat_map(|ext| {
            let n = ext.len();
            (
                Just(ext),
                prop::collection::vec(any::<bool>(), n),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            )
        })
        .prop_map(|(ext, cuts, perm)| {
            let a = Layout::col_major(IntTuple::from_static(&ext));
            // Prefix products of a's extents give the stride where each run starts.
            let mut pre = vec![1i64];
            for e in &ext {
                pre.push(pre.last().unwrap() * e);
            }
            let mut runs: Vec<(usize, usize)> = Vec::new();
            let mut start = 0;
            for (i, &cut) in cuts.iter().enumerate() {
                if i + 1 == ext.len() || cut {
                    runs.push((start, i + 1));
                    start = i + 1;
                }
            }
            let order: Vec<usize> = perm.into_iter().filter(|&p| p < runs.len()).collect();
            let modes: Vec<Layout> = order
                .iter()
                .map(|&k| {
                    let (p, q) = runs[k];
                    Layout::new(IntTuple::from(pre[q] / pre[p]), IntTuple::from(pre[p])).unwrap()
                })
                .collect();
            let b = if modes.len() == 1 {
                modes[0].clone()
            } else {
                Layout::concat(&modes)
            };
            (a, b)
        })
}

fn vals(l: &Layout) -> Vec<i64> {
    l.values().expect("static layout")
}

fn size(l: &Layout) -> i64 {
    l.size().as_static().expect("static size")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn coalesce_keeps_the_function(a in any_layout()) {
        let c = a.coalesce();
        prop_assert_eq!(c.size(), a.size());
        prop_assert!(c.depth() <= 1);
        prop_assert_eq!(vals(&c), vals(&a));
    }

    #[test]
    fn coalesce_by_profile_keeps_the_function(a in any_layout()) {
        let profile = a.shape().repeat_like(&()).map(&mut |_| ());
        let top: Tuple<()> = match &profile { Tuple::Node(m) => Tuple::Node(m.iter().map(|_| Tuple::Leaf(())).collect()), l => l.clone() };
        let c = a.coalesce_by(&top).unwrap();
        prop_assert_eq!(c.rank(), a.rank());
        prop_assert_eq!(vals(&c), vals(&a));
    }

    #[test]
    fn filter_keeps_the_image(a in any_layout()) {
        let f = a.filter();
        let img_a: HashSet<i64> = vals(&a).into_iter().collect();
        let img_f: HashSet<i64> = vals(&f).into_iter().collect();
        prop_assert_eq!(img_a, img_f);
    }

    #[test]
    fn composition_is_function_composition((a, b) in compact_and_admissible()) {
        let r = a.compose(&b).unwrap();
        prop_assert_eq!(r.size(), b.size());
        for (i, bi) in vals(&b).iter().enumerate() {
            prop_assert_eq!(r.at(i as i64).unwrap(), a.at(*bi).unwrap(), "A = {}, B = {}, R = {}", a, b, r);
        }
        // The result is compatible with b: the same size in every top-level mode.
        if let Tuple::Node(m) = b.shape() {
            prop_assert_eq!(r.rank(), m.len());
            for i in 0..m.len() {
                prop_assert_eq!(r.mode(i).unwrap().size(), b.mode(i).unwrap().size());
            }
        }
    }

    #[test]
    fn composition_never_changes_size(a in compact_permuted(), b in any_layout()) {
        // Outside the strongly admissible cases CuTe still returns a layout of b's size
        // (or rejects it); the values there are CuTe's, not a law.
        if let Ok(r) = a.compose(&b) {
            prop_assert_eq!(r.size(), b.size());
        }
    }

    #[test]
    fn composition_with_compact_rhs_is_defined(a in compact_permuted(), n in 1i64..=4) {
        // Composing with a prefix n:1 of a's size (when n divides the first mode or vice
        // versa) is one of the cases CuTe always accepts.
        let sz = size(&a);
        if sz % n == 0 {
            let b = Layout::new(IntTuple::from(n), IntTuple::from(1)).unwrap();
            let r = a.compose(&b);
            if let Ok(r) = r {
                for i in 0..n {
                    prop_assert_eq!(r.at(i).unwrap(), a.at(i).unwrap());
                }
            }
        }
    }

    #[test]
    fn complement_is_disjoint_ordered_and_large_enough(a in compact_permuted(), extra in 1i64..=4) {
        let cotarget = a.cosize().as_static().unwrap() * extra;
        let c = a.complement(&IntTuple::from(cotarget)).unwrap();
        let cv = vals(&c);
        // Ordered: strictly increasing.
        for w in cv.windows(2) {
            prop_assert!(w[0] < w[1], "complement not ordered: {}", c);
        }
        // Disjoint: a(j) + c(i) never collides except through 0.
        let av: HashSet<i64> = vals(&a).into_iter().collect();
        for &x in &cv[1..] {
            prop_assert!(!av.contains(&x), "complement {} hits {} of {}", c, x, a);
        }
        // Size bound: size(c) >= cotarget / size(filter(a)).
        let fsize = size(&a.filter());
        prop_assert!(size(&c) >= cotarget / fsize);
        // (a, c) is injective and covers [0, cotarget) when a is compact.
        let both = Layout::concat(&[a.clone(), c.clone()]);
        let all: HashSet<i64> = vals(&both).into_iter().collect();
        prop_assert_eq!(all.len() as i64, size(&both));
    }

    #[test]
    fn right_inverse_law(a in any_layout()) {
        let r = a.right_inverse();
        for i in 0..size(&r) {
            let ri = r.at(i).unwrap();
            prop_assert_eq!(a.at(ri.as_static().unwrap()).unwrap(), s(i), "R = {}", r);
        }
    }

    #[test]
    fn left_inverse_law(a in compact_permuted()) {
        let l = a.left_inverse().unwrap();
        for i in 0..size(&a) {
            let ai = a.at(i).unwrap().as_static().unwrap();
            let back = l.at(ai).unwrap().as_static().unwrap();
            prop_assert_eq!(a.at(back).unwrap().as_static().unwrap(), ai, "L = {}", l);
        }
    }

    #[test]
    fn logical_divide_structure(a in compact_permuted(), t in 1i64..=4) {
        // The tiler must divide the first mode of coalesce(a) for the divide to be exact.
        let first = a.coalesce().shape().leaves()[0].as_static().unwrap();
        if first % t == 0 {
            let tiler = Tiler::Int(s(t));
            if let Ok(d) = a.logical_divide(&tiler) {
                prop_assert_eq!(d.rank(), 2);
                prop_assert_eq!(d.mode(0).unwrap().size(), s(t));
                prop_assert_eq!(d.size(), a.size());
                // The divided layout enumerates the same offsets as a, tile by tile.
                let mut dv = vals(&d);
                let mut av = vals(&a);
                dv.sort();
                av.sort();
                prop_assert_eq!(dv, av);
                let z = a.zipped_divide(&tiler).unwrap();
                prop_assert_eq!(vals(&z), vals(&d));
            }
        }
    }

    #[test]
    fn logical_product_structure(a in compact_permuted(), b in compact_permuted()) {
        if let Ok(p) = a.logical_product(&Tiler::Layout(b.clone())) {
            prop_assert_eq!(p.rank(), 2);
            prop_assert_eq!(p.mode(0).unwrap(), a.clone());
            prop_assert_eq!(p.size(), a.size().mul(&b.size()));
            // Copies of the block do not overlap.
            let all: HashSet<i64> = vals(&p).into_iter().collect();
            prop_assert_eq!(all.len() as i64, size(&p));
        }
    }

    #[test]
    fn blocked_and_raked_products_are_permutations(a in compact_permuted(), b in compact_permuted()) {
        for p in [a.blocked_product(&b), a.raked_product(&b)].into_iter().flatten() {
            prop_assert_eq!(p.size(), a.size().mul(&b.size()));
            let all: HashSet<i64> = vals(&p).into_iter().collect();
            prop_assert_eq!(all.len() as i64, size(&p));
        }
    }

    #[test]
    fn upcast_downcast_round_trip(a in compact_permuted(), n in prop::sample::select(vec![2i64, 4])) {
        prop_assume!(a.stride().leaves().iter().any(|d| d.is_const(1)));
        let down = a.downcast(n).unwrap();
        prop_assert_eq!(down.size(), a.size().mul(&s(n)));
        let up = down.upcast(n).unwrap();
        prop_assert_eq!(vals(&up), vals(&a));
    }

    #[test]
    fn no_operation_panics(a in any_layout(), b in any_layout(), n in -3i64..=8) {
        let t = Tiler::Layout(b.clone());
        let _ = a.compose(&b);
        let _ = a.complement(&IntTuple::from(n));
        let _ = a.complement_full();
        let _ = a.left_inverse();
        let _ = a.right_inverse();
        let _ = a.logical_divide(&t);
        let _ = a.zipped_divide(&t);
        let _ = a.tiled_divide(&t);
        let _ = a.flat_divide(&t);
        let _ = a.logical_product(&t);
        let _ = a.zipped_product(&t);
        let _ = a.blocked_product(&b);
        let _ = a.raked_product(&b);
        let _ = a.tile_to_shape(b.shape(), None);
        let _ = a.upcast(n);
        let _ = a.downcast(n);
        let _ = a.max_common_vector(&b);
        let _ = a.max_common_layout(&b);
        let _ = a.layout_like();
    }
}
