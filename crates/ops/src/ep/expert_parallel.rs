//! [`ExpertParallel`]: the fused MoE layer split over the ranks of a [`Communicator`].
//!
//! Rank `r` of `W` holds the experts `[r L, (r + 1) L)` (`w13 [L, 2I, H]`, `w2 [L, H, I]`,
//! `E = W L` experts in all) and runs [`Ops::fused_moe`] on them; the partial outputs are
//! combined one of these ways ([`EpCombine`]):
//!
//! * [`EpCombine::AllReduce`]: every rank holds all `T` tokens (and the same routing); each
//!   computes its experts' part of `y [T, H]` in place and an NCCL all-reduce sums the
//!   parts, so every rank ends with the whole `y`. [`EpCombine::AllReduceOverlapped`]
//!   does it in two halves of the tokens, the first half's all-reduce running on a
//!   second stream of the rank (made on first use) while the second half's experts run.
//! * [`EpCombine::ReduceScatter`]: the same, but the parts are summed with a
//!   reduce-scatter: rank `r` gets tokens `[r T / W, (r + 1) T / W)` of `y` (`T` a
//!   multiple of `W`; `y` is `[T / W, H]`), half the traffic of the all-reduce.
//! * [`EpCombine::Dispatch`]: each rank holds only its own tokens; the routed rows go to
//!   the owning ranks with NCCL all-to-all, are computed there and come back for the
//!   weighted sum on the source rank ([`super::dispatch`] has the steps).
//!
//! # CUDA graphs
//!
//! Every combine is capturable on the communicator's stream: the fused MoE never waits
//! for the host, NCCL (2.9+) captures its collectives and send/recv groups, the
//! overlapped all-reduce's second stream forks from and joins the main one with events
//! (call it once before capturing, so that the stream exists), nothing is allocated,
//! and no size is read back (the dispatch uses a fixed capacity of
//! `T` rows per destination rank, so its counts stay on the GPU).
//!
//! # Reproducibility
//!
//! Each rank's part is bit-identical from run to run (the fused MoE's fixed-order
//! finalize), and so is the dispatch (send/recv copy bytes; the source rank sums the
//! returned parts in rank order). With two ranks the all-reduce / reduce-scatter sum of
//! two bf16 values is commutative, so the result is bit-identical run to run and on both
//! ranks; with more ranks NCCL's summation order depends on its algorithm choice (fixed
//! for one configuration and size, not promised by NCCL). Compared with one GPU running
//! all experts the result is not bit-identical: each rank rounds its part to bf16 / f16
//! before the sum (within bf16 rounding of the one-GPU layer; the tests check 1e-2).
//! With one rank, the all-reduce, reduce-scatter and dispatch equal the one-GPU layer
//! bit for bit; the overlapped all-reduce runs two half-size layers, whose GEMM
//! configuration may differ from the whole's.

use super::comm::{Communicator, EpMark};
use crate::error::OpsError;
use crate::moe::fused::layer_uses;
use crate::moe::problem::round_up;
use crate::moe::{fused_moe_workspace_bytes, validate_fused_moe, MoeOptions, MoeRouting, MoeWorkspace};
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef};
use crate::Ops;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// How the ranks' partial outputs are combined (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpCombine {
    /// All tokens on every rank; NCCL all-reduce; `y [T, H]` on every rank.
    AllReduce,
    /// As [`EpCombine::AllReduce`], in two halves of the tokens: the first half's
    /// all-reduce (on a second stream of the rank) overlaps the second half's experts.
    /// Measured slower than [`EpCombine::AllReduce`] on two NVLink H100s (0.6x to 0.9x
    /// of its speed: the NCCL kernels take SMs from the GEMMs and the routing runs twice);
    /// kept for slower links, where the hidden transfer can matter more.
    AllReduceOverlapped,
    /// All tokens on every rank; NCCL reduce-scatter; `y [T / W, H]`, rank `r`'s tokens.
    ReduceScatter,
    /// Each rank its own `T` tokens (the same `T` everywhere); rows dispatched to the
    /// experts' ranks with all-to-all and back ([`super::dispatch`]); `y [T, H]`.
    Dispatch,
}

