use proptest::prelude::*;
use rcute_atom::*;
use rcute_layout::{tuple, Int, Layout};

proptest! {
    #[test]
    fn descriptor_roundtrip(start in 0u32..(1 << 14), lbo in 0u32..(1 << 14), sbo in 0u32..(1 << 14), base in 0u8..8, ty in 0u8..4) {
        let d = GmmaDescriptor {
            start_address: start << 4,
            leading_byte_offset: lbo << 4,
            stride_byte_offset: sbo << 4,
            base_offset: base,
            swizzle: GmmaSwizzle::from_layout_type(ty).unwrap(),
        };
        let bits = d.encode().unwrap();
        prop_assert_eq!(GmmaDescriptor::decode(bits), d);
        prop_assert_eq!(bits & (0b11 << 14), 0);
    }

    #[test]
    fn wgmma_c_bijection_any_n(i in 1i64..=32) {
        let a = mma_sm90::wgmma(Element::F32, Element::F16, Element::F16, 8 * i, GmmaSource::RS, Major::K, Major::K).unwrap();
        prop_assert!(mma::is_bijection(&a.c_tv, 64 * 8 * i));
        prop_assert!(mma::is_bijection(&a.a_tv, 64 * 16));
    }

    #[test]
    fn tiled_mma_c_partitions_cover_the_tile(wm in 1i64..=2, wn in 1i64..=2) {
        let atom = mma_sm80::sm80_16x8x16_f32_bf16_bf16_f32();
        let mma = TiledMma::new(atom, &Layout::col_major(tuple!(wm, wn, 1)), &[]).unwrap();
        let (m, n) = (64i64, 32i64);
        let c = Layout::col_major(tuple!(m, n));
        let mut hits = vec![0u32; (m * n) as usize];
        let nt = mma.num_threads().as_static().unwrap();
        for t in 0..nt {
            let (p, off) = mma.slice(&Int::Static(t)).partition_c(&c).unwrap();
            let off = off.as_static().unwrap();
            for v in p.values().unwrap() {
                hits[(off + v) as usize] += 1;
            }
        }
        prop_assert!(hits.iter().all(|&h| h == 1));
    }
}
