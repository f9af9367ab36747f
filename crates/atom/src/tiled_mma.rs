//! [`TiledMma`]: an MMA atom replicated over a layout of atoms (e.g. 2x2x1 warps) with
//! an optional permutation of each of M, N and K, and CuTe's partitioning functions
//! (`mma_atom.hpp`) evaluated at generation time.
//!
//! Tensors are represented by their layouts; a partition returns the per-thread layout
//! and the offset of the thread's first element (static, or symbolic for a symbolic
//! thread index such as `Int::from(Expr::var("tid"))`).

use crate::mma::MmaAtom;
use rcute_layout::algebra::Tiler;
use rcute_layout::{s, Int, IntTuple, Layout, Result, SliceCoord, Tuple};

/// An MMA atom tiled over threads and values (CuTe's `TiledMMA`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TiledMma {
    /// The atom.
    pub atom: MmaAtom,
    /// Rank-3 `(M,N,K)` layout of atoms -> atom index.
    pub atom_layout_mnk: Layout,
    /// Per-mode permutation tilers; `Tiler::Underscore` keeps the mode.
    pub permutation_mnk: [Tiler; 3],
    /// `tiled_product(thr_id, atom_layout_mnk)`: `(V, M, N, K)` -> thread index.
    pub thr_layout_vmnk: Layout,
}

/// A coordinate of `_` in every mode of a rank-`n` tuple (`_` itself for `n == 1`).
pub(crate) fn underscores(n: usize) -> SliceCoord {
    if n == 1 {
        Tuple::Leaf(None)
    } else {
        Tuple::Node(vec![Tuple::Leaf(None); n])
    }
}

pub(crate) fn fixed(i: &Int) -> SliceCoord {
    Tuple::Leaf(Some(i.clone()))
}

/// CuTe's `idx2crd(idx, shape, stride)`: decode an index through a layout's strides,
/// `(idx / stride) % shape` per leaf (shape-1 leaves give 0).
pub fn idx2crd_strided(idx: &Int, layout: &Layout) -> IntTuple {
    let pairs = layout
        .shape()
        .zip_with(layout.stride(), &mut |sh, st| (sh.clone(), st.clone()))
        .expect("layout shape and stride are congruent");
    pairs.map(&mut |(sh, st)| {
        if sh.is_const(1) || st.is_const(0) {
            s(0)
        } else {
            idx.div(st).and_then(|q| q.rem(sh)).unwrap_or(s(0))
        }
    })
}

/// CuTe's `Layout::get_flat_coord(idx)`: the hierarchical coordinate of `idx`, with each
/// top-level mode folded to a colexicographic index.
pub fn get_flat_coord(layout: &Layout, idx: &Int) -> Vec<Int> {
    let hier = idx2crd_strided(idx, layout);
    layout
        .shape()
        .modes()
        .iter()
        .zip(hier.modes())
        .map(|(sh, c)| rcute_layout::crd2idx(c, sh).unwrap_or(s(0)))
        .collect()
}

/// Size of a tiler (an integer, a layout, or a product of modes).
pub fn tiler_size(t: &Tiler) -> Int {
    match t {
        Tiler::Int(n) => n.clone(),
        Tiler::Layout(l) => l.size(),
        Tiler::Underscore => s(1),
        Tiler::Tuple(v) => v.iter().fold(s(1), |a, x| a.mul(&tiler_size(x))),
    }
}

/// CuTe's `make_fragment_like(layout)`: a compact register layout with the same shape,
/// mode 0 column-major (stride-0 modes kept broadcast) and the other modes ordered like
/// the input's strides.
pub fn make_fragment_like(layout: &Layout) -> Result<Layout> {
    let r = layout.rank();
    if r > 1 && layout.shape().is_static() {
        let m0 = layout.mode(0)?;
        let filtered = m0
            .stride()
            .zip_with(m0.shape(), &mut |d, sh| if d.is_const(0) { s(1) } else { sh.clone() })
            .unwrap_or_else(|| m0.shape().clone());
        let block_stride = Layout::col_major(filtered).stride().clone();
        let block = Layout::from_parts(m0.shape().clone(), block_stride)?;
        let rest = layout.take(1, r)?;
        let ordered = Layout::ordered(rest.shape(), rest.stride())?;
        block.tiled_product(&Tiler::Layout(ordered))
    } else {
        Ok(Layout::col_major(layout.shape().clone()))
    }
}