/// Checks that rank `rank` of `world` holding `local` experts from `expert_offset` is the
/// even split `[rank L, (rank + 1) L)`, and that the routing's experts (when known) are
/// `world L`.
///
/// ```
/// use rcute_ops::ep::validate_ep_slice;
/// assert!(validate_ep_slice(1, 2, 4, 4, Some(8)).is_ok());
/// assert!(validate_ep_slice(2, 2, 8, 4, None).is_err()); // rank past the world
/// assert!(validate_ep_slice(1, 2, 0, 4, None).is_err()); // rank 1 must start at expert 4
/// assert!(validate_ep_slice(0, 2, 0, 4, Some(6)).is_err()); // 2 ranks x 4 experts != 6
/// ```
///
/// # Errors
///
/// [`OpsError::Shape`] for each of those mismatches, [`OpsError::Empty`] for no expert
/// or no rank.
pub fn validate_ep_slice(
    rank: usize,
    world: usize,
    expert_offset: usize,
    local: usize,
    experts: Option<usize>,
) -> Result<(), OpsError> {
    if world == 0 || local == 0 {
        return Err(OpsError::Empty(format!("{world} ranks of {local} experts")));
    }
    if rank >= world {
        return Err(OpsError::Shape(format!("rank {rank} of a world of {world}")));
    }
    if rank.checked_mul(local) != Some(expert_offset) {
        return Err(OpsError::Shape(format!(
            "rank {rank} holds experts [{expert_offset}, {}); the even split gives it [{}, {})",
            expert_offset.saturating_add(local),
            rank * local,
            (rank + 1) * local
        )));
    }
    if let Some(e) = experts {
        if world.checked_mul(local) != Some(e) {
            return Err(OpsError::Shape(format!(
                "{world} ranks x {local} experts do not cover the routing's {e} experts"
            )));
        }
    }
    Ok(())
}

/// The workspace [`ExpertParallel::fused_moe`] needs on each rank for `tokens` tokens
/// (those the rank holds: all of them for the all-reduce / reduce-scatter, its own for
/// the dispatch), top-`topk`, `local` experts per rank, `world`
/// ranks, hidden `hidden`, intermediate `inter`.
///
/// ```
/// use rcute_ops::ep::{ep_moe_workspace_bytes, EpCombine};
/// use rcute_ops::moe::fused_moe_workspace_bytes;
/// use rcute_ops::DType;
/// let one = fused_moe_workspace_bytes(64, 2, 4, 4096, 14336, DType::BF16).unwrap();
/// let ar = ep_moe_workspace_bytes(EpCombine::AllReduce, 64, 2, 4, 2, 4096, 14336, DType::BF16).unwrap();
/// let rs = ep_moe_workspace_bytes(EpCombine::ReduceScatter, 64, 2, 4, 2, 4096, 14336, DType::BF16).unwrap();
/// assert_eq!(ar, one);
/// assert!(rs >= one + 64 * 4096 * 2); // plus the full [T, H] part
/// ```
///
/// # Errors
///
/// As [`fused_moe_workspace_bytes`].
#[allow(clippy::too_many_arguments)]
pub fn ep_moe_workspace_bytes(
    combine: EpCombine,
    tokens: usize,
    topk: usize,
    local: usize,
    world: usize,
    hidden: usize,
    inter: usize,
    dtype: DType,
) -> Result<usize, OpsError> {
    let fused = fused_moe_workspace_bytes(tokens, topk, local, hidden, inter, dtype)?;
    match combine {
        EpCombine::AllReduce | EpCombine::AllReduceOverlapped => Ok(fused),
        EpCombine::ReduceScatter => round_up(fused)
            .checked_add(tokens.saturating_mul(hidden).saturating_mul(dtype.bytes()))
            .ok_or(OpsError::TooLarge { what: "MoE workspace" }),
        EpCombine::Dispatch => {
            Ok(super::dispatch::DispatchLayout::new(tokens, topk, local, world, hidden, inter, dtype)?.bytes)
        }
    }
}

