//! The dynamic persistent walk of the grouped SM90 GEMMs ([`GemmSm90Config::dynamic_walk`],
//! name suffix `_dyn`): the same resident grid as the static walk, but each cluster (each
//! CTA without a cluster) takes its next work id from a global counter (`work_counter`) in
//! launch order, so the tiles in flight at any moment are about one grid of consecutive ids
//! of the expert-aligned walk, however fast each cluster runs. The static walk's CTA `c`
//! takes ids `c, c + grid, ...`, and over many waves (Mixtral T = 4096: ~58) its CTAs drift
//! apart, so the tiles in flight spread over several waves and the weights are read from
//! DRAM several times (BENCHMARKS.md, "Session 26 (helper moebig)").
//!
//! * **Tickets.** The producer's elected thread (rank 0's on 2x1 clusters) takes a ticket
//!   with one `atomicAdd` per tile. Tickets below `walk_end` (this routing's row tiles by
//!   the column tiles, or column-tile pairs on clusters) are work ids; every cluster stops at
//!   its first ticket from `walk_end` on, so a launch hands out exactly `walk_end + clusters`
//!   tickets, and the holder of the last one (`last_ticket`, every other cluster has taken
//!   its end ticket) sets the counter back to 0: it is 0 at every launch's start without a
//!   memset, so the launch can be captured in a CUDA graph and replayed. (The MoE layer's
//!   alignment kernel also zeroes the counters every call: a reused workspace starts clean.)
//! * **The partner CTA** (2x1 clusters) gets rank 0's tickets through a ring of [`RING`]
//!   slots in its own shared memory: rank 0 pushes each one with `st.async` (4 bytes
//!   completing the slot's `xfull` mbarrier in rank 1) once rank 1 has released the slot's
//!   previous ticket (a release arrive on rank 0's `xempty`); so both CTAs walk the same ids
//!   in the same order and their pipelines and multicasts stay in step.
//! * **The consumers** learn each tile's id from the stage ring: the producer writes the id
//!   to the stage's slot `wid[stage]` (after the stage's empty barrier, before its full
//!   barrier's arrival) at every k-tile, and the consumers read it at each tile's first
//!   stage once its full barrier completed. Only valid ids reach them (the producer skips
//!   the walk's holes, both CTAs alike); the end ticket is posted to the next stage with a
//!   plain arrival (no bytes) and ends their walk.
//! * The producer keeps its prefetch across tiles (the next tile's loads during the
//!   epilogue), as in the static walk. Ping-pong consumers (whose ordered look-ahead walks
//!   the static ids) and the gathering GEMM1 (a producer warpgroup) are refused.

use super::*;

/// Slots of the ticket ring from rank 0 to rank 1 of a 2x1 cluster.
pub const RING: usize = 2;

/// Shared-memory bytes reserved for the walk (after the barriers): `xfull[RING]` and
/// `xempty[RING]` mbarriers, `xid[RING]` and the stages' `wid[stages]` (up to 22 stages).
pub(super) const WALK_BYTES: usize = 128;

/// Bytes the walk uses with `stages` stages.
pub(super) fn bytes(stages: usize) -> usize {
    20 * RING + 4 * stages
}

/// The dynamic walk's limits: a grouped kernel on the cooperative schedule, its A by TMA.
pub(super) fn check(cfg: &GemmSm90Config) -> Result<(), GemmError> {
    if cfg.grouped.is_none() {
        return Err(cfg_err("dynamic walk: the grouped (MoE) member only"));
    }
    if cfg.schedule != Sm90Schedule::Cooperative {
        return Err(cfg_err(format!(
            "dynamic walk: the cooperative schedule only, got {:?} (a ping-pong warpgroup's look-ahead walks the static ids)",
            cfg.schedule
        )));
    }
    if cfg.gather_a {
        return Err(cfg_err(
            "dynamic walk: not with gather_a (its producer is a whole warpgroup)",
        ));
    }
    Ok(())
}

/// The walk's shared-memory addresses (after the pipeline's barriers).
pub(super) fn smem_decls(k: &Ctx) -> Vec<Stmt> {
    let off = k.p.walk_offset;
    let mut v = vec![c(format!(
        "dynamic walk at {off}: xfull[{RING}], xempty[{RING}] mbarriers, xid[{RING}] (the ticket ring of a 2x1 cluster), wid[{}] (each stage's work id)",
        k.s
    ))];
    if k.clustered {
        v.extend([
            d("const uint32_t", "dyn_xfull", format!("smem_u32 + {off}u")),
            d("const uint32_t", "dyn_xempty", format!("dyn_xfull + {}u", 8 * RING)),
            d("const uint32_t", "dyn_xid", format!("dyn_xfull + {}u", 16 * RING)),
        ]);
    }
    v.push(d(
        "volatile uint32_t* const",
        "dyn_wid",
        format!("reinterpret_cast<volatile uint32_t*>(smem + {})", off + 20 * RING),
    ));
    v
}

