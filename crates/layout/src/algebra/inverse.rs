//! `right_inverse` and `left_inverse`.

use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::Layout;
use crate::lerr;
use crate::tuple::Tuple;

/// Flat modes of `coalesce(l)` and the exclusive prefix products of its shape.
fn prepared(l: &Layout) -> (Vec<Int>, Vec<Int>, Vec<Int>) {
    let c = l.coalesce();
    let shape: Vec<Int> = c.shape().leaves().into_iter().cloned().collect();
    let stride: Vec<Int> = c.stride().leaves().into_iter().cloned().collect();
    let mut pre = vec![s(1)];
    for x in &shape {
        let next = pre.last().cloned().unwrap_or(s(1)).mul(x);
        pre.push(next);
    }
    (shape, stride, pre)
}

fn build(shape: Vec<Int>, stride: Vec<Int>) -> Layout {
    Layout::raw(
        Tuple::Node(shape.into_iter().map(Tuple::Leaf).collect()),
        Tuple::Node(stride.into_iter().map(Tuple::Leaf).collect()),
    )
    .coalesce()
}

impl Layout {
    /// A layout `R` with `self(R(i)) == i` for all `i < size(R)`, as large as possible
    /// (CuTe's `right_inverse`). Dynamic strides are ignored, as in CuTe.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(4, 2), tuple!(2, 1)).unwrap();
    /// assert_eq!(l.right_inverse().to_string(), "(2,4):(4,1)");
    /// ```
    pub fn right_inverse(&self) -> Layout {
        let (shape, stride, pre) = prepared(self);
        let mut idx: Vec<usize> = (0..stride.len()).filter(|&i| stride[i].is_static()).collect();
        idx.sort_by_key(|&i| stride[i].as_static().unwrap_or(i64::MAX));
        let mut rs = vec![s(1)];
        let mut rd = vec![s(0)];
        let mut curr = s(1);
        for i in idx {
            if curr.is_static() && stride[i] == curr {
                rs.push(shape[i].clone());
                rd.push(pre[i].clone());
                curr = shape[i].mul(&stride[i]);
            }
        }
        build(rs, rd)
    }

    /// A layout `L` with `self(L(self(i))) == self(i)` (CuTe's `left_inverse`); a true left
    /// inverse when `self` is injective. Needs static strides.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(4, 2), tuple!(2, 1)).unwrap();
    /// assert_eq!(l.left_inverse().unwrap().to_string(), "(2,4):(4,1)");
    /// ```
    pub fn left_inverse(&self) -> Result<Layout> {
        let (shape, stride, pre) = prepared(self);
        if !stride.iter().all(Int::is_static) {
            return Err(lerr!(
                "left_inverse",
                [self],
                ErrorKind::NeedsStatic("left inverse requires static strides".into())
            ));
        }
        let mut idx: Vec<usize> = (0..stride.len()).collect();
        idx.sort_by_key(|&i| stride[i].as_static().unwrap_or(0));
        let mut rs: Vec<Int> = Vec::new();
        let mut rd = vec![s(0)];
        for &i in &idx {
            let d = stride[i].as_static().unwrap_or(0);
            if d == 0 {
                continue;
            }
            let size: Int = rs.iter().fold(s(1), |a, b| a.mul(b));
            let sz = size.as_static().ok_or_else(|| {
                lerr!(
                    "left_inverse",
                    [self],
                    ErrorKind::NeedsStatic("dynamic shape before a stride".into())
                )
            })?;
            if sz == 0 || d.wrapping_rem(sz) != 0 {
                return Err(lerr!(
                    "left_inverse",
                    [self],
                    ErrorKind::Divisibility(format!("stride {d} is not a multiple of {sz}"))
                ));
            }
            rs.push(s(d / sz));
            rd.push(pre[i].clone());
        }
        let back = idx.last().copied().unwrap_or(0);
        rs.push(shape.get(back).cloned().unwrap_or(s(1)));
        Ok(build(rs, rd))
    }
}
