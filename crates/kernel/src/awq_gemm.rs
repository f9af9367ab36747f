//! The AWQ W4A16 GEMM (SM80 class, runs on SM90 too): `out = x @ dequantize(qweight,
//! scales, qzeros) (+ bias)` on AutoAWQ's checkpoint tensors as they are, rendered from the
//! [`AwqMainloop`] plan of `rcute_collective::awq_mainloop` (which documents the pipeline
//! and the lane -> fragment mapping).
//!
//! Grid: `(ceil(N / BN), ceil(M / BM), splits)`. Split `z` walks k-tiles
//! `[z * kt_per_split, (z + 1) * kt_per_split)`. With one split the epilogue adds the bias
//! and stores 16-bit outputs directly; with several, every split writes its f32 partial
//! tile to its own slab of a `[splits, M, N]` f32 workspace (16-byte `st.global.cg`
//! stores: the slabs stay in L2), counts itself on the tile's semaphore, and the last
//! split to arrive sums the slabs in slab order `0, 1, .., splits - 1` (whichever split
//! that is), adds the bias, stores, and writes the semaphore back to zero. The order of
//! the additions is fixed, so repeated runs give bit-identical results; the workspace
//! needs no initialization.
//!
//! With [`AwqGemmConfig::bulk`] (sm_90, prepared layout) one more warp produces the stages
//! with `cp.async.bulk` into an mbarrier ring and the other warps only consume them
//! ([`rcute_collective::awq_bulk`], emitted by `awq_gemm/bulk.rs`). With
//! [`AwqGemmConfig::streamed`] (prepared layout, the decode kernel) each lane streams its
//! 16 bytes of the weight per k16 step straight into registers and multiplies them as the
//! A operand of a swap-AB `mma.sync` ([`rcute_collective::awq_streamed`], emitted by
//! `awq_gemm/streamed.rs`); up to two K splits of a tile then sum through distributed
//! shared memory on sm_90 ([`GeneratedAwqGemm::launch_config_on`]; with
//! [`AwqGemmConfig::cluster_push`] the other splits push their partial chunks into split
//! 0's shared memory, `awq_gemm/streamed_cluster.rs`, named `..._cpush`). With
//! [`AwqGemmConfig::streamed_shared_ring`] the same kernel takes each lane's steps through
//! its own slots of a shared `cp.async` ring (counted waits instead of the register ring's
//! drains; named `..._streamed_sring`). With [`AwqGemmConfig::staged_k_tiles`] a streamed
//! kernel stages `T` k-tiles of `x` per split instead of the default 64 KB (named
//! `..._sS_xT_...`: a 16-row tile takes K = 4096 in one split with 64). With
//! [`AwqGemmConfig::streamed_checkpoint`] the same kernel reads AutoAWQ's checkpoint
//! words as they are (the unprepared op's decode kernel: four word loads per lane and k16
//! step, byte permutations of row pairs into the same fragments;
//! [`rcute_collective::awq_streamed_checkpoint`], emitted by
//! `awq_gemm/streamed_checkpoint.rs`), named `..._v1_streamed`. With
//! [`AwqGemmConfig::wgmma`] (sm_90a, prepared layout) the SM90 mixed-input kernel runs it:
//! swap-AB RS `wgmma` (the converted weight words are the register A operand, `x` the
//! shared-memory B operand), `x` TMA-loaded by a producer warpgroup, one split
//! ([`rcute_collective::awq_wgmma`], emitted by `awq_gemm/wgmma.rs`; its launch takes the TMA
//! map of `x` last: [`GeneratedAwqGemm::launch_args`]); with [`AwqGemmConfig::split_k`]
//! (named `..._sk`) it splits K over the grid's z with the workspace and semaphores above
//! (`awq_gemm/wgmma_split.rs`). With [`AwqGemmConfig::wgmma_checkpoint`] the same kernel
//! reads AutoAWQ's checkpoint `qweight` as it is (the producer TMA-loads it in swizzled
//! boxes, each lane byte-permutes its words by pairs; [`rcute_collective::awq_wgmma_checkpoint`],
//! emitted by `awq_gemm/wgmma_checkpoint.rs`; its launch takes the TMA map of `qweight` after
//! that of `x`), named `..._v1_wgmma...`. [`AwqGemmConfig::weight_boxes`] (`..._tb`,
//! `awq_gemm/wgmma_boxes.rs`): each prepared weight stage as one 3-D TMA box (map after x's).
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
//! let g = generate(&AwqGemmConfig::new(Element::BF16, [128, 256, 64], [2, 1], 4, 4).wgmma()).unwrap();
//! assert_eq!(g.name, "rc_awq_gemm_bf16_128x256x64_w2x1_s4_v4_prepared_wgmma");
//! assert!(g.source.contains("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"));
//! assert!(g.source.contains("cp.async.bulk.tensor.2d"));
//! assert_eq!((g.plan.threads, g.split_plan(4096, 3)), (384, (64, 1)));
//! // the split-K variant: 16 tokens, 64 k-tiles in 8 splits of 8 (a G = 128 group is two
//! // k-tiles: splits start on k-tile boundaries); 3 requested: 22, 22, 20
//! let sk = generate(&AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 1], 8, 4).wgmma().split_k()).unwrap();
//! assert_eq!(sk.name, "rc_awq_gemm_f16_16x256x64_w1x1_s8_v4_prepared_wgmma_sk");
//! assert_eq!((sk.split_plan(4096, 8), sk.split_plan(4096, 3)), ((8, 8), (22, 3)));
//! assert!(sk.source.contains("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16"));
//! assert_eq!(sk.workspace_bytes(16, 14336, 8), 8 * 16 * 14336 * 4);
//! ```
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
//! let c = generate(&AwqGemmConfig::new(Element::F16, [16, 256, 64], [2, 1], 8, 4).wgmma_checkpoint().split_k()).unwrap();
//! assert_eq!(c.name, "rc_awq_gemm_f16_16x256x64_w2x1_s8_v1_wgmma_sk");
//! assert!(c.source.contains("__byte_perm") && c.source.contains("tmap_w"));
//! // built for two resident CTAs an SM (`AwqGemmConfig::resident`): named `_o2`
//! let o2 = generate(&AwqGemmConfig::new(Element::F16, [32, 256, 64], [2, 1], 6, 4).wgmma().split_k().resident(2)).unwrap();
//! assert_eq!(o2.name, "rc_awq_gemm_f16_32x256x64_w2x1_s6_v4_prepared_wgmma_o2_sk");
//! assert!(o2.source.contains("__launch_bounds__(384, 2)") && o2.source.contains("rc_setmaxnreg_inc<96>()"));
//! ```
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
//! let g = generate(&AwqGemmConfig::new(Element::F16, [16, 64, 64], [16, 1], 4, 4).streamed_checkpoint()).unwrap();
//! assert_eq!(g.name, "rc_awq_gemm_f16_16x64x64_w16x1_s4_v1_streamed");
//! assert!(g.source.contains("__byte_perm") && g.source.contains("ld.global.nc.L1::no_allocate.b32"));
//! ```
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
//! let g = generate(&AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 4, 4)).unwrap();
//! assert_eq!(g.name, "rc_awq_gemm_f16_16x256x64_w1x4_s4_v4");
//! assert!(g.source.contains("rc_cvt_u4x8_f16x2_biased") && g.source.contains("mma.sync"));
//! assert_eq!(g.launch_config(1, 14336, 5).grid.x, 56);
//! ```

