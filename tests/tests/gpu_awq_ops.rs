//! The AWQ ops through `Ops` on the GPU:
//!
//! * `awq_gemm` against a float64 reference of the format on random packed weights (zeros
//!   0 and 15 included, scales log-uniform in [1e-4, 1]): ragged M (1, 3, 17, 255, 257,
//!   1000), N not a multiple of the tile (and N/8 not a multiple of 4: 4-byte weight
//!   copies), K of several groups plus a tail of the 64-wide K tile, bias on and off, G in
//!   32, 64, 128 and G = K, f16 and bf16; the op's own path, the fused kernel's own
//!   configuration, the dense path (K-major dequantization + SM90 GEMM, on sm_90), and
//!   every fused configuration forced with one and with several K splits. Each output element must be within `tol * (sum_k |x w| +
//!   |bias|)` of the reference (the weight and the output each rounded once to the 16-bit
//!   type); the output is poisoned first, so an unwritten element fails;
//! * the prepared path (`AwqWeight::prepare`, `awq_gemm_prepared`) on the same kind of
//!   checks, with its own bad inputs;
//! * the unprepared op's reordered path (`qweight` reordered per call into stream scratch,
//!   then the SM90 mixed-input kernel): every tile of `select_awq_wgmma` against the
//!   reference and bit-identical to the prepared op's result with the same tile, and the
//!   op's own choice of it;
//! * the register-streamed kernels, on the prepared weight and on the checkpoint's words
//!   (the unprepared op's decode kernel), every configuration with several K splits;
//! * the SM90 wgmma kernel on the checkpoint's words (TMA boxes of `qweight` as it is):
//!   every configuration with 1 to 8 K splits, bit-identical to the prepared kernel of the
//!   same tile, and the unprepared op's rule for it;
//! * split-K is deterministic: repeated runs give identical bits;
//! * `awq_dequantize` and `awq_dequantize_kmajor` through `Ops` bit-exact against the
//!   formula (the latter transposed);
//! * bad inputs (M = 0, shapes, G, dtypes, misalignment) are typed errors and write nothing.
//!
//! Skips with a printed reason without a GPU (fails under `RCUTE_REQUIRE_GPU=1`).

mod common;

use common::Rng;
use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_kernel::testing::{awq_wgmma_checkpoint_configs, awq_wgmma_split_k_configs, gpu_for_test};
use rcute_ops::awq::select_split::select_awq_wgmma_prepared;
use rcute_ops::awq::{
    dequantize_reference, gemm_reference, pack_awq_matrix, validate_awq_gemm, AwqShape, AwqTensors, AwqWeight,
};
use rcute_ops::{bf16, f16, CudaSlice, MatrixMut, MatrixRef, Ops, OpsError, VectorRef};

/// 16-bit host values of either type.
trait Half:
    Copy + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + rcute_ops::Element + PartialEq + std::fmt::Debug
{
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    /// Relative error bound of one product term and of the output rounding together.
    const TOL: f64;
}
impl Half for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    const TOL: f64 = 1.0 / 512.0;
}
impl Half for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    const TOL: f64 = 1.0 / 64.0;
}

/// One random problem on the host and the device.
struct Case<T: Half> {
    m: usize,
    shape: AwqShape,
    w: Vec<f64>,
    /// The reference output and `sum_k |x w| + |bias|` per element.
    want: Vec<f64>,
    mag: Vec<f64>,
    d_x: CudaSlice<T>,
    d_q: CudaSlice<i32>,
    d_s: CudaSlice<T>,
    d_z: CudaSlice<i32>,
    d_b: Option<CudaSlice<T>>,
}

impl<T: Half> Case<T> {
    fn new(ops: &Ops, rng: &mut Rng, m: usize, n: usize, k: usize, group: usize, bias: bool) -> Case<T> {
        Case::with_zero_group(ops, rng, m, n, k, group, bias, None)
    }

    /// [`Case::new`] with every scale of group `zero` (a row of `scales`) zero.
    #[allow(clippy::too_many_arguments)]
    fn with_zero_group(
        ops: &Ops,
        rng: &mut Rng,
        m: usize,
        n: usize,
        k: usize,
        group: usize,
        bias: bool,
        zero: Option<usize>,
    ) -> Case<T> {
        let s = ops.gpu().stream();
        let shape = AwqShape::new(k, n, group).unwrap();
        let gn = shape.groups() * n;
        let q: Vec<u8> = (0..k * n).map(|_| (rng.next_u32() % 16) as u8).collect();
        let z: Vec<u8> = (0..gn)
            .map(|i| match i % 7 {
                0 => 0,
                1 => 15,
                _ => (rng.next_u32() % 16) as u8,
            })
            .collect();
        let unit = |rng: &mut Rng| f64::from(rng.next_u32()) / f64::from(u32::MAX);
        let mut sc: Vec<T> = (0..gn).map(|_| T::from_f64(10f64.powf(-4.0 * unit(rng)))).collect();
        if let Some(g) = zero {
            sc[g * n..(g + 1) * n].iter_mut().for_each(|v| *v = T::from_f64(0.0));
        }
        let x: Vec<T> = (0..m * k).map(|_| T::from_f64(2.0 * unit(rng) - 1.0)).collect();
        let b: Option<Vec<T>> = bias.then(|| (0..n).map(|_| T::from_f64(2.0 * unit(rng) - 1.0)).collect());
        let qw = pack_awq_matrix(&q, k, n).unwrap();
        let qz = pack_awq_matrix(&z, shape.groups(), n).unwrap();
        let s64: Vec<f64> = sc.iter().map(|v| v.to_f64()).collect();
        let w = dequantize_reference(shape, &qw, &qz, &s64).unwrap();
        let x64: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
        let b64: Option<Vec<f64>> = b.as_ref().map(|b| b.iter().map(|v| v.to_f64()).collect());
        let want = gemm_reference(&x64, m, &w, shape, b64.as_deref());
        let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<f64>>();
        let abs_b = b64.as_deref().map(abs);
        let mag = gemm_reference(&abs(&x64), m, &abs(&w), shape, abs_b.as_deref());
        Case {
            m,
            shape,
            d_x: s.clone_htod(&x).unwrap(),
            d_q: s.clone_htod(&qw).unwrap(),
            d_s: s.clone_htod(&sc).unwrap(),
            d_z: s.clone_htod(&qz).unwrap(),
            d_b: b.as_ref().map(|b| s.clone_htod(b).unwrap()),
            w,
            want,
            mag,
        }
    }

    fn tensors(&self) -> AwqTensors<'_> {
        let (k, n, g) = (self.shape.k, self.shape.n, self.shape.groups());
        AwqTensors {
            qweight: MatrixRef::new(&self.d_q, k, n / 8),
            scales: MatrixRef::new(&self.d_s, g, n),
            qzeros: MatrixRef::new(&self.d_z, g, n / 8),
            group: self.shape.group,
        }
    }

    /// Runs `awq_gemm` (`run`: the op, the fused kernel, or the dense path), checks every
    /// element and returns the output.
    fn check(&self, ops: &Ops, run: Run<'_>, what: &str) -> Vec<T> {
        let s = ops.gpu().stream();
        let (m, n, k) = (self.m, self.shape.n, self.shape.k);
        let mut out: CudaSlice<T> = s.clone_htod(&vec![T::from_f64(f64::NAN); m * n]).unwrap();
        {
            let x = MatrixRef::new(&self.d_x, m, k);
            let b = self.d_b.as_ref().map(|b| VectorRef::new(b, n));
            let w = self.tensors();
            let mut o = MatrixMut::new(&mut out, m, n);
            let p = validate_awq_gemm(&x, &w, b.as_ref(), &o).unwrap();
            match run {
                Run::Op => ops.awq_gemm(&x, &w, b.as_ref(), &mut o),
                Run::Fused(forced) => ops.run_awq_gemm(&p, forced),
                Run::Dense => ops.run_awq_gemm_dense(&p),
                Run::DenseTile(cfg) => ops.run_awq_gemm_dense_with(&p, Some((cfg.clone(), 1))),
                Run::PreparedOp(pw) => ops.awq_gemm_prepared(&x, pw, b.as_ref(), &mut o),
                Run::Prepared(pw, f) => ops.run_awq_gemm_prepared(&x, pw, b.as_ref(), &mut o, f),
                Run::Reordered(f) => ops.run_awq_gemm_reordered(&p, f),
            }
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        ops.gpu().synchronize().unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        let (want, mag) = (&self.want, &self.mag);
        let mut bad = Vec::new();
        for i in 0..m * n {
            let g = got[i].to_f64();
            let tol = T::TOL * mag[i] + 1e-6;
            if !(g - want[i]).abs().le(&tol) {
                bad.push(format!("({}, {}): got {g}, want {} (tol {tol})", i / n, i % n, want[i]));
            }
        }
        assert!(
            bad.is_empty(),
            "{what}: {} bad, first {:#?}",
            bad.len(),
            &bad[..bad.len().min(8)]
        );
        got
    }
}

/// How a check runs the problem.
#[derive(Clone, Copy)]
enum Run<'w> {
    /// `Ops::awq_gemm` (its own path and configuration).
    Op,
    /// The fused int4 kernel: forced configuration and splits, or the shape's choice.
    Fused(Option<(AwqGemmConfig, u32)>),
    /// The dense path (K-major dequantization + the SM90 GEMM).
    Dense,
    /// The dense path with its SM90 GEMM forced to a configuration (one split).
    DenseTile(&'w GemmSm90Config),
    /// `Ops::awq_gemm_prepared` on a prepared weight.
    PreparedOp(&'w AwqWeight<'w>),
    /// The prepared kernel: forced configuration and splits, or the shape's choice.
    Prepared(&'w AwqWeight<'w>, Option<(AwqGemmConfig, u32)>),
    /// The unprepared op's reordered path (`qweight` reordered into stream scratch + the
    /// SM90 mixed-input kernel): forced configuration, or `select_awq_wgmma`'s tile.
    Reordered(Option<(AwqGemmConfig, u32)>),
}

fn configs(e: rcute_atom::Element, n: usize) -> Vec<AwqGemmConfig> {
    let vw = if (n / 8).is_multiple_of(4) { 4 } else { 1 };
    vec![
        AwqGemmConfig::new(e, [16, 256, 64], [1, 4], 4, vw),
        // 3 stages: what M = 16 on a wide weight runs
        AwqGemmConfig::new(e, [16, 256, 64], [1, 4], 3, vw),
        AwqGemmConfig::new(e, [32, 256, 64], [1, 4], 4, vw),
        // 3 stages: what the prepared path runs for M = 17 ..= 32 on a wide weight
        AwqGemmConfig::new(e, [32, 256, 64], [1, 4], 3, vw),
        AwqGemmConfig::new(e, [64, 256, 64], [1, 4], 3, vw),
        AwqGemmConfig::new(e, [64, 128, 64], [2, 2], 4, vw),
        AwqGemmConfig::new(e, [128, 256, 64], [2, 4], 3, vw),
    ]
}

fn gemm_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_gemm_{e}"));
    // (M, N, K, G, bias): N = 264 / 1000 (N/8 odd: 4-byte copies), K = 96 / 320 / 192 end
    // inside a 64-wide K tile, G = K for K = 256 and 128.
    let shapes = [
        (1, 4096, 512, 128, true),
        (3, 264, 96, 32, false),
        (17, 520, 320, 64, true),
        (255, 1000, 192, 64, false),
        (257, 512, 256, 256, true),
        (1000, 384, 128, 128, false),
        (16, 768, 4096, 128, true),
        // K = 352: five full 64-wide k-tiles, then a half one that a split reaches only
        // after advancing its running sources (3 splits: tiles 4 and 5)
        (5, 768, 352, 32, true),
    ];
    for (m, n, k, g, bias) in shapes {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        case.check(ops, Run::Op, &format!("{e} {m}x{n}x{k} G={g} bias={bias} (op)"));
        case.check(
            ops,
            Run::Fused(None),
            &format!("{e} {m}x{n}x{k} G={g} bias={bias} (fused)"),
        );
        if ops.gpu().compute_capability() == (9, 0) {
            case.check(ops, Run::Dense, &format!("{e} {m}x{n}x{k} G={g} bias={bias} (dense)"));
        }
        for cfg in configs(e, n) {
            for splits in [1, 3] {
                let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} {:?} split {splits}", cfg.tile);
                case.check(ops, Run::Fused(Some((cfg, splits))), &what);
            }
        }
        eprintln!("ok {e} {m}x{n}x{k} G={g} bias={bias}");
    }
}

