//! The first-slice epilogue: `D = convert(alpha * acc + beta * C)` computed in f32 from the
//! accumulator fragments and written with direct, predicated global stores.
//!
//! Each thread holds, per `m16n8` atom, two pairs of horizontally adjacent accumulators
//! (`(m, n..n+1)` and `(m+8, n..n+1)`, `n` even). With a row-major D those pairs are
//! contiguous: they are stored as one 2-element vector (4 bytes for 16-bit D, 8 bytes for
//! f32) when both are in bounds and `ldd` is even, and element-wise otherwise. A
//! column-major D is stored element-wise. C is read only when `beta != 0`, so C may be
//! null then. Staging through shared memory for 16-byte stores is not implemented in this
//! slice (`smem_bytes() == 0`).
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
