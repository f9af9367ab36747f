//! SM80 `cp.async`: asynchronous global -> shared copies of 4, 8 or 16 bytes per thread
//! (CuTe's `SM80_CP_ASYNC_CACHEALWAYS` / `CACHEGLOBAL` and their `_ZFILL` forms), and
//! the group commit / wait snippets.

use crate::arch::Arch;
use crate::copy::{one_thread_bits, CopyKind, CopyOp};
use crate::snippet::{asm_stmt, smem_cvt, Param, ParamTy, Snippet};

/// The cache policy of `cp.async`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheOp {
    /// `.ca`: cache at all levels (4, 8, 16 bytes).
    CacheAlways,
    /// `.cg`: cache in L2 only (16 bytes).
    CacheGlobal,
}

/// `cp.async.{ca,cg}.shared.global [dst], [src], bytes[, src_size]`. With `zfill`, the
/// snippet takes `bool pred` and copies `src_size = pred ? bytes : 0` bytes, filling the
/// rest of the destination with zeros (predicated-off loads write zeros).
pub fn cp_async(cache: CacheOp, bytes: usize, zfill: bool) -> Option<CopyOp> {
    if !matches!(bytes, 4 | 8 | 16) || (cache == CacheOp::CacheGlobal && bytes != 16) {
        return None;
    }
    let bits = (bytes * 8) as i64;
    let c = match cache {
        CacheOp::CacheAlways => "ca",
        CacheOp::CacheGlobal => "cg",
    };
    let fname = format!("rc_cp_async_{c}_{bytes}{}", if zfill { "_zfill" } else { "" });
    let mut params = vec![
        Param::new("smem_dst", ParamTy::SmemPtr { bytes, constant: false }),
        Param::new("gmem_src", ParamTy::GmemPtr { bytes, constant: true }),
    ];
    let mut body = smem_cvt("saddr", "smem_dst");
    let mut ins = vec![
        "\"r\"(saddr)".to_string(),
        "\"l\"(gmem_src)".to_string(),
        format!("\"n\"({bytes})"),
    ];
    let line = if zfill {
        params.push(Param::scalar("pred", "bool"));
        body.push_str(&format!("uint32_t src_size = pred ? {bytes}u : 0u;\n"));
        ins.push("\"r\"(src_size)".to_string());
        format!("cp.async.{c}.shared.global [%0], [%1], %2, %3;")
    } else {
        format!("cp.async.{c}.shared.global [%0], [%1], %2;")
    };
    body.push_str(&asm_stmt(&[line], &[], &ins, true));
    let cute = match (cache, zfill) {
        (CacheOp::CacheAlways, false) => "SM80_CP_ASYNC_CACHEALWAYS",
        (CacheOp::CacheGlobal, false) => "SM80_CP_ASYNC_CACHEGLOBAL",
        (CacheOp::CacheAlways, true) => "SM80_CP_ASYNC_CACHEALWAYS_ZFILL",
        (CacheOp::CacheGlobal, true) => "SM80_CP_ASYNC_CACHEGLOBAL_ZFILL",
    };
    Some(CopyOp {
        name: format!("{cute}<uint{bits}_t>"),
        arch: Arch::SM80,
        kind: CopyKind::CpAsync,
        thr_id: rcute_layout::Layout::col_major(rcute_layout::tuple!(1)),
        src: one_thread_bits(bits),
        dst: one_thread_bits(bits),
        reference: one_thread_bits(bits),
        snippet: Snippet::build(fname, Arch::SM80, 1, params, &body),
    })
}

