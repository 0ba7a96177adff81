//! C surface of CSR matrices, SpMV, vector operations and the solvers.

use super::registry;
use super::status::fegpu_status;
use super::{fegpu_array_t, fegpu_context_t, guard, host_in, host_out, index_list, no_overlap, out_param, span, write_wanted};
use crate::error::{positive, Error, Result};
use crate::sparse::solver::{self, Method, Precond, Solver};
use crate::sparse::{self, mm, Csr, Index};
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::Arc;

pub const FEGPU_METHOD_CG: i32 = 1;
pub const FEGPU_METHOD_BICGSTAB: i32 = 2;
/// GMRES(30), right-preconditioned (`fegpu_solver_create_gmres` sets the restart).
pub const FEGPU_METHOD_GMRES: i32 = 3;
/// BiCG (products with A^T and M^-T; not with AMG).
pub const FEGPU_METHOD_BICG: i32 = 4;
/// CGS, conjugate gradients squared.
pub const FEGPU_METHOD_CGS: i32 = 5;
pub const FEGPU_PRECOND_NONE: i32 = 0;
pub const FEGPU_PRECOND_JACOBI: i32 = 1;
pub const FEGPU_PRECOND_ILU0: i32 = 2;
/// Smoothed-aggregation AMG with the default options (fegpu_amg_options_default).
pub const FEGPU_PRECOND_AMG: i32 = 3;
/// ILU(0)'s factors with each triangular solve approximated by two Jacobi
/// sweeps (AmgX's and hypre's iterative ILU): no sweep waits on another row,
/// so an application costs a few SpMVs; more iterations than exact ILU(0).
pub const FEGPU_PRECOND_ILU0_JACOBI: i32 = 4;
/// ILU(0) of the matrix reordered by a colouring of its graph (rows of one
/// colour not coupled): each triangular solve is a pass a colour (2 on a
/// 7-point grid), so an application costs about one SpMV; more iterations
/// than ILU(0) in the caller's order, fewer than none. CSR matrices; not BiCG.
pub const FEGPU_PRECOND_ILU0_MULTICOLOUR: i32 = 5;
/// Multicolour ILU(0) applied split by Eisenstat's trick: the method
/// iterates on L^-1 A U^-1, one pass over each triangle in place of M^-1
/// and A apart (BiCGSTAB on a 7-point 128^3 grid, H100: 0.44 ms an
/// iteration, against 0.62 with M^-1 and A apart and 0.29 unpreconditioned).
/// Needs ILU(0) to leave A's off-diagonal entries unchanged (a graph without
/// triangles: 7-point and 5-point grids) and BiCGSTAB, CGS or GMRES; the
/// stopping test is on the caller's true residual. One process.
pub const FEGPU_PRECOND_ILU0_MULTICOLOUR_SPLIT: i32 = 6;
/// AMG smoother: chosen from the matrix (Chebyshev if symmetric, else l1-Jacobi).
pub const FEGPU_SMOOTHER_AUTO: i32 = 0;
pub const FEGPU_SMOOTHER_CHEBYSHEV: i32 = 1;
pub const FEGPU_SMOOTHER_L1_JACOBI: i32 = 2;
/// Symmetric Gauss-Seidel in the rows' order (pyamg's smoother): fewest
/// iterations where the material jumps or convection dominates; each sweep
/// is an exact triangular solve, several SpMVs on the device.
pub const FEGPU_SMOOTHER_GAUSS_SEIDEL: i32 = 3;
/// AMG cycle: each coarse level visited once (the default).
pub const FEGPU_CYCLE_V: i32 = 0;
/// Each coarse level but a dense coarsest visited twice: fewer iterations
/// where coarse levels are weak (layered high-contrast media), each dearer.
pub const FEGPU_CYCLE_W: i32 = 1;
/// The W-cycle's second visits only on levels with at most a quarter of the
/// nonzeros of the level above; the V-cycle's single visit elsewhere.
pub const FEGPU_CYCLE_HYBRID: i32 = 2;
/// AMG aggregation: pyamg's sequential sweep on the host (the default).
pub const FEGPU_AGGREGATION_GREEDY: i32 = 0;
/// Roots chosen in parallel rounds, the same aggregates on the host and the
/// device; on the device a scalar system's whole structure is built there,
/// for a single solve from scratch (a few more iterations).
pub const FEGPU_AGGREGATION_PARALLEL: i32 = 1;

