//! The MMA consumer: the accumulators and register fragments, and the main loop over the
//! K tiles (with a register double buffer of `ldmatrix` fragments where the registers allow).

use super::ldsm::s2r;
use super::mainloop_emit::MainloopEmit;
use super::producer::{g2s_tile, r2s_both, G2sMode};
use super::smem::Separable;
use super::stmt::{c, e, if_};
use crate::emit::Stmt;
use rcute_atom::Element;
use rcute_collective::Sm80Mainloop;

/// How the main loop overlaps `ldmatrix` with `mma`.
#[derive(Clone, Copy, Debug)]
pub(super) struct RegPipeline {
    /// Explicit register double buffer (CuTe's schedule); without it ptxas schedules the
    /// `ldmatrix` of the unrolled k-blocks.
    pub on: bool,
    /// Fragment buffers: 2 when the k-blocks are even, else one per k-block (1 when off).
    pub nbuf: i64,
}

impl RegPipeline {
    /// The register double buffer of CuTe's mainloop costs 2x the fragments; with 128
    /// accumulators per thread (64x64 warp tiles) it does not fit 255 registers on sm_90a.
    pub(super) fn of(p: &Sm80Mainloop) -> RegPipeline {
        let kb = p.k_blocks;
        let on = p.acc_per_thread() < 128;
        let nbuf = if !on {
            1
        } else if kb % 2 == 0 {
            2
        } else {
            kb
        };
        RegPipeline { on, nbuf }
    }
}

/// The zeroed accumulators `acc[mma_m][mma_n][4]` and the fragment arrays `fa`, `fb`.
pub(super) fn fragments(p: &Sm80Mainloop, rp: RegPipeline) -> Vec<Stmt> {
    let [wm, wn] = p.config.warps;
    let (mm, nn, kb) = (p.mma_m, p.mma_n, p.k_blocks);
    let nbuf = rp.nbuf;
    let mut b: Vec<Stmt> = Vec::new();
    b.push(c(format!(
        "TiledMMA {} x (WM,WN,1)=({wm},{wn},1), permutation N (8,{wn},2):(1,16,8): warp tile {}x{}, {mm}x{nn} atoms",
        p.mma_atom.name, p.warp_tile[0], p.warp_tile[1]
    )));
    b.push(c(format!(
        "C fragment per atom: layout {} (m = lane/4 + 8*(v/2), n = 2*(lane%4) + v%2)",
        p.mma_atom.c_tv
    )));
    let (acc_ty, zero) = match p.config.acc {
        Element::S32 => ("int32_t", "0"),
        _ => ("float", "0.0f"),
    };
    b.push(Stmt::Array {
        ty: acc_ty.into(),
        name: format!("acc[{mm}][{nn}]"),
        len: 4,
        comment: None,
    });
    b.push(Stmt::unrolled(
        "mi",
        mm,
        vec![Stmt::unrolled(
            "nj",
            nn,
            vec![Stmt::unrolled("v", 4, vec![Stmt::assign("acc[mi][nj][v]", zero)])],
        )],
    ));
    b.push(Stmt::Array {
        ty: "uint32_t".into(),
        name: format!("fa[{nbuf}][{mm}]"),
        len: 4,
        comment: Some(format!(
            "A fragments: {nbuf} register buffers over the {kb} k-blocks (2 when even, else one per k-block)"
        )),
    });
    b.push(Stmt::Array {
        ty: "uint32_t".into(),
        name: format!("fb[{nbuf}][{nn}]"),
        len: 2,
        comment: Some("B fragments".into()),
    });
    b
}

