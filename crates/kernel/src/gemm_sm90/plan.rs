//! The resolved plan of one SM90 GEMM kernel (tile, stages, shared-memory map, epilogue),
//! its name and the element types it implies.

use super::*;

/// The resolved plan of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90Plan {
    /// Stages of the mainloop pipeline.
    pub stages: usize,
    /// Consumer warpgroups.
    pub consumers: i64,
    /// Rows of the tile one consumer warpgroup computes.
    pub wg_rows: i64,
    /// `wgmma` m64 atoms per consumer warpgroup along M.
    pub m_atoms: i64,
    /// The `wgmma` atom (m64 x BN x 16).
    pub mma: MmaAtom,
    /// The K-major shared-memory atom of A and B.
    pub smem_atom: GmmaSmemAtom,
    /// Bytes of one stage of A / B.
    pub stage_bytes: [usize; 2],
    /// Epilogue subtile.
    pub epi_tile: [i64; 2],
    /// Epilogue groups: the sets of warpgroups that stage and store on their own, each with
    /// its own buffers, C pipeline, named barrier and TMA-issuing thread (1 warp-specialized;
    /// 2 ping-pong, one per tile; 2 cooperative, one per half of every subtile).
    pub epi_groups: i64,
    /// The subtile one group stages and stores (the C / D TMA box):
    /// [`Sm90EpiloguePlan::warpgroup_subtile`], `(EPI_M / 2, EPI_N)` cooperative.
    pub group_tile: [i64; 2],
    /// D buffers (`StagesD`, or `StagesC` with reuse).
    pub d_bufs: usize,
    /// C buffers (`StagesC`, 0 without C).
    pub c_bufs: usize,
    /// D is written into C's buffers.
    pub reuse_smem_c: bool,
    /// The TMA store of subtile `i` is issued in iteration `i + 1`.
    pub delay_tma_store: bool,
    /// Swizzle of the epilogue's subtile buffers (bytes of a row: the span).
    pub epi_swizzle: GmmaSwizzle,
    /// Bytes of one epilogue group's C and D buffers (the collective's tensor storage; D's
    /// buffers first, then C's).
    pub epi_set_bytes: usize,
    /// Byte offsets in the 1 KiB-aligned dynamic smem: A, B, epilogue, barriers.
    pub offsets: [usize; 4],
    /// Floats of one epilogue group's broadcast staging area (0: the fusion has no
    /// broadcast vectors): the tile's slices of the row / column vectors, loaded once per
    /// tile instead of at every element ([`rcute_collective::Fusion::staging_layout`]).
    pub bc_floats: i64,
    /// Byte offset of the staging areas (one per epilogue group, `bc_group_bytes` apart;
    /// outside the mainloop's storage even where the epilogue's buffers alias it).
    pub bc_offset: usize,
    /// Bytes of one group's staging area (16-byte multiple).
    pub bc_group_bytes: usize,
    /// Dynamic smem to request.
    pub smem_bytes: usize,
    /// Byte offset of the stream-K walk (after the barriers; 0 without stream-K): one
    /// thread computes it, every role reads its items from there, so that its fields hold
    /// no registers through the mainloop.
    pub walk_offset: usize,
    /// The collective mainloop plan (stages, atoms, TMA boxes).
    pub mainloop: Sm90Mainloop,
    /// The collective epilogue plan (the builder's policy decisions).
    pub epilogue: Sm90EpiloguePlan,
    /// The consumers' `wgmma` descriptors: their constant words and the start-address
    /// offsets of stages, warpgroups, m64 atoms and k-blocks (bounded below the field's 14
    /// bits).
    pub descriptors: Sm90Descriptors,
}

/// The most `f32` / `s32` accumulators a consumer thread holds: one 64 x 320 warpgroup
/// tile (two 160-wide `wgmma` atoms along N, the 128 x 320 cooperative tile cuBLAS runs at
/// bf16 4096 x 14336 x 4096 on the H200), 160 of the 232 registers after `setmaxnreg`.
pub const MAX_ACCUMULATORS: i64 = 160;

