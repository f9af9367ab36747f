//! Launching kernels: [`Module`]s loaded by [`Gpu::load`],
//! their [`Function`]s, the [`LaunchConfig`], and [`KernelArgs`] for building the
//! parameter array.
//!
//! Every launch goes through `cuLaunchKernelEx`, which carries the thread-block cluster
//! dimension as a launch attribute. Before launching, the configuration is checked against
//! the device and the function (non-zero dimensions, threads per block, shared memory,
//! cluster divisibility), and `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` is raised
//! when a launch asks for more dynamic shared memory than the default 48 KiB less the
//! kernel's static shared memory.
//!
//! A launch may carry a *programmatic dependency* ([`LaunchConfig::with_programmatic_dependency`],
//! Hopper's programmatic dependent launch): the kernel may then start while the kernel
//! before it in the stream still runs, and must wait for it with
//! `rcute_atom::grid_dependency::grid_dependency_wait` before touching global memory.
//! Only the generators whose kernels do so ask for it; the attribute is dropped on devices
//! before compute capability 9.0 and when `RCUTE_PDL=0` is set.
//!
//! In *checked* mode ([`LaunchConfig::checked`], or `RCUTE_CHECKED=1` in the environment)
//! each launch synchronizes its stream and reports a fault in the kernel as
//! [`LaunchError::Kernel`], naming the kernel.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUfunction_attribute, CUlaunchAttributeID};
use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};

use crate::device::{DriverFailure, Gpu};
use crate::nvrtc::{Arch, Compiled};
use crate::resources::{KernelResources, ResourceReport};

/// Environment variable that turns on checked launches everywhere when set to `1`.
pub const ENV_CHECKED: &str = "RCUTE_CHECKED";

/// Environment variable that, set to `0`, launches every kernel without its programmatic
/// dependency (plain stream order), for comparisons and debugging.
pub const ENV_PDL: &str = "RCUTE_PDL";

/// Shared memory (static plus dynamic) a block may use without opting in.
const DEFAULT_DYNAMIC_SMEM: u32 = 48 * 1024;
/// Largest cluster the hardware supports with the non-portable opt-in (Hopper).
const MAX_CLUSTER_BLOCKS: u32 = 16;
/// Largest portable cluster.
const MAX_PORTABLE_CLUSTER_BLOCKS: u32 = 8;

/// A 3-D extent: grid, block or cluster dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// `x * y * z`, or `None` on overflow.
    pub fn volume(self) -> Option<u32> {
        self.x.checked_mul(self.y)?.checked_mul(self.z)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}

/// How to launch a kernel. Build with [`LaunchConfig::new`] and the `with_*` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchConfig {
    /// Grid dimensions, in blocks (not clusters).
    pub grid: Dim3,
    /// Block dimensions, in threads.
    pub block: Dim3,
    /// Thread-block cluster dimensions (`sm_90`+); must divide `grid`.
    pub cluster: Option<Dim3>,
    /// Dynamic shared memory per block, in bytes.
    pub dynamic_smem_bytes: u32,
    /// Synchronize after the launch and report kernel faults (also enabled by
    /// `RCUTE_CHECKED=1`).
    pub checked: bool,
    /// Launch with a programmatic dependency on the previous kernel of the stream
    /// (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`; `sm_90`+): the kernel may
    /// begin before its predecessor ends. Set only for kernels that execute
    /// `griddepcontrol.wait` in every thread before their first global memory access.
    pub programmatic: bool,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, without dynamic shared memory or
    /// clusters.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            cluster: None,
            dynamic_smem_bytes: 0,
            checked: false,
            programmatic: false,
        }
    }

    /// One thread per element, `block` threads per block, for `n` elements.
    pub fn for_elements(n: u32, block: u32) -> Self {
        let block = block.max(1);
        LaunchConfig::new(n.div_ceil(block).max(1), block)
    }

    /// Sets the cluster dimensions.
    pub fn with_cluster(mut self, cluster: impl Into<Dim3>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    /// Sets the dynamic shared memory per block.
    pub fn with_dynamic_smem(mut self, bytes: u32) -> Self {
        self.dynamic_smem_bytes = bytes;
        self
    }

    /// Enables or disables checked mode.
    pub fn with_checked(mut self, checked: bool) -> Self {
        self.checked = checked;
        self
    }

    /// Launches with (or without) a programmatic dependency on the stream's previous
    /// kernel: see [`LaunchConfig::programmatic`]. Ignored before compute capability 9.0
    /// and when `RCUTE_PDL=0`.
    ///
    /// ```
    /// use rcute_kernel::launch::LaunchConfig;
    /// let cfg = LaunchConfig::new(128, 256).with_programmatic_dependency(true);
    /// assert!(cfg.programmatic);
    /// ```
    pub fn with_programmatic_dependency(mut self, on: bool) -> Self {
        self.programmatic = on;
        self
    }
}

