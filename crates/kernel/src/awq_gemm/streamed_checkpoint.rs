//! The register-streamed decode kernel on AutoAWQ's checkpoint words
//! ([`rcute_collective::awq_streamed_checkpoint`]): what differs from the prepared one in
//! `streamed.rs` is where a lane's words come from (four 4-byte loads of rows `2t, 2t+1,
//! 2t+8, 2t+9` in word column `8 wb + g`) and two byte permutations per row pair before
//! the conversion; the fragments, the group registers, the MMAs and the epilogue are the
//! same code.

use super::{s, Emit};
use crate::emit::{Function as CFunction, Stmt};
use rcute_collective::awq_streamed_checkpoint::{PRMT_HIGH_BYTES, PRMT_LOW_BYTES};

impl Emit<'_> {
    /// `{name}_rows`: the four checkpoint words of one lane and k16 step.
    pub(super) fn checkpoint_rows_fn(&self) -> CFunction {
        let load = &self.st().load.snippet.name;
        let rows = [
            ("0", "src"),
            ("1", "src + n8"),
            ("8", "src + 8 * n8"),
            ("9", "src + 9 * n8"),
        ];
        let mut body = vec![Stmt::Decl {
            ty: "uint32_t".into(),
            name: "r0[1], r1[1], r8[1], r9[1]".into(),
            init: None,
            comment: Some("rows 2t, 2t+1, 2t+8, 2t+9".into()),
        }];
        body.extend(rows.iter().map(|(r, at)| s(format!("{load}({at}, r{r})"))));
        body.extend(
            rows.iter()
                .enumerate()
                .map(|(i, (r, _))| Stmt::assign(format!("w[{i}]"), format!("r{r}[0]"))),
        );
        CFunction {
            qualifiers: "__device__ __forceinline__".into(),
            ret: "void".into(),
            name: format!("{}_rows", self.name),
            params: vec![
                ("const uint32_t*".into(), "src".into()),
                ("const int".into(), "n8".into()),
                ("uint32_t".into(), "(&w)[4]".into()),
            ],
            doc: vec![
                "w = qweight [K, N/8] words of rows 2t, 2t+1, 2t+8, 2t+9 of a k16 step (src: row 2t, the lane's word column; rows are n8 = N/8 words apart).".into(),
            ],
            body,
        }
    }

    /// The prologue's weight source: the lane's word column, its pointer at row `2t` of
    /// its first step, the per-step stride (16 rows).
    pub(super) fn checkpoint_source(&self) -> Vec<Stmt> {
        vec![
            Stmt::Comment(
                "qweight [K, N/8] int32 (AutoAWQ): lane (g, t) reads word column wcol of rows 16 step + 2t + (0, 1, 8, 9) (awq_streamed_checkpoint::lane_rows)".into(),
            ),
            Stmt::Decl {
                ty: "const int".into(),
                name: "wcol".into(),
                init: Some("min(8 * wb + g, N8 - 1)".into()),
                comment: Some("columns 8 wcol .. + 8; past N the last word column (in bounds, never stored)".into()),
            },
            Stmt::decl("const long long", "wstride", "16LL * N8"),
            Stmt::decl(
                "const uint32_t*",
                "wsrc",
                "qweight + (long long)(k0 + 16 * s_begin + 2 * t) * N8 + wcol",
            ),
        ]
    }

    /// The step's A fragments from ring slot `d` (the words of rows `2t, 2t+1, 2t+8,
    /// 2t+9`): two byte permutations per row pair, each converted into the pairs `r` of
    /// columns `2r` (low bytes) or `2r + 1` (high bytes), then word `r`'s fragment and MMAs.
    pub(super) fn checkpoint_fragments(&self) -> Vec<Stmt> {
        let cvt = &self.p.convert_x16.name;
        let perm = |a: usize, b: usize, sel: u32| format!("__byte_perm(wr[d][{a}], wr[d][{b}], {sel:#06x})");
        vec![
            Stmt::Decl {
                ty: "uint32_t".into(),
                name: "lo[4], hi[4], lo8[4], hi8[4]".into(),
                init: None,
                comment: Some(
                    "pair r: column 2r (lo) or 2r + 1 (hi) of rows 2t, 2t+1 (lo8, hi8: 2t+8, 2t+9) as {k, k + 1}".into(),
                ),
            },
            Stmt::Comment("bytes 0, 1 of two rows side by side (nibbles 0..3: columns 0, 2, 4, 6), then bytes 2, 3 (nibbles 4..7: columns 1, 3, 5, 7)".into()),
            s(format!("{cvt}({}, lo)", perm(0, 1, PRMT_LOW_BYTES))),
            s(format!("{cvt}({}, hi)", perm(0, 1, PRMT_HIGH_BYTES))),
            s(format!("{cvt}({}, lo8)", perm(2, 3, PRMT_LOW_BYTES))),
            s(format!("{cvt}({}, hi8)", perm(2, 3, PRMT_HIGH_BYTES))),
            Stmt::unrolled(
                "r",
                4,
                self.streamed_word(["lo[r]", "hi[r]", "lo8[r]", "hi8[r]"], [Some("r & 1"); 4]),
            ),
        ]
    }
}
