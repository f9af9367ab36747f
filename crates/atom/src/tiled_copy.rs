//! [`TiledCopy`]: a copy atom tiled over threads and values, with CuTe's partitioning
//! (`copy_atom.hpp`): `tidfrg_S/D`, `partition_S/D`, `retile`, `get_layoutS/D_TV`, and
//! the constructors `make_tiled_copy`, `make_tiled_copy_A/B/C`.

use crate::copy::CopyAtom;
use crate::tiled_mma::{fixed, underscores, TiledMma};
use rcute_layout::algebra::Tiler;
use rcute_layout::{s, Int, IntTuple, Layout, Result, SliceCoord, Tuple};

/// A tiled copy (CuTe's `TiledCopy<Atom, LayoutCopy_TV, ShapeTiler_MN>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TiledCopy {
    /// The atom.
    pub atom: CopyAtom,
    /// `(thread index, value)` -> coordinate index in the tile.
    pub layout_tv: Layout,
    /// The tile shape the TV layout covers.
    pub tiler_mn: IntTuple,
}

/// CuTe's `zip` of a rank-2 layout of rank-2 modes: `((a,b),(c,d))` -> `((a,c),(b,d))`.
fn zip2(l: &Layout) -> Result<Layout> {
    let m0 = l.mode(0)?;
    let m1 = l.mode(1)?;
    let a = m0.modes();
    let b = m1.modes();
    if a.len() != b.len() {
        return Err(rcute_layout::LayoutError::new(
            "zip",
            vec![l.to_string()],
            rcute_layout::ErrorKind::Rank("modes of different rank".into()),
        ));
    }
    let pairs: Vec<Layout> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| Layout::concat(&[x.clone(), y.clone()]))
        .collect();
    Ok(Layout::concat(&pairs))
}

impl TiledCopy {
    /// CuTe's `make_tiled_copy_impl(atom, layout_tv, tiler)`; checks that the tiled
    /// thread and value counts are multiples of the atom's.
    pub fn new(atom: CopyAtom, layout_tv: Layout, tiler_mn: IntTuple) -> Result<TiledCopy> {
        let tc = TiledCopy {
            atom,
            layout_tv,
            tiler_mn,
        };
        let (nt, nv) = (tc.tiled_num_thr(), tc.tiled_num_val());
        let (at, av) = (tc.atom_num_thr(), tc.atom_num_val());
        let bad = match (nt.as_static(), nv.as_static(), at.as_static(), av.as_static()) {
            (Some(a), Some(b), Some(c), Some(d)) => c == 0 || d == 0 || a % c != 0 || b % d != 0,
            _ => false,
        };
        if bad {
            return Err(rcute_layout::LayoutError::new(
                "TiledCopy",
                vec![tc.layout_tv.to_string(), tc.atom.val_ref.to_string()],
                rcute_layout::ErrorKind::Divisibility(
                    "tiled thread/value counts are not multiples of the atom's".into(),
                ),
            ));
        }
        Ok(tc)
    }

    /// CuTe's `make_tiled_copy(atom, thr_layout, val_layout)`: threads laid out by
    /// `thr_layout` ((m,n) -> thread index), each owning a `val_layout` block.
    pub fn make(atom: CopyAtom, thr_layout: &Layout, val_layout: &Layout) -> Result<TiledCopy> {
        let layout_mn = thr_layout.raked_product(val_layout)?;
        let shape_tv = Tuple::node([Tuple::Leaf(thr_layout.size()), Tuple::Leaf(val_layout.size())]);
        let layout_tv = layout_mn.right_inverse().compose(&Layout::col_major(shape_tv))?;
        let tiler = layout_mn.shape().product_each();
        TiledCopy::new(atom, layout_tv, tiler)
    }

