//! # rcute-atom
//!
//! MMA and copy atoms: the smallest hardware operations a kernel is built from, each with
//! its thread-value layouts in CuTe's convention, plus tiled MMA / tiled copy partitioning.
//!
//! Every atom carries the same layouts as CuTe's traits (`MMA_Traits`, `Copy_Traits`) and
//! renders as a self-contained CUDA C++ device function with inline PTX (a [`Snippet`]);
//! PTX lives only in these snippets.
//!
//! | file | contents |
//! |---|---|
//! | `element.rs` | [`Element`]: element types, bit widths, CUDA type names |
//! | `arch.rs` | [`Arch`]: GPU architectures, names, compatibility rules |
//! | `snippet.rs` | [`Snippet`], [`Param`]: the emitted device functions |
//! | `mma.rs` | [`MmaAtom`], [`Operand`], [`Major`], bijection checks |
//! | `mma_sm80.rs` | SM80/SM89 `mma.sync` atoms (f16, bf16, tf32, s8/u8, e4m3/e5m2) |
//! | `mma_sm90.rs` | SM90a `wgmma` atoms (SS / RS, every N), fence / commit / wait, GMMA smem layout atoms |
//! | `gmma_desc.rs` | [`GmmaDescriptor`] encoder / decoder and `make_gmma_desc` |
//! | `copy.rs` | [`CopyOp`] (bit layouts) and [`CopyAtom`] (element layouts) |
//! | `copy_ldst.rs` | vectorized global / shared ld and st (4/8/16 B), the streaming `ld.global.nc.L1::no_allocate` |
//! | `copy_cp_async.rs` | `cp.async.ca/.cg` (+ zero fill), commit / wait |
//! | `copy_ldsm.rs` | `ldmatrix` / `stmatrix` x1/x2/x4 (+ `.trans`) |
//! | `copy_tma.rs` | TMA loads (multicast), stores, prefetches, bulk copies |
//! | `convert_int4.rs` | 4-bit weights to f16 / bf16 pairs with `lop3` magic numbers; AutoAWQ's nibble order |
//! | `grid_dependency.rs` | programmatic dependent launch: `griddepcontrol.wait` / `.launch_dependents` |
//! | `prefetch.rs` | `prefetch.global.L2`: a line of global memory into L2 (a hint) |
//! | `sync.rs` | mbarriers, fences, named / cluster barriers, `elect.sync`, `setmaxnreg` |
//! | `cluster_dsmem.rs` | cluster size, cluster barriers (release or relaxed), the push barrier (mbarrier with expected bytes), `st.async` pushes into a peer CTA's shared memory and the parity wait, guarded so sm_80 units compile |
//! | `tma.rs` | [`TmaDescriptorSpec`]: validated `cuTensorMapEncodeTiled` parameters |
//! | `tiled_mma.rs` | [`TiledMma`], [`ThrMma`]: `thrfrg_*`, `get_layout*_TV`, `partition_*` |
//! | `tiled_copy.rs` | [`TiledCopy`]: `make_tiled_copy*`, `tidfrg_*`, `partition_S/D`, `retile` |
//! | `harness.rs` | [`test_kernel`]: wrap a snippet into a `__global__` test kernel |
//! | `catalogue.rs` | [`all_atoms`]: every atom and snippet with its architecture |
//!
//! ```
//! use rcute_atom::mma_sm80;
//! let atom = mma_sm80::sm80_16x8x16_f32_bf16_bf16_f32();
//! assert_eq!(atom.c_tv.to_string(), "((4,8),(2,2)):((32,1),(16,8))");
//! assert_eq!(atom.fn_name(), "rc_mma_m16n8k16_f32_bf16_bf16_f32");
//! assert!(atom.snippet.code.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
//! ```

pub mod arch;
pub mod catalogue;
pub mod cluster_dsmem;
pub mod convert_int4;
pub mod copy;
pub mod copy_cp_async;
pub mod copy_ldsm;
pub mod copy_ldst;
pub mod copy_tma;
pub mod element;
pub mod gmma_desc;
pub mod grid_dependency;
pub mod harness;
pub mod mma;
pub mod mma_sm80;
pub mod mma_sm90;
pub mod prefetch;
pub mod snippet;
pub mod sync;
pub mod tiled_copy;
pub mod tiled_mma;
pub mod tma;

pub use arch::{Arch, UnknownArch};
pub use catalogue::{all_atoms, all_copy_ops, all_helper_snippets, all_mma_atoms, atoms_for, translation_unit, Entry};
pub use copy::{CopyAtom, CopyKind, CopyOp};
pub use element::Element;
pub use gmma_desc::{make_gmma_desc, DescError, GmmaDescriptor};
pub use harness::{test_kernel, test_kernel_with, HarnessOptions, TestKernel};
pub use mma::{GmmaSource, Major, MmaAtom, MmaKind, MmaTypes, Operand};
pub use mma_sm90::{GmmaSmemAtom, GmmaSwizzle};
pub use snippet::{Dir, Param, ParamTy, Snippet};
pub use tiled_copy::TiledCopy;
pub use tiled_mma::{ThrMma, TiledMma};
pub use tma::{TmaDescriptorSpec, TmaEncodeArgs, TmaError};
