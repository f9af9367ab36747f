//! Products: repeat a layout (the block) over the layout of a tiler.

use super::divide::{repeat_underscore, tile_unzip};
use super::Tiler;
use crate::error::{ErrorKind, Result};
use crate::layout::{Layout, SliceCoord};
use crate::lerr;
use crate::tuple::{IntTuple, Tuple};

impl Layout {
    /// CuTe's `logical_product(block, tiler)`: `(block, complement(block, size(block) *
    /// cosize(tiler)) ∘ tiler)`, by mode for tuple tilers.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, algebra::Tiler};
    /// let a = Layout::new(tuple!(2, 2), tuple!(4, 1)).unwrap();
    /// let b = Layout::new(tuple!(6), tuple!(1)).unwrap();
    /// assert_eq!(a.logical_product(&Tiler::Layout(b)).unwrap().to_string(), "((2,2),(2,3)):((4,1),(2,8))");
    /// ```
    pub fn logical_product(&self, tiler: &Tiler) -> Result<Layout> {
        let ctx = || vec![self.to_string(), tiler.to_string()];
        match tiler {
            Tiler::Tuple(ts) => self.per_mode("logical_product", tiler, ts, &|m, t| m.logical_product(t)),
            Tiler::Underscore => Ok(self.clone()),
            Tiler::Int(_) | Tiler::Layout(_) => {
                let t = tiler
                    .as_layout()
                    .ok_or_else(|| lerr!("logical_product", [self, tiler], ErrorKind::Invalid("bad tiler".into())))?;
                let cotarget = self.size().mul(&t.cosize());
                let comp = self
                    .complement(&Tuple::Leaf(cotarget))
                    .map_err(|e| e.within("logical_product", ctx()))?;
                let rep = comp.compose(&t).map_err(|e| e.within("logical_product", ctx()))?;
                Ok(Layout::concat(&[self.clone(), rep]))
            }
        }
    }

    /// CuTe's `zipped_product`: `((block modes...), (tiler modes...))`.
    pub fn zipped_product(&self, tiler: &Tiler) -> Result<Layout> {
        let p = self.logical_product(tiler)?;
        tile_unzip(&p, tiler).map_err(|e| e.within("zipped_product", vec![self.to_string(), tiler.to_string()]))
    }

    /// CuTe's `tiled_product`: `((block modes...), tiler0, tiler1, ...)`.
    pub fn tiled_product(&self, tiler: &Tiler) -> Result<Layout> {
        let z = self.zipped_product(tiler)?;
        let r1 = z.shape().get(1).map(Tuple::rank).unwrap_or(1);
        z.slice(&Tuple::node([Tuple::Leaf(None), repeat_underscore(r1)]))
    }

    /// CuTe's `flat_product`: `(block modes..., tiler modes...)`.
    pub fn flat_product(&self, tiler: &Tiler) -> Result<Layout> {
        let z = self.zipped_product(tiler)?;
        let r0 = z.shape().get(0).map(Tuple::rank).unwrap_or(1);
        let r1 = z.shape().get(1).map(Tuple::rank).unwrap_or(1);
        let c: SliceCoord = Tuple::node([repeat_underscore(r0), repeat_underscore(r1)]);
        z.slice(&c)
    }

    /// CuTe's `blocked_product(block, tiler)`: each element of `tiler` is a copy of
    /// `block`; mode `i` of the result is `(block_i, tiler_i)`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let block = Layout::new(tuple!(2, 5), tuple!(5, 1)).unwrap();
    /// let tiler = Layout::new(tuple!(3, 4), tuple!(1, 3)).unwrap();
    /// assert_eq!(block.blocked_product(&tiler).unwrap().to_string(), "((2,3),(5,4)):((5,10),(1,30))");
    /// ```
    pub fn blocked_product(&self, tiler: &Layout) -> Result<Layout> {
        let (b, t) = self.product_parts("blocked_product", tiler)?;
        zip_layouts("blocked_product", &b, &t)
    }

    /// CuTe's `raked_product(block, tiler)`: like `blocked_product` with the copies
    /// interleaved; mode `i` of the result is `(tiler_i, block_i)`.
    pub fn raked_product(&self, tiler: &Layout) -> Result<Layout> {
        let (b, t) = self.product_parts("raked_product", tiler)?;
        zip_layouts("raked_product", &t, &b)
    }

