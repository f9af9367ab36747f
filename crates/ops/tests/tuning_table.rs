//! Tuning tables that must not be used are ignored with one warning each; concurrent
//! writers never tear a table or lose entries. (No GPU: these are the file rules.)

use rcute_ops::tuning::{generator_hashes, ConfigSpec, Entry, Family, ProblemKey, TableHeader, Tables, TuningTable};

fn here() -> TableHeader {
    TableHeader {
        device: "NVIDIA H200".into(),
        sms: 132,
        driver: 13000,
        nvrtc: "13.0".into(),
        generators: generator_hashes().clone(),
    }
}

fn entry(m: usize, config: &str) -> Entry {
    Entry {
        key: ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", m, 4096, 4096),
        config: config.into(),
        us: 10.0 + m as f64,
        peer: Some("cublas".into()),
        peer_us: Some(12.0),
    }
}

fn table(header: TableHeader, entries: Vec<Entry>) -> String {
    TuningTable { header, entries }.to_json()
}

fn key(m: usize) -> ProblemKey {
    ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", m, 4096, 4096)
}

#[test]
fn a_matching_table_is_used_at_the_nearest_bucket() {
    let text = table(
        here(),
        vec![entry(16, "sm90:64x128x64,pp,k2"), entry(256, "sm90:128x256x64,coop")],
    );
    let loaded = TuningTable::load_text(&text, "t.json", &here());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let tables = Tables::new([loaded]);
    assert_eq!(tables.lookup(&key(20)).unwrap().to_string(), "sm90:64x128x64,pp,k2");
    assert_eq!(tables.lookup(&key(500)).unwrap().to_string(), "sm90:128x256x64,coop");
    // More than a factor of two from every tuned M: the rules decide, not a decode entry.
    assert!(tables.lookup(&key(1000)).is_none());
    assert!(tables.lookup(&key(4096)).is_none());
    let other_n = ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 16, 14336, 4096);
    assert!(tables.lookup(&other_n).is_none());
}

#[test]
fn tables_from_elsewhere_are_ignored_with_one_warning() {
    let mut other_device = here();
    other_device.device = "NVIDIA H100 80GB HBM3".into();
    other_device.sms = 132;
    let mut other_generator = here();
    other_generator
        .generators
        .insert(Family::Sm90, "deadbeefdeadbeef".into());
    let good = table(here(), vec![entry(16, "sm90:64x128x64,pp,k2")]);
    let cases = [
        (
            "other-device",
            table(other_device, vec![entry(16, "sm90:64x128x64,pp,k2")]),
            "device NVIDIA H100",
        ),
        (
            "other-generator",
            table(other_generator, vec![entry(16, "sm90:64x128x64,pp,k2")]),
            "generator deadbeef",
        ),
        ("truncated", good[..good.len() / 2].to_string(), "not a valid table"),
        ("garbage", "\u{0}\u{1}{{{".to_string(), "not a valid table"),
    ];
    for (name, text, why) in cases {
        let loaded = TuningTable::load_text(&text, name, &here());
        assert!(loaded.entries.is_empty(), "{name}");
        assert_eq!(loaded.warnings.len(), 1, "{name}: {:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].contains(name) && loaded.warnings[0].contains(why),
            "{:?}",
            loaded.warnings
        );
        assert!(!loaded.warnings[0].contains('\n'));
    }
}

#[test]
fn a_changed_generator_drops_only_the_entries_that_chose_among_its_kernels() {
    let mut measured = here();
    measured.generators.insert(Family::Sm90, "deadbeefdeadbeef".into());
    let text = table(
        measured.clone(),
        vec![
            entry(16, "sm90:64x128x64,pp,k2"),
            entry(64, "sm90:64x128x64,ws"),
            entry(256, "128x128x32,2x2,4,1"),
        ],
    );
    let loaded = TuningTable::load_text(&text, "t.json", &here());
    // every gemm entry on sm_90a chose among the Hopper kernels too: all three go
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0].contains("3 gemm entries ignored") && loaded.warnings[0].contains("deadbeef of the sm90"),
        "{:?}",
        loaded.warnings
    );
    assert!(loaded.entries.is_empty());
    // an sm_80 entry, an AWQ and a MoE entry of the same table stay
    let mut others = vec![
        Entry {
            key: ProblemKey::new("gemm", "bf16", "lincomb", "sm_80", 256, 4096, 4096),
            ..entry(256, "128x128x32,2x2,4,1")
        },
        Entry {
            key: ProblemKey::new("awq", "f16", "g128", "sm_90a", 16, 4096, 4096),
            ..entry(16, "awq:16x256x64,1x4,s4,v4,k8")
        },
        Entry {
            key: ProblemKey::new("moe", "bf16", "e8-top2", "sm_90a", 16, 4096, 14336),
            ..entry(16, "moe:16x128x64,1x4,k4,s8")
        },
    ];
    let loaded = TuningTable::load_text(&table(measured.clone(), others.clone()), "t.json", &here());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.entries.len(), 3);
    others.push(entry(16, "sm90:64x128x64,pp,k2"));
    let text = table(measured, others);

    // A table of the old format (one `generator` for everything) counts as stale in every
    // family: one warning per family it holds, nothing used.
    let legacy = text.replace("\"generators\"", "\"generator\": \"0123\", \"old\"");
    let loaded = TuningTable::load_text(&legacy, "old.json", &here());
    assert!(loaded.entries.is_empty());
    assert_eq!(loaded.warnings.len(), 3, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings.iter().all(|w| w.contains("(none)")),
        "{:?}",
        loaded.warnings
    );

    // Merging a new measurement drops the stale entries, keeps the others, and stamps the
    // file with the current generators.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(&path, &text).unwrap();
    TuningTable::merge_into_file(&path, &here(), &[entry(32, "sm90:64x64x64,ws")]).unwrap();
    let merged = TuningTable::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(merged.header, here());
    let configs: Vec<&str> = merged.entries.iter().map(|e| e.config.as_str()).collect();
    assert_eq!(
        configs,
        [
            "awq:16x256x64,1x4,s4,v4,k8",
            "128x128x32,2x2,4,1",
            "sm90:64x64x64,ws",
            "moe:16x128x64,1x4,k4,s8"
        ]
    );
}

