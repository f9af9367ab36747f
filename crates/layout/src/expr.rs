//! Symbolic integer expressions: the values of dynamic extents.
//!
//! A dynamic leaf of a shape or stride (`M`, `ldA`, `ceil_div(M,128)`, ...) is an [`Expr`].
//! Expressions are built by the algebra with light simplification (constant folding,
//! neutral elements, merging of constant factors), evaluate against an environment of
//! runtime values, and render as C++ for code generation.
//!
//! Semantics follow C++ integer arithmetic on `int64_t`, as CuTe's dynamic integers do:
//! `/` truncates toward zero and `%` takes the sign of the dividend.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A symbolic integer expression (cheap to clone: nodes are shared).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Expr(Arc<Node>);

/// The node kinds of an [`Expr`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    /// A runtime value whose number is known when the layout is built (CuTe's plain `int`).
    Lit(i64),
    /// A named runtime value, e.g. `M` or `ldA`.
    Var(String),
    /// Sum of the operands.
    Add(Expr, Expr),
    /// Product of the operands.
    Mul(Expr, Expr),
    /// Truncating division.
    Div(Expr, Expr),
    /// Remainder (sign of the dividend).
    Mod(Expr, Expr),
    /// `(a + b - 1) / b`.
    CeilDiv(Expr, Expr),
    /// Minimum.
    Min(Expr, Expr),
    /// Maximum.
    Max(Expr, Expr),
    /// Negation.
    Neg(Expr),
    /// Absolute value.
    Abs(Expr),
    /// Bitwise exclusive or (swizzles).
    Xor(Expr, Expr),
    /// Bitwise and (swizzle masks).
    And(Expr, Expr),
    /// Arithmetic shift right by the second operand.
    Shr(Expr, Expr),
    /// Shift left by the second operand.
    Shl(Expr, Expr),
}

/// Failure to evaluate an expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A variable had no value in the environment.
    #[error("no value for runtime variable `{0}`")]
    Unbound(String),
    /// Division or remainder by zero.
    #[error("division by zero while evaluating `{0}`")]
    DivByZero(String),
    /// The value does not fit in 64 bits.
    #[error("integer overflow while evaluating `{0}`")]
    Overflow(String),
}

impl Expr {
    fn new(n: Node) -> Self {
        Expr(Arc::new(n))
    }
    /// A named runtime variable.
    pub fn var(name: impl Into<String>) -> Self {
        Expr::new(Node::Var(name.into()))
    }
    /// A runtime value with a known number.
    pub fn lit(v: i64) -> Self {
        Expr::new(Node::Lit(v))
    }
    /// The node of this expression.
    pub fn node(&self) -> &Node {
        &self.0
    }
    /// The literal value, if this expression is a known number.
    pub fn as_lit(&self) -> Option<i64> {
        match *self.0 {
            Node::Lit(v) => Some(v),
            _ => None,
        }
    }

    /// `self + rhs`, simplified: sums are kept as a left-leaning chain of non-constant
    /// terms with all constants folded into one trailing literal.
    pub fn add(&self, rhs: &Expr) -> Expr {
        if let (Some(a), Some(b)) = (self.as_lit(), rhs.as_lit()) {
            return Expr::lit(a.wrapping_add(b));
        }
        fn collect(e: &Expr, terms: &mut Vec<Expr>, c: &mut i64) {
            match e.node() {
                Node::Lit(v) => *c = c.wrapping_add(*v),
                Node::Add(a, b) => {
                    collect(a, terms, c);
                    collect(b, terms, c);
                }
                _ => terms.push(e.clone()),
            }
        }
        let mut terms = Vec::new();
        let mut c = 0i64;
        collect(self, &mut terms, &mut c);
        collect(rhs, &mut terms, &mut c);
        let mut it = terms.into_iter();
        let Some(first) = it.next() else {
            return Expr::lit(c);
        };
        let mut acc = first;
        for t in it {
            acc = Expr::new(Node::Add(acc, t));
        }
        if c != 0 {
            acc = Expr::new(Node::Add(acc, Expr::lit(c)));
        }
        acc
    }

