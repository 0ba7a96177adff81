//! Elastodynamics M u'' + K u = F with the state on the device across steps,
//! built from the sparse operations (SpMV, axpby, CG): implicit Newmark
//! (beta, gamma; average acceleration 1/4, 1/2 by default) on the effective
//! stiffness K + M / (beta dt^2), and the explicit central-difference scheme
//! with the lumped (row-sum) mass. Clamped dofs stay at zero.

use super::{ElementSet, Problem};
use crate::array::{Array, Buffer};
use crate::error::{Error, Result};
use crate::sparse::solver::{outcome_status, Method, Precond, Solver};
use crate::sparse::{self, f64_buf, Csr};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scheme {
    Newmark { beta: f64, gamma: f64 },
    CentralDifference,
}

pub struct DynamicsStepper {
    pub set: Arc<ElementSet>,
    dt: f64,
    scheme: Scheme,
    /// K with the clamped rows and columns (for K u).
    k: Arc<Csr>,
    /// M with the clamped rows and columns (for M x).
    m: Arc<Csr>,
    /// Newmark: CG on K + M / (beta dt^2). Central difference: none.
    solver: Option<Solver>,
    /// 1 on free dofs, 0 on clamped ones.
    free: Buffer<f64>,
    /// Central difference: 1 / the lumped mass (0 on clamped dofs).
    lumped_inverse: Buffer<f64>,
    state: Mutex<State>,
}

/// Velocity, acceleration and the previous displacement, on the device.
struct State {
    v: Array,
    a: Array,
    u_prev: Array,
    work: Array,
    work2: Array,
    started: bool,
}

