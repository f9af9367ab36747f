//! Hybrid stream-K for the persistent SM90 GEMM: whole waves of data-parallel tiles, then
//! the last partial wave's k-tiles spread evenly over the CTAs, so that no SM idles through
//! a quarter-full last wave (bf16 4096^3 on 132 SMs: 512 tiles = 3.88 waves, 16 SMs idle
//! for a quarter of the kernel; BENCHMARKS.md, "Session 14 (helper hopper5)").
//!
//! A [`StreamKPlan`] is made per launch from the tile scheduler's work ids, the persistent
//! grid and the k-tiles of one tile:
//!
//! * work ids `[0, dp_work)` are whole tiles, walked as before (CTA `u` takes `u`,
//!   `u + ctas`, ...), `dp_work` a whole number of waves;
//! * the last `sk_tiles` work ids (the partial wave) are cut into their `(tile, k-tile)`
//!   iterations, tile-major, and CTA `u < units` takes the contiguous range
//!   `[start(u), start(u + 1))`: `base` or `base + 1` iterations (the first `extra` CTAs one
//!   more). `units = min(ctas, sk_tiles * min(k_tiles, 2))`, so a range never exceeds one
//!   tile's k-tiles (it covers parts of one or two tiles) and never falls below half of
//!   them (a tile has at most three contributors). [`StreamKPlan::with_parts`] cuts finer:
//!   `units = min(ctas, sk_tiles * min(k_tiles, parts))`, ranges of about `1 / parts` of a
//!   tile (at most `parts + 1` contributors), still within two tiles each.
//!
//! A tile cut between several CTAs is reduced without any CTA waiting for another (the
//! CTAs need not be co-resident: two such GEMMs on two streams could otherwise deadlock):
//! every contributor stores its f32 partial sums into its workspace slot
//! ([`StreamKPlan::slot`]) and adds one to the tile's counter; the one that sees
//! `contributors - 1` resets the counter (zero for the next launch, so a CUDA graph
//! replays it) and sums the partials of the tile's contributors in their k order
//! ([`sum_in_k_order`]: the same bits whatever the arrival order), then runs the epilogue.
//!
//! The device walk is [`device_code`]: the same arithmetic as the host model, which the
//! tests also compile as host C++ ([`host_code`]) and compare item by item.
//!
//! ```
//! use rcute_kernel::stream_k::StreamKPlan;
//! // bf16 4096^3 with 128x256 tiles on 132 SMs: 512 tiles of 64 k-tiles
//! let p = StreamKPlan::new(512, 132, 64).unwrap();
//! assert_eq!((p.dp_work(), p.sk_tiles, p.units), (396, 116, 132));
//! // 116 * 64 = 7424 iterations: 56 or 57 per CTA, after its 3 whole tiles
//! assert_eq!((p.base(), p.extra()), (56, 32));
//! let items = p.items(0);
//! assert_eq!(items.len(), 4);
//! assert_eq!((items[3].work, items[3].k_begin, items[3].k_end), (396, 0, 57));
//! ```

use crate::emit::Item;

/// Why a stream-K plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamKError {
    /// No work ids or no CTAs.
    #[error("stream-K needs work and CTAs, got {work} work ids on {ctas} CTAs")]
    Empty {
        /// Work ids.
        work: u64,
        /// CTAs.
        ctas: u32,
    },
    /// The device walk counts iterations and work ids in 32-bit ints.
    #[error("{what} = {value} exceeds the device walk's 32-bit range")]
    Overflow {
        /// What overflowed.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// The workspace or the counters given are smaller than the plan needs.
    #[error("stream-K needs {need} bytes of {what}, got {have}")]
    TooSmall {
        /// Workspace or counters.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
}

/// One work item of a CTA: work id `work` over k-tiles `[k_begin, k_end)` of its tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkItem {
    /// The tile scheduler's work id.
    pub work: u64,
    /// First k-tile.
    pub k_begin: u32,
    /// One past the last k-tile.
    pub k_end: u32,
}

/// The hybrid stream-K plan of one launch (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKPlan {
    /// The tile scheduler's work ids (`total_work`).
    pub work: u64,
    /// Persistent CTAs launched (the walk's stride), at most `work`.
    pub ctas: u32,
    /// k-tiles of one tile.
    pub k_tiles: u32,
    /// The last `sk_tiles` work ids are split into k ranges (0: data-parallel only).
    pub sk_tiles: u32,
    /// CTAs `0..units` share the stream-K iterations.
    pub units: u32,
}

