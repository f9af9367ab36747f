//! Split-K: the main kernel's partial stores and the reduction kernel.

use super::*;

/// Split-K: the work item's partial sums go straight from the accumulator registers to
/// `workspace[(split * L + batch) * M * N + m * N + n]` (8-byte stores of column pairs);
/// the reduction kernel sums the splits and applies the fusion.
pub(super) fn split_partials(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    // Partial sums keep the accumulator type: int32 partials of s8 GEMMs add up exactly.
    let at = if k.cfg.ab == Element::S8 { "int" } else { "float" };
    let pairs = k.bn / 8;
    // CLayout_64xN: the register pair of (h, j) and its column in the atom.
    let reg = lay(tuple!(2, pairs), tuple!(2, 4))?;
    let row = lay(tuple!(2, pairs), tuple!(8, 0))?;
    let col = lay(tuple!(2, pairs), tuple!(0, 8))?;
    let hj = [var("h"), var("j")];
    let store = vec![
        dl("const int", "ri", &reg, &hj)?,
        dl("const int", "col", &col, &hj)?,
        if_(
            "gn + col < N",
            vec![e(format!(
                "*reinterpret_cast<{at}2*>(ws + (long long)(gm + row) * N + gn + col) = make_{at}2(acc[a][ri], acc[a][ri + 1])"
            ))],
        ),
    ];
    let per_atom = vec![
        dc(
            "const int",
            "gm",
            "m0 + wg_row0 + a * 64 + 16 * warp + lane / 4",
            "CLayout_64xN rows",
        ),
        d("const int", "gn", "n0 + 2 * (lane % 4)"),
        unroll(
            "h",
            2,
            vec![
                dl("const int", "row", &row, &[var("h"), Expr::lit(0)])?,
                if_("gm + row < M", vec![unroll("j", pairs, store)]),
            ],
        ),
    ];
    Ok(vec![
        c("split-K: store this split's partial sums (the fusion runs once, in the reduction kernel)"),
        d(
            &format!("{at}* const"),
            "ws",
            format!("reinterpret_cast<{at}*>(workspace) + ((long long)(split * L + batch) * M) * N"),
        ),
        unroll("a", k.p.m_atoms, per_atom),
    ])
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
    let mut body = crate::grid_dependency::prologue(None);
    body.extend([
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
                d("const uint4", "craw", "*reinterpret_cast<const uint4*>(C + batch * bsc + (long long)m * ldc + n)".to_string()),
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
    ]);
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