/// Why a module, function or launch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A CUBIN was compiled for an architecture the device cannot run.
    #[error("cubin compiled for {compiled} cannot run on a device of compute capability {}.{}", device.0, device.1)]
    ArchMismatch {
        /// The cubin's architecture.
        compiled: Arch,
        /// The device's compute capability.
        device: (u32, u32),
    },
    /// The module has no function of that name (is it `extern "C"`?).
    #[error("no kernel named {name:?} in the module (kernels need extern \"C\" to keep their names)")]
    FunctionNotFound {
        /// The name looked up.
        name: String,
    },
    /// The configuration is invalid for this function or device.
    #[error("invalid launch of {kernel}: {reason}")]
    InvalidConfig {
        /// The kernel.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// Static plus dynamic shared memory exceed what a block may use.
    #[error("{kernel} needs {requested} bytes of shared memory per block ({static_bytes} static), the device allows {limit}")]
    SharedMemory {
        /// The kernel.
        kernel: String,
        /// Static plus dynamic bytes requested.
        requested: u32,
        /// Of which static.
        static_bytes: u32,
        /// The device's opt-in limit.
        limit: u32,
    },
    /// A driver call failed while preparing or submitting the launch.
    #[error(transparent)]
    Driver(#[from] DriverFailure),
    /// The kernel itself failed (reported in checked mode, at synchronization).
    #[error("kernel {kernel} failed: {failure}")]
    Kernel {
        /// The kernel.
        kernel: String,
        /// The error the stream reported.
        failure: DriverFailure,
    },
}

impl Gpu {
    /// Loads a compiled CUBIN into this device's context.
    ///
    /// Fails with [`LaunchError::ArchMismatch`] if it was compiled for another
    /// architecture than the device has.
    pub fn load(&self, compiled: &Compiled) -> Result<Module, LaunchError> {
        // SASS runs on the same major version with an equal or newer minor one; an
        // arch-specific (`a`) cubin only on exactly its own architecture.
        let (major, minor) = compiled.arch.compute_capability();
        let (dev_major, dev_minor) = self.compute_capability();
        let compatible =
            major == dev_major && (minor == dev_minor || (minor < dev_minor && !compiled.arch.is_arch_specific()));
        if !compatible {
            return Err(LaunchError::ArchMismatch {
                compiled: compiled.arch,
                device: (dev_major, dev_minor),
            });
        }
        let module = self
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_binary(compiled.cubin.clone()))
            .map_err(|e| DriverFailure::new("cuModuleLoadData", e))?;
        Ok(Module::new(self.clone(), module, compiled.resources.clone()))
    }
}

/// A CUBIN loaded on a [`Gpu`].
#[derive(Debug, Clone)]
pub struct Module {
    gpu: Gpu,
    inner: Arc<CudaModule>,
    resources: ResourceReport,
}

impl Module {
    pub(crate) fn new(gpu: Gpu, inner: Arc<CudaModule>, resources: ResourceReport) -> Self {
        Module { gpu, inner, resources }
    }

    /// ptxas' resource report for the module's kernels (empty if the compile log had none;
    /// see [`Function::resources`]).
    pub fn resources(&self) -> &ResourceReport {
        &self.resources
    }

