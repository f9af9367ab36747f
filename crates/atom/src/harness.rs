//! Wrap a [`Snippet`] into a minimal `__global__` test kernel, for NVRTC compile tests
//! and GPU tests.
//!
//! The kernel is
//! `extern "C" __global__ void rc_test_<name>(uint32_t const* rc_in, uint32_t* rc_out, unsigned char* rc_gmem, void const* rc_tmap)`
//! launched with one block of [`TestKernel::block_threads`] threads:
//!
//! * Register and scalar parameters are read per thread from `rc_in`
//!   (`in_words_per_thread` 32-bit words per thread, parameters in order; 8-byte
//!   scalars take two words, low word first; `bool` and 16-bit scalars one word).
//! * Written register parameters, then the return value, go to `rc_out`
//!   (`out_words_per_thread` words per thread).
//! * Shared-memory parameters get `bytes * block_threads` bytes each (thread `t` passes
//!   its slice at `t * bytes`) inside one shared array of `smem_bytes` bytes that is
//!   loaded from `rc_gmem[0..smem_bytes)` before the call and written back after it.
//! * Global-memory parameters point into `rc_gmem` after the shared mirror (thread `t`
//!   at `smem_bytes + param_offset + t * bytes`); `gmem_bytes` is the total size.
//! * Mbarrier parameters are zeroed `__shared__` 64-bit words; tensor maps are `rc_tmap`.
//! * Template parameters take the snippet's defaults.
//!
//! Extra statements can run before and after the call (e.g. `cp.async` commit and wait),
//! using further snippets given in [`HarnessOptions::extra`].

use crate::arch::Arch;
use crate::snippet::{Dir, ParamTy, Snippet};

/// Extra code around the snippet call.
#[derive(Clone, Debug, Default)]
pub struct HarnessOptions {
    /// Additional snippets the statements call.
    pub extra: Vec<Snippet>,
    /// Statements before the call (after shared memory is loaded).
    pub before: Vec<String>,
    /// Statements after the call (before results are written back).
    pub after: Vec<String>,
}

/// A generated test kernel and how to drive it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestKernel {
    /// The `extern "C"` kernel name.
    pub name: String,
    /// Architecture to compile for.
    pub arch: Arch,
    /// The complete translation unit (includes, snippets, kernel).
    pub source: String,
    /// Threads of the single block.
    pub block_threads: u32,
    /// 32-bit input words per thread in `rc_in`.
    pub in_words_per_thread: usize,
    /// 32-bit output words per thread in `rc_out`.
    pub out_words_per_thread: usize,
    /// Bytes of the shared mirror at the start of `rc_gmem`.
    pub smem_bytes: usize,
    /// Total bytes of `rc_gmem`.
    pub gmem_bytes: usize,
    /// True when the kernel dereferences `rc_tmap`.
    pub uses_tensor_map: bool,
}

