//! The catalogue of every atom and snippet this crate emits, with the architecture each
//! needs, for NVRTC compile tests and GPU tests.

use crate::arch::Arch;
use crate::copy::CopyOp;
use crate::harness::includes;
use crate::mma::MmaAtom;
use crate::snippet::Snippet;
use crate::{
    cluster_dsmem, convert_int4, copy_cp_async, copy_ldsm, copy_ldst, copy_tma, grid_dependency, mma_sm80, mma_sm90,
    prefetch, sync,
};

/// What a catalogue entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// An MMA atom.
    Mma(Box<MmaAtom>),
    /// A copy operation.
    Copy(Box<CopyOp>),
    /// A helper snippet (fences, commits, waits, barriers, ...).
    Snippet(Box<Snippet>),
}

impl Entry {
    /// The snippet of the entry.
    pub fn snippet(&self) -> &Snippet {
        match self {
            Entry::Mma(m) => &m.snippet,
            Entry::Copy(c) => &c.snippet,
            Entry::Snippet(s) => s,
        }
    }
    /// The architecture it needs.
    pub fn arch(&self) -> Arch {
        self.snippet().arch
    }
    /// A descriptive name (CuTe's operation name for atoms, the function name otherwise).
    pub fn name(&self) -> &str {
        match self {
            Entry::Mma(m) => &m.name,
            Entry::Copy(c) => &c.name,
            Entry::Snippet(s) => &s.name,
        }
    }
}

/// Every MMA atom (SM80/SM89 `mma.sync` and all SM90a `wgmma` variants).
pub fn all_mma_atoms() -> Vec<MmaAtom> {
    let mut v = mma_sm80::all_sm80_atoms();
    v.extend(mma_sm90::all_sm90_atoms());
    v
}

/// Every copy operation.
pub fn all_copy_ops() -> Vec<CopyOp> {
    let mut v = copy_ldst::all_ldst();
    v.extend(copy_cp_async::all_cp_async());
    v.extend(copy_ldsm::all_ldsm_stsm());
    v.extend(copy_tma::all_tma().0);
    v
}

/// Every helper snippet that is not an atom.
pub fn all_helper_snippets() -> Vec<Snippet> {
    let mut v = vec![
        copy_cp_async::cp_async_commit_group(),
        copy_cp_async::cp_async_wait_group(),
        copy_cp_async::cp_async_wait_all(),
        copy_cp_async::cp_async_mbarrier_arrive_noinc(),
        mma_sm90::wgmma_fence(),
        mma_sm90::wgmma_commit_group(),
        mma_sm90::wgmma_wait_group(),
        mma_sm90::wgmma_fence_operand(),
        convert_int4::u4x8_to_f16x2_biased(),
        convert_int4::u4x8_to_bf16x2_biased(),
        grid_dependency::grid_dependency_wait(),
        grid_dependency::launch_dependents(),
        prefetch::prefetch_l2(),
    ];
    v.extend(cluster_dsmem::all());
    v.extend(copy_tma::all_tma().1);
    v.extend(sync::all_sync());
    v
}

/// Everything: MMA atoms, copy operations and helper snippets.
pub fn all_atoms() -> Vec<Entry> {
    let mut v: Vec<Entry> = all_mma_atoms().into_iter().map(|m| Entry::Mma(Box::new(m))).collect();
    v.extend(all_copy_ops().into_iter().map(|c| Entry::Copy(Box::new(c))));
    v.extend(all_helper_snippets().into_iter().map(|s| Entry::Snippet(Box::new(s))));
    v
}

/// The entries that compile for `target`.
pub fn atoms_for(target: Arch) -> Vec<Entry> {
    all_atoms()
        .into_iter()
        .filter(|e| e.arch().supported_on(target))
        .collect()
}

/// One translation unit defining every given snippet (includes deduplicated, each
/// function once), for compiling many snippets in one NVRTC call.
pub fn translation_unit(snippets: &[&Snippet]) -> String {
    let mut src = includes(snippets);
    let mut seen = std::collections::HashSet::new();
    for s in snippets {
        if seen.insert(s.name.clone()) {
            src.push('\n');
            src.push_str(&s.code);
        }
    }
    src
}
