//! The prepared expert-weight layout of the register-streamed grouped decode GEMMs
//! ([`crate::moe_streamed`], kernels `..._prep`): each expert's weight rows reordered once
//! so that every warp load of the streamed mainloop reads 512 contiguous bytes and a warp
//! walks one contiguous run over all of K.
//!
//! The streamed mainloop's warp multiplies a **block** of 16 weight rows; in each 32-k
//! **part** lane `(g, q)` (`g = lane / 4`, `q = lane % 4`) loads 8 elements `k = 32 p + 8 q
//! .. + 8` of its row `lo` (the MMA's row `g`) and of its row `hi` (row `g + 8`). The
//! prepared layout stores exactly these 16-byte pieces in load order:
//!
//! ```text
//! offset = 512 P blk + 512 p + 256 h + 8 (4 g + q) + e       (elements; P = ceil(K / 32))
//! ```
//!
//! for block `blk`, part `p`, half `h` (0: the `lo` rows, 1: the `hi` rows), lane
//! `(g, q)` and element `e` (`k = 32 p + 8 q + e`). One warp load (a `(blk, p, h)`) is 256
//! contiguous elements (512 bytes of bf16), the two halves of a part are adjacent, and a
//! block is one run of `32 P` contiguous elements per row, i.e. `P` KB: the warp streams
//! it front to back.
//!
//! Which weight rows form a block is the epilogue's pairing ([`MoePairing`]):
//!
//! * [`MoePairing::SwiGlu`] (`w13 [2N, K]`, gate rows `0..N`, up rows `N..2N`): block `blk`
//!   is output columns `8 blk .. + 8`; lane row `lo` = the gate row of column `8 blk + g`,
//!   `hi` = its up row, so the SwiGLU epilogue finds both sums in one lane. As a layout of
//!   `(w13 row, k)` (N a multiple of 8, `NB = N / 8` blocks):
//!   `((8, NB, 2), (8, 4, P)) : ((32, 512 P, 256), (1, 8, 512))`.
//! * [`MoePairing::Rows`] (`w2 [N, K]`): block `blk` is rows `16 blk .. + 16`, lane row `lo`
//!   = row `16 blk + 2 g`, `hi` = row `16 blk + 2 g + 1` (the scatter epilogue stores
//!   column pairs): `((2, 8, NB), (8, 4, P)) : ((256, 32, 512 P), (1, 8, 512))` with
//!   `NB = ceil(N / 16)`.
//!
//! Rows past `N` (the last block of `w2` when `N % 16 != 0`) and k past K (the last part
//! when `K % 32 != 0`) are zeros in the prepared weight, so the mainloop loads whole parts.
//!
//! ```
//! use rcute_collective::moe_prepared::{MoePairing, MoePrepared};
//! use rcute_layout::tuple;
//! let p = MoePrepared::new(MoePairing::SwiGlu, 16, 64).unwrap(); // w13 [32, 64]
//! assert_eq!((p.blocks, p.parts, p.block_stride(), p.expert_elems()), (2, 2, 1024, 2048));
//! let l = p.layout().unwrap();
//! assert_eq!(l.to_string(), "((8,2,2),(8,4,2)):((32,1024,256),(1,8,512))");
//! // The up row of column 9 (w13 row 25: g 1, blk 1, h 1), k 40 (e 0, q 1, p 1).
//! assert_eq!(p.offset(25, 40), 1024 + 512 + 256 + 8 * 5);
//! assert_eq!(l.crd2idx(&tuple!(25, 40)).unwrap().as_static(), Some(p.offset(25, 40)));
//! assert!(MoePrepared::new(MoePairing::SwiGlu, 12, 64).is_err()); // N % 8
//! ```

use crate::moe_streamed::{CHUNK_K, WARP_ROWS};
use crate::sm80_mainloop::PlanError;
use rcute_layout::{tuple, Layout};

/// Elements of one warp load (32 lanes x 8 elements: 512 bytes of bf16 or f16).
pub const LOAD_ELEMS: i64 = 256;

