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
    let opts = nvrtc::CompileOptions { options: compile_options(arch), name: Some(format!("{module}.cu")), ..Default::default() };
    nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| {
        let detail = match e {
            nvrtc::CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        };
        Error::new(crate::error::ErrorKind::Device, format!("NVRTC could not compile kernels/{module}.cu for {arch}:\n{detail}"))
    })
}

/// A kernel file's text with only the kernel `name` given a body: the file
/// guards each kernel's body with `WANTED(name)` (kernels/one_kernel.cuh),
/// true for every kernel unless FEGPU_ONE_KERNEL names one. With `name`
/// empty every body is empty: the kernels' names at the cost of parsing.
pub fn one_kernel_source(source: &str, name: &str) -> String {
    debug_assert!(!name.contains(['"', '\\', '\n']), "a kernel name is an identifier");
    format!("#define FEGPU_ONE_KERNEL \"{name}\"\n{source}")
}

/// The names of the kernels (`.entry` functions) a PTX text defines.
pub fn entry_names(ptx: &str) -> Vec<&str> {
    ptx.split(".entry ").skip(1).filter_map(|rest| rest.split_once('(').map(|(name, _)| name.trim())).collect()
}

fn compile_options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()]
}

/// A kernel file's PTX from the on-disk cache in `dir` (None: no cache;
/// `reuse` false: not looked up), else compiled by NVRTC and stored there;
/// and whether it came from the cache. The key covers the source, the
/// architecture, the options and NVRTC's version (gpu::kernel_cache).
pub fn compile_cached(
    module: &str,
    source: &str,
    arch: &str,
    dir: Option<&std::path::Path>,
    reuse: bool,
) -> Result<(nvrtc::Ptx, bool)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: probing for the library has no preconditions; the version's are two plain out-parameters.
    if unsafe { nvrtc::sys::is_culib_present() } {
        // SAFETY: as above, the library being present.
        unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    }
    let version = format!("nvrtc {major}.{minor}, fegpu {}", env!("CARGO_PKG_VERSION"));
    let key = kernel_cache::key(&[source, arch, &compile_options(arch).join(" "), &version]);
    if let Some(ptx) = dir.filter(|_| reuse).and_then(|d| kernel_cache::load(d, module, key)) {
        return Ok((nvrtc::Ptx::from_src(ptx), true));
    }
    let ptx = compile(module, source, arch)?;
    if let Some(d) = dir {
        let _ = kernel_cache::store(d, module, key, &ptx.to_src()); // a cache that cannot be written is no cache
    }
    Ok((ptx, false))
}

/// A null pointer, for a kernel's optional buffer.
const NULL: u64 = 0;

/// Pushes the kernel argument `b`, or a null pointer for an optional one.
pub fn arg_or_null<'a, T: DeviceScalar>(l: &mut Launch<'a>, b: Option<&'a DeviceBuffer<T>>) {
    match b {
        Some(b) => l.arg(b),
        None => l.arg(&NULL),
    };
}

/// `arg_or_null` for a part of a buffer (`DeviceView`).
pub fn view_or_null<'a, T: DeviceScalar>(l: &mut Launch<'a>, v: Option<&'a DeviceView<'a, T>>) {
    match v {
        Some(v) => l.arg(v),
        None => l.arg(&NULL),
    };
}

impl Gpu {
    /// The kernel `name` from the CUDA source `source` (a file of `kernels/`),
    /// compiling the file with NVRTC the first time any of its kernels is
    /// asked for; for the files of `ONE_KERNEL_AT_A_TIME`, the first time this
    /// kernel is, compiling it alone (`one_kernel_source`), so a job pays for
    /// the kernels it launches, not for the whole file (kernels/lbm.cu: 36 s
    /// on one core for 87 kernels, of which a lattice launches four or five).
    pub fn kernel(&self, module: &'static str, source: &'static str, name: &str) -> Result<CudaFunction> {
        self.kernel_of(module, source, crate::ONE_KERNEL_AT_A_TIME.contains(&module).then_some(name), name)
    }

