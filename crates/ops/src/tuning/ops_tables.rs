//! The tuning tables an [`Ops`](crate::Ops) handle consults, the keys of its ops, and the
//! choices `RCUTE_TUNING=on-miss` measured while it ran.

use std::path::{Path, PathBuf};

use rcute_kernel::Gpu;

use super::bucket::m_bucket;
use super::budget::TuneBudget;
use super::{ConfigSpec, Entry, ProblemKey, TableHeader, Tables, TuningMode, TuningTable};
use crate::gemm::GemmProblem;
use crate::memo::Memo;
use crate::tensor::{DType, Major};

/// The tables shipped with this crate: `(name, JSON)`, measured with `rcute tune` (see
/// `crates/ops/tuning/README.md`). Each applies only where its header matches.
pub const SHIPPED: &[(&str, &str)] = &[
    ("crates/ops/tuning/h200.json", include_str!("../../tuning/h200.json")),
    ("crates/ops/tuning/h100.json", include_str!("../../tuning/h100.json")),
];

/// Seconds one on-miss tuning may take by default, compilation included
/// (`RCUTE_TUNING_BUDGET` overrides).
pub const ON_MISS_SECONDS: f64 = 20.0;

/// What one `Ops` handle reads: `RCUTE_TUNING_FILE` first, then the shipped tables, unless
/// `RCUTE_TUNING=off`; with `on-miss`, also what it tuned itself. Warnings (tables or
/// entries ignored) go to stderr, one line each, once per handle.
pub struct OpsTuning {
    tables: Tables,
    mode: TuningMode,
    /// This process's header (`None`: unknown driver or NVRTC; nothing is tuned then).
    here: Option<TableHeader>,
    /// Where on-miss winners are written.
    file: Option<PathBuf>,
    /// On-miss choices by exact key (`None`: tuning found nothing usable).
    tuned: Memo<ProblemKey, Option<ConfigSpec>>,
    budget: TuneBudget,
}

impl Default for OpsTuning {
    fn default() -> Self {
        OpsTuning::new(TuningMode::Off, Tables::default(), None, None)
    }
}

impl std::fmt::Debug for OpsTuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpsTuning")
            .field("mode", &self.mode)
            .field("entries", &self.tables.len())
            .field("file", &self.file)
            .field("tunings", &self.tuned.builds())
            .finish()
    }
}

/// The on-miss table when `RCUTE_TUNING_FILE` is not set: `tuning.json` in the kernel
/// cache's directory, if it has one.
fn default_on_miss_file() -> Option<PathBuf> {
    rcute_kernel::KernelCache::global().dir().map(|d| d.join("tuning.json"))
}

/// `RCUTE_TUNING_BUDGET` seconds, if set to a positive number.
fn budget_from_env() -> TuneBudget {
    let seconds = std::env::var("RCUTE_TUNING_BUDGET")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(ON_MISS_SECONDS);
    // No CUDA graphs: other threads of the application may launch on the op's stream
    // while it tunes, and a capture would take their work in.
    TuneBudget {
        seconds,
        include_compile: true,
        iters: 7,
        graphs: false,
    }
}

impl OpsTuning {
    /// Tables read already, in `mode`: `here` is this process's header and `file` where
    /// on-miss winners go (with either missing, a miss is not tuned).
    pub fn new(mode: TuningMode, tables: Tables, here: Option<TableHeader>, file: Option<PathBuf>) -> OpsTuning {
        OpsTuning {
            tables,
            mode,
            here,
            file,
            tuned: Memo::new(),
            budget: budget_from_env(),
        }
    }

