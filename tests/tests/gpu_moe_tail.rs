//! The fused MoE layer at exact per-expert row counts around the SM90 row tile's halves:
//! the caller routes 0, 1, 64, 65, 129, 192, 193 and 286 rows to the eight experts, so the
//! experts' last row tiles hold 1, 64, 65, 1, 64, 65 and 30 routed rows (and one expert
//! none). A cooperative SM90 consumer warpgroup whose 64 rows are all padding skips its
//! `wgmma` (its first row is padding at 1..64 routed rows, routed at 65); a ping-pong
//! warpgroup runs the whole tile. Every grouped GEMM family the GPU has matches the float64
//! reference; the ping-pong layer is bit-identical twice and with GEMM1 gathering its rows
//! itself, and the cooperative layer on the dynamic walk is its static walk bit for bit.
//! The same counts straddle the 64-row blocks of [`MoeOptions::row_tile`] (64, 65, 129,
//! 192, 193): the SM90 layer on 64-row tiles matches the reference and repeats bit for bit,
//! and a tuning table's `moe:sm90pp64` runs it bit for bit. The cooperative layer's
//! padding skip ([`MoeOptions::pad_skip`]) is the layer without it bit for bit.
//! Skips without an sm_90 GPU (fails under `RCUTE_REQUIRE_GPU=1` without a GPU).

mod common;

use common::{check_close, Rng};
use cudarc::driver::CudaSlice;
use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::moe::reference::MoeShape;
use rcute_ops::moe::{
    fused_moe_reference, fused_moe_workspace_bytes, validate_fused_moe, MoeOptions, MoePath, MoeRouting, MoeWorkspace,
};
use rcute_ops::tuning::{ConfigSpec, MoeSm90Spec};
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

/// The layer's inputs on the GPU (E = 8, top-2, H = 256, I = 512, [`COUNTS`] routed rows
/// per expert, random weights and router weights) and the float64 reference output.
struct Fixture {
    ops: Ops,
    shape: (usize, usize, usize, usize, usize),
    x: CudaSlice<bf16>,
    w13: CudaSlice<bf16>,
    w2: CudaSlice<bf16>,
    ids: CudaSlice<i32>,
    wts: CudaSlice<f32>,
    want: Vec<f64>,
}

impl Fixture {
    /// `None` (after printing why) without an sm_90 GPU.
    fn new(seed: &str) -> Option<Fixture> {
        let ops = gpu_for_test().map(Ops::new)?;
        if ops.gpu().compute_capability() != (9, 0) {
            eprintln!("not an sm_90 GPU: nothing to check");
            return None;
        }
        let mut rng = Rng::for_test(seed);
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
        Some(Fixture {
            shape: (t, e, k, h, i),
            x: s.clone_htod(&xb).unwrap(),
            w13: s.clone_htod(&b13).unwrap(),
            w2: s.clone_htod(&b2).unwrap(),
            ids: s.clone_htod(&ids).unwrap(),
            wts: s.clone_htod(&wts).unwrap(),
            want,
            ops,
        })
    }

    /// The layer's output with `opts`, on a poisoned workspace and output.
    fn layer(&self, opts: &MoeOptions) -> Vec<bf16> {
        self.run(opts, None)
    }

    /// The layer's output with `opts` as a tuning table's `spec` runs it
    /// (`Ops::run_fused_moe_spec` on the validated problem), or as `Ops::fused_moe` does.
    fn run(&self, opts: &MoeOptions, spec: Option<&ConfigSpec>) -> Vec<bf16> {
        let (t, e, k, h, i) = self.shape;
        let s = self.ops.gpu().stream().clone();
        let bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
        // The dynamic walk's counters live in the workspace: poisoned, the layer's alignment
        // must zero them.
        let mut ws = s.clone_htod(&vec![0xa5u8; bytes]).unwrap();
        let mut y = s.clone_htod(&vec![bf16::NAN; t * h]).unwrap();
        let routing = MoeRouting::Given {
            topk_ids: MatrixRef::new(&self.ids, t, k),
            topk_weights: MatrixRef::new(&self.wts, t, k),
        };
        let x = MatrixRef::new(&self.x, t, h);
        let w13 = MatrixRef::new(&self.w13, 2 * i, h).batched(e, (2 * i * h) as i64);
        let w2 = MatrixRef::new(&self.w2, h, i).batched(e, (h * i) as i64);
        let (mut wsv, mut yv) = (MoeWorkspace::new(&mut ws), MatrixMut::new(&mut y, t, h));
        match spec {
            Some(spec) => {
                let p = validate_fused_moe(&x, &w13, &w2, &routing, opts, &wsv, &yv).unwrap();
                self.ops.run_fused_moe_spec(&p, spec).unwrap();
            }
            None => self
                .ops
                .fused_moe(&x, &w13, &w2, &routing, opts, &mut wsv, &mut yv)
                .unwrap(),
        }
        s.clone_dtoh(&y).unwrap()
    }
}