    /// The GPU the module lives on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Looks up a kernel by its (unmangled, `extern "C"`) name.
    pub fn function(&self, name: &str) -> Result<Function, LaunchError> {
        let not_found = || LaunchError::FunctionNotFound { name: name.to_owned() };
        if name.is_empty() || name.contains('\0') {
            return Err(not_found());
        }
        let inner = self.inner.load_function(name).map_err(|e| match e.0 {
            sys::CUresult::CUDA_ERROR_NOT_FOUND => not_found(),
            _ => DriverFailure::new("cuModuleGetFunction", e).into(),
        })?;
        let attr = |a, call| {
            inner
                .get_attribute(a)
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(|e| DriverFailure::new(call, e))
        };
        let static_smem = attr(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            "cuFuncGetAttribute",
        )?;
        let max_threads = attr(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            "cuFuncGetAttribute",
        )?;
        // NVRTC 13.0 returns an empty log (no ptxas report) once the CUDA driver has been
        // initialized in the process; fall back to what the driver knows about the function
        // (spill counts are not available that way and read as 0).
        let resources = match self.resources.kernel(name) {
            Some(r) => r.clone(),
            None => {
                let get = |a| attr(a, "cuFuncGetAttribute");
                KernelResources {
                    name: name.to_owned(),
                    arch: self.gpu.arch().map(|a| a.as_str().to_owned()).unwrap_or_default(),
                    registers: get(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
                    stack_frame_bytes: get(CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
                    shared_bytes: static_smem,
                    constant_bytes: get(CUfunction_attribute::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
                    ..KernelResources::default()
                }
            }
        };
        Ok(Function {
            gpu: self.gpu.clone(),
            inner,
            name: name.to_owned(),
            resources,
            static_smem,
            max_threads,
            // Without the opt-in, static and dynamic shared memory share the 48 KiB.
            dynamic_smem_limit: Arc::new(AtomicU32::new(DEFAULT_DYNAMIC_SMEM.saturating_sub(static_smem))),
            non_portable_cluster: Arc::new(AtomicU32::new(0)),
            cluster_occupancy: Arc::new(Mutex::new(Vec::new())),
        })
    }
}

/// A kernel in a loaded [`Module`], ready to launch. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Function {
    gpu: Gpu,
    inner: CudaFunction,
    name: String,
    resources: KernelResources,
    static_smem: u32,
    max_threads: u32,
    /// The current `MAX_DYNAMIC_SHARED_SIZE_BYTES`, shared by clones.
    dynamic_smem_limit: Arc<AtomicU32>,
    /// 1 once `NON_PORTABLE_CLUSTER_SIZE_ALLOWED` is set.
    non_portable_cluster: Arc<AtomicU32>,
    /// [`Function::max_active_clusters`] per (cluster, block, dynamic shared memory),
    /// shared by clones.
    cluster_occupancy: Arc<Mutex<Vec<ClusterOccupancy>>>,
}

/// One answer of `cuOccupancyMaxActiveClusters`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ClusterOccupancy {
    cluster: Dim3,
    block: Dim3,
    dynamic_smem_bytes: u32,
    clusters: u32,
}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GPU the kernel's module lives on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The kernel's resource usage: from ptxas' report when the compile log had one, else
    /// from the driver's function attributes (without spill counts, which read as 0).
    pub fn resources(&self) -> &KernelResources {
        &self.resources
    }

    /// Statically allocated shared memory per block, as the driver reports it.
    pub fn static_smem_bytes(&self) -> u32 {
        self.static_smem
    }

    /// The most threads per block this kernel can be launched with.
    pub fn max_threads_per_block(&self) -> u32 {
        self.max_threads
    }

    /// The underlying `cudarc` function.
    pub fn cuda_function(&self) -> &CudaFunction {
        &self.inner
    }

    /// Launches on the calling thread's launch stream (the innermost
    /// [`crate::stream_scope::StreamScope`], else the GPU's stream) with arguments from a
    /// [`KernelArgs`].
    ///
    /// # Safety
    ///
    /// The arguments must match the kernel's parameters in number, order and type, and
    /// every pointer must stay valid for the kernel's whole execution. The kernel may
    /// read and write any memory those pointers reach.
    pub unsafe fn launch(&self, cfg: &LaunchConfig, args: &KernelArgs) -> Result<(), LaunchError> {
        let mut params = args.params();
        self.launch_raw(cfg, &mut params)
    }

    /// Launches on the calling thread's launch stream (as [`Function::launch`]) with a raw
    /// parameter array: one pointer to each argument's value, as `cuLaunchKernel` takes
    /// them.
    ///
    /// # Safety
    ///
    /// As for [`Function::launch`]; additionally each pointer must point to a live value
    /// of the parameter's type.
    pub unsafe fn launch_raw(&self, cfg: &LaunchConfig, params: &mut [*mut c_void]) -> Result<(), LaunchError> {
        match crate::stream_scope::StreamScope::current() {
            Some(stream) => self.launch_raw_on(&stream, cfg, params),
            None => self.launch_raw_on(self.gpu.stream(), cfg, params),
        }
    }