    /// Read the tables that apply to `gpu`.
    pub fn load(gpu: &Gpu) -> OpsTuning {
        let (mode, warning) = <TuningMode as crate::env_choice::EnvChoice>::read_env();
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
        let named = std::env::var_os("RCUTE_TUNING_FILE").map(PathBuf::from);
        let file = match (&named, mode) {
            (Some(p), _) => Some(p.clone()),
            (None, TuningMode::OnMiss) => default_on_miss_file(),
            (None, _) => None,
        };
        let mut loaded = Vec::new();
        if let Some(path) = &file {
            loaded.push(TuningTable::load(path, &here));
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
        OpsTuning::new(mode, Tables::new(loaded), Some(here), file)
    }

    /// The tables' usable entries.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// `RCUTE_TUNING` as this handle read it.
    pub fn mode(&self) -> TuningMode {
        self.mode
    }

    /// The table on-miss winners are written to, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// How many times this handle tuned a key on a miss (or tried to: a try that could not
    /// run counts too); each key once, however many threads missed it at the same time.
    pub fn tunings(&self) -> usize {
        self.tuned.builds()
    }

    /// The budget of one on-miss tuning.
    pub fn budget(&self) -> &TuneBudget {
        &self.budget
    }

    /// Whether a lookup can answer anything (else ops skip building keys).
    pub fn active(&self) -> bool {
        match self.mode {
            TuningMode::Off => false,
            TuningMode::Cached => !self.tables.is_empty(),
            TuningMode::OnMiss => true,
        }
    }

    /// The measured choice for a GEMM problem, if a table (or an on-miss tuning of this
    /// handle) has one: only for the layout and epilogue the tuner measures ([`gemm_key`]).
    pub fn gemm(&self, p: &GemmProblem<'_>, arch: &str) -> Option<ConfigSpec> {
        self.lookup(&gemm_key(p, arch)?)
    }

    /// The usable entry at `key` itself (its own M bucket, no reach to a neighbouring one),
    /// if any; a choice this handle tuned for exactly `key` comes first. Never tunes; `None`
    /// with tuning off.
    pub fn exact(&self, key: &ProblemKey) -> Option<ConfigSpec> {
        self.tuned_or(key, |tables| tables.exact(key))
    }

    /// The usable entry nearest to `key` (same op, types, fusion, arch, N and K; the
    /// nearest M bucket), if any; a choice this handle tuned for exactly `key` comes first.
    /// Never tunes.
    pub fn lookup(&self, key: &ProblemKey) -> Option<ConfigSpec> {
        self.tuned_or(key, |tables| tables.lookup(key))
    }

    /// `None` with tuning off; else a choice this handle tuned for exactly `key`, else
    /// what `from_tables` finds in the loaded tables.
    fn tuned_or<'t>(
        &'t self,
        key: &ProblemKey,
        from_tables: impl FnOnce(&'t Tables) -> Option<&'t ConfigSpec>,
    ) -> Option<ConfigSpec> {
        if self.mode == TuningMode::Off {
            return None;
        }
        if let Some(Some(spec)) = self.tuned.get(key) {
            return Some(spec);
        }
        from_tables(&self.tables).cloned()
    }

    /// The choice for `key` under this handle's mode: `off`, none; `cached`, the nearest
    /// entry ([`OpsTuning::lookup`]); `on-miss`, the entry at `key`'s own M bucket, else
    /// what `tune` measures, run once per key however many threads miss at once (the
    /// others wait for it), its winner merged into [`OpsTuning::file`]. `tune` returning
    /// `Err` (e.g. the stream captures a graph) means "not now": the next miss tries again.
    pub fn choose(&self, key: &ProblemKey, tune: impl FnOnce() -> Result<Option<Entry>, String>) -> Option<ConfigSpec> {
        match self.mode {
            TuningMode::Off => None,
            TuningMode::Cached => self.lookup(key),
            TuningMode::OnMiss => {
                if let Some(spec) = self.tables.exact(key) {
                    return Some(spec.clone());
                }
                let (Some(here), Some(file)) = (&self.here, &self.file) else {
                    return self.lookup(key);
                };
                let tuned = self.tuned.get_or_try_build(key, || {
                    let Some(entry) = tune()? else {
                        eprintln!("rcute: tuning {key:?} found no usable configuration: using the rules");
                        return Ok(None);
                    };
                    if let Err(e) = TuningTable::merge_into_file(file, here, std::slice::from_ref(&entry)) {
                        eprintln!("rcute: tuning table {} not written: {e}", file.display());
                    }
                    Ok::<_, String>(entry.config.parse::<ConfigSpec>().ok())
                });
                tuned.ok().flatten()
            }
        }
    }
}

/// The table key of a GEMM problem the tuner measures (one batch, row-major A,
/// column-major B, row-major D, no C, bf16 or f16), or `None` for other problems.
pub fn gemm_key(p: &GemmProblem<'_>, arch: &str) -> Option<ProblemKey> {
    let tn =
        p.a().major() == Some(Major::Row) && p.b().major() == Some(Major::Col) && p.d().major() == Some(Major::Row);
    if !tn || p.l() != 1 || p.c().is_some() {
        return None;
    }
    let dtype = match p.a().dtype {
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        _ => return None,
    };
    Some(ProblemKey {
        op: "gemm".into(),
        dtypes: dtype.into(),
        fusion: "lincomb".into(),
        arch: arch.into(),
        m: m_bucket(p.m()),
        n: p.n(),
        k: p.k(),
    })
}
