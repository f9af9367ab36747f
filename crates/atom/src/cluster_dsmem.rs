//! Distributed shared memory for kernels that run on sm_80 and on sm_90: the cluster
//! barrier, the cluster's size and a 16-byte load from a peer CTA's shared memory, each
//! guarded by the architecture (before sm_90 a kernel is never launched in clusters: the
//! barrier does nothing, the size is 1 and the load gives zeros), so one generated unit
//! compiles for both and takes the cluster path only where the launch asked for clusters.
//!
//! ```
//! use rcute_atom::cluster_dsmem::{cluster_size_sm90, cluster_sync_relaxed_sm90, cluster_sync_sm90, ld_dsmem_f32x4};
//! for s in [cluster_sync_sm90(), cluster_sync_relaxed_sm90(), cluster_size_sm90(), ld_dsmem_f32x4()] {
//!     assert!(s.code.contains("__CUDA_ARCH__ >= 900"), "{}", s.name);
//! }
//! assert!(ld_dsmem_f32x4().code.contains("ld.shared::cluster.v4.f32"));
//! ```

use crate::arch::Arch;
use crate::snippet::{asm_stmt, Dir, Param, Snippet};

fn on_sm90(sm90: &str, before: &str) -> String {
    format!("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n{sm90}#else\n{before}#endif\n")
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
