//! Tuning tables that must not be used are ignored with one warning each; an entry applies
//! exactly while this build generates the kernels its fingerprint names; concurrent writers
//! never tear a table or lose entries. (No GPU: these are the file rules.)

use rcute_ops::tuning::{
    kernel_fingerprint, ConfigSpec, Entry, EntryState, ProblemKey, TableHeader, Tables, TuningTable, TABLE_FORMAT,
};

/// Opt-in shared memory per block of every sm_90 GPU (227 KiB): the H100 and the H200.
const SM90_SMEM_OPTIN: u32 = 232448;

fn here() -> TableHeader {
    TableHeader {
        format: TABLE_FORMAT,
        device: "NVIDIA H200".into(),
        sms: 132,
        driver: 13000,
        nvrtc: "13.0".into(),
        smem_optin: SM90_SMEM_OPTIN,
    }
}

/// The fingerprint this build gives `config` under `key` (none for a configuration that
/// does not parse or is not the op's).
fn current(key: &ProblemKey, config: &str) -> Option<String> {
    let spec: ConfigSpec = config.parse().ok()?;
    kernel_fingerprint(key, &spec, SM90_SMEM_OPTIN).ok()
}

/// A gemm entry at `m` measured with this build's kernels.
fn entry(m: usize, config: &str) -> Entry {
    keyed(key(m), config)
}

