//! The CTA's work item: the shared-memory carve-up, threadblock rasterization (CUTLASS's
//! identity swizzle), the serial split-K ticket, and this CTA's tile, batch and K range.

use super::mainloop_emit::MainloopEmit;
use super::stmt::{c, d, dc, e, if_};
use crate::emit::Stmt;
use rcute_collective::Sm80Mainloop;

/// Declares `rc_smem`, `sA`, `sB`, `tid`, `lane`, `warp_m`, `warp_n`, `tiles_m`, `tiles_n`,
/// `serial_k`, `tile_m`, `tile_n`, `split`, `batch`, `m0`, `n0`, `k_begin`, `k_end`,
/// `k_tile_count`, `gA` and `gB` (a CTA past the edge of the tile grid returns).
pub(super) fn cta_setup(p: &Sm80Mainloop, opts: &MainloopEmit) -> Vec<Stmt> {
    let ta = p.config.a.cuda_type();
    let [bm, bn, bk] = p.config.tile;
    let [wm, _] = p.config.warps;
    let stages = p.stages;
    let r = opts.raster_swizzle;
    let mut b: Vec<Stmt> = Vec::new();

    b.push(c(format!(
        "Shared memory: sA {} | sB {}",
        p.smem_layout_a, p.smem_layout_b
    )));
    b.push(e("extern __shared__ __align__(128) unsigned char rc_smem[]"));
    b.push(dc(
        &format!("{ta}* const"),
        "sA",
        format!("reinterpret_cast<{ta}*>(rc_smem)"),
        format!("(BM,BK,PIPE) = ({bm},{bk},{stages})"),
    ));
    b.push(dc(
        &format!("{ta}* const"),
        "sB",
        format!("sA + {}", p.stage_elems_a * stages as i64),
        format!("(BN,BK,PIPE) = ({bn},{bk},{stages})"),
    ));
    b.push(d("const int", "tid", "threadIdx.x"));
    b.push(dc(
        "const int",
        "lane",
        "tid % 32",
        "thr_layout_vmnk = 32 x (WM,WN,1): thread = lane + 32 * (warp_m + WM * warp_n)",
    ));
    b.push(d("const int", "warp_m", format!("(tid / 32) % {wm}")));
    b.push(d("const int", "warp_n", format!("(tid / 32) / {wm}")));

    b.push(c(format!(
        "Threadblock rasterization: CUTLASS identity swizzle, 2^{r} tiles along N per group"
    )));
    b.push(d("const int", "tiles_m", format!("(M + {}) / {bm}", bm - 1)));
    b.push(d("const int", "tiles_n", format!("(N + {}) / {bn}", bn - 1)));
    b.push(dc(
        "const bool",
        "serial_k",
        "split_serial != 0 && split_k > 1",
        "serial (semaphore-ordered) split-K",
    ));
    b.push(d("int", "bx", "(int)blockIdx.x"));
    b.push(d("int", "by", "(int)blockIdx.y"));
    b.push(d("int", "bz", "(int)blockIdx.z"));
    b.push(c(
        "Serial split-K is deadlock-free by construction: every CTA takes a ticket when it starts and runs work item",
    ));
    b.push(c(
        "`ticket` in (x, y, z) order with z = split * L + batch, so the split s-1 a CTA waits for holds a smaller",
    ));
    b.push(c(
        "ticket: it was taken by a CTA that is already resident (or done), whatever order the hardware starts CTAs in.",
    ));
    b.push(c(
        "The last ticket resets the counter (semaphores[0]) for the next launch.",
    ));
    b.push(dc(
        "int* const",
        "rc_ticket",
        format!("reinterpret_cast<int*>(rc_smem + {})", opts.ticket_offset),
        "16 bytes after the mainloop / epilogue union (no static smem: it would count against the 48 KB default)",
    ));
    b.push(if_(
        "serial_k",
        vec![
            if_(
                "tid == 0",
                vec![
                    d("const int", "total", "(int)(gridDim.x * gridDim.y * gridDim.z)"),
                    d("const int", "t", "atomicAdd(semaphores, 1)"),
                    if_("t == total - 1", vec![e("atomicExch(semaphores, 0)")]),
                    Stmt::assign("*rc_ticket", "t"),
                ],
            ),
            e("__syncthreads()"),
            Stmt::assign("bx", "*rc_ticket % (int)gridDim.x"),
            Stmt::assign("by", "(*rc_ticket / (int)gridDim.x) % (int)gridDim.y"),
            Stmt::assign("bz", "*rc_ticket / (int)(gridDim.x * gridDim.y)"),
        ],
    ));
    let (tile_m, tile_n) = if r == 0 {
        ("bx".to_string(), "by".to_string())
    } else {
        (
            format!("bx >> {r}"),
            format!("(by << {r}) + (bx & {})", (1u32 << r) - 1),
        )
    };
    b.push(d("const int", "tile_m", tile_m));
    b.push(d("const int", "tile_n", tile_n));
    b.push(if_("tile_m >= tiles_m || tile_n >= tiles_n", vec![Stmt::Return]));
    b.push(dc(
        "const int",
        "split",
        "bz / L",
        "the split is the slowest-varying grid index: z = split * L + batch",
    ));
    b.push(d("const int", "batch", "bz % L"));
    b.push(d("const int", "m0", format!("tile_m * {bm}")));
    b.push(d("const int", "n0", format!("tile_n * {bn}")));
    b.push(dc(
        "const int",
        "k_begin",
        format!("split * k_tiles_per_split * {bk}"),
        "this split's K range",
    ));
    b.push(d(
        "const int",
        "k_end",
        format!("min(K, k_begin + k_tiles_per_split * {bk})"),
    ));
    b.push(d(
        "int",
        "k_tile_count",
        format!("k_end > k_begin ? (k_end - k_begin + {}) / {bk} : 0", bk - 1),
    ));
    b.push(d(&format!("const {ta}* const"), "gA", "A + batch * batch_stride_a"));
    b.push(d(&format!("const {ta}* const"), "gB", "B + batch * batch_stride_b"));
    b
}

/// The main kernel's grid in words, for its doc comment (`r`: the rasterization swizzle).
pub(crate) fn grid_doc(r: u32) -> String {
    if r == 0 {
        "grid (tiles_m, tiles_n, L * split_k)".into()
    } else {
        format!("grid (tiles_m << {r}, ceil(tiles_n / 2^{r}), L * split_k)")
    }
}
