//! Tensors as partitioning needs them: an [`Engine`] (where the data lives, with an
//! accumulated symbolic offset) and a layout.
//!
//! Slicing a tensor with `_` keeps the free modes and moves the offset of the fixed
//! coordinates into the engine, as CuTe's `tensor(coord)` does (`data() + offset`).
//! On top of that sit CuTe's partitioning helpers: [`Tensor::inner_partition`] /
//! [`Tensor::local_tile`] (a tile, for a block) and [`Tensor::outer_partition`] /
//! [`Tensor::local_partition`] (a strided slice, for a thread). Block and thread indices
//! may be symbolic (`d("bx")`, `d("tid")`), giving symbolic offsets that render as C++.
//!
//! ```
//! use rcute_layout::{algebra::Tiler, d, slice_coord, tuple, Engine, Layout, Tensor};
//! let a = Tensor::new(Engine::gmem("A"), Layout::new(tuple!("M", "K"), tuple!("ldA", 1)).unwrap());
//! let blk = a.local_tile(&Tiler::shape(&[128, 32]), &slice_coord!("bx", _)).unwrap();
//! assert_eq!(blk.layout.to_string(), "(128,32,ceil_div(K,32)):(ldA,1,32)");
//! assert_eq!(blk.engine.to_cpp(), "A + bx * (ldA * 128)");
//! ```

use crate::algebra::Tiler;
use crate::basis::{add_arith, make_identity_layout, ScaledBasis};
use crate::composed::AnyLayout;
use crate::error::{ErrorKind, Result};
use crate::int::{s, Int};
use crate::layout::{crd2idx, fmt_slice, Layout, SliceCoord};
use crate::lerr;
use crate::stride::StrideElem;
use crate::tuple::{IntTuple, Tuple};
use std::fmt;

/// CuTe's `Step<...>` projection: `Some(_)` keeps a mode (`_1`), `None` drops it (`X`).
pub type Step = SliceCoord;

/// Build a [`SliceCoord`] (or a [`Step`]) from nested items: `_` is a free mode, anything
/// else converts into an [`Int`] (numbers are static, strings are named runtime values).
/// Each item is one token tree; wrap longer expressions in braces.
///
/// ```
/// use rcute_layout::{slice_coord, d};
/// let tid = d("tid");
/// assert_eq!(rcute_layout::tensor::fmt_coord(&slice_coord!(1, _, ({tid.clone()}, "bx"))), "(1,_,(tid,bx))");
/// ```
#[macro_export]
macro_rules! slice_coord {
    (@m _) => { $crate::Tuple::Leaf(::core::option::Option::None) };
    (@m ($($inner:tt)*)) => { $crate::slice_coord!($($inner)*) };
    (@m $x:expr) => { $crate::Tuple::Leaf(::core::option::Option::Some($crate::Int::from($x))) };
    ($($x:tt),+ $(,)?) => { $crate::SliceCoord::Node(vec![$($crate::slice_coord!(@m $x)),+]) };
}

/// CuTe notation of a slice coordinate (`(1,_,bx)`).
pub fn fmt_coord(c: &SliceCoord) -> String {
    fmt_slice(c)
}

/// Where a tensor's elements live, with the offset accumulated by slicing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Engine {
    /// A global-memory pointer named `name` (a kernel parameter), advanced by `offset`.
    Gmem {
        /// The pointer's name in generated code.
        name: String,
        /// Elements from the pointer.
        offset: Int,
    },
    /// A shared-memory buffer.
    Smem {
        /// The buffer's name in generated code.
        name: String,
        /// Elements from the start of the buffer.
        offset: Int,
    },
    /// A register fragment (a thread-local array).
    Rmem {
        /// The array's name in generated code.
        name: String,
        /// Elements from the start of the array.
        offset: Int,
    },
    /// A coordinate engine (CuTe's `ArithmeticTupleIterator`): elements are coordinates,
    /// `origin` plus the layout's value.
    Coord {
        /// The coordinate of the first element.
        origin: IntTuple,
    },
}

