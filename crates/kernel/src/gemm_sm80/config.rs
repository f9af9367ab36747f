//! The configuration of the SM80 GEMM family and what generation produces.

use super::error::GemmError;
use rcute_atom::{Element, Major};
use rcute_collective::{
    Fusion, ScaleKind, Sm80Mainloop, Sm80MainloopConfig, SmemEpilogue, StorageOrder, DEFAULT_SMEM_BUDGET,
};

/// The configuration of one generated GEMM kernel (compile-time choices; problem sizes,
/// leading dimensions, batch, `alpha`, `beta` and split-K are run-time arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct GemmSm80Config {
    /// Element type of A (`bf16` or `f16`).
    pub a: Element,
    /// Element type of B (equal to `a`).
    pub b: Element,
    /// Element type of C (`f32`, `bf16` or `f16`).
    pub c: Element,
    /// Element type of D (`f32`, `bf16` or `f16`).
    pub d: Element,
    /// A is `(M,K)`: [`Major::K`] = row-major (BLAS "T"), [`Major::MN`] = column-major ("N").
    pub a_major: Major,
    /// B is `(K,N)` in BLAS terms, seen as `(N,K)`: [`Major::K`] = column-major `KxN`
    /// (BLAS "N"), [`Major::MN`] = row-major `KxN` ("T").
    pub b_major: Major,
    /// Storage order of C and D.
    pub c_major: StorageOrder,
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Pipeline stages; `None` = as many as fit `smem_budget` (capped, see
    /// [`rcute_collective::MAX_AUTO_STAGES`]).
    pub stages: Option<usize>,
    /// log2 of the rasterization swizzle: groups of `2^raster_swizzle` CTAs along N are
    /// launched next to each other (0 = plain row of tiles). At most 5.
    pub raster_swizzle: u32,
    /// Shared memory budget per CTA in bytes (default 227 KiB).
    pub smem_budget: usize,
    /// The epilogue: what D is, per element, from the accumulator. The default,
    /// [`Fusion::linear_combination`] (`alpha * acc + beta * C`, C read only when
    /// `beta != 0`), is emitted as the specialized vectorized epilogue; any other tree that
    /// reads no source C runs its visit function per element (kernel parameter `ep`,
    /// launched with [`crate::gemm_sm80::launch_fused`]).
    pub fusion: Fusion,
    /// The GPU family (`cp.async` multistage on the Ampere class; the register-staged
    /// two-stage pipeline on Turing, s8 only).
    pub target: Sm80Target,
    /// Bytes one thread copies from global to shared memory per access (16, the default
    /// fast path; 8 or 4 with `cp.async.ca`, 2 with 16-bit register copies): the alignment
    /// the kernel needs of A's and B's pointers, leading dimensions, batch strides and, where
    /// K is contiguous, of K (see [`GemmSm80Config::narrow`]). Ampere target only.
    pub copy_bytes: usize,
}

/// The shared memory a Turing CTA may use (64 KiB, the opt-in maximum of sm_75).
pub const TURING_SMEM_BUDGET: usize = 64 * 1024;

/// The GPU family an SM80-class kernel is generated for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Sm80Target {
    /// sm_80, sm_86, sm_89 (and sm_90): `cp.async` multistage pipeline, `mma.sync`
    /// `m16n8k16` (bf16 / f16) or `m16n8k32` (s8).
    #[default]
    Ampere,
    /// sm_75, s8 only: register-staged two-stage pipeline, four `mma.sync.m8n8k16` per
    /// `m16n8k32` step; f16 output only.
    Turing,
}

impl Sm80Target {
    /// `"sm80"` / `"sm75"` (the tag in kernel names).
    pub fn tag(self) -> &'static str {
        match self {
            Sm80Target::Ampere => "sm80",
            Sm80Target::Turing => "sm75",
        }
    }
}

impl Eq for GemmSm80Config {}

impl std::hash::Hash for GemmSm80Config {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.a, self.b, self.c, self.d, self.a_major, self.b_major, self.c_major).hash(h);
        (
            self.tile,
            self.warps,
            self.stages,
            self.raster_swizzle,
            self.smem_budget,
            self.target,
            self.copy_bytes,
        )
            .hash(h);
        (self.fusion.name(), self.fusion.describe()).hash(h);
    }
}

impl GemmSm80Config {
    /// bf16 inputs, bf16 C and D (row-major), f32 accumulation, automatic stages, no
    /// rasterization swizzle.
    pub fn bf16(a_major: Major, b_major: Major, tile: [i64; 3], warps: [i64; 2]) -> Self {
        GemmSm80Config {
            a: Element::BF16,
            b: Element::BF16,
            c: Element::BF16,
            d: Element::BF16,
            a_major,
            b_major,
            c_major: StorageOrder::RowMajor,
            tile,
            warps,
            stages: None,
            raster_swizzle: 0,
            smem_budget: DEFAULT_SMEM_BUDGET,
            fusion: Fusion::linear_combination(),
            target: Sm80Target::Ampere,
            copy_bytes: 16,
        }
    }

