//! The tuner: compile a problem's candidates in parallel, check each against a reference,
//! time the ones that pass, and return the fastest. `rcute tune` (with a progress bar and
//! a peer) and `RCUTE_TUNING=on-miss` (inside the op, no peer) both run [`tune`].
//!
//! Per problem: the candidates are compiled on a thread pool (NVRTC programs are
//! independent; one thread per core) through the [`Ops`] kernel tables, so the timed calls
//! find them built; then, one by one, each candidate runs once and is checked
//! ([`Tunable::check`]), and the ones that pass are timed with CUDA events
//! ([`super::timing::median_us`]), paired round-robin with the peer where there is one,
//! the weight operand rotated over copies that together exceed three times the L2
//! ([`copies_for`]). The rules' choice is always timed (it is first). Then the fastest
//! few and the rules' choice are timed again side by side ([`FINALISTS`]), and the winner
//! is taken from that round, so it is never slower than the rules in the same samples.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

pub use super::budget::TuneBudget;
use super::timing::median_us;
use super::{ConfigSpec, ProblemKey};
use crate::Ops;

/// Bytes the rotated weight copies must exceed: three times the H200's 50 MB L2.
pub const ROTATE_BYTES: usize = 150 << 20;

/// Copies of a weight of `bytes` that together exceed [`ROTATE_BYTES`] (at most 64).
///
/// ```
/// use rcute_ops::tuning::tuner::copies_for;
/// assert_eq!(copies_for(32 << 20), 5); // a 4096 x 4096 bf16 weight
/// assert_eq!(copies_for(1), 64);
/// ```
pub fn copies_for(bytes: usize) -> usize {
    ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64)
}

/// Builds one candidate's kernel without running it (called from several threads at once).
pub type Compiler = Box<dyn Fn(&Ops, &ConfigSpec) -> Result<(), String> + Sync>;

/// One problem under tuning, with its buffers on the GPU.
pub trait Tunable {
    /// `(M, N, K)` (for MoE: tokens, hidden, intermediate).
    fn shape(&self) -> (usize, usize, usize);
    /// The table key of the problem.
    fn key(&self) -> ProblemKey;
    /// The candidates, the rules' choice first.
    fn candidates(&self) -> &[ConfigSpec];
    /// What builds a candidate's kernel without running it.
    fn compiler(&self) -> Compiler;
    /// Run a candidate on weight copy `turn`.
    fn run(&self, ops: &Ops, spec: &ConfigSpec, turn: usize) -> Result<(), String>;
    /// Run a candidate once and compare its output with the reference; `Err` says why it
    /// is wrong.
    fn check(&self, ops: &Ops, spec: &ConfigSpec) -> Result<(), String>;
    /// Weight copies and the bytes of one.
    fn rotated(&self) -> (usize, usize);
    /// The peer's name in the table, if the problem has one.
    fn peer_name(&self) -> Option<&'static str> {
        None
    }
    /// Run the peer on weight copy `turn` (only called when [`Tunable::peer_name`] is some).
    fn peer(&self, _turn: usize) -> Result<(), String> {
        Err("no peer".into())
    }
}

/// What a progress display hears (every method does nothing by default; called from the
/// compiling threads too).
pub trait TuneObserver: Sync {
    /// Compilation of `total` candidates starts.
    fn compiling(&self, _total: usize) {}
    /// One more candidate was compiled (or failed to).
    fn compiled(&self) {}
    /// Checking and timing of `total` compiled candidates starts.
    fn timing(&self, _total: usize) {}
    /// One more candidate was checked (and timed, if it passed); `best` so far.
    fn timed(&self, _best: Option<&Timed>) {}
}

/// The observer of [`TuneObserver`]'s defaults.
pub struct Quiet;
impl TuneObserver for Quiet {}

/// One timed candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    /// The configuration.
    pub spec: ConfigSpec,
    /// Its median microseconds per call.
    pub us: f64,
    /// The peer's, in the same samples.
    pub peer_us: Option<f64>,
}

