//! The Ampere-class GEMM kernel generator: `D = alpha * A * B + beta * C`, batched, with
//! bf16 / f16 operands, f32 accumulation and bf16 / f16 / f32 C and D.
//!
//! [`generate`] turns a [`GemmSm80Config`] into a readable CUDA C++ translation unit
//! ([`GeneratedGemm`]) built with the structured emitter ([`crate::emit`]) from an
//! [`Sm80Mainloop`] plan (swizzled smem layouts, `cp.async` / `ldmatrix` copies, the tiled
//! `mma.sync` MMA) and an [`EpiloguePlan`]:
//!
//! * a multistage `cp.async` pipeline: the prologue fills `stages - 1` buffers, the main
//!   loop waits with `cp.async.wait_group(stages - 2)` + `__syncthreads()`, loads the
//!   tile's k-blocks with `ldmatrix.x4` into a register double buffer and issues
//!   `mma.sync.m16n8k16` (CuTe's `MainloopSm80CpAsync` schedule). With 128 accumulators
//!   per thread (64x64 warp tiles) the explicit register double buffer does not fit 255
//!   registers on sm_90a; those kernels issue `ldmatrix` + `mma` per k-block and leave the
//!   overlap to ptxas' scheduling of the unrolled k-blocks;
//! * shared-memory addresses from the swizzled layouts: when the generator verifies that
//!   `offset(t + s) == offset(t) ^ offset(s)` for every thread part `t` and unrolled part
//!   `s`, a thread keeps one base offset and XORs constants (CuTe's swizzle-aware
//!   slicing), else it evaluates the layout per access;
//! * every edge predicated: out-of-bounds 16-byte vectors of A and B are zero-filled by
//!   `cp.async` (src-size 0), out-of-bounds outputs are not stored, so any `M, N >= 1`,
//!   `K >= 0` is correct (with the alignment rules below);
//! * run-time `M, N, K`, leading dimensions, batch count `L` with batch strides,
//!   `alpha`, `beta` (C is not read when `beta == 0`);
//! * threadblock rasterization with CUTLASS's identity swizzle of `2^raster_swizzle`
//!   tiles along N for L2 reuse;
//! * an epilogue staged through shared memory ([`SmemEpilogue`]): after the last k-tile
//!   (`cp.async.wait_group 0` + `__syncthreads()`: the staging buffer is a union with the
//!   mainloop stages) the f32 accumulators are written slab by slab into a padded /
//!   swizzled, bank-conflict-checked buffer; each thread then reads whole 16-byte output
//!   vectors, applies `alpha * acc + beta * C` (16-byte C loads), converts and stores
//!   16 bytes coalesced. Vectors that cross the matrix edge, and D / C whose leading
//!   dimension, batch stride or address is not vector-aligned (e.g. odd `ldd`), fall
//!   back to element-wise stores of the same vector (the old direct 2-element stores from
//!   the fragments are gone: the staged path covers every alignment);
//! * split-K ([`SplitKMode`]): parallel (each split writes its f32 partial slab, a
//!   second kernel `<name>_splitk_reduce` sums the splits and applies the epilogue) or
//!   serial (one kernel: the splits of a tile run their epilogues in order behind a
//!   per-tile semaphore, accumulating into one f32 slab; the last split writes D and
//!   resets the semaphore). Serial split-K is deadlock-free whatever order the hardware
//!   starts CTAs in: each CTA takes a ticket (atomic counter) when it starts and works
//!   on item `ticket` of the grid in (x, y, z) order with `z = split * L + batch` (the
//!   split slowest-varying), so the CTA it waits for (split `s - 1` of its tile, a
//!   smaller item) took its ticket earlier and is resident or done.
//!
//! Alignment rules (checked by [`GemmArgs::validate`], typed [`GemmError::Alignment`]):
//! A and B are read in 16-byte vectors of 8 elements, so `lda`, `ldb` and the batch
//! strides of A and B must be multiples of 8 elements and A, B 16-byte aligned; when an
//! operand is K-major, `K` must be a multiple of 8 (vectors along K are all in or all out;
//! there is no element-wise path). An MN-major operand's last vector along M (N) may
//! extend past `M` (`N`) into the leading-dimension padding: the buffers must be readable
//! for `ld * cols` elements (the usual BLAS contract), and those values only reach outputs
//! that are never stored. D must be aligned to its element size (16-byte vectors are used
//! when `ldd` and the batch stride are multiples of the vector and D is 16-byte aligned;
//! otherwise element-wise stores).
//!
//! ```
//! use rcute_kernel::gemm_sm80::{generate, GemmSm80Config};
//! use rcute_atom::Major;
//! let cfg = GemmSm80Config::bf16(Major::K, Major::K, [128, 128, 32], [2, 2]);
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.name, "rc_gemm_sm80_bf16_tn_128x128x32_s4_w2x2");
//! assert_eq!((g.threads, g.smem_bytes), (128, 65536 + 16));
//! assert!(g.source.contains("rc_mma_m16n8k16_f32_bf16_bf16_f32"));
//! assert_eq!(g.grid(1000, 300, 2), rcute_kernel::Dim3::new(8, 3, 2));
//! ```

use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit, UINTPTR_FOR_NVRTC};
use crate::launch::{Dim3, Function, KernelArgs, LaunchConfig, LaunchError};
use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::{Element, Snippet};
use rcute_collective::epilogue::{convert_from_f32, convert_to_f32, EpilogueError};
use rcute_collective::{
    EpilogueConfig, EpiloguePlan, PlanError, Sm80Mainloop, Sm80MainloopConfig, SmemEpilogue, DEFAULT_SMEM_BUDGET,
};
use rcute_layout::{AnyLayout, Int, Tuple};

pub use rcute_atom::{Element as GemmElement, Major};
pub use rcute_collective::StorageOrder;

/// The configuration of one generated GEMM kernel (compile-time choices; problem sizes,
/// leading dimensions, batch, `alpha`, `beta` and split-K are run-time arguments).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GemmSm80Config {
    /// Element type of A (`bf16` or `f16`).
    pub a: Element,
    /// Element type of B (equal to `a`).
    pub b: Element,
    /// Element type of C (`f32`, `bf16` or `f16`).
    pub c: Element,
    /// Element type of D (`f32`, `bf16` or `f16`).
    pub d: Element,
    /// A is `(M,K)`: [`Major::K`] = row-major (BLAS "T"), [`Major::MN`] = column-major ("N").
    pub a_major: Major,
    /// B is `(K,N)` in BLAS terms, seen as `(N,K)`: [`Major::K`] = column-major `KxN`
    /// (BLAS "N"), [`Major::MN`] = row-major `KxN` ("T").
    pub b_major: Major,
    /// Storage order of C and D.
    pub c_major: StorageOrder,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Pipeline stages; `None` = as many as fit `smem_budget` (capped, see
    /// [`rcute_collective::MAX_AUTO_STAGES`]).
    pub stages: Option<usize>,
    /// log2 of the rasterization swizzle: groups of `2^raster_swizzle` CTAs along N are
    /// launched next to each other (0 = plain row of tiles). At most 5.
    pub raster_swizzle: u32,
    /// Shared memory budget per CTA in bytes (default 227 KiB).
    pub smem_budget: usize,
}

impl GemmSm80Config {
    /// bf16 inputs, bf16 C and D (row-major), f32 accumulation, automatic stages, no
    /// rasterization swizzle.
    pub fn bf16(a_major: Major, b_major: Major, tile: [i64; 3], warps: [i64; 2]) -> Self {
        GemmSm80Config {
            a: Element::BF16,
            b: Element::BF16,
            c: Element::BF16,
            d: Element::BF16,
            a_major,
            b_major,
            c_major: StorageOrder::RowMajor,
            tile,
            warps,
            stages: None,
            raster_swizzle: 0,
            smem_budget: DEFAULT_SMEM_BUDGET,
        }
    }

    /// The BLAS layout letters, A then B (`tn`, `nn`, `nt`, `tt`).
    pub fn blas_tag(&self) -> String {
        let a = if self.a_major == Major::K { 't' } else { 'n' };
        let b = if self.b_major == Major::K { 'n' } else { 't' };
        format!("{a}{b}")
    }

    /// The mainloop configuration.
    pub fn mainloop(&self) -> Sm80MainloopConfig {
        Sm80MainloopConfig {
            a: self.a,
            b: self.b,
            acc: Element::F32,
            a_major: self.a_major,
            b_major: self.b_major,
            tile: self.tile,
            warps: self.warps,
            stages: self.stages,
            smem_budget: self.smem_budget,
            epilogue_smem: 0,
        }
    }
}

/// Why a configuration cannot be generated or a launch is refused.
#[derive(Debug, thiserror::Error)]
pub enum GemmError {
    /// The mainloop builder refused the configuration.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The epilogue refused the C / D types.
    #[error(transparent)]
    Epilogue(#[from] EpilogueError),
    /// Another configuration problem.
    #[error("invalid GEMM configuration: {0}")]
    Config(String),
    /// A problem size, leading dimension or split count is invalid.
    #[error("invalid GEMM arguments: {0}")]
    Shape(String),
    /// An alignment rule is broken (see the module documentation).
    #[error("alignment: {0}")]
    Alignment(String),
    /// The function passed to a launch helper is not this GEMM's kernel.
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

/// A generated GEMM: its source and launch facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedGemm {
    /// The main kernel's name (also the name of the unit).
    pub name: String,
    /// The split-K reduction kernel's name (`<name>_splitk_reduce`), in the same unit.
    pub reduce_name: String,
    /// The CUDA C++ translation unit (both kernels).
    pub source: String,
    /// Threads per CTA of the main kernel.
    pub threads: u32,
    /// Dynamic shared memory per CTA of the main kernel, in bytes (the union of the
    /// mainloop stages and the epilogue staging buffer, plus [`TICKET_SMEM`]).
    pub smem_bytes: u32,
    /// `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Threads per CTA of the reduction kernel.
    pub reduce_threads: u32,
    /// The configuration (with `stages` resolved).
    pub config: GemmSm80Config,
    /// The mainloop plan.
    pub plan: Sm80Mainloop,
    /// The shared-memory staged epilogue (its buffer is a union with the mainloop's).
    pub epilogue: SmemEpilogue,
}

/// How `split_k > 1` combines the K splits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitKMode {
    /// Each split writes an f32 partial slab; `<name>_splitk_reduce` sums them (two
    /// kernels, `split_k * M * N * L` floats of workspace).
    #[default]
    Parallel,
    /// The splits of one output tile run their epilogues in order, serialized by a
    /// per-tile semaphore: split `s` waits until the tile's counter is `s`, adds its sum to
    /// the running f32 partial (one `M * N * L` slab), or, as the last split, applies the
    /// epilogue to D, then releases `s + 1` (the last split resets it to 0). One kernel.
    Serial,
}

