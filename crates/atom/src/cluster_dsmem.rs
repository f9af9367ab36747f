//! Distributed shared memory for kernels that run on sm_80 and on sm_90: the cluster's
//! size, cluster barriers (release or relaxed arrive with the wait), a 16-byte load from
//! a peer CTA's shared memory, an mbarrier that counts the bytes peers push into this
//! CTA's shared memory, the push itself (`st.async` into a peer CTA's shared memory,
//! completing bytes on that CTA's mbarrier) and the parity wait on the mbarrier. Each is
//! guarded by the architecture (before sm_90 a kernel is never launched in clusters: the
//! size is 1, the load gives zeros and the others do nothing), so one generated unit
//! compiles for both and takes the cluster path only where the launch asked for clusters.
//!
//! Two clustered split-K sums: by loads, every rank leaves its partials in its own shared
//! memory, a cluster barrier publishes them ([`cluster_sync_sm90`]), rank 0 reads them
//! ([`ld_dsmem_f32x4`]) and a second barrier ([`cluster_sync_relaxed_sm90`]) keeps the
//! peers alive until it has. By pushes: rank 0 initialises its mbarrier with one arrival
//! and the peers' bytes as expected transactions ([`push_barrier_init_sm90`], which also
//! publishes the init to the cluster) and every thread of the cluster meets at a relaxed
//! cluster barrier ([`cluster_sync_relaxed_sm90`]) before any push; a peer pushes
//! ([`st_async_b32`]) and may exit after its last push; rank 0 waits for the bytes
//! ([`mbarrier_wait_parity_sm90`]). No release fence: on sm_90 a release
//! `barrier.cluster.arrive` is a GPU-scope fence (`MEMBAR.ALL.GPU`), which waits for the
//! thread's outstanding global stores too. (An arrive without its wait, in a CTA that
//! then exits, kept compute-sanitizer's racecheck from finishing: every arrive here has
//! its wait.)
//!
//! ```
//! use rcute_atom::cluster_dsmem::*;
//! let all = [
//!     cluster_size_sm90(),
//!     cluster_sync_relaxed_sm90(),
//!     push_barrier_init_sm90(),
//!     st_async_b32(4).unwrap(),
//!     mbarrier_wait_parity_sm90(),
//! ];
//! for s in &all {
//!     assert!(s.code.contains("__CUDA_ARCH__ >= 900"), "{}", s.name);
//!     assert!(!s.code.contains("barrier.cluster.arrive.aligned"), "{}: a release arrive", s.name);
//! }
//! assert!(cluster_sync_sm90().code.contains("barrier.cluster.arrive.aligned"));
//! assert!(ld_dsmem_f32x4().code.contains("ld.shared::cluster.v4.f32"));
//! assert!(st_async_b32(2).unwrap().code.contains("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32"));
//! assert!(st_async_b32(3).is_none());
//! ```

use crate::arch::Arch;
use crate::snippet::{asm_stmt, Dir, Param, Snippet};