/// The dense path's GEMM tiles: the H200 table's 256x160 cooperative tile on 1x2 clusters
/// (what `Ops::awq_dense_gemm` takes at 4096 x 14336 x 4096), the rules' 128x256 one, the
/// table's 64x64 warp-specialized tile of 128 x 4096 x 4096 (the unprepared op's dense path
/// there) and the path's own choice, with and without the bias epilogue, on ragged shapes (N = 1000: 7
/// column tiles of 160, the last cluster half outside; M = 300 / 520: a partial row tile;
/// the first `RCUTE_CASES` shapes only).
fn dense_tile_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_dense_tiles_{e}"));
    let tiles: Vec<GemmSm90Config> = [
        "sm90:256x160x64,coop,c1x2",
        "sm90:128x256x64,coop",
        "sm90:64x64x64,ws,s14",
    ]
    .iter()
    .map(
        |s| match s.parse::<rcute_ops::tuning::ConfigSpec>().unwrap().gemm_choice() {
            Some(rcute_ops::select::Choice::Sm90(cfg, _)) => cfg,
            _ => panic!("{s} is an SM90 configuration"),
        },
    )
    .collect();
    let shapes = [
        (300, 1000, 192, 64, true),
        (520, 14336, 128, 128, true),
        (257, 2048, 256, 128, false),
    ];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        case.check(ops, Run::Dense, &format!("{e} {m}x{n}x{k} G={g} bias={bias} (dense)"));
        for cfg in &tiles {
            let what = format!(
                "{e} {m}x{n}x{k} G={g} bias={bias} dense {:?} cluster {:?}",
                cfg.tile, cfg.cluster
            );
            case.check(ops, Run::DenseTile(cfg), &what);
        }
        eprintln!("ok dense tiles {e} {m}x{n}x{k} G={g} bias={bias}");
    }
}

#[test]
fn awq_gemm_dense_tiles_match_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        eprintln!("skipping: the dense path needs sm_90");
        return;
    }
    dense_tile_cases::<f16>(&ops, rcute_atom::Element::F16);
    dense_tile_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

#[test]
fn awq_gemm_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    gemm_cases::<f16>(&ops, rcute_atom::Element::F16);
    gemm_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

fn prepared_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_prepared_{e}"));
    // N a multiple of 64 (the layout's blocks; 576 and 320 end inside a 128/256 tile), K of
    // 16s (96 and 320 end inside a 64-wide K tile), G = K for 256.
    let shapes = [
        (1, 4096, 512, 128, true),
        (3, 320, 96, 32, false),
        (17, 576, 320, 64, true),
        (255, 1024, 192, 64, false),
        (300, 512, 256, 256, true),
        (16, 768, 4096, 128, true),
        // a half k-tile after five full ones (see gemm_cases)
        (5, 768, 352, 32, true),
        // a wide weight at 16 < M <= 32: the bulk-producer kernel's shapes on sm_90
        (24, 14336, 256, 128, true),
    ];
    for (m, n, k, g, bias) in shapes {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} prepared");
        case.check(ops, Run::PreparedOp(&w), &format!("{what} (op)"));
        case.check(ops, Run::Prepared(&w, None), &format!("{what} (fused)"));
        for cfg in configs(e, n) {
            for splits in [1, 3] {
                let forced = Some((cfg, splits));
                case.check(
                    ops,
                    Run::Prepared(&w, forced),
                    &format!("{what} {:?} split {splits}", cfg.tile),
                );
            }
        }
        eprintln!("ok {what}");
    }
}

/// The prepared kernels with the SM90 bulk producer (a producer warp, an mbarrier ring).
fn bulk_configs(e: rcute_atom::Element) -> Vec<AwqGemmConfig> {
    vec![
        AwqGemmConfig::new(e, [16, 256, 64], [1, 4], 8, 4).bulk(),
        // 3 stages: the ring wraps (and flips its phase) every third k-tile
        AwqGemmConfig::new(e, [16, 256, 64], [1, 4], 3, 4).bulk(),
        AwqGemmConfig::new(e, [32, 256, 64], [1, 4], 6, 4).bulk(),
        // what the prepared path runs on sm_90 for 16 < M <= 32 on a wide weight
        AwqGemmConfig::new(e, [32, 256, 64], [1, 4], 4, 4).bulk(),
        AwqGemmConfig::new(e, [16, 512, 64], [1, 8], 9, 4).bulk(),
        AwqGemmConfig::new(e, [64, 128, 64], [2, 2], 5, 4).bulk(),
    ]
}

/// The bulk-producer kernels forced with 1, 3 and 7 K splits on the prepared shapes of
/// [`prepared_cases`] (M past the tile, N and K ending inside a tile, G = 32 with its second
/// group slot, G = K), against the float64 reference.
fn bulk_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_bulk_{e}"));
    let shapes = [
        (1, 4096, 512, 128, true),
        (3, 320, 96, 32, false),
        (17, 576, 320, 64, true),
        (70, 1024, 192, 64, false),
        (33, 512, 256, 256, true),
        (16, 768, 4096, 128, true),
        (5, 768, 352, 32, true),
    ];
    for (m, n, k, g, bias) in shapes {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} bulk");
        for cfg in bulk_configs(e) {
            for splits in [1, 3, 7] {
                let forced = Some((cfg, splits));
                let name = format!("{what} {:?} s{} split {splits}", cfg.tile, cfg.stages);
                case.check(ops, Run::Prepared(&w, forced), &name);
            }
        }
        eprintln!("ok {what}");
    }
}

/// The SM90 bulk-producer kernels on the prepared weight against the float64 reference
/// (f16 and bf16); on another architecture forcing one is an [`OpsError::Arch`] that writes
/// nothing.
#[test]
fn awq_gemm_prepared_bulk_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        let mut rng = Rng::for_test("awq_bulk_arch");
        let case = Case::<f16>::new(&ops, &mut rng, 2, 256, 128, 128, false);
        let w = AwqWeight::prepare(&ops, &case.tensors()).unwrap();
        let s = ops.gpu().stream();
        let x: CudaSlice<f16> = s.clone_htod(&vec![f16::ONE; 2 * 128]).unwrap();
        let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); 2 * 256]).unwrap();
        let forced = Some((bulk_configs(rcute_atom::Element::F16)[0], 1));
        let r = ops.run_awq_gemm_prepared(
            &MatrixRef::new(&x, 2, 128),
            &w,
            None,
            &mut MatrixMut::new(&mut out, 2, 256),
            forced,
        );
        assert!(matches!(r, Err(OpsError::Arch(_))), "bulk kernel off sm_90: {r:?}");
        ops.gpu().synchronize().unwrap();
        assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
        eprintln!("skipped the bulk kernels' numerics: they need sm_90");
        return;
    }
    bulk_cases::<f16>(&ops, rcute_atom::Element::F16);
    bulk_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The SM90 mixed-input prepared kernels (swap-AB RS wgmma, x by TMA): two consumer
/// warpgroups along N, two splitting a lane's words, one, three (word by word), 32 to 192
/// tokens per CTA, rings of 2 to 8 stages (2: the ring wraps every other k-tile; 8:
/// 208,000 bytes of shared memory).
fn wgmma_configs(e: rcute_atom::Element) -> Vec<AwqGemmConfig> {
    vec![
        AwqGemmConfig::new(e, [64, 512, 64], [1, 2], 4, 4).wgmma(),
        AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 4, 4).wgmma(),
        AwqGemmConfig::new(e, [64, 256, 64], [1, 1], 6, 4).wgmma(),
        AwqGemmConfig::new(e, [32, 512, 64], [1, 2], 2, 4).wgmma(),
        AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 8, 4).wgmma(),
        AwqGemmConfig::new(e, [32, 768, 64], [1, 3], 4, 4).wgmma(),
        // the prepared op's one-split tile at 17 ..= 32 rows of a weight too wide for 2 splits
        AwqGemmConfig::new(e, [32, 256, 64], [2, 1], 6, 4).wgmma(),
        // wider token tiles: 152 (not a multiple of 16, a ring of 7) and 160 tokens batched,
        // 184 (not a multiple of 16) and 192 word by word
        AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma(),
        AwqGemmConfig::new(e, [160, 256, 64], [2, 1], 6, 4).wgmma(),
        AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma(),
        AwqGemmConfig::new(e, [192, 256, 64], [2, 1], 6, 4).wgmma(),
        // the tile walk in groups of 4 and 3 token tiles: the last group partial where the
        // token tiles are not a multiple (1000 rows: 6 tiles of 184, 8 of 128; 4095: 23 and
        // 32), one group where they are fewer (17 .. 257 rows)
        AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma().raster(4),
        AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 6, 4).wgmma().raster(3),
        // the persistent walk: launch order, and in groups of 3 token tiles
        AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma().persistent(),
        AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma().persistent(),
        AwqGemmConfig::new(e, [128, 256, 64], [2, 1], 6, 4)
            .wgmma()
            .raster(3)
            .persistent(),
        // the steps in chained pairs (K ending inside a pair: 96 and 352 are 6 and 22 k16
        // steps, so the k-tile's second pair is past K), 184 persistent
        AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4).wgmma().chained(),
        AwqGemmConfig::new(e, [152, 256, 64], [2, 1], 7, 4).wgmma().chained(),
        AwqGemmConfig::new(e, [184, 256, 64], [2, 1], 6, 4)
            .wgmma()
            .persistent()
            .chained(),
    ]
}

/// The persistent wgmma kernels where CTAs take several tiles (one CTA per SM, at most 132
/// here: more tiles than that): 200 x 17152 (2 x 67 = 134 tiles: two CTAs take a second
/// tile, the ring running on from a 1-k-tile tile), 1100 x 6144 x 96 (144 to 216 tiles,
/// two k-tiles a tile, the last one partial), against the float64 reference.
fn wgmma_persistent_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_wgmma_persistent_{e}"));
    let shapes = [(200, 17152, 64, 32, true), (1100, 6144, 96, 32, false)];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} wgmma persistent");
        for cfg in wgmma_configs(e).into_iter().filter(|c| c.persistent) {
            let name = format!("{what} {:?} {:?} s{} r{}", cfg.tile, cfg.warps, cfg.stages, cfg.raster);
            case.check(ops, Run::Prepared(&w, Some((cfg, 1))), &name);
        }
        eprintln!("ok {what}");
    }
}

/// The wgmma kernels on ragged M (1, 3, 17, 255, 257, 1000, 4095: partial token tiles, TMA
/// zero fill; 4095 = 22 x 184 + 47 and 21 x 192 + 63), N ending inside the CTA's columns (5, 9, 10, 12 64-column blocks), K ending
/// inside a k-tile (352, 96; 48 = 3 k16 steps with G = K: a chained pair's second step past
/// K), G = 32, 64, 128 and K, bias on and off, against the float64
/// reference (one split: without `split_k` the kernel takes no more).
fn wgmma_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_wgmma_{e}"));
    let shapes = [
        (17, 576, 352, 32, true),
        (255, 768, 320, 64, false),
        (257, 640, 192, 64, true),
        (1000, 320, 128, 128, true),
        (3, 512, 256, 256, false),
        (1, 256, 96, 32, true),
        (130, 640, 4096, 128, true),
        (4095, 512, 128, 64, true),
        (5, 512, 48, 48, true),
    ];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} wgmma");
        for cfg in wgmma_configs(e) {
            let name = format!("{what} {:?} {:?} s{}", cfg.tile, cfg.warps, cfg.stages);
            case.check(ops, Run::Prepared(&w, Some((cfg, 1))), &name);
        }
        eprintln!("ok {what}");
    }
    // the op's own choice on sm_90 (`select_awq_wgmma`, 132 SMs): the 64x256 tile (96 and
    // 128 CTAs: one wave; up to 96 rows of a wide weight and 64 of a narrower one the split rule, `wgmma_split_cases`), the 128x256 tile (96 CTAs against two waves of 160), the
    // 152x256 tile (3 waves of 392 CTAs against 4 of 448 with 128 tokens), the 184x256
    // tile (1500 rows: 4 waves of 504 against 4 of 448 with 192 at a higher cost a wave;
    // 4095 rows, 23 ragged row tiles: 6 waves of 736 against 6 of 704 with 192 and 7 of 864
    // with 152: since session 30 the op takes the dense path there), too few CTAs for the kernel (the dense path), and 24 x 28672 (the 32x256
    // tile in one split: 112 tiles, too many for 2 splits)
    for (m, n, k, g, bias) in [
        (24, 28672, 128, 128, true),
        (160, 8192, 256, 128, true),
        (200, 8192, 128, 32, false),
        (300, 8192, 128, 32, false),
        (1000, 14336, 64, 64, true),
        (1500, 14336, 64, 32, false),
        (4095, 8192, 64, 64, true),
        (300, 512, 256, 64, true),
    ] {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        case.check(
            ops,
            Run::PreparedOp(&w),
            &format!("{e} {m}x{n}x{k} G={g} bias={bias} (op)"),
        );
    }
}

