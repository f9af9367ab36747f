//! The text forms of the AWQ GEMM's and the fused MoE's configurations (the other two
//! families a tuning table stores; see [`super::ConfigSpec`]):
//!
//! * AWQ: `awq:BMxBNxBK,WMxWN,sSTAGES,vWORDS[,kSPLITS]`: the CTA tile, warp grid,
//!   shared-memory stages, `qweight` words per copy (4 or 1) and requested K splits.
//! * MoE on the SM80 family: `moe:BMxBNxBK,WMxWN[,kSPLITS][,sSTAGES]`: the grouped GEMMs'
//!   tile and warp grid (both GEMMs; `BM` is also the alignment's row block), GEMM2's K
//!   splits and both GEMMs' shared-memory stages (absent: as many as fit, at most 4).
//!   With `,reg` (`,reg,rot`) the register-streamed decode form of both GEMMs
//!   ([`MoeSpec::streamed`]), with a final `,sring` its weights through each lane's
//!   shared `cp.async` ring slots ([`MoeSpec::with_shared_ring`]). A last `,route` lets
//!   GEMM1 route a decode batch itself where it can ([`MoeSpec::with_route`]).
//! * MoE on the SM90 family: `moe:sm90` (GEMM2 on 128x256 tiles) or `moe:sm90n` (GEMM2 on
//!   128x128 tiles), with a `c` suffix GEMM1 on 2x1 CTA clusters; GEMM1 is always on
//!   128x256 tiles ([`MoeSm90Spec`]).
//!
//! ```
//! use rcute_ops::tuning::ConfigSpec;
//! let awq: ConfigSpec = "awq:16x256x64,1x4,s4,v4,k10".parse().unwrap();
//! assert_eq!(awq.to_string(), "awq:16x256x64,1x4,s4,v4,k10");
//! let moe: ConfigSpec = "moe:16x128x64,1x4,k4".parse().unwrap();
//! assert_eq!(moe.to_string().parse::<ConfigSpec>().unwrap(), moe);
//! let sm90: ConfigSpec = "moe:sm90n".parse().unwrap();
//! assert_eq!(sm90, ConfigSpec::MoeSm90(rcute_ops::tuning::MoeSm90Spec::Narrow));
//! assert!("awq:16x256x64,1x4".parse::<ConfigSpec>().is_err()); // stages and words needed
//! ```

use std::fmt;

use rcute_atom::Element;
use rcute_kernel::awq_gemm::AwqGemmConfig;
use rcute_kernel::grouped_gemm::{SM90_NARROW_TILE, SM90_PINGPONG_TILE, SM90_ROWS64_TILE, SM90_TILE};

use super::spec_text::{extents, number};
use crate::moe::MoePath;

/// The tunable knobs of the AWQ GEMM.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AwqSpec {
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Shared-memory stages.
    pub stages: usize,
    /// `qweight` words per `cp.async` (4 or 1).
    pub b_vector_words: i64,
    /// Requested K splits (the kernel's plan may use fewer).
    pub splits: u32,
}

impl AwqSpec {
    /// The spec of a configuration and its requested splits.
    pub fn of(cfg: &AwqGemmConfig, splits: u32) -> AwqSpec {
        AwqSpec {
            tile: cfg.tile,
            warps: cfg.warps,
            stages: cfg.stages,
            b_vector_words: cfg.b_vector_words,
            splits,
        }
    }

    /// The kernel configuration for `element` operands, with the requested splits.
    pub fn config(&self, element: Element) -> (AwqGemmConfig, u32) {
        (
            AwqGemmConfig::new(element, self.tile, self.warps, self.stages, self.b_vector_words),
            self.splits,
        )
    }
}

