//! The AWQ ops on [`Ops`]: `awq_dequantize` and `awq_gemm`. Kernels are generated,
//! compiled (cached) and loaded once per configuration through the same [`Memo`] path as
//! the GEMMs; split-K partial sums use the handle's workspace and semaphores. Every launch
//! goes through [`AwqKernels`]'s `launch` so that the stream it runs on is chosen in one
//! place.

use super::validate::{validate_awq_dequantize, AwqTensors};
use crate::context::{boxed, Ops};
use crate::error::OpsError;
use crate::memo::Memo;
use crate::tensor::{DType, Geometry, MatrixMut};
use rcute_atom::Element;
use rcute_kernel::awq_dequantize::{self, AwqDequantizeArgs, GeneratedAwqDequantize};
use rcute_kernel::launch::{KernelArgs, LaunchConfig};
use rcute_kernel::{CompileOptions, Function, KernelCache};
use std::sync::Arc;

/// A loaded dequantization kernel.
#[derive(Clone)]
pub struct LoadedAwqDequantize {
    /// The generated source and launch geometry.
    pub generated: Arc<GeneratedAwqDequantize>,
    function: Function,
}

/// The AWQ kernels an [`Ops`] handle loaded.
#[derive(Default)]
pub struct AwqKernels {
    pub(crate) dequantize: Memo<Element, LoadedAwqDequantize>,
}

impl AwqKernels {
    /// How many kernels were built.
    pub fn builds(&self) -> usize {
        self.dequantize.builds()
    }
}

pub(crate) fn element(d: DType) -> Result<Element, OpsError> {
    match d {
        DType::F16 => Ok(Element::F16),
        DType::BF16 => Ok(Element::BF16),
        other => Err(OpsError::DType(format!("AWQ 16-bit type {}", other.name()))),
    }
}

impl Ops {
    pub(crate) fn check_devices(&self, views: &[(&'static str, &Geometry)]) -> Result<(), OpsError> {
        let expected = self.gpu().context().ordinal();
        for (operand, g) in views {
            if let Some(found) = g.device {
                if found != expected {
                    return Err(OpsError::Device {
                        operand,
                        found,
                        expected,
                    });
                }
            }
        }
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
        // SAFETY: forwarded from the caller.
        unsafe { f.launch(cfg, args) }.map_err(boxed)
    }

    /// Generate, compile (cached) and load the dequantization kernel for `e` (once).
    pub fn load_awq_dequantize(&self, e: Element) -> Result<LoadedAwqDequantize, OpsError> {
        self.awq.dequantize.get_or_try_build(&e, || {
            let g = awq_dequantize::generate(e).map_err(boxed)?;
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
        let (p, o) = validate_awq_dequantize(w, out)?;
        self.check_devices(&[
            ("qweight", &p.qweight),
            ("scales", &p.scales),
            ("qzeros", &p.qzeros),
            ("out", &o),
        ])?;
        let loaded = self.load_awq_dequantize(element(p.dtype)?)?;
        let g = &loaded.generated;
        let args = AwqDequantizeArgs {
            qweight: p.qweight.ptr,
            qzeros: p.qzeros.ptr,
            scales: p.scales.ptr,
            out: o.ptr,
            k: p.shape.k as i32,
            n: p.shape.n as i32,
            group: p.shape.group as i32,
        };
        // SAFETY: validation checked the shapes, density, bounds and alignment of every
        // tensor the kernel reads ([K, N/8], [K/G, N/8], [K/G, N]) and writes ([K, N]); the
        // views borrow their buffers for this call.
        unsafe { self.awq_launch(&loaded.function, &g.launch_config(&args), &g.args(&args)) }
    }
}
