//! A persisted tuning table: a header, and measured entries.
//!
//! The file is JSON, readable and diffable:
//!
//! ```json
//! { "header": { "device": "NVIDIA H200", "sms": 132, "driver": 13000, "nvrtc": "13.0",
//!               "generators": { "sm80": "91c0...", "sm90": "3f2a...", "awq": "...", "moe": "..." } },
//!   "entries": [ { "key": { "op": "gemm", "dtypes": "bf16", "fusion": "lincomb",
//!                           "arch": "sm_90a", "m": 16, "n": 4096, "k": 4096 },
//!                  "config": "sm90:64x128x64,pp,k2", "us": 12.1,
//!                  "peer": "cublas", "peer_us": 13.4 } ] }
//! ```
//!
//! Reading never fails the caller: a missing file is an empty table; a file that does not
//! parse (truncated, corrupted) or whose header names another device, driver or NVRTC is
//! reported in one line and ignored whole; entries chosen among kernel families whose
//! generator changed since they were measured ([`super::Family::candidates`]) are
//! ignored, reported in one line per op and changed family, and an entry naming a
//! configuration this build cannot read in one line of its own. Writing takes an
//! exclusive lock on `FILE.lock`, merges with what is on disk, writes a temporary file in the same
//! directory and renames it over `FILE`, so readers see the old or the new table, never a
//! torn one, and concurrent writers lose no entries.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::bucket::nearest_within_reach;
use super::header::{Family, TableHeader};
use super::key::ProblemKey;
use super::spec::ConfigSpec;

/// One measured choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// What it applies to.
    pub key: ProblemKey,
    /// The chosen configuration ([`ConfigSpec`]'s text form).
    pub config: String,
    /// Its median time, microseconds.
    pub us: f64,
    /// The peer timed in the same run (`cublas`, `cublaslt`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The peer's median time, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_us: Option<f64>,
}

/// A tuning table as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuningTable {
    /// Where the measurements were made.
    pub header: TableHeader,
    /// The measured choices (one per key).
    pub entries: Vec<Entry>,
}

/// A table read for use: the entries that apply here, parsed, and what was ignored.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// Usable entries with their parsed configurations.
    pub entries: Vec<(ProblemKey, ConfigSpec)>,
    /// One line per thing ignored (the whole file, or one entry), naming the file.
    pub warnings: Vec<String>,
}

impl TuningTable {
    /// Parse a table from JSON text.
    pub fn from_json(text: &str) -> Result<TuningTable, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The table as pretty JSON (entries sorted by key, so files diff well).
    pub fn to_json(&self) -> String {
        let mut t = self.clone();
        t.entries.sort_by(|a, b| sort_key(&a.key).cmp(&sort_key(&b.key)));
        serde_json::to_string_pretty(&t).expect("a tuning table always serializes") + "\n"
    }

    /// The entries of `text` (a table named `origin` in warnings) that apply on `here`.
    pub fn load_text(text: &str, origin: &str, here: &TableHeader) -> Loaded {
        let mut out = Loaded::default();
        let table = match TuningTable::from_json(text) {
            Ok(t) => t,
            Err(e) => {
                out.warnings
                    .push(format!("tuning table {origin} ignored: not a valid table ({e})"));
                return out;
            }
        };
        if let Some(why) = table.header.mismatch(here) {
            out.warnings.push(format!("tuning table {origin} ignored: {why}"));
            return out;
        }
        let mut stale: std::collections::BTreeMap<(String, String), usize> = Default::default();
        for e in table.entries {
            match e.config.parse::<ConfigSpec>() {
                Ok(spec) if !spec.fits_op(&e.key.op) => out.warnings.push(format!(
                    "tuning table {origin}: entry ignored: {} is not a configuration of op {:?}",
                    e.config, e.key.op
                )),
                Ok(_) if let Some(why) = table.header.stale(here, Family::candidates(&e.key.op, &e.key.arch)) => {
                    *stale.entry((e.key.op.clone(), why)).or_default() += 1
                }
                Ok(spec) => out.entries.push((e.key, spec)),
                Err(err) => out
                    .warnings
                    .push(format!("tuning table {origin}: entry ignored: {err}")),
            }
        }
        for ((op, why), n) in stale {
            out.warnings
                .push(format!("tuning table {origin}: {n} {op} entries ignored: {why}"));
        }
        out
    }

