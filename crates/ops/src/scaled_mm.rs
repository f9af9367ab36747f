//! `scaled_mm`: the INT8 scaled GEMM of vLLM / InfiniOP (W8A8 inference), and on sm_90
//! the FP8 scaled GEMM (e4m3 A and B, f32 accumulation, the same scales, bias and outputs):
//! `out[l, i, j] = convert(float(sum_k A[l, i, k] * B[l, k, j]) * a_scale[i] * b_scale[j] + bias[j])`
//! with `s8` A (row-major `M x K`) and B (column-major `K x N`), exact `s32` accumulation,
//! f32 scales — one per tensor or one per row of A (per token) / per column of B (per
//! channel) — an optional bias of the output type, and an f16 or bf16 row-major output,
//! 2-D or batched 3-D (with INT8, A or B may be one matrix broadcast over the batch; FP8
//! needs every operand batched: the SM90 TMA kernel, the only FP8 kernel, cannot step by a
//! batch stride of 0; scales and bias are shared by the batch).
//!
//! [`validate_scaled_mm`] checks everything into a [`ScaledMmProblem`] (typed
//! [`OpsError`]s, nothing is launched on bad input); [`crate::select::select_scaled_mm`]
//! picks the tile and split-K; [`Ops::scaled_mm`] generates, compiles (cached), loads and
//! launches the kernel for the GPU's architecture: on sm_90 the TMA + `wgmma` kernel of
//! `rcute_kernel::gemm_sm90` with the scaled_mm fusion ([`Ops::run_scaled_mm_sm90`]) when
//! the operands suit TMA, otherwise the s8 kernel of `rcute_kernel::gemm_sm80` (the SM80 GEMM with the scaled-mm fusion)
//! ([`Ops::scaled_mm_target`]: sm_75 Turing, sm_80 / sm_86 / sm_89 / sm_90 Ampere class).
//!
//! Rules (checked here): INT8 `K` even, A's and B's pointers, leading dimensions and batch
//! strides even (the Ampere-class kernel copies 16 bytes where everything is 16-byte
//! aligned, else 8, 4 or 2 bytes: [`scaled_mm_copy_bytes`]; its narrowest copy moves two
//! `s8` elements, so odd values stay an error); on sm_75 (16-byte copies only) and for FP8
//! (the SM90 TMA kernel only) InfiniOP's alignment: `K` a multiple of 16 and A / B
//! pointers, leading dimensions and batch strides multiples of 16 bytes. For every
//! type, `N` a multiple of 8 and the output's pointer 16-byte aligned with a leading
//! dimension (and batch stride) a multiple of 8 elements: the epilogue stores 16-byte
//! f16 / bf16 vectors and has no narrower store. On sm_75 the output is f16.
//! [`validate_scaled_mm`] lists every rejection.

use crate::error::boxed;
use crate::error::OpsError;
use crate::gemm::{check_layout, check_vector_alignment, overlaps, range};
use crate::scaled_mm_config::{not_scaled_mm, scaled_mm_sm80_config, scaled_mm_smem_budget, scaled_mm_spec_kernel};
pub use crate::scaled_mm_config::{sm90_scaled_config, ScaledMmKind};
use crate::scaled_mm_kernel::{LoadedScaledMm, ScaledMmKey};
use crate::select::{select_scaled_mm, ScaledMmSelection};
use crate::stream::Uses;
use crate::tensor::{DType, Geometry, Major, MatrixMut, MatrixRef, VectorRef};
use crate::tuning::{ConfigSpec, TunedKernel};
use crate::Ops;
use rcute_kernel::gemm_sm80::{
    self, FusionArgs, GemmArgs, GemmElement as Element, GemmSm80Config, ScaleKind, SplitKMode,
};
use rcute_kernel::{Arch, CompileOptions, KernelCache};
use std::marker::PhantomData;
use std::sync::Arc;

/// The kernel family of the SM80-class `scaled_mm` (Ampere class or Turing).
pub use rcute_kernel::gemm_sm80::Sm80Target as ScaledMmTarget;

