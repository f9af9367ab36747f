//! Small statement builders shared by the SM90 emitters and the unit's device helpers.

use super::*;

pub(super) use crate::emit::shorthand::{c, d, dc, e, for_, if_};

/// A layout from its shape and stride (static extents).
pub(super) fn lay(shape: IntTuple, stride: IntTuple) -> Result<Layout, GemmError> {
    Layout::new(shape, stride).map_err(|e| cfg_err(e.to_string()))
}
/// A C++ variable as an expression.
pub(super) fn var(name: &str) -> Expr {
    Expr::var(name)
}
/// `ty name = layout(coord);  // layout L at (coord)`: an index declared from a layout, its
/// constants folded.
pub(super) fn dl(ty: &str, name: &str, layout: &Layout, coord: &[Expr]) -> Result<Stmt, GemmError> {
    let ix = index_expr_at(layout, coord).map_err(|e| cfg_err(e.to_string()))?;
    Ok(dc(ty, name, ix.expr, ix.comment))
}
/// A `#pragma unroll` loop over `0..n`, a compile-time constant.
pub(super) fn unroll(var: &str, n: impl ToString, body: Vec<Stmt>) -> Stmt {
    Stmt::unrolled(var, n, body)
}

/// Local device helpers: shared address of a generic pointer, an accumulator register
/// fence (CuTe's `warpgroup_fence_operand`), packing two floats, pipeline advance (and a
/// consumer's step, its descriptors moving along).
pub(super) fn helpers(cd: Element) -> String {
    let pack = match cd {
        Element::BF16 => "__nv_bfloat162 h = __floats2bfloat162_rn(x, y);",
        _ => "__half2 h = __floats2half2_rn(x, y);",
    };
    let unpack = match cd {
        Element::BF16 => "__nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162*>(&v);\n  *x = __low2float(h);\n  *y = __high2float(h);",
        _ => "__half2 h = *reinterpret_cast<__half2*>(&v);\n  *x = __low2float(h);\n  *y = __high2float(h);",
    };
    format!(
        r#"// rcute sm90 GEMM helpers.
__device__ __forceinline__ uint32_t rc_smem_u32(const void* p) {{
  return (uint32_t)__cvta_generic_to_shared(p);
}}
// Keep the compiler from moving accumulator accesses across wgmma (warpgroup_fence_operand).
__device__ __forceinline__ void rc_fence_acc(float& r) {{ asm volatile("" : "+f"(r)::"memory"); }}
__device__ __forceinline__ void rc_fence_acc(int32_t& r) {{ asm volatile("" : "+r"(r)::"memory"); }}
// Two floats rounded to the output type, packed in 32 bits.
__device__ __forceinline__ uint32_t rc_pack2(float x, float y) {{
  {pack}
  return *reinterpret_cast<uint32_t*>(&h);
}}
// Two output-type values packed in 32 bits, widened to float.
__device__ __forceinline__ void rc_unpack2(uint32_t v, float* x, float* y) {{
  {unpack}
}}
// PipelineState: advance (index, phase) by n stages of a ring of `stages`.
__device__ __forceinline__ void rc_pipe_advance(uint32_t& index, uint32_t& phase, uint32_t n, uint32_t stages) {{
  index += n;
  phase ^= (index / stages) & 1u;
  index %= stages;
}}
// PipelineState ++ of a consumer: the index wraps at `stages` and flips the phase; the stage's descriptor low words move with it.
__device__ __forceinline__ void rc_pipe_next(uint32_t& index, uint32_t& phase, uint32_t& a_desc, uint32_t& b_desc, uint32_t stages, uint32_t a_step, uint32_t b_step) {{
  a_desc += a_step, b_desc += b_step;
  if (++index == stages) {{ index = 0; phase ^= 1u; a_desc -= stages * a_step; b_desc -= stages * b_step; }}
}}
struct __align__(64) rc_tmap_t {{ unsigned long long opaque[16]; }};
"#
    )
}
