//! Text tables of layouts, in the format of CuTe's `print_layout`.
//!
//! A rank-2 layout `(m,n) -> offset` prints as a grid of its offsets: the layout itself
//! on the first line, the column indices, then one row per `m` with the row index and
//! `+---+` / `| v |` separators. A rank-1 layout prints as a single-row table of its
//! offsets; higher ranks are an error (CuTe asserts rank 2).
//!
//! ```
//! use rcute_layout::{tuple, Layout};
//! let l = Layout::new(tuple!(2, 3), tuple!(3, 1)).unwrap();
//! assert_eq!(
//!     l.to_table().unwrap(),
//!     "(2,3):(3,1)
//!       0   1   2
//!     +---+---+---+
//!  0  | 0 | 1 | 2 |
//!     +---+---+---+
//!  1  | 3 | 4 | 5 |
//!     +---+---+---+
//! "
//! );
//! ```
//!
//! Composed (swizzled) layouts print the same way, with the composed function's offsets.
//! Anything that maps a rank-1 or rank-2 coordinate to a static offset can be printed
//! by implementing [`Tabulate`]; [`Grid`] is the evaluated table shared with the SVG
//! pictures of [`crate::svg`].

use crate::composed::{AnyLayout, ComposedLayout};
use crate::error::{ErrorKind, LayoutError, Result};
use crate::int::s;
use crate::layout::Layout;
use crate::tuple::{IntTuple, Tuple};
use std::fmt::Write as _;

/// The largest number of cells a table or picture may have (a guard against printing
/// enormous layouts by accident).
pub const MAX_CELLS: i64 = 1 << 16;

/// A function from a rank-1 or rank-2 coordinate to an integer offset, with static
/// mode sizes: what can be printed as a table or drawn as a grid.
pub trait Tabulate {
    /// The function in CuTe notation (first line of the table, title of a picture).
    fn notation(&self) -> String;
    /// Number of top-level modes of the domain.
    fn domain_rank(&self) -> usize;
    /// The size of top-level mode `i`, if it is static.
    fn mode_size(&self, i: usize) -> Option<i64>;
    /// The offset at a coordinate: a leaf index for rank 1, `(i,j)` for rank 2.
    fn offset_at(&self, coord: &IntTuple) -> Result<i64>;
    /// The codomain extent if known (CuTe sizes the table's cells after it).
    fn cosize_hint(&self) -> Option<i64> {
        None
    }
}

impl Tabulate for Layout {
    fn notation(&self) -> String {
        self.to_string()
    }
    fn domain_rank(&self) -> usize {
        self.rank()
    }
    fn mode_size(&self, i: usize) -> Option<i64> {
        self.shape().get(i)?.size().as_static()
    }
    fn offset_at(&self, coord: &IntTuple) -> Result<i64> {
        known_offset(self, coord, self.crd2idx(coord)?)
    }
    fn cosize_hint(&self) -> Option<i64> {
        self.cosize().as_static()
    }
}

fn known_offset(who: &dyn std::fmt::Display, coord: &IntTuple, v: crate::int::Int) -> Result<i64> {
    v.known().ok_or_else(|| {
        LayoutError::new(
            "print_layout",
            vec![who.to_string()],
            ErrorKind::NeedsStatic(format!("offset {v} at {coord} is dynamic")),
        )
    })
}

impl Tabulate for ComposedLayout {
    fn notation(&self) -> String {
        self.to_string()
    }
    fn domain_rank(&self) -> usize {
        self.rank()
    }
    fn mode_size(&self, i: usize) -> Option<i64> {
        self.shape().get(i)?.size().as_static()
    }
    fn offset_at(&self, coord: &IntTuple) -> Result<i64> {
        known_offset(self, coord, self.crd2idx(coord)?)
    }
    fn cosize_hint(&self) -> Option<i64> {
        self.cosize().as_static()
    }
}

impl Tabulate for AnyLayout {
    fn notation(&self) -> String {
        self.to_string()
    }
    fn domain_rank(&self) -> usize {
        self.rank()
    }
    fn mode_size(&self, i: usize) -> Option<i64> {
        self.shape().get(i)?.size().as_static()
    }
    fn offset_at(&self, coord: &IntTuple) -> Result<i64> {
        known_offset(self, coord, self.crd2idx(coord)?)
    }
    fn cosize_hint(&self) -> Option<i64> {
        self.cosize().as_static()
    }
}

impl<T: Tabulate + ?Sized> Tabulate for &T {
    fn notation(&self) -> String {
        (**self).notation()
    }
    fn domain_rank(&self) -> usize {
        (**self).domain_rank()
    }
    fn mode_size(&self, i: usize) -> Option<i64> {
        (**self).mode_size(i)
    }
    fn offset_at(&self, coord: &IntTuple) -> Result<i64> {
        (**self).offset_at(coord)
    }
    fn cosize_hint(&self) -> Option<i64> {
        (**self).cosize_hint()
    }
}

/// A 2-D coordinate `(i,j)` of static integers.
pub(crate) fn coord2(i: i64, j: i64) -> IntTuple {
    Tuple::Node(vec![Tuple::Leaf(s(i)), Tuple::Leaf(s(j))])
}

/// Static sizes of the two modes of a rank-2 function (`op` names the caller in errors).
pub(crate) fn static_dims<F: Tabulate + ?Sized>(op: &'static str, f: &F) -> Result<(i64, i64)> {
    let err = |k: ErrorKind| LayoutError::new(op, vec![f.notation()], k);
    let (m, n) = match f.domain_rank() {
        1 => (Some(1), f.mode_size(0)),
        2 => (f.mode_size(0), f.mode_size(1)),
        r => {
            return Err(err(ErrorKind::Rank(format!(
                "needs a rank-1 or rank-2 layout, got rank {r}"
            ))))
        }
    };
    let (m, n) = match (m, n) {
        (Some(m), Some(n)) => (m, n),
        _ => return Err(err(ErrorKind::NeedsStatic("mode sizes must be static".into()))),
    };
    check_cells(op, f, m, n)?;
    Ok((m, n))
}

