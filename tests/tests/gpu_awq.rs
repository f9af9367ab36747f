//! AWQ dequantization on the GPU, bit-exact against the format's formula: weights packed the
//! way AutoAWQ packs them (random nibbles, zeros 0 and 15 included, scales from 1e-4 to 1),
//! output poisoned first, every element compared with `(q - z) * s` rounded once to the
//! 16-bit type. Skips with a printed reason without a GPU (fails under
//! `RCUTE_REQUIRE_GPU=1`).

mod common;

use common::{compile_and_gpu, Rng};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use rcute_atom::Element;
use rcute_kernel::awq_dequantize::{generate, AwqDequantizeArgs};
use rcute_kernel::Arch;
use rcute_ops::awq::{dequantize_reference, pack_awq_matrix, AwqShape};

fn to_bits(e: Element, v: f64) -> u16 {
    match e {
        Element::F16 => half::f16::from_f64(v).to_bits(),
        _ => half::bf16::from_f64(v).to_bits(),
    }
}

fn from_bits(e: Element, b: u16) -> f64 {
    match e {
        Element::F16 => half::f16::from_bits(b).to_f64(),
        _ => half::bf16::from_bits(b).to_f64(),
    }
}

#[test]
fn awq_dequantize_is_bit_exact() {
    for e in [Element::F16, Element::BF16] {
        let g = generate(e).unwrap();
        let Some((gpu, compiled)) = compile_and_gpu(&g.source, &format!("{}.cu", g.name), Arch::Sm80) else {
            continue;
        };
        let module = gpu.load(&compiled).unwrap();
        let f = module.function(&g.name).unwrap();
        let stream = gpu.stream();
        let mut rng = Rng::for_test(&g.name);
        // (K, N, G): groups of 32 / 64 / 128, G = K, N not a multiple of the block's 2048
        // columns, K not a multiple of a thread's 4 rows (1 and 10: rows past K skipped).
        for (k, n, group) in [
            (256, 64, 128),
            (96, 24, 96),
            (128, 2056, 32),
            (320, 1000, 64),
            (1, 8, 1),
            (10, 24, 10),
        ] {
            let shape = AwqShape::new(k, n, group).unwrap();
            let q: Vec<u8> = (0..k * n).map(|_| (rng.next_u32() % 16) as u8).collect();
            let z: Vec<u8> = (0..shape.groups() * n)
                .map(|i| match i % 5 {
                    0 => 0,
                    1 => 15,
                    _ => (rng.next_u32() % 16) as u8,
                })
                .collect();
            // Scales log-uniform in [1e-4, 1], rounded to the 16-bit type.
            let s_bits: Vec<u16> = (0..shape.groups() * n)
                .map(|_| to_bits(e, 10f64.powf(-4.0 * f64::from(rng.next_u32()) / f64::from(u32::MAX))))
                .collect();
            let s: Vec<f64> = s_bits.iter().map(|&b| from_bits(e, b)).collect();
            let qweight = pack_awq_matrix(&q, k, n).unwrap();
            let qzeros = pack_awq_matrix(&z, shape.groups(), n).unwrap();
            let want = dequantize_reference(shape, &qweight, &qzeros, &s).unwrap();

            let d_q = stream.clone_htod(&qweight).unwrap();
            let d_z = stream.clone_htod(&qzeros).unwrap();
            let d_s = stream.clone_htod(&s_bits).unwrap();
            let mut d_out = stream.clone_htod(&vec![0x7fffu16; k * n]).unwrap();
            {
                let (pq, _gq) = d_q.device_ptr(stream);
                let (pz, _gz) = d_z.device_ptr(stream);
                let (ps, _gs) = d_s.device_ptr(stream);
                let (po, _go) = d_out.device_ptr_mut(stream);
                let args = AwqDequantizeArgs {
                    qweight: pq,
                    qzeros: pz,
                    scales: ps,
                    out: po,
                    k: k as i32,
                    n: n as i32,
                    group: group as i32,
                };
                // SAFETY: the pointers hold the sizes the kernel reads ([K, N/8], [K/G, N/8],
                // [K/G, N]) and writes ([K, N]); N is a multiple of 8 and the buffers are
                // 16-byte aligned (fresh allocations).
                unsafe { f.launch(&g.launch_config(&args), &g.args(&args)) }.unwrap();
            }
            let got = stream.clone_dtoh(&d_out).unwrap();
            let bad: Vec<String> = (0..k * n)
                .filter(|&i| got[i] != to_bits(e, want[i]))
                .take(8)
                .map(|i| {
                    format!(
                        "({}, {}): got {:#06x}, want {:#06x} = {}",
                        i / n,
                        i % n,
                        got[i],
                        to_bits(e, want[i]),
                        want[i]
                    )
                })
                .collect();
            assert!(bad.is_empty(), "{} {k}x{n} G={group}: {bad:#?}", g.name);
        }
        eprintln!("ok {}", g.name);
    }
}
