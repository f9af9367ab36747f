//! Compiling CUDA C++ to a CUBIN with NVRTC (through `cudarc`'s bindings).
//!
//! `cudarc` opens NVRTC by library *name* (`libnvrtc.so.13`, ...). To make it use the
//! library [`Toolkit::locate`] found — which is often not on the loader's search path,
//! e.g. the pip-wheel install — [`compile`] first opens that file by absolute path with
//! `RTLD_NOW | RTLD_GLOBAL`. The dynamic loader then resolves cudarc's later
//! `dlopen("libnvrtc.so.13")` to the already-loaded library through its soname.
//!
//! Every compilation passes `-std=c++17 --gpu-architecture=sm_XX -default-device
//! --ptxas-options=-v -I<toolkit includes>`, so the log always carries the ptxas resource
//! report parsed into [`Compiled::resources`].

use std::ffi::{c_char, CString};
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use cudarc::nvrtc::sys::{self, nvrtcResult};

pub use rcute_atom::{Arch, UnknownArch};

use crate::resources::ResourceReport;
use crate::toolkit::{Toolkit, ToolkitError};

/// Options for one NVRTC compilation. Build with [`CompileOptions::new`] and the
/// `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Target architecture.
    pub arch: Arch,
    /// Include directories searched before the toolkit's.
    pub include_dirs: Vec<PathBuf>,
    /// `-D` macro definitions: `(name, value)`.
    pub defines: Vec<(String, Option<String>)>,
    /// Emit line information (`-lineinfo`) for profilers.
    pub line_info: bool,
    /// Further NVRTC options, passed verbatim after the others.
    pub extra: Vec<String>,
}

impl CompileOptions {
    /// Default options for `arch`.
    pub fn new(arch: Arch) -> Self {
        CompileOptions {
            arch,
            include_dirs: Vec::new(),
            defines: Vec::new(),
            line_info: false,
            extra: Vec::new(),
        }
    }

    /// Adds an include directory.
    pub fn with_include_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.include_dirs.push(dir.into());
        self
    }

    /// Adds `-D name` or `-D name=value`.
    pub fn with_define(mut self, name: impl Into<String>, value: Option<&str>) -> Self {
        self.defines.push((name.into(), value.map(str::to_owned)));
        self
    }

    /// Enables or disables `-lineinfo`.
    pub fn with_line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Appends a raw NVRTC option such as `"--use_fast_math"`.
    pub fn with_option(mut self, option: impl Into<String>) -> Self {
        self.extra.push(option.into());
        self
    }

    /// The complete NVRTC argument list for a compilation with `toolkit`.
    pub fn nvrtc_args(&self, toolkit: &Toolkit) -> Vec<String> {
        let mut args = vec![
            "-std=c++17".to_owned(),
            self.arch.nvrtc_option(),
            "-default-device".to_owned(),
            "--ptxas-options=-v".to_owned(),
        ];
        if self.line_info {
            args.push("-lineinfo".to_owned());
        }
        for (name, value) in &self.defines {
            args.push(match value {
                Some(v) => format!("-D{name}={v}"),
                None => format!("-D{name}"),
            });
        }
        for dir in self.include_dirs.iter().chain(&toolkit.include_dirs) {
            args.push(format!("-I{}", dir.display()));
        }
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A successful compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compiled {
    /// The architecture compiled for.
    pub arch: Arch,
    /// The CUBIN (an ELF image loadable with `cuModuleLoadData`).
    pub cubin: Vec<u8>,
    /// NVRTC's log: warnings and the ptxas `-v` report.
    pub log: String,
    /// Per-kernel resource usage parsed from the log.
    ///
    /// When the log has no ptxas report, which NVRTC 13.0 does once the CUDA driver has
    /// been initialized in the same process (observed on an H200 with driver 580),
    /// [`compile`] reads the report from the CUBIN with `cuobjdump -res-usage`
    /// ([`ResourceReport::parse_cuobjdump`]); it stays empty only without a `cuobjdump`,
    /// and [`Function::resources`](crate::launch::Function::resources) then falls back to
    /// the driver's function attributes.
    pub resources: ResourceReport,
}

impl Compiled {
    /// The resource report read from the CUBIN with the toolkit's `cuobjdump -res-usage`
    /// ([`ResourceReport::parse_cuobjdump`]): what [`compile`] uses when the log has no
    /// ptxas report.
    pub fn cubin_resources(&self) -> Result<ResourceReport, crate::sass::SassError> {
        let tool = Toolkit::locate()?
            .cuobjdump
            .clone()
            .ok_or(crate::sass::SassError::NoCuobjdump)?;
        let text = crate::sass::run_cuobjdump(&tool, "-res-usage", &self.cubin)?;
        Ok(ResourceReport::parse_cuobjdump(&text, self.arch.as_str()))
    }

    /// Assembles a compilation result, parsing `resources` from `log`, or from the CUBIN
    /// when the log has no ptxas report ([`Compiled::cubin_resources`]; empty without a
    /// `cuobjdump`). A result loaded from the kernel cache gets the same report as a fresh
    /// compilation.
    pub fn new(arch: Arch, cubin: Vec<u8>, log: String) -> Self {
        let mut c = Compiled {
            resources: ResourceReport::parse(&log),
            arch,
            cubin,
            log,
        };
        if c.resources.kernels.is_empty() && !c.cubin.is_empty() {
            c.resources = c.cubin_resources().unwrap_or_default();
        }
        c
    }
}

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    /// Compilation fails.
    Error,
    /// Compilation continues.
    Warning,
    /// Extra information attached to another diagnostic.
    Remark,
}