/// Run-time arguments of one GEMM launch. Pointers are device addresses (`CUdeviceptr`).
/// Matrices are addressed as: A `(m,k)` at `m*lda + k` (K-major) or `k*lda + m`
/// (MN-major); B `(k,n)` at `n*ldb + k` (K-major) or `k*ldb + n` (MN-major); C / D `(m,n)`
/// at `m*ld + n` (row-major) or `n*ld + m` (column-major); batch `l` adds
/// `l * batch_stride_*` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmArgs {
    /// Rows of A, C, D.
    pub m: i32,
    /// Columns of B, C, D.
    pub n: i32,
    /// The reduction extent.
    pub k: i32,
    /// Batch count.
    pub l: i32,
    /// A.
    pub a: u64,
    /// B.
    pub b: u64,
    /// C (may be 0 when `beta == 0`).
    pub c: u64,
    /// D (may equal C).
    pub d: u64,
    /// Leading dimension of A, in elements.
    pub lda: i64,
    /// Leading dimension of B.
    pub ldb: i64,
    /// Leading dimension of C.
    pub ldc: i64,
    /// Leading dimension of D.
    pub ldd: i64,
    /// Elements between batches of A.
    pub batch_stride_a: i64,
    /// Elements between batches of B.
    pub batch_stride_b: i64,
    /// Elements between batches of C.
    pub batch_stride_c: i64,
    /// Elements between batches of D.
    pub batch_stride_d: i64,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
    /// K splits (1 = no split-K; more needs a workspace and the reduction kernel).
    pub split_k: u32,
    /// f32 workspace of [`GeneratedGemm::workspace_bytes_mode`] bytes (split-K only).
    pub workspace: u64,
    /// How the splits are combined (with `split_k > 1`).
    pub split_k_mode: SplitKMode,
    /// Serial split-K: [`GeneratedGemm::semaphore_count`] `int`s, zero before the first
    /// launch; every launch that completes leaves them zero again (reusable without a
    /// memset). Launches sharing them must be ordered (one stream).
    pub semaphores: u64,
}

impl GemmArgs {
    /// Densely packed tensors (leading dimensions and batch strides as small as the
    /// configuration's majors allow), `alpha = 1`, `beta = 0`, no split-K.
    #[allow(clippy::too_many_arguments)]
    pub fn packed(cfg: &GemmSm80Config, m: i32, n: i32, k: i32, l: i32, a: u64, b: u64, c: u64, d: u64) -> GemmArgs {
        GemmArgs::packed_majors(cfg.a_major, cfg.b_major, cfg.c_major, m, n, k, l, a, b, c, d)
    }

    /// [`GemmArgs::packed`] for the "TN" layouts every SM90 kernel takes: K-major A and B,
    /// row-major C and D.
    #[allow(clippy::too_many_arguments)]
    pub fn tn(m: i32, n: i32, k: i32, l: i32, a: u64, b: u64, c: u64, d: u64) -> GemmArgs {
        GemmArgs::packed_majors(Major::K, Major::K, StorageOrder::RowMajor, m, n, k, l, a, b, c, d)
    }

    /// [`GemmArgs::packed`] from the operands' majors and the output order.
    #[allow(clippy::too_many_arguments)]
    pub fn packed_majors(
        a_major: Major,
        b_major: Major,
        c_major: StorageOrder,
        m: i32,
        n: i32,
        k: i32,
        l: i32,
        a: u64,
        b: u64,
        c: u64,
        d: u64,
    ) -> GemmArgs {
        let (m64, n64, k64) = (m as i64, n as i64, k as i64);
        let lda = if a_major == Major::K { k64 } else { m64 };
        let ldb = if b_major == Major::K { k64 } else { n64 };
        let ldc = if c_major == StorageOrder::RowMajor { n64 } else { m64 };
        GemmArgs {
            m,
            n,
            k,
            l,
            a,
            b,
            c,
            d,
            lda,
            ldb,
            ldc,
            ldd: ldc,
            batch_stride_a: m64 * k64,
            batch_stride_b: n64 * k64,
            batch_stride_c: m64 * n64,
            batch_stride_d: m64 * n64,
            alpha: 1.0,
            beta: 0.0,
            split_k: 1,
            workspace: 0,
            split_k_mode: SplitKMode::Parallel,
            semaphores: 0,
        }
    }

    /// Check the arguments against the generated kernel's rules.
    pub fn validate(&self, g: &GeneratedGemm) -> Result<(), GemmError> {
        let cfg = &g.config;
        let shape = |s: String| Err(GemmError::Shape(s));
        let align = |s: String| Err(GemmError::Alignment(s));
        if self.m < 1 || self.n < 1 || self.l < 1 || self.k < 0 {
            return shape(format!(
                "need M, N, L >= 1 and K >= 0, got M={} N={} K={} L={}",
                self.m, self.n, self.k, self.l
            ));
        }
        let (m, n, k) = (self.m as i64, self.n as i64, self.k as i64);
        let need = |name: &str, ld: i64, min: i64| -> Result<(), GemmError> {
            if ld < min.max(1) {
                Err(GemmError::Shape(format!("{name}={ld} is smaller than {}", min.max(1))))
            } else {
                Ok(())
            }
        };
        need("lda", self.lda, if cfg.a_major == Major::K { k } else { m })?;
        need("ldb", self.ldb, if cfg.b_major == Major::K { k } else { n })?;
        let out_min = if cfg.c_major == StorageOrder::RowMajor { n } else { m };
        need("ldd", self.ldd, out_min)?;
        if self.beta != 0.0 {
            need("ldc", self.ldc, out_min)?;
            if self.c == 0 {
                return shape("beta != 0 but C is null".into());
            }
        }
        if self.d == 0 || (self.k > 0 && (self.a == 0 || self.b == 0)) {
            return shape("null A, B or D".into());
        }
        let vec = 8;
        for (name, v) in [
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("batch_stride_a", self.batch_stride_a),
            ("batch_stride_b", self.batch_stride_b),
        ] {
            if v % vec != 0 {
                return align(format!(
                    "{name}={v} must be a multiple of {vec} elements (16-byte cp.async vectors)"
                ));
            }
        }
        if self.a % 16 != 0 || self.b % 16 != 0 {
            return align("A and B must be 16-byte aligned".into());
        }
        if (cfg.a_major == Major::K || cfg.b_major == Major::K) && k % vec != 0 {
            return align(format!(
                "K={k} must be a multiple of {vec} when an operand is K-major (no element-wise K path)"
            ));
        }
        let dbytes = cfg.d.bytes() as u64;
        if self.d % dbytes != 0 || (self.beta != 0.0 && self.c % cfg.c.bytes() as u64 != 0) {
            return align("C and D must be aligned to their element size".into());
        }
        if self.split_k < 1 {
            return shape("split_k must be at least 1".into());
        }
        if self.split_k > 1 && (self.workspace == 0 || self.workspace % 16 != 0) {
            return shape("split_k > 1 needs a 16-byte aligned f32 workspace".into());
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
        Ok(())
    }
}

impl GeneratedGemm {
    /// The grid of the main kernel for an `M x N` problem with `L` batches (no split-K).
    pub fn grid(&self, m: i32, n: i32, l: i32) -> Dim3 {
        self.grid_split(m, n, l, 1)
    }

    /// The grid with `split_k` K splits: x = `tiles_m << r`, y = `ceil(tiles_n / 2^r)`,
    /// z = `L * split_k` (r = `raster_swizzle`).
    pub fn grid_split(&self, m: i32, n: i32, l: i32, split_k: u32) -> Dim3 {
        let r = self.config.raster_swizzle;
        let tm = (m.max(1) as i64 + self.tile[0] - 1) / self.tile[0];
        let tn = (n.max(1) as i64 + self.tile[1] - 1) / self.tile[1];
        let x = (tm << r) as u32;
        let y = ((tn + (1 << r) - 1) >> r) as u32;
        Dim3::new(x, y, (l.max(1) as u32) * split_k.max(1))
    }

    /// K tiles each split handles: `ceil(ceil(K / BK) / split_k)`.
    pub fn k_tiles_per_split(&self, k: i32, split_k: u32) -> i32 {
        let kt = (k as i64 + self.tile[2] - 1) / self.tile[2];
        ((kt + split_k.max(1) as i64 - 1) / split_k.max(1) as i64) as i32
    }

    /// Bytes of the f32 split-K workspace (0 for `split_k <= 1`).
    pub fn workspace_bytes(&self, m: i32, n: i32, l: i32, split_k: u32) -> usize {
        if split_k <= 1 {
            0
        } else {
            4 * m as usize * n as usize * l as usize * split_k as usize
        }
    }

    /// Bytes of the f32 workspace for `mode` (0 for `split_k <= 1`): parallel
    /// `4 * M * N * L * split_k`, serial `4 * M * N * L`.
    pub fn workspace_bytes_mode(&self, m: i32, n: i32, l: i32, split_k: u32, mode: SplitKMode) -> usize {
        match mode {
            SplitKMode::Parallel => self.workspace_bytes(m, n, l, split_k),
            SplitKMode::Serial if split_k > 1 => 4 * m as usize * n as usize * l as usize,
            SplitKMode::Serial => 0,
        }
    }

    /// `int`s of the serial split-K semaphore array: a ticket counter and one counter
    /// per output tile and batch (`1 + L * tiles_m * tiles_n`).
    pub fn semaphore_count(&self, m: i32, n: i32, l: i32) -> usize {
        let tm = (m.max(1) as usize).div_ceil(self.tile[0] as usize);
        let tn = (n.max(1) as usize).div_ceil(self.tile[1] as usize);
        1 + l.max(1) as usize * tm * tn
    }

    /// The launch configuration of the main kernel.
    pub fn launch_config(&self, args: &GemmArgs) -> LaunchConfig {
        LaunchConfig::new(self.grid_split(args.m, args.n, args.l, args.split_k), self.threads)
            .with_dynamic_smem(self.smem_bytes)
    }