impl StreamKPlan {
    /// The plan for `work` work ids on `ctas` persistent CTAs (capped at `work`) with
    /// `k_tiles` k-tiles per tile. Data-parallel only (`sk_tiles = 0`) when the work is a
    /// whole number of waves or there are no k-tiles.
    pub fn new(work: u64, ctas: u32, k_tiles: u32) -> Result<StreamKPlan, StreamKError> {
        StreamKPlan::with_parts(work, ctas, k_tiles, 2)
    }

    /// [`StreamKPlan::new`] with the stream-K tiles cut into up to `parts` ranges each (at
    /// least 2; a finer cut leaves a shorter last wave and more partials to reduce).
    pub fn with_parts(work: u64, ctas: u32, k_tiles: u32, parts: u32) -> Result<StreamKPlan, StreamKError> {
        if work == 0 || ctas == 0 {
            return Err(StreamKError::Empty { work, ctas });
        }
        let ctas = u64::from(ctas).min(work);
        let sk_tiles = work % ctas;
        let iters = sk_tiles * u64::from(k_tiles);
        if iters > i32::MAX as u64 {
            return Err(StreamKError::Overflow {
                what: "stream-K iterations",
                value: iters,
            });
        }
        let units = if iters == 0 {
            0
        } else {
            ctas.min(sk_tiles * u64::from(k_tiles.min(parts.max(2))))
        };
        // All below `ctas` (a u32) or checked above.
        Ok(StreamKPlan {
            work,
            ctas: ctas as u32,
            k_tiles,
            sk_tiles: if units == 0 { 0 } else { sk_tiles as u32 },
            units: units as u32,
        })
    }

    /// Work ids of whole tiles: `[0, dp_work)`.
    pub fn dp_work(&self) -> u64 {
        self.work - u64::from(self.sk_tiles)
    }

    /// Stream-K iterations: `sk_tiles * k_tiles`.
    pub fn iters(&self) -> u64 {
        u64::from(self.sk_tiles) * u64::from(self.k_tiles)
    }

    /// Iterations of the shorter units.
    pub fn base(&self) -> u64 {
        self.iters().checked_div(u64::from(self.units)).unwrap_or(0)
    }

    /// Units with one more iteration (the first ones).
    pub fn extra(&self) -> u64 {
        self.iters().checked_rem(u64::from(self.units)).unwrap_or(0)
    }

    /// The first stream-K iteration of unit `u` (`start(units) = iters`).
    pub fn start(&self, u: u32) -> u64 {
        u64::from(u) * self.base() + u64::from(u).min(self.extra())
    }

    /// The unit whose range holds iteration `i`, found by walking the ranges.
    pub fn unit_of(&self, i: u64) -> u32 {
        (0..self.units).find(|&u| i < self.start(u + 1)).unwrap_or(self.units)
    }

    /// The units contributing to stream-K tile `t` (work id `dp_work + t`), first and last.
    pub fn contributors(&self, t: u32) -> (u32, u32) {
        let k = u64::from(self.k_tiles);
        let first = u64::from(t) * k;
        (self.unit_of(first), self.unit_of(first + k - 1))
    }

    /// The workspace slot of unit `u`'s part of stream-K tile `t`: `2u` for the first tile
    /// of its range, `2u + 1` for the second.
    pub fn slot(&self, u: u32, t: u32) -> u32 {
        2 * u + u32::from(self.start(u) < u64::from(t) * u64::from(self.k_tiles))
    }

    /// The work items of CTA `cta`, in order: its whole tiles, then its stream-K parts.
    pub fn items(&self, cta: u32) -> Vec<WorkItem> {
        let k = self.k_tiles;
        let mut v: Vec<WorkItem> = (u64::from(cta)..self.dp_work())
            .step_by(self.ctas as usize)
            .map(|work| WorkItem {
                work,
                k_begin: 0,
                k_end: k,
            })
            .collect();
        if cta < self.units {
            let (begin, end) = (self.start(cta), self.start(cta + 1));
            let mut i = begin;
            while i < end {
                let t = i / u64::from(k);
                let tile_end = ((t + 1) * u64::from(k)).min(end);
                v.push(WorkItem {
                    work: self.dp_work() + t,
                    k_begin: (i - t * u64::from(k)) as u32,
                    k_end: (tile_end - t * u64::from(k)) as u32,
                });
                i = tile_end;
            }
        }
        v
    }

    /// The kernel's stream-K arguments: `sk_tiles`, `sk_units`.
    pub fn device_args(&self) -> [i32; 2] {
        // Both at most `ctas`, checked to fit in `new` through the iteration count.
        [self.sk_tiles as i32, self.units as i32]
    }

