//! The bad-input catalogue of the ops, without a GPU: every public op (`gemm`,
//! `scaled_mm`) against every class of bad input (shape mismatch, zero and huge sizes,
//! sizes beyond the kernels' 32-bit index arithmetic, a leading dimension smaller than a
//! row, overlapping input and output, misaligned views, wrong element types, unsupported
//! architectures, NaN or infinite scalars) must give the typed error named here. The
//! validation functions are pure (they read only the views' geometry, and the
//! architecture rules take a compute capability), so the views below describe fake
//! device addresses and nothing is launched. `tests/tests/gpu_bad_input.rs` runs the same
//! classes through `Ops` on a GPU and checks that the output stays untouched.

use rcute_ops::gemm::{copy_bytes, sm90_qualifies, MAX_BATCH, MAX_DIM};
use rcute_ops::{
    check_gemm_arch, check_scaled_mm_arch, validate, validate_scaled_mm, DType, Geometry, MatrixMut, MatrixRef,
    OpsError, Scale, VectorRef,
};

/// Fake, 1 MiB-apart device addresses: views at different bases never overlap.
const MIB: u64 = 1 << 20;

fn dense(base: u64, dtype: DType, rows: usize, cols: usize) -> Geometry {
    Geometry::dense(base * MIB, rows.saturating_mul(cols), dtype, rows, cols)
}

fn r(g: Geometry) -> MatrixRef<'static> {
    // SAFETY: validation reads only the geometry; nothing is launched with these views.
    unsafe { MatrixRef::from_raw(g) }
}

fn w(g: Geometry) -> MatrixMut<'static> {
    // SAFETY: as in `r`.
    unsafe { MatrixMut::from_raw(g) }
}

fn v(base: u64, dtype: DType, len: usize) -> VectorRef<'static> {
    // SAFETY: as in `r`.
    unsafe { VectorRef::from_raw(base * MIB, len, dtype, len, None) }
}

macro_rules! rejects {
    ($what:expr, $result:expr, $pattern:pat) => {{
        let result = $result;
        assert!(
            matches!(result, Err($pattern)),
            "{}: expected {}, got {result:?}",
            $what,
            stringify!($pattern)
        );
    }};
}

/// A valid bf16 GEMM: A 64x32 (row-major), B 32x48 (column-major), D 64x48 f32.
struct Gemm {
    a: Geometry,
    b: Geometry,
    c: Option<Geometry>,
    d: Geometry,
    alpha: f32,
    beta: f32,
}

impl Gemm {
    fn new() -> Gemm {
        Gemm {
            a: dense(1, DType::BF16, 64, 32),
            b: dense(2, DType::BF16, 32, 48).to_col_major(),
            c: None,
            d: dense(3, DType::F32, 64, 48),
            alpha: 1.0,
            beta: 0.0,
        }
    }
    fn run(&self) -> Result<rcute_ops::GemmProblem<'static>, OpsError> {
        let c = self.c.map(r);
        validate(&r(self.a), &r(self.b), c.as_ref(), &w(self.d), self.alpha, self.beta)
    }
}

fn gemm(edit: impl FnOnce(&mut Gemm)) -> Result<rcute_ops::GemmProblem<'static>, OpsError> {
    let mut g = Gemm::new();
    edit(&mut g);
    g.run()
}

#[test]
fn gemm_baseline_is_valid() {
    let p = Gemm::new().run().unwrap();
    assert_eq!((p.m(), p.n(), p.k(), p.l()), (64, 48, 32, 1));
}

#[test]
fn gemm_shape_mismatch() {
    rejects!(
        "B rows != K",
        gemm(|g| g.b = dense(2, DType::BF16, 16, 48).to_col_major()),
        OpsError::Shape(_)
    );
    rejects!(
        "D rows != M",
        gemm(|g| g.d = dense(3, DType::F32, 63, 48)),
        OpsError::Shape(_)
    );
    rejects!(
        "C shape != D",
        gemm(|g| {
            g.c = Some(dense(4, DType::F32, 64, 40));
            g.beta = 1.0;
        }),
        OpsError::Shape(_)
    );
    rejects!(
        "batch of A neither 1 nor D's",
        gemm(|g| {
            g.a = g.a.batched(3, 64 * 32);
            g.d = g.d.batched(2, 64 * 48);
        }),
        OpsError::Shape(_)
    );
    rejects!("beta without C", gemm(|g| g.beta = 0.5), OpsError::Shape(_));
}