/// A scale operand of [`Ops::scaled_mm`]: f32 values in device memory.
#[derive(Clone, Copy, Debug)]
pub enum Scale<'a> {
    /// One scale for the whole operand (`v[0]`; the view holds exactly one element).
    Scalar(VectorRef<'a>),
    /// One scale per row of A (per token: `M` elements) or per column of B (per output
    /// channel: `N` elements).
    Vector(VectorRef<'a>),
}

impl<'a> Scale<'a> {
    /// [`Scale::Scalar`] for a one-element view, [`Scale::Vector`] otherwise (InfiniOP's
    /// rule: a scale descriptor of shape `(1,)` is per tensor).
    pub fn auto(v: VectorRef<'a>) -> Scale<'a> {
        if v.len() == 1 {
            Scale::Scalar(v)
        } else {
            Scale::Vector(v)
        }
    }

    /// The view.
    pub fn view(&self) -> &VectorRef<'a> {
        match self {
            Scale::Scalar(v) | Scale::Vector(v) => v,
        }
    }
}

/// A validated scaled-mm problem.
///
/// Only [`validate_scaled_mm`] makes one, and its fields are read-only: a problem always describes
/// views that passed validation, and borrows their buffers (`'a`), so the safe
/// [`crate::Ops::run_scaled_mm`] family can launch it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaledMmProblem<'a> {
    /// Rows of A and the output.
    pub(crate) m: usize,
    /// Columns of B and the output.
    pub(crate) n: usize,
    /// Columns of A, rows of B.
    pub(crate) k: usize,
    /// Batch count.
    pub(crate) l: usize,
    /// A (`s8`, row-major M x K); batch stride 0 when broadcast.
    pub(crate) a: Geometry,
    /// B (`s8`, column-major K x N); batch stride 0 when broadcast.
    pub(crate) b: Geometry,
    /// The output (f16 / bf16, row-major M x N).
    pub(crate) out: Geometry,
    /// A's scale (f32, 1 or M elements).
    pub(crate) a_scale: Geometry,
    /// How A's scale applies ([`ScaleKind::Scalar`] or [`ScaleKind::PerRow`]).
    pub(crate) a_scale_kind: ScaleKind,
    /// B's scale (f32, 1 or N elements).
    pub(crate) b_scale: Geometry,
    /// How B's scale applies ([`ScaleKind::Scalar`] or [`ScaleKind::PerCol`]).
    pub(crate) b_scale_kind: ScaleKind,
    /// The bias (N elements of the output type).
    pub(crate) bias: Option<Geometry>,
    /// The views' borrow: a problem cannot outlive the buffers it was validated on.
    _views: PhantomData<&'a ()>,
}

impl ScaledMmProblem<'_> {
    /// Rows of A and the output.
    pub fn m(&self) -> usize {
        self.m
    }
    /// Columns of B and the output.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Columns of A, rows of B.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Batch count.
    pub fn l(&self) -> usize {
        self.l
    }
    /// A (batch stride 0 when broadcast).
    pub fn a(&self) -> Geometry {
        self.a
    }
    /// B (batch stride 0 when broadcast).
    pub fn b(&self) -> Geometry {
        self.b
    }
    /// The output.
    pub fn out(&self) -> Geometry {
        self.out
    }
    /// A's scale.
    pub fn a_scale(&self) -> Geometry {
        self.a_scale
    }
    /// How A's scale applies.
    pub fn a_scale_kind(&self) -> ScaleKind {
        self.a_scale_kind
    }
    /// B's scale.
    pub fn b_scale(&self) -> Geometry {
        self.b_scale
    }
    /// How B's scale applies.
    pub fn b_scale_kind(&self) -> ScaleKind {
        self.b_scale_kind
    }
    /// The bias, if any.
    pub fn bias(&self) -> Option<Geometry> {
        self.bias
    }
}

fn vector_check(
    operand: &'static str,
    v: &Geometry,
    dtype: DType,
    expected_len: &[usize],
    expected: String,
) -> Result<(), OpsError> {
    if v.dtype != dtype {
        return Err(OpsError::DType(format!(
            "{operand} is {}, expected {}",
            v.dtype.name(),
            dtype.name()
        )));
    }
    if !expected_len.contains(&v.cols) || v.rows != 1 || v.batch != 1 {
        return Err(OpsError::VectorLength {
            operand,
            len: v.cols.saturating_mul(v.rows).saturating_mul(v.batch),
            expected,
        });
    }
    if v.col_stride != 1 {
        return Err(OpsError::Strides {
            operand,
            detail: format!("vectors must be contiguous (stride {})", v.col_stride),
        });
    }
    let needed = v.extent()?;
    if needed > v.len {
        return Err(OpsError::OutOfBounds {
            operand,
            needed,
            len: v.len,
        });
    }
    if v.ptr == 0 || !v.ptr.is_multiple_of(dtype.bytes() as u64) {
        return Err(OpsError::Alignment {
            operand,
            detail: format!("address {:#x} is null or not aligned to {} bytes", v.ptr, dtype.bytes()),
        });
    }
    Ok(())
}

/// INT8 A and B: a 2-byte aligned pointer, an even leading dimension and (with several
/// batches) an even batch stride: what the narrowest (2-byte) copy of the SM80-class
/// kernel needs.
fn check_pair_alignment(operand: &'static str, g: &Geometry) -> Result<(), OpsError> {
    let detail = if !g.ptr.is_multiple_of(2) {
        format!("address {:#x} is odd (the narrowest s8 copy moves 2 bytes)", g.ptr)
    } else if g.ld() % 2 != 0 {
        format!(
            "leading dimension {} is odd (the narrowest s8 copy moves 2 bytes)",
            g.ld()
        )
    } else if g.batch > 1 && g.batch_stride % 2 != 0 {
        format!(
            "batch stride {} is odd (the narrowest s8 copy moves 2 bytes)",
            g.batch_stride
        )
    } else {
        return Ok(());
    };
    Err(OpsError::Alignment { operand, detail })
}