    /// Partial-sum slots: two per CTA.
    pub fn slots(&self) -> usize {
        2 * self.ctas as usize
    }

    /// Tile counters (`u32`): one per stream-K tile and `halves` (the cooperative
    /// schedule's consumer warpgroups reduce their rows on their own).
    pub fn counters(&self, halves: usize) -> usize {
        self.sk_tiles as usize * halves
    }
}

/// The partials of one tile's contributors summed in their k order, `p[0] + p[1] + ...`,
/// as the last arriver does: whatever order the contributors arrive in, the same bits.
pub fn sum_in_k_order(partials: &[f32]) -> f32 {
    partials
        .iter()
        .skip(1)
        .fold(partials.first().copied().unwrap_or(0.0), |s, &p| s + p)
}

/// The device walk: a struct `{prefix}_walk` whose constructor takes the scheduler's
/// `total_work`, the plan's [`StreamKPlan::device_args`], the k-tiles per tile, this CTA's
/// index and the CTA count, and whose `work(j)`, `k_begin(j)`, `k_end(j)` give item `j` of
/// [`StreamKPlan::items`] (`work(j)` past the last item: `~0`, no tile).
pub fn device_code(prefix: &str) -> String {
    walk_code(prefix, "__device__ __forceinline__")
}

/// [`device_code`] as a unit item.
pub fn device_item(prefix: &str) -> Item {
    Item::Snippet {
        origin: "rcute_kernel::stream_k".into(),
        code: device_code(prefix),
    }
}

/// The same walk as plain host C++ (`inline` functions), for the tests that compile it
/// with a host compiler and compare it with [`StreamKPlan::items`].
pub fn host_code(prefix: &str) -> String {
    walk_code(prefix, "inline")
}

fn walk_code(prefix: &str, qual: &str) -> String {
    WALK_TEMPLATE
        .trim_start()
        .replace("@NAME@", &format!("{prefix}_walk"))
        .replace("@HD@", qual)
}

/// The walk; `@NAME@` and `@HD@` (the function qualifiers) filled in by [`walk_code`].
const WALK_TEMPLATE: &str = r#"
// Hybrid stream-K walk @NAME@ (rcute_kernel::stream_k::StreamKPlan). Work ids [0, dp_work) are
// whole tiles: this CTA takes cta, cta + ctas, ... The last sk_tiles work ids are cut into their
// (tile, k-tile) iterations, tile-major; CTA u < units takes iterations [start(u), start(u + 1)):
// base or base + 1 of them (the first `extra` CTAs one more), parts of one or two tiles.
struct @NAME@ {
  unsigned long long dp_work;  // work ids of whole tiles
  unsigned long long cta;      // this CTA (its first work id)
  unsigned long long ctas;     // CTAs launched (the whole tiles' stride)
  int k_tiles;                 // k-tiles of a tile
  int base, extra;             // iterations per unit
  int dp_items;                // whole tiles of this CTA
  int begin, end;              // this CTA's stream-K iterations
  int first_tile;              // the stream-K tile of iteration `begin`
  int items;                   // work items of this CTA: dp_items, then 0 to 2 stream-K parts

