//! Cost of the layout algebra at kernel-generation time.

use criterion::{criterion_group, criterion_main, Criterion};
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, Layout};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let a = Layout::new(tuple!((4, 8), (2, 4)), tuple!((2, 16), (1, 128))).unwrap();
    let b = Layout::new(tuple!(8, 4), tuple!(4, 1)).unwrap();
    let gmem = Layout::new(tuple!("M", "K"), tuple!("ldA", 1)).unwrap();
    let tile = Tiler::shape(&[128, 32]);
    c.bench_function("composition (static, rank 2)", |x| {
        x.iter(|| black_box(&a).compose(black_box(&b)).unwrap())
    });
    c.bench_function("complement (static)", |x| {
        x.iter(|| black_box(&b).complement(&tuple!(256)).unwrap())
    });
    c.bench_function("zipped_divide (dynamic gmem by 128x32)", |x| {
        x.iter(|| black_box(&gmem).zipped_divide(black_box(&tile)).unwrap())
    });
    let atom = Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap();
    c.bench_function("tile_to_shape (8x64 atom to 128x64)", |x| {
        x.iter(|| black_box(&atom).tile_to_shape(&tuple!(128, 64), None).unwrap())
    });
    c.bench_function("right_inverse", |x| x.iter(|| black_box(&a).right_inverse()));
    let block = Layout::new(tuple!(2, 2), tuple!(2, 1)).unwrap();
    let thr = Layout::new(tuple!(4, 8), tuple!(8, 1)).unwrap();
    c.bench_function("raked_product (2x2 values over 4x8 threads)", |x| {
        x.iter(|| black_box(&block).raked_product(black_box(&thr)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
