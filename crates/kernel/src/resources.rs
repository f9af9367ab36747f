//! Per-kernel resource usage, parsed from the `ptxas -v` report in an NVRTC log.
//!
//! The report looks like this (the `used N barriers` item appears from `sm_90`):
//!
//! ```text
//! ptxas info    : 0 bytes gmem
//! ptxas info    : Compiling entry function 'add' for 'sm_80'
//! ptxas info    : Function properties for add
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 10 registers, 4096 bytes smem, 380 bytes cmem[0]
//! ```
//!
//! NVRTC 13.0 on a machine whose CUDA driver is initialized in the same process returns an
//! empty log (no report). [`ResourceReport::parse_cuobjdump`] then reads the same numbers
//! from the CUBIN with `cuobjdump -res-usage`, which every toolkit and the wheel install
//! have; [`crate::compile`] does this by itself when the log has no report:
//!
//! ```text
//!  Function add:
//!   REG:10 STACK:0 SHARED:4096 LOCAL:0 CONSTANT[0]:380 TEXTURE:0 SURFACE:0 SAMPLER:0
//! ```
//!
//! That form has no separate spill counts: spilled registers live in the stack frame, so
//! a report from it has `stack_frame_bytes` > 0 whenever ptxas spilled.

/// Where a [`KernelResources`] entry came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResourceSource {
    /// The `ptxas -v` report in the NVRTC log (every field filled).
    #[default]
    Ptxas,
    /// `cuobjdump -res-usage` on the CUBIN: no barrier count and no separate spill counts;
    /// for `sm_90` its shared memory adds 1 KiB to a kernel that uses any
    /// (`spill_*_bytes` are 0 and [`KernelResources::spills`] is `false`; spills show in
    /// `stack_frame_bytes`).
    Cuobjdump,
}

/// Resources of one `__global__` function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KernelResources {
    /// The (possibly mangled) kernel name.
    pub name: String,
    /// The architecture ptxas compiled it for, e.g. `"sm_90a"`.
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Named barriers used (reported from `sm_90` on).
    pub barriers: Option<u32>,
    /// Bytes of registers spilled to local memory (stores), per thread.
    pub spill_stores_bytes: u32,
    /// Bytes reloaded from spills, per thread.
    pub spill_loads_bytes: u32,
    /// Stack frame per thread (local arrays plus spills).
    pub stack_frame_bytes: u32,
    /// Statically allocated shared memory per block (dynamic shared memory is not included).
    pub shared_bytes: u32,
    /// Constant memory summed over all banks (bank 0 holds the kernel parameters).
    pub constant_bytes: u32,
    /// Constant memory per bank: `(bank, bytes)`.
    pub constant_banks: Vec<(u32, u32)>,
    /// Which report the numbers came from.
    pub source: ResourceSource,
}

impl KernelResources {
    /// Whether ptxas reported spilled registers. A `cuobjdump` report has no spill
    /// counts (this is then `false`): check `stack_frame_bytes`, which holds any spills.
    pub fn spills(&self) -> bool {
        self.spill_stores_bytes > 0 || self.spill_loads_bytes > 0
    }
}

/// The whole `ptxas -v` report of one compilation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceReport {
    /// One entry per kernel, in the order ptxas reported them.
    pub kernels: Vec<KernelResources>,
    /// `ptxas warning` lines, without the prefix.
    pub warnings: Vec<String>,
}

