//! End-to-end tests of the `rcute` binary. Expected values are CuTe's, worked out by
//! hand from CuTe's layout-algebra documentation and `include/cute/layout.hpp`.

use std::process::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rcute(args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_rcute"))
        .args(args)
        .output()
        .expect("run rcute");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(o.stderr).expect("utf-8 stderr"),
    }
}

/// `rcute layout EXPR` succeeds and prints `expected`.
#[track_caller]
fn check(expr: &str, expected: &str) {
    let o = rcute(&["layout", expr]);
    assert_eq!(o.code, 0, "{expr}: stderr {}", o.stderr);
    assert_eq!(o.stdout, format!("{expected}\n"), "{expr}");
    assert!(o.stderr.is_empty(), "{expr}: {}", o.stderr);
}

#[test]
fn literals() {
    check("((2,4),3):((1,8),2)", "((2,4),3):((1,8),2)");
    check("(4,2)", "(4,2):(1,4)"); // bare shape: make_layout(shape)
    check("(2,1,(3,4))", "(2,1,(3,4)):(1,0,(2,6))");
    check("8", "8:1");
    check("(2,2):(-1,-2)", "(2,2):(-1,-2)");
    check(" ( 2 , 3 ) : ( 3 , 1 ) ", "(2,3):(3,1)");
    check("(_8,_4):(_1,_8)", "(8,4):(1,8)"); // CuTe's printed form is accepted
    check("(M,K):(1,ldA)", "(M,K):(1,ldA)");
    check("[4,_,(2,2):(1,8),[2,3]]", "[4,_,(2,2):(1,8),[2,3]]");
    check("Sw<3,3,3>", "Sw<3,3,3>");
}

#[test]
fn composition() {
    check("composition((6,2):(8,2),(4,3):(3,1))", "((2,2),3):((24,2),8)");
    check("composition((10,2):(16,4),(5,4):(1,5))", "(5,(2,2)):(16,(80,4))");
    // By-mode tiler: drops nothing, composes each mode.
    check("composition((12,(4,8)):(59,(13,1)),[3,8])", "(3,(4,2)):(59,(13,1))");
    check("composition(20:2,4)", "4:2");
}

#[test]
fn complement() {
    // CuTe docs, "Complement" examples.
    check("complement(4:1,24)", "6:4");
    check("complement(6:4,24)", "4:1");
    check("complement((4,6):(1,4),24)", "1:0");
    check("complement(4:2,24)", "(2,3):(1,8)");
    check("complement((2,4):(1,6),24)", "3:2");
    check("complement((2,2):(1,6),24)", "(3,2):(2,12)");
    // complement(4:2) is with respect to cosize 7: (2,1):(1,8) coalesces to 2:1.
    check("complement(4:2)", "2:1");
}

#[test]
fn inverses() {
    // (2,4):(4,1) maps (i,j) -> 4i+j; inverse: o -> o/4 + 2*(o%4).
    check("right_inverse((2,4):(4,1))", "(4,2):(2,1)");
    check("right_inverse((4,2):(1,4))", "8:1");
    // CuTe's left_inverse (layout.hpp): shape (2/1, 4), strides (0, 1).
    check("left_inverse(4:2)", "(2,4):(0,1)");
    check("left_inverse((4,2):(2,1))", "(2,4):(4,1)");
}

#[test]
fn coalesce_and_filter() {
    // CuTe docs, "Coalesce".
    check("coalesce((2,(1,6)):(1,(6,2)))", "12:1");
    check("coalesce((2,(1,6)):(1,(6,2)),(1,1))", "(2,6):(1,2)");
    check("filter((2,1,3):(1,7,0))", "2:1");
}