impl TiledMma {
    /// CuTe's `make_tiled_mma(atom, thr_layout, permutations)`: the atom layout is
    /// padded to rank 3 with `1:0`, the permutations with `_`.
    pub fn new(atom: MmaAtom, atom_layout: &Layout, permutations: &[Tiler]) -> Result<TiledMma> {
        let atom_layout_mnk = atom_layout.append_to(3);
        let mut perms = [Tiler::Underscore, Tiler::Underscore, Tiler::Underscore];
        for (i, p) in permutations.iter().take(3).enumerate() {
            perms[i] = p.clone();
        }
        let thr_layout_vmnk = atom.thr_id.tiled_product(&Tiler::Layout(atom_layout_mnk.clone()))?;
        Ok(TiledMma {
            atom,
            atom_layout_mnk,
            permutation_mnk: perms,
            thr_layout_vmnk,
        })
    }

    /// A single atom (`make_tiled_mma(atom)`).
    pub fn single(atom: MmaAtom) -> Result<TiledMma> {
        TiledMma::new(atom, &Layout::col_major(rcute_layout::tuple!(1, 1, 1)), &[])
    }

    /// Number of threads (`size(tiled_mma)`).
    pub fn num_threads(&self) -> Int {
        self.thr_layout_vmnk.size()
    }

    fn thr_size(&self, i: usize) -> Int {
        self.thr_layout_vmnk.mode(i).map(|m| m.size()).unwrap_or(s(1))
    }

    /// CuTe's `permutation_mnk<I>()`: the permutation, or `atom_size * atom_count` for `_`.
    pub fn permutation(&self, i: usize) -> Tiler {
        match &self.permutation_mnk[i] {
            Tiler::Underscore => Tiler::Int(s(self.atom.shape_mnk[i]).mul(&self.thr_size(i + 1))),
            p => p.clone(),
        }
    }

    /// CuTe's `tile_size_mnk<I>()`.
    pub fn tile_size(&self, i: usize) -> Int {
        tiler_size(&self.permutation(i))
    }

    fn thrfrg(&self, t: &Layout, mi: usize, ki: usize, atom_tv: &Layout, thr_modes: (usize, usize)) -> Result<Layout> {
        let t_tile = Tiler::Tuple(vec![self.permutation(mi), self.permutation(ki)]);
        let t_tensor = t.logical_divide(&t_tile)?;
        let a_tile = Tiler::Tuple(vec![
            Tiler::Int(s(self.atom.shape_mnk[mi])),
            Tiler::Int(s(self.atom.shape_mnk[ki])),
        ]);
        let a_tensor = t_tensor.zipped_divide(&a_tile)?;
        let tv_tensor =
            a_tensor.compose_tiler(&Tiler::Tuple(vec![Tiler::Layout(atom_tv.clone()), Tiler::Underscore]))?;
        let thr_tile = Tiler::Tuple(vec![
            Tiler::Underscore,
            Tiler::Tuple(vec![
                Tiler::Int(self.thr_size(thr_modes.0)),
                Tiler::Int(self.thr_size(thr_modes.1)),
            ]),
        ]);
        tv_tensor.zipped_divide(&thr_tile)
    }

