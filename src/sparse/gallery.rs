//! Generated test and benchmark operators (0-based CSR triplets).

/// CSR arrays: row pointers, columns, values.
pub type CsrArrays = (Vec<i64>, Vec<i64>, Vec<f64>);

fn stencil(n: usize, offsets: &[(i64, i64, i64, f64)]) -> CsrArrays {
    stencil_box([n; 3], offsets)
}

/// The stencil on an nx x ny x nz grid, x fastest.
fn stencil_box([nx, ny, nz]: [usize; 3], offsets: &[(i64, i64, i64, f64)]) -> CsrArrays {
    let (nx, ny, nz) = (nx as i64, ny as i64, nz as i64);
    let idx = |i: i64, j: i64, k: i64| i + nx * (j + ny * k);
    let (mut rp, mut ci, mut v) = (vec![0i64], Vec::new(), Vec::new());
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                for &(di, dj, dk, w) in offsets {
                    let (a, b, c) = (i + di, j + dj, k + dk);
                    if (0..nx).contains(&a) && (0..ny).contains(&b) && (0..nz).contains(&c) {
                        ci.push(idx(a, b, c));
                        v.push(w);
                    }
                }
                rp.push(ci.len() as i64);
            }
        }
    }
    (rp, ci, v)
}

/// The 7-point Laplacian on an n^3 grid with Dirichlet boundaries (SPD).
pub fn laplacian7(n: usize) -> CsrArrays {
    laplacian7_box([n; 3])
}

/// The 7-point Laplacian on an nx x ny x nz grid (x fastest), Dirichlet
/// boundaries: weak-scaling runs stack one n^3 cube a rank along z.
pub fn laplacian7_box(dims: [usize; 3]) -> CsrArrays {
    let mut o = vec![(0, 0, -1, -1.0), (0, -1, 0, -1.0), (-1, 0, 0, -1.0), (0, 0, 0, 6.0)];
    o.extend([(1, 0, 0, -1.0), (0, 1, 0, -1.0), (0, 0, 1, -1.0)]);
    stencil_box(dims, &o)
}

/// A 27-point operator on an n^3 grid: 26 on the diagonal, -1 to every
/// neighbour (SPD, diagonally dominant).
pub fn laplacian27(n: usize) -> CsrArrays {
    let mut o = Vec::new();
    for dk in -1..=1 {
        for dj in -1..=1 {
            for di in -1..=1 {
                o.push((di, dj, dk, if (di, dj, dk) == (0, 0, 0) { 26.0 } else { -1.0 }));
            }
        }
    }
    stencil(n, &o)
}

/// Steady convection-diffusion -lap(u) + w . grad(u) on an n^3 grid, first-order
/// upwind for the velocity w = (1, 1, 1) * peclet / h: nonsymmetric, an
/// M-matrix, the kind a porous-flow Newton step produces.
pub fn convection_diffusion(n: usize, peclet: f64) -> CsrArrays {
    let c = peclet; // convection per cell, in units of the diffusion coefficient
    let mut o = vec![(0, 0, -1, -1.0 - c), (0, -1, 0, -1.0 - c), (-1, 0, 0, -1.0 - c), (0, 0, 0, 6.0 + 3.0 * c)];
    o.extend([(1, 0, 0, -1.0), (0, 1, 0, -1.0), (0, 0, 1, -1.0)]);
    stencil(n, &o)
}

/// A deterministic uniform draw in [0, 1) (xorshift64*), for generated coefficients.
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

/// Steady single-phase flow in a heterogeneous n^3 medium: two-point flux
/// finite volumes (harmonic-mean transmissibilities), every boundary face
/// held at a fixed pressure. SPD; `k` is the permeability per cell, x fastest.
pub fn porous_flow(n: usize, k: &[f64]) -> CsrArrays {
    porous_flow_fixed(n, k, &[true; 6])
}