/// `Geometry` builders for the catalogue (the views have their own; these edit copies).
trait Edit {
    fn strides(self, row: i64, col: i64) -> Geometry;
    fn batched(self, batch: usize, stride: i64) -> Geometry;
    fn at(self, ptr: u64) -> Geometry;
}

impl Edit for Geometry {
    fn strides(mut self, row: i64, col: i64) -> Geometry {
        (self.row_stride, self.col_stride) = (row, col);
        self
    }
    fn batched(mut self, batch: usize, stride: i64) -> Geometry {
        (self.batch, self.batch_stride) = (batch, stride);
        self.len = self.len.saturating_mul(batch.max(1));
        self
    }
    fn at(mut self, ptr: u64) -> Geometry {
        self.ptr = ptr;
        self
    }
}

#[test]
fn gemm_zero_sizes() {
    rejects!(
        "M = 0",
        gemm(|g| {
            g.a = dense(1, DType::BF16, 0, 32);
            g.d = dense(3, DType::F32, 0, 48);
        }),
        OpsError::Empty(_)
    );
    rejects!(
        "N = 0",
        gemm(|g| {
            g.b = dense(2, DType::BF16, 32, 0);
            g.d = dense(3, DType::F32, 64, 0);
        }),
        OpsError::Empty(_)
    );
    rejects!(
        "K = 0",
        gemm(|g| {
            g.a = dense(1, DType::BF16, 64, 0).strides(8, 1);
            g.b = dense(2, DType::BF16, 0, 48);
        }),
        OpsError::Empty(_)
    );
    rejects!("L = 0", gemm(|g| g.d = g.d.batched(0, 64 * 48)), OpsError::Empty(_));
}

#[test]
fn gemm_huge_sizes() {
    // `usize::MAX / 2` rows: the extent overflows (it used to wrap to "batch stride -16").
    let huge = Geometry::dense(MIB, usize::MAX, DType::BF16, usize::MAX / 2, 64);
    let r1 = gemm(|g| {
        g.a = Geometry {
            cols: 32,
            row_stride: 32,
            ..huge
        };
        g.d = Geometry::dense(8 * MIB, usize::MAX, DType::F32, usize::MAX / 2, 48);
    });
    rejects!("usize::MAX / 2 rows", r1, OpsError::TooLarge { .. });
    // Beyond the kernels' 32-bit M / K index arithmetic, with buffers large enough.
    let m = MAX_DIM + 1;
    rejects!(
        "M > MAX_DIM",
        gemm(|g| {
            g.a = Geometry {
                len: usize::MAX,
                ..dense(1, DType::BF16, m, 32)
            };
            g.d = Geometry {
                len: usize::MAX,
                ..dense(1 << 40, DType::F32, m, 48)
            };
        }),
        OpsError::TooLarge { .. }
    );
    let k = 1usize << 31;
    rejects!(
        "K = 2^31",
        gemm(|g| {
            g.a = Geometry {
                len: usize::MAX,
                ..dense(1, DType::BF16, 64, k)
            };
            g.b = Geometry {
                len: usize::MAX,
                ..dense(1 << 30, DType::BF16, k, 48).to_col_major()
            };
        }),
        OpsError::TooLarge { .. }
    );
    // A batch beyond the grid's z extent (A and B broadcast).
    rejects!(
        "L > 65535",
        gemm(|g| g.d = g.d.batched(MAX_BATCH + 1, 64 * 48)),
        OpsError::TooLarge { .. }
    );
    assert!(gemm(|g| g.d = g.d.batched(MAX_BATCH, 64 * 48)).is_ok());
}

