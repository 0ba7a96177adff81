//! The CPU reference: the same pair coefficients as `kernels/radfields.cu`,
//! threaded over the S points.

use super::{Consts, Sources};
use crate::error::{host_copy, host_vec, Result};
use num_complex::Complex64;

/// One pair's Rhat and coefficients (see the kernel's `Pair`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Pair {
    pub r: [f64; 3],
    pub ea: Complex64,
    pub eb: Complex64,
    pub ex: Complex64,
    pub ca: Complex64,
    pub cb: Complex64,
    pub cx: Complex64,
}

/// The coefficients of S point `s` and S' point `p` with weight `w`; None when they coincide.
pub fn pair_coefficients(s: [f64; 3], p: [f64; 3], w: f64, c: &Consts) -> Option<Pair> {
    let d = [s[0] - p[0], s[1] - p[1], s[2] - p[2]];
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if r2 == 0.0 {
        return None;
    }
    let r = r2.sqrt();
    let inv_r = 1.0 / r;
    let kr = c.k * r;
    let j = Complex64::new(0.0, 1.0);
    let g = (-j * kr).exp() * (inv_r / (4.0 * std::f64::consts::PI));
    let q = 1.0 + j * kr;
    let a = -q * g * inv_r;
    let inv_kr2 = c.inv_k2 * (inv_r * inv_r);
    let pp = 3.0 + 3.0 * j * kr - kr * kr;
    let alpha = g * (1.0 - q * inv_kr2);
    let beta = g * pp * inv_kr2;
    let (m, n) = (c.neg_jwmu * w, c.neg_k2 * w);
    Some(Pair { r: d.map(|x| x * inv_r), ea: m * alpha, eb: m * beta, ex: -a * w, ca: n * alpha, cb: n * beta, cx: m * a })
}

fn cross(a: [f64; 3], b: &[Complex64]) -> [Complex64; 3] {
    [b[2] * a[1] - b[1] * a[2], b[0] * a[2] - b[2] * a[0], b[1] * a[0] - b[0] * a[1]]
}

/// Adds one pair's contribution for one right-hand side: `jm` = J0 J1 J2 M0 M1 M2,
/// `f` = E0 E1 E2 curlE0 curlE1 curlE2.
pub fn add_pair(q: &Pair, jm: &[Complex64], f: &mut [Complex64]) {
    let (jv, mv) = (&jm[..3], &jm[3..6]);
    let dot = |v: &[Complex64]| v[0] * q.r[0] + v[1] * q.r[1] + v[2] * q.r[2];
    let (be, bc) = (q.eb * dot(jv), q.cb * dot(mv));
    let (xm, xj) = (cross(q.r, mv), cross(q.r, jv));
    for i in 0..3 {
        f[i] += q.ea * jv[i] + be * q.r[i] + q.ex * xm[i];
        f[3 + i] += q.ca * mv[i] + bc * q.r[i] + q.cx * xj[i];
    }
}

/// The S points of a CPU context and their fields (3, 2, n_s, n_rhs).
pub struct Part {
    points: Vec<f64>,
    pub fields: Vec<Complex64>,
    pub excluded: u64,
}

impl Part {
    /// The fields are allocated first, so a size the host cannot hold fails
    /// before the caller's points are read.
    pub fn new(points: &[f64], n_rhs: usize) -> Result<Part> {
        let fields = host_vec(2 * points.len() * n_rhs, Complex64::default(), "rad_fields fields")?;
        Ok(Part { points: host_copy(points, "rad_fields points")?, fields, excluded: 0 })
    }

    pub fn reset(&mut self) {
        self.fields.fill(Complex64::default());
        self.excluded = 0;
    }

    /// Threads over contiguous runs of S points (inline when the batch is
    /// small); each run sums its points' contributions locally, then they are
    /// added into the fields.
    pub fn accumulate(&mut self, c: &Consts, src: &Sources, n_rhs: usize) {
        let n_s = self.points.len() / 3;
        let work = n_s * src.n_p * n_rhs;
        let threads =
            if work < 1 << 16 { 1 } else { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(n_s) };
        let points = &self.points;
        let run = |lo: usize, hi: usize| {
            let mut local = vec![Complex64::default(); 6 * (hi - lo) * n_rhs];
            let mut skipped = 0;
            for s in lo..hi {
                let sp = [points[3 * s], points[3 * s + 1], points[3 * s + 2]];
                for p in 0..src.n_p {
                    let pp = [src.points[3 * p], src.points[3 * p + 1], src.points[3 * p + 2]];
                    let Some(q) = pair_coefficients(sp, pp, src.weights[p], c) else {
                        skipped += 1;
                        continue;
                    };
                    for r in 0..n_rhs {
                        let jm = &src.currents[6 * (p + src.n_p * r)..][..6];
                        let at = 6 * (s - lo + (hi - lo) * r);
                        add_pair(&q, jm, &mut local[at..at + 6]);
                    }
                }
            }
            (lo, local, skipped)
        };
        let results: Vec<(usize, Vec<Complex64>, u64)> = if threads == 1 {
            vec![run(0, n_s)]
        } else {
            std::thread::scope(|scope| {
                let workers: Vec<_> =
                    (0..threads).map(|t| scope.spawn(move || run(n_s * t / threads, n_s * (t + 1) / threads))).collect();
                workers.into_iter().map(|w| w.join().expect("rad_fields worker panicked")).collect()
            })
        };
        for (lo, local, skipped) in results {
            let count = local.len() / (6 * n_rhs);
            for r in 0..n_rhs {
                let dst = &mut self.fields[6 * (lo + n_s * r)..][..6 * count];
                for (d, v) in dst.iter_mut().zip(&local[6 * count * r..6 * count * (r + 1)]) {
                    *d += v;
                }
            }
            self.excluded += skipped;
        }
    }
}