/// The widest global -> shared copy (16, 8, 4 or 2 bytes) the SM80-class INT8 kernel may
/// use for a validated problem: the largest that divides A's and B's pointers, leading
/// dimensions, batch strides (with several batches) and K. 16 is the fast path (and the
/// only width of the sm_75 kernel and the SM90 TMA kernel).
pub fn scaled_mm_copy_bytes(p: &ScaledMmProblem<'_>) -> usize {
    let lds = [p.a.kernel_ld().unsigned_abs(), p.b.kernel_ld().unsigned_abs()];
    let mut need = vec![p.a.ptr, p.b.ptr, lds[0], lds[1], p.k as u64];
    if p.l > 1 {
        need.extend([p.a.batch_stride.unsigned_abs(), p.b.batch_stride.unsigned_abs()]);
    }
    [16u64, 8, 4, 2]
        .into_iter()
        .find(|&w| need.iter().all(|v| v % w == 0))
        .unwrap_or(2) as usize
}

/// The output's 16-byte vector stores: a 16-byte aligned pointer, a leading dimension and
/// (with several batches) a batch stride of whole 16-byte vectors (8 f16 / bf16 elements).
fn check_out_alignment(gd: &Geometry) -> Result<(), OpsError> {
    let vec = (16 / gd.dtype.bytes()) as i64;
    let detail = if !gd.ptr.is_multiple_of(16) {
        format!("address {:#x} is not 16-byte aligned", gd.ptr)
    } else if gd.ld() % vec != 0 {
        format!(
            "leading dimension {} is not a multiple of {vec} elements (16 bytes)",
            gd.ld()
        )
    } else if gd.batch > 1 && gd.batch_stride % vec != 0 {
        format!(
            "batch stride {} is not a multiple of {vec} elements (16 bytes)",
            gd.batch_stride
        )
    } else {
        return Ok(());
    };
    Err(OpsError::Alignment { operand: "out", detail })
}

/// The alignment rules of [`validate_scaled_mm`] (see the module docs).
fn check_scaled_alignment(ga: &Geometry, gb: &Geometry, gd: &Geometry, k: usize, n: usize) -> Result<(), OpsError> {
    // Alignment. FP8 runs only the SM90 TMA kernel: InfiniOP's 16-byte rules. INT8 A and
    // B take any even K, leading dimension, batch stride and pointer (the SM80-class
    // kernel copies narrower vectors where 16-byte ones do not fit; its narrowest copy
    // moves two s8 elements).
    let fp8 = ga.dtype == DType::E4M3;
    if fp8 && !k.is_multiple_of(16) {
        return Err(OpsError::Alignment {
            operand: "A",
            detail: format!("K = {k} must be a multiple of 16 (16-byte FP8 vectors along K for TMA)"),
        });
    }
    if !k.is_multiple_of(2) {
        return Err(OpsError::Alignment {
            operand: "A",
            detail: format!("K = {k} must be even (the narrowest s8 copy moves 2 elements)"),
        });
    }
    if !n.is_multiple_of(8) {
        return Err(OpsError::Alignment {
            operand: "out",
            detail: format!("N = {n} must be a multiple of 8 (16-byte output vectors)"),
        });
    }
    if fp8 {
        check_vector_alignment("A", ga)?;
        check_vector_alignment("B", gb)?;
    } else {
        check_pair_alignment("A", ga)?;
        check_pair_alignment("B", gb)?;
    }
    check_out_alignment(gd)?;
    Ok(())
}

