//! `rcute bench stream`: how fast can a kernel stream weights from DRAM on this GPU? Times
//! the load-only probes of [`rcute_kernel::weight_stream`] (register ring, `cp.async`
//! stages, `cp.async.bulk` stages) over byte counts of real decode rows, each probe with
//! persistent grids of `k x SMs` CTAs and with one CTA per tile, against a
//! device-to-device copy measured in the same run. Each call reads one of enough buffer
//! copies to total `--min-mb` MB (so the bytes come from DRAM, not from the L2 the
//! previous call filled); a sample replays a CUDA graph of 10 passes over all copies and
//! the median per call is reported. The full table goes to `--csv`; stdout gets the best
//! settings per byte count and straight-line fits `t = a + bytes / bw` (the fixed cost
//! `a`) over the byte counts from 1 MiB to 1 GiB.

use crate::bench_timing::{copy_bandwidth, median_us};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use rcute_kernel::weight_stream::{generate, sweep, GeneratedStream, RowPieces, StreamConfig, StreamLoad};
use rcute_kernel::{compile, CompileOptions, Function, Gpu};
use std::fmt::Write as _;
use std::sync::Arc;

/// Options of `rcute bench stream`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchStreamArgs {
    /// Bytes read per call (repeatable, multiples of 16). Default: 4096x4096 int4
    /// (8388608), 14336x4096 int4 (29360128), DeepSeek-V2-Lite T = 1 GEMM2 (34603008) and
    /// GEMM1 (69206016), Mixtral's 2.8 GB of experts (2818572288).
    #[arg(long = "bytes")]
    pub bytes: Vec<u64>,
    /// Probes `LOAD:THREADSxDEPTH[xSTAGES][@ROWSxPIECE/STRIDE[,l2]]` (repeatable), e.g. `ldg:256x8`,
    /// `cpasync:128x4x4`, `bulk:128x8x4`, `cpasync:128x8x4@128x128/8192` (tiles of 128 rows
    /// x 128 B at an 8 KB row stride, a decode GEMM's weight order: `RowPieces`; `,l2`: with the
    /// `.L2::256B` prefetch size); default:
    /// `rcute_kernel::weight_stream::sweep()`.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// Persistent grids: CTAs per SM (repeatable; those above the occupancy are skipped).
    /// One CTA per tile is always timed too.
    #[arg(long = "ctas", default_values_t = [1u32, 2, 4, 8])]
    pub ctas: Vec<u32>,
    /// Also these absolute grid sizes (repeatable), e.g. a kernel's own CTA count: CTA
    /// `b` takes tiles `b, b + N, ...`.
    #[arg(long = "grid")]
    pub grid: Vec<u32>,
    /// Timed samples per setting (median reported).
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// The buffer copies total at least this many MB.
    #[arg(long, default_value_t = 150)]
    pub min_mb: u64,
    /// Write every measurement as CSV to this file.
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
    /// Also time every probe with this many KB of dynamic shared memory per CTA that it
    /// does not use (repeatable; the name gets `+<KB>K`): a kernel's shared memory shrinks
    /// the L1 (the carveout) that its loads pass through, as the AWQ streamed kernel's
    /// staged `x` does.
    #[arg(long = "smem-pad-kb")]
    pub smem_pad_kb: Vec<u32>,
}

/// The byte counts of the default rows.
const DEFAULT_BYTES: [u64; 5] = [8_388_608, 29_360_128, 34_603_008, 69_206_016, 2_818_572_288];