fn scalar_words(cty: &str) -> usize {
    match cty {
        "uint64_t" | "int64_t" | "double" => 2,
        _ => 1,
    }
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// The include lines of a set of snippets (deduplicated, `cstdint` first).
pub fn includes(snippets: &[&Snippet]) -> String {
    let mut hs: Vec<&str> = vec!["cstdint"];
    for s in snippets {
        for h in &s.headers {
            if !hs.contains(h) {
                hs.push(h);
            }
        }
    }
    hs.iter()
        .map(|h| {
            if *h == "cstdint" {
                FIXED_WIDTH_INTS.to_string()
            } else {
                format!("#include <{h}>\n")
            }
        })
        .collect()
}

/// `<cstdint>` for nvcc, and the same fixed-width integer names under NVRTC, which ships
/// no C++ standard library headers (identical typedefs may be repeated by CUDA headers).
pub const FIXED_WIDTH_INTS: &str = "#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif
";

/// Wrap `snippet` into a test kernel (see the module documentation).
pub fn test_kernel(snippet: &Snippet) -> TestKernel {
    test_kernel_with(snippet, &HarnessOptions::default())
}

/// How the kernel passes the snippet's parameters: declarations before the call, the
/// call's arguments, the write-back of outputs, and the sizes of the buffers.
#[derive(Default)]
struct Marshal {
    decls: String,
    args: Vec<String>,
    writeback: String,
    in_w: usize,
    out_w: usize,
    smem: usize,
    gmem: usize,
    nmbar: usize,
    uses_tmap: bool,
}

/// The declarations and arguments of every parameter of `snippet` for `threads` threads
/// (see the module documentation for where each kind lives).
fn marshal(snippet: &Snippet, threads: usize) -> Marshal {
    let Marshal {
        mut decls,
        mut args,
        mut writeback,
        mut in_w,
        mut out_w,
        mut smem,
        mut gmem,
        mut nmbar,
        mut uses_tmap,
    } = Marshal::default();
    for (i, p) in snippet.params.iter().enumerate() {
        let v = format!("rc_p{i}");
        match &p.ty {
            ParamTy::Regs { cty, len, dir } => {
                let words = len * scalar_words(cty);
                decls.push_str(&format!("  {cty} {v}[{len}];\n"));
                if *dir != Dir::Out {
                    decls.push_str(&format!(
                        "  for (int w = 0; w < {words}; ++w) reinterpret_cast<uint32_t*>({v})[w] = rc_my_in[{in_w} + w];\n"
                    ));
                    in_w += words;
                } else {
                    decls.push_str(&format!(
                        "  for (int w = 0; w < {words}; ++w) reinterpret_cast<uint32_t*>({v})[w] = 0u;\n"
                    ));
                }
                if *dir != Dir::In {
                    writeback.push_str(&format!(
                        "  for (int w = 0; w < {words}; ++w) rc_my_out[{out_w} + w] = reinterpret_cast<uint32_t const*>({v})[w];\n"
                    ));
                    out_w += words;
                }
                args.push(v);
            }
            ParamTy::Scalar { cty } => {
                let init = match (*cty, scalar_words(cty)) {
                    ("bool", _) => format!("rc_my_in[{in_w}] != 0u"),
                    (_, 2) => format!(
                        "({cty})((uint64_t)rc_my_in[{in_w}] | ((uint64_t)rc_my_in[{}] << 32))",
                        in_w + 1
                    ),
                    _ => format!("({cty})rc_my_in[{in_w}]"),
                };
                decls.push_str(&format!("  {cty} {v} = {init};\n"));
                in_w += scalar_words(cty);
                args.push(v);
            }
            ParamTy::SmemPtr { bytes, .. } | ParamTy::SmemAddr { bytes } => {
                let off = smem;
                smem = align_up(smem + bytes * threads, 128);
                let ptr = format!("(void*)(rc_smem + {off} + rc_tid * {bytes})");
                if matches!(p.ty, ParamTy::SmemAddr { .. }) {
                    decls.push_str(&format!(
                        "  uint32_t {v};\n  asm(\"{{ .reg .u64 rc_t; cvta.to.shared.u64 rc_t, %1; cvt.u32.u64 %0, rc_t; }}\" : \"=r\"({v}) : \"l\"({ptr}));\n"
                    ));
                } else {
                    decls.push_str(&format!("  void* {v} = {ptr};\n"));
                }
                args.push(v);
            }
            ParamTy::GmemPtr { bytes, .. } => {
                let off = gmem;
                gmem = align_up(gmem + bytes * threads, 128);
                decls.push_str(&format!(
                    "  void* {v} = (void*)(rc_gmem + RC_SMEM_BYTES_ + {off} + rc_tid * {bytes});\n"
                ));
                args.push(v);
            }
            ParamTy::Mbarrier => {
                let k = nmbar;
                nmbar += 1;
                decls.push_str(&format!(
                    "  uint32_t {v};\n  asm(\"{{ .reg .u64 rc_t; cvta.to.shared.u64 rc_t, %1; cvt.u32.u64 %0, rc_t; }}\" : \"=r\"({v}) : \"l\"((void*)&rc_mbar[{k}]));\n"
                ));
                args.push(v);
            }
            ParamTy::TensorMap => {
                uses_tmap = true;
                args.push("rc_tmap".into());
            }
        }
    }
    Marshal {
        decls,
        args,
        writeback,
        in_w,
        out_w,
        smem,
        gmem,
        nmbar,
        uses_tmap,
    }
}

/// Wrap `snippet` with extra statements.
pub fn test_kernel_with(snippet: &Snippet, opts: &HarnessOptions) -> TestKernel {
    let threads = snippet.threads.max(1) as usize;
    let kname = format!("rc_test_{}", snippet.name);
    let Marshal {
        decls,
        args,
        writeback,
        in_w,
        mut out_w,
        smem,
        gmem,
        nmbar,
        uses_tmap,
    } = marshal(snippet, threads);
    let smem_words = smem.div_ceil(4).max(1);
    let targs = if snippet.template.is_empty() {
        String::new()
    } else {
        format!(
            "<{}>",
            snippet
                .template
                .iter()
                .map(|(_, _, d)| d.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let call = format!("{}{targs}({})", snippet.name, args.join(", "));
    let call_stmt = match snippet.returns {
        Some(ty) => {
            let w = scalar_words(ty);
            let s = format!(
                "  {ty} rc_ret = {call};\n  {{ uint64_t rc_r = (uint64_t)rc_ret; rc_my_out[{out_w}] = (uint32_t)rc_r;{} }}\n",
                if w == 2 { format!(" rc_my_out[{}] = (uint32_t)(rc_r >> 32);", out_w + 1) } else { String::new() }
            );
            out_w += w;
            s
        }
        None => format!("  {call};\n"),
    };
    let in_stride = in_w.max(1);
    let out_stride = out_w.max(1);
    let mut src = String::new();
    let mut all: Vec<&Snippet> = vec![snippet];
    all.extend(opts.extra.iter());
    src.push_str(&includes(&all));
    src.push('\n');
    for s in opts.extra.iter().filter(|s| s.name != snippet.name) {
        src.push_str(&s.code);
        src.push('\n');
    }
    src.push_str(&snippet.code);
    src.push('\n');
    src.push_str(&format!(
        "extern \"C\" __global__ void {kname}(uint32_t const* __restrict__ rc_in, uint32_t* __restrict__ rc_out, unsigned char* rc_gmem, void const* rc_tmap) {{\n"
    ));
    src.push_str("  const uint32_t rc_tid = threadIdx.x;\n");
    src.push_str(&format!("  uint32_t const* rc_my_in = rc_in + rc_tid * {in_stride};\n"));
    src.push_str(&format!("  uint32_t* rc_my_out = rc_out + rc_tid * {out_stride};\n"));
    src.push_str(&format!(
        "  __shared__ __align__(128) uint32_t rc_smem_words[{smem_words}];\n"
    ));
    src.push_str("  unsigned char* rc_smem = reinterpret_cast<unsigned char*>(rc_smem_words);\n");
    src.push_str(&format!(
        "  __shared__ __align__(8) uint64_t rc_mbar[{}];\n",
        nmbar.max(1)
    ));
    if smem > 0 {
        src.push_str(&format!(
            "  for (uint32_t i = rc_tid; i < {}u; i += blockDim.x) rc_smem_words[i] = reinterpret_cast<uint32_t const*>(rc_gmem)[i];\n",
            smem / 4
        ));
    }
    src.push_str(&format!(
        "  if (rc_tid == 0) {{ for (int i = 0; i < {}; ++i) rc_mbar[i] = 0ull; }}\n",
        nmbar.max(1)
    ));
    src.push_str("  __syncthreads();\n");
    src.push_str(&decls.replace("RC_SMEM_BYTES_", &smem.to_string()));
    for b in &opts.before {
        src.push_str(&format!("  {b}\n"));
    }
    src.push_str(&call_stmt);
    for a in &opts.after {
        src.push_str(&format!("  {a}\n"));
    }
    src.push_str(&writeback);
    src.push_str("  __syncthreads();\n");
    if smem > 0 {
        src.push_str(&format!(
            "  for (uint32_t i = rc_tid; i < {}u; i += blockDim.x) reinterpret_cast<uint32_t*>(rc_gmem)[i] = rc_smem_words[i];\n",
            smem / 4
        ));
    }
    src.push_str("  (void)rc_tmap; (void)rc_my_in; (void)rc_my_out; (void)rc_mbar; (void)rc_smem;\n");
    src.push_str("}\n");
    TestKernel {
        name: kname,
        arch: snippet.arch,
        source: src,
        block_threads: threads as u32,
        in_words_per_thread: in_w,
        out_words_per_thread: out_w,
        smem_bytes: smem,
        gmem_bytes: smem + gmem,
        uses_tensor_map: uses_tmap,
    }
}
