//! GEMM1 routing a decode batch itself (`MoeOptions::route`,
//! `rcute_kernel::grouped_gemm::route`): the layer's output is bit for bit the one with
//! the routing kernel in front (top-k softmax + alignment), and matches the float64
//! reference; DeepSeek-like (E = 64, top-6, f32 logits) and Mixtral-like (E = 8, top-2,
//! renormalised, bf16 logits) layers at up to 32 routed entries on the decode
//! configurations (16-row tiles, 8 stages, K splits of GEMM2, the weights' `.L2::256B`
//! loads), expert-parallel slices, and a workspace filled with garbage first (the first
//! CTA writes the whole alignment GEMM2 and the finalize read). Outputs are poisoned
//! (NaN) first; a CUDA graph of the layer replays new logits. Skips without a GPU (fails under `RCUTE_REQUIRE_GPU=1`); `RCUTE_CASES`
//! keeps the first token counts and configurations (the sanitizer runs). The alignment on
//! several CTAs (`MoeOptions::align_ctas`) gives the single block's layer bit for bit at
//! prefill sizes, on both families, with expert-parallel slices. A configuration's
//! `,route` (a tuning entry's choice, `MoeSpec::with_route`) runs the same layer.

mod common;

use common::{check_close, Rng};
use half::bf16;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::moe::reference::MoeShape;
use rcute_ops::moe::{
    fused_moe_reference, fused_moe_workspace_bytes, fused_moe_workspace_bytes_with, topk_softmax_reference,
    validate_fused_moe, MoeOptions, MoePath, MoeRouting, MoeWorkspace,
};
use rcute_ops::tuning::MoeSpec;
use rcute_ops::{DType, MatrixMut, MatrixRef, Ops};

fn cases<T>(v: &[T]) -> &[T] {
    let n = std::env::var("RCUTE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(v.len());
    &v[..n.min(v.len())]
}

fn uniform(rng: &mut Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|_| (f64::from(rng.next_u32()) / f64::from(u32::MAX) * 2.0 - 1.0) * scale)
        .collect()
}

fn bf16s(v: &[f64]) -> Vec<bf16> {
    v.iter().map(|x| bf16::from_f64(*x)).collect()
}

/// The decode configurations: DeepSeek's `16x128x64,1x4,s8` and Mixtral's `k2,s8,l2`.
fn specs() -> Vec<MoeSpec> {
    let mut a = MoeSpec::new([16, 128, 64], [1, 4], 1);
    a.stages = Some(8);
    let mut b = MoeSpec::new([16, 128, 64], [1, 4], 2);
    b.stages = Some(8);
    b.l2_prefetch = true;
    vec![a, b]
}

struct Case {
    name: &'static str,
    experts: usize,
    topk: usize,
    renormalize: bool,
    bf16_logits: bool,
    tokens: &'static [usize],
}

