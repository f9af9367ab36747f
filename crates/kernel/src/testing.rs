//! Helpers for tests that need NVRTC or a GPU, anywhere in the workspace.
//!
//! Tests call [`toolkit_for_test`] or [`gpu_for_test`] first and return early on `None`, so
//! `cargo test` passes on machines without CUDA while still saying what was skipped. Two
//! environment variables turn a skip into a failure:
//!
//! * `CI` (any value): NVRTC must be available — CI compiles every kernel.
//! * `RCUTE_REQUIRE_GPU=1`: a GPU must be available — set on GPU runners.

use crate::device::Gpu;
use crate::toolkit::Toolkit;

/// Environment variable that makes [`gpu_for_test`] panic instead of skipping.
pub const ENV_REQUIRE_GPU: &str = "RCUTE_REQUIRE_GPU";

/// The located toolkit, or `None` (after printing why) when there is none.
///
/// # Panics
///
/// When `CI` is set and no toolkit is found.
pub fn toolkit_for_test() -> Option<&'static Toolkit> {
    match Toolkit::locate() {
        Ok(tk) => Some(tk),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NVRTC is unavailable: {e}")
        }
        Err(e) => {
            eprintln!("skipping: no NVRTC ({e})");
            None
        }
    }
}

/// GPU 0, or `None` (after printing why) when there is no usable CUDA GPU.
///
/// # Panics
///
/// When `RCUTE_REQUIRE_GPU=1` and no GPU can be opened.
pub fn gpu_for_test() -> Option<Gpu> {
    let reason = match Gpu::open(0) {
        Ok(gpu) => return Some(gpu),
        Err(e) => e.to_string(),
    };
    if std::env::var(ENV_REQUIRE_GPU).is_ok_and(|v| v == "1") {
        panic!("{ENV_REQUIRE_GPU}=1 but no CUDA GPU: {reason}");
    }
    eprintln!("skipping: no CUDA GPU ({reason})");
    None
}
