//! Evaluation of parsed layout-algebra expressions ([`crate::parse`]) with the algebra:
//! [`eval_str`] reads and evaluates a whole expression, [`Value::notation`] prints the
//! result in CuTe notation.
//!
//! Calls use CuTe's names and argument order:
//!
//! | call | result |
//! |---|---|
//! | `composition(A,B)` | `A ∘ B`; `B` a layout or a tiler |
//! | `complement(A)`, `complement(A,cotarget)` | cotarget an integer or a shape |
//! | `right_inverse(A)`, `left_inverse(A)` | layouts |
//! | `coalesce(A)`, `coalesce(A,profile)`, `filter(A)` | layouts |
//! | `logical_divide`, `zipped_divide`, `tiled_divide`, `flat_divide` `(A,T)` | `T` a tiler or layout |
//! | `logical_product`, `zipped_product`, `tiled_product`, `flat_product` `(A,B)` | `B` a tiler or layout |
//! | `blocked_product(A,B)`, `raked_product(A,B)` | `B` a layout |
//! | `tile_to_shape(A,shape)`, `tile_to_shape(A,shape,order)` | layout |
//! | `make_ordered_layout(shape,order)`, `make_layout_like(A)` | layout |
//! | `max_common_layout(A,B)` / `max_common_vector(A,B)` | layout / integer |
//! | `upcast(A,N)`, `downcast(A,N)` | `N` a static integer |
//! | `size(A)`, `cosize(A)`, `rank(A)`, `depth(A)` | integers |
//! | `shape(A)`, `stride(A)` | tuples |
//! | `get(A,i,...)` | the sub-layout (or sub-tuple) at mode path `i,...` |
//!
//! Calls nest: `size(zipped_divide((128,64),[32,16]))` prints `8192`.
//!
//! Swizzles: `composition(Sw<3,3,3>, (8,64):(64,1))` is the composed layout
//! `Sw<3,3,3> o 0 o (8,64):(64,1)`; `composition(L, Sw<B,M,S>)` composes a layout with a
//! swizzle; a bare `Sw<B,M,S>` where a layout is expected is CuTe's `make_layout(Sw)`
//! (the swizzle over its active range). Composed layouts go through the same calls
//! (divides, products, `tile_to_shape`, `coalesce`, `get`, `size`, ...), as CuTe's
//! functions on `ComposedLayout` do, and `--table` / `--svg` show the swizzled offsets.
//!
//! ## Exact mode (`--exact`): CuTe's static/dynamic spelling
//!
//! By default every integer literal is static, whether written `8` or `_8`, and
//! results print without underscores. With `--exact` (library:
//! [`eval_str_exact`] and [`Value::notation_exact`]) the input and output
//! use CuTe's own spelling, as CuTe's `print` writes it:
//!
//! * `_8` is a static integer (CuTe's `Int<8>{}`);
//! * a plain `8` is a dynamic integer whose value is known (CuTe's runtime `int`,
//!   [`crate::Int::dyn_lit`]); names such as `M` stay symbolic dynamic extents;
//! * results print static integers with the underscore and dynamic ones plain.
//!
//! ```text
//! $ rcute layout --exact 'zipped_divide((128,64):(_1,128),[_32,_16])'
//! ((_32,_16),(4,4)):((_1,128),(_32,2048))
//! ```
//!
//! Arithmetic follows CuTe's mixed rules: static with static stays static, anything
//! with a dynamic operand is dynamic (`4 * _2` is the dynamic `8`), and the algebra
//! rejects what CuTe rejects at compile time for dynamic operands (e.g. the complement
//! of a layout with dynamic strides of rank > 1). The template arguments of `upcast`,
//! `downcast` and `get` are compile-time values in CuTe; either spelling is accepted there.
//! `crates/layout/tests/cute_oracle_dynamic.rs` checks this mode against CuTe's headers.
//!
//! ```
//! use rcute_layout::eval::{eval_str, eval_str_exact, Value};
//!
//! let v = eval_str("zipped_divide((128,64),[32,16])").unwrap();
//! assert_eq!(v.notation(), "((32,16),(4,4)):((1,128),(32,2048))");
//! assert!(matches!(v, Value::Layout(_)));
//! assert_eq!(eval_str("size(complement(4:2, 24))").unwrap().notation(), "6");
//!
//! // CuTe's own spelling: `_N` static, a plain `N` a dynamic int.
//! let v = eval_str_exact("zipped_divide((128,64):(_1,128),[_32,_16])").unwrap();
//! assert_eq!(v.notation_exact(), "((_32,_16),(4,4)):((_1,128),(_32,2048))");
//!
//! // Errors are typed and point into the input.
//! let input = "composition(4:1, frob(2))";
//! let e = eval_str(input).unwrap_err();
//! assert_eq!(e.pos(), Some(17));
//! assert!(e.render(input).starts_with("error: unknown function"));
//! ```

