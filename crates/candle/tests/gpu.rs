//! rcute's ops on candle CUDA tensors against candle's own computation (small shapes).
//! Skips with a printed reason without a GPU (or without the `cuda` feature); fails then
//! when `RCUTE_REQUIRE_GPU=1`.

use candle_core::{DType, Device, Tensor, D};

/// The CUDA device, or `None` (after printing why) when there is none.
fn gpu() -> Option<Device> {
    let why = match rcute_candle::cuda_device(0) {
        Ok(Some(d)) => return Some(d),
        Ok(None) if cfg!(feature = "cuda") => "no CUDA driver or device".to_string(),
        Ok(None) => "rcute-candle was built without its `cuda` feature".to_string(),
        Err(e) => format!("the CUDA device does not open: {e}"),
    };
    assert!(std::env::var("RCUTE_REQUIRE_GPU").as_deref() != Ok("1"), "RCUTE_REQUIRE_GPU=1 but {why}");
    eprintln!("skipping: {why}");
    None
}

/// A deterministic pseudo-random `[dims]` f32 tensor in [-1, 1).
fn rand(dims: &[usize], seed: u64, dev: &Device) -> Tensor {
    let n: usize = dims.iter().product();
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, dims, dev).unwrap()
}

/// The largest |a - b| relative to max |b|.
fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.to_dtype(DType::F32).unwrap();
    let b = b.to_dtype(DType::F32).unwrap();
    let diff = (a - &b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap().max(1e-6);
    diff / scale
}

#[test]
fn matmul_and_gemm_match_candle() {
    let Some(dev) = gpu() else { return };
    for dt in [DType::BF16, DType::F16] {
        let a = rand(&[96, 128], 1, &dev).to_dtype(dt).unwrap();
        let w = rand(&[80, 128], 2, &dev).to_dtype(dt).unwrap(); // a Linear weight [N, K]
        let c = rand(&[96, 80], 3, &dev).to_dtype(dt).unwrap();
        let want = a.matmul(&w.t().unwrap()).unwrap();
        let got = rcute_candle::matmul(&a, &w.t().unwrap()).unwrap();
        assert_eq!(got.dims(), &[96, 80]);
        assert!(rel_err(&got, &want) < 2e-2, "{dt:?} matmul");
        let fused = rcute_candle::gemm(&a, &w.t().unwrap(), Some(&c), 0.5, 1.0).unwrap();
        let want = ((want * 0.5).unwrap() + &c).unwrap();
        assert!(rel_err(&fused, &want) < 2e-2, "{dt:?} gemm epilogue");
    }
}

#[test]
fn awq_matches_dequantized_candle_matmul() {
    let Some(dev) = gpu() else { return };
    let (m, k, n, g) = (8, 256, 64, 128);
    let q: Vec<u8> = (0..k * n).map(|i| (i * 7 % 16) as u8).collect();
    let z: Vec<u8> = (0..(k / g) * n).map(|i| (i * 5 % 16) as u8).collect();
    let pack = |v: &[u8], rows| rcute_candle::rcute_ops::awq::pack_awq_matrix(v, rows, n).unwrap();
    let w = rcute_candle::AwqWeight {
        qweight: Tensor::from_vec(pack(&q, k), (k, n / 8), &dev).unwrap(),
        scales: (rand(&[k / g, n], 4, &dev).abs().unwrap() * 0.1).unwrap().to_dtype(DType::F16).unwrap(),
        qzeros: Tensor::from_vec(pack(&z, k / g), (k / g, n / 8), &dev).unwrap(),
        group: g,
    };
    // candle's own dequantization: (q - z) * s with groups of g rows.
    let qf = Tensor::from_vec(q.iter().map(|&v| v as f32).collect::<Vec<_>>(), (k, n), &dev).unwrap();
    let zf = Tensor::from_vec(z.iter().map(|&v| v as f32).collect::<Vec<_>>(), (k / g, n), &dev).unwrap();
    let expand = |t: &Tensor| t.unsqueeze(1).unwrap().repeat((1, g, 1)).unwrap().reshape((k, n)).unwrap();
    let sf = w.scales.to_dtype(DType::F32).unwrap();
    let want_w = ((qf - expand(&zf)).unwrap() * expand(&sf)).unwrap().to_dtype(DType::F16).unwrap();
    let got_w = rcute_candle::awq_dequantize(&w).unwrap();
    assert!(rel_err(&got_w, &want_w) < 1e-3, "awq_dequantize");
    let x = rand(&[m, k], 5, &dev).to_dtype(DType::F16).unwrap();
    let got = rcute_candle::awq_gemm(&x, &w, None).unwrap();
    assert!(rel_err(&got, &x.matmul(&want_w).unwrap()) < 2e-2, "awq_gemm");
}

