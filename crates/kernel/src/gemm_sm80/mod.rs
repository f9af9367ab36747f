//! The Ampere-class GEMM family: `D = fusion(A * B, C)`, batched, with bf16 / f16 operands,
//! f32 accumulation and bf16 / f16 / f32 C and D, or s8 operands with exact s32
//! accumulation (INT8 `scaled_mm`).
//!
//! The epilogue is a [`Fusion`] ([`GemmSm80Config::fusion`]): the default linear
//! combination `alpha * acc + beta * C` is emitted as a specialized vectorized epilogue
//! (launched with [`launch`] / [`launch_split_k`]); any other tree that reads no C (bias +
//! activation, the scaled-mm scales and bias, aux stores...) runs its visit function per
//! element (launched with [`launch_fused`] and its [`FusionArgs`]); with split-K the fusion
//! runs once, on the complete sum. The s8 kernels ([`GemmSm80Config::scaled_mm`]) use
//! `mma.sync.m16n8k32` (IMMA), 16-element `cp.async` vectors, `s32` staging and an `s32`
//! split-K workspace; [`Sm80Target::Turing`] generates the `sm_75` variant: register-staged
//! two-stage pipeline (Turing has no `cp.async`) and four `mma.sync.m8n8k16` per
//! `m16n8k32` step, f16 output only.
//!
//! [`generate`] turns a [`GemmSm80Config`] into a readable CUDA C++ translation unit
//! ([`GeneratedGemm`]) built with the structured emitter ([`crate::emit`]) from an
//! [`Sm80Mainloop`] plan (swizzled smem layouts, `cp.async` / `ldmatrix` copies, the tiled
//! `mma.sync` MMA) and an [`EpiloguePlan`]:
//!
//! * a multistage `cp.async` pipeline: the prologue fills `stages - 1` buffers, the main
//!   loop waits with `cp.async.wait_group(stages - 2)` + `__syncthreads()`, loads the
//!   tile's k-blocks with `ldmatrix.x4` into a register double buffer and issues
//!   `mma.sync.m16n8k16` (CuTe's `MainloopSm80CpAsync` schedule). With 128 accumulators
//!   per thread (64x64 warp tiles) the explicit register double buffer does not fit 255
//!   registers on sm_90a; those kernels issue `ldmatrix` + `mma` per k-block and leave the
//!   overlap to ptxas' scheduling of the unrolled k-blocks;
//! * shared-memory addresses from the swizzled layouts: when the generator verifies that
//!   `offset(t + s) == offset(t) ^ offset(s)` for every thread part `t` and unrolled part
//!   `s`, a thread keeps one base offset and XORs constants (CuTe's swizzle-aware
//!   slicing), else it evaluates the layout per access;
//! * every edge predicated: out-of-bounds 16-byte vectors of A and B are zero-filled by
//!   `cp.async` (src-size 0), out-of-bounds outputs are not stored, so any `M, N >= 1`,
//!   `K >= 0` is correct (with the alignment rules below);
//! * run-time `M, N, K`, leading dimensions, batch count `L` with batch strides,
//!   `alpha`, `beta` (C is not read when `beta == 0`);
//! * threadblock rasterization with CUTLASS's identity swizzle of `2^raster_swizzle`
//!   tiles along N for L2 reuse;
//! * an epilogue staged through shared memory ([`SmemEpilogue`]): after the last k-tile
//!   (`cp.async.wait_group 0` + `__syncthreads()`: the staging buffer is a union with the
//!   mainloop stages) the f32 accumulators are written slab by slab into a padded /
//!   swizzled, bank-conflict-checked buffer; each thread then reads whole 16-byte output
//!   vectors, applies `alpha * acc + beta * C` (16-byte C loads), converts and stores
//!   16 bytes coalesced. Vectors that cross the matrix edge, and D / C whose leading
//!   dimension, batch stride or address is not vector-aligned (e.g. odd `ldd`), fall
//!   back to element-wise stores of the same vector (the old direct 2-element stores from
//!   the fragments are gone: the staged path covers every alignment);
//! * split-K ([`SplitKMode`]): parallel (each split writes its f32 partial slab, a
//!   second kernel `<name>_splitk_reduce` sums the splits and applies the epilogue) or
//!   serial (one kernel: the splits of a tile run their epilogues in order behind a
//!   per-tile semaphore, accumulating into one f32 slab; the last split writes D and
//!   resets the semaphore). Serial split-K is deadlock-free whatever order the hardware
//!   starts CTAs in: each CTA takes a ticket (atomic counter) when it starts and works
//!   on item `ticket` of the grid in (x, y, z) order with `z = split * L + batch` (the
//!   split slowest-varying), so the CTA it waits for (split `s - 1` of its tile, a
//!   smaller item) took its ticket earlier and is resident or done.
//!
//! Alignment rules (checked by [`GemmArgs::validate`], typed [`GemmError::Alignment`]):
//! A and B are read in 16-byte vectors (8 bf16 / f16, 16 s8 elements), so `lda`, `ldb` and
//! the batch strides of A and B must be multiples of the vector and A, B 16-byte aligned;
//! when an operand is K-major, `K` must be a multiple of the vector (all in or all out;
//! there is no element-wise path). An MN-major operand's last vector along M (N) may
//! extend past `M` (`N`) into the leading-dimension padding: the buffers must be readable
//! for `ld * cols` elements (the usual BLAS contract), and those values only reach outputs
//! that are never stored. D must be aligned to its element size (16-byte vectors are used
//! when `ldd` and the batch stride are multiples of the vector and D is 16-byte aligned;
//! otherwise element-wise stores).
//!
//! ```
//! use rcute_kernel::gemm_sm80::{generate, GemmSm80Config};
//! use rcute_atom::Major;
//! let cfg = GemmSm80Config::bf16(Major::K, Major::K, [128, 128, 32], [2, 2]);
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.name, "rc_gemm_sm80_bf16_tn_128x128x32_s4_w2x2");
//! assert_eq!((g.threads, g.smem_bytes), (128, 65536 + 16));
//! assert!(g.source.contains("rc_mma_m16n8k16_f32_bf16_bf16_f32"));
//! assert_eq!(g.grid(1000, 300, 2), rcute_kernel::Dim3::new(8, 3, 2));
//!
//! // INT8 scaled_mm: per-row / per-column scales and a bf16 bias.
//! use rcute_kernel::gemm_sm80::ScaleKind;
//! use rcute_atom::Element;
//! let cfg = GemmSm80Config::scaled_mm(Element::BF16, ScaleKind::PerRow, ScaleKind::PerCol, true, [128, 128, 64], [2, 2])
//!     .unwrap();
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.name, "rc_scaledmm_sm80_s8_bf16_rowcol_bias_bf16_128x128x64_s4_w2x2");
//! assert!(g.source.contains("rc_mma_m16n8k32_s32_s8_s8_s32"));
//! let names: Vec<String> = g.config.fusion.params().into_iter().map(|p| p.name).collect();
//! assert_eq!(names, ["a_scale", "b_scale", "bias"]);
//! ```