use crate::algebra::Tiler;
use crate::composed::compose_with_swizzle;
use crate::parse::{parse_with, render_error, Expr, ExprKind, Mode};
use crate::{s, AnyLayout, ComposedLayout, Int, IntTuple, Layout, LayoutError, Swizzle, Tuple};
use std::fmt;

/// The value of an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A layout (a `SHAPE:STRIDE` literal or a computed layout).
    Layout(Layout),
    /// A swizzled layout `Sw<B,M,S> o offset o layout`.
    Composed(ComposedLayout),
    /// A literal without stride: `make_layout(shape)` where a layout is expected, the
    /// shape itself where a shape, profile or integer is expected.
    Shape(IntTuple),
    /// A computed integer (`size`, `cosize`, `rank`, ...).
    Int(Int),
    /// A computed tuple (`shape`, `stride`, `get` on those).
    Tuple(IntTuple),
    /// A by-mode tiler `[...]`.
    Tiler(Tiler),
    /// `_`.
    Underscore,
    /// A swizzle `Sw<B,M,S>`.
    Swizzle(Swizzle),
}

/// Why an expression could not be read or evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// Malformed input ([`crate::parse::ParseError`]).
    Parse {
        /// Byte position.
        pos: usize,
        /// What was expected.
        msg: String,
    },
    /// Wrong kind or number of arguments, unknown function: points into the input.
    Usage {
        /// Byte position of the offending expression.
        pos: usize,
        /// What is wrong.
        msg: String,
    },
    /// The operation is undefined for its operands.
    Layout(LayoutError),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::Parse { pos, msg } | EvalError::Usage { pos, msg } => write!(f, "{msg} at {pos}"),
            EvalError::Layout(e) => write!(f, "{e}"),
        }
    }
}

impl EvalError {
    /// The byte position the error points at, if it has one.
    pub fn pos(&self) -> Option<usize> {
        match self {
            EvalError::Parse { pos, .. } | EvalError::Usage { pos, .. } => Some(*pos),
            EvalError::Layout(_) => None,
        }
    }

    /// The message for a terminal: `error: ...`, and for positioned errors `input` with a
    /// caret under the position ([`render_error`]).
    pub fn render(&self, input: &str) -> String {
        match self {
            EvalError::Parse { pos, msg } | EvalError::Usage { pos, msg } => render_error(input, *pos, msg),
            EvalError::Layout(e) => format!("error: {e}\n"),
        }
    }
}

impl From<crate::parse::ParseError> for EvalError {
    fn from(e: crate::parse::ParseError) -> Self {
        EvalError::Parse { pos: e.pos, msg: e.msg }
    }
}

impl std::error::Error for EvalError {}

impl From<LayoutError> for EvalError {
    fn from(e: LayoutError) -> Self {
        EvalError::Layout(e)
    }
}

type R<T> = Result<T, EvalError>;

fn usage<T>(pos: usize, msg: impl Into<String>) -> R<T> {
    Err(EvalError::Usage { pos, msg: msg.into() })
}

