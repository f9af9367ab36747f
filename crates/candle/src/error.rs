//! The crate's error, and how it becomes a candle error.

use rcute_ops::OpsError;

/// Why an rcute op refused candle tensors or failed. Every fallible function of this crate
/// returns it as a [`candle_core::Error`] (`Error::Wrapped`), whose message is this one's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// rcute's own validation or launch error (element types, shapes, strides, alignment,
    /// architecture, compilation, ...), with rcute's message.
    #[error("rcute: {0}")]
    Ops(#[from] OpsError),
    /// An operand is not a CUDA tensor.
    #[error("rcute: {operand} is on the {location}: rcute's ops run on CUDA tensors")]
    NotCuda {
        /// The operand's name (`A`, `x`, `qweight`, ...).
        operand: &'static str,
        /// Where it is (`cpu`, `metal`).
        location: String,
    },
    /// This build of `rcute-candle` has no CUDA support.
    #[error("rcute: rcute-candle was built without its `cuda` feature (see scripts/build-candle.sh)")]
    NoCudaFeature,
}

impl From<Error> for candle_core::Error {
    fn from(e: Error) -> candle_core::Error {
        candle_core::Error::wrap(e)
    }
}

/// An [`OpsError`] as a candle error.
pub(crate) fn ops(e: OpsError) -> candle_core::Error {
    Error::Ops(e).into()
}
