//! The fusion tree: [`Node`]s, their element-wise [`ComputeOp`]s, builders and operators,
//! and the [`ScaleKind`] of the scaled-mm trees.

use std::fmt::Write as _;

use rcute_atom::Element;

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
    /// Round to the type as a store would (see [`round_to_element`](super::round_to_element)) and back to float.
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

    /// The operation's name in [`Fusion::describe`](super::Fusion::describe), e.g. `"multiply_add"`, `"clamp[-1.0,1.0]"`,
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
    pub(super) fn label(&self) -> String {
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

/// How a scale of [`Fusion::scaled_mm`](super::Fusion::scaled_mm) is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleKind {
    /// One f32 scale for the whole tensor, read from device memory.
    Scalar,
    /// One f32 scale per row `m` (per token): A's scale only.
    PerRow,
    /// One f32 scale per column `n` (per output channel): B's scale only.
    PerCol,
}