/// Shared-memory bytes of the stream-K walk (`{name}_walk`: three 64-bit and nine 32-bit
/// fields, rounded up).
const STREAM_K_WALK_BYTES: usize = 64;

pub(super) fn cfg_err(s: impl Into<String>) -> GemmError {
    GemmError::Config(s.into())
}

/// The generator's own limits on a configuration: element types, cluster, `mma_pipe` and
/// one 128-byte swizzle row per k-tile row.
fn check_config(cfg: &GemmSm90Config) -> Result<(), GemmError> {
    let bk = cfg.tile[2];
    if !matches!(
        cfg.ab,
        Element::BF16 | Element::F16 | Element::S8 | Element::E4M3 | Element::E5M2
    ) {
        return Err(cfg_err(format!(
            "A/B must be bf16, f16, s8, e4m3 or e5m2, got {}",
            cfg.ab.ptx()
        )));
    }
    if !matches!(cfg.cd, Element::BF16 | Element::F16) {
        return Err(cfg_err(format!("C/D must be bf16 or f16, got {}", cfg.cd.ptx())));
    }
    let [cm, cn] = cfg.cluster;
    if !matches!(cm, 1 | 2 | 4) || !matches!(cn, 1 | 2 | 4) || cm * cn > 8 {
        return Err(cfg_err(format!(
            "cluster {cm}x{cn}: each extent must be 1, 2 or 4, at most 8 CTAs"
        )));
    }
    // Multicast slices: A's BM rows split across the cn CTAs of a cluster row, B's BN rows
    // across the cm CTAs of a cluster column; a slice must keep whole 8-row swizzle atoms.
    if cfg.tile[0] % (8 * cn) != 0 || cfg.tile[1] % (8 * cm) != 0 {
        return Err(cfg_err(format!(
            "tile {:?} with cluster {cm}x{cn}: BM / cluster_n and BN / cluster_m must be multiples of 8",
            cfg.tile
        )));
    }
    if cfg.mma_pipe > 1 {
        return Err(cfg_err(format!(
            "mma_pipe {}: the generator keeps 0 or 1 wgmma batches in flight",
            cfg.mma_pipe
        )));
    }
    if let Some(g) = cfg.grouped {
        grouped::check(cfg, g)?;
    }
    if cfg.gather_a {
        grouped_gather::check(cfg)?;
    }
    if cfg.dynamic_walk {
        dynamic::check(cfg)?;
    }
    if cfg.pad_skip {
        grouped::pad_skip_check(cfg)?;
    }
    let persistent = matches!(cfg.schedule, Sm90Schedule::Cooperative | Sm90Schedule::PingPong);
    if cfg.stream_k && (!persistent || cfg.cluster != [1, 1] || cfg.grouped.is_some()) {
        return Err(cfg_err(format!(
            "stream-K (sk) takes the cooperative or ping-pong schedule without a cluster or grouping, got {:?} on {}x{}{}",
            cfg.schedule,
            cfg.cluster[0],
            cfg.cluster[1],
            if cfg.grouped.is_some() { ", grouped" } else { "" }
        )));
    }
    if cfg.stream_k && !(2..=16).contains(&cfg.stream_k_parts) {
        return Err(cfg_err(format!(
            "stream-K cuts a tile into 2 to 16 ranges, got {}",
            cfg.stream_k_parts
        )));
    }
    let eb = cfg.ab.bytes() as i64;
    if bk * eb != 128 {
        return Err(cfg_err(format!(
            "BK * element bytes must be 128 (one 128B swizzle row), got BK={bk}"
        )));
    }
    Ok(())
}

