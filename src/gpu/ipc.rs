//! Device memory shared between the processes of a node (CUDA IPC): a
//! region one rank allocates and exports, which the other ranks map into
//! their own contexts, so a distributed solve's halos and reductions move
//! device to device, without the host.
//!
//! Freeing a region while another process still maps it is undefined
//! (CUDA's cuIpcOpenMemHandle), and destroying a distributed object is not
//! collective. So a region begins with a header of one byte per rank: a
//! rank that unmaps a peer's region first sets its byte there, and a
//! region is freed once every rank that maps it has done so: at once, or
//! by a thread that waits for them (up to DETACH_PATIENCE; a region a
//! rank never lets go of stays allocated until the context goes).

use super::*;

/// The bytes of a CUDA IPC handle, as ranks exchange them.
pub const HANDLE_BYTES: usize = 64;

/// The header before a region's contents: a byte per rank that may map it.
pub const MAX_RANKS: usize = 4096;

/// How long a dropped region waits for the ranks that map it to let go.
const DETACH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);

/// A region of this context's memory that other processes may map.
pub struct SharedRegion {
    ctx: Arc<CudaContext>,
    base: sys::CUdeviceptr,
    /// The ranks that map the region (whose header bytes the drop waits for).
    importers: Vec<usize>,
}

/// Another process's region, mapped into this context by rank `me`.
pub struct PeerRegion {
    ctx: Arc<CudaContext>,
    base: sys::CUdeviceptr,
    me: usize,
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
    /// `bytes` of zeroed device memory other processes may map (after the
    /// header). Allocated apart from the stream-ordered pool, whose memory
    /// IPC cannot export.
    pub fn shared_region(&self, bytes: usize) -> Result<SharedRegion> {
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        let total = MAX_RANKS + bytes.max(1);
        let what = format!("allocating {bytes} bytes of shareable device memory");
        // SAFETY: a plain allocation, freed by SharedRegion's drop.
        let base = unsafe { cudarc::driver::result::malloc_sync(total) }.map_err(|e| device_error(&what, e))?;
        let region = SharedRegion { ctx: self.ctx.clone(), base, importers: Vec::new() };
        // SAFETY: base covers `total` bytes.
        unsafe { sys::cuMemsetD8_v2(base, 0, total) }.result().map_err(|e| device_error("zeroing shared memory", e))?;
        Ok(region)
    }

    /// Maps another process's region, given the handle it exported; `me`:
    /// this process's rank, whose header byte the mapping's drop sets.
    pub fn open_peer_region(&self, handle: &[u8; HANDLE_BYTES], me: usize) -> Result<PeerRegion> {
        if me >= MAX_RANKS {
            return Err(Error::unsupported(format!("rank {me} of a node: CUDA IPC regions serve up to {MAX_RANKS} ranks")));
        }
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        let h = sys::CUipcMemHandle_st { reserved: handle.map(|b| b as std::ffi::c_char) };
        let mut base = 0;
        let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: the handle came from another process's cuIpcGetMemHandle;
        // the mapping is closed by PeerRegion's drop.
        unsafe { sys::cuIpcOpenMemHandle_v2(&mut base, h, lazy) }
            .result()
            .map_err(|e| device_error("mapping another rank's device memory (cuIpcOpenMemHandle)", e))?;
        Ok(PeerRegion { ctx: self.ctx.clone(), base, me })
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
    /// Where the contents start (after the header).
    pub fn address(&self) -> u64 {
        self.base + MAX_RANKS as u64
    }

    /// The ranks that have mapped the region: it is freed once each has
    /// let go.
    pub fn mapped_by(&mut self, ranks: &[usize]) {
        self.importers = ranks.to_vec();
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
        unsafe { g.view_at(self.address() + offset as u64, len) }
    }
}

impl PeerRegion {
    /// Where the peer region's contents start (after its header).
    pub fn address(&self) -> u64 {
        self.base + MAX_RANKS as u64
    }
}

/// Whether every rank in `importers` has set its byte in the header at
/// `base` (the region's context bound to this thread).
fn released(base: sys::CUdeviceptr, importers: &[usize]) -> bool {
    let Some(&last) = importers.iter().max() else { return true };
    let mut header = vec![0u8; last + 1];
    // SAFETY: the header holds MAX_RANKS > last bytes.
    let read = unsafe { sys::cuMemcpyDtoH_v2(header.as_mut_ptr().cast(), base, header.len()) }.result();
    read.is_ok() && importers.iter().all(|&r| header[r] != 0)
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // no work of this context may still use the region
        if self.ctx.bind_to_thread().is_err() || self.ctx.synchronize().is_err() {
            return;
        }
        let (ctx, base, importers) = (self.ctx.clone(), self.base, std::mem::take(&mut self.importers));
        // SAFETY (both frees): allocated by shared_region, no longer in use or mapped.
        if released(base, &importers) {
            let _ = unsafe { sys::cuMemFree_v2(base) };
            return;
        }
        // a rank that maps it has not let go yet (its object not destroyed
        // yet): freed by a thread once it has, so this drop never waits for
        // another rank (if no thread can start, it stays until the context goes)
        let _ = std::thread::Builder::new().name("fegpu-ipc-free".into()).spawn(move || {
            let start = std::time::Instant::now();
            while ctx.bind_to_thread().is_ok() && start.elapsed() < DETACH_PATIENCE {
                if released(base, &importers) {
                    let _ = unsafe { sys::cuMemFree_v2(base) };
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
    }
}

impl Drop for PeerRegion {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // this context's work on the mapping done, then this rank's byte
            // in the owner's header: the owner may free the region once unmapped
            let _ = self.ctx.synchronize();
            // SAFETY: the mapping covers the owner's header, of MAX_RANKS > me bytes.
            let _ = unsafe { sys::cuMemsetD8_v2(self.base + self.me as u64, 1, 1) };
            let _ = self.ctx.synchronize();
            // SAFETY: opened by open_peer_region.
            let _ = unsafe { sys::cuIpcCloseMemHandle(self.base) };
        }
    }
}