    /// Like [`Function::launch_raw`], on `stream` (which must belong to this GPU's context).
    ///
    /// # Safety
    ///
    /// As for [`Function::launch_raw`].
    pub unsafe fn launch_raw_on(
        &self,
        stream: &CudaStream,
        cfg: &LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<(), LaunchError> {
        self.validate(cfg)?;
        let ctx = self.gpu.context();
        if stream.context().cu_ctx() != ctx.cu_ctx() {
            return Err(self.invalid("the stream belongs to another CUDA context than the kernel's module"));
        }
        ctx.bind_to_thread()
            .map_err(|e| DriverFailure::new("cuCtxSetCurrent", e))?;
        self.prepare_attributes(cfg)?;

        let mut attrs: Vec<sys::CUlaunchAttribute> = Vec::new();
        if let Some(c) = cfg.cluster {
            attrs.push(cluster_attribute(c));
        }
        if cfg.programmatic && self.gpu.compute_capability().0 >= 9 && pdl_from_env() {
            // SAFETY: as above.
            let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            attr.id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            attrs.push(attr);
        }
        let config = driver_config(cfg, stream.cu_stream(), &mut attrs);
        let params_ptr = if params.is_empty() {
            std::ptr::null_mut()
        } else {
            params.as_mut_ptr()
        };
        // SAFETY: `config` and `attrs` outlive the call; the caller vouches for `params`.
        let result =
            unsafe { sys::cuLaunchKernelEx(&config, self.inner.cu_function(), params_ptr, std::ptr::null_mut()) };
        result.result().map_err(|e| DriverFailure::new("cuLaunchKernelEx", e))?;

        if cfg.checked || checked_from_env() {
            stream.synchronize().map_err(|e| LaunchError::Kernel {
                kernel: self.name.clone(),
                failure: DriverFailure::new("cuStreamSynchronize", e),
            })?;
        }
        Ok(())
    }

    /// How many clusters of `cfg`'s shape (with its block and dynamic shared memory) can
    /// be resident on the GPU at once (`cuOccupancyMaxActiveClusters`). A persistent
    /// kernel launches no more than this: the clusters of a GPC must fit its SMs, so on a
    /// 132-SM Hopper with 16- and 18-SM GPCs at most 32 clusters of 4 CTAs run at once,
    /// not 132 / 4 = 33, and a 33rd would run after the others, doubling the time. The
    /// answer is cached per shape. `cfg` without a cluster counts one-CTA clusters.
    ///
    /// # Errors
    ///
    /// The configuration's checks (as for a launch) and the driver's.
    pub fn max_active_clusters(&self, cfg: &LaunchConfig) -> Result<u32, LaunchError> {
        let cluster = cfg.cluster.unwrap_or(Dim3::new(1, 1, 1));
        let key = |clusters| ClusterOccupancy {
            cluster,
            block: cfg.block,
            dynamic_smem_bytes: cfg.dynamic_smem_bytes,
            clusters,
        };
        let same = |o: &&ClusterOccupancy| **o == key(o.clusters);
        let cache = || self.cluster_occupancy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = cache().iter().find(same) {
            return Ok(o.clusters);
        }
        self.validate(cfg)?;
        self.gpu
            .context()
            .bind_to_thread()
            .map_err(|e| DriverFailure::new("cuCtxSetCurrent", e))?;
        self.prepare_attributes(cfg)?;
        let mut attrs = [cluster_attribute(cluster)];
        let config = driver_config(cfg, std::ptr::null_mut(), &mut attrs);
        let mut clusters: std::ffi::c_int = 0;
        // SAFETY: `config` and `attrs` outlive the call; the function belongs to the bound context.
        let result = unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, self.inner.cu_function(), &config) };
        result
            .result()
            .map_err(|e| DriverFailure::new("cuOccupancyMaxActiveClusters", e))?;
        let clusters = u32::try_from(clusters).unwrap_or(0);
        cache().push(key(clusters));
        Ok(clusters)
    }

    fn invalid(&self, reason: impl Into<String>) -> LaunchError {
        LaunchError::InvalidConfig {
            kernel: self.name.clone(),
            reason: reason.into(),
        }
    }

    fn validate(&self, cfg: &LaunchConfig) -> Result<(), LaunchError> {
        let (grid, block) = (cfg.grid, cfg.block);
        if grid.volume().is_none_or(|v| v == 0) || block.volume().is_none_or(|v| v == 0) {
            return Err(self.invalid(format!("grid {grid:?} and block {block:?} must be non-zero")));
        }
        let threads = block.volume().unwrap_or(u32::MAX);
        if threads > self.max_threads {
            return Err(self.invalid(format!(
                "{threads} threads per block, the kernel allows {}",
                self.max_threads
            )));
        }
        let requested = self.static_smem.saturating_add(cfg.dynamic_smem_bytes);
        let limit = self.gpu.max_shared_per_block_optin();
        if requested > limit {
            return Err(LaunchError::SharedMemory {
                kernel: self.name.clone(),
                requested,
                static_bytes: self.static_smem,
                limit,
            });
        }
        if let Some(c) = cfg.cluster {
            if self.gpu.compute_capability().0 < 9 {
                return Err(self.invalid("thread-block clusters need compute capability 9.0 or newer"));
            }
            let size = c.volume().unwrap_or(u32::MAX);
            if size == 0 || size > MAX_CLUSTER_BLOCKS {
                return Err(self.invalid(format!("cluster {c:?} must have 1 to {MAX_CLUSTER_BLOCKS} blocks")));
            }
            if grid.x % c.x != 0 || grid.y % c.y != 0 || grid.z % c.z != 0 {
                return Err(self.invalid(format!("grid {grid:?} is not a multiple of cluster {c:?}")));
            }
        }
        Ok(())
    }

    fn prepare_attributes(&self, cfg: &LaunchConfig) -> Result<(), LaunchError> {
        let set = |attr, value: u32| {
            self.inner
                .set_attribute(attr, i32::try_from(value).unwrap_or(i32::MAX))
                .map_err(|e| LaunchError::from(DriverFailure::new("cuFuncSetAttribute", e)))
        };
        if cfg.dynamic_smem_bytes > self.dynamic_smem_limit.load(Ordering::Acquire) {
            set(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                cfg.dynamic_smem_bytes,
            )?;
            self.dynamic_smem_limit
                .fetch_max(cfg.dynamic_smem_bytes, Ordering::AcqRel);
        }
        let needs_non_portable = cfg
            .cluster
            .and_then(Dim3::volume)
            .is_some_and(|v| v > MAX_PORTABLE_CLUSTER_BLOCKS);
        if needs_non_portable && self.non_portable_cluster.load(Ordering::Acquire) == 0 {
            set(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
            )?;
            self.non_portable_cluster.store(1, Ordering::Release);
        }
        Ok(())
    }
}

