//! The prepared AWQ weight: `qweight`'s nibbles reordered once (on the GPU, by
//! `rc_awq_prepare`) into the layout `((2,4,2,K/16),(2,4,8,N/64)):((4,32,1,16N),(2,8,128,1024))`
//! (weight `(k, n)` to nibble offset) of `rcute_collective::awq_prepared`, which the
//! prepared AWQ GEMM streams with contiguous 16-byte `cp.async` runs, reads with one
//! conflict-free 16-byte shared load per lane and k16 step (the unprepared kernel: four
//! 4-byte reads of padded rows) and converts word by word straight into `mma.sync` B
//! fragments (no byte permutation; f16 with one shift per word). Scales and zeros stay the
//! checkpoint's tensors, borrowed.
//!
//! Precision: the prepared kernel dequantizes exactly as the unprepared one and as
//! `awq_dequantize`: the `lop3` conversion gives `bias + q` (or, for f16's odd pairs,
//! `bias + 16 q`, brought back exactly by `hfma2(v, 1/16, -(64 + z))`) and, once per
//! group, `bias + z` as 16-bit pairs (exact), the difference `q - z` is exact, and one
//! multiplication by the scale rounds once, so the weight the MMA sees is bit-exactly
//! `awq_dequantize`'s. Zeros are *not* folded into an FMA term `q * s + (-z * s)`: the
//! rounding of `z * s` to 16 bits would add a second rounding error of up to half an ulp
//! of `15 s` to every weight (and with the magic-number bias inside the product, an error
//! of the order of `s` itself); the subtraction costs one `HADD2` / `HFMA2` per pair, as
//! Marlin's dequantization spends one operation per pair before its scale multiplication.
//!
//! On sm_90, for 32 < M <= [`super::select::WGMMA_MAX_M`] (4096) where [`super::select::select_awq_wgmma`] takes the shape,
//! and first its split-K variant where [`super::select_split::select_awq_wgmma_split`]
//! takes it (9 to 96 rows of a wide weight, 17 to 64 of a narrower one), and at 9 to 16
//! (17 to 32) rows of a weight too wide for two splits the 16-token (32-token) tile in one
//! split (all three:
//! [`super::select_split::select_awq_wgmma_prepared`]), `Ops::awq_gemm_prepared` runs the SM90 mixed-input kernel on the prepared weight; for
//! the other prefill sizes it takes the dense path on the checkpoint's own `qweight` (kept
//! borrowed for that), like [`crate::Ops::awq_gemm`].

use super::run::{element, x_fits_wgmma_tma};
use super::select::{
    awq_dense_wins, awq_prepared_dense_wins, select_awq_bulk, select_awq_gemm_prepared, select_awq_streamed,
    select_awq_streamed_wave, select_awq_streamed_wide,
};
use super::select_split::select_awq_wgmma_prepared;
use super::select_streamed16::select_awq_streamed_wide16;
use super::select_streamed32::select_awq_streamed_wide32;
use super::validate::{validate_awq_gemm, validate_awq_weight, AwqGemmProblem, AwqTensors};
use super::AwqShape;
use crate::context::Ops;
use crate::error::{boxed, OpsError};
use crate::stream::Uses;
use crate::tensor::{MatrixMut, MatrixRef, VectorRef};
use cudarc::driver::CudaSlice;
use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::awq_prepare::{self, PREPARED_K, PREPARED_N};
use std::sync::Arc;

/// An AWQ weight prepared for [`Ops::awq_gemm_prepared`] (module docs): the reordered
/// `qweight` (owned, on the GPU it was prepared on) and the checkpoint tensors (borrowed).
pub struct AwqWeight<'a> {
    tensors: AwqTensors<'a>,
    shape: AwqShape,
    prepared: CudaSlice<i32>,
}

