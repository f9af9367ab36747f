//! NVRTC compilation on the CPU: headers found, resources parsed, errors located.

use rcute_kernel::testing::toolkit_for_test;
use rcute_kernel::{compile, nvrtc_version, Arch, CompileError, CompileOptions, Severity};

const KERNELS: &str = include_str!("data/resources.cu");

#[test]
fn compiles_bf16_kernel_for_sm80_and_sm90a() {
    if toolkit_for_test().is_none() {
        return;
    }
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let c = compile(KERNELS, "resources.cu", &CompileOptions::new(arch)).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(c.arch, arch);
        assert_eq!(&c.cubin[..4], b"\x7fELF", "a CUBIN is an ELF image");
        let add = c
            .resources
            .kernel("add_bf16")
            .unwrap_or_else(|| panic!("{arch}: no report in\n{}", c.log));
        assert_eq!(add.arch, arch.as_str());
        assert!((1..=32).contains(&add.registers), "{add:?}");
        assert!(!add.spills() && add.stack_frame_bytes == 0, "{add:?}");
        let local = c.resources.kernel("local_array").unwrap();
        assert_eq!(local.shared_bytes, 1024);
        assert!(local.stack_frame_bytes >= 128, "{local:?}");
        assert!(!c.resources.any_spills(), "{}", c.log);
    }
}

/// The fallback for an NVRTC log without a ptxas report (NVRTC 13.0 on the GPU machine):
/// `cuobjdump -res-usage` on the CUBIN gives the same registers, stack and shared memory.
#[test]
fn cubin_resources_agree_with_the_ptxas_report() {
    use rcute_kernel::ResourceSource;
    let Some(tk) = toolkit_for_test() else { return };
    if tk.cuobjdump.is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI installs cuobjdump");
        eprintln!("skipped: no cuobjdump");
        return;
    }
    for arch in [Arch::Sm75, Arch::Sm80, Arch::Sm90a] {
        let c = compile(KERNELS, "resources.cu", &CompileOptions::new(arch)).unwrap();
        let from_cubin = c.cubin_resources().unwrap();
        assert_eq!(from_cubin.kernels.len(), 2, "{arch}: {from_cubin:?}");
        for k in &from_cubin.kernels {
            assert_eq!(k.source, ResourceSource::Cuobjdump);
            assert_eq!(k.arch, arch.as_str());
            let p = c
                .resources
                .kernel(&k.name)
                .unwrap_or_else(|| panic!("{arch}: no {}", k.name));
            if p.source == ResourceSource::Cuobjdump {
                // This NVRTC gave no ptxas report (NVRTC 13.0 once the driver is
                // initialized): compile() used the CUBIN's.
                assert!(!c.log.contains("ptxas info"), "{}", c.log);
                assert_eq!(c.resources, from_cubin);
                continue;
            }
            assert_eq!(
                (k.registers, k.stack_frame_bytes),
                (p.registers, p.stack_frame_bytes),
                "{arch} {}",
                k.name
            );
            // cuobjdump's SHARED for sm_90 adds 1 KiB to a kernel that uses shared memory.
            let reserved = if arch >= Arch::Sm90 && p.shared_bytes > 0 {
                1024
            } else {
                0
            };
            assert_eq!(k.shared_bytes, p.shared_bytes + reserved, "{arch} {}", k.name);
        }
    }
}

#[test]
fn syntax_error_reports_line_and_column() {
    if toolkit_for_test().is_none() {
        return;
    }
    let src = "extern \"C\" __global__ void k(float* p) {\n\
               \x20 float x = p[0];\n\
               \x20 p[1] = x * undefined_thing;\n\
               }\n";
    let err = compile(src, "broken.cu", &CompileOptions::new(Arch::Sm80)).unwrap_err();
    let CompileError::Compile { diagnostics, log } = &err else {
        panic!("unexpected error {err:?}")
    };
    assert!(log.contains("broken.cu(3)"), "{log}");
    let first = &diagnostics[0];
    assert_eq!(
        (first.line, first.col, first.severity),
        (3, Some(14), Severity::Error),
        "{diagnostics:?}"
    );
    assert!(first.message.contains("undefined_thing"));
    assert_eq!(err.diagnostics().len(), diagnostics.len());
}

#[test]
fn bad_option_and_bad_input_are_typed_errors() {
    if toolkit_for_test().is_none() {
        return;
    }
    let err = compile(
        "__global__ void k() {}",
        "k.cu",
        &CompileOptions::new(Arch::Sm80).with_option("--no-such-option"),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CompileError::Nvrtc {
                call: "nvrtcCompileProgram",
                ..
            }
        ),
        "{err:?}"
    );
    let err = compile("a\0b", "k.cu", &CompileOptions::new(Arch::Sm80)).unwrap_err();
    assert!(matches!(err, CompileError::InvalidInput { what: "source" }), "{err:?}");
}

#[test]
fn defines_and_version() {
    if toolkit_for_test().is_none() {
        return;
    }
    let (major, minor) = nvrtc_version().unwrap();
    assert!(major >= 12 && minor >= 0);
    let src = "#if VALUE != 42\n#error VALUE\n#endif\nextern \"C\" __global__ void k() {}\n";
    let opts = CompileOptions::new(Arch::Sm89)
        .with_define("VALUE", Some("42"))
        .with_line_info(true);
    compile(src, "d.cu", &opts).unwrap();
    assert!(compile(src, "d.cu", &CompileOptions::new(Arch::Sm89)).is_err());
}
