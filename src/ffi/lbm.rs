//! C surface of the D3Q19 lattice-Boltzmann lattice.

use super::array::{FEGPU_DTYPE_F32, FEGPU_DTYPE_F64};
use super::registry;
use super::status::fegpu_status;
use super::{fegpu_context_t, guard, host_in, host_out, items, no_overlap, out_param, span, write_wanted};
use crate::error::{non_negative, Error};
use crate::lbm::{Lattice, LatticeApi, Precision, Q};
use std::sync::Arc;

/// Site flag: a fluid site, collided and streamed every step.
pub const FEGPU_FLUID: u8 = 0;
/// Site flag: a resting wall (halfway bounce-back).
pub const FEGPU_WALL: u8 = 1;
/// Site flag: a wall moving with the lattice's wall velocity (halfway bounce-back with Ladd's term).
pub const FEGPU_MOVING_WALL: u8 = 2;
/// Site flag: a velocity boundary (an inlet): a wall moving with the site's
/// own velocity from fegpu_lattice_set_boundary_values.
pub const FEGPU_VELOCITY_BC: u8 = 3;
/// Site flag: a pressure boundary (an outlet): anti-bounce-back towards the
/// equilibrium of the site's own density from fegpu_lattice_set_boundary_values.
pub const FEGPU_PRESSURE_BC: u8 = 4;

/// Periodic-direction bits.
pub const FEGPU_PERIODIC_X: i32 = 1;
pub const FEGPU_PERIODIC_Y: i32 = 2;
pub const FEGPU_PERIODIC_Z: i32 = 4;

// The flags and bits are the lattice's own data format: they must agree.
const _: () = assert!(
    FEGPU_FLUID == crate::lbm::FLUID
        && FEGPU_WALL == crate::lbm::WALL
        && FEGPU_MOVING_WALL == crate::lbm::MOVING_WALL
        && FEGPU_VELOCITY_BC == crate::lbm::VELOCITY_BC
        && FEGPU_PRESSURE_BC == crate::lbm::PRESSURE_BC
        && FEGPU_PERIODIC_X == crate::lbm::PERIODIC_X
        && FEGPU_PERIODIC_Y == crate::lbm::PERIODIC_Y
        && FEGPU_PERIODIC_Z == crate::lbm::PERIODIC_Z
);

/// Lattice storage only: populations in IEEE half precision (f_i − w_i kept,
/// arithmetic in f32).
pub const FEGPU_DTYPE_F16: i32 = 3;

/// A lattice handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_lattice_t = u64;

/// The lattice behind a handle: one process's, or (in the MPI build) one
/// split over ranks by fegpu_dist_lattice_create, whose calls are collective.
fn lattice(h: fegpu_lattice_t) -> crate::error::Result<Arc<dyn LatticeApi>> {
    #[cfg(feature = "mpi")]
    if registry::Kind::from_handle(h) == Some(registry::Kind::DistLattice) {
        return Ok(registry::get::<crate::dist::DistLattice>(h, "lat")?);
    }
    Ok(registry::get::<Lattice>(h, "lat")?)
}

/// The lattice storage a dtype names.
pub(super) fn storage_of(dtype: i32) -> crate::error::Result<Precision> {
    match dtype {
        FEGPU_DTYPE_F16 => Ok(Precision::F16),
        FEGPU_DTYPE_F32 => Ok(Precision::F32),
        FEGPU_DTYPE_F64 => Ok(Precision::F64),
        d => {
            Err(Error::invalid(format!("dtype = {d}: expected FEGPU_DTYPE_F16 (3), FEGPU_DTYPE_F32 (1) or FEGPU_DTYPE_F64 (2)")))
        }
    }
}