/// Validate `out = scaled_mm(a, b, a_scale, b_scale, bias)` (see the module
/// documentation for the semantics and rules). Pure: it reads only the views' geometry,
/// so it runs without a GPU.
///
/// Rejects, each with a typed [`OpsError`] before anything is launched:
/// * A and B not both `s8` or both `e4m3`, an output other than f16 / bf16, scales not
///   f32, a bias not of the output type ([`OpsError::DType`]);
/// * shapes that do not chain, batches that are neither 1 (broadcast) nor the output's
///   ([`OpsError::Shape`]); M, N, K or L = 0 ([`OpsError::Empty`]);
/// * M, N or K above [`crate::gemm::MAX_DIM`], L above 65535, an extent that overflows
///   ([`OpsError::TooLarge`]);
/// * A not row-major, B not column-major, the output not row-major, negative strides, a
///   leading dimension smaller than a row, overlapping output batches, the output
///   overlapping any input, FP8 with an operand broadcast over the batch
///   ([`OpsError::Strides`]);
/// * views past their buffer ([`OpsError::OutOfBounds`]); scales of a length other than
///   1 or M (A) / N (B), a bias of a length other than N ([`OpsError::VectorLength`]);
/// * K odd (FP8: not a multiple of 16), N not a multiple of 8, odd A / B pointers,
///   leading dimensions or batch strides (FP8: not multiples of 16 bytes), an output
///   pointer not 16-byte aligned, an output leading dimension or batch stride not a
///   multiple of 8 elements, null or misaligned scale / bias pointers
///   ([`OpsError::Alignment`]). INT8 operands that pass but are not 16-byte aligned run
///   the narrow-vector kernel ([`scaled_mm_copy_bytes`]); on sm_75 they are an
///   [`OpsError::Alignment`] of [`Ops::scaled_mm`].
///
/// [`Ops::scaled_mm`] adds the operands' device ([`OpsError::Device`]), the architecture
/// (sm_75 and newer; FP8 on sm_90 only; f16 output on sm_75: [`OpsError::Arch`],
/// [`OpsError::DType`]) and the selected kernel's grid ([`OpsError::TooLarge`]).
pub fn validate_scaled_mm<'a, 'd: 'a>(
    a: &MatrixRef<'a>,
    b: &MatrixRef<'a>,
    a_scale: Scale<'a>,
    b_scale: Scale<'a>,
    bias: Option<&VectorRef<'a>>,
    out: &MatrixMut<'d>,
) -> Result<ScaledMmProblem<'a>, OpsError> {
    let (mut ga, mut gb, gd) = (a.geo(), b.geo(), out.geo());
    // Element types.
    let inputs_ok =
        (ga.dtype == DType::S8 && gb.dtype == DType::S8) || (ga.dtype == DType::E4M3 && gb.dtype == DType::E4M3);
    if !inputs_ok || !matches!(gd.dtype, DType::F16 | DType::BF16) {
        return Err(OpsError::DType(format!(
            "A {} x B {} -> {} (scaled_mm takes s8 A and B, or e4m3 A and B, and writes f16 or bf16)",
            ga.dtype.name(),
            gb.dtype.name(),
            gd.dtype.name()
        )));
    }
    // Shapes.
    let (m, k, n, l) = (ga.rows, ga.cols, gb.cols, gd.batch);
    if gb.rows != k || gd.rows != m || gd.cols != n {
        return Err(OpsError::Shape(format!(
            "A is {}x{}, B is {}x{}, out is {}x{}",
            ga.rows, ga.cols, gb.rows, gb.cols, gd.rows, gd.cols
        )));
    }
    if m == 0 || n == 0 || k == 0 || l == 0 {
        return Err(OpsError::Empty(format!("M={m}, N={n}, K={k}, L={l}")));
    }
    crate::gemm::check_dims(m, n, k, l)?;
    for (name, g) in [("A", &mut ga), ("B", &mut gb)] {
        // A batch-1 view, or a batched one with batch stride 0, broadcasts over the batch.
        let broadcast = l > 1 && (g.batch == 1 || g.batch_stride == 0);
        if broadcast && g.dtype == DType::E4M3 {
            return Err(OpsError::Strides {
                operand: name,
                detail: "FP8 runs only the SM90 TMA kernel, which cannot broadcast an operand over \
                         the batch (batch stride 0): pass a batched view"
                    .into(),
            });
        }
        if g.batch == 1 && l > 1 {
            g.batch_stride = 0; // one matrix broadcast over the batch
            g.batch = l;
        } else if g.batch != l {
            return Err(OpsError::Shape(format!(
                "{name} has batch {} but the output has batch {l}",
                g.batch
            )));
        }
    }
    // Layouts: A row-major (K contiguous), B column-major (K contiguous), out row-major.
    for (name, g, want) in [("A", &ga, Major::Row), ("B", &gb, Major::Col), ("out", &gd, Major::Row)] {
        if g.major() != Some(want) {
            return Err(OpsError::Strides {
                operand: name,
                detail: format!(
                    "must be {} (row stride {}, column stride {})",
                    if want == Major::Row {
                        "row-major"
                    } else {
                        "column-major"
                    },
                    g.row_stride,
                    g.col_stride
                ),
            });
        }
    }
    check_layout("A", &ga, false)?;
    check_layout("B", &gb, false)?;
    check_layout("out", &gd, true)?;
    check_scaled_alignment(&ga, &gb, &gd, k, n)?;
    // Scales and bias.
    let a_scale_kind = match a_scale {
        Scale::Scalar(_) => ScaleKind::Scalar,
        Scale::Vector(_) => ScaleKind::PerRow,
    };
    let b_scale_kind = match b_scale {
        Scale::Scalar(_) => ScaleKind::Scalar,
        Scale::Vector(_) => ScaleKind::PerCol,
    };
    let (sa, sb) = (a_scale.view().geo(), b_scale.view().geo());
    match a_scale {
        Scale::Scalar(_) => vector_check("a_scale", &sa, DType::F32, &[1], "1 (per tensor)".into())?,
        Scale::Vector(_) => vector_check("a_scale", &sa, DType::F32, &[m], format!("M = {m} (per row)"))?,
    }
    match b_scale {
        Scale::Scalar(_) => vector_check("b_scale", &sb, DType::F32, &[1], "1 (per tensor)".into())?,
        Scale::Vector(_) => vector_check("b_scale", &sb, DType::F32, &[n], format!("N = {n} (per column)"))?,
    }
    let gbias = bias.map(|v| v.geo());
    if let Some(g) = &gbias {
        vector_check("bias", g, gd.dtype, &[n], format!("N = {n}"))?;
    }
    // The output must not overlap any input.
    let rd = range(&gd)?;
    let mut inputs = vec![
        ("A", range(&ga)?),
        ("B", range(&gb)?),
        ("a_scale", range(&sa)?),
        ("b_scale", range(&sb)?),
    ];
    if let Some(g) = &gbias {
        inputs.push(("bias", range(g)?));
    }
    for (name, r) in inputs {
        if overlaps(rd, r) {
            return Err(OpsError::Strides {
                operand: "out",
                detail: format!("overlaps {name}"),
            });
        }
    }
    Ok(ScaledMmProblem {
        m,
        n,
        k,
        l,
        a: ga,
        b: gb,
        out: gd,
        a_scale: sa,
        a_scale_kind,
        b_scale: sb,
        b_scale_kind,
        bias: gbias,
        _views: PhantomData,
    })
}

