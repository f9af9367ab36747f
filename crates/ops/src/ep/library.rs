//! Finding and loading NCCL (`libnccl.so.2`) at run time.
//!
//! `cudarc`'s own dynamic loader (its `nccl` feature with `dynamic-loading`) looks for
//! `libnccl.so`, `libnccl.so.13`, `libnccl.so.12`, ... but not `libnccl.so.2`, the name
//! every NCCL 2.x release (and the `nvidia-nccl-cu12` / `-cu13` wheels PyTorch depends on)
//! ships, and it panics when nothing loads. So rcute loads the library itself and calls
//! the few entry points it needs through the function types of `cudarc::nccl::sys`
//! (its types: `ncclComm_t`, `ncclUniqueId`, `ncclDataType_t`, `ncclRedOp_t`). Where it
//! looks, in this order (the first that loads wins; [`Nccl::get`] loads once per
//! process):
//!
//! 1. `RCUTE_NCCL_LIB`, when set: that file only (an absolute path to `libnccl.so.2`);
//! 2. `libnccl.so.2`, then `libnccl.so`, through the system loader (`LD_LIBRARY_PATH`, the
//!    `ldconfig` cache, `/usr/lib/...`);
//! 3. `nvidia/nccl/lib/libnccl.so.2` under the Python package directories of these
//!    prefixes: `$VIRTUAL_ENV`, `$CONDA_PREFIX`, the parent of every `PATH` directory
//!    holding a `python3` (a virtual environment's or conda's `bin/`), `~/.local`,
//!    `/usr/local`, `/usr` and `/opt/conda`, each `lib/python3.*/{site,dist}-packages`
//!    (where `pip install nvidia-nccl-cu13`, or PyTorch's dependencies, put it; the GPU
//!    machine's PyTorch has it in `/opt/torch/.venv/lib/python3.12/site-packages`). A shell finds the same directory with
//!    `python3 -c "import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], 'lib'))"`.
//!
//! When none loads, or the library lacks an entry point, the answer is
//! [`OpsError::Nccl`] naming every path tried; nothing panics.

use crate::error::OpsError;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable naming the NCCL library file to load (only that one).
pub const ENV_NCCL_LIB: &str = "RCUTE_NCCL_LIB";

/// `ncclResult_t` as the C ABI returns it (read as an integer: no invalid enum values).
type Res = c_int;
type Stream = *mut c_void;

/// The NCCL entry points rcute calls.
#[allow(non_snake_case)]
pub struct Nccl {
    /// Where it was loaded from.
    pub path: String,
    pub(crate) GetVersion: unsafe extern "C" fn(*mut c_int) -> Res,
    pub(crate) GetErrorString: unsafe extern "C" fn(Res) -> *const c_char,
    pub(crate) GetUniqueId: unsafe extern "C" fn(*mut ncclUniqueId) -> Res,
    pub(crate) CommInitAll: unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> Res,
    pub(crate) CommInitRank: unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> Res,
    pub(crate) CommDestroy: unsafe extern "C" fn(ncclComm_t) -> Res,
    pub(crate) AllReduce:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclRedOp_t, ncclComm_t, Stream) -> Res,
    pub(crate) ReduceScatter:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclRedOp_t, ncclComm_t, Stream) -> Res,
    pub(crate) AllGather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclComm_t, Stream) -> Res,
    pub(crate) Send: unsafe extern "C" fn(*const c_void, usize, ncclDataType_t, c_int, ncclComm_t, Stream) -> Res,
    pub(crate) Recv: unsafe extern "C" fn(*mut c_void, usize, ncclDataType_t, c_int, ncclComm_t, Stream) -> Res,
    pub(crate) GroupStart: unsafe extern "C" fn() -> Res,
    pub(crate) GroupEnd: unsafe extern "C" fn() -> Res,
    /// Keeps the symbols valid.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl").field("path", &self.path).finish_non_exhaustive()
    }
}

/// The candidates of steps 2 and 3 (see the module docs), in order.
pub fn default_candidates() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = std::env::var_os(var) {
            prefixes.push(p.into());
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        prefixes.extend(python_prefixes(&path));
    }
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(Path::new(&home).join(".local"));
    }
    prefixes.extend(["/usr/local", "/usr", "/opt/conda"].map(PathBuf::from));
    let mut c = vec![PathBuf::from("libnccl.so.2"), PathBuf::from("libnccl.so")];
    for lib in site_packages_nccl(&prefixes) {
        if !c.contains(&lib) {
            c.push(lib);
        }
    }
    c
}

