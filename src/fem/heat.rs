//! Transient heat conduction C dT/dt + K T = F by the theta method, with the
//! matrices, the temperatures and the solver on the device across steps:
//! (C/dt + theta K) T' = (C/dt - (1 - theta) K) T + F every step (theta = 1
//! backward Euler, 1/2 Crank-Nicolson), fixed temperatures applied as the
//! assembled matrix's Dirichlet rows, CG with Jacobi warm-started from T.
//! Convective (Robin) boundaries h (T_env - T) enter in the lumped nodal form
//! legacy codes use: h A per boundary node added to K's diagonal, h A T_env
//! to the load.

use super::ElementSet;
use crate::array::{Array, Buffer};
use crate::error::{Error, Result};
use crate::sparse::solver::{Method, Outcome, Precond, Solver};
use crate::sparse::{self, cpu as sparse_cpu, cuda as sparse_cuda, f64_buf, Csr};
use std::sync::{Arc, Mutex};

pub struct HeatStepper {
    pub set: Arc<ElementSet>,
    dt: f64,
    theta: f64,
    /// The fixed dofs (0-based) and their temperatures.
    dofs: Vec<i64>,
    values: Vec<f64>,
    built: Mutex<Built>,
}

/// The step's matrices and vectors, rebuilt when the convection changes.
struct Built {
    /// C/dt + theta (K + H) with the Dirichlet rows, the solver's matrix.
    left: Arc<Csr>,
    solver: Solver,
    /// C/dt - (1 - theta) (K + H) on the same pattern.
    right: Buffer<f64>,
    /// The fixed dofs' pull on the free rows, (C/dt + theta (K + H)) g, less
    /// the convective load H T_env.
    lift: Buffer<f64>,
    fixed: Buffer<u8>,
    values: Buffer<f64>,
    /// The kept diagonal of the left matrix (b = diag g on fixed rows).
    diag: Buffer<f64>,
    rhs: Array,
}

/// Lumped convection: for each boundary dof (0-based), h A and T_env.
pub struct Convection {
    pub dofs: Vec<usize>,
    pub h_area: Vec<f64>,
    pub t_env: Vec<f64>,
}

