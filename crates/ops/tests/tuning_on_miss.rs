//! `RCUTE_TUNING` modes and on-miss tuning's bookkeeping, without a GPU: the mode parsing,
//! which lookups tune, that concurrent misses of one key tune it once, that the winner is
//! written to the table file and used by later lookups, and that a try that could not run
//! (`Err`) is retried. (`tests/tests/gpu_tuning_on_miss.rs` runs the real tuner.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcute_ops::env_choice::EnvChoice;
use rcute_ops::tuning::{
    kernel_fingerprint, Entry, OpsTuning, ProblemKey, TableHeader, Tables, TuningMode, TuningTable, TABLE_FORMAT,
};

fn here() -> TableHeader {
    TableHeader {
        format: TABLE_FORMAT,
        device: "NVIDIA H200".into(),
        sms: 132,
        driver: 13000,
        nvrtc: "13.0".into(),
        smem_optin: 232448,
    }
}

fn key(m: usize) -> ProblemKey {
    ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", m, 4096, 4096)
}

/// An entry measured with this build's kernels (its fingerprint; none for a configuration
/// that is not the op's).
fn entry(m: usize, config: &str) -> Entry {
    Entry {
        key: key(m),
        config: config.into(),
        fingerprint: config
            .parse()
            .ok()
            .and_then(|spec| kernel_fingerprint(&key(m), &spec, here().smem_optin).ok()),
        us: 10.0,
        peer: None,
        peer_us: None,
    }
}

/// Tables holding one entry at M = 16.
fn tables_with_16() -> Tables {
    let text = TuningTable {
        header: here(),
        entries: vec![entry(16, "sm90:64x128x64,pp,k2")],
    }
    .to_json();
    Tables::new([TuningTable::load_text(&text, "t.json", &here())])
}

#[test]
fn modes_parse_and_unknown_values_warn() {
    assert_eq!(TuningMode::parse(None), (TuningMode::Cached, None));
    assert_eq!(TuningMode::parse(Some("")), (TuningMode::Cached, None));
    assert_eq!(TuningMode::parse(Some("cached")), (TuningMode::Cached, None));
    assert_eq!(TuningMode::parse(Some("off")), (TuningMode::Off, None));
    assert_eq!(TuningMode::parse(Some("on-miss")), (TuningMode::OnMiss, None));
    assert_eq!(TuningMode::parse(Some(" on-miss ")), (TuningMode::OnMiss, None));
    let (mode, warning) = TuningMode::parse(Some("onmiss"));
    assert_eq!(mode, TuningMode::Cached);
    assert!(warning.unwrap().contains("is not cached, off or on-miss: using cached"));
}

#[test]
fn concurrent_misses_of_one_key_tune_it_once_and_write_the_winner() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("on-miss.json");
    let t = OpsTuning::new(TuningMode::OnMiss, Tables::default(), Some(here()), Some(file.clone()));
    let calls = AtomicUsize::new(0);
    let chosen: Vec<Option<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    t.choose(&key(20), || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        // Slow enough that the other threads miss while it tunes.
                        std::thread::sleep(Duration::from_millis(100));
                        Ok(Some(entry(20, "64x64x64,2x2,auto,2,serial")))
                    })
                    .map(|c| c.to_string())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(t.tunings(), 1);
    assert!(
        chosen
            .iter()
            .all(|c| c.as_deref() == Some("64x64x64,2x2,auto,2,serial")),
        "{chosen:?}"
    );
    // The next lookup (and choose) uses it without tuning.
    assert_eq!(t.lookup(&key(20)).unwrap().to_string(), "64x64x64,2x2,auto,2,serial");
    assert!(t.choose(&key(20), || panic!("tuned twice")).is_some());
    // Another key tunes again.
    assert!(t
        .choose(&key(256), || Ok(Some(entry(256, "sm90:128x256x64,coop"))))
        .is_some());
    assert_eq!(t.tunings(), 2);
    // Both winners are in the file, which a cached handle then uses.
    let loaded = TuningTable::load(&file, &here());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.entries.len(), 2);
    let cached = OpsTuning::new(TuningMode::Cached, Tables::new([loaded]), Some(here()), None);
    assert_eq!(
        cached.lookup(&key(16)).unwrap().to_string(),
        "64x64x64,2x2,auto,2,serial"
    );
    assert_eq!(cached.lookup(&key(200)).unwrap().to_string(), "sm90:128x256x64,coop");
}

