//! The AWQ ops on [`Ops`]: `awq_dequantize` and `awq_gemm`. Kernels are generated,
//! compiled (cached) and loaded once per configuration through the same [`crate::memo::Memo`] path as
//! the GEMMs; split-K partial sums go to per-split f32 slabs in the stream's split-K
//! workspace and the tiles count their splits on its semaphores (left zeroed; see
//! [`crate::stream`]), as the GEMMs' serial split-K does. Every launch goes through one
//! function (`Ops::awq_launch`), on the handle's stream.

use super::kernels::{LoadedAwqDequantize, LoadedAwqGemm};
use super::select::awq_reordered_wins;
use super::select_checkpoint::{select_awq_checkpoint_streamed, select_awq_gemm_checkpoint};
use super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint;
use super::validate::{
    validate_awq_dequantize, validate_awq_dequantize_kmajor, validate_awq_gemm, AwqGemmProblem, AwqTensors,
    AwqWeightProblem,
};
use crate::context::Ops;
use crate::error::boxed;
use crate::error::OpsError;
use crate::stream::Uses;
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef, VectorRef};
use rcute_atom::Element;
use rcute_kernel::awq_dequantize::{self, AwqDequantizeArgs};
use rcute_kernel::awq_gemm::{self, AwqGemmArgs, AwqGemmConfig};
use rcute_kernel::launch::{KernelArgs, LaunchConfig};
use rcute_kernel::{CompileOptions, Function, KernelCache};
use std::sync::Arc;

pub(crate) fn element(d: DType) -> Result<Element, OpsError> {
    match d {
        DType::F16 => Ok(Element::F16),
        DType::BF16 => Ok(Element::BF16),
        other => Err(OpsError::DType(format!("AWQ 16-bit type {}", other.name()))),
    }
}

