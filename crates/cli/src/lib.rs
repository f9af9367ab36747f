//! # rcute-cli
//!
//! The library behind the `rcute` command-line tool. Each subcommand lives in its own
//! module and `main.rs` only dispatches; the expression subcommand is:
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
//! The expression language (grammar, calls, CuTe's exact static/dynamic spelling) is
//! documented in `rcute_layout::parse` and `rcute_layout::eval`, which this tool calls.
//! `--exact` reads and prints CuTe's own spelling (`_8` static, `8` dynamic).
//!
//! JSON output is `{"shape":..., "stride":..., "layout":"..."}` for layouts (nested
//! arrays; numbers for static leaves, strings for dynamic ones), `{"value":...}` for
//! integers and tuples, `{"tiler":"..."}` for tilers and
//! `{"swizzle":"Sw<B,M,S>","bits":B,"base":M,"shift":S}` for swizzles.

pub mod bench_awq;
pub mod bench_cmd;
pub mod bench_moe;
#[cfg(feature = "nccl")]
pub mod bench_moe_ep;
mod bench_random;
pub mod bench_scaled_mm;
pub mod bench_stream;
pub mod bench_timing;
pub mod gen_cmd;
pub mod layout_cmd;
mod lt_peer;
pub mod run_cmd;
pub mod table_cmd;
pub mod tune_cmd;

use rcute_layout::eval::EvalError;
use rcute_layout::parse::render_error;
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

impl From<EvalError> for Failure {
    fn from(e: EvalError) -> Self {
        match e {
            EvalError::Parse { pos, msg } => Failure::Parse { pos, msg },
            EvalError::Usage { pos, msg } => Failure::Usage { pos, msg },
            EvalError::Layout(l) => Failure::Layout(l),
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
            Failure::Parse { pos, msg } | Failure::Usage { pos, msg } => render_error(input, *pos, msg),
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
