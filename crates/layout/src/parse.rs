//! A hand-written recursive-descent parser for layout-algebra expressions.
//!
//! Every node records the byte
//! position where it starts, so that errors (here and in evaluation) can point at the
//! input. The parser never panics: malformed input, integer overflow and excessive
//! nesting are all [`ParseError`]s. [`crate::eval`] evaluates the parsed expressions.
//!
//! ## Expression grammar
//!
//! ```text
//! expr    := call | tiler | '_' | swizzle | layout
//! layout  := tuple [ ':' tuple ]        SHAPE:STRIDE; a bare SHAPE is make_layout(SHAPE)
//! tuple   := int | name | '(' [ tuple { ',' tuple } ] ')'
//! int     := [ '-' ] digits | '_' digits     static integer (CuTe's `_8` is accepted)
//! name    := [A-Za-z_][A-Za-z0-9_]*          dynamic extent (symbolic), e.g. M, ldA
//! tiler   := '[' expr { ',' expr } ']'       by-mode tiler; modes are layouts,
//!                                            integers n (meaning n:1), '_' or tilers
//! swizzle := 'Sw' '<' int ',' int ',' int '>'
//! call    := name '(' [ expr { ',' expr } ] ')'
//! ```
//!
//! Blanks are allowed between tokens. A bare tuple such as `(4,2)` is the column-major
//! layout `(4,2):(1,4)` wherever a layout is expected (also as the right operand of
//! `composition`, divides and products); by-mode tilers are written with brackets:
//! `zipped_divide((128,64),[32,16])`. Where a shape, profile, order or cotarget is
//! expected, a bare tuple or integer is taken as that tuple.
//!
//! ```
//! use rcute_layout::parse::{parse, ExprKind};
//!
//! let e = parse("zipped_divide((128,64):(1,128), [32,16])").unwrap();
//! assert!(matches!(e.kind, ExprKind::Call { ref name, ref args } if name == "zipped_divide" && args.len() == 2));
//! let err = parse("(4,2):(1,").unwrap_err();
//! assert_eq!(err.pos, 9);
//! ```

use crate::{Int, IntTuple, Tuple};
use std::fmt;

/// Deepest nesting of parentheses and brackets accepted (keeps recursion bounded).
pub const MAX_DEPTH: usize = 128;

/// A syntax error at a byte position of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the input (the input length for "unexpected end").
    pub pos: usize,
    /// What was expected or found.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.msg, self.pos)
    }
}

impl std::error::Error for ParseError {}

/// Render `error: <msg> at <pos>`, the input, and a caret under the byte position.
pub fn render_error(input: &str, pos: usize, msg: &str) -> String {
    // The caret column counts characters before `pos` (positions are char boundaries).
    let mut p = pos.min(input.len());
    while !input.is_char_boundary(p) {
        p -= 1;
    }
    let shown: String = input.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let col = input[..p].chars().count();
    format!("error: {msg} at {pos}\n  {shown}\n  {}^\n", " ".repeat(col))
}

/// An expression with the byte position where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    /// Byte offset of the first character.
    pub pos: usize,
    /// What it is.
    pub kind: ExprKind,
}

/// The kinds of expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExprKind {
    /// `SHAPE` or `SHAPE:STRIDE`: integers, names (dynamic extents) and tuples of them.
    /// Without a stride it is `make_layout(shape)` when used as a layout, and the shape
    /// itself where a shape, a profile or an integer is expected.
    Layout {
        /// The shape.
        shape: IntTuple,
        /// The stride, when given.
        stride: Option<IntTuple>,
    },
    /// `[T0,T1,...]`: a by-mode tiler.
    Tiler(Vec<Expr>),
    /// `_`: the whole mode (in tilers).
    Underscore,
    /// `Sw<B,M,S>`.
    Swizzle(i64, i64, i64),
    /// `name(arg, ...)`.
    Call {
        /// The function name.
        name: String,
        /// The arguments.
        args: Vec<Expr>,
    },
}

/// How plain integer literals are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The default: a plain `8` is a static integer (as is `_8`).
    #[default]
    Static,
    /// CuTe's own spelling (`--exact`): `_8` is a static integer (`Int<8>`), a plain `8`
    /// is a dynamic integer whose value is known (CuTe's runtime `int`).
    Exact,
}

/// Parse a whole expression (plain integers are static).
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    parse_with(input, Mode::Static)
}

