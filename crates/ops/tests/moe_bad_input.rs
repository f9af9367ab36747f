//! Every rejection of `validate_fused_moe` / `validate_grouped_gemm` (what `Ops::fused_moe`
//! and `Ops::grouped_gemm` check before launching), without a GPU: raw views at fake,
//! non-overlapping addresses.

use rcute_ops::moe::{
    fused_moe_workspace_bytes, grouped_gemm_workspace_bytes, validate_fused_moe, validate_grouped_gemm, MoeOptions,
    MoeRouting, MoeWorkspace,
};
use rcute_ops::{DType, Geometry, MatrixMut, MatrixRef, OpsError};

const GB: u64 = 1 << 30;

fn mat(slot: u64, dtype: DType, rows: usize, cols: usize) -> Geometry {
    Geometry::dense(slot * GB, rows * cols * 64, dtype, rows, cols)
}

fn batched(g: Geometry, batch: usize) -> Geometry {
    Geometry {
        batch,
        batch_stride: (g.rows * g.cols) as i64,
        ..g
    }
}

struct Case {
    x: Geometry,
    w13: Geometry,
    w2: Geometry,
    y: Geometry,
    logits: Geometry,
    ids: Geometry,
    wts: Geometry,
    ws: (u64, usize),
    given: bool,
    topk: usize,
    offset: usize,
    row_tile: Option<i64>,
}

/// T = 5 tokens, H = 64, I = 32, E = 8 local experts, top-2.
fn good() -> Case {
    let (t, h, i, e, k) = (5, 64, 32, 8, 2);
    Case {
        x: mat(1, DType::BF16, t, h),
        w13: batched(mat(2, DType::BF16, 2 * i, h), e),
        w2: batched(mat(3, DType::BF16, h, i), e),
        y: mat(4, DType::BF16, t, h),
        logits: mat(5, DType::F32, t, e),
        ids: mat(6, DType::S32, t, k),
        wts: mat(7, DType::F32, t, k),
        ws: (8 * GB, fused_moe_workspace_bytes(t, k, e, h, i, DType::BF16).unwrap()),
        given: false,
        topk: k,
        offset: 0,
        row_tile: None,
    }
}

fn check(c: &Case) -> Result<(), OpsError> {
    // SAFETY: validation only; nothing is launched.
    unsafe {
        let routing = if c.given {
            MoeRouting::Given {
                topk_ids: MatrixRef::from_raw(c.ids),
                topk_weights: MatrixRef::from_raw(c.wts),
            }
        } else {
            MoeRouting::Logits {
                logits: MatrixRef::from_raw(c.logits),
                topk: c.topk,
                renormalize: true,
            }
        };
        let ws = MoeWorkspace::from_raw(c.ws.0, c.ws.1);
        validate_fused_moe(
            &MatrixRef::from_raw(c.x),
            &MatrixRef::from_raw(c.w13),
            &MatrixRef::from_raw(c.w2),
            &routing,
            &MoeOptions {
                expert_offset: c.offset,
                row_tile: c.row_tile,
                ..MoeOptions::default()
            },
            &ws,
            &MatrixMut::from_raw(c.y),
        )
        .map(|_| ())
    }
}

#[test]
fn good_inputs_pass() {
    check(&good()).unwrap();
    check(&Case { given: true, ..good() }).unwrap();
    // Expert parallelism: 8 local experts from 0 of 8 logits' experts... and of 16.
    let mut c = good();
    c.logits = mat(5, DType::F32, 5, 16);
    c.offset = 8;
    check(&c).unwrap();
    // The SM90 layer's row tiles: 64 or 128 rows.
    for r in [64, 128] {
        check(&Case {
            row_tile: Some(r),
            ..good()
        })
        .unwrap();
    }
}

#[test]
fn an_unsupported_row_tile_is_a_shape_error() {
    for r in [0, 32, 96, 256] {
        let e = check(&Case {
            row_tile: Some(r),
            ..good()
        });
        assert!(matches!(e, Err(OpsError::Shape(_))), "row tile {r}: {e:?}");
    }
}

