//! The token-dispatch combine of [`super::ExpertParallel`] ([`super::EpCombine::Dispatch`]):
//! each rank holds its own `T` tokens (the same `T` on every rank); the routed token rows
//! go to the ranks that own their experts, are computed there, come back, and are summed
//! on the source rank.
//!
//! On the communicator's stream, with no host synchronisation:
//!
//! 1. routing (top-k softmax into the workspace when routed from logits);
//! 2. `rc_ep_dispatch_pack` / `_gather_v16`: per destination `p`, the tokens with an
//!    expert on `p`, in token order, as rows of block `p` of `[W, T]` send buffers (x
//!    rows, their routing; padding rows carry expert -1);
//! 3. one NCCL group of send/recv pairs (all-to-all) of the rows and their routing;
//! 4. [`crate::Ops::run_fused_moe`] on the `W T` received rows (the padding rows route
//!    nowhere, so they cost no GEMM work);
//! 5. all-to-all of the results back to their source ranks;
//! 6. `rc_ep_dispatch_combine_<type>`: `y[t] = sum over p = 0, 1, ... of the rows that came
//!    back for t`, in f32, fixed order.
//!
//! The capacity is fixed at `T` rows per destination (every token fits, so the counts of
//! step 2 are never read on the host and the whole layer can be captured in a CUDA graph);
//! the price is that each all-to-all moves `T` rows per rank pair whatever the routing
//! sends. Every step is deterministic (NCCL's send/recv copy bytes), so two runs are
//! bit-identical; against one GPU the result differs by each rank's rounding of its part
//! to bf16 / f16.

use super::comm::{Communicator, EpMark};
use crate::error::{boxed, OpsError};
use crate::moe::problem::Regions;
use crate::moe::{fused_moe_workspace_bytes, validate_fused_moe, MoeOptions, MoeRouting, MoeWorkspace};
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef};
use crate::Ops;
use cudarc::driver::CudaStream;
use rcute_kernel::moe_routing::ep_dispatch::{self, EpPackArgs, GeneratedEpKernel};
use rcute_kernel::KernelArgs;
use std::sync::Arc;

/// Byte offsets of the dispatch's workspace regions (the fused MoE's own workspace first).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DispatchLayout {
    pub fused: usize,
    pub own_ids: usize,
    pub own_weights: usize,
    pub slot_map: usize,
    pub src_token: usize,
    pub counts: usize,
    pub send_ids: usize,
    pub send_weights: usize,
    pub recv_ids: usize,
    pub recv_weights: usize,
    /// `[W, T, H]`: the rows sent, later the rows that came back.
    pub send_x: usize,
    pub recv_x: usize,
    /// `[W, T, H]`: the fused MoE's output on the received rows.
    pub y_recv: usize,
    pub bytes: usize,
}

impl DispatchLayout {
    pub(crate) fn new(
        tokens: usize,
        topk: usize,
        local: usize,
        world: usize,
        hidden: usize,
        inter: usize,
        dtype: DType,
    ) -> Result<DispatchLayout, OpsError> {
        let too_large = || OpsError::TooLarge {
            what: "expert-parallel dispatch workspace",
        };
        let rows = world.checked_mul(tokens).ok_or_else(too_large)?;
        let fused = fused_moe_workspace_bytes(rows, topk, local, hidden, inter, dtype)?;
        let mut r = Regions::new("expert-parallel dispatch workspace");
        let mut take = |bytes| r.take(bytes);
        let entries = rows.checked_mul(topk).and_then(|n| n.checked_mul(4));
        let x_bytes = rows.checked_mul(hidden).and_then(|n| n.checked_mul(dtype.bytes()));
        let l = DispatchLayout {
            fused: take(Some(fused))?,
            own_ids: take(tokens.checked_mul(topk * 4))?,
            own_weights: take(tokens.checked_mul(topk * 4))?,
            slot_map: take(rows.checked_mul(4))?,
            src_token: take(rows.checked_mul(4))?,
            counts: take(world.checked_mul(4))?,
            send_ids: take(entries)?,
            send_weights: take(entries)?,
            recv_ids: take(entries)?,
            recv_weights: take(entries)?,
            send_x: take(x_bytes)?,
            recv_x: take(x_bytes)?,
            y_recv: take(x_bytes)?,
            bytes: 0,
        };
        Ok(DispatchLayout { bytes: r.bytes(), ..l })
    }
}

/// A raw dense row-major geometry in the workspace.
fn raw(ptr: u64, dtype: DType, rows: usize, cols: usize, device: Option<usize>) -> Geometry {
    Geometry {
        ptr,
        len: rows * cols,
        dtype,
        rows,
        cols,
        batch: 1,
        row_stride: cols as i64,
        col_stride: 1,
        batch_stride: 0,
        device,
    }
}

