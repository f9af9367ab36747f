//! Turing (sm_75): one `m16n8k32` s8 step as four `mma.sync.m8n8k16` atoms (Turing has no
//! `m16n8k32`), composed from the atom's snippet.

/// The Turing `m16n8k32` step from four `m8n8k16` atoms.
pub(super) fn turing_mma(m8: &str, name: &str) -> String {
    format!(
        r#"// rcute: one m16n8k32 s8 step on Turing (sm_75) as four mma.sync.m8n8k16. The m16n8k32
// fragments are, register for register, those of 2 (M) x 2 (K) m8n8k16 atoms:
// a[0] rows 0-7 / k 0-15, a[1] rows 8-15 / k 0-15, a[2] rows 0-7 / k 16-31, a[3] rows 8-15 / k 16-31;
// b[0] k 0-15, b[1] k 16-31; d[0..1] rows 0-7, d[2..3] rows 8-15 (columns 2 * (lane % 4) + {{0, 1}}).
__device__ __forceinline__ void {name}(int32_t (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2], int32_t const (&c)[4]) {{
  const uint32_t a0[1] = {{a[0]}}, a1[1] = {{a[1]}}, a2[1] = {{a[2]}}, a3[1] = {{a[3]}};
  const uint32_t b0[1] = {{b[0]}}, b1[1] = {{b[1]}};
  int32_t lo[2] = {{c[0], c[1]}};
  int32_t hi[2] = {{c[2], c[3]}};
  {m8}(lo, a0, b0, lo);
  {m8}(lo, a2, b1, lo);
  {m8}(hi, a1, b0, hi);
  {m8}(hi, a3, b1, hi);
  d[0] = lo[0];
  d[1] = lo[1];
  d[2] = hi[0];
  d[3] = hi[1];
}}
"#
    )
}
