//! The MoE routing kernels on the GPU against the float64 references of `rcute_ops::moe`:
//! random router logits (f32, bf16, f16) for the Mixtral (E = 8, top-2) and
//! DeepSeek-V2-Lite (E = 64, top-6) shapes at T = 1, 3, 64, 1000, 4096, with and without
//! renormalisation. Top-k ids must match exactly (the kernel and the reference select on
//! the same logits with the same tie rule), weights within 1e-6 relative. The alignment
//! runs on the kernel's ids for the full expert range, an expert-parallel slice (offset 2,
//! 3 local experts) and a slice no token routes to, at several tile heights; every output
//! must match exactly, past the used rows too (sentinel, -1), and a second run must be
//! bit-identical. Outputs are poisoned first. The fused top-k + alignment kernel (decode
//! batches, T <= 32) must give the two kernels' outputs bit for bit, and the alignment
//! with its rows staged in shared memory those of the direct one, and the multi-CTA
//! alignment (`align_multi`) those of the single block, its walk counters zeroed. Skips
//! with a printed reason without a GPU (fails under `RCUTE_REQUIRE_GPU=1`).

mod common;

use common::{compile_and_gpu, Rng};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use rcute_atom::Element;
use rcute_kernel::grid_dependency::launch_chained;
use rcute_kernel::moe_routing::align::{self, AlignCapacity, GeneratedMoeAlign, MoeAlignArgs};
use rcute_kernel::moe_routing::topk_softmax::{self, GeneratedTopkSoftmax, TopkSoftmaxArgs};
use rcute_kernel::moe_routing::{align_multi, topk_align};
use rcute_kernel::{Arch, Function, Gpu, LaunchConfig};
use rcute_ops::moe::{align_reference, topk_softmax_reference, Alignment};
use std::sync::Arc;

const POISON: i32 = 0x5a5a_5a5a;

/// Logits `[T, E]` rounded to `element`: their exact values and their bytes. Roughly
/// normal with standard deviation 2; experts `low..E` get -30 (never selected at top-k
/// when `low >= k`).
fn logits(rng: &mut Rng, element: Element, t: usize, e: usize, low: usize) -> (Vec<f64>, Vec<u8>) {
    let mut values = Vec::with_capacity(t * e);
    let mut bytes = Vec::with_capacity(t * e * 4);
    for i in 0..t * e {
        let u: f64 = (0..4).map(|_| f64::from(rng.next_u32()) / f64::from(u32::MAX)).sum();
        let x = if i % e >= low { -30.0 } else { (u - 2.0) * 3.4 };
        match element {
            Element::F32 => {
                let v = x as f32;
                values.push(f64::from(v));
                bytes.extend(v.to_le_bytes());
            }
            Element::BF16 => {
                let v = half::bf16::from_f64(x);
                values.push(v.to_f64());
                bytes.extend(v.to_bits().to_le_bytes());
            }
            _ => {
                let v = half::f16::from_f64(x);
                values.push(v.to_f64());
                bytes.extend(v.to_bits().to_le_bytes());
            }
        }
    }
    (values, bytes)
}

struct Topk<'a> {
    g: &'a GeneratedTopkSoftmax,
    f: &'a Function,
    stream: &'a Arc<CudaStream>,
}

impl Topk<'_> {
    /// Routes on the GPU; returns the device ids (for the alignment) and both outputs.
    fn run(
        &self,
        d_logits: &CudaSlice<u8>,
        t: usize,
        e: usize,
        k: usize,
        renorm: bool,
    ) -> (CudaSlice<i32>, Vec<i32>, Vec<f32>) {
        let s = self.stream;
        let mut d_ids = s.clone_htod(&vec![POISON; t * k]).unwrap();
        let mut d_w = s.clone_htod(&vec![f32::NAN; t * k]).unwrap();
        {
            let (pl, _gl) = d_logits.device_ptr(s);
            let (pi, _gi) = d_ids.device_ptr_mut(s);
            let (pw, _gw) = d_w.device_ptr_mut(s);
            let a = TopkSoftmaxArgs {
                logits: pl,
                topk_ids: pi,
                topk_weights: pw,
                tokens: t as i32,
                experts: e as i32,
                topk: k as i32,
                renormalize: renorm,
            };
            self.g.check(&a).unwrap();
            // SAFETY: logits hold [T, E] elements of the kernel's type, ids and weights
            // [T, k] (fresh allocations); E and k were checked against the kernel.
            unsafe { launch_chained(self.f, self.g.launch_config(&a).with_checked(true), self.g.args(&a)) }.unwrap();
        }
        let ids = s.clone_dtoh(&d_ids).unwrap();
        let w = s.clone_dtoh(&d_w).unwrap();
        (d_ids, ids, w)
    }
}

