//! CUDA graphs: launches captured once on a private stream and replayed
//! on the context's, at a fraction of the cost of launching them one by one.

use super::*;

/// Launches captured from the context's stream, replayed by `Graph::launch`
/// at a fraction of the cost of launching them one by one.
pub struct Graph(cudarc::driver::CudaGraph);

// SAFETY: a CUDA graph needs its calls serialised, not a particular thread;
// every Graph lives under its owner's lock.
unsafe impl Send for Graph {}

impl Gpu {
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
        // side work joined the capture: the side stream left it with its end
        self.capture_forked.store(false, Release);
        let me = THREAD_TAG.with(|t| *t);
        let _ = self.side_owner.compare_exchange(me, 0, Release, std::sync::atomic::Ordering::Relaxed);
        recorded?;
        match graph.map_err(|e| device_error(&format!("instantiating {what}"), e))? {
            Some(g) => Ok(Graph(g)),
            None => Err(Error::new(crate::error::ErrorKind::Internal, format!("capturing {what}: no launches were captured"))),
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
}
