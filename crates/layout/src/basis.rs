//! [`ScaledBasis`]: CuTe's `ScaledBasis<T, Ns...>` (`E<Ns...>` scaled by a value), the
//! strides of coordinate (identity) layouts.
//!
//! A scaled basis element `v@n` is the arithmetic tuple with `v` in mode `n` and zeros
//! elsewhere; `v@j@i` puts `v` in mode `j` of mode `i`. A layout with such strides maps a
//! coordinate to a coordinate, which is how CuTe tracks where each element of a tiled or
//! partitioned tensor comes from ([`make_identity_layout`]).
//!
//! ```
//! use rcute_layout::{basis::make_identity_layout, tuple, algebra::Tiler};
//! let id = make_identity_layout(&tuple!(128, 64));
//! assert_eq!(id.to_string(), "(128,64):(1@0,1@1)");
//! let tiles = id.zipped_divide(&Tiler::shape(&[32, 16])).unwrap();
//! assert_eq!(tiles.to_string(), "((32,16),(4,4)):((1@0,1@1),(32@0,16@1))");
//! assert_eq!(tiles.crd2idx(&tuple!((1, 2), (3, 1))).unwrap().to_string(), "(97,18)");
//! ```

use crate::int::{s, Int};
use crate::layout::Layout;
use crate::stride::StrideElem;
use crate::tuple::{IntTuple, Tuple};
use std::fmt;

/// `value` placed at the nested mode `modes` (outermost mode first) of an arithmetic tuple:
/// CuTe's `ScaledBasis<T, modes...>`. With no modes it is the plain integer `value`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ScaledBasis {
    /// The scale.
    pub value: Int,
    /// The mode path, outermost first (`E<0,1>` is `[0, 1]`, printed `1@1@0`).
    pub modes: Vec<usize>,
}

impl ScaledBasis {
    /// `value` at mode path `modes`.
    pub fn new(value: impl Into<Int>, modes: &[usize]) -> ScaledBasis {
        ScaledBasis {
            value: value.into(),
            modes: modes.to_vec(),
        }
    }
    /// The unit basis element `E<modes...>`.
    ///
    /// ```
    /// use rcute_layout::basis::ScaledBasis;
    /// assert_eq!(ScaledBasis::unit(&[1]).to_string(), "1@1");
    /// assert_eq!(format!("{:#}", ScaledBasis::unit(&[0, 1])), "_1@1@0");
    /// ```
    pub fn unit(modes: &[usize]) -> ScaledBasis {
        ScaledBasis::new(s(1), modes)
    }
    /// The arithmetic tuple this element stands for (CuTe's `as_arithmetic_tuple`):
    /// `v@1` is `(0,v)`, `v@1@0` is `((0,v))`.
    ///
    /// ```
    /// use rcute_layout::basis::ScaledBasis;
    /// assert_eq!(ScaledBasis::new(3, &[1]).as_tuple().to_string(), "(0,3)");
    /// assert_eq!(ScaledBasis::new(3, &[0, 1]).as_tuple().to_string(), "((0,3))");
    /// ```
    pub fn as_tuple(&self) -> IntTuple {
        let mut t = Tuple::Leaf(self.value.clone());
        for &m in self.modes.iter().rev() {
            let mut v = vec![Tuple::Leaf(s(0)); m];
            v.push(t);
            t = Tuple::Node(v);
        }
        t
    }
}

