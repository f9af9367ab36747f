//! The persistent tile scheduler of the SM90 GEMM kernels: a host model and the device code
//! generated from the same parameters.
//!
//! A persistent kernel launches about one CTA per SM and lets every CTA walk over output
//! tiles. The walk is expressed in *work ids*, and one work id stands for one cluster-sized
//! block of output tiles (`cluster[0]` tiles along M by `cluster[1]` along N) in one batch:
//!
//! * a CTA starts at the index of its cluster in the grid ([`TileScheduler::first_work`]) and
//!   strides by the number of clusters launched ([`TileScheduler::work_stride`]);
//! * the CTA of rank `(rm, rn)` in its cluster takes the tile at `(rm, rn)` inside the block
//!   ([`TileScheduler::tile`]), so TMA multicast partners share their tile row or column.
//!
//! Work ids are laid out as CUTLASS's `PersistentTileSchedulerSm90` lays them out. The raster
//! order names the *major* direction, the one consecutive clusters walk along: along N
//! (N major, M minor) or along M. Swizzling groups the clusters in bands of
//! `1 << swizzle_log2` clusters across the minor direction: the low `swizzle_log2` bits of a
//! cluster's id pick its place inside the band, the rest walk along the major direction and
//! then on to the next band, so consecutive work ids stay within a narrow, L2-friendly
//! stripe of A and B. The cluster counts are padded to whole bands; work ids that land on
//! padding (or on tiles of a cluster that overhangs the problem's edge) have no tile.
//!
//! [`TileScheduler::params`] resolves the raster order and the effective swizzle for one
//! problem on the host ([`SchedulerParams`], passed to the kernel as plain ints by
//! [`SchedulerParams::device_args`]); [`TileScheduler::grid`] sizes the persistent grid and
//! [`TileScheduler::device_code`] renders the same mapping as a CUDA C++ struct.
//!
//! ```
//! use rcute_kernel::tile_scheduler::{RasterOrder, RasterOrderOption, TileScheduler};
//!
//! # fn main() -> Result<(), rcute_kernel::tile_scheduler::SchedulerError> {
//! let sched = TileScheduler { raster: RasterOrderOption::Heuristic, swizzle_log2: 1, cluster: [2, 1] };
//! let p = sched.params(1000, 3000, 1, 128, 128)?; // 8 x 24 tiles of 128 x 128
//! assert_eq!((p.tiles_m, p.tiles_n, p.swizzle_log2), (8, 24, 1));
//! assert_eq!(p.raster, RasterOrder::AlongM); // more tiles along N: walk along M
//! let grid = sched.grid(&p, 132, None)?; // 66 clusters of 2 x 1 CTAs, clusters contiguous in x
//! assert_eq!(grid, (132, 1, 1));
//!
//! // Every CTA's persistent loop; together they visit each output tile once.
//! let mut seen = vec![0; 8 * 24];
//! for bx in 0..grid.0 {
//!     let (mut work, rank) = sched.first_work(&p, (bx, 0, 0), grid);
//!     while work < p.total_work {
//!         if let Some((m, n, _batch)) = sched.tile(&p, work, rank) {
//!             seen[(m * 24 + n) as usize] += 1;
//!         }
//!         work += sched.work_stride(&p, grid);
//!     }
//! }
//! assert!(seen.iter().all(|&k| k == 1));
//! assert!(sched.device_code("gemm").contains("struct gemm_sched {"));
//! # Ok(())
//! # }
//! ```

use crate::emit::Item;

/// Largest cluster Hopper launches (with the non-portable cluster size opt-in).
pub const MAX_CLUSTER_CTAS: u32 = 16;

/// Widest swizzle band CUTLASS uses: `1 << 3` clusters.
pub const MAX_SWIZZLE_LOG2: u32 = 3;

/// Largest `gridDim.y` (and `gridDim.z`) a launch accepts.
const MAX_GRID_Y: u32 = 65_535;

/// Largest `gridDim.x` a launch accepts.
const MAX_GRID_X: u32 = i32::MAX as u32;

