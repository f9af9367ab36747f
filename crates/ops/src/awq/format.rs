//! AutoAWQ's `version="gemm"` checkpoint format, on the host: shapes, packing, and the
//! float64 reference that the AWQ kernels are checked against.
//!
//! For a weight `W` of `K` rows (the reduction dimension) and `N` columns, quantized in
//! groups of `G` rows:
//!
//! * `qweight`: int32 `[K, N/8]`; word `j` of row `k` holds columns `8j..8j+8`, nibble `i`
//!   (bits `4i..4i+3`) holding column `8j + AWQ_ORDER[i]` with `AWQ_ORDER = [0, 2, 4, 6, 1,
//!   3, 5, 7]` ([`rcute_atom::convert_int4::AWQ_ORDER`]);
//! * `qzeros`: int32 `[K/G, N/8]`, packed the same way;
//! * `scales`: 16-bit floats `[K/G, N]`;
//! * `w[k][n] = (q[k][n] - z[k/G][n]) * s[k/G][n]`, and the GEMM is `x @ w (+ bias)`.
//!
//! ```
//! use rcute_ops::awq::{AwqShape, pack_awq_matrix, unpack_awq_matrix};
//! let shape = AwqShape::new(256, 64, 128).unwrap();
//! assert_eq!((shape.groups(), shape.packed_cols()), (2, 8));
//! let q: Vec<u8> = (0..256 * 64).map(|i| (i * 7 % 16) as u8).collect();
//! let packed = pack_awq_matrix(&q, 256, 64).unwrap();
//! assert_eq!(unpack_awq_matrix(&packed, 256, 64).unwrap(), q);
//! assert!(AwqShape::new(256, 60, 128).is_err()); // N must be a multiple of 8
//! ```

use crate::error::OpsError;
use rcute_atom::convert_int4::{pack_awq, unpack_awq};

/// Group sizes the AWQ ops accept besides `G = K` (one group for the whole column).
pub const AWQ_GROUP_SIZES: [usize; 3] = [32, 64, 128];

/// The validated sizes of one AWQ weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AwqShape {
    /// Rows of the weight (the GEMM's reduction dimension).
    pub k: usize,
    /// Columns of the weight (the GEMM's output columns).
    pub n: usize,
    /// Rows per quantization group.
    pub group: usize,
}

impl AwqShape {
    /// Checks the format's rules: `K, N > 0`, `N` a multiple of 8, `G` in
    /// [`AWQ_GROUP_SIZES`] or `G = K`, and `K` a multiple of `G`.
    pub fn new(k: usize, n: usize, group: usize) -> Result<AwqShape, OpsError> {
        if k == 0 || n == 0 {
            return Err(OpsError::Empty(format!("AWQ weight of {k} x {n}")));
        }
        if !n.is_multiple_of(8) {
            return Err(OpsError::Shape(format!(
                "AWQ N = {n} is not a multiple of 8 (eight 4-bit values per word)"
            )));
        }
        if !(AWQ_GROUP_SIZES.contains(&group) || group == k) {
            return Err(OpsError::Shape(format!(
                "AWQ group size {group} is not one of {AWQ_GROUP_SIZES:?} or K = {k}"
            )));
        }
        if !k.is_multiple_of(group) {
            return Err(OpsError::Shape(format!(
                "AWQ K = {k} is not a multiple of the group size {group}"
            )));
        }
        Ok(AwqShape { k, n, group })
    }

    /// Quantization groups along K.
    pub fn groups(&self) -> usize {
        self.k / self.group
    }

    /// 32-bit words per row of `qweight` and `qzeros` (`N / 8`).
    pub fn packed_cols(&self) -> usize {
        self.n / 8
    }
}