/// One rank of the expert-parallel MoE layer: its [`Communicator`] and an [`Ops`] handle
/// on the communicator's stream (sharing the compiled kernels of the handle it came from).
///
/// ```no_run
/// use rcute_ops::ep::{Communicator, EpCombine, ExpertParallel};
/// use rcute_ops::{Gpu, Ops, OpsError};
/// # fn main() -> Result<(), OpsError> {
/// // One process, one thread per rank, each GPU its own stream.
/// let gpus = [Gpu::open(0)?, Gpu::open(1)?];
/// let streams: Vec<_> = gpus.iter().map(|g| g.stream().clone()).collect();
/// let comms = Communicator::from_streams(&streams)?;
/// let ranks: Vec<ExpertParallel> = gpus
///     .into_iter()
///     .zip(comms)
///     .map(|(g, c)| ExpertParallel::new(&Ops::new(g), c))
///     .collect::<Result<_, _>>()?;
/// // On each rank's thread: ranks[r].fused_moe(&x, &w13_r, &w2_r, &routing, EpCombine::AllReduce, &mut ws, &mut y)
/// # Ok(()) }
/// ```
pub struct ExpertParallel {
    comm: Communicator,
    ops: Ops,
    /// The second stream of [`EpCombine::AllReduceOverlapped`], made on first use.
    side: std::sync::OnceLock<Arc<CudaStream>>,
    /// `w13` holds the up rows first ([`MoeOptions::up_first`]).
    up_first: bool,
}

impl std::fmt::Debug for ExpertParallel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpertParallel")
            .field("comm", &self.comm)
            .finish_non_exhaustive()
    }
}

impl ExpertParallel {
    /// The layer's rank `comm.rank()`, launching on `comm`'s stream with `ops`' kernels.
    ///
    /// # Errors
    ///
    /// [`OpsError::Stream`] when the communicator's stream is not on `ops`' GPU.
    pub fn new(ops: &Ops, comm: Communicator) -> Result<ExpertParallel, OpsError> {
        let ops = ops.on_stream(comm.stream())?;
        Ok(ExpertParallel {
            comm,
            ops,
            side: std::sync::OnceLock::new(),
            up_first: false,
        })
    }

    /// The same rank, reading each expert's `w13` rows as up projection first and gate
    /// second ([`MoeOptions::up_first`]; the default is vLLM's order, gate first).
    pub fn with_up_first(mut self, up_first: bool) -> ExpertParallel {
        self.up_first = up_first;
        self
    }

    /// The communicator.
    pub fn comm(&self) -> &Communicator {
        &self.comm
    }

    /// The ops handle on the communicator's stream.
    pub fn ops(&self) -> &Ops {
        &self.ops
    }

    /// This rank's part of the layer, combined over all ranks (every rank calls it with
    /// the same `T`, `k`, `H`, `I`, `L` and combine). `x [T, H]`, `w13 [L, 2I, H]` and
    /// `w2 [L, H, I]` (this rank's experts `[r L, (r + 1) L)`), routing as
    /// [`Ops::fused_moe`] with global expert ids (the same on every rank), `y` as the
    /// combine says; workspace: [`ep_moe_workspace_bytes`].
    ///
    /// # Errors
    ///
    /// Every error of [`Ops::fused_moe`], a rank's slice that is not the even split or
    /// logits whose experts are not `W L` ([`validate_ep_slice`]), a `y` of the wrong
    /// shape or, for reduce-scatter, `T` not a multiple of `W` ([`OpsError::Shape`]),
    /// NCCL failures ([`OpsError::Nccl`]). All checks come before any launch.
    #[allow(clippy::too_many_arguments)]
    pub fn fused_moe(
        &self,
        x: &MatrixRef<'_>,
        w13: &MatrixRef<'_>,
        w2: &MatrixRef<'_>,
        routing: &MoeRouting<'_>,
        combine: EpCombine,
        workspace: &mut MoeWorkspace<'_>,
        y: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        self.fused_moe_marked(x, w13, w2, routing, combine, workspace, y, &mut |_, _| {})
    }

