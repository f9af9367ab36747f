//! The fused MoE layer on prepared experts (`MoeWeights::prepare`, `Ops::fused_moe_prepared`)
//! on the GPU: forced streamed configurations on ragged decode shapes (K not a multiple of
//! 32, partial 16-row blocks of `w2`, partial CTAs along N) against the float64 reference,
//! bit-identical to the unprepared streamed form of the same configuration (and the
//! shared-ring forms, `,sring`, to the register ring's), `up_first`
//! checkpoints prepared into the same layer, two runs bit-identical, the rule's fallback
//! bit-identical to `Ops::fused_moe`; a CUDA graph of the prepared layer replayed after the
//! routing changed; and bad input as typed errors. Outputs are poisoned (NaN) and
//! workspaces filled with 0xff first. Skips without a GPU (fails under
//! `RCUTE_REQUIRE_GPU=1`); `RCUTE_CASES=n` keeps the first n shapes and configurations
//! (the sanitizer runs).

mod common;

use common::{check_close, Rng};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::moe::reference::MoeShape;
use rcute_ops::moe::{
    fused_moe_reference, fused_moe_workspace_bytes, fused_moe_workspace_bytes_with, prepared_spec,
    topk_softmax_reference, validate_fused_moe, MoeOptions, MoeRouting, MoeWeights, MoeWorkspace,
};
use rcute_ops::tuning::MoeSpec;
use rcute_ops::{DType, MatrixMut, MatrixRef, Ops, OpsError};
use std::sync::Arc;

fn ops() -> Option<Ops> {
    gpu_for_test().map(Ops::new)
}

