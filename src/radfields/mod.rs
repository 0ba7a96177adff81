//! The FE-IIEE `rad_fields` convolution: the equivalent currents on the inner
//! surface S' radiated to the sample points of the outer surface S through the
//! free-space Green's function (exp(+jwt), G = e^{-jkR}/(4 pi R)):
//!
//!   E(r)      += w [ -jwmu Gbar(r,r').J - gradG x M ]
//!   curl E(r) += w [ -jwmu gradG x J - k^2 Gbar(r,r').M ]
//!
//! An `Accumulator` keeps the S points and the fields on the device (split
//! across several GPUs when given several contexts) while the host's outer loop
//! over S' elements calls `accumulate`; `download` copies the fields back once.
//!
//! Layouts, column-major as in the Fortran code: S and S' points (3, n),
//! weights (n), currents (3, 2, n_p, n_rhs) complex (J then M), fields
//! (3, 2, n_s, n_rhs) complex (E then curl E).
//!
//! Coincident points (R = 0) are excluded: they contribute nothing, and
//! `excluded()` counts the pairs skipped.

pub mod cpu;
pub mod cuda;

use crate::context::{Backend, Context};
use crate::error::{checked_product, Error, Result};
use num_complex::Complex64;
use std::sync::{Arc, Mutex};

/// The kernel that accumulates a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// One thread per (S point, right-hand side); the seed's "parallel over S" and "over RHS".
    Direct,
    /// Green's-function coefficients of a tile of pairs shared by a block's right-hand sides.
    Tiled,
}

/// Flops per (S point, S' point) pair and per pair and right-hand side, counted
/// from the operations of `cpu::pair_coefficients` and `cpu::add_pair` with the
/// seed's weights (sqrt 4, exp/sin/cos 8, a division 4).
pub const FLOPS_PER_PAIR: f64 = 135.0;
pub const FLOPS_PER_PAIR_RHS: f64 = 188.0;

/// The flops of one accumulation of n_p S' points onto n_s S points.
pub fn flops(n_s: usize, n_p: usize, n_rhs: usize) -> f64 {
    n_s as f64 * n_p as f64 * (FLOPS_PER_PAIR + FLOPS_PER_PAIR_RHS * n_rhs as f64)
}

/// The medium: wavenumber k and omega*mu, complex for lossy media (Im k < 0).
#[derive(Debug, Clone, Copy)]
pub struct Medium {
    pub k: Complex64,
    pub omega_mu: Complex64,
}

/// The per-medium constants the kernels use.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Consts {
    pub k: Complex64,
    pub inv_k2: Complex64,
    pub neg_jwmu: Complex64,
    pub neg_k2: Complex64,
}

impl Medium {
    pub fn new(k: Complex64, omega_mu: Complex64) -> Result<Medium> {
        if !(k.re.is_finite() && k.im.is_finite()) || k.norm() == 0.0 {
            return Err(Error::invalid(format!("k = {k}: must be finite and nonzero")));
        }
        // the kernels take k^2 and 1 / k^2
        let k2 = k * k;
        let inv_k2 = 1.0 / k2;
        if !(k2.re.is_finite() && k2.im.is_finite() && inv_k2.re.is_finite() && inv_k2.im.is_finite()) {
            return Err(Error::invalid(format!("k = {k}: k^2 or 1 / k^2 overflows; rescale the units")));
        }
        if !(omega_mu.re.is_finite() && omega_mu.im.is_finite()) {
            return Err(Error::invalid(format!("omega_mu = {omega_mu}: must be finite")));
        }
        Ok(Medium { k, omega_mu })
    }

    pub fn consts(&self) -> Consts {
        let j = Complex64::new(0.0, 1.0);
        Consts { k: self.k, inv_k2: 1.0 / (self.k * self.k), neg_jwmu: -j * self.omega_mu, neg_k2: -(self.k * self.k) }
    }
}

/// One batch of S' sample points, checked: points (3, n_p), weights (n_p),
/// currents (3, 2, n_p, n_rhs).
pub struct Sources<'a> {
    pub n_p: usize,
    pub points: &'a [f64],
    pub weights: &'a [f64],
    pub currents: &'a [Complex64],
}

