//! Block CSR (BSR): a `Csr` whose entries are dense K x K blocks (column-major,
//! Fortran order), as TOUGHREACT-like codes assemble their Jacobians (NEQ
//! equations per grid block). The pattern is over block rows and columns, so
//! every structural tool of the CSR path (validation, duplicates, levels)
//! serves unchanged. Here: conversion from and to point CSR, block Jacobi and
//! block ILU(0) with the block pivots inverted (CPU reference in `cpu`, CUDA
//! in `cuda` and kernels/block.cu).

pub mod cpu;
pub mod cuda;

use super::Pattern;
use crate::array::Buffer;
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, Gpu};
use crate::krylov::Preconditioner;

/// The largest block: the kernels keep a block per thread in registers or
/// local memory, instantiated for every size up to this one.
pub const MAX_BLOCK: usize = 8;

pub fn check_size(block: usize) -> Result<()> {
    if block == 0 || block > MAX_BLOCK {
        return Err(Error::invalid(format!("block_size = {block}: must be 1..{MAX_BLOCK}")));
    }
    Ok(())
}

/// A point CSR matrix (stored pattern `p`, values `v`) regrouped into `k` x `k`
/// blocks: the block pattern (every block any entry touches) and the block
/// values, zeros where the point matrix has no entry.
pub fn from_point(p: &Pattern, v: &[f64], k: usize) -> Result<(Pattern, Vec<f64>)> {
    check_size(k)?;
    if !p.nrows.is_multiple_of(k) || !p.ncols.is_multiple_of(k) {
        return Err(Error::size(format!("{} x {} does not split into {k} x {k} blocks", p.nrows, p.ncols)));
    }
    let nb = p.nrows / k;
    let (mut rp, mut col) = (vec![0i64], Vec::new());
    for bi in 0..nb {
        let points = p.row_ptr[bi * k] as usize..p.row_ptr[(bi + 1) * k] as usize;
        let mut row: Vec<i64> = p.col[points].iter().map(|&c| c as i64 / k as i64).collect();
        row.sort_unstable();
        row.dedup();
        col.extend(row);
        rp.push(col.len() as i64);
    }
    let bp = super::build_pattern(nb, p.ncols / k, &rp, &col, 0)?;
    let mut out = vec![0.0; bp.nnz() * k * k];
    for r in 0..p.nrows {
        let (bi, i) = (r / k, r % k);
        let row = &bp.col[bp.row_ptr[bi] as usize..bp.row_ptr[bi + 1] as usize];
        for e in p.row_ptr[r] as usize..p.row_ptr[r + 1] as usize {
            let c = p.col[e] as usize;
            let slot =
                bp.row_ptr[bi] as usize + row.binary_search(&((c / k) as i32)).expect("the block pattern covers every entry");
            out[(slot * k + c % k) * k + i] = v[e];
        }
    }
    Ok((bp, out))
}

/// A block matrix as point CSR (row_ptr, col, values; every block entry
/// stored, zeros included): the reference the block kernels are checked against.
pub fn to_point(p: &Pattern, k: usize, v: &[f64]) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let (mut rp, mut col, mut val) = (vec![0i32], Vec::new(), Vec::new());
    for bi in 0..p.nrows {
        for i in 0..k {
            for s in p.row_ptr[bi] as usize..p.row_ptr[bi + 1] as usize {
                for j in 0..k {
                    col.push(p.col[s] * k as i32 + j as i32);
                    val.push(v[(s * k + j) * k + i]);
                }
            }
            rp.push(col.len() as i32);
        }
    }
    (rp, col, val)
}

/// Names a block row for messages (0-based and the 1-based Fortran index).
pub fn block_row_name(r: usize) -> String {
    format!("block row {r} (0-based; {} 1-based)", r + 1)
}

/// Block Jacobi: z_i = D_i^-1 r_i with the diagonal blocks' inverses.
pub struct BlockJacobi<'a> {
    /// Block rows.
    pub nb: usize,
    pub block: usize,
    pub inverse: &'a Buffer<f64>,
}

impl Preconditioner for BlockJacobi<'_> {
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()> {
        cpu::jacobi_apply(self.block, self.inverse.host()?, r, z);
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        cuda::jacobi_apply(g, self.nb, self.block, self.inverse.device()?, r, z, sc)
    }
}