/// Creates an nx x ny x nz D3Q19 lattice storing populations as `dtype`
/// (FEGPU_DTYPE_F16, FEGPU_DTYPE_F32 or FEGPU_DTYPE_F64; f16 and f32 compute in f32), BGK relaxation time `tau` (> 0.5),
/// periodic in the directions of the `periodic` bits (FEGPU_PERIODIC_X|Y|Z;
/// the other faces are resting walls). Every site starts fluid, at rest, density 1.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_create(
    ctx: fegpu_context_t,
    nx: i64,
    ny: i64,
    nz: i64,
    dtype: i32,
    tau: f64,
    periodic: i32,
    lat: *mut fegpu_lattice_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(lat, "lat")?;
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let l = Lattice::new(c, [nx, ny, nz], storage_of(dtype)?, tau, periodic)?;
        *out = registry::insert(Arc::new(l), ctx);
        Ok(())
    })
}

/// Sets every site's flag from `flags` (nx*ny*nz bytes, x fastest): 0 fluid,
/// 1 resting wall, 2 moving wall (velocity from fegpu_lattice_set_wall_velocity),
/// 3 velocity boundary, 4 pressure boundary (values from
/// fegpu_lattice_set_boundary_values; until then density 1, velocity 0).
/// Walls use halfway bounce-back; a non-fluid site's populations are never changed.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_set_flags(lat: fegpu_lattice_t, flags: *const u8, n: i64) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        l.set_flags(host_in(flags, non_negative("n", n)?, "flags")?)
    })
}

/// The prescribed values of the open boundary sites (flags 3 and 4), 4 a
/// site, (rho, ux, uy, uz), the sites in increasing order (x fastest, as
/// they come in the flag array): a velocity site uses u, a pressure site
/// rho (pressure rho / 3). n = 4 * the number of such sites. Every site's
/// velocity must lie below the lattice's speed of sound, |u| < 1/sqrt(3).
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_set_boundary_values(lat: fegpu_lattice_t, values: *const f64, n: i64) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        l.set_boundary_values(host_in(values, non_negative("n", n)?, "values")?)
    })
}

/// The body force per unit volume (Guo forcing), applied to every fluid site.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_set_force(lat: fegpu_lattice_t, fx: f64, fy: f64, fz: f64) -> fegpu_status {
    guard(|| lattice(lat)?.set_force([fx, fy, fz]))
}

/// The velocity of the moving-wall sites (flag 2), |u| < 1/sqrt(3) (the
/// lattice's speed of sound; about 0.1 for accuracy).
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_set_wall_velocity(lat: fegpu_lattice_t, ux: f64, uy: f64, uz: f64) -> fegpu_status {
    guard(|| lattice(lat)?.set_wall_velocity([ux, uy, uz]))
}

/// Selects the TRT collision with magic parameter `magic` > 0 (3/16: halfway
/// bounce-back walls exactly midway in Poiseuille flow; 1/4: most stable);
/// 0 returns to BGK (the default).
#[no_mangle]
pub extern "C" fn fegpu_lattice_set_trt(lat: fegpu_lattice_t, magic: f64) -> fegpu_status {
    guard(|| lattice(lat)?.set_trt(magic))
}

/// Puts every site at the equilibrium of density rho > 0 and velocity
/// (ux, uy, uz), |u| < 1/sqrt(3).
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_init_equilibrium(
    lat: fegpu_lattice_t,
    rho: f64,
    ux: f64,
    uy: f64,
    uz: f64,
) -> fegpu_status {
    guard(|| lattice(lat)?.init_equilibrium(rho, [ux, uy, uz]))
}

/// Loads populations in the serial code's layout: f(0:18, nx, ny, nz), f64,
/// direction fastest, Palabos D3Q19 order (direction i+9 opposite i), after
/// streaming. n = 19*nx*ny*nz.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_set_populations(lat: fegpu_lattice_t, f: *const f64, n: i64) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        l.set_populations(host_in(f, non_negative("n", n)?, "f")?)
    })
}

/// Reads the populations back in the layout of fegpu_lattice_set_populations.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_get_populations(lat: fegpu_lattice_t, f: *mut f64, n: i64) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        l.populations(host_out(f, non_negative("n", n)?, "f")?)
    })
}

