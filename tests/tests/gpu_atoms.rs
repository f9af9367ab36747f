//! GPU verification of the atoms: one small kernel per atom, launched on random data and
//! checked against a CPU model built from the atom's own layouts (TV layouts, GMMA smem
//! layout atoms, swizzles, copy src/dst layouts) rather than hand-written index formulas.
//!
//! Every test first compiles its kernel with NVRTC for the atom's minimum architecture
//! (so a CPU-only machine still checks that everything compiles), then skips with a
//! message when there is no GPU (`RCUTE_REQUIRE_GPU=1` makes that a failure). Outputs
//! are poisoned before each launch; inputs are random and non-zero (`RCUTE_SEED` fixes
//! the seed, which every test prints).

mod common;

use common::{compile_and_gpu, pack, run_harness, tv_at, unpack, Rng};
use cudarc::driver::DevicePtr;
use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::copy_ldsm::{ldmatrix, stmatrix};
use rcute_atom::harness::{includes, test_kernel_with, HarnessOptions};
use rcute_atom::mma_sm90::{wgmma, wgmma_commit_group, wgmma_fence, wgmma_wait_group};
use rcute_atom::tma::{TmaDescriptorSpec, TmaSwizzle};
use rcute_atom::{
    copy_tma, make_gmma_desc, mma_sm80, sync, CopyOp, Element, GmmaSmemAtom, GmmaSource, GmmaSwizzle, Major, MmaAtom,
    Operand, Snippet,
};
use rcute_kernel::{Arch, KernelArgs, LaunchConfig};
use rcute_layout::algebra::Tiler;
use rcute_layout::{tuple, Env, Layout};

// ---------------------------------------------------------------------------------------
// Random operand values: (encoding, exact value).

/// A random non-zero value of `e` with few mantissa bits (so products and short sums are
/// exact in f32), as (bit pattern, value).
fn random_elem(rng: &mut Rng, e: Element) -> (u32, f64) {
    let sign = if rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 };
    match e {
        Element::F16 | Element::BF16 | Element::TF32 | Element::F32 => {
            let m = rng.range(0, 7) as f64;
            let x = rng.range(-2, 2) as i32;
            let v = sign * (1.0 + m / 8.0) * 2f64.powi(x);
            let bits = match e {
                Element::F16 => half::f16::from_f64(v).to_bits() as u32,
                Element::BF16 => half::bf16::from_f64(v).to_bits() as u32,
                _ => (v as f32).to_bits(),
            };
            (bits, v)
        }
        Element::E4M3 => {
            let m = rng.range(0, 7);
            let x = rng.range(-3, 3);
            let s = if sign < 0.0 { 1u32 } else { 0 };
            (
                (s << 7) | (((x + 7) as u32) << 3) | m as u32,
                sign * (1.0 + m as f64 / 8.0) * 2f64.powi(x as i32),
            )
        }
        Element::E5M2 => {
            let m = rng.range(0, 3);
            let x = rng.range(-3, 3);
            let s = if sign < 0.0 { 1u32 } else { 0 };
            (
                (s << 7) | (((x + 15) as u32) << 2) | m as u32,
                sign * (1.0 + m as f64 / 4.0) * 2f64.powi(x as i32),
            )
        }
        Element::S8 => loop {
            let v = rng.range(-128, 127);
            if v != 0 {
                break ((v as i8 as u8) as u32, v as f64);
            }
        },
        Element::U8 => {
            let v = rng.range(1, 255);
            (v as u32, v as f64)
        }
        Element::S32 => loop {
            let v = rng.range(-(1 << 20), 1 << 20);
            if v != 0 {
                break (v as i32 as u32, v as f64);
            }
        },
        _ => panic!("no generator for {e}"),
    }
}

fn decode_acc(e: Element, bits: u32) -> f64 {
    match e {
        Element::F32 => f32::from_bits(bits) as f64,
        Element::F16 => half::f16::from_bits(bits as u16).to_f64(),
        Element::S32 => bits as i32 as f64,
        _ => panic!("no accumulator decoder for {e}"),
    }
}

/// A random `(rows, cols)` matrix of `e`: (bits, values), row-major.
fn random_matrix(rng: &mut Rng, e: Element, rows: usize, cols: usize) -> (Vec<u32>, Vec<f64>) {
    (0..rows * cols).map(|_| random_elem(rng, e)).unzip()
}

/// Check an accumulator against the f64 reference: exact for integers, otherwise within
/// the accumulator's precision relative to the magnitude of the terms.
fn check_acc(what: &str, e: Element, got_bits: u32, reference: f64, scale: f64) -> Result<(), String> {
    let got = decode_acc(e, got_bits);
    let tol = match e {
        Element::S32 => 0.0,
        Element::F16 => scale * 2f64.powi(-9),
        _ => scale * 2f64.powi(-12),
    };
    if e == Element::S32 {
        if got_bits as i32 != (reference as i64) as i32 {
            return Err(format!(
                "{what}: got {} expected {}",
                got_bits as i32, reference as i64 as i32
            ));
        }
    } else if !(got - reference).abs().le(&tol) {
        return Err(format!("{what}: got {got} expected {reference} (tolerance {tol})"));
    }
    Ok(())
}

fn report(name: &str, errors: &[String]) {
    if !errors.is_empty() {
        panic!(
            "{name}: {} mismatches, first ones:\n  {}",
            errors.len(),
            errors.iter().take(12).cloned().collect::<Vec<_>>().join("\n  ")
        );
    }
}

