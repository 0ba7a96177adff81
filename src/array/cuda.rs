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

/// y[to[i]] = v[i] for i < n, or y[to[i]] += v[i] with `add`; v None: 0.
/// The entries of `to` must be distinct.
pub fn scatter(
    g: &Gpu,
    n: usize,
    v: Option<&DeviceBuffer<f64>>,
    to: &DeviceBuffer<i32>,
    y: &DeviceBuffer<f64>,
    add: bool,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let f = g.kernel("vector", SOURCE, "scatter")?;
    let (n64, add) = (n as i64, i32::from(add));
    let mut l = g.launcher(&f);
    l.arg(&n64);
    arg_or_null(&mut l, v);
    l.arg(to).arg(y).arg(&add);
    g.launch("scatter", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// x[0..n) <- its exclusive prefix sum, in place (int counts whose total
/// fits int: the caller checks). Give x one entry more than the counts, that
/// entry 0, and it receives the total.
pub fn exclusive_scan(g: &Gpu, n: usize, x: &DeviceBuffer<i32>) -> Result<()> {
    const TILE: usize = 1024; // kernels/vector.cu SCAN_TILE
    let tiles = n.div_ceil(TILE).max(1);
    let sums = g.alloc::<i32>(tiles)?;
    let n64 = n as i64;
    let f = g.kernel("vector", SOURCE, "scan_tiles")?;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(x).arg(&sums);
    g.launch("scan_tiles", l, (tiles as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    if tiles > 1 {
        exclusive_scan(g, tiles, &sums)?;
        let f = g.kernel("vector", SOURCE, "scan_add")?;
        let mut l = g.launcher(&f);
        l.arg(&n64).arg(x).arg(&sums);
        g.launch("scan_add", l, (tiles as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    }
    Ok(())
}

/// Row blocks of `multi_dot` (its partial sums: that many per vector).
const BASIS_BLOCKS: usize = 264;
/// Vectors per `multi_dot` block (kernels/vector.cu BASIS_GROUP).
const BASIS_GROUP: usize = 8;

/// A table of device vectors (GMRES's basis) for the kernels that read them
/// all in one pass, with the scratch of their reductions.
pub struct VectorTable {
    addresses: DeviceBuffer<u64>,
    count: usize,
    partial: DeviceBuffer<f64>,
    coefficients: DeviceBuffer<f64>,
    /// What the last `dots` left in `coefficients` (None once overwritten).
    last_dots: Option<Vec<f64>>,
    reduce: Reduce,
}

impl VectorTable {
    /// The table of `vectors`' addresses (they must outlive its use).
    pub fn new(g: &Gpu, vectors: &[&DeviceBuffer<f64>]) -> Result<VectorTable> {
        let count = vectors.len();
        let mut addresses = g.alloc::<u64>(count.max(1))?;
        g.upload(&vectors.iter().map(|v| g.address(*v)).collect::<Vec<_>>(), &mut addresses, 0)?;
        let partial = g.alloc::<f64>((count * BASIS_BLOCKS).max(1))?;
        let coefficients = g.alloc::<f64>(count.max(1))?;
        Ok(VectorTable { addresses, count, partial, coefficients, last_dots: None, reduce: Reduce::new(g)? })
    }

    /// (V_j . w) for the table's first k vectors, finished on the device.
    pub fn dots(&mut self, g: &Gpu, n: usize, k: usize, w: &DeviceBuffer<f64>) -> Result<Vec<f64>> {
        let k = k.min(self.count);
        if k == 0 {
            return Ok(Vec::new());
        }
        let blocks = n.div_ceil(BLOCK as usize).clamp(1, BASIS_BLOCKS);
        let (n64, k32, b32) = (n as i64, k as i32, blocks as i32);
        let f = g.kernel("vector", SOURCE, "multi_dot")?;
        let mut l = g.launcher(&f);
        l.arg(&n64).arg(&k32).arg(&self.addresses).arg(w).arg(&self.partial);
        g.launch("multi_dot", l, (blocks as u32, k.div_ceil(BASIS_GROUP) as u32, 1), (BLOCK, 1, 1), 0)?;
        let f = g.kernel("vector", SOURCE, "sum_rows")?;
        let mut l = g.launcher(&f);
        l.arg(&b32).arg(&self.partial).arg(&self.coefficients);
        g.launch("sum_rows", l, (k as u32, 1, 1), (BLOCK, 1, 1), 0)?;
        let mut out = vec![0.0; k];
        g.download(&self.coefficients, 0, &mut out)?;
        self.last_dots = Some(out.clone());
        Ok(out)
    }

    /// w -= sum_j h[j] V_j, returning (w, w) after it, in one pass. When h
    /// is what the last `dots` returned (GMRES's projection on one process)
    /// its device copy is used, so nothing is uploaded.
    pub fn subtract(&mut self, g: &Gpu, n: usize, w: &DeviceBuffer<f64>, h: &[f64]) -> Result<f64> {
        let k = h.len().min(self.count);
        if self.last_dots.as_ref().is_none_or(|d| d.len() < k || d[..k] != h[..k]) {
            g.upload(&h[..k], &mut self.coefficients, 0)?;
            self.last_dots = None;
        }
        let (n64, k32) = (n as i64, k as i32);
        let f = g.kernel("vector", SOURCE, "multi_subtract_norm")?;
        let mut l = g.launcher(&f);
        l.arg(&n64).arg(&k32).arg(&self.addresses).arg(&self.coefficients).arg(w);
        l.arg(&self.reduce.partial).arg(&self.reduce.out).arg(&self.reduce.counter);
        g.launch("multi_subtract_norm", l, (Reduce::blocks(n) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
        Ok(self.reduce.result(g)?.0)
    }

    /// w = c w + sum_j h[j] V_j over the table's first h.len() vectors.
    pub fn combine(&mut self, g: &Gpu, n: usize, w: &DeviceBuffer<f64>, c: f64, h: &[f64]) -> Result<()> {
        let k = h.len().min(self.count);
        g.upload(&h[..k], &mut self.coefficients, 0)?;
        self.last_dots = None;
        let (n64, k32) = (n as i64, k as i32);
        let f = g.kernel("vector", SOURCE, "multi_axpy")?;
        let mut l = g.launcher(&f);
        l.arg(&n64).arg(&k32).arg(&self.addresses).arg(&self.coefficients).arg(&c).arg(w);
        g.launch("multi_axpy", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
    }
}
