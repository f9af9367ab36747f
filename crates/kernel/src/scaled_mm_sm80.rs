//! The INT8 scaled GEMM on the Ampere class (and Turing): vLLM's / InfiniOP's `scaled_mm`,
//! `D = convert(float(A @ B) * a_scale * b_scale (+ bias[n]))`, with `s8` A (`M x K`,
//! row-major) and B (`K x N`, column-major: both K-major, "TN"), exact `s32` accumulation and
//! f16 / bf16 row-major D, batched over `L`.
//!
//! [`generate`] builds one translation unit from the shared pieces of [`crate::gemm_sm80`]:
//!
//! * the same mainloop (`mainloop_stmts`) on an `s8` [`Sm80Mainloop`] plan: 16-byte
//!   `cp.async` vectors of 16 elements, `Sw<B,4,3>` shared-memory atoms, `ldmatrix.x4` and
//!   `mma.sync.m16n8k32.s32.s8.s8.s32` (IMMA) over `BK / 32` k-blocks;
//! * the same shared-memory staged epilogue (`staged_epilogue`), with `s32` staging and an
//!   `s32` split-K workspace, whose per-element operation is the visit function of a
//!   [`Fusion`] (an epilogue visitor tree): by default [`Fusion::scaled_mm`] (a scalar or
//!   per-row `a_scale`, a scalar or per-column `b_scale`, optionally a bias of D's type). The
//!   fusion sees `(float)acc` of the *complete* `s32` sum: with split-K the partial sums are
//!   added as `s32` (serial: in the workspace, in split order; parallel: in the reduction
//!   kernel `<name>_splitk_reduce`) before the fusion runs once per element, so scales and
//!   bias are applied exactly once.
//!
//! [`ScaledMmTarget::Turing`] generates the `sm_75` variant: Turing has no `cp.async`, so the
//! mainloop loads the next tile into registers (16-byte `ld.global.nc`) while it multiplies
//! the current one and stores them to shared memory after the tile's last k-block
//! (CUTLASS's two-stage SM75 pipeline), and each `m16n8k32` step is issued as four
//! `mma.sync.m8n8k16.s32.s8.s8.s32` (the `m16n8k32` fragments are, register for register,
//! those of 2 x 2 `m8n8k16` atoms). f16 output only (as in InfiniOP's SM75 dispatch). The
//! same source also compiles for newer GPUs (the instructions exist there), which is how it
//! is tested on hardware without a Turing GPU.
//!
//! Alignment rules ([`ScaledMmArgs::validate`]): A and B are read in 16-byte vectors along
//! K, so `K`, `lda`, `ldb` and the batch strides of A and B must be multiples of 16 elements
//! and A, B 16-byte aligned. M and N are arbitrary (ragged edges are predicated: the last
//! vectors zero-fill, the last outputs are not stored); D is stored in 16-byte vectors
//! where `ldd`, its batch stride and address allow, element-wise otherwise.
//!
//! ```
//! use rcute_kernel::scaled_mm_sm80::{generate, ScaleKind, ScaledMmSm80Config};
//! use rcute_atom::Element;
//! let cfg = ScaledMmSm80Config::new(Element::BF16, ScaleKind::PerRow, ScaleKind::PerCol, true, [128, 128, 64], [2, 2])
//!     .unwrap();
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.name, "rc_scaledmm_sm80_s8_bf16_rowcol_bias_bf16_128x128x64_s4_w2x2");
//! assert!(g.source.contains("rc_mma_m16n8k32_s32_s8_s8_s32"));
//! let names: Vec<String> = g.fusion_params.iter().map(|p| p.name.clone()).collect();
//! assert_eq!(names, ["a_scale", "b_scale", "bias"]);
//! ```

use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit, UINTPTR_FOR_NVRTC};
use crate::gemm_sm80::{
    c, d, dc, e, grid_doc, if_, mainloop_stmts, smem_fn, staged_epilogue, EpilogueOp, G2sMode, MainloopEmit,
    SplitKMode, REDUCE_THREADS, SEMAPHORE_HELPERS, TICKET_SMEM,
};
use crate::launch::{Dim3, Function, KernelArgs, LaunchConfig, LaunchError};
use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::mma_sm80::mma_sync_m8n8k16;
use rcute_collective::epilogue::convert_from_f32;
use rcute_collective::fusion::{FusionCode, FusionError, FusionParam};
use rcute_collective::{
    EpilogueConfig, EpilogueError, PlanError, Sm80Mainloop, Sm80MainloopConfig, SmemEpilogue, StorageOrder,
    DEFAULT_SMEM_BUDGET,
};

