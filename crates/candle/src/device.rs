//! Opening a candle CUDA device without panicking where there is none.

/// The candle CUDA device `ordinal`, or `None` where there is no CUDA driver, no such
/// device, or this build has no `cuda` feature. (`cudarc` loads the driver library at run
/// time and panics on first use when it is missing; this checks first.)
///
/// ```
/// match rcute_candle::cuda_device(0).unwrap() {
///     Some(dev) => assert!(dev.is_cuda()),
///     None => eprintln!("no CUDA device"),
/// }
/// ```
pub fn cuda_device(ordinal: usize) -> candle_core::Result<Option<candle_core::Device>> {
    #[cfg(feature = "cuda")]
    {
        use rcute_ops::cudarc::driver::{sys, CudaContext};
        // SAFETY: only probes whether the driver library can be loaded.
        let present = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
        if !present {
            return Ok(None);
        }
        let count = match std::panic::catch_unwind(CudaContext::device_count) {
            Ok(Ok(n)) => usize::try_from(n).unwrap_or(0),
            _ => 0,
        };
        if ordinal >= count {
            return Ok(None);
        }
        candle_core::Device::new_cuda(ordinal).map(Some)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        Ok(None)
    }
}
