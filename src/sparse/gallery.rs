//! Generated test and benchmark operators (0-based CSR triplets).

/// CSR arrays: row pointers, columns, values.
pub type CsrArrays = (Vec<i64>, Vec<i64>, Vec<f64>);

fn stencil(n: usize, offsets: &[(i64, i64, i64, f64)]) -> CsrArrays {
    let idx = |i: i64, j: i64, k: i64| i + n as i64 * (j + n as i64 * k);
    let (mut rp, mut ci, mut v) = (vec![0i64], Vec::new(), Vec::new());
    for k in 0..n as i64 {
        for j in 0..n as i64 {
            for i in 0..n as i64 {
                for &(di, dj, dk, w) in offsets {
                    let (a, b, c) = (i + di, j + dj, k + dk);
                    if (0..n as i64).contains(&a) && (0..n as i64).contains(&b) && (0..n as i64).contains(&c) {
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
    let mut o = vec![(0, 0, -1, -1.0), (0, -1, 0, -1.0), (-1, 0, 0, -1.0), (0, 0, 0, 6.0)];
    o.extend([(1, 0, 0, -1.0), (0, 1, 0, -1.0), (0, 0, 1, -1.0)]);
    stencil(n, &o)
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