/// The split-K wgmma kernels with 1, 2, 3 and 8 requested splits on ragged M (1, 16, 17,
/// 33, 100, 130: partial token tiles, several token tiles sharing the semaphores), N
/// ending inside the CTA's columns (9, 10, 12 64-column blocks), K of several groups (G =
/// 128 at K = 4096 and 1024: splits of 8, 3 and 22 k-tiles, starting inside a group), K
/// ending inside a k-tile (352: 6 k-tiles, 8 requested splits run 6; 96 with G = 32), G =
/// K, bias on and off, against the float64 reference; every result twice, bit-identical
/// (the slabs are summed in slab order whichever split is last, and the semaphores are left
/// zeroed for the next launch). Without `split_k`, more than one split is a typed error.
fn wgmma_split_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_wgmma_split_{e}"));
    let shapes = [
        (33, 768, 320, 64, true),
        (17, 640, 1024, 128, true),
        (16, 512, 4096, 128, false),
        (1, 576, 352, 32, true),
        (100, 512, 256, 256, false),
        (130, 256, 96, 32, true),
    ];
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} wgmma split-K");
        for cfg in awq_wgmma_split_k_configs(e) {
            for splits in [1, 2, 3, 8] {
                let name = format!(
                    "{what} {:?} {:?} s{} r{} split {splits}",
                    cfg.tile, cfg.warps, cfg.stages, cfg.raster
                );
                let first = case.check(ops, Run::Prepared(&w, Some((cfg, splits))), &name);
                let again = case.check(ops, Run::Prepared(&w, Some((cfg, splits))), &name);
                assert!(bits(&first) == bits(&again), "{name}: a second run differs");
            }
        }
        eprintln!("ok {what}");
    }
    // the op's own choice (132 SMs), two warpgroups splitting the words: 16 tokens in 2
    // splits (16 x 14336) and 4 (20 x 4096: 2 x 16 tiles), 32 tokens in 2 (24 x 14336) and 4
    // (50 x 4096: 2 x 16 tiles), 48 tokens in 4 (40 x 8192, K of 4 k-tiles), 64 in 2 (64 x
    // 14336), 16 at 12 rows in 2 (12 x 14336), 128 in 2 (80 x 14336) and 4 (96 x 8192)
    for (m, n, k, g, bias) in [
        (16, 14336, 320, 64, false),
        (12, 14336, 256, 128, true),
        (80, 14336, 384, 64, false),
        (96, 8192, 256, 128, true),
        (20, 4096, 512, 128, true),
        (24, 14336, 256, 128, true),
        (64, 14336, 512, 128, false),
        (40, 8192, 256, 64, true),
        (50, 4096, 1024, 128, true),
    ] {
        let sms = ops.gpu().sm_count() as usize;
        let pick = rcute_ops::awq::select_split::select_awq_wgmma_split(m, n, k, sms, (9, 0), e);
        assert!(sms < 100 || pick.is_some(), "{m}x{n}x{k}: the split rule's shape");
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} {pick:?} (op)");
        let first = case.check(ops, Run::PreparedOp(&w), &what);
        let again = case.check(ops, Run::PreparedOp(&w), &what);
        assert!(bits(&first) == bits(&again), "{what}: a second run differs");
    }
    let case = Case::<T>::new(ops, &mut rng, 16, 256, 128, 128, false);
    let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
    let s = ops.gpu().stream();
    let mut out: CudaSlice<T> = s.clone_htod(&vec![T::from_f64(f64::NAN); 16 * 256]).unwrap();
    let one = AwqGemmConfig::new(e, [16, 256, 64], [1, 1], 8, 4).wgmma();
    let r = ops.run_awq_gemm_prepared(
        &MatrixRef::new(&case.d_x, 16, 128),
        &w,
        None,
        &mut MatrixMut::new(&mut out, 16, 256),
        Some((one, 2)),
    );
    assert!(
        matches!(r, Err(OpsError::Shape(_))),
        "wgmma without split_k, 2 splits: {r:?}"
    );
}

/// The SM90 mixed-input kernels on the prepared weight against the float64 reference (f16
/// and bf16); on another architecture forcing one is an [`OpsError::Arch`] that writes
/// nothing.
#[test]
fn awq_gemm_prepared_wgmma_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        let mut rng = Rng::for_test("awq_wgmma_arch");
        let case = Case::<f16>::new(&ops, &mut rng, 2, 256, 128, 128, false);
        let w = AwqWeight::prepare(&ops, &case.tensors()).unwrap();
        let s = ops.gpu().stream();
        let x: CudaSlice<f16> = s.clone_htod(&vec![f16::ONE; 2 * 128]).unwrap();
        let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); 2 * 256]).unwrap();
        let forced = Some((wgmma_configs(rcute_atom::Element::F16)[0], 1));
        let r = ops.run_awq_gemm_prepared(
            &MatrixRef::new(&x, 2, 128),
            &w,
            None,
            &mut MatrixMut::new(&mut out, 2, 256),
            forced,
        );
        assert!(matches!(r, Err(OpsError::Arch(_))), "wgmma kernel off sm_90: {r:?}");
        ops.gpu().synchronize().unwrap();
        assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
        eprintln!("skipped the wgmma kernels' numerics: they need sm_90");
        return;
    }
    wgmma_persistent_cases::<f16>(&ops, rcute_atom::Element::F16);
    wgmma_persistent_cases::<bf16>(&ops, rcute_atom::Element::BF16);
    wgmma_cases::<f16>(&ops, rcute_atom::Element::F16);
    wgmma_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The prepared wgmma kernels with their weight stages as one TMA tensor box
/// (`weight_boxes`) against the float64 reference and bit-identical to the same kernel
/// with the bulk runs (the same shared image): one consumer warpgroup (64 tokens), three
/// along N (a box of 12 column blocks), two splitting the words (184 tokens persistent;
/// 16, 48, 80 and 96 tokens split-K in 2 splits, 48 (as the op takes it at 33 to 48 rows)
/// and 64 with chained step pairs; 32 tokens, two resident CTAs, in 3; 64 tokens in one
/// split with chained step pairs, as the op takes it at 97 to 128 rows), on ragged M, N
/// ending inside the CTA's columns (the box's zero fill past N), K ending inside a k-tile
/// (352, 96, 48: its zero fill past K), G = 32 .. K, f16 and bf16; and the prepared op's
/// own choices (the split-K ones take the boxes; sm_90 only).
#[test]
fn awq_gemm_wgmma_weight_boxes_match_the_bulk_runs() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        eprintln!("skipped: the wgmma kernels need sm_90");
        return;
    }
    wgmma_box_cases::<f16>(&ops, rcute_atom::Element::F16);
    wgmma_box_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

fn wgmma_box_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_wgmma_boxes_{e}"));
    let c = |tile: [i64; 3], warps: [i64; 2], stages: usize| AwqGemmConfig::new(e, tile, warps, stages, 4).wgmma();
    let forced = [
        (c([64, 256, 64], [1, 1], 8), 1),
        (c([32, 768, 64], [1, 3], 4), 1),
        (c([184, 256, 64], [2, 1], 6).persistent(), 1),
        (c([16, 256, 64], [2, 1], 8).split_k(), 2),
        (c([32, 256, 64], [2, 1], 6).resident(2).split_k(), 3),
        (c([48, 256, 64], [2, 1], 8).split_k(), 2),
        // chained step pairs: the op's at 33 ..= 48 rows of a wide weight, the forced 64-token one
        (c([48, 256, 64], [2, 1], 8).split_k().chained(), 2),
        (c([64, 256, 64], [2, 1], 6).split_k().chained(), 2),
        // the op's 80- and 96-token split tiles (65 ..= 80 and 81 ..= 96 rows of a wide weight)
        (c([80, 256, 64], [2, 1], 6).split_k(), 2),
        (c([96, 256, 64], [2, 1], 6).split_k(), 2),
        // the op's one-split 64-token tile on two warpgroups, chained (97 ..= 128 rows)
        (c([64, 256, 64], [2, 1], 6).chained(), 1),
    ];
    let shapes = [
        (17, 576, 352, 32, true),
        (130, 640, 4096, 128, true),
        (1, 256, 96, 32, false),
        (255, 768, 320, 64, false),
        (5, 512, 48, 48, true),
    ];
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        for (cfg, splits) in forced {
            let name = format!(
                "{e} {m}x{n}x{k} G={g} bias={bias} {:?} {:?} s{} split {splits}",
                cfg.tile, cfg.warps, cfg.stages
            );
            let runs = case.check(ops, Run::Prepared(&w, Some((cfg, splits))), &name);
            let boxes = case.check(ops, Run::Prepared(&w, Some((cfg.weight_boxes(), splits))), &name);
            assert!(bits(&runs) == bits(&boxes), "{name}: the boxes differ from the runs");
        }
        eprintln!("ok {e} {m}x{n}x{k} G={g} bias={bias} wgmma boxes");
    }
    // the op's own choice (`select_awq_wgmma_prepared`: boxes for the split-K tiles, bulk
    // runs for the one-split ones): the split-K tile (16 x 11008: 3 splits; 9-16 rows of
    // 8192 or 14336 columns take a 16-row streamed tile first), the 32-token tile in one
    // split (24 x 28672), the 80- and 96-token split tiles (72 / 88 x 14336), the 64-token
    // tile on two warpgroups with chained steps in one split (128 x 14336) and in 2 splits
    // (112 x 8192), and the 152-token tile (1000 x 14336), each bit-identical to its twin
    // with the other weight copy
    let sms = ops.gpu().sm_count() as usize;
    let op_shapes = [
        (16, 11008, 256, 128, true),
        (40, 14336, 352, 32, false),
        (64, 14336, 256, 128, true),
        (72, 14336, 352, 32, false),
        (88, 14336, 256, 64, true),
        (24, 28672, 128, 128, false),
        (128, 14336, 128, 64, true),
        (112, 8192, 352, 32, false),
        (1000, 14336, 64, 32, true),
    ];
    for &(m, n, k, g, bias) in cases(&op_shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let name = format!("{e} {m}x{n}x{k} G={g} bias={bias} (op, boxes)");
        // the op asks the 16-row streamed rule first: these shapes must be the wgmma rule's
        let streamed = rcute_ops::awq::select_streamed16::select_awq_streamed_wide16(m, n, k, sms, e);
        assert!(
            streamed.is_none(),
            "{name}: the op runs the streamed tile here, not a wgmma tile"
        );
        let (cfg, splits) = select_awq_wgmma_prepared(m, n, k, sms, (9, 0), e).unwrap();
        assert_eq!(cfg.weight_boxes, cfg.split_k, "{name}");
        let op = case.check(ops, Run::PreparedOp(&w), &name);
        let other = AwqGemmConfig {
            weight_boxes: !cfg.weight_boxes,
            ..cfg
        };
        let twin = case.check(ops, Run::Prepared(&w, Some((other, splits))), &name);
        assert!(bits(&op) == bits(&twin), "{name}: the boxes differ from the runs");
    }
}

