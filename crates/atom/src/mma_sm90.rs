//! SM90a warpgroup `wgmma.mma_async` atoms (CuTe's `mma_traits_sm90_gmma.hpp`), the
//! warpgroup fence / commit / wait snippets, and the canonical GMMA shared-memory layout
//! atoms. Descriptors are in [`crate::gmma_desc`].

use crate::arch::Arch;
use crate::element::Element;
use crate::mma::{reg_count, reg_cty, GmmaSource, Major, MmaAtom, MmaKind, MmaTypes};
use crate::snippet::{asm_stmt, bind_array, operand_list, Dir, Param, ParamTy, Snippet};
use rcute_layout::{tuple, Layout, Swizzle};

fn lay(shape: rcute_layout::IntTuple, stride: rcute_layout::IntTuple) -> Layout {
    Layout::new(shape, stride).expect("static atom layouts are congruent")
}

/// CuTe's `CLayout_64xN`: `((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`.
pub fn c_layout_64xn(n: i64) -> Layout {
    let n8 = n / 8;
    lay(tuple!((4, 8, 4), (2, 2, n8)), tuple!((128, 1, 16), (64, 8, 512)))
}

/// CuTe's `ABLayout<MN,K>`: `(128,(MN,K)):(0,(1,MN))`, a shared-memory operand every
/// thread of the warpgroup names whole.
pub fn ab_layout(mn: i64, k: i64) -> Layout {
    lay(tuple!(128, (mn, k)), tuple!(0, (1, mn)))
}

/// CuTe's register-A layouts `ALayout_64x16` (16-bit) and `ALayout_64x32` (8-bit), by K.
pub fn a_layout_64xk(k: i64) -> Layout {
    match k {
        8 => lay(tuple!((4, 8, 4), (2, 2)), tuple!((64, 1, 16), (8, 256))),
        16 => lay(tuple!((4, 8, 4), (2, 2, 2)), tuple!((128, 1, 16), (64, 8, 512))),
        32 => lay(tuple!((4, 8, 4), (4, 2, 2)), tuple!((256, 1, 16), (64, 8, 1024))),
        64 => lay(tuple!((4, 8, 4), (8, 2, 2)), tuple!((512, 1, 16), (64, 8, 2048))),
        _ => unreachable!("unsupported GMMA K"),
    }
}

/// The N extents PTX allows for a `wgmma` with A of type `a`.
pub fn valid_n(a: Element) -> Vec<i64> {
    if a.is_integer() {
        let mut v = vec![8, 16, 24];
        v.extend((2..=16).map(|i| i * 16));
        v
    } else {
        (1..=32).map(|i| i * 8).collect()
    }
}

