//! `coalesce` and `filter`: simplify a layout without changing it as a function.

use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::Layout;
use crate::lerr;
use crate::stride::StrideElem;
use crate::tuple::{IntTuple, Tuple};

/// Back-to-front merge of flat modes into (new_shape, new_stride), CuTe's `bw_coalesce`.
/// `new_*` start as a leaf and grow into a tuple by prepending.
fn bw_coalesce<D: StrideElem>(
    old_shape: &[Int],
    old_stride: &[D],
    mut new_shape: Tuple<Int>,
    mut new_stride: Tuple<D>,
) -> Layout<D> {
    for i in (0..old_shape.len()).rev() {
        let (si, di) = (&old_shape[i], &old_stride[i]);
        if si.is_const(1) {
            continue;
        }
        if new_shape.leaf().is_some_and(|x| x.is_const(1)) {
            new_shape = Tuple::Leaf(si.clone());
            new_stride = Tuple::Leaf(di.clone());
            continue;
        }
        let front_shape = new_shape.get(0).and_then(Tuple::leaf).cloned();
        let front_stride = new_stride.get(0).and_then(Tuple::leaf).cloned();
        let prod = di.scale(si);
        let mergeable = matches!((&front_shape, &front_stride), (Some(fs), Some(fd))
            if fs.is_static() && prod.is_static() && fd.is_static() && prod == *fd);
        if mergeable {
            let fs = front_shape.unwrap_or(s(1));
            new_shape = new_shape.replace(0, Tuple::Leaf(si.mul(&fs))).unwrap_or(new_shape);
            new_stride = new_stride.replace(0, Tuple::Leaf(di.clone())).unwrap_or(new_stride);
        } else {
            new_shape = new_shape.prepend(Tuple::Leaf(si.clone()));
            new_stride = new_stride.prepend(Tuple::Leaf(di.clone()));
        }
    }
    if new_shape.leaf().is_some_and(|x| x.is_const(1)) {
        return Layout::raw(Tuple::Leaf(s(1)), Tuple::Leaf(D::zero()));
    }
    Layout::raw(new_shape, new_stride)
}

fn flat_parts<D: StrideElem>(l: &Layout<D>) -> (Vec<Int>, Vec<D>) {
    (
        l.shape().leaves().into_iter().cloned().collect(),
        l.stride().leaves().into_iter().cloned().collect(),
    )
}

impl<D: StrideElem> Layout<D> {
    /// Merge modes that can be merged; the result has depth at most 1 and the same values
    /// on the domain (CuTe's `coalesce`).
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(2, (1, 6)), tuple!(1, (6, 2))).unwrap();
    /// assert_eq!(l.coalesce().to_string(), "12:1");
    /// ```
    pub fn coalesce(&self) -> Layout<D> {
        let (sh, st) = flat_parts(self);
        let Some(r) = sh.len().checked_sub(1) else {
            return Layout::raw(Tuple::Leaf(s(1)), Tuple::Leaf(D::zero()));
        };
        bw_coalesce(
            &sh[..r],
            &st[..r],
            Tuple::Leaf(sh[r].clone()),
            Tuple::Leaf(st[r].clone()),
        )
    }

    /// CuTe's `detail::coalesce_x`: like `coalesce`, but also keeps the function outside the
    /// domain (a trailing static shape-1 mode becomes a 2-mode of the same stride).
    pub(crate) fn coalesce_x(&self) -> Layout<D> {
        let (sh, st) = flat_parts(self);
        let Some(r) = sh.len().checked_sub(1) else {
            return Layout::raw(Tuple::Leaf(s(1)), Tuple::Leaf(D::zero()));
        };
        let last = if sh[r].is_const(1) { s(2) } else { sh[r].clone() };
        bw_coalesce(&sh[..r], &st[..r], Tuple::Leaf(last), Tuple::Leaf(st[r].clone()))
    }

    /// Coalesce at the terminals of `profile` (CuTe's `coalesce(layout, trg_profile)`):
    /// each mode under a leaf of the profile is coalesced on its own.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!((2, 4), (3, 2)), tuple!((1, 2), (8, 24))).unwrap();
    /// assert_eq!(l.coalesce_by(&tuple!(1, 1)).unwrap().to_string(), "(8,6):(1,8)");
    /// ```
    pub fn coalesce_by<U>(&self, profile: &Tuple<U>) -> Result<Layout<D>> {
        self.by_profile("coalesce", profile, &|l| Ok(l.coalesce()))
    }

    /// Apply `f` at the terminals of `profile`, keeping the modes the profile does not
    /// reach (CuTe's `transform_layout(layout, profile, f)`).
    pub(crate) fn by_profile<U>(
        &self,
        op: &'static str,
        profile: &Tuple<U>,
        f: &dyn Fn(&Layout<D>) -> Result<Layout<D>>,
    ) -> Result<Layout<D>> {
        match profile {
            Tuple::Leaf(_) => f(self),
            Tuple::Node(p) => {
                if p.len() > self.rank() {
                    return Err(lerr!(
                        op,
                        [self],
                        ErrorKind::Rank(format!(
                            "profile of rank {} exceeds layout rank {}",
                            p.len(),
                            self.rank()
                        ))
                    ));
                }
                let modes = self.modes();
                let mut out = Vec::with_capacity(modes.len());
                for (i, m) in modes.iter().enumerate() {
                    out.push(match p.get(i) {
                        Some(pi) => m.by_profile(op, pi, f)?,
                        None => m.clone(),
                    });
                }
                Ok(Layout::concat(&out))
            }
        }
    }

    /// Replace static-0-stride modes by size 1 (CuTe's `filter_zeros`).
    pub fn filter_zeros(&self) -> Layout<D> {
        let shape = self
            .stride()
            .zip_with(self.shape(), &mut |d, sh| {
                if d.is_static_zero() {
                    s(1)
                } else {
                    sh.clone()
                }
            })
            .unwrap_or_else(|| self.shape().clone());
        Layout::raw(shape, self.stride().clone())
    }

    /// Remove stride-0 and size-1 modes (CuTe's `filter`): `coalesce(filter_zeros(l))`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(4, 2, 3), tuple!(1, 0, 4)).unwrap();
    /// assert_eq!(l.filter().to_string(), "12:1");
    /// ```
    pub fn filter(&self) -> Layout<D> {
        self.filter_zeros().coalesce()
    }

    /// Filter at the terminals of `profile`.
    pub fn filter_by<U>(&self, profile: &Tuple<U>) -> Result<Layout<D>> {
        self.by_profile("filter", profile, &|l| Ok(l.filter()))
    }
}

/// Combine the static leaves and the dynamic leaves of a shape (CuTe's `coalesce(shape)`):
/// neighbours that are both static or both dynamic are multiplied together.
///
/// ```
/// use rcute_layout::{algebra::coalesce_shape, tuple};
/// assert_eq!(coalesce_shape(&tuple!(2, 4, "M", "N", 3)).to_string(), "(8,M*N,3)");
/// ```
pub fn coalesce_shape(shape: &IntTuple) -> IntTuple {
    let leaves = shape.leaves();
    let mut out: Vec<Int> = Vec::new();
    for x in leaves {
        match out.last_mut() {
            Some(back) if back.is_static() == x.is_static() => *back = back.mul(x),
            _ => out.push(x.clone()),
        }
    }
    if out.len() == 1 {
        Tuple::Leaf(out.pop().unwrap_or(s(1)))
    } else {
        Tuple::Node(out.into_iter().map(Tuple::Leaf).collect())
    }
}
