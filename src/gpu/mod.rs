//! The CUDA plumbing: the one module that talks to cudarc.
//!
//! A `Gpu` is one device's context, the stream fegpu's work is ordered on,
//! and the NVRTC module cache. Kernels are CUDA C++ sources from `kernels/`,
//! compiled on first use for the device's own architecture and cached for the
//! life of the `Gpu`.

use crate::error::{Error, Result, FEGPU_ERR_DEVICE, FEGPU_ERR_NO_DEVICE, FEGPU_ERR_OUT_OF_DEVICE_MEMORY};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DriverError, LaunchConfig, PinnedHostSlice};
use cudarc::nvrtc;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, Gemv, GemvConfig};
use once_cell::sync::OnceCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use cudarc::driver::CudaSlice as DeviceBuffer;
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
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    /// Extra streams for pipelines, created on first use and kept, each
    /// with its cuBLAS handle once one is asked for.
    lanes: Mutex<Vec<LaneParts>>,
    /// FEGPU_CHECK_LAUNCHES=1: synchronise after every launch so a kernel
    /// fault is reported against the kernel that caused it.
    check_launches: bool,
    /// A private stream that graphs are captured on, so that work other
    /// threads queue on `stream` meanwhile is neither captured nor breaks the
    /// capture; one capture at a time (`capture_lock`), by the thread in
    /// `capture_owner` (0: none), whose queued work goes to this stream.
    capture_stream: Arc<CudaStream>,
    capture_lock: Mutex<()>,
    capture_owner: std::sync::atomic::AtomicU64,
    pub info: DeviceInfo,
}

thread_local! {
    /// A nonzero tag per host thread, to tell which thread is capturing.
    static THREAD_TAG: u64 = {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    };
}

/// Launches captured from the context's stream, replayed by `Graph::launch`
/// at a fraction of the cost of launching them one by one.
pub struct Graph(cudarc::driver::CudaGraph);

// SAFETY: a CUDA graph needs its calls serialised, not a particular thread;
// every Graph lives under its owner's lock.
unsafe impl Send for Graph {}

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

/// Pushes the kernel argument `b`, or a null pointer for an optional one.
pub fn arg_or_null<'a, T: DeviceScalar>(l: &mut Launch<'a>, b: Option<&'a DeviceBuffer<T>>) {
    const NULL: u64 = 0;
    match b {
        Some(b) => l.arg(b),
        None => l.arg(&NULL),
    };
}

/// Converts a driver error into fegpu's, naming the operation.
pub fn device_error(what: &str, e: DriverError) -> Error {
    if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        return Error::new(FEGPU_ERR_OUT_OF_DEVICE_MEMORY, format!("{what}: out of device memory"));
    }
    let tail = if is_sticky(&e) {
        "; the CUDA context is no longer usable: destroy every fegpu context on this device and create a new one"
    } else {
        "; the context is still usable"
    };
    Error::new(FEGPU_ERR_DEVICE, format!("{what}: CUDA error {:?}{tail}", e.0))
}

fn no_device(message: String) -> Error {
    Error::new(FEGPU_ERR_NO_DEVICE, message)
}

/// Compiles a kernel file with NVRTC for `arch` (e.g. "sm_90"). Needs only
/// libnvrtc, no driver or device, so kernels can be checked on any machine.
pub fn compile(module: &str, source: &str, arch: &str) -> Result<nvrtc::Ptx> {
    // SAFETY: probing for the library has no preconditions.
    if !unsafe { nvrtc::sys::is_culib_present() } {
        return Err(no_device("NVRTC (libnvrtc.so) not found".into()));
    }
    let opts = nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some(format!("{module}.cu")),
        ..Default::default()
    };
    nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| {
        let detail = match e {
            nvrtc::CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        };
        Error::new(FEGPU_ERR_DEVICE, format!("NVRTC could not compile kernels/{module}.cu for {arch}:\n{detail}"))
    })
}