/// [`porous_flow`] with only some of the box's faces at a fixed pressure,
/// the others closed (no flow): `fixed[2 axis + side]`, axis 0 = x, side 0 =
/// the low face. SPD while one face is fixed.
pub fn porous_flow_fixed(n: usize, k: &[f64], fixed: &[bool; 6]) -> CsrArrays {
    let idx = |i: usize, j: usize, l: usize| i + n * (j + n * l);
    let (mut rp, mut ci, mut v) = (vec![0i64], Vec::new(), Vec::new());
    for l in 0..n {
        for j in 0..n {
            for i in 0..n {
                let c = idx(i, j, l);
                let mut diag = 0.0;
                let mut row: Vec<(usize, f64)> = Vec::with_capacity(7);
                for (d, step) in [(0usize, 1isize), (1, 1), (2, 1), (0, -1), (1, -1), (2, -1)] {
                    let mut p = [i as isize, j as isize, l as isize];
                    p[d] += step;
                    if p.iter().all(|&q| (0..n as isize).contains(&q)) {
                        let o = idx(p[0] as usize, p[1] as usize, p[2] as usize);
                        let t = 2.0 * k[c] * k[o] / (k[c] + k[o]);
                        row.push((o, -t));
                        diag += t;
                    } else if fixed[2 * d + usize::from(step > 0)] {
                        diag += 2.0 * k[c]; // half a cell to the fixed boundary pressure
                    }
                }
                row.push((c, diag));
                row.sort_by_key(|e| e.0);
                for (o, w) in row {
                    ci.push(o as i64);
                    v.push(w);
                }
                rp.push(ci.len() as i64);
            }
        }
    }
    (rp, ci, v)
}

/// A log-normal permeability on n^3 cells spanning `contrast` (max / min):
/// white noise smoothed by three box filters (a correlation length of a
/// few cells), exponentiated; fixed by `seed`.
pub fn lognormal_permeability(n: usize, contrast: f64, seed: u64) -> Vec<f64> {
    let mut state = seed | 1;
    let mut g: Vec<f64> = (0..n * n * n).map(|_| uniform(&mut state) - 0.5).collect();
    let idx = |i: usize, j: usize, l: usize| i + n * (j + n * l);
    for _ in 0..3 {
        for axis in 0..3 {
            let prev = g.clone();
            for l in 0..n {
                for j in 0..n {
                    for i in 0..n {
                        let p = [i, j, l];
                        let (mut s, mut m) = (0.0, 0.0);
                        for d in -1isize..=1 {
                            let q = p[axis] as isize + d;
                            if (0..n as isize).contains(&q) {
                                let mut r = p;
                                r[axis] = q as usize;
                                s += prev[idx(r[0], r[1], r[2])];
                                m += 1.0;
                            }
                        }
                        g[idx(i, j, l)] = s / m;
                    }
                }
            }
        }
    }
    let (lo, hi) = g.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    g.iter().map(|x| (contrast.ln() * (x - lo) / (hi - lo).max(f64::MIN_POSITIVE)).exp()).collect()
}

/// Horizontal layers two cells thick, each of a permeability drawn
/// log-uniformly from [1, contrast]; fixed by `seed`.
pub fn layered_permeability(n: usize, contrast: f64, seed: u64) -> Vec<f64> {
    let mut state = seed | 1;
    let mut layers: Vec<f64> = (0..n.div_ceil(2)).map(|_| (contrast.ln() * uniform(&mut state)).exp()).collect();
    // the extremes present, so the contrast is exact
    layers[0] = 1.0;
    if layers.len() > 1 {
        layers[1] = contrast;
    }
    (0..n * n * n).map(|c| layers[c / (n * n) / 2]).collect()
}