    fn main_args(&self, a: &GemmArgs) -> KernelArgs {
        KernelArgs::new()
            .u64(a.a)
            .u64(a.b)
            .u64(a.c)
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
            .i64(a.ldc)
            .i64(a.ldd)
            .i64(a.batch_stride_a)
            .i64(a.batch_stride_b)
            .i64(a.batch_stride_c)
            .i64(a.batch_stride_d)
            .f32(a.alpha)
            .f32(a.beta)
            .i32(a.split_k as i32)
            .i32(self.k_tiles_per_split(a.k, a.split_k))
            .i32((a.split_k_mode == SplitKMode::Serial) as i32)
    }
}

fn check_name(f: &Function, want: &str) -> Result<(), GemmError> {
    if f.name() != want {
        return Err(GemmError::WrongFunction {
            expected: want.into(),
            got: f.name().into(),
        });
    }
    Ok(())
}

/// Launch the GEMM (`split_k` must be 1; see [`launch_split_k`]) on the function's GPU's
/// default stream.
///
/// # Safety
///
/// The pointers in `args` must be device addresses of buffers that hold the matrices
/// described by the sizes, leading dimensions and batch strides (readable for
/// `ld * cols` elements per batch for A and B), valid until the kernel finishes.
pub unsafe fn launch(f: &Function, g: &GeneratedGemm, args: &GemmArgs) -> Result<(), GemmError> {
    check_name(f, &g.name)?;
    if args.split_k != 1 {
        return Err(GemmError::Shape(
            "split_k > 1 needs launch_split_k (and the reduction kernel)".into(),
        ));
    }
    args.validate(g)?;
    // SAFETY: the parameter list matches the generated kernel's signature; the caller
    // guarantees the buffers.
    unsafe { f.launch(&g.launch_config(args), &g.main_args(args))? };
    Ok(())
}

/// Launch the GEMM with split-K. Parallel: the main kernel writes `split_k` f32 partial
/// products into `args.workspace`, then `reduce` (the `<name>_splitk_reduce` kernel of
/// the same unit) sums them and applies `alpha`, `beta`, C and the conversion to D.
/// Serial: only the main kernel runs (splits ordered by `args.semaphores`). With
/// `split_k == 1` only the main kernel runs.
///
/// # Safety
///
/// As for [`launch`]; additionally `args.workspace` must hold
/// [`GeneratedGemm::workspace_bytes`] bytes.
pub unsafe fn launch_split_k(
    main: &Function,
    reduce: &Function,
    g: &GeneratedGemm,
    args: &GemmArgs,
) -> Result<(), GemmError> {
    check_name(main, &g.name)?;
    check_name(reduce, &g.reduce_name)?;
    args.validate(g)?;
    // SAFETY: as in `launch`.
    unsafe { main.launch(&g.launch_config(args), &g.main_args(args))? };
    if args.split_k > 1 && args.split_k_mode == SplitKMode::Parallel {
        let mn = args.m as u64 * args.n as u64;
        let blocks = mn.div_ceil(g.reduce_threads as u64).max(1) as u32;
        let cfg = LaunchConfig::new((blocks, args.l as u32), g.reduce_threads);
        let ka = KernelArgs::new()
            .u64(args.workspace)
            .u64(args.c)
            .u64(args.d)
            .i32(args.m)
            .i32(args.n)
            .i32(args.split_k as i32)
            .i64(args.ldc)
            .i64(args.ldd)
            .i64(args.batch_stride_c)
            .i64(args.batch_stride_d)
            .f32(args.alpha)
            .f32(args.beta);
        // SAFETY: matches the reduction kernel's signature.
        unsafe { reduce.launch(&cfg, &ka)? };
    }
    Ok(())
}

/// The kernel name of a configuration, e.g. `rc_gemm_sm80_bf16_tn_128x128x32_s4_w2x2`:
/// input type, output types when they differ from the input (`_cf32_df32`), BLAS layout
/// letters, `_ccol` for column-major C/D, tile, stages, warps, `_r<n>` for a
/// rasterization swizzle.
pub fn kernel_name(cfg: &GemmSm80Config, stages: usize) -> String {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let mut s = format!("rc_gemm_sm80_{}", cfg.a.ptx());
    if cfg.c != cfg.a || cfg.d != cfg.a {
        s.push_str(&format!("_c{}_d{}", cfg.c.ptx(), cfg.d.ptx()));
    }
    s.push_str(&format!("_{}", cfg.blas_tag()));
    if cfg.c_major == StorageOrder::ColMajor {
        s.push_str("_ccol");
    }
    s.push_str(&format!("_{bm}x{bn}x{bk}_s{stages}_w{wm}x{wn}"));
    if cfg.raster_swizzle > 0 {
        s.push_str(&format!("_r{}", cfg.raster_swizzle));
    }
    s
}

/// Dynamic shared memory after the mainloop / epilogue union that holds the serial
/// split-K ticket.
pub const TICKET_SMEM: usize = 16;

/// Threads per CTA of the split-K reduction kernel.
pub const REDUCE_THREADS: u32 = 256;

// ------------------------------------------------------------------------------------
// Code generation.

pub(crate) fn e(s: impl Into<String>) -> Stmt {
    Stmt::Expr(s.into())
}
pub(crate) fn c(s: impl Into<String>) -> Stmt {
    Stmt::Comment(s.into())
}
pub(crate) fn d(ty: &str, name: &str, init: impl Into<String>) -> Stmt {
    Stmt::decl(ty, name, init)
}
pub(crate) fn dc(ty: &str, name: &str, init: impl Into<String>, comment: impl Into<String>) -> Stmt {
    Stmt::Decl {
        ty: ty.into(),
        name: name.into(),
        init: Some(init.into()),
        comment: Some(comment.into()),
    }
}
pub(crate) fn if_(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise: vec![],
    }
}
fn if_else(cond: impl Into<String>, then: Vec<Stmt>, otherwise: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise,
    }
}

/// `layout(mn, k, 0)` of a stage-0 slice as C++ (the swizzle renders as `x ^ ((x & Y) >> S)`).
fn smem_offset_cpp(l: &AnyLayout) -> Result<String, GemmError> {
    let coord = Tuple::node([
        Tuple::Leaf(Int::from("mn")),
        Tuple::Leaf(Int::from("k")),
        Tuple::Leaf(Int::Static(0)),
    ]);
    let off = l
        .crd2idx(&coord)
        .map_err(|e| GemmError::Config(format!("smem layout: {e}")))?;
    Ok(off.to_cpp())
}

pub(crate) fn smem_fn(name: &str, l: &AnyLayout, what: &str) -> Result<CFunction, GemmError> {
    Ok(CFunction {
        qualifiers: "__device__ __forceinline__".into(),
        ret: "int".into(),
        name: name.into(),
        params: vec![("int".into(), "mn".into()), ("int".into(), "k".into())],
        doc: vec![
            format!("{what}: element offset of (mn, k) in stage 0 of the smem layout"),
            format!("  {l}"),
            "(stage s adds s * BMN * BK: the stage stride is a multiple of the swizzle period).".into(),
        ],
        body: vec![e(format!("return {}", smem_offset_cpp(l)?))],
    })
}

/// Which smem offsets split as `offset(t + s) = offset(t) ^ offset(s)` (thread part `t`,
/// static part `s`): then a thread keeps one base offset and every unrolled access is an
/// XOR with a constant, instead of re-evaluating the swizzled layout (register pressure).
#[derive(Clone, Copy, Debug, Default)]
struct Separable {
    s2r_a: bool,
    s2r_b: bool,
    g2s_a: bool,
    g2s_b: bool,
}

fn xor_separable(l: &AnyLayout, thread: &[(i64, i64)], stat: &[(i64, i64)]) -> bool {
    let off = |mn: i64, k: i64| -> Option<i64> {
        let c = Tuple::node([
            Tuple::Leaf(Int::Static(mn)),
            Tuple::Leaf(Int::Static(k)),
            Tuple::Leaf(Int::Static(0)),
        ]);
        l.crd2idx(&c).ok()?.as_static()
    };
    let mut cache = std::collections::HashMap::new();
    for &(tm, tk) in thread {
        let Some(t) = off(tm, tk) else { return false };
        for &(sm, sk) in stat {
            let s_off = *cache.entry((sm, sk)).or_insert_with(|| off(sm, sk));
            match (off(tm + sm, tk + sk), s_off) {
                (Some(x), Some(so)) if x == (t ^ so) => {}
                _ => return false,
            }
        }
    }
    true
}

fn separable(p: &Sm80Mainloop) -> Separable {
    let [wm, wn] = p.config.warps;
    let warps: Vec<(i64, i64)> = (0..wm * wn).map(|w| p.warp_coord(w)).collect();
    let kbs: Vec<i64> = (0..p.k_blocks).map(|kb| p.k_block * kb).collect();
    let ld_thr = |is_a: bool| -> Vec<(i64, i64)> {
        let lanes = if is_a { p.lanes_a } else { p.lanes_b };
        warps
            .iter()
            .flat_map(|&(w_m, w_n)| {
                (0..32).map(move |l| {
                    let (mn, k) = lanes.lane_coord_vec(l, p.g2s_a.vec);
                    (16 * if is_a { w_m } else { w_n } + mn, k)
                })
            })
            .collect()
    };
    let ld_stat = |step: i64, count: i64| -> Vec<(i64, i64)> {
        (0..count)
            .flat_map(|i| kbs.iter().map(move |&k| (step * i, k)))
            .collect()
    };
    let g_thr =
        |g: &rcute_collective::G2sCopy| -> Vec<(i64, i64)> { (0..p.threads).map(|t| g.thread_origin(t)).collect() };
    let g_stat = |g: &rcute_collective::G2sCopy| -> Vec<(i64, i64)> {
        (0..g.passes)
            .map(|i| (i * g.pass_step[0], i * g.pass_step[1]))
            .collect()
    };
    Separable {
        s2r_a: xor_separable(&p.smem_layout_a, &ld_thr(true), &ld_stat(16 * wm, p.mma_m)),
        s2r_b: xor_separable(&p.smem_layout_b, &ld_thr(false), &ld_stat(16 * wn, p.mma_n / 2)),
        g2s_a: xor_separable(&p.smem_layout_a, &g_thr(&p.g2s_a), &g_stat(&p.g2s_a)),
        g2s_b: xor_separable(&p.smem_layout_b, &g_thr(&p.g2s_b), &g_stat(&p.g2s_b)),
    }
}

struct Names {
    ta: &'static str,
    tc: &'static str,
    td: &'static str,
}

/// How the mainloop emitter moves tiles from global to shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum G2sMode {
    /// `cp.async.cg` with zero fill and a `stages`-deep pipeline (sm_80 and newer).
    CpAsync,
    /// Turing (sm_75, no `cp.async`): the loads of a tile go to registers (16-byte
    /// `ld.global.nc`, zeros when predicated off) while the previous tile is multiplied,
    /// and are stored to shared memory after its last k-block: CUTLASS's two-stage SM75
    /// pipeline. Needs 2 stages and at least 2 k-blocks per tile.
    Registers,
}

/// What the shared mainloop emitter ([`mainloop_stmts`]) needs besides the plan.
pub(crate) struct MainloopEmit<'a> {
    /// The kernel name: prefix of the `{name}_sA` / `{name}_sB` smem offset functions.
    pub name: &'a str,
    /// log2 of the rasterization swizzle.
    pub raster_swizzle: u32,
    /// Byte offset of the serial split-K ticket in dynamic shared memory (after the
    /// mainloop / epilogue union).
    pub ticket_offset: usize,
    /// How tiles reach shared memory.
    pub g2s: G2sMode,
    /// The device function that issues one MMA atom on `(d, a, b, c)` fragments.
    pub mma_fn: &'a str,
}

