//! Validation of the AWQ ops' inputs: the checkpoint tensors ([`AwqTensors`]) and the
//! activations, bias and output of `awq_dequantize` / `awq_gemm`. Pure (only the views'
//! geometry is read), so every rejection is testable without a GPU.
//!
//! ```
//! use rcute_ops::awq::{validate_awq_weight, AwqTensors};
//! use rcute_ops::{DType, Geometry, MatrixRef, OpsError};
//! let (k, n, g) = (256, 64, 128);
//! // SAFETY: validation only; nothing is launched with these views.
//! let view = |ptr, dtype, rows, cols| unsafe { MatrixRef::from_raw(Geometry::dense(ptr, rows * cols, dtype, rows, cols)) };
//! let w = AwqTensors {
//!     qweight: view(0x10000, DType::S32, k, n / 8),
//!     scales: view(0x20000, DType::F16, k / g, n),
//!     qzeros: view(0x30000, DType::S32, k / g, n / 8),
//!     group: g,
//! };
//! assert_eq!(validate_awq_weight(&w).unwrap().shape().n, 64);
//! let bad = AwqTensors { group: 96, ..w };
//! assert!(matches!(validate_awq_weight(&bad), Err(OpsError::Shape(_))));
//! ```

use super::format::AwqShape;
use crate::error::OpsError;
use crate::gemm::{check_dims, check_layout, overlaps, range};
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef, VectorRef};
use std::marker::PhantomData;

/// The checkpoint tensors of one AWQ weight, as AutoAWQ stores them: `qweight` int32
/// `[K, N/8]`, `scales` f16 or bf16 `[K/G, N]`, `qzeros` int32 `[K/G, N/8]`, all dense
/// row-major, and the group size `G` (32, 64, 128 or K).
#[derive(Clone, Copy, Debug)]
pub struct AwqTensors<'a> {
    /// Packed 4-bit weights, int32 `[K, N/8]`.
    pub qweight: MatrixRef<'a>,
    /// Per-group scales, 16-bit `[K/G, N]`.
    pub scales: MatrixRef<'a>,
    /// Packed 4-bit zero points, int32 `[K/G, N/8]`.
    pub qzeros: MatrixRef<'a>,
    /// Rows per quantization group.
    pub group: usize,
}

/// A validated AWQ weight: its shape, 16-bit type and the tensors' geometry. Only the
/// validation functions make one (its fields are read-only), so a problem always describes
/// views that passed validation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AwqWeightProblem {
    pub(crate) shape: AwqShape,
    pub(crate) dtype: DType,
    pub(crate) qweight: Geometry,
    pub(crate) scales: Geometry,
    pub(crate) qzeros: Geometry,
}

impl AwqWeightProblem {
    /// K, N and G.
    pub fn shape(&self) -> AwqShape {
        self.shape
    }
    /// Type of the scales (and of the activations and outputs that go with them).
    pub fn dtype(&self) -> DType {
        self.dtype
    }
}

/// A validated `awq_gemm`: the weight, `x [M, K]`, the optional bias `[N]` and `out [M, N]`.
/// Only [`validate_awq_gemm`] makes one; it borrows the views' buffers (`'a`), so the safe
/// [`crate::Ops::run_awq_gemm`] can launch it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AwqGemmProblem<'a> {
    pub(crate) w: AwqWeightProblem,
    pub(crate) m: usize,
    pub(crate) x: Geometry,
    pub(crate) bias: Option<Geometry>,
    pub(crate) out: Geometry,
    _views: PhantomData<&'a ()>,
}

impl AwqGemmProblem<'_> {
    /// Rows of `x` and `out`.
    pub fn m(&self) -> usize {
        self.m
    }
    /// The weight.
    pub fn weight(&self) -> AwqWeightProblem {
        self.w
    }
    /// Whether a bias is added.
    pub fn has_bias(&self) -> bool {
        self.bias.is_some()
    }
    /// Every operand view by name (`x`, the checkpoint tensors, `out`, `bias` if any), for
    /// the device checks of the paths that run the problem.
    pub(crate) fn views(&self) -> Vec<(&'static str, &Geometry)> {
        let mut v = vec![
            ("x", &self.x),
            ("qweight", &self.w.qweight),
            ("scales", &self.w.scales),
            ("qzeros", &self.w.qzeros),
            ("out", &self.out),
        ];
        if let Some(b) = &self.bias {
            v.push(("bias", b));
        }
        v
    }
}

