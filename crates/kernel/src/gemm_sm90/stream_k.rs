//! Hybrid stream-K in the SM90 kernel ([`crate::stream_k`]): the walk's declaration, and
//! the consumers' last-arriver reduction of a tile cut between several CTAs.
//!
//! Cooperative: each consumer warpgroup reduces its own rows of the tile (the epilogue
//! groups are independent): per stream-K tile `t` and warpgroup `cw` one counter
//! `sk_counters[2t + cw]` and, per contributor, one workspace slot of its f32 partial sums.
//! Ping-pong: one warpgroup runs a whole item (tile, k range), so a tile has one counter
//! `sk_counters[t]` and each contributor one slot of the whole tile; which warpgroup of a
//! contributing CTA ran its part does not matter to the others.
//! Nothing waits for another CTA: a contributor stores its partials, counts itself in, and
//! only the last one (counter `contributors - 1`) goes on, resets the counter, sums the
//! slots in k order and runs the epilogue. The others release the item's C subtiles unread
//! (the C producer loads C for every item; which contributor is last is known only here).

use super::*;

/// The stream-K walk of this CTA (after the scheduler's declaration): computed once by
/// thread 64 (the producer warpgroup's idle third warp) into shared memory before the
/// prologue's `__syncthreads()`, so that its fields
/// hold no registers through the mainloop (in registers they spilled the consumers).
pub(super) fn walk_decl(k: &Ctx, name: &str) -> Vec<Stmt> {
    vec![
        c("hybrid stream-K walk: whole waves of tiles, then the last partial wave's k-tiles spread over the CTAs;"),
        c(format!(
            "computed once, kept in shared memory at {} (the roles read an item's fields at its head)",
            k.p.walk_offset
        )),
        e(format!(
            "static_assert(sizeof({name}_walk) <= {}, \"the stream-K walk's shared-memory slot\")",
            k.p.smem_bytes - k.p.walk_offset - ALIGN_SLACK
        )),
        d(
            &format!("{name}_walk* const"),
            "walk_smem",
            format!("reinterpret_cast<{name}_walk*>(smem + {})", k.p.walk_offset),
        ),
        c("an idle producer warp's lane computes it (its divisions) while thread 0 initializes the barriers"),
        if_(
            "threadIdx.x == 64",
            vec![e(format!(
                "*walk_smem = {name}_walk(sched.total_work, sk_tiles, sk_units, k_tiles, sched.first_work(), sched.stride())"
            ))],
        ),
    ]
}

/// After the prologue's `__syncthreads()`: the walk every role reads.
pub(super) fn walk_ref(name: &str) -> Stmt {
    d(&format!("const {name}_walk&"), "walk", "*walk_smem")
}

/// A walk value read from shared memory, for the consumers broadcast from lane 0 (`wide`:
/// 64 bits) so that ptxas knows it warp-uniform (a loop bound or a branch on a loaded
/// value otherwise moves the consumers' pipeline state and descriptors out of the uniform
/// registers); the producers' single elected thread reads it as it is.
pub(super) fn uniform(k: &Ctx, expr: &str, producer: bool) -> String {
    if producer || !k.sk {
        expr.to_string()
    } else {
        format!("__shfl_sync(0xffffffffu, {expr}, 0)")
    }
}

/// Floats of one warpgroup's partial sums: its accumulators.
pub(super) fn part_floats(k: &Ctx) -> i64 {
    k.p.m_atoms * k.nacc * WG
}

/// `float4` index of accumulators `4q .. 4q + 3` of atom `a` of thread `sk_tid` in a slot:
/// thread fastest, so that a warp's 16-byte stores and loads cover 512 contiguous bytes.
fn part_index(k: &Ctx) -> Result<Stmt, GemmError> {
    let (quads, atoms) = (k.nacc / 4, k.p.m_atoms);
    let atom_stride = WG * quads;
    let layout = lay(tuple!(WG, quads, atoms), tuple!(1, WG, atom_stride))?;
    dl("const int", "o", &layout, &[var("sk_tid"), var("q"), var("a")])
}

/// The slot of unit `unit`'s part of the tile: cooperative, this warpgroup's half.
fn slot_ptr(k: &Ctx, unit: &str) -> String {
    let slot = if k.coop {
        format!("walk.slot({unit}, sk_t) * 2 + cw")
    } else {
        format!("walk.slot({unit}, sk_t)")
    };
    format!("sk_ws + (long long)({slot}) * {}", part_floats(k) / 4)
}

/// The tile's counter: cooperative, this warpgroup's.
fn counter_ptr(k: &Ctx) -> String {
    if k.coop {
        "sk_counters + 2 * sk_t + cw".into()
    } else {
        "sk_counters + sk_t".into()
    }
}

/// The accumulators `4q .. 4q + 3` of atom `a` as a C++ list.
fn quad(i: usize) -> String {
    format!("acc[a][4 * q + {i}]")
}

