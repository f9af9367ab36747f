//! The register-streamed grouped (MoE) decode mainloop: each warp multiplies 16 weight
//! rows by the (at most `BM`) routed rows of `x` of its row tile, with the weights loaded
//! from global memory straight into a ring of registers (`ld.global.nc.L1::no_allocate`,
//! 16 bytes per lane and load), no shared-memory stage and no CTA barrier; or, with
//! [`MoeStreamed::with_shared_ring`], each lane's 16-byte loads through its own slots of a
//! shared `cp.async` ring ([`crate::lane_ring`], waited by count), still no barrier.
//!
//! **Swap-AB.** The weight is the `m16n8k16` **A** operand (16 weight rows, the MMA's M)
//! and `x` its **B** operand (8 token rows per fragment, the MMA's N), so one to eight
//! routed rows of an expert waste no weight bytes. Both are read in their natural
//! K-major layout: lane `(g, q)` (`g = lane / 4`, `q = lane % 4`) loads the 16 bytes
//! `k = 32 c + 8 q .. + 8` of a chunk `c` of weight rows `g` and `g + 8` (registers
//! `w_lo[0..4]`, `w_hi[0..4]`, two k each) and of `x` row `g` (`x[0..4]`). Because a
//! sum over K may visit K in any order as long as A and B agree, the chunk's 32 k are two
//! MMAs `j = 0, 1` whose logical k `2q, 2q+1` are physical `8q + 4j, +1` and logical
//! `2q+8, 2q+9` physical `8q + 4j + 2, +3`:
//!
//! ```text
//! MMA j: a = { w_lo[2j], w_hi[2j], w_lo[2j+1], w_hi[2j+1] }   b = { x[2j], x[2j+1] }
//! ```
//!
//! ([`MoeStreamed::a_regs`], [`MoeStreamed::b_regs`]; the unit test multiplies them with
//! `mma.sync`'s fragment layouts). The accumulator of fragment `f` holds weight row `g`
//! (`d0`, `d1`: token rows `8f + 2q`, `+1`) and row `g + 8` (`d2`, `d3`).
//!
//! **Chunks.** A chunk is `loads` parts of 32 k, loaded together: the four lanes of a row
//! read 64 contiguous bytes per load, so a chunk reads `64 loads` contiguous bytes of each
//! of the warp's 16 rows at once. (Parts loaded one ring step apart reach the memory far
//! apart in time: on an H100 one 64-byte part per chunk streamed at half the rate of the
//! `cp.async` kernels; BENCHMARKS.md, session 14.)
//!
//! ```
//! use rcute_collective::moe_streamed::MoeStreamed;
//! // 16 routed rows per tile, 8 warps, 2 chunks of 4 parts (128 k) in flight
//! let p = MoeStreamed::new(16, 8, 2, 4).unwrap();
//! assert_eq!((p.frags, p.threads(), p.rows_per_cta(), p.chunk_k), (2, 256, 128, 128));
//! assert_eq!(p.bytes_in_flight_per_warp(), 8192);
//! assert_eq!(p.a_regs(1), [("w_lo", 2), ("w_hi", 2), ("w_lo", 3), ("w_hi", 3)]);
//! assert!(MoeStreamed::new(24, 8, 4, 2).is_none());
//! // the shared ring: 2 chunks x 4 parts x 2 rows of 16 bytes per lane
//! let s = p.with_shared_ring().unwrap();
//! assert_eq!(s.smem_bytes(), 2 * 4 * 2 * 256 * 16);
//! ```

use crate::lane_ring::LaneRing;

/// K elements of one part of a chunk (one 16-byte load per lane and weight row: two
/// MMAs).
pub const CHUNK_K: i64 = 32;

/// Weight rows of one warp (the MMA's M).
pub const WARP_ROWS: i64 = 16;

/// Most bytes of a shared ring ([`MoeStreamed::with_shared_ring`]): an SM90 block's
/// opt-in shared memory ([`crate::SM90_SMEM_CAPACITY`], 227 KB).
pub const MAX_RING_BYTES: i64 = crate::SM90_SMEM_CAPACITY as i64;

