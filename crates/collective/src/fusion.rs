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

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rcute_atom::Element;

use crate::epilogue::{convert_from_f32, convert_to_f32};

/// The deepest tree [`Fusion::new`] accepts.
pub const MAX_DEPTH: usize = 64;

/// An element-wise operation of a [`Node::Compute`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ComputeOp {
    /// `a * b * ...` (two or more operands, left to right).
    Multiply,
    /// `a + b + ...` (two or more operands, left to right).
    Add,
    /// `a - b`.
    Subtract,
    /// `a * b + c`, fused (`fmaf`).
    MultiplyAdd,
    /// `-a`.
    Negate,
    /// `max(a, 0)` (`fmaxf`: NaN gives 0).
    ReLU,
    /// GELU, erf form: `0.5 a (1 + erf(a / sqrt(2)))`.
    Gelu,
    /// GELU, tanh approximation: `0.5 a (1 + tanh(sqrt(2 / pi) (a + 0.044715 a^3)))`.
    GeluTanh,
    /// SiLU (swish): `a / (1 + exp(-a))`.
    Silu,
    /// `1 / (1 + exp(-a))`.
    Sigmoid,
    /// `min(max(a, lo), hi)` (`fmaxf` / `fminf`: NaN gives `lo`).
    Clamp {
        /// Lower bound (may be `-inf`).
        lo: f32,
        /// Upper bound (may be `+inf`), `>= lo`.
        hi: f32,
    },
    /// Round to the type as a store would (see [`round_to_element`]) and back to float.
    Convert(Element),
}

impl ComputeOp {
    /// The operand count: `(min, max)`, `max = None` for "any number".
    pub fn arity(self) -> (usize, Option<usize>) {
        match self {
            ComputeOp::Multiply | ComputeOp::Add => (2, None),
            ComputeOp::Subtract => (2, Some(2)),
            ComputeOp::MultiplyAdd => (3, Some(3)),
            _ => (1, Some(1)),
        }
    }

    /// The operation's name in [`Fusion::describe`], e.g. `"multiply_add"`, `"clamp[-1.0,1.0]"`,
    /// `"convert<bf16>"`.
    pub fn tag(self) -> String {
        match self {
            ComputeOp::Multiply => "multiply".into(),
            ComputeOp::Add => "add".into(),
            ComputeOp::Subtract => "subtract".into(),
            ComputeOp::MultiplyAdd => "multiply_add".into(),
            ComputeOp::Negate => "negate".into(),
            ComputeOp::ReLU => "relu".into(),
            ComputeOp::Gelu => "gelu".into(),
            ComputeOp::GeluTanh => "gelu_tanh".into(),
            ComputeOp::Silu => "silu".into(),
            ComputeOp::Sigmoid => "sigmoid".into(),
            ComputeOp::Clamp { lo, hi } => format!("clamp[{lo:?},{hi:?}]"),
            ComputeOp::Convert(e) => format!("convert<{e}>"),
        }
    }
}

/// A node of the fusion tree. Build trees with the constructors and methods below, or with
/// `+`, `-`, `*` and unary `-` on nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// The accumulator as a float (an `s32` accumulator is converted by the kernel).
    Accumulator,
    /// The source `C(m, n, l)` as a float.
    Source,
    /// A float kernel argument (`float name`), e.g. `alpha`.
    Scalar {
        /// Field name.
        name: String,
    },
    /// A scalar read from device memory (`name[0]`), e.g. a per-tensor scale.
    ScalarPtr {
        /// Field name of the pointer.
        name: String,
        /// Element type in memory.
        elem: Element,
    },
    /// A vector along N read at column `n` (`name[n + l * name_batch_stride]`): per-channel
    /// scale, bias.
    RowBroadcast {
        /// Field name of the pointer.
        name: String,
        /// Element type in memory.
        elem: Element,
        /// Whether the vector has a batch stride (a field `{name}_batch_stride`).
        batch_stride: bool,
    },
    /// A vector along M read at row `m` (`name[m + l * name_batch_stride]`): per-token scale.
    ColBroadcast {
        /// Field name of the pointer.
        name: String,
        /// Element type in memory.
        elem: Element,
        /// Whether the vector has a batch stride (a field `{name}_batch_stride`).
        batch_stride: bool,
    },
    /// A row-major `(M, N, L)` matrix: `name[l * name_batch_stride + m * name_ld + n]`.
    AuxLoad {
        /// Field name of the pointer.
        name: String,
        /// Element type in memory.
        elem: Element,
    },
    /// An element-wise operation on the operands' values.
    Compute {
        /// The operation.
        op: ComputeOp,
        /// Its operands.
        args: Vec<Node>,
    },
    /// Stores the child's value, converted to `elem`, to a row-major `(M, N, L)` matrix
    /// (`name[l * name_batch_stride + m * name_ld + n]`) and passes the value on unchanged.
    AuxStore {
        /// Field name of the pointer.
        name: String,
        /// Element type in memory.
        elem: Element,
        /// The stored value.
        child: Box<Node>,
    },
}

impl Node {
    /// [`Node::Accumulator`].
    pub fn acc() -> Node {
        Node::Accumulator
    }

    /// [`Node::Source`].
    pub fn source() -> Node {
        Node::Source
    }

    /// [`Node::Scalar`].
    pub fn scalar(name: impl Into<String>) -> Node {
        Node::Scalar { name: name.into() }
    }

    /// [`Node::ScalarPtr`].
    pub fn scalar_ptr(name: impl Into<String>, elem: Element) -> Node {
        Node::ScalarPtr {
            name: name.into(),
            elem,
        }
    }

    /// [`Node::RowBroadcast`].
    pub fn row_broadcast(name: impl Into<String>, elem: Element, batch_stride: bool) -> Node {
        Node::RowBroadcast {
            name: name.into(),
            elem,
            batch_stride,
        }
    }

    /// [`Node::ColBroadcast`].
    pub fn col_broadcast(name: impl Into<String>, elem: Element, batch_stride: bool) -> Node {
        Node::ColBroadcast {
            name: name.into(),
            elem,
            batch_stride,
        }
    }

    /// [`Node::AuxLoad`].
    pub fn aux_load(name: impl Into<String>, elem: Element) -> Node {
        Node::AuxLoad {
            name: name.into(),
            elem,
        }
    }

    /// A [`Node::Compute`] of `op` on `args`.
    pub fn compute(op: ComputeOp, args: Vec<Node>) -> Node {
        Node::Compute { op, args }
    }

    /// `a * b + c`, fused.
    pub fn fma(a: Node, b: Node, c: Node) -> Node {
        Node::compute(ComputeOp::MultiplyAdd, vec![a, b, c])
    }

    fn unary(self, op: ComputeOp) -> Node {
        Node::compute(op, vec![self])
    }

    /// `relu(self)`.
    pub fn relu(self) -> Node {
        self.unary(ComputeOp::ReLU)
    }

    /// `gelu(self)` (erf form).
    pub fn gelu(self) -> Node {
        self.unary(ComputeOp::Gelu)
    }

    /// `gelu_tanh(self)` (tanh approximation).
    pub fn gelu_tanh(self) -> Node {
        self.unary(ComputeOp::GeluTanh)
    }

    /// `silu(self)`.
    pub fn silu(self) -> Node {
        self.unary(ComputeOp::Silu)
    }

    /// `sigmoid(self)`.
    pub fn sigmoid(self) -> Node {
        self.unary(ComputeOp::Sigmoid)
    }

    /// `clamp(self, lo, hi)`.
    pub fn clamp(self, lo: f32, hi: f32) -> Node {
        self.unary(ComputeOp::Clamp { lo, hi })
    }

    /// `self` rounded to `elem` and back to float.
    pub fn convert(self, elem: Element) -> Node {
        self.unary(ComputeOp::Convert(elem))
    }

    /// Stores `self` to the aux matrix `name` of type `elem`; the value passes on.
    pub fn store(self, name: impl Into<String>, elem: Element) -> Node {
        Node::AuxStore {
            name: name.into(),
            elem,
            child: Box::new(self),
        }
    }

