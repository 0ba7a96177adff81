//! Kernels: NVRTC compilation for the device's own architecture, the
//! module cache, and launches on the main stream or a lane (`Queue`).

use super::*;

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
        Error::new(crate::error::ErrorKind::Device, format!("NVRTC could not compile kernels/{module}.cu for {arch}:\n{detail}"))
    })
}

/// Pushes the kernel argument `b`, or a null pointer for an optional one.
pub fn arg_or_null<'a, T: DeviceScalar>(l: &mut Launch<'a>, b: Option<&'a DeviceBuffer<T>>) {
    const NULL: u64 = 0;
    match b {
        Some(b) => l.arg(b),
        None => l.arg(&NULL),
    };
}

impl Gpu {
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

    /// The kernel `name`, allowed `bytes` of dynamic shared memory a block
    /// (above 48 KiB a kernel must opt in; at most `info.shared_per_block`).
    pub fn kernel_with_shared(
        &self,
        module: &'static str,
        source: &'static str,
        name: &str,
        bytes: usize,
    ) -> Result<CudaFunction> {
        let f = self.kernel(module, source, name)?;
        if bytes > 48 * 1024 {
            let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            f.set_attribute(attr, bytes as i32)
                .map_err(|e| device_error(&format!("giving {name} {bytes} bytes of shared memory"), e))?;
        }
        Ok(f)
    }

    /// Starts a kernel launch: push arguments with `KernelArg::arg`, then `launch`.
    pub fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a> {
        self.stream().launch_builder(f)
    }

    pub fn launch(
        &self,
        what: &str,
        args: Launch<'_>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
    ) -> Result<()> {
        enqueue(what, args, grid, block, shared_bytes)?;
        if self.check_launches && !self.capturing_here() {
            self.synchronize(what)?;
        }
        Ok(())
    }
}

/// Queues the launch `args` on the stream it was built for; a refusal names `what`.
fn enqueue(what: &str, mut args: Launch<'_>, grid: (u32, u32, u32), block: (u32, u32, u32), shared_bytes: u32) -> Result<()> {
    let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: shared_bytes };
    // SAFETY: each caller passes the argument list its kernel declares
    // (checked by the CUDA-vs-CPU tests on the GPU machine).
    unsafe { args.launch(cfg) }.map_err(|e| device_error(&format!("launching {what}"), e))?;
    Ok(())
}

/// Where a kernel is queued: fegpu's main stream (`Gpu`) or a pipeline's `Lane`.
pub trait Queue {
    fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a>;
    fn launch(
        &self,
        what: &str,
        args: Launch<'_>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
    ) -> Result<()>;
}

impl Queue for Gpu {
    fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a> {
        Gpu::launcher(self, f)
    }
    fn launch(
        &self,
        what: &str,
        args: Launch<'_>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
    ) -> Result<()> {
        Gpu::launch(self, what, args, grid, block, shared_bytes)
    }
}

impl Queue for Lane {
    fn launcher<'a>(&'a self, f: &'a CudaFunction) -> Launch<'a> {
        self.stream.launch_builder(f)
    }
    fn launch(
        &self,
        what: &str,
        args: Launch<'_>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
    ) -> Result<()> {
        enqueue(what, args, grid, block, shared_bytes)?;
        self.checked(what)
    }
}
