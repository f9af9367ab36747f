//! Expert parallelism over NCCL (cargo feature `nccl`): the fused MoE layer
//! ([`crate::Ops::fused_moe`]) split over GPUs, each holding a slice of the experts.
//!
//! * [`library`]: finding and loading `libnccl.so.2` at run time ([`Nccl`]); a missing
//!   library is an [`crate::OpsError::Nccl`], never a panic.
//! * [`comm`]: [`Communicator`], one rank (rank, world size, device, the caller's stream)
//!   and the collectives the layer uses.
//! * [`expert_parallel`]: [`ExpertParallel`], the layer on one rank, and its combines
//!   ([`EpCombine`]), with what is capturable in a CUDA graph and what is bit-reproducible.
//! * [`dispatch`]: the token-dispatch combine (all-to-all there and back).
//!
//! ```
//! use rcute_ops::ep::{validate_ep_slice, Nccl};
//! // Two ranks of four experts each: rank 1 holds experts [4, 8).
//! validate_ep_slice(1, 2, 4, 4, Some(8)).unwrap();
//! // Without NCCL installed, loading it is an error, not a panic.
//! if let Err(e) = Nccl::get() {
//!     eprintln!("no NCCL here: {e}");
//! }
//! ```

pub mod comm;
pub mod dispatch;
pub mod expert_parallel;
pub mod library;

pub use comm::{Communicator, EpMark, UniqueId};
pub use expert_parallel::{ep_moe_workspace_bytes, validate_ep_slice, EpCombine, ExpertParallel};
pub use library::{Nccl, ENV_NCCL_LIB};