/// Horizontal layers `thickness` cells thick alternating between 1 and
/// `contrast`, with a log-normal variation inside them (`decades` the
/// standard deviation of log10 k, correlated over a few cells: white noise
/// through three passes of a 3-point mean along z, y and x, the edge value
/// repeated), then log10 k mapped linearly onto [0, log10 contrast] so the
/// contrast is exact; fixed by `seed`. With only the z = 0 face fixed
/// (`porous_flow_fixed`), at 96^3 with 8-cell layers and 1.25 decades,
/// SciPy's Jacobi-CG takes 1,828 iterations and pyamg 5.4.1's smoothed
/// aggregation and classical AMG-CG 38 and 23 (tolerance 1e-8, b = A 1):
/// the nearest found to issue 19's layered row (2,253 / 41 / 19), where
/// two-cell layers of uniform permeability give 449 / 25 / 8.
pub fn layered_varied_permeability(n: usize, contrast: f64, thickness: usize, decades: f64, seed: u64) -> Vec<f64> {
    let mut state = seed | 1;
    let mut g: Vec<f64> = (0..n * n * n).map(|_| uniform(&mut state) - 0.5).collect();
    let stride = [1, n, n * n];
    for _ in 0..3 {
        for axis in [2, 1, 0] {
            let prev = g.clone();
            for (c, out) in g.iter_mut().enumerate() {
                let at = (c / stride[axis]) % n;
                let below = if at > 0 { c - stride[axis] } else { c };
                let above = if at + 1 < n { c + stride[axis] } else { c };
                *out = (prev[below] + prev[c] + prev[above]) / 3.0;
            }
        }
    }
    let count = g.len() as f64;
    let mean = g.iter().sum::<f64>() / count;
    let std = (g.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / count).sqrt().max(f64::MIN_POSITIVE);
    let top = contrast.log10();
    let log_k: Vec<f64> = g
        .iter()
        .enumerate()
        .map(|(c, x)| if (c / (n * n) / thickness.max(1)).is_multiple_of(2) { 0.0 } else { top } + decades * (x - mean) / std)
        .collect();
    let (lo, hi) = log_k.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    log_k.iter().map(|x| 10f64.powf(top * (x - lo) / (hi - lo).max(f64::MIN_POSITIVE))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The box operator against the grid it stands for: a row per point (x
    /// fastest), 6 on the diagonal, -1 at each of the point's neighbours
    /// inside the box and nowhere else; so 7 n less one entry per point and
    /// missing neighbour (two a line of points along each axis).
    #[test]
    fn the_box_laplacian_couples_each_point_to_its_grid_neighbours() {
        let [nx, ny, nz] = [3usize, 4, 5];
        let (rp, ci, v) = laplacian7_box([nx, ny, nz]);
        let n = nx * ny * nz;
        assert_eq!(rp.len(), n + 1);
        assert_eq!(ci.len(), 7 * n - 2 * (ny * nz + nx * nz + nx * ny));
        for (r, w) in rp.windows(2).enumerate() {
            let (i, j, k) = ((r % nx) as i64, ((r / nx) % ny) as i64, (r / (nx * ny)) as i64);
            let mut want: Vec<(i64, f64)> = [(0, 0, 0), (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
                .iter()
                .map(|&(a, b, c)| (i + a, j + b, k + c, if (a, b, c) == (0, 0, 0) { 6.0 } else { -1.0 }))
                .filter(|&(a, b, c, _)| a >= 0 && b >= 0 && c >= 0 && a < nx as i64 && b < ny as i64 && c < nz as i64)
                .map(|(a, b, c, x)| (a + nx as i64 * (b + ny as i64 * c), x))
                .collect();
            let mut got: Vec<(i64, f64)> = (w[0] as usize..w[1] as usize).map(|e| (ci[e], v[e])).collect();
            want.sort_by_key(|p| p.0);
            got.sort_by_key(|p| p.0);
            assert_eq!(got, want, "row {r}");
        }
        assert_eq!(laplacian7_box([4; 3]), laplacian7(4));
    }

    /// The varied layers against the NumPy/SciPy generator of the layered
    /// search (results/2026-12-01-layered-search/gen.py, `field(12, {"vals":
    /// "alt", "thick": 4, "lat": 1.25, "faxes": [0, 1, 2]})`, whose box
    /// filter is scipy's `uniform_filter1d(mode="nearest")`): a few cells and
    /// the sum of log10 k.
    #[test]
    fn varied_layers_match_the_search_generator() {
        let k = layered_varied_permeability(12, 1e6, 4, 1.25, 7);
        let want = [
            (0, 4517.466216768699),
            (1, 852.2122900594587),
            (13, 844.8362328892302),
            (150, 141.3217397361295),
            (577, 9822.780350946818),
            (1000, 84378.51812764694),
            (1727, 3.432059976583734),
        ];
        for (c, w) in want {
            assert!((k[c] - w).abs() <= 1e-9 * w, "cell {c}: {} against {w}", k[c]);
        }
        let (lo, hi) = k.iter().fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        assert!((lo - 1.0).abs() < 1e-12 && (hi / 1e6 - 1.0).abs() < 1e-12, "range [{lo}, {hi}]");
        let sum: f64 = k.iter().map(|x| x.log10()).sum();
        assert!((sum - 4980.810960077758).abs() < 1e-8, "sum of log10 k {sum}");
    }

    /// A closed face adds nothing to its cells' diagonals; a fixed one adds
    /// 2 k (half a cell to the boundary pressure): rows sum to that.
    #[test]
    fn closed_faces_take_no_boundary_term() {
        let n = 4;
        let k: Vec<f64> = (0..n * n * n).map(|c| 1.0 + c as f64).collect();
        let mut fixed = [false; 6];
        fixed[4] = true; // z = 0
        let (rp, _, v) = porous_flow_fixed(n, &k, &fixed);
        for (c, w) in rp.windows(2).enumerate() {
            let row_sum: f64 = v[w[0] as usize..w[1] as usize].iter().sum();
            let want = if c < n * n { 2.0 * k[c] } else { 0.0 };
            assert!((row_sum - want).abs() <= 1e-12 * k[c] * 8.0, "row {c}: sum {row_sum}, want {want}");
        }
        assert_eq!(porous_flow_fixed(n, &k, &[true; 6]), porous_flow(n, &k));
    }
}
