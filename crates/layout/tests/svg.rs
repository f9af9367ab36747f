//! SVG pictures (crate `svg` module): parsed and rasterized with resvg.

use rcute_layout::svg::{self, Geometry, Palette};
use rcute_layout::{tuple, Layout};
use resvg::{tiny_skia, usvg};

fn render(text: &str) -> tiny_skia::Pixmap {
    let tree = usvg::Tree::from_str(text, &usvg::Options::default()).expect("valid SVG");
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).expect("non-empty size");
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
}

fn rgb_at(p: &tiny_skia::Pixmap, x: u32, y: u32) -> (u8, u8, u8) {
    let c = p.pixel(x, y).expect("pixel in range");
    assert_eq!(c.alpha(), 255);
    (c.red(), c.green(), c.blue())
}

/// A point inside cell (i,j), clear of its border and its centred label.
fn inside(g: &Geometry, i: u32, j: u32) -> (u32, u32) {
    let (x, y) = g.cell_origin(i, j);
    (x + 3, y + 3)
}

fn sm80_c_fragment() -> Layout {
    Layout::new(tuple!((4, 8), (2, 2)), tuple!((32, 1), (16, 8))).unwrap()
}

#[test]
fn layout_grid_renders_cells_colored_by_offset() {
    let l = Layout::new(tuple!(4, 2), tuple!(2, 1)).unwrap();
    let text = svg::layout_grid(&l).unwrap();
    let g = Geometry::of_grid(&l).unwrap();
    let p = render(&text);
    assert_eq!((p.width(), p.height()), (g.width, g.height));
    // Not blank: some pixel is not white.
    assert!(p
        .pixels()
        .iter()
        .any(|c| (c.red(), c.green(), c.blue()) != (255, 255, 255)));
    // Cell (i,j) holds offset 2i+j and is filled with CuTe's gray of that offset.
    for i in 0..4 {
        for j in 0..2 {
            let (x, y) = inside(&g, i, j);
            assert_eq!(
                rgb_at(&p, x, y),
                Palette::Gray8.rgb((2 * i + j) as i64),
                "cell ({i},{j})"
            );
        }
    }
}

#[test]
fn tv_layout_renders_cells_colored_by_thread() {
    let tv = sm80_c_fragment();
    let text = svg::tv_layout(&tv, (16, 8)).unwrap();
    let g = Geometry::of_tv((16, 8), 32, 4, tv.to_string().len());
    let p = render(&text);
    assert_eq!((p.width(), p.height()), (g.width, g.height));
    // SM80 m16n8k16 C fragment: thread t holds rows t/4 and t/4+8, columns 2*(t%4)+{0,1}.
    for t in 0..32u32 {
        for v in 0..4u32 {
            let (m, n) = (t / 4 + 8 * (v / 2), 2 * (t % 4) + v % 2);
            let (x, y) = inside(&g, m, n);
            assert_eq!(rgb_at(&p, x, y), Palette::Tv8.rgb(t as i64), "T{t}V{v} at ({m},{n})");
            assert!(text.contains(&format!(">T{t}</tspan><tspan x=\"{}\"", x - 3 + g.cell_w / 2)));
        }
    }
}

#[test]
fn tv_cells_not_reached_stay_white_and_first_thread_wins() {
    // Two threads broadcast onto the same 2 values of a 2x2 tile: row 1 stays empty.
    let tv = Layout::new(tuple!(2, 2), tuple!(0, 2)).unwrap();
    let text = svg::tv_layout(&tv, (2, 2)).unwrap();
    assert_eq!(text.matches(">T0</tspan>").count(), 2);
    assert!(!text.contains(">T1</tspan>"));
    let g = Geometry::of_tv((2, 2), 2, 2, tv.to_string().len());
    let p = render(&text);
    let (x, y) = inside(&g, 1, 0);
    assert_eq!(rgb_at(&p, x, y), (255, 255, 255));
    let (x, y) = inside(&g, 0, 1);
    assert_eq!(rgb_at(&p, x, y), Palette::Tv8.rgb(0));
}

#[test]
fn output_is_deterministic_and_escaped() {
    let l = Layout::new(tuple!(2, 2), tuple!(1, 2)).unwrap();
    assert_eq!(svg::layout_grid(&l).unwrap(), svg::layout_grid(&l).unwrap());
    assert_eq!(svg::escape("<a&b>"), "&lt;a&amp;b&gt;");
    let text = svg::layout_grid(&l).unwrap();
    assert!(text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg "));
    assert!(text.contains("version=\"1.1\""));
    assert!(text.ends_with("</svg>\n"));
}

#[test]
fn errors() {
    let tv = sm80_c_fragment();
    assert!(svg::tv_layout(&tv, (8, 8)).is_err()); // indices up to 127 do not fit 8x8
    assert!(svg::layout_grid(&Layout::col_major(tuple!(2, 2, 2))).is_err());
    assert!(svg::tv_layout(&Layout::new(tuple!("T", 2), tuple!(1, "T")).unwrap(), (4, 4)).is_err());
}

#[test]
fn snapshot_small_grid() {
    let l = Layout::new(tuple!(2, 3), tuple!(3, 1)).unwrap();
    insta::assert_snapshot!("grid_2x3", svg::layout_grid(&l).unwrap());
}

#[test]
fn snapshot_sm80_c_fragment_tv() {
    insta::assert_snapshot!("tv_sm80_16x8_c", svg::tv_layout(&sm80_c_fragment(), (16, 8)).unwrap());
}