    /// CuTe's `make_tiled_copy_A(atom, mma)`.
    pub fn for_mma_a(atom: CopyAtom, mma: &TiledMma) -> Result<TiledCopy> {
        let tiler = Tuple::node([Tuple::Leaf(mma.tile_size(0)), Tuple::Leaf(mma.tile_size(2))]);
        TiledCopy::new(atom, mma.layout_a_tv()?, tiler)
    }
    /// CuTe's `make_tiled_copy_B(atom, mma)`.
    pub fn for_mma_b(atom: CopyAtom, mma: &TiledMma) -> Result<TiledCopy> {
        let tiler = Tuple::node([Tuple::Leaf(mma.tile_size(1)), Tuple::Leaf(mma.tile_size(2))]);
        TiledCopy::new(atom, mma.layout_b_tv()?, tiler)
    }
    /// CuTe's `make_tiled_copy_C(atom, mma)`.
    pub fn for_mma_c(atom: CopyAtom, mma: &TiledMma) -> Result<TiledCopy> {
        let tiler = Tuple::node([Tuple::Leaf(mma.tile_size(0)), Tuple::Leaf(mma.tile_size(1))]);
        TiledCopy::new(atom, mma.layout_c_tv()?, tiler)
    }

    /// Threads of the atom (`AtomNumThr`).
    pub fn atom_num_thr(&self) -> Int {
        self.atom.val_ref.mode(0).map(|m| m.size()).unwrap_or(s(0))
    }
    /// Values of the atom (`AtomNumVal`).
    pub fn atom_num_val(&self) -> Int {
        self.atom.val_ref.mode(1).map(|m| m.size()).unwrap_or(s(0))
    }
    /// Threads of the tiled copy (`TiledNumThr`, `size(tiled_copy)`).
    pub fn tiled_num_thr(&self) -> Int {
        self.layout_tv.mode(0).map(|m| m.size()).unwrap_or(s(0))
    }
    /// Values per thread of the tiled copy (`TiledNumVal`).
    pub fn tiled_num_val(&self) -> Int {
        self.layout_tv.mode(1).map(|m| m.size()).unwrap_or(s(0))
    }

    fn ref2(&self, trg: &Layout) -> Result<Layout> {
        self.atom.val_ref.right_inverse().compose(trg)
    }

    /// CuTe's `tile2thrfrg(tensor, ref2trg)`: `(Thr, (AtomV, RestV), Rest...)`.
    pub fn tile2thrfrg(&self, tensor: &Layout, ref2trg: &Layout) -> Result<Layout> {
        let shape = Tuple::node([Tuple::Leaf(self.atom_num_thr()), Tuple::Leaf(self.atom_num_val())]);
        let atom_layout_tv = self.layout_tv.zipped_divide(&Tiler::from_shape(&shape))?;
        let trg_layout_tv =
            atom_layout_tv.compose_tiler(&Tiler::Tuple(vec![Tiler::Layout(ref2trg.clone()), Tiler::Underscore]))?;
        let profile: Tuple<()> = Tuple::node([Tuple::Leaf(()), Tuple::node([Tuple::Leaf(()), Tuple::Leaf(())])]);
        let thrval2mn = zip2(&trg_layout_tv)?.coalesce_by(&profile)?;
        let tv_tensor = tensor.compose_tiler(&Tiler::Tuple(vec![Tiler::Layout(thrval2mn), Tiler::Underscore]))?;
        let coord: SliceCoord = Tuple::node([Tuple::node([Tuple::Leaf(None), Tuple::Leaf(None)]), Tuple::Leaf(None)]);
        tv_tensor.slice(&coord)
    }

    /// CuTe's `tidfrg_S(stensor)`: `(Thr, Val, Rest...)` of the source.
    pub fn tidfrg_s(&self, src: &Layout) -> Result<Layout> {
        let z = src.zipped_divide(&Tiler::from_shape(&self.tiler_mn))?;
        self.tile2thrfrg(&z, &self.ref2(&self.atom.val_src)?)
    }
    /// CuTe's `tidfrg_D(dtensor)`: `(Thr, Val, Rest...)` of the destination.
    pub fn tidfrg_d(&self, dst: &Layout) -> Result<Layout> {
        let z = dst.zipped_divide(&Tiler::from_shape(&self.tiler_mn))?;
        self.tile2thrfrg(&z, &self.ref2(&self.atom.val_dst)?)
    }

