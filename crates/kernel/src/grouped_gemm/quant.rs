//! Per-row dynamic FP8 quantization in front of the SM90 FP8 grouped GEMMs: padded row `m
//! < total_rows` of the alignment becomes e4m3 `q[m] = round(src[m] / s[m])` with `s[m] =
//! max |src[m]| / 448` (e4m3's largest finite value; a zero row gets `s = 0` and zeros).
//! [`QuantSource::Gather`] (GEMM1) reads token row `x[sorted_ids[m] / topk]`, so the
//! gather of the token rows and their per-token scale are one pass (padding rows, where
//! `sorted_ids[m] == entries`, are zeros); [`QuantSource::Rows`] (GEMM2) reads row `m` of
//! GEMM1's SwiGLU output. Rows at or past the device scalar `total_rows` are not touched
//! (the grid is the capacity; nothing waits for the host).
//!
//! One CTA of [`THREADS`] threads per row: a max reduction over 8-element vectors (warp
//! shuffles, then one value per warp in shared memory, combined in a fixed order), then
//! the conversion (round to nearest even, saturating) of the same vectors. Deterministic.
//!
//! ```
//! use rcute_kernel::grouped_gemm::quant::{generate, QuantSource};
//! let g = generate(rcute_atom::Element::BF16, QuantSource::Gather).unwrap();
//! assert_eq!(g.name, "rc_moe_quant_e4m3_bf16_gather");
//! assert!(g.source.contains("__nv_cvt_float2_to_fp8x2"));
//! ```

use super::GroupedGemmError;
use crate::emit::{unit_preamble, Item, Unit};
use crate::launch::{Function, KernelArgs, LaunchConfig};
use rcute_atom::Element;

/// Threads per CTA (8 warps).
pub const THREADS: u32 = 256;

/// e4m3's largest finite magnitude: a row's absmax maps to it.
pub const E4M3_MAX: f32 = 448.0;

/// Where a quantized row comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantSource {
    /// Token row `sorted_ids[m] / topk` of `x [T, K]` (GEMM1's A, gathered).
    Gather,
    /// Row `m` of a dense `[rows, K]` matrix in padded-row order (GEMM2's A).
    Rows,
}

impl QuantSource {
    fn tag(self) -> &'static str {
        match self {
            QuantSource::Gather => "gather",
            QuantSource::Rows => "rows",
        }
    }
}

/// The generated quantize kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedMoeQuant {
    /// `rc_moe_quant_e4m3_<type>_<gather|rows>`.
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
    /// Where its rows come from.
    pub src: QuantSource,
}

/// Arguments of a quantize launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoeQuantArgs {
    /// The source: `x [T, K]` (gather) or `[rows, K]` (rows), row-major with `ld`.
    pub src: u64,
    /// e4m3 `q [rows, K]`, dense.
    pub q: u64,
    /// f32 `scale [rows]`.
    pub scale: u64,
    /// The alignment's `sorted_ids [rows]` (gather only).
    pub sorted_ids: u64,
    /// The alignment's `total_rows [1]` (rows only: 0 quantizes all `rows` rows).
    pub total_rows: u64,
    /// The alignment's capacity (grid).
    pub rows: i32,
    /// `K`, a multiple of 16.
    pub k: i32,
    /// The source's leading dimension (a multiple of 8).
    pub ld: i64,
    /// Routed entries `T * topk` (the padding sentinel; gather only).
    pub entries: i32,
    /// `topk` (gather only).
    pub topk: i32,
}

