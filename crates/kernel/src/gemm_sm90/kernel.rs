//! The main SM90 GEMM kernel, assembled from its role emitters: the prologue (shared-memory
//! map, barriers, cluster masks) here, the producer warpgroup's TMA loads
//! ([`super::producer`]), the consumer warpgroups' `wgmma` mainloop ([`super::consumer`])
//! and their TMA epilogue ([`super::epilogue`]), all walking the tiles of
//! [`super::scheduler`].

use super::*;

/// What every role emitter reads: the configuration, the plan, the fusion's code and the
/// constants derived from them once.
pub(super) struct Ctx<'a> {
    pub cfg: &'a GemmSm90Config,
    pub p: &'a Sm90Plan,
    pub fusion: &'a FusionCode,
    pub bm: i64,
    pub bn: i64,
    pub bk: i64,
    /// Epilogue subtile columns.
    pub en: i64,
    /// Rows of the subtile one epilogue group stages and stores (`em / 2` cooperative).
    pub gem: i64,
    /// Subtiles along M and N (of the tile; per group, of the group's rows, cooperative).
    pub sub_m: i64,
    pub sub_n: i64,
    /// Mainloop stages.
    pub s: usize,
    pub coop: bool,
    pub pp: bool,
    pub cm: i64,
    pub cn: i64,
    pub clustered: bool,
    /// The fusion's broadcast vectors are staged in shared memory per tile.
    pub staged: bool,
    /// Bytes of one operand row of a k-tile (128: one swizzle row).
    pub row_bytes: i64,
    /// Bytes of one C / D element.
    pub db: i64,
    /// Bytes of one epilogue group's subtile (a buffer).
    pub sub_bytes: i64,
    /// Threads of one epilogue group (one warpgroup).
    pub epi_threads: i64,
    /// Bytes of one epilogue group's buffers.
    pub epi_set_bytes: usize,
    /// Accumulators per m64 atom and thread.
    pub nacc: i64,
    /// Hybrid stream-K: the roles walk [`crate::stream_k`]'s items instead of work ids.
    pub sk: bool,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(cfg: &'a GemmSm90Config, p: &'a Sm90Plan, fusion: &'a FusionCode) -> Self {
        let [bm, bn, bk] = cfg.tile;
        let [em, en] = p.epi_tile;
        let [cm, cn] = cfg.cluster;
        let coop = cfg.schedule == Sm90Schedule::Cooperative;
        let db = cfg.cd.bytes() as i64;
        let gem = p.group_tile[0];
        let sub_bytes = gem * en * db;
        Ctx {
            cfg,
            p,
            fusion,
            bm,
            bn,
            bk,
            en,
            gem,
            sub_m: bm / em,
            sub_n: bn / en,
            s: p.stages,
            coop,
            pp: cfg.schedule == Sm90Schedule::PingPong,
            cm,
            cn,
            clustered: cm * cn > 1,
            staged: p.bc_floats > 0,
            row_bytes: bk * cfg.ab.bytes() as i64,
            db,
            sub_bytes,
            epi_threads: WG,
            epi_set_bytes: p.epi_set_bytes,
            nacc: bn / 2,
            sk: cfg.stream_k,
        }
    }

    /// The epilogue subtile `(sm, sn)` of subtile number `i` (N outer, M inner), each
    /// declared from its layout.
    pub(super) fn subtile_coord(&self, sm: &str, sn: &str, i: Expr) -> Result<[Stmt; 2], GemmError> {
        let (sub_m, sub_n) = (self.sub_m, self.sub_n);
        let subs = tuple!(sub_m, sub_n);
        let row = lay(subs.clone(), tuple!(1, 0))?;
        let col = lay(subs, tuple!(0, 1))?;
        Ok([
            dl("const int", sm, &row, std::slice::from_ref(&i))?,
            dl("const int", sn, &col, &[i])?,
        ])
    }
}

