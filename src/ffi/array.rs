//! C surface of device-resident arrays. Arrays are column-major rows x cols
//! (a vector is n x 1); element order is Fortran's.

use super::registry;
use super::status::fegpu_status;
use super::{fegpu_array_t, fegpu_context_t, guard, host_in, host_out, out_param, range, write_wanted};
use crate::array::{Array, Dtype, Real};
use crate::error::{element_count, positive, Error, Result};
use std::sync::Arc;

pub const FEGPU_DTYPE_F32: i32 = 1;
pub const FEGPU_DTYPE_F64: i32 = 2;

unsafe fn create<T: Real>(
    ctx: fegpu_context_t,
    rows: i64,
    cols: i64,
    host: Option<*const T>,
    out: *mut fegpu_array_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(out, "arr")?;
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (r, k) = (positive("rows", rows)?, positive("cols", cols)?);
        let init = match host {
            Some(p) => Some(host_in(p, element_count(r, k)?, "host")?),
            None => None,
        };
        let a = Array::new::<T>(c, r, k, init)?;
        *out = registry::insert(Arc::new(a), ctx);
        Ok(())
    })
}

/// Whole-array transfer: `count` must equal rows * cols.
fn whole(a: &Array, count: i64) -> Result<usize> {
    let n = positive("count", count)?;
    if n != a.len() {
        return Err(Error::size(format!("count = {n} but arr is {} x {} = {} elements", a.rows, a.cols, a.len())));
    }
    Ok(n)
}

unsafe fn upload<T: Real>(arr: fegpu_array_t, host: *const T, count: i64) -> fegpu_status {
    guard(|| {
        let a = registry::get::<crate::array::Array>(arr, "arr")?;
        let n = whole(&a, count)?;
        a.upload(0, host_in(host, n, "host")?, "arr")
    })
}

unsafe fn download<T: Real>(arr: fegpu_array_t, host: *mut T, count: i64) -> fegpu_status {
    guard(|| {
        let a = registry::get::<crate::array::Array>(arr, "arr")?;
        let n = whole(&a, count)?;
        a.download(0, host_out(host, n, "host")?, "arr")
    })
}

unsafe fn upload_slice<T: Real>(arr: fegpu_array_t, first: i64, count: i64, host: *const T, index_base: i32) -> fegpu_status {
    guard(|| {
        let a = registry::get::<crate::array::Array>(arr, "arr")?;
        let (first, count) = range(first, count, index_base, "arr")?;
        a.upload(first, host_in(host, count, "host")?, "arr")
    })
}

unsafe fn download_slice<T: Real>(arr: fegpu_array_t, first: i64, count: i64, host: *mut T, index_base: i32) -> fegpu_status {
    guard(|| {
        let a = registry::get::<crate::array::Array>(arr, "arr")?;
        let (first, count) = range(first, count, index_base, "arr")?;
        a.download(first, host_out(host, count, "host")?, "arr")
    })
}

/// Creates a rows x cols f64 array in `ctx` holding a copy of `host`
/// (column-major, rows*cols elements).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_create_f64(
    ctx: fegpu_context_t,
    rows: i64,
    cols: i64,
    host: *const f64,
    arr: *mut fegpu_array_t,
) -> fegpu_status {
    create::<f64>(ctx, rows, cols, Some(host), arr)
}

/// Creates a rows x cols f32 array in `ctx` holding a copy of `host`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_create_f32(
    ctx: fegpu_context_t,
    rows: i64,
    cols: i64,
    host: *const f32,
    arr: *mut fegpu_array_t,
) -> fegpu_status {
    create::<f32>(ctx, rows, cols, Some(host), arr)
}

/// Creates an uninitialised rows x cols array of `dtype` (FEGPU_DTYPE_F32 or
/// FEGPU_DTYPE_F64). Its contents are undefined until written (NaN on the CPU backend).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_create_empty(
    ctx: fegpu_context_t,
    dtype: i32,
    rows: i64,
    cols: i64,
    arr: *mut fegpu_array_t,
) -> fegpu_status {
    match dtype {
        FEGPU_DTYPE_F64 => create::<f64>(ctx, rows, cols, None, arr),
        FEGPU_DTYPE_F32 => create::<f32>(ctx, rows, cols, None, arr),
        _ => guard(|| Err(Error::invalid(format!("dtype = {dtype}: expected FEGPU_DTYPE_F32 (1) or FEGPU_DTYPE_F64 (2)")))),
    }
}

/// Destroys an array and frees its device memory.
#[no_mangle]
pub extern "C" fn fegpu_array_destroy(arr: fegpu_array_t) -> fegpu_status {
    guard(|| registry::remove::<Array>(arr, "arr"))
}

/// The array's shape and element type (FEGPU_DTYPE_*); any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_shape(arr: fegpu_array_t, rows: *mut i64, cols: *mut i64, dtype: *mut i32) -> fegpu_status {
    guard(|| {
        let a = registry::get::<crate::array::Array>(arr, "arr")?;
        super::check_wanted(dtype, "dtype")?;
        write_wanted([(rows, a.rows as i64, "rows"), (cols, a.cols as i64, "cols")])?;
        let code = match a.dtype {
            Dtype::F32 => FEGPU_DTYPE_F32,
            Dtype::F64 => FEGPU_DTYPE_F64,
        };
        write_wanted([(dtype, code, "dtype")])?;
        Ok(())
    })
}

/// Overwrites the whole array from `host` (`count` = rows * cols elements).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_upload_f64(arr: fegpu_array_t, host: *const f64, count: i64) -> fegpu_status {
    upload::<f64>(arr, host, count)
}

/// Overwrites the whole array from `host` (`count` = rows * cols elements).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_upload_f32(arr: fegpu_array_t, host: *const f32, count: i64) -> fegpu_status {
    upload::<f32>(arr, host, count)
}

/// Copies the whole array into `host` (`count` = rows * cols elements).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_download_f64(arr: fegpu_array_t, host: *mut f64, count: i64) -> fegpu_status {
    download::<f64>(arr, host, count)
}

/// Copies the whole array into `host` (`count` = rows * cols elements).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_download_f32(arr: fegpu_array_t, host: *mut f32, count: i64) -> fegpu_status {
    download::<f32>(arr, host, count)
}

/// Overwrites `count` elements starting at element `first` (in column-major
/// order, counted from `index_base`, 0 or 1) from `host`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_upload_slice_f64(
    arr: fegpu_array_t,
    first: i64,
    count: i64,
    host: *const f64,
    index_base: i32,
) -> fegpu_status {
    upload_slice::<f64>(arr, first, count, host, index_base)
}

/// Overwrites `count` elements starting at element `first` (counted from `index_base`).
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_upload_slice_f32(
    arr: fegpu_array_t,
    first: i64,
    count: i64,
    host: *const f32,
    index_base: i32,
) -> fegpu_status {
    upload_slice::<f32>(arr, first, count, host, index_base)
}

/// Copies `count` elements starting at element `first` (counted from `index_base`) into `host`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_download_slice_f64(
    arr: fegpu_array_t,
    first: i64,
    count: i64,
    host: *mut f64,
    index_base: i32,
) -> fegpu_status {
    download_slice::<f64>(arr, first, count, host, index_base)
}

/// Copies `count` elements starting at element `first` (counted from `index_base`) into `host`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_array_download_slice_f32(
    arr: fegpu_array_t,
    first: i64,
    count: i64,
    host: *mut f32,
    index_base: i32,
) -> fegpu_status {
    download_slice::<f32>(arr, first, count, host, index_base)
}
