//! The V-cycle on the host (the CPU reference): each level smooths from
//! zero, restricts its residual, adds the prolongated coarse correction and
//! smooths again with the same steps (so the cycle is symmetric for a
//! symmetric A and serves CG). A W-cycle (Options::cycle) visits each coarse
//! level but a dense coarsest twice, the second time from the first's
//! residual. The device (`cuda.rs`) runs the same steps.
//! An f32 cycle (Options::f32_cycle) reads each value rounded to f32, as
//! the device's f32 copies hold it.

use super::{Hierarchy, Mat, Smoother};

/// Row i of m times x, the values rounded to f32 where `single`.
fn row_times(m: &Mat, i: usize, x: &[f64], single: bool) -> f64 {
    if single {
        m.row(i).map(|k| m.v[k] as f32 as f64 * x[m.ci[k] as usize]).sum()
    } else {
        m.row(i).map(|k| m.v[k] * x[m.ci[k] as usize]).sum()
    }
}

/// One smoothing step: d = c1 d + c2 inv (b - A x); x += d (x = 0 and d = 0
/// before the first step from zero: `from_zero`).
#[allow(clippy::too_many_arguments)]
fn smooth_step(a: &Mat, single: bool, inv: &[f64], c: [f64; 2], b: &[f64], x: &mut [f64], d: &mut [f64], from_zero: bool) {
    let old = if from_zero { None } else { Some(x.to_vec()) };
    for i in 0..a.nrows {
        let ax = old.as_ref().map_or(0.0, |x| row_times(a, i, x, single));
        let di = c[1] * inv[i] * (b[i] - ax) + if c[0] != 0.0 { c[0] * d[i] } else { 0.0 };
        d[i] = di;
        x[i] = old.as_ref().map_or(0.0, |x| x[i]) + di;
    }
}

/// Symmetric Gauss-Seidel in place: rows 0..n, then n-1..0, each
/// x_i = (b_i - sum_{j != i} a_ij x_j) / a_ii (`inv` holds 1 / a_ii).
fn gauss_seidel(a: &Mat, inv: &[f64], b: &[f64], x: &mut [f64]) {
    let mut row = |i: usize| {
        let off: f64 = a.row(i).filter(|&k| a.ci[k] as usize != i).map(|k| a.v[k] * x[a.ci[k] as usize]).sum();
        x[i] = (b[i] - off) * inv[i];
    };
    (0..a.nrows).for_each(&mut row);
    (0..a.nrows).rev().for_each(&mut row);
}

fn smooth(h: &Hierarchy, l: usize, b: &[f64], x: &mut [f64], mut from_zero: bool) {
    let level = &h.levels[l];
    let (a, inv, coefficients) = (&level.a, &level.smoother_inverse, &level.coefficients);
    if let Smoother::GaussSeidel { sweeps } = h.smoother.on_level(l) {
        if from_zero {
            x.fill(0.0);
        }
        (0..sweeps).for_each(|_| gauss_seidel(a, inv, b, x));
        return;
    }
    let mut d = vec![0.0; a.nrows];
    for &c in coefficients {
        smooth_step(a, h.single_on_level(l), inv, c, b, x, &mut d, from_zero);
        from_zero = false;
    }
}

/// b - A x on level `l`, A's values as the cycle reads them.
fn residual(h: &Hierarchy, l: usize, b: &[f64], x: &[f64]) -> Vec<f64> {
    let a = &h.levels[l].a;
    (0..a.nrows).map(|i| b[i] - row_times(a, i, x, h.single_on_level(l))).collect()
}

/// x = the cycle from level `l` applied to b.
fn cycle(h: &Hierarchy, l: usize, b: &[f64], x: &mut [f64]) {
    let level = &h.levels[l];
    let Some(tr) = &level.transfer else {
        match &h.coarse_inverse {
            Some(inv) => {
                let n = b.len();
                for i in 0..n {
                    x[i] = (0..n).map(|j| inv[i * n + j] * b[j]).sum();
                }
            }
            None => smooth(h, l, b, x, true),
        }
        return;
    };
    let a = &level.a;
    smooth(h, l, b, x, true);
    let r = residual(h, l, b, x);
    let (nc, single) = (tr.r.nrows, h.options.f32_cycle);
    let (mut bc, mut xc) = (vec![0.0; nc], vec![0.0; nc]);
    for j in 0..nc {
        bc[j] = row_times(&tr.r, j, &r, single);
    }
    cycle(h, l + 1, &bc, &mut xc);
    if h.visits_twice(l + 1) {
        let rc = residual(h, l + 1, &bc, &xc);
        let mut e = vec![0.0; nc];
        cycle(h, l + 1, &rc, &mut e);
        xc.iter_mut().zip(&e).for_each(|(x, e)| *x += e);
    }
    for i in 0..a.nrows {
        x[i] += row_times(&tr.p, i, &xc, single);
    }
    smooth(h, l, b, x, false);
}

/// z = one cycle (V or W) applied to r.
pub fn vcycle(h: &Hierarchy, r: &[f64], z: &mut [f64]) {
    cycle(h, 0, r, z);
}
