//! cuBLASLt GEMMs as in-process peers of the 8-bit benchmarks: INT8 (`s8 x s8 -> s32`,
//! unscaled) for `rcute bench scaled-mm` and `rcute tune`, and FP8 e4m3 with row-wise f32
//! scales and bf16 output (what `torch._scaled_mm` calls for row-wise scales) for
//! `rcute bench gemm --dtype e4m3`.
//!
//! Both are "TN" in cuBLASLt's column-major terms, with rcute's buffers as they are:
//! `D (N x M, column-major = M x N row-major) = B^T A`, B the column-major `K x N` weight
//! (cuBLASLt's transposed A) and A the row-major `M x K` activation (cuBLASLt's B).

use cudarc::cublaslt::{result as lt, sys as ltsys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use ltsys::cublasLtMatmulDescAttributes_t as Attr;
use ltsys::cudaDataType_t as Ty;
use std::ffi::c_void;
use std::sync::Arc;

/// One planned cuBLASLt GEMM of a fixed `m x n x k` (descriptor, layouts, algorithm and
/// workspace), run on any buffers of that shape.
pub(crate) struct LtGemm {
    handle: ltsys::cublasLtHandle_t,
    desc: ltsys::cublasLtMatmulDesc_t,
    layouts: [ltsys::cublasLtMatrixLayout_t; 3],
    algo: ltsys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    /// alpha = 1 and beta = 0 as the descriptor's scale type (`i32` or `f32`), as bits.
    one_zero: [u32; 2],
}

fn err(x: lt::CublasError) -> String {
    format!("cuBLASLt: {x:?}")
}

/// Set one descriptor attribute to `value`.
///
/// # Safety
/// `desc` is a live descriptor and `T` is the type cuBLASLt documents for `attr`.
unsafe fn set<T>(desc: ltsys::cublasLtMatmulDesc_t, attr: Attr, value: &T) -> Result<(), String> {
    lt::set_matmul_desc_attribute(desc, attr, value as *const T as *const c_void, std::mem::size_of::<T>()).map_err(err)
}

impl LtGemm {
    /// The INT8 peer: `s8 x s8 -> s32`, alpha 1, no scales.
    pub(crate) fn int8(stream: &Arc<CudaStream>, m: usize, n: usize, k: usize) -> Result<LtGemm, String> {
        let compute = ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32I;
        let desc = lt::create_matmul_desc(compute, Ty::CUDA_R_32I).map_err(err)?;
        LtGemm::plan(stream, desc, [Ty::CUDA_R_8I, Ty::CUDA_R_32I], (m, n, k), [1, 0])
    }

    /// The FP8 peer: `e4m3 x e4m3 -> bf16` with f32 accumulation and row-wise scales,
    /// `D[i][j] = a_scale[i] * b_scale[j] * sum_k A[i][k] B[k][j]` (`a_scale` has `m`
    /// values, `b_scale` `n`; cuBLASLt's outer-vector scale mode). The scale buffers must
    /// outlive the peer: the descriptor keeps their addresses.
    pub(crate) fn e4m3_rowwise(
        stream: &Arc<CudaStream>,
        (m, n, k): (usize, usize, usize),
        a_scale: &CudaSlice<f32>,
        b_scale: &CudaSlice<f32>,
    ) -> Result<LtGemm, String> {
        if a_scale.len() < m || b_scale.len() < n {
            return Err(format!(
                "FP8 peer: scales of {} / {} values for {m} x {n}",
                a_scale.len(),
                b_scale.len()
            ));
        }
        let compute = ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let desc = lt::create_matmul_desc(compute, Ty::CUDA_R_32F).map_err(err)?;
        let outer = ltsys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F as i32;
        let (pa, _ga) = a_scale.device_ptr(stream);
        let (pb, _gb) = b_scale.device_ptr(stream);
        // cuBLASLt's A is rcute's B (its scale runs along N), cuBLASLt's B is rcute's A.
        let (lt_a_scale, lt_b_scale) = (pb as *const c_void, pa as *const c_void);
        // SAFETY: live descriptor; scale modes are i32 enums, scale pointers device pointers.
        unsafe {
            set(desc, Attr::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer)?;
            set(desc, Attr::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer)?;
            set(desc, Attr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &lt_a_scale)?;
            set(desc, Attr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &lt_b_scale)?;
        }
        let one_zero = [1.0f32.to_bits(), 0.0f32.to_bits()];
        LtGemm::plan(stream, desc, [Ty::CUDA_R_8F_E4M3, Ty::CUDA_R_16BF], (m, n, k), one_zero)
    }

    /// Transposes, layouts (`[ab, cd]` element types), workspace and the heuristic's first
    /// algorithm for `desc`; destroys `desc` on failure.
    fn plan(
        stream: &Arc<CudaStream>,
        desc: ltsys::cublasLtMatmulDesc_t,
        [ab, cd]: [Ty; 2],
        (m, n, k): (usize, usize, usize),
        one_zero: [u32; 2],
    ) -> Result<LtGemm, String> {
        let planned = (|| {
            // cublasOperation_t values: 1 = T, 0 = N.
            // SAFETY: live descriptor; transposes are i32 enums.
            unsafe {
                set(desc, Attr::CUBLASLT_MATMUL_DESC_TRANSA, &1i32)?;
                set(desc, Attr::CUBLASLT_MATMUL_DESC_TRANSB, &0i32)?;
            }
            let (m64, n64, k64) = (m as u64, n as u64, k as u64);
            let la = lt::create_matrix_layout(ab, k64, n64, k as i64).map_err(err)?;
            let lb = lt::create_matrix_layout(ab, k64, m64, k as i64).map_err(err)?;
            let lc = lt::create_matrix_layout(cd, n64, m64, n as i64).map_err(err)?;
            let layouts = [la, lb, lc];
            let ws_size: usize = 32 << 20;
            let workspace = stream.alloc_zeros::<u8>(ws_size).map_err(|x| x.to_string())?;
            let pref = lt::create_matmul_pref().map_err(err)?;
            let max_ws = ltsys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES;
            // SAFETY: valid handles created above; the workspace limit is a usize.
            let heur = unsafe {
                let handle = lt::create_handle().map_err(err)?;
                let h = lt::set_matmul_pref_attribute(
                    pref,
                    max_ws,
                    &ws_size as *const _ as *const c_void,
                    std::mem::size_of::<usize>(),
                )
                .and_then(|_| lt::get_matmul_algo_heuristic(handle, desc, la, lb, lc, lc, pref));
                let _ = lt::destroy_matmul_pref(pref);
                match h {
                    Ok(h) => (handle, h),
                    Err(x) => {
                        let _ = lt::destroy_handle(handle);
                        for l in layouts {
                            let _ = lt::destroy_matrix_layout(l);
                        }
                        return Err(format!("cuBLASLt has no algorithm: {x:?}"));
                    }
                }
            };
            Ok((heur, layouts, workspace))
        })();
        match planned {
            Ok(((handle, heur), layouts, workspace)) => Ok(LtGemm {
                handle,
                desc,
                layouts,
                algo: heur.algo,
                workspace,
                one_zero,
            }),
            Err(x) => {
                // SAFETY: created by the caller, not used after this.
                let _ = unsafe { lt::destroy_matmul_desc(desc) };
                Err(x)
            }
        }
    }

    /// `d = B^T A` (scaled as planned) on rcute's `a` (`M x K` row-major) and `b` (`K x N`
    /// column-major); `d` is `M x N` row-major of the planned output type.
    pub(crate) fn run<T: DeviceRepr, D: DeviceRepr>(
        &mut self,
        stream: &Arc<CudaStream>,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        d: &mut CudaSlice<D>,
    ) -> Result<(), String> {
        let [one, zero] = self.one_zero;
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pd, _rd) = d.device_ptr_mut(stream);
        let ws_len = self.workspace.len();
        let (pw, _rw) = self.workspace.device_ptr_mut(stream);
        let [la, lb, lc] = self.layouts;
        // SAFETY: the buffers hold K*N, M*K and N*M elements of the types the layouts
        // describe (the caller's shapes are the planned ones); the workspace holds its size.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                &one as *const u32 as *const c_void,
                &zero as *const u32 as *const c_void,
                pb as *const c_void,
                la,
                pa as *const c_void,
                lb,
                pd as *const c_void,
                lc,
                pd as *mut c_void,
                lc,
                &self.algo,
                pw as *mut c_void,
                ws_len,
                stream.cu_stream() as *mut _,
            )
        }
        .map_err(|x| format!("cuBLASLt matmul: {x:?}"))
    }
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: created in `plan`, destroyed once.
        unsafe {
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
            let _ = lt::destroy_handle(self.handle);
        }
    }
}
