//! Launch facts (grid, workspace, semaphores, kernel arguments) and the launch helpers.

use super::args::GemmArgs;
use super::config::{GeneratedGemm, SplitKMode};
use super::error::GemmError;
use crate::launch::{Dim3, Function, KernelArgs, LaunchConfig};
use rcute_collective::FusionArgs;

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
        let kt = (k.max(0) as i64 + self.tile[2] - 1) / self.tile[2];
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
        // The kernel waits on its grid dependency first thing (`crate::grid_dependency`).
        LaunchConfig::new(self.grid_split(args.m, args.n, args.l, args.split_k), self.threads)
            .with_dynamic_smem(self.smem_bytes)
            .with_programmatic_dependency(true)
    }

    /// The packed fusion parameters: empty for the linear combination (which takes no
    /// `fusion_args`), else `fusion_args` packed for the configuration's fusion.
    fn fusion_blob(&self, fusion_args: Option<&FusionArgs>) -> Result<Vec<u8>, GemmError> {
        match (self.config.is_linear_combination(), fusion_args) {
            (true, None) => Ok(Vec::new()),
            (false, Some(fa)) => self.pack_fusion_args(fa),
            (true, Some(_)) => Err(GemmError::Config(
                "this kernel's epilogue is the linear combination: launch it with launch / launch_split_k".into(),
            )),
            (false, None) => Err(GemmError::Config(format!(
                "this kernel's epilogue is fusion {}: launch it with launch_fused",
                self.config.fusion.name()
            ))),
        }
    }

    /// The fusion's arguments packed as the kernel's parameter struct (checks their names,
    /// kinds and pointers: [`GemmError::Fusion`]).
    pub fn pack_fusion_args(&self, fusion_args: &FusionArgs) -> Result<Vec<u8>, GemmError> {
        Ok(fusion_args.pack(&self.config.fusion)?)
    }

    /// The main kernel's arguments (see its parameters: C, `ldc`, `batch_stride_c`,
    /// `alpha` and `beta` only with the linear combination, the fusion's struct otherwise).
    fn main_args(&self, a: &GemmArgs, blob: &[u8], early_trigger: bool) -> KernelArgs {
        let lincomb = blob.is_empty();
        let mut ka = KernelArgs::new().u64(a.a).u64(a.b);
        if lincomb {
            ka = ka.u64(a.c);
        }
        let sem = if a.split_k_mode == SplitKMode::Serial {
            a.semaphores
        } else {
            0
        };
        ka = ka
            .u64(a.d)
            .u64(a.workspace)
            .u64(sem)
            .i32(a.m)
            .i32(a.n)
            .i32(a.k)
            .i32(a.l);
        ka = ka.i64(a.lda).i64(a.ldb);
        if lincomb {
            ka = ka.i64(a.ldc);
        }
        ka = ka.i64(a.ldd).i64(a.batch_stride_a).i64(a.batch_stride_b);
        if lincomb {
            ka = ka.i64(a.batch_stride_c);
        }
        ka = ka.i64(a.batch_stride_d);
        if lincomb {
            ka = ka.f32(a.alpha).f32(a.beta);
        }
        ka = ka
            .i32(a.split_k as i32)
            .i32(self.k_tiles_per_split(a.k, a.split_k))
            .i32((a.split_k_mode == SplitKMode::Serial) as i32)
            .i32(i32::from(early_trigger));
        if lincomb {
            ka
        } else {
            ka.blob(blob)
        }
    }

    /// The reduction kernel's arguments (as [`GeneratedGemm::main_args`] for C and the
    /// fusion).
    fn reduce_args(&self, a: &GemmArgs, blob: &[u8]) -> KernelArgs {
        let mut ka = KernelArgs::new().u64(a.workspace);
        if blob.is_empty() {
            ka = ka.u64(a.c).u64(a.d).i32(a.m).i32(a.n).i32(a.split_k as i32);
            ka.i64(a.ldc)
                .i64(a.ldd)
                .i64(a.batch_stride_c)
                .i64(a.batch_stride_d)
                .f32(a.alpha)
                .f32(a.beta)
        } else {
            ka = ka.u64(a.d).i32(a.m).i32(a.n).i32(a.split_k as i32);
            ka.i64(a.ldd).i64(a.batch_stride_d).blob(blob)
        }
    }
}

