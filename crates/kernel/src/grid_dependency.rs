//! Programmatic dependent launch in generated kernels: the statements a kernel opens with
//! when its launches carry [`LaunchConfig::with_programmatic_dependency`], and the
//! snippets they call.
//!
//! Such a kernel may be resident before the previous kernel of its stream has finished
//! (its CTAs set up shared memory and barriers meanwhile), so every thread executes
//! `rc_grid_dependency_wait()` before its first global memory access, including threads
//! that return early; then `rc_launch_dependents()` may let the next kernel launch, which
//! waits for this one in the same way. (When to trigger is the launcher's choice,
//! passed as a kernel parameter: [`early_trigger`].) The chain stays ordered: a kernel cannot complete
//! before its predecessor, because each of its threads waited for it.
//!
//! On a split-K GEMM this hides the reduction kernel's launch behind the main kernel's
//! tail, and in a sequence of GEMMs (a decoder layer, a CUDA graph) each launch behind the
//! previous kernel's. The small kernels around the grouped GEMMs of the MoE layer (routing,
//! gather, quantization, finalize) are links of the same chain: [`chain_link`] opens them
//! with [`prologue`]`(Some(`[`EARLY_TRIGGER`]`))` and ends their parameter list with the
//! flag, and [`launch_chained`] launches them. A link may do a little before its wait
//! ([`chain_link_with_prelude`]: hints such as L2 prefetches of data the chain never
//! writes), and a link whose dependent does such work and cannot share an SM with it
//! triggers early whatever its size ([`tail_trigger`], [`launch_chained_with`]), so the
//! dependent's CTAs work on the SMs its tail leaves idle.
//!
//! [`LaunchConfig::with_programmatic_dependency`]: crate::launch::LaunchConfig::with_programmatic_dependency

use crate::emit::{Function as CFunction, Stmt};
use crate::launch::{Function, KernelArgs, LaunchConfig, LaunchError};
use rcute_atom::grid_dependency::{grid_dependency_wait, launch_dependents};
use rcute_atom::Snippet;

/// The snippets [`prologue`] calls.
pub fn snippets() -> [Snippet; 2] {
    [grid_dependency_wait(), launch_dependents()]
}

/// Whether a kernel of `ctas` CTAs on a GPU of `sms` SMs lets the next kernel launch as soon
/// as it starts (`rc_launch_dependents()` first thing) rather than when it ends.
///
/// Early is right when the next kernel's CTAs find idle SMs to wait on: on the H200
/// (session 10, decode GEMMs in CUDA graphs) an early trigger saved 0.3-1.1 us per call for
/// grids of 64 CTAs and cost up to 2 us for grids of 112 or more, whose successors could
/// only sit beside running CTAs; without a trigger (the dependents launch at exit) no shape
/// lost against launches without a programmatic dependency. Hence: early when the grid
/// occupies at most half of the SMs.
///
/// ```
/// use rcute_kernel::grid_dependency::early_trigger;
/// assert!(early_trigger(64, 132));
/// assert!(!early_trigger(112, 132));
/// ```
pub fn early_trigger(ctas: u64, sms: u32) -> bool {
    ctas.saturating_mul(2) <= u64::from(sms)
}

/// [`early_trigger`] for launch `lc` of `f` on `f`'s GPU: the value of the kernel's
/// `early_trigger` argument.
pub(crate) fn early_trigger_for(f: &Function, lc: &LaunchConfig) -> bool {
    let ctas = lc.grid.volume().map_or(u64::MAX, u64::from);
    early_trigger(ctas, f.gpu().sm_count())
}

