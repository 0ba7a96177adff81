//! C surface of distributed runs (built with the cargo feature `mpi`; the
//! header guards it with FEGPU_MPI). The communicator crosses as its
//! Fortran handle (`MPI_Fint`: `MPI_Comm_c2f(comm)` in C, or `fegpu_comm`
//! of fegpu_mpi.h; the integer of `use mpi`; `comm%MPI_VAL` of mpi_f08), so
//! the library's ABI does not depend on any MPI's `MPI_Comm` layout.
//!
//! Every function here is collective over the communicator: all its ranks
//! call it, with the same method, tolerance and iteration limit, and all
//! return the same status. A rank whose own arguments are refused gets its
//! message; the others get that rank's message prefixed with its number.

use super::registry::{self, Kind, Object};
use super::sparse::{fegpu_solve_info, gmres_of, method_of, precond_of, write_info};
use super::status::fegpu_status;
use super::{fegpu_array_t, fegpu_context_t, guard, host_in, out_param, write_text, write_wanted};
use crate::context::Context;
use crate::dist::{matrix::Rows, Comm, DistCsr, DistLattice, DistSolver};
use crate::error::{Error, Result};
use crate::sparse::solver::{outcome_status, Method, Precond, Settings};
use crate::sparse::Index;
use std::sync::Arc;

/// A distributed CSR matrix handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_dist_csr_t = u64;
/// A distributed solver handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_dist_solver_t = u64;

impl Object for DistCsr {
    const KIND: Kind = Kind::DistCsr;
}
impl Object for DistSolver {
    const KIND: Kind = Kind::DistSolver;
}
impl Object for DistLattice {
    const KIND: Kind = Kind::DistLattice;
}
impl Object for crate::dist::DistRadFields {
    const KIND: Kind = Kind::DistRadFields;
}

/// Creates this rank's context. Collective. `device` < 0 picks the rank's
/// index on its node modulo the visible devices (ranks spread over a
/// node's GPUs, several may share one); FEGPU_BACKEND and FEGPU_DEVICE
/// override as for `fegpu_context_create`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_context_create(
    comm: i32,
    backend: i32,
    device: i64,
    ctx: *mut fegpu_context_t,
) -> fegpu_status {
    guard(|| {
        let c = Comm::from_fortran(comm)?;
        let out = out_param(ctx, "ctx");
        let made = out.and_then(|out| {
            let device = crate::dist::device_for(&c, device);
            let context = Context::new(super::context::request_of(backend)?, device)?;
            Ok((out, context))
        });
        let (out, context) = c.agree(made)?;
        *out = registry::insert(Arc::new(context), 0);
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)] // the C signature's arguments
unsafe fn create<I: Index>(
    ctx: fegpu_context_t,
    comm: i32,
    n_global: i64,
    first_row: i64,
    nrows: i64,
    row_ptr: *const I,
    col_ind: *const I,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_dist_csr_t,
) -> fegpu_status {
    guard(|| {
        let c = Arc::new(Comm::from_fortran(comm)?);
        // the rank's own arguments; a refusal still takes part in the collective steps
        let args = (|| {
            let out = out_param(a, "a")?;
            let context = registry::get::<Context>(ctx, "ctx")?;
            let n = usize::try_from(nrows).map_err(|_| Error::invalid(format!("nrows = {nrows}: must be >= 0")))?;
            if index_base != 0 && index_base != 1 {
                return Err(Error::invalid(format!("index_base = {index_base}: must be 0 or 1")));
            }
            let rp = host_in(row_ptr, n + 1, "row_ptr")?;
            let nnz = usize::try_from(rp[n].to_i64().saturating_sub(index_base as i64))
                .map_err(|_| Error::invalid(format!("row_ptr[nrows] = {}: below index_base", rp[n].to_i64())))?;
            Ok((out, context, rp, host_in(col_ind, nnz, "col_ind")?, host_in(values, nnz, "values")?))
        })();
        let (out, context, rp, ci, v) = c.agree(args)?;
        let rows = Rows { n_global, first_row, row_ptr: rp, col: ci, values: v, base: index_base as i64 };
        let m = DistCsr::new(c, context, &rows)?;
        *out = registry::insert(Arc::new(m), ctx);
        Ok(())
    })
}

/// Creates a distributed matrix from this rank's rows, int32 indices.
/// Collective. The rank owns the `nrows` global rows from `first_row` on
/// (index_base 0 or 1, as its column indices); the ranks' ranges, in rank
/// order, must tile 1..n_global (or 0..n_global-1) with no gap or overlap;
/// a rank may own none (nrows = 0). `row_ptr` has nrows + 1 entries;
/// `col_ind` holds global column numbers. fegpu splits the owned and halo
/// columns and builds the halo exchange once.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_csr_create_i32(
    ctx: fegpu_context_t,
    comm: i32,
    n_global: i64,
    first_row: i64,
    nrows: i64,
    row_ptr: *const i32,
    col_ind: *const i32,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_dist_csr_t,
) -> fegpu_status {
    create::<i32>(ctx, comm, n_global, first_row, nrows, row_ptr, col_ind, values, index_base, a)
}

