//! SM90 Tensor Memory Accelerator and bulk copies: `cp.async.bulk.tensor` tile-mode
//! loads (mbarrier completion, optional `.multicast::cluster`) and stores for 1-5
//! dimensions, `prefetch.tensormap`, L2 tensor prefetch, `cp.async.bulk` non-tensor
//! copies, and the bulk-group commit / wait snippets.
//!
//! A TMA op is issued by one thread for a whole box; as in CuTe's `Copy_Traits` of
//! `SM90_TMA_LOAD` / `SM90_TMA_STORE`, its layouts are `(1, box_bits)` with one thread.

use crate::arch::Arch;
use crate::copy::{one_thread_bits, CopyKind, CopyOp};
use crate::snippet::{asm_stmt, smem_cvt, Param, ParamTy, Snippet};
use rcute_layout::{tuple, Layout};

fn coord_params(rank: usize) -> Vec<Param> {
    (0..rank).map(|i| Param::scalar(&format!("c{i}"), "int32_t")).collect()
}

fn coord_operands(first: usize, rank: usize) -> String {
    let v: Vec<String> = (first..first + rank).map(|i| format!("%{i}")).collect();
    format!("{{{}}}", v.join(", "))
}

fn coord_bindings(rank: usize) -> Vec<String> {
    (0..rank).map(|i| format!("\"r\"(c{i})")).collect()
}

fn tma_op(name: String, kind: CopyKind, box_bits: i64, snippet: Snippet) -> CopyOp {
    CopyOp {
        name,
        arch: Arch::SM90,
        kind,
        thr_id: Layout::col_major(tuple!(1)),
        src: one_thread_bits(box_bits),
        dst: one_thread_bits(box_bits),
        reference: one_thread_bits(box_bits),
        snippet,
    }
}

/// TMA tile-mode load of a `rank`-D box (`rank` in 1..=5) into shared memory, completing
/// `box_bits / 8` transaction bytes on the mbarrier. With `multicast`, the box is written
/// to the same offset in the shared memory of every CTA in `cta_mask`.
pub fn tma_load(rank: usize, multicast: bool, box_bits: i64) -> CopyOp {
    assert!((1..=5).contains(&rank), "TMA rank must be 1..=5");
    let mc = if multicast { "_multicast" } else { "" };
    let fname = format!("rc_tma_load_{rank}d{mc}");
    let mut params = vec![
        Param::new(
            "smem_dst",
            ParamTy::SmemPtr {
                bytes: (box_bits / 8) as usize,
                constant: false,
            },
        ),
        Param::new("tmap", ParamTy::TensorMap),
        Param::new("mbar", ParamTy::Mbarrier),
    ];
    let mut ins = vec![
        "\"r\"(saddr)".to_string(),
        "\"l\"(tmap)".to_string(),
        "\"r\"(mbar)".to_string(),
    ];
    let line = if multicast {
        params.push(Param::scalar("cta_mask", "uint16_t"));
        ins.push("\"h\"(cta_mask)".into());
        format!(
            "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {}], [%2], %3;",
            coord_operands(4, rank)
        )
    } else {
        format!(
            "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {}], [%2];",
            coord_operands(3, rank)
        )
    };
    params.extend(coord_params(rank));
    ins.extend(coord_bindings(rank));
    let body = smem_cvt("saddr", "smem_dst") + &asm_stmt(&[line], &[], &ins, true);
    let name = if multicast {
        "SM90_TMA_LOAD_MULTICAST"
    } else {
        "SM90_TMA_LOAD"
    };
    tma_op(
        format!("{name}_{rank}D"),
        CopyKind::Tma,
        box_bits,
        Snippet::build(fname, Arch::SM90, 1, params, &body),
    )
}

/// TMA tile-mode store of a `rank`-D box from shared memory (bulk-group completion).
pub fn tma_store(rank: usize, box_bits: i64) -> CopyOp {
    assert!((1..=5).contains(&rank), "TMA rank must be 1..=5");
    let fname = format!("rc_tma_store_{rank}d");
    let mut params = vec![
        Param::new("tmap", ParamTy::TensorMap),
        Param::new(
            "smem_src",
            ParamTy::SmemPtr {
                bytes: (box_bits / 8) as usize,
                constant: true,
            },
        ),
    ];
    params.extend(coord_params(rank));
    let mut ins = vec!["\"l\"(tmap)".to_string(), "\"r\"(saddr)".to_string()];
    ins.extend(coord_bindings(rank));
    let line = format!(
        "cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {}], [%1];",
        coord_operands(2, rank)
    );
    let body = smem_cvt("saddr", "smem_src") + &asm_stmt(&[line], &[], &ins, true);
    tma_op(
        format!("SM90_TMA_STORE_{rank}D"),
        CopyKind::Tma,
        box_bits,
        Snippet::build(fname, Arch::SM90, 1, params, &body),
    )
}

/// `prefetch.tensormap [tmap]`: bring a tensor map into the descriptor cache.
pub fn prefetch_tensormap() -> Snippet {
    let params = vec![Param::new("tmap", ParamTy::TensorMap)];
    let body = asm_stmt(&["prefetch.tensormap [%0];".into()], &[], &["\"l\"(tmap)".into()], true);
    Snippet::build("rc_prefetch_tensormap", Arch::SM90, 1, params, &body)
}

