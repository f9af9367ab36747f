use rcute_atom::mma::{is_bijection, is_broadcast_bijection};
use rcute_atom::*;
use rcute_layout::{tuple, Env, Expr, Int, Layout};

#[test]
fn every_mma_atom_tv_layout_is_a_bijection() {
    let atoms = all_mma_atoms();
    assert!(atoms.len() > 1000, "catalogue has {} atoms", atoms.len());
    for a in &atoms {
        for op in [Operand::A, Operand::B, Operand::C] {
            let (r, c) = a.tile(op);
            let tv = a.tv(op);
            assert_eq!(tv.mode(0).unwrap().size(), a.thr_id.size(), "{} {op:?}", a.name);
            if a.from_smem(op) {
                assert!(is_broadcast_bijection(tv, r * c), "{} {op:?} {tv}", a.name);
            } else {
                assert!(is_bijection(tv, r * c), "{} {op:?} {tv}", a.name);
            }
        }
    }
}

#[test]
fn m16n8k16_fragments_match_the_ptx_tables() {
    let atom = mma_sm80::sm80_16x8x16_f32_f16_f16_f32();
    for t in 0..32 {
        let (g, q) = (t / 4, t % 4);
        for v in 0..4 {
            assert_eq!(atom.coord(Operand::C, t, v), Some((g + 8 * (v / 2), 2 * q + v % 2)));
        }
        for i in 0..8 {
            let row = g + 8 * ((i / 2) % 2);
            let col = 2 * q + (i & 1) + 8 * (i / 4);
            assert_eq!(atom.coord(Operand::A, t, i), Some((row, col)), "A t={t} i={i}");
        }
        for i in 0..4 {
            // B is stored (N,K): (col n = groupID, k = 2*tig + (i&1) + 8*(i/2)).
            assert_eq!(
                atom.coord(Operand::B, t, i),
                Some((g, 2 * q + (i & 1) + 8 * (i / 2))),
                "B t={t} i={i}"
            );
        }
    }
    let s8 = mma_sm80::sm80_16x8x32_s32_s8_s8_s32();
    for t in 0..32 {
        let (g, q) = (t / 4, t % 4);
        for i in 0..16 {
            let row = g + 8 * ((i / 4) % 2);
            let col = 4 * q + (i % 4) + 16 * (i / 8);
            assert_eq!(s8.coord(Operand::A, t, i), Some((row, col)), "s8 A t={t} i={i}");
        }
    }
}

#[test]
fn wgmma_accumulator_layout() {
    let a = mma_sm90::wgmma(
        Element::F32,
        Element::BF16,
        Element::BF16,
        128,
        GmmaSource::SS,
        Major::K,
        Major::K,
    )
    .unwrap();
    assert_eq!(a.c_tv.to_string(), "((4,8,4),(2,2,16)):((128,1,16),(64,8,512))");
    assert_eq!(a.shape_mnk, [64, 128, 16]);
    // warp w, lane l: row = 16*w + l/4 + 8*(v/2 % 2), col = 2*(l%4) + v%2 + 8*(v/4).
    for t in 0..128 {
        let (w, l) = (t / 32, t % 32);
        for v in 0..64 {
            let exp = (16 * w + l / 4 + 8 * ((v / 2) % 2), 2 * (l % 4) + v % 2 + 8 * (v / 4));
            assert_eq!(a.coord(Operand::C, t, v), Some(exp));
        }
    }
    assert!(mma_sm90::wgmma(
        Element::S32,
        Element::S8,
        Element::S8,
        40,
        GmmaSource::SS,
        Major::K,
        Major::K
    )
    .is_none());
    assert!(mma_sm90::wgmma(
        Element::S32,
        Element::S8,
        Element::S8,
        48,
        GmmaSource::RS,
        Major::K,
        Major::K
    )
    .is_some());
    assert!(mma_sm90::wgmma(
        Element::F32,
        Element::F16,
        Element::F16,
        64,
        GmmaSource::RS,
        Major::MN,
        Major::K
    )
    .is_none());
    assert!(mma_sm90::wgmma(
        Element::F32,
        Element::E4M3,
        Element::E4M3,
        64,
        GmmaSource::SS,
        Major::MN,
        Major::K
    )
    .is_none());
}