#[test]
fn self_routing_gemm1_is_the_routing_kernels_bit_for_bit() {
    let Some(ops) = gpu_for_test().map(Ops::new) else {
        return;
    };
    let s = ops.gpu().stream().clone();
    let (h, i) = (1032usize, 712usize);
    let all = [
        Case {
            name: "deepseek_like",
            experts: 64,
            topk: 6,
            renormalize: false,
            bf16_logits: false,
            tokens: &[1, 5, 3],
        },
        Case {
            name: "mixtral_like",
            experts: 8,
            topk: 2,
            renormalize: true,
            bf16_logits: true,
            tokens: &[1, 16, 7],
        },
    ];
    for c in &all {
        let (e, k) = (c.experts, c.topk);
        let mut rng = Rng::for_test(c.name);
        let w13 = uniform(&mut rng, e * 2 * i * h, 1.0 / (h as f64).sqrt());
        let w2 = uniform(&mut rng, e * h * i, 1.0 / (i as f64).sqrt());
        let (w13, w2) = (bf16s(&w13), bf16s(&w2));
        for &t in cases(c.tokens) {
            let x = bf16s(&uniform(&mut rng, t * h, 1.0));
            let logits = uniform(&mut rng, t * e, 4.0);
            // the logits as the GPU sees them (bf16-rounded for bf16 logits)
            let seen: Vec<f64> = if c.bf16_logits {
                bf16s(&logits).iter().map(|v| v.to_f64()).collect()
            } else {
                logits.iter().map(|v| f64::from(*v as f32)).collect()
            };
            let r = topk_softmax_reference(&seen, t, e, k, c.renormalize).unwrap();
            let d_x = s.clone_htod(&x).unwrap();
            let d_lf = s
                .clone_htod(&logits.iter().map(|v| *v as f32).collect::<Vec<f32>>())
                .unwrap();
            let d_lb = s.clone_htod(&bf16s(&logits)).unwrap();
            // expert-parallel slices: all experts, and a middle range
            for (off, l) in [(0, e), (e / 4, e / 2)] {
                let d_w13 = s.clone_htod(&w13[off * 2 * i * h..(off + l) * 2 * i * h]).unwrap();
                let d_w2 = s.clone_htod(&w2[off * h * i..(off + l) * h * i]).unwrap();
                let to64 = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
                let shape = MoeShape {
                    tokens: t,
                    hidden: h,
                    inter: i,
                    topk: k,
                    expert_offset: off,
                    local_experts: l,
                };
                let want = fused_moe_reference(
                    &shape,
                    &to64(&x),
                    &to64(&w13[off * 2 * i * h..(off + l) * 2 * i * h]),
                    &to64(&w2[off * h * i..(off + l) * h * i]),
                    &r.topk_ids,
                    &r.topk_weights,
                )
                .unwrap();
                for spec in cases(&specs()) {
                    let run = |route: Option<bool>, spec: &MoeSpec| {
                        let bytes = fused_moe_workspace_bytes_with(t, k, l, h, i, DType::BF16, spec)
                            .unwrap()
                            .max(fused_moe_workspace_bytes(t, k, l, h, i, DType::BF16).unwrap());
                        let mut ws = s.clone_htod(&vec![0xA5u8; bytes]).unwrap();
                        let mut y = s.clone_htod(&vec![bf16::NAN; t * h]).unwrap();
                        {
                            let xv = MatrixRef::new(&d_x, t, h);
                            let w13v = MatrixRef::new(&d_w13, 2 * i, h).batched(l, (2 * i * h) as i64);
                            let w2v = MatrixRef::new(&d_w2, h, i).batched(l, (h * i) as i64);
                            let logits = if c.bf16_logits {
                                MatrixRef::new(&d_lb, t, e)
                            } else {
                                MatrixRef::new(&d_lf, t, e)
                            };
                            let routing = MoeRouting::Logits {
                                logits,
                                topk: k,
                                renormalize: c.renormalize,
                            };
                            let opts = MoeOptions {
                                expert_offset: off,
                                route,
                                ..MoeOptions::default()
                            };
                            let wsv = MoeWorkspace::new(&mut ws);
                            let yv = MatrixMut::new(&mut y, t, h);
                            let p = validate_fused_moe(&xv, &w13v, &w2v, &routing, &opts, &wsv, &yv).unwrap();
                            ops.run_fused_moe_with(&p, spec).unwrap();
                        }
                        let y: Vec<bf16> = s.clone_dtoh(&y).unwrap();
                        let ws: Vec<u8> = s.clone_dtoh(&ws).unwrap();
                        (y, ws)
                    };
                    let what = format!("{} T={t} experts [{off}, {}) {spec}", c.name, off + l);
                    let (y, ws) = run(Some(true), spec);
                    check_close(&format!("{what}, GEMM1 routing"), &y, &want);
                    let (y_kernel, ws_kernel) = run(Some(false), spec);
                    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&y), bits(&y_kernel), "{what}: GEMM1's routing changed y");
                    // ids, weights, the alignment and the intermediates alike
                    let diff: Vec<usize> = (0..ws.len()).filter(|&b| ws[b] != ws_kernel[b]).collect();
                    assert!(
                        diff.is_empty(),
                        "{what}: {} workspace bytes differ, first at {:?}",
                        diff.len(),
                        diff.first()
                    );
                    let (again, _) = run(Some(true), spec);
                    assert_eq!(bits(&y), bits(&again), "{what}: two runs differ");
                    // a tuning entry's `,route` (no option given) runs the same kernels
                    let (tuned, ws_tuned) = run(None, &spec.with_route());
                    assert_eq!(bits(&y), bits(&tuned), "{what}: the spec's route changed y");
                    assert!(ws == ws_tuned, "{what}: the spec's route changed the workspace");
                }
            }
        }
    }
}