/// The wgmma kernels with 2 and 3 `wgmma` groups of a consumer warpgroup in flight
/// (`AwqGemmConfig::in_flight`: four fragment buffers, the stage handed back at step 1 or
/// 2 of the next k-tile) against the float64 reference and bit-identical to the same kernel
/// with one group (the same `wgmma`s in the same order): the split-K tiles of 16, 48 and
/// 64 tokens (tensor boxes, 3 / 2 / 2 splits), 128 tokens in one split, one consumer
/// warpgroup of 64 tokens, and the checkpoint's kernel (the unprepared op's), on ragged M,
/// N ending inside the CTA's columns, K ending one or two steps into a k-tile (352, 80,
/// 16: fewer steps than groups in flight), G = 32 .. K, f16 and bf16 (sm_90 only).
#[test]
fn awq_gemm_wgmma_in_flight_matches_one_group() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        eprintln!("skipped: the wgmma kernels need sm_90");
        return;
    }
    wgmma_in_flight_cases::<f16>(&ops, rcute_atom::Element::F16);
    wgmma_in_flight_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

fn wgmma_in_flight_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_wgmma_in_flight_{e}"));
    let c = |tile: [i64; 3], warps: [i64; 2], stages: usize| AwqGemmConfig::new(e, tile, warps, stages, 4).wgmma();
    let forced = [
        (c([64, 256, 64], [2, 1], 6).weight_boxes().split_k(), 2),
        (c([48, 256, 64], [2, 1], 8).weight_boxes().split_k(), 2),
        (c([16, 256, 64], [2, 1], 8).weight_boxes().split_k(), 3),
        (c([128, 256, 64], [2, 1], 6), 1),
        (c([64, 256, 64], [1, 1], 8), 1),
    ];
    let checkpoint = AwqGemmConfig::new(e, [64, 256, 64], [2, 1], 6, 4)
        .wgmma_checkpoint()
        .split_k();
    let shapes = [
        (17, 576, 352, 32, true),
        (130, 640, 4096, 128, true),
        (3, 256, 16, 16, false),
        (70, 512, 80, 80, true),
        (5, 512, 48, 48, true),
    ];
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        for (cfg, splits) in forced {
            let name = format!(
                "{e} {m}x{n}x{k} G={g} bias={bias} {:?} {:?} s{} split {splits}",
                cfg.tile, cfg.warps, cfg.stages
            );
            let one = case.check(ops, Run::Prepared(&w, Some((cfg, splits))), &name);
            for d in [2, 3] {
                let deep = case.check(ops, Run::Prepared(&w, Some((cfg.in_flight(d), splits))), &name);
                assert!(
                    bits(&one) == bits(&deep),
                    "{name}: {d} groups in flight differ from one"
                );
            }
        }
        // the checkpoint's words (m x n as they are: N a multiple of 32 for its boxes)
        if n.is_multiple_of(32) {
            let name = format!("{e} {m}x{n}x{k} G={g} bias={bias} checkpoint");
            let one = case.check(ops, Run::Fused(Some((checkpoint, 2))), &name);
            let deep = case.check(ops, Run::Fused(Some((checkpoint.in_flight(3), 2))), &name);
            assert!(bits(&one) == bits(&deep), "{name}: 3 groups in flight differ from one");
        }
        eprintln!("ok {e} {m}x{n}x{k} G={g} bias={bias} wgmma groups in flight");
    }
}

/// The split-K wgmma kernels against the float64 reference (f16 and bf16; sm_90 only).
#[test]
fn awq_gemm_prepared_wgmma_split_k_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        eprintln!("skipped the split-K wgmma kernels: they need sm_90");
        return;
    }
    wgmma_split_cases::<f16>(&ops, rcute_atom::Element::F16);
    wgmma_split_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The reordered path on ragged M (3, 17, 130, 255, 1000: partial token tiles), N ending
/// inside the CTA's 256 columns, K ending inside a k-tile (352), G = 32 and 128, bias on and
/// off: every tile of `select_awq_wgmma` forced (the float64 reference, and bit-identical
/// to the prepared op's run of the same tile on `AwqWeight::prepare`'s words), then the
/// op's own choice where `awq_reordered_wins` (bit-identical to `awq_gemm_prepared`'s).
fn reordered_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_reordered_{e}"));
    let shapes = [
        (130, 640, 4096, 128, true),
        (17, 576, 352, 32, false),
        (255, 768, 256, 128, false),
        (1000, 320, 128, 32, true),
        (3, 512, 256, 128, true),
    ];
    let tiles = rcute_ops::awq::select::WGMMA_TILES;
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias}");
        for (bm, warps, stages, _) in tiles {
            let f = Some((AwqGemmConfig::new(e, [bm as i64, 256, 64], warps, stages, 4).wgmma(), 1));
            let name = format!("{what} reordered {bm}x256 s{stages}");
            let got = case.check(ops, Run::Reordered(f), &name);
            let prepared = case.check(ops, Run::Prepared(&w, f), &format!("{what} prepared {bm}x256"));
            assert!(got == prepared, "{name}: not the prepared op's bits");
        }
        eprintln!("ok {what} reordered");
    }
    // the reordered path's own tile and the ops (132 SMs: 64x256 at 160 rows, 152x256 at
    // 1000, 192x256 at 384: one wave of 112 CTAs; 184x256 at 2000 x 8192: 3 waves of 352
    // CTAs against 4 of 512 with 128 tokens; not the rows where the prepared op splits K,
    // up to 96 of a wide weight and 64 of a narrower one: other bits); since session 22
    // the unprepared op runs the same tile on the checkpoint's words there
    // (`select_awq_wgmma_checkpoint`): the same bits
    for (m, n, k, g, bias) in [
        (160, 8192, 256, 128, true),
        (1000, 14336, 64, 32, false),
        (384, 14336, 128, 128, true),
        (2000, 8192, 64, 32, false),
    ] {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias}");
        let got = case.check(ops, Run::Op, &format!("{what} (op)"));
        let auto = case.check(ops, Run::Reordered(None), &format!("{what} (reordered, own tile)"));
        let prepared = case.check(ops, Run::PreparedOp(&w), &format!("{what} (prepared op)"));
        assert!(got == prepared && auto == prepared, "{what}: the ops differ");
    }
}

/// The unprepared op's reordered path against the float64 reference and the prepared op
/// (f16 and bf16); without a wgmma tile, with K not a multiple of 16 or off sm_90 it is a
/// typed error that writes nothing.
#[test]
fn awq_gemm_reordered_matches_the_reference_and_the_prepared_op() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("awq_reordered_bad");
    let s = ops.gpu().stream();
    let sm90 = ops.gpu().compute_capability() == (9, 0);
    // K = 40 (not whole k16 steps), then 2 x 256 (no tile takes 2 rows), then off sm_90
    for (m, n, k, g) in [(64, 256, 40, 40), (2, 256, 128, 128)] {
        let case = Case::<f16>::new(&ops, &mut rng, m, n, k, g, false);
        let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); m * n]).unwrap();
        let x = MatrixRef::new(&case.d_x, m, k);
        let p = validate_awq_gemm(&x, &case.tensors(), None, &MatrixMut::new(&mut out, m, n)).unwrap();
        let r = ops.run_awq_gemm_reordered(&p, None);
        let typed = match (k, sm90) {
            (40, _) | (_, true) => matches!(r, Err(OpsError::Shape(_))),
            _ => matches!(r, Err(OpsError::Arch(_))),
        };
        assert!(typed, "{m}x{n}x{k}: {r:?}");
        ops.gpu().synchronize().unwrap();
        assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
    }
    if !sm90 {
        eprintln!("skipped the reordered path's numerics: it needs sm_90");
        return;
    }
    reordered_cases::<f16>(&ops, rcute_atom::Element::F16);
    reordered_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The register-streamed prepared kernels (swap-AB, the weight streamed into registers):
/// 8 and 16 rows, warps along K and N, rings of 1 to 12 steps.
fn streamed_configs(e: rcute_atom::Element) -> Vec<AwqGemmConfig> {
    vec![
        AwqGemmConfig::new(e, [8, 64, 64], [4, 1], 8, 4).streamed(),
        AwqGemmConfig::new(e, [16, 64, 64], [4, 1], 8, 4).streamed(),
        AwqGemmConfig::new(e, [8, 64, 64], [8, 1], 4, 4).streamed(),
        // 16 warps along K, 2 splits (a cluster on sm_90): rings of 4, and of 2 the op's
        // choice at 16 rows on narrow weights
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 4, 4).streamed(),
        AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 4, 4).streamed(),
        AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 2, 4).streamed(),
        // 8 warps along K, rings of 4 to 16
        AwqGemmConfig::new(e, [8, 64, 64], [8, 1], 12, 4).streamed(),
        AwqGemmConfig::new(e, [8, 64, 64], [8, 1], 16, 4).streamed(),
        AwqGemmConfig::new(e, [16, 64, 64], [8, 1], 4, 4).streamed(),
        AwqGemmConfig::new(e, [16, 64, 64], [8, 1], 6, 4).streamed(),
        // two column blocks a CTA: N = 320 and 576 end inside the 128-column tile
        AwqGemmConfig::new(e, [16, 128, 64], [2, 2], 8, 4).streamed(),
        AwqGemmConfig::new(e, [8, 256, 64], [1, 4], 12, 4).streamed(),
        // one warp, a ring of 2 and of 1: the ring wraps every step or two
        AwqGemmConfig::new(e, [16, 64, 64], [1, 1], 2, 4).streamed(),
        AwqGemmConfig::new(e, [8, 64, 64], [4, 1], 1, 4).streamed(),
        // the shared cp.async ring (each lane's own slots): the configurations measured
        // fastest with it (BENCHMARKS.md, AWQ, helper awqdec), 16 rows, 2x2 warps, rings
        // of 12 and 1
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 4, 4).streamed_shared_ring(),
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring(),
        AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 2, 4).streamed_shared_ring(),
        AwqGemmConfig::new(e, [16, 128, 64], [2, 2], 8, 4).streamed_shared_ring(),
        AwqGemmConfig::new(e, [8, 64, 64], [8, 1], 12, 4).streamed_shared_ring(),
        AwqGemmConfig::new(e, [8, 64, 64], [4, 1], 1, 4).streamed_shared_ring(),
        // the two-split rules' kernels with the clustered sum by pushes (`_cpush`)
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 4)
            .streamed_shared_ring()
            .cluster_push(),
        AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 2, 4)
            .streamed()
            .cluster_push(),
    ]
}

/// The streamed kernels forced with 1, 3 and 7 requested K splits (and 13 for the first; a
/// split holds at most the plan's `max_k_tiles`, so K = 4096 may run more) on ragged M (1, 3, 5, 16, and 24: two
/// or three row tiles), N ending inside a CTA tile, K ending inside a 64-wide k-tile, G =
/// 32, 64, 128 and K, bias on and off; the op's own choice; split-K bit-identical run to
/// run. The sanitizer runs keep the first two shapes (`RCUTE_CASES=2`: G = 128 and G = 32,
/// whose groups of two steps are shorter than rings of 4 and 12).
fn streamed_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_streamed_{e}"));
    let shapes = [
        (1, 4096, 512, 128, true),
        (3, 320, 96, 32, false),
        (5, 576, 320, 64, true),
        (16, 768, 4096, 128, true),
        (5, 768, 352, 32, false),
        (24, 320, 256, 256, true),
        (1, 192, 2048, 128, false),
    ];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} streamed");
        case.check(ops, Run::PreparedOp(&w), &format!("{what} (op)"));
        case.check(ops, Run::Prepared(&w, None), &format!("{what} (fused)"));
        for (i, cfg) in streamed_configs(e).into_iter().enumerate() {
            // on sm_90 two splits sum in a cluster through distributed shared memory (K =
            // 96 and the 2-tile splits of K = 4096 at 16 rows), more through the split-K
            // slabs in global memory
            let splits: &[u32] = if i == 0 { &[1, 3, 7, 13] } else { &[1, 3, 7] };
            for &splits in splits {
                let forced = Some((cfg, splits));
                let name = format!("{what} {:?} w{:?} s{} split {splits}", cfg.tile, cfg.warps, cfg.stages);
                let first = case.check(ops, Run::Prepared(&w, forced), &name);
                if i == 0 && splits >= 7 {
                    let again = case.check(ops, Run::Prepared(&w, forced), &name);
                    assert!(first == again, "{name}: a second run differs");
                }
            }
        }
        eprintln!("ok {what}");
    }
}

