//! C ABI of finite-element sets (src/fem).

use super::registry;
use super::sparse::{fegpu_solve_info, write_info};
use super::status::fegpu_status;
use super::{
    fegpu_array_t, fegpu_context_t, guard, host_in, host_out, index_list, index_list_max, items, out_param, write_wanted,
};
use crate::error::{Error, Result};
use crate::fem::dynamics::{DynamicsStepper, Scheme};
use crate::fem::ebe::EbeSolver;
use crate::fem::heat::HeatStepper;
use crate::fem::{Element, ElementSet, Level, Problem};
use crate::sparse::solver;
use std::sync::Arc;

/// Integration strategies (FEStudio's levels): AUTO picks the fastest
/// measured (level I on the H100, BENCHMARKS.md).
pub const FEGPU_INTEGRATION_AUTO: i32 = 0;
/// Level I: one thread per element.
pub const FEGPU_INTEGRATION_ELEMENT: i32 = 1;
/// Level II: one element per block, its Gauss points' quantities shared.
pub const FEGPU_INTEGRATION_POINT: i32 = 2;
/// Level IIa: several elements per block, their Gauss points' quantities shared.
pub const FEGPU_INTEGRATION_BLOCKED: i32 = 3;
pub const FEGPU_ELEMENT_TRI3: i32 = 1;
pub const FEGPU_ELEMENT_QUAD4: i32 = 2;
pub const FEGPU_ELEMENT_TET4: i32 = 3;
pub const FEGPU_ELEMENT_HEX8: i32 = 4;
/// Quadratic elements (order raised to 3 at least): the corners, then the
/// edges' midpoints (tri6: 0-1 1-2 2-0; quad8: 0-1 1-2 2-3 3-0; tet10: 0-1
/// 1-2 2-0 0-3 1-3 2-3; hex20: the bottom's 0-1 1-2 2-3 3-0, the top's 4-5
/// 5-6 6-7 7-4, then 0-4 1-5 2-6 3-7).
pub const FEGPU_ELEMENT_TRI6: i32 = 5;
pub const FEGPU_ELEMENT_QUAD8: i32 = 6;
pub const FEGPU_ELEMENT_TET10: i32 = 7;
pub const FEGPU_ELEMENT_HEX20: i32 = 8;
/// Heat conduction: one dof per node, material (k, unused).
pub const FEGPU_PROBLEM_HEAT: i32 = 1;
/// 2-D elasticity in plane stress: material (E, nu).
pub const FEGPU_PROBLEM_PLANE_STRESS: i32 = 2;
/// 2-D elasticity in plane strain: material (E, nu).
pub const FEGPU_PROBLEM_PLANE_STRAIN: i32 = 3;
/// 3-D linear elasticity: material (E, nu).
pub const FEGPU_PROBLEM_ELASTIC_3D: i32 = 4;

fn element_of(c: i32) -> Result<Element> {
    Ok(match c {
        FEGPU_ELEMENT_TRI3 => Element::Tri3,
        FEGPU_ELEMENT_QUAD4 => Element::Quad4,
        FEGPU_ELEMENT_TET4 => Element::Tet4,
        FEGPU_ELEMENT_HEX8 => Element::Hex8,
        FEGPU_ELEMENT_TRI6 => Element::Tri6,
        FEGPU_ELEMENT_QUAD8 => Element::Quad8,
        FEGPU_ELEMENT_TET10 => Element::Tet10,
        FEGPU_ELEMENT_HEX20 => Element::Hex20,
        _ => {
            return Err(Error::invalid(format!(
                "element = {c}: expected FEGPU_ELEMENT_TRI3 (1), _QUAD4 (2), _TET4 (3), _HEX8 (4), _TRI6 (5), \
                 _QUAD8 (6), _TET10 (7) or _HEX20 (8)"
            )))
        }
    })
}

fn element_code(e: Element) -> i32 {
    match e {
        Element::Tri3 => FEGPU_ELEMENT_TRI3,
        Element::Quad4 => FEGPU_ELEMENT_QUAD4,
        Element::Tet4 => FEGPU_ELEMENT_TET4,
        Element::Hex8 => FEGPU_ELEMENT_HEX8,
        Element::Tri6 => FEGPU_ELEMENT_TRI6,
        Element::Quad8 => FEGPU_ELEMENT_QUAD8,
        Element::Tet10 => FEGPU_ELEMENT_TET10,
        Element::Hex20 => FEGPU_ELEMENT_HEX20,
    }
}

fn problem_of(c: i32) -> Result<Problem> {
    Ok(match c {
        FEGPU_PROBLEM_HEAT => Problem::Heat,
        FEGPU_PROBLEM_PLANE_STRESS => Problem::PlaneStress,
        FEGPU_PROBLEM_PLANE_STRAIN => Problem::PlaneStrain,
        FEGPU_PROBLEM_ELASTIC_3D => Problem::Elastic3d,
        _ => {
            return Err(Error::invalid(format!(
                "problem = {c}: expected FEGPU_PROBLEM_HEAT (1), _PLANE_STRESS (2), _PLANE_STRAIN (3) or _ELASTIC_3D (4)"
            )))
        }
    })
}