/// The parents of the directories of a `PATH`-like list that hold a `python3` (the
/// prefixes of virtual environments and conda installations on it).
pub fn python_prefixes(path: &std::ffi::OsStr) -> Vec<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.join("python3").exists())
        .filter_map(|dir| dir.parent().map(Path::to_path_buf))
        .collect()
}

/// The existing `lib/python3.*/{site,dist}-packages/nvidia/nccl/lib/libnccl.so.2` files
/// under `prefixes`, in order.
pub fn site_packages_nccl(prefixes: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for prefix in prefixes {
        let Ok(dir) = std::fs::read_dir(prefix.join("lib")) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = dir
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for py in pythons {
            for pkgs in ["site-packages", "dist-packages"] {
                let lib = py.join(pkgs).join("nvidia/nccl/lib/libnccl.so.2");
                if lib.exists() {
                    found.push(lib);
                }
            }
        }
    }
    found
}

/// The candidates this process uses: `RCUTE_NCCL_LIB` alone when set, else
/// [`default_candidates`].
pub fn candidates() -> Vec<PathBuf> {
    match std::env::var_os(ENV_NCCL_LIB) {
        Some(p) => vec![PathBuf::from(p)],
        None => default_candidates(),
    }
}

impl Nccl {
    /// The process's NCCL, loaded on first use from [`candidates`].
    ///
    /// # Errors
    ///
    /// [`OpsError::Nccl`] when no candidate loads (the message lists them).
    pub fn get() -> Result<&'static Nccl, OpsError> {
        static LIB: OnceLock<Result<Nccl, String>> = OnceLock::new();
        LIB.get_or_init(|| {
            Nccl::load_from(&candidates()).map_err(|e| match e {
                OpsError::Nccl(m) => m,
                other => other.to_string(),
            })
        })
        .as_ref()
        .map_err(|e| OpsError::Nccl(e.clone()))
    }

    /// Loads the first of `paths` that loads and has every entry point.
    ///
    /// ```
    /// use rcute_ops::ep::Nccl;
    /// let e = Nccl::load_from(&["/nonexistent/libnccl.so.2".into()]).unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent/libnccl.so.2"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`OpsError::Nccl`] naming every path and why it failed.
    pub fn load_from(paths: &[PathBuf]) -> Result<Nccl, OpsError> {
        let mut tried = Vec::new();
        for p in paths {
            match Self::open(p) {
                Ok(n) => return Ok(n),
                Err(why) => tried.push(format!("{}: {why}", p.display())),
            }
        }
        Err(OpsError::Nccl(format!(
            "libnccl.so.2 not found (set {ENV_NCCL_LIB} to its path, put its directory on LD_LIBRARY_PATH, or pip install nvidia-nccl-cu13); tried: {}",
            if tried.is_empty() { "nothing".to_string() } else { tried.join("; ") }
        )))
    }

    fn open(path: &Path) -> Result<Nccl, String> {
        // SAFETY: loading NCCL runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the type is NCCL's C signature of this symbol (nccl.h, 2.x).
                *unsafe { lib.get($name.as_bytes()) }.map_err(|e| format!("{}: {e}", $name))?
            };
        }
        Ok(Nccl {
            path: path.display().to_string(),
            GetVersion: sym!("ncclGetVersion"),
            GetErrorString: sym!("ncclGetErrorString"),
            GetUniqueId: sym!("ncclGetUniqueId"),
            CommInitAll: sym!("ncclCommInitAll"),
            CommInitRank: sym!("ncclCommInitRank"),
            CommDestroy: sym!("ncclCommDestroy"),
            AllReduce: sym!("ncclAllReduce"),
            ReduceScatter: sym!("ncclReduceScatter"),
            AllGather: sym!("ncclAllGather"),
            Send: sym!("ncclSend"),
            Recv: sym!("ncclRecv"),
            GroupStart: sym!("ncclGroupStart"),
            GroupEnd: sym!("ncclGroupEnd"),
            _lib: lib,
        })
    }

    /// `Ok` for `ncclSuccess`, else [`OpsError::Nccl`] with NCCL's message.
    pub(crate) fn check(&self, what: &str, r: Res) -> Result<(), OpsError> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let msg = unsafe {
            let s = (self.GetErrorString)(r);
            if s.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
            }
        };
        Err(OpsError::Nccl(format!("{what} failed: error {r} ({msg})")))
    }

    /// NCCL's version code (e.g. 22703 for 2.27.3).
    pub fn version(&self) -> Result<i32, OpsError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("ncclGetVersion", unsafe { (self.GetVersion)(&mut v) })?;
        Ok(v)
    }
}
