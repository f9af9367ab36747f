//! `rcute run`: the main job. Generates the catalogue, compiles every unit with NVRTC and
//! prints what was produced (registers, spills, shared memory, key SASS instructions).
//! Verification and benchmarks on a GPU run from `scripts/main.sh` / `scripts/gpu.sh`.

use rcute_kernel::catalogue;
use rcute_kernel::{compile, CompileOptions, Sass, Toolkit};
use std::time::Instant;

/// Options of `rcute run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Skip the SASS disassembly (needs cuobjdump).
    #[arg(long)]
    pub no_sass: bool,
}

/// Run the main job; returns the report and whether every unit compiled cleanly.
pub fn run(args: &RunArgs) -> Result<(String, bool), String> {
    let tk = Toolkit::locate().map_err(|e| format!("NVRTC not found: {e}\n(run scripts/setup-cuda.sh)"))?;
    let mut out = String::new();
    out.push_str(&format!("toolkit: {} ({:?})\n", tk.root.display(), tk.source));
    let t0 = Instant::now();
    let units = catalogue::standard();
    out.push_str(&format!(
        "generated {} units in {:.1} ms\n\n",
        units.len(),
        t0.elapsed().as_secs_f64() * 1e3
    ));
    out.push_str(&format!(
        "{:<40} {:<7} {:>7} {:>10} {:>8} {:>7} {:>9}  {}\n",
        "unit", "arch", "kernels", "compile_ms", "max_regs", "spills", "max_smem", "SASS (expected instructions)"
    ));
    let mut ok = true;
    for k in &units {
        let t = Instant::now();
        let res = compile(&k.source, &format!("{}.cu", k.name), &CompileOptions::new(k.arch));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match res {
            Err(e) => {
                ok = false;
                out.push_str(&format!("{:<40} {:<7} COMPILE ERROR: {e}\n", k.name, k.arch.as_str()));
            }
            Ok(c) => {
                let r = &c.resources.kernels;
                let regs = r.iter().map(|x| x.registers).max().unwrap_or(0);
                let spills: u64 = r
                    .iter()
                    .map(|x| (x.spill_stores_bytes + x.spill_loads_bytes) as u64)
                    .sum();
                let smem = r.iter().map(|x| x.shared_bytes).max().unwrap_or(0);
                if spills > 0 {
                    ok = false;
                }
                let sass = if args.no_sass || tk.cuobjdump.is_none() {
                    "(skipped)".to_string()
                } else {
                    match Sass::disassemble(&c.cubin) {
                        Ok(s) => {
                            let found: Vec<String> = k
                                .expect_sass
                                .iter()
                                .map(|op| format!("{op}{}", if s.contains_opcode(op) { "" } else { "(MISSING)" }))
                                .collect();
                            let local = if s.uses_local_memory() { " LOCAL-MEMORY!" } else { "" };
                            found.join(" ") + local
                        }
                        Err(e) => format!("(cuobjdump failed: {e})"),
                    }
                };
                out.push_str(&format!(
                    "{:<40} {:<7} {:>7} {:>10.0} {:>8} {:>7} {:>9}  {}\n",
                    k.name,
                    k.arch.as_str(),
                    k.kernels,
                    ms,
                    regs,
                    spills,
                    smem,
                    sass
                ));
            }
        }
    }
    Ok((out, ok))
}
