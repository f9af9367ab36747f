//! `max_common_layout` and `max_common_vector`: the contiguous elements two layouts agree on.

use crate::error::Result;
use crate::int::{s, Int};
use crate::layout::Layout;
use crate::tuple::Tuple;

impl Layout {
    fn common_with(&self, b: &Layout) -> Result<(Layout, Option<Layout>)> {
        let inv_b = b.right_inverse();
        let common = self.compose(&inv_b)?.coalesce();
        let m0 = common.mode(0)?;
        let keep = m0.shape().leaf().is_some_and(Int::is_static) && m0.stride().leaf().is_some_and(|d| d.is_const(1));
        Ok((inv_b, keep.then_some(m0)))
    }

    /// CuTe's `max_common_layout(a, b)`: a layout `R` over the largest run of
    /// contiguous elements with `a(R(i)) == i` and `b(R(i)) == i`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let a = Layout::new(tuple!(4, 8), tuple!(1, 4)).unwrap();
    /// let b = Layout::new(tuple!(4, 8), tuple!(1, 8)).unwrap();
    /// assert_eq!(a.max_common_layout(&b).unwrap().to_string(), "4:1");
    /// ```
    pub fn max_common_layout(&self, b: &Layout) -> Result<Layout> {
        let (inv_b, m0) = self
            .common_with(b)
            .map_err(|e| e.within("max_common_layout", vec![self.to_string(), b.to_string()]))?;
        match m0 {
            Some(m0) => inv_b.compose(&m0),
            None => Ok(Layout::raw(Tuple::Leaf(s(1)), Tuple::Leaf(s(0)))),
        }
    }

    /// CuTe's `max_common_vector(a, b)`: how many contiguous elements correspond.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, s};
    /// let a = Layout::new(tuple!(4, 8), tuple!(1, 4)).unwrap();
    /// assert_eq!(a.max_common_vector(&a).unwrap(), s(32));
    /// ```
    pub fn max_common_vector(&self, b: &Layout) -> Result<Int> {
        let (_, m0) = self
            .common_with(b)
            .map_err(|e| e.within("max_common_vector", vec![self.to_string(), b.to_string()]))?;
        Ok(m0.map(|m| m.size()).unwrap_or(s(1)))
    }
}