/// In the barrier initialization (one thread): the ticket ring's mbarriers, one arrival each
/// (rank 1's `arrive.expect_tx` of a slot's 4 bytes; its release arrive on rank 0).
pub(super) fn barrier_inits(k: &Ctx) -> Vec<Stmt> {
    if !k.clustered {
        return vec![];
    }
    vec![for_(
        "i",
        "0",
        RING.to_string(),
        vec![
            e("rc_mbarrier_init(dyn_xfull + 8 * i, 1)"),
            e("rc_mbarrier_init(dyn_xempty + 8 * i, 1)"),
        ],
    )]
}

/// After the grouped prologue (`rows_used`): the walk's end and last ticket.
pub(super) fn prologue(k: &Ctx) -> Vec<Stmt> {
    let bm = k.bm;
    let ids = if k.clustered {
        let pair = 2 * grouped::tile_n_out(k.cfg);
        format!(
            "(unsigned long long)(rows_used / {bm}) * (unsigned long long)((N + {}) / {pair})",
            pair - 1
        )
    } else {
        format!("(unsigned long long)(rows_used / {bm}) * (unsigned long long)sched_tiles_n")
    };
    let per = k.cm * k.cn;
    vec![
        dc(
            "const unsigned",
            "walk_end",
            format!("(unsigned)min({ids}, sched.total_work)"),
            if k.clustered {
                "the walk's ids: this routing's row tiles by the column-tile pairs"
            } else {
                "the walk's ids: this routing's row tiles by the column tiles"
            },
        ),
        dc(
            "const unsigned",
            "last_ticket",
            format!("walk_end + gridDim.x * gridDim.y * gridDim.z / {per}u - 1u"),
            "one end ticket per cluster: the last one handed out",
        ),
    ]
}

/// The producer's next work id (a statement's right-hand side).
fn next_ticket(k: &Ctx) -> String {
    if k.clustered {
        "rc_dyn_cluster_ticket(work_counter, last_ticket, rank_m, dyn_xfull, dyn_xempty, dyn_xid, dyn_xslot, dyn_xphase)"
            .into()
    } else {
        "rc_dyn_ticket(work_counter, last_ticket)".into()
    }
}

/// The producer's walk over its tickets: `body` per work id (its `continue` skips a hole of
/// the walk to the next ticket), then the end posted to the next stage.
pub(super) fn producer_loop(k: &Ctx, body: Vec<Stmt>) -> Vec<Stmt> {
    let mut v = Vec::new();
    if k.clustered {
        v.extend([
            dc("uint32_t", "dyn_xslot", "0", "the ticket ring's slot and phase"),
            d("uint32_t", "dyn_xphase", "0"),
        ]);
    }
    v.push(d("unsigned long long", "work", next_ticket(k)));
    v.push(Stmt::Loop {
        init: String::new(),
        cond: "work < walk_end".into(),
        step: format!("work = {}", next_ticket(k)),
        body,
    });
    v.extend([
        c("the end: its ticket in the next stage's slot, the stage's full barrier completed by a plain arrival"),
        e("rc_mbarrier_wait_parity(bar_empty + 8 * stage, phase ^ 1u)"),
        Stmt::assign("dyn_wid[stage]", "(uint32_t)work"),
        e("rc_mbarrier_arrive(bar_full + 8 * stage)"),
    ]);
    v
}

/// In the producer's k-tile loop, after the stage's empty barrier: the tile's id in the
/// stage's slot (read by the consumers at the tile's first stage).
pub(super) fn post_work() -> Stmt {
    Stmt::Assign {
        lhs: "dyn_wid[stage]".into(),
        rhs: "(uint32_t)work".into(),
        comment: Some("the dynamic walk: this tile's id, for the consumers".into()),
    }
}

/// The consumers' walk: the id of the tile at the current stage, until the end ticket.
pub(super) fn consumer_loop(body: Vec<Stmt>) -> Stmt {
    let wait = "rc_dyn_tile_work(bar_full + 8 * stage, phase, dyn_wid + stage)";
    Stmt::Loop {
        init: format!("unsigned long long work = {wait}"),
        cond: "work < walk_end".into(),
        step: format!("work = {wait}"),
        body,
    }
}