pub(crate) fn method_of(c: i32) -> Result<Method> {
    match c {
        FEGPU_METHOD_CG => Ok(Method::Cg),
        FEGPU_METHOD_BICGSTAB => Ok(Method::Bicgstab),
        FEGPU_METHOD_GMRES => Ok(Method::Gmres { restart: Method::DEFAULT_RESTART }),
        FEGPU_METHOD_BICG => Ok(Method::Bicg),
        FEGPU_METHOD_CGS => Ok(Method::Cgs),
        _ => Err(Error::invalid(format!(
            "method = {c}: expected FEGPU_METHOD_CG (1), _BICGSTAB (2), _GMRES (3), _BICG (4) or _CGS (5)"
        ))),
    }
}

/// GMRES restarted every `restart` iterations (at least 1).
pub(crate) fn gmres_of(restart: i32) -> Result<Method> {
    if !(1..=Method::MAX_RESTART as i32).contains(&restart) {
        let max = Method::MAX_RESTART;
        return Err(Error::invalid(format!("restart = {restart}: must be 1 to {max} (20 to 200 are usual)")));
    }
    Ok(Method::Gmres { restart: restart as usize })
}

pub(crate) fn precond_of(c: i32) -> Result<Precond> {
    match c {
        FEGPU_PRECOND_NONE => Ok(Precond::None),
        FEGPU_PRECOND_JACOBI => Ok(Precond::Jacobi),
        FEGPU_PRECOND_ILU0 => Ok(Precond::Ilu0),
        FEGPU_PRECOND_AMG => Ok(Precond::Amg),
        FEGPU_PRECOND_ILU0_JACOBI => Ok(Precond::Ilu0Jacobi { sweeps: Precond::DEFAULT_JACOBI_SWEEPS }),
        FEGPU_PRECOND_ILU0_MULTICOLOUR => Ok(Precond::Ilu0Multicolour { split: false }),
        FEGPU_PRECOND_ILU0_MULTICOLOUR_SPLIT => Ok(Precond::Ilu0Multicolour { split: true }),
        _ => Err(Error::invalid(format!(
            "precond = {c}: expected FEGPU_PRECOND_NONE (0), _JACOBI (1), _ILU0 (2), _AMG (3), _ILU0_JACOBI (4), _ILU0_MULTICOLOUR (5) or _ILU0_MULTICOLOUR_SPLIT (6)"
        ))),
    }
}

/// A CSR matrix handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_csr_t = u64;
/// A solver handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_solver_t = u64;

/// What a solve did; filled whether or not it converged.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fegpu_solve_info {
    /// Iterations taken.
    pub iterations: i64,
    /// ||r|| / ||b|| of the iteration's own residual at the end.
    pub relative_residual: f64,
    /// ||b - A x|| / ||b|| recomputed from the returned x.
    pub true_relative_residual: f64,
    /// Seconds spent (re)building the preconditioner in this call (0 if reused).
    pub setup_seconds: f64,
    /// Seconds of the whole call.
    pub solve_seconds: f64,
}

/// What a user tunes in the AMG preconditioner; fill it with
/// `fegpu_amg_options_default` and change fields.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fegpu_amg_options {
    /// Strength threshold theta in [0, 1]: j is a strong neighbour of i when
    /// |a_ij| >= theta sqrt(|a_ii a_jj|) (block norms for block_size > 1). Default 0.
    pub strength: f64,
    /// FEGPU_SMOOTHER_AUTO (default), _CHEBYSHEV, _L1_JACOBI or _GAUSS_SEIDEL.
    pub smoother: i32,
    /// Chebyshev degree or l1-Jacobi sweeps, 1 to 16; symmetric Gauss-Seidel
    /// sweeps, 1 to 8 (0: 2, or 1 for Gauss-Seidel).
    pub sweeps: i32,
    /// Rows at which coarsening stops; the coarsest level is inverted densely
    /// on the host, O(n^3): well under a second at the default 256, about 6 s
    /// at 2,048 and a minute at 4,096 on one core. A coarsest level above
    /// 4,096 rows (max_levels reached, or coarsening stalled) is smoothed
    /// instead, which fegpu_solver_describe reports. Default 256.
    pub coarsest: i64,
    /// At most this many levels. Default 20.
    pub max_levels: i64,
    /// 1: smoothed aggregation (default); 0: plain aggregation (P = tentative).
    pub smooth_prolongator: i32,
    /// Unknowns per node, numbered node by node (3 for 3-D elasticity). Default 1.
    pub block_size: i32,
    /// 1: the V-cycle reads its matrices' values rounded to f32 (a third fewer
    /// bytes a nonzero; vectors, setup and the Krylov method stay f64); 0 (default): f64.
    pub f32_cycle: i32,
    /// FEGPU_CYCLE_V (default), FEGPU_CYCLE_W or FEGPU_CYCLE_HYBRID.
    pub cycle: i32,
    /// FEGPU_AGGREGATION_GREEDY (default) or FEGPU_AGGREGATION_PARALLEL.
    pub aggregation: i32,
}