#[test]
fn an_unknown_configuration_string_drops_only_its_entry() {
    let text = table(
        here(),
        vec![entry(16, "sm90:64x128x64,teleport"), entry(64, "64x128x64,2x2,3,1")],
    );
    let loaded = TuningTable::load_text(&text, "t.json", &here());
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("teleport"));
    assert_eq!(loaded.entries.len(), 1);
    let tables = Tables::new([loaded]);
    // The surviving entry answers for the M it reaches (M = 32..128), the dropped one for none.
    assert_eq!(tables.lookup(&key(32)).unwrap().to_string(), "64x128x64,2x2,3,1");
    assert!(tables.lookup(&key(16)).is_none());
}

#[test]
fn earlier_tables_win() {
    let a = TuningTable::load_text(&table(here(), vec![entry(16, "sm90:64x128x64,pp,k2")]), "a", &here());
    let b = TuningTable::load_text(&table(here(), vec![entry(16, "sm90:128x128x64,pp")]), "b", &here());
    let spec: ConfigSpec = "sm90:64x128x64,pp,k2".parse().unwrap();
    assert_eq!(Tables::new([a, b]).lookup(&key(16)), Some(&spec));
}

#[test]
fn files_missing_unreadable_or_written_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h200.json");
    let loaded = TuningTable::load(&path, &here());
    assert!(loaded.entries.is_empty() && loaded.warnings.is_empty());
    std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
    let loaded = TuningTable::load(&path, &here());
    assert_eq!(loaded.warnings.len(), 1);
    // A writer replaces a file it cannot read with a fresh table of its own header.
    TuningTable::merge_into_file(&path, &here(), &[entry(16, "sm90:64x128x64,pp,k2")]).unwrap();
    let loaded = TuningTable::load(&path, &here());
    assert_eq!((loaded.entries.len(), loaded.warnings.len()), (1, 0));
}

#[test]
fn concurrent_writers_lose_nothing_and_never_tear_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.json");
    let buckets = rcute_ops::tuning::bucket::M_BUCKETS;
    std::thread::scope(|s| {
        for (t, chunk) in buckets.chunks(3).enumerate() {
            let path = path.clone();
            s.spawn(move || {
                for &m in chunk {
                    let cfg = format!("sm90:64x128x64,pp,k{}", t + 1);
                    TuningTable::merge_into_file(&path, &here(), &[entry(m, &cfg)]).unwrap();
                    // Readers in between always see a whole table.
                    let seen = TuningTable::load(&path, &here());
                    assert!(seen.warnings.is_empty(), "{:?}", seen.warnings);
                }
            });
        }
    });
    let loaded = TuningTable::load(&path, &here());
    assert!(loaded.warnings.is_empty());
    let mut ms: Vec<usize> = loaded.entries.iter().map(|(k, _)| k.m).collect();
    ms.sort();
    assert_eq!(ms, buckets.to_vec());
    // No temporary files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn shipped_tables_are_well_formed() {
    // Every shipped table parses, names its device, and every entry's configuration is one
    // the ops understand (a table with an unknown configuration would silently lose it).
    // A table measured with another generator is not an error (ops ignore it with a
    // warning until it is re-measured on the GPU); say so.
    let current = generator_hashes();
    for (name, text) in rcute_ops::tuning::SHIPPED {
        let t = TuningTable::from_json(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!t.header.device.is_empty(), "{name}: no device");
        for e in &t.entries {
            assert!(
                e.config.parse::<ConfigSpec>().is_ok(),
                "{name}: unknown configuration {}",
                e.config
            );
            assert!(e.us > 0.0 && e.key.n > 0 && e.key.k > 0, "{name}: bad entry {e:?}");
            let spec: ConfigSpec = e.config.parse().unwrap();
            assert!(spec.fits_op(&e.key.op), "{name}: {} under a {} key", e.config, e.key.op);
            // A MoE entry is a configuration of the layer's space, so it fits the caller's
            // workspace of `fused_moe_workspace_bytes` and `Ops::fused_moe` runs it.
            if let ConfigSpec::Moe(s) = spec {
                let (experts, topk) = e.key.fusion[1..].split_once("-top").expect("fusion eE-topK");
                let (experts, topk): (usize, usize) = (experts.parse().unwrap(), topk.parse().unwrap());
                let space = rcute_ops::moe::moe_space(e.key.m, topk, experts, e.key.n, e.key.k);
                assert!(space.contains(&s), "{name}: {s} outside the space of {:?}", e.key);
            }
        }
        for f in Family::ALL {
            if t.header.generators.get(&f) != current.get(&f) {
                eprintln!(
                    "note: {name}'s {} entries were measured with generator {:?} (now {:?}): re-run rcute tune",
                    f.name(),
                    t.header.generators.get(&f),
                    current.get(&f)
                );
            }
        }
    }
}