pub(crate) fn check_cells<F: Tabulate + ?Sized>(op: &'static str, f: &F, m: i64, n: i64) -> Result<()> {
    if m < 0 || n < 0 {
        return Err(LayoutError::new(
            op,
            vec![f.notation()],
            ErrorKind::Invalid("negative mode size".into()),
        ));
    }
    // Each extent on its own too: a 0 x 2^40 table has no cells but 2^40 column labels.
    if m.checked_mul(n).is_none_or(|c| c > MAX_CELLS) || m.max(n) > MAX_CELLS {
        return Err(LayoutError::new(
            op,
            vec![f.notation()],
            ErrorKind::Invalid(format!("{m}x{n} cells is more than the {MAX_CELLS} this prints")),
        ));
    }
    Ok(())
}

/// The offsets of a rank-1 or rank-2 function, evaluated into a `rows x cols` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    /// The function in CuTe notation.
    pub title: String,
    /// Number of rows (size of mode 0; 1 for a rank-1 function).
    pub rows: usize,
    /// Number of columns (size of mode 1; the size for a rank-1 function).
    pub cols: usize,
    /// The codomain extent, when known.
    pub cosize: Option<i64>,
    values: Vec<i64>,
}

impl Grid {
    /// Evaluate `f` on every cell. Errors for ranks other than 1 and 2, dynamic sizes or
    /// offsets, and more than [`MAX_CELLS`] cells.
    pub fn of<F: Tabulate + ?Sized>(f: &F) -> Result<Grid> {
        let (m, n) = static_dims("print_layout", f)?;
        let rank1 = f.domain_rank() == 1;
        let mut values = Vec::with_capacity((m * n) as usize);
        for i in 0..m {
            for j in 0..n {
                let c = if rank1 { Tuple::Leaf(s(j)) } else { coord2(i, j) };
                values.push(f.offset_at(&c)?);
            }
        }
        Ok(Grid {
            title: f.notation(),
            rows: m as usize,
            cols: n as usize,
            cosize: f.cosize_hint(),
            values,
        })
    }
    /// The offset in row `i`, column `j`.
    pub fn get(&self, i: usize, j: usize) -> Option<i64> {
        if i < self.rows && j < self.cols {
            self.values.get(i * self.cols + j).copied()
        } else {
            None
        }
    }
    /// All offsets, row by row.
    pub fn values(&self) -> &[i64] {
        &self.values
    }
    /// Width of the widest offset label: at least the digits of the cosize, as CuTe's
    /// `num_digits(cosize(layout))`.
    pub fn label_width(&self) -> usize {
        let mut w = self.values.iter().map(|v| v.to_string().len()).max().unwrap_or(1);
        if let Some(c) = self.cosize {
            w = w.max(c.to_string().len());
        }
        w
    }
    /// The table in CuTe's `print_layout` format (ends with a newline).
    pub fn to_table(&self) -> String {
        let w = self.label_width();
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        // Column indices.
        out.push_str("    ");
        for j in 0..self.cols {
            let _ = write!(out, "  {j:>w$} ");
        }
        // CuTe leaves a trailing blank after the last column index; drop it.
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out.push('\n');
        let mut sep = String::from("    ");
        for _ in 0..self.cols {
            sep.push('+');
            sep.extend(std::iter::repeat_n('-', w + 2));
        }
        sep.push_str("+\n");
        for i in 0..self.rows {
            out.push_str(&sep);
            let _ = write!(out, "{i:>2}  ");
            for j in 0..self.cols {
                let _ = write!(out, "| {:>w$} ", self.values[i * self.cols + j]);
            }
            out.push_str("|\n");
        }
        out.push_str(&sep);
        out
    }
}

/// The `print_layout` table of `f`.
pub fn table<F: Tabulate + ?Sized>(f: &F) -> Result<String> {
    Ok(Grid::of(f)?.to_table())
}

impl Layout {
    /// CuTe's `print_layout` as a string: the grid of offsets of a rank-2 layout (a
    /// rank-1 layout prints as one row). See the [module docs](crate::print).
    pub fn to_table(&self) -> Result<String> {
        table(self)
    }
}

impl ComposedLayout {
    /// CuTe's `print_layout` of a composed layout: the table of the composed function's
    /// offsets (the swizzle applied).
    pub fn to_table(&self) -> Result<String> {
        table(self)
    }
}

impl AnyLayout {
    /// CuTe's `print_layout` of a plain or composed layout.
    pub fn to_table(&self) -> Result<String> {
        table(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple;

    #[test]
    fn rank1_and_errors() {
        let l = Layout::new(tuple!(4), tuple!(2)).unwrap();
        let t = l.to_table().unwrap();
        assert!(t.contains(" 0  | 0 | 2 | 4 | 6 |"), "{t}");
        let l3 = Layout::col_major(tuple!(2, 2, 2));
        assert!(l3.to_table().unwrap_err().to_string().contains("rank 3"));
        let dy = Layout::new(tuple!("M", 2), tuple!(1, 4)).unwrap();
        assert!(dy.to_table().is_err());
        let dy = Layout::new(tuple!(2, 2), tuple!(1, "ld")).unwrap();
        assert!(dy.to_table().is_err());
        let big = Layout::col_major(tuple!(1000, 1000));
        assert!(big.to_table().is_err());
    }
}
