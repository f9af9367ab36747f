use proptest::prelude::*;
use rcute_layout::{d, s, Env, Swizzle};

fn any_swizzle() -> impl Strategy<Value = Swizzle> {
    (0i32..5, 0i32..6, 0i32..7, any::<bool>()).prop_filter_map("|S| >= B", |(b, m, s, neg)| {
        let sh = if neg { -s } else { s };
        Swizzle::new(b, m, sh).ok()
    })
}

proptest! {
    #[test]
    fn swizzle_is_an_involution(sw in any_swizzle(), x in 0i64..(1 << 20)) {
        prop_assert_eq!(sw.apply(sw.apply(x)), x);
    }

    #[test]
    fn swizzle_is_a_bijection_on_aligned_blocks(sw in any_swizzle()) {
        let n = 1i64 << (sw.bits() as i64 + sw.base() as i64 + sw.shift().unsigned_abs() as i64);
        let mut seen: Vec<i64> = (0..n).map(|x| sw.apply(x)).collect();
        seen.sort();
        prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn symbolic_swizzle_evaluates_like_apply(sw in any_swizzle(), x in 0i64..(1 << 20)) {
        let e = sw.apply_expr(&d("x"));
        prop_assert_eq!(e.eval(&Env::new().with("x", x)).unwrap(), sw.apply(x));
    }

    #[test]
    fn only_the_z_bits_change(sw in any_swizzle(), x in 0i64..(1 << 20)) {
        prop_assert_eq!((sw.apply(x) ^ x) & !sw.zzz_mask(), 0);
    }
}

#[test]
fn cute_masks_and_values() {
    // Swizzle<3,4,3>: the 128B swizzle for 16-bit elements in units of 16 B chunks.
    let sw = Swizzle::new(3, 4, 3).unwrap();
    assert_eq!(sw.yyy_mask(), 0b111_0000000);
    assert_eq!(sw.zzz_mask(), 0b111_0000);
    assert_eq!(sw.swizzle_code(), 0b1111110000);
    // row r of 8 (each row 128 elements) XORs chunk index with r
    for r in 0..8 {
        for chunk in 0..8 {
            assert_eq!(sw.apply(r * 128 + chunk * 16 + 3), r * 128 + ((chunk ^ r) * 16) + 3);
        }
    }
    assert_eq!(sw.to_string(), "Sw<3,4,3>");
    assert_eq!(format!("{sw:?}"), "Sw<3,4,3>");
}

#[test]
fn validation() {
    assert!(Swizzle::new(-1, 0, 0).is_err());
    assert!(Swizzle::new(0, -1, 0).is_err());
    assert!(Swizzle::new(3, 0, 2).is_err());
    assert!(Swizzle::new(3, 0, -2).is_err());
    assert!(Swizzle::new(3, 0, -3).is_ok());
    assert!(Swizzle::new(30, 30, 30).is_err());
    let e = Swizzle::new(3, 0, 2).unwrap_err();
    assert!(e.to_string().contains("abs(SShift)"), "{e}");
}

#[test]
fn symbolic_rendering() {
    let sw = Swizzle::new(3, 3, 3).unwrap();
    let e = sw.apply_expr(&d("off"));
    assert_eq!(e.to_cpp(), "off ^ ((off & 448) >> 3)");
    assert_eq!(e.to_string(), "off^((off&448)>>3)");
    let neg = Swizzle::new(2, 0, -4).unwrap();
    assert_eq!(neg.apply_expr(&d("x")).to_cpp(), "x ^ ((x & 3) << 4)");
    let sum = d("i").mul(&s(64)).add(&d("j"));
    assert_eq!(
        sw.apply_expr(&sum).to_cpp(),
        "(i * 64 + j) ^ (((i * 64 + j) & 448) >> 3)"
    );
    assert_eq!(sw.apply_expr(&s(72)), s(64));
}

#[test]
fn masks_round_trip_and_merge() {
    for (b, m, sh) in [(1, 2, 1), (2, 1, 5), (3, 4, 3), (2, 0, -3)] {
        let sw = Swizzle::new(b, m, sh).unwrap();
        assert_eq!(Swizzle::from_masks(sw.yyy_mask(), sw.zzz_mask()).unwrap(), sw);
    }
    assert!(Swizzle::from_masks(0b1000, 0b0110).is_err());
    // Sw<1,4,3> merged with Sw<1,5,3> covers two bits: Sw<2,4,3>.
    let a = Swizzle::new(1, 4, 3).unwrap();
    let b = Swizzle::new(1, 5, 3).unwrap();
    assert_eq!(a.compose(&b).unwrap().to_string(), "Sw<2,4,3>");
    assert!(a.compose(&Swizzle::new(1, 4, 2).unwrap()).is_err());
}

#[test]
fn upcast_downcast_match_cute() {
    let sw = Swizzle::new(3, 4, 3).unwrap();
    assert_eq!(sw.upcast(2).unwrap().to_string(), "Sw<3,3,3>");
    assert_eq!(sw.upcast(64).unwrap().to_string(), "Sw<1,0,3>");
    assert_eq!(sw.downcast(4).unwrap().to_string(), "Sw<3,6,3>");
    assert_eq!(sw.recast(16, 32).unwrap().to_string(), "Sw<3,3,3>");
    assert!(sw.upcast(3).is_err());
}
