//! `rcute table`: which entries of a tuning table this build applies, `--check` and
//! `--restamp` (CPU only).

use std::process::Command;

use rcute_ops::tuning::{kernel_fingerprint, ConfigSpec, Entry, ProblemKey, TableHeader, TuningTable};

fn header() -> TableHeader {
    TableHeader {
        format: 2,
        device: "NVIDIA H100 80GB HBM3".into(),
        sms: 132,
        driver: 13000,
        nvrtc: "13.0".into(),
        smem_optin: 232448,
    }
}

fn entry(m: usize, config: &str, fingerprint: Option<String>) -> Entry {
    Entry {
        key: ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", m, 4096, 4096),
        config: config.into(),
        fingerprint,
        us: 12.5,
        peer: None,
        peer_us: None,
    }
}

fn current(e: &Entry) -> String {
    let spec: ConfigSpec = e.config.parse().unwrap();
    kernel_fingerprint(&e.key, &spec, header().smem_optin).unwrap()
}

fn rcute_table(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rcute"))
        .arg("table")
        .args(args)
        .output()
        .expect("run rcute");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
    (o.status.code().unwrap_or(-1), text(o.stdout), text(o.stderr))
}

#[test]
fn lists_stale_entries_and_restamps_only_the_named_op() {
    let fresh = entry(16, "sm90:64x128x64,pp,k2", None);
    let fresh = Entry {
        fingerprint: Some(current(&fresh)),
        ..fresh
    };
    let stale = entry(32, "sm90:64x128x64,ws", Some("0123456789abcdef".into()));
    let table = TuningTable {
        header: header(),
        entries: vec![fresh.clone(), stale.clone()],
    };
    let path = std::env::temp_dir().join(format!("rcute-table-test-{}.json", std::process::id()));
    std::fs::write(&path, table.to_json()).unwrap();
    let file = path.to_str().unwrap();

    let (code, out, err) = rcute_table(&[file, "--check"]);
    assert_eq!(code, 1, "a stale entry fails --check: {out}{err}");
    let line = |m: usize| {
        out.lines()
            .find(|l| l.contains(&format!(" m={m} ")))
            .unwrap_or("")
            .to_string()
    };
    assert!(line(16).trim_start().starts_with("applies"), "{out}");
    assert!(line(32).trim_start().starts_with("stale"), "{out}");
    assert!(out.contains("1 entries do not apply"), "{out}");

    // another op's re-stamp leaves the file as it was
    let (code, _, _) = rcute_table(&[file, "--restamp", "awq", "--check"]);
    assert_eq!(code, 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), table.to_json());

    let (code, out, err) = rcute_table(&[file, "--restamp", "gemm", "--check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 stale entries re-stamped"), "{out}");
    let after = TuningTable::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let by_m = |m: usize| after.entries.iter().find(|e| e.key.m == m).unwrap().clone();
    assert_eq!(
        by_m(32).fingerprint,
        Some(current(&stale)),
        "stamped with this build's fingerprint"
    );
    assert_eq!(by_m(32).us, stale.us, "the measurement is kept");
    assert_eq!(by_m(16), fresh, "an applying entry is untouched");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_missing_or_malformed_file_is_an_error() {
    let (code, _, err) = rcute_table(&["/nonexistent/rcute-table.json"]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/rcute-table.json"), "{err}");
    let path = std::env::temp_dir().join(format!("rcute-table-bad-{}.json", std::process::id()));
    std::fs::write(&path, "{ not json").unwrap();
    let (code, _, err) = rcute_table(&[path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not a tuning table"), "{err}");
    std::fs::remove_file(&path).unwrap();
}