    /// The operands (compute) or the stored child (aux store); empty for leaves.
    pub fn children(&self) -> Vec<&Node> {
        match self {
            Node::Compute { args, .. } => args.iter().collect(),
            Node::AuxStore { child, .. } => vec![child],
            _ => Vec::new(),
        }
    }

    /// The tree as one line, e.g. `multiply_add(beta, C, multiply(alpha, acc))`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        self.describe_into(&mut s);
        s
    }

    fn describe_into(&self, s: &mut String) {
        match self {
            Node::Accumulator => s.push_str("acc"),
            Node::Source => s.push('C'),
            Node::Scalar { name } => s.push_str(name),
            Node::ScalarPtr { name, elem } => {
                let _ = write!(s, "*{name}:{elem}");
            }
            Node::RowBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                let _ = write!(s, "row({name}:{elem}{})", if *batch_stride { ",batched" } else { "" });
            }
            Node::ColBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                let _ = write!(s, "col({name}:{elem}{})", if *batch_stride { ",batched" } else { "" });
            }
            Node::AuxLoad { name, elem } => {
                let _ = write!(s, "aux({name}:{elem})");
            }
            Node::Compute { op, args } => {
                s.push_str(&op.tag());
                s.push('(');
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    a.describe_into(s);
                }
                s.push(')');
            }
            Node::AuxStore { name, elem, child } => {
                let _ = write!(s, "store({name}:{elem}, ");
                child.describe_into(s);
                s.push(')');
            }
        }
    }

    /// The label used in comments of the generated code, e.g. `RowBroadcast bias (bf16)`.
    fn label(&self) -> String {
        match self {
            Node::Accumulator => "Accumulator".into(),
            Node::Source => "Source C".into(),
            Node::Scalar { name } => format!("Scalar {name}"),
            Node::ScalarPtr { name, elem } => format!("ScalarPtr {name} ({elem})"),
            Node::RowBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                format!(
                    "RowBroadcast {name} ({elem}{})",
                    if *batch_stride { ", batched" } else { "" }
                )
            }
            Node::ColBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                format!(
                    "ColBroadcast {name} ({elem}{})",
                    if *batch_stride { ", batched" } else { "" }
                )
            }
            Node::AuxLoad { name, elem } => format!("AuxLoad {name} ({elem})"),
            Node::Compute { op, .. } => format!("Compute {}", op.tag()),
            Node::AuxStore { name, elem, .. } => format!("AuxStore {name} ({elem})"),
        }
    }
}

impl std::ops::Add for Node {
    type Output = Node;
    /// [`ComputeOp::Add`] of the two nodes.
    fn add(self, rhs: Node) -> Node {
        Node::compute(ComputeOp::Add, vec![self, rhs])
    }
}

impl std::ops::Sub for Node {
    type Output = Node;
    /// [`ComputeOp::Subtract`] of the two nodes.
    fn sub(self, rhs: Node) -> Node {
        Node::compute(ComputeOp::Subtract, vec![self, rhs])
    }
}

impl std::ops::Mul for Node {
    type Output = Node;
    /// [`ComputeOp::Multiply`] of the two nodes.
    fn mul(self, rhs: Node) -> Node {
        Node::compute(ComputeOp::Multiply, vec![self, rhs])
    }
}

impl std::ops::Neg for Node {
    type Output = Node;
    /// [`ComputeOp::Negate`] of the node.
    fn neg(self) -> Node {
        self.unary(ComputeOp::Negate)
    }
}

/// How a scale of [`Fusion::scaled_mm`] is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleKind {
    /// One f32 scale for the whole tensor, read from device memory.
    Scalar,
    /// One f32 scale per row `m` (per token): A's scale only.
    PerRow,
    /// One f32 scale per column `n` (per output channel): B's scale only.
    PerCol,
}

/// Why a fusion tree, its arguments or its host inputs are refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FusionError {
    /// A name is not a usable C identifier.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Two different leaves (or two stores) share a name, or generated field names collide.
    #[error("duplicate name {name:?}: {what}")]
    DuplicateName {
        /// The name.
        name: String,
        /// What collides.
        what: String,
    },
    /// A compute node has the wrong number of operands.
    #[error("{op} takes {expected} operand(s), got {got}")]
    Arity {
        /// The operation's tag.
        op: String,
        /// The accepted count, e.g. `"2 or more"`.
        expected: String,
        /// The count given.
        got: usize,
    },
    /// A node has an element type fusions do not load, store or convert.
    #[error("{node}: unsupported element type {elem} (f32, bf16, f16, e4m3, e5m2, s8, u8, s32)")]
    UnsupportedElement {
        /// The node.
        node: String,
        /// The type.
        elem: Element,
    },
    /// Clamp bounds that are NaN or out of order.
    #[error("invalid clamp bounds [{lo}, {hi}]")]
    InvalidClamp {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// The tree is deeper than [`MAX_DEPTH`].
    #[error("the fusion tree is deeper than {max} levels")]
    TooDeep {
        /// [`MAX_DEPTH`].
        max: usize,
    },
    /// A scale kind that does not apply to that operand.
    #[error("scale of {operand} cannot be {kind:?}")]
    ScaleKind {
        /// `"A"` or `"B"`.
        operand: &'static str,
        /// The kind given.
        kind: ScaleKind,
    },
    /// An argument the parameter struct needs is missing.
    #[error("missing fusion argument {name:?}")]
    MissingArg {
        /// Field name.
        name: String,
    },
    /// An argument that is not a field of the parameter struct.
    #[error("unknown fusion argument {name:?}")]
    UnknownArg {
        /// The name given.
        name: String,
    },
    /// An argument of the wrong kind (e.g. a pointer for a float).
    #[error("fusion argument {name:?} must be {expected}, got {got}")]
    ArgType {
        /// Field name.
        name: String,
        /// Kind of the field: `"f32"`, `"pointer"` or `"i64"`.
        expected: &'static str,
        /// Kind given.
        got: &'static str,
    },
    /// A null device pointer (every pointer of a fusion is dereferenced).
    #[error("fusion argument {name:?} is a null pointer")]
    NullPointer {
        /// Field name.
        name: String,
    },
    /// A device pointer not aligned to its element.
    #[error("fusion argument {name:?} = {ptr:#x} is not aligned to {align} bytes")]
    Misaligned {
        /// Field name.
        name: String,
        /// The pointer.
        ptr: u64,
        /// The element size.
        align: u32,
    },
    /// A host input the evaluation needs is missing (`acc`, `c` or a tensor).
    #[error("missing host input {name:?}")]
    MissingHostInput {
        /// `"acc"`, `"c"` or the tensor's name.
        name: String,
    },
    /// A host input read out of its bounds (a coordinate, a stride or a tensor too short).
    #[error("host input {name:?}: index {index} outside 0..{len}")]
    HostIndex {
        /// The input.
        name: String,
        /// The index read.
        index: i64,
        /// Its length.
        len: usize,
    },
}

/// The C++ type of a parameter field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `float`.
    F32,
    /// `const T*` (`writable = false`) or `T*` of the element type.
    Ptr {
        /// The element type pointed to.
        elem: Element,
        /// Whether the kernel writes through it.
        writable: bool,
    },
    /// `long long` (leading dimensions and batch strides, in elements).
    I64,
}

impl ParamKind {
    /// The C++ type of the field.
    pub fn cpp_type(self) -> String {
        match self {
            ParamKind::F32 => "float".into(),
            ParamKind::Ptr { elem, writable } => {
                format!("{}{}*", if writable { "" } else { "const " }, ctype(elem))
            }
            ParamKind::I64 => "long long".into(),
        }
    }

    fn word(self) -> &'static str {
        match self {
            ParamKind::F32 => "f32",
            ParamKind::Ptr { .. } => "pointer",
            ParamKind::I64 => "i64",
        }
    }
}

/// One field of the parameter struct (8 bytes each, in [`Fusion::params`] order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FusionParam {
    /// Field name (`alpha`, `bias`, `bias_batch_stride`, `aux_ld`, ...).
    pub name: String,
    /// Field type.
    pub kind: ParamKind,
    /// The node it belongs to, e.g. `RowBroadcast bias (bf16)`.
    pub node: String,
}

