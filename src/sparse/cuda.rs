//! CUDA launches for `kernels/sparse.cu`.

use super::DevicePattern;
use crate::error::Result;
use crate::gpu::{arg_or_null, DeviceBuffer, DeviceScalar, Gpu, KernelArg};

pub const SOURCE: &str = include_str!("../../kernels/sparse.cu");

const BLOCK: u32 = 256;
/// Blocks of a vector reduction's pass (the last block sums their partials).
pub(crate) const REDUCE_BLOCKS: usize = 1024;

/// A device copy of `v` (at least one element, so empty matrices still have buffers).
pub fn upload<T: DeviceScalar>(g: &Gpu, v: &[T]) -> Result<DeviceBuffer<T>> {
    let mut d = g.alloc::<T>(v.len().max(1))?;
    if !v.is_empty() {
        g.upload(v, &mut d, 0)?;
    }
    Ok(d)
}

/// Threads per row for SpMV: a group of t threads takes rows of about 3.4 t
/// entries or more, so each thread loads several (measured on the H100,
/// BENCHMARKS.md: 2 for the 7-point Laplacian, 4 for the 27-point operator).
pub fn threads_per_row(nnz: usize, nrows: usize) -> u32 {
    let mean = nnz as f64 / nrows.max(1) as f64;
    let mut t = 1u32;
    while t < 32 && (2 * t) as f64 * 3.4 <= mean {
        t *= 2;
    }
    t
}

fn grid_for(n: usize) -> u32 {
    n.div_ceil(BLOCK as usize).clamp(1, 65535 * 4) as u32
}

