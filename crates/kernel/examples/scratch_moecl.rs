use rcute_atom::Element;
use rcute_kernel::gemm_sm90::generate;
use rcute_kernel::grouped_gemm::{sm90_cluster_config, sm90_config, GroupedEpilogue, SM90_TILE};
use rcute_kernel::{compile, Arch, CompileOptions};
fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    if std::env::var("SASS").is_ok() { dump(&std::fs::read_to_string(&which).unwrap(), "rc_moe_grouped_sm90_bf16_swiglu_128x256x64_coop_c2x1_s4"); return; }
    for (cl, ep) in [(true, GroupedEpilogue::SwiGlu), (true, GroupedEpilogue::Scatter), (false, GroupedEpilogue::SwiGlu)] {
        let c = if cl { sm90_cluster_config(Element::BF16, ep, SM90_TILE) } else { sm90_config(Element::BF16, ep, SM90_TILE) };
        let g = generate(&c).unwrap();
        let src = if which.is_empty() { g.source.clone() } else { std::fs::read_to_string(&which).unwrap_or(g.source.clone()) };
        if std::env::var("DUMP").is_ok() { std::fs::write(format!("/tmp/{}.cu", g.name), &g.source).unwrap(); }
        let r = compile(&src, &format!("{}.cu", g.name), &CompileOptions::new(Arch::Sm90a)).unwrap();
        println!("{:?}", r.resources.kernel(&g.name));
    }
}
#[allow(dead_code)]
fn dump(src: &str, name: &str) {
    let tk = rcute_kernel::testing::toolkit_for_test().unwrap();
    let r = compile(src, "x.cu", &CompileOptions::new(Arch::Sm90a)).unwrap();
    let sass = rcute_kernel::Sass::disassemble_with(tk.cuobjdump.as_ref().unwrap(), &r.cubin).unwrap();
    let k = sass.kernel(name).unwrap();
    for (i, ins) in k.instructions.iter().enumerate() { println!("{i} {:?}", ins); }
}
