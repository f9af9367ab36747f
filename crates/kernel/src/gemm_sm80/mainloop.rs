//! The SM80 mainloop, composed from its roles: the CTA's work item ([`super::cta`]), the
//! global -> shared producer ([`super::producer`]), the shared -> register `ldmatrix` loads
//! ([`super::ldsm`]) and the MMA consumer ([`super::mma`]).

use super::cta::cta_setup;
use super::ldsm::{lane_setup, s2r};
use super::mainloop_emit::MainloopEmit;
use super::mma::{fragments, pipelined_loop, simple_loop, RegPipeline};
use super::producer::{g2s_setup, prologue, G2sMode};
use super::smem::separable;
use super::stmt::{c, d, dc, e};
use crate::emit::Stmt;
use rcute_collective::Sm80Mainloop;

/// The kernel body shared by the SM80-class kernels up to the epilogue: shared-memory
/// carve-up, threadblock rasterization, the serial split-K ticket, this CTA's tile, batch
/// and K range, the G2S / S2R setup, the prologue, the mainloop over the K tiles
/// (accumulators `acc[mma_m][mma_n][4]` of the plan's accumulator type) and the final
/// wait + `__syncthreads()` after which the mainloop's shared memory may be reused.
/// The kernel must have the parameters `A`, `B`, `semaphores`, `M`, `N`, `K`, `L`,
/// `lda`, `ldb`, `batch_stride_a`, `batch_stride_b`, `split_k`, `k_tiles_per_split` and
/// `split_serial`; the statements declare (among others) `tid`, `lane`, `warp_m`,
/// `warp_n`, `tiles_m`, `tiles_n`, `tile_m`, `tile_n`, `serial_k`, `split`, `batch`,
/// `m0`, `n0` and `rc_smem` for the epilogue.
pub(crate) fn mainloop_stmts(p: &Sm80Mainloop, opts: &MainloopEmit) -> Vec<Stmt> {
    let name = opts.name;
    let mode = opts.g2s;
    let stages = p.stages;
    let kb = p.k_blocks;
    let sep = separable(p);
    let rp = RegPipeline::of(p);
    let reg_pipeline = rp.on;
    let mut b = match &opts.cta {
        Some(cta) => cta.clone(),
        None => cta_setup(p, opts),
    };
    b.extend(g2s_setup(p, sep, name, mode, &opts.rows));
    b.extend(prologue(p, sep, name, mode, &opts.rows));
    b.extend(fragments(p, rp));
    b.extend(lane_setup(p, sep, name));
    b.push(d("int", "read_stage", "0"));
    // The register-pipelined Turing loop stores the next tile into the stage it computes
    // from (two stages), so it needs no write index.
    let uses_write_stage = !(reg_pipeline && mode == G2sMode::Registers);
    if uses_write_stage {
        b.push(d("int", "write_stage", format!("{}", stages - 1)));
    }
    if reg_pipeline {
        b.push(dc("int", "frag_stage", "0", "the stage the register pipeline reads"));
    }
    if kb > 1 && reg_pipeline {
        b.push(c("Wait for the first tile; load its k-block 0 into registers"));
        if mode == G2sMode::CpAsync {
            b.push(e(format!("rc_cp_async_wait_group<{}>()", stages - 2)));
        }
        b.push(e("__syncthreads()"));
        b.extend(s2r(p, sep, "0", "0", "frag_stage", name));
    }

    if reg_pipeline {
        b.extend(pipelined_loop(p, sep, opts, rp, uses_write_stage));
    } else {
        b.extend(simple_loop(p, sep, opts));
    }
    if mode == G2sMode::CpAsync {
        b.push(e("rc_cp_async_wait_group<0>()"));
    }
    b.push(c(
        "every warp is done with the mainloop's shared memory: the epilogue staging buffer is a union with it",
    ));
    b.push(e("__syncthreads()"));
    b
}
