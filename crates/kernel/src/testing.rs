//! Helpers for tests that need NVRTC or a GPU, anywhere in the workspace.
//!
//! Tests call [`toolkit_for_test`] or [`gpu_for_test`] first and return early on `None`, so
//! `cargo test` passes on machines without CUDA while still saying what was skipped. Two
//! environment variables turn a skip into a failure:
//!
//! * `CI` (any value): NVRTC must be available — CI compiles every kernel.
//! * `RCUTE_REQUIRE_GPU=1`: a GPU must be available — set on GPU runners.
//!
//! Tests of generated kernels compile them with [`compile_clean`], which asserts what every
//! kernel must hold (no spills, no stack frame, no local memory), and state what they check
//! of its SASS with [`CleanKernel::assert_opcodes`] and [`CleanKernel::assert_at_most`].
//!
//! Configuration sets that a CPU test (compile, SASS) and a GPU test (results) both cover
//! live here too, so the two lists cannot drift: [`awq_wgmma_split_k_configs`].

use crate::device::Gpu;
use crate::nvrtc::{compile, Arch, CompileOptions, Compiled};
use crate::resources::KernelResources;
use crate::sass::{Instruction, Sass, SassKernel};
use crate::toolkit::Toolkit;

/// Environment variable that makes [`gpu_for_test`] panic instead of skipping.
pub const ENV_REQUIRE_GPU: &str = "RCUTE_REQUIRE_GPU";

/// The located toolkit, or `None` (after printing why) when there is none.
///
/// # Panics
///
/// When `CI` is set and no toolkit is found.
pub fn toolkit_for_test() -> Option<&'static Toolkit> {
    match Toolkit::locate() {
        Ok(tk) => Some(tk),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NVRTC is unavailable: {e}")
        }
        Err(e) => {
            eprintln!("skipping: no NVRTC ({e})");
            None
        }
    }
}

/// GPU 0, or `None` (after printing why) when there is no usable CUDA GPU.
///
/// # Panics
///
/// When `RCUTE_REQUIRE_GPU=1` and no GPU can be opened.
pub fn gpu_for_test() -> Option<Gpu> {
    let reason = match Gpu::open(0) {
        Ok(gpu) => return Some(gpu),
        Err(e) => e.to_string(),
    };
    if std::env::var(ENV_REQUIRE_GPU).is_ok_and(|v| v == "1") {
        panic!("{ENV_REQUIRE_GPU}=1 but no CUDA GPU: {reason}");
    }
    eprintln!("skipping: no CUDA GPU ({reason})");
    None
}

/// A kernel that [`compile_clean`] compiled and checked: the compilation (its log, CUBIN and
/// every kernel's resources), the kernel's resources, and its SASS where `cuobjdump` was
/// found.
pub struct CleanKernel {
    /// The kernel's name.
    pub name: String,
    /// The architecture it was compiled for.
    pub arch: Arch,
    /// The whole compilation.
    pub compiled: Compiled,
    /// The kernel's resources (registers, static shared memory).
    pub resources: KernelResources,
    /// The kernel's SASS; `None` without `cuobjdump`.
    pub sass: Option<SassKernel>,
}

