//! The READMEs (this crate's and the repository's) show the lines `examples/readme.rs`
//! runs: each README's block must contain them verbatim, in order.

use std::path::Path;

/// The non-empty lines of `examples/readme.rs` between `// README begin` and
/// `// README end`, without their indentation.
fn example_lines() -> Vec<String> {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/readme.rs")).unwrap();
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    let begin = lines
        .iter()
        .position(|l| *l == "// README begin")
        .expect("no README begin marker")
        + 1;
    let end = lines
        .iter()
        .position(|l| *l == "// README end")
        .expect("no README end marker");
    lines[begin..end]
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.to_string())
        .collect()
}

/// Asserts that `readme` has a line-for-line copy of the example's block.
fn assert_quotes(readme: &str) {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(readme)).unwrap();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let want = example_lines();
    assert!(want.len() >= 3, "the example's README block is too short: {want:?}");
    let found = lines
        .windows(want.len())
        .any(|w| w.iter().zip(&want).all(|(a, b)| a == b));
    assert!(
        found,
        "{readme} does not quote examples/readme.rs's block:\n{}",
        want.join("\n")
    );
}

#[test]
fn crate_readme_quotes_the_example() {
    assert_quotes("README.md");
}

#[test]
fn repository_readme_quotes_the_example() {
    assert_quotes("../../README.md");
}