/// The whole dispatch (see the module docs); inputs as [`super::ExpertParallel::fused_moe`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    ops: &Ops,
    comm: &Communicator,
    x: &MatrixRef<'_>,
    w13: &MatrixRef<'_>,
    w2: &MatrixRef<'_>,
    routing: &MoeRouting<'_>,
    opts: &MoeOptions,
    workspace: &mut MoeWorkspace<'_>,
    y: &mut MatrixMut<'_>,
    mark: &mut dyn FnMut(EpMark, &Arc<CudaStream>),
) -> Result<(), OpsError> {
    let world = comm.world_size();
    let (xg, yg) = (x.geo(), y.geo());
    let (t, h, local) = (xg.rows, xg.cols, w13.geo().batch);
    let topk = routing.topk();
    let dt = xg.dtype;
    let l = DispatchLayout::new(t, topk, local, world, h, w13.geo().rows / 2, dt)?;
    if workspace.len < l.bytes {
        return Err(OpsError::OutOfBounds {
            operand: "workspace",
            needed: l.bytes,
            len: workspace.len,
        });
    }
    let ws = workspace.ptr;
    // The caller's own operands, validated as a one-GPU layer on its T tokens.
    // SAFETY: the workspace's head region (its fused part), inside the checked length.
    let head = unsafe { MoeWorkspace::from_raw(ws, l.bytes) };
    let own = validate_fused_moe(x, w13, w2, routing, opts, &head, y)?;
    if xg.row_stride != h as i64 {
        return Err(OpsError::Strides {
            operand: "x",
            detail: "the dispatch needs dense x [T, H]".into(),
        });
    }
    ops.check_devices(&[("x", &own.x), ("w13", &own.w13), ("w2", &own.w2), ("y", &own.y)])?;
    // The received rows' problem on the workspace.
    let rows = world * t;
    let at = |o: usize| ws + o as u64;
    let dev = yg.device;
    // SAFETY: regions of the workspace sized by the layout, disjoint from each other.
    let (rx, rids, rw, ry, rhead) = unsafe {
        (
            MatrixRef::from_raw(raw(at(l.recv_x), dt, rows, h, dev)),
            MatrixRef::from_raw(raw(at(l.recv_ids), DType::S32, rows, topk, dev)),
            MatrixRef::from_raw(raw(at(l.recv_weights), DType::F32, rows, topk, dev)),
            MatrixMut::from_raw(raw(at(l.y_recv), dt, rows, h, dev)),
            MoeWorkspace::from_raw(at(l.fused), l.own_ids - l.fused),
        )
    };
    let recv_routing = MoeRouting::Given {
        topk_ids: rids,
        topk_weights: rw,
    };
    let recv = validate_fused_moe(&rx, w13, w2, &recv_routing, opts, &rhead, &ry)?;
    // Kernels first: a failed compilation launches nothing.
    let el = crate::moe::fused::element(dt)?;
    let pack = ep_dispatch::generate_pack();
    let gather = ep_dispatch::generate_gather();
    let combine = ep_dispatch::generate_combine(el).map_err(boxed)?;
    let (fp, fg, fc) = (
        ops.moe_unit(&pack.name, &pack.source)?,
        ops.moe_unit(&gather.name, &gather.source)?,
        ops.moe_unit(&combine.name, &combine.source)?,
    );
    let _uses = crate::moe::fused::layer_uses(ops.stream(), [x, w13, w2], routing, workspace, y)?;
    let _scope = ops.launch_scope();
    let (ids, weights) = match (own.logits, own.ids) {
        (Some((lg, renorm)), _) => {
            ops.moe_topk_softmax(&lg, lg.cols, t, topk, renorm, at(l.own_ids), at(l.own_weights))?;
            (at(l.own_ids), at(l.own_weights))
        }
        (None, Some((i, w))) => (i.ptr, w.ptr),
        (None, None) => return Err(OpsError::Shape("no routing".into())),
    };
    let pa = EpPackArgs {
        topk_ids: ids,
        topk_weights: weights,
        slot_map: at(l.slot_map),
        src_token: at(l.src_token),
        send_ids: at(l.send_ids),
        send_weights: at(l.send_weights),
        counts: at(l.counts),
        tokens: t as i32,
        topk: topk as i32,
        local_experts: local as i32,
        world: world as i32,
    };
    let vecs = h * dt.bytes() / 16;
    let gather_args = KernelArgs::new()
        .u64(xg.ptr)
        .u64(at(l.send_x))
        .u64(at(l.src_token))
        .i32(rows as i32)
        .i32(vecs as i32);
    let combine_args = KernelArgs::new()
        .u64(at(l.send_x))
        .u64(at(l.slot_map))
        .u64(yg.ptr)
        .i32(t as i32)
        .i32(h as i32)
        .i32(world as i32);
    let pack_args = GeneratedEpKernel::pack_args(&pa).map_err(boxed)?;
    // SAFETY: every pointer is a validated view or a workspace region sized by the layout
    // for these shapes; x is dense [T, H] with H a multiple of 8 (16-byte rows).
    unsafe {
        fp.launch(&GeneratedEpKernel::pack_config(&pa), &pack_args)
            .map_err(boxed)?;
        fg.launch(&ep_dispatch::vector_config(rows, vecs), &gather_args)
            .map_err(boxed)?;
    }
    mark(EpMark::CollectiveBegin, comm.stream());
    // SAFETY: [W, T, ...] send and receive regions of the workspace; every rank makes
    // the same calls with the same T.
    unsafe {
        comm.all_to_all_group(&[
            (at(l.send_x), at(l.recv_x), t * h, dt),
            (at(l.send_ids), at(l.recv_ids), t * topk, DType::S32),
            (at(l.send_weights), at(l.recv_weights), t * topk, DType::F32),
        ])?;
    }
    mark(EpMark::CollectiveEnd, comm.stream());
    ops.run_fused_moe(&recv)?;
    let _scope = ops.launch_scope();
    mark(EpMark::CollectiveBegin, comm.stream());
    // SAFETY: y_recv [W, T, H] back into send_x (free since the first all-to-all).
    unsafe { comm.all_to_all_group(&[(at(l.y_recv), at(l.send_x), t * h, dt)])? };
    mark(EpMark::CollectiveEnd, comm.stream());
    // SAFETY: send_x now holds [W, T, H] returned rows; y is the validated [T, H].
    unsafe { fc.launch(&ep_dispatch::vector_config(t, h / 8), &combine_args) }.map_err(boxed)?;
    Ok(())
}