/// One compiler message, parsed from lines like `kernel.cu(12): error: expected a ";"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based source line.
    pub line: u32,
    /// 1-based column, when the compiler marked it with a caret.
    pub col: Option<u32>,
    /// Error, warning or remark.
    pub severity: Severity,
    /// The message, e.g. `expected a ";"` (warning numbers like `#177-D` are kept).
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Remark => "remark",
        };
        match self.col {
            Some(c) => write!(f, "{}:{c}: {sev}: {}", self.line, self.message),
            None => write!(f, "{}: {sev}: {}", self.line, self.message),
        }
    }
}

/// Why a compilation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CompileError {
    /// No usable CUDA toolkit.
    #[error(transparent)]
    Toolkit(#[from] ToolkitError),
    /// The NVRTC library was found but could not be loaded.
    #[error("cannot load NVRTC from {}: {reason}", path.display())]
    Load {
        /// The library file.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The source or an option contains a NUL byte.
    #[error("{what} contains a NUL byte")]
    InvalidInput {
        /// `"source"`, `"name"` or `"option"`.
        what: &'static str,
    },
    /// The source did not compile.
    #[error("compilation failed with {} error(s):\n{log}", diagnostics.iter().filter(|d| d.severity == Severity::Error).count())]
    Compile {
        /// Errors and warnings parsed from the log.
        diagnostics: Vec<Diagnostic>,
        /// The full NVRTC log.
        log: String,
    },
    /// An NVRTC call failed for another reason (bad option, out of memory, ...).
    #[error("{call} failed: {code:?}{}", if log.is_empty() { String::new() } else { format!("\n{log}") })]
    Nvrtc {
        /// The NVRTC function.
        call: &'static str,
        /// Its result code.
        code: nvrtcResult,
        /// The program log, if any.
        log: String,
    },
}

impl CompileError {
    /// The parsed diagnostics of a [`CompileError::Compile`]; empty otherwise.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            CompileError::Compile { diagnostics, .. } => diagnostics,
            _ => &[],
        }
    }
}

/// Loads the located NVRTC (once per process) so cudarc's bindings resolve to it.
pub(crate) fn ensure_nvrtc() -> Result<&'static Toolkit, CompileError> {
    static LOADED: OnceLock<Result<(), CompileError>> = OnceLock::new();
    let toolkit = Toolkit::locate()?;
    LOADED.get_or_init(|| preload(toolkit)).clone()?;
    Ok(toolkit)
}

fn preload(toolkit: &Toolkit) -> Result<(), CompileError> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    let load_err = |path: &PathBuf, e: libloading::Error| CompileError::Load {
        path: path.clone(),
        reason: e.to_string(),
    };
    // NVRTC dlopens its builtins library by soname at first use; load the copy next to it
    // first so that works when the directory is not on the search path.
    if let Some(dir) = toolkit.nvrtc_library.parent() {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("libnvrtc-builtins.so.") && !name.contains(".alt.") {
                    // SAFETY: loading NVIDIA's library runs only its trusted initialisers.
                    let lib = unsafe { Library::open(Some(entry.path()), RTLD_NOW | RTLD_GLOBAL) }
                        .map_err(|e| load_err(&entry.path(), e))?;
                    std::mem::forget(lib); // stays loaded for the life of the process
                }
            }
        }
    }
    let path = &toolkit.nvrtc_library;
    // SAFETY: as above.
    let ours = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| load_err(path, e))?;
    // Check cudarc ends up on the same library (it could pick an unrelated `libnvrtc.so`
    // first on its candidate list). `culib` would panic if nothing is found; it cannot
    // here because the soname `libnvrtc.so.N` is now resident.
    // SAFETY: symbol lookups only; the pointers are compared, never called.
    let same = unsafe {
        let mine = ours.get::<*const ()>(b"nvrtcVersion").map(|s| *s).ok();
        let theirs = std::panic::catch_unwind(|| sys::culib().get::<*const ()>(b"nvrtcVersion").map(|s| *s).ok())
            .ok()
            .flatten();
        mine.is_some() && mine == theirs
    };
    std::mem::forget(ours);
    if !same {
        return Err(CompileError::Load {
            path: path.clone(),
            reason: "cudarc resolved a different libnvrtc (another libnvrtc.so is on the search path); \
                     set RCUTE_CUDA_HOME to that toolkit"
                .into(),
        });
    }
    Ok(())
}

