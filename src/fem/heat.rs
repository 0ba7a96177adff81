//! Transient heat conduction C dT/dt + K T = F by the theta method, with the
//! matrices, the temperatures and the solver on the device across steps:
//! (C/dt + theta K) T' = (C/dt - (1 - theta) K) T + F every step (theta = 1
//! backward Euler, 1/2 Crank-Nicolson), fixed temperatures applied as the
//! assembled matrix's Dirichlet rows, CG with Jacobi warm-started from T.
//! Convective (Robin) boundaries h (T_env - T) enter in the lumped nodal form
//! legacy codes use (h A per boundary node added to K's diagonal, h A T_env
//! to the load), or as face integrals (the face matrices h N_a N_b added to
//! K's entries, h T_env N_a to the load), or both. K and C are gathered once; a new convection, new fixed
//! temperatures or a new dt recompute the step's values on the device over
//! the same matrix and solver (nothing is rebuilt).

use super::ElementSet;
use crate::array::{Array, Buffer};
use crate::error::{Error, Result};
use crate::sparse::solver::{Method, Outcome, Precond, Solver};
use crate::sparse::{self, cpu as sparse_cpu, cuda as sparse_cuda, f64_buf, Csr};
use std::sync::{Arc, Mutex};

pub struct HeatStepper {
    pub set: Arc<ElementSet>,
    /// The assembled K and C (values on the set's pattern), kept for changes.
    k: Buffer<f64>,
    c: Buffer<f64>,
    /// Each dof's diagonal entry in the pattern.
    diag_at: Buffer<i32>,
    built: Mutex<Built>,
}

/// The step's settings and what they give: matrices over the same pattern
/// and solver, recomputed in place by `refresh`.
struct Built {
    dt: f64,
    theta: f64,
    /// The fixed dofs (0-based) and their temperatures.
    dofs: Vec<i64>,
    values: Vec<f64>,
    /// Nodal convection per dof: h A (0 elsewhere) and the load h A T_env.
    h: Buffer<f64>,
    load: Buffer<f64>,
    /// Face convection: the face matrices summed on the pattern (H's
    /// values) and their load.
    faces: Option<(Buffer<f64>, Buffer<f64>)>,
    /// C/dt + theta (K + H) with the Dirichlet rows, the solver's matrix
    /// (the solver made once the first refresh has written it).
    left: Arc<Csr>,
    solver: Option<Solver>,
    /// C/dt - (1 - theta) (K + H) on the same pattern.
    right: Buffer<f64>,
    /// The fixed dofs' pull on the free rows, (C/dt + theta (K + H)) g, less
    /// the convective load H T_env.
    lift: Array,
    fixed: Buffer<u8>,
    prescribed: Buffer<f64>,
    /// The kept diagonal of the left matrix (b = diag g on fixed rows).
    diag: Buffer<f64>,
    rhs: Array,
}