#[test]
fn gemm_bad_strides_and_overlap() {
    rejects!(
        "leading dimension < row",
        gemm(|g| g.a = g.a.strides(16, 1)),
        OpsError::Strides { operand: "A", .. }
    );
    rejects!(
        "negative stride",
        gemm(|g| g.a = g.a.strides(-32, 1)),
        OpsError::Strides { operand: "A", .. }
    );
    rejects!(
        "no contiguous dimension",
        gemm(|g| g.a = Geometry {
            len: 1 << 20,
            ..g.a.strides(64, 2)
        }),
        OpsError::Strides { operand: "A", .. }
    );
    rejects!(
        "D overlaps A",
        gemm(|g| g.d = Geometry {
            dtype: DType::BF16,
            ..dense(1, DType::BF16, 64, 48)
        }),
        OpsError::Strides { operand: "D", .. }
    );
    rejects!(
        "output batches overlap",
        gemm(|g| g.d = g.d.batched(2, 0)),
        OpsError::Strides { operand: "D", .. }
    );
    rejects!(
        "C partly overlaps D",
        gemm(|g| {
            g.c = Some(Geometry {
                len: 1 << 20,
                ..g.d.at(g.d.ptr + 64)
            });
            g.beta = 1.0;
        }),
        OpsError::Strides { operand: "D", .. }
    );
    rejects!(
        "C in another order than D",
        gemm(|g| {
            g.c = Some(dense(4, DType::F32, 64, 48).to_col_major());
            g.beta = 1.0;
        }),
        OpsError::Strides { operand: "C", .. }
    );
    // C may be D itself (in-place update).
    assert!(gemm(|g| {
        g.c = Some(g.d);
        g.beta = 1.0;
    })
    .is_ok());
}

#[test]
fn gemm_out_of_bounds() {
    rejects!(
        "view past its buffer",
        gemm(|g| g.a.len = 64 * 32 - 1),
        OpsError::OutOfBounds { .. }
    );
}

#[test]
fn gemm_misaligned() {
    rejects!(
        "A pointer off its element",
        gemm(|g| g.a = g.a.at(g.a.ptr + 1)),
        OpsError::Alignment { operand: "A", .. }
    );
    rejects!(
        "B pointer off its element",
        gemm(|g| g.b = g.b.at(g.b.ptr + 3)),
        OpsError::Alignment { operand: "B", .. }
    );
}

/// Leading dimensions, batch strides, K and pointers off the 16-byte grid are valid
/// (the narrow-vector kernel runs them), and `copy_bytes` picks the narrow path exactly
/// when the 16-byte one does not fit.
#[test]
fn gemm_any_alignment_selects_the_copy_width() {
    let width = |edit: &dyn Fn(&mut Gemm)| copy_bytes(&gemm(edit).unwrap());
    assert_eq!(width(&|_| {}), 16, "aligned baseline: the fast path");
    assert_eq!(width(&|g| g.a = g.a.at(g.a.ptr + 2)), 2, "A 2 bytes off");
    assert_eq!(width(&|g| g.a = g.a.at(g.a.ptr + 4)), 4, "A 4 bytes off");
    assert_eq!(width(&|g| g.b = g.b.at(g.b.ptr + 8)), 8, "B 8 bytes off");
    let b_ld = |ld: i64| {
        move |g: &mut Gemm| {
            g.b = Geometry {
                len: 1 << 20,
                ..g.b.strides(1, ld)
            }
        }
    };
    assert_eq!(width(&b_ld(36)), 8, "B leading dimension 72 bytes");
    assert_eq!(width(&b_ld(34)), 4, "B leading dimension 68 bytes");
    assert_eq!(width(&b_ld(33)), 2, "B leading dimension 66 bytes");
    assert_eq!(width(&b_ld(40)), 16, "B leading dimension 80 bytes");
    assert_eq!(
        width(&|g| {
            g.a = Geometry {
                len: 1 << 20,
                ..g.a.batched(2, 64 * 32 + 4)
            };
            g.b = g.b.batched(2, 32 * 48);
            g.d = g.d.batched(2, 64 * 48);
        }),
        8,
        "A batch stride 8 bytes off"
    );
    let k30 = |g: &mut Gemm| {
        g.a = Geometry {
            len: 1 << 20,
            ..dense(1, DType::BF16, 64, 30).strides(32, 1)
        };
        g.b = Geometry {
            len: 1 << 20,
            ..dense(2, DType::BF16, 30, 48).strides(1, 32)
        };
    };
    assert_eq!(width(&k30), 4, "contiguous K = 30 (60 bytes)");
    // 3x5x7 and a row-major B of 70 columns, as a new user writes them.
    let problem = |m: usize, n: usize, k: usize, b_row: bool| {
        // SAFETY: validation only.
        let (a, b, d) = unsafe {
            let b = MatrixRef::from_raw(dense(2, DType::BF16, k, n));
            (
                MatrixRef::from_raw(dense(1, DType::BF16, m, k)),
                if b_row { b } else { b.col_major() },
                MatrixMut::from_raw(dense(4, DType::BF16, m, n)),
            )
        };
        copy_bytes(&validate(&a, &b, None, &d, 1.0, 0.0).unwrap())
    };
    assert_eq!(problem(3, 7, 5, false), 2);
    assert_eq!(problem(129, 257, 65, false), 2);
    assert_eq!(problem(64, 70, 64, true), 4, "row-major B, N = 70");
    assert_eq!(problem(64, 72, 64, true), 16, "row-major B, N = 72");
    assert_eq!(problem(128, 256, 64, false), 16);
}