/// The tunable knobs of the fused MoE layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MoeSpec {
    /// The grouped GEMMs' CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// GEMM2's K splits.
    pub splits: u32,
    /// Shared-memory stages of both grouped GEMMs (`None`: the mainloop's automatic
    /// choice, as many as fit and at most four). Decode layers stream their weights at
    /// one or two CTAs per SM, where bytes in flight per SM set the pace.
    pub stages: Option<usize>,
    /// GEMM2 with stream-K ([`rcute_kernel::grouped_gemm::stream_k`]): one CTA per SM
    /// shares this routing's k-tiles, each tile's segments in the `splits` slabs (at
    /// least 2); for decode layers whose GEMM2 has fewer tiles than SMs.
    pub stream: bool,
    /// The grouped GEMMs load the weights with the `.L2::256B` prefetch size (`,l2`;
    /// [`rcute_kernel::grouped_gemm::GroupedGemmConfig::b_l2_prefetch`]; off by default).
    pub l2_prefetch: bool,
    /// Both grouped GEMMs in the register-streamed decode form (`,reg`;
    /// [`rcute_kernel::grouped_gemm::streamed`]): tile `BMx(16 W)xCHUNK` (a chunk of 32,
    /// 64, 128 or 256 k), warps `1xW`, `sSTAGES` the chunks in flight per warp (absent: 2).
    pub streamed: bool,
    /// With `streamed`: each warp starts its K range at its own chunk (`,rot`).
    pub k_rotate: bool,
    /// With `streamed`: the weight chunks through each lane's own slots of a shared
    /// `cp.async` ring waited by count instead of a ring of registers (`,sring`;
    /// [`rcute_kernel::grouped_gemm::GroupedGemmConfig::shared_ring`]).
    pub shared_ring: bool,
    /// GEMM1 routes the decode batch itself where it can (`,route`; routed from logits, at
    /// most 32 routed entries, the tile grid: [`crate::moe::gemm1_routes`]) whatever
    /// [`crate::moe::gemm1_routes_by_rule`] says of the layer's weight bytes: a tuning
    /// table's measured choice (the rule's bound was set on an H100).
    pub route: bool,
    /// Both grouped GEMMs of the tile grid skip the alignment's padding rows (`,padskip`;
    /// [`rcute_kernel::grouped_gemm::GroupedGemmConfig::skip_padding`]): GEMM1 stores
    /// none of them, GEMM2 loads none. Not with `stream` or `reg`.
    pub skip_padding: bool,
}

impl MoeSpec {
    /// The spec of a tile, warp grid and GEMM2 splits with automatic stages.
    ///
    /// ```
    /// use rcute_ops::tuning::MoeSpec;
    /// let s = MoeSpec::new([16, 128, 64], [1, 4], 4);
    /// assert_eq!(s.stages, None);
    /// assert_eq!(s.to_string(), "moe:16x128x64,1x4,k4");
    /// assert_eq!(s.with_stages(8).to_string(), "moe:16x128x64,1x4,k4,s8");
    /// ```
    pub fn new(tile: [i64; 3], warps: [i64; 2], splits: u32) -> MoeSpec {
        MoeSpec {
            tile,
            warps,
            splits,
            stages: None,
            stream: false,
            l2_prefetch: false,
            streamed: false,
            k_rotate: false,
            shared_ring: false,
            route: false,
            skip_padding: false,
        }
    }

    /// The register-streamed form (`,reg`, `,rot` when `rotate`): `bm` routed rows per
    /// tile, `warps` warps of 16 weight rows, chunks of `chunk_k` (32 to 256), `ring`
    /// chunks in flight, GEMM2's K splits.
    ///
    /// ```
    /// use rcute_ops::tuning::MoeSpec;
    /// let s = MoeSpec::streamed(16, 8, 128, 2, 1, false);
    /// assert_eq!(s.to_string(), "moe:16x128x128,1x8,s2,reg");
    /// assert_eq!(MoeSpec::streamed(16, 4, 32, 8, 2, true).to_string(), "moe:16x64x32,1x4,k2,s8,reg,rot");
    /// ```
    pub fn streamed(bm: i64, warps: i64, chunk_k: i64, ring: usize, splits: u32, rotate: bool) -> MoeSpec {
        let rows = rcute_kernel::grouped_gemm::streamed::WARP_ROWS;
        MoeSpec {
            streamed: true,
            k_rotate: rotate,
            ..MoeSpec::new([bm, rows * warps, chunk_k], [1, warps], splits).with_stages(ring)
        }
    }

