//! Tilers: what divides and products take as their right operand.

use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::Layout;
use crate::lerr;
use crate::stride::StrideElem;
use crate::tuple::{IntTuple, Tuple};
use std::fmt;

/// CuTe's tiler: a layout, an integer `n` (meaning `n:1`), `_` (leave the mode alone), or a
/// tuple of tilers applied mode by mode.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Tiler {
    /// A layout applied to the whole operand (or mode).
    Layout(Layout),
    /// An integer `n`: the layout `n:1`.
    Int(Int),
    /// `_`: the mode is taken whole.
    Underscore,
    /// One tiler per mode.
    Tuple(Vec<Tiler>),
}

impl Tiler {
    /// A by-mode tiler of integers, e.g. `Tiler::shape(&[128, 64])`.
    pub fn shape(v: &[i64]) -> Tiler {
        Tiler::Tuple(v.iter().map(|&x| Tiler::Int(s(x))).collect())
    }
    /// A by-mode tiler of layouts.
    pub fn layouts(v: impl IntoIterator<Item = Layout>) -> Tiler {
        Tiler::Tuple(v.into_iter().map(Tiler::Layout).collect())
    }
    /// An integer tuple used as a tiler (each leaf `n` means `n:1`).
    pub fn from_shape(t: &IntTuple) -> Tiler {
        match t {
            Tuple::Leaf(x) => Tiler::Int(x.clone()),
            Tuple::Node(m) => Tiler::Tuple(m.iter().map(Tiler::from_shape).collect()),
        }
    }
    /// True for the tuple form.
    pub fn is_tuple(&self) -> bool {
        matches!(self, Tiler::Tuple(_))
    }
    /// A profile with the nesting of the tiler (used by `zip2_by`).
    pub(crate) fn profile(&self) -> Tuple<()> {
        match self {
            Tiler::Tuple(v) => Tuple::Node(v.iter().map(Tiler::profile).collect()),
            _ => Tuple::Leaf(()),
        }
    }
    /// The tiler as a layout, for a non-tuple tiler (`n` is `n:1`).
    pub fn as_layout(&self) -> Option<Layout> {
        match self {
            Tiler::Layout(l) => Some(l.clone()),
            Tiler::Int(n) => Some(Layout::col_major(Tuple::Leaf(n.clone()))),
            _ => None,
        }
    }
}

impl From<Layout> for Tiler {
    fn from(l: Layout) -> Self {
        Tiler::Layout(l)
    }
}
impl From<i64> for Tiler {
    fn from(n: i64) -> Self {
        Tiler::Int(s(n))
    }
}
impl From<Int> for Tiler {
    fn from(n: Int) -> Self {
        Tiler::Int(n)
    }
}

impl fmt::Display for Tiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tiler::Layout(l) => write!(f, "{l}"),
            Tiler::Int(n) => write!(f, "{n}"),
            Tiler::Underscore => f.write_str("_"),
            Tiler::Tuple(v) => {
                f.write_str("[")?;
                for (i, t) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl fmt::Debug for Tiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// An operation [`Layout::per_mode`] applies to one mode and its tiler.
type ModeOp<D> = dyn Fn(&Layout<D>, &Tiler) -> Result<Layout<D>>;

impl<D: StrideElem> Layout<D> {
    /// CuTe's `transform_layout(layout, tiler, f)` for a tuple tiler: `f` on each mode the
    /// tiler reaches, the remaining modes unchanged (divides and products apply by mode).
    pub(crate) fn per_mode(&self, op: &'static str, tiler: &Tiler, ts: &[Tiler], f: &ModeOp<D>) -> Result<Layout<D>> {
        if ts.len() > self.rank() {
            return Err(lerr!(
                op,
                [self, tiler],
                ErrorKind::Rank(format!("too many modes in tiler: {} > {}", ts.len(), self.rank()))
            ));
        }
        let modes = self.modes();
        let mut out = Vec::with_capacity(modes.len());
        for (i, m) in modes.iter().enumerate() {
            out.push(match ts.get(i) {
                Some(t) => f(m, t)?,
                None => m.clone(),
            });
        }
        Ok(Layout::concat(&out))
    }
}
