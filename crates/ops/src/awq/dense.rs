//! AWQ's dense path: dequantize the checkpoint once per call into a K-major 16-bit weight
//! and run the library's own dense GEMM on it. From a few hundred rows on, a GEMM is
//! compute-bound and the dense SM90 kernel (TMA + `wgmma`, warp-specialized) beats any
//! `mma.sync` kernel that converts int4 in its mainloop, while the dequantization costs
//! one bandwidth-bound pass over the weight (about 2.5 bytes per weight element: int4 read
//! and 16-bit write). [`crate::awq::select::awq_dense_wins`] picks this path by shape.
//!
//! * [`Ops::awq_dequantize_kmajor`]: the transposed weight `w^T [N, K]`, the K-major B
//!   operand the SM90 GEMM reads with TMA;
//! * [`Ops::run_awq_gemm_dense`]: `out = x @ w (+ bias)` as that dequantization into the
//!   stream's weight scratch (`K x N` 16-bit elements, kept for the handle's life like
//!   the split-K workspace, see [`crate::stream`]) and the SM90 GEMM with the bias added
//!   in its epilogue (a row-broadcast fusion), f32 accumulation, one rounding of `out`.
//!   The weight is rounded once to the 16-bit type first (as `awq_dequantize` does), so
//!   results agree with the fused kernel's to the 16-bit rounding of `(q - z) * s`.

use super::run::element;
use super::validate::{AwqGemmProblem, AwqTensors};
use crate::context::Ops;
use crate::error::{boxed, OpsError};
use crate::select::Choice;
use crate::tensor::MatrixMut;
use crate::tuning::ProblemKey;
use rcute_kernel::gemm_sm80::GemmArgs;
use rcute_kernel::gemm_sm90::{Fusion, FusionArgs, GemmSm90Config, Node};
use std::sync::PoisonError;

impl Ops {
    /// `out = dequantize(w)^T`: the dense weight `(q - z) * s` of an AutoAWQ checkpoint,
    /// transposed to `[N, K]` (row-major, so each column of the `[K, N]` weight is
    /// contiguous: the K-major operand of a dense GEMM), rounded once to the scales' type.
    /// Runs on the handle's stream; returns once launched.
    ///
    /// # Errors
    ///
    /// Everything [`crate::awq::validate_awq_dequantize_kmajor`] rejects (K not a multiple
    /// of 8 included), an operand on another device ([`OpsError::Device`]) or a GPU older
    /// than sm_80 ([`OpsError::Arch`]), all before anything is launched.
    ///
    /// ```
    /// use rcute_ops::awq::{pack_awq_matrix, AwqTensors};
    /// use rcute_ops::{f16, Gpu, MatrixMut, MatrixRef, Ops};
    /// let Some(gpu) = Gpu::detect().unwrap() else { return }; // no GPU here
    /// let ops = Ops::new(gpu);
    /// let s = ops.gpu().stream().clone();
    /// let (k, n, g) = (64, 16, 32);
    /// // q[k][n] = n % 16, z = 8, s = 0.5: w^T[n][k] = (n % 16 - 8) / 2.
    /// let q: Vec<u8> = (0..k * n).map(|i| (i % n) as u8).collect();
    /// let q = s.clone_htod(&pack_awq_matrix(&q, k, n).unwrap()).unwrap();
    /// let z = s.clone_htod(&pack_awq_matrix(&vec![8u8; 2 * n], 2, n).unwrap()).unwrap();
    /// let sc = s.clone_htod(&vec![f16::from_f32(0.5); 2 * n]).unwrap();
    /// let mut out = s.alloc_zeros::<f16>(n * k).unwrap();
    /// let w = AwqTensors {
    ///     qweight: MatrixRef::new(&q, k, n / 8),
    ///     scales: MatrixRef::new(&sc, 2, n),
    ///     qzeros: MatrixRef::new(&z, 2, n / 8),
    ///     group: g,
    /// };
    /// ops.awq_dequantize_kmajor(&w, &mut MatrixMut::new(&mut out, n, k)).unwrap();
    /// let host = s.clone_dtoh(&out).unwrap();
    /// assert!((0..n * k).all(|i| host[i].to_f32() == ((i / k) as f32 - 8.0) / 2.0));
    /// ```
    pub fn awq_dequantize_kmajor(&self, w: &AwqTensors<'_>, out: &mut MatrixMut<'_>) -> Result<(), OpsError> {
        self.dequantize_into(w, out, true)
    }

    /// Run a validated `awq_gemm` problem on the dense path (module docs): the K-major
    /// dequantization into the stream's weight scratch, then the SM90 GEMM of
    /// [`Ops::awq_dense_gemm`]. Needs sm_90 ([`OpsError::Arch`] elsewhere); `awq_gemm` takes
    /// this path by itself where it is the faster one ([`crate::awq::select::awq_dense_wins`]).
    pub fn run_awq_gemm_dense(&self, p: &AwqGemmProblem<'_>) -> Result<(), OpsError> {
        self.run_awq_gemm_dense_with(p, None)
    }