fn on_sm90(sm90: &str, before: &str) -> String {
    format!("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n{sm90}#else\n{before}#endif\n")
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `rc_cluster_sync_sm90()`: `barrier.cluster.arrive` (release) and `barrier.cluster.wait`
/// (acquire) by every thread of the CTA on sm_90; nothing before.
pub fn cluster_sync_sm90() -> Snippet {
    let body = asm_stmt(
        &[
            "barrier.cluster.arrive.aligned;".into(),
            "barrier.cluster.wait.aligned;".into(),
        ],
        &[],
        &[],
        true,
    );
    Snippet::build("rc_cluster_sync_sm90", Arch::SM80, 32, vec![], &on_sm90(&body, ""))
}

/// `rc_cluster_sync_relaxed_sm90()`: `barrier.cluster.arrive.relaxed` and
/// `barrier.cluster.wait` by every thread of the CTA on sm_90; nothing before. The arrive
/// orders no memory: for threads that published nothing to the cluster, or for a barrier
/// that only keeps the CTAs' shared memory alive until every peer has *read* it (the reads
/// are done when their values are used). The release arrive of
/// [`cluster_sync_sm90`] is a GPU-scope fence on sm_90 (`MEMBAR.ALL.GPU`), which waits for
/// the thread's outstanding global stores too.
///
/// ```
/// let s = rcute_atom::cluster_dsmem::cluster_sync_relaxed_sm90();
/// assert!(s.code.contains("barrier.cluster.arrive.relaxed.aligned"));
/// assert!(s.code.contains("__CUDA_ARCH__ >= 900"));
/// ```
pub fn cluster_sync_relaxed_sm90() -> Snippet {
    let body = asm_stmt(
        &[
            "barrier.cluster.arrive.relaxed.aligned;".into(),
            "barrier.cluster.wait.aligned;".into(),
        ],
        &[],
        &[],
        true,
    );
    Snippet::build(
        "rc_cluster_sync_relaxed_sm90",
        Arch::SM80,
        32,
        vec![],
        &on_sm90(&body, ""),
    )
}

/// `rc_cluster_size_sm90()`: `%cluster_nctarank` (CTAs in this CTA's cluster) on sm_90; 1
/// before.
pub fn cluster_size_sm90() -> Snippet {
    let sm90 = String::from("uint32_t n;\n")
        + &asm_stmt(
            &["mov.u32 %0, %%cluster_nctarank;".into()],
            &["\"=r\"(n)".into()],
            &[],
            false,
        )
        + "return n;\n";
    Snippet::build(
        "rc_cluster_size_sm90",
        Arch::SM80,
        1,
        vec![],
        &on_sm90(&sm90, "return 1u;\n"),
    )
    .returning("uint32_t")
}

/// `rc_push_barrier_init_sm90(mbar, bytes)` (one thread): the mbarrier at shared address
/// `mbar` initialised with one arrival, that arrival made with `bytes` expected
/// transactions (`mbarrier.arrive.expect_tx`: phase 0 completes when peers have pushed
/// `bytes` bytes), and the init published to the cluster
/// (`fence.mbarrier_init.release.cluster`, before the cluster barrier) on sm_90; nothing
/// before.
///
/// ```
/// let s = rcute_atom::cluster_dsmem::push_barrier_init_sm90();
/// assert!(s.code.contains("mbarrier.init.shared::cta.b64 [%0], 1;"));
/// assert!(s.code.contains("fence.mbarrier_init.release.cluster;"));
/// ```
pub fn push_barrier_init_sm90() -> Snippet {
    let params = vec![Param::scalar("mbar", "uint32_t"), Param::scalar("bytes", "uint32_t")];
    let body = asm_stmt(
        &lines(&[
            "mbarrier.init.shared::cta.b64 [%0], 1;",
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;",
            "fence.mbarrier_init.release.cluster;",
        ]),
        &[],
        &["\"r\"(mbar)".into(), "\"r\"(bytes)".into()],
        true,
    );
    Snippet::build("rc_push_barrier_init_sm90", Arch::SM80, 1, params, &on_sm90(&body, ""))
}

/// `rc_st_async_b32x{n}(addr, mbar, rank, v)` for `n` in 1, 2, 4: the `n` words `v` to
/// shared address `addr` of CTA `rank` of the cluster, completing `4 n` bytes on that CTA's
/// mbarrier at shared address `mbar` (both this CTA's 32-bit offsets, mapped by
/// `mapa.shared::cluster`; `st.async.shared::cluster.mbarrier::complete_tx::bytes`, PTX ISA
/// 8.1, sm_90; `addr` aligned to `4 n` bytes) on sm_90; nothing before. The words are
/// read from the registers at issue: the pushing CTA may exit after it, the receiving
/// one reads them after its mbarrier's phase completed.
pub fn st_async_b32(n: usize) -> Option<Snippet> {
    let vec = match n {
        1 => "",
        2 => ".v2",
        4 => ".v4",
        _ => return None,
    };
    let params = vec![
        Param::scalar("addr", "uint32_t"),
        Param::scalar("mbar", "uint32_t"),
        Param::scalar("rank", "uint32_t"),
        Param::regs("v", "uint32_t", n, Dir::In),
    ];
    let words: Vec<String> = (0..n).map(|i| format!("%{}", 3 + i)).collect();
    let value = if n == 1 {
        words[0].clone()
    } else {
        format!("{{{}}}", words.join(", "))
    };
    let asm = vec![
        "{".to_string(),
        ".reg .b32 rc_a, rc_b;".into(),
        "mapa.shared::cluster.u32 rc_a, %0, %2;".into(),
        "mapa.shared::cluster.u32 rc_b, %1, %2;".into(),
        format!("st.async.shared::cluster.mbarrier::complete_tx::bytes{vec}.b32 [rc_a], {value}, [rc_b];"),
        "}".into(),
    ];
    let mut ins: Vec<String> = vec!["\"r\"(addr)".into(), "\"r\"(mbar)".into(), "\"r\"(rank)".into()];
    ins.extend((0..n).map(|i| format!("\"r\"(v[{i}])")));
    let body = asm_stmt(&asm, &[], &ins, true);
    Some(Snippet::build(
        format!("rc_st_async_b32x{n}"),
        Arch::SM80,
        1,
        params,
        &on_sm90(&body, ""),
    ))
}

/// `rc_mbarrier_wait_parity_sm90(mbar, parity)`: spin on
/// `mbarrier.try_wait.parity.shared::cta.b64` (acquire, CTA scope: the bytes peers pushed
/// with [`st_async_b32`] are visible after it) until the phase of parity `parity` of the
/// mbarrier at shared address `mbar` completed, on sm_90; nothing before.
pub fn mbarrier_wait_parity_sm90() -> Snippet {
    let params = vec![Param::scalar("mbar", "uint32_t"), Param::scalar("parity", "uint32_t")];
    let probe = asm_stmt(
        &lines(&[
            "{",
            ".reg .pred rc_p;",
            "mbarrier.try_wait.parity.shared::cta.b64 rc_p, [%1], %2;",
            "selp.u32 %0, 1, 0, rc_p;",
            "}",
        ]),
        &["\"=r\"(done)".into()],
        &["\"r\"(mbar)".into(), "\"r\"(parity)".into()],
        true,
    );
    let body = format!("uint32_t done = 0u;\nwhile (!done) {{\n{probe}}}\n");
    Snippet::build(
        "rc_mbarrier_wait_parity_sm90",
        Arch::SM80,
        1,
        params,
        &on_sm90(&body, ""),
    )
}

/// `rc_ld_dsmem_f32x4(addr, rank, v)`: four floats at shared address `addr` (this CTA's
/// 32-bit shared offset) of CTA `rank` of the cluster (`mapa.shared::cluster` +
/// `ld.shared::cluster.v4.f32`) on sm_90; zeros before.
pub fn ld_dsmem_f32x4() -> Snippet {
    let params = vec![
        Param::scalar("addr", "uint32_t"),
        Param::scalar("rank", "uint32_t"),
        Param::regs("v", "float", 4, Dir::Out),
    ];
    let lines: Vec<String> = [
        "{",
        ".reg .b32 rc_remote;",
        "mapa.shared::cluster.u32 rc_remote, %4, %5;",
        "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [rc_remote];",
        "}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let outs: Vec<String> = (0..4).map(|i| format!("\"=f\"(v[{i}])")).collect();
    let sm90 = asm_stmt(&lines, &outs, &["\"r\"(addr)".into(), "\"r\"(rank)".into()], true);
    Snippet::build(
        "rc_ld_dsmem_f32x4",
        Arch::SM80,
        1,
        params,
        &on_sm90(&sm90, "v[0] = v[1] = v[2] = v[3] = 0.f;\n"),
    )
}

/// Every snippet of this file (the catalogue's).
pub fn all() -> Vec<Snippet> {
    let mut v = vec![
        cluster_sync_sm90(),
        cluster_sync_relaxed_sm90(),
        ld_dsmem_f32x4(),
        cluster_size_sm90(),
        push_barrier_init_sm90(),
        mbarrier_wait_parity_sm90(),
    ];
    v.extend([1, 2, 4].into_iter().filter_map(st_async_b32));
    v
}
