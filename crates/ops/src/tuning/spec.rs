//! The text form of a kernel configuration: what `--config` takes on the command line and
//! what a tuning table stores.
//!
//! A spec names only the knobs a tuner varies (tile, warps or schedule, stages, cluster,
//! split-K, rasterization); the element types and the fused epilogue come from the
//! problem. One grammar per kernel family (the AWQ and MoE ones in [`super::op_specs`]):
//!
//! * Ampere class: `BMxBNxBK,WMxWN,STAGES|auto,SPLITK[,serial|parallel][,rN][,turing]`
//! * Hopper: `sm90:BMxBNxBK,ws|coop|pp[,sSTAGES][,eEPI_MxEPI_N][,rLOG2_SWIZZLE][,am|an][,kSPLIT][,cCMxCN][,wMMA_PIPE][,sk]`
//!   (`sk`: hybrid stream-K, [`rcute_kernel::stream_k`]; `sk<N>`: its tiles cut into up to N ranges)
//!
//! [`ConfigSpec`]'s `Display` writes the canonical form (every field the spec sets, in
//! the order above), which parses back to the same spec:
//!
//! ```
//! use rcute_ops::tuning::ConfigSpec;
//! let spec: ConfigSpec = "sm90:128x256x64,coop,c2x1,k2".parse().unwrap();
//! assert_eq!(spec.to_string(), "sm90:128x256x64,coop,k2,c2x1");
//! assert_eq!(spec.to_string().parse::<ConfigSpec>().unwrap(), spec);
//! assert!("sm90:128x256,coop".parse::<ConfigSpec>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

use rcute_kernel::gemm_sm80::{GemmSm80Config, Major, Sm80Target, SplitKMode};
use rcute_kernel::gemm_sm90::{GemmSm90Config, Sm90Schedule};
use rcute_kernel::tile_scheduler::RasterOrderOption;

use super::op_specs::{AwqSpec, MoeSm90Spec, MoeSpec};
use super::spec_text::{extents, number};
use crate::select::{Choice, ScaledMmSelection, Selection};

/// The tunable knobs of an Ampere-class (`mma.sync`) kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sm80Spec {
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warps along M and N.
    pub warps: [i64; 2],
    /// Pipeline stages (`None`: as many as shared memory allows).
    pub stages: Option<usize>,
    /// K-splits (1 = none).
    pub split_k: u32,
    /// How splits are combined (`None`: the op's default, parallel for `gemm`, serial
    /// for `scaled_mm`).
    pub split_k_mode: Option<SplitKMode>,
    /// log2 of the rasterization swizzle.
    pub raster_swizzle: u32,
    /// The Turing (sm_75) two-stage variant.
    pub turing: bool,
}

/// The tunable knobs of a Hopper (TMA + `wgmma`) kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sm90Spec {
    /// CTA tile `(BM, BN, BK)`.
    pub tile: [i64; 3],
    /// Warp-specialized, cooperative or ping-pong.
    pub schedule: Sm90Schedule,
    /// Pipeline stages (`None`: as many as shared memory allows).
    pub stages: Option<usize>,
    /// Epilogue subtile (`None`: the builder's choice).
    pub epi_tile: Option<[i64; 2]>,
    /// log2 of the tile scheduler's swizzle.
    pub swizzle_log2: u32,
    /// Rasterization order.
    pub raster: RasterOrderOption,
    /// K-splits (1 = none).
    pub split_k: u32,
    /// Cluster shape `(CM, CN)`.
    pub cluster: [i64; 2],
    /// `wgmma` batches kept in flight (`None`: the config's default).
    pub mma_pipe: Option<u32>,
    /// Hybrid stream-K (`sk`): the last partial wave's k-tiles spread over the CTAs.
    pub stream_k: bool,
    /// Stream-K's ranges per stream-K tile, at most (`sk` 2, `sk<N>` N).
    pub stream_k_parts: u32,
}

/// One kernel configuration, as a tuning table stores it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConfigSpec {
    /// The Ampere-class kernel.
    Sm80(Sm80Spec),
    /// The Hopper kernel.
    Sm90(Sm90Spec),
    /// The AWQ GEMM.
    Awq(AwqSpec),
    /// The fused MoE layer on the SM80 grouped GEMMs.
    Moe(MoeSpec),
    /// The fused MoE layer on the SM90 grouped GEMMs.
    MoeSm90(MoeSm90Spec),
}