    /// [`Ops::run_awq_gemm_dense`] with the SM90 GEMM's configuration and K splits forced
    /// (`Some`; its element types, C and epilogue are the problem's), or
    /// [`Ops::awq_dense_gemm`]'s for `None` (benchmarks and tests cover tiles this way).
    /// Stream-K is off either way (the bias epilogue is verified with the data-parallel
    /// walk only).
    pub fn run_awq_gemm_dense_with(
        &self,
        p: &AwqGemmProblem<'_>,
        forced: Option<(GemmSm90Config, u32)>,
    ) -> Result<(), OpsError> {
        self.check_devices(&p.views())?;
        let cc = self.gpu().compute_capability();
        if cc != (9, 0) {
            return Err(OpsError::Arch(format!(
                "the AWQ dense path runs the SM90 GEMM: needs sm_90, found {}.{}",
                cc.0, cc.1
            )));
        }
        let e = element(p.w.dtype)?;
        let (m, n, k) = (p.m, p.w.shape.n, p.w.shape.k);
        let (mut cfg, split) = forced
            .or_else(|| self.awq_dense_gemm(m, n, k))
            .ok_or_else(|| OpsError::Arch("no SM90 GEMM configuration for this shape".into()))?;
        (cfg.ab, cfg.cd) = (e, e);
        cfg.stream_k = false;
        let fa = match &p.bias {
            Some(b) => {
                cfg.fusion = Fusion::new(Node::Accumulator + Node::row_broadcast("bias", e, false))
                    .and_then(|f| f.with_name(&format!("bias_{e}")))
                    .map_err(boxed)?;
                FusionArgs::new().ptr("bias", b.ptr)
            }
            None => {
                cfg = cfg.without_c();
                FusionArgs::new().f32("alpha", 1.0)
            }
        };
        let loaded = self.load_gemm_sm90(&cfg)?;
        // One dense path at a time writes and reads a stream's weight scratch.
        let _serial = self.awq.dense.lock().unwrap_or_else(PoisonError::into_inner);
        let weight = self.scratch().weight(n * k * 2)?;
        // SAFETY: the scratch holds N * K 16-bit elements (16-byte aligned, rcute's own
        // memory, so it overlaps no input); validate_awq_gemm checked K % 8 == 0.
        unsafe { self.launch_dequantize(&p.w, weight, true) }?;
        let mut args = GemmArgs::tn(m as i32, n as i32, k as i32, 1, p.x.ptr, weight, 0, p.out.ptr);
        (args.lda, args.ldb, args.ldc, args.ldd) = (p.x.ld(), k as i64, p.out.ld(), p.out.ld());
        args.beta = 0.0;
        args.split_k = split.max(1);
        // SAFETY: validate_awq_gemm checked x [M, K] and out [M, N] (row-major, 16-byte
        // aligned, leading dimensions of whole 16-byte vectors: what TMA needs) and the bias
        // [N]; the weight scratch holds w^T [N, K], written by the launch before on this
        // stream; the views borrow their buffers for the call.
        unsafe { self.launch_sm90(&loaded, args, &fa) }
    }

    /// The dense path's SM90 GEMM (configuration and K splits) for `x [M, K] @ w [K, N]`:
    /// a tuning table's SM90 entry for the plain 16-bit GEMM of that shape at its own M
    /// bucket (the problem's type, else bf16: the tables are measured in bf16 and the bf16
    /// entry's tile serves f16 as well), else the rules' [`crate::select::select_sm90`].
    /// At 4096 x 14336 x 4096 on the H200 that is `h200.json`'s `sm90:256x160x64,coop,c1x2`
    /// (the rules: 128x256 cooperative): the whole path 776.6 us against 794.8 with the
    /// rules' tile in one process (BENCHMARKS.md, "Session 30 (helper awq4k)"). Unlike
    /// `Ops::gemm` it does not reach to a neighbouring bucket's entry: the same 256x160
    /// tile (the 4096 entry's, within `Ops::gemm`'s reach of 2048 rows) lost there, 442.8
    /// against 418.5 us at 2048 x 14336 x 4096.
    pub fn awq_dense_gemm(&self, m: usize, n: usize, k: usize) -> Option<(GemmSm90Config, u32)> {
        let tuning = self.tuning();
        let arch = self.gpu().arch().filter(|_| tuning.active());
        let tuned = arch.and_then(|arch| {
            ["f16", "bf16"].into_iter().find_map(|dtypes| {
                let key = ProblemKey::new("gemm", dtypes, "lincomb", arch.as_str(), m, n, k);
                match tuning.exact(&key)?.gemm_choice()? {
                    Choice::Sm90(cfg, split) => Some((cfg, split)),
                    Choice::Sm80(_) => None,
                }
            })
        });
        tuned.or_else(|| crate::select::select_sm90(m, n, k, 1, self.gpu().sm_count()))
    }
}
