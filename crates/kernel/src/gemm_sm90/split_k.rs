//! Split-K: the main kernel's partial stores and the reduction kernel.

use super::*;

/// Split-K: the work item's f32 partial sums go straight from the accumulator registers
/// to `workspace[(split * L + batch) * M * N + m * N + n]` (8-byte stores of column pairs);
/// the reduction kernel sums the splits and applies the fusion.
pub(super) fn split_partials(p: &Sm90Plan, cfg: &GemmSm90Config) -> Vec<Stmt> {
    let bn = cfg.tile[1];
    // Partial sums keep the accumulator type: int32 partials of s8 GEMMs add up exactly.
    let at = if cfg.ab == Element::S8 { "int" } else { "float" };
    let mut v = vec![
        c("split-K: store this split's partial sums (the fusion runs once, in the reduction kernel)"),
        d(
            &format!("{at}* const"),
            "ws",
            format!("reinterpret_cast<{at}*>(workspace) + ((long long)(split * L + batch) * M) * N"),
        ),
    ];
    for a in 0..p.m_atoms {
        let mut inner = vec![
            dc(
                "const int",
                "gm",
                format!("m0 + wg_row0 + {} + 16 * warp + lane / 4", a * 64),
                "CLayout_64xN rows",
            ),
            d("const int", "gn", "n0 + 2 * (lane % 4)"),
        ];
        for h in 0..2 {
            let mut row = vec![];
            for j in 0..bn / 8 {
                row.push(if_(
                    format!("gn + {} < N", 8 * j),
                    vec![e(format!(
                        "*reinterpret_cast<{at}2*>(ws + (long long)(gm + {}) * N + gn + {}) = make_{at}2(acc[{a}][{}], acc[{a}][{}])",
                        8 * h,
                        8 * j,
                        4 * j + 2 * h,
                        4 * j + 2 * h + 1
                    ))],
                ));
            }
            inner.push(if_(format!("gm + {} < M", 8 * h), row));
        }
        v.push(Stmt::Block(inner));
    }
    v
}

/// The largest split-K factor.
pub const MAX_SPLIT_K: u32 = 64;

/// Threads per CTA of the split-K reduction kernel.
pub const REDUCE_THREADS: u32 = 256;

/// The split-K reduction: each thread sums the splits of 8 consecutive outputs (N is a
/// multiple of 8), applies the fusion with C, and stores 16 bytes of D.
pub(super) fn reduce_kernel(cfg: &GemmSm90Config, name: &str, fusion: &FusionCode) -> CFunction {
    let t = cfg.cd.cuda_type();
    let at = if cfg.ab == Element::S8 { "int" } else { "float" };
    let conv = match cfg.cd {
        Element::BF16 => "__bfloat162float",
        _ => "__half2float",
    };
    let body = vec![
        d("const int", "batch", "blockIdx.y"),
        d("const long long", "idx", "(long long)blockIdx.x * blockDim.x + threadIdx.x"),
        d("const int", "groups", "N / 8"),
        d("const int", "m", "(int)(idx / groups)"),
        d("const int", "n", "(int)(idx % groups) * 8"),
        if_("m >= M", vec![Stmt::Return]),
        Stmt::Array { ty: at.into(), name: "acc".into(), len: 8, comment: Some("sum over the splits (the accumulator type)".into()) },
        Stmt::unrolled("i", 8, vec![Stmt::assign("acc[i]", "0")]),
        for_(
            "s",
            "0",
            "split_k",
            vec![
                d(&format!("const {at}4*"), "src", format!("reinterpret_cast<const {at}4*>(workspace) + (((long long)(s * L + batch) * M + m) * N + n) / 4")),
                d(&format!("const {at}4"), "x", "src[0]"),
                d(&format!("const {at}4"), "y", "src[1]"),
                e("acc[0] += x.x; acc[1] += x.y; acc[2] += x.z; acc[3] += x.w"),
                e("acc[4] += y.x; acc[5] += y.y; acc[6] += y.z; acc[7] += y.w"),
            ],
        ),
        Stmt::Array { ty: "float".into(), name: "cv".into(), len: 8, comment: Some("C, when the fusion reads it".into()) },
        Stmt::unrolled("i", 8, vec![Stmt::assign("cv[i]", "0.0f")]),
        if_(
            fusion.source_needed.clone(),
            vec![
                d("const uint4", "craw", format!("*reinterpret_cast<const uint4*>(C + batch * bsc + (long long)m * ldc + n)")),
                d(&format!("const {t}*"), "ce", format!("reinterpret_cast<const {t}*>(&craw)")),
                Stmt::unrolled("i", 8, vec![Stmt::assign("cv[i]", format!("{conv}(ce[i])"))]),
            ],
        ),
        Stmt::Array { ty: "uint32_t".into(), name: "out".into(), len: 4, comment: None },
        Stmt::unrolled(
            "i",
            4,
            vec![Stmt::assign(
                "out[i]",
                "rc_pack2(rc_visit_at(p, (float)acc[2 * i], cv[2 * i], m, n + 2 * i, batch, M, N), rc_visit_at(p, (float)acc[2 * i + 1], cv[2 * i + 1], m, n + 2 * i + 1, batch, M, N))",
            )],
        ),
        e("*reinterpret_cast<uint4*>(D + batch * bsd + (long long)m * ldd + n) = make_uint4(out[0], out[1], out[2], out[3])"),
    ];
    CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({REDUCE_THREADS})"),
        ret: "void".into(),
        name: format!("{name}_splitk_reduce"),
        params: vec![
            ("const float* __restrict__".into(), "workspace".into()),
            (format!("const {t}* __restrict__"), "C".into()),
            (format!("{t}* __restrict__"), "D".into()),
            ("int".into(), "M".into()),
            ("int".into(), "N".into()),
            ("int".into(), "L".into()),
            ("int".into(), "split_k".into()),
            ("long long".into(), "ldc".into()),
            ("long long".into(), "ldd".into()),
            ("long long".into(), "bsc".into()),
            ("long long".into(), "bsd".into()),
            (format!("const {}", fusion.struct_name), "p".into()),
        ],
        doc: vec![format!(
            "{name}: split-K reduction (sum of the f32 partials, then the fusion and D)"
        )],
        body,
    }
}