/// Parse a whole expression in CuTe's spelling: `_N` static, plain `N` a dynamic literal.
pub fn parse_exact(input: &str) -> Result<Expr, ParseError> {
    parse_with(input, Mode::Exact)
}

/// Parse a whole expression, reading plain integers as `mode` says.
pub fn parse_with(input: &str, mode: Mode) -> Result<Expr, ParseError> {
    let mut p = Parser {
        src: input,
        pos: 0,
        depth: 0,
        mode,
    };
    let e = p.expr()?;
    p.skip_ws();
    if p.pos < input.len() {
        return Err(p.err_here("unexpected input after the expression"));
    }
    Ok(e)
}

/// Parse a layout literal `SHAPE[:STRIDE]` only (for round-trip tests and tools).
pub fn parse_tuple(input: &str) -> Result<IntTuple, ParseError> {
    let mut p = Parser {
        src: input,
        pos: 0,
        depth: 0,
        mode: Mode::Static,
    };
    let t = p.tuple()?;
    p.skip_ws();
    if p.pos < input.len() {
        return Err(p.err_here("unexpected input after the tuple"));
    }
    Ok(t)
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
    mode: Mode,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }
    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }
    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }
    /// Skip blanks and look at the next character.
    fn next_char(&mut self) -> Option<char> {
        self.skip_ws();
        self.peek()
    }
    fn eat(&mut self, c: char) -> bool {
        if self.next_char() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }
    fn err(&self, pos: usize, msg: impl Into<String>) -> ParseError {
        ParseError { pos, msg: msg.into() }
    }
    /// An error at the current position (the caret shows what is there).
    fn err_here(&self, expected: &str) -> ParseError {
        self.err(self.pos, expected)
    }
    fn expect_msg(&mut self, expected: &str) -> ParseError {
        self.skip_ws();
        self.err_here(expected)
    }
    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(self.pos, format!("nesting deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn ident(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if is_ident_char(c) {
                self.pos += 1;
            } else {
                break;
            }
        }
        &self.src[start..self.pos]
    }

    /// An optionally negative decimal integer.
    fn integer(&mut self) -> Result<i64, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let neg = self.peek() == Some('-');
        if neg {
            self.pos += 1;
            self.skip_ws();
        }
        let dstart = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.pos += 1;
        }
        if dstart == self.pos {
            return Err(self.err_here("expected an integer"));
        }
        if matches!(self.peek(), Some(c) if is_ident_start(c)) {
            return Err(self.err_here("expected a delimiter after the integer"));
        }
        let digits = &self.src[dstart..self.pos];
        let text = if neg { format!("-{digits}") } else { digits.to_string() };
        text.parse::<i64>()
            .map_err(|_| self.err(start, format!("integer {text} does not fit in 64 bits")))
    }

    /// A tuple: an integer, a name, `_N` (CuTe's static integer notation), or `(t, ...)`.
    /// A plain integer is static in [`Mode::Static`], a dynamic literal in [`Mode::Exact`].
    fn tuple(&mut self) -> Result<IntTuple, ParseError> {
        match self.next_char() {
            Some('(') => {
                self.enter()?;
                self.pos += 1;
                let mut items = Vec::new();
                if self.eat(')') {
                    self.leave();
                    return Ok(Tuple::Node(items));
                }
                loop {
                    items.push(self.tuple()?);
                    if self.eat(',') {
                        continue;
                    }
                    if self.eat(')') {
                        break;
                    }
                    return Err(self.expect_msg("expected ',' or ')'"));
                }
                self.leave();
                Ok(Tuple::Node(items))
            }
            Some(c) if c.is_ascii_digit() || c == '-' => {
                let v = self.integer()?;
                Ok(Tuple::Leaf(match self.mode {
                    Mode::Static => Int::Static(v),
                    Mode::Exact => Int::dyn_lit(v),
                }))
            }
            Some(c) if is_ident_start(c) => {
                let start = self.pos;
                let name = self.ident();
                if let Some(v) = static_underscore(name) {
                    return v
                        .map(|v| Tuple::Leaf(Int::Static(v)))
                        .ok_or_else(|| self.err(start, format!("integer {} does not fit in 64 bits", &name[1..])));
                }
                if name == "_" {
                    return Err(self.err(start, "'_' is only allowed in a tiler"));
                }
                if self.next_char() == Some('(') {
                    return Err(self.err(start, format!("call of '{name}' inside a tuple literal")));
                }
                Ok(Tuple::Leaf(crate::d(name)))
            }
            _ => Err(self.err_here("expected an integer, a name or '('")),
        }
    }

    /// `SHAPE[:STRIDE]`.
    fn layout_literal(&mut self) -> Result<Expr, ParseError> {
        self.skip_ws();
        let pos = self.pos;
        let shape = self.tuple()?;
        let stride = if self.eat(':') { Some(self.tuple()?) } else { None };
        Ok(Expr {
            pos,
            kind: ExprKind::Layout { shape, stride },
        })
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.skip_ws();
        let pos = self.pos;
        match self.peek() {
            Some('[') => {
                self.enter()?;
                self.pos += 1;
                let mut items = Vec::new();
                if self.eat(']') {
                    return Err(self.err(pos, "a tiler needs at least one mode"));
                }
                loop {
                    items.push(self.expr()?);
                    if self.eat(',') {
                        continue;
                    }
                    if self.eat(']') {
                        break;
                    }
                    return Err(self.expect_msg("expected ',' or ']'"));
                }
                self.leave();
                Ok(Expr {
                    pos,
                    kind: ExprKind::Tiler(items),
                })
            }
            Some(c) if is_ident_start(c) => {
                let save = self.pos;
                let name = self.ident();
                if name == "_" {
                    return Ok(Expr {
                        pos,
                        kind: ExprKind::Underscore,
                    });
                }
                if name == "Sw" && self.next_char() == Some('<') {
                    self.pos += 1;
                    let b = self.integer()?;
                    if !self.eat(',') {
                        return Err(self.expect_msg("expected ','"));
                    }
                    let m = self.integer()?;
                    if !self.eat(',') {
                        return Err(self.expect_msg("expected ','"));
                    }
                    let s = self.integer()?;
                    if !self.eat('>') {
                        return Err(self.expect_msg("expected '>'"));
                    }
                    return Ok(Expr {
                        pos,
                        kind: ExprKind::Swizzle(b, m, s),
                    });
                }
                if static_underscore(name).is_none() && self.next_char() == Some('(') {
                    self.enter()?;
                    self.pos += 1;
                    let mut args = Vec::new();
                    if !self.eat(')') {
                        loop {
                            args.push(self.expr()?);
                            if self.eat(',') {
                                continue;
                            }
                            if self.eat(')') {
                                break;
                            }
                            return Err(self.expect_msg("expected ',' or ')'"));
                        }
                    }
                    self.leave();
                    return Ok(Expr {
                        pos,
                        kind: ExprKind::Call {
                            name: name.to_string(),
                            args,
                        },
                    });
                }
                // A name that is not a call: a dynamic extent, start of a layout literal.
                self.pos = save;
                self.layout_literal()
            }
            Some(c) if c == '(' || c == '-' || c.is_ascii_digit() => self.layout_literal(),
            _ => Err(self.err_here("expected an expression")),
        }
    }
}

