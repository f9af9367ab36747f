//! A tuning table's header: the format, and where its measurements were made.
//!
//! A measured choice is only valid on the device, driver and NVRTC it was measured with (a
//! different GPU has other best tiles): a table whose header differs from [`TableHeader`]
//! of the running process is ignored whole. Whether an entry's kernels are still the ones
//! this build generates is the entry's own fingerprint's business
//! ([`super::kernel_fingerprint`]).
//!
//! [`Family`], [`generator_hashes`] and [`probe_sources`] are format 1's rule (one hash per
//! kernel family in the header), kept only while the shipped tables are converted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};
use rcute_kernel::gemm_sm90::{GemmSm90Config, Sm90Schedule};
use rcute_kernel::Gpu;

/// The kernel families a tuning entry's configuration can name, each with its own
/// generator hash ([`generator_hashes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// The Ampere-class GEMM (`mma.sync`; gemm and scaled_mm entries without `sm90:`).
    Sm80,
    /// The Hopper GEMM (`sm90:` entries).
    Sm90,
    /// The AWQ int4 GEMMs (`awq:` entries).
    Awq,
    /// The grouped GEMMs of the fused MoE layer, both families (`moe:` entries).
    Moe,
}

impl Family {
    /// Every family, in table order.
    pub const ALL: [Family; 4] = [Family::Sm80, Family::Sm90, Family::Awq, Family::Moe];

    /// The families whose kernels the tuner times for an entry of op `op` on `arch`: a
    /// choice holds while none of them changed, since a faster candidate of either could
    /// beat the winner. `gemm` and `scaled_mm` on `sm_90a` choose between the Ampere-class
    /// and the Hopper kernels, elsewhere among the Ampere-class ones; `awq` and `moe` among
    /// their own (`moe`: both grouped families).
    ///
    /// ```
    /// use rcute_ops::tuning::Family;
    /// assert_eq!(Family::candidates("gemm", "sm_90a"), [Family::Sm80, Family::Sm90]);
    /// assert_eq!(Family::candidates("scaled_mm", "sm_80"), [Family::Sm80]);
    /// assert_eq!(Family::candidates("moe", "sm_90a"), [Family::Moe]);
    /// ```
    pub fn candidates(op: &str, arch: &str) -> &'static [Family] {
        match op {
            "awq" => &[Family::Awq],
            "moe" => &[Family::Moe],
            _ if arch == "sm_90a" => &[Family::Sm80, Family::Sm90],
            _ => &[Family::Sm80],
        }
    }

    /// The family's name in tables and warnings.
    pub fn name(self) -> &'static str {
        match self {
            Family::Sm80 => "sm80",
            Family::Sm90 => "sm90",
            Family::Awq => "awq",
            Family::Moe => "moe",
        }
    }
}

/// The table format this build reads and writes: 2, a kernel fingerprint per entry
/// ([`super::kernel_fingerprint`]). Format 1 (tables without a `format`) kept one
/// generator hash per kernel family in the header; such a table is ignored whole.
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

/// A hash of what the generator emits, per [`Family`]: the first 16 hex digits of the
/// SHA-256 of this crate's version and of the CUDA sources generated for the family's
/// probe kernels (catalogue units: [`probe_sources`]). Any change to the emitted code of
/// those kernels gives their family another hash and leaves the other families' alone; a
/// change that touches none of a family's probes keeps its hash (re-measure by hand then).
///
/// ```
/// use rcute_ops::tuning::{generator_hashes, Family};
/// let h = generator_hashes();
/// assert_eq!(h.len(), Family::ALL.len());
/// assert!(h.values().all(|v| v.len() == 16));
/// assert_eq!(h, generator_hashes());
/// ```
pub fn generator_hashes() -> &'static BTreeMap<Family, String> {
    static HASHES: std::sync::OnceLock<BTreeMap<Family, String>> = std::sync::OnceLock::new();
    HASHES.get_or_init(|| {
        Family::ALL
            .into_iter()
            .map(|f| {
                let mut h = Sha256::new();
                h.update(env!("CARGO_PKG_VERSION").as_bytes());
                for source in probe_sources(f) {
                    h.update(source.as_bytes());
                }
                (f, h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect())
            })
            .collect()
    })
}

/// The generated sources a family's hash covers (an error's text where one fails), each
/// a unit of the standard catalogue in `kernels/`: Ampere-class bf16 TN at 128x128x32 and
/// 16x64x128; Hopper cooperative 128x256x64 and ping-pong 64x128x64; the AWQ f16 fused,
/// prepared and register-streamed decode kernels; the MoE layer's SM80 decode GEMM1
/// (gather, SwiGLU) and its SM90 GEMM1.
pub fn probe_sources(family: Family) -> Vec<String> {
    fn text<G, E: std::fmt::Display>(r: Result<G, E>, source: impl Fn(G) -> String) -> String {
        r.map_or_else(|e| e.to_string(), source)
    }
    match family {
        Family::Sm80 => [[128, 128, 32], [16, 64, 128]]
            .into_iter()
            .zip([[2, 2], [1, 4]])
            .map(|(tile, warps)| {
                let cfg = GemmSm80Config::bf16(Major::K, Major::K, tile, warps);
                text(rcute_kernel::gemm_sm80::generate(&cfg), |g| g.source)
            })
            .collect(),
        Family::Sm90 => [
            ([128, 256, 64], Sm90Schedule::Cooperative),
            ([64, 128, 64], Sm90Schedule::PingPong),
        ]
        .into_iter()
        .map(|(tile, schedule)| {
            let cfg = GemmSm90Config::bf16(tile, schedule);
            text(rcute_kernel::gemm_sm90::generate(&cfg), |g| g.source)
        })
        .collect(),
        Family::Awq => {
            let fused = AwqGemmConfig::new(rcute_atom::Element::F16, [16, 256, 64], [1, 4], 4, 4);
            let streamed = AwqGemmConfig::new(rcute_atom::Element::F16, [16, 64, 64], [16, 1], 4, 4).streamed();
            [fused.clone(), fused.prepared(), streamed]
                .iter()
                .map(|cfg| text(rcute_kernel::awq_gemm::generate(cfg), |g| g.source))
                .collect()
        }
        Family::Moe => {
            let sm80 = &rcute_kernel::catalogue::grouped_gemm_configs()[0];
            let sm90 = &rcute_kernel::catalogue::grouped_gemm_sm90_configs()[0];
            vec![
                text(rcute_kernel::grouped_gemm::generate(sm80), |g| g.source),
                text(rcute_kernel::gemm_sm90::generate(sm90), |g| g.source),
            ]
        }
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