/// As `fegpu_dist_csr_create_i32`, with int64 indices.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_csr_create_i64(
    ctx: fegpu_context_t,
    comm: i32,
    n_global: i64,
    first_row: i64,
    nrows: i64,
    row_ptr: *const i64,
    col_ind: *const i64,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_dist_csr_t,
) -> fegpu_status {
    create::<i64>(ctx, comm, n_global, first_row, nrows, row_ptr, col_ind, values, index_base, a)
}

/// New values for the same rows, in this rank's original entry order
/// (`nnz` of them). Collective; a refused update changes no rank's values.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_csr_update_values(a: fegpu_dist_csr_t, values: *const f64, nnz: i64) -> fegpu_status {
    guard(|| {
        let m = registry::get::<DistCsr>(a, "a")?;
        let n = usize::try_from(nnz).map_err(|_| Error::invalid(format!("nnz = {nnz}: must be >= 0")));
        let v = m.comm.agree(n.and_then(|n| host_in(values, n, "values")))?;
        m.update_values(v)
    })
}

/// y = A x over this rank's rows (x and y: the rank's parts, arrays of
/// nrows; 0 on a rank owning no rows). Collective.
#[no_mangle]
pub extern "C" fn fegpu_dist_csr_spmv(a: fegpu_dist_csr_t, x: fegpu_array_t, y: fegpu_array_t) -> fegpu_status {
    guard(|| {
        let m = registry::get::<DistCsr>(a, "a")?;
        let args = (|| Ok((optional_array(x, "x")?, optional_array(y, "y")?)))();
        let (x, y) = m.comm.agree(args)?;
        m.spmv(x.as_deref(), y.as_deref())
    })
}

/// The global size and this rank's part: its first row (0-based), its
/// rows, and the neighbours it exchanges with. Any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_csr_info(
    a: fegpu_dist_csr_t,
    n_global: *mut i64,
    first_row: *mut i64,
    nrows: *mut i64,
    neighbours: *mut i64,
) -> fegpu_status {
    guard(|| {
        let m = registry::get::<DistCsr>(a, "a")?;
        let fields = [
            (n_global, m.n_global, "n_global"),
            (first_row, m.first_row(), "first_row"),
            (nrows, m.local_rows(), "nrows"),
            (neighbours, m.neighbours().0, "neighbours"),
        ];
        write_wanted(fields.map(|(p, v, name)| (p, v as i64, name)))
    })
}

/// A description of the matrix into `buf` (as `fegpu_solver_describe`):
/// ranks, this rank's rows and halo, the exchange path.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_csr_describe(
    a: fegpu_dist_csr_t,
    buf: *mut libc::c_char,
    len: i64,
    needed: *mut i64,
) -> fegpu_status {
    guard(|| write_text(&registry::get::<DistCsr>(a, "a")?.describe(), buf, len, needed))
}

