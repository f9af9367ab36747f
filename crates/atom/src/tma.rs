//! TMA descriptor parameters (the arguments of the driver's `cuTensorMapEncodeTiled`),
//! computed from a global-memory layout and a shared-memory box, validated with typed
//! errors. Encoding through the driver happens in `rcute-kernel`; this module produces
//! the validated parameters and, for given runtime values, the concrete argument arrays.

use crate::element::Element;
use rcute_layout::{Env, Int, Layout};

/// Shared-memory swizzle of a TMA box (`CUtensorMapSwizzle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaSwizzle {
    /// No swizzle.
    None,
    /// 32-byte swizzle.
    B32,
    /// 64-byte swizzle.
    B64,
    /// 128-byte swizzle.
    B128,
}

impl TmaSwizzle {
    /// The driver enum value.
    pub fn code(self) -> u32 {
        match self {
            TmaSwizzle::None => 0,
            TmaSwizzle::B32 => 1,
            TmaSwizzle::B64 => 2,
            TmaSwizzle::B128 => 3,
        }
    }
    /// Bytes of the swizzle span (the limit of the inner box extent); `None` for no swizzle.
    pub fn span_bytes(self) -> Option<u64> {
        match self {
            TmaSwizzle::None => None,
            TmaSwizzle::B32 => Some(32),
            TmaSwizzle::B64 => Some(64),
            TmaSwizzle::B128 => Some(128),
        }
    }
}

/// Interleaved layouts (`CUtensorMapInterleave`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaInterleave {
    /// Dense (the usual case).
    None,
    /// 16-byte interleave.
    B16,
    /// 32-byte interleave.
    B32,
}

impl TmaInterleave {
    /// The driver enum value.
    pub fn code(self) -> u32 {
        match self {
            TmaInterleave::None => 0,
            TmaInterleave::B16 => 1,
            TmaInterleave::B32 => 2,
        }
    }
}

/// L2 promotion (`CUtensorMapL2promotion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    /// None.
    None,
    /// 64 bytes.
    B64,
    /// 128 bytes.
    B128,
    /// 256 bytes.
    B256,
}

impl L2Promotion {
    /// The driver enum value.
    pub fn code(self) -> u32 {
        match self {
            L2Promotion::None => 0,
            L2Promotion::B64 => 1,
            L2Promotion::B128 => 2,
            L2Promotion::B256 => 3,
        }
    }
}

/// Out-of-bounds fill (`CUtensorMapFloatOOBfill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OobFill {
    /// Zeros.
    Zero,
    /// NaN, requesting zero FMA results (floating types only).
    NanRequestZeroFma,
}

impl OobFill {
    /// The driver enum value.
    pub fn code(self) -> u32 {
        match self {
            OobFill::Zero => 0,
            OobFill::NanRequestZeroFma => 1,
        }
    }
}

/// The `CUtensorMapDataType` of an element type (8-bit types travel as `UINT8`, as
/// CuTe does).
pub fn tma_data_type(e: Element) -> Option<u32> {
    Some(match e {
        Element::U8 | Element::S8 | Element::E4M3 | Element::E5M2 => 0,
        Element::U16 | Element::S16 => 1,
        Element::U32 => 2,
        Element::S32 => 3,
        Element::U64 => 4,
        Element::S64 => 5,
        Element::F16 => 6,
        Element::F32 => 7,
        Element::F64 => 8,
        Element::BF16 => 9,
        Element::TF32 => 11,
        Element::B128 => return None,
    })
}

/// Why TMA parameters are invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TmaError {
    /// Rank outside 1..=5 (3..=5 with interleave).
    #[error("TMA rank {0} is not supported")]
    Rank(usize),
    /// Arrays of different lengths.
    #[error("{what} has {got} entries, expected {expected}")]
    Length {
        /// Which array.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The rank-derived length.
        expected: usize,
    },
    /// The element type has no TMA data type.
    #[error("element type {0} has no TMA data type")]
    DataType(Element),
    /// The innermost mode of the global layout is not contiguous.
    #[error("innermost global mode must have stride 1, layout is {0}")]
    NotContiguous(String),
    /// A global dimension is out of (0, 2^32].
    #[error("global dimension {dim} = {value} is out of range (0, 2^32]")]
    GlobalDim {
        /// Dimension.
        dim: usize,
        /// Value.
        value: i64,
    },
    /// A global stride is not a multiple of 16 bytes (32 with 32-byte interleave) or
    /// not below 2^40.
    #[error("global stride of dimension {dim} = {bytes} bytes must be a multiple of {align} and < 2^40")]
    Stride {
        /// Dimension (1-based: strides start at the second dimension).
        dim: usize,
        /// Stride in bytes.
        bytes: i64,
        /// Required alignment.
        align: i64,
    },
    /// The first stride is smaller than the innermost extent in bytes.
    #[error("global stride of dimension 1 ({stride} bytes) is smaller than the inner extent ({inner} bytes)")]
    StrideOverlap {
        /// Stride in bytes.
        stride: i64,
        /// Inner extent in bytes.
        inner: i64,
    },
    /// A box dimension is out of 1..=256.
    #[error("box dimension {dim} = {value} is out of 1..=256")]
    BoxDim {
        /// Dimension.
        dim: usize,
        /// Value.
        value: u32,
    },
    /// The inner box extent is not a multiple of 16 bytes.
    #[error("inner box extent {0} bytes is not a multiple of 16")]
    InnerBoxAlignment(u64),
    /// The inner box extent exceeds the swizzle span.
    #[error("inner box extent {bytes} bytes exceeds the {span}-byte swizzle span")]
    SwizzleSpan {
        /// Inner box bytes.
        bytes: u64,
        /// Span.
        span: u64,
    },
    /// An element stride is out of 1..=8.
    #[error("element stride {dim} = {value} is out of 1..=8")]
    ElementStride {
        /// Dimension.
        dim: usize,
        /// Value.
        value: u32,
    },
    /// NaN fill on an integer type.
    #[error("NaN out-of-bounds fill needs a floating-point type, got {0}")]
    OobFill(Element),
    /// A dynamic value could not be evaluated.
    #[error("cannot evaluate {0}")]
    Eval(String),
}

