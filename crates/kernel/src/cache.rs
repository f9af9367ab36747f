//! A two-level cache of compiled kernels: in memory for the process, and on disk across
//! processes.
//!
//! The key is a SHA-256 over the source, the program name, the NVRTC version and the full
//! NVRTC argument list (architecture, defines, include paths, ...), so any change that
//! could change the CUBIN gives a new key.
//!
//! # Disk format
//!
//! One file per key, `<dir>/<key hex>.rkc`:
//!
//! | bytes | field |
//! |-------|-------|
//! | 8     | magic `b"RCUTEKC\0"` |
//! | 4     | format version (little endian) |
//! | 32    | key |
//! | 8     | payload length (little endian) |
//! | 32    | SHA-256 of the payload |
//! | n     | payload: cubin length (u64 LE), cubin, log (UTF-8) |
//!
//! Entries are written to a uniquely named temporary file in the same directory and then
//! `rename`d into place, which is atomic: concurrent processes see either no entry or a
//! complete one. An entry that fails any check on read (truncated, corrupted, written by
//! another format version) is deleted and the kernel recompiled.
//!
//! Disk problems never fail a compilation: an unreadable or unwritable cache directory just
//! behaves like a miss (see [`CacheStats::disk_write_errors`]).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use sha2::{Digest, Sha256};

use crate::nvrtc::{self, Arch, CompileError, CompileOptions, Compiled};

/// Environment variable overriding the on-disk cache directory.
pub const ENV_CACHE_DIR: &str = "RCUTE_CACHE_DIR";

const MAGIC: &[u8; 8] = b"RCUTEKC\0";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 32 + 8 + 32;
const FILE_EXTENSION: &str = "rkc";

/// A cache key: SHA-256 of everything that determines a compilation's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// Computes the key for compiling `source` as `name` with NVRTC `nvrtc_version` and
    /// the argument list `args` (see [`CompileOptions::nvrtc_args`]).
    pub fn new(source: &str, name: &str, nvrtc_version: (i32, i32), args: &[String]) -> CacheKey {
        let mut h = Sha256::new();
        h.update(b"rcute-kernel-cache\0");
        h.update(FORMAT_VERSION.to_le_bytes());
        for field in [source.as_bytes(), name.as_bytes()]
            .into_iter()
            .chain(args.iter().map(|a| a.as_bytes()))
        {
            // Length-prefix every field so ("ab","c") and ("a","bc") differ.
            h.update((field.len() as u64).to_le_bytes());
            h.update(field);
        }
        h.update(nvrtc_version.0.to_le_bytes());
        h.update(nvrtc_version.1.to_le_bytes());
        CacheKey(h.finalize().into())
    }

    /// The key as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Counters describing what a [`KernelCache`] did; read with [`KernelCache::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Requests answered from memory.
    pub memory_hits: u64,
    /// Requests answered from disk.
    pub disk_hits: u64,
    /// Requests that ran NVRTC.
    pub compiles: u64,
    /// Disk entries found invalid and deleted.
    pub corrupt_entries: u64,
    /// Failed attempts to write an entry to disk.
    pub disk_write_errors: u64,
}

#[derive(Default)]
struct Counters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    compiles: AtomicU64,
    corrupt_entries: AtomicU64,
    disk_write_errors: AtomicU64,
}

/// One key's slot. Its mutex is held while the kernel is loaded or compiled, so threads
/// asking for the same key wait for one compilation instead of each running NVRTC.
type Slot = Arc<Mutex<Option<Arc<Compiled>>>>;

/// A thread-safe cache of compiled kernels; see the [module docs](self).
pub struct KernelCache {
    dir: Option<PathBuf>,
    slots: Mutex<HashMap<CacheKey, Slot>>,
    counters: Counters,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("dir", &self.dir)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for KernelCache {
    fn default() -> Self {
        Self::new()
    }
}

impl KernelCache {
    /// A cache using the default directory: `$RCUTE_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/rcute`, else `~/.cache/rcute` (memory only if none is known).
    pub fn new() -> Self {
        Self::build(default_cache_dir())
    }

    /// A cache storing its entries in `dir` (created on first write).
    pub fn with_dir(dir: impl Into<PathBuf>) -> Self {
        Self::build(Some(dir.into()))
    }

    /// A cache that never touches the disk.
    pub fn memory_only() -> Self {
        Self::build(None)
    }

    /// The process-wide cache, created with [`KernelCache::new`] on first use.
    pub fn global() -> &'static KernelCache {
        static GLOBAL: OnceLock<KernelCache> = OnceLock::new();
        GLOBAL.get_or_init(KernelCache::new)
    }

    fn build(dir: Option<PathBuf>) -> Self {
        KernelCache {
            dir,
            slots: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// The on-disk directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            compiles: c.compiles.load(Ordering::Relaxed),
            corrupt_entries: c.corrupt_entries.load(Ordering::Relaxed),
            disk_write_errors: c.disk_write_errors.load(Ordering::Relaxed),
        }
    }

    /// The key [`KernelCache::get_or_compile`] would use (loads NVRTC to get its version).
    pub fn key(source: &str, name: &str, opts: &CompileOptions) -> Result<CacheKey, CompileError> {
        let toolkit = nvrtc::ensure_nvrtc()?;
        Ok(CacheKey::new(
            source,
            name,
            nvrtc::nvrtc_version()?,
            &opts.nvrtc_args(toolkit),
        ))
    }

