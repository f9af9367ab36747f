//! The clustered split-K sum of the streamed kernel
//! ([`rcute_collective::awq_streamed::AwqStreamed::clustered`]: on sm_90 the splits of a
//! tile run as one `(1, 1, splits)` cluster): the places where its two forms differ. By
//! loads (`streamed_cluster_sum` in `streamed.rs`) every split leaves its partial chunks in
//! its own shared memory and rank 0 reads them between two cluster barriers. By pushes
//! (`AwqGemmConfig::cluster_push`, units `..._cpush`), without a cluster barrier after the
//! loop:
//!
//! * before the stream (the prelude, before the grid-dependency wait) rank 0 initialises
//!   its push barrier, an mbarrier after everything the CTA uses itself
//!   ([`rcute_collective::awq_streamed::AwqStreamed::cluster_offset_for`]), with one
//!   arrival made at once with the peers' partial bytes as expected transactions, and
//!   publishes it; then every thread of the cluster arrives (relaxed) and waits once: the
//!   barrier is initialised before any peer can push, and every arrive has its wait;
//! * after the loop each other rank pushes its partial chunks straight from registers
//!   into rank 0's push area (`st.async`, each completing its bytes on rank 0's barrier),
//!   then exits;
//! * rank 0 waits on its barrier's phase 0 (`mbarrier.try_wait.parity`) and adds the
//!   peers' chunks to its own in rank order: `0 + rank 0 + rank 1 + ...`, the sum by
//!   loads' (bit-identical).
//!
//! Why: the sum by loads cost 1.3 us of the 7.0 at 1 x 4096 x 4096 on an H100
//! (BENCHMARKS.md, Session 24, helper awqfix): its first barrier's release arrive is a
//! GPU-scope fence (`MEMBAR.ALL.GPU`) in the threads that wrote chunks, its second a round
//! trip that kept the peers alive for rank 0's remote loads. A peer needs stay alive for
//! nothing: rank 0 holds the memory it writes and waits for every byte before it reads or
//! exits. Measured (helpers awqclu, awqpush): 1 / 8 / 16 x 4096 x 4096 -4 to -7 %; the
//! same unit with the push code, launched in one split, 4.5-5 % slower at 1 x 14336 x
//! 4096, hence an option of its own that only the two-split rules take.
//!
//! The prelude's wait: session 24's form had every thread arrive there and only the peers
//! wait, after the loop (rank 0 never waited). Under compute-sanitizer's racecheck that
//! launch never finished, with the `st.async` pushes and with plain remote stores and a
//! remote release arrive alike; with rank 0 waiting on the cluster barrier (here in the
//! prelude, for every rank) racecheck completes with 0 hazards (BENCHMARKS.md, Session 25,
//! helper awqpush). The wait costs nothing measurable: the cluster's CTAs start together,
//! and it is over before the grid-dependency wait.

use super::streamed::{decl_c, when};
use super::{s, Emit};
use crate::emit::Stmt;
use rcute_collective::awq_streamed::{CLUSTER_BARRIER_BYTES, MAX_CLUSTER_SPLITS};