/// `f` is the kernel named `want`, or [`GemmError::WrongFunction`] (both GEMM families).
pub(crate) fn check_name(f: &Function, want: &str) -> Result<(), GemmError> {
    if f.name() != want {
        return Err(GemmError::WrongFunction {
            expected: want.into(),
            got: f.name().into(),
        });
    }
    Ok(())
}

/// Launch the GEMM (`split_k` must be 1; see [`launch_split_k`]) on the calling thread's
/// launch stream ([`crate::stream_scope`]; by default the function's GPU's stream). The
/// kernel's epilogue must be the linear combination (else [`launch_fused`]).
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
    let blob = g.fusion_blob(None)?;
    args.validate(g)?;
    let lc = g.launch_config(args);
    let early = crate::grid_dependency::early_trigger_for(f, &lc);
    // SAFETY: the parameter list matches the generated kernel's signature; the caller
    // guarantees the buffers.
    unsafe { f.launch(&lc, &g.main_args(args, &blob, early))? };
    Ok(())
}

/// Launch the GEMM with split-K. Parallel: the main kernel writes `split_k` f32 partial
/// products into `args.workspace`, then `reduce` (the `<name>_splitk_reduce` kernel of
/// the same unit) sums them and applies `alpha`, `beta`, C and the conversion to D.
/// Serial: only the main kernel runs (splits ordered by `args.semaphores`). With
/// `split_k == 1` only the main kernel runs. The kernel's epilogue must be the linear
/// combination (else [`launch_fused`]).
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
    let blob = g.fusion_blob(None)?;
    // SAFETY: as documented for this function.
    unsafe { launch_with(main, reduce, g, args, &blob) }
}

/// Launch a GEMM generated with a fusion ([`crate::gemm_sm80::GemmSm80Config::fusion`])
/// with the fusion's arguments (pointers of its broadcasts, its scalars, ...): the main
/// kernel and, with parallel split-K, the reduction kernel that applies the fusion once to
/// the summed partials. `args.alpha` / `args.beta` are not used by the fusion (leave
/// `beta = 0`: C is not read).
///
/// # Safety
///
/// As for [`launch_split_k`]; additionally every pointer in `fusion_args` must address
/// what the fusion reads or writes, valid until the kernels finish.
pub unsafe fn launch_fused(
    main: &Function,
    reduce: &Function,
    g: &GeneratedGemm,
    args: &GemmArgs,
    fusion_args: &FusionArgs,
) -> Result<(), GemmError> {
    let blob = g.fusion_blob(Some(fusion_args))?;
    // SAFETY: as documented for this function.
    unsafe { launch_with(main, reduce, g, args, &blob) }
}

/// The main kernel and, with parallel split-K, the reduction; `blob` is the packed fusion
/// parameter struct (empty for the linear combination).
unsafe fn launch_with(
    main: &Function,
    reduce: &Function,
    g: &GeneratedGemm,
    args: &GemmArgs,
    blob: &[u8],
) -> Result<(), GemmError> {
    check_name(main, &g.name)?;
    check_name(reduce, &g.reduce_name)?;
    args.validate(g)?;
    let lc = g.launch_config(args);
    let early = crate::grid_dependency::early_trigger_for(main, &lc);
    // SAFETY: as in `launch`.
    unsafe { main.launch(&lc, &g.main_args(args, blob, early))? };
    if args.split_k > 1 && args.split_k_mode == SplitKMode::Parallel {
        let mn = args.m as u64 * args.n as u64;
        let blocks = mn.div_ceil(g.reduce_threads as u64).max(1) as u32;
        let cfg = LaunchConfig::new((blocks, args.l as u32), g.reduce_threads).with_programmatic_dependency(true);
        let ka = g.reduce_args(args, blob);
        // SAFETY: matches the reduction kernel's signature.
        unsafe { reduce.launch(&cfg, &ka)? };
    }
    Ok(())
}