impl Sm80Spec {
    /// `base` (element types, majors, fusion) with this spec's knobs.
    pub fn apply(&self, mut base: GemmSm80Config) -> GemmSm80Config {
        if self.turing {
            base = base.turing();
        }
        base.tile = self.tile;
        base.warps = self.warps;
        base.stages = if self.turing {
            self.stages.or(Some(2))
        } else {
            self.stages
        };
        base.raster_swizzle = self.raster_swizzle;
        base
    }
}

impl ConfigSpec {
    /// The `gemm` kernel choice this spec names (bf16, K-major operands as the base; the
    /// op substitutes the problem's types and majors); `None` for an AWQ or MoE spec.
    pub fn gemm_choice(&self) -> Option<Choice> {
        Some(match self {
            ConfigSpec::Sm80(s) => Choice::Sm80(Selection {
                config: s.apply(GemmSm80Config::bf16(Major::K, Major::K, s.tile, s.warps)),
                split_k: s.split_k,
                split_k_mode: s.split_k_mode.unwrap_or(SplitKMode::Parallel),
            }),
            ConfigSpec::Sm90(s) => Choice::Sm90(s.apply(GemmSm90Config::bf16(s.tile, s.schedule)), s.split_k),
            ConfigSpec::Awq(_) | ConfigSpec::Moe(_) | ConfigSpec::MoeSm90(_) => return None,
        })
    }

    /// Whether the spec is of the kernel family op `op` runs (`gemm` and `scaled_mm`: the
    /// Ampere-class and Hopper GEMMs; `awq`; `moe`).
    pub fn fits_op(&self, op: &str) -> bool {
        match self {
            ConfigSpec::Sm80(_) | ConfigSpec::Sm90(_) => op == "gemm" || op == "scaled_mm",
            ConfigSpec::Awq(_) => op == "awq",
            ConfigSpec::Moe(_) | ConfigSpec::MoeSm90(_) => op == "moe",
        }
    }

    /// The knobs of op `S` (AWQ, MoE) this spec holds; `Err` says it is not `S`'s
    /// (`"<spec> is not an AWQ configuration"`).
    pub(crate) fn op_spec<S: OpSpec>(&self) -> Result<&S, String> {
        S::held_by(self).ok_or_else(|| format!("{self} is not {}", S::WHAT))
    }
}

/// The knobs of an op with a [`ConfigSpec`] variant of its own ([`AwqSpec`], [`MoeSpec`]).
pub(crate) trait OpSpec {
    /// What an error calls a configuration of the op (`"an AWQ configuration"`).
    const WHAT: &'static str;
    /// The knobs `spec` holds, if it is this op's variant.
    fn held_by(spec: &ConfigSpec) -> Option<&Self>;
}

impl OpSpec for AwqSpec {
    const WHAT: &'static str = "an AWQ configuration";
    fn held_by(spec: &ConfigSpec) -> Option<&Self> {
        match spec {
            ConfigSpec::Awq(s) => Some(s),
            _ => None,
        }
    }
}

impl OpSpec for MoeSpec {
    const WHAT: &'static str = "a MoE configuration";
    fn held_by(spec: &ConfigSpec) -> Option<&Self> {
        match spec {
            ConfigSpec::Moe(s) => Some(s),
            _ => None,
        }
    }
}

impl Sm80Spec {
    /// The INT8 `scaled_mm` kernel this spec names (serial split-K unless it says
    /// otherwise).
    pub fn scaled_mm_selection(&self) -> ScaledMmSelection {
        ScaledMmSelection {
            target: if self.turing {
                Sm80Target::Turing
            } else {
                Sm80Target::Ampere
            },
            tile: self.tile,
            warps: self.warps,
            stages: if self.turing {
                self.stages.or(Some(2))
            } else {
                self.stages
            },
            raster_swizzle: self.raster_swizzle,
            split_k: self.split_k,
            split_k_mode: self.split_k_mode.unwrap_or(SplitKMode::Serial),
        }
    }
}

