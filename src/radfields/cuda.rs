//! CUDA launches for `kernels/radfields.cu` and the device side of an accumulator.

use super::{Consts, Kernel, Sources};
use crate::error::{host_vec, Result};
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

/// How many ways the direct kernel splits the S' points: enough blocks for
/// about four per multiprocessor, at least 16 points per split.
pub fn direct_split(blocks: usize, n_p: usize, multiprocessors: usize) -> usize {
    (4 * multiprocessors).div_ceil(blocks).clamp(1, n_p.div_ceil(16).max(1))
}

/// Small batches (an element's few points) are packed one after another into
/// a staging slot and launched together once it holds this many S' points (or
/// when the fields are read): a kernel per element would leave the device idle
/// between short launches.
const LAUNCH_POINTS: usize = 256;

/// One staging slot in page-locked memory and its copy on the device: the
/// packed points (x, y, z, w) of up to `capacity` S' points, then their
/// currents point-major (3, 2, n_rhs, capacity).
struct Slot {
    host: Pinned<f64>,
    device: DeviceBuffer<f64>,
    capacity: usize,
}

/// The S points of one device and the fields accumulated on them.
pub struct Part {
    count: usize,
    n_rhs: usize,
    points: DeviceBuffer<f64>,
    /// (3, 2, count, n_rhs) complex as (re, im) pairs.
    fields: DeviceBuffer<f64>,
    excluded: DeviceBuffer<u64>,
    slots: Vec<Slot>,
    /// The slot being filled and the S' points already in it.
    current: usize,
    pending: usize,
    /// The kernel strategy of the pending points.
    variant: Kernel,
    consts: Consts,
}

impl Part {
    pub fn new(g: &Gpu, points: &[f64], n_rhs: usize, consts: Consts) -> Result<Part> {
        let count = points.len() / 3;
        // The fields first: a size the device cannot hold fails before the
        // caller's points are read.
        let fields = g.alloc::<f64>(12 * count * n_rhs).map_err(|e| e.within("rad_fields fields"))?;
        let excluded = g.alloc::<u64>(1)?;
        let mut d_points = g.alloc::<f64>(points.len())?;
        g.upload(points, &mut d_points, 0)?;
        let mut part = Part {
            count,
            n_rhs,
            points: d_points,
            fields,
            excluded,
            slots: Vec::new(),
            current: 0,
            pending: 0,
            variant: Kernel::Tiled,
            consts,
        };
        part.reset(g)?;
        Ok(part)
    }

    /// Zeroes the fields; points still waiting in staging are dropped with them.
    pub fn reset(&mut self, g: &Gpu) -> Result<()> {
        self.pending = 0;
        g.fill_bytes(&mut self.fields, 0)?;
        g.fill_bytes(&mut self.excluded, 0)
    }

    /// Makes room for a batch of n_p points: launches what is pending if the
    /// batch would not fit beside it, and grows the slots (only when a batch is
    /// larger than any before), so `accumulate` cannot then fail for want of memory.
    pub fn reserve(&mut self, g: &Gpu, n_p: usize) -> Result<()> {
        if self.pending > 0 && self.pending + n_p > self.slots[self.current].capacity {
            self.flush(g)?;
        }
        if self.slots.first().is_some_and(|s| s.capacity >= n_p) {
            return Ok(());
        }
        let capacity = n_p.max(LAUNCH_POINTS);
        let len = capacity * (4 + 12 * self.n_rhs);
        let fresh = (0..2)
            .map(|_| Ok(Slot { host: g.pinned::<f64>(len)?, device: g.alloc::<f64>(len)?, capacity }))
            .collect::<Result<Vec<_>>>()?;
        // The old slots may still feed queued copies: let them finish first.
        g.synchronize("rad_fields staging")?;
        self.slots = fresh;
        self.current = 0;
        Ok(())
    }