impl Engine {
    /// A global-memory pointer.
    pub fn gmem(name: &str) -> Engine {
        Engine::Gmem {
            name: name.into(),
            offset: s(0),
        }
    }
    /// A shared-memory buffer.
    pub fn smem(name: &str) -> Engine {
        Engine::Smem {
            name: name.into(),
            offset: s(0),
        }
    }
    /// A register fragment.
    pub fn rmem(name: &str) -> Engine {
        Engine::Rmem {
            name: name.into(),
            offset: s(0),
        }
    }
    /// A coordinate engine starting at `origin`.
    pub fn coord(origin: IntTuple) -> Engine {
        Engine::Coord { origin }
    }
    /// The accumulated element offset of a pointer engine.
    pub fn offset(&self) -> Option<&Int> {
        match self {
            Engine::Gmem { offset, .. } | Engine::Smem { offset, .. } | Engine::Rmem { offset, .. } => Some(offset),
            Engine::Coord { .. } => None,
        }
    }
    /// Advance by an element offset (a coordinate engine adds it to its first mode).
    pub fn add_offset(&self, v: &Int) -> Engine {
        match self {
            Engine::Gmem { name, offset } => Engine::Gmem {
                name: name.clone(),
                offset: offset.add(v),
            },
            Engine::Smem { name, offset } => Engine::Smem {
                name: name.clone(),
                offset: offset.add(v),
            },
            Engine::Rmem { name, offset } => Engine::Rmem {
                name: name.clone(),
                offset: offset.add(v),
            },
            Engine::Coord { origin } => Engine::Coord {
                origin: add_arith(origin, &Tuple::Leaf(v.clone())),
            },
        }
    }
    /// Advance by a coordinate (for coordinate engines; pointer engines take a scalar).
    pub fn add_coord(&self, v: &IntTuple) -> Result<Engine> {
        match (self, v) {
            (Engine::Coord { origin }, _) => Ok(Engine::Coord {
                origin: add_arith(origin, v),
            }),
            (_, Tuple::Leaf(x)) => Ok(self.add_offset(x)),
            _ => Err(lerr!(
                "tensor_offset",
                [self, v],
                ErrorKind::Invalid("a pointer engine cannot be advanced by a coordinate".into())
            )),
        }
    }
    /// The C++ expression of the engine's position: `A + offset` for pointers, the
    /// coordinate for coordinate engines.
    pub fn to_cpp(&self) -> String {
        match self {
            Engine::Gmem { name, offset } | Engine::Smem { name, offset } | Engine::Rmem { name, offset } => {
                if offset.is_const(0) {
                    name.clone()
                } else {
                    let e = offset.expr();
                    let add = crate::expr::Expr::var(name.as_str()).add(&e);
                    add.to_cpp()
                }
            }
            Engine::Coord { origin } => origin.to_string(),
        }
    }
}

impl fmt::Display for Engine {
    /// `gmem(A)`, `smem(sA+64)`, `rmem(frag)`, `ArithTuple(0,0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (tag, name, offset) = match self {
            Engine::Gmem { name, offset } => ("gmem", name, offset),
            Engine::Smem { name, offset } => ("smem", name, offset),
            Engine::Rmem { name, offset } => ("rmem", name, offset),
            Engine::Coord { origin } => return write!(f, "ArithTuple{origin}"),
        };
        if offset.is_const(0) {
            write!(f, "{tag}({name})")
        } else {
            write!(f, "{tag}({name}+{offset})")
        }
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A value a layout produces that can move an [`Engine`]: an offset or a coordinate.
pub trait EngineOffset: Clone + fmt::Display + fmt::Debug {
    /// The engine advanced by `self`.
    fn advance(&self, e: &Engine) -> Result<Engine>;
}
impl EngineOffset for Int {
    fn advance(&self, e: &Engine) -> Result<Engine> {
        Ok(e.add_offset(self))
    }
}
impl EngineOffset for IntTuple {
    fn advance(&self, e: &Engine) -> Result<Engine> {
        e.add_coord(self)
    }
}