impl Sm90Spec {
    /// The plain spec of a tile and schedule: every other knob automatic or off (1x1
    /// cluster, no split-K, the heuristic raster, no swizzle, no stream-K).
    ///
    /// ```
    /// use rcute_kernel::gemm_sm90::Sm90Schedule;
    /// use rcute_ops::tuning::{ConfigSpec, Sm90Spec};
    /// let s = Sm90Spec::new([128, 256, 64], Sm90Schedule::Cooperative);
    /// assert_eq!(ConfigSpec::Sm90(s), "sm90:128x256x64,coop".parse().unwrap());
    /// ```
    pub fn new(tile: [i64; 3], schedule: Sm90Schedule) -> Sm90Spec {
        Sm90Spec {
            tile,
            schedule,
            stages: None,
            epi_tile: None,
            swizzle_log2: 0,
            raster: RasterOrderOption::Heuristic,
            split_k: 1,
            cluster: [1, 1],
            mma_pipe: None,
            stream_k: false,
            stream_k_parts: 2,
        }
    }

    /// The spec of a configuration the rules chose, with its split-K (`mma_pipe` left to
    /// the base configuration: `None`).
    pub fn of(cfg: &GemmSm90Config, split_k: u32) -> Sm90Spec {
        Sm90Spec {
            tile: cfg.tile,
            schedule: cfg.schedule,
            stages: cfg.stages,
            epi_tile: cfg.epi_tile,
            swizzle_log2: cfg.swizzle_log2,
            raster: cfg.raster,
            split_k,
            cluster: cfg.cluster,
            mma_pipe: None,
            stream_k: cfg.stream_k,
            stream_k_parts: cfg.stream_k_parts,
        }
    }

    /// `base` (element types, fusion) with this spec's knobs.
    pub fn apply(&self, mut base: GemmSm90Config) -> GemmSm90Config {
        base.tile = self.tile;
        base.schedule = self.schedule;
        base.stages = self.stages;
        base.epi_tile = self.epi_tile;
        base.swizzle_log2 = self.swizzle_log2;
        base.raster = self.raster;
        base.cluster = self.cluster;
        if let Some(w) = self.mma_pipe {
            base.mma_pipe = w;
        }
        base.stream_k = self.stream_k;
        base.stream_k_parts = self.stream_k_parts;
        base
    }
}

/// Why a configuration string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad configuration {text:?}: {why} (expected {grammar})")]
pub struct SpecError {
    /// The string.
    pub text: String,
    /// What is wrong with it.
    pub why: String,
    /// The grammar it was read against.
    pub grammar: &'static str,
}

const SM80_GRAMMAR: &str = "BMxBNxBK,WMxWN,STAGES|auto,SPLITK[,serial|parallel][,rN][,turing]";
const SM90_GRAMMAR: &str =
    "sm90:BMxBNxBK,ws|coop|pp[,sSTAGES][,eEPI_MxEPI_N][,rLOG2_SWIZZLE][,am|an][,kSPLIT][,cCMxCN][,wMMA_PIPE][,sk|skPARTS]";

fn parse_sm80(s: &str) -> Result<Sm80Spec, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() < 4 {
        return Err("too few fields".into());
    }
    let mut spec = Sm80Spec {
        tile: extents(parts[0], "tile")?,
        warps: extents(parts[1], "warp grid")?,
        stages: match parts[2] {
            "auto" => None,
            x => Some(number(x, "stages")?),
        },
        split_k: number(parts[3], "split-K")?,
        split_k_mode: None,
        raster_swizzle: 0,
        turing: false,
    };
    for p in &parts[4..] {
        match *p {
            "serial" => spec.split_k_mode = Some(SplitKMode::Serial),
            "parallel" => spec.split_k_mode = Some(SplitKMode::Parallel),
            "turing" => spec.turing = true,
            r if r.starts_with('r') => spec.raster_swizzle = number(&r[1..], "raster swizzle")?,
            other => return Err(format!("unknown field {other:?}")),
        }
    }
    if spec.split_k == 0 {
        return Err("split-K must be at least 1".into());
    }
    Ok(spec)
}

fn parse_sm90(rest: &str) -> Result<Sm90Spec, String> {
    let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
    if parts.len() < 2 {
        return Err("too few fields".into());
    }
    let schedule = match parts[1] {
        "ws" => Sm90Schedule::WarpSpecialized,
        "coop" => Sm90Schedule::Cooperative,
        "pp" | "pingpong" => Sm90Schedule::PingPong,
        other => return Err(format!("unknown schedule {other:?}")),
    };
    let mut spec = Sm90Spec::new(extents(parts[0], "tile")?, schedule);
    for p in &parts[2..] {
        match *p {
            "am" => spec.raster = RasterOrderOption::AlongM,
            "an" => spec.raster = RasterOrderOption::AlongN,
            "sk" => spec.stream_k = true,
            s if s.starts_with("sk") => {
                spec.stream_k = true;
                spec.stream_k_parts = number(&s[2..], "stream-K parts")?;
            }
            _ => sm90_field(&mut spec, p)?,
        }
    }
    if spec.split_k == 0 {
        return Err("split-K must be at least 1".into());
    }
    Ok(spec)
}

