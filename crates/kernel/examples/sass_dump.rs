//! Developer tool: compile a CUDA source file with NVRTC and print its resource report and
//! SASS. `cargo run -p rcute-kernel --example sass_dump -- FILE.cu [sm_90a|sm_80] [--summary]`
//!
//! stderr gets the NVRTC wall time of the compile (`compile: 0.84 s`), one line of
//! resources per kernel (registers, spills, stack) and the log; `--summary` leaves out
//! the SASS.
use rcute_kernel::nvrtc::{compile, Arch, CompileOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: sass_dump FILE.cu [ARCH] [--summary]");
    let arch = match args.get(2).map(String::as_str) {
        Some("sm_80") => Arch::Sm80,
        _ => Arch::Sm90a,
    };
    let summary = args.iter().any(|a| a == "--summary");
    let src = std::fs::read_to_string(path).expect("read source");
    let t0 = std::time::Instant::now();
    let out = compile(&src, path, &CompileOptions::new(arch)).expect("compile");
    eprintln!(
        "compile: {:.2} s ({path}, {})",
        t0.elapsed().as_secs_f64(),
        arch.as_str()
    );
    for k in &out.resources.kernels {
        eprintln!(
            "{}: {} registers, {} B spill stores, {} B spill loads, {} B stack",
            k.name, k.registers, k.spill_stores_bytes, k.spill_loads_bytes, k.stack_frame_bytes
        );
    }
    if summary {
        return;
    }
    eprintln!("{}", out.log);
    let sass = rcute_kernel::sass::Sass::disassemble(&out.cubin).expect("disassemble");
    println!("{}", sass.text);
}
