//! Load vectors integrated where the set lives: body forces and heat
//! sources per element, and on element faces tractions, pressures, heat
//! fluxes and convection (the face matrices h N_a N_b go to the heat
//! stepper); and the nonlinear internal forces f_int(u). Each adds into the caller's load vector, so several loads
//! build up one F as an assembly loop would; a bad argument or element
//! leaves it as it was (the integrals are formed apart, then added).

use super::{cpu, cuda, ElementSet, Problem};
use crate::array::{Array, Buffer};
use crate::error::{Error, Result};
use crate::sparse::f64_buf;

/// What a face load integrates (kernels/fem.cu `FaceKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaceKind {
    /// A traction vector per face (dim values).
    Traction = 1,
    /// A pressure per face, pushing against the outward normal.
    Pressure = 2,
    /// A heat flux into the body per face.
    Flux = 3,
    /// h and T_env per face: the load h T_env N_a and the matrix h N_a N_b.
    Convection = 4,
}

impl FaceKind {
    /// Values per face.
    pub fn values(self, dim: usize) -> usize {
        match self {
            FaceKind::Traction => dim,
            FaceKind::Pressure | FaceKind::Flux => 1,
            FaceKind::Convection => 2,
        }
    }
}

/// The face integrals of one call: the load (dofs), and for convection the
/// packed face matrices (entry-major).
pub struct FaceIntegrals {
    pub load: Buffer<f64>,
    pub matrices: Option<Buffer<f64>>,
    /// The faces' nodes, 0-based, face after face.
    pub faces: Vec<i32>,
}

/// Nodes of one face of `element`: an edge of a 2-D element, a triangle of
/// tet4, a quadrilateral of hex8 (the quadratic ones with their midpoints).
pub fn face_nodes(element: super::Element) -> usize {
    match element {
        super::Element::Tri3 | super::Element::Quad4 => 2,
        super::Element::Tet4 => 3,
        super::Element::Hex8 => 4,
        super::Element::Tri6 | super::Element::Quad8 => 3,
        super::Element::Tet10 => 6,
        super::Element::Hex20 => 8,
    }
}

impl ElementSet {
    /// Nodes of one face (`face_nodes` of the set's element).
    pub fn face_nodes(&self) -> usize {
        face_nodes(self.element)
    }

    /// A zeroed vector of `n` values where the set lives.
    pub(crate) fn zeroed(&self, n: usize) -> Result<Buffer<f64>> {
        Ok(match self.ctx.gpu() {
            None => Buffer::Host(crate::error::host_vec(n, 0.0, "a load vector")?),
            Some(g) => Buffer::Device(g.zeros::<f64>(n.max(1))?),
        })
    }

