//! CUDA launches for kernels/block.cu: BSR SpMV, block Jacobi, block ILU(0)
//! level by level (the levels of the block pattern, as the CSR path's).

use super::super::cuda::{per_level, spmv_blocks, spmv_with, upload, DeviceLevels};
use super::super::DevicePattern;
use crate::array::cuda::BLOCK;
use crate::error::Result;
use crate::gpu::{arg_or_null, DeviceBuffer, Gpu, KernelArg};

/// kernels/block.cu after the shared prelude (its kernels compile one at a time).
pub const SOURCE: &str = concat!(
    include_str!("../../../kernels/one_kernel.cuh"),
    include_str!("../../../kernels/common.cuh"),
    include_str!("../../../kernels/csr.cuh"),
    include_str!("../../../kernels/block.cu")
);

/// Lanes per block row of the SpMV: enough that each lane takes about four
/// block columns' values (4 k doubles), at most 8 (a lane holds k sums).
/// Measured on the H200 for the 7-point pattern (BENCHMARKS.md): 4 lanes
/// best at k = 2, 8 at k = 3; 2 lanes (the CSR rule over blocks) was 20-45% slower.
pub fn lanes(nnzb: usize, nb: usize, k: usize) -> u32 {
    let per_row = nnzb as f64 / nb.max(1) as f64 * k as f64;
    let mut t = 1u32;
    while t < 8 && 4.0 * (t as f64) < per_row {
        t *= 2;
    }
    t
}

/// y = alpha A x + beta y for `nb` block rows of `k` x `k` blocks (k = 1: the
/// CSR kernel); with `sc`, skipped once a device-driven solve has stopped.
#[allow(clippy::too_many_arguments)]
pub fn spmv(
    g: &Gpu,
    dp: &DevicePattern,
    nb: usize,
    k: usize,
    v: &DeviceBuffer<f64>,
    alpha: f64,
    x: &DeviceBuffer<f64>,
    beta: f64,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    if k == 1 {
        return spmv_with(g, dp, dp.threads_per_row, nb, v, alpha, x, beta, y, sc);
    }
    spmv_lanes(g, dp, nb, k, dp.threads_per_row, v, alpha, (x, beta, y), sc)
}