/// The walk's device helpers (after the unit's snippets and `rc_pipe_advance`).
pub(super) fn helper(clustered: bool) -> Item {
    let mut code = String::from(
        r#"// The dynamic walk's next ticket of the launch's counter: tickets below walk_end are work ids in launch
// order, every cluster stops at its first one from walk_end on, and the holder of the last of those
// (last_ticket: every other cluster has taken its own) sets the counter back to 0 for the next launch.
__device__ __forceinline__ unsigned rc_dyn_ticket(unsigned* counter, unsigned last_ticket) {
  const unsigned t = atomicAdd(counter, 1u);
  if (t == last_ticket) atomicExch(counter, 0u);
  return t;
}
// The work id of the tile whose first k-tile fills the stage of full barrier `full` (posted in the
// stage's slot `wid` by this CTA's producer before the barrier's arrival; from walk_end on, the end):
// lane 0 reads it once the phase completed, the warp gets it by shuffle.
__device__ __forceinline__ unsigned rc_dyn_tile_work(uint32_t full, uint32_t phase, const volatile uint32_t* wid) {
  rc_mbarrier_wait_parity(full, phase);
  unsigned w = 0u;
  if ((threadIdx.x & 31u) == 0u) w = *wid;
  return __shfl_sync(0xffffffffu, w, 0);
}
"#,
    );
    if clustered {
        code.push_str(&format!(
            r#"// On a 2x1 cluster: rank 0 takes the ticket and pushes it into rank 1's ring slot (st.async, 4 bytes
// completing the slot's xfull barrier there) once rank 1 has released the slot's previous ticket (its
// release arrive on rank 0's xempty); rank 1 waits for the slot and reads it. Both CTAs so walk the same
// ids in the same order.
__device__ __forceinline__ unsigned rc_dyn_cluster_ticket(unsigned* counter, unsigned last_ticket, int rank,
    uint32_t xfull, uint32_t xempty, uint32_t xid, uint32_t& slot, uint32_t& phase) {{
  unsigned t;
  if (rank == 0) {{
    t = rc_dyn_ticket(counter, last_ticket);
    rc_mbarrier_wait_parity_acquire_cluster(xempty + 8u * slot, phase ^ 1u);
    const uint32_t v[1] = {{t}};
    rc_st_async_b32x1(xid + 4u * slot, xfull + 8u * slot, 1u, v);
  }} else {{
    rc_mbarrier_arrive_expect_tx(xfull + 8u * slot, 4u);
    rc_mbarrier_wait_parity(xfull + 8u * slot, phase);
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(t) : "r"(xid + 4u * slot) : "memory");
    rc_mbarrier_arrive_release_cluster(xempty + 8u * slot, 0u);
  }}
  rc_pipe_advance(slot, phase, 1u, {RING}u);
  return t;
}}
"#
        ));
    }
    Item::Snippet {
        origin: "rcute dynamic walk".into(),
        code,
    }
}

/// The snippets the walk's helpers call beyond the family's.
pub(super) fn snippets(clustered: bool) -> Vec<Snippet> {
    if !clustered {
        return vec![];
    }
    vec![
        rcute_atom::sync::mbarrier_arrive_release_cluster(),
        rcute_atom::sync::mbarrier_wait_parity_acquire_cluster(),
        rcute_atom::cluster_dsmem::st_async_b32(1).expect("one word"),
    ]
}

#[cfg(test)]
mod tests {
    /// The ticket protocol of `rc_dyn_ticket` on the host: `clusters` clusters, each taking
    /// tickets until its first one from `walk_end` on, in an order that `seed` scrambles.
    /// Every work id below `walk_end` is taken exactly once, every cluster stops, and the
    /// counter is 0 again after the launch, so that the next launch (another `walk_end`, as
    /// after new routing in a graph replay) starts from 0 too.
    #[test]
    fn every_id_is_taken_once_and_the_counter_ends_at_zero() {
        let mut counter = 0u32;
        let mut seed = 0x9e37_79b9u32;
        for (walk_end, clusters) in [
            (0u32, 66u32),
            (1, 66),
            (4032, 66),
            (1152, 132),
            (7, 1),
            (65, 64),
            (3, 3),
        ] {
            let last_ticket = walk_end + clusters - 1;
            let mut taken = vec![0u8; walk_end as usize];
            let mut running: Vec<u32> = (0..clusters).collect();
            while !running.is_empty() {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let i = (seed >> 8) as usize % running.len();
                let t = counter;
                counter += 1;
                if t == last_ticket {
                    counter = 0;
                }
                if t >= walk_end {
                    running.swap_remove(i);
                } else {
                    taken[t as usize] += 1;
                }
            }
            assert!(taken.iter().all(|&n| n == 1), "walk_end {walk_end} clusters {clusters}");
            assert_eq!(counter, 0, "walk_end {walk_end} clusters {clusters}");
        }
    }

    /// The walk's bytes fit its reservation up to 22 stages.
    #[test]
    fn the_walk_fits_its_shared_memory() {
        assert!(super::bytes(22) <= super::WALK_BYTES);
        assert!(super::bytes(23) > super::WALK_BYTES);
    }
}