/// The main loop with the register double buffer: k-block `kb + 1` is loaded while
/// k-block `kb` is multiplied; the next tile's loads are issued at `kb == 0`.
pub(super) fn pipelined_loop(
    p: &Sm80Mainloop,
    sep: Separable,
    opts: &MainloopEmit,
    rp: RegPipeline,
    uses_write_stage: bool,
) -> Vec<Stmt> {
    let name = opts.name;
    let mode = opts.g2s;
    let stages = p.stages;
    let (mm, nn, kb, kbk) = (p.mma_m, p.mma_n, p.k_blocks, p.k_block);
    let nbuf = rp.nbuf;
    let mut b: Vec<Stmt> = Vec::new();
    let mut kbody = Vec::new();
    let next_tile = match mode {
        G2sMode::CpAsync => vec![
            c("the next tile: wait until it has landed and every warp is done with the stage about to be overwritten"),
            Stmt::assign("frag_stage", "read_stage"),
            e(format!("rc_cp_async_wait_group<{}>()", stages - 2)),
            e("__syncthreads()"),
        ],
        G2sMode::Registers => {
            let mut v = vec![c(
                "the next tile: store its registers into read_stage (with 2 stages the stage loaded at kb == 0 is the one read next; every warp finished reading it before the previous __syncthreads)",
            )];
            v.extend(r2s_both(p, sep, name, "read_stage"));
            v.push(Stmt::assign("frag_stage", "read_stage"));
            v.push(e("__syncthreads()"));
            v
        }
    };
    kbody.push(if_(format!("kb == {}", kb - 1), next_tile));
    let mut issue = vec![match mode {
        G2sMode::CpAsync => c("issue the cp.async loads of tile k_tile_next into the free stage (before the ldmatrix below: fewer live registers)"),
        G2sMode::Registers => c("load tile k_tile_next into registers (stored to shared memory after this tile's last k-block)"),
    }];
    issue.extend(g2s_tile(
        p,
        sep,
        name,
        true,
        "write_stage",
        "k_tile_next",
        mode,
        &opts.rows,
    ));
    issue.extend(g2s_tile(
        p,
        sep,
        name,
        false,
        "write_stage",
        "k_tile_next",
        mode,
        &opts.rows,
    ));
    if mode == G2sMode::CpAsync {
        issue.push(e("rc_cp_async_commit_group()"));
    }
    issue.push(e("++k_tile_next"));
    issue.push(e("--k_tile_count"));
    if uses_write_stage {
        issue.push(Stmt::assign("write_stage", "read_stage"));
    }
    issue.push(Stmt::assign(
        "read_stage",
        format!("read_stage + 1 == {stages} ? 0 : read_stage + 1"),
    ));
    kbody.push(if_("kb == 0", issue));
    kbody.push(c(
        "ldmatrix k-block kb+1 (of this tile, or k-block 0 of the next) into the next register buffer",
    ));
    kbody.extend(s2r(
        p,
        sep,
        &format!("(kb + 1) % {nbuf}"),
        &format!("((kb + 1) % {kb})"),
        "frag_stage",
        name,
    ));
    kbody.push(Stmt::unrolled(
        "mi",
        mm,
        vec![Stmt::unrolled(
            "nj",
            nn,
            vec![e(format!(
                "{}(acc[mi][nj], fa[kb % {nbuf}][mi], fb[kb % {nbuf}][nj], acc[mi][nj])",
                opts.mma_fn
            ))],
        )],
    ));
    let cond = format!("k_tile_count > {}", -(stages as i64 - 1));
    b.push(c(format!(
        "Main loop: one K tile per iteration, {kb} k-blocks of {kbk} per tile, register double buffer"
    )));
    b.push(Stmt::While {
        cond,
        body: vec![Stmt::unrolled("kb", kb, kbody)],
    });
    b
}

/// The main loop for large warp tiles (128 accumulators per thread): no explicit register
/// pipeline; ptxas schedules the `ldmatrix` of the unrolled k-blocks within its budget.
pub(super) fn simple_loop(p: &Sm80Mainloop, sep: Separable, opts: &MainloopEmit) -> Vec<Stmt> {
    let name = opts.name;
    let mode = opts.g2s;
    let stages = p.stages;
    let (mm, nn, kb, kbk) = (p.mma_m, p.mma_n, p.k_blocks, p.k_block);
    let cond = format!("k_tile_count > {}", -(stages as i64 - 1));
    let mut b: Vec<Stmt> = Vec::new();
    let mut wbody = match mode {
        G2sMode::CpAsync => vec![
            c("tile in read_stage has landed and every warp is done with write_stage"),
            e(format!("rc_cp_async_wait_group<{}>()", stages - 2)),
            e("__syncthreads()"),
            c("issue the cp.async loads of tile k_tile_next into the free stage"),
        ],
        G2sMode::Registers => vec![
            c("tile in read_stage is in shared memory and every warp is done with write_stage"),
            e("__syncthreads()"),
            c("load tile k_tile_next into registers (stored to write_stage after this tile's k-blocks)"),
        ],
    };
    wbody.extend(g2s_tile(
        p,
        sep,
        name,
        true,
        "write_stage",
        "k_tile_next",
        mode,
        &opts.rows,
    ));
    wbody.extend(g2s_tile(
        p,
        sep,
        name,
        false,
        "write_stage",
        "k_tile_next",
        mode,
        &opts.rows,
    ));
    if mode == G2sMode::CpAsync {
        wbody.push(e("rc_cp_async_commit_group()"));
    }
    wbody.push(e("++k_tile_next"));
    wbody.push(e("--k_tile_count"));
    let mut kb_body = s2r(p, sep, "0", "kb", "read_stage", name);
    kb_body.push(Stmt::unrolled(
        "mi",
        mm,
        vec![Stmt::unrolled(
            "nj",
            nn,
            vec![e(format!(
                "{}(acc[mi][nj], fa[0][mi], fb[0][nj], acc[mi][nj])",
                opts.mma_fn
            ))],
        )],
    ));
    wbody.push(Stmt::unrolled("kb", kb, kb_body));
    if mode == G2sMode::Registers {
        wbody.push(c("the next tile into the free stage"));
        wbody.extend(r2s_both(p, sep, name, "write_stage"));
    }
    wbody.push(Stmt::assign("write_stage", "read_stage"));
    wbody.push(Stmt::assign(
        "read_stage",
        format!("read_stage + 1 == {stages} ? 0 : read_stage + 1"),
    ));
    b.push(c(format!(
        "Main loop: one K tile per iteration, {kb} k-blocks of {kbk} per tile (ldmatrix + mma per k-block)"
    )));
    b.push(Stmt::While { cond, body: wbody });
    b
}
