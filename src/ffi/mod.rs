//! The C ABI. Every entry point runs inside `guard`, which turns errors into
//! status codes with a thread-local message and catches panics, so nothing
//! unwinds into C or Fortran.
// The entry points are unsafe because C passes raw pointers; each one's doc
// comment states what it reads and writes, which is its safety contract.
#![allow(clippy::missing_safety_doc)]

pub mod array;
pub mod context;
pub mod dense;
#[cfg(feature = "mpi")]
pub mod dist;
pub mod fem;
pub mod lbm;
pub mod pipeline;
pub mod radfields;
pub mod registry;
pub mod sparse;
pub mod status;

use crate::error::{Error, Result};
use status::{fegpu_status, FEGPU_ERR_INTERNAL, FEGPU_ERR_INVALID_ARGUMENT, FEGPU_OK};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A context handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_context_t = u64;
/// An array handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_array_t = u64;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

pub(crate) fn set_last_error(message: String) {
    LAST_ERROR.with(|m| *m.borrow_mut() = message);
}

/// Runs an entry point's body: errors become a status plus the thread's
/// last message, and a panic becomes FEGPU_ERR_INTERNAL.
pub(crate) fn guard(body: impl FnOnce() -> Result<()>) -> fegpu_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => FEGPU_OK,
        Ok(Err(e)) => {
            let status = fegpu_status::from(e.kind);
            set_last_error(e.message);
            status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(format!("internal error in fegpu (please report): {what}"));
            FEGPU_ERR_INTERNAL
        }
    }
}

/// A caller's input array: non-null and aligned for T, except that an empty
/// list may be NULL.
pub(crate) unsafe fn host_in<'a, T>(ptr: *const T, len: usize, arg: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    check_extent::<T>(len, arg)?;
    check_pointer(ptr, arg)?;
    Ok(std::slice::from_raw_parts(ptr, len))
}

/// A caller's output array: non-null and aligned for T, except that an
/// empty one may be NULL.
pub(crate) unsafe fn host_out<'a, T>(ptr: *mut T, len: usize, arg: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_extent::<T>(len, arg)?;
    check_pointer(ptr, arg)?;
    Ok(std::slice::from_raw_parts_mut(ptr, len))
}

/// A caller's host array as a byte range, for the overlap rule.
#[derive(Clone, Copy)]
pub(crate) struct Span<'a> {
    name: &'a str,
    start: usize,
    bytes: usize,
}

/// `len` elements of T at `ptr` (a null or empty array spans nothing).
pub(crate) fn span<T>(ptr: *const T, len: usize, name: &str) -> Span<'_> {
    let bytes = if ptr.is_null() { 0 } else { len.saturating_mul(std::mem::size_of::<T>()) };
    Span { name, start: ptr as usize, bytes }
}

/// The host-array aliasing rule: an array the call writes may not overlap
/// any other array of the call (inputs may share memory with each other).
/// Checked on the raw pointers, before any slice is formed over them.
pub(crate) fn no_overlap(outputs: &[Span], inputs: &[Span]) -> Result<()> {
    let meet = |a: &Span, b: &Span| {
        a.bytes > 0 && b.bytes > 0 && a.start < b.start.saturating_add(b.bytes) && b.start < a.start.saturating_add(a.bytes)
    };
    for (i, o) in outputs.iter().enumerate() {
        if let Some(other) = outputs[i + 1..].iter().chain(inputs).find(|x| meet(o, x)) {
            return Err(Error::invalid(format!(
                "{} and {} overlap in memory: {} is written, so it must not share memory with another argument",
                o.name, other.name, o.name
            )));
        }
    }
    Ok(())
}

/// `per` elements for each of `n` items: the length of a caller array whose
/// count is given in items, refused when it overflows.
pub(crate) fn items(per: usize, n: usize, arg: &str) -> Result<usize> {
    per.checked_mul(n).ok_or_else(|| Error::invalid(format!("{arg}: {per} x {n} elements exceed the address space")))
}

/// No caller array can be longer than the address space: a count that says
/// otherwise is refused before a slice is formed over it.
fn check_extent<T>(len: usize, arg: &str) -> Result<()> {
    match len.checked_mul(std::mem::size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(Error::invalid(format!("{arg}: {len} elements exceed the address space"))),
    }
}

/// `text` into the caller's `buf` of `len` bytes, NUL-terminated and cut to
/// fit; `needed` (may be NULL) gets its full length plus one. A refused
/// call writes neither.
pub(crate) unsafe fn write_text(text: &str, buf: *mut libc::c_char, len: i64, needed: *mut i64) -> Result<()> {
    let len = usize::try_from(len).map_err(|_| Error::invalid(format!("len = {len}: must be >= 0")))?;
    // len 0: the caller asks for `needed` alone (buf may be NULL)
    let out = if len == 0 { None } else { Some(host_out(buf as *mut u8, len, "buf")?) };
    if !needed.is_null() {
        *out_param(needed, "needed")? = text.len() as i64 + 1;
    }
    let Some(out) = out else { return Ok(()) };
    let n = text.len().min(len - 1);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out[n] = 0;
    Ok(())
}