/// The driver's launch attribute for a cluster of `c` CTAs.
fn cluster_attribute(c: Dim3) -> sys::CUlaunchAttribute {
    // SAFETY: an all-zero attribute is a valid starting value (plain C data).
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = c.x;
    attr.value.clusterDim.y = c.y;
    attr.value.clusterDim.z = c.z;
    attr
}

/// The driver's launch configuration of `cfg` on `stream` with `attrs` (which must outlive
/// its use).
fn driver_config(
    cfg: &LaunchConfig,
    stream: sys::CUstream,
    attrs: &mut [sys::CUlaunchAttribute],
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: cfg.grid.x,
        gridDimY: cfg.grid.y,
        gridDimZ: cfg.grid.z,
        blockDimX: cfg.block.x,
        blockDimY: cfg.block.y,
        blockDimZ: cfg.block.z,
        sharedMemBytes: cfg.dynamic_smem_bytes,
        hStream: stream,
        attrs: attrs.as_mut_ptr(),
        numAttrs: attrs.len() as u32,
    }
}

/// False when `RCUTE_PDL=0` (read once per process).
fn pdl_from_env() -> bool {
    static PDL: OnceLock<bool> = OnceLock::new();
    *PDL.get_or_init(|| std::env::var(ENV_PDL).map_or(true, |v| v != "0"))
}

fn checked_from_env() -> bool {
    static CHECKED: OnceLock<bool> = OnceLock::new();
    *CHECKED.get_or_init(|| std::env::var(ENV_CHECKED).is_ok_and(|v| v == "1"))
}

/// 128 bytes aligned to 128: the storage unit of [`KernelArgs`], so by-value blobs such as
/// a `__grid_constant__ CUtensorMap` (64/128-byte aligned) are correctly aligned.
#[derive(Clone, Copy)]
#[repr(C, align(128))]
struct Chunk([u8; 128]);

/// Kernel arguments, built in parameter order:
///
/// ```no_run
/// # use rcute_kernel::launch::KernelArgs;
/// # let (a, b, c): (u64, u64, u64) = (0, 0, 0);
/// let args = KernelArgs::new().device_ptr(a).device_ptr(b).device_ptr(c).i32(1024).f32(0.5);
/// ```
///
/// Each value is copied into its own heap allocation, so the parameter pointers stay
/// valid however the `KernelArgs` itself is moved.
#[derive(Default)]
pub struct KernelArgs {
    values: Vec<Box<[Chunk]>>,
}