// ---------------------------------------------------------------------------------------
// 1. mma.sync

/// The per-thread register fragment of `op`: element `v` of thread `t` is
/// `mat[coord(op, t, v)]` (row-major `mat` of `cols` columns), packed.
fn fragment(atom: &MmaAtom, op: Operand, t: i64, bits: &[u32], cols: usize) -> Vec<u32> {
    let e = atom.element(op);
    let vals: Vec<u32> = (0..atom.values_per_thread(op))
        .map(|v| {
            let (r, c) = atom.coord(op, t, v).expect("static coordinate");
            bits[r as usize * cols + c as usize]
        })
        .collect();
    pack(&vals, e.bits())
}

fn run_mma_sync(atom: &MmaAtom) {
    let k = rcute_atom::test_kernel(&atom.snippet);
    let Some((gpu, compiled)) = compile_and_gpu(&k.source, &format!("{}.cu", k.name), atom.arch) else {
        return;
    };
    let mut rng = Rng::for_test(&atom.name);
    let [m, n, kk] = atom.shape_mnk.map(|x| x as usize);
    let (ta, tb, tc, td) = (atom.types.a, atom.types.b, atom.types.c, atom.types.d);
    let (a_bits, a) = random_matrix(&mut rng, ta, m, kk);
    let (b_bits, b) = random_matrix(&mut rng, tb, n, kk);
    let (c_bits, c) = random_matrix(&mut rng, tc, m, n);
    // Harness input order: a, b, c (d is output only).
    let mut input = Vec::new();
    for t in 0..32 {
        let mut w = fragment(atom, Operand::A, t, &a_bits, kk);
        w.extend(fragment(atom, Operand::B, t, &b_bits, kk));
        w.extend(fragment(atom, Operand::C, t, &c_bits, n));
        assert_eq!(w.len(), k.in_words_per_thread, "{}", atom.name);
        input.extend(w);
    }
    let run = run_harness(&gpu, &compiled, &k, &input, &vec![0u8; k.gmem_bytes]);
    let mut errors = Vec::new();
    let per = k.out_words_per_thread;
    for t in 0..32i64 {
        let words = &run.out[t as usize * per..(t as usize + 1) * per];
        for v in 0..atom.values_per_thread(Operand::C) {
            let (i, j) = atom.coord(Operand::C, t, v).unwrap();
            let (i, j) = (i as usize, j as usize);
            let mut reference = c[i * n + j];
            let mut scale = c[i * n + j].abs();
            for p in 0..kk {
                reference += a[i * kk + p] * b[j * kk + p];
                scale += (a[i * kk + p] * b[j * kk + p]).abs();
            }
            let got = unpack(words, td.bits(), v as usize);
            if let Err(e) = check_acc(&format!("t{t} v{v} D({i},{j})"), td, got, reference, scale) {
                errors.push(e);
            }
        }
    }
    report(&atom.name, &errors);
    eprintln!("ok {}", atom.name);
}

#[test]
fn mma_sync_atoms_match_cpu_model() {
    let atoms = mma_sm80::all_sm80_atoms();
    assert_eq!(atoms.len(), 15);
    for atom in &atoms {
        run_mma_sync(atom);
    }
}

// ---------------------------------------------------------------------------------------
// 2. wgmma

fn smem_addr_stmt(var: &str, ptr: &str) -> String {
    format!("uint32_t {var}; asm(\"{{ .reg .u64 rc_t; cvta.to.shared.u64 rc_t, %1; cvt.u32.u64 %0, rc_t; }}\" : \"=r\"({var}) : \"l\"((void*)({ptr})));")
}

/// A K-major operand tile `(mn, k_tile)` in shared memory, built from the GMMA layout atom:
/// the byte image and, per k-block, the descriptor expression.
struct SmemOperand {
    image: Vec<u8>,
    /// The tile layout (before the swizzle).
    tile: Layout,
    atom: GmmaSmemAtom,
}

fn smem_operand(elem: Element, mode: GmmaSwizzle, mn: i64, k_tile: i64, bits: &[u32]) -> SmemOperand {
    let atom = GmmaSmemAtom::new(Major::K, mode, elem);
    let tile = atom
        .layout
        .tile_to_shape(&tuple!(mn, k_tile), None)
        .expect("tile_to_shape");
    let eb = elem.bytes() as usize;
    let mut image = vec![0u8; (mn * k_tile) as usize * eb];
    let mut seen = vec![false; (mn * k_tile) as usize];
    for r in 0..mn {
        for c in 0..k_tile {
            let off = atom
                .swizzle
                .apply(tile.crd2idx(&tuple!(r, c)).unwrap().as_static().unwrap()) as usize;
            assert!(!seen[off], "tile layout is not injective at ({r},{c})");
            seen[off] = true;
            let v = bits[(r * k_tile + c) as usize];
            image[off * eb..(off + 1) * eb].copy_from_slice(&v.to_le_bytes()[..eb]);
        }
    }
    SmemOperand { image, tile, atom }
}