/// An element type's nodes per element, space dimension and nodes per face
/// (the first extents fegpu_fem_create reads conn and coords with, and
/// fegpu_fem_face_load its faces). Any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_element_shape(element: i32, nodes: *mut i32, dim: *mut i32, face_nodes: *mut i32) -> fegpu_status {
    guard(|| {
        let e = element_of(element)?;
        let face = crate::fem::loads::face_nodes(e);
        write_wanted([(nodes, e.nodes() as i32, "nodes"), (dim, e.dim() as i32, "dim"), (face_nodes, face as i32, "face_nodes")])
    })
}

/// A set's element type (FEGPU_ELEMENT_*) and its numbers of nodes,
/// elements and materials. Any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_shape(
    fem: fegpu_fem_t,
    element: *mut i32,
    n_nodes: *mut i64,
    n_elements: *mut i64,
    n_materials: *mut i64,
) -> fegpu_status {
    guard(|| {
        let set = registry::get::<ElementSet>(fem, "fem")?;
        let materials = set.materials()?.props.len() / 2;
        super::check_wanted(element, "element")?;
        write_wanted([
            (n_nodes, set.nodes as i64, "n_nodes"),
            (n_elements, set.elements as i64, "n_elements"),
            (n_materials, materials as i64, "n_materials"),
        ])?;
        write_wanted([(element, element_code(set.element), "element")])
    })
}

/// A heat stepper's element type (FEGPU_ELEMENT_*) and its set's numbers
/// of nodes and elements, as fegpu_fem_shape gives them for the set it was
/// made from. Any pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_heat_shape(
    heat: fegpu_heat_t,
    element: *mut i32,
    n_nodes: *mut i64,
    n_elements: *mut i64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<HeatStepper>(heat, "heat")?;
        super::check_wanted(element, "element")?;
        write_wanted([(n_nodes, s.set.nodes as i64, "n_nodes"), (n_elements, s.set.elements as i64, "n_elements")])?;
        write_wanted([(element, element_code(s.set.element), "element")])
    })
}

/// An element-set handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_fem_t = u64;

/// Creates an element set of one element type (FEGPU_ELEMENT_TRI3, _QUAD4,
/// _TET4, _HEX8, or the quadratic _TRI6, _QUAD8, _TET10, _HEX20) for one
/// problem (FEGPU_PROBLEM_HEAT, _PLANE_STRESS, _PLANE_STRAIN, _ELASTIC_3D),
/// kept where the context's backend works: `coords` dim x n_nodes
/// (column-major, node by node), `conn` nodes per element x n_elements and
/// `material` n_elements, both counted from `index_base` (0 or 1); `props`
/// 2 x n_materials: (k, rho c) for heat, (E, nu) for elasticity. `order`:
/// Gauss-Legendre points per direction (1..4) for quad4 and hex8 (the
/// quadratic elements take at least 3); tri3 and tet4 have constant
/// gradients and are integrated exactly by their centroid. det J is checked
/// at the integration points only: order 1 does not see a non-convex quad4. Node order: quad4 counter-clockwise,
/// hex8 the bottom face counter-clockwise then the top, tri3 counter-clockwise,
/// tet4 with node 4 on the side the first three see counter-clockwise.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_create(
    ctx: fegpu_context_t,
    element: i32,
    problem: i32,
    n_nodes: i64,
    coords: *const f64,
    n_elements: i64,
    conn: *const i64,
    index_base: i32,
    n_materials: i64,
    props: *const f64,
    material: *const i64,
    order: i32,
    fem: *mut fegpu_fem_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(fem, "fem")?;
        let c = registry::get::<crate::context::Context>(ctx, "ctx")?;
        let (element, problem) = (element_of(element)?, problem_of(problem)?);
        let nodes = crate::error::positive("n_nodes", n_nodes)?;
        let elements = crate::error::positive("n_elements", n_elements)?;
        let materials = crate::error::positive("n_materials", n_materials)?;
        let coords = host_in(coords, items(element.dim(), nodes, "coords")?, "coords")?;
        let conn = host_in(conn, items(element.nodes(), elements, "n_elements (conn)")?, "conn")?;
        let props = host_in(props, items(2, materials, "n_materials (props)")?, "props")?;
        let material = host_in(material, elements, "material")?;
        let set = ElementSet::new(c, element, problem, n_nodes, coords, n_elements, conn, index_base, props, material, order)?;
        *out = registry::insert(Arc::new(set), ctx);
        Ok(())
    })
}

