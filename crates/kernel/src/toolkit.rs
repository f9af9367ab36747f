//! Locating the CUDA pieces needed at run time: the NVRTC shared library, the CUDA
//! headers kernels include, and (optionally) `cuobjdump` for SASS inspection.
//!
//! No CUDA toolkit is needed to *build* this crate; everything is found when first used.
//! [`Toolkit::locate`] searches, in order:
//!
//! 1. `$RCUTE_CUDA_HOME` — a toolkit directory (`include/`, `lib64/` or `lib/`, `bin/`).
//!    When set it must be valid: a broken value is an error rather than silently skipped.
//! 2. `$CUDA_PATH` — the conventional toolkit variable (skipped when unusable).
//! 3. `/usr/local/cuda`.
//! 4. The pip-wheel install made by `scripts/setup-cuda.sh`: `$RCUTE_CUDA_WHEELS` when set
//!    (must be valid), else `<workspace>/.cuda`. Wheels lay files out as
//!    `nvidia/cu13/{lib,include,bin}`.
//! 5. The `site-packages` directories of `python3`, if it exists, for the same wheels
//!    installed with a plain `pip install nvidia-cuda-nvrtc nvidia-cuda-runtime ...`.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Environment variable naming a CUDA toolkit directory to use before any other.
pub const ENV_CUDA_HOME: &str = "RCUTE_CUDA_HOME";
/// Environment variable naming a directory holding NVIDIA's pip wheels (as installed by
/// `pip install --target <dir>`, which is what `scripts/setup-cuda.sh` does).
pub const ENV_CUDA_WHEELS: &str = "RCUTE_CUDA_WHEELS";

/// The wheel directory `scripts/setup-cuda.sh` installs into, fixed at build time.
const WORKSPACE_WHEELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.cuda");

/// Where a [`Toolkit`] was found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolkitSource {
    /// From `$RCUTE_CUDA_HOME`.
    RcuteCudaHome,
    /// From `$CUDA_PATH`.
    CudaPath,
    /// From `/usr/local/cuda`.
    System,
    /// From a pip-wheel directory (`$RCUTE_CUDA_WHEELS` or `<workspace>/.cuda`).
    Wheels,
    /// From a `python3` `site-packages` directory.
    PythonSitePackages,
    /// Given explicitly to [`Toolkit::from_dir`] or [`Toolkit::from_wheels`].
    Explicit,
}

/// The CUDA run-time pieces this crate needs, as absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Toolkit {
    /// The directory the toolkit was found in.
    pub root: PathBuf,
    /// Which search step found it.
    pub source: ToolkitSource,
    /// Absolute path of the NVRTC shared library (`libnvrtc.so.13`, ...).
    pub nvrtc_library: PathBuf,
    /// Directories to pass to NVRTC as `-I` (contains `cuda_runtime.h`, `cuda_bf16.h`, ...).
    pub include_dirs: Vec<PathBuf>,
    /// `cuobjdump`, if available (from the toolkit, the wheel install, or `PATH`).
    pub cuobjdump: Option<PathBuf>,
}

/// Why no usable toolkit was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolkitError {
    /// An explicitly requested location (an `RCUTE_*` variable or a path given to a
    /// constructor) does not hold a usable toolkit.
    #[error("{origin} = {}: {reason}", path.display())]
    Invalid {
        /// Which variable or constructor named the path.
        origin: String,
        /// The path that was checked.
        path: PathBuf,
        /// What is missing there.
        reason: String,
    },
    /// No search location held a usable toolkit.
    #[error(
        "no CUDA toolkit with NVRTC found (run scripts/setup-cuda.sh, or set RCUTE_CUDA_HOME); searched:{}",
        Searched(searched)
    )]
    NotFound {
        /// Every location tried, with the reason it was rejected.
        searched: Vec<(PathBuf, String)>,
    },
}

struct Searched<'a>(&'a [(PathBuf, String)]);

impl fmt::Display for Searched<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (path, why) in self.0 {
            write!(f, "\n  {}: {why}", path.display())?;
        }
        Ok(())
    }
}

