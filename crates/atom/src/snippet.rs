//! CUDA C++ device snippets: the one place where inline PTX lives.
//!
//! Every atom (MMA, copy, synchronization) renders as a [`Snippet`]: one
//! `__device__ __forceinline__` function with an `asm volatile(...)` body, the GPU
//! architecture it needs, the CUDA headers it includes, and a description of its
//! parameters ([`Param`]) so that [`crate::harness`] can wrap it into a test kernel.

use crate::arch::Arch;

/// Whether a parameter is read, written or both by the snippet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Read only.
    In,
    /// Written only.
    Out,
    /// Read and written (accumulators).
    InOut,
}

/// The C++ type and role of a snippet parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamTy {
    /// A register fragment `T (&name)[len]` of 4- or 8-byte scalars (`uint32_t`,
    /// `float`, `uint64_t`, `int32_t`).
    Regs { cty: &'static str, len: usize, dir: Dir },
    /// A scalar passed by value (`uint32_t`, `uint64_t`, `int`, `bool`, ...).
    Scalar { cty: &'static str },
    /// A generic pointer into shared memory (`void*` / `void const*`) to `bytes` bytes.
    SmemPtr { bytes: usize, constant: bool },
    /// A 32-bit shared-state-space address (`uint32_t`) of `bytes` bytes.
    SmemAddr { bytes: usize },
    /// A pointer into global memory (`void*` / `void const*`) to `bytes` bytes.
    GmemPtr { bytes: usize, constant: bool },
    /// The shared address (`uint32_t`) of a 64-bit mbarrier object.
    Mbarrier,
    /// A pointer (`void const*`) to a 64-byte aligned `CUtensorMap` in global memory.
    TensorMap,
}

/// One parameter of a snippet function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    /// The C++ parameter name.
    pub name: String,
    /// Its type and role.
    pub ty: ParamTy,
}

impl Param {
    /// A register fragment parameter.
    pub fn regs(name: &str, cty: &'static str, len: usize, dir: Dir) -> Param {
        Param {
            name: name.into(),
            ty: ParamTy::Regs { cty, len, dir },
        }
    }
    /// A by-value scalar.
    pub fn scalar(name: &str, cty: &'static str) -> Param {
        Param {
            name: name.into(),
            ty: ParamTy::Scalar { cty },
        }
    }
    /// A parameter of the given type.
    pub fn new(name: &str, ty: ParamTy) -> Param {
        Param { name: name.into(), ty }
    }
    /// The declaration in a C++ parameter list.
    pub fn decl(&self) -> String {
        let n = &self.name;
        match &self.ty {
            ParamTy::Regs { cty, len, dir } => {
                let c = if *dir == Dir::In { " const" } else { "" };
                format!("{cty}{c} (&{n})[{len}]")
            }
            ParamTy::Scalar { cty } => format!("{cty} {n}"),
            ParamTy::SmemPtr { constant, .. } | ParamTy::GmemPtr { constant, .. } => {
                format!("void{} *{n}", if *constant { " const" } else { "" })
            }
            ParamTy::SmemAddr { .. } | ParamTy::Mbarrier => format!("uint32_t {n}"),
            ParamTy::TensorMap => format!("void const *{n}"),
        }
    }
}

/// A self-contained CUDA C++ device function with inline PTX.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Snippet {
    /// The function name (`rc_...`).
    pub name: String,
    /// The architecture it needs.
    pub arch: Arch,
    /// Headers it includes (`cstdint`, `cuda_fp16.h`, ...).
    pub headers: Vec<&'static str>,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// Template parameters `(type, name, default value used by the harness)`, e.g.
    /// `("int", "N", "0")` for `cp.async.wait_group N`.
    pub template: Vec<(&'static str, &'static str, String)>,
    /// Threads that must execute it together (1, a warp of 32, or a warpgroup of 128).
    pub threads: u32,
    /// The return type, `None` for `void`.
    pub returns: Option<&'static str>,
    /// The function definition.
    pub code: String,
}

impl Snippet {
    /// Build a snippet from its signature and body; the definition is rendered here so
    /// that all snippets share one style.
    pub fn build(name: impl Into<String>, arch: Arch, threads: u32, params: Vec<Param>, body: &str) -> Snippet {
        Snippet::build_template(name, arch, threads, params, vec![], body)
    }