mod args;
mod config;
mod cta;
mod epilogue;
mod error;
mod kernel;
mod launch;
mod ldsm;
mod mainloop;
mod mainloop_emit;
mod mma;
mod producer;
mod smem;
mod split_k;
mod stmt;
mod turing;

pub use args::GemmArgs;
pub use config::{
    GemmSm80Config, GeneratedGemm, Sm80Target, SplitKMode, REDUCE_THREADS, TICKET_SMEM, TURING_SMEM_BUDGET,
};
pub use error::GemmError;
pub(crate) use launch::check_name;
pub use launch::{launch, launch_fused, launch_split_k};
pub use rcute_atom::{Element as GemmElement, Major};
pub use rcute_collective::StorageOrder;
pub use rcute_collective::{Fusion, FusionArgs, ScaleKind};

use smem::smem_fn;

// Hooks for the grouped (MoE) kernels of `crate::grouped_gemm`, which reuse this mainloop.
pub(crate) use epilogue::fragment_layouts;
pub(crate) use mainloop::mainloop_stmts;
pub(crate) use mainloop_emit::MainloopEmit;
pub(crate) use producer::{G2sMode, G2sRows};
pub(crate) use smem::smem_fn as smem_offset_fn;

use crate::emit::{unit_preamble, Item, Unit, UINTPTR_FOR_NVRTC};
use kernel::main_kernel;
use rcute_atom::copy_cp_async::{cp_async, cp_async_commit_group, cp_async_wait_group, CacheOp};
use rcute_atom::mma_sm80::mma_sync_m8n8k16;
use rcute_atom::sync::{ld_acquire_gpu, st_release_gpu};
use rcute_atom::{Element, Snippet};
use rcute_collective::{EpilogueConfig, EpiloguePlan, Sm80Mainloop, SmemEpilogue};
use split_k::reduce_kernel;