/// The alignment kernel's outputs, full length.
#[derive(Debug, PartialEq, Eq)]
struct AlignOut {
    counts: Vec<i32>,
    offsets: Vec<i32>,
    sorted_ids: Vec<i32>,
    block_expert: Vec<i32>,
    total: i32,
}

/// The alignment's device outputs, poisoned before a launch.
struct AlignBuffers {
    counts: CudaSlice<i32>,
    offsets: CudaSlice<i32>,
    sorted_ids: CudaSlice<i32>,
    block_expert: CudaSlice<i32>,
    total: CudaSlice<i32>,
}

impl AlignBuffers {
    /// `L` counts, `L + 1` offsets and the capacity's rows and blocks, all [`POISON`].
    fn poisoned(s: &Arc<CudaStream>, local: usize, cap: AlignCapacity) -> Self {
        let poisoned = |n: usize| s.clone_htod(&vec![POISON; n]).unwrap();
        AlignBuffers {
            counts: poisoned(local),
            offsets: poisoned(local + 1),
            sorted_ids: poisoned(cap.rows),
            block_expert: poisoned(cap.blocks),
            total: poisoned(1),
        }
    }

    /// The outputs on the host.
    fn read(&self, s: &Arc<CudaStream>) -> AlignOut {
        AlignOut {
            counts: s.clone_dtoh(&self.counts).unwrap(),
            offsets: s.clone_dtoh(&self.offsets).unwrap(),
            sorted_ids: s.clone_dtoh(&self.sorted_ids).unwrap(),
            block_expert: s.clone_dtoh(&self.block_expert).unwrap(),
            total: s.clone_dtoh(&self.total).unwrap()[0],
        }
    }
}

struct Align<'a> {
    g: &'a GeneratedMoeAlign,
    f: &'a Function,
    stream: &'a Arc<CudaStream>,
}

impl Align<'_> {
    fn run(
        &self,
        d_ids: &CudaSlice<i32>,
        t: usize,
        k: usize,
        offset: usize,
        local: usize,
        bm: usize,
    ) -> (AlignOut, AlignCapacity) {
        self.run_with(d_ids, (t, k), (offset, local, bm), |_| self.g.launch_config())
    }

    /// `run` with the launch configuration `cfg` gives for the arguments.
    fn run_with(
        &self,
        d_ids: &CudaSlice<i32>,
        (t, k): (usize, usize),
        (offset, local, bm): (usize, usize, usize),
        cfg: impl Fn(&MoeAlignArgs) -> LaunchConfig,
    ) -> (AlignOut, AlignCapacity) {
        let s = self.stream;
        let cap = align::align_capacity(t, k, local, bm).unwrap();
        let mut b = AlignBuffers::poisoned(s, local, cap);
        {
            let (pi, _g0) = d_ids.device_ptr(s);
            let (pc, _g1) = b.counts.device_ptr_mut(s);
            let (po, _g2) = b.offsets.device_ptr_mut(s);
            let (ps, _g3) = b.sorted_ids.device_ptr_mut(s);
            let (pb, _g4) = b.block_expert.device_ptr_mut(s);
            let (pt, _g5) = b.total.device_ptr_mut(s);
            let a = MoeAlignArgs {
                topk_ids: pi,
                counts: pc,
                offsets: po,
                sorted_ids: ps,
                block_expert: pb,
                total_rows: pt,
                tokens: t as i32,
                topk: k as i32,
                expert_offset: offset as i32,
                local_experts: local as i32,
                block_m: bm as i32,
                walk_counters: 0,
            };
            let args = self.g.args(&a).unwrap();
            // SAFETY: topk_ids holds [T, k] ints; the outputs have the lengths
            // `align_capacity` gives for these sizes (counts L, offsets L + 1, sorted ids
            // `rows`, block experts `blocks`, total 1), as the kernel requires.
            unsafe { launch_chained(self.f, cfg(&a).with_checked(true), args) }.unwrap();
        }
        (b.read(s), cap)
    }
}

