//! Matrix views over device buffers: what applications hand to the ops.
//!
//! A view is a pointer into a `cudarc` buffer (or any device allocation the application
//! owns), an element type, a shape `(rows, cols, batch)` and strides in elements. Views
//! borrow their buffer, so the buffer outlives the op call.

use crate::error::OpsError;
use crate::stream::{address, TrackRead, TrackWrite};
use cudarc::driver::CudaSlice;

/// Element types the ops accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single.
    F32,
    /// Signed 8-bit integer.
    S8,
    /// Signed 32-bit integer.
    S32,
    /// FP8 e4m3 (`__nv_fp8_e4m3`), held in [`E4M3`] buffers.
    E4M3,
}

impl DType {
    /// The type's name in messages (`"bf16"`, `"e4m3"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::S8 => "s8",
            DType::S32 => "s32",
            DType::E4M3 => "e4m3",
        }
    }
    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::S32 => 4,
            DType::S8 | DType::E4M3 => 1,
        }
    }
}

/// Host element types that map to a [`DType`].
pub trait Element: cudarc::driver::DeviceRepr {
    /// The element type.
    const DTYPE: DType;
}
impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
}
impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i8 {
    const DTYPE: DType = DType::S8;
}
impl Element for i32 {
    const DTYPE: DType = DType::S32;
}

/// One FP8 e4m3 value as its raw byte (sign, 4 exponent bits with bias 7, 3 mantissa
/// bits; `0x7F` / `0xFF` are NaN): the element type of FP8 device buffers
/// (`CudaSlice<E4M3>`) for [`crate::Ops::scaled_mm`].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct E4M3(pub u8);

// SAFETY: a transparent wrapper of `u8`, valid for any bit pattern.
unsafe impl cudarc::driver::DeviceRepr for E4M3 {}
// SAFETY: zero is a valid e4m3 value (+0).
unsafe impl cudarc::driver::ValidAsZeroBits for E4M3 {}

impl Element for E4M3 {
    const DTYPE: DType = DType::E4M3;
}

/// Which dimension of a matrix is contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// Rows are contiguous (`col_stride == 1`).
    Row,
    /// Columns are contiguous (`row_stride == 1`).
    Col,
}

/// The geometry shared by read-only and writable views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Device address of element (0, 0, 0).
    pub ptr: u64,
    /// Elements available from `ptr` to the end of the buffer.
    pub len: usize,
    /// Element type.
    pub dtype: DType,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Batch count (1 for a plain matrix).
    pub batch: usize,
    /// Elements between consecutive rows.
    pub row_stride: i64,
    /// Elements between consecutive columns.
    pub col_stride: i64,
    /// Elements between consecutive batch entries (0 broadcasts one matrix).
    pub batch_stride: i64,
    /// Ordinal of the device holding the buffer (`None`: unknown, for raw views).
    pub device: Option<usize>,
}