/// The block SpMV with `tpr` lanes per block row (1, 2, 4 or 8).
#[allow(clippy::too_many_arguments)]
pub fn spmv_lanes(
    g: &Gpu,
    dp: &DevicePattern,
    nb: usize,
    k: usize,
    tpr: u32,
    v: &DeviceBuffer<f64>,
    alpha: f64,
    (x, beta, y): (&DeviceBuffer<f64>, f64, &DeviceBuffer<f64>),
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let name = format!("bsr_spmv_k{k}_tpr{tpr}");
    let f = g.kernel("block", SOURCE, &name)?;
    let nb32 = nb as i32;
    let mut l = g.launcher(&f);
    l.arg(&nb32).arg(&dp.row_ptr).arg(&dp.col).arg(v).arg(x).arg(y).arg(&alpha).arg(&beta);
    arg_or_null(&mut l, sc);
    g.launch("bsr_spmv", l, (spmv_blocks(nb, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// Reads the smallest block row a kernel flagged in `bad` (initialised to
/// nb): a singular pivot block there, named as `what`.
fn check_pivots(g: &Gpu, bad: &DeviceBuffer<i32>, nb: usize, what: &str) -> Result<()> {
    let mut first = [0i32];
    g.download(bad, 0, &mut first)?;
    if (first[0] as usize) < nb {
        return Err(super::cpu::pivot_error(what, first[0] as usize));
    }
    Ok(())
}

/// The diagonal blocks' inverses into `inv` (block Jacobi).
pub fn diagonal_inverses(
    g: &Gpu,
    dp: &DevicePattern,
    nb: usize,
    k: usize,
    v: &DeviceBuffer<f64>,
    inv: &DeviceBuffer<f64>,
) -> Result<()> {
    let bad = upload(g, &[nb as i32])?;
    let name = format!("bsr_diag_inverse_k{k}");
    let f = g.kernel("block", SOURCE, &name)?;
    let nb32 = nb as i32;
    let mut l = g.launcher(&f);
    l.arg(&nb32).arg(&dp.diag).arg(v).arg(inv).arg(&bad);
    g.launch("bsr_diag_inverse", l, (nb.div_ceil(128).max(1) as u32, 1, 1), (128, 1, 1), 0)?;
    check_pivots(g, &bad, nb, "block Jacobi")
}

/// z = D^-1 r with the inverses of `diagonal_inverses`.
pub fn jacobi_apply(
    g: &Gpu,
    nb: usize,
    k: usize,
    inv: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let name = format!("bsr_jacobi_k{k}");
    let f = g.kernel("block", SOURCE, &name)?;
    let nb32 = nb as i32;
    let mut l = g.launcher(&f);
    l.arg(&nb32).arg(inv).arg(r).arg(z);
    arg_or_null(&mut l, sc);
    g.launch("bsr_jacobi", l, (nb.div_ceil(BLOCK as usize).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// Block ILU(0) of `lu` (a copy of A's values) in place, level by level.
pub fn ilu0(g: &Gpu, dp: &DevicePattern, nb: usize, k: usize, lower: &DeviceLevels, lu: &DeviceBuffer<f64>) -> Result<()> {
    let bad = upload(g, &[nb as i32])?;
    let name = format!("bilu0_level_k{k}");
    per_level!(g, ("block", SOURCE), lower, &name, [&dp.row_ptr, &dp.col, &dp.diag, lu, &bad]);
    check_pivots(g, &bad, nb, "block ILU(0)")
}

/// z = U^-1 L^-1 r with the block factors, level by level.
#[allow(clippy::too_many_arguments)]
pub fn ilu0_apply(
    g: &Gpu,
    dp: &DevicePattern,
    k: usize,
    (lower, upper): (&DeviceLevels, &DeviceLevels),
    lu: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let (lname, uname) = (format!("bilu0_lower_k{k}"), format!("bilu0_upper_k{k}"));
    per_level!(g, ("block", SOURCE), lower, &lname, [&dp.row_ptr, &dp.col, &dp.diag, lu, r, z], sc);
    per_level!(g, ("block", SOURCE), upper, &uname, [&dp.row_ptr, &dp.col, &dp.diag, lu, z], sc);
    Ok(())
}

/// z = M^-1 r with the block factors, each triangle by `sweeps` Jacobi
/// sweeps ping-ponging through `scratch` (the lower sweeps end in y, the
/// upper writes alternate so that the last lands in z).
#[allow(clippy::too_many_arguments)]
pub fn ilu0_apply_jacobi(
    g: &Gpu,
    dp: &DevicePattern,
    nb: usize,
    k: usize,
    sweeps: usize,
    (a, b): (&DeviceBuffer<f64>, &DeviceBuffer<f64>),
    lu: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let name = format!("bilu0_sweep_k{k}");
    let f = g.kernel("block", SOURCE, &name)?;
    let grid = (nb.div_ceil(256).max(1) as u32, 1, 1);
    let nb32 = nb as i32;
    let sweep = |rhs: &DeviceBuffer<f64>, input: &DeviceBuffer<f64>, upper: i32, out: &DeviceBuffer<f64>| {
        let mut l = g.launcher(&f);
        l.arg(&nb32).arg(&dp.row_ptr).arg(&dp.col).arg(&dp.diag).arg(lu).arg(rhs).arg(input).arg(&upper).arg(out);
        arg_or_null(&mut l, sc);
        g.launch("bilu0_sweep", l, grid, (256, 1, 1), 0)
    };
    let mut y = r;
    for s in 0..sweeps {
        let out = if s % 2 == 0 { a } else { b };
        sweep(r, y, 0, out)?;
        y = out;
    }
    let other = if std::ptr::eq(y, a) { b } else { a };
    // write w (0: the diagonal start, then the sweeps) goes to z when sweeps - w is even
    let target = |w: usize| if (sweeps - w).is_multiple_of(2) { z } else { other };
    let diag_name = format!("bilu0_diag_k{k}");
    let fd = g.kernel("block", SOURCE, &diag_name)?;
    let mut l = g.launcher(&fd);
    l.arg(&nb32).arg(&dp.diag).arg(lu).arg(y).arg(target(0));
    arg_or_null(&mut l, sc);
    g.launch("bilu0_diag", l, grid, (256, 1, 1), 0)?;
    for w in 1..=sweeps {
        sweep(y, target(w - 1), 1, target(w))?;
    }
    Ok(())
}