#[test]
fn gemm_wrong_dtypes() {
    let retype = |g: Geometry, t: DType| Geometry { dtype: t, ..g };
    rejects!(
        "f32 inputs",
        gemm(|g| (g.a, g.b) = (retype(g.a, DType::F32), retype(g.b, DType::F32))),
        OpsError::DType(_)
    );
    rejects!(
        "s8 inputs",
        gemm(|g| (g.a, g.b) = (retype(g.a, DType::S8), retype(g.b, DType::S8))),
        OpsError::DType(_)
    );
    rejects!(
        "f16 x bf16",
        gemm(|g| g.a = retype(g.a, DType::F16)),
        OpsError::DType(_)
    );
    rejects!(
        "s32 output",
        gemm(|g| g.d = retype(g.d, DType::S32)),
        OpsError::DType(_)
    );
    rejects!(
        "C type != D type",
        gemm(|g| {
            g.c = Some(retype(dense(4, DType::F32, 64, 48), DType::BF16));
            g.beta = 1.0;
        }),
        OpsError::DType(_)
    );
}

#[test]
fn gemm_non_finite_scalars() {
    for (alpha, beta, what) in [
        (f32::NAN, 0.0, "alpha"),
        (f32::INFINITY, 0.0, "alpha"),
        (1.0, f32::NAN, "beta"),
        (1.0, f32::NEG_INFINITY, "beta"),
    ] {
        let r1 = gemm(|g| {
            (g.alpha, g.beta) = (alpha, beta);
            g.c = Some(dense(4, DType::F32, 64, 48));
        });
        match r1 {
            Err(OpsError::NonFinite { what: w, .. }) => assert_eq!(w, what),
            other => panic!("alpha {alpha}, beta {beta}: {other:?}"),
        }
    }
}

#[test]
fn gemm_unsupported_architecture() {
    for cc in [(7, 5), (7, 0), (6, 1)] {
        rejects!(format!("{cc:?}"), check_gemm_arch(cc), OpsError::Arch(_));
    }
    for cc in [(8, 0), (8, 6), (8, 9), (9, 0)] {
        assert!(check_gemm_arch(cc).is_ok(), "{cc:?}");
    }
}

#[test]
fn gemm_broadcast_never_selects_sm90() {
    // A TN bf16 problem that suits the SM90 kernel, batched 4 times.
    let tn = |a_bs: i64, b_bs: i64, c: Option<i64>| {
        let mut g = Gemm::new();
        g.a = dense(1, DType::BF16, 64, 32).batched(4, a_bs);
        g.b = dense(2, DType::BF16, 32, 48).to_col_major().batched(4, b_bs);
        g.d = dense(3, DType::BF16, 64, 48).batched(4, 64 * 48);
        if let Some(cs) = c {
            g.c = Some(dense(4, DType::BF16, 64, 48).batched(4, cs));
            g.beta = 1.0;
        }
        g.run().unwrap()
    };
    let full = tn(64 * 32, 32 * 48, Some(64 * 48));
    assert!(sm90_qualifies((9, 0), &full));
    assert!(!sm90_qualifies((8, 0), &full));
    for (what, p) in [
        ("A broadcast", tn(0, 32 * 48, None)),
        ("B broadcast", tn(64 * 32, 0, None)),
        ("C broadcast", tn(64 * 32, 32 * 48, Some(0))),
    ] {
        assert!(!sm90_qualifies((9, 0), &p), "{what} must take the SM80-class path");
    }
    // A batch-1 view is a broadcast: validation sets its batch stride to 0.
    let mut g = Gemm::new();
    g.d = g.d.batched(3, 64 * 48);
    let p = g.run().unwrap();
    assert_eq!((p.a().batch, p.a().batch_stride, p.l()), (3, 0, 3));
}