/// The integration strategy of the following fegpu_fem_integrate calls:
/// FEGPU_INTEGRATION_AUTO (the fastest measured for the element and
/// problem), _ELEMENT (level I: a thread per element), _POINT (level II: an
/// element per block, its Gauss points shared) or _BLOCKED (level IIa:
/// several elements per block). All give the same matrices to rounding.
#[no_mangle]
pub extern "C" fn fegpu_fem_set_integration(fem: fegpu_fem_t, level: i32) -> fegpu_status {
    guard(|| {
        let level = match level {
            FEGPU_INTEGRATION_AUTO => None,
            FEGPU_INTEGRATION_ELEMENT => Some(Level::Element),
            FEGPU_INTEGRATION_POINT => Some(Level::Point),
            FEGPU_INTEGRATION_BLOCKED => Some(Level::Blocked),
            _ => {
                return Err(Error::invalid(format!(
                    "level = {level}: expected FEGPU_INTEGRATION_AUTO (0), _ELEMENT (1), _POINT (2) or _BLOCKED (3)"
                )))
            }
        };
        registry::get::<crate::fem::ElementSet>(fem, "fem")?.set_integration(level);
        Ok(())
    })
}

/// Integrates every element stiffness matrix where the set lives (one
/// thread per element on the GPU). An element whose Jacobian determinant is
/// not positive fails the call with its number and nodes; the matrices of
/// an earlier call are then kept unchanged.
#[no_mangle]
pub extern "C" fn fegpu_fem_integrate(fem: fegpu_fem_t) -> fegpu_status {
    guard(|| registry::get::<crate::fem::ElementSet>(fem, "fem")?.integrate())
}

/// Densities rho[m] (n_materials values) of an elasticity set, for its mass
/// matrices; call fegpu_fem_integrate again after.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_set_density(fem: fegpu_fem_t, n_materials: i64, rho: *const f64) -> fegpu_status {
    guard(|| {
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let n = crate::error::positive("n_materials", n_materials)?;
        set.set_density(host_in(rho, n, "rho")?)
    })
}

/// Face loads (fegpu_fem_face_load): a traction vector per face (dim values).
pub const FEGPU_FACE_TRACTION: i32 = 1;
/// A pressure per face (1 value), pushing against the outward normal.
pub const FEGPU_FACE_PRESSURE: i32 = 2;
/// A heat flux into the body per face (1 value, heat sets).
pub const FEGPU_FACE_FLUX: i32 = 3;

/// F += the integral of N^T b over every element, b constant on each:
/// `values` holds the dofs per node of each element in turn (n_values =
/// dpn x n_elements: a body force per unit volume, components x elements,
/// or a heat source per unit volume). F is the set's load vector on the
/// device (dofs elements); a failed call leaves it as it was.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_body_load(
    fem: fegpu_fem_t,
    n_values: i64,
    values: *const f64,
    f: fegpu_array_t,
) -> fegpu_status {
    guard(|| {
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let n = crate::error::non_negative("n_values", n_values)?;
        set.body_load(host_in(values, n, "values")?, &*registry::get::<crate::array::Array>(f, "F")?)
    })
}

/// A caller's face count: at least 0, and no more than the set's elements
/// have (6 each at most), so a wild count is refused before `faces` is read.
fn face_count(n_faces: i64, elements: usize) -> Result<usize> {
    let nf = crate::error::non_negative("n_faces", n_faces)?;
    if nf > 6 * elements {
        return Err(Error::size(format!("n_faces = {n_faces}: more than the set's elements have (6 each, {elements})")));
    }
    Ok(nf)
}

/// F += the face integrals of `kind` (FEGPU_FACE_*) over n_faces faces:
/// `faces` holds each face's nodes (counted from index_base): 2 per edge of
/// a 2-D element (ordered with the body on the left: outward normal on the
/// right), 3 per triangle of tet4 and 4 per quadrilateral of hex8
/// (counter-clockwise seen from outside); quadratic elements' faces add
/// their midpoints after the corners in the same turn (3 per edge, 6 per
/// tet10 triangle, 8 per hex20 quadrilateral); `values` their loads, dim per
/// face for tractions, 1 for pressures and fluxes. A face that is not one
/// of the mesh's (nodes of no one element's face, or its corners not in a
/// turn, or a midpoint of another edge) is refused by number and nodes.
/// A failed call leaves F as it was. Convection:
/// fegpu_fem_heat_set_convection_faces.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_face_load(
    fem: fegpu_fem_t,
    kind: i32,
    n_faces: i64,
    faces: *const i64,
    index_base: i32,
    values: *const f64,
    f: fegpu_array_t,
) -> fegpu_status {
    guard(|| {
        use crate::fem::loads::FaceKind;
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let kind = match kind {
            FEGPU_FACE_TRACTION => FaceKind::Traction,
            FEGPU_FACE_PRESSURE => FaceKind::Pressure,
            FEGPU_FACE_FLUX => FaceKind::Flux,
            k => {
                return Err(Error::invalid(format!(
                    "kind = {k}: expected FEGPU_FACE_TRACTION (1), FEGPU_FACE_PRESSURE (2) or FEGPU_FACE_FLUX (3)"
                )))
            }
        };
        let nf = face_count(n_faces, set.elements)?;
        let faces = index_list(items(set.face_nodes(), nf, "faces")? as i64, faces, index_base, "n_faces", "faces")?;
        let values = host_in(values, items(kind.values(set.element.dim()), nf, "values")?, "values")?;
        set.face_load(kind, faces, index_base as i64, values, &*registry::get::<crate::array::Array>(f, "F")?)
    })
}