/// The streamed kernels with the scales after each group's MMAs (`_sa`,
/// `AwqGemmConfig::scale_after`) and the ring issued before the grid-dependency wait
/// (`_eg`, `AwqGemmConfig::eager_ring`): the one-wave rule's kernel (ring 4, `_sa`), the
/// 8-row tiles of ring 2 (one split; two splits summed in a cluster by pushes), the 16-row
/// group-slot tile, 8 warps with a ring of 12
/// (groups of two steps at G = 32); 1, 2 and 3 requested splits on shapes small enough for
/// racecheck (ragged N and K, G = 32 and 128, a group of zero scales, bias on and off),
/// against the float64 reference and bit-identical run to run; the op's own choice.
#[test]
fn awq_gemm_streamed_scale_after_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let e = rcute_atom::Element::F16;
    let mut rng = Rng::for_test("awq_scale_after");
    let cfgs = [
        // the one-wave rule's kernel (`select_awq_streamed_wave`)
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 4, 4)
            .streamed_shared_ring()
            .scale_after(),
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 4)
            .streamed_shared_ring()
            .scale_after(),
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 4)
            .streamed_shared_ring()
            .cluster_push()
            .scale_after()
            .eager_ring(),
        AwqGemmConfig::new(e, [16, 128, 64], [8, 2], 4, 4)
            .streamed_shared_ring()
            .staged_k_tiles(64)
            .scale_after(),
        AwqGemmConfig::new(e, [8, 64, 64], [8, 1], 12, 4)
            .streamed_shared_ring()
            .scale_after()
            .eager_ring(),
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 4, 4)
            .streamed_shared_ring()
            .eager_ring(),
    ];
    for (m, n, k, g, bias) in [
        (1, 1024, 512, 128, true),
        (5, 320, 352, 32, false),
        (16, 576, 256, 32, true),
    ] {
        // at G = 32, group 1's scales all zero: its products count for nothing, the others' stay
        let case = Case::<f16>::with_zero_group(&ops, &mut rng, m, n, k, g, bias, (g == 32).then_some(1));
        let w = AwqWeight::prepare(&ops, &case.tensors()).unwrap();
        let what = format!("{m}x{n}x{k} G={g} bias={bias}");
        case.check(&ops, Run::PreparedOp(&w), &format!("{what} (op)"));
        for cfg in cfgs {
            for splits in [1, 2, 3] {
                let name = format!("{what} {:?} w{:?} s{} split {splits}", cfg.tile, cfg.warps, cfg.stages);
                let a = case.check(&ops, Run::Prepared(&w, Some((cfg, splits))), &name);
                let b = case.check(&ops, Run::Prepared(&w, Some((cfg, splits))), &name);
                assert!(a == b, "{name}: a second run differs");
            }
        }
    }
}

/// The clustered split-K sum by pushes (`_cpush`: the peer's partial chunks stored into rank
/// 0's shared memory by `st.async`, rank 0 waiting on its mbarrier) on shapes small enough
/// for racecheck: K = 96 (two k-tiles, two splits: one cluster of 2 per tile) and the op's
/// two-split rule at 1 and 16 rows of a 1024 x 512 weight; bit-identical run to run, and to
/// the barrier-summed kernel of the same tile (same order of the same f32 adds). The
/// sanitizer-sized form of `streamed_cases`' `_cpush` entries.
#[test]
fn awq_gemm_cluster_push_matches_the_barrier_sum() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let e = rcute_atom::Element::F16;
    let mut rng = Rng::for_test("awq_cluster_push");
    for (m, n, k, g) in [(3, 320, 96, 32), (1, 1024, 512, 128), (16, 1024, 512, 128)] {
        let case = Case::<f16>::new(&ops, &mut rng, m, n, k, g, true);
        let w = AwqWeight::prepare(&ops, &case.tensors()).unwrap();
        let what = format!("{m}x{n}x{k} G={g}");
        for (pushed, summed) in [
            (
                AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring(),
                AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 4).streamed_shared_ring(),
            ),
            (
                AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 2, 4).streamed(),
                AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 2, 4).streamed(),
            ),
        ] {
            let pushed = pushed.cluster_push();
            let name = format!("{what} {:?} w{:?} s{}", pushed.tile, pushed.warps, pushed.stages);
            let a = case.check(&ops, Run::Prepared(&w, Some((pushed, 2))), &format!("{name} pushed"));
            let b = case.check(
                &ops,
                Run::Prepared(&w, Some((pushed, 2))),
                &format!("{name} pushed again"),
            );
            let c = case.check(
                &ops,
                Run::Prepared(&w, Some((summed, 2))),
                &format!("{name} barrier sum"),
            );
            assert!(a == b, "{name}: a second run of the pushed sum differs");
            assert!(a == c, "{name}: the pushed sum differs from the barrier sum");
        }
    }
}

/// The register-streamed kernels on the prepared weight against the float64 reference, f16
/// and bf16 (`mma.sync`: every architecture the prepared path runs on).
#[test]
fn awq_gemm_prepared_streamed_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    streamed_cases::<f16>(&ops, rcute_atom::Element::F16);
    streamed_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The 16-row streamed tiles with the staged `x` of 64 k-tiles (K = 4096 in one split;
/// `AwqGemmConfig::staged_k_tiles`) on the prepared weight, and the checkpoint twin of the
/// same tile, warps and ring: 16 x 128 columns with 8 (and 12) warps along K, shared
/// rings of 2 and 4, a register ring of 2; the 2-split form of the default stage beside them.
fn staged_configs(e: rcute_atom::Element) -> Vec<(AwqGemmConfig, Option<AwqGemmConfig>)> {
    let t = |warps: [i64; 2], ring: usize| AwqGemmConfig::new(e, [16, 128, 64], warps, ring, 4);
    let twin = |warps: [i64; 2], ring: usize| Some(t(warps, ring).streamed_checkpoint().staged_k_tiles(64));
    vec![
        (t([8, 2], 2).streamed_shared_ring().staged_k_tiles(64), twin([8, 2], 2)),
        (t([8, 2], 4).streamed_shared_ring().staged_k_tiles(64), twin([8, 2], 4)),
        (t([8, 2], 2).streamed().staged_k_tiles(64), None),
        (t([12, 2], 2).streamed_shared_ring().staged_k_tiles(64), None),
        (t([8, 2], 2).streamed_shared_ring(), None),
    ]
}

/// The staged-x tiles of [`staged_configs`] forced with 1, 2 and 3 requested K splits on 9
/// to 16 rows (one row tile, ragged), N ending inside the 128-column tile (576, 1088) and a
/// full wide weight (16 x 14336 x 4096, the decode shape), K ending inside a k-tile (352,
/// 4112: past one split's 4096, so two run), G = 32, 64, 128 and K, bias on and off,
/// against the float64 reference; the checkpoint twin bit-identical to the prepared kernel
/// (same fragments, sums and order); both ops' own choices, the prepared op's bit-identical
/// to the 16-row rule's kernel forced where the rule takes the shape.
fn staged_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    use rcute_ops::awq::select_streamed16::select_awq_streamed_wide16;
    let mut rng = Rng::for_test(&format!("awq_streamed_staged_{e}"));
    let shapes = [
        (12, 576, 4112, 4112, true),
        (9, 320, 352, 32, false),
        (16, 14336, 4096, 128, true),
        (13, 1088, 2048, 64, false),
        (16, 8192, 4096, 128, false),
    ];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} staged x");
        let op = case.check(ops, Run::PreparedOp(&w), &format!("{what} (prepared op)"));
        case.check(ops, Run::Op, &format!("{what} (op)"));
        // where the 16-row rule takes the shape (16 x 14336 and 16 x 8192 on 100 SMs or
        // more), the prepared op runs its kernel: the same bits as that kernel forced
        let rule = select_awq_streamed_wide16(m, n, k, ops.gpu().sm_count() as usize, e);
        assert!(
            ops.gpu().sm_count() < 100 || rule.is_some() == (n == 14336 || n == 8192),
            "{what}: {rule:?}"
        );
        if rule.is_some() {
            let forced = case.check(ops, Run::Prepared(&w, rule), &format!("{what} (the rule's kernel)"));
            assert!(
                half_bits(&op) == half_bits(&forced),
                "{what}: the prepared op is not the rule's kernel"
            );
        }
        for (cfg, twin) in staged_configs(e) {
            for splits in [1, 2, 3] {
                let name = format!(
                    "{what} {:?} w{:?} r{} x{} split {splits}",
                    cfg.tile, cfg.warps, cfg.stages, cfg.staged_k_tiles
                );
                let got = case.check(ops, Run::Prepared(&w, Some((cfg, splits))), &name);
                if let Some(twin) = twin {
                    let other = case.check(ops, Run::Fused(Some((twin, splits))), &format!("{name} checkpoint"));
                    assert!(
                        half_bits(&got) == half_bits(&other),
                        "{name}: the checkpoint twin differs"
                    );
                }
            }
        }
        eprintln!("ok {what}");
    }
}

/// The 16-row rule's 64-column tile (`rcute_ops::awq::select_streamed16`, 16 warps along K,
/// shared ring 4, 64 staged k-tiles) at 9 to 16 rows (ragged) of 8192-class weights: N =
/// 8192 and 7040 (110 CTAs; a prepared weight has whole 64-column blocks), K = 4096, 2080 and 1056 (ending inside
/// a k-tile), G = 32, 64, 128 and K, bias on and off; the prepared op bit-identical to the
/// rule's kernel forced where the rule takes the shape (asserted on 100 to 132 SMs), the
/// tile forced with 1 and 2 requested splits, its checkpoint twin bit-identical to it, the
/// unprepared op against the reference. The first two cases (1024 and 576 columns: 16 and
/// 9 CTAs, too narrow for the rule) are the ones the sanitizer runs keep (`RCUTE_CASES=2`).
fn wide16_narrow_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    use rcute_ops::awq::select_streamed16::{select_awq_streamed_wide16, wide16_config};
    let mut rng = Rng::for_test(&format!("awq_streamed_wide16_64_{e}"));
    let sms = ops.gpu().sm_count() as usize;
    let shapes = [
        (11, 1024, 1056, 32, true),
        (9, 576, 2080, 2080, false),
        (11, 7040, 1056, 32, true),
        (9, 8192, 2080, 2080, false),
        (12, 8192, 4096, 64, true),
        (16, 8192, 4096, 128, false),
        (14, 8192, 4096, 4096, true),
    ];
    let tile = wide16_config(e, 64);
    let twin = tile.streamed_checkpoint();
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} 16x64 staged x");
        let op = case.check(ops, Run::PreparedOp(&w), &format!("{what} (prepared op)"));
        case.check(ops, Run::Op, &format!("{what} (op)"));
        let rule = select_awq_streamed_wide16(m, n, k, sms, e);
        // on 100 to 132 SMs the rule takes 7040 and 8192 columns (110 and 128 CTAs), not the
        // small sanitizer shapes (16 and 9 CTAs)
        let wanted = n >= 7040 && (100..=132).contains(&sms);
        assert!(rule.is_none_or(|r| r == (tile, 1)), "{what}: {rule:?}");
        assert!(
            !(100..=132).contains(&sms) || rule.is_some() == wanted,
            "{what}: {rule:?}"
        );
        if rule.is_some() {
            let forced = case.check(ops, Run::Prepared(&w, rule), &format!("{what} (the rule's kernel)"));
            assert!(
                half_bits(&op) == half_bits(&forced),
                "{what}: the prepared op is not the rule's kernel"
            );
        }
        for splits in [1, 2] {
            let name = format!("{what} split {splits}");
            let got = case.check(ops, Run::Prepared(&w, Some((tile, splits))), &name);
            let other = case.check(ops, Run::Fused(Some((twin, splits))), &format!("{name} checkpoint"));
            assert!(
                half_bits(&got) == half_bits(&other),
                "{name}: the checkpoint twin differs"
            );
        }
        eprintln!("ok {what}");
    }
}

