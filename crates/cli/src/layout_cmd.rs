//! `rcute layout '<EXPR>'`: evaluate a layout-algebra expression.

use crate::eval::{eval_str_with, Value};
use crate::parse::Mode;
use crate::Failure;
use rcute_layout::{svg, AnyLayout};
use std::path::PathBuf;

/// Options of `rcute layout`.
#[derive(Debug, Clone, clap::Args)]
pub struct LayoutArgs {
    /// The expression, e.g. 'zipped_divide((128,64),[32,16])' (see the grammar in the docs).
    #[arg(allow_hyphen_values = true, value_name = "EXPR")]
    pub expr: String,
    /// Print JSON: {"shape","stride","layout"} for layouts, {"value"} for integers.
    #[arg(long, conflicts_with = "table")]
    pub json: bool,
    /// CuTe's own spelling: `_8` is a static integer, a plain `8` a dynamic (runtime
    /// `int`) one; results print as CuTe's `print` does (`(_8,4):(_1,_8)`).
    #[arg(long)]
    pub exact: bool,
    /// Print CuTe's print_layout table of the (rank-1 or rank-2) result.
    #[arg(long)]
    pub table: bool,
    /// Also write an SVG picture of the result to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Draw the result as a thread-value layout over an MxN tile (with --svg).
    #[arg(long, value_name = "MxN", requires = "svg")]
    pub tv: Option<String>,
}

/// Parse `MxN` (also `M,N`) into positive extents.
pub fn parse_tile(s: &str) -> Result<(i64, i64), Failure> {
    let bad = || Failure::Other(format!("--tv expects MxN with positive integers, e.g. 16x8; got '{s}'"));
    let (m, n) = s.split_once(['x', 'X', ',']).ok_or_else(bad)?;
    let m: i64 = m.trim().parse().map_err(|_| bad())?;
    let n: i64 = n.trim().parse().map_err(|_| bad())?;
    if m <= 0 || n <= 0 {
        return Err(bad());
    }
    Ok((m, n))
}

fn need_layout(v: &Value, what: &str) -> Result<AnyLayout, Failure> {
    match v {
        Value::Layout(_) | Value::Shape(_) | Value::Composed(_) => v
            .as_any()
            .ok_or_else(|| Failure::Other(format!("{what} needs a layout"))),
        _ => Err(Failure::Other(format!(
            "{what} needs a layout, but the expression gives {} ({})",
            v.kind(),
            v.notation()
        ))),
    }
}

/// Run the command; returns what to print on stdout.
pub fn run(args: &LayoutArgs) -> Result<String, Failure> {
    let tile = args.tv.as_deref().map(parse_tile).transpose()?;
    let mode = if args.exact { Mode::Exact } else { Mode::Static };
    let v = eval_str_with(&args.expr, mode)?;
    let out = if args.json {
        let mut s = v.to_json().to_string();
        s.push('\n');
        s
    } else if args.table {
        need_layout(&v, "--table")?.to_table().map_err(Failure::Layout)?
    } else if args.exact {
        format!("{}\n", v.notation_exact())
    } else {
        format!("{}\n", v.notation())
    };
    if let Some(path) = &args.svg {
        let picture = match tile {
            Some(t) => svg::tv_layout(&need_layout(&v, "--tv")?, t),
            None => svg::layout_grid(&need_layout(&v, "--svg")?),
        }
        .map_err(Failure::Layout)?;
        std::fs::write(path, picture).map_err(|e| Failure::Other(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(out)
}
