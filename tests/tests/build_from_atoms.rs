//! The "done when" test: a small GEMM kernel built from an SM80 atom with the
//! structured emitter. One warp computes a 16x8 tile of `D = A * B^T + C` over K = 64 with
//! `mma.sync.m16n8k16.bf16`; every per-thread fragment offset is the atom's TV layout
//! composed with the global layout of its operand, folded into C++ by `index_expr` (with
//! the layout in a comment). Compiled with NVRTC here; launched and checked against a CPU
//! reference on a GPU.

mod common;

use common::{compile_and_gpu, Rng};
use rcute_atom::harness::includes;
use rcute_atom::{mma_sm80, MmaAtom};
use rcute_kernel::emit::{index_expr, Function, Item, Stmt, Unit, PRELUDE};
use rcute_kernel::{Arch, KernelArgs, LaunchConfig};
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, Layout};

const M: i64 = 16;
const N: i64 = 8;
const K: i64 = 64;

/// `(thread, value) -> global offset` of one operand tile: the tile of `global` at the
/// origin, composed with the atom's TV layout (which indexes the tile column-major).
fn fragment_layout(global: &Layout, tile: (i64, i64), tv: &Layout) -> Layout {
    let g_tile = global
        .compose_tiler(&Tiler::shape(&[tile.0, tile.1]))
        .expect("tile of the global layout");
    g_tile.compose(tv).expect("global tile o TV layout")
}

/// Loads of a 16-bit operand fragment into packed `uint32_t` registers.
fn load_fragment(reg: &str, nregs: usize, nvals: i64, ptr: &str, base: &str, frag: &Layout) -> Vec<Stmt> {
    let ix = index_expr(frag, &["lane", "v"]).expect("index expression");
    vec![
        Stmt::Array {
            ty: "uint32_t".into(),
            name: reg.into(),
            len: nregs,
            comment: Some(format!("{nvals} bf16 values")),
        },
        Stmt::unrolled(
            "v",
            nvals,
            vec![
                Stmt::index("off", &ix),
                Stmt::decl("const uint32_t", "bits", format!("(uint32_t){ptr}[{base} + off]")),
                Stmt::If {
                    cond: "v % 2 == 0".into(),
                    then: vec![Stmt::assign(format!("{reg}[v / 2]"), "bits")],
                    otherwise: vec![Stmt::assign(
                        format!("{reg}[v / 2]"),
                        format!("{reg}[v / 2] | (bits << 16)"),
                    )],
                },
            ],
        ),
    ]
}

fn build_gemm(atom: &MmaAtom) -> (String, String) {
    let [am, an, ak] = atom.shape_mnk;
    assert_eq!((am, an), (M, N));
    let g_a = Layout::new(tuple!(M, K), tuple!(K, 1)).unwrap(); // row-major A (M,K)
    let g_b = Layout::new(tuple!(N, K), tuple!(K, 1)).unwrap(); // B as (N,K): column-major K x N
    let g_c = Layout::new(tuple!(M, N), tuple!(N, 1)).unwrap(); // row-major C / D
    let frag_a = fragment_layout(&g_a, (M, ak), &atom.a_tv);
    let frag_b = fragment_layout(&g_b, (N, ak), &atom.b_tv);
    let frag_c = fragment_layout(&g_c, (M, N), &atom.c_tv);
    let va = atom.values_per_thread(rcute_atom::Operand::A);
    let vb = atom.values_per_thread(rcute_atom::Operand::B);
    let vc = atom.values_per_thread(rcute_atom::Operand::C);
    let k_blocks = K / ak;
    let name = format!("gemm_{M}x{N}x{K}_{}", atom.fn_name().trim_start_matches("rc_"));
    let c_ix = index_expr(&frag_c, &["lane", "v"]).unwrap();
    let mut body = vec![
        Stmt::decl("const int", "lane", "threadIdx.x % 32"),
        Stmt::Comment(format!("accumulator fragment: {} o C tile", atom.c_tv)),
        Stmt::Array {
            ty: "float".into(),
            name: "acc".into(),
            len: vc as usize,
            comment: None,
        },
        Stmt::unrolled(
            "v",
            vc,
            vec![Stmt::index("off", &c_ix), Stmt::assign("acc[v]", "C[off]")],
        ),
    ];
    let mut kloop = vec![
        Stmt::decl("const int", "m0", "0"),
        Stmt::decl("const int", "n0", "0"),
        Stmt::decl("const int", "k0", format!("kb * {ak}")),
        Stmt::index("a_base", &index_expr(&g_a, &["m0", "k0"]).unwrap()),
        Stmt::index("b_base", &index_expr(&g_b, &["n0", "k0"]).unwrap()),
    ];
    kloop.push(Stmt::Comment(format!("A fragment: {} o {}", g_a, atom.a_tv)));
    kloop.extend(load_fragment("a", (va / 2) as usize, va, "A", "a_base", &frag_a));
    kloop.push(Stmt::Comment(format!("B fragment: {} o {}", g_b, atom.b_tv)));
    kloop.extend(load_fragment("b", (vb / 2) as usize, vb, "B", "b_base", &frag_b));
    kloop.push(Stmt::Expr(format!("{}(acc, a, b, acc)", atom.fn_name())));
    body.push(Stmt::For {
        var: "kb".into(),
        start: "0".into(),
        end: k_blocks.to_string(),
        unroll: true,
        body: kloop,
    });
    body.push(Stmt::unrolled(
        "v",
        vc,
        vec![Stmt::index("off", &c_ix), Stmt::assign("D[off]", "acc[v]")],
    ));
    let unit = Unit {
        header: vec![format!(
            "{name}: one warp, D({M}x{N}) = A({M}x{K}) * B({K}x{N}) + C with {}",
            atom.name
        )],
        includes: vec![],
        items: vec![
            Item::Snippet {
                origin: "rcute_atom::harness::includes".into(),
                code: includes(&[&atom.snippet]),
            },
            Item::Snippet {
                origin: "rcute prelude".into(),
                code: PRELUDE.into(),
            },
            Item::Snippet {
                origin: atom.name.clone(),
                code: atom.snippet.code.clone(),
            },
            Item::Function(Function {
                qualifiers: "extern \"C\" __global__ __launch_bounds__(32)".into(),
                ret: "void".into(),
                name: name.clone(),
                params: vec![
                    ("const uint16_t* __restrict__".into(), "A".into()),
                    ("const uint16_t* __restrict__".into(), "B".into()),
                    ("const float* __restrict__".into(), "C".into()),
                    ("float* __restrict__".into(), "D".into()),
                ],
                doc: vec![format!("A {g_a}, B {g_b}, C/D {g_c} (element offsets)")],
                body,
            }),
        ],
    };
    (name, unit.render())
}

