//! The consumer's `wgmma` shared-memory descriptors, iterated as CuTe's `GmmaDescriptor`
//! iterator does: each operand's descriptor is built once per consumer warpgroup (the
//! constant high word, and the low word holding the leading byte offset and the start
//! address of stage 0), and every stage, m64 atom and k-block adds its byte offset / 16 to
//! the low word, one 32-bit integer add, instead of rebuilding `(addr & 0x3FFFF) >> 4 |
//! constant` per `wgmma`.
//!
//! The addition moves the start address (bits `[0,14)` of the low word) only while the sum
//! stays below `2^14`, i.e. while every address a descriptor names stays below `2^18`
//! bytes of the CTA's shared window; above, it would carry into bits 14-15 and the
//! leading byte offset. [`Sm90Descriptors::new`] bounds the largest start address the plan
//! allows (the window's system reserve and the alignment slack, then the farthest stage,
//! warpgroup rows, m64 atom and k-block) and refuses the plan otherwise.

use super::*;

/// Shared memory the system reserves at the start of every CTA's shared window (CUDA's
/// `cudaDevAttrReservedSharedMemoryPerBlock`, 1 KiB on SM90); the kernel's dynamic shared
/// memory starts after it.
pub const SMEM_SYSTEM_RESERVE: usize = 1024;

/// The start-address field limit: 14 bits.
const START_FIELD_LIMIT: u32 = 1 << 14;

/// The descriptors of one SM90 GEMM plan's mainloop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm90Descriptors {
    /// A's descriptor fields (m64 atom rows, one k-block; start address 0).
    pub a: GmmaDescriptor,
    /// B's descriptor fields (one `wgmma` atom's `atom_n` rows, one k-block; start address 0).
    pub b: GmmaDescriptor,
    /// `[low, high]` words of A's descriptor with start address 0.
    pub a_words: [u32; 2],
    /// `[low, high]` words of B's descriptor with start address 0.
    pub b_words: [u32; 2],
    /// Start-address field of one stage of A and of B (the stage's bytes / 16).
    pub stage_field: [u32; 2],
    /// Start-address field of one consumer warpgroup's rows of A (cooperative: its
    /// `wg_rows` rows; 0 for the schedules whose warpgroups read all of A).
    pub wg_field: u32,
    /// Start-address field of one m64 atom's rows of A.
    pub atom_field: u32,
    /// Start-address field of one k-block (the `wgmma` K) in a K-major operand row: the
    /// k-blocks of a k-tile are this far apart, for A and B.
    pub kblock_field: u32,
    /// Start-address field of one `wgmma` atom's rows of B (`atom_n` rows): the atoms
    /// along N of a tile wider than one atom are this far apart.
    pub natom_field: u32,
    /// K-blocks per k-tile.
    pub kblocks: i64,
    /// The largest start-address field of any `wgmma` of the kernel: below `2^14`.
    pub max_start_field: u32,
}