    /// [`TuningTable::load_text`] of the file at `path`; a missing file is an empty table.
    pub fn load(path: &Path, here: &TableHeader) -> Loaded {
        match fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => TuningTable::load_text(&text, &path.display().to_string(), here),
                Err(_) => Loaded {
                    entries: Vec::new(),
                    warnings: vec![format!("tuning table {} ignored: not UTF-8", path.display())],
                },
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Loaded::default(),
            Err(e) => Loaded {
                entries: Vec::new(),
                warnings: vec![format!("tuning table {} ignored: {e}", path.display())],
            },
        }
    }

    /// Add `entries` to the table at `path` (made with `header`) under an exclusive lock:
    /// entries on disk measured on the same device, driver and NVRTC with their family's
    /// current generator are kept unless `entries` has their key (stale ones are dropped,
    /// and the file takes `header`); a file for another device, driver or NVRTC, or one
    /// that does not parse, is replaced. The new file is written beside `path` and renamed
    /// over it.
    pub fn merge_into_file(path: &Path, header: &TableHeader, entries: &[Entry]) -> io::Result<()> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path(path))?;
        lock.lock()?;
        let mut table = match fs::read_to_string(path)
            .ok()
            .and_then(|t| TuningTable::from_json(&t).ok())
        {
            Some(t) if t.header.mismatch(header).is_none() => t,
            _ => TuningTable {
                header: header.clone(),
                entries: Vec::new(),
            },
        };
        let measured_with = table.header.clone();
        let current = |e: &Entry| {
            let families = Family::candidates(&e.key.op, &e.key.arch);
            e.config.parse::<ConfigSpec>().is_ok() && measured_with.stale(header, families).is_none()
        };
        table
            .entries
            .retain(|old| current(old) && entries.iter().all(|new| new.key != old.key));
        table.header = header.clone();
        table.entries.extend_from_slice(entries);
        let result = write_atomically(path, table.to_json().as_bytes());
        lock.unlock()?;
        result
    }
}

fn sort_key(k: &ProblemKey) -> (&str, &str, &str, &str, usize, usize, usize) {
    (&k.op, &k.dtypes, &k.fusion, &k.arch, k.n, k.k, k.m)
}

fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Write `bytes` to a unique temporary file in `path`'s directory, flush it to disk, and
/// rename it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// The usable entries of every table an `Ops` reads, for lookups.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    entries: Vec<(ProblemKey, ConfigSpec)>,
}

impl Tables {
    /// Tables read in order of precedence: an entry of an earlier table wins over a later
    /// one with the same key.
    pub fn new(loaded: impl IntoIterator<Item = Loaded>) -> Tables {
        let mut entries: Vec<(ProblemKey, ConfigSpec)> = Vec::new();
        for l in loaded {
            for (k, s) in l.entries {
                if entries.iter().all(|(have, _)| *have != k) {
                    entries.push((k, s));
                }
            }
        }
        Tables { entries }
    }

    /// Number of usable entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The configuration measured for exactly `key` (its own M bucket), if any.
    pub fn exact(&self, key: &ProblemKey) -> Option<&ConfigSpec> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, s)| s)
    }

    /// The configuration measured for `key`'s problem at the nearest M bucket (same op,
    /// types, fusion, arch, N and K), if one lies within a factor of two of `key.m`
    /// ([`super::bucket::REACH`]).
    pub fn lookup(&self, key: &ProblemKey) -> Option<&ConfigSpec> {
        let same: Vec<&(ProblemKey, ConfigSpec)> = self.entries.iter().filter(|(k, _)| k.same_but_m(key)).collect();
        let ms: Vec<usize> = same.iter().map(|(k, _)| k.m).collect();
        let m = nearest_within_reach(key.m, &ms)?;
        same.into_iter().find(|(k, _)| k.m == m).map(|(_, s)| s)
    }
}
