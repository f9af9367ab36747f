//! `gemm`: `D = alpha * A @ B + beta * C` for f16/bf16 inputs with f32 accumulation.
//!
//! This module validates the problem (shapes, element types, strides, alignment, bounds,
//! aliasing) into a [`GemmProblem`]; [`crate::select`] picks the kernel configuration, and
//! the kernel layer generates, compiles (cached) and launches it.

use crate::error::{dtype_name, OpsError};
use crate::tensor::{DType, Geometry, Major, MatrixMut, MatrixRef};

/// Bytes every 16-byte vector access needs: pointers, leading dimensions and batch strides
/// of A and B must be multiples of this.
pub const VECTOR_BYTES: usize = 16;

/// A validated GEMM problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmProblem {
    /// Rows of A and D.
    pub m: usize,
    /// Columns of B and D.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Batch count.
    pub l: usize,
    /// A (M x K); batch stride 0 when broadcast.
    pub a: Geometry,
    /// B (K x N).
    pub b: Geometry,
    /// C (M x N), when `beta != 0`.
    pub c: Option<Geometry>,
    /// D (M x N).
    pub d: Geometry,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
}

pub(crate) fn check_layout(op: &'static str, g: &Geometry, output: bool) -> Result<(), OpsError> {
    let major = g.major().ok_or_else(|| OpsError::Strides {
        operand: op,
        detail: format!(
            "neither dimension is contiguous (row stride {}, column stride {})",
            g.row_stride, g.col_stride
        ),
    })?;
    let (ld, inner) = match major {
        Major::Row => (g.row_stride, g.cols),
        Major::Col => (g.col_stride, g.rows),
    };
    let outer = if major == Major::Row { g.rows } else { g.cols };
    if outer > 1 && ld < inner as i64 {
        return Err(OpsError::Strides {
            operand: op,
            detail: format!("leading dimension {ld} < {inner}: rows overlap"),
        });
    }
    if g.batch_stride < 0 || (output && g.batch > 1 && g.batch_stride == 0) {
        return Err(OpsError::Strides {
            operand: op,
            detail: format!(
                "batch stride {} (outputs need distinct, non-negative batch strides)",
                g.batch_stride
            ),
        });
    }
    if output && g.batch > 1 {
        let one = Geometry { batch: 1, ..*g }.extent()?;
        if (g.batch_stride as usize) < one {
            return Err(OpsError::Strides {
                operand: op,
                detail: format!("batch stride {} < matrix span {one}", g.batch_stride),
            });
        }
    }
    let needed = g.extent()?;
    if needed > g.len {
        return Err(OpsError::OutOfBounds {
            operand: op,
            needed,
            len: g.len,
        });
    }
    for (what, v) in [("rows", g.rows), ("columns", g.cols), ("batch", g.batch)] {
        if v > i32::MAX as usize {
            let _ = what;
            return Err(OpsError::TooLarge {
                what: "matrix dimension (kernels index with 32-bit extents)",
            });
        }
    }
    Ok(())
}

pub(crate) fn check_vector_alignment(op: &'static str, g: &Geometry) -> Result<(), OpsError> {
    let b = g.dtype.bytes();
    let bad = |what: &str, v: u64| OpsError::Alignment {
        operand: op,
        detail: format!("{what} = {v} bytes is not a multiple of {VECTOR_BYTES}"),
    };
    if g.ptr % VECTOR_BYTES as u64 != 0 {
        return Err(bad(
            "address",
            g.ptr % VECTOR_BYTES as u64 + (g.ptr / VECTOR_BYTES as u64) * VECTOR_BYTES as u64,
        ));
    }
    let ld_bytes = g.ld() as u64 * b as u64;
    if ld_bytes % VECTOR_BYTES as u64 != 0 {
        return Err(bad("leading dimension", ld_bytes));
    }
    let bs = g.batch_stride as u64 * b as u64;
    if g.batch > 1 && bs % VECTOR_BYTES as u64 != 0 {
        return Err(bad("batch stride", bs));
    }
    Ok(())
}

pub(crate) fn range(g: &Geometry) -> Result<(u64, u64), OpsError> {
    let bytes = g.extent()? as u64 * g.dtype.bytes() as u64;
    Ok((g.ptr, g.ptr.saturating_add(bytes)))
}

pub(crate) fn overlaps(x: (u64, u64), y: (u64, u64)) -> bool {
    x.0 < y.1 && y.0 < x.1
}