/// The NVRTC version `(major, minor)`, loading NVRTC if needed.
pub fn nvrtc_version() -> Result<(i32, i32), CompileError> {
    ensure_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: out-pointers to live locals.
    check(
        "nvrtcVersion",
        unsafe { sys::nvrtcVersion(&mut major, &mut minor) },
        String::new,
    )?;
    Ok((major, minor))
}

fn check(call: &'static str, code: nvrtcResult, log: impl FnOnce() -> String) -> Result<(), CompileError> {
    match code {
        nvrtcResult::NVRTC_SUCCESS => Ok(()),
        code => Err(CompileError::Nvrtc { call, code, log: log() }),
    }
}

/// Destroys the NVRTC program on every exit path.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

impl Program {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: valid program, out-pointer to a local; the buffer has `size` bytes.
        unsafe {
            if sys::nvrtcGetProgramLogSize(self.0, &mut size) != nvrtcResult::NVRTC_SUCCESS || size == 0 {
                return String::new();
            }
            let mut buf = vec![0u8; size];
            if sys::nvrtcGetProgramLog(self.0, buf.as_mut_ptr() as *mut c_char) != nvrtcResult::NVRTC_SUCCESS {
                return String::new();
            }
            c_buffer_to_string(buf)
        }
    }

    fn cubin(&self) -> Result<Vec<u8>, CompileError> {
        let mut size = 0usize;
        // SAFETY: valid, compiled program; the buffer has `size` bytes.
        unsafe {
            check("nvrtcGetCUBINSize", sys::nvrtcGetCUBINSize(self.0, &mut size), || {
                self.log()
            })?;
            let mut buf = vec![0u8; size];
            check(
                "nvrtcGetCUBIN",
                sys::nvrtcGetCUBIN(self.0, buf.as_mut_ptr() as *mut c_char),
                || self.log(),
            )?;
            Ok(buf)
        }
    }
}

