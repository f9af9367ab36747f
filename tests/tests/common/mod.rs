//! Helpers shared by the GPU integration tests: a seeded RNG, architecture mapping,
//! compile-here-run-there plumbing, the runner of `rcute_atom::harness` kernels and the
//! closeness check of a bf16 output against its float64 reference ([`check_close`]).
#![allow(dead_code)]

use std::sync::Arc;

use rcute_atom::harness::TestKernel;
use rcute_kernel::testing::{gpu_for_test, toolkit_for_test};
use rcute_kernel::{Arch, CompileOptions, Compiled, Gpu, KernelArgs, KernelCache, LaunchConfig};

/// SplitMix64: small, fast, good enough for test data.
pub struct Rng(u64);

impl Rng {
    /// A generator for the test `name`: seed from `RCUTE_SEED` if set, else fresh (time
    /// based); the seed is printed so a failure can be reproduced.
    pub fn for_test(name: &str) -> Rng {
        let seed = match std::env::var("RCUTE_SEED").ok().and_then(|s| s.parse::<u64>().ok()) {
            Some(s) => s,
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x1234_5678),
        };
        let mut h = seed;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        eprintln!("{name}: RCUTE_SEED={seed}");
        Rng(h)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }
    /// A non-zero 16-bit pattern.
    pub fn nonzero_u16(&mut self) -> u16 {
        loop {
            let v = self.next_u32() as u16;
            if v != 0 {
                return v;
            }
        }
    }
    /// A non-zero 32-bit word.
    pub fn nonzero_u32(&mut self) -> u32 {
        loop {
            let v = self.next_u32();
            if v != 0 {
                return v;
            }
        }
    }
}

/// Compile `src` for `arch` (panicking with the diagnostics and the source on failure).
pub fn compile(src: &str, name: &str, arch: Arch) -> Arc<Compiled> {
    match KernelCache::global().get_or_compile(src, name, &CompileOptions::new(arch)) {
        Ok(c) => c,
        Err(e) => {
            let numbered: String = src
                .lines()
                .enumerate()
                .map(|(i, l)| format!("{:4} {l}\n", i + 1))
                .collect();
            panic!("compiling {name} for {arch} failed: {e}\n{numbered}")
        }
    }
}

/// Compile `src` for its minimum architecture `min` here (NVRTC, no GPU needed), then,
/// on a GPU, for the device's architecture. Returns `None` (after printing why) when the
/// kernel cannot run here.
pub fn compile_and_gpu(src: &str, name: &str, min: Arch) -> Option<(Gpu, Arc<Compiled>)> {
    toolkit_for_test()?;
    let c = compile(src, name, min);
    assert!(!c.cubin.is_empty());
    let gpu = gpu_for_test()?;
    let dev = gpu.arch().expect("a supported GPU architecture");
    let ok = if min.is_arch_specific() {
        dev == min
    } else {
        dev.compute_capability() >= min.compute_capability()
    };
    if !ok {
        let msg = format!("{name} needs {min}, the GPU is {dev}");
        if std::env::var(rcute_kernel::testing::ENV_REQUIRE_GPU).is_ok_and(|v| v == "1")
            && dev.compute_capability().0 >= 9
        {
            panic!("{msg}");
        }
        eprintln!("skipping: {msg}");
        return None;
    }
    let c = if dev == min { c } else { compile(src, name, dev) };
    Some((gpu, c))
}

/// Results of a harness kernel run.
pub struct HarnessRun {
    /// `rc_out`, `out_words_per_thread` words per thread.
    pub out: Vec<u32>,
    /// `rc_gmem` after the kernel (shared mirror first).
    pub gmem: Vec<u8>,
}