    /// Packs the batch behind the pending points (call `reserve` first) and
    /// launches once enough are pending. Returns without waiting for the device.
    pub fn accumulate(&mut self, g: &Gpu, src: &Sources, variant: Kernel) -> Result<()> {
        if self.pending > 0 && variant != self.variant {
            self.flush(g)?;
        }
        self.variant = variant;
        let (n_p, n_rhs, at) = (src.n_p, self.n_rhs, self.pending);
        let slot = &mut self.slots[self.current];
        let packed = slot.host.wait_writable()?;
        let (xyzw, currents) = packed.split_at_mut(4 * slot.capacity);
        for p in 0..n_p {
            xyzw[4 * (at + p)..4 * (at + p) + 3].copy_from_slice(&src.points[3 * p..3 * p + 3]);
            xyzw[4 * (at + p) + 3] = src.weights[p];
            for r in 0..n_rhs {
                let from = &src.currents[6 * (p + n_p * r)..][..6];
                let to = &mut currents[12 * (r + n_rhs * (at + p))..][..12];
                for (pair, z) in to.chunks_exact_mut(2).zip(from) {
                    pair.copy_from_slice(&[z.re, z.im]);
                }
            }
        }
        self.pending += n_p;
        if self.pending >= LAUNCH_POINTS {
            self.flush(g)?;
        }
        Ok(())
    }

    /// Uploads the pending points of the current slot, queues the kernel over
    /// them and moves to the other slot.
    pub fn flush(&mut self, g: &Gpu) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let (n_p, n_rhs) = (self.pending, self.n_rhs);
        self.pending = 0;
        let slot = &mut self.slots[self.current];
        self.current = (self.current + 1) % 2;
        let cap = slot.capacity;
        g.upload_async(&mut slot.host, &[0..4 * n_p, 4 * cap..4 * cap + 12 * n_rhs * n_p], &mut slot.device)?;
        let sources = slot.device.slice(0..4 * n_p);
        let currents = slot.device.slice(4 * cap..4 * cap + 12 * n_rhs * n_p);
        let (n_s, n_p32, n_rhs32, c) = (self.count as i64, n_p as i32, n_rhs as i32, self.consts);
        if self.variant == Kernel::Tiled {
            let f = g.kernel("radfields", SOURCE, "rad_tiled")?;
            let (s_block, rhs_chunk, p_tile, threads) = tiled_shape(n_rhs, n_p);
            let (sb, rc, pt) = (s_block as i32, rhs_chunk as i32, p_tile as i32);
            let shared = (15 * 8 * s_block + 96 * rhs_chunk) * p_tile;
            let mut l = g.launcher(&f);
            l.arg(&self.points).arg(&n_s).arg(&sources).arg(&currents).arg(&n_p32).arg(&n_rhs32).arg(&c);
            l.arg(&mut self.fields).arg(&mut self.excluded).arg(&sb).arg(&rc).arg(&pt);
            let grid = (self.count.div_ceil(s_block) as u32, n_rhs.div_ceil(rhs_chunk) as u32, 1);
            g.launch("rad_tiled", l, grid, (threads as u32, 1, 1), shared as u32)
        } else {
            let f = g.kernel("radfields", SOURCE, "rad_direct")?;
            let blocks = (self.count * n_rhs).div_ceil(256);
            let mut l = g.launcher(&f);
            l.arg(&self.points).arg(&n_s).arg(&sources).arg(&currents).arg(&n_p32).arg(&n_rhs32).arg(&c);
            l.arg(&mut self.fields).arg(&mut self.excluded);
            g.launch(
                "rad_direct",
                l,
                (blocks as u32, direct_split(blocks, n_p, g.info.multiprocessors as usize) as u32, 1),
                (256, 1, 1),
                0,
            )
        }
    }

    /// The fields of this part, (3, 2, count, n_rhs), after all queued work.
    pub fn fields(&mut self, g: &Gpu) -> Result<Vec<Complex64>> {
        self.flush(g)?;
        let mut out = host_vec(self.fields.len() / 2, Complex64::default(), "rad_fields fields (download)")?;
        // SAFETY: Complex64 is #[repr(C)] (re, im), so the vector is 2n f64.
        let flat = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f64, self.fields.len()) };
        g.download(&self.fields, 0, flat)?;
        Ok(out)
    }

    pub fn excluded(&mut self, g: &Gpu) -> Result<u64> {
        self.flush(g)?;
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
