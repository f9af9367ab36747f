//! `x` staged by each warp for its own steps (the shared-ring streamed kernel of 16 rows
//! with one warp along N, [`rcute_collective::awq_streamed::AwqStreamed::warp_staged_x`]): a warp's k16 steps are a contiguous range of the CTA's, and it reads
//! only the staged words of that range (chunks `2 s_begin .. 2 (s_begin + n_my)` of every
//! row, the zero row included), so it stages exactly those and meets only itself
//! (`__syncwarp`) before its loop; the CTA's warps meet once, after their loops.
//!
//! Why: with the CTA staging `x` together, every warp starts its loop only after the last
//! of the CTA's 512 threads has its `x` chunk from L2 and the CTA barrier; without the
//! staging and barrier (wrong results) the 1 x 14336 x 4096 decode took 13.33 instead of
//! 14.6 us on an H100 (BENCHMARKS.md, Session 24, helper awqfix). Measured with the group
//! slots: a gain at 16 rows, a loss at 8 (`AwqStreamed::with_shared_ring`).

use super::streamed::when;
use super::{s, Emit};
use crate::emit::Stmt;

/// The warp's chunks of a staged row: `c` from `2 s_begin + lane` below this bound.
const WARP_CHUNKS_END: &str = "2 * (s_begin + n_my)";

impl Emit<'_> {
    /// Whether `x` is staged per warp ([`rcute_collective::awq_streamed::AwqStreamed::warp_staged_x`]).
    pub(super) fn warp_x(&self) -> bool {
        self.st().warp_staged_x
    }

    /// Row 0 of the warp's chunks: loaded into registers ahead of the ring (as
    /// `streamed_x_row0` does for the CTA), stored after it. Returns (loads, stores).
    pub(super) fn warp_x_row0(&self) -> (Vec<Stmt>, Vec<Stmt>) {
        let st = self.st();
        let per_warp = (4 * st.max_k_tiles + st.k_slices - 1) / st.k_slices;
        let its = (2 * per_warp + 31) / 32;
        let tw = st.x_t_words;
        let chunk = Stmt::decl("const int", "c", "2 * s_begin + lane + 32 * i");
        let loads = vec![
            Stmt::Comment(
                "x row m0 first, the warp's chunks only: chunk c = 2 s_begin + lane + 32 i of the 2 n_my its steps read (16 bytes, words 4c .. 4c + 3), from L2, ahead of the ring".into(),
            ),
            Stmt::Decl {
                ty: "uint4".into(),
                name: format!("x0[{its}]"),
                init: None,
                comment: None,
            },
            Stmt::unrolled(
                "i",
                its,
                vec![
                    chunk.clone(),
                    Stmt::assign(
                        "x0[i]",
                        format!("c < {WARP_CHUNKS_END} ? __ldg(reinterpret_cast<const uint4*>(x + (long long)m0 * ldx + k0) + c) : make_uint4(0u, 0u, 0u, 0u)"),
                    ),
                ],
            ),
        ];
        let stores = vec![
            Stmt::Comment("row 0 into the stage: words 4c .. 4c + 3 at t = 0..3, j = c".into()),
            Stmt::unrolled(
                "i",
                its,
                vec![
                    chunk,
                    when(
                        format!("c < {WARP_CHUNKS_END}"),
                        vec![
                            s("sx[c] = x0[i].x"),
                            s(format!("sx[{tw} + c] = x0[i].y")),
                            s(format!("sx[{} + c] = x0[i].z", 2 * tw)),
                            s(format!("sx[{} + c] = x0[i].w", 3 * tw)),
                        ],
                    ),
                ],
            ),
        ];
        (loads, stores)
    }

    /// Rows 1 .. `rows` of the warp's chunks (`stage_rows`: the CTA form's body for chunk
    /// `c`) and its chunks of the zero row, then the warp barrier.
    pub(super) fn warp_x_rows(&self, stage_rows: Vec<Stmt>) -> Vec<Stmt> {
        let st = self.st();
        let (bm, rw, tw) = (self.p.config.tile[0], st.x_row_words, st.x_t_words);
        let zero = (0..4).map(|t| match t {
            0 => s(format!("sx[rows * {rw} + c] = 0u")),
            _ => s(format!("sx[rows * {rw} + {} + c] = 0u", t * tw)),
        });
        vec![
            Stmt::Comment(format!(
                "x rows m0 + 1 .. m0 + rows (row 0 above; up to {bm} rows) and the zero row `rows` (the B fragments of rows past M), the warp's chunks only"
            )),
            Stmt::Loop {
                init: "int c = 2 * s_begin + lane".into(),
                cond: format!("c < {WARP_CHUNKS_END}"),
                step: "c += 32".into(),
                body: [vec![Stmt::unrolled("r", bm, stage_rows)], zero.collect()].concat(),
            },
            Stmt::Comment("the warp reads only the words it staged: a warp barrier, no CTA barrier before the loop".into()),
            s("__syncwarp()"),
        ]
    }
}