#[test]
fn gemm_from_sm80_bf16_atom() {
    let atom = mma_sm80::sm80_16x8x16_f32_bf16_bf16_f32();
    let (name, src) = build_gemm(&atom);
    assert!(
        src.contains("// layout "),
        "index expressions carry their layouts:\n{src}"
    );
    eprintln!("{src}");
    let Some((gpu, compiled)) = compile_and_gpu(&src, &format!("{name}.cu"), Arch::Sm80) else {
        return;
    };
    let mut rng = Rng::for_test(&name);
    let gen = |rng: &mut Rng| {
        let m = rng.range(0, 7) as f64;
        let e = rng.range(-2, 2) as i32;
        let s = if rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 };
        s * (1.0 + m / 8.0) * 2f64.powi(e)
    };
    let a: Vec<f64> = (0..M * K).map(|_| gen(&mut rng)).collect();
    let b: Vec<f64> = (0..N * K).map(|_| gen(&mut rng)).collect();
    let c: Vec<f64> = (0..M * N).map(|_| gen(&mut rng)).collect();
    let bf = |v: &f64| half::bf16::from_f64(*v).to_bits();
    let stream = gpu.stream();
    let d_a = stream.clone_htod(&a.iter().map(bf).collect::<Vec<u16>>()).unwrap();
    let d_b = stream.clone_htod(&b.iter().map(bf).collect::<Vec<u16>>()).unwrap();
    let d_c = stream
        .clone_htod(&c.iter().map(|&v| v as f32).collect::<Vec<f32>>())
        .unwrap();
    let d_d = stream.clone_htod(&vec![f32::NAN; (M * N) as usize]).unwrap();
    let f = gpu.load(&compiled).unwrap().function(&name).unwrap();
    let args = KernelArgs::new().slice(&d_a).slice(&d_b).slice(&d_c).slice(&d_d);
    // SAFETY: (const u16*, const u16*, const float*, float*) with M*K, N*K, M*N, M*N elements.
    unsafe { f.launch(&LaunchConfig::new(1, 32).with_checked(true), &args) }.unwrap();
    let d = stream.clone_dtoh(&d_d).unwrap();
    let mut bad = Vec::new();
    for i in 0..M as usize {
        for j in 0..N as usize {
            let mut r = c[i * N as usize + j];
            let mut scale = r.abs();
            for p in 0..K as usize {
                r += a[i * K as usize + p] * b[j * K as usize + p];
                scale += (a[i * K as usize + p] * b[j * K as usize + p]).abs();
            }
            let got = d[i * N as usize + j] as f64;
            if !(got - r).abs().le(&(scale * 2f64.powi(-12))) {
                bad.push(format!("D({i},{j}) = {got}, expected {r}"));
            }
        }
    }
    assert!(bad.is_empty(), "{} wrong elements:\n{}", bad.len(), bad.join("\n"));
}
