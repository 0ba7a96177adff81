//! CUDA launches for `kernels/radfields.cu` and the device side of an accumulator.

use super::{Consts, Sources, FEGPU_RADFIELDS_TILED};
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu, KernelArg, KernelValue, Pinned};
use num_complex::Complex64;

pub const SOURCE: &str = include_str!("../../kernels/radfields.cu");

// SAFETY: Consts is #[repr(C)], four (re, im) pairs of f64, as the kernel's struct.
unsafe impl KernelValue for Consts {}

/// Dynamic shared memory the tiled kernel may use per block; small enough for
/// several blocks per multiprocessor.
const TILED_SHARED_BYTES: usize = 32 * 1024;

/// The tiled kernel's block: (S points, right-hand sides, S' points per tile, threads).
pub fn tiled_shape(n_rhs: usize, n_p: usize) -> (usize, usize, usize, usize) {
    let chunks = n_rhs.div_ceil(32);
    let rhs_chunk = n_rhs.div_ceil(chunks);
    let s_block = 256 / rhs_chunk;
    let threads = (s_block * rhs_chunk).next_multiple_of(32);
    let per_point = 15 * 8 * s_block + 96 * rhs_chunk;
    let p_tile = (TILED_SHARED_BYTES / per_point).clamp(1, 64).min(n_p);
    (s_block, rhs_chunk, p_tile, threads)
}

/// One staging slot: the packed batch (x, y, z, w per point, then the
/// currents) in page-locked memory and its copy on the device.
struct Slot {
    host: Pinned<f64>,
    device: DeviceBuffer<f64>,
}

/// The S points of one device and the fields accumulated on them.
pub struct Part {
    count: usize,
    points: DeviceBuffer<f64>,
    /// (3, 2, count, n_rhs) complex as (re, im) pairs.
    fields: DeviceBuffer<f64>,
    excluded: DeviceBuffer<u64>,
    slots: Vec<Slot>,
    next: usize,
}

fn batch_len(n_p: usize, n_rhs: usize) -> usize {
    4 * n_p + 12 * n_p * n_rhs
}

impl Part {
    pub fn new(g: &Gpu, points: &[f64], n_rhs: usize) -> Result<Part> {
        let count = points.len() / 3;
        let mut d_points = g.alloc::<f64>(points.len())?;
        g.upload(points, &mut d_points, 0)?;
        let mut part = Part { count, points: d_points, fields: g.alloc::<f64>(12 * count * n_rhs)?, excluded: g.alloc::<u64>(1)?, slots: Vec::new(), next: 0 };
        part.reset(g)?;
        Ok(part)
    }

    pub fn reset(&mut self, g: &Gpu) -> Result<()> {
        g.fill_bytes(&mut self.fields, 0)?;
        g.fill_bytes(&mut self.excluded, 0)
    }

    /// Makes both staging slots hold a batch of n_p points (allocating only when
    /// a batch is larger than any before), so `accumulate` cannot fail halfway
    /// for want of memory.
    pub fn reserve(&mut self, g: &Gpu, n_p: usize, n_rhs: usize) -> Result<()> {
        let need = batch_len(n_p, n_rhs);
        if self.slots.first().is_some_and(|s| s.host.len() >= need) {
            return Ok(());
        }
        let fresh = (0..2).map(|_| Ok(Slot { host: g.pinned::<f64>(need)?, device: g.alloc::<f64>(need)? })).collect::<Result<Vec<_>>>()?;
        // The old slots may still feed queued copies: let them finish first.
        g.synchronize("rad_fields staging")?;
        self.slots = fresh;
        Ok(())
    }