/// One prefixed field of the Hopper grammar.
fn sm90_field(spec: &mut Sm90Spec, p: &str) -> Result<(), String> {
    let (tag, x) = p.split_at(p.chars().next().map_or(0, char::len_utf8));
    match tag {
        "c" => spec.cluster = extents(x, "cluster")?,
        "k" => spec.split_k = number(x, "split-K")?,
        "s" => spec.stages = Some(number(x, "stages")?),
        "r" => spec.swizzle_log2 = number(x, "swizzle")?,
        "w" => spec.mma_pipe = Some(number(x, "wgmma batches in flight")?),
        "e" => spec.epi_tile = Some(extents(x, "epilogue tile")?),
        _ => return Err(format!("unknown field {p:?}")),
    }
    Ok(())
}

impl FromStr for ConfigSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<ConfigSpec, SpecError> {
        use super::op_specs::{parse_awq, parse_moe, parse_moe_sm90, AWQ_GRAMMAR, MOE_GRAMMAR};
        let s = s.trim();
        let err = |grammar: &'static str| {
            move |why: String| SpecError {
                text: s.into(),
                why,
                grammar,
            }
        };
        if let Some(rest) = s.strip_prefix("sm90:") {
            parse_sm90(rest).map(ConfigSpec::Sm90).map_err(err(SM90_GRAMMAR))
        } else if let Some(rest) = s.strip_prefix("awq:") {
            parse_awq(rest).map(ConfigSpec::Awq).map_err(err(AWQ_GRAMMAR))
        } else if let Some(rest) = s.strip_prefix("moe:") {
            match parse_moe_sm90(rest) {
                Some(form) => form.map(ConfigSpec::MoeSm90),
                None => parse_moe(rest).map(ConfigSpec::Moe),
            }
            .map_err(err(MOE_GRAMMAR))
        } else {
            parse_sm80(s).map(ConfigSpec::Sm80).map_err(err(SM80_GRAMMAR))
        }
    }
}

impl fmt::Display for Sm80Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bm, bn, bk] = self.tile;
        let [wm, wn] = self.warps;
        write!(f, "{bm}x{bn}x{bk},{wm}x{wn},")?;
        match self.stages {
            Some(s) => write!(f, "{s}")?,
            None => f.write_str("auto")?,
        }
        write!(f, ",{}", self.split_k)?;
        match self.split_k_mode {
            Some(SplitKMode::Serial) => f.write_str(",serial")?,
            Some(SplitKMode::Parallel) => f.write_str(",parallel")?,
            None => {}
        }
        if self.raster_swizzle != 0 {
            write!(f, ",r{}", self.raster_swizzle)?;
        }
        if self.turing {
            f.write_str(",turing")?;
        }
        Ok(())
    }
}

impl fmt::Display for Sm90Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bm, bn, bk] = self.tile;
        let schedule = match self.schedule {
            Sm90Schedule::WarpSpecialized => "ws",
            Sm90Schedule::Cooperative => "coop",
            Sm90Schedule::PingPong => "pp",
        };
        write!(f, "sm90:{bm}x{bn}x{bk},{schedule}")?;
        if let Some(s) = self.stages {
            write!(f, ",s{s}")?;
        }
        if let Some([em, en]) = self.epi_tile {
            write!(f, ",e{em}x{en}")?;
        }
        if self.swizzle_log2 != 0 {
            write!(f, ",r{}", self.swizzle_log2)?;
        }
        match self.raster {
            RasterOrderOption::AlongM => f.write_str(",am")?,
            RasterOrderOption::AlongN => f.write_str(",an")?,
            RasterOrderOption::Heuristic => {}
        }
        if self.split_k != 1 {
            write!(f, ",k{}", self.split_k)?;
        }
        if self.cluster != [1, 1] {
            write!(f, ",c{}x{}", self.cluster[0], self.cluster[1])?;
        }
        if let Some(w) = self.mma_pipe {
            write!(f, ",w{w}")?;
        }
        match (self.stream_k, self.stream_k_parts) {
            (false, _) => {}
            (true, 2) => f.write_str(",sk")?,
            (true, parts) => write!(f, ",sk{parts}")?,
        }
        Ok(())
    }
}