/// A valid INT8 scaled-mm: A 64x32 s8 (row-major), B 32x48 s8 (column-major), bf16 out,
/// per-row / per-column scales and a bias.
struct Smm {
    a: Geometry,
    b: Geometry,
    out: Geometry,
    a_scale: VectorRef<'static>,
    b_scale: VectorRef<'static>,
    bias: Option<VectorRef<'static>>,
}

impl Smm {
    fn new() -> Smm {
        Smm {
            a: dense(1, DType::S8, 64, 32),
            b: dense(2, DType::S8, 32, 48).to_col_major(),
            out: dense(3, DType::BF16, 64, 48),
            a_scale: v(4, DType::F32, 64),
            b_scale: v(5, DType::F32, 48),
            bias: Some(v(6, DType::BF16, 48)),
        }
    }
}

fn smm(edit: impl FnOnce(&mut Smm)) -> Result<rcute_ops::ScaledMmProblem<'static>, OpsError> {
    let mut s = Smm::new();
    edit(&mut s);
    validate_scaled_mm(
        &r(s.a),
        &r(s.b),
        Scale::auto(s.a_scale),
        Scale::auto(s.b_scale),
        s.bias.as_ref(),
        &w(s.out),
    )
}

#[test]
fn scaled_mm_baseline_is_valid() {
    let p = smm(|_| {}).unwrap();
    assert_eq!((p.m(), p.n(), p.k(), p.l()), (64, 48, 32, 1));
    for cc in [(7, 5), (8, 0), (8, 9), (9, 0)] {
        let f16 = smm(|s| {
            s.out.dtype = DType::F16;
            s.bias = Some(v(6, DType::F16, 48));
        })
        .unwrap();
        assert!(check_scaled_mm_arch(cc, &f16).is_ok(), "{cc:?}");
    }
}

#[test]
fn scaled_mm_shapes_and_sizes() {
    rejects!(
        "B rows != K",
        smm(|s| s.b = dense(2, DType::S8, 16, 48).to_col_major()),
        OpsError::Shape(_)
    );
    rejects!(
        "out cols != N",
        smm(|s| s.out = dense(3, DType::BF16, 64, 40)),
        OpsError::Shape(_)
    );
    rejects!(
        "M = 0",
        smm(|s| {
            s.a = dense(1, DType::S8, 0, 32);
            s.out = dense(3, DType::BF16, 0, 48);
        }),
        OpsError::Empty(_)
    );
    rejects!(
        "usize::MAX / 2 rows",
        smm(|s| {
            s.a = Geometry::dense(MIB, usize::MAX, DType::S8, usize::MAX / 2, 32);
            s.out = Geometry::dense(1 << 50, usize::MAX, DType::BF16, usize::MAX / 2, 48);
        }),
        OpsError::TooLarge { .. }
    );
    rejects!(
        "K = 2^31",
        smm(|s| {
            let k = 1usize << 31;
            s.a = Geometry {
                len: usize::MAX,
                ..dense(1, DType::S8, 64, k)
            };
            s.b = Geometry {
                len: usize::MAX,
                ..dense(1 << 30, DType::S8, k, 48).to_col_major()
            };
        }),
        OpsError::TooLarge { .. }
    );
    rejects!(
        "L > 65535",
        smm(|s| s.out = s.out.batched(MAX_BATCH + 1, 64 * 48)),
        OpsError::TooLarge { .. }
    );
    rejects!(
        "a_scale of 63",
        smm(|s| s.a_scale = v(4, DType::F32, 63)),
        OpsError::VectorLength { .. }
    );
    rejects!(
        "bias of 47",
        smm(|s| s.bias = Some(v(6, DType::BF16, 47))),
        OpsError::VectorLength { .. }
    );
    rejects!(
        "out past its buffer",
        smm(|s| s.out.len -= 1),
        OpsError::OutOfBounds { .. }
    );
}