/// The epilogue collective's plan for `cfg`, within this generator's limits: `stmatrix.x4`
/// stores, one swizzle span per subtile row, `EPI_M` a multiple of 64.
fn epilogue_plan(cfg: &GemmSm90Config) -> Result<Sm90EpiloguePlan, GemmError> {
    let mut ecfg = Sm90EpilogueConfig::new(
        cfg.tile,
        cfg.schedule,
        cfg.with_c().then_some(cfg.cd),
        cfg.cd,
        StorageOrder::RowMajor,
    );
    ecfg.epi_tile = cfg.epi_tile;
    let epi = Sm90EpiloguePlan::new(&ecfg).map_err(|e| cfg_err(e.to_string()))?;
    let [em, en] = epi.epi_tile;
    let db = cfg.cd.bytes() as i64;
    if epi.copy_atom_c != EpilogueCopyAtom::StsmX4 {
        return Err(cfg_err(format!(
            "epilogue tile {em}x{en}: this generator stores with stmatrix.x4 (EPI_N % 16 == 0)"
        )));
    }
    let epi_swizzle = epi.smem_atom_d.mode;
    if epi.smem_atom_d.major != Major::K || epi_swizzle.span_bytes() != en * db {
        return Err(cfg_err(format!(
            "epilogue tile {em}x{en}: the generator needs one swizzle atom per subtile row (EPI_N * bytes = 32, 64 or 128), the builder chose {}",
            epi.smem_atom_d
        )));
    }
    if em % 64 != 0 {
        return Err(cfg_err(format!(
            "epilogue tile {em}x{en}: EPI_M must be a multiple of 64"
        )));
    }
    Ok(epi)
}