impl HeatStepper {
    /// For a heat set already integrated and assembled; the fixed dofs
    /// `dofs` (counted from `base`) hold `values` at every step.
    pub fn new(set: Arc<ElementSet>, dt: f64, theta: f64, dofs: &[i64], base: i64, values: &[f64]) -> Result<HeatStepper> {
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(Error::invalid(format!("dt = {dt}: must be positive and finite")));
        }
        if !(0.5..=1.0).contains(&theta) {
            return Err(Error::invalid(format!(
                "theta = {theta}: 1/2 (Crank-Nicolson) to 1 (backward Euler) are unconditionally stable"
            )));
        }
        let built = build(&set, dt, theta, dofs, base, values, None)?;
        let dofs = dofs.iter().map(|d| d - base).collect();
        Ok(HeatStepper { set, dt, theta, dofs, values: values.to_vec(), built: Mutex::new(built) })
    }

    /// Convective boundaries from now on: node `nodes[i]` (counted from
    /// `base`) exchanges h_area[i] (T_env[i] - T) with its surroundings. A
    /// new call replaces the previous set (an empty one removes them).
    pub fn set_convection(&self, nodes: &[i64], base: i64, h_area: &[f64], t_env: &[f64]) -> Result<()> {
        let n = self.set.dofs();
        let mut conv = Convection { dofs: Vec::new(), h_area: h_area.to_vec(), t_env: t_env.to_vec() };
        for (i, &node) in nodes.iter().enumerate() {
            let d = node - base;
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
            conv.dofs.push(d as usize);
        }
        let fresh = build(&self.set, self.dt, self.theta, &self.dofs, 0, &self.values, Some(&conv))?;
        *self.built.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    /// One step: T (in: this step's temperatures, out: the next) with the
    /// nodal heat load `f` over the step (None: no source).
    pub fn step(&self, t: &Array, f: Option<&Array>, tol: f64, maxit: i64) -> Result<(Outcome, f64)> {
        let built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        let b = &*built;
        let n = b.left.pattern.nrows;
        sparse::check_vector(&b.left, t, n, "T")?;
        if let Some(f) = f {
            sparse::check_vector(&b.left, f, n, "F")?;
            crate::array::distinct(&[(t, "T"), (f, "F")])?;
        }
        {
            let mut gr = b.rhs.lock();
            let rhs = f64_buf(&mut gr);
            // T and F in address order (lock_pair), so steppers called from
            // several threads with the arrays swapped cannot deadlock
            let (mut gt, mut gf) = match f {
                Some(f) => {
                    let (gt, gf) = crate::array::lock_pair(t, f, "T", "F")?;
                    (gt, Some(gf))
                }
                None => (t.lock(), None),
            };
            let tb = f64_buf(&mut gt);
            let fb = gf.as_mut().map(|g| f64_buf(g));
            let p = &b.left.pattern;
            match (rhs, tb, &b.right, &b.lift, &b.fixed, &b.values, &b.diag) {
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
        let (outcome, true_rel, _) = b.solver.solve(&b.rhs, t, tol, maxit)?;
        Ok((outcome, true_rel))
    }
}

/// The step's matrices from the set's assembled K and C: left = C/dt +
/// theta (K + H) with the Dirichlet rows, right = C/dt - (1 - theta) (K + H),
/// and the constant part of the right-hand side.
fn build(
    set: &ElementSet,
    dt: f64,
    theta: f64,
    dofs: &[i64],
    base: i64,
    values: &[f64],
    convection: Option<&Convection>,
) -> Result<Built> {
    if set.problem != super::Problem::Heat {
        return Err(Error::invalid(format!("the set is a {:?} problem: this stepper is for heat conduction", set.problem)));
    }
    let (mut k, c) = set.global_matrices()?;
    let assembled = set.assembled().expect("global_matrices checked the assembly");
    let p = &assembled.pattern;
    let (n, nnz) = (p.nrows, p.nnz());
    // convection: h A on the diagonal of K
    if let Some(conv) = convection {
        let mut h = vec![0.0; nnz];
        for (&d, &ha) in conv.dofs.iter().zip(&conv.h_area) {
            if p.diag[d] < 0 {
                return Err(Error::invalid(format!(
                    "node {} (1-based; {d} 0-based) has no element: no diagonal for its convection",
                    d + 1
                )));
            }
            h[p.diag[d] as usize] += ha;
        }
        match &mut k {
            Buffer::Host(kv) => kv.iter_mut().zip(&h).for_each(|(k, h)| *k += h),
            Buffer::Device(kv) => {
                let g = set.ctx.device()?;
                let hd = sparse_cuda::upload(g, &h)?;
                crate::array::cuda::update(g, nnz, kv, 1.0, &hd, 0.0, None, 1.0)?;
            }
        }
    }
    let left = Arc::new(assembled.with_values(&vec![0.0; nnz])?);
    // left = C/dt + theta K, right = C/dt - (1 - theta) K
    let right = match (&k, &c) {
        (Buffer::Host(k), Buffer::Host(c)) => {
            let mut l = vec![0.0; nnz];
            crate::array::vector::update(&mut l, 1.0 / dt, c, theta, Some(k), 0.0);
            left.rewrite_values(|v| {
                if let Buffer::Host(v) = v {
                    v.copy_from_slice(&l);
                }
                Ok(())
            })?;
            crate::array::vector::update(&mut l, 1.0 / dt, c, theta - 1.0, Some(k), 0.0);
            Buffer::Host(l)
        }
        (Buffer::Device(k), Buffer::Device(c)) => {
            let g = set.ctx.device()?;
            left.rewrite_values(|v| match v {
                Buffer::Device(v) => crate::array::cuda::update(g, nnz, v, 1.0 / dt, c, theta, Some(k), 0.0),
                Buffer::Host(_) => Err(crate::array::mixed_backends()),
            })?;
            let r = g.alloc::<f64>(nnz.max(1))?;
            crate::array::cuda::update(g, nnz, &r, 1.0 / dt, c, theta - 1.0, Some(k), 0.0)?;
            Buffer::Device(r)
        }
        _ => return Err(crate::array::mixed_backends()),
    };
    // the fixed values' pull on the free rows, then the Dirichlet rows
    let mut g = vec![0.0; n];
    let mut fixed = vec![0u8; n];
    for (i, (&d, &v)) in dofs.iter().zip(values).enumerate() {
        let d0 = d - base;
        if d0 < 0 || d0 >= n as i64 {
            return Err(Error::invalid(format!(
                "{at_dofs_i} = {d}: outside dofs {base}..{} (index base {base})",
                n as i64 - 1 + base,
                at_dofs_i = crate::error::at("dofs", i)
            )));
        }
        (fixed[d0 as usize], g[d0 as usize]) = (1, v);
    }
    let rhs = Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    let lift_array = Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    let g_array = Array::new(set.ctx.clone(), n, 1, Some(&g))?;
    sparse::spmv(&left, 1.0, &g_array, 0.0, &lift_array)?;
    sparse::apply_dirichlet(&left, dofs, base, values, &rhs)?; // checks the dofs; rhs is scratch
    let stored = left.download_values()?;
    let diag: Vec<f64> = (0..n).map(|r| if p.diag[r] >= 0 { stored[p.diag[r] as usize] } else { 0.0 }).collect();
    let mut lift_host = vec![0.0; n];
    lift_array.download(0, &mut lift_host, "lift")?;
    if let Some(conv) = convection {
        // the convective load h A T_env is constant: it comes off the lift
        for ((&d, &ha), &te) in conv.dofs.iter().zip(&conv.h_area).zip(&conv.t_env) {
            lift_host[d] -= ha * te;
        }
    }
    set.check_nodes_used("the heat stepper")?;
    let solver = Solver::new(left.clone(), Method::Cg, Precond::Jacobi)?;
    Ok(Built {
        lift: set.resident(lift_host)?,
        fixed: set.resident(fixed)?,
        values: set.resident(g)?,
        diag: set.resident(diag)?,
        left,
        solver,
        right,
        rhs,
    })
}