#[test]
fn which_lookups_tune() {
    let dir = tempfile::tempdir().unwrap();
    let file = Some(dir.path().join("t.json"));
    let never = || -> Result<Option<Entry>, String> { panic!("must not tune") };
    // cached: the nearest bucket within a factor of two, never a tuning.
    let cached = OpsTuning::new(TuningMode::Cached, tables_with_16(), Some(here()), file.clone());
    assert_eq!(
        cached.choose(&key(32), never).unwrap().to_string(),
        "sm90:64x128x64,pp,k2"
    );
    assert!(cached.choose(&key(64), never).is_none());
    assert!(cached
        .choose(
            &ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 16, 512, 512),
            never
        )
        .is_none());
    // off: nothing at all.
    let off = OpsTuning::new(TuningMode::Off, tables_with_16(), Some(here()), file.clone());
    assert!(off.choose(&key(16), never).is_none() && off.lookup(&key(16)).is_none());
    // on-miss: an entry at the key's own bucket is used as is; a nearer-bucket entry is a miss.
    let on_miss = OpsTuning::new(TuningMode::OnMiss, tables_with_16(), Some(here()), file.clone());
    assert_eq!(
        on_miss.choose(&key(16), never).unwrap().to_string(),
        "sm90:64x128x64,pp,k2"
    );
    let tuned = on_miss.choose(&key(64), || Ok(Some(entry(64, "sm90:64x256x64,coop"))));
    assert_eq!(tuned.unwrap().to_string(), "sm90:64x256x64,coop");
    assert_eq!(on_miss.tunings(), 1);
    // Without a header (unknown driver) nothing is tuned: the nearest entry in reach serves.
    let headless = OpsTuning::new(TuningMode::OnMiss, tables_with_16(), None, file);
    assert_eq!(
        headless.choose(&key(32), never).unwrap().to_string(),
        "sm90:64x128x64,pp,k2"
    );
    assert!(headless.choose(&key(64), never).is_none());
}

#[test]
fn a_try_that_could_not_run_is_retried_and_a_fruitless_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let t = OpsTuning::new(
        TuningMode::OnMiss,
        Tables::default(),
        Some(here()),
        Some(dir.path().join("t.json")),
    );
    assert!(t
        .choose(&key(8), || Err("the stream captures a graph".into()))
        .is_none());
    let spec = t.choose(&key(8), || Ok(Some(entry(8, "16x64x128,1x4,auto,4,parallel"))));
    assert_eq!(spec.unwrap().to_string(), "16x64x128,1x4,auto,4,parallel");
    // Tuning that finds nothing is remembered: the rules serve, no second tuning.
    assert!(t.choose(&key(1024), || Ok(None)).is_none());
    assert!(t.choose(&key(1024), || panic!("tuned twice")).is_none());
    assert_eq!(t.tunings(), 3);
}

#[test]
fn an_entry_of_another_family_under_a_key_is_ignored_with_a_warning() {
    let text = TuningTable {
        header: here(),
        entries: vec![
            entry(16, "awq:16x256x64,1x4,s4,v4,k10"),
            entry(32, "64x64x64,2x2,auto,1"),
        ],
    }
    .to_json();
    let loaded = TuningTable::load_text(&text, "t.json", &here());
    assert_eq!(loaded.entries.len(), 1);
    assert_eq!(loaded.warnings.len(), 1);
    assert!(
        loaded.warnings[0].contains("not a configuration of op \"gemm\""),
        "{:?}",
        loaded.warnings
    );
}