use crate::emit::{unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::gemm_sm80::GemmError;
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_atom::copy_cp_async::{cp_async_commit_group, cp_async_wait_group};
pub use rcute_atom::Element;
pub use rcute_collective::awq_mainloop::AwqMainloopConfig as AwqGemmConfig;
use rcute_collective::awq_mainloop::{AwqMainloop, AWQ_BK, GROUP_SLOTS};
use rcute_collective::awq_streamed::StreamedWeight;

mod bulk;
mod chunks;
mod fused;
mod load;
mod load_per_copy;
mod prepared;
mod streamed;
mod streamed_checkpoint;
mod streamed_cluster;
mod streamed_group_slots;
mod streamed_prefetch;
mod streamed_warp_x;
mod wgmma;
mod wgmma_boxes;
mod wgmma_checkpoint;
mod wgmma_split;

/// A generated AWQ GEMM kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedAwqGemm {
    /// Kernel (and unit) name, after the configuration.
    pub name: String,
    /// The mainloop plan.
    pub plan: AwqMainloop,
    /// CUDA C++ source.
    pub source: String,
}

/// Run-time arguments of one launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AwqGemmArgs {
    /// `x [M, K]`, row-major with leading dimension `ldx`.
    pub x: u64,
    /// `qweight` int32 `[K, N/8]`.
    pub qweight: u64,
    /// `scales [K/G, N]`.
    pub scales: u64,
    /// `qzeros` int32 `[K/G, N/8]`.
    pub qzeros: u64,
    /// `bias [N]`, or 0 for none.
    pub bias: u64,
    /// `out [M, N]`, row-major with leading dimension `ldo`.
    pub out: u64,
    /// f32 `[splits, M, N]` workspace of [`GeneratedAwqGemm::workspace_bytes`] (with
    /// several splits; any contents).
    pub workspace: u64,
    /// Zeroed `i32` semaphores, [`GeneratedAwqGemm::semaphore_count`] (several splits).
    pub semaphores: u64,
    /// Rows of `x`.
    pub m: i32,
    /// Columns of the weight.
    pub n: i32,
    /// Reduction size.
    pub k: i32,
    /// Group size.
    pub group: i32,
    /// Leading dimension of `x` (elements).
    pub ldx: i64,
    /// Leading dimension of `out` (elements).
    pub ldo: i64,
    /// K splits (grid z).
    pub splits: i32,
    /// Streamed kernels: the k16 steps of its weight (and its first group's scale and zero
    /// lines) each warp prefetches into L2 before its grid-dependency wait (0: none; see
    /// `awq_gemm/streamed_prefetch.rs` and [`GeneratedAwqGemm::prefetch_steps`]).
    pub prefetch_steps: i32,
    /// Streamed kernels: let the next kernel launch right after the grid-dependency wait
    /// (`rc_launch_dependents()`) instead of at exit, so that its CTAs prefetch on the SMs
    /// this grid's tail leaves ([`crate::grid_dependency::tail_trigger`]).
    pub early_trigger: bool,
}

