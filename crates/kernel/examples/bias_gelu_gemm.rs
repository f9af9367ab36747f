//! A new GEMM variant in a few lines: `D = gelu(A @ B + bias[n])`, bf16 in and out, as one
//! fusion tree given to both GEMM families: the Ampere-class `mma.sync` kernel (sm_80) and
//! the Hopper TMA + `wgmma` kernel (sm_90a). Both are compiled with NVRTC.
//! `cargo run -p rcute-kernel --example bias_gelu_gemm`
use rcute_atom::{Element, Major};
use rcute_collective::fusion::{Fusion, Node};
use rcute_kernel::gemm_sm80::{self, GemmSm80Config};
use rcute_kernel::gemm_sm90::{self, GemmSm90Config, Sm90Schedule};
use rcute_kernel::{compile, Arch, CompileOptions};

/// The epilogue: `gelu(acc + bias[n])` (bias: one bf16 per column), rounded to bf16.
pub fn bias_gelu() -> Fusion {
    let bias = Node::row_broadcast("bias", Element::BF16, false);
    let root = (Node::Accumulator + bias).gelu().convert(Element::BF16);
    Fusion::new(root)
        .and_then(|f| f.with_name("bias_gelu"))
        .expect("a valid tree")
}

/// The sm_80 variant: K-major ("TN") A and B, 128x128x32 tiles, 2x2 warps.
pub fn sm80() -> gemm_sm80::GeneratedGemm {
    let cfg = GemmSm80Config::bf16(Major::K, Major::K, [128, 128, 32], [2, 2]).with_fusion(bias_gelu());
    gemm_sm80::generate(&cfg).expect("valid SM80 configuration")
}

/// The sm_90a variant: cooperative 128x128x64 tiles (the fusion reads no C).
pub fn sm90() -> gemm_sm90::GeneratedGemmSm90 {
    let mut cfg = GemmSm90Config::bf16([128, 128, 64], Sm90Schedule::Cooperative);
    cfg.fusion = bias_gelu();
    gemm_sm90::generate(&cfg).expect("valid SM90 configuration")
}

/// Generates both kernels and compiles them with NVRTC.
pub fn main() -> Result<(), rcute_kernel::CompileError> {
    let (a, b) = (sm80(), sm90());
    for (name, source, arch) in [(a.name, a.source, Arch::Sm80), (b.name, b.source, Arch::Sm90a)] {
        let c = compile(&source, &format!("{name}.cu"), &CompileOptions::new(arch))?;
        let r = c.resources.kernel(&name).expect("the main kernel");
        println!(
            "{name} ({}): {} registers, {} bytes spilled",
            arch.as_str(),
            r.registers,
            r.spill_stores_bytes
        );
    }
    Ok(())
}
