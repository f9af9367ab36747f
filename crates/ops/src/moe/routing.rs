//! The float64 reference of top-k softmax routing.
//!
//! For token `t` with logits `x[t, 0..E]`: `p_e = exp(x_e - max) / sum_e' exp(x_e' - max)`;
//! the `k` experts of the largest logits (equivalently probabilities), in descending order,
//! ties to the lower expert index; weight `p_e`, or with renormalisation `p_e / sum of the
//! k selected p` (the `k` weights sum to 1, as Mixtral routes).

use crate::error::OpsError;

/// Top-k routing of `T` tokens: row-major `[T, k]` ids and weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    /// Expert ids, each token's in descending order of logit.
    pub topk_ids: Vec<i32>,
    /// Their weights.
    pub topk_weights: Vec<f64>,
}

/// Routes `tokens` tokens by `logits` (`[T, E]` row-major, no NaN; `-inf` allowed where
/// a row has a finite logit).
pub fn topk_softmax_reference(
    logits: &[f64],
    tokens: usize,
    experts: usize,
    topk: usize,
    renormalize: bool,
) -> Result<Routing, OpsError> {
    if experts == 0 {
        return Err(OpsError::Empty("MoE routing over 0 experts".into()));
    }
    if topk == 0 || topk > experts {
        return Err(OpsError::Shape(format!("top-{topk} of {experts} experts")));
    }
    if logits.len() != tokens * experts {
        return Err(OpsError::Shape(format!(
            "{} logits for {tokens} tokens x {experts} experts",
            logits.len()
        )));
    }
    let mut topk_ids = Vec::with_capacity(tokens * topk);
    let mut topk_weights = Vec::with_capacity(tokens * topk);
    for row in logits.chunks(experts) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if row.iter().any(|x| x.is_nan()) || !max.is_finite() {
            return Err(OpsError::Shape(format!("router logits {row:?} are not finite")));
        }
        let exps: Vec<f64> = row.iter().map(|&x| (x - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        let mut order: Vec<usize> = (0..experts).collect();
        // Descending logit, then ascending index: a total order, so the selection is unique.
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let chosen = &order[..topk];
        let denom = if renormalize {
            chosen.iter().map(|&e| exps[e]).sum()
        } else {
            sum
        };
        for &e in chosen {
            topk_ids.push(e as i32);
            topk_weights.push(exps[e] / denom);
        }
    }
    Ok(Routing { topk_ids, topk_weights })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_the_softmax_of_the_largest_logits() {
        let logits = [1.0, 3.0, 2.0, 0.0];
        let r = topk_softmax_reference(&logits, 1, 4, 2, false).unwrap();
        assert_eq!(r.topk_ids, vec![1, 2]);
        let z: f64 = logits.iter().map(|x: &f64| x.exp()).sum();
        for (w, e) in r.topk_weights.iter().zip([3.0f64, 2.0]) {
            assert!((w - e.exp() / z).abs() < 1e-15);
        }
        let r = topk_softmax_reference(&logits, 1, 4, 2, true).unwrap();
        assert!((r.topk_weights.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert!((r.topk_weights[0] / r.topk_weights[1] - 1f64.exp()).abs() < 1e-12);
        // k = E selects everything; without renormalisation the weights sum to 1 too.
        let r = topk_softmax_reference(&logits, 1, 4, 4, false).unwrap();
        assert_eq!(r.topk_ids, vec![1, 2, 0, 3]);
        assert!((r.topk_weights.iter().sum::<f64>() - 1.0).abs() < 1e-15);
    }

    #[test]
    fn ties_go_to_the_lower_expert_and_minus_infinity_is_last() {
        let logits = [0.5, 0.5, f64::NEG_INFINITY, 0.5];
        let r = topk_softmax_reference(&logits, 1, 4, 4, false).unwrap();
        assert_eq!(r.topk_ids, vec![0, 1, 3, 2]);
        assert_eq!(r.topk_weights[3], 0.0);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(topk_softmax_reference(&[], 0, 0, 1, false).is_err());
        assert!(topk_softmax_reference(&[0.0; 4], 1, 4, 5, false).is_err());
        assert!(topk_softmax_reference(&[0.0; 4], 1, 4, 0, false).is_err());
        assert!(topk_softmax_reference(&[0.0; 4], 2, 4, 1, false).is_err());
        assert!(topk_softmax_reference(&[0.0, f64::NAN], 1, 2, 1, false).is_err());
        assert!(topk_softmax_reference(&[f64::NEG_INFINITY; 2], 1, 2, 1, false).is_err());
        assert_eq!(topk_softmax_reference(&[], 0, 4, 2, true).unwrap().topk_ids.len(), 0);
    }
}