/// The direction consecutive work ids walk along (the *major* direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RasterOrder {
    /// M is major: consecutive clusters move down a column of tiles, N is the minor direction.
    AlongM,
    /// N is major: consecutive clusters move along a row of tiles, M is the minor direction.
    AlongN,
}

impl RasterOrder {
    /// The integer the device code takes for it: 1 for [`RasterOrder::AlongN`], 0 for
    /// [`RasterOrder::AlongM`].
    pub fn device_int(self) -> i32 {
        match self {
            RasterOrder::AlongM => 0,
            RasterOrder::AlongN => 1,
        }
    }
}

/// The raster order a scheduler is configured with: fixed, or chosen per problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RasterOrderOption {
    /// Always [`RasterOrder::AlongM`].
    AlongM,
    /// Always [`RasterOrder::AlongN`].
    AlongN,
    /// CUTLASS's rule ([`RasterOrderOption::resolve`]).
    #[default]
    Heuristic,
}

impl RasterOrderOption {
    /// The raster order for a problem of `ctas_m` by `ctas_n` CTA tiles, counted as CUTLASS
    /// counts them in `get_rasterization_order` (tile_scheduler_params.h): after padding to
    /// whole clusters and whole swizzle bands. The heuristic walks along M when there are
    /// strictly more tiles along N than along M, and along N otherwise (ties included).
    pub fn resolve(self, ctas_m: u64, ctas_n: u64) -> RasterOrder {
        match self {
            RasterOrderOption::AlongM => RasterOrder::AlongM,
            RasterOrderOption::AlongN => RasterOrder::AlongN,
            RasterOrderOption::Heuristic if ctas_n > ctas_m => RasterOrder::AlongM,
            RasterOrderOption::Heuristic => RasterOrder::AlongN,
        }
    }
}

/// Why a scheduler or a problem cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    /// A CTA tile extent is zero.
    #[error("tile shape {tile_m}x{tile_n} has a zero extent")]
    ZeroTile {
        /// Tile extent along M.
        tile_m: u32,
        /// Tile extent along N.
        tile_n: u32,
    },
    /// The problem has no output tile (M, N or L is zero): there is nothing to launch.
    #[error("problem {m}x{n} with {l} batch(es) has no output tiles")]
    EmptyProblem {
        /// Rows of the output.
        m: u64,
        /// Columns of the output.
        n: u64,
        /// Batches.
        l: u64,
    },
    /// A cluster extent is zero.
    #[error("cluster shape {}x{} has a zero extent", cluster[0], cluster[1])]
    ZeroCluster {
        /// The cluster shape `(cluster_m, cluster_n)`.
        cluster: [u32; 2],
    },
    /// A cluster extent is not a power of two (the scheduler divides by shifts, as CUTLASS's).
    #[error("cluster shape {}x{} is not a power of two along each mode", cluster[0], cluster[1])]
    ClusterNotPowerOfTwo {
        /// The cluster shape `(cluster_m, cluster_n)`.
        cluster: [u32; 2],
    },
    /// The cluster has more CTAs than Hopper launches in one cluster.
    #[error("cluster shape {}x{} has more than {MAX_CLUSTER_CTAS} CTAs", cluster[0], cluster[1])]
    ClusterTooLarge {
        /// The cluster shape `(cluster_m, cluster_n)`.
        cluster: [u32; 2],
    },
    /// A count does not fit the device code's integers (32-bit tile coordinates and batch
    /// indices, 63-bit work ids).
    #[error("{what} = {value} exceeds {limit}")]
    Overflow {
        /// What overflowed.
        what: &'static str,
        /// Its value (saturated at `u64::MAX`).
        value: u64,
        /// The largest value allowed.
        limit: u64,
    },
    /// Not one whole cluster fits on the device.
    #[error("no cluster of {cluster_ctas} CTAs fits on {sm_count} SMs")]
    NoClusterFits {
        /// CTAs per cluster.
        cluster_ctas: u32,
        /// SMs available.
        sm_count: u32,
    },
    /// The parameters were not produced by [`TileScheduler::params`] (a zero cluster, a
    /// swizzle past [`MAX_SWIZZLE_LOG2`], or no work).
    #[error("inconsistent scheduler parameters: {0}")]
    InvalidParams(&'static str),
}