/// F += alpha f_int(u): the total Lagrangian internal forces of St
/// Venant-Kirchhoff material (E, nu) at the displacements u (large
/// rotations and strains; 2-D sets in plane strain), element by element
/// with no global matrix (FEStudio's Algorithm 1): a Newton residual is
/// F_ext with alpha = -1. u and F on the device, dofs elements each.
#[no_mangle]
pub extern "C" fn fegpu_fem_internal_force(fem: fegpu_fem_t, alpha: f64, u: fegpu_array_t, f: fegpu_array_t) -> fegpu_status {
    guard(|| {
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let (u, f) = (registry::get::<crate::array::Array>(u, "u")?, registry::get::<crate::array::Array>(f, "F")?);
        set.internal_force(alpha, &u, &f)
    })
}

/// New material parameters `props` (2 x n_materials, as at creation, the
/// same number of materials); call fegpu_fem_integrate and
/// fegpu_fem_assemble again for the new matrices.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_set_materials(fem: fegpu_fem_t, n_materials: i64, props: *const f64) -> fegpu_status {
    guard(|| {
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let n = crate::error::positive("n_materials", n_materials)?;
        set.set_materials(host_in(props, items(2, n, "props")?, "props")?)
    })
}

/// Assembles the global matrix (n_nodes x dofs per node, square, dof
/// node * dofs per node + component, 0-based) from the integrated element
/// matrices into a CSR matrix on the set's backend, and returns its handle
/// in `a`. The pattern and the assembly map are built on the first call; later
/// calls (after new materials) gather new values into the same matrix, so
/// solvers created for it stay valid and refresh their preconditioners.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_assemble(fem: fegpu_fem_t, a: *mut crate::ffi::sparse::fegpu_csr_t) -> fegpu_status {
    guard(|| {
        let out = out_param(a, "a")?;
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let csr = set.assemble()?;
        // the same matrix every call: the same handle while the caller keeps it
        *out = match registry::handle_of(&csr) {
            Some(h) => h,
            None => registry::insert(csr, registry::owner_of(fem).unwrap_or(0)),
        };
        Ok(())
    })
}

/// Entries of one packed element matrix: nd (nd + 1) / 2 with nd the
/// element's dofs (nodes x dofs per node).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_packed_size(fem: fegpu_fem_t, size: *mut i64) -> fegpu_status {
    guard(|| {
        let out = out_param(size, "size")?;
        *out = registry::get::<crate::fem::ElementSet>(fem, "fem")?.packed_len() as i64;
        Ok(())
    })
}

/// Copies the element matrices to `ke` (packed size x n_elements, `len`
/// entries): for each element the upper triangle of K^e row by row, dofs
/// node-major (node a, component c at a * dofs per node + c).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_stiffness_download(fem: fegpu_fem_t, ke: *mut f64, len: i64) -> fegpu_status {
    guard(|| {
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let n = crate::error::positive("len", len)?;
        set.download_matrices(false, host_out(ke, n, "ke")?)
    })
}

/// As fegpu_fem_stiffness_download, the mass matrices: for heat the capacity
/// C^e (integrals of rho c N_a N_b, props(2, m) = rho c), for elasticity the
/// consistent mass (rho N_a N_b per component, fegpu_fem_set_density).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_mass_download(fem: fegpu_fem_t, ce: *mut f64, len: i64) -> fegpu_status {
    guard(|| {
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let n = crate::error::positive("len", len)?;
        set.download_matrices(true, host_out(ce, n, "ce")?)
    })
}

/// Destroys an element set.
#[no_mangle]
pub extern "C" fn fegpu_fem_destroy(fem: fegpu_fem_t) -> fegpu_status {
    guard(|| registry::remove::<ElementSet>(fem, "fem"))
}

/// An element-by-element solver handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_ebe_t = u64;