fn c_buffer_to_string(mut buf: Vec<u8>) -> String {
    if let Some(nul) = buf.iter().position(|&b| b == 0) {
        buf.truncate(nul);
    }
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Compiles `source` (CUDA C++) to a CUBIN for `opts.arch`.
///
/// `name` is the program's file name as it appears in diagnostics (e.g. `"gemm.cu"`).
/// Kernels meant to be looked up by name should be `extern "C"`.
pub fn compile(source: &str, name: &str, opts: &CompileOptions) -> Result<Compiled, CompileError> {
    let toolkit = ensure_nvrtc()?;
    let c_source = CString::new(source).map_err(|_| CompileError::InvalidInput { what: "source" })?;
    let c_name = CString::new(name).map_err(|_| CompileError::InvalidInput { what: "name" })?;
    let c_args = opts
        .nvrtc_args(toolkit)
        .into_iter()
        .map(CString::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| CompileError::InvalidInput { what: "option" })?;
    let arg_ptrs: Vec<*const c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    let num_args = i32::try_from(arg_ptrs.len()).map_err(|_| CompileError::InvalidInput { what: "option" })?;

    let mut raw = std::ptr::null_mut();
    // SAFETY: all strings are NUL-terminated and outlive the call; no headers are passed.
    check(
        "nvrtcCreateProgram",
        unsafe {
            sys::nvrtcCreateProgram(
                &mut raw,
                c_source.as_ptr(),
                c_name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        },
        String::new,
    )?;
    let program = Program(raw);
    // SAFETY: `arg_ptrs` points into `c_args`, alive for the call.
    let status = unsafe { sys::nvrtcCompileProgram(program.0, num_args, arg_ptrs.as_ptr()) };
    let log = program.log();
    match status {
        nvrtcResult::NVRTC_SUCCESS => {}
        nvrtcResult::NVRTC_ERROR_COMPILATION => {
            return Err(CompileError::Compile {
                diagnostics: parse_diagnostics(&log),
                log,
            });
        }
        code => {
            return Err(CompileError::Nvrtc {
                call: "nvrtcCompileProgram",
                code,
                log,
            })
        }
    }
    let cubin = program.cubin()?;
    Ok(Compiled::new(opts.arch, cubin, log))
}

/// Parses NVRTC front-end messages (`<name>(<line>): <severity>: <message>`), taking the
/// column from the caret line that follows the echoed source line, when present.
pub fn parse_diagnostics(log: &str) -> Vec<Diagnostic> {
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((lineno, severity, message)) = parse_diagnostic_line(line) else {
            continue;
        };
        // EDG echoes the offending source line indented by two spaces, then a caret line
        // that copies the line's tabs so the caret sits under the column.
        let col = lines.get(i + 2).and_then(|caret| {
            let t = caret.trim_end();
            let before = t.strip_suffix('^')?;
            let ok = before.len() >= 2 && before.bytes().all(|b| b == b' ' || b == b'\t');
            ok.then(|| (before.len() - 2 + 1) as u32)
        });
        out.push(Diagnostic {
            line: lineno,
            col,
            severity,
            message,
        });
    }
    out
}

fn parse_diagnostic_line(line: &str) -> Option<(u32, Severity, String)> {
    // "<name>(<line>): <severity>[ #num-D]: <message>"; the name may contain '(' itself.
    let close = line.find("): ")?;
    let open = line[..close].rfind('(')?;
    let lineno = line[open + 1..close].parse().ok()?;
    let rest = &line[close + 3..];
    let (severity, after) = [
        ("error", Severity::Error),
        ("warning", Severity::Warning),
        ("remark", Severity::Remark),
    ]
    .into_iter()
    .find_map(|(word, sev)| rest.strip_prefix(word).map(|r| (sev, r)))?;
    // Either ": message" or " #177-D: message".
    let message = if let Some(m) = after.strip_prefix(": ") {
        m.to_owned()
    } else {
        let (num, m) = after.strip_prefix(' ')?.split_once(": ")?;
        format!("{m} [{num}]")
    };
    Some((lineno, severity, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_round_trip() {
        for a in Arch::ALL {
            assert_eq!(a.as_str().parse::<Arch>(), Ok(a));
            let (ma, mi) = a.compute_capability();
            assert_eq!(Arch::from_compute_capability(ma, mi, a.is_arch_specific()), Some(a));
        }
        assert_eq!(Arch::from_compute_capability(9, 0, true).unwrap().as_str(), "sm_90a");
        assert_eq!(Arch::from_compute_capability(8, 0, true), Some(Arch::Sm80));
        assert_eq!(Arch::from_compute_capability(6, 1, false), None);
        assert!("sm_61".parse::<Arch>().is_err());
    }

    #[test]
    fn diagnostics_are_parsed_with_columns() {
        // A real NVRTC 13.0 log; line 4 of the source starts with a tab.
        let log = include_str!("../tests/data/compile_error.log");
        let d = parse_diagnostics(log);
        let undefined = Diagnostic {
            line: 4,
            col: Some(9),
            severity: Severity::Error,
            message: "identifier \"undefined_thing\" is undefined".into(),
        };
        assert_eq!(d[0], undefined);
        assert_eq!(
            d[1],
            Diagnostic {
                line: 6,
                col: Some(3),
                severity: Severity::Error,
                message: "expected a \";\"".into()
            }
        );
        assert_eq!((d[2].line, d[2].col, d[2].severity), (5, Some(7), Severity::Warning));
        assert!(d[2].message.contains("never referenced") && d[2].message.contains("#177-D"));
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(
            d[0].to_string(),
            "4:9: error: identifier \"undefined_thing\" is undefined"
        );
    }

    #[test]
    fn args_contain_the_mandatory_options() {
        let tk = Toolkit {
            root: "/cuda".into(),
            source: crate::toolkit::ToolkitSource::Explicit,
            nvrtc_library: "/cuda/lib64/libnvrtc.so.13".into(),
            include_dirs: vec!["/cuda/include".into()],
            cuobjdump: None,
        };
        let args = CompileOptions::new(Arch::Sm90a)
            .with_define("N", Some("4"))
            .with_option("--use_fast_math")
            .nvrtc_args(&tk);
        for want in [
            "-std=c++17",
            "--gpu-architecture=sm_90a",
            "-default-device",
            "--ptxas-options=-v",
            "-I/cuda/include",
            "-DN=4",
            "--use_fast_math",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} missing from {args:?}");
        }
    }
}