#[test]
fn int8_scaled_mm_matches_candle() {
    let Some(dev) = gpu() else { return };
    let (m, n, k) = (32, 64, 128);
    let ai: Vec<i8> = (0..m * k).map(|i| ((i * 37 % 255) as i32 - 127) as i8).collect();
    let bi: Vec<i8> = (0..n * k).map(|i| ((i * 91 % 255) as i32 - 127) as i8).collect();
    let bytes = |v: &[i8]| v.iter().map(|&x| x as u8).collect::<Vec<_>>();
    let a = Tensor::from_vec(bytes(&ai), (m, k), &dev).unwrap();
    let w = Tensor::from_vec(bytes(&bi), (n, k), &dev).unwrap();
    let sa = (rand(&[m], 6, &dev).abs().unwrap() * 0.01).unwrap();
    let sb = Tensor::from_vec(vec![0.02f32], 1, &dev).unwrap();
    let got = rcute_candle::scaled_mm(&a, &w.t().unwrap(), &sa, &sb, None, DType::BF16).unwrap();
    let af = Tensor::from_vec(ai.iter().map(|&v| v as f32).collect::<Vec<_>>(), (m, k), &dev).unwrap();
    let wf = Tensor::from_vec(bi.iter().map(|&v| v as f32).collect::<Vec<_>>(), (n, k), &dev).unwrap();
    let want = af.matmul(&wf.t().unwrap()).unwrap().broadcast_mul(&sa.unsqueeze(1).unwrap()).unwrap();
    let want = (want * 0.02).unwrap();
    assert!(rel_err(&got, &want) < 1e-2, "scaled_mm");
}

#[test]
fn fused_moe_matches_candle() {
    let Some(dev) = gpu() else { return };
    let (t, e, topk, h, i) = (8, 4, 2, 64, 128);
    let dt = DType::BF16;
    let x = rand(&[t, h], 7, &dev).to_dtype(dt).unwrap();
    let w13 = (rand(&[e, 2 * i, h], 8, &dev) * 0.1).unwrap().to_dtype(dt).unwrap();
    let w2 = (rand(&[e, h, i], 9, &dev) * 0.1).unwrap().to_dtype(dt).unwrap();
    let logits = rand(&[t, e], 10, &dev);
    let routing = rcute_candle::MoeRouting::Logits {
        logits: &logits,
        topk,
        renormalize: true,
    };
    let got = rcute_candle::fused_moe(&x, &w13, &w2, routing, Default::default()).unwrap();
    // candle: softmax, top-k, renormalise, then every token through its experts.
    let probs = softmax(&logits);
    let ids = probs.arg_sort_last_dim(false).unwrap().narrow(1, 0, topk).unwrap();
    let ids: Vec<Vec<u32>> = ids.to_vec2().unwrap();
    let probs: Vec<Vec<f32>> = probs.to_vec2().unwrap();
    let xf = x.to_dtype(DType::F32).unwrap();
    let mut rows = Vec::new();
    for (tok, ids) in ids.iter().enumerate() {
        let sum: f32 = ids.iter().map(|&j| probs[tok][j as usize]).sum();
        let xt = xf.narrow(0, tok, 1).unwrap();
        let mut y = Tensor::zeros((1, h), DType::F32, &dev).unwrap();
        for &j in ids {
            let w13j = w13.get(j as usize).unwrap().to_dtype(DType::F32).unwrap();
            let gu = xt.matmul(&w13j.t().unwrap()).unwrap();
            let act = (gu.narrow(1, 0, i).unwrap().silu().unwrap() * gu.narrow(1, i, i).unwrap()).unwrap();
            let w2j = w2.get(j as usize).unwrap().to_dtype(DType::F32).unwrap();
            let out = act.matmul(&w2j.t().unwrap()).unwrap();
            y = (y + (out * (probs[tok][j as usize] / sum) as f64).unwrap()).unwrap();
        }
        rows.push(y);
    }
    let want = Tensor::cat(&rows, 0).unwrap();
    assert!(rel_err(&got, &want) < 3e-2, "fused_moe");
}

fn softmax(t: &Tensor) -> Tensor {
    let max = t.max_keepdim(D::Minus1).unwrap();
    let e = t.broadcast_sub(&max).unwrap().exp().unwrap();
    e.broadcast_div(&e.sum_keepdim(D::Minus1).unwrap()).unwrap()
}