/// Parse `LOAD:THREADSxDEPTH[xSTAGES][@ROWSxPIECE/STRIDE]`.
pub fn parse_stream_config(s: &str) -> Result<StreamConfig, String> {
    let (s, pieces) = match s.split_once('@') {
        Some((head, p)) => (
            head,
            Some(parse_pieces(p).ok_or_else(|| format!("bad row pieces {p:?}: expected ROWSxPIECE/STRIDE"))?),
        ),
        None => (s, None),
    };
    let (load, rest) = s
        .split_once(':')
        .ok_or_else(|| format!("bad probe {s:?}: expected LOAD:TxD[xS]"))?;
    let load = match load {
        "ldg" => StreamLoad::Ldg,
        "cpasync" => StreamLoad::CpAsync,
        "bulk" => StreamLoad::Bulk,
        _ => return Err(format!("bad probe {s:?}: load must be ldg, cpasync or bulk")),
    };
    let v: Vec<u32> = rest
        .split('x')
        .map(|x| x.parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad probe {s:?}: {e}"))?;
    let (threads, depth, stages) = match (load, v.as_slice()) {
        (StreamLoad::Ldg, [t, d]) => (*t, *d, 1),
        (StreamLoad::CpAsync | StreamLoad::Bulk, [t, d, st]) => (*t, *d, *st),
        _ => return Err(format!("bad probe {s:?}: ldg:TxD, cpasync:TxDxS or bulk:TxDxS")),
    };
    let cfg = StreamConfig {
        load,
        threads,
        depth,
        stages,
        pieces,
    };
    generate(&cfg).map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// `ROWSxPIECE/STRIDE[,l2]`.
fn parse_pieces(s: &str) -> Option<RowPieces> {
    let (s, l2_256) = match s.strip_suffix(",l2") {
        Some(head) => (head, true),
        None => (s, false),
    };
    let (rp, stride) = s.split_once('/')?;
    let (rows, piece) = rp.split_once('x')?;
    Some(RowPieces {
        rows: rows.parse().ok()?,
        piece: piece.parse().ok()?,
        stride: stride.parse().ok()?,
        l2_256,
    })
}

/// One timed setting.
struct Row {
    bytes: u64,
    name: String,
    /// `kxSM` (persistent, k CTAs per SM), `tile` (one CTA per tile) or `N` (`--grid`).
    grid: String,
    /// Bytes in flight per SM (CTAs resident per SM x per CTA; for grids that are not
    /// persistent, as many CTAs as fit or as the grid has, whichever is fewer).
    inflight_sm: u64,
    us: f64,
}

impl Row {
    fn grid(&self) -> String {
        self.grid.clone()
    }
}

/// A compiled probe, the unused shared memory it launches with and its occupancy (CTAs
/// per SM).
struct Probe {
    g: GeneratedStream,
    f: Function,
    pad: u32,
    occupancy: u32,
}

impl Probe {
    /// Launch configuration of `ctas` CTAs with the padding.
    fn launch_config(&self, ctas: u32) -> rcute_kernel::launch::LaunchConfig {
        self.g
            .launch_config(ctas)
            .with_dynamic_smem(self.g.config.smem_bytes() + self.pad)
    }

    /// The probe's name, `+<KB>K` with padding.
    fn name(&self) -> String {
        match self.pad {
            0 => self.g.name.clone(),
            p => format!("{}+{}K", self.g.name, p / 1024),
        }
    }
}

fn load_probe(gpu: &Gpu, cfg: &StreamConfig, out: u64, pad: u32) -> Result<Probe, String> {
    let g = generate(cfg).map_err(|e| e.to_string())?;
    let arch = gpu.arch().ok_or("unsupported GPU architecture")?;
    if !cfg.arch().supported_on(arch) {
        return Err(format!("{} needs {}", g.name, cfg.arch()));
    }
    let c = compile(&g.source, &format!("{}.cu", g.name), &CompileOptions::new(arch)).map_err(|e| e.to_string())?;
    let f = gpu
        .load(&c)
        .and_then(|m| m.function(&g.name))
        .map_err(|e| e.to_string())?;
    // One empty launch raises the function's dynamic shared-memory limit before the
    // occupancy query.
    // SAFETY: the arguments match the probe's parameters; zero units read nothing.
    let lc = g.launch_config(1).with_dynamic_smem(cfg.smem_bytes() + pad);
    unsafe { f.launch(&lc, &g.args(0, 0, out, 0)) }.map_err(|e| e.to_string())?;
    let occupancy = f
        .cuda_function()
        .occupancy_max_active_blocks_per_multiprocessor(cfg.threads, (cfg.smem_bytes() + pad) as usize, None)
        .map_err(|e| e.to_string())?;
    Ok(Probe { g, f, pad, occupancy })
}

/// At most this many buffer copies (tiny byte counts measure the fixed cost; the L2
/// holds them anyway).
const MAX_COPIES: u64 = 32;

/// Buffer copies of `bytes` totalling at least `min_bytes` (at most [`MAX_COPIES`]),
/// filled with a non-zero byte.
fn buffers(stream: &Arc<CudaStream>, bytes: u64, min_bytes: u64) -> Result<Vec<CudaSlice<u8>>, String> {
    let count = min_bytes.div_ceil(bytes.max(1)).clamp(1, MAX_COPIES);
    (0..count)
        .map(|_| {
            let b: CudaSlice<u8> = stream.alloc_zeros(bytes.max(16) as usize).map_err(|e| e.to_string())?;
            let (p, _g) = b.device_ptr(stream);
            // SAFETY: `p` is this live allocation of at least `bytes` bytes.
            unsafe { cudarc::driver::result::memset_d8_async(p, 0x5a, bytes as usize, stream.cu_stream()) }
                .map_err(|e| e.to_string())?;
            drop(_g);
            Ok(b)
        })
        .collect()
}

/// Median us per call of each grid of `p` over `bytes`, one call per buffer in turn.
fn time_probe(
    stream: &Arc<CudaStream>,
    p: &Probe,
    bufs: &[u64],
    bytes: u64,
    grids: &[u32],
    out: u64,
    iters: usize,
) -> Result<Vec<f64>, String> {
    let mut fs: Vec<Box<dyn FnMut() -> Result<(), String>>> = grids
        .iter()
        .map(|&ctas| {
            let cfg = p.launch_config(ctas);
            let f = p.f.clone();
            let args: Vec<_> = bufs.iter().map(|&b| p.g.args(b, bytes, out, 0x1234_5679)).collect();
            Box::new(move || {
                args.iter().try_for_each(|a| {
                    // SAFETY: each buffer holds `bytes` bytes; `out` holds 1024 words.
                    unsafe { f.launch(&cfg, a) }.map_err(|e| e.to_string())
                })
            }) as Box<dyn FnMut() -> Result<(), String>>
        })
        .collect();
    let mut refs: Vec<&mut dyn FnMut() -> Result<(), String>> = fs.iter_mut().map(|f| f.as_mut() as _).collect();
    let (t, _) = median_us(stream, iters, true, &mut refs)?;
    Ok(t.into_iter().map(|x| x / bufs.len() as f64).collect())
}

/// Least-squares `t = a + bytes / bw` over `(bytes, us)`: `(a us, bw GB/s)`.
fn fit(points: &[(u64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 as f64 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 as f64 - mx).powi(2)).sum();
    let slope = sxy / sxx; // us per byte
    Some((my - slope * mx, 1e-3 / slope))
}

/// Run the benchmark; returns the summary.
pub fn run(args: &BenchStreamArgs) -> Result<String, String> {
    let bytes_list: Vec<u64> = if args.bytes.is_empty() {
        DEFAULT_BYTES.to_vec()
    } else {
        args.bytes.clone()
    };
    if let Some(b) = bytes_list.iter().find(|b| **b == 0 || *b % 16 != 0) {
        return Err(format!("--bytes {b}: not a positive multiple of 16"));
    }
    let configs = if args.configs.is_empty() {
        sweep()
    } else {
        args.configs
            .iter()
            .map(|s| parse_stream_config(s))
            .collect::<Result<_, _>>()?
    };
    // SAFETY: one stream only (every buffer here).
    let (gpu, stream) = unsafe { crate::bench_timing::one_stream_gpu("the benchmark") }?;
    let sms = gpu.sm_count();
    let out_buf: CudaSlice<u32> = stream.alloc_zeros(1024).map_err(|e| e.to_string())?;
    let out = out_buf.device_ptr(&stream).0;
    let mut probes = Vec::new();
    let pads: Vec<u32> = std::iter::once(0)
        .chain(args.smem_pad_kb.iter().map(|k| k * 1024))
        .collect();
    for cfg in &configs {
        for &pad in &pads {
            match load_probe(&gpu, cfg, out, pad) {
                Ok(p) => probes.push(p),
                Err(e) => eprintln!("skipped: {e}"),
            }
        }
    }
    let (copy_us, copy_gbs) = copy_bandwidth(&stream, 256 << 20, args.iters)?;
    let mut text = format!(
        "device: {} ({sms} SMs); device-to-device copy of 256 MiB: {copy_us:.1} us = {copy_gbs:.0} GB/s (read + write)\n",
        gpu.name()
    );
    let mut rows = Vec::new();
    let min_bytes = args.min_mb * 1_000_000;
    let mut copy_rows = Vec::new();
    for &bytes in &bytes_list {
        let bufs = buffers(&stream, bytes, min_bytes)?;
        let ptrs: Vec<u64> = bufs.iter().map(|b| b.device_ptr(&stream).0).collect();
        let c = copy_us_at(&stream, &bufs, bytes, args.iters)?;
        copy_rows.push((bytes, c));
        eprintln!("{bytes} B: {} copies, copy {c:.2} us", bufs.len());
        for p in &probes {
            let tiles = p.g.tiles(bytes).clamp(1, i32::MAX as u64) as u32;
            // (label, CTAs, CTAs resident per SM)
            let mut grids: Vec<(String, u32, u32)> = args
                .ctas
                .iter()
                .filter(|&&k| k <= p.occupancy)
                .map(|&k| (format!("{k}xSM"), k * sms, k))
                .collect();
            grids.push(("tile".into(), tiles, p.occupancy.min(tiles.div_ceil(sms))));
            grids.extend(
                args.grid
                    .iter()
                    .map(|&n| (n.to_string(), n, p.occupancy.min(n.div_ceil(sms)))),
            );
            let ctas: Vec<u32> = grids.iter().map(|g| g.1).collect();
            let t = time_probe(&stream, p, &ptrs, bytes, &ctas, out, args.iters)?;
            for ((grid, _, resident), us) in grids.into_iter().zip(t) {
                rows.push(Row {
                    bytes,
                    name: p.name(),
                    grid,
                    inflight_sm: resident as u64 * p.g.config.bytes_in_flight_per_cta(),
                    us,
                });
            }
        }
        // Rewritten after every byte count, so a run cut short keeps what it measured.
        if let Some(path) = &args.csv {
            std::fs::write(path, csv(&rows, copy_gbs)).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    summary(&mut text, &rows, &copy_rows, copy_gbs);
    Ok(text)
}

/// Median us of a device-to-device copy of `bytes` from each buffer in turn.
fn copy_us_at(stream: &Arc<CudaStream>, bufs: &[CudaSlice<u8>], bytes: u64, iters: usize) -> Result<f64, String> {
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(bytes.max(16) as usize).map_err(|e| e.to_string())?;
    let mut f = || {
        bufs.iter().try_for_each(|b| {
            stream
                .memcpy_dtod(&b.slice(..bytes as usize), &mut dst.slice_mut(..bytes as usize))
                .map_err(|x| x.to_string())
        })
    };
    let (t, _) = median_us(stream, iters, true, &mut [&mut f])?;
    Ok(t[0] / bufs.len() as f64)
}

fn gbs(bytes: u64, us: f64) -> f64 {
    bytes as f64 / (us * 1e-6) / 1e9
}

fn csv(rows: &[Row], copy_gbs: f64) -> String {
    let mut s = String::from("bytes,probe,grid,inflight_per_sm,us,gbs,pct_copy\n");
    for r in rows {
        let g = gbs(r.bytes, r.us);
        let _ = writeln!(
            s,
            "{},{},{},{},{:.3},{:.0},{:.1}",
            r.bytes,
            r.name,
            r.grid(),
            r.inflight_sm,
            r.us,
            g,
            100.0 * g / copy_gbs
        );
    }
    s
}

/// Per byte count: the copy and the five fastest settings, and the best of each load
/// kind; then the straight-line fits of the settings timed at every byte count from 1 MiB to 1 GiB.
fn summary(text: &mut String, rows: &[Row], copy_rows: &[(u64, f64)], copy_gbs: f64) {
    let line = |r: &Row| {
        let g = gbs(r.bytes, r.us);
        format!(
            "  {:<30} {:>5} {:>7} KB/SM {:>9.2} us {:>6.0} GB/s {:>5.1}%\n",
            r.name,
            r.grid(),
            r.inflight_sm / 1024,
            r.us,
            g,
            100.0 * g / copy_gbs
        )
    };
    for &(bytes, c) in copy_rows {
        let _ = writeln!(
            text,
            "{bytes} B: copy {c:.2} us ({:.0} GB/s read + write)",
            2.0 * bytes as f64 / (c * 1e-6) / 1e9
        );
        let mut at: Vec<&Row> = rows.iter().filter(|r| r.bytes == bytes).collect();
        at.sort_by(|a, b| a.us.total_cmp(&b.us));
        at.iter().take(5).for_each(|r| text.push_str(&line(r)));
        for tag in ["_ldg_", "_cpasync_", "_bulk_"] {
            if let Some(r) = at.iter().find(|r| r.name.contains(tag)) {
                text.push_str(&format!("  best {}", line(r).trim_start()));
            }
        }
    }
    let small: Vec<u64> = copy_rows
        .iter()
        .map(|c| c.0)
        .filter(|b| (1 << 20..1 << 30).contains(b))
        .collect();
    let mut fits = Vec::new();
    let mut keys: Vec<(String, String)> = rows.iter().map(|r| (r.name.clone(), r.grid())).collect();
    keys.sort();
    keys.dedup();
    for (name, grid) in keys {
        let pts: Vec<(u64, f64)> = rows
            .iter()
            .filter(|r| r.name == name && r.grid() == grid && small.contains(&r.bytes))
            .map(|r| (r.bytes, r.us))
            .collect();
        if let Some((a, bw)) = fit(&pts) {
            fits.push((name, grid, a, bw));
        }
    }
    fits.sort_by(|x, y| y.3.total_cmp(&x.3));
    let copy_pts: Vec<(u64, f64)> = copy_rows
        .iter()
        .filter(|c| small.contains(&c.0))
        .map(|c| (2 * c.0, c.1))
        .collect();
    if let Some((a, bw)) = fit(&copy_pts) {
        let _ = writeln!(
            text,
            "fit t = a + bytes / bw over {small:?} B: copy (read + write bytes) a = {a:.2} us, bw = {bw:.0} GB/s"
        );
    }
    for (name, grid, a, bw) in fits.iter().take(12) {
        let _ = writeln!(text, "  {name:<30} {grid:>5}: a = {a:.2} us, bw = {bw:.0} GB/s");
    }
}

#[cfg(test)]
mod tests {
    use super::{fit, parse_stream_config};
    use rcute_kernel::weight_stream::StreamLoad;

    #[test]
    fn probes_parse() {
        let c = parse_stream_config("cpasync:128x4x8").unwrap();
        assert_eq!((c.load, c.threads, c.depth, c.stages), (StreamLoad::CpAsync, 128, 4, 8));
        assert_eq!(parse_stream_config("ldg:256x8").unwrap().stages, 1);
        let p = parse_stream_config("cpasync:128x8x4@64x256/28672")
            .unwrap()
            .pieces
            .unwrap();
        assert_eq!((p.rows, p.piece, p.stride, p.l2_256), (64, 256, 28672, false));
        assert!(
            parse_stream_config("cpasync:128x8x4@128x128/8192,l2")
                .unwrap()
                .pieces
                .unwrap()
                .l2_256
        );
        for bad in [
            "ldg:256x8x2",
            "bulk:128x8",
            "tma:128x8x4",
            "ldg:100x8",
            "ldg256x8",
            "cpasync:128x4x1",
            "cpasync:128x8x4@128x128",
            "cpasync:128x8x4@64x128/8192",
            "ldg:128x8@128x128/8192",
        ] {
            assert!(parse_stream_config(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn line_fit_recovers_intercept_and_bandwidth() {
        // 2 us + bytes / 3000 GB/s.
        let pts: Vec<(u64, f64)> = [1u64 << 20, 1 << 24, 1 << 26]
            .iter()
            .map(|&b| (b, 2.0 + b as f64 / 3e6))
            .collect();
        let (a, bw) = fit(&pts).unwrap();
        assert!((a - 2.0).abs() < 1e-6 && (bw - 3000.0).abs() < 1e-6, "{a} {bw}");
        assert!(fit(&pts[..1]).is_none());
    }
}
