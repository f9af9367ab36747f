//! # rcute-layout
//!
//! CuTe's layout algebra in Rust: nested integer tuples whose leaves are static
//! (folded into generated code) or dynamic (runtime values kept symbolic), layouts as
//! functions from coordinates to offsets, and the algebra that builds every tiling and
//! partitioning of a kernel: coalesce, composition, complement, inverses, divides and
//! products, swizzles and composed layouts.
//!
//! Results match CuTe's C++ (`include/cute/layout.hpp`) in function and mode nesting.
//!
//! ```
//! use rcute_layout::{tuple, Layout};
//! let a = Layout::new(tuple!(6, 2), tuple!(8, 2)).unwrap();
//! let b = Layout::new(tuple!(4, 3), tuple!(3, 1)).unwrap();
//! assert_eq!(a.compose(&b).unwrap().to_string(), "((2,2),3):((24,2),8)");
//! ```

pub mod error;
pub mod expr;
pub mod int;
pub mod layout;
pub mod stride;
pub mod tuple;

pub mod algebra;

pub mod print;

pub mod eval;
pub mod parse;
pub mod svg;

pub mod basis;
pub mod composed;
pub mod swizzle;
pub mod tensor;
pub mod typed;

pub use error::{ErrorKind, LayoutError, Result};
pub use expr::{Env, Expr};
pub use int::{d, s, Int};
pub use layout::{crd2idx, idx2crd, Layout, SliceCoord};
pub use print::{Grid, Tabulate};
pub use stride::StrideElem;
pub use tuple::{IntTuple, Tuple};

pub use basis::{make_identity_layout, ScaledBasis};
pub use composed::{AnyLayout, ComposedLayout};
pub use swizzle::Swizzle;
pub use tensor::{make_identity_tensor, Engine, Step, Tensor, TensorLayout};
pub use typed::{Fragment, SizeOf, TLayout};