/// The persistent tile scheduler's configuration (CUTLASS: the scheduler's arguments plus
/// the kernel's cluster shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TileScheduler {
    /// The raster order, fixed or chosen per problem.
    pub raster: RasterOrderOption,
    /// The widest swizzle band wanted, as a power of two: `max_swizzle_size = 1 << swizzle_log2`
    /// clusters. Small problems get a narrower band, and CUTLASS never goes past
    /// [`MAX_SWIZZLE_LOG2`].
    pub swizzle_log2: u32,
    /// The cluster shape `(cluster_m, cluster_n)` in CTAs, `clusterDim = (cluster_m, cluster_n, 1)`.
    pub cluster: [u32; 2],
}

impl Default for TileScheduler {
    /// CUTLASS's defaults: heuristic raster order, no swizzle, one-CTA clusters.
    fn default() -> Self {
        TileScheduler {
            raster: RasterOrderOption::Heuristic,
            swizzle_log2: 0,
            cluster: [1, 1],
        }
    }
}

/// A [`TileScheduler`] resolved for one problem on the host, passed to the kernel as ints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchedulerParams {
    /// Output tiles along M: `ceil(m / tile_m)` (the problem's, not padded).
    pub tiles_m: u32,
    /// Output tiles along N: `ceil(n / tile_n)`.
    pub tiles_n: u32,
    /// Batches (L).
    pub batches: u32,
    /// The raster order chosen for this problem.
    pub raster: RasterOrder,
    /// The effective swizzle: bands of `1 << swizzle_log2` clusters (at most the configured one).
    pub swizzle_log2: u32,
    /// The cluster shape `(cluster_m, cluster_n)`.
    pub cluster: [u32; 2],
    /// Work ids in the problem, batches included: clusters of tiles over the tile counts padded
    /// to whole clusters and whole swizzle bands, times the batches. A persistent loop runs while
    /// its work id is below this. It is at least the number of output tiles divided by the
    /// cluster size; some ids land on padding and have no tile.
    pub total_work: u64,
}

impl SchedulerParams {
    /// The kernel arguments of the device struct's constructor, in order: `tiles_m`, `tiles_n`,
    /// `batches`, `along_n` ([`RasterOrder::device_int`]), `log_swizzle`.
    pub fn device_args(&self) -> [i32; 5] {
        let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        [
            int(self.tiles_m),
            int(self.tiles_n),
            int(self.batches),
            self.raster.device_int(),
            int(self.swizzle_log2),
        ]
    }

    /// The launch's cluster dimensions, `(cluster_m, cluster_n, 1)`.
    pub fn cluster_dim(&self) -> (u32, u32, u32) {
        (self.cluster[0], self.cluster[1], 1)
    }

    /// Output tiles in the problem, batches included.
    pub fn output_tiles(&self) -> u64 {
        u64::from(self.tiles_m) * u64::from(self.tiles_n) * u64::from(self.batches)
    }

    /// The quantities the mapping works with, or `None` for parameters [`TileScheduler::params`]
    /// cannot have produced.
    fn derive(&self) -> Option<Derived> {
        let [cm, cn] = self.cluster.map(u64::from);
        if cm == 0 || cn == 0 || self.swizzle_log2 > MAX_SWIZZLE_LOG2 {
            return None;
        }
        let band = 1u64 << self.swizzle_log2;
        // Clusters along each mode, padded to whole bands (CUTLASS pads both modes).
        let clusters_m = u64::from(self.tiles_m).div_ceil(cm * band) * band;
        let clusters_n = u64::from(self.tiles_n).div_ceil(cn * band) * band;
        let (major, minor) = match self.raster {
            RasterOrder::AlongN => (clusters_n, clusters_m),
            RasterOrder::AlongM => (clusters_m, clusters_n),
        };
        let work_per_batch = major * minor;
        (work_per_batch > 0).then_some(Derived {
            cm,
            cn,
            clusters_major: major,
            work_per_batch,
        })
    }
}

