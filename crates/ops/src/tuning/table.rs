//! A persisted tuning table: a header, and measured entries.
//!
//! The file is JSON, readable and diffable (format 2, [`super::TABLE_FORMAT`]):
//!
//! ```json
//! { "header": { "format": 2, "device": "NVIDIA H200", "sms": 132, "driver": 13000,
//!               "nvrtc": "13.0", "smem_optin": 232448 },
//!   "entries": [ { "key": { "op": "gemm", "dtypes": "bf16", "fusion": "lincomb",
//!                           "arch": "sm_90a", "m": 16, "n": 4096, "k": 4096 },
//!                  "config": "sm90:64x128x64,pp,k2", "fingerprint": "3f2a...",
//!                  "us": 12.1, "peer": "cublas", "peer_us": 13.4 } ] }
//! ```
//!
//! Reading never fails the caller: a missing file is an empty table; a file that does not
//! parse (truncated, corrupted), of another format, or whose header names another device,
//! driver or NVRTC is reported in one line and ignored whole; an entry naming a
//! configuration this build cannot read is reported in a line of its own; entries without
//! a fingerprint never apply (one line per op). An entry applies while this build
//! generates the kernels its fingerprint names ([`super::kernel_fingerprint`], computed
//! at lookup for the entry that matched, once); the first lookup that meets a stale entry
//! reports, in one line per table and op, how many of that op's entries are stale. Writing
//! takes an exclusive lock on `FILE.lock`, merges with what is on disk, writes a temporary
//! file in the same directory and renames it over `FILE`, so readers see the old or the new
//! table, never a torn one, and concurrent writers lose no entries.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use super::bucket::nearest_within_reach;
use super::header::TableHeader;
use super::key::ProblemKey;
use super::spec::ConfigSpec;

/// One measured choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// What it applies to.
    pub key: ProblemKey,
    /// The chosen configuration ([`ConfigSpec`]'s text form).
    pub config: String,
    /// [`super::kernel_fingerprint`] of the configuration and key with the generators that
    /// measured it (stamped by [`TuningTable::merge_into_file`]); `None`: never applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Its median time, microseconds.
    pub us: f64,
    /// The peer timed in the same run (`cublas`, `cublaslt`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The peer's median time, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_us: Option<f64>,
}

/// What an [`Entry`] is to this build ([`Entry::state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// Its fingerprint is this build's: ops apply it.
    Applies,
    /// Its kernels changed since it was measured (another fingerprint): ops ignore it.
    Stale,
    /// It has no fingerprint: ops ignore it.
    NoFingerprint,
    /// Its configuration does not parse, or its kernels cannot be generated.
    BadConfig,
}

impl Entry {
    /// The entry's state for this build on a device with `smem_optin` bytes of opt-in
    /// shared memory per block (its table header's), and this build's fingerprint of it
    /// ([`super::kernel_fingerprint`]) where its configuration parses and its kernels
    /// generate.
    ///
    /// ```
    /// use rcute_ops::tuning::{Entry, EntryState, ProblemKey};
    /// let e = Entry { key: ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 16, 4096, 4096),
    ///                 config: "sm90:64x128x64,pp,k2".into(), fingerprint: None, us: 12.0,
    ///                 peer: None, peer_us: None };
    /// let (state, now) = e.state(232448);
    /// assert_eq!(state, EntryState::NoFingerprint);
    /// let e = Entry { fingerprint: now, ..e };
    /// assert_eq!(e.state(232448).0, EntryState::Applies);
    /// let e = Entry { fingerprint: Some("0123456789abcdef".into()), ..e };
    /// assert_eq!(e.state(232448).0, EntryState::Stale);
    /// let e = Entry { config: "no such configuration".into(), ..e };
    /// assert_eq!(e.state(232448), (EntryState::BadConfig, None));
    /// ```
    pub fn state(&self, smem_optin: u32) -> (EntryState, Option<String>) {
        let Ok(spec) = self.config.parse::<ConfigSpec>() else {
            return (EntryState::BadConfig, None);
        };
        let Ok(now) = super::kernel_fingerprint(&self.key, &spec, smem_optin) else {
            return (EntryState::BadConfig, None);
        };
        let state = match &self.fingerprint {
            None => EntryState::NoFingerprint,
            Some(f) if *f == now => EntryState::Applies,
            Some(_) => EntryState::Stale,
        };
        (state, Some(now))
    }
}

