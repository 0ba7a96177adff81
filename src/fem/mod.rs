//! Finite-element sets on the device: nodes, connectivity and materials of
//! one element type, and their element stiffness matrices integrated by Gauss
//! quadrature where the set lives (`cpu.rs` the reference, `cuda.rs` with
//! kernels/fem.cu side by side). K^e is kept in symmetric packed storage:
//! the upper triangle row by row, dofs node-major, stored entry-major (entry
//! k of element e at k * elements + e, so a warp's accesses are coalesced);
//! downloads give the caller element after element.

pub mod cpu;
pub mod cuda;
pub mod dynamics;
pub mod ebe;
mod faces;
pub mod gallery;
pub mod heat;
pub mod loads;
pub mod stress;

use crate::array::Buffer;
use crate::context::Context;
use crate::error::{positive, Error, Result};
use crate::gpu::DeviceBuffer;
use crate::sparse::Csr;
use std::sync::{Arc, Mutex, MutexGuard};

/// How the element matrices are integrated on the device (FEStudio's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Level I: one thread per element.
    Element,
    /// Level II: one element per block, its Gauss points' quantities shared.
    Point,
    /// Level IIa: several elements per block, their Gauss points' quantities shared.
    Blocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    Tri3,
    Quad4,
    Tet4,
    Hex8,
    Tri6,
    Quad8,
    Tet10,
    Hex20,
}

