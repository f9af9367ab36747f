//! [`Ops`]: the handle applications keep. It owns the GPU, the loaded kernels (generated,
//! compiled through the kernel cache and loaded once per configuration) and the split-K
//! workspace.

use crate::error::{boxed, OpsError};
use crate::gemm::{check_gemm_arch, validate, GemmProblem};
use crate::memo::Memo;
use crate::select::{element, select, select_sm90, sm80_config, Choice, Selection};
use crate::stream::{ScratchPool, Uses};
use crate::tensor::{Geometry, Major as ViewMajor, MatrixMut, MatrixRef};
use cudarc::driver::CudaStream;
use rcute_kernel::gemm_sm80::{self, GemmArgs, GemmSm80Config, GeneratedGemm, Major, SplitKMode};
use rcute_kernel::gemm_sm90::{self, GemmSm90Config, GeneratedGemmSm90};
use rcute_kernel::grouped_gemm::{GeneratedGroupedGemm, GroupedGemmConfig};
use rcute_kernel::{CompileOptions, Function, Gpu, KernelCache};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A generated GEMM kernel loaded on the GPU.
#[derive(Clone)]
pub struct LoadedGemm {
    /// The generated source and its launch geometry.
    pub generated: Arc<GeneratedGemm>,
    main: Function,
    reduce: Function,
}

/// A generated SM90 GEMM kernel loaded on the GPU.
#[derive(Clone)]
pub struct LoadedGemmSm90 {
    /// The generated source and its plan.
    pub generated: Arc<GeneratedGemmSm90>,
    main: Function,
    reduce: Option<Function>,
}

impl LoadedGemmSm90 {
    /// The main kernel.
    pub fn main(&self) -> &Function {
        &self.main
    }
    /// The split-K reduction kernel (`None` for a stream-K kernel: it has none).
    pub fn reduce(&self) -> Option<&Function> {
        self.reduce.as_ref()
    }
}

/// The ops handle: one per GPU (and per stream: [`Ops::on_stream`] makes handles on other
/// streams that share everything else; see [`crate::stream`]).
#[derive(Clone)]
pub struct Ops {
    /// Where this handle's ops launch.
    pub(crate) stream: Arc<CudaStream>,
    /// What the handles of all streams share.
    pub(crate) shared: Arc<OpsShared>,
}

/// The state [`Ops`] handles of one GPU share (reached through `Deref`; its fields are
/// the crate's own).
#[doc(hidden)]
pub struct OpsShared {
    gpu: Gpu,
    gemms: Memo<GemmSm80Config, LoadedGemm>,
    gemms_sm90: Memo<GemmSm90Config, LoadedGemmSm90>,
    /// Split-K workspaces and semaphores, per stream.
    pub(crate) scratch_pool: ScratchPool,
    /// The loaded INT8 scaled-mm kernels (see [`crate::scaled_mm`]).
    pub(crate) scaled_mms: Memo<GemmSm80Config, crate::scaled_mm_kernel::LoadedScaledMm>,
    /// The same kernels by the key `run_scaled_mm` selects them with.
    pub(crate) scaled_mm_keys:
        Mutex<HashMap<crate::scaled_mm_kernel::ScaledMmKey, crate::scaled_mm_kernel::LoadedScaledMm>>,
    /// The tuning tables, read on first use (see [`crate::tuning`]).
    tuning: std::sync::OnceLock<crate::tuning::OpsTuning>,
    /// The loaded AWQ kernels (see [`crate::awq`]).
    pub(crate) awq: crate::awq::AwqKernels,
    /// The loaded MoE kernels (routing, grouped GEMMs, finalize) by kernel name.
    pub(crate) moe_units: Memo<String, Function>,
    /// The generated grouped GEMMs with their loaded kernels, by configuration: generating
    /// one takes milliseconds of host time, so it happens once, not on every call.
    pub(crate) moe_grouped: Memo<GroupedGemmConfig, (GeneratedGroupedGemm, Function)>,
    /// The SM90 grouped GEMMs, likewise.
    pub(crate) moe_grouped_sm90: Memo<GemmSm90Config, (GeneratedGemmSm90, Function)>,
}

