//! The kernel ABI of a fusion: the fields of its parameter struct.

use rcute_atom::Element;

/// The C++ type of a parameter field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `float`.
    F32,
    /// `const T*` (`writable = false`) or `T*` of the element type.
    Ptr {
        /// The element type pointed to.
        elem: Element,
        /// Whether the kernel writes through it.
        writable: bool,
    },
    /// `long long` (leading dimensions and batch strides, in elements).
    I64,
}

impl ParamKind {
    /// The C++ type of the field.
    pub fn cpp_type(self) -> String {
        match self {
            ParamKind::F32 => "float".into(),
            ParamKind::Ptr { elem, writable } => {
                format!("{}{}*", if writable { "" } else { "const " }, ctype(elem))
            }
            ParamKind::I64 => "long long".into(),
        }
    }

    pub(super) fn word(self) -> &'static str {
        match self {
            ParamKind::F32 => "f32",
            ParamKind::Ptr { .. } => "pointer",
            ParamKind::I64 => "i64",
        }
    }
}

/// One field of the parameter struct (8 bytes each, in [`Fusion::params`](super::Fusion::params) order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FusionParam {
    /// Field name (`alpha`, `bias`, `bias_batch_stride`, `aux_ld`, ...).
    pub name: String,
    /// Field type.
    pub kind: ParamKind,
    /// The node it belongs to, e.g. `RowBroadcast bias (bf16)`.
    pub node: String,
}

/// The C++ element type of a pointer field (no `<cstdint>` types).
pub(super) fn ctype(e: Element) -> &'static str {
    match e {
        Element::S8 => "signed char",
        Element::U8 => "unsigned char",
        Element::S32 => "int",
        _ => e.cuda_type(),
    }
}