impl Gpu {
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
        // One stream per fegpu context orders all its work, so cudarc's
        // per-buffer event tracking (for multi-stream safety) is pure overhead.
        // SAFETY: no buffer of this context is ever used on another stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| device_error("creating a stream", e))?;
        let capture_stream = ctx.new_stream().map_err(|e| device_error("creating a stream", e))?;
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
            driver_version,
            copy_engines: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
            hardware_queues: std::env::var(CONNECTIONS_VAR).ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&n| n > 0).unwrap_or(8),
            nvrtc_version: nv,
        };
        Ok(Gpu {
            ctx,
            stream,
            arch: format!("sm_{}{}", cc.0, cc.1),
            modules: Mutex::new(HashMap::new()),
            lanes: Mutex::new(Vec::new()),
            check_launches: std::env::var("FEGPU_CHECK_LAUNCHES").map(|v| v == "1").unwrap_or(false),
            capture_stream,
            capture_lock: Mutex::new(()),
            capture_owner: 0.into(),
            info,
        })
    }

    /// Device memory currently free, in bytes.
    pub fn free_memory(&self) -> usize {
        self.ctx.mem_get_info().map(|(free, _)| free).unwrap_or(0)
    }

    /// Uninitialised device memory for `n` elements.
    pub fn alloc<T: DeviceScalar>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: callers write before they read (documented per object).
        unsafe { self.stream().alloc::<T>(n) }.map_err(|e| device_error(&format!("allocating {n} elements"), e))
    }

    /// Copies `src` into `dst[offset..]` and waits, so the caller may reuse `src`
    /// at once (a copy from page-locked memory is otherwise asynchronous).
    pub fn upload<T: DeviceScalar>(&self, src: &[T], dst: &mut DeviceBuffer<T>, offset: usize) -> Result<()> {
        let mut view = dst.slice_mut(offset..offset + src.len());
        self.stream().memcpy_htod(src, &mut view).map_err(|e| device_error("host-to-device copy", e))?;
        self.synchronize("host-to-device copy")
    }

    /// Copies `src[offset..offset + dst.len()]` into `dst` and waits.
    pub fn download<T: DeviceScalar>(&self, src: &DeviceBuffer<T>, offset: usize, dst: &mut [T]) -> Result<()> {
        let view = src.slice(offset..offset + dst.len());
        self.stream().memcpy_dtoh(&view, dst).map_err(|e| device_error("device-to-host copy", e))?;
        self.synchronize("device-to-host copy")
    }

    /// Device-to-device copy of a whole buffer, ordered on the stream.
    pub fn copy<T: DeviceScalar>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>) -> Result<()> {
        self.stream().memcpy_dtod(src, dst).map_err(|e| device_error("device-to-device copy", e))
    }

    /// Fills a buffer with bytes of value `byte` (poisoning in tests, zeroing).
    pub fn fill_bytes<T: DeviceScalar>(&self, buf: &mut DeviceBuffer<T>, byte: u8) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let bytes = buf.len() * std::mem::size_of::<T>();
        let (ptr, _sync) = buf.device_ptr_mut(self.stream());
        // SAFETY: ptr covers `bytes` bytes of this context's memory.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, byte, bytes, self.stream().cu_stream()) }
            .map_err(|e| device_error("memset", e))
    }

    /// The kernel `name` from the CUDA source `source` (a file of `kernels/`),
    /// compiling the file with NVRTC the first time any of its kernels is asked for.
    pub fn kernel(&self, module: &'static str, source: &'static str, name: &str) -> Result<CudaFunction> {
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let m = match modules.get(module) {
            Some(m) => m.clone(),
            None => {
                let ptx = compile(module, source, &self.arch)?;
                let m = self.ctx.load_module(ptx).map_err(|e| device_error(&format!("loading kernels/{module}.cu"), e))?;
                modules.insert(module, m.clone());
                m
            }
        };
        m.load_function(name).map_err(|e| device_error(&format!("looking up kernel {name} in kernels/{module}.cu"), e))
    }

    /// Starts a kernel launch: push arguments with `KernelArg::arg`, then `launch`.
    pub fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a> {
        self.stream().launch_builder(f)
    }

    /// The stream this thread's work goes to: the context's, or the capture
    /// stream while this thread records a graph.
    fn stream(&self) -> &Arc<CudaStream> {
        if self.capturing_here() {
            &self.capture_stream
        } else {
            &self.stream
        }
    }

    fn capturing_here(&self) -> bool {
        let me = THREAD_TAG.with(|t| *t);
        self.capture_owner.load(std::sync::atomic::Ordering::Acquire) == me
    }

    pub fn launch(&self, what: &str, mut args: Launch<'_>, grid: (u32, u32, u32), block: (u32, u32, u32), shared_bytes: u32) -> Result<()> {
        let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: shared_bytes };
        // SAFETY: each caller passes the argument list its kernel declares
        // (checked by the CUDA-vs-CPU tests on the GPU machine).
        unsafe { args.launch(cfg) }.map_err(|e| device_error(&format!("launching {what}"), e))?;
        if self.check_launches && !self.capturing_here() {
            self.synchronize(what)?;
        }
        Ok(())
    }

    pub fn synchronize(&self, what: &str) -> Result<()> {
        self.stream.synchronize().map_err(|e| device_error(what, e))
    }

    /// Captures the launches `record` queues on the stream into a graph,
    /// instead of running them. `record` must queue work only (no waits, copies
    /// to the host or allocations).
    pub fn capture(&self, what: &str, record: impl FnOnce() -> Result<()>) -> Result<Graph> {
        use std::sync::atomic::Ordering::Release;
        let _one_at_a_time = self.capture_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        self.capture_stream.begin_capture(mode).map_err(|e| device_error(&format!("capturing {what}"), e))?;
        self.capture_owner.store(THREAD_TAG.with(|t| *t), Release);
        let recorded = record();
        self.capture_owner.store(0, Release);
        let graph = self.capture_stream.end_capture(sys::CUgraphInstantiate_flags(0));
        recorded?;
        match graph.map_err(|e| device_error(&format!("instantiating {what}"), e))? {
            Some(g) => Ok(Graph(g)),
            None => Err(Error::new(crate::error::FEGPU_ERR_INTERNAL, format!("capturing {what}: no launches were captured"))),
        }
    }

    /// Queues one replay of `graph` on the context's stream.
    pub fn replay(&self, what: &str, graph: &Graph) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        // SAFETY: the executable graph lives as long as `graph`; its kernels'
        // buffers belong to the caller, which keeps them alive (as for launches).
        unsafe { sys::cuGraphLaunch(graph.0.cu_graph_exec(), self.stream.cu_stream()) }
            .result()
            .map_err(|e| device_error(&format!("launching {what}"), e))?;
        if self.check_launches {
            self.synchronize(what)?;
        }
        Ok(())
    }

    /// Page-locks a caller's host memory so copies from and to it run at full speed.
    pub fn register_host(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        // SAFETY: the caller guarantees ptr..ptr+bytes is its own live memory
        // until it unregisters it.
        unsafe { sys::cuMemHostRegister_v2(ptr.cast(), bytes, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            .result()
            .map_err(|e| device_error("page-locking host memory (cuMemHostRegister)", e))
    }

    pub fn unregister_host(&self, ptr: *mut u8) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        // SAFETY: ptr was registered by register_host.
        unsafe { sys::cuMemHostUnregister(ptr.cast()) }
            .result()
            .map_err(|e| device_error("unlocking host memory (cuMemHostUnregister)", e))
    }

    /// A timing event recorded on fegpu's stream now.
    pub fn mark(&self) -> Result<Mark> {
        let ev = self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| device_error("creating an event", e))?;
        ev.record(&self.stream).map_err(|e| device_error("recording an event", e))?;
        Ok(Mark { event: Some(ev), pool: None })
    }
}

