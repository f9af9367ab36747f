//! A tuning table's header: where and with which generator its measurements were made.
//!
//! A measured choice is only valid on the device, driver, NVRTC and generator it was
//! measured with: the same configuration string names different code after the
//! generator changes, and a different GPU has other best tiles. A table whose header
//! differs from [`TableHeader`] of the running process in any field is ignored whole.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};
use rcute_kernel::gemm_sm90::{GemmSm90Config, Sm90Schedule};
use rcute_kernel::Gpu;

/// The provenance of a tuning table's measurements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableHeader {
    /// The device name, e.g. `"NVIDIA H200"`.
    pub device: String,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// The CUDA driver version as `cuDriverGetVersion` reports it (e.g. 13000).
    pub driver: i32,
    /// The NVRTC version, `"major.minor"`.
    pub nvrtc: String,
    /// [`generator_hash`] of the build that measured.
    pub generator: String,
}

impl TableHeader {
    /// The header of this process on `gpu`: its name and SM count, the driver and NVRTC
    /// versions, and [`generator_hash`]. `None` when the driver or NVRTC cannot say.
    pub fn of(gpu: &Gpu) -> Option<TableHeader> {
        let mut driver = 0i32;
        // SAFETY: an out-pointer to a live local; the driver is loaded (the Gpu exists).
        let rc = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
        if rc != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return None;
        }
        let (major, minor) = rcute_kernel::nvrtc::nvrtc_version().ok()?;
        Some(TableHeader {
            device: gpu.name().to_string(),
            sms: gpu.sm_count(),
            driver,
            nvrtc: format!("{major}.{minor}"),
            generator: generator_hash(),
        })
    }

    /// Why `self` (a table's header) does not describe `here`, or `None` when it does.
    pub fn mismatch(&self, here: &TableHeader) -> Option<String> {
        let mut diffs = Vec::new();
        let mut diff = |what: &str, table: String, this: String| {
            if table != this {
                diffs.push(format!("{what} {table} (here {this})"));
            }
        };
        diff("device", self.device.clone(), here.device.clone());
        diff("SMs", self.sms.to_string(), here.sms.to_string());
        diff("driver", self.driver.to_string(), here.driver.to_string());
        diff("NVRTC", self.nvrtc.clone(), here.nvrtc.clone());
        diff("generator", self.generator.clone(), here.generator.clone());
        (!diffs.is_empty()).then(|| format!("measured with {}", diffs.join(", ")))
    }
}

/// A hash of what the generator emits: the first 16 hex digits of the SHA-256 of the
/// CUDA sources generated for a fixed probe set (an Ampere-class bf16 GEMM and a Hopper
/// cooperative GEMM) and of this crate's version. Any change to the emitted code of
/// these kernels, and so nearly any generator change, gives another hash.
///
/// ```
/// let h = rcute_ops::tuning::generator_hash();
/// assert_eq!(h.len(), 16);
/// assert_eq!(h, rcute_ops::tuning::generator_hash());
/// ```
pub fn generator_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        let mut h = Sha256::new();
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        let sm80 = GemmSm80Config::bf16(Major::K, Major::K, [128, 128, 32], [2, 2]);
        match rcute_kernel::gemm_sm80::generate(&sm80) {
            Ok(g) => h.update(g.source.as_bytes()),
            Err(e) => h.update(e.to_string().as_bytes()),
        }
        let sm90 = GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative);
        match rcute_kernel::gemm_sm90::generate(&sm90) {
            Ok(g) => h.update(g.source.as_bytes()),
            Err(e) => h.update(e.to_string().as_bytes()),
        }
        h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> TableHeader {
        TableHeader {
            device: "NVIDIA H200".into(),
            sms: 132,
            driver: 13000,
            nvrtc: "13.0".into(),
            generator: generator_hash(),
        }
    }

    #[test]
    fn equal_headers_match_and_each_field_breaks_the_match() {
        let here = header();
        assert_eq!(header().mismatch(&here), None);
        let mut other = header();
        other.device = "NVIDIA H100 80GB HBM3".into();
        assert!(other.mismatch(&here).unwrap().contains("device NVIDIA H100"));
        let mut other = header();
        other.sms = 114;
        assert!(other.mismatch(&here).unwrap().contains("SMs 114 (here 132)"));
        let mut other = header();
        other.driver = 12080;
        assert!(other.mismatch(&here).unwrap().contains("driver 12080"));
        let mut other = header();
        other.nvrtc = "12.8".into();
        assert!(other.mismatch(&here).unwrap().contains("NVRTC 12.8"));
        let mut other = header();
        other.generator = "0000000000000000".into();
        assert!(other.mismatch(&here).unwrap().contains("generator 0000000000000000"));
    }

    #[test]
    fn the_generator_hash_is_hex_and_stable() {
        let h = generator_hash();
        assert_eq!(h.len(), 16);
        assert!(h.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(h, generator_hash());
    }
}