fn bits(v: &[bf16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn exact_tail_rows_on_every_family_match_reference() {
    let Some(f) = Fixture::new("exact_tail_rows") else {
        return;
    };
    let layer = |path: MoePath, gather: Option<bool>, dynamic: Option<bool>| {
        f.layer(&MoeOptions {
            path,
            gather,
            dynamic,
            ..MoeOptions::default()
        })
    };
    for path in [
        MoePath::Sm80,
        MoePath::Sm90,
        MoePath::Sm90Narrow,
        MoePath::Sm90Cluster,
        MoePath::Sm90PingPong,
        MoePath::Auto,
    ] {
        check_close(&format!("{path:?} vs reference"), &layer(path, None, None), &f.want);
    }
    let pp = layer(MoePath::Sm90PingPong, None, None);
    for (name, other) in [
        ("again", layer(MoePath::Sm90PingPong, None, None)),
        (
            "with the gathering GEMM1",
            layer(MoePath::Sm90PingPong, Some(true), None),
        ),
    ] {
        assert_eq!(bits(&pp), bits(&other), "ping-pong vs ping-pong {name}");
    }
    assert_eq!(
        bits(&layer(MoePath::Sm90, None, Some(true))),
        bits(&layer(MoePath::Sm90, None, Some(false))),
        "the cooperative layer's dynamic walk differs from its static one"
    );
}

/// The padding skip ([`MoeOptions::pad_skip`]: an all-padding warpgroup's epilogue, A's
/// upper box or gathered copies skipped too) is the cooperative layer bit for bit: on the
/// TMA and the gathering GEMM1, GEMM2 on 128x256 and 128x128 tiles, the dynamic walk, a
/// clustered GEMM1 (only GEMM2 skips there), a tuning table's `moe:sm90` and its
/// `moe:sm90pad`. The workspace
/// is poisoned, so GEMM1's padding rows it no longer writes hold garbage that must not reach
/// a routed row.
#[test]
fn pad_skip_is_the_cooperative_layer_bit_for_bit() {
    let Some(f) = Fixture::new("pad_skip") else {
        return;
    };
    let opts = |path: MoePath, gather: Option<bool>, dynamic: Option<bool>, pad: bool| MoeOptions {
        path,
        gather,
        dynamic,
        pad_skip: Some(pad),
        ..MoeOptions::default()
    };
    for (path, gather, dynamic) in [
        (MoePath::Sm90, None, None),
        (MoePath::Sm90, Some(true), None),
        (MoePath::Sm90Narrow, Some(true), None),
        (MoePath::Sm90, None, Some(true)),
        (MoePath::Sm90Cluster, None, None),
    ] {
        let skip = f.layer(&opts(path, gather, dynamic, true));
        check_close(
            &format!("{path:?} {gather:?} {dynamic:?} with pad_skip vs reference"),
            &skip,
            &f.want,
        );
        assert_eq!(
            bits(&skip),
            bits(&f.layer(&opts(path, gather, dynamic, false))),
            "{path:?} gather {gather:?} dynamic {dynamic:?}: pad_skip changed the output"
        );
    }
    let spec = ConfigSpec::MoeSm90(MoeSm90Spec::Wide);
    assert_eq!(
        bits(&f.run(&opts(MoePath::Auto, None, None, true), Some(&spec))),
        bits(&f.run(&opts(MoePath::Auto, None, None, false), Some(&spec))),
        "moe:sm90 with pad_skip differs"
    );
    // A tuning table's `moe:sm90pad` runs the skip without the option.
    let pad = ConfigSpec::MoeSm90(MoeSm90Spec::WidePad);
    assert_eq!(
        bits(&f.run(&MoeOptions::default(), Some(&pad))),
        bits(&f.run(&MoeOptions::default(), Some(&spec))),
        "moe:sm90pad differs from moe:sm90"
    );
}

#[test]
fn rows64_tiles_match_reference() {
    let Some(f) = Fixture::new("rows64_tiles") else {
        return;
    };
    for path in [MoePath::Sm90PingPong, MoePath::Sm90] {
        let opts = MoeOptions {
            path,
            row_tile: Some(64),
            ..MoeOptions::default()
        };
        let rows64 = f.layer(&opts);
        check_close(&format!("{path:?} on 64-row tiles vs reference"), &rows64, &f.want);
        assert_eq!(
            bits(&rows64),
            bits(&f.layer(&opts)),
            "{path:?} on 64-row tiles: two runs differ"
        );
    }
    // A tuning table's `moe:sm90pp64` entry runs the same layer.
    let spec = ConfigSpec::MoeSm90(MoeSm90Spec::PingPong64);
    assert_eq!(
        bits(&f.layer(&MoeOptions {
            path: MoePath::Sm90PingPong,
            row_tile: Some(64),
            ..MoeOptions::default()
        })),
        bits(&f.run(&MoeOptions::default(), Some(&spec))),
        "moe:sm90pp64 differs from the 64-row option"
    );
}