#[test]
fn divides() {
    // CuTe docs, "Logical Divide" and the zipped/tiled/flat variants.
    check("logical_divide((4,2,3):(2,1,8),4:2)", "((2,2),(2,3)):((4,1),(2,8))");
    let a = "(9,(4,8)):(59,(13,1))";
    let t = "[3:3,(2,4):(1,8)]";
    check(
        &format!("logical_divide({a},{t})"),
        "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))",
    );
    check(
        &format!("zipped_divide({a},{t})"),
        "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))",
    );
    check(
        &format!("tiled_divide({a},{t})"),
        "((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))",
    );
    check(
        &format!("flat_divide({a},{t})"),
        "(3,(2,4),3,(2,2)):(177,(13,2),59,(26,1))",
    );
    check("zipped_divide((128,64),[32,16])", "((32,16),(4,4)):((1,128),(32,2048))");
    check("logical_divide(16:1,[_])", "(16):(1)");
}

#[test]
fn products() {
    // CuTe docs, "Logical Product".
    check("logical_product((2,2):(4,1),6:1)", "((2,2),(2,3)):((4,1),(2,8))");
    // By mode: 2:5 x 3:1 = (2,3):(5,1) (complement(2:5,6) = 5:1), 5:1 x 4:1 = (5,4):(1,5).
    check("logical_product((2,5):(5,1),[3,4])", "((2,3),(5,4)):((5,1),(1,5))");
    check("zipped_product((2,5):(5,1),[3,4])", "((2,5),(3,4)):((5,1),(1,5))");
    check("tiled_product((2,5):(5,1),[3,4])", "((2,5),3,4):((5,1),1,5)");
    check("flat_product((2,5):(5,1),[3,4])", "(2,5,3,4):(5,1,1,5)");
    // CuTe docs, "Blocked and Raked Products".
    check(
        "blocked_product((2,5):(5,1),(3,4):(1,3))",
        "((2,3),(5,4)):((5,10),(1,30))",
    );
    check(
        "raked_product((2,5):(5,1),(3,4):(1,3))",
        "((3,2),(4,5)):((10,5),(30,1))",
    );
}

#[test]
fn shapes_and_orders() {
    check("tile_to_shape((8,8):(8,1),(32,16))", "((8,4),(8,2)):((8,64),(1,256))");
    // Repetitions (4,2) laid out row-major, scaled by cosize 64.
    check(
        "tile_to_shape((8,8):(8,1),(32,16),(1,0))",
        "((8,4),(8,2)):((8,128),(1,64))",
    );
    check("make_ordered_layout((2,3,4),(2,0,1))", "(2,3,4):(12,1,3)");
    check("make_layout_like((2,3):(10,1))", "(2,3):(3,1)");
}

#[test]
fn common_and_recast() {
    check("max_common_vector((4,2):(1,8),8:1)", "4");
    check("max_common_vector((4,2):(1,4),8:1)", "8");
    check("max_common_layout((4,2):(1,8),8:1)", "4:1");
    check("upcast((8,4):(1,8),2)", "(4,4):(1,4)");
    check("downcast((4,4):(1,4),2)", "(8,4):(1,8)");
}

#[test]
fn queries() {
    let l = "(2,(3,4)):(1,(2,6))";
    check(&format!("size({l})"), "24");
    check(&format!("cosize({l})"), "24");
    check("cosize((2,3):(3,1))", "6");
    check(&format!("rank({l})"), "2");
    check(&format!("depth({l})"), "2");
    check(&format!("shape({l})"), "(2,(3,4))");
    check(&format!("stride({l})"), "(1,(2,6))");
    check(&format!("get({l},1)"), "(3,4):(2,6)");
    check(&format!("get({l},1,0)"), "3:2");
    check(&format!("get(shape({l}),1,1)"), "4");
    check("size(zipped_divide((128,64),[32,16]))", "8192");
    check("rank(zipped_divide((128,64),[32,16]))", "2");
}

#[test]
fn dynamic_extents_flow_symbolically() {
    check("size((M,N):(1,M))", "M*N");
    check(
        "zipped_divide((M,N):(1,ldA),[128,64])",
        "((128,64),(ceil_div(M,128),ceil_div(N,64))):((1,ldA),(128,ldA*64))",
    );
}