impl Default for fegpu_amg_options {
    fn default() -> Self {
        let o = crate::amg::Options::default();
        fegpu_amg_options {
            strength: o.strength,
            smoother: FEGPU_SMOOTHER_AUTO,
            sweeps: 0,
            coarsest: o.coarsest as i64,
            max_levels: o.max_levels as i64,
            smooth_prolongator: 1,
            block_size: 1,
            f32_cycle: 0,
            cycle: FEGPU_CYCLE_V,
            aggregation: FEGPU_AGGREGATION_GREEDY,
        }
    }
}

impl fegpu_amg_options {
    fn options(&self) -> Result<crate::amg::Options> {
        use crate::amg::Smoother;
        let steps = match self.sweeps {
            0 => Smoother::default_steps(self.smoother == FEGPU_SMOOTHER_GAUSS_SEIDEL),
            s @ 1..=8 => s as usize,
            s @ 9..=16 if self.smoother != FEGPU_SMOOTHER_GAUSS_SEIDEL => s as usize,
            s => {
                let msg = format!("options.sweeps = {s}: must be 0 (default) or 1 to 16 (Gauss-Seidel: 1 to 8 sweeps)");
                return Err(Error::invalid(msg));
            }
        };
        let smoother = match self.smoother {
            FEGPU_SMOOTHER_AUTO => None,
            FEGPU_SMOOTHER_CHEBYSHEV => Some(Smoother::Chebyshev { degree: steps }),
            FEGPU_SMOOTHER_L1_JACOBI => Some(Smoother::L1Jacobi { sweeps: steps }),
            FEGPU_SMOOTHER_GAUSS_SEIDEL => Some(Smoother::GaussSeidel { sweeps: steps }),
            s => {
                return Err(Error::invalid(format!(
                    "options.smoother = {s}: expected FEGPU_SMOOTHER_AUTO (0), _CHEBYSHEV (1), _L1_JACOBI (2) \
                     or _GAUSS_SEIDEL (3)"
                )))
            }
        };
        let count = |name: &str, v: i64| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| Error::invalid(format!("options.{name} = {v}: must be >= 1")))
        };
        for (name, v) in [("smooth_prolongator", self.smooth_prolongator), ("f32_cycle", self.f32_cycle)] {
            if v != 0 && v != 1 {
                return Err(Error::invalid(format!("options.{name} = {v}: must be 0 or 1")));
            }
        }
        let cycle = match self.cycle {
            FEGPU_CYCLE_V => crate::amg::Cycle::V,
            FEGPU_CYCLE_W => crate::amg::Cycle::W,
            FEGPU_CYCLE_HYBRID => crate::amg::Cycle::Hybrid,
            c => {
                return Err(Error::invalid(format!(
                    "options.cycle = {c}: expected FEGPU_CYCLE_V (0), FEGPU_CYCLE_W (1) or FEGPU_CYCLE_HYBRID (2)"
                )))
            }
        };
        let aggregation = match self.aggregation {
            FEGPU_AGGREGATION_GREEDY => crate::amg::Aggregation::Greedy,
            FEGPU_AGGREGATION_PARALLEL => crate::amg::Aggregation::Parallel,
            a => {
                return Err(Error::invalid(format!(
                    "options.aggregation = {a}: expected FEGPU_AGGREGATION_GREEDY (0) or FEGPU_AGGREGATION_PARALLEL (1)"
                )))
            }
        };
        Ok(crate::amg::Options {
            strength: self.strength,
            smoother,
            coarsest: count("coarsest", self.coarsest)?,
            max_levels: count("max_levels", self.max_levels)?,
            smooth_prolongator: self.smooth_prolongator == 1,
            block_size: count("block_size", self.block_size as i64)?,
            near_null_space: None,
            f32_cycle: self.f32_cycle == 1,
            cycle,
            aggregation,
        })
    }
}

/// Fills `options` with the AMG defaults.
#[no_mangle]
pub unsafe extern "C" fn fegpu_amg_options_default(options: *mut fegpu_amg_options) -> fegpu_status {
    guard(|| {
        *out_param(options, "options")? = fegpu_amg_options::default();
        Ok(())
    })
}