/// The kernel's full-length outputs against the trimmed reference.
fn check_alignment(got: &AlignOut, want: &Alignment, cap: AlignCapacity, sentinel: i32, what: &str) {
    assert_eq!(got.counts, want.counts, "{what}: counts");
    assert_eq!(got.offsets, want.offsets, "{what}: offsets");
    assert_eq!(got.total as usize, want.total_rows, "{what}: total rows");
    let used = want.total_rows;
    assert!(used <= cap.rows, "{what}: {used} rows past the capacity {}", cap.rows);
    assert_eq!(got.sorted_ids[..used], want.sorted_ids[..], "{what}: sorted ids");
    assert!(
        got.sorted_ids[used..].iter().all(|&v| v == sentinel),
        "{what}: rows past the total"
    );
    let blocks = want.block_expert.len();
    assert_eq!(
        got.block_expert[..blocks],
        want.block_expert[..],
        "{what}: block experts"
    );
    assert!(
        got.block_expert[blocks..].iter().all(|&v| v == -1),
        "{what}: blocks past the total"
    );
}

/// The GPU's top-k `ids` and weights `w` against the float64 routing of `logits` for
/// `(t, e, k)`: `t` tokens, `e` experts, top-`k`, renormalised with `renorm`.
fn check_routing(ids: &[i32], w: &[f32], logits: &[f64], (t, e, k): (usize, usize, usize), renorm: bool, what: &str) {
    let want = topk_softmax_reference(logits, t, e, k, renorm).unwrap();
    let bad: Vec<String> = (0..t * k)
        .filter(|&i| {
            ids[i] != want.topk_ids[i]
                || (f64::from(w[i]) - want.topk_weights[i]).abs() > 1e-6 * want.topk_weights[i].abs()
        })
        .take(8)
        .map(|i| {
            format!(
                "token {} slot {}: got ({}, {:e}), want ({}, {:e})",
                i / k,
                i % k,
                ids[i],
                w[i],
                want.topk_ids[i],
                want.topk_weights[i]
            )
        })
        .collect();
    assert!(bad.is_empty(), "{what}: {bad:#?}");
}

fn load(gpu: &Gpu, compiled: &rcute_kernel::Compiled, name: &str) -> Function {
    gpu.load(compiled).unwrap().function(name).unwrap()
}

#[test]
fn routing_matches_the_reference() {
    let ga = align::generate();
    let Some((gpu, ca)) = compile_and_gpu(&ga.source, &format!("{}.cu", ga.name), Arch::Sm80) else {
        return;
    };
    let stream = gpu.stream();
    let fa = load(&gpu, &ca, &ga.name);
    let aligner = Align { g: &ga, f: &fa, stream };
    let mut rng = Rng::for_test("gpu_moe_routing");
    for element in [Element::F32, Element::BF16, Element::F16] {
        for (e, k) in [(8usize, 2usize), (64, 6)] {
            let g = topk_softmax::generate(element, e as u32).unwrap();
            let Some((_, c)) = compile_and_gpu(&g.source, &format!("{}.cu", g.name), Arch::Sm80) else {
                return;
            };
            let f = load(&gpu, &c, &g.name);
            let router = Topk { g: &g, f: &f, stream };
            for t in [1usize, 3, 64, 1000, 4096] {
                let (values, bytes) = logits(&mut rng, element, t, e, e);
                let d_logits = stream.clone_htod(&bytes).unwrap();
                for renorm in [false, true] {
                    let what = format!("{} T={t} E={e} k={k} renorm={renorm}", g.name);
                    let (d_ids, ids, w) = router.run(&d_logits, t, e, k, renorm);
                    check_routing(&ids, &w, &values, (t, e, k), renorm, &what);
                    let (_, ids2, w2) = router.run(&d_logits, t, e, k, renorm);
                    assert!(
                        ids2 == ids && w2.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{what}: rerun differs"
                    );
                    if renorm {
                        continue; // the alignment sees the same ids either way
                    }
                    for (offset, local, bm) in [(0, e, 16), (0, e, 64), (2, 3, 16), (2, 3, 128)] {
                        let what = format!("{what} align [{offset}, +{local}) block_m={bm}");
                        let want = align_reference(&ids, t, k, offset, local, bm).unwrap();
                        let (got, cap) = aligner.run(&d_ids, t, k, offset, local, bm);
                        check_alignment(&got, &want, cap, (t * k) as i32, &what);
                        let (again, _) = aligner.run(&d_ids, t, k, offset, local, bm);
                        assert_eq!(again, got, "{what}: rerun differs");
                    }
                }
            }
        }
    }
}

