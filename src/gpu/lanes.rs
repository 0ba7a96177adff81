//! Streams and events: the pipelines' extra streams (lanes) with their
//! asynchronous and 2-D copies, and timing marks on any stream.

use super::*;

/// One of a device's extra streams, for pipelines that overlap copies with
/// kernels. Work on a lane is ordered after the main stream's work only where
/// the caller synchronises.
pub struct Lane {
    pub(super) stream: Arc<CudaStream>,
    pub(super) blas: Arc<OnceCell<CudaBlas>>,
    /// Timing events recorded and read before, reused: creating and
    /// destroying them every call was most of the profile's cost.
    events: EventPool,
    pub(super) check_launches: bool,
}

type EventPool = Arc<Mutex<Vec<CudaEvent>>>;
/// What a device keeps per lane: the stream, its cuBLAS handle once asked for, its events.
pub(super) type LaneParts = (Arc<CudaStream>, Arc<OnceCell<CudaBlas>>, EventPool);

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

    /// A timing event recorded on fegpu's stream now.
    pub fn mark(&self) -> Result<Mark> {
        let ev =
            self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| device_error("creating an event", e))?;
        ev.record(&self.stream).map_err(|e| device_error("recording an event", e))?;
        Ok(Mark { event: Some(ev), pool: None })
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
        cudarc::driver::result::memcpy_htod_async(ptr, host, self.stream.cu_stream())
            .map_err(|e| device_error("host-to-device copy", e))
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
        cudarc::driver::result::memcpy_dtoh_async(host, ptr, self.stream.cu_stream())
            .map_err(|e| device_error("device-to-host copy", e))
    }

    /// Queues a copy of the `width` x `height` block at `host` (column-major,
    /// leading dimension `host_ld` elements) into `dst` as a compact
    /// `width` x `height` matrix, and returns at once.
    ///
    /// # Safety
    /// As `upload`, for every element of the block.
    pub unsafe fn upload_2d<T: DeviceScalar>(
        &self,
        host: *const T,
        host_ld: usize,
        width: usize,
        height: usize,
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
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
    pub unsafe fn download_2d<T: DeviceScalar>(
        &self,
        src: &DeviceBuffer<T>,
        host: *mut T,
        host_ld: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
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

    pub(super) fn checked(&self, what: &str) -> Result<()> {
        if self.check_launches {
            self.synchronize(what)?;
        }
        Ok(())
    }

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
