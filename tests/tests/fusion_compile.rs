//! Epilogue fusions on NVRTC and the GPU: every emitted fusion (the linear combination,
//! every `scaled_mm` variant, a deep tree, every element type, every compute op), wrapped
//! in a small `extern "C"` kernel that calls its visit function once per element of an
//! `(M, N, L)` grid, compiles without diagnostics for `sm_80` and `sm_90a` — all in one
//! translation unit, so several fusions coexist. On a GPU the kernels run over random
//! shapes and inputs (random strides, leading dimensions and batch strides; C null when
//! `beta = 0`) and every output and every aux store is compared with `Fusion::eval`: within
//! `1e-5 * (1 + |ref|)`, plus one step of the type where the value was rounded to one (a
//! root conversion, an aux store).
//!
//! Skips without NVRTC / a GPU with a printed reason (`CI` / `RCUTE_REQUIRE_GPU=1` make
//! that a failure). `RCUTE_SEED` fixes the random seed, which is printed.

mod common;

use std::collections::BTreeMap;

use cudarc::driver::{CudaSlice, DevicePtr};
use rcute_atom::Element;
use rcute_collective::{
    decode_element, encode_element, ComputeOp, Fusion, FusionArgs, HostInputs, Node, ParamKind, ScaleKind,
};
use rcute_kernel::nvrtc::{parse_diagnostics, Severity};
use rcute_kernel::testing::toolkit_for_test;
use rcute_kernel::{compile, Arch, CompileOptions, KernelArgs, LaunchConfig};

const ELEMS: [Element; 8] = [
    Element::F32,
    Element::BF16,
    Element::F16,
    Element::E4M3,
    Element::E5M2,
    Element::S8,
    Element::U8,
    Element::S32,
];

/// A tree with every compute op, broadcasts of several types (batched and not), a scalar
/// pointer, an infinite clamp bound and an f16 aux store at the root.
fn every_op() -> Node {
    let x = Node::acc() * Node::col_broadcast("s", Element::F16, true);
    let a = x.clone().gelu() + x.clone().gelu_tanh() - x.clone().silu();
    let b = Node::fma(x.clone().sigmoid(), Node::scalar("alpha"), -x.clone().relu());
    let prod = Node::compute(
        ComputeOp::Multiply,
        vec![a, b, Node::row_broadcast("r", Element::E5M2, true)],
    );
    let sum = Node::compute(
        ComputeOp::Add,
        vec![
            prod.clamp(f32::NEG_INFINITY, 4.0),
            Node::scalar_ptr("z", Element::S8),
            Node::row_broadcast("q", Element::U8, false),
        ],
    );
    sum.store("o", Element::F16)
}

/// Every element type: an aux load, a conversion to the same type (exact) and an aux store.
fn every_element() -> Node {
    Node::compute(
        ComputeOp::Add,
        ELEMS
            .iter()
            .enumerate()
            .map(|(i, &e)| Node::aux_load(format!("x{i}"), e).convert(e).store(format!("y{i}"), e))
            .collect(),
    )
}

/// The deep tree of the collective crate's snapshot test.
fn deep_tree() -> Node {
    let scaled = Node::fma(
        Node::col_broadcast("a_scale", Element::F32, true),
        Node::row_broadcast("b_scale", Element::F32, false) * Node::acc(),
        Node::row_broadcast("bias", Element::BF16, false),
    );
    let pre = (scaled + Node::aux_load("residual", Element::BF16) + Node::scalar("beta") * Node::source())
        .store("pre_act", Element::BF16);
    (pre.gelu().clamp(-448.0, 448.0) * Node::scalar_ptr("out_scale", Element::F32)).convert(Element::E4M3)
}

