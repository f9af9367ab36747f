use proptest::prelude::*;
use rcute_layout::algebra::Tiler;
use rcute_layout::composed::compose_with_swizzle;
use rcute_layout::{s, slice_coord, tuple, AnyLayout, ComposedLayout, IntTuple, Layout, SliceCoord, Swizzle, Tuple};

fn sw(b: i32, m: i32, sh: i32) -> Swizzle {
    Swizzle::new(b, m, sh).unwrap()
}

/// Every coordinate of `shape` in column-major order, as tuples.
fn coords(shape: &IntTuple) -> Vec<IntTuple> {
    let n = shape.size().as_static().unwrap();
    (0..n).map(|i| rcute_layout::idx2crd(&s(i), shape)).collect()
}

/// Check `slice_and_offset`: for every coordinate of the free modes, the sliced layout
/// plus the offset gives the original layout at the combined coordinate.
fn check_slice(l: &AnyLayout, c: &SliceCoord) {
    let (sub, off) = l.slice_and_offset(c).unwrap();
    let off = off.as_static().unwrap();
    let full_shape = l.shape().clone();
    // Enumerate all coordinates of the full layout that agree with c on the fixed modes.
    fn agrees(c: &SliceCoord, x: &IntTuple) -> bool {
        match (c, x) {
            (Tuple::Leaf(None), _) => true,
            (Tuple::Leaf(Some(v)), Tuple::Leaf(y)) => v == y,
            (Tuple::Leaf(Some(v)), t) => {
                // integer coordinate on a nested mode: compare as index
                let sh = t.map(&mut |_| s(0)); // not used for the goldens below
                let _ = (v, sh);
                false
            }
            (Tuple::Node(cs), Tuple::Node(xs)) => cs.iter().zip(xs).all(|(a, b)| agrees(a, b)),
            _ => false,
        }
    }
    let mut got = Vec::new();
    let mut want = Vec::new();
    for x in coords(&full_shape) {
        if agrees(c, &x) {
            want.push(l.crd2idx(&x).unwrap().as_static().unwrap());
        }
    }
    for i in 0..sub.size().as_static().unwrap() {
        got.push(off + sub.at(i).unwrap().as_static().unwrap());
    }
    assert_eq!(
        got,
        want,
        "slice {} of {l}: sub {sub} offset {off}",
        rcute_layout::tensor::fmt_coord(c)
    );
}

#[test]
fn display_matches_cute() {
    let atom = sw(3, 3, 3).compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    assert_eq!(atom.to_string(), "Sw<3,3,3> o 0 o (8,64):(64,1)");
    assert_eq!(format!("{atom:#}"), "Sw<3,3,3> o _0 o (_8,_64):(_64,_1)");
    assert_eq!(atom.size(), s(512));
    assert_eq!(atom.cosize(), s(512));
    assert_eq!(atom.rank(), 2);
    assert_eq!(atom.depth(), 1);
    assert_eq!(atom.shape().to_string(), "(8,64)");
}

#[test]
fn identity_swizzle_decays() {
    let l = Layout::new(tuple!(8, 8), tuple!(8, 1)).unwrap();
    assert_eq!(sw(0, 3, 3).compose_layout(&l), AnyLayout::Plain(l.clone()));
    assert!(matches!(
        ComposedLayout::make(sw(0, 3, 3), s(1), l),
        AnyLayout::Composed(_)
    ));
}

#[test]
fn sw128_atom_tiles_and_divides() {
    // SW128 K-major atom for 16-bit elements, as in CUTLASS's GMMA layouts.
    let atom = sw(3, 4, 3).compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    let smem = atom.tile_to_shape(&tuple!(128, 64), None).unwrap();
    assert_eq!(smem.to_string(), "Sw<3,4,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))");
    let z = smem.zipped_divide(&Tiler::shape(&[64, 32])).unwrap();
    assert_eq!(z.shape().to_string(), "((64,32),(2,2))");
    let f = smem.flat_divide(&Tiler::shape(&[64, 32])).unwrap();
    assert_eq!(f.rank(), 4);
    let t = smem.tiled_divide(&Tiler::shape(&[64, 32])).unwrap();
    assert_eq!(t.rank(), 3);
    let ld = smem.logical_divide(&Tiler::shape(&[64, 32])).unwrap();
    assert_eq!(ld.values().unwrap().len(), 128 * 64);
    // The divides only rearrange the domain: same set of values.
    let mut a = smem.values().unwrap();
    let mut b = z.values().unwrap();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(a, (0..128 * 64).collect::<Vec<_>>());
}

