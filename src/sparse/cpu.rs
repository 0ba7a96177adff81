//! CPU reference: the serial loops of a Fortran CSR code.

use super::Pattern;
use crate::error::{Error, ErrorKind, Result};

/// y = alpha*A*x + beta*y (y not read when beta == 0).
pub fn spmv(p: &Pattern, v: &[f64], alpha: f64, x: &[f64], beta: f64, y: &mut [f64]) {
    for (r, yr) in y.iter_mut().enumerate() {
        let (s, e) = (p.row_ptr[r] as usize, p.row_ptr[r + 1] as usize);
        let sum: f64 = (s..e).map(|k| v[k] * x[p.col[k] as usize]).sum();
        *yr = if beta == 0.0 { alpha * sum } else { alpha * sum + beta * *yr };
    }
}

/// y[rows[k]] += (A x)_k, row k of A being row rows[k] of y: a distributed
/// matrix's halo block over its rows with entries (kernels/sparse.cu
/// `spmv_rows_add`).
pub fn spmv_rows_add(p: &Pattern, v: &[f64], rows: &[i32], x: &[f64], y: &mut [f64]) {
    for (k, &r) in rows.iter().enumerate() {
        let (s, e) = (p.row_ptr[k] as usize, p.row_ptr[k + 1] as usize);
        let sum: f64 = (s..e).map(|j| v[j] * x[p.col[j] as usize]).sum();
        y[r as usize] += sum;
    }
}

/// Names a pivot row for messages (0-based and the 1-based Fortran index).
pub fn row_name(r: usize) -> String {
    format!("row {r} (0-based; {} 1-based)", r + 1)
}

/// An ILU(0) breakdown at row `r`: a zero pivot, or one that overflowed.
pub fn pivot_error(r: usize, piv: f64) -> Error {
    let what = if piv == 0.0 {
        "zero pivot".to_string()
    } else {
        format!("the pivot overflowed to {piv} (entries too large or a near-singular leading block)")
    };
    Error::new(ErrorKind::Breakdown, format!("ILU(0): {what} at {}", row_name(r)))
}

/// ILU(0) in place on a copy of the values (IKJ order, the pattern of A).
/// Rows without a diagonal entry are refused before this is called.
pub fn ilu0(p: &Pattern, lu: &mut [f64]) -> Result<()> {
    ilu0_renumbered(p, lu, &|i| i)
}

/// `ilu0` of a reordered matrix: a bad pivot's row i is named as the
/// caller's row `caller_row(i)`.
pub fn ilu0_renumbered(p: &Pattern, lu: &mut [f64], caller_row: &dyn Fn(usize) -> usize) -> Result<()> {
    for i in 0..p.nrows {
        let (si, ei, di) = (p.row_ptr[i] as usize, p.row_ptr[i + 1] as usize, p.diag[i] as usize);
        for kk in si..di {
            let k = p.col[kk] as usize;
            let lik = lu[kk] / lu[p.diag[k] as usize];
            lu[kk] = lik;
            let (mut jj, mut q, ek) = (kk + 1, p.diag[k] as usize + 1, p.row_ptr[k + 1] as usize);
            while jj < ei && q < ek {
                let (cj, ck) = (p.col[jj], p.col[q]);
                if cj == ck {
                    lu[jj] -= lik * lu[q];
                    jj += 1;
                    q += 1;
                } else if cj < ck {
                    jj += 1;
                } else {
                    q += 1;
                }
            }
        }
        let piv = lu[di];
        if piv == 0.0 || !piv.is_finite() {
            return Err(pivot_error(caller_row(i), piv));
        }
    }
    Ok(())
}

/// z = U^-1 L^-1 r with the ILU(0) factors.
pub fn ilu0_apply(p: &Pattern, lu: &[f64], r: &[f64], z: &mut [f64]) {
    for i in 0..p.nrows {
        z[i] = r[i] - lower_sum(p, lu, i, z);
    }
    for i in (0..p.nrows).rev() {
        z[i] = (z[i] - upper_sum(p, lu, i, z)) / lu[p.diag[i] as usize];
    }
}

