//! [`Layout`]: a function from coordinates to offsets, given by a shape and a stride.
//!
//! Coordinates follow CuTe's colexicographic convention: an integer index `i` into a
//! mode of shape `(s0,s1,...)` is the coordinate `(i % s0, (i / s0) % s1, ...)`.

use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::lerr;
use crate::stride::StrideElem;
use crate::tuple::{IntTuple, Tuple};
use std::fmt;

/// A layout: shape and stride of the same nesting. `D` is the stride element type
/// (integers by default; see [`StrideElem`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Layout<D: StrideElem = Int> {
    shape: IntTuple,
    stride: Tuple<D>,
}

/// A coordinate that may leave modes free with `_` (CuTe's `Underscore`): `None` is `_`.
pub type SliceCoord = Tuple<Option<Int>>;

impl<D: StrideElem> Layout<D> {
    /// A layout from congruent shape and stride of any stride element type.
    pub fn from_parts(shape: IntTuple, stride: Tuple<D>) -> Result<Self> {
        if !shape.congruent(&stride) {
            return Err(lerr!("make_layout", [shape, stride], ErrorKind::NotCongruent));
        }
        Ok(Layout { shape, stride })
    }
    /// Construct without checking congruence (callers guarantee it).
    pub(crate) fn raw(shape: IntTuple, stride: Tuple<D>) -> Self {
        debug_assert!(shape.congruent(&stride));
        Layout { shape, stride }
    }
    /// The shape.
    pub fn shape(&self) -> &IntTuple {
        &self.shape
    }
    /// The stride.
    pub fn stride(&self) -> &Tuple<D> {
        &self.stride
    }
    /// Split into shape and stride.
    pub fn into_parts(self) -> (IntTuple, Tuple<D>) {
        (self.shape, self.stride)
    }
    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }
    /// Nesting depth of the shape.
    pub fn depth(&self) -> usize {
        self.shape.depth()
    }
    /// Number of coordinates in the domain.
    pub fn size(&self) -> Int {
        self.shape.size()
    }
    /// True when shape and stride are fully static.
    pub fn is_static(&self) -> bool {
        self.shape.is_static() && self.stride.leaves().iter().all(|d| d.is_static())
    }
    /// Sub-layout of mode `i` (CuTe's `layout<i>` / `get<i>`).
    pub fn mode(&self, i: usize) -> Result<Layout<D>> {
        self.get(&[i])
    }
    /// Nested sub-layout `get<i0, i1, ...>`.
    pub fn get(&self, path: &[usize]) -> Result<Layout<D>> {
        match (self.shape.get_path(path), self.stride.get_path(path)) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh.clone(), st.clone())),
            _ => Err(lerr!(
                "get",
                [self, format!("{path:?}")],
                ErrorKind::Rank(format!("mode path {path:?} out of range for rank {}", self.rank()))
            )),
        }
    }
    /// The top-level modes as layouts.
    pub fn modes(&self) -> Vec<Layout<D>> {
        self.shape
            .modes()
            .iter()
            .zip(self.stride.modes())
            .map(|(a, b)| Layout::raw(a.clone(), b.clone()))
            .collect()
    }
    /// Concatenate layouts as the modes of a new layout (CuTe's `make_layout(l0, l1, ...)`).
    pub fn concat(modes: &[Layout<D>]) -> Layout<D> {
        Layout::raw(
            Tuple::Node(modes.iter().map(|l| l.shape.clone()).collect()),
            Tuple::Node(modes.iter().map(|l| l.stride.clone()).collect()),
        )
    }
    /// Modes `[b, e)` (CuTe's `take<B,E>`).
    pub fn take(&self, b: usize, e: usize) -> Result<Layout<D>> {
        match (self.shape.take(b, e), self.stride.take(b, e)) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!(
                "take",
                [self, format!("[{b},{e})")],
                ErrorKind::Rank("empty or out-of-range".into())
            )),
        }
    }
    /// The selected modes (CuTe's `select<Is...>`).
    pub fn select(&self, idx: &[usize]) -> Result<Layout<D>> {
        match (self.shape.select(idx), self.stride.select(idx)) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!(
                "select",
                [self, format!("{idx:?}")],
                ErrorKind::Rank("mode index out of range".into())
            )),
        }
    }
    /// Append a mode (CuTe's `append(layout, x)`).
    pub fn append(&self, x: &Layout<D>) -> Layout<D> {
        Layout::raw(self.shape.append(x.shape.clone()), self.stride.append(x.stride.clone()))
    }
    /// Prepend a mode.
    pub fn prepend(&self, x: &Layout<D>) -> Layout<D> {
        Layout::raw(
            self.shape.prepend(x.shape.clone()),
            self.stride.prepend(x.stride.clone()),
        )
    }
    /// Pad with `1:0` modes up to rank `n` (CuTe's `append<N>(layout)`).
    pub fn append_to(&self, n: usize) -> Layout<D> {
        Layout::raw(
            self.shape.append_to(n, Tuple::Leaf(s(1))),
            self.stride.append_to(n, Tuple::Leaf(D::zero())),
        )
    }
    /// Replace mode `i`.
    pub fn replace(&self, i: usize, x: &Layout<D>) -> Result<Layout<D>> {
        match (
            self.shape.replace(i, x.shape.clone()),
            self.stride.replace(i, x.stride.clone()),
        ) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!(
                "replace",
                [self, i, x],
                ErrorKind::Rank("mode index out of range".into())
            )),
        }
    }
    /// Flatten to depth at most 1.
    pub fn flatten(&self) -> Layout<D> {
        Layout::raw(self.shape.flatten(), self.stride.flatten())
    }
    /// Group modes `[b, e)` into one (CuTe's `group<B,E>`).
    pub fn group(&self, b: usize, e: usize) -> Result<Layout<D>> {
        match (self.shape.group(b, e), self.stride.group(b, e)) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!(
                "group",
                [self, format!("[{b},{e})")],
                ErrorKind::Rank("mode range out of range".into())
            )),
        }
    }
    /// Re-nest a flat layout after `profile` (CuTe's `unflatten`).
    pub fn unflatten<U>(&self, profile: &Tuple<U>) -> Result<Layout<D>> {
        match (self.shape.unflatten(profile), self.stride.unflatten(profile)) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!(
                "unflatten",
                [self],
                ErrorKind::Rank("leaf count differs from the profile".into())
            )),
        }
    }

    /// Map a coordinate (any nesting weakly congruent with the shape, or a plain index)
    /// to its value: CuTe's `crd2idx(coord, shape, stride)` / `layout(coord)`.
    pub fn crd2idx(&self, coord: &IntTuple) -> Result<D::Value> {
        crd2idx_rec(coord, &self.shape, &self.stride)
            .ok_or_else(|| lerr!("crd2idx", [coord, self], ErrorKind::NotCongruent))
    }
    /// Evaluate at a 1-D index: `L(i)`.
    pub fn call(&self, i: impl Into<Int>) -> Result<D::Value> {
        self.crd2idx(&Tuple::Leaf(i.into()))
    }
    /// Evaluate at a static index, for tests and tables.
    pub fn at(&self, i: i64) -> Result<D::Value> {
        self.call(s(i))
    }

    /// Slice: keep the modes where `coord` has `_` (CuTe's `slice`).
    pub fn slice(&self, coord: &SliceCoord) -> Result<Layout<D>> {
        let sh = slice_rec(coord, &self.shape, true);
        let st = slice_rec(coord, &self.stride, true);
        match (sh, st) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!("slice", [fmt_slice(coord), self], ErrorKind::NotCongruent)),
        }
    }
    /// Dice: keep the modes where `coord` has integers (CuTe's `dice`).
    pub fn dice(&self, coord: &SliceCoord) -> Result<Layout<D>> {
        let sh = slice_rec(coord, &self.shape, false);
        let st = slice_rec(coord, &self.stride, false);
        match (sh, st) {
            (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
            _ => Err(lerr!("dice", [fmt_slice(coord), self], ErrorKind::NotCongruent)),
        }
    }
    /// The sliced layout and the offset of the fixed coordinates (CuTe's `slice_and_offset`).
    pub fn slice_and_offset(&self, coord: &SliceCoord) -> Result<(Layout<D>, D::Value)> {
        let sub = self.slice(coord)?;
        let fixed = coord.map(&mut |c| c.clone().unwrap_or(s(0)));
        let off = self.crd2idx(&fixed)?;
        Ok((sub, off))
    }
}

