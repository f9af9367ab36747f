//! Compact layouts with a chosen mode order: `make_ordered_layout`, `make_layout_like`.

use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::{compact_major, Layout};
use crate::lerr;
use crate::tuple::{IntTuple, Tuple};

/// CuTe's `compact_order(shape, order)`: compact strides where modes with smaller order
/// values are packed first; dynamic order values count as larger than every static one and
/// are ordered left to right; equal orders start at the same stride.
///
/// ```
/// use rcute_layout::{algebra::compact_order, tuple};
/// assert_eq!(compact_order(&tuple!(2, 2, 2, 2), &tuple!(0, 2, 3, 1)).unwrap().to_string(), "(1,4,8,2)");
/// ```
pub fn compact_order(shape: &IntTuple, order: &IntTuple) -> Result<IntTuple> {
    let err = || {
        lerr!(
            "compact_order",
            [shape, order],
            ErrorKind::Rank("order is not weakly congruent with shape".into())
        )
    };
    let ref_shape = product_like(shape, order).ok_or_else(err)?.flatten_to_tuple();
    let flat_order: Vec<Int> = order.leaves().into_iter().cloned().collect();
    let max_order = flat_order.iter().filter_map(Int::as_static).fold(0, i64::max);
    // In i128 so that dynamic orders rank after every static one even next to i64::MAX.
    let ref_order: Vec<i128> = flat_order
        .iter()
        .enumerate()
        .map(|(k, o)| o.as_static().map_or(max_order as i128 + 1 + k as i128, i128::from))
        .collect();
    let ref_shape: Vec<Int> = ref_shape.leaves().into_iter().cloned().collect();
    // The static order of every leaf (its rank among the reference orders).
    let ranks: Vec<i64> = ref_order
        .iter()
        .map(|o| ref_order.iter().filter(|r| *r < o).count() as i64)
        .collect();
    let ref_order = ranks;
    let new_order = IntTuple::from_static(&ref_order).unflatten(order).ok_or_else(err)?;
    build(shape, &new_order, &ref_shape, &ref_order).ok_or_else(err)
}

fn build(shape: &IntTuple, order: &IntTuple, ref_shape: &[Int], ref_order: &[i64]) -> Option<IntTuple> {
    match order {
        Tuple::Node(os) => {
            let ss = match shape {
                Tuple::Node(ss) if ss.len() == os.len() => ss,
                _ => return None,
            };
            Some(Tuple::Node(
                ss.iter()
                    .zip(os)
                    .map(|(si, oi)| build(si, oi, ref_shape, ref_order))
                    .collect::<Option<_>>()?,
            ))
        }
        Tuple::Leaf(o) => {
            let o = o.as_static()?;
            let start = ref_shape
                .iter()
                .zip(ref_order)
                .filter(|(_, &ro)| ro < o)
                .fold(s(1), |acc, (sh, _)| acc.mul(sh));
            Some(compact_major(shape, &start, true))
        }
    }
}

/// CuTe's `product_like(shape, guide)`: the product of `shape` at the leaves of `guide`.
fn product_like(shape: &IntTuple, guide: &IntTuple) -> Option<IntTuple> {
    match guide {
        Tuple::Leaf(_) => Some(Tuple::Leaf(shape.size())),
        Tuple::Node(g) => {
            let ss = match shape {
                Tuple::Node(ss) if ss.len() == g.len() => ss,
                _ => return None,
            };
            Some(Tuple::Node(
                ss.iter()
                    .zip(g)
                    .map(|(a, b)| product_like(a, b))
                    .collect::<Option<_>>()?,
            ))
        }
    }
}

impl Layout {
    /// CuTe's `make_ordered_layout(shape, order)`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::ordered(&tuple!(2, 2, 2, 2), &tuple!(0, 2, 3, 1)).unwrap();
    /// assert_eq!(l.to_string(), "(2,2,2,2):(1,4,8,2)");
    /// ```
    pub fn ordered(shape: &IntTuple, order: &IntTuple) -> Result<Layout> {
        let stride = compact_order(shape, order)
            .map_err(|e| e.within("make_ordered_layout", vec![shape.to_string(), order.to_string()]))?;
        Ok(Layout::raw(shape.clone(), stride))
    }

    /// CuTe's `make_layout_like(layout)`: compact, with the mode order of `self`'s strides;
    /// static-0 strides stay 0.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(2, 2, 2, 2), tuple!(0, 2, 4, 1)).unwrap();
    /// assert_eq!(l.layout_like().unwrap().to_string(), "(2,2,2,2):(0,2,4,1)");
    /// ```
    pub fn layout_like(&self) -> Result<Layout> {
        let filtered = self.filter_zeros();
        let stride = compact_order(filtered.shape(), self.stride())
            .map_err(|e| e.within("make_layout_like", vec![self.to_string()]))?;
        Ok(Layout::raw(self.shape().clone(), stride))
    }
}