/// Which weight rows share a 16-row block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoePairing {
    /// `w13`: the gate and the up row of 8 output columns (lane `g`: column `8 blk + g`).
    SwiGlu,
    /// `w2`: 16 consecutive rows (lane `g`: rows `16 blk + 2 g`, `+ 1`).
    Rows,
}

/// The prepared layout of one expert's weight: `N` output columns (rows of `w2`; `w13` has
/// `2N` rows), `K` the reduction length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoePrepared {
    /// The block's rows.
    pub pairing: MoePairing,
    /// Output columns `N`.
    pub n: i64,
    /// `K`.
    pub k: i64,
    /// 16-row blocks: `N / 8` (SwiGLU) or `ceil(N / 16)` (rows).
    pub blocks: i64,
    /// 32-k parts: `ceil(K / 32)`.
    pub parts: i64,
}

impl MoePrepared {
    /// The layout for `n` output columns and `k`: positive, `k` a multiple of 8 (16-byte
    /// rows), `n` a multiple of 8 with [`MoePairing::SwiGlu`] (whole blocks of columns) or
    /// even with [`MoePairing::Rows`] (column pairs).
    pub fn new(pairing: MoePairing, n: i64, k: i64) -> Result<MoePrepared, PlanError> {
        let n_step = match pairing {
            MoePairing::SwiGlu => 8,
            MoePairing::Rows => 2,
        };
        if n <= 0 || k <= 0 || k % 8 != 0 || n % n_step != 0 {
            return Err(PlanError::Layout(format!(
                "the prepared {pairing:?} expert weight needs K a positive multiple of 8 and N of {n_step}, got N = {n}, K = {k}"
            )));
        }
        let blocks = match pairing {
            MoePairing::SwiGlu => n / 8,
            MoePairing::Rows => (n + WARP_ROWS - 1) / WARP_ROWS,
        };
        Ok(MoePrepared {
            pairing,
            n,
            k,
            blocks,
            parts: (k + CHUNK_K - 1) / CHUNK_K,
        })
    }

    /// Elements of one block (all of K): `512 P`, the `ldb` the prepared kernels take.
    pub fn block_stride(&self) -> i64 {
        2 * LOAD_ELEMS * self.parts
    }

    /// Elements of one expert's prepared weight (padding included).
    pub fn expert_elems(&self) -> i64 {
        self.blocks * self.block_stride()
    }

    /// Rows of the weight the layout covers: `2N` (SwiGLU) or `16 NB` (rows, padded).
    pub fn padded_rows(&self) -> i64 {
        match self.pairing {
            MoePairing::SwiGlu => 2 * self.n,
            MoePairing::Rows => WARP_ROWS * self.blocks,
        }
    }

    /// `(blk, h, g)` of weight row `row` (a gate-first `w13` row or a `w2` row).
    pub fn row_slot(&self, row: i64) -> (i64, i64, i64) {
        match self.pairing {
            MoePairing::SwiGlu => {
                let (h, col) = (row / self.n, row % self.n);
                (col / 8, h, col % 8)
            }
            MoePairing::Rows => (row / WARP_ROWS, row % 2, (row % WARP_ROWS) / 2),
        }
    }

    /// The weight row of lane row `g`, half `h` of block `blk` (what the reorder reads).
    pub fn source_row(&self, blk: i64, h: i64, g: i64) -> i64 {
        match self.pairing {
            MoePairing::SwiGlu => h * self.n + 8 * blk + g,
            MoePairing::Rows => WARP_ROWS * blk + 2 * g + h,
        }
    }

    /// The element offset of weight `(row, k)` in the expert's prepared weight: the
    /// layout's function in closed form.
    pub fn offset(&self, row: i64, k: i64) -> i64 {
        let (blk, h, g) = self.row_slot(row);
        let (p, q, e) = (k / CHUNK_K, (k % CHUNK_K) / 8, k % 8);
        blk * self.block_stride() + 2 * LOAD_ELEMS * p + LOAD_ELEMS * h + 8 * (4 * g + q) + e
    }