/// Creates an element-by-element CG solver for the set's integrated element
/// matrices (never assembled): Jacobi from the element diagonals, and the
/// Dirichlet conditions x[dofs[i]] = values[i] (i < n_fixed, dofs counted
/// from `index_base`, dof = node * dofs per node + component) applied as
/// fegpu_csr_apply_dirichlet would to the assembled matrix, so both give the
/// same iterates. After fegpu_fem_integrate again (new materials) the next
/// solve rebuilds the diagonal. `on_the_fly` nonzero: K^e is recomputed from
/// the geometry in every product (no stored element matrices are read; the
/// set's memory is its nodes, connectivity and materials).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_ebe_create(
    fem: fegpu_fem_t,
    n_fixed: i64,
    dofs: *const i64,
    index_base: i32,
    values: *const f64,
    on_the_fly: i32,
    ebe: *mut fegpu_ebe_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(ebe, "ebe")?;
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let dofs = index_list_max(n_fixed, set.dofs(), "dofs of the set", dofs, index_base, ("n_fixed", "dofs"))?;
        let values = host_in(values, dofs.len(), "values")?;
        let owner = registry::owner_of(fem).unwrap_or(0);
        let solver = EbeSolver::new(set, dofs, index_base as i64, values, on_the_fly != 0)?;
        *out = registry::insert(Arc::new(solver), owner);
        Ok(())
    })
}

/// Solves K x = b under the solver's Dirichlet conditions to ||r||/||b|| <=
/// tol in at most maxit CG iterations, as fegpu_solver_solve does (`x` the
/// initial guess and the result, `b` unchanged, `info` may be NULL). b's
/// entries at the fixed dofs are not read: they take the fixed values, as
/// fegpu_csr_apply_dirichlet does.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_ebe_solve(
    ebe: fegpu_ebe_t,
    b: fegpu_array_t,
    x: fegpu_array_t,
    tol: f64,
    maxit: i64,
    info: *mut fegpu_solve_info,
) -> fegpu_status {
    guard(|| {
        let t = std::time::Instant::now();
        let s = registry::get::<crate::fem::ebe::EbeSolver>(ebe, "ebe")?;
        let (outcome, true_rel) = s.solve(
            &*registry::get::<crate::array::Array>(b, "b")?,
            &*registry::get::<crate::array::Array>(x, "x")?,
            tol,
            maxit,
        )?;
        write_info(info, &outcome, true_rel, 0.0, t);
        solver::outcome_status(&outcome)
    })
}

/// Destroys an element-by-element solver.
#[no_mangle]
pub extern "C" fn fegpu_fem_ebe_destroy(ebe: fegpu_ebe_t) -> fegpu_status {
    guard(|| registry::remove::<EbeSolver>(ebe, "ebe"))
}

/// A transient heat-conduction stepper handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_heat_t = u64;

/// Creates a theta-method stepper for a heat set (FEGPU_PROBLEM_HEAT, props
/// (k, rho c)) after fegpu_fem_integrate and fegpu_fem_assemble: each step
/// solves (C/dt + theta K) T' = (C/dt - (1 - theta) K) T + F on the device,
/// theta in [1/2, 1] (1 backward Euler, 1/2 Crank-Nicolson), with the fixed
/// temperatures T[dofs[i]] = values[i] (i < n_fixed, counted from index_base).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_heat_create(
    fem: fegpu_fem_t,
    dt: f64,
    theta: f64,
    n_fixed: i64,
    dofs: *const i64,
    index_base: i32,
    values: *const f64,
    heat: *mut fegpu_heat_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(heat, "heat")?;
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let dofs = index_list_max(n_fixed, set.dofs(), "dofs of the set", dofs, index_base, ("n_fixed", "dofs"))?;
        let values = host_in(values, dofs.len(), "values")?;
        let owner = registry::owner_of(fem).unwrap_or(0);
        let stepper = HeatStepper::new(set, dt, theta, dofs, index_base as i64, values)?;
        *out = registry::insert(Arc::new(stepper), owner);
        Ok(())
    })
}

/// One time step: `t` (the temperatures, on the device) advances by dt in
/// place; `f` is the nodal heat load over the step (0: none). The solve
/// reports like fegpu_solver_solve (`info` may be NULL).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_heat_step(
    heat: fegpu_heat_t,
    t: fegpu_array_t,
    f: fegpu_array_t,
    tol: f64,
    maxit: i64,
    info: *mut fegpu_solve_info,
) -> fegpu_status {
    guard(|| {
        let clock = std::time::Instant::now();
        let s = registry::get::<crate::fem::heat::HeatStepper>(heat, "heat")?;
        let f = if f == 0 { None } else { Some(registry::get::<crate::array::Array>(f, "F")?) };
        let (outcome, true_rel) = s.step(&*registry::get::<crate::array::Array>(t, "T")?, f.as_deref(), tol, maxit)?;
        write_info(info, &outcome, true_rel, 0.0, clock);
        solver::outcome_status(&outcome)
    })
}