fn is_16bit(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// A single dense row-major matrix (the checkpoint tensors and the dequantized output).
fn check_dense(op: &'static str, g: &Geometry) -> Result<(), OpsError> {
    if g.batch != 1 || g.col_stride != 1 || (g.rows > 1 && g.row_stride != g.cols as i64) {
        return Err(OpsError::Strides {
            operand: op,
            detail: format!(
                "AWQ tensors are dense row-major single matrices (rows {}, cols {}, row stride {}, column stride {}, batch {})",
                g.rows, g.cols, g.row_stride, g.col_stride, g.batch
            ),
        });
    }
    check_layout(op, g, false)
}

/// A single row-major matrix with a leading dimension (x and out of `awq_gemm`).
fn check_row_major(op: &'static str, g: &Geometry, output: bool) -> Result<(), OpsError> {
    if g.batch != 1 || g.col_stride != 1 {
        return Err(OpsError::Strides {
            operand: op,
            detail: format!(
                "awq_gemm takes one row-major matrix (column stride {}, batch {})",
                g.col_stride, g.batch
            ),
        });
    }
    check_layout(op, g, output)
}

fn check_aligned(op: &'static str, g: &Geometry, bytes: u64) -> Result<(), OpsError> {
    if !g.ptr.is_multiple_of(bytes) {
        return Err(OpsError::Alignment {
            operand: op,
            detail: format!("address {:#x} is not a multiple of {bytes} bytes", g.ptr),
        });
    }
    let ld_bytes = g.row_stride.unsigned_abs() * g.dtype.bytes() as u64;
    if g.rows > 1 && !ld_bytes.is_multiple_of(bytes) {
        return Err(OpsError::Alignment {
            operand: op,
            detail: format!("row stride of {ld_bytes} bytes is not a multiple of {bytes}"),
        });
    }
    Ok(())
}

/// Validates the checkpoint tensors of one weight.
///
/// Rejects, with a typed [`OpsError`]: `qweight` / `qzeros` not int32 or `scales` not f16 /
/// bf16 ([`OpsError::DType`]); shapes that disagree (`qweight [K, N/8]`, `scales [K/G, N]`,
/// `qzeros [K/G, N/8]`), K not a multiple of G, G not 32, 64, 128 or K
/// ([`OpsError::Shape`]); K or N = 0 ([`OpsError::Empty`]); sizes above the kernels'
/// 32-bit indices ([`OpsError::TooLarge`]); tensors that are not dense row-major single
/// matrices ([`OpsError::Strides`]) or reach past their buffer ([`OpsError::OutOfBounds`]);
/// `scales` not 16-byte aligned, `qweight` / `qzeros` not 4-byte aligned
/// ([`OpsError::Alignment`]).
pub fn validate_awq_weight(w: &AwqTensors<'_>) -> Result<AwqWeightProblem, OpsError> {
    let (q, s, z) = (w.qweight.geo(), w.scales.geo(), w.qzeros.geo());
    for (op, g) in [("qweight", &q), ("qzeros", &z)] {
        if g.dtype != DType::S32 {
            return Err(OpsError::DType(format!(
                "AWQ {op} must be int32 (s32), got {}",
                g.dtype.name()
            )));
        }
    }
    if !is_16bit(s.dtype) {
        return Err(OpsError::DType(format!(
            "AWQ scales must be f16 or bf16, got {}",
            s.dtype.name()
        )));
    }
    let (k, n) = (q.rows, q.cols.saturating_mul(8));
    let shape = AwqShape::new(k, n, w.group)?;
    let groups = shape.groups();
    if s.rows != groups || s.cols != n || z.rows != groups || z.cols != q.cols {
        return Err(OpsError::Shape(format!(
            "AWQ qweight [{k}, {}] with G = {}: scales must be [{groups}, {n}] (got [{}, {}]), qzeros [{groups}, {}] (got [{}, {}])",
            q.cols, w.group, s.rows, s.cols, q.cols, z.rows, z.cols
        )));
    }
    check_dims(1, n, k, 1)?;
    for (op, g) in [("qweight", &q), ("scales", &s), ("qzeros", &z)] {
        check_dense(op, g)?;
    }
    check_aligned("scales", &s, 16)?;
    check_aligned("qweight", &q, 4)?;
    check_aligned("qzeros", &z, 4)?;
    Ok(AwqWeightProblem {
        shape,
        dtype: s.dtype,
        qweight: q,
        scales: s,
        qzeros: z,
    })
}

fn check_no_overlap(out: &Geometry, inputs: &[(&'static str, &Geometry)]) -> Result<(), OpsError> {
    let ro = range(out)?;
    for (name, g) in inputs {
        if overlaps(ro, range(g)?) {
            return Err(OpsError::Strides {
                operand: "out",
                detail: format!("overlaps {name}"),
            });
        }
    }
    Ok(())
}

/// Validates `awq_dequantize`: the weight ([`validate_awq_weight`]) and `out`, a dense
/// row-major `[K, N]` matrix of the scales' type, 16-byte aligned, not overlapping the
/// inputs.
pub fn validate_awq_dequantize(
    w: &AwqTensors<'_>,
    out: &MatrixMut<'_>,
) -> Result<(AwqWeightProblem, Geometry), OpsError> {
    validate_dequantize_into(w, out, false)
}

/// Validates `awq_dequantize_kmajor`: as [`validate_awq_dequantize`], but `out` is the
/// transposed weight `[N, K]` and K must be a multiple of 8 (16-byte column vectors;
/// [`OpsError::Alignment`]).
pub fn validate_awq_dequantize_kmajor(
    w: &AwqTensors<'_>,
    out: &MatrixMut<'_>,
) -> Result<(AwqWeightProblem, Geometry), OpsError> {
    validate_dequantize_into(w, out, true)
}

fn validate_dequantize_into(
    w: &AwqTensors<'_>,
    out: &MatrixMut<'_>,
    kmajor: bool,
) -> Result<(AwqWeightProblem, Geometry), OpsError> {
    let p = validate_awq_weight(w)?;
    let o = out.geo();
    if o.dtype != p.dtype {
        return Err(OpsError::DType(format!(
            "awq_dequantize writes the scales' type {}, out is {}",
            p.dtype.name(),
            o.dtype.name()
        )));
    }
    let (k, n) = (p.shape.k, p.shape.n);
    let (rows, cols, what) = if kmajor { (n, k, "[N, K]") } else { (k, n, "[K, N]") };
    if o.rows != rows || o.cols != cols {
        return Err(OpsError::Shape(format!(
            "awq_dequantize out is [{}, {}], expected {what} = [{rows}, {cols}]",
            o.rows, o.cols
        )));
    }
    if kmajor && k % 8 != 0 {
        return Err(OpsError::Alignment {
            operand: "out",
            detail: format!("the K-major weight is written in 16-byte vectors: K = {k} must be a multiple of 8"),
        });
    }
    check_dense("out", &o)?;
    check_aligned("out", &o, 16)?;
    check_no_overlap(
        &o,
        &[("qweight", &p.qweight), ("scales", &p.scales), ("qzeros", &p.qzeros)],
    )?;
    Ok((p, o))
}

/// Validates `out = x @ dequantize(w) (+ bias)`.
///
/// Besides the weight's rules ([`validate_awq_weight`]): `x`, `bias` and `out` of the
/// scales' type ([`OpsError::DType`]); `x [M, K]`, `out [M, N]` ([`OpsError::Shape`]),
/// `bias` of N elements ([`OpsError::VectorLength`]); M = 0 ([`OpsError::Empty`]); `x` and
/// `out` single row-major matrices inside their buffers, `out` not overlapping an input
/// ([`OpsError::Strides`], [`OpsError::OutOfBounds`]); `x`, `out` and `bias` 16-byte
/// aligned with leading dimensions of whole 16-byte vectors, and K a multiple of 8 (`x`
/// is read in 16-byte vectors; every group size but `G = K` implies it)
/// ([`OpsError::Alignment`]).
pub fn validate_awq_gemm<'a, 'd: 'a>(
    x: &MatrixRef<'a>,
    w: &AwqTensors<'a>,
    bias: Option<&VectorRef<'a>>,
    out: &MatrixMut<'d>,
) -> Result<AwqGemmProblem<'a>, OpsError> {
    let wp = validate_awq_weight(w)?;
    let (gx, go) = (x.geo(), out.geo());
    let gb = bias.map(|b| b.geo());
    let t = wp.dtype;
    if gx.dtype != t || go.dtype != t || gb.is_some_and(|b| b.dtype != t) {
        return Err(OpsError::DType(format!(
            "awq_gemm: x {}, bias {}, out {} must all have the scales' type {}",
            gx.dtype.name(),
            gb.map_or("none", |b| b.dtype.name()),
            go.dtype.name(),
            t.name()
        )));
    }
    let (k, n) = (wp.shape.k, wp.shape.n);
    let m = gx.rows;
    if gx.cols != k || go.rows != m || go.cols != n {
        return Err(OpsError::Shape(format!(
            "awq_gemm: x is [{}, {}], out [{}, {}], the weight [K, N] = [{k}, {n}]",
            gx.rows, gx.cols, go.rows, go.cols
        )));
    }
    if m == 0 {
        return Err(OpsError::Empty(format!("awq_gemm with M = 0 (N = {n}, K = {k})")));
    }
    check_dims(m, n, k, 1)?;
    if let Some(b) = &gb {
        if b.cols != n || b.rows != 1 {
            return Err(OpsError::VectorLength {
                operand: "bias",
                len: b.cols,
                expected: format!("N = {n}"),
            });
        }
        check_layout("bias", b, false)?;
        check_aligned("bias", b, 16)?;
    }
    check_row_major("x", &gx, false)?;
    check_row_major("out", &go, true)?;
    check_aligned("x", &gx, 16)?;
    check_aligned("out", &go, 16)?;
    if k % 8 != 0 {
        return Err(OpsError::Alignment {
            operand: "x",
            detail: format!("awq_gemm reads x in 16-byte vectors: K = {k} must be a multiple of 8"),
        });
    }
    let mut inputs = vec![
        ("x", &gx),
        ("qweight", &wp.qweight),
        ("scales", &wp.scales),
        ("qzeros", &wp.qzeros),
    ];
    if let Some(b) = &gb {
        inputs.push(("bias", b));
    }
    check_no_overlap(&go, &inputs)?;
    Ok(AwqGemmProblem {
        w: wp,
        m,
        x: gx,
        bias: gb,
        out: go,
        _views: PhantomData,
    })
}