/// An entry of `key` measured with this build's kernels.
fn keyed(key: ProblemKey, config: &str) -> Entry {
    Entry {
        fingerprint: current(&key, config),
        key,
        config: config.into(),
        us: 11.0,
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
    let mut old_format = here();
    old_format.format = 1;
    let good = table(here(), vec![entry(16, "sm90:64x128x64,pp,k2")]);
    let cases = [
        (
            "other-device",
            table(other_device, vec![entry(16, "sm90:64x128x64,pp,k2")]),
            "device NVIDIA H100",
        ),
        (
            "old-format",
            table(old_format, vec![entry(16, "sm90:64x128x64,pp,k2")]),
            "format 1 (this build reads format 2",
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
fn an_entry_applies_exactly_while_its_kernels_are_unchanged() {
    let stale = |e: Entry| Entry {
        fingerprint: Some("0123456789abcdef".into()),
        ..e
    };
    let awq = ProblemKey::new("awq", "f16", "g128", "sm_90a", 16, 4096, 4096);
    let moe = ProblemKey::new("moe", "bf16", "e8-top2", "sm_90a", 16, 4096, 14336);
    let text = table(
        here(),
        vec![
            entry(16, "sm90:64x128x64,pp,k2"),
            stale(entry(32, "sm90:64x128x64,ws")),
            stale(entry(64, "128x128x32,2x2,4,1")),
            keyed(awq.clone(), "awq:16x256x64,1x4,s4,v4,k8"),
            keyed(moe.clone(), "moe:sm90n"),
        ],
    );
    let loaded = TuningTable::load_text(&text, "t.json", &here());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let tables = Tables::new([loaded]);
    // the entry whose fingerprint matches applies; the others never, and a lookup whose
    // nearest bucket holds only stale entries leaves the problem to the rules: 24 and 32
    // (nearest the stale 32) do not fall to the entry at 16, which is within reach of both
    assert_eq!(tables.exact(&key(16)).unwrap().to_string(), "sm90:64x128x64,pp,k2");
    assert_eq!(tables.lookup(&key(18)).unwrap().to_string(), "sm90:64x128x64,pp,k2");
    assert!(tables.exact(&key(32)).is_none());
    assert!(
        tables.lookup(&key(32)).is_none(),
        "the stale bucket 32 is nearest to 32"
    );
    assert!(
        tables.lookup(&key(24)).is_none(),
        "the stale bucket 32 is nearest to 24"
    );
    assert!(tables.lookup(&key(64)).is_none(), "the stale bucket 64");
    // one warning for the op, naming both stale entries, however many lookups met them
    assert!(tables.lookup(&key(64)).is_none());
    let warnings = tables.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("t.json: 2 gemm entries ignored") && warnings[0].contains("changed"),
        "{warnings:?}"
    );
    // the other ops' entries are their own: they apply
    assert_eq!(tables.exact(&awq).unwrap().to_string(), "awq:16x256x64,1x4,s4,v4,k8");
    assert_eq!(tables.exact(&moe).unwrap().to_string(), "moe:sm90n");
    assert_eq!(tables.warnings().len(), 1);
}

#[test]
fn an_entry_measured_with_other_kernels_is_not_applied_and_a_later_table_can_serve() {
    // The same configuration under a key of other types is another kernel: its fingerprint
    // differs, so an entry stamped with the bf16 kernel's never applies to the f16 key.
    let f16 = ProblemKey {
        dtypes: "f16".into(),
        ..key(16)
    };
    let bf16_kernel = entry(16, "sm90:64x128x64,pp,k2").fingerprint;
    assert_ne!(current(&f16, "sm90:64x128x64,pp,k2"), bf16_kernel);
    let moved = Entry {
        fingerprint: bf16_kernel,
        ..keyed(f16.clone(), "sm90:64x128x64,pp,k2")
    };
    let first = TuningTable::load_text(&table(here(), vec![moved]), "first.json", &here());
    let second = TuningTable::load_text(
        &table(here(), vec![keyed(f16.clone(), "sm90:128x128x64,pp")]),
        "second.json",
        &here(),
    );
    let tables = Tables::new([first, second]);
    assert_eq!(tables.lookup(&f16).unwrap().to_string(), "sm90:128x128x64,pp");
    assert!(tables.warnings()[0].contains("first.json: 1 gemm entries ignored"));
}

#[test]
fn entries_without_a_fingerprint_are_ignored_with_one_warning_per_op() {
    let unstamped = |e: Entry| Entry { fingerprint: None, ..e };
    let awq = ProblemKey::new("awq", "f16", "g128", "sm_90a", 16, 4096, 4096);
    let text = table(
        here(),
        vec![
            unstamped(entry(16, "sm90:64x128x64,pp,k2")),
            unstamped(entry(64, "sm90:64x128x64,ws")),
            unstamped(keyed(awq.clone(), "awq:16x256x64,1x4,s4,v4,k8")),
            entry(256, "sm90:128x256x64,coop"),
        ],
    );
    let loaded = TuningTable::load_text(&text, "t.json", &here());
    assert_eq!(loaded.entries.len(), 1);
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("1 awq entries ignored: no kernel fingerprint"));
    assert!(loaded.warnings[1].contains("2 gemm entries ignored: no kernel fingerprint"));
}

#[test]
fn merging_stamps_the_fingerprint_and_keeps_stale_entries_until_their_key_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let stale = Entry {
        fingerprint: Some("0123456789abcdef".into()),
        ..entry(64, "sm90:64x128x64,ws")
    };
    std::fs::write(
        &path,
        table(here(), vec![stale.clone(), entry(16, "sm90:64x128x64,pp,k2")]),
    )
    .unwrap();
    // what the tuner hands over carries no fingerprint: the merge computes it
    let measured = Entry {
        fingerprint: None,
        ..entry(256, "sm90:128x256x64,coop")
    };
    TuningTable::merge_into_file(&path, &here(), &[measured]).unwrap();
    let merged = TuningTable::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(merged.header, here());
    let by_m = |m: usize| merged.entries.iter().find(|e| e.key.m == m).unwrap();
    assert_eq!(by_m(256).fingerprint, current(&key(256), "sm90:128x256x64,coop"));
    assert_eq!(by_m(64), &stale);
    // a measurement of the stale entry's key replaces it
    TuningTable::merge_into_file(&path, &here(), &[entry(64, "sm90:64x64x64,ws")]).unwrap();
    let loaded = TuningTable::load(&path, &here());
    let tables = Tables::new([loaded]);
    assert_eq!(tables.exact(&key(64)).unwrap().to_string(), "sm90:64x64x64,ws");
    assert_eq!(tables.len(), 3);
    assert!(tables.warnings().is_empty());
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
    let mut ms: Vec<usize> = loaded.entries.iter().map(|e| e.key.m).collect();
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

/// Every shipped table parsed, with its name.
fn shipped() -> Vec<(&'static str, TuningTable)> {
    rcute_ops::tuning::SHIPPED
        .iter()
        .map(|(name, text)| {
            (
                *name,
                TuningTable::from_json(text).unwrap_or_else(|e| panic!("{name}: {e}")),
            )
        })
        .collect()
}

#[test]
fn shipped_tables_are_well_formed() {
    // Every shipped table parses, names its device, and every entry's configuration is one
    // the ops understand (a table with an unknown configuration would silently lose it),
    // and every entry applies to this build (its kernels are the ones it was measured with).
    for (name, t) in shipped() {
        assert!(!t.header.device.is_empty(), "{name}: no device");
        let (mut stale, mut current) = (Vec::new(), Vec::new());
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
            if e.state(t.header.smem_optin).0 == EntryState::Applies {
                current.push(format!("{:?}", e.key));
            } else {
                stale.push(format!("{} {} m={} {}", e.key.op, e.key.dtypes, e.key.m, e.config));
            }
        }
        // the loader applies exactly the entries whose fingerprint is this build's
        current.sort();
        assert_eq!(applying(name, &t), current, "{name}");
        assert_eq!(t.header.format, TABLE_FORMAT, "{name}");
        // A shipped entry whose kernels changed would be ignored, and its M bucket left to
        // the rules (session 24 left every SM90 MoE entry stale unnoticed): the commit that
        // changes a tuned kernel's source settles its entries.
        assert!(
            stale.is_empty(),
            "{name}: {} entries were measured with kernels this build no longer generates: {stale:?}; \
             re-measure them on that GPU (`rcute tune OP --shape ... --out {name}`), \
             or, where the change cannot alter their timing, re-stamp them \
             (`rcute table {name} --restamp OP`)",
            stale.len()
        );
    }
}

fn spec_of(e: &Entry) -> ConfigSpec {
    e.config.parse().unwrap()
}

/// A table of format 1 (`text`: a header with one generator hash per kernel family and no
/// fingerprints) as a table of the current format on its device, whose opt-in shared
/// memory per block (which format 1 did not record) is `smem_optin`: each entry `current`
/// says was measured with this build's kernels gets the fingerprint this build generates
/// for it; the others get none, so they never apply, and they stay in the table until a
/// measurement of their key replaces them.
fn convert_format_1(text: &str, smem_optin: u32, current: impl Fn(&Entry) -> bool) -> TuningTable {
    let mut t = TuningTable::from_json(text).unwrap();
    assert_eq!(t.header.format, 1, "not a table of format 1");
    t.header.format = TABLE_FORMAT;
    t.header.smem_optin = smem_optin;
    for e in &mut t.entries {
        e.fingerprint = current(e).then(|| kernel_fingerprint(&e.key, &spec_of(e), smem_optin).unwrap());
    }
    t
}

/// The keys of `table`'s entries that apply on its own device (through the loader).
fn applying(name: &str, table: &TuningTable) -> Vec<String> {
    let loaded = TuningTable::load_text(&table.to_json(), name, &table.header);
    let tables = Tables::new([loaded]);
    let mut keys: Vec<String> = table
        .entries
        .iter()
        .filter(|e| tables.exact(&e.key).is_some())
        .map(|e| format!("{:?}", e.key))
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_table_of_format_1_converts_with_fingerprints_for_the_entries_measured_with_todays_kernels() {
    // What the shipped tables went through (their conversion compared the entries that apply
    // under both rules: the commit that introduced format 2): a table of format 1 and a
    // predicate saying which entries were measured with this build's kernels.
    let old = r#"{ "header": { "device": "NVIDIA H200", "sms": 132, "driver": 13000, "nvrtc": "13.0",
                               "generators": { "sm80": "e5dc32edd20592a3", "sm90": "16045ad275be891d" } },
                   "entries": [ ENTRIES ] }"#;
    let entries = [entry(16, "sm90:64x128x64,pp,k2"), entry(256, "128x128x32,2x2,4,1")];
    let listed: Vec<String> = entries
        .iter()
        .map(|e| {
            serde_json::to_string(&Entry {
                fingerprint: None,
                ..e.clone()
            })
            .unwrap()
        })
        .collect();
    let old = old.replace("ENTRIES", &listed.join(", "));
    assert!(TuningTable::load_text(&old, "old.json", &here()).warnings[0].contains("format 1"));
    let converted = convert_format_1(&old, SM90_SMEM_OPTIN, |e| e.key.m == 16);
    assert_eq!(converted.header, here());
    assert_eq!(converted.entries[0], entries[0]);
    assert_eq!(converted.entries[1].fingerprint, None);
    assert_eq!(applying("new.json", &converted), [format!("{:?}", key(16))]);
}
