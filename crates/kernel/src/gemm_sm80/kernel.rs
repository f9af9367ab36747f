//! The main kernel of the bf16 / f16 GEMM: its parameters and body (mainloop + staged
//! epilogue with the linear combination).

use super::config::GemmSm80Config;
use super::cta::grid_doc;
use super::epilogue::{staged_epilogue, EpilogueOp};
use super::mainloop::{mainloop_stmts, MainloopEmit};
use super::producer::G2sMode;
use crate::emit::Function as CFunction;
use rcute_collective::fusion::FusionCode;
use rcute_collective::{Sm80Mainloop, SmemEpilogue};

pub(super) struct Names {
    pub ta: &'static str,
    pub tc: &'static str,
    pub td: &'static str,
}

pub(super) fn type_names(cfg: &GemmSm80Config) -> Names {
    Names {
        ta: cfg.a.cuda_type(),
        tc: cfg.c.cuda_type(),
        td: cfg.d.cuda_type(),
    }
}

/// The main kernel; `fusion` is the emitted epilogue fusion (`None`: the linear
/// combination, with its specialized epilogue).
pub(super) fn main_kernel(
    cfg: &GemmSm80Config,
    p: &Sm80Mainloop,
    se: &SmemEpilogue,
    name: &str,
    fusion: Option<&FusionCode>,
) -> CFunction {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let stages = p.stages;
    let r = cfg.raster_swizzle;
    let mma_fn = p.mma_atom.fn_name().to_string();
    let opts = MainloopEmit {
        name,
        raster_swizzle: r,
        ticket_offset: se.union_bytes,
        g2s: G2sMode::CpAsync,
        mma_fn: &mma_fn,
    };
    let mut b = mainloop_stmts(p, &opts);
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

    let mut params = main_params(&type_names(cfg));
    if let Some(f) = fusion {
        params.push((format!("const {}", f.struct_name), "ep".into()));
    }
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({}, 1)", p.threads),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec![
            format!(
                "D = {what}, {} x {} -> f32 -> C {} / D {} ({}), tile {bm}x{bn}x{bk}, {stages} stages, {wm}x{wn} warps",
                cfg.a.ptx(),
                cfg.b.ptx(),
                cfg.c.ptx(),
                cfg.d.ptx(),
                cfg.c_major.tag()
            ),
            format!(
                "{}, block {}, dynamic smem {} bytes",
                grid_doc(r),
                p.threads,
                p.smem_bytes
            ),
        ],
        body: b,
    }
}

fn main_params(t: &Names) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vec![
        (format!("const {}* __restrict__", t.ta), "A".into()),
        (format!("const {}* __restrict__", t.ta), "B".into()),
        (format!("const {}*", t.tc), "C".into()),
        (format!("{}*", t.td), "D".into()),
        ("float*".into(), "workspace".into()),
        ("int*".into(), "semaphores".into()),
    ];
    for n in ["M", "N", "K", "L"] {
        v.push(("int".into(), n.into()));
    }
    for n in [
        "lda",
        "ldb",
        "ldc",
        "ldd",
        "batch_stride_a",
        "batch_stride_b",
        "batch_stride_c",
        "batch_stride_d",
    ] {
        v.push(("long long".into(), n.into()));
    }
    v.push(("float".into(), "alpha".into()));
    v.push(("float".into(), "beta".into()));
    v.push(("int".into(), "split_k".into()));
    v.push(("int".into(), "k_tiles_per_split".into()));
    v.push(("int".into(), "split_serial".into()));
    v
}