impl std::ops::Deref for Ops {
    type Target = OpsShared;
    fn deref(&self) -> &OpsShared {
        &self.shared
    }
}

impl Ops {
    /// An ops handle on `gpu`, launching on [`Gpu::stream`].
    pub fn new(gpu: Gpu) -> Ops {
        Ops {
            stream: gpu.stream().clone(),
            shared: Arc::new(OpsShared {
                gpu,
                gemms: Memo::new(),
                gemms_sm90: Memo::new(),
                scratch_pool: ScratchPool::default(),
                scaled_mms: Memo::new(),
                scaled_mm_keys: Mutex::new(HashMap::new()),
                tuning: std::sync::OnceLock::new(),
                awq: crate::awq::AwqKernels::default(),
                moe_units: Memo::new(),
                moe_grouped: Memo::new(),
                moe_grouped_sm90: Memo::new(),
            }),
        }
    }

    /// The tuning tables this handle consults (read on first use; see [`crate::tuning`]).
    pub fn tuning(&self) -> &crate::tuning::OpsTuning {
        self.tuning.get_or_init(|| crate::tuning::OpsTuning::load(&self.gpu))
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// How many kernels (the SM80- and SM90-class GEMMs, bf16 / f16 and scaled-mm) this
    /// handle generated, compiled and loaded. Each configuration is built once, however
    /// many threads ask for it at the same time.
    pub fn kernels_built(&self) -> usize {
        self.gemms.builds()
            + self.gemms_sm90.builds()
            + self.scaled_mms.builds()
            + self.awq.builds()
            + self.moe_units.builds()
    }

    /// Generate, compile (cached) and load the kernel of `cfg` (once per configuration).
    pub fn load_gemm(&self, cfg: &GemmSm80Config) -> Result<LoadedGemm, OpsError> {
        self.gemms.get_or_try_build(cfg, || self.build_gemm(cfg))
    }

    fn build_gemm(&self, cfg: &GemmSm80Config) -> Result<LoadedGemm, OpsError> {
        let arch = self
            .gpu
            .arch()
            .ok_or_else(|| OpsError::Arch(format!("compute capability {:?}", self.gpu.compute_capability())))?;
        check_gemm_arch(self.gpu.compute_capability())?;
        let g = gemm_sm80::generate(cfg).map_err(boxed)?;
        let compiled = KernelCache::global()
            .get_or_compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(arch))
            .map_err(boxed)?;
        let module = self.gpu.load(&compiled).map_err(boxed)?;
        let main = module.function(&g.name).map_err(boxed)?;
        let reduce = module.function(&g.reduce_name).map_err(boxed)?;
        Ok(LoadedGemm {
            generated: Arc::new(g),
            main,
            reduce,
        })
    }

    /// Generate, compile (cached) and load the SM90 kernel of `cfg` (once per
    /// configuration); needs an sm_90 GPU.
    pub fn load_gemm_sm90(&self, cfg: &GemmSm90Config) -> Result<LoadedGemmSm90, OpsError> {
        self.gemms_sm90.get_or_try_build(cfg, || self.build_gemm_sm90(cfg))
    }

    fn build_gemm_sm90(&self, cfg: &GemmSm90Config) -> Result<LoadedGemmSm90, OpsError> {
        if self.gpu.compute_capability() != (9, 0) {
            return Err(OpsError::Arch(format!(
                "the SM90 GEMM needs sm_90, found {:?}",
                self.gpu.compute_capability()
            )));
        }
        let g = gemm_sm90::generate(cfg).map_err(boxed)?;
        let compiled = KernelCache::global()
            .get_or_compile(
                &g.source,
                &format!("{}.cu", g.name),
                &CompileOptions::new(rcute_kernel::Arch::Sm90a),
            )
            .map_err(boxed)?;
        let module = self.gpu.load(&compiled).map_err(boxed)?;
        let main = module.function(&g.name).map_err(boxed)?;
        let reduce = g
            .reduce_name
            .as_ref()
            .map(|r| module.function(r))
            .transpose()
            .map_err(boxed)?;
        Ok(LoadedGemmSm90 {
            generated: Arc::new(g),
            main,
            reduce,
        })
    }

