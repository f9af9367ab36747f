//! `rcute gen`: write the standard catalogue's generated CUDA sources into `kernels/`.

use rcute_kernel::catalogue::{self, CatalogueKernel};
use std::path::{Path, PathBuf};

/// Options of `rcute gen`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// The workspace root holding `kernels/` (default: the current directory).
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Only check that `kernels/` is up to date; exit 1 if it is not.
    #[arg(long)]
    pub check: bool,
}

/// What `gen` found or did for one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The file already had the generated content.
    UpToDate,
    /// The file was (or, with `--check`, would be) written.
    Changed,
}

/// Generate the catalogue under `root`; returns each unit with its status.
pub fn generate(root: &Path, check: bool) -> std::io::Result<Vec<(CatalogueKernel, Status)>> {
    let dir = root.join("kernels");
    if !check {
        std::fs::create_dir_all(&dir)?;
    }
    let mut out = Vec::new();
    for k in catalogue::standard() {
        let path = root.join(catalogue::path_of(&k));
        let current = std::fs::read_to_string(&path).ok();
        let status = if current.as_deref() == Some(k.source.as_str()) {
            Status::UpToDate
        } else {
            Status::Changed
        };
        if status == Status::Changed && !check {
            // Write through a temporary file so a reader never sees half a unit.
            let tmp = path.with_extension("cu.tmp");
            std::fs::write(&tmp, &k.source)?;
            std::fs::rename(&tmp, &path)?;
        }
        out.push((k, status));
    }
    Ok(out)
}

/// The `.cu` files of `root/kernels` that no catalogue unit of `units` writes (left by a unit
/// that was renamed or removed), sorted.
pub fn stale_units(root: &Path, units: &[(CatalogueKernel, Status)]) -> std::io::Result<Vec<PathBuf>> {
    let known: std::collections::HashSet<PathBuf> =
        units.iter().map(|(k, _)| root.join(catalogue::path_of(k))).collect();
    let dir = root.join("kernels");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut stale = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "cu") && !known.contains(&path) {
            stale.push(path);
        }
    }
    stale.sort();
    Ok(stale)
}

/// Run `rcute gen`; returns the text to print and whether everything was up to date. Units
/// that the catalogue no longer has are removed (with `--check`: reported as stale).
pub fn run(args: &GenArgs) -> std::io::Result<(String, bool)> {
    let res = generate(&args.root, args.check)?;
    let mut text = String::new();
    let mut clean = true;
    for (k, st) in &res {
        let verb = match (st, args.check) {
            (Status::UpToDate, _) => "up to date",
            (Status::Changed, true) => {
                clean = false;
                "OUT OF DATE"
            }
            (Status::Changed, false) => "written",
        };
        text.push_str(&format!(
            "{:<52} {:<7} {:>4} kernels {:>8} bytes  {verb}\n",
            catalogue::path_of(k),
            k.arch.as_str(),
            k.kernels,
            k.source.len()
        ));
    }
    for path in stale_units(&args.root, &res)? {
        let verb = if args.check {
            clean = false;
            "STALE (no catalogue unit writes it)"
        } else {
            std::fs::remove_file(&path)?;
            "removed (no catalogue unit writes it)"
        };
        text.push_str(&format!("{:<52} {verb}\n", path.display()));
    }
    if !clean {
        text.push_str("kernels/ is out of date: run `cargo run -p rcute-cli -- gen`\n");
    }
    Ok((text, clean))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen_removes_units_the_catalogue_no_longer_has() {
        let root = tempfile::tempdir().unwrap();
        let args = |check| GenArgs {
            root: root.path().to_path_buf(),
            check,
        };
        let (_, clean) = run(&args(false)).unwrap();
        assert!(clean, "a fresh write is up to date");
        let old = root.path().join("kernels/rc_renamed_unit.cu");
        std::fs::write(&old, "// a unit no catalogue entry writes").unwrap();
        std::fs::write(root.path().join("kernels/notes.txt"), "not a unit").unwrap();
        let (text, clean) = run(&args(true)).unwrap();
        assert!(
            !clean && text.contains("rc_renamed_unit.cu") && text.contains("STALE"),
            "{text}"
        );
        assert!(old.exists(), "--check writes and removes nothing");
        let (text, _) = run(&args(false)).unwrap();
        assert!(text.contains("removed") && !old.exists());
        assert!(
            root.path().join("kernels/notes.txt").exists(),
            "only .cu units are removed"
        );
        assert!(run(&args(true)).unwrap().1, "clean again");
    }
}