impl<'a> AwqWeight<'a> {
    /// Reorders `w.qweight` into the prepared layout on `ops`'s GPU (one kernel on its
    /// stream; the result is ready for any op later on that stream).
    ///
    /// # Errors
    ///
    /// Everything [`crate::awq::validate_awq_weight`] rejects; K not a multiple of 16 or N
    /// not a multiple of 64 ([`OpsError::Shape`]: the layout's blocks); a tensor on
    /// another device ([`OpsError::Device`]), a GPU older than sm_80 ([`OpsError::Arch`]).
    ///
    /// ```
    /// use rcute_ops::awq::{pack_awq_matrix, AwqTensors, AwqWeight};
    /// use rcute_ops::{f16, Gpu, MatrixMut, MatrixRef, Ops};
    /// let Some(gpu) = Gpu::detect().unwrap() else { return }; // no GPU here
    /// let ops = Ops::new(gpu);
    /// let s = ops.gpu().stream().clone();
    /// let (m, k, n, g) = (3, 64, 64, 32);
    /// // q = 9, z = 8, s = 0.5: every weight is 0.5; x = 1.
    /// let q = s.clone_htod(&pack_awq_matrix(&vec![9u8; k * n], k, n).unwrap()).unwrap();
    /// let z = s.clone_htod(&pack_awq_matrix(&vec![8u8; 2 * n], 2, n).unwrap()).unwrap();
    /// let sc = s.clone_htod(&vec![f16::from_f32(0.5); 2 * n]).unwrap();
    /// let x = s.clone_htod(&vec![f16::ONE; m * k]).unwrap();
    /// let mut out = s.alloc_zeros::<f16>(m * n).unwrap();
    /// let tensors = AwqTensors {
    ///     qweight: MatrixRef::new(&q, k, n / 8),
    ///     scales: MatrixRef::new(&sc, 2, n),
    ///     qzeros: MatrixRef::new(&z, 2, n / 8),
    ///     group: g,
    /// };
    /// let w = AwqWeight::prepare(&ops, &tensors).unwrap();
    /// ops.awq_gemm_prepared(&MatrixRef::new(&x, m, k), &w, None, &mut MatrixMut::new(&mut out, m, n)).unwrap();
    /// assert!(s.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == 32.0));
    /// ```
    pub fn prepare(ops: &Ops, w: &AwqTensors<'a>) -> Result<AwqWeight<'a>, OpsError> {
        let p = validate_awq_weight(w)?;
        let (k, n) = (p.shape.k, p.shape.n);
        if !k.is_multiple_of(PREPARED_K as usize) || !n.is_multiple_of(PREPARED_N as usize) {
            return Err(OpsError::Shape(format!(
                "the prepared AWQ weight needs K a multiple of {PREPARED_K} and N of {PREPARED_N}, got K = {k}, N = {n}"
            )));
        }
        ops.check_awq_devices(&[("qweight", &p.qweight), ("scales", &p.scales), ("qzeros", &p.qzeros)])?;
        let mut uses = Uses::new(ops.stream())?;
        uses.read(w.qweight.tracked());
        let mut prepared = ops.stream().alloc_zeros::<i32>(k * n / 8)?;
        let out = MatrixMut::new(&mut prepared, k, n / 8).geo().ptr;
        // SAFETY: qweight was validated as K x N/8 dense words; `prepared` holds as many;
        // K % 16 == 0 and N % 64 == 0 (the kernel's blocks).
        unsafe { ops.launch_awq_prepare(p.qweight.ptr, out, k, n) }?;
        drop(uses);
        Ok(AwqWeight {
            tensors: *w,
            shape: p.shape,
            prepared,
        })
    }

    /// K, N and G.
    pub fn shape(&self) -> AwqShape {
        self.shape
    }

    /// The checkpoint tensors with `qweight` replaced by the prepared words (same shape).
    fn prepared_tensors(&self) -> AwqTensors<'_> {
        AwqTensors {
            qweight: MatrixRef::new(&self.prepared, self.shape.k, self.shape.n / 8),
            ..self.tensors
        }
    }
}

impl Ops {
    /// Launch `rc_awq_prepare` (loaded once): `out` = the `K x N/8` words at `qweight`
    /// reordered into the prepared layout, on the handle's stream.
    ///
    /// # Safety
    /// `qweight` and `out` each hold `K N / 8` dense 32-bit words (`out` 16-byte aligned,
    /// not overlapping `qweight`); K is a multiple of 16 and N of 64 (the kernel's blocks).
    pub(crate) unsafe fn launch_awq_prepare(&self, qweight: u64, out: u64, k: usize, n: usize) -> Result<(), OpsError> {
        // Generated once with the function: the reordered path launches it on every call.
        let (g, function) = self.awq.prepare.get_or_try_build(&(), || {
            let g = awq_prepare::generate().map_err(boxed)?;
            let function = self.load_function(&g.source, &g.name)?;
            Ok::<_, OpsError>((Arc::new(g), function))
        })?;
        let (k, n) = (k as i32, n as i32);
        // SAFETY: forwarded from the caller.
        unsafe { self.awq_launch(&function, &g.launch_config(k, n), &g.args(qweight, out, k, n)) }
    }