    fn product_parts(&self, op: &'static str, tiler: &Layout) -> Result<(Layout, Layout)> {
        let r = self.rank().max(tiler.rank());
        let p = self
            .append_to(r)
            .logical_product(&Tiler::Layout(tiler.append_to(r)))
            .map_err(|e| e.within(op, vec![self.to_string(), tiler.to_string()]))?;
        Ok((p.mode(0)?, p.mode(1)?))
    }

    /// CuTe's `tile_to_shape(block, trg_shape, order)`: repeat `block` until it has shape
    /// `trg_shape`, stepping through the modes in `order` (column-major when `None`).
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let atom = Layout::new(tuple!(8, 8), tuple!(8, 1)).unwrap();
    /// let l = atom.tile_to_shape(&tuple!(32, 16), None).unwrap();
    /// assert_eq!(l.to_string(), "((8,4),(8,2)):((8,64),(1,256))");
    /// ```
    pub fn tile_to_shape(&self, trg_shape: &IntTuple, order: Option<&IntTuple>) -> Result<Layout> {
        let op = "tile_to_shape";
        let ctx = || vec![self.to_string(), trg_shape.to_string()];
        let r = trg_shape.rank();
        if self.rank() > r {
            return Err(lerr!(
                op,
                [self, trg_shape],
                ErrorKind::Rank("rank of layout must be <= rank of target shape".into())
            ));
        }
        let padded = self.append_to(r);
        let block_shape = padded.shape().product_each();
        let target_shape = trg_shape.product_each();
        let pairs: Vec<(crate::Int, crate::Int)> = target_shape
            .modes()
            .iter()
            .zip(block_shape.modes())
            .map(|(t, b)| (t.size(), b.size()))
            .collect();
        // CuTe asserts `evenly_divides(target_shape, block_shape)` at compile time when the
        // target shape is static: a block mode with a dynamic size cannot be checked
        // there, so CuTe rejects it (static target, dynamic block).
        if pairs.iter().all(|(t, _)| t.is_static()) && pairs.iter().any(|(_, b)| !b.is_static()) {
            return Err(lerr!(
                op,
                [self, trg_shape],
                ErrorKind::NeedsStatic(format!(
                    "a static target shape {target_shape} needs a static block shape, not {block_shape}"
                ))
            ));
        }
        let mut prod = Vec::with_capacity(pairs.len());
        for (t, b) in &pairs {
            if let (Some(tv), Some(bv)) = (t.as_static(), b.as_static()) {
                if bv == 0 || tv.wrapping_rem(bv) != 0 {
                    return Err(lerr!(
                        op,
                        [self, trg_shape],
                        ErrorKind::Divisibility(format!(
                            "block shape {block_shape} does not divide the target shape {target_shape}"
                        ))
                    ));
                }
            }
            prod.push(
                t.ceil_div(b)
                    .ok_or_else(|| lerr!(op, [self, trg_shape], ErrorKind::Arithmetic("empty block".into())))?,
            );
        }
        // CuTe's `product_each` wraps a non-tuple shape (`transform(wrap(t), product)`), so
        // the product shape is a tuple even for an integer target: `tile_to_shape(_4:_1, _12)`
        // is `((_4,(_3))):((_1,(_4)))`.
        let product_shape = Tuple::Node(prod.into_iter().map(Tuple::Leaf).collect());
        let ordered = match order {
            None => Layout::col_major(product_shape),
            Some(o) => Layout::ordered(&product_shape, o).map_err(|e| e.within(op, ctx()))?,
        };
        padded.blocked_product(&ordered).map_err(|e| e.within(op, ctx()))
    }
}

/// CuTe's `zip(layoutA, layoutB)`: mode `j` of the result is `(A_j, B_j)`; for rank-1
/// leaf operands the result is the single mode `((A, B))`.
fn zip_layouts(op: &'static str, a: &Layout, b: &Layout) -> Result<Layout> {
    fn zip<T: Clone>(x: &Tuple<T>, y: &Tuple<T>) -> Option<Tuple<T>> {
        match x {
            Tuple::Leaf(_) => Some(Tuple::Node(vec![Tuple::node([x.clone(), y.clone()])])),
            Tuple::Node(xs) => {
                let ys = match y {
                    Tuple::Node(ys) if ys.len() == xs.len() => ys,
                    _ => return None,
                };
                Some(Tuple::Node(
                    xs.iter()
                        .zip(ys)
                        .map(|(p, q)| Tuple::node([p.clone(), q.clone()]))
                        .collect(),
                ))
            }
        }
    }
    match (zip(a.shape(), b.shape()), zip(a.stride(), b.stride())) {
        (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
        _ => Err(lerr!(op, [a, b], ErrorKind::Rank("mismatched ranks in zip".into()))),
    }
}