/// Compile `source` for `arch` and assert what every generated kernel must hold: it
/// compiles (else panic with the error and the source), ptxas reports its kernel `name`,
/// with no spilled registers and no stack frame, and (where `cuobjdump` is found) no
/// kernel of the CUBIN loads or stores local memory (LDL / STL). Prints the registers; with
/// `RCUTE_DUMP=DIR` writes the SASS to `DIR/NAME.ARCH.sass`.
///
/// # Panics
///
/// On any of those failures.
pub fn compile_clean(tk: &Toolkit, name: &str, source: &str, arch: Arch) -> CleanKernel {
    let compiled = compile(source, &format!("{name}.cu"), &CompileOptions::new(arch))
        .unwrap_or_else(|e| panic!("{name} does not compile for {arch}: {e}\n{source}"));
    let resources = compiled
        .resources
        .kernel(name)
        .unwrap_or_else(|| panic!("{name} on {arch}: no resources in\n{}", compiled.log))
        .clone();
    assert!(
        !resources.spills() && resources.stack_frame_bytes == 0,
        "{name} on {arch}: spills or a stack frame: {resources:?}"
    );
    eprintln!(
        "{name} on {arch}: {} registers, {} B static smem",
        resources.registers, resources.shared_bytes
    );
    let sass = tk.cuobjdump.as_ref().map(|objdump| {
        let sass = Sass::disassemble_with(objdump, &compiled.cubin).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!sass.uses_local_memory(), "{name} on {arch}: local memory (LDL / STL)");
        if let Some(dir) = std::env::var_os("RCUTE_DUMP") {
            let path = std::path::Path::new(&dir).join(format!("{name}.{arch}.sass"));
            std::fs::write(path, &sass.text).unwrap();
        }
        sass.kernel(name)
            .unwrap_or_else(|| panic!("{name} on {arch}: not in the SASS"))
            .clone()
    });
    CleanKernel {
        name: name.to_string(),
        arch,
        compiled,
        resources,
        sass,
    }
}

impl CleanKernel {
    /// Assert, where the SASS is known, that the kernel has an instruction of every opcode
    /// in `has` and none of those in `lacks` (matched as [`SassKernel::contains_opcode`]
    /// does: `"HMMA"` matches `HMMA.16816.F32`).
    ///
    /// # Panics
    ///
    /// At the first opcode that is missing or present against the lists.
    pub fn assert_opcodes(&self, has: &[&str], lacks: &[&str]) {
        let Some(k) = &self.sass else { return };
        for op in has {
            assert!(k.contains_opcode(op), "{} on {}: no {op}", self.name, self.arch);
        }
        for op in lacks {
            assert!(!k.contains_opcode(op), "{} on {}: {op}", self.name, self.arch);
        }
    }

    /// Assert, where the SASS is known, that the kernel has at most `most` instructions
    /// matching `opcode`.
    ///
    /// # Panics
    ///
    /// When it has more.
    pub fn assert_at_most(&self, opcode: &str, most: usize) {
        let Some(k) = &self.sass else { return };
        let n = k.count_opcode(opcode);
        assert!(
            n <= most,
            "{} on {}: {n} {opcode}, at most {most}",
            self.name,
            self.arch
        );
    }

    /// The kernel's instructions before its grid-dependency wait (`ACQBULK`), after
    /// asserting that an L2 prefetch (`CCTL.PF2`) is among them; `None` without the SASS.
    ///
    /// # Panics
    ///
    /// Without a wait, or without a prefetch before it.
    pub fn before_wait_with_l2_prefetch(&self) -> Option<&[Instruction]> {
        let ins = &self.sass.as_ref()?.instructions;
        let wait = ins
            .iter()
            .position(|i| i.base_opcode() == "ACQBULK")
            .unwrap_or_else(|| panic!("{} on {}: no ACQBULK", self.name, self.arch));
        let head = &ins[..wait];
        assert!(
            head.iter()
                .any(|i| i.base_opcode() == "CCTL" && i.opcode.contains("PF2")),
            "{} on {}: no L2 prefetch (CCTL.PF2) before ACQBULK: {:?}",
            self.name,
            self.arch,
            head.iter().map(|i| i.opcode.as_str()).collect::<Vec<_>>()
        );
        Some(head)
    }
}

/// Assert that no instruction of `body` matches an opcode of `bad`
/// ([`Instruction::matches`]); `what` says where, in the failure.
///
/// # Panics
///
/// At the first such instruction.
pub fn assert_none_in(body: &[Instruction], bad: &[&str], what: &str) {
    for op in bad {
        let hit = body.iter().find(|i| i.matches(op));
        assert!(hit.is_none(), "{what}: {}", hit.map_or("", |i| i.opcode.as_str()));
    }
}