/// The G2S copy of one operand for tile `kt_var` into stage `stage_var` (with
/// [`G2sMode::Registers`]: the loads into `{x}_reg`; [`r2s_tile`] stores them).
fn g2s_tile(
    p: &Sm80Mainloop,
    sep: Separable,
    name: &str,
    is_a: bool,
    stage: &str,
    kt: &str,
    mode: G2sMode,
) -> Vec<Stmt> {
    let (x, g, st_elems, ld, gsep) = if is_a {
        ("a", &p.g2s_a, p.stage_elems_a, "lda", sep.g2s_a)
    } else {
        ("b", &p.g2s_b, p.stage_elems_b, "ldb", sep.g2s_b)
    };
    let sx = if is_a { "sA" } else { "sB" };
    let gx = if is_a { "gA" } else { "gB" };
    let sfn = if is_a {
        format!("{name}_sA")
    } else {
        format!("{name}_sB")
    };
    let _ = ld;
    let bk = p.config.tile[2];
    let ta = p.config.a.cuda_type();
    let v = g.vec;
    let dst = if gsep {
        format!(
            "{sx} + {stage} * {st_elems} + ({x}_s0 ^ {sfn}(p * {}, p * {}))",
            g.pass_step[0], g.pass_step[1]
        )
    } else {
        format!("{sx} + {stage} * {st_elems} + {x}_smem[p]")
    };
    let mut body = Vec::new();
    let (tile_ptr, pred) = match g.major {
        Major::K => {
            body.push(dc(
                "const bool",
                &format!("{x}_kp"),
                format!("{kt} * {bk} < {x}_krem"),
                format!("whole {v}-vectors along K: K % {v} == 0"),
            ));
            (
                format!("{x}_src + {kt} * {bk}"),
                format!("{x}_kp && (({x}_pred_mn >> p) & 1)"),
            )
        }
        Major::MN => (
            format!("{x}_src + (long long)({kt} * {bk}) * {ld}"),
            format!("{x}_pred_mn && ({kt} * {bk} + p * {} < {x}_krem)", g.pass_step[1]),
        ),
    };
    body.push(d(&format!("const {ta}*"), &format!("{x}_ptr"), tile_ptr));
    let _ = gx;
    let passes = match mode {
        G2sMode::CpAsync => vec![
            d("const bool", "pred", pred),
            c(format!("predicated off: src-size 0 zero-fills; the address is then only the kernel parameter {}", &gx[1..])),
            e(format!("rc_cp_async_cg_16_zfill({dst}, pred ? static_cast<const void*>({x}_ptr) : static_cast<const void*>({}), pred)", &gx[1..])),
            e(format!("{x}_ptr += {x}_pass")),
        ],
        G2sMode::Registers => vec![
            d("const bool", "pred", pred),
            Stmt::Assign {
                lhs: format!("{x}_reg[p]"),
                rhs: format!("pred ? __ldg(reinterpret_cast<const uint4*>({x}_ptr)) : make_uint4(0u, 0u, 0u, 0u)"),
                comment: Some("predicated off: zeros".into()),
            },
            e(format!("{x}_ptr += {x}_pass")),
        ],
    };
    body.push(Stmt::unrolled("p", g.passes, passes));
    body
}

/// [`G2sMode::Registers`]: store the registers loaded by [`g2s_tile`] into stage `stage`.
fn r2s_tile(p: &Sm80Mainloop, sep: Separable, name: &str, is_a: bool, stage: &str) -> Vec<Stmt> {
    let (x, g, st_elems, gsep) = if is_a {
        ("a", &p.g2s_a, p.stage_elems_a, sep.g2s_a)
    } else {
        ("b", &p.g2s_b, p.stage_elems_b, sep.g2s_b)
    };
    let sx = if is_a { "sA" } else { "sB" };
    let dst = if gsep {
        format!(
            "{sx} + {stage} * {st_elems} + ({x}_s0 ^ {name}_s{}(p * {}, p * {}))",
            if is_a { "A" } else { "B" },
            g.pass_step[0],
            g.pass_step[1]
        )
    } else {
        format!("{sx} + {stage} * {st_elems} + {x}_smem[p]")
    };
    vec![Stmt::unrolled(
        "p",
        g.passes,
        vec![Stmt::assign(
            format!("*reinterpret_cast<uint4*>({dst})"),
            format!("{x}_reg[p]"),
        )],
    )]
}

/// Both operands of the tile in `{a,b}_reg` into stage `stage` ([`G2sMode::Registers`]).
fn r2s_both(p: &Sm80Mainloop, sep: Separable, name: &str, stage: &str) -> Vec<Stmt> {
    let mut v = r2s_tile(p, sep, name, true, stage);
    v.extend(r2s_tile(p, sep, name, false, stage));
    v
}

/// Load k-block `kb` of stage `stage` into fragment buffer `buf`.
fn s2r(p: &Sm80Mainloop, sep: Separable, buf: &str, kb: &str, stage: &str, name: &str) -> Vec<Stmt> {
    let [wm, wn] = p.config.warps;
    let kbk = p.k_block;
    let ldsm_a = if p.lanes_a.trans() {
        "rc_ldmatrix_x4_trans"
    } else {
        "rc_ldmatrix_x4"
    };
    let ldsm_b = if p.lanes_b.trans() {
        "rc_ldmatrix_x4_trans"
    } else {
        "rc_ldmatrix_x4"
    };
    vec![
        Stmt::unrolled(
            "mi",
            p.mma_m,
            vec![e(if sep.s2r_a {
                format!(
                    "{ldsm_a}(sA + {stage} * {} + (lA_off ^ {name}_sA({} * mi, {kb} * {kbk})), fa[{buf}][mi])",
                    p.stage_elems_a,
                    16 * wm
                )
            } else {
                format!(
                    "{ldsm_a}(sA + {stage} * {} + {name}_sA(16 * (warp_m + {wm} * mi) + lA_mn, {kb} * {kbk} + lA_k), fa[{buf}][mi])",
                    p.stage_elems_a
                )
            })],
        ),
        Stmt::unrolled(
            "nj2",
            p.mma_n / 2,
            vec![
                Stmt::Array {
                    ty: "uint32_t".into(),
                    name: "t".into(),
                    len: 4,
                    comment: Some("b0,b1 of N-atom 2*nj2, then of 2*nj2+1".into()),
                },
                e(if sep.s2r_b {
                    format!(
                        "{ldsm_b}(sB + {stage} * {} + (lB_off ^ {name}_sB({} * nj2, {kb} * {kbk})), t)",
                        p.stage_elems_b,
                        16 * wn
                    )
                } else {
                    format!(
                        "{ldsm_b}(sB + {stage} * {} + {name}_sB({} * nj2 + 16 * warp_n + lB_mn, {kb} * {kbk} + lB_k), t)",
                        p.stage_elems_b,
                        16 * wn
                    )
                }),
                Stmt::assign(format!("fb[{buf}][2 * nj2][0]"), "t[0]"),
                Stmt::assign(format!("fb[{buf}][2 * nj2][1]"), "t[1]"),
                Stmt::assign(format!("fb[{buf}][2 * nj2 + 1][0]"), "t[2]"),
                Stmt::assign(format!("fb[{buf}][2 * nj2 + 1][1]"), "t[3]"),
            ],
        ),
    ]
}

fn type_names(cfg: &GemmSm80Config) -> Names {
    Names {
        ta: cfg.a.cuda_type(),
        tc: cfg.c.cuda_type(),
        td: cfg.d.cuda_type(),
    }
}

fn main_kernel(cfg: &GemmSm80Config, p: &Sm80Mainloop, se: &SmemEpilogue, name: &str) -> CFunction {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let stages = p.stages;
    let r = cfg.raster_swizzle;
    let mma_fn = p.mma_atom.fn_name().to_string();
    let opts = MainloopEmit {
        name,
        raster_swizzle: r,
        ticket_offset: se.union_bytes,
        g2s: G2sMode::CpAsync,
        mma_fn: &mma_fn,
    };
    let mut b = mainloop_stmts(p, &opts);
    b.extend(staged_epilogue(
        p,
        se,
        cfg.d,
        cfg.c_major,
        &EpilogueOp::LinearCombination { c: cfg.c },
    ));

    let params = main_params(&type_names(cfg));
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({}, 1)", p.threads),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec![
            format!("D = alpha * A * B + beta * C, {} x {} -> f32 -> C {} / D {} ({}), tile {bm}x{bn}x{bk}, {stages} stages, {wm}x{wn} warps", cfg.a.ptx(), cfg.b.ptx(), cfg.c.ptx(), cfg.d.ptx(), cfg.c_major.tag()),
            format!("grid (tiles_m << {r}, ceil(tiles_n / 2^{r}), L * split_k), block {}, dynamic smem {} bytes", p.threads, p.smem_bytes),
        ],
        body: b,
    }
}

