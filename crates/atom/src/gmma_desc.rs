//! `wgmma` shared-memory matrix descriptors (CuTe's `GmmaDescriptor`,
//! `cute/arch/mma_sm90_desc.hpp`) and CuTe's `make_gmma_desc` on canonical layouts.
//!
//! Bit fields of the 64-bit descriptor:
//!
//! | bits | field |
//! |---|---|
//! | `[0,14)` | start address >> 4 |
//! | `[16,30)` | leading dimension byte offset >> 4 |
//! | `[32,46)` | stride dimension byte offset >> 4 |
//! | `[49,52)` | base offset (128B / 64B swizzles with a misaligned start) |
//! | `[62,64)` | layout type: 0 none, 1 128B, 2 64B, 3 32B swizzle |

use crate::element::Element;
use crate::mma::Major;
use crate::mma_sm90::GmmaSwizzle;
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, Int, Layout};

/// Why a descriptor cannot be encoded or derived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescError {
    /// A byte offset or address is not a multiple of 16.
    #[error("{field} = {value} is not 16-byte aligned")]
    Misaligned {
        /// The field.
        field: &'static str,
        /// Its value in bytes.
        value: u64,
    },
    /// A field does not fit its 14 (or 3) bits.
    #[error("{field} = {value} does not fit the descriptor field")]
    Overflow {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// The layout is not a canonical GMMA layout for the major mode and swizzle.
    #[error("not a canonical GMMA layout: {0}")]
    NotCanonical(String),
}

/// A decoded GMMA descriptor; byte quantities are in bytes (the encoder drops the four
/// low bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GmmaDescriptor {
    /// Shared-memory byte address of the first element (`< 2^18`).
    pub start_address: u32,
    /// Leading dimension byte offset.
    pub leading_byte_offset: u32,
    /// Stride dimension byte offset.
    pub stride_byte_offset: u32,
    /// Base offset (3 bits).
    pub base_offset: u8,
    /// Swizzle mode.
    pub swizzle: GmmaSwizzle,
}

fn field(name: &'static str, bytes: u32) -> Result<u64, DescError> {
    if !bytes.is_multiple_of(16) {
        return Err(DescError::Misaligned {
            field: name,
            value: bytes as u64,
        });
    }
    let v = (bytes >> 4) as u64;
    if v >= (1 << 14) {
        return Err(DescError::Overflow {
            field: name,
            value: bytes as u64,
        });
    }
    Ok(v)
}

impl GmmaDescriptor {
    /// Encode into the 64-bit descriptor.
    pub fn encode(&self) -> Result<u64, DescError> {
        let start = field("start_address", self.start_address)?;
        let lbo = field("leading_byte_offset", self.leading_byte_offset)?;
        let sbo = field("stride_byte_offset", self.stride_byte_offset)?;
        if self.base_offset >= 8 {
            return Err(DescError::Overflow {
                field: "base_offset",
                value: self.base_offset as u64,
            });
        }
        Ok(start
            | (lbo << 16)
            | (sbo << 32)
            | ((self.base_offset as u64) << 49)
            | ((self.swizzle.layout_type() as u64) << 62))
    }
    /// Decode a 64-bit descriptor.
    pub fn decode(d: u64) -> GmmaDescriptor {
        let m14 = (1u64 << 14) - 1;
        GmmaDescriptor {
            start_address: ((d & m14) << 4) as u32,
            leading_byte_offset: (((d >> 16) & m14) << 4) as u32,
            stride_byte_offset: (((d >> 32) & m14) << 4) as u32,
            base_offset: ((d >> 49) & 7) as u8,
            swizzle: GmmaSwizzle::from_layout_type(((d >> 62) & 3) as u8).unwrap_or(GmmaSwizzle::Interleave),
        }
    }
    /// The two 32-bit words `[low, high]` of the descriptor with its start address taken
    /// as 0 (CuTe's `reg32_[0]` and `reg32_[1]`): the low word holds the start address
    /// (bits `[0,14)`) and the leading byte offset, the high word the stride byte offset,
    /// the base offset and the swizzle.
    ///
    /// ```
    /// use rcute_atom::{GmmaDescriptor, GmmaSwizzle};
    /// let d = GmmaDescriptor { start_address: 4096, leading_byte_offset: 16, stride_byte_offset: 1024,
    ///     base_offset: 0, swizzle: GmmaSwizzle::B128 };
    /// assert_eq!(d.words_without_start().unwrap(), [0x0001_0000, 0x4000_0040]);
    /// ```
    pub fn words_without_start(&self) -> Result<[u32; 2], DescError> {
        let d = GmmaDescriptor {
            start_address: 0,
            ..*self
        }
        .encode()?;
        Ok([d as u32, (d >> 32) as u32])
    }

    /// The start-address field of a byte address or offset (`bytes >> 4`): what iterating a
    /// descriptor adds to its low word to move its start by `bytes` (CuTe's
    /// `GmmaDescriptorIterator`). An error unless `bytes` is 16-byte aligned and the field
    /// fits its 14 bits; the caller keeps the sum of the base's field and every offset below
    /// `2^14` too, so that the addition never carries into the leading byte offset.
    ///
    /// ```
    /// use rcute_atom::GmmaDescriptor;
    /// assert_eq!(GmmaDescriptor::start_field(16384).unwrap(), 1024);
    /// assert!(GmmaDescriptor::start_field(8).is_err());
    /// assert!(GmmaDescriptor::start_field(1 << 18).is_err());
    /// ```
    pub fn start_field(bytes: u32) -> Result<u32, DescError> {
        field("start_address", bytes).map(|v| v as u32)
    }