impl Element {
    pub fn name(self) -> &'static str {
        match self {
            Element::Tri3 => "tri3",
            Element::Quad4 => "quad4",
            Element::Tet4 => "tet4",
            Element::Hex8 => "hex8",
            Element::Tri6 => "tri6",
            Element::Quad8 => "quad8",
            Element::Tet10 => "tet10",
            Element::Hex20 => "hex20",
        }
    }
    pub fn dim(self) -> usize {
        match self {
            Element::Tri3 | Element::Quad4 | Element::Tri6 | Element::Quad8 => 2,
            _ => 3,
        }
    }
    pub fn nodes(self) -> usize {
        match self {
            Element::Tri3 => 3,
            Element::Quad4 | Element::Tet4 => 4,
            Element::Tri6 => 6,
            Element::Hex8 | Element::Quad8 => 8,
            Element::Tet10 => 10,
            Element::Hex20 => 20,
        }
    }
    /// A linear simplex (tri3, tet4): constant gradients, one point.
    pub fn is_simplex(self) -> bool {
        self.nodes() == self.dim() + 1
    }
    /// tri6, quad8, tet10, hex20 (integrated at order 3 or more).
    pub fn is_quadratic(self) -> bool {
        matches!(self, Element::Tri6 | Element::Quad8 | Element::Tet10 | Element::Hex20)
    }
    /// Refuses a capability not yet written for quadratic elements.
    pub fn linear_only(self, what: &str) -> Result<()> {
        if self.is_quadratic() {
            return Err(Error::new(
                crate::error::ErrorKind::Unsupported,
                format!("{what} is not yet available for {} elements (linear elements only)", self.name()),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    Heat,
    PlaneStress,
    PlaneStrain,
    Elastic3d,
}

impl Problem {
    /// The problem as the C and Fortran callers name it.
    pub fn name(self) -> &'static str {
        match self {
            Problem::Heat => "FEGPU_PROBLEM_HEAT",
            Problem::PlaneStress => "FEGPU_PROBLEM_PLANE_STRESS",
            Problem::PlaneStrain => "FEGPU_PROBLEM_PLANE_STRAIN",
            Problem::Elastic3d => "FEGPU_PROBLEM_ELASTIC_3D",
        }
    }

    pub fn dofs_per_node(self, dim: usize) -> usize {
        if self == Problem::Heat {
            1
        } else {
            dim
        }
    }
    /// Rows of B: gradient components (heat) or Voigt strains.
    pub fn stress_components(self, dim: usize) -> usize {
        match self {
            Problem::Heat => dim,
            Problem::PlaneStress | Problem::PlaneStrain => 3,
            Problem::Elastic3d => 6,
        }
    }
}

/// Where the set's geometry lives on the device.
pub struct DeviceSet {
    pub coords: DeviceBuffer<f64>,
    pub conn: DeviceBuffer<i32>,
    pub material: DeviceBuffer<i32>,
}

/// The material table (2 x materials), on the host and where the set works,
/// and for elasticity each material's density (0 until set).
pub struct Materials {
    pub props: Vec<f64>,
    pub device: Option<DeviceBuffer<f64>>,
    pub density: Vec<f64>,
}

impl Materials {
    /// The mass matrices' coefficient per material: rho c (heat) or rho.
    pub fn mass_coefficients(&self, problem: Problem) -> Vec<f64> {
        match problem {
            Problem::Heat => self.props.chunks(2).map(|p| p[1]).collect(),
            _ => self.density.clone(),
        }
    }
}

/// The global matrix: its pattern (every pair of dofs sharing an element)
/// and, for each stored entry, the packed element-matrix entries that add up
/// to it, in element order, so assembly is a deterministic gather.
struct Assembly {
    csr: Arc<Csr>,
    /// Entry i sums ke[from[ptr[i]..ptr[i + 1]]].
    ptr: Buffer<i32>,
    from: Buffer<i32>,
}

/// What integration and assembly produce.
#[derive(Default)]
struct Results {
    /// elements x packed_len (entry-major)
    stiffness: Option<Buffer<f64>>,
    /// The mass matrices, the same layout: heat capacity C^e (heat), or
    /// consistent mass M^e (elasticity).
    mass: Option<Buffer<f64>>,
    /// Counts integrations, so element-by-element solvers know when to
    /// rebuild their diagonals.
    version: u64,
    assembly: Option<Assembly>,
    /// The mass coefficients (rho, or rho c) `mass` was integrated with.
    mass_coefficients: Vec<f64>,
}

/// An element set. Host copies of the (validated) input are kept for the
/// CPU backend and for messages; the device holds its own.
pub struct ElementSet {
    pub ctx: Arc<Context>,
    pub element: Element,
    pub problem: Problem,
    pub nodes: usize,
    pub elements: usize,
    pub order: usize,
    /// dim x nodes
    pub coords: Vec<f64>,
    /// nodes per element x elements, 0-based
    pub conn: Vec<i32>,
    /// per element, 0-based
    pub material: Vec<i32>,
    pub device: Option<DeviceSet>,
    /// The integration level the caller chose (None: the fastest measured).
    pub level: Mutex<Option<Level>>,
    /// Set once every element's Jacobian determinant was found positive.
    geometry_checked: std::sync::atomic::AtomicBool,
    materials: Mutex<Materials>,
    results: Mutex<Results>,
}

fn check_props(problem: Problem, props: &[f64]) -> Result<()> {
    for (m, p) in props.chunks(2).enumerate() {
        let ok = match problem {
            Problem::Heat => p[0] > 0.0 && p[0].is_finite() && p[1] >= 0.0 && p[1].is_finite(),
            _ => p[0] > 0.0 && p[0].is_finite() && p[1] > -1.0 && p[1] < 0.5,
        };
        if !ok {
            let need = if problem == Problem::Heat { "k > 0 and rho c >= 0" } else { "E > 0 and -1 < nu < 0.5" };
            let props = crate::error::column("props", m, 2);
            return Err(Error::invalid(format!("{props} = ({}, {}): material {} needs {need}", p[0], p[1], m + 1)));
        }
    }
    Ok(())
}

/// Validated 0-based indices below `limit` from the caller's `base`.
fn indices(name: &str, caller: &[i64], base: i64, limit: usize, per: usize, what: &str) -> Result<Vec<i32>> {
    caller
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let z = v.saturating_sub(base);
            if z < 0 || z >= limit as i64 {
                let at = if per > 1 { crate::error::at2(name, i % per, i / per, per) } else { crate::error::at(name, i) };
                Err(Error::invalid(format!(
                    "{at} = {v}: {what} index out of range {base}..{} (index base {base})",
                    limit as i64 + base - 1
                )))
            } else {
                Ok(z as i32)
            }
        })
        .collect()
}

/// A stepper's time step: positive and finite.
fn check_dt(dt: f64) -> Result<()> {
    if !(dt > 0.0 && dt.is_finite()) {
        return Err(Error::invalid(format!("dt = {dt}: must be positive and finite")));
    }
    // the schemes' coefficients hold 1 / dt and 1 / dt^2
    if !(1.0 / (dt * dt)).is_finite() {
        return Err(Error::invalid(format!("dt = {dt:e}: too small (1 / dt^2 overflows); rescale time")));
    }
    Ok(())
}

/// A caller's list of dofs counted from `base` as 0-based indices below n,
/// each listed once (`arg` names the list in messages).
fn dof_list(n: usize, dofs: &[i64], base: i64, arg: &str) -> Result<Vec<usize>> {
    let mut seen = vec![false; n];
    dofs.iter()
        .enumerate()
        .map(|(i, &d)| {
            let at = crate::error::at(arg, i);
            let d0 = usize::try_from(d.saturating_sub(base)).ok().filter(|&d0| d0 < n).ok_or_else(|| {
                Error::invalid(format!("{at} = {d}: outside dofs {base}..{} (index base {base})", n as i64 - 1 + base))
            })?;
            if std::mem::replace(&mut seen[d0], true) {
                return Err(Error::invalid(format!("{at} = {d} is listed twice")));
            }
            Ok(d0)
        })
        .collect()
}