/// A value of [`FusionArgs`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    /// For a `float` field.
    F32(f32),
    /// A device address, for a pointer field.
    Ptr(u64),
    /// For a `long long` field.
    I64(i64),
}

impl ArgValue {
    fn word(self) -> &'static str {
        match self {
            ArgValue::F32(_) => "f32",
            ArgValue::Ptr(_) => "pointer",
            ArgValue::I64(_) => "i64",
        }
    }
}

/// Host-side values of the parameter struct's fields, by field name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FusionArgs {
    values: BTreeMap<String, ArgValue>,
}

impl FusionArgs {
    /// No values.
    pub fn new() -> FusionArgs {
        FusionArgs::default()
    }

    /// Sets `name` to `v` (replacing an earlier value).
    pub fn set(&mut self, name: impl Into<String>, v: ArgValue) {
        self.values.insert(name.into(), v);
    }

    /// Sets the float field `name`.
    pub fn f32(mut self, name: impl Into<String>, v: f32) -> FusionArgs {
        self.set(name, ArgValue::F32(v));
        self
    }

    /// Sets the pointer field `name` to the device address `v`.
    pub fn ptr(mut self, name: impl Into<String>, v: u64) -> FusionArgs {
        self.set(name, ArgValue::Ptr(v));
        self
    }

    /// Sets the `long long` field `name` (a stride or leading dimension, in elements).
    pub fn i64(mut self, name: impl Into<String>, v: i64) -> FusionArgs {
        self.set(name, ArgValue::I64(v));
        self
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<ArgValue> {
        self.values.get(name).copied()
    }

    fn typed(&self, p: &FusionParam) -> Result<ArgValue, FusionError> {
        let v = self
            .get(&p.name)
            .ok_or_else(|| FusionError::MissingArg { name: p.name.clone() })?;
        let ok = matches!(
            (p.kind, v),
            (ParamKind::F32, ArgValue::F32(_))
                | (ParamKind::Ptr { .. }, ArgValue::Ptr(_))
                | (ParamKind::I64, ArgValue::I64(_))
        );
        if !ok {
            return Err(FusionError::ArgType {
                name: p.name.clone(),
                expected: p.kind.word(),
                got: v.word(),
            });
        }
        Ok(v)
    }

    fn f32_of(&self, name: &str) -> Result<f32, FusionError> {
        match self.get(name) {
            Some(ArgValue::F32(v)) => Ok(v),
            Some(v) => Err(FusionError::ArgType {
                name: name.into(),
                expected: "f32",
                got: v.word(),
            }),
            None => Err(FusionError::MissingArg { name: name.into() }),
        }
    }

    fn i64_of(&self, name: &str) -> Result<i64, FusionError> {
        match self.get(name) {
            Some(ArgValue::I64(v)) => Ok(v),
            Some(v) => Err(FusionError::ArgType {
                name: name.into(),
                expected: "i64",
                got: v.word(),
            }),
            None => Err(FusionError::MissingArg { name: name.into() }),
        }
    }

    /// The bytes of `fusion`'s parameter struct: 8 bytes per field in [`Fusion::params`]
    /// order, little endian (a float in the low 4 bytes, the high 4 zero). Pass them with
    /// `rcute_kernel::KernelArgs::blob`. Every field must be set with its kind, no other
    /// name may be set, and pointers must be non-null and aligned to their element.
    pub fn pack(&self, fusion: &Fusion) -> Result<Vec<u8>, FusionError> {
        let mut out = Vec::with_capacity(8 * fusion.params.len());
        for p in &fusion.params {
            match (p.kind, self.typed(p)?) {
                (_, ArgValue::F32(v)) => {
                    out.extend_from_slice(&v.to_le_bytes());
                    out.extend_from_slice(&[0; 4]);
                }
                (ParamKind::Ptr { elem, .. }, ArgValue::Ptr(v)) => {
                    if v == 0 {
                        return Err(FusionError::NullPointer { name: p.name.clone() });
                    }
                    if v % elem.bytes() as u64 != 0 {
                        return Err(FusionError::Misaligned {
                            name: p.name.clone(),
                            ptr: v,
                            align: elem.bytes(),
                        });
                    }
                    out.extend_from_slice(&v.to_le_bytes());
                }
                (_, ArgValue::Ptr(v)) => out.extend_from_slice(&v.to_le_bytes()),
                (_, ArgValue::I64(v)) => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
        if let Some(extra) = self
            .values
            .keys()
            .find(|k| !fusion.params.iter().any(|p| &p.name == *k))
        {
            return Err(FusionError::UnknownArg { name: extra.clone() });
        }
        Ok(out)
    }
}

/// Host data for [`Fusion::eval`]: the accumulator and C as dense `(L, M, N)` arrays
/// (index `(l * M + m) * N + n`), and the contents of every pointer field by name, indexed
/// exactly as the device indexes them (strides and leading dimensions from the
/// [`FusionArgs`]; a [`Node::ScalarPtr`] reads element 0). Values are the decoded
/// elements; loads round them to f32 as the device does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostInputs {
    /// `(M, N, L)`.
    pub shape: [i64; 3],
    /// The accumulator, `M * N * L` values.
    pub acc: Vec<f64>,
    /// C, `M * N * L` values (may be empty when C is not read).
    pub c: Vec<f64>,
    /// Pointer contents by field name.
    pub tensors: BTreeMap<String, Vec<f64>>,
}

impl HostInputs {
    /// Empty inputs of shape `(m, n, l)`.
    pub fn new(m: i64, n: i64, l: i64) -> HostInputs {
        HostInputs {
            shape: [m, n, l],
            ..HostInputs::default()
        }
    }

    /// Sets the accumulator.
    pub fn with_acc(mut self, acc: Vec<f64>) -> HostInputs {
        self.acc = acc;
        self
    }

    /// Sets C.
    pub fn with_c(mut self, c: Vec<f64>) -> HostInputs {
        self.c = c;
        self
    }

    /// Sets the contents of the pointer field `name`.
    pub fn with_tensor(mut self, name: impl Into<String>, values: Vec<f64>) -> HostInputs {
        self.tensors.insert(name.into(), values);
        self
    }

    fn read(name: &str, data: &[f64], index: i64) -> Result<f64, FusionError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| data.get(i))
            .map(|&v| v as f32 as f64)
            .ok_or(FusionError::HostIndex {
                name: name.into(),
                index,
                len: data.len(),
            })
    }

    fn tensor(&self, name: &str, index: i64) -> Result<f64, FusionError> {
        let data = self
            .tensors
            .get(name)
            .ok_or_else(|| FusionError::MissingHostInput { name: name.into() })?;
        Self::read(name, data, index)
    }
}

/// The generated C++ of a fusion (see [`Fusion::emit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionCode {
    /// `struct {prefix}_params { alignas(8) ... };`, every field in an 8-byte slot.
    pub params_struct: String,
    /// `__device__ __forceinline__ float {prefix}_visit(const {prefix}_params& p, float acc,
    /// float c, int m, int n, int l)`: the tree's value at `(m, n, l)`, with the aux stores as
    /// side effects. Call it for in-bounds elements only, with `c = 0.0f` when
    /// [`FusionCode::source_needed`] is false.
    pub device_fn: String,
    /// A C++ `bool` expression on `p`: whether C must be read (`"false"` without a source,
    /// `"p.beta != 0.0f"` for the linear combination).
    pub source_needed: String,
    /// `{prefix}_visit`.
    pub fn_name: String,
    /// `{prefix}_params`.
    pub struct_name: String,
    /// With [`Fusion::emit_staged`]: the functions that read broadcast vectors from a
    /// per-tile staging area instead of device memory.
    pub staged: Option<StagedCode>,
}

/// A broadcast vector of a fusion tree (see [`Fusion::broadcasts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broadcast {
    /// Field name of the pointer.
    pub name: String,
    /// Element type in memory.
    pub elem: Element,
    /// Which coordinate indexes it.
    pub axis: BroadcastAxis,
    /// Whether it has a batch stride.
    pub batch_stride: bool,
}

