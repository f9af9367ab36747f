//! What the grouped GEMM's CTA setups share (the tile grid's in [`super::kernel`] and
//! stream-K's segments in [`super::stream_k`]): a row tile's expert and first output column,
//! and the mainloop's operand pointers.

use super::stmt::{d, dc, if_};
use super::GroupedGemmConfig;
use crate::emit::Stmt;

/// The local expert of row tile `tile_m` (`skip` leaves a tile no expert of this GPU owns)
/// and the tile's first output column `n0`, from `tile_m` / `tile_n` (the tile grid's and
/// stream-K's setups alike).
pub(super) fn tile_expert(cfg: &GroupedGemmConfig, skip: Stmt) -> [Stmt; 3] {
    let [expert, skip] = row_tile_expert(skip);
    [
        expert,
        skip,
        dc(
            "const int",
            "n0",
            format!("tile_n * {}", cfg.tile_n_out()),
            "first output column of this tile",
        ),
    ]
}

/// `expert`: the local expert of row tile `tile_m` (`skip` where it has none).
pub(super) fn row_tile_expert(skip: Stmt) -> [Stmt; 2] {
    [
        dc(
            "const int",
            "expert",
            "__ldg(block_expert + tile_m)",
            "the local expert of this row tile",
        ),
        if_("expert < 0", vec![skip]),
    ]
}

/// `split`, `k_begin`, `k_end`: the K range of this CTA's split (grid z).
pub(super) fn split_k_range() -> [Stmt; 3] {
    [
        dc(
            "const int",
            "split",
            "blockIdx.z",
            "split-K (scatter only): split s sums K range [s * k_per_split, (s + 1) * k_per_split) into its own output slab",
        ),
        d("const int", "k_begin", "split * k_per_split"),
        d("const int", "k_end", "min(K, k_begin + k_per_split)"),
    ]
}

/// The mainloop's operands `gA` (all rows) and `gB` (the expert's weight).
pub(super) fn operands(cfg: &GroupedGemmConfig) -> [Stmt; 2] {
    let ta = cfg.element.cuda_type();
    [
        d(&format!("const {ta}* const"), "gA", "A"),
        dc(
            &format!("const {ta}* const"),
            "gB",
            "B + (long long)expert * expert_stride",
            "the expert's weight (N,K):(ldb,1)",
        ),
    ]
}