    fn kernel_of(&self, module: &'static str, source: &'static str, alone: Option<&str>, name: &str) -> Result<CudaFunction> {
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let key = (module, alone.unwrap_or_default().to_string());
        let m = match modules.get(&key) {
            Some(m) => m.clone(),
            None => {
                let text = alone.map(|k| one_kernel_source(source, k));
                let m = self.load_module(module, text.as_deref().unwrap_or(source))?;
                modules.insert(key, m.clone());
                m
            }
        };
        m.load_function(name).map_err(|e| device_error(&format!("looking up kernel {name} in kernels/{module}.cu"), e))
    }

    /// `text` (kernels/`module`.cu, or one kernel of it) loaded on this
    /// device: its PTX from the kernel cache, else compiled and stored. On a
    /// module's first load the driver translates the PTX to machine code and
    /// keeps that in its own cache (~/.nv/ComputeCache), which `fegpu warm`
    /// fills this way.
    pub fn load_module(&self, module: &str, text: &str) -> Result<Arc<CudaModule>> {
        let dir = self.kernel_cache.as_deref();
        let (ptx, cached) = compile_cached(module, text, &self.arch, dir, true)?;
        let loaded = match self.ctx.load_module(ptx) {
            // an entry the driver refuses (damaged, or from a newer toolkit): compiled afresh, stored again
            Err(_) if cached => self.ctx.load_module(compile_cached(module, text, &self.arch, dir, false)?.0),
            other => other,
        };
        loaded.map_err(|e| device_error(&format!("loading kernels/{module}.cu"), e))
    }

    /// The kernel `name`, allowed `bytes` of dynamic shared memory a block
    /// (above 48 KiB with its static arrays a kernel must opt in; at most
    /// `shared_room`).
    pub fn kernel_with_shared(
        &self,
        module: &'static str,
        source: &'static str,
        name: &str,
        bytes: usize,
    ) -> Result<CudaFunction> {
        let f = self.kernel(module, source, name)?;
        if bytes + static_shared(&f, name)? > 48 * 1024 {
            let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            f.set_attribute(attr, bytes as i32)
                .map_err(|e| device_error(&format!("giving {name} {bytes} bytes of shared memory"), e))?;
        }
        Ok(f)
    }

    /// The dynamic shared memory a block of `f` may take beside its static arrays.
    pub fn shared_room(&self, f: &CudaFunction, name: &str) -> Result<usize> {
        Ok(self.info.shared_per_block.saturating_sub(static_shared(f, name)?))
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
        self.checked_launch(what)
    }

    fn checked_launch(&self, what: &str) -> Result<()> {
        if self.check_launches && !self.capturing_here() {
            self.synchronize(what)?;
        }
        Ok(())
    }

    /// Starts an overlapped launch of `f`: push its arguments, then `launch_overlapped`.
    pub fn overlapped<'a>(&'a self, f: &'a CudaFunction) -> Overlapped<'a> {
        Overlapped { gpu: self, kernel: f, args: Vec::new() }
    }

    /// Launches a kernel that may start before the kernel queued before it
    /// ends (programmatic dependent launch, sm_90 on): the kernel must wait
    /// for it (`griddepcontrol.wait`) before it touches memory. Back-to-back
    /// steps then lose no time between grids. A plain launch on older
    /// devices or drivers, while a graph is recorded, and with
    /// FEGPU_OVERLAP_LAUNCHES=0.
    pub fn launch_overlapped(&self, what: &str, l: &Overlapped<'_>, grid: (u32, u32, u32), block: (u32, u32, u32)) -> Result<()> {
        // (cuLaunchKernelEx needs a CUDA 12 driver; programmatic launches, sm_90)
        let overlapping = self.overlap_launches
            && self.info.compute_capability.0 >= 9
            && self.info.driver_version >= 12000
            && !self.capturing_here();
        if !overlapping {
            return self.launch_ex(what, l, grid, block, 0, None);
        }
        // SAFETY: a zeroed attribute is plain data; the id and the union member set go together.
        let mut overlap: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        overlap.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        overlap.value.programmaticStreamSerializationAllowed = 1;
        self.launch_ex(what, l, grid, block, 0, Some(overlap))
    }

