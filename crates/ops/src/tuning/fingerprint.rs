//! The fingerprint of a tuning entry: the kernels its configuration runs for its key, and
//! a hash of their generated CUDA sources.
//!
//! A measured choice holds while the code it measured is the code that runs. The tuner
//! writes [`kernel_fingerprint`] of each entry's configuration and key into the entry
//! ([`super::TuningTable::merge_into_file`]); a lookup computes it again with this build's
//! generators for the entry it matched (once per entry) and uses the entry only where the
//! two agree ([`super::Tables::lookup`]). A change to any kernel an entry runs thus retires
//! that entry, and only the entries that run it. The kernels are the ones the tuner
//! compiles for a candidate ([`tuned_kernels`]): the ops' loaders build from the same
//! functions.

use rcute_atom::Element;
use rcute_kernel::gemm_sm80::{GemmSm80Config, Major};
use rcute_kernel::gemm_sm90::GemmSm90Config;
use sha2::{Digest, Sha256};

use super::op_specs::AwqSpec;
use super::tuned_kernel::TunedKernel;
use super::{ConfigSpec, ProblemKey};

/// The 16-bit floating type a key's `dtypes` names (`bf16`, `f16`).
fn half_element(dtypes: &str) -> Result<Element, String> {
    match dtypes {
        "bf16" => Ok(Element::BF16),
        "f16" => Ok(Element::F16),
        other => Err(format!("element types {other:?} are not bf16 or f16")),
    }
}

/// The kernel a `gemm` configuration runs for the problems the tables hold (TN, one
/// batch, no C) of `e` operands and output: the Ampere-class kernel of an SM80-class spec,
/// the Hopper kernel of an `sm90:` one. What the tuner compiles and a tuning entry's
/// fingerprint covers.
pub(crate) fn gemm_kernel(spec: &ConfigSpec, e: Element) -> Result<TunedKernel, String> {
    match spec {
        ConfigSpec::Sm80(x) => {
            let mut cfg = x.apply(GemmSm80Config::bf16(Major::K, Major::K, x.tile, x.warps));
            (cfg.a, cfg.b, cfg.c, cfg.d) = (e, e, e, e);
            Ok(TunedKernel::Sm80(cfg))
        }
        ConfigSpec::Sm90(x) => {
            let mut cfg = x.apply(GemmSm90Config::bf16(x.tile, x.schedule));
            (cfg.ab, cfg.cd) = (e, e);
            Ok(TunedKernel::Sm90(cfg.without_c()))
        }
        other => Err(format!("{other} is not a gemm configuration")),
    }
}

/// The kernel an `awq:` configuration runs for `element` activations: the fused GEMM on
/// AutoAWQ's checkpoint words ([`AwqSpec::config`]). What the tuner compiles and a tuning
/// entry's fingerprint covers.
pub(crate) fn awq_kernel(spec: &ConfigSpec, element: Element) -> Result<TunedKernel, String> {
    Ok(TunedKernel::Awq(spec.op_spec::<AwqSpec>()?.config(element).0))
}

/// The kernels `spec` runs for a problem of `key` on a device with `smem_optin` bytes of
/// opt-in shared memory per block (what an automatic SM80-class stage count fills): for
/// `gemm` and `scaled_mm` the one GEMM (its split-K reduction is in the same unit), for
/// `awq` the fused GEMM, for `moe` the kernels of the layer the configuration decides
/// (the grouped GEMMs, and the SM90 family's gather). The same lists the tuner compiles.
///
/// ```
/// use rcute_ops::tuning::{tuned_kernels, ConfigSpec, ProblemKey};
/// let key = ProblemKey::new("moe", "bf16", "e8-top2", "sm_90a", 16, 4096, 14336);
/// let spec: ConfigSpec = "moe:sm90n".parse().unwrap();
/// // the row gather, GEMM1 x 2, its gathering forms x 2, GEMM2 x 2, the dynamic walks of
/// // GEMM1's wide form and of GEMM2 x 2
/// assert_eq!(tuned_kernels(&key, &spec, 232448).unwrap().len(), 10);
/// let awq = ProblemKey::new("awq", "f16", "g128", "sm_90a", 16, 4096, 4096);
/// assert!(tuned_kernels(&awq, &spec, 232448).is_err()); // a MoE spec under an AWQ key
/// ```
pub fn tuned_kernels(key: &ProblemKey, spec: &ConfigSpec, smem_optin: u32) -> Result<Vec<TunedKernel>, String> {
    if !spec.fits_op(&key.op) {
        return Err(format!("{spec} is not a configuration of op {:?}", key.op));
    }
    match key.op.as_str() {
        "gemm" => Ok(vec![gemm_kernel(spec, half_element(&key.dtypes)?)?]),
        "scaled_mm" => {
            let kind = crate::scaled_mm_config::ScaledMmKind::of_key(key)?;
            let kernel =
                crate::scaled_mm_config::scaled_mm_spec_kernel(&kind, spec, smem_optin).map_err(|e| e.to_string())?;
            Ok(vec![kernel])
        }
        "awq" => Ok(vec![awq_kernel(spec, half_element(&key.dtypes)?)?]),
        "moe" => {
            crate::moe::kernels::fused_moe_spec_kernels(half_element(&key.dtypes)?, spec).map_err(|e| e.to_string())
        }
        other => Err(format!("no kernels for op {other:?}")),
    }
}

