//! CUDA launches for `kernels/vector.cu`: the vector algebra of device
//! arrays and of the Krylov methods, reductions finished on the device.

use crate::error::Result;
use crate::gpu::{arg_or_null, DeviceBuffer, Gpu, KernelArg};

/// kernels/vector.cu after the shared prelude.
pub const SOURCE: &str = concat!(include_str!("../../kernels/common.cuh"), include_str!("../../kernels/vector.cu"));

pub(crate) const BLOCK: u32 = 256;
/// Blocks of a vector reduction's pass (the last block sums their partials).
pub(crate) const REDUCE_BLOCKS: usize = 1024;

pub(crate) fn grid_for(n: usize) -> u32 {
    n.div_ceil(BLOCK as usize).clamp(1, 65535 * 4) as u32
}

/// Scratch for one-pass reductions: per-block partials, the two results and
/// the arrival counter the last block re-arms (kernels/common.cuh `last_block_sums`).
pub struct Reduce {
    pub(crate) partial: DeviceBuffer<f64>,
    out: DeviceBuffer<f64>,
    pub(crate) counter: DeviceBuffer<u32>,
}

impl Reduce {
    pub fn new(g: &Gpu) -> Result<Reduce> {
        Ok(Reduce { partial: g.alloc(2 * REDUCE_BLOCKS)?, out: g.alloc(2)?, counter: g.zeros::<u32>(1)? })
    }

    /// Blocks of a one-pass reduction over n elements.
    pub(crate) fn blocks(n: usize) -> usize {
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
        let f = g.kernel("vector", SOURCE, "dots")?;
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
    let f = g.kernel("vector", SOURCE, "amax")?;
    let out = g.zeros::<u64>(1)?;
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
    let f = g.kernel("vector", SOURCE, "update")?;
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
    let f = g.kernel("vector", SOURCE, "scale")?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(d).arg(r).arg(z);
    arg_or_null(&mut l, sc);
    g.launch("scale", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// out[i] = x[from[i]] for i < n.
pub fn gather(g: &Gpu, n: usize, x: &DeviceBuffer<f64>, from: &DeviceBuffer<i32>, out: &DeviceBuffer<f64>) -> Result<()> {
    let f = g.kernel("vector", SOURCE, "gather")?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(x).arg(from).arg(out);
    g.launch("gather", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}
