//! The V-cycle on the host (the CPU reference): each level smooths from
//! zero, restricts its residual, adds the prolongated coarse correction and
//! smooths again with the same steps (so the cycle is symmetric for a
//! symmetric A and serves CG). The device (`cuda.rs`) runs the same steps.

use super::{Hierarchy, Mat, Smoother};

/// One smoothing step: d = c1 d + c2 inv (b - A x); x += d (x = 0 and d = 0
/// before the first step from zero: `from_zero`).
fn smooth_step(a: &Mat, inv: &[f64], c: [f64; 2], b: &[f64], x: &mut [f64], d: &mut [f64], from_zero: bool) {
    let old = if from_zero { None } else { Some(x.to_vec()) };
    for i in 0..a.nrows {
        let ax: f64 = old.as_ref().map_or(0.0, |x| a.row(i).map(|k| a.v[k] * x[a.ci[k] as usize]).sum());
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
        smooth_step(a, inv, c, b, x, &mut d, from_zero);
        from_zero = false;
    }
}

/// x = the V-cycle from level `l` applied to b.
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
    let mut r = vec![0.0; a.nrows];
    for i in 0..a.nrows {
        r[i] = b[i] - a.row(i).map(|k| a.v[k] * x[a.ci[k] as usize]).sum::<f64>();
    }
    let nc = tr.r.nrows;
    let (mut bc, mut xc) = (vec![0.0; nc], vec![0.0; nc]);
    for j in 0..nc {
        bc[j] = tr.r.row(j).map(|k| tr.r.v[k] * r[tr.r.ci[k] as usize]).sum();
    }
    cycle(h, l + 1, &bc, &mut xc);
    for i in 0..a.nrows {
        x[i] += tr.p.row(i).map(|k| tr.p.v[k] * xc[tr.p.ci[k] as usize]).sum::<f64>();
    }
    smooth(h, l, b, x, false);
}

/// z = one V-cycle applied to r.
pub fn vcycle(h: &Hierarchy, r: &[f64], z: &mut [f64]) {
    cycle(h, 0, r, z);
}