/// sum_{j<i} l_ij y_j over row i of the ILU(0) factors, in CSR order.
pub fn lower_sum(p: &Pattern, lu: &[f64], i: usize, y: &[f64]) -> f64 {
    (p.row_ptr[i] as usize..p.diag[i] as usize).map(|k| lu[k] * y[p.col[k] as usize]).sum()
}

/// sum_{j>i} u_ij y_j over row i of the ILU(0) factors, in CSR order.
pub fn upper_sum(p: &Pattern, lu: &[f64], i: usize, y: &[f64]) -> f64 {
    (p.diag[i] as usize + 1..p.row_ptr[i + 1] as usize).map(|k| lu[k] * y[p.col[k] as usize]).sum()
}

/// z = M^-1 r with ILU(0)'s factors, each triangular solve replaced by
/// `sweeps` Jacobi sweeps (kernels/sparse.cu `jacobi_sweep`, which sums a
/// row in lanes: equal to rounding): y = sum_{i<=k} (-L_s)^i r, then z the same
/// polynomial in D^-1 U_s applied to D^-1 y.
pub fn ilu0_apply_jacobi(p: &Pattern, lu: &[f64], sweeps: usize, r: &[f64], z: &mut [f64]) {
    let n = p.nrows;
    let row = |i: usize| (p.row_ptr[i] as usize, p.diag[i] as usize, p.row_ptr[i + 1] as usize);
    let mut y = r.to_vec();
    let mut next = vec![0.0; n];
    for _ in 0..sweeps {
        for (i, out) in next.iter_mut().enumerate() {
            let (s, d, _) = row(i);
            *out = (s..d).fold(r[i], |acc, kk| acc - lu[kk] * y[p.col[kk] as usize]);
        }
        std::mem::swap(&mut y, &mut next);
    }
    let mut from: Vec<f64> = y.clone();
    for sweep in 0..sweeps {
        for (i, out) in next.iter_mut().enumerate() {
            let (_, d, e) = row(i);
            let s = (d + 1..e).fold(y[i], |acc, kk| {
                let j = p.col[kk] as usize;
                acc - lu[kk] * if sweep == 0 { from[j] / lu[p.diag[j] as usize] } else { from[j] }
            });
            *out = s / lu[d];
        }
        std::mem::swap(&mut from, &mut next);
    }
    z.copy_from_slice(&from);
}

/// ILU(0)'s factors `lu` of A turned into those of M^T in A^T's pattern `t`
/// (entry k of A^T is entry from[k] of A; `a_diag`: A's diagonal slots):
/// below the diagonal u_ji / u_jj, on it u_ii, above it u_ii l_ji
/// (super::transpose; kernels/sparse.cu `ilu_transpose` does the same).
pub fn ilu_transpose(t: &Pattern, from: &[u32], a_diag: &[i32], lu: &[f64], out: &mut [f64]) {
    for i in 0..t.nrows {
        for k in t.row_ptr[i] as usize..t.row_ptr[i + 1] as usize {
            let (j, v) = (t.col[k] as usize, lu[from[k] as usize]);
            out[k] = match j.cmp(&i) {
                std::cmp::Ordering::Less => v / lu[a_diag[j] as usize],
                std::cmp::Ordering::Equal => v,
                std::cmp::Ordering::Greater => v * lu[a_diag[i] as usize],
            };
        }
    }
}

/// Symmetric Dirichlet rows and columns (`super::apply_dirichlet`): the same
/// row-by-row pass as kernels/sparse.cu `dirichlet`.
pub fn dirichlet(p: &Pattern, v: &mut [f64], fixed: &[u8], g: &[f64], b: &mut [f64]) {
    for i in 0..p.nrows {
        let d = p.diag[i] as usize;
        for k in p.row_ptr[i] as usize..p.row_ptr[i + 1] as usize {
            let j = p.col[k] as usize;
            if fixed[i] == 0 && fixed[j] != 0 {
                b[i] -= v[k] * g[j];
            }
            if (fixed[i] != 0 || fixed[j] != 0) && k != d {
                v[k] = 0.0;
            }
        }
        if fixed[i] != 0 {
            b[i] = v[d] * g[i];
        }
    }
}