    fn partition(&self, t: Layout, rank: usize, thr_idx: &Int) -> Result<(Layout, Int)> {
        let coord: SliceCoord = Tuple::node([fixed(thr_idx), Tuple::Leaf(None), underscores(rank)]);
        t.slice_and_offset(&coord)
    }
    /// CuTe's `ThrCopy::partition_S`: `(CPY, CPY_M, CPY_N, ...)` and the thread's offset.
    pub fn partition_s(&self, src: &Layout, thr_idx: &Int) -> Result<(Layout, Int)> {
        self.partition(self.tidfrg_s(src)?, src.rank(), thr_idx)
    }
    /// CuTe's `ThrCopy::partition_D`.
    pub fn partition_d(&self, dst: &Layout, thr_idx: &Int) -> Result<(Layout, Int)> {
        self.partition(self.tidfrg_d(dst)?, dst.rank(), thr_idx)
    }

    /// CuTe's `retile(tensor)`: view a thread's fragment (e.g. from a tiled MMA
    /// partition) with this copy's value grouping `((AtomV, RestV), Rest...)`.
    pub fn retile(&self, frag: &Layout) -> Result<Layout> {
        let r = frag.rank();
        let v = frag.mode(0)?.size();
        let n = self.tiled_num_thr().mul(&v).as_static().ok_or_else(|| {
            rcute_layout::LayoutError::new(
                "retile",
                vec![frag.to_string()],
                rcute_layout::ErrorKind::NeedsStatic("thread/value counts".into()),
            )
        })?;
        let frg_layout_mn = self
            .layout_tv
            .right_inverse()
            .compose(&Layout::col_major(self.tiler_mn.clone()))?
            .upcast(n)?;
        let frg_layout_v = Layout::col_major(Tuple::Leaf(v.clone()))
            .logical_product(&Tiler::Layout(frg_layout_mn.right_inverse()))?
            .zipped_divide(&Tiler::Int(self.atom_num_val()))?;
        let tiler = frg_layout_mn.shape().product_each().prepend(Tuple::Leaf(v));
        let t_tensor = frag.zipped_divide(&Tiler::from_shape(&tiler))?;
        let v_tensor = t_tensor.compose_tiler(&Tiler::Tuple(vec![Tiler::Layout(frg_layout_v), Tiler::Underscore]))?;
        let rest: SliceCoord = if r == 1 {
            fixed(&s(0))
        } else {
            let mut m = vec![fixed(&s(0))];
            m.extend(std::iter::repeat_n(Tuple::Leaf(None), r - 1));
            Tuple::Node(m)
        };
        v_tensor.slice(&Tuple::node([Tuple::Leaf(None), rest]))
    }

    fn layout_x_tv(&self, trg: &Layout) -> Result<Layout> {
        let ref_s = Layout::col_major(Tuple::node([self.tiler_mn.clone(), Tuple::Leaf(s(1))]));
        let t = self.tile2thrfrg(&ref_s, &self.ref2(trg)?)?;
        t.slice(&Tuple::node([Tuple::Leaf(None), Tuple::Leaf(None), fixed(&s(0))]))
    }
    /// CuTe's `get_layoutS_TV`: `(thread, value)` -> source coordinate index in the tile.
    pub fn layout_s_tv(&self) -> Result<Layout> {
        self.layout_x_tv(&self.atom.val_src)
    }
    /// CuTe's `get_layoutD_TV`.
    pub fn layout_d_tv(&self) -> Result<Layout> {
        self.layout_x_tv(&self.atom.val_dst)
    }
}
