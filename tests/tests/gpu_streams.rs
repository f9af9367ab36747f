//! GPU tests of caller streams (`rcute_ops::stream`), with `cudarc`'s event tracking on
//! (the tests' context has several streams): dependent work on two streams, ordered by an
//! explicit event or by the buffers' guards alone; an `Ops` opened on the application's
//! stream; `Ops::gemm` captured in a CUDA graph on the caller's stream and replayed with
//! new inputs (the automatic kernel, and forced SM80 parallel and serial split-K, whose
//! scratch must exist before the capture).
//!
//! Outputs are poisoned (NaN) first; 256 sampled elements per run are compared with a
//! float64 CPU reference (relative error < 1e-2) and no element may be NaN.
//!
//! On a machine without a GPU it prints why it skips, and fails under RCUTE_REQUIRE_GPU=1.

mod common;

use common::Rng;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use rcute_kernel::gemm_sm80::SplitKMode;
use rcute_kernel::testing::gpu_for_test;
use rcute_ops::select::{select, Choice, Selection};
use rcute_ops::{validate, Gpu, MatrixMut, MatrixRef, Ops, OpsError};
use std::sync::Arc;

fn random(rng: &mut Rng, len: usize) -> Vec<bf16> {
    (0..len)
        .map(|_| bf16::from_f32((rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0))
        .collect()
}

/// Check `d` (row-major M x N) against `A (row-major M x K) @ B (column-major K x N)` on
/// 256 sampled elements; no element may be NaN (every one written).
fn check(rng: &mut Rng, what: &str, a: &[bf16], b: &[bf16], d: &[bf16], (m, n, k): (usize, usize, usize)) {
    assert!(d.iter().all(|x| !x.is_nan()), "{what}: NaN (unwritten) outputs");
    let (mut err, mut norm) = (0f64, 0f64);
    for _ in 0..256 {
        let (i, j) = (rng.range(0, m as i64 - 1) as usize, rng.range(0, n as i64 - 1) as usize);
        let r: f64 = (0..k).map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64()).sum();
        err += (d[i * n + j].to_f64() - r).powi(2);
        norm += r * r;
    }
    let rel = (err / norm.max(1e-30)).sqrt();
    assert!(rel < 1e-2, "{what}: relative error {rel}");
}

fn open() -> Option<(Gpu, Ops)> {
    let gpu = gpu_for_test()?;
    let ops = Ops::new(gpu.clone());
    assert!(
        gpu.context().is_managing_stream_synchronization(),
        "the test context must have cudarc's event tracking on"
    );
    Some((gpu, ops))
}

/// Keep `s` busy for a few milliseconds (memsets of 1 GiB), so that work queued behind it
/// on `s` is still pending when another stream would race it.
fn keep_busy(s: &Arc<CudaStream>) -> CudaSlice<u8> {
    let mut big = s.alloc_zeros::<u8>(1 << 30).unwrap();
    for _ in 0..8 {
        s.memset_zeros(&mut big).unwrap();
    }
    big
}

/// `host` on the device, written by a device-side copy on `s` (queued, not done, when this
/// returns if `s` is busy).
fn upload_queued<T: cudarc::driver::DeviceRepr>(s: &Arc<CudaStream>, staging: &CudaSlice<T>) -> CudaSlice<T> {
    // SAFETY: the copy below writes every element before anything reads them.
    let mut dst = unsafe { s.alloc::<T>(staging.len()) }.unwrap();
    s.memcpy_dtod(staging, &mut dst).unwrap();
    dst
}

#[test]
fn two_streams_with_dependent_work() {
    let Some((gpu, ops)) = open() else { return };
    let mut rng = Rng::for_test("two_streams_with_dependent_work");
    let (m, n, k) = (1024, 1024, 2048);
    let ctx = gpu.context();
    let (sa, sb) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    for explicit_events in [true, false] {
        let (ha, hb) = (random(&mut rng, m * k), random(&mut rng, k * n));
        let staged = (
            sa.clone_htod(&ha).unwrap(),
            sa.clone_htod(&hb).unwrap(),
            sa.clone_htod(&vec![bf16::NAN; m * n]).unwrap(),
        );
        // Stream A: the application's producer: busy, then the inputs and a poisoned
        // output written by queued device copies.
        let _busy = keep_busy(&sa);
        let a = upload_queued(&sa, &staged.0);
        let b = upload_queued(&sa, &staged.1);
        let mut d = upload_queued(&sa, &staged.2);
        if explicit_events {
            sb.wait(&sa.record_event(None).unwrap()).unwrap();
        }
        // Stream B: the op. Without explicit events, the buffers' guards order it.
        let on_b = ops.on_stream(&sb).unwrap();
        assert!(Arc::ptr_eq(on_b.stream(), &sb));
        on_b.gemm(
            &MatrixRef::new(&a, m, k),
            &MatrixRef::new(&b, k, n).col_major(),
            None,
            &mut MatrixMut::new(&mut d, m, n),
            1.0,
            0.0,
        )
        .unwrap();
        if explicit_events {
            sa.wait(&sb.record_event(None).unwrap()).unwrap();
        }
        // Stream A reads the result back, with no device-wide synchronization.
        let hd = sa.clone_dtoh(&d).unwrap();
        check(
            &mut rng,
            &format!("explicit events {explicit_events}"),
            &ha,
            &hb,
            &hd,
            (m, n, k),
        );
    }
    ctx.check_err().unwrap();
}

