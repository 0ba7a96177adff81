//! C surface of contexts and host-memory registration.

use super::registry;
use super::status::fegpu_status;
use super::{fegpu_context_t, guard, out_param};
use crate::context::{Context, Request};
use crate::error::{positive, Error, Result};
use std::sync::Arc;

/// Backend requested at context creation.
pub const FEGPU_BACKEND_AUTO: i32 = 0;
pub const FEGPU_BACKEND_CPU: i32 = 1;
pub const FEGPU_BACKEND_CUDA: i32 = 2;

pub(crate) fn request_of(backend: i32) -> Result<Request> {
    match backend {
        FEGPU_BACKEND_AUTO => Ok(Request::Auto),
        FEGPU_BACKEND_CPU => Ok(Request::Cpu),
        FEGPU_BACKEND_CUDA => Ok(Request::Cuda),
        _ => Err(Error::invalid(format!("backend = {backend}: expected FEGPU_BACKEND_AUTO (0), _CPU (1) or _CUDA (2)"))),
    }
}

/// Creates a context on `backend` (FEGPU_BACKEND_AUTO, _CPU or _CUDA) and CUDA
/// device ordinal `device`. The environment variables FEGPU_BACKEND
/// (auto|cpu|cuda) and FEGPU_DEVICE override both. AUTO takes CUDA when a
/// device answers and the CPU otherwise; an explicit CUDA request with no
/// device fails with FEGPU_ERR_NO_DEVICE rather than falling back.
#[no_mangle]
pub unsafe extern "C" fn fegpu_context_create(backend: i32, device: i64, ctx: *mut fegpu_context_t) -> fegpu_status {
    guard(|| {
        let out = out_param(ctx, "ctx")?;
        let c = Context::new(request_of(backend)?, device)?;
        *out = registry::insert(Arc::new(c), 0);
        Ok(())
    })
}

/// Destroys a context and every object created in it: arrays, matrices,
/// solvers, element sets and their steppers, lattices, rad_fields operators,
/// pipelines (their handles become invalid; a later call on one returns
/// FEGPU_ERR_INVALID_HANDLE).
#[no_mangle]
pub extern "C" fn fegpu_context_destroy(ctx: fegpu_context_t) -> fegpu_status {
    guard(|| registry::remove::<Context>(ctx, "ctx"))
}

/// The backend the context runs on: FEGPU_BACKEND_CPU or FEGPU_BACKEND_CUDA.
#[no_mangle]
pub unsafe extern "C" fn fegpu_context_backend(ctx: fegpu_context_t, backend: *mut i32) -> fegpu_status {
    guard(|| {
        let out = out_param(backend, "backend")?;
        *out = match registry::get::<crate::context::Context>(ctx, "ctx")?.gpu() {
            Some(_) => FEGPU_BACKEND_CUDA,
            None => FEGPU_BACKEND_CPU,
        };
        Ok(())
    })
}

/// Waits until all work queued in the context has finished.
#[no_mangle]
pub extern "C" fn fegpu_context_synchronize(ctx: fegpu_context_t) -> fegpu_status {
    guard(|| match registry::get::<crate::context::Context>(ctx, "ctx")?.gpu() {
        Some(g) => g.synchronize("fegpu_context_synchronize"),
        None => Ok(()),
    })
}

/// Page-locks `bytes` bytes of the caller's memory at `ptr` (e.g. a Fortran
/// array) so uploads and downloads through it run at pinned speed. Keep the
/// memory alive until `fegpu_host_unregister` (or the context's destruction).
#[no_mangle]
pub unsafe extern "C" fn fegpu_host_register(ctx: fegpu_context_t, ptr: *mut libc::c_void, bytes: i64) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        if ptr.is_null() {
            return Err(Error::invalid("ptr is a null pointer"));
        }
        c.register_host(ptr as *mut u8, positive("bytes", bytes)?)
    })
}

/// Releases a registration made by `fegpu_host_register` with the same `ptr`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_host_unregister(ctx: fegpu_context_t, ptr: *mut libc::c_void) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        if ptr.is_null() {
            return Err(Error::invalid("ptr is a null pointer"));
        }
        c.unregister_host(ptr as *mut u8)
    })
}
