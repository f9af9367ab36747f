//! SASS inspection with cuobjdump (no GPU needed).

use rcute_kernel::testing::toolkit_for_test;
use rcute_kernel::{compile, Arch, CompileOptions, Sass};

fn toolkit_with_cuobjdump() -> bool {
    match toolkit_for_test() {
        Some(tk) if tk.cuobjdump.is_some() => true,
        Some(_) if std::env::var_os("CI").is_some() => panic!("CI is set but cuobjdump is missing"),
        Some(_) => {
            eprintln!("skipping: no cuobjdump");
            false
        }
        None => false,
    }
}

const MMA: &str = r#"
extern "C" __global__ void mma_bf16(const unsigned* a, const unsigned* b, float* d) {
    unsigned a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], b0 = b[0], b1 = b[1];
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    d[threadIdx.x * 4 + 0] = c0; d[threadIdx.x * 4 + 1] = c1;
    d[threadIdx.x * 4 + 2] = c2; d[threadIdx.x * 4 + 3] = c3;
}
"#;

#[test]
fn mma_sync_shows_hmma_on_sm80() {
    if !toolkit_with_cuobjdump() {
        return;
    }
    let c = compile(MMA, "mma.cu", &CompileOptions::new(Arch::Sm80)).unwrap();
    let sass = Sass::disassemble(&c.cubin).unwrap();
    let k = sass.kernel("mma_bf16").unwrap_or_else(|| panic!("{}", sass.text));
    assert_eq!(k.arch, "sm_80");
    assert!(k.contains_opcode("HMMA"), "{}", sass.text);
    assert!(
        k.opcodes().any(|o| o.starts_with("HMMA.16816.F32.BF16")),
        "{}",
        sass.text
    );
    assert!(!k.uses_local_memory());
}

#[test]
fn runtime_indexed_local_array_shows_ldl_stl_on_sm90a() {
    if !toolkit_with_cuobjdump() {
        return;
    }
    let c = compile(
        include_str!("data/resources.cu"),
        "resources.cu",
        &CompileOptions::new(Arch::Sm90a),
    )
    .unwrap();
    let sass = Sass::disassemble(&c.cubin).unwrap();
    let local = sass.kernel("local_array").unwrap_or_else(|| panic!("{}", sass.text));
    assert_eq!(local.arch, "sm_90a");
    assert!(
        local.contains_opcode("STL") && local.contains_opcode("LDL"),
        "{}",
        sass.text
    );
    assert!(!sass.kernel("add_bf16").unwrap().uses_local_memory());
    assert!(sass.uses_local_memory());
}

#[test]
fn garbage_cubin_is_an_error_not_a_panic() {
    if !toolkit_with_cuobjdump() {
        return;
    }
    match Sass::disassemble(b"not an elf file") {
        Err(_) => {}
        Ok(s) => assert!(s.kernels.is_empty()),
    }
}