/// The plan of a register-streamed grouped decode GEMM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoeStreamed {
    /// Routed rows of a row tile (the alignment's block): 8, 16 or 32.
    pub bm: i64,
    /// 8-row B fragments per row tile: `bm / 8`.
    pub frags: i64,
    /// Warps per CTA (each 16 weight rows).
    pub warps: i64,
    /// Chunks of the weight in flight per warp.
    pub ring: i64,
    /// 32-k parts of a chunk (16-byte loads per lane and row): 1, 2, 4 or 8.
    pub loads: i64,
    /// K per chunk: [`CHUNK_K`]` x loads`.
    pub chunk_k: i64,
    /// The weights' shared ring ([`MoeStreamed::with_shared_ring`]): `ring` slots of `2
    /// loads` 16-byte units per lane (unit `2 u + h`: part `u`, row `lo` (`h = 0`) or `hi`);
    /// `None` with the ring of registers.
    pub lane_ring: Option<LaneRing>,
}

impl MoeStreamed {
    /// The plan for `bm` routed rows per tile (8, 16 or 32), `warps` warps (1 to 16),
    /// `ring` chunks in flight and `loads` 32-k parts per chunk (1, 2, 4 or 8; at most 16
    /// parts in flight); `None` otherwise.
    pub fn new(bm: i64, warps: i64, ring: i64, loads: i64) -> Option<MoeStreamed> {
        if !matches!(bm, 8 | 16 | 32)
            || !(1..=16).contains(&warps)
            || ring < 1
            || !matches!(loads, 1 | 2 | 4 | 8)
            || ring * loads > 16
        {
            return None;
        }
        Some(MoeStreamed {
            bm,
            frags: bm / 8,
            warps,
            ring,
            loads,
            chunk_k: CHUNK_K * loads,
            lane_ring: None,
        })
    }

    /// The plan with the weight chunks through each lane's own slots of a shared `cp.async`
    /// ring ([`crate::lane_ring`]) instead of registers, `None` where the ring passes
    /// [`MAX_RING_BYTES`]. Why: in the register ring's SASS every weight load and the
    /// chunk's `x` loads share one scoreboard, so the first MMA of each chunk waits for
    /// every load in flight (the ring drains at every chunk; `cuobjdump -sass` of
    /// `rc_moe_grouped_reg_bf16_gather_swiglu_16x128x128_r3_w8_prep`, BENCHMARKS.md session
    /// 18); `cp.async` groups are waited by count. Measured there, the layer was not faster
    /// with it at the decode points the prepared rule runs (1-11 % slower on an H100: the
    /// drained register ring still keeps a 4-8 KB chunk per warp in flight), so no rule
    /// picks it (`moe:...,reg,sring` forces it).
    ///
    /// ```
    /// use rcute_collective::moe_streamed::MoeStreamed;
    /// let s = MoeStreamed::new(16, 8, 3, 4).unwrap().with_shared_ring().unwrap();
    /// let r = s.lane_ring.as_ref().unwrap();
    /// assert_eq!((r.slots, r.units, r.threads), (3, 8, 256));
    /// assert!(MoeStreamed::new(16, 16, 2, 8).unwrap().with_shared_ring().is_none()); // 256 KB
    /// ```
    pub fn with_shared_ring(mut self) -> Option<MoeStreamed> {
        let ring = LaneRing::new(self.ring, 2 * self.loads, self.threads())?;
        if ring.bytes() > MAX_RING_BYTES {
            return None;
        }
        self.lane_ring = Some(ring);
        Some(self)
    }

    /// Dynamic shared memory of a CTA: the shared ring's bytes, 0 with the ring of
    /// registers.
    pub fn smem_bytes(&self) -> i64 {
        self.lane_ring.as_ref().map_or(0, LaneRing::bytes)
    }

    /// The shared-ring unit of part `u`, row `h` (0: `lo`, 1: `hi`) of slot `slot`, in 16-byte
    /// units from lane 0's first (a lane's own is `threadIdx.x` further).
    pub fn ring_unit(&self, slot: i64, u: i64, h: i64) -> Option<i64> {
        self.lane_ring.as_ref().map(|r| r.unit(slot, 2 * u + h))
    }

    /// Threads per CTA.
    pub fn threads(&self) -> i64 {
        32 * self.warps
    }

    /// Weight rows per CTA.
    pub fn rows_per_cta(&self) -> i64 {
        WARP_ROWS * self.warps
    }