/// One of a device's extra streams, for pipelines that overlap copies with
/// kernels. Work on a lane is ordered after the main stream's work only where
/// the caller synchronises.
pub struct Lane {
    stream: Arc<CudaStream>,
    blas: Arc<OnceCell<CudaBlas>>,
    /// Timing events recorded and read before, reused: creating and
    /// destroying them every call was most of the profile's cost.
    events: EventPool,
    check_launches: bool,
}

type EventPool = Arc<Mutex<Vec<CudaEvent>>>;
/// What a device keeps per lane: the stream, its cuBLAS handle once asked for, its events.
type LaneParts = (Arc<CudaStream>, Arc<OnceCell<CudaBlas>>, EventPool);

impl Gpu {
    /// `n` lanes of this device (streams created once and reused).
    pub fn lanes(&self, n: usize) -> Result<Vec<Lane>> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        while lanes.len() < n {
            let stream = self.ctx.new_stream().map_err(|e| device_error("creating a stream", e))?;
            lanes.push((stream, Arc::new(OnceCell::new()), Arc::new(Mutex::new(Vec::new()))));
        }
        Ok(lanes[..n]
            .iter()
            .map(|(s, b, e)| Lane { stream: s.clone(), blas: b.clone(), events: e.clone(), check_launches: self.check_launches })
            .collect())
    }
}

