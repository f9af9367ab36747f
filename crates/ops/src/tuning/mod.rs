//! Tuning tables: measured kernel choices, persisted with their provenance.
//!
//! Kernel selection ([`crate::select`]) follows fixed rules. A tuning table overrides
//! them per problem with a configuration measured on the same device, driver, NVRTC and
//! generator ([`TableHeader`]); entries are keyed by op, element types, fusion, arch, N,
//! K and an M bucket ([`ProblemKey`], [`bucket`]), and a lookup takes the nearest M
//! bucket. A table that does not apply is ignored with a one-line warning, never used
//! ([`TuningTable::load`]).
//!
//! Environment: `RCUTE_TUNING_FILE` names a table to read (before any shipped one);
//! `RCUTE_TUNING=off` ignores every table, `cached` (the default) uses them.
//!
//! ```
//! use rcute_ops::tuning::{ConfigSpec, ProblemKey, Tables, TableHeader, TuningTable};
//! let here = TableHeader { device: "NVIDIA H200".into(), sms: 132, driver: 13000,
//!                          nvrtc: "13.0".into(), generator: "abc".into() };
//! let json = r#"{ "header": { "device": "NVIDIA H200", "sms": 132, "driver": 13000,
//!                             "nvrtc": "13.0", "generator": "abc" },
//!                 "entries": [ { "key": { "op": "gemm", "dtypes": "bf16", "fusion": "lincomb",
//!                                         "arch": "sm_90a", "m": 16, "n": 4096, "k": 4096 },
//!                                "config": "sm90:64x128x64,pp,k2", "us": 12.0 } ] }"#;
//! let tables = Tables::new([TuningTable::load_text(json, "example", &here)]);
//! let key = ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 20, 4096, 4096);
//! let spec: ConfigSpec = "sm90:64x128x64,pp,k2".parse().unwrap();
//! assert_eq!(tables.lookup(&key), Some(&spec));
//! ```

pub mod bucket;
mod header;
mod key;
mod ops_tables;
pub mod space;
mod spec;
mod table;

pub use header::{generator_hash, TableHeader};
pub use key::ProblemKey;
pub use ops_tables::{OpsTuning, SHIPPED};
pub use spec::{ConfigSpec, Sm80Spec, Sm90Spec, SpecError};
pub use table::{Entry, Loaded, Tables, TuningTable};

/// Whether ops consult tuning tables (`RCUTE_TUNING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuningMode {
    /// Use the rules only.
    Off,
    /// Use table entries where they exist, the rules elsewhere.
    Cached,
}

impl TuningMode {
    /// `RCUTE_TUNING`: `off` or `cached` (default); any other value is reported in the
    /// returned warning and read as `cached`.
    pub fn from_env() -> (TuningMode, Option<String>) {
        match std::env::var("RCUTE_TUNING").as_deref() {
            Err(_) | Ok("") | Ok("cached") => (TuningMode::Cached, None),
            Ok("off") => (TuningMode::Off, None),
            Ok(other) => (
                TuningMode::Cached,
                Some(format!("RCUTE_TUNING={other:?} is not off or cached: using cached")),
            ),
        }
    }
}
