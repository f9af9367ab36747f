//! [`Ops::grouped_gemm`]: for callers who route themselves, every routed (token, j) entry
//! times its expert's weight in one launch (after the alignment), no host synchronisation.

use super::fused::element;
use super::problem::{grouped_gemm_workspace_bytes, MoeWorkspace, WorkspaceLayout, GROUPED_BLOCK_M};
use crate::error::boxed;
use crate::error::OpsError;
use crate::gemm::{check_layout, check_vector_alignment, overlaps, range};
use crate::stream::Uses;
use crate::tensor::{DType, Geometry, MatrixMut, MatrixRef};
use crate::Ops;
use rcute_kernel::grouped_gemm::{GroupedA, GroupedEpilogue, GroupedGemmArgs, GroupedGemmConfig};
use rcute_kernel::moe_routing::{MAX_LOCAL_EXPERTS, MAX_TOPK};

/// A validated grouped GEMM.
#[derive(Clone, Copy, Debug)]
pub struct GroupedProblem {
    /// `T`.
    pub tokens: usize,
    /// `k`.
    pub topk: usize,
    /// `N`.
    pub n: usize,
    /// `K`.
    pub k: usize,
    /// `L`.
    pub local_experts: usize,
    /// First local expert.
    pub expert_offset: usize,
    pub(crate) x: Geometry,
    pub(crate) w: Geometry,
    pub(crate) ids: Geometry,
    pub(crate) weights: Option<Geometry>,
    pub(crate) out: Geometry,
    pub(crate) layout: WorkspaceLayout,
    pub(crate) workspace: u64,
}

fn row_major(op: &'static str, g: &Geometry, output: bool, vectors: bool) -> Result<(), OpsError> {
    check_layout(op, g, output)?;
    if g.col_stride != 1 {
        return Err(OpsError::Strides {
            operand: op,
            detail: "must be row-major".into(),
        });
    }
    if vectors {
        check_vector_alignment(op, g)?;
    }
    Ok(())
}

/// Validates [`Ops::grouped_gemm`]'s inputs.
pub fn validate_grouped_gemm(
    x: &MatrixRef<'_>,
    w: &MatrixRef<'_>,
    topk_ids: &MatrixRef<'_>,
    weights: Option<&MatrixRef<'_>>,
    expert_offset: usize,
    workspace: &MoeWorkspace<'_>,
    out: &MatrixMut<'_>,
) -> Result<GroupedProblem, OpsError> {
    let (xg, wg, ig, og) = (x.geo(), w.geo(), topk_ids.geo(), out.geo());
    if !matches!(xg.dtype, DType::BF16 | DType::F16) || wg.dtype != xg.dtype || og.dtype != xg.dtype {
        return Err(OpsError::DType(format!(
            "x {}, w {}, out {}: one of bf16 / f16",
            xg.dtype.name(),
            wg.dtype.name(),
            og.dtype.name()
        )));
    }
    if ig.dtype != DType::S32 || weights.is_some_and(|v| v.geo().dtype != DType::F32) {
        return Err(OpsError::DType("topk_ids must be int32, weights f32".into()));
    }
    let (tokens, k, topk, n, local) = (xg.rows, xg.cols, ig.cols, wg.rows, wg.batch);
    if tokens == 0 || k == 0 || n == 0 || local == 0 || topk == 0 {
        return Err(OpsError::Empty(format!(
            "x [{tokens}, {k}], w [{local}, {n}, {}], top-{topk}",
            wg.cols
        )));
    }
    if wg.cols != k || ig.rows != tokens || og.rows != tokens * topk || og.cols != n {
        return Err(OpsError::Shape(format!(
            "x [{tokens}, {k}], w [{local}, {n}, {}], topk_ids [{}, {topk}], out [{}, {}] (want [T * k, N])",
            wg.cols, ig.rows, og.rows, og.cols
        )));
    }
    if let Some(v) = weights {
        let v = v.geo();
        if v.rows != tokens || v.cols != topk || v.row_stride != topk as i64 {
            return Err(OpsError::Shape(format!(
                "weights [{}, {}]: expected dense [{tokens}, {topk}]",
                v.rows, v.cols
            )));
        }
        row_major("weights", &v, false, false)?;
    }
    if !k.is_multiple_of(8) || !n.is_multiple_of(2) {
        return Err(OpsError::Alignment {
            operand: "w",
            detail: format!("K = {k} must be a multiple of 8 and N = {n} even"),
        });
    }
    if topk > MAX_TOPK as usize || local > MAX_LOCAL_EXPERTS as usize {
        return Err(OpsError::Shape(format!(
            "top-{topk} (at most {MAX_TOPK}), {local} experts (at most {MAX_LOCAL_EXPERTS})"
        )));
    }
    if tokens.saturating_mul(topk) >= 1 << 30 || expert_offset > i32::MAX as usize {
        return Err(OpsError::TooLarge { what: "tokens x top-k" });
    }
    row_major("x", &xg, false, true)?;
    row_major("w", &wg, false, true)?;
    row_major("topk_ids", &ig, false, false)?;
    row_major("out", &og, true, false)?;
    if ig.row_stride != topk as i64 {
        return Err(OpsError::Strides {
            operand: "topk_ids",
            detail: "must be dense [T, k]".into(),
        });
    }
    if !og.ptr.is_multiple_of(4) || og.row_stride % 2 != 0 {
        return Err(OpsError::Alignment {
            operand: "out",
            detail: "4-byte aligned, even leading dimension".into(),
        });
    }
    let need = grouped_gemm_workspace_bytes(tokens, topk, local)?;
    if workspace.len < need {
        return Err(OpsError::OutOfBounds {
            operand: "workspace",
            needed: need,
            len: workspace.len,
        });
    }
    let layout = WorkspaceLayout::new(tokens, topk, local, GROUPED_BLOCK_M, 0, 0, 1, 0)?;
    let ws = (workspace.ptr, workspace.ptr + need as u64);
    let or = range(&og)?;
    let mut ins = vec![range(&xg)?, range(&wg)?, range(&ig)?];
    if let Some(v) = weights {
        ins.push(range(&v.geo())?);
    }
    if ins.iter().any(|r| overlaps(*r, or) || overlaps(*r, ws)) || overlaps(or, ws) {
        return Err(OpsError::Strides {
            operand: "out",
            detail: "out, the workspace and the inputs must not overlap".into(),
        });
    }
    Ok(GroupedProblem {
        tokens,
        topk,
        n,
        k,
        local_experts: local,
        expert_offset,
        x: xg,
        w: wg,
        ids: ig,
        weights: weights.map(|v| v.geo()),
        out: og,
        layout,
        workspace: workspace.ptr,
    })
}