/// The layout operations a [`Tensor`] needs; implemented by plain layouts of any stride
/// element type (integer or [`ScaledBasis`]) and by [`AnyLayout`] (plain or swizzled).
pub trait TensorLayout: Clone + fmt::Display {
    /// What the layout maps a coordinate to.
    type Value: EngineOffset;
    /// The shape.
    fn shape(&self) -> &IntTuple;
    /// Evaluate at a coordinate.
    fn value(&self, coord: &IntTuple) -> Result<Self::Value>;
    /// CuTe's `slice_and_offset`.
    fn slice_and_offset(&self, coord: &SliceCoord) -> Result<(Self, Self::Value)>;
    /// CuTe's `logical_divide`.
    fn logical_divide(&self, tiler: &Tiler) -> Result<Self>;
    /// CuTe's `zipped_divide`.
    fn zipped_divide(&self, tiler: &Tiler) -> Result<Self>;
    /// CuTe's `tiled_divide`.
    fn tiled_divide(&self, tiler: &Tiler) -> Result<Self>;
    /// CuTe's `flat_divide`.
    fn flat_divide(&self, tiler: &Tiler) -> Result<Self>;
}

impl<D: StrideElem> TensorLayout for Layout<D>
where
    D::Value: EngineOffset,
{
    type Value = D::Value;
    fn shape(&self) -> &IntTuple {
        Layout::shape(self)
    }
    fn value(&self, coord: &IntTuple) -> Result<D::Value> {
        self.crd2idx(coord)
    }
    fn slice_and_offset(&self, coord: &SliceCoord) -> Result<(Self, D::Value)> {
        Layout::slice_and_offset(self, coord)
    }
    fn logical_divide(&self, tiler: &Tiler) -> Result<Self> {
        Layout::logical_divide(self, tiler)
    }
    fn zipped_divide(&self, tiler: &Tiler) -> Result<Self> {
        Layout::zipped_divide(self, tiler)
    }
    fn tiled_divide(&self, tiler: &Tiler) -> Result<Self> {
        Layout::tiled_divide(self, tiler)
    }
    fn flat_divide(&self, tiler: &Tiler) -> Result<Self> {
        Layout::flat_divide(self, tiler)
    }
}

impl TensorLayout for AnyLayout {
    type Value = Int;
    fn shape(&self) -> &IntTuple {
        AnyLayout::shape(self)
    }
    fn value(&self, coord: &IntTuple) -> Result<Int> {
        self.crd2idx(coord)
    }
    fn slice_and_offset(&self, coord: &SliceCoord) -> Result<(Self, Int)> {
        AnyLayout::slice_and_offset(self, coord)
    }
    fn logical_divide(&self, tiler: &Tiler) -> Result<Self> {
        AnyLayout::logical_divide(self, tiler)
    }
    fn zipped_divide(&self, tiler: &Tiler) -> Result<Self> {
        AnyLayout::zipped_divide(self, tiler)
    }
    fn tiled_divide(&self, tiler: &Tiler) -> Result<Self> {
        AnyLayout::tiled_divide(self, tiler)
    }
    fn flat_divide(&self, tiler: &Tiler) -> Result<Self> {
        AnyLayout::flat_divide(self, tiler)
    }
}

/// A tensor: an engine and a layout (CuTe's `Tensor<Engine, Layout>`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Tensor<L: TensorLayout = Layout> {
    /// Where the elements live.
    pub engine: Engine,
    /// Coordinates to offsets (or to coordinates, for identity tensors).
    pub layout: L,
}

/// CuTe's `make_identity_tensor(shape)`: a coordinate tensor whose element at each
/// coordinate is the coordinate itself.
///
/// ```
/// use rcute_layout::{make_identity_tensor, algebra::Tiler, slice_coord, tuple};
/// let c = make_identity_tensor(&tuple!(256, 128));
/// assert_eq!(c.to_string(), "ArithTuple(0,0) o (256,128):(1@0,1@1)");
/// let t = c.local_tile(&Tiler::shape(&[64, 32]), &slice_coord!(2, 3)).unwrap();
/// assert_eq!(t.element(&tuple!(5, 7)).unwrap().to_string(), "(133,103)");
/// ```
pub fn make_identity_tensor(shape: &IntTuple) -> Tensor<Layout<ScaledBasis>> {
    Tensor {
        engine: Engine::coord(shape.repeat_like(&s(0))),
        layout: make_identity_layout(shape),
    }
}

