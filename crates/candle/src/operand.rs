//! Candle tensors as rcute geometry: element type, shape and strides from the tensor's
//! [`Layout`](candle_core::Layout), at a placeholder address (for validation, which needs
//! no GPU) or at the tensor's device address (for the launch).

use crate::error::{ops, Error};
use candle_core::{DType as CDType, Tensor};
use rcute_ops::{DType, Geometry, MatrixMut, MatrixRef, OpsError, VectorRef};

/// The address validation places a tensor's storage at: CUDA allocations are 256-byte
/// aligned, so the tensor's start offset decides alignment exactly as on the device.
pub(crate) const PLACEHOLDER: u64 = 1 << 32;

/// rcute's element type of a candle dtype. candle has no `i8`: `u8` tensors hold the
/// two's-complement bytes of rcute's `s8` operands.
pub(crate) fn dtype(operand: &'static str, d: CDType) -> candle_core::Result<DType> {
    Ok(match d {
        CDType::BF16 => DType::BF16,
        CDType::F16 => DType::F16,
        CDType::F32 => DType::F32,
        CDType::I32 => DType::S32,
        CDType::U8 => DType::S8,
        CDType::F8E4M3 => DType::E4M3,
        other => {
            return Err(ops(OpsError::DType(format!(
                "{operand} is a {other:?} tensor, which no rcute op takes (bf16, f16, f32, i32, u8 as s8, f8e4m3)"
            ))))
        }
    })
}

/// The geometry of `t` (1, 2 or 3 dims: a vector, a matrix, a batch of matrices) with its
/// storage at `base` (the start offset is added) and `len` elements from there on.
pub(crate) fn geometry(operand: &'static str, t: &Tensor, base: u64, len: Option<usize>) -> candle_core::Result<Geometry> {
    let dt = dtype(operand, t.dtype())?;
    let layout = t.layout();
    let (dims, strides) = (layout.dims(), layout.stride());
    let (batch, rows, cols, bs, rs, cs) = match (dims, strides) {
        ([n], [s]) => (1, 1, *n, 0, *n, *s),
        ([r, c], [rs, cs]) => (1, *r, *c, 0, *rs, *cs),
        ([b, r, c], [bs, rs, cs]) => (*b, *r, *c, *bs, *rs, *cs),
        _ => {
            return Err(ops(OpsError::Shape(format!(
                "{operand} has shape {:?}: rcute takes vectors, matrices and batches of matrices (1 to 3 dims)",
                dims
            ))))
        }
    };
    let to_i64 = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    let offset = layout.start_offset();
    let mut geo = Geometry {
        ptr: base + (offset * dt.bytes()) as u64,
        len: 0,
        dtype: dt,
        rows,
        cols,
        batch,
        row_stride: to_i64(rs),
        col_stride: to_i64(cs),
        batch_stride: to_i64(bs),
        device: None,
    };
    geo.len = match len {
        Some(l) => l.saturating_sub(offset),
        None => geo.extent().map_err(ops)?,
    };
    Ok(geo)
}

/// A read-only view of `geo`.
///
/// # Safety
/// Launch with it only while `geo` describes memory that stays valid (validation alone
/// never touches memory).
pub(crate) unsafe fn view<'a>(geo: Geometry) -> MatrixRef<'a> {
    MatrixRef::from_raw(geo)
}

/// A writable view of `geo`.
///
/// # Safety
/// As [`view`].
pub(crate) unsafe fn view_mut<'a>(geo: Geometry) -> MatrixMut<'a> {
    MatrixMut::from_raw(geo)
}

/// A vector view of `geo`: a contiguous 1-dim tensor (or rcute's strides error).
///
/// # Safety
/// As [`view`].
pub(crate) unsafe fn vector<'a>(operand: &'static str, geo: Geometry) -> Result<VectorRef<'a>, OpsError> {
    if geo.rows != 1 || geo.batch != 1 || geo.col_stride != 1 {
        return Err(OpsError::Strides {
            operand,
            detail: format!(
                "a vector must be a contiguous 1-dim tensor, not {} x {} with strides ({}, {})",
                geo.rows, geo.cols, geo.row_stride, geo.col_stride
            ),
        });
    }
    Ok(VectorRef::from_raw(geo.ptr, geo.len, geo.dtype, geo.cols, geo.device))
}

/// A dense row-major output geometry of `dims` (2 or 3) at `base`.
pub(crate) fn dense(dt: DType, dims: &[usize], base: u64) -> Geometry {
    let (batch, rows, cols) = match dims {
        [r, c] => (1, *r, *c),
        [b, r, c] => (*b, *r, *c),
        _ => unreachable!("outputs are matrices or batches of matrices"),
    };
    let mut g = Geometry::dense(base, batch * rows * cols, dt, rows, cols);
    g.batch = batch;
    g.batch_stride = (rows * cols) as i64;
    g
}

/// The CUDA device all `operands` are on, or [`Error::NotCuda`] for the first that is not.
/// Device ordinals are checked by the op itself.
pub(crate) fn device(operands: &[(&'static str, &Tensor)]) -> candle_core::Result<candle_core::Device> {
    for (operand, t) in operands {
        if !t.device().is_cuda() {
            let location = format!("{:?}", t.device().location()).to_lowercase();
            return Err(Error::NotCuda { operand, location }.into());
        }
    }
    Ok(operands[0].1.device().clone())
}