/// A `wgmma.mma_async.sync.aligned.m64n{N}k{K}` atom. `K` follows from the input type
/// (16 for 16-bit inputs, 32 for 8-bit). A register A must be K-major, and 8-bit inputs
/// only exist K-major for both operands. Returns `None` for combinations PTX lacks.
pub fn wgmma(
    d: Element,
    a: Element,
    b: Element,
    n: i64,
    source: GmmaSource,
    a_major: Major,
    b_major: Major,
) -> Option<MmaAtom> {
    use Element::*;
    let k = match (d, a, b) {
        (F16 | F32, F16, F16) | (F32, BF16, BF16) => 16,
        (S32, S8 | U8, S8 | U8) => 32,
        (F16 | F32, E4M3 | E5M2, E4M3 | E5M2) => 32,
        _ => return None,
    };
    if !valid_n(a).contains(&n) {
        return None;
    }
    let sixteen = k == 16;
    if source == GmmaSource::RS && a_major != Major::K {
        return None;
    }
    if !sixteen && (a_major != Major::K || b_major != Major::K) {
        return None;
    }
    let c = d;
    let a_tv = match source {
        GmmaSource::SS => ab_layout(64, k),
        GmmaSource::RS => a_layout_64xk(k),
    };
    let b_tv = ab_layout(n, k);
    let c_tv = c_layout_64xn(n);
    let src = match source {
        GmmaSource::SS => "SS",
        GmmaSource::RS => "RS",
    };
    let major_tag = |m: Major| if m == Major::K { "K" } else { "MN" };
    let name = format!(
        "SM90_64x{n}x{k}_{}{}{}_{src}<{},{}>",
        d.cute_name(),
        a.cute_name(),
        b.cute_name(),
        major_tag(a_major),
        major_tag(b_major)
    );
    let ptx = format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k{k}.{}.{}.{}",
        d.ptx(),
        a.ptx(),
        b.ptx()
    );
    let fn_name = format!(
        "rc_wgmma_m64n{n}k{k}_{}_{}_{}_{}_{}_{}",
        d.ptx(),
        a.ptx(),
        b.ptx(),
        src.to_lowercase(),
        a_major.tag(),
        b_major.tag()
    );
    let vc = n / 2; // 64*N values over 128 threads
    let nc = reg_count(d, vc);
    let (dty, dcon) = reg_cty(d);
    let mut params = Vec::new();
    let mut ins = Vec::new();
    let outs = bind_array(&format!("+{dcon}"), "d", nc);
    let mut op = nc;
    let a_operand;
    match source {
        GmmaSource::SS => {
            params.push(Param::scalar("desc_a", "uint64_t"));
            ins.push("\"l\"(desc_a)".to_string());
            a_operand = format!("%{op}");
            op += 1;
        }
        GmmaSource::RS => {
            let na = reg_count(a, a_tv.mode(1).ok()?.size().as_static()?);
            params.push(Param::regs("a", "uint32_t", na, Dir::In));
            ins.extend(bind_array("r", "a", na));
            a_operand = operand_list(op, na);
            op += na;
        }
    }
    params.push(Param::scalar("desc_b", "uint64_t"));
    ins.push("\"l\"(desc_b)".to_string());
    let b_operand = format!("%{op}");
    op += 1;
    params.push(Param::regs("d", dty, nc, Dir::InOut));
    params.push(Param::scalar("scale_d", "int"));
    ins.push("\"r\"(scale_d)".to_string());
    let p_operand = op;
    // Immediates: scale-a, scale-b (+1) for floating inputs; transposes for 16-bit inputs.
    let mut imms = Vec::new();
    if a.is_float() {
        imms.push("1".to_string());
        imms.push("1".to_string());
    }
    if sixteen {
        if source == GmmaSource::SS {
            imms.push(a_major.imm().to_string());
        }
        imms.push(b_major.imm().to_string());
    }
    let tail = if imms.is_empty() {
        String::new()
    } else {
        format!(", {}", imms.join(", "))
    };
    let lines = vec![
        "{".to_string(),
        ".reg .pred p;".to_string(),
        format!("setp.ne.b32 p, %{p_operand}, 0;"),
        format!("{ptx} {}, {a_operand}, {b_operand}, p{tail};", operand_list(0, nc)),
        "}".to_string(),
    ];
    let body = asm_stmt(&lines, &outs, &ins, false);
    let snippet = Snippet::build(fn_name, Arch::SM90A, 128, params, &body);
    Some(MmaAtom {
        name,
        arch: Arch::SM90A,
        shape_mnk: [64, n, k],
        thr_id: Layout::col_major(tuple!(128)),
        a_tv,
        b_tv,
        c_tv,
        types: MmaTypes { d, a, b, c },
        kind: MmaKind::Wgmma {
            source,
            a_major,
            b_major,
        },
        ptx,
        snippet,
    })
}

/// Every `wgmma` atom: all type combinations, every valid N, SS and RS, every allowed
/// pair of major modes.
pub fn all_sm90_atoms() -> Vec<MmaAtom> {
    use Element::*;
    let mut combos: Vec<(Element, Element, Element)> = vec![(F16, F16, F16), (F32, F16, F16), (F32, BF16, BF16)];
    for a in [S8, U8] {
        for b in [S8, U8] {
            combos.push((S32, a, b));
        }
    }
    for d in [F32, F16] {
        for a in [E4M3, E5M2] {
            for b in [E4M3, E5M2] {
                combos.push((d, a, b));
            }
        }
    }
    let mut out = Vec::new();
    for (d, a, b) in combos {
        for n in valid_n(a) {
            for source in [GmmaSource::SS, GmmaSource::RS] {
                for am in [Major::K, Major::MN] {
                    for bm in [Major::K, Major::MN] {
                        if let Some(x) = wgmma(d, a, b, n, source, am, bm) {
                            out.push(x);
                        }
                    }
                }
            }
        }
    }
    out
}

/// `wgmma.fence.sync.aligned`: order register accesses before the next `wgmma`.
pub fn wgmma_fence() -> Snippet {
    let body = asm_stmt(&["wgmma.fence.sync.aligned;".into()], &[], &[], true);
    Snippet::build("rc_wgmma_fence", Arch::SM90A, 128, vec![], &body)
}

/// `wgmma.commit_group.sync.aligned`: close the current group of `wgmma` operations.
pub fn wgmma_commit_group() -> Snippet {
    let body = asm_stmt(&["wgmma.commit_group.sync.aligned;".into()], &[], &[], true);
    Snippet::build("rc_wgmma_commit_group", Arch::SM90A, 128, vec![], &body)
}

/// `wgmma.wait_group.sync.aligned N`: wait until at most `N` groups are pending
/// (`N` is a template parameter).
pub fn wgmma_wait_group() -> Snippet {
    let body = asm_stmt(
        &["wgmma.wait_group.sync.aligned %0;".into()],
        &[],
        &["\"n\"(N)".into()],
        true,
    );
    Snippet::build_template(
        "rc_wgmma_wait_group",
        Arch::SM90A,
        128,
        vec![],
        vec![("int", "N", "0".into())],
        &body,
    )
}