/// A tuning table as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuningTable {
    /// Where the measurements were made.
    pub header: TableHeader,
    /// The measured choices (one per key).
    pub entries: Vec<Entry>,
}

/// An entry read for use: its key and parsed configuration, and the fingerprint it was
/// measured with, which a lookup checks against this build's ([`LoadedEntry::applies`]).
#[derive(Clone, Debug)]
pub struct LoadedEntry {
    /// What it applies to.
    pub key: ProblemKey,
    /// The measured choice.
    pub spec: ConfigSpec,
    /// The fingerprint of the kernels measured.
    pub fingerprint: String,
    /// The table it came from, for warnings.
    origin: Arc<str>,
    /// The device's opt-in shared memory per block (the table's, which is this process's).
    smem_optin: u32,
    /// Whether this build's kernels have its fingerprint, once computed.
    applies: OnceLock<bool>,
}

impl LoadedEntry {
    /// Whether this build generates the kernels the entry was measured with: its
    /// fingerprint equals [`super::kernel_fingerprint`] of its configuration and key now
    /// (computed on the first call).
    pub fn applies(&self) -> bool {
        *self.applies.get_or_init(|| {
            super::kernel_fingerprint(&self.key, &self.spec, self.smem_optin).as_deref() == Ok(&*self.fingerprint)
        })
    }
}

