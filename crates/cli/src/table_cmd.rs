//! `rcute table FILE... [--restamp OP ...] [--check]`: which entries of tuning tables this
//! build applies, on the CPU (no GPU: an entry's fingerprint is a hash of the CUDA sources
//! this build generates for it, `rcute_ops::tuning::Entry::state`).
//!
//! Every entry is listed with its key, its configuration, its measured time and its state:
//! `applies`, `stale` (its kernels changed since it was measured: ops ignore it, and a lookup
//! whose nearest M bucket holds only stale entries leaves the problem to the rules), `no
//! fingerprint` or `bad config` (never applies). `--restamp OP` gives the stale entries of
//! `OP` (`gemm`, `scaled_mm`, `awq`, `moe`, or `all`) this build's fingerprint, for a change
//! that cannot alter their timing (a renamed or removed unused kernel parameter, a
//! comment): it says the old measurement still holds, so re-measure (`rcute tune ... --out
//! FILE`) whenever the kernels' work changed. `--check` fails (exit 1) if an entry is
//! stale, which is what the shipped tables' test asserts.

use std::fmt::Write as _;
use std::path::PathBuf;

use rcute_ops::tuning::{EntryState, TuningTable};

/// `rcute table` arguments.
#[derive(clap::Args, Debug)]
pub struct TableArgs {
    /// Tuning tables (JSON, e.g. `crates/ops/tuning/h100.json`).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Give the stale entries of this op (`gemm`, `scaled_mm`, `awq`, `moe`, `all`) this
    /// build's fingerprint, in place (repeatable); only for a change that cannot alter their
    /// timing.
    #[arg(long = "restamp")]
    pub restamp: Vec<String>,
    /// Exit 1 if any entry is stale (after `--restamp`).
    #[arg(long)]
    pub check: bool,
}

/// How `rcute table` prints a state.
fn label(state: EntryState) -> &'static str {
    match state {
        EntryState::Applies => "applies",
        EntryState::Stale => "stale",
        EntryState::NoFingerprint => "no fingerprint",
        EntryState::BadConfig => "bad config",
    }
}

/// Re-stamp `t`'s stale entries of the ops in `ops` (`all`: every op); returns how many.
pub fn restamp(t: &mut TuningTable, ops: &[String]) -> usize {
    let smem = t.header.smem_optin;
    let mut n = 0;
    for e in t.entries.iter_mut() {
        if !ops.iter().any(|op| op == "all" || *op == e.key.op) {
            continue;
        }
        if let (EntryState::Stale, Some(now)) = e.state(smem) {
            e.fingerprint = Some(now);
            n += 1;
        }
    }
    n
}

/// Run `rcute table`: the listing, and whether it passes `--check`.
pub fn run(args: &TableArgs) -> Result<(String, bool), String> {
    let mut out = String::new();
    let mut not_applying = 0;
    for path in &args.files {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut t =
            TuningTable::from_json(&text).map_err(|e| format!("{}: not a tuning table: {e}", path.display()))?;
        if !args.restamp.is_empty() {
            let n = restamp(&mut t, &args.restamp);
            if n > 0 {
                std::fs::write(path, t.to_json()).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            let _ = writeln!(out, "{}: {n} stale entries re-stamped", path.display());
        }
        let _ = writeln!(
            out,
            "{} ({}, {} entries)",
            path.display(),
            t.header.device,
            t.entries.len()
        );
        for e in &t.entries {
            let (state, _) = e.state(t.header.smem_optin);
            not_applying += usize::from(state != EntryState::Applies);
            let k = &e.key;
            let _ = writeln!(
                out,
                "  {:<14} {} {} {} {} m={} n={} k={}  {}  {:.1} us",
                label(state),
                k.op,
                k.dtypes,
                k.fusion,
                k.arch,
                k.m,
                k.n,
                k.k,
                e.config,
                e.us
            );
        }
    }
    let _ = writeln!(out, "{not_applying} entries do not apply to this build");
    Ok((out, !args.check || not_applying == 0))
}
