//! [`FusionError`]: why a fusion tree, its arguments or its host inputs are refused.

use rcute_atom::Element;

use super::node::ScaleKind;

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
    /// The tree is deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
    #[error("the fusion tree is deeper than {max} levels")]
    TooDeep {
        /// [`MAX_DEPTH`](super::MAX_DEPTH).
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