/// Generates the quantize kernel of bf16 or f16 rows.
pub fn generate(element: Element, src: QuantSource) -> Result<GeneratedMoeQuant, GroupedGemmError> {
    let (t, t2, to_f2) = match element {
        Element::BF16 => ("__nv_bfloat16", "__nv_bfloat162", "__bfloat1622float2"),
        Element::F16 => ("__half", "__half2", "__half22float2"),
        other => {
            return Err(GroupedGemmError::Config(format!(
                "e4m3 quantization of {other} rows (bf16 or f16)"
            )))
        }
    };
    let name = format!("rc_moe_quant_e4m3_{}_{}", element.ptx(), src.tag());
    let row = match src {
        QuantSource::Gather => {
            "  const int entry = __ldg(sorted_ids + m);  // the routed entry t * topk + j; `entries` in padding rows\n  \
             if (entry >= entries) {  // padding row: zeros, scale 0\n    \
             for (int v = threadIdx.x; v < K / 16; v += THREADS) reinterpret_cast<uint4*>(q + (long long)m * K)[v] = make_uint4(0u, 0u, 0u, 0u);\n    \
             if (threadIdx.x == 0) scale[m] = 0.0f;\n    return;\n  }\n  \
             const uint4* const s = reinterpret_cast<const uint4*>(src + (long long)(entry / topk) * ld);  // x (T,K):(ld,1), the token row\n"
        }
        QuantSource::Rows => {
            "  const uint4* const s = reinterpret_cast<const uint4*>(src + (long long)m * ld);  // src (rows,K):(ld,1)\n"
        }
    };
    let code = format!(
        r#"#define THREADS {THREADS}
// q[m] = e4m3(src_row / s), s = max|src_row| / {E4M3_MAX:.1} (a zero row: s = 0, zeros), for padded rows m < total_rows.
extern "C" __global__ __launch_bounds__(THREADS) void {name}(
    const {t}* __restrict__ src, unsigned char* __restrict__ q, float* __restrict__ scale,
    const int* __restrict__ sorted_ids, const int* __restrict__ total_rows,
    int K, long long ld, int entries, int topk) {{
  __shared__ float warp_max[THREADS / 32];
  const int m = blockIdx.x;
  if (total_rows != nullptr && m >= __ldg(total_rows)) return;  // rows past this routing's padded rows are never read
{row}  // pass 1: the row's absmax over 8-element (16-byte) vectors
  float amax = 0.0f;
  for (int v = threadIdx.x; v < K / 8; v += THREADS) {{
    const uint4 u = __ldg(s + v);
    const {t2}* p = reinterpret_cast<const {t2}*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {{
      const float2 f = {to_f2}(p[i]);
      amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
    }}
  }}
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float inv = amax > 0.0f ? {E4M3_MAX:.1}f / amax : 0.0f;
  if (threadIdx.x == 0) scale[m] = amax / {E4M3_MAX:.1}f;
  // pass 2: the same vectors scaled and rounded (nearest even, saturating) to 8 bytes of e4m3
  uint2* const out = reinterpret_cast<uint2*>(q + (long long)m * K);  // q (rows,K):(K,1)
  for (int v = threadIdx.x; v < K / 8; v += THREADS) {{
    const uint4 u = __ldg(s + v);
    const {t2}* p = reinterpret_cast<const {t2}*>(&u);
    unsigned short b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {{
      float2 f = {to_f2}(p[i]);
      f.x *= inv;
      f.y *= inv;
      b[i] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
    }}
    out[v] = make_uint2((unsigned)b[0] | ((unsigned)b[1] << 16), (unsigned)b[2] | ((unsigned)b[3] << 16));
  }}
}}
#undef THREADS
"#
    );
    let mut items = unit_preamble(&[], "#include <cuda_fp8.h>\n");
    items.push(Item::Snippet {
        origin: "rcute MoE e4m3 row quantization".into(),
        code,
    });
    let unit = Unit {
        header: vec![
            format!(
                "{name}: per-row dynamic e4m3 quantization of the MoE alignment's padded rows ({} source)",
                src.tag()
            ),
            "Generated by rcute (crates/kernel/src/grouped_gemm/quant.rs); do not edit.".into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedMoeQuant {
        name,
        source: unit.render(),
        src,
    })
}

impl GeneratedMoeQuant {
    /// Checks the sizes: positive, `K % 16 == 0` (16-byte vectors, and TMA rows of whole 16 bytes),
    /// `ld >= K` a multiple of 8, 16-byte aligned `src` and `q`, 4-byte aligned `scale`,
    /// the alignment's pointers set (gather: `sorted_ids`, `entries` and `topk` too).
    pub fn check(&self, a: &MoeQuantArgs) -> Result<(), GroupedGemmError> {
        let err = |s: String| Err(GroupedGemmError::Args(s));
        if a.rows < 1 || a.k < 16 || a.k % 16 != 0 {
            return err(format!("quantize rows={} K={} (a multiple of 16)", a.rows, a.k));
        }
        if a.ld < i64::from(a.k) || a.ld % 8 != 0 {
            return err(format!("ld = {} (at least K, a multiple of 8)", a.ld));
        }
        if !a.src.is_multiple_of(16) || !a.q.is_multiple_of(16) || !a.scale.is_multiple_of(4) || a.scale == 0 {
            return err("src and q must be 16-byte aligned, scale 4-byte aligned and set".into());
        }
        if self.src == QuantSource::Gather && (a.total_rows == 0 || a.sorted_ids == 0 || a.entries < 1 || a.topk < 1) {
            return err("the alignment's pointers, entries and topk must be set".into());
        }
        Ok(())
    }

    /// One CTA per padded row of the capacity.
    pub fn launch_config(&self, a: &MoeQuantArgs) -> LaunchConfig {
        LaunchConfig::new((a.rows.max(1) as u32, 1, 1), THREADS)
    }

    /// Checks `a` and launches `f` (this kernel, loaded).
    ///
    /// # Safety
    ///
    /// `src` must hold `T` (gather; every entry below `entries` names a token below `T`)
    /// or `rows` rows of `ld`, `q` `rows * K` bytes, `scale` `rows` floats, the alignment's
    /// buffers its capacity for `rows`, valid until the kernel finishes.
    pub unsafe fn launch(&self, f: &Function, a: &MoeQuantArgs) -> Result<(), GroupedGemmError> {
        self.check(a)?;
        let ka = KernelArgs::new()
            .u64(a.src)
            .u64(a.q)
            .u64(a.scale)
            .u64(a.sorted_ids)
            .u64(a.total_rows)
            .i32(a.k)
            .i64(a.ld)
            .i32(a.entries)
            .i32(a.topk);
        // SAFETY: the caller guarantees the buffers; the arguments match the signature.
        unsafe { f.launch(&self.launch_config(a), &ka)? };
        Ok(())
    }
}
