//! Statement shorthands of the grouped kernels' generators.

use crate::emit::Stmt;

/// `ty name = init;`
pub(super) fn d(ty: &str, name: &str, init: impl Into<String>) -> Stmt {
    Stmt::decl(ty, name, init)
}

/// `ty name = init;  // comment`
pub(super) fn dc(ty: &str, name: &str, init: impl Into<String>, comment: impl Into<String>) -> Stmt {
    Stmt::Decl {
        ty: ty.into(),
        name: name.into(),
        init: Some(init.into()),
        comment: Some(comment.into()),
    }
}

/// `if (cond) { then }`
pub(super) fn if_(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise: vec![],
    }
}