/// The kernel name of a configuration, e.g. `rc_gemm_sm80_bf16_tn_128x128x32_s4_w2x2`:
/// input type, output types when they differ from the input (`_cf32_df32`), BLAS layout
/// letters, `_ccol` for column-major C/D, tile, stages, warps, `_r<n>` for a
/// rasterization swizzle, and the fusion's name when it is not the linear combination.
/// s8 kernels are named after the `scaled_mm` op, e.g.
/// `rc_scaledmm_sm80_s8_bf16_rowcol_bias_bf16_128x128x64_s4_w2x2`: target, output type,
/// the fusion's name without its `scaledmm_` prefix, tile, stages, warps.
pub fn kernel_name(cfg: &GemmSm80Config, stages: usize) -> String {
    let [bm, bn, bk] = cfg.tile;
    let [wm, wn] = cfg.warps;
    let shape = format!("{bm}x{bn}x{bk}_s{stages}_w{wm}x{wn}");
    let mut swizzle = match cfg.raster_swizzle {
        0 => String::new(),
        r => format!("_r{r}"),
    };
    if cfg.copy_bytes != 16 {
        swizzle.push_str(&format!("_g2s{}", cfg.copy_bytes));
    }
    if cfg.is_integer() {
        let f = cfg.fusion.name();
        let tag = f.strip_prefix("scaledmm_").unwrap_or(&f);
        let (t, d) = (cfg.target.tag(), cfg.d.ptx());
        return format!("rc_scaledmm_{t}_s8_{d}_{tag}_{shape}{swizzle}");
    }
    let mut s = format!("rc_gemm_sm80_{}", cfg.a.ptx());
    if cfg.c != cfg.a || cfg.d != cfg.a {
        s.push_str(&format!("_c{}_d{}", cfg.c.ptx(), cfg.d.ptx()));
    }
    s.push_str(&format!("_{}", cfg.blas_tag()));
    if cfg.c_major == StorageOrder::ColMajor {
        s.push_str("_ccol");
    }
    s.push_str(&format!("_{shape}{swizzle}"));
    if !cfg.is_linear_combination() {
        s.push_str(&format!("_{}", cfg.fusion.name()));
    }
    s
}

