//! The K splits of the SM90 mixed-input kernel ([`super::AwqGemmConfig::split_k`], named
//! `..._sk`): split `blockIdx.z` walks k-tiles `[z kt_per_split, min(ktiles, (z + 1)
//! kt_per_split))` (the producer fills the stages of those k-tiles only, the consumers
//! hand back the stage of each k-tile after the split's first). A k-tile loads the group
//! rows of its own halves, so a split may start inside a group (G = 128 is two k-tiles).
//!
//! With one split at run time the epilogue stores as the one-split kernel does. With
//! several, the fused kernels' ABI ([`super`]): every consumer lane writes its tokens'
//! `2 words` contiguous f32 columns to slab `blockIdx.z` of the `[splits, M, N]`
//! workspace (`st.global.cg`: the slabs stay in L2), the consumer warpgroups meet at a
//! named barrier (the producer warpgroup has left), one thread counts the split on the
//! tile's semaphore (`blockIdx.x + gridDim.x * blockIdx.y`, the grid position: any raster
//! maps it to one tile), and a second barrier tells every consumer whether its split was
//! the last. The last split zeroes its accumulators, adds slabs `0 .. splits` in that order
//! (so the sums are the same bits whichever split arrives last), resets the semaphore and
//! runs the one-split epilogue (bias, 16-bit stores) on the sums.

use super::streamed::{decl_c, when};
use super::{s, semaphore_reset, Emit};
use crate::emit::Stmt;
use rcute_atom::sync::{named_barrier_red_or, named_barrier_sync};
use rcute_atom::Snippet;
// The named barrier of the consumer warpgroups (0 is `__syncthreads`): the collective's id.
use rcute_collective::awq_bulk::CONSUMER_BARRIER;

/// The unit header's line of a split-K wgmma kernel.
pub(super) const SPLIT_HEADER: &str = "K split over the grid's z (kt_per_split k-tiles a split): with several splits, f32 partial tiles to the [splits, M, N] workspace slabs, the last split of a tile sums them in slab order (awq_gemm/wgmma_split.rs).";

/// The barrier snippets the split epilogue calls.
pub(super) fn split_snippets() -> Vec<Snippet> {
    vec![named_barrier_sync(), named_barrier_red_or()]
}