/// What tuning one problem found.
#[derive(Clone, Debug)]
pub struct TuneOutcome {
    /// The problem's table key.
    pub key: ProblemKey,
    /// The rules' choice, if it was timed.
    pub rules: Option<Timed>,
    /// The winner: the fastest candidate, or the rules' choice when that is within
    /// [`RULES_MARGIN`] of it; `None` if none ran.
    pub best: Option<Timed>,
    /// Candidates in the space.
    pub candidates: usize,
    /// Candidates timed.
    pub timed: usize,
    /// `config: why` for each candidate that failed to compile, check or time.
    pub rejected: Vec<String>,
}

impl TuneOutcome {
    /// The table entry of the winner, if there is one (its fingerprint is stamped when it
    /// is written: [`super::TuningTable::merge_into_file`]).
    pub fn entry(&self, peer: Option<&str>) -> Option<super::Entry> {
        let b = self.best.as_ref()?;
        Some(super::Entry {
            key: self.key.clone(),
            config: b.spec.to_string(),
            fingerprint: None,
            us: b.us,
            peer: b.peer_us.and(peer.map(str::to_string)),
            peer_us: b.peer_us,
        })
    }
}

/// Compile the candidates on all cores (through the `Ops` kernel tables); returns the ones
/// that compiled and why the others did not. Workers take no new candidate after
/// `deadline`.
pub fn compile_all(
    ops: &Ops,
    specs: &[ConfigSpec],
    compile: &Compiler,
    deadline: Option<Instant>,
    obs: &dyn TuneObserver,
) -> (Vec<ConfigSpec>, Vec<String>) {
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(specs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<(), String>>>> = specs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                if deadline.is_some_and(|d| Instant::now() > d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { break };
                let r = compile(ops, spec);
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                obs.compiled();
            });
        }
    });
    let mut ok = Vec::new();
    let mut rejected = Vec::new();
    for (spec, r) in specs.iter().zip(results) {
        match r.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(Ok(())) => ok.push(spec.clone()),
            Some(Err(e)) => rejected.push(format!("{spec}: {e}")),
            None => rejected.push(format!("{spec}: not compiled (budget)")),
        }
    }
    (ok, rejected)
}

/// Tune one problem: compile, check and time its candidates within `budget`.
///
/// # Errors
///
/// Only a failed CUDA stream operation outside a candidate's own calls; a candidate that
/// fails is listed in [`TuneOutcome::rejected`].
pub fn tune(ops: &Ops, t: &dyn Tunable, budget: &TuneBudget, obs: &dyn TuneObserver) -> Result<TuneOutcome, String> {
    let start = Instant::now();
    let total = t.candidates().len();
    let rules_spec = t.candidates().first().cloned();
    obs.compiling(total);
    let compile_deadline = budget
        .include_compile
        .then(|| start + std::time::Duration::from_secs_f64(budget.seconds * 0.75));
    let (specs, mut rejected) = compile_all(ops, t.candidates(), &t.compiler(), compile_deadline, obs);
    obs.timing(specs.len());
    let timing_start = if budget.include_compile { start } else { Instant::now() };
    let stream = ops.stream().clone();
    let with_peer = t.peer_name().is_some();
    let mut timed: Vec<Timed> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        // The rules' choice is timed whatever the budget says, so there is a baseline.
        let is_rules = Some(spec) == rules_spec.as_ref();
        if !is_rules && i > 0 && timing_start.elapsed().as_secs_f64() > budget.seconds {
            rejected.push(format!("{spec}: not timed (budget)"));
            continue;
        }
        if let Err(why) = t.check(ops, spec) {
            rejected.push(format!("{spec}: {why}"));
            obs.timed(best_of(&timed));
            continue;
        }
        let mut turn = 0usize;
        let mut run = || {
            turn += 1;
            t.run(ops, spec, turn)
        };
        let mut turn_p = 0usize;
        let mut peer = || {
            turn_p += 1;
            t.peer(turn_p)
        };
        let result = if with_peer {
            median_us(&stream, budget.iters, budget.graphs, &mut [&mut run, &mut peer])
        } else {
            median_us(&stream, budget.iters, budget.graphs, &mut [&mut run])
        };
        match result {
            Ok((v, _)) => timed.push(Timed {
                spec: spec.clone(),
                us: v[0],
                peer_us: v.get(1).copied(),
            }),
            Err(x) => {
                rejected.push(format!("{spec}: {x}"));
                // A failed launch may leave an error on the stream: stop at one that sticks.
                stream.synchronize().map_err(|e| format!("stream after {spec}: {e}"))?;
            }
        }
        obs.timed(best_of(&timed));
    }
    let timed_count = timed.len();
    let finals = finalists(&timed, rules_spec.as_ref());
    if finals.len() > 1 {
        match confirm(ops, t, budget, &finals) {
            Ok(again) => timed = again,
            Err(x) => rejected.push(format!("confirmation round: {x} (the sweep's times are kept)")),
        }
    }
    let rules = timed.iter().find(|x| Some(&x.spec) == rules_spec.as_ref()).cloned();
    Ok(TuneOutcome {
        key: t.key(),
        best: winner(&timed, rules.as_ref(), rules_margin(t.shape().0)).cloned(),
        rules,
        candidates: total,
        timed: timed_count,
        rejected,
    })
}