fn all_finite(v: &[f64]) -> Option<usize> {
    v.iter().position(|x| !x.is_finite())
}

impl<'a> Sources<'a> {
    pub fn new(n_p: usize, n_rhs: usize, points: &'a [f64], weights: &'a [f64], currents: &'a [Complex64]) -> Result<Self> {
        if n_p == 0 {
            return Err(Error::invalid("n_p = 0: a batch needs at least one S' point"));
        }
        let want =
            [("points", 3 * n_p, points.len()), ("weights", n_p, weights.len()), ("currents", 6 * n_p * n_rhs, currents.len())];
        for (name, want, got) in want {
            if want != got {
                return Err(Error::size(format!("{name} has {got} elements; n_p = {n_p} and n_rhs = {n_rhs} need {want}")));
            }
        }
        if let Some(i) = all_finite(points) {
            return Err(Error::invalid(format!("{} = {}: not finite", crate::error::at2("points", i % 3, i / 3, 3), points[i])));
        }
        if let Some(i) = all_finite(weights) {
            return Err(Error::invalid(format!("{} = {}: not finite", crate::error::at("weights", i), weights[i])));
        }
        if let Some(i) = currents.iter().position(|c| !(c.re.is_finite() && c.im.is_finite())) {
            let at = crate::error::at_shape("currents", i, &[(1, 3), (1, 2), (1, n_p)]);
            return Err(Error::invalid(format!("{at} = {}: not finite", currents[i])));
        }
        Ok(Sources { n_p, points, weights, currents })
    }
}

/// The kernel chosen when the caller leaves it to fegpu, from measurement
/// (BENCHMARKS.md): the tiled kernel reuses each pair's coefficients over the
/// right-hand sides, which pays as soon as there are two.
pub fn auto_variant(n_rhs: usize) -> Kernel {
    if n_rhs == 1 {
        Kernel::Direct
    } else {
        Kernel::Tiled
    }
}

/// The S points of one context and the fields accumulated on them.
struct Share {
    ctx: Arc<Context>,
    /// First S point (0-based) and count.
    first: usize,
    count: usize,
    part: Part,
}

enum Part {
    Host(cpu::Part),
    Device(Box<cuda::Part>),
}

pub struct Accumulator {
    pub n_s: usize,
    pub n_rhs: usize,
    medium: Medium,
    shares: Mutex<Vec<Share>>,
    /// None: chosen from n_rhs (`auto_variant`).
    variant: Mutex<Option<Kernel>>,
}

impl Accumulator {
    /// S points (3, n_s); with several contexts (CUDA, distinct devices) the S
    /// points are split into contiguous slices, one per device.
    pub fn new(ctxs: Vec<Arc<Context>>, points: &[f64], n_rhs: usize, medium: Medium) -> Result<Accumulator> {
        if points.is_empty() || !points.len().is_multiple_of(3) {
            return Err(Error::size(format!("points has {} elements: expected 3 * n_s with n_s >= 1", points.len())));
        }
        let n_s = points.len() / 3;
        if n_rhs == 0 {
            return Err(Error::invalid("n_rhs = 0: must be at least 1"));
        }
        checked_product(&[12, n_s, n_rhs], "rad_fields fields (12 x n_s x n_rhs)")?;
        check_devices(&ctxs)?;
        let n_dev = ctxs.len();
        let mut shares = Vec::with_capacity(n_dev);
        for (d, ctx) in ctxs.into_iter().enumerate() {
            let (first, end) = (n_s * d / n_dev, n_s * (d + 1) / n_dev);
            if first == end {
                continue; // fewer S points than devices
            }
            let mine = &points[3 * first..3 * end];
            let part = match &ctx.backend {
                Backend::Cpu => Part::Host(cpu::Part::new(mine, n_rhs)?),
                Backend::Cuda(g) => Part::Device(Box::new(cuda::Part::new(g, mine, n_rhs, medium.consts())?)),
            };
            shares.push(Share { ctx, first, count: end - first, part });
        }
        // Read after the storage exists (see Part::new); the parts are dropped on failure.
        if let Some(i) = all_finite(points) {
            return Err(Error::invalid(format!("{} = {}: not finite", crate::error::at2("points", i % 3, i / 3, 3), points[i])));
        }
        Ok(Accumulator { n_s, n_rhs, medium, shares: Mutex::new(shares), variant: Mutex::new(None) })
    }

