//! `gemm`: `D = alpha * A @ B + beta * C` for f16/bf16 inputs with f32 accumulation.
//!
//! This module validates the problem (shapes, element types, strides, alignment, bounds,
//! aliasing) into a [`GemmProblem`]; [`crate::select`] picks the kernel configuration, and
//! the kernel layer generates, compiles (cached) and launches it.

use crate::error::OpsError;
use crate::tensor::{DType, Geometry, Major, MatrixMut, MatrixRef};
use std::marker::PhantomData;

/// Bytes every 16-byte vector access needs: pointers, leading dimensions and batch strides
/// of A and B must be multiples of this.
pub const VECTOR_BYTES: usize = 16;

/// A validated GEMM problem.
///
/// Only [`validate`] makes one, and its fields are read-only: a problem always describes
/// views that passed validation, and borrows their buffers (`'a`), so the safe
/// [`crate::Ops::run_gemm`] family can launch it.
///
/// ```compile_fail
/// use rcute_ops::{bf16, validate, CudaStream, GemmProblem, MatrixMut, MatrixRef};
/// // error: the problem would outlive the buffers it describes.
/// fn escape(s: &std::sync::Arc<CudaStream>) -> GemmProblem<'static> {
///     let a = s.alloc_zeros::<bf16>(64).unwrap();
///     let b = s.alloc_zeros::<bf16>(64).unwrap();
///     let mut d = s.alloc_zeros::<bf16>(64).unwrap();
///     let (av, bv) = (MatrixRef::new(&a, 8, 8), MatrixRef::new(&b, 8, 8));
///     validate(&av, &bv, None, &MatrixMut::new(&mut d, 8, 8), 1.0, 0.0).unwrap()
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmProblem<'a> {
    /// Rows of A and D.
    pub(crate) m: usize,
    /// Columns of B and D.
    pub(crate) n: usize,
    /// Columns of A, rows of B.
    pub(crate) k: usize,
    /// Batch count.
    pub(crate) l: usize,
    /// A (M x K); batch stride 0 when broadcast.
    pub(crate) a: Geometry,
    /// B (K x N).
    pub(crate) b: Geometry,
    /// C (M x N), when `beta != 0`.
    pub(crate) c: Option<Geometry>,
    /// D (M x N).
    pub(crate) d: Geometry,
    /// Scale of the product.
    pub(crate) alpha: f32,
    /// Scale of C.
    pub(crate) beta: f32,
    /// The views' borrow: a problem cannot outlive the buffers it was validated on.
    _views: PhantomData<&'a ()>,
}

impl GemmProblem<'_> {
    /// Rows of A and D.
    pub fn m(&self) -> usize {
        self.m
    }
    /// Columns of B and D.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Columns of A, rows of B.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Batch count.
    pub fn l(&self) -> usize {
        self.l
    }
    /// A (batch stride 0 when broadcast).
    pub fn a(&self) -> Geometry {
        self.a
    }
    /// B (batch stride 0 when broadcast).
    pub fn b(&self) -> Geometry {
        self.b
    }
    /// C, if given.
    pub fn c(&self) -> Option<Geometry> {
        self.c
    }
    /// D.
    pub fn d(&self) -> Geometry {
        self.d
    }
    /// Scale of the product.
    pub fn alpha(&self) -> f32 {
        self.alpha
    }
    /// Scale of C.
    pub fn beta(&self) -> f32 {
        self.beta
    }
}

/// The largest M, N or K the kernels take: they index rows, columns and K with 32-bit
/// `int`s and add up to a tile (at most 256) and a thread's offset to a tile origin, so
/// every dimension keeps that much headroom below `i32::MAX`.
pub const MAX_DIM: usize = i32::MAX as usize - 1024;

/// The largest batch count: the SM80-class kernels put the batch (times the K splits) in
/// the grid's z extent, which CUDA limits to 65535.
pub const MAX_BATCH: usize = 65535;

/// Reject dimensions the kernels' 32-bit index arithmetic or grid cannot hold.
pub(crate) fn check_dims(m: usize, n: usize, k: usize, l: usize) -> Result<(), OpsError> {
    if m > MAX_DIM || n > MAX_DIM || k > MAX_DIM {
        return Err(OpsError::TooLarge {
            what: "matrix dimension (kernels index M, N and K with 32-bit ints: at most 2^31 - 1025)",
        });
    }
    if l > MAX_BATCH {
        return Err(OpsError::TooLarge {
            what: "batch count (at most 65535: the grid's z extent)",
        });
    }
    Ok(())
}