#[test]
fn scaled_mm_layouts_and_overlap() {
    rejects!(
        "A column-major",
        smm(|s| s.a = s.a.to_col_major()),
        OpsError::Strides { operand: "A", .. }
    );
    rejects!(
        "B row-major",
        smm(|s| s.b = dense(2, DType::S8, 32, 48)),
        OpsError::Strides { operand: "B", .. }
    );
    rejects!(
        "A leading dimension < row",
        smm(|s| s.a = s.a.strides(16, 1)),
        OpsError::Strides { operand: "A", .. }
    );
    rejects!(
        "out overlaps A",
        smm(|s| s.out = Geometry { ptr: s.a.ptr, ..s.out }),
        OpsError::Strides { operand: "out", .. }
    );
    rejects!(
        "out overlaps a_scale",
        smm(|s| s.a_scale = v(3, DType::F32, 64)),
        OpsError::Strides { operand: "out", .. }
    );
    rejects!(
        "FP8 with a broadcast B",
        smm(|s| {
            s.a = Geometry {
                dtype: DType::E4M3,
                ..s.a
            }
            .batched(2, 64 * 32);
            s.b = Geometry {
                dtype: DType::E4M3,
                ..s.b
            };
            s.out = s.out.batched(2, 64 * 48);
        }),
        OpsError::Strides { operand: "B", .. }
    );
    rejects!(
        "FP8 with an explicit batch stride 0",
        smm(|s| {
            s.a = Geometry {
                dtype: DType::E4M3,
                ..s.a
            }
            .batched(2, 64 * 32);
            s.b = Geometry {
                dtype: DType::E4M3,
                ..s.b
            }
            .batched(2, 0);
            s.out = s.out.batched(2, 64 * 48);
        }),
        OpsError::Strides { operand: "B", .. }
    );
    // INT8 with a broadcast B is fine (the SM80-class kernel takes it).
    assert!(smm(|s| {
        s.a = s.a.batched(2, 64 * 32);
        s.out = s.out.batched(2, 64 * 48);
    })
    .is_ok());
}

#[test]
fn scaled_mm_misaligned() {
    rejects!(
        "FP8 K % 16",
        smm(|s| {
            s.a = Geometry {
                len: 1 << 20,
                ..dense(1, DType::E4M3, 64, 24).strides(32, 1)
            };
            s.b = Geometry {
                len: 1 << 20,
                ..dense(2, DType::E4M3, 24, 48).strides(1, 32)
            };
        }),
        OpsError::Alignment { .. }
    );
    rejects!(
        "N % 8",
        smm(|s| {
            s.b = Geometry {
                len: 1 << 20,
                ..dense(2, DType::S8, 32, 44).to_col_major()
            };
            s.out = Geometry {
                len: 1 << 20,
                ..dense(3, DType::BF16, 64, 44).strides(48, 1)
            };
            s.b_scale = v(5, DType::F32, 44);
            s.bias = None;
        }),
        OpsError::Alignment { operand: "out", .. }
    );
    rejects!(
        "A pointer odd",
        smm(|s| s.a = s.a.at(s.a.ptr + 1)),
        OpsError::Alignment { operand: "A", .. }
    );
    rejects!(
        "B leading dimension odd",
        smm(|s| s.b = Geometry {
            len: 1 << 20,
            ..s.b.strides(1, 33)
        }),
        OpsError::Alignment { operand: "B", .. }
    );
    rejects!(
        "K odd",
        smm(|s| {
            s.a = Geometry {
                len: 1 << 20,
                ..dense(1, DType::S8, 64, 31).strides(32, 1)
            };
            s.b = Geometry {
                len: 1 << 20,
                ..dense(2, DType::S8, 31, 48).strides(1, 32)
            };
        }),
        OpsError::Alignment { operand: "A", .. }
    );
    // Even values off the 16-byte grid are valid INT8 problems (the narrow-vector kernel).
    let width = |edit: &dyn Fn(&mut Smm)| rcute_ops::scaled_mm::scaled_mm_copy_bytes(&smm(edit).unwrap());
    assert_eq!(width(&|_| {}), 16);
    assert_eq!(width(&|s| s.a = s.a.at(s.a.ptr + 8)), 8);
    assert_eq!(width(&|s| s.b = s.b.at(s.b.ptr + 2)), 2);
    assert_eq!(
        width(&|s| s.b = Geometry {
            len: 1 << 20,
            ..s.b.strides(1, 36)
        }),
        4
    );
    // FP8 keeps the 16-byte rules (TMA).
    rejects!(
        "FP8 A pointer 8 bytes off",
        smm(|s| {
            s.a = s.a.at(s.a.ptr + 8);
            s.a.dtype = DType::E4M3;
            s.b.dtype = DType::E4M3;
        }),
        OpsError::Alignment { operand: "A", .. }
    );
    rejects!(
        "out pointer not 16-byte aligned",
        smm(|s| s.out = s.out.at(s.out.ptr + 2)),
        OpsError::Alignment { operand: "out", .. }
    );
    rejects!(
        "out leading dimension not a multiple of 8",
        smm(|s| s.out = Geometry {
            len: 1 << 20,
            ..s.out.strides(52, 1)
        }),
        OpsError::Alignment { operand: "out", .. }
    );
    rejects!(
        "out batch stride not a multiple of 8",
        smm(|s| {
            s.a = s.a.batched(2, 64 * 32);
            s.out = Geometry {
                len: 1 << 20,
                ..s.out.batched(2, 64 * 48 + 4)
            };
        }),
        OpsError::Alignment { operand: "out", .. }
    );
    rejects!(
        "null scale",
        // SAFETY: validation only, as in `r`.
        smm(|s| s.b_scale = unsafe { VectorRef::from_raw(0, 48, DType::F32, 48, None) }),
        OpsError::Alignment { operand: "b_scale", .. }
    );
}

