//! A structured emitter for CUDA C++.
//!
//! Kernels are built as a small tree ([`Unit`] of [`Item`]s, function bodies of [`Stmt`]s)
//! and rendered deterministically with one indentation style. Index arithmetic comes from
//! layouts ([`index_expr`]): static extents fold into constants, dynamic ones stay as the
//! names the kernel receives, and each such expression carries a comment naming the layout
//! that produced it. Inline PTX never appears here: it lives in the atoms' snippets, which
//! a unit includes verbatim as [`Item::Snippet`].

use rcute_layout::{Expr, Int, IntTuple, Layout, Tuple};
use std::fmt::Write;

/// Device helpers every generated unit can use; symbolic layout expressions render with
/// them (`rc_ceil_div`, `rc_min`, `rc_max`, `rc_abs`).
pub const PRELUDE: &str = r#"// rcute prelude: integer helpers used by layout-derived index expressions.
__device__ __forceinline__ long long rc_ceil_div(long long a, long long b) { return (a + b - 1) / b; }
__device__ __forceinline__ long long rc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long rc_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long rc_abs(long long a) { return a < 0 ? -a : a; }
"#;

/// A translation unit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unit {
    /// A header comment (the configuration the unit was generated from).
    pub header: Vec<String>,
    /// `#include <...>` lines (CUDA's own headers only).
    pub includes: Vec<String>,
    /// Top-level items in order.
    pub items: Vec<Item>,
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A comment block.
    Comment(Vec<String>),
    /// Verbatim device code provided by an atom (its PTX wrapper) or the prelude.
    Snippet { origin: String, code: String },
    /// A function definition.
    Function(Function),
}

/// `uintptr_t` for units that test pointer alignment: NVRTC has no `<cstdint>`.
pub const UINTPTR_FOR_NVRTC: &str = "#if defined(__CUDACC_RTC__)\ntypedef unsigned long long uintptr_t;\n#endif\n";

/// The opening items of a generated unit: the `#include`s its snippets need, the CUDA
/// bf16 / fp16 headers and `extra_head`, then the prelude, then every snippet under its
/// origin (`rcute-atom {name}`).
pub fn unit_preamble(snippets: &[rcute_atom::Snippet], extra_head: &str) -> Vec<Item> {
    let refs: Vec<&rcute_atom::Snippet> = snippets.iter().collect();
    let mut head = rcute_atom::harness::includes(&refs);
    head.push_str("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n");
    head.push_str(extra_head);
    let mut items = vec![
        Item::Snippet {
            origin: "includes".into(),
            code: head,
        },
        Item::Snippet {
            origin: "rcute prelude".into(),
            code: PRELUDE.into(),
        },
    ];
    items.extend(snippets.iter().map(|s| Item::Snippet {
        origin: format!("rcute-atom {}", s.name),
        code: s.code.clone(),
    }));
    items
}

/// A function definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Qualifiers and attributes, e.g. `extern "C" __global__ __launch_bounds__(128, 1)`.
    pub qualifiers: String,
    /// Return type.
    pub ret: String,
    /// Name (kernels are named after their configuration).
    pub name: String,
    /// Parameters as `(type, name)`.
    pub params: Vec<(String, String)>,
    /// Documentation lines printed above the function.
    pub doc: Vec<String>,
    /// Body.
    pub body: Vec<Stmt>,
}

/// A statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `// text`
    Comment(String),
    /// `ty name = init;` or `ty name;`, with an optional trailing comment.
    Decl {
        ty: String,
        name: String,
        init: Option<String>,
        comment: Option<String>,
    },
    /// `ty name[len];` (a register array).
    Array {
        ty: String,
        name: String,
        len: usize,
        comment: Option<String>,
    },
    /// `lhs = rhs;`
    Assign {
        lhs: String,
        rhs: String,
        comment: Option<String>,
    },
    /// An expression statement `expr;`.
    Expr(String),
    /// `for (int var = start; var < end; ++var) { body }`, optionally unrolled.
    For {
        var: String,
        start: String,
        end: String,
        unroll: bool,
        body: Vec<Stmt>,
    },
    /// `while (cond) { body }` (a loop whose trip count is not a simple range).
    While { cond: String, body: Vec<Stmt> },
    /// `if (cond) { then } else { otherwise }`.
    If {
        cond: String,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// A nested block `{ ... }`.
    Block(Vec<Stmt>),
    /// `for (init; cond; step) { body }`: a loop with a general step (persistent tile
    /// walks).
    Loop {
        init: String,
        cond: String,
        step: String,
        body: Vec<Stmt>,
    },
    /// `continue;`
    Continue,
    /// `return;`
    Return,
}