fn cases<T>(v: &[T]) -> &[T] {
    let n = std::env::var("RCUTE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(v.len());
    &v[..n.min(v.len())]
}

fn rand_bf16(rng: &mut Rng, n: usize, scale: f64) -> (Vec<f64>, Vec<bf16>) {
    let b: Vec<bf16> = (0..n)
        .map(|_| bf16::from_f64((f64::from(rng.next_u32()) / f64::from(u32::MAX) * 2.0 - 1.0) * scale))
        .collect();
    (b.iter().map(|v| v.to_f64()).collect(), b)
}

fn bits(v: &[bf16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `w13 [e, 2i, h]` with the gate and up halves of every expert swapped.
fn swap_halves(w13: &[bf16], e: usize, i: usize, h: usize) -> Vec<bf16> {
    let mut out = w13.to_vec();
    for ex in 0..e {
        let base = ex * 2 * i * h;
        out[base..base + i * h].copy_from_slice(&w13[base + i * h..base + 2 * i * h]);
        out[base + i * h..base + 2 * i * h].copy_from_slice(&w13[base..base + i * h]);
    }
    out
}

/// The experts of one test layer on the host (exact values) and the device (gate first
/// and up first).
struct Experts {
    w13: Vec<f64>,
    w2: Vec<f64>,
    d_w13: CudaSlice<bf16>,
    d_w13_up: CudaSlice<bf16>,
    d_w2: CudaSlice<bf16>,
}

impl Experts {
    fn new(s: &Arc<CudaStream>, rng: &mut Rng, e: usize, h: usize, i: usize) -> Experts {
        let (w13, b13) = rand_bf16(rng, e * 2 * i * h, 1.0 / (h as f64).sqrt());
        let (w2, b2) = rand_bf16(rng, e * h * i, 1.0 / (i as f64).sqrt());
        Experts {
            w13,
            w2,
            d_w13: s.clone_htod(&b13).unwrap(),
            d_w13_up: s.clone_htod(&swap_halves(&b13, e, i, h)).unwrap(),
            d_w2: s.clone_htod(&b2).unwrap(),
        }
    }
}

/// One layer call on fresh NaN output and a 0xff workspace: `spec` on the prepared
/// experts (`Some(prepared)`) or on the checkpoint's (`None`: `Ops::run_fused_moe_with`).
struct Call<'a> {
    ops: &'a Ops,
    x: MatrixRef<'a>,
    w13: MatrixRef<'a>,
    w2: MatrixRef<'a>,
    routing: MoeRouting<'a>,
    shape: (usize, usize, usize, usize, usize),
}

impl Call<'_> {
    fn run(&self, prepared: Option<(&MoeWeights<'_>, bool)>, spec: Option<&MoeSpec>) -> Vec<bf16> {
        let s = self.ops.gpu().stream().clone();
        let (t, k, e, h, i) = self.shape;
        let mut bytes = fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap();
        if let Some(spec) = spec {
            bytes = bytes.max(fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, spec).unwrap());
        }
        let mut ws = s.clone_htod(&vec![0xffu8; bytes]).unwrap();
        let mut y = s.clone_htod(&vec![bf16::NAN; t * h]).unwrap();
        {
            let mut wsv = MoeWorkspace::new(&mut ws);
            let mut yv = MatrixMut::new(&mut y, t, h);
            match (prepared, spec) {
                (Some((w, up_first)), spec) => {
                    let opts = MoeOptions {
                        up_first,
                        ..MoeOptions::default()
                    };
                    self.ops
                        .fused_moe_prepared_with(&self.x, w, &self.routing, &opts, &mut wsv, &mut yv, spec)
                        .unwrap()
                }
                (None, Some(spec)) => {
                    let o = MoeOptions::default();
                    let p = validate_fused_moe(&self.x, &self.w13, &self.w2, &self.routing, &o, &wsv, &yv).unwrap();
                    self.ops.run_fused_moe_with(&p, spec).unwrap()
                }
                (None, None) => {
                    let o = MoeOptions::default();
                    (self
                        .ops
                        .fused_moe(&self.x, &self.w13, &self.w2, &self.routing, &o, &mut wsv, &mut yv))
                    .unwrap()
                }
            }
        }
        s.clone_dtoh(&y).unwrap()
    }
}

/// Forced streamed configurations on prepared experts: the reference, the unprepared
/// streamed form bit for bit, twice the same, and the `up_first` preparation the same.
#[test]
fn prepared_layer_matches_reference_and_the_streamed_form() {
    let Some(ops) = ops() else { return };
    let s = ops.gpu().stream().clone();
    // the shared-ring forms (`,sring`) first, so that `RCUTE_CASES=1` (the sanitizer runs)
    // covers one
    let specs = [
        MoeSpec::streamed(16, 8, 128, 3, 1, false).with_shared_ring(),
        MoeSpec::streamed(16, 8, 128, 3, 1, false),
        MoeSpec::streamed(8, 4, 64, 2, 2, true),
        MoeSpec::streamed(32, 8, 256, 2, 1, false),
        MoeSpec::streamed(16, 2, 32, 4, 3, false),
        MoeSpec::streamed(8, 4, 64, 2, 2, true).with_shared_ring(),
        MoeSpec::streamed(32, 8, 256, 2, 1, false).with_shared_ring(),
    ];
    // (name, E, k, renormalise, H, I, token counts): H = 1032 and I = 712 leave 8 k of a
    // last 32-k part and partial CTAs; H = 40, I = 24: w2's second 16-row block half full,
    // GEMM2's K one part of 24.
    let shapes = [
        (
            "deepseek_like",
            64usize,
            6usize,
            false,
            1032usize,
            712usize,
            &[1usize, 5, 40][..],
        ),
        ("mixtral_like", 8, 2, true, 1032, 712, &[1, 16][..]),
        ("tiny_ragged", 4, 2, false, 40, 24, &[3][..]),
    ];
    for (name, e, k, renorm, h, i, tokens) in cases(&shapes).iter().copied() {
        let mut rng = Rng::for_test(name);
        let ex = Experts::new(&s, &mut rng, e, h, i);
        let w13 = MatrixRef::new(&ex.d_w13, 2 * i, h).batched(e, (2 * i * h) as i64);
        let w13_up = MatrixRef::new(&ex.d_w13_up, 2 * i, h).batched(e, (2 * i * h) as i64);
        let w2 = MatrixRef::new(&ex.d_w2, h, i).batched(e, (h * i) as i64);
        let prepared = MoeWeights::prepare(&ops, &w13, &w2, false).unwrap();
        let prepared_up = MoeWeights::prepare(&ops, &w13_up, &w2, true).unwrap();
        assert_eq!(prepared.dims(), (e, h, i));
        for &t in cases(tokens) {
            let (xv, xb) = rand_bf16(&mut rng, t * h, 1.0);
            let logits: Vec<f32> = (0..t * e)
                .map(|_| (f64::from(rng.next_u32()) / f64::from(u32::MAX) * 8.0 - 4.0) as f32)
                .collect();
            let lf: Vec<f64> = logits.iter().map(|v| f64::from(*v)).collect();
            let r = topk_softmax_reference(&lf, t, e, k, renorm).unwrap();
            let shape = MoeShape {
                tokens: t,
                hidden: h,
                inter: i,
                topk: k,
                expert_offset: 0,
                local_experts: e,
            };
            let want = fused_moe_reference(&shape, &xv, &ex.w13, &ex.w2, &r.topk_ids, &r.topk_weights).unwrap();
            let (d_x, d_logits) = (s.clone_htod(&xb).unwrap(), s.clone_htod(&logits).unwrap());
            let call = Call {
                ops: &ops,
                x: MatrixRef::new(&d_x, t, h),
                w13,
                w2,
                routing: MoeRouting::Logits {
                    logits: MatrixRef::new(&d_logits, t, e),
                    topk: k,
                    renormalize: renorm,
                },
                shape: (t, k, e, h, i),
            };
            for spec in cases(&specs) {
                let what = format!("{name} T={t} {spec}");
                let got = call.run(Some((&prepared, false)), Some(spec));
                check_close(&what, &got, &want);
                assert_eq!(
                    bits(&got),
                    bits(&call.run(Some((&prepared, false)), Some(spec))),
                    "{what}: two runs"
                );
                assert_eq!(
                    bits(&got),
                    bits(&call.run(None, Some(spec))),
                    "{what}: unprepared streamed form"
                );
                let up = call.run(Some((&prepared_up, true)), Some(spec));
                assert_eq!(bits(&got), bits(&up), "{what}: up_first preparation");
                if spec.shared_ring {
                    // the same MMAs in the same order: the register ring's answer bit for bit
                    let reg = MoeSpec {
                        shared_ring: false,
                        ..*spec
                    };
                    let want_reg = call.run(Some((&prepared, false)), Some(&reg));
                    assert_eq!(bits(&got), bits(&want_reg), "{what}: the register ring");
                }
            }
            // the rule's choice: its prepared configuration, or the checkpoint's layer
            let auto = call.run(Some((&prepared, false)), None);
            let rule = prepared_spec(t, k, e, h, ops.gpu().sm_count() as usize);
            let want_auto = match &rule {
                Some(spec) => call.run(Some((&prepared, false)), Some(spec)),
                None => call.run(None, None),
            };
            assert_eq!(bits(&auto), bits(&want_auto), "{name} T={t}: rule {rule:?}");
            check_close(&format!("{name} T={t} rule"), &auto, &want);
        }
    }
}

/// A CUDA graph of the prepared layer (forced streamed configuration), captured once,
/// replayed after the routing changed: the new answer.
#[test]
fn prepared_graph_replay_with_new_routing() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let Some(ops) = ops() else { return };
    let mut rng = Rng::for_test("prepared_graph_replay");
    let s = ops.gpu().stream().clone();
    let (e, k, h, i, t) = (8, 2, 72, 48, 40);
    let ex = Experts::new(&s, &mut rng, e, h, i);
    let w13 = MatrixRef::new(&ex.d_w13, 2 * i, h).batched(e, (2 * i * h) as i64);
    let w2 = MatrixRef::new(&ex.d_w2, h, i).batched(e, (h * i) as i64);
    let prepared = MoeWeights::prepare(&ops, &w13, &w2, false).unwrap();
    let spec = MoeSpec::streamed(8, 4, 64, 2, 2, true);
    let (xv, xb) = rand_bf16(&mut rng, t * h, 1.0);
    let d_x = s.clone_htod(&xb).unwrap();
    let mut d_ids = s.alloc_zeros::<i32>(t * k).unwrap();
    let mut d_w = s.alloc_zeros::<f32>(t * k).unwrap();
    let bytes = fused_moe_workspace_bytes_with(t, k, e, h, i, DType::BF16, &spec)
        .unwrap()
        .max(fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap());
    let mut ws = s.alloc_zeros::<u8>(bytes).unwrap();
    let mut y = s.alloc_zeros::<bf16>(t * h).unwrap();
    let route = |rng: &mut Rng| -> (Vec<i32>, Vec<f32>) {
        let ids: Vec<i32> = (0..t)
            .flat_map(|_| {
                let a = rng.range(0, 7) as i32;
                [a, (a + 1 + rng.range(0, 6) as i32) % 8]
            })
            .collect();
        let w: Vec<f32> = (0..t * k).map(|_| (rng.next_u32() % 997) as f32 / 997.0).collect();
        (ids, w)
    };
    let (ids0, w0) = route(&mut rng);
    s.memcpy_htod(&ids0, &mut d_ids).unwrap();
    s.memcpy_htod(&w0, &mut d_w).unwrap();
    s.synchronize().unwrap();
    let graph = {
        let routing = MoeRouting::Given {
            topk_ids: MatrixRef::new(&d_ids, t, k),
            topk_weights: MatrixRef::new(&d_w, t, k),
        };
        let x = MatrixRef::new(&d_x, t, h);
        let mut wsv = MoeWorkspace::new(&mut ws);
        let mut yv = MatrixMut::new(&mut y, t, h);
        let o = MoeOptions::default();
        let run = |wsv: &mut MoeWorkspace<'_>, yv: &mut MatrixMut<'_>| {
            ops.fused_moe_prepared_with(&x, &prepared, &routing, &o, wsv, yv, Some(&spec))
                .unwrap()
        };
        run(&mut wsv, &mut yv);
        s.synchronize().unwrap();
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        run(&mut wsv, &mut yv);
        s.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("a graph")
    };
    for round in 0..2 {
        let (ids, w) = route(&mut rng);
        s.memcpy_htod(&ids, &mut d_ids).unwrap();
        s.memcpy_htod(&w, &mut d_w).unwrap();
        graph.launch().unwrap();
        let got = s.clone_dtoh(&y).unwrap();
        let shape = MoeShape {
            tokens: t,
            hidden: h,
            inter: i,
            topk: k,
            expert_offset: 0,
            local_experts: e,
        };
        let wf: Vec<f64> = w.iter().map(|v| f64::from(*v)).collect();
        let want = fused_moe_reference(&shape, &xv, &ex.w13, &ex.w2, &ids, &wf).unwrap();
        check_close(&format!("prepared graph replay {round}"), &got, &want);
    }
}

