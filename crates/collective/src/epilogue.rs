//! The epilogue: `D = convert(alpha * acc + beta * C)` computed in f32.
//!
//! [`EpiloguePlan`] checks the types and renders the conversions; [`SmemEpilogue`] plans
//! the staging of the accumulators through shared memory (the SM80 GEMM kernels use it):
//! slabs of the CTA tile in a union with the mainloop's buffers, a padded / swizzled f32
//! layout chosen by simulating the banks, and 16-byte coalesced output vectors (with an
//! element-wise fallback at ragged edges and for misaligned leading dimensions). C is read
//! only when `beta != 0`, so C may be null then. `pair_store_bytes` / `smem_bytes` describe
//! the direct (unstaged) fragment stores, which the generator no longer emits.
//!
//! ```
//! use rcute_atom::Element;
//! use rcute_collective::{EpilogueConfig, EpiloguePlan, StorageOrder};
//! let p = EpiloguePlan::new(&EpilogueConfig { c: Element::BF16, d: Element::BF16, order: StorageOrder::RowMajor }).unwrap();
//! assert_eq!(p.pair_store_bytes(), Some(4));
//! assert_eq!(p.smem_bytes(), 0);
//! ```

use rcute_atom::Element;

/// How an `(M, N)` matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageOrder {
    /// `(m, n)` at `m * ld + n`.
    RowMajor,
    /// `(m, n)` at `n * ld + m`.
    ColMajor,
}

impl StorageOrder {
    /// `"row"` / `"col"`.
    pub fn tag(self) -> &'static str {
        match self {
            StorageOrder::RowMajor => "row",
            StorageOrder::ColMajor => "col",
        }
    }
}

/// The epilogue's types and output order (C and D share the order and leading-dimension
/// convention; each has its own leading dimension at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpilogueConfig {
    /// Element type of the source C.
    pub c: Element,
    /// Element type of the output D.
    pub d: Element,
    /// Storage order of C and D.
    pub order: StorageOrder,
}

/// Why an epilogue configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EpilogueError {
    /// C or D has a type the epilogue cannot convert.
    #[error("unsupported epilogue type {0}: C and D must be f32, bf16 or f16")]
    Type(Element),
}

/// The epilogue plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpiloguePlan {
    /// The configuration.
    pub config: EpilogueConfig,
}

fn supported(e: Element) -> bool {
    matches!(e, Element::F32 | Element::BF16 | Element::F16)
}

impl EpiloguePlan {
    /// Check the types.
    pub fn new(cfg: &EpilogueConfig) -> Result<EpiloguePlan, EpilogueError> {
        for e in [cfg.c, cfg.d] {
            if !supported(e) {
                return Err(EpilogueError::Type(e));
            }
        }
        Ok(EpiloguePlan { config: *cfg })
    }
    /// Bytes of one 2-element vector store of adjacent accumulators, or `None` for
    /// element-wise stores (column-major D).
    pub fn pair_store_bytes(&self) -> Option<usize> {
        match self.config.order {
            StorageOrder::RowMajor => Some(2 * self.config.d.bytes() as usize),
            StorageOrder::ColMajor => None,
        }
    }
    /// Shared memory the epilogue needs (0: no staging in this slice).
    pub fn smem_bytes(&self) -> usize {
        0
    }
    /// C++ expression converting a `float` expression `x` to D's type.
    pub fn to_d_cpp(&self, x: &str) -> String {
        convert_from_f32(self.config.d, x)
    }
    /// C++ expression converting C's element expression `x` to `float`.
    pub fn c_to_f32_cpp(&self, x: &str) -> String {
        convert_to_f32(self.config.c, x)
    }
}

/// `float` -> `e` in C++ (round to nearest even).
pub fn convert_from_f32(e: Element, x: &str) -> String {
    match e {
        Element::BF16 => format!("__float2bfloat16_rn({x})"),
        Element::F16 => format!("__float2half_rn({x})"),
        _ => x.to_string(),
    }
}

/// `e` -> `float` in C++.
pub fn convert_to_f32(e: Element, x: &str) -> String {
    match e {
        Element::BF16 => format!("__bfloat162float({x})"),
        Element::F16 => format!("__half2float({x})"),
        _ => x.to_string(),
    }
}

// ------------------------------------------------------------------------------------
// The shared-memory staged epilogue.