/// Convective boundaries for the following steps, in lumped nodal form:
/// node nodes[i] (i < n, counted from `index_base`) exchanges h_area[i] *
/// (t_env[i] - T) with its surroundings (h_area: the film coefficient times
/// the boundary area the node stands for). A new call replaces the previous
/// set; n = 0 removes them. The step's values are recomputed here on the
/// device, over the same matrix and solver.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_heat_set_convection(
    heat: fegpu_heat_t,
    n: i64,
    nodes: *const i64,
    index_base: i32,
    h_area: *const f64,
    t_env: *const f64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<crate::fem::heat::HeatStepper>(heat, "heat")?;
        // (a node may be listed more than once: its entries add up, so no bound here)
        let nodes = index_list(n, nodes, index_base, "n", "nodes")?;
        let n = nodes.len();
        s.set_convection(nodes, index_base as i64, host_in(h_area, n, "h_area")?, host_in(t_env, n, "t_env")?)
    })
}

/// Convection on element faces for the following steps: face i (its
/// nodes in `faces`, ordered as for fegpu_fem_face_load, counted from
/// index_base) exchanges h[i] (T_env[i] - T) per unit area, integrated over
/// the face (consistent face matrices h N_a N_b added to K, h T_env N_a to
/// the load). Replaces the previous faces (n_faces 0 removes them); the
/// nodal form of fegpu_fem_heat_set_convection stays beside it.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_heat_set_convection_faces(
    heat: fegpu_heat_t,
    n_faces: i64,
    faces: *const i64,
    index_base: i32,
    h: *const f64,
    t_env: *const f64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<HeatStepper>(heat, "heat")?;
        let nf = face_count(n_faces, s.set.elements)?;
        let faces = index_list(items(s.set.face_nodes(), nf, "faces")? as i64, faces, index_base, "n_faces", "faces")?;
        s.set_convection_faces(faces, index_base as i64, host_in(h, nf, "h")?, host_in(t_env, nf, "t_env")?)
    })
}

/// New fixed temperatures for the following steps: T[dofs[i]] = values[i]
/// (i < n_fixed, counted from index_base); dofs fixed before and not listed
/// are free again. Recomputed on the device, as fegpu_fem_heat_set_convection.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_heat_set_fixed(
    heat: fegpu_heat_t,
    n_fixed: i64,
    dofs: *const i64,
    index_base: i32,
    values: *const f64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<HeatStepper>(heat, "heat")?;
        let dofs = index_list_max(n_fixed, s.set.dofs(), "dofs of the set", dofs, index_base, ("n_fixed", "dofs"))?;
        s.set_fixed(dofs, index_base as i64, host_in(values, dofs.len(), "values")?)
    })
}

/// A new time step dt (> 0) for the following steps.
#[no_mangle]
pub extern "C" fn fegpu_fem_heat_set_dt(heat: fegpu_heat_t, dt: f64) -> fegpu_status {
    guard(|| registry::get::<HeatStepper>(heat, "heat")?.set_dt(dt))
}

/// Destroys a heat stepper.
#[no_mangle]
pub extern "C" fn fegpu_fem_heat_destroy(heat: fegpu_heat_t) -> fegpu_status {
    guard(|| registry::remove::<HeatStepper>(heat, "heat"))
}

/// An elastodynamics stepper handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_dynamics_t = u64;

/// Newmark's implicit scheme (average acceleration: beta 1/4, gamma 1/2).
pub const FEGPU_SCHEME_NEWMARK: i32 = 1;
/// The explicit central-difference scheme with the lumped (row-sum) mass.
pub const FEGPU_SCHEME_CENTRAL_DIFFERENCE: i32 = 2;
/// Central differences with nonlinear total Lagrangian internal forces (St
/// Venant-Kirchhoff: large rotations and strains; FEStudio's Algorithm 1),
/// element by element: needs the densities, neither integration nor assembly.
pub const FEGPU_SCHEME_TOTAL_LAGRANGIAN: i32 = 3;

