//! The layout algebra, one concept per file, with CuTe's semantics and mode nesting.
//!
//! | file | CuTe functions |
//! |---|---|
//! | `coalesce.rs` | `coalesce`, `coalesce(profile)`, `filter`, `filter_zeros` |
//! | `composition.rs` | `composition` with layouts and tilers |
//! | `complement.rs` | `complement` |
//! | `inverse.rs` | `right_inverse`, `left_inverse` |
//! | `divide.rs` | `logical_divide`, `zipped_divide`, `tiled_divide`, `flat_divide` |
//! | `product.rs` | `logical_product`, `zipped_product`, `tiled_product`, `flat_product`, `blocked_product`, `raked_product`, `tile_to_shape` |
//! | `ordered.rs` | `make_ordered_layout`, `make_layout_like`, `compact_order` |
//! | `common.rs` | `max_common_layout`, `max_common_vector` |
//! | `recast.rs` | `upcast`, `downcast`, `recast_layout` |
//! | `tiler.rs` | the [`Tiler`] type: a layout, an integer, `_`, or a tuple of tilers |

mod coalesce;
mod common;
mod complement;
mod composition;
mod divide;
mod inverse;
mod ordered;
mod product;
mod recast;
mod tiler;

pub use coalesce::coalesce_shape;
pub use ordered::compact_order;
pub use tiler::Tiler;