/// Candidates the confirmation round times again beside the rules' choice.
pub const FINALISTS: usize = 4;

/// The confirmation round's entrants: the [`FINALISTS`] fastest of the sweep and the rules'
/// choice (if it was timed), fastest first.
fn finalists(timed: &[Timed], rules: Option<&ConfigSpec>) -> Vec<Timed> {
    let mut by_time: Vec<&Timed> = timed.iter().collect();
    by_time.sort_by(|x, y| x.us.total_cmp(&y.us));
    let mut out: Vec<Timed> = by_time.iter().take(FINALISTS).map(|x| (*x).clone()).collect();
    if let Some(r) = timed.iter().find(|x| Some(&x.spec) == rules) {
        if !out.iter().any(|x| x.spec == r.spec) {
            out.push(r.clone());
        }
    }
    out
}

/// The confirmation round: `finals` timed again, all in the same samples (round-robin, with
/// the peer), twice the sweep's samples. The sweep times its candidates one after another,
/// so they see different clocks and temperatures (the rules' choice, timed first, on a GPU
/// that has not warmed up): on the H200 (session 11) a pick timed 3 % faster than the
/// rules' choice in the sweep ran 1 % slower than it in the benchmark. Side by side, the
/// comparison is the benchmark's.
fn confirm(ops: &Ops, t: &dyn Tunable, budget: &TuneBudget, finals: &[Timed]) -> Result<Vec<Timed>, String> {
    let mut turns = vec![0usize; finals.len()];
    let mut runs: Vec<Box<dyn FnMut() -> Result<(), String> + '_>> = finals
        .iter()
        .zip(turns.iter_mut())
        .map(|(f, turn)| {
            Box::new(move || {
                *turn += 1;
                t.run(ops, &f.spec, *turn)
            }) as Box<dyn FnMut() -> Result<(), String> + '_>
        })
        .collect();
    let mut turn_p = 0usize;
    if t.peer_name().is_some() {
        runs.push(Box::new(move || {
            turn_p += 1;
            t.peer(turn_p)
        }));
    }
    let mut fs: Vec<&mut dyn FnMut() -> Result<(), String>> = runs.iter_mut().map(|f| &mut **f as _).collect();
    let (us, _) = median_us(ops.stream(), 2 * budget.iters, budget.graphs, &mut fs)?;
    let peer_us = (us.len() > finals.len()).then(|| us[finals.len()]);
    Ok(finals
        .iter()
        .zip(&us)
        .map(|(f, &us)| Timed {
            spec: f.spec.clone(),
            us,
            peer_us: peer_us.or(f.peer_us),
        })
        .collect())
}

fn best_of(timed: &[Timed]) -> Option<&Timed> {
    timed.iter().min_by(|x, y| x.us.total_cmp(&y.us))
}

/// A candidate replaces the rules' choice only when it is faster by more than this
/// fraction of the rules' time. Closer than that the two are within one timing's
/// run-to-run noise: on the H200 (session 10) the tuner's pick at 32x14336x4096, timed at
/// exactly the rules' 32.6 us, ran 2 % slower than the rules' choice in the benchmark.
pub const RULES_MARGIN: f64 = 0.01;

