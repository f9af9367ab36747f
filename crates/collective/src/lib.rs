//! # rcute-collective
//!
//! Collective mainloops and epilogues: builders that pick schedules, stage counts,
//! shared-memory layouts and reuse, and (later) fuse epilogue work as a visitor tree.
//!
//! | file | contents |
//! |---|---|
//! | `sm80_mainloop.rs` | [`Sm80MainloopConfig`] -> [`Sm80Mainloop`]: the Ampere multistage `cp.async` mainloop plan (CuTe's `MainloopSm80CpAsync` with the SM80 default smem layouts and copies) |
//! | `awq_mainloop.rs` | [`awq_mainloop::AwqMainloopConfig`] -> [`awq_mainloop::AwqMainloop`]: the AWQ W4A16 mixed-input SM80 mainloop plan (16-bit x by `ldmatrix`, AutoAWQ-packed int4 weight words, scales and zeros by multistage `cp.async`, in-register `lop3` dequantization permuted into `m16n8k16` B fragments; the lane -> fragment mapping) |
//! | `awq_streamed.rs` | [`awq_streamed::AwqStreamed`]: the register-streamed AWQ decode plan (the prepared weight read as swap-AB `m16n8k16` A fragments straight from global memory into a ring of registers or through each lane's own slots of a shared `cp.async` ring, `x` staged in fragment order, warps along K and N, the clustered split-K sum) |
//! | `awq_streamed_checkpoint.rs` | the register-streamed kernel on AutoAWQ's checkpoint layout as it is: lane `(g, t)` loads the words of rows `2t, 2t+1, 2t+8, 2t+9` in word column `g`, byte permutations of two rows + the conversion atom = the same swap-AB A fragments (CPU model [`awq_streamed_checkpoint::a_fragments`]) |
//! | `moe_streamed.rs` | [`moe_streamed::MoeStreamed`]: the register-streamed grouped (MoE) decode plan (16 weight rows per warp as swap-AB `m16n8k16` A fragments loaded in their natural K-major layout, `x` rows as B fragments, a ring of chunks in registers or in each lane's own slots of a shared `cp.async` ring) |
//! | `lane_ring.rs` | [`lane_ring::LaneRing`]: the shared `cp.async` ring of per-lane slots that both streamed decode plans can take instead of a ring of registers (counted waits; slot layout, copy / commit / wait atoms) |
//! | `awq_wgmma.rs` | [`awq_wgmma::AwqWgmma`]: the SM90 mixed-input AWQ prefill plan (swap-AB RS `wgmma`: the prepared weight's words are `wgmma`'s register A per warp, `x` TMA-loaded as B by a producer warpgroup into an mbarrier ring; consumer warpgroups, accumulator -> output mapping) |
//! | `awq_wgmma_checkpoint.rs` | the SM90 mixed-input kernel on AutoAWQ's checkpoint `qweight` as it is: TMA boxes of `(32 words, 64 rows)` with the 128-byte swizzle (conflict-free lane loads of rows `2t, 2t+1, 2t+8, 2t+9`), one `PRMT` of two rows per word pair + the conversion atom = the prepared words' `wgmma` register A (CPU model [`awq_wgmma_checkpoint::register_a`]) |
//! | `pipeline.rs` | [`PipelineState`]: the stage index / mbarrier phase / count cursor of the SM90 pipelines (CUTLASS's `PipelineState`) |
//! | `sm90_mainloop.rs` | [`Sm90MainloopConfig`] -> [`Sm90Mainloop`]: the Hopper TMA + `wgmma` warp-specialized mainloop plan (schedule and warpgroups, `wgmma` atom, GMMA smem atoms and layouts, TMA boxes, stage count and the kernel's smem map) |
//! | `sm90_schedule.rs` | [`Sm90Schedule`]: the SM90 kernel schedule (warp-specialized, cooperative, ping-pong) |
//! | `gmma_smem.rs` | [`ss_smem_selector`], [`gmma_tma_swizzle`]: the GMMA smem atom of an operand tile and its TMA swizzle |
//! | `sm90_epilogue.rs` | [`Sm90EpilogueConfig`] -> [`Sm90EpiloguePlan`]: the policy and types of CUTLASS's `Sm90TmaWarpSpecialized` epilogue (epilogue tile, StagesC/D, reuse, delayed store, smem atoms, layouts and storage, store pipeline) with typed errors for its asserts |
//! | `epilogue.rs` | [`EpilogueConfig`] -> [`EpiloguePlan`]: `D = convert(alpha * acc + beta * C)`; [`SmemEpilogue`]: the shared-memory staging (slabs in a union with the mainloop smem, padding / swizzle chosen by a bank-conflict simulation, 16-byte vectors) |
//! | `fusion/` | [`Fusion`]: the epilogue visitor tree (`node.rs` the tree and its builders, `validate.rs`, `tree.rs` the validated fusion and its ABI, `params.rs` / `args.rs` the parameter struct and argument packing, `emit.rs` the C++ incl. staged broadcasts, `eval.rs` the CPU reference, `element.rs` element rounding and encoding) — composable [`Node`]s (accumulator, source, scalars, row / column broadcasts, aux load / store, element-wise [`ComputeOp`]s) rendered as a C++ parameter struct and per-element `__device__` visit function ([`FusionCode`]), packed arguments ([`FusionArgs`]) and a CPU reference; `linear_combination` (the default) and vLLM's `scaled_mm` |
//!
//! A plan holds everything a kernel emitter needs, in layout form:
//!
//! * swizzled shared-memory layouts for A `(BM,BK,PIPE)` and B `(BN,BK,PIPE)`, CuTe's SM80
//!   choice: `Sw<3,3,3> o (8,64):(64,1)` K-major atoms for 16-bit types (narrower atoms
//!   `Sw<2,3,3> o (8,32)` / `Sw<1,3,3> o (8,16)` when `BK` is 32 / 16) and the MN-major
//!   transposes `Sw<3,3,3> o (64,8):(1,64)`, tiled with `tile_to_shape`;
//! * the global -> shared [`rcute_atom::TiledCopy`]s (`cp.async.cg` 16 B with zero fill,
//!   thread layouts covering the tile);
//! * the shared -> register `ldmatrix.x4` ops (`.trans` for MN-major operands) with the
//!   lane -> row mapping that delivers exactly the MMA atom's register fragments;
//! * the [`rcute_atom::TiledMma`] (`m16n8k16` atom, `(WM,WN,1)` warps, an N permutation
//!   that gives every warp 16 contiguous columns per `ldmatrix.x4` of B);
//! * the stage count (explicit, or as many as fit a shared-memory budget, capped).
//!
//! Configurations that do not divide or do not fit are refused with a typed
//! [`PlanError`].
//!
//! ```
//! use rcute_collective::{Sm80MainloopConfig, Sm80Mainloop};
//! let plan = Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn([128, 128, 32], [2, 2])).unwrap();
//! assert_eq!(plan.threads, 128);
//! assert_eq!(plan.smem_atom_a.to_string(), "Sw<2,3,3> o 0 o (8,32):(32,1)");
//! assert_eq!(plan.stages, 4);
//! ```

