use rcute_layout::algebra::Tiler;
use rcute_layout::tensor::{dice_tuple, flat_coord};
use rcute_layout::{
    d, make_identity_tensor, s, slice_coord, tuple, AnyLayout, Engine, Env, Layout, Swizzle, Tensor, Tuple,
};

#[test]
fn zipped_divide_golden() {
    let t = Tensor::new(Engine::gmem("A"), Layout::col_major(tuple!(128, 64)));
    let z = t.zipped_divide(&Tiler::shape(&[32, 16])).unwrap();
    assert_eq!(z.shape().to_string(), "((32,16),(4,4))");
    assert_eq!(z.layout.to_string(), "((32,16),(4,4)):((1,128),(32,2048))");
    assert_eq!(
        t.tiled_divide(&Tiler::shape(&[32, 16])).unwrap().shape().to_string(),
        "((32,16),4,4)"
    );
    assert_eq!(
        t.flat_divide(&Tiler::shape(&[32, 16])).unwrap().shape().to_string(),
        "(32,16,4,4)"
    );
    assert_eq!(
        t.logical_divide(&Tiler::shape(&[32, 16])).unwrap().shape().to_string(),
        "((32,4),(16,4))"
    );
}

#[test]
fn local_tile_with_projection() {
    let a = Tensor::new(Engine::gmem("A"), Layout::col_major(tuple!(256, 128)));
    let tiler = Tiler::shape(&[64, 64, 32]);
    let cta = a
        .local_tile_proj(&tiler, &slice_coord!(1, 2, _), &slice_coord!(1, _, 1))
        .unwrap();
    assert_eq!(cta.shape().to_string(), "(64,32,4)");
    // tile (1, k): rows 64..128, all four 32-column k-tiles
    assert_eq!(cta.engine.offset(), Some(&s(64)));
    assert_eq!(cta.layout.to_string(), "(64,32,4):(1,256,8192)");
    // B: Step<X,_1,_1> with a (128,256) K-major B tensor
    let b = Tensor::new(Engine::gmem("B"), Layout::col_major(tuple!(128, 128)));
    let ctab = b
        .local_tile_proj(&tiler, &slice_coord!(1, 1, _), &slice_coord!(_, 1, 1))
        .unwrap();
    assert_eq!(ctab.shape().to_string(), "(64,32,4)");
    assert_eq!(ctab.engine.offset(), Some(&s(64)));
    // C: Step<_1,_1,X>
    let c = Tensor::new(Engine::gmem("C"), Layout::col_major(tuple!(256, 128)));
    let ctac = c
        .local_tile_proj(&tiler, &slice_coord!(1, 1, _), &slice_coord!(1, 1, _))
        .unwrap();
    assert_eq!(ctac.to_string(), "gmem(C+16448) o (64,64):(1,256)");
    // dice of a coordinate
    let dc = dice_tuple(&slice_coord!(1, _, 1), &slice_coord!(1, 2, _)).unwrap();
    assert_eq!(rcute_layout::tensor::fmt_coord(&dc), "(1,_)");
}

#[test]
fn local_partition_of_smem_tile_by_threads() {
    // (16,16) column-major smem tile, (4,8) column-major threads.
    let tile = Tensor::new(Engine::smem("sA"), Layout::col_major(tuple!(16, 16)));
    let thr = Layout::col_major(tuple!(4, 8));
    let mut seen = vec![0; 256];
    for t in 0..32i64 {
        let p = tile.local_partition(&thr, t).unwrap();
        assert_eq!(p.shape().to_string(), "(4,2)");
        assert_eq!(p.layout.to_string(), "(4,2):(4,128)");
        // thread t sits at (t%4, t/4) of the thread grid: rows t%4 + 4i, columns t/4 + 8j
        let off = p.engine.offset().unwrap().as_static().unwrap();
        assert_eq!(off, (t % 4) + (t / 4) * 16);
        for i in 0..4 {
            for j in 0..2 {
                let v = off + p.layout.crd2idx(&tuple!(i, j)).unwrap().as_static().unwrap();
                assert_eq!(v, (t % 4 + 4 * i) + (t / 4 + 8 * j) * 16);
                seen[v as usize] += 1;
            }
        }
    }
    assert!(seen.iter().all(|&n| n == 1));
    assert_eq!(tile.local_partition(&thr, 5).unwrap().engine.offset(), Some(&s(17)));
    // symbolic thread index
    let p = tile.local_partition(&thr, d("tid")).unwrap();
    assert_eq!(p.engine.to_cpp(), "sA + tid % 4 + tid / 4 % 8 * 16");
    assert_eq!(
        p.element(&tuple!(1, 1)).unwrap(),
        "sA + tid % 4 + tid / 4 % 8 * 16 + 132"
    );
    // row-major threads: thread t at (t/8, t%8)
    let thr_r = Layout::new(tuple!(4, 8), tuple!(8, 1)).unwrap();
    assert_eq!(flat_coord(&thr_r, &s(13)).to_string(), "(1,5)");
    let p = tile.local_partition(&thr_r, 13).unwrap();
    assert_eq!(p.engine.offset(), Some(&s(1 + 5 * 16)));
}