/// Run a [`TestKernel`] once: `input` is `rc_in`, `gmem` the initial `rc_gmem`; `rc_out`
/// is poisoned with `0xDEADBEEF` first.
pub fn run_harness(gpu: &Gpu, compiled: &Compiled, k: &TestKernel, input: &[u32], gmem: &[u8]) -> HarnessRun {
    let threads = k.block_threads as usize;
    assert!(input.len() >= threads * k.in_words_per_thread);
    assert_eq!(gmem.len(), k.gmem_bytes);
    let module = gpu.load(compiled).expect("load module");
    let f = module.function(&k.name).expect("function");
    let stream = gpu.stream();
    let mut inp = input.to_vec();
    if inp.is_empty() {
        inp.push(0);
    }
    let out_len = threads * k.out_words_per_thread.max(1);
    let d_in = stream.clone_htod(&inp).unwrap();
    let d_out = stream.clone_htod(&vec![0xDEAD_BEEFu32; out_len]).unwrap();
    let mut g = gmem.to_vec();
    if g.is_empty() {
        g.push(0);
    }
    let d_gmem = stream.clone_htod(&g).unwrap();
    let args = KernelArgs::new().slice(&d_in).slice(&d_out).slice(&d_gmem).u64(0);
    let cfg = LaunchConfig::new(1, k.block_threads).with_checked(true);
    // SAFETY: (u32 const*, u32*, u8*, void const*) with buffers of the sizes the harness
    // kernel reads and writes; the tensor map pointer is unused (null).
    unsafe { f.launch(&cfg, &args) }.unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let out = stream.clone_dtoh(&d_out).unwrap();
    let mut gm = stream.clone_dtoh(&d_gmem).unwrap();
    gm.truncate(k.gmem_bytes);
    HarnessRun { out, gmem: gm }
}

/// `layout(t, v)` of a (thread, value) layout, as an integer.
pub fn tv_at(l: &rcute_layout::Layout, t: i64, v: i64) -> i64 {
    l.crd2idx(&rcute_layout::tuple!(t, v))
        .unwrap_or_else(|e| panic!("{l} at ({t},{v}): {e}"))
        .as_static()
        .unwrap_or_else(|| panic!("{l} at ({t},{v}) is not static"))
}

/// Pack `vals` (each `bits` wide, 8/16/32) into 32-bit words, element 0 in the low bits.
pub fn pack(vals: &[u32], bits: u32) -> Vec<u32> {
    let per = (32 / bits) as usize;
    let mut out = vec![0u32; vals.len().div_ceil(per)];
    for (i, &v) in vals.iter().enumerate() {
        let mask = if bits == 32 { u32::MAX } else { (1u32 << bits) - 1 };
        out[i / per] |= (v & mask) << ((i % per) as u32 * bits);
    }
    out
}

/// Element `i` (of `bits` width) of packed words.
pub fn unpack(words: &[u32], bits: u32, i: usize) -> u32 {
    let per = (32 / bits) as usize;
    let w = words[i / per];
    if bits == 32 {
        w
    } else {
        (w >> ((i % per) as u32 * bits)) & ((1u32 << bits) - 1)
    }
}

/// A bf16 output `got` against its float64 reference `want` (`what` names it in the
/// messages): the same length, every element finite, relative Frobenius error below 1e-2
/// and no element off by more than 3% of the largest `|want|`; prints both errors.
pub fn check_close(what: &str, got: &[half::bf16], want: &[f64]) {
    check_close_within(what, got, want, 1e-2);
}

/// [`check_close`] with the relative Frobenius bound `rel_bound` (the per-element bound
/// stays 3% of the largest `|want|`).
pub fn check_close_within(what: &str, got: &[half::bf16], want: &[f64], rel_bound: f64) {
    check_close_bounds(what, got, want, rel_bound, 3e-2);
}

/// [`check_close`] with the relative Frobenius bound `rel_bound` and no element off by more
/// than `elem_bound` times the largest `|want|`.
pub fn check_close_bounds(what: &str, got: &[half::bf16], want: &[f64], rel_bound: f64, elem_bound: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let (mut num, mut den, mut maxref, mut maxerr) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        let g = g.to_f64();
        assert!(g.is_finite(), "{what}: non-finite output {g}");
        num += (g - w) * (g - w);
        den += w * w;
        maxref = maxref.max(w.abs());
        maxerr = maxerr.max((g - w).abs());
    }
    let rel = (num / den.max(1e-300)).sqrt();
    eprintln!("{what}: relative error {rel:.2e}, max abs error {maxerr:.2e} (max |ref| {maxref:.2e})");
    assert!(
        rel < rel_bound,
        "{what}: relative Frobenius error {rel} (bound {rel_bound})"
    );
    assert!(
        maxerr <= elem_bound * maxref + 1e-6,
        "{what}: max error {maxerr} vs max |ref| {maxref} (bound {elem_bound} of it)"
    );
}