/// The main kernel: prologue, then the producer warpgroup (`wg == 0`) or a consumer.
pub(super) fn kernel(
    cfg: &GemmSm90Config,
    p: &Sm90Plan,
    name: &str,
    fusion: &FusionCode,
) -> Result<CFunction, GemmError> {
    let k = Ctx::new(cfg, p, fusion);
    let mut b = smem_map(&k);
    b.extend(prologue(&k, name));
    b.push(Stmt::If {
        cond: "wg == 0".into(),
        then: producer::producer(&k)?,
        otherwise: consumer::consumer(&k)?,
    });
    if k.clustered {
        b.push(c(
            "no CTA leaves while a partner may still multicast into it or arrive on its barriers",
        ));
        b.push(e("__syncwarp()"));
        b.push(e("rc_cluster_arrive()"));
        b.push(e("rc_cluster_wait()"));
    }
    // The grouped member stores from registers: no C / D tensor maps.
    // The gathering GEMM1 copies A's rows itself: no A tensor map either.
    let maps: &[&str] = if cfg.gather_a {
        &["tmap_b"]
    } else if cfg.grouped.is_some() {
        &["tmap_a", "tmap_b"]
    } else {
        &["tmap_a", "tmap_b", "tmap_c", "tmap_d"]
    };
    let mut params: Vec<(String, String)> = maps
        .iter()
        .map(|t| ("const __grid_constant__ rc_tmap_t".to_string(), t.to_string()))
        .collect();
    let int = |n: &str| ("int".to_string(), n.to_string());
    params.extend(["M", "N", "K", "L"].map(int));
    params.push((format!("const {}", fusion.struct_name), "p".into()));
    // A stream-K kernel splits K itself (its launch refuses split_k > 1), a grouped one
    // splits nothing (no workspace either): no split_k.
    if cfg.takes_workspace() {
        params.push(("float* __restrict__".into(), "workspace".into()));
    }
    if cfg.takes_split_k() {
        params.push(int("split_k"));
    }
    params.extend(super::launch::SCHED_PARAMS.map(int));
    params.push(int("early_trigger"));
    if cfg.grouped.is_some() {
        params.extend(grouped::params(cfg));
    }
    if cfg.gather_a {
        params.extend(grouped_gather::params(cfg));
    }
    if cfg.dynamic_walk {
        params.push(("unsigned* __restrict__".into(), "work_counter".into()));
    }
    if cfg.stream_k {
        params.extend(["sk_tiles", "sk_units"].map(int));
        params.push(("unsigned int* __restrict__".into(), "sk_counters".into()));
    }
    Ok(CFunction {
        qualifiers: format!(
            "extern \"C\" __global__ __launch_bounds__({}, 1)",
            (1 + p.consumers) * WG
        ),
        ret: "void".into(),
        name: name.into(),
        params,
        doc: vec![format!(
            "{name}: TMA + wgmma {:?} GEMM, D = fusion(acc = A * B, C), fusion {}",
            cfg.schedule,
            cfg.fusion.describe()
        )],
        body: b,
    })
}

/// The shared-memory map (as comments) and the aligned base and barrier addresses.
fn smem_map(k: &Ctx) -> Vec<Stmt> {
    let p = k.p;
    let (bm, bn, bk, s, gem, en) = (k.bm, k.bn, k.bk, k.s, k.gem, k.en);
    let [off_a, off_b, off_epi, off_bar] = p.offsets;
    let span = p.epi_swizzle.span_bytes();
    let mut b = vec![
        c("Shared memory (byte offsets from a 1 KiB-aligned base):"),
        c(format!(
            "  sA (BM,BK,PIPE) = ({bm},{bk},{s}) of {} at {off_a}",
            p.smem_atom
        )),
        c(format!("  sB (BN,BK,PIPE) = ({bn},{bk},{s}) at {off_b}")),
        c(format!(
            "  epilogue at {off_epi}{}: per group ({} of {} B), {} D buffer(s){} of ({gem},{en}) row-major, Swizzle<{},4,3> on bytes (TMA {:?})",
            if off_epi == 0 {
                " (a union with the mainloop: the non-persistent schedule)"
            } else {
                ""
            },
            p.epi_groups,
            p.epi_set_bytes,
            p.d_bufs,
            if p.reuse_smem_c {
                " = the C buffers (ReuseSmemC)".to_string()
            } else {
                format!(" + {} C buffer(s)", p.c_bufs)
            },
            (span / 16).trailing_zeros(),
            p.epi_swizzle
        )),
        c(format!(
            "  mbarriers at {off_bar}: full[{s}], empty[{s}], then C full/empty"
        )),
        e("extern __shared__ __align__(1024) unsigned char rc_smem_raw[]"),
        d(
            "unsigned char* const",
            "smem",
            "rc_smem_raw + ((1024u - (rc_smem_u32(rc_smem_raw) & 1023u)) & 1023u)",
        ),
        d("const uint32_t", "smem_u32", "rc_smem_u32(smem)"),
        d("const uint32_t", "bar_full", format!("smem_u32 + {off_bar}u")),
        d("const uint32_t", "bar_empty", format!("bar_full + {}u", 8 * s)),
        dc(
            "const uint32_t",
            "bar_c_full",
            format!("bar_full + {}u", 16 * s),
            "C pipeline: per C stage (and ping-pong group) a [full, empty] pair of mbarriers, 16 B apart",
        ),
    ];
    if k.cfg.with_c() {
        b.push(d("const uint32_t", "bar_c_empty", "bar_c_full + 8u"));
    }
    if k.cfg.dynamic_walk {
        b.extend(super::dynamic::smem_decls(k));
    }
    b
}