/// A caller's scalar out-parameter.
pub(crate) unsafe fn out_param<'a, T>(ptr: *mut T, arg: &str) -> Result<&'a mut T> {
    check_pointer(ptr, arg)?;
    Ok(&mut *ptr)
}

/// The caller's optional out-parameters (pointer, value, name): each value
/// goes where its pointer points, a NULL pointer meaning it is not wanted.
/// Every pointer is checked before any is written.
pub(crate) unsafe fn write_wanted<T, const N: usize>(fields: [(*mut T, T, &str); N]) -> Result<()> {
    for (p, _, name) in &fields {
        check_wanted(*p, name)?;
    }
    for (p, v, _) in fields {
        if !p.is_null() {
            *p = v;
        }
    }
    Ok(())
}

/// An optional out-parameter: NULL, or aligned for T.
pub(crate) fn check_wanted<T>(ptr: *const T, arg: &str) -> Result<()> {
    match ptr.is_null() {
        true => Ok(()),
        false => check_pointer(ptr, arg),
    }
}

fn check_pointer<T>(ptr: *const T, arg: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("{arg} is a null pointer")));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::invalid(format!("{arg} = {:#x} is not aligned for its element type", ptr as usize)));
    }
    Ok(())
}

/// A caller's list of `n` indices counted from `index_base` (0 or 1), as a
/// slice; `n_arg` and `arg` name the count and the list in messages.
pub(crate) unsafe fn index_list<'a>(n: i64, ptr: *const i64, index_base: i32, n_arg: &str, arg: &str) -> Result<&'a [i64]> {
    if n < 0 {
        return Err(Error::invalid(format!("{n_arg} = {n}: must be >= 0")));
    }
    if index_base != 0 && index_base != 1 {
        return Err(Error::invalid(format!("index_base = {index_base}: must be 0 or 1")));
    }
    host_in(ptr, n as usize, arg)
}

/// As `index_list`, for a list that cannot hold more than `max` entries
/// (`what`: of what, for the message): a larger count is refused before
/// the caller's array is read, where it would run past its end.
pub(crate) unsafe fn index_list_max<'a>(
    n: i64,
    max: usize,
    what: &str,
    ptr: *const i64,
    index_base: i32,
    (n_arg, arg): (&str, &str),
) -> Result<&'a [i64]> {
    if n > 0 && n as u64 > max as u64 {
        return Err(Error::size(format!("{n_arg} = {n}: more than the {max} {what}")));
    }
    index_list(n, ptr, index_base, n_arg, arg)
}

/// Converts a caller's (first, count) with an explicit index base to a 0-based range.
pub(crate) fn range(first: i64, count: i64, index_base: i32, arg: &str) -> Result<(usize, usize)> {
    if index_base != 0 && index_base != 1 {
        return Err(Error::invalid(format!("index_base = {index_base}: must be 0 or 1")));
    }
    let zero_based = first.saturating_sub(index_base as i64);
    if zero_based < 0 {
        return Err(Error::invalid(format!("{arg}: first = {first} is below index_base = {index_base}")));
    }
    let count = crate::error::positive("count", count)?;
    Ok((zero_based as usize, count))
}

/// Copies the calling thread's last error message into `buf` (NUL-terminated,
/// truncated to `len` bytes). The message names the argument and the values
/// that were wrong; it stays until the next failing call on this thread.
#[no_mangle]
pub unsafe extern "C" fn fegpu_last_error_message(buf: *mut libc::c_char, len: i64) -> fegpu_status {
    if buf.is_null() || len < 1 {
        return FEGPU_ERR_INVALID_ARGUMENT;
    }
    LAST_ERROR.with(|m| {
        let m = m.borrow();
        let n = m.len().min(len as usize - 1);
        std::ptr::copy_nonoverlapping(m.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    });
    FEGPU_OK
}

/// How messages name positions in the caller's arrays: 0 (the default) as C
/// does, `values[0]`; 1 as Fortran does, `values(1)`. Process-wide; the
/// Fortran module sets 1 when it creates a context.
#[no_mangle]
pub extern "C" fn fegpu_messages_set_index_base(index_base: i32) -> fegpu_status {
    guard(|| {
        if index_base != 0 && index_base != 1 {
            return Err(Error::invalid(format!("index_base = {index_base}: must be 0 or 1")));
        }
        crate::error::set_message_base(index_base);
        Ok(())
    })
}

/// The library version (semantic versioning).
#[no_mangle]
pub unsafe extern "C" fn fegpu_version(major: *mut i32, minor: *mut i32, patch: *mut i32) -> fegpu_status {
    guard(|| {
        let parse = |s: &str| s.parse::<i32>().unwrap_or(0);
        *out_param(major, "major")? = parse(env!("CARGO_PKG_VERSION_MAJOR"));
        *out_param(minor, "minor")? = parse(env!("CARGO_PKG_VERSION_MINOR"));
        *out_param(patch, "patch")? = parse(env!("CARGO_PKG_VERSION_PATCH"));
        Ok(())
    })
}