    /// Packs the batch into the next staging slot, queues its upload and the
    /// kernel, and returns. Call `reserve` first.
    pub fn accumulate(&mut self, g: &Gpu, c: &Consts, src: &Sources, n_rhs: usize, variant: i32) -> Result<()> {
        let n_p = src.n_p;
        let index = self.next;
        self.next = (index + 1) % self.slots.len();
        let slot = &mut self.slots[index];
        let packed = slot.host.wait_writable()?;
        for p in 0..n_p {
            packed[4 * p..4 * p + 3].copy_from_slice(&src.points[3 * p..3 * p + 3]);
            packed[4 * p + 3] = src.weights[p];
        }
        for (i, z) in src.currents.iter().enumerate() {
            packed[4 * n_p + 2 * i] = z.re;
            packed[4 * n_p + 2 * i + 1] = z.im;
        }
        g.upload_async(&mut slot.host, batch_len(n_p, n_rhs), &mut slot.device)?;
        let sources = slot.device.slice(0..4 * n_p);
        let currents = slot.device.slice(4 * n_p..batch_len(n_p, n_rhs));
        let (n_s, n_p32, n_rhs32) = (self.count as i64, n_p as i32, n_rhs as i32);
        if variant == FEGPU_RADFIELDS_TILED {
            let f = g.kernel("radfields", SOURCE, "rad_tiled")?;
            let (s_block, rhs_chunk, p_tile, threads) = tiled_shape(n_rhs, n_p);
            let (sb, rc, pt) = (s_block as i32, rhs_chunk as i32, p_tile as i32);
            let shared = (15 * 8 * s_block + 96 * rhs_chunk) * p_tile;
            let mut l = g.launcher(&f);
            l.arg(&self.points).arg(&n_s).arg(&sources).arg(&currents).arg(&n_p32).arg(&n_rhs32).arg(c);
            l.arg(&mut self.fields).arg(&mut self.excluded).arg(&sb).arg(&rc).arg(&pt);
            let grid = (self.count.div_ceil(s_block) as u32, n_rhs.div_ceil(rhs_chunk) as u32, 1);
            g.launch("rad_tiled", l, grid, (threads as u32, 1, 1), shared as u32)
        } else {
            let f = g.kernel("radfields", SOURCE, "rad_direct")?;
            let mut l = g.launcher(&f);
            l.arg(&self.points).arg(&n_s).arg(&sources).arg(&currents).arg(&n_p32).arg(&n_rhs32).arg(c);
            l.arg(&mut self.fields).arg(&mut self.excluded);
            g.launch("rad_direct", l, ((self.count * n_rhs).div_ceil(256) as u32, 1, 1), (256, 1, 1), 0)
        }
    }

    /// The fields of this part, (3, 2, count, n_rhs), after all queued work.
    pub fn fields(&self, g: &Gpu) -> Result<Vec<Complex64>> {
        let mut out = vec![Complex64::default(); self.fields.len() / 2];
        // SAFETY: Complex64 is #[repr(C)] (re, im), so the vector is 2n f64.
        let flat = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f64, self.fields.len()) };
        g.download(&self.fields, 0, flat)?;
        Ok(out)
    }

    pub fn excluded(&self, g: &Gpu) -> Result<u64> {
        let mut n = [0u64];
        g.download(&self.excluded, 0, &mut n)?;
        Ok(n[0])
    }
}

/// Seconds of the FP64 FMA ceiling kernel and the flops it did, for
/// `fegpu bench radfields`.
pub fn fp64_peak(g: &Gpu) -> Result<(f64, f64)> {
    let f = g.kernel("radfields", SOURCE, "fp64_peak")?;
    let mut out = g.alloc::<f64>(1)?;
    let (blocks, threads, iters) = (g.info.multiprocessors as u32 * 16, 256u32, 4096i32);
    let (b, c) = (0.999_999_9f64, 1e-7f64);
    let mut run = || -> Result<f64> {
        let start = g.mark()?;
        let mut l = g.launcher(&f);
        l.arg(&mut out).arg(&iters).arg(&b).arg(&c);
        g.launch("fp64_peak", l, (blocks, 1, 1), (threads, 1, 1), 0)?;
        start.seconds_until(&g.mark()?)
    };
    run()?;
    let best = (0..5).map(|_| run()).collect::<Result<Vec<_>>>()?.into_iter().fold(f64::INFINITY, f64::min);
    Ok((best, 2.0 * 8.0 * iters as f64 * blocks as f64 * threads as f64))
}
