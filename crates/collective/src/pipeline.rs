//! The circular-buffer cursor of CUTLASS's SM90 pipelines (`cutlass::PipelineState`).
//!
//! A pipeline of `stages` shared-memory buffers is walked by a producer (the TMA warp)
//! and by consumers (the MMA or epilogue warpgroups). Each side keeps a [`PipelineState`]:
//! the buffer it touches next (`index`), the parity it waits for on that buffer's
//! mbarrier (`phase`, flipped every time `index` wraps back to 0), and how many
//! iterations it has made in total (`count`). The mbarrier of a buffer completes one
//! phase per round of the ring, so `(index, phase)` names the exact round a wait is for.
//!
//! The kernel passes states by value into `load()` / `mma()` / `store()` and advances its
//! own copy afterwards by the number of iterations those calls made ([`PipelineState::advance`]).
//!
//! ```
//! use rcute_collective::PipelineState;
//! let mut s = PipelineState::new(4);
//! s.advance(3);
//! assert_eq!((s.index, s.phase), (3, 0));
//! s.advance(2); // wraps once: phase flips
//! assert_eq!((s.index, s.phase), (1, 1));
//! s.advance(5); // 1 + 5 = 6 wraps once more
//! assert_eq!((s.index, s.phase, s.count), (2, 0, 10));
//! assert_eq!(s.next().index, 3);
//! // A producer starts on the opposite parity: its buffers begin empty.
//! assert_eq!(PipelineState::producer_start(4).phase, 1);
//! ```

/// A position in a ring of `stages` pipeline buffers (CUTLASS's `PipelineState<Stages>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PipelineState {
    /// The buffer (stage) the next operation uses, in `0..stages`.
    pub index: usize,
    /// The mbarrier parity to wait for (0 or 1); flips each time `index` wraps.
    pub phase: u32,
    /// Iterations made since the start (never wraps in practice).
    pub count: u64,
    /// Number of buffers in the ring (at least 1).
    pub stages: usize,
}

impl PipelineState {
    /// The consumer start state of a ring of `stages` buffers: index 0, phase 0, count 0.
    /// A pipeline has at least one stage; `0` is taken as `1`.
    pub fn new(stages: usize) -> PipelineState {
        PipelineState {
            index: 0,
            phase: 0,
            count: 0,
            stages: stages.max(1),
        }
    }

    /// The producer start state (CUTLASS's `make_producer_start_state`): phase 1, since
    /// every buffer starts empty and the producer's first wait on the "empty" barrier must
    /// succeed at once.
    pub fn producer_start(stages: usize) -> PipelineState {
        PipelineState {
            phase: 1,
            ..PipelineState::new(stages)
        }
    }

    /// Move `n` iterations forward: `index = (index + n) % stages`, the phase flips once
    /// per wrap (so by the parity of `(index + n) / stages`), `count += n`.
    pub fn advance(&mut self, n: u64) -> &mut PipelineState {
        let stages = self.stages.max(1) as u64;
        let total = self.index as u64 + n;
        let wraps = total / stages;
        self.phase ^= (wraps & 1) as u32;
        self.index = (total % stages) as usize;
        self.count = self.count.wrapping_add(n);
        self
    }

    /// The state one iteration later (CUTLASS's `++state` on a copy).
    pub fn next(&self) -> PipelineState {
        let mut s = *self;
        s.advance(1);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CUTLASS's two-branch phase rule, for comparison.
    fn cutlass_advance(s: &mut PipelineState, n: u64) {
        let st = s.stages as u64;
        let i = s.index as u64;
        if n < st && i + n >= st {
            s.phase ^= 1;
        }
        if n >= st && ((i + n) / st) % 2 == 1 {
            s.phase ^= 1;
        }
        s.index = ((i + n) % st) as usize;
        s.count += n;
    }

    #[test]
    fn matches_cutlass_rule() {
        for stages in 1..7 {
            let mut a = PipelineState::new(stages);
            let mut b = a;
            for n in [0u64, 1, 2, 3, 5, 7, 8, 13, 1, 1, 1, 24, 6] {
                a.advance(n);
                cutlass_advance(&mut b, n);
                assert_eq!(a, b, "stages {stages}, step {n}");
            }
        }
    }

    #[test]
    fn zero_stages_is_one() {
        let mut s = PipelineState::new(0);
        s.advance(3);
        assert_eq!((s.index, s.phase, s.count, s.stages), (0, 1, 3, 1));
    }
}