/// y = alpha A x + beta y; with `sc`, skipped once a device-driven solve has stopped.
#[allow(clippy::too_many_arguments)]
pub fn spmv_with(
    g: &Gpu,
    dp: &DevicePattern,
    tpr: u32,
    n: usize,
    v: &DeviceBuffer<f64>,
    alpha: f64,
    x: &DeviceBuffer<f64>,
    beta: f64,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let name = format!("spmv_tpr{tpr}");
    let f = g.kernel("sparse", SOURCE, &name)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.row_ptr).arg(&dp.col).arg(v).arg(x).arg(y).arg(&alpha).arg(&beta);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, (spmv_blocks(n, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

#[allow(clippy::too_many_arguments)]
pub fn spmv(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    v: &DeviceBuffer<f64>,
    alpha: f64,
    x: &DeviceBuffer<f64>,
    beta: f64,
    y: &DeviceBuffer<f64>,
) -> Result<()> {
    spmv_with(g, dp, dp.threads_per_row, n, v, alpha, x, beta, y, None)
}

/// Scratch for one-pass reductions: per-block partials, the two results and
/// the arrival counter the last block re-arms (kernels/sparse.cu `last_block_sums`).
pub struct Reduce {
    partial: DeviceBuffer<f64>,
    out: DeviceBuffer<f64>,
    counter: DeviceBuffer<u32>,
}

/// Blocks of the SpMV kernel for n rows at `tpr` threads per row.
fn spmv_blocks(n: usize, tpr: u32) -> usize {
    (n * tpr as usize).div_ceil(BLOCK as usize).max(1)
}

impl Reduce {
    pub fn new(g: &Gpu) -> Result<Reduce> {
        let mut counter = g.alloc::<u32>(1)?;
        g.fill_bytes(&mut counter, 0)?;
        Ok(Reduce { partial: g.alloc(2 * REDUCE_BLOCKS)?, out: g.alloc(2)?, counter })
    }

    fn blocks(n: usize) -> usize {
        n.div_ceil(BLOCK as usize).clamp(1, REDUCE_BLOCKS)
    }

    /// The two scalars the last launch reduced into `out` (waits for it).
    fn result(&self, g: &Gpu) -> Result<(f64, f64)> {
        let mut r = [0.0f64; 2];
        g.download(&self.out, 0, &mut r)?;
        Ok((r[0], r[1]))
    }

    /// (a.b, c.d) finished on the device; only the two scalars come back.
    pub fn dots(
        &mut self,
        g: &Gpu,
        n: usize,
        a: &DeviceBuffer<f64>,
        b: &DeviceBuffer<f64>,
        cd: Option<(&DeviceBuffer<f64>, &DeviceBuffer<f64>)>,
    ) -> Result<(f64, f64)> {
        let f = g.kernel("sparse", SOURCE, "dots")?;
        let n64 = n as i64;
        let mut l = g.launcher(&f);
        l.arg(&n64).arg(a).arg(b);
        arg_or_null(&mut l, cd.map(|p| p.0));
        arg_or_null(&mut l, cd.map(|p| p.1));
        l.arg(&self.partial).arg(&self.out).arg(&self.counter);
        g.launch("dots", l, (Self::blocks(n) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
        self.result(g)
    }
}

/// max |x_i| (NaN when any element is NaN), finished on the device.
pub fn amax(g: &Gpu, n: usize, x: &DeviceBuffer<f64>) -> Result<f64> {
    let f = g.kernel("sparse", SOURCE, "amax")?;
    let mut out = g.alloc::<u64>(1)?;
    g.fill_bytes(&mut out, 0)?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(x).arg(&out);
    g.launch("amax", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)?;
    let mut bits = [0u64];
    g.download(&out, 0, &mut bits)?;
    Ok(f64::from_bits(bits[0]))
}

/// w = a*x + b*y + c*w.
#[allow(clippy::too_many_arguments)]
pub fn update(
    g: &Gpu,
    n: usize,
    w: &DeviceBuffer<f64>,
    a: f64,
    x: &DeviceBuffer<f64>,
    b: f64,
    y: Option<&DeviceBuffer<f64>>,
    c: f64,
) -> Result<()> {
    let f = g.kernel("sparse", SOURCE, "update")?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(&a).arg(x).arg(&b);
    arg_or_null(&mut l, y);
    l.arg(&c).arg(w);
    g.launch("update", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// z = d .* r (with `sc`: skipped once a device-driven solve has stopped).
pub fn scale(
    g: &Gpu,
    n: usize,
    d: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let f = g.kernel("sparse", SOURCE, "scale")?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(d).arg(r).arg(z);
    arg_or_null(&mut l, sc);
    g.launch("scale", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// Symmetric Dirichlet rows and columns, one thread per row
/// (`super::apply_dirichlet` checked the input).
#[allow(clippy::too_many_arguments)]
pub fn dirichlet(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    v: &DeviceBuffer<f64>,
    fixed: &[u8],
    values: &[f64],
    b: &DeviceBuffer<f64>,
) -> Result<()> {
    let (fixed_d, values_d) = (upload(g, fixed)?, upload(g, values)?);
    let f = g.kernel("sparse", SOURCE, "dirichlet")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.row_ptr).arg(&dp.col).arg(&dp.diag).arg(v).arg(&fixed_d).arg(&values_d).arg(b);
    g.launch("dirichlet", l, (n.div_ceil(BLOCK as usize).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    // the staging buffers are freed on return: wait for the kernel first
    g.synchronize("dirichlet")
}

/// Rows grouped by dependency level, on the device.
pub struct DeviceLevels {
    rows: DeviceBuffer<i32>,
    ptr: Vec<usize>,
}

impl DeviceLevels {
    pub fn new(g: &Gpu, rows: &[i32], ptr: &[usize]) -> Result<DeviceLevels> {
        Ok(DeviceLevels { rows: upload(g, rows)?, ptr: ptr.to_vec() })
    }
}

/// Launches `kernel` once per level with (count, the level's rows, args...),
/// then the guard `sc` when given.
macro_rules! per_level {
    ($g:expr, $levels:expr, $kernel:expr, [$($arg:expr),*] $(, $sc:expr)?) => {{
        let f = $g.kernel("sparse", SOURCE, $kernel)?;
        for w in $levels.ptr.windows(2) {
            let count = (w[1] - w[0]) as i32;
            let rows = $levels.rows.slice(w[0]..w[1]);
            let mut l = $g.launcher(&f);
            l.arg(&count).arg(&rows);
            $( l.arg($arg); )*
            $( arg_or_null(&mut l, $sc); )?
            $g.launch($kernel, l, ((count as u32).div_ceil(128), 1, 1), (128, 1, 1), 0)?;
        }
    }};
}

/// ILU(0) of the values `lu` (a copy of A's) in place, level by level.
/// `diag` is the host copy of the diagonal positions, to read a bad pivot.
pub fn ilu0(g: &Gpu, dp: &DevicePattern, lower: &DeviceLevels, lu: &DeviceBuffer<f64>, diag: &[i32]) -> Result<()> {
    let nrows = diag.len();
    let bad = upload(g, &[nrows as i32])?;
    per_level!(g, lower, "ilu0_level", [&dp.row_ptr, &dp.col, &dp.diag, lu, &bad]);
    let mut first_bad = [0i32];
    g.download(&bad, 0, &mut first_bad)?;
    let row = first_bad[0] as usize;
    if row < nrows {
        let mut piv = [0.0];
        g.download(lu, diag[row] as usize, &mut piv)?;
        return Err(super::cpu::pivot_error(row, piv[0]));
    }
    Ok(())
}

/// z = U^-1 L^-1 r (with `sc`: skipped once a device-driven solve has stopped).
#[allow(clippy::too_many_arguments)]
pub fn ilu0_apply(
    g: &Gpu,
    dp: &DevicePattern,
    lower: &DeviceLevels,
    upper: &DeviceLevels,
    lu: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    per_level!(g, lower, "lsolve_level", [&dp.row_ptr, &dp.col, &dp.diag, lu, r, z], sc);
    per_level!(g, upper, "usolve_level", [&dp.row_ptr, &dp.col, &dp.diag, lu, z], sc);
    Ok(())
}

/// The widest row group for which CG fuses p.q into its SpMV: measured on
/// the H100 (BENCHMARKS.md), fused was faster at 2 threads per row (7-point
/// operator) and slower at 4 (27-point), whose grid-stride loop is longer.
pub(crate) const FUSED_PQ_MAX_TPR: u32 = 2;

/// CG's q = A p fused with p.q into the scalars `sc` (a breakdown when not
/// positive); for patterns of at most FUSED_PQ_MAX_TPR threads per row.
#[allow(clippy::too_many_arguments)]
pub fn spmv_pq(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    v: &DeviceBuffer<f64>,
    p: &DeviceBuffer<f64>,
    q: &DeviceBuffer<f64>,
    reduce: &Reduce,
    sc: &DeviceBuffer<f64>,
) -> Result<()> {
    let tpr = dp.threads_per_row;
    let name = format!("spmv_pq_tpr{tpr}");
    let f = g.kernel("sparse", SOURCE, &name)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.row_ptr).arg(&dp.col).arg(v).arg(p).arg(q).arg(&reduce.partial).arg(&reduce.counter).arg(sc);
    let blocks = spmv_blocks(n, tpr).min(REDUCE_BLOCKS) as u32;
    g.launch(&name, l, (blocks, 1, 1), (BLOCK, 1, 1), 0)
}

/// Where the solver scalars of a device-driven iteration live in `sc`
/// (kernels/sparse.cu `Scalar`).
pub(crate) struct Scalar;

/// cbindgen:ignore
impl Scalar {
    pub const BNORM: usize = 0;
    pub const TOL: usize = 1;
    pub const MAXIT: usize = 2;
    pub const STATUS: usize = 3;
    pub const ITER: usize = 4;
    pub const RR: usize = 5;
    pub const RZ: usize = 6;
    pub const RHO: usize = 9;
    pub const RHO_PREV: usize = 10;
    pub const ALPHA: usize = 11;
    pub const OMEGA: usize = 12;
    pub const VALUE: usize = 13;
    /// Relative residuals of the last HIST_LEN iterations, at HIST + iteration % HIST_LEN.
    pub const HIST: usize = 16;
    pub const HIST_LEN: usize = 64;
    pub const LEN: usize = Self::HIST + Self::HIST_LEN;
}

/// How a device-driven solve stands (kernels/sparse.cu `Status`).
pub(crate) struct Status;

/// cbindgen:ignore
impl Status {
    pub const RUNNING: f64 = 0.0;
    pub const CONVERGED: f64 = 1.0;
    pub const MAXITER: f64 = 2.0;
    pub const BREAK_NAN: f64 = 4.0;
    pub const BREAK_PQ: f64 = 5.0;
    pub const BREAK_RHO: f64 = 6.0;
    pub const BREAK_RV: f64 = 7.0;
    pub const BREAK_TT: f64 = 8.0;
    pub const BREAK_OMEGA: f64 = 9.0;
}

/// Queues one kernel of a device-driven iteration: (n, vectors..., [flag,]
/// [partial, counter,] sc), over the reduction's grid.
pub fn solver_kernel(
    g: &Gpu,
    name: &'static str,
    n: usize,
    vectors: &[Option<&DeviceBuffer<f64>>],
    flag: Option<i32>,
    reduce: Option<&Reduce>,
    sc: &DeviceBuffer<f64>,
) -> Result<()> {
    let f = g.kernel("sparse", SOURCE, name)?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64);
    for &v in vectors {
        arg_or_null(&mut l, v);
    }
    if let Some(flag) = &flag {
        l.arg(flag);
    }
    if let Some(r) = reduce {
        l.arg(&r.partial).arg(&r.counter);
    }
    l.arg(sc);
    g.launch(name, l, (Reduce::blocks(n) as u32, 1, 1), (BLOCK, 1, 1), 0)
}
