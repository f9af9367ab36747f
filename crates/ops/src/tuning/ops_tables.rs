//! The tuning tables an [`Ops`](crate::Ops) handle consults, and the keys of its ops.

use rcute_kernel::Gpu;

use super::bucket::m_bucket;
use super::{ConfigSpec, ProblemKey, TableHeader, Tables, TuningMode, TuningTable};
use crate::gemm::GemmProblem;
use crate::tensor::{DType, Major};

/// The tables shipped with this crate: `(name, JSON)`, measured with `rcute tune` (see
/// `crates/ops/tuning/README.md`). Each applies only where its header matches.
pub const SHIPPED: &[(&str, &str)] = &[
    ("crates/ops/tuning/h200.json", include_str!("../../tuning/h200.json")),
    ("crates/ops/tuning/h100.json", include_str!("../../tuning/h100.json")),
];

/// What one `Ops` handle reads: `RCUTE_TUNING_FILE` first, then the shipped tables, unless
/// `RCUTE_TUNING=off`. Warnings (tables or entries ignored) go to stderr, one line each,
/// once per handle.
#[derive(Debug, Default)]
pub struct OpsTuning {
    tables: Tables,
}

impl OpsTuning {
    /// Read the tables that apply to `gpu`.
    pub fn load(gpu: &Gpu) -> OpsTuning {
        let (mode, warning) = TuningMode::from_env();
        if let Some(w) = warning {
            eprintln!("rcute: {w}");
        }
        if mode == TuningMode::Off {
            return OpsTuning::default();
        }
        let Some(here) = TableHeader::of(gpu) else {
            eprintln!("rcute: tuning tables ignored: the driver or NVRTC version is unknown");
            return OpsTuning::default();
        };
        let mut loaded = Vec::new();
        if let Some(path) = std::env::var_os("RCUTE_TUNING_FILE") {
            loaded.push(TuningTable::load(std::path::Path::new(&path), &here));
        }
        for (name, text) in SHIPPED {
            // A shipped table for another device (or one not measured yet) is expected,
            // not worth a warning.
            let table = TuningTable::from_json(text);
            let other =
                |t: &TuningTable| t.entries.is_empty() || t.header.device != here.device || t.header.sms != here.sms;
            if table.as_ref().is_ok_and(other) {
                continue;
            }
            loaded.push(TuningTable::load_text(text, name, &here));
        }
        for l in &loaded {
            for w in &l.warnings {
                eprintln!("rcute: {w}");
            }
        }
        OpsTuning {
            tables: Tables::new(loaded),
        }
    }

    /// The tables' usable entries.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The measured choice for a GEMM problem, if a table has one: only for the layout
    /// and epilogue the tuner measures (one batch, row-major A, column-major B, row-major
    /// D, no C).
    pub fn gemm(&self, p: &GemmProblem<'_>, arch: &str) -> Option<&ConfigSpec> {
        let tn =
            p.a().major() == Some(Major::Row) && p.b().major() == Some(Major::Col) && p.d().major() == Some(Major::Row);
        if self.tables.is_empty() || !tn || p.l() != 1 || p.c().is_some() {
            return None;
        }
        let dtype = match p.a().dtype {
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            _ => return None,
        };
        let key = ProblemKey {
            op: "gemm".into(),
            dtypes: dtype.into(),
            fusion: "lincomb".into(),
            arch: arch.into(),
            m: m_bucket(p.m()),
            n: p.n(),
            k: p.k(),
        };
        self.tables.lookup(&key)
    }

    /// The usable entry nearest to `key` (same op, types, fusion, arch, N and K; the
    /// nearest M bucket), if any.
    pub fn lookup(&self, key: &ProblemKey) -> Option<&ConfigSpec> {
        self.tables.lookup(key)
    }
}
