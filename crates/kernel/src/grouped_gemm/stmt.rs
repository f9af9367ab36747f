//! Statement shorthands of the grouped kernels' generators (the shared ones of
//! [`crate::emit::shorthand`]).

pub(super) use crate::emit::shorthand::{d, dc, if_};
