//! The host reference of `kernels/lbm.cu`: the same fused BGK/TRT collide-and-push
//! step, site by site, with f64 arithmetic whatever the storage type (f16
//! storage keeps f_i − w_i, as on the device).

use super::storage::Stored;
use super::{opposite, Open, Params, C, FLUID, MOVING_WALL, PRESSURE_BC, Q, VELOCITY_BC, W, WALL};

pub(crate) fn equilibrium_of(i: usize, rho: f64, u: [f64; 3]) -> f64 {
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

/// One collide-and-stream step from `fin` into `fout` (both direction-major);
/// `open`: the velocity and pressure boundary sites' prescribed values.
pub fn step<T: Stored>(p: &Params, flags: &[u8], open: &Open, fin: &[T], fout: &mut [T]) {
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
            let d = p.neighbour(s, i);
            let back = match d.map(|d| (d, flags[d])) {
                Some((d, FLUID)) => {
                    fout[i * n + d] = T::store(post, W[i]);
                    continue;
                }
                Some((_, MOVING_WALL)) => {
                    let uw = p.wall_velocity;
                    post - 6.0 * W[i] * rho * (c[0] * uw[0] + c[1] * uw[1] + c[2] * uw[2])
                }
                // a wall moving with the boundary site's own velocity (Krüger et al. 2017, eq. 5.26)
                Some((d, VELOCITY_BC)) => {
                    let ub = &open.values(d)[1..];
                    post - 6.0 * W[i] * rho * (c[0] * ub[0] + c[1] * ub[1] + c[2] * ub[2])
                }
                // anti-bounce-back towards the boundary site's density (eq. 5.53)
                Some((d, PRESSURE_BC)) => {
                    let usq = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
                    -post + 2.0 * W[i] * open.values(d)[0] * (1.0 + 4.5 * cu * cu - 1.5 * usq)
                }
                _ => post,
            };
            fout[opposite(i) * n + s] = T::store(back, W[i]);
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

/// The force the fluid exerts on the non-fluid sites `body` (sorted), by
/// momentum exchange on populations after streaming: along each link from
/// a fluid site x into a body wall site, c_i (post_i(x) + f_opp(i)(x)), where
/// the bounced-back f_opp(i)(x) is post_i(x) less Ladd's term at a moving
/// wall (taken with x's present density). Only links from the fluid sites
/// own.0..own.1 count (a lattice split over ranks counts each link once).
pub fn body_force<T: Stored>(p: &Params, flags: &[u8], f: &[T], body: &[u32], own: (usize, usize)) -> [f64; 3] {
    let n = p.sites();
    let mut force = [0.0; 3];
    for &b in body {
        let b = b as usize;
        let kind = flags[b];
        if kind != WALL && kind != MOVING_WALL {
            continue;
        }
        for i in 1..Q {
            let o = opposite(i);
            // the fluid site x with x + c_i = b
            let Some(x) = p.neighbour(b, o).filter(|&x| flags[x] == FLUID && (own.0..own.1).contains(&x)) else { continue };
            let back = f[o * n + x].load(W[o]);
            let c = C[i].map(|v| v as f64);
            let ladd = if kind == MOVING_WALL {
                let (rho, _) = moments(&gather(f, n, x));
                let uw = p.wall_velocity;
                6.0 * W[i] * rho * (c[0] * uw[0] + c[1] * uw[1] + c[2] * uw[2])
            } else {
                0.0
            };
            for a in 0..3 {
                force[a] += c[a] * (2.0 * back + ladd);
            }
        }
    }
    force
}
