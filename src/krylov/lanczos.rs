//! The Lanczos-type methods TOUGHREACT offers beside BiCGSTAB, preconditioned
//! as in the Templates book (Barrett et al., 1994, figs. 2.8 and 2.9):
//! BiCG, which also multiplies by A^T and applies M^-T, and CGS (Sonneveld's
//! conjugate gradients squared), which needs neither.

use super::{broke, done, dot, initial_residual, record, Ops, Outcome, Slot};
use crate::error::Result;

/// The residual before the first iteration, recorded; Some(outcome) when
/// the guess already meets the tolerance. Returns ||b|| and ||r||/||b||.
fn start(ops: &mut dyn Ops, tol: f64, history: &mut Vec<f64>) -> Result<(f64, f64, Option<Outcome>)> {
    let (bnorm, rr) = initial_residual(ops)?;
    let relres = rr.sqrt() / bnorm;
    history.push(relres);
    // the shadow residual r~ = r0
    ops.update(Slot::Rhat, 1.0, Slot::R, 0.0, None, 0.0)?;
    Ok((bnorm, relres, (relres <= tol).then(|| done(true, 0, relres))))
}

/// BiCG. Slots: r, r~ (Rhat), z = M^-1 r, z~ = M^-T r~ (Shat), p, p~ (Phat),
/// q = A p, q~ = A^T p~ (V).
pub fn bicg(ops: &mut dyn Ops, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let (bnorm, mut relres, stop) = start(ops, tol, history)?;
    if let Some(out) = stop {
        return Ok(out);
    }
    let identity = ops.identity_precond();
    let (z, zt) = if identity { (Slot::R, Slot::Rhat) } else { (Slot::Z, Slot::Shat) };
    let mut rho_prev = 1.0;
    for it in 1..=maxit {
        if !identity {
            ops.precond(Slot::R, z)?;
            ops.precond_transpose(Slot::Rhat, zt)?;
        }
        let rho = dot(ops, z, Slot::Rhat)?;
        if rho == 0.0 || !rho.is_finite() {
            return Ok(broke(it - 1, relres, format!("BiCG: rho = (z, r~) = {rho:e} at iteration {it}")));
        }
        let beta = if it == 1 { 0.0 } else { rho / rho_prev };
        ops.update(Slot::P, 1.0, z, 0.0, None, beta)?;
        ops.update(Slot::Phat, 1.0, zt, 0.0, None, beta)?;
        ops.spmv(Slot::P, Slot::Q)?;
        ops.spmv_transpose(Slot::Phat, Slot::V)?;
        let pq = dot(ops, Slot::Phat, Slot::Q)?;
        if pq == 0.0 || !pq.is_finite() {
            return Ok(broke(it - 1, relres, format!("BiCG: (p~, A p) = {pq:e} at iteration {it}")));
        }
        let alpha = rho / pq;
        ops.update(Slot::X, alpha, Slot::P, 0.0, None, 1.0)?;
        let rr = ops.update_dots(Slot::R, -alpha, Slot::Q, 0.0, None, 1.0, None)?.0;
        ops.update(Slot::Rhat, -alpha, Slot::V, 0.0, None, 1.0)?;
        relres = rr.sqrt() / bnorm;
        if let Some(o) = record(history, "BiCG", it, relres, tol) {
            return Ok(o);
        }
        rho_prev = rho;
    }
    Ok(done(false, maxit, relres))
}

/// CGS. Slots: r, r~ (Rhat), u (S), p, q, p^ = M^-1 p (Phat), v^ = A p^ (V),
/// u + q (Z), u^ = M^-1 (u + q) (Shat), q^ = A u^ (T).
pub fn cgs(ops: &mut dyn Ops, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let (bnorm, mut relres, stop) = start(ops, tol, history)?;
    if let Some(out) = stop {
        return Ok(out);
    }
    let identity = ops.identity_precond();
    let (phat, uhat) = if identity { (Slot::P, Slot::Z) } else { (Slot::Phat, Slot::Shat) };
    let mut rho_prev = 1.0;
    for it in 1..=maxit {
        let rho = dot(ops, Slot::Rhat, Slot::R)?;
        if rho == 0.0 || !rho.is_finite() {
            return Ok(broke(it - 1, relres, format!("CGS: rho = (r~, r) = {rho:e} at iteration {it}")));
        }
        if it == 1 {
            ops.update(Slot::S, 1.0, Slot::R, 0.0, None, 0.0)?;
            ops.update(Slot::P, 1.0, Slot::S, 0.0, None, 0.0)?;
        } else {
            let beta = rho / rho_prev;
            ops.update(Slot::S, 1.0, Slot::R, beta, Some(Slot::Q), 0.0)?;
            // p = u + beta (q + beta p)
            ops.update(Slot::P, 1.0, Slot::S, beta, Some(Slot::Q), beta * beta)?;
        }
        if !identity {
            ops.precond(Slot::P, phat)?;
        }
        ops.spmv(phat, Slot::V)?;
        let sigma = dot(ops, Slot::Rhat, Slot::V)?;
        if sigma == 0.0 || !sigma.is_finite() {
            return Ok(broke(it - 1, relres, format!("CGS: (r~, A p) = {sigma:e} at iteration {it}")));
        }
        let alpha = rho / sigma;
        ops.update(Slot::Q, 1.0, Slot::S, -alpha, Some(Slot::V), 0.0)?;
        ops.update(Slot::Z, 1.0, Slot::S, 1.0, Some(Slot::Q), 0.0)?;
        if !identity {
            ops.precond(Slot::Z, uhat)?;
        }
        ops.update(Slot::X, alpha, uhat, 0.0, None, 1.0)?;
        ops.spmv(uhat, Slot::T)?;
        let rr = ops.update_dots(Slot::R, -alpha, Slot::T, 0.0, None, 1.0, None)?.0;
        relres = rr.sqrt() / bnorm;
        if let Some(o) = record(history, "CGS", it, relres, tol) {
            return Ok(o);
        }
        rho_prev = rho;
    }
    Ok(done(false, maxit, relres))
}
