//! The GPU side: finding a device through the CUDA driver (via `cudarc`) and its
//! properties. Loading compiled modules onto it ([`Gpu::load`]) is part of
//! [`crate::launch`].
//!
//! The driver library (`libcuda.so`) is opened at run time; on a machine without it
//! [`Gpu::detect`] returns `Ok(None)` instead of failing or panicking.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaStream, DriverError};

use crate::nvrtc::Arch;

/// A failed CUDA driver call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {name} ({description})")]
pub struct DriverFailure {
    /// What was being done, e.g. `"cuModuleLoadData"`.
    pub call: &'static str,
    /// The raw result code.
    pub code: CUresult,
    /// The code's name, e.g. `CUDA_ERROR_INVALID_VALUE`.
    pub name: String,
    /// The driver's description of the code.
    pub description: String,
}

impl DriverFailure {
    pub(crate) fn new(call: &'static str, err: DriverError) -> Self {
        let name = err
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", err.0));
        let description = err
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        DriverFailure {
            call,
            code: err.0,
            name,
            description,
        }
    }
}

/// Why a GPU could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The CUDA driver library is not installed.
    #[error("CUDA driver library (libcuda.so) not found")]
    NoDriver,
    /// The driver is installed but reports no device (or not the requested ordinal).
    #[error("no CUDA device {ordinal} (the driver reports {count})")]
    NoDevice {
        /// The requested ordinal.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// A driver call failed.
    #[error(transparent)]
    Driver(#[from] DriverFailure),
}

/// An open CUDA device: its primary context, a stream, and the properties launches need.
#[derive(Debug, Clone)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    compute_capability: (u32, u32),
    sm_count: u32,
    max_shared_per_block_optin: u32,
    l2_bytes: u32,
}

impl Gpu {
    /// Opens device 0, or returns `Ok(None)` when there is no driver or no device.
    pub fn detect() -> Result<Option<Gpu>, DeviceError> {
        match Gpu::open(0) {
            Ok(gpu) => Ok(Some(gpu)),
            Err(DeviceError::NoDriver | DeviceError::NoDevice { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens device `ordinal` with a new stream.
    pub fn open(ordinal: usize) -> Result<Gpu, DeviceError> {
        // cudarc panics if the library is missing once it is used; check first, and treat
        // any panic from the loader as "no driver".
        let present = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
        if !present {
            return Err(DeviceError::NoDriver);
        }
        let count = match std::panic::catch_unwind(CudaContext::device_count) {
            Ok(Ok(n)) => usize::try_from(n).unwrap_or(0),
            Ok(Err(e)) if no_device(&e) => 0,
            Ok(Err(e)) => return Err(DriverFailure::new("cuDeviceGetCount", e).into()),
            Err(_) => return Err(DeviceError::NoDriver),
        };
        if ordinal >= count {
            return Err(DeviceError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| DriverFailure::new("cuDevicePrimaryCtxRetain", e))?;
        let stream = ctx.new_stream().map_err(|e| DriverFailure::new("cuStreamCreate", e))?;
        Gpu::from_stream(stream)
    }

    /// The device of an application's existing `cudarc` stream, with that stream as
    /// [`Gpu::stream`] (launches go to it by default). No stream or context is created,
    /// so the application's `cudarc` context keeps its mode (`cudarc` tracks buffer uses
    /// with events only once a context has made a stream besides its default one). This is
    /// how an engine that already holds a `cudarc` stream (candle's
    /// `CudaDevice::cuda_stream()`, say) opens rcute on it.
    pub fn from_stream(stream: Arc<CudaStream>) -> Result<Gpu, DeviceError> {
        let ctx = stream.context().clone();
        let attr = |a: CUdevice_attribute| {
            ctx.attribute(a)
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(|e| DriverFailure::new("cuDeviceGetAttribute", e))
        };
        let compute_capability = (
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let max_shared_per_block_optin =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        let l2_bytes = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
        let name = ctx.name().unwrap_or_default();
        Ok(Gpu {
            ctx,
            stream,
            name,
            compute_capability,
            sm_count,
            max_shared_per_block_optin,
            l2_bytes,
        })
    }

    /// The device name, e.g. `"NVIDIA H200"`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }

    /// The architecture to compile for this device (arch-specific where one exists, e.g.
    /// `sm_90a` on Hopper); `None` for devices this crate has no [`Arch`] for.
    pub fn arch(&self) -> Option<Arch> {
        Arch::from_compute_capability(self.compute_capability.0, self.compute_capability.1, true)
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// The most shared memory one block may use after opting in (static + dynamic).
    pub fn max_shared_per_block_optin(&self) -> u32 {
        self.max_shared_per_block_optin
    }

    /// The L2 cache's size in bytes (50 MiB on an H100 or H200).
    pub fn l2_bytes(&self) -> u32 {
        self.l2_bytes
    }

    /// The underlying `cudarc` context (for allocations and copies).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream launches go to by default.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Waits for all work on [`Gpu::stream`].
    pub fn synchronize(&self) -> Result<(), DriverFailure> {
        self.stream
            .synchronize()
            .map_err(|e| DriverFailure::new("cuStreamSynchronize", e))
    }
}

fn no_device(e: &DriverError) -> bool {
    matches!(e.0, CUresult::CUDA_ERROR_NO_DEVICE | CUresult::CUDA_ERROR_STUB_LIBRARY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_never_panics() {
        // Here (no driver) this is Ok(None); on a GPU machine Ok(Some(_)).
        match Gpu::detect() {
            Ok(Some(gpu)) => assert!(gpu.sm_count() > 0),
            Ok(None) => {}
            Err(e) => panic!("driver present but failing: {e}"),
        }
    }
}