/// Creates a solver for A with smoothed-aggregation AMG as preconditioner:
/// `method` FEGPU_METHOD_CG (symmetric A; a nonsymmetric one is refused,
/// naming an entry), _BICGSTAB, _GMRES or _CGS; `options` may be NULL (the
/// defaults). `near_null_space` holds `count` vectors of nrows,
/// column-major (count 0: none given, the pointer is not read; the constant
/// per unknown of a node is used), e.g. the rigid-body
/// modes from `fegpu_rigid_body_modes`. The hierarchy is set up here (on
/// the host, then uploaded); after `fegpu_csr_update_values` the next solve
/// redoes only its values, keeping aggregates and patterns.
#[no_mangle]
pub unsafe extern "C" fn fegpu_solver_create_amg(
    a: fegpu_csr_t,
    method: i32,
    options: *const fegpu_amg_options,
    near_null_space: *const f64,
    count: i64,
    s: *mut fegpu_solver_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(s, "s")?;
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        let owner = registry::owner_of(a).unwrap_or(0);
        let mut o = if options.is_null() { fegpu_amg_options::default() } else { *options }.options()?;
        if count != 0 {
            let k = usize::try_from(count)
                .map_err(|_| Error::invalid(format!("count = {count}: must be 0 (no vectors given) or at least 1")))?;
            let n = m.rows();
            let len = n.checked_mul(k).ok_or_else(|| Error::invalid(format!("count = {count}: too many vectors")))?;
            // a count no memory holds is refused before the caller's array is read, not an abort
            crate::error::host_fits(len as u128 * 8, &format!("near_null_space ({k} vectors of {n})"))?;
            let vectors = crate::error::host_copy(host_in(near_null_space, len, "near_null_space")?, "near_null_space")?;
            o.near_null_space = Some(crate::amg::NearNullSpace { vectors, count: k });
        }
        let settings = solver::Settings { amg: o, ..solver::Settings::from_env() };
        let solver = Solver::with_settings(m, method_of(method)?, Precond::Amg, settings)?;
        *out = registry::insert(Arc::new(solver), owner);
        Ok(())
    })
}

/// The rigid-body modes of the nodes at `coords` (dim = 2 or 3 values per
/// node, node by node) for unknowns numbered node by node: 3 (2-D) or 6
/// (3-D) vectors of n_nodes*dim, column-major, into `modes` (`len` values:
/// at least n_nodes*dim*3 or *6) — translations, then rotations about the
/// centroid. Pass them to `fegpu_solver_create_amg` with block_size = dim.
#[no_mangle]
pub unsafe extern "C" fn fegpu_rigid_body_modes(
    dim: i32,
    n_nodes: i64,
    coords: *const f64,
    modes: *mut f64,
    len: i64,
) -> fegpu_status {
    guard(|| {
        let nodes = positive("n_nodes", n_nodes)?;
        if dim != 2 && dim != 3 {
            return Err(Error::invalid(format!("dim = {dim}: rigid-body modes are for dim 2 or 3")));
        }
        let (d, count) = (dim as usize, if dim == 3 { 6 } else { 3 });
        // `len` checked before either array is touched
        let n = nodes.checked_mul(d).ok_or_else(|| Error::invalid(format!("n_nodes = {n_nodes}: too many nodes")))?;
        let needed = n.checked_mul(count).ok_or_else(|| Error::invalid(format!("n_nodes = {n_nodes}: too many nodes")))?;
        if len < 0 || (len as u64) < needed as u64 {
            return Err(Error::size(format!("len = {len}: the modes need {needed} values ({count} vectors of {n})")));
        }
        let b = crate::amg::rigid_body_modes(d, host_in(coords, n, "coords")?)?;
        host_out(modes, b.vectors.len(), "modes")?.copy_from_slice(&b.vectors);
        Ok(())
    })
}

/// A solver's description into `buf` (NUL-terminated, truncated to `len`
/// bytes; len 0 writes nothing, buf may then be NULL; `needed`, may be
/// NULL, gets the full length plus one): the
/// method and preconditioner, for AMG the hierarchy (levels, rows,
/// nonzeros, operator complexity, the last setup's phases), and for ILU(0)
/// on the device's plane pipeline its windows once built (a line).
#[no_mangle]
pub unsafe extern "C" fn fegpu_solver_describe(
    s: fegpu_solver_t,
    buf: *mut libc::c_char,
    len: i64,
    needed: *mut i64,
) -> fegpu_status {
    guard(|| {
        let sv = registry::get::<Solver>(s, "s")?;
        let (amg, ilu) = (sv.amg_summary().unwrap_or_default(), sv.ilu_summary().unwrap_or_default());
        let text = format!("{} with {}\n{amg}{ilu}", sv.method.name(), sv.precond.name());
        super::write_text(&text, buf, len, needed)
    })
}

