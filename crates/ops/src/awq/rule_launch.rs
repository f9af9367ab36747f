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

/// Every `(m, n, k, sms)` of the lists, SMs outermost and K innermost: the shapes a
/// rule's test walks.
pub(crate) fn cases<M, N>(sms: &[usize], ms: M, ns: N, ks: &[usize]) -> Vec<(usize, usize, usize, usize)>
where
    M: IntoIterator<Item = usize> + Clone,
    N: IntoIterator<Item = usize> + Clone,
{
    let mut out = Vec::new();
    for &s in sms {
        for m in ms.clone() {
            for n in ns.clone() {
                out.extend(ks.iter().map(|&k| (m, n, k, s)));
            }
        }
    }
    out
}

/// A rule's choice at one shape `(m, n, k, sms)`: the configuration, the K splits asked
/// for, and how it launches ([`launched`]: the K splits run and the CTAs).
pub(crate) type Choice = ((usize, usize, usize, usize), AwqGemmConfig, u32, (i32, usize));

/// The shapes of `cases` where `select(m, n, k, sms)` chooses, with the choice and its
/// launch; a rule that chooses at none of them fails the test.
pub(crate) fn choices(
    cases: Vec<(usize, usize, usize, usize)>,
    select: impl Fn(usize, usize, usize, usize) -> Option<(AwqGemmConfig, u32)>,
) -> Vec<Choice> {
    let out: Vec<Choice> = cases
        .into_iter()
        .filter_map(|(m, n, k, sms)| {
            let (cfg, splits) = select(m, n, k, sms)?;
            Some(((m, n, k, sms), cfg, splits, launched(&cfg, m, n, k, splits)))
        })
        .collect();
    assert!(!out.is_empty(), "the rule chose at none of the shapes");
    out
}