    /// `out = x @ dequantize(w) (+ bias)` on a prepared weight: as [`Ops::awq_gemm`] (the
    /// same results: the weight is dequantized identically), with the prepared kernel for
    /// the fused path: the 16-row streamed tile where
    /// [`super::select_streamed16::select_awq_streamed_wide16`] takes the shape (9 to 16
    /// rows of a wide weight), the 24- / 32-row one where
    /// [`super::select_streamed32::select_awq_streamed_wide32`] takes it (17 to 32 rows), else on sm_90 the SM90 mixed-input kernel where
    /// [`super::select_split::select_awq_wgmma_prepared`] (split-K at small batches, one
    /// split otherwise) takes the shape, `x` suits its TMA map and
    /// [`super::select::awq_prepared_dense_wins`] does not send it to the dense path (a
    /// 16-byte aligned, row-major `x` with a row pitch of a multiple of 8 elements), else
    /// the dense path where [`super::select::awq_dense_wins`], else
    /// [`Ops::run_awq_gemm_prepared`]'s choice.
    ///
    /// # Errors
    ///
    /// As [`Ops::awq_gemm`]; `x`, `bias` or `out` of another shape than the prepared
    /// weight's K and N ([`OpsError::Shape`], [`OpsError::VectorLength`]) and a weight
    /// prepared on another device ([`OpsError::Device`]) included; nothing is launched.
    pub fn awq_gemm_prepared(
        &self,
        x: &MatrixRef<'_>,
        w: &AwqWeight<'_>,
        bias: Option<&VectorRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let (m, n, k, cc) = (x.geo().rows, w.shape.n, w.shape.k, self.gpu().compute_capability());
        let tma_x = x_fits_wgmma_tma(&x.geo());
        let sms = self.gpu().sm_count() as usize;
        // the 16-, 24- and 32-row streamed tiles (9 to 32 rows of a wide weight) before the
        // wgmma kernels
        let wide_streamed = |e| {
            select_awq_streamed_wide16(m, n, k, sms, e)
                .or_else(|| select_awq_streamed_wide32(m, n, k, sms, e))
                .is_some()
        };
        // above 3072 rows of a wide weight the dense path first (`awq_prepared_dense_wins`)
        let dense_first = awq_prepared_dense_wins(m, n, k, cc);
        if let Some(e) = element(w.tensors.scales.geo().dtype)
            .ok()
            .filter(|&e| tma_x && !dense_first && !wide_streamed(e))
        {
            let wgmma = select_awq_wgmma_prepared(m, n, k, sms, cc, e);
            if let Some(forced) = wgmma {
                return self.run_awq_gemm_prepared(x, w, bias, out, Some(forced));
            }
        }
        if awq_dense_wins(m, n, k, cc) {
            return self.awq_gemm(x, &w.tensors, bias, out);
        }
        self.run_awq_gemm_prepared(x, w, bias, out, None)
    }

    /// [`Ops::awq_gemm_prepared`] on the fused prepared kernel, with the configuration and
    /// requested K splits of `forced` (its `prepared` flag is set here), or the shape's
    /// choice for `None`: the register-streamed kernel where
    /// [`super::select::select_awq_streamed`] (half a wave of 64-column blocks), (1 to 8
    /// rows on a weight of one to two waves of 64-column blocks)
    /// [`super::select::select_awq_streamed_wide`], (9 to 16 rows there)
    /// [`super::select_streamed16::select_awq_streamed_wide16`], (17 to 32 rows there)
    /// [`super::select_streamed32::select_awq_streamed_wide32`] or (1 to 8 rows, more than
    /// half and at most one wave) [`super::select::select_awq_streamed_wave`] takes it, on sm_90 the
    /// bulk-producer kernel
    /// where [`super::select::select_awq_bulk`] takes it, else
    /// [`super::select::select_awq_gemm_prepared`] (tests and benchmarks cover every kernel
    /// this way). A forced bulk or wgmma configuration off sm_90 is an [`OpsError::Arch`];
    /// a forced wgmma configuration needs `x` 16-byte aligned with a row pitch of a
    /// multiple of 8 elements (its TMA map), else [`OpsError::Alignment`].
    pub fn run_awq_gemm_prepared(
        &self,
        x: &MatrixRef<'_>,
        w: &AwqWeight<'_>,
        bias: Option<&VectorRef<'_>>,
        out: &mut MatrixMut<'_>,
        forced: Option<(AwqGemmConfig, u32)>,
    ) -> Result<(), OpsError> {
        let t = w.prepared_tensors();
        let p: AwqGemmProblem<'_> = validate_awq_gemm(x, &t, bias, out)?;
        let mut uses = Uses::new(self.stream())?;
        for v in [x, &t.qweight, &t.scales, &t.qzeros] {
            uses.read(v.tracked());
        }
        uses.read(bias.and_then(|b| b.tracked()));
        uses.write(out.tracked_mut());
        let e = element(p.w.dtype)?;
        let (m, n, k, sms) = (p.m, p.w.shape.n, p.w.shape.k, self.gpu().sm_count() as usize);
        let bulk = || match self.gpu().compute_capability() {
            (9, 0) => select_awq_bulk(m, n, k, sms, e),
            _ => None,
        };
        let (cfg, splits) = forced
            .or_else(|| select_awq_streamed(m, n, k, sms, e))
            .or_else(|| select_awq_streamed_wide(m, n, k, sms, e))
            .or_else(|| select_awq_streamed_wide16(m, n, k, sms, e))
            .or_else(|| select_awq_streamed_wide32(m, n, k, sms, e))
            .or_else(|| select_awq_streamed_wave(m, n, k, sms, e))
            .or_else(bulk)
            .unwrap_or_else(|| select_awq_gemm_prepared(m, n, k, sms, e));
        self.run_awq_fused(&p, Some((cfg.prepared(), splits)))
    }
}