pub use rcute_atom::Element;
pub use rcute_collective::{Fusion, FusionArgs, ScaleKind};

/// The shared memory a Turing CTA may use (64 KiB, the opt-in maximum of sm_75).
pub const TURING_SMEM_BUDGET: usize = 64 * 1024;

/// The GPU family a scaled-mm kernel is generated for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScaledMmTarget {
    /// sm_80, sm_86, sm_89 (and sm_90 until its `wgmma` path exists): `cp.async`
    /// multistage pipeline, `mma.sync.m16n8k32`.
    #[default]
    Ampere,
    /// sm_75: register-staged two-stage pipeline, four `mma.sync.m8n8k16` per `m16n8k32`
    /// step; f16 output only.
    Turing,
}

impl ScaledMmTarget {
    /// `"sm80"` / `"sm75"` (the tag in kernel names).
    pub fn tag(self) -> &'static str {
        match self {
            ScaledMmTarget::Ampere => "sm80",
            ScaledMmTarget::Turing => "sm75",
        }
    }
}

/// The configuration of one generated scaled-mm kernel (compile-time choices; sizes,
/// strides, batch, split-K and the fusion's pointers are run-time arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct ScaledMmSm80Config {
    /// Element type of D (`f16` or `bf16`; `f16` only for [`ScaledMmTarget::Turing`]).
    pub out: Element,
    /// The epilogue: a fusion tree that reads no source C (its visit function gets
    /// `(float)acc`, `c = 0`, and `(m, n, l)`). Normally [`Fusion::scaled_mm`].
    pub fusion: Fusion,
    /// CTA tile `(BM, BN, BK)`; `BK` a multiple of 32.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Pipeline stages (`None`: as many as fit, at most 4; Turing: 2).
    pub stages: Option<usize>,
    /// log2 of the rasterization swizzle (at most 5).
    pub raster_swizzle: u32,
    /// Shared memory budget of the mainloop stages per CTA, in bytes.
    pub smem_budget: usize,
    /// The GPU family.
    pub target: ScaledMmTarget,
}

impl Eq for ScaledMmSm80Config {}

impl std::hash::Hash for ScaledMmSm80Config {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (
            self.out,
            self.tile,
            self.warps,
            self.stages,
            self.raster_swizzle,
            self.smem_budget,
            self.target,
        )
            .hash(h);
        (self.fusion.name(), self.fusion.describe()).hash(h);
    }
}

impl ScaledMmSm80Config {
    /// The `scaled_mm` epilogue ([`Fusion::scaled_mm`]: `a_scale` [`ScaleKind::Scalar`] or
    /// [`ScaleKind::PerRow`], `b_scale` [`ScaleKind::Scalar`] or [`ScaleKind::PerCol`], a
    /// bias of type `out` when `bias`) on the Ampere target, automatic stages, no
    /// rasterization swizzle. A scale kind that does not apply to its operand is a
    /// [`FusionError::ScaleKind`].
    pub fn new(
        out: Element,
        a_scale: ScaleKind,
        b_scale: ScaleKind,
        bias: bool,
        tile: [i64; 3],
        warps: [i64; 2],
    ) -> Result<ScaledMmSm80Config, ScaledMmError> {
        let fusion = Fusion::scaled_mm(a_scale, b_scale, bias.then_some(out))?;
        Ok(ScaledMmSm80Config {
            out,
            fusion,
            tile,
            warps,
            stages: None,
            raster_swizzle: 0,
            smem_budget: DEFAULT_SMEM_BUDGET,
            target: ScaledMmTarget::Ampere,
        })
    }

    /// The same kernel with another fusion (any tree that reads no source C).
    pub fn with_fusion(mut self, fusion: Fusion) -> ScaledMmSm80Config {
        self.fusion = fusion;
        self
    }

    /// The Turing (`sm_75`) variant: two stages, the 64 KiB budget.
    pub fn turing(mut self) -> ScaledMmSm80Config {
        self.target = ScaledMmTarget::Turing;
        self.stages = Some(2);
        self.smem_budget = TURING_SMEM_BUDGET;
        self
    }