impl Lane {
    /// Queues the copy of `host` into `dst[at..]` and returns at once.
    ///
    /// # Safety
    /// `host` must be page-locked (registered or pinned) and stay alive and
    /// unwritten until the lane has passed this copy.
    pub unsafe fn upload<T: DeviceScalar>(&self, host: &[T], dst: &mut DeviceBuffer<T>, at: usize) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let mut view = dst.slice_mut(at..at + host.len());
        let (ptr, _sync) = view.device_ptr_mut(&self.stream);
        cudarc::driver::result::memcpy_htod_async(ptr, host, self.stream.cu_stream()).map_err(|e| device_error("host-to-device copy", e))
    }

    /// Queues the copy of `src[at..at + host.len()]` into `host` and returns at once.
    ///
    /// # Safety
    /// `host` must be page-locked and stay alive and untouched until the lane
    /// has passed this copy.
    pub unsafe fn download<T: DeviceScalar>(&self, src: &DeviceBuffer<T>, at: usize, host: &mut [T]) -> Result<()> {
        use cudarc::driver::DevicePtr;
        let view = src.slice(at..at + host.len());
        let (ptr, _sync) = view.device_ptr(&self.stream);
        cudarc::driver::result::memcpy_dtoh_async(host, ptr, self.stream.cu_stream()).map_err(|e| device_error("device-to-host copy", e))
    }

    /// Queues a copy of the `width` x `height` block at `host` (column-major,
    /// leading dimension `host_ld` elements) into `dst` as a compact
    /// `width` x `height` matrix, and returns at once.
    ///
    /// # Safety
    /// As `upload`, for every element of the block.
    pub unsafe fn upload_2d<T: DeviceScalar>(&self, host: *const T, host_ld: usize, width: usize, height: usize, dst: &mut DeviceBuffer<T>) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let size = std::mem::size_of::<T>();
        let mut view = dst.slice_mut(0..width * height);
        let (ptr, _sync) = view.device_ptr_mut(&self.stream);
        let mut p = copy_2d(width * size, height);
        p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_HOST;
        p.srcHost = host.cast();
        p.srcPitch = host_ld * size;
        p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
        p.dstDevice = ptr;
        p.dstPitch = width * size;
        sys::cuMemcpy2DAsync_v2(&p, self.stream.cu_stream()).result().map_err(|e| device_error("host-to-device 2-D copy", e))
    }

    /// The reverse of `upload_2d`: the compact `width` x `height` matrix in
    /// `src` into the block at `host` with leading dimension `host_ld`.
    ///
    /// # Safety
    /// As `download`, for every element of the block.
    pub unsafe fn download_2d<T: DeviceScalar>(&self, src: &DeviceBuffer<T>, host: *mut T, host_ld: usize, width: usize, height: usize) -> Result<()> {
        use cudarc::driver::DevicePtr;
        let size = std::mem::size_of::<T>();
        let view = src.slice(0..width * height);
        let (ptr, _sync) = view.device_ptr(&self.stream);
        let mut p = copy_2d(width * size, height);
        p.srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
        p.srcDevice = ptr;
        p.srcPitch = width * size;
        p.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_HOST;
        p.dstHost = host.cast();
        p.dstPitch = host_ld * size;
        sys::cuMemcpy2DAsync_v2(&p, self.stream.cu_stream()).result().map_err(|e| device_error("device-to-host 2-D copy", e))
    }

    fn blas(&self) -> Result<&CudaBlas> {
        // SAFETY: probing for the library has no preconditions.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::new(FEGPU_ERR_NO_DEVICE, "cuBLAS (libcublas.so) not found: matrix products need it"));
        }
        self.blas.get_or_try_init(|| CudaBlas::new(self.stream.clone())).map_err(|e| Error::new(FEGPU_ERR_DEVICE, format!("creating a cuBLAS handle: {e:?}")))
    }

    /// C = alpha A B + beta C for column-major A (m x k, leading dimension lda),
    /// B (k x n, ldb) and C (m x n, ldc) on the device, through cuBLAS on this lane.
    #[allow(clippy::too_many_arguments)] // BLAS's own argument list
    pub fn gemm(&self, m: usize, n: usize, k: usize, alpha: f64, a: &DeviceBuffer<f64>, lda: usize, b: &DeviceBuffer<f64>, ldb: usize, beta: f64, c: &mut DeviceBuffer<f64>, ldc: usize) -> Result<()> {
        let n_op = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
        let cfg = GemmConfig { transa: n_op, transb: n_op, m: m as i32, n: n as i32, k: k as i32, alpha, lda: lda as i32, ldb: ldb as i32, beta, ldc: ldc as i32 };
        // SAFETY: the buffers hold the matrices the leading dimensions describe (checked by the callers).
        unsafe { self.blas()?.gemm(cfg, a, b, c) }.map_err(|e| Error::new(FEGPU_ERR_DEVICE, format!("cublasDgemm: {e:?}")))?;
        self.checked("cublasDgemm")
    }

    /// y = alpha A x + beta y for a column-major m x n A (leading dimension lda).
    #[allow(clippy::too_many_arguments)] // BLAS's own argument list
    pub fn gemv(&self, m: usize, n: usize, alpha: f64, a: &DeviceBuffer<f64>, lda: usize, x: &DeviceBuffer<f64>, beta: f64, y: &mut DeviceBuffer<f64>) -> Result<()> {
        let cfg = GemvConfig { trans: cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N, m: m as i32, n: n as i32, alpha, lda: lda as i32, incx: 1, beta, incy: 1 };
        // SAFETY: as in gemm.
        unsafe { self.blas()?.gemv(cfg, a, x, y) }.map_err(|e| Error::new(FEGPU_ERR_DEVICE, format!("cublasDgemv: {e:?}")))?;
        self.checked("cublasDgemv")
    }

    fn checked(&self, what: &str) -> Result<()> {
        if self.check_launches {
            self.synchronize(what)?;
        }
        Ok(())
    }
}