    /// The same streamed spec with the weights' shared ring (`,sring`).
    ///
    /// ```
    /// use rcute_ops::tuning::{ConfigSpec, MoeSpec};
    /// let s = MoeSpec::streamed(16, 8, 128, 3, 1, false).with_shared_ring();
    /// assert_eq!(s.to_string(), "moe:16x128x128,1x8,s3,reg,sring");
    /// assert_eq!("moe:16x128x128,1x8,s3,reg,sring".parse::<ConfigSpec>().unwrap(), ConfigSpec::Moe(s));
    /// assert!("moe:16x128x128,1x8,s3,sring".parse::<ConfigSpec>().is_err()); // needs reg
    /// ```
    pub fn with_shared_ring(mut self) -> MoeSpec {
        self.shared_ring = true;
        self
    }

    /// The same spec with GEMM1 routing the decode batch itself where it can (`,route`).
    ///
    /// ```
    /// use rcute_ops::tuning::{ConfigSpec, MoeSpec};
    /// let s = MoeSpec::new([16, 128, 64], [1, 4], 4).with_stages(3).with_route();
    /// assert_eq!(s.to_string(), "moe:16x128x64,1x4,k4,s3,route");
    /// assert_eq!("moe:16x128x64,1x4,k4,s3,route".parse::<ConfigSpec>().unwrap(), ConfigSpec::Moe(s));
    /// assert!("moe:16x128x128,1x8,s3,reg,route".parse::<ConfigSpec>().is_err()); // streamed GEMM1
    /// ```
    pub fn with_route(mut self) -> MoeSpec {
        self.route = true;
        self
    }

    /// The same spec with both grouped GEMMs skipping the padding rows (`,padskip`;
    /// [`MoeSpec::skip_padding`]).
    ///
    /// ```
    /// use rcute_ops::tuning::{ConfigSpec, MoeSpec};
    /// let s = MoeSpec::new([16, 128, 64], [1, 4], 1).with_stages(8).with_skip_padding();
    /// assert_eq!(s.to_string(), "moe:16x128x64,1x4,s8,padskip");
    /// assert_eq!("moe:16x128x64,1x4,s8,padskip".parse::<ConfigSpec>().unwrap(), ConfigSpec::Moe(s));
    /// let r = s.with_route();
    /// assert_eq!("moe:16x128x64,1x4,s8,route,padskip".parse::<ConfigSpec>().unwrap(), ConfigSpec::Moe(r));
    /// assert!("moe:16x128x64,1x4,k2,stream,padskip".parse::<ConfigSpec>().is_err()); // stream-K
    /// assert!("moe:16x128x128,1x8,s3,reg,padskip".parse::<ConfigSpec>().is_err()); // streamed
    /// ```
    pub fn with_skip_padding(mut self) -> MoeSpec {
        self.skip_padding = true;
        self
    }

    /// The same spec with the weights loaded with the L2 prefetch size (`,l2`).
    ///
    /// ```
    /// use rcute_ops::tuning::MoeSpec;
    /// let s = MoeSpec::new([16, 128, 64], [1, 4], 2).with_stages(8).with_l2_prefetch();
    /// assert_eq!(s.to_string(), "moe:16x128x64,1x4,k2,s8,l2");
    /// ```
    pub fn with_l2_prefetch(mut self) -> MoeSpec {
        self.l2_prefetch = true;
        self
    }

    /// The same spec with GEMM2 on stream-K (`,stream`).
    ///
    /// ```
    /// use rcute_ops::tuning::MoeSpec;
    /// let s = MoeSpec::new([16, 128, 64], [1, 4], 4).with_stages(8).with_stream();
    /// assert_eq!(s.to_string(), "moe:16x128x64,1x4,k4,s8,stream");
    /// ```
    pub fn with_stream(mut self) -> MoeSpec {
        self.stream = true;
        self
    }

    /// The same spec with `stages` shared-memory stages.
    pub fn with_stages(mut self, stages: usize) -> MoeSpec {
        self.stages = Some(stages);
        self
    }
}