    /// A C++ expression for the low word of the descriptor at the shared address held by
    /// the `uint32_t` variable `addr` (the start address of `self` is ignored): the
    /// constant leading byte offset ORed with `(addr & 0x3FFFF) >> 4`.
    pub fn device_low_word_expr(&self, addr: &str) -> Result<String, DescError> {
        let [lo, _] = self.words_without_start()?;
        Ok(format!("(0x{lo:08x}u | (((uint32_t)({addr}) & 0x3FFFFu) >> 4))"))
    }

    /// A C++ expression for the descriptor of this layout at the shared address held by
    /// the `uint32_t` variable `addr` (the start address of `self` is ignored): the
    /// constant upper fields ORed with `(addr & 0x3FFFF) >> 4`.
    pub fn device_expr(&self, addr: &str) -> Result<String, DescError> {
        let hi = GmmaDescriptor {
            start_address: 0,
            ..*self
        }
        .encode()?;
        Ok(format!(
            "(0x{hi:016x}ull | (uint64_t)(((uint32_t)({addr}) & 0x3FFFFu) >> 4))"
        ))
    }
}

/// CuTe's `make_gmma_desc<Major>`: the descriptor fields of a canonical GMMA layout
/// (`(MN,K)` -> element offset, before the swizzle) of one `wgmma` operand, with start
/// address 0 and base offset 0.
pub fn make_gmma_desc(
    major: Major,
    swizzle: GmmaSwizzle,
    layout: &Layout,
    elem: Element,
) -> Result<GmmaDescriptor, DescError> {
    let nc = |m: String| DescError::NotCanonical(m);
    if layout.rank() != 2 {
        return Err(nc(format!("expected a rank-2 layout, got {layout}")));
    }
    let u128 = layout
        .recast(elem.bits() as i64, 128)
        .map_err(|e| nc(format!("cannot recast {layout} to 128-bit units: {e}")))?
        .coalesce_by(&tuple!(1, 1))
        .map_err(|e| nc(e.to_string()))?;
    let w = swizzle.width_u128();
    let stat = |l: &Layout, path: &[usize]| -> Result<i64, DescError> {
        l.stride()
            .get_path(path)
            .and_then(|t| t.leaf())
            .and_then(Int::as_static)
            .ok_or_else(|| nc(format!("stride {path:?} of {l} is not a static leaf")))
    };
    let size_of = |l: &Layout, i: usize| -> Result<i64, DescError> {
        l.mode(i)
            .ok()
            .and_then(|m| m.size().as_static())
            .ok_or_else(|| nc(format!("mode {i} of {l} has no static size")))
    };
    let profile_ok = |l: &Layout| l.shape().congruent(&tuple!((1, 1), (1, 1)));
    let (sbo, lbo) = match major {
        Major::MN => {
            let k = size_of(&u128, 1)?;
            let bits = elem.bits() as i64;
            if k != 256 / bits && k != 128 / bits && k != 512 / bits {
                return Err(nc(format!("K extent {k} is not 256/bits for {u128}")));
            }
            let tiler = Tiler::layouts([Layout::col_major(w), Layout::col_major(tuple!(8))]);
            let canon = u128.logical_divide(&tiler).map_err(|e| nc(e.to_string()))?;
            if !profile_ok(&canon) {
                return Err(nc(format!("profile of {canon}")));
            }
            if swizzle != GmmaSwizzle::Interleave && stat(&canon, &[0, 0])? != 1 {
                return Err(nc(format!("stride (0,0) of {canon} is not 1")));
            }
            if stat(&canon, &[1, 0])? != w {
                return Err(nc(format!("stride (1,0) of {canon} is not {w}")));
            }
            let s01 = stat(&canon, &[0, 1])?;
            let s11 = stat(&canon, &[1, 1])?;
            if swizzle == GmmaSwizzle::Interleave {
                (s01, s11)
            } else {
                (s11, s01)
            }
        }
        Major::K => {
            if size_of(&u128, 0)? % 8 != 0 {
                return Err(nc(format!("MN extent of {u128} is not a multiple of 8")));
            }
            let k = size_of(&u128, 1)?;
            if k != 2 && k != 4 {
                return Err(nc(format!("K extent of {u128} is not 2 (or 4) 16-byte units")));
            }
            let tiler = Tiler::layouts([Layout::col_major(tuple!(8)), Layout::col_major(tuple!(2))]);
            let canon = u128.logical_divide(&tiler).map_err(|e| nc(e.to_string()))?;
            if !profile_ok(&canon) {
                return Err(nc(format!("profile of {canon}")));
            }
            if stat(&canon, &[0, 0])? != w {
                return Err(nc(format!("stride (0,0) of {canon} is not {w}")));
            }
            let s10 = stat(&canon, &[1, 0])?;
            if swizzle != GmmaSwizzle::Interleave && s10 != 1 {
                return Err(nc(format!("stride (1,0) of {canon} is not 1")));
            }
            (stat(&canon, &[0, 1])?, s10)
        }
    };
    let to_bytes = |v: i64, f: &'static str| -> Result<u32, DescError> {
        u32::try_from(v * 16).map_err(|_| DescError::Overflow {
            field: f,
            value: v as u64,
        })
    };
    Ok(GmmaDescriptor {
        start_address: 0,
        leading_byte_offset: to_bytes(lbo, "leading_byte_offset")?,
        stride_byte_offset: to_bytes(sbo, "stride_byte_offset")?,
        base_offset: 0,
        swizzle,
    })
}
