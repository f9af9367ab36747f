//! A Mixtral-style sparse MoE block (router linear, fused MoE; bf16) and a Llama-style MLP
//! with AWQ-packed weights (f16, packed as AutoAWQ does), each computed through rcute on
//! candle tensors and through candle's own ops (softmax / top-k / per-expert matmuls; the
//! dequantized weights with candle matmul and silu), compared and timed.
//!
//! `cargo run --release --features cuda --example moe_block [tokens]`

use candle_core::{DType, Device, Result, Tensor, D};
use rcute_candle::rcute_ops::awq::pack_awq_matrix;
use rcute_candle::{awq_gemm, fused_moe, matmul, AwqWeight, MoeRouting};
use std::time::Instant;

// Mixtral 8x7B's MoE layer.
const HIDDEN: usize = 4096;
const INTER: usize = 14336;
const EXPERTS: usize = 8;
const TOPK: usize = 2;
// Llama-2-7B's MLP, AWQ 4-bit with AutoAWQ's default group.
const MLP_HIDDEN: usize = 4096;
const MLP_INTER: usize = 11008;
const GROUP: usize = 128;

/// The largest |a - b| relative to max |b|.
fn rel_err(a: &Tensor, b: &Tensor) -> Result<f32> {
    let (a, b) = (a.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?);
    let diff = (a - &b)?.abs()?.max_all()?.to_scalar::<f32>()?;
    Ok(diff / b.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-6))
}

/// Mean seconds per run of `f` (after one warm-up run), synchronized with the device.
fn time(dev: &Device, iters: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<f64> {
    f()?;
    dev.synchronize()?;
    let t = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    dev.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / iters as f64)
}

/// Prints both times (seconds per run) and their ratio.
fn compare(what: &str, rcute: f64, candle: f64) {
    let ratio = candle / rcute;
    println!(
        "{what}: rcute {:.1} us, candle {:.1} us, candle / rcute = {ratio:.2}x",
        rcute * 1e6,
        candle * 1e6
    );
}

/// candle's sparse MoE block (as candle-transformers' Mixtral) from router logits `[T, E]`:
/// softmax on the GPU, top-k on the host (ties to the lower expert, as rcute), then per
/// expert the routed rows through silu(x Wg^T) * (x Wu^T) Wd^T, weighted and added.
fn candle_moe(x: &Tensor, logits: &Tensor, w13: &Tensor, w2: &Tensor) -> Result<Tensor> {
    let logits = logits.to_dtype(DType::F32)?;
    let max = logits.max_keepdim(D::Minus1)?;
    let e = logits.broadcast_sub(&max)?.exp()?;
    let probs = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    let p: Vec<Vec<f32>> = probs.to_vec2()?;
    let (mut rows, mut weights) = (vec![vec![]; EXPERTS], vec![vec![]; EXPERTS]);
    for (t, p) in p.iter().enumerate() {
        let mut ids: Vec<usize> = (0..EXPERTS).collect();
        ids.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
        let sum: f32 = ids[..TOPK].iter().map(|&j| p[j]).sum();
        for &j in &ids[..TOPK] {
            rows[j].push(t as u32);
            weights[j].push(p[j] / sum);
        }
    }
    let mut y = x.zeros_like()?.to_dtype(DType::F32)?;
    for j in 0..EXPERTS {
        if rows[j].is_empty() {
            continue;
        }
        let idx = Tensor::new(rows[j].as_slice(), x.device())?;
        let xs = x.index_select(&idx, 0)?;
        let gu = xs.matmul(&w13.get(j)?.t()?)?;
        let act = (gu.narrow(1, 0, INTER)?.silu()? * gu.narrow(1, INTER, INTER)?)?;
        let out = act.matmul(&w2.get(j)?.t()?)?.to_dtype(DType::F32)?;
        let w = Tensor::new(weights[j].as_slice(), x.device())?.unsqueeze(1)?;
        y = y.index_add(&idx, &out.broadcast_mul(&w)?, 0)?;
    }
    y.to_dtype(x.dtype())
}

/// An AWQ weight `[k, n]` (random 4-bit values, zeros and f16 scales) and its dequantized
/// dense f16 weight, computed by candle: `(q - z) * s` per group of rows.
fn awq_weight(k: usize, n: usize, seed: usize, dev: &Device) -> Result<(AwqWeight, Tensor)> {
    let q: Vec<u8> = (0..k * n).map(|i| ((i * 7 + seed * 13 + i / 97) % 16) as u8).collect();
    let z: Vec<u8> = (0..k / GROUP * n).map(|i| ((i * 5 + seed) % 16) as u8).collect();
    let pack = |v: &[u8], rows| pack_awq_matrix(v, rows, n).map_err(candle_core::Error::wrap);
    let scales = (Tensor::rand(0.5f32, 1.5, (k / GROUP, n), dev)? * (2.0 / (k as f64).sqrt() / 8.0))?;
    let w = AwqWeight {
        qweight: Tensor::from_vec(pack(&q, k)?, (k, n / 8), dev)?,
        scales: scales.to_dtype(DType::F16)?,
        qzeros: Tensor::from_vec(pack(&z, k / GROUP)?, (k / GROUP, n / 8), dev)?,
        group: GROUP,
    };
    let f = |v: &[u8], rows| Tensor::from_vec(v.iter().map(|&b| b as f32).collect(), (rows, n), dev);
    let expand = |t: Tensor| -> Result<Tensor> { t.unsqueeze(1)?.repeat((1, GROUP, 1))?.reshape((k, n)) };
    let scales = w.scales.to_dtype(DType::F32)?;
    let dense = ((f(&q, k)? - expand(f(&z, k / GROUP)?)?)? * expand(scales)?)?.to_dtype(DType::F16)?;
    Ok((w, dense))
}