/// Bad weights, options, configurations and workspaces are typed errors, before any launch.
#[test]
fn bad_input_is_a_typed_error() {
    let Some(ops) = ops() else { return };
    let s = ops.gpu().stream().clone();
    let (e, k, h, i, t) = (4usize, 2usize, 64usize, 32usize, 3usize);
    let w13b = s.alloc_zeros::<bf16>(e * 2 * i * h).unwrap();
    let w2b = s.alloc_zeros::<bf16>(e * h * i).unwrap();
    let w2f = s.alloc_zeros::<f32>(e * h * i).unwrap();
    let w13 = MatrixRef::new(&w13b, 2 * i, h).batched(e, (2 * i * h) as i64);
    let w2 = MatrixRef::new(&w2b, h, i).batched(e, (h * i) as i64);
    let err = |r: Result<MoeWeights<'_>, OpsError>| r.err().expect("an error");
    let f32_w2 = MatrixRef::new(&w2f, h, i).batched(e, (h * i) as i64);
    assert!(matches!(
        err(MoeWeights::prepare(&ops, &w13, &f32_w2, false)),
        OpsError::DType(_)
    ));
    let short_w2 = MatrixRef::new(&w2b, h, i - 8).batched(e, (h * i) as i64);
    assert!(matches!(
        err(MoeWeights::prepare(&ops, &w13, &short_w2, false)),
        OpsError::Shape(_)
    ));
    let odd = MatrixRef::new(&w13b, 2 * 12, 60).batched(e, 2 * 12 * 60);
    let odd2 = MatrixRef::new(&w2b, 60, 12).batched(e, 60 * 12);
    assert!(matches!(
        err(MoeWeights::prepare(&ops, &odd, &odd2, false)),
        OpsError::Alignment { .. }
    ));
    let past = MatrixRef::new(&w2b, h, i).batched(e + 1, (h * i) as i64);
    let past13 = MatrixRef::new(&w13b, 2 * i, h).batched(e + 1, (2 * i * h) as i64);
    assert!(matches!(
        err(MoeWeights::prepare(&ops, &past13, &past, false)),
        OpsError::OutOfBounds { .. }
    ));
    let empty = MatrixRef::new(&w13b, 0, h).batched(e, (2 * i * h) as i64);
    assert!(matches!(
        err(MoeWeights::prepare(&ops, &empty, &w2, false)),
        OpsError::Empty(_)
    ));
    let prepared = MoeWeights::prepare(&ops, &w13, &w2, false).unwrap();
    let d_x = s.alloc_zeros::<bf16>(t * h).unwrap();
    let d_ids = s.alloc_zeros::<i32>(t * k).unwrap();
    let d_w = s.alloc_zeros::<f32>(t * k).unwrap();
    let routing = MoeRouting::Given {
        topk_ids: MatrixRef::new(&d_ids, t, k),
        topk_weights: MatrixRef::new(&d_w, t, k),
    };
    let mut ws = s
        .alloc_zeros::<u8>(fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap())
        .unwrap();
    let mut small = s.alloc_zeros::<u8>(64).unwrap();
    let mut y = s.alloc_zeros::<bf16>(t * h).unwrap();
    let x = MatrixRef::new(&d_x, t, h);
    let reg = MoeSpec::streamed(16, 8, 128, 3, 1, false);
    let mut call = |ws: &mut CudaSlice<u8>, opts: MoeOptions, spec: &MoeSpec| {
        let mut wsv = MoeWorkspace::new(ws);
        let mut yv = MatrixMut::new(&mut y, t, h);
        ops.fused_moe_prepared_with(&x, &prepared, &routing, &opts, &mut wsv, &mut yv, Some(spec))
            .expect_err("an error")
    };
    let up = MoeOptions {
        up_first: true,
        ..MoeOptions::default()
    };
    assert!(matches!(call(&mut ws, up, &reg), OpsError::Shape(_)));
    let cp_async = MoeSpec::new([16, 128, 64], [1, 4], 1);
    assert!(matches!(
        call(&mut ws, MoeOptions::default(), &cp_async),
        OpsError::Shape(_)
    ));
    assert!(matches!(
        call(&mut small, MoeOptions::default(), &reg),
        OpsError::OutOfBounds { .. }
    ));
    // y untouched: nothing launched
    assert!(s.clone_dtoh(&y).unwrap().iter().all(|v| v.to_bits() == 0));
}