/// The fused MoE layer on the SM90 grouped GEMMs (TMA + `wgmma`, 128-row tiles; sm_90
/// only): GEMM1 on [`SM90_TILE`] (on 1x1 or 2x1 CTA clusters; on 1x1 the narrow tile where
/// the routed rows say, [`crate::moe::sm90_gemm1_tile`]), GEMM2 on the tile this names; or
/// both GEMMs on the ping-pong schedule ([`MoeSm90Spec::PingPong`]). Which one the rules
/// pick is [`crate::moe::sm90_pingpong`], [`crate::moe::sm90_gemm2_tile`] and
/// [`crate::moe::sm90_gemm1_cluster`] for [`MoePath::Auto`].
///
/// ```
/// use rcute_ops::moe::MoePath;
/// use rcute_ops::tuning::MoeSm90Spec;
/// assert_eq!(MoeSm90Spec::Narrow.path(), MoePath::Sm90Narrow);
/// assert_eq!(MoeSm90Spec::of_rules([128, 256, 64], false), MoeSm90Spec::Wide);
/// assert_eq!(MoeSm90Spec::of_rules([128, 128, 64], true), MoeSm90Spec::NarrowCluster);
/// assert_eq!(MoeSm90Spec::Wide.to_string(), "moe:sm90");
/// assert_eq!(MoeSm90Spec::NarrowCluster.to_string(), "moe:sm90nc");
/// assert_eq!(MoeSm90Spec::PingPong.path(), MoePath::Sm90PingPong);
/// assert_eq!(MoeSm90Spec::PingPong.to_string(), "moe:sm90pp");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoeSm90Spec {
    /// GEMM2 on 128x256 tiles (`moe:sm90`, [`MoePath::Sm90`]).
    Wide,
    /// GEMM2 on 128x128 tiles (`moe:sm90n`, [`MoePath::Sm90Narrow`]).
    Narrow,
    /// [`MoeSm90Spec::Wide`] with GEMM1 on 2x1 clusters (`moe:sm90c`, [`MoePath::Sm90Cluster`]).
    WideCluster,
    /// [`MoeSm90Spec::Narrow`] with GEMM1 on 2x1 clusters (`moe:sm90nc`,
    /// [`MoePath::Sm90NarrowCluster`]).
    NarrowCluster,
    /// Both GEMMs on the ping-pong schedule, 128x128 tiles without clusters (`moe:sm90pp`,
    /// [`MoePath::Sm90PingPong`]).
    PingPong,
    /// Both GEMMs on the ping-pong schedule with 64-row tiles
    /// ([`rcute_kernel::grouped_gemm::SM90_ROWS64_TILE`], the alignment's block 64:
    /// `moe:sm90pp64`, [`MoePath::Sm90PingPong`] with [`crate::moe::MoeOptions::row_tile`]
    /// 64); bf16 / f16 layers only.
    PingPong64,
    /// [`MoeSm90Spec::Wide`] with the padding skip (`moe:sm90pad`,
    /// [`crate::moe::MoeOptions::pad_skip`]: an all-padding consumer warpgroup skips its
    /// epilogue and its half of A); bf16 / f16 layers (the FP8 layer runs
    /// [`MoeSm90Spec::Wide`]).
    WidePad,
}

impl MoeSm90Spec {
    /// Every form: the wide one first, the 1x1 GEMM1 before the clusters, then ping-pong.
    pub const ALL: [MoeSm90Spec; 7] = [
        MoeSm90Spec::Wide,
        MoeSm90Spec::WidePad,
        MoeSm90Spec::Narrow,
        MoeSm90Spec::WideCluster,
        MoeSm90Spec::NarrowCluster,
        MoeSm90Spec::PingPong,
        MoeSm90Spec::PingPong64,
    ];

    /// The path that forces this form.
    pub fn path(self) -> MoePath {
        match self {
            MoeSm90Spec::Wide | MoeSm90Spec::WidePad => MoePath::Sm90,
            MoeSm90Spec::Narrow => MoePath::Sm90Narrow,
            MoeSm90Spec::WideCluster => MoePath::Sm90Cluster,
            MoeSm90Spec::NarrowCluster => MoePath::Sm90NarrowCluster,
            MoeSm90Spec::PingPong | MoeSm90Spec::PingPong64 => MoePath::Sm90PingPong,
        }
    }

    /// GEMM2's tile.
    pub fn gemm2_tile(self) -> [i64; 3] {
        match self {
            MoeSm90Spec::Wide | MoeSm90Spec::WideCluster | MoeSm90Spec::WidePad => SM90_TILE,
            MoeSm90Spec::Narrow | MoeSm90Spec::NarrowCluster => SM90_NARROW_TILE,
            MoeSm90Spec::PingPong => SM90_PINGPONG_TILE,
            MoeSm90Spec::PingPong64 => SM90_ROWS64_TILE,
        }
    }