/// CuTe's `slice` (keep_free = true: keep the `_` modes) and `dice` (keep the integer
/// modes). Kept pieces of nested coordinates are concatenated into the parent, as CuTe's
/// `filter_tuple` does; `slice(_, t) == t` and `dice(i, t) == t`.
pub(crate) fn slice_rec<T: Clone>(c: &SliceCoord, t: &Tuple<T>, keep_free: bool) -> Option<Tuple<T>> {
    fn lift<T: Clone>(c: &SliceCoord, t: &Tuple<T>, keep_free: bool, out: &mut Vec<Tuple<T>>) -> Option<()> {
        match c {
            Tuple::Leaf(x) => {
                if x.is_none() == keep_free {
                    out.push(t.clone());
                }
            }
            Tuple::Node(cs) => {
                let ts = match t {
                    Tuple::Node(ts) if ts.len() == cs.len() => ts,
                    _ => return None,
                };
                for (ci, ti) in cs.iter().zip(ts) {
                    lift(ci, ti, keep_free, out)?;
                }
            }
        }
        Some(())
    }
    match c {
        Tuple::Leaf(x) => Some(if x.is_none() == keep_free {
            t.clone()
        } else {
            Tuple::Node(vec![])
        }),
        Tuple::Node(_) => {
            let mut out = Vec::new();
            lift(c, t, keep_free, &mut out)?;
            Some(Tuple::Node(out))
        }
    }
}