    /// Like [`Snippet::build`] with template parameters.
    pub fn build_template(
        name: impl Into<String>,
        arch: Arch,
        threads: u32,
        params: Vec<Param>,
        template: Vec<(&'static str, &'static str, String)>,
        body: &str,
    ) -> Snippet {
        let name = name.into();
        let mut code = String::new();
        if !template.is_empty() {
            let t: Vec<String> = template.iter().map(|(ty, n, _)| format!("{ty} {n}")).collect();
            code.push_str(&format!("template <{}>\n", t.join(", ")));
        }
        let decls: Vec<String> = params.iter().map(Param::decl).collect();
        code.push_str(&format!(
            "__device__ __forceinline__ void {name}({}) {{\n",
            decls.join(", ")
        ));
        // (the return type is patched by `returning`)
        for line in body.trim_end().lines() {
            if line.is_empty() {
                code.push('\n');
            } else {
                code.push_str("  ");
                code.push_str(line);
                code.push('\n');
            }
        }
        code.push_str("}\n");
        Snippet {
            name,
            arch,
            headers: vec!["cstdint"],
            params,
            template,
            threads,
            returns: None,
            code,
        }
    }

    /// Make the function return a value of type `ty` (the body must `return` it).
    pub fn returning(mut self, ty: &'static str) -> Snippet {
        self.code = self.code.replacen(
            &format!("__device__ __forceinline__ void {}(", self.name),
            &format!("__device__ __forceinline__ {ty} {}(", self.name),
            1,
        );
        self.returns = Some(ty);
        self
    }

    /// The `#include` lines and the definition: a complete translation unit fragment.
    pub fn source(&self) -> String {
        let mut s = String::new();
        for h in &self.headers {
            s.push_str(&format!("#include <{h}>\n"));
        }
        s.push('\n');
        s.push_str(&self.code);
        s
    }
}

/// A C++ string literal line of an `asm` template (with `\n` appended inside the literal).
pub(crate) fn asm_line(s: &str) -> String {
    format!("\"{s}\\n\"")
}

/// `{%a, %b, ...}` operand lists for a range of asm operand numbers.
pub(crate) fn operand_list(start: usize, n: usize) -> String {
    let v: Vec<String> = (start..start + n).map(|i| format!("%{i}")).collect();
    format!("{{{}}}", v.join(", "))
}

/// Asm operand bindings `"<c>"(name[0]), ...` for an array.
pub(crate) fn bind_array(constraint: &str, name: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("\"{constraint}\"({name}[{i}])")).collect()
}

/// Join asm operand bindings, wrapping long lists.
pub(crate) fn join_bindings(v: &[String]) -> String {
    let mut out = String::new();
    for (i, b) in v.iter().enumerate() {
        if i > 0 {
            out.push_str(if i % 8 == 0 { ",\n      " } else { ", " });
        }
        out.push_str(b);
    }
    out
}

/// Render an `asm volatile` statement with the given template lines, outputs, inputs and
/// whether it clobbers memory.
pub(crate) fn asm_stmt(lines: &[String], outputs: &[String], inputs: &[String], memory: bool) -> String {
    let mut s = String::from("asm volatile(\n");
    for l in lines {
        s.push_str("    ");
        s.push_str(&asm_line(l));
        s.push('\n');
    }
    s.push_str("    : ");
    s.push_str(&join_bindings(outputs));
    s.push_str("\n    : ");
    s.push_str(&join_bindings(inputs));
    if memory {
        s.push_str("\n    : \"memory\"");
    }
    s.push_str(");\n");
    s
}

/// A statement converting the generic pointer `ptr` into the 32-bit shared address
/// `var` with `cvta.to.shared` (no CUDA intrinsics needed).
pub(crate) fn smem_cvt(var: &str, ptr: &str) -> String {
    format!(
        "uint32_t {var};\nasm(\"{{ .reg .u64 rc_t; cvta.to.shared.u64 rc_t, %1; cvt.u32.u64 %0, rc_t; }}\" : \"=r\"({var}) : \"l\"({ptr}));\n"
    )
}