    /// The row tile (the alignment's block) of both GEMMs: 64 for
    /// [`MoeSm90Spec::PingPong64`], else 128.
    pub fn row_tile(self) -> i64 {
        self.gemm2_tile()[0]
    }

    /// Whether the cooperative GEMMs skip all-padding warpgroups' work
    /// ([`MoeSm90Spec::WidePad`]).
    pub fn pad_skip(self) -> bool {
        self == MoeSm90Spec::WidePad
    }

    /// Whether GEMM1 runs on 2x1 clusters.
    pub fn gemm1_cluster(self) -> bool {
        matches!(self, MoeSm90Spec::WideCluster | MoeSm90Spec::NarrowCluster)
    }

    /// The cooperative form whose GEMM2 runs on `tile` ([`SM90_NARROW_TILE`]: narrow; else
    /// wide) and GEMM1 on 2x1 clusters when `cluster` (never [`MoeSm90Spec::PingPong`]).
    pub fn of_rules(tile: [i64; 3], cluster: bool) -> MoeSm90Spec {
        match (tile == SM90_NARROW_TILE, cluster) {
            (true, false) => MoeSm90Spec::Narrow,
            (false, false) => MoeSm90Spec::Wide,
            (true, true) => MoeSm90Spec::NarrowCluster,
            (false, true) => MoeSm90Spec::WideCluster,
        }
    }
}

pub(crate) const AWQ_GRAMMAR: &str = "awq:BMxBNxBK,WMxWN,sSTAGES,vWORDS[,kSPLITS]";
pub(crate) const MOE_GRAMMAR: &str =
    "moe:BMxBNxBK,WMxWN[,kSPLITS][,sSTAGES][,stream][,l2][,reg[,rot][,sring]] or moe:sm90|sm90n|sm90c|sm90nc|sm90pp|sm90pp64";

/// `kSPLITS` fields after the fixed ones (at least 1).
fn splits_field(rest: &[&str]) -> Result<u32, String> {
    let mut splits = 1;
    for p in rest {
        match p.strip_prefix('k') {
            Some(x) => splits = number(x, "K splits")?,
            None => return Err(format!("unknown field {p:?}")),
        }
    }
    if splits == 0 {
        return Err("K splits must be at least 1".into());
    }
    Ok(splits)
}

pub(crate) fn parse_awq(s: &str) -> Result<AwqSpec, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() < 4 {
        return Err("too few fields".into());
    }
    let stages = parts[2].strip_prefix('s').ok_or("the third field is sSTAGES")?;
    let words = parts[3].strip_prefix('v').ok_or("the fourth field is vWORDS")?;
    Ok(AwqSpec {
        tile: extents(parts[0], "tile")?,
        warps: extents(parts[1], "warp grid")?,
        stages: number(stages, "stages")?,
        b_vector_words: number(words, "qweight words")?,
        splits: splits_field(&parts[4..])?,
    })
}

/// The SM90 family's form a `moe:` configuration (the text after the prefix) names, if
/// it names one (`sm...`; `Err` for an unknown one); `None` for the SM80 family's fields
/// ([`parse_moe`]).
pub(crate) fn parse_moe_sm90(s: &str) -> Option<Result<MoeSm90Spec, String>> {
    match s {
        "sm90" => Some(Ok(MoeSm90Spec::Wide)),
        "sm90n" => Some(Ok(MoeSm90Spec::Narrow)),
        "sm90c" => Some(Ok(MoeSm90Spec::WideCluster)),
        "sm90nc" => Some(Ok(MoeSm90Spec::NarrowCluster)),
        "sm90pp" => Some(Ok(MoeSm90Spec::PingPong)),
        "sm90pp64" => Some(Ok(MoeSm90Spec::PingPong64)),
        "sm90pad" => Some(Ok(MoeSm90Spec::WidePad)),
        _ if s.starts_with("sm") => Some(Err(format!(
            "unknown SM90 form {s:?} (sm90, sm90pad, sm90n, sm90c, sm90nc, sm90pp or sm90pp64)"
        ))),
        _ => None,
    }
}