    /// The layout from the weight coordinate `(row, k)` (rows `0..padded_rows`, k over
    /// `32 P`) to the element offset (module docs).
    pub fn layout(&self) -> Result<Layout, PlanError> {
        let (nb, p, bs, half, part) = (self.blocks, self.parts, self.block_stride(), LOAD_ELEMS, 2 * LOAD_ELEMS);
        match self.pairing {
            MoePairing::SwiGlu => Layout::new(tuple!((8, nb, 2), (8, 4, p)), tuple!((32, bs, half), (1, 8, part))),
            MoePairing::Rows => Layout::new(tuple!((2, 8, nb), (8, 4, p)), tuple!((half, 32, bs), (1, 8, part))),
        }
        .map_err(|e| PlanError::Layout(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> Vec<MoePrepared> {
        let mut v = vec![];
        for (n, k) in [(16, 64), (24, 40), (712, 1032), (8, 8)] {
            v.push(MoePrepared::new(MoePairing::SwiGlu, n, k).unwrap());
        }
        for (n, k) in [(16, 64), (1032, 712), (18, 40), (2, 8)] {
            v.push(MoePrepared::new(MoePairing::Rows, n, k).unwrap());
        }
        v
    }

    /// The layout is the closed form, and a bijection from the padded `(row, k)` domain
    /// onto `0 .. expert_elems`.
    #[test]
    fn layout_is_the_closed_form_and_a_bijection() {
        for p in shapes() {
            let l = p.layout().unwrap();
            let (rows, kp) = (p.padded_rows(), CHUNK_K * p.parts);
            assert_eq!(l.size().as_static(), Some(rows * kp));
            assert_eq!(rows * kp, p.expert_elems(), "{p:?}");
            let mut seen = vec![false; p.expert_elems() as usize];
            for r in 0..rows {
                for k in 0..kp {
                    let o = p.offset(r, k);
                    let lo = l.crd2idx(&tuple!(r, k)).unwrap().as_static().unwrap();
                    assert_eq!(o, lo, "{p:?} ({r}, {k})");
                    assert!(!seen[o as usize], "{p:?} ({r}, {k}) hit twice");
                    seen[o as usize] = true;
                    let (blk, h, g) = p.row_slot(r);
                    assert_eq!(p.source_row(blk, h, g), r);
                }
            }
            assert!(seen.iter().all(|&s| s), "{p:?}");
        }
    }

    /// Each warp load `(blk, p, h)` is 256 contiguous elements, lane `(g, q)` at `8 (4 g +
    /// q)` of it holding k `32 p + 8 q .. + 8` of its row in order; a block's loads follow
    /// each other (one run of `block_stride` elements); the lane's `lo` / `hi` rows are the
    /// pairing's (SwiGLU: the gate and up rows of one column).
    #[test]
    fn warp_loads_are_contiguous_runs() {
        for p in shapes() {
            for blk in 0..p.blocks {
                let mut next = blk * p.block_stride();
                for part in 0..p.parts {
                    for h in 0..2 {
                        let base = next;
                        for lane in 0..32 {
                            let (g, q) = (lane / 4, lane % 4);
                            let row = p.source_row(blk, h, g);
                            for e in 0..8 {
                                let k = CHUNK_K * part + 8 * q + e;
                                assert_eq!(p.offset(row, k), base + 8 * lane + e, "{p:?}");
                            }
                            if p.pairing == MoePairing::SwiGlu {
                                assert_eq!(row % p.n, 8 * blk + g);
                                assert_eq!(row / p.n, h);
                            } else {
                                assert_eq!(row, 16 * blk + 2 * g + h);
                            }
                        }
                        next = base + LOAD_ELEMS;
                    }
                }
                assert_eq!(next, (blk + 1) * p.block_stride());
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(MoePrepared::new(MoePairing::SwiGlu, 12, 64).is_err());
        assert!(MoePrepared::new(MoePairing::Rows, 15, 64).is_err());
        assert!(MoePrepared::new(MoePairing::Rows, 16, 60).is_err());
        assert!(MoePrepared::new(MoePairing::Rows, 0, 64).is_err());
        assert_eq!(MoePrepared::new(MoePairing::Rows, 18, 40).unwrap().blocks, 2);
    }
}