pub(crate) fn fmt_slice(c: &SliceCoord) -> String {
    match c {
        Tuple::Leaf(None) => "_".into(),
        Tuple::Leaf(Some(v)) => v.to_string(),
        Tuple::Node(m) => format!("({})", m.iter().map(fmt_slice).collect::<Vec<_>>().join(",")),
    }
}

fn crd2idx_rec<D: StrideElem>(c: &IntTuple, sh: &IntTuple, st: &Tuple<D>) -> Option<D::Value> {
    match (c, sh, st) {
        (Tuple::Node(cs), Tuple::Node(ss), Tuple::Node(ds)) => {
            if cs.len() != ss.len() || ss.len() != ds.len() {
                return None;
            }
            let mut acc = D::zero_value();
            for ((ci, si), di) in cs.iter().zip(ss).zip(ds) {
                let v = crd2idx_rec(ci, si, di)?;
                acc = add_values::<D>(&acc, &v);
            }
            Some(acc)
        }
        (Tuple::Node(_), _, _) => None,
        (Tuple::Leaf(i), Tuple::Node(ss), Tuple::Node(ds)) => {
            if ss.len() != ds.len() {
                return None;
            }
            // Split the index colexicographically across the modes; the last mode
            // takes the remainder of the index unreduced (as CuTe does).
            let mut acc = D::zero_value();
            let mut rest = i.clone();
            for (k, (si, di)) in ss.iter().zip(ds).enumerate() {
                if k + 1 == ss.len() {
                    let v = crd2idx_rec(&Tuple::Leaf(rest.clone()), si, di)?;
                    acc = add_values::<D>(&acc, &v);
                } else {
                    let p = si.size();
                    let (q, r) = if rest.is_const(0) {
                        (s(0), s(0))
                    } else {
                        (rest.div(&p)?, rest.rem(&p)?)
                    };
                    let v = crd2idx_rec(&Tuple::Leaf(r), si, di)?;
                    acc = add_values::<D>(&acc, &v);
                    rest = q;
                }
            }
            Some(acc)
        }
        (Tuple::Leaf(i), Tuple::Leaf(_), Tuple::Leaf(d)) => Some(d.accumulate(&D::zero_value(), i)),
        _ => None,
    }
}

fn add_values<D: StrideElem>(a: &D::Value, b: &D::Value) -> D::Value {
    D::add_values(a, b)
}

