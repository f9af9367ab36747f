//! The tuning tables an [`Ops`](crate::Ops) handle consults, and the keys of its ops.

use rcute_kernel::Gpu;

use super::bucket::m_bucket;
use super::{ConfigSpec, ProblemKey, TableHeader, Tables, TuningMode, TuningTable};
use crate::gemm::GemmProblem;
use crate::scaled_mm::ScaledMmProblem;
use crate::tensor::{DType, Major};
use rcute_kernel::gemm_sm80::ScaleKind;

/// The tables shipped with this crate: `(name, JSON)`, measured with `rcute tune` (see
/// `crates/ops/tuning/README.md`). Each applies only where its header matches.
pub const SHIPPED: &[(&str, &str)] = &[("crates/ops/tuning/h200.json", include_str!("../../tuning/h200.json"))];

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

    /// The measured choice for a `scaled_mm` problem, if a table has one (one batch only;
    /// the key names the operand and output types and the scales and bias, see
    /// [`scaled_mm_key`]).
    pub fn scaled_mm(&self, p: &ScaledMmProblem<'_>, arch: &str) -> Option<&ConfigSpec> {
        if self.tables.is_empty() || p.l() != 1 {
            return None;
        }
        self.tables.lookup(&scaled_mm_key(p, arch))
    }
}

/// The tuning key of a `scaled_mm` problem: op `scaled_mm`, types `A:OUT` (e.g. `s8:bf16`),
/// fusion `A_SCALE-B_SCALE[+bias]` with scales `tensor`, `token` or `channel`, and the
/// problem's M bucket, N and K.
///
/// ```
/// # use rcute_ops::tuning::ProblemKey;
/// // The key `rcute tune scaled-mm` writes for 16x4096x4096 with per-token and per-channel
/// // scales, a bias and bf16 output on the H200:
/// let k = ProblemKey::new("scaled_mm", "s8:bf16", "token-channel+bias", "sm_90a", 16, 4096, 4096);
/// assert_eq!(k.m, 16);
/// ```
pub fn scaled_mm_key(p: &ScaledMmProblem<'_>, arch: &str) -> ProblemKey {
    let kind = |s: ScaleKind| match s {
        ScaleKind::Scalar => "tensor",
        ScaleKind::PerRow => "token",
        ScaleKind::PerCol => "channel",
    };
    let fusion = format!(
        "{}-{}{}",
        kind(p.a_scale_kind()),
        kind(p.b_scale_kind()),
        if p.bias().is_some() { "+bias" } else { "" }
    );
    let dtypes = format!("{}:{}", p.a().dtype.name(), p.out().dtype.name());
    ProblemKey::new("scaled_mm", &dtypes, &fusion, arch, p.m(), p.n(), p.k())
}
