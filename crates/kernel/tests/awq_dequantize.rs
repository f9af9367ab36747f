//! The AWQ dequantization kernel compiles for sm_80 and sm_90a without spills or local
//! memory, converts with LOP3 and stores 16 bytes at a time.

use rcute_atom::Element;
use rcute_kernel::awq_dequantize::{generate, generate_kmajor};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::Arch;

#[test]
fn generated_source_is_deterministic_and_rejects_other_types() {
    assert_eq!(generate(Element::BF16).unwrap(), generate(Element::BF16).unwrap());
    assert!(generate(Element::F32).is_err() && generate_kmajor(Element::F32).is_err());
    for g in [generate(Element::F16).unwrap(), generate_kmajor(Element::F16).unwrap()] {
        for pat in ["+ 0)", "- 0)", "* 1)", ">> 0", "<< 0"] {
            assert!(!g.source.contains(pat), "unfolded {pat:?} in\n{}", g.source);
        }
    }
    let g = generate_kmajor(Element::F16).unwrap();
    if let Some(path) = std::env::var_os("RCUTE_DUMP") {
        std::fs::write(path, &g.source).unwrap();
    }
}

#[test]
fn compiles_without_spills_and_uses_lop3() {
    let Some(tk) = toolkit_for_test() else { return };
    let all = [Element::F16, Element::BF16].map(|e| [generate(e).unwrap(), generate_kmajor(e).unwrap()]);
    for g in all.into_iter().flatten() {
        for arch in [Arch::Sm80, Arch::Sm90a] {
            let ck = compile_clean(tk, &g.name, &g.source, arch);
            let registers = ck.resources.registers;
            // the K-major kernel holds a lane's four columns of eight words (32 registers):
            // at most 80, three blocks of 256 threads an SM
            let most = if g.kmajor { 80 } else { 64 };
            assert!(registers <= most, "{} on {arch}: {registers} registers", g.name);
            if g.kmajor {
                ck.assert_opcodes(&["LOP3", "PRMT", "STG.E.128", "LDG.E.128"], &[]);
            } else {
                ck.assert_opcodes(&["LOP3", "STG.E.128"], &[]);
            }
        }
    }
}
