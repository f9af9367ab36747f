//! KernelCache: memory and disk hits, corruption recovery, concurrency.

use std::path::Path;
use std::sync::Arc;

use rcute_kernel::testing::toolkit_for_test;
use rcute_kernel::{Arch, CompileOptions, KernelCache};

/// A small kernel made unique per test so tests never share cache entries.
fn source(tag: &str) -> String {
    format!("// {tag}\nextern \"C\" __global__ void k(float* p) {{ p[threadIdx.x] *= 2.0f; }}\n")
}

fn opts() -> CompileOptions {
    CompileOptions::new(Arch::Sm80)
}

fn entry(cache: &KernelCache, src: &str) -> std::path::PathBuf {
    cache
        .entry_path(&KernelCache::key(src, "k.cu", &opts()).unwrap())
        .unwrap()
}

#[test]
fn memory_then_disk_hits() {
    if toolkit_for_test().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = source("hits");
    let first = KernelCache::with_dir(dir.path());
    let a = first.get_or_compile(&src, "k.cu", &opts()).unwrap();
    let b = first.get_or_compile(&src, "k.cu", &opts()).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let s = first.stats();
    assert_eq!((s.compiles, s.memory_hits, s.disk_hits), (1, 1, 0));
    assert!(entry(&first, &src).is_file());

    // A new cache (as in a new process) reads the disk entry.
    let second = KernelCache::with_dir(dir.path());
    let c = second.get_or_compile(&src, "k.cu", &opts()).unwrap();
    assert_eq!((second.stats().compiles, second.stats().disk_hits), (0, 1));
    assert_eq!(*a, *c, "disk round trip preserves cubin, log and resources");

    // Different options or source are different keys.
    second
        .get_or_compile(&src, "k.cu", &CompileOptions::new(Arch::Sm90a))
        .unwrap();
    second.get_or_compile(&source("hits2"), "k.cu", &opts()).unwrap();
    assert_eq!(second.stats().compiles, 2);
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.iter().all(|n| n.to_string_lossy().ends_with(".rkc")), "{names:?}");
}

fn recovers_from(damage: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let src = source(&format!("damage-{}", dir.path().display()));
    let good = KernelCache::with_dir(dir.path())
        .get_or_compile(&src, "k.cu", &opts())
        .unwrap();
    let path = entry(&KernelCache::with_dir(dir.path()), &src);
    damage(&path);

    let cache = KernelCache::with_dir(dir.path());
    let again = cache.get_or_compile(&src, "k.cu", &opts()).unwrap();
    let s = cache.stats();
    assert_eq!((s.corrupt_entries, s.compiles, s.disk_hits), (1, 1, 0), "{s:?}");
    assert_eq!(again.cubin, good.cubin);
    // The entry was rewritten and is valid again.
    let fresh = KernelCache::with_dir(dir.path());
    fresh.get_or_compile(&src, "k.cu", &opts()).unwrap();
    assert_eq!(fresh.stats().disk_hits, 1);
}

#[test]
fn truncated_entry_is_replaced() {
    if toolkit_for_test().is_none() {
        return;
    }
    recovers_from(|p| {
        let len = std::fs::metadata(p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    });
    recovers_from(|p| std::fs::write(p, b"").unwrap());
}

#[test]
fn bit_flipped_entry_is_replaced() {
    if toolkit_for_test().is_none() {
        return;
    }
    for at in [3usize, 20, 200, 1000] {
        recovers_from(|p| {
            let mut bytes = std::fs::read(p).unwrap();
            let i = at.min(bytes.len() - 1);
            bytes[i] ^= 0x01;
            std::fs::write(p, bytes).unwrap();
        });
    }
}

#[test]
fn concurrent_threads_compile_once() {
    if toolkit_for_test().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::with_dir(dir.path());
    let src = source("threads");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| cache.get_or_compile(&src, "k.cu", &opts()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])));
    let s = cache.stats();
    assert_eq!((s.compiles, s.memory_hits), (1, 7), "{s:?}");
}

const CHILD_ENV: &str = "RCUTE_CACHE_TEST_CHILD_DIR";

/// Runs in child processes spawned by `concurrent_processes_share_the_disk_cache`.
#[test]
fn cache_child_process() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let cache = KernelCache::with_dir(dir);
    let c = cache.get_or_compile(&source("processes"), "k.cu", &opts()).unwrap();
    assert_eq!(&c.cubin[..4], b"\x7fELF");
}

#[test]
fn concurrent_processes_share_the_disk_cache() {
    if toolkit_for_test().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--exact", "cache_child_process", "--test-threads=1"])
                .env(CHILD_ENV, dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let cache = KernelCache::with_dir(dir.path());
    cache.get_or_compile(&source("processes"), "k.cu", &opts()).unwrap();
    assert_eq!((cache.stats().disk_hits, cache.stats().compiles), (1, 0));
}