impl Sm90Descriptors {
    /// The descriptors of a plan's mainloop: `row_bytes` are the bytes of one operand row of
    /// a k-tile, `bn` the rows of B's tile (one or more `wgmma` atoms along N), `offsets`
    /// the A and B byte offsets in the kernel's dynamic shared memory.
    pub(super) fn new(
        ml: &Sm90Mainloop,
        consumers: i64,
        row_bytes: i64,
        bn: i64,
        offsets: [usize; 2],
    ) -> Result<Sm90Descriptors, GemmError> {
        let atom = &ml.smem_atom_a;
        let bk = ml.config.tile[2];
        let k = ml.mma_atom.shape_mnk[2];
        let kblocks = bk / k;
        let a = operand_desc(atom, 64, bk, k)?;
        let atom_n = ml.mma_atom.shape_mnk[1];
        let b = operand_desc(atom, atom_n, bk, k)?;
        let words = |d: &GmmaDescriptor| d.words_without_start().map_err(|e| cfg_err(e.to_string()));
        let kb_bytes = (0..kblocks)
            .map(|kb| kblock_bytes(atom, bk, k, kb))
            .collect::<Result<Vec<_>, _>>()?;
        let step = kb_bytes.get(1).copied().unwrap_or(0);
        if kb_bytes.iter().enumerate().any(|(kb, &b)| b != kb as i64 * step) {
            return Err(cfg_err(format!(
                "the k-blocks of a {bk}-wide k-tile in {atom} are not evenly spaced ({kb_bytes:?} bytes): the descriptor iteration steps by one offset"
            )));
        }
        let field = |bytes: i64| -> Result<u32, GemmError> {
            let b = u32::try_from(bytes).map_err(|_| cfg_err(format!("descriptor offset {bytes} B")))?;
            GmmaDescriptor::start_field(b).map_err(|e| cfg_err(format!("wgmma descriptor: {e}")))
        };
        let coop = ml.config.schedule.is_cooperative();
        let wg_bytes = if coop { ml.wg_tile[0] * row_bytes } else { 0 };
        let stages = ml.stages as i64;
        let [sa, sb] = ml.stage_bytes_ab.map(|b| b as i64);
        // The farthest start address of A and of B from the dynamic shared memory's base.
        let last_a = offsets[0] as i64
            + (stages - 1) * sa
            + (consumers - 1) * wg_bytes
            + (ml.m_atoms_per_wg - 1) * 64 * row_bytes
            + (kblocks - 1) * step;
        let last_b =
            offsets[1] as i64 + (stages - 1) * sb + (bn / atom_n - 1) * atom_n * row_bytes + (kblocks - 1) * step;
        let window_base = (SMEM_SYSTEM_RESERVE + ALIGN_SLACK) as i64;
        let max_start = window_base + last_a.max(last_b);
        let max_start_field = u32::try_from(max_start >> 4).unwrap_or(u32::MAX);
        if max_start_field >= START_FIELD_LIMIT {
            return Err(cfg_err(format!(
                "a wgmma descriptor would name shared byte {max_start} of the CTA's window: the 14-bit start address field (bytes / 16) ends at {} bytes",
                (START_FIELD_LIMIT as usize) << 4
            )));
        }
        Ok(Sm90Descriptors {
            a,
            b,
            a_words: words(&a)?,
            b_words: words(&b)?,
            stage_field: [field(sa)?, field(sb)?],
            wg_field: field(wg_bytes)?,
            atom_field: field(64 * row_bytes)?,
            kblock_field: field(step)?,
            natom_field: field(atom_n * row_bytes)?,
            kblocks,
            max_start_field,
        })
    }

    /// The start-address field offsets `[A, B]` of k-tile's `wgmma` of k-block `kb` and
    /// m64 atom `a`, from the stage's first row of this warpgroup's A and of B.
    pub fn batch_offsets(&self, kb: i64, a: i64) -> [u32; 2] {
        let kb = kb as u32 * self.kblock_field;
        [a as u32 * self.atom_field + kb, kb]
    }
}

/// The descriptor of a K-major operand block of `rows` rows and one k-block of `k`
/// elements in the atom's `(rows, bk)` tile (start address 0).
fn operand_desc(atom: &GmmaSmemAtom, rows: i64, bk: i64, k: i64) -> Result<GmmaDescriptor, GemmError> {
    let tile = atom
        .layout
        .tile_to_shape(&tuple!(rows, bk), None)
        .map_err(|e| cfg_err(e.to_string()))?;
    let kblock = tile
        .compose_tiler(&Tiler::shape(&[rows, k]))
        .map_err(|e| cfg_err(e.to_string()))?;
    make_gmma_desc(Major::K, atom.mode, &kblock, atom.elem).map_err(|e| cfg_err(e.to_string()))
}

/// Byte offset of k-block `kb` in a K-major tile (the unswizzled column offset).
fn kblock_bytes(atom: &GmmaSmemAtom, bk: i64, k: i64, kb: i64) -> Result<i64, GemmError> {
    let tile: Layout = atom
        .layout
        .tile_to_shape(&tuple!(8, bk), None)
        .map_err(|e| cfg_err(e.to_string()))?;
    let kk = kb * k;
    let off = tile.crd2idx(&tuple!(0, kk)).map_err(|e| cfg_err(e.to_string()))?;
    Ok(off.as_static().unwrap_or(0) * atom.elem.bytes() as i64)
}