impl Ops {
    /// For callers who route themselves: `out[t * k + j] = weights[t, j] * (W_e x_t)` for
    /// every entry whose expert `e = topk_ids[t, j]` is local (`w [L, N, K]` holds experts
    /// `expert_offset .. expert_offset + L`; `weights` `None` for 1); rows of entries
    /// routed elsewhere are not written. `x [T, K]`, `out [T * k, N]`, bf16 or f16. The
    /// workspace is [`super::grouped_gemm_workspace_bytes`] bytes; nothing waits for the
    /// host.
    ///
    /// # Errors
    ///
    /// As [`Ops::fused_moe`]: types, shapes, empty inputs, alignment (`K % 8`, even
    /// `N`), bounds, a small workspace, overlap — before any launch.
    #[allow(clippy::too_many_arguments)]
    pub fn grouped_gemm(
        &self,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        topk_ids: &MatrixRef<'_>,
        weights: Option<&MatrixRef<'_>>,
        expert_offset: usize,
        workspace: &mut MoeWorkspace<'_>,
        out: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let p = validate_grouped_gemm(x, w, topk_ids, weights, expert_offset, workspace, out)?;
        let mut uses = Uses::new(self.stream())?;
        for v in [Some(x), Some(w), Some(topk_ids), weights].into_iter().flatten() {
            uses.read(v.tracked());
        }
        uses.write(workspace.tracked_mut());
        uses.write(out.tracked_mut());
        let _scope = self.launch_scope();
        let el = element(p.x.dtype)?;
        let cfg = GroupedGemmConfig::new(el, GroupedA::Gathered, GroupedEpilogue::Scatter);
        let (g, f) = self.grouped_kernel(&cfg)?;
        let l = &p.layout;
        let ws = p.workspace;
        let a = GroupedGemmArgs {
            a: p.x.ptr,
            b: p.w.ptr,
            d: p.out.ptr,
            sorted_ids: ws + l.sorted_ids as u64,
            block_expert: ws + l.block_expert as u64,
            total_rows: ws + l.total_rows as u64,
            weights: p.weights.map_or(0, |v| v.ptr),
            m: l.cap.rows as i32,
            n: p.n as i32,
            k: p.k as i32,
            lda: p.x.row_stride,
            ldb: p.w.row_stride,
            ldd: p.out.row_stride,
            expert_stride: p.w.batch_stride,
            entries: (p.tokens * p.topk) as i32,
            topk: p.topk as i32,
            splits: 1,
            split_stride: 0,
            up_first: false,
            // the alignment is this launch's predecessor: nothing to prefetch before the wait
            ..Default::default()
        };
        g.check(&a).map_err(boxed)?;
        self.moe_align(
            p.ids.ptr,
            p.tokens,
            p.topk,
            p.expert_offset,
            p.local_experts,
            ws,
            l,
            None,
        )?;
        // SAFETY: validated views and workspace regions sized for these shapes.
        unsafe { g.launch(&f, &a) }.map_err(boxed)
    }
}
