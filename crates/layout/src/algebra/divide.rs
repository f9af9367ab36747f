//! Divides: split a layout into tiles and the layout of the tiles.

use super::Tiler;
use crate::error::{ErrorKind, Result};
use crate::layout::{Layout, SliceCoord};
use crate::lerr;
use crate::stride::StrideElem;
use crate::tuple::Tuple;

impl<D: StrideElem> Layout<D> {
    /// CuTe's `logical_divide(layout, tiler)`: `composition(layout, (tiler, complement(tiler,
    /// shape(coalesce(layout)))))`, by mode for tuple tilers.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, algebra::Tiler};
    /// let l = Layout::new(tuple!(4, 2, 3), tuple!(2, 1, 8)).unwrap();
    /// let t = Layout::new(tuple!(4), tuple!(2)).unwrap();
    /// assert_eq!(l.logical_divide(&Tiler::Layout(t)).unwrap().to_string(), "((2,2),(2,3)):((4,1),(2,8))");
    /// ```
    pub fn logical_divide(&self, tiler: &Tiler) -> Result<Layout<D>> {
        match tiler {
            Tiler::Tuple(ts) => self.per_mode("logical_divide", tiler, ts, &|m, t| m.logical_divide(t)),
            Tiler::Underscore => Ok(self.clone()),
            Tiler::Int(_) | Tiler::Layout(_) => {
                let t = tiler
                    .as_layout()
                    .ok_or_else(|| lerr!("logical_divide", [self, tiler], ErrorKind::Invalid("bad tiler".into())))?;
                let target = self.coalesce().shape().clone();
                let comp = t
                    .complement(&target)
                    .map_err(|e| e.within("logical_divide", vec![self.to_string(), tiler.to_string()]))?;
                self.compose(&Layout::concat(&[t, comp]))
                    .map_err(|e| e.within("logical_divide", vec![self.to_string(), tiler.to_string()]))
            }
        }
    }

    /// CuTe's `zipped_divide`: `((tile modes...), (rest modes...))`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout, algebra::Tiler};
    /// let l = Layout::col_major(tuple!(128, 64));
    /// let z = l.zipped_divide(&Tiler::shape(&[32, 16])).unwrap();
    /// assert_eq!(z.to_string(), "((32,16),(4,4)):((1,128),(32,2048))");
    /// ```
    pub fn zipped_divide(&self, tiler: &Tiler) -> Result<Layout<D>> {
        let div = self.logical_divide(tiler)?;
        tile_unzip(&div, tiler).map_err(|e| e.within("zipped_divide", vec![self.to_string(), tiler.to_string()]))
    }

    /// CuTe's `tiled_divide`: `((tile modes...), rest0, rest1, ...)`.
    pub fn tiled_divide(&self, tiler: &Tiler) -> Result<Layout<D>> {
        let z = self.zipped_divide(tiler)?;
        let r1 = z.shape().get(1).map(Tuple::rank).unwrap_or(1);
        z.slice(&Tuple::node([Tuple::Leaf(None), repeat_underscore(r1)]))
    }

    /// CuTe's `flat_divide`: `(tile modes..., rest modes...)`.
    pub fn flat_divide(&self, tiler: &Tiler) -> Result<Layout<D>> {
        let z = self.zipped_divide(tiler)?;
        let r0 = z.shape().get(0).map(Tuple::rank).unwrap_or(1);
        let r1 = z.shape().get(1).map(Tuple::rank).unwrap_or(1);
        let c: SliceCoord = Tuple::node([repeat_underscore(r0), repeat_underscore(r1)]);
        z.slice(&c)
    }
}

/// CuTe's `repeat<N>(_)`: `_` itself for N = 1, else a tuple of N underscores.
pub(crate) fn repeat_underscore(n: usize) -> SliceCoord {
    if n == 1 {
        Tuple::Leaf(None)
    } else {
        Tuple::Node(vec![Tuple::Leaf(None); n])
    }
}

/// CuTe's `zip2_by`: gather the first and second sub-modes of the rank-2 modes at the
/// terminals of `guide` into `((firsts...), (seconds..., untouched modes...))`.
pub(crate) fn zip2_by<T: Clone>(t: &Tuple<T>, guide: &Tuple<()>) -> Option<Tuple<T>> {
    match guide {
        Tuple::Node(g) => {
            let tm = t.modes();
            if tm.len() < g.len() {
                return None;
            }
            let mut firsts = Vec::new();
            let mut seconds = Vec::new();
            for (ti, gi) in tm.iter().zip(g) {
                let split = zip2_by(ti, gi)?;
                firsts.push(split.get(0)?.clone());
                seconds.push(split.get(1)?.clone());
            }
            seconds.extend(tm[g.len()..].iter().cloned());
            Some(Tuple::node([Tuple::Node(firsts), Tuple::Node(seconds)]))
        }
        Tuple::Leaf(()) => match t {
            Tuple::Node(m) if m.len() == 2 => Some(t.clone()),
            _ => None,
        },
    }
}

/// CuTe's `tile_unzip(layout, tiler)`.
pub(crate) fn tile_unzip<D: StrideElem>(l: &Layout<D>, tiler: &Tiler) -> Result<Layout<D>> {
    let g = tiler.profile();
    match (zip2_by(l.shape(), &g), zip2_by(l.stride(), &g)) {
        (Some(sh), Some(st)) => Ok(Layout::raw(sh, st)),
        _ => Err(lerr!(
            "tile_unzip",
            [l, tiler],
            ErrorKind::Rank("mode is not rank-2 where the tiler has a terminal".into())
        )),
    }
}