impl Toolkit {
    /// Finds the toolkit (see the [module docs](self) for the search order).
    ///
    /// The result, success or failure, is computed once per process and cached.
    pub fn locate() -> Result<&'static Toolkit, ToolkitError> {
        static CACHE: OnceLock<Result<Toolkit, ToolkitError>> = OnceLock::new();
        CACHE.get_or_init(Self::locate_uncached).as_ref().map_err(Clone::clone)
    }

    /// Like [`Toolkit::locate`], but searches again every time (reads the environment anew).
    pub fn locate_uncached() -> Result<Toolkit, ToolkitError> {
        let mut searched = Vec::new();

        if let Some(dir) = env_path(ENV_CUDA_HOME) {
            return probe_toolkit_dir(&dir, ToolkitSource::RcuteCudaHome)
                .map_err(|reason| invalid(ENV_CUDA_HOME, dir, reason));
        }
        if let Some(dir) = env_path("CUDA_PATH") {
            match probe_toolkit_dir(&dir, ToolkitSource::CudaPath) {
                Ok(tk) => return Ok(tk),
                Err(why) => searched.push((dir, why)),
            }
        }
        let system = PathBuf::from("/usr/local/cuda");
        match probe_toolkit_dir(&system, ToolkitSource::System) {
            Ok(tk) => return Ok(tk),
            Err(why) => searched.push((system, why)),
        }
        if let Some(dir) = env_path(ENV_CUDA_WHEELS) {
            return probe_wheels_dir(&dir, ToolkitSource::Wheels)
                .map_err(|reason| invalid(ENV_CUDA_WHEELS, dir, reason));
        }
        let workspace = normalize(Path::new(WORKSPACE_WHEELS));
        match probe_wheels_dir(&workspace, ToolkitSource::Wheels) {
            Ok(tk) => return Ok(tk),
            Err(why) => searched.push((workspace, why)),
        }
        for dir in python_site_packages() {
            match probe_wheels_dir(&dir, ToolkitSource::PythonSitePackages) {
                Ok(tk) => return Ok(tk),
                Err(why) => searched.push((dir, why)),
            }
        }
        Err(ToolkitError::NotFound { searched })
    }

    /// Uses the toolkit installed in `dir` (a directory with `include/` and `lib64/`).
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Toolkit, ToolkitError> {
        let dir = dir.as_ref();
        probe_toolkit_dir(dir, ToolkitSource::Explicit)
            .map_err(|reason| invalid("Toolkit::from_dir", dir.to_path_buf(), reason))
    }

    /// Uses NVIDIA's pip wheels installed under `dir` (`dir/nvidia/cu13/...`).
    pub fn from_wheels(dir: impl AsRef<Path>) -> Result<Toolkit, ToolkitError> {
        let dir = dir.as_ref();
        probe_wheels_dir(dir, ToolkitSource::Explicit)
            .map_err(|reason| invalid("Toolkit::from_wheels", dir.to_path_buf(), reason))
    }
}

