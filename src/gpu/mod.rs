//! The CUDA plumbing: the one module that talks to cudarc.
//!
//! A `Gpu` is one device's context, the stream fegpu's work is ordered on,
//! and the NVRTC module cache. Kernels are CUDA C++ sources from `kernels/`,
//! compiled on first use for the device's own architecture and cached for the
//! life of the `Gpu`. Split by concern: `memory` (allocation, copies,
//! page-locked host memory), `launch` (NVRTC, the module cache, launches),
//! `graph` (capture and replay), `ipc` (memory
//! shared with the node's other processes), `lanes` (extra streams, events, timing
//! marks) and `blas` (cuBLAS on a lane).

mod blas;
mod graph;
mod ipc;
pub mod kernel_cache;
mod lanes;
mod launch;
mod memory;
pub mod nccl;

/// A compiled kernel, as `Gpu::kernel` gives it.
pub use cudarc::driver::CudaFunction as Kernel;
pub use graph::Graph;
pub use ipc::{Borrowed, PeerRegion, SharedRegion, HANDLE_BYTES};
use lanes::LaneParts;
pub use lanes::{Lane, Mark};
pub use launch::{arg_or_null, compile, compile_cached, entry_names, one_kernel_source, view_or_null, Overlapped, Queue};
pub use memory::Pinned;

use crate::error::{Error, ErrorKind, Result};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, Gemv, GemvConfig};
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DriverError, LaunchConfig, PinnedHostSlice,
};
use cudarc::nvrtc;
use once_cell::sync::OnceCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use cudarc::driver::CudaSlice as DeviceBuffer;
/// A part of a `DeviceBuffer` (`buffer.slice(range)`), passed to kernels as its address.
pub use cudarc::driver::CudaView as DeviceView;
/// Implemented (unsafely) by `#[repr(C)]` structs passed to kernels by value.
pub use cudarc::driver::DeviceRepr as KernelValue;
pub use cudarc::driver::LaunchArgs as Launch;
pub use cudarc::driver::PushKernelArg as KernelArg;

/// Element types that can live in device memory.
pub trait DeviceScalar: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Copy + Send + Sync + 'static {}
impl DeviceScalar for f32 {}
impl DeviceScalar for f64 {}
/// f16 lattice storage.
impl DeviceScalar for half::f16 {}
impl DeviceScalar for i32 {}
impl DeviceScalar for i64 {}
impl DeviceScalar for u32 {}
impl DeviceScalar for u64 {}
impl DeviceScalar for u8 {}

/// What `fegpu info` prints about a device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_memory: usize,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
    /// Shared memory a block may ask for (opting in above the default 48 KiB).
    pub shared_per_block: usize,
    pub driver_version: i32,
    /// Copy engines: 2 or more let host-to-device and device-to-host copies overlap.
    pub copy_engines: i32,
    /// Hardware queues the context's streams share (CONNECTIONS_VAR as the
    /// context was created, or the driver's default of 8): beyond them, two
    /// streams share a queue and work on one waits behind work issued earlier
    /// on the other.
    pub hardware_queues: usize,
    pub nvrtc_version: (i32, i32),
}

/// The driver's setting for the number of hardware queues per context, read
/// when a context is created.
pub const CONNECTIONS_VAR: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: String,
    /// Loaded modules by file and, for a kernel compiled alone, its name (else empty).
    modules: Mutex<HashMap<(&'static str, String), Arc<CudaModule>>>,
    /// Where compiled kernel files are kept between runs (kernel_cache::directory).
    kernel_cache: Option<std::path::PathBuf>,
    /// Extra streams for pipelines, created on first use and kept, each
    /// with its cuBLAS handle once one is asked for.
    lanes: Mutex<Vec<LaneParts>>,
    /// FEGPU_CHECK_LAUNCHES=1: synchronise after every launch so a kernel
    /// fault is reported against the kernel that caused it.
    check_launches: bool,
    /// `launch_overlapped` may overlap a step with the kernel before it
    /// (FEGPU_OVERLAP_LAUNCHES=0: never).
    overlap_launches: bool,
    /// A private stream that graphs are captured on, so that work other
    /// threads queue on `stream` meanwhile is neither captured nor breaks the
    /// capture; one capture at a time (`capture_lock`), by the thread in
    /// `capture_owner` (0: none), whose queued work goes to this stream.
    capture_stream: Arc<CudaStream>,
    capture_lock: Mutex<()>,
    capture_owner: std::sync::atomic::AtomicU64,
    /// A second stream, of the highest priority, for short work that
    /// overlaps the main stream's (`on_side`): one thread at a time holds it
    /// (`side_owner`, its tag), and that thread's queued work goes there
    /// while `side_route` holds its tag; the two events order it against
    /// the main stream (`fork_side`, `join_side`).
    side_stream: Arc<CudaStream>,
    side_owner: std::sync::atomic::AtomicU64,
    side_route: std::sync::atomic::AtomicU64,
    side_events: [CudaEvent; 2],
    /// A capture's own fork and join events (one capture at a time). Once
    /// side work joins a capture, the side stream is part of it until the
    /// capture ends: its thread keeps the side stream till then, and joins
    /// it back only where its side work went there (`capture_forked`).
    capture_events: [CudaEvent; 2],
    capture_forked: std::sync::atomic::AtomicBool,
    pub info: DeviceInfo,
}