#[test]
fn scaled_mm_wrong_dtypes() {
    rejects!("f16 A", smm(|s| s.a.dtype = DType::F16), OpsError::DType(_));
    rejects!("s8 x e4m3", smm(|s| s.b.dtype = DType::E4M3), OpsError::DType(_));
    rejects!("f32 out", smm(|s| s.out.dtype = DType::F32), OpsError::DType(_));
    rejects!(
        "f16 scale",
        smm(|s| s.a_scale = v(4, DType::F16, 64)),
        OpsError::DType(_)
    );
    rejects!(
        "f16 bias for bf16 out",
        smm(|s| s.bias = Some(v(6, DType::F16, 48))),
        OpsError::DType(_)
    );
}

#[test]
fn scaled_mm_unsupported_architecture() {
    let int8 = smm(|_| {}).unwrap();
    rejects!("sm_70", check_scaled_mm_arch((7, 0), &int8), OpsError::Arch(_));
    rejects!(
        "bf16 out on sm_75",
        check_scaled_mm_arch((7, 5), &int8),
        OpsError::DType(_)
    );
    let fp8 = smm(|s| {
        s.a.dtype = DType::E4M3;
        s.b.dtype = DType::E4M3;
    })
    .unwrap();
    for cc in [(8, 0), (8, 9), (7, 5)] {
        rejects!(
            format!("FP8 on {cc:?}"),
            check_scaled_mm_arch(cc, &fp8),
            OpsError::Arch(_)
        );
    }
    assert!(check_scaled_mm_arch((9, 0), &fp8).is_ok());
}

#[test]
fn sm90_requirements_are_typed() {
    use rcute_ops::gemm::sm90_requirements;
    // A TN bf16 problem: every rule holds on sm_90.
    let tn = |edit: &dyn Fn(&mut Gemm)| {
        let mut g = Gemm::new();
        g.d = dense(3, DType::BF16, 64, 48);
        edit(&mut g);
        g.run().unwrap()
    };
    assert!(sm90_requirements((9, 0), &tn(&|_| {})).is_ok());
    rejects!("sm_80", sm90_requirements((8, 0), &tn(&|_| {})), OpsError::Arch(_));
    rejects!(
        "MN-major A",
        sm90_requirements((9, 0), &tn(&|g| g.a = dense(1, DType::BF16, 64, 32).to_col_major())),
        OpsError::Strides { operand: "A", .. }
    );
    rejects!(
        "f32 D",
        sm90_requirements((9, 0), &tn(&|g| g.d = dense(3, DType::F32, 64, 48))),
        OpsError::DType(_)
    );
    rejects!(
        "broadcast A",
        sm90_requirements(
            (9, 0),
            &tn(&|g| {
                g.b = g.b.batched(2, 32 * 48);
                g.d = g.d.batched(2, 64 * 48);
            })
        ),
        OpsError::Alignment { operand: "A", .. }
    );
}