impl GeneratedAwqGemm {
    /// K tiles of a problem.
    pub fn k_tiles(&self, k: i32) -> i32 {
        (k.max(1) + AWQ_BK as i32 - 1) / AWQ_BK as i32
    }

    /// K tiles per split for `splits` requested splits, and the splits that run (every one
    /// non-empty); a streamed kernel's splits hold at most its plan's `max_k_tiles`, so it
    /// may run more splits than requested.
    pub fn split_plan(&self, k: i32, splits: i32) -> (i32, i32) {
        let kt = self.k_tiles(k);
        let per = (kt + splits.clamp(1, kt) - 1) / splits.clamp(1, kt);
        // The wgmma kernel runs one split unless it splits K (`split_k`).
        if self.plan.wgmma.is_some() && !self.plan.config.split_k {
            return (kt, 1);
        }
        // The streamed kernel stages a split's x in shared memory: at most `max_k_tiles`.
        let per = match &self.plan.streamed {
            Some(st) => per.min(st.max_k_tiles as i32),
            None => per,
        };
        (per, (kt + per - 1) / per)
    }

    /// Grid, block and dynamic shared memory (a streamed kernel's by the rows of `x` its
    /// CTAs hold: `min(BM, M)`, see
    /// [`rcute_collective::awq_streamed::AwqStreamed::smem_bytes_for`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
    /// let g = generate(&AwqGemmConfig::new(Element::F16, [8, 64, 64], [16, 1], 4, 4).streamed()).unwrap();
    /// assert_eq!(g.launch_config(1, 4096, 2).dynamic_smem_bytes, 2 * 2056 * 4);
    /// assert_eq!(g.launch_config(9, 4096, 2).dynamic_smem_bytes as i64, g.plan.smem_bytes);
    /// ```
    pub fn launch_config(&self, m: i32, n: i32, splits: i32) -> LaunchConfig {
        let [bm, bn, _] = self.plan.config.tile;
        let gx = (n.max(1) as u32).div_ceil(bn as u32);
        let gy = (m.max(1) as u32).div_ceil(bm as u32);
        let smem = match &self.plan.streamed {
            Some(st) => st.smem_bytes_for(bm.min(m.max(1) as i64)),
            None => self.plan.smem_bytes,
        };
        // The streamed kernel waits on its grid dependency first thing
        // (`crate::grid_dependency`): its launch may overlap the previous kernel's tail.
        LaunchConfig::new(Dim3::new(gx, gy, splits.max(1) as u32), self.plan.threads as u32)
            .with_dynamic_smem(smem as u32)
            .with_programmatic_dependency(self.plan.streamed.is_some())
    }

    /// [`Self::launch_config`] on a GPU of compute capability `cc`: a streamed kernel whose
    /// splits sum through distributed shared memory
    /// ([`rcute_collective::awq_streamed::AwqStreamed::clustered`]) launches each tile's
    /// splits as one `(1, 1, splits)` cluster (the kernel then leaves the workspace and the
    /// semaphores alone), with the sum by pushes its push area after the CTA's shared
    /// memory ([`rcute_collective::awq_streamed::AwqStreamed::cluster_offset_for`]).
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
    /// let g = generate(&AwqGemmConfig::new(Element::F16, [8, 64, 64], [8, 1], 8, 4).streamed()).unwrap();
    /// assert_eq!(g.launch_config_on(1, 4096, 2, (9, 0)).cluster.map(|c| c.z), Some(2));
    /// // the sum by pushes: the push area after the CTA's own shared memory
    /// let g = generate(&AwqGemmConfig::new(Element::F16, [8, 64, 64], [8, 1], 8, 4).streamed().cluster_push()).unwrap();
    /// assert!(g.name.ends_with("_streamed_cpush"));
    /// let lc = g.launch_config_on(1, 4096, 2, (9, 0));
    /// let st = g.plan.streamed.as_ref().unwrap();
    /// assert_eq!(lc.dynamic_smem_bytes as i64, st.smem_bytes_for(1) + st.cluster_bytes());
    /// assert_eq!(g.launch_config_on(1, 4096, 2, (8, 0)).dynamic_smem_bytes as i64, st.smem_bytes_for(1));
    /// assert_eq!(g.launch_config_on(1, 4096, 2, (8, 0)).cluster, None);
    /// assert_eq!(g.launch_config_on(1, 4096, 4, (9, 0)).cluster, None);
    /// ```
    pub fn launch_config_on(&self, m: i32, n: i32, splits: i32, cc: (u32, u32)) -> LaunchConfig {
        let lc = self.launch_config(m, n, splits);
        match &self.plan.streamed {
            Some(st) if st.clustered(splits, cc) => {
                let smem = lc.dynamic_smem_bytes + st.cluster_bytes() as u32;
                lc.with_cluster(Dim3::new(1, 1, splits as u32)).with_dynamic_smem(smem)
            }
            _ => lc,
        }
    }