/// The architecture rules of `scaled_mm` on a GPU of compute capability `cc`, pure so
/// that they are testable without that GPU: sm_75 or newer ([`OpsError::Arch`]); FP8 only
/// on sm_90 ([`OpsError::Arch`]); on sm_75 (the Turing kernel) an f16 output only
/// ([`OpsError::DType`]).
pub fn check_scaled_mm_arch(cc: (u32, u32), p: &ScaledMmProblem) -> Result<(), OpsError> {
    if cc < (7, 5) {
        return Err(OpsError::Arch(format!(
            "scaled_mm needs sm_75 or newer, found compute capability {}.{}",
            cc.0, cc.1
        )));
    }
    if p.a.dtype == DType::E4M3 && cc != (9, 0) {
        return Err(OpsError::Arch(format!(
            "FP8 scaled_mm needs sm_90, found compute capability {}.{}",
            cc.0, cc.1
        )));
    }
    if cc == (7, 5) && p.out.dtype != DType::F16 {
        return Err(OpsError::DType(format!(
            "{} output on sm_75 (the Turing kernel writes f16 only)",
            p.out.dtype.name()
        )));
    }
    Ok(())
}

/// Whether the SM90 kernel can run a validated problem: TMA needs every batch stride of A
/// and B to be a positive multiple of 16 bytes (a broadcast operand has stride 0) when
/// there are several batches; the rest (K % 16, N % 8, 16-byte leading dimensions and
/// pointers) `validate_scaled_mm` already requires.
fn sm90_qualifies(p: &ScaledMmProblem) -> bool {
    if scaled_mm_copy_bytes(p) != 16 {
        return false;
    }
    let ok = |g: &Geometry| p.l == 1 || (g.batch_stride > 0 && g.batch_stride % 16 == 0);
    ok(&p.a) && ok(&p.b) && (p.l == 1 || (p.out.batch_stride > 0 && p.out.batch_stride % 8 == 0))
}

/// The tuning key of a `scaled_mm` problem: op `scaled_mm`, types `A:OUT` (e.g. `s8:bf16`),
/// fusion `A_SCALE-B_SCALE[+bias]` with scales `tensor`, `token` or `channel` (a single
/// row's per-tensor scale keys as `token`, a single column's as `channel`), and the
/// problem's M bucket, N and K. `rcute tune scaled-mm` writes its entries under this key
/// and [`Ops::scaled_mm`] looks them up under it (one batch only).
///
/// ```
/// # use rcute_ops::tuning::ProblemKey;
/// // The key of 16x4096x4096 with per-token and per-channel scales, a bias and bf16
/// // output on the H200:
/// let k = ProblemKey::new("scaled_mm", "s8:bf16", "token-channel+bias", "sm_90a", 16, 4096, 4096);
/// assert_eq!(k.m, 16);
/// ```
pub fn scaled_mm_key(p: &ScaledMmProblem<'_>, arch: &str) -> crate::tuning::ProblemKey {
    let kind = |s: ScaleKind| match s {
        ScaleKind::Scalar => "tensor",
        ScaleKind::PerRow => "token",
        ScaleKind::PerCol => "channel",
    };
    // One row of A (one column of B) has one scale either way: there a per-tensor scale
    // and a per-token (per-channel) one are the same scaling, and share their entries.
    let a_scale = match p.a_scale_kind {
        ScaleKind::Scalar if p.m == 1 => ScaleKind::PerRow,
        s => s,
    };
    let b_scale = match p.b_scale_kind {
        ScaleKind::Scalar if p.n == 1 => ScaleKind::PerCol,
        s => s,
    };
    let fusion = format!(
        "{}-{}{}",
        kind(a_scale),
        kind(b_scale),
        if p.bias.is_some() { "+bias" } else { "" }
    );
    let dtypes = format!("{}:{}", p.a.dtype.name(), p.out.dtype.name());
    crate::tuning::ProblemKey::new("scaled_mm", &dtypes, &fusion, arch, p.m, p.n, p.k)
}

impl ScaledMmKind {
    /// The kind of a validated problem.
    pub fn of(p: &ScaledMmProblem) -> ScaledMmKind {
        ScaledMmKind {
            ab: p.a.dtype,
            out: p.out.dtype,
            a_scale: p.a_scale_kind,
            b_scale: p.b_scale_kind,
            bias: p.bias.is_some(),
        }
    }
}

impl Ops {
    /// Run a validated problem with the kernel a tuning spec names (an SM80-class spec runs
    /// the Ampere-class kernel, an `sm90:` spec the Hopper kernel; types and fusion come
    /// from the problem). `rcute tune scaled-mm` times candidates through this, and
    /// [`Ops::scaled_mm`] runs a tuning table's entry through it.
    pub fn run_scaled_mm_spec(&self, p: &ScaledMmProblem, spec: &ConfigSpec) -> Result<(), OpsError> {
        match spec {
            ConfigSpec::Sm80(s) => self.run_scaled_mm(p, Some(&s.scaled_mm_selection())),
            ConfigSpec::Sm90(s) => {
                let base = s.apply(rcute_kernel::gemm_sm90::GemmSm90Config::bf16(s.tile, s.schedule));
                self.run_scaled_mm_sm90(p, Some((&base, s.split_k)))
            }
            other => Err(not_scaled_mm(other)),
        }
    }

