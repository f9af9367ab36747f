//! The prepared kernel's k16 step ([`rcute_collective::awq_prepared`]): one 16-byte shared
//! load per lane and slice, each word converted straight into two B fragments (no byte
//! permutation), the zero subtracted exactly and the scale applied with one multiply.
//!
//! Per group the lane keeps, for the eight columns `8g + j` of its slice, the scale pair
//! `{s, s}`, the biased zero `{bias + z, bias + z}` and (f16) `-(64 + z)`; per word `r`
//! (tiles `2r`, `2r + 1`) the f16 conversion ([`rcute_atom::convert_int4`]'s `x16` atom,
//! one shift) gives `{1024 + q}` pairs for the `b0` registers, fixed by `hsub2` with the
//! biased zero, and `{1024 + 16 q}` pairs for the `b1` registers, fixed by
//! `hfma2(v, 1/16, -(64 + z))`; both are exactly `q - z`, and `hmul2` by the scale rounds
//! once, so the weight the MMA sees is bit-exactly `awq_dequantize`'s. bf16 converts with
//! one shift per pair and subtracts the biased zero from all four.

use super::{s, Emit};
use crate::emit::Stmt;
use rcute_collective::awq_mainloop::{AWQ_BK, GROUP_SLOTS};

impl Emit<'_> {
    /// Whether the f16 `x16` conversion is used (f16 prepared kernels).
    pub(super) fn x16(&self) -> bool {
        self.ty == "__half"
    }

    /// The per-group registers of the prepared kernel (setup).
    pub(super) fn prepared_group_regs(&self) -> Vec<Stmt> {
        let ns = self.p.ns;
        let mut v = vec![
            Stmt::Comment("per slice and column 8g + j of the group: {s, s}, {bias + z, bias + z}".into()),
            Stmt::decl("uint32_t", &format!("sc[{ns}][8]"), "{}"),
            Stmt::decl("uint32_t", &format!("zl[{ns}][8]"), "{}"),
        ];
        if self.x16() {
            v.push(Stmt::Comment(
                "f16: -(64 + z) per column, and 1/16 (the x16 conversion's odd pairs)".into(),
            ));
            v.push(Stmt::decl("uint32_t", &format!("zh[{ns}][8]"), "{}"));
            v.push(Stmt::decl("const __half2", "x16_inv", "__float2half2_rn(0.0625f)"));
            v.push(Stmt::decl("const __half2", "z_shift", "__float2half2_rn(960.f)"));
        }
        v
    }

    /// Slice `si`'s group registers from group slot `kk / 2` of the stage.
    fn prepared_group(&self) -> Vec<Stmt> {
        let p = self.p;
        let bn = p.config.tile[1];
        let cvt = &p.convert.name;
        let mut per_col = vec![
            Stmt::Comment("low (j even) or high (j odd) half of the pair holding column j, in both halves".into()),
            Stmt::decl("const uint32_t", "sel", "(j & 1) ? 0x3232 : 0x1010"),
            Stmt::assign("sc[si][j]", "__byte_perm(sw[j >> 1], 0, sel)"),
            Stmt::assign("zl[si][j]", "__byte_perm(zq[j >> 1], 0, sel)"),
        ];
        if self.x16() {
            per_col.push(Stmt::Comment("960 - (1024 + z) = -(64 + z), exact".into()));
            per_col.push(Stmt::decl(
                "const __half2",
                "zn",
                "__hsub2(z_shift, *reinterpret_cast<const __half2*>(&zl[si][j]))",
            ));
            per_col.push(Stmt::assign("zh[si][j]", "*reinterpret_cast<const uint32_t*>(&zn)"));
        }
        vec![
            Stmt::decl("const int", "wl", "wword + 8 * si + g"),
            Stmt::Comment(format!(
                "group slot kk / 2 of this stage: scales ({GROUP_SLOTS}, {bn}) of columns 8 wl .. + 8, zero word wl of ({GROUP_SLOTS}, {})",
                bn / 8
            )),
            Stmt::decl(
                "const uint4",
                "s4",
                format!(
                    "*reinterpret_cast<const uint4*>(sS + slot * {} + (kk >> 1) * {bn} + 8 * wl)",
                    GROUP_SLOTS * bn
                ),
            ),
            Stmt::decl("const uint32_t", "sw[4]", "{s4.x, s4.y, s4.z, s4.w}"),
            Stmt::Decl {
                ty: "uint32_t".into(),
                name: "zq[4]".into(),
                init: None,
                comment: Some("{bias + z} of columns (2i, 2i + 1)".into()),
            },
            s(format!(
                "{cvt}(sZ[slot * {} + (kk >> 1) * {} + wl], zq)",
                GROUP_SLOTS * bn / 8,
                bn / 8
            )),
            Stmt::unrolled("j", 8, per_col),
        ]
    }

    /// Slice `si` of a prepared k16 step: the lane's four words, converted, dequantized,
    /// and the slice's 8 MMAs per m16 tile.
    fn prepared_slice(&self) -> Vec<Stmt> {
        let p = self.p;
        let blocks = p.config.tile[1] / 64;
        let mma = &p.mma.snippet.name;
        let ty2 = self.ty2;
        let h = |v: &str| format!("*reinterpret_cast<const {ty2}*>(&{v})");
        let (cvt, odd) = if self.x16() {
            (
                p.convert_x16.name.clone(),
                format!("__hfma2({}, x16_inv, {})", h("q[2 * u + 1]"), h("zh[si][2 * r + u]")),
            )
        } else {
            (
                p.convert.name.clone(),
                format!("__hsub2({}, {})", h("q[2 * u + 1]"), h("zl[si][2 * r + u]")),
            )
        };
        let even = format!("__hsub2({}, {})", h("q[2 * u]"), h("zl[si][2 * r + u]"));
        let sc = h("sc[si][2 * r + u]");
        vec![
            Stmt::Comment(format!(
                "prepared stage [k16 block][{blocks} 64-column blocks][32 lanes][4 words]: word r holds b0, b1 of tiles 2r, 2r + 1 (nibble pairs (0,4), (1,5), (2,6), (3,7))"
            )),
            Stmt::decl(
                "const uint4",
                "bv",
                format!(
                    "*reinterpret_cast<const uint4*>(sB + slot * {} + ((kk * {blocks} + (wword >> 3) + si) * 32 + lane) * 4)",
                    AWQ_BK * p.b_row_words
                ),
            ),
            Stmt::decl("const uint32_t", "bw[4]", "{bv.x, bv.y, bv.z, bv.w}"),
            Stmt::unrolled(
                "r",
                4,
                vec![
                    Stmt::Decl {
                        ty: "uint32_t".into(),
                        name: "q[4]".into(),
                        init: None,
                        comment: Some("biased pairs: b0, b1 of tile 2r, then of tile 2r + 1".into()),
                    },
                    s(format!("{cvt}(bw[r], q)")),
                    Stmt::unrolled(
                        "u",
                        2,
                        vec![
                            Stmt::Comment("tile 2r + u: (q - z) exactly, then one rounding in the scale product".into()),
                            Stmt::decl(&format!("const {ty2}"), "v0", format!("__hmul2({even}, {sc})")),
                            Stmt::decl(&format!("const {ty2}"), "v1", format!("__hmul2({odd}, {sc})")),
                            Stmt::decl(
                                "const uint32_t",
                                "b[2]",
                                "{*reinterpret_cast<const uint32_t*>(&v0), *reinterpret_cast<const uint32_t*>(&v1)}",
                            ),
                            Stmt::unrolled(
                                "mi",
                                p.mi,
                                vec![s(format!(
                                    "{mma}(acc[mi][si][2 * r + u], a[mi], b, acc[mi][si][2 * r + u])"
                                ))],
                            ),
                        ],
                    ),
                ],
            ),
        ]
    }

    /// The prepared k16 step after the A fragments: the group registers at the tile's first
    /// k16 step (and at its third when G = 32, the tile's second group), then every slice.
    pub(super) fn prepared_k16_tail(&self) -> Vec<Stmt> {
        let ns = self.p.ns;
        vec![
            Stmt::Comment("group registers: slot 0 at k16 step 0; slot 1 at step 2 only when G = 32 (gshift 5)".into()),
            Stmt::If {
                cond: "kk == 0 || (kk == 2 && gshift == 5)".into(),
                then: vec![Stmt::unrolled("si", ns, self.prepared_group())],
                otherwise: vec![],
            },
            Stmt::unrolled("si", ns, self.prepared_slice()),
        ]
    }
}
