//! Integers that are either static (known when a kernel is generated) or dynamic
//! (runtime values, kept symbolic).
//!
//! The arithmetic follows CuTe's mixed static/dynamic rules: static op static is static;
//! anything with a dynamic operand is dynamic, except the absorbing cases CuTe special-cases
//! (`0 * x`, `x * 0`, `0 / x`, `0 % x` and `x % 1` are static zero).
//!
//! Deliberate rule (documented difference): named runtime variables are assumed to be
//! non-negative, as extents, leading dimensions and batch strides are. This lets
//! `abs(x)` fold to `x` and `signum(x)` to `1` for such expressions; CuTe evaluates the
//! same functions at run time and gets the same values for non-negative inputs.

use crate::expr::{Env, EvalError, Expr, Node};
use std::fmt;

/// A static or dynamic integer leaf of a shape, stride or coordinate.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Int {
    /// Known at kernel-generation time (CuTe's `Int<N>` / `_N`).
    Static(i64),
    /// A runtime value (CuTe's `int`), symbolic unless it is a literal.
    Dynamic(Expr),
}

/// Shorthand for a static integer.
pub const fn s(v: i64) -> Int {
    Int::Static(v)
}

/// Shorthand for a named dynamic integer.
pub fn d(name: &str) -> Int {
    Int::Dynamic(Expr::var(name))
}

impl Int {
    /// A dynamic value with a known number (CuTe's plain `int`).
    pub fn dyn_lit(v: i64) -> Int {
        Int::Dynamic(Expr::lit(v))
    }
    /// The value if static.
    pub fn as_static(&self) -> Option<i64> {
        match self {
            Int::Static(v) => Some(*v),
            Int::Dynamic(_) => None,
        }
    }
    /// The value if known (static, or a dynamic literal).
    pub fn known(&self) -> Option<i64> {
        match self {
            Int::Static(v) => Some(*v),
            Int::Dynamic(e) => e.as_lit(),
        }
    }
    /// True for a static integer.
    pub fn is_static(&self) -> bool {
        matches!(self, Int::Static(_))
    }
    /// True when this is the static constant `v` (CuTe's `is_constant<v>`).
    pub fn is_const(&self, v: i64) -> bool {
        *self == Int::Static(v)
    }
    /// The symbolic form of this value.
    pub fn expr(&self) -> Expr {
        match self {
            Int::Static(v) => Expr::lit(*v),
            Int::Dynamic(e) => e.clone(),
        }
    }
    /// Evaluate to a number with the runtime values in `env`.
    pub fn eval(&self, env: &Env) -> Result<i64, EvalError> {
        match self {
            Int::Static(v) => Ok(*v),
            Int::Dynamic(e) => e.eval(env),
        }
    }
    /// Render as a C++ expression (static values are plain literals).
    pub fn to_cpp(&self) -> String {
        match self {
            Int::Static(v) => v.to_string(),
            Int::Dynamic(e) => e.to_cpp(),
        }
    }

    fn lift2(&self, rhs: &Int, st: impl Fn(i64, i64) -> i64, dy: impl Fn(&Expr, &Expr) -> Expr) -> Int {
        match (self, rhs) {
            (Int::Static(a), Int::Static(b)) => Int::Static(st(*a, *b)),
            _ => Int::Dynamic(dy(&self.expr(), &rhs.expr())),
        }
    }