    /// [`Self::fused_moe`], calling `mark` right before and after the collectives are
    /// enqueued, with the stream they go to (on this thread; e.g. to record CUDA events
    /// there).
    #[allow(clippy::too_many_arguments)]
    pub fn fused_moe_marked(
        &self,
        x: &MatrixRef<'_>,
        w13: &MatrixRef<'_>,
        w2: &MatrixRef<'_>,
        routing: &MoeRouting<'_>,
        combine: EpCombine,
        workspace: &mut MoeWorkspace<'_>,
        y: &mut MatrixMut<'_>,
        mark: &mut dyn FnMut(EpMark, &Arc<CudaStream>),
    ) -> Result<(), OpsError> {
        let (rank, world) = (self.comm.rank(), self.comm.world_size());
        let local = w13.geo().batch;
        let opts = MoeOptions {
            expert_offset: rank.saturating_mul(local),
            up_first: self.up_first,
            ..MoeOptions::default()
        };
        let experts = match routing {
            MoeRouting::Logits { logits, .. } => Some(logits.geo().cols),
            MoeRouting::Given { .. } => None,
        };
        validate_ep_slice(rank, world, opts.expert_offset, local, experts)?;
        if combine == EpCombine::Dispatch {
            return super::dispatch::run(&self.ops, &self.comm, x, w13, w2, routing, &opts, workspace, y, mark);
        }
        let (t, h) = (x.geo().rows, x.geo().cols);
        let yg = y.geo();
        // The full [T, H] part: y itself (all-reduce in place) or the workspace's tail.
        let fused_bytes = fused_moe_workspace_bytes(t, routing.topk(), local, h, w13.geo().rows / 2, yg.dtype)?;
        let (part, rows_out) = match combine {
            EpCombine::AllReduce | EpCombine::AllReduceOverlapped | EpCombine::Dispatch => (None, t),
            EpCombine::ReduceScatter => {
                if !t.is_multiple_of(world) {
                    return Err(OpsError::Shape(format!(
                        "reduce-scatter of {t} tokens over {world} ranks"
                    )));
                }
                let at = round_up(fused_bytes);
                let need = at + t * h * yg.dtype.bytes();
                if workspace.len < need {
                    return Err(OpsError::OutOfBounds {
                        operand: "workspace",
                        needed: need,
                        len: workspace.len,
                    });
                }
                (Some(workspace.ptr + at as u64), t / world)
            }
        };
        if yg.rows != rows_out || yg.cols != h || yg.batch != 1 || yg.row_stride != h as i64 || yg.col_stride != 1 {
            return Err(OpsError::Shape(format!(
                "y [{}, {}] (dense): expected [{rows_out}, {h}] for {combine:?} over {world} ranks",
                yg.rows, yg.cols
            )));
        }
        crate::gemm::check_layout("y", &yg, true)?;
        let p = match part {
            None => validate_fused_moe(x, w13, w2, routing, &opts, workspace, y)?,
            Some(ptr) => {
                let g = Geometry {
                    ptr,
                    len: t * h,
                    dtype: yg.dtype,
                    rows: t,
                    cols: h,
                    batch: 1,
                    row_stride: h as i64,
                    col_stride: 1,
                    batch_stride: 0,
                    device: yg.device,
                };
                // SAFETY: the workspace's tail, checked above to hold T * H elements.
                let full = unsafe { MatrixMut::from_raw(g) };
                // SAFETY: the workspace's head, disjoint from the tail.
                let head = unsafe { MoeWorkspace::from_raw(workspace.ptr, fused_bytes) };
                validate_fused_moe(x, w13, w2, routing, &opts, &head, &full)?
            }
        };
        let ops = &self.ops;
        ops.check_devices(&[("x", &p.x), ("w13", &p.w13), ("w2", &p.w2), ("y", &yg)])?;
        let ws = (workspace.ptr, workspace.len);
        let _uses = layer_uses(ops.stream(), [x, w13, w2], routing, workspace, y)?;
        if combine == EpCombine::AllReduceOverlapped && t >= 2 {
            return self.overlapped(&p, x, routing, &opts, ws, &yg, mark);
        }
        ops.run_fused_moe(&p)?;
        let st = self.comm.stream();
        mark(EpMark::CollectiveBegin, st);
        // SAFETY: `p.y` is the validated [T, H] part (y or the workspace's tail) and `yg`
        // the validated output; every rank enqueues the same collective.
        unsafe {
            match part {
                None => self.comm.all_reduce_sum(p.y.ptr, p.y.ptr, t * h, yg.dtype)?,
                Some(_) => self.comm.reduce_scatter_sum(p.y.ptr, yg.ptr, rows_out * h, yg.dtype)?,
            }
        }
        mark(EpMark::CollectiveEnd, st);
        Ok(())
    }

