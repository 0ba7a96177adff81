//! Elastodynamics M u'' + C u' + K u = F with the state on the device across
//! steps, built from the sparse operations (SpMV, axpby, CG): implicit Newmark
//! (beta, gamma; average acceleration 1/4, 1/2 by default) on the effective
//! stiffness K + M / (beta dt^2) + gamma C / (beta dt), and the explicit
//! central-difference scheme with the lumped mass (the integrals of rho N_a,
//! M's row sums; HRZ's for quadratic elements), and that scheme with the total Lagrangian internal forces
//! of St Venant-Kirchhoff material (FEStudio's Algorithm 1: large rotations
//! and strains, element by element, no global matrix). Damping is
//! Rayleigh's, C = alpha M + beta K (Newmark), or the diagonal C = alpha M_L
//! (central differences, which then stays explicit). The constrained dofs
//! follow prescribed displacements (zero until set); each step takes them at
//! its end time, and Newmark carries their velocity and acceleration.

use super::{ElementSet, Problem};
use crate::array::vector::{vector_axpby, vector_dot, vector_nrm2};
use crate::array::{Array, Buffer};
use crate::error::{Error, Result};
use crate::sparse::solver::{outcome_status, Method, Precond, Solver};
use crate::sparse::{self, f64_buf, Csr};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scheme {
    Newmark {
        beta: f64,
        gamma: f64,
    },
    CentralDifference,
    /// Central differences with the nonlinear internal forces.
    TotalLagrangian,
}

impl Scheme {
    fn explicit(self) -> bool {
        !matches!(self, Scheme::Newmark { .. })
    }
}

pub struct DynamicsStepper {
    pub set: Arc<ElementSet>,
    dt: f64,
    scheme: Scheme,
    /// Dofs.
    n: usize,
    /// K and M as assembled, every row and column (the products, prescribed
    /// displacements included); none for the total Lagrangian scheme.
    matrices: Option<(Arc<Csr>, Arc<Csr>)>,
    /// The constrained dofs, 0-based, in the caller's order.
    constrained: Vec<usize>,
    /// 1 on free dofs, 0 on constrained ones.
    free: Buffer<f64>,
    /// The explicit schemes: 1 / the lumped mass (0 on constrained dofs).
    lumped_inverse: Buffer<f64>,
    inner: Mutex<Inner>,
}

/// What a step changes or `set_damping` / `set_displacements` replace.
struct Inner {
    /// Rayleigh's alpha (mass) and beta (stiffness).
    damping: (f64, f64),
    /// Newmark: CG on the effective stiffness with the constrained rows, and
    /// that matrix's diagonal on the constrained dofs (0 on free ones).
    solver: Option<(Solver, Buffer<f64>)>,
    /// The prescribed displacements on the constrained dofs, 0 on free ones.
    prescribed: Array,
    /// Velocity, acceleration and the previous displacement.
    v: Array,
    a: Array,
    u_prev: Array,
    work: Array,
    work2: Array,
    started: bool,
}

/// x = d .* x.
fn scale(set: &ElementSet, d: &Buffer<f64>, x: &Array) -> Result<()> {
    let mut gx = x.lock("x")?;
    match (d, f64_buf(&mut gx)) {
        (Buffer::Host(d), Buffer::Host(xv)) => xv.iter_mut().zip(d).for_each(|(x, d)| *x *= d),
        (Buffer::Device(d), Buffer::Device(xv)) => {
            let g = set.ctx.device()?;
            crate::array::cuda::scale(g, d.len(), d, xv, xv, None)?
        }
        _ => return Err(crate::array::mixed_backends()),
    }
    Ok(())
}

