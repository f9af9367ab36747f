//! The SM90 mixed-input kernel on AutoAWQ's checkpoint `qweight`
//! ([`super::AwqGemmConfig::wgmma_checkpoint`], [`rcute_collective::awq_wgmma_checkpoint`],
//! named `..._v1_wgmma...`): what differs from the prepared one in `wgmma.rs` is the
//! producer's weight copy (one swizzled TMA box of `(32 words, 64 rows)` per group of four
//! 64-column blocks instead of the prepared runs), the lane's four 4-byte shared loads
//! (rows `2t, 2t+1, 2t+8, 2t+9` of its word column) and the two byte permutations per
//! word pair before the conversion; the group registers, `wgmma`s, split-K sums and
//! epilogue are the same code.

use super::streamed::{a_fragment_words, decl_c, when};
use super::{s, Emit, StageWeight};
use crate::emit::Stmt;
use rcute_atom::tma::{tma_data_type, L2Promotion, OobFill, TmaEncodeArgs, TmaSwizzle};
use rcute_atom::Element;
use rcute_collective::awq_wgmma::WGMMA_BK;
use rcute_collective::awq_wgmma_checkpoint::{pair_selector, BOX_BYTES, BOX_WORDS};

/// Bytes between a lane's rows `2t` and `2t + 8` in a box (8 rows of 128 bytes: the
/// swizzle's period, so the same chunk).
const ROWS_8: i64 = 8 * 128;

/// Bytes of a k16 step's 16 rows in a box.
const STEP_BYTES: i64 = 16 * 128;

/// The TMA map of the checkpoint's `qweight`: `[K, N/8]` 32-bit words, rows `N/2` bytes
/// apart, boxes of `(32 words, 64 rows)` with the 128-byte swizzle, zero fill past K and
/// N/8.
pub(super) fn qweight_tensor_map(k: i32, n: i32) -> TmaEncodeArgs {
    let words = (n.max(0) / 8) as u64;
    TmaEncodeArgs {
        data_type: tma_data_type(Element::U32).expect("32-bit words have a TMA type"),
        rank: 2,
        global_dim: vec![words, k.max(0) as u64],
        global_strides: vec![4 * words],
        box_dim: vec![BOX_WORDS as u32, WGMMA_BK as u32],
        element_strides: vec![1, 1],
        interleave: 0,
        swizzle: TmaSwizzle::B128.code(),
        l2_promotion: L2Promotion::B256.code(),
        oob_fill: OobFill::Zero.code(),
    }
}