impl std::fmt::Debug for KernelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelArgs").field("len", &self.values.len()).finish()
    }
}

impl KernelArgs {
    /// No arguments.
    pub fn new() -> Self {
        KernelArgs::default()
    }

    /// Number of arguments pushed.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no argument was pushed.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Appends `bytes` as one by-value argument (a struct, a `CUtensorMap`, ...), stored
    /// 128-byte aligned.
    pub fn blob(mut self, bytes: &[u8]) -> Self {
        let mut chunks = vec![Chunk([0; 128]); bytes.len().div_ceil(128).max(1)].into_boxed_slice();
        for (chunk, src) in chunks.iter_mut().zip(bytes.chunks(128)) {
            chunk.0[..src.len()].copy_from_slice(src);
        }
        self.values.push(chunks);
        self
    }

    /// Appends a `CUtensorMap` by value (for a `const __grid_constant__ CUtensorMap` parameter).
    pub fn tensor_map(self, map: &sys::CUtensorMap) -> Self {
        let bytes: Vec<u8> = map.opaque.iter().flat_map(|w| w.to_ne_bytes()).collect();
        self.blob(&bytes)
    }

    /// Appends a raw device address (`T*` parameter).
    pub fn device_ptr(self, ptr: sys::CUdeviceptr) -> Self {
        self.u64(ptr)
    }

    /// Appends the device address of `slice` (`T*` parameter).
    ///
    /// The launch must go to the slice's stream, or the caller must order the streams.
    pub fn slice<T>(self, slice: &CudaSlice<T>) -> Self {
        let (ptr, _record) = slice.device_ptr(slice.stream());
        self.device_ptr(ptr)
    }

    /// Appends an `int`.
    pub fn i32(self, v: i32) -> Self {
        self.blob(&v.to_ne_bytes())
    }

    /// Appends an `unsigned int`.
    pub fn u32(self, v: u32) -> Self {
        self.blob(&v.to_ne_bytes())
    }

    /// Appends a `long long` / `int64_t`.
    pub fn i64(self, v: i64) -> Self {
        self.blob(&v.to_ne_bytes())
    }

    /// Appends an `unsigned long long` / `uint64_t` / `size_t`.
    pub fn u64(self, v: u64) -> Self {
        self.blob(&v.to_ne_bytes())
    }

    /// Appends a `float`.
    pub fn f32(self, v: f32) -> Self {
        self.blob(&v.to_ne_bytes())
    }

    /// Appends a `double`.
    pub fn f64(self, v: f64) -> Self {
        self.blob(&v.to_ne_bytes())
    }

    /// The parameter array for `cuLaunchKernel`: one pointer per argument. The pointers
    /// are valid while `self` is alive and unmodified.
    pub fn params(&self) -> Vec<*mut c_void> {
        self.values.iter().map(|v| v.as_ptr() as *mut c_void).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_are_aligned_and_hold_their_values() {
        let map = sys::CUtensorMap {
            opaque: std::array::from_fn(|i| i as u64),
        };
        let args = KernelArgs::new()
            .i32(-7)
            .f32(1.5)
            .u64(0xdead_beef)
            .tensor_map(&map)
            .blob(&[1; 200]);
        assert_eq!(args.len(), 5);
        let p = args.params();
        for ptr in &p {
            assert_eq!(*ptr as usize % 128, 0);
        }
        // SAFETY: each pointer points at the start of its own 128-aligned allocation.
        unsafe {
            assert_eq!(*(p[0] as *const i32), -7);
            assert_eq!(*(p[1] as *const f32), 1.5);
            assert_eq!(*(p[2] as *const u64), 0xdead_beef);
            assert_eq!(*(p[3] as *const sys::CUtensorMap), map);
            assert_eq!(std::slice::from_raw_parts(p[4] as *const u8, 200), &[1; 200][..]);
        }
    }

    #[test]
    fn config_helpers() {
        let c = LaunchConfig::for_elements(1000, 256)
            .with_cluster(2)
            .with_dynamic_smem(64 * 1024);
        assert_eq!(c.grid, Dim3::new(4, 1, 1));
        assert_eq!(c.block, Dim3::new(256, 1, 1));
        assert_eq!(c.cluster, Some(Dim3::new(2, 1, 1)));
        assert_eq!(LaunchConfig::for_elements(0, 128).grid.x, 1);
        assert_eq!(Dim3::new(u32::MAX, 2, 1).volume(), None);
    }
}