/// A 2-D copy of `height` rows of `width_bytes` (the caller sets source and destination).
fn copy_2d(width_bytes: usize, height: usize) -> sys::CUDA_MEMCPY2D {
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: width_bytes,
        Height: height,
    }
}

/// Where a kernel is queued: fegpu's main stream (`Gpu`) or a pipeline's `Lane`.
pub trait Queue {
    fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a>;
    fn launch(&self, what: &str, args: Launch<'_>, grid: (u32, u32, u32), block: (u32, u32, u32), shared_bytes: u32) -> Result<()>;
}

impl Queue for Gpu {
    fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a> {
        Gpu::launcher(self, f)
    }
    fn launch(&self, what: &str, args: Launch<'_>, grid: (u32, u32, u32), block: (u32, u32, u32), shared_bytes: u32) -> Result<()> {
        Gpu::launch(self, what, args, grid, block, shared_bytes)
    }
}

impl Queue for Lane {
    fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a> {
        self.stream.launch_builder(f)
    }
    fn launch(&self, what: &str, mut args: Launch<'_>, grid: (u32, u32, u32), block: (u32, u32, u32), shared_bytes: u32) -> Result<()> {
        let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: shared_bytes };
        // SAFETY: as in Gpu::launch.
        unsafe { args.launch(cfg) }.map_err(|e| device_error(&format!("launching {what}"), e))?;
        self.checked(what)
    }
}

impl Lane {

    pub fn synchronize(&self, what: &str) -> Result<()> {
        self.stream.synchronize().map_err(|e| device_error(what, e))
    }