/// Which coordinate a broadcast vector is indexed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BroadcastAxis {
    /// Along N (indexed by the column `n`): [`Node::RowBroadcast`].
    Row,
    /// Along M (indexed by the row `m`): [`Node::ColBroadcast`].
    Col,
}

/// One broadcast vector's slot in a tile's staging area: `extent` floats at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedBroadcast {
    /// The vector.
    pub broadcast: Broadcast,
    /// First float of its slot.
    pub offset: i64,
    /// Floats in the slot: the tile's BN (row) or BM (column).
    pub extent: i64,
}

/// The staged form of a fusion (see [`Fusion::emit_staged`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedCode {
    /// `__device__ __forceinline__ float {prefix}_visit_staged(const {prefix}_params& p,
    /// float acc, float c, int m, int n, int l, const float* bc, int lm, int ln)`: the tree
    /// with broadcast `k` read as `bc[offset_k + ln]` (row) or `bc[offset_k + lm]`
    /// (column), where `(lm, ln)` is the element's position in its tile.
    pub visit_fn: String,
    /// `__device__ __forceinline__ float {prefix}_broadcast(const {prefix}_params& p, int k,
    /// int i, int l)`: element `i` (a global row or column) of broadcast `k` of batch `l`,
    /// as a float, read from device memory: what a kernel stages.
    pub fetch_fn: String,
    /// `{prefix}_visit_staged`.
    pub visit_name: String,
    /// `{prefix}_broadcast`.
    pub fetch_name: String,
    /// The slots, in the order of `k`.
    pub layout: Vec<StagedBroadcast>,
    /// Floats in the whole staging area of one tile.
    pub floats: i64,
}

impl FusionCode {
    /// The struct and the function, ready to paste after the three CUDA type headers.
    pub fn source(&self) -> String {
        match &self.staged {
            None => format!("{}\n{}", self.params_struct, self.device_fn),
            Some(st) => format!("{}\n{}\n{}", self.params_struct, self.device_fn, st.source()),
        }
    }
}

impl StagedCode {
    /// The fetch and staged visit functions.
    pub fn source(&self) -> String {
        format!("{}\n{}", self.fetch_fn, self.visit_fn)
    }
}

/// When C must be read.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SourceUse {
    /// No source in the tree.
    Never,
    /// Some source is not guarded by a scalar factor.
    Always,
    /// Only when one of these scalars is non-zero.
    WhenNonZero(Vec<String>),
}

/// A leaf's definition: the same name may only be reused for an identical definition.
#[derive(Clone, Debug, PartialEq)]
enum Leaf {
    Scalar,
    ScalarPtr(Element),
    Row(Element, bool),
    Col(Element, bool),
    Aux(Element),
    Store(Element),
}

/// A validated fusion tree with its kernel ABI (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Fusion {
    root: Node,
    name: String,
    params: Vec<FusionParam>,
    source: SourceUse,
}

const KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "nullptr",
    "operator",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
];