impl Value {
    /// A short description of the kind of value, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Layout(_) => "a layout",
            Value::Composed(_) => "a composed layout",
            Value::Shape(_) => "a shape",
            Value::Int(_) => "an integer",
            Value::Tuple(_) => "a tuple",
            Value::Tiler(_) => "a tiler",
            Value::Underscore => "'_'",
            Value::Swizzle(_) => "a swizzle",
        }
    }

    /// The value as a layout, if it is one (a bare shape or an integer `n` is
    /// `make_layout(shape)`, i.e. `n:1`).
    pub fn as_layout(&self) -> Option<Layout> {
        match self {
            Value::Layout(l) => Some(l.clone()),
            Value::Shape(t) | Value::Tuple(t) => Some(Layout::col_major(t.clone())),
            Value::Int(n) => Some(Layout::col_major(Tuple::Leaf(n.clone()))),
            _ => None,
        }
    }

    /// The value as a plain or composed layout (a swizzle is CuTe's
    /// `make_layout(Swizzle)`, the swizzle over its active range).
    pub fn as_any(&self) -> Option<AnyLayout> {
        match self {
            Value::Composed(c) => Some(AnyLayout::Composed(c.clone())),
            Value::Swizzle(sw) => Some(sw.as_layout()),
            _ => self.as_layout().map(AnyLayout::Plain),
        }
    }

    /// A value from a plain or composed layout.
    pub fn from_any(a: AnyLayout) -> Value {
        match a {
            AnyLayout::Plain(l) => Value::Layout(l),
            AnyLayout::Composed(c) => Value::Composed(c),
        }
    }

    /// The value as an integer tuple (shape, profile, order, cotarget).
    pub fn as_tuple(&self) -> Option<IntTuple> {
        match self {
            Value::Shape(t) | Value::Tuple(t) => Some(t.clone()),
            Value::Int(n) => Some(Tuple::Leaf(n.clone())),
            _ => None,
        }
    }

    /// The value as a tiler: `[...]`, `_`, an integer `n` (meaning `n:1`) or a layout.
    pub fn as_tiler(&self) -> Option<Tiler> {
        match self {
            Value::Tiler(t) => Some(t.clone()),
            Value::Underscore => Some(Tiler::Underscore),
            Value::Int(n) | Value::Shape(Tuple::Leaf(n)) => Some(Tiler::Int(n.clone())),
            Value::Layout(l) => Some(Tiler::Layout(l.clone())),
            Value::Shape(t) => Some(Tiler::Layout(Layout::col_major(t.clone()))),
            Value::Tuple(_) | Value::Swizzle(_) | Value::Composed(_) => None,
        }
    }

    /// The value printed in CuTe notation (static integers without underscores); a
    /// bare shape prints as the layout it stands for.
    pub fn notation(&self) -> String {
        match self {
            Value::Layout(l) => l.to_string(),
            Value::Composed(c) => c.to_string(),
            Value::Shape(t) => Layout::col_major(t.clone()).to_string(),
            Value::Int(n) => n.to_string(),
            Value::Tuple(t) => t.to_string(),
            Value::Tiler(t) => t.to_string(),
            Value::Underscore => "_".into(),
            Value::Swizzle(sw) => sw.to_string(),
        }
    }

    /// The value as CuTe's `print` writes it: static integers with a leading underscore
    /// (`_8`), dynamic ones plain (`8`, `M`). This is the output of `--exact`.
    pub fn notation_exact(&self) -> String {
        match self {
            Value::Layout(l) => format!("{l:#}"),
            Value::Composed(c) => format!("{c:#}"),
            Value::Shape(t) => format!("{:#}", Layout::col_major(t.clone())),
            Value::Int(n) => format!("{n:#}"),
            Value::Tuple(t) => format!("{t:#}"),
            Value::Tiler(t) => tiler_exact(t),
            Value::Underscore => "_".into(),
            Value::Swizzle(sw) => sw.to_string(),
        }
    }
}

/// A tiler with CuTe's underscores on static integers.
fn tiler_exact(t: &Tiler) -> String {
    match t {
        Tiler::Layout(l) => format!("{l:#}"),
        Tiler::Int(n) => format!("{n:#}"),
        Tiler::Underscore => "_".into(),
        Tiler::Tuple(v) => format!("[{}]", v.iter().map(tiler_exact).collect::<Vec<_>>().join(",")),
    }
}