impl Stmt {
    /// `ty name = init;`
    pub fn decl(ty: &str, name: &str, init: impl Into<String>) -> Stmt {
        Stmt::Decl {
            ty: ty.into(),
            name: name.into(),
            init: Some(init.into()),
            comment: None,
        }
    }
    /// `lhs = rhs;`
    pub fn assign(lhs: impl Into<String>, rhs: impl Into<String>) -> Stmt {
        Stmt::Assign {
            lhs: lhs.into(),
            rhs: rhs.into(),
            comment: None,
        }
    }
    /// An index computed from a layout: `const long long name = <expr>; // <layout>`.
    pub fn index(name: &str, ix: &IndexExpr) -> Stmt {
        Stmt::Decl {
            ty: "const long long".into(),
            name: name.into(),
            init: Some(ix.expr.clone()),
            comment: Some(ix.comment.clone()),
        }
    }
    /// A counted loop with `#pragma unroll`.
    pub fn unrolled(var: &str, end: impl ToString, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: var.into(),
            start: "0".into(),
            end: end.to_string(),
            unroll: true,
            body,
        }
    }
}

/// One-letter statement builders the kernel emitters share (`use crate::emit::shorthand::*`
/// in a generator's `stmt` module), so a kernel body reads close to the CUDA it emits.
///
/// ```
/// use rcute_kernel::emit::shorthand::{d, dc, e, if_};
/// use rcute_kernel::emit::Stmt;
/// let body = vec![d("int", "i", "threadIdx.x"), if_("i < n", vec![e("out[i] = 0")])];
/// assert!(matches!(&body[1], Stmt::If { cond, .. } if cond == "i < n"));
/// assert!(matches!(dc("int", "j", "2 * i", "row"), Stmt::Decl { comment: Some(_), .. }));
/// ```
pub mod shorthand {
    use super::Stmt;

    /// `expr;`
    pub fn e(s: impl Into<String>) -> Stmt {
        Stmt::Expr(s.into())
    }
    /// `// text`
    pub fn c(s: impl Into<String>) -> Stmt {
        Stmt::Comment(s.into())
    }
    /// `ty name = init;`
    pub fn d(ty: &str, name: &str, init: impl Into<String>) -> Stmt {
        Stmt::decl(ty, name, init)
    }
    /// `ty name = init;  // comment`
    pub fn dc(ty: &str, name: &str, init: impl Into<String>, comment: impl Into<String>) -> Stmt {
        Stmt::Decl {
            ty: ty.into(),
            name: name.into(),
            init: Some(init.into()),
            comment: Some(comment.into()),
        }
    }
    /// `if (cond) { then }`
    pub fn if_(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
        if_else(cond, then, vec![])
    }
    /// `if (cond) { then } else { otherwise }`
    pub fn if_else(cond: impl Into<String>, then: Vec<Stmt>, otherwise: Vec<Stmt>) -> Stmt {
        Stmt::If {
            cond: cond.into(),
            then,
            otherwise,
        }
    }
    /// `for (int var = start; var < end; ++var) { body }` (not unrolled: [`Stmt::unrolled`]).
    pub fn for_(var: &str, start: impl Into<String>, end: impl Into<String>, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: var.into(),
            start: start.into(),
            end: end.into(),
            unroll: false,
            body,
        }
    }
}

/// A C++ index expression and the layout it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexExpr {
    /// The C++ expression.
    pub expr: String,
    /// `layout <L> at (c0,c1,...)`: which layout produced it.
    pub comment: String,
}

