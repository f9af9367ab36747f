//! [`Communicator`]: one rank of an NCCL communicator, bound to the caller's stream.
//!
//! Every collective is enqueued on that stream (in order with the caller's kernels, no
//! host synchronisation), so it can be captured in a CUDA graph on it (NCCL 2.9 or newer
//! supports capture). The raw collectives take device addresses and are `unsafe`; the
//! expert-parallel layer ([`crate::ep::ExpertParallel`]) calls them on validated buffers.

use super::library::Nccl;
use crate::error::OpsError;
use crate::tensor::DType;
use cudarc::driver::CudaStream;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Where the layer is when [`super::ExpertParallel::fused_moe_marked`] calls its marker
/// (with the stream the collectives go to): around the NCCL collectives (a benchmark
/// records CUDA events there to time them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpMark {
    /// Before the first collective is enqueued.
    CollectiveBegin,
    /// After the last collective is enqueued.
    CollectiveEnd,
}

/// The bootstrap id every rank of a multi-process communicator needs
/// ([`Communicator::from_rank`]): made by one rank, sent to the others by the application.
#[derive(Clone, Copy, Debug)]
pub struct UniqueId(pub [std::ffi::c_char; 128]);

impl UniqueId {
    /// A new id (`ncclGetUniqueId`).
    ///
    /// # Errors
    ///
    /// [`OpsError::Nccl`] when NCCL is absent or fails.
    pub fn new() -> Result<UniqueId, OpsError> {
        let n = Nccl::get()?;
        let mut id = ncclUniqueId { internal: [0; 128] };
        // SAFETY: writes one ncclUniqueId.
        n.check("ncclGetUniqueId", unsafe { (n.GetUniqueId)(&mut id) })?;
        Ok(UniqueId(id.internal))
    }
}

/// One rank of an NCCL communicator: its rank, the world size, its device and the
/// caller's stream where its collectives run. `Send`: a rank may be driven from its own
/// thread (one thread per rank at a time; NCCL communicators are not reentrant).
pub struct Communicator {
    comm: ncclComm_t,
    rank: usize,
    world: usize,
    stream: Arc<CudaStream>,
    nccl: &'static Nccl,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; `&mut`
// is not needed because rcute never calls it from two threads at once (see `Sync`).
unsafe impl Send for Communicator {}
// SAFETY: the methods taking `&self` only enqueue work; callers of one rank from several
// threads must order their calls themselves (documented on the type), as with NCCL.
unsafe impl Sync for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("device", &self.device())
            .finish()
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // SAFETY: the communicator is ours and used by nothing after this. A failure
        // cannot be reported from drop; the resources are gone either way.
        let _ = unsafe { (self.nccl.CommDestroy)(self.comm) };
    }
}

/// NCCL's name of an element type.
pub(crate) fn nccl_type(d: DType) -> Result<ncclDataType_t, OpsError> {
    Ok(match d {
        DType::BF16 => ncclDataType_t::ncclBfloat16,
        DType::F16 => ncclDataType_t::ncclFloat16,
        DType::F32 => ncclDataType_t::ncclFloat32,
        DType::S32 => ncclDataType_t::ncclInt32,
        DType::S8 => ncclDataType_t::ncclInt8,
        DType::E4M3 => return Err(OpsError::DType("e4m3 in an NCCL collective".into())),
    })
}