impl Emit<'_> {
    /// The k-tile loop's start, condition, and the test "not the loop's first k-tile":
    /// the whole K, or with `split_k` split `blockIdx.z`'s range `[kt0, kt1)`.
    pub(super) fn kt_bounds(&self) -> (&'static str, &'static str, &'static str) {
        if self.p.config.split_k {
            ("int kt = kt0", "kt < kt1", "kt > kt0")
        } else {
            ("int kt = 0", "kt < ktiles", "kt > 0")
        }
    }

    /// With `split_k`: the split's k-tiles `[kt0, kt1)` (declared after `ktiles`).
    pub(super) fn split_range(&self) -> Vec<Stmt> {
        if !self.p.config.split_k {
            return vec![];
        }
        vec![
            decl_c(
                "const int",
                "kt0",
                "blockIdx.z * kt_per_split",
                "split z: k-tiles [z kt_per_split, + kt_per_split) inside K (split_plan: none empty)",
            ),
            Stmt::decl("const int", "kt1", "min(ktiles, kt0 + kt_per_split)"),
        ]
    }

    /// The lane's columns `64 wb + 8 g + 2 r0 .. + 2 words` of token `8 j + 2 t + e`:
    /// value `c` is [`Emit::acc_value`] of word `c / 2`, half `c % 2` (the epilogue's
    /// `v[2 i + h]`).
    fn split_value(c: i64) -> String {
        Self::acc_value(&(c / 2).to_string(), c % 2)
    }

    /// The `q`-th float4 (or float2) of the lane's columns at `w`.
    fn split_quad(ty: &str, q: i64) -> String {
        match q {
            0 => format!("reinterpret_cast<{ty}*>(w)"),
            _ => format!("reinterpret_cast<{ty}*>(w) + {q}"),
        }
    }

    /// Loops over the lane's live tokens (`row < M`, the warp's block inside N) with the
    /// f32 pointer `w` to its columns in slab `slab` of the workspace.
    fn split_tokens(&self, slab: &str, body: Vec<Stmt>) -> Stmt {
        let mut inner = vec![decl_c(
            "float* const",
            "w",
            format!("ws + ((long long)({slab}) * M + row) * N + 64 * wb + 8 * g + 2 * r0"),
            "slab [splits, M, N]: row-major M x N f32 per split",
        )];
        inner.extend(body);
        self.token_rows(inner)
    }

    /// With `split_k`, before the epilogue: several splits write their partial tiles; all
    /// but the tile's last return, the last sums the slabs into the accumulators.
    pub(super) fn split_reduce(&self) -> Vec<Stmt> {
        if !self.p.config.split_k {
            return vec![];
        }
        let w = self.wg();
        let (cols, threads) = (2 * w.words, 128 * w.wgs_r * w.wgs_n);
        let bar = CONSUMER_BARRIER;
        // float4 chunks of the lane's columns (one float2 with one word a warpgroup)
        let vec = cols.min(4);
        let quads = cols / vec;
        let store = (0..quads)
            .map(|q| {
                let v: Vec<String> = (vec * q..vec * q + vec).map(Self::split_value).collect();
                s(format!(
                    "__stcg({}, make_float{vec}({}))",
                    Self::split_quad(&format!("float{vec}"), q),
                    v.join(", ")
                ))
            })
            .collect();
        let mut add = vec![];
        for q in 0..quads {
            add.push(Stmt::decl(
                &format!("const float{vec}"),
                &format!("p{q}"),
                format!("__ldcg({})", Self::split_quad(&format!("const float{vec}"), q)),
            ));
        }
        for c in 0..cols {
            let comp = ["x", "y", "z", "w"][(c % vec) as usize];
            add.push(s(format!("{} += p{}.{comp}", Self::split_value(c), c / vec)));
        }
        vec![when(
            "splits > 1",
            vec![
                Stmt::Comment(format!(
                    "this split's f32 partial tile to slab blockIdx.z (kept in L2): token 8j + 2t + e, columns 64 wb + 8g + 2 r0 .. + {cols} = acc[c / 2][4j + 2 (c % 2) + e]"
                )),
                self.split_tokens("blockIdx.z", store),
                Stmt::Comment(format!(
                    "publish the partials; the {threads} consumer threads meet (named barrier {bar}: the producer warpgroup has left), one counts the split on the tile's semaphore"
                )),
                s("__threadfence()"),
                s(format!("rc_named_barrier_sync({bar}u, {threads}u)")),
                Stmt::decl("const int", "tile", "blockIdx.x + gridDim.x * blockIdx.y"),
                Stmt::decl("uint32_t", "last", "0u"),
                when(
                    "threadIdx.x == 128",
                    vec![Stmt::assign("last", "atomicAdd(sem + tile, 1) == splits - 1")],
                ),
                Stmt::Comment("the barrier tells every consumer thread whether this split is the tile's last".into()),
                when(
                    format!(
                        "__shfl_sync(0xffffffffu, (int)rc_named_barrier_red_or({bar}u, {threads}u, last), 0) == 0"
                    ),
                    vec![Stmt::Return],
                ),
                s("__threadfence()"),
                Stmt::Comment(
                    "the last split: the slabs 0 .. splits summed in that order (the same bits whichever split is last)".into(),
                ),
                self.zero_acc(),
                Stmt::Loop {
                    init: "int p = 0".into(),
                    cond: "p < splits".into(),
                    step: "++p".into(),
                    body: vec![self.split_tokens("p", add)],
                },
            ]
            .into_iter()
            .chain(semaphore_reset("128"))
            .collect(),
        )]
    }
}
