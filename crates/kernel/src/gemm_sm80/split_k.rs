//! Split-K: the parallel reduction kernel (`<name>_splitk_reduce`) and the serial split-K
//! semaphore helpers.

use super::config::{GemmSm80Config, REDUCE_THREADS};
use super::kernel::type_names;
use super::stmt::{c, d, e, if_};
use crate::emit::{Function as CFunction, Stmt};
use rcute_collective::fusion::FusionCode;
use rcute_collective::{EpiloguePlan, StorageOrder};

/// The parallel split-K reduction: sums the f32 partials, then applies the linear
/// combination (`fusion == None`) or the fusion's visit function, and stores D.
pub(super) fn reduce_kernel(
    cfg: &GemmSm80Config,
    ep: &EpiloguePlan,
    name: &str,
    fusion: Option<&FusionCode>,
) -> CFunction {
    let t = type_names(cfg);
    let row_major = cfg.c_major == StorageOrder::RowMajor;
    let (mexpr, nexpr) = if row_major {
        ("(int)(i / N)", "(int)(i % N)")
    } else {
        ("(int)(i % M)", "(int)(i / M)")
    };
    let off = |ld: &str| {
        if row_major {
            format!("(long long)m * {ld} + n")
        } else {
            format!("(long long)n * {ld} + m")
        }
    };
    let mut inner = vec![
        d("const int", "m", mexpr),
        d("const int", "n", nexpr),
        d("float", "s", "0.0f"),
        Stmt::For {
            var: "p".into(),
            start: "0".into(),
            end: "split_k".into(),
            unroll: false,
            body: vec![e("s += workspace[((long long)batch * split_k + p) * mn + i]")],
        },
    ];
    match fusion {
        None => inner.extend([
            d("float", "v", "alpha * s"),
            if_(
                "beta != 0.0f",
                vec![e(format!(
                    "v += beta * {}",
                    ep.c_to_f32_cpp(&format!("gC[{}]", off("ldc")))
                ))],
            ),
            Stmt::assign(format!("gD[{}]", off("ldd")), ep.to_d_cpp("v")),
        ]),
        Some(f) => inner.push(Stmt::assign(
            format!("gD[{}]", off("ldd")),
            ep.to_d_cpp(&format!("{}(ep, s, 0.0f, m, n, batch)", f.fn_name)),
        )),
    }
    let mut params: Vec<(String, String)> = vec![
        ("const float* __restrict__".into(), "workspace".into()),
        (format!("const {}*", t.tc), "C".into()),
        (format!("{}*", t.td), "D".into()),
        ("int".into(), "M".into()),
        ("int".into(), "N".into()),
        ("int".into(), "split_k".into()),
        ("long long".into(), "ldc".into()),
        ("long long".into(), "ldd".into()),
        ("long long".into(), "batch_stride_c".into()),
        ("long long".into(), "batch_stride_d".into()),
        ("float".into(), "alpha".into()),
        ("float".into(), "beta".into()),
    ];
    let what = match fusion {
        None => "alpha * sum_p workspace[p] + beta * C".to_string(),
        Some(f) => {
            params.push((format!("const {}", f.struct_name), "ep".into()));
            format!("{}(sum_p workspace[p])", f.fn_name)
        }
    };
    let mut body = vec![
        d("const long long", "mn", "(long long)M * N"),
        d("const int", "batch", "blockIdx.y"),
        d(&format!("const {}* const", t.tc), "gC", "C + batch * batch_stride_c"),
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
    ];
    body.extend(inner);
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

/// The device helpers of serial split-K: a gpu-scope acquire load and release store.
pub const SEMAPHORE_HELPERS: &str = r#"// rcute serial split-K semaphore: gpu-scope acquire load / release store of a global int.
__device__ __forceinline__ int rc_ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void rc_st_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
"#;