fn check_ident(name: &str) -> Result<(), FusionError> {
    let bad = |reason| {
        Err(FusionError::InvalidName {
            name: name.into(),
            reason,
        })
    };
    let mut chars = name.chars();
    match chars.next() {
        None => return bad("empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => return bad("must start with a letter or '_'"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return bad("only ASCII letters, digits and '_' are allowed");
    }
    if name.len() > 64 {
        return bad("longer than 64 characters");
    }
    let b = name.as_bytes();
    if name.starts_with("__") || (b[0] == b'_' && b.len() > 1 && b[1].is_ascii_uppercase()) {
        return bad("reserved identifier");
    }
    if KEYWORDS.contains(&name) {
        return bad("C++ keyword");
    }
    Ok(())
}

fn supported(e: Element) -> bool {
    matches!(
        e,
        Element::F32
            | Element::BF16
            | Element::F16
            | Element::E4M3
            | Element::E5M2
            | Element::S8
            | Element::U8
            | Element::S32
    )
}

/// The C++ element type of a pointer field (no `<cstdint>` types).
fn ctype(e: Element) -> &'static str {
    match e {
        Element::S8 => "signed char",
        Element::U8 => "unsigned char",
        Element::S32 => "int",
        _ => e.cuda_type(),
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

impl Default for Fusion {
    /// [`Fusion::linear_combination`].
    fn default() -> Fusion {
        Fusion::linear_combination()
    }
}

impl Fusion {
    /// Validates `root`: names are C identifiers (not keywords or reserved), two different
    /// leaves never share a name and generated field names do not collide, compute nodes
    /// have their operand counts, element types are supported (f32, bf16, f16, e4m3, e5m2,
    /// s8, u8, s32), clamp bounds are ordered, and the tree is at most [`MAX_DEPTH`] deep.
    /// The name is `evt_` and a hash of [`Fusion::describe`] (see [`Fusion::with_name`]).
    pub fn new(root: Node) -> Result<Fusion, FusionError> {
        let mut leaves: BTreeMap<String, Leaf> = BTreeMap::new();
        validate(&root, 1, &mut leaves)?;
        let mut params = Vec::new();
        for (name, leaf) in &leaves {
            let mut push = |field: String, kind: ParamKind, node: String| {
                params.push(FusionParam {
                    name: field,
                    kind,
                    node,
                })
            };
            let ptr = |elem, writable| ParamKind::Ptr { elem, writable };
            match *leaf {
                Leaf::Scalar => push(name.clone(), ParamKind::F32, format!("Scalar {name}")),
                Leaf::ScalarPtr(e) => push(name.clone(), ptr(e, false), format!("ScalarPtr {name} ({e})")),
                Leaf::Row(e, bs) | Leaf::Col(e, bs) => {
                    let kind = if matches!(leaf, Leaf::Row(..)) {
                        "RowBroadcast"
                    } else {
                        "ColBroadcast"
                    };
                    let node = format!("{kind} {name} ({e}{})", if bs { ", batched" } else { "" });
                    push(name.clone(), ptr(e, false), node.clone());
                    if bs {
                        push(format!("{name}_batch_stride"), ParamKind::I64, node);
                    }
                }
                Leaf::Aux(e) | Leaf::Store(e) => {
                    let store = matches!(leaf, Leaf::Store(_));
                    let node = format!("{} {name} ({e})", if store { "AuxStore" } else { "AuxLoad" });
                    push(name.clone(), ptr(e, store), node.clone());
                    push(format!("{name}_ld"), ParamKind::I64, node.clone());
                    push(format!("{name}_batch_stride"), ParamKind::I64, node);
                }
            }
        }
        for (i, p) in params.iter().enumerate() {
            if let Some(q) = params[..i].iter().find(|q| q.name == p.name) {
                return Err(FusionError::DuplicateName {
                    name: p.name.clone(),
                    what: format!("field of {} collides with a field of {}", p.node, q.node),
                });
            }
        }
        let source = source_use(&root);
        let name = format!("evt_{:08x}", {
            let h = fnv1a(&root.describe());
            (h ^ (h >> 32)) as u32
        });
        Ok(Fusion {
            root,
            name,
            params,
            source,
        })
    }

    /// Renames the fusion (the tag of kernel names); `name` must be a C identifier.
    pub fn with_name(mut self, name: &str) -> Result<Fusion, FusionError> {
        check_ident(name)?;
        self.name = name.into();
        Ok(self)
    }

    /// The default GEMM epilogue `alpha * acc + beta * C`, as CUTLASS's
    /// `LinearCombination` tree: `multiply_add(beta, C, multiply(alpha, acc))` (so
    /// `fmaf(beta, c, alpha * acc)`); C is read only when `beta != 0`. Named `"lincomb"`.
    pub fn linear_combination() -> Fusion {
        let root = Node::fma(
            Node::scalar("beta"),
            Node::Source,
            Node::scalar("alpha") * Node::Accumulator,
        );
        let f = Fusion::new(root).expect("the linear combination is a valid tree");
        Fusion {
            name: "lincomb".into(),
            ..f
        }
    }

    /// vLLM's `scaled_mm` epilogue: `float(acc) * a_scale * b_scale (+ bias[n])`, as its
    /// CUTLASS tree: `multiply(a_scale, multiply(b_scale, acc))`, or with a bias
    /// `multiply_add(a_scale, multiply(b_scale, acc), bias)`. Scales are f32: a
    /// [`ScaleKind::Scalar`] is a [`Node::ScalarPtr`] (`a_scale[0]`), A's
    /// [`ScaleKind::PerRow`] a [`Node::ColBroadcast`] (`a_scale[m]`), B's
    /// [`ScaleKind::PerCol`] a [`Node::RowBroadcast`] (`b_scale[n]`); the bias is a row
    /// broadcast of type `bias`. Named `scaledmm_{tensor|row}{tensor|col}[_bias_{type}]`,
    /// e.g. `scaledmm_rowcol_bias_bf16`.
    pub fn scaled_mm(a_scale: ScaleKind, b_scale: ScaleKind, bias: Option<Element>) -> Result<Fusion, FusionError> {
        let (a, a_tag) = match a_scale {
            ScaleKind::Scalar => (Node::scalar_ptr("a_scale", Element::F32), "tensor"),
            ScaleKind::PerRow => (Node::col_broadcast("a_scale", Element::F32, false), "row"),
            kind @ ScaleKind::PerCol => return Err(FusionError::ScaleKind { operand: "A", kind }),
        };
        let (b, b_tag) = match b_scale {
            ScaleKind::Scalar => (Node::scalar_ptr("b_scale", Element::F32), "tensor"),
            ScaleKind::PerCol => (Node::row_broadcast("b_scale", Element::F32, false), "col"),
            kind @ ScaleKind::PerRow => return Err(FusionError::ScaleKind { operand: "B", kind }),
        };
        let scaled_b = b * Node::Accumulator;
        let (root, suffix) = match bias {
            None => (a * scaled_b, String::new()),
            Some(e) => (
                Node::fma(a, scaled_b, Node::row_broadcast("bias", e, false)),
                format!("_bias_{e}"),
            ),
        };
        Fusion::new(root)?.with_name(&format!("scaledmm_{a_tag}{b_tag}{suffix}"))
    }

    /// The tree.
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// A short deterministic tag for kernel names: `"lincomb"`, `"scaledmm_rowcol_bias_bf16"`,
    /// a name given with [`Fusion::with_name`], else `evt_` and 8 hex digits of a hash of the
    /// tree.
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// The tree as one line (for header comments of generated code).
    pub fn describe(&self) -> String {
        self.root.describe()
    }

    /// Whether the tree reads C at all (it may still skip it at run time, see
    /// [`FusionCode::source_needed`]).
    pub fn reads_source(&self) -> bool {
        self.source != SourceUse::Never
    }

    /// Whether C must be read with these arguments (the host side of
    /// [`FusionCode::source_needed`]).
    pub fn needs_source(&self, args: &FusionArgs) -> Result<bool, FusionError> {
        match &self.source {
            SourceUse::Never => Ok(false),
            SourceUse::Always => Ok(true),
            SourceUse::WhenNonZero(names) => {
                for n in names {
                    if args.f32_of(n)? != 0.0 {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// The fields of the parameter struct, in order: per leaf (sorted by name) the scalar or
    /// pointer, then `{name}_ld` (aux matrices) and `{name}_batch_stride` (batched vectors,
    /// aux matrices).
    pub fn params(&self) -> Vec<FusionParam> {
        self.params.clone()
    }

    /// The C++ of the fusion with names prefixed by `prefix` (a C identifier): the struct
    /// `{prefix}_params` and the function `{prefix}_visit`. Deterministic; each line of the
    /// function names the node it comes from.
    pub fn emit(&self, prefix: &str) -> Result<FusionCode, FusionError> {
        check_ident(prefix)?;
        let struct_name = format!("{prefix}_params");
        let fn_name = format!("{prefix}_visit");
        let header = format!("// rcute fusion {}: {}\n", self.name, self.describe());
        let mut s = header.clone();
        let _ = writeln!(s, "struct {struct_name} {{");
        for p in &self.params {
            let _ = writeln!(s, "  alignas(8) {} {};  // {}", p.kind.cpp_type(), p.name, p.node);
        }
        s.push_str("};\n");
        let f = self.visit_fn(
            header,
            &format!("{fn_name}(const {struct_name}& p, float acc, float c, int m, int n, int l)"),
            None,
        );
        let source_needed = match &self.source {
            SourceUse::Never => "false".into(),
            SourceUse::Always => "true".into(),
            SourceUse::WhenNonZero(names) => names
                .iter()
                .map(|n| format!("p.{n} != 0.0f"))
                .collect::<Vec<_>>()
                .join(" || "),
        };
        Ok(FusionCode {
            params_struct: s,
            device_fn: f,
            source_needed,
            fn_name,
            struct_name,
            staged: None,
        })
    }

    /// Whether the tree loads or stores an auxiliary `(M, N, L)` matrix: the only nodes whose
    /// per-element accesses must stay inside the problem when broadcasts are staged.
    pub fn has_aux(&self) -> bool {
        fn walk(n: &Node) -> bool {
            matches!(n, Node::AuxLoad { .. } | Node::AuxStore { .. }) || n.children().into_iter().any(walk)
        }
        walk(&self.root)
    }

    /// `header`, then `__device__ __forceinline__ float {signature} { ... }`: the tree's
    /// statements, one per node, with broadcasts read as `staged` says.
    fn visit_fn(&self, header: String, signature: &str, staged: Option<Vec<StagedBroadcast>>) -> String {
        let mut f = header;
        let _ = writeln!(f, "__device__ __forceinline__ float {signature} {{");
        let mut em = Emitter {
            lines: Vec::new(),
            next: 0,
            staged,
        };
        let v = em.node(&self.root);
        for line in &em.lines {
            let _ = writeln!(f, "  {line}");
        }
        let _ = writeln!(f, "  return {v};");
        f.push_str("}\n");
        f
    }

    /// The tree's broadcast vectors, each once, in the order [`Fusion::emit`] first reads them.
    pub fn broadcasts(&self) -> Vec<Broadcast> {
        fn walk(n: &Node, out: &mut Vec<Broadcast>) {
            let b = match n {
                Node::RowBroadcast {
                    name,
                    elem,
                    batch_stride,
                } => Some((name, elem, BroadcastAxis::Row, batch_stride)),
                Node::ColBroadcast {
                    name,
                    elem,
                    batch_stride,
                } => Some((name, elem, BroadcastAxis::Col, batch_stride)),
                _ => None,
            };
            if let Some((name, elem, axis, batch_stride)) = b {
                if !out.iter().any(|x| &x.name == name) {
                    out.push(Broadcast {
                        name: name.clone(),
                        elem: *elem,
                        axis,
                        batch_stride: *batch_stride,
                    });
                }
            }
            for c in n.children() {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// The staging area of a `bm x bn` tile: one slot of `bn` floats per row broadcast and
    /// of `bm` floats per column broadcast, in [`Fusion::broadcasts`] order.
    pub fn staging_layout(&self, bm: i64, bn: i64) -> Vec<StagedBroadcast> {
        let mut offset = 0;
        self.broadcasts()
            .into_iter()
            .map(|b| {
                let extent = match b.axis {
                    BroadcastAxis::Row => bn,
                    BroadcastAxis::Col => bm,
                };
                let slot = StagedBroadcast {
                    broadcast: b,
                    offset,
                    extent,
                };
                offset += extent;
                slot
            })
            .collect()
    }

    /// [`Fusion::emit`] plus the staged form for `bm x bn` tiles ([`StagedCode`]): a kernel
    /// loads each tile's broadcast vectors once (with `{prefix}_broadcast`), keeps them in
    /// shared memory, and calls `{prefix}_visit_staged` per element, instead of reading the
    /// vectors from device memory at every element. Same values as `{prefix}_visit`.
    ///
    /// ```
    /// use rcute_collective::fusion::{Fusion, ScaleKind};
    /// use rcute_atom::Element;
    /// let f = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    /// let code = f.emit_staged("ep", 128, 256).unwrap();
    /// let st = code.staged.unwrap();
    /// // a_scale (a column of 128 floats), b_scale and bias (rows of 256 floats each)
    /// assert_eq!(st.floats, 128 + 256 + 256);
    /// assert!(st.visit_fn.contains("bc[0 + lm]"));
    /// assert!(st.fetch_fn.contains("case 2: return"));
    /// ```
    pub fn emit_staged(&self, prefix: &str, bm: i64, bn: i64) -> Result<FusionCode, FusionError> {
        let mut code = self.emit(prefix)?;
        let layout = self.staging_layout(bm, bn);
        let floats = layout.iter().map(|b| b.extent).sum();
        let struct_name = &code.struct_name;
        let header = format!("// rcute fusion {} (broadcasts staged per {bm}x{bn} tile)\n", self.name);
        let mut fetch = header.clone();
        let _ = writeln!(fetch, "// Staging area of a tile (floats):");
        for b in &layout {
            let _ = writeln!(
                fetch,
                "//   [{}, {}) {} {:?} ({})",
                b.offset,
                b.offset + b.extent,
                b.broadcast.name,
                b.broadcast.axis,
                b.broadcast.elem
            );
        }
        let _ = writeln!(
            fetch,
            "__device__ __forceinline__ float {prefix}_broadcast(const {struct_name}& p, int k, int i, int l) {{"
        );
        fetch.push_str("  switch (k) {\n");
        for (k, b) in layout.iter().enumerate() {
            let bc = &b.broadcast;
            let idx = vector_index("i", &bc.name, bc.batch_stride);
            let _ = writeln!(
                fetch,
                "    case {k}: return {};",
                load_cpp(bc.elem, &format!("p.{}", bc.name), Some(&idx))
            );
        }
        fetch.push_str("  }\n  return 0.0f;\n}\n");
        let f = self.visit_fn(
            header,
            &format!(
                "{prefix}_visit_staged(const {struct_name}& p, float acc, float c, int m, int n, int l, const float* bc, int lm, int ln)"
            ),
            Some(layout.clone()),
        );
        code.staged = Some(StagedCode {
            visit_fn: f,
            fetch_fn: fetch,
            visit_name: format!("{prefix}_visit_staged"),
            fetch_name: format!("{prefix}_broadcast"),
            layout,
            floats,
        });
        Ok(code)
    }

    /// The CPU reference of the visit function at `(m, n, l)`, in f64: loads, the
    /// accumulator, C and scalars are rounded to f32 as the device sees them, compute is
    /// exact-ish f64, [`ComputeOp::Convert`] rounds through f32 to the type
    /// ([`round_to_element`]). C counts as 0 when it is not needed ([`Fusion::needs_source`]).
    /// Pointer arguments are not needed; floats and strides are.
    pub fn eval(&self, args: &FusionArgs, host: &HostInputs, m: i64, n: i64, l: i64) -> Result<f64, FusionError> {
        self.eval_with_stores(args, host, m, n, l).map(|(v, _)| v)
    }

    /// [`Fusion::eval`], and the values the aux stores write (decoded, after rounding to
    /// their types), in evaluation order.
    pub fn eval_with_stores(
        &self,
        args: &FusionArgs,
        host: &HostInputs,
        m: i64,
        n: i64,
        l: i64,
    ) -> Result<(f64, Vec<(String, f64)>), FusionError> {
        let [mm, nn, ll] = host.shape;
        for (name, v, ext) in [("m", m, mm), ("n", n, nn), ("l", l, ll)] {
            if v < 0 || v >= ext {
                return Err(FusionError::HostIndex {
                    name: name.into(),
                    index: v,
                    len: ext.max(0) as usize,
                });
            }
        }
        let at = (l * mm + m) * nn + n;
        if host.acc.is_empty() {
            return Err(FusionError::MissingHostInput { name: "acc".into() });
        }
        let acc = HostInputs::read("acc", &host.acc, at)?;
        let c = if self.needs_source(args)? {
            if host.c.is_empty() {
                return Err(FusionError::MissingHostInput { name: "c".into() });
            }
            HostInputs::read("c", &host.c, at)?
        } else {
            0.0
        };
        let mut ev = Eval {
            args,
            host,
            acc,
            c,
            m,
            n,
            l,
            stores: Vec::new(),
        };
        let v = ev.node(&self.root)?;
        Ok((v, ev.stores))
    }
}

fn validate(node: &Node, depth: usize, leaves: &mut BTreeMap<String, Leaf>) -> Result<(), FusionError> {
    if depth > MAX_DEPTH {
        return Err(FusionError::TooDeep { max: MAX_DEPTH });
    }
    let elem_ok = |e: Element| {
        if supported(e) {
            Ok(())
        } else {
            Err(FusionError::UnsupportedElement {
                node: node.label(),
                elem: e,
            })
        }
    };
    let mut leaf = |name: &str, def: Leaf| -> Result<(), FusionError> {
        check_ident(name)?;
        match leaves.get(name) {
            None => {
                leaves.insert(name.into(), def);
                Ok(())
            }
            Some(old) if *old == def && !matches!(def, Leaf::Store(_)) => Ok(()),
            Some(old) => Err(FusionError::DuplicateName {
                name: name.into(),
                what: format!("used by two different nodes ({old:?} and {def:?})"),
            }),
        }
    };
    match node {
        Node::Accumulator | Node::Source => Ok(()),
        Node::Scalar { name } => leaf(name, Leaf::Scalar),
        Node::ScalarPtr { name, elem } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::ScalarPtr(*elem))
        }
        Node::RowBroadcast {
            name,
            elem,
            batch_stride,
        } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Row(*elem, *batch_stride))
        }
        Node::ColBroadcast {
            name,
            elem,
            batch_stride,
        } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Col(*elem, *batch_stride))
        }
        Node::AuxLoad { name, elem } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Aux(*elem))
        }
        Node::AuxStore { name, elem, child } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Store(*elem))?;
            validate(child, depth + 1, leaves)
        }
        Node::Compute { op, args } => {
            let (lo, hi) = op.arity();
            if args.len() < lo || hi.is_some_and(|h| args.len() > h) {
                let expected = match hi {
                    None => format!("{lo} or more"),
                    Some(h) => h.to_string(),
                };
                return Err(FusionError::Arity {
                    op: op.tag(),
                    expected,
                    got: args.len(),
                });
            }
            match *op {
                ComputeOp::Clamp { lo, hi } if lo.is_nan() || hi.is_nan() || lo > hi => {
                    return Err(FusionError::InvalidClamp { lo, hi })
                }
                ComputeOp::Convert(e) => elem_ok(e)?,
                _ => {}
            }
            args.iter().try_for_each(|a| validate(a, depth + 1, leaves))
        }
    }
}

