//! GMRES(m), right-preconditioned (Saad, Iterative Methods for Sparse Linear
//! Systems, 2nd ed., alg. 9.5): the Arnoldi basis of A M^-1 in
//! `Slot::Basis(0..=m)`, orthogonalised by classical Gram-Schmidt run twice
//! (as accurate as modified Gram-Schmidt, in two batches of dot products
//! instead of j dependent ones), the Hessenberg matrix reduced by Givens
//! rotations on the host, so that |g_{j+1}| is the residual norm at each
//! iteration without forming x. Right preconditioning keeps that residual
//! the unpreconditioned one, which the tolerance is measured against.

use super::{broke, done, dot, initial_residual, record, Ops, Outcome, Slot};
use crate::error::Result;
use Slot::Basis;

/// The coefficients of `Basis(k)` against `Basis(0..k)`, two at a time (a
/// distributed solve sums each pair in one call).
fn projections(ops: &mut dyn Ops, k: usize) -> Result<Vec<f64>> {
    let mut h = vec![0.0; k];
    for i in (0..k).step_by(2) {
        let second = (i + 1 < k).then_some((Basis(i + 1), Basis(k)));
        let (a, b) = ops.dots(Basis(i), Basis(k), second)?;
        h[i] = a;
        if i + 1 < k {
            h[i + 1] = b;
        }
    }
    Ok(h)
}

/// out = sum_i y_i Basis(i).
fn combine(ops: &mut dyn Ops, out: Slot, y: &[f64]) -> Result<()> {
    for (i, &yi) in y.iter().enumerate() {
        ops.update(out, yi, Basis(i), 0.0, None, if i == 0 { 0.0 } else { 1.0 })?;
    }
    Ok(())
}

/// Solves the k x k upper-triangular system R y = g (R by columns).
fn back_substitute(columns: &[Vec<f64>], g: &[f64]) -> Vec<f64> {
    let k = columns.len();
    let mut y = g[..k].to_vec();
    for i in (0..k).rev() {
        y[i] /= columns[i][i];
        let yi = y[i];
        for (yl, &r) in y[..i].iter_mut().zip(&columns[i]) {
            *yl -= r * yi;
        }
    }
    y
}

pub fn gmres(ops: &mut dyn Ops, restart: usize, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let m = restart.max(1);
    ops.reserve(m + 1)?;
    let bnorm = initial_residual(ops)?;
    let identity = ops.identity_precond();
    let mut beta = dot(ops, Slot::R, Slot::R)?.sqrt();
    let mut relres = beta / bnorm;
    history.push(relres);
    if relres <= tol {
        return Ok(done(true, 0, relres));
    }
    let mut it = 0i64;
    loop {
        if !beta.is_finite() {
            return Ok(broke(it, relres, format!("GMRES: the residual is not finite at iteration {it}")));
        }
        ops.update(Basis(0), 1.0 / beta, Slot::R, 0.0, None, 0.0)?;
        // the rotated Hessenberg columns, the rotations, and g = Q^T (beta e1)
        let (mut columns, mut rotations): (Vec<Vec<f64>>, Vec<(f64, f64)>) = (Vec::new(), Vec::new());
        let mut g = vec![0.0; m + 1];
        g[0] = beta;
        let mut stop = None;
        while columns.len() < m && it < maxit {
            let j = columns.len();
            it += 1;
            let z = if identity {
                Basis(j)
            } else {
                ops.precond(Basis(j), Slot::Z)?;
                Slot::Z
            };
            ops.spmv(z, Basis(j + 1))?;
            let mut h = vec![0.0; j + 2];
            for _ in 0..2 {
                let c = projections(ops, j + 1)?;
                for (i, &ci) in c.iter().enumerate() {
                    ops.update(Basis(j + 1), -ci, Basis(i), 0.0, None, 1.0)?;
                    h[i] += ci;
                }
            }
            let hn = dot(ops, Basis(j + 1), Basis(j + 1))?.sqrt();
            h[j + 1] = hn;
            for (i, &(c, s)) in rotations.iter().enumerate() {
                (h[i], h[i + 1]) = (c * h[i] + s * h[i + 1], -s * h[i] + c * h[i + 1]);
            }
            let d = h[j].hypot(h[j + 1]);
            if d == 0.0 || !d.is_finite() {
                // no step: x is kept as the last restart left it
                return Ok(broke(it - 1, relres, format!("GMRES: Hessenberg column {d:e} at iteration {it}")));
            }
            let (c, s) = (h[j] / d, h[j + 1] / d);
            (h[j], h[j + 1]) = (d, 0.0);
            (g[j], g[j + 1]) = (c * g[j], -s * g[j]);
            rotations.push((c, s));
            columns.push(h);
            relres = g[j + 1].abs() / bnorm;
            // a zero hn (the exact solution is in the space) gives relres 0 and stops here
            stop = record(history, "GMRES", it, relres, tol);
            if stop.is_some() {
                break;
            }
            ops.update(Basis(j + 1), 0.0, Basis(j + 1), 0.0, None, 1.0 / hn)?;
        }
        if let Some(out) = stop.as_ref().filter(|o| o.breakdown.is_some()) {
            return Ok(out.clone()); // a non-finite residual: no update from it
        }
        if !columns.is_empty() {
            // x += M^-1 V y
            let y = back_substitute(&columns, &g);
            combine(ops, Slot::T, &y)?;
            let z = if identity {
                Slot::T
            } else {
                ops.precond(Slot::T, Slot::Z)?;
                Slot::Z
            };
            ops.update(Slot::X, 1.0, z, 0.0, None, 1.0)?;
        }
        if let Some(out) = stop {
            return Ok(out);
        }
        if it >= maxit {
            return Ok(done(false, it, relres));
        }
        // the restart's residual from scratch
        ops.spmv(Slot::X, Slot::Q)?;
        ops.update(Slot::R, 1.0, Slot::B, -1.0, Some(Slot::Q), 0.0)?;
        beta = dot(ops, Slot::R, Slot::R)?.sqrt();
    }
}