impl SmemOperand {
    /// The descriptor of k-block `kb` (K extent `k`) at the shared address in `addr`.
    fn desc_expr(&self, addr: &str, kb: i64, k: i64) -> String {
        let mn = self.tile.mode(0).unwrap().size().as_static().unwrap();
        let kblock = self.tile.compose_tiler(&Tiler::shape(&[mn, k])).expect("k-block");
        let desc = make_gmma_desc(Major::K, self.atom.mode, &kblock, self.atom.elem)
            .unwrap_or_else(|e| panic!("make_gmma_desc({kblock}): {e}"));
        let kk0 = kb * k;
        let start = self.tile.crd2idx(&tuple!(0, kk0)).unwrap().as_static().unwrap() * self.atom.elem.bytes() as i64;
        desc.device_expr(&format!("{addr} + {start}u")).unwrap()
    }
}

fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

fn run_wgmma(atom: &MmaAtom, mode: GmmaSwizzle) {
    let [m, n, k] = atom.shape_mnk;
    let rs = matches!(
        atom.kind,
        rcute_atom::MmaKind::Wgmma {
            source: GmmaSource::RS,
            ..
        }
    );
    let (ta, tb, tc) = (atom.types.a, atom.types.b, atom.types.c);
    let kblocks = 4i64;
    let k_tile = k * kblocks;
    let name = format!("{}_{:?}", atom.fn_name(), mode).to_lowercase();
    let mut rng = Rng::for_test(&name);
    let (a_bits, a) = random_matrix(&mut rng, ta, m as usize, k_tile as usize);
    let (b_bits, b) = random_matrix(&mut rng, tb, n as usize, k_tile as usize);
    let (c_bits, c) = random_matrix(&mut rng, tc, m as usize, n as usize);
    let sa = smem_operand(ta, mode, m, k_tile, &a_bits);
    let sb = smem_operand(tb, mode, n, k_tile, &b_bits);
    let nc = atom.values_per_thread(Operand::C) as usize; // 32-bit accumulators
    let na = if rs {
        (atom.values_per_thread(Operand::A) as usize * ta.bits() as usize) / 32
    } else {
        0
    };
    let (dty, _) = match tc {
        Element::S32 => ("int32_t", ()),
        _ => ("float", ()),
    };
    let snippets: Vec<Snippet> = vec![
        atom.snippet.clone(),
        wgmma_fence(),
        wgmma_commit_group(),
        wgmma_wait_group(),
    ];
    let mut src = includes(&snippets.iter().collect::<Vec<_>>());
    for s in &snippets {
        src.push_str(&s.code);
        src.push('\n');
    }
    let a_words = sa.image.len() / 4;
    let b_words = sb.image.len() / 4;
    src.push_str(&format!(
        "extern \"C\" __global__ void __launch_bounds__(128) {name}(const uint32_t* __restrict__ a_img, const uint32_t* __restrict__ b_img, const uint32_t* __restrict__ a_frag, const uint32_t* __restrict__ c_in, uint32_t* __restrict__ d_out) {{\n"
    ));
    src.push_str(&format!(
        "  __shared__ __align__(1024) uint32_t sA[{a_words}];\n  __shared__ __align__(1024) uint32_t sB[{b_words}];\n"
    ));
    src.push_str("  const uint32_t tid = threadIdx.x;\n");
    if !rs {
        src.push_str(&format!(
            "  for (uint32_t i = tid; i < {a_words}u; i += 128u) sA[i] = a_img[i];\n"
        ));
    }
    src.push_str(&format!(
        "  for (uint32_t i = tid; i < {b_words}u; i += 128u) sB[i] = b_img[i];\n"
    ));
    // Generic-proxy smem writes must be visible to wgmma's async proxy.
    src.push_str("  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n  __syncthreads();\n");
    src.push_str(&format!("  {dty} d[{nc}];\n  for (int w = 0; w < {nc}; ++w) reinterpret_cast<uint32_t*>(d)[w] = c_in[tid * {nc} + w];\n"));
    src.push_str(&format!(
        "  {}\n  {}\n",
        smem_addr_stmt("a_addr", "sA"),
        smem_addr_stmt("b_addr", "sB")
    ));
    for kb in 0..kblocks {
        src.push_str("  {\n");
        let desc_b = sb.desc_expr("b_addr", kb, k);
        let a_arg = if rs {
            src.push_str(&format!("    uint32_t a[{na}];\n    for (int w = 0; w < {na}; ++w) a[w] = a_frag[(tid * {kblocks} + {kb}) * {na} + w];\n"));
            "a".to_string()
        } else {
            sa.desc_expr("a_addr", kb, k)
        };
        src.push_str(&format!(
            "    rc_wgmma_fence();\n    {}({a_arg}, {desc_b}, d, 1);\n    rc_wgmma_commit_group();\n    rc_wgmma_wait_group<0>();\n  }}\n",
            atom.fn_name()
        ));
    }
    src.push_str(&format!(
        "  for (int w = 0; w < {nc}; ++w) d_out[tid * {nc} + w] = reinterpret_cast<uint32_t const*>(d)[w];\n}}\n"
    ));

    let Some((gpu, compiled)) = compile_and_gpu(&src, &format!("{name}.cu"), Arch::Sm90a) else {
        return;
    };
    // Register fragments: C for every thread; A per k-block for RS.
    let mut c_in = Vec::new();
    let mut a_frag = Vec::new();
    for t in 0..128i64 {
        let vals: Vec<u32> = (0..nc as i64)
            .map(|v| {
                let (i, j) = atom.coord(Operand::C, t, v).unwrap();
                c_bits[(i * n + j) as usize]
            })
            .collect();
        c_in.extend(pack(&vals, 32));
        if rs {
            for kb in 0..kblocks {
                let vals: Vec<u32> = (0..atom.values_per_thread(Operand::A))
                    .map(|v| {
                        let (i, kk) = atom.coord(Operand::A, t, v).unwrap();
                        a_bits[(i * k_tile + kb * k + kk) as usize]
                    })
                    .collect();
                let w = pack(&vals, ta.bits());
                assert_eq!(w.len(), na);
                a_frag.extend(w);
            }
        }
    }
    if a_frag.is_empty() {
        a_frag.push(0);
    }
    let module = gpu.load(&compiled).unwrap();
    let f = module.function(&name).unwrap();
    let stream = gpu.stream();
    let d_a = stream.clone_htod(&words_of(&sa.image)).unwrap();
    let d_b = stream.clone_htod(&words_of(&sb.image)).unwrap();
    let d_af = stream.clone_htod(&a_frag).unwrap();
    let d_c = stream.clone_htod(&c_in).unwrap();
    let d_out = stream.clone_htod(&vec![0xDEAD_BEEFu32; 128 * nc]).unwrap();
    let args = KernelArgs::new()
        .slice(&d_a)
        .slice(&d_b)
        .slice(&d_af)
        .slice(&d_c)
        .slice(&d_out);
    // SAFETY: five u32 pointers to buffers of the sizes the kernel indexes.
    unsafe { f.launch(&LaunchConfig::new(1, 128).with_checked(true), &args) }.unwrap_or_else(|e| panic!("{name}: {e}"));
    let out = stream.clone_dtoh(&d_out).unwrap();
    let mut errors = Vec::new();
    for t in 0..128i64 {
        for v in 0..nc as i64 {
            let (i, j) = atom.coord(Operand::C, t, v).unwrap();
            let (i, j) = (i as usize, j as usize);
            let kt = k_tile as usize;
            let mut reference = c[i * n as usize + j];
            let mut scale = reference.abs();
            for p in 0..kt {
                reference += a[i * kt + p] * b[j * kt + p];
                scale += (a[i * kt + p] * b[j * kt + p]).abs();
            }
            if let Err(e) = check_acc(
                &format!("t{t} v{v} D({i},{j})"),
                tc,
                out[t as usize * nc + v as usize],
                reference,
                scale,
            ) {
                errors.push(e);
            }
        }
    }
    report(&format!("{} {:?}", atom.name, mode), &errors);
    eprintln!("ok {} {:?}", atom.name, mode);
}