/// Every fusion under test, with a unique kernel-name tag.
fn fusions() -> Vec<(String, Fusion)> {
    let mut v = vec![
        ("lincomb".to_string(), Fusion::linear_combination()),
        ("deep".into(), Fusion::new(deep_tree()).unwrap()),
        ("every_op".into(), Fusion::new(every_op()).unwrap()),
        ("every_elem".into(), Fusion::new(every_element()).unwrap()),
        (
            "no_params".into(),
            Fusion::new(Node::acc().silu().convert(Element::BF16)).unwrap(),
        ),
        ("source_only".into(), Fusion::new(Node::source() - Node::acc()).unwrap()),
    ];
    for a in [ScaleKind::Scalar, ScaleKind::PerRow] {
        for b in [ScaleKind::Scalar, ScaleKind::PerCol] {
            for bias in [None, Some(Element::BF16), Some(Element::F16), Some(Element::F32)] {
                let f = Fusion::scaled_mm(a, b, bias).unwrap();
                v.push((f.name(), f));
            }
        }
    }
    v
}

/// The fusion's struct and visit function, and a kernel `fusion_<tag>` that evaluates it
/// over a dense `(L, M, N)` grid: `out[i] = visit(p, acc[i], needed ? c[i] : 0, m, n, l)`.
fn wrap(tag: &str, f: &Fusion) -> String {
    let code = f.emit(&format!("f_{tag}")).unwrap();
    format!(
        r#"{struct_}
{func}
extern "C" __global__ void fusion_{tag}({sname} p, const float* acc, const float* c, float* out, int M, int N, int L) {{
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)M * N * L) return;
  const int n = (int)(i % N);
  const int m = (int)((i / N) % M);
  const int l = (int)(i / ((long long)M * N));
  const float cv = ({needed}) ? c[i] : 0.0f;
  out[i] = {fname}(p, acc[i], cv, m, n, l);
}}
"#,
        struct_ = code.params_struct,
        func = code.device_fn,
        sname = code.struct_name,
        needed = code.source_needed,
        fname = code.fn_name,
    )
}

/// One translation unit with every fusion.
fn unit() -> String {
    let mut s = String::from("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cuda_fp8.h>\n\n");
    for (tag, f) in fusions() {
        s.push_str(&wrap(&tag, &f));
        s.push('\n');
    }
    s
}

#[test]
fn every_fusion_compiles_cleanly_for_sm80_and_sm90a() {
    if toolkit_for_test().is_none() {
        return;
    }
    let src = unit();
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let c = compile(&src, "fusions.cu", &CompileOptions::new(arch)).unwrap_or_else(|e| {
            let numbered: String = src
                .lines()
                .enumerate()
                .map(|(i, l)| format!("{:4} {l}\n", i + 1))
                .collect();
            panic!("fusions do not compile for {arch}: {e}\n{numbered}")
        });
        assert!(!c.cubin.is_empty());
        let diags = parse_diagnostics(&c.log);
        let errors: Vec<_> = diags.iter().filter(|d| d.severity == Severity::Error).collect();
        assert!(errors.is_empty(), "{arch}: {errors:?}");
        let warnings: Vec<_> = diags.iter().filter(|d| d.severity == Severity::Warning).collect();
        assert!(warnings.is_empty(), "{arch}: warnings {warnings:?}\n{}", c.log);
        for r in &c.resources.kernels {
            assert_eq!(
                r.spill_stores_bytes + r.spill_loads_bytes,
                0,
                "{arch}: {} spills",
                r.name
            );
        }
    }
}

/// Uniform in `[-1, 1)`.
fn unit_f(rng: &mut common::Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// A random value representable in `e`, as the device would see it.
fn random_value(rng: &mut common::Rng, e: Element) -> (f64, Vec<u8>) {
    let x = match e {
        Element::S8 => rng.range(-8, 8) as f32,
        Element::U8 => rng.range(0, 16) as f32,
        Element::S32 => rng.range(-100, 100) as f32,
        _ => (2.0 * unit_f(rng)) as f32,
    };
    let bytes = encode_element(e, x).unwrap();
    (decode_element(e, &bytes).unwrap(), bytes)
}

/// The distance between adjacent values of `e` around `v`.
fn step(e: Element, v: f64) -> f64 {
    let (mbits, emin) = match e {
        Element::BF16 => (7, -126),
        Element::F16 => (10, -14),
        Element::E4M3 => (3, -6),
        Element::E5M2 => (2, -14),
        Element::F32 => (23, -126),
        _ => return 1.0,
    };
    let exp = if v == 0.0 {
        emin
    } else {
        (v.abs().log2().floor() as i32).max(emin)
    };
    2f64.powi(exp - mbits)
}

/// The leaves of a tree by name.
fn leaves<'a>(node: &'a Node, out: &mut BTreeMap<String, &'a Node>) {
    match node {
        Node::ScalarPtr { name, .. }
        | Node::RowBroadcast { name, .. }
        | Node::ColBroadcast { name, .. }
        | Node::AuxLoad { name, .. }
        | Node::AuxStore { name, .. } => {
            out.insert(name.clone(), node);
        }
        _ => {}
    }
    for c in node.children() {
        leaves(c, out);
    }
}