/// The 16-row rule's 64-column tile at 9 to 16 rows of 8192-class weights, f16 and bf16.
#[test]
fn awq_gemm_streamed_wide16_64_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    wide16_narrow_cases::<f16>(&ops, rcute_atom::Element::F16);
    wide16_narrow_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The 24- and 32-row streamed tiles of `rcute_ops::awq::select_streamed32` (24 rows: K =
/// 4096 staged, one split; 32 rows: K = 2048 staged, two splits in a cluster on sm_90) at
/// 17 to 32 rows (ragged: 17, 24, 28, 31, 32; 31 rows on the 24-row tile are two row
/// tiles), N ending inside a CTA tile (576, 1088) and the wide weights (14336, 8192), K
/// ending inside a k-tile (352, 1056, 4112: three splits of the 32-row tile, summed in the
/// slabs), G = 32, 64, 128 and K, bias on and off, each tile (and the 32-row tile of 256
/// columns, 4x4 warps, measured slower: not the rule's) forced with 1 and 2 requested
/// splits against the float64 reference, two-split runs bit-identical run to run; the
/// prepared op bit-identical to the rule's kernel forced where the rule takes the shape
/// (asserted at 17 to 24 x 14336 and 17 to 32 x 8192, K = 4096, on 100 to 132 SMs); the
/// unprepared op against the
/// reference. The first two cases are the sanitizer runs' (`RCUTE_CASES=1` or 2).
fn wide32_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    use rcute_ops::awq::select_streamed32::{select_awq_streamed_wide32, wide32_config, WIDE32_TILES};
    let mut rng = Rng::for_test(&format!("awq_streamed_wide32_{e}"));
    let sms = ops.gpu().sm_count() as usize;
    let shapes = [
        (17, 576, 352, 32, true),
        (31, 1088, 1056, 32, false),
        (24, 14336, 4096, 128, true),
        (32, 14336, 4096, 128, false),
        (17, 8192, 4096, 64, true),
        (28, 8192, 4096, 4096, false),
        (32, 1024, 4112, 4112, true),
        (31, 14336, 4096, 32, true),
    ];
    let tiles: Vec<AwqGemmConfig> = WIDE32_TILES
        .iter()
        .flat_map(|t| t.columns.iter().map(|&(c, w)| wide32_config(e, t, c, w)))
        .chain([wide32_config(e, &WIDE32_TILES[1], 256, [4, 4])])
        .collect();
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} wide32");
        let op = case.check(ops, Run::PreparedOp(&w), &format!("{what} (prepared op)"));
        case.check(ops, Run::Op, &format!("{what} (op)"));
        let rule = select_awq_streamed_wide32(m, n, k, sms, e);
        let wanted = ((n == 14336 && m <= 24) || n == 8192) && k == 4096;
        assert!(
            !(100..=132).contains(&sms) || rule.is_some() == wanted,
            "{what}: {rule:?}"
        );
        if rule.is_some() {
            let forced = case.check(ops, Run::Prepared(&w, rule), &format!("{what} (the rule's kernel)"));
            assert!(
                half_bits(&op) == half_bits(&forced),
                "{what}: the prepared op is not the rule's kernel"
            );
        }
        for cfg in &tiles {
            for splits in [1, 2] {
                let name = format!("{what} {:?} w{:?} r{} split {splits}", cfg.tile, cfg.warps, cfg.stages);
                let got = case.check(ops, Run::Prepared(&w, Some((*cfg, splits))), &name);
                if splits == 2 {
                    let again = case.check(ops, Run::Prepared(&w, Some((*cfg, splits))), &name);
                    assert!(half_bits(&got) == half_bits(&again), "{name}: a second run differs");
                }
            }
        }
        eprintln!("ok {what}");
    }
}

/// The 24- / 32-row streamed tiles at 17 to 32 rows, f16 and bf16.
#[test]
fn awq_gemm_streamed_wide32_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    wide32_cases::<f16>(&ops, rcute_atom::Element::F16);
    wide32_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The 16-row streamed tiles with 64 staged k-tiles against the float64 reference, f16 and
/// bf16, and their checkpoint twins bit-identical to them.
#[test]
fn awq_gemm_streamed_staged_x_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    staged_cases::<f16>(&ops, rcute_atom::Element::F16);
    staged_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The register-streamed kernels on AutoAWQ's checkpoint words (the unprepared op's decode
/// kernel, `rcute_collective::awq_streamed_checkpoint`): the op's choice (16 warps along
/// K, ring 4, 8 and 16 rows; ring 2, one split, up to 8 rows on wide weights), warps along
/// K and N, rings of 1 to 12 steps.
fn checkpoint_configs(e: rcute_atom::Element) -> Vec<AwqGemmConfig> {
    vec![
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 4, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [8, 64, 64], [16, 1], 2, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [16, 64, 64], [16, 1], 4, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [8, 64, 64], [4, 1], 8, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [16, 64, 64], [8, 1], 6, 1).streamed_checkpoint(),
        // two and four column blocks a CTA: N ends inside the CTA tile and inside a block
        AwqGemmConfig::new(e, [16, 128, 64], [2, 2], 8, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [8, 256, 64], [1, 4], 12, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [8, 256, 64], [4, 4], 4, 1).streamed_checkpoint(),
        // one warp, a ring of 2 and of 1
        AwqGemmConfig::new(e, [16, 64, 64], [1, 1], 2, 1).streamed_checkpoint(),
        AwqGemmConfig::new(e, [8, 64, 64], [4, 1], 1, 1).streamed_checkpoint(),
    ]
}

/// The first `RCUTE_CASES` items (all without it): the sanitizer runs keep two.
fn cases<T>(items: &[T]) -> &[T] {
    let n = std::env::var("RCUTE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(items.len());
    &items[..n.min(items.len())]
}

/// The checkpoint's streamed kernels forced with 1, 3 and 7 requested K splits (and 13 for
/// the first) on ragged M (1, 3, 5, 16 and 24: two row tiles; 3 rows of a 14336-column
/// weight, where the op takes the wide rule on 113 to 224 SMs), N ending inside a 64-column
/// block (N/8 odd), K ending inside a 64-wide k-tile, G = 32, 64, 128 and K, bias on and
/// off, zeros 0 and 15 (every seventh zero; [`Case::new`]); the op's own choice and the
/// fused path's; split-K bit-identical run to run.
fn checkpoint_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_streamed_checkpoint_{e}"));
    let shapes = [
        (3, 14336, 512, 128, true),
        (1, 4096, 512, 128, true),
        (3, 264, 96, 32, false),
        (5, 584, 320, 64, true),
        (16, 776, 4096, 128, true),
        (5, 768, 352, 32, false),
        (24, 328, 256, 256, true),
        (1, 200, 2048, 128, false),
        (16, 4096, 1024, 1024, false),
    ];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} streamed checkpoint");
        let first = case.check(ops, Run::Op, &format!("{what} (op)"));
        assert!(
            case.check(ops, Run::Op, &format!("{what} (op)")) == first,
            "{what} (op): a second run differs"
        );
        case.check(ops, Run::Fused(None), &format!("{what} (fused)"));
        for (i, cfg) in checkpoint_configs(e).into_iter().enumerate() {
            let splits: &[u32] = if i == 0 { &[1, 3, 7, 13] } else { &[1, 3, 7] };
            for &splits in splits {
                let forced = Some((cfg, splits));
                let name = format!("{what} {:?} w{:?} s{} split {splits}", cfg.tile, cfg.warps, cfg.stages);
                let first = case.check(ops, Run::Fused(forced), &name);
                if i == 0 && splits >= 7 {
                    let again = case.check(ops, Run::Fused(forced), &name);
                    assert!(first == again, "{name}: a second run differs");
                }
            }
        }
        eprintln!("ok {what}");
    }
}

/// The register-streamed kernels on the checkpoint tensors as they are against the float64
/// reference, f16 and bf16 (`mma.sync`: every architecture of the op); with `G = K` and K
/// a multiple of 8 but not of 16 the op takes another kernel and a forced streamed one is
/// an [`OpsError::Shape`] that writes nothing.
#[test]
fn awq_gemm_streamed_checkpoint_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    checkpoint_cases::<f16>(&ops, rcute_atom::Element::F16);
    checkpoint_cases::<bf16>(&ops, rcute_atom::Element::BF16);
    let mut rng = Rng::for_test("awq_streamed_checkpoint_k40");
    let (m, n, k) = (2, 128, 40);
    let case = Case::<f16>::new(&ops, &mut rng, m, n, k, k, true);
    case.check(&ops, Run::Op, "2x128x40 G=K (op)");
    let s = ops.gpu().stream();
    let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); m * n]).unwrap();
    let b = case.d_b.as_ref().map(|b| VectorRef::new(b, n));
    let r = ops.run_awq_gemm(
        &validate_awq_gemm(
            &MatrixRef::new(&case.d_x, m, k),
            &case.tensors(),
            b.as_ref(),
            &MatrixMut::new(&mut out, m, n),
        )
        .unwrap(),
        Some((checkpoint_configs(rcute_atom::Element::F16)[0], 1)),
    );
    assert!(
        matches!(r, Err(OpsError::Shape(_))),
        "K = 40 on a streamed kernel: {r:?}"
    );
    ops.gpu().synchronize().unwrap();
    assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
}

/// The unprepared op's decode rules of `rcute_ops::awq::select_checkpoint` on shapes sized
/// from this GPU's SM count so that each rule takes them (the test asserts it): the one-wave
/// streamed rule (`64 sms` columns: one 8-row tile with its ring of 4, two with the ring of
/// 2) and the three bands where the fused configuration differs from `select_awq_gemm`'s
/// (`3 sms / 4` and `5 sms / 16` 256-column tiles; 4 tiles with K past 8192), each through
/// `Ops::awq_gemm` against the float64 reference, f16 and bf16 (bf16 on the first two).
#[test]
fn awq_gemm_unprepared_decode_rules_match_the_float64_reference() {
    use rcute_ops::awq::select::select_awq_gemm;
    use rcute_ops::awq::select_checkpoint::{select_awq_checkpoint_streamed, select_awq_gemm_checkpoint};
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let sms = ops.gpu().sm_count() as usize;
    let mut rng = Rng::for_test("awq_unprepared_decode_rules");
    // (M, N, K, G, bias, streamed): N ends inside a 64-column block in the fourth case; K of
    // more k-tiles than the rules' splits, so that the choices differ
    let wave = 64 * sms;
    let shapes = [
        (5, wave, 512, 128, true, true),
        (16, wave, 256, 64, false, true),
        (12, 256 * (3 * sms / 4), 256, 128, true, false),
        (9, 256 * (5 * sms).div_ceil(16) - 8, 512, 64, false, false),
        (16, 256 * (5 * sms).div_ceil(16), 640, 128, true, false),
        (16, 1024, 8256, 64, true, false),
    ];
    let e = rcute_atom::Element::F16;
    for (i, &(m, n, k, g, bias, streamed)) in shapes.iter().enumerate() {
        let chosen = select_awq_checkpoint_streamed(m, n, k, sms, e);
        assert_eq!(chosen.is_some(), streamed, "{m}x{n}x{k} on {sms} SMs: {chosen:?}");
        if let Some((cfg, splits)) = chosen {
            assert_eq!((cfg.tile[0], cfg.stages, splits), (8, if m <= 8 { 4 } else { 2 }, 1));
        } else {
            assert_ne!(
                select_awq_gemm_checkpoint(m, n, k, sms, e),
                select_awq_gemm(m, n, k, sms, e),
                "{m}x{n}x{k}"
            );
        }
        let what = format!("{m}x{n}x{k} G={g} bias={bias}");
        let case = Case::<f16>::new(&ops, &mut rng, m, n, k, g, bias);
        case.check(&ops, Run::Op, &format!("f16 {what} (op)"));
        // the rule's kernel itself: at 9 to 16 rows of a weight of 64-column blocks on
        // sm_90 the op takes the wgmma kernel on the checkpoint's words instead
        // (`select_awq_wgmma_checkpoint`)
        let rule = chosen.unwrap_or_else(|| select_awq_gemm_checkpoint(m, n, k, sms, e));
        case.check(&ops, Run::Fused(Some(rule)), &format!("f16 {what} (rule's kernel)"));
        if i < 2 {
            let case = Case::<bf16>::new(&ops, &mut rng, m, n, k, g, bias);
            case.check(&ops, Run::Op, &format!("bf16 {what} (op)"));
        }
        eprintln!("ok {what}");
    }
}

