//! Device memory: allocation, copies on the context's stream, page-locked
//! host memory (the caller's, registered, or fegpu's own staging).

use super::*;

impl Gpu {
    /// Uninitialised device memory for `n` elements.
    pub fn alloc<T: DeviceScalar>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: callers write before they read (documented per object).
        unsafe { self.stream().alloc::<T>(n) }.map_err(|e| device_error(&format!("allocating {n} elements"), e))
    }

    /// Zeroed device memory for `n` elements.
    pub fn zeros<T: DeviceScalar>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc::<T>(n)?;
        self.fill_bytes(&mut b, 0)?;
        Ok(b)
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

    /// The device address of a buffer, for kernels that take a table of vectors.
    pub fn address<T: DeviceScalar>(&self, buf: &DeviceBuffer<T>) -> u64 {
        use cudarc::driver::DevicePtr;
        let (ptr, _sync) = buf.device_ptr(self.stream());
        ptr
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
    pub fn upload_async<T: DeviceScalar>(
        &self,
        src: &mut Pinned<T>,
        ranges: &[std::ops::Range<usize>],
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
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