/// What [`SchedulerParams::derive`] computes.
struct Derived {
    cm: u64,
    cn: u64,
    /// Clusters along the major direction (padded to whole bands).
    clusters_major: u64,
    /// Work ids in one batch.
    work_per_batch: u64,
}

/// CUTLASS's clamp of the swizzle (`get_log_swizzle_size`): a band of 8 clusters needs at
/// least 6 CTA tiles along both modes, a band of 4 at least 3, a band of 2 at least 2.
/// `ctas_m`, `ctas_n` are the tile counts padded to whole clusters.
fn effective_swizzle_log2(max_log2: u32, ctas_m: u64, ctas_n: u64) -> u32 {
    let min = ctas_m.min(ctas_n);
    match max_log2 {
        3.. if min >= 6 => 3,
        2.. if min >= 3 => 2,
        1.. if min >= 2 => 1,
        _ => 0,
    }
}

fn overflow(what: &'static str, value: Option<u64>, limit: u64) -> SchedulerError {
    SchedulerError::Overflow {
        what,
        value: value.unwrap_or(u64::MAX),
        limit,
    }
}

impl TileScheduler {
    /// A scheduler with the given cluster shape and CUTLASS's defaults otherwise.
    pub fn new(cluster: [u32; 2]) -> Self {
        TileScheduler {
            cluster,
            ..TileScheduler::default()
        }
    }

    /// Checks the cluster shape: non-zero, powers of two, at most [`MAX_CLUSTER_CTAS`] CTAs.
    pub fn validate(&self) -> Result<(), SchedulerError> {
        let cluster = self.cluster;
        if cluster.contains(&0) {
            return Err(SchedulerError::ZeroCluster { cluster });
        }
        if !cluster.iter().all(|c| c.is_power_of_two()) {
            return Err(SchedulerError::ClusterNotPowerOfTwo { cluster });
        }
        if u64::from(cluster[0]) * u64::from(cluster[1]) > u64::from(MAX_CLUSTER_CTAS) {
            return Err(SchedulerError::ClusterTooLarge { cluster });
        }
        Ok(())
    }

    /// Resolves the scheduler for an `m x n` output with `l` batches, tiled by `tile_m x tile_n`
    /// CTA tiles, as CUTLASS's `PersistentTileSchedulerSm90Params::initialize` does:
    ///
    /// 1. tile counts `ceil(m / tile_m)`, `ceil(n / tile_n)`, padded to whole clusters;
    /// 2. the swizzle clamped for small problems (a band of `2^k` clusters needs enough tiles
    ///    along both modes: 2 for `k = 1`, 3 for `k = 2`, 6 for `k = 3`, never more than 3);
    /// 3. the counts padded to whole bands of clusters;
    /// 4. the raster order from the padded counts ([`RasterOrderOption::resolve`]).
    ///
    /// Errors on a bad cluster shape ([`TileScheduler::validate`]), a zero tile, an empty problem,
    /// or counts past the device code's integers.
    pub fn params(&self, m: u64, n: u64, l: u64, tile_m: u32, tile_n: u32) -> Result<SchedulerParams, SchedulerError> {
        self.validate()?;
        if tile_m == 0 || tile_n == 0 {
            return Err(SchedulerError::ZeroTile { tile_m, tile_n });
        }
        if m == 0 || n == 0 || l == 0 {
            return Err(SchedulerError::EmptyProblem { m, n, l });
        }
        let [cm, cn] = self.cluster.map(u64::from);
        let tiles_m = m.div_ceil(u64::from(tile_m));
        let tiles_n = n.div_ceil(u64::from(tile_n));
        let int_max = i32::MAX as u64;
        let ctas_m = tiles_m
            .checked_next_multiple_of(cm)
            .ok_or_else(|| overflow("padded tiles along M", None, int_max))?;
        let ctas_n = tiles_n
            .checked_next_multiple_of(cn)
            .ok_or_else(|| overflow("padded tiles along N", None, int_max))?;
        let swizzle_log2 = effective_swizzle_log2(self.swizzle_log2, ctas_m, ctas_n);
        let band = 1u64 << swizzle_log2;
        let padded_m = ctas_m.checked_next_multiple_of(cm * band);
        let padded_n = ctas_n.checked_next_multiple_of(cn * band);
        // Tile coordinates are 32-bit ints on the device, padding included.
        let padded_m = padded_m
            .filter(|&v| v <= int_max)
            .ok_or_else(|| overflow("padded tiles along M", padded_m, int_max))?;
        let padded_n = padded_n
            .filter(|&v| v <= int_max)
            .ok_or_else(|| overflow("padded tiles along N", padded_n, int_max))?;
        if l > int_max {
            return Err(overflow("batches", Some(l), int_max));
        }
        let work_limit = i64::MAX as u64;
        let total_work = (padded_m / cm)
            .checked_mul(padded_n / cn)
            .and_then(|w| w.checked_mul(l));
        let total_work = total_work
            .filter(|&w| w <= work_limit)
            .ok_or_else(|| overflow("work ids", total_work, work_limit))?;
        // All three are at most `padded_*` or `l`, checked above to fit an i32.
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Ok(SchedulerParams {
            tiles_m: narrow(tiles_m),
            tiles_n: narrow(tiles_n),
            batches: narrow(l),
            raster: self.raster.resolve(padded_m, padded_n),
            swizzle_log2,
            cluster: self.cluster,
            total_work,
        })
    }

