//! One kernel a tuning configuration runs, as the configuration its generator takes
//! ([`TunedKernel`]), and the CUDA source it generates. The ops' kernel lists
//! ([`super::tuned_kernels`]) name their kernels with it.

use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::gemm_sm80::GemmSm80Config;
use rcute_kernel::gemm_sm90::GemmSm90Config;
use rcute_kernel::grouped_gemm::GroupedGemmConfig;

/// One kernel a tuning configuration runs, as the configuration of its generator.
#[derive(Clone, Debug)]
pub enum TunedKernel {
    /// The Ampere-class GEMM (`gemm`, INT8 `scaled_mm`).
    Sm80(GemmSm80Config),
    /// The Hopper GEMM (`gemm`, `scaled_mm`, and the MoE layer's SM90 grouped GEMMs).
    Sm90(GemmSm90Config),
    /// The AWQ GEMM.
    Awq(AwqGemmConfig),
    /// A grouped GEMM of the MoE layer's SM80 family.
    Grouped(GroupedGemmConfig),
    /// The row gather of the MoE layer's SM90 family, for operands of this type.
    MoeGather(Element),
}

impl TunedKernel {
    /// The CUDA source its generator emits (`Err`: why it cannot).
    ///
    /// ```
    /// use rcute_ops::tuning::{tuned_kernels, ConfigSpec, ProblemKey};
    /// let key = ProblemKey::new("awq", "f16", "g128", "sm_90a", 16, 4096, 4096);
    /// let spec: ConfigSpec = "awq:16x256x64,1x4,s4,v4,k8".parse().unwrap();
    /// let kernels = tuned_kernels(&key, &spec, 232448).unwrap();
    /// assert!(kernels[0].source().unwrap().contains("__global__"));
    /// ```
    pub fn source(&self) -> Result<String, String> {
        use rcute_kernel::{awq_gemm, gemm_sm80, gemm_sm90, grouped_gemm};
        let text = |e: &dyn std::fmt::Display| e.to_string();
        match self {
            TunedKernel::Sm80(c) => gemm_sm80::generate(c).map(|g| g.source).map_err(|e| text(&e)),
            TunedKernel::Sm90(c) => gemm_sm90::generate(c).map(|g| g.source).map_err(|e| text(&e)),
            TunedKernel::Awq(c) => awq_gemm::generate(c).map(|g| g.source).map_err(|e| text(&e)),
            TunedKernel::Grouped(c) => grouped_gemm::generate(c).map(|g| g.source).map_err(|e| text(&e)),
            TunedKernel::MoeGather(el) => grouped_gemm::gather::generate(*el)
                .map(|g| g.source)
                .map_err(|e| text(&e)),
        }
    }
}
