use rcute_kernel::{compile, Arch, CompileOptions};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let src = std::fs::read_to_string(&a[1]).unwrap();
    let arch = if a[2] == "sm80" { Arch::Sm80 } else { Arch::Sm90a };
    let c = compile(&src, "x.cu", &CompileOptions::new(arch)).unwrap();
    for k in &c.resources.kernels { eprintln!("{:?}", k); }
    std::fs::write(&a[3], &c.cubin).unwrap();
}