/// When is C needed: a source that is an operand of a multiply (or one of the two factors
/// of a multiply-add) next to a scalar is guarded by that scalar.
fn source_use(root: &Node) -> SourceUse {
    fn walk(node: &Node, guards: &mut Vec<String>, always: &mut bool, any: &mut bool) {
        if let Node::Compute { op, args } = node {
            let factors: &[Node] = match op {
                ComputeOp::Multiply => args,
                ComputeOp::MultiplyAdd => &args[..2],
                _ => &[],
            };
            let scalar = factors.iter().find_map(|a| match a {
                Node::Scalar { name } => Some(name.clone()),
                _ => None,
            });
            for (i, a) in args.iter().enumerate() {
                if *a == Node::Source {
                    *any = true;
                    match (&scalar, i < factors.len()) {
                        (Some(s), true) => guards.push(s.clone()),
                        _ => *always = true,
                    }
                } else {
                    walk(a, guards, always, any);
                }
            }
        } else if let Node::AuxStore { child, .. } = node {
            if **child == Node::Source {
                *any = true;
                *always = true;
            } else {
                walk(child, guards, always, any);
            }
        } else if *node == Node::Source {
            *any = true;
            *always = true;
        }
    }
    let (mut guards, mut always, mut any) = (Vec::new(), false, false);
    walk(root, &mut guards, &mut always, &mut any);
    guards.sort();
    guards.dedup();
    match (any, always) {
        (false, _) => SourceUse::Never,
        (true, true) => SourceUse::Always,
        (true, false) => SourceUse::WhenNonZero(guards),
    }
}