    /// The tuning table's choice for `p`, where one applies to this GPU and the problem
    /// (an SM90 entry needs sm_90 and TMA-ready operands; FP8 runs only SM90 entries).
    fn tuned_scaled_mm(&self, p: &ScaledMmProblem) -> Option<ConfigSpec> {
        // No key (it allocates) on the per-call path unless a table could answer.
        let spec = self.tuned_scaled_mm_spec(p)?;
        let usable = match spec {
            ConfigSpec::Sm90(_) => self.gpu().compute_capability() == (9, 0) && sm90_qualifies(p),
            ConfigSpec::Sm80(_) => p.a.dtype == DType::S8,
            ConfigSpec::Awq(_) | ConfigSpec::Moe(_) | ConfigSpec::MoeSm90(_) => false,
        };
        usable.then_some(spec)
    }

    /// Run a validated scaled-mm problem on the SM90 TMA + `wgmma` kernel (sm_90 only):
    /// `forced` picks the configuration (tile, schedule, cluster; types and fusion are set
    /// from the problem) and split-K, else [`crate::select::select_scaled_sm90`] does.
    pub fn run_scaled_mm_sm90(
        &self,
        p: &ScaledMmProblem,
        forced: Option<(&rcute_kernel::gemm_sm90::GemmSm90Config, u32)>,
    ) -> Result<(), OpsError> {
        use rcute_kernel::gemm_sm90::FusionArgs;
        if self.gpu().compute_capability() != (9, 0) {
            return Err(OpsError::Arch(format!(
                "the SM90 scaled-mm kernel (and FP8) needs sm_90, found {:?}",
                self.gpu().compute_capability()
            )));
        }
        if !sm90_qualifies(p) {
            return Err(OpsError::Alignment {
                operand: "A/B",
                detail: "the SM90 kernel needs positive 16-byte batch strides (no broadcast operand)".into(),
            });
        }
        let (cfg, split) = match forced {
            Some((c, s)) => (c.clone(), s),
            None => crate::select::select_scaled_sm90(p.m, p.n, p.k, p.l, self.gpu().sm_count()),
        };
        let out = match p.out.dtype {
            DType::F16 => Element::F16,
            _ => Element::BF16,
        };
        let ab = if p.a.dtype == DType::E4M3 {
            Element::E4M3
        } else {
            Element::S8
        };
        let cfg = sm90_scaled_config(cfg, ab, out, p.a_scale_kind, p.b_scale_kind, p.bias.is_some())?;
        let loaded = self.load_gemm_sm90(&cfg)?;
        let mut args = rcute_kernel::gemm_sm80::GemmArgs::tn(
            p.m as i32, p.n as i32, p.k as i32, p.l as i32, p.a.ptr, p.b.ptr, 0, p.out.ptr,
        );
        (args.lda, args.ldb, args.ldc, args.ldd) = (p.a.ld(), p.b.ld(), p.out.ld(), p.out.ld());
        (args.batch_stride_a, args.batch_stride_b) = (p.a.batch_stride, p.b.batch_stride);
        (args.batch_stride_c, args.batch_stride_d) = (p.out.batch_stride, p.out.batch_stride);
        args.split_k = split.max(1);
        let mut fa = FusionArgs::new()
            .ptr("a_scale", p.a_scale.ptr)
            .ptr("b_scale", p.b_scale.ptr);
        if let Some(b) = p.bias {
            fa = fa.ptr("bias", b.ptr);
        }
        // SAFETY: `validate_scaled_mm` checked that every view lies inside its buffer with
        // these strides; the views borrow their buffers for the call.
        unsafe { self.launch_sm90(&loaded, args, &fa) }
    }

