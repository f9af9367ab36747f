//! The streamed decode kernel's work before its grid-dependency wait: an L2 prefetch
//! (`prefetch.global.L2`, [`rcute_atom::prefetch`]) of the bytes its first loads after the
//! wait read, so that the weight stream starts while the previous kernel of the chain
//! still runs ([`crate::grid_dependency::chain_link_with_prelude`]).
//!
//! Each warp prefetches its first `prefetch_steps` k16 steps (the launcher passes a ring's
//! worth, [`super::GeneratedAwqGemm::prefetch_steps`]: the loads issued right after the
//! wait) and the scale and zero lines of its first group. Every address is computed from
//! the kernel's parameters and the CTA's coordinates only (the setup reads no memory), and
//! lies inside `qweight`, `scales` or `qzeros`: operands no kernel of the chain writes, so
//! the prefetched lines are the bytes the loads read after the wait. `x` is the previous
//! kernel's output and is not touched before the wait.
//!
//! The prefetch pays only where this kernel's CTAs become resident before the previous
//! kernel ends: the streamed kernels trigger their dependents right after their own wait
//! when the launch asks for it ([`super::AwqGemmArgs::early_trigger`]). The ops ask for
//! both on the prepared weight only (`rcute_ops::awq::prefetch` has the measurements: the
//! checkpoint-word kernel, whose prefetch is one line per 32 bytes it reads, was slower).

use super::streamed::{decl_c, when};
use super::{s, Emit};
use crate::emit::Stmt;

impl Emit<'_> {
    /// The prelude's prefetch statements (after `streamed_setup`, whose `n_my`, `s_begin`,
    /// `k0`, `wb` and `lane` they use).
    pub(super) fn streamed_prefetch(&self) -> Vec<Stmt> {
        // with the ring issued before the wait (`eager_ring`), the steps after it
        let skip = if self.p.config.eager_ring { self.st().ring } else { 0 };
        let weight = if self.st().weight == rcute_collective::awq_streamed::StreamedWeight::Checkpoint {
            self.checkpoint_prefetch()
        } else {
            prepared_prefetch(skip)
        };
        let first_group = vec![
            Stmt::Comment(
                "the first group's scales (columns 64 wb .. + 64: one 128-byte line) and zero words (8 words): lanes 0 and 1"
                    .into(),
            ),
            decl_c(
                "const long long",
                "gz0",
                "(long long)((k0 + 16 * s_begin) / G) * N8 + 8 * wb",
                "16-byte scale unit / zero word of column block wb's first column",
            ),
            when(
                "lane == 0",
                vec![s("rc_prefetch_l2(reinterpret_cast<const uint4*>(scales) + gz0)")],
            ),
            when("lane == 1", vec![s("rc_prefetch_l2(qzeros + gz0)")]),
        ];
        vec![
            Stmt::Comment(
                "before the wait: L2 prefetch of the weight steps this warp loads first and of its first group's scale and zero lines; the chain never writes them (rcute_kernel::awq_gemm, streamed_prefetch.rs)".into(),
            ),
            when(
                format!("prefetch_steps > 0 && n_my > {skip}"),
                [
                    vec![decl_c(
                        "const int",
                        "pf",
                        if skip == 0 {
                            "min(n_my, prefetch_steps)".to_string()
                        } else {
                            format!("min(n_my - {skip}, prefetch_steps)")
                        },
                        &if skip == 0 {
                            "steps s_begin .. s_begin + pf of the warp's n_my".to_string()
                        } else {
                            format!("steps s_begin + {skip} .. s_begin + {skip} + pf of the warp's n_my")
                        },
                    )],
                    weight,
                    if skip == 0 { first_group } else { vec![] },
                ]
                .concat(),
            ),
        ]
    }

    /// AutoAWQ's checkpoint words: step `s` reads rows `k0 + 16 (s_begin + s) .. + 16` of
    /// `qweight [K, N/8]`, words `8 wb .. + 8` of each (32 bytes of one line): one
    /// prefetch per row, lane `l` rows `l, l + 32, ..`.
    fn checkpoint_prefetch(&self) -> Vec<Stmt> {
        vec![
            Stmt::Comment(
                "checkpoint words: rows k0 + 16 s_begin + r, r < 16 pf, words 8 wb .. + 8 (one line a row)".into(),
            ),
            Stmt::Loop {
                init: "int r = lane".into(),
                cond: "r < 16 * pf".into(),
                step: "r += 32".into(),
                body: vec![s(
                    "rc_prefetch_l2(qweight + (long long)(k0 + 16 * s_begin + r) * N8 + 8 * wb)",
                )],
            },
        ]
    }
}

/// The prepared weight: step `s` of the warp is the 512 contiguous bytes (4 lines) of k16
/// block `k0 / 16 + s_begin + s`, column block `wb` (16-byte unit `(N / 2) kb + 32 wb`),
/// blocks `8 N` bytes apart; lane `l` prefetches line `l % 4` of step `l / 4` (8 steps
/// an instruction).
/// With `skip` steps issued before the wait (`eager_ring`), the steps after them.
fn prepared_prefetch(skip: i64) -> Vec<Stmt> {
    let (first, what) = if skip == 0 {
        (
            "s_begin".to_string(),
            "the warp's first step (the ring's first load, lane 0)",
        )
    } else {
        (
            format!("s_begin + {skip}"),
            "the warp's first step after the ring (lane 0)",
        )
    };
    vec![
        decl_c(
            "const char* const",
            "wpf",
            format!("reinterpret_cast<const char*>(reinterpret_cast<const uint4*>(qweight) + (long long)((k0 >> 4) + {first}) * (N >> 1) + 32 * wb)"),
            what,
        ),
        Stmt::Loop {
            init: "int i = lane".into(),
            cond: "i < 4 * pf".into(),
            step: "i += 32".into(),
            body: vec![s("rc_prefetch_l2(wpf + (long long)(i >> 2) * (8LL * N) + 128 * (i & 3))")],
        },
    ]
}
