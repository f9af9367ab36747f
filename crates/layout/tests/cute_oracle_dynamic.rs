//! Differential test against CuTe's C++ on DYNAMIC inputs, with CuTe's exact
//! static/dynamic distinction.
//!
//! Every expression in `crates/layout/tests/data/cute_oracle_dynamic.tsv` is written in
//! CuTe's own spelling: `_N` is a static `Int<N>{}`, a plain `N` a runtime `int(N)`.
//! The oracle (`/work/oracle/gen_dynamic.py`, `cute_eval.py --exact`) compiled each with
//! g++ against CuTe's headers, ran it, and recorded what CuTe's `print` wrote (static
//! integers as `_N`, dynamic ones plain) or `ERROR` when CuTe rejects it at compile time
//! (typically a `static_assert` that needs static values). rcute's `--exact` mode
//! ([`eval_str_exact`] + [`rcute_layout::eval::Value::notation_exact`]) must print the
//! identical text, or fail exactly where CuTe does. Cases where CuTe's program dies at
//! run time (assert, division by zero) are comment lines in the data file.

use rcute_layout::eval::eval_str_exact;

/// Cases left out on purpose, each with the documented rcute rule that explains the
/// difference. (Empty: every recorded case must match.)
const EXCLUDED: &[(&str, &str)] = &[];

/// Checks every case of `tests/data/{file}` with rcute's exact spelling; returns the number
/// of cases checked and of ERROR cases.
fn check_oracle_file(file: &str) -> (usize, usize) {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(&path).expect("oracle data file");
    let mut checked = 0;
    let mut errors = 0;
    let mut mismatches = Vec::new();
    for line in data.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((expr, want)) = line.split_once('\t') else {
            continue;
        };
        if EXCLUDED.iter().any(|(e, _)| *e == expr) {
            continue;
        }
        checked += 1;
        if want == "ERROR" {
            errors += 1;
        }
        let got = eval_str_exact(expr);
        match (want, got) {
            ("ERROR", Err(_)) => {}
            ("ERROR", Ok(v)) => mismatches.push(format!("{expr}\n    CuTe: ERROR\n   rcute: {}", v.notation_exact())),
            (w, Ok(v)) if v.notation_exact() == w => {}
            (w, Ok(v)) => mismatches.push(format!("{expr}\n    CuTe: {w}\n   rcute: {}", v.notation_exact())),
            (w, Err(e)) => mismatches.push(format!("{expr}\n    CuTe: {w}\n   rcute: error {}", e.render(expr))),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{file}: {} of {checked} cases differ from CuTe:\n{}",
        mismatches.len(),
        mismatches.iter().take(60).cloned().collect::<Vec<_>>().join("\n")
    );
    (checked, errors)
}

#[test]
fn matches_cute_on_every_dynamic_oracle_case() {
    let (checked, errors) = check_oracle_file("cute_oracle_dynamic.tsv");
    assert!(checked > 500, "only {checked} dynamic oracle cases found");
    assert!(errors > 0 && errors < checked, "{errors} of {checked} cases are ERROR");
}

/// Operands with size-1 modes (static and dynamic, zero and non-zero strides) through
/// every operation: rcute prints exactly what CuTe prints, strides of size-1 modes
/// included (`gen_size_one.py` produced the data with CuTe's headers).
#[test]
fn matches_cute_on_size_one_modes() {
    let (checked, _) = check_oracle_file("cute_oracle_size_one.tsv");
    assert!(checked >= 1000, "only {checked} size-1 oracle cases found");
}

/// Dynamic literals fold exactly as CuTe's runtime `int`s do.
#[test]
fn dynamic_literal_arithmetic_folds() {
    let ex = |s: &str| eval_str_exact(s).map(|v| v.notation_exact()).unwrap();
    // int(4) * Int<2> is the dynamic int 8.
    assert_eq!(ex("(4,_2):(_2,8)"), "(4,_2):(_2,8)");
    assert_eq!(ex("size((4,_2):(_1,4))"), "8");
    assert_eq!(ex("size((_4,_2):(_1,_4))"), "_8");
    assert_eq!(
        ex("zipped_divide((128,64):(_1,128),[_32,_16])"),
        "((_32,_16),(4,4)):((_1,128),(_32,2048))"
    );
}
