//! Nested tuples (CuTe's `IntTuple`): the shapes, strides and coordinates of layouts.
//!
//! A [`Tuple`] is either a leaf or a sequence of tuples. Shapes and coordinates are
//! `Tuple<Int>` ([`IntTuple`]); strides are `Tuple<D>` for a stride element type `D`
//! (plain integers, or scaled basis elements for coordinate layouts).

use crate::int::Int;
use std::fmt;

/// A nested tuple with leaves of type `T`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Tuple<T> {
    /// A single element (CuTe: an integral).
    Leaf(T),
    /// A sequence of modes (CuTe: a `cute::tuple`), possibly empty.
    Node(Vec<Tuple<T>>),
}

/// Shapes and coordinates: nested tuples of static/dynamic integers.
pub type IntTuple = Tuple<Int>;

impl<T> From<T> for Tuple<T> {
    fn from(v: T) -> Self {
        Tuple::Leaf(v)
    }
}

impl From<i64> for IntTuple {
    fn from(v: i64) -> Self {
        Tuple::Leaf(Int::Static(v))
    }
}

impl From<i32> for IntTuple {
    fn from(v: i32) -> Self {
        Tuple::Leaf(Int::Static(v as i64))
    }
}

impl<T> Tuple<T> {
    /// A tuple of the given modes.
    pub fn node(modes: impl IntoIterator<Item = Tuple<T>>) -> Self {
        Tuple::Node(modes.into_iter().collect())
    }
    /// True for a leaf.
    pub fn is_leaf(&self) -> bool {
        matches!(self, Tuple::Leaf(_))
    }
    /// The leaf value, if a leaf.
    pub fn leaf(&self) -> Option<&T> {
        match self {
            Tuple::Leaf(v) => Some(v),
            Tuple::Node(_) => None,
        }
    }
    /// Number of top-level modes (a leaf has rank 1, as in CuTe).
    pub fn rank(&self) -> usize {
        match self {
            Tuple::Leaf(_) => 1,
            Tuple::Node(v) => v.len(),
        }
    }
    /// Nesting depth (a leaf has depth 0, a flat tuple depth 1).
    pub fn depth(&self) -> usize {
        match self {
            Tuple::Leaf(_) => 0,
            Tuple::Node(v) => 1 + v.iter().map(Tuple::depth).max().unwrap_or(0),
        }
    }
    /// The modes as a slice (a leaf is viewed as a single mode of itself).
    pub fn modes(&self) -> &[Tuple<T>] {
        match self {
            Tuple::Leaf(_) => std::slice::from_ref(self),
            Tuple::Node(v) => v,
        }
    }
    /// Mode `i` (`get<i>`); a leaf's mode 0 is itself.
    pub fn get(&self, i: usize) -> Option<&Tuple<T>> {
        self.modes().get(i)
    }
    /// Nested access `get<i0, i1, ...>`.
    pub fn get_path(&self, path: &[usize]) -> Option<&Tuple<T>> {
        path.iter().try_fold(self, |t, &i| t.get(i))
    }
    /// The leaves in order.
    pub fn leaves(&self) -> Vec<&T> {
        fn walk<'a, T>(t: &'a Tuple<T>, out: &mut Vec<&'a T>) {
            match t {
                Tuple::Leaf(v) => out.push(v),
                Tuple::Node(m) => m.iter().for_each(|x| walk(x, out)),
            }
        }
        let mut v = Vec::new();
        walk(self, &mut v);
        v
    }
    /// Map every leaf.
    pub fn map<U>(&self, f: &mut impl FnMut(&T) -> U) -> Tuple<U> {
        match self {
            Tuple::Leaf(v) => Tuple::Leaf(f(v)),
            Tuple::Node(m) => Tuple::Node(m.iter().map(|x| x.map(f)).collect()),
        }
    }
    /// True when both tuples have the same nesting (CuTe's `congruent`).
    pub fn congruent<U>(&self, other: &Tuple<U>) -> bool {
        match (self, other) {
            (Tuple::Leaf(_), Tuple::Leaf(_)) => true,
            (Tuple::Node(a), Tuple::Node(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.congruent(y)),
            _ => false,
        }
    }
}