    /// [`Self::launch_config_on`] on a GPU of `sms` SMs: a persistent wgmma kernel
    /// ([`AwqGemmConfig::persistent`]) launches one CTA per SM, at most one per output
    /// tile, in a row (`(min(tiles, sms), 1, 1)`); every other kernel its usual grid.
    ///
    /// ```
    /// use rcute_atom::Element;
    /// use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
    /// let cfg = AwqGemmConfig::new(Element::F16, [184, 256, 64], [2, 1], 6, 4).wgmma();
    /// let g = generate(&cfg.persistent()).unwrap();
    /// // 4096 x 14336: 23 x 56 = 1288 tiles on 132 CTAs; 64 x 512: 2 tiles on 2
    /// assert_eq!(g.launch_config_sms(4096, 14336, 1, (9, 0), 132).grid.x, 132);
    /// assert_eq!(g.launch_config_sms(64, 512, 1, (9, 0), 132).grid.x, 2);
    /// assert_eq!(generate(&cfg).unwrap().launch_config_sms(4096, 14336, 1, (9, 0), 132).grid.y, 23);
    /// ```
    pub fn launch_config_sms(&self, m: i32, n: i32, splits: i32, cc: (u32, u32), sms: u32) -> LaunchConfig {
        let mut lc = self.launch_config_on(m, n, splits, cc);
        if self.plan.config.persistent {
            lc.grid = Dim3::new((lc.grid.x * lc.grid.y).min(sms.max(1)), 1, 1);
        }
        lc
    }

    /// Bytes of the f32 `[splits, M, N]` partial-sum slabs for `splits` splits (0 for
    /// one); their contents before the launch do not matter.
    pub fn workspace_bytes(&self, m: i32, n: i32, splits: i32) -> usize {
        if splits <= 1 {
            0
        } else {
            splits as usize * m.max(0) as usize * n.max(0) as usize * 4
        }
    }

    /// Semaphores (one per output tile) needed with several splits.
    pub fn semaphore_count(&self, m: i32, n: i32) -> usize {
        let g = self.launch_config(m, n, 1).grid;
        g.x as usize * g.y as usize
    }

    /// The kernel's arguments in order; `a.splits` must be the splits that run
    /// ([`Self::split_plan`]).
    pub fn args(&self, a: &AwqGemmArgs) -> KernelArgs {
        let (per, _) = self.split_plan(a.k, a.splits);
        let args = KernelArgs::new()
            .u64(a.x)
            .u64(a.qweight)
            .u64(a.scales)
            .u64(a.qzeros)
            .u64(a.bias)
            .u64(a.out)
            .u64(a.workspace)
            .u64(a.semaphores)
            .i32(a.m)
            .i32(a.n)
            .i32(a.k)
            .i32(a.group)
            .i64(a.ldx)
            .i64(a.ldo)
            .i32(a.splits)
            .i32(per);
        if self.plan.streamed.is_some() {
            // the streamed kernel's prefetch and grid-dependency parameters, last
            args.i32(a.prefetch_steps).i32(i32::from(a.early_trigger))
        } else {
            args
        }
    }

    /// The k16 steps a streamed kernel's warps prefetch before their wait
    /// ([`AwqGemmArgs::prefetch_steps`]): a ring's worth, the steps its first loads after
    /// the wait read (0 for the other kernels).
    pub fn prefetch_steps(&self) -> i32 {
        self.plan.streamed.as_ref().map_or(0, |st| st.ring as i32)
    }
}

/// The kernel's name: its element, tile, warps and stages, then one suffix per option that
/// changes the emitted code (`_xT` staged k-tiles of x, `_prepared`, `_bulk`, `_streamed`,
/// `_sring`, `_cpush` the clustered sum by pushes, `_eg` the ring issued before the wait, `_sa` the scales after the group's MMAs, `_wgmma`, `_rR`, `_p`, `_c2`, `_fN`
/// `wgmma` groups in flight, `_oN`
/// resident CTAs, `_sk`).
fn kernel_name(cfg: &AwqGemmConfig) -> String {
    let [bm, bn, bk] = cfg.tile;
    // `_xT`: a streamed kernel's staged x of T k-tiles a split (the default's name has none)
    let staged = if cfg.staged_k_tiles > 0 {
        format!("_x{}", cfg.staged_k_tiles)
    } else {
        String::new()
    };
    format!(
        "rc_awq_gemm_{}_{bm}x{bn}x{bk}_w{}x{}_s{}{staged}_v{}{}{}",
        cfg.element,
        cfg.warps[0],
        cfg.warps[1],
        cfg.stages,
        cfg.b_vector_words,
        if cfg.prepared { "_prepared" } else { "" },
        if cfg.bulk { "_bulk" } else { "" }
    ) + if cfg.streamed { "_streamed" } else { "" }
        + if cfg.shared_ring { "_sring" } else { "" }
        + if cfg.cluster_push { "_cpush" } else { "" }
        + if cfg.eager_ring { "_eg" } else { "" }
        + if cfg.scale_after { "_sa" } else { "" }
        + if cfg.wgmma { "_wgmma" } else { "" }
        + &if cfg.raster > 0 {
            format!("_r{}", cfg.raster)
        } else {
            String::new()
        }
        + if cfg.persistent { "_p" } else { "" }
        + if cfg.chained { "_c2" } else { "" }
        + &if cfg.in_flight != 1 {
            format!("_f{}", cfg.in_flight)
        } else {
            String::new()
        }
        + &if cfg.ctas_per_sm != 1 {
            format!("_o{}", cfg.ctas_per_sm)
        } else {
            String::new()
        }
        + if cfg.weight_boxes { "_tb" } else { "" }
        + if cfg.split_k { "_sk" } else { "" }
}

