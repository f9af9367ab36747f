//! Host-side TMA descriptors: `cuTensorMapEncodeTiled` on the validated parameters of an
//! [`rcute_atom::tma::TmaDescriptorSpec`] ([`TmaEncodeArgs`]).
//!
//! The result is a `CUtensorMap` (128 opaque bytes, 64-byte aligned) to pass by value as a
//! `const __grid_constant__ CUtensorMap` kernel parameter ([`KernelArgs::tensor_map`]) or
//! to copy into global memory.
//!
//! [`KernelArgs::tensor_map`]: crate::launch::KernelArgs::tensor_map

use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use rcute_atom::tma::TmaEncodeArgs;

use crate::device::DriverFailure;

/// Why a tensor map could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TmaEncodeError {
    /// An enum code of the arguments has no driver value.
    #[error("{field} = {code} is not a valid driver enum value")]
    BadCode {
        /// The field.
        field: &'static str,
        /// Its value.
        code: u32,
    },
    /// Array lengths do not match the rank.
    #[error("rank {rank}: {what} has {got} entries")]
    Length {
        /// The rank.
        rank: u32,
        /// Which array.
        what: &'static str,
        /// Its length.
        got: usize,
    },
    /// The global address is not 16-byte aligned (32 with 32-byte interleave).
    #[error("global address {0:#x} is misaligned")]
    Address(u64),
    /// The CUDA driver is not available.
    #[error("CUDA driver library (libcuda.so) not found")]
    NoDriver,
    /// The driver rejected the arguments.
    #[error(transparent)]
    Driver(#[from] DriverFailure),
}

fn data_type(code: u32) -> Result<CUtensorMapDataType, TmaEncodeError> {
    use CUtensorMapDataType::*;
    Ok(match code {
        0 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
        1 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
        2 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        3 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        4 => CU_TENSOR_MAP_DATA_TYPE_UINT64,
        5 => CU_TENSOR_MAP_DATA_TYPE_INT64,
        6 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        7 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        8 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        9 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        10 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
        11 => CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
        12 => CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
        _ => {
            return Err(TmaEncodeError::BadCode {
                field: "data_type",
                code,
            })
        }
    })
}

fn interleave(code: u32) -> Result<CUtensorMapInterleave, TmaEncodeError> {
    use CUtensorMapInterleave::*;
    Ok(match code {
        0 => CU_TENSOR_MAP_INTERLEAVE_NONE,
        1 => CU_TENSOR_MAP_INTERLEAVE_16B,
        2 => CU_TENSOR_MAP_INTERLEAVE_32B,
        _ => {
            return Err(TmaEncodeError::BadCode {
                field: "interleave",
                code,
            })
        }
    })
}

fn swizzle(code: u32) -> Result<CUtensorMapSwizzle, TmaEncodeError> {
    use CUtensorMapSwizzle::*;
    Ok(match code {
        0 => CU_TENSOR_MAP_SWIZZLE_NONE,
        1 => CU_TENSOR_MAP_SWIZZLE_32B,
        2 => CU_TENSOR_MAP_SWIZZLE_64B,
        3 => CU_TENSOR_MAP_SWIZZLE_128B,
        _ => return Err(TmaEncodeError::BadCode { field: "swizzle", code }),
    })
}

fn l2_promotion(code: u32) -> Result<CUtensorMapL2promotion, TmaEncodeError> {
    use CUtensorMapL2promotion::*;
    Ok(match code {
        0 => CU_TENSOR_MAP_L2_PROMOTION_NONE,
        1 => CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        2 => CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        3 => CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        _ => {
            return Err(TmaEncodeError::BadCode {
                field: "l2_promotion",
                code,
            })
        }
    })
}

fn oob_fill(code: u32) -> Result<CUtensorMapFloatOOBfill, TmaEncodeError> {
    use CUtensorMapFloatOOBfill::*;
    Ok(match code {
        0 => CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        1 => CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
        _ => {
            return Err(TmaEncodeError::BadCode {
                field: "oob_fill",
                code,
            })
        }
    })
}