thread_local! {
    /// A nonzero tag per host thread, to tell which thread is capturing.
    static THREAD_TAG: u64 = {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    };
}

/// Errors that leave the CUDA context unusable until it is recreated.
fn is_sticky(e: &DriverError) -> bool {
    use sys::cudaError_enum::*;
    matches!(
        e.0,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_ASSERT
    )
}

/// Converts a driver error into fegpu's, naming the operation.
pub fn device_error(what: &str, e: DriverError) -> Error {
    if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        return Error::new(ErrorKind::OutOfDeviceMemory, format!("{what}: out of device memory"));
    }
    let tail = if is_sticky(&e) {
        "; the CUDA context is no longer usable: destroy every fegpu context on this device and create a new one"
    } else {
        "; the context is still usable"
    };
    Error::new(ErrorKind::Device, format!("{what}: CUDA error {:?}{tail}", e.0))
}

fn no_device(message: String) -> Error {
    Error::new(ErrorKind::NoDevice, message)
}

impl Gpu {
    /// The architecture NVRTC compiles this device's kernels for (sm_90):
    /// part of the kernel cache's key, so `fegpu warm` fills what loads find.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Number of CUDA devices, or an explanation of why there are none.
    pub fn device_count() -> Result<usize> {
        // SAFETY: probing for the library has no preconditions.
        if !unsafe { sys::is_culib_present() } {
            return Err(no_device("no CUDA driver library (libcuda.so) found".into()));
        }
        if !unsafe { nvrtc::sys::is_culib_present() } {
            return Err(no_device("the CUDA driver is present but NVRTC (libnvrtc.so) is not".into()));
        }
        let n = CudaContext::device_count().map_err(|e| no_device(format!("the CUDA driver reports {:?}", e.0)))?;
        Ok(n.max(0) as usize)
    }