    /// Each device's share; refused once a call that panicked holding them
    /// may have left the fields half-summed (`error::locked`).
    fn shares(&self) -> Result<std::sync::MutexGuard<'_, Vec<Share>>> {
        crate::error::locked(&self.shares, "the rad_fields accumulator")
    }

    /// The kernel of later batches (None: chosen from n_rhs).
    pub fn set_variant(&self, variant: Option<Kernel>) {
        *self.variant.lock().unwrap_or_else(|p| p.into_inner()) = variant;
    }

    /// Adds the contribution of one batch of S' points. On the CUDA backend it
    /// returns once the work is queued: the batch is copied into page-locked
    /// staging (double-buffered), so the caller may overwrite its arrays at once.
    pub fn accumulate(&self, src: &Sources) -> Result<()> {
        let variant = self.variant.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or_else(|| auto_variant(self.n_rhs));
        let mut shares = self.shares()?;
        for sh in shares.iter_mut() {
            if let (Part::Device(p), Backend::Cuda(g)) = (&mut sh.part, &sh.ctx.backend) {
                p.reserve(g, src.n_p)?;
            }
        }
        let add = |sh: &mut Share| match (&mut sh.part, &sh.ctx.backend) {
            (Part::Host(p), _) => {
                p.accumulate(&self.medium.consts(), src, self.n_rhs);
                Ok(())
            }
            (Part::Device(p), Backend::Cuda(g)) => p.accumulate(g, src, variant),
            _ => Err(crate::array::mixed_backends()),
        };
        match shares.as_mut_slice() {
            [one] => add(one),
            // each device's batch packed and queued on its own thread: one
            // after another, the last device's kernel started a packing per
            // device later (a large batch's packing takes a millisecond or more)
            several => {
                use rayon::prelude::*;
                several.par_iter_mut().try_for_each(add)
            }
        }
    }

    /// Copies the fields (3, 2, n_s, n_rhs) into `out`, waiting for queued work.
    pub fn download(&self, out: &mut [Complex64]) -> Result<()> {
        let want = 6 * self.n_s * self.n_rhs;
        if out.len() != want {
            return Err(Error::size(format!(
                "fields has {} elements; n_s = {} and n_rhs = {} need {want}",
                out.len(),
                self.n_s,
                self.n_rhs
            )));
        }
        let mut shares = self.shares()?;
        for sh in shares.iter_mut() {
            let slice: Vec<Complex64> = match (&mut sh.part, &sh.ctx.backend) {
                (Part::Host(p), _) => p.fields.clone(),
                (Part::Device(p), Backend::Cuda(g)) => p.fields(g)?,
                _ => return Err(crate::array::mixed_backends()),
            };
            place_slice(out, &slice, (sh.first, sh.count), self.n_s);
        }
        Ok(())
    }

    /// Zeroes the fields (the next FE-IIEE iteration) and the excluded count.
    pub fn reset(&self) -> Result<()> {
        let mut shares = self.shares()?;
        for sh in shares.iter_mut() {
            match (&mut sh.part, &sh.ctx.backend) {
                (Part::Host(p), _) => p.reset(),
                (Part::Device(p), Backend::Cuda(g)) => p.reset(g)?,
                _ => return Err(crate::array::mixed_backends()),
            }
        }
        Ok(())
    }

    /// Pairs of coincident points skipped since creation or the last reset.
    pub fn excluded(&self) -> Result<u64> {
        let mut shares = self.shares()?;
        let mut total = 0;
        for sh in shares.iter_mut() {
            total += match (&mut sh.part, &sh.ctx.backend) {
                (Part::Host(p), _) => p.excluded,
                (Part::Device(p), Backend::Cuda(g)) => p.excluded(g)?,
                _ => return Err(crate::array::mixed_backends()),
            };
        }
        Ok(total)
    }

    /// Launches the batches still in staging; returns without waiting.
    pub fn flush(&self) -> Result<()> {
        let mut shares = self.shares()?;
        for sh in shares.iter_mut() {
            if let (Part::Device(p), Backend::Cuda(g)) = (&mut sh.part, &sh.ctx.backend) {
                p.flush(g)?;
            }
        }
        Ok(())
    }

    /// Waits for every queued accumulation (for timing).
    pub fn synchronize(&self) -> Result<()> {
        self.flush()?;
        let shares = self.shares()?;
        for sh in shares.iter() {
            if let Some(g) = sh.ctx.gpu() {
                g.synchronize("rad_fields accumulation")?;
            }
        }
        Ok(())
    }
}