impl DynamicsStepper {
    /// For an elasticity set with its densities, integrated and assembled
    /// (the linear schemes; the total Lagrangian one needs neither); the
    /// `constrained` dofs (counted from `base`) stay at zero until
    /// `set_displacements` prescribes them; no damping until `set_damping`.
    pub fn new(set: Arc<ElementSet>, dt: f64, scheme: Scheme, constrained: &[i64], base: i64) -> Result<DynamicsStepper> {
        set.check_nodes_used("the dynamics stepper")?;
        if set.problem == Problem::Heat {
            return Err(Error::invalid("the set is a heat problem: use the heat stepper"));
        }
        if scheme == Scheme::TotalLagrangian {
            set.element.linear_only("the total Lagrangian scheme")?;
        }
        if scheme == Scheme::TotalLagrangian && set.problem == Problem::PlaneStress {
            return Err(Error::new(
                crate::error::ErrorKind::Unsupported,
                "the total Lagrangian scheme in 2-D is plane strain (plane stress's thickness strain is not a displacement)",
            ));
        }
        super::check_dt(dt)?;
        if let Scheme::Newmark { beta, gamma } = scheme {
            if !(gamma >= 0.5 && beta >= 0.25 * (gamma + 0.5).powi(2) && beta.is_finite() && gamma.is_finite()) {
                return Err(Error::invalid(format!(
                    "beta = {beta}, gamma = {gamma}: unconditional stability needs gamma >= 1/2 and beta >= (gamma + 1/2)^2 / 4"
                )));
            }
        }
        let matrices = match scheme {
            Scheme::TotalLagrangian => None,
            _ => {
                let (kv, mv) = set.global_matrices()?;
                let assembled = set.assembled()?.expect("global_matrices checked the assembly");
                let matrix = |values: Buffer<f64>| -> Result<Arc<Csr>> {
                    let a = Arc::new(assembled.with_values(&vec![0.0; assembled.pattern.nnz()])?);
                    a.rewrite_values(|v| {
                        *v = values;
                        Ok(())
                    })?;
                    Ok(a)
                };
                Some((matrix(kv)?, matrix(mv)?))
            }
        };
        let n = set.dofs();
        let constrained = super::dof_list(n, constrained, base, "constrained")?;
        let mut free = vec![1.0; n];
        constrained.iter().for_each(|&d| free[d] = 0.0);
        // the lumped mass on the free dofs
        let mut lumped = vec![0.0; n];
        match set.lumped_mass()? {
            Buffer::Host(h) => lumped = h,
            Buffer::Device(d) => set.ctx.device()?.download(&d, 0, &mut lumped)?,
        }
        lumped.iter_mut().zip(&free).for_each(|(l, f)| *l *= f);
        if let Some(r) = (0..n).find(|&r| free[r] != 0.0 && (lumped[r].is_nan() || lumped[r] <= 0.0)) {
            return Err(Error::invalid(format!(
                "dof {r} (0-based) has no mass: set the densities (fegpu_fem_set_density) and integrate"
            )));
        }
        let lumped_inverse: Vec<f64> = lumped.iter().map(|&l| if l > 0.0 { 1.0 / l } else { 0.0 }).collect();
        let zero = || Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]));
        let inner = Inner {
            damping: (0.0, 0.0),
            solver: None,
            prescribed: zero()?,
            v: zero()?,
            a: zero()?,
            u_prev: zero()?,
            work: zero()?,
            work2: zero()?,
            started: false,
        };
        let stepper = DynamicsStepper {
            free: set.resident(free)?,
            lumped_inverse: set.resident(lumped_inverse)?,
            set,
            dt,
            scheme,
            n,
            matrices,
            constrained,
            inner: Mutex::new(inner),
        };
        stepper.set_damping(0.0, 0.0)?;
        if scheme.explicit() {
            stepper.check_stable_step()?;
        }
        Ok(stepper)
    }

    /// Refused once a call that panicked holding it may have left it half-changed (`error::locked`).
    fn inner(&self) -> Result<std::sync::MutexGuard<'_, Inner>> {
        crate::error::locked(&self.inner, "the dynamics stepper")
    }

    /// Rayleigh damping C = alpha M + beta K from the next step on (Newmark);
    /// central differences keep C diagonal, alpha M_L, so beta must be 0 there.
    pub fn set_damping(&self, alpha: f64, beta: f64) -> Result<()> {
        for (name, v) in [("alpha", alpha), ("beta", beta)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::invalid(format!("{name} = {v}: damping coefficients must be >= 0 and finite")));
            }
        }
        let solver = match self.scheme {
            s if s.explicit() && beta != 0.0 => {
                return Err(Error::invalid(format!(
                    "beta = {beta}: the explicit schemes keep their damping diagonal (C = alpha M_L); \
                     stiffness-proportional damping needs FEGPU_SCHEME_NEWMARK"
                )))
            }
            Scheme::CentralDifference | Scheme::TotalLagrangian => None,
            Scheme::Newmark { beta: nb, gamma } => Some(self.effective(nb, gamma, alpha, beta)?),
        };
        let mut inner = self.inner()?;
        (inner.damping, inner.solver) = ((alpha, beta), solver);
        Ok(())
    }

    /// Newmark's effective stiffness (1 + a1 beta_r) K + (a0 + a1 alpha) M with
    /// the constrained rows and columns, its CG solver, and its diagonal on
    /// the constrained dofs.
    fn effective(&self, nb: f64, gamma: f64, alpha: f64, beta_r: f64) -> Result<(Solver, Buffer<f64>)> {
        let dt = self.dt;
        let (a0, a1) = (1.0 / (nb * dt * dt), gamma / (nb * dt));
        let (k, m) = self.matrices.as_ref().expect("Newmark assembles K and M");
        let (kv, mv) = (k.download_values()?, m.download_values()?);
        let (sk, sm) = (1.0 + a1 * beta_r, a0 + a1 * alpha);
        let values: Vec<f64> = kv.iter().zip(&mv).map(|(k, m)| sk * k + sm * m).collect();
        let p = &k.pattern;
        let mut diag = vec![0.0; p.nrows];
        self.constrained.iter().for_each(|&d| diag[d] = values[p.diag[d] as usize]);
        let eff = Arc::new(k.with_values(&values)?);
        let dofs: Vec<i64> = self.constrained.iter().map(|&d| d as i64).collect();
        let scratch = Array::new(self.set.ctx.clone(), p.nrows, 1, Some(&vec![0.0; p.nrows]))?;
        sparse::apply_dirichlet(&eff, &dofs, 0, &vec![0.0; dofs.len()], &scratch)?;
        Ok((Solver::new(eff, Method::Cg, Precond::Jacobi)?, self.set.resident(diag)?))
    }

    /// The constrained dofs' displacements (in the order given at creation)
    /// from the end of the next step on.
    pub fn set_displacements(&self, values: &[f64]) -> Result<()> {
        if values.len() != self.constrained.len() {
            return Err(Error::size(format!(
                "values has {} entries; the stepper has {} constrained dofs",
                values.len(),
                self.constrained.len()
            )));
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(format!("{} = {}: must be finite", crate::error::at("values", i), values[i])));
        }
        let mut g = vec![0.0; self.n];
        self.constrained.iter().zip(values).for_each(|(&d, &v)| g[d] = v);
        self.inner()?.prescribed.upload(0, &g, "values")
    }

    /// One step: `u` (the displacements, device-resident) advances by dt in
    /// place under the nodal load `f` (None: free vibration). The first step
    /// starts from rest at `u` with the acceleration M^-1 (f - K u).
    pub fn step(&self, u: &Array, f: Option<&Array>, tol: f64, maxit: i64) -> Result<()> {
        let n = self.n;
        sparse::check_array(&self.set.ctx, u, n, "u")?;
        if let Some(f) = f {
            sparse::check_array(&self.set.ctx, f, n, "F")?;
            crate::array::distinct(&[(u, "u"), (f, "F")])?;
        }
        let mut st = self.inner()?;
        let st = &mut *st;
        let (dt, (alpha, beta_r)) = (self.dt, st.damping);
        // out = F + s f_int(x) (F = 0 without a load)
        let load_plus = |s: f64, x: &Array, out: &Array| -> Result<()> {
            match f {
                Some(f) => vector_axpby(1.0, f, 0.0, out)?,
                None => vector_axpby(0.0, u, 0.0, out)?,
            }
            self.internal_force(s, x, out)
        };
        if !st.started {
            // the state and load the scheme starts from (a later step's are its own)
            for (a, name) in [(Some(u), "u"), (f, "F")] {
                if let Some(a) = a {
                    let norm = vector_nrm2(a)?;
                    if !norm.is_finite() {
                        return Err(Error::invalid(format!("{name} holds {norm}: must be finite")));
                    }
                }
            }
            // a0 = M^-1 (F - K u0) on the free dofs (at rest: no damping force)
            load_plus(-1.0, u, &st.work)?;
            scale(&self.set, &self.free, &st.work)?;
            match self.scheme {
                Scheme::CentralDifference | Scheme::TotalLagrangian => {
                    vector_axpby(1.0, &st.work, 0.0, &st.a)?;
                    scale(&self.set, &self.lumped_inverse, &st.a)?;
                    // u_prev = u - dt v0 + dt^2 / 2 a0 (v0 = 0)
                    vector_axpby(1.0, u, 0.0, &st.u_prev)?;
                    vector_axpby(0.5 * dt * dt, &st.a, 1.0, &st.u_prev)?;
                }
                Scheme::Newmark { .. } => {
                    let m = &self.matrices.as_ref().expect("Newmark assembles K and M").1;
                    let m = Arc::new(m.with_values(&m.download_values()?)?);
                    let dofs: Vec<i64> = self.constrained.iter().map(|&d| d as i64).collect();
                    sparse::apply_dirichlet(&m, &dofs, 0, &vec![0.0; dofs.len()], &st.work2)?;
                    let solved = Solver::new(m, Method::Cg, Precond::Jacobi)?
                        .solve(&st.work, &st.a, tol, maxit)
                        .and_then(|(o, _, _)| outcome_status(&o));
                    if let Err(e) = solved {
                        // the start is retried from a = 0, as the first try was
                        return Err(e.undone(st.a.zero(), "the solve's writes"));
                    }
                }
            }
            st.started = true;
        }
        match self.scheme {
            Scheme::CentralDifference | Scheme::TotalLagrangian => {
                // (1 + alpha dt / 2) u' = 2 u - (1 - alpha dt / 2) u_prev + dt^2 M_L^-1 (F - K u)
                let c = 1.0 / (1.0 + 0.5 * alpha * dt);
                load_plus(-1.0, u, &st.work)?;
                scale(&self.set, &self.lumped_inverse, &st.work)?;
                vector_axpby(2.0 * c, u, -c * (1.0 - 0.5 * alpha * dt), &st.u_prev)?;
                vector_axpby(c * dt * dt, &st.work, 1.0, &st.u_prev)?; // u_prev <- u'
                vector_axpby(1.0, u, 0.0, &st.work2)?;
                vector_axpby(1.0, &st.u_prev, 0.0, u)?;
                vector_axpby(1.0, &st.work2, 0.0, &st.u_prev)?;
                scale(&self.set, &self.free, u)?;
                vector_axpby(1.0, &st.prescribed, 1.0, u)?;
            }
            Scheme::Newmark { beta, gamma } => {
                let (a0, a1, a2, a3) = (1.0 / (beta * dt * dt), gamma / (beta * dt), 1.0 / (beta * dt), 0.5 / beta - 1.0);
                let (a4, a5) = (gamma / beta - 1.0, 0.5 * dt * (gamma / beta - 2.0));
                let (solver, diag) = st.solver.as_ref().expect("Newmark has a solver");
                let (k, m) = self.matrices.as_ref().expect("Newmark assembles K and M");
                // work = F + M ((a0 + alpha a1) u + (a2 + alpha a4) v + (a3 + alpha a5) a)
                //          + beta_r K (a1 u + a4 v + a5 a) - (the effective stiffness) g
                load_plus(-(1.0 + a1 * beta_r), &st.prescribed, &st.work)?;
                sparse::spmv(m, -(a0 + a1 * alpha), &st.prescribed, 1.0, &st.work)?;
                vector_axpby(a0 + alpha * a1, u, 0.0, &st.work2)?;
                vector_axpby(a2 + alpha * a4, &st.v, 1.0, &st.work2)?;
                vector_axpby(a3 + alpha * a5, &st.a, 1.0, &st.work2)?;
                sparse::spmv(m, 1.0, &st.work2, 1.0, &st.work)?;
                if beta_r != 0.0 {
                    vector_axpby(beta_r * a1, u, 0.0, &st.work2)?;
                    vector_axpby(beta_r * a4, &st.v, 1.0, &st.work2)?;
                    vector_axpby(beta_r * a5, &st.a, 1.0, &st.work2)?;
                    sparse::spmv(k, 1.0, &st.work2, 1.0, &st.work)?;
                }
                // free rows keep it; constrained rows diag g (the solve gives u' = g there)
                scale(&self.set, &self.free, &st.work)?;
                vector_axpby(1.0, &st.prescribed, 0.0, &st.work2)?;
                scale(&self.set, diag, &st.work2)?;
                vector_axpby(1.0, &st.work2, 1.0, &st.work)?;
                // u_prev <- u, then solve for the new u (warm start); a solve
                // that fails (not converged, breakdown) has written its last
                // iterate into u: u_prev puts it back, so the step can be retried
                vector_axpby(1.0, u, 0.0, &st.u_prev)?;
                let solved = solver.solve(&st.work, u, tol, maxit).and_then(|(o, _, _)| outcome_status(&o));
                if let Err(e) = solved {
                    return Err(e.undone(vector_axpby(1.0, &st.u_prev, 0.0, u), "the solve's writes"));
                }
                // a' = a0 (u' - u) - a2 v - a3 a (from the old v and a), then
                // v' = v + dt ((1 - gamma) a + gamma a')
                vector_axpby(a0, u, 0.0, &st.work2)?;
                vector_axpby(-a0, &st.u_prev, 1.0, &st.work2)?;
                vector_axpby(-a2, &st.v, 1.0, &st.work2)?;
                vector_axpby(-a3, &st.a, 1.0, &st.work2)?;
                vector_axpby(dt * (1.0 - gamma), &st.a, 1.0, &st.v)?;
                vector_axpby(1.0, &st.work2, 0.0, &st.a)?;
                vector_axpby(dt * gamma, &st.a, 1.0, &st.v)?;
            }
        }
        Ok(())
    }

    /// Central differences are stable for dt omega_max <= 2, with or without
    /// the mass-proportional damping. omega_max^2 is approached from below by
    /// power iteration on M_L^-1 K over the free dofs (every Rayleigh quotient
    /// x K x / x M_L x is at most omega_max^2), so a dt refused here is
    /// certainly unstable; the total Lagrangian forces are linearised at rest,
    /// over a displacement a millionth of the mesh's size.
    fn check_stable_step(&self) -> Result<()> {
        const ITERATIONS: usize = 30;
        let (n, ctx) = (self.n, &self.set.ctx);
        let dim = self.set.element.dim();
        let extent = (0..dim)
            .map(|a| {
                let c = self.set.coords.iter().skip(a).step_by(dim);
                let (lo, hi) = c.fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
                (hi - lo).powi(2)
            })
            .sum::<f64>()
            .sqrt();
        let extent = if extent > 0.0 && extent.is_finite() { extent } else { 1.0 };
        // a start with every mode in it: x = M_L^-1 w, so x M_L x = x w
        let w: Vec<f64> = (0..n).map(|i| 0.5 + (i as f64 * 0.618_033_988_749_895).fract()).collect();
        let (x, y) = (Array::new(ctx.clone(), n, 1, Some(&w))?, Array::new(ctx.clone(), n, 1, Some(&w))?);
        let t = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
        scale(&self.set, &self.lumped_inverse, &x)?;
        let (mut mass, mut omega2) = (vector_dot(&x, &y)?, 0.0f64);
        for _ in 0..ITERATIONS {
            if !(mass > 0.0 && mass.is_finite()) {
                break;
            }
            // t = eps x^, x^ = x / ||x||_M
            let unit = 1.0 / mass.sqrt();
            let eps = 1e-6 * extent / (unit * vector_nrm2(&x)?);
            vector_axpby(unit * eps, &x, 0.0, &t)?;
            vector_axpby(0.0, &t, 0.0, &y)?;
            self.internal_force(1.0 / eps, &t, &y)?; // y = K x^
            omega2 = omega2.max(vector_dot(&t, &y)? / eps);
            vector_axpby(1.0, &y, 0.0, &x)?;
            scale(&self.set, &self.lumped_inverse, &x)?;
            mass = vector_dot(&x, &y)?;
        }
        if self.dt * omega2.sqrt() > 2.0 * (1.0 + 1e-9) {
            return Err(Error::invalid(format!(
                "dt = {:e}: above the central-difference stability limit 2 / omega_max <= {:e} \
                 (omega_max^2 >= {omega2:e}, from M_L^-1 K over the free dofs): take a smaller dt or FEGPU_SCHEME_NEWMARK",
                self.dt,
                2.0 / omega2.sqrt()
            )));
        }
        Ok(())
    }

    /// out += s f_int(x): K x (the linear schemes), or the total Lagrangian
    /// internal forces element by element.
    fn internal_force(&self, s: f64, x: &Array, out: &Array) -> Result<()> {
        match &self.matrices {
            Some((k, _)) => sparse::spmv(k, s, x, 1.0, out),
            None => self.set.internal_force(s, x, out),
        }
    }
}