    pub fn open(ordinal: usize) -> Result<Gpu> {
        let count = Self::device_count()?;
        if ordinal >= count {
            return Err(no_device(format!("device ordinal {ordinal} requested but {count} CUDA device(s) present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| device_error("creating the CUDA context", e))?;
        // One stream per fegpu context orders its work, so cudarc's per-buffer
        // event tracking (for multi-stream safety) is pure overhead.
        // SAFETY: a buffer used on another stream (a lane, the side stream) is
        // ordered against the main stream by explicit events (`on_side`, `join_side`).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| device_error("creating a stream", e))?;
        let capture_stream = ctx.new_stream().map_err(|e| device_error("creating a stream", e))?;
        let (_, highest) =
            cudarc::driver::result::stream::get_priority_range().map_err(|e| device_error("reading stream priorities", e))?;
        let side_stream = ctx.new_stream_with_priority(highest).map_err(|e| device_error("creating a stream", e))?;
        let ordering_event =
            || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)).map_err(|e| device_error("creating an event", e));
        let side_events = [ordering_event()?, ordering_event()?];
        let capture_events = [ordering_event()?, ordering_event()?];
        let attr = |a| ctx.attribute(a).map_err(|e| device_error("reading a device attribute", e));
        let cc = (
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let mut driver_version = 0;
        let mut nv = (0, 0);
        // SAFETY: plain out-parameters.
        unsafe {
            sys::cuDriverGetVersion(&mut driver_version);
            nvrtc::sys::nvrtcVersion(&mut nv.0, &mut nv.1);
        }
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().unwrap_or_else(|_| "unknown".into()),
            total_memory: ctx.total_mem().unwrap_or(0),
            compute_capability: cc,
            multiprocessors: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            shared_per_block: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0)
                as usize,
            driver_version,
            copy_engines: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
            hardware_queues: std::env::var(CONNECTIONS_VAR)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(8),
            nvrtc_version: nv,
        };
        Ok(Gpu {
            ctx,
            stream,
            arch: format!("sm_{}{}", cc.0, cc.1),
            modules: Mutex::new(HashMap::new()),
            kernel_cache: kernel_cache::directory(),
            lanes: Mutex::new(Vec::new()),
            check_launches: std::env::var("FEGPU_CHECK_LAUNCHES").map(|v| v == "1").unwrap_or(false),
            overlap_launches: std::env::var("FEGPU_OVERLAP_LAUNCHES").map(|v| v != "0").unwrap_or(true),
            capture_stream,
            capture_lock: Mutex::new(()),
            capture_owner: 0.into(),
            side_stream,
            side_owner: 0.into(),
            side_route: 0.into(),
            side_events,
            capture_events,
            capture_forked: false.into(),
            info,
        })
    }

    /// Device memory currently free, in bytes.
    pub fn free_memory(&self) -> usize {
        self.ctx.mem_get_info().map(|(free, _)| free).unwrap_or(0)
    }

    /// The stream this thread's work goes to: the side stream in `on_side`
    /// (while recording a graph too: the fork's event brings it into the
    /// capture), the capture stream while this thread records a graph, or
    /// the context's.
    fn stream(&self) -> &Arc<CudaStream> {
        if self.side_route.load(std::sync::atomic::Ordering::Acquire) == THREAD_TAG.with(|t| *t) {
            &self.side_stream
        } else if self.capturing_here() {
            &self.capture_stream
        } else {
            &self.stream
        }
    }

    fn capturing_here(&self) -> bool {
        let me = THREAD_TAG.with(|t| *t);
        self.capture_owner.load(std::sync::atomic::Ordering::Acquire) == me
    }

    /// Waits on the host for the work queued on this thread's stream.
    pub fn synchronize(&self, what: &str) -> Result<()> {
        self.stream().synchronize().map_err(|e| device_error(what, e))
    }

    /// Marks the point in this thread's stream's work (the main stream's,
    /// or the capture stream's while recording a graph) after which side
    /// work (`on_side`) may start.
    pub fn fork_side(&self) -> Result<()> {
        self.ordering_events()[0].record(self.stream()).map_err(|e| device_error("marking the side stream's start", e))
    }

    /// The fork and join events of this thread's side work: a capture's own
    /// while it records one, else the shared pair.
    fn ordering_events(&self) -> &[CudaEvent; 2] {
        if self.capturing_here() {
            &self.capture_events
        } else {
            &self.side_events
        }
    }

    /// Queues the work `queue` queues on the side stream instead: after the
    /// main stream's work up to the last `fork_side`, beside what the main
    /// stream runs after it, until `join_side`. The side stream has the
    /// highest priority, so its blocks go ahead of a bulk kernel's waiting
    /// ones. One thread at a time. While recording a graph, the side work
    /// becomes a branch of the graph (after a `fork_side` in the same capture).
    pub fn on_side<R>(&self, queue: impl FnOnce() -> Result<R>) -> Result<R> {
        if !self.take_side() {
            return Err(Error::internal("the side stream is taken by another thread"));
        }
        self.queue_on_side(queue)
    }

    /// As `on_side` where the side stream is free; where it is taken,
    /// `queue` queues on this thread's stream instead, after the work
    /// before it: the same results, without the overlap.
    pub fn on_side_if_free<R>(&self, queue: impl FnOnce() -> Result<R>) -> Result<R> {
        match self.take_side() {
            true => self.queue_on_side(queue),
            false => queue(),
        }
    }

    /// Takes the side stream for this thread, if no other thread holds it
    /// (this thread may hold it already: a capture keeps it).
    fn take_side(&self) -> bool {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        let me = THREAD_TAG.with(|t| *t);
        match self.side_owner.compare_exchange(0, me, AcqRel, Acquire) {
            Ok(_) => true,
            Err(holder) => holder == me,
        }
    }

    /// Runs `queue` with this thread's work going to the side stream (taken
    /// by `take_side`), after the last `fork_side`; then gives it back (a
    /// capture keeps it to its end). Within side work, `queue` just runs.
    fn queue_on_side<R>(&self, queue: impl FnOnce() -> Result<R>) -> Result<R> {
        use std::sync::atomic::Ordering::{Acquire, Release};
        let me = THREAD_TAG.with(|t| *t);
        if self.side_route.load(Acquire) == me {
            return queue();
        }
        let capturing = self.capturing_here();
        let ordered = self.side_stream.wait(&self.ordering_events()[0]).map_err(|e| device_error("ordering the side stream", e));
        if capturing {
            // the side stream is the capture's now, to its end (`capture`)
            self.capture_forked.store(ordered.is_ok(), Release);
        }
        self.side_route.store(me, Release);
        let queued = ordered.and_then(|()| queue());
        self.side_route.store(0, Release);
        if !capturing {
            self.side_owner.store(0, Release);
        }
        queued
    }

    /// Orders this thread's stream's later work (the main stream's, or the
    /// capture stream's) after everything queued on the side stream.
    pub fn join_side(&self) -> Result<()> {
        use std::sync::atomic::Ordering::AcqRel;
        if self.capturing_here() && !self.capture_forked.swap(false, AcqRel) {
            return Ok(()); // the side work went inline: nothing of the capture's to join
        }
        let join = &self.ordering_events()[1];
        join.record(&self.side_stream)
            .and_then(|()| self.stream().wait(join))
            .map_err(|e| device_error("ordering the main stream after the side one", e))
    }
}