/// The SM90 wgmma kernels on the checkpoint's words (`AwqGemmConfig::wgmma_checkpoint`,
/// the configurations of `awq_wgmma_checkpoint_configs`: split-K tiles of 8 to 128 tokens,
/// one-split tiles of 16 to 192 tokens) forced with 1, 2, 3 and 8 requested splits (the
/// split-K ones) through `Ops::run_awq_gemm` on ragged M (1, 9, 12, 16, 17, 40, 200:
/// partial token tiles, several token tiles of every tile), N ending inside the CTA's
/// columns (9, 10 and 12 64-column blocks: a box past N, and with two boxes a stage a
/// second box wholly past N), K of several groups and ending inside a k-tile (352, 96),
/// G = 32, 64, 128 and K, bias on and off, against the float64 reference and
/// **bit-identical to the prepared kernel of the same tile** (the same weights, sums and
/// order); then the op's own choices ([`wgmma_checkpoint_op_cases`]); N not a multiple of
/// 64 is a typed error.
fn wgmma_checkpoint_cases<T: Half>(ops: &Ops, e: rcute_atom::Element) {
    let mut rng = Rng::for_test(&format!("awq_wgmma_checkpoint_{e}"));
    let shapes = [
        (16, 576, 320, 64, true),
        (9, 768, 1024, 128, false),
        (17, 640, 352, 32, true),
        (1, 512, 96, 32, false),
        (12, 576, 256, 256, true),
        (40, 768, 512, 128, false),
        (200, 640, 128, 64, true),
    ];
    for &(m, n, k, g, bias) in cases(&shapes) {
        let case = Case::<T>::new(ops, &mut rng, m, n, k, g, bias);
        let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} wgmma checkpoint");
        for cfg in awq_wgmma_checkpoint_configs(e) {
            let twin = AwqGemmConfig {
                prepared: true,
                b_vector_words: 4,
                ..cfg
            };
            for splits in if cfg.split_k {
                [1, 2, 3, 8].as_slice()
            } else {
                [1].as_slice()
            } {
                let name = format!("{what} {:?} {:?} s{} split {splits}", cfg.tile, cfg.warps, cfg.stages);
                let got = case.check(ops, Run::Fused(Some((cfg, *splits))), &name);
                let prepared = case.check(
                    ops,
                    Run::Prepared(&w, Some((twin, *splits))),
                    &format!("{name} (prepared)"),
                );
                assert!(
                    half_bits(&got) == half_bits(&prepared),
                    "{name}: differs from the prepared kernel"
                );
            }
        }
        eprintln!("ok {what}");
    }
    wgmma_checkpoint_op_cases::<T>(ops, e, &mut rng);
    // N inside a 64-column block: a typed error that writes nothing
    let case = Case::<T>::new(ops, &mut rng, 16, 264, 128, 128, false);
    let s = ops.gpu().stream();
    let mut out: CudaSlice<T> = s.clone_htod(&vec![T::from_f64(f64::from(SENTINEL)); 16 * 264]).unwrap();
    let x = MatrixRef::new(&case.d_x, 16, 128);
    let o = MatrixMut::new(&mut out, 16, 264);
    let p = validate_awq_gemm(&x, &case.tensors(), None, &o).unwrap();
    let r = ops.run_awq_gemm(&p, Some((awq_wgmma_checkpoint_configs(e)[0], 2)));
    assert!(matches!(r, Err(OpsError::Shape(_))), "N = 264: {r:?}");
    ops.gpu().synchronize().unwrap();
    assert!(s
        .clone_dtoh(&out)
        .unwrap()
        .iter()
        .all(|v| v.to_f64() == f64::from(SENTINEL)));
}

/// The bits of 16-bit outputs (as f64 bit patterns).
fn half_bits<T: Half>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.to_f64().to_bits()).collect()
}

/// The unprepared op's own choice where
/// [`rcute_ops::awq::select_checkpoint_wgmma::select_awq_wgmma_checkpoint`] takes the shape
/// (asserted on 100 SMs or more; 132 SMs: the 16-token split-K tile in 4, 3 and 2 splits at
/// 8192, 11008 and 14336 columns and in one split at 28672, the 32-token tile in one split
/// at 32 x 28672, 48 tokens in 4 splits at 40 x
/// 8192, 96 tokens in 2 at 96 x 14336, 80 tokens in 2 at 72 x 14336, 64 tokens on one
/// warpgroup at 128 x 14336 (where the prepared op runs two with chained steps) and on two
/// in 2 splits at 100 x 8192, 32 tokens in 4 at 64 x 4096, the one-split tiles at
/// 300 x 8192 and 200 x 14336), twice bit-identical, equal to the rule's kernel forced, the
/// prepared op's tile but at 97 to 128 rows of a wide weight in one split, and
/// bit-identical to the prepared op where it runs the same tile
/// ([`rcute_ops::awq::select_split::select_awq_wgmma_prepared`]; where the prepared op takes
/// the 16-row streamed tile of `rcute_ops::awq::select_streamed16` instead, 9 x 8192 and
/// 12 x 14336 on 132 SMs, the prepared op against the reference only).
fn wgmma_checkpoint_op_cases<T: Half>(ops: &Ops, e: rcute_atom::Element, rng: &mut Rng) {
    use rcute_ops::awq::select_checkpoint_wgmma::select_awq_wgmma_checkpoint;
    use rcute_ops::awq::select_split::select_awq_wgmma_prepared;
    use rcute_ops::awq::select_streamed16::select_awq_streamed_wide16;
    let sms = ops.gpu().sm_count() as usize;
    for &(m, n, k, g, bias) in cases(&[
        (9, 8192, 256, 128, true),
        (16, 11008, 320, 64, false),
        (12, 14336, 512, 128, true),
        (16, 28672, 128, 128, true),
        (32, 28672, 256, 64, false),
        (40, 8192, 256, 64, false),
        (96, 14336, 128, 32, true),
        (72, 14336, 352, 32, false),
        (128, 14336, 256, 128, true),
        (100, 8192, 352, 32, false),
        (64, 4096, 256, 128, false),
        (300, 8192, 128, 128, true),
        (200, 14336, 64, 64, false),
    ]) {
        let pick = select_awq_wgmma_checkpoint(m, n, k, sms, (9, 0), e);
        assert!(sms < 100 || pick.is_some(), "{m}x{n}x{k}: the rule's shape");
        let case = Case::<T>::new(ops, rng, m, n, k, g, bias);
        let what = format!("{e} {m}x{n}x{k} G={g} bias={bias} {pick:?} (op)");
        let first = case.check(ops, Run::Op, &what);
        let again = case.check(ops, Run::Op, &what);
        assert!(half_bits(&first) == half_bits(&again), "{what}: a second run differs");
        let forced = case.check(ops, Run::Fused(pick), &format!("{what} forced"));
        assert!(
            half_bits(&first) == half_bits(&forced),
            "{what}: the op's result differs from the rule's kernel"
        );
        let prepared = select_awq_wgmma_prepared(m, n, k, sms, (9, 0), e);
        let same = |p: Option<(rcute_kernel::awq_gemm::AwqGemmConfig, u32)>| {
            p.map(|(c, s)| (c.tile, c.warps, c.stages, c.split_k, s))
        };
        // the prepared op's chained one-split tile (97 to 128 rows of a wide weight): the
        // unprepared op keeps `select_awq_wgmma`'s one-consumer tile
        let mirrored = match prepared {
            Some((c, _)) if c.chained && !c.split_k => {
                rcute_ops::awq::select::select_awq_wgmma(m, n, k, sms, (9, 0), e)
            }
            p => p,
        };
        assert!(
            sms < 100 || same(mirrored) == same(pick),
            "{what}: the prepared op's tile"
        );
        if pick.is_some() && same(prepared) == same(pick) {
            let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
            let theirs = case.check(ops, Run::PreparedOp(&w), &format!("{what} prepared op"));
            let wide32 = rcute_ops::awq::select_streamed32::select_awq_streamed_wide32(m, n, k, sms, e);
            if select_awq_streamed_wide16(m, n, k, sms, e).is_some() || wide32.is_some() {
                eprintln!("ok {what} (the prepared op: a 16- to 32-row streamed tile)");
                continue;
            }
            assert!(
                half_bits(&first) == half_bits(&theirs),
                "{what}: differs from the prepared op on the same tile"
            );
        }
        eprintln!("ok {what}");
    }
}

/// The SM90 wgmma kernel on the checkpoint's words against the float64 reference and the
/// prepared kernel (f16 and bf16; sm_90 only).
#[test]
fn awq_gemm_wgmma_checkpoint_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    if ops.gpu().compute_capability() != (9, 0) {
        eprintln!("skipped the checkpoint-word wgmma kernels: they need sm_90");
        return;
    }
    wgmma_checkpoint_cases::<f16>(&ops, rcute_atom::Element::F16);
    wgmma_checkpoint_cases::<bf16>(&ops, rcute_atom::Element::BF16);
}

/// The prepared op on `case` against the reference, and the same values as the kernel
/// forced to `chosen`.
fn op_matches_forced<T: Half>(ops: &Ops, case: &Case<T>, chosen: Option<(AwqGemmConfig, u32)>, what: &str) {
    let w = AwqWeight::prepare(ops, &case.tensors()).unwrap();
    let op = case.check(ops, Run::PreparedOp(&w), &format!("{what} (op)"));
    let forced = case.check(ops, Run::Prepared(&w, chosen), &format!("{what} (forced)"));
    assert!(op == forced, "{what}: the op's result differs from the rule's kernel");
}

/// The prepared op's one-wave streamed rule (`rcute_ops::awq::select::select_awq_streamed_wave`:
/// the 8x64 streamed kernel, 16 warps along K, the shared ring of 4, one split) on shapes
/// sized from this GPU's SM count so that the rule takes them and the SM90 wgmma kernels
/// do not (asserted): `64 sms` columns at 1 and 8 rows, just over half a wave of 64-column
/// blocks at 5 rows with the K one split stages (4096). Through `Ops::awq_gemm_prepared`
/// against the float64 reference, f16 and bf16, with the same values as the kernel forced
/// to the rule's choice.
#[test]
fn awq_gemm_prepared_wave_rule_matches_the_float64_reference() {
    use rcute_ops::awq::select::{select_awq_streamed_wave, select_awq_wgmma};
    use rcute_ops::awq::select_split::select_awq_wgmma_split;
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let (sms, cc) = (ops.gpu().sm_count() as usize, ops.gpu().compute_capability());
    let mut rng = Rng::for_test("awq_prepared_wave_rule");
    // (M, N, K, G, bias)
    let shapes = [
        (1, 64 * sms, 512, 128, true),
        (8, 64 * sms, 256, 64, false),
        (5, 64 * (sms / 2 + 1), 4096, 128, true),
    ];
    for (m, n, k, g, bias) in shapes {
        let what = format!("{m}x{n}x{k} G={g} bias={bias}");
        for e in [rcute_atom::Element::F16, rcute_atom::Element::BF16] {
            let chosen = select_awq_streamed_wave(m, n, k, sms, e);
            let got = chosen.map(|(c, s)| (c.tile[0], c.stages, c.shared_ring, s));
            assert_eq!(got, Some((8, 4, true, 1)), "{what} on {sms} SMs");
            assert!(
                select_awq_wgmma_split(m, n, k, sms, cc, e).is_none()
                    && select_awq_wgmma(m, n, k, sms, cc, e).is_none()
            );
            if e == rcute_atom::Element::F16 {
                op_matches_forced(
                    &ops,
                    &Case::<f16>::new(&ops, &mut rng, m, n, k, g, bias),
                    chosen,
                    &format!("f16 {what}"),
                );
            } else {
                op_matches_forced(
                    &ops,
                    &Case::<bf16>::new(&ops, &mut rng, m, n, k, g, bias),
                    chosen,
                    &format!("bf16 {what}"),
                );
            }
        }
        eprintln!("ok {what}");
    }
}