#[test]
fn wgmma_ss_bf16_f16_match_cpu_model() {
    for (d, ab) in [(Element::F32, Element::BF16), (Element::F32, Element::F16)] {
        for n in [64, 128] {
            let atom = wgmma(d, ab, ab, n, GmmaSource::SS, Major::K, Major::K).unwrap();
            for mode in [GmmaSwizzle::Interleave, GmmaSwizzle::B128] {
                run_wgmma(&atom, mode);
            }
        }
    }
}

#[test]
fn wgmma_rs_f16_matches_cpu_model() {
    let atom = wgmma(
        Element::F32,
        Element::F16,
        Element::F16,
        64,
        GmmaSource::RS,
        Major::K,
        Major::K,
    )
    .unwrap();
    run_wgmma(&atom, GmmaSwizzle::B128);
}

#[test]
fn wgmma_ss_s8_matches_cpu_model() {
    let atom = wgmma(
        Element::S32,
        Element::S8,
        Element::S8,
        64,
        GmmaSource::SS,
        Major::K,
        Major::K,
    )
    .unwrap();
    for mode in [GmmaSwizzle::Interleave, GmmaSwizzle::B128] {
        run_wgmma(&atom, mode);
    }
}

// ---------------------------------------------------------------------------------------
// 3. ldmatrix / stmatrix