/// Validate `D = alpha * A @ B + beta * C`. `c` may be `None` (then `beta` must be 0) or
/// the same view as `d` (in-place update).
pub fn validate(
    a: &MatrixRef<'_>,
    b: &MatrixRef<'_>,
    c: Option<&MatrixRef<'_>>,
    d: &MatrixMut<'_>,
    alpha: f32,
    beta: f32,
) -> Result<GemmProblem, OpsError> {
    let (ga, gb, gd) = (a.geo, b.geo, d.geo);
    let gc = c.map(|c| c.geo);
    // Element types.
    let ok_in = matches!(ga.dtype, DType::F16 | DType::BF16) && ga.dtype == gb.dtype;
    let ok_out = gd.dtype == ga.dtype || gd.dtype == DType::F32;
    if !ok_in || !ok_out || gc.is_some_and(|c| c.dtype != gd.dtype) {
        return Err(OpsError::DType(format!(
            "A {} x B {} -> C {} / D {} (supported: f16 or bf16 inputs of one type, D of the input type or f32, C like D)",
            dtype_name(ga.dtype),
            dtype_name(gb.dtype),
            gc.map(|c| dtype_name(c.dtype)).unwrap_or("none"),
            dtype_name(gd.dtype)
        )));
    }
    // Shapes.
    let (m, k, n, l) = (ga.rows, ga.cols, gb.cols, gd.batch);
    if gb.rows != k || gd.rows != m || gd.cols != n {
        return Err(OpsError::Shape(format!(
            "A is {}x{}, B is {}x{}, D is {}x{}",
            ga.rows, ga.cols, gb.rows, gb.cols, gd.rows, gd.cols
        )));
    }
    if let Some(c) = gc {
        if c.rows != m || c.cols != n {
            return Err(OpsError::Shape(format!("C is {}x{} but D is {m}x{n}", c.rows, c.cols)));
        }
    }
    if m == 0 || n == 0 || k == 0 || l == 0 {
        return Err(OpsError::Empty(format!("M={m}, N={n}, K={k}, L={l}")));
    }
    let mut ga = ga;
    let mut gb = gb;
    for (name, g) in [("A", &mut ga), ("B", &mut gb)] {
        if g.batch == 1 && l > 1 {
            g.batch_stride = 0; // one matrix broadcast over the batch
            g.batch = l;
        } else if g.batch != l {
            return Err(OpsError::Shape(format!(
                "{name} has batch {} but D has batch {l}",
                g.batch
            )));
        }
    }
    let mut gc = gc;
    if let Some(c) = gc.as_mut() {
        if c.batch == 1 && l > 1 {
            c.batch_stride = 0;
            c.batch = l;
        } else if c.batch != l {
            return Err(OpsError::Shape(format!("C has batch {} but D has batch {l}", c.batch)));
        }
    }
    if beta != 0.0 && gc.is_none() {
        return Err(OpsError::Shape("beta != 0 needs a C operand".into()));
    }
    check_layout("A", &ga, false)?;
    check_layout("B", &gb, false)?;
    if let Some(c) = &gc {
        check_layout("C", c, false)?;
    }
    check_layout("D", &gd, true)?;
    check_vector_alignment("A", &ga)?;
    check_vector_alignment("B", &gb)?;
    // The SM80 kernels load K in 16-byte vectors: where K is the contiguous dimension of A
    // or B, K itself must be a multiple of 8 elements (there is no element-wise K tail).
    let k_vec = VECTOR_BYTES / ga.dtype.bytes();
    for (name, k_major) in [
        ("A", ga.major() == Some(Major::Row)),
        ("B", gb.major() == Some(Major::Col)),
    ] {
        if k_major && k % k_vec != 0 {
            return Err(OpsError::Alignment {
                operand: name,
                detail: format!("K = {k} must be a multiple of {k_vec} when K is the contiguous dimension"),
            });
        }
    }
    // D must not overlap the inputs; C may be D itself (same geometry) but not overlap it otherwise.
    let rd = range(&gd)?;
    for (name, g) in [("A", &ga), ("B", &gb)] {
        if overlaps(rd, range(g)?) {
            return Err(OpsError::Strides {
                operand: "D",
                detail: format!("overlaps {name}"),
            });
        }
    }
    if let Some(c) = &gc {
        let same = c.ptr == gd.ptr
            && c.row_stride == gd.row_stride
            && c.col_stride == gd.col_stride
            && c.batch_stride == gd.batch_stride;
        if !same && overlaps(rd, range(c)?) {
            return Err(OpsError::Strides {
                operand: "D",
                detail: "partially overlaps C".into(),
            });
        }
    }
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(OpsError::Shape(format!(
            "alpha = {alpha}, beta = {beta} must be finite"
        )));
    }
    Ok(GemmProblem {
        m,
        n,
        k,
        l,
        a: ga,
        b: gb,
        c: gc,
        d: gd,
        alpha,
        beta,
    })
}