#[test]
fn composition_rules() {
    let atom = sw(2, 0, 2).compose_layout(&Layout::new(tuple!(4, 4), tuple!(4, 1)).unwrap());
    // composed o layout: inner composed
    let t = Layout::new(tuple!(2, 2), tuple!(1, 2)).unwrap();
    let c = atom.compose(&AnyLayout::Plain(t.clone())).unwrap();
    let inner = Layout::new(tuple!(4, 4), tuple!(4, 1)).unwrap().compose(&t).unwrap();
    assert_eq!(c, ComposedLayout::make(sw(2, 0, 2), s(0), inner));
    // layout o swizzle: a new swizzle on the images of the masks
    let a = Layout::new(tuple!(16), tuple!(4)).unwrap();
    let r = compose_with_swizzle(&a, &sw(2, 0, 2)).unwrap();
    assert_eq!(r.to_string(), "Sw<2,2,2> o 0 o 16:4");
    for i in 0..16 {
        assert_eq!(
            r.at(i).unwrap(),
            s(a.at(sw(2, 0, 2).apply(i)).unwrap().as_static().unwrap())
        );
    }
    // layout o composed (zero offset)
    let rr = AnyLayout::Plain(a.clone()).compose(&atom).unwrap();
    for i in 0..16 {
        let want = a.at(atom.at(i).unwrap().as_static().unwrap()).unwrap();
        assert_eq!(rr.at(i).unwrap(), want);
    }
    // tiler composition
    let tt = atom.compose_tiler(&Tiler::shape(&[2, 2])).unwrap();
    assert_eq!(tt.to_string(), "Sw<2,0,2> o 0 o (2,2):(4,1)");
}

#[test]
fn inverses() {
    let atom = sw(3, 3, 3).compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    let inv = atom.right_inverse().unwrap();
    for i in 0..512 {
        let v = atom.at(i).unwrap();
        assert_eq!(inv.crd2idx(&Tuple::Leaf(v)).unwrap(), s(i));
    }
    let linv = atom.left_inverse().unwrap();
    for i in 0..512 {
        assert_eq!(linv.crd2idx(&Tuple::Leaf(atom.at(i).unwrap())).unwrap(), s(i));
    }
}

#[test]
fn upcast_downcast() {
    let atom = sw(3, 4, 3).compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    let up = atom.upcast(8).unwrap();
    assert_eq!(up.to_string(), "Sw<3,1,3> o 0 o (8,8):(8,1)");
    // upcast(8) groups 8 elements: element values divide by 8.
    for r in 0..8 {
        for c in 0..8 {
            let v = atom.crd2idx(&tuple!(r, { c * 8 })).unwrap().as_static().unwrap();
            assert_eq!(up.crd2idx(&tuple!(r, c)).unwrap(), s(v / 8));
        }
    }
    let down = up.downcast(8).unwrap();
    assert_eq!(down, atom);
    assert_eq!(atom.recast(16, 128).unwrap(), up);
}

#[test]
fn swizzle_slices_golden() {
    let atom = sw(3, 3, 3).compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    let tile = atom.tile_to_shape(&tuple!(32, 64), None).unwrap();
    for c in [
        slice_coord!(1, _),
        slice_coord!(_, 8),
        slice_coord!(_, 17),
        slice_coord!(5, _),
        slice_coord!(_, _),
    ] {
        check_slice(&atom, &c);
    }
    for c in [
        slice_coord!((_, 1), _),
        slice_coord!((3, _), _),
        slice_coord!((_, 2), _),
        slice_coord!((3, 2), _),
    ] {
        check_slice(&tile, &c);
    }
    // all-underscore: reshape only
    let (l, off) = atom.slice_and_offset(&slice_coord!(_, _)).unwrap();
    assert_eq!((l, off), (atom.clone(), s(0)));
}

#[test]
fn symbolic_slice_keeps_the_swizzle() {
    let atom = sw(3, 3, 3).compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    let (l, off) = atom.slice_and_offset(&slice_coord!("r", _)).unwrap();
    assert_eq!(off, s(0));
    assert_eq!(l.to_string(), "Sw<3,3,3> o r*64 o (64):(1)");
    let env = rcute_layout::Env::new().with("r", 3);
    for c in 0..64 {
        let v = l.at(c).unwrap().eval(&env).unwrap();
        assert_eq!(s(v), atom.crd2idx(&tuple!(3, c)).unwrap());
    }
}

proptest! {
    /// Swizzle of a composed layout equals the swizzle applied to the inner values.
    #[test]
    fn composed_is_swizzle_of_inner(b in 0i32..4, m in 0i32..4, extra in 0i32..3, off in 0i64..64,
                                    s0 in 1i64..9, s1 in 1i64..9, d0 in 0i64..40, d1 in 0i64..40) {
        let swz = sw(b, m, b + extra);
        let inner = Layout::new(Tuple::node([Tuple::Leaf(s(s0)), Tuple::Leaf(s(s1))]),
                                Tuple::node([Tuple::Leaf(s(d0)), Tuple::Leaf(s(d1))])).unwrap();
        let c = ComposedLayout::new(swz, off, inner.clone());
        let vals = c.values().unwrap();
        let inner_vals = inner.values().unwrap();
        for (v, iv) in vals.iter().zip(inner_vals) {
            prop_assert_eq!(*v, swz.apply(off + iv));
        }
        prop_assert_eq!(c.size(), inner.size());
    }

    /// Slicing a swizzled compact layout at any row or column agrees with evaluation.
    #[test]
    fn composed_slices_agree(b in 1i32..4, m in 0i32..3, extra in 0i32..2, r in 0i64..16, col in 0i64..32) {
        let swz = sw(b, m, b + extra);
        let l = AnyLayout::Composed(ComposedLayout::new(swz, 0, Layout::row_major(tuple!(16, 32))));
        check_slice(&l, &slice_coord!({r}, _));
        check_slice(&l, &slice_coord!(_, {col}));
    }
}