    /// The persistent grid for `p` on a device of `sm_count` SMs, as `(x, y, z)`.
    ///
    /// Clusters launched: the `max_active_clusters` the occupancy API reported when it is given,
    /// non-zero and fits on `sm_count` SMs (CUTLASS ignores it for one-CTA clusters), else as
    /// many whole clusters as `sm_count` SMs hold; never more than `p.total_work`. The grid is
    /// laid out as CUTLASS lays it out, every cluster contiguous for a launch with
    /// `clusterDim = (cluster_m, cluster_n, 1)` ([`SchedulerParams::cluster_dim`]): along N,
    /// `(cluster_m, clusters * cluster_n, 1)`; along M, `(clusters * cluster_m, cluster_n, 1)`.
    /// The scheduler's first work id and stride work for any grid whose x and y are multiples
    /// of the cluster shape.
    ///
    /// `self` only names the scheduler `p` came from: every number is read from `p`.
    pub fn grid(
        &self,
        p: &SchedulerParams,
        sm_count: u32,
        max_active_clusters: Option<u32>,
    ) -> Result<(u32, u32, u32), SchedulerError> {
        let d = p.derive().ok_or(SchedulerError::InvalidParams(
            "zero cluster or swizzle past the maximum",
        ))?;
        if p.total_work == 0 {
            return Err(SchedulerError::InvalidParams("no work"));
        }
        let cluster_ctas = d.cm * d.cn;
        let fits = |c: u32| c > 0 && u64::from(c) * cluster_ctas <= u64::from(sm_count);
        let available = match max_active_clusters {
            Some(c) if cluster_ctas > 1 && fits(c) => u64::from(c),
            _ => u64::from(sm_count) / cluster_ctas,
        };
        if available == 0 {
            let cluster_ctas = u32::try_from(cluster_ctas).unwrap_or(u32::MAX);
            return Err(SchedulerError::NoClusterFits { cluster_ctas, sm_count });
        }
        // At most `sm_count` CTAs in all, so every product below fits a u32.
        let clusters = available.min(p.total_work);
        let (x, y) = match p.raster {
            RasterOrder::AlongN => (d.cm, clusters * d.cn),
            RasterOrder::AlongM => (clusters * d.cm, d.cn),
        };
        if y > u64::from(MAX_GRID_Y) {
            return Err(overflow("grid y", Some(y), u64::from(MAX_GRID_Y)));
        }
        if x > u64::from(MAX_GRID_X) {
            return Err(overflow("grid x", Some(x), u64::from(MAX_GRID_X)));
        }
        Ok((x as u32, y as u32, 1))
    }

