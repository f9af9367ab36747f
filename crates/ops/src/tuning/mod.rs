//! Tuning tables: measured kernel choices, persisted with their provenance.
//!
//! Kernel selection ([`crate::select`]) follows fixed rules. A tuning table overrides
//! them per problem with a configuration measured on the same device, driver and NVRTC
//! ([`TableHeader`]) with the same kernels: each entry records the fingerprint of the
//! generated sources of the kernels its configuration runs for its key
//! ([`kernel_fingerprint`]), and applies while this build generates the same ones.
//! Entries are keyed by op, element types, fusion, arch, N, K and an M bucket
//! ([`ProblemKey`], [`bucket`]), and a lookup takes the nearest M bucket with an entry,
//! if one of its entries applies (the rules decide otherwise). A table or entry that does
//! not apply is ignored with a one-line warning, never used ([`TuningTable::load`],
//! [`Tables::lookup`]); `rcute table FILE` lists which entries apply to this build.
//!
//! Environment: `RCUTE_TUNING_FILE` names a table to read (before any shipped one);
//! `RCUTE_TUNING=off` ignores every table, `cached` (the default) uses them, `on-miss`
//! also tunes a problem with no entry at its own M bucket the first time an op meets it
//! ([`tuner::tune`] within `RCUTE_TUNING_BUDGET` seconds, default 20, compilation
//! included), writes the winner to `RCUTE_TUNING_FILE` (or `tuning.json` in the kernel
//! cache's directory) and runs it; concurrent callers of one `Ops` tune a key once
//! ([`OpsTuning::choose`]). On-miss covers `gemm`, `scaled_mm` (INT8; FP8 on sm_90),
//! `awq_gemm` (its fused path) and `fused_moe`; it tunes the op's [`probe`] on buffers of
//! its own (random data of the problem's shape, the weight copied until the copies exceed
//! 150 MB), never the caller's, synchronizes the op's stream, and does nothing while that
//! stream captures a graph (the rules serve; the next call outside a capture tunes). A
//! probe that cannot be built (out of memory) leaves the key to the rules. `fused_moe` runs
//! a table's `moe:` entry on the caller's workspace: [`crate::moe::fused_moe_workspace_bytes`]
//! covers every configuration of [`crate::moe::moe_space`].
//!
//! ```
//! use rcute_ops::tuning::{kernel_fingerprint, ConfigSpec, Entry, ProblemKey, TableHeader, Tables, TuningTable};
//! let here = TableHeader { format: 2, device: "NVIDIA H200".into(), sms: 132, driver: 13000,
//!                          nvrtc: "13.0".into(), smem_optin: 232448 };
//! let key = ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 16, 4096, 4096);
//! let spec: ConfigSpec = "sm90:64x128x64,pp,k2".parse().unwrap();
//! let entry = |fingerprint: &str| Entry { key: key.clone(), config: spec.to_string(),
//!                                         fingerprint: Some(fingerprint.into()), us: 12.0,
//!                                         peer: None, peer_us: None };
//! let current = kernel_fingerprint(&key, &spec, here.smem_optin).unwrap();
//! let json = TuningTable { header: here.clone(), entries: vec![entry(&current)] }.to_json();
//! let tables = Tables::new([TuningTable::load_text(&json, "example", &here)]);
//! let near = ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 20, 4096, 4096);
//! assert_eq!(tables.lookup(&near), Some(&spec));
//! // measured with other kernels: ignored
//! let json = TuningTable { header: here.clone(), entries: vec![entry("0123456789abcdef")] }.to_json();
//! let tables = Tables::new([TuningTable::load_text(&json, "example", &here)]);
//! assert_eq!(tables.lookup(&near), None);
//! ```

use crate::env_choice::EnvChoice;

pub mod bucket;
mod budget;
mod fingerprint;
mod header;
mod key;
mod op_specs;
mod ops_tables;
pub mod probe;
mod probe_awq;
mod probe_gemm;
mod probe_moe;
mod probe_scaled_mm;
pub mod space;
mod space_awq_moe;
mod spec;
mod spec_text;
mod table;
pub mod timing;
mod tuned_kernel;
pub mod tuner;

pub use fingerprint::{kernel_fingerprint, tuned_kernels};
pub use header::{TableHeader, TABLE_FORMAT};
pub use key::{awq_key, moe_key, ProblemKey};
pub use op_specs::{AwqSpec, MoeSm90Spec, MoeSpec};
pub use ops_tables::{gemm_key, OpsTuning, ON_MISS_SECONDS, SHIPPED};
pub use probe_moe::{moe_entry_runs, moe_problem_key};
pub use spec::{ConfigSpec, Sm80Spec, Sm90Spec, SpecError};
pub use table::{Entry, EntryState, Loaded, LoadedEntry, Tables, TuningTable};
pub use tuned_kernel::TunedKernel;

/// Whether ops consult tuning tables: the setting of `RCUTE_TUNING` ([`EnvChoice`]),
/// `cached` (also unset or empty), `off` or `on-miss`; anything else is read as `cached`,
/// with the warning to print.
///
/// ```
/// use rcute_ops::env_choice::EnvChoice;
/// use rcute_ops::tuning::TuningMode;
/// assert_eq!(TuningMode::parse(Some("on-miss")), (TuningMode::OnMiss, None));
/// assert_eq!(TuningMode::parse(None), (TuningMode::Cached, None));
/// assert!(TuningMode::parse(Some("always")).1.is_some());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuningMode {
    /// Use the rules only.
    Off,
    /// Use table entries where they exist (the nearest M bucket), the rules elsewhere.
    Cached,
    /// Use the entry at a problem's own M bucket; without one, tune the problem on first
    /// use, record the winner and use it.
    OnMiss,
}

impl EnvChoice for TuningMode {
    const VAR: &'static str = "RCUTE_TUNING";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("cached", TuningMode::Cached),
        ("off", TuningMode::Off),
        ("on-miss", TuningMode::OnMiss),
    ];
}