impl Emit<'_> {
    /// `clustered`, the push area's offset `cluster_off` and the address `cbar` of its
    /// barrier: declared twice, in the prelude's block and before the epilogue's chunks,
    /// so that nothing of them is live through the loop (the kernels of 768 threads have
    /// 80 registers).
    fn cluster_decls(&self) -> Vec<Stmt> {
        let st = self.st();
        let own = st.ring_bytes() + st.group_slot_bytes();
        vec![
            decl_c(
                "const bool",
                "clustered",
                "splits > 1 && rc_cluster_size_sm90() == (uint32_t)splits",
                "sm_90, the splits of this tile launched as one (1, 1, splits) cluster: rank = blockIdx.z",
            ),
            decl_c(
                "const int",
                "cluster_off",
                format!(
                    "max((rows + 1) * {} + {own}, {} * rows)",
                    4 * st.x_row_words,
                    st.red_bytes_for(1)
                ),
                "the push area, after the staged rows, zero row, ring and group slots or the partial tiles (AwqStreamed::cluster_offset_for)",
            ),
            decl_c(
                "const uint32_t",
                "cbar",
                "static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + cluster_off",
                &format!(
                    "the push barrier (mbarrier); rank r's chunk c at cbar + {CLUSTER_BARRIER_BYTES} + (r - 1) * {} + 32 c",
                    st.part_bytes
                ),
            ),
        ]
    }

    /// The prelude's part (a block of its own): rank 0's barrier init with the bytes its
    /// peers push (`splits - 1` peers x 32 bytes per in-bounds chunk: `rows` rows x the
    /// tile's word columns below `N8`), then the cluster barrier (relaxed arrive and wait
    /// by every thread). Touches only this CTA's shared memory.
    fn cluster_setup(&self) -> Vec<Stmt> {
        let wn = self.st().col_blocks;
        let init = vec![
            when(
                "blockIdx.z == 0 && threadIdx.x == 0",
                vec![
                    Stmt::Comment(format!(
                        "one arrival, made now with the peers' bytes: (splits - 1) x 32 bytes x rows x the tile's {} word columns below N8",
                        8 * wn
                    )),
                    s(format!(
                        "rc_push_barrier_init_sm90(cbar, (uint32_t)((splits - 1) * 32 * rows * min({}, N8 - (int)blockIdx.x * {})))",
                        8 * wn,
                        8 * wn
                    )),
                ],
            ),
            Stmt::Comment(
                "every thread of the cluster arrives and waits once: rank 0's barrier is initialised (published by its own fence) before any peer pushes"
                    .into(),
            ),
            s("rc_cluster_sync_relaxed_sm90()"),
        ];
        vec![
            Stmt::Comment("the clustered split-K sum's push barrier (streamed_cluster.rs)".into()),
            Stmt::Block([self.cluster_decls(), vec![when("clustered", init)]].concat()),
        ]
    }

    /// The prelude's part with the sum by pushes ([`Self::cluster_setup`]); none by loads.
    pub(super) fn cluster_prelude(&self) -> Vec<Stmt> {
        if self.st().push {
            self.cluster_setup()
        } else {
            vec![]
        }
    }

    /// After the partial tiles' pointer, with the sum by loads: where a clustered split
    /// leaves its partial chunks for rank 0 (after the partial tiles); none by pushes.
    pub(super) fn cluster_part_off(&self) -> Vec<Stmt> {
        if self.st().push {
            return vec![];
        }
        vec![decl_c(
            "const int",
            "part_off",
            format!("{} * rows", self.st().part_offset_for(1)),
            "a clustered split's partial chunks: after the partial tiles (AwqStreamed::part_offset_for)",
        )]
    }

    /// Before the epilogue's chunks: `clustered` (by loads), or the declarations again (by
    /// pushes, [`Self::cluster_decls`]).
    pub(super) fn cluster_before_chunks(&self) -> Vec<Stmt> {
        if self.st().push {
            return self.cluster_decls();
        }
        vec![decl_c(
            "const bool",
            "clustered",
            "splits > 1 && rc_cluster_size_sm90() == (uint32_t)splits",
            "sm_90, the splits of this tile launched as one (1, 1, splits) cluster",
        )]
    }

    /// A clustered split's chunk `c` (its sum `v[8]`): by loads into the split's own
    /// partial chunks (`part[c]`), by pushes [`Self::cluster_chunk`].
    pub(super) fn cluster_partial(&self, store: &str) -> Vec<Stmt> {
        if self.st().push {
            return self.cluster_chunk(store);
        }
        vec![
            Stmt::Comment(
                "this split's partial chunk c to part[c] (shared, at byte part_off) for rank 0 of the cluster".into(),
            ),
            Stmt::decl("float4*", "pt", "reinterpret_cast<float4*>(smem + part_off + 32 * c)"),
            s("pt[0] = make_float4(v[0], v[1], v[2], v[3])"),
            s("pt[1] = make_float4(v[4], v[5], v[6], v[7])"),
        ]
    }

    /// After the epilogue's chunks: one split and (by pushes) a clustered one are done; by
    /// loads the clustered sum follows (`streamed_cluster_sum`).
    pub(super) fn cluster_after_chunks(&self) -> Vec<Stmt> {
        if self.st().push {
            return vec![when("splits == 1 || clustered", vec![Stmt::Return])];
        }
        vec![
            when("splits == 1", vec![Stmt::Return]),
            when("clustered", self.streamed_cluster_sum()),
        ]
    }

    /// Chunk `c` of a clustered split, its sum `v[8]` in registers: rank 0 waits for the
    /// pushes, adds the peers' chunks in rank order and stores; a peer pushes its chunk.
    fn cluster_chunk(&self, store: &str) -> Vec<Stmt> {
        let part = self.st().part_bytes;
        let peers = MAX_CLUSTER_SPLITS as i64 - 1;
        let bits = |h: usize| {
            let w: Vec<String> = (0..4).map(|j| format!("__float_as_uint(v[{}])", 4 * h + j)).collect();
            w.join(", ")
        };
        vec![Stmt::If {
            cond: "blockIdx.z == 0".into(),
            then: vec![
                Stmt::Comment("rank 0: every peer's bytes have landed (phase 0 of the push barrier)".into()),
                s("rc_mbarrier_wait_parity_sm90(cbar, 0u)"),
                Stmt::Comment("rank order from zero, as the sum of the splits always was: 0 + rank 0 + rank 1 + ...".into()),
                Stmt::Decl {
                    ty: "float".into(),
                    name: "u[8]".into(),
                    init: None,
                    comment: None,
                },
                Stmt::unrolled("j", 8, vec![s("u[j] = 0.f + v[j]")]),
                Stmt::Comment(format!(
                    "peer p = rank p + 1 (at most {peers}): its chunk c at cbar + {CLUSTER_BARRIER_BYTES} + p * {part} + 32 c"
                )),
                Stmt::unrolled(
                    "p",
                    peers,
                    vec![when(
                        "p + 1 < splits",
                        vec![
                            Stmt::decl(
                                "const float4*",
                                "pp",
                                format!(
                                    "reinterpret_cast<const float4*>(smem + cluster_off + {CLUSTER_BARRIER_BYTES} + p * {part} + 32 * c)"
                                ),
                            ),
                            Stmt::decl("const float4", "lo", "pp[0]"),
                            Stmt::decl("const float4", "hi", "pp[1]"),
                            s("u[0] += lo.x; u[1] += lo.y; u[2] += lo.z; u[3] += lo.w"),
                            s("u[4] += hi.x; u[5] += hi.y; u[6] += hi.z; u[7] += hi.w"),
                        ],
                    )],
                ),
                s(format!("{store}(out, bias, (long long)row * ldo + 8 * wc, 8 * wc, u)")),
            ],
            otherwise: vec![
                Stmt::Comment(format!(
                    "a peer: chunk c into rank 0's push area at cbar + {CLUSTER_BARRIER_BYTES} + (rank - 1) * {part} + 32 c, 16 bytes a push, each completing on rank 0's barrier"
                )),
                decl_c(
                    "const uint32_t",
                    "dst",
                    format!("cbar + {CLUSTER_BARRIER_BYTES} + (blockIdx.z - 1) * {part} + 32 * c"),
                    "this CTA's offset: the push maps it (and cbar) into rank 0",
                ),
                Stmt::decl("const uint32_t", "lo[4]", format!("{{{}}}", bits(0))),
                Stmt::decl("const uint32_t", "hi[4]", format!("{{{}}}", bits(1))),
                s("rc_st_async_b32x4(dst, cbar, 0u, lo)"),
                s("rc_st_async_b32x4(dst + 16, cbar, 0u, hi)"),
            ],
        }]
    }
}