    /// The first work id of the CTA at `block_idx` of `grid` and its rank `(rank_m, rank_n)` in
    /// its cluster: the cluster's index in the grid (x fastest) and
    /// `(block_idx.x % cluster_m, block_idx.y % cluster_n)`. The device's `first_work()` and
    /// `rank_m()`/`rank_n()`.
    pub fn first_work(
        &self,
        p: &SchedulerParams,
        block_idx: (u32, u32, u32),
        grid: (u32, u32, u32),
    ) -> (u64, (u32, u32)) {
        let [cm, cn] = p.cluster.map(|c| c.max(1));
        let clusters_x = u64::from(grid.0 / cm);
        let clusters_y = u64::from(grid.1 / cn);
        // Wrapping, as the device's `unsigned long long` (only reachable with grids past CUDA's limits).
        let first = u64::from(block_idx.0 / cm)
            .wrapping_add(u64::from(block_idx.1 / cn).wrapping_mul(clusters_x))
            .wrapping_add(u64::from(block_idx.2).wrapping_mul(clusters_x).wrapping_mul(clusters_y));
        (first, (block_idx.0 % cm, block_idx.1 % cn))
    }

    /// Work ids between two consecutive tiles of one CTA: the number of clusters in `grid`.
    /// The device's `stride()`.
    pub fn work_stride(&self, p: &SchedulerParams, grid: (u32, u32, u32)) -> u64 {
        let [cm, cn] = p.cluster.map(|c| c.max(1));
        u64::from(grid.0 / cm)
            .wrapping_mul(u64::from(grid.1 / cn))
            .wrapping_mul(u64::from(grid.2))
    }

    /// The output tile `(tile_m, tile_n, batch)` of work id `linear_work` for the CTA of rank
    /// `cta_in_cluster = (rank_m, rank_n)` in its cluster; `None` when the id is past
    /// `p.total_work`, the rank is outside the cluster, or the tile lies outside the problem
    /// (swizzle padding, or a cluster overhanging the edge). The CTAs of one cluster get the
    /// tiles `(cm * i + rank_m, cn * j + rank_n)` of one cluster block `(i, j)`.
    ///
    /// The cluster block of a work id is the rank-`(0, 0)` tile divided by the cluster shape;
    /// `tile(p, w, (0, 0)).is_some()` tells whether any tile of the block is in the problem
    /// (the device's `cluster_valid`).
    ///
    /// `self` only names the scheduler `p` came from: every number is read from `p`.
    pub fn tile(&self, p: &SchedulerParams, linear_work: u64, cta_in_cluster: (u32, u32)) -> Option<(u32, u32, u32)> {
        let d = p.derive()?;
        let (rank_m, rank_n) = (u64::from(cta_in_cluster.0), u64::from(cta_in_cluster.1));
        if linear_work >= p.total_work || rank_m >= d.cm || rank_n >= d.cn {
            return None;
        }
        let batch = linear_work / d.work_per_batch;
        if batch >= u64::from(p.batches) {
            return None;
        }
        let cluster_id = linear_work % d.work_per_batch;
        // The low bits place the cluster inside its band across the minor direction; the rest
        // counts clusters along the major direction, then bands.
        let log = p.swizzle_log2;
        let in_band = cluster_id & ((1u64 << log) - 1);
        let rest = cluster_id >> log;
        let cluster_major = rest % d.clusters_major;
        let cluster_minor = ((rest / d.clusters_major) << log) + in_band;
        let (tile_m, tile_n) = match p.raster {
            RasterOrder::AlongN => (cluster_minor * d.cm + rank_m, cluster_major * d.cn + rank_n),
            RasterOrder::AlongM => (cluster_major * d.cm + rank_m, cluster_minor * d.cn + rank_n),
        };
        if tile_m >= u64::from(p.tiles_m) || tile_n >= u64::from(p.tiles_n) {
            return None;
        }
        // Below `tiles_m`, `tiles_n` and `batches`, all u32.
        Some((tile_m as u32, tile_n as u32, batch as u32))
    }