/// The statements, placed before the kernel's first global memory access and before any
/// early return: wait for the previous kernel, then, with `early` the name of an `int`
/// kernel parameter, let the next kernel launch when that is non-zero (see
/// [`early_trigger`]). Without it the next kernel launches when this one exits.
///
/// ```
/// use rcute_kernel::emit::Stmt;
/// let s = rcute_kernel::grid_dependency::prologue(Some("early_trigger"));
/// assert_eq!(s[1], Stmt::Expr("rc_grid_dependency_wait()".into()));
/// assert!(matches!(&s[2], Stmt::If { cond, .. } if cond == "early_trigger"));
/// assert_eq!(rcute_kernel::grid_dependency::prologue(None).len(), 2);
/// ```
pub fn prologue(early: Option<&str>) -> Vec<Stmt> {
    let mut v = vec![
        Stmt::Comment(
            "programmatic dependent launch: wait for the previous kernel's memory before touching global memory".into(),
        ),
        Stmt::Expr("rc_grid_dependency_wait()".into()),
    ];
    if let Some(flag) = early {
        v.push(Stmt::If {
            cond: flag.into(),
            then: vec![
                Stmt::Comment("few CTAs: the next kernel may launch now and wait on the idle SMs".into()),
                Stmt::Expr("rc_launch_dependents()".into()),
            ],
            otherwise: vec![],
        });
    }
    v
}

/// The name of the `int` parameter that carries [`early_trigger`]'s answer into a kernel.
pub const EARLY_TRIGGER: &str = "early_trigger";

/// The `(type, name)` of the [`EARLY_TRIGGER`] parameter, the last of a chained kernel's.
pub fn early_trigger_param() -> (String, String) {
    ("int".into(), EARLY_TRIGGER.into())
}

/// `f` as a link of a chain of programmatically dependent kernels: its body opened by
/// [`prologue`]`(Some(EARLY_TRIGGER))` and [`early_trigger_param`] appended to its
/// parameters (the unit needs [`snippets`]); launch it with [`launch_chained`].
///
/// ```
/// use rcute_kernel::emit::{Function, Stmt};
/// use rcute_kernel::grid_dependency::{chain_link, early_trigger_param};
/// let f = Function {
///     qualifiers: "extern \"C\" __global__".into(),
///     ret: "void".into(),
///     name: "k".into(),
///     params: vec![("int*".into(), "p".into())],
///     doc: vec![],
///     body: vec![Stmt::assign("p[0]", "1")],
/// };
/// let l = chain_link(f);
/// assert_eq!(l.params.last(), Some(&early_trigger_param()));
/// assert_eq!(l.body[1], Stmt::Expr("rc_grid_dependency_wait()".into()));
/// assert_eq!(l.body.last(), Some(&Stmt::assign("p[0]", "1")));
/// ```
pub fn chain_link(f: CFunction) -> CFunction {
    chain_link_with_prelude(vec![], f)
}

/// [`chain_link`] with `prelude` placed before the wait: the work a link may do while its
/// predecessor still runs.
///
/// What the prelude may do is narrow, because before the wait nothing the predecessors
/// wrote is guaranteed visible. PTX (`griddepcontrol`): `.wait` makes the *prerequisite*
/// grids' memory operations "performed and made visible to the current grid", and
/// `.launch_dependents` only lets the dependent be scheduled; the CUDA programming guide
/// and CUDA Tile state that a trigger implies neither the producer's completion nor the
/// visibility of its writes. Nothing is documented about a grid two links back, although
/// in a chain of links (each waits before it triggers) it has completed, in real time,
/// before the next-but-one link is launched. So a prelude
/// * writes no global memory and leaves nothing its thread reads later: loads that may
///   reach memory a predecessor wrote bypass the L1 (`__ldcg`), so no line they cache can
///   be read after the wait;
/// * lets what it reads from memory a predecessor (even two links back) wrote steer
///   only hints, never a result: L2 prefetches ([`rcute_atom::prefetch`]) of addresses
///   that stay inside buffers the kernel may read whatever value was read (the operands
///   the chain never writes, such as the weights of a MoE layer);
/// * keeps every thread's wait: no thread returns before it (the chain stays ordered).
///
/// ```
/// use rcute_kernel::emit::{Function, Stmt};
/// use rcute_kernel::grid_dependency::chain_link_with_prelude;
/// let f = Function {
///     qualifiers: "extern \"C\" __global__".into(),
///     ret: "void".into(),
///     name: "k".into(),
///     params: vec![("int*".into(), "p".into())],
///     doc: vec![],
///     body: vec![Stmt::assign("p[0]", "1")],
/// };
/// let l = chain_link_with_prelude(vec![Stmt::Comment("prefetch".into())], f);
/// assert_eq!(l.body[0], Stmt::Comment("prefetch".into()));
/// assert_eq!(l.body[2], Stmt::Expr("rc_grid_dependency_wait()".into()));
/// ```
pub fn chain_link_with_prelude(prelude: Vec<Stmt>, mut f: CFunction) -> CFunction {
    let mut body = prelude;
    body.extend(prologue(Some(EARLY_TRIGGER)));
    body.append(&mut f.body);
    f.body = body;
    f.params.push(early_trigger_param());
    f
}