/// The global matrix's pattern from each node's sorted neighbours (nbr
/// from nbr_ptr[v] to nbr_ptr[v + 1]): row (node v, component c) holds
/// every component d of every neighbour w, column w dpn + d, and starts at
/// dpn (dpn nbr_ptr[v] + c deg(v)), the rows of node v one after the other.
/// Written node by node on rayon's threads (the device build downloads only
/// the neighbours, a ninth of the columns of 3-D elasticity).
fn pattern_of_neighbours(dpn: usize, nbr_ptr: &[i32], nbr: &[i32]) -> Result<crate::sparse::Pattern> {
    use rayon::prelude::*;
    let nodes = nbr_ptr.len() - 1;
    let (ndof, nnz) = (nodes * dpn, nbr.len() * dpn * dpn);
    let mut row_ptr = crate::error::host_vec(ndof + 1, 0i32, "the pattern's row pointers")?;
    let mut col: Vec<i32> = crate::error::host_with_capacity(nnz, "the pattern's columns")?;
    let mut diag = crate::error::host_vec(ndof, -1i32, "the pattern's diagonals")?;
    // each node's stretch of the columns, then every stretch filled in
    // parallel (unwritten memory: its first touch, too, is spread over the threads)
    let mut stretches = Vec::with_capacity(nodes);
    let mut rest = &mut col.spare_capacity_mut()[..nnz];
    for v in 0..nodes {
        let (mine, after) = rest.split_at_mut(dpn * dpn * (nbr_ptr[v + 1] - nbr_ptr[v]) as usize);
        stretches.push(mine);
        rest = after;
    }
    stretches.into_par_iter().zip(row_ptr.par_chunks_mut(dpn)).zip(diag.par_chunks_mut(dpn)).enumerate().for_each(
        |(v, ((cols, rows), diags))| {
            let (lo, hi) = (nbr_ptr[v] as usize, nbr_ptr[v + 1] as usize);
            let at_v = nbr[lo..hi].binary_search(&(v as i32)).ok();
            for c in 0..dpn {
                let start = dpn * (dpn * lo + c * (hi - lo));
                rows[c] = start as i32;
                if let Some(p) = at_v {
                    diags[c] = (start + p * dpn + c) as i32;
                }
                for (k, &w) in nbr[lo..hi].iter().enumerate() {
                    for d in 0..dpn {
                        cols[c * dpn * (hi - lo) + k * dpn + d].write(w * dpn as i32 + d as i32);
                    }
                }
            }
        },
    );
    // SAFETY: the stretches cover the nnz entries, and each wrote all of its own
    unsafe { col.set_len(nnz) };
    row_ptr[ndof] = nnz as i32;
    Ok(crate::sparse::Pattern {
        nrows: ndof,
        ncols: ndof,
        row_ptr: row_ptr.into(),
        col: col.into(),
        diag,
        slot_of: None,
        caller_nnz: nnz,
    })
}