use crate::sm80_mainloop::Sm80Mainloop;

/// Bytes of one global store vector of the staged epilogue.
pub const STORE_VECTOR_BYTES: i64 = 16;

/// The staged epilogue: after the last k-tile the accumulators go (as f32) through shared
/// memory, reusing the mainloop's buffers, so that every thread then reads whole 16-byte
/// output vectors and stores them coalesced (CuTe / CUTLASS's `SharedLoadIterator` +
/// `PredicatedTileIterator` epilogue of the SM80 GEMMs).
///
/// * The CTA tile `(BM, BN)` is staged in `passes` slabs of `rows_per_pass` rows of M
///   (`mi_per_pass` M-atoms of every warp: slab `q` holds tile rows
///   `[q * rows_per_pass, (q + 1) * rows_per_pass)`), as few as fit the mainloop's
///   shared memory (the staging buffer is a union with the A/B stages; the kernel
///   waits for every `cp.async` and synchronizes before the first write).
/// * The slab is stored in the order of D: row-major D stages `(rows_per_pass, BN)` with
///   `BN` contiguous, column-major D stages `(BN, rows_per_pass)` with M contiguous; the
///   row stride is `ld = inner + pad` floats and the 16-byte chunks of a row are
///   optionally XOR-swizzled (`chunk ^ ((chunk >> 3) & 1)`). `pad` and the swizzle are
///   chosen by simulating the shared-memory banks of the fragment writes and the vector
///   reads of every warp ([`SmemEpilogue::write_wavefronts`] /
///   [`SmemEpilogue::read_wavefronts`]; [`SmemEpilogue::ideal_wavefronts`] is the
///   conflict-free count).
/// * Each thread then reads `vec` f32 values (one 16-byte vector of D: 8 elements for
///   16-bit D, 4 for f32) along the contiguous dimension: vector `i = tid + threads * it`
///   of the slab is at `(i / vectors_per_row, (i % vectors_per_row) * vec)`.
///
/// ```
/// use rcute_atom::Element;
/// use rcute_collective::{EpilogueConfig, SmemEpilogue, Sm80Mainloop, Sm80MainloopConfig, StorageOrder};
/// let ml = Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn([128, 128, 32], [2, 2])).unwrap();
/// let cfg = EpilogueConfig { c: Element::BF16, d: Element::BF16, order: StorageOrder::RowMajor };
/// let e = SmemEpilogue::new(&cfg, &ml).unwrap();
/// assert_eq!((e.vec, e.passes, e.rows_per_pass), (8, 2, 64));
/// assert!(e.smem_bytes <= ml.smem_bytes);
/// assert_eq!(e.write_wavefronts + e.read_wavefronts, e.ideal_wavefronts);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemEpilogue {
    /// Output order (and staging order).
    pub order: StorageOrder,
    /// D elements per 16-byte vector.
    pub vec: i64,
    /// Slabs per tile.
    pub passes: i64,
    /// Rows of M per slab.
    pub rows_per_pass: i64,
    /// M-atoms of each warp per slab.
    pub mi_per_pass: i64,
    /// Staged `(outer, inner)` extents of a slab.
    pub extents: [i64; 2],
    /// Padding floats per staged row.
    pub pad: i64,
    /// Whether 16-byte chunks are XOR-swizzled (`chunk ^ ((chunk >> 3) & 1)`).
    pub swizzle: bool,
    /// Row stride of the staging buffer, in floats (`inner + pad`).
    pub ld: i64,
    /// Bytes of the staging buffer.
    pub smem_bytes: usize,
    /// The kernel's dynamic shared memory: `max(mainloop, staging)` (a union).
    pub union_bytes: usize,
    /// Vectors along a staged row (`inner / vec`).
    pub vectors_per_row: i64,
    /// Vectors per slab.
    pub vectors_per_pass: i64,
    /// Read iterations per thread and slab (`ceil(vectors_per_pass / threads)`).
    pub iterations: i64,
    /// Shared-memory wavefronts of the fragment writes of one tile (all warps).
    pub write_wavefronts: i64,
    /// Shared-memory wavefronts of the vector reads of one tile (all warps).
    pub read_wavefronts: i64,
    /// Wavefronts without any bank conflict (writes plus reads).
    pub ideal_wavefronts: i64,
    /// Threads per CTA.
    pub threads: i64,
}

