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
//! flag, and [`launch_chained`] launches them.
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
pub fn chain_link(mut f: CFunction) -> CFunction {
    let mut body = prologue(Some(EARLY_TRIGGER));
    body.append(&mut f.body);
    f.body = body;
    f.params.push(early_trigger_param());
    f
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
    let lc = lc.with_programmatic_dependency(true);
    let args = args.i32(i32::from(early_trigger_for(f, &lc)));
    // SAFETY: the caller's guarantee, and the flag is the kernel's last parameter.
    unsafe { f.launch(&lc, &args) }
}
