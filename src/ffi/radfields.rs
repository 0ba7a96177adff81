//! C surface of the FE-IIEE rad_fields accumulator. Complex arrays are
//! `double _Complex` (Fortran complex(c_double_complex)): (re, im) pairs of doubles.

use super::registry;
use super::status::fegpu_status;
use super::{fegpu_context_t, guard, host_in, host_out, items, no_overlap, out_param, span};
use crate::error::{element_count, positive, Error, Result};
use crate::radfields::{Accumulator, Kernel, Medium, RadFieldsApi, Sources};
use num_complex::Complex64;
use std::sync::Arc;

/// Kernel strategy: chosen from n_rhs (the default).
pub const FEGPU_RADFIELDS_AUTO: i32 = 0;
/// One thread per (S point, right-hand side); the seed's "parallel over S" and "over RHS".
pub const FEGPU_RADFIELDS_DIRECT: i32 = 1;
/// Green's-function coefficients of a tile of pairs shared by a block's right-hand sides.
pub const FEGPU_RADFIELDS_TILED: i32 = 2;

/// A rad_fields accumulator handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_radfields_t = u64;

/// The accumulator behind a handle: one process's, or (in the MPI build)
/// one whose S points are split over ranks by fegpu_dist_radfields_create.
fn accumulator(h: fegpu_radfields_t) -> Result<Arc<dyn RadFieldsApi>> {
    #[cfg(feature = "mpi")]
    if registry::Kind::from_handle(h) == Some(registry::Kind::DistRadFields) {
        return Ok(registry::get::<crate::dist::DistRadFields>(h, "acc")?);
    }
    Ok(registry::get::<Accumulator>(h, "acc")?)
}

unsafe fn complex_in<'a>(ptr: *const f64, len: usize, arg: &str) -> Result<&'a [Complex64]> {
    let flat = host_in(ptr, 2 * len, arg)?;
    // SAFETY: Complex64 is #[repr(C)] (re, im) with f64's alignment.
    Ok(std::slice::from_raw_parts(flat.as_ptr() as *const Complex64, len))
}

unsafe fn complex_out<'a>(ptr: *mut f64, len: usize, arg: &str) -> Result<&'a mut [Complex64]> {
    let flat = host_out(ptr, 2 * len, arg)?;
    // SAFETY: as in complex_in.
    Ok(std::slice::from_raw_parts_mut(flat.as_mut_ptr() as *mut Complex64, len))
}

unsafe fn medium(k: *const f64, omega_mu: *const f64) -> Result<Medium> {
    let (k, omega_mu) = (complex_in(k, 1, "k")?[0], complex_in(omega_mu, 1, "omega_mu")?[0]);
    Medium::new(k, omega_mu)
}

/// An accumulator's arguments, checked: the S points (3, n_s), n_rhs and the medium.
pub(super) unsafe fn accumulator_args<'a>(
    n_s: i64,
    points: *const f64,
    n_rhs: i64,
    k: *const f64,
    omega_mu: *const f64,
) -> Result<(&'a [f64], usize, Medium)> {
    let (n_s, n_rhs) = (positive("n_s", n_s)?, positive("n_rhs", n_rhs)?);
    crate::error::checked_product(&[12, n_s, n_rhs], "n_s x n_rhs (the fields)")?;
    let m = medium(k, omega_mu)?;
    Ok((host_in(points, items(3, n_s, "points")?, "points")?, n_rhs, m))
}