/// Thread ids, k-tile counts, the scheduler, cluster masks, barrier initialization and
/// tensor-map prefetch.
/// `k_iters`, the k-tiles of one work item: a split's share with split-K, all of K for a
/// grouped kernel; none for stream-K (its walk declares its own units).
fn k_iters_decl(k: &Ctx) -> Option<Stmt> {
    if k.cfg.takes_split_k() {
        Some(dc(
            "const int",
            "k_iters",
            "split_k > 1 ? (k_tiles + split_k - 1) / split_k : k_tiles",
            "k-tiles per work item: every split runs the same count (TMA zero-fills past K)",
        ))
    } else if k.sk {
        None
    } else {
        Some(dc(
            "const int",
            "k_iters",
            "k_tiles",
            "k-tiles per work item: all of K (no split)",
        ))
    }
}

/// The cluster's ranks, the rows each CTA loads of the multicast A / B tiles, the masks of
/// the CTAs a multicast lands in, and (clustered) their union `peers`.
fn cluster_masks(k: &Ctx) -> Vec<Stmt> {
    let (cm, cn) = (k.cm, k.cn);
    let rank_bit = |e: Expr| format!("(uint16_t)(1u << ({}))", e.to_cpp());
    let mut b = vec![
        c(format!(
            "cluster {cm}x{cn}: A is multicast along the cluster's N ranks (each loads BM/{cn} rows), B along its M ranks (BN/{cm} rows)"
        )),
        d("const int", "rank_m", "sched.rank_m()"),
        d("const int", "rank_n", "sched.rank_n()"),
        d("const int", "a_rows", format!("rank_n * {}", k.bm / cn)),
        d("const int", "b_rows", format!("rank_m * {}", k.bn / cm)),
        d("const int", "a_slice", format!("a_rows * {}", k.row_bytes)),
        d("const int", "b_slice", format!("b_rows * {}", k.row_bytes)),
        dc("uint16_t", "mask_a", "0", "%cluster_ctarank = rank_m + rank_n * cluster_m"),
        d("uint16_t", "mask_b", "0"),
        for_(
            "j",
            "0",
            cn.to_string(),
            vec![e(format!(
                "mask_a |= {}",
                rank_bit(var("rank_m").add(&var("j").mul(&Expr::lit(cm))))
            ))],
        ),
        for_(
            "i",
            "0",
            cm.to_string(),
            vec![e(format!(
                "mask_b |= {}",
                rank_bit(var("i").add(&var("rank_n").mul(&Expr::lit(cm))))
            ))],
        ),
    ];
    if k.clustered {
        b.push(dc(
            "const uint16_t",
            "peers",
            "mask_a | mask_b",
            "the CTAs whose loads land in this CTA's stages",
        ));
    }
    b
}