/// `AwqWeight::prepare` + `awq_gemm_prepared` against the float64 reference (the op's own
/// path, the prepared kernel's own configuration and every configuration forced with one
/// and with three K splits, f16 and bf16); shapes the layout cannot block and a prepared
/// weight used with another K or N are typed errors that write nothing.
#[test]
fn awq_gemm_prepared_matches_the_float64_reference() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    prepared_cases::<f16>(&ops, rcute_atom::Element::F16);
    prepared_cases::<bf16>(&ops, rcute_atom::Element::BF16);
    let mut rng = Rng::for_test("awq_prepared_bad");
    for (n, k) in [(520, 128), (64, 40)] {
        let case = Case::<f16>::new(&ops, &mut rng, 2, n, k, if k == 40 { 40 } else { 128 }, false);
        let r = AwqWeight::prepare(&ops, &case.tensors());
        assert!(matches!(r, Err(OpsError::Shape(_))), "{n}x{k}: {:?}", r.err());
    }
    let (m, n, k) = (4, 128, 256);
    let case = Case::<f16>::new(&ops, &mut rng, m, n, k, 128, false);
    let w = AwqWeight::prepare(&ops, &case.tensors()).unwrap();
    let s = ops.gpu().stream();
    let x2: CudaSlice<f16> = s.clone_htod(&vec![f16::ONE; m * 2 * k]).unwrap();
    let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); m * 2 * n]).unwrap();
    let r = ops.awq_gemm_prepared(
        &MatrixRef::new(&x2, m, 2 * k),
        &w,
        None,
        &mut MatrixMut::new(&mut out, m, n),
    );
    assert!(matches!(r, Err(OpsError::Shape(_))), "other K: {r:?}");
    let r = ops.awq_gemm_prepared(
        &MatrixRef::new(&x2, m, k),
        &w,
        None,
        &mut MatrixMut::new(&mut out, m, 2 * n),
    );
    assert!(matches!(r, Err(OpsError::Shape(_))), "other N: {r:?}");
    let r = ops.run_awq_gemm(
        &validate_awq_gemm(
            &MatrixRef::new(&x2, m, k),
            &case.tensors(),
            None,
            &MatrixMut::new(&mut out, m, n),
        )
        .unwrap(),
        Some((configs(rcute_atom::Element::F16, n)[0].prepared(), 1)),
    );
    assert!(
        matches!(r, Err(OpsError::Shape(_))),
        "prepared config on a raw weight: {r:?}"
    );
    ops.gpu().synchronize().unwrap();
    assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
}

/// Split-K sums the splits' f32 slabs in a fixed order: repeated runs of one problem give
/// the same bits (with the op's own choice and with forced split counts of every tile).
#[test]
fn awq_gemm_split_k_is_bit_identical_run_to_run() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("awq_gemm_deterministic");
    let e = rcute_atom::Element::F16;
    for (m, n, k) in [(1, 4096, 4096), (16, 768, 4096), (40, 1024, 2048)] {
        let case = Case::<f16>::new(&ops, &mut rng, m, n, k, 128, true);
        let cfgs = configs(e, n);
        let choices = [None, Some((cfgs[0], 13)), Some((cfgs[2], 5)), Some((cfgs[4], 3))];
        for forced in choices.map(Run::Fused).into_iter().chain([Run::Op]) {
            let what = match forced {
                Run::Fused(f) => format!("{m}x{n}x{k} {:?}", f.map(|(c, s)| (c.tile, s))),
                _ => format!("{m}x{n}x{k} (op)"),
            };
            let bits = |v: Vec<f16>| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
            let first = bits(case.check(&ops, forced, &what));
            for run in 1..5 {
                let again = bits(case.check(&ops, forced, &what));
                let diff = first.iter().zip(&again).filter(|(a, b)| a != b).count();
                assert_eq!(diff, 0, "{what}: run {run} differs from run 0 in {diff} elements");
            }
        }
    }
}

#[test]
fn awq_dequantize_through_ops_is_bit_exact() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("awq_dequantize_ops");
    for (k, n, g) in [(256, 64, 128), (96, 24, 96), (320, 1000, 64), (128, 2056, 32)] {
        let case = Case::<bf16>::new(&ops, &mut rng, 1, n, k, g, false);
        let s = ops.gpu().stream();
        let mut out: CudaSlice<bf16> = s.clone_htod(&vec![bf16::NAN; k * n]).unwrap();
        ops.awq_dequantize(&case.tensors(), &mut MatrixMut::new(&mut out, k, n))
            .unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        for (i, (g, w)) in got.iter().zip(&case.w).enumerate() {
            assert_eq!(g.to_bits(), bf16::from_f64(*w).to_bits(), "{k}x{n} G={g}: element {i}");
        }
    }
}

/// The K-major dequantization (the dense path's weight) is the transposed formula, bit
/// for bit, in both types; K not a multiple of 8 is a typed error that writes nothing.
#[test]
fn awq_dequantize_kmajor_is_the_bit_exact_transpose() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("awq_dequantize_kmajor");
    fn check<T: Half>(ops: &Ops, case: &Case<T>) {
        let (k, n, s) = (case.shape.k, case.shape.n, ops.gpu().stream());
        let mut out: CudaSlice<T> = s.clone_htod(&vec![T::from_f64(f64::NAN); k * n]).unwrap();
        ops.awq_dequantize_kmajor(&case.tensors(), &mut MatrixMut::new(&mut out, n, k))
            .unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        for (i, g) in got.iter().enumerate() {
            let (c, r) = (i / k, i % k);
            let want = T::from_f64(case.w[r * n + c]);
            assert!(
                g.to_f64().to_bits() == want.to_f64().to_bits(),
                "{k}x{n}: w^T[{c}][{r}] = {g:?}, want {want:?}"
            );
        }
    }
    // N / 8 = 8 and 544 (a lane's four words one 16-byte load; 544: 17 blocks of 32 words),
    // 3, 125 and 257 (word by word, the last four-word group partly outside)
    for (k, n, g) in [
        (256, 64, 128),
        (104, 24, 104),
        (320, 1000, 64),
        (128, 2056, 32),
        (512, 4352, 128),
    ] {
        check(&ops, &Case::<bf16>::new(&ops, &mut rng, 1, n, k, g, false));
        check(&ops, &Case::<f16>::new(&ops, &mut rng, 1, n, k, g, false));
    }
    let (k, n) = (100, 16);
    let case = Case::<f16>::new(&ops, &mut rng, 1, n, k, k, false);
    let s = ops.gpu().stream();
    let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); k * n]).unwrap();
    let r = ops.awq_dequantize_kmajor(&case.tensors(), &mut MatrixMut::new(&mut out, n, k));
    assert!(matches!(r, Err(OpsError::Alignment { .. })), "{r:?}");
    assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
}

const SENTINEL: f32 = 7.0;

#[test]
fn awq_bad_inputs_write_nothing() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("awq_bad_inputs");
    let (k, n) = (256, 64);
    let case = Case::<f16>::new(&ops, &mut rng, 4, n, k, 128, false);
    let s = ops.gpu().stream().clone();
    let mut out: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); 4 * n]).unwrap();
    let mut deq: CudaSlice<f16> = s.clone_htod(&vec![f16::from_f32(SENTINEL); k * n]).unwrap();
    let xb: CudaSlice<bf16> = s.alloc_zeros(4 * k).unwrap();
    let w = case.tensors();
    let x = MatrixRef::new(&case.d_x, 4, k);
    let results: Vec<(&str, Result<(), OpsError>)> = vec![
        (
            "M = 0",
            ops.awq_gemm(
                &MatrixRef::new(&case.d_x, 0, k),
                &w,
                None,
                &mut MatrixMut::new(&mut out, 0, n),
            ),
        ),
        (
            "x K",
            ops.awq_gemm(
                &MatrixRef::new(&case.d_x, 2, 128),
                &w,
                None,
                &mut MatrixMut::new(&mut out, 2, n),
            ),
        ),
        (
            "bf16 x",
            ops.awq_gemm(
                &MatrixRef::new(&xb, 4, k),
                &w,
                None,
                &mut MatrixMut::new(&mut out, 4, n),
            ),
        ),
        (
            "G = 64",
            ops.awq_gemm(
                &x,
                &AwqTensors { group: 64, ..w },
                None,
                &mut MatrixMut::new(&mut out, 4, n),
            ),
        ),
        (
            "scales shape",
            ops.awq_gemm(
                &x,
                &AwqTensors {
                    scales: MatrixRef::new(&case.d_s, 1, n),
                    ..w
                },
                None,
                &mut MatrixMut::new(&mut out, 4, n),
            ),
        ),
        (
            "x row stride of 2 bytes past a 16-byte vector",
            ops.awq_gemm(
                &MatrixRef::new(&case.d_x, 2, k).strides(k as i64 + 1, 1),
                &w,
                None,
                &mut MatrixMut::new(&mut out, 2, n),
            ),
        ),
        (
            "dequantize out shape",
            ops.awq_dequantize(&w, &mut MatrixMut::new(&mut deq, k, n - 8)),
        ),
        (
            "dequantize G = 32",
            ops.awq_dequantize(&AwqTensors { group: 32, ..w }, &mut MatrixMut::new(&mut deq, k, n)),
        ),
    ];
    for (what, r) in results {
        assert!(r.is_err(), "{what}: accepted");
        eprintln!("{what}: {}", r.unwrap_err());
    }
    ops.gpu().synchronize().unwrap();
    assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
    assert!(s.clone_dtoh(&deq).unwrap().iter().all(|v| v.to_f32() == SENTINEL));
}

/// A chain of dependent decode calls launched back to back, each call's output the next
/// one's `x`, alternating the prepared op and the unprepared one (both take the streamed
/// kernels at 1 and 16 x 4096 x 4096 on 132 SMs). Those kernels prefetch their weights
/// before their grid-dependency wait and trigger their dependents right after it, so the
/// next call's CTAs become resident during this one's tail; `x` must still be read only
/// after the wait. The chain's last output is bit-identical to the same calls with a
/// synchronization after each (bf16: the chain's growing magnitudes stay in range).
#[test]
fn chained_streamed_calls_read_the_previous_output() {
    let Some(gpu) = gpu_for_test() else { return };
    let ops = Ops::new(gpu);
    let mut rng = Rng::for_test("awq_streamed_chain");
    let (n, k, g, calls) = (4096, 4096, 128, 6);
    for m in [1, 16] {
        let case = Case::<bf16>::new(&ops, &mut rng, m, n, k, g, true);
        let pw = AwqWeight::prepare(&ops, &case.tensors()).unwrap();
        let s = ops.gpu().stream();
        let bias = case.d_b.as_ref().map(|b| VectorRef::new(b, n));
        let run = |sync: bool| -> Vec<bf16> {
            let mut a: CudaSlice<bf16> = s.alloc_zeros(m * n).unwrap();
            let mut b: CudaSlice<bf16> = s.alloc_zeros(m * n).unwrap();
            for i in 0..calls {
                let src = if i == 0 { &case.d_x } else { &a };
                let x = MatrixRef::new(src, m, k);
                let mut o = MatrixMut::new(&mut b, m, n);
                if i % 2 == 0 {
                    ops.awq_gemm_prepared(&x, &pw, bias.as_ref(), &mut o)
                } else {
                    ops.awq_gemm(&x, &case.tensors(), bias.as_ref(), &mut o)
                }
                .unwrap();
                if sync {
                    ops.gpu().synchronize().unwrap();
                }
                std::mem::swap(&mut a, &mut b);
            }
            ops.gpu().synchronize().unwrap();
            s.clone_dtoh(&a).unwrap()
        };
        let stepwise = run(true);
        assert!(
            stepwise.iter().all(|v| v.to_f64().is_finite()) && stepwise.iter().any(|v| v.to_f64() != 0.0),
            "{m} rows: the chain's output is not finite and non-zero"
        );
        for round in 0..3 {
            let chained = run(false);
            let differ = (0..m * n).filter(|&i| chained[i] != stepwise[i]).count();
            assert_eq!(
                differ, 0,
                "{m} rows, round {round}: {differ} elements differ from the synchronized chain"
            );
        }
        eprintln!("ok {m} x {n} x {k}: {calls} chained calls");
    }
}