/// x = d .* x.
fn scale(set: &ElementSet, d: &Buffer<f64>, x: &Array) -> Result<()> {
    let mut gx = x.lock();
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
    /// For an elasticity set integrated (with densities) and assembled;
    /// `clamped` dofs (counted from `base`) stay at zero.
    pub fn new(set: Arc<ElementSet>, dt: f64, scheme: Scheme, clamped: &[i64], base: i64) -> Result<DynamicsStepper> {
        set.check_nodes_used("the dynamics stepper")?;
        if set.problem == Problem::Heat {
            return Err(Error::invalid("the set is a heat problem: use the heat stepper"));
        }
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(Error::invalid(format!("dt = {dt}: must be positive and finite")));
        }
        if let Scheme::Newmark { beta, gamma } = scheme {
            if !(gamma >= 0.5 && beta >= 0.25 * (gamma + 0.5).powi(2) && beta.is_finite() && gamma.is_finite()) {
                return Err(Error::invalid(format!(
                    "beta = {beta}, gamma = {gamma}: unconditional stability needs gamma >= 1/2 and beta >= (gamma + 1/2)^2 / 4"
                )));
            }
        }
        let (kv, mv) = set.global_matrices()?;
        let assembled = set.assembled().expect("global_matrices checked the assembly");
        let p = &assembled.pattern;
        let (n, nnz) = (p.nrows, p.nnz());
        let copy = |values: &Buffer<f64>, scale_m: f64, with_k: bool| -> Result<Arc<Csr>> {
            let a = Arc::new(assembled.with_values(&vec![0.0; nnz])?);
            a.rewrite_values(|v| match (v, values, &kv) {
                (Buffer::Host(v), Buffer::Host(x), Buffer::Host(k)) => {
                    v.iter_mut().zip(x).zip(k).for_each(|((v, x), k)| *v = scale_m * x + if with_k { *k } else { 0.0 });
                    Ok(())
                }
                (Buffer::Device(v), Buffer::Device(x), Buffer::Device(k)) => {
                    let g = set.ctx.device()?;
                    crate::array::cuda::update(g, nnz, v, scale_m, x, if with_k { 1.0 } else { 0.0 }, Some(k), 0.0)
                }
                _ => Err(crate::array::mixed_backends()),
            })?;
            Ok(a)
        };
        let k = copy(&mv, 0.0, true)?;
        let m = copy(&mv, 1.0, false)?;
        let zeros = vec![0.0; clamped.len()];
        let scratch = Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
        for a in [&k, &m] {
            sparse::apply_dirichlet(a, clamped, base, &zeros, &scratch)?;
        }
        let mut free = vec![1.0; n];
        clamped.iter().for_each(|&d| free[(d - base) as usize] = 0.0);
        // the lumped mass: row sums of M (clamped rows excluded)
        let m_host = m.download_values()?;
        let lumped: Vec<f64> =
            (0..n)
                .map(|r| {
                    if free[r] == 0.0 {
                        0.0
                    } else {
                        m_host[p.row_ptr[r] as usize..p.row_ptr[r + 1] as usize].iter().sum::<f64>()
                    }
                })
                .collect();
        if let Some(r) = (0..n).find(|&r| free[r] != 0.0 && (lumped[r].is_nan() || lumped[r] <= 0.0)) {
            return Err(Error::invalid(format!(
                "dof {} (0-based) has no mass: set the densities (fegpu_fem_set_density) and integrate",
                r
            )));
        }
        let lumped_inverse: Vec<f64> = lumped.iter().map(|&l| if l > 0.0 { 1.0 / l } else { 0.0 }).collect();
        let solver = match scheme {
            Scheme::Newmark { beta, .. } => {
                Some(Solver::new(copy_effective(&k, &m, 1.0 / (beta * dt * dt))?, Method::Cg, Precond::Jacobi)?)
            }
            Scheme::CentralDifference => None,
        };
        let zero = || Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]));
        let state = State { v: zero()?, a: zero()?, u_prev: zero()?, work: zero()?, work2: zero()?, started: false };
        Ok(DynamicsStepper {
            free: set.resident(free)?,
            lumped_inverse: set.resident(lumped_inverse)?,
            set,
            dt,
            scheme,
            k,
            m,
            solver,
            state: Mutex::new(state),
        })
    }

    /// One step: `u` (the displacements, device-resident) advances by dt in
    /// place under the nodal load `f` (None: free vibration). The first step
    /// starts from rest at `u` with the acceleration M^-1 (f - K u).
    pub fn step(&self, u: &Array, f: Option<&Array>, tol: f64, maxit: i64) -> Result<()> {
        let n = self.k.pattern.nrows;
        sparse::check_vector(&self.k, u, n, "u")?;
        if let Some(f) = f {
            sparse::check_vector(&self.k, f, n, "F")?;
            crate::array::distinct(&[(u, "u"), (f, "F")])?;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let st = &mut *st;
        let dt = self.dt;
        // work = F - K u (clamped entries zero)
        let residual_force = |work: &Array| -> Result<()> {
            match f {
                Some(f) => crate::array::vector::vector_axpby(1.0, f, 0.0, work)?,
                None => crate::array::vector::vector_axpby(0.0, u, 0.0, work)?,
            }
            sparse::spmv(&self.k, -1.0, u, 1.0, work)?;
            scale(&self.set, &self.free, work)
        };
        if !st.started {
            // a0 = M^-1 (F - K u0): the lumped inverse for central differences, CG on M for Newmark
            residual_force(&st.work)?;
            match self.scheme {
                Scheme::CentralDifference => {
                    crate::array::vector::vector_axpby(1.0, &st.work, 0.0, &st.a)?;
                    scale(&self.set, &self.lumped_inverse, &st.a)?;
                    // u_prev = u - dt v0 + dt^2 / 2 a0 (v0 = 0)
                    crate::array::vector::vector_axpby(1.0, u, 0.0, &st.u_prev)?;
                    crate::array::vector::vector_axpby(0.5 * dt * dt, &st.a, 1.0, &st.u_prev)?;
                }
                Scheme::Newmark { .. } => {
                    let mass_solver = Solver::new(self.m.clone(), Method::Cg, Precond::Jacobi)?;
                    let (o, _, _) = mass_solver.solve(&st.work, &st.a, tol, maxit)?;
                    outcome_status(&o)?;
                }
            }
            st.started = true;
        }
        match self.scheme {
            Scheme::CentralDifference => {
                // u_next = 2 u - u_prev + dt^2 M_L^-1 (F - K u)
                residual_force(&st.work)?;
                scale(&self.set, &self.lumped_inverse, &st.work)?;
                crate::array::vector::vector_axpby(2.0, u, -1.0, &st.u_prev)?; // u_prev <- 2 u - u_prev
                crate::array::vector::vector_axpby(dt * dt, &st.work, 1.0, &st.u_prev)?; // u_prev <- u_next
                crate::array::vector::vector_axpby(1.0, u, 0.0, &st.work2)?;
                crate::array::vector::vector_axpby(1.0, &st.u_prev, 0.0, u)?;
                crate::array::vector::vector_axpby(1.0, &st.work2, 0.0, &st.u_prev)?;
                scale(&self.set, &self.free, u)?;
            }
            Scheme::Newmark { beta, gamma } => {
                let (a0, a2, a3) = (1.0 / (beta * dt * dt), 1.0 / (beta * dt), 1.0 / (2.0 * beta) - 1.0);
                // work2 = a0 u + a2 v + a3 a; work = F + M work2
                crate::array::vector::vector_axpby(a0, u, 0.0, &st.work2)?;
                crate::array::vector::vector_axpby(a2, &st.v, 1.0, &st.work2)?;
                crate::array::vector::vector_axpby(a3, &st.a, 1.0, &st.work2)?;
                match f {
                    Some(f) => crate::array::vector::vector_axpby(1.0, f, 0.0, &st.work)?,
                    None => crate::array::vector::vector_axpby(0.0, u, 0.0, &st.work)?,
                }
                sparse::spmv(&self.m, 1.0, &st.work2, 1.0, &st.work)?;
                scale(&self.set, &self.free, &st.work)?;
                // u_prev <- u, then solve for the new u (warm start)
                crate::array::vector::vector_axpby(1.0, u, 0.0, &st.u_prev)?;
                let (o, _, _) = self.solver.as_ref().expect("Newmark has a solver").solve(&st.work, u, tol, maxit)?;
                outcome_status(&o)?;
                // a' = a0 (u' - u) - a2 v - a3 a (from the old v and a), then
                // v' = v + dt ((1 - gamma) a + gamma a')
                crate::array::vector::vector_axpby(a0, u, 0.0, &st.work2)?;
                crate::array::vector::vector_axpby(-a0, &st.u_prev, 1.0, &st.work2)?;
                crate::array::vector::vector_axpby(-a2, &st.v, 1.0, &st.work2)?;
                crate::array::vector::vector_axpby(-a3, &st.a, 1.0, &st.work2)?;
                crate::array::vector::vector_axpby(dt * (1.0 - gamma), &st.a, 1.0, &st.v)?;
                crate::array::vector::vector_axpby(1.0, &st.work2, 0.0, &st.a)?;
                crate::array::vector::vector_axpby(dt * gamma, &st.a, 1.0, &st.v)?;
            }
        }
        Ok(())
    }
}

/// A matrix with K's pattern and values K + s M (both with the clamped rows).
fn copy_effective(k: &Csr, m: &Csr, s: f64) -> Result<Arc<Csr>> {
    let (kv, mv) = (k.download_values()?, m.download_values()?);
    let values: Vec<f64> = kv.iter().zip(&mv).map(|(k, m)| k + s * m).collect();
    Ok(Arc::new(k.with_values(&values)?))
}
