//! The run-time arguments of one launch and their validation.

use super::config::{GemmSm80Config, GeneratedGemm, SplitKMode};
use super::error::GemmError;
use rcute_atom::Major;
use rcute_collective::StorageOrder;

/// Run-time arguments of one GEMM launch. Pointers are device addresses (`CUdeviceptr`).
/// Matrices are addressed as: A `(m,k)` at `m*lda + k` (K-major) or `k*lda + m`
/// (MN-major); B `(k,n)` at `n*ldb + k` (K-major) or `k*ldb + n` (MN-major); C / D `(m,n)`
/// at `m*ld + n` (row-major) or `n*ld + m` (column-major); batch `l` adds
/// `l * batch_stride_*` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmArgs {
    /// Rows of A, C, D.
    pub m: i32,
    /// Columns of B, C, D.
    pub n: i32,
    /// The reduction extent.
    pub k: i32,
    /// Batch count.
    pub l: i32,
    /// A.
    pub a: u64,
    /// B.
    pub b: u64,
    /// C (may be 0 when `beta == 0`).
    pub c: u64,
    /// D (may equal C).
    pub d: u64,
    /// Leading dimension of A, in elements.
    pub lda: i64,
    /// Leading dimension of B.
    pub ldb: i64,
    /// Leading dimension of C.
    pub ldc: i64,
    /// Leading dimension of D.
    pub ldd: i64,
    /// Elements between batches of A.
    pub batch_stride_a: i64,
    /// Elements between batches of B.
    pub batch_stride_b: i64,
    /// Elements between batches of C.
    pub batch_stride_c: i64,
    /// Elements between batches of D.
    pub batch_stride_d: i64,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
    /// K splits (1 = no split-K; more needs a workspace and the reduction kernel).
    pub split_k: u32,
    /// f32 workspace of [`GeneratedGemm::workspace_bytes_mode`] bytes (split-K only).
    pub workspace: u64,
    /// How the splits are combined (with `split_k > 1`).
    pub split_k_mode: SplitKMode,
    /// Serial split-K: [`GeneratedGemm::semaphore_count`] `int`s, zero before the first
    /// launch; every launch that completes leaves them zero again (reusable without a
    /// memset). Launches sharing them must be ordered (one stream).
    pub semaphores: u64,
    /// Bytes at `workspace` (0: not stated). The SM90 stream-K kernels need it (typed
    /// error below their [`crate::gemm_sm90::GeneratedGemmSm90::stream_k_workspace_bytes`]).
    pub workspace_bytes: usize,
    /// Bytes at `semaphores` (0: not stated): the SM90 stream-K kernels' tile counters,
    /// zero before the first launch and left zero by every launch that completes
    /// ([`crate::gemm_sm90::GeneratedGemmSm90::stream_k_counter_bytes`]).
    pub semaphore_bytes: usize,
}

impl GemmArgs {
    /// Densely packed tensors (leading dimensions and batch strides as small as the
    /// configuration's majors allow), `alpha = 1`, `beta = 0`, no split-K.
    #[allow(clippy::too_many_arguments)]
    pub fn packed(cfg: &GemmSm80Config, m: i32, n: i32, k: i32, l: i32, a: u64, b: u64, c: u64, d: u64) -> GemmArgs {
        GemmArgs::packed_majors(cfg.a_major, cfg.b_major, cfg.c_major, m, n, k, l, a, b, c, d)
    }

    /// [`GemmArgs::packed`] for the "TN" layouts every SM90 kernel takes: K-major A and B,
    /// row-major C and D.
    #[allow(clippy::too_many_arguments)]
    pub fn tn(m: i32, n: i32, k: i32, l: i32, a: u64, b: u64, c: u64, d: u64) -> GemmArgs {
        GemmArgs::packed_majors(Major::K, Major::K, StorageOrder::RowMajor, m, n, k, l, a, b, c, d)
    }

    /// [`GemmArgs::packed`] from the operands' majors and the output order.
    #[allow(clippy::too_many_arguments)]
    pub fn packed_majors(
        a_major: Major,
        b_major: Major,
        c_major: StorageOrder,
        m: i32,
        n: i32,
        k: i32,
        l: i32,
        a: u64,
        b: u64,
        c: u64,
        d: u64,
    ) -> GemmArgs {
        let (m64, n64, k64) = (m as i64, n as i64, k as i64);
        let lda = if a_major == Major::K { k64 } else { m64 };
        let ldb = if b_major == Major::K { k64 } else { n64 };
        let ldc = if c_major == StorageOrder::RowMajor { n64 } else { m64 };
        GemmArgs {
            m,
            n,
            k,
            l,
            a,
            b,
            c,
            d,
            lda,
            ldb,
            ldc,
            ldd: ldc,
            batch_stride_a: m64 * k64,
            batch_stride_b: n64 * k64,
            batch_stride_c: m64 * n64,
            batch_stride_d: m64 * n64,
            alpha: 1.0,
            beta: 0.0,
            split_k: 1,
            workspace: 0,
            split_k_mode: SplitKMode::Parallel,
            semaphores: 0,
            workspace_bytes: 0,
            semaphore_bytes: 0,
        }
    }

