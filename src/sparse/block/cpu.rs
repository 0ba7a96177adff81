//! CPU reference for block matrices: the serial loops of a Fortran BSR code
//! (blocks column-major: entry (i, j) of block s at v[(s k + j) k + i]). The
//! kernels of kernels/block.cu run the same sums in the same order.

use super::super::Pattern;
use super::block_row_name;
use crate::error::{Error, ErrorKind, Result};

/// y = alpha A x + beta y (y not read when beta == 0).
pub fn spmv(p: &Pattern, k: usize, v: &[f64], alpha: f64, x: &[f64], beta: f64, y: &mut [f64]) {
    if k == 1 {
        return super::super::cpu::spmv(p, v, alpha, x, beta, y);
    }
    let mut sum = vec![0.0; k];
    for bi in 0..p.nrows {
        sum.fill(0.0);
        for s in p.row_ptr[bi] as usize..p.row_ptr[bi + 1] as usize {
            add_mat_vec(k, &v[s * k * k..], &x[p.col[s] as usize * k..], &mut sum, 1.0);
        }
        for (i, &si) in sum.iter().enumerate() {
            let yi = &mut y[bi * k + i];
            *yi = if beta == 0.0 { alpha * si } else { alpha * si + beta * *yi };
        }
    }
}

/// acc += B (sign x) for the k x k block `b`, column by column.
fn add_mat_vec(k: usize, b: &[f64], x: &[f64], acc: &mut [f64], sign: f64) {
    for j in 0..k {
        let xj = sign * x[j];
        for i in 0..k {
            acc[i] += b[j * k + i] * xj;
        }
    }
}

/// c = a b for k x k blocks.
fn mat_mul(k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for j in 0..k {
        for i in 0..k {
            c[j * k + i] = (0..k).fold(0.0, |acc, l| acc + a[l * k + i] * b[j * k + l]);
        }
    }
}

/// The inverse of the k x k block `m` (destroyed) into `inv`, by Gauss-Jordan
/// elimination with partial pivoting; false when a pivot is zero or the
/// result is not finite (the block is singular to working precision).
pub fn invert(k: usize, m: &mut [f64], inv: &mut [f64]) -> bool {
    for j in 0..k {
        for i in 0..k {
            inv[j * k + i] = if i == j { 1.0 } else { 0.0 };
        }
    }
    for c in 0..k {
        let mut p = c;
        for r in c + 1..k {
            if m[c * k + r].abs() > m[c * k + p].abs() {
                p = r;
            }
        }
        let best = m[c * k + p].abs();
        if best.is_nan() || best == 0.0 {
            return false;
        }
        if p != c {
            for j in 0..k {
                m.swap(j * k + c, j * k + p);
                inv.swap(j * k + c, j * k + p);
            }
        }
        let d = 1.0 / m[c * k + c];
        for j in 0..k {
            m[j * k + c] *= d;
            inv[j * k + c] *= d;
        }
        for r in 0..k {
            let f = m[c * k + r];
            if r != c && f != 0.0 {
                for j in 0..k {
                    m[j * k + r] -= f * m[j * k + c];
                    inv[j * k + r] -= f * inv[j * k + c];
                }
            }
        }
    }
    inv[..k * k].iter().all(|v| v.is_finite())
}

/// A singular or non-finite pivot block of `what` at block row `r`.
pub fn pivot_error(what: &str, r: usize) -> Error {
    Error::new(ErrorKind::Breakdown, format!("{what}: singular pivot block at {}", block_row_name(r)))
}

/// The inverses of the diagonal blocks (block Jacobi), nb k^2 values. Block
/// rows without a diagonal block are refused before this is called.
pub fn diagonal_inverses(p: &Pattern, k: usize, v: &[f64]) -> Result<Vec<f64>> {
    let kk = k * k;
    let mut out = vec![0.0; p.nrows * kk];
    let mut m = vec![0.0; kk];
    for (bi, inv) in out.chunks_exact_mut(kk).enumerate() {
        let d = p.diag[bi] as usize;
        m.copy_from_slice(&v[d * kk..(d + 1) * kk]);
        if !invert(k, &mut m, inv) {
            return Err(pivot_error("block Jacobi", bi));
        }
    }
    Ok(out)
}

/// z = D^-1 r, block by block.
pub fn jacobi_apply(k: usize, inverse: &[f64], r: &[f64], z: &mut [f64]) {
    for (bi, zb) in z.chunks_exact_mut(k).enumerate() {
        zb.fill(0.0);
        add_mat_vec(k, &inverse[bi * k * k..], &r[bi * k..], zb, 1.0);
    }
}