/// A CUDA graph of the self-routing layer captured once and replayed after the logits
/// changed gives the new answer (nothing of the routing is decided on the host): Mixtral-
/// like, T = 16 top-2 (32 entries, 16-row tiles: experts of one to several row tiles).
#[test]
fn self_routing_graph_replays_new_logits() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let Some(ops) = gpu_for_test().map(Ops::new) else {
        return;
    };
    let s = ops.gpu().stream().clone();
    let mut rng = Rng::for_test("self_routing_graph");
    let (e, k, h, i, t) = (8usize, 2usize, 264usize, 200usize, 16usize);
    let w13 = bf16s(&uniform(&mut rng, e * 2 * i * h, 1.0 / (h as f64).sqrt()));
    let w2 = bf16s(&uniform(&mut rng, e * h * i, 1.0 / (i as f64).sqrt()));
    let x = bf16s(&uniform(&mut rng, t * h, 1.0));
    let (d_w13, d_w2, d_x) = (
        s.clone_htod(&w13).unwrap(),
        s.clone_htod(&w2).unwrap(),
        s.clone_htod(&x).unwrap(),
    );
    let mut d_logits = s.alloc_zeros::<f32>(t * e).unwrap();
    let mut ws = s
        .alloc_zeros::<u8>(fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap())
        .unwrap();
    let mut y = s.alloc_zeros::<bf16>(t * h).unwrap();
    let mut spec = MoeSpec::new([16, 128, 64], [1, 4], 2);
    spec.stages = Some(8);
    let graph = {
        let routing = MoeRouting::Logits {
            logits: MatrixRef::new(&d_logits, t, e),
            topk: k,
            renormalize: true,
        };
        let xv = MatrixRef::new(&d_x, t, h);
        let w13v = MatrixRef::new(&d_w13, 2 * i, h).batched(e, (2 * i * h) as i64);
        let w2v = MatrixRef::new(&d_w2, h, i).batched(e, (h * i) as i64);
        let mut wsv = MoeWorkspace::new(&mut ws);
        let mut yv = MatrixMut::new(&mut y, t, h);
        let opts = MoeOptions {
            route: Some(true),
            ..MoeOptions::default()
        };
        let run = |wsv: &mut MoeWorkspace<'_>, yv: &mut MatrixMut<'_>| {
            let p = validate_fused_moe(&xv, &w13v, &w2v, &routing, &opts, wsv, yv).unwrap();
            ops.run_fused_moe_with(&p, &spec).unwrap()
        };
        run(&mut wsv, &mut yv);
        s.synchronize().unwrap();
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        run(&mut wsv, &mut yv);
        s.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("a graph")
    };
    let to64 = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    for round in 0..3 {
        let logits: Vec<f32> = uniform(&mut rng, t * e, 4.0).iter().map(|v| *v as f32).collect();
        s.memcpy_htod(&logits, &mut d_logits).unwrap();
        graph.launch().unwrap();
        let got: Vec<bf16> = s.clone_dtoh(&y).unwrap();
        let lf: Vec<f64> = logits.iter().map(|v| f64::from(*v)).collect();
        let r = topk_softmax_reference(&lf, t, e, k, true).unwrap();
        let shape = MoeShape {
            tokens: t,
            hidden: h,
            inter: i,
            topk: k,
            expert_offset: 0,
            local_experts: e,
        };
        let want =
            fused_moe_reference(&shape, &to64(&x), &to64(&w13), &to64(&w2), &r.topk_ids, &r.topk_weights).unwrap();
        check_close(&format!("graph replay {round}"), &got, &want);
    }
}

