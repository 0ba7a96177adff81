//! The V-cycle on the device: every level's matrices, transfers, smoother
//! scalings and work vectors uploaded once (a values-only re-setup writes
//! new numbers into the same buffers, so a solver's captured CUDA graph
//! stays valid), then per level one kernel per smoothing step
//! (kernels/amg.cu), the residual, restriction and prolongation by SpMV,
//! and the coarsest solve as a dense product.

use super::{Hierarchy, Mat};
use crate::array::cuda::BLOCK;
use crate::error::Result;
use crate::gpu::{arg_or_null, DeviceBuffer, Gpu, KernelArg};
use crate::sparse::cuda::{spmv_blocks, spmv_with, threads_per_row, upload};
use crate::sparse::DevicePattern;

/// kernels/amg.cu after the shared prelude and the CSR row product.
pub const SOURCE: &str = concat!(
    include_str!("../../kernels/common.cuh"),
    include_str!("../../kernels/csr.cuh"),
    include_str!("../../kernels/amg.cu")
);

/// The most smoothing steps a level takes (the coefficient table's stride).
const MAX_STEPS: usize = 16;

/// A CSR matrix on the device.
pub struct DeviceCsr {
    pattern: DevicePattern,
    values: DeviceBuffer<f64>,
    nrows: usize,
}

impl DeviceCsr {
    fn new(g: &Gpu, m: &Mat) -> Result<DeviceCsr> {
        Ok(DeviceCsr {
            pattern: DevicePattern {
                row_ptr: upload(g, &m.rp)?,
                col: upload(g, &m.ci)?,
                diag: upload::<i32>(g, &[])?,
                threads_per_row: threads_per_row(m.nnz(), m.nrows),
            },
            values: upload(g, &m.v)?,
            nrows: m.nrows,
        })
    }

    /// y = alpha M x + beta y.
    fn spmv(
        &self,
        g: &Gpu,
        x: &DeviceBuffer<f64>,
        beta: f64,
        y: &DeviceBuffer<f64>,
        sc: Option<&DeviceBuffer<f64>>,
    ) -> Result<()> {
        spmv_with(g, &self.pattern, self.pattern.threads_per_row, self.nrows, &self.values, 1.0, x, beta, y, sc)
    }
}

/// One level's device data. Level 0's matrix is the solver's own.
struct DeviceLevel {
    a: Option<DeviceCsr>,
    p: Option<DeviceCsr>,
    r: Option<DeviceCsr>,
    inverse: DeviceBuffer<f64>,
    /// Ping-pong iterates (level 0 uses the caller's z as the first), the
    /// right-hand side (level 0: the caller's r), the step d, the residual.
    x: [DeviceBuffer<f64>; 2],
    b: DeviceBuffer<f64>,
    d: DeviceBuffer<f64>,
    residual: DeviceBuffer<f64>,
}

pub struct DeviceHierarchy {
    levels: Vec<DeviceLevel>,
    /// Every level's (c1, c2) per step, MAX_STEPS pairs a level.
    coefficients: DeviceBuffer<f64>,
    coarse_inverse: Option<DeviceBuffer<f64>>,
}

fn coefficient_table(h: &Hierarchy) -> Vec<f64> {
    let mut t = vec![0.0; h.levels.len() * MAX_STEPS * 2];
    for (l, level) in h.levels.iter().enumerate() {
        for (s, c) in level.coefficients.iter().enumerate() {
            t[(l * MAX_STEPS + s) * 2..][..2].copy_from_slice(c);
        }
    }
    t
}

impl DeviceHierarchy {
    pub fn new(g: &Gpu, h: &Hierarchy) -> Result<DeviceHierarchy> {
        let mut levels = Vec::with_capacity(h.levels.len());
        for (l, level) in h.levels.iter().enumerate() {
            let n = level.a.nrows;
            let tr = level.transfer.as_ref();
            levels.push(DeviceLevel {
                a: if l == 0 { None } else { Some(DeviceCsr::new(g, &level.a)?) },
                p: tr.map(|t| DeviceCsr::new(g, &t.p)).transpose()?,
                r: tr.map(|t| DeviceCsr::new(g, &t.r)).transpose()?,
                inverse: upload(g, &level.smoother_inverse)?,
                x: [g.zeros(n.max(1))?, g.zeros(n.max(1))?],
                b: g.zeros(n.max(1))?,
                d: g.zeros(n.max(1))?,
                residual: g.zeros(n.max(1))?,
            });
        }
        Ok(DeviceHierarchy {
            levels,
            coefficients: upload(g, &coefficient_table(h))?,
            coarse_inverse: h.coarse_inverse.as_ref().map(|inv| upload(g, inv)).transpose()?,
        })
    }

