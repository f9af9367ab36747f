//! Vectorized loads and stores through registers (CuTe's `UniversalCopy<uint32_t |
//! uint64_t | uint128_t>`): one thread moves 4, 8 or 16 bytes with one instruction.

use crate::arch::Arch;
use crate::copy::{one_thread_bits, CopyKind, CopyOp};
use crate::snippet::{asm_stmt, bind_array, operand_list, smem_cvt, Dir, Param, ParamTy, Snippet};

/// The memory a vectorized access reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Global memory.
    Global,
    /// Shared memory.
    Shared,
}

impl Space {
    fn ptx(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
        }
    }
}

fn vec_suffix(words: usize) -> String {
    if words == 1 {
        "b32".into()
    } else {
        format!("v{words}.b32")
    }
}

/// `ld.{global,shared}[.vN].b32`: load `bytes` (4, 8, 16) into `uint32_t r[bytes/4]`.
/// The source address must be aligned to `bytes`.
pub fn ld(space: Space, bytes: usize) -> CopyOp {
    assert!(matches!(bytes, 4 | 8 | 16), "vector width must be 4, 8 or 16 bytes");
    let words = bytes / 4;
    let bits = (bytes * 8) as i64;
    let name = format!("rc_ld_{}_b{bits}", space.ptx());
    let ptr_ty = match space {
        Space::Global => ParamTy::GmemPtr { bytes, constant: true },
        Space::Shared => ParamTy::SmemPtr { bytes, constant: true },
    };
    let params = vec![Param::new("src", ptr_ty), Param::regs("r", "uint32_t", words, Dir::Out)];
    let (pre, addr) = match space {
        Space::Global => (String::new(), "\"l\"(src)".to_string()),
        Space::Shared => (smem_cvt("saddr", "src"), "\"r\"(saddr)".to_string()),
    };
    let line = format!(
        "ld.{}.{} {}, [%{words}];",
        space.ptx(),
        vec_suffix(words),
        operand_list(0, words)
    );
    let body = pre + &asm_stmt(&[line], &bind_array("=r", "r", words), &[addr], true);
    universal(
        format!("UniversalCopy<uint{bits}_t>(ld.{})", space.ptx()),
        bits,
        Snippet::build(name, Arch::SM80, 1, params, &body),
    )
}

/// `st.{global,shared}[.vN].b32`: store `uint32_t r[bytes/4]` to `bytes` (4, 8, 16)
/// aligned bytes.
pub fn st(space: Space, bytes: usize) -> CopyOp {
    assert!(matches!(bytes, 4 | 8 | 16), "vector width must be 4, 8 or 16 bytes");
    let words = bytes / 4;
    let bits = (bytes * 8) as i64;
    let name = format!("rc_st_{}_b{bits}", space.ptx());
    let ptr_ty = match space {
        Space::Global => ParamTy::GmemPtr { bytes, constant: false },
        Space::Shared => ParamTy::SmemPtr { bytes, constant: false },
    };
    let params = vec![Param::new("dst", ptr_ty), Param::regs("r", "uint32_t", words, Dir::In)];
    let (pre, addr) = match space {
        Space::Global => (String::new(), "\"l\"(dst)".to_string()),
        Space::Shared => (smem_cvt("saddr", "dst"), "\"r\"(saddr)".to_string()),
    };
    let line = format!(
        "st.{}.{} [%0], {};",
        space.ptx(),
        vec_suffix(words),
        operand_list(1, words)
    );
    let mut ins = vec![addr];
    ins.extend(bind_array("r", "r", words));
    let body = pre + &asm_stmt(&[line], &[], &ins, true);
    universal(
        format!("UniversalCopy<uint{bits}_t>(st.{})", space.ptx()),
        bits,
        Snippet::build(name, Arch::SM80, 1, params, &body),
    )
}