#[test]
fn ldmatrix_x4_placement() {
    let atom = copy_ldsm::ldmatrix(4, false).atom(Element::F16).unwrap();
    assert_eq!(atom.val_src.to_string(), "(32,8):(8,1)");
    assert_eq!(atom.val_dst.to_string(), "(32,(2,4)):(2,(1,64))");
    // Reference index = 8*row + col over 32 rows (matrix i = rows 8i..8i+7).
    for t in 0..32i64 {
        for j in 0..2 {
            for i in 0..4 {
                let idx = atom.val_dst.crd2idx(&tuple!(t, (j, i))).unwrap().as_static().unwrap();
                let (row, col) = (idx / 8, idx % 8);
                assert_eq!((row / 8, row % 8, col), (i, t / 4, 2 * (t % 4) + j));
            }
        }
    }
    let tr = copy_ldsm::ldmatrix(4, true).atom(Element::F16).unwrap();
    assert_eq!(tr.num_val_dst(), 8);
    let st = copy_ldsm::stmatrix(2, false).atom(Element::BF16).unwrap();
    assert_eq!(st.val_dst.to_string(), "((16,2),8):((8,0),1)");
}

fn sm80_tiled() -> TiledMma {
    let atom = mma_sm80::sm80_16x8x16_f32_f16_f16_f32();
    TiledMma::new(atom, &Layout::col_major(tuple!(2, 2, 1)), &[]).unwrap()
}

#[test]
fn tiled_mma_2x2_warps_partition_shapes() {
    let mma = sm80_tiled();
    assert_eq!(mma.thr_layout_vmnk.to_string(), "(32,2,2,1):(1,32,64,0)");
    assert_eq!(mma.num_threads(), Int::Static(128));
    assert_eq!(
        [mma.tile_size(0), mma.tile_size(1), mma.tile_size(2)],
        [Int::Static(32), Int::Static(16), Int::Static(16)]
    );
    let g_a = Layout::col_major(tuple!(128, 32));
    let g_b = Layout::col_major(tuple!(128, 32));
    let g_c = Layout::col_major(tuple!(128, 128));
    let thr = mma.slice(&Int::Static(37));
    let (pa, _) = thr.partition_a(&g_a).unwrap();
    assert_eq!(pa.shape().to_string(), "((2,2,2),4,2)");
    assert_eq!(thr.partition_b(&g_b).unwrap().0.shape().to_string(), "((2,2),8,2)");
    assert_eq!(thr.partition_c(&g_c).unwrap().0.shape().to_string(), "((2,2),4,8)");
    assert_eq!(
        mma.partition_shape_a(&tuple!(128, 32)).unwrap().to_string(),
        "((2,2,2),4,2)"
    );
    let fa = thr.partition_fragment_a(&g_a).unwrap();
    assert_eq!(fa.shape().to_string(), "((2,2,2),4,2)");
    assert_eq!(fa.cosize(), Int::Static(64));
    let fc = thr.partition_fragment_c(&g_c).unwrap();
    assert_eq!(fc.to_string(), "((2,2),4,8):((1,2),4,16)");

    // Thread 37: warp 1 -> m-warp 1, n-warp 0; lane 5 -> group 1, tig 1.
    // A(0) at row 16*1 + 1 = 17, col 2 -> offset 17 + 2*128.
    let (_, off) = thr.partition_a(&g_a).unwrap();
    assert_eq!(off, Int::Static(17 + 2 * 128));

    // A symbolic thread index gives the same offsets once evaluated.
    let tid = Int::from(Expr::var("tid"));
    let sym = mma.slice(&tid);
    let (la, off_sym) = sym.partition_a(&g_a).unwrap();
    assert_eq!(la.shape().to_string(), "((2,2,2),4,2)");
    for t in 0..128 {
        let env = Env::new().with("tid", t);
        let (_, off_t) = mma.slice(&Int::Static(t)).partition_a(&g_a).unwrap();
        assert_eq!(off_sym.eval(&env).unwrap(), off_t.as_static().unwrap());
        let (_, c_sym) = sym.partition_c(&g_c).unwrap();
        let (_, c_t) = mma.slice(&Int::Static(t)).partition_c(&g_c).unwrap();
        assert_eq!(c_sym.eval(&env).unwrap(), c_t.as_static().unwrap());
    }
}