/// Destroys a distributed matrix (this rank's part; not collective).
#[no_mangle]
pub extern "C" fn fegpu_dist_csr_destroy(a: fegpu_dist_csr_t) -> fegpu_status {
    guard(|| registry::remove::<DistCsr>(a, "a"))
}

/// Creates a distributed solver: `method` FEGPU_METHOD_CG, _BICGSTAB,
/// _GMRES (restart 30) or _CGS (the same on every rank; BiCG is refused), `precond` FEGPU_PRECOND_NONE, _JACOBI (Jacobi of the
/// global matrix), _ILU0 (block-Jacobi ILU(0): each rank factors its
/// diagonal block; _ILU0_JACOBI and _ILU0_MULTICOLOUR the same with those
/// sweeps) or _AMG (AMG of each rank's diagonal block, default options).
/// Collective.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_solver_create(
    a: fegpu_dist_csr_t,
    method: i32,
    precond: i32,
    s: *mut fegpu_dist_solver_t,
) -> fegpu_status {
    guard(|| {
        let m = registry::get::<DistCsr>(a, "a")?;
        let args = (|| Ok((out_param(s, "s")?, method_of(method)?, precond_of(precond)?)))();
        create_solver(m, registry::owner_of(a).unwrap_or(0), args)
    })
}

/// As `fegpu_dist_solver_create` with FEGPU_METHOD_GMRES restarted every
/// `restart` iterations (the same on every rank). Collective.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_solver_create_gmres(
    a: fegpu_dist_csr_t,
    precond: i32,
    restart: i32,
    s: *mut fegpu_dist_solver_t,
) -> fegpu_status {
    guard(|| {
        let m = registry::get::<DistCsr>(a, "a")?;
        let args = (|| Ok((out_param(s, "s")?, gmres_of(restart)?, precond_of(precond)?)))();
        create_solver(m, registry::owner_of(a).unwrap_or(0), args)
    })
}

/// The arguments agreed on every rank, then the collective creation.
fn create_solver(m: Arc<DistCsr>, owner: u64, args: Result<(&mut fegpu_dist_solver_t, Method, Precond)>) -> Result<()> {
    let (out, method, precond) = m.comm.agree(args)?;
    let solver = DistSolver::new(m, method, precond, Settings::from_env())?;
    *out = registry::insert(Arc::new(solver), owner);
    Ok(())
}

/// Solves A x = b over the ranks: b and x are this rank's parts (arrays of
/// its nrows; 0 on a rank owning no rows), x the initial guess on entry.
/// Collective; tol and maxit the same on every rank. Returns what
/// `fegpu_solver_solve` returns, the same status and `info` on every rank.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_solver_solve(
    s: fegpu_dist_solver_t,
    b: fegpu_array_t,
    x: fegpu_array_t,
    tol: f64,
    maxit: i64,
    info: *mut fegpu_solve_info,
) -> fegpu_status {
    guard(|| {
        let t = std::time::Instant::now();
        let sv = registry::get::<DistSolver>(s, "s")?;
        let args = (|| Ok((optional_array(b, "b")?, optional_array(x, "x")?)))();
        let (b, x) = sv.a.comm.agree(args)?;
        let (outcome, true_rel, setup) = sv.solve(b.as_deref(), x.as_deref(), tol, maxit)?;
        write_info(info, &outcome, true_rel, setup, t);
        outcome_status(&outcome)
    })
}

/// The relative residual after each iteration of the last solve (the same
/// on every rank); as `fegpu_solver_history`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_solver_history(
    s: fegpu_dist_solver_t,
    history: *mut f64,
    len: i64,
    count: *mut i64,
) -> fegpu_status {
    guard(|| super::sparse::copy_history(&registry::get::<DistSolver>(s, "s")?.history(), history, len, count))
}