    /// `out = convert(float(A @ B) * a_scale * b_scale + bias)`: the INT8 scaled GEMM (see
    /// [`crate::scaled_mm`]). `a` is an `s8` row-major `M x K` view, `b` an `s8`
    /// column-major `K x N` view (`MatrixRef::new(&buf, k, n).col_major()`), `out` an f16 /
    /// bf16 row-major `M x N` view; 3-D when the views are batched. Every input is validated
    /// first; runs on [`Ops::stream`] and returns once launched, holding `cudarc`'s guards of
    /// the views' buffers for the launch (see [`crate::stream`]).
    ///
    /// # Errors
    ///
    /// Everything [`validate_scaled_mm`] rejects (its rustdoc lists each case), then the
    /// architecture rules of [`check_scaled_mm_arch`], an operand on another device
    /// ([`OpsError::Device`]) and a grid the kernel cannot launch ([`OpsError::TooLarge`]),
    /// all before any launch. Scale values live on the device and are not read: NaN or
    /// infinite scales give NaN / infinite outputs, as IEEE arithmetic does.
    pub fn scaled_mm(
        &self,
        a: &MatrixRef<'_>,
        b: &MatrixRef<'_>,
        a_scale: Scale<'_>,
        b_scale: Scale<'_>,
        bias: Option<&VectorRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<(), OpsError> {
        let p = validate_scaled_mm(a, b, a_scale, b_scale, bias, out)?;
        check_scaled_mm_arch(self.gpu().compute_capability(), &p)?;
        self.check_scaled_mm_devices(&p)?;
        let mut uses = Uses::new(self.stream())?;
        uses.read(a.tracked());
        uses.read(b.tracked());
        uses.read(a_scale.view().tracked());
        uses.read(b_scale.view().tracked());
        uses.read(bias.and_then(|v| v.tracked()));
        uses.write(out.tracked_mut());
        self.run_scaled_mm(&p, None)
    }

    /// The kernel family for this GPU — the architecture dispatch of `scaled_mm`:
    /// sm_75 → Turing, sm_80 / sm_86 / sm_89 → Ampere class, sm_90 → (for now) the
    /// Ampere-class kernel; other architectures are an [`OpsError::Arch`].
    pub fn scaled_mm_target(&self) -> Result<ScaledMmTarget, OpsError> {
        let cc = self.gpu().compute_capability();
        match self.gpu().arch() {
            Some(Arch::Sm75) => Ok(ScaledMmTarget::Turing),
            Some(Arch::Sm80 | Arch::Sm86 | Arch::Sm89) => Ok(ScaledMmTarget::Ampere),
            // sm_90: `run_scaled_mm` sends problems that suit TMA to the wgmma kernel of
            // `rcute_kernel::gemm_sm90` (`Ops::run_scaled_mm_sm90`) before asking for this
            // target; the rest (a batch-broadcast operand) and forced selections run the
            // Ampere-class mma.sync kernel.
            Some(Arch::Sm90 | Arch::Sm90a) => Ok(ScaledMmTarget::Ampere),
            _ => Err(OpsError::Arch(format!(
                "scaled_mm needs sm_75, sm_80, sm_86, sm_89 or sm_90, found compute capability {}.{}",
                cc.0, cc.1
            ))),
        }
    }

    /// Generate, compile (cached) and load the scaled-mm kernel of `cfg` for this GPU (once
    /// per configuration).
    pub fn load_scaled_mm(&self, cfg: &GemmSm80Config) -> Result<LoadedScaledMm, OpsError> {
        self.scaled_mms.get_or_try_build(cfg, || self.build_scaled_mm(cfg))
    }

    fn build_scaled_mm(&self, cfg: &GemmSm80Config) -> Result<LoadedScaledMm, OpsError> {
        let arch = self
            .gpu()
            .arch()
            .ok_or_else(|| OpsError::Arch(format!("compute capability {:?}", self.gpu().compute_capability())))?;
        let g = gemm_sm80::generate(cfg).map_err(boxed)?;
        let compiled = KernelCache::global()
            .get_or_compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(arch))
            .map_err(boxed)?;
        let module = self.gpu().load(&compiled).map_err(boxed)?;
        let main = module.function(&g.name).map_err(boxed)?;
        let reduce = module.function(&g.reduce_name).map_err(boxed)?;
        Ok(LoadedScaledMm {
            generated: Arc::new(g),
            main,
            reduce,
        })
    }

    /// Run a validated problem with the automatic kernel choice, or a forced one (tests and
    /// benchmarks use this to cover every tile, split-K mode and the Turing kernel, which
    /// also runs on newer GPUs).
    pub fn run_scaled_mm(&self, p: &ScaledMmProblem, forced: Option<&ScaledMmSelection>) -> Result<(), OpsError> {
        self.check_scaled_mm_devices(p)?;
        if forced.is_none() {
            if let Some(spec) = self.tuned_scaled_mm(p) {
                return self.run_scaled_mm_spec(p, &spec);
            }
        }
        // sm_90: the TMA + wgmma kernel (s8 wgmma, the scaled_mm fusion in its TMA epilogue)
        // whenever the operands suit TMA; a forced SM80-class selection still runs that.
        // FP8 exists only there.
        if p.a.dtype == DType::E4M3 {
            if forced.is_some() {
                return Err(OpsError::Arch(
                    "FP8 runs only the SM90 kernel: use run_scaled_mm_sm90".into(),
                ));
            }
            return self.run_scaled_mm_sm90(p, None);
        }
        if forced.is_none() && self.gpu().compute_capability() == (9, 0) && sm90_qualifies(p) {
            return self.run_scaled_mm_sm90(p, None);
        }
        let mut sel = match forced {
            Some(s) => s.clone(),
            None => select_scaled_mm(self.scaled_mm_target()?, p.m, p.n, p.k, p.l, self.gpu().sm_count()),
        };
        let copy = scaled_mm_copy_bytes(p);
        if copy < 16 {
            if sel.target == ScaledMmTarget::Turing {
                return Err(OpsError::Alignment {
                    operand: "A/B",
                    detail: "the sm_75 kernel copies 16-byte vectors: A and B need 16-byte pointers, \
                             leading dimensions, batch strides and K"
                        .into(),
                });
            }
            if forced.is_none() {
                // Few copy passes per thread even with 2-byte copies.
                (sel.tile, sel.warps, sel.stages) = ([64, 64, 64], [2, 2], None);
            }
        }
        let loaded = self.scaled_mm_kernel(p, &sel, copy)?;
        let g = &loaded.generated;
        let mut fusion = FusionArgs::new()
            .ptr("a_scale", p.a_scale.ptr)
            .ptr("b_scale", p.b_scale.ptr);
        if let Some(bias) = p.bias {
            fusion = fusion.ptr("bias", bias.ptr);
        }
        let mut args = scaled_mm_args(p, &sel);
        let grid = g.grid_split(args.m, args.n, args.l, args.split_k);
        if grid.y > 65535 || grid.z > 65535 {
            return Err(OpsError::TooLarge {
                what: "problem (the grid exceeds 65535 CTAs in y or z)",
            });
        }
        let ws_bytes = g.workspace_bytes_mode(args.m, args.n, args.l, args.split_k, args.split_k_mode);
        let _scope = self.launch_scope();
        let mut scratch = self.scratch();
        if args.split_k_mode == SplitKMode::Serial && args.split_k > 1 {
            args.semaphores = scratch.semaphores(g.semaphore_count(args.m, args.n, args.l))?;
        }
        if ws_bytes > 0 {
            args.workspace = scratch.workspace(ws_bytes)?;
        }
        // SAFETY: `validate_scaled_mm` checked that every view lies inside its buffer with
        // the strides and batch strides passed here and that the scales and bias hold the
        // elements the fusion reads; the views borrow their buffers for the duration of
        // this call; the workspace holds `workspace_bytes`.
        unsafe { gemm_sm80::launch_fused(&loaded.main, &loaded.reduce, g, &args, &fusion) }.map_err(boxed)?;
        Ok(())
    }