/// A table read for use: the entries that may apply here, parsed, and what was ignored.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// Entries with their parsed configurations and fingerprints.
    pub entries: Vec<LoadedEntry>,
    /// One line per thing ignored (the whole file, one entry, or an op's entries without a
    /// fingerprint), naming the file.
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
        let origin: Arc<str> = origin.into();
        let mut unstamped: BTreeMap<String, usize> = BTreeMap::new();
        for e in table.entries {
            match e.config.parse::<ConfigSpec>() {
                Ok(spec) if !spec.fits_op(&e.key.op) => out.warnings.push(format!(
                    "tuning table {origin}: entry ignored: {} is not a configuration of op {:?}",
                    e.config, e.key.op
                )),
                Ok(spec) => match e.fingerprint {
                    Some(fingerprint) => out.entries.push(LoadedEntry {
                        key: e.key,
                        spec,
                        fingerprint,
                        origin: origin.clone(),
                        smem_optin: table.header.smem_optin,
                        applies: OnceLock::new(),
                    }),
                    None => *unstamped.entry(e.key.op).or_default() += 1,
                },
                Err(err) => out
                    .warnings
                    .push(format!("tuning table {origin}: entry ignored: {err}")),
            }
        }
        for (op, n) in unstamped {
            out.warnings.push(format!(
                "tuning table {origin}: {n} {op} entries ignored: no kernel fingerprint (measured with kernels that changed since): re-measure them with rcute tune"
            ));
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

    /// Add `entries` to the table at `path` (made with `header`) under an exclusive lock,
    /// each stamped with the fingerprint of the kernels this build generates for it
    /// ([`super::kernel_fingerprint`] on `header`'s device): entries on disk measured on the
    /// same device, driver and NVRTC are kept unless `entries` has their key or their
    /// configuration does not parse (stale ones too: they never apply, and a measurement
    /// of their key replaces them); a file of another format, device, driver or NVRTC, or
    /// one that does not parse, is replaced. The new file is written beside `path` and
    /// renamed over it.
    pub fn merge_into_file(path: &Path, header: &TableHeader, entries: &[Entry]) -> io::Result<()> {
        let stamped: Vec<Entry> = entries
            .iter()
            .map(|e| Entry {
                fingerprint: e
                    .config
                    .parse::<ConfigSpec>()
                    .ok()
                    .and_then(|spec| super::kernel_fingerprint(&e.key, &spec, header.smem_optin).ok()),
                ..e.clone()
            })
            .collect();
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
        table
            .entries
            .retain(|old| old.config.parse::<ConfigSpec>().is_ok() && stamped.iter().all(|new| new.key != old.key));
        table.header = header.clone();
        table.entries.extend(stamped);
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

/// The entries of every table an `Ops` reads, for lookups: an entry answers only where it
/// applies ([`LoadedEntry::applies`], checked for the entries a lookup meets).
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// In order of precedence.
    entries: Vec<LoadedEntry>,
    /// Per table and op, the warning about its stale entries, once one was met.
    stale: BTreeMap<(Arc<str>, String), OnceLock<String>>,
}

impl Tables {
    /// Tables read in order of precedence: an applying entry of an earlier table wins over
    /// one of a later table with the same key.
    pub fn new(loaded: impl IntoIterator<Item = Loaded>) -> Tables {
        let entries: Vec<LoadedEntry> = loaded.into_iter().flat_map(|l| l.entries).collect();
        let stale = entries
            .iter()
            .map(|e| ((e.origin.clone(), e.key.op.clone()), OnceLock::new()))
            .collect();
        Tables { entries, stale }
    }

    /// Number of keys with an entry (whether it applies is known once a lookup meets it).
    pub fn len(&self) -> usize {
        let mut keys: Vec<&ProblemKey> = self.entries.iter().map(|e| &e.key).collect();
        keys.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        keys.dedup();
        keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first entry (in precedence order) `pick` selects that applies; a stale one met on
    /// the way is reported once per table and op ([`Tables::warnings`]).
    fn first_applying(&self, pick: impl Fn(&ProblemKey) -> bool) -> Option<&ConfigSpec> {
        self.entries.iter().filter(|e| pick(&e.key)).find_map(|e| {
            if e.applies() {
                return Some(&e.spec);
            }
            self.warn_stale(e);
            None
        })
    }

    /// Report (once) how many entries of `e`'s table and op are stale, on stderr.
    fn warn_stale(&self, e: &LoadedEntry) {
        let Some(once) = self.stale.get(&(e.origin.clone(), e.key.op.clone())) else {
            return;
        };
        once.get_or_init(|| {
            let of_op = self
                .entries
                .iter()
                .filter(|x| Arc::ptr_eq(&x.origin, &e.origin) && x.key.op == e.key.op);
            let n = of_op.filter(|x| !x.applies()).count();
            let line = format!(
                "tuning table {}: {n} {} entries ignored: their kernels changed since they were measured (another fingerprint): re-measure them with rcute tune",
                e.origin, e.key.op
            );
            eprintln!("rcute: {line}");
            line
        });
    }

    /// The stale-entry warnings lookups have printed so far, one per table and op.
    ///
    /// ```
    /// use rcute_ops::tuning::{Entry, ProblemKey, TableHeader, Tables, TuningTable};
    /// let here = TableHeader { format: 2, device: "NVIDIA H100 80GB HBM3".into(), sms: 132,
    ///                          driver: 13000, nvrtc: "13.0".into(), smem_optin: 232448 };
    /// let key = ProblemKey::new("awq", "f16", "g128", "sm_90a", 16, 4096, 4096);
    /// let old = Entry { key: key.clone(), config: "awq:16x256x64,1x4,s4,v4,k8".into(),
    ///                   fingerprint: Some("0000000000000000".into()), us: 20.0,
    ///                   peer: None, peer_us: None };
    /// let json = TuningTable { header: here.clone(), entries: vec![old] }.to_json();
    /// let tables = Tables::new([TuningTable::load_text(&json, "t.json", &here)]);
    /// assert!(tables.warnings().is_empty()); // nothing is checked before a lookup
    /// assert_eq!(tables.lookup(&key), None);
    /// assert!(tables.warnings()[0].starts_with("tuning table t.json: 1 awq entries ignored"));
    /// ```
    pub fn warnings(&self) -> Vec<String> {
        self.stale.values().filter_map(|w| w.get().cloned()).collect()
    }

    /// The configuration measured for exactly `key` (its own M bucket), if an entry there
    /// applies.
    pub fn exact(&self, key: &ProblemKey) -> Option<&ConfigSpec> {
        self.first_applying(|k| k == key)
    }

    /// The configuration measured for `key`'s problem at the nearest M bucket with an
    /// entry (same op, types, fusion, arch, N and K), if that bucket lies within a factor of
    /// two of `key.m` ([`super::bucket::REACH`]) and one of its entries applies.
    ///
    /// A nearest bucket whose entries are all stale leaves the problem to the rules rather
    /// than to a farther bucket: an entry measured for another M is a guess there, and the
    /// rules are the better one (session 25: with the MoE entries stale, Mixtral T = 128
    /// fell to the T = 64 entry's decode tiles and ran 17 % slower than the rules' choice).
    pub fn lookup(&self, key: &ProblemKey) -> Option<&ConfigSpec> {
        let ms: Vec<usize> = self
            .entries
            .iter()
            .filter(|e| e.key.same_but_m(key))
            .map(|e| e.key.m)
            .collect();
        let m = nearest_within_reach(key.m, &ms)?;
        self.first_applying(|k| k.m == m && k.same_but_m(key))
    }
}
