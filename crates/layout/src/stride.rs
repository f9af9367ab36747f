//! Stride elements: what a layout multiplies coordinates by.
//!
//! Ordinary layouts have integer strides ([`Int`]); coordinate (identity) layouts have
//! scaled basis strides ([`crate::basis::ScaledBasis`], CuTe's `E<i>`), whose values are
//! coordinates rather than offsets. The algebra that only moves strides around
//! (coalesce, composition with an integer-strided right operand, divides, slicing) is
//! written once over this trait.

use crate::int::Int;
use std::fmt;
use std::hash::Hash;

/// A leaf of a stride tuple.
pub trait StrideElem: Clone + PartialEq + Eq + Hash + fmt::Display + fmt::Debug {
    /// The codomain of the layout: an offset ([`Int`]) or a coordinate.
    type Value: Clone + PartialEq + fmt::Debug + fmt::Display;
    /// The static zero stride.
    fn zero() -> Self;
    /// The zero of the codomain.
    fn zero_value() -> Self::Value;
    /// `self * k`.
    fn scale(&self, k: &Int) -> Self;
    /// CuTe's `is_constant<0, Stride>`.
    fn is_static_zero(&self) -> bool;
    /// True when the stride is fully static.
    fn is_static(&self) -> bool;
    /// The integer, for integer strides.
    fn as_int(&self) -> Option<&Int>;
    /// `acc + coord * self`.
    fn accumulate(&self, acc: &Self::Value, coord: &Int) -> Self::Value;
    /// Sum of two codomain values.
    fn add_values(a: &Self::Value, b: &Self::Value) -> Self::Value;
}

impl StrideElem for Int {
    type Value = Int;
    fn zero() -> Self {
        Int::Static(0)
    }
    fn zero_value() -> Int {
        Int::Static(0)
    }
    fn scale(&self, k: &Int) -> Self {
        self.mul(k)
    }
    fn is_static_zero(&self) -> bool {
        self.is_const(0)
    }
    fn is_static(&self) -> bool {
        Int::is_static(self)
    }
    fn as_int(&self) -> Option<&Int> {
        Some(self)
    }
    fn accumulate(&self, acc: &Int, coord: &Int) -> Int {
        acc.add(&coord.mul(self))
    }
    fn add_values(a: &Int, b: &Int) -> Int {
        a.add(b)
    }
}