/// The parameters of a tiled TMA descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmaDescriptorSpec {
    /// Element type.
    pub dtype: Element,
    /// Number of dimensions (1..=5).
    pub rank: usize,
    /// Global extents, innermost first (static or runtime values).
    pub global_dims: Vec<Int>,
    /// Byte strides of dimensions `1..rank` (dimension 0 is contiguous).
    pub global_strides_bytes: Vec<Int>,
    /// Box extents in elements, innermost first.
    pub box_dims: Vec<u32>,
    /// Traversal strides in elements (usually all 1).
    pub element_strides: Vec<u32>,
    /// Interleave.
    pub interleave: TmaInterleave,
    /// Shared-memory swizzle.
    pub swizzle: TmaSwizzle,
    /// L2 promotion.
    pub l2_promotion: L2Promotion,
    /// Out-of-bounds fill.
    pub oob_fill: OobFill,
}

/// The concrete arguments of `cuTensorMapEncodeTiled` (the global address is passed
/// separately at encode time).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TmaEncodeArgs {
    /// `CUtensorMapDataType`.
    pub data_type: u32,
    /// `tensorRank`.
    pub rank: u32,
    /// `globalDim`.
    pub global_dim: Vec<u64>,
    /// `globalStrides` (`rank - 1` entries, bytes).
    pub global_strides: Vec<u64>,
    /// `boxDim`.
    pub box_dim: Vec<u32>,
    /// `elementStrides`.
    pub element_strides: Vec<u32>,
    /// `CUtensorMapInterleave`.
    pub interleave: u32,
    /// `CUtensorMapSwizzle`.
    pub swizzle: u32,
    /// `CUtensorMapL2promotion`.
    pub l2_promotion: u32,
    /// `CUtensorMapFloatOOBfill`.
    pub oob_fill: u32,
}

impl TmaDescriptorSpec {
    /// Parameters for a global layout (`(d0, d1, ...)` -> element offset; mode 0 must
    /// have stride 1, nested modes are flattened) and a box (elements per dimension,
    /// innermost first). Defaults: no interleave, L2 promotion 128 B, zero fill, element
    /// strides 1. Static parts are validated here; dynamic ones in
    /// [`TmaDescriptorSpec::to_encode_args`].
    pub fn from_layout(
        dtype: Element,
        global: &Layout,
        box_dims: &[u32],
        swizzle: TmaSwizzle,
    ) -> Result<TmaDescriptorSpec, TmaError> {
        let flat = global.flatten();
        let dims: Vec<Int> = flat.shape().leaves().into_iter().cloned().collect();
        let strides: Vec<Int> = flat.stride().leaves().into_iter().cloned().collect();
        if strides.first().map(|d| d.is_const(1)) != Some(true) {
            return Err(TmaError::NotContiguous(global.to_string()));
        }
        let eb = Int::Static(dtype.bytes() as i64);
        let spec = TmaDescriptorSpec {
            dtype,
            rank: dims.len(),
            global_strides_bytes: strides[1..].iter().map(|d| d.mul(&eb)).collect(),
            global_dims: dims,
            box_dims: box_dims.to_vec(),
            element_strides: vec![1; box_dims.len()],
            interleave: TmaInterleave::None,
            swizzle,
            l2_promotion: L2Promotion::B128,
            oob_fill: OobFill::Zero,
        };
        spec.validate(None)?;
        Ok(spec)
    }