/// The 16-byte zero-filling `cp.async.cg` of [`cp_async`] with the L2 prefetch-size
/// qualifier `.L2::256B`: a miss fills the L2 with the 256-byte block around the source
/// (PTX ISA 7.4, sm_80), so a kernel that streams the next 128 bytes of the same rows a
/// k-tile later finds them in L2 (the grouped MoE GEMMs' weights: each k-tile of 64 bf16
/// reads 128 bytes of 128 rows). The result in shared memory is the same as
/// [`cp_async`]'s; only what the L2 holds differs.
///
/// ```
/// use rcute_atom::copy_cp_async::cp_async_cg16_l2_256;
/// let op = cp_async_cg16_l2_256();
/// assert_eq!(op.snippet.name, "rc_cp_async_cg_16_zfill_l2_256b");
/// assert!(op.snippet.code.contains("cp.async.cg.shared.global.L2::256B [%0], [%1], %2, %3;"));
/// ```
pub fn cp_async_cg16_l2_256() -> CopyOp {
    let base = cp_async(CacheOp::CacheGlobal, 16, true).expect("the 16-byte cp.async.cg exists");
    let params = vec![
        Param::new(
            "smem_dst",
            ParamTy::SmemPtr {
                bytes: 16,
                constant: false,
            },
        ),
        Param::new(
            "gmem_src",
            ParamTy::GmemPtr {
                bytes: 16,
                constant: true,
            },
        ),
        Param::scalar("pred", "bool"),
    ];
    let mut body = smem_cvt("saddr", "smem_dst");
    body.push_str("uint32_t src_size = pred ? 16u : 0u;\n");
    let ins = [
        "\"r\"(saddr)".to_string(),
        "\"l\"(gmem_src)".to_string(),
        "\"n\"(16)".to_string(),
        "\"r\"(src_size)".to_string(),
    ];
    let line = "cp.async.cg.shared.global.L2::256B [%0], [%1], %2, %3;".to_string();
    body.push_str(&asm_stmt(&[line], &[], &ins, true));
    CopyOp {
        name: "SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t> (L2::256B)".into(),
        snippet: Snippet::build("rc_cp_async_cg_16_zfill_l2_256b", Arch::SM80, 1, params, &body),
        ..base
    }
}

/// `cp.async.{ca,cg}.shared.global [saddr], [src], bytes, src_size` as a snippet taking a
/// 32-bit shared-state-space address and the source size itself
/// (`rc_cp_async_{ca,cg}_{bytes}_zfill_addr(uint32_t saddr, const void* gmem_src, uint32_t
/// src_size)`: `src_size` bytes are read, the rest of the `bytes` written as zeros), for
/// kernels that keep shared addresses as `uint32_t` offsets from one converted base and
/// each copy's size (`bytes` or 0) in a register instead of converting a generic pointer
/// and selecting the size per copy.
///
/// ```
/// use rcute_atom::copy_cp_async::{cp_async_addr, CacheOp};
/// let s = cp_async_addr(CacheOp::CacheGlobal, 16).unwrap();
/// assert_eq!(s.name, "rc_cp_async_cg_16_zfill_addr");
/// assert!(s.code.contains("cp.async.cg.shared.global [%0], [%1], %2, %3;"));
/// assert!(cp_async_addr(CacheOp::CacheGlobal, 4).is_none());
/// ```
pub fn cp_async_addr(cache: CacheOp, bytes: usize) -> Option<Snippet> {
    if !matches!(bytes, 4 | 8 | 16) || (cache == CacheOp::CacheGlobal && bytes != 16) {
        return None;
    }
    let c = match cache {
        CacheOp::CacheAlways => "ca",
        CacheOp::CacheGlobal => "cg",
    };
    let params = vec![
        Param::new("saddr", ParamTy::SmemAddr { bytes }),
        Param::new("gmem_src", ParamTy::GmemPtr { bytes, constant: true }),
        Param::scalar("src_size", "uint32_t"),
    ];
    let ins = [
        "\"r\"(saddr)".to_string(),
        "\"l\"(gmem_src)".to_string(),
        format!("\"n\"({bytes})"),
        "\"r\"(src_size)".to_string(),
    ];
    let line = format!("cp.async.{c}.shared.global [%0], [%1], %2, %3;");
    let body = asm_stmt(&[line], &[], &ins, true);
    Some(Snippet::build(
        format!("rc_cp_async_{c}_{bytes}_zfill_addr"),
        Arch::SM80,
        1,
        params,
        &body,
    ))
}

