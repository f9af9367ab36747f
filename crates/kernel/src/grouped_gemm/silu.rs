//! SiLU of the grouped family's SwiGLU epilogues (`silu(gate) * up`): one emitter for every
//! member, the SM80 `mma.sync` kernels ([`super::generate`]), the register-streamed ones
//! ([`super::streamed`]) and the SM90 grouped mode of the Hopper generator
//! ([`crate::gemm_sm90::Sm90Grouped::SwiGlu`]).

use crate::emit::Item;

/// The device function `rc_silu(x) = x * sigmoid(x) = x / (1 + e^-x)` with the fast
/// exponential and division (`MUFU.EX2`, `MUFU.RCP`; no IEEE-division slow path): for
/// `x < -88` the exponential is infinite and the quotient 0.
pub(crate) fn silu_helper() -> Item {
    Item::Snippet {
        origin: "rcute SiLU".into(),
        code: "__device__ __forceinline__ float rc_silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }\n".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_divides_fast() {
        let Item::Snippet { code, .. } = silu_helper() else {
            panic!("a snippet")
        };
        assert!(code.contains("float rc_silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }"));
        assert!(!code.contains(" / "), "an IEEE division: {code}");
    }
}
