//! Device memory shared between the processes of a node (CUDA IPC): a
//! region one rank allocates and exports, which the other ranks map into
//! their own contexts, so a distributed solve's halos and reductions move
//! device to device, without the host.

use super::*;

/// The bytes of a CUDA IPC handle, as ranks exchange them.
pub const HANDLE_BYTES: usize = 64;

/// A region of this context's memory that other processes may map.
pub struct SharedRegion {
    ctx: Arc<CudaContext>,
    base: sys::CUdeviceptr,
}

/// Another process's region, mapped into this context.
pub struct PeerRegion {
    ctx: Arc<CudaContext>,
    base: sys::CUdeviceptr,
}

/// A buffer over memory something else owns (a region): dropping it frees nothing.
pub struct Borrowed<T>(std::mem::ManuallyDrop<DeviceBuffer<T>>);

impl<T> std::ops::Deref for Borrowed<T> {
    type Target = DeviceBuffer<T>;
    fn deref(&self) -> &DeviceBuffer<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Borrowed<T> {
    fn deref_mut(&mut self) -> &mut DeviceBuffer<T> {
        &mut self.0
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; leak() gives the memory up without freeing it.
        unsafe { std::mem::ManuallyDrop::take(&mut self.0) }.leak();
    }
}

impl Gpu {
    /// `bytes` of zeroed device memory other processes may map. Allocated
    /// apart from the stream-ordered pool, whose memory IPC cannot export.
    pub fn shared_region(&self, bytes: usize) -> Result<SharedRegion> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        let what = format!("allocating {bytes} bytes of shareable device memory");
        // SAFETY: a plain allocation, freed by SharedRegion's drop.
        let base = unsafe { cudarc::driver::result::malloc_sync(bytes.max(1)) }.map_err(|e| device_error(&what, e))?;
        let region = SharedRegion { ctx: self.ctx.clone(), base };
        // SAFETY: base covers `bytes` bytes.
        unsafe { sys::cuMemsetD8_v2(base, 0, bytes.max(1)) }.result().map_err(|e| device_error("zeroing shared memory", e))?;
        Ok(region)
    }

    /// Maps another process's region, given the handle it exported.
    pub fn open_peer_region(&self, handle: &[u8; HANDLE_BYTES]) -> Result<PeerRegion> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        let h = sys::CUipcMemHandle_st { reserved: handle.map(|b| b as std::ffi::c_char) };
        let mut base = 0;
        let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: the handle came from another process's cuIpcGetMemHandle;
        // the mapping is closed by PeerRegion's drop.
        unsafe { sys::cuIpcOpenMemHandle_v2(&mut base, h, lazy) }
            .result()
            .map_err(|e| device_error("mapping another rank's device memory (cuIpcOpenMemHandle)", e))?;
        Ok(PeerRegion { ctx: self.ctx.clone(), base })
    }

    /// `len` elements at `address` (in a region, this rank's or a mapped
    /// one) as a buffer kernels take.
    ///
    /// # Safety
    /// The memory must hold `len` elements and outlive the view.
    pub unsafe fn view_at<T: DeviceScalar>(&self, address: u64, len: usize) -> Borrowed<T> {
        // SAFETY: as the caller guarantees; Borrowed never frees the memory.
        Borrowed(std::mem::ManuallyDrop::new(unsafe { self.stream.upgrade_device_ptr::<T>(address, len) }))
    }

    /// Whether the device's contexts run through NVIDIA's Multi-Process
    /// Service, so that several processes' kernels run side by side rather
    /// than taking turns.
    pub fn mps_enabled(&self) -> bool {
        self.ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MPS_ENABLED).is_ok_and(|v| v != 0)
    }
}

impl SharedRegion {
    pub fn address(&self) -> u64 {
        self.base
    }

    /// The handle another process opens the region with.
    pub fn handle(&self) -> Result<[u8; HANDLE_BYTES]> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        let mut h = sys::CUipcMemHandle_st { reserved: [0; HANDLE_BYTES] };
        // SAFETY: base is a cuMemAlloc allocation of this context.
        unsafe { sys::cuIpcGetMemHandle(&mut h, self.base) }
            .result()
            .map_err(|e| device_error("exporting device memory (cuIpcGetMemHandle)", e))?;
        Ok(h.reserved.map(|b| b as u8))
    }

    /// `len` elements at byte `offset` of the region, as a buffer kernels and
    /// copies take; it must be dropped before the region.
    pub fn view<T: DeviceScalar>(&self, g: &Gpu, offset: usize, len: usize) -> Borrowed<T> {
        // SAFETY: the caller's layout keeps offset + len elements inside the region.
        unsafe { g.view_at(self.base + offset as u64, len) }
    }
}

impl PeerRegion {
    pub fn address(&self) -> u64 {
        self.base
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // no work of this context may still use the region
        if self.ctx.bind_to_thread().is_ok() && self.ctx.synchronize().is_ok() {
            // SAFETY: allocated by shared_region, no longer in use.
            let _ = unsafe { sys::cuMemFree_v2(self.base) };
        }
    }
}

impl Drop for PeerRegion {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: opened by open_peer_region.
            let _ = unsafe { sys::cuIpcCloseMemHandle(self.base) };
        }
    }
}
