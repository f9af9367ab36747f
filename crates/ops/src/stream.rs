//! Streams: where ops run, and how they order with the application's own work.
//!
//! # The rules
//!
//! * **Which stream.** An [`Ops`](crate::Ops) launches on its stream, [`Ops::stream`](crate::Ops::stream): the
//!   [`Gpu`](crate::Gpu)'s stream for [`Ops::new`](crate::Ops::new) (use [`Gpu::from_stream`](crate::Gpu::from_stream)
//!   to open rcute on a stream the application already has), or the stream given to
//!   [`Ops::on_stream`](crate::Ops::on_stream), which returns a handle on another stream of the same context that
//!   shares the first one's kernels, tuning tables and scratch (cheap: per call, as in
//!   `ops.on_stream(&stream)?.gemm(...)`). Every kernel of an op goes to that stream, in
//!   order; an op returns once launched and never synchronizes the device or a stream.
//! * **Ordering with the application.** Work the application put on the same stream before
//!   the op runs before it, and work it puts there after runs after it. Across streams the
//!   application orders with events as for its own kernels (`other.wait(&stream.record_event(None)?)`),
//!   or lets `cudarc` do it: with `cudarc`'s event tracking on (a context with more than its
//!   default stream), an op on a view made from a `CudaSlice` holds that buffer's guard for
//!   the whole launch, exactly like a `cudarc` launch: the op's stream first waits for the
//!   buffer's last write (and, for the output, its last reads), and after the launch the
//!   buffer's read (inputs) or write (output) event is recorded on the op's stream, so later
//!   `cudarc` uses on any stream wait for the op. Views made with `from_raw` are not tracked:
//!   the application orders those buffers itself.
//! * **CUDA graphs.** An op may be captured on its stream (`stream.begin_capture(..)`,
//!   `ops.on_stream(&stream)?.gemm(..)`, `stream.end_capture(..)`) and the graph replayed with
//!   new data in the same buffers. While the op's stream captures, the op leaves `cudarc`'s
//!   events alone: CUDA forbids a capturing stream to wait on an event recorded outside the
//!   capture (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`, which is what a captured `cudarc` launch
//!   with tracking on hits), and an event recorded inside a capture cannot be waited on by
//!   work outside it. Inside a capture the graph's order is the stream's order; work of other
//!   streams joins it only through events recorded in the same capture, as CUDA requires.
//!   Views read their buffer's address without recording a use (so making a view is allowed
//!   during capture too).
//! * **Scratch.** Split-K workspaces, serial split-K semaphores and the dense weight of AWQ's
//!   prefill path ([`crate::awq::dense`]) are rcute's own memory,
//!   one set per stream (two streams never share scratch, so they run concurrently),
//!   allocated on that stream, grown (doubling) when a larger problem needs more, and freed
//!   with the last handle of the [`Ops`](crate::Ops); outgrown buffers are kept until then, since a graph
//!   captured earlier may still use them. Memory cannot be allocated inside a capture (it would belong to the graph): a
//!   captured op whose scratch would have to grow is an [`OpsError::Capture`]; run the op
//!   once on that stream before capturing (the usual warm-up, which also compiles and loads
//!   its kernel).
//! * **Threads.** One [`Ops`](crate::Ops) (and its `on_stream` handles) may be used by several threads
//!   at once; launches of different threads on one stream are ordered as they reach it.

use crate::error::OpsError;
use cudarc::driver::sys::CUstreamCaptureStatus;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// A buffer whose reads `cudarc` tracks (object-safe, so views hold any `CudaSlice<T>`).
pub(crate) trait TrackRead: Send + Sync {
    /// Make `stream` wait for the buffer's last write; the guard records a read on drop.
    fn read_on<'s>(&'s self, stream: &'s CudaStream) -> SyncOnDrop<'s>;
}

/// A buffer whose writes `cudarc` tracks.
pub(crate) trait TrackWrite: Send + Sync {
    /// Make `stream` wait for the buffer's last reads and write; the guard records a write.
    fn write_on<'s>(&'s mut self, stream: &'s CudaStream) -> SyncOnDrop<'s>;
}

impl<T> TrackRead for CudaSlice<T> {
    fn read_on<'s>(&'s self, stream: &'s CudaStream) -> SyncOnDrop<'s> {
        self.device_ptr(stream).1
    }
}

