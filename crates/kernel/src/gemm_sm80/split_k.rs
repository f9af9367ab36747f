//! Split-K: the parallel reduction kernel (`<name>_splitk_reduce`) and the serial split-K
//! semaphore helpers.

use super::config::{GemmSm80Config, REDUCE_THREADS};
use super::epilogue::gmem_offset;
use super::kernel::type_names;
use super::stmt::{c, d, dc, e, if_};
use crate::emit::{Function as CFunction, Stmt};
use rcute_collective::fusion::FusionCode;
use rcute_collective::{EpiloguePlan, StorageOrder};

/// The parallel split-K reduction: one thread per output element sums the partials (f32,
/// or the exact s32 sum for s8), then applies the linear combination (`fusion == None`)
/// or the fusion's visit function once, and stores D.
pub(super) fn reduce_kernel(
    cfg: &GemmSm80Config,
    ep: &EpiloguePlan,
    name: &str,
    fusion: Option<&FusionCode>,
) -> CFunction {
    let t = type_names(cfg);
    let row_major = cfg.c_major == StorageOrder::RowMajor;
    // (m, n) in C / D: the layout (M,N):(ld,1) (row-major) or (M,N):(1,ld).
    let off = |ld: &str| gmem_offset(row_major, ld).expr;
    let mut body = crate::grid_dependency::prologue(None);
    body.extend([
        d("const long long", "mn", "(long long)M * N"),
        d("const int", "batch", "blockIdx.y"),
    ]);
    if fusion.is_none() {
        body.push(d(&format!("const {}* const", t.tc), "gC", "C + batch * batch_stride_c"));
    }
    body.extend([
        d(&format!("{}* const", t.td), "gD", "D + batch * batch_stride_d"),
        c(format!(
            "one thread per workspace index i = {} (the order of D)",
            if row_major { "m * N + n" } else { "n * M + m" }
        )),
        d(
            "const long long",
            "i",
            "(long long)blockIdx.x * blockDim.x + threadIdx.x",
        ),
        if_("i >= mn", vec![Stmt::Return]),
        d(
            "const int",
            "m",
            if row_major { "(int)(i / N)" } else { "(int)(i % M)" },
        ),
        d(
            "const int",
            "n",
            if row_major { "(int)(i % N)" } else { "(int)(i / M)" },
        ),
    ]);
    let (sum, acc) = if cfg.is_integer() {
        body.push(dc(
            "unsigned",
            "s",
            "0u",
            "the exact s32 sum of the splits (two's-complement wrap-around, as the MMA accumulates)",
        ));
        ("s += (unsigned)workspace[", "(float)(int)s")
    } else {
        body.push(d("float", "s", "0.0f"));
        ("s += workspace[", "s")
    };
    body.push(Stmt::For {
        var: "p".into(),
        start: "0".into(),
        end: "split_k".into(),
        unroll: false,
        body: vec![e(format!("{sum}((long long)batch * split_k + p) * mn + i]"))],
    });
    let mut params: Vec<(String, String)> = vec![(format!("const {}* __restrict__", t.acc), "workspace".into())];
    if fusion.is_none() {
        params.push((format!("const {}*", t.tc), "C".into()));
    }
    params.push((format!("{}*", t.td), "D".into()));
    for n in ["M", "N", "split_k"] {
        params.push(("int".into(), n.into()));
    }
    let what = match fusion {
        None => {
            body.extend([
                d("float", "v", "alpha * s"),
                if_(
                    "beta != 0.0f",
                    vec![e(format!(
                        "v += beta * {}",
                        ep.c_to_f32_cpp(&format!("gC[{}]", off("ldc")))
                    ))],
                ),
                Stmt::assign(format!("gD[{}]", off("ldd")), ep.to_d_cpp("v")),
            ]);
            for n in ["ldc", "ldd", "batch_stride_c", "batch_stride_d"] {
                params.push(("long long".into(), n.into()));
            }
            params.push(("float".into(), "alpha".into()));
            params.push(("float".into(), "beta".into()));
            "alpha * sum_p workspace[p] + beta * C".to_string()
        }
        Some(f) => {
            body.push(Stmt::assign(
                format!("gD[{}]", off("ldd")),
                ep.to_d_cpp(&format!("{}(ep, {acc}, 0.0f, m, n, batch)", f.fn_name)),
            ));
            params.push(("long long".into(), "ldd".into()));
            params.push(("long long".into(), "batch_stride_d".into()));
            params.push((format!("const {}", f.struct_name), "ep".into()));
            format!("{}(sum_p workspace[p])", f.fn_name)
        }
    };
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({REDUCE_THREADS})"),
        ret: "void".into(),
        name: format!("{name}_splitk_reduce"),
        params,
        doc: vec![format!(
            "Parallel split-K reduction: D = convert({what}); grid (blocks, L)."
        )],
        body,
    }
}