/// The fingerprint of the kernels `spec` runs for `key` ([`tuned_kernels`], on a device of
/// `smem_optin` bytes of opt-in shared memory per block): the first 16 hex digits of the
/// SHA-256 of their generated sources, in order, each followed by a NUL byte. Equal
/// fingerprints mean byte-identical kernels; the device's SM count and other launch-time
/// properties are not part of the sources, and not of the fingerprint.
///
/// ```
/// use rcute_ops::tuning::{kernel_fingerprint, ConfigSpec, ProblemKey};
/// let key = ProblemKey::new("gemm", "bf16", "lincomb", "sm_90a", 16, 4096, 4096);
/// let spec: ConfigSpec = "sm90:64x128x64,pp,k2".parse().unwrap();
/// let f = kernel_fingerprint(&key, &spec, 232448).unwrap();
/// assert_eq!(f.len(), 16);
/// // The same configuration for f16 operands is another kernel; split-K is a launch argument.
/// let f16 = ProblemKey { dtypes: "f16".into(), ..key.clone() };
/// assert_ne!(kernel_fingerprint(&f16, &spec, 232448).unwrap(), f);
/// let k4: ConfigSpec = "sm90:64x128x64,pp,k4".parse().unwrap();
/// assert_eq!(kernel_fingerprint(&key, &k4, 232448).unwrap(), f);
/// ```
pub fn kernel_fingerprint(key: &ProblemKey, spec: &ConfigSpec, smem_optin: u32) -> Result<String, String> {
    let mut h = Sha256::new();
    for kernel in tuned_kernels(key, spec, smem_optin)? {
        h.update(kernel.source()?.as_bytes());
        h.update([0u8]);
    }
    Ok(h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100_SMEM: u32 = 232448;

    fn fp(op: &str, dtypes: &str, fusion: &str, spec: &str) -> Result<String, String> {
        let key = ProblemKey::new(op, dtypes, fusion, "sm_90a", 16, 4096, 4096);
        kernel_fingerprint(&key, &spec.parse().unwrap(), H100_SMEM)
    }

    #[test]
    fn every_op_fingerprints_its_kernels_and_a_changed_source_changes_it() {
        let cases = [
            ("gemm", "bf16", "lincomb", "128x128x32,2x2,auto,1", "128x128x32,2x2,2,1"),
            (
                "gemm",
                "bf16",
                "lincomb",
                "sm90:128x256x64,coop",
                "sm90:128x256x64,coop,c2x1",
            ),
            (
                "scaled_mm",
                "s8:bf16",
                "token-channel+bias",
                "128x128x64,2x2,auto,1",
                "128x128x64,2x2,2,1",
            ),
            (
                "scaled_mm",
                "e4m3:bf16",
                "token-channel+bias",
                "sm90:128x128x128,coop",
                "sm90:128x128x128,pp",
            ),
            (
                "awq",
                "f16",
                "g128",
                "awq:16x256x64,1x4,s4,v4,k8",
                "awq:16x256x64,1x4,s3,v4,k8",
            ),
            (
                "moe",
                "bf16",
                "e8-top2",
                "moe:16x128x64,1x4,k4,s8",
                "moe:16x128x64,1x4,k4,s8,l2",
            ),
            ("moe", "bf16", "e8-top2", "moe:sm90", "moe:sm90n"),
        ];
        for (op, dtypes, fusion, a, b) in cases {
            let fa = fp(op, dtypes, fusion, a).unwrap();
            assert_eq!(fa.len(), 16);
            assert!(fa.chars().all(|c| c.is_ascii_hexdigit()), "{fa}");
            assert_eq!(fp(op, dtypes, fusion, a).unwrap(), fa, "deterministic");
            assert_ne!(
                fp(op, dtypes, fusion, b).unwrap(),
                fa,
                "{op}: {a} and {b} are other kernels"
            );
        }
        // A launch-time knob (split-K, AWQ splits) is not part of the source.
        assert_eq!(
            fp("awq", "f16", "g128", "awq:16x256x64,1x4,s4,v4,k8"),
            fp("awq", "f16", "g128", "awq:16x256x64,1x4,s4,v4,k2")
        );
        // The INT8 scaled-mm fusion is part of its key: another bias, another kernel.
        assert_ne!(
            fp("scaled_mm", "s8:bf16", "token-channel", "128x128x64,2x2,auto,1"),
            fp("scaled_mm", "s8:bf16", "token-channel+bias", "128x128x64,2x2,auto,1")
        );
    }

    #[test]
    fn the_automatic_stage_count_follows_the_shared_memory_of_the_device() {
        let key = ProblemKey::new("scaled_mm", "s8:bf16", "token-channel", "sm_86", 16, 4096, 4096);
        // 32 KiB stages: 3 in 99 KiB (sm_86), 4 (the automatic maximum) in 227 KiB
        let spec: ConfigSpec = "128x128x128,2x2,auto,1".parse().unwrap();
        let big = kernel_fingerprint(&key, &spec, H100_SMEM).unwrap();
        assert_ne!(kernel_fingerprint(&key, &spec, 101376).unwrap(), big);
        let fixed: ConfigSpec = "128x128x128,2x2,3,1".parse().unwrap();
        assert_eq!(
            kernel_fingerprint(&key, &fixed, H100_SMEM),
            kernel_fingerprint(&key, &fixed, 101376)
        );
    }

    #[test]
    fn keys_and_configurations_that_do_not_name_kernels_are_errors() {
        for (op, dtypes, fusion, spec) in [
            ("gemm", "s8", "lincomb", "128x128x32,2x2,auto,1"),
            ("scaled_mm", "s8", "token-channel", "128x128x64,2x2,auto,1"),
            ("awq", "f16", "g128", "moe:sm90"),
            ("moe", "f32", "e8-top2", "moe:sm90"),
            ("conv", "bf16", "lincomb", "128x128x32,2x2,auto,1"),
        ] {
            assert!(fp(op, dtypes, fusion, spec).is_err(), "{op} {dtypes} {spec}");
        }
    }
}