/// A bad input, and the error it must give.
type BadCase = (&'static str, Case, fn(&OpsError) -> bool);

#[test]
fn each_bad_input_is_a_typed_error() {
    let g = good();
    let bad: Vec<BadCase> = vec![
        (
            "x f32",
            Case {
                x: mat(1, DType::F32, 5, 64),
                ..good()
            },
            |e| matches!(e, OpsError::DType(_)),
        ),
        (
            "w2 f16",
            Case {
                w2: batched(mat(3, DType::F16, 64, 32), 8),
                ..good()
            },
            |e| matches!(e, OpsError::DType(_)),
        ),
        (
            "empty T",
            Case {
                x: mat(1, DType::BF16, 0, 64),
                ..good()
            },
            |e| matches!(e, OpsError::Empty(_)),
        ),
        (
            "w13 H",
            Case {
                w13: batched(mat(2, DType::BF16, 64, 72), 8),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        (
            "w13 odd rows",
            Case {
                w13: batched(mat(2, DType::BF16, 65, 64), 8),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        (
            "w2 experts",
            Case {
                w2: batched(mat(3, DType::BF16, 64, 32), 7),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        (
            "w2 I",
            Case {
                w2: batched(mat(3, DType::BF16, 64, 40), 8),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        (
            "y rows",
            Case {
                y: mat(4, DType::BF16, 4, 64),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        ("k > E", Case { topk: 9, ..good() }, |e| matches!(e, OpsError::Shape(_))),
        ("k = 0", Case { topk: 0, ..good() }, |e| matches!(e, OpsError::Shape(_))),
        (
            "logits rows",
            Case {
                logits: mat(5, DType::F32, 6, 8),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        (
            "logits s32",
            Case {
                logits: mat(5, DType::S32, 5, 8),
                ..good()
            },
            |e| matches!(e, OpsError::DType(_)),
        ),
        ("range past E", Case { offset: 1, ..good() }, |e| {
            matches!(e, OpsError::Shape(_))
        }),
        (
            "ids f32",
            Case {
                given: true,
                ids: mat(6, DType::F32, 5, 2),
                ..good()
            },
            |e| matches!(e, OpsError::DType(_)),
        ),
        (
            "weights shape",
            Case {
                given: true,
                wts: mat(7, DType::F32, 5, 3),
                ..good()
            },
            |e| matches!(e, OpsError::Shape(_)),
        ),
        (
            "workspace small",
            Case {
                ws: (g.ws.0, g.ws.1 - 1),
                ..good()
            },
            |e| {
                matches!(
                    e,
                    OpsError::OutOfBounds {
                        operand: "workspace",
                        ..
                    }
                )
            },
        ),
        (
            "workspace misaligned",
            Case {
                ws: (g.ws.0 + 16, g.ws.1),
                ..good()
            },
            |e| matches!(e, OpsError::Alignment { .. }),
        ),
        (
            "x misaligned",
            Case {
                x: Geometry { ptr: GB + 2, ..g.x },
                ..good()
            },
            |e| matches!(e, OpsError::Alignment { .. }),
        ),
        (
            "x past its buffer",
            Case {
                x: Geometry { len: 100, ..g.x },
                ..good()
            },
            |e| matches!(e, OpsError::OutOfBounds { .. }),
        ),
        (
            "y overlaps x",
            Case {
                y: Geometry { ptr: GB, ..g.y },
                ..good()
            },
            |e| matches!(e, OpsError::Strides { .. }),
        ),
        (
            "y column-major",
            Case {
                y: g.y.to_col_major(),
                ..good()
            },
            |e| matches!(e, OpsError::Strides { .. }),
        ),
        (
            "H not a multiple of 8",
            Case {
                x: mat(1, DType::BF16, 5, 60),
                w13: batched(mat(2, DType::BF16, 64, 60), 8),
                w2: batched(mat(3, DType::BF16, 60, 32), 8),
                y: mat(4, DType::BF16, 5, 60),
                ..good()
            },
            |e| matches!(e, OpsError::Alignment { .. }),
        ),
    ];
    for (what, c, ok) in bad {
        match check(&c) {
            Err(e) if ok(&e) => eprintln!("{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn grouped_gemm_bad_inputs_are_typed_errors() {
    let (t, k, n, kk, l) = (7, 3, 48, 40, 4);
    let ws = (9 * GB, grouped_gemm_workspace_bytes(t, k, l).unwrap());
    let run = |x: Geometry, w: Geometry, ids: Geometry, out: Geometry, ws: (u64, usize)| -> Result<(), OpsError> {
        // SAFETY: validation only.
        unsafe {
            validate_grouped_gemm(
                &MatrixRef::from_raw(x),
                &MatrixRef::from_raw(w),
                &MatrixRef::from_raw(ids),
                None,
                0,
                &MoeWorkspace::from_raw(ws.0, ws.1),
                &MatrixMut::from_raw(out),
            )
            .map(|_| ())
        }
    };
    let x = mat(1, DType::BF16, t, kk);
    let w = batched(mat(2, DType::BF16, n, kk), l);
    let ids = mat(3, DType::S32, t, k);
    let out = mat(4, DType::BF16, t * k, n);
    run(x, w, ids, out, ws).unwrap();
    assert!(matches!(
        run(x, w, ids, mat(4, DType::BF16, t, n), ws),
        Err(OpsError::Shape(_))
    ));
    assert!(matches!(
        run(x, w, mat(3, DType::F32, t, k), out, ws),
        Err(OpsError::DType(_))
    ));
    assert!(matches!(
        run(mat(1, DType::BF16, 0, kk), w, ids, out, ws),
        Err(OpsError::Empty(_))
    ));
    assert!(matches!(
        run(x, w, ids, out, (ws.0, ws.1 - 4)),
        Err(OpsError::OutOfBounds { .. })
    ));
    assert!(matches!(
        run(
            mat(1, DType::BF16, t, 36),
            batched(mat(2, DType::BF16, n, 36), l),
            ids,
            out,
            ws
        ),
        Err(OpsError::Alignment { .. })
    ));
}
