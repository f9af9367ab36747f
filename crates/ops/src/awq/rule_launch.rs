//! Test support for the AWQ rules' unit tests: how a configuration a rule chose launches
//! (the K splits it runs and its CTAs), which each rule's test bounds by the SMs.

use rcute_kernel::awq_gemm::{generate, AwqGemmConfig, GeneratedAwqGemm};

/// The K splits `g` runs at `m x n x k` when `splits` are asked for, and its CTAs.
pub(crate) fn launch_of(g: &GeneratedAwqGemm, m: usize, n: usize, k: usize, splits: u32) -> (i32, usize) {
    let (_, run) = g.split_plan(k as i32, splits as i32);
    let grid = g.launch_config(m as i32, n as i32, run).grid;
    (run, grid.volume().expect("a grid that fits u32") as usize)
}

/// [`launch_of`] the kernel `cfg` generates.
pub(crate) fn launched(cfg: &AwqGemmConfig, m: usize, n: usize, k: usize, splits: u32) -> (i32, usize) {
    launch_of(&generate(cfg).unwrap(), m, n, k, splits)
}
