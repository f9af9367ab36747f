//! Differential test against CuTe's C++: every expression in
//! `crates/layout/tests/data/cute_oracle.tsv` was evaluated by CuTe's headers (compiled
//! with g++ on the host); rcute must give the same function and the same mode nesting,
//! and must reject exactly the expressions CuTe rejects at compile time.

use rcute_layout::eval::eval_str;

#[test]
fn matches_cute_on_every_oracle_case() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cute_oracle.tsv");
    let data = std::fs::read_to_string(path).expect("oracle data file");
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for line in data.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((expr, want)) = line.split_once('\t') else {
            continue;
        };
        checked += 1;
        let got = eval_str(expr);
        match (want, got) {
            ("ERROR", Err(_)) => {}
            ("ERROR", Ok(v)) => mismatches.push(format!("{expr}\n    CuTe: ERROR\n   rcute: {}", v.notation())),
            (w, Ok(v)) if v.notation() == w => {}
            (w, Ok(v)) => mismatches.push(format!("{expr}\n    CuTe: {w}\n   rcute: {}", v.notation())),
            (w, Err(e)) => mismatches.push(format!("{expr}\n    CuTe: {w}\n   rcute: error {}", e.render(expr))),
        }
    }
    assert!(checked > 1000, "only {checked} oracle cases found");
    assert!(
        mismatches.is_empty(),
        "{} of {checked} cases differ from CuTe:\n{}",
        mismatches.len(),
        mismatches.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}