/// The offset `layout(coord)` as C++, with the coordinate given by C++ variable names
/// (one per top-level mode of `layout`, or a single 1-D index) and static extents folded.
///
/// ```
/// use rcute_kernel::emit::index_expr;
/// use rcute_layout::{tuple, Layout};
/// let gmem = Layout::new(tuple!("M", "K"), tuple!("ldA", 1)).unwrap();
/// let ix = index_expr(&gmem, &["m", "k"]).unwrap();
/// assert_eq!(ix.expr, "m * ldA + k");
/// assert_eq!(ix.comment, "layout (M,K):(ldA,1) at (m,k)");
/// let tile = Layout::new(tuple!((4, 8), 2), tuple!((2, 16), 1)).unwrap();
/// assert_eq!(index_expr(&tile, &["i", "j"]).unwrap().expr, "i % 4 * 2 + i / 4 * 16 + j");
/// ```
pub fn index_expr(layout: &Layout, coord: &[&str]) -> Result<IndexExpr, rcute_layout::LayoutError> {
    let c: Vec<Expr> = coord.iter().map(|v| Expr::var(*v)).collect();
    index_expr_at(layout, &c)
}

/// [`index_expr`] with the coordinate given as expressions (`i - 1`, `lane >> 4`): they
/// fold with the layout's static strides and offsets (`x * 1`, `x + 0`, `x >> 0` and
/// multiples of zero vanish; constants add up), and bind tighter than the layout's own
/// operators.
///
/// ```
/// use rcute_kernel::emit::index_expr_at;
/// use rcute_layout::{tuple, Expr, Layout};
/// let sub = Layout::new(tuple!(1, 8), tuple!(0, 32)).unwrap();
/// let i = Expr::var("i");
/// assert_eq!(index_expr_at(&sub, &[i.sub(&Expr::lit(1))]).unwrap().expr, "(i - 1) * 32");
/// let rows = Layout::new(tuple!(1, 8), tuple!(128, 0)).unwrap();
/// assert_eq!(index_expr_at(&rows, &[i]).unwrap().expr, "0");
/// ```
pub fn index_expr_at(layout: &Layout, coord: &[Expr]) -> Result<IndexExpr, rcute_layout::LayoutError> {
    let leaf = |e: &Expr| Tuple::Leaf(Int::from(e.clone()));
    let c: IntTuple = match coord {
        [one] => leaf(one),
        _ => Tuple::Node(coord.iter().map(leaf).collect()),
    };
    let off = layout.crd2idx(&c)?;
    let names: Vec<String> = coord.iter().map(Expr::to_cpp).collect();
    Ok(IndexExpr {
        expr: off.to_cpp(),
        comment: format!("layout {layout} at ({})", names.join(",")),
    })
}

/// `base + c` as C++ with the constant folded (`base` alone for 0).
///
/// ```
/// assert_eq!(rcute_kernel::emit::plus("n0", 0), "n0");
/// assert_eq!(rcute_kernel::emit::plus("n0", 32), "n0 + 32");
/// ```
pub fn plus(base: &str, c: i64) -> String {
    Expr::var(base).add(&Expr::lit(c)).to_cpp()
}

impl Unit {
    /// Render the unit as CUDA C++ source.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for h in &self.header {
            let _ = writeln!(out, "// {h}");
        }
        if !self.header.is_empty() {
            out.push('\n');
        }
        for inc in &self.includes {
            let _ = writeln!(out, "#include <{inc}>");
        }
        if !self.includes.is_empty() {
            out.push('\n');
        }
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            match item {
                Item::Comment(lines) => {
                    for l in lines {
                        let _ = writeln!(out, "// {l}");
                    }
                }
                Item::Snippet { origin, code } => {
                    let _ = writeln!(out, "// --- from {origin} ---");
                    out.push_str(code.trim_end());
                    out.push('\n');
                }
                Item::Function(f) => render_function(&mut out, f),
            }
        }
        out
    }
}

fn render_function(out: &mut String, f: &Function) {
    for d in &f.doc {
        let _ = writeln!(out, "// {d}");
    }
    let params = f.params.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>();
    let sig_one_line = format!("{} {} {}({})", f.qualifiers, f.ret, f.name, params.join(", "));
    if sig_one_line.len() <= 100 {
        let _ = writeln!(out, "{sig_one_line} {{");
    } else {
        let _ = writeln!(out, "{} {} {}(", f.qualifiers, f.ret, f.name);
        for (i, p) in params.iter().enumerate() {
            let sep = if i + 1 == params.len() { "" } else { "," };
            let _ = writeln!(out, "    {p}{sep}");
        }
        out.push_str(") {\n");
    }
    render_block(out, &f.body, 1);
    out.push_str("}\n");
}

fn render_block(out: &mut String, body: &[Stmt], depth: usize) {
    for s in body {
        render_stmt(out, s, depth);
    }
}