    /// The mainloop configuration (`s8 x s8 -> s32`, both K-major).
    pub fn mainloop(&self) -> Sm80MainloopConfig {
        Sm80MainloopConfig {
            stages: self.stages,
            smem_budget: self.smem_budget,
            ..Sm80MainloopConfig::s8_tn(self.tile, self.warps)
        }
    }
}

/// Why a scaled-mm configuration cannot be generated or a launch is refused.
#[derive(Debug, thiserror::Error)]
pub enum ScaledMmError {
    /// The mainloop builder refused the configuration.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The epilogue refused D's type.
    #[error(transparent)]
    Epilogue(#[from] EpilogueError),
    /// The fusion (or its arguments) was refused.
    #[error(transparent)]
    Fusion(#[from] FusionError),
    /// Another configuration problem.
    #[error("invalid scaled-mm configuration: {0}")]
    Config(String),
    /// A problem size, leading dimension or split count is invalid.
    #[error("invalid scaled-mm arguments: {0}")]
    Shape(String),
    /// An alignment rule is broken (see the module documentation).
    #[error("alignment: {0}")]
    Alignment(String),
    /// The function passed to a launch helper is not this kernel.
    #[error("function {got:?} is not {expected:?}")]
    WrongFunction {
        /// The expected kernel name.
        expected: String,
        /// The function's name.
        got: String,
    },
    /// The launch failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// A generated scaled-mm kernel: its source and launch facts.
#[derive(Clone, Debug)]
pub struct GeneratedScaledMm {
    /// The main kernel's name (also the name of the unit).
    pub name: String,
    /// The parallel split-K reduction kernel (`<name>_splitk_reduce`), in the same unit.
    pub reduce_name: String,
    /// The CUDA C++ translation unit (both kernels).
    pub source: String,
    /// Threads per CTA of the main kernel.
    pub threads: u32,
    /// Dynamic shared memory per CTA of the main kernel (mainloop / epilogue union plus
    /// the serial split-K ticket).
    pub smem_bytes: u32,
    /// `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Threads per CTA of the reduction kernel.
    pub reduce_threads: u32,
    /// The configuration (with `stages` resolved).
    pub config: ScaledMmSm80Config,
    /// The mainloop plan.
    pub plan: Sm80Mainloop,
    /// The shared-memory staged epilogue.
    pub epilogue: SmemEpilogue,
    /// The fields of the fusion's parameter struct (the last kernel parameter of both
    /// kernels), in order; [`ScaledMmArgs::fusion`] sets them by name.
    pub fusion_params: Vec<FusionParam>,
}

/// Run-time arguments of one launch. Pointers are device addresses. A `(m,k)` is at
/// `m*lda + k`, B `(k,n)` at `n*ldb + k`, D `(m,n)` at `m*ldd + n`; batch `l` adds
/// `l * batch_stride_*` elements.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaledMmArgs {
    /// Rows of A and D.
    pub m: i32,
    /// Columns of B and D.
    pub n: i32,
    /// The reduction extent (a multiple of 16).
    pub k: i32,
    /// Batch count.
    pub l: i32,
    /// A (`s8`).
    pub a: u64,
    /// B (`s8`).
    pub b: u64,
    /// D.
    pub d: u64,
    /// Leading dimension of A, in elements.
    pub lda: i64,
    /// Leading dimension of B.
    pub ldb: i64,
    /// Leading dimension of D.
    pub ldd: i64,
    /// Elements between batches of A (0 broadcasts one A).
    pub batch_stride_a: i64,
    /// Elements between batches of B.
    pub batch_stride_b: i64,
    /// Elements between batches of D.
    pub batch_stride_d: i64,
    /// K splits (1 = none).
    pub split_k: u32,
    /// How the splits are combined (with `split_k > 1`).
    pub split_k_mode: SplitKMode,
    /// `s32` workspace of [`GeneratedScaledMm::workspace_bytes`] bytes (split-K only).
    pub workspace: u64,
    /// Serial split-K: [`GeneratedScaledMm::semaphore_count`] zeroed `int`s (left zeroed
    /// by every completed launch).
    pub semaphores: u64,
    /// The fusion's arguments (for [`Fusion::scaled_mm`]: pointers `a_scale`, `b_scale`,
    /// and `bias` when present).
    pub fusion: FusionArgs,
}

impl ScaledMmArgs {
    /// Densely packed A (`lda = K`), B (`ldb = K`) and D (`ldd = N`), no split-K.
    #[allow(clippy::too_many_arguments)]
    pub fn packed(m: i32, n: i32, k: i32, l: i32, a: u64, b: u64, d: u64, fusion: FusionArgs) -> ScaledMmArgs {
        let (m64, n64, k64) = (m as i64, n as i64, k as i64);
        ScaledMmArgs {
            m,
            n,
            k,
            l,
            a,
            b,
            d,
            lda: k64,
            ldb: k64,
            ldd: n64,
            batch_stride_a: m64 * k64,
            batch_stride_b: n64 * k64,
            batch_stride_d: m64 * n64,
            split_k: 1,
            split_k_mode: SplitKMode::Parallel,
            workspace: 0,
            semaphores: 0,
            fusion,
        }
    }

    /// Check the arguments against the generated kernel's rules (also packs the fusion's
    /// arguments, which checks their names, kinds and pointers).
    pub fn validate(&self, g: &GeneratedScaledMm) -> Result<(), ScaledMmError> {
        let shape = |s: String| Err(ScaledMmError::Shape(s));
        let align = |s: String| Err(ScaledMmError::Alignment(s));
        if self.m < 1 || self.n < 1 || self.l < 1 || self.k < 0 {
            return shape(format!(
                "need M, N, L >= 1 and K >= 0, got M={} N={} K={} L={}",
                self.m, self.n, self.k, self.l
            ));
        }
        let (n, k) = (self.n as i64, self.k as i64);
        for (name, ld, min) in [("lda", self.lda, k), ("ldb", self.ldb, k), ("ldd", self.ldd, n)] {
            if ld < min.max(1) {
                return shape(format!("{name}={ld} is smaller than {}", min.max(1)));
            }
        }
        if self.d == 0 || (self.k > 0 && (self.a == 0 || self.b == 0)) {
            return shape("null A, B or D".into());
        }
        if self.l > 1 && self.batch_stride_d < self.m as i64 * self.ldd {
            return shape(format!("batch_stride_d={} overlaps batches", self.batch_stride_d));
        }
        if self.batch_stride_a < 0 || self.batch_stride_b < 0 {
            return shape("negative batch stride".into());
        }
        let vec = 16;
        if k % vec != 0 {
            return align(format!(
                "K={k} must be a multiple of {vec} (16-byte s8 vectors along K)"
            ));
        }
        for (name, v) in [
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("batch_stride_a", self.batch_stride_a),
            ("batch_stride_b", self.batch_stride_b),
        ] {
            if v % vec != 0 {
                return align(format!(
                    "{name}={v} must be a multiple of {vec} elements (16-byte vectors)"
                ));
            }
        }
        if self.a % 16 != 0 || self.b % 16 != 0 {
            return align("A and B must be 16-byte aligned".into());
        }
        if self.d % g.config.out.bytes() as u64 != 0 {
            return align("D must be aligned to its element size".into());
        }
        if self.split_k < 1 {
            return shape("split_k must be at least 1".into());
        }
        if self.split_k > 1 && (self.workspace == 0 || self.workspace % 16 != 0) {
            return shape("split_k > 1 needs a 16-byte aligned s32 workspace".into());
        }
        if self.split_k > 1
            && self.split_k_mode == SplitKMode::Serial
            && (self.semaphores == 0 || self.semaphores % 4 != 0)
        {
            return shape("serial split-K needs a zeroed, 4-byte aligned semaphore array".into());
        }
        let grid = g.grid_split(self.m, self.n, self.l, self.split_k);
        if grid.y > 65535 || grid.z > 65535 {
            return shape(format!("grid {grid:?} exceeds the 65535 limit in y or z"));
        }
        self.fusion.pack(&g.config.fusion)?;
        Ok(())
    }
}

impl GeneratedScaledMm {
    /// The grid with `split_k` K splits: x = `tiles_m << r`, y = `ceil(tiles_n / 2^r)`,
    /// z = `L * split_k` (r = `raster_swizzle`).
    pub fn grid_split(&self, m: i32, n: i32, l: i32, split_k: u32) -> Dim3 {
        let r = self.config.raster_swizzle;
        let tm = (m.max(1) as i64 + self.tile[0] - 1) / self.tile[0];
        let tn = (n.max(1) as i64 + self.tile[1] - 1) / self.tile[1];
        Dim3::new(
            (tm << r) as u32,
            ((tn + (1 << r) - 1) >> r) as u32,
            (l.max(1) as u32) * split_k.max(1),
        )
    }

    /// K tiles each split handles: `ceil(ceil(K / BK) / split_k)`.
    pub fn k_tiles_per_split(&self, k: i32, split_k: u32) -> i32 {
        let kt = (k.max(0) as i64 + self.tile[2] - 1) / self.tile[2];
        ((kt + split_k.max(1) as i64 - 1) / split_k.max(1) as i64) as i32
    }

    /// Bytes of the `s32` workspace for `mode` (0 for `split_k <= 1`): parallel
    /// `4 * M * N * L * split_k`, serial `4 * M * N * L`.
    pub fn workspace_bytes(&self, m: i32, n: i32, l: i32, split_k: u32, mode: SplitKMode) -> usize {
        let mnl = 4 * m.max(0) as usize * n.max(0) as usize * l.max(0) as usize;
        match mode {
            _ if split_k <= 1 => 0,
            SplitKMode::Parallel => mnl * split_k as usize,
            SplitKMode::Serial => mnl,
        }
    }

    /// `int`s of the serial split-K semaphore array: a ticket counter and one counter per
    /// output tile and batch (`1 + L * tiles_m * tiles_n`).
    pub fn semaphore_count(&self, m: i32, n: i32, l: i32) -> usize {
        let tm = (m.max(1) as usize).div_ceil(self.tile[0] as usize);
        let tn = (n.max(1) as usize).div_ceil(self.tile[1] as usize);
        1 + l.max(1) as usize * tm * tn
    }

    /// The launch configuration of the main kernel.
    pub fn launch_config(&self, args: &ScaledMmArgs) -> LaunchConfig {
        LaunchConfig::new(self.grid_split(args.m, args.n, args.l, args.split_k), self.threads)
            .with_dynamic_smem(self.smem_bytes)
    }

    fn main_args(&self, a: &ScaledMmArgs, fusion: &[u8]) -> KernelArgs {
        KernelArgs::new()
            .u64(a.a)
            .u64(a.b)
            .u64(a.d)
            .u64(a.workspace)
            .u64(if a.split_k_mode == SplitKMode::Serial {
                a.semaphores
            } else {
                0
            })
            .i32(a.m)
            .i32(a.n)
            .i32(a.k)
            .i32(a.l)
            .i64(a.lda)
            .i64(a.ldb)
            .i64(a.ldd)
            .i64(a.batch_stride_a)
            .i64(a.batch_stride_b)
            .i64(a.batch_stride_d)
            .i32(a.split_k as i32)
            .i32(self.k_tiles_per_split(a.k, a.split_k))
            .i32((a.split_k_mode == SplitKMode::Serial) as i32)
            .blob(fusion)
    }
}

fn check_name(f: &Function, want: &str) -> Result<(), ScaledMmError> {
    if f.name() != want {
        return Err(ScaledMmError::WrongFunction {
            expected: want.into(),
            got: f.name().into(),
        });
    }
    Ok(())
}

/// Launch the kernel: the main kernel, and with parallel split-K (`split_k > 1`) the
/// reduction kernel `reduce` that sums the `s32` partials and applies the fusion.
///
/// # Safety
///
/// The pointers in `args` (and in its fusion arguments) must be device addresses of
/// buffers holding what the sizes, leading dimensions and batch strides describe (the
/// scales and bias: `M`, `N` or 1 `f32` / `N` elements), valid until the kernels finish;
/// the workspace must hold [`GeneratedScaledMm::workspace_bytes`] bytes.
pub unsafe fn launch(
    main: &Function,
    reduce: &Function,
    g: &GeneratedScaledMm,
    args: &ScaledMmArgs,
) -> Result<(), ScaledMmError> {
    check_name(main, &g.name)?;
    check_name(reduce, &g.reduce_name)?;
    args.validate(g)?;
    let fusion = args.fusion.pack(&g.config.fusion)?;
    // SAFETY: the parameter list matches the generated kernel's signature; the caller
    // guarantees the buffers.
    unsafe { main.launch(&g.launch_config(args), &g.main_args(args, &fusion))? };
    if args.split_k > 1 && args.split_k_mode == SplitKMode::Parallel {
        let mn = args.m as u64 * args.n as u64;
        let blocks = mn.div_ceil(g.reduce_threads as u64).max(1) as u32;
        let cfg = LaunchConfig::new((blocks, args.l as u32), g.reduce_threads);
        let ka = KernelArgs::new()
            .u64(args.workspace)
            .u64(args.d)
            .i32(args.m)
            .i32(args.n)
            .i32(args.split_k as i32)
            .i64(args.ldd)
            .i64(args.batch_stride_d)
            .blob(&fusion);
        // SAFETY: matches the reduction kernel's signature.
        unsafe { reduce.launch(&cfg, &ka)? };
    }
    Ok(())
}

/// The kernel name of a configuration, e.g.
/// `rc_scaledmm_sm80_s8_bf16_rowcol_bias_bf16_128x128x64_s4_w2x2`: target, input and
/// output types, the fusion's name (without its `scaledmm_` prefix), tile, stages, warps,
/// `_r<n>` for a rasterization swizzle.
pub fn kernel_name(cfg: &ScaledMmSm80Config, stages: usize) -> String {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let f = cfg.fusion.name();
    let tag = f.strip_prefix("scaledmm_").unwrap_or(&f);
    let mut s = format!(
        "rc_scaledmm_{}_s8_{}_{tag}_{bm}x{bn}x{bk}_s{stages}_w{wm}x{wn}",
        cfg.target.tag(),
        cfg.out.ptx()
    );
    if cfg.raster_swizzle > 0 {
        s.push_str(&format!("_r{}", cfg.raster_swizzle));
    }
    s
}

/// The Turing `m16n8k32` step from four `m8n8k16` atoms.
fn turing_mma(m8: &str, name: &str) -> String {
    format!(
        r#"// rcute: one m16n8k32 s8 step on Turing (sm_75) as four mma.sync.m8n8k16. The m16n8k32
// fragments are, register for register, those of 2 (M) x 2 (K) m8n8k16 atoms:
// a[0] rows 0-7 / k 0-15, a[1] rows 8-15 / k 0-15, a[2] rows 0-7 / k 16-31, a[3] rows 8-15 / k 16-31;
// b[0] k 0-15, b[1] k 16-31; d[0..1] rows 0-7, d[2..3] rows 8-15 (columns 2 * (lane % 4) + {{0, 1}}).
__device__ __forceinline__ void {name}(int32_t (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2], int32_t const (&c)[4]) {{
  const uint32_t a0[1] = {{a[0]}}, a1[1] = {{a[1]}}, a2[1] = {{a[2]}}, a3[1] = {{a[3]}};
  const uint32_t b0[1] = {{b[0]}}, b1[1] = {{b[1]}};
  int32_t lo[2] = {{c[0], c[1]}};
  int32_t hi[2] = {{c[2], c[3]}};
  {m8}(lo, a0, b0, lo);
  {m8}(lo, a2, b1, lo);
  {m8}(hi, a1, b0, hi);
  {m8}(hi, a3, b1, hi);
  d[0] = lo[0];
  d[1] = lo[1];
  d[2] = hi[0];
  d[3] = hi[1];
}}
"#
    )
}

fn main_params(out: Element, fusion: &FusionCode) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vec![
        ("const int8_t* __restrict__".into(), "A".into()),
        ("const int8_t* __restrict__".into(), "B".into()),
        (format!("{}*", out.cuda_type()), "D".into()),
        ("int*".into(), "workspace".into()),
        ("int*".into(), "semaphores".into()),
    ];
    for n in ["M", "N", "K", "L"] {
        v.push(("int".into(), n.into()));
    }
    for n in [
        "lda",
        "ldb",
        "ldd",
        "batch_stride_a",
        "batch_stride_b",
        "batch_stride_d",
    ] {
        v.push(("long long".into(), n.into()));
    }
    for n in ["split_k", "k_tiles_per_split", "split_serial"] {
        v.push(("int".into(), n.into()));
    }
    v.push((format!("const {}", fusion.struct_name), "ep".into()));
    v
}

fn reduce_kernel(out: Element, fusion: &FusionCode, name: &str) -> CFunction {
    let visit = format!("{}(ep, (float)(int)s, 0.0f, m, n, batch)", fusion.fn_name);
    let body = vec![
        d("const long long", "mn", "(long long)M * N"),
        d("const int", "batch", "blockIdx.y"),
        d(
            &format!("{}* const", out.cuda_type()),
            "gD",
            "D + batch * batch_stride_d",
        ),
        c("one thread per workspace index i = m * N + n (the order of D)"),
        d(
            "const long long",
            "i",
            "(long long)blockIdx.x * blockDim.x + threadIdx.x",
        ),
        if_("i >= mn", vec![Stmt::Return]),
        d("const int", "m", "(int)(i / N)"),
        d("const int", "n", "(int)(i % N)"),
        dc(
            "unsigned",
            "s",
            "0u",
            "the exact s32 sum of the splits (two's-complement wrap-around, as the MMA accumulates)",
        ),
        Stmt::For {
            var: "p".into(),
            start: "0".into(),
            end: "split_k".into(),
            unroll: false,
            body: vec![e("s += (unsigned)workspace[((long long)batch * split_k + p) * mn + i]")],
        },
        Stmt::assign("gD[(long long)m * ldd + n]", convert_from_f32(out, &visit)),
    ];
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({REDUCE_THREADS})"),
        ret: "void".into(),
        name: format!("{name}_splitk_reduce"),
        params: vec![
            ("const int* __restrict__".into(), "workspace".into()),
            (format!("{}*", out.cuda_type()), "D".into()),
            ("int".into(), "M".into()),
            ("int".into(), "N".into()),
            ("int".into(), "split_k".into()),
            ("long long".into(), "ldd".into()),
            ("long long".into(), "batch_stride_d".into()),
            (format!("const {}", fusion.struct_name), "ep".into()),
        ],
        doc: vec![
            "Parallel split-K reduction: D = convert(fusion((float)sum_p workspace[p])), the s32 partials summed exactly before the fusion; grid (blocks, L).".into(),
        ],
        body,
    }
}

