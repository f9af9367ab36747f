//! The one error type of the layout algebra.
//!
//! Every undefined operation returns a [`LayoutError`] naming the operation and its
//! operands (printed in CuTe notation), and why it is undefined. Nothing in this crate
//! panics on user input.

use std::fmt;

/// Why an operation is undefined for its operands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// Shape and stride (or two operands) do not have the same nesting.
    #[error("operands are not congruent")]
    NotCongruent,
    /// Ranks do not fit (too many tiler modes, mode index out of range, ...).
    #[error("rank mismatch: {0}")]
    Rank(String),
    /// CuTe's stride or shape divisibility condition fails.
    #[error("divisibility condition violated: {0}")]
    Divisibility(String),
    /// The operation is only defined for static (generation-time) values here.
    #[error("needs static values: {0}")]
    NeedsStatic(String),
    /// The layout is not injective where the operation requires it.
    #[error("non-injective layout: {0}")]
    NonInjective(String),
    /// Division by zero or arithmetic overflow on static values.
    #[error("arithmetic error: {0}")]
    Arithmetic(String),
    /// A coordinate or index is out of the domain.
    #[error("out of domain: {0}")]
    OutOfDomain(String),
    /// Any other precondition.
    #[error("{0}")]
    Invalid(String),
}

/// An undefined layout-algebra operation: which operation, on what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    /// CuTe's name of the operation, e.g. `composition`.
    pub op: &'static str,
    /// The operands in CuTe notation.
    pub operands: Vec<String>,
    /// Why it failed.
    pub kind: ErrorKind,
}

impl LayoutError {
    /// A new error for `op` applied to `operands`.
    pub fn new(op: &'static str, operands: Vec<String>, kind: ErrorKind) -> Self {
        LayoutError { op, operands, kind }
    }
    /// Re-attribute an error raised by an inner step to the outer operation, keeping the
    /// inner operation's name in the message.
    pub fn within(self, op: &'static str, operands: Vec<String>) -> Self {
        if self.op == op && self.operands == operands {
            return self;
        }
        let inner = format!("in {}({}): {}", self.op, self.operands.join(", "), self.kind);
        LayoutError {
            op,
            operands,
            kind: ErrorKind::Invalid(inner),
        }
    }
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}): {}", self.op, self.operands.join(", "), self.kind)
    }
}

impl std::error::Error for LayoutError {}

/// Result alias of the layout crate.
pub type Result<T, E = LayoutError> = std::result::Result<T, E>;

/// Build an error for `op` with operands given as displayable values.
#[macro_export]
#[doc(hidden)]
macro_rules! lerr {
    ($op:expr, [$($x:expr),* $(,)?], $kind:expr) => {
        $crate::LayoutError::new($op, vec![$(format!("{}", $x)),*], $kind)
    };
}
