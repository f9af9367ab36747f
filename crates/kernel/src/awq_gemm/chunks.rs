//! Which chunk of a stage each copy of the AWQ GEMM moves: the part of a copy kind that the
//! two stage loaders ([`super::load`], [`super::load_per_copy`]) share: its name prefix,
//! element type, copies per thread, chunks per stage, the coordinates of copy `c` and
//! whether they lie inside the problem. How a copy finds its source and destination is
//! each loader's own.

use super::Emit;
use crate::emit::Stmt;
use rcute_collective::awq_mainloop::{AWQ_BK, GROUP_SLOTS};

/// The chunks of one copy kind of a stage.
pub(super) struct Chunks {
    pub prefix: &'static str,
    pub ty: String,
    pub copies: i64,
    pub chunks: i64,
    /// The thread-constant coordinates of copy `c` (declarations).
    pub coords: Vec<Stmt>,
    pub comment: String,
    /// Whether the copy's rows / columns lie inside the problem (k-invariant).
    pub valid: String,
}

pub(super) fn decl(name: &str, e: String) -> Stmt {
    Stmt::decl("const int", name, e)
}

impl Chunks {
    /// Whether copy `c` of a thread (of `threads`) moves a chunk of the stage that lies
    /// inside the problem: `valid`, and `c < chunks` where the copies overrun the stage.
    pub fn in_stage_and_problem(&self, threads: i64) -> String {
        if self.copies * threads == self.chunks {
            self.valid.clone()
        } else {
            format!("c < {} && {}", self.chunks, self.valid)
        }
    }
}

impl Emit<'_> {
    /// `c`: the stage chunk of a thread's copy `i` (copies stride by the CTA's threads).
    pub(super) fn copy_index(&self) -> Stmt {
        Stmt::decl("const int", "c", format!("threadIdx.x + i * {}", self.p.threads))
    }

    /// The `(BM, 64)` tile of `x`: 16-byte chunks, eight per row.
    pub(super) fn x_chunks(&self) -> Chunks {
        let p = self.p;
        Chunks {
            prefix: "a",
            ty: format!("const {}*", self.ty),
            copies: p.a_copies,
            chunks: p.config.tile[0] * AWQ_BK / 8,
            coords: vec![decl("r", "c >> 3".into()), decl("ch", "c & 7".into())],
            comment: "chunk c of the (BM, 64) x tile: row c / 8, 16-byte chunk c % 8; Sw<3,3,3> o (BM,64):(64,1) puts it at chunk ch ^ (r % 8)".into(),
            valid: "m0 + r < M".into(),
        }
    }

    /// The `(GROUP_SLOTS, BN)` scales of a stage: 16-byte chunks of 8 columns.
    pub(super) fn scale_chunks(&self) -> Chunks {
        let p = self.p;
        let spr = p.config.tile[1] / 8; // 16-byte scale chunks (8 columns) per group row
        Chunks {
            prefix: "s",
            ty: format!("const {}*", self.ty),
            copies: p.s_copies,
            chunks: GROUP_SLOTS * spr,
            coords: vec![decl("slot", format!("c / {spr}")), decl("w", format!("c % {spr}"))],
            comment: format!(
                "chunk c of the ({GROUP_SLOTS}, BN) scales [K/G, N]: group slot c / {spr} (group row g0 or g1), columns 8 (c % {spr}) .. + 8"
            ),
            valid: "n0w + w < N8".into(),
        }
    }

    /// The `(GROUP_SLOTS, BN/8)` zero words of a stage, `b_vector_words` per copy.
    pub(super) fn zero_chunks(&self) -> Chunks {
        let p = self.p;
        let vw = p.config.b_vector_words;
        let zpr = p.config.tile[1] / 8 / vw;
        Chunks {
            prefix: "z",
            ty: "const uint32_t*".into(),
            copies: p.z_copies,
            chunks: GROUP_SLOTS * zpr,
            coords: vec![
                decl("slot", format!("c / {zpr}")),
                decl(
                    "w",
                    if vw == 1 {
                        format!("c % {zpr}")
                    } else {
                        format!("(c % {zpr}) * {vw}")
                    },
                ),
            ],
            comment: format!("copy c of the ({GROUP_SLOTS}, BN/8) zero words qzeros [K/G, N/8]: group slot c / {zpr}"),
            valid: "n0w + w < N8".into(),
        }
    }
}