pub mod awq_bulk;
pub mod awq_mainloop;
pub mod awq_prepared;
pub mod awq_streamed;
pub mod awq_streamed_checkpoint;
pub mod awq_wgmma;
pub mod awq_wgmma_checkpoint;
pub mod epilogue;
pub mod fusion;
pub mod gmma_smem;
pub mod lane_ring;
pub mod moe_prepared;
pub mod moe_streamed;
pub mod pipeline;
pub mod sm80_mainloop;
pub mod sm90_epilogue;
pub mod sm90_mainloop;
pub mod sm90_schedule;

pub use epilogue::{EpilogueConfig, EpilogueError, EpiloguePlan, SmemEpilogue, StorageOrder, STORE_VECTOR_BYTES};
pub use fusion::{
    decode_element, encode_element, round_to_element, ArgValue, Broadcast, BroadcastAxis, ComputeOp, Fusion,
    FusionArgs, FusionCode, FusionError, FusionParam, HostInputs, Node, ParamKind, ScaleKind, StagedBroadcast,
    StagedCode,
};
pub use pipeline::PipelineState;
pub use sm80_mainloop::{
    G2sCopy, LdmatrixLanes, PlanError, Sm80Mainloop, Sm80MainloopConfig, DEFAULT_SMEM_BUDGET, MAX_AUTO_STAGES,
};
pub use sm90_epilogue::{
    sm90_auto_epi_tile, EpilogueCopyAtom, EpilogueStorage, Sm90EpilogueConfig, Sm90EpilogueError, Sm90EpiloguePlan,
};
pub use sm90_mainloop::{
    gmma_tma_swizzle, ss_smem_selector, Sm90Mainloop, Sm90MainloopConfig, Sm90PlanError, Sm90Schedule,
    SM90_BUFFER_ALIGN, SM90_KERNEL_RESERVE_BYTES, SM90_MAX_AUTO_STAGES, SM90_SMEM_CAPACITY,
};