/// The SM80 family's `moe:` fields (the text after the prefix): the tile, the warp grid,
/// then an optional `kSPLITS`, an optional `sSTAGES` (at least 2), an optional
/// `stream` (GEMM2 on stream-K), an optional `l2` (the weights loaded with the L2
/// prefetch size), an optional `reg` (the streamed form) with an optional `rot` and an
/// optional `sring` after it, then an optional `route`, then an optional `padskip`, in that
/// order.
pub(crate) fn parse_moe(s: &str) -> Result<MoeSpec, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() < 2 {
        return Err("too few fields".into());
    }
    let mut rest = &parts[2..];
    let mut skip_padding = false;
    if let Some((&"padskip", before)) = rest.split_last() {
        skip_padding = true;
        rest = before;
    }
    let mut route = false;
    if let Some((&"route", before)) = rest.split_last() {
        route = true;
        rest = before;
    }
    let mut shared_ring = false;
    if let Some((&"sring", before)) = rest.split_last() {
        shared_ring = true;
        rest = before;
    }
    let mut k_rotate = false;
    if let Some((&"rot", before)) = rest.split_last() {
        k_rotate = true;
        rest = before;
    }
    let mut streamed = false;
    if let Some((&"reg", before)) = rest.split_last() {
        streamed = true;
        rest = before;
    }
    if k_rotate && !streamed {
        return Err("rot is an option of the streamed form (reg,rot)".into());
    }
    if shared_ring && !streamed {
        return Err("sring is an option of the streamed form (reg[,rot],sring)".into());
    }
    if route && streamed {
        return Err("route is an option of the tile grid (the streamed GEMM1 never routes)".into());
    }
    if skip_padding && streamed {
        return Err("padskip is an option of the tile grid (not reg)".into());
    }
    let mut l2_prefetch = false;
    if let Some((&"l2", before)) = rest.split_last() {
        l2_prefetch = true;
        rest = before;
    }
    let mut stream = false;
    if let Some((&"stream", before)) = rest.split_last() {
        stream = true;
        rest = before;
    }
    if skip_padding && stream {
        return Err("padskip is an option of the tile grid without stream-K (not stream)".into());
    }
    let mut stages = None;
    if let Some((last, before)) = rest.split_last() {
        if let Some(x) = last.strip_prefix('s') {
            let n: usize = number(x, "stages")?;
            if n < 2 {
                return Err("stages must be at least 2".into());
            }
            stages = Some(n);
            rest = before;
        }
    }
    Ok(MoeSpec {
        tile: extents(parts[0], "tile")?,
        warps: extents(parts[1], "warp grid")?,
        splits: splits_field(rest)?,
        stages,
        stream,
        l2_prefetch,
        streamed,
        k_rotate,
        shared_ring,
        route,
        skip_padding,
    })
}

impl fmt::Display for AwqSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bm, bn, bk] = self.tile;
        let [wm, wn] = self.warps;
        write!(
            f,
            "awq:{bm}x{bn}x{bk},{wm}x{wn},s{},v{}",
            self.stages, self.b_vector_words
        )?;
        if self.splits != 1 {
            write!(f, ",k{}", self.splits)?;
        }
        Ok(())
    }
}

impl fmt::Display for MoeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bm, bn, bk] = self.tile;
        let [wm, wn] = self.warps;
        write!(f, "moe:{bm}x{bn}x{bk},{wm}x{wn}")?;
        if self.splits != 1 {
            write!(f, ",k{}", self.splits)?;
        }
        if let Some(st) = self.stages {
            write!(f, ",s{st}")?;
        }
        if self.stream {
            f.write_str(",stream")?;
        }
        if self.l2_prefetch {
            f.write_str(",l2")?;
        }
        if self.streamed {
            f.write_str(",reg")?;
        }
        if self.k_rotate {
            f.write_str(",rot")?;
        }
        if self.shared_ring {
            f.write_str(",sring")?;
        }
        if self.route {
            f.write_str(",route")?;
        }
        if self.skip_padding {
            f.write_str(",padskip")?;
        }
        Ok(())
    }
}