struct Buffer {
    elem: Element,
    dev: CudaSlice<u8>,
    store: bool,
    /// `(ld, batch_stride)` of an aux matrix.
    matrix: Option<(i64, i64)>,
}

/// Runs `fusion_<tag>` once on a random shape; returns the number of values compared.
fn run_case(
    gpu: &rcute_kernel::Gpu,
    module: &rcute_kernel::Module,
    tag: &str,
    f: &Fusion,
    beta_zero: bool,
    rng: &mut common::Rng,
) -> usize {
    let stream = gpu.stream();
    let (m, n, l) = (rng.range(1, 130), rng.range(1, 200), rng.range(1, 3));
    let total = (m * n * l) as usize;
    let acc: Vec<f32> = (0..total).map(|_| (4.0 * unit_f(rng)) as f32).collect();
    let c: Vec<f32> = (0..total).map(|_| unit_f(rng) as f32).collect();
    let mut host = HostInputs::new(m, n, l)
        .with_acc(acc.iter().map(|&x| x as f64).collect())
        .with_c(c.iter().map(|&x| x as f64).collect());
    let mut args = FusionArgs::new();
    let mut bufs: BTreeMap<String, Buffer> = BTreeMap::new();
    let mut named = BTreeMap::new();
    leaves(f.root(), &mut named);
    for (name, node) in &named {
        let (elem, len, store, matrix) = match node {
            Node::ScalarPtr { elem, .. } => (*elem, 1, false, None),
            Node::RowBroadcast { elem, batch_stride, .. } | Node::ColBroadcast { elem, batch_stride, .. } => {
                let ext = if matches!(node, Node::RowBroadcast { .. }) {
                    n
                } else {
                    m
                };
                if *batch_stride {
                    let bs = ext + rng.range(0, 3);
                    args = args.i64(format!("{name}_batch_stride"), bs);
                    (*elem, bs * (l - 1) + ext, false, None)
                } else {
                    (*elem, ext, false, None)
                }
            }
            Node::AuxLoad { elem, .. } | Node::AuxStore { elem, .. } => {
                let ld = n + rng.range(0, 5);
                let bs = m * ld + rng.range(0, 7);
                args = args
                    .i64(format!("{name}_ld"), ld)
                    .i64(format!("{name}_batch_stride"), bs);
                (
                    *elem,
                    bs * (l - 1) + (m - 1) * ld + n,
                    matches!(node, Node::AuxStore { .. }),
                    Some((ld, bs)),
                )
            }
            _ => unreachable!(),
        };
        let mut values = Vec::with_capacity(len as usize);
        let mut bytes = Vec::with_capacity(len as usize * elem.bytes() as usize);
        for _ in 0..len {
            let (v, b) = if store {
                (0.0, vec![0xA5; elem.bytes() as usize])
            } else {
                random_value(rng, elem)
            };
            values.push(v);
            bytes.extend(b);
        }
        if !store {
            host = host.with_tensor(name.clone(), values);
        }
        let dev = stream.clone_htod(&bytes).expect("htod");
        bufs.insert(
            name.clone(),
            Buffer {
                elem,
                dev,
                store,
                matrix,
            },
        );
    }
    for p in f.params() {
        match p.kind {
            ParamKind::F32 => {
                let v = if beta_zero && p.name == "beta" {
                    0.0
                } else {
                    (2.0 * unit_f(rng)) as f32
                };
                args = args.f32(p.name.clone(), v);
            }
            ParamKind::Ptr { .. } => {
                let (ptr, _rec) = bufs[&p.name].dev.device_ptr(stream);
                args = args.ptr(p.name.clone(), ptr);
            }
            ParamKind::I64 => assert!(args.get(&p.name).is_some(), "{}", p.name),
        }
    }
    let packed = args.pack(f).unwrap_or_else(|e| panic!("{tag}: {e}"));
    let needs_c = f.needs_source(&args).unwrap();
    let d_acc = stream.clone_htod(&acc).expect("htod");
    let d_c = stream.clone_htod(&c).expect("htod");
    let d_out = stream.clone_htod(&vec![f32::NAN; total]).expect("htod");
    {
        let (pa, _ra) = d_acc.device_ptr(stream);
        let (pc, _rc) = d_c.device_ptr(stream);
        let (po, _ro) = d_out.device_ptr(stream);
        let kargs = KernelArgs::new()
            .blob(&packed)
            .device_ptr(pa)
            .device_ptr(if needs_c { pc } else { 0 })
            .device_ptr(po)
            .i32(m as i32)
            .i32(n as i32)
            .i32(l as i32);
        let func = module.function(&format!("fusion_{tag}")).expect("function");
        let cfg = LaunchConfig::for_elements(total as u32, 128).with_checked(true);
        // SAFETY: the parameter struct holds pointers to buffers covering every index the
        // visit function reads or writes for this shape and these strides; acc, c and out
        // hold M * N * L floats (c is null only when the kernel does not read it).
        unsafe { func.launch(&cfg, &kargs) }.unwrap_or_else(|e| panic!("{tag}: {e}"));
    }
    gpu.synchronize().expect("sync");
    let out = stream.clone_dtoh(&d_out).expect("dtoh");
    let stored: BTreeMap<&String, Vec<u8>> = bufs
        .iter()
        .filter(|(_, b)| b.store)
        .map(|(k, b)| (k, stream.clone_dtoh(&b.dev).expect("dtoh")))
        .collect();
    let root_convert = match f.root() {
        Node::Compute {
            op: ComputeOp::Convert(e),
            ..
        } => Some(*e),
        _ => None,
    };
    let mut compared = 0;
    for ll in 0..l {
        for mm in 0..m {
            for nn in 0..n {
                let i = ((ll * m + mm) * n + nn) as usize;
                let (want, stores) = f.eval_with_stores(&args, &host, mm, nn, ll).unwrap();
                let got = out[i] as f64;
                let mut tol = 1e-5 * (1.0 + want.abs());
                if let Some(e) = root_convert {
                    tol += step(e, want);
                }
                assert!(
                    (got - want).abs() <= tol,
                    "{tag} ({m}x{n}x{l}) at ({mm},{nn},{ll}): gpu {got} vs ref {want}"
                );
                compared += 1;
                for (name, v) in stores {
                    let b = &bufs[&name];
                    let (ld, bs) = b.matrix.expect("aux store");
                    let idx = (ll * bs + mm * ld + nn) as usize * b.elem.bytes() as usize;
                    let got = decode_element(b.elem, &stored[&name][idx..]).unwrap();
                    let tol = step(b.elem, v) + 1e-5 * (1.0 + v.abs());
                    assert!(
                        (got - v).abs() <= tol,
                        "{tag} store {name} ({m}x{n}x{l}) at ({mm},{nn},{ll}): gpu {got} vs ref {v}"
                    );
                    compared += 1;
                }
            }
        }
    }
    compared
}

#[test]
fn gpu_fusions_match_the_cpu_reference() {
    let Some((gpu, compiled)) = common::compile_and_gpu(&unit(), "fusions.cu", Arch::Sm80) else {
        return;
    };
    let module = gpu.load(&compiled).expect("load");
    let mut rng = common::Rng::for_test("gpu_fusions_match_the_cpu_reference");
    for (tag, f) in fusions() {
        let mut compared = 0;
        for round in 0..3 {
            compared += run_case(&gpu, &module, &tag, &f, round == 1, &mut rng);
        }
        eprintln!("{tag}: {} — {compared} values match", f.describe());
    }
}
