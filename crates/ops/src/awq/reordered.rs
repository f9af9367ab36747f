//! AWQ's reordered path: the unprepared op ([`crate::Ops::awq_gemm`], checkpoint tensors
//! as they are) on the SM90 mixed-input kernel. Per call, `rc_awq_prepare` (the reorder
//! [`super::AwqWeight::prepare`] runs once) writes `qweight`'s nibbles in the prepared
//! layout into the stream's weight scratch (`K N / 2` bytes, the buffer the dense path
//! dequantizes into, see [`crate::stream`]), and the wgmma kernel of
//! [`super::select::select_awq_wgmma`] reads it there; scales and zeros are the
//! checkpoint's own (the prepared layout moves only `qweight`). Both launches go on the
//! handle's stream with no host synchronization, so the path can be captured in a CUDA
//! graph (once its scratch has grown: [`crate::stream`]).
//!
//! The reorder reads and writes the int4 weight once each (about `K N` bytes of traffic,
//! bandwidth-bound), where the dense path writes and reads a 16-bit weight (`5 K N`
//! bytes); the result is bit-identical to [`crate::Ops::awq_gemm_prepared`]'s with the
//! same configuration (the same kernel on the same words).
//! [`super::select::awq_reordered_wins`] decides where `awq_gemm` takes it, after
//! [`super::select_checkpoint_wgmma::select_awq_wgmma_checkpoint`] (the same kernel on the
//! checkpoint's own words, no reorder pass), which takes every such shape whose `qweight`
//! is 16-byte aligned.

use super::run::{check_fused_operands, element};
use super::select::select_awq_wgmma;
use super::validate::AwqGemmProblem;
use crate::context::Ops;
use crate::error::OpsError;
use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::awq_prepare::{PREPARED_K, PREPARED_N};
use std::sync::PoisonError;

impl Ops {
    /// Run a validated `awq_gemm` problem on the reordered path (module docs): with the
    /// prepared configuration and requested K splits of `forced` (its `prepared` flag is
    /// set here; any prepared kernel reads the reordered words), or for `None` the tile of
    /// [`super::select::select_awq_wgmma`]. `awq_gemm` takes this path by itself where
    /// [`super::select::awq_reordered_wins`].
    ///
    /// # Errors
    ///
    /// Before anything is launched: a GPU other than sm_90 ([`OpsError::Arch`]; the forced
    /// non-wgmma kernels run elsewhere too), K not a multiple of 16 or N of 64, or no
    /// wgmma tile for the shape with `forced` `None` ([`OpsError::Shape`]), `x` unfit for
    /// the wgmma kernel's TMA map or `qzeros` not 16-byte aligned
    /// ([`OpsError::Alignment`]), an operand on another device ([`OpsError::Device`]).
    pub fn run_awq_gemm_reordered(
        &self,
        p: &AwqGemmProblem<'_>,
        forced: Option<(AwqGemmConfig, u32)>,
    ) -> Result<(), OpsError> {
        let (m, n, k, cc) = (p.m, p.w.shape.n, p.w.shape.k, self.gpu().compute_capability());
        if !k.is_multiple_of(PREPARED_K as usize) || !n.is_multiple_of(PREPARED_N as usize) {
            return Err(OpsError::Shape(format!(
                "the reordered AWQ path needs K a multiple of {PREPARED_K} and N of {PREPARED_N}, got K = {k}, N = {n}"
            )));
        }
        let e = element(p.w.dtype)?;
        let (cfg, splits) = match forced {
            Some(f) => f,
            None if cc != (9, 0) => {
                return Err(OpsError::Arch(format!(
                    "the reordered AWQ path runs the SM90 mixed-input kernel: needs sm_90, found {}.{}",
                    cc.0, cc.1
                )))
            }
            None => select_awq_wgmma(m, n, k, self.gpu().sm_count() as usize, cc, e)
                .ok_or_else(|| OpsError::Shape(format!("no SM90 mixed-input tile for {m} x {n} x {k}")))?,
        };
        self.check_awq_devices(&p.views())?;
        // One op at a time writes and reads a stream's weight scratch (as the dense path).
        let _serial = self.awq.dense.lock().unwrap_or_else(PoisonError::into_inner);
        let words = self.scratch().weight(k * n / 2)?;
        let mut reordered = *p;
        reordered.w.qweight.ptr = words;
        // What the fused launch below would refuse only after the reorder ran.
        let mut prepared = cfg.prepared();
        check_fused_operands(&reordered, &mut prepared, true, cc)?;
        // SAFETY: validate_awq_gemm checked qweight as K x N/8 dense words; the scratch
        // holds K N / 2 bytes (16-byte aligned, rcute's own memory: no overlap); K % 16 ==
        // 0 and N % 64 == 0 (checked above).
        unsafe { self.launch_awq_prepare(p.w.qweight.ptr, words, k, n) }?;
        // The scratch's words are the prepared layout of this problem's qweight, written by
        // the launch before on this stream; every other view is the caller's, validated.
        self.run_awq_fused(&reordered, Some((prepared, splits)))
    }
}