/// The functions the evaluator knows, with their arities (min, max).
pub const FUNCTIONS: &[(&str, usize, usize)] = &[
    ("composition", 2, 2),
    ("complement", 1, 2),
    ("right_inverse", 1, 1),
    ("left_inverse", 1, 1),
    ("coalesce", 1, 2),
    ("filter", 1, 1),
    ("logical_divide", 2, 2),
    ("zipped_divide", 2, 2),
    ("tiled_divide", 2, 2),
    ("flat_divide", 2, 2),
    ("logical_product", 2, 2),
    ("zipped_product", 2, 2),
    ("tiled_product", 2, 2),
    ("flat_product", 2, 2),
    ("blocked_product", 2, 2),
    ("raked_product", 2, 2),
    ("tile_to_shape", 2, 3),
    ("make_ordered_layout", 2, 2),
    ("make_layout_like", 1, 1),
    ("max_common_vector", 2, 2),
    ("max_common_layout", 2, 2),
    ("upcast", 2, 2),
    ("downcast", 2, 2),
    ("size", 1, 1),
    ("cosize", 1, 1),
    ("rank", 1, 1),
    ("depth", 1, 1),
    ("shape", 1, 1),
    ("stride", 1, 1),
    ("get", 1, usize::MAX),
];

/// Evaluate an expression.
pub fn eval(e: &Expr) -> R<Value> {
    match &e.kind {
        ExprKind::Layout { shape, stride: None } => Ok(Value::Shape(shape.clone())),
        ExprKind::Layout {
            shape,
            stride: Some(st),
        } => Ok(Value::Layout(Layout::new(shape.clone(), st.clone())?)),
        ExprKind::Underscore => Ok(Value::Underscore),
        ExprKind::Swizzle(b, m, sh) => {
            let narrow = |v: i64| i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX });
            Ok(Value::Swizzle(Swizzle::new(narrow(*b), narrow(*m), narrow(*sh))?))
        }
        ExprKind::Tiler(items) => {
            let mut modes = Vec::with_capacity(items.len());
            for it in items {
                let v = eval(it)?;
                match v.as_tiler() {
                    Some(t) => modes.push(t),
                    None => {
                        return usage(
                            it.pos,
                            format!(
                                "a tiler mode must be a layout, an integer, '_' or [...], not {}",
                                v.kind()
                            ),
                        )
                    }
                }
            }
            Ok(Value::Tiler(Tiler::Tuple(modes)))
        }
        ExprKind::Call { name, args } => call(e.pos, name, args),
    }
}

/// Evaluate a whole input string: parse errors and evaluation errors are both
/// [`EvalError`]s.
pub fn eval_str(input: &str) -> R<Value> {
    eval_str_with(input, Mode::Static)
}

/// Evaluate a whole input string in CuTe's own spelling (`rcute layout --exact`): `_N`
/// is a static integer (`Int<N>`), a plain `N` a dynamic integer with known value `N`
/// (CuTe's runtime `int`). Print the result with [`Value::notation_exact`].
pub fn eval_str_exact(input: &str) -> R<Value> {
    eval_str_with(input, Mode::Exact)
}

/// Evaluate a whole input string, reading plain integers as `mode` says.
pub fn eval_str_with(input: &str, mode: Mode) -> R<Value> {
    eval(&parse_with(input, mode)?)
}

struct Args<'a> {
    pos: usize,
    name: &'a str,
    exprs: &'a [Expr],
    vals: Vec<Value>,
}

impl Args<'_> {
    fn layout(&self, i: usize) -> R<Layout> {
        let v = &self.vals[i];
        v.as_layout().map_or_else(
            || {
                usage(
                    self.exprs[i].pos,
                    format!("{}: argument {} must be a layout, not {}", self.name, i + 1, v.kind()),
                )
            },
            Ok,
        )
    }
    fn any(&self, i: usize) -> R<AnyLayout> {
        let v = &self.vals[i];
        v.as_any().map_or_else(
            || {
                usage(
                    self.exprs[i].pos,
                    format!("{}: argument {} must be a layout, not {}", self.name, i + 1, v.kind()),
                )
            },
            Ok,
        )
    }
    fn tuple(&self, i: usize, what: &str) -> R<IntTuple> {
        let v = &self.vals[i];
        v.as_tuple().map_or_else(
            || {
                usage(
                    self.exprs[i].pos,
                    format!("{}: argument {} must be {what}, not {}", self.name, i + 1, v.kind()),
                )
            },
            Ok,
        )
    }
    fn tiler(&self, i: usize) -> R<Tiler> {
        let v = &self.vals[i];
        v.as_tiler().map_or_else(
            || {
                usage(
                    self.exprs[i].pos,
                    format!(
                        "{}: argument {} must be a tiler or a layout, not {}",
                        self.name,
                        i + 1,
                        v.kind()
                    ),
                )
            },
            Ok,
        )
    }
    /// An integer known when the expression is evaluated (CuTe's template arguments of
    /// `upcast<N>`, `get<I>`): static, or a dynamic literal in `--exact` mode.
    fn static_int(&self, i: usize) -> R<i64> {
        match self.tuple(i, "an integer")? {
            Tuple::Leaf(n) => match n.known() {
                Some(v) => Ok(v),
                None => usage(
                    self.exprs[i].pos,
                    format!("{}: argument {} must be a static integer", self.name, i + 1),
                ),
            },
            Tuple::Node(_) => usage(
                self.exprs[i].pos,
                format!("{}: argument {} must be an integer, not a tuple", self.name, i + 1),
            ),
        }
    }
    fn index(&self, i: usize) -> R<usize> {
        let v = self.static_int(i)?;
        usize::try_from(v).map_or_else(
            |_| usage(self.exprs[i].pos, format!("{}: mode index {v} is negative", self.name)),
            Ok,
        )
    }
}