#[test]
fn swizzles_and_composed_layouts() {
    check("composition(Sw<3,3,3>,(8,64):(64,1))", "Sw<3,3,3> o 0 o (8,64):(64,1)");
    check("size(composition(Sw<3,3,3>,(8,64):(64,1)))", "512");
    check(
        "logical_divide(composition(Sw<2,0,2>,(4,4):(4,1)),[2,2])",
        "Sw<2,0,2> o 0 o ((2,2),(2,2)):((4,8),(1,2))",
    );
    // Sw<1,0,1> flips bit 0 when bit 1 is set: offsets 2,3 and 6,7 swap.
    let o = rcute(&["layout", "--table", "composition(Sw<1,0,1>,(4,2):(2,1))"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains(" 1  | 3 | 2 |"), "{}", o.stdout);
    assert!(o.stdout.contains(" 3  | 7 | 6 |"), "{}", o.stdout);
}

#[test]
fn parse_error_has_position_and_caret() {
    let o = rcute(&["layout", "((2,4),3):((1,8)2)"]);
    assert_eq!(o.code, 2);
    assert!(o.stdout.is_empty());
    assert_eq!(
        o.stderr,
        "error: expected ',' or ')' at 16\n  ((2,4),3):((1,8)2)\n                  ^\n"
    );

    for (bad, pos) in [
        ("", 0),
        ("(2,3", 4),
        ("(2,3):", 6),
        ("composition(4:1", 15),
        ("[4,", 3),
        ("Sw<3,3>", 6),
        ("4:1 x", 4),
        ("(2,é)", 3),
    ] {
        let o = rcute(&["layout", bad]);
        assert_eq!(o.code, 2, "{bad:?}");
        assert!(o.stderr.starts_with("error: "), "{bad:?}: {}", o.stderr);
        assert!(o.stderr.contains(&format!(" at {pos}\n")), "{bad:?}: {}", o.stderr);
        assert!(o.stderr.trim_end().ends_with('^'), "{bad:?}: {}", o.stderr);
    }
}

#[test]
fn misuse_and_undefined_operations_exit_2() {
    let o = rcute(&["layout", "frob((2,4))"]);
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "error: unknown function 'frob' at 0\n  frob((2,4))\n  ^\n")
    );
    let o = rcute(&["layout", "composition(4:1)"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.starts_with("error: composition takes 2 arguments, got 1 at 0"),
        "{}",
        o.stderr
    );
    let o = rcute(&["layout", "complement(4:1,(2,3):(1,2))"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("must be an integer or a shape, not a layout at 15"),
        "{}",
        o.stderr
    );
    // Undefined in the algebra: the LayoutError, "op(operands): reason".
    let o = rcute(&["layout", "upcast(3:3,2)"]);
    assert_eq!(o.code, 2);
    assert_eq!(
        o.stderr,
        "error: upcast(3:3, 2): divisibility condition violated: stride 3 and 2 do not divide each other\n"
    );
    let o = rcute(&["layout", "(2,3):(1,(2,3))"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.starts_with("error: make_layout("), "{}", o.stderr);
    let o = rcute(&["layout", "99999999999999999999"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("does not fit in 64 bits at 0"), "{}", o.stderr);
}

#[test]
fn json_output() {
    let o = rcute(&["layout", "--json", "zipped_divide((128,64),[32,16])"]);
    assert_eq!(o.code, 0);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("valid JSON");
    assert_eq!(v["shape"], serde_json::json!([[32, 16], [4, 4]]));
    assert_eq!(v["stride"], serde_json::json!([[1, 128], [32, 2048]]));
    assert_eq!(v["layout"], "((32,16),(4,4)):((1,128),(32,2048))");

    let v: serde_json::Value =
        serde_json::from_str(&rcute(&["layout", "--json", "size((2,(3,4)):(1,(2,6)))"]).stdout).unwrap();
    assert_eq!(v, serde_json::json!({"value": 24}));

    let v: serde_json::Value =
        serde_json::from_str(&rcute(&["layout", "--json", "((2,M),3):((1,8),ldA)"]).stdout).unwrap();
    assert_eq!(v["shape"], serde_json::json!([[2, "M"], 3]));
    assert_eq!(v["stride"], serde_json::json!([[1, 8], "ldA"]));

    let v: serde_json::Value = serde_json::from_str(&rcute(&["layout", "--json", "8"]).stdout).unwrap();
    assert_eq!(v, serde_json::json!({"shape": 8, "stride": 1, "layout": "8:1"}));

    let v: serde_json::Value =
        serde_json::from_str(&rcute(&["layout", "--json", "composition(Sw<3,3,3>,(8,64):(64,1))"]).stdout).unwrap();
    assert_eq!(v["swizzle"], "Sw<3,3,3>");
    assert_eq!(v["shape"], serde_json::json!([8, 64]));

    let v: serde_json::Value = serde_json::from_str(&rcute(&["layout", "--json", "shape((2,(3,4)))"]).stdout).unwrap();
    assert_eq!(v, serde_json::json!({"value": [2, [3, 4]]}));
}

#[test]
fn table_output() {
    let o = rcute(&["layout", "--table", "logical_divide((4,2,3):(2,1,8),4:2)"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    insta::assert_snapshot!("table_logical_divide", o.stdout);

    let o = rcute(&["layout", "--table", "size(4:1)"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--table needs a layout"), "{}", o.stderr);
    let o = rcute(&["layout", "--table", "(2,2,2)"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("rank"), "{}", o.stderr);
}

#[test]
fn svg_output() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.svg");
    let o = rcute(&["layout", "(4,2):(2,1)", "--svg", grid.to_str().unwrap()]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "(4,2):(2,1)\n"), "{}", o.stderr);
    let text = std::fs::read_to_string(&grid).unwrap();
    assert!(text.starts_with("<?xml") && text.ends_with("</svg>\n"));
    assert_eq!(
        text,
        rcute_layout::svg::layout_grid(
            &rcute_layout::Layout::new(rcute_layout::tuple!(4, 2), rcute_layout::tuple!(2, 1)).unwrap()
        )
        .unwrap()
    );

    let tv = dir.path().join("tv.svg");
    let o = rcute(&[
        "layout",
        "((4,8),(2,2)):((32,1),(16,8))",
        "--svg",
        tv.to_str().unwrap(),
        "--tv",
        "16x8",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let text = std::fs::read_to_string(&tv).unwrap();
    assert_eq!(text.matches("<tspan").count(), 2 * 128);

    // --tv needs --svg (a usage error from clap, also status 2); bad tiles and
    // indices outside the tile are errors.
    assert_eq!(rcute(&["layout", "(4,2)", "--tv", "4x2"]).code, 2);
    assert_eq!(
        rcute(&["layout", "(4,2)", "--svg", tv.to_str().unwrap(), "--tv", "4y2"]).code,
        2
    );
    let o = rcute(&[
        "layout",
        "((4,8),(2,2)):((32,1),(16,8))",
        "--svg",
        tv.to_str().unwrap(),
        "--tv",
        "8x8",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("outside the 8x8 tile"), "{}", o.stderr);
}

#[test]
fn leading_minus_is_an_expression_not_a_flag() {
    check("-3", "-3:1");
}

/// `rcute layout --exact` reads and prints CuTe's spelling; without it, plain integers
/// stay static and print without underscores.
#[test]
fn exact_flag_on_the_command_line() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rcute"))
            .args(args)
            .output()
            .expect("run rcute");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let e = "zipped_divide((128,64):(_1,128),[_32,_16])";
    assert_eq!(
        run(&["layout", "--exact", e]),
        "((_32,_16),(4,4)):((_1,128),(_32,2048))\n"
    );
    assert_eq!(run(&["layout", e]), "((32,16),(4,4)):((1,128),(32,2048))\n");
    // A static target with a dynamic block: CuTe's static_assert, rcute's error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rcute"))
        .args(["layout", "--exact", "tile_to_shape((8,3):(_1,_8), (_8,_3))"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
