//! The main kernel of the bf16 / f16 GEMM: its parameters and body (mainloop + staged
//! epilogue with the linear combination).

use super::config::{GemmSm80Config, Sm80Target, TICKET_SMEM};
use super::cta::grid_doc;
use super::epilogue::{staged_epilogue, EpilogueOp};
use super::mainloop::mainloop_stmts;
use super::mainloop_emit::MainloopEmit;
use super::producer::G2sMode;
use crate::emit::Function as CFunction;
use rcute_collective::fusion::FusionCode;
use rcute_collective::{Sm80Mainloop, SmemEpilogue};

pub(super) struct Names {
    pub ta: &'static str,
    pub tc: &'static str,
    pub td: &'static str,
    /// The accumulator (and split-K workspace) type: `float`, or `int` for s8.
    pub acc: &'static str,
}

pub(super) fn type_names(cfg: &GemmSm80Config) -> Names {
    Names {
        ta: cfg.a.cuda_type(),
        tc: cfg.c.cuda_type(),
        td: cfg.d.cuda_type(),
        acc: if cfg.is_integer() { "int" } else { "float" },
    }
}

/// The main kernel; `fusion` is the emitted epilogue fusion (`None`: the linear
/// combination, with its specialized epilogue).
pub(super) fn main_kernel(
    cfg: &GemmSm80Config,
    p: &Sm80Mainloop,
    se: &SmemEpilogue,
    name: &str,
    mma_fn: &str,
    fusion: Option<&FusionCode>,
) -> CFunction {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let stages = p.stages;
    let r = cfg.raster_swizzle;
    let opts = MainloopEmit {
        name,
        raster_swizzle: r,
        ticket_offset: se.union_bytes,
        g2s: match cfg.target {
            Sm80Target::Ampere => G2sMode::CpAsync,
            Sm80Target::Turing => G2sMode::Registers,
        },
        mma_fn,
        cta: None,
        rows: Default::default(),
    };
    let mut b = crate::grid_dependency::prologue(Some("early_trigger"));
    b.extend(mainloop_stmts(p, &opts));
    let (op, what) = match fusion {
        None => (
            EpilogueOp::LinearCombination { c: cfg.c },
            "alpha * A * B + beta * C".to_string(),
        ),
        Some(f) => (
            EpilogueOp::Visit { visit_fn: &f.fn_name },
            format!("{}(A * B) ({})", f.fn_name, cfg.fusion.describe()),
        ),
    };
    b.extend(staged_epilogue(p, se, cfg.d, cfg.c_major, &op));

    let params = main_params(&type_names(cfg), fusion);
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({}, 1)", p.threads),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec![
            format!(
                "D = {what}, {} x {} -> {} -> {}{} ({}), tile {bm}x{bn}x{bk}, {stages} stages, {wm}x{wn} warps",
                cfg.a.ptx(),
                cfg.b.ptx(),
                cfg.mainloop().acc.ptx(),
                if fusion.is_none() {
                    format!("C {} / ", cfg.c.ptx())
                } else {
                    String::new()
                },
                format!("D {}", cfg.d.ptx()),
                cfg.c_major.tag()
            ),
            format!(
                "{}, block {}, dynamic smem {} bytes",
                grid_doc(r),
                p.threads,
                se.union_bytes + TICKET_SMEM
            ),
        ],
        body: b,
    }
}

/// The main kernel's parameters: with the linear combination C, its leading dimension and
/// batch stride, `alpha` and `beta`; with a fusion (which reads no C) its parameter struct
/// `ep` instead. The workspace has the accumulator's type (f32, or int for s8).
fn main_params(t: &Names, fusion: Option<&FusionCode>) -> Vec<(String, String)> {
    let lincomb = fusion.is_none();
    let mut v: Vec<(String, String)> = vec![
        (format!("const {}* __restrict__", t.ta), "A".into()),
        (format!("const {}* __restrict__", t.ta), "B".into()),
    ];
    if lincomb {
        v.push((format!("const {}*", t.tc), "C".into()));
    }
    v.push((format!("{}*", t.td), "D".into()));
    v.push((format!("{}*", t.acc), "workspace".into()));
    v.push(("int*".into(), "semaphores".into()));
    for n in ["M", "N", "K", "L", "lda", "ldb", "ldc", "ldd"] {
        if n == "ldc" && !lincomb {
            continue;
        }
        let ty = if n.len() == 1 { "int" } else { "long long" };
        v.push((ty.into(), n.into()));
    }
    for n in ["a", "b", "c", "d"] {
        if n == "c" && !lincomb {
            continue;
        }
        v.push(("long long".into(), format!("batch_stride_{n}")));
    }
    if lincomb {
        v.push(("float".into(), "alpha".into()));
        v.push(("float".into(), "beta".into()));
    }
    v.push(("int".into(), "split_k".into()));
    v.push(("int".into(), "k_tiles_per_split".into()));
    v.push(("int".into(), "split_serial".into()));
    v.push(("int".into(), "early_trigger".into()));
    if let Some(f) = fusion {
        v.push((format!("const {}", f.struct_name), "ep".into()));
    }
    v
}