/// A float literal that C++ parses to exactly `v`.
fn f32_lit(v: f32) -> String {
    if v.is_infinite() {
        let inf = "__int_as_float(0x7f800000)";
        return if v > 0.0 { inf.into() } else { format!("(-{inf})") };
    }
    format!("{v:?}f")
}

/// `float` from element `e` at `ptr + idx` through `__ldg`.
fn load_cpp(e: Element, ptr: &str, idx: Option<&str>) -> String {
    let at = |p: String| match idx {
        None => p,
        Some(i) if i.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => format!("{p} + {i}"),
        Some(i) => format!("{p} + ({i})"),
    };
    match e {
        Element::E4M3 | Element::E5M2 => {
            let kind = if e == Element::E4M3 { "__NV_E4M3" } else { "__NV_E5M2" };
            let byte = at(format!("reinterpret_cast<const unsigned char*>({ptr})"));
            format!("__half2float(__half(__nv_cvt_fp8_to_halfraw(__ldg({byte}), {kind})))")
        }
        Element::S8 | Element::U8 | Element::S32 => format!("(float)__ldg({})", at(ptr.into())),
        _ => convert_to_f32(e, &format!("__ldg({})", at(ptr.into()))),
    }
}

/// `x` (a float expression) converted to element `e` as stored.
fn store_cpp(e: Element, x: &str) -> String {
    match e {
        Element::E4M3 => format!("__nv_fp8_e4m3({x})"),
        Element::E5M2 => format!("__nv_fp8_e5m2({x})"),
        Element::S8 => format!("(signed char)max(-128, min(127, __float2int_rn({x})))"),
        Element::U8 => format!("(unsigned char)max(0, min(255, __float2int_rn({x})))"),
        Element::S32 => format!("__float2int_rn({x})"),
        _ => convert_from_f32(e, x),
    }
}

/// `x` rounded to `e` and back to float.
fn convert_cpp(e: Element, x: &str) -> String {
    match e {
        Element::E4M3 | Element::E5M2 => format!("static_cast<float>({})", store_cpp(e, x)),
        Element::S8 => format!("(float)max(-128, min(127, __float2int_rn({x})))"),
        Element::U8 => format!("(float)max(0, min(255, __float2int_rn({x})))"),
        Element::S32 => format!("(float)__float2int_rn({x})"),
        _ => convert_to_f32(e, &convert_from_f32(e, x)),
    }
}

fn matrix_index(name: &str) -> String {
    format!("(long long)l * p.{name}_batch_stride + (long long)m * p.{name}_ld + n")
}

fn vector_index(coord: &str, name: &str, batch_stride: bool) -> String {
    if batch_stride {
        format!("{coord} + (long long)l * p.{name}_batch_stride")
    } else {
        coord.into()
    }
}

struct Emitter {
    lines: Vec<String>,
    next: usize,
    /// Where broadcast vectors are read from: `None` for device memory (`__ldg`), or the
    /// staging layout (`bc[offset + lm | ln]` in shared memory).
    staged: Option<Vec<StagedBroadcast>>,
}

impl Emitter {
    fn def(&mut self, expr: String, node: &Node) -> String {
        let v = format!("v{}", self.next);
        self.next += 1;
        self.lines
            .push(format!("const float {v} = {expr};  // {}", node.label()));
        v
    }

    /// Emits `node` (operands first) and returns the variable holding its value.
    fn node(&mut self, node: &Node) -> String {
        match node {
            Node::Accumulator => self.def("acc".into(), node),
            Node::Source => self.def("c".into(), node),
            Node::Scalar { name } => self.def(format!("p.{name}"), node),
            Node::ScalarPtr { name, elem } => self.def(load_cpp(*elem, &format!("p.{name}"), None), node),
            Node::RowBroadcast { name, .. } | Node::ColBroadcast { name, .. } if self.staged.is_some() => {
                let slot = self
                    .staged
                    .as_ref()
                    .and_then(|v| v.iter().find(|b| &b.broadcast.name == name))
                    .expect("every broadcast of the tree has a staging slot");
                let local = match slot.broadcast.axis {
                    BroadcastAxis::Row => "ln",
                    BroadcastAxis::Col => "lm",
                };
                self.def(format!("bc[{} + {local}]", slot.offset), node)
            }
            Node::RowBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                let idx = vector_index("n", name, *batch_stride);
                self.def(load_cpp(*elem, &format!("p.{name}"), Some(&idx)), node)
            }
            Node::ColBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                let idx = vector_index("m", name, *batch_stride);
                self.def(load_cpp(*elem, &format!("p.{name}"), Some(&idx)), node)
            }
            Node::AuxLoad { name, elem } => {
                self.def(load_cpp(*elem, &format!("p.{name}"), Some(&matrix_index(name))), node)
            }
            Node::AuxStore { name, elem, child } => {
                let v = self.node(child);
                self.lines.push(format!(
                    "p.{name}[{}] = {};  // {}",
                    matrix_index(name),
                    store_cpp(*elem, &v),
                    node.label()
                ));
                v
            }
            Node::Compute { op, args } => {
                let a: Vec<String> = args.iter().map(|x| self.node(x)).collect();
                let x = a[0].as_str();
                let expr = match *op {
                    ComputeOp::Multiply => a.join(" * "),
                    ComputeOp::Add => a.join(" + "),
                    ComputeOp::Subtract => format!("{} - {}", a[0], a[1]),
                    ComputeOp::MultiplyAdd => format!("fmaf({}, {}, {})", a[0], a[1], a[2]),
                    ComputeOp::Negate => format!("-{x}"),
                    ComputeOp::ReLU => format!("fmaxf({x}, 0.0f)"),
                    ComputeOp::Gelu => format!("0.5f * {x} * (1.0f + erff({x} * 0.70710678f))"),
                    ComputeOp::GeluTanh => {
                        format!("0.5f * {x} * (1.0f + tanhf(0.7978845608f * ({x} + 0.044715f * {x} * {x} * {x})))")
                    }
                    ComputeOp::Silu => format!("{x} / (1.0f + expf(-{x}))"),
                    ComputeOp::Sigmoid => format!("1.0f / (1.0f + expf(-{x}))"),
                    ComputeOp::Clamp { lo, hi } => format!("fminf(fmaxf({x}, {}), {})", f32_lit(lo), f32_lit(hi)),
                    ComputeOp::Convert(e) => convert_cpp(e, x),
                };
                self.def(expr, node)
            }
        }
    }
}

struct Eval<'a> {
    args: &'a FusionArgs,
    host: &'a HostInputs,
    acc: f64,
    c: f64,
    m: i64,
    n: i64,
    l: i64,
    stores: Vec<(String, f64)>,
}

impl Eval<'_> {
    fn vector(&self, name: &str, coord: i64, batch_stride: bool) -> Result<f64, FusionError> {
        let idx = if batch_stride {
            coord + self.l * self.args.i64_of(&format!("{name}_batch_stride"))?
        } else {
            coord
        };
        self.host.tensor(name, idx)
    }

    fn matrix_index(&self, name: &str) -> Result<i64, FusionError> {
        let bs = self.args.i64_of(&format!("{name}_batch_stride"))?;
        let ld = self.args.i64_of(&format!("{name}_ld"))?;
        Ok(self.l * bs + self.m * ld + self.n)
    }

    fn node(&mut self, node: &Node) -> Result<f64, FusionError> {
        Ok(match node {
            Node::Accumulator => self.acc,
            Node::Source => self.c,
            Node::Scalar { name } => self.args.f32_of(name)? as f64,
            Node::ScalarPtr { name, .. } => self.host.tensor(name, 0)?,
            Node::RowBroadcast { name, batch_stride, .. } => self.vector(name, self.n, *batch_stride)?,
            Node::ColBroadcast { name, batch_stride, .. } => self.vector(name, self.m, *batch_stride)?,
            Node::AuxLoad { name, .. } => {
                let i = self.matrix_index(name)?;
                self.host.tensor(name, i)?
            }
            Node::AuxStore { name, elem, child } => {
                let v = self.node(child)?;
                self.matrix_index(name)?;
                self.stores
                    .push((name.clone(), round_to_element(*elem, v as f32) as f64));
                v
            }
            Node::Compute { op, args } => {
                let a = args.iter().map(|x| self.node(x)).collect::<Result<Vec<f64>, _>>()?;
                let x = a[0];
                match *op {
                    ComputeOp::Multiply => a.iter().product(),
                    ComputeOp::Add => a.iter().sum(),
                    ComputeOp::Subtract => a[0] - a[1],
                    ComputeOp::MultiplyAdd => a[0] * a[1] + a[2],
                    ComputeOp::Negate => -x,
                    ComputeOp::ReLU => x.max(0.0),
                    ComputeOp::Gelu => 0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2)),
                    ComputeOp::GeluTanh => {
                        let k = (2.0 / std::f64::consts::PI).sqrt();
                        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
                    }
                    ComputeOp::Silu => x / (1.0 + (-x).exp()),
                    ComputeOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                    ComputeOp::Clamp { lo, hi } => x.max(lo as f64).min(hi as f64),
                    ComputeOp::Convert(e) => round_to_element(e, x as f32) as f64,
                }
            }
        })
    }
}

