//! `complement`: the layout of the offsets a layout does not reach, up to a cotarget.

use super::coalesce::coalesce_shape;
use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::{compact_major, Layout};
use crate::lerr;
use crate::tuple::{IntTuple, Tuple};

/// CuTe's `ceil_div` on shapes: tuple-by-integer folds the divisor through the modes.
pub(crate) fn ceil_div_tuple(a: &IntTuple, b: &Int) -> Option<IntTuple> {
    match a {
        Tuple::Leaf(x) => Some(Tuple::Leaf(x.ceil_div(b)?)),
        Tuple::Node(m) => {
            let mut rest = b.clone();
            let mut out = Vec::with_capacity(m.len());
            for ai in m {
                let ai_size = ai.size();
                out.push(ceil_div_tuple(ai, &rest)?);
                rest = rest.ceil_div(&ai_size)?;
            }
            Some(Tuple::Node(out))
        }
    }
}

impl Layout {
    /// The complement of `self` with respect to `cotarget` (CuTe's `complement(layout,
    /// cotarget)`): a layout of the offsets `self` does not produce, ordered, with size at
    /// least `cotarget / size(filter(self))`. `cotarget` is an integer or a shape.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, s};
    /// let a = Layout::new(tuple!(2, 2), tuple!(1, 6)).unwrap();
    /// assert_eq!(a.complement(&tuple!(24)).unwrap().to_string(), "(3,2):(2,12)");
    /// ```
    pub fn complement(&self, cotarget: &IntTuple) -> Result<Layout> {
        let f = self.filter();
        complement_impl(&f, cotarget).map_err(|e| e.within("complement", vec![self.to_string(), cotarget.to_string()]))
    }

    /// The complement with respect to `cosize(filter(self))` (CuTe's `complement(layout)`).
    pub fn complement_full(&self) -> Result<Layout> {
        let f = self.filter();
        complement_impl(&f, &Tuple::Leaf(f.cosize())).map_err(|e| e.within("complement", vec![self.to_string()]))
    }
}

fn complement_impl(f: &Layout, cotarget: &IntTuple) -> Result<Layout> {
    let op = "complement";
    // Irreducible rank-1 stride-0 layout (filter gives 1:0).
    if let Some(d) = f.stride().leaf() {
        if d.is_const(0) {
            return Ok(Layout::col_major(coalesce_shape(cotarget)));
        }
    }
    let mut shape: Vec<Int> = f.shape().leaves().into_iter().cloned().collect();
    let mut stride: Vec<Int> = f.stride().leaves().into_iter().cloned().collect();
    let r = shape.len();
    if r > 1 && !stride.iter().all(Int::is_static) {
        return Err(lerr!(
            op,
            [f],
            ErrorKind::NeedsStatic("dynamic-stride complement only for rank-1 layouts".into())
        ));
    }
    let mut result_shape: Vec<Int> = Vec::new();
    let mut result_stride: Vec<Int> = vec![s(1)];
    for i in 0..r.saturating_sub(1) {
        // Smallest remaining stride (first one on ties), all static here.
        let (min_idx, min_stride) = stride
            .iter()
            .enumerate()
            .min_by_key(|(_, d)| d.as_static().unwrap_or(i64::MAX))
            .map(|(k, d)| (k, d.clone()))
            .ok_or_else(|| lerr!(op, [f], ErrorKind::Invalid("empty layout".into())))?;
        let new_shape = min_stride
            .div(&result_stride[i])
            .ok_or_else(|| lerr!(op, [f], ErrorKind::Arithmetic("division by zero stride".into())))?;
        if new_shape.is_const(0) {
            return Err(lerr!(op, [f], ErrorKind::NonInjective("two modes overlap".into())));
        }
        let new_stride = min_stride.mul(&shape[min_idx]);
        shape.remove(min_idx);
        stride.remove(min_idx);
        result_shape.push(new_shape);
        result_stride.push(new_stride);
    }
    let last = result_stride.last().cloned().unwrap_or(s(1));
    let new_shape = stride[0]
        .div(&last)
        .ok_or_else(|| lerr!(op, [f], ErrorKind::Arithmetic("division by zero stride".into())))?;
    if new_shape.is_const(0) {
        return Err(lerr!(op, [f], ErrorKind::NonInjective("two modes overlap".into())));
    }
    result_shape.push(new_shape);
    let new_stride = stride[0].mul(&shape[0]);
    let rest_shape = coalesce_shape(
        &ceil_div_tuple(cotarget, &new_stride)
            .ok_or_else(|| lerr!(op, [f, cotarget], ErrorKind::Arithmetic("ceil_div by zero".into())))?,
    );
    let rest_stride = compact_major(&rest_shape, &new_stride, true);
    let full = Layout::raw(
        Tuple::node([
            Tuple::Node(result_shape.into_iter().map(Tuple::Leaf).collect()),
            rest_shape,
        ]),
        Tuple::node([
            Tuple::Node(result_stride.into_iter().map(Tuple::Leaf).collect()),
            rest_stride,
        ]),
    );
    Ok(full.coalesce())
}
