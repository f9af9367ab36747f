//! A probe of `rcute_ops::tuning::probe` with a peer library timed in the same samples:
//! everything but the peer is the probe's.

use rcute_ops::tuning::tuner::{Compiler, Tunable};
use rcute_ops::tuning::{ConfigSpec, ProblemKey};
use rcute_ops::Ops;

/// `probe` and `peer(probe, turn)`, the peer's run on the probe's weight copy `turn`,
/// named `name` in the table.
pub struct Peered<P, F> {
    probe: P,
    name: &'static str,
    peer: F,
}

impl<P, F> Peered<P, F> {
    /// `probe` timed against `peer`, which the table calls `name`.
    pub fn new(probe: P, name: &'static str, peer: F) -> Self {
        Peered { probe, name, peer }
    }
}

impl<P: Tunable, F: Fn(&P, usize) -> Result<(), String>> Tunable for Peered<P, F> {
    fn shape(&self) -> (usize, usize, usize) {
        self.probe.shape()
    }
    fn key(&self) -> ProblemKey {
        self.probe.key()
    }
    fn candidates(&self) -> &[ConfigSpec] {
        self.probe.candidates()
    }
    fn compiler(&self) -> Compiler {
        self.probe.compiler()
    }
    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String> {
        self.probe.run(ops, spec, turn)
    }
    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String> {
        self.probe.check(ops, spec)
    }
    fn rotated(&self) -> (usize, usize) {
        self.probe.rotated()
    }
    fn peer_name(&self) -> Option<&'static str> {
        Some(self.name)
    }
    fn peer(&self, turn: usize) -> Result<(), String> {
        (self.peer)(&self.probe, turn)
    }
}