impl HeatStepper {
    /// For a heat set already integrated and assembled; the fixed dofs
    /// `dofs` (counted from `base`) hold `values` at every step.
    pub fn new(set: Arc<ElementSet>, dt: f64, theta: f64, dofs: &[i64], base: i64, values: &[f64]) -> Result<HeatStepper> {
        super::check_dt(dt)?;
        if !(0.5..=1.0).contains(&theta) {
            return Err(Error::invalid(format!(
                "theta = {theta}: 1/2 (Crank-Nicolson) to 1 (backward Euler) are unconditionally stable"
            )));
        }
        if set.problem != super::Problem::Heat {
            return Err(Error::invalid(format!("the set is a {:?} problem: this stepper is for heat conduction", set.problem)));
        }
        let (k, c) = set.global_matrices()?;
        let assembled = set.assembled()?.expect("global_matrices checked the assembly");
        let n = assembled.pattern.nrows;
        let dofs = fixed_dofs(n, dofs, base, values)?;
        set.check_nodes_used("the heat stepper")?;
        let left = Arc::new(assembled.with_values(&vec![0.0; assembled.pattern.nnz()])?);
        let zero = || Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]));
        let built = Built {
            dt,
            theta,
            dofs,
            values: values.to_vec(),
            h: set.resident(vec![0.0; n])?,
            load: set.resident(vec![0.0; n])?,
            faces: None,
            solver: None,
            right: set.resident(vec![0.0; assembled.pattern.nnz()])?,
            left,
            lift: zero()?,
            fixed: set.resident(vec![0u8; n])?,
            prescribed: set.resident(vec![0.0; n])?,
            diag: set.resident(vec![0.0; n])?,
            rhs: zero()?,
        };
        let stepper = HeatStepper { diag_at: set.resident(assembled.pattern.diag.clone())?, set, k, c, built: Mutex::new(built) };
        {
            let mut b = stepper.built()?;
            stepper.refresh(&mut b)?;
            b.solver = Some(Solver::new(b.left.clone(), Method::Cg, Precond::Jacobi)?);
        }
        Ok(stepper)
    }

    /// Refused once a call that panicked holding it may have left it half-changed (`error::locked`).
    fn built(&self) -> Result<std::sync::MutexGuard<'_, Built>> {
        crate::error::locked(&self.built, "the heat stepper")
    }

    /// Convective boundaries from now on: node `nodes[i]` (counted from
    /// `base`) exchanges h_area[i] (T_env[i] - T) with its surroundings. A
    /// new call replaces the previous set (an empty one removes them).
    pub fn set_convection(&self, nodes: &[i64], base: i64, h_area: &[f64], t_env: &[f64]) -> Result<()> {
        let n = self.set.dofs();
        let (mut h, mut load) = (vec![0.0; n], vec![0.0; n]);
        for (i, &node) in nodes.iter().enumerate() {
            let d = node.saturating_sub(base);
            if d < 0 || d >= n as i64 {
                return Err(Error::invalid(format!(
                    "{at_nodes_i} = {node}: outside nodes {base}..{} (index base {base})",
                    n as i64 - 1 + base,
                    at_nodes_i = crate::error::at("nodes", i)
                )));
            }
            if h_area[i].is_nan() || h_area[i] < 0.0 || !h_area[i].is_finite() || !t_env[i].is_finite() {
                return Err(Error::invalid(format!(
                    "{at_h_area_i} = {}, {at_t_env_i} = {}: h A must be >= 0 and both finite",
                    h_area[i],
                    t_env[i],
                    at_h_area_i = crate::error::at("h_area", i),
                    at_t_env_i = crate::error::at("t_env", i)
                )));
            }
            h[d as usize] += h_area[i];
            load[d as usize] += h_area[i] * t_env[i];
        }
        let (h, load) = (self.set.resident(h)?, self.set.resident(load)?);
        let mut b = self.built()?;
        let old = (std::mem::replace(&mut b.h, h), std::mem::replace(&mut b.load, load));
        self.refresh_or_undo(&mut b, |b| (b.h, b.load) = old)
    }

    /// Convection on element faces from now on: face i (the set's
    /// face_nodes() nodes in `faces`, counted from `base`) exchanges
    /// h[i] (T_env[i] - T) per unit area, integrated over the face. A new
    /// call replaces the previous faces (none removes them); the nodal
    /// convection of `set_convection` stays beside it.
    pub fn set_convection_faces(&self, faces: &[i64], base: i64, h: &[f64], t_env: &[f64]) -> Result<()> {
        if h.len() != t_env.len() {
            return Err(Error::size(format!("h has {} entries, T_env {}", h.len(), t_env.len())));
        }
        let values: Vec<f64> = h.iter().zip(t_env).flat_map(|(&h, &t)| [h, t]).collect();
        let integrals = self.set.face_integrals(super::loads::FaceKind::Convection, faces, base, &values)?;
        let (fnodes, nf) = (self.set.face_nodes(), h.len());
        if nf == 0 {
            let mut b = self.built()?;
            let old = b.faces.take();
            return self.refresh_or_undo(&mut b, |b| b.faces = old);
        }
        // each packed face-matrix entry's place in the pattern, upper and lower (-1: the diagonal's twin)
        let pattern = &self.set.assembled()?.expect("the stepper has the assembled pattern").pattern;
        let np = fnodes * (fnodes + 1) / 2;
        let (mut upper, mut lower) = (vec![0i32; np * nf], vec![-1i32; np * nf]);
        let place = |i: usize, r: i32, c: i32| -> Result<i32> {
            let (start, end) = (pattern.row_ptr[r as usize] as usize, pattern.row_ptr[r as usize + 1] as usize);
            match pattern.col[start..end].binary_search(&c) {
                Ok(k) => Ok((start + k) as i32),
                Err(_) => Err(Error::invalid(format!(
                    "{}: nodes {} and {} share no element, so the face is not on the mesh",
                    crate::error::column("faces", i, fnodes),
                    r as i64 + base,
                    c as i64 + base
                ))),
            }
        };
        for i in 0..nf {
            let nodes = &integrals.faces[i * fnodes..(i + 1) * fnodes];
            let mut k = 0;
            for a in 0..fnodes {
                for b in a..fnodes {
                    upper[k * nf + i] = place(i, nodes[a], nodes[b])?;
                    if a != b {
                        lower[k * nf + i] = place(i, nodes[b], nodes[a])?;
                    }
                    k += 1;
                }
            }
        }
        let summed = match integrals.matrices.expect("convection has face matrices") {
            Buffer::Host(hf) => {
                let mut matrix = vec![0.0; pattern.nnz()];
                for (k, &v) in hf.iter().enumerate() {
                    matrix[upper[k] as usize] += v;
                    if lower[k] >= 0 {
                        matrix[lower[k] as usize] += v;
                    }
                }
                Buffer::Host(matrix)
            }
            Buffer::Device(hf) => {
                let g = self.set.ctx.device()?;
                let out = g.zeros::<f64>(pattern.nnz().max(1))?;
                for at in [upper, lower] {
                    let at = crate::sparse::cuda::upload(g, &at)?;
                    super::cuda::face_matrix_add(g, np * nf, &at, 1.0, &hf, &out)?;
                }
                Buffer::Device(out)
            }
        };
        let mut b = self.built()?;
        let old = b.faces.replace((summed, integrals.load));
        self.refresh_or_undo(&mut b, |b| b.faces = old)
    }

    /// New fixed temperatures from the next step on: `dofs` (counted from
    /// `base`) hold `values`; the dofs fixed before and not listed are free again.
    pub fn set_fixed(&self, dofs: &[i64], base: i64, values: &[f64]) -> Result<()> {
        let dofs = fixed_dofs(self.set.dofs(), dofs, base, values)?;
        let mut b = self.built()?;
        let old = (std::mem::replace(&mut b.dofs, dofs), std::mem::replace(&mut b.values, values.to_vec()));
        self.refresh_or_undo(&mut b, |b| (b.dofs, b.values) = old)
    }

    /// A new time step from the next step on.
    pub fn set_dt(&self, dt: f64) -> Result<()> {
        super::check_dt(dt)?;
        let mut b = self.built()?;
        let old = std::mem::replace(&mut b.dt, dt);
        self.refresh_or_undo(&mut b, |b| b.dt = old)
    }

    /// `refresh` after a setter changed `b`'s settings; where it fails (out
    /// of memory, say) after writing some of the step's values, `undo` puts
    /// the settings back and a second refresh rewrites every value from
    /// them, so the stepper is as it was.
    fn refresh_or_undo(&self, b: &mut Built, undo: impl FnOnce(&mut Built)) -> Result<()> {
        let Err(e) = self.refresh(b) else { return Ok(()) };
        undo(b);
        Err(e.undone(self.refresh(b), "the stepper's new settings"))
    }

    /// The step's values from K, C and the settings, where the set lives:
    /// left and right, the lift of the fixed values, their rows.
    fn refresh(&self, b: &mut Built) -> Result<()> {
        let (dt, theta) = (b.dt, b.theta);
        let p = &b.left.pattern;
        let (n, nnz) = (p.nrows, p.nnz());
        // left = C/dt + theta (K + H), right = C/dt - (1 - theta) (K + H)
        let face_matrix = b.faces.as_ref().map(|f| &f.0);
        let combine = |out: &mut Buffer<f64>, s: f64| -> Result<()> {
            match (out, &self.c, &self.k, &b.h, &self.diag_at, face_matrix) {
                (Buffer::Host(v), Buffer::Host(c), Buffer::Host(k), Buffer::Host(h), Buffer::Host(at), faces) => {
                    crate::array::vector::update(v, 1.0 / dt, c, s, Some(k), 0.0);
                    at.iter().zip(h).for_each(|(&at, h)| v[at as usize] += s * h);
                    if let Some(Buffer::Host(hf)) = faces {
                        v.iter_mut().zip(hf).for_each(|(v, h)| *v += s * h);
                    }
                    Ok(())
                }
                (Buffer::Device(v), Buffer::Device(c), Buffer::Device(k), Buffer::Device(h), Buffer::Device(at), faces) => {
                    let g = self.set.ctx.device()?;
                    crate::array::cuda::update(g, nnz, v, 1.0 / dt, c, s, Some(k), 0.0)?;
                    if let Some(Buffer::Device(hf)) = faces {
                        crate::array::cuda::update(g, nnz, v, s, hf, 0.0, None, 1.0)?;
                    }
                    super::cuda::diagonal_add(g, n, at, s, h, v)
                }
                _ => Err(crate::array::mixed_backends()),
            }
        };
        b.left.rewrite_values(|v| combine(v, theta))?;
        combine(&mut b.right, theta - 1.0)?;
        // the fixed values' pull on the free rows, less the convective load
        let mut g = vec![0.0; n];
        let mut fixed = vec![0u8; n];
        b.dofs.iter().zip(&b.values).for_each(|(&d, &v)| (fixed[d as usize], g[d as usize]) = (1, v));
        let g_array = Array::new(self.set.ctx.clone(), n, 1, Some(&g))?;
        sparse::spmv(&b.left, 1.0, &g_array, 0.0, &b.lift)?;
        {
            let mut gl = b.lift.lock("the stepper's lift")?;
            let left = b.left.values()?;
            match (f64_buf(&mut gl), &b.load, &mut b.diag, &self.diag_at, &left.data) {
                (Buffer::Host(lift), Buffer::Host(load), Buffer::Host(diag), Buffer::Host(at), Buffer::Host(v)) => {
                    lift.iter_mut().zip(load).for_each(|(l, h)| *l -= h);
                    if let Some((_, Buffer::Host(face_load))) = &b.faces {
                        lift.iter_mut().zip(face_load).for_each(|(l, h)| *l -= h);
                    }
                    diag.iter_mut().zip(at).for_each(|(d, &at)| *d = v[at as usize]);
                }
                (Buffer::Device(lift), Buffer::Device(load), Buffer::Device(diag), Buffer::Device(at), Buffer::Device(v)) => {
                    let gpu = self.set.ctx.device()?;
                    crate::array::cuda::update(gpu, n, lift, -1.0, load, 0.0, None, 1.0)?;
                    if let Some((_, Buffer::Device(face_load))) = &b.faces {
                        crate::array::cuda::update(gpu, n, lift, -1.0, face_load, 0.0, None, 1.0)?;
                    }
                    crate::array::cuda::gather(gpu, n, v, at, diag)?;
                }
                _ => return Err(crate::array::mixed_backends()),
            }
        }
        sparse::apply_dirichlet(&b.left, &b.dofs, 0, &b.values, &b.rhs)?; // rhs is scratch
        (b.fixed, b.prescribed) = (self.set.resident(fixed)?, self.set.resident(g)?);
        Ok(())
    }

    /// One step: T (in: this step's temperatures, out: the next) with the
    /// nodal heat load `f` over the step (None: no source).
    pub fn step(&self, t: &Array, f: Option<&Array>, tol: f64, maxit: i64) -> Result<(Outcome, f64)> {
        let built = self.built()?;
        let b = &*built;
        let n = b.left.pattern.nrows;
        sparse::check_vector(&b.left, t, n, "T")?;
        if let Some(f) = f {
            sparse::check_vector(&b.left, f, n, "F")?;
            crate::array::distinct(&[(t, "T"), (f, "F")])?;
        }
        {
            let mut gr = b.rhs.lock("the stepper's right-hand side")?;
            let rhs = f64_buf(&mut gr);
            // T and F in address order (lock_pair), so steppers called from
            // several threads with the arrays swapped cannot deadlock
            let (mut gt, mut gf) = match f {
                Some(f) => {
                    let (gt, gf) = crate::array::lock_pair(t, f, "T", "F")?;
                    (gt, Some(gf))
                }
                None => (t.lock("T")?, None),
            };
            let tb = f64_buf(&mut gt);
            let fb = gf.as_mut().map(|g| f64_buf(g));
            let p = &b.left.pattern;
            let mut gl = b.lift.lock("the stepper's lift")?;
            match (rhs, tb, &b.right, f64_buf(&mut gl), &b.fixed, &b.prescribed, &b.diag) {
                (
                    Buffer::Host(rv),
                    Buffer::Host(tv),
                    Buffer::Host(r),
                    Buffer::Host(lift),
                    Buffer::Host(fixed),
                    Buffer::Host(g),
                    Buffer::Host(d),
                ) => {
                    sparse_cpu::spmv(p, r, 1.0, tv, 0.0, rv);
                    if let Some(Buffer::Host(fv)) = fb {
                        rv.iter_mut().zip(fv.iter()).for_each(|(b, f)| *b += f);
                    }
                    for i in 0..n {
                        rv[i] = if fixed[i] != 0 { d[i] * g[i] } else { rv[i] - lift[i] };
                    }
                }
                (
                    Buffer::Device(rv),
                    Buffer::Device(tv),
                    Buffer::Device(r),
                    Buffer::Device(lift),
                    Buffer::Device(fixed),
                    Buffer::Device(g),
                    Buffer::Device(d),
                ) => {
                    let gpu = self.set.ctx.device()?;
                    let dp = b.left.device.as_ref().ok_or_else(crate::array::mixed_backends)?;
                    sparse_cuda::spmv(gpu, dp, n, r, 1.0, tv, 0.0, rv)?;
                    if let Some(Buffer::Device(fv)) = fb {
                        crate::array::cuda::update(gpu, n, rv, 1.0, fv, 0.0, None, 1.0)?;
                    }
                    super::cuda::dirichlet_rhs(gpu, n, fixed, g, d, lift, rv)?;
                }
                _ => return Err(crate::array::mixed_backends()),
            }
        }
        let solver = b.solver.as_ref().expect("made in new");
        let solved = solver.solve(&b.rhs, t, tol, maxit);
        if solved.is_err() {
            // a NaN in T or F reaches the solve as b's, which refuses it before
            // writing T: named here as the caller passed it (looked for only
            // then, so a step pays one finite check, the solve's)
            t.check_finite("T")?;
            if let Some(f) = f {
                f.check_finite("F")?;
            }
        }
        let (outcome, true_rel, _) = solved?;
        Ok((outcome, true_rel))
    }
}

/// The fixed dofs, 0-based, checked (inside 0..n, each once), with a finite value each.
fn fixed_dofs(n: usize, dofs: &[i64], base: i64, values: &[f64]) -> Result<Vec<i64>> {
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!("{} = {}: must be finite", crate::error::at("values", i), values[i])));
    }
    Ok(super::dof_list(n, dofs, base, "dofs")?.into_iter().map(|d| d as i64).collect())
}
