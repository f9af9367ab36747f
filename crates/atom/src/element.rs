//! Element (value) types of MMA operands, accumulators and copies: bit widths, CUDA C++
//! type names and PTX type suffixes.

use std::fmt;

/// A scalar element type as the hardware sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Element {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE binary32.
    F32,
    /// TensorFloat-32: 19 significant bits stored in a 32-bit container.
    TF32,
    /// IEEE binary64.
    F64,
    /// FP8 with 4 exponent and 3 mantissa bits.
    E4M3,
    /// FP8 with 5 exponent and 2 mantissa bits.
    E5M2,
    /// Signed 8-bit integer.
    S8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    S16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    S32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    S64,
    /// Unsigned 64-bit integer.
    U64,
    /// 128 untyped bits (CuTe's `uint128_t`), the unit of vectorized copies.
    B128,
}

impl Element {
    /// Every element type, in declaration order.
    pub const ALL: [Element; 16] = [
        Element::F16,
        Element::BF16,
        Element::F32,
        Element::TF32,
        Element::F64,
        Element::E4M3,
        Element::E5M2,
        Element::S8,
        Element::U8,
        Element::S16,
        Element::U16,
        Element::S32,
        Element::U32,
        Element::S64,
        Element::U64,
        Element::B128,
    ];

    /// Storage width in bits (`sizeof_bits`).
    pub const fn bits(self) -> u32 {
        match self {
            Element::E4M3 | Element::E5M2 | Element::S8 | Element::U8 => 8,
            Element::F16 | Element::BF16 | Element::S16 | Element::U16 => 16,
            Element::F32 | Element::TF32 | Element::S32 | Element::U32 => 32,
            Element::F64 | Element::S64 | Element::U64 => 64,
            Element::B128 => 128,
        }
    }

    /// Storage width in bytes.
    pub const fn bytes(self) -> u32 {
        self.bits() / 8
    }

    /// The CUDA C++ type that stores one element (from `cuda_fp16.h`, `cuda_bf16.h`,
    /// `cuda_fp8.h`, `cstdint`). TF32 is stored in a `float`; 128 bits in a `uint4`.
    pub const fn cuda_type(self) -> &'static str {
        match self {
            Element::F16 => "__half",
            Element::BF16 => "__nv_bfloat16",
            Element::F32 | Element::TF32 => "float",
            Element::F64 => "double",
            Element::E4M3 => "__nv_fp8_e4m3",
            Element::E5M2 => "__nv_fp8_e5m2",
            Element::S8 => "int8_t",
            Element::U8 => "uint8_t",
            Element::S16 => "int16_t",
            Element::U16 => "uint16_t",
            Element::S32 => "int32_t",
            Element::U32 => "uint32_t",
            Element::S64 => "int64_t",
            Element::U64 => "uint64_t",
            Element::B128 => "uint4",
        }
    }

    /// The PTX type suffix used in `mma` / `wgmma` instruction names.
    pub const fn ptx(self) -> &'static str {
        match self {
            Element::F16 => "f16",
            Element::BF16 => "bf16",
            Element::F32 => "f32",
            Element::TF32 => "tf32",
            Element::F64 => "f64",
            Element::E4M3 => "e4m3",
            Element::E5M2 => "e5m2",
            Element::S8 => "s8",
            Element::U8 => "u8",
            Element::S16 => "s16",
            Element::U16 => "u16",
            Element::S32 => "s32",
            Element::U32 => "u32",
            Element::S64 => "s64",
            Element::U64 => "u64",
            Element::B128 => "b128",
        }
    }

    /// The header that declares [`Element::cuda_type`].
    pub const fn header(self) -> &'static str {
        match self {
            Element::F16 => "cuda_fp16.h",
            Element::BF16 => "cuda_bf16.h",
            Element::E4M3 | Element::E5M2 => "cuda_fp8.h",
            _ => "cstdint",
        }
    }

    /// True for floating-point types (including TF32 and FP8).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            Element::F16 | Element::BF16 | Element::F32 | Element::TF32 | Element::F64 | Element::E4M3 | Element::E5M2
        )
    }

    /// True for integer types.
    pub const fn is_integer(self) -> bool {
        !self.is_float() && !matches!(self, Element::B128)
    }

    /// The name CuTe uses in operation names (`F16`, `BF16`, `TF32`, `S8`, `E4M3`, ...).
    pub const fn cute_name(self) -> &'static str {
        match self {
            Element::F16 => "F16",
            Element::BF16 => "BF16",
            Element::F32 => "F32",
            Element::TF32 => "TF32",
            Element::F64 => "F64",
            Element::E4M3 => "E4M3",
            Element::E5M2 => "E5M2",
            Element::S8 => "S8",
            Element::U8 => "U8",
            Element::S16 => "S16",
            Element::U16 => "U16",
            Element::S32 => "S32",
            Element::U32 => "U32",
            Element::S64 => "S64",
            Element::U64 => "U64",
            Element::B128 => "U128",
        }
    }

    /// How many elements one 32-bit register holds (0 for 64/128-bit types).
    pub const fn per_u32(self) -> u32 {
        32 / self.bits()
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ptx())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_names() {
        assert_eq!(Element::BF16.bits(), 16);
        assert_eq!(Element::E4M3.cuda_type(), "__nv_fp8_e4m3");
        assert_eq!(Element::TF32.cuda_type(), "float");
        assert_eq!(Element::S8.per_u32(), 4);
        assert_eq!(Element::B128.bytes(), 16);
        for e in Element::ALL {
            assert_eq!(e.bits() % 8, 0);
            assert!(!e.cuda_type().is_empty());
        }
    }
}