    /// The device code: a `struct {fn_prefix}_sched` with the cluster shape as compile-time
    /// constants and the per-problem parameters ([`SchedulerParams::device_args`]) taken by its
    /// constructor. It implements exactly the mapping of [`TileScheduler::first_work`],
    /// [`TileScheduler::work_stride`] and [`TileScheduler::tile`]:
    ///
    /// ```text
    /// __device__ {p}_sched(int tiles_m, int tiles_n, int batches, int along_n, int log_swizzle);
    /// unsigned long long total_work;                        // loop bound
    /// __device__ unsigned long long first_work() const;     // and first_work(bx, by, bz, gx, gy)
    /// __device__ unsigned long long stride() const;         // and stride(gx, gy, gz)
    /// __device__ int rank_m() const;  __device__ int rank_n() const;
    /// __device__ bool cluster_valid(unsigned long long work) const;
    /// __device__ bool tile(unsigned long long work, int& tile_m, int& tile_n, int& batch) const;
    /// __device__ bool tile(unsigned long long work, int rank_m, int rank_n,
    ///                      int& tile_m, int& tile_n, int& batch) const;
    /// ```
    ///
    /// `fn_prefix` must be a C identifier. The code needs no header and compiles under NVRTC.
    pub fn device_code(&self, fn_prefix: &str) -> String {
        let [cm, cn] = self.cluster;
        DEVICE_TEMPLATE
            .trim_start()
            .replace("@NAME@", &format!("{fn_prefix}_sched"))
            .replace("@CM@", &cm.to_string())
            .replace("@CN@", &cn.to_string())
    }

    /// [`TileScheduler::device_code`] as an [`Item::Snippet`] for an [`crate::emit::Unit`].
    pub fn device_item(&self, fn_prefix: &str) -> Item {
        Item::Snippet {
            origin: "rcute_kernel::tile_scheduler".into(),
            code: self.device_code(fn_prefix),
        }
    }
}

/// The device struct; `@NAME@`, `@CM@` and `@CN@` are filled in by [`TileScheduler::device_code`].
const DEVICE_TEMPLATE: &str = r#"
// Persistent tile scheduler @NAME@ (rcute_kernel::tile_scheduler) for @CM@x@CN@ CTA clusters.
// A work id stands for one cluster-sized block of output tiles in one batch. A CTA starts at its
// cluster's index in the grid and strides by the number of clusters launched; the CTA of rank
// (rank_m, rank_n) in its cluster takes the tile at (rank_m, rank_n) inside the block. Raster
// order and swizzle are resolved per problem on the host and passed in as ints.
//
// The persistent loop:
//   @NAME@ sched(tiles_m, tiles_n, batches, along_n, log_swizzle);
//   for (unsigned long long work = sched.first_work(); work < sched.total_work;
//        work += sched.stride()) {
//     if (!sched.cluster_valid(work)) continue;  // the whole cluster is in padding
//     int tile_m, tile_n, batch;
//     const bool mine = sched.tile(work, tile_m, tile_n, batch);
//     ...  // mine == false: this CTA's tile is past the edge, a partner's may not be
//   }
struct @NAME@ {
  static constexpr int kClusterM = @CM@;  // clusterDim.x: CTAs of a cluster along M
  static constexpr int kClusterN = @CN@;  // clusterDim.y: CTAs of a cluster along N

  int tiles_m;                        // output tiles along M (the problem's, not padded)
  int tiles_n;                        // output tiles along N
  int batches;                        // batches (L)
  int along_n;                        // 1: raster along N (N major, M minor); 0: along M
  int log_swizzle;                    // bands of (1 << log_swizzle) clusters across the minor mode
  unsigned long long clusters_major;  // clusters along the major mode, padded to whole bands
  unsigned long long work_per_batch;  // work ids per batch: padded clusters along M times along N
  unsigned long long total_work;      // work ids in all batches: the persistent loop's bound