/// CuTe's `layout.get_flat_coord(idx)`: the coordinate of index `idx` in each top-level
/// mode of `layout`, each mode's coordinate folded to a column-major index. Division by a
/// static zero stride (a broadcast mode) gives coordinate 0.
///
/// ```
/// use rcute_layout::{d, s, tensor::flat_coord, tuple, Layout};
/// let thr = Layout::new(tuple!(4, 8), tuple!(8, 1)).unwrap(); // row-major threads
/// assert_eq!(flat_coord(&thr, &s(13)).to_string(), "(1,5)");
/// assert_eq!(flat_coord(&thr, &d("tid")).to_string(), "(tid/8%4,tid%8)");
/// ```
pub fn flat_coord(layout: &Layout, idx: &Int) -> IntTuple {
    fn hier(idx: &Int, sh: &IntTuple, st: &Tuple<Int>) -> IntTuple {
        match (sh, st) {
            (Tuple::Node(ss), Tuple::Node(ds)) => {
                Tuple::Node(ss.iter().zip(ds).map(|(a, b)| hier(idx, a, b)).collect())
            }
            (Tuple::Leaf(n), Tuple::Leaf(d)) => {
                if n.is_const(1) || d.is_const(0) {
                    Tuple::Leaf(s(0))
                } else {
                    Tuple::Leaf(idx.div(d).and_then(|q| q.rem(n)).unwrap_or(s(0)))
                }
            }
            _ => Tuple::Leaf(s(0)),
        }
    }
    let fold = |sh: &IntTuple, st: &Tuple<Int>| -> Int {
        let h = hier(idx, sh, st);
        crd2idx(&h, sh).unwrap_or(s(0))
    };
    match (layout.shape(), layout.stride()) {
        (Tuple::Node(ss), Tuple::Node(ds)) => {
            Tuple::Node(ss.iter().zip(ds).map(|(a, b)| Tuple::Leaf(fold(a, b))).collect())
        }
        (sh, st) => Tuple::Leaf(fold(sh, st)),
    }
}

/// CuTe's `dice(proj, t)` on any nested tuple: keep the parts where `proj` is not `_`.
pub fn dice_tuple<T: Clone>(proj: &SliceCoord, t: &Tuple<T>) -> Result<Tuple<T>> {
    crate::layout::slice_rec(proj, t, false).ok_or_else(|| lerr!("dice", [fmt_slice(proj)], ErrorKind::NotCongruent))
}

/// CuTe's `dice(proj, tiler)` for tilers.
pub fn dice_tiler(proj: &SliceCoord, tiler: &Tiler) -> Result<Tiler> {
    fn lift(p: &SliceCoord, t: &Tiler, out: &mut Vec<Tiler>) -> Option<()> {
        match p {
            Tuple::Leaf(x) => {
                if x.is_some() {
                    out.push(t.clone());
                }
            }
            Tuple::Node(ps) => {
                let ts = match t {
                    Tiler::Tuple(ts) if ts.len() == ps.len() => ts,
                    _ => return None,
                };
                for (pi, ti) in ps.iter().zip(ts) {
                    lift(pi, ti, out)?;
                }
            }
        }
        Some(())
    }
    let r = match proj {
        Tuple::Leaf(Some(_)) => Some(tiler.clone()),
        Tuple::Leaf(None) => Some(Tiler::Tuple(vec![])),
        Tuple::Node(_) => {
            let mut out = Vec::new();
            lift(proj, tiler, &mut out).map(|_| Tiler::Tuple(out))
        }
    };
    r.ok_or_else(|| lerr!("dice", [fmt_slice(proj), tiler], ErrorKind::NotCongruent))
}

/// CuTe's `repeat<N>(_)`.
fn underscores(n: usize) -> SliceCoord {
    if n == 1 {
        Tuple::Leaf(None)
    } else {
        Tuple::Node(vec![Tuple::Leaf(None); n])
    }
}

/// CuTe's `append<N>(coord, _)` for tuple coordinates.
fn pad_underscores(c: &SliceCoord, n: usize) -> SliceCoord {
    c.append_to(n, Tuple::Leaf(None))
}