/// Experts 4..8 get logits of -30: top-2 never picks them, so the slice [4, 8) receives no
/// token (all counts 0, no rows, every block -1) while [0, 4) receives all.
#[test]
fn a_slice_without_tokens_gets_no_rows() {
    let ga = align::generate();
    let Some((gpu, ca)) = compile_and_gpu(&ga.source, &format!("{}.cu", ga.name), Arch::Sm80) else {
        return;
    };
    let stream = gpu.stream();
    let fa = load(&gpu, &ca, &ga.name);
    let aligner = Align { g: &ga, f: &fa, stream };
    let g = topk_softmax::generate(Element::BF16, 8).unwrap();
    let Some((_, c)) = compile_and_gpu(&g.source, &format!("{}.cu", g.name), Arch::Sm80) else {
        return;
    };
    let f = load(&gpu, &c, &g.name);
    let router = Topk { g: &g, f: &f, stream };
    let mut rng = Rng::for_test("gpu_moe_routing_empty_slice");
    let (t, e, k) = (300, 8, 2);
    let (values, bytes) = logits(&mut rng, Element::BF16, t, e, 4);
    let d_logits = stream.clone_htod(&bytes).unwrap();
    let (d_ids, ids, w) = router.run(&d_logits, t, e, k, true);
    check_routing(&ids, &w, &values, (t, e, k), true, "empty-slice routing");
    for (offset, local) in [(4, 4), (0, 4)] {
        let want = align_reference(&ids, t, k, offset, local, 16).unwrap();
        let (got, cap) = aligner.run(&d_ids, t, k, offset, local, 16);
        check_alignment(&got, &want, cap, (t * k) as i32, &format!("slice [{offset}, +{local})"));
        assert_eq!(want.total_rows == 0, offset == 4);
    }
}