impl<T: Clone> Tuple<T> {
    /// A depth-1 tuple of the leaves; a leaf stays a leaf (CuTe's `flatten`).
    pub fn flatten(&self) -> Tuple<T> {
        match self {
            Tuple::Leaf(_) => self.clone(),
            Tuple::Node(_) => Tuple::Node(self.leaves().into_iter().cloned().map(Tuple::Leaf).collect()),
        }
    }
    /// The leaves as a depth-1 tuple, also for a leaf (CuTe's `flatten_to_tuple`).
    pub fn flatten_to_tuple(&self) -> Tuple<T> {
        Tuple::Node(self.leaves().into_iter().cloned().map(Tuple::Leaf).collect())
    }
    /// The modes as an owned vector.
    pub fn to_modes(&self) -> Vec<Tuple<T>> {
        self.modes().to_vec()
    }
    /// Wrap a leaf into a rank-1 tuple; tuples are unchanged (CuTe's `wrap`).
    pub fn wrap(&self) -> Tuple<T> {
        match self {
            Tuple::Leaf(_) => Tuple::Node(vec![self.clone()]),
            Tuple::Node(_) => self.clone(),
        }
    }
    /// Unwrap rank-1 tuples recursively (CuTe's `unwrap`).
    pub fn unwrap_single(&self) -> Tuple<T> {
        match self {
            Tuple::Node(v) if v.len() == 1 => v[0].unwrap_single(),
            _ => self.clone(),
        }
    }
    /// Append a mode (a leaf becomes the first mode of a rank-2 tuple).
    pub fn append(&self, x: Tuple<T>) -> Tuple<T> {
        let mut v = self.to_modes();
        v.push(x);
        Tuple::Node(v)
    }
    /// Prepend a mode.
    pub fn prepend(&self, x: Tuple<T>) -> Tuple<T> {
        let mut v = vec![x];
        v.extend(self.to_modes());
        Tuple::Node(v)
    }
    /// Pad with `x` up to rank `n` (CuTe's `append<N>`); unchanged if already rank `n`.
    pub fn append_to(&self, n: usize, x: Tuple<T>) -> Tuple<T> {
        if self.rank() >= n {
            return self.clone();
        }
        let mut v = self.to_modes();
        v.resize(n, x);
        Tuple::Node(v)
    }
    /// Modes `[b, e)` (CuTe's `take<B,E>`); `None` if out of range or empty.
    pub fn take(&self, b: usize, e: usize) -> Option<Tuple<T>> {
        if b >= e || e > self.rank() {
            return None;
        }
        let m = &self.modes()[b..e];
        Some(if m.len() == 1 && self.is_leaf() {
            m[0].clone()
        } else {
            Tuple::Node(m.to_vec())
        })
    }
    /// The selected modes, in the given order (CuTe's `select<Is...>`).
    pub fn select(&self, idx: &[usize]) -> Option<Tuple<T>> {
        let m = self.modes();
        let v = idx.iter().map(|&i| m.get(i).cloned()).collect::<Option<Vec<_>>>()?;
        Some(Tuple::Node(v))
    }
    /// Group modes `[b, e)` into one mode (CuTe's `group<B,E>`).
    pub fn group(&self, b: usize, e: usize) -> Option<Tuple<T>> {
        if b > e || e > self.rank() {
            return None;
        }
        let m = self.modes();
        let mut v: Vec<Tuple<T>> = m[..b].to_vec();
        v.push(Tuple::Node(m[b..e].to_vec()));
        v.extend_from_slice(&m[e..]);
        Some(Tuple::Node(v))
    }
    /// Remove mode `i`.
    pub fn remove(&self, i: usize) -> Tuple<T> {
        let mut v = self.to_modes();
        if i < v.len() {
            v.remove(i);
        }
        Tuple::Node(v)
    }
    /// Replace mode `i`.
    pub fn replace(&self, i: usize, x: Tuple<T>) -> Option<Tuple<T>> {
        if self.is_leaf() && i == 0 {
            return Some(x);
        }
        let mut v = self.to_modes();
        *v.get_mut(i)? = x;
        Some(Tuple::Node(v))
    }
    /// Rebuild the flat leaves of `self` with the nesting of `profile`
    /// (CuTe's `unflatten`); `None` if the leaf counts differ.
    pub fn unflatten<U>(&self, profile: &Tuple<U>) -> Option<Tuple<T>> {
        let flat: Vec<T> = self.leaves().into_iter().cloned().collect();
        let mut it = flat.into_iter();
        fn build<T, U>(p: &Tuple<U>, it: &mut impl Iterator<Item = T>) -> Option<Tuple<T>> {
            Some(match p {
                Tuple::Leaf(_) => Tuple::Leaf(it.next()?),
                Tuple::Node(m) => Tuple::Node(m.iter().map(|x| build(x, it)).collect::<Option<_>>()?),
            })
        }
        let r = build(profile, &mut it)?;
        if it.next().is_some() {
            return None;
        }
        Some(r)
    }
    /// Zip two tuples of equal rank leaf-wise into pairs of modes: used by the
    /// by-mode algebra.
    pub fn zip_with<U: Clone, V>(&self, other: &Tuple<U>, f: &mut impl FnMut(&T, &U) -> V) -> Option<Tuple<V>> {
        match (self, other) {
            (Tuple::Leaf(a), Tuple::Leaf(b)) => Some(Tuple::Leaf(f(a, b))),
            (Tuple::Node(a), Tuple::Node(b)) if a.len() == b.len() => Some(Tuple::Node(
                a.iter().zip(b).map(|(x, y)| x.zip_with(y, f)).collect::<Option<_>>()?,
            )),
            _ => None,
        }
    }
}