/// The error function, to about 1e-15 relative: `2/sqrt(pi) exp(-x^2) sum_k 2^k x^(2k+1) /
/// (2k+1)!!` (all terms positive), and `±1` beyond `|x| = 6`.
fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a >= 6.0 {
        return 1f64.copysign(x);
    }
    let x2 = a * a;
    let (mut term, mut sum) = (a, a);
    for k in 1..1000 {
        term *= 2.0 * x2 / (2 * k + 1) as f64;
        sum += term;
        if term <= sum * 1e-17 {
            break;
        }
    }
    (std::f64::consts::FRAC_2_SQRT_PI * (-x2).exp() * sum).copysign(x)
}

/// A binary float format: mantissa bits, exponent bias, largest finite value, whether
/// out-of-range values saturate (FP8 `__NV_SATFINITE`) instead of becoming infinite.
struct FloatFormat {
    mbits: i32,
    bias: i32,
    max: f64,
    saturate: bool,
}

fn float_format(e: Element) -> Option<FloatFormat> {
    Some(match e {
        Element::BF16 => FloatFormat {
            mbits: 7,
            bias: 127,
            max: f32::MAX as f64,
            saturate: false,
        },
        Element::F16 => FloatFormat {
            mbits: 10,
            bias: 15,
            max: 65504.0,
            saturate: false,
        },
        Element::E4M3 => FloatFormat {
            mbits: 3,
            bias: 7,
            max: 448.0,
            saturate: true,
        },
        Element::E5M2 => FloatFormat {
            mbits: 2,
            bias: 15,
            max: 57344.0,
            saturate: true,
        },
        _ => return None,
    })
}

fn round_float(x: f32, f: &FloatFormat) -> f64 {
    let x = x as f64;
    if x.is_nan() || x == 0.0 {
        return x;
    }
    if x.is_infinite() {
        return if f.saturate { f.max.copysign(x) } else { x };
    }
    let a = x.abs();
    let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let q = 2f64.powi(exp.max(1 - f.bias) - f.mbits);
    let r = (a / q).round_ties_even() * q;
    let r = if r > f.max {
        if f.saturate {
            f.max
        } else {
            f64::INFINITY
        }
    } else {
        r
    };
    r.copysign(x)
}

fn round_int(x: f32, lo: f64, hi: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        (x as f64).round_ties_even().max(lo).min(hi)
    }
}

/// The host mirror of the device conversion of a float to `e` (what [`Node::AuxStore`]
/// writes and [`ComputeOp::Convert`] computes), decoded back to f32: round to nearest even;
/// bf16 / f16 overflow to infinity; e4m3 / e5m2 saturate to ±448 / ±57344 (infinities
/// too, NaN stays NaN; `__NV_SATFINITE`); s8 / u8 / s32 saturate, NaN gives 0. Other types
/// return `x` unchanged.
pub fn round_to_element(e: Element, x: f32) -> f32 {
    if let Some(f) = float_format(e) {
        return round_float(x, &f) as f32;
    }
    match e {
        Element::S8 => round_int(x, -128.0, 127.0) as f32,
        Element::U8 => round_int(x, 0.0, 255.0) as f32,
        Element::S32 => round_int(x, i32::MIN as f64, i32::MAX as f64) as f32,
        _ => x,
    }
}

/// The little-endian bytes of `x` converted to `e` as the device stores it (see
/// [`round_to_element`]); for preparing inputs of fusion tests.
pub fn encode_element(e: Element, x: f32) -> Result<Vec<u8>, FusionError> {
    if !supported(e) {
        return Err(FusionError::UnsupportedElement {
            node: "encode_element".into(),
            elem: e,
        });
    }
    if let Some(f) = float_format(e) {
        let r = round_float(x, &f);
        let ebits = 8 * e.bytes() as i32 - 1 - f.mbits;
        let sign = u32::from(r.is_sign_negative()) << (ebits + f.mbits);
        let all_e = (1u32 << ebits) - 1;
        let bits = if r.is_nan() {
            // e4m3 has a single NaN encoding (S.1111.111), the others a quiet NaN.
            (all_e << f.mbits) | if e == Element::E4M3 { 7 } else { 1 << (f.mbits - 1) }
        } else if r.is_infinite() {
            sign | (all_e << f.mbits)
        } else if r == 0.0 {
            sign
        } else {
            let a = r.abs();
            let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            if exp < 1 - f.bias {
                sign | (a / 2f64.powi(1 - f.bias - f.mbits)) as u32
            } else {
                let mant = (a / 2f64.powi(exp - f.mbits)) as u32 - (1 << f.mbits);
                sign | (((exp + f.bias) as u32) << f.mbits) | mant
            }
        };
        let bytes = bits.to_le_bytes();
        return Ok(bytes[..e.bytes() as usize].to_vec());
    }
    let r = round_to_element(e, x);
    Ok(match e {
        Element::S8 => vec![(r as i8) as u8],
        Element::U8 => vec![r as u8],
        Element::S32 => (round_int(x, i32::MIN as f64, i32::MAX as f64) as i32)
            .to_le_bytes()
            .to_vec(),
        _ => x.to_le_bytes().to_vec(),
    })
}

/// The value of one element of type `e` stored little endian in `bytes` (the first
/// `e.bytes()` of them).
pub fn decode_element(e: Element, bytes: &[u8]) -> Result<f64, FusionError> {
    if !supported(e) {
        return Err(FusionError::UnsupportedElement {
            node: "decode_element".into(),
            elem: e,
        });
    }
    let need = e.bytes() as usize;
    if bytes.len() < need {
        return Err(FusionError::HostIndex {
            name: "decode_element".into(),
            index: need as i64 - 1,
            len: bytes.len(),
        });
    }
    let mut w = [0u8; 4];
    w[..need].copy_from_slice(&bytes[..need]);
    let bits = u32::from_le_bytes(w);
    if let Some(f) = float_format(e) {
        let ebits = 8 * need as i32 - 1 - f.mbits;
        let all_e = (1u32 << ebits) - 1;
        let neg = bits >> (ebits + f.mbits) & 1 == 1;
        let ef = (bits >> f.mbits) & all_e;
        let mant = bits & ((1 << f.mbits) - 1);
        let v = if e == Element::E4M3 && ef == all_e && mant == 7 {
            f64::NAN
        } else if ef == all_e && e != Element::E4M3 {
            if mant == 0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if ef == 0 {
            mant as f64 * 2f64.powi(1 - f.bias - f.mbits)
        } else {
            (mant + (1 << f.mbits)) as f64 * 2f64.powi(ef as i32 - f.bias - f.mbits)
        };
        return Ok(if neg { -v } else { v });
    }
    Ok(match e {
        Element::S8 => bytes[0] as i8 as f64,
        Element::U8 => bytes[0] as f64,
        Element::S32 => bits as i32 as f64,
        _ => f32::from_bits(bits) as f64,
    })
}