fn invalid(origin: &str, path: PathBuf, reason: String) -> ToolkitError {
    ToolkitError::Invalid {
        origin: origin.to_owned(),
        path,
        reason,
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Resolves `..` and symlinks where possible, for readable paths in reports.
fn normalize(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// A conventional toolkit layout: `include/`, `lib64/` (or `lib/`, `targets/*/lib`), `bin/`.
fn probe_toolkit_dir(dir: &Path, source: ToolkitSource) -> Result<Toolkit, String> {
    if !dir.is_dir() {
        return Err("not a directory".into());
    }
    let dir = normalize(dir);
    let mut include_dirs = Vec::new();
    for inc in [
        dir.join("include"),
        dir.join("targets/x86_64-linux/include"),
        dir.join("targets/sbsa-linux/include"),
    ] {
        if inc.join("cuda_runtime.h").is_file() && !include_dirs.contains(&inc) {
            include_dirs.push(inc);
        }
    }
    if include_dirs.is_empty() {
        return Err("no include/cuda_runtime.h".into());
    }
    let lib_dirs = ["lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"].map(|d| dir.join(d));
    let nvrtc_library = lib_dirs
        .iter()
        .find_map(|d| find_nvrtc(d))
        .or_else(find_nvrtc_on_library_path)
        .ok_or_else(|| "no libnvrtc.so* in lib64/, lib/ or the library search path".to_string())?;
    let cuobjdump = executable(&dir.join("bin/cuobjdump")).or_else(wheel_or_path_cuobjdump);
    Ok(Toolkit {
        root: dir,
        source,
        nvrtc_library,
        include_dirs,
        cuobjdump,
    })
}

/// NVIDIA's pip wheels (`nvidia-cuda-nvrtc`, `nvidia-cuda-runtime`, `nvidia-cuda-crt`,
/// `nvidia-cuda-cuobjdump` 13.x) all install into `<dir>/nvidia/cu13/{lib,include,bin}`.
fn probe_wheels_dir(dir: &Path, source: ToolkitSource) -> Result<Toolkit, String> {
    if !dir.is_dir() {
        return Err("not a directory".into());
    }
    let dir = normalize(dir);
    let cu = dir.join("nvidia/cu13");
    let nvrtc_library =
        find_nvrtc(&cu.join("lib")).ok_or("no nvidia/cu13/lib/libnvrtc.so* (wheel nvidia-cuda-nvrtc)")?;
    let include = cu.join("include");
    for (header, wheel) in [
        ("cuda_runtime.h", "nvidia-cuda-runtime"),
        ("crt/host_defines.h", "nvidia-cuda-crt"),
    ] {
        if !include.join(header).is_file() {
            return Err(format!("no nvidia/cu13/include/{header} (wheel {wheel})"));
        }
    }
    let cuobjdump = executable(&cu.join("bin/cuobjdump")).or_else(wheel_or_path_cuobjdump);
    Ok(Toolkit {
        root: dir,
        source,
        nvrtc_library,
        include_dirs: vec![include],
        cuobjdump,
    })
}

/// Picks the NVRTC library in `dir`: `libnvrtc.so.13` if present, else the newest
/// `libnvrtc.so.N`, else `libnvrtc.so`. Builtins and `.alt` variants are skipped.
fn find_nvrtc(dir: &Path) -> Option<PathBuf> {
    let preferred = dir.join("libnvrtc.so.13");
    if preferred.is_file() {
        return Some(preferred);
    }
    let mut best: Option<(u32, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let rank = if name == "libnvrtc.so" {
            0
        } else if let Some(ver) = name.strip_prefix("libnvrtc.so.") {
            // "12", "12.8.93": rank by the major version.
            match ver.split('.').next().and_then(|m| m.parse::<u32>().ok()) {
                Some(major) => major,
                None => continue,
            }
        } else {
            continue;
        };
        if entry.path().is_file() && best.as_ref().is_none_or(|(r, _)| rank > *r) {
            best = Some((rank, entry.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// Looks for NVRTC in `$LD_LIBRARY_PATH` and the usual system library directories
/// (a toolkit whose libraries were installed separately, e.g. by a distribution package).
fn find_nvrtc_on_library_path() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/lib64",
        ]
        .map(PathBuf::from),
    );
    dirs.iter()
        .filter(|d| !d.as_os_str().is_empty())
        .find_map(|d| find_nvrtc(d))
}

fn executable(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then(|| path.to_path_buf())
}

/// `cuobjdump` from the wheel install, else from `PATH`.
fn wheel_or_path_cuobjdump() -> Option<PathBuf> {
    let wheels = env_path(ENV_CUDA_WHEELS).unwrap_or_else(|| normalize(Path::new(WORKSPACE_WHEELS)));
    executable(&wheels.join("nvidia/cu13/bin/cuobjdump")).or_else(|| find_on_path("cuobjdump"))
}

fn find_on_path(program: impl AsRef<OsStr>) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|d| executable(&d.join(program.as_ref())))
}

/// `site-packages` directories of `python3`, if it is installed.
fn python_site_packages() -> Vec<PathBuf> {
    const SCRIPT: &str = "import site\n\
        try:\n    ps = site.getsitepackages()\nexcept Exception:\n    ps = []\n\
        try:\n    ps.append(site.getusersitepackages())\nexcept Exception:\n    pass\n\
        print('\\n'.join(ps))";
    let Some(python) = find_on_path("python3") else {
        return Vec::new();
    };
    match Command::new(python)
        .args(["-c", SCRIPT])
        .stderr(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wheels_dir() -> PathBuf {
        normalize(Path::new(WORKSPACE_WHEELS))
    }

    #[test]
    fn workspace_wheels_layout_is_recognised() {
        let dir = wheels_dir();
        if !dir.join("nvidia/cu13").is_dir() {
            eprintln!("skipping: {} has no wheels (run scripts/setup-cuda.sh)", dir.display());
            return;
        }
        let tk = Toolkit::from_wheels(&dir).expect("wheel install is valid");
        assert!(tk.nvrtc_library.ends_with("nvidia/cu13/lib/libnvrtc.so.13"), "{tk:?}");
        assert!(tk.include_dirs[0].join("cuda_bf16.h").is_file());
        assert!(tk.cuobjdump.is_some());
    }

    #[test]
    fn missing_directories_are_rejected_with_reasons() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Toolkit::from_dir(tmp.path()).unwrap_err();
        assert!(err.to_string().contains("cuda_runtime.h"), "{err}");
        let err = Toolkit::from_wheels(tmp.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        let err = Toolkit::from_wheels(tmp.path()).unwrap_err();
        assert!(err.to_string().contains("libnvrtc"), "{err}");
    }

    #[test]
    fn nvrtc_library_choice_prefers_13_then_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let touch = |n: &str| std::fs::write(tmp.path().join(n), b"").unwrap();
        touch("libnvrtc-builtins.so.13.0");
        touch("libnvrtc.so");
        assert_eq!(find_nvrtc(tmp.path()), Some(tmp.path().join("libnvrtc.so")));
        touch("libnvrtc.so.12");
        touch("libnvrtc.alt.so.12");
        assert_eq!(find_nvrtc(tmp.path()), Some(tmp.path().join("libnvrtc.so.12")));
        touch("libnvrtc.so.13");
        assert_eq!(find_nvrtc(tmp.path()), Some(tmp.path().join("libnvrtc.so.13")));
    }

    #[test]
    fn not_found_error_lists_every_location() {
        let err = ToolkitError::NotFound {
            searched: vec![(PathBuf::from("/a"), "x".into()), (PathBuf::from("/b"), "y".into())],
        };
        let msg = err.to_string();
        assert!(msg.contains("/a: x") && msg.contains("/b: y"), "{msg}");
    }
}