/// Reject NaN or infinite `alpha` / `beta`.
pub(crate) fn check_scalars(alpha: f32, beta: f32) -> Result<(), OpsError> {
    for (what, value) in [("alpha", alpha), ("beta", beta)] {
        if !value.is_finite() {
            return Err(OpsError::NonFinite { what, value });
        }
    }
    Ok(())
}

/// The architecture rule of `gemm`: sm_80 or newer ([`OpsError::Arch`] otherwise). Pure,
/// on a compute capability, so it is testable without that GPU.
///
/// ```
/// assert!(rcute_ops::gemm::check_gemm_arch((9, 0)).is_ok());
/// assert!(matches!(rcute_ops::gemm::check_gemm_arch((7, 5)), Err(rcute_ops::OpsError::Arch(_))));
/// ```
pub fn check_gemm_arch(cc: (u32, u32)) -> Result<(), OpsError> {
    if cc.0 < 8 {
        return Err(OpsError::Arch(format!(
            "gemm needs sm_80 or newer, found compute capability {}.{}",
            cc.0, cc.1
        )));
    }
    Ok(())
}

/// Whether a 16-bit view suits the SM90 kernel's TMA: a 16-byte pointer and leading
/// dimension, and with several batches a positive 16-byte batch stride (TMA cannot step
/// by 0, so an operand broadcast over the batch takes the SM80-class path).
/// TMA descriptors also hold strides below 2^40 bytes.
pub(crate) fn tma_ok(g: &Geometry, l: usize) -> bool {
    let below_2_40 = |elems: i64| (elems.unsigned_abs() as u128 * g.dtype.bytes() as u128) < (1u128 << 40);
    g.ptr.is_multiple_of(16)
        && g.ld() % 8 == 0
        && below_2_40(g.ld())
        && (l == 1 || (g.batch_stride > 0 && g.batch_stride % 8 == 0 && below_2_40(g.batch_stride)))
}

/// Whether `gemm` may run a validated problem on the SM90 kernel on a GPU of compute
/// capability `cc` ([`sm90_requirements`] holds). Everything else runs the SM80-class
/// kernel, which takes every validated problem.
pub fn sm90_qualifies(cc: (u32, u32), p: &GemmProblem<'_>) -> bool {
    sm90_requirements(cc, p).is_ok()
}

/// The SM90 kernel's rules, as a typed error saying which one a problem breaks: sm_90
/// ([`OpsError::Arch`]); K-major A and B, row-major D and C ([`OpsError::Strides`]); one
/// 16-bit type for A, B, C and D ([`OpsError::DType`]); N and K multiples of 8 and every
/// view TMA-ready: 16-byte pointer and leading dimension, strides below 2^40 bytes and,
/// with several batches, a positive 16-byte batch stride, so no operand broadcast over
/// the batch ([`OpsError::Alignment`]).
pub fn sm90_requirements(cc: (u32, u32), p: &GemmProblem<'_>) -> Result<(), OpsError> {
    if cc != (9, 0) {
        return Err(OpsError::Arch(format!(
            "the SM90 GEMM needs sm_90, found compute capability {}.{}",
            cc.0, cc.1
        )));
    }
    let order = [
        ("A", Some(p.a), Major::Row),
        ("B", Some(p.b), Major::Col),
        ("C", p.c, Major::Row),
        ("D", Some(p.d), Major::Row),
    ];
    for (operand, g, want) in order {
        if g.is_some_and(|g| g.major() != Some(want)) {
            return Err(OpsError::Strides {
                operand,
                detail: "the SM90 kernel takes K-major A and B and row-major C and D".into(),
            });
        }
    }
    let t = p.a.dtype;
    let same = p.b.dtype == t && p.d.dtype == t && p.c.is_none_or(|c| c.dtype == t);
    if !matches!(t, DType::BF16 | DType::F16) || !same {
        return Err(OpsError::DType(
            "the SM90 kernel takes one 16-bit type (f16 or bf16) for A, B, C and D".into(),
        ));
    }
    if !p.k.is_multiple_of(8) || !p.n.is_multiple_of(8) {
        return Err(OpsError::Alignment {
            operand: "B",
            detail: format!("the SM90 kernel needs N = {} and K = {} multiples of 8", p.n, p.k),
        });
    }
    for (operand, g, _) in order {
        if g.is_some_and(|g| !tma_ok(&g, p.l)) {
            return Err(OpsError::Alignment {
                operand,
                detail: "the SM90 kernel's TMA needs a 16-byte pointer and leading dimension, strides \
                         below 2^40 bytes and a positive 16-byte batch stride (no operand broadcast over \
                         the batch)"
                    .into(),
            });
        }
    }
    Ok(())
}