fn trailing(comment: &Option<String>) -> String {
    comment.as_ref().map(|c| format!("  // {c}")).unwrap_or_default()
}

fn render_stmt(out: &mut String, s: &Stmt, depth: usize) {
    let ind = "  ".repeat(depth);
    match s {
        Stmt::Comment(c) => {
            let _ = writeln!(out, "{ind}// {c}");
        }
        Stmt::Decl {
            ty,
            name,
            init,
            comment,
        } => match init {
            Some(v) => {
                let _ = writeln!(out, "{ind}{ty} {name} = {v};{}", trailing(comment));
            }
            None => {
                let _ = writeln!(out, "{ind}{ty} {name};{}", trailing(comment));
            }
        },
        Stmt::Array { ty, name, len, comment } => {
            let _ = writeln!(out, "{ind}{ty} {name}[{len}];{}", trailing(comment));
        }
        Stmt::Assign { lhs, rhs, comment } => {
            let _ = writeln!(out, "{ind}{lhs} = {rhs};{}", trailing(comment));
        }
        Stmt::Expr(e) => {
            let _ = writeln!(out, "{ind}{e};");
        }
        Stmt::For {
            var,
            start,
            end,
            unroll,
            body,
        } => {
            if *unroll {
                let _ = writeln!(out, "{ind}#pragma unroll");
            }
            let _ = writeln!(out, "{ind}for (int {var} = {start}; {var} < {end}; ++{var}) {{");
            render_block(out, body, depth + 1);
            let _ = writeln!(out, "{ind}}}");
        }
        Stmt::Loop { init, cond, step, body } => {
            let _ = writeln!(out, "{ind}for ({init}; {cond}; {step}) {{");
            render_block(out, body, depth + 1);
            let _ = writeln!(out, "{ind}}}");
        }
        Stmt::Continue => {
            let _ = writeln!(out, "{ind}continue;");
        }
        Stmt::While { cond, body } => {
            let _ = writeln!(out, "{ind}while ({cond}) {{");
            render_block(out, body, depth + 1);
            let _ = writeln!(out, "{ind}}}");
        }
        Stmt::If { cond, then, otherwise } => {
            let _ = writeln!(out, "{ind}if ({cond}) {{");
            render_block(out, then, depth + 1);
            if otherwise.is_empty() {
                let _ = writeln!(out, "{ind}}}");
            } else {
                let _ = writeln!(out, "{ind}}} else {{");
                render_block(out, otherwise, depth + 1);
                let _ = writeln!(out, "{ind}}}");
            }
        }
        Stmt::Block(b) => {
            let _ = writeln!(out, "{ind}{{");
            render_block(out, b, depth + 1);
            let _ = writeln!(out, "{ind}}}");
        }
        Stmt::Return => {
            let _ = writeln!(out, "{ind}return;");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcute_layout::tuple;

    #[test]
    fn renders_deterministically_with_layout_comments() {
        let l = Layout::new(tuple!(16, 8), tuple!(1, 16)).unwrap();
        let ix = index_expr(&l, &["r", "c"]).unwrap();
        let f = Function {
            qualifiers: "extern \"C\" __global__".into(),
            ret: "void".into(),
            name: "copy_16x8".into(),
            params: vec![("const float*".into(), "src".into()), ("float*".into(), "dst".into())],
            doc: vec!["copies a 16x8 tile".into()],
            body: vec![
                Stmt::decl("const int", "r", "threadIdx.x % 16"),
                Stmt::decl("const int", "c", "threadIdx.x / 16"),
                Stmt::index("off", &ix),
                Stmt::If {
                    cond: "threadIdx.x < 128".into(),
                    then: vec![Stmt::assign("dst[off]", "src[off]")],
                    otherwise: vec![],
                },
            ],
        };
        let unit = Unit {
            header: vec!["test unit".into()],
            includes: vec!["cstdint".into()],
            items: vec![
                Item::Snippet {
                    origin: "prelude".into(),
                    code: PRELUDE.into(),
                },
                Item::Function(f),
            ],
        };
        let a = unit.render();
        assert_eq!(a, unit.clone().render());
        assert!(
            a.contains("const long long off = r + c * 16;  // layout (16,8):(1,16) at (r,c)"),
            "{a}"
        );
        assert!(a.contains("extern \"C\" __global__ void copy_16x8(const float* src, float* dst) {"));
    }
}
