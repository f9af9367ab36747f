//! The reference of the alignment of routed entries to the grouped GEMM's row tiles.
//!
//! Entry `i = t * k + j` of `topk_ids [T, k]` is routed to local expert `e = id - offset`
//! when `0 <= e < L`; other entries are dropped (they belong to another GPU's slice).
//! Local expert `e` gets `c_e` entries and `round_up(c_e, block_m)` rows starting at
//! `offsets[e]`: its entries' flattened indices in ascending order, then the sentinel
//! `T * k`. Block `b` (rows `b * block_m ..`) belongs to the expert whose rows contain it.

use crate::error::OpsError;

/// The alignment of one routing, trimmed to the rows it uses (the GPU kernel's buffers
/// are longer: rows past [`Alignment::total_rows`] hold the sentinel, blocks `-1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alignment {
    /// Entries per local expert, `[L]`.
    pub counts: Vec<i32>,
    /// First row of each local expert, `[L + 1]`; the last is the total.
    pub offsets: Vec<i32>,
    /// Flattened entry index of each row, `[total_rows]`; padding rows hold `T * k`.
    pub sorted_ids: Vec<i32>,
    /// Local expert of each block of `block_m` rows, `[total_rows / block_m]`.
    pub block_expert: Vec<i32>,
    /// Rows used: a multiple of `block_m`.
    pub total_rows: usize,
}