impl ElementSet {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: Arc<Context>,
        element: Element,
        problem: Problem,
        nodes: i64,
        coords: &[f64],
        elements: i64,
        conn: &[i64],
        index_base: i32,
        props: &[f64],
        material: &[i64],
        order: i32,
    ) -> Result<ElementSet> {
        let dim = element.dim();
        let (nodes, elements) = (positive("n_nodes", nodes)?, positive("n_elements", elements)?);
        if (problem == Problem::Elastic3d) != (dim == 3) && problem != Problem::Heat {
            return Err(Error::invalid(format!(
                "problem = {}: does not fit {dim}-D {} elements",
                problem.name(),
                element.name()
            )));
        }
        if !(1..=4).contains(&order) {
            return Err(Error::invalid(format!("order = {order}: Gauss-Legendre orders 1 to 4 are available")));
        }
        // the degree chooses at least: quadratic elements need 3 points a direction
        let order = if element.is_quadratic() { order.max(3) } else { order };
        if index_base != 0 && index_base != 1 {
            return Err(Error::invalid(format!("index_base = {index_base}: expected 0 or 1")));
        }
        if nodes >= i32::MAX as usize || elements.saturating_mul(element.nodes()) >= i32::MAX as usize {
            return Err(Error::new(crate::error::ErrorKind::Unsupported, "element sets of 2^31 nodes or connectivity entries"));
        }
        if coords.len() != dim * nodes
            || conn.len() != element.nodes() * elements
            || material.len() != elements
            || props.is_empty()
            || !props.len().is_multiple_of(2)
        {
            return Err(Error::size("coords, conn, material or props do not match the sizes"));
        }
        if let Some(i) = coords.iter().position(|c| !c.is_finite()) {
            return Err(Error::invalid(format!(
                "{} = {}: not finite",
                crate::error::at2("coords", i % dim, i / dim, dim),
                coords[i]
            )));
        }
        check_props(problem, props)?;
        let conn = indices("conn", conn, index_base as i64, nodes, element.nodes(), "node")?;
        let material = indices("material", material, index_base as i64, props.len() / 2, 1, "material")?;
        use crate::sparse::cuda::upload;
        let device = match ctx.gpu() {
            None => None,
            Some(g) => Some(DeviceSet { coords: upload(g, coords)?, conn: upload(g, &conn)?, material: upload(g, &material)? }),
        };
        let materials = Materials {
            props: props.to_vec(),
            device: ctx.gpu().map(|g| upload(g, props)).transpose()?,
            density: vec![0.0; props.len() / 2],
        };
        Ok(ElementSet {
            ctx,
            element,
            problem,
            nodes,
            elements,
            order: order as usize,
            coords: coords.to_vec(),
            conn,
            material,
            device,
            level: Mutex::new(None),
            geometry_checked: Default::default(),
            materials: Mutex::new(materials),
            results: Mutex::new(Results::default()),
        })
    }

    /// The materials and the integration's results; refused once a call that
    /// panicked holding them may have left them half-changed (`error::locked`).
    pub fn materials(&self) -> Result<MutexGuard<'_, Materials>> {
        crate::error::locked(&self.materials, "the element set")
    }

    fn results(&self) -> Result<MutexGuard<'_, Results>> {
        crate::error::locked(&self.results, "the element set")
    }

    /// New material parameters (the same number of materials); the element
    /// matrices are recomputed at the next `integrate`.
    pub fn set_materials(&self, props: &[f64]) -> Result<()> {
        let mut m = self.materials()?;
        if props.len() != m.props.len() {
            return Err(Error::size(format!(
                "props has {} values; the set has {} materials (2 values each)",
                props.len(),
                m.props.len() / 2
            )));
        }
        check_props(self.problem, props)?;
        if let (Some(g), Some(d)) = (self.ctx.gpu(), &mut m.device) {
            g.upload(props, d, 0)?;
        }
        m.props.copy_from_slice(props);
        Ok(())
    }

    /// Dofs of one element.
    pub fn element_dofs(&self) -> usize {
        self.element.nodes() * self.problem.dofs_per_node(self.element.dim())
    }

    /// Entries of one packed K^e.
    pub fn packed_len(&self) -> usize {
        let nd = self.element_dofs();
        nd * (nd + 1) / 2
    }

    pub(crate) fn bad_element(&self, e: usize) -> Error {
        let nodes: Vec<String> =
            self.conn[e * self.element.nodes()..(e + 1) * self.element.nodes()].iter().map(|n| (n + 1).to_string()).collect();
        Error::invalid(format!(
            "element {} ({}, nodes {} counted from 1): the Jacobian determinant is not positive and finite (an inverted or degenerate element, or coordinates whose det J overflows)",
            e + 1,
            self.element.name(),
            nodes.join(" ")
        ))
    }

    /// Integrates every K^e and every mass matrix (heat capacity, or
    /// consistent mass with the densities) where the set lives. A bad element
    /// fails the call and leaves the previous matrices as they were.
    pub fn integrate(&self) -> Result<()> {
        let stiffness = self.integrate_one(false, None)?;
        self.geometry_checked.store(true, std::sync::atomic::Ordering::Relaxed);
        self.check_finite(&stiffness, "K^e")?;
        let coefficients = self.materials()?.mass_coefficients(self.problem);
        let mass = self.integrate_one(true, None)?;
        self.check_finite(&mass, "the mass matrix")?;
        let mut r = self.results()?;
        (r.stiffness, r.mass, r.mass_coefficients) = (Some(stiffness), Some(mass), coefficients);
        r.version += 1;
        Ok(())
    }

    /// Refuses element matrices with a value that is not finite (material
    /// parameters, or elements, so large that the products overflow), naming
    /// the first such element and its material; one pass finds whether any is.
    fn check_finite(&self, matrices: &Buffer<f64>, what: &str) -> Result<()> {
        let largest = match matrices {
            Buffer::Host(v) => crate::array::vector::amax(v),
            Buffer::Device(d) => crate::array::cuda::amax(self.ctx.device()?, d.len(), d)?,
        };
        if largest.is_finite() {
            return Ok(());
        }
        let host = match matrices {
            Buffer::Host(v) => std::borrow::Cow::Borrowed(v.as_slice()),
            Buffer::Device(d) => {
                let mut h = vec![0.0; d.len()];
                self.ctx.device()?.download(d, 0, &mut h)?;
                std::borrow::Cow::Owned(h)
            }
        };
        // stored entry-major: entry k of element e at k * elements + e
        let e = host.iter().position(|x| !x.is_finite()).map_or(0, |k| k % self.elements.max(1));
        let m = self.material[e] as usize;
        let props = &self.materials()?.props;
        Err(Error::invalid(format!(
            "element {} (material {}, props {:?}): {what} is not finite: the material's values or the element's size overflow it",
            e + 1,
            m + 1,
            &props[2 * m..2 * m + 2]
        )))
    }

    /// The element stiffness matrices with material parameters `props`
    /// (2 per material) instead of the set's, not kept by the set.
    pub(crate) fn stiffness_with(&self, props: &[f64]) -> Result<Buffer<f64>> {
        self.integrate_one(false, Some(props))
    }

    fn integrate_one(&self, mass: bool, props: Option<&[f64]>) -> Result<Buffer<f64>> {
        let total = self.packed_len() * self.elements;
        let m = self.materials()?;
        let coef = m.mass_coefficients(self.problem);
        let props_d = match (props, self.ctx.gpu()) {
            (Some(p), Some(g)) => Some(crate::sparse::cuda::upload(g, p)?),
            _ => None,
        };
        let device_props = props_d.as_ref().or(m.device.as_ref());
        let host_props = props.unwrap_or(&m.props);
        Ok(match (self.ctx.gpu(), &self.device, device_props) {
            (None, _, _) => {
                let mut ke = vec![f64::NAN; total];
                let done = if mass { cpu::mass(self, &coef, &mut ke) } else { cpu::stiffness(self, host_props, &mut ke) };
                done.map_err(|e| self.bad_element(e))?;
                Buffer::Host(ke)
            }
            (Some(g), Some(d), Some(props)) => {
                let coef_d;
                let per_material = if mass {
                    coef_d = crate::sparse::cuda::upload(g, &coef)?;
                    &coef_d
                } else {
                    props
                };
                Buffer::Device(cuda::stiffness(g, self, d, per_material, total, mass).map_err(|e| match e {
                    cuda::Failure::Element(e) => self.bad_element(e),
                    cuda::Failure::Other(e) => e,
                })?)
            }
            _ => return Err(Error::new(crate::error::ErrorKind::Internal, "element set without device arrays")),
        })
    }

    /// The integration level of the next `integrate` (None: the fastest
    /// measured; the CPU backend's reference is the same quadrature whatever the level).
    pub fn set_integration(&self, level: Option<Level>) {
        *self.level.lock().unwrap_or_else(|p| p.into_inner()) = level;
    }

    /// The level `integrate` uses: the caller's, or for AUTO the fastest
    /// measured. On the H100 that was level I for every element and problem
    /// (BENCHMARKS.md: its accumulation sits in registers, while levels II
    /// and IIa re-form B^T D B per entry and Gauss point from shared memory).
    pub fn integration_level(&self) -> Level {
        let chosen = self.level.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or(Level::Element);
        if chosen == Level::Element && self.element_dofs() > 24 {
            Level::Blocked // tet10 and hex20 elasticity: a thread cannot hold K^e (no level-I kernel)
        } else {
            chosen
        }
    }

    /// Each material's density (elasticity, for the mass matrices); the next
    /// `integrate` uses it.
    pub fn set_density(&self, rho: &[f64]) -> Result<()> {
        if self.problem == Problem::Heat {
            return Err(Error::invalid("a heat set's mass is its capacity: props(2, m) = rho c"));
        }
        let mut m = self.materials()?;
        if rho.len() != m.density.len() {
            return Err(Error::size(format!("rho has {} values; the set has {} materials", rho.len(), m.density.len())));
        }
        if let Some(i) = rho.iter().position(|r| !(*r >= 0.0 && r.is_finite())) {
            return Err(Error::invalid(format!(
                "{} = {}: densities must be >= 0 and finite",
                crate::error::at("rho", i),
                rho[i]
            )));
        }
        m.density.copy_from_slice(rho);
        Ok(())
    }

    /// Assembles the global matrix from the element matrices into the set's
    /// CSR matrix (pattern and map built on the first call, values gathered
    /// where the set lives each call) and returns it (the same matrix every call).
    pub fn assemble(&self) -> Result<Arc<Csr>> {
        let mut r = self.results()?;
        let r = &mut *r;
        let ke = r.stiffness.as_ref().ok_or_else(|| Error::invalid("no element matrices yet: call fegpu_fem_integrate first"))?;
        let a = Self::built(&mut r.assembly, || self.build_assembly())?;
        a.csr.rewrite_values(|values| self.gather(&a.ptr, &a.from, ke, values))?;
        Ok(a.csr.clone())
    }

    /// The global matrix's pattern and the assembly map, built now if not
    /// yet (where the set lives); `assemble` fills in the values.
    pub fn assembly_pattern(&self) -> Result<Arc<Csr>> {
        let mut r = self.results()?;
        Ok(Self::built(&mut r.assembly, || self.build_assembly())?.csr.clone())
    }

    fn built(assembly: &mut Option<Assembly>, build: impl FnOnce() -> Result<Assembly>) -> Result<&mut Assembly> {
        if assembly.is_none() {
            *assembly = Some(build()?);
        }
        Ok(assembly.as_mut().expect("just built"))
    }

    /// Global values (on the assembled pattern) from element matrices `ke`
    /// by the assembly map.
    fn gather(&self, ptr: &Buffer<i32>, from: &Buffer<i32>, ke: &Buffer<f64>, values: &mut Buffer<f64>) -> Result<()> {
        match (values, ke, ptr, from) {
            (Buffer::Host(v), Buffer::Host(ke), Buffer::Host(ptr), Buffer::Host(from)) => {
                cpu::assemble(ptr, from, ke, v);
                Ok(())
            }
            (Buffer::Device(v), Buffer::Device(ke), Buffer::Device(ptr), Buffer::Device(from)) => {
                cuda::assemble(self.ctx.device()?, v.len(), ptr, from, ke, v)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    /// Global values on the assembled pattern from element matrices `ke`
    /// scaled by `scale[e]` per element (`assembly_pattern` first).
    pub(crate) fn gather_scaled(&self, ke: &Buffer<f64>, scale: &Buffer<f64>, values: &mut Buffer<f64>) -> Result<()> {
        let r = self.results()?;
        let a = r.assembly.as_ref().ok_or_else(|| Error::invalid("no assembly pattern yet"))?;
        match (values, ke, scale, &a.ptr, &a.from) {
            (Buffer::Host(v), Buffer::Host(ke), Buffer::Host(sc), Buffer::Host(ptr), Buffer::Host(from)) => {
                cpu::assemble_scaled(ptr, from, ke, sc, v);
                Ok(())
            }
            (Buffer::Device(v), Buffer::Device(ke), Buffer::Device(sc), Buffer::Device(ptr), Buffer::Device(from)) => {
                cuda::assemble_scaled(self.ctx.device()?, v.len(), self.elements, ptr, from, ke, sc, v)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    /// The assembled stiffness (conductivity) K and mass (capacity) M, as
    /// value arrays on the set's assembled pattern (`assemble` first).
    pub fn global_matrices(&self) -> Result<(Buffer<f64>, Buffer<f64>)> {
        let coefficients = self.materials()?.mass_coefficients(self.problem); // (before the results' lock)
        let r = self.results()?;
        let (Some(ke), Some(ce), Some(a)) = (&r.stiffness, &r.mass, &r.assembly) else {
            return Err(Error::invalid("no assembled matrices yet: call fegpu_fem_integrate and fegpu_fem_assemble first"));
        };
        if r.mass_coefficients != coefficients {
            return Err(Error::invalid(
                "the densities changed after the last fegpu_fem_integrate: integrate again so the mass matrices follow them",
            ));
        }
        let nnz = a.csr.pattern.nnz();
        let mut out = Vec::new();
        for e in [ke, ce] {
            let mut values = match self.ctx.gpu() {
                None => Buffer::Host(vec![0.0; nnz]),
                Some(g) => Buffer::Device(g.alloc::<f64>(nnz.max(1))?),
            };
            self.gather(&a.ptr, &a.from, e, &mut values)?;
            out.push(values);
        }
        let c = out.pop().expect("two");
        Ok((out.pop().expect("two"), c))
    }

    /// `host` where the set works: kept on the host for the CPU backend,
    /// uploaded for CUDA.
    pub(crate) fn resident<T: crate::gpu::DeviceScalar>(&self, host: Vec<T>) -> Result<Buffer<T>> {
        Ok(match self.ctx.gpu() {
            None => Buffer::Host(host),
            Some(g) => Buffer::Device(crate::sparse::cuda::upload(g, &host)?),
        })
    }

    /// The assembled matrix, if `assemble` has run (no re-gathering).
    pub fn assembled(&self) -> Result<Option<Arc<Csr>>> {
        Ok(self.results()?.assembly.as_ref().map(|a| a.csr.clone()))
    }

    /// Refuses the set if an element's Jacobian determinant is not positive
    /// (checked once, by integration or here).
    pub fn check_geometry(&self) -> Result<()> {
        if !self.geometry_checked.load(std::sync::atomic::Ordering::Relaxed) {
            self.element_integrals(&vec![0.0; self.dofs() / self.nodes * self.elements])?;
            // sets the flag
        }
        Ok(())
    }

    /// Total dofs: nodes x dofs per node.
    pub fn dofs(&self) -> usize {
        self.nodes * self.problem.dofs_per_node(self.element.dim())
    }

    /// Refuses a node that no element uses: its row of K and C is empty, so
    /// `what` (a solver or stepper) could not determine its value.
    pub fn check_nodes_used(&self, what: &str) -> Result<()> {
        let mut used = crate::error::host_vec(self.nodes, false, "node flags")?;
        self.conn.iter().for_each(|&n| used[n as usize] = true);
        match used.iter().position(|u| !u) {
            Some(n) => Err(Error::invalid(format!(
                "node {} (1-based; {n} 0-based) belongs to no element, so {what} cannot determine its value: \
                 remove it from the mesh (renumber the nodes) or give it an element",
                n + 1
            ))),
            None => Ok(()),
        }
    }

    /// Runs `f` with the element matrices and their version (an error before
    /// the first integration).
    pub fn with_stiffness<T>(&self, f: impl FnOnce(&Buffer<f64>, u64) -> Result<T>) -> Result<T> {
        let r = self.results()?;
        match &r.stiffness {
            Some(ke) => f(ke, r.version),
            None => Err(Error::invalid("no element matrices yet: call fegpu_fem_integrate first")),
        }
    }

    /// The lumped (diagonal) mass with the densities: the integrals of rho
    /// N_a (M's row sums) for linear elements; for quadratic ones, whose row
    /// sums are not all positive, HRZ's scaled diagonal of the integrated
    /// mass matrices (`integrate` first).
    pub fn lumped_mass(&self) -> Result<Buffer<f64>> {
        if !self.element.is_quadratic() {
            let dpn = self.problem.dofs_per_node(self.element.dim());
            let coef = self.materials()?.mass_coefficients(self.problem);
            let rho: Vec<f64> = self.material.iter().flat_map(|&m| std::iter::repeat_n(coef[m as usize], dpn)).collect();
            return self.element_integrals(&rho);
        }
        let mut out = self.zeroed(self.dofs())?;
        let r = self.results()?;
        let ce = r.mass.as_ref().ok_or_else(|| Error::invalid("no mass matrices yet: call fegpu_fem_integrate first"))?;
        match (&mut out, ce, &self.device) {
            (Buffer::Host(o), Buffer::Host(ce), _) => cpu::hrz_lump(self, ce, o),
            (Buffer::Device(o), Buffer::Device(ce), Some(d)) => cuda::hrz_lump(self.ctx.device()?, self, d, ce, o)?,
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(out)
    }

    /// Global dof of element e's local dof p (node-major).
    pub fn global_dof(&self, e: usize, p: usize) -> usize {
        let dpn = self.problem.dofs_per_node(self.element.dim());
        self.conn[e * self.element.nodes() + p / dpn] as usize * dpn + p % dpn
    }

    fn build_assembly(&self) -> Result<Assembly> {
        let (nn, ne, nodes) = (self.element.nodes(), self.elements, self.nodes);
        let dpn = self.problem.dofs_per_node(self.element.dim());
        let nd = nn * dpn;
        let contributions = ne * nd * nd;
        if contributions >= i32::MAX as usize || ne * self.packed_len() >= i32::MAX as usize {
            return Err(Error::new(
                crate::error::ErrorKind::Unsupported,
                format!("{contributions} element contributions: assembly maps hold int32 indices"),
            ));
        }
        if let (Some(g), Some(d)) = (self.ctx.gpu(), &self.device) {
            return self.device_assembly(g, d);
        }
        // Node level first: the elements of each node, then each node's
        // neighbours (the nodes it shares an element with), sorted. A dof row
        // (node i, component c) holds every component of every neighbour.
        let node_of = |e: usize, a: usize| self.conn[e * nn + a] as usize;
        let mut elem_ptr = vec![0usize; nodes + 1];
        self.conn.iter().for_each(|&v| elem_ptr[v as usize + 1] += 1);
        for v in 0..nodes {
            elem_ptr[v + 1] += elem_ptr[v];
        }
        let mut elems = vec![0usize; self.conn.len()];
        let mut fill = elem_ptr.clone();
        for e in 0..ne {
            for a in 0..nn {
                elems[fill[node_of(e, a)]] = e;
                fill[node_of(e, a)] += 1;
            }
        }
        let mut nbr_ptr = vec![0usize; nodes + 1];
        let mut nbr: Vec<usize> = Vec::new();
        let mut seen = vec![usize::MAX; nodes];
        for v in 0..nodes {
            let start = nbr.len();
            for &e in &elems[elem_ptr[v]..elem_ptr[v + 1]] {
                for b in 0..nn {
                    let w = node_of(e, b);
                    if seen[w] != v {
                        seen[w] = v;
                        nbr.push(w);
                    }
                }
            }
            nbr[start..].sort_unstable();
            nbr_ptr[v + 1] = nbr.len();
        }
        drop(elems);
        let nnz = nbr.len() * dpn * dpn;
        let row_start = |v: usize, c: usize| dpn * (dpn * nbr_ptr[v] + c * (nbr_ptr[v + 1] - nbr_ptr[v]));
        // the entry of (node v, component c; node w, component d)
        let position =
            |v: usize, w: usize| nbr[nbr_ptr[v]..nbr_ptr[v + 1]].binary_search(&w).expect("neighbours hold every element pair");
        // row i of the packed upper triangle starts after rows 0..i: i nd - i (i - 1) / 2
        let packed = |p: usize, q: usize| {
            let (i, j) = (p.min(q), p.max(q));
            i * nd - i * i.saturating_sub(1) / 2 + (j - i)
        };
        // each element's (node, node) entry blocks, in element order (deterministic sums)
        let for_each_contribution = |mut visit: Box<dyn FnMut(usize, usize, usize) + '_>| {
            for e in 0..ne {
                for a in 0..nn {
                    for b in 0..nn {
                        let (v, w) = (node_of(e, a), node_of(e, b));
                        let at = position(v, w);
                        for c in 0..dpn {
                            for d in 0..dpn {
                                visit(row_start(v, c) + at * dpn + d, e, packed(a * dpn + c, b * dpn + d));
                            }
                        }
                    }
                }
            }
        };
        let mut ptr = vec![0i32; nnz + 1];
        for_each_contribution(Box::new(|k, _, _| ptr[k + 1] += 1));
        for i in 0..nnz {
            ptr[i + 1] += ptr[i];
        }
        let mut next: Vec<i32> = ptr[..nnz].to_vec();
        let mut from = vec![0i32; contributions];
        for_each_contribution(Box::new(|k, e, q| {
            from[next[k] as usize] = (q * ne + e) as i32;
            next[k] += 1;
        }));
        let nbr_ptr: Vec<i32> = nbr_ptr.iter().map(|&p| p as i32).collect();
        let nbr: Vec<i32> = nbr.iter().map(|&w| w as i32).collect();
        let pattern = pattern_of_neighbours(dpn, &nbr_ptr, &nbr)?;
        let csr = Arc::new(Csr::new(self.ctx.clone(), pattern, &vec![0.0; nnz])?);
        let (ptr, from) = (self.resident(ptr)?, self.resident(from)?);
        Ok(Assembly { csr, ptr, from })
    }

    /// The same pattern and map built on the device (kernels/fem.cu `map_*`);
    /// the host's copy of the pattern is expanded from the downloaded neighbours.
    fn device_assembly(&self, g: &crate::gpu::Gpu, d: &DeviceSet) -> Result<Assembly> {
        let map = cuda::assembly_map(g, self, d)?;
        let mut nbr_ptr = crate::error::host_vec(self.nodes + 1, 0i32, "the nodes' neighbour pointers")?;
        g.download(&map.nbr_ptr, 0, &mut nbr_ptr)?;
        let mut nbr = crate::error::host_vec(nbr_ptr[self.nodes] as usize, 0i32, "the nodes' neighbours")?;
        g.download(&map.nbr, 0, &mut nbr)?;
        let pattern = pattern_of_neighbours(self.problem.dofs_per_node(self.element.dim()), &nbr_ptr, &nbr)?;
        let csr = Arc::new(Csr::on_device(self.ctx.clone(), pattern, map.row_ptr, map.col, map.diag)?);
        Ok(Assembly { csr, ptr: Buffer::Device(map.ptr), from: Buffer::Device(map.from) })
    }

    /// The packed element matrices (packed_len x elements, element after
    /// element): the stiffness, or with `mass` the mass (heat capacity).
    pub fn download_matrices(&self, mass: bool, out: &mut [f64]) -> Result<()> {
        let total = self.packed_len() * self.elements;
        if out.len() != total {
            return Err(Error::size(format!(
                "the output has {} elements; {} packed entries x {} elements = {total} are needed",
                out.len(),
                self.packed_len(),
                self.elements
            )));
        }
        let r = self.results()?;
        let stored = match (mass, &r.stiffness, &r.mass) {
            (_, None, _) | (true, _, None) => {
                return Err(Error::invalid("no element matrices yet: call fegpu_fem_integrate first"))
            }
            (false, Some(m), _) | (true, _, Some(m)) => match m {
                Buffer::Host(h) => h.clone(),
                Buffer::Device(d) => {
                    let mut h = vec![0.0; total];
                    self.ctx.device()?.download(d, 0, &mut h)?;
                    h
                }
            },
        };
        // entry-major to the caller's element after element
        let (np, ne) = (self.packed_len(), self.elements);
        for (k, column) in stored.chunks(ne).enumerate() {
            for (e, &v) in column.iter().enumerate() {
                out[e * np + k] = v;
            }
        }
        Ok(())
    }
}