/// Generates the kernel of `cfg`.
pub fn generate(cfg: &AwqGemmConfig) -> Result<GeneratedAwqGemm, GemmError> {
    let plan = AwqMainloop::new(cfg).map_err(|e| GemmError::Config(e.to_string()))?;
    let [bm, bn, bk] = cfg.tile;
    let name = kernel_name(cfg);
    if plan.wgmma.is_some() {
        return wgmma::generate_wgmma(plan, name);
    }
    let e = Emit::new(&plan, &name)?;
    if let Some(st) = &plan.streamed {
        let mut snips = vec![
            st.load.snippet.clone(),
            plan.mma.snippet.clone(),
            plan.convert.clone(),
            plan.convert_x16.clone(),
        ];
        snips.extend(crate::grid_dependency::snippets());
        snips.push(rcute_atom::prefetch::prefetch_l2());
        snips.extend(st.cluster.iter().cloned());
        if let Some(ring) = &st.lane_ring {
            snips.extend(crate::lane_ring::snippets(ring));
        }
        snips.extend(st.group_copy.iter().cloned());
        snips.dedup_by(|a, b| a.name == b.name);
        let mut items = unit_preamble(&snips, "");
        let checkpoint = st.weight == StreamedWeight::Checkpoint;
        if checkpoint {
            items.push(Item::Function(e.checkpoint_rows_fn()));
        }
        if cfg.scale_after {
            items.push(Item::Function(e.streamed_scale_fn()));
        }
        items.push(Item::Function(e.streamed_group_fn()));
        items.push(Item::Function(e.store()));
        items.push(Item::Function(e.streamed_kernel()));
        let (weight, origin, emitter) = if checkpoint {
            (
                "AutoAWQ qweight as it is",
                "; AutoAWQ's words by 4-byte loads, row pairs byte-permuted into the A fragments (rcute_collective::awq_streamed_checkpoint)",
                "streamed.rs, streamed_checkpoint.rs",
            )
        } else {
            ("prepared qweight", "", "streamed.rs")
        };
        let unit = Unit {
            header: vec![
                format!(
                    "{name}: AWQ W4A16 GEMM, {} x (int4 {weight}, {} scales), {bm} rows x {bn} columns, warps {} along K x {} along N, {} k16 steps in flight per warp",
                    cfg.element, cfg.element, st.k_slices, st.col_blocks, st.ring
                ),
                if st.ring_bytes() > 0 {
                    format!("Register-streamed A fragments: swap-AB mma.sync (weight = A, x = B), each lane's weight steps through its own slots of a shared cp.async ring, no CTA barrier in the loop (rcute_collective::awq_streamed){origin}.")
                } else {
                    format!("Register-streamed: swap-AB mma.sync (weight = A, x = B), no shared-memory weight stage (rcute_collective::awq_streamed){origin}.")
                },
                format!("Generated by rcute (crates/kernel/src/awq_gemm/{emitter}); do not edit."),
            ],
            includes: vec![],
            items,
        };
        return Ok(GeneratedAwqGemm {
            name,
            plan,
            source: unit.render(),
        });
    }
    let copies = if cfg.prepared {
        [plan.copy_a_addr.clone(), plan.copy_b_addr.clone()]
    } else {
        [plan.copy_a.snippet.clone(), plan.copy_b.snippet.clone()]
    };
    let mut snippets = match &plan.bulk {
        Some(ring) => [
            vec![ring.copy.snippet.clone(), ring.copy_x.clone(), ring.x_arrive.clone()],
            ring.sync.clone(),
        ]
        .concat(),
        None => vec![
            copies[0].clone(),
            copies[1].clone(),
            cp_async_commit_group(),
            cp_async_wait_group(),
        ],
    };
    snippets.extend([plan.ldsm_a.clone(), plan.mma.snippet.clone(), plan.convert.clone()]);
    if cfg.prepared {
        snippets.push(plan.convert_x16.clone());
    }
    let mut snips = snippets;
    snips.dedup_by(|a, b| a.name == b.name);
    let mut items = unit_preamble(&snips, "");
    if plan.bulk.is_none() {
        items.push(Item::Function(if cfg.prepared {
            e.load_tile()
        } else {
            e.per_copy_load_tile()
        }));
    }
    items.push(Item::Function(e.store()));
    items.push(Item::Function(e.kernel()));
    let unit = Unit {
        header: vec![
            format!(
                "{name}: AWQ W4A16 GEMM, {} x (int4 AutoAWQ qweight, {} scales), CTA {bm}x{bn}x{bk}, warps {}x{}, {} stages, {}",
                cfg.element,
                cfg.element,
                cfg.warps[0],
                cfg.warps[1],
                cfg.stages,
                if cfg.bulk {
                    "prepared qweight streamed by a producer warp (cp.async.bulk, mbarrier ring)".to_string()
                } else {
                    format!("{}-word qweight copies", cfg.b_vector_words)
                }
            ),
            "Generated by rcute (crates/kernel/src/awq_gemm.rs from rcute_collective::awq_mainloop); do not edit."
                .into(),
        ],
        includes: vec![],
        items,
    };
    Ok(GeneratedAwqGemm {
        name,
        plan,
        source: unit.render(),
    })
}

