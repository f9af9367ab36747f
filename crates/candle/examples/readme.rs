//! The lines the READMEs show for calling an rcute op on a candle tensor, run and checked
//! against candle's own matmul (`tests/readme.rs` checks that both READMEs quote the block
//! between the markers verbatim).
//!
//! `cargo run --release --features cuda --example readme`

use candle_core::{DType, Device, Tensor};

fn main() -> candle_core::Result<()> {
    if rcute_candle::cuda_device(0)?.is_none() {
        println!("no GPU: no CUDA driver or device, or built without the `cuda` feature");
        return Ok(());
    }
    // README begin
    let dev = Device::new_cuda(0)?;
    let x = Tensor::randn(0f32, 1.0, (16, 4096), &dev)?.to_dtype(DType::BF16)?;
    let w = Tensor::randn(0f32, 1.0, (11008, 4096), &dev)?.to_dtype(DType::BF16)?; // Linear [N, K]
    let y = rcute_candle::matmul(&x, &w.t()?)?; // [16, 11008] bf16, on candle's stream

    // README end
    let want = x.matmul(&w.t()?)?.to_dtype(DType::F32)?;
    let diff = (y.to_dtype(DType::F32)? - &want)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    let scale = want.abs()?.max_all()?.to_scalar::<f32>()?;
    println!(
        "rcute_candle::matmul {:?}: max |rcute - candle| / max |candle| = {:.2e}",
        y.dims(),
        diff / scale
    );
    assert_eq!(y.dims(), &[16, 11008]);
    assert!(
        diff / scale < 2e-2,
        "rcute's matmul differs from candle's beyond bf16 tolerance"
    );
    Ok(())
}