/// The kernel body shared by the SM80-class kernels up to the epilogue: shared-memory
/// carve-up, threadblock rasterization, the serial split-K ticket, this CTA's tile, batch
/// and K range, the G2S / S2R setup, the prologue, the mainloop over the K tiles
/// (accumulators `acc[mma_m][mma_n][4]` of the plan's accumulator type) and the final
/// wait + `__syncthreads()` after which the mainloop's shared memory may be reused.
/// The kernel must have the parameters `A`, `B`, `semaphores`, `M`, `N`, `K`, `L`,
/// `lda`, `ldb`, `batch_stride_a`, `batch_stride_b`, `split_k`, `k_tiles_per_split` and
/// `split_serial`; the statements declare (among others) `tid`, `lane`, `warp_m`,
/// `warp_n`, `tiles_m`, `tiles_n`, `tile_m`, `tile_n`, `serial_k`, `split`, `batch`,
/// `m0`, `n0` and `rc_smem` for the epilogue.
pub(crate) fn mainloop_stmts(p: &Sm80Mainloop, opts: &MainloopEmit) -> Vec<Stmt> {
    let name = opts.name;
    let ta = p.config.a.cuda_type();
    let [bm, bn, bk] = p.config.tile;
    let [wm, wn] = p.config.warps;
    let stages = p.stages;
    let r = opts.raster_swizzle;
    let mode = opts.g2s;
    let kbk = p.k_block;
    let sep = separable(p);
    let mut b: Vec<Stmt> = Vec::new();

    b.push(c(format!(
        "Shared memory: sA {} | sB {}",
        p.smem_layout_a, p.smem_layout_b
    )));
    b.push(e("extern __shared__ __align__(128) unsigned char rc_smem[]"));
    b.push(dc(
        &format!("{ta}* const"),
        "sA",
        format!("reinterpret_cast<{ta}*>(rc_smem)"),
        format!("(BM,BK,PIPE) = ({bm},{bk},{stages})"),
    ));
    b.push(dc(
        &format!("{ta}* const"),
        "sB",
        format!("sA + {}", p.stage_elems_a * stages as i64),
        format!("(BN,BK,PIPE) = ({bn},{bk},{stages})"),
    ));
    b.push(d("const int", "tid", "threadIdx.x"));
    b.push(dc(
        "const int",
        "lane",
        "tid % 32",
        "thr_layout_vmnk = 32 x (WM,WN,1): thread = lane + 32 * (warp_m + WM * warp_n)",
    ));
    b.push(d("const int", "warp_m", format!("(tid / 32) % {wm}")));
    b.push(d("const int", "warp_n", format!("(tid / 32) / {wm}")));

    b.push(c(format!(
        "Threadblock rasterization: CUTLASS identity swizzle, 2^{r} tiles along N per group"
    )));
    b.push(d("const int", "tiles_m", format!("(M + {}) / {bm}", bm - 1)));
    b.push(d("const int", "tiles_n", format!("(N + {}) / {bn}", bn - 1)));
    b.push(dc(
        "const bool",
        "serial_k",
        "split_serial != 0 && split_k > 1",
        "serial (semaphore-ordered) split-K",
    ));
    b.push(d("int", "bx", "(int)blockIdx.x"));
    b.push(d("int", "by", "(int)blockIdx.y"));
    b.push(d("int", "bz", "(int)blockIdx.z"));
    b.push(c(
        "Serial split-K is deadlock-free by construction: every CTA takes a ticket when it starts and runs work item",
    ));
    b.push(c(
        "`ticket` in (x, y, z) order with z = split * L + batch, so the split s-1 a CTA waits for holds a smaller",
    ));
    b.push(c(
        "ticket: it was taken by a CTA that is already resident (or done), whatever order the hardware starts CTAs in.",
    ));
    b.push(c(
        "The last ticket resets the counter (semaphores[0]) for the next launch.",
    ));
    b.push(dc(
        "int* const",
        "rc_ticket",
        format!("reinterpret_cast<int*>(rc_smem + {})", opts.ticket_offset),
        "16 bytes after the mainloop / epilogue union (no static smem: it would count against the 48 KB default)",
    ));
    b.push(if_(
        "serial_k",
        vec![
            if_(
                "tid == 0",
                vec![
                    d("const int", "total", "(int)(gridDim.x * gridDim.y * gridDim.z)"),
                    d("const int", "t", "atomicAdd(semaphores, 1)"),
                    if_("t == total - 1", vec![e("atomicExch(semaphores, 0)")]),
                    Stmt::assign("*rc_ticket", "t"),
                ],
            ),
            e("__syncthreads()"),
            Stmt::assign("bx", "*rc_ticket % (int)gridDim.x"),
            Stmt::assign("by", "(*rc_ticket / (int)gridDim.x) % (int)gridDim.y"),
            Stmt::assign("bz", "*rc_ticket / (int)(gridDim.x * gridDim.y)"),
        ],
    ));
    b.push(d("const int", "tile_m", format!("bx >> {r}")));
    b.push(d(
        "const int",
        "tile_n",
        format!("(by << {r}) + (bx & {})", (1u32 << r) - 1),
    ));
    b.push(if_("tile_m >= tiles_m || tile_n >= tiles_n", vec![Stmt::Return]));
    b.push(dc(
        "const int",
        "split",
        "bz / L",
        "the split is the slowest-varying grid index: z = split * L + batch",
    ));
    b.push(d("const int", "batch", "bz % L"));
    b.push(d("const int", "m0", format!("tile_m * {bm}")));
    b.push(d("const int", "n0", format!("tile_n * {bn}")));
    b.push(dc(
        "const int",
        "k_begin",
        format!("split * k_tiles_per_split * {bk}"),
        "this split's K range",
    ));
    b.push(d(
        "const int",
        "k_end",
        format!("min(K, k_begin + k_tiles_per_split * {bk})"),
    ));
    b.push(d(
        "int",
        "k_tile_count",
        format!("k_end > k_begin ? (k_end - k_begin + {}) / {bk} : 0", bk - 1),
    ));
    b.push(d(&format!("const {ta}* const"), "gA", "A + batch * batch_stride_a"));
    b.push(d(&format!("const {ta}* const"), "gB", "B + batch * batch_stride_b"));

    // G2S setup for both operands.
    for (is_a, x, g, mn_total, m_or_n0, ld, sfn) in [
        (true, "a", &p.g2s_a, "M", "m0", "lda", format!("{name}_sA")),
        (false, "b", &p.g2s_b, "N", "n0", "ldb", format!("{name}_sB")),
    ] {
        let gx = if is_a { "gA" } else { "gB" };
        let gsep = if is_a { sep.g2s_a } else { sep.g2s_b };
        let (tmn, tk) = g.thread_extents();
        let v = g.vec;
        b.push(c(format!(
            "G2S {}: {}, thr_layout {} x val_layout {}, {} passes",
            if is_a { "A" } else { "B" },
            match mode {
                G2sMode::CpAsync => "cp.async.cg 16 B (zero fill)",
                G2sMode::Registers =>
                    "ld.global.nc 16 B into registers (zeros when predicated off), st.shared after the tile",
            },
            g.thr_layout,
            g.val_layout,
            g.passes
        )));
        match g.major {
            Major::K => {
                b.push(dc(
                    "const int",
                    &format!("{x}_mn"),
                    format!("tid / {tk}"),
                    format!("thr_layout ({tmn},{tk}):({tk},1)"),
                ));
                b.push(d("const int", &format!("{x}_k"), format!("tid % {tk} * {v}")));
                b.push(dc(
                    &format!("const {ta}* const"),
                    &format!("{x}_src"),
                    format!("{gx} + (long long)({m_or_n0} + {x}_mn) * {ld} + (k_begin + {x}_k)"),
                    format!("K-major: ({mn_total},K):({ld},1)"),
                ));
                b.push(d("uint32_t", &format!("{x}_pred_mn"), "0"));
                b.push(Stmt::unrolled(
                    "p",
                    g.passes,
                    vec![e(format!(
                        "{x}_pred_mn |= ({m_or_n0} + {x}_mn + p * {} < {mn_total} ? 1u : 0u) << p",
                        g.pass_step[0]
                    ))],
                ));
                b.push(dc(
                    "const long long",
                    &format!("{x}_pass"),
                    format!("{} * {ld}", g.pass_step[0]),
                    "gmem step between passes",
                ));
                b.push(dc(
                    "const int",
                    &format!("{x}_krem"),
                    format!("k_end - k_begin - {x}_k"),
                    "K left for this thread's first vector",
                ));
                b.extend(smem_setup(gsep, &sfn, x, g));
            }
            Major::MN => {
                b.push(dc(
                    "const int",
                    &format!("{x}_mn"),
                    format!("tid % {tmn} * {v}"),
                    format!("thr_layout ({tmn},{tk}):(1,{tmn})"),
                ));
                b.push(d("const int", &format!("{x}_k"), format!("tid / {tmn}")));
                b.push(dc(
                    &format!("const {ta}* const"),
                    &format!("{x}_src"),
                    format!("{gx} + (long long)(k_begin + {x}_k) * {ld} + ({m_or_n0} + {x}_mn)"),
                    format!("MN-major: ({mn_total},K):(1,{ld})"),
                ));
                b.push(dc(
                    "const bool",
                    &format!("{x}_pred_mn"),
                    format!("{m_or_n0} + {x}_mn < {mn_total}"),
                    "a vector past the edge reads ld padding that only feeds unstored outputs",
                ));
                b.push(dc(
                    "const long long",
                    &format!("{x}_pass"),
                    format!("{} * {ld}", g.pass_step[1]),
                    "gmem step between passes",
                ));
                b.push(dc(
                    "const int",
                    &format!("{x}_krem"),
                    format!("k_end - k_begin - {x}_k"),
                    "K left for this thread's first vector",
                ));
                b.extend(smem_setup(gsep, &sfn, x, g));
            }
        }
    }

    // Prologue.
    b.push(c(format!(
        "Prologue: start the loads of the first {} tiles",
        stages - 1
    )));
    b.push(d("int", "k_tile_next", "0"));
    if mode == G2sMode::Registers {
        for (x, g) in [("a", &p.g2s_a), ("b", &p.g2s_b)] {
            b.push(Stmt::Array {
                ty: "uint4".into(),
                name: format!("{x}_reg"),
                len: g.passes as usize,
                comment: Some("the tile in flight: loaded while the previous one is multiplied".into()),
            });
        }
    }
    let mut pro = g2s_tile(p, sep, name, true, "s", "k_tile_next", mode);
    pro.extend(g2s_tile(p, sep, name, false, "s", "k_tile_next", mode));
    match mode {
        G2sMode::CpAsync => pro.push(e("rc_cp_async_commit_group()")),
        G2sMode::Registers => pro.extend(r2s_both(p, sep, name, "s")),
    }
    pro.push(e("++k_tile_next"));
    pro.push(e("--k_tile_count"));
    b.push(Stmt::unrolled("s", stages - 1, pro));

    // Fragments and accumulators.
    let (mm, nn, kb) = (p.mma_m, p.mma_n, p.k_blocks);
    // The register double buffer of CuTe's mainloop costs 2x the fragments; with 128
    // accumulators per thread (64x64 warp tiles) it does not fit 255 registers on sm_90a.
    let reg_pipeline = p.acc_per_thread() < 128;
    let nbuf = if !reg_pipeline {
        1
    } else if kb % 2 == 0 {
        2
    } else {
        kb
    };
    b.push(c(format!(
        "TiledMMA {} x (WM,WN,1)=({wm},{wn},1), permutation N (8,{wn},2):(1,16,8): warp tile {}x{}, {mm}x{nn} atoms",
        p.mma_atom.name, p.warp_tile[0], p.warp_tile[1]
    )));
    b.push(c(format!(
        "C fragment per atom: layout {} (m = lane/4 + 8*(v/2), n = 2*(lane%4) + v%2)",
        p.mma_atom.c_tv
    )));
    let (acc_ty, zero) = match p.config.acc {
        Element::S32 => ("int32_t", "0"),
        _ => ("float", "0.0f"),
    };
    b.push(Stmt::Array {
        ty: acc_ty.into(),
        name: format!("acc[{mm}][{nn}]"),
        len: 4,
        comment: None,
    });
    b.push(Stmt::unrolled(
        "mi",
        mm,
        vec![Stmt::unrolled(
            "nj",
            nn,
            vec![Stmt::unrolled("v", 4, vec![Stmt::assign("acc[mi][nj][v]", zero)])],
        )],
    ));
    b.push(Stmt::Array {
        ty: "uint32_t".into(),
        name: format!("fa[{nbuf}][{mm}]"),
        len: 4,
        comment: Some(format!(
            "A fragments: {nbuf} register buffers over the {kb} k-blocks (2 when even, else one per k-block)"
        )),
    });
    b.push(Stmt::Array {
        ty: "uint32_t".into(),
        name: format!("fb[{nbuf}][{nn}]"),
        len: 2,
        comment: Some("B fragments".into()),
    });
    let (amn, ak) = p.lanes_a.lane_coord_cpp_vec("lane", p.g2s_a.vec);
    let (bmn, bk_) = p.lanes_b.lane_coord_cpp_vec("lane", p.g2s_b.vec);
    b.push(c(format!(
        "ldmatrix.x4 lane -> (mn, k) row of a 16x{kbk} sub-tile: A {} ({}), B {} ({})",
        p.s2r_a.name,
        if p.lanes_a.trans() {
            "rows along K"
        } else {
            "rows along M"
        },
        p.s2r_b.name,
        if p.lanes_b.trans() {
            "rows along K"
        } else {
            "rows along N"
        }
    )));
    b.push(d("const int", "lA_mn", amn));
    b.push(d("const int", "lA_k", ak));
    b.push(d("const int", "lB_mn", bmn));
    b.push(d("const int", "lB_k", bk_));
    if sep.s2r_a {
        b.push(dc(
            "const int",
            "lA_off",
            format!("{name}_sA(16 * warp_m + lA_mn, lA_k)"),
            "sA(t + s) == sA(t) ^ sA(s) for every thread part t and unrolled part s (checked by the generator)",
        ));
    }
    if sep.s2r_b {
        b.push(dc(
            "const int",
            "lB_off",
            format!("{name}_sB(16 * warp_n + lB_mn, lB_k)"),
            "sB(t + s) == sB(t) ^ sB(s) (checked by the generator)",
        ));
    }
    b.push(d("int", "read_stage", "0"));
    // The register-pipelined Turing loop stores the next tile into the stage it computes
    // from (two stages), so it needs no write index.
    let uses_write_stage = !(reg_pipeline && mode == G2sMode::Registers);
    if uses_write_stage {
        b.push(d("int", "write_stage", format!("{}", stages - 1)));
    }
    if reg_pipeline {
        b.push(dc("int", "frag_stage", "0", "the stage the register pipeline reads"));
    }
    if kb > 1 && reg_pipeline {
        b.push(c("Wait for the first tile; load its k-block 0 into registers"));
        if mode == G2sMode::CpAsync {
            b.push(e(format!("rc_cp_async_wait_group<{}>()", stages - 2)));
        }
        b.push(e("__syncthreads()"));
        b.extend(s2r(p, sep, "0", "0", "frag_stage", name));
    }

    // Main loop.
    let mut kbody = Vec::new();
    let next_tile = match mode {
        G2sMode::CpAsync => vec![
            c("the next tile: wait until it has landed and every warp is done with the stage about to be overwritten"),
            Stmt::assign("frag_stage", "read_stage"),
            e(format!("rc_cp_async_wait_group<{}>()", stages - 2)),
            e("__syncthreads()"),
        ],
        G2sMode::Registers => {
            let mut v = vec![c(
                "the next tile: store its registers into read_stage (with 2 stages the stage loaded at kb == 0 is the one read next; every warp finished reading it before the previous __syncthreads)",
            )];
            v.extend(r2s_both(p, sep, name, "read_stage"));
            v.push(Stmt::assign("frag_stage", "read_stage"));
            v.push(e("__syncthreads()"));
            v
        }
    };
    kbody.push(if_(format!("kb == {}", kb - 1), next_tile));
    let mut issue = vec![match mode {
        G2sMode::CpAsync => c("issue the cp.async loads of tile k_tile_next into the free stage (before the ldmatrix below: fewer live registers)"),
        G2sMode::Registers => c("load tile k_tile_next into registers (stored to shared memory after this tile's last k-block)"),
    }];
    issue.extend(g2s_tile(p, sep, name, true, "write_stage", "k_tile_next", mode));
    issue.extend(g2s_tile(p, sep, name, false, "write_stage", "k_tile_next", mode));
    if mode == G2sMode::CpAsync {
        issue.push(e("rc_cp_async_commit_group()"));
    }
    issue.push(e("++k_tile_next"));
    issue.push(e("--k_tile_count"));
    if uses_write_stage {
        issue.push(Stmt::assign("write_stage", "read_stage"));
    }
    issue.push(Stmt::assign(
        "read_stage",
        format!("read_stage + 1 == {stages} ? 0 : read_stage + 1"),
    ));
    kbody.push(if_("kb == 0", issue));
    kbody.push(c(
        "ldmatrix k-block kb+1 (of this tile, or k-block 0 of the next) into the next register buffer",
    ));
    kbody.extend(s2r(
        p,
        sep,
        &format!("(kb + 1) % {nbuf}"),
        &format!("((kb + 1) % {kb})"),
        "frag_stage",
        name,
    ));
    kbody.push(Stmt::unrolled(
        "mi",
        mm,
        vec![Stmt::unrolled(
            "nj",
            nn,
            vec![e(format!(
                "{}(acc[mi][nj], fa[kb % {nbuf}][mi], fb[kb % {nbuf}][nj], acc[mi][nj])",
                opts.mma_fn
            ))],
        )],
    ));
    let cond = format!("k_tile_count > {}", -(stages as i64 - 1));
    if reg_pipeline {
        b.push(c(format!(
            "Main loop: one K tile per iteration, {kb} k-blocks of {kbk} per tile, register double buffer"
        )));
        b.push(Stmt::While {
            cond,
            body: vec![Stmt::unrolled("kb", kb, kbody)],
        });
    } else {
        // Large warp tiles (128 accumulators per thread): no explicit register pipeline;
        // ptxas schedules the ldmatrix of the unrolled k-blocks within its register budget.
        let mut wbody = match mode {
            G2sMode::CpAsync => vec![
                c("tile in read_stage has landed and every warp is done with write_stage"),
                e(format!("rc_cp_async_wait_group<{}>()", stages - 2)),
                e("__syncthreads()"),
                c("issue the cp.async loads of tile k_tile_next into the free stage"),
            ],
            G2sMode::Registers => vec![
                c("tile in read_stage is in shared memory and every warp is done with write_stage"),
                e("__syncthreads()"),
                c("load tile k_tile_next into registers (stored to write_stage after this tile's k-blocks)"),
            ],
        };
        wbody.extend(g2s_tile(p, sep, name, true, "write_stage", "k_tile_next", mode));
        wbody.extend(g2s_tile(p, sep, name, false, "write_stage", "k_tile_next", mode));
        if mode == G2sMode::CpAsync {
            wbody.push(e("rc_cp_async_commit_group()"));
        }
        wbody.push(e("++k_tile_next"));
        wbody.push(e("--k_tile_count"));
        let mut kb_body = s2r(p, sep, "0", "kb", "read_stage", name);
        kb_body.push(Stmt::unrolled(
            "mi",
            mm,
            vec![Stmt::unrolled(
                "nj",
                nn,
                vec![e(format!(
                    "{}(acc[mi][nj], fa[0][mi], fb[0][nj], acc[mi][nj])",
                    opts.mma_fn
                ))],
            )],
        ));
        wbody.push(Stmt::unrolled("kb", kb, kb_body));
        if mode == G2sMode::Registers {
            wbody.push(c("the next tile into the free stage"));
            wbody.extend(r2s_both(p, sep, name, "write_stage"));
        }
        wbody.push(Stmt::assign("write_stage", "read_stage"));
        wbody.push(Stmt::assign(
            "read_stage",
            format!("read_stage + 1 == {stages} ? 0 : read_stage + 1"),
        ));
        b.push(c(format!(
            "Main loop: one K tile per iteration, {kb} k-blocks of {kbk} per tile (ldmatrix + mma per k-block)"
        )));
        b.push(Stmt::While { cond, body: wbody });
    }
    if mode == G2sMode::CpAsync {
        b.push(e("rc_cp_async_wait_group<0>()"));
    }
    b.push(c(
        "every warp is done with the mainloop's shared memory: the epilogue staging buffer is a union with it",
    ));
    b.push(e("__syncthreads()"));
    b
}