/// The split-K SM90 mixed-input AWQ configurations (`AwqGemmConfig::split_k`) that the
/// kernel crate's compile test and the GPU reference test both cover: 8, 16, 32, 64 tokens
/// on one consumer warpgroup, 16 tokens on two along N, 128 on two splitting the words, 32
/// with a raster of 2; `ops::awq::select_split`'s tiles (16, 32, 48, 64 tokens on two
/// warpgroups splitting the words; 128 is above); and 16, 32, 64, 80 tokens on four
/// warpgroups splitting the words (one word each: 2-column partial and output stores);
/// and built for two resident CTAs an SM (`AwqGemmConfig::resident`): 16 (batched), 32 and
/// 48 tokens (word by word) on two warpgroups splitting the words, 32 (batched) and 64
/// (word by word) on one.
///
/// ```
/// use rcute_kernel::testing::awq_wgmma_split_k_configs;
/// let v = awq_wgmma_split_k_configs(rcute_atom::Element::F16);
/// assert!(v.len() == 20 && v.iter().all(|c| c.wgmma && c.split_k));
/// assert_eq!(v.iter().filter(|c| c.ctas_per_sm == 2).count(), 5);
/// ```
pub fn awq_wgmma_split_k_configs(e: rcute_atom::Element) -> Vec<crate::awq_gemm::AwqGemmConfig> {
    use crate::awq_gemm::AwqGemmConfig;
    let sk = |tile: [i64; 3], warps: [i64; 2], stages: usize| {
        AwqGemmConfig::new(e, tile, warps, stages, 4).wgmma().split_k()
    };
    vec![
        sk([8, 256, 64], [1, 1], 8),
        sk([16, 256, 64], [1, 1], 8),
        sk([32, 256, 64], [1, 1], 8),
        sk([64, 256, 64], [1, 1], 8),
        sk([16, 512, 64], [1, 2], 6),
        sk([128, 256, 64], [2, 1], 6),
        sk([32, 256, 64], [1, 1], 6).raster(2),
        sk([16, 256, 64], [2, 1], 8),
        sk([32, 256, 64], [2, 1], 6),
        sk([48, 256, 64], [2, 1], 8),
        sk([64, 256, 64], [2, 1], 6),
        sk([16, 256, 64], [4, 1], 8),
        sk([32, 256, 64], [4, 1], 8),
        sk([64, 256, 64], [4, 1], 6),
        sk([80, 256, 64], [4, 1], 6),
        sk([16, 256, 64], [2, 1], 8).resident(2),
        sk([32, 256, 64], [2, 1], 6).resident(2),
        sk([48, 256, 64], [2, 1], 6).resident(2),
        sk([64, 256, 64], [1, 1], 6).resident(2),
        sk([32, 256, 64], [1, 1], 8).resident(2),
    ]
}