    /// INT8 `scaled_mm` (vLLM's semantics): s8 A and B, both K-major ("TN"), exact s32
    /// accumulation, row-major D of type `out` (f16 or bf16) `= float(acc) * a_scale *
    /// b_scale (+ bias[n])`: the fusion [`Fusion::scaled_mm`] (`a_scale`
    /// [`ScaleKind::Scalar`] or [`ScaleKind::PerRow`], `b_scale` [`ScaleKind::Scalar`] or
    /// [`ScaleKind::PerCol`], a bias of type `out` when `bias`), Ampere target, automatic
    /// stages. A scale kind that does not apply to its operand is a
    /// [`GemmError::Fusion`].
    pub fn scaled_mm(
        out: Element,
        a_scale: ScaleKind,
        b_scale: ScaleKind,
        bias: bool,
        tile: [i64; 3],
        warps: [i64; 2],
    ) -> Result<Self, GemmError> {
        let fusion = Fusion::scaled_mm(a_scale, b_scale, bias.then_some(out))?;
        Ok(GemmSm80Config {
            a: Element::S8,
            b: Element::S8,
            c: out,
            d: out,
            ..GemmSm80Config::bf16(Major::K, Major::K, tile, warps)
        }
        .with_fusion(fusion))
    }

    /// The Turing (`sm_75`) variant: two stages, the 64 KiB budget (s8 only).
    pub fn turing(mut self) -> Self {
        self.target = Sm80Target::Turing;
        self.stages = Some(2);
        self.smem_budget = TURING_SMEM_BUDGET;
        self
    }

    /// The same kernel with `bytes`-byte global -> shared copies (8, 4 or 2): the variant
    /// for operands that are not 16-byte aligned. Its name ends in `_g2s{bytes}`; the
    /// shared-memory layouts, MMA and epilogue are the fast path's.
    pub fn narrow(mut self, bytes: usize) -> Self {
        self.copy_bytes = bytes;
        self
    }

    /// Whether the operands are integers (s8 x s8 -> s32).
    pub fn is_integer(&self) -> bool {
        self.a == Element::S8
    }

    /// The same kernel with another epilogue fusion (see [`GemmSm80Config::fusion`]).
    pub fn with_fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// Whether the epilogue is the default linear combination.
    pub fn is_linear_combination(&self) -> bool {
        self.fusion == Fusion::linear_combination()
    }

    /// The BLAS layout letters, A then B (`tn`, `nn`, `nt`, `tt`).
    pub fn blas_tag(&self) -> String {
        let a = if self.a_major == Major::K { 't' } else { 'n' };
        let b = if self.b_major == Major::K { 'n' } else { 't' };
        format!("{a}{b}")
    }

    /// The mainloop configuration.
    pub fn mainloop(&self) -> Sm80MainloopConfig {
        Sm80MainloopConfig {
            a: self.a,
            b: self.b,
            acc: if self.is_integer() { Element::S32 } else { Element::F32 },
            a_major: self.a_major,
            b_major: self.b_major,
            tile: self.tile,
            warps: self.warps,
            stages: self.stages,
            smem_budget: self.smem_budget,
            epilogue_smem: 0,
            copy_bytes: self.copy_bytes,
        }
    }
}

/// A generated GEMM: its source and launch facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedGemm {
    /// The main kernel's name (also the name of the unit).
    pub name: String,
    /// The split-K reduction kernel's name (`<name>_splitk_reduce`), in the same unit.
    pub reduce_name: String,
    /// The CUDA C++ translation unit (both kernels).
    pub source: String,
    /// Threads per CTA of the main kernel.
    pub threads: u32,
    /// Dynamic shared memory per CTA of the main kernel, in bytes (the union of the
    /// mainloop stages and the epilogue staging buffer, plus [`TICKET_SMEM`]).
    pub smem_bytes: u32,
    /// `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Threads per CTA of the reduction kernel.
    pub reduce_threads: u32,
    /// The configuration (with `stages` resolved).
    pub config: GemmSm80Config,
    /// The mainloop plan.
    pub plan: Sm80Mainloop,
    /// The shared-memory staged epilogue (its buffer is a union with the mainloop's).
    pub epilogue: SmemEpilogue,
}

/// How `split_k > 1` combines the K splits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitKMode {
    /// Each split writes an f32 partial slab; `<name>_splitk_reduce` sums them (two
    /// kernels, `split_k * M * N * L` floats of workspace).
    #[default]
    Parallel,
    /// The splits of one output tile run their epilogues in order, serialized by a
    /// per-tile semaphore: split `s` waits until the tile's counter is `s`, adds its sum to
    /// the running f32 partial (one `M * N * L` slab), or, as the last split, applies the
    /// epilogue to D, then releases `s + 1` (the last split resets it to 0). One kernel.
    Serial,
}

/// Dynamic shared memory after the mainloop / epilogue union that holds the serial
/// split-K ticket.
pub const TICKET_SMEM: usize = 16;

/// Threads per CTA of the split-K reduction kernel.
pub const REDUCE_THREADS: u32 = 256;
