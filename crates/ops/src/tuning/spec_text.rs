//! The fields every configuration grammar shares: `AxBx...` extents and numbers.

use std::str::FromStr;

/// `AxBx...` with exactly `N` positive extents.
pub(crate) fn extents<const N: usize>(x: &str, what: &str) -> Result<[i64; N], String> {
    let v: Vec<i64> = x
        .split(['x', 'X'])
        .map(|y| y.trim().parse::<i64>().map_err(|e| format!("{what} {x:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let arr: [i64; N] = v
        .try_into()
        .map_err(|_| format!("the {what} {x:?} needs {N} extents"))?;
    if arr.iter().any(|&e| e <= 0) {
        return Err(format!("the {what} {x:?} has a non-positive extent"));
    }
    Ok(arr)
}

pub(crate) fn number<T: FromStr>(x: &str, what: &str) -> Result<T, String> {
    x.parse().map_err(|_| format!("{what} {x:?} is not a number"))
}
