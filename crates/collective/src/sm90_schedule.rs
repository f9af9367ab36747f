//! [`Sm90Schedule`]: the SM90 kernel schedule, shared by the mainloop and epilogue builders.

/// The SM90 kernel schedule (CUTLASS's `KernelTmaWarpSpecialized*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sm90Schedule {
    /// One producer and one consumer warpgroup, not persistent; the epilogue shares the
    /// mainloop's shared memory (`KernelTmaWarpSpecialized`).
    WarpSpecialized,
    /// Persistent; two consumer warpgroups split each tile along M
    /// (`KernelTmaWarpSpecializedCooperative`).
    Cooperative,
    /// Persistent; two consumer warpgroups take turns on whole tiles, one's epilogue
    /// overlapping the other's mainloop (`KernelTmaWarpSpecializedPingpong`).
    PingPong,
}

impl Sm90Schedule {
    /// All schedules.
    pub const ALL: [Sm90Schedule; 3] = [
        Sm90Schedule::WarpSpecialized,
        Sm90Schedule::Cooperative,
        Sm90Schedule::PingPong,
    ];
    /// CUTLASS's kernel schedule tag.
    pub fn cutlass_name(self) -> &'static str {
        match self {
            Sm90Schedule::WarpSpecialized => "KernelTmaWarpSpecialized",
            Sm90Schedule::Cooperative => "KernelTmaWarpSpecializedCooperative",
            Sm90Schedule::PingPong => "KernelTmaWarpSpecializedPingpong",
        }
    }
    /// A short tag (`ws`, `coop`, `pingpong`).
    pub fn tag(self) -> &'static str {
        match self {
            Sm90Schedule::WarpSpecialized => "ws",
            Sm90Schedule::Cooperative => "coop",
            Sm90Schedule::PingPong => "pingpong",
        }
    }
    /// True for the cooperative schedule (cooperative epilogue).
    pub fn is_cooperative(self) -> bool {
        self == Sm90Schedule::Cooperative
    }
    /// Consumer (MMA) warpgroups.
    pub fn consumer_warpgroups(self) -> usize {
        match self {
            Sm90Schedule::WarpSpecialized => 1,
            Sm90Schedule::Cooperative | Sm90Schedule::PingPong => 2,
        }
    }
    /// Threads that run one tile's epilogue (256 cooperative, else 128).
    pub fn epilogue_threads(self) -> i64 {
        if self.is_cooperative() {
            256
        } else {
            128
        }
    }
    /// M of the tiled MMA's tile: 64 per warpgroup stacked along M (128 cooperative).
    pub fn mma_tile_m(self) -> i64 {
        if self.is_cooperative() {
            128
        } else {
            64
        }
    }
    /// Whether the epilogue's shared memory is a union with the mainloop's.
    pub fn epilogue_union(self) -> bool {
        self == Sm90Schedule::WarpSpecialized
    }
}
