//! [`ComposedLayout`]: CuTe's `ComposedLayout<Swizzle<B,M,S>, Offset, Layout>`, the
//! function `c -> swizzle(offset + inner(c))`, and [`AnyLayout`], a plain or composed
//! layout behind one interface.
//!
//! As in CuTe, the inner layout defines the domain: shape, size, rank, depth, cosize and
//! every tiling operation (divides, products, `tile_to_shape`, coalesce, sub-layouts) act
//! on the inner layout and keep the swizzle and the offset. Slicing follows CuTe's
//! swizzle-aware `slice_and_offset`: the part of the fixed coordinates that feeds the
//! swizzle's Y/Z bits stays inside the composed layout's offset, the rest is returned as
//! a plain offset, and when the remaining layout no longer touches paired Y and Z bits the
//! result decays to a plain layout.
//!
//! ```
//! use rcute_layout::{tuple, Layout, Swizzle};
//! let sw = Swizzle::new(3, 3, 3).unwrap();
//! let atom = sw.compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
//! assert_eq!(atom.to_string(), "Sw<3,3,3> o 0 o (8,64):(64,1)");
//! assert_eq!(atom.crd2idx(&tuple!(1, 8)).unwrap().as_static(), Some(64)); // 72 -> 72 ^ 8
//! ```

use crate::algebra::Tiler;
use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::{Layout, SliceCoord};
use crate::lerr;
use crate::swizzle::{int_xor, Swizzle};
use crate::tuple::{IntTuple, Tuple};
use std::fmt;

/// CuTe's `ComposedLayout<Swizzle<B,M,S>, Offset, Layout>`: `c -> outer(offset + inner(c))`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ComposedLayout {
    /// The swizzle applied last (CuTe's `layout_a()`).
    pub outer: Swizzle,
    /// The offset added before swizzling (CuTe's `offset()`).
    pub offset: Int,
    /// The layout defining the domain (CuTe's `layout_b()`).
    pub inner: Layout,
}

/// A plain [`Layout`] or a swizzled [`ComposedLayout`], with the operations both support.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum AnyLayout {
    /// A plain layout.
    Plain(Layout),
    /// A swizzle composed with an offset and a layout.
    Composed(ComposedLayout),
}

impl Swizzle {
    /// CuTe's `composition(Swizzle, Layout)`: `self o 0 o layout`; the identity swizzle
    /// (`B == 0`) gives the layout back.
    ///
    /// ```
    /// use rcute_layout::{tuple, AnyLayout, Layout, Swizzle};
    /// let l = Layout::new(tuple!(8, 8), tuple!(8, 1)).unwrap();
    /// assert!(matches!(Swizzle::new(0, 4, 3).unwrap().compose_layout(&l), AnyLayout::Plain(_)));
    /// ```
    pub fn compose_layout(&self, layout: &Layout) -> AnyLayout {
        ComposedLayout::make(*self, s(0), layout.clone())
    }
    /// CuTe's `make_layout(Swizzle)`: the swizzle over its whole active range,
    /// `composition(sw, 2^(M+B+|S|):1)`.
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// assert_eq!(Swizzle::new(2, 1, 3).unwrap().as_layout().to_string(), "Sw<2,1,3> o 0 o 64:1");
    /// ```
    pub fn as_layout(&self) -> AnyLayout {
        let n = 1i64 << (self.bits() as i64 + self.base() as i64 + self.shift().unsigned_abs() as i64);
        self.compose_layout(&Layout::col_major(Tuple::Leaf(s(n))))
    }
}

/// CuTe's `composition(Layout, Swizzle)`: a swizzle on the image of `a`'s Y and Z bits,
/// composed with `a` (defined when `a` maps the masks to a valid swizzle).
///
/// ```
/// use rcute_layout::{composed::compose_with_swizzle, tuple, Layout, Swizzle};
/// let a = Layout::new(tuple!(1024), tuple!(2)).unwrap();
/// let r = compose_with_swizzle(&a, &Swizzle::new(3, 3, 3).unwrap()).unwrap();
/// assert_eq!(r.to_string(), "Sw<3,4,3> o 0 o 1024:2");
/// ```
pub fn compose_with_swizzle(a: &Layout, sw: &Swizzle) -> Result<AnyLayout> {
    let ctx = || vec![a.to_string(), sw.to_string()];
    let y = a.at(sw.yyy_mask()).map_err(|e| e.within("composition", ctx()))?;
    let z = a.at(sw.zzz_mask()).map_err(|e| e.within("composition", ctx()))?;
    match (y.as_static(), z.as_static()) {
        (Some(y), Some(z)) => {
            let nsw = Swizzle::from_masks(y, z).map_err(|e| e.within("composition", ctx()))?;
            Ok(nsw.compose_layout(a))
        }
        _ => Err(lerr!(
            "composition",
            [a, sw],
            ErrorKind::NeedsStatic("the layout must map the swizzle masks to static offsets".into())
        )),
    }
}