/// The shape arguments of a create call: rows, columns and entries (of
/// blocks for a BSR matrix, with the block size), as the caller named them.
struct Shape {
    rows: (&'static str, i64),
    cols: (&'static str, i64),
    entries: (&'static str, i64),
    block: i64,
}

#[allow(clippy::too_many_arguments)] // the C signature's arguments
unsafe fn create<I: Index>(
    ctx: fegpu_context_t,
    shape: Shape,
    row_ptr: *const I,
    col_ind: *const I,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_csr_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(a, "a")?;
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (nr, nc) = (positive(shape.rows.0, shape.rows.1)?, positive(shape.cols.0, shape.cols.1)?);
        let (what, nnz) = shape.entries;
        if nnz < 0 {
            return Err(Error::invalid(format!("{what} = {nnz}: must be >= 0")));
        }
        let k = positive("block_size", shape.block)?;
        sparse::block::check_size(k)?;
        let nnz = nnz as usize;
        let nvalues = nnz.checked_mul(k * k).ok_or_else(|| Error::invalid(format!("{what} = {nnz}: too many entries")))?;
        let rp = host_in(row_ptr, nr + 1, "row_ptr")?;
        let (ci, v) =
            if nnz == 0 { (&[][..], &[][..]) } else { (host_in(col_ind, nnz, "col_ind")?, host_in(values, nvalues, "values")?) };
        let pattern = sparse::build_pattern(nr, nc, rp, ci, index_base as i64)?;
        let m = Csr::with_blocks(c, pattern, k, v)?;
        *out = registry::insert(Arc::new(m), ctx);
        Ok(())
    })
}

fn csr_shape(nrows: i64, ncols: i64, nnz: i64) -> Shape {
    Shape { rows: ("nrows", nrows), cols: ("ncols", ncols), entries: ("nnz", nnz), block: 1 }
}

fn bsr_shape(nb_rows: i64, nb_cols: i64, nnzb: i64, block_size: i64) -> Shape {
    Shape { rows: ("nb_rows", nb_rows), cols: ("nb_cols", nb_cols), entries: ("nnzb", nnzb), block: block_size }
}

/// Creates an nrows x ncols CSR matrix from the caller's arrays with int32
/// indices: row_ptr (nrows+1), col_ind and values (nnz), `index_base` 0 or 1
/// (Fortran arrays pass unchanged with 1). Validated: row_ptr monotone and
/// consistent with nnz, columns in range, values finite. Unsorted rows are
/// sorted and duplicate entries summed; `fegpu_csr_update_values` takes values
/// in the caller's original order.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_create_i32(
    ctx: fegpu_context_t,
    nrows: i64,
    ncols: i64,
    nnz: i64,
    row_ptr: *const i32,
    col_ind: *const i32,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_csr_t,
) -> fegpu_status {
    create::<i32>(ctx, csr_shape(nrows, ncols, nnz), row_ptr, col_ind, values, index_base, a)
}

/// As `fegpu_csr_create_i32`, with int64 indices.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_create_i64(
    ctx: fegpu_context_t,
    nrows: i64,
    ncols: i64,
    nnz: i64,
    row_ptr: *const i64,
    col_ind: *const i64,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_csr_t,
) -> fegpu_status {
    create::<i64>(ctx, csr_shape(nrows, ncols, nnz), row_ptr, col_ind, values, index_base, a)
}

/// Creates a block CSR (BSR) matrix of nb_rows x nb_cols blocks, each
/// block_size x block_size (1..8; TOUGHREACT's NEQ x NEQ Jacobian blocks),
/// from the caller's arrays with int32 indices: row_ptr (nb_rows+1) and
/// col_ind (nnzb) over block rows and columns, counted from `index_base`;
/// values (nnzb * block_size^2), each block column-major (Fortran
/// `values(block_size, block_size, nnzb)`). Validated as `fegpu_csr_create_i32`;
/// duplicate blocks are summed. The result is a `fegpu_csr_t` of
/// nb_rows * block_size rows: `fegpu_csr_spmv`, `fegpu_csr_update_values`
/// (nnzb * block_size^2 values) and the solvers take it; Jacobi is then block
/// Jacobi and ILU(0) block ILU(0), both with the pivot blocks inverted.
#[no_mangle]
pub unsafe extern "C" fn fegpu_bsr_create_i32(
    ctx: fegpu_context_t,
    nb_rows: i64,
    nb_cols: i64,
    block_size: i64,
    nnzb: i64,
    row_ptr: *const i32,
    col_ind: *const i32,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_csr_t,
) -> fegpu_status {
    create::<i32>(ctx, bsr_shape(nb_rows, nb_cols, nnzb, block_size), row_ptr, col_ind, values, index_base, a)
}

/// As `fegpu_bsr_create_i32`, with int64 indices.
#[no_mangle]
pub unsafe extern "C" fn fegpu_bsr_create_i64(
    ctx: fegpu_context_t,
    nb_rows: i64,
    nb_cols: i64,
    block_size: i64,
    nnzb: i64,
    row_ptr: *const i64,
    col_ind: *const i64,
    values: *const f64,
    index_base: i32,
    a: *mut fegpu_csr_t,
) -> fegpu_status {
    create::<i64>(ctx, bsr_shape(nb_rows, nb_cols, nnzb, block_size), row_ptr, col_ind, values, index_base, a)
}

