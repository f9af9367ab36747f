//! SASS (the GPU's machine code) of a CUBIN, disassembled with `cuobjdump -sass` (which
//! needs `nvdisasm` next to it).
//!
//! This works without a GPU, so tests can assert on generated code: that a GEMM mainloop
//! uses `HMMA`/`HGMMA`, that nothing touches local memory (`LDL`/`STL`), and so on.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use crate::toolkit::{Toolkit, ToolkitError};

/// One SASS instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Instruction {
    /// Byte offset within the kernel.
    pub offset: u32,
    /// Guard predicate such as `@P0` or `@!PT`, if any.
    pub predicate: Option<String>,
    /// The full mnemonic with modifiers, e.g. `HMMA.16816.F32.BF16`.
    pub opcode: String,
    /// The operands as printed, without the trailing `;`.
    pub operands: String,
}

impl Instruction {
    /// The mnemonic without modifiers, e.g. `HMMA`.
    pub fn base_opcode(&self) -> &str {
        self.opcode.split('.').next().unwrap_or(&self.opcode)
    }

    /// Whether the mnemonic is `opcode` or `opcode` with modifiers (`"HMMA"` and
    /// `"HMMA.16816"` match `HMMA.16816.F32`, `"HMM"` does not).
    pub fn matches(&self, opcode: &str) -> bool {
        self.opcode
            .strip_prefix(opcode)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    }
}

/// The disassembly of one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SassKernel {
    /// The (possibly mangled) kernel name.
    pub name: String,
    /// The architecture line cuobjdump printed, e.g. `sm_90a`.
    pub arch: String,
    /// Instructions in address order.
    pub instructions: Vec<Instruction>,
}

impl SassKernel {
    /// The full mnemonics, in order.
    pub fn opcodes(&self) -> impl Iterator<Item = &str> {
        self.instructions.iter().map(|i| i.opcode.as_str())
    }

    /// Whether an instruction has this mnemonic: `"HMMA"` matches `HMMA.16816.F32`, and
    /// `"HMMA.16816"` matches it too (a prefix at a `.` boundary).
    pub fn contains_opcode(&self, opcode: &str) -> bool {
        self.instructions.iter().any(|i| i.matches(opcode))
    }

    /// How many instructions match `opcode` (as in [`SassKernel::contains_opcode`]).
    pub fn count_opcode(&self, opcode: &str) -> usize {
        self.instructions.iter().filter(|i| i.matches(opcode)).count()
    }

    /// The innermost loop around an instruction matching `opcode`: the instructions from a
    /// backward branch's target to the branch (`BRA` to a lower address), the shortest such
    /// range that holds a match. Used to count what a mainloop executes per iteration.
    ///
    /// ```
    /// use rcute_kernel::Sass;
    /// let sass = Sass::parse("Function : k\n/*0000*/ MOV R1, R2 ;\n/*0010*/ HMMA.16816.F32 R4, R8, R12, R4 ;\n\
    ///     /*0020*/ IADD3 R1, R1, 0x1, RZ ;\n/*0030*/ @P0 BRA 0x10 ;\n/*0040*/ EXIT ;\n");
    /// let body = sass.kernel("k").unwrap().innermost_loop_with("HMMA").unwrap();
    /// assert_eq!(body.iter().map(|i| i.base_opcode()).collect::<Vec<_>>(), ["HMMA", "IADD3", "BRA"]);
    /// ```
    pub fn innermost_loop_with(&self, opcode: &str) -> Option<&[Instruction]> {
        let ins = &self.instructions;
        let mut best: Option<&[Instruction]> = None;
        for (end, b) in ins.iter().enumerate().filter(|(_, i)| i.base_opcode() == "BRA") {
            let target = b
                .operands
                .split_whitespace()
                .find_map(|w| w.strip_prefix("0x").and_then(|h| u32::from_str_radix(h, 16).ok()));
            let Some(target) = target.filter(|&t| t <= b.offset) else {
                continue;
            };
            let Some(start) = ins.iter().position(|i| i.offset == target) else {
                continue;
            };
            let body = &ins[start..=end];
            if body.iter().any(|i| i.matches(opcode)) && best.is_none_or(|x| body.len() < x.len()) {
                best = Some(body);
            }
        }
        best
    }

    /// Whether the kernel loads or stores local memory (`LDL`/`STL`): spills or
    /// dynamically indexed local arrays.
    pub fn uses_local_memory(&self) -> bool {
        self.contains_opcode("LDL") || self.contains_opcode("STL")
    }
}

/// Why disassembly failed.
#[derive(Debug, thiserror::Error)]
pub enum SassError {
    /// No toolkit was found at all.
    #[error(transparent)]
    Toolkit(#[from] ToolkitError),
    /// The toolkit has no `cuobjdump`.
    #[error("cuobjdump not found (run scripts/setup-cuda.sh, or put it on PATH)")]
    NoCuobjdump,
    /// Writing the temporary file or running the tool failed.
    #[error("running {}: {source}", tool.display())]
    Io {
        /// The tool.
        tool: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `cuobjdump` exited with an error.
    #[error("cuobjdump failed ({status}): {stderr}")]
    Failed {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its error output.
        stderr: String,
    },
}

/// The SASS of every kernel in a CUBIN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sass {
    /// Kernels in the order cuobjdump listed them.
    pub kernels: Vec<SassKernel>,
    /// The raw `cuobjdump -sass` output.
    pub text: String,
}

impl Sass {
    /// Disassembles `cubin` with the located toolkit's `cuobjdump`.
    pub fn disassemble(cubin: &[u8]) -> Result<Sass, SassError> {
        let tool = Toolkit::locate()?.cuobjdump.clone().ok_or(SassError::NoCuobjdump)?;
        Sass::disassemble_with(&tool, cubin)
    }