fn all_underscore(c: &SliceCoord) -> bool {
    c.leaves().iter().all(|x| x.is_none())
}

fn pow2(k: i64) -> Int {
    s(1i64 << k)
}

impl ComposedLayout {
    /// The composed layout `outer o offset o inner`, kept as given.
    pub fn new(outer: Swizzle, offset: impl Into<Int>, inner: Layout) -> ComposedLayout {
        ComposedLayout {
            outer,
            offset: offset.into(),
            inner,
        }
    }
    /// CuTe's `composition(swizzle, offset, layout)`, with CuTe's simplification: the
    /// identity swizzle with a static zero offset is just the layout.
    ///
    /// ```
    /// use rcute_layout::{tuple, ComposedLayout, Layout, Swizzle, s};
    /// let l = Layout::new(tuple!(4, 8), tuple!(8, 1)).unwrap();
    /// let id = Swizzle::new(0, 3, 0).unwrap();
    /// assert_eq!(ComposedLayout::make(id, s(0), l.clone()).to_string(), "(4,8):(8,1)");
    /// assert_eq!(ComposedLayout::make(id, s(4), l).to_string(), "Sw<0,3,0> o 4 o (4,8):(8,1)");
    /// ```
    pub fn make(outer: Swizzle, offset: Int, inner: Layout) -> AnyLayout {
        if outer.is_identity() && offset.is_const(0) {
            AnyLayout::Plain(inner)
        } else {
            AnyLayout::Composed(ComposedLayout { outer, offset, inner })
        }
    }
    fn rewrap(&self, inner: Layout) -> AnyLayout {
        ComposedLayout::make(self.outer, self.offset.clone(), inner)
    }
    fn ctx(&self) -> Vec<String> {
        vec![self.to_string()]
    }