/// Block ILU(0) in place on a copy of the values (IKJ order over block rows,
/// the block pattern of A): L_ik = A_ik U_kk^-1, A_ij -= L_ik U_kj; each
/// diagonal slot ends holding its pivot block's inverse U_ii^-1.
pub fn ilu0(p: &Pattern, k: usize, lu: &mut [f64]) -> Result<()> {
    let kk = k * k;
    let (mut l, mut prod, mut m) = (vec![0.0; kk], vec![0.0; kk], vec![0.0; kk]);
    for i in 0..p.nrows {
        let (si, ei, di) = (p.row_ptr[i] as usize, p.row_ptr[i + 1] as usize, p.diag[i] as usize);
        for s in si..di {
            let c = p.col[s] as usize;
            let dc = p.diag[c] as usize;
            mat_mul(k, &lu[s * kk..(s + 1) * kk], &lu[dc * kk..(dc + 1) * kk], &mut l);
            lu[s * kk..(s + 1) * kk].copy_from_slice(&l);
            let (mut jj, mut q, ec) = (s + 1, dc + 1, p.row_ptr[c + 1] as usize);
            while jj < ei && q < ec {
                match p.col[jj].cmp(&p.col[q]) {
                    std::cmp::Ordering::Equal => {
                        mat_mul(k, &l, &lu[q * kk..(q + 1) * kk], &mut prod);
                        lu[jj * kk..(jj + 1) * kk].iter_mut().zip(&prod).for_each(|(a, b)| *a -= b);
                        jj += 1;
                        q += 1;
                    }
                    std::cmp::Ordering::Less => jj += 1,
                    std::cmp::Ordering::Greater => q += 1,
                }
            }
        }
        m.copy_from_slice(&lu[di * kk..(di + 1) * kk]);
        if !invert(k, &mut m, &mut lu[di * kk..(di + 1) * kk]) {
            return Err(pivot_error("block ILU(0)", i));
        }
    }
    Ok(())
}

/// z = U^-1 L^-1 r with the block ILU(0) factors (`ilu0`'s inverted pivots).
pub fn ilu0_apply(p: &Pattern, k: usize, lu: &[f64], r: &[f64], z: &mut [f64]) {
    let kk = k * k;
    let mut t = vec![0.0; k];
    for i in 0..p.nrows {
        let (si, di) = (p.row_ptr[i] as usize, p.diag[i] as usize);
        t.copy_from_slice(&r[i * k..(i + 1) * k]);
        for s in si..di {
            add_mat_vec(k, &lu[s * kk..], &z[p.col[s] as usize * k..], &mut t, -1.0);
        }
        z[i * k..(i + 1) * k].copy_from_slice(&t);
    }
    for i in (0..p.nrows).rev() {
        let (di, ei) = (p.diag[i] as usize, p.row_ptr[i + 1] as usize);
        t.copy_from_slice(&z[i * k..(i + 1) * k]);
        for s in di + 1..ei {
            add_mat_vec(k, &lu[s * kk..], &z[p.col[s] as usize * k..], &mut t, -1.0);
        }
        let zi = &mut z[i * k..(i + 1) * k];
        zi.fill(0.0);
        add_mat_vec(k, &lu[di * kk..], &t, zi, 1.0);
    }
}

/// z = M^-1 r with the block ILU(0) factors, each triangular solve replaced
/// by `sweeps` Jacobi sweeps (kernels/block.cu `bilu0_sweep`): y from r by
/// y <- r - L_s y, then z from U^-1 y by z <- U_d^-1 (y - U_s z).
pub fn ilu0_apply_jacobi(p: &Pattern, k: usize, lu: &[f64], sweeps: usize, r: &[f64], z: &mut [f64]) {
    let kk = k * k;
    let mut acc = vec![0.0; k];
    let mut sweep = |rhs: &[f64], input: &[f64], upper: bool, out: &mut [f64]| {
        for i in 0..p.nrows {
            let (s, d, e) = (p.row_ptr[i] as usize, p.diag[i] as usize, p.row_ptr[i + 1] as usize);
            acc.copy_from_slice(&rhs[i * k..(i + 1) * k]);
            for t in if upper { d + 1..e } else { s..d } {
                add_mat_vec(k, &lu[t * kk..], &input[p.col[t] as usize * k..], &mut acc, -1.0);
            }
            let oi = &mut out[i * k..(i + 1) * k];
            if upper {
                oi.fill(0.0);
                add_mat_vec(k, &lu[d * kk..], &acc, oi, 1.0);
            } else {
                oi.copy_from_slice(&acc);
            }
        }
    };
    let mut y = r.to_vec();
    let mut next = vec![0.0; r.len()];
    for _ in 0..sweeps {
        sweep(r, &y, false, &mut next);
        std::mem::swap(&mut y, &mut next);
    }
    let mut from = vec![0.0; r.len()];
    for i in 0..p.nrows {
        let d = p.diag[i] as usize;
        add_mat_vec(k, &lu[d * kk..], &y[i * k..], &mut from[i * k..(i + 1) * k], 1.0);
    }
    for _ in 0..sweeps {
        sweep(&y, &from, true, &mut next);
        std::mem::swap(&mut from, &mut next);
    }
    z.copy_from_slice(&from);
}