/// Shared memory of one SM of the SM80 / SM90 class (bytes) and what the driver reserves
/// per CTA.
const SM_SMEM_BYTES: i64 = 228 * 1024;
const CTA_SMEM_RESERVED: i64 = 1024;

/// The CTAs per SM a prepared one-m16-tile (decode) kernel asks the compiler to fit
/// (`__launch_bounds__`'s second argument): as many as shared memory allows, but never so
/// many that a thread gets fewer than 104 registers, i.e. 4 CTAs of 128 threads (96
/// registers for 5 spilled the stage loader's running sources; the 5-CTA 3-stage kernel
/// had measured no faster than an unbounded one, H200, BENCHMARKS.md, awq3). Kernels with
/// several accumulator tiles and the unprepared kernels are left unbounded
/// (`__launch_bounds__(threads)`): the 4-CTA bound made the prepared 32x256 kernel 9 %
/// slower (same measurements). `None` for those and the streamed kernels, except those of
/// the shared ring at 16 rows: 1, where ptxas's own choice under `__launch_bounds__(threads)`
/// held the bf16 16x128 kernel (2x2 warps, ring 8) at 72 registers and spilled (96 with
/// the 1; at 8 rows that choice keeps the 16-warp kernels at 64 registers, two CTAs of 512
/// threads per SM, where an explicit 1 gave them 80).
///
/// ```
/// use rcute_atom::Element;
/// use rcute_kernel::awq_gemm::{generate, AwqGemmConfig};
/// let g = generate(&AwqGemmConfig::new(Element::F16, [16, 256, 64], [1, 4], 3, 4).prepared()).unwrap();
/// assert!(g.source.contains("__launch_bounds__(128, 4)"));
/// let g = generate(&AwqGemmConfig::new(Element::F16, [32, 256, 64], [1, 4], 4, 4).prepared()).unwrap();
/// assert!(g.source.contains("__launch_bounds__(128)"));
/// ```
fn min_blocks(p: &AwqMainloop) -> Option<i64> {
    if let Some(st) = &p.streamed {
        return (st.ring_bytes() > 0 && st.b_frags > 1).then_some(1);
    }
    if !p.config.prepared || p.mi * p.ns != 1 {
        return None;
    }
    let by_smem = SM_SMEM_BYTES / (p.smem_bytes + CTA_SMEM_RESERVED);
    let by_regs = 65536 / (p.threads * 104);
    Some(by_smem.clamp(1, by_regs.max(1)))
}

/// The names and constants the emitter threads through.
struct Emit<'a> {
    p: &'a AwqMainloop,
    name: &'a str,
    ty: &'static str,
    ty2: &'static str,
}

/// `(warp OP w) * step`, folded: `0` when `zero` (one warp along that mode), no `/ 1`.
fn warp_origin(op: &str, w: i64, step: i64, zero: bool) -> String {
    if zero {
        "0".into()
    } else if w == 1 {
        format!("warp * {step}")
    } else {
        format!("({op}{w}) * {step}")
    }
}

/// `body` for copy `c`, inside `if (c < chunks)` unless the `threads x copies` slots are
/// exactly the `chunks` copies.
fn guarded(chunks: i64, slots: i64, body: Vec<Stmt>) -> Vec<Stmt> {
    if slots == chunks {
        body
    } else {
        vec![Stmt::If {
            cond: format!("c < {chunks}"),
            then: body,
            otherwise: vec![],
        }]
    }
}

/// The split-K gate of the kernels whose splits sum through the `[splits, M, N]` slabs:
/// this split's partials published, the split counted on its tile's semaphore by thread 0,
/// `sync` (the CTA's or the consumers' barrier) telling every thread through the shared
/// `is_last`, and all but the tile's last split returning.
fn split_gate(sync: &str) -> Vec<Stmt> {
    vec![
        Stmt::Comment("publish the partial sums, then count this split on the tile's semaphore".into()),
        s("__threadfence()"),
        s(sync),
        Stmt::If {
            cond: "threadIdx.x == 0".into(),
            then: vec![
                Stmt::decl("const int", "prev", "atomicAdd(sem + tile, 1)"),
                Stmt::assign("is_last", "prev == splits - 1"),
            ],
            otherwise: vec![],
        },
        s(sync),
        Stmt::If {
            cond: "!is_last".into(),
            then: vec![Stmt::Return],
            otherwise: vec![],
        },
        s("__threadfence()"),
    ]
}