/// Creates an elastodynamics stepper (M u'' + K u = F) for an elasticity set
/// integrated with its densities (fegpu_fem_set_density) and assembled:
/// `scheme` FEGPU_SCHEME_NEWMARK with `beta`, `gamma` (unconditionally stable
/// for gamma >= 1/2, beta >= (gamma + 1/2)^2 / 4) or
/// FEGPU_SCHEME_CENTRAL_DIFFERENCE or FEGPU_SCHEME_TOTAL_LAGRANGIAN
/// (explicit: dt below the critical step 2 / omega_max; beta and gamma
/// ignored; the latter needs no integration or assembly, 2-D sets in plane
/// strain). An explicit dt above the critical step is refused
/// (FEGPU_ERR_INVALID_ARGUMENT, the estimated limit in the message):
/// omega_max is estimated from below by a few products with K, so a dt just
/// above the limit may pass. The dofs clamped[i] (i < n_clamped, counted
/// from index_base) stay at zero. The state (velocity, acceleration) stays
/// on the device; the first step starts from rest.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_dynamics_create(
    fem: fegpu_fem_t,
    scheme: i32,
    dt: f64,
    beta: f64,
    gamma: f64,
    n_clamped: i64,
    clamped: *const i64,
    index_base: i32,
    dynamics: *mut fegpu_dynamics_t,
) -> fegpu_status {
    guard(|| {
        let out = out_param(dynamics, "dynamics")?;
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let scheme = match scheme {
            FEGPU_SCHEME_NEWMARK => Scheme::Newmark { beta, gamma },
            FEGPU_SCHEME_CENTRAL_DIFFERENCE => Scheme::CentralDifference,
            FEGPU_SCHEME_TOTAL_LAGRANGIAN => Scheme::TotalLagrangian,
            s => {
                return Err(crate::error::Error::invalid(format!(
                    "scheme = {s}: expected FEGPU_SCHEME_NEWMARK (1), FEGPU_SCHEME_CENTRAL_DIFFERENCE (2) \
                     or FEGPU_SCHEME_TOTAL_LAGRANGIAN (3)"
                )))
            }
        };
        let clamped = index_list_max(n_clamped, set.dofs(), "dofs of the set", clamped, index_base, ("n_clamped", "clamped"))?;
        let n = set.dofs() as i64;
        if let Some((i, d)) = clamped.iter().enumerate().find(|(_, &d)| !(0..n).contains(&d.saturating_sub(index_base as i64))) {
            return Err(crate::error::Error::invalid(format!(
                "{at_clamped_i} = {d}: outside dofs {index_base}..{}",
                n - 1 + index_base as i64,
                at_clamped_i = crate::error::at("clamped", i)
            )));
        }
        let owner = registry::owner_of(fem).unwrap_or(0);
        let stepper = DynamicsStepper::new(set, dt, scheme, clamped, index_base as i64)?;
        *out = registry::insert(Arc::new(stepper), owner);
        Ok(())
    })
}

/// One step: the displacements `u` (on the device) advance by dt in place
/// under the nodal load `f` (0: none); Newmark's solves to `tol` in at most
/// `maxit` CG iterations (ignored by central differences); a step whose
/// solve fails (`FEGPU_ERR_NOT_CONVERGED`, a breakdown) leaves `u` and the
/// stepper's velocities and accelerations as they were, so it can be
/// retried (with a larger `maxit`, say). The first step refuses a `u` or `f`
/// that is not finite (later steps take them as given, without a read back).
#[no_mangle]
pub extern "C" fn fegpu_fem_dynamics_step(
    dynamics: fegpu_dynamics_t,
    u: fegpu_array_t,
    f: fegpu_array_t,
    tol: f64,
    maxit: i64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<crate::fem::dynamics::DynamicsStepper>(dynamics, "dynamics")?;
        let f = if f == 0 { None } else { Some(registry::get::<crate::array::Array>(f, "F")?) };
        s.step(&*registry::get::<crate::array::Array>(u, "u")?, f.as_deref(), tol, maxit)
    })
}

/// Rayleigh damping from the next step on: C = alpha M + beta K (Newmark:
/// its effective stiffness is rebuilt), or for central differences the
/// diagonal C = alpha M_L (beta must be 0 there: the scheme stays explicit).
/// Both >= 0; 0, 0 (the default) is undamped.
#[no_mangle]
pub extern "C" fn fegpu_fem_dynamics_set_damping(dynamics: fegpu_dynamics_t, alpha: f64, beta: f64) -> fegpu_status {
    guard(|| registry::get::<DynamicsStepper>(dynamics, "dynamics")?.set_damping(alpha, beta))
}

/// Prescribed displacements: values[i] for the stepper's clamped[i] (n =
/// n_clamped, the order given at creation), taken at the end of every
/// following step until set again (time-dependent motion: set it before
/// each step). Host values; 0 until set.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_dynamics_set_displacements(
    dynamics: fegpu_dynamics_t,
    values: *const f64,
    n: i64,
) -> fegpu_status {
    guard(|| {
        let s = registry::get::<DynamicsStepper>(dynamics, "dynamics")?;
        let n = crate::error::non_negative("n", n)?;
        s.set_displacements(host_in(values, n, "values")?)
    })
}

/// Destroys an elastodynamics stepper.
#[no_mangle]
pub extern "C" fn fegpu_fem_dynamics_destroy(dynamics: fegpu_dynamics_t) -> fegpu_status {
    guard(|| registry::remove::<DynamicsStepper>(dynamics, "dynamics"))
}

/// A thermal-stress handle (0 is never valid).
#[allow(non_camel_case_types)]
pub type fegpu_stress_t = u64;

/// Values per material in `laws` before the creep terms.
pub const FEGPU_STRESS_LAW_HEAD: i32 = 8;
/// Values per creep term.
pub const FEGPU_STRESS_LAW_TERM: i32 = 4;

