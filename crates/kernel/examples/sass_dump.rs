//! Developer tool: compile a CUDA source file with NVRTC and print its resource report and
//! SASS. `cargo run -p rcute-kernel --example sass_dump -- FILE.cu [sm_90a|sm_80]`
use rcute_kernel::nvrtc::{compile, Arch, CompileOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: sass_dump FILE.cu [ARCH]");
    let arch = match args.get(2).map(String::as_str) {
        Some("sm_80") => Arch::Sm80,
        _ => Arch::Sm90a,
    };
    let src = std::fs::read_to_string(path).expect("read source");
    let out = compile(&src, path, &CompileOptions::new(arch)).expect("compile");
    eprintln!("{}", out.log);
    let sass = rcute_kernel::sass::Sass::disassemble(&out.cubin).expect("disassemble");
    println!("{}", sass.text);
}
