//! SVG pictures of layouts, after CuTe's `print_svg` / `print_latex`.
//!
//! * [`layout_grid`]: a rank-2 layout (or anything [`Tabulate`]) as a grid of cells
//!   labelled with their offsets, filled by offset with CuTe's 8-shade gray scale
//!   (`TSVGColor_BWx8`), with row and column indices; rank 1 draws one row.
//! * [`tv_layout`]: a thread-value layout `(t,v) -> i` into an `M x N` tile, drawn as
//!   CuTe's `print_latex_tv` / `print_svg` draw TV layouts: the flat index `i` is the
//!   column-major position in the tile (`m = i % M`, `n = i / M`, which is CuTe's
//!   composition with the identity tensor of `(M,N)`), every cell is filled by its thread
//!   with CuTe's TV colors (`SVGColor_TV`) and labelled `T<t>` over `V<v>`; when several
//!   `(t,v)` reach one cell the first in `(t,v)` order wins, as in CuTe.
//!
//! The output is SVG 1.1 text, deterministic (no timestamps, fixed number formats), with
//! all text escaped. Geometry is integral and described by [`Geometry`], so the cell of
//! `(i,j)` can be located in a rendering.
//!
//! ```
//! use rcute_layout::{svg, tuple, Layout};
//! let tv = Layout::new(tuple!((4, 8), (2, 2)), tuple!((32, 1), (16, 8))).unwrap();
//! let pic = svg::tv_layout(&tv, (16, 8)).unwrap();
//! assert!(pic.starts_with("<?xml"));
//! assert!(pic.contains(">T0</tspan>"));
//! ```

use crate::composed::AnyLayout;
use crate::error::{ErrorKind, LayoutError, Result};
use crate::layout::Layout;
use crate::print::{check_cells, coord2, static_dims, Grid, Tabulate};
use std::fmt::Write as _;

/// A deterministic color scheme, indexed modulo its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    /// CuTe's `TSVGColor_BWx8`: eight gray levels (the default for offsets).
    Gray8,
    /// CuTe's `SVGColor_TV`: eight pastel colors (the default for threads).
    Tv8,
    /// Every cell white (CuTe's `TSVGColor_White`).
    White,
}

const GRAY8: [(u8, u8, u8); 8] = [
    (255, 255, 255),
    (230, 230, 230),
    (205, 205, 205),
    (180, 180, 180),
    (155, 155, 155),
    (130, 130, 130),
    (105, 105, 105),
    (80, 80, 80),
];

const TV8: [(u8, u8, u8); 8] = [
    (175, 175, 255),
    (175, 255, 175),
    (255, 255, 175),
    (255, 175, 175),
    (210, 210, 255),
    (210, 255, 210),
    (255, 255, 210),
    (255, 210, 210),
];