/// Resolve the plan: the collective builders ([`Sm90EpiloguePlan`], [`Sm90Mainloop`])
/// choose the epilogue policy and the stage count; this generator adds its own limits (one
/// 128-byte TMA box per operand row, `stmatrix.x4`, row-major C / D, 16-bit types) and
/// lays out the shared memory.
pub fn plan(cfg: &GemmSm90Config) -> Result<Sm90Plan, GemmError> {
    let [bm, bn, bk] = cfg.tile;
    check_config(cfg)?;
    let epi = epilogue_plan(cfg)?;
    let epi_swizzle = epi.smem_atom_d.mode;
    let pp = cfg.schedule == Sm90Schedule::PingPong;
    let coop = cfg.schedule == Sm90Schedule::Cooperative;
    // Ping-pong: each consumer warpgroup gets its own epilogue buffers (the two epilogues
    // may overlap), so the mainloop sees one more epilogue's worth of carve-out.
    // Cooperative: each warpgroup stages its half of every subtile in its own half of the
    // collective's buffers (same bytes), with its own C barriers and staging area.
    let epi_sets = if pp || coop { 2 } else { 1 };
    let group_tile = epi.warpgroup_subtile();
    // One group's C and D buffers: the collective's storage (its half, cooperative).
    let epi_set_bytes = epi.tensor_bytes / (epi.epi_tile[0] / group_tile[0]) as usize;
    let d_bufs = if epi.reuse_smem_c { epi.stages_c } else { epi.stages_d };
    let c_bar_bytes = epi_sets * epi.barrier_bytes;
    let bc_floats = cfg.fusion.staging_layout(bm, bn).iter().map(|b| b.extent).sum::<i64>();
    let bc_group_bytes = (bc_floats as usize * 4).div_ceil(16) * 16;
    let walk_bytes = if cfg.stream_k {
        STREAM_K_WALK_BYTES
    } else if cfg.dynamic_walk {
        dynamic::WALK_BYTES
    } else {
        0
    };
    let extra =
        ALIGN_SLACK + c_bar_bytes + walk_bytes + epi_sets * bc_group_bytes + if pp { epi.smem_bytes } else { 0 };
    let mcfg = Sm90MainloopConfig {
        a: cfg.ab,
        b: cfg.ab,
        acc: acc_element(cfg.ab),
        a_major: Major::K,
        b_major: Major::K,
        tile: cfg.tile,
        cluster: cfg.cluster,
        schedule: cfg.schedule,
        stages: cfg.stages,
        smem_capacity: cfg.smem_capacity.saturating_sub(extra),
    };
    let ml = Sm90Mainloop::new(&mcfg, &epi).map_err(|e| cfg_err(e.to_string()))?;
    let several = ml.n_atoms != 1 || ml.tma_boxes_per_stage_a != 1 || ml.tma_boxes_per_stage_b != 1;
    if several && !cfg.plain() {
        return Err(cfg_err(format!(
            "tile {bm}x{bn}x{bk}: only the plain GEMM (no grouping, gathering, stream-K or dynamic walk) issues several wgmma atoms along N or several TMA boxes per operand"
        )));
    }
    let consumers = ml.consumer_warpgroups as i64;
    let wg_rows = ml.wg_tile[0];
    let m_atoms = ml.m_atoms_per_wg;
    if m_atoms * bn / 2 > MAX_ACCUMULATORS {
        return Err(cfg_err(format!(
            "{} accumulators per thread exceed {MAX_ACCUMULATORS}",
            m_atoms * bn / 2
        )));
    }
    // The collective's plan gives the stages, the per-stage bytes and the offsets of B and
    // of the epilogue's buffers; the kernel adds what the collective does not model after
    // them: ping-pong's second epilogue set, the broadcast staging areas and the C
    // pipeline's barriers.
    let stages = ml.stages;
    let stage_bytes = ml.stage_bytes_ab;
    let main_bytes = ml.smem_offset_b + stages * stage_bytes[1];
    let epi_bytes = epi_sets * epi_set_bytes;
    let off_epi = ml.smem_offset_epilogue;
    let after = if ml.storage_union {
        main_bytes.max(epi_bytes)
    } else {
        off_epi + epi_bytes
    };
    let bc_offset = after.div_ceil(16) * 16;
    let off_bar = (bc_offset + epi_sets * bc_group_bytes).div_ceil(8) * 8;
    let walk_offset = if cfg.stream_k || cfg.dynamic_walk {
        (off_bar + stages * 16 + c_bar_bytes).div_ceil(8) * 8
    } else {
        0
    };
    if cfg.dynamic_walk && dynamic::bytes(stages) > dynamic::WALK_BYTES {
        return Err(cfg_err(format!(
            "dynamic walk: {stages} stages' work ids do not fit its shared memory"
        )));
    }
    let smem_bytes = off_bar + stages * 16 + c_bar_bytes + walk_bytes + ALIGN_SLACK;
    if smem_bytes > cfg.smem_capacity {
        return Err(cfg_err(format!(
            "needs {smem_bytes} B of shared memory, capacity {}",
            cfg.smem_capacity
        )));
    }
    let descriptors = Sm90Descriptors::new(&ml, consumers, bk * cfg.ab.bytes() as i64, bn, [0, ml.smem_offset_b])?;
    Ok(Sm90Plan {
        descriptors,
        stages,
        consumers,
        wg_rows,
        m_atoms,
        mma: ml.mma_atom.clone(),
        smem_atom: ml.smem_atom_a.clone(),
        stage_bytes,
        epi_tile: epi.epi_tile,
        epi_groups: epi_sets as i64,
        group_tile,
        d_bufs,
        c_bufs: epi.stages_c,
        reuse_smem_c: epi.reuse_smem_c,
        delay_tma_store: epi.delay_tma_store,
        epi_swizzle,
        epi_set_bytes,
        offsets: [0, ml.smem_offset_b, off_epi, off_bar],
        bc_floats,
        bc_offset,
        bc_group_bytes,
        smem_bytes,
        walk_offset,
        mainloop: ml,
        epilogue: epi,
    })
}