impl Geometry {
    /// A dense row-major `rows x cols` matrix. Sizes whose strides do not fit `i64`
    /// saturate to `i64::MAX`, so that validation reports them as
    /// [`OpsError::TooLarge`] instead of wrapping.
    fn row_major(ptr: u64, len: usize, dtype: DType, rows: usize, cols: usize, device: usize) -> Geometry {
        let to_i64 = |v: Option<usize>| v.and_then(|v| i64::try_from(v).ok()).unwrap_or(i64::MAX);
        Geometry {
            ptr,
            len,
            dtype,
            rows,
            cols,
            batch: 1,
            row_stride: to_i64(Some(cols)),
            col_stride: 1,
            batch_stride: to_i64(rows.checked_mul(cols)),
            device: Some(device),
        }
    }
    /// The contiguous dimension, if one has unit stride.
    pub fn major(&self) -> Option<Major> {
        if self.col_stride == 1 {
            Some(Major::Row)
        } else if self.row_stride == 1 {
            Some(Major::Col)
        } else {
            None
        }
    }
    /// The leading dimension: the stride of the non-contiguous dimension.
    pub fn ld(&self) -> i64 {
        match self.major() {
            Some(Major::Col) => self.col_stride,
            _ => self.row_stride,
        }
    }
    /// The leading dimension a kernel is given: [`Geometry::ld`], raised to the contiguous
    /// extent when there is a single row (column) of it, whose stride nothing reads (a
    /// `1 x N` row-major view may have any row stride; kernels expect `ld >= N`).
    pub(crate) fn kernel_ld(&self) -> i64 {
        let (outer, inner) = match self.major() {
            Some(Major::Col) => (self.cols, self.rows),
            _ => (self.rows, self.cols),
        };
        if outer <= 1 {
            self.ld().max(i64::try_from(inner).unwrap_or(i64::MAX))
        } else {
            self.ld()
        }
    }
    /// One past the largest element offset the view touches, or
    /// [`OpsError::TooLarge`] when that does not fit `usize` (checked arithmetic: no
    /// product or sum wraps).
    ///
    /// ```
    /// # use rcute_ops::{DType, Geometry, OpsError};
    /// let g = Geometry::dense(0x1000, usize::MAX, DType::BF16, usize::MAX / 2, 64);
    /// assert!(matches!(g.extent(), Err(OpsError::TooLarge { .. })));
    /// assert_eq!(Geometry::dense(0x1000, 64, DType::BF16, 4, 16).extent().unwrap(), 64);
    /// ```
    pub fn extent(&self) -> Result<usize, OpsError> {
        let too_large = || OpsError::TooLarge { what: "matrix extent" };
        let span = |n: usize, s: i64| -> Option<i128> { (n.max(1) as i128 - 1).checked_mul(s as i128) };
        let last = span(self.rows, self.row_stride)
            .zip(span(self.cols, self.col_stride))
            .zip(span(self.batch, self.batch_stride))
            .and_then(|((a, b), c)| a.checked_add(b)?.checked_add(c)?.checked_add(1))
            .ok_or_else(too_large)?;
        usize::try_from(last).map_err(|_| too_large())
    }
    /// A dense row-major `rows x cols` matrix of `dtype` at `ptr` in a buffer of `len`
    /// elements from `ptr` on, device unknown: the geometry to hand to the `unsafe`
    /// `from_raw` constructors (or to validation tests, which need no GPU).
    pub fn dense(ptr: u64, len: usize, dtype: DType, rows: usize, cols: usize) -> Geometry {
        Geometry {
            device: None,
            ..Geometry::row_major(ptr, len, dtype, rows, cols, 0)
        }
    }
    /// Set column-major strides (`row_stride = 1`, `col_stride = rows`).
    pub fn to_col_major(mut self) -> Geometry {
        self.row_stride = 1;
        // Saturating, as in `row_major`: validation reports the size as too large.
        self.col_stride = i64::try_from(self.rows).unwrap_or(i64::MAX);
        self
    }
}

/// A read-only matrix view.
///
/// Its [`Geometry`] is private: the safe constructor takes the pointer and length from a
/// borrowed `CudaSlice`, and the builders change only the shape and strides (validation
/// checks that they stay inside the buffer); only the `unsafe` [`MatrixRef::from_raw`]
/// describes memory the view does not borrow.
///
/// ```
/// # use rcute_ops::{DType, Geometry, MatrixRef};
/// // SAFETY: validation only; nothing is launched with this view.
/// let a = unsafe { MatrixRef::from_raw(Geometry::dense(0x1000, 64 * 32, DType::BF16, 64, 32)) };
/// let t = a.col_major();
/// assert_eq!((t.geo().row_stride, t.geo().col_stride, t.geo().len), (1, 64, 64 * 32));
/// ```
///
/// Safe code cannot enlarge a view or move its pointer:
///
/// ```compile_fail
/// # use rcute_ops::{DType, Geometry, MatrixRef};
/// // SAFETY: the geometry is never used to launch.
/// let mut a = unsafe { MatrixRef::from_raw(Geometry::dense(0x1000, 64, DType::BF16, 8, 8)) };
/// a.geo.len = usize::MAX; // error: the field is private
/// ```
///
/// A view made from a `CudaSlice` keeps a reference to it, so that the op that reads the
/// view holds `cudarc`'s read guard of the buffer for its whole launch (see
/// [`crate::stream`]).
#[derive(Clone, Copy)]
pub struct MatrixRef<'a> {
    geo: Geometry,
    buf: Option<&'a dyn TrackRead>,
}

/// A writable matrix view (its [`Geometry`] is private, as [`MatrixRef`]'s). Made from a
/// `CudaSlice`, it holds the buffer's unique borrow, and the op that writes it holds
/// `cudarc`'s write guard for its whole launch.
pub struct MatrixMut<'a> {
    geo: Geometry,
    buf: Option<&'a mut dyn TrackWrite>,
}

/// `Debug` for the views: the geometry and whether `cudarc` tracks the buffer.
macro_rules! view_debug {
    ($($view:ident),*) => {$(
        impl std::fmt::Debug for $view<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($view))
                    .field("geo", &self.geo)
                    .field("tracked", &self.buf.is_some())
                    .finish()
            }
        }
    )*};
}
view_debug!(MatrixRef, MatrixMut, VectorRef);

/// The builders of both matrix views ([`MatrixRef`], [`MatrixMut`]): they change the
/// strides or the batch of the view's geometry, never its pointer or length.
macro_rules! matrix_builders {
    () => {
        /// Column-major strides.
        pub fn col_major(mut self) -> Self {
            self.geo = self.geo.to_col_major();
            self
        }
        /// Explicit strides (in elements).
        pub fn strides(mut self, row_stride: i64, col_stride: i64) -> Self {
            self.geo.row_stride = row_stride;
            self.geo.col_stride = col_stride;
            self
        }
        /// A batch of `batch` matrices `batch_stride` elements apart.
        pub fn batched(mut self, batch: usize, batch_stride: i64) -> Self {
            self.geo.batch = batch;
            self.geo.batch_stride = batch_stride;
            self
        }
    };
}