/// Copies the fields of S points first..first+count-1, held as (3, 2,
/// count, n_rhs), into their places in the fields (3, 2, n_s, n_rhs) of
/// all the points: a right-hand side's run at a time.
pub fn place_slice(out: &mut [Complex64], slice: &[Complex64], (first, count): (usize, usize), n_s: usize) {
    let run = 6 * count;
    for (r, part) in slice.chunks_exact(run.max(1)).enumerate() {
        let at = 6 * (first + n_s * r);
        out[at..at + run].copy_from_slice(part);
    }
}

/// One context of either backend, or several CUDA contexts on distinct devices.
fn check_devices(ctxs: &[Arc<Context>]) -> Result<()> {
    if ctxs.is_empty() {
        return Err(Error::invalid("n_ctx = 0: give at least one context"));
    }
    if ctxs.len() == 1 {
        return Ok(());
    }
    let mut seen = Vec::new();
    for (i, c) in ctxs.iter().enumerate() {
        match c.gpu() {
            None => {
                let ctx = crate::error::at("ctxs", i);
                return Err(Error::invalid(format!("{ctx} is a CPU context: several contexts must all be CUDA")));
            }
            Some(g) if seen.contains(&g.info.ordinal) => {
                return Err(Error::invalid(format!(
                    "{} is on device {} like an earlier one: use one context per device",
                    crate::error::at("ctxs", i),
                    g.info.ordinal
                )))
            }
            Some(g) => seen.push(g.info.ordinal),
        }
    }
    Ok(())
}

/// What the C and Fortran surfaces call on an accumulator: one process's
/// (`Accumulator`, over one or several devices), or one whose S points are
/// split over MPI ranks (`dist::DistRadFields`: `download` and `excluded`
/// are collective there and cover every rank's points).
pub trait RadFieldsApi: Send + Sync {
    /// S points and right-hand sides of the whole accumulator.
    fn sizes(&self) -> (usize, usize);
    fn set_variant(&self, variant: Option<Kernel>);
    fn accumulate(&self, src: &Sources) -> Result<()>;
    /// The fields (3, 2, n_s, n_rhs) of every S point into the caller's
    /// array, or why the caller's array was refused (a split accumulator
    /// tells every rank).
    fn download(&self, out: Result<&mut [Complex64]>) -> Result<()>;
    fn reset(&self) -> Result<()>;
    fn excluded(&self) -> Result<u64>;
}

impl RadFieldsApi for Accumulator {
    fn sizes(&self) -> (usize, usize) {
        (self.n_s, self.n_rhs)
    }
    fn set_variant(&self, variant: Option<Kernel>) {
        Accumulator::set_variant(self, variant)
    }
    fn accumulate(&self, src: &Sources) -> Result<()> {
        Accumulator::accumulate(self, src)
    }
    fn download(&self, out: Result<&mut [Complex64]>) -> Result<()> {
        Accumulator::download(self, out?)
    }
    fn reset(&self) -> Result<()> {
        Accumulator::reset(self)
    }
    fn excluded(&self) -> Result<u64> {
        Accumulator::excluded(self)
    }
}