/// Keep the compiler from moving accesses to an accumulator register across `wgmma`
/// (CuTe's `warpgroup_fence_operand`): an empty asm that reads and writes the register.
pub fn wgmma_fence_operand() -> Snippet {
    let params = vec![Param::new(
        "r",
        ParamTy::Regs {
            cty: "uint32_t",
            len: 1,
            dir: Dir::InOut,
        },
    )];
    let body = asm_stmt(&["".into()], &["\"+r\"(r[0])".into()], &[], true);
    Snippet::build("rc_wgmma_fence_operand", Arch::SM90A, 1, params, &body)
}

/// The swizzle mode of a canonical GMMA shared-memory layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GmmaSwizzle {
    /// No swizzle (8x16-byte core matrices, "interleave").
    Interleave,
    /// 32-byte swizzle.
    B32,
    /// 64-byte swizzle.
    B64,
    /// 128-byte swizzle.
    B128,
}

impl GmmaSwizzle {
    /// All modes.
    pub const ALL: [GmmaSwizzle; 4] = [
        GmmaSwizzle::Interleave,
        GmmaSwizzle::B32,
        GmmaSwizzle::B64,
        GmmaSwizzle::B128,
    ];
    /// Width of the swizzle atom in 16-byte units (`W` in CuTe: 1, 2, 4, 8).
    pub fn width_u128(self) -> i64 {
        match self {
            GmmaSwizzle::Interleave => 1,
            GmmaSwizzle::B32 => 2,
            GmmaSwizzle::B64 => 4,
            GmmaSwizzle::B128 => 8,
        }
    }
    /// The swizzle span in bytes (16, 32, 64, 128).
    pub fn span_bytes(self) -> i64 {
        16 * self.width_u128()
    }
    /// The byte-address swizzle `Swizzle<B,4,3>` with `B = log2(W)`.
    pub fn byte_swizzle(self) -> Swizzle {
        let b = match self {
            GmmaSwizzle::Interleave => 0,
            GmmaSwizzle::B32 => 1,
            GmmaSwizzle::B64 => 2,
            GmmaSwizzle::B128 => 3,
        };
        Swizzle::new(b, 4, 3).expect("valid swizzle")
    }
    /// The descriptor's 2-bit layout type (0 none, 1 128B, 2 64B, 3 32B).
    pub fn layout_type(self) -> u8 {
        match self {
            GmmaSwizzle::Interleave => 0,
            GmmaSwizzle::B128 => 1,
            GmmaSwizzle::B64 => 2,
            GmmaSwizzle::B32 => 3,
        }
    }
    /// From the descriptor's layout type.
    pub fn from_layout_type(t: u8) -> Option<GmmaSwizzle> {
        Some(match t {
            0 => GmmaSwizzle::Interleave,
            1 => GmmaSwizzle::B128,
            2 => GmmaSwizzle::B64,
            3 => GmmaSwizzle::B32,
            _ => return None,
        })
    }
}

/// A canonical GMMA shared-memory layout atom: `swizzle o layout`, in elements
/// (CuTe's `GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom<T>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GmmaSmemAtom {
    /// Which mode is contiguous.
    pub major: Major,
    /// Swizzle mode.
    pub mode: GmmaSwizzle,
    /// Element type.
    pub elem: Element,
    /// The swizzle on element offsets (CuTe's byte swizzle recast to the element width).
    pub swizzle: Swizzle,
    /// The swizzle on byte offsets (`Swizzle<B,4,3>`), as CuTe stores it.
    pub byte_swizzle: Swizzle,
    /// `(MN, K)` -> element offset, before the swizzle.
    pub layout: Layout,
}

impl GmmaSmemAtom {
    /// The atom for a major mode, swizzle mode and element type.
    pub fn new(major: Major, mode: GmmaSwizzle, elem: Element) -> GmmaSmemAtom {
        let w_bits = mode.width_u128() * 128;
        let bits = match major {
            Major::MN => lay(tuple!(w_bits, 8), tuple!(1, w_bits)),
            Major::K => lay(tuple!(8, w_bits), tuple!(w_bits, 1)),
        };
        let layout = bits.upcast(elem.bits() as i64).expect("element width divides the atom");
        let byte_swizzle = mode.byte_swizzle();
        let swizzle = byte_swizzle.recast(8, elem.bits() as i64).expect("power-of-two widths");
        GmmaSmemAtom {
            major,
            mode,
            elem,
            swizzle,
            byte_swizzle,
            layout,
        }
    }
    /// The element offset of `(mn, k)` after the swizzle.
    pub fn offset(&self, mn: i64, k: i64) -> Option<i64> {
        let o = self.layout.crd2idx(&tuple!(mn, k)).ok()?.as_static()?;
        Some(self.swizzle.apply(o))
    }
}

impl std::fmt::Display for GmmaSmemAtom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} o {}", self.swizzle, self.layout)
    }
}