    /// The path of the disk entry for `key`, if this cache has a directory.
    pub fn entry_path(&self, key: &CacheKey) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.{FILE_EXTENSION}", key.to_hex())))
    }

    /// Returns the compiled kernel from memory or disk, or compiles it with
    /// [`nvrtc::compile`] and stores it in both. Failed compilations are not cached.
    pub fn get_or_compile(
        &self,
        source: &str,
        name: &str,
        opts: &CompileOptions,
    ) -> Result<Arc<Compiled>, CompileError> {
        let key = Self::key(source, name, opts)?;
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key).or_default())
        };
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = slot.as_ref() {
            self.counters.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Arc::clone(hit));
        }
        let compiled = match self.read_entry(&key, opts.arch) {
            Some(c) => {
                self.counters.disk_hits.fetch_add(1, Ordering::Relaxed);
                Arc::new(c)
            }
            None => {
                self.counters.compiles.fetch_add(1, Ordering::Relaxed);
                let c = nvrtc::compile(source, name, opts)?;
                if self.write_entry(&key, &c).is_err() {
                    self.counters.disk_write_errors.fetch_add(1, Ordering::Relaxed);
                }
                Arc::new(c)
            }
        };
        *slot = Some(Arc::clone(&compiled));
        Ok(compiled)
    }

    /// Drops every in-memory entry (the disk is untouched).
    pub fn clear_memory(&self) {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    fn read_entry(&self, key: &CacheKey, arch: Arch) -> Option<Compiled> {
        let path = self.entry_path(key)?;
        let bytes = std::fs::read(&path).ok()?;
        match decode_entry(&bytes, key) {
            Some((cubin, log)) => Some(Compiled::new(arch, cubin, log)),
            None => {
                self.counters.corrupt_entries.fetch_add(1, Ordering::Relaxed);
                // Another process may have replaced it with a good entry meanwhile; that
                // loses only one cache hit.
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    fn write_entry(&self, key: &CacheKey, compiled: &Compiled) -> std::io::Result<()> {
        let Some(path) = self.entry_path(key) else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".part")
            .tempfile_in(dir)?;
        tmp.write_all(&encode_entry(key, &compiled.cubin, &compiled.log))?;
        tmp.as_file().sync_data()?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var(ENV_CACHE_DIR)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("rcute")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/rcute")))
}

fn encode_entry(key: &CacheKey, cubin: &[u8], log: &str) -> Vec<u8> {
    let mut payload = Vec::with_capacity(8 + cubin.len() + log.len());
    payload.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    payload.extend_from_slice(cubin);
    payload.extend_from_slice(log.as_bytes());
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&payload));
    out.extend_from_slice(&payload);
    out
}

/// Validates an entry and splits its payload into `(cubin, log)`.
fn decode_entry(bytes: &[u8], key: &CacheKey) -> Option<(Vec<u8>, String)> {
    let (header, payload) = bytes.split_at_checked(HEADER_LEN)?;
    let (magic, rest) = header.split_at(8);
    let (version, rest) = rest.split_at(4);
    let (stored_key, rest) = rest.split_at(32);
    let (len, checksum) = rest.split_at(8);
    if magic != MAGIC
        || u32::from_le_bytes(version.try_into().ok()?) != FORMAT_VERSION
        || stored_key != key.0
        || u64::from_le_bytes(len.try_into().ok()?) != payload.len() as u64
        || Sha256::digest(payload).as_slice() != checksum
    {
        return None;
    }
    let (cubin_len, rest) = payload.split_at_checked(8)?;
    let cubin_len = usize::try_from(u64::from_le_bytes(cubin_len.try_into().ok()?)).ok()?;
    let (cubin, log) = rest.split_at_checked(cubin_len)?;
    Some((cubin.to_vec(), String::from_utf8(log.to_vec()).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trip_and_rejections() {
        let key = CacheKey::new("src", "k.cu", (13, 0), &["-a".into()]);
        let bytes = encode_entry(&key, b"\x7fELF cubin", "ptxas info : log");
        assert_eq!(
            decode_entry(&bytes, &key),
            Some((b"\x7fELF cubin".to_vec(), "ptxas info : log".into()))
        );
        // Truncation anywhere.
        for cut in [0, 10, HEADER_LEN, bytes.len() - 1] {
            assert_eq!(decode_entry(&bytes[..cut], &key), None, "cut at {cut}");
        }
        // Any single bit flip.
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_entry(&bad, &key), None, "flip at {i}");
        }
        // Another key.
        let other = CacheKey::new("src2", "k.cu", (13, 0), &["-a".into()]);
        assert_eq!(decode_entry(&bytes, &other), None);
    }

    #[test]
    fn key_separates_fields() {
        let a = CacheKey::new("ab", "c", (13, 0), &[]);
        let b = CacheKey::new("a", "bc", (13, 0), &[]);
        let c = CacheKey::new("ab", "c", (13, 1), &[]);
        let d = CacheKey::new("ab", "c", (13, 0), &["--gpu-architecture=sm_80".into()]);
        assert!(a != b && a != c && a != d);
        assert_eq!(a, CacheKey::new("ab", "c", (13, 0), &[]));
        assert_eq!(a.to_hex().len(), 64);
    }
}
