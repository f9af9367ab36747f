//! The shared-memory offset functions of the A and B stages (from the swizzled smem layouts)
//! and the check that lets a thread keep one base offset and XOR constants.

use super::error::GemmError;
use super::stmt::{dc, e};
use crate::emit::{Function as CFunction, Stmt};
use rcute_collective::Sm80Mainloop;
use rcute_layout::{AnyLayout, Int, Tuple};

/// `layout(mn, k, 0)` of a stage-0 slice as C++ (the swizzle renders as `x ^ ((x & Y) >> S)`).
fn smem_offset_cpp(l: &AnyLayout) -> Result<String, GemmError> {
    let coord = Tuple::node([
        Tuple::Leaf(Int::from("mn")),
        Tuple::Leaf(Int::from("k")),
        Tuple::Leaf(Int::Static(0)),
    ]);
    let off = l
        .crd2idx(&coord)
        .map_err(|e| GemmError::Config(format!("smem layout: {e}")))?;
    Ok(off.to_cpp())
}

pub(crate) fn smem_fn(name: &str, l: &AnyLayout, what: &str) -> Result<CFunction, GemmError> {
    Ok(CFunction {
        qualifiers: "__device__ __forceinline__".into(),
        ret: "int".into(),
        name: name.into(),
        params: vec![("int".into(), "mn".into()), ("int".into(), "k".into())],
        doc: vec![
            format!("{what}: element offset of (mn, k) in stage 0 of the smem layout"),
            format!("  {l}"),
            "(stage s adds s * BMN * BK: the stage stride is a multiple of the swizzle period).".into(),
        ],
        body: vec![e(format!("return {}", smem_offset_cpp(l)?))],
    })
}

/// Which smem offsets split as `offset(t + s) = offset(t) ^ offset(s)` (thread part `t`,
/// static part `s`): then a thread keeps one base offset and every unrolled access is an
/// XOR with a constant, instead of re-evaluating the swizzled layout (register pressure).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Separable {
    pub s2r_a: bool,
    pub s2r_b: bool,
    pub g2s_a: bool,
    pub g2s_b: bool,
}

fn xor_separable(l: &AnyLayout, thread: &[(i64, i64)], stat: &[(i64, i64)]) -> bool {
    let off = |mn: i64, k: i64| -> Option<i64> {
        let c = Tuple::node([
            Tuple::Leaf(Int::Static(mn)),
            Tuple::Leaf(Int::Static(k)),
            Tuple::Leaf(Int::Static(0)),
        ]);
        l.crd2idx(&c).ok()?.as_static()
    };
    let mut cache = std::collections::HashMap::new();
    for &(tm, tk) in thread {
        let Some(t) = off(tm, tk) else { return false };
        for &(sm, sk) in stat {
            let s_off = *cache.entry((sm, sk)).or_insert_with(|| off(sm, sk));
            match (off(tm + sm, tk + sk), s_off) {
                (Some(x), Some(so)) if x == (t ^ so) => {}
                _ => return false,
            }
        }
    }
    true
}

pub(super) fn separable(p: &Sm80Mainloop) -> Separable {
    let [wm, wn] = p.config.warps;
    let warps: Vec<(i64, i64)> = (0..wm * wn).map(|w| p.warp_coord(w)).collect();
    let kbs: Vec<i64> = (0..p.k_blocks).map(|kb| p.k_block * kb).collect();
    let ld_thr = |is_a: bool| -> Vec<(i64, i64)> {
        let lanes = if is_a { p.lanes_a } else { p.lanes_b };
        warps
            .iter()
            .flat_map(|&(w_m, w_n)| {
                (0..32).map(move |l| {
                    let (mn, k) = lanes.lane_coord_vec(l, p.g2s_a.vec);
                    (16 * if is_a { w_m } else { w_n } + mn, k)
                })
            })
            .collect()
    };
    let ld_stat = |step: i64, count: i64| -> Vec<(i64, i64)> {
        (0..count)
            .flat_map(|i| kbs.iter().map(move |&k| (step * i, k)))
            .collect()
    };
    let g_thr =
        |g: &rcute_collective::G2sCopy| -> Vec<(i64, i64)> { (0..p.threads).map(|t| g.thread_origin(t)).collect() };
    let g_stat = |g: &rcute_collective::G2sCopy| -> Vec<(i64, i64)> {
        (0..g.passes)
            .map(|i| (i * g.pass_step[0], i * g.pass_step[1]))
            .collect()
    };
    Separable {
        s2r_a: xor_separable(&p.smem_layout_a, &ld_thr(true), &ld_stat(16 * wm, p.mma_m)),
        s2r_b: xor_separable(&p.smem_layout_b, &ld_thr(false), &ld_stat(16 * wn, p.mma_n / 2)),
        g2s_a: xor_separable(&p.smem_layout_a, &g_thr(&p.g2s_a), &g_stat(&p.g2s_a)),
        g2s_b: xor_separable(&p.smem_layout_b, &g_thr(&p.g2s_b), &g_stat(&p.g2s_b)),
    }
}

/// The smem offsets of a thread's G2S vectors: one base when the swizzle separates
/// (`x_s0`, each pass XORs a constant), else one precomputed offset per pass.
pub(super) fn smem_setup(sep: bool, sfn: &str, x: &str, g: &rcute_collective::G2sCopy) -> Vec<Stmt> {
    if sep {
        vec![dc(
            "const int",
            &format!("{x}_s0"),
            format!("{sfn}({x}_mn, {x}_k)"),
            "pass p at s0 ^ smem(p * step) (checked by the generator)",
        )]
    } else {
        vec![
            Stmt::Array {
                ty: "int".into(),
                name: format!("{x}_smem"),
                len: g.passes as usize,
                comment: None,
            },
            Stmt::unrolled(
                "p",
                g.passes,
                vec![Stmt::assign(
                    format!("{x}_smem[p]"),
                    format!("{sfn}({x}_mn + p * {}, {x}_k + p * {})", g.pass_step[0], g.pass_step[1]),
                )],
            ),
        ]
    }
}
