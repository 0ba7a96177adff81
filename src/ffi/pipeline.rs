//! C surface of the host-array pipelines and of the per-context profile.

use super::registry;
use super::status::fegpu_status;
use super::{fegpu_context_t, guard, host_in, host_out, no_overlap, out_param, span};
use crate::error::{element_count, Error, Result};
use crate::pipeline::{self, Plan, Strategy, MAX_STREAMS};
use std::ffi::CStr;

/// Strategy chosen by the overlap model from the timings of the first calls (two, the first warming up).
pub const FEGPU_PIPELINE_AUTO: i32 = 0;
/// One stream: copy-in, kernel, copy-out of each chunk in turn (version 1).
pub const FEGPU_PIPELINE_SERIAL: i32 = 1;
/// Each chunk's copy-in, kernel and copy-out issued together, chunks dealt across the streams (version 2).
pub const FEGPU_PIPELINE_PER_CHUNK: i32 = 2;
/// All copy-ins of a round of chunks, then all kernels, then all copy-outs (version 3).
pub const FEGPU_PIPELINE_STAGED: i32 = 3;

/// From the C arguments; None for FEGPU_PIPELINE_AUTO. streams 0 with an
/// explicit strategy: the model's choice; chunks 0: one chunk per stream.
fn plan_of(strategy: i32, streams: i64, chunks: i64) -> Result<Option<Plan>> {
    // checked under every strategy, AUTO's too (which then ignores them)
    if !(0..=MAX_STREAMS as i64).contains(&streams) {
        return Err(Error::invalid(format!("n_streams = {streams}: expected 0 (automatic) to {MAX_STREAMS}")));
    }
    // each chunk is a copy and a launch of its own: beyond this many they only add overhead
    const MAX_CHUNKS: i64 = 1 << 16;
    if !(0..=MAX_CHUNKS).contains(&chunks) {
        return Err(Error::invalid(format!("n_chunks = {chunks}: expected 0 (one per stream) to {MAX_CHUNKS}")));
    }
    let strategy = match strategy {
        FEGPU_PIPELINE_AUTO => return Ok(None),
        FEGPU_PIPELINE_SERIAL => Strategy::Serial,
        FEGPU_PIPELINE_PER_CHUNK => Strategy::PerChunk,
        FEGPU_PIPELINE_STAGED => Strategy::Staged,
        s => {
            return Err(Error::invalid(format!(
                "strategy = {s}: expected FEGPU_PIPELINE_AUTO (0), _SERIAL (1), _PER_CHUNK (2) or _STAGED (3)"
            )))
        }
    };
    let streams = if strategy == Strategy::Serial { 1 } else { streams as usize };
    Ok(Some(Plan { strategy, streams, chunks: chunks as usize }))
}

/// One operation's profile (fegpu_profile_op).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fegpu_op_profile {
    pub calls: i64,
    pub h2d_bytes: i64,
    pub d2h_bytes: i64,
    pub h2d_seconds: f64,
    pub d2h_seconds: f64,
    pub kernel_seconds: f64,
    pub wall_seconds: f64,
    /// The serial host loop's time for the same work.
    pub serial_seconds: f64,
}

use crate::error::non_negative as count;

/// y = a x + b y on host arrays of n elements, pipelined through the device
/// in chunks: `strategy` FEGPU_PIPELINE_AUTO (0), _SERIAL, _PER_CHUNK or
/// _STAGED; n_streams 1..16 (0: the overlap model's choice); n_chunks (0: one
/// per stream). Registered host arrays are copied directly, others through
/// page-locked staging. Returns when y is back.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_pipeline_axpby(
    ctx: fegpu_context_t,
    n: i64,
    a: f64,
    x: *const f64,
    b: f64,
    y: *mut f64,
    strategy: i32,
    n_streams: i64,
    n_chunks: i64,
) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let n = count("n", n)?;
        let plan = plan_of(strategy, n_streams, n_chunks)?;
        no_overlap(&[span(y, n, "y")], &[span(x, n, "x")])?;
        let (x, y) = (host_in(x, n, "x")?, host_out(y, n, "y")?);
        pipeline::axpby(&c, a, x, b, y, plan).map(|_| ())
    })
}

/// out(j) = A(:, j) . B(:, j), j = 1..ncols, for two m x ncols column-major
/// host matrices, pipelined by columns (arguments as fegpu_pipeline_axpby;
/// m = 0: every out(j) = 0).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_pipeline_column_dots(
    ctx: fegpu_context_t,
    m: i64,
    ncols: i64,
    a: *const f64,
    b: *const f64,
    out: *mut f64,
    strategy: i32,
    n_streams: i64,
    n_chunks: i64,
) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (m, ncols) = (count("m", m)?, count("ncols", ncols)?);
        let plan = plan_of(strategy, n_streams, n_chunks)?;
        let len = element_count(m, ncols)?;
        if ncols == 0 {
            return Ok(());
        }
        no_overlap(&[span(out, ncols, "out")], &[span(a, len, "a"), span(b, len, "b")])?;
        pipeline::column_dots(&c, m, host_in(a, len, "a")?, host_in(b, len, "b")?, host_out(out, ncols, "out")?, plan).map(|_| ())
    })
}

