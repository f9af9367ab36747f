//! The kernel `Ops::gemm` runs for problems off the 16-byte grid, chosen without a GPU:
//! the selection keeps the fast path (16-byte copies, the selected tile) exactly when
//! everything is 16-byte aligned and takes the narrow-vector kernel otherwise, and the
//! narrow kernels it picks compile for sm_80 and sm_90a without spills, stack frames or local memory.

use rcute_kernel::gemm_sm80::{generate, Major};
use rcute_kernel::testing::{compile_clean, toolkit_for_test};
use rcute_kernel::Arch;
use rcute_ops::gemm::copy_bytes;
use rcute_ops::select::{select, sm80_config, NARROW_TILE};
use rcute_ops::{validate, DType, Geometry, MatrixMut, MatrixRef};

/// `(m, n, k, lda, ldb, b_row, a_offset_bytes)` with A row-major, B column-major unless
/// `b_row`, D dense row-major.
type Shape = (usize, usize, usize, usize, usize, bool, u64);

fn config(s: Shape) -> (usize, rcute_kernel::gemm_sm80::GemmSm80Config) {
    let (m, n, k, lda, ldb, b_row, off) = s;
    let g = |ptr, len, r, c, rs, cs| Geometry {
        row_stride: rs,
        col_stride: cs,
        ..Geometry::dense(ptr, len, DType::BF16, r, c)
    };
    // SAFETY: validation only; nothing is launched.
    let (a, b, d) = unsafe {
        (
            MatrixRef::from_raw(g(0x10_0000 + off, 1 << 24, m, k, lda as i64, 1)),
            MatrixRef::from_raw(if b_row {
                g(0x200_0000, 1 << 24, k, n, ldb as i64, 1)
            } else {
                g(0x200_0000, 1 << 24, k, n, 1, ldb as i64)
            }),
            MatrixMut::from_raw(Geometry::dense(0x400_0000, m * n, DType::BF16, m, n)),
        )
    };
    let p = validate(&a, &b, None, &d, 1.0, 0.0).unwrap();
    let b_major = if b_row { Major::MN } else { Major::K };
    let sel = select(m, n, k, 1, Major::K, b_major, 132);
    let cfg = sm80_config(&p, &sel, false).unwrap();
    if copy_bytes(&p) == 16 {
        assert_eq!(
            (cfg.copy_bytes, cfg.tile, cfg.warps),
            (16, sel.config.tile, sel.config.warps),
            "{s:?}"
        );
    } else {
        assert_eq!((cfg.copy_bytes, cfg.tile), (copy_bytes(&p), NARROW_TILE), "{s:?}");
    }
    (copy_bytes(&p), cfg)
}

#[test]
fn aligned_problems_keep_the_fast_path() {
    for s in [
        (128, 256, 64, 64, 64, false, 0),
        (4096, 4096, 4096, 4096, 4096, false, 0),
        (64, 72, 64, 64, 72, true, 0),
        (100, 200, 64, 72, 64, false, 16),
    ] {
        let (w, cfg) = config(s);
        assert_eq!(w, 16, "{s:?}");
        assert!(!generate(&cfg).unwrap().name.contains("_g2s"), "{s:?}");
    }
}

#[test]
fn unaligned_problems_run_narrow_kernels_that_compile_without_spills() {
    let cases: [(Shape, usize); 6] = [
        ((3, 7, 5, 5, 5, false, 0), 2),
        ((129, 257, 65, 65, 65, false, 0), 2),
        ((96, 70, 64, 64, 70, true, 0), 4),
        ((64, 64, 64, 68, 64, false, 0), 8),
        ((64, 64, 64, 64, 64, false, 4), 4),
        ((64, 64, 60, 60, 60, false, 0), 8),
    ];
    for (s, want) in cases {
        let (w, cfg) = config(s);
        assert_eq!(w, want, "{s:?}");
        let g = generate(&cfg).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert!(g.name.ends_with(&format!("_g2s{want}")), "{}", g.name);
        let Some(tk) = toolkit_for_test() else {
            continue;
        };
        for arch in [Arch::Sm80, Arch::Sm90a] {
            compile_clean(tk, &g.name, &g.source, arch);
        }
    }
}
