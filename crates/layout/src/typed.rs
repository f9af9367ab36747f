//! Static layouts spelled as types: shapes and strides from [`typenum`] unsigned integers
//! and Rust tuples (nesting allowed, ranks 1 to 4), checked for congruence at compile time.
//!
//! ```
//! use rcute_layout::typed::{Fragment, TLayout};
//! use rcute_layout::{tuple, Layout};
//! use typenum::{U1, U16, U8};
//!
//! type Atom = TLayout<(U16, U8), (U1, U16)>;
//! assert_eq!(Atom::layout(), Layout::new(tuple!(16, 8), tuple!(1, 16)).unwrap());
//!
//! // One register per element of the layout, sized at compile time.
//! let frag: Fragment<f32, Atom> = Default::default();
//! assert_eq!(frag.len(), 128);
//!
//! type Nested = TLayout<((U2, U4), U8), ((U1, U16), U2)>;
//! # use typenum::{U2, U4};
//! assert_eq!(Nested::layout().to_string(), "((2,4),8):((1,16),2)");
//! assert_eq!(Nested::SIZE, 64);
//! ```
//!
//! Shape and stride of different nesting do not compile:
//!
//! ```compile_fail
//! use rcute_layout::typed::TLayout;
//! use typenum::{U1, U16, U8};
//! let _ = TLayout::<(U16, U8), U1>::layout();
//! ```
//!
//! ```compile_fail
//! use rcute_layout::typed::TLayout;
//! use typenum::{U1, U16, U8};
//! let _ = TLayout::<(U16, (U8, U8)), (U1, U16)>::layout();
//! ```
//!
//! Strides are unsigned (typenum `U*`); layouts with negative or dynamic strides use the
//! value-level [`Layout`].

use crate::int::s;
use crate::layout::Layout;
use crate::tuple::{IntTuple, Tuple};
use generic_array::GenericArray;
use std::marker::PhantomData;
use std::ops::Mul;
use typenum::{Bit, Prod, UInt, UTerm, Unsigned};

/// A type-level nested tuple of unsigned integers: a typenum `U*` or a Rust tuple of rank
/// 1 to 4 of such tuples.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a type-level shape or stride",
    label = "use typenum unsigned integers (U1, U8, ...) or tuples of rank 1 to 4 of them"
)]
pub trait TTuple {
    /// The product of the leaves (CuTe's `size`), as a typenum unsigned.
    type Size: Unsigned;
    /// The value-level tuple.
    fn tuple() -> IntTuple;
}

impl TTuple for UTerm {
    type Size = UTerm;
    fn tuple() -> IntTuple {
        Tuple::Leaf(s(0))
    }
}

impl<U: Unsigned, B: Bit> TTuple for UInt<U, B> {
    type Size = UInt<U, B>;
    fn tuple() -> IntTuple {
        Tuple::Leaf(s(<UInt<U, B> as Unsigned>::I64))
    }
}

impl<A: TTuple> TTuple for (A,) {
    type Size = A::Size;
    fn tuple() -> IntTuple {
        Tuple::Node(vec![A::tuple()])
    }
}

impl<A: TTuple, B: TTuple> TTuple for (A, B)
where
    A::Size: Mul<B::Size>,
    Prod<A::Size, B::Size>: Unsigned,
{
    type Size = Prod<A::Size, B::Size>;
    fn tuple() -> IntTuple {
        Tuple::Node(vec![A::tuple(), B::tuple()])
    }
}

impl<A: TTuple, B: TTuple, C: TTuple> TTuple for (A, B, C)
where
    A::Size: Mul<B::Size>,
    Prod<A::Size, B::Size>: Mul<C::Size>,
    Prod<Prod<A::Size, B::Size>, C::Size>: Unsigned,
{
    type Size = Prod<Prod<A::Size, B::Size>, C::Size>;
    fn tuple() -> IntTuple {
        Tuple::Node(vec![A::tuple(), B::tuple(), C::tuple()])
    }
}

impl<A: TTuple, B: TTuple, C: TTuple, D: TTuple> TTuple for (A, B, C, D)
where
    A::Size: Mul<B::Size>,
    Prod<A::Size, B::Size>: Mul<C::Size>,
    Prod<Prod<A::Size, B::Size>, C::Size>: Mul<D::Size>,
    Prod<Prod<Prod<A::Size, B::Size>, C::Size>, D::Size>: Unsigned,
{
    type Size = Prod<Prod<Prod<A::Size, B::Size>, C::Size>, D::Size>;
    fn tuple() -> IntTuple {
        Tuple::Node(vec![A::tuple(), B::tuple(), C::tuple(), D::tuple()])
    }
}

/// `Self` (a shape) and `D` (a stride) have the same nesting (CuTe's `congruent`).
#[diagnostic::on_unimplemented(
    message = "shape `{Self}` and stride `{D}` are not congruent",
    label = "shape and stride must have the same tuple nesting"
)]
pub trait Congruent<D> {}

impl Congruent<UTerm> for UTerm {}
impl<V, C> Congruent<UInt<V, C>> for UTerm {}
impl<U, B> Congruent<UTerm> for UInt<U, B> {}
impl<U, B, V, C> Congruent<UInt<V, C>> for UInt<U, B> {}
impl<A: Congruent<X>, X> Congruent<(X,)> for (A,) {}
impl<A: Congruent<X>, B: Congruent<Y>, X, Y> Congruent<(X, Y)> for (A, B) {}
impl<A: Congruent<X>, B: Congruent<Y>, C: Congruent<Z>, X, Y, Z> Congruent<(X, Y, Z)> for (A, B, C) {}
impl<A: Congruent<X>, B: Congruent<Y>, C: Congruent<Z>, D: Congruent<W>, X, Y, Z, W> Congruent<(X, Y, Z, W)>
    for (A, B, C, D)
{
}

/// A static layout as a type: shape `S` and stride `D` (CuTe's `Layout<Shape<...>,
/// Stride<...>>` with static integers). Never constructed; use its associated items.
pub struct TLayout<S, D>(PhantomData<fn() -> (S, D)>);

/// What a type-level layout provides.
pub trait StaticLayout {
    /// The shape type.
    type Shape: TTuple;
    /// The stride type.
    type Stride: TTuple;
    /// The number of elements, as a typenum unsigned.
    type Size: Unsigned;
    /// The value-level layout.
    fn layout() -> Layout;
}

impl<S: TTuple + Congruent<D>, D: TTuple> StaticLayout for TLayout<S, D> {
    type Shape = S;
    type Stride = D;
    type Size = S::Size;
    fn layout() -> Layout {
        Layout::new(S::tuple(), D::tuple()).expect("congruence is checked by the type system")
    }
}

impl<S: TTuple + Congruent<D>, D: TTuple> TLayout<S, D> {
    /// The number of elements.
    pub const SIZE: usize = <S::Size as Unsigned>::USIZE;
}

impl<S, D> TLayout<S, D> {
    /// The value-level layout, equal to `Layout::new` of the same numbers. (The bounds sit
    /// on the method so that a non-congruent pair reports the congruence message.)
    pub fn layout() -> Layout
    where
        S: TTuple + Congruent<D>,
        D: TTuple,
    {
        <Self as StaticLayout>::layout()
    }
}

/// The size of a type-level layout, as a typenum unsigned.
pub type SizeOf<L> = <L as StaticLayout>::Size;

/// A register fragment holding one `T` per element of the type-level layout `L`.
pub type Fragment<T, L> = GenericArray<T, SizeOf<L>>;