    /// Check the arguments against the generated kernel's rules.
    pub fn validate(&self, g: &GeneratedGemm) -> Result<(), GemmError> {
        let cfg = &g.config;
        let shape = |s: String| Err(GemmError::Shape(s));
        let align = |s: String| Err(GemmError::Alignment(s));
        if self.m < 1 || self.n < 1 || self.l < 1 || self.k < 0 {
            return shape(format!(
                "need M, N, L >= 1 and K >= 0, got M={} N={} K={} L={}",
                self.m, self.n, self.k, self.l
            ));
        }
        let (m, n, k) = (self.m as i64, self.n as i64, self.k as i64);
        let need = |name: &str, ld: i64, min: i64| -> Result<(), GemmError> {
            if ld < min.max(1) {
                Err(GemmError::Shape(format!("{name}={ld} is smaller than {}", min.max(1))))
            } else {
                Ok(())
            }
        };
        need("lda", self.lda, if cfg.a_major == Major::K { k } else { m })?;
        need("ldb", self.ldb, if cfg.b_major == Major::K { k } else { n })?;
        let out_min = if cfg.c_major == StorageOrder::RowMajor { n } else { m };
        need("ldd", self.ldd, out_min)?;
        // C is read only by the linear combination, and only when beta != 0.
        let reads_c = self.beta != 0.0 && cfg.is_linear_combination();
        if reads_c {
            need("ldc", self.ldc, out_min)?;
            if self.c == 0 {
                return shape("beta != 0 but C is null".into());
            }
        }
        if self.d == 0 || (self.k > 0 && (self.a == 0 || self.b == 0)) {
            return shape("null A, B or D".into());
        }
        let rows = if cfg.c_major == StorageOrder::RowMajor { m } else { n };
        if self.l > 1 && self.batch_stride_d < rows * self.ldd {
            return shape(format!("batch_stride_d={} overlaps batches", self.batch_stride_d));
        }
        if self.batch_stride_a < 0 || self.batch_stride_b < 0 {
            return shape("negative batch stride".into());
        }
        let copy = cfg.copy_bytes as i64;
        let vec = copy / cfg.a.bytes() as i64;
        // Batch strides matter only with several batches.
        let batch_strides = match self.l {
            1 => [0, 0],
            _ => [self.batch_stride_a, self.batch_stride_b],
        };
        for (name, v) in [
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("batch_stride_a", batch_strides[0]),
            ("batch_stride_b", batch_strides[1]),
        ] {
            if v % vec != 0 {
                return align(format!(
                    "{name}={v} must be a multiple of {vec} elements ({copy}-byte global -> shared copies)"
                ));
            }
        }
        if !self.a.is_multiple_of(copy as u64) || !self.b.is_multiple_of(copy as u64) {
            return align(format!("A and B must be {copy}-byte aligned"));
        }
        if (cfg.a_major == Major::K || cfg.b_major == Major::K) && k % vec != 0 {
            return align(format!(
                "K={k} must be a multiple of {vec} when an operand is K-major (no element-wise K path)"
            ));
        }
        let dbytes = cfg.d.bytes() as u64;
        if !self.d.is_multiple_of(dbytes) || (reads_c && !self.c.is_multiple_of(cfg.c.bytes() as u64)) {
            return align("C and D must be aligned to their element size".into());
        }
        if self.split_k < 1 {
            return shape("split_k must be at least 1".into());
        }
        if self.split_k > 1 && (self.workspace == 0 || !self.workspace.is_multiple_of(16)) {
            return shape("split_k > 1 needs a 16-byte aligned workspace of the accumulator type".into());
        }
        if self.split_k > 1
            && self.split_k_mode == SplitKMode::Serial
            && (self.semaphores == 0 || !self.semaphores.is_multiple_of(4))
        {
            return shape("serial split-K needs a zeroed, 4-byte aligned semaphore array".into());
        }
        let grid = g.grid_split(self.m, self.n, self.l, self.split_k);
        if grid.y > 65535 || grid.z > 65535 {
            return shape(format!("grid {grid:?} exceeds the 65535 limit in y or z"));
        }
        Ok(())
    }
}