    /// The integrals of N_a b_e over the elements (b: dofs-per-node values
    /// per element), a new vector. The lumped mass is this with b = rho.
    pub fn element_integrals(&self, b: &[f64]) -> Result<Buffer<f64>> {
        let mut out = self.zeroed(self.dofs())?;
        match (&mut out, &self.device) {
            (Buffer::Host(f), _) => cpu::body_load(self, b, f).map_err(|e| self.bad_element(e))?,
            (Buffer::Device(f), Some(d)) => {
                let g = self.ctx.device()?;
                let bd = crate::sparse::cuda::upload(g, b)?;
                cuda::body_load(g, self, d, &bd, f).map_err(|e| match e {
                    cuda::Failure::Element(e) => self.bad_element(e),
                    cuda::Failure::Other(e) => e,
                })?
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        self.geometry_checked.store(true, std::sync::atomic::Ordering::Relaxed); // every det J was positive
        Ok(out)
    }

    /// f += the integral of N^T b over every element, b constant on each:
    /// `values` holds the dofs per node of each element in turn (a body
    /// force per unit volume, components x elements; or a heat source).
    pub fn body_load(&self, values: &[f64], f: &Array) -> Result<()> {
        let dpn = self.problem.dofs_per_node(self.element.dim());
        if values.len() != dpn * self.elements {
            return Err(Error::size(format!(
                "values has {} entries; {dpn} per element x {} elements = {} are needed",
                values.len(),
                self.elements,
                dpn * self.elements
            )));
        }
        finite("values", values)?;
        crate::sparse::check_array(&self.ctx, f, self.dofs(), "F")?;
        let load = self.element_integrals(values)?;
        self.add_into(&load, f)
    }

    /// f += the integrals of `kind` over `faces` (face_nodes() nodes per
    /// face, counted from `base`) with kind.values(dim) `values` per face.
    /// Tractions and pressures load elasticity sets, fluxes heat sets;
    /// convection goes to the heat stepper (it changes the matrix too).
    pub fn face_load(&self, kind: FaceKind, faces: &[i64], base: i64, values: &[f64], f: &Array) -> Result<()> {
        if kind == FaceKind::Convection {
            return Err(Error::invalid(
                "kind = convection: its face matrices change the system; use fegpu_fem_heat_set_convection_faces",
            ));
        }
        crate::sparse::check_array(&self.ctx, f, self.dofs(), "F")?;
        let integrals = self.face_integrals(kind, faces, base, values)?;
        self.add_into(&integrals.load, f)
    }

    /// The face integrals of `kind`, checked as `face_load` says.
    pub fn face_integrals(&self, kind: FaceKind, faces: &[i64], base: i64, values: &[f64]) -> Result<FaceIntegrals> {
        let heat = self.problem == Problem::Heat;
        if heat != matches!(kind, FaceKind::Flux | FaceKind::Convection) {
            return Err(Error::invalid(format!(
                "kind = {kind:?}: a {} set takes {}",
                if heat { "heat" } else { "elasticity" },
                if heat { "fluxes and convection" } else { "tractions and pressures" }
            )));
        }
        let (fnodes, dim) = (self.face_nodes(), self.element.dim());
        if !faces.len().is_multiple_of(fnodes) {
            return Err(Error::size(format!(
                "faces has {} entries: {fnodes} nodes per face of {} elements are needed",
                faces.len(),
                self.element.name()
            )));
        }
        let nf = faces.len() / fnodes;
        let per = kind.values(dim);
        if values.len() != per * nf {
            return Err(Error::size(format!("values has {} entries; {per} per face x {nf} faces are needed", values.len())));
        }
        finite("values", values)?;
        if kind == FaceKind::Convection {
            if let Some(i) = (0..nf).find(|&i| values[2 * i] < 0.0) {
                return Err(Error::invalid(format!("{} = {}: h must be >= 0", crate::error::at("h", i), values[2 * i])));
            }
        }
        let faces = super::indices("faces", faces, base, self.nodes, fnodes, "node")?;
        super::faces::check(self, &faces, fnodes, base)?;
        let mut load = self.zeroed(self.dofs())?;
        let np = fnodes * (fnodes + 1) / 2;
        let mut matrices = (kind == FaceKind::Convection).then(|| self.zeroed(np * nf)).transpose()?;
        match (&mut load, &mut matrices, &self.device) {
            (Buffer::Host(f), m, _) => {
                let mut none = Vec::new();
                let hf = match m {
                    Some(Buffer::Host(h)) => h,
                    _ => &mut none,
                };
                cpu::face_load(self, fnodes, &faces, kind, values, f, hf)
            }
            (Buffer::Device(f), m, Some(d)) => {
                let g = self.ctx.device()?;
                let (fd, vd) = (crate::sparse::cuda::upload(g, &faces)?, crate::sparse::cuda::upload(g, values)?);
                let hf = match m {
                    Some(Buffer::Device(h)) => Some(&*h),
                    _ => None,
                };
                cuda::face_load(g, self, d, fnodes, &fd, nf, kind, &vd, f, hf)?
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(FaceIntegrals { load, matrices, faces })
    }

    /// f += alpha f_int(u), the total Lagrangian internal forces of St
    /// Venant-Kirchhoff material at the displacements u (large rotations
    /// and strains; 2-D in plane strain), element by element.
    pub fn internal_force(&self, alpha: f64, u: &Array, f: &Array) -> Result<()> {
        match self.problem {
            Problem::Heat => return Err(Error::invalid("a heat set has no internal forces: use an elasticity set")),
            Problem::PlaneStress => {
                return Err(Error::new(
                    crate::error::ErrorKind::Unsupported,
                    "total Lagrangian forces in 2-D are plane strain (plane stress's thickness strain is not a displacement)",
                ))
            }
            _ => {}
        }
        self.element.linear_only("the total Lagrangian internal force")?;
        if !alpha.is_finite() {
            return Err(Error::invalid(format!("alpha = {alpha}: must be finite")));
        }
        crate::sparse::check_array(&self.ctx, u, self.dofs(), "u")?;
        crate::sparse::check_array(&self.ctx, f, self.dofs(), "F")?;
        self.check_geometry()?;
        let (mut gu, mut gf) = crate::array::lock_pair(u, f, "u", "F")?;
        let m = self.materials()?;
        match (f64_buf(&mut gu), f64_buf(&mut gf), &self.device, &m.device) {
            (Buffer::Host(uv), Buffer::Host(fv), _, _) => cpu::tl_force(self, &m.props, uv, alpha, fv),
            (Buffer::Device(uv), Buffer::Device(fv), Some(d), Some(props)) => {
                cuda::tl_force(self.ctx.device()?, self, d, props, uv, alpha, fv)?
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(())
    }

    /// f += load (f checked by the caller).
    fn add_into(&self, load: &Buffer<f64>, f: &Array) -> Result<()> {
        let mut gf = f.lock("f")?;
        match (f64_buf(&mut gf), load) {
            (Buffer::Host(fv), Buffer::Host(l)) => fv.iter_mut().zip(l).for_each(|(f, l)| *f += l),
            (Buffer::Device(fv), Buffer::Device(l)) => {
                crate::array::cuda::update(self.ctx.device()?, self.dofs(), fv, 1.0, l, 0.0, None, 1.0)?
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(())
    }
}

fn finite(name: &str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(Error::invalid(format!("{} = {}: must be finite", crate::error::at(name, i), values[i]))),
        None => Ok(()),
    }
}