    /// Disassembles `cubin` with the given `cuobjdump` executable.
    pub fn disassemble_with(cuobjdump: &std::path::Path, cubin: &[u8]) -> Result<Sass, SassError> {
        Ok(Sass::parse(&run_cuobjdump(cuobjdump, "-sass", cubin)?))
    }

    /// Parses `cuobjdump -sass` output.
    pub fn parse(text: &str) -> Sass {
        let mut kernels: Vec<SassKernel> = Vec::new();
        let mut arch = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(a) = trimmed.strip_prefix("code for ") {
                arch = a.trim().to_owned();
            } else if let Some(name) = trimmed.strip_prefix("Function : ") {
                kernels.push(SassKernel {
                    name: name.trim().to_owned(),
                    arch: arch.clone(),
                    instructions: Vec::new(),
                });
            } else if let Some(kernel) = kernels.last_mut() {
                if let Some(inst) = parse_instruction(trimmed) {
                    kernel.instructions.push(inst);
                }
            }
        }
        Sass {
            kernels,
            text: text.to_owned(),
        }
    }

    /// The kernel called `name`.
    pub fn kernel(&self, name: &str) -> Option<&SassKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// Whether any kernel uses `opcode` (see [`SassKernel::contains_opcode`]).
    pub fn contains_opcode(&self, opcode: &str) -> bool {
        self.kernels.iter().any(|k| k.contains_opcode(opcode))
    }

    /// Whether any kernel uses local memory (see [`SassKernel::uses_local_memory`]).
    pub fn uses_local_memory(&self) -> bool {
        self.kernels.iter().any(SassKernel::uses_local_memory)
    }
}

/// Parses `/*0040*/  @!P0 IMAD.WIDE R2, R7, R2, c[0x0][0x160] ;  /* 0x... */`.
fn parse_instruction(line: &str) -> Option<Instruction> {
    let rest = line.strip_prefix("/*")?;
    let (offset, rest) = rest.split_once("*/")?;
    let offset = u32::from_str_radix(offset.trim(), 16).ok()?;
    let (body, _) = rest.split_once(';')?;
    let mut body = body.trim();
    let mut predicate = None;
    if body.starts_with('@') {
        let (p, r) = body.split_once(char::is_whitespace)?;
        predicate = Some(p.to_owned());
        body = r.trim_start();
    }
    let (opcode, operands) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    if opcode.is_empty() {
        return None;
    }
    Some(Instruction {
        offset,
        predicate,
        opcode: opcode.to_owned(),
        operands: operands.trim().to_owned(),
    })
}

/// Runs `cuobjdump <flag>` on `cubin` (written to a temporary file) and returns its
/// standard output.
pub(crate) fn run_cuobjdump(cuobjdump: &std::path::Path, flag: &str, cubin: &[u8]) -> Result<String, SassError> {
    let io = |source| SassError::Io {
        tool: cuobjdump.to_path_buf(),
        source,
    };
    let mut file = tempfile::Builder::new()
        .prefix("rcute-")
        .suffix(".cubin")
        .tempfile()
        .map_err(io)?;
    file.write_all(cubin).map_err(io)?;
    file.flush().map_err(io)?;
    // `cuobjdump -sass` runs `nvdisasm`, looked up on PATH; both sit in the same
    // `bin/` directory of a toolkit or of the pip wheels.
    let mut path: Vec<PathBuf> = cuobjdump.parent().map(|d| d.to_path_buf()).into_iter().collect();
    if let Some(old) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&old));
    }
    let mut cmd = Command::new(cuobjdump);
    if let Ok(joined) = std::env::join_paths(path) {
        cmd.env("PATH", joined);
    }
    let out = cmd.arg(flag).arg(file.path()).output().map_err(io)?;
    if !out.status.success() {
        return Err(SassError::Failed {
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\n\tcode for sm_80\n\t\tFunction : k\n\t.headerflags\t@\"EF_CUDA_SM80\"\n\
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x00000a0000017a02 */\n\
        \t                                                                   /* 0x000fe40000000f00 */\n\
        /*0010*/              @!P0 EXIT ;                                  /* 0x000000000000894d */\n\
        /*0020*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;   /* 0x0000000c0804723c */\n\
        /*0030*/                   STL.64 [R1], R4 ;\n\
        /*0040*/                   BRA 0x40;\n";

    #[test]
    fn parses_instructions() {
        let sass = Sass::parse(SAMPLE);
        let k = sass.kernel("k").unwrap();
        assert_eq!(k.arch, "sm_80");
        let ops: Vec<_> = k.opcodes().collect();
        assert_eq!(ops, ["MOV", "EXIT", "HMMA.16816.F32.BF16", "STL.64", "BRA"]);
        assert_eq!(k.instructions[1].predicate.as_deref(), Some("@!P0"));
        assert_eq!(k.instructions[2].offset, 0x20);
        assert_eq!(k.instructions[2].base_opcode(), "HMMA");
        assert!(k.contains_opcode("HMMA") && k.contains_opcode("HMMA.16816") && !k.contains_opcode("HMM"));
        assert!(k.uses_local_memory());
        assert_eq!(k.count_opcode("BRA"), 1);
    }
}
