//! Epilogue fusion: a tree of composable nodes evaluated once per output element (our
//! take on CUTLASS 3's epilogue visitor tree, EVT).
//!
//! A [`Node`] is an expression over the accumulator, the source C, kernel scalars,
//! broadcast vectors, auxiliary matrices and element-wise [`ComputeOp`]s; [`Fusion::new`]
//! validates a tree and fixes its kernel ABI; [`Fusion::emit`] renders it as CUDA C++ (a
//! parameter struct and a `__device__` visit function that the SM80 and SM90 GEMM epilogues
//! and the scaled-mm ops call per in-bounds element); [`FusionArgs::pack`] builds the
//! bytes of the parameter struct for a launch; [`Fusion::eval`] is the CPU reference.
//!
//! * Values flow as `float`: every load is converted to float (`__ldg` for every
//!   read-only pointer; FP8 through `__nv_cvt_fp8_to_halfraw`, integers with `(float)`),
//!   compute runs in f32 (`fmaf` for [`ComputeOp::MultiplyAdd`]), [`ComputeOp::Convert`]
//!   rounds to a type and back ([`round_to_element`] is its host mirror), and
//!   [`Node::AuxStore`] writes the converted value and passes its child's value on.
//! * Parameters: one 8-byte slot per field (`alignas(8)`), fields grouped per leaf and the
//!   leaves sorted by name, so the struct only depends on the set of leaves, not on the
//!   shape of the tree. A leaf may appear several times if it is the same leaf (same kind
//!   and type); two different leaves may not share a name.
//! * C is read only when [`FusionCode::source_needed`] holds: a source that only appears
//!   multiplied by a scalar (`beta * C`) is skipped when that scalar is zero, and the caller
//!   passes `c = 0.0f` then ([`Fusion::eval`] does the same).
//!
//! The generated code needs only `<cuda_bf16.h>`, `<cuda_fp16.h>` and `<cuda_fp8.h>`.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::fusion::{Fusion, FusionArgs, HostInputs, Node};
//!
//! // D = relu(alpha * acc + bias[n]), and the pre-activation stored to an aux bf16 matrix.
//! let pre = (Node::scalar("alpha") * Node::Accumulator + Node::row_broadcast("bias", Element::F32, false))
//!     .store("pre_act", Element::BF16);
//! let f = Fusion::new(pre.relu()).unwrap().with_name("bias_relu").unwrap();
//! assert_eq!(f.describe(), "relu(store(pre_act:bf16, add(multiply(alpha, acc), row(bias:f32))))");
//! let names: Vec<String> = f.params().into_iter().map(|p| p.name).collect();
//! assert_eq!(names, ["alpha", "bias", "pre_act", "pre_act_ld", "pre_act_batch_stride"]);
//!
//! let code = f.emit("epi").unwrap();
//! assert!(code.device_fn.contains("float epi_visit(const epi_params& p, float acc, float c, int m, int n, int l)"));
//! assert_eq!(code.source_needed, "false");
//!
//! // The CPU reference at (m, n, l) = (0, 1, 0).
//! let args = FusionArgs::new().f32("alpha", 2.0).i64("pre_act_ld", 2).i64("pre_act_batch_stride", 0);
//! let host = HostInputs::new(1, 2, 1).with_acc(vec![1.0, -3.0]).with_tensor("bias", vec![0.0, 1.0]);
//! assert_eq!(f.eval(&args, &host, 0, 1, 0).unwrap(), 0.0); // relu(2 * -3 + 1)
//! let args = args.ptr("bias", 0x1000).ptr("pre_act", 0x2000);
//! assert_eq!(args.pack(&f).unwrap().len(), 5 * 8);
//! ```

mod args;
mod element;
mod emit;
mod error;
mod eval;
mod node;
mod params;
mod tree;
mod validate;

pub use args::{ArgValue, FusionArgs};
pub use element::{decode_element, encode_element, round_to_element};
pub use emit::{Broadcast, BroadcastAxis, FusionCode, StagedBroadcast, StagedCode};
pub use error::FusionError;
pub use eval::HostInputs;
pub use node::{ComputeOp, Node, ScaleKind};
pub use params::{FusionParam, ParamKind};
pub use tree::Fusion;
pub use validate::MAX_DEPTH;
