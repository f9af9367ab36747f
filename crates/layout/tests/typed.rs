use rcute_layout::typed::{Fragment, SizeOf, StaticLayout, TLayout};
use rcute_layout::{tuple, Layout};
use typenum::{Unsigned, U0, U1, U16, U2, U32, U4, U64, U8};

#[test]
fn value_layout_matches() {
    type Atom = TLayout<(U16, U8), (U1, U16)>;
    assert_eq!(Atom::layout(), Layout::new(tuple!(16, 8), tuple!(1, 16)).unwrap());
    type R4 = TLayout<(U2, U4, (U2, U2), U1), (U1, U2, (U8, U16), U0)>;
    assert_eq!(
        R4::layout(),
        Layout::new(tuple!(2, 4, (2, 2), 1), tuple!(1, 2, (8, 16), 0)).unwrap()
    );
    assert_eq!(R4::SIZE, 32);
    type Leaf = TLayout<U32, U1>;
    assert_eq!(Leaf::layout().to_string(), "32:1");
    assert_eq!(<SizeOf<Leaf> as Unsigned>::USIZE, 32);
}

#[test]
fn fragment_is_sized_by_the_layout() {
    type Acc = TLayout<((U2, U2), U4, U4), ((U1, U2), U4, U16)>;
    let f: Fragment<f32, Acc> = Default::default();
    assert_eq!(f.len(), 64);
    assert_eq!(<Acc as StaticLayout>::layout().size().as_static(), Some(64));
    let g: Fragment<u8, TLayout<(U64,), (U1,)>> = Default::default();
    assert_eq!(g.len(), 64);
}