impl ResourceReport {
    /// Parses the report out of a full NVRTC log; other lines are ignored, and a log
    /// without a report gives an empty one.
    pub fn parse(log: &str) -> ResourceReport {
        let mut report = ResourceReport::default();
        // Index of the kernel that "Used ..." lines apply to.
        let mut current: Option<usize> = None;
        // Index of the kernel a "Function properties" line named (None: a device function).
        let mut properties_for: Option<Option<usize>> = None;
        for line in log.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("ptxas warning") {
                report.warnings.push(strip_colon(rest).to_owned());
                continue;
            }
            if let Some(rest) = line.strip_prefix("ptxas info") {
                let rest = strip_colon(rest);
                properties_for = None;
                if let Some(entry) = rest.strip_prefix("Compiling entry function ") {
                    let mut quoted = entry.split('\'').skip(1).step_by(2);
                    let name = quoted.next().unwrap_or_default().to_owned();
                    let arch = quoted.next().unwrap_or_default().to_owned();
                    report.kernels.push(KernelResources {
                        name,
                        arch,
                        ..Default::default()
                    });
                    current = Some(report.kernels.len() - 1);
                } else if let Some(name) = rest.strip_prefix("Function properties for ") {
                    properties_for = Some(report.kernels.iter().rposition(|k| k.name == name.trim()));
                } else if let Some(used) = rest.strip_prefix("Used ") {
                    if let Some(k) = current.and_then(|i| report.kernels.get_mut(i)) {
                        apply_usage(k, used);
                    }
                    current = None;
                }
                continue;
            }
            // The line after "Function properties for X"; NVRTC 13 prefixes it with
            // "ptxas         .", older versions only indent it.
            let line = line
                .strip_prefix("ptxas")
                .map_or(line, |r| r.trim_start().trim_start_matches('.'));
            if let Some(target) = properties_for.take() {
                if let Some(k) = target.and_then(|i| report.kernels.get_mut(i)) {
                    for item in line.split(',') {
                        let (n, what) = leading_number(item);
                        match what {
                            "bytes stack frame" => k.stack_frame_bytes = n,
                            "bytes spill stores" => k.spill_stores_bytes = n,
                            "bytes spill loads" => k.spill_loads_bytes = n,
                            _ => {}
                        }
                    }
                }
            }
        }
        report
    }

    /// Parses `cuobjdump -res-usage` output of a CUBIN compiled for `arch` (e.g. `"sm_75"`);
    /// other lines are ignored.
    pub fn parse_cuobjdump(text: &str, arch: &str) -> ResourceReport {
        let mut report = ResourceReport::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(name) = line.strip_prefix("Function ").and_then(|n| n.strip_suffix(':')) {
                report.kernels.push(KernelResources {
                    name: name.to_owned(),
                    arch: arch.to_owned(),
                    source: ResourceSource::Cuobjdump,
                    ..Default::default()
                });
                continue;
            }
            let Some(k) = report.kernels.last_mut() else { continue };
            if !line.starts_with("REG:") {
                continue;
            }
            for item in line.split_whitespace() {
                let Some((key, value)) = item.split_once(':') else {
                    continue;
                };
                let Ok(n) = value.parse::<u32>() else { continue };
                match key {
                    "REG" => k.registers = n,
                    "STACK" => k.stack_frame_bytes = n,
                    "SHARED" => k.shared_bytes = n,
                    _ => {
                        if let Some(bank) = key.strip_prefix("CONSTANT[").and_then(|b| b.strip_suffix(']')) {
                            if let Ok(bank) = bank.parse() {
                                k.constant_banks.push((bank, n));
                                k.constant_bytes = k.constant_bytes.saturating_add(n);
                            }
                        }
                    }
                }
            }
        }
        report
    }

    /// The kernel called `name`, if reported.
    pub fn kernel(&self, name: &str) -> Option<&KernelResources> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// Whether any kernel spilled registers.
    pub fn any_spills(&self) -> bool {
        self.kernels.iter().any(KernelResources::spills)
    }
}

fn strip_colon(s: &str) -> &str {
    s.trim_start().strip_prefix(':').unwrap_or(s).trim()
}

/// Splits `" 380 bytes cmem[0]"` into `(380, "bytes cmem[0]")`; 0 when there is no number.
fn leading_number(item: &str) -> (u32, &str) {
    let item = item.trim();
    let end = item.find(|c: char| !c.is_ascii_digit()).unwrap_or(item.len());
    (item[..end].parse().unwrap_or(0), item[end..].trim())
}