    /// `self + rhs`.
    pub fn add(&self, rhs: &Int) -> Int {
        self.lift2(rhs, i64::wrapping_add, Expr::add)
    }
    /// `self - rhs`.
    pub fn sub(&self, rhs: &Int) -> Int {
        self.lift2(rhs, i64::wrapping_sub, Expr::sub)
    }
    /// `self * rhs` (static zero absorbs).
    pub fn mul(&self, rhs: &Int) -> Int {
        if self.is_const(0) || rhs.is_const(0) {
            return s(0);
        }
        self.lift2(rhs, i64::wrapping_mul, Expr::mul)
    }
    /// Truncating `self / rhs`; `None` on a known division by zero.
    pub fn div(&self, rhs: &Int) -> Option<Int> {
        if rhs.known() == Some(0) {
            return None;
        }
        if self.is_const(0) {
            return Some(s(0));
        }
        Some(self.lift2(rhs, i64::wrapping_div, Expr::div))
    }
    /// `self % rhs`; `None` on a known division by zero.
    pub fn rem(&self, rhs: &Int) -> Option<Int> {
        if rhs.known() == Some(0) {
            return None;
        }
        if self.is_const(0) || rhs.is_const(1) || rhs.is_const(-1) {
            return Some(s(0));
        }
        Some(self.lift2(rhs, i64::wrapping_rem, Expr::rem))
    }
    /// `(self + rhs - 1) / rhs`, as CuTe's `ceil_div` on integers.
    pub fn ceil_div(&self, rhs: &Int) -> Option<Int> {
        if rhs.known() == Some(0) {
            return None;
        }
        Some(match (self, rhs) {
            (Int::Static(a), Int::Static(b)) => Int::Static(a.wrapping_add(*b).wrapping_sub(1).wrapping_div(*b)),
            _ => Int::Dynamic(self.expr().ceil_div(&rhs.expr())),
        })
    }
    /// `min(self, rhs)`.
    pub fn min(&self, rhs: &Int) -> Int {
        self.lift2(rhs, |a, b| a.min(b), Expr::min)
    }
    /// `max(self, rhs)`.
    pub fn max(&self, rhs: &Int) -> Int {
        self.lift2(rhs, |a, b| a.max(b), Expr::max)
    }
    /// `abs(self)`; non-negative dynamic expressions fold to themselves.
    pub fn abs(&self) -> Int {
        match self {
            Int::Static(v) => Int::Static(v.wrapping_abs()),
            Int::Dynamic(e) if is_nonneg(e) => self.clone(),
            Int::Dynamic(e) => Int::Dynamic(e.abs()),
        }
    }
    /// `signum(self)`; for a non-negative dynamic `x` this is `1`, which gives the same
    /// value wherever CuTe multiplies it with a function of `x` that vanishes at 0.
    pub fn signum(&self) -> Int {
        match self {
            Int::Static(v) => Int::Static(v.signum()),
            Int::Dynamic(e) => match e.as_lit() {
                Some(v) => Int::dyn_lit(v.signum()),
                None => Int::dyn_lit(1),
            },
        }
    }
    /// Greatest common divisor of static values; `None` if either is dynamic.
    pub fn gcd(&self, rhs: &Int) -> Option<Int> {
        match (self, rhs) {
            (Int::Static(a), Int::Static(b)) => Some(Int::Static(gcd(*a, *b))),
            _ => None,
        }
    }
    /// Negation.
    pub fn neg(&self) -> Int {
        match self {
            Int::Static(v) => Int::Static(v.wrapping_neg()),
            Int::Dynamic(e) => Int::Dynamic(e.neg()),
        }
    }
    /// `self < rhs` when it is decidable at generation time (both static).
    pub fn static_lt(&self, rhs: &Int) -> Option<bool> {
        Some(self.as_static()? < rhs.as_static()?)
    }
}

/// Non-negative gcd of two integers (gcd(0, 0) = 0).
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// True when an expression is non-negative under the rule that variables are non-negative.
pub(crate) fn is_nonneg(e: &Expr) -> bool {
    match e.node() {
        Node::Lit(v) => *v >= 0,
        Node::Var(_) | Node::Abs(_) => true,
        Node::Neg(_) => false,
        Node::Add(a, b)
        | Node::Mul(a, b)
        | Node::Div(a, b)
        | Node::Mod(a, b)
        | Node::CeilDiv(a, b)
        | Node::Min(a, b)
        | Node::Max(a, b)
        | Node::Xor(a, b) => is_nonneg(a) && is_nonneg(b),
        Node::And(a, b) => is_nonneg(a) || is_nonneg(b),
        Node::Shr(a, _) | Node::Shl(a, _) => is_nonneg(a),
    }
}

impl From<i64> for Int {
    fn from(v: i64) -> Self {
        Int::Static(v)
    }
}
impl From<i32> for Int {
    fn from(v: i32) -> Self {
        Int::Static(v as i64)
    }
}
impl From<usize> for Int {
    fn from(v: usize) -> Self {
        Int::Static(v as i64)
    }
}
impl From<Expr> for Int {
    fn from(e: Expr) -> Self {
        Int::Dynamic(e)
    }
}
impl From<&str> for Int {
    fn from(name: &str) -> Self {
        d(name)
    }
}

impl fmt::Display for Int {
    /// Plain notation (`8`, `M`); the alternate form `{:#}` prints static integers with
    /// CuTe's leading underscore (`_8`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Int::Static(v) if f.alternate() => write!(f, "_{v}"),
            Int::Static(v) => write!(f, "{v}"),
            Int::Dynamic(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Debug for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_dynamic_rules() {
        let m = d("M");
        assert_eq!(s(3).mul(&s(4)), s(12));
        assert_eq!(s(0).mul(&m), s(0));
        assert!(!s(1).mul(&m).is_static());
        assert_eq!(m.rem(&s(1)), Some(s(0)));
        assert_eq!(s(8).div(&s(0)), None);
        assert_eq!(m.ceil_div(&s(32)).unwrap().to_string(), "ceil_div(M,32)");
        assert_eq!(m.abs(), m);
        assert_eq!(format!("{:#}", s(4)), "_4");
        assert_eq!(s(-7).ceil_div(&s(2)), Some(s(-3)));
    }
}