impl Ops {
    /// The operands are on this GPU ([`Ops::check_devices`]) and it runs the SM80-class
    /// kernels.
    pub(super) fn check_awq_devices(&self, views: &[(&'static str, &Geometry)]) -> Result<(), OpsError> {
        self.check_devices(views)?;
        crate::gemm::check_gemm_arch(self.gpu().compute_capability())
    }

    /// Launch `f` on the handle's stream: the one place the AWQ ops launch.
    ///
    /// # Safety
    /// As [`Function::launch`]: `args` match the kernel and the buffers stay valid.
    pub(crate) unsafe fn awq_launch(
        &self,
        f: &Function,
        cfg: &LaunchConfig,
        args: &KernelArgs,
    ) -> Result<(), OpsError> {
        let _scope = self.launch_scope();
        // SAFETY: forwarded from the caller.
        unsafe { f.launch(cfg, args) }.map_err(boxed)
    }

    /// Generate, compile (cached) and load the dequantization kernel for `e` (once).
    pub fn load_awq_dequantize(&self, e: Element) -> Result<LoadedAwqDequantize, OpsError> {
        self.load_awq_dequantizer(e, false)
    }

    /// The dequantization kernel for `e`, writing `[K, N]` or (`kmajor`) `[N, K]`.
    pub(crate) fn load_awq_dequantizer(&self, e: Element, kmajor: bool) -> Result<LoadedAwqDequantize, OpsError> {
        self.awq.dequantize.get_or_try_build(&(e, kmajor), || {
            let g = if kmajor {
                awq_dequantize::generate_kmajor(e)
            } else {
                awq_dequantize::generate(e)
            }
            .map_err(boxed)?;
            let function = self.load_function(&g.source, &g.name)?;
            Ok(LoadedAwqDequantize {
                generated: Arc::new(g),
                function,
            })
        })
    }

    /// Compile (cached) `source` for this GPU and load its kernel `name`.
    pub(crate) fn load_function(&self, source: &str, name: &str) -> Result<Function, OpsError> {
        let arch = self
            .gpu()
            .arch()
            .ok_or_else(|| OpsError::Arch(format!("compute capability {:?}", self.gpu().compute_capability())))?;
        let compiled = KernelCache::global()
            .get_or_compile(source, &format!("{name}.cu"), &CompileOptions::new(arch))
            .map_err(boxed)?;
        let module = self.gpu().load(&compiled).map_err(boxed)?;
        module.function(name).map_err(boxed)
    }

    /// `out = dequantize(w)`: the dense 16-bit `[K, N]` weight `(q - z) * s` of an AutoAWQ
    /// checkpoint (rounded once to the scales' type). Runs on the GPU's stream; returns once
    /// launched.
    ///
    /// # Errors
    ///
    /// Everything [`crate::awq::validate_awq_dequantize`] rejects, an operand on another
    /// device ([`OpsError::Device`]) or a GPU older than sm_80 ([`OpsError::Arch`]), all
    /// before anything is launched: `out` is untouched.
    ///
    /// ```
    /// use rcute_ops::awq::{pack_awq_matrix, AwqTensors};
    /// use rcute_ops::{f16, Gpu, MatrixMut, MatrixRef, Ops};
    /// let Some(gpu) = Gpu::detect().unwrap() else { return }; // no GPU here
    /// let ops = Ops::new(gpu);
    /// let s = ops.gpu().stream().clone();
    /// let (k, n, g) = (64, 16, 32);
    /// let q = s.clone_htod(&pack_awq_matrix(&vec![9u8; k * n], k, n).unwrap()).unwrap();
    /// let z = s.clone_htod(&pack_awq_matrix(&vec![8u8; 2 * n], 2, n).unwrap()).unwrap();
    /// let sc = s.clone_htod(&vec![f16::from_f32(0.5); 2 * n]).unwrap();
    /// let mut out = s.alloc_zeros::<f16>(k * n).unwrap();
    /// let w = AwqTensors {
    ///     qweight: MatrixRef::new(&q, k, n / 8),
    ///     scales: MatrixRef::new(&sc, 2, n),
    ///     qzeros: MatrixRef::new(&z, 2, n / 8),
    ///     group: g,
    /// };
    /// ops.awq_dequantize(&w, &mut MatrixMut::new(&mut out, k, n)).unwrap();
    /// assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == 0.5));
    /// ```
    pub fn awq_dequantize(&self, w: &AwqTensors<'_>, out: &mut MatrixMut<'_>) -> Result<(), OpsError> {
        self.dequantize_into(w, out, false)
    }

    /// The body of [`Ops::awq_dequantize`] and (`kmajor`) [`Ops::awq_dequantize_kmajor`]:
    /// validation, the buffers' uses on the stream, the device and architecture checks, then
    /// the launch; every error comes before anything is launched.
    pub(crate) fn dequantize_into(
        &self,
        w: &AwqTensors<'_>,
        out: &mut MatrixMut<'_>,
        kmajor: bool,
    ) -> Result<(), OpsError> {
        let (p, o) = if kmajor {
            validate_awq_dequantize_kmajor(w, out)?
        } else {
            validate_awq_dequantize(w, out)?
        };
        let mut uses = Uses::new(self.stream())?;
        for v in [&w.qweight, &w.scales, &w.qzeros] {
            uses.read(v.tracked());
        }
        uses.write(out.tracked_mut());
        self.check_awq_devices(&[
            ("qweight", &p.qweight),
            ("scales", &p.scales),
            ("qzeros", &p.qzeros),
            ("out", &o),
        ])?;
        // SAFETY: validation checked the shapes, density, bounds and alignment of every
        // tensor the kernel reads ([K, N/8], [K/G, N/8], [K/G, N]) and writes ([K, N], or
        // [N, K] with K a multiple of 8); the views borrow their buffers for this call.
        unsafe { self.launch_dequantize(&p, o.ptr, kmajor) }
    }

    /// Launch the dequantization of a validated weight into `out`: `[K, N]`, or `[N, K]`
    /// with the K-major kernel (`kmajor`).
    ///
    /// # Safety
    /// `out` holds `K * N` 16-bit elements, 16-byte aligned, not overlapping the inputs;
    /// with `kmajor`, `p.shape.k` is a multiple of 8.
    pub(crate) unsafe fn launch_dequantize(
        &self,
        p: &AwqWeightProblem,
        out: u64,
        kmajor: bool,
    ) -> Result<(), OpsError> {
        let loaded = self.load_awq_dequantizer(element(p.dtype)?, kmajor)?;
        let g = &loaded.generated;
        let args = AwqDequantizeArgs {
            qweight: p.qweight.ptr,
            qzeros: p.qzeros.ptr,
            scales: p.scales.ptr,
            out,
            k: p.shape.k as i32,
            n: p.shape.n as i32,
            group: p.shape.group as i32,
        };
        // SAFETY: forwarded from the caller; the weight's views were validated.
        unsafe { self.awq_launch(&loaded.function, &g.launch_config(&args), &g.args(&args)) }
    }
}

impl Ops {
    /// Generate, compile (cached) and load the AWQ GEMM of `cfg` (once per configuration).
    pub fn load_awq_gemm(&self, cfg: &AwqGemmConfig) -> Result<LoadedAwqGemm, OpsError> {
        self.awq.gemm.get_or_try_build(cfg, || {
            let g = awq_gemm::generate(cfg).map_err(boxed)?;
            let function = self.load_function(&g.source, &g.name)?;
            Ok(LoadedAwqGemm {
                generated: Arc::new(g),
                function,
            })
        })
    }

    /// `out = x @ dequantize(w) (+ bias)` on AutoAWQ's checkpoint tensors as they are:
    /// `x [M, K]` f16 or bf16 (the scales' type), f32 accumulation, `out [M, N]` rounded
    /// once. The path follows the shape: first, on sm_90, the SM90 mixed-input kernel on
    /// the checkpoint's words (the prepared op's wgmma choice with the checkpoint flag)
    /// where [`super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint`] takes it and
    /// `x` and `qweight` fit its TMA maps; else the fused int4 kernel (the
    /// register-streamed kernel on the checkpoint's words where
    /// [`super::select_checkpoint::select_awq_checkpoint_streamed`] takes it, ahead of the
    /// tuning tables; else a tuning table's entry or the configuration of
    /// [`super::select_checkpoint::select_awq_gemm_checkpoint`]), or for prefill sizes on sm_90 the reordered
    /// path (`qweight` reordered into stream scratch + the SM90 mixed-input kernel:
    /// [`super::reordered`], chosen by [`super::select::awq_reordered_wins`] for an `x` fit
    /// for its TMA map: 16-byte aligned, row-major, a row pitch of a multiple of 8
    /// elements), else the dense path ([`super::dense`], chosen by
    /// [`super::select::awq_dense_wins`]). Runs on the GPU's stream, with no host
    /// synchronization on any path; returns once launched.
    ///
    /// # Errors
    ///
    /// Everything [`crate::awq::validate_awq_gemm`] rejects (M = 0 included), an operand
    /// on another device ([`OpsError::Device`]), a GPU older than sm_80
    /// ([`OpsError::Arch`]) and a grid CUDA cannot launch ([`OpsError::TooLarge`]), all
    /// before anything is launched: `out` is untouched. On the dense and reordered paths,
    /// scratch (the `K x N` weight or the reordered words, the GEMM's split-K workspace)
    /// that would have to grow while the stream captures a graph is an
    /// [`OpsError::Capture`]: run the op once before capturing.
    ///
    /// ```
    /// use rcute_ops::awq::{pack_awq_matrix, AwqTensors};
    /// use rcute_ops::{f16, Gpu, MatrixMut, MatrixRef, Ops, VectorRef};
    /// let Some(gpu) = Gpu::detect().unwrap() else { return }; // no GPU here
    /// let ops = Ops::new(gpu);
    /// let s = ops.gpu().stream().clone();
    /// let (m, k, n, g) = (3, 64, 16, 32);
    /// // q = 9, z = 8, s = 0.5: every weight is 0.5; x = 1; bias = 1.
    /// let q = s.clone_htod(&pack_awq_matrix(&vec![9u8; k * n], k, n).unwrap()).unwrap();
    /// let z = s.clone_htod(&pack_awq_matrix(&vec![8u8; 2 * n], 2, n).unwrap()).unwrap();
    /// let sc = s.clone_htod(&vec![f16::from_f32(0.5); 2 * n]).unwrap();
    /// let x = s.clone_htod(&vec![f16::ONE; m * k]).unwrap();
    /// let b = s.clone_htod(&vec![f16::ONE; n]).unwrap();
    /// let mut out = s.alloc_zeros::<f16>(m * n).unwrap();
    /// let w = AwqTensors {
    ///     qweight: MatrixRef::new(&q, k, n / 8),
    ///     scales: MatrixRef::new(&sc, 2, n),
    ///     qzeros: MatrixRef::new(&z, 2, n / 8),
    ///     group: g,
    /// };
    /// let bias = VectorRef::new(&b, n);
    /// ops.awq_gemm(&MatrixRef::new(&x, m, k), &w, Some(&bias), &mut MatrixMut::new(&mut out, m, n)).unwrap();
    /// assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == 33.0));
    /// ```
    pub fn awq_gemm(
        &self,
        x: &MatrixRef<'_>,
        w: &AwqTensors<'_>,
        bias: Option<&VectorRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let p = validate_awq_gemm(x, w, bias, out)?;
        let mut uses = Uses::new(self.stream())?;
        for v in [x, &w.qweight, &w.scales, &w.qzeros] {
            uses.read(v.tracked());
        }
        uses.read(bias.and_then(|b| b.tracked()));
        uses.write(out.tracked_mut());
        let (m, n, k, cc) = (p.m, p.w.shape.n, p.w.shape.k, self.gpu().compute_capability());
        let e = element(p.w.dtype).ok();
        if let Some(wgmma) = e.and_then(|e| self.checkpoint_wgmma(&p, e)) {
            return self.run_awq_gemm(&p, Some(wgmma));
        }
        if x_fits_wgmma_tma(&p.x) && awq_reordered_wins(m, n, k, self.gpu().sm_count() as usize, cc) {
            return self.run_awq_gemm_reordered(&p, None);
        }
        if super::select::awq_dense_wins(m, n, k, cc) {
            return self.run_awq_gemm_dense(&p);
        }
        // The decode rules' domain before the tuning tables: their entries were measured
        // among the `cp.async` configurations only (the prepared path reads no table either).
        let decode = e.and_then(|e| self.checkpoint_decode(&p, e));
        self.run_awq_gemm(&p, decode.or_else(|| self.awq_tuned(&p)))
    }

    /// The SM90 mixed-input kernel on the checkpoint's words where
    /// [`select_awq_wgmma_checkpoint`] takes the shape and `x` and `qweight` fit its TMA
    /// maps (16-byte aligned bases, a row-major `x` with a row pitch of a multiple of 8
    /// elements).
    fn checkpoint_wgmma(&self, p: &AwqGemmProblem<'_>, e: rcute_atom::Element) -> Option<(AwqGemmConfig, u32)> {
        let (m, n, k, sms) = (p.m, p.w.shape.n, p.w.shape.k, self.gpu().sm_count() as usize);
        let tma = x_fits_wgmma_tma(&p.x) && p.w.qweight.ptr.is_multiple_of(16);
        tma.then(|| select_awq_wgmma_checkpoint(m, n, k, sms, self.gpu().compute_capability(), e))
            .flatten()
    }

    /// The unprepared op's fused choice before the tables and the fallback rule: the
    /// wgmma kernel on the checkpoint's words as `checkpoint_wgmma` takes it, else the streamed rules of
    /// [`select_awq_checkpoint_streamed`].
    fn checkpoint_decode(&self, p: &AwqGemmProblem<'_>, e: rcute_atom::Element) -> Option<(AwqGemmConfig, u32)> {
        let (m, n, k, sms) = (p.m, p.w.shape.n, p.w.shape.k, self.gpu().sm_count() as usize);
        self.checkpoint_wgmma(p, e)
            .or_else(|| select_awq_checkpoint_streamed(m, n, k, sms, e))
    }

    /// The fused configuration a tuning table holds for `p` (written by `rcute tune awq`,
    /// looked up, or tuned on a miss, as `RCUTE_TUNING` says: [`Ops::tuned_awq`]), or
    /// `None` for the rules. Prefill sizes where the dense path wins never get here.
    fn awq_tuned(&self, p: &AwqGemmProblem<'_>) -> Option<(AwqGemmConfig, u32)> {
        Some(self.tuned_awq(p)?.config(element(p.w.dtype).ok()?))
    }

    /// Run a validated problem on the fused kernel with the configuration and requested K
    /// splits of `forced`, or the shape's choice for `None` (tests and benchmarks cover
    /// every kernel this way). A streamed configuration with K not a multiple of 16 is an
    /// [`OpsError::Shape`]. The problem's `qweight` is AutoAWQ's: a configuration with
    /// `prepared` set is an [`OpsError::Shape`] here (prepared weights run through
    /// [`Ops::run_awq_gemm_prepared`]).
    pub fn run_awq_gemm(&self, p: &AwqGemmProblem<'_>, forced: Option<(AwqGemmConfig, u32)>) -> Result<(), OpsError> {
        if forced.is_some_and(|(c, _)| c.prepared) {
            return Err(OpsError::Shape(
                "a prepared configuration needs the prepared weight: use run_awq_gemm_prepared".into(),
            ));
        }
        self.run_awq_fused(p, forced)
    }

    /// [`Ops::run_awq_gemm`] without the layout check: `forced` with `prepared` set needs
    /// the problem's `qweight` in the prepared layout.
    pub(crate) fn run_awq_fused(
        &self,
        p: &AwqGemmProblem<'_>,
        forced: Option<(AwqGemmConfig, u32)>,
    ) -> Result<(), OpsError> {
        self.check_awq_devices(&p.views())?;
        let e = element(p.w.dtype)?;
        let (m, n, k, sms) = (p.m, p.w.shape.n, p.w.shape.k, self.gpu().sm_count() as usize);
        let (mut cfg, splits) = forced
            .or_else(|| self.checkpoint_decode(p, e))
            .unwrap_or_else(|| select_awq_gemm_checkpoint(m, n, k, sms, e));
        cfg.element = e;
        check_fused_operands(p, &mut cfg, forced.is_some(), self.gpu().compute_capability())?;
        if cfg.wgmma && !cfg.split_k && splits > 1 {
            return Err(OpsError::Shape(format!(
                "the AWQ wgmma kernel without split_k runs one K split, {splits} requested (AwqGemmConfig::split_k splits K)"
            )));
        }
        let loaded = self.load_awq_gemm(&cfg)?;
        let g = &loaded.generated;
        let (m, n, k) = (m as i32, n as i32, k as i32);
        let (_, splits) = g.split_plan(k, splits.max(1) as i32);
        let lc = g.launch_config_sms(m, n, splits, self.gpu().compute_capability(), self.gpu().sm_count());
        if lc.grid.y > 65535 || lc.grid.z > 65535 {
            return Err(OpsError::TooLarge {
                what: "problem (the AWQ GEMM grid exceeds 65535 CTAs in y = M tiles)",
            });
        }
        let mut args = AwqGemmArgs {
            x: p.x.ptr,
            qweight: p.w.qweight.ptr,
            scales: p.w.scales.ptr,
            qzeros: p.w.qzeros.ptr,
            bias: p.bias.map_or(0, |b| b.ptr),
            out: p.out.ptr,
            m,
            n,
            k,
            group: p.w.shape.group as i32,
            ldx: p.x.row_stride,
            ldo: p.out.row_stride,
            splits,
            ..AwqGemmArgs::default()
        };
        // the prepared streamed kernels: L2 prefetch of the first steps before the wait and
        // an early trigger (the checkpoint-word kernel measured slower with them: see
        // super::prefetch)
        let pf = super::prefetch::AwqPrefetch::from_env();
        if cfg.prepared && pf.prefetch() {
            args.prefetch_steps = super::prefetch::steps_override().unwrap_or(g.prefetch_steps());
        }
        args.early_trigger = cfg.prepared && pf.trigger();
        let ws_bytes = g.workspace_bytes(m, n, splits);
        // Held across the launch: another op on this stream cannot take the scratch meanwhile.
        let mut scratch = self.scratch();
        if splits > 1 {
            args.semaphores = scratch.semaphores(g.semaphore_count(m, n))?;
            args.workspace = scratch.workspace(ws_bytes)?;
        }
        let kargs = g.launch_args(&args).map_err(boxed)?;
        // SAFETY: validation checked every view's shape, bounds, strides and alignment
        // against what the kernel reads (x [M, K] with ldx, qweight, scales, qzeros, bias
        // [N]) and writes (out [M, N] with ldo); the workspace holds `workspace_bytes` (the
        // [splits, M, N] f32 slabs) and the semaphores `semaphore_count` zeroed ints; the
        // views borrow their buffers; the wgmma kernel's TMA map of x covers [M, K] with
        // ldx (checked 16-byte aligned above).
        unsafe { self.awq_launch(&loaded.function, &lc, &kargs) }
    }
}

/// Whether the SM90 wgmma kernels' TMA map can read `x` (16-bit elements): a 16-byte
/// aligned base, row-major, a row pitch of a multiple of 8 elements (16 bytes). The rules
/// choose those kernels only for such an `x`; a forced wgmma configuration with another is
/// refused by `check_fused_operands`.
pub(super) fn x_fits_wgmma_tma(x: &Geometry) -> bool {
    x.ptr.is_multiple_of(16) && x.row_stride % 8 == 0 && x.col_stride == 1
}

/// What the wgmma kernel on the checkpoint's words (`AwqGemmConfig::wgmma_checkpoint`)
/// needs beyond the other wgmma kernels: whole k16 steps and 64-column blocks (K a multiple
/// of 16, N of 64: [`OpsError::Shape`]) and a 16-byte aligned `qweight` for its TMA map
/// ([`OpsError::Alignment`]).
fn check_checkpoint_wgmma(p: &AwqGemmProblem<'_>) -> Result<(), OpsError> {
    let (k, n) = (p.w.shape.k, p.w.shape.n);
    if !k.is_multiple_of(16) || !n.is_multiple_of(64) {
        return Err(OpsError::Shape(format!(
            "the AWQ wgmma kernel on the checkpoint's words needs K a multiple of 16 and N of 64, got K = {k}, N = {n}"
        )));
    }
    if !p.w.qweight.ptr.is_multiple_of(16) {
        return Err(OpsError::Alignment {
            operand: "qweight",
            detail: format!(
                "the AWQ wgmma kernel loads qweight by TMA: base {:#x} must be 16-byte aligned",
                p.w.qweight.ptr
            ),
        });
    }
    Ok(())
}

/// What a fused AWQ kernel needs of its operands beyond [`super::validate`]'s format checks,
/// checked before anything is launched (the reordered path calls it before its reorder
/// launch too): K a multiple of 16 for the streamed kernels (G = K allows K = 8 mod 16),
/// sm_90 for the wgmma and bulk kernels, the wgmma kernel's TMA map of `x` (16-byte aligned
/// base and row pitch), and 16-byte aligned `qweight` and `qzeros` for the 16-byte copies
/// (`b_vector_words == 4`, every prepared and bulk kernel). Where those copies are
/// misaligned, the rules' own choice (`forced` false, checkpoint words) falls back to 4-byte
/// copies in `cfg`; a forced or prepared configuration is refused.
pub(super) fn check_fused_operands(
    p: &AwqGemmProblem<'_>,
    cfg: &mut AwqGemmConfig,
    forced: bool,
    cc: (u32, u32),
) -> Result<(), OpsError> {
    let k = p.w.shape.k;
    if cfg.streamed && !k.is_multiple_of(16) {
        return Err(OpsError::Shape(format!(
            "the streamed AWQ kernels need K a multiple of 16, got {k}"
        )));
    }
    if (cfg.wgmma || cfg.bulk) && cc != (9, 0) {
        let kernel = if cfg.wgmma {
            "wgmma kernel (TMA, RS wgmma)"
        } else {
            "bulk-producer kernel (cp.async.bulk, mbarriers)"
        };
        return Err(OpsError::Arch(format!("the AWQ {kernel} needs sm_90, not {cc:?}")));
    }
    // x is row-major (validated): the TMA test is its base and row pitch
    if cfg.wgmma && !x_fits_wgmma_tma(&p.x) {
        return Err(OpsError::Alignment {
            operand: "x",
            detail: format!(
                "the AWQ wgmma kernel loads x by TMA: base {:#x} and row pitch {} elements must be 16-byte multiples",
                p.x.ptr, p.x.row_stride
            ),
        });
    }
    if cfg.wgmma && !cfg.prepared {
        check_checkpoint_wgmma(p)?;
    }
    if cfg.b_vector_words == 4 {
        let misaligned = [("qweight", p.w.qweight.ptr), ("qzeros", p.w.qzeros.ptr)]
            .into_iter()
            .find(|&(_, ptr)| !ptr.is_multiple_of(16));
        match misaligned {
            Some(_) if !forced && !cfg.prepared => cfg.b_vector_words = 1,
            Some((operand, ptr)) => {
                return Err(OpsError::Alignment {
                    operand,
                    detail: format!("this AWQ kernel copies {operand} in 16-byte units: address {ptr:#x}"),
                })
            }
            None => {}
        }
    }
    if cfg.b_vector_words == 4 && !(p.w.shape.n / 8).is_multiple_of(4) {
        return Err(OpsError::Alignment {
            operand: "qweight",
            detail: format!(
                "16-byte qweight copies need N / 8 = {} to be a multiple of 4",
                p.w.shape.n / 8
            ),
        });
    }
    Ok(())
}