/// Thread 0 initializes the stage ring's, the C buffers' (and the dynamic walk's) mbarriers.
fn barrier_init(k: &Ctx) -> Stmt {
    let (cm, cn, s) = (k.cm, k.cn, k.s);
    // Consumer warps release a stage to every CTA that writes into it: itself, the CTAs
    // of its cluster row (A multicast) and of its cluster column (B multicast).
    let empty_arrivals = if k.coop { 8 } else { 4 } * (cm + cn - 1);
    // The gathering GEMM1's A rows arrive per producer thread (cp.async), B's with the TMA.
    let full_arrivals = if k.cfg.gather_a {
        grouped_gather::full_arrivals()
    } else {
        1
    };
    let c_groups = k.p.epi_groups as usize;
    if_(
        "threadIdx.x == 0",
        vec![
            for_(
                "i",
                "0",
                s.to_string(),
                vec![
                    e(format!("rc_mbarrier_init(bar_full + 8 * i, {full_arrivals})")),
                    e(format!("rc_mbarrier_init(bar_empty + 8 * i, {empty_arrivals})")),
                ],
            ),
            for_(
                "i",
                "0",
                (k.p.c_bufs * c_groups).to_string(),
                vec![
                    e("rc_mbarrier_init(bar_c_full + 16 * i, 1)"),
                    e("rc_mbarrier_init(bar_c_full + 16 * i + 8, 1)"),
                ],
            ),
        ]
        .into_iter()
        .chain(if k.cfg.dynamic_walk {
            super::dynamic::barrier_inits(k)
        } else {
            vec![]
        })
        .chain([e("rc_fence_mbarrier_init()")])
        .collect(),
    )
}

/// Thread 32 prefetches the tensor maps the CTA reads through (A unless the producer
/// gathers its rows, B; D and C in a plain GEMM, whose maps are kernel parameters).
fn tensormap_prefetch(k: &Ctx) -> Stmt {
    let mut prefetch = vec![e("rc_prefetch_tensormap(&tmap_a)"), e("rc_prefetch_tensormap(&tmap_b)")];
    if k.cfg.gather_a {
        prefetch.remove(0);
    }
    if k.cfg.grouped.is_none() {
        prefetch.push(e("rc_prefetch_tensormap(&tmap_d)"));
        prefetch.push(if_("load_c", vec![e("rc_prefetch_tensormap(&tmap_c)")]));
    }
    if_("threadIdx.x == 32", prefetch)
}

fn prologue(k: &Ctx, name: &str) -> Vec<Stmt> {
    let mut b = vec![
        c("warpgroup and warp indices broadcast from lane 0 (CUTLASS's canonical_warp_group_idx): ptxas then"),
        c("knows them warp-uniform, so the stage ring and the wgmma descriptors derived from them live in"),
        c("uniform registers instead of being moved there (R2UR) before every wgmma"),
        d("const int", "wg", "__shfl_sync(0xffffffffu, threadIdx.x / 128, 0)"),
        d(
            "const int",
            "warp",
            "__shfl_sync(0xffffffffu, (threadIdx.x / 32) % 4, 0)",
        ),
        d("const int", "lane", "threadIdx.x % 32"),
        d("const int", "k_tiles", format!("(K + {}) / {}", k.bk - 1, k.bk)),
    ];
    b.extend(k_iters_decl(k));
    b.extend([
        c("persistent tile scheduler: raster order and swizzle resolved on the host"),
        e(format!(
            "const {name}_sched sched(sched_tiles_m, sched_tiles_n, sched_batches, sched_along_n, sched_log_swizzle)"
        )),
    ]);
    if k.sk {
        b.extend(stream_k::walk_decl(k, name));
    }
    b.extend(cluster_masks(k));
    b.push(if !k.cfg.takes_split_k() {
        dc(
            "const bool",
            "load_c",
            k.fusion.source_needed.clone(),
            "is_source_needed",
        )
    } else {
        dc(
            "const bool",
            "load_c",
            format!("({}) && split_k == 1", k.fusion.source_needed),
            "is_source_needed (split-K applies the fusion in the reduction instead)",
        )
    });
    b.push(barrier_init(k));
    b.extend(crate::grid_dependency::prologue(Some("early_trigger")));
    if let Some(g) = k.cfg.grouped {
        b.extend(grouped::prologue(g));
        if k.cfg.dynamic_walk {
            b.extend(super::dynamic::prologue(k));
        }
    }
    b.push(tensormap_prefetch(k));
    b.push(e("__syncthreads()"));
    if k.sk {
        b.push(stream_k::walk_ref(name));
    }
    if k.clustered {
        b.push(c(
            "every CTA's barriers are initialized before any partner multicasts into it",
        ));
        b.push(e("rc_cluster_arrive_relaxed()"));
        b.push(e("rc_cluster_wait()"));
    }
    b
}