    /// Launches `blocks` blocks of `threads`, `shared` bytes of dynamic
    /// shared memory each, as one thread-block cluster (sm_90 on, a CUDA 12
    /// driver; at most 8 blocks, the portable size): co-scheduled, they may
    /// read one another's shared memory and meet at the cluster's barrier.
    pub fn launch_cluster(&self, what: &str, l: &Overlapped<'_>, blocks: u32, threads: u32, shared: u32) -> Result<()> {
        if self.info.compute_capability.0 < 9 || self.info.driver_version < 12000 || !(1..=8).contains(&blocks) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("{what}: a cluster of {blocks} blocks needs 1 to 8 blocks, sm_90 and a CUDA 12 driver"),
            ));
        }
        // SAFETY: as above.
        let mut cluster: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        cluster.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        cluster.value.clusterDim.x = blocks;
        cluster.value.clusterDim.y = 1;
        cluster.value.clusterDim.z = 1;
        self.launch_ex(what, l, (blocks, 1, 1), (threads, 1, 1), shared, Some(cluster))
    }

    /// A launch of the arguments `l`, with one launch attribute or none.
    fn launch_ex(
        &self,
        what: &str,
        l: &Overlapped<'_>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared: u32,
        attribute: Option<sys::CUlaunchAttribute>,
    ) -> Result<()> {
        let mut params: Vec<*mut std::ffi::c_void> = l
            .args
            .iter()
            .map(|a| match a {
                Arg::Address(address) => address as *const u64 as *mut std::ffi::c_void,
                Arg::Value(v) => *v as *mut std::ffi::c_void,
            })
            .collect();
        let (stream, kernel) = (self.stream().cu_stream(), l.kernel.cu_function());
        self.ctx.bind_to_thread().map_err(|e| device_error(&format!("launching {what}"), e))?;
        // SAFETY: `params` points at one live argument per kernel parameter,
        // in order (the caller's contract, checked by the CUDA-vs-CPU tests);
        // the buffers and values outlive the call, which copies them.
        let launched = match attribute {
            Some(mut attr) => {
                let config = sys::CUlaunchConfig {
                    gridDimX: grid.0,
                    gridDimY: grid.1,
                    gridDimZ: grid.2,
                    blockDimX: block.0,
                    blockDimY: block.1,
                    blockDimZ: block.2,
                    sharedMemBytes: shared,
                    hStream: stream,
                    attrs: &mut attr,
                    numAttrs: 1,
                };
                unsafe { sys::cuLaunchKernelEx(&config, kernel, params.as_mut_ptr(), std::ptr::null_mut()) }.result()
            }
            None => unsafe { cudarc::driver::result::launch_kernel(kernel, grid, block, shared, stream, &mut params) },
        };
        launched.map_err(|e| device_error(&format!("launching {what}"), e))?;
        self.checked_launch(what)
    }
}

/// The arguments of an overlapped launch (`Gpu::launch_overlapped`),
/// pushed in the kernel's order: buffers by their device address, values
/// by reference (cudarc's `Launch` has no way to add launch attributes).
pub struct Overlapped<'a> {
    gpu: &'a Gpu,
    kernel: &'a CudaFunction,
    /// (values by address: `value` borrows them for 'a)
    args: Vec<Arg>,
}

enum Arg {
    Address(u64),
    Value(*const std::ffi::c_void),
}

impl<'a> Overlapped<'a> {
    /// A device buffer the kernel reads or writes.
    pub fn buffer<T: DeviceScalar>(&mut self, b: &'a DeviceBuffer<T>) -> &mut Self {
        self.args.push(Arg::Address(self.gpu.address(b)));
        self
    }

    /// A value passed by copy; it must match the kernel parameter's type.
    pub fn value<T: KernelValue>(&mut self, v: &'a T) -> &mut Self {
        self.args.push(Arg::Value(v as *const T as *const std::ffi::c_void));
        self
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

/// The bytes of `f`'s static shared arrays.
fn static_shared(f: &CudaFunction, name: &str) -> Result<usize> {
    f.shared_size_bytes().map(|b| b.max(0) as usize).map_err(|e| device_error(&format!("reading {name}'s shared memory size"), e))
}
