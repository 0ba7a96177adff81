//! C surface of dense transpose and copy.

use super::registry;
use super::status::fegpu_status;
use super::{fegpu_array_t, fegpu_context_t, guard, host_in, host_out, no_overlap, span};
use crate::array::Real;
use crate::dense::{self, Variant};
use crate::error::{element_count, positive, Error, Result};

/// Kernel variant: AUTO picks the fastest measured (the padded tile).
pub const FEGPU_VARIANT_AUTO: i32 = 0;
/// One element per thread: coalesced reads, strided writes.
pub const FEGPU_VARIANT_NAIVE: i32 = 1;
/// Shared-memory tile without padding (bank conflicts on the column reads).
pub const FEGPU_VARIANT_TILE: i32 = 2;
/// Shared-memory tile padded by one element per row (bank-conflict-free).
pub const FEGPU_VARIANT_PADDED: i32 = 3;

/// The C variant code as the domain's choice (None: AUTO).
fn variant_of(code: i32) -> Result<Option<Variant>> {
    match code {
        FEGPU_VARIANT_AUTO => Ok(None),
        FEGPU_VARIANT_NAIVE => Ok(Some(Variant::Naive)),
        FEGPU_VARIANT_TILE => Ok(Some(Variant::Tile)),
        FEGPU_VARIANT_PADDED => Ok(Some(Variant::Padded)),
        _ => Err(Error::invalid(format!(
            "variant = {code}: expected FEGPU_VARIANT_AUTO (0), _NAIVE (1), _TILE (2) or _PADDED (3)"
        ))),
    }
}

/// dst = src^T on device-resident arrays: src m x n, dst n x m (column-major),
/// same type, same context. `variant` is FEGPU_VARIANT_AUTO (the fastest),
/// _NAIVE, _TILE or _PADDED. Returns once the work is queued.
#[no_mangle]
pub extern "C" fn fegpu_dense_transpose(src: fegpu_array_t, dst: fegpu_array_t, variant: i32) -> fegpu_status {
    guard(|| {
        let v = variant_of(variant)?;
        dense::transpose(
            &*registry::get::<crate::array::Array>(src, "src")?,
            &*registry::get::<crate::array::Array>(dst, "dst")?,
            v,
        )
    })
}

/// a = a^T in place for a square device-resident array.
#[no_mangle]
pub extern "C" fn fegpu_dense_transpose_in_place(a: fegpu_array_t, variant: i32) -> fegpu_status {
    guard(|| {
        let v = variant_of(variant)?;
        dense::transpose_in_place(&*registry::get::<crate::array::Array>(a, "a")?, v)
    })
}

/// dst = src for device-resident arrays of one shape and type. AUTO uses the
/// driver's device-to-device copy; the kernel variants exist for benchmarks.
#[no_mangle]
pub extern "C" fn fegpu_dense_copy(src: fegpu_array_t, dst: fegpu_array_t, variant: i32) -> fegpu_status {
    guard(|| {
        let v = variant_of(variant)?;
        dense::copy(&*registry::get::<crate::array::Array>(src, "src")?, &*registry::get::<crate::array::Array>(dst, "dst")?, v)
    })
}

unsafe fn transpose_host<T: Real>(ctx: fegpu_context_t, m: i64, n: i64, a: *const T, at: *mut T, variant: i32) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let v = variant_of(variant)?;
        let (m, n) = (positive("m", m)?, positive("n", n)?);
        let len = element_count(m, n)?;
        no_overlap(&[span(at, len, "at")], &[span(a, len, "a")]).map_err(|e| {
            Error::invalid(format!("{}; for a square in-place transpose use fegpu_dense_transpose_host_in_place_*", e.message))
        })?;
        dense::transpose_host(&c, m, n, host_in(a, len, "a")?, host_out(at, len, "at")?, v)
    })
}

unsafe fn transpose_host_in_place<T: Real>(ctx: fegpu_context_t, n: i64, a: *mut T, variant: i32) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let v = variant_of(variant)?;
        let n = positive("n", n)?;
        dense::transpose_host_in_place(&c, n, host_out(a, element_count(n, n)?, "a")?, v)
    })
}

/// Host convenience: at (n x m) = a^T (a m x n) through the context's backend
/// (upload, transpose, download in one call).
#[no_mangle]
pub unsafe extern "C" fn fegpu_dense_transpose_host_f64(
    ctx: fegpu_context_t,
    m: i64,
    n: i64,
    a: *const f64,
    at: *mut f64,
    variant: i32,
) -> fegpu_status {
    transpose_host::<f64>(ctx, m, n, a, at, variant)
}

/// Host convenience: at (n x m) = a^T (a m x n) through the context's backend.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dense_transpose_host_f32(
    ctx: fegpu_context_t,
    m: i64,
    n: i64,
    a: *const f32,
    at: *mut f32,
    variant: i32,
) -> fegpu_status {
    transpose_host::<f32>(ctx, m, n, a, at, variant)
}

/// Host convenience: square a (n x n) = a^T in place through the context's backend.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dense_transpose_host_in_place_f64(
    ctx: fegpu_context_t,
    n: i64,
    a: *mut f64,
    variant: i32,
) -> fegpu_status {
    transpose_host_in_place::<f64>(ctx, n, a, variant)
}

/// Host convenience: square a (n x n) = a^T in place through the context's backend.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dense_transpose_host_in_place_f32(
    ctx: fegpu_context_t,
    n: i64,
    a: *mut f32,
    variant: i32,
) -> fegpu_status {
    transpose_host_in_place::<f32>(ctx, n, a, variant)
}