    /// The shape (of the inner layout).
    pub fn shape(&self) -> &IntTuple {
        self.inner.shape()
    }
    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.inner.rank()
    }
    /// Nesting depth.
    pub fn depth(&self) -> usize {
        self.inner.depth()
    }
    /// Number of coordinates.
    pub fn size(&self) -> Int {
        self.inner.size()
    }
    /// CuTe's `cosize` of a swizzled layout: the cosize of the inner layout.
    pub fn cosize(&self) -> Int {
        self.inner.cosize()
    }
    /// True when the inner layout and the offset are static.
    pub fn is_static(&self) -> bool {
        self.inner.is_static() && self.offset.is_static()
    }
    /// Evaluate at a coordinate: `outer(offset + inner(coord))`.
    ///
    /// ```
    /// use rcute_layout::{tuple, ComposedLayout, Layout, Swizzle, d};
    /// let c = ComposedLayout::new(Swizzle::new(2, 0, 2).unwrap(), 0, Layout::new(tuple!(4, 4), tuple!(4, 1)).unwrap());
    /// assert_eq!(c.crd2idx(&tuple!(1, 0)).unwrap().as_static(), Some(5));
    /// assert_eq!(c.crd2idx(&tuple!("i", 0)).unwrap().to_string(), "(i*4)^(((i*4)&12)>>2)");
    /// ```
    pub fn crd2idx(&self, coord: &IntTuple) -> Result<Int> {
        let v = self.inner.crd2idx(coord)?;
        Ok(self.outer.apply_expr(&self.offset.add(&v)))
    }
    /// Evaluate at a 1-D index.
    pub fn call(&self, i: impl Into<Int>) -> Result<Int> {
        self.crd2idx(&Tuple::Leaf(i.into()))
    }
    /// Evaluate at a static index.
    pub fn at(&self, i: i64) -> Result<Int> {
        self.call(s(i))
    }
    /// All values of a static composed layout, in index order.
    pub fn values(&self) -> Result<Vec<i64>> {
        let off = self
            .offset
            .as_static()
            .ok_or_else(|| lerr!("values", [self], ErrorKind::NeedsStatic("dynamic offset".into())))?;
        Ok(self
            .inner
            .values()?
            .into_iter()
            .map(|v| self.outer.apply(off + v))
            .collect())
    }

    /// Mode `i` (CuTe's `layout<i>` / `get<i>`), keeping swizzle and offset.
    pub fn mode(&self, i: usize) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.mode(i)?))
    }
    /// Nested sub-layout `get<i0, i1, ...>`.
    pub fn get(&self, path: &[usize]) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.get(path)?))
    }
    /// Modes `[b, e)`.
    pub fn take(&self, b: usize, e: usize) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.take(b, e)?))
    }
    /// Flatten the inner layout.
    pub fn flatten(&self) -> AnyLayout {
        self.rewrap(self.inner.flatten())
    }
    /// Group modes `[b, e)`.
    pub fn group(&self, b: usize, e: usize) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.group(b, e)?))
    }
    /// Pad with `1:0` modes up to rank `n`.
    pub fn append_to(&self, n: usize) -> AnyLayout {
        self.rewrap(self.inner.append_to(n))
    }
    /// CuTe's `coalesce` of the inner layout.
    pub fn coalesce(&self) -> AnyLayout {
        self.rewrap(self.inner.coalesce())
    }
    /// CuTe's `coalesce(layout, profile)` of the inner layout.
    pub fn coalesce_by<U>(&self, profile: &Tuple<U>) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.coalesce_by(profile)?))
    }
    /// CuTe's `filter` of the inner layout.
    pub fn filter(&self) -> AnyLayout {
        self.rewrap(self.inner.filter())
    }

    /// CuTe's `composition(ComposedLayout, layout)`: the inner layout is composed.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, Swizzle};
    /// let atom = Swizzle::new(3, 3, 3).unwrap().compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    /// let row_major = Layout::new(tuple!(64, 8), tuple!(8, 1)).unwrap();
    /// assert_eq!(atom.compose(&row_major.into()).unwrap().to_string(), "Sw<3,3,3> o 0 o (64,8):(1,64)");
    /// ```
    pub fn compose(&self, rhs: &Layout) -> Result<AnyLayout> {
        Ok(self.rewrap(
            self.inner
                .compose(rhs)
                .map_err(|e| e.within("composition", vec![self.to_string(), rhs.to_string()]))?,
        ))
    }
    /// Composition with a tiler (applied to the inner layout).
    pub fn compose_tiler(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(
            self.inner
                .compose_tiler(tiler)
                .map_err(|e| e.within("composition", vec![self.to_string(), tiler.to_string()]))?,
        ))
    }
    /// CuTe's `logical_divide` (of the inner layout).
    pub fn logical_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.logical_divide(tiler)?))
    }
    /// CuTe's `zipped_divide` (of the inner layout).
    ///
    /// ```
    /// use rcute_layout::{algebra::Tiler, tuple, Layout, Swizzle};
    /// let sw = Swizzle::new(3, 3, 3).unwrap();
    /// let smem = sw.compose_layout(&Layout::col_major(tuple!(64, 64)));
    /// let z = smem.zipped_divide(&Tiler::shape(&[16, 8])).unwrap();
    /// assert_eq!(z.to_string(), "Sw<3,3,3> o 0 o ((16,8),(4,8)):((1,64),(16,512))");
    /// ```
    pub fn zipped_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.zipped_divide(tiler)?))
    }
    /// CuTe's `tiled_divide` (of the inner layout).
    pub fn tiled_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.tiled_divide(tiler)?))
    }
    /// CuTe's `flat_divide` (of the inner layout).
    pub fn flat_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.flat_divide(tiler)?))
    }
    /// CuTe's `logical_product` (of the inner layout).
    pub fn logical_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.logical_product(tiler)?))
    }
    /// CuTe's `zipped_product` (of the inner layout).
    pub fn zipped_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.zipped_product(tiler)?))
    }
    /// CuTe's `tiled_product` (of the inner layout).
    pub fn tiled_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.tiled_product(tiler)?))
    }
    /// CuTe's `flat_product` (of the inner layout).
    pub fn flat_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.flat_product(tiler)?))
    }
    /// CuTe's `blocked_product` (of the inner layout).
    pub fn blocked_product(&self, tiler: &Layout) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.blocked_product(tiler)?))
    }
    /// CuTe's `raked_product` (of the inner layout).
    pub fn raked_product(&self, tiler: &Layout) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.raked_product(tiler)?))
    }
    /// CuTe's `tile_to_shape` of a swizzle atom: the inner layout is tiled, the swizzle kept.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, Swizzle};
    /// let atom = Swizzle::new(3, 3, 3).unwrap().compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    /// let smem = atom.tile_to_shape(&tuple!(128, 64), None).unwrap();
    /// assert_eq!(smem.to_string(), "Sw<3,3,3> o 0 o ((8,16),(64,1)):((64,512),(1,0))");
    /// ```
    pub fn tile_to_shape(&self, trg_shape: &IntTuple, order: Option<&IntTuple>) -> Result<AnyLayout> {
        Ok(self.rewrap(self.inner.tile_to_shape(trg_shape, order)?))
    }
    /// CuTe's `complement` of a composed layout: the complement of the inner layout.
    pub fn complement(&self, cotarget: &IntTuple) -> Result<Layout> {
        self.inner.complement(cotarget)
    }

    /// CuTe's `right_inverse` of a swizzled layout with a zero offset:
    /// `right_inverse(inner) o swizzle`, itself a swizzled layout.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, Swizzle};
    /// let c = Swizzle::new(2, 0, 2).unwrap().compose_layout(&Layout::new(tuple!(4, 4), tuple!(4, 1)).unwrap());
    /// let inv = c.right_inverse().unwrap();
    /// for i in 0..16 {
    ///     let v = c.at(i).unwrap();
    ///     assert_eq!(inv.crd2idx(&rcute_layout::Tuple::Leaf(v)).unwrap().as_static(), Some(i));
    /// }
    /// ```
    pub fn right_inverse(&self) -> Result<AnyLayout> {
        if !self.offset.is_const(0) {
            return Err(lerr!(
                "right_inverse",
                [self],
                ErrorKind::NeedsStatic("the inverse of a composed layout needs a static zero offset".into())
            ));
        }
        compose_with_swizzle(&self.inner.right_inverse(), &self.outer)
            .map_err(|e| e.within("right_inverse", self.ctx()))
    }
    /// CuTe's `left_inverse` of a swizzled layout with a zero offset.
    pub fn left_inverse(&self) -> Result<AnyLayout> {
        if !self.offset.is_const(0) {
            return Err(lerr!(
                "left_inverse",
                [self],
                ErrorKind::NeedsStatic("the inverse of a composed layout needs a static zero offset".into())
            ));
        }
        compose_with_swizzle(&self.inner.left_inverse()?, &self.outer).map_err(|e| e.within("left_inverse", self.ctx()))
    }

    /// CuTe's `upcast<N>`: swizzle, offset and inner layout all upcast.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, Swizzle};
    /// let halfs = Swizzle::new(3, 3, 3).unwrap().compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    /// assert_eq!(halfs.upcast(8).unwrap().to_string(), "Sw<3,0,3> o 0 o (8,8):(8,1)");
    /// assert_eq!(halfs.downcast(2).unwrap().to_string(), "Sw<3,4,3> o 0 o (8,128):(128,1)");
    /// ```
    pub fn upcast(&self, n: i64) -> Result<AnyLayout> {
        let off = self
            .offset
            .div(&s(n))
            .ok_or_else(|| lerr!("upcast", [self, n], ErrorKind::Arithmetic("division by zero".into())))?;
        if let (Some(o), true) = (self.offset.as_static(), n != 0) {
            if o.wrapping_rem(n) != 0 {
                return Err(lerr!(
                    "upcast",
                    [self, n],
                    ErrorKind::Divisibility(format!("offset {o} is not a multiple of {n}"))
                ));
            }
        }
        Ok(ComposedLayout::make(self.outer.upcast(n)?, off, self.inner.upcast(n)?))
    }
    /// CuTe's `downcast<N>`: swizzle, offset and inner layout all downcast.
    pub fn downcast(&self, n: i64) -> Result<AnyLayout> {
        Ok(ComposedLayout::make(
            self.outer.downcast(n)?,
            self.offset.mul(&s(n)),
            self.inner.downcast(n)?,
        ))
    }
    /// CuTe's `recast_layout<Old,New>` by bit widths.
    pub fn recast(&self, old_bits: i64, new_bits: i64) -> Result<AnyLayout> {
        if old_bits <= 0 || new_bits <= 0 {
            return Err(lerr!(
                "recast_layout",
                [self, old_bits, new_bits],
                ErrorKind::Invalid("bit widths must be positive".into())
            ));
        }
        let g = crate::int::gcd(old_bits, new_bits);
        let (num, den) = (new_bits / g, old_bits / g);
        let up = if num == 1 {
            AnyLayout::Composed(self.clone())
        } else {
            self.upcast(num)?
        };
        if den == 1 {
            Ok(up)
        } else {
            up.downcast(den)
        }
    }

    /// Slice: keep the modes where `coord` has `_` (see [`ComposedLayout::slice_and_offset`]).
    pub fn slice(&self, coord: &SliceCoord) -> Result<AnyLayout> {
        Ok(self.slice_and_offset(coord)?.0)
    }

    /// CuTe's `slice_and_offset` for swizzled layouts: the sub-layout of the `_` modes and
    /// the offset that can be moved out of the swizzle.
    ///
    /// The fixed coordinates' contribution is split into the bits the swizzle reads or
    /// writes (kept in the composed layout's offset, combined by XOR as CuTe's mixed bits
    /// are) and the other bits (returned). When the remaining layout does not touch a Y
    /// bit and its paired Z bit, and the kept offset is known, the result decays to a plain
    /// layout whose strides carry the swizzle, with the full offset returned.
    ///
    /// ```
    /// use rcute_layout::{tuple, AnyLayout, Layout, Swizzle, SliceCoord, Tuple, s};
    /// let atom = Swizzle::new(3, 3, 3).unwrap().compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    /// let row1: SliceCoord = Tuple::node([Tuple::Leaf(Some(s(1))), Tuple::Leaf(None)]);
    /// let (l, off) = atom.slice_and_offset(&row1).unwrap();
    /// assert!(matches!(l, AnyLayout::Plain(_)));   // one row only touches Z bits: decays
    /// assert_eq!(off, s(72));
    /// assert_eq!(l.to_string(), "((8,2,4)):((1,-8,16))");
    /// // A column touches only Y bits: it decays too, the swizzle moves into the strides.
    /// let col8: SliceCoord = Tuple::node([Tuple::Leaf(None), Tuple::Leaf(Some(s(8)))]);
    /// let (l, off) = atom.slice_and_offset(&col8).unwrap();
    /// assert_eq!((l.to_string(), off), ("((2,4)):((56,144))".to_string(), s(8)));
    /// // The second 8x64 block of a 16x64 tile still needs the swizzle; its offset (512)
    /// // lies above the swizzled bits and moves out.
    /// let tile = atom.tile_to_shape(&rcute_layout::tuple!(16, 64), None).unwrap();
    /// let blk: SliceCoord = Tuple::node([Tuple::node([Tuple::Leaf(None), Tuple::Leaf(Some(s(1)))]), Tuple::Leaf(None)]);
    /// let (l, off) = tile.slice_and_offset(&blk).unwrap();
    /// assert_eq!((l.to_string(), off), ("Sw<3,3,3> o 0 o (8,(64,1)):(64,(1,0))".to_string(), s(512)));
    /// ```
    pub fn slice_and_offset(&self, coord: &SliceCoord) -> Result<(AnyLayout, Int)> {
        let sw = self.outer;
        let sliced = self.inner.slice(coord)?;
        if all_underscore(coord) {
            return Ok((self.rewrap(sliced), s(0)));
        }
        let generic = |this: &ComposedLayout| -> Result<(AnyLayout, Int)> {
            let (sub, off) = this.inner.slice_and_offset(coord)?;
            Ok((ComposedLayout::make(sw, this.offset.add(&off), sub), s(0)))
        };
        if sw.is_identity() {
            return generic(self);
        }
        let (b, m, sa) = (sw.bits() as i64, sw.base() as i64, sw.shift().unsigned_abs() as i64);
        let shape = Tuple::node([pow2(m), pow2(b), pow2(sa - b), pow2(b), s(1)].map(Tuple::Leaf));
        let mk = |st: [Int; 5]| Layout::from_parts(shape.clone(), Tuple::node(st.map(Tuple::Leaf)));
        let anti_zy = mk([s(1), s(0), pow2(m + b), s(0), pow2(m + b + sa)])?;
        let only_zy = mk([s(0), pow2(m), s(0), pow2(m + sa), s(0)])?;
        // Projections of the inner layout onto the swizzle's Y/Z bits and the other bits.
        // If the inner layout does not compose with them (strides that are not aligned to
        // the bit fields), fall back to keeping the whole offset in the composed layout.
        let (Ok(inner_only), Ok(inner_anti)) = (only_zy.compose(&self.inner), anti_zy.compose(&self.inner)) else {
            return generic(self);
        };
        let (sliced_only, diced_only) = inner_only.slice_and_offset(coord)?;
        let (_, diced_anti) = inner_anti.slice_and_offset(coord)?;
        let offset_only_zy = int_xor(&self.offset, &diced_only);
        let active = sliced_only.size().sub(&s(1));
        let active = sliced_only.call(active).ok().and_then(|v| v.as_static());
        let reducible = active.is_some_and(|a| a & !sw.apply(a) == 0);
        let off_known = offset_only_zy.as_static();
        match (reducible, off_known) {
            (true, Some(off)) => {
                let z = sw.zzz_mask() & -sw.zzz_mask();
                let y = sw.yyy_mask() & -sw.yyy_mask();
                let strides = |z_first: bool| -> Tuple<Int> {
                    let v: Vec<Tuple<Int>> = (0..b)
                        .map(|i| {
                            let st = if z_first {
                                if off & (y << i) == 0 {
                                    z << i
                                } else {
                                    -(z << i)
                                }
                            } else if off & (z << i) == 0 {
                                (y + z) << i
                            } else {
                                (y - z) << i
                            };
                            Tuple::Leaf(s(st))
                        })
                        .collect();
                    if v.len() == 1 {
                        v[0].clone()
                    } else {
                        Tuple::Node(v)
                    }
                };
                let twos = |n: i64| -> IntTuple {
                    if n == 1 {
                        Tuple::Leaf(s(2))
                    } else {
                        Tuple::Node(vec![Tuple::Leaf(s(2)); n as usize])
                    }
                };
                let sw_layout = Layout::from_parts(
                    Tuple::node([
                        Tuple::Leaf(pow2(m)),
                        twos(b),
                        Tuple::Leaf(pow2(sa - b)),
                        twos(b),
                        Tuple::Leaf(s(1)),
                    ]),
                    Tuple::node([
                        Tuple::Leaf(s(1)),
                        strides(z < y),
                        Tuple::Leaf(pow2(m + b)),
                        strides(z > y),
                        Tuple::Leaf(pow2(m + b + sa)),
                    ]),
                )?;
                let decayed = sw_layout.compose(&sliced).map_err(|e| {
                    e.within(
                        "slice_and_offset",
                        vec![crate::layout::fmt_slice(coord), self.to_string()],
                    )
                })?;
                Ok((AnyLayout::Plain(decayed), s(sw.apply(off)).add(&diced_anti)))
            }
            _ => Ok((ComposedLayout::make(sw, offset_only_zy, sliced), diced_anti)),
        }
    }
}