    /// Check the driver's constraints; dynamic values are checked only when `env` is given.
    pub fn validate(&self, env: Option<&Env>) -> Result<(), TmaError> {
        let r = self.rank;
        let min_rank = if self.interleave == TmaInterleave::None { 1 } else { 3 };
        if r < min_rank || r > 5 {
            return Err(TmaError::Rank(r));
        }
        let len = |what, got: usize, expected| {
            if got != expected {
                Err(TmaError::Length { what, got, expected })
            } else {
                Ok(())
            }
        };
        len("global_dims", self.global_dims.len(), r)?;
        len("global_strides_bytes", self.global_strides_bytes.len(), r - 1)?;
        len("box_dims", self.box_dims.len(), r)?;
        len("element_strides", self.element_strides.len(), r)?;
        tma_data_type(self.dtype).ok_or(TmaError::DataType(self.dtype))?;
        let value = |x: &Int| -> Result<Option<i64>, TmaError> {
            match (x.known(), env) {
                (Some(v), _) => Ok(Some(v)),
                (None, Some(e)) => x.eval(e).map(Some).map_err(|err| TmaError::Eval(format!("{x}: {err}"))),
                (None, None) => Ok(None),
            }
        };
        let eb = self.dtype.bytes() as i64;
        for (i, d) in self.global_dims.iter().enumerate() {
            if let Some(v) = value(d)? {
                if v <= 0 || v > (1i64 << 32) {
                    return Err(TmaError::GlobalDim { dim: i, value: v });
                }
            }
        }
        let align = if self.interleave == TmaInterleave::B32 { 32 } else { 16 };
        for (i, st) in self.global_strides_bytes.iter().enumerate() {
            if let Some(v) = value(st)? {
                if v <= 0 || v % align != 0 || v >= (1i64 << 40) {
                    return Err(TmaError::Stride {
                        dim: i + 1,
                        bytes: v,
                        align,
                    });
                }
            }
        }
        if let (Some(st), Some(d0)) = (self.global_strides_bytes.first(), self.global_dims.first()) {
            if let (Some(sv), Some(dv)) = (value(st)?, value(d0)?) {
                if sv < dv * eb {
                    return Err(TmaError::StrideOverlap {
                        stride: sv,
                        inner: dv * eb,
                    });
                }
            }
        }
        for (i, &b) in self.box_dims.iter().enumerate() {
            if b == 0 || b > 256 {
                return Err(TmaError::BoxDim { dim: i, value: b });
            }
        }
        for (i, &e) in self.element_strides.iter().enumerate() {
            if e == 0 || e > 8 {
                return Err(TmaError::ElementStride { dim: i, value: e });
            }
        }
        if self.interleave == TmaInterleave::None {
            let inner = self.box_dims[0] as u64 * eb as u64;
            if !inner.is_multiple_of(16) {
                return Err(TmaError::InnerBoxAlignment(inner));
            }
            if let Some(span) = self.swizzle.span_bytes() {
                if inner > span {
                    return Err(TmaError::SwizzleSpan { bytes: inner, span });
                }
            }
        }
        if self.oob_fill == OobFill::NanRequestZeroFma && !self.dtype.is_float() {
            return Err(TmaError::OobFill(self.dtype));
        }
        Ok(())
    }

    /// Bytes one box transfers (the mbarrier transaction count of a load).
    pub fn box_bytes(&self) -> u64 {
        self.box_dims.iter().map(|&b| b as u64).product::<u64>() * self.dtype.bytes() as u64
    }

    /// Evaluate the runtime values and produce validated driver arguments.
    pub fn to_encode_args(&self, env: &Env) -> Result<TmaEncodeArgs, TmaError> {
        self.validate(Some(env))?;
        let eval = |x: &Int| -> Result<u64, TmaError> {
            x.eval(env)
                .map(|v| v as u64)
                .map_err(|e| TmaError::Eval(format!("{x}: {e}")))
        };
        Ok(TmaEncodeArgs {
            data_type: tma_data_type(self.dtype).ok_or(TmaError::DataType(self.dtype))?,
            rank: self.rank as u32,
            global_dim: self.global_dims.iter().map(eval).collect::<Result<_, _>>()?,
            global_strides: self.global_strides_bytes.iter().map(eval).collect::<Result<_, _>>()?,
            box_dim: self.box_dims.clone(),
            element_strides: self.element_strides.clone(),
            interleave: self.interleave.code(),
            swizzle: self.swizzle.code(),
            l2_promotion: self.l2_promotion.code(),
            oob_fill: self.oob_fill.code(),
        })
    }

    /// C++ expressions of the global dimensions (for host code generation).
    pub fn global_dims_cpp(&self) -> Vec<String> {
        self.global_dims.iter().map(Int::to_cpp).collect()
    }
    /// C++ expressions of the global byte strides.
    pub fn global_strides_cpp(&self) -> Vec<String> {
        self.global_strides_bytes.iter().map(Int::to_cpp).collect()
    }
}