pub(crate) fn check_layout(op: &'static str, g: &Geometry, output: bool) -> Result<(), OpsError> {
    if g.row_stride < 0 || g.col_stride < 0 {
        return Err(OpsError::Strides {
            operand: op,
            detail: format!(
                "negative stride (row stride {}, column stride {})",
                g.row_stride, g.col_stride
            ),
        });
    }
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
    if outer > 1 && i128::from(ld) < inner as i128 {
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
        if (g.batch_stride as u64) < one as u64 {
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
    Ok(())
}

pub(crate) fn check_vector_alignment(op: &'static str, g: &Geometry) -> Result<(), OpsError> {
    let b = g.dtype.bytes();
    let bad = |what: &str, v: u128| OpsError::Alignment {
        operand: op,
        detail: format!("{what} = {v} bytes is not a multiple of {VECTOR_BYTES}"),
    };
    if !g.ptr.is_multiple_of(VECTOR_BYTES as u64) {
        return Err(OpsError::Alignment {
            operand: op,
            detail: format!("address {:#x} is not a multiple of {VECTOR_BYTES} bytes", g.ptr),
        });
    }
    // Strides are non-negative `i64`s (checked by `check_layout`): in u128 the byte
    // products cannot wrap.
    let bytes = |elems: i64| elems.unsigned_abs() as u128 * b as u128;
    let ld_bytes = bytes(g.ld());
    if ld_bytes % VECTOR_BYTES as u128 != 0 {
        return Err(bad("leading dimension", ld_bytes));
    }
    let bs = bytes(g.batch_stride);
    if g.batch > 1 && bs % VECTOR_BYTES as u128 != 0 {
        return Err(bad("batch stride", bs));
    }
    Ok(())
}

/// Reject a pointer that is not aligned to its element type.
pub(crate) fn check_element_alignment(op: &'static str, g: &Geometry) -> Result<(), OpsError> {
    if !g.ptr.is_multiple_of(g.dtype.bytes() as u64) {
        return Err(OpsError::Alignment {
            operand: op,
            detail: format!(
                "address {:#x} is not a multiple of the {}-byte element",
                g.ptr,
                g.dtype.bytes()
            ),
        });
    }
    Ok(())
}

/// The widest global -> shared copy (16, 8, 4 or 2 bytes) the SM80-class kernel may use
/// for a validated problem: the largest power of two up to 16 bytes that divides A's and
/// B's pointers, leading dimensions and (with several batches) batch strides, and K where K
/// is contiguous in A or B; below 16 bytes also M (N) where M (N) is contiguous in A (B),
/// so that no narrow vector reaches past its matrix. The fast path's 16-byte vectors of an
/// M (N)-contiguous operand read each row up to the next 16 bytes, so it also needs the
/// buffer to hold the last row's padding; otherwise the copy is narrowed as for M (N). 16
/// selects the fast path; anything narrower, the narrow-vector kernel
/// ([`rcute_kernel::gemm_sm80::GemmSm80Config::narrow`]).
///
/// ```
/// use rcute_ops::{gemm::copy_bytes, validate, DType, Geometry, MatrixMut, MatrixRef};
/// // SAFETY: nothing is launched; validation reads only the geometry.
/// let view = |ptr, r, c, dt| unsafe { MatrixRef::from_raw(Geometry::dense(ptr, r * c, dt, r, c)) };
/// let (a, b) = (view(0x10000, 64, 32, DType::BF16), view(0x20000, 32, 16, DType::BF16));
/// let mut d = unsafe { MatrixMut::from_raw(Geometry::dense(0x30000, 64 * 16, DType::BF16, 64, 16)) };
/// assert_eq!(copy_bytes(&validate(&a, &b, None, &d, 1.0, 0.0).unwrap()), 16);
/// // 3x5 @ 5x7: K = 5 elements = 10 bytes per row of A, N = 7 per row of B.
/// let (a, b) = (view(0x10000, 3, 5, DType::BF16), view(0x20000, 5, 7, DType::BF16));
/// let d = unsafe { MatrixMut::from_raw(Geometry::dense(0x30000, 21, DType::BF16, 3, 7)) };
/// assert_eq!(copy_bytes(&validate(&a, &b, None, &d, 1.0, 0.0).unwrap()), 2);
/// // B row-major (N contiguous), N = 130 with rows 136 elements apart: the fast path's last
/// // vector reads 6 elements past N, which a buffer ending right after N does not hold.
/// let b_rows = |len| unsafe { MatrixRef::from_raw(Geometry::dense(0x20000, len, DType::BF16, 64, 130)) }.strides(136, 1);
/// let a = view(0x10000, 64, 64, DType::BF16);
/// let d = unsafe { MatrixMut::from_raw(Geometry::dense(0x40000, 64 * 130, DType::BF16, 64, 130)) };
/// assert_eq!(copy_bytes(&validate(&a, &b_rows(64 * 136), None, &d, 1.0, 0.0).unwrap()), 16);
/// assert!(copy_bytes(&validate(&a, &b_rows(63 * 136 + 130), None, &d, 1.0, 0.0).unwrap()) < 16);
/// ```
pub fn copy_bytes(p: &GemmProblem<'_>) -> usize {
    let e = p.a.dtype.bytes() as u64;
    let (mut need, mut mn_extents): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let mut padding_inside = true;
    for (g, k_major, mn) in [
        (&p.a, p.a.major() == Some(Major::Row), p.m),
        (&p.b, p.b.major() == Some(Major::Col), p.n),
    ] {
        need.push(g.ptr);
        need.push(g.kernel_ld().unsigned_abs() * e);
        if p.l > 1 {
            need.push(g.batch_stride.unsigned_abs() * e);
        }
        if k_major {
            need.push(p.k as u64 * e);
        } else {
            mn_extents.push(mn as u64 * e);
            padding_inside &= padded_rows_inside(g, p.k, mn, p.l, 16 / e);
        }
    }
    if !padding_inside {
        // The fast path would read past the buffer's end: copy no wider than M (N) allows.
        need.extend(mn_extents.iter().copied());
    }
    let widest = |vals: &[u64]| {
        [16u64, 8, 4, 2]
            .into_iter()
            .find(|&w| vals.iter().all(|v| v % w == 0))
            .unwrap_or(2)
    };
    match widest(&need) {
        // The fast path, as it always ran (an MN-contiguous vector past M or N reads the
        // row's padding up to the 16-byte leading dimension).
        16 => 16,
        // Narrow copies also keep MN-contiguous vectors inside M (N).
        _ => {
            need.extend(mn_extents);
            widest(&need) as usize
        }
    }
}

/// Whether the 16-byte vectors of an MN-contiguous operand (`k` rows of `mn` contiguous
/// elements, `l` batches), which read each row up to the next multiple of `vec` elements,
/// stay inside the view's buffer: only the last row of the last batch can reach past it,
/// when the buffer ends right after its `mn` elements.
fn padded_rows_inside(g: &Geometry, k: usize, mn: usize, l: usize, vec: u64) -> bool {
    let last_row = (l.max(1) as u64 - 1)
        .saturating_mul(g.batch_stride.unsigned_abs())
        .saturating_add((k.max(1) as u64 - 1).saturating_mul(g.kernel_ld().unsigned_abs()));
    last_row.saturating_add((mn as u64).div_ceil(vec) * vec) <= g.len as u64
}

pub(crate) fn range(g: &Geometry) -> Result<(u64, u64), OpsError> {
    let bytes = (g.extent()? as u64)
        .checked_mul(g.dtype.bytes() as u64)
        .ok_or(OpsError::TooLarge {
            what: "matrix extent in bytes",
        })?;
    Ok((g.ptr, g.ptr.saturating_add(bytes)))
}

pub(crate) fn overlaps(x: (u64, u64), y: (u64, u64)) -> bool {
    x.0 < y.1 && y.0 < x.1
}

/// Validate `D = alpha * A @ B + beta * C`. `c` may be `None` (then `beta` must be 0) or
/// the same view as `d` (in-place update). Pure: it reads only the views' geometry, so it
/// runs without a GPU.
///
/// Rejects, each with a typed [`OpsError`] and before anything is launched:
/// * NaN or infinite `alpha` / `beta` ([`OpsError::NonFinite`]);
/// * element types other than f16 or bf16 A and B of one type, D of that type or f32, C
///   like D ([`OpsError::DType`]);
/// * shapes that do not chain (`A` M x K, `B` K x N, C and D M x N), batches that are
///   neither 1 (broadcast) nor D's, `beta != 0` without C ([`OpsError::Shape`]);
/// * M, N, K or L = 0 ([`OpsError::Empty`]);
/// * M, N or K above [`MAX_DIM`], L above [`MAX_BATCH`], a view whose extent overflows
///   ([`OpsError::TooLarge`]);
/// * negative strides, no contiguous dimension, a leading dimension smaller than a row
///   or column, output batches that overlap, D overlapping A or B or partly overlapping
///   C, C not in D's storage order ([`OpsError::Strides`]);
/// * a view that reaches past its buffer ([`OpsError::OutOfBounds`]);
/// * A or B pointers that are not aligned to their element ([`OpsError::Alignment`]).
///
/// Every M, N, K, leading dimension and batch stride is accepted: operands whose
/// pointers, leading dimensions, batch strides or contiguous extents are not multiples of
/// 16 bytes run the SM80-class kernel with narrower copies ([`copy_bytes`]: 8 or 4 bytes
/// with `cp.async`, 2 with 16-bit loads), which is slower than the 16-byte path.
///
/// [`crate::Ops::gemm`] adds the checks that need the GPU: the operands' device
/// ([`OpsError::Device`]), the architecture (sm_80 or newer, [`OpsError::Arch`]) and the
/// grid of the selected kernel ([`OpsError::TooLarge`]).
///
/// ```
/// use rcute_ops::{validate, DType, Geometry, MatrixMut, MatrixRef, OpsError};
/// // SAFETY: nothing is launched; validation reads only the geometry.
/// let (a, b, mut d) = unsafe {
///     (
///         MatrixRef::from_raw(Geometry::dense(0x10000, 64 * 32, DType::BF16, 64, 32)),
///         MatrixRef::from_raw(Geometry::dense(0x20000, 32 * 16, DType::BF16, 32, 16)),
///         MatrixMut::from_raw(Geometry::dense(0x30000, 64 * 16, DType::F32, 64, 16)),
///     )
/// };
/// assert_eq!(validate(&a, &b, None, &d, 1.0, 0.0).unwrap().k(), 32);
/// let nan = validate(&a, &b, None, &d, f32::NAN, 0.0);
/// assert!(matches!(nan, Err(OpsError::NonFinite { what: "alpha", .. })));
/// ```
pub fn validate<'a, 'd: 'a>(
    a: &MatrixRef<'a>,
    b: &MatrixRef<'a>,
    c: Option<&MatrixRef<'a>>,
    d: &MatrixMut<'d>,
    alpha: f32,
    beta: f32,
) -> Result<GemmProblem<'a>, OpsError> {
    check_scalars(alpha, beta)?;
    let (ga, gb, gd) = (a.geo(), b.geo(), d.geo());
    let gc = c.map(|c| c.geo());
    // Element types.
    let ok_in = matches!(ga.dtype, DType::F16 | DType::BF16) && ga.dtype == gb.dtype;
    let ok_out = gd.dtype == ga.dtype || gd.dtype == DType::F32;
    if !ok_in || !ok_out || gc.is_some_and(|c| c.dtype != gd.dtype) {
        return Err(OpsError::DType(format!(
            "A {} x B {} -> C {} / D {} (supported: f16 or bf16 inputs of one type, D of the input type or f32, C like D)",
            ga.dtype.name(),
            gb.dtype.name(),
            gc.map(|c| c.dtype.name()).unwrap_or("none"),
            gd.dtype.name()
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
    check_dims(m, n, k, l)?;
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
    if let Some(c) = &gc {
        if c.major() != gd.major() && m > 1 && n > 1 {
            return Err(OpsError::Strides {
                operand: "C",
                detail: "C must have the storage order of D".into(),
            });
        }
    }
    // Any leading dimension, batch stride and K works: the SM80-class kernel copies
    // narrower vectors where 16-byte ones do not fit (`copy_bytes`); only a pointer that
    // is not aligned to its element cannot be read as elements.
    check_element_alignment("A", &ga)?;
    check_element_alignment("B", &gb)?;
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
        _views: PhantomData,
    })
}
