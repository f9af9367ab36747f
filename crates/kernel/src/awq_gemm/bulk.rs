//! The prepared AWQ kernel with the SM90 bulk producer ([`rcute_collective::awq_bulk`]):
//! the ring's barriers set up once, the producer warp's copy loop, and the consumer warps'
//! mainloop (wait for the stage, the prepared k16 steps of the `cp.async` kernel, release
//! the stage).

use super::{s, Emit};
use crate::emit::Stmt;
use rcute_collective::awq_bulk::{AwqBulkRing, CONSUMER_BARRIER, FULL_ARRIVALS, SCALE_LANE, WEIGHT_LANES, ZERO_LANE};
use rcute_collective::awq_mainloop::{AWQ_BK, GROUP_SLOTS};

impl Emit<'_> {
    fn ring(&self) -> &AwqBulkRing {
        self.p.bulk.as_ref().expect("bulk kernels have a ring")
    }

    /// The CTA barrier of the epilogue: `__syncthreads()`, or the consumers' named barrier
    /// in a bulk kernel (the producer warp has left).
    pub(super) fn cta_sync(&self) -> String {
        match &self.p.bulk {
            Some(r) => format!("rc_named_barrier_sync({CONSUMER_BARRIER}, {})", r.consumer_threads),
            None => "__syncthreads()".into(),
        }
    }

    /// After the setup: the ring's barriers (thread 0), one CTA barrier.
    pub(super) fn ring_setup(&self) -> Vec<Stmt> {
        let p = self.p;
        let r = self.ring();
        let stages = p.config.stages;
        vec![
            Stmt::Comment(format!(
                "mbarrier ring: full[s] at smem + {} + 8 s (lane 0 with the bulk bytes, then one cp.async arrival per producer lane: {FULL_ARRIVALS}), empty[s] at + 8 ({stages} + s) ({} consumer arrivals)",
                r.barrier_offset, r.consumer_threads
            )),
            Stmt::decl(
                "const uint32_t",
                "bar_full",
                format!("static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + {}", r.barrier_offset),
            ),
            Stmt::decl("const uint32_t", "bar_empty", format!("bar_full + {}", 8 * stages)),
            Stmt::If {
                cond: "threadIdx.x == 0".into(),
                then: vec![
                    Stmt::unrolled(
                        "st",
                        stages as i64,
                        vec![
                            s(format!("rc_mbarrier_init(bar_full + 8 * st, {FULL_ARRIVALS}u)")),
                            s(format!("rc_mbarrier_init(bar_empty + 8 * st, {}u)", r.consumer_threads)),
                        ],
                    ),
                    s("rc_fence_mbarrier_init()"),
                ],
                otherwise: vec![],
            },
            s("__syncthreads()"),
        ]
    }

    /// The producer warp: per k-tile, wait for the stage to be free, add up and announce
    /// this stage's bytes, issue the bulk copies (see `rcute_collective::awq_bulk`).
    pub(super) fn producer(&self) -> Vec<Stmt> {
        let p = self.p;
        let r = self.ring();
        let [bm, bn, _] = p.config.tile;
        let stages = p.config.stages;
        let copy = &r.copy.snippet.name;
        let b_words = AWQ_BK * p.b_row_words;
        let x_chunk = vec![
            Stmt::decl("const int", "c", "lane + 32 * j"),
            Stmt::decl("const int", "xr", "c >> 3"),
            Stmt::decl("const int", "ch", "c & 7"),
            Stmt::decl("const bool", "ok", "m0 + xr < M && k0 + 8 * ch < K"),
            Stmt::Comment(
                "Sw<3,3,3> o (BM,64):(64,1): chunk ch of row xr at chunk ch ^ (xr % 8); zeros past M or K".into(),
            ),
            s(format!(
                "{}(sA_base + 2 * (slot * {} + xr * 64 + ((ch ^ (xr & 7)) << 3)), ok ? x + (long long)(m0 + xr) * ldx + k0 + 8 * ch : x, ok ? 16u : 0u)",
                r.copy_x.name,
                bm * AWQ_BK
            )),
        ];
        let group_row = |slot: &str| format!("min((k0 + 32 * {slot}) >> gshift, groups - 1)");
        let run = vec![
            Stmt::Comment(format!(
                "lanes 0..{WEIGHT_LANES}: k16 block `lane` of the prepared tile, one run of 8 cols bytes from word 2 N (k0 / 16 + lane) + 2 n0"
            )),
            Stmt::If {
                cond: format!("lane < {WEIGHT_LANES} && (k0 >> 4) + lane < (K >> 4)"),
                then: vec![s(format!(
                    "{copy}(sB + slot * {b_words} + lane * {}, qweight + 2 * ((long long)N * ((k0 >> 4) + lane) + n0), full, 8u * cols)",
                    2 * bn
                ))],
                otherwise: vec![],
            },
            Stmt::Comment(format!(
                "lanes {SCALE_LANE}, {}: scale rows of group slots 0, 1; lanes {ZERO_LANE}, {}: zero-word rows (slot 1 only for G = 32)",
                SCALE_LANE + 1,
                ZERO_LANE + 1
            )),
            Stmt::decl("const int", "gs", format!("(lane - {SCALE_LANE}) & 1")),
            Stmt::If {
                cond: format!("lane >= {SCALE_LANE} && lane < {} && (gs == 0 || gshift == 5)", ZERO_LANE + 2),
                then: vec![
                    Stmt::decl("const long long", "grow", group_row("gs")),
                    Stmt::If {
                        cond: format!("lane < {ZERO_LANE}"),
                        then: vec![s(format!(
                            "{copy}(sS + slot * {} + gs * {bn}, scales + grow * N + n0, full, 2u * cols)",
                            GROUP_SLOTS * bn
                        ))],
                        otherwise: vec![s(format!(
                            "{copy}(sZ + slot * {} + gs * {}, qzeros + grow * N8 + n0w, full, cols / 2u)",
                            GROUP_SLOTS * bn / 8,
                            bn / 8
                        ))],
                    },
                ],
                otherwise: vec![],
            },
        ];
        let bytes = vec![
            Stmt::Comment("this lane's bulk bytes (x comes by cp.async)".into()),
            Stmt::decl("uint32_t", "bytes", "0u"),
            Stmt::If {
                cond: format!("lane < {WEIGHT_LANES} && (k0 >> 4) + lane < (K >> 4)"),
                then: vec![s("bytes += 8u * cols")],
                otherwise: vec![],
            },
            Stmt::If {
                cond: format!(
                    "lane >= {SCALE_LANE} && lane < {} && (((lane - {SCALE_LANE}) & 1) == 0 || gshift == 5)",
                    ZERO_LANE + 2
                ),
                then: vec![s(format!("bytes += lane < {ZERO_LANE} ? 2u * cols : cols / 2u"))],
                otherwise: vec![],
            },
        ];
        let mut kt = vec![
            Stmt::decl("const int", "k0", format!("(kt0 + it) * {AWQ_BK}")),
            Stmt::decl("const int", "slot", "stage"),
            Stmt::decl("const uint32_t", "full", "bar_full + 8 * stage"),
            Stmt::Comment("wait until the consumers freed the stage (a fresh ring passes: parity phase ^ 1)".into()),
            s("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
        ];
        kt.extend(bytes);
        kt.extend([
            Stmt::decl("const uint32_t", "total", "__reduce_add_sync(0xffffffffu, bytes)"),
            Stmt::If {
                cond: "lane == 0".into(),
                then: vec![s("rc_mbarrier_arrive_expect_tx(full, total)")],
                otherwise: vec![],
            },
            Stmt::Comment("the transaction count is announced before any copy can complete".into()),
            s("__syncwarp()"),
        ]);
        kt.extend(run);
        kt.extend([
            Stmt::unrolled("j", r.x_copies, x_chunk),
            Stmt::Comment("one arrival on the full barrier once this lane's x copies landed".into()),
            s(format!("{}(full)", r.x_arrive.name)),
        ]);
        kt.push(Stmt::If {
            cond: format!("++stage == {stages}u"),
            then: vec![Stmt::assign("stage", "0u"), Stmt::assign("phase", "phase ^ 1u")],
            otherwise: vec![],
        });
        vec![Stmt::If {
            cond: format!("warp == {}", r.producer_warp),
            then: vec![
                Stmt::Comment("producer warp: the stage copies of every k-tile of this split".into()),
                Stmt::decl("const int", "n0", "n0w * 8"),
                Stmt::Comment(format!(
                    "columns of this tile inside N (a multiple of 64): min({bn}, N - n0)"
                )),
                Stmt::decl("const uint32_t", "cols", format!("min({bn}, N - n0)")),
                Stmt::decl("uint32_t", "stage", "0u"),
                Stmt::decl("uint32_t", "phase", "0u"),
                Stmt::Loop {
                    init: "int it = 0".into(),
                    cond: "it < nkt".into(),
                    step: "++it".into(),
                    body: kt,
                },
                Stmt::Return,
            ],
            otherwise: vec![],
        }]
    }

    /// The consumers' mainloop: wait for the stage's bytes, the k16 steps inside K, free
    /// the stage.
    pub(super) fn consumer_loop(&self) -> Vec<Stmt> {
        let stages = self.p.config.stages;
        let step = vec![Stmt::If {
            cond: "kk < ksteps".into(),
            then: self.k16_step(),
            otherwise: vec![],
        }];
        vec![
            Stmt::decl("uint32_t", "stage", "0u"),
            Stmt::decl("uint32_t", "phase", "0u"),
            Stmt::Loop {
                init: "int it = 0".into(),
                cond: "it < nkt".into(),
                step: "++it".into(),
                body: vec![
                    Stmt::decl("const int", "k0", format!("(kt0 + it) * {AWQ_BK}")),
                    Stmt::decl("const int", "slot", "stage"),
                    Stmt::Comment("k16 steps of this tile inside K (K is a multiple of 16)".into()),
                    Stmt::decl("const int", "ksteps", "(K - k0) >> 4"),
                    s("rc_mbarrier_wait_parity(bar_full + 8 * stage, phase)"),
                    Stmt::unrolled("kk", AWQ_BK / 16, step),
                    Stmt::Comment("this thread has read the stage".into()),
                    s("rc_mbarrier_arrive(bar_empty + 8 * stage)"),
                    Stmt::If {
                        cond: format!("++stage == {stages}u"),
                        then: vec![Stmt::assign("stage", "0u"), Stmt::assign("phase", "phase ^ 1u")],
                        otherwise: vec![],
                    },
                ],
            },
        ]
    }
}