#[test]
fn local_partition_with_projection() {
    // CuTe's example: thr_layout (2,16,1):(16,1,0) projected with Step<_1,X,_1> on A (M,K).
    let a = Tensor::new(Engine::smem("sA"), Layout::col_major(tuple!(64, 8)));
    let thr = Layout::new(tuple!(2, 16, 1), tuple!(16, 1, 0)).unwrap();
    let p = a.local_partition_proj(&thr, 17, &slice_coord!(1, _, 1)).unwrap();
    assert_eq!(p.shape().to_string(), "(32,8)");
    // thread 17 -> coordinate (17/16 % 2, 0) = (1, 0) in the diced (2,1):(16,0) layout
    assert_eq!(p.engine.offset(), Some(&s(1)));
}

#[test]
fn dynamic_global_tile_renders_cpp() {
    let a = Tensor::new(
        Engine::gmem("A"),
        Layout::new(tuple!("M", "K"), tuple!("ldA", 1)).unwrap(),
    );
    let blk = a.local_tile(&Tiler::shape(&[128, 32]), &slice_coord!("bx", _)).unwrap();
    assert_eq!(blk.shape().to_string(), "(128,32,ceil_div(K,32))");
    let cpp = blk.engine.to_cpp();
    assert_eq!(cpp, "A + bx * (ldA * 128)");
    let off = blk.engine.offset().unwrap();
    let env = Env::new().with("bx", 3).with("ldA", 1000);
    assert_eq!(off.eval(&env), Ok(3 * 128 * 1000));
    // the k-th tile of the block row, then a symbolic thread's element
    let k = blk.slice(&slice_coord!(_, _, "k")).unwrap();
    assert_eq!(k.engine.to_cpp(), "A + bx * (ldA * 128) + k * 32");
    assert_eq!(k.to_string(), "gmem(A+bx*(ldA*128)+k*32) o (128,32):(ldA,1)");
}

#[test]
fn identity_tensor_tracks_coordinates() {
    let c = make_identity_tensor(&tuple!(128, 64));
    let z = c.zipped_divide(&Tiler::shape(&[32, 16])).unwrap();
    assert_eq!(z.shape().to_string(), "((32,16),(4,4))");
    let blk = c.local_tile(&Tiler::shape(&[32, 16]), &slice_coord!(2, 3)).unwrap();
    assert_eq!(blk.engine.to_cpp(), "(64,48)");
    let thr = Layout::col_major(tuple!(4, 8));
    let p = blk.local_partition(&thr, 9).unwrap(); // thread (1,2)
    assert_eq!(p.shape().to_string(), "(8,2)");
    assert_eq!(p.element(&tuple!(0, 0)).unwrap(), "(65,50)");
    assert_eq!(p.element(&tuple!(3, 1)).unwrap(), "(77,58)");
    // symbolic block index
    let b = c.local_tile(&Tiler::shape(&[32, 16]), &slice_coord!("bx", 0)).unwrap();
    assert_eq!(b.engine.to_string(), "ArithTuple(bx*32,0)");
}

#[test]
fn swizzled_smem_partition_matches_evaluation() {
    let atom = Swizzle::new(3, 3, 3)
        .unwrap()
        .compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    let smem = atom.tile_to_shape(&tuple!(32, 64), None).unwrap();
    let t: Tensor<AnyLayout> = Tensor::new(Engine::smem("sA"), smem.clone());
    let thr = Layout::new(tuple!(8, 16), tuple!(16, 1)).unwrap();
    for tid in [0i64, 1, 17, 127] {
        let p = t.local_partition(&thr, tid).unwrap();
        assert_eq!(p.shape().to_string(), "(4,4)");
        let base = p.engine.offset().unwrap().as_static().unwrap();
        let (r0, c0) = (tid / 16, tid % 16);
        for i in 0..4 {
            for j in 0..4 {
                let got = base + p.layout.crd2idx(&tuple!(i, j)).unwrap().as_static().unwrap();
                let want = smem.crd2idx(&tuple!({ r0 + 8 * i }, { c0 + 16 * j })).unwrap();
                assert_eq!(s(got), want, "tid {tid} ({i},{j})");
            }
        }
    }
    // A whole 8x64 atom slice keeps the swizzle (Sw o offset o layout).
    let rows = t.local_tile(&Tiler::shape(&[8, 64]), &slice_coord!(1, 0)).unwrap();
    assert!(matches!(rows.layout, AnyLayout::Composed(_)));
    assert_eq!(rows.engine.offset(), Some(&s(512)));
    let _ = Tuple::<i64>::Leaf(0);
}