impl<T> TrackWrite for CudaSlice<T> {
    fn write_on<'s>(&'s mut self, stream: &'s CudaStream) -> SyncOnDrop<'s> {
        self.device_ptr_mut(stream).1
    }
}

/// Whether `stream` is capturing a CUDA graph.
pub(crate) fn is_capturing(stream: &CudaStream) -> Result<bool, OpsError> {
    Ok(stream.capture_status()? != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// The device address of `buf`, without recording a use of it and without making any
/// stream of the application wait. `cudarc` hands out addresses only through
/// `device_ptr(stream)`, which (with event tracking on) makes `stream` wait for the
/// buffer's last write: here that wait goes to a private stream that runs nothing else
/// (one per CUDA context, made only where `cudarc` already tracks, so the application's
/// context keeps its mode), and the guard is forgotten, so nothing is recorded.
pub(crate) fn address<T>(buf: &CudaSlice<T>) -> u64 {
    let ctx = buf.context();
    if !ctx.is_managing_stream_synchronization() {
        // No events: `device_ptr` has no effect besides the address.
        return buf.device_ptr(buf.stream()).0;
    }
    match probe_stream(ctx) {
        Some(probe) => {
            let (ptr, guard) = buf.device_ptr(&probe);
            std::mem::forget(guard);
            ptr
        }
        None => {
            let (ptr, guard) = buf.device_ptr(buf.stream());
            std::mem::forget(guard);
            ptr
        }
    }
}

/// The private stream of `ctx`'s CUDA context for [`address`] (`None` if it cannot be
/// made; then the buffer's own stream takes the wait).
fn probe_stream(ctx: &Arc<CudaContext>) -> Option<Arc<CudaStream>> {
    static PROBES: OnceLock<Mutex<HashMap<usize, Arc<CudaStream>>>> = OnceLock::new();
    let mut probes = PROBES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let key = ctx.cu_ctx() as usize;
    if let Some(s) = probes.get(&key) {
        return Some(s.clone());
    }
    let s = ctx.new_stream().ok()?;
    probes.insert(key, s.clone());
    Some(s)
}

/// The `cudarc` guards an op holds while it launches (see the module docs): waits enqueued
/// when a view is added, uses recorded when this is dropped, after the launch.
pub(crate) struct Uses<'s> {
    stream: &'s CudaStream,
    on: bool,
    held: Vec<SyncOnDrop<'s>>,
}

impl<'s> Uses<'s> {
    /// Guards for a launch on `stream`: none while it captures or when `cudarc` does not
    /// track events.
    pub(crate) fn new(stream: &'s CudaStream) -> Result<Uses<'s>, OpsError> {
        let on = stream.context().is_managing_stream_synchronization() && !is_capturing(stream)?;
        Ok(Uses {
            stream,
            on,
            held: Vec::new(),
        })
    }

    /// The op reads `buf`.
    pub(crate) fn read(&mut self, buf: Option<&'s dyn TrackRead>) {
        if let (true, Some(b)) = (self.on, buf) {
            self.held.push(b.read_on(self.stream));
        }
    }

    /// The op writes `buf`.
    pub(crate) fn write(&mut self, buf: Option<&'s mut (dyn TrackWrite + '_)>) {
        if let (true, Some(b)) = (self.on, buf) {
            self.held.push(b.write_on(self.stream));
        }
    }
}

/// Device memory of rcute's own (split-K workspace, semaphores): a raw allocation without
/// `cudarc` events, used only on the stream that allocated it and freed there.
struct RawBuffer {
    ptr: u64,
    bytes: usize,
    stream: Arc<CudaStream>,
}

impl RawBuffer {
    /// `bytes` zeroed bytes on `stream` (stream-ordered).
    fn zeroed(stream: &Arc<CudaStream>, bytes: usize) -> Result<RawBuffer, OpsError> {
        let ptr = stream.alloc_zeros::<u8>(bytes)?.leak();
        Ok(RawBuffer {
            ptr,
            bytes,
            stream: stream.clone(),
        })
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        use cudarc::driver::result;
        let ctx = self.stream.context();
        ctx.record_err(ctx.bind_to_thread());
        // As `CudaSlice`'s drop: after every use on the stream.
        if ctx.has_async_alloc() {
            // SAFETY: `ptr` was allocated on this stream and is used only there.
            ctx.record_err(unsafe { result::free_async(self.ptr, self.stream.cu_stream()) });
        } else {
            ctx.record_err(self.stream.synchronize());
            // SAFETY: the stream is idle, so no kernel uses `ptr` any more.
            ctx.record_err(unsafe { result::free_sync(self.ptr) });
        }
    }
}

/// The scratch of one stream.
#[derive(Default)]
struct StreamScratch {
    workspace: Option<RawBuffer>,
    semaphores: Option<RawBuffer>,
    /// A dequantized weight (AWQ's dense prefill path).
    weight: Option<RawBuffer>,
    /// Buffers replaced by larger ones: a CUDA graph captured earlier may still use them,
    /// so they live as long as the pool (growth doubles, so they hold less than the
    /// current buffers).
    retired: Vec<RawBuffer>,
}

/// Scratch memory per stream (see the module docs).
#[derive(Default)]
pub(crate) struct ScratchPool {
    streams: Mutex<HashMap<usize, StreamScratch>>,
}

/// The scratch of one stream, locked for one op's launches.
pub(crate) struct Scratch<'p> {
    map: MutexGuard<'p, HashMap<usize, StreamScratch>>,
    stream: Arc<CudaStream>,
}