impl<'a> MatrixRef<'a> {
    /// A row-major `rows x cols` view of `buf` (strides can be changed with the builders).
    ///
    /// Infallible, so that the common path stays one line: sizes are checked when an op
    /// validates the view, where a view larger than its buffer is
    /// [`OpsError::OutOfBounds`] and one whose extent overflows (say `usize::MAX / 2` rows
    /// of 64) is [`OpsError::TooLarge`], never a wrapped stride.
    pub fn new<T: Element>(buf: &'a CudaSlice<T>, rows: usize, cols: usize) -> Self {
        let device = buf.stream().context().ordinal();
        MatrixRef {
            geo: Geometry::row_major(address(buf), buf.len(), T::DTYPE, rows, cols, device),
            buf: Some(buf),
        }
    }
    /// A view from raw parts, for buffers the application manages itself.
    ///
    /// # Safety
    /// `ptr` must address at least `len` elements of `dtype` that stay valid for `'a`.
    pub unsafe fn from_raw(geo: Geometry) -> Self {
        MatrixRef { geo, buf: None }
    }
    /// The view's geometry (a copy: changing it does not change the view).
    pub fn geo(&self) -> Geometry {
        self.geo
    }
    /// The buffer whose uses `cudarc` tracks (`None` for raw views).
    pub(crate) fn tracked(&self) -> Option<&'a dyn TrackRead> {
        self.buf
    }
    matrix_builders!();
}

impl<'a> MatrixMut<'a> {
    /// A row-major `rows x cols` writable view of `buf`.
    pub fn new<T: Element>(buf: &'a mut CudaSlice<T>, rows: usize, cols: usize) -> Self {
        let device = buf.stream().context().ordinal();
        let geo = Geometry::row_major(address(buf), buf.len(), T::DTYPE, rows, cols, device);
        MatrixMut { geo, buf: Some(buf) }
    }
    /// A writable view from raw parts.
    ///
    /// # Safety
    /// `ptr` must address at least `len` writable elements of `dtype` valid for `'a`,
    /// not aliased by any other view passed to the same op.
    pub unsafe fn from_raw(geo: Geometry) -> Self {
        MatrixMut { geo, buf: None }
    }
    /// The view's geometry (a copy: changing it does not change the view).
    pub fn geo(&self) -> Geometry {
        self.geo
    }
    /// The buffer whose uses `cudarc` tracks (`None` for raw views).
    pub(crate) fn tracked_mut(&mut self) -> Option<&mut (dyn TrackWrite + 'a)> {
        self.buf.as_deref_mut()
    }
    matrix_builders!();
}

/// A read-only, contiguous vector view (scales, biases): `len` elements of a device buffer,
/// stored as a one-row [`Geometry`] (`rows = 1`, `cols = len`, unit column stride).
#[derive(Clone, Copy)]
pub struct VectorRef<'a> {
    geo: Geometry,
    buf: Option<&'a dyn TrackRead>,
}

impl<'a> VectorRef<'a> {
    /// The first `len` elements of `buf`.
    pub fn new<T: Element>(buf: &'a CudaSlice<T>, len: usize) -> Self {
        let device = buf.stream().context().ordinal();
        VectorRef {
            geo: Geometry::row_major(address(buf), buf.len(), T::DTYPE, 1, len, device),
            buf: Some(buf),
        }
    }
    /// A vector view from raw parts: `len` elements of `dtype` at `ptr` in a buffer of
    /// `buf_len` elements from `ptr` on (`device`: the ordinal, if known).
    ///
    /// # Safety
    /// `ptr` must address at least `buf_len` elements of `dtype` that stay valid for `'a`.
    pub unsafe fn from_raw(ptr: u64, buf_len: usize, dtype: DType, len: usize, device: Option<usize>) -> Self {
        let mut geo = Geometry::row_major(ptr, buf_len, dtype, 1, len, 0);
        geo.device = device;
        VectorRef { geo, buf: None }
    }
    /// The view's geometry (a copy: changing it does not change the view).
    pub fn geo(&self) -> Geometry {
        self.geo
    }
    /// The buffer whose uses `cudarc` tracks (`None` for raw views).
    pub(crate) fn tracked(&self) -> Option<&'a dyn TrackRead> {
        self.buf
    }
    /// Number of elements of the view (`geo().len` is the buffer's length from `ptr` on).
    #[allow(clippy::misnamed_getters)]
    pub fn len(&self) -> usize {
        self.geo.cols
    }
    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.geo.cols == 0
    }
}