    /// `D = alpha * A @ B + beta * C` (batched when the views are), with f16/bf16 inputs
    /// and f32 accumulation; `c` may be `None` when `beta == 0`, or view the same memory as
    /// `d` for an in-place update. Runs on [`Ops::stream`] and returns once launched; holds
    /// `cudarc`'s guards of the views' buffers for the launch (see [`crate::stream`]).
    ///
    /// A, B or C may be one matrix broadcast over the batch (batch 1, or batch stride 0):
    /// such problems run the SM80-class kernel (TMA cannot step by 0).
    ///
    /// # Errors
    ///
    /// Everything [`crate::validate`] rejects (its rustdoc lists each case: element types,
    /// shapes, zero and too-large sizes, batch above 65535, NaN or infinite `alpha` /
    /// `beta`, strides, overlap, bounds, alignment), then an operand on another device
    /// ([`OpsError::Device`]), a GPU older than sm_80 ([`OpsError::Arch`]) and a grid the
    /// selected kernel cannot launch ([`OpsError::TooLarge`]) — all before any launch, so
    /// the output is untouched. [`OpsError::Kernel`] reports a failed compilation or
    /// launch, [`OpsError::Capture`] split-K scratch that would have to be allocated while
    /// the stream captures a graph (see [`crate::stream`]), [`OpsError::Cuda`] a failed
    /// stream query.
    pub fn gemm(
        &self,
        a: &MatrixRef<'_>,
        b: &MatrixRef<'_>,
        c: Option<&MatrixRef<'_>>,
        d: &mut MatrixMut<'_>,
        alpha: f32,
        beta: f32,
    ) -> Result<(), OpsError> {
        let p = validate(a, b, c, d, alpha, beta)?;
        let p = self.check_gemm_devices(p)?;
        let mut uses = Uses::new(&self.stream)?;
        uses.read(a.tracked());
        uses.read(b.tracked());
        uses.read(c.and_then(|c| c.tracked()));
        uses.write(d.tracked_mut());
        self.run_gemm(&p, None)
    }