  @HD@ @NAME@(unsigned long long total_work, int sk_tiles, int units, int k_tiles_,
               unsigned long long cta_, unsigned long long ctas_)
      : dp_work(total_work - (unsigned long long)sk_tiles), cta(cta_), ctas(ctas_), k_tiles(k_tiles_) {
    const int iters = sk_tiles * k_tiles;
    base = units > 0 ? iters / units : 0;
    extra = units > 0 ? iters % units : 0;
    // whole tiles of this CTA; a 32-bit division where the counts fit (they do below 2^31 work ids)
    const unsigned long long after = dp_work - 1 - cta;
    const bool narrow = (after | ctas) < 0x80000000ull;
    dp_items = cta >= dp_work ? 0 : (narrow ? (int)((unsigned)after / (unsigned)ctas) : (int)(after / ctas)) + 1;
    const bool unit = cta < (unsigned long long)units;
    begin = unit ? start((int)cta) : 0;
    end = unit ? start((int)cta + 1) : 0;
    first_tile = begin < end ? begin / k_tiles : 0;
    items = dp_items + (begin < end ? (end - 1) / k_tiles - first_tile + 1 : 0);
  }
  // The first iteration of unit u.
  @HD@ int start(int u) const { return u * base + (u < extra ? u : extra); }
  // The unit whose range holds iteration i (base >= 1: units <= iterations).
  @HD@ int unit_of(int i) const {
    const int long_iters = extra * (base + 1);
    return i < long_iters ? i / (base + 1) : extra + (i - long_iters) / base;
  }
  // Item j's work id (~0 past the last item: no tile).
  @HD@ unsigned long long work(int j) const {
    if (j < dp_items) return cta + (unsigned long long)j * ctas;
    if (j < items) return dp_work + (unsigned long long)(first_tile + j - dp_items);
    return ~0ull;
  }
  // Item j's k-tiles [k_begin, k_end) of its tile.
  @HD@ int k_begin(int j) const {
    if (j < dp_items) return 0;
    const int t0 = (first_tile + j - dp_items) * k_tiles;
    return begin > t0 ? begin - t0 : 0;
  }
  @HD@ int k_end(int j) const {
    if (j < dp_items) return k_tiles;
    const int t0 = (first_tile + j - dp_items) * k_tiles;
    return end - t0 < k_tiles ? end - t0 : k_tiles;
  }
  // The first and last contributing unit of stream-K tile t (work id dp_work + t).
  @HD@ int first_unit(int t) const { return unit_of(t * k_tiles); }
  @HD@ int last_unit(int t) const { return unit_of(t * k_tiles + k_tiles - 1); }
  // The partial-sum slot of unit u's part of stream-K tile t: 2u its first tile, 2u + 1 its second.
  @HD@ int slot(int u, int t) const { return 2 * u + (start(u) < t * k_tiles ? 1 : 0); }
};
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_waves_stay_data_parallel() {
        let p = StreamKPlan::new(264, 132, 64).unwrap();
        assert_eq!((p.sk_tiles, p.units, p.dp_work()), (0, 0, 264));
        assert_eq!(p.items(5).len(), 2);
        let p = StreamKPlan::new(100, 132, 64).unwrap();
        assert_eq!((p.ctas, p.sk_tiles), (100, 0));
        let p = StreamKPlan::new(133, 132, 0).unwrap();
        assert_eq!(p.sk_tiles, 0);
        assert!(StreamKPlan::new(0, 132, 4).is_err());
    }

    #[test]
    fn small_tails_use_two_units_a_tile() {
        // one tile left over: two CTAs take half of its k-tiles each
        let p = StreamKPlan::new(133, 132, 64).unwrap();
        assert_eq!((p.sk_tiles, p.units), (1, 2));
        assert_eq!(p.contributors(0), (0, 1));
        assert_eq!(
            p.items(1)[1],
            WorkItem {
                work: 132,
                k_begin: 32,
                k_end: 64
            }
        );
    }

    /// The last-arriver protocol of one tile, contributors arriving in `arrival` order:
    /// each stores its partial into its slot and adds one to the counter; the one that
    /// sees `n - 1` resets it and sums the slots in k order. Returns (finisher, sum,
    /// counter after).
    fn last_arriver(arrival: &[usize], partials: &[f32]) -> (usize, f32, u32) {
        let n = partials.len();
        let mut slots = vec![f32::NAN; n];
        let mut counter = 0u32;
        let mut result = None;
        for &c in arrival {
            slots[c] = partials[c];
            let old = counter;
            counter += 1;
            if old as usize == n - 1 {
                counter = 0;
                result = Some((c, sum_in_k_order(&slots)));
            }
        }
        let (who, sum) = result.expect("one contributor is last");
        (who, sum, counter)
    }

    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = vec![];
        for p in permutations(n - 1) {
            for i in 0..=p.len() {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn reduction_is_bit_identical_whatever_the_arrival_order() {
        let vals = [1.0e8f32, 1.0, -1.0e8, 1.0, 0.5];
        for n in 2..=5 {
            let p = &vals[..n];
            let want = sum_in_k_order(p).to_bits();
            let mut arrival_sums = std::collections::HashSet::new();
            for order in permutations(n) {
                let (who, sum, counter) = last_arriver(&order, p);
                assert_eq!(who, *order.last().unwrap(), "the last arriver finishes");
                assert_eq!(sum.to_bits(), want, "n {n} order {order:?}");
                assert_eq!(counter, 0, "the counter is left zero for the next launch");
                let in_arrival: Vec<f32> = order.iter().map(|&i| p[i]).collect();
                arrival_sums.insert(sum_in_k_order(&in_arrival).to_bits());
            }
            // summing in arrival order would not be deterministic
            if n >= 3 {
                assert!(arrival_sums.len() > 1, "n {n}");
            }
        }
    }
}