/// The smem offsets of a thread's G2S vectors: one base when the swizzle separates
/// (`x_s0`, each pass XORs a constant), else one precomputed offset per pass.
fn smem_setup(sep: bool, sfn: &str, x: &str, g: &rcute_collective::G2sCopy) -> Vec<Stmt> {
    if sep {
        vec![dc(
            "const int",
            &format!("{x}_s0"),
            format!("{sfn}({x}_mn, {x}_k)"),
            "pass p at s0 ^ smem(p * step) (checked by the generator)",
        )]
    } else {
        vec![
            Stmt::Array {
                ty: "int".into(),
                name: format!("{x}_smem"),
                len: g.passes as usize,
                comment: None,
            },
            Stmt::unrolled(
                "p",
                g.passes,
                vec![Stmt::assign(
                    format!("{x}_smem[p]"),
                    format!("{sfn}({x}_mn + p * {}, {x}_k + p * {})", g.pass_step[0], g.pass_step[1]),
                )],
            ),
        ]
    }
}

fn main_params(t: &Names) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vec![
        (format!("const {}* __restrict__", t.ta), "A".into()),
        (format!("const {}* __restrict__", t.ta), "B".into()),
        (format!("const {}*", t.tc), "C".into()),
        (format!("{}*", t.td), "D".into()),
        ("float*".into(), "workspace".into()),
        ("int*".into(), "semaphores".into()),
    ];
    for n in ["M", "N", "K", "L"] {
        v.push(("int".into(), n.into()));
    }
    for n in [
        "lda",
        "ldb",
        "ldc",
        "ldd",
        "batch_stride_a",
        "batch_stride_b",
        "batch_stride_c",
        "batch_stride_d",
    ] {
        v.push(("long long".into(), n.into()));
    }
    v.push(("float".into(), "alpha".into()));
    v.push(("float".into(), "beta".into()));
    v.push(("int".into(), "split_k".into()));
    v.push(("int".into(), "k_tiles_per_split".into()));
    v.push(("int".into(), "split_serial".into()));
    v
}