/// One warp-wide shared-memory access: per lane, `Some(byte address)` of an access of
/// `width` bytes.
fn wavefronts(addrs: &[Option<i64>], width: i64) -> i64 {
    let per_phase = (128 / width).clamp(1, 32) as usize;
    let mut total = 0;
    for phase in addrs.chunks(per_phase) {
        let mut banks: Vec<std::collections::BTreeSet<i64>> = vec![Default::default(); 32];
        let mut any = false;
        for a in phase.iter().flatten() {
            any = true;
            for w in 0..width / 4 {
                let word = a / 4 + w;
                banks[(word % 32) as usize].insert(word);
            }
        }
        if any {
            total += banks.iter().map(|b| b.len() as i64).max().unwrap_or(1).max(1);
        }
    }
    total
}

impl SmemEpilogue {
    /// Plan the staging for the mainloop `ml` (its tile, warps and shared memory).
    pub fn new(cfg: &EpilogueConfig, ml: &Sm80Mainloop) -> Result<SmemEpilogue, EpilogueError> {
        EpiloguePlan::new(cfg)?;
        let [bm, bn, _] = ml.config.tile;
        let [wm, _] = ml.config.warps;
        let vec = STORE_VECTOR_BYTES / cfg.d.bytes() as i64;
        let mut best: Option<SmemEpilogue> = None;
        // Fewest passes whose staging fits the mainloop's smem (else one M-atom per pass).
        let divisors: Vec<i64> = (1..=ml.mma_m).filter(|p| ml.mma_m % p == 0).collect();
        for &passes in &divisors {
            let mi_per_pass = ml.mma_m / passes;
            let rows = 16 * wm * mi_per_pass;
            debug_assert_eq!(rows * passes, bm);
            let extents = match cfg.order {
                StorageOrder::RowMajor => [rows, bn],
                StorageOrder::ColMajor => [bn, rows],
            };
            let mut cands = Vec::new();
            for swizzle in [false, true] {
                for pad in [0i64, 4, 8, 12, 16] {
                    let e = Self::candidate(cfg.order, vec, passes, rows, mi_per_pass, extents, pad, swizzle, ml);
                    cands.push(e);
                }
            }
            // Least wavefronts, then the smaller buffer, then no swizzle.
            cands.sort_by_key(|e| (e.write_wavefronts + e.read_wavefronts, e.smem_bytes, e.swizzle));
            let e = cands.into_iter().next().expect("candidates");
            let fits = e.smem_bytes <= ml.smem_bytes;
            best = Some(e);
            if fits {
                break;
            }
        }
        Ok(best.expect("mma_m >= 1"))
    }

    #[allow(clippy::too_many_arguments)]
    fn candidate(
        order: StorageOrder,
        vec: i64,
        passes: i64,
        rows: i64,
        mi_per_pass: i64,
        extents: [i64; 2],
        pad: i64,
        swizzle: bool,
        ml: &Sm80Mainloop,
    ) -> SmemEpilogue {
        let ld = extents[1] + pad;
        let smem_bytes = (extents[0] * ld * 4) as usize;
        let vectors_per_row = extents[1] / vec;
        let vectors_per_pass = extents[0] * vectors_per_row;
        let threads = ml.threads;
        let mut e = SmemEpilogue {
            order,
            vec,
            passes,
            rows_per_pass: rows,
            mi_per_pass,
            extents,
            pad,
            swizzle,
            ld,
            smem_bytes,
            union_bytes: smem_bytes.max(ml.smem_bytes),
            vectors_per_row,
            vectors_per_pass,
            iterations: (vectors_per_pass + threads - 1) / threads,
            write_wavefronts: 0,
            read_wavefronts: 0,
            ideal_wavefronts: 0,
            threads,
        };
        let (w, r, ideal) = e.simulate(ml);
        e.write_wavefronts = w;
        e.read_wavefronts = r;
        e.ideal_wavefronts = ideal;
        e
    }

    /// Float offset of staged `(outer, inner)` in the staging buffer.
    pub fn offset(&self, outer: i64, inner: i64) -> i64 {
        let chunk = inner / 4;
        let chunk = if self.swizzle {
            chunk ^ ((chunk >> 3) & 1)
        } else {
            chunk
        };
        outer * self.ld + chunk * 4 + inner % 4
    }

