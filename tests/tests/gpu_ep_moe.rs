//! Expert parallelism over NCCL (`rcute_ops::ep`, cargo feature `nccl`) on the GPU: the
//! expert-parallel layer, with each combine (all-reduce, plain and overlapped,
//! reduce-scatter, token dispatch),
//! equals the one-GPU fused MoE on the same inputs: bit for bit with one rank, within bf16
//! tolerance with two (each rank rounds its part to bf16), and both agree with the float64
//! reference. Two ranks run in one process, one thread per rank, each on its own GPU and
//! stream, the communicators from `ncclCommInitAll` (`Communicator::from_streams`).
//! Covered: routing from logits (Mixtral-like, DeepSeek-like shapes), tokens routed only
//! to the other rank's experts, a rank that receives no token, two dispatch runs
//! bit-identical, a CUDA graph of the dispatch replayed with new routing.
//!
//! Skips: without a GPU or NCCL (fails when `RCUTE_REQUIRE_GPU` is set); the two-rank
//! tests with fewer than two GPUs (fail when `RCUTE_REQUIRE_GPU=2`).

#![cfg(feature = "nccl")]

mod common;

use common::{check_close, Rng};
use cudarc::driver::CudaSlice;
use half::bf16;
use rcute_ops::ep::{ep_moe_workspace_bytes, Communicator, EpCombine, ExpertParallel, Nccl};
use rcute_ops::moe::reference::MoeShape;
use rcute_ops::moe::{
    fused_moe_reference, fused_moe_workspace_bytes, topk_softmax_reference, MoeOptions, MoeRouting, MoeWorkspace,
};
use rcute_ops::{DType, Gpu, MatrixMut, MatrixRef, Ops};