impl fmt::Display for ConfigSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSpec::Sm80(s) => s.fmt(f),
            ConfigSpec::Sm90(s) => s.fmt(f),
            ConfigSpec::Awq(s) => s.fmt(f),
            ConfigSpec::Moe(s) => s.fmt(f),
            ConfigSpec::MoeSm90(s) => s.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_round_trip() {
        for s in [
            "128x128x32,2x2,auto,1",
            "16x64x128,1x4,4,2,serial,r2",
            "64x64x128,2x2,auto,4,parallel,r2",
            "64x128x64,2x2,2,1,turing",
            "sm90:128x256x64,coop",
            "sm90:64x128x64,pp,s8,e64x32,r1,am,k4,c2x1,w0",
            "sm90:128x128x64,ws,an",
            "sm90:128x256x64,coop,w1,sk",
            "sm90:128x128x128,pp,r3,w1,sk4",
        ] {
            let spec: ConfigSpec = s.parse().unwrap();
            assert_eq!(spec.to_string(), s, "{s}");
        }
    }

    #[test]
    fn bad_strings_say_what_is_wrong() {
        for (s, why) in [
            ("128x128,2x2,auto,1", "needs 3 extents"),
            ("128x128x32,2x2,auto", "too few fields"),
            ("128x128x32,2x2,auto,0", "at least 1"),
            ("128x128x32,2x2,auto,1,fast", "unknown field"),
            ("sm90:128x256x64,zigzag", "unknown schedule"),
            ("sm90:128x256x64,coop,q3", "unknown field"),
            ("sm90:128x0x64,coop", "non-positive"),
            ("sm90:128x256x64,coop,kx", "not a number"),
        ] {
            let e = s.parse::<ConfigSpec>().unwrap_err();
            assert!(e.to_string().contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn specs_apply_their_knobs_to_a_base_config() {
        let ConfigSpec::Sm90(spec) = "sm90:64x128x64,pp,s8,k2,c2x1,w0".parse().unwrap() else {
            panic!("expected an SM90 spec")
        };
        let cfg = spec.apply(GemmSm90Config::bf16([128, 256, 64], Sm90Schedule::Cooperative));
        assert_eq!(
            (cfg.tile, cfg.schedule, cfg.stages),
            ([64, 128, 64], Sm90Schedule::PingPong, Some(8))
        );
        assert_eq!((cfg.cluster, cfg.mma_pipe), ([2, 1], 0));
        let ConfigSpec::Sm80(spec) = "64x128x64,2x2,2,1,turing".parse().unwrap() else {
            panic!("expected an SM80 spec")
        };
        let base = GemmSm80Config::bf16(Major::K, Major::K, [128, 128, 32], [2, 2]);
        let cfg = spec.apply(base);
        assert_eq!(
            (cfg.tile, cfg.warps, cfg.target),
            ([64, 128, 64], [2, 2], Sm80Target::Turing)
        );
        assert_eq!(cfg.stages, Some(2));
        let sel = spec.scaled_mm_selection();
        assert_eq!(
            (sel.target, sel.stages, sel.split_k_mode),
            (Sm80Target::Turing, Some(2), SplitKMode::Serial)
        );
        let Some(Choice::Sm80(sel)) = "64x64x128,2x2,auto,4".parse::<ConfigSpec>().unwrap().gemm_choice() else {
            panic!("expected an SM80 choice")
        };
        assert_eq!((sel.split_k, sel.split_k_mode), (4, SplitKMode::Parallel));
    }

    #[test]
    fn op_specs_come_out_of_their_own_variant_only() {
        let awq: ConfigSpec = "awq:16x256x64,1x4,s4,v4,k10".parse().unwrap();
        let moe: ConfigSpec = "moe:16x128x64,1x4,k4".parse().unwrap();
        assert_eq!(awq.op_spec::<AwqSpec>().unwrap().splits, 10);
        assert_eq!(moe.op_spec::<MoeSpec>().unwrap().splits, 4);
        assert_eq!(
            moe.op_spec::<AwqSpec>().unwrap_err(),
            "moe:16x128x64,1x4,k4 is not an AWQ configuration"
        );
        let gemm: ConfigSpec = "sm90:128x256x64,coop".parse().unwrap();
        assert_eq!(
            gemm.op_spec::<MoeSpec>().unwrap_err(),
            "sm90:128x256x64,coop is not a MoE configuration"
        );
    }
}