impl IntTuple {
    /// Product of all leaves (CuTe's `size` / `product`).
    pub fn size(&self) -> Int {
        self.leaves().into_iter().fold(Int::Static(1), |a, b| a.mul(b))
    }
    /// Product of each top-level mode (CuTe's `product_each`).
    pub fn product_each(&self) -> IntTuple {
        match self {
            Tuple::Leaf(_) => self.clone(),
            Tuple::Node(m) => Tuple::Node(m.iter().map(|x| Tuple::Leaf(x.size())).collect()),
        }
    }
    /// Sum of all leaves.
    pub fn sum(&self) -> Int {
        self.leaves().into_iter().fold(Int::Static(0), |a, b| a.add(b))
    }
    /// True when every leaf is static.
    pub fn is_static(&self) -> bool {
        self.leaves().iter().all(|x| x.is_static())
    }
    /// The static value of a leaf.
    pub fn static_leaf(&self) -> Option<i64> {
        self.leaf()?.as_static()
    }
    /// A tuple of static integers from nested literals.
    pub fn from_static(v: &[i64]) -> IntTuple {
        Tuple::Node(v.iter().map(|&x| Tuple::Leaf(Int::Static(x))).collect())
    }
    /// Repeat `x` with the nesting of `self` (CuTe's `repeat_like`).
    pub fn repeat_like<U: Clone>(&self, x: &U) -> Tuple<U> {
        self.map(&mut |_| x.clone())
    }
}

impl<T: fmt::Display> fmt::Display for Tuple<T> {
    /// CuTe notation: `(8,(2,4))`; `{:#}` prints static integers with underscores.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tuple::Leaf(v) => {
                if f.alternate() {
                    write!(f, "{v:#}")
                } else {
                    write!(f, "{v}")
                }
            }
            Tuple::Node(m) => {
                f.write_str("(")?;
                for (i, x) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if f.alternate() {
                        write!(f, "{x:#}")?;
                    } else {
                        write!(f, "{x}")?;
                    }
                }
                f.write_str(")")
            }
        }
    }
}

impl<T: fmt::Display> fmt::Debug for Tuple<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

/// Build an [`IntTuple`] from nested literals: `tuple!(2, (3, 4))`, with dynamic
/// leaves given as strings: `tuple!("M", 8)`.
#[macro_export]
macro_rules! tuple {
    (@leaf ($($inner:tt)*)) => { $crate::tuple!($($inner)*) };
    (@leaf $x:expr) => { $crate::IntTuple::Leaf($crate::Int::from($x)) };
    ($x:literal) => { $crate::IntTuple::Leaf($crate::Int::from($x)) };
    ($($x:tt),+ $(,)?) => {
        $crate::IntTuple::Node(vec![$($crate::tuple!(@leaf $x)),+])
    };
}

#[cfg(test)]
mod tests {
    use crate::int::s;

    #[test]
    fn basics() {
        let t = tuple!(2, (3, 4), "M");
        assert_eq!(t.rank(), 3);
        assert_eq!(t.depth(), 2);
        assert_eq!(t.to_string(), "(2,(3,4),M)");
        assert_eq!(format!("{t:#}"), "(_2,(_3,_4),M)");
        assert_eq!(t.flatten().to_string(), "(2,3,4,M)");
        assert_eq!(tuple!(2, 3).size(), s(6));
        assert_eq!(t.group(0, 2).unwrap().to_string(), "((2,(3,4)),M)");
        assert_eq!(tuple!(8).to_string(), "8");
        assert_eq!(tuple!((8)).to_string(), "(8)");
        assert_eq!(
            tuple!(2, 3, 4)
                .flatten()
                .unflatten(&tuple!((1, 1), 1))
                .unwrap()
                .to_string(),
            "((2,3),4)"
        );
    }
}