/// Whether a link should trigger its dependent early (as soon as every CTA has passed its
/// wait) whatever its grid's size, because the dependent then only fills this grid's
/// tail: its CTAs (`next_smem` bytes of shared memory each) cannot share an SM with one of
/// this grid's (`this_smem`) when the two need more than one block may opt in to
/// (`max_smem_per_block`; an SM holds at most that plus 1 KB, less 1 KB reserved per
/// block). Once all of this grid's CTAs have started, the dependent's take only the SMs
/// that this grid's finished CTAs leave, and do there what they can before their own
/// wait (prefetch, [`chain_link_with_prelude`]) instead of idling. (The size rule,
/// [`early_trigger`], is for dependents that would sit beside running CTAs.)
///
/// ```
/// use rcute_kernel::grid_dependency::tail_trigger;
/// let kib = 1024;
/// assert!(tail_trigger(144 * kib, 144 * kib, 227 * kib)); // 16x128x64 tiles, 8 stages
/// assert!(!tail_trigger(72 * kib, 72 * kib, 227 * kib)); // 4 stages: they can share an SM
/// ```
pub fn tail_trigger(this_smem: u32, next_smem: u32, max_smem_per_block: u32) -> bool {
    u64::from(this_smem) + u64::from(next_smem) > u64::from(max_smem_per_block)
}

/// Launches `f` as a link of a chain of programmatically dependent kernels: `lc` with the
/// dependency ([`LaunchConfig::with_programmatic_dependency`]) and `args` followed by the
/// [`EARLY_TRIGGER`] flag that [`early_trigger`] gives this grid on `f`'s GPU. The kernel
/// opens with [`prologue`]`(Some(EARLY_TRIGGER))` and its last parameter is
/// [`early_trigger_param`].
///
/// # Errors
///
/// As [`Function::launch`].
///
/// # Safety
///
/// As [`Function::launch`]: `args` are the kernel's parameters but the last, and every
/// buffer they name is valid for the kernel.
pub unsafe fn launch_chained(f: &Function, lc: LaunchConfig, args: KernelArgs) -> Result<(), LaunchError> {
    // SAFETY: the caller's guarantee.
    unsafe { launch_chained_with(f, lc, args, false) }
}

/// [`launch_chained`], triggering early also where [`early_trigger`] would not when
/// `tail` is set (the caller's [`tail_trigger`] answer for this launch and the next).
///
/// # Errors
///
/// As [`Function::launch`].
///
/// # Safety
///
/// As [`launch_chained`].
pub unsafe fn launch_chained_with(
    f: &Function,
    lc: LaunchConfig,
    args: KernelArgs,
    tail: bool,
) -> Result<(), LaunchError> {
    let lc = lc.with_programmatic_dependency(true);
    let args = args.i32(i32::from(tail || early_trigger_for(f, &lc)));
    // SAFETY: the caller's guarantee, and the flag is the kernel's last parameter.
    unsafe { f.launch(&lc, &args) }
}