/// Applies `"10 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]"`.
fn apply_usage(k: &mut KernelResources, used: &str) {
    for item in used.split(',') {
        let item = item.trim();
        let item = item.strip_prefix("used ").unwrap_or(item);
        let (n, what) = leading_number(item);
        match what {
            "registers" => k.registers = n,
            "barriers" => k.barriers = Some(n),
            "bytes smem" => k.shared_bytes = n,
            _ => {
                if let Some(bank) = what.strip_prefix("bytes cmem[").and_then(|b| b.strip_suffix(']')) {
                    if let Ok(bank) = bank.parse() {
                        k.constant_banks.push((bank, n));
                        k.constant_bytes = k.constant_bytes.saturating_add(n);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real NVRTC 13.0.88 logs of `tests/data/resources.cu`.
    const SM80_LOG: &str = include_str!("../tests/data/ptxas_sm80.log");
    const SM90A_LOG: &str = include_str!("../tests/data/ptxas_sm90a.log");

    #[test]
    fn parses_sm80_report() {
        let r = ResourceReport::parse(SM80_LOG);
        let names: Vec<_> = r.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["local_array", "add_bf16"], "{r:#?}");
        let add = r.kernel("add_bf16").unwrap();
        assert_eq!(add.arch, "sm_80");
        assert!(add.registers > 0 && add.registers < 32, "{add:?}");
        assert!(!add.spills());
        assert_eq!(add.barriers, Some(0));
        assert_eq!(add.shared_bytes, 0);
        assert!(add.constant_bytes > 0 && add.constant_banks[0].0 == 0);
        let local = r.kernel("local_array").unwrap();
        assert!(local.stack_frame_bytes >= 128, "{local:?}");
        assert!(!local.spills(), "a local array is not a spill: {local:?}");
        assert!(local.shared_bytes >= 1024, "{local:?}");
    }

    #[test]
    fn parses_sm90a_report() {
        let r = ResourceReport::parse(SM90A_LOG);
        assert_eq!(r.kernels.len(), 2, "{r:#?}");
        let add = r.kernel("add_bf16").unwrap();
        assert_eq!(add.arch, "sm_90a");
        assert!(add.registers > 0);
        assert!(add.barriers.is_some(), "sm_90 reports barriers: {add:?}");
        assert!(!r.kernels.iter().any(|k| k.name.is_empty()));
    }

    #[test]
    fn synthetic_report_with_spills_and_device_function() {
        let log = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Function properties for _Z6helperv\n    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
            ptxas info    : Function properties for k\n    40 bytes stack frame, 36 bytes spill stores, 28 bytes spill loads\n\
            ptxas info    : Used 255 registers, used 1 barriers, 40 bytes cumulative stack size, 2048 bytes smem, 544 bytes cmem[0], 8 bytes cmem[2]\n\
            ptxas warning : Registers are spilled to local memory in function 'k', 36 bytes spill stores, 28 bytes spill loads\n";
        let r = ResourceReport::parse(log);
        assert_eq!(r.kernels.len(), 1);
        let k = &r.kernels[0];
        assert_eq!((k.registers, k.barriers, k.shared_bytes), (255, Some(1), 2048));
        assert_eq!(
            (k.stack_frame_bytes, k.spill_stores_bytes, k.spill_loads_bytes),
            (40, 36, 28)
        );
        assert_eq!(k.constant_banks, vec![(0, 544), (2, 8)]);
        assert_eq!(k.constant_bytes, 552);
        assert!(r.any_spills());
        assert_eq!(r.warnings.len(), 1);
    }

    /// `cuobjdump -res-usage` (13.5) of the same `tests/data/resources.cu`, for sm_75.
    const SM75_RES_USAGE: &str = include_str!("../tests/data/res_usage_sm75.txt");

    #[test]
    fn parses_cuobjdump_res_usage() {
        let r = ResourceReport::parse_cuobjdump(SM75_RES_USAGE, "sm_75");
        let names: Vec<_> = r.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["local_array", "add_bf16"], "{r:#?}");
        let local = r.kernel("local_array").unwrap();
        assert_eq!(
            (local.registers, local.stack_frame_bytes, local.shared_bytes),
            (12, 128, 1024)
        );
        assert_eq!(local.constant_banks, vec![(0, 372)]);
        assert_eq!(local.source, ResourceSource::Cuobjdump);
        let add = r.kernel("add_bf16").unwrap();
        assert_eq!(
            (add.registers, add.stack_frame_bytes, add.arch.as_str()),
            (12, 0, "sm_75")
        );
        assert!(!add.spills());
        assert_eq!(
            ResourceReport::parse_cuobjdump("garbage\nREG:3", "sm_80"),
            ResourceReport::default()
        );
    }

    #[test]
    fn garbage_gives_empty_report() {
        assert_eq!(
            ResourceReport::parse("nothing here\nptxas info : Used x registers"),
            ResourceReport::default()
        );
    }
}