impl Emit<'_> {
    /// The producer's weight of k-tile `kt` into `stage`: the count of the CTA's column
    /// groups inside N, its transaction bytes and one TMA box per group.
    pub(super) fn checkpoint_stage_weight(&self) -> StageWeight {
        let w = self.wg();
        let load = &w.tma.snippet.name;
        let count = decl_c(
            "const uint32_t",
            "boxes",
            "(cols + 255u) / 256u",
            "column groups of 4 blocks inside N: one box each",
        );
        let copies = vec![
            Stmt::Comment(format!(
                "box h: qweight words n0 / 8 + {BOX_WORDS} h .. + {BOX_WORDS} of rows 64 kt .. + 64 at + {BOX_BYTES} h (128-byte swizzle; rows past K and words past N / 8 zero-filled, and counted)"
            )),
            Stmt::unrolled(
                "h",
                w.wgs_n,
                vec![when(
                    "h < boxes",
                    vec![s(format!(
                        "{load}(smem + {}u + stage * {}u + h * {BOX_BYTES}u, &tmap_w, full, (n0 >> 3) + {BOX_WORDS} * h, kt * {WGMMA_BK})",
                        w.w_offset, w.w_stage_bytes
                    ))],
                )],
            ),
        ];
        StageWeight {
            count,
            bytes: format!("boxes * {BOX_BYTES}u"),
            copies,
        }
    }

    /// A consumer lane's address of its row-`2t` word in stage 0, the distance to its
    /// row-`2t + 1` word, its `PRMT` selector and the permuted, converted pairs.
    pub(super) fn checkpoint_lane(&self) -> Vec<Stmt> {
        let w = self.wg();
        vec![
            Stmt::Comment(
                "the lane's words in stage 0: word column 8 (wbl % 4) + g of rows 2t, 2t + 1 (+ 8) of its group's box; the box's 128-byte swizzle puts word c of row r at 128 r + 16 ((c / 4) ^ (r % 8)) + 4 (c % 4) (awq_wgmma_checkpoint::smem_offset)".into(),
            ),
            decl_c("const int", "cc", "2 * (wbl & 3) + (g >> 2)", "the word column's 16-byte chunk"),
            Stmt::decl(
                "const unsigned char*",
                "wsm",
                format!(
                    "smem + {} + {BOX_BYTES} * (wbl >> 2) + 256 * t + 16 * (cc ^ (2 * t)) + 4 * (g & 3)",
                    w.w_offset
                ),
            ),
            decl_c(
                "const int",
                "wodd",
                "128 + 16 * ((cc ^ (2 * t + 1)) - (cc ^ (2 * t)))",
                "row 2t + 1's word minus row 2t's",
            ),
            decl_c(
                "const uint32_t",
                "csel",
                format!("{:#06x}u + 0x1111u * (r0 >> 1)", pair_selector(0)),
                "PRMT of the warpgroup's first word pair p: bytes p, p + 2 of two rows (awq_wgmma_checkpoint::pair_selector)",
            ),
            Stmt::Decl {
                ty: "uint32_t".into(),
                name: "wq[2][4]".into(),
                init: None,
                comment: Some(
                    "the lane's checkpoint words (rows 2t, 2t+1, 2t+8, 2t+9) of the steps of slot 0 / 1".into(),
                ),
            },
            Stmt::Decl {
                ty: "uint32_t".into(),
                name: "qa[2][4], qb[2][4]".into(),
                init: None,
                comment: Some(
                    "a word pair's converted PRMT of rows (2t, 2t+1) / (2t+8, 2t+9): pair j = column 8g + 4p + 2j (j < 2) or 8g + 4p + 2(j - 2) + 1".into(),
                ),
            },
        ]
    }

    /// The lane's four words of k16 block `kb` of the current stage into `wq[dst]`.
    pub(super) fn checkpoint_lds(&self, kb: &str, dst: &str) -> Stmt {
        let at = if kb == "0" {
            "wst".to_string()
        } else {
            format!("wst + {kb} * {STEP_BYTES}")
        };
        let offs = ["", " + wodd", &format!(" + {ROWS_8}"), &format!(" + wodd + {ROWS_8}")];
        Stmt::Block(
            offs.iter()
                .enumerate()
                .map(|(i, o)| {
                    Stmt::assign(
                        format!("wq[{dst}][{i}]"),
                        format!("*reinterpret_cast<const uint32_t*>({at}{o})"),
                    )
                })
                .collect(),
        )
    }

    /// Word `i`'s A fragment `dst[0..4]` from the words of slot `slot`: the first word of a
    /// pair permutes and converts both row pairs; word `i` takes pairs `i % 2`, `i % 2 + 2`
    /// of each (its fragment scaled by 16 with f16's one-shift conversion for odd `i`).
    pub(super) fn checkpoint_convert(&self, slot: &str, dst: &str) -> Vec<Stmt> {
        let cvt = &self.p.convert_x16.name;
        let perm =
            |a: usize, b: usize| format!("__byte_perm(wq[{slot}][{a}], wq[{slot}][{b}], csel + 0x1111u * (i >> 1))");
        let (qa, qb) = (format!("qa[{slot}]"), format!("qb[{slot}]"));
        let regs = [
            format!("{qa}[i & 1]"),
            format!("{qa}[(i & 1) + 2]"),
            format!("{qb}[i & 1]"),
            format!("{qb}[(i & 1) + 2]"),
        ];
        [
            vec![
                Stmt::Comment("a word pair starts: rows (2t, 2t+1) and (2t+8, 2t+9) byte-permuted, converted".into()),
                when(
                    "(i & 1) == 0",
                    vec![
                        s(format!("{cvt}({}, {qa})", perm(0, 1))),
                        s(format!("{cvt}({}, {qb})", perm(2, 3))),
                    ],
                ),
            ],
            self.swap_ab_halves([&regs[0], &regs[1], &regs[2], &regs[3]], [Some("i & 1"); 4], "i"),
            a_fragment_words(dst),
        ]
        .concat()
    }
}