    /// `self - rhs`, simplified.
    pub fn sub(&self, rhs: &Expr) -> Expr {
        match rhs.as_lit() {
            Some(b) => self.add(&Expr::lit(b.wrapping_neg())),
            None => self.add(&rhs.neg()),
        }
    }

    /// `-self`.
    pub fn neg(&self) -> Expr {
        match self.node() {
            Node::Lit(v) => Expr::lit(v.wrapping_neg()),
            Node::Neg(x) => x.clone(),
            _ => Expr::new(Node::Neg(self.clone())),
        }
    }

    /// `self * rhs`, simplified (constant factors are merged and kept on the right).
    pub fn mul(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) => return Expr::lit(a.wrapping_mul(b)),
            (Some(0), _) | (_, Some(0)) => return Expr::lit(0),
            (Some(1), _) => return rhs.clone(),
            (_, Some(1)) => return self.clone(),
            (Some(_), None) => return rhs.mul(self),
            _ => {}
        }
        if let (Node::Mul(x, c1), Some(c2)) = (self.node(), rhs.as_lit()) {
            if let Some(c1) = c1.as_lit() {
                return x.mul(&Expr::lit(c1.wrapping_mul(c2)));
            }
        }
        Expr::new(Node::Mul(self.clone(), rhs.clone()))
    }

    /// Truncating `self / rhs`, simplified.
    pub fn div(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) if b != 0 => return Expr::lit(a.wrapping_div(b)),
            (Some(0), _) => return Expr::lit(0),
            (_, Some(1)) => return self.clone(),
            _ => {}
        }
        // (x * c1) / c2 with c2 | c1  ->  x * (c1 / c2)
        if let (Node::Mul(x, c1), Some(c2)) = (self.node(), rhs.as_lit()) {
            if let Some(c1) = c1.as_lit() {
                if c2 != 0 && c1 % c2 == 0 {
                    return x.mul(&Expr::lit(c1 / c2));
                }
            }
        }
        // (x / c1) / c2  ->  x / (c1 * c2) for positive constants
        if let (Node::Div(x, c1), Some(c2)) = (self.node(), rhs.as_lit()) {
            if let Some(c1) = c1.as_lit() {
                if c1 > 0 && c2 > 0 {
                    return x.div(&Expr::lit(c1.saturating_mul(c2)));
                }
            }
        }
        Expr::new(Node::Div(self.clone(), rhs.clone()))
    }

    /// `self % rhs`, simplified.
    pub fn rem(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) if b != 0 => return Expr::lit(a.wrapping_rem(b)),
            (Some(0), _) | (_, Some(1)) | (_, Some(-1)) => return Expr::lit(0),
            _ => {}
        }
        Expr::new(Node::Mod(self.clone(), rhs.clone()))
    }

    /// `(self + rhs - 1) / rhs`, simplified.
    pub fn ceil_div(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) if b != 0 => return Expr::lit(a.wrapping_add(b).wrapping_sub(1).wrapping_div(b)),
            (_, Some(1)) => return self.clone(),
            _ => {}
        }
        // ceil_div(ceil_div(x, a), b) == ceil_div(x, a*b) for positive a, b.
        if let (Node::CeilDiv(x, c1), Some(c2)) = (self.node(), rhs.as_lit()) {
            if let Some(c1) = c1.as_lit() {
                if c1 > 0 && c2 > 0 {
                    return x.ceil_div(&Expr::lit(c1.saturating_mul(c2)));
                }
            }
        }
        // ceil_div(x * c1, c2) with c2 | c1  ->  x * (c1 / c2)
        if let (Node::Mul(x, c1), Some(c2)) = (self.node(), rhs.as_lit()) {
            if let Some(c1) = c1.as_lit() {
                if c2 > 0 && c1 % c2 == 0 {
                    return x.mul(&Expr::lit(c1 / c2));
                }
            }
        }
        Expr::new(Node::CeilDiv(self.clone(), rhs.clone()))
    }

    /// `min(self, rhs)`, simplified.
    pub fn min(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) => return Expr::lit(a.min(b)),
            _ if self == rhs => return self.clone(),
            _ => {}
        }
        Expr::new(Node::Min(self.clone(), rhs.clone()))
    }

    /// `max(self, rhs)`, simplified.
    pub fn max(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) => return Expr::lit(a.max(b)),
            _ if self == rhs => return self.clone(),
            _ => {}
        }
        Expr::new(Node::Max(self.clone(), rhs.clone()))
    }

    /// `abs(self)`.
    pub fn abs(&self) -> Expr {
        match self.node() {
            Node::Lit(v) => Expr::lit(v.wrapping_abs()),
            Node::Abs(_) => self.clone(),
            _ => Expr::new(Node::Abs(self.clone())),
        }
    }

    /// `self ^ rhs` (bitwise exclusive or), simplified.
    pub fn xor(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) => Expr::lit(a ^ b),
            (Some(0), _) => rhs.clone(),
            (_, Some(0)) => self.clone(),
            _ => Expr::new(Node::Xor(self.clone(), rhs.clone())),
        }
    }

    /// `self & rhs` (bitwise and), simplified.
    pub fn and(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) => Expr::lit(a & b),
            (Some(0), _) | (_, Some(0)) => Expr::lit(0),
            (_, Some(-1)) => self.clone(),
            (Some(-1), _) => rhs.clone(),
            _ => Expr::new(Node::And(self.clone(), rhs.clone())),
        }
    }

    /// `self >> rhs` (arithmetic shift right), simplified.
    pub fn shr(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) if (0..64).contains(&b) => Expr::lit(a >> b),
            (Some(0), _) => Expr::lit(0),
            (_, Some(0)) => self.clone(),
            _ => Expr::new(Node::Shr(self.clone(), rhs.clone())),
        }
    }

    /// `self << rhs`, simplified.
    pub fn shl(&self, rhs: &Expr) -> Expr {
        match (self.as_lit(), rhs.as_lit()) {
            (Some(a), Some(b)) if (0..64).contains(&b) => Expr::lit(a.wrapping_shl(b as u32)),
            (Some(0), _) => Expr::lit(0),
            (_, Some(0)) => self.clone(),
            _ => Expr::new(Node::Shl(self.clone(), rhs.clone())),
        }
    }

    /// The variables this expression mentions, sorted and unique.
    pub fn vars(&self) -> Vec<String> {
        fn walk(e: &Expr, out: &mut Vec<String>) {
            match e.node() {
                Node::Lit(_) => {}
                Node::Var(v) => out.push(v.clone()),
                Node::Neg(a) | Node::Abs(a) => walk(a, out),
                Node::Add(a, b)
                | Node::Mul(a, b)
                | Node::Div(a, b)
                | Node::Mod(a, b)
                | Node::CeilDiv(a, b)
                | Node::Min(a, b)
                | Node::Max(a, b)
                | Node::Xor(a, b)
                | Node::And(a, b)
                | Node::Shr(a, b)
                | Node::Shl(a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
        let mut v = Vec::new();
        walk(self, &mut v);
        v.sort();
        v.dedup();
        v
    }

    /// Evaluate with the runtime values in `env`.
    pub fn eval(&self, env: &Env) -> Result<i64, EvalError> {
        let ovf = || EvalError::Overflow(self.to_string());
        let dz = || EvalError::DivByZero(self.to_string());
        Ok(match self.node() {
            Node::Lit(v) => *v,
            Node::Var(name) => env.get(name).ok_or_else(|| EvalError::Unbound(name.clone()))?,
            Node::Add(a, b) => a.eval(env)?.checked_add(b.eval(env)?).ok_or_else(ovf)?,
            Node::Mul(a, b) => a.eval(env)?.checked_mul(b.eval(env)?).ok_or_else(ovf)?,
            Node::Div(a, b) => {
                let d = b.eval(env)?;
                if d == 0 {
                    return Err(dz());
                }
                a.eval(env)?.checked_div(d).ok_or_else(ovf)?
            }
            Node::Mod(a, b) => {
                let d = b.eval(env)?;
                if d == 0 {
                    return Err(dz());
                }
                a.eval(env)?.checked_rem(d).ok_or_else(ovf)?
            }
            Node::CeilDiv(a, b) => {
                let d = b.eval(env)?;
                if d == 0 {
                    return Err(dz());
                }
                let n = a.eval(env)?.checked_add(d - 1).ok_or_else(ovf)?;
                n.checked_div(d).ok_or_else(ovf)?
            }
            Node::Min(a, b) => a.eval(env)?.min(b.eval(env)?),
            Node::Max(a, b) => a.eval(env)?.max(b.eval(env)?),
            Node::Neg(a) => a.eval(env)?.checked_neg().ok_or_else(ovf)?,
            Node::Abs(a) => a.eval(env)?.checked_abs().ok_or_else(ovf)?,
            Node::Xor(a, b) => a.eval(env)? ^ b.eval(env)?,
            Node::And(a, b) => a.eval(env)? & b.eval(env)?,
            Node::Shr(a, b) => {
                let k = b.eval(env)?;
                if !(0..64).contains(&k) {
                    return Err(ovf());
                }
                a.eval(env)? >> k
            }
            Node::Shl(a, b) => {
                let k = b.eval(env)?;
                if !(0..63).contains(&k) {
                    return Err(ovf());
                }
                a.eval(env)?.checked_mul(1i64 << k).ok_or_else(ovf)?
            }
        })
    }

    /// Render as a C++ expression over `int64_t`-compatible names.
    ///
    /// `ceil_div`, `min` and `max` use the helpers `rc_ceil_div`, `rc_min` and `rc_max`
    /// that the emitted CUDA prelude defines.
    pub fn to_cpp(&self) -> String {
        let mut s = String::new();
        self.write_prec(&mut s, 0, true);
        s
    }

    // Precedence levels: 0 = top, 1 = additive, 2 = multiplicative, 3 = unary/atom.
    // Bit operations are parenthesised everywhere except at the top, and their operands
    // are atoms or parenthesised: C's precedence of `^`, `&` and shifts is easy to misread.
    fn write_prec(&self, out: &mut String, ctx: u8, cpp: bool) {
        use std::fmt::Write;
        let (prec, needs) = match self.node() {
            Node::Xor(..) | Node::And(..) | Node::Shr(..) | Node::Shl(..) => (3, ctx > 0),
            Node::Add(..) => (1, ctx > 1),
            Node::Mul(..) | Node::Div(..) | Node::Mod(..) => (2, ctx > 2),
            _ => (3, false),
        };
        if needs {
            out.push('(');
        }
        match self.node() {
            Node::Lit(v) => {
                if *v < 0 && ctx > 0 {
                    let _ = write!(out, "({v})");
                } else {
                    let _ = write!(out, "{v}");
                }
            }
            Node::Var(n) => out.push_str(n),
            Node::Add(a, b) => {
                a.write_prec(out, prec, cpp);
                match b.node() {
                    Node::Lit(v) if *v < 0 => {
                        let _ = write!(out, " - {}", v.unsigned_abs());
                    }
                    Node::Neg(x) => {
                        out.push_str(" - ");
                        x.write_prec(out, prec + 1, cpp);
                    }
                    _ => {
                        out.push_str(" + ");
                        b.write_prec(out, prec, cpp);
                    }
                }
            }
            Node::Mul(a, b) | Node::Div(a, b) | Node::Mod(a, b) => {
                let op = match self.node() {
                    Node::Mul(..) => " * ",
                    Node::Div(..) => " / ",
                    _ => " % ",
                };
                a.write_prec(out, prec, cpp);
                out.push_str(op);
                // Right operand of a non-associative op needs a tighter context.
                b.write_prec(out, prec + 1, cpp);
            }
            Node::CeilDiv(a, b) | Node::Min(a, b) | Node::Max(a, b) => {
                let f = match (self.node(), cpp) {
                    (Node::CeilDiv(..), true) => "rc_ceil_div",
                    (Node::CeilDiv(..), false) => "ceil_div",
                    (Node::Min(..), true) => "rc_min",
                    (Node::Min(..), false) => "min",
                    (_, true) => "rc_max",
                    (_, false) => "max",
                };
                out.push_str(f);
                out.push('(');
                a.write_prec(out, 0, cpp);
                out.push_str(if cpp { ", " } else { "," });
                b.write_prec(out, 0, cpp);
                out.push(')');
            }
            Node::Neg(a) => {
                out.push('-');
                a.write_prec(out, 3, cpp);
            }
            Node::Abs(a) => {
                out.push_str(if cpp { "rc_abs(" } else { "abs(" });
                a.write_prec(out, 0, cpp);
                out.push(')');
            }
            Node::Xor(a, b) | Node::And(a, b) | Node::Shr(a, b) | Node::Shl(a, b) => {
                let op = match self.node() {
                    Node::Xor(..) => " ^ ",
                    Node::And(..) => " & ",
                    Node::Shr(..) => " >> ",
                    _ => " << ",
                };
                a.write_prec(out, 3, cpp);
                out.push_str(op);
                b.write_prec(out, 3, cpp);
            }
        }
        if needs {
            out.push(')');
        }
    }
}

impl fmt::Display for Expr {
    /// Compact notation for layouts: `ceil_div(M,128)`, `ldA*64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_prec(&mut s, 0, false);
        // Layout notation is written without blanks.
        f.write_str(&s.replace(' ', ""))
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({self})")
    }
}

/// Runtime values of named variables, for [`Expr::eval`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Env(BTreeMap<String, i64>);

impl Env {
    /// An empty environment.
    pub fn new() -> Self {
        Self::default()
    }
    /// Bind `name` to `value` (builder style).
    pub fn with(mut self, name: impl Into<String>, value: i64) -> Self {
        self.0.insert(name.into(), value);
        self
    }
    /// Bind `name` to `value`.
    pub fn set(&mut self, name: impl Into<String>, value: i64) {
        self.0.insert(name.into(), value);
    }
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.get(name).copied()
    }
}