/// C = alpha A B + beta C for column-major host matrices A (m x k), B (k x n)
/// and C (m x n), through cuBLAS: A goes to the device once, B and C move in
/// column panels (pipeline arguments as fegpu_pipeline_axpby; C is not read
/// when beta = 0). Zero sizes as BLAS takes them: k = 0 gives C = beta C.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_pipeline_gemm(
    ctx: fegpu_context_t,
    m: i64,
    n: i64,
    k: i64,
    alpha: f64,
    a: *const f64,
    b: *const f64,
    beta: f64,
    c: *mut f64,
    strategy: i32,
    n_streams: i64,
    n_chunks: i64,
) -> fegpu_status {
    guard(|| {
        let ctx = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (m, n, k) = (count("m", m)?, count("n", n)?, count("k", k)?);
        let plan = plan_of(strategy, n_streams, n_chunks)?;
        let (la, lb, lc) = (element_count(m, k)?, element_count(k, n)?, element_count(m, n)?);
        no_overlap(&[span(c, lc, "c")], &[span(a, la, "a"), span(b, lb, "b")])?;
        let (a, b) = (host_in(a, la, "a")?, host_in(b, lb, "b")?);
        pipeline::gemm(&ctx, m, n, k, alpha, a, b, beta, host_out(c, element_count(m, n)?, "c")?, plan).map(|_| ())
    })
}

/// y = alpha A x + beta y for a column-major host m x n matrix A, through
/// cuBLAS: A moves in row panels, x once (y is not read when beta = 0).
/// Zero sizes as BLAS takes them: n = 0 gives y = beta y.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_pipeline_gemv(
    ctx: fegpu_context_t,
    m: i64,
    n: i64,
    alpha: f64,
    a: *const f64,
    x: *const f64,
    beta: f64,
    y: *mut f64,
    strategy: i32,
    n_streams: i64,
    n_chunks: i64,
) -> fegpu_status {
    guard(|| {
        let ctx = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (m, n) = (count("m", m)?, count("n", n)?);
        let plan = plan_of(strategy, n_streams, n_chunks)?;
        let la = element_count(m, n)?;
        no_overlap(&[span(y, m, "y")], &[span(a, la, "a"), span(x, n, "x")])?;
        let (a, x) = (host_in(a, la, "a")?, host_in(x, n, "x")?);
        pipeline::gemv(&ctx, m, n, alpha, a, x, beta, host_out(y, m, "y")?, plan).map(|_| ())
    })
}

/// at (n x m) = a^T for a column-major host m x n matrix, in column panels of
/// a that land as row panels of at (m or n 0: nothing to do).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_pipeline_transpose(
    ctx: fegpu_context_t,
    m: i64,
    n: i64,
    a: *const f64,
    at: *mut f64,
    strategy: i32,
    n_streams: i64,
    n_chunks: i64,
) -> fegpu_status {
    guard(|| {
        let ctx = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (m, n) = (count("m", m)?, count("n", n)?);
        let plan = plan_of(strategy, n_streams, n_chunks)?;
        let len = element_count(m, n)?;
        no_overlap(&[span(at, len, "at")], &[span(a, len, "a")])?;
        pipeline::transpose(&ctx, m, n, host_in(a, len, "a")?, host_out(at, len, "at")?, plan).map(|_| ())
    })
}

/// Turns the context's profile on (nonzero) or off; FEGPU_PROFILE=1 turns it
/// on at creation. A profiled context prints its table and writes its JSON
/// (to $FEGPU_PROFILE_JSON, else fegpu-profile-<pid>.json) when destroyed.
#[no_mangle]
pub extern "C" fn fegpu_profile_enable(ctx: fegpu_context_t, on: i32) -> fegpu_status {
    guard(|| {
        registry::get::<crate::context::Context>(ctx, "ctx")?.profile.set_enabled(on != 0);
        Ok(())
    })
}

/// Prints the profile table to standard output and, when `json_path` is not
/// NULL, writes the profile there as JSON.
#[no_mangle]
pub unsafe extern "C" fn fegpu_profile_report(ctx: fegpu_context_t, json_path: *const libc::c_char) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        // the file first: a refused path prints nothing
        if !json_path.is_null() {
            let path = CStr::from_ptr(json_path).to_str().map_err(|_| Error::invalid("json_path is not UTF-8"))?;
            std::fs::write(path, c.profile.json()).map_err(|e| Error::invalid(format!("json_path = {path:?}: {e}")))?;
        }
        print!("{}", c.profile.table());
        Ok(())
    })
}

/// The profile of operation `op` ("axpby", "column_dots", "gemm", "gemv",
/// "transpose"); zeros if it has not run; another name is refused.
#[no_mangle]
pub unsafe extern "C" fn fegpu_profile_op(
    ctx: fegpu_context_t,
    op: *const libc::c_char,
    out: *mut fegpu_op_profile,
) -> fegpu_status {
    guard(|| {
        let out = out_param(out, "out")?;
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        if op.is_null() {
            return Err(Error::invalid("op is a null pointer"));
        }
        let name = CStr::from_ptr(op).to_str().map_err(|_| Error::invalid("op is not UTF-8"))?;
        if !crate::pipeline::OPERATIONS.contains(&name) {
            let known = crate::pipeline::OPERATIONS.join(", ");
            return Err(Error::invalid(format!("op is \"{name}\", not one of the pipelined operations ({known})")));
        }
        let s = c.profile.op(name).unwrap_or_default();
        *out = fegpu_op_profile {
            calls: s.calls as i64,
            h2d_bytes: s.h2d_bytes as i64,
            d2h_bytes: s.d2h_bytes as i64,
            h2d_seconds: s.h2d_seconds,
            d2h_seconds: s.d2h_seconds,
            kernel_seconds: s.kernel_seconds,
            wall_seconds: s.wall_seconds,
            serial_seconds: s.serial_seconds,
        };
        Ok(())
    })
}