impl fmt::Display for MoeSm90Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MoeSm90Spec::Wide => "moe:sm90",
            MoeSm90Spec::Narrow => "moe:sm90n",
            MoeSm90Spec::WideCluster => "moe:sm90c",
            MoeSm90Spec::NarrowCluster => "moe:sm90nc",
            MoeSm90Spec::PingPong => "moe:sm90pp",
            MoeSm90Spec::PingPong64 => "moe:sm90pp64",
            MoeSm90Spec::WidePad => "moe:sm90pad",
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::tuning::ConfigSpec;

    #[test]
    fn canonical_forms_round_trip_and_bad_ones_say_why() {
        for s in [
            "awq:16x256x64,1x4,s4,v4,k10",
            "awq:128x256x64,2x4,s3,v1",
            "moe:64x128x32,2x2",
            "moe:16x128x64,1x4,k8",
            "moe:16x128x64,1x4,s12",
            "moe:16x128x64,1x4,k4,s8",
            "moe:16x128x64,1x4,k3,stream",
            "moe:16x128x64,1x4,k4,s8,stream,l2",
            "moe:16x128x64,1x4,k2,s8,l2",
            "moe:16x128x32,1x8,s4,reg",
            "moe:16x64x32,1x4,k2,s8,reg,rot",
            "moe:sm90",
            "moe:sm90n",
            "moe:sm90c",
            "moe:sm90nc",
            "moe:sm90pp",
        ] {
            assert_eq!(s.parse::<ConfigSpec>().unwrap().to_string(), s);
        }
        for (s, why) in [
            ("awq:16x256x64,1x4,4,v4", "sSTAGES"),
            ("awq:16x256x64,1x4,s4,v4,k0", "at least 1"),
            ("moe:16x128,1x4", "3 extents"),
            ("moe:16x128x64,1x4,z2", "unknown field"),
            ("moe:16x128x64,1x4,s1", "at least 2"),
            ("moe:16x128x64,1x4,s8,k4", "unknown field"),
            ("moe:16x128x64,1x4,l2,stream", "unknown field"),
            ("moe:16x128x64,1x4,stream,s8", "unknown field"),
            ("moe:16x128x64,1x4,rot", "streamed form"),
            ("moe:16x128x32,1x8,rot,reg", "unknown field"),
            ("moe:sm90w", "unknown SM90 form"),
            ("moe:sm90,k2", "unknown SM90 form"),
            ("moe:sm80", "unknown SM90 form"),
            ("moe:sm90n,128x128", "unknown SM90 form"),
        ] {
            let e = s.parse::<ConfigSpec>().unwrap_err();
            assert!(e.to_string().contains(why), "{s}: {e}");
            if s.starts_with("moe:") {
                assert_eq!(e.grammar, super::MOE_GRAMMAR, "{s}");
            }
        }
    }

    #[test]
    fn sm90_forms_name_their_path_and_gemm2_tile() {
        use super::MoeSm90Spec;
        use crate::moe::MoePath;
        for s in MoeSm90Spec::ALL {
            // `of_rules` names the cooperative forms (ping-pong is a rule of its own, the
            // padding skip an option).
            if !matches!(
                s,
                MoeSm90Spec::PingPong | MoeSm90Spec::PingPong64 | MoeSm90Spec::WidePad
            ) {
                assert_eq!(MoeSm90Spec::of_rules(s.gemm2_tile(), s.gemm1_cluster()), s);
            }
            assert_eq!(s.to_string().parse::<ConfigSpec>().unwrap(), ConfigSpec::MoeSm90(s));
            assert!(ConfigSpec::MoeSm90(s).fits_op("moe") && !ConfigSpec::MoeSm90(s).fits_op("gemm"));
        }
        assert_eq!(MoeSm90Spec::Wide.path(), MoePath::Sm90);
        assert_eq!(MoeSm90Spec::Narrow.gemm2_tile(), [128, 128, 64]);
        assert_eq!(MoeSm90Spec::PingPong.path(), MoePath::Sm90PingPong);
        assert!(!MoeSm90Spec::PingPong.gemm1_cluster());
        assert_eq!(
            (MoeSm90Spec::PingPong64.path(), MoeSm90Spec::PingPong64.row_tile()),
            (MoePath::Sm90PingPong, 64)
        );
        assert_eq!(MoeSm90Spec::PingPong.row_tile(), 128);
        // `moe:sm90pad`: the wide form's path and tiles, with the padding skip.
        let pad = MoeSm90Spec::WidePad;
        assert_eq!(
            (pad.path(), pad.gemm2_tile(), pad.gemm1_cluster()),
            (MoePath::Sm90, [128, 256, 64], false)
        );
        assert!(pad.pad_skip() && MoeSm90Spec::ALL.iter().filter(|s| s.pad_skip()).count() == 1);
    }
}