/// After the last split's sum: thread `leader` zeroes the tile's semaphore for the next
/// launch (every split has counted itself on it).
fn semaphore_reset(leader: &str) -> Vec<Stmt> {
    vec![
        Stmt::Comment("every split arrived: leave the semaphore zeroed for the next launch".into()),
        Stmt::If {
            cond: format!("threadIdx.x == {leader}"),
            then: vec![Stmt::assign("sem[tile]", "0")],
            otherwise: vec![],
        },
    ]
}

fn s(line: impl Into<String>) -> Stmt {
    Stmt::Expr(line.into())
}

impl<'a> Emit<'a> {
    fn new(p: &'a AwqMainloop, name: &'a str) -> Result<Emit<'a>, GemmError> {
        let (ty, ty2) = match p.config.element {
            Element::F16 => ("__half", "__half2"),
            Element::BF16 => ("__nv_bfloat16", "__nv_bfloat162"),
            other => {
                return Err(GemmError::Config(format!(
                    "AWQ activations must be f16 or bf16, got {other}"
                )))
            }
        };
        Ok(Emit { p, name, ty, ty2 })
    }

    /// `{name}_store`: eight f32 values of columns `8 wc .. 8 wc + 8` of one row, plus the
    /// bias, to 16-bit outputs in one 16-byte store.
    fn store(&self) -> CFunction {
        let (ty, ty2) = (self.ty, self.ty2);
        let cvt = if ty == "__half" {
            "__floats2half2_rn"
        } else {
            "__floats2bfloat162_rn"
        };
        let to_f = if ty == "__half" {
            "__half2float"
        } else {
            "__bfloat162float"
        };
        CFunction {
            qualifiers: "__device__ __forceinline__".into(),
            ret: "void".into(),
            name: format!("{}_store", self.name),
            params: vec![
                (format!("{ty}* __restrict__"), "out".into()),
                (format!("const {ty}* __restrict__"), "bias".into()),
                ("long long".into(), "off".into()),
                ("int".into(), "col".into()),
                ("float".into(), "(&v)[8]".into()),
            ],
            doc: vec!["out[off .. off + 8] = v (+ bias[col .. col + 8]), rounded once.".into()],
            body: vec![
                Stmt::If {
                    cond: "bias != nullptr".into(),
                    then: vec![
                        Stmt::decl("const uint4", "b4", "*reinterpret_cast<const uint4*>(bias + col)"),
                        Stmt::decl(
                            &format!("const {ty}*"),
                            "b",
                            format!("reinterpret_cast<const {ty}*>(&b4)"),
                        ),
                        Stmt::unrolled("j", 8, vec![s(format!("v[j] += {to_f}(b[j])"))]),
                    ],
                    otherwise: vec![],
                },
                Stmt::Array {
                    ty: "uint32_t".into(),
                    name: "o".into(),
                    len: 4,
                    comment: Some("pairs of adjacent columns".into()),
                },
                Stmt::unrolled(
                    "i",
                    4,
                    vec![
                        Stmt::decl(&format!("const {ty2}"), "h", format!("{cvt}(v[2 * i], v[2 * i + 1])")),
                        Stmt::assign("o[i]", "*reinterpret_cast<const uint32_t*>(&h)"),
                    ],
                ),
                Stmt::assign(
                    "*reinterpret_cast<uint4*>(out + off)",
                    "make_uint4(o[0], o[1], o[2], o[3])",
                ),
            ],
        }
    }

    /// The loop nest over a lane's outputs: m16 tile `mi`, slice `si`, row half `h` and
    /// word `u` (accumulators `2h + u` of the slice's eight n8 tiles are the columns
    /// `8 wc .. 8 wc + 8`, see `AwqMainloop::acc_column`), running `body` where `row` and
    /// `wc` are in bounds.
    fn output_nest(&self, body: Vec<Stmt>) -> Stmt {
        let inner = vec![
            Stmt::decl("const int", "row", "m0 + wrow + 16 * mi + g + 8 * h"),
            Stmt::decl("const int", "wc", "n0w + wword + 8 * si + 2 * t + u"),
            Stmt::If {
                cond: "row < M && wc < N8".into(),
                then: body,
                otherwise: vec![],
            },
        ];
        let u = Stmt::unrolled("u", 2, inner);
        let h = Stmt::unrolled("h", 2, vec![u]);
        let si = Stmt::unrolled("si", self.p.ns, vec![h]);
        Stmt::unrolled("mi", self.p.mi, vec![si])
    }

    /// The epilogue: direct stores with one split; with several, partial tiles to the
    /// workspace and the last split's reduction.
    fn epilogue(&self) -> Vec<Stmt> {
        let store = format!("{}_store", self.name);
        let gather = vec![
            Stmt::Decl {
                ty: "float".into(),
                name: "v[8]".into(),
                init: None,
                comment: Some("columns 8 wc + j: accumulator 2h + u of n8 tile j".into()),
            },
            Stmt::unrolled("j", 8, vec![Stmt::assign("v[j]", "acc[mi][si][j][2 * h + u]")]),
            Stmt::If {
                cond: "splits == 1".into(),
                then: vec![s(format!(
                    "{store}(out, bias, (long long)row * ldo + 8 * wc, 8 * wc, v)"
                ))],
                otherwise: vec![
                    Stmt::Comment("this split's f32 partial tile to its slab blockIdx.z of the [splits, M, N] workspace (kept in L2)".into()),
                    Stmt::decl(
                        "float4*",
                        "w",
                        "reinterpret_cast<float4*>(ws + ((long long)blockIdx.z * M + row) * N + 8 * wc)",
                    ),
                    s("__stcg(w, make_float4(v[0], v[1], v[2], v[3]))"),
                    s("__stcg(w + 1, make_float4(v[4], v[5], v[6], v[7]))"),
                ],
            },
        ];
        let reduce = self.slab_sum(&store);
        vec![
            Stmt::Comment(
                "Epilogue: lane (g, t) holds columns 8 wc .. 8 wc + 16 of rows g and g + 8 per m16 tile".into(),
            ),
            self.output_nest(gather),
            Stmt::If {
                cond: "splits == 1".into(),
                then: vec![Stmt::Return],
                otherwise: vec![],
            },
        ]
        .into_iter()
        .chain(split_gate(&self.cta_sync()))
        .chain([self.output_nest(reduce)])
        .chain(semaphore_reset("0"))
        .collect()
    }

    /// The last split's reduction of one lane's eight columns: the slabs `0 .. splits` of
    /// the `[splits, M, N]` f32 workspace added in that fixed order (whichever split
    /// arrives last, so repeated runs are bit-identical), four slabs' loads in flight at
    /// a time, then the bias and the 16-bit store.
    fn slab_sum(&self, store: &str) -> Vec<Stmt> {
        let add = (0..8)
            .map(|j| {
                let (half, c) = (if j < 4 { "lo" } else { "hi" }, ["x", "y", "z", "w"][j % 4]);
                format!("v[{j}] += {half}[j].{c}")
            })
            .map(s)
            .collect::<Vec<_>>();
        let slab = |p: &str| format!("reinterpret_cast<const float4*>(ws + ((long long)({p}) * M + row) * N + 8 * wc)");
        vec![
            Stmt::Comment("every split's slab is in: sum them through L2 in slab order".into()),
            Stmt::decl("float", "v[8]", "{0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}"),
            Stmt::Loop {
                init: "int p0 = 0".into(),
                cond: "p0 < splits".into(),
                step: "p0 += 4".into(),
                body: vec![
                    Stmt::Decl {
                        ty: "float4".into(),
                        name: "lo[4], hi[4]".into(),
                        init: None,
                        comment: Some("columns 8 wc .. 8 wc + 4 and + 4 .. + 8 of slabs p0 .. p0 + 4".into()),
                    },
                    Stmt::unrolled(
                        "j",
                        4,
                        vec![Stmt::If {
                            cond: "p0 + j < splits".into(),
                            then: vec![
                                Stmt::decl("const float4*", "w", slab("p0 + j")),
                                Stmt::assign("lo[j]", "__ldcg(w)"),
                                Stmt::assign("hi[j]", "__ldcg(w + 1)"),
                            ],
                            otherwise: vec![],
                        }],
                    ),
                    Stmt::unrolled(
                        "j",
                        4,
                        vec![Stmt::If {
                            cond: "p0 + j < splits".into(),
                            then: add,
                            otherwise: vec![],
                        }],
                    ),
                ],
            },
            s(format!("{store}(out, bias, (long long)row * ldo + 8 * wc, 8 * wc, v)")),
        ]
    }

    /// The kernel function around `body`.
    fn kernel_function(&self, body: Vec<Stmt>) -> CFunction {
        let (p, ty) = (self.p, self.ty);
        CFunction {
            qualifiers: match min_blocks(p) {
                Some(b) => format!("extern \"C\" __global__ __launch_bounds__({}, {b})", p.threads),
                None => format!("extern \"C\" __global__ __launch_bounds__({})", p.threads),
            },
            ret: "void".into(),
            name: self.name.into(),
            params: vec![
                (format!("const {ty}* __restrict__"), "x".into()),
                ("const uint32_t* __restrict__".into(), "qweight".into()),
                (format!("const {ty}* __restrict__"), "scales".into()),
                ("const uint32_t* __restrict__".into(), "qzeros".into()),
                (format!("const {ty}* __restrict__"), "bias".into()),
                (format!("{ty}* __restrict__"), "out".into()),
                ("float* __restrict__".into(), "ws".into()),
                ("int* __restrict__".into(), "sem".into()),
                ("int".into(), "M".into()),
                ("int".into(), "N".into()),
                ("int".into(), "K".into()),
                ("int".into(), "G".into()),
                ("long long".into(), "ldx".into()),
                ("long long".into(), "ldo".into()),
                ("int".into(), "splits".into()),
                ("int".into(), "kt_per_split".into()),
            ],
            doc: vec!["out = x @ ((q - z) * s) (+ bias); grid (N tiles, M tiles, K splits).".into()],
            body,
        }
    }
}

/// The weight's part of a producer stage of the SM90 wgmma kernel (the prepared layout in
/// `wgmma.rs`, the checkpoint's words in `wgmma_checkpoint.rs`): the declaration of the
/// count its transaction bytes use (emitted before them), the bytes (an expression) and
/// the copies.
struct StageWeight {
    count: Stmt,
    bytes: String,
    copies: Vec<Stmt>,
}
