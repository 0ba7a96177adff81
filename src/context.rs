//! The context: one backend (CPU reference or one CUDA device) that owns arrays.

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::profile::Profile;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The backend asked for at context creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// CUDA if a device answers, else the CPU reference.
    Auto,
    Cpu,
    Cuda,
}

#[allow(clippy::large_enum_variant)] // one per context
pub enum Backend {
    Cpu,
    Cuda(Gpu),
}

pub struct Context {
    pub backend: Backend,
    /// Host ranges page-locked through this context: start address -> bytes.
    registered: Mutex<HashMap<usize, usize>>,
    /// Where this context's time goes (FEGPU_PROFILE=1 or fegpu_profile_enable).
    pub profile: Profile,
    /// State a capability keeps per context (the pipelines' model inputs and
    /// staging ring), made on first use.
    pub extensions: Extensions,
}

/// Per-context state of the capabilities, one value per type, created on
/// first use: the context need not know the capabilities (no module that a
/// capability imports imports it back).
#[derive(Default)]
pub struct Extensions(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl Extensions {
    pub fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let slot = map.entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(T::default())).clone();
        slot.downcast::<T>().unwrap_or_else(|_| unreachable!("each slot is keyed by its own type"))
    }
}

/// Applies `FEGPU_BACKEND` (auto|cpu|cuda) and `FEGPU_DEVICE` over the caller's choice,
/// so one binary runs in CI on the CPU and on the GPU machine unchanged.
pub fn resolve_request(backend: Request, device: i64) -> Result<(Request, usize)> {
    let mut backend = backend;
    if let Ok(v) = std::env::var("FEGPU_BACKEND") {
        backend = match v.to_ascii_lowercase().as_str() {
            "auto" | "" => Request::Auto,
            "cpu" => Request::Cpu,
            "cuda" => Request::Cuda,
            other => return Err(Error::invalid(format!("environment FEGPU_BACKEND = {other:?}: expected auto, cpu or cuda"))),
        };
    }
    let mut device = device;
    if let Ok(v) = std::env::var("FEGPU_DEVICE") {
        device = v
            .trim()
            .parse()
            .map_err(|_| Error::invalid(format!("environment FEGPU_DEVICE = {v:?}: expected a device ordinal")))?;
    }
    if device < 0 {
        return Err(Error::invalid(format!("device = {device}: must be >= 0")));
    }
    Ok((backend, device as usize))
}

impl Context {
    pub fn new(backend: Request, device: i64) -> Result<Context> {
        let (backend, device) = resolve_request(backend, device)?;
        let backend = match backend {
            Request::Cpu => Backend::Cpu,
            Request::Cuda => Backend::Cuda(Gpu::open(device)?),
            Request::Auto => Gpu::open(device).map(Backend::Cuda).unwrap_or(Backend::Cpu),
        };
        Ok(Context::with_backend(backend))
    }

    /// A CPU reference context whatever the environment says (for comparisons).
    pub fn cpu_reference() -> Context {
        Context::with_backend(Backend::Cpu)
    }

    fn with_backend(backend: Backend) -> Context {
        Context {
            backend,
            registered: Mutex::new(HashMap::new()),
            profile: Profile::from_env(),
            extensions: Extensions::default(),
        }
    }

    /// Whether `bytes` bytes at `start` lie inside one range registered with this context.
    pub fn is_registered(&self, start: usize, bytes: usize) -> bool {
        let reg = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        reg.iter().any(|(&s, &b)| s <= start && start + bytes <= s + b)
    }

    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Cpu => "cpu",
            Backend::Cuda(_) => "cuda",
        }
    }

    pub fn gpu(&self) -> Option<&Gpu> {
        match &self.backend {
            Backend::Cuda(g) => Some(g),
            Backend::Cpu => None,
        }
    }

    /// The device of a CUDA context: where a device buffer is found, the
    /// context must have one (anything else is parts of one object on two
    /// backends: the one internal error for that, `array::mixed_backends`).
    pub fn device(&self) -> Result<&Gpu> {
        self.gpu().ok_or_else(crate::array::mixed_backends)
    }

    /// Page-locks `bytes` bytes at `ptr` (a no-op on the CPU backend, but
    /// recorded there too so unregister behaves the same on both).
    pub fn register_host(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        let start = ptr as usize;
        if !mapped(start, bytes) {
            return Err(Error::invalid(format!(
                "ptr = {start:#x}, bytes = {bytes}: not all of that range is memory of this process (bytes counts bytes, not elements)"
            )));
        }
        let mut reg = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((&s, &b)) = reg.iter().find(|(&s, &b)| start < s + b && s < start + bytes) {
            return Err(Error::invalid(format!(
                "ptr = {start:#x} (+{bytes} bytes) overlaps the range {s:#x} (+{b} bytes) already registered"
            )));
        }
        if let Some(g) = self.gpu() {
            g.register_host(ptr, bytes)?;
        }
        reg.insert(start, bytes);
        Ok(())
    }

    pub fn unregister_host(&self, ptr: *mut u8) -> Result<()> {
        let mut reg = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        if !reg.contains_key(&(ptr as usize)) {
            return Err(Error::invalid(format!("ptr = {:#x} was not registered with this context", ptr as usize)));
        }
        if let Some(g) = self.gpu() {
            g.unregister_host(ptr)?;
        }
        reg.remove(&(ptr as usize));
        Ok(())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.profile.enabled() && !self.profile.is_empty() {
            // The profile of a context goes out when it is destroyed.
            eprint!("{}", self.profile.table());
            let path =
                std::env::var("FEGPU_PROFILE_JSON").unwrap_or_else(|_| format!("fegpu-profile-{}.json", std::process::id()));
            if let Err(e) = std::fs::write(&path, self.profile.json()) {
                eprintln!("fegpu: could not write the profile to {path}: {e}");
            }
        }
        // Unlock whatever the caller left registered, so no pinned memory leaks.
        let registered = std::mem::take(self.registered.get_mut().unwrap_or_else(|p| p.into_inner()));
        if let Some(g) = self.gpu() {
            for start in registered.into_keys() {
                let _ = g.unregister_host(start as *mut u8);
            }
        }
    }
}

/// Whether every page of `bytes` bytes at `start` is mapped in this process,
/// so the CPU backend refuses the ranges that page-locking would: msync with
/// MS_ASYNC changes nothing on mapped pages and fails with ENOMEM where one is not.
fn mapped(start: usize, bytes: usize) -> bool {
    let page = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(1) as usize;
    let base = start / page * page;
    match start.checked_add(bytes) {
        Some(end) if bytes > 0 => unsafe { libc::msync(base as *mut libc::c_void, end - base, libc::MS_ASYNC) == 0 },
        _ => false,
    }
}
