//! Short constructors of emitter statements used by the SM80 kernel's emitters.

use crate::emit::Stmt;

pub(crate) fn e(s: impl Into<String>) -> Stmt {
    Stmt::Expr(s.into())
}
pub(crate) fn c(s: impl Into<String>) -> Stmt {
    Stmt::Comment(s.into())
}
pub(crate) fn d(ty: &str, name: &str, init: impl Into<String>) -> Stmt {
    Stmt::decl(ty, name, init)
}
pub(crate) fn dc(ty: &str, name: &str, init: impl Into<String>, comment: impl Into<String>) -> Stmt {
    Stmt::Decl {
        ty: ty.into(),
        name: name.into(),
        init: Some(init.into()),
        comment: Some(comment.into()),
    }
}
pub(crate) fn if_(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise: vec![],
    }
}
pub(crate) fn if_else(cond: impl Into<String>, then: Vec<Stmt>, otherwise: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        then,
        otherwise,
    }
}