/// Creates an incremental thermal-stress solve (concrete dams) on a 3-D
/// elasticity set (tet4, hex8; props (E, nu): nu is used, the moduli come
/// from the laws). `laws` holds, per material, 8 + 4 n_terms values: the
/// modulus law (0: E0 (1 - exp(-a tau^b)), 1: E0 tau / (a + tau), 2: E0),
/// E0, a, b; alpha (thermal expansion); g_inf, c, d of the autogenous
/// volume strain g_inf (1 - exp(-c tau^d)); then per creep term f, g, q, r of
/// C(t, tau) = sum (f + g tau^-q) (1 - exp(-r (t - tau))), tau the age
/// (time - cast[e], cast per element). The solve starts at t0 with the
/// nodes' `temperature` (host values); the dofs fixed[i] (i < n_fixed,
/// counted from index_base) stay at zero displacement.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_stress_create(
    fem: fegpu_fem_t,
    n_terms: i32,
    laws: *const f64,
    cast: *const f64,
    t0: f64,
    temperature: *const f64,
    n_fixed: i64,
    fixed: *const i64,
    index_base: i32,
    stress: *mut fegpu_stress_t,
) -> fegpu_status {
    guard(|| {
        use crate::fem::stress::{law_stride, ThermalStress};
        let out = out_param(stress, "stress")?;
        let set = registry::get::<crate::fem::ElementSet>(fem, "fem")?;
        let terms = usize::try_from(n_terms).map_err(|_| Error::invalid(format!("n_terms = {n_terms}: must be >= 0")))?;
        let materials = set.materials()?.props.len() / 2;
        let laws = host_in(laws, items(law_stride(terms.min(8)), materials, "laws")?, "laws")?;
        let (cast, temperature) = (host_in(cast, set.elements, "cast")?, host_in(temperature, set.nodes, "temperature")?);
        let fixed = index_list_max(n_fixed, set.dofs(), "dofs of the set", fixed, index_base, ("n_fixed", "fixed"))?;
        let owner = registry::owner_of(fem).unwrap_or(0);
        let s = ThermalStress::new(set, laws, terms, cast, t0, temperature, fixed, index_base as i64)?;
        *out = registry::insert(Arc::new(s), owner);
        Ok(())
    })
}

/// One step of dt to the temperatures `t` (an array of the set's nodes on
/// the device: the heat stepper's), with `load` an increment of nodal loads
/// (0: none). CG with Jacobi to `tol` in at most `maxit` iterations (`info`
/// may be NULL); a failed step leaves the state as it was.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_stress_step(
    stress: fegpu_stress_t,
    dt: f64,
    t: fegpu_array_t,
    load: fegpu_array_t,
    tol: f64,
    maxit: i64,
    info: *mut fegpu_solve_info,
) -> fegpu_status {
    guard(|| {
        let clock = std::time::Instant::now();
        let s = registry::get::<crate::fem::stress::ThermalStress>(stress, "stress")?;
        let load = if load == 0 { None } else { Some(registry::get::<crate::array::Array>(load, "load")?) };
        let outcome = s.step(dt, &*registry::get::<crate::array::Array>(t, "T")?, load.as_deref(), tol, maxit)?;
        write_info(info, &outcome, outcome.relative_residual, 0.0, clock);
        Ok(())
    })
}

/// The stresses (xx yy zz xy yz zx) into `out` (n values): with `nodal` 1
/// the nodes' averages of the element means (6 x nodes), with 0 every Gauss
/// point's (6 x points per element x elements, element after element).
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_stress_download(stress: fegpu_stress_t, nodal: i32, out: *mut f64, n: i64) -> fegpu_status {
    guard(|| {
        let s = registry::get::<crate::fem::stress::ThermalStress>(stress, "stress")?;
        if nodal != 0 && nodal != 1 {
            return Err(Error::invalid(format!("nodal = {nodal}: must be 0 (every Gauss point) or 1 (the nodes)")));
        }
        s.stresses(nodal == 1, host_out(out, crate::error::non_negative("n", n)?, "out")?)
    })
}

/// The displacements accumulated since t0 (n = dofs values) into `out`.
#[no_mangle]
pub unsafe extern "C" fn fegpu_fem_stress_displacements(stress: fegpu_stress_t, out: *mut f64, n: i64) -> fegpu_status {
    guard(|| {
        let s = registry::get::<crate::fem::stress::ThermalStress>(stress, "stress")?;
        s.displacements(host_out(out, crate::error::non_negative("n", n)?, "out")?)
    })
}

/// Destroys a thermal-stress solve.
#[no_mangle]
pub extern "C" fn fegpu_fem_stress_destroy(stress: fegpu_stress_t) -> fegpu_status {
    guard(|| registry::remove::<crate::fem::stress::ThermalStress>(stress, "stress"))
}