/// The 16-bit elements a warp-wide copy moves: the logical tile built from the source
/// side (`val_src`, first writer wins for replicated threads) read back through the
/// destination side (`val_dst`).
fn ldsm_case(op: &CopyOp) {
    let k = rcute_atom::test_kernel(&op.snippet);
    let Some((gpu, compiled)) = compile_and_gpu(&k.source, &format!("{}.cu", k.name), op.arch) else {
        return;
    };
    let atom = op.atom(Element::U16).expect("16-bit copy atom");
    let mut rng = Rng::for_test(&op.name);
    let is_load = op.kind == rcute_atom::CopyKind::Ldmatrix;
    // Values per thread: a shared row is 8 u16 (16 bytes); the register side has 2 per
    // 32-bit register. The source and destination sides differ in count (the shared side
    // of x1 / x2 replicates its rows over the upper threads).
    let (nv_src, nv_dst) = (atom.num_val_src(), atom.num_val_dst());
    let nv_reg = if is_load { nv_dst } else { nv_src };
    assert_eq!(
        if is_load { nv_src } else { nv_dst },
        8,
        "{}: one 16-byte row per thread",
        op.name
    );
    let x = (nv_reg / 2) as usize; // 32-bit registers per thread
                                   // The harness passes thread t the shared row at t * 16 bytes.
    let smem_rows = 32usize;
    let smem: Vec<u16> = (0..smem_rows * 8).map(|_| rng.nonzero_u16()).collect();
    let regs: Vec<u16> = (0..32 * nv_reg as usize).map(|_| rng.nonzero_u16()).collect();
    let mut gmem = vec![0u8; k.gmem_bytes];
    for (i, v) in smem.iter().enumerate() {
        gmem[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
    }
    let mut input = Vec::new();
    if !is_load {
        for t in 0..32 {
            input.extend(pack(
                &regs[t * nv_reg as usize..(t + 1) * nv_reg as usize]
                    .iter()
                    .map(|&v| v as u32)
                    .collect::<Vec<_>>(),
                16,
            ));
        }
    } else {
        input = vec![0u32; 32 * k.in_words_per_thread.max(1)];
    }
    // Source-side value of (t, v): shared row t element v, or register value v of thread t.
    let src_val = |t: i64, v: i64| -> u16 {
        if is_load {
            smem[t as usize * 8 + v as usize]
        } else {
            regs[t as usize * nv_reg as usize + v as usize]
        }
    };
    let tile_size = 32 * nv_reg as usize; // elements of the logical tile (x matrices of 64)
    let mut logical: Vec<Option<u16>> = vec![None; tile_size];
    for t in 0..32 {
        for v in 0..nv_src {
            let e = tv_at(&atom.val_src, t, v) as usize;
            if logical[e].is_none() {
                logical[e] = Some(src_val(t, v));
            }
        }
    }
    let run = run_harness(&gpu, &compiled, &k, &input, &gmem);
    let mut errors = Vec::new();
    if is_load {
        for t in 0..32i64 {
            let words = &run.out[t as usize * x..(t as usize + 1) * x];
            for v in 0..nv_dst {
                let e = tv_at(&atom.val_dst, t, v) as usize;
                let want = logical[e].expect("every destination element has a source");
                let got = unpack(words, 16, v as usize) as u16;
                if got != want {
                    errors.push(format!(
                        "thread {t} value {v}: got {got:#06x} expected {want:#06x} (tile element {e})"
                    ));
                }
            }
        }
    } else {
        let got: Vec<u16> = run.gmem[..smem_rows * 16]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        // Thread t's store address is shared row t (value v at element t * 8 + v); a
        // thread whose (t, v) repeats an earlier tile element is a replica whose address
        // the hardware ignores, so its row keeps the poison.
        let mut expected = smem.clone();
        let mut seen = vec![false; logical.len()];
        for t in 0..32 {
            for v in 0..nv_dst {
                let e = tv_at(&atom.val_dst, t, v) as usize;
                if !seen[e] {
                    seen[e] = true;
                    expected[t as usize * 8 + v as usize] = logical[e].expect("every destination element has a source");
                }
            }
        }
        for (i, (&g, &w)) in got.iter().zip(&expected).enumerate() {
            if g != w {
                errors.push(format!(
                    "smem element {i} (row {}): got {g:#06x} expected {w:#06x}",
                    i / 8
                ));
            }
        }
    }
    report(&op.name, &errors);
    eprintln!("ok {}", op.name);
}

#[test]
fn ldmatrix_matches_copy_atom_layouts() {
    for trans in [false, true] {
        for x in [1, 2, 4] {
            ldsm_case(&ldmatrix(x, trans));
        }
    }
}

#[test]
fn stmatrix_matches_copy_atom_layouts() {
    for trans in [false, true] {
        for x in [1, 2, 4] {
            ldsm_case(&stmatrix(x, trans));
        }
    }
}

// ---------------------------------------------------------------------------------------
// 4. cp.async

#[test]
fn cp_async_copies_and_zero_fills() {
    let mut cases = Vec::new();
    for zfill in [false, true] {
        for bytes in [4, 8, 16] {
            cases.extend(cp_async(CacheOp::CacheAlways, bytes, zfill).map(|op| (op, bytes, zfill)));
        }
        cases.extend(cp_async(CacheOp::CacheGlobal, 16, zfill).map(|op| (op, 16, zfill)));
    }
    assert_eq!(cases.len(), 8);
    for (op, bytes, zfill) in cases {
        let opts = HarnessOptions {
            extra: vec![cp_async_commit_group(), cp_async_wait_group()],
            after: vec![
                "rc_cp_async_commit_group();".into(),
                "rc_cp_async_wait_group<0>();".into(),
            ],
            ..Default::default()
        };
        let k = test_kernel_with(&op.snippet, &opts);
        let Some((gpu, compiled)) = compile_and_gpu(&k.source, &format!("{}.cu", k.name), op.arch) else {
            continue;
        };
        let mut rng = Rng::for_test(&op.snippet.name);
        let atom = op.atom(Element::U8).unwrap();
        for pred in if zfill { vec![true, false] } else { vec![true] } {
            // Shared mirror first (poisoned), then the global source.
            let mut gmem: Vec<u8> = (0..k.gmem_bytes).map(|_| (rng.next_u32() | 1) as u8).collect();
            let smem_before = gmem[..k.smem_bytes].to_vec();
            let src = gmem[k.smem_bytes..k.smem_bytes + bytes].to_vec();
            let input: Vec<u32> = if zfill { vec![pred as u32] } else { vec![0] };
            let run = run_harness(&gpu, &compiled, &k, &input, &gmem);
            // One thread: destination value v (a byte) comes from source value v.
            let mut expected = smem_before.clone();
            for v in 0..atom.num_val_dst() {
                let d = tv_at(&atom.val_dst, 0, v) as usize;
                let s = tv_at(&atom.val_src, 0, v) as usize;
                expected[d] = if pred { src[s] } else { 0 };
            }
            assert_eq!(&run.gmem[..k.smem_bytes], &expected[..], "{} pred={pred}", op.name);
            assert_eq!(
                &run.gmem[k.smem_bytes..],
                &gmem.split_off(k.smem_bytes)[..],
                "{}: source modified",
                op.name
            );
        }
        eprintln!("ok {}", op.name);
    }
}

// ---------------------------------------------------------------------------------------
// 5. TMA and 6. mbarrier transaction counts

const TMAP_STRUCT: &str = "struct __align__(64) rc_tmap_t { unsigned long long opaque[16]; };\n";

// Global tensor: W x H bf16, rows of PITCH elements; box BW x BH with 128-byte swizzle.
const W: i64 = 100;
const H: i64 = 40;
const PITCH: i64 = 112;
const BW: i64 = 64;
const BH: i64 = 32;

fn tma_source() -> String {
    let box_bytes = BW * BH * 2;
    let load = copy_tma::tma_load(2, false, box_bytes * 8);
    let store = copy_tma::tma_store(2, box_bytes * 8);
    let snippets = vec![
        load.snippet.clone(),
        store.snippet.clone(),
        sync::mbarrier_init(),
        sync::mbarrier_arrive_expect_tx(),
        sync::mbarrier_try_wait_parity(),
        sync::fence_mbarrier_init(),
        sync::fence_proxy_async_shared(),
        copy_tma::bulk_commit_group(),
        copy_tma::bulk_wait_group(),
    ];
    let mut src = includes(&snippets.iter().collect::<Vec<_>>());
    src.push_str(TMAP_STRUCT);
    for s in &snippets {
        src.push_str(&s.code);
        src.push('\n');
    }
    let words = box_bytes / 4;
    src.push_str(&format!(
        r#"
extern "C" __global__ void rc_tma_load_test(const __grid_constant__ rc_tmap_t tmap, int c0, int c1, uint32_t* out, uint32_t* flags) {{
  __shared__ __align__(1024) uint32_t sbox[{words}];
  __shared__ __align__(8) uint64_t mbar;
  const uint32_t tid = threadIdx.x;
  for (uint32_t i = tid; i < {words}u; i += blockDim.x) sbox[i] = 0xA5A5A5A5u;
  {mb}
  if (tid == 0) {{ rc_mbarrier_init(mb, 1); rc_fence_mbarrier_init(); }}
  rc_fence_proxy_async_shared();
  __syncthreads();
  if (tid == 0) {{
    rc_mbarrier_arrive_expect_tx(mb, {box_bytes}u);
    rc_tma_load_2d((void*)sbox, (void const*)&tmap, mb, c0, c1);
  }}
  // Bounded by time (about a second), so a lost transaction fails instead of hanging.
  bool done = false;
  const long long t0 = clock64();
  while (!done && clock64() - t0 < 2000000000ll) done = rc_mbarrier_try_wait_parity(mb, 0u);
  if (tid == 0) flags[0] = done ? 1u : 0u;
  __syncthreads();
  for (uint32_t i = tid; i < {words}u; i += blockDim.x) out[i] = sbox[i];
}}

extern "C" __global__ void rc_tma_store_test(const __grid_constant__ rc_tmap_t tmap, int c0, int c1, const uint32_t* img) {{
  __shared__ __align__(1024) uint32_t sbox[{words}];
  const uint32_t tid = threadIdx.x;
  for (uint32_t i = tid; i < {words}u; i += blockDim.x) sbox[i] = img[i];
  rc_fence_proxy_async_shared();
  __syncthreads();
  if (tid == 0) {{
    rc_tma_store_2d((void const*)&tmap, (void const*)sbox, c0, c1);
    rc_bulk_commit_group();
    rc_bulk_wait_group<0>();
  }}
}}
"#,
        mb = smem_addr_stmt("mb", "&mbar"),
    ));
    src
}

/// Byte offset in the 128B-swizzled shared box of box element (x, y).
fn box_byte(x: i64, y: i64) -> usize {
    let box_layout = Layout::new(tuple!(BW, BH), tuple!(1, BW)).unwrap(); // (x, y) -> element
    let pre = box_layout.crd2idx(&tuple!(x, y)).unwrap().as_static().unwrap() * 2;
    GmmaSwizzle::B128.byte_swizzle().apply(pre) as usize
}

#[test]
fn tma_load_and_store_2d_swizzled() {
    let src = tma_source();
    let Some((gpu, compiled)) = compile_and_gpu(&src, "rc_tma_test.cu", Arch::Sm90) else {
        return;
    };
    let mut rng = Rng::for_test("tma_2d");
    let global = Layout::new(tuple!(W, H), tuple!(1, PITCH)).unwrap();
    let spec =
        TmaDescriptorSpec::from_layout(Element::BF16, &global, &[BW as u32, BH as u32], TmaSwizzle::B128).unwrap();
    assert_eq!(spec.box_bytes(), (BW * BH * 2) as u64);
    let args = spec.to_encode_args(&Env::new()).unwrap();
    let module = gpu.load(&compiled).unwrap();
    let stream = gpu.stream();

    // Load: G (H rows of PITCH) random non-zero; boxes inside, overhanging, and negative.
    let g: Vec<u16> = (0..(H * PITCH) as usize).map(|_| rng.nonzero_u16()).collect();
    let d_g = stream.clone_htod(&g).unwrap();
    let (g_ptr, _rec) = d_g.device_ptr(stream);
    let map = rcute_kernel::encode_tiled(&args, g_ptr).unwrap();
    let load = module.function("rc_tma_load_test").unwrap();
    for (c0, c1) in [(0i32, 0i32), (64, 24), (-16, -8)] {
        let words = (BW * BH / 2) as usize;
        let d_out = stream.clone_htod(&vec![0xDEAD_BEEFu32; words]).unwrap();
        let d_flags = stream.clone_htod(&vec![0u32; 4]).unwrap();
        let kargs = KernelArgs::new()
            .tensor_map(&map)
            .i32(c0)
            .i32(c1)
            .slice(&d_out)
            .slice(&d_flags);
        // SAFETY: (CUtensorMap, int, int, u32*, u32*) with buffers of the box size / 4 flags.
        unsafe { load.launch(&LaunchConfig::new(1, 128).with_checked(true), &kargs) }.unwrap();
        let flags = stream.clone_dtoh(&d_flags).unwrap();
        assert_eq!(flags[0], 1, "TMA load ({c0},{c1}) did not complete the mbarrier phase");
        let out = stream.clone_dtoh(&d_out).unwrap();
        let bytes: Vec<u8> = out.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut errors = Vec::new();
        for y in 0..BH {
            for x in 0..BW {
                let (gx, gy) = (c0 as i64 + x, c1 as i64 + y);
                let want = if (0..W).contains(&gx) && (0..H).contains(&gy) {
                    g[global.crd2idx(&tuple!(gx, gy)).unwrap().as_static().unwrap() as usize]
                } else {
                    0
                };
                let o = box_byte(x, y);
                let got = u16::from_le_bytes([bytes[o], bytes[o + 1]]);
                if got != want {
                    errors.push(format!(
                        "box ({x},{y}) global ({gx},{gy}): got {got:#06x} expected {want:#06x}"
                    ));
                }
            }
        }
        report(&format!("tma load at ({c0},{c1})"), &errors);
    }

    // Store: the tensor sits after GUARD rows of a poisoned buffer; the box overhangs.
    const GUARD: i64 = 2;
    let poison = 0xBEEFu16;
    let buf = vec![poison; ((H + 2 * GUARD) * PITCH) as usize];
    let d_buf = stream.clone_htod(&buf).unwrap();
    let (buf_ptr, _rec2) = d_buf.device_ptr(stream);
    let map_out = rcute_kernel::encode_tiled(&args, buf_ptr + (GUARD * PITCH * 2) as u64).unwrap();
    let box_vals: Vec<u16> = (0..(BW * BH) as usize).map(|_| rng.nonzero_u16()).collect();
    let mut img = vec![0u8; (BW * BH * 2) as usize];
    for y in 0..BH {
        for x in 0..BW {
            let o = box_byte(x, y);
            img[o..o + 2].copy_from_slice(&box_vals[(y * BW + x) as usize].to_le_bytes());
        }
    }
    let (c0, c1) = (64i64, 24i64);
    let d_img = stream.clone_htod(&words_of(&img)).unwrap();
    let store = module.function("rc_tma_store_test").unwrap();
    let kargs = KernelArgs::new()
        .tensor_map(&map_out)
        .i32(c0 as i32)
        .i32(c1 as i32)
        .slice(&d_img);
    // SAFETY: (CUtensorMap, int, int, const u32*) with a box-sized image.
    unsafe { store.launch(&LaunchConfig::new(1, 128).with_checked(true), &kargs) }.unwrap();
    let after = stream.clone_dtoh(&d_buf).unwrap();
    let mut errors = Vec::new();
    for r in 0..H + 2 * GUARD {
        for col in 0..PITCH {
            let (gx, gy) = (col, r - GUARD);
            let inside = (0..W).contains(&gx) && (0..H).contains(&gy);
            let (bx, by) = (gx - c0, gy - c1);
            let in_box = (0..BW).contains(&bx) && (0..BH).contains(&by);
            let want = if inside && in_box {
                box_vals[(by * BW + bx) as usize]
            } else {
                poison
            };
            let got = after[(r * PITCH + col) as usize];
            // TMA stores write whole 16-byte chunks: when the inner extent (W * 2 bytes) is
            // not a multiple of 16, the padding up to the next 16-byte boundary of an
            // in-bounds row may be overwritten with the box's values (seen on H200; a
            // known hardware limitation). Nothing beyond that boundary may change.
            let granule_end = (W * 2 + 15) / 16 * 16 / 2;
            let padding = (W..granule_end).contains(&gx) && (0..H).contains(&gy) && in_box;
            if padding && got == box_vals[(by * BW + bx) as usize] {
                continue;
            }
            if got != want {
                errors.push(format!(
                    "buffer row {r} col {col} (tensor ({gx},{gy})): got {got:#06x} expected {want:#06x}"
                ));
            }
        }
    }
    report("tma store at (64,24)", &errors);
}

#[test]
fn mbarrier_transaction_counts() {
    const N: u32 = 1024;
    let snippets = vec![
        sync::mbarrier_init(),
        sync::mbarrier_arrive(),
        sync::mbarrier_arrive_expect_tx(),
        sync::mbarrier_try_wait_parity(),
        sync::fence_mbarrier_init(),
        sync::fence_proxy_async_shared(),
        copy_tma::bulk_load(N as usize / 2).snippet,
    ];
    let mut src = includes(&snippets.iter().collect::<Vec<_>>());
    for s in &snippets {
        src.push_str(&s.code);
        src.push('\n');
    }
    src.push_str(&format!(
        r#"
// Probe the phase of parity `parity` for at most `cycles` clock cycles.
__device__ uint32_t rc_bounded_wait(uint32_t mb, uint32_t parity, long long cycles) {{
  const long long t0 = clock64();
  do {{
    if (rc_mbarrier_try_wait_parity(mb, parity)) return 1u;
  }} while (clock64() - t0 < cycles);
  return 0u;
}}
extern "C" __global__ void rc_mbarrier_tx_test(const uint32_t* src, uint32_t* out, uint32_t* flags) {{
  __shared__ __align__(128) uint32_t sdata[{w}];
  __shared__ __align__(8) uint64_t mbar;
  if (threadIdx.x != 0) return;
  for (int i = 0; i < {w}; ++i) sdata[i] = 0xA5A5A5A5u;
  {mb}
  rc_mbarrier_init(mb, 1);
  rc_fence_mbarrier_init();
  rc_fence_proxy_async_shared();
  flags[0] = rc_bounded_wait(mb, 0u, 100000);   // phase 0 not complete
  flags[1] = rc_bounded_wait(mb, 1u, 100000);   // parity 1 names the (complete) preceding phase
  rc_mbarrier_arrive_expect_tx(mb, {n}u);   // the arrival count is met, {n} bytes pending
  flags[2] = rc_bounded_wait(mb, 0u, 100000);
  rc_bulk_load((void*)sdata, (void const*)src, mb, {h}u);
  flags[3] = rc_bounded_wait(mb, 0u, 2000000); // half the bytes: still incomplete
  rc_bulk_load((void*)(sdata + {hw}), (void const*)(src + {hw}), mb, {h}u);
  flags[4] = rc_bounded_wait(mb, 0u, 2000000000ll); // all bytes: phase 0 completes
  flags[5] = rc_bounded_wait(mb, 1u, 100000);   // wrong parity: phase 1 has not completed
  rc_mbarrier_arrive(mb);                   // plain arrival completes phase 1
  flags[6] = rc_bounded_wait(mb, 1u, 2000000000ll);
  flags[7] = rc_bounded_wait(mb, 0u, 100000);   // phase 2 (parity 0) is pending
  for (int i = 0; i < {w}; ++i) out[i] = sdata[i];
}}
"#,
        w = N / 4,
        n = N,
        h = N / 2,
        hw = N / 8,
        mb = smem_addr_stmt("mb", "&mbar"),
    ));
    let Some((gpu, compiled)) = compile_and_gpu(&src, "rc_mbarrier_tx_test.cu", Arch::Sm90) else {
        return;
    };
    let mut rng = Rng::for_test("mbarrier_tx");
    let data: Vec<u32> = (0..N / 4).map(|_| rng.nonzero_u32()).collect();
    let stream = gpu.stream();
    let d_src = stream.clone_htod(&data).unwrap();
    let d_out = stream.clone_htod(&vec![0xDEAD_BEEFu32; (N / 4) as usize]).unwrap();
    let d_flags = stream.clone_htod(&vec![7u32; 8]).unwrap();
    let f = gpu.load(&compiled).unwrap().function("rc_mbarrier_tx_test").unwrap();
    let args = KernelArgs::new().slice(&d_src).slice(&d_out).slice(&d_flags);
    // SAFETY: (const u32*, u32*, u32*) with N/4, N/4 and 8 words.
    unsafe { f.launch(&LaunchConfig::new(1, 32).with_checked(true), &args) }.unwrap();
    let flags = stream.clone_dtoh(&d_flags).unwrap();
    assert_eq!(flags, vec![0, 1, 0, 0, 1, 0, 1, 0], "mbarrier phase completion flags");
    assert_eq!(stream.clone_dtoh(&d_out).unwrap(), data);
}

// ---------------------------------------------------------------------------------------
// 7. int4 -> 16-bit conversion (lop3 magic numbers), bit-exact against the CPU model

#[test]
fn int4_biased_conversions_match_cpu_model() {
    use rcute_atom::convert_int4::{u4x8_to_16x2_biased, u4x8_to_bf16x2_biased, u4x8_to_f16x2_biased, Biased16};
    for (snippet, format) in [
        (u4x8_to_f16x2_biased(), Biased16::F16),
        (u4x8_to_bf16x2_biased(), Biased16::BF16),
    ] {
        let k = test_kernel_with(&snippet, &HarnessOptions::default());
        assert_eq!((k.in_words_per_thread, k.out_words_per_thread), (1, 4), "{}", k.name);
        let Some((gpu, compiled)) = compile_and_gpu(&k.source, &format!("{}.cu", k.name), snippet.arch) else {
            continue;
        };
        let mut rng = Rng::for_test(&snippet.name);
        let mut words = vec![0u32, u32::MAX, 0x7654_3210, 0x89ab_cdef];
        words.extend((0..12).map(|_| rng.next_u32()));
        let threads = k.block_threads as usize;
        for w in words {
            let run = run_harness(&gpu, &compiled, &k, &vec![w; threads], &vec![0u8; k.gmem_bytes]);
            assert_eq!(
                &run.out[..4],
                &u4x8_to_16x2_biased(w, format),
                "{} word {w:#010x}",
                k.name
            );
        }
        eprintln!("ok {}", k.name);
    }
}
