//! `rcute layout '<EXPR>'`: evaluate a layout-algebra expression.

use crate::Failure;
use rcute_layout::eval::{eval_str_with, Value};
use rcute_layout::parse::Mode;
use rcute_layout::{s, svg, AnyLayout, Int, IntTuple, Layout, Tuple};
use serde_json::{json, Value as Json};
use std::path::PathBuf;

/// Options of `rcute layout`.
#[derive(Debug, Clone, clap::Args)]
pub struct LayoutArgs {
    /// The expression, e.g. `zipped_divide((128,64),[32,16])` (see the grammar in the docs).
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
        let mut s = to_json(&v).to_string();
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

/// The JSON form of a value: `{"shape","stride","layout"}` for layouts (plus `"swizzle"`
/// and `"offset"` for composed layouts, whose shape and stride are the inner layout's),
/// `{"value"}` for integers and tuples, `{"tiler"}` for tilers,
/// `{"swizzle","bits","base","shift"}` for swizzles.
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Layout(_) | Value::Shape(_) => {
            let l = v.as_layout().unwrap_or_else(|| Layout::col_major(Tuple::Leaf(s(1))));
            json!({
                "shape": tuple_json(l.shape()),
                "stride": tuple_json(l.stride()),
                "layout": l.to_string(),
            })
        }
        Value::Composed(c) => json!({
            "swizzle": c.outer.to_string(),
            "offset": int_json(&c.offset),
            "shape": tuple_json(c.inner.shape()),
            "stride": tuple_json(c.inner.stride()),
            "layout": c.to_string(),
        }),
        Value::Int(n) => json!({ "value": int_json(n) }),
        Value::Tuple(t) => json!({ "value": tuple_json(t) }),
        Value::Tiler(_) | Value::Underscore => json!({ "tiler": v.notation() }),
        Value::Swizzle(sw) => json!({
            "swizzle": sw.to_string(),
            "bits": sw.bits(),
            "base": sw.base(),
            "shift": sw.shift(),
        }),
    }
}

/// A JSON number for a static (or known) integer, a string for a symbolic one.
pub fn int_json(n: &Int) -> Json {
    match n.known() {
        Some(v) => json!(v),
        None => json!(n.to_string()),
    }
}

/// Nested JSON arrays of [`int_json`] leaves.
pub fn tuple_json(t: &IntTuple) -> Json {
    match t {
        Tuple::Leaf(n) => int_json(n),
        Tuple::Node(m) => Json::Array(m.iter().map(tuple_json).collect()),
    }
}