/// `RCUTE_REQUIRE_GPU` as a number of GPUs (0 when unset).
fn required() -> usize {
    std::env::var("RCUTE_REQUIRE_GPU")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `n` GPUs with NCCL loaded, or `None` after printing why.
fn gpus(n: usize) -> Option<Vec<Gpu>> {
    let mut v = Vec::new();
    for i in 0..n {
        match Gpu::open(i) {
            Ok(g) => v.push(g),
            Err(e) => {
                assert!(
                    required() < n,
                    "RCUTE_REQUIRE_GPU={} but GPU {i} cannot be opened: {e}",
                    required()
                );
                eprintln!("skipping: {n} GPUs needed, GPU {i} cannot be opened ({e})");
                return None;
            }
        }
    }
    match Nccl::get() {
        Ok(lib) => eprintln!("NCCL {} from {}", lib.version().unwrap(), lib.path),
        Err(e) => {
            assert!(required() == 0, "RCUTE_REQUIRE_GPU is set but NCCL is missing: {e}");
            eprintln!("skipping: {e}");
            return None;
        }
    }
    Some(v)
}

fn rand_bf16(rng: &mut Rng, n: usize, scale: f64) -> Vec<bf16> {
    (0..n)
        .map(|_| bf16::from_f64((f64::from(rng.next_u32()) / f64::from(u32::MAX) * 2.0 - 1.0) * scale))
        .collect()
}

fn f64s(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

fn bits(v: &[bf16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A layer and its inputs on the host.
#[derive(Clone)]
struct Case {
    e: usize,
    k: usize,
    h: usize,
    i: usize,
    t: usize,
    w13: Vec<bf16>,
    w2: Vec<bf16>,
    x: Vec<bf16>,
    /// Router logits `[T, E]` (f32), or the caller's `(ids, weights)`.
    logits: Option<(Vec<f32>, bool)>,
    given: Option<(Vec<i32>, Vec<f32>)>,
}

impl Case {
    fn new(rng: &mut Rng, e: usize, k: usize, h: usize, i: usize, t: usize) -> Case {
        Case {
            e,
            k,
            h,
            i,
            t,
            w13: rand_bf16(rng, e * 2 * i * h, 1.0 / (h as f64).sqrt()),
            w2: rand_bf16(rng, e * h * i, 1.0 / (i as f64).sqrt()),
            x: rand_bf16(rng, t * h, 1.0),
            logits: None,
            given: None,
        }
    }

    fn with_logits(mut self, rng: &mut Rng, renorm: bool) -> Case {
        let l = (0..self.t * self.e)
            .map(|_| (f64::from(rng.next_u32()) / f64::from(u32::MAX) * 8.0 - 4.0) as f32)
            .collect();
        self.logits = Some((l, renorm));
        self
    }

    /// Each token's `k` distinct experts drawn from `experts`.
    fn with_given(mut self, rng: &mut Rng, experts: &[i32]) -> Case {
        let mut ids = Vec::new();
        for _ in 0..self.t {
            let mut row: Vec<i32> = Vec::new();
            while row.len() < self.k {
                let c = experts[rng.range(0, experts.len() as i64 - 1) as usize];
                if !row.contains(&c) {
                    row.push(c);
                }
            }
            ids.extend(row);
        }
        let w = (0..self.t * self.k)
            .map(|_| (rng.next_u32() % 997) as f32 / 997.0 + 0.01)
            .collect();
        self.given = Some((ids, w));
        self
    }

    /// The float64 reference of tokens `rows`.
    fn reference(&self) -> Vec<f64> {
        let (ids, w) = match (&self.logits, &self.given) {
            (Some((l, renorm)), _) => {
                let lf: Vec<f64> = l.iter().map(|v| f64::from(*v)).collect();
                let r = topk_softmax_reference(&lf, self.t, self.e, self.k, *renorm).unwrap();
                (r.topk_ids, r.topk_weights)
            }
            (None, Some((i, w))) => (i.clone(), w.iter().map(|v| f64::from(*v)).collect()),
            _ => unreachable!(),
        };
        let shape = MoeShape {
            tokens: self.t,
            hidden: self.h,
            inter: self.i,
            topk: self.k,
            expert_offset: 0,
            local_experts: self.e,
        };
        fused_moe_reference(&shape, &f64s(&self.x), &f64s(&self.w13), &f64s(&self.w2), &ids, &w).unwrap()
    }
}

/// Device copies of a case's routing for tokens `[t0, t0 + t)`.
struct Routing {
    logits: Option<(CudaSlice<f32>, bool)>,
    given: Option<(CudaSlice<i32>, CudaSlice<f32>)>,
}

impl Routing {
    fn upload(ops: &Ops, c: &Case, t0: usize, t: usize) -> Routing {
        let s = ops.stream();
        Routing {
            logits: c
                .logits
                .as_ref()
                .map(|(l, r)| (s.clone_htod(&l[t0 * c.e..(t0 + t) * c.e]).unwrap(), *r)),
            given: c.given.as_ref().map(|(i, w)| {
                (
                    s.clone_htod(&i[t0 * c.k..(t0 + t) * c.k]).unwrap(),
                    s.clone_htod(&w[t0 * c.k..(t0 + t) * c.k]).unwrap(),
                )
            }),
        }
    }

    fn view(&self, c: &Case, t: usize) -> MoeRouting<'_> {
        match (&self.logits, &self.given) {
            (Some((l, r)), _) => MoeRouting::Logits {
                logits: MatrixRef::new(l, t, c.e),
                topk: c.k,
                renormalize: *r,
            },
            (None, Some((i, w))) => MoeRouting::Given {
                topk_ids: MatrixRef::new(i, t, c.k),
                topk_weights: MatrixRef::new(w, t, c.k),
            },
            _ => unreachable!(),
        }
    }
}

/// The one-GPU fused MoE of the whole case on `ops`.
fn single_gpu(ops: &Ops, c: &Case) -> Vec<bf16> {
    let s = ops.stream();
    let (w13, w2, x) = (
        s.clone_htod(&c.w13).unwrap(),
        s.clone_htod(&c.w2).unwrap(),
        s.clone_htod(&c.x).unwrap(),
    );
    let r = Routing::upload(ops, c, 0, c.t);
    let mut ws = s
        .alloc_zeros::<u8>(fused_moe_workspace_bytes(c.t, c.k, c.e, c.h, c.i, DType::BF16).unwrap())
        .unwrap();
    let mut y = s.clone_htod(&vec![bf16::NAN; c.t * c.h]).unwrap();
    ops.fused_moe(
        &MatrixRef::new(&x, c.t, c.h),
        &MatrixRef::new(&w13, 2 * c.i, c.h).batched(c.e, (2 * c.i * c.h) as i64),
        &MatrixRef::new(&w2, c.h, c.i).batched(c.e, (c.h * c.i) as i64),
        &r.view(c, c.t),
        &MoeOptions::default(),
        &mut MoeWorkspace::new(&mut ws),
        &mut MatrixMut::new(&mut y, c.t, c.h),
    )
    .unwrap();
    s.clone_dtoh(&y).unwrap()
}

/// Rank `ep.comm().rank()`'s run of `combine` (`runs` times; every result returned).
fn rank_run(ep: &ExpertParallel, c: &Case, combine: EpCombine, runs: usize) -> Vec<Vec<bf16>> {
    let (r, w) = (ep.comm().rank(), ep.comm().world_size());
    let l = c.e / w;
    let s = ep.ops().stream().clone();
    let (a, b) = (2 * c.i * c.h, c.h * c.i);
    let w13 = s.clone_htod(&c.w13[r * l * a..(r + 1) * l * a]).unwrap();
    let w2 = s.clone_htod(&c.w2[r * l * b..(r + 1) * l * b]).unwrap();
    // Dispatch: this rank's own tokens; the others: all tokens.
    let (t0, t) = match combine {
        EpCombine::Dispatch => (r * c.t / w, c.t / w),
        _ => (0, c.t),
    };
    let x = s.clone_htod(&c.x[t0 * c.h..(t0 + t) * c.h]).unwrap();
    let routing = Routing::upload(ep.ops(), c, t0, t);
    let rows_out = if combine == EpCombine::ReduceScatter { t / w } else { t };
    let bytes = ep_moe_workspace_bytes(combine, t, c.k, l, w, c.h, c.i, DType::BF16).unwrap();
    let mut ws = s.alloc_zeros::<u8>(bytes).unwrap();
    let mut out = Vec::new();
    for _ in 0..runs {
        let mut y = s.clone_htod(&vec![bf16::NAN; rows_out * c.h]).unwrap();
        ep.fused_moe(
            &MatrixRef::new(&x, t, c.h),
            &MatrixRef::new(&w13, 2 * c.i, c.h).batched(l, (2 * c.i * c.h) as i64),
            &MatrixRef::new(&w2, c.h, c.i).batched(l, (c.h * c.i) as i64),
            &routing.view(c, t),
            combine,
            &mut MoeWorkspace::new(&mut ws),
            &mut MatrixMut::new(&mut y, rows_out, c.h),
        )
        .unwrap();
        out.push(s.clone_dtoh(&y).unwrap());
    }
    out
}

/// The ranks of `gpus`, one communicator each.
fn ranks(gpus: &[Gpu]) -> Vec<ExpertParallel> {
    let streams: Vec<_> = gpus.iter().map(|g| g.stream().clone()).collect();
    let comms = Communicator::from_streams(&streams).unwrap();
    gpus.iter()
        .zip(comms)
        .map(|(g, c)| ExpertParallel::new(&Ops::new(g.clone()), c).unwrap())
        .collect()
}

const COMBINES: [EpCombine; 4] = [
    EpCombine::AllReduce,
    EpCombine::AllReduceOverlapped,
    EpCombine::ReduceScatter,
    EpCombine::Dispatch,
];

/// Every combine on two ranks (one thread each) against the one-GPU layer and the
/// reference: each rank's rows of the output.
fn two_rank_case(name: &str, c: &Case) {
    let Some(g) = gpus(2) else { return };
    let single = single_gpu(&Ops::new(g[0].clone()), c);
    let want = c.reference();
    check_close(&format!("{name}: one GPU"), &single, &want);
    let eps = ranks(&g);
    for combine in COMBINES {
        let got: Vec<Vec<Vec<bf16>>> = std::thread::scope(|sc| {
            let hs: Vec<_> = eps
                .iter()
                .map(|ep| sc.spawn(move || rank_run(ep, c, combine, 2)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (r, runs) in got.iter().enumerate() {
            let (t0, t) = match combine {
                EpCombine::AllReduce | EpCombine::AllReduceOverlapped => (0, c.t),
                _ => (r * c.t / 2, c.t / 2),
            };
            let rows = t0 * c.h..(t0 + t) * c.h;
            let what = format!("{name}: {combine:?} rank {r}");
            check_close(&format!("{what} vs reference"), &runs[0], &want[rows.clone()]);
            check_close(&format!("{what} vs one GPU"), &runs[0], &f64s(&single[rows]));
            assert_eq!(bits(&runs[0]), bits(&runs[1]), "{what}: two runs differ");
        }
        if matches!(combine, EpCombine::AllReduce | EpCombine::AllReduceOverlapped) {
            assert_eq!(
                bits(&got[0][0]),
                bits(&got[1][0]),
                "{name}: the ranks' all-reduced outputs differ"
            );
        }
    }
}

#[test]
fn two_ranks_mixtral_like_logits() {
    let mut rng = Rng::for_test("ep_mixtral_like");
    let c = Case::new(&mut rng, 8, 2, 200, 136, 130).with_logits(&mut rng, true);
    two_rank_case("mixtral_like", &c);
}

#[test]
fn two_ranks_deepseek_like_logits() {
    let mut rng = Rng::for_test("ep_deepseek_like");
    let c = Case::new(&mut rng, 64, 6, 144, 96, 100).with_logits(&mut rng, false);
    two_rank_case("deepseek_like", &c);
}

/// Every token routed to rank 1's experts [4, 8): rank 0's tokens go only to the other
/// rank, and rank 0 receives no token (its experts compute nothing).
#[test]
fn two_ranks_tokens_only_to_the_other_rank() {
    let mut rng = Rng::for_test("ep_other_rank");
    let c = Case::new(&mut rng, 8, 2, 136, 72, 90).with_given(&mut rng, &[4, 5, 6, 7]);
    two_rank_case("only rank 1's experts", &c);
    let c = Case::new(&mut rng, 8, 2, 136, 72, 90).with_given(&mut rng, &[0, 1, 2, 3]);
    two_rank_case("only rank 0's experts", &c);
}

/// NCCL with one rank (one GPU): every combine is the one-GPU layer bit for bit (the
/// overlapped all-reduce, which runs the layer in two halves whose GEMM configuration
/// may differ from the whole's, within bf16 tolerance).
#[test]
fn one_rank_equals_fused_moe_bitwise() {
    let Some(g) = gpus(1) else { return };
    let mut rng = Rng::for_test("ep_one_rank");
    let c = Case::new(&mut rng, 8, 2, 136, 72, 77).with_logits(&mut rng, true);
    let single = single_gpu(&Ops::new(g[0].clone()), &c);
    check_close("one rank: one GPU", &single, &c.reference());
    let eps = ranks(&g);
    for combine in COMBINES {
        let y = rank_run(&eps[0], &c, combine, 1);
        if combine == EpCombine::AllReduceOverlapped {
            check_close("one rank, overlapped", &y[0], &f64s(&single));
        } else {
            assert_eq!(bits(&y[0]), bits(&single), "{combine:?} with one rank");
        }
    }
}

/// A rank built `with_up_first(true)` reads `w13` as up rows first: fed the gate-first
/// weights with each expert's halves swapped, every combine on one rank gives the one-GPU
/// gate-first layer bit for bit (the overlapped all-reduce within bf16 tolerance).
#[test]
fn one_rank_up_first_equals_gate_first() {
    let Some(g) = gpus(1) else { return };
    let mut rng = Rng::for_test("ep_up_first");
    let c = Case::new(&mut rng, 4, 2, 72, 40, 33).with_logits(&mut rng, true);
    let single = single_gpu(&Ops::new(g[0].clone()), &c);
    let mut swapped = c.clone();
    let half = c.i * c.h;
    for e in 0..c.e {
        let w = &mut swapped.w13[e * 2 * half..(e + 1) * 2 * half];
        let (gate, up) = w.split_at_mut(half);
        gate.swap_with_slice(up);
    }
    let ep = ranks(&g).remove(0).with_up_first(true);
    for combine in COMBINES {
        let y = rank_run(&ep, &swapped, combine, 1);
        if combine == EpCombine::AllReduceOverlapped {
            check_close("one rank up-first, overlapped", &y[0], &f64s(&single));
        } else {
            assert_eq!(bits(&y[0]), bits(&single), "{combine:?} up-first with one rank");
        }
    }
}

/// A CUDA graph of the dispatch layer on each of two ranks, captured once and replayed
/// after new routing was copied into the same buffers, gives the new answer.
#[test]
fn two_ranks_dispatch_graph_replay() {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let Some(g) = gpus(2) else { return };
    let mut rng = Rng::for_test("ep_graph");
    let c0 = Case::new(&mut rng, 8, 2, 64, 48, 40).with_given(&mut rng, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let c1 = c0.clone().with_given(&mut rng, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let eps = ranks(&g);
    let (w, l) = (2, 4);
    let got: Vec<Vec<bf16>> = std::thread::scope(|sc| {
        let hs: Vec<_> = eps
            .iter()
            .map(|ep| {
                let (c0, c1) = (&c0, &c1);
                sc.spawn(move || {
                    let c = c0;
                    let r = ep.comm().rank();
                    let s = ep.ops().stream().clone();
                    let (a, b) = (2 * c.i * c.h, c.h * c.i);
                    let w13 = s.clone_htod(&c.w13[r * l * a..(r + 1) * l * a]).unwrap();
                    let w2 = s.clone_htod(&c.w2[r * l * b..(r + 1) * l * b]).unwrap();
                    let t = c.t / w;
                    let x = s.clone_htod(&c.x[r * t * c.h..(r + 1) * t * c.h]).unwrap();
                    let mut routing = Routing::upload(ep.ops(), c, r * t, t);
                    let bytes =
                        ep_moe_workspace_bytes(EpCombine::Dispatch, t, c.k, l, w, c.h, c.i, DType::BF16).unwrap();
                    let mut ws = s.alloc_zeros::<u8>(bytes).unwrap();
                    let mut y = s.alloc_zeros::<bf16>(t * c.h).unwrap();
                    let graph = {
                        let xv = MatrixRef::new(&x, t, c.h);
                        let w13v = MatrixRef::new(&w13, 2 * c.i, c.h).batched(l, (2 * c.i * c.h) as i64);
                        let w2v = MatrixRef::new(&w2, c.h, c.i).batched(l, (c.h * c.i) as i64);
                        let rv = routing.view(c, t);
                        let mut wsv = MoeWorkspace::new(&mut ws);
                        let mut yv = MatrixMut::new(&mut y, t, c.h);
                        ep.fused_moe(&xv, &w13v, &w2v, &rv, EpCombine::Dispatch, &mut wsv, &mut yv)
                            .unwrap();
                        s.synchronize().unwrap();
                        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
                            .unwrap();
                        ep.fused_moe(&xv, &w13v, &w2v, &rv, EpCombine::Dispatch, &mut wsv, &mut yv)
                            .unwrap();
                        s.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("a graph")
                    };
                    let (ids, wts) = c1.given.as_ref().unwrap();
                    let (di, dw) = routing.given.as_mut().unwrap();
                    s.memcpy_htod(&ids[r * t * c.k..(r + 1) * t * c.k], di).unwrap();
                    s.memcpy_htod(&wts[r * t * c.k..(r + 1) * t * c.k], dw).unwrap();
                    graph.launch().unwrap();
                    s.clone_dtoh(&y).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let want = c1.reference();
    let t = c1.t / w;
    for (r, y) in got.iter().enumerate() {
        check_close(
            &format!("graph replay rank {r}"),
            y,
            &want[r * t * c1.h..(r + 1) * t * c1.h],
        );
    }
}