/// `cp.async.bulk.prefetch.tensor.{rank}d.L2.global`: prefetch a box into L2.
pub fn tma_prefetch(rank: usize) -> Snippet {
    assert!((1..=5).contains(&rank), "TMA rank must be 1..=5");
    let mut params = vec![Param::new("tmap", ParamTy::TensorMap)];
    params.extend(coord_params(rank));
    let mut ins = vec!["\"l\"(tmap)".to_string()];
    ins.extend(coord_bindings(rank));
    let line = format!(
        "cp.async.bulk.prefetch.tensor.{rank}d.L2.global [%0, {}];",
        coord_operands(1, rank)
    );
    let body = asm_stmt(&[line], &[], &ins, true);
    Snippet::build(format!("rc_tma_prefetch_{rank}d"), Arch::SM90, 1, params, &body)
}

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`: copy `bytes`
/// (a multiple of 16) contiguous bytes from global to shared memory.
pub fn bulk_load(bytes: usize) -> CopyOp {
    let params = vec![
        Param::new("smem_dst", ParamTy::SmemPtr { bytes, constant: false }),
        Param::new("gmem_src", ParamTy::GmemPtr { bytes, constant: true }),
        Param::new("mbar", ParamTy::Mbarrier),
        Param::scalar("num_bytes", "uint32_t"),
    ];
    let line = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];".to_string();
    let ins: Vec<String> = ["\"r\"(saddr)", "\"l\"(gmem_src)", "\"r\"(num_bytes)", "\"r\"(mbar)"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let body = smem_cvt("saddr", "smem_dst") + &asm_stmt(&[line], &[], &ins, true);
    tma_op(
        "SM90_BULK_COPY_G2S".into(),
        CopyKind::Bulk,
        (bytes * 8) as i64,
        Snippet::build("rc_bulk_load", Arch::SM90, 1, params, &body),
    )
}

/// `cp.async.bulk.global.shared::cta.bulk_group`: copy `bytes` (a multiple of 16)
/// contiguous bytes from shared to global memory.
pub fn bulk_store(bytes: usize) -> CopyOp {
    let params = vec![
        Param::new("gmem_dst", ParamTy::GmemPtr { bytes, constant: false }),
        Param::new("smem_src", ParamTy::SmemPtr { bytes, constant: true }),
        Param::scalar("num_bytes", "uint32_t"),
    ];
    let line = "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;".to_string();
    let ins: Vec<String> = ["\"l\"(gmem_dst)", "\"r\"(saddr)", "\"r\"(num_bytes)"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let body = smem_cvt("saddr", "smem_src") + &asm_stmt(&[line], &[], &ins, true);
    tma_op(
        "SM90_BULK_COPY_S2G".into(),
        CopyKind::Bulk,
        (bytes * 8) as i64,
        Snippet::build("rc_bulk_store", Arch::SM90, 1, params, &body),
    )
}

/// `cp.async.bulk.commit_group`: close the current bulk group (TMA stores, bulk stores).
pub fn bulk_commit_group() -> Snippet {
    let body = asm_stmt(&["cp.async.bulk.commit_group;".into()], &[], &[], true);
    Snippet::build("rc_bulk_commit_group", Arch::SM90, 1, vec![], &body)
}

/// `cp.async.bulk.wait_group.read N` (template `N`): wait until at most `N` bulk groups
/// still read their shared-memory source.
pub fn bulk_wait_group_read() -> Snippet {
    let body = asm_stmt(
        &["cp.async.bulk.wait_group.read %0;".into()],
        &[],
        &["\"n\"(N)".into()],
        true,
    );
    Snippet::build_template(
        "rc_bulk_wait_group_read",
        Arch::SM90,
        1,
        vec![],
        vec![("int", "N", "0".into())],
        &body,
    )
}

/// `cp.async.bulk.wait_group N` (template `N`): wait until at most `N` bulk groups are
/// complete, writes included.
pub fn bulk_wait_group() -> Snippet {
    let body = asm_stmt(
        &["cp.async.bulk.wait_group %0;".into()],
        &[],
        &["\"n\"(N)".into()],
        true,
    );
    Snippet::build_template(
        "rc_bulk_wait_group",
        Arch::SM90,
        1,
        vec![],
        vec![("int", "N", "0".into())],
        &body,
    )
}

/// Every TMA / bulk op (with a 1 KiB box for the layouts) and the TMA helper snippets.
pub fn all_tma() -> (Vec<CopyOp>, Vec<Snippet>) {
    let mut ops = Vec::new();
    let mut snips = vec![
        prefetch_tensormap(),
        bulk_commit_group(),
        bulk_wait_group_read(),
        bulk_wait_group(),
    ];
    for rank in 1..=5 {
        ops.push(tma_load(rank, false, 8192));
        ops.push(tma_load(rank, true, 8192));
        ops.push(tma_store(rank, 8192));
        snips.push(tma_prefetch(rank));
    }
    ops.push(bulk_load(1024));
    ops.push(bulk_store(1024));
    (ops, snips)
}