#[test]
fn tiled_mma_tv_layouts() {
    let mma = sm80_tiled();
    let c = mma.layout_c_tv().unwrap();
    assert!(is_bijection(&c, 32 * 16), "{c}");
    let a = mma.layout_a_tv().unwrap();
    assert_eq!(a.size(), Int::Static(128 * 8));
    // Each A element is held by the two N-warps.
    let mut hits = vec![0; 32 * 16];
    for v in a.values().unwrap() {
        hits[v as usize] += 1;
    }
    assert!(hits.iter().all(|&h| h == 2));
    // The thread/value -> element map of the tiled layout agrees with the atom's for warp 0.
    for t in 0..32 {
        for v in 0..4 {
            let idx = c.crd2idx(&tuple!(t, v)).unwrap().as_static().unwrap();
            let (r, col) = mma.atom.coord(Operand::C, t, v).unwrap();
            assert_eq!(idx, r + 32 * col);
        }
    }
}

#[test]
fn tiled_copy_make_and_partition() {
    let atom = copy_ldst::ld(copy_ldst::Space::Global, 16).atom(Element::F16).unwrap();
    let thr = Layout::new(tuple!(16, 8), tuple!(8, 1)).unwrap();
    let val = Layout::col_major(tuple!(1, 8));
    let tc = TiledCopy::make(atom, &thr, &val).unwrap();
    assert_eq!(tc.tiler_mn.to_string(), "(16,64)");
    let g = Layout::new(tuple!(128, 64), tuple!(64, 1)).unwrap();
    let (p, off) = tc.partition_s(&g, &Int::Static(9)).unwrap();
    assert_eq!(p.shape().to_string(), "((8,1),8,1)");
    // Thread 9 = (row 1, col-group 1): element (1, 8) in a row-major (128,64) tensor.
    assert_eq!(off, Int::Static(64 + 8));
    let s_tv = tc.layout_s_tv().unwrap();
    assert!(is_bijection(&s_tv, 16 * 64));
}

#[test]
fn tiled_copy_for_mma_with_ldmatrix() {
    let mma = sm80_tiled();
    let atom = copy_ldsm::ldmatrix(4, false).atom(Element::F16).unwrap();
    let tc = TiledCopy::for_mma_a(atom, &mma).unwrap();
    assert_eq!(tc.tiler_mn.to_string(), "(32,16)");
    let smem = Layout::new(tuple!(128, 32), tuple!(32, 1)).unwrap();
    let (p, _) = tc.partition_s(&smem, &Int::Static(0)).unwrap();
    assert_eq!(p.size(), Int::Static(64));
    // Retile the MMA fragment to the copy's view: same number of values.
    let frag = mma
        .slice(&Int::Static(0))
        .partition_fragment_a(&Layout::col_major(tuple!(128, 32)))
        .unwrap();
    let r = tc.retile(&frag).unwrap();
    assert_eq!(r.size(), frag.size());
    assert_eq!(r.mode(0).unwrap().size(), Int::Static(8));
    let tcc = TiledCopy::for_mma_c(
        copy_ldst::st(copy_ldst::Space::Shared, 4).atom(Element::F16).unwrap(),
        &mma,
    );
    let tcc = tcc.unwrap();
    assert_eq!(tcc.tiler_mn.to_string(), "(32,16)");
    assert!(is_bijection(&tcc.layout_d_tv().unwrap(), 32 * 16));
}