/// Generate the kernels of a configuration.
pub fn generate(cfg: &ScaledMmSm80Config) -> Result<GeneratedScaledMm, ScaledMmError> {
    let cerr = |s: String| Err(ScaledMmError::Config(s));
    if !matches!(cfg.out, Element::F16 | Element::BF16) {
        return cerr(format!("output type {} (f16 or bf16)", cfg.out));
    }
    if cfg.target == ScaledMmTarget::Turing && cfg.out != Element::F16 {
        return cerr("the Turing (sm_75) kernel writes f16 only".into());
    }
    if cfg.fusion.reads_source() {
        return cerr(format!(
            "fusion {} reads a source C; scaled_mm has none",
            cfg.fusion.describe()
        ));
    }
    if cfg.raster_swizzle > 5 {
        return cerr(format!("raster_swizzle={} (at most 5)", cfg.raster_swizzle));
    }
    let plan = Sm80Mainloop::new(&cfg.mainloop())?;
    if cfg.target == ScaledMmTarget::Turing && (plan.stages != 2 || plan.k_blocks < 2) {
        return cerr(format!(
            "the Turing pipeline needs 2 stages and BK >= 64 (got {} stages, BK={})",
            plan.stages, cfg.tile[2]
        ));
    }
    let ecfg = EpilogueConfig {
        c: cfg.out,
        d: cfg.out,
        order: StorageOrder::RowMajor,
    };
    let se = SmemEpilogue::new(&ecfg, &plan)?;
    let smem_bytes = se.union_bytes + TICKET_SMEM;
    if cfg.target == ScaledMmTarget::Turing && smem_bytes > TURING_SMEM_BUDGET {
        return cerr(format!(
            "{smem_bytes} bytes of shared memory exceed Turing's {TURING_SMEM_BUDGET}"
        ));
    }
    let name = kernel_name(cfg, plan.stages);
    let mut config = cfg.clone();
    config.stages = Some(plan.stages);
    // One fusion per unit: a short fixed prefix (fusion prefixes are at most 64 characters).
    let fusion = cfg.fusion.emit("rc_scaledmm_ep")?;

    let (g2s, mut snippets, mma_fn) = match cfg.target {
        ScaledMmTarget::Ampere => {
            let cp = cp_async(CacheOp::CacheGlobal, 16, true)
                .ok_or_else(|| ScaledMmError::Config("no cp.async op".into()))?;
            let sn = vec![cp.snippet, cp_async_commit_group(), cp_async_wait_group()];
            (G2sMode::CpAsync, sn, plan.mma_atom.fn_name().to_string())
        }
        ScaledMmTarget::Turing => (G2sMode::Registers, vec![], format!("{name}_mma_m16n8k32")),
    };
    snippets.push(plan.s2r_a.snippet.clone());
    if plan.s2r_b.snippet.name != plan.s2r_a.snippet.name {
        snippets.push(plan.s2r_b.snippet.clone());
    }
    let m8 = mma_sync_m8n8k16(Element::S8, Element::S8).ok_or_else(|| ScaledMmError::Config("no m8n8k16".into()))?;
    snippets.push(match cfg.target {
        ScaledMmTarget::Ampere => plan.mma_atom.snippet.clone(),
        ScaledMmTarget::Turing => m8.snippet.clone(),
    });
    let fp8 = if fusion.source().contains("fp8") {
        "#include <cuda_fp8.h>\n"
    } else {
        ""
    };
    let mut items = unit_preamble(&snippets, &format!("{fp8}{UINTPTR_FOR_NVRTC}"));
    if cfg.target == ScaledMmTarget::Turing {
        items.push(Item::Snippet {
            origin: "rcute Turing m16n8k32 step".into(),
            code: turing_mma(&m8.snippet.name, &mma_fn),
        });
    }
    let smem = |n: &str, l, what| smem_fn(n, l, what).map_err(|e| ScaledMmError::Config(e.to_string()));
    items.push(Item::Function(smem(&format!("{name}_sA"), &plan.smem_layout_a, "A")?));
    items.push(Item::Function(smem(&format!("{name}_sB"), &plan.smem_layout_b, "B")?));
    items.push(Item::Snippet {
        origin: "rcute serial split-K".into(),
        code: SEMAPHORE_HELPERS.into(),
    });
    items.push(Item::Snippet {
        origin: format!("rcute-collective fusion {}", cfg.fusion.name()),
        code: fusion.source(),
    });

    let opts = MainloopEmit {
        name: &name,
        raster_swizzle: cfg.raster_swizzle,
        ticket_offset: se.union_bytes,
        g2s,
        mma_fn: &mma_fn,
    };
    let mut body = mainloop_stmts(&plan, &opts);
    body.extend(staged_epilogue(
        &plan,
        &se,
        cfg.out,
        StorageOrder::RowMajor,
        &EpilogueOp::Visit {
            visit_fn: &fusion.fn_name,
        },
    ));
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let r = cfg.raster_swizzle;
    items.push(Item::Function(CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({}, 1)", plan.threads),
        ret: "void".into(),
        name: name.clone(),
        params: main_params(cfg.out, &fusion),
        doc: vec![
            format!(
                "D = {}((float)(A * B)), s8 x s8 -> s32 -> {} (row-major), tile {bm}x{bn}x{bk}, {} stages, {wm}x{wn} warps",
                fusion.fn_name,
                cfg.out.ptx(),
                plan.stages
            ),
            format!(
                "{}, block {}, dynamic smem {smem_bytes} bytes",
                grid_doc(r),
                plan.threads
            ),
        ],
        body,
    }));
    items.push(Item::Function(reduce_kernel(cfg.out, &fusion, &name)));

    let unit = Unit {
        header: vec![
            format!("{name}: generated by rcute (crates/kernel/src/scaled_mm_sm80.rs); do not edit."),
            format!(
                "scaled_mm for {}: A s8 K-major (row-major MxK), B s8 K-major (column-major KxN), s32 accumulation, D {} row-major",
                match cfg.target {
                    ScaledMmTarget::Ampere => "sm_80 / sm_86 / sm_89 (cp.async, mma.sync.m16n8k32)",
                    ScaledMmTarget::Turing => "sm_75 (register-staged loads, 4x mma.sync.m8n8k16)",
                },
                cfg.out.ptx()
            ),
            format!("epilogue fusion {}: {}", cfg.fusion.name(), cfg.fusion.describe()),
            format!(
                "tile {bm}x{bn}x{bk}, warps {wm}x{wn}, {} stages, raster swizzle {r}; smem atoms: A {} | B {}",
                plan.stages, plan.smem_atom_a, plan.smem_atom_b
            ),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedScaledMm {
        reduce_name: format!("{name}_splitk_reduce"),
        fusion_params: cfg.fusion.params(),
        name,
        source: unit.render(),
        threads: plan.threads as u32,
        smem_bytes: smem_bytes as u32,
        tile: cfg.tile,
        reduce_threads: REDUCE_THREADS,
        config,
        plan,
        epilogue: se,
    })
}
