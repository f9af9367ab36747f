//! The group slots of the shared-ring streamed kernel of 16 rows
//! ([`rcute_collective::awq_streamed::AwqStreamed::group_slot_bytes`]): each lane copies
//! the scales of its eight columns (16 bytes) and their zero word of the group after the
//! current one into its own slots with `cp.async` when a group starts, in the commit group
//! of that step's weight refill, and reads them back when that group starts. The ring's
//! counted wait, which the step now takes before the group's registers, covers them: no
//! global load into registers is waited for at a group start.
//!
//! Why: loaded by `__ldg` into registers one group ahead (the register-ring kernels still
//! do), ptxas moved the loaded scales into the registers the group function reads right
//! after the (predicated) load, and that move waited for the load from memory at every
//! group start (sm_90a SASS; without the scale loads the 1 x 14336 x 4096 decode took 13.65
//! instead of 14.6 us on an H100: BENCHMARKS.md, Session 24, helper awqfix). Measured: a
//! gain at 16 rows, a loss at 8 (`AwqStreamed::with_shared_ring`).

use super::streamed::{decl_c, when};
use super::{s, Emit};
use crate::emit::Stmt;
use crate::lane_ring;

impl Emit<'_> {
    /// Whether the kernel has group slots (the shared ring at 16 rows).
    pub(super) fn group_slots(&self) -> bool {
        self.st().group_copy.is_some()
    }

    /// The slots (after the shared ring), the first group's copy with step 0's weight
    /// (commit group 0) and the registers the group function reads.
    pub(super) fn group_slots_prologue(&self) -> Vec<Stmt> {
        let st = self.st();
        let base = format!("smem + (rows + 1) * {} + {}", 4 * st.x_row_words, st.ring_bytes());
        vec![
            Stmt::Comment(
                "the lane's group slots after the ring (AwqStreamed::group_slot_bytes): the scales of its columns 64 wb + 8g .. + 8 and their zero word"
                    .into(),
            ),
            decl_c(
                "uint4* const",
                "gslot",
                format!("reinterpret_cast<uint4*>({base}) + threadIdx.x"),
                "16-byte unit threadIdx.x",
            ),
            decl_c(
                "uint32_t* const",
                "zslot",
                format!("reinterpret_cast<uint32_t*>({base} + {}) + threadIdx.x", 16 * self.p.threads),
                "word threadIdx.x after the scale units",
            ),
            Stmt::decl("int", "gnext", "(k0 + 16 * s_begin) / G"),
            Stmt::decl("uint4", "s_raw", "make_uint4(0u, 0u, 0u, 0u)"),
            Stmt::decl("uint32_t", "z_raw", "0u"),
            decl_c(
                "int",
                "gready",
                "0",
                "the commit group of the slots' last copy: landed once step gready's wait is done",
            ),
            Stmt::Comment("group gnext's slots with step 0's weight (commit group 0)".into()),
            when("n_my > 0", self.group_slot_copy()),
        ]
    }

    /// The copy of group `gnext`'s scales and zero word into the lane's slots.
    fn group_slot_copy(&self) -> Vec<Stmt> {
        let st = self.st();
        let ring = st.lane_ring.as_ref().expect("group slots come with the shared ring");
        let zero = st.group_copy.as_ref().expect("group slots come with their copy");
        vec![
            decl_c(
                "const long long",
                "gz",
                format!("(long long)gnext * N8 + {}", self.group_col()),
                "16-byte scale unit and zero word of the lane's columns",
            ),
            s(format!(
                "{}(gslot, reinterpret_cast<const uint4*>(scales) + gz)",
                ring.copy[0].name
            )),
            s(format!("{}(zslot, qzeros + gz)", zero.name)),
        ]
    }

    /// Where a group starts (after the step's wait): its registers from the slots, then
    /// the next group's copy (with this step's refill) where the warp's steps reach it.
    pub(super) fn group_from_slots(&self, group_args: &str) -> Vec<Stmt> {
        let st = self.st();
        let ring = st.lane_ring.as_ref().expect("group slots come with the shared ring");
        let d = st.ring;
        vec![
            Stmt::Comment(
                "a group starts: its registers from the lane's group slots, then the next group's copy".into(),
            ),
            when(
                "krem == 0",
                [vec![
                    Stmt::Comment(format!(
                        "the step's wait landed commit groups 0 .. s; a copy in a later one (a group of fewer than {d} steps) waits for all"
                    )),
                    when("gready > s", vec![lane_ring::drain(ring)]),
                    Stmt::assign("s_raw", "*gslot"),
                    Stmt::assign("z_raw", "*zslot"),
                ], self.scale_rebase(), vec![
                    s(format!("{}_group({group_args})", self.name)),
                    Stmt::assign("krem", "(gnext + 1) * G - (k0 + 16 * (s_begin + s))"),
                    s("++gnext"),
                    Stmt::Comment(format!(
                        "the next group where the warp's steps reach it: its slots in this step's commit group s + {d}"
                    )),
                    when(
                        "gnext < groups && gnext * G < k0 + 16 * (s_begin + n_my)",
                        [self.group_slot_copy(), vec![Stmt::assign("gready", format!("s + {d}"))]].concat(),
                    ),
                ]].concat(),
            ),
        ]
    }
}