    /// CuTe's `thrfrg_C`: `((ThrV,(ThrM,ThrN)),(FrgV,(RestM,RestN,...)))`.
    pub fn thrfrg_c(&self, c: &Layout) -> Result<Layout> {
        self.thrfrg(c, 0, 1, &self.atom.c_tv, (1, 2))
    }
    /// CuTe's `thrfrg_A`: `((ThrV,(ThrM,ThrK)),(FrgV,(RestM,RestK,...)))`.
    pub fn thrfrg_a(&self, a: &Layout) -> Result<Layout> {
        self.thrfrg(a, 0, 2, &self.atom.a_tv, (1, 3))
    }
    /// CuTe's `thrfrg_B`: `((ThrV,(ThrN,ThrK)),(FrgV,(RestN,RestK,...)))`.
    pub fn thrfrg_b(&self, b: &Layout) -> Result<Layout> {
        self.thrfrg(b, 1, 2, &self.atom.b_tv, (2, 3))
    }

    fn thridx_2_thrid(&self) -> Result<Layout> {
        let v = &self.thr_layout_vmnk;
        let with_comp = Layout::concat(&[v.clone(), v.complement_full()?]);
        let base = Layout::new(
            Tuple::node([Tuple::Leaf(v.size()), Tuple::Leaf(s(1))]),
            rcute_layout::tuple!(1, 0),
        )?;
        base.compose(&with_comp.right_inverse())
    }

    /// CuTe's `get_layoutC_TV`: `(thread index, value)` -> column-major index in the
    /// `(tile_M, tile_N)` tile.
    pub fn layout_c_tv(&self) -> Result<Layout> {
        let ref_c = Layout::col_major(Tuple::node([
            Tuple::Leaf(self.tile_size(0)),
            Tuple::Leaf(self.tile_size(1)),
        ]));
        let t = self.thridx_2_thrid()?;
        self.thrfrg_c(&ref_c)?
            .compose_tiler(&Tiler::Tuple(vec![Tiler::Layout(t), Tiler::Underscore]))
    }

    fn layout_ab_tv(&self, a: bool) -> Result<Layout> {
        let (i, thrfrg): (usize, Layout) = if a {
            let r = Layout::col_major(Tuple::node([
                Tuple::Leaf(self.tile_size(0)),
                Tuple::Leaf(self.tile_size(2)),
            ]));
            (0, self.thrfrg_a(&r)?)
        } else {
            let r = Layout::col_major(Tuple::node([
                Tuple::Leaf(self.tile_size(1)),
                Tuple::Leaf(self.tile_size(2)),
            ]));
            (1, self.thrfrg_b(&r)?)
        };
        let _ = i;
        let stride = if a {
            rcute_layout::tuple!(1, 0)
        } else {
            rcute_layout::tuple!(0, 1)
        };
        let bcast = Layout::new(
            Tuple::node([Tuple::Leaf(self.thr_size(1)), Tuple::Leaf(self.thr_size(2))]),
            stride,
        )?;
        let tile = Tiler::Tuple(vec![
            Tiler::Underscore,
            Tiler::Tuple(vec![Tiler::Layout(bcast), Tiler::Underscore]),
        ]);
        let t = self.thridx_2_thrid()?;
        thrfrg
            .compose_tiler(&Tiler::Tuple(vec![tile, Tiler::Underscore]))?
            .compose_tiler(&Tiler::Tuple(vec![Tiler::Layout(t), Tiler::Underscore]))
    }

    /// CuTe's `get_layoutA_TV`: `(thread index, value)` -> index in `(tile_M, tile_K)`.
    pub fn layout_a_tv(&self) -> Result<Layout> {
        self.layout_ab_tv(true)
    }
    /// CuTe's `get_layoutB_TV`: `(thread index, value)` -> index in `(tile_N, tile_K)`.
    pub fn layout_b_tv(&self) -> Result<Layout> {
        self.layout_ab_tv(false)
    }

