//! [`Ops::quantize_e4m3_rows`]: per-row dynamic e4m3 quantization of a bf16 / f16 matrix
//! on the GPU (the FP8 MoE layer's activation quantization, usable for weights quantized
//! per output channel).

use crate::error::{boxed, OpsError};
use crate::gemm::{check_layout, overlaps, range};
use crate::stream::Uses;
use crate::tensor::{DType, MatrixMut, MatrixRef};
use crate::Ops;
use rcute_kernel::grouped_gemm::quant::{self, MoeQuantArgs, QuantSource};

impl Ops {
    /// `q[r] = e4m3(src[r] / scale[r])` with `scale[r] = max |src[r]| / 448` (a zero row:
    /// scale 0, zeros), rounding to nearest even and saturating, for `src [R, K]` (bf16 or
    /// f16, row-major, `K` a multiple of 16, a leading dimension of whole 16 bytes), `q [R,
    /// K]` (e4m3, dense) and `scale [R, 1]` (f32). `q[r] * scale[r]` approximates `src[r]`
    /// within e4m3's rounding: used for per-token activation scales and per-output-channel
    /// weight scales ([`Ops::fused_moe_fp8`]).
    ///
    /// # Errors
    ///
    /// Wrong element types ([`OpsError::DType`]), mismatched or empty shapes
    /// ([`OpsError::Shape`]), `K` not a multiple of 16 or misaligned views
    /// ([`OpsError::Alignment`]), views past their buffers ([`OpsError::OutOfBounds`]),
    /// non-dense or overlapping outputs ([`OpsError::Strides`]); nothing is launched then.
    ///
    /// ```no_run
    /// use rcute_ops::{bf16, Gpu, MatrixMut, MatrixRef, Ops, OpsError, E4M3};
    ///
    /// fn main() -> Result<(), OpsError> {
    ///     let Some(gpu) = Gpu::detect()? else { return Ok(()) };
    ///     let ops = Ops::new(gpu);
    ///     let s = ops.gpu().stream().clone();
    ///     let w = s.alloc_zeros::<bf16>(256 * 4096)?;
    ///     let mut q = s.alloc_zeros::<E4M3>(256 * 4096)?;
    ///     let mut scale = s.alloc_zeros::<f32>(256)?;
    ///     ops.quantize_e4m3_rows(
    ///         &MatrixRef::new(&w, 256, 4096),
    ///         &mut MatrixMut::new(&mut q, 256, 4096),
    ///         &mut MatrixMut::new(&mut scale, 256, 1),
    ///     )?;
    ///     Ok(())
    /// }
    /// ```
    pub fn quantize_e4m3_rows(
        &self,
        src: &MatrixRef<'_>,
        q: &mut MatrixMut<'_>,
        scale: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let (sg, qg, cg) = (src.geo(), q.geo(), scale.geo());
        let el = super::fused::element(sg.dtype)?;
        if !matches!(sg.dtype, DType::BF16 | DType::F16) || qg.dtype != DType::E4M3 || cg.dtype != DType::F32 {
            return Err(OpsError::DType(format!(
                "src {} / q {} / scale {}: expected bf16 or f16 / e4m3 / f32",
                sg.dtype.name(),
                qg.dtype.name(),
                cg.dtype.name()
            )));
        }
        let (rows, k) = (sg.rows, sg.cols);
        if rows == 0 || k == 0 || sg.batch != 1 || qg.batch != 1 || cg.batch != 1 {
            return Err(OpsError::Shape(format!(
                "src [{rows}, {k}] (batch {}): empty or batched",
                sg.batch
            )));
        }
        if (qg.rows, qg.cols, cg.rows, cg.cols) != (rows, k, rows, 1) {
            return Err(OpsError::Shape(format!(
                "q [{}, {}] and scale [{}, {}]: expected [{rows}, {k}] and [{rows}, 1]",
                qg.rows, qg.cols, cg.rows, cg.cols
            )));
        }
        if rows > i32::MAX as usize || k > i32::MAX as usize {
            return Err(OpsError::TooLarge { what: "quantized rows" });
        }
        check_layout("src", &sg, false)?;
        check_layout("q", &qg, true)?;
        check_layout("scale", &cg, true)?;
        if sg.col_stride != 1 || qg.col_stride != 1 || qg.row_stride != k as i64 || cg.row_stride != 1 && rows > 1 {
            return Err(OpsError::Strides {
                operand: "q",
                detail: "src row-major, q and scale dense".into(),
            });
        }
        let (qr, cr) = (range(&qg)?, range(&cg)?);
        if overlaps(qr, cr) || overlaps(range(&sg)?, qr) || overlaps(range(&sg)?, cr) {
            return Err(OpsError::Strides {
                operand: "q",
                detail: "src, q and scale must not overlap".into(),
            });
        }
        let g = quant::generate(el, QuantSource::Rows).map_err(boxed)?;
        let a = MoeQuantArgs {
            src: sg.ptr,
            q: qg.ptr,
            scale: cg.ptr,
            rows: rows as i32,
            k: k as i32,
            ld: sg.row_stride,
            ..Default::default()
        };
        g.check(&a).map_err(|e| OpsError::Alignment {
            operand: "src",
            detail: e.to_string(),
        })?;
        self.check_devices(&[("src", &sg), ("q", &qg), ("scale", &cg)])?;
        let f = self.moe_unit(&g.name, &g.source)?;
        let mut uses = Uses::new(self.stream())?;
        uses.read(src.tracked());
        uses.write(q.tracked_mut());
        uses.write(scale.tracked_mut());
        let _scope = self.launch_scope();
        // SAFETY: src [R, K] with its leading dimension, q [R, K] dense, scale [R] in
        // bounds (checked); no total_rows: every row of the grid is quantized.
        unsafe { g.launch(&f, &a) }.map_err(boxed)
    }
}
