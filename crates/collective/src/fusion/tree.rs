//! [`Fusion`]: a validated fusion tree with its kernel ABI, and the two standard trees.

use std::collections::BTreeMap;

use rcute_atom::Element;

use super::error::FusionError;
use super::node::{Node, ScaleKind};
use super::params::{FusionParam, ParamKind};
use super::validate::{check_ident, source_use, validate, Leaf, SourceUse};

/// A validated fusion tree with its kernel ABI (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Fusion {
    pub(super) root: Node,
    pub(super) name: String,
    pub(super) params: Vec<FusionParam>,
    pub(super) source: SourceUse,
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
    /// s8, u8, s32), clamp bounds are ordered, and the tree is at most [`MAX_DEPTH`](super::MAX_DEPTH) deep.
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
    /// [`FusionCode::source_needed`](super::FusionCode::source_needed)).
    pub fn reads_source(&self) -> bool {
        self.source != SourceUse::Never
    }

    /// The fields of the parameter struct, in order: per leaf (sorted by name) the scalar or
    /// pointer, then `{name}_ld` (aux matrices) and `{name}_batch_stride` (batched vectors,
    /// aux matrices).
    pub fn params(&self) -> Vec<FusionParam> {
        self.params.clone()
    }

    /// Whether the tree loads or stores an auxiliary `(M, N, L)` matrix: the only nodes whose
    /// per-element accesses must stay inside the problem when broadcasts are staged.
    pub fn has_aux(&self) -> bool {
        fn walk(n: &Node) -> bool {
            matches!(n, Node::AuxLoad { .. } | Node::AuxStore { .. }) || n.children().into_iter().any(walk)
        }
        walk(&self.root)
    }
}
