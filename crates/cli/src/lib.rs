//! # rcute-cli
//!
//! The library behind the `rcute` command-line tool. Each subcommand lives in its own
//! module and `main.rs` only dispatches; today there is one subcommand:
//!
//! ```text
//! rcute layout '<EXPR>' [--exact] [--json | --table] [--svg FILE [--tv MxN]]
//! ```
//!
//! It evaluates a CuTe layout-algebra expression and prints the result in CuTe notation
//! (static integers without underscores), or as JSON (`--json`), or as CuTe's
//! `print_layout` table (`--table`); `--svg FILE` also writes a picture of the result:
//! the grid of offsets, or with `--tv MxN` the result read as a thread-value layout
//! over an `M x N` tile. Malformed expressions, misused functions and undefined
//! operations print `error: ...` on stderr (with the byte position and a caret under
//! the input where there is one) and exit with status 2.
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
//! Calls use CuTe's names and argument order:
//!
//! | call | result |
//! |---|---|
//! | `composition(A,B)` | `A ∘ B`; `B` a layout or a tiler |
//! | `complement(A)`, `complement(A,cotarget)` | cotarget an integer or a shape |
//! | `right_inverse(A)`, `left_inverse(A)` | layouts |
//! | `coalesce(A)`, `coalesce(A,profile)`, `filter(A)` | layouts |
//! | `logical_divide`, `zipped_divide`, `tiled_divide`, `flat_divide` `(A,T)` | `T` a tiler or layout |
//! | `logical_product`, `zipped_product`, `tiled_product`, `flat_product` `(A,B)` | `B` a tiler or layout |
//! | `blocked_product(A,B)`, `raked_product(A,B)` | `B` a layout |
//! | `tile_to_shape(A,shape)`, `tile_to_shape(A,shape,order)` | layout |
//! | `make_ordered_layout(shape,order)`, `make_layout_like(A)` | layout |
//! | `max_common_layout(A,B)` / `max_common_vector(A,B)` | layout / integer |
//! | `upcast(A,N)`, `downcast(A,N)` | `N` a static integer |
//! | `size(A)`, `cosize(A)`, `rank(A)`, `depth(A)` | integers |
//! | `shape(A)`, `stride(A)` | tuples |
//! | `get(A,i,...)` | the sub-layout (or sub-tuple) at mode path `i,...` |
//!
//! Calls nest: `size(zipped_divide((128,64),[32,16]))` prints `8192`.
//!
//! Swizzles: `composition(Sw<3,3,3>, (8,64):(64,1))` is the composed layout
//! `Sw<3,3,3> o 0 o (8,64):(64,1)`; `composition(L, Sw<B,M,S>)` composes a layout with a
//! swizzle; a bare `Sw<B,M,S>` where a layout is expected is CuTe's `make_layout(Sw)`
//! (the swizzle over its active range). Composed layouts go through the same calls
//! (divides, products, `tile_to_shape`, `coalesce`, `get`, `size`, ...), as CuTe's
//! functions on `ComposedLayout` do, and `--table` / `--svg` show the swizzled offsets.
//!
//! ## Exact mode (`--exact`): CuTe's static/dynamic spelling
//!
//! By default every integer literal is static, whether written `8` or `_8`, and
//! results print without underscores. With `--exact` (library:
//! [`eval::eval_str_exact`] and [`eval::Value::notation_exact`]) the input and output
//! use CuTe's own spelling, as CuTe's `print` writes it:
//!
//! * `_8` is a static integer (CuTe's `Int<8>{}`);
//! * a plain `8` is a dynamic integer whose value is known (CuTe's runtime `int`,
//!   [`rcute_layout::Int::dyn_lit`]); names such as `M` stay symbolic dynamic extents;
//! * results print static integers with the underscore and dynamic ones plain.
//!
//! ```text
//! $ rcute layout --exact 'zipped_divide((128,64):(_1,128),[_32,_16])'
//! ((_32,_16),(4,4)):((_1,128),(_32,2048))
//! ```
//!
//! Arithmetic follows CuTe's mixed rules: static with static stays static, anything
//! with a dynamic operand is dynamic (`4 * _2` is the dynamic `8`), and the algebra
//! rejects what CuTe rejects at compile time for dynamic operands (e.g. the complement
//! of a layout with dynamic strides of rank > 1). The template arguments of `upcast`,
//! `downcast` and `get` are compile-time values in CuTe; either spelling is accepted there.
//! `crates/cli/tests/cute_oracle_dynamic.rs` checks this mode against CuTe's headers.
//!
//! JSON output is `{"shape":..., "stride":..., "layout":"..."}` for layouts (nested
//! arrays; numbers for static leaves, strings for dynamic ones), `{"value":...}` for
//! integers and tuples, `{"tiler":"..."}` for tilers and
//! `{"swizzle":"Sw<B,M,S>","bits":B,"base":M,"shift":S}` for swizzles.

pub mod bench_cmd;
pub mod bench_scaled_mm;
pub mod bench_timing;
pub mod eval;
pub mod gen_cmd;
pub mod layout_cmd;
pub mod parse;
pub mod run_cmd;

use rcute_layout::LayoutError;
use std::fmt;

/// A failed command: what to print on stderr; every failure exits with status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Malformed expression.
    Parse {
        /// Byte position.
        pos: usize,
        /// What was expected.
        msg: String,
    },
    /// A well-formed expression that misuses a function (unknown name, arity, kinds).
    Usage {
        /// Byte position of the offending sub-expression.
        pos: usize,
        /// What is wrong.
        msg: String,
    },
    /// An undefined layout-algebra operation.
    Layout(LayoutError),
    /// Bad command-line options or I/O failure.
    Other(String),
}

impl From<eval::EvalError> for Failure {
    fn from(e: eval::EvalError) -> Self {
        match e {
            eval::EvalError::Usage { pos, msg } => Failure::Usage { pos, msg },
            eval::EvalError::Layout(l) => Failure::Layout(l),
        }
    }
}

impl Failure {
    /// The process exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        2
    }
    /// The message for stderr; positioned errors show `input` with a caret.
    pub fn render(&self, input: &str) -> String {
        match self {
            Failure::Parse { pos, msg } | Failure::Usage { pos, msg } => parse::render_error(input, *pos, msg),
            Failure::Layout(e) => format!("error: {e}\n"),
            Failure::Other(m) => format!("error: {m}\n"),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Parse { pos, msg } | Failure::Usage { pos, msg } => write!(f, "{msg} at {pos}"),
            Failure::Layout(e) => write!(f, "{e}"),
            Failure::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Failure {}
