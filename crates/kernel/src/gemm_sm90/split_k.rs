//! Split-K: the main kernel's partial stores, the in-kernel reduction of the last split
//! and the separate reduction kernel.

use super::*;

/// How the partial sums of split-K work items are combined.
///
/// ```
/// use rcute_kernel::gemm_sm90::{generate, GemmSm90Config, Sm90Schedule, Sm90SplitK};
/// let mut cfg = GemmSm90Config::bf16([64, 64, 64], Sm90Schedule::WarpSpecialized).without_c();
/// cfg.split_k_mode = Sm90SplitK::InKernel;
/// let g = generate(&cfg).unwrap();
/// assert!(g.name.ends_with("_ik_noc"));
/// assert!(!g.source.contains("_splitk_reduce"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Sm90SplitK {
    /// Every split stores its f32 partial tile; a second launch (`<name>_splitk_reduce`)
    /// sums them and applies the fusion.
    #[default]
    Separate,
    /// Every split stores its partial tile to its slab of the workspace and takes a ticket
    /// on the tile's counter (`int` semaphores, zero before the launch); the last to arrive
    /// sums the slabs in split order (deterministic), resets the counter to zero and runs
    /// the normal epilogue. One launch; the fusion must not read C (the C producer does not
    /// know which split is last).
    InKernel,
}

/// Reject what the in-kernel reduction does not support: a fusion that reads C and the
/// grouped member.
pub(super) fn check_split_k_mode(cfg: &GemmSm90Config) -> Result<(), GemmError> {
    if cfg.split_k_mode != Sm90SplitK::InKernel {
        return Ok(());
    }
    if cfg.with_c() {
        return Err(cfg_err(format!(
            "in-kernel split-K with fusion {}: the fusion reads C, which the C producer would load for every split (use Sm90SplitK::Separate)",
            cfg.fusion.name()
        )));
    }
    if cfg.grouped.is_some() {
        return Err(cfg_err("in-kernel split-K: not for the grouped member"));
    }
    Ok(())
}

/// Tile counters one launch of an in-kernel split-K configuration needs: one per tile and
/// epilogue group (the cooperative schedule's two warpgroups each reduce their own rows).
pub(super) fn counter_groups(cfg: &GemmSm90Config) -> u64 {
    if cfg.schedule == Sm90Schedule::Cooperative {
        2
    } else {
        1
    }
}

/// In-kernel split-K, after [`split_partials`]: the epilogue group takes a ticket on its
/// tile's counter; the last split to arrive resets the counter, sums every split's slab in
/// split order into the accumulators and sets `run_epilogue`, the others clear it.
pub(super) fn in_kernel_reduce(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let at = if k.cfg.ab == Element::S8 { "int" } else { "float" };
    let groups = counter_groups(k.cfg);
    let cgrp = if groups > 1 {
        format!(" * {groups} + cw")
    } else {
        String::new()
    };
    Ok(vec![
        c("in-kernel split-K: publish the partials (release fence), then one ticket per epilogue group on the tile's counter"),
        e("rc_fence_acq_rel_gpu()"),
        d("uint32_t", "last", "0u"),
        if_(
            "epi_leader && m0 < M && n0 < N",
            vec![
                dc(
                    "int* const",
                    "counter",
                    format!(
                        "tile_counters + (((long long)batch * ((M + {bm} - 1) / {bm}) + tile_m) * ((N + {bn} - 1) / {bn}) + tile_n){cgrp}",
                        bm = k.bm,
                        bn = k.bn
                    ),
                    "(batch, tile_m, tile_n[, warpgroup]) row-major",
                ),
                Stmt::assign("last", "(uint32_t)(atomicAdd(counter, 1) == split_k - 1)"),
                c("the last arrival resets the counter: the next launch (graph replay) starts from zero"),
                if_("last", vec![e("atomicExch(counter, 0)")]),
            ],
        ),
        c("every thread of the group learns the ticket (the barrier also orders the group's stores before it)"),
        Stmt::assign(
            "run_epilogue",
            format!("rc_named_barrier_red_or(epi_bar, {}u, last)", k.epi_threads),
        ),
        if_("run_epilogue", slab_sum(k, at)?),
    ])
}

/// The last split's sum: the accumulators cleared, then per split (in order, so the sum is
/// deterministic and equals the reduction kernel's) one batch of independent loads of this
/// thread's elements of the slab, added in. (Strong `ld.cg` loads serialize: measured on the
/// H200 at 22.5 us against 12.8 us unsplit for 64x4096x4096, BENCHMARKS.md.)
fn slab_sum(k: &Ctx, at: &str) -> Result<Vec<Stmt>, GemmError> {
    let pairs = k.bn / 8;
    // CLayout_64xN, as in split_partials.
    let reg = lay(tuple!(2, pairs), tuple!(2, 4))?;
    let row = lay(tuple!(2, pairs), tuple!(8, 0))?;
    let col = lay(tuple!(2, pairs), tuple!(0, 8))?;
    let hj = [var("h"), var("j")];
    // Two passes per row half: every load first (independent, so they are all in flight
    // together), then the adds.
    let load = vec![
        dl("const int", "col", &col, &hj)?,
        Stmt::assign(
            "part[j]",
            format!(
                "(gn + col < N) ? *reinterpret_cast<const {at}2*>(ws + (long long)(gm + row) * N + gn + col) : make_{at}2(0, 0)"
            ),
        ),
    ];
    let add = vec![
        dl("const int", "ri", &reg, &hj)?,
        e("acc[a][ri] += part[j].x; acc[a][ri + 1] += part[j].y"),
    ];
    let rows = vec![
        c("weak loads after the acquire fence"),
        Stmt::Array {
            ty: format!("{at}2"),
            name: "part".into(),
            len: pairs as usize,
            comment: None,
        },
        unroll("j", pairs, load),
        unroll("j", pairs, add),
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
                if_("gm + row < M", rows),
            ],
        ),
    ];
    Ok(vec![
        c("acquire: every split's partials are visible; sum the slabs in split order (deterministic)"),
        e("rc_fence_acq_rel_gpu()"),
        unroll(
            "a",
            k.p.m_atoms,
            vec![unroll("i", k.nacc, vec![Stmt::assign("acc[a][i]", "0")])],
        ),
        for_(
            "s",
            "0",
            "split_k",
            vec![
                dc(
                    &format!("const {at}* const"),
                    "ws",
                    format!("reinterpret_cast<const {at}*>(workspace) + ((long long)(s * L + batch) * M) * N"),
                    "slab s: (split, batch, m, n) row-major",
                ),
                unroll("a", k.p.m_atoms, per_atom),
            ],
        ),
    ])
}

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
        c(match k.cfg.split_k_mode {
            Sm90SplitK::Separate => {
                "split-K: store this split's partial sums (the fusion runs once, in the reduction kernel)"
            }
            Sm90SplitK::InKernel => {
                "split-K: store this split's partial sums to its slab (the last split reduces them)"
            }
        }),
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