impl Palette {
    /// The color of index `i` (negative indices wrap as well).
    pub fn rgb(self, i: i64) -> (u8, u8, u8) {
        let k = i.rem_euclid(8) as usize;
        match self {
            Palette::Gray8 => GRAY8[k],
            Palette::Tv8 => TV8[k],
            Palette::White => (255, 255, 255),
        }
    }
    /// The color of index `i` as `#rrggbb`.
    pub fn hex(self, i: i64) -> String {
        let (r, g, b) = self.rgb(i);
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// Escape text for XML character data and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters not allowed in XML 1.0 are dropped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// Where things are in a picture, in pixels (user units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Number of cell rows.
    pub rows: u32,
    /// Number of cell columns.
    pub cols: u32,
    /// Width of one cell.
    pub cell_w: u32,
    /// Height of one cell.
    pub cell_h: u32,
    /// Left edge of column 0.
    pub origin_x: u32,
    /// Top edge of row 0.
    pub origin_y: u32,
    /// Width of the whole picture.
    pub width: u32,
    /// Height of the whole picture.
    pub height: u32,
}

/// Margin around everything.
const PAD: u32 = 8;
/// Height of the caption line (the layout in CuTe notation).
const CAPTION_H: u32 = 24;
/// Height of the column-index line.
const INDEX_H: u32 = 20;
/// Approximate advance of one monospace character at the label font size.
const CHAR_W: u32 = 8;
/// Font family of labels: common monospace fonts, then the generic family.
const FAMILY: &str = "'DejaVu Sans Mono', Menlo, Consolas, 'Courier New', monospace";
/// Font size of labels.
const FONT: u32 = 12;

impl Geometry {
    fn new(rows: u32, cols: u32, cell_w: u32, cell_h: u32, caption_chars: usize) -> Geometry {
        let row_digits = (rows.saturating_sub(1)).to_string().len() as u32;
        let index_w = CHAR_W * row_digits + 12;
        let origin_x = PAD + index_w;
        let origin_y = PAD + CAPTION_H + INDEX_H;
        let caption_w = CHAR_W.saturating_mul(caption_chars.min(100_000) as u32);
        let width = (origin_x + cols * cell_w + PAD).max(2 * PAD + caption_w);
        let height = origin_y + rows * cell_h + PAD;
        Geometry {
            rows,
            cols,
            cell_w,
            cell_h,
            origin_x,
            origin_y,
            width,
            height,
        }
    }
    /// Top-left corner of the cell in row `i`, column `j`.
    pub fn cell_origin(&self, i: u32, j: u32) -> (u32, u32) {
        (self.origin_x + j * self.cell_w, self.origin_y + i * self.cell_h)
    }
    /// Geometry of [`layout_grid`] for `f`.
    pub fn of_grid<F: Tabulate + ?Sized>(f: &F) -> Result<Geometry> {
        Ok(grid_geometry(&Grid::of(f)?))
    }
    /// Geometry of [`tv_layout`] for a tile of `m x n` cells and a layout with `t`
    /// threads and `v` values.
    pub fn of_tv(tile: (i64, i64), t: i64, v: i64, caption_chars: usize) -> Geometry {
        let w = tv_cell_w(t, v);
        Geometry::new(tile.0.max(0) as u32, tile.1.max(0) as u32, w, 36, caption_chars)
    }
}

fn grid_geometry(g: &Grid) -> Geometry {
    let w = (CHAR_W * g.label_width() as u32 + 12).max(32);
    Geometry::new(g.rows as u32, g.cols as u32, w, 32, g.title.chars().count())
}

fn tv_cell_w(t: i64, v: i64) -> u32 {
    let digits = (t.saturating_sub(1)).max(v.saturating_sub(1)).max(0).to_string().len() as u32;
    (CHAR_W * (digits + 1) + 12).max(36)
}

/// Text baseline for a label centred vertically at `cy`.
fn baseline(cy: u32) -> u32 {
    cy + FONT * 35 / 100
}

fn header(out: &mut String, geo: &Geometry, title: &str) {
    let _ = writeln!(out, r#"<?xml version="1.0" encoding="UTF-8" standalone="no"?>"#);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
        w = geo.width,
        h = geo.height
    );
    let t = escape(title);
    let _ = writeln!(out, "<title>{t}</title>");
    let _ = writeln!(
        out,
        r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
        geo.width, geo.height
    );
    let _ = writeln!(
        out,
        r##"<g font-family="{FAMILY}" font-size="{FONT}" text-anchor="middle" fill="#000000">"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="start">{t}</text>"#,
        PAD,
        baseline(PAD + CAPTION_H / 2)
    );
    // Row and column indices.
    let yi = baseline(PAD + CAPTION_H + INDEX_H / 2);
    for j in 0..geo.cols {
        let (x, _) = geo.cell_origin(0, j);
        let _ = writeln!(out, r#"<text x="{}" y="{yi}">{j}</text>"#, x + geo.cell_w / 2);
    }
    let xi = (PAD + geo.origin_x) / 2;
    for i in 0..geo.rows {
        let (_, y) = geo.cell_origin(i, 0);
        let _ = writeln!(out, r#"<text x="{xi}" y="{}">{i}</text>"#, baseline(y + geo.cell_h / 2));
    }
    let _ = writeln!(out, "</g>");
}

fn footer(out: &mut String) {
    out.push_str("</svg>\n");
}

fn cell_rect(out: &mut String, geo: &Geometry, i: u32, j: u32, fill: &str) {
    let (x, y) = geo.cell_origin(i, j);
    let _ = writeln!(
        out,
        r##"<rect x="{x}" y="{y}" width="{}" height="{}" fill="{fill}" stroke="#000000" stroke-width="1"/>"##,
        geo.cell_w, geo.cell_h
    );
}

/// `f` (rank 2, or rank 1 as one row) as a grid of cells labelled with their offsets,
/// filled with CuTe's gray scale by offset.
pub fn layout_grid<F: Tabulate + ?Sized>(f: &F) -> Result<String> {
    layout_grid_with(f, Palette::Gray8)
}

/// [`layout_grid`] with another palette (indexed by offset).
pub fn layout_grid_with<F: Tabulate + ?Sized>(f: &F, palette: Palette) -> Result<String> {
    let g = Grid::of(f)?;
    let geo = grid_geometry(&g);
    let mut out = String::new();
    header(&mut out, &geo, &g.title);
    for i in 0..g.rows {
        for j in 0..g.cols {
            let v = g.get(i, j).unwrap_or(0);
            cell_rect(&mut out, &geo, i as u32, j as u32, &palette.hex(v));
        }
    }
    let _ = writeln!(
        out,
        r##"<g font-family="{FAMILY}" font-size="{FONT}" text-anchor="middle" fill="#000000">"##
    );
    for i in 0..g.rows {
        for j in 0..g.cols {
            let v = g.get(i, j).unwrap_or(0);
            let (x, y) = geo.cell_origin(i as u32, j as u32);
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}">{v}</text>"#,
                x + geo.cell_w / 2,
                baseline(y + geo.cell_h / 2)
            );
        }
    }
    let _ = writeln!(out, "</g>");
    footer(&mut out);
    Ok(out)
}

/// A thread-value layout `(t,v) -> i` over an `m x n` tile (`i` column-major in the
/// tile), drawn with cells filled by thread (CuTe's TV colors) and labelled `T<t>`/`V<v>`.
/// Cells no `(t,v)` reaches stay white. Errors unless `tv` has rank 2 with static sizes
/// and every index lies in `[0, m*n)`.
pub fn tv_layout<F: Tabulate + ?Sized>(tv: &F, tile: (i64, i64)) -> Result<String> {
    tv_layout_with(tv, tile, Palette::Tv8)
}

/// [`tv_layout`] with another palette (indexed by thread).
pub fn tv_layout_with<F: Tabulate + ?Sized>(tv: &F, tile: (i64, i64), palette: Palette) -> Result<String> {
    let op = "print_svg_tv";
    let err = |k: ErrorKind| LayoutError::new(op, vec![tv.notation(), format!("({},{})", tile.0, tile.1)], k);
    if tv.domain_rank() != 2 {
        return Err(err(ErrorKind::Rank(format!(
            "a TV layout has rank 2 (thread, value), got rank {}",
            tv.domain_rank()
        ))));
    }
    let (nt, nv) = static_dims(op, tv)?;
    let (m, n) = tile;
    if m <= 0 || n <= 0 {
        return Err(err(ErrorKind::Invalid("tile extents must be positive".into())));
    }
    check_cells(op, tv, m, n)?;
    let cells = (m * n) as usize;
    let mut owner: Vec<Option<(i64, i64)>> = vec![None; cells];
    for t in 0..nt {
        for v in 0..nv {
            let idx = tv.offset_at(&coord2(t, v))?;
            if idx < 0 || idx >= m * n {
                return Err(err(ErrorKind::OutOfDomain(format!(
                    "(t,v) = ({t},{v}) maps to index {idx}, outside the {m}x{n} tile"
                ))));
            }
            let slot = &mut owner[idx as usize];
            if slot.is_none() {
                *slot = Some((t, v));
            }
        }
    }
    let title = tv.notation();
    let geo = Geometry::of_tv(tile, nt, nv, title.chars().count());
    let mut out = String::new();
    header(&mut out, &geo, &title);
    // Cell (i,j) holds tile index i + j*m.
    for i in 0..m {
        for j in 0..n {
            let fill = match owner[(i + j * m) as usize] {
                Some((t, _)) => palette.hex(t),
                None => "#ffffff".to_string(),
            };
            cell_rect(&mut out, &geo, i as u32, j as u32, &fill);
        }
    }
    let small = FONT - 1;
    let _ = writeln!(
        out,
        r##"<g font-family="{FAMILY}" font-size="{small}" text-anchor="middle" fill="#000000">"##
    );
    for i in 0..m {
        for j in 0..n {
            if let Some((t, v)) = owner[(i + j * m) as usize] {
                let (x, y) = geo.cell_origin(i as u32, j as u32);
                let cx = x + geo.cell_w / 2;
                let _ = writeln!(
                    out,
                    r#"<text><tspan x="{cx}" y="{}">T{t}</tspan><tspan x="{cx}" y="{}">V{v}</tspan></text>"#,
                    baseline(y + geo.cell_h / 4 + 2),
                    baseline(y + 3 * geo.cell_h / 4 - 2)
                );
            }
        }
    }
    let _ = writeln!(out, "</g>");
    footer(&mut out);
    Ok(out)
}

impl Layout {
    /// [`layout_grid`] of this layout.
    pub fn to_svg(&self) -> Result<String> {
        layout_grid(self)
    }
}

impl AnyLayout {
    /// [`layout_grid`] of this plain or composed layout.
    pub fn to_svg(&self) -> Result<String> {
        layout_grid(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple;

    #[test]
    fn escaping_and_errors() {
        assert_eq!(escape("a<b & \"c\"'"), "a&lt;b &amp; &quot;c&quot;&apos;");
        let tv = Layout::new(tuple!(4, 2), tuple!(2, 1)).unwrap();
        assert!(tv_layout(&tv, (2, 2)).unwrap_err().to_string().contains("outside"));
        assert!(tv_layout(&tv, (0, 2)).is_err());
        let r1 = Layout::new(tuple!(4), tuple!(1)).unwrap();
        assert!(tv_layout(&r1, (4, 1)).is_err());
        assert_eq!(Palette::Gray8.hex(-1), "#505050");
    }
}