impl<L: TensorLayout> Tensor<L> {
    /// A tensor of `layout` over `engine` (CuTe's `make_tensor`).
    pub fn new(engine: Engine, layout: L) -> Tensor<L> {
        Tensor { engine, layout }
    }
    /// The shape.
    pub fn shape(&self) -> &IntTuple {
        self.layout.shape()
    }
    /// Number of top-level modes.
    pub fn rank(&self) -> usize {
        self.shape().rank()
    }
    /// Number of elements.
    pub fn size(&self) -> Int {
        self.shape().size()
    }
    /// The engine positioned at the element at `coord` (CuTe's `&tensor(coord)`); for a
    /// coordinate tensor, its `origin` is the element.
    pub fn element_engine(&self, coord: &IntTuple) -> Result<Engine> {
        self.layout.value(coord)?.advance(&self.engine)
    }
    /// The element at `coord`: the pointer expression `A + offset` as C++, or the
    /// coordinate of a coordinate tensor.
    pub fn element(&self, coord: &IntTuple) -> Result<String> {
        Ok(self.element_engine(coord)?.to_cpp())
    }
    /// Slice with `_` (CuTe's `tensor(coord)` with underscores): the sub-tensor of the
    /// free modes, with the fixed coordinates' offset moved into the engine.
    ///
    /// ```
    /// use rcute_layout::{slice_coord, tuple, Engine, Layout, Tensor};
    /// let t = Tensor::new(Engine::smem("sA"), Layout::col_major(tuple!(16, 16)));
    /// let col = t.slice(&slice_coord!(_, 3)).unwrap();
    /// assert_eq!(col.to_string(), "smem(sA+48) o (16):(1)");
    /// ```
    pub fn slice(&self, coord: &SliceCoord) -> Result<Tensor<L>> {
        let (layout, off) = self.layout.slice_and_offset(coord)?;
        Ok(Tensor {
            engine: off.advance(&self.engine)?,
            layout,
        })
    }
    /// CuTe's `logical_divide(tensor, tiler)`.
    pub fn logical_divide(&self, tiler: &Tiler) -> Result<Tensor<L>> {
        Ok(Tensor {
            engine: self.engine.clone(),
            layout: self.layout.logical_divide(tiler)?,
        })
    }
    /// CuTe's `zipped_divide(tensor, tiler)`: `((tile...), (rest...))`.
    ///
    /// ```
    /// use rcute_layout::{algebra::Tiler, tuple, Engine, Layout, Tensor};
    /// let t = Tensor::new(Engine::gmem("A"), Layout::col_major(tuple!(128, 64)));
    /// assert_eq!(t.zipped_divide(&Tiler::shape(&[32, 16])).unwrap().shape().to_string(), "((32,16),(4,4))");
    /// ```
    pub fn zipped_divide(&self, tiler: &Tiler) -> Result<Tensor<L>> {
        Ok(Tensor {
            engine: self.engine.clone(),
            layout: self.layout.zipped_divide(tiler)?,
        })
    }
    /// CuTe's `tiled_divide(tensor, tiler)`.
    pub fn tiled_divide(&self, tiler: &Tiler) -> Result<Tensor<L>> {
        Ok(Tensor {
            engine: self.engine.clone(),
            layout: self.layout.tiled_divide(tiler)?,
        })
    }
    /// CuTe's `flat_divide(tensor, tiler)`.
    pub fn flat_divide(&self, tiler: &Tiler) -> Result<Tensor<L>> {
        Ok(Tensor {
            engine: self.engine.clone(),
            layout: self.layout.flat_divide(tiler)?,
        })
    }
    /// CuTe's `inner_partition`: divide by `tiler` and slice the rest modes at `coord`
    /// (a tuple coordinate is padded with `_`), keeping the tile modes.
    pub fn inner_partition(&self, tiler: &Tiler, coord: &SliceCoord) -> Result<Tensor<L>> {
        let tiled = self.zipped_divide(tiler)?;
        let r0 = tiled.shape().get(0).map(Tuple::rank).unwrap_or(1);
        let c1 = match coord {
            Tuple::Node(_) => pad_underscores(coord, tiled.shape().get(1).map(Tuple::rank).unwrap_or(1)),
            Tuple::Leaf(_) => coord.clone(),
        };
        tiled.slice(&Tuple::node([underscores(r0), c1])).map_err(|e| {
            e.within(
                "inner_partition",
                vec![self.to_string(), tiler.to_string(), fmt_slice(coord)],
            )
        })
    }
    /// CuTe's `outer_partition`: divide by `tiler` and slice the tile modes at `coord`,
    /// keeping the rest modes.
    pub fn outer_partition(&self, tiler: &Tiler, coord: &SliceCoord) -> Result<Tensor<L>> {
        let tiled = self.zipped_divide(tiler)?;
        let r1 = tiled.shape().get(1).map(Tuple::rank).unwrap_or(1);
        let c0 = match coord {
            Tuple::Node(_) => pad_underscores(coord, tiled.shape().get(0).map(Tuple::rank).unwrap_or(1)),
            Tuple::Leaf(_) => coord.clone(),
        };
        tiled.slice(&Tuple::node([c0, underscores(r1)])).map_err(|e| {
            e.within(
                "outer_partition",
                vec![self.to_string(), tiler.to_string(), fmt_slice(coord)],
            )
        })
    }
    /// CuTe's `local_tile(tensor, tiler, coord)`: the tile at `coord` (an
    /// [`inner_partition`](Tensor::inner_partition)); `_` in `coord` keeps a rest mode.
    pub fn local_tile(&self, tiler: &Tiler, coord: &SliceCoord) -> Result<Tensor<L>> {
        self.inner_partition(tiler, coord)
    }
    /// CuTe's `local_tile(tensor, tiler, coord, proj)`: tiler and coordinate are first
    /// diced by the projection `proj` (`Step<_1,X,_1>` is `slice_coord!(1, _, 1)`).
    ///
    /// ```
    /// use rcute_layout::{algebra::Tiler, slice_coord, tuple, Engine, Layout, Tensor};
    /// let a = Tensor::new(Engine::gmem("A"), Layout::col_major(tuple!(256, 128)));
    /// let cta = a.local_tile_proj(&Tiler::shape(&[64, 64, 32]), &slice_coord!(1, 2, _), &slice_coord!(1, _, 1)).unwrap();
    /// assert_eq!(cta.shape().to_string(), "(64,32,4)");
    /// assert_eq!(cta.to_string(), "gmem(A+64) o (64,32,4):(1,256,8192)");
    /// ```
    pub fn local_tile_proj(&self, tiler: &Tiler, coord: &SliceCoord, proj: &Step) -> Result<Tensor<L>> {
        self.local_tile(&dice_tiler(proj, tiler)?, &dice_tuple(proj, coord)?)
    }
    /// CuTe's `local_partition(tensor, thr_layout, thr_idx)`: thread `thr_idx`'s elements
    /// when the threads of `thr_layout` are tiled over the tensor
    /// (an [`outer_partition`](Tensor::outer_partition) by the thread layout's shape at
    /// the thread's coordinate).
    ///
    /// ```
    /// use rcute_layout::{d, tuple, Engine, Layout, Tensor};
    /// let s = Tensor::new(Engine::smem("sA"), Layout::col_major(tuple!(16, 16)));
    /// let thr = Layout::col_major(tuple!(4, 8));
    /// let mine = s.local_partition(&thr, d("tid")).unwrap();
    /// assert_eq!(mine.layout.to_string(), "(4,2):(4,128)");
    /// assert_eq!(mine.engine.to_cpp(), "sA + tid % 4 + tid / 4 % 8 * 16");
    /// ```
    pub fn local_partition(&self, thr_layout: &Layout, thr_idx: impl Into<Int>) -> Result<Tensor<L>> {
        let tiler = Tiler::from_shape(&thr_layout.shape().product_each());
        let coord = flat_coord(thr_layout, &thr_idx.into()).map(&mut |x| Some(x.clone()));
        self.outer_partition(&tiler, &coord)
    }
    /// CuTe's `local_partition(tensor, thr_layout, thr_idx, proj)`: the thread layout is
    /// first diced by the projection.
    pub fn local_partition_proj(&self, thr_layout: &Layout, thr_idx: impl Into<Int>, proj: &Step) -> Result<Tensor<L>> {
        self.local_partition(&thr_layout.dice(proj)?, thr_idx)
    }
}

impl<L: TensorLayout> fmt::Display for Tensor<L> {
    /// CuTe's print form `engine o layout`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} o {}", self.engine, self.layout)
    }
}

impl<L: TensorLayout> fmt::Debug for Tensor<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}
