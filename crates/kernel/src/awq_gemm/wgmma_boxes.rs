//! The prepared wgmma kernel's weight stage as one TMA tensor box
//! ([`super::AwqGemmConfig::weight_boxes`], [`rcute_collective::awq_wgmma::AwqWgmma::with_boxes`],
//! named `..._tb`): the prepared weight (`2 N` words a k16 block, 128 words a 64-column
//! block of it: [`rcute_collective::awq_prepared`]) seen as a 3-D tensor of 32-bit words
//! `(128, N/64, K/16)` with strides of 512 and `8 N` bytes; one box `(128, BN/64, 4)` is a
//! stage: word `e0` of 64-column block `wb` of k16 block `kb` lands at `4 e0 + 512 wb + 8
//! BN kb`, the image of the per-k16-block bulk runs (so the consumers are the same code).
//! Column blocks past N and k16 blocks past K are zero-filled and counted.

use super::streamed::decl_c;
use super::{s, Emit, StageWeight};
use crate::emit::Stmt;
use rcute_atom::copy_tma::tma_load;
use rcute_atom::tma::{tma_data_type, L2Promotion, OobFill, TmaEncodeArgs, TmaSwizzle};
use rcute_atom::Element;
use rcute_collective::awq_prepared::{PREPARED_K, PREPARED_N};
use rcute_collective::awq_wgmma::{AwqWgmma, WGMMA_BK};

/// Words of one 64-column block of one k16 block of the prepared weight (32 lanes of 4).
const BLOCK_WORDS: i64 = PREPARED_K * PREPARED_N / 8;

/// The 3-D TMA load of one stage's box (its snippet joins the unit).
pub(super) fn box_load(w: &AwqWgmma) -> rcute_atom::copy::CopyOp {
    tma_load(3, false, w.w_stage_bytes * 8)
}

/// The TMA map of the prepared weight of a `K x N` layer for a CTA of `bn` columns: 32-bit
/// words `(128, N/64, K/16)`, strides 512 and `8 N` bytes (the prepared layout's 64-column
/// block and k16 block), boxes of `(128, bn / 64, 4)`, no swizzle, zero fill past N and K.
pub(super) fn prepared_tensor_map(k: i32, n: i32, bn: i64) -> TmaEncodeArgs {
    let (k, n) = (k.max(0) as u64, n.max(0) as u64);
    TmaEncodeArgs {
        data_type: tma_data_type(Element::U32).expect("32-bit words have a TMA type"),
        rank: 3,
        global_dim: vec![BLOCK_WORDS as u64, n / PREPARED_N as u64, k / PREPARED_K as u64],
        global_strides: vec![4 * BLOCK_WORDS as u64, n * PREPARED_K as u64 / 2],
        box_dim: vec![
            BLOCK_WORDS as u32,
            (bn / PREPARED_N) as u32,
            (WGMMA_BK / PREPARED_K) as u32,
        ],
        element_strides: vec![1, 1, 1],
        interleave: 0,
        swizzle: TmaSwizzle::None.code(),
        l2_promotion: L2Promotion::B256.code(),
        oob_fill: OobFill::Zero.code(),
    }
}

impl Emit<'_> {
    /// The prepared weight of a stage as one tensor box: its bytes (the whole box, zero
    /// fill included) and the copy.
    pub(super) fn boxed_stage_weight(&self) -> StageWeight {
        let w = self.wg();
        let load = &box_load(w).snippet.name;
        let count = decl_c(
            "const uint32_t",
            "wbox",
            format!("{}u", w.w_stage_bytes),
            "bytes of the weight box: column blocks past N and k16 blocks past K are zero-filled and counted",
        );
        let copies = vec![
            Stmt::Comment(format!(
                "prepared weight box (128 words, {} column blocks, 4 k16 blocks) at (0, n0 / 64, 4 kt): word e of block wb of k16 block kb at 4 e + 512 wb + {} kb, the bulk runs' image",
                w.bn() / PREPARED_N,
                w.w_stage_bytes / (WGMMA_BK / PREPARED_K)
            )),
            s(format!(
                "{load}(smem + {}u + stage * {}u, &tmap_w, full, 0, n0 / {PREPARED_N}, kt * {})",
                w.w_offset,
                w.w_stage_bytes,
                WGMMA_BK / PREPARED_K
            )),
        ];
        StageWeight {
            count,
            bytes: "wbox".into(),
            copies,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcute_collective::awq_prepared::prepared_lane_word;

    /// The box's shared image is the bulk runs': word `e0` of block `wb` of k16 block `kb`
    /// of the box (at `4 e0 + 512 wb + 8 BN kb` in the stage, dimension 0 fastest) is the
    /// global word the bulk copy of k16 block `kb` puts there (`2 N (4 kt + kb) + 2 n0 +
    /// ...`), and the map's strides walk the prepared layout ([`prepared_lane_word`]).
    #[test]
    fn box_image_is_the_bulk_image() {
        let (k, n, bn) = (256i32, 1536i32, 512i64);
        let m = prepared_tensor_map(k, n, bn);
        assert_eq!(m.global_dim, vec![128, 24, 16]);
        assert_eq!(m.global_strides, vec![512, 8 * 1536]);
        assert_eq!(m.box_dim, vec![128, 8, 4]);
        let box_bytes: u64 = 4 * m.box_dim.iter().map(|&d| d as u64).product::<u64>();
        assert_eq!(box_bytes, 4 * 8 * bn as u64);
        let (kt, n0) = (3i64, 1024i64);
        for kb in 0..4i64 {
            for wb in 0..bn / 64 {
                for e0 in 0..128i64 {
                    let smem = 4 * e0 + 512 * wb + 8 * bn * kb;
                    // global byte of the box element: coordinates (e0, n0 / 64 + wb, 4 kt + kb)
                    let g = 4 * e0 as u64
                        + m.global_strides[0] * (n0 / 64 + wb) as u64
                        + m.global_strides[1] * (4 * kt + kb) as u64;
                    // the bulk run of k16 block kb: 8 BN bytes from word 2 (N kb' + n0)
                    let run = 8 * (n as i64 * (4 * kt + kb) + n0);
                    assert_eq!(g as i64, run + smem - 8 * bn * kb, "kb {kb} wb {wb} e0 {e0}");
                    let (lane, word) = (e0 / 4, e0 % 4);
                    let at = prepared_lane_word(4 * kt + kb, n0 / 64 + wb, lane, n as i64) + word;
                    assert_eq!(4 * at, g as i64);
                }
            }
        }
    }
}