/// The multi-CTA alignment (`MoeOptions::align_ctas = Some(true)`, two kernels and a
/// table in the workspace) and the single block (`Some(false)`) give the same layer bit for
/// bit, and it matches the float64 reference: DeepSeek-like (E = 64, top-6, 4200 to 6000
/// entries: 3 CTAs) on Auto's choice and the SM80 family, all experts and a middle slice,
/// the workspace filled with garbage first (the table included).
#[test]
fn multi_cta_alignment_is_the_single_block_bit_for_bit() {
    let Some(ops) = gpu_for_test().map(Ops::new) else {
        return;
    };
    let s = ops.gpu().stream().clone();
    let (e, k, h, i) = (64usize, 6usize, 264usize, 136usize);
    let mut rng = Rng::for_test("multi_cta_alignment");
    let w13 = bf16s(&uniform(&mut rng, e * 2 * i * h, 1.0 / (h as f64).sqrt()));
    let w2 = bf16s(&uniform(&mut rng, e * h * i, 1.0 / (i as f64).sqrt()));
    let to64 = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for &t in cases(&[1000usize, 700]) {
        let x = bf16s(&uniform(&mut rng, t * h, 1.0));
        let logits: Vec<f32> = uniform(&mut rng, t * e, 4.0).iter().map(|v| *v as f32).collect();
        let seen: Vec<f64> = logits.iter().map(|v| f64::from(*v)).collect();
        let r = topk_softmax_reference(&seen, t, e, k, false).unwrap();
        let (d_x, d_l) = (s.clone_htod(&x).unwrap(), s.clone_htod(&logits).unwrap());
        for (off, l) in [(0, e), (e / 4, e / 2)] {
            let d_w13 = s.clone_htod(&w13[off * 2 * i * h..(off + l) * 2 * i * h]).unwrap();
            let d_w2 = s.clone_htod(&w2[off * h * i..(off + l) * h * i]).unwrap();
            let shape = MoeShape {
                tokens: t,
                hidden: h,
                inter: i,
                topk: k,
                expert_offset: off,
                local_experts: l,
            };
            let w13_64 = to64(&w13[off * 2 * i * h..(off + l) * 2 * i * h]);
            let w2_64 = to64(&w2[off * h * i..(off + l) * h * i]);
            let want = fused_moe_reference(&shape, &to64(&x), &w13_64, &w2_64, &r.topk_ids, &r.topk_weights).unwrap();
            for path in [MoePath::Auto, MoePath::Sm80] {
                let run = |ctas: bool| {
                    let bytes = fused_moe_workspace_bytes(t, k, l, h, i, DType::BF16).unwrap();
                    let mut ws = s.clone_htod(&vec![0xA5u8; bytes]).unwrap();
                    let mut y = s.clone_htod(&vec![bf16::NAN; t * h]).unwrap();
                    let routing = MoeRouting::Logits {
                        logits: MatrixRef::new(&d_l, t, e),
                        topk: k,
                        renormalize: false,
                    };
                    let opts = MoeOptions {
                        expert_offset: off,
                        path,
                        align_ctas: Some(ctas),
                        ..MoeOptions::default()
                    };
                    ops.fused_moe(
                        &MatrixRef::new(&d_x, t, h),
                        &MatrixRef::new(&d_w13, 2 * i, h).batched(l, (2 * i * h) as i64),
                        &MatrixRef::new(&d_w2, h, i).batched(l, (h * i) as i64),
                        &routing,
                        &opts,
                        &mut MoeWorkspace::new(&mut ws),
                        &mut MatrixMut::new(&mut y, t, h),
                    )
                    .unwrap();
                    s.clone_dtoh(&y).unwrap()
                };
                let what = format!("T={t} experts [{off}, {}) {path:?}", off + l);
                let multi = run(true);
                check_close(&format!("{what}, multi-CTA alignment"), &multi, &want);
                assert_eq!(
                    bits(&multi),
                    bits(&run(false)),
                    "{what}: the multi-CTA alignment changed y"
                );
                assert_eq!(bits(&multi), bits(&run(true)), "{what}: two runs differ");
            }
        }
    }
}
