//! The SM90 ping-pong MoE GEMMs on the dynamic walk (`MoeOptions::dynamic`) on an expert's
//! last row tile of at most 64 routed rows, whose consumer warpgroup issues the first m64
//! atom's `wgmma` only (its upper 64 rows are padding): the caller routes exact row counts
//! per expert (0, 1, 64, 65, 129, 192, 193, 286: last tiles of 1, 64, 65, 1, 64, 65 and 30
//! rows, an empty expert), and the dynamic ping-pong layer (GEMM1 fed by TMA, and
//! gathering its rows itself on the static walk) is the static one bit for bit, twice, and
//! matches the float64 reference and the SM80 family. Skips without an sm_90 GPU (fails
//! under `RCUTE_REQUIRE_GPU=1` without a GPU).

mod common;

use common::{check_close, Rng};
use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::moe::reference::MoeShape;
use rcute_ops::moe::{fused_moe_reference, fused_moe_workspace_bytes, MoeOptions, MoePath, MoeRouting, MoeWorkspace};
use rcute_ops::{DType, MatrixMut, MatrixRef, Ops};

/// Routed rows per expert: each tail length on either side of 64, after zero, one and two
/// full row tiles, and an expert without tokens.
const COUNTS: [usize; 8] = [1, 64, 65, 129, 192, 193, 0, 286];

/// Uniform values in `[-scale, scale]`, rounded to bf16: the exact values and the bf16s.
fn rand_bf16(rng: &mut Rng, n: usize, scale: f64) -> (Vec<f64>, Vec<bf16>) {
    (0..n)
        .map(|_| {
            let v = bf16::from_f64(((rng.next_u32() as f64 / u32::MAX as f64) * 2.0 - 1.0) * scale);
            (v.to_f64(), v)
        })
        .unzip()
}

/// Top-2 expert ids with [`COUNTS`] rows per expert: the sorted multiset of ids paired
/// `j` with `j + T` (each count is below `T`, so a token's two experts differ), shuffled
/// by token.
fn routed_ids(rng: &mut Rng) -> Vec<i32> {
    let ids: Vec<i32> = COUNTS
        .iter()
        .enumerate()
        .flat_map(|(e, &n)| std::iter::repeat_n(e as i32, n))
        .collect();
    let t = ids.len() / 2;
    assert!(COUNTS.iter().all(|&n| n < t));
    let mut pairs: Vec<[i32; 2]> = (0..t).map(|j| [ids[j], ids[j + t]]).collect();
    for j in (1..t).rev() {
        pairs.swap(j, rng.range(0, j as i64) as usize);
    }
    pairs.concat()
}

#[test]
fn dynamic_pingpong_half_tiles_are_the_static_layer_bit_for_bit() {
    let Some(ops) = gpu_for_test().map(Ops::new) else { return };
    if ops.gpu().compute_capability() != (9, 0) {
        eprintln!("not an sm_90 GPU: nothing to check");
        return;
    }
    let mut rng = Rng::for_test("pingpong_tail");
    let s = ops.gpu().stream().clone();
    let (e, k, h, i) = (8, 2, 256, 512);
    let ids = routed_ids(&mut rng);
    let t = ids.len() / k;
    let (w13, b13) = rand_bf16(&mut rng, e * 2 * i * h, 1.0 / (h as f64).sqrt());
    let (w2, b2) = rand_bf16(&mut rng, e * h * i, 1.0 / (i as f64).sqrt());
    let (xv, xb) = rand_bf16(&mut rng, t * h, 1.0);
    let wts: Vec<f32> = (0..t * k).map(|_| (rng.next_u32() % 1000) as f32 / 1000.0).collect();
    let wf: Vec<f64> = wts.iter().map(|v| f64::from(*v)).collect();
    let shape = MoeShape {
        tokens: t,
        hidden: h,
        inter: i,
        topk: k,
        expert_offset: 0,
        local_experts: e,
    };
    let want = fused_moe_reference(&shape, &xv, &w13, &w2, &ids, &wf).unwrap();
    let (d_w13, d_w2) = (s.clone_htod(&b13).unwrap(), s.clone_htod(&b2).unwrap());
    let (d_x, d_ids, d_w) = (
        s.clone_htod(&xb).unwrap(),
        s.clone_htod(&ids).unwrap(),
        s.clone_htod(&wts).unwrap(),
    );
    let routing = MoeRouting::Given {
        topk_ids: MatrixRef::new(&d_ids, t, k),
        topk_weights: MatrixRef::new(&d_w, t, k),
    };
    let layer = |path: MoePath, gather: Option<bool>, dynamic: Option<bool>| -> Vec<bf16> {
        let bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
        // The dynamic walk's counters live in the workspace: poisoned, the layer's alignment
        // must zero them.
        let mut ws = s.clone_htod(&vec![0xa5u8; bytes]).unwrap();
        let mut y = s.clone_htod(&vec![bf16::NAN; t * h]).unwrap();
        let opts = MoeOptions {
            path,
            gather,
            dynamic,
            ..MoeOptions::default()
        };
        ops.fused_moe(
            &MatrixRef::new(&d_x, t, h),
            &MatrixRef::new(&d_w13, 2 * i, h).batched(e, (2 * i * h) as i64),
            &MatrixRef::new(&d_w2, h, i).batched(e, (h * i) as i64),
            &routing,
            &opts,
            &mut MoeWorkspace::new(&mut ws),
            &mut MatrixMut::new(&mut y, t, h),
        )
        .unwrap();
        s.clone_dtoh(&y).unwrap()
    };
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let pp = MoePath::Sm90PingPong;
    let dynamic = layer(pp, None, Some(true));
    check_close("dynamic ping-pong vs reference", &dynamic, &want);
    let sm80 = layer(MoePath::Sm80, None, None);
    check_close("SM80 family vs reference", &sm80, &want);
    let sm80_f: Vec<f64> = sm80.iter().map(|v| v.to_f64()).collect();
    check_close("dynamic ping-pong vs SM80 family", &dynamic, &sm80_f);
    for (name, other) in [
        ("static ping-pong", layer(pp, None, Some(false))),
        ("dynamic ping-pong again", layer(pp, None, Some(true))),
        ("ping-pong, gathering GEMM1", layer(pp, Some(true), Some(true))),
    ] {
        assert_eq!(bits(&dynamic), bits(&other), "dynamic ping-pong vs {name}");
    }
    let coop = layer(MoePath::Sm90, None, Some(true));
    check_close("dynamic cooperative vs reference", &coop, &want);
    eprintln!(
        "ping-pong bit-identical to the cooperative layer: {}",
        bits(&dynamic) == bits(&coop)
    );
}