/// `ld.global.nc.L1::no_allocate[.vN].b32`: a streaming load of `bytes` (4, 8, 16) from
/// read-only global memory into `uint32_t r[bytes/4]`, through the non-coherent path and
/// without allocating the line in L1 (data read once, such as a weight streamed from
/// DRAM straight into registers; the loaded bytes do not evict what L1 holds for reuse).
/// The source address must be aligned to `bytes`, and the memory must not be written while
/// the kernel runs.
///
/// ```
/// let op = rcute_atom::copy_ldst::ld_global_stream(16);
/// assert_eq!(op.snippet.name, "rc_ld_global_stream_b128");
/// assert!(op.snippet.source().contains("ld.global.nc.L1::no_allocate.v4.b32"));
/// ```
pub fn ld_global_stream(bytes: usize) -> CopyOp {
    assert!(matches!(bytes, 4 | 8 | 16), "vector width must be 4, 8 or 16 bytes");
    let words = bytes / 4;
    let bits = (bytes * 8) as i64;
    let params = vec![
        Param::new("src", ParamTy::GmemPtr { bytes, constant: true }),
        Param::regs("r", "uint32_t", words, Dir::Out),
    ];
    let line = format!(
        "ld.global.nc.L1::no_allocate.{} {}, [%{words}];",
        vec_suffix(words),
        operand_list(0, words)
    );
    let body = asm_stmt(
        &[line],
        &bind_array("=r", "r", words),
        &["\"l\"(src)".to_string()],
        false,
    );
    universal(
        format!("UniversalCopy<uint{bits}_t>(ld.global.nc.L1::no_allocate)"),
        bits,
        Snippet::build(format!("rc_ld_global_stream_b{bits}"), Arch::SM80, 1, params, &body),
    )
}

/// The narrowest global -> shared copy: one 16-bit element through a register
/// (`UniversalCopy<uint16_t>`), zero when `pred` is false. Synchronous (the load's latency
/// is not hidden as `cp.async` hides it), for operands whose addresses are 2-byte but not
/// 4-byte aligned, which `cp.async` (4, 8 or 16 bytes) cannot copy. Its call has the
/// signature of the `cp.async` zero-fill snippets: `(smem_dst, gmem_src, pred)`.
pub fn g2s_u16_zfill() -> CopyOp {
    let params = vec![
        Param::new(
            "smem_dst",
            ParamTy::SmemPtr {
                bytes: 2,
                constant: false,
            },
        ),
        Param::new(
            "gmem_src",
            ParamTy::GmemPtr {
                bytes: 2,
                constant: true,
            },
        ),
        Param::scalar("pred", "bool"),
    ];
    let body =
        "const unsigned short v = pred ? __ldg(static_cast<const unsigned short*>(gmem_src)) : (unsigned short)0;\n\
                *static_cast<unsigned short*>(smem_dst) = v;\n";
    universal(
        "UniversalCopy<uint16_t>(g2s, zero fill)",
        16,
        Snippet::build("rc_g2s_u16_zfill", Arch::SM80, 1, params, body),
    )
}

/// All vectorized ld/st ops.
pub fn all_ldst() -> Vec<CopyOp> {
    let mut v = Vec::new();
    for space in [Space::Global, Space::Shared] {
        for bytes in [4, 8, 16] {
            v.push(ld(space, bytes));
            v.push(st(space, bytes));
        }
    }
    v.push(ld_global_stream(16));
    v
}

/// A one-thread `UniversalCopy` of `bits` (sm_80 class) whose code is `snippet`: the layout
/// of every vectorized ld/st op here.
fn universal(name: impl Into<String>, bits: i64, snippet: Snippet) -> CopyOp {
    CopyOp {
        name: name.into(),
        arch: Arch::SM80,
        kind: CopyKind::Universal,
        thr_id: rcute_layout::Layout::col_major(rcute_layout::tuple!(1)),
        src: one_thread_bits(bits),
        dst: one_thread_bits(bits),
        reference: one_thread_bits(bits),
        snippet,
    }
}