/// The rules a configuration must meet besides the mainloop builder's: the raster swizzle,
/// s8 outputs and targets, and a fusion that reads no C unless it is the linear
/// combination (which s8 kernels do not take).
fn check_config(cfg: &GemmSm80Config) -> Result<(), GemmError> {
    let err = |s: String| Err(GemmError::Config(s));
    if cfg.raster_swizzle > 5 {
        return err(format!("raster_swizzle={} (at most 5)", cfg.raster_swizzle));
    }
    if cfg.is_integer() {
        if !matches!(cfg.d, Element::F16 | Element::BF16) {
            return err(format!("s8 GEMM output type {} (f16 or bf16)", cfg.d));
        }
        if cfg.fusion.reads_source() {
            return err(format!(
                "fusion {} reads a source C; the s8 GEMM (scaled_mm) has none",
                cfg.fusion.describe()
            ));
        }
    } else if !cfg.is_linear_combination() && cfg.fusion.reads_source() {
        return err(format!(
            "fusion {} reads a source C: the SM80 kernel takes the linear combination or a C-less fusion",
            cfg.fusion.describe()
        ));
    }
    if cfg.target == Sm80Target::Turing && !(cfg.is_integer() && cfg.d == Element::F16) {
        return err("the Turing (sm_75) kernel is s8 with f16 output only".into());
    }
    let elem = cfg.a.bytes() as usize;
    if !matches!(cfg.copy_bytes, 2 | 4 | 8 | 16) || !cfg.copy_bytes.is_multiple_of(elem) {
        return err(format!(
            "copy_bytes={} (16, 8, 4 or 2, a multiple of the {elem}-byte element)",
            cfg.copy_bytes
        ));
    }
    if cfg.target == Sm80Target::Turing && cfg.copy_bytes != 16 {
        return err("the Turing (sm_75) kernel copies 16-byte vectors only".into());
    }
    Ok(())
}

/// The atoms' snippets, the MMA function the mainloop calls and any extra device code
/// (Turing's `m16n8k32` step from four `m8n8k16`).
fn atoms(
    cfg: &GemmSm80Config,
    plan: &Sm80Mainloop,
    name: &str,
) -> Result<(Vec<Snippet>, String, Vec<Item>), GemmError> {
    let no = |what: &str| GemmError::Config(format!("no {what} atom"));
    // The serial split-K semaphore: gpu-scope acquire load, release store.
    let mut snippets = vec![ld_acquire_gpu(), st_release_gpu()];
    snippets.extend(crate::grid_dependency::snippets());
    if cfg.target == Sm80Target::Ampere {
        let cp = match cfg.copy_bytes {
            16 => cp_async(CacheOp::CacheGlobal, 16, true).ok_or_else(|| no("cp.async"))?,
            _ => plan.g2s_a.tiled.atom.op.clone(),
        };
        snippets.extend([cp.snippet, cp_async_commit_group(), cp_async_wait_group()]);
    }
    snippets.push(plan.s2r_a.snippet.clone());
    if plan.s2r_b.snippet.name != plan.s2r_a.snippet.name {
        snippets.push(plan.s2r_b.snippet.clone());
    }
    Ok(match cfg.target {
        Sm80Target::Ampere => {
            snippets.push(plan.mma_atom.snippet.clone());
            (snippets, plan.mma_atom.fn_name().to_string(), vec![])
        }
        Sm80Target::Turing => {
            let m8 = mma_sync_m8n8k16(Element::S8, Element::S8).ok_or_else(|| no("m8n8k16"))?;
            let mma_fn = format!("{name}_mma_m16n8k32");
            let step = Item::Snippet {
                origin: "rcute Turing m16n8k32 step".into(),
                code: turing::turing_mma(&m8.snippet.name, &mma_fn),
            };
            snippets.push(m8.snippet);
            (snippets, mma_fn, vec![step])
        }
    })
}