    /// Bytes of the weight in flight per warp (`ring` chunks of 16 rows x `64 loads`
    /// bytes, bf16 or f16).
    pub fn bytes_in_flight_per_warp(&self) -> i64 {
        self.ring * WARP_ROWS * self.chunk_k * 2
    }

    /// The A registers (`a0 .. a3`) of MMA `j` of a chunk: `(weight row register array,
    /// index)`, `w_lo` being the lane's row `g` and `w_hi` its row `g + 8`.
    pub fn a_regs(&self, j: usize) -> [(&'static str, usize); 4] {
        [
            ("w_lo", 2 * j),
            ("w_hi", 2 * j),
            ("w_lo", 2 * j + 1),
            ("w_hi", 2 * j + 1),
        ]
    }

    /// The B registers (`b0`, `b1`) of MMA `j`: indices into the lane's `x` registers.
    pub fn b_regs(&self, j: usize) -> [usize; 2] {
        [2 * j, 2 * j + 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mma.sync.m16n8k16` on fragments laid out as the PTX ISA says (A row-major: `a0`
    /// row g k 2q..; `a1` row g+8; `a2` row g k 2q+8..; `a3` row g+8 k 2q+8..; B: `b0` k
    /// 2q, 2q+1 col g; `b1` k 2q+8, 2q+9; D: `d0, d1` row g cols 2q, 2q+1, `d2, d3` row
    /// g+8), fed with the plan's registers from natural K-major rows, is the product.
    #[test]
    fn swap_ab_chunk_is_the_product_over_the_chunk() {
        let p = MoeStreamed::new(8, 1, 1, 1).unwrap();
        let w = |r: usize, k: usize| ((r * 37 + k * 11) % 17) as f64 - 8.0;
        let x = |t: usize, k: usize| ((t * 13 + k * 7) % 11) as f64 - 5.0;
        // lane registers: 4 pairs of k (2 values each)
        let pair = |f: &dyn Fn(usize) -> f64, q: usize, i: usize| [f(8 * q + 2 * i), f(8 * q + 2 * i + 1)];
        let mut d = [[0.0f64; 8]; 16];
        for j in 0..2 {
            // a[lane][reg] pairs, b[lane][reg] pairs
            for (row, dr) in d.iter_mut().enumerate() {
                for (col, dv) in dr.iter_mut().enumerate() {
                    let mut s = 0.0;
                    for kl in 0..16 {
                        // which lane and register hold A(row, kl) and B(kl, col)
                        let (qa, hi) = ((kl % 8) / 2, kl >= 8);
                        let ga = row % 8;
                        let reg = if row < 8 {
                            2 * usize::from(hi)
                        } else {
                            1 + 2 * usize::from(hi)
                        };
                        let (arr, idx) = p.a_regs(j)[reg];
                        let wrow = if arr == "w_lo" { ga } else { ga + 8 };
                        assert_eq!(wrow, row);
                        let a = pair(&|k| w(wrow, k), qa, idx)[kl % 2];
                        let bidx = p.b_regs(j)[usize::from(hi)];
                        let b = pair(&|k| x(col, k), qa, bidx)[kl % 2];
                        s += a * b;
                    }
                    *dv += s;
                }
            }
        }
        for (row, dr) in d.iter().enumerate() {
            for (col, v) in dr.iter().enumerate() {
                let want: f64 = (0..32).map(|k| w(row, k) * x(col, k)).sum();
                assert_eq!(*v, want, "row {row} col {col}");
            }
        }
    }

    #[test]
    fn plans_are_bounded() {
        assert!(MoeStreamed::new(16, 0, 4, 1).is_none());
        assert!(MoeStreamed::new(16, 8, 0, 1).is_none());
        assert!(MoeStreamed::new(16, 17, 4, 1).is_none());
        assert!(MoeStreamed::new(16, 8, 4, 3).is_none());
        assert!(MoeStreamed::new(16, 8, 4, 8).is_none());
        assert_eq!(MoeStreamed::new(32, 4, 8, 1).unwrap().bytes_in_flight_per_warp(), 8192);
        assert_eq!(MoeStreamed::new(32, 4, 2, 4).unwrap().bytes_in_flight_per_warp(), 8192);
    }
}
