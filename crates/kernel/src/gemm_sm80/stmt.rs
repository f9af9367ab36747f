//! Short constructors of emitter statements used by the SM80 kernel's emitters (the shared
//! ones of [`crate::emit::shorthand`]).

pub(crate) use crate::emit::shorthand::{c, d, dc, e, if_, if_else};