/// SM90 mixed-input kernels on the checkpoint's `qweight`
/// (`AwqGemmConfig::wgmma_checkpoint`) that the compile and GPU tests cover: the unprepared
/// op's split-K tiles (16, 32, 48, 64, 80 and 128 tokens, two warpgroups splitting the words),
/// four words a warpgroup (8 tokens, one consumer), two boxes a stage (two warpgroups along
/// N), the one-split kernels of 64 tokens (one consumer warpgroup, 6 and the rule's 8
/// stages), of 16 and 32 tokens (the rule's 9 to 32 rows of a weight too wide for 2 splits) and of
/// 128, 152, 184 and 192 tokens (two warpgroups splitting the words), the chained steps
/// (split-K 16 tokens; one split 64 tokens on two warpgroups, the prepared op's at 97 to
/// 128 rows, forced only on the checkpoint's words),
/// and split-K kernels built for two resident CTAs an SM (`AwqGemmConfig::resident`: 32 and
/// 48 tokens on two warpgroups, 64 on one).
///
/// ```
/// use rcute_kernel::testing::awq_wgmma_checkpoint_configs;
/// let v = awq_wgmma_checkpoint_configs(rcute_atom::Element::F16);
/// assert!(v.len() == 21 && v.iter().all(|c| c.wgmma && !c.prepared && c.b_vector_words == 1));
/// ```
pub fn awq_wgmma_checkpoint_configs(e: rcute_atom::Element) -> Vec<crate::awq_gemm::AwqGemmConfig> {
    use crate::awq_gemm::AwqGemmConfig;
    let ck = |tile: [i64; 3], warps: [i64; 2], stages: usize| {
        AwqGemmConfig::new(e, tile, warps, stages, 4).wgmma_checkpoint()
    };
    vec![
        ck([16, 256, 64], [2, 1], 8).split_k(),
        ck([8, 256, 64], [1, 1], 8).split_k(),
        ck([16, 512, 64], [1, 2], 6).split_k(),
        ck([32, 256, 64], [2, 1], 6).split_k(),
        ck([64, 256, 64], [1, 1], 6),
        ck([16, 256, 64], [2, 1], 8).split_k().chained(),
        ck([48, 256, 64], [2, 1], 8).split_k(),
        ck([64, 256, 64], [2, 1], 6).split_k(),
        ck([80, 256, 64], [2, 1], 6).split_k(),
        ck([128, 256, 64], [2, 1], 6).split_k(),
        ck([16, 256, 64], [2, 1], 8),
        ck([32, 256, 64], [2, 1], 6),
        ck([64, 256, 64], [1, 1], 8),
        ck([64, 256, 64], [2, 1], 6).chained(),
        ck([128, 256, 64], [2, 1], 6),
        ck([152, 256, 64], [2, 1], 7),
        ck([184, 256, 64], [2, 1], 6),
        ck([192, 256, 64], [2, 1], 6),
        ck([32, 256, 64], [2, 1], 6).split_k().resident(2),
        ck([48, 256, 64], [2, 1], 6).split_k().resident(2),
        ck([64, 256, 64], [1, 1], 6).split_k().resident(2),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> CleanKernel {
        let sass = Sass::parse(text).kernel("k").cloned();
        CleanKernel {
            name: "k".into(),
            arch: Arch::Sm80,
            compiled: Compiled::new(Arch::Sm80, Vec::new(), String::new()),
            resources: KernelResources::default(),
            sass,
        }
    }

    const K: &str = "Function : k\n/*0000*/ HMMA.16816.F32 R4, R8, R12, R4 ;\n\
        /*0010*/ HMMA.16816.F32 R4, R8, R12, R4 ;\n/*0020*/ BAR.SYNC.DEFER_BLOCKING 0x0 ;\n/*0030*/ EXIT ;\n";

    #[test]
    fn opcode_checks_pass_on_what_the_kernel_holds() {
        let k = parsed(K);
        k.assert_opcodes(&["HMMA", "HMMA.16816", "BAR"], &["LDSM", "HMM"]);
        k.assert_at_most("HMMA", 2);
    }

    #[test]
    #[should_panic(expected = "k on sm_80: no LDSM")]
    fn a_missing_opcode_fails() {
        parsed(K).assert_opcodes(&["HMMA", "LDSM"], &[]);
    }

    #[test]
    #[should_panic(expected = "k on sm_80: BAR")]
    fn a_present_opcode_fails() {
        parsed(K).assert_opcodes(&[], &["BAR"]);
    }

    #[test]
    fn the_head_before_the_wait_holds_the_prefetch() {
        let k = parsed(
            "Function : k\n/*0000*/ CCTL.E.PF2 [R2] ;\n/*0010*/ LDG.E.STRONG.GPU R4, [R2.64] ;\n\
             /*0020*/ ACQBULK ;\n/*0030*/ STG.E [R2.64], R4 ;\n/*0040*/ EXIT ;\n",
        );
        let head = k.before_wait_with_l2_prefetch().unwrap();
        assert_eq!(head.len(), 2);
        assert_none_in(head, &["STG", "LDGSTS"], "k");
        let r = std::panic::catch_unwind(|| assert_none_in(head, &["LDG"], "k before the wait"));
        assert!(r.is_err(), "an LDG before the wait passed");
        let none = parsed("Function : k\n/*0000*/ LDG.E R4, [R2.64] ;\n/*0010*/ ACQBULK ;\n");
        assert!(std::panic::catch_unwind(|| none.before_wait_with_l2_prefetch().map(<[_]>::len)).is_err());
    }

    #[test]
    #[should_panic(expected = "k on sm_80: 2 HMMA, at most 1")]
    fn too_many_fail() {
        parsed(K).assert_at_most("HMMA", 1);
    }
}