impl ScratchPool {
    /// The scratch of `stream`, held until the returned value is dropped (keep it across
    /// the launch: a concurrent op on the same stream cannot free it meanwhile).
    pub(crate) fn lock(&self, stream: &Arc<CudaStream>) -> Scratch<'_> {
        Scratch {
            map: self.streams.lock().unwrap_or_else(PoisonError::into_inner),
            stream: stream.clone(),
        }
    }
}

/// The kinds of scratch a stream holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Left dirty by the ops.
    Workspace,
    /// Zero, left zero by every completed launch.
    Semaphores,
    /// Left dirty: a dense weight an op writes and then reads.
    Weight,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Workspace => "split-K workspace",
            Kind::Semaphores => "split-K semaphores",
            Kind::Weight => "dequantized weight scratch",
        }
    }
}

impl StreamScratch {
    fn slot(&mut self, kind: Kind) -> &mut Option<RawBuffer> {
        match kind {
            Kind::Workspace => &mut self.workspace,
            Kind::Semaphores => &mut self.semaphores,
            Kind::Weight => &mut self.weight,
        }
    }
}

impl Scratch<'_> {
    fn get(&mut self, bytes: usize, kind: Kind) -> Result<u64, OpsError> {
        let key = self.stream.cu_stream() as usize;
        let entry = self.map.entry(key).or_default();
        let have = entry.slot(kind).as_ref().map_or(0, |b| b.bytes);
        if have < bytes {
            if is_capturing(&self.stream)? {
                return Err(OpsError::Capture(format!(
                    "this op needs {bytes} bytes of {} on the capturing stream, which has {have}: \
                     run it once on this stream before capturing",
                    kind.name(),
                )));
            }
            let new = RawBuffer::zeroed(&self.stream, bytes.max(have.saturating_mul(2)))?;
            if let Some(old) = entry.slot(kind).replace(new) {
                entry.retired.push(old);
            }
        }
        Ok(entry.slot(kind).as_ref().map_or(0, |b| b.ptr))
    }

    /// A workspace of at least `bytes` bytes (16-byte aligned) on this stream.
    pub(crate) fn workspace(&mut self, bytes: usize) -> Result<u64, OpsError> {
        self.get(bytes, Kind::Workspace)
    }

    /// At least `count` `int` semaphores on this stream, zero (every completed serial
    /// split-K launch leaves them zero).
    pub(crate) fn semaphores(&mut self, count: usize) -> Result<u64, OpsError> {
        self.get(count.saturating_mul(4), Kind::Semaphores)
    }

    /// At least `bytes` bytes (16-byte aligned) on this stream for a dense weight that one
    /// op writes and then reads (AWQ's prefill path, under `AwqKernels::dense`).
    pub(crate) fn weight(&mut self, bytes: usize) -> Result<u64, OpsError> {
        self.get(bytes, Kind::Weight)
    }
}