/// `_N` (CuTe's printed static integer): `Some(Some(N))`; `Some(None)` when `N` overflows;
/// `None` when `name` is not of that form.
fn static_underscore(name: &str) -> Option<Option<i64>> {
    let digits = name.strip_prefix('_')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse::<i64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        let e = parse(" ((2,4),3) : ((1,8),-2) ").unwrap();
        match e.kind {
            ExprKind::Layout { shape, stride } => {
                assert_eq!(shape.to_string(), "((2,4),3)");
                assert_eq!(stride.unwrap().to_string(), "((1,8),-2)");
            }
            k => panic!("{k:?}"),
        }
        assert_eq!(parse_tuple("(_8,M)").unwrap().to_string(), "(8,M)");
        match parse_exact("(_8,4):(1,_8)").unwrap().kind {
            ExprKind::Layout { shape, stride } => {
                assert_eq!(format!("{shape:#}"), "(_8,4)");
                assert_eq!(format!("{:#}", stride.unwrap()), "(1,_8)");
            }
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn errors() {
        let e = parse("((2,4),3):((1,8)2)").unwrap_err();
        assert_eq!(e.to_string(), "expected ',' or ')' at 16");
        assert_eq!(parse("").unwrap_err().pos, 0);
        assert!(parse("99999999999999999999").is_err());
        assert!(parse(&"(".repeat(10_000)).is_err());
        assert!(parse(&"[".repeat(10_000)).is_err());
        assert!(parse("f(").is_err());
        assert!(parse("é").is_err());
    }

    #[test]
    fn caret() {
        let r = render_error("ab(c", 2, "oops");
        assert_eq!(r, "error: oops at 2\n  ab(c\n    ^\n");
    }
}