#[allow(clippy::too_many_arguments)] // the C signature's arguments
unsafe fn create(
    ctxs: &[fegpu_context_t],
    n_s: i64,
    points: *const f64,
    n_rhs: i64,
    k: *const f64,
    omega_mu: *const f64,
    acc: *mut fegpu_radfields_t,
) -> Result<()> {
    let out = out_param(acc, "acc")?;
    let contexts = ctxs
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            registry::get::<crate::context::Context>(
                h,
                &if ctxs.len() == 1 { "ctx".to_string() } else { crate::error::at("ctxs", i) },
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let (points, n_rhs, m) = accumulator_args(n_s, points, n_rhs, k, omega_mu)?;
    let a = Accumulator::new(contexts, points, n_rhs, m)?;
    *out = registry::insert(Arc::new(a), ctxs[0]);
    Ok(())
}

/// Creates an accumulator for n_s S points `points` (3, n_s), n_rhs
/// right-hand sides, wavenumber `k` and `omega_mu` (each one complex: two
/// doubles re, im; complex for lossy media). The S points and the fields
/// (zeroed) stay on the context's device.
#[no_mangle]
pub unsafe extern "C" fn fegpu_radfields_create(
    ctx: fegpu_context_t,
    n_s: i64,
    points: *const f64,
    n_rhs: i64,
    k: *const f64,
    omega_mu: *const f64,
    acc: *mut fegpu_radfields_t,
) -> fegpu_status {
    guard(|| create(&[ctx], n_s, points, n_rhs, k, omega_mu, acc))
}

/// As fegpu_radfields_create, with the S points split into contiguous slices
/// across `n_ctx` CUDA contexts on distinct devices (ctxs(1) owns the handle);
/// each device accumulates its slice, and download gathers them.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_radfields_create_multi(
    n_ctx: i64,
    ctxs: *const fegpu_context_t,
    n_s: i64,
    points: *const f64,
    n_rhs: i64,
    k: *const f64,
    omega_mu: *const f64,
    acc: *mut fegpu_radfields_t,
) -> fegpu_status {
    guard(|| {
        let n = positive("n_ctx", n_ctx)?;
        create(host_in(ctxs, n, "ctxs")?, n_s, points, n_rhs, k, omega_mu, acc)
    })
}

/// Adds the contribution of n_p S' sample points: `points` (3, n_p),
/// quadrature `weights` (n_p), `currents` (3, 2, n_p, n_rhs) complex, J then M.
/// Returns once the work is queued; the arrays may be reused at once (they are
/// copied into page-locked staging, double-buffered). Pairs of coincident
/// points are skipped and counted (fegpu_radfields_excluded).
#[no_mangle]
pub unsafe extern "C" fn fegpu_radfields_accumulate(
    acc: fegpu_radfields_t,
    n_p: i64,
    points: *const f64,
    weights: *const f64,
    currents: *const f64,
) -> fegpu_status {
    guard(|| {
        let a = accumulator(acc)?;
        let n_p = positive("n_p", n_p)?;
        let n_rhs = a.sizes().1;
        let n_currents = element_count(element_count(n_p, 12)? / 2, n_rhs)?;
        let src = Sources::new(
            n_p,
            n_rhs,
            host_in(points, items(3, n_p, "points")?, "points")?,
            host_in(weights, n_p, "weights")?,
            complex_in(currents, n_currents, "currents")?,
        )?;
        a.accumulate(&src)
    })
}

/// Waits for the queued accumulations and copies the fields (3, 2, n_s, n_rhs)
/// complex, E then curl E, into `fields`; n = 6 * n_s * n_rhs complex elements.
#[no_mangle]
pub unsafe extern "C" fn fegpu_radfields_download(acc: fegpu_radfields_t, fields: *mut f64, n: i64) -> fegpu_status {
    guard(|| {
        let a = accumulator(acc)?;
        let (n_s, n_rhs) = a.sizes();
        let want = 6 * n_s * n_rhs;
        let out = if n != want as i64 {
            Err(Error::size(format!("n = {n}: fields of n_s = {n_s} and n_rhs = {n_rhs} hold {want} complex elements")))
        } else {
            complex_out(fields, want, "fields")
        };
        a.download(out)
    })
}

/// Zeroes the fields and the excluded count, for the next FE-IIEE iteration.
#[no_mangle]
pub extern "C" fn fegpu_radfields_reset(acc: fegpu_radfields_t) -> fegpu_status {
    guard(|| accumulator(acc)?.reset())
}