impl Layout<Int> {
    /// A layout from congruent shape and stride (CuTe's `make_layout(shape, stride)`).
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(8, 4), tuple!(4, 1)).unwrap();
    /// assert_eq!(l.to_string(), "(8,4):(4,1)");
    /// assert!(Layout::new(tuple!(8, 4), tuple!(1)).is_err());
    /// ```
    pub fn new(shape: impl Into<IntTuple>, stride: impl Into<IntTuple>) -> Result<Layout> {
        Layout::from_parts(shape.into(), stride.into())
    }
    /// The compact column-major layout of `shape` (CuTe's `make_layout(shape)`):
    /// static shape-1 modes get stride 0.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// assert_eq!(Layout::col_major(tuple!(2, 1, (3, 4))).to_string(), "(2,1,(3,4)):(1,0,(2,6))");
    /// ```
    pub fn col_major(shape: impl Into<IntTuple>) -> Layout {
        let shape = shape.into();
        let stride = compact_major(&shape, &s(1), true);
        Layout::raw(shape, stride)
    }
    /// The compact row-major layout of `shape` (CuTe's `make_layout(shape, LayoutRight{})`).
    pub fn row_major(shape: impl Into<IntTuple>) -> Layout {
        let shape = shape.into();
        let stride = compact_major(&shape, &s(1), false);
        Layout::raw(shape, stride)
    }
    /// Compact column-major layout of `shape` whose strides start at `current`.
    pub fn col_major_from(shape: impl Into<IntTuple>, current: &Int) -> Layout {
        let shape = shape.into();
        let stride = compact_major(&shape, current, true);
        Layout::raw(shape, stride)
    }
    /// The codomain extent: one past the largest offset (CuTe's `cosize`).
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, s};
    /// assert_eq!(Layout::new(tuple!(2, 3), tuple!(3, 1)).unwrap().cosize(), s(6));
    /// ```
    pub fn cosize(&self) -> Int {
        // coshape = (shape-1)*|stride| + 1 per leaf, summed then +1 (CuTe: size(coshape)).
        let mut acc = s(0);
        for (sh, st) in self.shape.leaves().into_iter().zip(self.stride.leaves()) {
            acc = acc.add(&sh.sub(&s(1)).mul(&st.abs()));
        }
        acc.add(&s(1))
    }
    /// All offsets of a static layout in index order.
    pub fn values(&self) -> Result<Vec<i64>> {
        let n = self
            .size()
            .as_static()
            .ok_or_else(|| lerr!("values", [self], ErrorKind::NeedsStatic("dynamic size".into())))?;
        (0..n)
            .map(|i| {
                self.at(i)?
                    .as_static()
                    .ok_or_else(|| lerr!("values", [self], ErrorKind::NeedsStatic("dynamic stride".into())))
            })
            .collect()
    }
}

/// CuTe's `compact_major<LayoutLeft/LayoutRight>(shape, current)`.
pub(crate) fn compact_major(shape: &IntTuple, current: &Int, left: bool) -> Tuple<Int> {
    fn go(sh: &IntTuple, cur: Int, left: bool) -> (Tuple<Int>, Int) {
        match sh {
            Tuple::Leaf(x) => {
                if x.is_const(1) {
                    (Tuple::Leaf(s(0)), cur)
                } else {
                    (Tuple::Leaf(cur.clone()), cur.mul(x))
                }
            }
            Tuple::Node(m) => {
                let mut out = vec![Tuple::Leaf(s(0)); m.len()];
                let mut cur = cur;
                let order: Vec<usize> = if left {
                    (0..m.len()).collect()
                } else {
                    (0..m.len()).rev().collect()
                };
                for i in order {
                    let (r, next) = go(&m[i], cur, left);
                    out[i] = r;
                    cur = next;
                }
                (Tuple::Node(out), cur)
            }
        }
    }
    go(shape, current.clone(), left).0
}