/// Aligns the entries of `topk_ids` (`[tokens, topk]`, global expert ids, any value) that
/// fall in `[expert_offset, expert_offset + local_experts)` to tiles of `block_m` rows.
pub fn align_reference(
    topk_ids: &[i32],
    tokens: usize,
    topk: usize,
    expert_offset: usize,
    local_experts: usize,
    block_m: usize,
) -> Result<Alignment, OpsError> {
    if local_experts == 0 || block_m == 0 || topk == 0 {
        return Err(OpsError::Empty(format!(
            "alignment of top-{topk} over {local_experts} local experts in tiles of {block_m}"
        )));
    }
    let n = tokens * topk;
    if topk_ids.len() != n {
        return Err(OpsError::Shape(format!(
            "{} top-k ids for {tokens} tokens x top-{topk}",
            topk_ids.len()
        )));
    }
    let sentinel = i32::try_from(n).map_err(|_| OpsError::TooLarge {
        what: "routed entries (T * k) past i32",
    })?;
    let mut per_expert: Vec<Vec<i32>> = vec![Vec::new(); local_experts];
    for (i, &id) in topk_ids.iter().enumerate() {
        let e = i64::from(id) - expert_offset as i64;
        if (0..local_experts as i64).contains(&e) {
            per_expert[e as usize].push(i as i32);
        }
    }
    let mut a = Alignment {
        counts: Vec::with_capacity(local_experts),
        offsets: vec![0],
        sorted_ids: Vec::new(),
        block_expert: Vec::new(),
        total_rows: 0,
    };
    for (e, entries) in per_expert.iter().enumerate() {
        let rows = entries.len().div_ceil(block_m) * block_m;
        a.counts.push(entries.len() as i32);
        a.sorted_ids.extend(entries);
        a.sorted_ids.resize(a.sorted_ids.len() + rows - entries.len(), sentinel);
        a.block_expert.extend(std::iter::repeat_n(e as i32, rows / block_m));
        a.total_rows += rows;
        a.offsets.push(a.total_rows as i32);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_expert_in_entry_order_and_pads_to_the_tile() {
        // 3 tokens, top-2, experts 0..4 all local, tiles of 2.
        let ids = [2, 0, 0, 2, 2, 3];
        let a = align_reference(&ids, 3, 2, 0, 4, 2).unwrap();
        assert_eq!(a.counts, vec![2, 0, 3, 1]);
        assert_eq!(a.offsets, vec![0, 2, 2, 6, 8]);
        assert_eq!(a.sorted_ids, vec![1, 2, 0, 3, 4, 6, 5, 6]);
        assert_eq!(a.block_expert, vec![0, 2, 2, 3]);
        assert_eq!(a.total_rows, 8);
    }

    #[test]
    fn entries_outside_the_slice_are_dropped() {
        let ids = [7, 0, 3, 4, -1, i32::MAX];
        let a = align_reference(&ids, 3, 2, 2, 3, 4).unwrap();
        assert_eq!(a.counts, vec![0, 1, 1]);
        assert_eq!(a.offsets, vec![0, 0, 4, 8]);
        assert_eq!(a.sorted_ids, vec![2, 6, 6, 6, 3, 6, 6, 6]);
        assert_eq!(a.block_expert, vec![1, 2]);
        // A slice no token routes to: nothing at all.
        let a = align_reference(&[0, 1, 0, 1], 2, 2, 5, 3, 16).unwrap();
        assert_eq!((a.counts, a.total_rows), (vec![0, 0, 0], 0));
        assert!(a.sorted_ids.is_empty() && a.block_expert.is_empty());
    }

    #[test]
    fn every_local_entry_appears_once_within_its_capacity() {
        let (t, k, l, bm) = (37, 3, 5, 4);
        let ids: Vec<i32> = (0..t * k).map(|i| ((i * 7 + i / 3) % 9) as i32 - 1).collect();
        let a = align_reference(&ids, t, k, 1, l, bm).unwrap();
        let mut seen: Vec<i32> = a.sorted_ids.iter().copied().filter(|&i| i != (t * k) as i32).collect();
        seen.sort();
        let want: Vec<i32> = (0..t * k)
            .filter(|&i| (1..=5).contains(&ids[i]))
            .map(|i| i as i32)
            .collect();
        assert_eq!(seen, want);
        assert_eq!(a.total_rows % bm, 0);
        let cap = rcute_kernel::moe_routing::align::align_capacity(t, k, l, bm).unwrap();
        assert!(a.total_rows <= cap.rows && a.block_expert.len() <= cap.blocks);
        for (b, &e) in a.block_expert.iter().enumerate() {
            let row = (b * bm) as i32;
            assert!(a.offsets[e as usize] <= row && row < a.offsets[e as usize + 1]);
        }
    }

    /// GEMM1's CTAs find their expert before their wait from the top-k ids
    /// (`rcute_kernel::grouped_gemm::prefetch`): its host mirror gives every tile the
    /// alignment's expert, and -1 past the routing's tiles, for any routing of at most 32
    /// entries (out-of-range ids, expert slices, experts without entries, tiles of 1 to 64).
    #[test]
    fn tile_experts_from_the_top_k_ids_match_the_alignment() {
        use rcute_kernel::grouped_gemm::prefetch::{tile_expert_from_ids, MAX_ID_ENTRIES};
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let mut checked = 0;
        for case in 0..400 {
            let k = 1 + next(8) as usize;
            let t = 1 + next(MAX_ID_ENTRIES as u64 / k as u64) as usize;
            let experts = 1 + next(70) as i32;
            let offset = next(experts as u64) as i32;
            let local = 1 + next((experts - offset) as u64) as i32;
            let bm = [1, 2, 4, 16, 32, 64][next(6) as usize];
            let ids: Vec<i32> = (0..t * k)
                .map(|_| match next(20) {
                    0 => -1 - next(3) as i32,
                    1 => i32::MAX - next(3) as i32,
                    2 => i32::MIN,
                    _ => next(experts as u64) as i32,
                })
                .collect();
            let a = align_reference(&ids, t, k, offset as usize, local as usize, bm as usize).unwrap();
            for tile in 0..a.block_expert.len() as i32 + 3 {
                let want = a.block_expert.get(tile as usize).copied().unwrap_or(-1);
                let got = tile_expert_from_ids(&ids, offset, local, bm, tile);
                assert_eq!(
                    got, want,
                    "case {case}: tile {tile} of {ids:?} (offset {offset}, {local} local, tiles of {bm})"
                );
                checked += 1;
            }
        }
        assert!(checked > 1000);
        // More entries than one warp: no expert (the kernel prefetches nothing).
        assert_eq!(tile_expert_from_ids(&[0; 33], 0, 1, 16, 0), -1);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(align_reference(&[0, 1], 1, 2, 0, 0, 16).is_err());
        assert!(align_reference(&[0, 1], 1, 2, 0, 2, 0).is_err());
        assert!(align_reference(&[0, 1, 2], 1, 2, 0, 2, 16).is_err());
    }
}