impl<S: Into<String>, const N: usize> From<[(S, i64); N]> for Env {
    fn from(v: [(S, i64); N]) -> Self {
        let mut e = Env::new();
        for (k, x) in v {
            e.set(k, x);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simplifies_and_renders() {
        let m = Expr::var("M");
        let e = m.mul(&Expr::lit(4)).mul(&Expr::lit(8));
        assert_eq!(e.to_string(), "M*32");
        assert_eq!(m.ceil_div(&Expr::lit(1)), m);
        assert_eq!(
            m.ceil_div(&Expr::lit(4)).ceil_div(&Expr::lit(8)).to_string(),
            "ceil_div(M,32)"
        );
        let k = Expr::var("K");
        let sum = m.add(&k).mul(&Expr::lit(2));
        assert_eq!(sum.to_cpp(), "(M + K) * 2");
        assert_eq!(m.sub(&Expr::lit(3)).to_cpp(), "M - 3");
        assert_eq!(m.div(&k.mul(&Expr::lit(2))).to_cpp(), "M / (K * 2)");
    }

    #[test]
    fn evaluates_with_cpp_semantics() {
        let env = Env::from([("M", -7), ("N", 2)]);
        let m = Expr::var("M");
        let n = Expr::var("N");
        assert_eq!(m.div(&n).eval(&env), Ok(-3));
        assert_eq!(m.rem(&n).eval(&env), Ok(-1));
        assert_eq!(Expr::var("X").eval(&env), Err(EvalError::Unbound("X".into())));
        assert!(matches!(
            m.div(&Expr::var("Z")).eval(&env.clone().with("Z", 0)),
            Err(EvalError::DivByZero(_))
        ));
    }
}