/// The stream-K reduction, then the epilogue (or, for a contributor that is not the last,
/// the release of the item's C subtiles).
pub(super) fn reduce_then_epilogue(k: &Ctx) -> Result<Vec<Stmt>, GemmError> {
    let store = vec![
        part_index(k)?,
        e(format!(
            "__stcg(sk_mine + o, make_float4({}, {}, {}, {}))",
            quad(0),
            quad(1),
            quad(2),
            quad(3)
        )),
    ];
    let add = |first: bool| -> Result<Vec<Stmt>, GemmError> {
        let mut v = vec![part_index(k)?, d("const float4", "x", "__ldcg(src + o)")];
        v.extend((0..4).map(|i| {
            let comp = ["x", "y", "z", "w"][i];
            if first {
                Stmt::assign(quad(i), format!("x.{comp}"))
            } else {
                e(format!("{} += x.{comp}", quad(i)))
            }
        }));
        Ok(vec![unroll("a", k.p.m_atoms, vec![unroll("q", k.nacc / 4, v)])])
    };
    let mut first = vec![d("const float4*", "src", slot_ptr(k, "v0"))];
    first.extend(add(true)?);
    let mut rest = vec![d("const float4*", "src", slot_ptr(k, "v"))];
    rest.extend(add(false)?);
    let split = vec![
        c(if k.coop {
            "stream-K: this item is a part of the tile's k-tiles; store this warpgroup's partial sums (f32)"
        } else {
            "stream-K: this item is a part of the tile's k-tiles; store its partial sums (f32, the whole tile)"
        }),
        dc(
            "const int",
            "sk_t",
            "(int)(work - (sched.total_work - (unsigned long long)sk_tiles))",
            "the stream-K tile",
        ),
        d("const int", "sk_tid", "threadIdx.x % 128"),
        d("float4* const", "sk_ws", "reinterpret_cast<float4*>(workspace)"),
        d("float4* const", "sk_mine", slot_ptr(k, "(int)sched.first_work()")),
        unroll("a", k.p.m_atoms, vec![unroll("q", k.nacc / 4, store)]),
        c("every thread's partials are stored (bar.sync orders them before the release): one thread counts this"),
        c("contributor in; the last one resets the counter for the next launch and reduces the tile"),
        e(format!("rc_named_barrier_sync(epi_bar, {WG}u)")),
        d("uint32_t", "sk_last", "0u"),
        if_(
            "epi_leader",
            vec![
                d("uint32_t* const", "counter", counter_ptr(k)),
                d(
                    "const uint32_t",
                    "contributors",
                    "(uint32_t)(walk.last_unit(sk_t) - walk.first_unit(sk_t) + 1)",
                ),
                Stmt::assign("sk_last", "rc_atom_add_acq_rel_gpu(counter, 1u) == contributors - 1u"),
                if_("sk_last", vec![e("rc_st_release_gpu(counter, 0)")]),
            ],
        ),
        c("the barrier tells every thread of the group whether it is last; the lane-0 broadcast lets ptxas know"),
        c("the answer warp-uniform (without it the pipeline state and the wgmma descriptors leave the uniform"),
        c("registers: 36 R2UR inside the wgmma batches)"),
        Stmt::assign(
            "sk_finish",
            format!("__shfl_sync(0xffffffffu, (int)rc_named_barrier_red_or(epi_bar, {WG}u, sk_last), 0) != 0"),
        ),
        if_(
            "sk_finish",
            vec![
                c("the last arriver: the contributors' partials summed in k order (the same bits whatever the"),
                c("arrival order; L2 loads, the slots were written by other SMs). Its own partial is read back too:"),
                c("keeping it in registers needs a pass per position of it, and those passes spilled"),
                d("const int", "v0", uniform(k, "walk.first_unit(sk_t)", false)),
                d("const int", "v1", uniform(k, "walk.last_unit(sk_t)", false)),
                Stmt::Block(first),
                for_("v", "v0 + 1", "v1 + 1", rest),
            ],
        ),
    ];
    let mut v = vec![
        dc(
            "bool",
            "sk_finish",
            "true",
            "whole tiles, and the last arriving contributor of a stream-K tile, run the epilogue",
        ),
        if_("kb > 0 || k_iters < k_tiles", split),
    ];
    let drain = drain_c(k);
    v.push(Stmt::If {
        cond: "sk_finish".into(),
        then: epilogue::epilogue(k)?,
        otherwise: drain,
    });
    Ok(v)
}

/// A contributor that is not the last: the item's C subtiles (loaded for every item)
/// released unread, in the epilogue's order. Every thread of the group waits for each (as
/// the epilogue does: a wait by the leader alone, a divergent spin loop, also cost the
/// consumers' uniform registers) and the barrier keeps the
/// release behind every thread's wait, so that no thread's parity falls a phase behind.
fn drain_c(k: &Ctx) -> Vec<Stmt> {
    if !k.cfg.with_c() {
        return vec![];
    }
    let slot = format!("16 * (grp * {} + cstage)", k.p.c_bufs);
    vec![if_(
        "load_c",
        vec![
            c("not the last contributor: release this item's C subtiles unread"),
            unroll(
                "i",
                k.sub_m * k.sub_n,
                vec![
                    e(format!("rc_mbarrier_wait_parity(bar_c_full + {slot}, cphase)")),
                    e(format!("rc_named_barrier_sync(epi_bar, {WG}u)")),
                    if_(
                        "epi_leader",
                        vec![e(format!("rc_mbarrier_arrive(bar_c_full + {slot} + 8)"))],
                    ),
                    e(format!("rc_pipe_advance(cstage, cphase, 1u, {}u)", k.p.c_bufs)),
                ],
            ),
        ],
    )]
}