/// Destroys a distributed solver (this rank's part; not collective).
#[no_mangle]
pub extern "C" fn fegpu_dist_solver_destroy(s: fegpu_dist_solver_t) -> fegpu_status {
    guard(|| registry::remove::<DistSolver>(s, "s"))
}

/// An array argument that a rank owning no rows may leave 0.
fn optional_array(h: fegpu_array_t, arg: &str) -> Result<Option<Arc<crate::array::Array>>> {
    if h == 0 {
        return Ok(None);
    }
    registry::get::<crate::array::Array>(h, arg).map(Some)
}

/// Creates this rank's part of an nx x ny x nz D3Q19 lattice split over the
/// ranks in z-slabs: the rank owns the `nz_own` planes from plane `z_first`
/// (1-based; the slabs, in rank order, must tile 1..nz, each at least one
/// plane). The other arguments are `fegpu_lattice_create`'s, the same on
/// every rank. Collective. The handle is a `fegpu_lattice_t`: every
/// fegpu_lattice_* call takes it, collectively where it changes the
/// populations or settings (set_*, init_equilibrium, step, body_force),
/// on this rank alone where it reads (get_populations, fields), and the
/// arrays are this rank's planes (flags nx*ny*nz_own, fields of planes
/// within z_first..z_first+nz_own-1). Each step swaps the boundary planes
/// with the neighbouring ranks.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_lattice_create(
    ctx: fegpu_context_t,
    comm: i32,
    nx: i64,
    ny: i64,
    nz: i64,
    z_first: i64,
    nz_own: i64,
    dtype: i32,
    tau: f64,
    periodic: i32,
    lat: *mut super::lbm::fegpu_lattice_t,
) -> fegpu_status {
    guard(|| {
        let c = Arc::new(Comm::from_fortran(comm)?);
        let args = (|| Ok((out_param(lat, "lat")?, registry::get::<Context>(ctx, "ctx")?, super::lbm::storage_of(dtype)?)))();
        let (out, context, storage) = c.agree(args)?;
        let l = DistLattice::new(c, context, [nx, ny, nz], (z_first.saturating_sub(1), nz_own), storage, tau, periodic)?;
        *out = registry::insert(Arc::new(l), ctx);
        Ok(())
    })
}

/// A description of a split lattice into `buf` (as `fegpu_solver_describe`):
/// the ranks, this rank's planes, the bytes swapped and the exchange path.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_lattice_describe(
    lat: super::lbm::fegpu_lattice_t,
    buf: *mut libc::c_char,
    len: i64,
    needed: *mut i64,
) -> fegpu_status {
    guard(|| write_text(&registry::get::<DistLattice>(lat, "lat")?.describe(), buf, len, needed))
}

/// Creates this rank's part of a rad_fields accumulator whose S points are
/// split over the ranks: every rank passes all n_s S points `points`
/// (3, n_s), n_rhs, `k` and `omega_mu` (the same on every rank) and
/// accumulates a contiguous slice of them (its rank's share) on its own
/// device. Collective. The handle is a `fegpu_radfields_t`: every
/// fegpu_radfields_* call takes it; each rank passes every batch of S'
/// sources to fegpu_radfields_accumulate (not collective), and
/// fegpu_radfields_download (collective) gives every rank the fields of
/// all n_s points, as fegpu_radfields_excluded gives every rank's count.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_dist_radfields_create(
    ctx: fegpu_context_t,
    comm: i32,
    n_s: i64,
    points: *const f64,
    n_rhs: i64,
    k: *const f64,
    omega_mu: *const f64,
    acc: *mut super::radfields::fegpu_radfields_t,
) -> fegpu_status {
    guard(|| {
        let c = Arc::new(Comm::from_fortran(comm)?);
        let args = (|| {
            let out = out_param(acc, "acc")?;
            let context = registry::get::<Context>(ctx, "ctx")?;
            let (p, n_rhs, medium) = super::radfields::accumulator_args(n_s, points, n_rhs, k, omega_mu)?;
            Ok((out, context, p, n_rhs, medium))
        })();
        let (out, context, p, n_rhs, medium) = c.agree(args)?;
        let a = crate::dist::DistRadFields::new(c, context, p, n_rhs, medium)?;
        *out = registry::insert(Arc::new(a), ctx);
        Ok(())
    })
}