/// Sum of two arithmetic tuples, padding the shorter with zeros (CuTe's
/// `ArithmeticTuple` `operator+`). A static zero leaf is the neutral element; another
/// leaf added to a tuple is treated as the rank-1 tuple of itself.
pub fn add_arith(a: &IntTuple, b: &IntTuple) -> IntTuple {
    match (a, b) {
        (Tuple::Leaf(x), _) if x.is_const(0) => b.clone(),
        (_, Tuple::Leaf(y)) if y.is_const(0) => a.clone(),
        (Tuple::Leaf(x), Tuple::Leaf(y)) => Tuple::Leaf(x.add(y)),
        _ => {
            let (am, bm) = (a.to_modes(), b.to_modes());
            let n = am.len().max(bm.len());
            let zero = Tuple::Leaf(s(0));
            Tuple::Node(
                (0..n)
                    .map(|i| add_arith(am.get(i).unwrap_or(&zero), bm.get(i).unwrap_or(&zero)))
                    .collect(),
            )
        }
    }
}

impl StrideElem for ScaledBasis {
    type Value = IntTuple;
    fn zero() -> Self {
        ScaledBasis::new(s(0), &[])
    }
    fn zero_value() -> IntTuple {
        Tuple::Leaf(s(0))
    }
    fn scale(&self, k: &Int) -> Self {
        ScaledBasis {
            value: self.value.mul(k),
            modes: self.modes.clone(),
        }
    }
    fn is_static_zero(&self) -> bool {
        self.value.is_const(0)
    }
    fn is_static(&self) -> bool {
        self.value.is_static()
    }
    fn as_int(&self) -> Option<&Int> {
        self.modes.is_empty().then_some(&self.value)
    }
    fn accumulate(&self, acc: &IntTuple, coord: &Int) -> IntTuple {
        add_arith(acc, &self.scale(coord).as_tuple())
    }
    fn add_values(a: &IntTuple, b: &IntTuple) -> IntTuple {
        add_arith(a, b)
    }
}

impl From<Int> for ScaledBasis {
    fn from(v: Int) -> Self {
        ScaledBasis::new(v, &[])
    }
}

impl fmt::Display for ScaledBasis {
    /// CuTe's print form `v@n...@outer` (innermost mode first); `{:#}` prints `_1@0`.
    /// A zero scale prints as the plain integer, as CuTe's static zero stride does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{:#}", self.value)?;
        } else {
            write!(f, "{}", self.value)?;
        }
        if self.value.is_const(0) {
            return Ok(());
        }
        for m in self.modes.iter().rev() {
            write!(f, "@{m}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ScaledBasis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

/// CuTe's `make_basis_like(shape)`: `E<path>` at every leaf of `shape`, where `path` is
/// the leaf's position in the nesting (outermost first).
///
/// ```
/// use rcute_layout::{basis::make_basis_like, tuple};
/// assert_eq!(make_basis_like(&tuple!((2, 3), 4)).to_string(), "((1@0@0,1@1@0),1@1)");
/// ```
pub fn make_basis_like(shape: &IntTuple) -> Tuple<ScaledBasis> {
    fn go(t: &IntTuple, path: &mut Vec<usize>) -> Tuple<ScaledBasis> {
        match t {
            Tuple::Leaf(_) => Tuple::Leaf(ScaledBasis::unit(path)),
            Tuple::Node(m) => Tuple::Node(
                m.iter()
                    .enumerate()
                    .map(|(i, x)| {
                        path.push(i);
                        let r = go(x, path);
                        path.pop();
                        r
                    })
                    .collect(),
            ),
        }
    }
    go(shape, &mut Vec::new())
}

/// CuTe's `make_identity_layout(shape)`: the layout mapping each coordinate of `shape`
/// to itself, `(M,N):(1@0,1@1)`.
///
/// ```
/// use rcute_layout::{basis::make_identity_layout, tuple};
/// let id = make_identity_layout(&tuple!("M", 8));
/// assert_eq!(id.to_string(), "(M,8):(1@0,1@1)");
/// assert_eq!(id.crd2idx(&tuple!(5, 7)).unwrap().to_string(), "(5,7)");
/// ```
pub fn make_identity_layout(shape: &IntTuple) -> Layout<ScaledBasis> {
    Layout::from_parts(shape.clone(), make_basis_like(shape)).expect("basis is congruent with its shape")
}