#[test]
fn gmma_descriptor_bits() {
    let d = GmmaDescriptor {
        start_address: 0x400,
        leading_byte_offset: 16,
        stride_byte_offset: 1024,
        base_offset: 0,
        swizzle: GmmaSwizzle::B128,
    };
    assert_eq!(d.encode().unwrap(), 0x4000_0040_0001_0040);
    assert_eq!(GmmaDescriptor::decode(0x4000_0040_0001_0040), d);
    let e = GmmaDescriptor {
        start_address: 0x3_FFF0,
        leading_byte_offset: 0x100,
        stride_byte_offset: 0x20,
        base_offset: 5,
        swizzle: GmmaSwizzle::B32,
    };
    // start 0x3FFF, lbo 0x10 << 16, sbo 0x2 << 32, base 5 << 49, type 3 << 62.
    assert_eq!(
        e.encode().unwrap(),
        0x3FFF | (0x10 << 16) | (0x2u64 << 32) | (5u64 << 49) | (3u64 << 62)
    );
    assert!(matches!(
        GmmaDescriptor { start_address: 8, ..d }.encode(),
        Err(DescError::Misaligned { .. })
    ));
    assert!(matches!(
        GmmaDescriptor {
            stride_byte_offset: 1 << 18,
            ..d
        }
        .encode(),
        Err(DescError::Overflow { .. })
    ));
    assert_eq!(
        d.device_expr("a").unwrap(),
        "(0x4000004000010000ull | (uint64_t)(((uint32_t)(a) & 0x3FFFFu) >> 4))"
    );
}

#[test]
fn gmma_smem_atoms_and_make_desc() {
    let k128 = GmmaSmemAtom::new(Major::K, GmmaSwizzle::B128, Element::BF16);
    assert_eq!(k128.layout.to_string(), "(8,64):(64,1)");
    assert_eq!(k128.swizzle.to_string(), "Sw<3,3,3>");
    let mn64 = GmmaSmemAtom::new(Major::MN, GmmaSwizzle::B64, Element::F16);
    assert_eq!(mn64.layout.to_string(), "(32,8):(1,32)");
    let kint = GmmaSmemAtom::new(Major::K, GmmaSwizzle::Interleave, Element::E4M3);
    assert_eq!(kint.layout.to_string(), "(8,16):(16,1)");
    assert_eq!(kint.swizzle.to_string(), "Sw<0,4,3>");
    // Row 1 of the 128B K-major atom: 16-byte chunk c lands in chunk c ^ 1.
    assert_eq!(k128.offset(1, 0), Some(64 + 8));

    let tile = k128.layout.tile_to_shape(&tuple!(64, 64), None).unwrap();
    let tile = tile
        .compose_tiler(&rcute_layout::algebra::Tiler::shape(&[64, 16]))
        .unwrap();
    let desc = make_gmma_desc(Major::K, GmmaSwizzle::B128, &tile, Element::BF16).unwrap();
    assert_eq!(desc.stride_byte_offset, 1024);
    assert_eq!(desc.leading_byte_offset, 16);
    let mn = GmmaSmemAtom::new(Major::MN, GmmaSwizzle::B128, Element::F16);
    let tile = mn.layout.tile_to_shape(&tuple!(64, 16), None).unwrap();
    let desc = make_gmma_desc(Major::MN, GmmaSwizzle::B128, &tile, Element::F16).unwrap();
    assert_eq!(desc.stride_byte_offset, 1024);
    let bad = Layout::col_major(tuple!(64, 16));
    assert!(make_gmma_desc(Major::K, GmmaSwizzle::B128, &bad, Element::F16).is_err());
}

#[test]
fn tma_spec_validation() {
    let g = Layout::new(tuple!("K", "M"), tuple!(1, "ldA")).unwrap();
    let spec = TmaDescriptorSpec::from_layout(Element::BF16, &g, &[64, 128], tma::TmaSwizzle::B128).unwrap();
    assert_eq!(spec.rank, 2);
    assert_eq!(spec.box_bytes(), 64 * 128 * 2);
    assert_eq!(spec.global_strides_cpp(), vec!["ldA * 2".to_string()]);
    let env = Env::new().with("K", 4096).with("M", 1000).with("ldA", 4096);
    let args = spec.to_encode_args(&env).unwrap();
    assert_eq!(args.global_dim, vec![4096, 1000]);
    assert_eq!(args.global_strides, vec![8192]);
    assert_eq!(
        (args.data_type, args.swizzle, args.box_dim.clone()),
        (9, 3, vec![64, 128])
    );
    let bad_env = Env::new().with("K", 4095).with("M", 1000).with("ldA", 4095);
    assert!(matches!(spec.to_encode_args(&bad_env), Err(TmaError::Stride { .. })));
    assert!(matches!(
        TmaDescriptorSpec::from_layout(Element::BF16, &g, &[128, 64], tma::TmaSwizzle::B128),
        Err(TmaError::SwizzleSpan { bytes: 256, span: 128 })
    ));
    assert!(matches!(
        TmaDescriptorSpec::from_layout(Element::F32, &g, &[8, 512], tma::TmaSwizzle::None),
        Err(TmaError::BoxDim { dim: 1, value: 512 })
    ));
    let rowmajor = Layout::new(tuple!(64, 64), tuple!(64, 1)).unwrap();
    assert!(matches!(
        TmaDescriptorSpec::from_layout(Element::F16, &rowmajor, &[64, 64], tma::TmaSwizzle::B128),
        Err(TmaError::NotContiguous(_))
    ));
    assert!(matches!(
        TmaDescriptorSpec::from_layout(
            Element::F16,
            &Layout::col_major(tuple!(4, 8)),
            &[4, 8],
            tma::TmaSwizzle::None
        ),
        Err(TmaError::Stride { .. }) | Err(TmaError::InnerBoxAlignment(_))
    ));
}