/// The byte offset of `(row, col)` in one epilogue subtile buffer, as the kernel computes
/// it: row-major rows of `EPI_N * bytes` (one swizzle span) and the span's byte swizzle
/// `Swizzle<B,4,3>` (`B = log2(span / 16)`). Equal to the epilogue plan's
/// `smem_layout_d` (checked in the tests).
pub fn epi_byte_offset(p: &Sm90Plan, row: i64, col: i64, elem_bytes: i64) -> i64 {
    let o = row * p.epi_tile[1] * elem_bytes + col * elem_bytes;
    let mask = (p.epi_swizzle.span_bytes() / 16 - 1) << 4;
    o ^ ((o >> 3) & mask)
}

/// The accumulator type of an input type: s32 for s8, f32 otherwise.
pub fn acc_element(ab: Element) -> Element {
    if ab == Element::S8 {
        Element::S32
    } else {
        Element::F32
    }
}

/// The C++ type of an accumulator register.
pub(super) fn acc_cty(ab: Element) -> &'static str {
    if ab == Element::S8 {
        "int32_t"
    } else {
        "float"
    }
}

/// The kernel name, e.g. `rc_gemm_sm90_bf16_tn_128x256x64_coop_c1x1_s4_e128x32`.
pub fn kernel_name(cfg: &GemmSm90Config, p: &Sm90Plan) -> String {
    let [bm, bn, bk] = cfg.tile;
    if let Some(g) = cfg.grouped {
        // The grouped member: `rc_moe_grouped_sm90_bf16_swiglu_128x256x64_coop_s4` (`gather_swiglu`
        // for the gathering GEMM1), with
        // `_d<type>` where D's type is not A's (e4m3 operands), `_c2x1` on clusters, `_b<band>`
        // where the walk's band is not the default, `_dyn` for the dynamic walk, `_pad` for
        // the padding skip.
        let band = if cfg.walk_band == grouped::WALK_BAND {
            String::new()
        } else {
            format!("_b{}", cfg.walk_band)
        };
        let cluster = if cfg.cluster == [1, 1] {
            String::new()
        } else {
            format!("_c{}x{}", cfg.cluster[0], cfg.cluster[1])
        };
        let out = if cfg.cd == cfg.ab {
            String::new()
        } else {
            format!("_d{}", cfg.cd.ptx())
        };
        let gather = if cfg.gather_a { "gather_" } else { "" };
        let dynamic = if cfg.dynamic_walk { "_dyn" } else { "" };
        let pad = if cfg.pad_skip { "_pad" } else { "" };
        return format!(
            "rc_moe_grouped_sm90_{}_{gather}{}_{bm}x{bn}x{bk}_{}{cluster}_s{}{out}{band}{dynamic}{pad}",
            cfg.ab.ptx(),
            g.tag(),
            cfg.schedule.tag(),
            p.stages
        );
    }
    let out = if cfg.cd == cfg.ab {
        String::new()
    } else {
        format!("_d{}", cfg.cd.ptx())
    };
    // The default tree adds nothing; the C-less scale is `_noc`; other trees add their name.
    let noc = match cfg.fusion.name().as_str() {
        "lincomb" => String::new(),
        "scale" => "_noc".to_string(),
        other => format!("_{other}"),
    };
    // The default wgmma pipelining (one batch in flight) adds nothing.
    let pipe = if cfg.mma_pipe == 1 {
        String::new()
    } else {
        format!("_w{}", cfg.mma_pipe)
    };
    // Hybrid stream-K: `_sk`, `_sk<parts>` for a finer cut.
    let sk = match (cfg.stream_k, cfg.stream_k_parts) {
        (false, _) => String::new(),
        (true, 2) => "_sk".into(),
        (true, parts) => format!("_sk{parts}"),
    };
    format!(
        "rc_gemm_sm90_{}{out}_tn_{bm}x{bn}x{bk}_{}_c{}x{}_s{}_e{}x{}{pipe}{sk}{noc}",
        cfg.ab.ptx(),
        cfg.schedule.tag(),
        cfg.cluster[0],
        cfg.cluster[1],
        p.stages,
        p.epi_tile[0],
        p.epi_tile[1]
    )
}