/// The first `RCUTE_CASES` items (all without it): the sanitizer runs keep two.
fn cases<T>(items: &[T]) -> &[T] {
    let n = std::env::var("RCUTE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(items.len());
    &items[..n.min(items.len())]
}

/// The fused top-k + alignment's outputs: ids, weights and the alignment.
fn run_fused(
    stream: &Arc<CudaStream>,
    (g, f): (&topk_align::GeneratedTopkAlign, &Function),
    d_logits: &CudaSlice<u8>,
    (t, e, k, renorm): (usize, usize, usize, bool),
    (offset, local, bm): (usize, usize, usize),
) -> (Vec<i32>, Vec<f32>, AlignOut) {
    let s = stream;
    let cap = align::align_capacity(t, k, local, bm).unwrap();
    let mut d_w = s.clone_htod(&vec![f32::NAN; t * k]).unwrap();
    let mut ids = s.clone_htod(&vec![POISON; t * k]).unwrap();
    let mut b = AlignBuffers::poisoned(s, local, cap);
    {
        let (pl, _gl) = d_logits.device_ptr(s);
        let (pw, _gw) = d_w.device_ptr_mut(s);
        let (pi, _g0) = ids.device_ptr_mut(s);
        let (pc, _g1) = b.counts.device_ptr_mut(s);
        let (po, _g2) = b.offsets.device_ptr_mut(s);
        let (ps, _g3) = b.sorted_ids.device_ptr_mut(s);
        let (pb, _g4) = b.block_expert.device_ptr_mut(s);
        let (pt, _g5) = b.total.device_ptr_mut(s);
        let ta = TopkSoftmaxArgs {
            logits: pl,
            topk_ids: pi,
            topk_weights: pw,
            tokens: t as i32,
            experts: e as i32,
            topk: k as i32,
            renormalize: renorm,
        };
        let aa = MoeAlignArgs {
            topk_ids: pi,
            counts: pc,
            offsets: po,
            sorted_ids: ps,
            block_expert: pb,
            total_rows: pt,
            tokens: t as i32,
            topk: k as i32,
            expert_offset: offset as i32,
            local_experts: local as i32,
            block_m: bm as i32,
            walk_counters: 0,
        };
        let args = g.args(&ta, &aa).unwrap();
        // SAFETY: logits hold [T, E] elements of the kernel's type, ids and weights [T, k];
        // the alignment's outputs have the lengths `align_capacity` gives (counts L,
        // offsets L + 1, sorted ids `rows`, block experts `blocks`, total 1); `args`
        // checked T <= 32, E, k and the sizes.
        unsafe { launch_chained(f, g.launch_config().with_checked(true), args) }.unwrap();
    }
    (s.clone_dtoh(&ids).unwrap(), s.clone_dtoh(&d_w).unwrap(), b.read(s))
}

/// The fused top-k + alignment (one block: the ids kept in shared memory for the
/// alignment) against the top-k kernel followed by the alignment kernel, bit for bit:
/// f32 and bf16 logits, E = 8 top-2 and E = 64 top-6, T = 1 to 32, with and without
/// renormalisation, the full expert range at tiles of 16 and 128 and an expert-parallel
/// slice; a T = 33 launch is a typed error.
#[test]
fn fused_topk_align_matches_the_two_kernels() {
    let ga = align::generate();
    let Some((gpu, ca)) = compile_and_gpu(&ga.source, &format!("{}.cu", ga.name), Arch::Sm80) else {
        return;
    };
    let stream = gpu.stream();
    let fa = load(&gpu, &ca, &ga.name);
    let aligner = Align { g: &ga, f: &fa, stream };
    let mut rng = Rng::for_test("gpu_moe_fused_topk_align");
    for element in [Element::F32, Element::BF16] {
        for (e, k) in [(8usize, 2usize), (64, 6)] {
            let g = topk_softmax::generate(element, e as u32).unwrap();
            let gf = topk_align::generate(element, e as u32).unwrap();
            let (Some((_, c)), Some((_, cf))) = (
                compile_and_gpu(&g.source, &format!("{}.cu", g.name), Arch::Sm80),
                compile_and_gpu(&gf.source, &format!("{}.cu", gf.name), Arch::Sm80),
            ) else {
                return;
            };
            let (f, ff) = (load(&gpu, &c, &g.name), load(&gpu, &cf, &gf.name));
            let router = Topk { g: &g, f: &f, stream };
            for &t in cases(&[1usize, 32, 3, 17]) {
                let (_, bytes) = logits(&mut rng, element, t, e, e);
                let d_logits = stream.clone_htod(&bytes).unwrap();
                for renorm in [false, true] {
                    let (d_ids, ids, w) = router.run(&d_logits, t, e, k, renorm);
                    for (offset, local, bm) in [(0, e, 16), (0, e, 128), (2, 3, 16)] {
                        let what = format!(
                            "{} T={t} renorm={renorm} align [{offset}, +{local}) block_m={bm}",
                            gf.name
                        );
                        let (fids, fw, fout) =
                            run_fused(stream, (&gf, &ff), &d_logits, (t, e, k, renorm), (offset, local, bm));
                        assert_eq!(fids, ids, "{what}: ids");
                        assert!(
                            fw.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{what}: weights"
                        );
                        let (want, _) = aligner.run(&d_ids, t, k, offset, local, bm);
                        assert_eq!(fout, want, "{what}: alignment");
                    }
                }
            }
            let too_many = TopkSoftmaxArgs {
                logits: 256,
                topk_ids: 512,
                topk_weights: 768,
                tokens: topk_align::MAX_TOKENS as i32 + 1,
                experts: e as i32,
                topk: k as i32,
                renormalize: false,
            };
            let a = MoeAlignArgs {
                topk_ids: 512,
                counts: 1024,
                offsets: 2048,
                sorted_ids: 4096,
                block_expert: 8192,
                total_rows: 16384,
                tokens: too_many.tokens,
                topk: k as i32,
                expert_offset: 0,
                local_experts: e as i32,
                block_m: 16,
                walk_counters: 0,
            };
            assert!(gf.args(&too_many, &a).is_err(), "T = 33 must be refused");
        }
    }
}

/// The alignment with its rows staged in shared memory (the layer's launch) against the
/// reference and the direct launch, bit for bit, and a launch whose dynamic shared memory
/// is one int short of the rows (the kernel must write directly): random ids over
/// `[-1, E + 2)` (some dropped) and hot ones (most to one expert), E = 64 top-6 and E = 8
/// top-2, T = 1 to 4096, the full range at tiles of 16 and 128 and an expert-parallel
/// slice; the first launch of a fresh kernel needs the shared-memory opt-in below 48 KiB
/// of dynamic shared memory.
#[test]
fn staged_alignment_matches_the_direct_one() {
    let ga = align::generate();
    let Some((gpu, ca)) = compile_and_gpu(&ga.source, &format!("{}.cu", ga.name), Arch::Sm80) else {
        return;
    };
    let stream = gpu.stream();
    let fa = load(&gpu, &ca, &ga.name);
    let free = gpu.max_shared_per_block_optin() - fa.static_smem_bytes();
    let aligner = Align { g: &ga, f: &fa, stream };
    let mut rng = Rng::for_test("gpu_moe_staged_align");
    for (e, k) in [(64usize, 6usize), (8, 2)] {
        // T = 100 first: its rows (34 KiB at tiles of 128) and the kernel's 37 KiB of
        // static shared memory pass 48 KiB only with the opt-in.
        for &t in cases(&[100usize, 4096, 1, 1000, 3]) {
            for hot in [false, true] {
                let ids = routed_ids(&mut rng, t * k, e, hot);
                let d_ids = stream.clone_htod(&ids).unwrap();
                for (offset, local, bm) in [(0, e, 16), (0, e, 128), (2, 3, 128)] {
                    let what = format!("E={e} k={k} T={t} hot={hot} align [{offset}, +{local}) block_m={bm}");
                    let want = align_reference(&ids, t, k, offset, local, bm).unwrap();
                    let tk = (t, k);
                    let olb = (offset, local, bm);
                    let staged = |a: &MoeAlignArgs| ga.staged_launch_config(a, free).unwrap();
                    let (got, cap) = aligner.run_with(&d_ids, tk, olb, staged);
                    assert!(
                        cap.rows > align::STAGED_ROWS_MAX || staged(&aligner_args(t, k, olb)).dynamic_smem_bytes > 0,
                        "{what}: not staged"
                    );
                    check_alignment(&got, &want, cap, (t * k) as i32, &what);
                    let (direct, _) = aligner.run(&d_ids, t, k, offset, local, bm);
                    assert_eq!(got, direct, "{what}: staged and direct differ");
                    let short = |_: &MoeAlignArgs| ga.launch_config().with_dynamic_smem(cap.rows as u32 * 4 - 4);
                    let (short_out, _) = aligner.run_with(&d_ids, tk, olb, short);
                    assert_eq!(short_out, direct, "{what}: one int short of the rows");
                }
            }
        }
    }
}

/// `n` routed expert ids: uniform over `[-1, e + 2)` (some outside the expert range), or
/// with `hot` seven in ten of them expert 1.
fn routed_ids(rng: &mut Rng, n: usize, e: usize, hot: bool) -> Vec<i32> {
    (0..n)
        .map(|_| match rng.next_u32() % 10 {
            0..=6 if hot => 1,
            _ => (rng.next_u32() % (e as u32 + 3)) as i32 - 1,
        })
        .collect()
}

/// Alignment arguments for sizes only (the launch configuration reads no pointer).
fn aligner_args(t: usize, k: usize, (offset, local, bm): (usize, usize, usize)) -> MoeAlignArgs {
    MoeAlignArgs {
        topk_ids: 0,
        counts: 0,
        offsets: 0,
        sorted_ids: 0,
        block_expert: 0,
        total_rows: 0,
        tokens: t as i32,
        topk: k as i32,
        expert_offset: offset as i32,
        local_experts: local as i32,
        block_m: bm as i32,
        walk_counters: 0,
    }
}

/// The multi-CTA alignment's two kernels (`align_multi`: count, then place, on the same
/// `C` CTAs, a poisoned table between them): the single block's outputs bit for bit, the
/// reference's, the walk counters zeroed, and a second run (the table as the first left
/// it) the same. Random and hot ids as above, E = 64 top-6 and E = 8 top-2, T from 1 (one
/// CTA) to 4096 (12 CTAs) and T = 2731 (uneven slices; T = 1000 first: the sanitizer runs), the full range at tiles of 16 and
/// 128 and an expert-parallel slice.
#[test]
fn multi_cta_alignment_matches_the_single_block() {
    let ga = align::generate();
    let Some((gpu, ca)) = compile_and_gpu(&ga.source, &format!("{}.cu", ga.name), Arch::Sm80) else {
        return;
    };
    let dev = gpu.arch().expect("a supported GPU architecture");
    let gm = align_multi::generate();
    let unit = |(name, src): &(String, String)| load(&gpu, &common::compile(src, &format!("{name}.cu"), dev), name);
    let (fc, fp) = (unit(&gm.count), unit(&gm.place));
    let stream = gpu.stream();
    let fa = load(&gpu, &ca, &ga.name);
    let aligner = Align { g: &ga, f: &fa, stream };
    let mut rng = Rng::for_test("gpu_moe_multi_align");
    for (e, k) in [(64usize, 6usize), (8, 2)] {
        for &t in cases(&[1000usize, 4096, 2731, 1, 3]) {
            for hot in [false, true] {
                let ids = routed_ids(&mut rng, t * k, e, hot);
                let d_ids = stream.clone_htod(&ids).unwrap();
                for (offset, local, bm) in [(0, e, 16), (0, e, 128), (2, 3, 128)] {
                    let what = format!("E={e} k={k} T={t} hot={hot} multi-CTA [{offset}, +{local}) block_m={bm}");
                    let want = align_reference(&ids, t, k, offset, local, bm).unwrap();
                    let table_len = align_multi::table_bytes(t * k, local);
                    let mut table = stream.clone_htod(&vec![POISON; table_len / 4]).unwrap();
                    let (first, cap) =
                        run_multi(&gm, (&fc, &fp), stream, &d_ids, &mut table, (t, k), (offset, local, bm));
                    check_alignment(&first, &want, cap, (t * k) as i32, &what);
                    let (single, _) = aligner.run(&d_ids, t, k, offset, local, bm);
                    assert_eq!(first, single, "{what}: multi-CTA and single block differ");
                    let (again, _) =
                        run_multi(&gm, (&fc, &fp), stream, &d_ids, &mut table, (t, k), (offset, local, bm));
                    assert_eq!(again, first, "{what}: a second run differs");
                }
            }
        }
    }
}

/// One multi-CTA alignment of `d_ids` into poisoned outputs with `table`; asserts that
/// the walk counters are zeroed.
fn run_multi(
    gm: &align_multi::GeneratedMoeAlignMulti,
    (fc, fp): (&Function, &Function),
    s: &Arc<CudaStream>,
    d_ids: &CudaSlice<i32>,
    table: &mut CudaSlice<i32>,
    (t, k): (usize, usize),
    olb: (usize, usize, usize),
) -> (AlignOut, AlignCapacity) {
    let cap = align::align_capacity(t, k, olb.1, olb.2).unwrap();
    let mut b = AlignBuffers::poisoned(s, olb.1, cap);
    let mut walk = s.clone_htod(&[POISON as u32; 2]).unwrap();
    let len = table.len() * 4;
    {
        let (pi, _g0) = d_ids.device_ptr(s);
        let (pc, _g1) = b.counts.device_ptr_mut(s);
        let (po, _g2) = b.offsets.device_ptr_mut(s);
        let (ps, _g3) = b.sorted_ids.device_ptr_mut(s);
        let (pb, _g4) = b.block_expert.device_ptr_mut(s);
        let (pt, _g5) = b.total.device_ptr_mut(s);
        let (ptab, _g6) = table.device_ptr_mut(s);
        let (pw, _g7) = walk.device_ptr_mut(s);
        let a = MoeAlignArgs {
            topk_ids: pi,
            counts: pc,
            offsets: po,
            sorted_ids: ps,
            block_expert: pb,
            total_rows: pt,
            walk_counters: pw,
            ..aligner_args(t, k, olb)
        };
        let cfg = gm.launch_config(&a).with_checked(true);
        let (count, place) = (
            gm.count_args(&a, ptab, len).unwrap(),
            gm.place_args(&a, ptab, len).unwrap(),
        );
        // SAFETY: topk_ids holds [T, k] ints, the table `table_bytes` of them, the outputs
        // the lengths `align_capacity` gives, the walk counters 2 (as `run_with`).
        unsafe {
            launch_chained(fc, cfg, count).unwrap();
            launch_chained(fp, cfg, place).unwrap();
        }
    }
    assert_eq!(s.clone_dtoh(&walk).unwrap(), vec![0u32, 0], "walk counters");
    (b.read(s), cap)
}