  __device__ __forceinline__ @NAME@(int tiles_m_, int tiles_n_, int batches_, int along_n_, int log_swizzle_)
      : tiles_m(tiles_m_), tiles_n(tiles_n_), batches(batches_), along_n(along_n_), log_swizzle(log_swizzle_) {
    // Clusters along each mode, padded to whole bands so that every work id decodes.
    const unsigned long long band = 1ull << log_swizzle;
    const unsigned long long span_m = band * kClusterM;
    const unsigned long long span_n = band * kClusterN;
    const unsigned long long clusters_m = ((unsigned long long)tiles_m + span_m - 1) / span_m * band;
    const unsigned long long clusters_n = ((unsigned long long)tiles_n + span_n - 1) / span_n * band;
    clusters_major = along_n ? clusters_n : clusters_m;
    work_per_batch = clusters_m * clusters_n;
    total_work = work_per_batch * (unsigned long long)batches;
  }

  // First work id of the CTA at block (bx, by, bz) of a grid (gx, gy, *): its cluster's index.
  __device__ __forceinline__ unsigned long long first_work(unsigned bx, unsigned by, unsigned bz,
                                                           unsigned gx, unsigned gy) const {
    const unsigned long long clusters_x = gx / kClusterM;
    const unsigned long long clusters_y = gy / kClusterN;
    return bx / kClusterM + (by / kClusterN) * clusters_x + bz * clusters_x * clusters_y;
  }
  __device__ __forceinline__ unsigned long long first_work() const {
    return first_work(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y);
  }

  // Work ids between two tiles of one CTA: the number of clusters launched.
  __device__ __forceinline__ unsigned long long stride(unsigned gx, unsigned gy, unsigned gz) const {
    return (unsigned long long)(gx / kClusterM) * (gy / kClusterN) * gz;
  }
  __device__ __forceinline__ unsigned long long stride() const {
    return stride(gridDim.x, gridDim.y, gridDim.z);
  }

  // This CTA's rank in its cluster along M and N.
  __device__ __forceinline__ int rank_m() const { return (int)(blockIdx.x % kClusterM); }
  __device__ __forceinline__ int rank_n() const { return (int)(blockIdx.y % kClusterN); }

  // Tile (tile_m, tile_n, batch) of work id `work` for the CTA of rank (rank_m, rank_n). False when
  // the work id is past the end (the outputs are -1) or the tile lies outside the problem (the
  // outputs are its coordinates in the padded problem).
  __device__ __forceinline__ bool tile(unsigned long long work, int rank_m, int rank_n,
                                      int& tile_m, int& tile_n, int& batch) const {
    if (work >= total_work) {
      tile_m = -1;
      tile_n = -1;
      batch = -1;
      return false;
    }
    batch = (int)(work / work_per_batch);
    const unsigned long long cluster_id = work % work_per_batch;
    // Swizzle: the low log_swizzle bits place the cluster inside its band across the minor mode;
    // the rest counts clusters along the major mode, then whole bands.
    const unsigned long long in_band = cluster_id & ((1ull << log_swizzle) - 1);
    const unsigned long long rest = cluster_id >> log_swizzle;
    const unsigned long long cluster_major = rest % clusters_major;
    const unsigned long long cluster_minor = ((rest / clusters_major) << log_swizzle) + in_band;
    if (along_n) {
      tile_m = (int)(cluster_minor * kClusterM) + rank_m;
      tile_n = (int)(cluster_major * kClusterN) + rank_n;
    } else {
      tile_m = (int)(cluster_major * kClusterM) + rank_m;
      tile_n = (int)(cluster_minor * kClusterN) + rank_n;
    }
    return tile_m < tiles_m && tile_n < tiles_n;
  }
  // The same for this CTA.
  __device__ __forceinline__ bool tile(unsigned long long work, int& tile_m, int& tile_n, int& batch) const {
    return tile(work, rank_m(), rank_n(), tile_m, tile_n, batch);
  }

  // Whether any tile of work id `work`'s cluster block lies in the problem: the same answer for
  // every CTA of a cluster, so that a cluster skips padding together.
  __device__ __forceinline__ bool cluster_valid(unsigned long long work) const {
    int tile_m, tile_n, batch;
    return tile(work, 0, 0, tile_m, tile_n, batch);
  }
};
"#;