/// The block size of a matrix (1 for CSR) and its block rows, block columns
/// and stored blocks (after duplicates were summed); any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_bsr_info(
    a: fegpu_csr_t,
    block_size: *mut i64,
    nb_rows: *mut i64,
    nb_cols: *mut i64,
    nnzb: *mut i64,
) -> fegpu_status {
    guard(|| {
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        let p = &m.pattern;
        let fields = [
            (block_size, m.block, "block_size"),
            (nb_rows, p.nrows, "nb_rows"),
            (nb_cols, p.ncols, "nb_cols"),
            (nnzb, p.nnz(), "nnzb"),
        ];
        write_wanted(fields.map(|(q, v, name)| (q, v as i64, name)))
    })
}

unsafe fn path_arg(path: *const libc::c_char) -> Result<PathBuf> {
    if path.is_null() {
        return Err(Error::invalid("path is a null pointer"));
    }
    Ok(PathBuf::from(CStr::from_ptr(path).to_string_lossy().into_owned()))
}

/// Reads a Matrix Market coordinate file (real, integer or pattern; general,
/// symmetric or skew-symmetric) into a new matrix.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_read_mm(ctx: fegpu_context_t, path: *const libc::c_char, a: *mut fegpu_csr_t) -> fegpu_status {
    guard(|| {
        let out = out_param(a, "a")?;
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let t = mm::read_matrix(&path_arg(path)?)?;
        let (rp, ci, v) = t.to_csr()?;
        let pattern = sparse::build_pattern(t.nrows.max(1), t.ncols.max(1), &rp, &ci, 0)?;
        *out = registry::insert(Arc::new(Csr::new(c, pattern, &v)?), ctx);
        Ok(())
    })
}

/// Writes the matrix as a Matrix Market coordinate real general file (a
/// block matrix is refused, as by fegpu_csr_download).
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_write_mm(a: fegpu_csr_t, path: *const libc::c_char) -> fegpu_status {
    guard(|| {
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        m.require_scalar("fegpu_csr_write_mm")?;
        let p = &m.pattern;
        mm::write_matrix(&path_arg(path)?, p.nrows, p.ncols, &p.row_ptr, &p.col, &m.download_values()?)
    })
}

/// New values for the same pattern, in the order of the arrays the matrix
/// was created from (`nnz` values as then: nnzb * block_size^2 for a block
/// matrix). No structural work is redone; solvers
/// built on the matrix refactor at their next solve. Rejected values (wrong
/// count, not finite) change nothing.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_update_values(a: fegpu_csr_t, values: *const f64, nnz: i64) -> fegpu_status {
    guard(|| {
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        if nnz < 0 || nnz as usize != m.caller_len() {
            return Err(Error::size(format!("nnz = {nnz} but A was created with {} values", m.caller_len())));
        }
        let v = if nnz == 0 { &[][..] } else { host_in(values, nnz as usize, "values")? };
        m.update_values(v)
    })
}

/// Rows, columns and stored values (after duplicates were summed; for a block
/// matrix, scalar rows and columns, nnzb * block_size^2 values); any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_info(a: fegpu_csr_t, nrows: *mut i64, ncols: *mut i64, nnz: *mut i64) -> fegpu_status {
    guard(|| {
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        write_wanted([
            (nrows, m.rows() as i64, "nrows"),
            (ncols, m.cols() as i64, "ncols"),
            (nnz, m.stored_len() as i64, "nnz"),
        ])?;
        Ok(())
    })
}

/// Copies the stored matrix out: row_ptr (nrows+1), col_ind and values
/// (stored nnz, see `fegpu_csr_info`), indices counted from `index_base`.
/// A block matrix (`fegpu_bsr_create_i32`/`_i64`) is FEGPU_ERR_UNSUPPORTED here.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_download(
    a: fegpu_csr_t,
    row_ptr: *mut i64,
    col_ind: *mut i64,
    values: *mut f64,
    index_base: i32,
) -> fegpu_status {
    guard(|| {
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        m.require_scalar("fegpu_csr_download")?;
        if index_base != 0 && index_base != 1 {
            return Err(Error::invalid(format!("index_base = {index_base}: must be 0 or 1")));
        }
        let p = &m.pattern;
        let base = index_base as i64;
        no_overlap(
            &[span(row_ptr, p.nrows + 1, "row_ptr"), span(col_ind, p.nnz(), "col_ind"), span(values, p.nnz(), "values")],
            &[],
        )?;
        let rp = host_out(row_ptr, p.nrows + 1, "row_ptr")?;
        let v = m.download_values()?;
        if p.nnz() > 0 {
            let ci = host_out(col_ind, p.nnz(), "col_ind")?;
            let vv = host_out(values, p.nnz(), "values")?;
            ci.iter_mut().zip(p.col.iter()).for_each(|(o, &c)| *o = c as i64 + base);
            vv.copy_from_slice(&v);
        }
        rp.iter_mut().zip(p.row_ptr.iter()).for_each(|(o, &r)| *o = r as i64 + base);
        Ok(())
    })
}

