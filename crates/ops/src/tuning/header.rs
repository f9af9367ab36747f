//! A tuning table's header: the format, and where its measurements were made.
//!
//! A measured choice is only valid on the device, driver and NVRTC it was measured with (a
//! different GPU has other best tiles): a table whose header differs from [`TableHeader`]
//! of the running process is ignored whole. Whether an entry's kernels are still the ones
//! this build generates is the entry's own fingerprint's business
//! ([`super::kernel_fingerprint`]).

use serde::{Deserialize, Serialize};

use rcute_kernel::Gpu;

/// The table format this build reads and writes: 2, a kernel fingerprint per entry
/// ([`super::kernel_fingerprint`]). Format 1 (tables without a `format`) kept one
/// generator hash per kernel family (`sm80`, `sm90`, `awq`, `moe`) in the header, over a
/// few catalogue units of the family; such a table is ignored whole.
pub const TABLE_FORMAT: u32 = 2;

/// The format of a header that names none: 1.
fn format_1() -> u32 {
    1
}

/// The provenance of a tuning table's measurements: the format, and the device, driver
/// and NVRTC they were made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableHeader {
    /// The table format ([`TABLE_FORMAT`]; 1 when absent).
    #[serde(default = "format_1")]
    pub format: u32,
    /// The device name, e.g. `"NVIDIA H200"`.
    pub device: String,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// The CUDA driver version as `cuDriverGetVersion` reports it (e.g. 13000).
    pub driver: i32,
    /// The NVRTC version, `"major.minor"`.
    pub nvrtc: String,
    /// Opt-in shared memory per block, bytes (232448 on an H100 or H200): an automatic
    /// SM80-class stage count fills it, so it is part of some kernels' sources and of
    /// their fingerprints (0 when absent).
    #[serde(default)]
    pub smem_optin: u32,
}

impl TableHeader {
    /// The header of this process on `gpu`: the current format, its name, SM count and
    /// opt-in shared memory, the driver and NVRTC versions. `None` when the driver or
    /// NVRTC cannot say.
    pub fn of(gpu: &Gpu) -> Option<TableHeader> {
        let mut driver = 0i32;
        // SAFETY: an out-pointer to a live local; the driver is loaded (the Gpu exists).
        let rc = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
        if rc != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return None;
        }
        let (major, minor) = rcute_kernel::nvrtc::nvrtc_version().ok()?;
        Some(TableHeader {
            format: TABLE_FORMAT,
            device: gpu.name().to_string(),
            sms: gpu.sm_count(),
            driver,
            nvrtc: format!("{major}.{minor}"),
            smem_optin: gpu.max_shared_per_block_optin(),
        })
    }

    /// Why `self` (a table's header) does not describe `here`'s format, device, driver
    /// and NVRTC, or `None` when it does. Whether an entry's kernels are the ones this
    /// build generates is its own fingerprint's business ([`super::Tables::lookup`]).
    pub fn mismatch(&self, here: &TableHeader) -> Option<String> {
        if self.format != here.format {
            return Some(format!(
                "written in format {} (this build reads format {}: re-measure it with rcute tune)",
                self.format, here.format
            ));
        }
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
        diff(
            "shared memory per block",
            self.smem_optin.to_string(),
            here.smem_optin.to_string(),
        );
        (!diffs.is_empty()).then(|| format!("measured with {}", diffs.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> TableHeader {
        TableHeader {
            format: TABLE_FORMAT,
            device: "NVIDIA H200".into(),
            sms: 132,
            driver: 13000,
            nvrtc: "13.0".into(),
            smem_optin: 232448,
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
        other.smem_optin = 101376;
        assert!(other
            .mismatch(&here)
            .unwrap()
            .contains("shared memory per block 101376"));
        let mut other = header();
        other.format = 1;
        assert!(other
            .mismatch(&here)
            .unwrap()
            .contains("format 1 (this build reads format 2"));
    }

    #[test]
    fn a_header_without_a_format_is_format_1() {
        let old = r#"{ "device": "NVIDIA H200", "sms": 132, "driver": 13000, "nvrtc": "13.0",
                       "generators": { "sm80": "e5dc32edd20592a3" } }"#;
        let h: TableHeader = serde_json::from_str(old).unwrap();
        assert_eq!((h.format, h.smem_optin), (1, 0));
        assert!(h.mismatch(&header()).is_some());
    }
}