/// `cp.async.cg.shared.global [saddr], [src], 16, ignore_src` with the PTX `ignore-src`
/// predicate (PTX ISA 7.5, sm_80) set from a 32-bit value: a nonzero `skip` reads nothing
/// and writes 16 zero bytes (`rc_cp_async_cg_16_ignore_src_addr(uint32_t saddr, const void*
/// gmem_src, uint32_t skip)`). The same copy as [`cp_async_addr`]'s with `src_size` 0 or
/// 16, for a kernel that keeps which copies to skip as the bits of one mask: `skip` is
/// that mask and'ed with the copy's bit, and ptxas tests it straight into the copy's
/// predicate (`LOP3.LUT P`) instead of shifting the bit into a size first.
///
/// ```
/// use rcute_atom::copy_cp_async::cp_async_cg16_ignore_src_addr;
/// let s = cp_async_cg16_ignore_src_addr();
/// assert_eq!(s.name, "rc_cp_async_cg_16_ignore_src_addr");
/// assert!(s.code.contains("setp.ne.b32 rc_skip, %2, 0;"));
/// assert!(s.code.contains("cp.async.cg.shared.global [%0], [%1], 16, rc_skip;"));
/// ```
pub fn cp_async_cg16_ignore_src_addr() -> Snippet {
    let params = vec![
        Param::new("saddr", ParamTy::SmemAddr { bytes: 16 }),
        Param::new(
            "gmem_src",
            ParamTy::GmemPtr {
                bytes: 16,
                constant: true,
            },
        ),
        Param::scalar("skip", "uint32_t"),
    ];
    let lines = [
        "{".to_string(),
        ".reg .pred rc_skip;".to_string(),
        "setp.ne.b32 rc_skip, %2, 0;".to_string(),
        "cp.async.cg.shared.global [%0], [%1], 16, rc_skip;".to_string(),
        "}".to_string(),
    ];
    let ins = [
        "\"r\"(saddr)".to_string(),
        "\"l\"(gmem_src)".to_string(),
        "\"r\"(skip)".to_string(),
    ];
    let body = asm_stmt(&lines, &[], &ins, true);
    Snippet::build("rc_cp_async_cg_16_ignore_src_addr", Arch::SM80, 1, params, &body)
}

/// Every `cp.async` op.
pub fn all_cp_async() -> Vec<CopyOp> {
    let mut v = Vec::new();
    for zfill in [false, true] {
        for bytes in [4, 8, 16] {
            v.extend(cp_async(CacheOp::CacheAlways, bytes, zfill));
        }
        v.extend(cp_async(CacheOp::CacheGlobal, 16, zfill));
    }
    v
}

/// `cp.async.commit_group`.
pub fn cp_async_commit_group() -> Snippet {
    let body = asm_stmt(&["cp.async.commit_group;".into()], &[], &[], true);
    Snippet::build("rc_cp_async_commit_group", Arch::SM80, 1, vec![], &body)
}

/// `cp.async.wait_group N` (template parameter `N`): wait until at most `N` groups are
/// pending.
pub fn cp_async_wait_group() -> Snippet {
    let body = asm_stmt(&["cp.async.wait_group %0;".into()], &[], &["\"n\"(N)".into()], true);
    Snippet::build_template(
        "rc_cp_async_wait_group",
        Arch::SM80,
        1,
        vec![],
        vec![("int", "N", "0".into())],
        &body,
    )
}

/// `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [mbar]`: one arrival on the mbarrier
/// once every `cp.async` this thread issued before has landed. `noinc`: the arrival is one
/// of the count the barrier was initialized with (so a stage filled by `cp.async` and bulk
/// copies completes when both have landed).
///
/// ```
/// use rcute_atom::copy_cp_async::cp_async_mbarrier_arrive_noinc;
/// let s = cp_async_mbarrier_arrive_noinc();
/// assert!(s.code.contains("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];"));
/// ```
pub fn cp_async_mbarrier_arrive_noinc() -> Snippet {
    let body = asm_stmt(
        &["cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];".into()],
        &[],
        &["\"r\"(mbar)".into()],
        true,
    );
    Snippet::build(
        "rc_cp_async_mbarrier_arrive_noinc",
        Arch::SM80,
        1,
        vec![Param::new("mbar", ParamTy::Mbarrier)],
        &body,
    )
}

/// `cp.async.wait_all`.
pub fn cp_async_wait_all() -> Snippet {
    let body = asm_stmt(&["cp.async.wait_all;".into()], &[], &[], true);
    Snippet::build("rc_cp_async_wait_all", Arch::SM80, 1, vec![], &body)
}