fn count(n: usize) -> Value {
    Value::Int(s(n as i64))
}

fn call(pos: usize, name: &str, exprs: &[Expr]) -> R<Value> {
    let Some(&(_, lo, hi)) = FUNCTIONS.iter().find(|(n, _, _)| *n == name) else {
        return usage(pos, format!("unknown function '{name}'"));
    };
    if exprs.len() < lo || exprs.len() > hi {
        let want = if lo == hi {
            format!("{lo}")
        } else if hi == usize::MAX {
            format!("at least {lo}")
        } else {
            format!("{lo} or {hi}")
        };
        return usage(
            pos,
            format!(
                "{name} takes {want} argument{}, got {}",
                if want == "1" { "" } else { "s" },
                exprs.len()
            ),
        );
    }
    let vals = exprs.iter().map(eval).collect::<R<Vec<_>>>()?;
    let a = Args { pos, name, exprs, vals };
    let any = Value::from_any;
    let v = match name {
        "composition" => match (&a.vals[0], &a.vals[1]) {
            (Value::Swizzle(sw), Value::Composed(_)) => any(sw.as_layout().compose(&a.any(1)?)?),
            (Value::Swizzle(sw), _) => any(sw.compose_layout(&a.layout(1)?)),
            (Value::Composed(_), Value::Swizzle(sw)) => any(a.any(0)?.compose(&sw.as_layout())?),
            (_, Value::Swizzle(sw)) => any(compose_with_swizzle(&a.layout(0)?, sw)?),
            (_, Value::Layout(_) | Value::Composed(_) | Value::Shape(Tuple::Node(_)) | Value::Tuple(_)) => {
                any(a.any(0)?.compose(&a.any(1)?)?)
            }
            _ => any(a.any(0)?.compose_tiler(&a.tiler(1)?)?),
        },
        "complement" => {
            if a.vals.len() == 2 {
                Value::Layout(a.any(0)?.complement(&a.tuple(1, "an integer or a shape")?)?)
            } else {
                Value::Layout(a.layout(0)?.complement_full()?)
            }
        }
        "right_inverse" => any(a.any(0)?.right_inverse()?),
        "left_inverse" => any(a.any(0)?.left_inverse()?),
        "coalesce" => {
            if a.vals.len() == 2 {
                let profile = a.tuple(1, "a profile tuple")?;
                match a.any(0)? {
                    AnyLayout::Plain(l) => Value::Layout(l.coalesce_by(&profile)?),
                    AnyLayout::Composed(c) => any(c.coalesce_by(&profile)?),
                }
            } else {
                any(a.any(0)?.coalesce())
            }
        }
        "filter" => any(a.any(0)?.filter()),
        "logical_divide" => any(a.any(0)?.logical_divide(&a.tiler(1)?)?),
        "zipped_divide" => any(a.any(0)?.zipped_divide(&a.tiler(1)?)?),
        "tiled_divide" => any(a.any(0)?.tiled_divide(&a.tiler(1)?)?),
        "flat_divide" => any(a.any(0)?.flat_divide(&a.tiler(1)?)?),
        "logical_product" => any(a.any(0)?.logical_product(&a.tiler(1)?)?),
        "zipped_product" => any(a.any(0)?.zipped_product(&a.tiler(1)?)?),
        "tiled_product" => any(a.any(0)?.tiled_product(&a.tiler(1)?)?),
        "flat_product" => any(a.any(0)?.flat_product(&a.tiler(1)?)?),
        "blocked_product" => any(a.any(0)?.blocked_product(&a.layout(1)?)?),
        "raked_product" => any(a.any(0)?.raked_product(&a.layout(1)?)?),
        "tile_to_shape" => {
            let l = a.any(0)?;
            let shape = a.tuple(1, "a shape")?;
            let order = if a.vals.len() == 3 {
                Some(a.tuple(2, "an order tuple")?)
            } else {
                None
            };
            any(l.tile_to_shape(&shape, order.as_ref())?)
        }
        "make_ordered_layout" => Value::Layout(Layout::ordered(
            &a.tuple(0, "a shape")?,
            &a.tuple(1, "an order tuple")?,
        )?),
        "make_layout_like" => Value::Layout(a.layout(0)?.layout_like()?),
        "max_common_vector" => Value::Int(a.layout(0)?.max_common_vector(&a.layout(1)?)?),
        "max_common_layout" => Value::Layout(a.layout(0)?.max_common_layout(&a.layout(1)?)?),
        "upcast" => any(a.any(0)?.upcast(a.static_int(1)?)?),
        "downcast" => any(a.any(0)?.downcast(a.static_int(1)?)?),
        "size" => match &a.vals[0] {
            Value::Tuple(t) => Value::Int(t.size()),
            _ => Value::Int(a.any(0)?.size()),
        },
        "cosize" => Value::Int(a.any(0)?.cosize()),
        "rank" => match &a.vals[0] {
            Value::Tuple(t) => count(t.rank()),
            _ => count(a.any(0)?.rank()),
        },
        "depth" => match &a.vals[0] {
            Value::Tuple(t) => count(t.depth()),
            _ => count(a.any(0)?.depth()),
        },
        "shape" => Value::Tuple(a.any(0)?.shape().clone()),
        "stride" => Value::Tuple(a.layout(0)?.stride().clone()),
        "get" => {
            let path = (1..a.vals.len()).map(|i| a.index(i)).collect::<R<Vec<_>>>()?;
            match &a.vals[0] {
                Value::Tuple(t) => match t.get_path(&path) {
                    Some(Tuple::Leaf(n)) => Value::Int(n.clone()),
                    Some(sub) => Value::Tuple(sub.clone()),
                    None => return usage(a.exprs[0].pos, format!("get: mode path {path:?} out of range for {t}")),
                },
                _ => any(a.any(0)?.get(&path)?),
            }
        }
        _ => return usage(a.pos, format!("unknown function '{name}'")),
    };
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> String {
        match eval_str(s) {
            Ok(v) => v.notation(),
            Err(e) => format!("ERR {e}"),
        }
    }

    #[test]
    fn basics() {
        assert_eq!(
            ev("zipped_divide((128,64),[32,16])"),
            "((32,16),(4,4)):((1,128),(32,2048))"
        );
        assert_eq!(ev("composition((6,2):(8,2),(4,3):(3,1))"), "((2,2),3):((24,2),8)");
        assert_eq!(ev("complement(4:1,24)"), "6:4");
        assert_eq!(ev("size((2,(3,4)):(1,(2,6)))"), "24");
        assert_eq!(ev("get(shape((2,(3,4))),1,0)"), "3");
        assert_eq!(ev("(M,8):(1,M)"), "(M,8):(1,M)");
        assert!(ev("frob(1)").starts_with("ERR unknown function"));
    }

    #[test]
    fn exact_mode() {
        let ex = |s: &str| {
            eval_str_exact(s)
                .map(|v| v.notation_exact())
                .unwrap_or_else(|e| format!("ERR {e}"))
        };
        assert_eq!(ex("(_8,4):(_1,_8)"), "(_8,4):(_1,_8)");
        assert_eq!(ex("(8,4)"), "(8,4):(_1,8)");
        assert_eq!(ex("size((4,_2):(_1,4))"), "8");
        assert_eq!(ex("rank((4,_2):(_1,4))"), "_2");
        assert_eq!(ex("upcast((_4,_8):(_8,_1),2)"), "(_4,_4):(_4,_1)");
        assert_eq!(ev("(8,4)"), "(8,4):(1,8)");
    }
}
