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

/// Run `rcute gen`; returns the text to print and whether everything was up to date.
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
    if !clean {
        text.push_str("kernels/ is out of date: run `cargo run -p rcute-cli -- gen`\n");
    }
    Ok((text, clean))
}