/// Destroys a matrix (solvers built on it keep their own reference until destroyed).
#[no_mangle]
pub extern "C" fn fegpu_csr_destroy(a: fegpu_csr_t) -> fegpu_status {
    guard(|| registry::remove::<Csr>(a, "a"))
}

/// y = alpha*A*x + beta*y on device-resident f64 arrays (x: ncols, y: nrows
/// elements). With beta = 0, y is not read.
#[no_mangle]
pub extern "C" fn fegpu_csr_spmv(a: fegpu_csr_t, alpha: f64, x: fegpu_array_t, beta: f64, y: fegpu_array_t) -> fegpu_status {
    guard(|| {
        sparse::spmv(
            &*registry::get::<crate::sparse::Csr>(a, "a")?,
            alpha,
            &*registry::get::<crate::array::Array>(x, "x")?,
            beta,
            &*registry::get::<crate::array::Array>(y, "y")?,
        )
    })
}

/// result = x . y for f64 arrays (the reduction finishes on the device).
#[no_mangle]
pub unsafe extern "C" fn fegpu_vector_dot(x: fegpu_array_t, y: fegpu_array_t, result: *mut f64) -> fegpu_status {
    guard(|| {
        let out = out_param(result, "result")?;
        *out = crate::array::vector::vector_dot(
            &*registry::get::<crate::array::Array>(x, "x")?,
            &*registry::get::<crate::array::Array>(y, "y")?,
        )?;
        Ok(())
    })
}

/// result = ||x||_2 for an f64 array, without underflow or overflow
/// (scaled by a power of two where the squares would leave the range).
#[no_mangle]
pub unsafe extern "C" fn fegpu_vector_nrm2(x: fegpu_array_t, result: *mut f64) -> fegpu_status {
    guard(|| {
        let out = out_param(result, "result")?;
        let a = registry::get::<crate::array::Array>(x, "x")?;
        *out = crate::array::vector::vector_nrm2(&a)?;
        Ok(())
    })
}

/// Dirichlet conditions x[dofs[i]] = values[i] (i < n_fixed, dofs counted
/// from `index_base`) applied to A x = b in place, keeping A symmetric: b
/// loses the constrained columns' contributions, the constrained rows and
/// columns are zeroed but for their diagonals, and b[d] = A[d, d] values[i].
/// Call it after assembling A and b, before solving.
#[no_mangle]
pub unsafe extern "C" fn fegpu_csr_apply_dirichlet(
    a: fegpu_csr_t,
    n_fixed: i64,
    dofs: *const i64,
    index_base: i32,
    values: *const f64,
    b: fegpu_array_t,
) -> fegpu_status {
    guard(|| {
        let m = registry::get::<crate::sparse::Csr>(a, "a")?;
        let dofs = index_list(n_fixed, dofs, index_base, "n_fixed", "dofs")?;
        sparse::apply_dirichlet(
            &m,
            dofs,
            index_base as i64,
            host_in(values, dofs.len(), "values")?,
            &*registry::get::<crate::array::Array>(b, "b")?,
        )
    })
}

/// y = alpha*x + beta*y for f64 arrays.
#[no_mangle]
pub extern "C" fn fegpu_vector_axpby(alpha: f64, x: fegpu_array_t, beta: f64, y: fegpu_array_t) -> fegpu_status {
    guard(|| {
        crate::array::vector::vector_axpby(
            alpha,
            &*registry::get::<crate::array::Array>(x, "x")?,
            beta,
            &*registry::get::<crate::array::Array>(y, "y")?,
        )
    })
}

/// Creates a solver for A: `method` FEGPU_METHOD_CG (SPD A),
/// FEGPU_METHOD_BICGSTAB, _GMRES (restart 30), _BICG or _CGS; `precond`
/// FEGPU_PRECOND_NONE, _JACOBI, _ILU0, _ILU0_JACOBI, _ILU0_MULTICOLOUR,
/// _ILU0_MULTICOLOUR_SPLIT or _AMG (default options; `fegpu_solver_create_amg` takes them).
/// The structural analysis (ILU levels) is done once here and the
/// preconditioner built; after `fegpu_csr_update_values` it is rebuilt at the
/// next solve. A missing or zero pivot fails with FEGPU_ERR_BREAKDOWN naming the row.
#[no_mangle]
pub unsafe extern "C" fn fegpu_solver_create(a: fegpu_csr_t, method: i32, precond: i32, s: *mut fegpu_solver_t) -> fegpu_status {
    guard(|| new_solver(a, method_of(method), precond, s))
}