    /// The device and architecture checks of [`Ops::gemm`].
    fn check_gemm_devices<'p>(&self, p: GemmProblem<'p>) -> Result<GemmProblem<'p>, OpsError> {
        check_gemm_arch(self.gpu.compute_capability())?;
        let mut views = vec![("A", &p.a), ("B", &p.b), ("D", &p.d)];
        if let Some(c) = &p.c {
            views.insert(2, ("C", c));
        }
        self.check_devices(&views)?;
        Ok(p)
    }

    /// Every operand whose device is known is on this handle's GPU, else
    /// [`OpsError::Device`] naming the first that is not (the one device check of every op).
    pub(crate) fn check_devices(&self, views: &[(&'static str, &Geometry)]) -> Result<(), OpsError> {
        let expected = self.gpu.context().ordinal();
        for &(operand, g) in views {
            if let Some(found) = g.device.filter(|&d| d != expected) {
                return Err(OpsError::Device {
                    operand,
                    found,
                    expected,
                });
            }
        }
        Ok(())
    }

    /// Run a validated problem, optionally with a forced configuration (benchmarks and the
    /// correctness suite use this to cover every kernel). Like every `run_*` method it
    /// launches on [`Ops::stream`] but holds no `cudarc` guards (a problem keeps only the
    /// views' geometry): the caller orders the buffers' other uses (see [`crate::stream`]).
    pub fn run_gemm(&self, p: &GemmProblem, forced: Option<(&GemmSm80Config, u32)>) -> Result<(), OpsError> {
        let sel = forced.map(|(cfg, s)| {
            Choice::Sm80(Selection {
                config: cfg.clone(),
                split_k: s,
                split_k_mode: SplitKMode::Parallel,
            })
        });
        self.run_gemm_with(p, sel.as_ref())
    }

    /// Run a validated problem with a forced [`Choice`] (the kernel, and for the SM80
    /// path its split count and split-K mode), or the automatic one for `None`: the SM90
    /// kernel ([`crate::select::select_sm90`]) on sm_90 when the operands qualify, the
    /// Ampere-class kernel ([`crate::select::select`]) otherwise.
    pub fn run_gemm_with(&self, p: &GemmProblem, forced: Option<&Choice>) -> Result<(), OpsError> {
        let a_major = if p.a.major() == Some(ViewMajor::Row) {
            Major::K
        } else {
            Major::MN
        };
        let b_major = if p.b.major() == Some(ViewMajor::Col) {
            Major::K
        } else {
            Major::MN
        };
        let sel = match forced {
            Some(Choice::Sm90(cfg, split)) => return self.run_gemm_sm90(p, cfg, *split),
            Some(Choice::Sm80(s)) => s.clone(),
            None => {
                let tuned = match crate::gemm::copy_bytes(p) {
                    16 => self.tuned_gemm(p).and_then(|s| s.gemm_choice()),
                    _ => None, // tables hold fast-path kernels
                };
                if let Some(choice) = tuned {
                    let sm90_ok = crate::gemm::sm90_qualifies(self.gpu.compute_capability(), p);
                    if sm90_ok || matches!(choice, Choice::Sm80(_)) {
                        return self.run_gemm_with(p, Some(&choice));
                    }
                }
                if crate::gemm::sm90_qualifies(self.gpu.compute_capability(), p) {
                    if let Some((cfg, split)) = select_sm90(p.m, p.n, p.k, p.l, self.gpu.sm_count()) {
                        return self.run_gemm_sm90(p, &cfg, split);
                    }
                }
                select(p.m, p.n, p.k, p.l, a_major, b_major, self.gpu.sm_count())
            }
        };
        let cfg = sm80_config(p, &sel, forced.is_some())?;
        let (split_k, mode) = (sel.split_k, sel.split_k_mode);
        let loaded = self.load_gemm(&cfg)?;
        let g = &loaded.generated;
        let (m, n, k, l) = (p.m as i32, p.n as i32, p.k as i32, p.l as i32);
        check_grid(g, p, split_k.max(1), mode)?;
        let c = p.c.unwrap_or(p.d);
        let args = GemmArgs::packed(&cfg, m, n, k, l, p.a.ptr, p.b.ptr, c.ptr, p.d.ptr);
        let mut args = with_view_strides(args, p, Geometry::kernel_ld);
        args.alpha = p.alpha;
        args.beta = if p.c.is_some() { p.beta } else { 0.0 };
        args.split_k = split_k.max(1);
        args.split_k_mode = mode;
        let ws_bytes = g.workspace_bytes_mode(m, n, l, args.split_k, mode);
        let _scope = self.launch_scope();
        let mut scratch = self.scratch();
        if mode == SplitKMode::Serial && args.split_k > 1 {
            args.semaphores = scratch.semaphores(g.semaphore_count(m, n, l))?;
        }
        if ws_bytes > 0 {
            args.workspace = scratch.workspace(ws_bytes)?;
        }
        // SAFETY: `validate` checked that every view lies inside its buffer with the
        // strides and batch strides passed here, and the views borrow their buffers for
        // the duration of this call; the workspace holds `workspace_bytes`.
        unsafe { gemm_sm80::launch_split_k(&loaded.main, &loaded.reduce, g, &args) }.map_err(boxed)?;
        Ok(())
    }

    /// Run a validated problem on the SM90 kernel of `cfg` (types, C and D order taken
    /// from the views).
    fn run_gemm_sm90(&self, p: &GemmProblem, cfg: &GemmSm90Config, split_k: u32) -> Result<(), OpsError> {
        // A forced SM90 choice must meet the kernel's rules too (the majors it assumes,
        // TMA's strides): a typed error here, never a launch that reads out of bounds.
        crate::gemm::sm90_requirements(self.gpu.compute_capability(), p)?;
        let mut cfg = cfg.clone();
        cfg.ab = element(p.a.dtype)?;
        cfg.cd = element(p.d.dtype)?;
        if !(p.c.is_some() && p.beta != 0.0) {
            cfg = cfg.without_c();
        }
        let loaded = self.load_gemm_sm90(&cfg)?;
        let g = &loaded.generated;
        let (m, n, k, l) = (p.m as i32, p.n as i32, p.k as i32, p.l as i32);
        let c = p.c.unwrap_or(p.d);
        // TMA takes the views' own strides (`sm90_requirements` checked them as they are).
        let args = GemmArgs::tn(m, n, k, l, p.a.ptr, p.b.ptr, c.ptr, p.d.ptr);
        let mut args = with_view_strides(args, p, Geometry::ld);
        args.alpha = p.alpha;
        args.beta = if cfg.with_c() { p.beta } else { 0.0 };
        if !cfg.with_c() {
            args.c = 0;
        }
        args.split_k = split_k.max(1);
        let fa = g.default_fusion_args(&args).map_err(boxed)?;
        // SAFETY: `validate` checked that every view lies inside its buffer with the
        // strides and batch strides passed here; the views borrow their buffers.
        unsafe { self.launch_sm90(&loaded, args, &fa) }
    }

    /// Launch a loaded SM90 kernel with split-K (`args.split_k`), providing the workspace.
    ///
    /// # Safety
    ///
    /// `args` and `fa` must describe buffers that hold the operands, valid until the
    /// kernels finish (validated views borrowed by the caller).
    pub(crate) unsafe fn launch_sm90(
        &self,
        loaded: &LoadedGemmSm90,
        mut args: GemmArgs,
        fa: &gemm_sm90::FusionArgs,
    ) -> Result<(), OpsError> {
        let g = &loaded.generated;
        let sms = self.gpu.sm_count();
        // Split-K partials, or (stream-K) two tile slots per CTA and the zeroed tile counters.
        let ws_bytes = g
            .workspace_bytes(args.m, args.n, args.l, args.split_k)
            .max(g.stream_k_workspace_bytes(sms));
        let counter_bytes = g.stream_k_counter_bytes(sms);
        let _scope = self.launch_scope();
        let mut scratch = self.scratch();
        if ws_bytes > 0 {
            args.workspace = scratch.workspace(ws_bytes)?;
            args.workspace_bytes = ws_bytes;
        }
        if counter_bytes > 0 {
            args.semaphores = scratch.semaphores(counter_bytes.div_ceil(4))?;
            args.semaphore_bytes = counter_bytes;
        }
        // SAFETY: the caller guarantees the operands; the workspace holds `workspace_bytes`.
        unsafe {
            match &loaded.reduce {
                Some(reduce) => gemm_sm90::launch_split_k(&loaded.main, reduce, g, &args, fa, sms),
                // stream-K: no reduction kernel (a split_k > 1 is refused before the launch)
                None => gemm_sm90::launch_fused(&loaded.main, g, &args, fa, sms),
            }
        }
        .map_err(boxed)?;
        Ok(())
    }
}

/// Reject a problem whose SM80-class grid CUDA cannot launch (y or z above 65535, or a
/// parallel split-K reduction of more than `2^31 - 1` blocks), before any launch.
fn check_grid(g: &GeneratedGemm, p: &GemmProblem, split_k: u32, mode: SplitKMode) -> Result<(), OpsError> {
    let grid = g.grid_split(p.m as i32, p.n as i32, p.l as i32, split_k);
    if grid.y > 65535 || grid.z > 65535 {
        return Err(OpsError::TooLarge {
            what: "problem (the SM80-class grid exceeds 65535 CTAs in y or in z = batch x K splits)",
        });
    }
    let reduce_blocks = (p.m as u64 * p.n as u64).div_ceil(u64::from(g.reduce_threads.max(1)));
    if split_k > 1 && mode == SplitKMode::Parallel && reduce_blocks > i32::MAX as u64 {
        return Err(OpsError::TooLarge {
            what: "problem (the split-K reduction grid exceeds 2^31 - 1 blocks)",
        });
    }
    Ok(())
}

impl Ops {
    /// The stream this handle's ops launch on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// This handle on `stream` (of the same CUDA context): it shares the kernels, tuning
    /// tables and scratch of `self`; its ops run on `stream`. Cheap, so it can be made per
    /// call. See the [module docs](crate::stream) for the ordering rules.
    ///
    /// ```no_run
    /// use rcute_ops::{bf16, Gpu, MatrixMut, MatrixRef, Ops, OpsError};
    /// # fn main() -> Result<(), OpsError> {
    /// let ops = Ops::new(Gpu::detect()?.expect("a GPU"));
    /// let app = ops.gpu().context().new_stream()?; // the application's stream
    /// let a = app.alloc_zeros::<bf16>(64 * 64)?;
    /// let b = app.alloc_zeros::<bf16>(64 * 64)?;
    /// let mut d = app.alloc_zeros::<bf16>(64 * 64)?;
    /// let (av, bv) = (MatrixRef::new(&a, 64, 64), MatrixRef::new(&b, 64, 64).col_major());
    /// ops.on_stream(&app)?.gemm(&av, &bv, None, &mut MatrixMut::new(&mut d, 64, 64), 1.0, 0.0)?;
    /// let host = app.clone_dtoh(&d)?; // in order after the GEMM on `app`
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A stream of another CUDA context is an [`OpsError::Stream`].
    pub fn on_stream(&self, stream: &Arc<CudaStream>) -> Result<Ops, OpsError> {
        if stream.context().cu_ctx() != self.gpu().context().cu_ctx() {
            return Err(OpsError::Stream(format!(
                "the stream belongs to another CUDA context (device {}) than this handle (device {})",
                stream.context().ordinal(),
                self.gpu().context().ordinal()
            )));
        }
        Ok(Ops {
            stream: stream.clone(),
            shared: self.shared.clone(),
        })
    }

    /// Make this handle's stream the launch stream of the calling thread until the
    /// returned scope ends (every launcher of `rcute-kernel` submits there).
    pub(crate) fn launch_scope(&self) -> rcute_kernel::stream_scope::StreamScope {
        rcute_kernel::stream_scope::StreamScope::enter(&self.stream)
    }

    /// This handle's stream's scratch, locked for one op (see [`crate::stream`]).
    pub(crate) fn scratch(&self) -> crate::stream::Scratch<'_> {
        self.scratch_pool.lock(&self.stream)
    }
}

/// `args` with the problem's leading dimensions (`ld` of each view) and batch strides. C
/// falls back to D where the problem has none (its pointer was set that way too).
fn with_view_strides(mut args: GemmArgs, p: &GemmProblem, ld: impl Fn(&Geometry) -> i64) -> GemmArgs {
    let c = p.c.unwrap_or(p.d);
    args.lda = ld(&p.a);
    args.ldb = ld(&p.b);
    args.ldc = ld(&c);
    args.ldd = ld(&p.d);
    args.batch_stride_a = p.a.batch_stride;
    args.batch_stride_b = p.b.batch_stride;
    args.batch_stride_c = c.batch_stride;
    args.batch_stride_d = p.d.batch_stride;
    args
}