impl AnyLayout {
    /// The shape.
    pub fn shape(&self) -> &IntTuple {
        match self {
            AnyLayout::Plain(l) => l.shape(),
            AnyLayout::Composed(c) => c.shape(),
        }
    }
    /// The plain layout, if this is one.
    pub fn as_plain(&self) -> Option<&Layout> {
        match self {
            AnyLayout::Plain(l) => Some(l),
            AnyLayout::Composed(_) => None,
        }
    }
    /// The composed layout, if this is one.
    pub fn as_composed(&self) -> Option<&ComposedLayout> {
        match self {
            AnyLayout::Plain(_) => None,
            AnyLayout::Composed(c) => Some(c),
        }
    }
    /// The swizzle part (CuTe's `get_swizzle_portion`; `Sw<0,4,3>` for plain layouts).
    pub fn swizzle_portion(&self) -> Swizzle {
        match self {
            AnyLayout::Plain(_) => Swizzle::identity(),
            AnyLayout::Composed(c) => c.outer,
        }
    }
    /// The layout part (CuTe's `get_nonswizzle_portion`).
    pub fn nonswizzle_portion(&self) -> &Layout {
        match self {
            AnyLayout::Plain(l) => l,
            AnyLayout::Composed(c) => &c.inner,
        }
    }
    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.shape().rank()
    }
    /// Nesting depth.
    pub fn depth(&self) -> usize {
        self.shape().depth()
    }
    /// Number of coordinates.
    pub fn size(&self) -> Int {
        self.shape().size()
    }
    /// Codomain extent (of the inner layout for composed layouts, as CuTe).
    pub fn cosize(&self) -> Int {
        self.nonswizzle_portion().cosize()
    }
    /// Evaluate at a coordinate.
    pub fn crd2idx(&self, coord: &IntTuple) -> Result<Int> {
        match self {
            AnyLayout::Plain(l) => l.crd2idx(coord),
            AnyLayout::Composed(c) => c.crd2idx(coord),
        }
    }
    /// Evaluate at a 1-D index.
    pub fn call(&self, i: impl Into<Int>) -> Result<Int> {
        self.crd2idx(&Tuple::Leaf(i.into()))
    }
    /// Evaluate at a static index.
    pub fn at(&self, i: i64) -> Result<Int> {
        self.call(s(i))
    }
    /// All values of a static layout in index order.
    pub fn values(&self) -> Result<Vec<i64>> {
        match self {
            AnyLayout::Plain(l) => l.values(),
            AnyLayout::Composed(c) => c.values(),
        }
    }
    fn map(
        &self,
        f: impl FnOnce(&Layout) -> Result<Layout>,
        g: impl FnOnce(&ComposedLayout) -> Result<AnyLayout>,
    ) -> Result<AnyLayout> {
        match self {
            AnyLayout::Plain(l) => Ok(AnyLayout::Plain(f(l)?)),
            AnyLayout::Composed(c) => g(c),
        }
    }
    /// Mode `i`.
    pub fn mode(&self, i: usize) -> Result<AnyLayout> {
        self.map(|l| l.mode(i), |c| c.mode(i))
    }
    /// Nested sub-layout.
    pub fn get(&self, path: &[usize]) -> Result<AnyLayout> {
        self.map(|l| l.get(path), |c| c.get(path))
    }
    /// Modes `[b, e)`.
    pub fn take(&self, b: usize, e: usize) -> Result<AnyLayout> {
        self.map(|l| l.take(b, e), |c| c.take(b, e))
    }
    /// Flatten.
    pub fn flatten(&self) -> AnyLayout {
        match self {
            AnyLayout::Plain(l) => AnyLayout::Plain(l.flatten()),
            AnyLayout::Composed(c) => c.flatten(),
        }
    }
    /// Group modes `[b, e)`.
    pub fn group(&self, b: usize, e: usize) -> Result<AnyLayout> {
        self.map(|l| l.group(b, e), |c| c.group(b, e))
    }
    /// Coalesce (the inner layout of a composed layout).
    pub fn coalesce(&self) -> AnyLayout {
        match self {
            AnyLayout::Plain(l) => AnyLayout::Plain(l.coalesce()),
            AnyLayout::Composed(c) => c.coalesce(),
        }
    }
    /// Filter (the inner layout of a composed layout).
    pub fn filter(&self) -> AnyLayout {
        match self {
            AnyLayout::Plain(l) => AnyLayout::Plain(l.filter()),
            AnyLayout::Composed(c) => c.filter(),
        }
    }
    /// CuTe's `composition(self, rhs)` for any combination of plain and composed
    /// operands (a composed right operand needs a zero offset, as in CuTe).
    ///
    /// ```
    /// use rcute_layout::{tuple, AnyLayout, Layout, Swizzle};
    /// let a = AnyLayout::Plain(Layout::new(tuple!(1024), tuple!(2)).unwrap());
    /// let b = Swizzle::new(3, 3, 3).unwrap().compose_layout(&Layout::new(tuple!(8, 64), tuple!(64, 1)).unwrap());
    /// assert_eq!(a.compose(&b).unwrap().to_string(), "Sw<3,4,3> o 0 o (8,64):(128,2)");
    /// ```
    pub fn compose(&self, rhs: &AnyLayout) -> Result<AnyLayout> {
        match (self, rhs) {
            (AnyLayout::Plain(a), AnyLayout::Plain(b)) => Ok(AnyLayout::Plain(a.compose(b)?)),
            (AnyLayout::Composed(a), AnyLayout::Plain(b)) => a.compose(b),
            (_, AnyLayout::Composed(b)) => {
                if !b.offset.is_const(0) {
                    return Err(lerr!(
                        "composition",
                        [self, rhs],
                        ErrorKind::Invalid("a composed right operand needs a zero offset".into())
                    ));
                }
                match self {
                    // A o (S o 0 o B) = (A o S) o B
                    AnyLayout::Plain(a) => {
                        compose_with_swizzle(a, &b.outer)?.compose(&AnyLayout::Plain(b.inner.clone()))
                    }
                    // (S0 o O o A) o (S1 o 0 o B) = S0 o O o ((A o S1) o B), representable
                    // when A o S1 is a plain layout.
                    AnyLayout::Composed(a) => match compose_with_swizzle(&a.inner, &b.outer)? {
                        AnyLayout::Plain(l) => {
                            Ok(ComposedLayout::make(a.outer, a.offset.clone(), l.compose(&b.inner)?))
                        }
                        AnyLayout::Composed(_) => Err(lerr!(
                            "composition",
                            [self, rhs],
                            ErrorKind::Invalid(
                                "two non-trivial swizzles do not compose into one swizzled layout".into()
                            )
                        )),
                    },
                }
            }
        }
    }
    /// Composition with a tiler.
    pub fn compose_tiler(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.compose_tiler(tiler), |c| c.compose_tiler(tiler))
    }
    /// CuTe's `logical_divide`.
    pub fn logical_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.logical_divide(tiler), |c| c.logical_divide(tiler))
    }
    /// CuTe's `zipped_divide`.
    pub fn zipped_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.zipped_divide(tiler), |c| c.zipped_divide(tiler))
    }
    /// CuTe's `tiled_divide`.
    pub fn tiled_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.tiled_divide(tiler), |c| c.tiled_divide(tiler))
    }
    /// CuTe's `flat_divide`.
    pub fn flat_divide(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.flat_divide(tiler), |c| c.flat_divide(tiler))
    }
    /// CuTe's `logical_product`.
    pub fn logical_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.logical_product(tiler), |c| c.logical_product(tiler))
    }
    /// CuTe's `zipped_product`.
    pub fn zipped_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.zipped_product(tiler), |c| c.zipped_product(tiler))
    }
    /// CuTe's `tiled_product`.
    pub fn tiled_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.tiled_product(tiler), |c| c.tiled_product(tiler))
    }
    /// CuTe's `flat_product`.
    pub fn flat_product(&self, tiler: &Tiler) -> Result<AnyLayout> {
        self.map(|l| l.flat_product(tiler), |c| c.flat_product(tiler))
    }
    /// CuTe's `blocked_product`.
    pub fn blocked_product(&self, tiler: &Layout) -> Result<AnyLayout> {
        self.map(|l| l.blocked_product(tiler), |c| c.blocked_product(tiler))
    }
    /// CuTe's `raked_product`.
    pub fn raked_product(&self, tiler: &Layout) -> Result<AnyLayout> {
        self.map(|l| l.raked_product(tiler), |c| c.raked_product(tiler))
    }
    /// CuTe's `tile_to_shape`.
    pub fn tile_to_shape(&self, trg_shape: &IntTuple, order: Option<&IntTuple>) -> Result<AnyLayout> {
        self.map(
            |l| l.tile_to_shape(trg_shape, order),
            |c| c.tile_to_shape(trg_shape, order),
        )
    }
    /// CuTe's `complement` (of the inner layout for composed layouts).
    pub fn complement(&self, cotarget: &IntTuple) -> Result<Layout> {
        self.nonswizzle_portion().complement(cotarget)
    }
    /// CuTe's `right_inverse`.
    pub fn right_inverse(&self) -> Result<AnyLayout> {
        self.map(|l| Ok(l.right_inverse()), |c| c.right_inverse())
    }
    /// CuTe's `left_inverse`.
    pub fn left_inverse(&self) -> Result<AnyLayout> {
        self.map(|l| l.left_inverse(), |c| c.left_inverse())
    }
    /// CuTe's `upcast<N>`.
    pub fn upcast(&self, n: i64) -> Result<AnyLayout> {
        self.map(|l| l.upcast(n), |c| c.upcast(n))
    }
    /// CuTe's `downcast<N>`.
    pub fn downcast(&self, n: i64) -> Result<AnyLayout> {
        self.map(|l| l.downcast(n), |c| c.downcast(n))
    }
    /// CuTe's `recast_layout` by bit widths.
    pub fn recast(&self, old_bits: i64, new_bits: i64) -> Result<AnyLayout> {
        self.map(|l| l.recast(old_bits, new_bits), |c| c.recast(old_bits, new_bits))
    }
    /// CuTe's `slice`.
    pub fn slice(&self, coord: &SliceCoord) -> Result<AnyLayout> {
        Ok(self.slice_and_offset(coord)?.0)
    }
    /// CuTe's `dice` (plain layouts: the layout of the fixed modes; composed layouts keep
    /// swizzle and offset around the diced inner layout).
    pub fn dice(&self, coord: &SliceCoord) -> Result<AnyLayout> {
        self.map(|l| l.dice(coord), |c| Ok(c.rewrap(c.inner.dice(coord)?)))
    }
    /// CuTe's `slice_and_offset`.
    pub fn slice_and_offset(&self, coord: &SliceCoord) -> Result<(AnyLayout, Int)> {
        match self {
            AnyLayout::Plain(l) => {
                let (sub, off) = l.slice_and_offset(coord)?;
                Ok((AnyLayout::Plain(sub), off))
            }
            AnyLayout::Composed(c) => c.slice_and_offset(coord),
        }
    }
}

impl From<Layout> for AnyLayout {
    fn from(l: Layout) -> Self {
        AnyLayout::Plain(l)
    }
}
impl From<ComposedLayout> for AnyLayout {
    fn from(c: ComposedLayout) -> Self {
        AnyLayout::Composed(c)
    }
}

impl fmt::Display for ComposedLayout {
    /// CuTe's print form `Sw<B,M,S> o offset o layout`; `{:#}` keeps the underscores of
    /// static integers (`Sw<3,3,3> o _0 o (_8,_64):(_64,_1)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{} o {:#} o {:#}", self.outer, self.offset, self.inner)
        } else {
            write!(f, "{} o {} o {}", self.outer, self.offset, self.inner)
        }
    }
}

impl fmt::Debug for ComposedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}

impl fmt::Display for AnyLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, f.alternate()) {
            (AnyLayout::Plain(l), false) => write!(f, "{l}"),
            (AnyLayout::Plain(l), true) => write!(f, "{l:#}"),
            (AnyLayout::Composed(c), false) => write!(f, "{c}"),
            (AnyLayout::Composed(c), true) => write!(f, "{c:#}"),
        }
    }
}

impl fmt::Debug for AnyLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#}")
    }
}