/// Packs a row-major `[rows, cols]` matrix of 4-bit values (`0..16`) into AutoAWQ's
/// `[rows, cols / 8]` int32 words.
pub fn pack_awq_matrix(q: &[u8], rows: usize, cols: usize) -> Result<Vec<i32>, OpsError> {
    check_matrix(q.len(), rows, cols)?;
    if let Some(bad) = q.iter().find(|&&v| v > 15) {
        return Err(OpsError::Shape(format!("4-bit value {bad} is above 15")));
    }
    Ok(q.chunks_exact(8)
        .map(|c| pack_awq(&[c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as i32)
        .collect())
}

/// Unpacks AutoAWQ's `[rows, cols / 8]` int32 words into a row-major `[rows, cols]` matrix
/// of 4-bit values.
pub fn unpack_awq_matrix(words: &[i32], rows: usize, cols: usize) -> Result<Vec<u8>, OpsError> {
    check_matrix(words.len() * 8, rows, cols)?;
    Ok(words.iter().flat_map(|&w| unpack_awq(w as u32)).collect())
}

fn check_matrix(len: usize, rows: usize, cols: usize) -> Result<(), OpsError> {
    let want = rows
        .checked_mul(cols)
        .ok_or(OpsError::TooLarge { what: "AWQ matrix" })?;
    if !cols.is_multiple_of(8) || len != want {
        return Err(OpsError::Shape(format!(
            "AWQ matrix of {rows} x {cols} (cols a multiple of 8) does not match {len} values"
        )));
    }
    Ok(())
}

/// The dequantized weight `w[k][n] = (q - z) * s` in float64, row-major `[K, N]`, from the
/// checkpoint tensors (`scales` already widened from their 16-bit type).
pub fn dequantize_reference(
    shape: AwqShape,
    qweight: &[i32],
    qzeros: &[i32],
    scales: &[f64],
) -> Result<Vec<f64>, OpsError> {
    let q = unpack_awq_matrix(qweight, shape.k, shape.n)?;
    let z = unpack_awq_matrix(qzeros, shape.groups(), shape.n)?;
    if scales.len() != shape.groups() * shape.n {
        return Err(OpsError::Shape(format!(
            "AWQ scales hold {} values, expected K/G x N = {} x {}",
            scales.len(),
            shape.groups(),
            shape.n
        )));
    }
    Ok((0..shape.k * shape.n)
        .map(|i| {
            let (k, n) = (i / shape.n, i % shape.n);
            let g = (k / shape.group) * shape.n + n;
            (f64::from(q[i]) - f64::from(z[g])) * scales[g]
        })
        .collect())
}

/// `x @ w (+ bias)` in float64 for a row-major `x` of `[M, K]`: the AWQ GEMM's reference.
pub fn gemm_reference(x: &[f64], m: usize, w: &[f64], shape: AwqShape, bias: Option<&[f64]>) -> Vec<f64> {
    let (k, n) = (shape.k, shape.n);
    let mut y = vec![0.0; m * n];
    for (r, row) in y.chunks_exact_mut(n).enumerate() {
        if let Some(b) = bias {
            row.copy_from_slice(&b[..n]);
        }
        for kk in 0..k {
            let a = x[r * k + kk];
            for (out, wv) in row.iter_mut().zip(&w[kk * n..(kk + 1) * n]) {
                *out += a * wv;
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_rules() {
        assert!(AwqShape::new(4096, 14336, 128).is_ok());
        assert!(AwqShape::new(96, 8, 96).is_ok(), "G = K is allowed");
        assert!(matches!(AwqShape::new(0, 8, 32), Err(OpsError::Empty(_))));
        assert!(matches!(AwqShape::new(128, 12, 32), Err(OpsError::Shape(_))));
        assert!(matches!(AwqShape::new(128, 8, 48), Err(OpsError::Shape(_))));
        assert!(matches!(AwqShape::new(160, 8, 128), Err(OpsError::Shape(_))));
    }

    #[test]
    fn dequantize_follows_the_formula_per_element() {
        // One word per row: row k holds q = (k + c) % 16 in column c; zeros 0 and 15.
        let shape = AwqShape::new(64, 8, 32).unwrap();
        let q: Vec<u8> = (0..64 * 8).map(|i| ((i / 8 + i % 8) % 16) as u8).collect();
        let z: Vec<u8> = (0..2 * 8).map(|i| if i % 2 == 0 { 0 } else { 15 }).collect();
        let s: Vec<f64> = (0..2 * 8).map(|i| 1e-4 * (1 + i) as f64).collect();
        let w = dequantize_reference(
            shape,
            &pack_awq_matrix(&q, 64, 8).unwrap(),
            &pack_awq_matrix(&z, 2, 8).unwrap(),
            &s,
        )
        .unwrap();
        for k in 0..64 {
            for c in 0..8 {
                let g = (k / 32) * 8 + c;
                assert_eq!(w[k * 8 + c], (f64::from(q[k * 8 + c]) - f64::from(z[g])) * s[g]);
            }
        }
        assert!(pack_awq_matrix(&[16; 8], 1, 8).is_err());
        assert!(dequantize_reference(shape, &[0; 64], &[0; 2], &s[..15]).is_err());
    }

    #[test]
    fn gemm_reference_adds_bias() {
        let shape = AwqShape::new(32, 8, 32).unwrap();
        let w: Vec<f64> = (0..32 * 8).map(|i| i as f64).collect();
        let x = vec![1.0; 2 * 32];
        let bias: Vec<f64> = (0..8).map(|i| -(i as f64)).collect();
        let y = gemm_reference(&x, 2, &w, shape, Some(&bias));
        for n in 0..8 {
            let col: f64 = (0..32).map(|k| (k * 8 + n) as f64).sum();
            assert_eq!(y[n], col - n as f64);
            assert_eq!(y[8 + n], y[n]);
        }
    }
}