fn reduce_kernel(cfg: &GemmSm80Config, ep: &EpiloguePlan, name: &str) -> CFunction {
    let t = type_names(cfg);
    let row_major = cfg.c_major == StorageOrder::RowMajor;
    let (mexpr, nexpr) = if row_major {
        ("(int)(i / N)", "(int)(i % N)")
    } else {
        ("(int)(i % M)", "(int)(i / M)")
    };
    let off = |ld: &str| {
        if row_major {
            format!("(long long)m * {ld} + n")
        } else {
            format!("(long long)n * {ld} + m")
        }
    };
    let inner = vec![
        d("const int", "m", mexpr),
        d("const int", "n", nexpr),
        d("float", "s", "0.0f"),
        Stmt::For {
            var: "p".into(),
            start: "0".into(),
            end: "split_k".into(),
            unroll: false,
            body: vec![e("s += workspace[((long long)batch * split_k + p) * mn + i]")],
        },
        d("float", "v", "alpha * s"),
        if_(
            "beta != 0.0f",
            vec![e(format!(
                "v += beta * {}",
                ep.c_to_f32_cpp(&format!("gC[{}]", off("ldc")))
            ))],
        ),
        Stmt::assign(format!("gD[{}]", off("ldd")), ep.to_d_cpp("v")),
    ];
    let mut body = vec![
        d("const long long", "mn", "(long long)M * N"),
        d("const int", "batch", "blockIdx.y"),
        d(&format!("const {}* const", t.tc), "gC", "C + batch * batch_stride_c"),
        d(&format!("{}* const", t.td), "gD", "D + batch * batch_stride_d"),
        c(format!(
            "one thread per workspace index i = {} (the order of D)",
            if row_major { "m * N + n" } else { "n * M + m" }
        )),
        d(
            "const long long",
            "i",
            "(long long)blockIdx.x * blockDim.x + threadIdx.x",
        ),
        if_("i >= mn", vec![Stmt::Return]),
    ];
    body.extend(inner);
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({REDUCE_THREADS})"),
        ret: "void".into(),
        name: format!("{name}_splitk_reduce"),
        params: vec![
            ("const float* __restrict__".into(), "workspace".into()),
            (format!("const {}*", t.tc), "C".into()),
            (format!("{}*", t.td), "D".into()),
            ("int".into(), "M".into()),
            ("int".into(), "N".into()),
            ("int".into(), "split_k".into()),
            ("long long".into(), "ldc".into()),
            ("long long".into(), "ldd".into()),
            ("long long".into(), "batch_stride_c".into()),
            ("long long".into(), "batch_stride_d".into()),
            ("float".into(), "alpha".into()),
            ("float".into(), "beta".into()),
        ],
        doc: vec![
            "Parallel split-K reduction: D = convert(alpha * sum_p workspace[p] + beta * C); grid (blocks, L).".into(),
        ],
        body,
    }
}

/// Generate the kernels of a configuration.
pub fn generate(cfg: &GemmSm80Config) -> Result<GeneratedGemm, GemmError> {
    if cfg.raster_swizzle > 5 {
        return Err(GemmError::Config(format!(
            "raster_swizzle={} (at most 5)",
            cfg.raster_swizzle
        )));
    }
    let plan = Sm80Mainloop::new(&cfg.mainloop())?;
    let ecfg = EpilogueConfig {
        c: cfg.c,
        d: cfg.d,
        order: cfg.c_major,
    };
    let ep = EpiloguePlan::new(&ecfg)?;
    let se = SmemEpilogue::new(&ecfg, &plan)?;
    let name = kernel_name(cfg, plan.stages);
    let mut config = cfg.clone();
    config.stages = Some(plan.stages);

    let cp = cp_async(CacheOp::CacheGlobal, 16, true).ok_or_else(|| GemmError::Config("no cp.async op".into()))?;
    let mut snippets: Vec<Snippet> = vec![cp.snippet, cp_async_commit_group(), cp_async_wait_group()];
    snippets.push(plan.s2r_a.snippet.clone());
    if plan.s2r_b.snippet.name != plan.s2r_a.snippet.name {
        snippets.push(plan.s2r_b.snippet.clone());
    }
    snippets.push(plan.mma_atom.snippet.clone());
    let mut items = unit_preamble(&snippets, UINTPTR_FOR_NVRTC);
    items.push(Item::Function(smem_fn(
        &format!("{name}_sA"),
        &plan.smem_layout_a,
        "A",
    )?));
    items.push(Item::Function(smem_fn(
        &format!("{name}_sB"),
        &plan.smem_layout_b,
        "B",
    )?));
    items.push(Item::Snippet {
        origin: "rcute serial split-K".into(),
        code: SEMAPHORE_HELPERS.into(),
    });
    items.push(Item::Function(main_kernel(&config, &plan, &se, &name)));
    items.push(Item::Function(reduce_kernel(&config, &ep, &name)));
    let [bm, bn, bk] = cfg.tile;
    let unit = Unit {
        header: vec![
            format!("{name}: generated by rcute (crates/kernel/src/gemm_sm80.rs); do not edit."),
            format!(
                "A {} {:?}-major, B {} {:?}-major, C {} / D {} {}-major, tile {bm}x{bn}x{bk}, warps {}x{}, {} stages, raster swizzle {}",
                cfg.a.ptx(),
                cfg.a_major,
                cfg.b.ptx(),
                cfg.b_major,
                cfg.c.ptx(),
                cfg.d.ptx(),
                cfg.c_major.tag(),
                cfg.warps[0],
                cfg.warps[1],
                plan.stages,
                cfg.raster_swizzle
            ),
            format!("smem atoms: A {} | B {}", plan.smem_atom_a, plan.smem_atom_b),
            format!("S2R: A {} | B {}; MMA {}", plan.s2r_a.name, plan.s2r_b.name, plan.mma_atom.name),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedGemm {
        reduce_name: format!("{name}_splitk_reduce"),
        name,
        source: unit.render(),
        threads: plan.threads as u32,
        smem_bytes: (se.union_bytes + TICKET_SMEM) as u32,
        tile: cfg.tile,
        reduce_threads: REDUCE_THREADS,
        config,
        plan,
        epilogue: se,
    })
}

/// The device helpers of serial split-K: a gpu-scope acquire load and release store.
pub const SEMAPHORE_HELPERS: &str = r#"// rcute serial split-K semaphore: gpu-scope acquire load / release store of a global int.
__device__ __forceinline__ int rc_ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void rc_st_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
"#;

/// `v[e] += beta * C[e]` for the `vec` elements of one full, aligned vector of C at `ptr`.
fn c_vector_add(ce: Element, vec: i64, ptr: &str) -> Vec<Stmt> {
    let bytes = vec * ce.bytes() as i64;
    let mut out = Vec::new();
    match ce {
        Element::F32 => {
            for j in 0..vec / 4 {
                out.push(d(
                    "const float4",
                    &format!("c{j}"),
                    format!("*(reinterpret_cast<const float4*>({ptr}) + {j})"),
                ));
                for (x, f) in ["x", "y", "z", "w"].iter().enumerate() {
                    out.push(e(format!("v[{}] += beta * c{j}.{f}", 4 * j + x as i64)));
                }
            }
        }
        _ => {
            // 16-bit C: 32-bit words of two elements, loaded as uint4 (16 B) or uint2 (8 B).
            let words = bytes / 4;
            let (vt, per) = if bytes >= 16 { ("uint4", 4) } else { ("uint2", 2) };
            let fields = ["x", "y", "z", "w"];
            for j in 0..words / per {
                out.push(d(
                    &format!("const {vt}"),
                    &format!("c{j}"),
                    format!("*(reinterpret_cast<const {vt}*>({ptr}) + {j})"),
                ));
                for w in 0..per {
                    let word = format!("c{j}.{}", fields[w as usize]);
                    let (lo, hi) = match ce {
                        Element::BF16 => (
                            format!("__uint_as_float({word} << 16)"),
                            format!("__uint_as_float({word} & 0xffff0000u)"),
                        ),
                        _ => (
                            format!("__half2float(__ushort_as_half((unsigned short)({word} & 0xffffu)))"),
                            format!("__half2float(__ushort_as_half((unsigned short)({word} >> 16)))"),
                        ),
                    };
                    let base = 2 * (j * per + w);
                    out.push(e(format!("v[{base}] += beta * {lo}")));
                    out.push(e(format!("v[{}] += beta * {hi}", base + 1)));
                }
            }
        }
    }
    out
}

/// Store `v[0..vec]` converted to D as one 16-byte vector at `ptr`.
fn d_vector_store(de: Element, vec: i64, ptr: &str) -> Stmt {
    d_vector_store_from(de, vec, ptr, "v")
}

/// Store the floats `arr[0..vec]` converted to D as one 16-byte vector at `ptr`.
fn d_vector_store_from(de: Element, vec: i64, ptr: &str, arr: &str) -> Stmt {
    let v = arr;
    match de {
        Element::F32 => e(format!(
            "*reinterpret_cast<float4*>({ptr}) = make_float4({v}[0], {v}[1], {v}[2], {v}[3])"
        )),
        _ => {
            let h = |i: i64| match de {
                Element::BF16 => format!("(unsigned)__bfloat16_as_ushort(__float2bfloat16_rn({v}[{i}]))"),
                _ => format!("(unsigned)__half_as_ushort(__float2half_rn({v}[{i}]))"),
            };
            let words: Vec<String> = (0..vec / 2)
                .map(|w| format!("{} | ({} << 16)", h(2 * w), h(2 * w + 1)))
                .collect();
            e(format!(
                "*reinterpret_cast<uint4*>({ptr}) = make_uint4({})",
                words.join(", ")
            ))
        }
    }
}

/// What the staged epilogue computes from the (complete) accumulator sum of an element.
pub(crate) enum EpilogueOp<'a> {
    /// `D = convert(alpha * acc + beta * C)`, C of type `c` read only when `beta != 0`
    /// (kernel parameters `C`, `ldc`, `batch_stride_c`, `alpha`, `beta`).
    LinearCombination {
        /// C's element type.
        c: Element,
    },
    /// `D = convert(visit(ep, (float)acc, 0.0f, m, n, batch))`: a fusion that reads no C,
    /// its parameter struct in the kernel parameter `ep`. The visit function is called for
    /// in-bounds elements only.
    Visit {
        /// The fusion's visit function.
        visit_fn: &'a str,
    },
}