/// The unit's header comment.
fn header(cfg: &GemmSm80Config, plan: &Sm80Mainloop, name: &str) -> Vec<String> {
    let [bm, bn, bk] = cfg.tile;
    let what = if cfg.is_linear_combination() {
        String::new()
    } else {
        format!(", epilogue fusion {}: {}", cfg.fusion.name(), cfg.fusion.describe())
    };
    vec![
        format!("{name}: generated by rcute (crates/kernel/src/gemm_sm80); do not edit."),
        format!(
            "{}: A {} {:?}-major, B {} {:?}-major, C {} / D {} {}-major{what}",
            match cfg.target {
                Sm80Target::Ampere => "sm_80 class (cp.async, mma.sync)",
                Sm80Target::Turing => "sm_75 (register-staged loads, 4x mma.sync.m8n8k16)",
            },
            cfg.a.ptx(),
            cfg.a_major,
            cfg.b.ptx(),
            cfg.b_major,
            cfg.c.ptx(),
            cfg.d.ptx(),
            cfg.c_major.tag(),
        ),
        format!(
            "tile {bm}x{bn}x{bk}, warps {}x{}, {} stages, raster swizzle {}",
            cfg.warps[0], cfg.warps[1], plan.stages, cfg.raster_swizzle
        ),
        format!("smem atoms: A {} | B {}", plan.smem_atom_a, plan.smem_atom_b),
        format!(
            "S2R: A {} | B {}; MMA {}",
            plan.s2r_a.name, plan.s2r_b.name, plan.mma_atom.name
        ),
    ]
}

/// Generate the kernels of a configuration.
pub fn generate(cfg: &GemmSm80Config) -> Result<GeneratedGemm, GemmError> {
    check_config(cfg)?;
    let plan = Sm80Mainloop::new(&cfg.mainloop())?;
    if cfg.target == Sm80Target::Turing && (plan.stages != 2 || plan.k_blocks < 2) {
        return Err(GemmError::Config(format!(
            "the Turing pipeline needs 2 stages and BK >= 64 (got {} stages, BK={})",
            plan.stages, cfg.tile[2]
        )));
    }
    let ecfg = EpilogueConfig {
        c: cfg.c,
        d: cfg.d,
        order: cfg.c_major,
    };
    let ep = EpiloguePlan::new(&ecfg)?;
    let se = SmemEpilogue::new(&ecfg, &plan)?;
    let smem_bytes = se.union_bytes + TICKET_SMEM;
    if cfg.target == Sm80Target::Turing && smem_bytes > TURING_SMEM_BUDGET {
        return Err(GemmError::Config(format!(
            "{smem_bytes} bytes of shared memory exceed Turing's {TURING_SMEM_BUDGET}"
        )));
    }
    let name = kernel_name(cfg, plan.stages);
    let mut config = cfg.clone();
    config.stages = Some(plan.stages);
    let fusion = match cfg.is_linear_combination() {
        true => None,
        false => Some(cfg.fusion.emit("rc_fusion")?),
    };
    let (snippets, mma_fn, extra) = atoms(cfg, &plan, &name)?;
    let fp8 = match &fusion {
        Some(f) if f.source().contains("fp8") => "#include <cuda_fp8.h>\n",
        _ => "",
    };
    let mut items = unit_preamble(&snippets, &format!("{fp8}{UINTPTR_FOR_NVRTC}"));
    items.extend(extra);
    items.push(Item::Function(smem_fn(
        &format!("{name}_sA"),
        &plan.smem_layout_a,
        "A",
    )?));
    items.push(Item::Function(smem_fn(
        &format!("{name}_sB"),
        &plan.smem_layout_b,
        "B",
    )?));
    if let Some(f) = &fusion {
        items.push(Item::Snippet {
            origin: format!("rcute-collective fusion {}", cfg.fusion.name()),
            code: f.source(),
        });
    }
    items.push(Item::Function(main_kernel(
        &config,
        &plan,
        &se,
        &name,
        &mma_fn,
        fusion.as_ref(),
    )));
    items.push(Item::Function(reduce_kernel(&config, &ep, &name, fusion.as_ref())));
    let unit = Unit {
        header: header(cfg, &plan, &name),
        includes: vec![],
        items,
    };
    Ok(GeneratedGemm {
        reduce_name: format!("{name}_splitk_reduce"),
        name,
        source: unit.render(),
        threads: plan.threads as u32,
        smem_bytes: smem_bytes as u32,
        tile: cfg.tile,
        reduce_threads: REDUCE_THREADS,
        config,
        plan,
        epilogue: se,
    })
}