/// A description of a split accumulator into `buf` (as `fegpu_solver_describe`).
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_radfields_describe(
    acc: super::radfields::fegpu_radfields_t,
    buf: *mut libc::c_char,
    len: i64,
    needed: *mut i64,
) -> fegpu_status {
    guard(|| write_text(&registry::get::<crate::dist::DistRadFields>(acc, "acc")?.describe(), buf, len, needed))
}

/// Creates this rank's part of an element-by-element CG over the ranks, as
/// a multi-GPU FEM code partitions its mesh: `fem` is the element set of
/// this rank's elements over its own (local) nodes, `global_node` the
/// global number of each of its n_nodes nodes (counted from index_base),
/// and x[dofs[i]] = values[i] (i < n_fixed; local dofs, dof = local node *
/// dofs per node + component, counted from index_base) the Dirichlet
/// conditions on this rank's dofs. A node several ranks hold is summed
/// over them: a condition given on one of them holds on all (two different
/// values are refused). Collective. The handle is a `fegpu_ebe_t`:
/// fegpu_fem_ebe_solve(ebe, b, x, ...) is then collective too, b holding
/// this rank's load contributions (what its own elements and loads give;
/// the ranks' contributions at a shared node are summed, so a point load
/// on a shared node is added on one rank) and x the initial guess (the
/// lowest rank holding a node gives its value) and, on return, the
/// solution at every one of this rank's nodes. Every rank needs at least
/// one element.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature's arguments
pub unsafe extern "C" fn fegpu_dist_ebe_create(
    fem: super::fem::fegpu_fem_t,
    comm: i32,
    n_nodes: i64,
    global_node: *const i64,
    index_base: i32,
    n_fixed: i64,
    dofs: *const i64,
    values: *const f64,
    on_the_fly: i32,
    ebe: *mut super::fem::fegpu_ebe_t,
) -> fegpu_status {
    guard(|| {
        let c = Arc::new(Comm::from_fortran(comm)?);
        let args = (|| {
            let out = out_param(ebe, "ebe")?;
            let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
            let nodes = crate::error::positive("n_nodes", n_nodes)?;
            let global_node = host_in(global_node, nodes, "global_node")?;
            let dofs = super::index_list(n_fixed, dofs, index_base, "n_fixed", "dofs")?;
            let values = host_in(values, dofs.len(), "values")?;
            Ok((out, set, global_node, dofs, values))
        })();
        let (out, set, global_node, dofs, values) = c.agree(args)?;
        let conditions = (dofs, index_base as i64, values);
        let solver = crate::dist::ebe::create(c, set, global_node, index_base as i64, conditions, on_the_fly != 0)?;
        *out = registry::insert(Arc::new(solver), registry::owner_of(fem).unwrap_or(0));
        Ok(())
    })
}

/// A description of a distributed element-by-element solver into `buf`
/// (as `fegpu_solver_describe`): the ranks, this rank's owned and shared
/// dofs, the values exchanged per product and the exchange path.
#[no_mangle]
pub unsafe extern "C" fn fegpu_dist_ebe_describe(
    ebe: super::fem::fegpu_ebe_t,
    buf: *mut libc::c_char,
    len: i64,
    needed: *mut i64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<crate::fem::ebe::EbeSolver>(ebe, "ebe")?;
        let shared = s.shared.as_ref().ok_or_else(|| Error::invalid("ebe is a one-process solver (fegpu_fem_ebe_create)"))?;
        write_text(&shared.describe(), buf, len, needed)
    })
}