/// The shared-memory staged epilogue (see [`SmemEpilogue`]): slab by slab, the
/// accumulators are written to shared memory, then each thread reads 16-byte output
/// vectors and (by mode) stores its partial (of the accumulator type: f32, or s32 for
/// integer GEMMs, so that split-K sums stay exact) to the workspace (parallel split-K, or
/// a serial split that is not the last), or adds the workspace partial (serial split > 0)
/// and applies the epilogue `op` and the conversion to D (kernel parameters `D`, `ldd`,
/// `batch_stride_d`, `workspace` of the accumulator type).
pub(crate) fn staged_epilogue(
    p: &Sm80Mainloop,
    se: &SmemEpilogue,
    d_elem: Element,
    order: StorageOrder,
    op: &EpilogueOp,
) -> Vec<Stmt> {
    let [wm, wn] = p.config.warps;
    let row_major = order == StorageOrder::RowMajor;
    let v = se.vec;
    let td = d_elem.cuda_type();
    let int_acc = p.config.acc == Element::S32;
    let (at, at2, at4) = if int_acc {
        ("int", "int2", "int4")
    } else {
        ("float", "float2", "float4")
    };
    let mut b = Vec::new();
    b.push(c(format!(
        "Epilogue through shared memory: {} slab(s) of {} rows, staged ({},{}) f32 {}, ld {} (pad {}), chunk swizzle {}; {}-element (16 B) vectors, {} per thread and slab",
        se.passes,
        se.rows_per_pass,
        se.extents[0],
        se.extents[1],
        if row_major { "row-major" } else { "column-major" },
        se.ld,
        se.pad,
        se.swizzle,
        v,
        se.iterations
    )));
    b.push(c(format!(
        "bank wavefronts per tile: writes {} + reads {} (conflict-free: {})",
        se.write_wavefronts, se.read_wavefronts, se.ideal_wavefronts
    )));
    b.push(d(
        &format!("{at}* const"),
        "sE",
        format!("reinterpret_cast<{at}*>(rc_smem)"),
    ));
    b.push(dc(
        "const bool",
        "add_ws",
        "serial_k && split > 0",
        "serial: add the running partial of splits 0..split-1",
    ));
    b.push(dc(
        "const bool",
        "to_ws",
        "split_k > 1 && !(serial_k && split == split_k - 1)",
        format!(
            "store {} partial instead of D",
            if int_acc { "an s32" } else { "an f32" }
        ),
    ));
    b.push(dc(
        &format!("{at}* const"),
        "W",
        "split_k > 1 ? workspace + (serial_k ? (long long)batch : (long long)batch * split_k + split) * M * N : workspace",
        "parallel: one (M,N) slab per (batch, split); serial: one per batch",
    ));
    b.push(d(
        "int* const",
        "sem",
        "serial_k ? semaphores + 1 + ((long long)batch * tiles_m + tile_m) * tiles_n + tile_n : semaphores",
    ));
    if let EpilogueOp::LinearCombination { c: ce } = op {
        b.push(d(
            &format!("const {}* const", ce.cuda_type()),
            "gC",
            "C + batch * batch_stride_c",
        ));
    }
    b.push(d(&format!("{td}* const"), "gD", "D + batch * batch_stride_d"));
    b.push(dc(
        "const bool",
        "d_vec",
        format!("(ldd % {v}) == 0 && (batch_stride_d % {v}) == 0 && (reinterpret_cast<uintptr_t>(D) % 16) == 0"),
        "16-byte D stores",
    ));
    if let EpilogueOp::LinearCombination { c: ce } = op {
        let c_align = (v * ce.bytes() as i64).min(16);
        b.push(d(
            "const bool",
            "c_vec",
            format!(
                "(ldc % {v}) == 0 && (batch_stride_c % {v}) == 0 && (reinterpret_cast<uintptr_t>(C) % {c_align}) == 0"
            ),
        ));
    }
    b.push(dc(
        "const bool",
        "w_vec",
        format!("({} % {v}) == 0", if row_major { "N" } else { "M" }),
        "16-byte workspace vectors",
    ));

    for q in 0..se.passes {
        let mut pass = Vec::new();
        if q > 0 {
            pass.push(c("every thread is done reading the previous slab"));
            pass.push(e("__syncthreads()"));
        }
        pass.push(c(format!(
            "slab {q}: M-atoms {}..{} of every warp",
            q * se.mi_per_pass,
            (q + 1) * se.mi_per_pass
        )));
        let row = format!("16 * (warp_m + {wm} * mi) + lane / 4 + 8 * h");
        let col = format!("{} * (nj / 2) + 16 * warp_n + 8 * (nj % 2) + 2 * (lane % 4)", 16 * wn);
        let acc = |x: &str| format!("acc[mi + {}][nj][{x}]", q * se.mi_per_pass);
        let mut st = vec![d("const int", "r", row), d("const int", "cc", col)];
        if row_major {
            st.push(e(format!(
                "*reinterpret_cast<{at2}*>(sE + {}) = make_{at2}({}, {})",
                se.offset_cpp("r", "cc"),
                acc("2 * h"),
                acc("2 * h + 1")
            )));
        } else {
            st.push(Stmt::assign(format!("sE[{}]", se.offset_cpp("cc", "r")), acc("2 * h")));
            st.push(Stmt::assign(
                format!("sE[{}]", se.offset_cpp("cc + 1", "r")),
                acc("2 * h + 1"),
            ));
        }
        pass.push(Stmt::unrolled(
            "mi",
            se.mi_per_pass,
            vec![Stmt::unrolled("nj", p.mma_n, vec![Stmt::unrolled("h", 2, st)])],
        ));
        if q == 0 {
            pass.push(c(
                "serial split-K: wait until splits 0..split-1 of this tile are done (acquire)",
            ));
            pass.push(if_(
                "add_ws && tid == 0",
                vec![Stmt::While {
                    cond: "rc_ld_acquire_gpu(sem) != split".into(),
                    body: vec![e("__nanosleep(64)")],
                }],
            ));
        }
        pass.push(e("__syncthreads()"));

        // Read back.
        let mut it = vec![d("const int", "idx", format!("tid + it * {}", se.threads))];
        let mut body = vec![
            d("const int", "so", format!("idx / {}", se.vectors_per_row)),
            d("const int", "si", format!("idx % {} * {v}", se.vectors_per_row)),
        ];
        if row_major {
            body.push(d("const int", "m", format!("m0 + {} + so", q * se.rows_per_pass)));
            body.push(d("const int", "n", "n0 + si"));
        } else {
            body.push(d("const int", "m", format!("m0 + {} + si", q * se.rows_per_pass)));
            body.push(d("const int", "n", "n0 + so"));
        }
        let mut inb = vec![Stmt::Array {
            ty: at.into(),
            name: "v".into(),
            len: v as usize,
            comment: None,
        }];
        for j in 0..v / 4 {
            inb.push(d(
                &format!("const {at4}"),
                &format!("s{j}"),
                format!(
                    "*reinterpret_cast<const {at4}*>(sE + {})",
                    se.offset_cpp("so", &format!("si + {}", 4 * j))
                ),
            ));
            for (x, f) in ["x", "y", "z", "w"].iter().enumerate() {
                inb.push(Stmt::assign(format!("v[{}]", 4 * j + x as i64), format!("s{j}.{f}")));
            }
        }
        inb.push(dc(
            "const int",
            "rem",
            if row_major { "N - n" } else { "M - m" },
            "elements of the vector inside the matrix",
        ));
        inb.push(d("const bool", "full", format!("rem >= {v}")));
        inb.push(d(
            "const long long",
            "wo",
            if row_major {
                "(long long)m * N + n"
            } else {
                "(long long)n * M + m"
            },
        ));
        // Serial: add the running partial (L2 loads: written by other CTAs).
        let mut addw_vec = Vec::new();
        for j in 0..v / 4 {
            addw_vec.push(d(
                &format!("const {at4}"),
                &format!("w{j}"),
                format!("__ldcg(reinterpret_cast<const {at4}*>(W + wo) + {j})"),
            ));
            for (x, f) in ["x", "y", "z", "w"].iter().enumerate() {
                addw_vec.push(e(format!("v[{}] += w{j}.{f}", 4 * j + x as i64)));
            }
        }
        inb.push(if_(
            "add_ws",
            vec![if_else(
                "full && w_vec",
                addw_vec,
                vec![Stmt::unrolled(
                    "x",
                    v,
                    vec![if_("x < rem", vec![e("v[x] += __ldcg(W + wo + x)")])],
                )],
            )],
        ));
        let mut stw_vec = Vec::new();
        for j in 0..v / 4 {
            stw_vec.push(e(format!(
                "__stcg(reinterpret_cast<{at4}*>(W + wo) + {j}, make_{at4}(v[{}], v[{}], v[{}], v[{}]))",
                4 * j,
                4 * j + 1,
                4 * j + 2,
                4 * j + 3
            )));
        }
        let to_ws = vec![if_else(
            "full && w_vec",
            stw_vec,
            vec![Stmt::unrolled(
                "x",
                v,
                vec![if_("x < rem", vec![e("__stcg(W + wo + x, v[x])")])],
            )],
        )];
        let off = |ld: &str| {
            if row_major {
                format!("(long long)m * {ld} + n")
            } else {
                format!("(long long)n * {ld} + m")
            }
        };
        let to_d = match op {
            EpilogueOp::LinearCombination { c: ce } => vec![
                Stmt::unrolled("x", v, vec![e("v[x] *= alpha")]),
                if_(
                    "beta != 0.0f",
                    vec![
                        d("const long long", "co", off("ldc")),
                        if_else(
                            "full && c_vec",
                            c_vector_add(*ce, v, "gC + co"),
                            vec![Stmt::unrolled(
                                "x",
                                v,
                                vec![if_(
                                    "x < rem",
                                    vec![e(format!("v[x] += beta * {}", convert_to_f32(*ce, "gC[co + x]")))],
                                )],
                            )],
                        ),
                    ],
                ),
                d("const long long", "dof", off("ldd")),
                if_else(
                    "full && d_vec",
                    vec![d_vector_store(d_elem, v, "gD + dof")],
                    vec![Stmt::unrolled(
                        "x",
                        v,
                        vec![if_(
                            "x < rem",
                            vec![Stmt::assign("gD[dof + x]", convert_from_f32(d_elem, "v[x]"))],
                        )],
                    )],
                ),
            ],
            EpilogueOp::Visit { visit_fn } => {
                let (vm, vn) = if row_major { ("m", "n + x") } else { ("m + x", "n") };
                let call = format!("{visit_fn}(ep, (float)v[x], 0.0f, {vm}, {vn}, batch)");
                vec![
                    d("const long long", "dof", off("ldd")),
                    if_else(
                        "full && d_vec",
                        vec![
                            Stmt::Array {
                                ty: "float".into(),
                                name: "o".into(),
                                len: v as usize,
                                comment: Some("the fusion at each element of the vector".into()),
                            },
                            Stmt::unrolled("x", v, vec![Stmt::assign("o[x]", call.clone())]),
                            d_vector_store_from(d_elem, v, "gD + dof", "o"),
                        ],
                        vec![Stmt::unrolled(
                            "x",
                            v,
                            vec![if_(
                                "x < rem",
                                vec![Stmt::assign("gD[dof + x]", convert_from_f32(d_elem, &call))],
                            )],
                        )],
                    ),
                ]
            }
        };
        inb.push(if_else("to_ws", to_ws, to_d));
        body.push(if_("m < M && n < N", inb));
        if se.iterations * se.threads > se.vectors_per_pass {
            it.push(if_(format!("idx < {}", se.vectors_per_pass), body));
        } else {
            it.extend(body);
        }
        pass.push(Stmt::unrolled("it", se.iterations, it));
        b.push(Stmt::Block(pass));
    }
    b.push(c(
        "serial split-K: publish this split's partial (release); the last split resets the counter to 0",
    ));
    b.push(if_(
        "serial_k",
        vec![
            e("__syncthreads()"),
            if_(
                "tid == 0",
                vec![
                    e("__threadfence()"),
                    e("rc_st_release_gpu(sem, split == split_k - 1 ? 0 : split + 1)"),
                ],
            ),
        ],
    ));
    b
}