/// Check the arguments' shape (array lengths, enum codes, address alignment) without the
/// driver; [`encode_tiled`] does this first.
pub fn check_args(args: &TmaEncodeArgs, global_address: u64) -> Result<(), TmaEncodeError> {
    let r = args.rank as usize;
    let len = |what, got: usize, want: usize| {
        if got == want {
            Ok(())
        } else {
            Err(TmaEncodeError::Length {
                rank: args.rank,
                what,
                got,
            })
        }
    };
    len("global_dim", args.global_dim.len(), r)?;
    len("global_strides", args.global_strides.len(), r.saturating_sub(1))?;
    len("box_dim", args.box_dim.len(), r)?;
    len("element_strides", args.element_strides.len(), r)?;
    data_type(args.data_type)?;
    interleave(args.interleave)?;
    swizzle(args.swizzle)?;
    l2_promotion(args.l2_promotion)?;
    oob_fill(args.oob_fill)?;
    let align = if args.interleave == 2 { 32 } else { 16 };
    if !global_address.is_multiple_of(align) {
        return Err(TmaEncodeError::Address(global_address));
    }
    Ok(())
}

/// Encode a tiled tensor map for the global tensor at device address `global_address`
/// (`cuTensorMapEncodeTiled`). Needs the CUDA driver (no context is required).
pub fn encode_tiled(args: &TmaEncodeArgs, global_address: u64) -> Result<sys::CUtensorMap, TmaEncodeError> {
    check_args(args, global_address)?;
    let present = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
    if !present {
        return Err(TmaEncodeError::NoDriver);
    }
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // The driver takes `rank - 1` strides; pass a valid pointer even for rank 1.
    let strides: Vec<u64> = if args.global_strides.is_empty() {
        vec![0]
    } else {
        args.global_strides.clone()
    };
    // SAFETY: every array holds at least `rank` (strides `rank - 1`) entries, checked
    // above, and `map` is a valid, writable CUtensorMap.
    let res = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type(args.data_type)?,
            args.rank,
            global_address as *mut std::ffi::c_void,
            args.global_dim.as_ptr(),
            strides.as_ptr(),
            args.box_dim.as_ptr(),
            args.element_strides.as_ptr(),
            interleave(args.interleave)?,
            swizzle(args.swizzle)?,
            l2_promotion(args.l2_promotion)?,
            oob_fill(args.oob_fill)?,
        )
    };
    res.result()
        .map_err(|e| DriverFailure::new("cuTensorMapEncodeTiled", e))?;
    Ok(map)
}

/// Encoded tensor maps (128 bytes each) by their encoding arguments and global address.
type MapCache = std::collections::HashMap<(TmaEncodeArgs, u64), [u64; 16]>;
/// Tensor maps encoded by [`encode_tiled_cached`], keyed by their arguments and address.
static MAP_CACHE: std::sync::Mutex<Option<MapCache>> = std::sync::Mutex::new(None);
/// Entries kept before the cache starts over (a GEMM launch encodes four maps).
const MAP_CACHE_CAPACITY: usize = 4096;

/// [`encode_tiled`] with a process-wide cache: encoding takes microseconds of driver
/// time, which dominates the host cost of launching a small GEMM whose operands do not
/// move between calls. The map is a pure function of its arguments and the address, so a
/// cached one is the one the driver would produce again.
pub fn encode_tiled_cached(args: &TmaEncodeArgs, global_address: u64) -> Result<sys::CUtensorMap, TmaEncodeError> {
    let key = (args.clone(), global_address);
    if let Ok(guard) = MAP_CACHE.lock() {
        if let Some(opaque) = guard.as_ref().and_then(|m| m.get(&key)) {
            return Ok(sys::CUtensorMap { opaque: *opaque });
        }
    }
    let map = encode_tiled(args, global_address)?;
    if let Ok(mut guard) = MAP_CACHE.lock() {
        let m = guard.get_or_insert_with(std::collections::HashMap::new);
        if m.len() >= MAP_CACHE_CAPACITY {
            m.clear();
        }
        m.insert(key, map.opaque);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> TmaEncodeArgs {
        TmaEncodeArgs {
            data_type: 9,
            rank: 2,
            global_dim: vec![100, 40],
            global_strides: vec![224],
            box_dim: vec![64, 32],
            element_strides: vec![1, 1],
            interleave: 0,
            swizzle: 3,
            l2_promotion: 2,
            oob_fill: 0,
        }
    }

    #[test]
    fn argument_checks() {
        assert_eq!(check_args(&args(), 0x1000), Ok(()));
        assert_eq!(check_args(&args(), 0x1008), Err(TmaEncodeError::Address(0x1008)));
        let mut a = args();
        a.swizzle = 9;
        assert!(matches!(
            check_args(&a, 0),
            Err(TmaEncodeError::BadCode { field: "swizzle", .. })
        ));
        let mut a = args();
        a.box_dim.pop();
        assert!(matches!(
            check_args(&a, 0),
            Err(TmaEncodeError::Length { what: "box_dim", .. })
        ));
    }
}