impl Communicator {
    /// One communicator per stream, all in this process (`ncclCommInitAll` over the
    /// streams' devices; rank `i` is `streams[i]`, each on its own GPU): the
    /// single-process form, as `cudarc::nccl::Comm::from_devices`.
    ///
    /// # Errors
    ///
    /// [`OpsError::Nccl`] when NCCL is absent or fails (e.g. two streams on one device);
    /// [`OpsError::Empty`] for no stream.
    pub fn from_streams(streams: &[Arc<CudaStream>]) -> Result<Vec<Communicator>, OpsError> {
        if streams.is_empty() {
            return Err(OpsError::Empty("no stream for a communicator".into()));
        }
        let nccl = Nccl::get()?;
        let devs: Vec<c_int> = streams.iter().map(|s| s.context().ordinal() as c_int).collect();
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); streams.len()];
        streams[0].context().bind_to_thread()?;
        // SAFETY: `comms` and `devs` hold `streams.len()` entries.
        let r = unsafe { (nccl.CommInitAll)(comms.as_mut_ptr(), devs.len() as c_int, devs.as_ptr()) };
        nccl.check("ncclCommInitAll", r)?;
        Ok(comms
            .into_iter()
            .zip(streams)
            .enumerate()
            .map(|(rank, (comm, s))| Communicator {
                comm,
                rank,
                world: streams.len(),
                stream: s.clone(),
                nccl,
            })
            .collect())
    }

    /// Rank `rank` of `world` (`ncclCommInitRank`; every rank calls it with the same `id`,
    /// typically one process per GPU). Blocks until all ranks joined.
    ///
    /// # Errors
    ///
    /// [`OpsError::Shape`] for `rank >= world`; [`OpsError::Nccl`] when NCCL is absent or
    /// fails.
    pub fn from_rank(
        stream: &Arc<CudaStream>,
        rank: usize,
        world: usize,
        id: UniqueId,
    ) -> Result<Communicator, OpsError> {
        if rank >= world || world > c_int::MAX as usize {
            return Err(OpsError::Shape(format!("rank {rank} of a world of {world}")));
        }
        let nccl = Nccl::get()?;
        let mut comm: ncclComm_t = std::ptr::null_mut();
        stream.context().bind_to_thread()?;
        // SAFETY: writes one communicator; the id is NCCL's opaque 128 bytes.
        let r = unsafe {
            (nccl.CommInitRank)(
                &mut comm,
                world as c_int,
                ncclUniqueId { internal: id.0 },
                rank as c_int,
            )
        };
        nccl.check("ncclCommInitRank", r)?;
        Ok(Communicator {
            comm,
            rank,
            world,
            stream: stream.clone(),
            nccl,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The device ordinal of this rank's stream.
    pub fn device(&self) -> usize {
        self.stream.context().ordinal()
    }

    /// The stream this rank's collectives run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn raw_stream(&self) -> *mut c_void {
        self.stream.cu_stream() as *mut c_void
    }

    /// `recv = sum over ranks of send` (`count` elements; `send == recv` is in place).
    ///
    /// # Safety
    ///
    /// `send` and `recv` address `count` elements of `dtype` on this rank's device, valid
    /// until the stream reaches the collective; every rank makes the same call.
    pub unsafe fn all_reduce_sum(&self, send: u64, recv: u64, count: usize, dtype: DType) -> Result<(), OpsError> {
        self.all_reduce_sum_on(&self.stream, send, recv, count, dtype)
    }

    /// [`Self::all_reduce_sum`] enqueued on `stream` instead of [`Self::stream`].
    ///
    /// # Safety
    ///
    /// As [`Self::all_reduce_sum`]; `stream` belongs to this rank's device, and the
    /// collectives of this communicator stay in one order on every rank.
    pub unsafe fn all_reduce_sum_on(
        &self,
        stream: &CudaStream,
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
    ) -> Result<(), OpsError> {
        let t = nccl_type(dtype)?;
        stream.context().bind_to_thread()?;
        let r = (self.nccl.AllReduce)(
            send as *const c_void,
            recv as *mut c_void,
            count,
            t,
            ncclRedOp_t::ncclSum,
            self.comm,
            stream.cu_stream() as *mut c_void,
        );
        self.nccl.check("ncclAllReduce", r)
    }

    /// `recv = block `rank` of the sum over ranks of send` (`send` holds `world *
    /// recv_count` elements, `recv` `recv_count`).
    ///
    /// # Safety
    ///
    /// As [`Self::all_reduce_sum`], with the sizes above.
    pub unsafe fn reduce_scatter_sum(
        &self,
        send: u64,
        recv: u64,
        recv_count: usize,
        dtype: DType,
    ) -> Result<(), OpsError> {
        let t = nccl_type(dtype)?;
        self.stream.context().bind_to_thread()?;
        let r = (self.nccl.ReduceScatter)(
            send as *const c_void,
            recv as *mut c_void,
            recv_count,
            t,
            ncclRedOp_t::ncclSum,
            self.comm,
            self.raw_stream(),
        );
        self.nccl.check("ncclReduceScatter", r)
    }

    /// Block `p` of `recv` = rank `p`'s `send` (`send_count` elements each).
    ///
    /// # Safety
    ///
    /// As [`Self::all_reduce_sum`]; `recv` holds `world * send_count` elements.
    pub unsafe fn all_gather(&self, send: u64, recv: u64, send_count: usize, dtype: DType) -> Result<(), OpsError> {
        let t = nccl_type(dtype)?;
        self.stream.context().bind_to_thread()?;
        let r = (self.nccl.AllGather)(
            send as *const c_void,
            recv as *mut c_void,
            send_count,
            t,
            self.comm,
            self.raw_stream(),
        );
        self.nccl.check("ncclAllGather", r)
    }

    /// All-to-all of several buffers in one NCCL group of send/recv pairs (which every
    /// NCCL 2.7+ has, rather than `ncclAlltoAll`, which only recent ones have): for each
    /// `(send, recv, count, dtype)`, block `p` of `send` goes to rank `p` and block `p` of
    /// `recv` comes from rank `p` (`count` elements per block).
    ///
    /// # Safety
    ///
    /// As [`Self::all_reduce_sum`]; each `send` and `recv` holds `world * count` elements
    /// and no `recv` overlaps anything else.
    pub unsafe fn all_to_all_group(&self, bufs: &[(u64, u64, usize, DType)]) -> Result<(), OpsError> {
        let types = bufs.iter().map(|b| nccl_type(b.3)).collect::<Result<Vec<_>, _>>()?;
        self.stream.context().bind_to_thread()?;
        let n = self.nccl;
        n.check("ncclGroupStart", (n.GroupStart)())?;
        let mut first_err = Ok(());
        for (&(send, recv, count, dtype), &t) in bufs.iter().zip(&types) {
            let bytes = (count * dtype.bytes()) as u64;
            for p in 0..self.world {
                let off = p as u64 * bytes;
                let s = (n.Send)(
                    (send + off) as *const c_void,
                    count,
                    t,
                    p as c_int,
                    self.comm,
                    self.raw_stream(),
                );
                let r = (n.Recv)(
                    (recv + off) as *mut c_void,
                    count,
                    t,
                    p as c_int,
                    self.comm,
                    self.raw_stream(),
                );
                if first_err.is_ok() {
                    first_err = n.check("ncclSend", s).and_then(|_| n.check("ncclRecv", r));
                }
            }
        }
        let end = n.check("ncclGroupEnd", (n.GroupEnd)());
        first_err.and(end)
    }
}