    /// A timing event recorded on this lane now (from the lane's pool).
    pub fn mark(&self) -> Result<Mark> {
        let reused = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let ev = match reused {
            Some(ev) => ev,
            None => self
                .stream
                .context()
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| device_error("creating an event", e))?,
        };
        ev.record(&self.stream).map_err(|e| device_error("recording an event", e))?;
        Ok(Mark { event: Some(ev), pool: Some(self.events.clone()) })
    }
}

/// Page-locked host memory for asynchronous uploads, with an event that says
/// when the last upload from it has finished reading it.
pub struct Pinned<T> {
    host: PinnedHostSlice<T>,
    read: CudaEvent,
}

impl<T: DeviceScalar> Pinned<T> {
    pub fn len(&self) -> usize {
        self.host.len()
    }
    pub fn is_empty(&self) -> bool {
        self.host.is_empty()
    }
    /// The memory without waiting (for callers that order uploads themselves).
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.host.as_mut_slice().map_err(|e| device_error("reaching pinned memory", e))
    }

    /// The memory, once the last upload from it has finished.
    pub fn wait_writable(&mut self) -> Result<&mut [T]> {
        self.read.synchronize().map_err(|e| device_error("waiting for an upload", e))?;
        self.host.as_mut_slice().map_err(|e| device_error("reaching pinned memory", e))
    }
}

impl Gpu {
    /// `n` elements of page-locked host memory.
    pub fn pinned<T: DeviceScalar>(&self, n: usize) -> Result<Pinned<T>> {
        // SAFETY: the memory is written (wait_writable) before it is uploaded.
        let host = unsafe { self.ctx.alloc_pinned_with_flags::<T>(n.max(1), 0) }
            .map_err(|e| device_error(&format!("allocating {n} elements of page-locked host memory"), e))?;
        let read = self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(|e| device_error("creating an event", e))?;
        Ok(Pinned { host, read })
    }

    /// Queues copies of `src[range]` into `dst[range]` for each range and
    /// returns at once; the next `wait_writable` on `src` waits for them.
    pub fn upload_async<T: DeviceScalar>(&self, src: &mut Pinned<T>, ranges: &[std::ops::Range<usize>], dst: &mut DeviceBuffer<T>) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let host = src.wait_writable()?;
        for range in ranges {
            let mut view = dst.slice_mut(range.clone());
            let (ptr, _sync) = view.device_ptr_mut(&self.stream);
            // SAFETY: `host` is page-locked and stays alive and unwritten until
            // `read` (recorded next) completes; `ptr` covers the range.
            unsafe { cudarc::driver::result::memcpy_htod_async(ptr, &host[range.clone()], self.stream.cu_stream()) }
                .map_err(|e| device_error("host-to-device copy", e))?;
        }
        src.read.record(&self.stream).map_err(|e| device_error("recording an event", e))
    }
}

/// A point on the stream's timeline, for device-side timing; a lane's mark
/// returns its event to the lane's pool when dropped.
pub struct Mark {
    event: Option<CudaEvent>,
    pool: Option<EventPool>,
}

impl Mark {
    fn event(&self) -> &CudaEvent {
        self.event.as_ref().expect("a mark holds its event until dropped")
    }

    /// Waits on the host until the work before this mark is done.
    pub fn synchronize(&self) -> Result<()> {
        self.event().synchronize().map_err(|e| device_error("waiting for an event", e))
    }

    /// Seconds from `self` to `later`, waiting for `later` to complete.
    pub fn seconds_until(&self, later: &Mark) -> Result<f64> {
        later.synchronize()?;
        self.seconds_to_done(later)
    }

    /// Seconds from `self` to `later`, both already complete (the caller has
    /// synchronised their streams).
    pub fn seconds_to_done(&self, later: &Mark) -> Result<f64> {
        let ms = self.event().elapsed_ms(later.event()).map_err(|e| device_error("reading an event", e))?;
        Ok(ms as f64 * 1e-3)
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        if let (Some(pool), Some(ev)) = (self.pool.take(), self.event.take()) {
            pool.lock().unwrap_or_else(|p| p.into_inner()).push(ev);
        }
    }
}