    /// CuTe's `get_slice(thr_idx)`: the thread's `(v, m, n, k)` coordinate.
    pub fn slice(&self, thr_idx: &Int) -> ThrMma<'_> {
        let c = get_flat_coord(&self.thr_layout_vmnk, thr_idx);
        let get = |i: usize| c.get(i).cloned().unwrap_or(s(0));
        ThrMma {
            mma: self,
            thr_vmnk: [get(0), get(1), get(2), get(3)],
        }
    }

    fn partition_shape(&self, thrfrg: Layout) -> Result<IntTuple> {
        let rest_rank = thrfrg.shape().get_path(&[1, 1]).map(Tuple::rank).unwrap_or(1);
        let coord: SliceCoord = Tuple::node([fixed(&s(0)), Tuple::node([Tuple::Leaf(None), underscores(rest_rank)])]);
        Ok(thrfrg.slice(&coord)?.shape().clone())
    }
    /// CuTe's `partition_shape_A(mma, shape_MK)`.
    pub fn partition_shape_a(&self, shape_mk: &IntTuple) -> Result<IntTuple> {
        self.partition_shape(self.thrfrg_a(&Layout::col_major(shape_mk.clone()))?)
    }
    /// CuTe's `partition_shape_B(mma, shape_NK)`.
    pub fn partition_shape_b(&self, shape_nk: &IntTuple) -> Result<IntTuple> {
        self.partition_shape(self.thrfrg_b(&Layout::col_major(shape_nk.clone()))?)
    }
    /// CuTe's `partition_shape_C(mma, shape_MN)`.
    pub fn partition_shape_c(&self, shape_mn: &IntTuple) -> Result<IntTuple> {
        self.partition_shape(self.thrfrg_c(&Layout::col_major(shape_mn.clone()))?)
    }
}

/// One thread's view of a [`TiledMma`] (CuTe's `ThrMMA`).
#[derive(Clone, Debug)]
pub struct ThrMma<'a> {
    /// The tiled MMA.
    pub mma: &'a TiledMma,
    /// The thread's `(v, m, n, k)` coordinate in `thr_layout_vmnk`.
    pub thr_vmnk: [Int; 4],
}

impl ThrMma<'_> {
    fn part(&self, thrfrg: Layout, a: usize, b: usize) -> Result<(Layout, Int)> {
        let rest_rank = thrfrg.shape().get_path(&[1, 1]).map(Tuple::rank).unwrap_or(1);
        let coord: SliceCoord = Tuple::node([
            Tuple::node([
                fixed(&self.thr_vmnk[0]),
                Tuple::node([fixed(&self.thr_vmnk[a]), fixed(&self.thr_vmnk[b])]),
            ]),
            Tuple::node([Tuple::Leaf(None), underscores(rest_rank)]),
        ]);
        thrfrg.slice_and_offset(&coord)
    }
    /// CuTe's `partition_C`: `(FrgV, RestM, RestN, ...)` and the thread's offset.
    pub fn partition_c(&self, c: &Layout) -> Result<(Layout, Int)> {
        self.part(self.mma.thrfrg_c(c)?, 1, 2)
    }
    /// CuTe's `partition_A`: `(FrgV, RestM, RestK, ...)` and the thread's offset.
    pub fn partition_a(&self, a: &Layout) -> Result<(Layout, Int)> {
        self.part(self.mma.thrfrg_a(a)?, 1, 3)
    }
    /// CuTe's `partition_B`: `(FrgV, RestN, RestK, ...)` and the thread's offset.
    pub fn partition_b(&self, b: &Layout) -> Result<(Layout, Int)> {
        self.part(self.mma.thrfrg_b(b)?, 2, 3)
    }
    /// CuTe's `partition_fragment_C`: the register layout of the thread's accumulators.
    pub fn partition_fragment_c(&self, c: &Layout) -> Result<Layout> {
        make_fragment_like(&self.partition_c(c)?.0)
    }
    /// CuTe's `partition_fragment_A` for register operands (for `wgmma` shared-memory
    /// operands CuTe builds descriptor tensors instead; the shape is the same).
    pub fn partition_fragment_a(&self, a: &Layout) -> Result<Layout> {
        make_fragment_like(&self.partition_a(a)?.0)
    }
    /// CuTe's `partition_fragment_B` (see [`ThrMma::partition_fragment_a`]).
    pub fn partition_fragment_b(&self, b: &Layout) -> Result<Layout> {
        make_fragment_like(&self.partition_b(b)?.0)
    }
}