    /// [`SmemEpilogue::offset`] as a C++ expression.
    ///
    /// The staging layout is `(outer, inner):(ld, 1)` with, when [`SmemEpilogue::swizzle`]
    /// is set, the 4-float chunk of `inner` XORed with bit 3 of the chunk index (`inner`
    /// bit 2 ^= bit 5); operands that are not plain names are parenthesized.
    ///
    /// ```
    /// # use rcute_collective::{EpilogueConfig, Sm80Mainloop, Sm80MainloopConfig, SmemEpilogue, StorageOrder};
    /// # use rcute_atom::Element;
    /// let ml = Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn([128, 128, 32], [2, 2])).unwrap();
    /// let cfg = EpilogueConfig { c: Element::BF16, d: Element::BF16, order: StorageOrder::RowMajor };
    /// let se = SmemEpilogue::new(&cfg, &ml).unwrap();
    /// assert_eq!(se.offset_cpp("so", "si"), format!("so * {} + (si ^ ((si >> 3) & 4))", se.ld));
    /// assert_eq!(se.offset_cpp("so", "si + 4"), format!("so * {} + ((si + 4) ^ (((si + 4) >> 3) & 4))", se.ld));
    /// ```
    pub fn offset_cpp(&self, outer: &str, inner: &str) -> String {
        let (o, i) = (paren(outer), paren(inner));
        if self.swizzle {
            format!("{o} * {} + ({i} ^ (({i} >> 3) & 4))", self.ld)
        } else {
            format!("{o} * {} + {inner}", self.ld)
        }
    }

    /// The staged `(outer, inner)` of slab-local tile coordinate `(m, n)`.
    pub fn staged(&self, m: i64, n: i64) -> (i64, i64) {
        match self.order {
            StorageOrder::RowMajor => (m, n),
            StorageOrder::ColMajor => (n, m),
        }
    }

    /// `(write, read, ideal)` wavefronts of one tile over all warps.
    fn simulate(&self, ml: &Sm80Mainloop) -> (i64, i64, i64) {
        let (mut w, mut r, mut ideal) = (0, 0, 0);
        let warps = ml.threads / 32;
        for warp in 0..warps {
            // Fragment writes of slab 0 (every slab has the same pattern).
            for mi in 0..self.mi_per_pass {
                for nj in 0..ml.mma_n {
                    for h in 0..2 {
                        let coords: Vec<(i64, i64)> = (0..32)
                            .map(|lane| {
                                let (m, n) = ml.acc_coord(warp * 32 + lane, mi, nj, 2 * h);
                                (m, n)
                            })
                            .collect();
                        match self.order {
                            StorageOrder::RowMajor => {
                                let a: Vec<Option<i64>> =
                                    coords.iter().map(|&(m, n)| Some(4 * self.offset(m, n))).collect();
                                w += wavefronts(&a, 8);
                                ideal += 2;
                            }
                            StorageOrder::ColMajor => {
                                for dn in 0..2 {
                                    let a: Vec<Option<i64>> =
                                        coords.iter().map(|&(m, n)| Some(4 * self.offset(n + dn, m))).collect();
                                    w += wavefronts(&a, 4);
                                    ideal += 1;
                                }
                            }
                        }
                    }
                }
            }
            // Vector reads.
            for it in 0..self.iterations {
                for j in 0..self.vec / 4 {
                    let a: Vec<Option<i64>> = (0..32)
                        .map(|lane| {
                            let i = warp * 32 + lane + it * self.threads;
                            (i < self.vectors_per_pass).then(|| {
                                4 * self.offset(i / self.vectors_per_row, (i % self.vectors_per_row) * self.vec + 4 * j)
                            })
                        })
                        .collect();
                    let active = a.iter().flatten().count() as i64;
                    if active > 0 {
                        r += wavefronts(&a, 16);
                        ideal += (active + 7) / 8;
                    }
                }
            }
        }
        (w, r, ideal)
    }

    /// Whether the fragment writes and vector reads are free of bank conflicts.
    pub fn conflict_free(&self) -> bool {
        self.write_wavefronts + self.read_wavefronts == self.ideal_wavefronts
    }
}

/// `x` as an operand of `*` / `>>`: unchanged when it is a name or a number, else `(x)`.
fn paren(x: &str) -> String {
    if x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        x.to_string()
    } else {
        format!("({x})")
    }
}