/// A new solver of `a` into the caller's `s`, owned by a's context (the
/// arguments checked in the order they are passed).
unsafe fn new_solver(a: fegpu_csr_t, method: Result<Method>, precond: i32, s: *mut fegpu_solver_t) -> Result<()> {
    let out = out_param(s, "s")?;
    let m = registry::get::<crate::sparse::Csr>(a, "a")?;
    let owner = registry::owner_of(a).unwrap_or(0);
    let solver = Solver::new(m, method?, precond_of(precond)?)?;
    *out = registry::insert(Arc::new(solver), owner);
    Ok(())
}

/// As `fegpu_solver_create` with FEGPU_METHOD_GMRES restarted every
/// `restart` iterations, 1 to 10,000 (the Krylov basis holds restart + 1
/// vectors of nrows, fewer where maxit is smaller).
#[no_mangle]
pub unsafe extern "C" fn fegpu_solver_create_gmres(
    a: fegpu_csr_t,
    precond: i32,
    restart: i32,
    s: *mut fegpu_solver_t,
) -> fegpu_status {
    guard(|| new_solver(a, gmres_of(restart), precond, s))
}

/// Fills a caller's `info` (may be NULL) after a solve that began at `started`.
pub(crate) unsafe fn write_info(
    info: *mut fegpu_solve_info,
    outcome: &solver::Outcome,
    true_rel: f64,
    setup: f64,
    started: std::time::Instant,
) {
    if !info.is_null() {
        *info = fegpu_solve_info {
            iterations: outcome.iterations,
            relative_residual: outcome.relative_residual,
            true_relative_residual: true_rel,
            setup_seconds: setup,
            solve_seconds: started.elapsed().as_secs_f64(),
        };
    }
}

/// Solves A x = b to ||r||/||b|| <= tol in at most maxit iterations. `x`
/// holds the initial guess and receives the solution; b = 0 gives x = 0.
/// Everything stays on the device, the iterations' scalars too.
/// Returns FEGPU_OK when converged (and the true residual ||b - A x||/||b||
/// recomputed at the end is within 100 tol), FEGPU_ERR_NOT_CONVERGED at maxit
/// or where the true residual is not (x holds the last iterate),
/// FEGPU_ERR_BREAKDOWN naming the quantity that vanished.
/// `info` (may be NULL) is filled in every one of those cases.
#[no_mangle]
pub unsafe extern "C" fn fegpu_solver_solve(
    s: fegpu_solver_t,
    b: fegpu_array_t,
    x: fegpu_array_t,
    tol: f64,
    maxit: i64,
    info: *mut fegpu_solve_info,
) -> fegpu_status {
    guard(|| {
        let t = std::time::Instant::now();
        let sv = registry::get::<crate::sparse::solver::Solver>(s, "s")?;
        let (outcome, true_rel, setup) = sv.solve(
            &*registry::get::<crate::array::Array>(b, "b")?,
            &*registry::get::<crate::array::Array>(x, "x")?,
            tol,
            maxit,
        )?;
        write_info(info, &outcome, true_rel, setup, t);
        solver::outcome_status(&outcome)
    })
}

/// The relative residual after each iteration of the last solve (entry 0:
/// the initial guess). Copies min(len, count) values; `count` gets the total.
#[no_mangle]
pub unsafe extern "C" fn fegpu_solver_history(s: fegpu_solver_t, history: *mut f64, len: i64, count: *mut i64) -> fegpu_status {
    guard(|| copy_history(&registry::get::<crate::sparse::solver::Solver>(s, "s")?.history(), history, len, count))
}

/// The first min(len, count) of `h` into `history`; `count` gets h's length.
pub(crate) unsafe fn copy_history(h: &[f64], history: *mut f64, len: i64, count: *mut i64) -> Result<()> {
    let count = out_param(count, "count")?;
    let n = usize::try_from(len).map_err(|_| Error::invalid(format!("len = {len}: must be >= 0")))?.min(h.len());
    host_out(history, n, "history")?.copy_from_slice(&h[..n]);
    *count = h.len() as i64;
    Ok(())
}

/// Destroys a solver.
#[no_mangle]
pub extern "C" fn fegpu_solver_destroy(s: fegpu_solver_t) -> fegpu_status {
    guard(|| registry::remove::<Solver>(s, "s"))
}