/// [`RULES_MARGIN`] for compute-bound problems (at least [`COMPUTE_BOUND_M`] rows): these
/// run at the power limit, where the clocks follow the heat of whatever ran just before, so
/// even side by side their times move by some percent between rounds. On the H200
/// (session 11) INT8 4096x14336x4096 `sm90:128x128x128,pp`, timed 1.7 % faster than the
/// rules' choice in the confirmation round, ran 4-9 % slower in the benchmark.
pub const RULES_MARGIN_COMPUTE_BOUND: f64 = 0.03;

/// Rows from which a problem counts as compute-bound for [`rules_margin`] (the decode
/// buckets end at 128).
pub const COMPUTE_BOUND_M: usize = 256;

/// The margin a candidate must beat the rules' choice by, for a problem of `m` rows.
pub fn rules_margin(m: usize) -> f64 {
    if m >= COMPUTE_BOUND_M {
        RULES_MARGIN_COMPUTE_BOUND
    } else {
        RULES_MARGIN
    }
}

/// The entry to record: the fastest candidate, or the rules' choice when that is within
/// `margin` of it.
fn winner<'a>(timed: &'a [Timed], rules: Option<&'a Timed>, margin: f64) -> Option<&'a Timed> {
    let best = best_of(timed)?;
    match rules {
        Some(r) if best.us * (1.0 + margin) >= r.us => Some(r),
        _ => Some(best),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(spec: &str, us: f64) -> Timed {
        Timed {
            spec: spec.parse().unwrap(),
            us,
            peer_us: None,
        }
    }

    #[test]
    fn the_rules_choice_stays_unless_beaten_by_the_margin() {
        let rules = timed("sm90:64x128x64,pp", 32.6);
        let close = vec![rules.clone(), timed("32x64x128,1x4,auto,1", 32.5)];
        assert_eq!(winner(&close, Some(&rules), RULES_MARGIN).unwrap().spec, rules.spec);
        let faster = vec![rules.clone(), timed("32x64x128,1x4,auto,1", 32.0)];
        assert_eq!(winner(&faster, Some(&rules), RULES_MARGIN).unwrap().us, 32.0);
        // Without a timed rules' choice (it failed its check), the fastest.
        assert_eq!(winner(&close, None, RULES_MARGIN).unwrap().us, 32.5);
        assert!(winner(&[], Some(&rules), RULES_MARGIN).is_none());
        // A compute-bound problem needs the wider margin: 1.7 % is not enough.
        let big_rules = timed("sm90:128x256x128,coop,w0", 371.9);
        let big = vec![big_rules.clone(), timed("sm90:128x128x128,pp", 365.7)];
        assert_eq!(winner(&big, Some(&big_rules), rules_margin(4096)).unwrap().us, 371.9);
        assert_eq!(winner(&big, Some(&big_rules), rules_margin(64)).unwrap().us, 365.7);
    }

    #[test]
    fn the_finalists_are_the_fastest_and_the_rules_choice() {
        let sweep: Vec<Timed> = [
            ("sm90:64x128x64,pp", 33.0),
            ("sm90:64x128x64,ws,s9", 32.0),
            ("32x64x128,1x4,3,1", 32.2),
            ("32x64x128,1x4,auto,1", 32.9),
            ("16x64x128,1x4,3,1", 32.5),
            ("sm90:64x64x64,ws,s14", 40.0),
        ]
        .iter()
        .map(|&(s, us)| timed(s, us))
        .collect();
        let rules: ConfigSpec = "sm90:64x128x64,pp".parse().unwrap();
        let f = finalists(&sweep, Some(&rules));
        let names: Vec<String> = f.iter().map(|x| x.spec.to_string()).collect();
        assert_eq!(
            names,
            [
                "sm90:64x128x64,ws,s9",
                "32x64x128,1x4,3,1",
                "16x64x128,1x4,3,1",
                "32x64x128,1x4,auto,1",
                "sm90:64x128x64,pp"
            ]
        );
        // The rules' choice among the fastest is not entered twice.
        assert_eq!(finalists(&sweep[..3], Some(&rules)).len(), 3);
        // Only what was timed enters.
        assert_eq!(finalists(&sweep[1..2], Some(&rules)).len(), 1);
    }
}
