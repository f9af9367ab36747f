//! The fused MoE layer on candle tensors ([`rcute_ops::Ops::fused_moe`]).

use crate::error::ops;
use crate::launch::{launch, Output};
use crate::operand::{dense, geometry, view, view_mut, PLACEHOLDER};
use candle_core::{Result, Tensor};
use rcute_ops::moe::{fused_moe_workspace_bytes, validate_fused_moe, MoeOptions, MoeWorkspace};
use rcute_ops::{Geometry, OpsError};

/// How tokens are routed to experts.
#[derive(Clone, Copy, Debug)]
pub enum MoeRouting<'a> {
    /// Router logits `[T, E]` (f32, bf16 or f16): softmax, top-`k` (ties to the lower
    /// expert) and, with `renormalize`, the `k` weights divided by their sum (Mixtral),
    /// all on the GPU.
    Logits {
        /// `[T, E]`.
        logits: &'a Tensor,
        /// `k`.
        topk: usize,
        /// Renormalise the `k` weights.
        renormalize: bool,
    },
    /// The caller's routing: `topk_ids` i32 `[T, k]` (global expert ids) and
    /// `topk_weights` f32 `[T, k]`.
    Given {
        /// `[T, k]` i32.
        topk_ids: &'a Tensor,
        /// `[T, k]` f32.
        topk_weights: &'a Tensor,
    },
}

/// `y_t = sum_k w_tk W2_e (silu(Wgate_e x_t) * (Wup_e x_t))`: `x` `[T, H]`, `w13`
/// `[L, 2I, H]` (rows `0..I` the gate, `I..2I` the up projection), `w2` `[L, H, I]`, all
/// bf16 or f16 and row-major; `opts.expert_offset` is the global id of `w13`'s first
/// expert (expert parallelism). The output is a new `[T, H]` tensor; the workspace is
/// allocated on candle's stream for the call.
///
/// # Errors
///
/// rcute's validation errors ([`rcute_ops::moe::validate_fused_moe`]), a CPU tensor.
pub fn fused_moe(x: &Tensor, w13: &Tensor, w2: &Tensor, routing: MoeRouting<'_>, opts: MoeOptions) -> Result<Tensor> {
    let mut inputs = vec![("x", x), ("w13", w13), ("w2", w2)];
    let (topk, renormalize) = match routing {
        MoeRouting::Logits {
            logits,
            topk,
            renormalize,
        } => {
            inputs.push(("logits", logits));
            (topk, Some(renormalize))
        }
        MoeRouting::Given {
            topk_ids,
            topk_weights,
        } => {
            inputs.extend([("topk_ids", topk_ids), ("topk_weights", topk_weights)]);
            (topk_ids.dims().last().copied().unwrap_or(0), None)
        }
    };
    let mut gs = Vec::new();
    for (i, (name, t)) in inputs.iter().enumerate() {
        gs.push(geometry(name, t, PLACEHOLDER << i, None)?);
    }
    let (tokens, hidden) = (gs[0].rows, gs[0].cols);
    let (local, inter) = (gs[1].batch, gs[1].rows / 2);
    let dt = gs[0].dtype;
    let dims = vec![tokens, hidden];
    // Sizes rcute rejects get their error from validation below, with a placeholder size.
    let bytes = fused_moe_workspace_bytes(tokens, topk, local, hidden, inter, dt).unwrap_or(0);
    let shape = Shape {
        renormalize,
        topk,
        opts,
    };
    // SAFETY: validation only reads the geometry.
    unsafe { shape.run(None, &gs, dense(dt, &dims, PLACEHOLDER << 6), (PLACEHOLDER << 7, bytes)) }.map_err(ops)?;
    let out = Output {
        dtype: dt,
        dims,
        zeroed: true,
        workspace: bytes,
    };
    // SAFETY: the device geometries of the locked, guarded buffers (see `launch`).
    launch(&inputs, out, &|o, g, d, ws| unsafe { shape.run(Some(o), g, d, ws) })
}

/// The routing's kind and options, for [`Shape::run`].
struct Shape {
    /// `Some(renormalize)` for logits, `None` for the caller's routing.
    renormalize: Option<bool>,
    topk: usize,
    opts: MoeOptions,
}

impl Shape {
    /// Validate (`o = None`) or run the layer on geometries `[x, w13, w2, routing...]`.
    ///
    /// # Safety
    /// With `o`, the geometries and the workspace must describe live device buffers.
    unsafe fn run(&self, o: Option<&rcute_ops::Ops>, g: &[Geometry], y: Geometry, ws: (u64, usize)) -> std::result::Result<(), OpsError> {
        let routing = match self.renormalize {
            Some(renormalize) => rcute_ops::moe::MoeRouting::Logits {
                logits: view(g[3]),
                topk: self.topk,
                renormalize,
            },
            None => rcute_ops::moe::MoeRouting::Given {
                topk_ids: view(g[3]),
                topk_weights: view(g[4]),
            },
        };
        let (x, w13, w2) = (view(g[0]), view(g[1]), view(g[2]));
        let mut out = view_mut(y);
        let mut ws = MoeWorkspace::from_raw(ws.0, ws.1);
        match o {
            None => validate_fused_moe(&x, &w13, &w2, &routing, &self.opts, &ws, &out).map(|_| ()),
            Some(o) => o.fused_moe(&x, &w13, &w2, &routing, &self.opts, &mut ws, &mut out),
        }
    }
}
