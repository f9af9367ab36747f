//! `composition`: the layout `A ∘ B` with `(A ∘ B)(c) = A(B(c))`.

use super::Tiler;
use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::Layout;
use crate::lerr;
use crate::stride::StrideElem;
use crate::tuple::Tuple;

impl<D: StrideElem> Layout<D> {
    /// Functional composition `self ∘ rhs` (CuTe's `composition(lhs, rhs)`), defined when
    /// `rhs`'s strides and shapes satisfy CuTe's divisibility conditions against `self`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let a = Layout::new(tuple!(10, 2), tuple!(16, 4)).unwrap();
    /// let b = Layout::new(tuple!(5, 4), tuple!(1, 5)).unwrap();
    /// assert_eq!(a.compose(&b).unwrap().to_string(), "(5,(2,2)):(16,(80,4))");
    /// ```
    pub fn compose(&self, rhs: &Layout) -> Result<Layout<D>> {
        let flat = self.coalesce_x();
        composition_impl(flat.shape(), flat.stride(), rhs.shape(), rhs.stride())
            .map_err(|e| e.within("composition", vec![self.to_string(), rhs.to_string()]))
    }

    /// Composition with a tiler (CuTe's `composition(lhs, tiler)`): a tuple tiler composes
    /// mode by mode and drops the modes of `self` it does not reach; `_` keeps `self`;
    /// an integer `n` composes with `n:1`.
    ///
    /// ```
    /// use rcute_layout::{algebra::Tiler, tuple, Layout};
    /// let a = Layout::new(tuple!(12, (4, 8)), tuple!(59, (13, 1))).unwrap();
    /// let t = Tiler::shape(&[3, 8]);
    /// assert_eq!(a.compose_tiler(&t).unwrap().to_string(), "(3,(4,2)):(59,(13,1))");
    /// ```
    pub fn compose_tiler(&self, tiler: &Tiler) -> Result<Layout<D>> {
        match tiler {
            Tiler::Tuple(ts) => {
                if ts.len() > self.rank() {
                    return Err(lerr!(
                        "composition",
                        [self, tiler],
                        ErrorKind::Rank(format!(
                            "tiler of rank {} exceeds layout rank {}",
                            ts.len(),
                            self.rank()
                        ))
                    ));
                }
                let modes = self.modes();
                let parts = ts
                    .iter()
                    .zip(&modes)
                    .map(|(t, m)| m.compose_tiler(t))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Layout::concat(&parts))
            }
            Tiler::Underscore => Ok(self.clone()),
            Tiler::Int(n) => {
                let flat = self.coalesce_x();
                composition_impl(flat.shape(), flat.stride(), &Tuple::Leaf(n.clone()), &Tuple::Leaf(s(1)))
                    .map_err(|e| e.within("composition", vec![self.to_string(), tiler.to_string()]))
            }
            Tiler::Layout(l) => self.compose(l),
        }
    }
}

fn div_or_err(a: &Int, b: &Int, what: &str) -> Result<Int> {
    a.div(b).ok_or_else(|| {
        lerr!(
            "composition",
            [a, b],
            ErrorKind::Arithmetic(format!("division by zero in {what}"))
        )
    })
}

fn ceil_div_or_err(a: &Int, b: &Int) -> Result<Int> {
    a.ceil_div(b)
        .ok_or_else(|| lerr!("composition", [a, b], ErrorKind::Arithmetic("ceil_div by zero".into())))
}