    /// Writes a re-setup's numbers into the same buffers (same sizes: the
    /// patterns did not change).
    pub fn refresh(&mut self, g: &Gpu, h: &Hierarchy) -> Result<()> {
        for (level, dl) in h.levels.iter().zip(&mut self.levels) {
            if let Some(a) = &mut dl.a {
                g.upload(&level.a.v, &mut a.values, 0)?;
            }
            if let (Some(tr), Some(p), Some(r)) = (&level.transfer, &mut dl.p, &mut dl.r) {
                g.upload(&tr.p.v, &mut p.values, 0)?;
                g.upload(&tr.r.v, &mut r.values, 0)?;
            }
            g.upload(&level.smoother_inverse, &mut dl.inverse, 0)?;
        }
        g.upload(&coefficient_table(h), &mut self.coefficients, 0)?;
        match (&h.coarse_inverse, &mut self.coarse_inverse) {
            (Some(inv), Some(d)) => g.upload(inv, d, 0)?,
            (None, None) => {}
            // the coarsest level's size is fixed by the kept structure
            _ => return Err(crate::error::Error::internal("AMG: the coarsest solve changed kind on a re-setup")),
        }
        g.synchronize("AMG re-setup")
    }
}

/// The matrix of a level: the solver's own on level 0.
struct LevelMatrix<'a> {
    pattern: &'a DevicePattern,
    values: &'a DeviceBuffer<f64>,
}

#[allow(clippy::too_many_arguments)]
fn smooth_step(
    g: &Gpu,
    a: &LevelMatrix,
    n: usize,
    dl: &DeviceLevel,
    b: &DeviceBuffer<f64>,
    x_in: Option<&DeviceBuffer<f64>>,
    x_out: &DeviceBuffer<f64>,
    coef: (&DeviceBuffer<f64>, i32),
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let tpr = a.pattern.threads_per_row;
    let name = format!("amg_smooth_tpr{tpr}");
    let f = g.kernel("amg", SOURCE, &name)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(a.values).arg(&dl.inverse).arg(b);
    arg_or_null(&mut l, x_in);
    l.arg(x_out).arg(&dl.d).arg(coef.0).arg(&coef.1);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, (spmv_blocks(n, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

fn residual(
    g: &Gpu,
    a: &LevelMatrix,
    n: usize,
    b: &DeviceBuffer<f64>,
    x: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let tpr = a.pattern.threads_per_row;
    let name = format!("amg_residual_tpr{tpr}");
    let f = g.kernel("amg", SOURCE, &name)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(a.values).arg(b).arg(x).arg(r);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, (spmv_blocks(n, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// The V-cycle from level `l`: b -> the returned iterate (one of the
/// level's two x buffers, or `out` on level 0).
#[allow(clippy::too_many_arguments)]
fn cycle<'a>(
    g: &Gpu,
    h: &Hierarchy,
    dh: &'a DeviceHierarchy,
    l: usize,
    a: LevelMatrix,
    b: &'a DeviceBuffer<f64>,
    x: [&'a DeviceBuffer<f64>; 2],
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<&'a DeviceBuffer<f64>> {
    let (level, dl) = (&h.levels[l], &dh.levels[l]);
    let n = level.a.nrows;
    // the steps alternate between the two iterates, starting with x[1]:
    // pre and post smoothing take as many steps, so the cycle ends in x[0]
    let mut current: Option<usize> = None;
    let smooth = |current: &mut Option<usize>| -> Result<()> {
        for s in 0..level.coefficients.len() {
            let out = current.map_or(1, |c| 1 - c);
            let coef = (&dh.coefficients, (l * MAX_STEPS + s) as i32);
            smooth_step(g, &a, n, dl, b, current.map(|c| x[c]), x[out], coef, sc)?;
            *current = Some(out);
        }
        Ok(())
    };
    let (Some(p), Some(r)) = (&dl.p, &dl.r) else {
        if let Some(inv) = &dh.coarse_inverse {
            let f = g.kernel("amg", SOURCE, "amg_dense")?;
            let n32 = n as i32;
            let mut launch = g.launcher(&f);
            launch.arg(&n32).arg(inv).arg(b).arg(x[0]);
            arg_or_null(&mut launch, sc);
            g.launch("amg_dense", launch, ((n * 32).div_ceil(BLOCK as usize).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
            return Ok(x[0]);
        }
        smooth(&mut current)?;
        return Ok(x[current.unwrap_or(0)]);
    };
    smooth(&mut current)?;
    let xc = x[current.expect("at least one smoothing step")];
    residual(g, &a, n, b, xc, &dl.residual, sc)?;
    let next = &dh.levels[l + 1];
    r.spmv(g, &dl.residual, 0.0, &next.b, sc)?;
    let na = next.a.as_ref().expect("coarse levels keep their matrix");
    let coarse =
        cycle(g, h, dh, l + 1, LevelMatrix { pattern: &na.pattern, values: &na.values }, &next.b, [&next.x[0], &next.x[1]], sc)?;
    p.spmv(g, coarse, 1.0, xc, sc)?;
    smooth(&mut current)?;
    Ok(x[current.expect("at least one smoothing step")])
}

/// z = one V-cycle applied to r; `pattern` and `values` are the finest matrix.
#[allow(clippy::too_many_arguments)]
pub fn vcycle(
    g: &Gpu,
    h: &Hierarchy,
    dh: &DeviceHierarchy,
    pattern: &DevicePattern,
    values: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let finest = &dh.levels[0];
    let out = cycle(g, h, dh, 0, LevelMatrix { pattern, values }, r, [z, &finest.x[1]], sc)?;
    if !std::ptr::eq(out, z) {
        // a smoothed coarsest level alone with an odd number of steps
        crate::array::cuda::update(g, r.len(), z, 1.0, out, 0.0, None, 0.0)?;
    }
    Ok(())
}