    /// [`EpCombine::AllReduceOverlapped`] of the validated layer `p` (its `y` the
    /// caller's): tokens `[0, T / 2)` and `[T / 2, T)` one after the other on the main
    /// stream, each half's all-reduce on the side stream once its experts are done; the
    /// main stream waits for the second at the end. The caller holds the guards of the
    /// buffers (its `Uses`) until this returns.
    #[allow(clippy::too_many_arguments)]
    fn overlapped(
        &self,
        p: &crate::moe::MoeProblem,
        x: &MatrixRef<'_>,
        routing: &MoeRouting<'_>,
        opts: &MoeOptions,
        workspace: (u64, usize),
        y: &Geometry,
        mark: &mut dyn FnMut(EpMark, &Arc<CudaStream>),
    ) -> Result<(), OpsError> {
        let main = self.ops.stream();
        let side = match self.side.get() {
            Some(s) => s,
            None => {
                let s = main.context().new_stream()?;
                self.side.get_or_init(|| s)
            }
        };
        let (t, h) = (p.tokens, p.hidden);
        let half = t / 2;
        // Each half validated as a layer of its own, so a problem is found before any
        // launch.
        let halves = [(0, half), (half, t - half)].map(|(r0, n)| {
            // SAFETY: rows [r0, r0 + n) of validated views; the workspace as given.
            unsafe {
                let xr = MatrixRef::from_raw(rows_of(&x.geo(), r0, n));
                let yr = MatrixMut::from_raw(rows_of(y, r0, n));
                let ws = MoeWorkspace::from_raw(workspace.0, workspace.1);
                let rr = match routing {
                    MoeRouting::Logits {
                        logits,
                        topk,
                        renormalize,
                    } => MoeRouting::Logits {
                        logits: MatrixRef::from_raw(rows_of(&logits.geo(), r0, n)),
                        topk: *topk,
                        renormalize: *renormalize,
                    },
                    MoeRouting::Given { topk_ids, topk_weights } => MoeRouting::Given {
                        topk_ids: MatrixRef::from_raw(rows_of(&topk_ids.geo(), r0, n)),
                        topk_weights: MatrixRef::from_raw(rows_of(&topk_weights.geo(), r0, n)),
                    },
                };
                let w13 = MatrixRef::from_raw(p.w13);
                let w2 = MatrixRef::from_raw(p.w2);
                validate_fused_moe(&xr, &w13, &w2, &rr, opts, &ws, &yr)
            }
        });
        let [a, b] = halves;
        let (a, b) = (a?, b?);
        for q in [&a, &b] {
            // The workspace is reused by the second half only after the first half's
            // kernels (same stream); the all-reduce reads y alone.
            self.ops.run_fused_moe(q)?;
            side.join(main)?;
            mark(EpMark::CollectiveBegin, side);
            // SAFETY: this half's rows of the validated y; every rank makes the same two
            // calls in the same order on its side stream.
            unsafe {
                self.comm
                    .all_reduce_sum_on(side, q.y.ptr, q.y.ptr, q.tokens * h, q.dtype)?
            };
            mark(EpMark::CollectiveEnd, side);
        }
        main.join(side)?;
        Ok(())
    }
}

/// Rows `[r0, r0 + n)` of a (row-major) geometry.
fn rows_of(g: &Geometry, r0: usize, n: usize) -> Geometry {
    let skip = r0 as i64 * g.row_stride;
    Geometry {
        ptr: g.ptr + (skip as u64) * g.dtype.bytes() as u64,
        len: g.len.saturating_sub(skip as usize),
        rows: n,
        ..*g
    }
}