/// Runs `steps` fused collide-and-stream steps on the device without host
/// involvement; returns once they are queued (a later read waits for them).
/// At most 2^31 - 1 steps a call (hours of stepping even for a tiny
/// lattice): a larger count, an uninitialised variable most likely, would
/// hold the caller and the lattice for days, so it is refused.
#[no_mangle]
pub extern "C" fn fegpu_lattice_step(lat: fegpu_lattice_t, steps: i64) -> fegpu_status {
    guard(|| {
        if !(0..=i64::from(i32::MAX)).contains(&steps) {
            return Err(Error::invalid(format!("steps = {steps}: must be from 0 to 2147483647 (2^31 - 1) a call")));
        }
        lattice(lat)?.step(steps as u64)
    })
}

/// The lattice's size: nx, ny, nz (a split lattice's whole size). Any of
/// the pointers may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_shape(lat: fegpu_lattice_t, nx: *mut i64, ny: *mut i64, nz: *mut i64) -> fegpu_status {
    guard(|| {
        let [x, y, z] = lattice(lat)?.dims();
        write_wanted([(nx, x as i64, "nx"), (ny, y as i64, "ny"), (nz, z as i64, "nz")])?;
        Ok(())
    })
}

/// Density rho(nx, ny, z_count) and velocity u(3, nx, ny, z_count) of the
/// z-slab starting at plane z_first (1-based, as in Fortran); wall, moving
/// wall and open boundary sites (flags 1 to 4) report 0. The whole lattice: z_first = 1, z_count = nz.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_fields(
    lat: fegpu_lattice_t,
    z_first: i64,
    z_count: i64,
    rho: *mut f64,
    u: *mut f64,
) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        // the message names the 1-based plane the caller gave, not the 0-based one checked
        let (_, count) = l.slab(z_first.saturating_sub(1), z_count).map_err(|e| {
            let why = e.message.split_once(": ").map_or(e.message.as_str(), |p| p.1);
            Error::new(e.kind, format!("z_first = {z_first} (counted from 1), z_count = {z_count}: {why}"))
        })?;
        let nu = items(3, count, "u")?;
        no_overlap(&[span(rho, count, "rho"), span(u, nu, "u")], &[])?;
        let (rho, u) = (host_out(rho, count, "rho")?, host_out(u, nu, "u")?);
        l.fields(z_first - 1, z_count, rho, u)
    })
}

/// The body whose force fegpu_lattice_body_force reports: `body`, one byte
/// per site (nx*ny*nz, x fastest, as the flags), nonzero where the site
/// belongs to it (a sphere, a cylinder, an obstacle). Its wall sites feel
/// the force; fluid and open boundary sites in it are passed over.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_set_body(lat: fegpu_lattice_t, body: *const u8, n: i64) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        l.set_body(host_in(body, non_negative("n", n)?, "body")?)
    })
}

/// force(3): the force the fluid exerts on the body (fegpu_lattice_set_body)
/// after the last step, by momentum exchange over the links from fluid
/// sites into its wall sites (lattice units: drag along the flow, lift
/// across it). Waits for the queued steps.
#[no_mangle]
pub unsafe extern "C" fn fegpu_lattice_body_force(lat: fegpu_lattice_t, force: *mut f64) -> fegpu_status {
    guard(|| {
        let l = lattice(lat)?;
        let out = host_out(force, 3, "force")?;
        out.copy_from_slice(&l.body_force()?);
        Ok(())
    })
}

/// Destroys a lattice (a split lattice: this rank's part; not collective).
#[no_mangle]
pub extern "C" fn fegpu_lattice_destroy(lat: fegpu_lattice_t) -> fegpu_status {
    guard(|| {
        #[cfg(feature = "mpi")]
        if registry::Kind::from_handle(lat) == Some(registry::Kind::DistLattice) {
            return registry::remove::<crate::dist::DistLattice>(lat, "lat");
        }
        registry::remove::<Lattice>(lat, "lat")
    })
}

/// Directions per site (19), for sizing population arrays.
#[no_mangle]
pub extern "C" fn fegpu_lattice_directions() -> i32 {
    Q as i32
}