#[test]
fn catalogue_and_harness() {
    let all = all_atoms();
    let mut names = std::collections::HashSet::new();
    for e in &all {
        assert!(names.insert(e.snippet().name.clone()), "duplicate {}", e.snippet().name);
        assert!(e.snippet().code.contains(&e.snippet().name));
    }
    let sm80 = atoms_for(Arch::SM80);
    assert!(sm80.iter().all(|e| e.arch().sm() == 80));
    assert!(sm80.iter().any(|e| e.name() == "SM80_16x8x16_F32BF16BF16F32_TN"));
    let k = test_kernel(&mma_sm80::sm80_16x8x16_f32_bf16_bf16_f32().snippet);
    assert_eq!(k.block_threads, 32);
    assert_eq!(k.in_words_per_thread, 4 + 2 + 4);
    assert_eq!(k.out_words_per_thread, 4);
    assert!(k
        .source
        .contains("extern \"C\" __global__ void rc_test_rc_mma_m16n8k16_f32_bf16_bf16_f32("));
    let k = test_kernel(&copy_tma::tma_load(2, true, 8192).snippet);
    assert!(k.uses_tensor_map);
    assert_eq!(k.block_threads, 1);
    let k = test_kernel(&sync::elect_one_sync());
    assert_eq!(k.out_words_per_thread, 1);
    let tu = translation_unit(&all.iter().map(|e| e.snippet()).take(5).collect::<Vec<_>>());
    // Fixed-width integers come first: <cstdint> under nvcc, typedefs under NVRTC.
    assert!(tu.starts_with(rcute_atom::harness::FIXED_WIDTH_INTS));
}

/// With `RCUTE_ATOM_DUMP=<dir>`, write one translation unit per architecture (all
/// snippets) plus every test kernel, for an offline nvcc / NVRTC check.
#[test]
fn dump_translation_units() {
    let Ok(dir) = std::env::var("RCUTE_ATOM_DUMP") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for arch in [Arch::SM80, Arch::SM89, Arch::SM90, Arch::SM90A] {
        let entries = atoms_for(arch);
        let snips: Vec<&Snippet> = entries.iter().map(|e| e.snippet()).collect();
        let mut tu = translation_unit(&snips);
        // Instantiate templates and force every function to be emitted.
        tu.push('\n');
        std::fs::write(format!("{dir}/all_{}.cu", arch.as_str()), tu).unwrap();
        let mut kernels = String::new();
        for (i, e) in entries.iter().enumerate() {
            if e.arch() != arch || (matches!(e, Entry::Mma(m) if m.shape_mnk[1] > 64 && m.shape_mnk[1] != 256)) {
                continue;
            }
            let k = test_kernel(e.snippet());
            kernels.push_str(&format!(
                "namespace k{i} {{\n{}\n}}\n",
                k.source.replace("#include <cstdint>\n", "")
            ));
        }
        std::fs::write(
            format!("{dir}/kernels_{}.cu", arch.as_str()),
            format!("#include <cstdint>\n#include <cuda_fp16.h>\n{kernels}"),
        )
        .unwrap();
    }
}
