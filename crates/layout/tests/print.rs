//! `print_layout`-style tables (crate `print` module).

use rcute_layout::{tuple, Layout};

#[test]
fn matches_cute_print_layout_format() {
    // Hand-written from CuTe's print_layout (util/print_tensor.hpp): width of each cell
    // is num_digits(cosize) + 2, rows are indexed with "%2d  ".
    let l = Layout::new(tuple!(2, 3), tuple!(3, 1)).unwrap();
    let expected = "\
(2,3):(3,1)
      0   1   2
    +---+---+---+
 0  | 0 | 1 | 2 |
    +---+---+---+
 1  | 3 | 4 | 5 |
    +---+---+---+
";
    assert_eq!(l.to_table().unwrap(), expected);
}

#[test]
fn cell_width_follows_cosize() {
    // cosize 10: two digits although the largest offset is 9, as in CuTe.
    let l = Layout::new(tuple!(2, 5), tuple!(5, 1)).unwrap();
    let t = l.to_table().unwrap();
    assert!(t.contains("|  9 |"), "{t}");
    assert!(t.contains("+----+"), "{t}");
}

#[test]
fn nested_layout_snapshot() {
    let l = Layout::new(tuple!((2, 2), (2, 4)), tuple!((1, 8), (2, 16))).unwrap();
    insta::assert_snapshot!("nested_2x2_2x4", l.to_table().unwrap());
}

#[test]
fn rank1_is_one_row() {
    let l = Layout::new(tuple!((2, 3)), tuple!((3, 1))).unwrap();
    insta::assert_snapshot!("rank1_row", l.to_table().unwrap());
}

#[test]
fn negative_strides() {
    let l = Layout::new(tuple!(2, 2), rcute_layout::IntTuple::from_static(&[-1, 10])).unwrap();
    let t = l.to_table().unwrap();
    assert!(t.contains("|  0 | 10 |"), "{t}");
    assert!(t.contains("| -1 |  9 |"), "{t}");
}

#[test]
fn undefined_cases_are_errors() {
    assert!(Layout::col_major(tuple!(2, 2, 2)).to_table().is_err());
    assert!(Layout::new(tuple!("M", 2), tuple!(1, "M")).unwrap().to_table().is_err());
    assert!(Layout::col_major(tuple!(1024, 1024)).to_table().is_err());
    let empty = Layout::col_major(rcute_layout::Tuple::Node(vec![]));
    assert!(empty.to_table().is_err());
}