/// The accumulator's S points and right-hand sides (the fields are
/// 3 x 2 x n_s x n_rhs; currents given to it are 3 x 2 x n_p x n_rhs). Either
/// pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_radfields_shape(acc: fegpu_radfields_t, n_s: *mut i64, n_rhs: *mut i64) -> fegpu_status {
    guard(|| {
        let (s, r) = accumulator(acc)?.sizes();
        super::write_wanted([(n_s, s as i64, "n_s"), (n_rhs, r as i64, "n_rhs")])?;
        Ok(())
    })
}

/// The number of (S point, S' point) pairs skipped as coincident since the
/// creation or last reset (waits for queued work).
#[no_mangle]
pub unsafe extern "C" fn fegpu_radfields_excluded(acc: fegpu_radfields_t, count: *mut i64) -> fegpu_status {
    guard(|| {
        let out = out_param(count, "count")?;
        *out = accumulator(acc)?.excluded()? as i64;
        Ok(())
    })
}

/// Selects the kernel: FEGPU_RADFIELDS_AUTO (default), _DIRECT or _TILED.
/// Every choice gives the same fields to rounding.
#[no_mangle]
pub extern "C" fn fegpu_radfields_set_variant(acc: fegpu_radfields_t, variant: i32) -> fegpu_status {
    guard(|| {
        let kernel = match variant {
            FEGPU_RADFIELDS_AUTO => None,
            FEGPU_RADFIELDS_DIRECT => Some(Kernel::Direct),
            FEGPU_RADFIELDS_TILED => Some(Kernel::Tiled),
            _ => {
                return Err(Error::invalid(format!(
                    "variant = {variant}: expected FEGPU_RADFIELDS_AUTO (0), _DIRECT (1) or _TILED (2)"
                )))
            }
        };
        accumulator(acc)?.set_variant(kernel);
        Ok(())
    })
}

/// Destroys an accumulator (waiting for nothing: queued work is discarded with it).
#[no_mangle]
pub extern "C" fn fegpu_radfields_destroy(acc: fegpu_radfields_t) -> fegpu_status {
    guard(|| {
        #[cfg(feature = "mpi")]
        if registry::Kind::from_handle(acc) == Some(registry::Kind::DistRadFields) {
            return registry::remove::<crate::dist::DistRadFields>(acc, "acc");
        }
        registry::remove::<Accumulator>(acc, "acc")
    })
}

/// The one-call form: the fields (3, 2, n_s, n_rhs) radiated by all of S'
/// at once (n_p points), overwriting `fields`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_radfields_compute(
    ctx: fegpu_context_t,
    n_s: i64,
    s_points: *const f64,
    n_p: i64,
    p_points: *const f64,
    weights: *const f64,
    currents: *const f64,
    n_rhs: i64,
    k: *const f64,
    omega_mu: *const f64,
    fields: *mut f64,
) -> fegpu_status {
    guard(|| {
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (n_s, n_p, n_rhs) = (positive("n_s", n_s)?, positive("n_p", n_p)?, positive("n_rhs", n_rhs)?);
        let m = medium(k, omega_mu)?;
        let n_currents = element_count(element_count(n_p, 12)? / 2, n_rhs)?;
        let n_fields = element_count(element_count(n_s, 12)? / 2, n_rhs)?;
        let (ns3, np3) = (items(3, n_s, "s_points")?, items(3, n_p, "p_points")?);
        no_overlap(
            &[span(fields, 2 * n_fields, "fields")],
            &[
                span(s_points, ns3, "s_points"),
                span(p_points, np3, "p_points"),
                span(weights, n_p, "weights"),
                span(currents, 2 * n_currents, "currents"),
            ],
        )?;
        let src = Sources::new(
            n_p,
            n_rhs,
            host_in(p_points, np3, "p_points")?,
            host_in(weights, n_p, "weights")?,
            complex_in(currents, n_currents, "currents")?,
        )?;
        let out = complex_out(fields, n_fields, "fields")?;
        let a = Accumulator::new(vec![c], host_in(s_points, ns3, "s_points")?, n_rhs, m)?;
        a.accumulate(&src)?;
        a.download(out)
    })
}