    /// Every operand lives on this handle's GPU.
    fn check_scaled_mm_devices(&self, p: &ScaledMmProblem) -> Result<(), OpsError> {
        let mut views = vec![
            ("A", &p.a),
            ("B", &p.b),
            ("out", &p.out),
            ("a_scale", &p.a_scale),
            ("b_scale", &p.b_scale),
        ];
        if let Some(g) = &p.bias {
            views.push(("bias", g));
        }
        self.check_devices(&views)
    }

    /// The SM80-class kernel of a selection, looked up by a small copyable key first so
    /// that a call does not rebuild and hash the fusion tree (host time per call).
    fn scaled_mm_kernel(
        &self,
        p: &ScaledMmProblem,
        sel: &ScaledMmSelection,
        copy_bytes: usize,
    ) -> Result<LoadedScaledMm, OpsError> {
        self.scaled_mm_kernel_of(&ScaledMmKind::of(p), sel, copy_bytes)
    }

    /// Build (once) the kernel that a problem of `kind` runs with the tuning spec `spec`,
    /// without running it (the fast path's 16-byte copies: [`crate::tuning::tuned_kernels`]): the
    /// tuner compiles its candidates in parallel through this.
    pub fn load_scaled_mm_spec(&self, kind: &ScaledMmKind, spec: &ConfigSpec) -> Result<(), OpsError> {
        match scaled_mm_spec_kernel(kind, spec, self.gpu().max_shared_per_block_optin())? {
            TunedKernel::Sm80(cfg) => self.load_scaled_mm(&cfg).map(|_| ()),
            TunedKernel::Sm90(cfg) => self.load_gemm_sm90(&cfg).map(|_| ()),
            other => Err(OpsError::Shape(format!("{other:?} is not a scaled-mm kernel"))),
        }
    }

    fn scaled_mm_kernel_of(
        &self,
        kind: &ScaledMmKind,
        sel: &ScaledMmSelection,
        copy_bytes: usize,
    ) -> Result<LoadedScaledMm, OpsError> {
        let smem_budget = scaled_mm_smem_budget(sel.target, self.gpu().max_shared_per_block_optin());
        let key = ScaledMmKey {
            target: sel.target,
            tile: sel.tile,
            warps: sel.warps,
            stages: sel.stages,
            raster_swizzle: sel.raster_swizzle,
            smem_budget,
            out: kind.out,
            a_scale: kind.a_scale,
            b_scale: kind.b_scale,
            bias: kind.bias,
            copy_bytes,
        };
        let hit = self
            .scaled_mm_keys
            .lock()
            .map_err(|_| OpsError::Arch("poisoned kernel table".into()))?
            .get(&key)
            .cloned();
        if let Some(l) = hit {
            return Ok(l);
        }
        let l = self.load_scaled_mm(&scaled_mm_sm80_config(kind, sel, copy_bytes, smem_budget)?)?;
        if let Ok(mut t) = self.scaled_mm_keys.lock() {
            t.insert(key, l.clone());
        }
        Ok(l)
    }
}

/// The SM80-class kernel's launch arguments for a validated problem and a selection (the
/// workspace and semaphores are bound by the caller).
fn scaled_mm_args(p: &ScaledMmProblem, sel: &ScaledMmSelection) -> GemmArgs {
    let (m, n, k, l) = (p.m as i32, p.n as i32, p.k as i32, p.l as i32);
    let mut args = GemmArgs::tn(m, n, k, l, p.a.ptr, p.b.ptr, 0, p.out.ptr);
    args.lda = p.a.kernel_ld();
    args.ldb = p.b.kernel_ld();
    args.ldd = p.out.kernel_ld();
    args.batch_stride_a = p.a.batch_stride;
    args.batch_stride_b = p.b.batch_stride;
    args.batch_stride_d = if l > 1 { p.out.batch_stride } else { m as i64 * args.ldd };
    args.split_k = sel.split_k.max(1);
    args.split_k_mode = sel.split_k_mode;
    args
}
