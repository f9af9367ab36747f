//! Running an rcute op on candle's CUDA tensors: the [`Ops`] handle of a candle device
//! (one per candle stream, cached) and the launch of one op as a candle custom op, so the
//! output is a fresh candle tensor on the inputs' device.
//!
//! The op launches on the candle device's own stream, in order with candle's kernels, and
//! returns without synchronizing. While it launches it holds the read guard of every
//! input's storage and `cudarc`'s guards of the buffers (with event tracking on, other
//! streams that use the buffers later wait for the op, as for candle's own kernels).

use rcute_ops::{DType, Geometry, Ops, OpsError};

/// The op body: the inputs' device geometries (in the order given), the output's, and the
/// workspace (address, bytes; `(0, 0)` when none was asked for).
pub(crate) type Body<'f> = dyn Fn(&Ops, &[Geometry], Geometry, (u64, usize)) -> Result<(), OpsError> + 'f;

/// What one launch makes: the output's element type and dims (2 or 3), whether it must
/// start zeroed, and the workspace bytes the op needs.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct Output {
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub zeroed: bool,
    pub workspace: usize,
}

#[cfg(not(feature = "cuda"))]
pub(crate) fn launch(
    inputs: &[(&'static str, &candle_core::Tensor)],
    _out: Output,
    _body: &Body<'_>,
) -> candle_core::Result<candle_core::Tensor> {
    crate::operand::device(inputs)?;
    Err(crate::Error::NoCudaFeature.into())
}

#[cfg(feature = "cuda")]
pub(crate) use cuda::launch;
#[cfg(feature = "cuda")]
pub use cuda::ops;

#[cfg(feature = "cuda")]
mod cuda {
    use super::{Body, Output};
    use crate::error::{ops as ops_err, Error};
    use crate::operand::geometry;
    use candle_core::cuda::{CudaDType, CudaStorageSlice};
    use candle_core::{CpuStorage, CudaDevice, CudaStorage, CustomOp1, Layout, Shape, Storage, Tensor};
    use rcute_ops::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, SyncOnDrop, ValidAsZeroBits};
    use rcute_ops::{bf16, f16, DType, Gpu, Ops};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock, PoisonError};

    /// The rcute handle of a candle CUDA device: made once per candle stream with
    /// [`Gpu::from_stream`] (so rcute launches on candle's stream and creates none), then
    /// shared (kernels, tuning tables, scratch) by every op on that device.
    pub fn ops(device: &CudaDevice) -> candle_core::Result<Ops> {
        ops_on(&device.cuda_stream())
    }

    fn ops_on(stream: &Arc<CudaStream>) -> candle_core::Result<Ops> {
        static CACHE: OnceLock<Mutex<HashMap<usize, Ops>>> = OnceLock::new();
        let mut cache = CACHE.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
        let key = stream.cu_stream() as usize;
        if let Some(o) = cache.get(&key) {
            return Ok(o.clone());
        }
        let gpu = Gpu::from_stream(stream.clone()).map_err(|e| ops_err(e.into()))?;
        let o = Ops::new(gpu);
        cache.insert(key, o.clone());
        Ok(o)
    }

    /// The device address of a candle buffer, its length in elements, and `cudarc`'s read
    /// guard of it on `stream` (held for the launch).
    fn address<'s>(s: &'s CudaStorage, stream: &'s CudaStream) -> (u64, usize, SyncOnDrop<'s>) {
        macro_rules! of {
            ($($v:ident),*) => {
                match &s.slice {
                    $(CudaStorageSlice::$v(b) => {
                        let (p, g) = b.device_ptr(stream);
                        (p, b.len(), g)
                    })*
                }
            };
        }
        of!(U8, U32, I16, I32, I64, BF16, F16, F32, F64, F8E4M3, F6E2M3, F6E3M2, F4, F8E8M0)
    }

    /// One launch, as a candle custom op on the first input (so candle hands over its
    /// storage and wraps the output).
    struct Launch<'a> {
        inputs: &'a [(&'static str, &'a Tensor)],
        out: Output,
        body: &'a Body<'a>,
    }

    impl CustomOp1 for Launch<'_> {
        fn name(&self) -> &'static str {
            "rcute"
        }

        fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
            let (operand, _) = self.inputs[0];
            Err(Error::NotCuda { operand, location: "cpu".into() }.into())
        }

        fn cuda_fwd(&self, first: &CudaStorage, _: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
            let dev = &first.device;
            let stream = dev.cuda_stream();
            let ops = ops_on(&stream)?;
            // Read locks of the other inputs (candle's own binary ops lock a tensor twice
            // in the same way when it is both operands).
            let locked: Vec<_> = self.inputs[1..].iter().map(|(_, t)| t.storage_and_layout()).collect();
            let mut storages = vec![first];
            for (&(operand, t), (s, _)) in self.inputs[1..].iter().zip(&locked) {
                match &**s {
                    Storage::Cuda(c) => storages.push(c),
                    _ => {
                        let location = format!("{:?}", t.device().location()).to_lowercase();
                        return Err(Error::NotCuda { operand, location }.into());
                    }
                }
            }
            let mut geos = Vec::with_capacity(storages.len());
            let mut held = Vec::with_capacity(storages.len());
            for (&(operand, t), s) in self.inputs.iter().zip(&storages) {
                let (ptr, len, guard) = address(s, &stream);
                let mut g = geometry(operand, t, ptr, Some(len))?;
                g.device = Some(s.device.cuda_stream().context().ordinal());
                geos.push(g);
                held.push(guard);
            }
            let storage = match self.out.dtype {
                DType::BF16 => self.run::<bf16>(dev, &stream, &ops, &geos)?,
                DType::F16 => self.run::<f16>(dev, &stream, &ops, &geos)?,
                DType::F32 => self.run::<f32>(dev, &stream, &ops, &geos)?,
                other => unreachable!("no rcute op here writes {other:?}"),
            };
            drop(held);
            Ok((storage, Shape::from_dims(&self.out.dims)))
        }
    }

    impl Launch<'_> {
        /// Allocate the output (and workspace) on `stream`, run the body, wrap the output.
        fn run<T: CudaDType + DeviceRepr + ValidAsZeroBits>(
            &self,
            dev: &CudaDevice,
            stream: &Arc<CudaStream>,
            ops: &Ops,
            geos: &[rcute_ops::Geometry],
        ) -> candle_core::Result<CudaStorage> {
            let cuda = |e| ops_err(rcute_ops::OpsError::Cuda(e));
            let n: usize = self.out.dims.iter().product();
            let mut out = if self.out.zeroed {
                stream.alloc_zeros::<T>(n).map_err(cuda)?
            } else {
                // SAFETY: every rcute op that runs without `zeroed` writes all of its output.
                unsafe { stream.alloc::<T>(n) }.map_err(cuda)?
            };
            let mut ws = if self.out.workspace > 0 {
                Some(stream.alloc_zeros::<u8>(self.out.workspace).map_err(cuda)?)
            } else {
                None
            };
            {
                let (out_ptr, _out_guard) = out.device_ptr_mut(stream);
                let ws_guard = ws.as_mut().map(|w| {
                    let len = w.len();
                    let (p, g) = w.device_ptr_mut(stream);
                    (p, len, g)
                });
                let ws_args = ws_guard.as_ref().map_or((0, 0), |(p, l, _)| (*p, *l));
                let mut o = crate::operand::dense(self.out.dtype, &self.out.dims, out_ptr);
                o.device = Some(stream.context().ordinal());
                (self.body)(ops, geos, o, ws_args).map_err(ops_err)?;
            }
            Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
        }
    }

    /// Runs `body` on the inputs' CUDA device and returns the output tensor (see the module
    /// docs).
    pub(crate) fn launch(
        inputs: &[(&'static str, &Tensor)],
        out: Output,
        body: &Body<'_>,
    ) -> candle_core::Result<Tensor> {
        crate::operand::device(inputs)?;
        let op = Launch { inputs, out, body };
        inputs[0].1.apply_op1_no_bwd(&op)
    }
}