fn main() -> Result<()> {
    let tokens: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let Some(dev) = rcute_candle::cuda_device(0)? else {
        match cfg!(feature = "cuda") {
            true => println!("no GPU: no CUDA driver or device"),
            false => println!("no GPU: built without the `cuda` feature (scripts/build-candle.sh)"),
        }
        return Ok(());
    };
    println!("{tokens} tokens; MoE block (Mixtral 8x7B): hidden {HIDDEN}, inter {INTER}, {EXPERTS} experts, top-{TOPK}, bf16, random N(0,1) activations and scaled N(0,1) weights");
    let x = Tensor::randn(0f32, 1.0, (tokens, HIDDEN), &dev)?.to_dtype(DType::BF16)?;
    let router = (Tensor::randn(0f32, 1.0, (EXPERTS, HIDDEN), &dev)? * 0.05)?.to_dtype(DType::BF16)?;
    let w13 = (Tensor::randn(0f32, 1.0, (EXPERTS, 2 * INTER, HIDDEN), &dev)? * 0.03)?.to_dtype(DType::BF16)?;
    let w2 = (Tensor::randn(0f32, 1.0, (EXPERTS, HIDDEN, INTER), &dev)? * 0.02)?.to_dtype(DType::BF16)?;
    let rcute_moe = || -> Result<Tensor> {
        let logits = matmul(&x, &router.t()?)?;
        let routing = MoeRouting::Logits {
            logits: &logits,
            topk: TOPK,
            renormalize: true,
        };
        fused_moe(&x, &w13, &w2, routing, Default::default())
    };
    let candle_block = || candle_moe(&x, &x.matmul(&router.t()?)?, &w13, &w2);
    // The router linear on its own, then the layer from the same logits on both sides (a
    // one-ulp difference of two bf16 GEMMs may swap near-tied experts).
    let logits = x.matmul(&router.t()?)?;
    let err = rel_err(&matmul(&x, &router.t()?)?, &logits)?;
    println!("router linear: max |rcute - candle| / max |candle| = {err:.2e}");
    assert!(err < 1e-2, "the router logits differ beyond bf16 tolerance");
    let routing = MoeRouting::Logits {
        logits: &logits,
        topk: TOPK,
        renormalize: true,
    };
    let got = fused_moe(&x, &w13, &w2, routing, Default::default())?;
    let err = rel_err(&got, &candle_moe(&x, &logits, &w13, &w2)?)?;
    println!("MoE block: max |rcute - candle| / max |candle| = {err:.2e}");
    assert!(err < 3e-2, "the MoE outputs differ beyond bf16 tolerance");
    compare("MoE block", time(&dev, 20, rcute_moe)?, time(&dev, 20, candle_block)?);
    let router_rcute = time(&dev, 20, || matmul(&x, &router.t()?))?;
    compare(
        "  router linear",
        router_rcute,
        time(&dev, 20, || x.matmul(&router.t()?))?,
    );
    let layer = || fused_moe(&x, &w13, &w2, routing, Default::default());
    let layer_candle = || candle_moe(&x, &logits, &w13, &w2);
    compare(
        "  layer from logits",
        time(&dev, 20, layer)?,
        time(&dev, 20, layer_candle)?,
    );

    println!("{tokens} tokens; MLP (Llama-2-7B): hidden {MLP_HIDDEN}, inter {MLP_INTER}, AWQ 4-bit group {GROUP}, f16, pseudo-random 4-bit weights and zeros, uniform scales");
    let xh = Tensor::randn(0f32, 1.0, (tokens, MLP_HIDDEN), &dev)?.to_dtype(DType::F16)?;
    let (gate, gate_w) = awq_weight(MLP_HIDDEN, MLP_INTER, 1, &dev)?;
    let (up, up_w) = awq_weight(MLP_HIDDEN, MLP_INTER, 2, &dev)?;
    let (down, down_w) = awq_weight(MLP_INTER, MLP_HIDDEN, 3, &dev)?;
    let rcute_mlp = || -> Result<Tensor> {
        let act = (awq_gemm(&xh, &gate, None)?.silu()? * awq_gemm(&xh, &up, None)?)?;
        awq_gemm(&act, &down, None)
    };
    let candle_mlp = || -> Result<Tensor> {
        let act = (xh.matmul(&gate_w)?.silu()? * xh.matmul(&up_w)?)?;
        act.matmul(&down_w)
    };
    let err = rel_err(&rcute_mlp()?, &candle_mlp()?)?;
    println!("AWQ MLP: max |rcute - candle| / max |candle| = {err:.2e}");
    assert!(err < 3e-2, "the MLP outputs differ beyond fp16 tolerance");
    compare(
        "AWQ MLP (candle: dense f16)",
        time(&dev, 50, rcute_mlp)?,
        time(&dev, 50, candle_mlp)?,
    );
    Ok(())
}
