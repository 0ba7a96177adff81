//! NCCL through cudarc's binding, loaded at run time:
//! a distributed matrix's halo device to device between ranks on distinct
//! GPUs, where CUDA IPC does not reach (ranks on several nodes) or
//! FEGPU_DIST_EXCHANGE=nccl asks for it. The communicator is bootstrapped
//! over MPI by the caller (`crate::dist`) from the id rank 0 makes here.
//! NCCL refuses ranks that share a GPU ("Duplicate GPU detected").

use super::{device_error, DeviceBuffer, Gpu};
use crate::error::{Error, ErrorKind, Result};
use cudarc::nccl::{result, sys};
use std::ffi::{c_void, CStr};

/// Bytes of the id every rank of a communicator is created from.
pub const ID_BYTES: usize = 128;

/// This rank's NCCL communicator; its operations run on the GPU's side
/// stream, beside the main stream's work (`Gpu::on_side`).
pub struct Nccl {
    comm: sys::ncclComm_t,
}

// SAFETY: the handle is used by one thread at a time (fegpu's distributed
// calls are collective and made from the caller's MPI thread).
unsafe impl Send for Nccl {}
unsafe impl Sync for Nccl {}

fn nccl_error(what: &str, e: result::NcclError) -> Error {
    // SAFETY: NCCL returns static strings, or its last error's text for this thread.
    let (text, last) =
        unsafe { (CStr::from_ptr(sys::ncclGetErrorString(e.0)), CStr::from_ptr(sys::ncclGetLastError(std::ptr::null_mut()))) };
    let last = last.to_string_lossy();
    let detail = if last.is_empty() { String::new() } else { format!(" ({last})") };
    Error::new(ErrorKind::Device, format!("{what}: NCCL: {}{detail}", text.to_string_lossy()))
}

/// Ok where NCCL's library loads.
pub fn present() -> Result<()> {
    // SAFETY: probing for the library has no preconditions.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::Unsupported, "no NCCL library (libnccl.so.2) found"))
    }
}

/// A fresh id for a new communicator (rank 0 makes it, every rank passes it to `Gpu::nccl`).
pub fn unique_id() -> Result<[u8; ID_BYTES]> {
    present()?;
    let id = result::get_uniqueid().map_err(|e| nccl_error("creating an NCCL id", e))?;
    Ok(id.internal.map(|c| c as u8))
}

impl Gpu {
    /// Collective over the `size` ranks that pass the same `id`: this
    /// rank's communicator, on this GPU.
    pub fn nccl(&self, id: &[u8; ID_BYTES], rank: usize, size: usize) -> Result<Nccl> {
        present()?;
        self.ctx.bind_to_thread().map_err(|e| device_error("binding the context", e))?;
        let id = sys::ncclUniqueId { internal: id.map(|b| b as std::ffi::c_char) };
        let mut comm = std::mem::MaybeUninit::uninit();
        // SAFETY: comm is written by a successful call; rank < size is the caller's.
        unsafe { result::comm_init_rank(comm.as_mut_ptr(), size as i32, id, rank as i32) }
            .map_err(|e| nccl_error("creating the NCCL communicator", e))?;
        // SAFETY: initialised by the successful call above.
        Ok(Nccl { comm: unsafe { comm.assume_init() } })
    }
}

impl Nccl {
    /// Queues on the side stream, in one group, the sends of `send`'s runs
    /// (rank, count) and the receives into `recv`'s runs, in order.
    pub fn exchange(
        &self,
        g: &Gpu,
        send: &DeviceBuffer<f64>,
        send_to: &[(usize, usize)],
        recv: &DeviceBuffer<f64>,
        recv_from: &[(usize, usize)],
    ) -> Result<()> {
        let stream = g.side_stream.cu_stream() as sys::cudaStream_t;
        let (send_at, recv_at) = (g.address(send), g.address(recv));
        let double = sys::ncclDataType_t::ncclFloat64;
        result::group_start().map_err(|e| nccl_error("starting the halo exchange", e))?;
        let mut queued = Ok(());
        let mut at = 0u64;
        for &(peer, count) in send_to {
            // SAFETY: the runs lie within `send`, which outlives the queued work (the caller's buffers).
            queued = queued.and_then(|_| unsafe {
                result::send((send_at + 8 * at) as *const c_void, count, double, peer as i32, self.comm, stream).map(drop)
            });
            at += count as u64;
        }
        at = 0;
        for &(peer, count) in recv_from {
            // SAFETY: as above, within `recv`.
            queued = queued.and_then(|_| unsafe {
                result::recv((recv_at + 8 * at) as *mut c_void, count, double, peer as i32, self.comm, stream).map(drop)
            });
            at += count as u64;
        }
        let ended = result::group_end();
        queued.and(ended.map(drop)).map_err(|e| nccl_error("queuing the halo exchange", e))
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
        // SAFETY: created by comm_init_rank, destroyed once; a failure here has no one to report to.
        let _ = unsafe { result::comm_destroy(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of different lengths, sent by a communicator of one rank to
    /// itself, land where the receives' runs say (the offsets NCCL gets).
    /// On CUDA only (FEGPU_BACKEND=cuda), where NCCL must be present.
    #[test]
    fn exchange_puts_each_run_in_its_place() {
        if std::env::var("FEGPU_BACKEND").as_deref() != Ok("cuda") {
            return;
        }
        let g = Gpu::open(0).unwrap();
        let nccl = g.nccl(&unique_id().unwrap(), 0, 1).unwrap();
        let values: Vec<f64> = (0..7).map(|k| 0.5 + k as f64).collect();
        let send = crate::sparse::cuda::upload(&g, &values).unwrap();
        let mut recv = g.alloc::<f64>(7).unwrap();
        g.fill_bytes(&mut recv, 0xff).unwrap(); // NaN: nothing left unwritten passes
        let runs = [(0, 3), (0, 4)];
        g.fork_side().unwrap();
        g.on_side(|| nccl.exchange(&g, &send, &runs, &recv, &runs)).unwrap();
        g.join_side().unwrap();
        let mut back = vec![0.0; 7];
        g.download(&recv, 0, &mut back).unwrap();
        assert_eq!(back, values);
    }
}