#[test]
fn ops_opened_on_the_application_stream() {
    let Some((gpu, _)) = open() else { return };
    let mut rng = Rng::for_test("ops_opened_on_the_application_stream");
    let app = gpu.context().new_stream().unwrap();
    let ops = Ops::new(Gpu::from_stream(app.clone()).unwrap());
    assert!(Arc::ptr_eq(ops.stream(), &app));
    let (m, n, k) = (200, 136, 72);
    let (ha, hb) = (random(&mut rng, m * k), random(&mut rng, k * n));
    let a = app.clone_htod(&ha).unwrap();
    let b = app.clone_htod(&hb).unwrap();
    let mut d = app.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
    let (av, bv) = (MatrixRef::new(&a, m, k), MatrixRef::new(&b, k, n).col_major());
    ops.gemm(&av, &bv, None, &mut MatrixMut::new(&mut d, m, n), 1.0, 0.0)
        .unwrap();
    check(
        &mut rng,
        "Gpu::from_stream",
        &ha,
        &hb,
        &app.clone_dtoh(&d).unwrap(),
        (m, n, k),
    );
    // A stream of another context is a typed error.
    if let Ok(other) = cudarc::driver::CudaContext::new(0) {
        if other.cu_ctx() != gpu.context().cu_ctx() {
            let s = other.new_stream().unwrap();
            assert!(matches!(ops.on_stream(&s), Err(OpsError::Stream(_))));
        }
    }
}

/// How the captured GEMM picks its kernel.
#[derive(Clone, Copy, Debug)]
enum Kernel {
    Auto,
    Sm80SplitK(SplitKMode),
}

fn gemm(
    ops: &Ops,
    kernel: Kernel,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    d: &mut CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), OpsError> {
    let (av, bv) = (MatrixRef::new(a, m, k), MatrixRef::new(b, k, n).col_major());
    let mut dv = MatrixMut::new(d, m, n);
    match kernel {
        Kernel::Auto => ops.gemm(&av, &bv, None, &mut dv, 1.0, 0.0),
        Kernel::Sm80SplitK(mode) => {
            let p = validate(&av, &bv, None, &dv, 1.0, 0.0)?;
            let major = rcute_kernel::gemm_sm80::Major::K;
            let mut s: Selection = select(m, n, k, 1, major, major, ops.gpu().sm_count());
            (s.split_k, s.split_k_mode) = (4, mode);
            ops.run_gemm_with(&p, Some(&Choice::Sm80(s)))
        }
    }
}

#[test]
fn gemm_captured_in_a_graph_replays_with_new_inputs() {
    let Some((gpu, ops)) = open() else { return };
    let mut rng = Rng::for_test("gemm_captured_in_a_graph_replays_with_new_inputs");
    let (m, n, k) = (256, 384, 1024);
    for kernel in [
        Kernel::Auto,
        Kernel::Sm80SplitK(SplitKMode::Parallel),
        Kernel::Sm80SplitK(SplitKMode::Serial),
    ] {
        // A fresh stream of the application: no scratch of rcute's on it yet.
        let s = gpu.context().new_stream().unwrap();
        let ops = ops.on_stream(&s).unwrap();
        let a = s.clone_htod(&random(&mut rng, m * k)).unwrap();
        let b = s.clone_htod(&random(&mut rng, k * n)).unwrap();
        let mut d = s.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
        // Thread-local capture: the other tests of this binary may run on other threads, and
        // a global capture would fail on their allocations (and they on it).
        let capture = |d: &mut CudaSlice<bf16>| {
            s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .unwrap();
            let r = gemm(&ops, kernel, &a, &b, d, (m, n, k));
            let graph = s.end_capture(CUgraphInstantiate_flags(0));
            (r, graph)
        };
        if let Kernel::Sm80SplitK(_) = kernel {
            // Split-K scratch cannot be allocated inside a capture: a typed error, and
            // the capture itself stays valid.
            let (r, graph) = capture(&mut d);
            assert!(matches!(r, Err(OpsError::Capture(_))), "{kernel:?}: {r:?}");
            graph.unwrap();
        }
        // Warm-up on the stream (compiles and loads the kernel, allocates scratch).
        gemm(&ops, kernel, &a, &b, &mut d, (m, n, k)).unwrap();
        s.synchronize().unwrap();
        let (r, graph) = capture(&mut d);
        r.unwrap();
        let graph = graph.unwrap().expect("a captured graph");
        // Replays with new data in the same buffers, written with cudarc's tracked copies.
        let (mut a, mut b) = (a, b);
        for replay in 0..3 {
            let (ha, hb) = (random(&mut rng, m * k), random(&mut rng, k * n));
            s.memcpy_htod(&ha, &mut a).unwrap();
            s.memcpy_htod(&hb, &mut b).unwrap();
            s.memcpy_htod(&vec![bf16::NAN; m * n], &mut d).unwrap();
            graph.launch().unwrap();
            let hd = s.clone_dtoh(&d).unwrap();
            check(
                &mut rng,
                &format!("{kernel:?} replay {replay}"),
                &ha,
                &hb,
                &hd,
                (m, n, k),
            );
        }
        gpu.context().check_err().unwrap();
    }
}
