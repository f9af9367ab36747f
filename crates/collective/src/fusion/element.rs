//! Host mirrors of the device conversions of a float to an element type: rounding
//! ([`round_to_element`]) and the stored bytes ([`encode_element`], [`decode_element`]).

use rcute_atom::Element;

use super::error::FusionError;
use super::validate::supported;

/// A binary float format: mantissa bits, exponent bias, largest finite value, whether
/// out-of-range values saturate (FP8 `__NV_SATFINITE`) instead of becoming infinite.
struct FloatFormat {
    mbits: i32,
    bias: i32,
    max: f64,
    saturate: bool,
}

fn float_format(e: Element) -> Option<FloatFormat> {
    Some(match e {
        Element::BF16 => FloatFormat {
            mbits: 7,
            bias: 127,
            max: f32::MAX as f64,
            saturate: false,
        },
        Element::F16 => FloatFormat {
            mbits: 10,
            bias: 15,
            max: 65504.0,
            saturate: false,
        },
        Element::E4M3 => FloatFormat {
            mbits: 3,
            bias: 7,
            max: 448.0,
            saturate: true,
        },
        Element::E5M2 => FloatFormat {
            mbits: 2,
            bias: 15,
            max: 57344.0,
            saturate: true,
        },
        _ => return None,
    })
}

fn round_float(x: f32, f: &FloatFormat) -> f64 {
    let x = x as f64;
    if x.is_nan() || x == 0.0 {
        return x;
    }
    if x.is_infinite() {
        return if f.saturate { f.max.copysign(x) } else { x };
    }
    let a = x.abs();
    let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let q = 2f64.powi(exp.max(1 - f.bias) - f.mbits);
    let r = (a / q).round_ties_even() * q;
    let r = if r > f.max {
        if f.saturate {
            f.max
        } else {
            f64::INFINITY
        }
    } else {
        r
    };
    r.copysign(x)
}

fn round_int(x: f32, lo: f64, hi: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        (x as f64).round_ties_even().max(lo).min(hi)
    }
}

/// The host mirror of the device conversion of a float to `e` (what [`Node::AuxStore`](super::Node::AuxStore)
/// writes and [`ComputeOp::Convert`](super::ComputeOp::Convert) computes), decoded back to f32: round to nearest even;
/// bf16 / f16 overflow to infinity; e4m3 / e5m2 saturate to ±448 / ±57344 (infinities
/// too, NaN stays NaN; `__NV_SATFINITE`); s8 / u8 / s32 saturate, NaN gives 0. Other types
/// return `x` unchanged.
pub fn round_to_element(e: Element, x: f32) -> f32 {
    if let Some(f) = float_format(e) {
        return round_float(x, &f) as f32;
    }
    match e {
        Element::S8 => round_int(x, -128.0, 127.0) as f32,
        Element::U8 => round_int(x, 0.0, 255.0) as f32,
        Element::S32 => round_int(x, i32::MIN as f64, i32::MAX as f64) as f32,
        _ => x,
    }
}

/// The little-endian bytes of `x` converted to `e` as the device stores it (see
/// [`round_to_element`]); for preparing inputs of fusion tests.
pub fn encode_element(e: Element, x: f32) -> Result<Vec<u8>, FusionError> {
    if !supported(e) {
        return Err(FusionError::UnsupportedElement {
            node: "encode_element".into(),
            elem: e,
        });
    }
    if let Some(f) = float_format(e) {
        let r = round_float(x, &f);
        let ebits = 8 * e.bytes() as i32 - 1 - f.mbits;
        let sign = u32::from(r.is_sign_negative()) << (ebits + f.mbits);
        let all_e = (1u32 << ebits) - 1;
        let bits = if r.is_nan() {
            // e4m3 has a single NaN encoding (S.1111.111), the others a quiet NaN.
            (all_e << f.mbits) | if e == Element::E4M3 { 7 } else { 1 << (f.mbits - 1) }
        } else if r.is_infinite() {
            sign | (all_e << f.mbits)
        } else if r == 0.0 {
            sign
        } else {
            let a = r.abs();
            let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            if exp < 1 - f.bias {
                sign | (a / 2f64.powi(1 - f.bias - f.mbits)) as u32
            } else {
                let mant = (a / 2f64.powi(exp - f.mbits)) as u32 - (1 << f.mbits);
                sign | (((exp + f.bias) as u32) << f.mbits) | mant
            }
        };
        let bytes = bits.to_le_bytes();
        return Ok(bytes[..e.bytes() as usize].to_vec());
    }
    let r = round_to_element(e, x);
    Ok(match e {
        Element::S8 => vec![(r as i8) as u8],
        Element::U8 => vec![r as u8],
        Element::S32 => (round_int(x, i32::MIN as f64, i32::MAX as f64) as i32)
            .to_le_bytes()
            .to_vec(),
        _ => x.to_le_bytes().to_vec(),
    })
}

/// The value of one element of type `e` stored little endian in `bytes` (the first
/// `e.bytes()` of them).
pub fn decode_element(e: Element, bytes: &[u8]) -> Result<f64, FusionError> {
    if !supported(e) {
        return Err(FusionError::UnsupportedElement {
            node: "decode_element".into(),
            elem: e,
        });
    }
    let need = e.bytes() as usize;
    if bytes.len() < need {
        return Err(FusionError::HostIndex {
            name: "decode_element".into(),
            index: need as i64 - 1,
            len: bytes.len(),
        });
    }
    let mut w = [0u8; 4];
    w[..need].copy_from_slice(&bytes[..need]);
    let bits = u32::from_le_bytes(w);
    if let Some(f) = float_format(e) {
        let ebits = 8 * need as i32 - 1 - f.mbits;
        let all_e = (1u32 << ebits) - 1;
        let neg = bits >> (ebits + f.mbits) & 1 == 1;
        let ef = (bits >> f.mbits) & all_e;
        let mant = bits & ((1 << f.mbits) - 1);
        let v = if e == Element::E4M3 && ef == all_e && mant == 7 {
            f64::NAN
        } else if ef == all_e && e != Element::E4M3 {
            if mant == 0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if ef == 0 {
            mant as f64 * 2f64.powi(1 - f.bias - f.mbits)
        } else {
            (mant + (1 << f.mbits)) as f64 * 2f64.powi(ef as i32 - f.bias - f.mbits)
        };
        return Ok(if neg { -v } else { v });
    }
    Ok(match e {
        Element::S8 => bytes[0] as i8 as f64,
        Element::U8 => bytes[0] as f64,
        Element::S32 => bits as i32 as f64,
        _ => f32::from_bits(bits) as f64,
    })
}