/// Split an index into a coordinate of `shape`, colexicographically (CuTe's `idx2crd(i, shape)`).
///
/// ```
/// use rcute_layout::{idx2crd, tuple, s};
/// assert_eq!(idx2crd(&s(7), &tuple!(2, (2, 3))).to_string(), "(1,(1,1))");
/// ```
pub fn idx2crd(idx: &Int, shape: &IntTuple) -> IntTuple {
    match shape {
        Tuple::Leaf(_) => Tuple::Leaf(idx.clone()),
        Tuple::Node(_) => {
            let strides = compact_major(shape, &s(1), true);
            let f = |(sh, st): (&Int, &Int)| -> Int {
                if sh.is_const(1) {
                    s(0)
                } else {
                    idx.div(st).and_then(|q| q.rem(sh)).unwrap_or(s(0))
                }
            };
            let pairs = shape.zip_with(&strides, &mut |a, b| (a.clone(), b.clone()));
            pairs
                .map(|p| p.map(&mut |(a, b)| f((a, b))))
                .unwrap_or_else(|| shape.clone())
        }
    }
}

/// Map a coordinate of `shape` to its colexicographic index (CuTe's `crd2idx(coord, shape)`).
pub fn crd2idx(coord: &IntTuple, shape: &IntTuple) -> Option<Int> {
    let l = Layout::col_major(shape.clone());
    // Static shape-1 modes have stride 0 in the compact layout; the index is the same.
    l.crd2idx(coord).ok()
}

impl<D: StrideElem> fmt::Display for Layout<D> {
    /// CuTe notation `shape:stride`; `{:#}` keeps CuTe's underscores on static integers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{:#}:{:#}", self.shape, self.stride)
        } else {
            write!(f, "{}:{}", self.shape, self.stride)
        }
    }
}

impl<D: StrideElem> fmt::Debug for Layout<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple;

    #[test]
    fn eval_and_queries() {
        let l = Layout::new(tuple!((2, 3), (2, 4)), tuple!((1, 4), (2, 12))).unwrap();
        assert_eq!(l.to_string(), "((2,3),(2,4)):((1,4),(2,12))");
        assert_eq!(l.rank(), 2);
        assert_eq!(l.depth(), 2);
        assert_eq!(l.size(), s(48));
        assert_eq!(l.cosize(), s(48));
        assert_eq!(l.at(0).unwrap(), s(0));
        assert_eq!(l.at(1).unwrap(), s(1));
        assert_eq!(l.at(2).unwrap(), s(4));
        assert_eq!(l.at(6).unwrap(), s(2));
        assert_eq!(l.crd2idx(&tuple!(1, 5)).unwrap(), s(1 + 2 + 24));
        assert_eq!(l.crd2idx(&tuple!((1, 2), (1, 2))).unwrap(), s(1 + 8 + 2 + 24));
        assert_eq!(l.mode(1).unwrap().to_string(), "(2,4):(2,12)");
        assert_eq!(Layout::row_major(tuple!(2, 3, 4)).to_string(), "(2,3,4):(12,4,1)");
    }

    #[test]
    fn slicing() {
        let l = Layout::new(tuple!((2, 3), (2, 4)), tuple!((1, 4), (2, 12))).unwrap();
        let c: SliceCoord = Tuple::node([Tuple::Leaf(None), Tuple::Leaf(Some(s(5)))]);
        assert_eq!(l.slice(&c).unwrap().to_string(), "((2,3)):((1,4))");
        let c: SliceCoord = Tuple::node([
            Tuple::node([Tuple::Leaf(None), Tuple::Leaf(Some(s(1)))]),
            Tuple::Leaf(None),
        ]);
        assert_eq!(l.slice(&c).unwrap().to_string(), "(2,(2,4)):(1,(2,12))");
        assert_eq!(l.dice(&c).unwrap().to_string(), "(3):(4)");
        let (sub, off) = l.slice_and_offset(&c).unwrap();
        assert_eq!(sub.to_string(), "(2,(2,4)):(1,(2,12))");
        assert_eq!(off, s(4));
    }

    #[test]
    fn dynamic_eval() {
        let l = Layout::new(tuple!("M", "K"), tuple!(1, "ldA")).unwrap();
        assert_eq!(l.crd2idx(&tuple!(3, 2)).unwrap().to_string(), "ldA*2+3");
        assert_eq!(l.cosize().to_string(), "M+(K-1)*ldA");
    }
}
