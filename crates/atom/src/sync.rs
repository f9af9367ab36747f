//! Synchronization snippets: mbarriers (init, arrive, expect-tx, parity wait, remote
//! arrive in a cluster), proxy and init fences, named barriers, cluster barriers,
//! `elect.sync` and `setmaxnreg`.

use crate::arch::Arch;
use crate::snippet::{asm_stmt, Param, ParamTy, Snippet};

fn mbar() -> Param {
    Param::new("mbar", ParamTy::Mbarrier)
}

/// `mbarrier.init.shared::cta.b64 [mbar], count`.
pub fn mbarrier_init() -> Snippet {
    let params = vec![mbar(), Param::scalar("count", "uint32_t")];
    let body = asm_stmt(
        &["mbarrier.init.shared::cta.b64 [%0], %1;".into()],
        &[],
        &["\"r\"(mbar)".into(), "\"r\"(count)".into()],
        true,
    );
    Snippet::build("rc_mbarrier_init", Arch::SM80, 1, params, &body)
}

/// `mbarrier.arrive.shared::cta.b64`: arrive once (the state token is discarded).
pub fn mbarrier_arrive() -> Snippet {
    let lines = vec![
        "{".to_string(),
        ".reg .b64 rc_state;".to_string(),
        "mbarrier.arrive.shared::cta.b64 rc_state, [%0];".to_string(),
        "}".to_string(),
    ];
    let body = asm_stmt(&lines, &[], &["\"r\"(mbar)".into()], true);
    Snippet::build("rc_mbarrier_arrive", Arch::SM80, 1, vec![mbar()], &body)
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [mbar], bytes`: arrive and announce
/// `bytes` of incoming transactions (TMA, bulk copies).
pub fn mbarrier_arrive_expect_tx() -> Snippet {
    let params = vec![mbar(), Param::scalar("bytes", "uint32_t")];
    let body = asm_stmt(
        &["mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;".into()],
        &[],
        &["\"r\"(mbar)".into(), "\"r\"(bytes)".into()],
        true,
    );
    Snippet::build("rc_mbarrier_arrive_expect_tx", Arch::SM90, 1, params, &body)
}

/// `mbarrier.expect_tx.shared::cta.b64 [mbar], bytes`: announce transactions without
/// arriving.
pub fn mbarrier_expect_tx() -> Snippet {
    let params = vec![mbar(), Param::scalar("bytes", "uint32_t")];
    let body = asm_stmt(
        &["mbarrier.expect_tx.shared::cta.b64 [%0], %1;".into()],
        &[],
        &["\"r\"(mbar)".into(), "\"r\"(bytes)".into()],
        true,
    );
    Snippet::build("rc_mbarrier_expect_tx", Arch::SM90, 1, params, &body)
}

/// Spin on `mbarrier.try_wait.parity.shared::cta.b64` until the phase with parity
/// `phase` has completed.
pub fn mbarrier_wait_parity() -> Snippet {
    spin_wait_parity("rc_mbarrier_wait_parity", "mbarrier.try_wait.parity.shared::cta.b64")
}

/// A snippet `name(mbar, phase)` spinning on `instr rc_p, [mbar], phase` (a `try_wait.parity`
/// form) until the phase with parity `phase` has completed.
fn spin_wait_parity(name: &str, instr: &str) -> Snippet {
    let params = vec![mbar(), Param::scalar("phase", "uint32_t")];
    let lines: Vec<String> = vec![
        "{".into(),
        ".reg .pred rc_p;".into(),
        "rc_wait:".into(),
        format!("{instr} rc_p, [%0], %1;"),
        "@rc_p bra rc_done;".into(),
        "bra rc_wait;".into(),
        "rc_done:".into(),
        "}".into(),
    ];
    let body = asm_stmt(&lines, &[], &["\"r\"(mbar)".into(), "\"r\"(phase)".into()], true);
    Snippet::build(name, Arch::SM90, 1, params, &body)
}

/// One `mbarrier.try_wait.parity` probe; returns whether the phase completed.
pub fn mbarrier_try_wait_parity() -> Snippet {
    let params = vec![mbar(), Param::scalar("phase", "uint32_t")];
    let lines: Vec<String> = [
        "{",
        ".reg .pred rc_p;",
        "mbarrier.try_wait.parity.shared::cta.b64 rc_p, [%1], %2;",
        "selp.u32 %0, 1, 0, rc_p;",
        "}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let body = String::from("uint32_t done;\n")
        + &asm_stmt(
            &lines,
            &["\"=r\"(done)".into()],
            &["\"r\"(mbar)".into(), "\"r\"(phase)".into()],
            true,
        )
        + "return done != 0;\n";
    Snippet::build("rc_mbarrier_try_wait_parity", Arch::SM90, 1, params, &body).returning("bool")
}

/// Arrive on the mbarrier at the same shared offset in CTA `cta_id` of the cluster
/// (`mapa.shared::cluster` + `mbarrier.arrive.shared::cluster`).
pub fn mbarrier_arrive_cluster() -> Snippet {
    remote_arrive("rc_mbarrier_arrive_cluster", "mbarrier.arrive.shared::cluster.b64")
}

/// A snippet `name(mbar, cta_id)` arriving with `instr _, [remote]` (an `mbarrier.arrive`
/// form on `shared::cluster`) on the mbarrier at `mbar`'s offset in CTA `cta_id`
/// (`mapa.shared::cluster`).
fn remote_arrive(name: &str, instr: &str) -> Snippet {
    let params = vec![mbar(), Param::scalar("cta_id", "uint32_t")];
    let lines: Vec<String> = vec![
        "{".into(),
        ".reg .b32 rc_remote;".into(),
        "mapa.shared::cluster.u32 rc_remote, %0, %1;".into(),
        format!("{instr} _, [rc_remote];"),
        "}".into(),
    ];
    let body = asm_stmt(&lines, &[], &["\"r\"(mbar)".into(), "\"r\"(cta_id)".into()], true);
    Snippet::build(name, Arch::SM90, 1, params, &body)
}

/// [`mbarrier_arrive_cluster`] with release semantics at cluster scope
/// (`mbarrier.arrive.release.cluster.shared::cluster`): this thread's earlier shared-memory
/// reads and writes happen before the arrival for a thread of another CTA of the cluster that
/// observes the phase with [`mbarrier_wait_parity_acquire_cluster`] (a ring slot read here may
/// then be overwritten there).
pub fn mbarrier_arrive_release_cluster() -> Snippet {
    remote_arrive(
        "rc_mbarrier_arrive_release_cluster",
        "mbarrier.arrive.release.cluster.shared::cluster.b64",
    )
}

/// [`mbarrier_wait_parity`] with acquire semantics at cluster scope
/// (`mbarrier.try_wait.parity.acquire.cluster.shared::cta`): the phase's arrivals made by
/// other CTAs of the cluster with [`mbarrier_arrive_release_cluster`] happen before what
/// this thread does after it.
pub fn mbarrier_wait_parity_acquire_cluster() -> Snippet {
    spin_wait_parity(
        "rc_mbarrier_wait_parity_acquire_cluster",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
    )
}

/// `fence.proxy.async.shared::cta`: make generic-proxy shared-memory writes visible to
/// the async proxy (TMA stores, `wgmma` operands).
pub fn fence_proxy_async_shared() -> Snippet {
    let body = asm_stmt(&["fence.proxy.async.shared::cta;".into()], &[], &[], true);
    Snippet::build("rc_fence_proxy_async_shared", Arch::SM90, 1, vec![], &body)
}

/// `fence.mbarrier_init.release.cluster`: publish mbarrier initialization to the cluster.
pub fn fence_mbarrier_init() -> Snippet {
    let body = asm_stmt(&["fence.mbarrier_init.release.cluster;".into()], &[], &[], true);
    Snippet::build("rc_fence_mbarrier_init", Arch::SM90, 1, vec![], &body)
}

/// `bar.sync id, num_threads`: named barrier (`num_threads` a multiple of 32).
pub fn named_barrier_sync() -> Snippet {
    let params = vec![
        Param::scalar("id", "uint32_t"),
        Param::scalar("num_threads", "uint32_t"),
    ];
    let body = asm_stmt(
        &["bar.sync %0, %1;".into()],
        &[],
        &["\"r\"(id)".into(), "\"r\"(num_threads)".into()],
        true,
    );
    Snippet::build("rc_named_barrier_sync", Arch::SM80, 32, params, &body)
}

/// `bar.arrive id, num_threads`: arrive at a named barrier without waiting.
pub fn named_barrier_arrive() -> Snippet {
    let params = vec![
        Param::scalar("id", "uint32_t"),
        Param::scalar("num_threads", "uint32_t"),
    ];
    let body = asm_stmt(
        &["bar.arrive %0, %1;".into()],
        &[],
        &["\"r\"(id)".into(), "\"r\"(num_threads)".into()],
        true,
    );
    Snippet::build("rc_named_barrier_arrive", Arch::SM80, 32, params, &body)
}

/// `barrier.cluster.arrive.aligned` (release semantics by default).
pub fn cluster_arrive() -> Snippet {
    let body = asm_stmt(&["barrier.cluster.arrive.aligned;".into()], &[], &[], true);
    Snippet::build("rc_cluster_arrive", Arch::SM90, 32, vec![], &body)
}

/// `barrier.cluster.arrive.relaxed.aligned`.
pub fn cluster_arrive_relaxed() -> Snippet {
    let body = asm_stmt(&["barrier.cluster.arrive.relaxed.aligned;".into()], &[], &[], true);
    Snippet::build("rc_cluster_arrive_relaxed", Arch::SM90, 32, vec![], &body)
}

/// `barrier.cluster.wait.aligned` (acquire semantics by default).
pub fn cluster_wait() -> Snippet {
    let body = asm_stmt(&["barrier.cluster.wait.aligned;".into()], &[], &[], true);
    Snippet::build("rc_cluster_wait", Arch::SM90, 32, vec![], &body)
}

/// `%cluster_ctarank`: this CTA's rank in its cluster.
pub fn cluster_ctarank() -> Snippet {
    let body = String::from("uint32_t rank;\n")
        + &asm_stmt(
            &["mov.u32 %0, %%cluster_ctarank;".into()],
            &["\"=r\"(rank)".into()],
            &[],
            false,
        )
        + "return rank;\n";
    Snippet::build("rc_cluster_ctarank", Arch::SM90, 1, vec![], &body).returning("uint32_t")
}

/// `elect.sync`: true in exactly one active lane of the warp (`membermask` all lanes).
pub fn elect_one_sync() -> Snippet {
    let lines: Vec<String> = [
        "{",
        ".reg .b32 rc_lane;",
        ".reg .pred rc_p;",
        "elect.sync rc_lane|rc_p, %1;",
        "selp.u32 %0, 1, 0, rc_p;",
        "}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let body = String::from("uint32_t pred;\n")
        + &asm_stmt(&lines, &["\"=r\"(pred)".into()], &["\"r\"(0xFFFFFFFFu)".into()], false)
        + "return pred != 0;\n";
    Snippet::build("rc_elect_one_sync", Arch::SM90, 32, vec![], &body).returning("bool")
}

/// `setmaxnreg.inc.sync.aligned.u32 N` (template `N`, a multiple of 8 in 24..=256).
pub fn setmaxnreg_inc() -> Snippet {
    let body = asm_stmt(
        &["setmaxnreg.inc.sync.aligned.u32 %0;".into()],
        &[],
        &["\"n\"(N)".into()],
        false,
    );
    Snippet::build_template(
        "rc_setmaxnreg_inc",
        Arch::SM90A,
        128,
        vec![],
        vec![("int", "N", "240".into())],
        &body,
    )
}

/// `setmaxnreg.dec.sync.aligned.u32 N` (template `N`, a multiple of 8 in 24..=256).
pub fn setmaxnreg_dec() -> Snippet {
    let body = asm_stmt(
        &["setmaxnreg.dec.sync.aligned.u32 %0;".into()],
        &[],
        &["\"n\"(N)".into()],
        false,
    );
    Snippet::build_template(
        "rc_setmaxnreg_dec",
        Arch::SM90A,
        128,
        vec![],
        vec![("int", "N", "40".into())],
        &body,
    )
}

/// `ld.acquire.gpu.global.b32`: a gpu-scope acquire load of a global `int` (the wait side
/// of a semaphore, e.g. serial split-K's per-tile counter).
pub fn ld_acquire_gpu() -> Snippet {
    let p = Param::new(
        "p",
        ParamTy::GmemPtr {
            bytes: 4,
            constant: true,
        },
    );
    let body = String::from("int v;\n")
        + &asm_stmt(
            &["ld.acquire.gpu.global.b32 %0, [%1];".into()],
            &["\"=r\"(v)".into()],
            &["\"l\"(p)".into()],
            true,
        )
        + "return v;\n";
    Snippet::build("rc_ld_acquire_gpu", Arch::SM80, 1, vec![p], &body).returning("int")
}

/// `st.release.gpu.global.b32`: a gpu-scope release store of a global `int` (the signal
/// side of a semaphore).
pub fn st_release_gpu() -> Snippet {
    let params = vec![
        Param::new(
            "p",
            ParamTy::GmemPtr {
                bytes: 4,
                constant: false,
            },
        ),
        Param::scalar("v", "int"),
    ];
    let body = asm_stmt(
        &["st.release.gpu.global.b32 [%0], %1;".into()],
        &[],
        &["\"l\"(p)".into(), "\"r\"(v)".into()],
        true,
    );
    Snippet::build("rc_st_release_gpu", Arch::SM80, 1, params, &body)
}

/// `atom.add.acq_rel.gpu.global.u32`: add `v` to a global counter with acquire-release
/// semantics at gpu scope and return its old value (the arrival of a last-arriver
/// reduction: it releases this CTA's partial sums and, for the last one, acquires the
/// others').
pub fn atom_add_acq_rel_gpu() -> Snippet {
    let params = vec![
        Param::new(
            "p",
            ParamTy::GmemPtr {
                bytes: 4,
                constant: false,
            },
        ),
        Param::scalar("v", "uint32_t"),
    ];
    let body = String::from("uint32_t old;\n")
        + &asm_stmt(
            &["atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;".into()],
            &["\"=r\"(old)".into()],
            &["\"l\"(p)".into(), "\"r\"(v)".into()],
            true,
        )
        + "return old;\n";
    Snippet::build("rc_atom_add_acq_rel_gpu", Arch::SM80, 1, params, &body).returning("uint32_t")
}

/// `bar.red.or.pred`: named barrier `id` of `num_threads` threads that also returns, to
/// every one of them, whether any of them passed `pred` true (one thread's decision
/// broadcast with the barrier, no shared memory).
pub fn named_barrier_red_or() -> Snippet {
    let params = vec![
        Param::scalar("id", "uint32_t"),
        Param::scalar("num_threads", "uint32_t"),
        Param::scalar("pred", "uint32_t"),
    ];
    let lines: Vec<String> = [
        "{",
        ".reg .pred rc_in, rc_out;",
        "setp.ne.u32 rc_in, %3, 0;",
        "bar.red.or.pred rc_out, %1, %2, rc_in;",
        "selp.u32 %0, 1, 0, rc_out;",
        "}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let body = String::from("uint32_t any;\n")
        + &asm_stmt(
            &lines,
            &["\"=r\"(any)".into()],
            &["\"r\"(id)".into(), "\"r\"(num_threads)".into(), "\"r\"(pred)".into()],
            true,
        )
        + "return any != 0;\n";
    Snippet::build("rc_named_barrier_red_or", Arch::SM80, 32, params, &body).returning("bool")
}

/// Every synchronization snippet.
pub fn all_sync() -> Vec<Snippet> {
    vec![
        mbarrier_init(),
        mbarrier_arrive(),
        mbarrier_arrive_expect_tx(),
        mbarrier_expect_tx(),
        mbarrier_wait_parity(),
        mbarrier_try_wait_parity(),
        mbarrier_arrive_cluster(),
        mbarrier_arrive_release_cluster(),
        mbarrier_wait_parity_acquire_cluster(),
        fence_proxy_async_shared(),
        fence_mbarrier_init(),
        named_barrier_sync(),
        named_barrier_arrive(),
        cluster_arrive(),
        cluster_arrive_relaxed(),
        cluster_wait(),
        cluster_ctarank(),
        elect_one_sync(),
        setmaxnreg_inc(),
        setmaxnreg_dec(),
    ]
}
