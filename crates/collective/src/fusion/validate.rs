//! Validation of a fusion tree: identifiers, leaves, arities, element types, depth; and
//! when the tree reads the source C.

use std::collections::BTreeMap;

use rcute_atom::Element;

use super::error::FusionError;
use super::node::{ComputeOp, Node};

/// The deepest tree [`Fusion::new`](super::Fusion::new) accepts.
pub const MAX_DEPTH: usize = 64;

/// When C must be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum SourceUse {
    /// No source in the tree.
    Never,
    /// Some source is not guarded by a scalar factor.
    Always,
    /// Only when one of these scalars is non-zero.
    WhenNonZero(Vec<String>),
}

/// A leaf's definition: the same name may only be reused for an identical definition.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Leaf {
    Scalar,
    ScalarPtr(Element),
    Row(Element, bool),
    Col(Element, bool),
    Aux(Element),
    Store(Element),
}

const KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "nullptr",
    "operator",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
];

pub(super) fn check_ident(name: &str) -> Result<(), FusionError> {
    let bad = |reason| {
        Err(FusionError::InvalidName {
            name: name.into(),
            reason,
        })
    };
    let mut chars = name.chars();
    match chars.next() {
        None => return bad("empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => return bad("must start with a letter or '_'"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return bad("only ASCII letters, digits and '_' are allowed");
    }
    if name.len() > 64 {
        return bad("longer than 64 characters");
    }
    let b = name.as_bytes();
    if name.starts_with("__") || (b[0] == b'_' && b.len() > 1 && b[1].is_ascii_uppercase()) {
        return bad("reserved identifier");
    }
    if KEYWORDS.contains(&name) {
        return bad("C++ keyword");
    }
    Ok(())
}

pub(super) fn supported(e: Element) -> bool {
    matches!(
        e,
        Element::F32
            | Element::BF16
            | Element::F16
            | Element::E4M3
            | Element::E5M2
            | Element::S8
            | Element::U8
            | Element::S32
    )
}

pub(super) fn validate(node: &Node, depth: usize, leaves: &mut BTreeMap<String, Leaf>) -> Result<(), FusionError> {
    if depth > MAX_DEPTH {
        return Err(FusionError::TooDeep { max: MAX_DEPTH });
    }
    let elem_ok = |e: Element| {
        if supported(e) {
            Ok(())
        } else {
            Err(FusionError::UnsupportedElement {
                node: node.label(),
                elem: e,
            })
        }
    };
    let mut leaf = |name: &str, def: Leaf| -> Result<(), FusionError> {
        check_ident(name)?;
        match leaves.get(name) {
            None => {
                leaves.insert(name.into(), def);
                Ok(())
            }
            Some(old) if *old == def && !matches!(def, Leaf::Store(_)) => Ok(()),
            Some(old) => Err(FusionError::DuplicateName {
                name: name.into(),
                what: format!("used by two different nodes ({old:?} and {def:?})"),
            }),
        }
    };
    match node {
        Node::Accumulator | Node::Source => Ok(()),
        Node::Scalar { name } => leaf(name, Leaf::Scalar),
        Node::ScalarPtr { name, elem } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::ScalarPtr(*elem))
        }
        Node::RowBroadcast {
            name,
            elem,
            batch_stride,
        } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Row(*elem, *batch_stride))
        }
        Node::ColBroadcast {
            name,
            elem,
            batch_stride,
        } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Col(*elem, *batch_stride))
        }
        Node::AuxLoad { name, elem } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Aux(*elem))
        }
        Node::AuxStore { name, elem, child } => {
            elem_ok(*elem)?;
            leaf(name, Leaf::Store(*elem))?;
            validate(child, depth + 1, leaves)
        }
        Node::Compute { op, args } => {
            let (lo, hi) = op.arity();
            if args.len() < lo || hi.is_some_and(|h| args.len() > h) {
                let expected = match hi {
                    None => format!("{lo} or more"),
                    Some(h) => h.to_string(),
                };
                return Err(FusionError::Arity {
                    op: op.tag(),
                    expected,
                    got: args.len(),
                });
            }
            match *op {
                ComputeOp::Clamp { lo, hi } if lo.is_nan() || hi.is_nan() || lo > hi => {
                    return Err(FusionError::InvalidClamp { lo, hi })
                }
                ComputeOp::Convert(e) => elem_ok(e)?,
                _ => {}
            }
            args.iter().try_for_each(|a| validate(a, depth + 1, leaves))
        }
    }
}

/// When is C needed: a source that is an operand of a multiply (or one of the two factors
/// of a multiply-add) next to a scalar is guarded by that scalar.
pub(super) fn source_use(root: &Node) -> SourceUse {
    fn walk(node: &Node, guards: &mut Vec<String>, always: &mut bool, any: &mut bool) {
        if let Node::Compute { op, args } = node {
            let factors: &[Node] = match op {
                ComputeOp::Multiply => args,
                ComputeOp::MultiplyAdd => &args[..2],
                _ => &[],
            };
            let scalar = factors.iter().find_map(|a| match a {
                Node::Scalar { name } => Some(name.clone()),
                _ => None,
            });
            for (i, a) in args.iter().enumerate() {
                if *a == Node::Source {
                    *any = true;
                    match (&scalar, i < factors.len()) {
                        (Some(s), true) => guards.push(s.clone()),
                        _ => *always = true,
                    }
                } else {
                    walk(a, guards, always, any);
                }
            }
        } else if let Node::AuxStore { child, .. } = node {
            if **child == Node::Source {
                *any = true;
                *always = true;
            } else {
                walk(child, guards, always, any);
            }
        } else if *node == Node::Source {
            *any = true;
            *always = true;
        }
    }
    let (mut guards, mut always, mut any) = (Vec::new(), false, false);
    walk(root, &mut guards, &mut always, &mut any);
    guards.sort();
    guards.dedup();
    match (any, always) {
        (false, _) => SourceUse::Never,
        (true, true) => SourceUse::Always,
        (true, false) => SourceUse::WhenNonZero(guards),
    }
}
