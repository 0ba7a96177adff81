//! GMRES(m), right-preconditioned (Saad, Iterative Methods for Sparse Linear
//! Systems, 2nd ed., alg. 9.5): the Arnoldi basis of A M^-1 in
//! `Slot::Basis(0..=m)`, orthogonalised by classical Gram-Schmidt with
//! reorthogonalisation when needed (as accurate as modified Gram-Schmidt,
//! each pass one read of the basis instead of j dependent dot products),
//! the Hessenberg matrix reduced by Givens rotations on the host, so that
//! |g_{j+1}| is the residual norm at each iteration without forming x. Right preconditioning keeps that residual
//! the unpreconditioned one, which the tolerance is measured against.

use super::{broke, done, dot, initial_residual, record, Ops, Outcome, Slot};
use crate::error::Result;
use Slot::Basis;

/// Orthogonalises Basis(k) against Basis(0..k): classical Gram-Schmidt,
/// repeated when the norm fell below 1/sqrt(2) of what it was (the
/// Daniel-Gragg-Kaufman-Stewart test: cancellation left it inexact). Returns
/// the Hessenberg column (its last entry the new norm) and that norm.
fn orthogonalise(ops: &mut dyn Ops, k: usize) -> Result<(Vec<f64>, f64)> {
    let mut h = vec![0.0; k + 1];
    // one pass: the projections (and the norm before), then their removal (and the norm after)
    let mut pass = |ops: &mut dyn Ops| -> Result<(f64, f64)> {
        let d = ops.basis_dots(k + 1)?;
        let after = ops.basis_subtract(k, &d[..k])?;
        h.iter_mut().zip(&d[..k]).for_each(|(h, c)| *h += c);
        Ok((d[k].sqrt(), after.sqrt()))
    };
    let (before, mut hn) = pass(ops)?;
    if hn < std::f64::consts::FRAC_1_SQRT_2 * before {
        hn = pass(ops)?.1;
    }
    h[k] = hn;
    Ok((h, hn))
}

/// The power of two that brings `a` (max |A M^-1 v| of a unit v) near 1
/// where a^2 would leave 2^-600..2^600; 1 otherwise (and for 0 or non-finite a).
fn basis_scale(a: f64) -> f64 {
    if a == 0.0 || !a.is_finite() || a.log2().abs() <= 300.0 {
        return 1.0;
    }
    2f64.powi((-a.log2().round() as i32).clamp(-1022, 1022))
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
    // a cycle never takes more steps than the solve may: a restart beyond
    // maxit would only hold basis vectors that are never filled
    let m = restart.max(1).min(usize::try_from(maxit.max(1)).unwrap_or(usize::MAX));
    ops.reserve(m + 1)?;
    let (bnorm, rr) = initial_residual(ops)?;
    let identity = ops.identity_precond();
    let mut beta = rr.sqrt();
    let mut relres = beta / bnorm;
    history.push(relres);
    if relres <= tol {
        return Ok(done(true, 0, relres));
    }
    let mut it = 0i64;
    // A M^-1's size, when its square would leave the range of the norms
    // (||A v||^2 underflows for |A| near 1e-170): the basis is built for
    // sigma A M^-1 (sigma a power of two, exact) and y scaled back
    let mut sigma = 1.0;
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
            if it == 1 {
                sigma = basis_scale(ops.amax(Basis(j + 1))?);
            }
            if sigma != 1.0 {
                ops.update(Basis(j + 1), 0.0, Basis(j + 1), 0.0, None, sigma)?;
            }
            let (mut h, hn) = orthogonalise(ops, j + 1)?;
            // the column's norm (||A z||), which the rotations keep
            let column = h.iter().map(|x| x * x).sum::<f64>().sqrt();
            for (i, &(c, s)) in rotations.iter().enumerate() {
                (h[i], h[i + 1]) = (c * h[i] + s * h[i + 1], -s * h[i] + c * h[i + 1]);
            }
            let d = h[j].hypot(h[j + 1]);
            if !d.is_finite() {
                return Ok(broke(it - 1, relres, format!("GMRES: Hessenberg column {d:e} at iteration {it}")));
            }
            if d <= 16.0 * f64::EPSILON * column {
                // A M^-1 is singular on the space (to rounding: a d of rounding
                // size once gave a false residual of 1e-17 on a singular,
                // inconsistent system): x still takes this cycle's earlier steps
                stop = Some(broke(it - 1, relres, format!("GMRES: Hessenberg column {d:e} at iteration {it}")));
                break;
            }
            let (c, s) = (h[j] / d, h[j + 1] / d);
            (h[j], h[j + 1]) = (d, 0.0);
            (g[j], g[j + 1]) = (c * g[j], -s * g[j]);
            rotations.push((c, s));
            columns.push(h);
            relres = g[j + 1].abs() / bnorm;
            // a zero hn (the exact solution is in the space) gives relres 0 and stops here
            if let Some(out) = record(history, "GMRES", it, relres, tol) {
                if out.breakdown.is_some() {
                    return Ok(out); // a non-finite residual: no update from it
                }
                stop = Some(out);
                break;
            }
            ops.update(Basis(j + 1), 0.0, Basis(j + 1), 0.0, None, 1.0 / hn)?;
        }
        if !columns.is_empty() {
            // x += M^-1 V y
            let y: Vec<f64> = back_substitute(&columns, &g).iter().map(|y| y * sigma).collect();
            ops.basis_combine(Slot::T, 0.0, &y)?;
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