/// CuTe's `detail::composition_impl`, with `lhs` already flattened by `coalesce_x`.
fn composition_impl<D: StrideElem>(
    lhs_shape: &Tuple<Int>,
    lhs_stride: &Tuple<D>,
    rhs_shape: &Tuple<Int>,
    rhs_stride: &Tuple<Int>,
) -> Result<Layout<D>> {
    // Right-distributivity over the modes of a tuple rhs.
    if let (Tuple::Node(rs), Tuple::Node(rd)) = (rhs_shape, rhs_stride) {
        let parts = rs
            .iter()
            .zip(rd)
            .map(|(s_, d_)| composition_impl(lhs_shape, lhs_stride, s_, d_))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Layout::concat(&parts));
    }
    let (Tuple::Leaf(rhs_s), Tuple::Leaf(rhs_d)) = (rhs_shape, rhs_stride) else {
        return Err(lerr!("composition", [rhs_shape, rhs_stride], ErrorKind::NotCongruent));
    };
    if rhs_d.is_const(0) {
        return Ok(Layout::raw(rhs_shape.clone(), Tuple::Leaf(D::zero())));
    }
    let lhs_modes = match (lhs_shape, lhs_stride) {
        (Tuple::Leaf(_), Tuple::Leaf(ld)) => {
            return Ok(Layout::raw(rhs_shape.clone(), Tuple::Leaf(ld.scale(rhs_d))));
        }
        (Tuple::Node(ls), Tuple::Node(ld)) => {
            let ls = ls.iter().map(|x| x.leaf().cloned()).collect::<Option<Vec<Int>>>();
            let ld = ld.iter().map(|x| x.leaf().cloned()).collect::<Option<Vec<D>>>();
            match (ls, ld) {
                (Some(a), Some(b)) if !a.is_empty() && a.len() == b.len() => (a, b),
                _ => {
                    return Err(lerr!(
                        "composition",
                        [lhs_shape],
                        ErrorKind::Invalid("left operand is not flat".into())
                    ))
                }
            }
        }
        _ => return Err(lerr!("composition", [lhs_shape], ErrorKind::NotCongruent)),
    };
    let (ls, ld) = lhs_modes;
    let r = ls.len();

    let mut result_shape: Vec<Int> = Vec::new();
    let mut result_stride: Vec<D> = Vec::new();
    let mut rest_shape = rhs_s.clone();
    let mut rest_stride = rhs_d.clone();

    for i in 0..r - 1 {
        let curr_shape = &ls[i];
        let curr_stride = &ld[i];
        if let (Some(cs), Some(rsd)) = (curr_shape.as_static(), rest_stride.as_static()) {
            if cs == 0 || !(rsd.wrapping_rem(cs) == 0 || rsd < cs) {
                return Err(lerr!(
                    "composition",
                    [curr_shape, rest_stride],
                    ErrorKind::Divisibility(format!(
                        "stride divisibility: rest stride {rsd} is neither a multiple of nor less than shape {cs}"
                    ))
                ));
            }
        }
        let abs_rest = rest_stride.abs();
        let next_shape = ceil_div_or_err(curr_shape, &abs_rest)?;
        let next_stride = ceil_div_or_err(&abs_rest, curr_shape)?.mul(&rest_stride.signum());

        if next_shape.is_const(1) || rest_shape.is_const(1) {
            rest_stride = next_stride;
            continue;
        }
        let new_shape = Int::min(&next_shape, &rest_shape);
        if let (Some(ns), Some(rs)) = (new_shape.as_static(), rest_shape.as_static()) {
            if ns == 0 || rs.wrapping_rem(ns) != 0 {
                return Err(lerr!(
                    "composition",
                    [rest_shape, new_shape],
                    ErrorKind::Divisibility(format!("shape divisibility: {rs} is not a multiple of {ns}"))
                ));
            }
        }
        result_shape.push(new_shape.clone());
        result_stride.push(curr_stride.scale(&rest_stride));
        rest_shape = div_or_err(&rest_shape, &new_shape, "shape")?;
        rest_stride = next_stride;
    }

    let last_stride = &ld[r - 1];
    if result_shape.is_empty() {
        return Ok(Layout::raw(
            Tuple::Leaf(rest_shape),
            Tuple::Leaf(last_stride.scale(&rest_stride)),
        ));
    }
    if rest_shape.is_const(1) {
        let sh = Tuple::Node(result_shape.into_iter().map(Tuple::Leaf).collect()).unwrap_single();
        let st = Tuple::Node(result_stride.into_iter().map(Tuple::Leaf).collect()).unwrap_single();
        return Ok(Layout::raw(sh, st));
    }
    result_shape.push(rest_shape);
    result_stride.push(last_stride.scale(&rest_stride));
    Ok(Layout::raw(
        Tuple::Node(result_shape.into_iter().map(Tuple::Leaf).collect()),
        Tuple::Node(result_stride.into_iter().map(Tuple::Leaf).collect()),
    ))
}
