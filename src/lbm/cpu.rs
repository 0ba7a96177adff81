//! The host reference of `kernels/lbm.cu`: the same fused BGK/TRT collide-and-push
//! step, site by site, with f64 arithmetic whatever the storage type (f16
//! storage keeps f_i − w_i, as on the device).

use super::storage::Stored;
use super::{opposite, Params, C, FLUID, MOVING_WALL, Q, W};

fn equilibrium_of(i: usize, rho: f64, u: [f64; 3]) -> f64 {
    let cu = C[i][0] as f64 * u[0] + C[i][1] as f64 * u[1] + C[i][2] as f64 * u[2];
    let usq = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
    W[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq)
}

/// Density and momentum of one site's populations.
fn moments(f: &[f64; Q]) -> (f64, [f64; 3]) {
    let mut rho = 0.0;
    let mut j = [0.0; 3];
    for i in 0..Q {
        rho += f[i];
        for a in 0..3 {
            j[a] += C[i][a] as f64 * f[i];
        }
    }
    (rho, j)
}

fn gather<T: Stored>(f: &[T], n: usize, s: usize) -> [f64; Q] {
    std::array::from_fn(|i| f[i * n + s].load(W[i]))
}

/// One collide-and-stream step from `fin` into `fout` (both direction-major).
pub fn step<T: Stored>(p: &Params, flags: &[u8], fin: &[T], fout: &mut [T]) {
    let n = p.sites();
    let (omega, omega_minus) = (1.0 / p.tau, p.omega_minus());
    let g = p.force;
    for s in 0..n {
        if flags[s] != FLUID {
            for i in 0..Q {
                fout[i * n + s] = fin[i * n + s];
            }
            continue;
        }
        let f = gather(fin, n, s);
        let (rho, j) = moments(&f);
        let u: [f64; 3] = std::array::from_fn(|a| (j[a] + g[a] / 2.0) / rho);
        let uf = u[0] * g[0] + u[1] * g[1] + u[2] * g[2];
        for i in 0..Q {
            let c = C[i].map(|v| v as f64);
            let cu = c[0] * u[0] + c[1] * u[1] + c[2] * u[2];
            let cf = c[0] * g[0] + c[1] * g[1] + c[2] * g[2];
            let post = if p.magic > 0.0 {
                // TRT: the even and odd parts of f - feq (and of the source) relax at their own rates.
                let usq = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
                let (even_eq, odd_eq) = (W[i] * rho * (1.0 + 4.5 * cu * cu - 1.5 * usq), W[i] * rho * 3.0 * cu);
                let o = opposite(i);
                let (even, odd) = ((f[i] + f[o]) / 2.0, (f[i] - f[o]) / 2.0);
                f[i] - omega * (even - even_eq) - omega_minus * (odd - odd_eq)
                    + (1.0 - omega / 2.0) * W[i] * (9.0 * cu * cf - 3.0 * uf)
                    + (1.0 - omega_minus / 2.0) * W[i] * 3.0 * cf
            } else {
                f[i] - omega * (f[i] - equilibrium_of(i, rho, u)) + (1.0 - omega / 2.0) * W[i] * (3.0 * (cf - uf) + 9.0 * cu * cf)
            };
            match p.neighbour(s, i).filter(|&d| flags[d] == FLUID) {
                Some(d) => fout[i * n + d] = T::store(post, W[i]),
                None => {
                    let moving = p.neighbour(s, i).is_some_and(|d| flags[d] == MOVING_WALL);
                    let uw = p.wall_velocity;
                    let wall = if moving { 6.0 * W[i] * rho * (c[0] * uw[0] + c[1] * uw[1] + c[2] * uw[2]) } else { 0.0 };
                    fout[opposite(i) * n + s] = T::store(post - wall, W[i]);
                }
            }
        }
    }
}

/// Every site at the equilibrium of (rho, u).
pub fn equilibrium<T: Stored>(f: &mut [T], n: usize, rho: f64, u: [f64; 3]) {
    for i in 0..Q {
        let v = T::store(equilibrium_of(i, rho, u), W[i]);
        f[i * n..(i + 1) * n].fill(v);
    }
}

/// Density and force-corrected velocity of `count` sites from `first`; walls report 0.
pub fn fields<T: Stored>(p: &Params, flags: &[u8], f: &[T], first: usize, rho_out: &mut [f64], u_out: &mut [f64]) {
    let n = p.sites();
    for (t, rho_t) in rho_out.iter_mut().enumerate() {
        let s = first + t;
        let (rho, j) = if flags[s] == FLUID { moments(&gather(f, n, s)) } else { (0.0, [0.0; 3]) };
        *rho_t = rho;
        for a in 0..3 {
            u_out[3 * t + a] = if rho != 0.0 { (j[a] + p.force[a] / 2.0) / rho } else { 0.0 };
        }
    }
}
