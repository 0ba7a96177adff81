//! D3Q19 lattice Boltzmann on the device: a lattice object whose populations
//! stay resident, a fused BGK or TRT collide-and-stream step, and the macroscopic
//! fields on request.
//!
//! Device layout: direction-major (f[i*n + site], site = x + nx*(y + ny*z)),
//! one buffer streamed in place (or two, swapped each step, for the push and
//! pull schemes). The caller's layout (set/get_populations) is
//! the serial code's: f(0:18, nx, ny, nz) in Fortran order, direction fastest,
//! in the Palabos velocity order of `C` (direction i+9 opposite i), holding
//! the populations after streaming (before the next collision).

pub mod cpu;
pub mod cuda;
pub mod storage;

use crate::array::Buffer;
use crate::context::Context;
use crate::error::{checked_product, host_vec, positive, Error, ErrorKind, Result};
use crate::gpu::{DeviceBuffer, Gpu};
use cuda::{Buffers, Pass};
use std::sync::{Arc, Mutex};
use storage::{Half, Stored};

pub const Q: usize = 19;
/// D3Q19 velocities in the Palabos order.
pub const C: [[i32; 3]; Q] = [
    [0, 0, 0],
    [-1, 0, 0],
    [0, -1, 0],
    [0, 0, -1],
    [-1, -1, 0],
    [-1, 1, 0],
    [-1, 0, -1],
    [-1, 0, 1],
    [0, -1, -1],
    [0, -1, 1],
    [1, 0, 0],
    [0, 1, 0],
    [0, 0, 1],
    [1, 1, 0],
    [1, -1, 0],
    [1, 0, 1],
    [1, 0, -1],
    [0, 1, 1],
    [0, 1, -1],
];
const W0: f64 = 1.0 / 3.0;
const W1: f64 = 1.0 / 18.0;
const W2: f64 = 1.0 / 36.0;
pub const W: [f64; Q] = [W0, W1, W1, W1, W2, W2, W2, W2, W2, W2, W1, W1, W1, W2, W2, W2, W2, W2, W2];

/// Every direction, as a bit mask (bit i: direction i).
pub const ALL_DIRECTIONS: u32 = (1 << Q) - 1;

/// The directions whose velocity has z component `cz`, as a bit mask.
pub fn directions_along_z(cz: i32) -> u32 {
    (0..Q).filter(|&i| C[i][2] == cz).fold(0, |m, i| m | 1 << i)
}

/// The directions of a bit mask, increasing.
pub fn directions(mask: u32) -> impl Iterator<Item = usize> {
    (0..Q).filter(move |&i| mask & (1 << i) != 0)
}

pub fn opposite(i: usize) -> usize {
    match i {
        0 => 0,
        1..=9 => i + 9,
        _ => i - 9,
    }
}

/// Site flags, the lattice's data format (the caller's flag array, the CPU
/// reference and kernels/lbm.cu read the same numbers; the ABI publishes
/// them as FLUID, _WALL, _MOVING_WALL). A fluid site is collided and
/// streamed every step.
pub(crate) const FLUID: u8 = 0;
/// A resting wall (halfway bounce-back).
pub(crate) const WALL: u8 = 1;
/// A wall moving with the lattice's wall velocity (halfway bounce-back with Ladd's term).
pub(crate) const MOVING_WALL: u8 = 2;
/// A velocity boundary (an inlet, or an outlet with a known profile): a
/// wall moving with its own prescribed velocity.
pub(crate) const VELOCITY_BC: u8 = 3;
/// A pressure boundary (an outlet, or a pressure-driven inlet): the
/// populations coming from it anti-bounce-back towards the equilibrium of
/// its own prescribed density (pressure rho / 3).
pub(crate) const PRESSURE_BC: u8 = 4;

/// Periodic-direction bits (x, y, z: 1, 2, 4; the ABI's FEGPU_PERIODIC_*).
pub(crate) const PERIODIC_X: i32 = 1;
pub(crate) const PERIODIC_Y: i32 = 2;
pub(crate) const PERIODIC_Z: i32 = 4;

/// Everything a step needs besides the populations and flags.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub dims: [usize; 3],
    /// FEGPU_PERIODIC_* bits; other faces are resting walls.
    pub periodic: i32,
    /// BGK relaxation time (> 1/2); viscosity (tau - 1/2)/3.
    pub tau: f64,
    /// Body force per unit volume (Guo forcing).
    pub force: [f64; 3],
    /// Velocity of MOVING_WALL sites.
    pub wall_velocity: [f64; 3],
    /// TRT's magic parameter (tau - 1/2)(tau_minus - 1/2); 0 selects BGK.
    pub magic: f64,
}

impl Params {
    /// The odd-moment relaxation rate: 1/tau for BGK, from the magic parameter for TRT.
    pub fn omega_minus(&self) -> f64 {
        if self.magic > 0.0 {
            1.0 / (0.5 + self.magic / (self.tau - 0.5))
        } else {
            1.0 / self.tau
        }
    }

    pub fn sites(&self) -> usize {
        self.dims.iter().product()
    }
    /// The site `s + C[i]`, wrapped across periodic faces; None beyond a wall face.
    pub fn neighbour(&self, s: usize, i: usize) -> Option<usize> {
        let [nx, ny, _] = self.dims;
        let coord = [s % nx, (s / nx) % ny, s / (nx * ny)];
        let mut d = [0usize; 3];
        for a in 0..3 {
            let n = self.dims[a] as i64;
            let mut v = coord[a] as i64 + C[i][a] as i64;
            if v < 0 || v >= n {
                if self.periodic & (1 << a) == 0 {
                    return None;
                }
                v = v.rem_euclid(n);
            }
            d[a] = v as usize;
        }
        Some(d[0] + nx * (d[1] + ny * d[2]))
    }
}

/// How the CUDA step streams. InPlace (the default): one population buffer
/// (19 values a site, against 38 for the others), the AA pattern of
/// kernels/lbm.cu: even steps collide each site in place, odd steps gather
/// from and push to the neighbours; after an even step the streaming is
/// pending, carried out in place (settled) when a read or a change of walls
/// needs it. Push: each site collides and writes its populations to its
/// neighbours (misaligned stores) in a second buffer; `current` always holds
/// the populations after streaming, as the caller's layout does. Pull: each
/// site gathers from its neighbours and collides (aligned stores) into a
/// second buffer; between steps `current` holds the post-collision
/// populations and the last step's streaming is pending until a step, a read
/// or a change of walls needs it. The CPU reference always pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    InPlace,
    Push,
    Pull,
}

impl Scheme {
    /// Population buffers on the device.
    pub fn buffers(self) -> usize {
        if self == Scheme::InPlace {
            1
        } else {
            2
        }
    }
    /// Device bytes a site holds: its populations and its flag.
    pub fn bytes_per_site(self, precision: Precision) -> usize {
        self.buffers() * Q * precision.bytes() + 1
    }
}

/// What the passes over the populations read besides them: the backend,
/// the step's parameters, scheme and block size, the site flags and the
/// open-boundary table.
#[derive(Clone, Copy)]
struct Setting<'a> {
    gpu: Option<&'a Gpu>,
    p: &'a Params,
    scheme: Scheme,
    block: Option<u32>,
    flags: &'a Buffer<u8>,
    open: &'a Open,
}

/// The population buffers of one storage type.
pub struct Populations<T: Stored> {
    pub current: Buffer<T>,
    /// The second buffer of the two-buffer schemes (always there on the host).
    spare: Option<Buffer<T>>,
    /// `current` holds post-collision populations whose streaming is pending
    /// (the pull scheme, or the in-place scheme after an even step).
    stream_pending: bool,
}

pub enum Storage {
    F16(Populations<Half>),
    F32(Populations<f32>),
    F64(Populations<f64>),
}

/// The storage precision of a lattice's populations (arithmetic is f32 for
/// F16 and F32, f64 for F64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F16,
    F32,
    F64,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::F16 => Half::NAME,
            Precision::F32 => f32::NAME,
            Precision::F64 => f64::NAME,
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            Precision::F16 => Half::BYTES,
            Precision::F32 => f32::BYTES,
            Precision::F64 => f64::BYTES,
        }
    }
    /// Whether a population f of weight w fits the storage (f16 keeps
    /// f - w), rather than becoming inf there.
    fn holds(self, f: f64, w: f64) -> bool {
        match self {
            Precision::F16 => (f - w).abs() <= 65504.0,
            Precision::F32 => f.abs() <= f32::MAX as f64,
            Precision::F64 => true,
        }
    }
}

impl Storage {
    fn precision(&self) -> Precision {
        match self {
            Storage::F16(_) => Precision::F16,
            Storage::F32(_) => Precision::F32,
            Storage::F64(_) => Precision::F64,
        }
    }
}

/// Runs `$body` with `$p` bound to the populations, whatever their type.
macro_rules! with_populations {
    ($storage:expr, $p:ident => $body:expr) => {
        match $storage {
            Storage::F16($p) => $body,
            Storage::F32($p) => $body,
            Storage::F64($p) => $body,
        }
    };
}

/// Some of a lattice's sites, in increasing order, on the device too when
/// the lattice is there (never empty there, so the kernels always get an
/// address): the open boundary sites, a body's sites.
struct SiteList {
    sites: Vec<u32>,
    device: Option<DeviceBuffer<u32>>,
}

impl SiteList {
    /// The sites s < n where `member(s)`.
    fn new(gpu: Option<&Gpu>, n: usize, member: impl Fn(usize) -> bool) -> Result<SiteList> {
        let sites: Vec<u32> = (0..n).filter(|&s| member(s)).map(|s| s as u32).collect();
        let device = match gpu {
            Some(g) => {
                let mut d = g.alloc::<u32>(sites.len().max(1))?;
                if !sites.is_empty() {
                    g.upload(&sites, &mut d, 0)?;
                }
                Some(d)
            }
            None => None,
        };
        Ok(SiteList { sites, device })
    }
}

/// The open-boundary sites (VELOCITY_BC, PRESSURE_BC) and their prescribed
/// (rho, ux, uy, uz), 4 values a site (rho 1 and u 0 until set), the table
/// on the device too when the lattice is there (never empty there).
pub struct Open {
    list: SiteList,
    table: Vec<f64>,
    device_table: Option<DeviceBuffer<f64>>,
}

impl Open {
    fn new(gpu: Option<&Gpu>, flags: &[u8]) -> Result<Open> {
        let list = SiteList::new(gpu, flags.len(), |s| flags[s] >= VELOCITY_BC)?;
        let table = list.sites.iter().flat_map(|_| [1.0, 0.0, 0.0, 0.0]).collect();
        let device_table = gpu.map(|g| g.alloc::<f64>(4 * list.sites.len().max(1))).transpose()?;
        let mut open = Open { list, table, device_table };
        if let Some(g) = gpu {
            open.upload(g)?;
        }
        Ok(open)
    }

    fn upload(&mut self, g: &Gpu) -> Result<()> {
        match &mut self.device_table {
            Some(t) if !self.table.is_empty() => g.upload(&self.table, t, 0),
            _ => Ok(()),
        }
    }

    /// The prescribed (rho, ux, uy, uz) of open boundary site `site`.
    pub fn values(&self, site: usize) -> &[f64] {
        let k = self.list.sites.binary_search(&(site as u32)).expect("an open boundary site");
        &self.table[4 * k..4 * k + 4]
    }
}

struct State {
    params: Params,
    flags: Buffer<u8>,
    open: Open,
    /// The sites whose force `Lattice::body_force` sums.
    body: Option<SiteList>,
    storage: Storage,
    /// Threads per block of the CUDA steps where `fegpu bench lbm` sets them.
    block: Option<u32>,
    scheme: Scheme,
}

impl State {
    /// Carries out a pending streaming (pull or in-place scheme) with the walls and wall
    /// velocity it was computed with, before something changes them.
    fn settle(&mut self, gpu: Option<&Gpu>) -> Result<()> {
        let (s, storage) = self.split(gpu);
        with_populations!(storage, p => p.settle(&s))
    }

    /// The populations, and what the passes over them read.
    fn split<'a>(&'a mut self, gpu: Option<&'a Gpu>) -> (Setting<'a>, &'a mut Storage) {
        let State { params, flags, open, storage, block, scheme, .. } = self;
        (Setting { gpu, p: params, scheme: *scheme, block: *block, flags, open }, storage)
    }
}

pub struct Lattice {
    pub ctx: Arc<Context>,
    state: Mutex<State>,
}

/// Element k of the caller's populations f(0:18, nx, ny, nz), as the caller counts.
fn population_at(k: usize, [nx, ny]: [usize; 2]) -> String {
    crate::error::at_shape("f", k, &[(0, Q), (1, nx), (1, ny)])
}

/// Populations in the caller's layout for `n` sites of nx x ny planes: the size, all finite.
pub(crate) fn check_populations(f: &[f64], n: usize, plane: [usize; 2]) -> Result<()> {
    if f.len() != n * Q {
        return Err(Error::size(format!("f: {} values for {n} sites x 19 directions", f.len())));
    }
    if let Some(k) = f.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!("{} = {}: populations must be finite", population_at(k, plane), f[k])));
    }
    Ok(())
}

/// Site flags: the size, every value a known flag.
pub(crate) fn check_flags(flags: &[u8], n: usize) -> Result<()> {
    if flags.len() != n {
        return Err(Error::size(format!("flags: {} values for {n} sites", flags.len())));
    }
    if let Some(s) = flags.iter().position(|&f| f > PRESSURE_BC) {
        return Err(Error::invalid(format!(
            "{} = {}: unknown flag (0 fluid, 1 wall, 2 moving wall, 3 velocity boundary, 4 pressure boundary)",
            crate::error::at("flags", s),
            flags[s]
        )));
    }
    Ok(())
}

/// Prescribed (rho, ux, uy, uz) of `m` open boundary sites: the count, finite, densities > 0.
pub(crate) fn check_boundary_values(values: &[f64], m: usize) -> Result<()> {
    if values.len() != 4 * m {
        return Err(Error::size(format!(
            "values: {} numbers for the lattice's {m} open boundary sites (4 a site: rho, ux, uy, uz)",
            values.len()
        )));
    }
    if let Some(k) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!("{} = {}: must be finite", crate::error::at("values", k), values[k])));
    }
    if let Some(k) = (0..m).find(|&k| values[4 * k] <= 0.0) {
        let at = crate::error::at("values", 4 * k);
        return Err(Error::invalid(format!("{at} = {}: a density must be > 0", values[4 * k])));
    }
    for (k, site) in values.chunks_exact(4).enumerate() {
        lattice_velocity(&crate::error::range("values", 4 * k + 1, 4 * k + 4), [site[1], site[2], site[3]])?;
    }
    Ok(())
}

pub(crate) fn finite3(name: &str, v: [f64; 3]) -> Result<[f64; 3]> {
    if v.iter().all(|x| x.is_finite()) {
        Ok(v)
    } else {
        Err(Error::invalid(format!("{name} = {v:?}: must be finite")))
    }
}

/// A velocity in lattice units: finite and below the lattice's speed of
/// sound 1/sqrt(3) (Mach 1), beyond which the equilibria lose positivity and
/// the scheme its stability; accurate runs stay near Mach 0.1.
pub(crate) fn lattice_velocity(name: &str, u: [f64; 3]) -> Result<[f64; 3]> {
    below_sound(name, u, "|u|", "lattice Boltzmann needs |u| well below it, about 0.1 for accuracy")
}

/// A body force in lattice units: it adds |F| / rho to the velocity every
/// step, so one at or above the speed of sound (rho about 1) blows the
/// populations up within a step or two; forced flows take 1e-6 to 1e-3.
pub(crate) fn lattice_force(force: [f64; 3]) -> Result<[f64; 3]> {
    below_sound("force", force, "|F|", "it changes a unit density's velocity by |F| a step; forced flows take 1e-6 to 1e-3")
}

fn below_sound(name: &str, v: [f64; 3], norm: &str, why: &str) -> Result<[f64; 3]> {
    let v = finite3(name, v)?;
    let size2: f64 = v.iter().map(|x| x * x).sum();
    if size2 >= 1.0 / 3.0 {
        return Err(Error::invalid(format!(
            "{name} = {v:?}: {norm} = {:.4} is at or above the lattice's speed of sound 1/sqrt(3) = 0.5774 ({why})",
            size2.sqrt()
        )));
    }
    Ok(v)
}

/// A buffer of `len` populations holds a run of `count` for each direction of `dirs`.
fn check_runs(len: usize, count: usize, dirs: u32) -> Result<()> {
    if len != dirs.count_ones() as usize * count {
        return Err(Error::internal(format!("{len} populations for {} runs of {count} sites", dirs.count_ones())));
    }
    Ok(())
}

/// Bytes of populations seen as the storage type (8-byte aligned, a whole number of them).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
fn typed<T: Stored>(raw: &[u8]) -> Result<&[T]> {
    // SAFETY: the storage types are plain numbers: any bits are a value.
    match unsafe { raw.align_to::<T>() } {
        (&[], typed, &[]) => Ok(typed),
        _ => Err(Error::internal(format!("{} bytes of populations, not aligned to their type", raw.len()))),
    }
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
fn typed_mut<T: Stored>(raw: &mut [u8]) -> Result<&mut [T]> {
    let len = raw.len();
    // SAFETY: as in `typed`.
    match unsafe { raw.align_to_mut::<T>() } {
        (&mut [], typed, &mut []) => Ok(typed),
        _ => Err(Error::internal(format!("{len} bytes of populations, not aligned to their type"))),
    }
}

fn alloc<T: Stored>(gpu: Option<&Gpu>, n: usize) -> Result<Buffer<T>> {
    Ok(match gpu {
        Some(g) => Buffer::Device(g.alloc::<T>(n).map_err(|e| e.within("lattice populations"))?),
        None => Buffer::Host(host_vec(n, T::POISON, "lattice populations")?),
    })
}

fn new_populations<T: Stored>(gpu: Option<&Gpu>, n: usize) -> Result<Populations<T>> {
    let total = checked_product(&[n, Q], "lattice populations (sites x 19)")?;
    let spare = if gpu.is_none() { Some(alloc(gpu, total)?) } else { None };
    Ok(Populations { current: alloc(gpu, total)?, spare, stream_pending: false })
}

impl<T: Stored> Populations<T> {
    fn equilibrium(&mut self, gpu: Option<&Gpu>, n: usize, rho: f64, u: [f64; 3]) -> Result<()> {
        match (&mut self.current, gpu) {
            (Buffer::Host(f), _) => {
                cpu::equilibrium(f, n, rho, u);
                Ok(())
            }
            (Buffer::Device(f), Some(g)) => {
                self.stream_pending = false;
                cuda::equilibrium(g, f, n, rho, u)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    /// The second buffer a two-buffer scheme needs (allocated on first use;
    /// the in-place scheme gives it back). Call settled.
    fn use_scheme(&mut self, gpu: Option<&Gpu>, scheme: Scheme) -> Result<()> {
        match (gpu, scheme.buffers(), &self.spare, &self.current) {
            (Some(_), 1, _, _) => self.spare = None,
            (Some(g), _, None, Buffer::Device(current)) => {
                let total = current.len();
                self.spare = Some(Buffer::Device(g.alloc::<T>(total).map_err(|e| e.within("the second population buffer"))?));
            }
            _ => {}
        }
        Ok(())
    }

    /// One pass over sites first..first+count-1: from `current` into
    /// `spare` (`swap` makes it current), or over `current` in place.
    fn pass(&mut self, g: &Gpu, s: &Setting, pass: Pass, (first, count): (usize, usize), swap: bool) -> Result<()> {
        let (Buffer::Device(fl), Some(open_sites), Some(table)) = (s.flags, &s.open.list.device, &s.open.device_table) else {
            return Err(crate::array::mixed_backends());
        };
        let sites = (fl, (open_sites, table), s.open.list.sites.len());
        let in_place = matches!(pass, Pass::Even | Pass::Odd | Pass::Settle);
        match (&mut self.current, &mut self.spare) {
            (Buffer::Device(f), _) if in_place => cuda::pass(g, s.p, pass, s.block, sites, Buffers::One(f), first, count),
            (Buffer::Device(fin), Some(Buffer::Device(fout))) => {
                cuda::pass(g, s.p, pass, s.block, sites, Buffers::Two(fin, fout), first, count)?;
                if swap {
                    std::mem::swap(&mut self.current, self.spare.as_mut().expect("the second buffer"));
                }
                Ok(())
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    fn step(&mut self, s: &Setting, count: u64) -> Result<()> {
        let all = (0, s.p.sites());
        for _ in 0..count {
            match (&self.current, &mut self.spare, s.flags, s.gpu) {
                (Buffer::Host(fin), Some(Buffer::Host(fout)), Buffer::Host(fl), _) => {
                    cpu::step(s.p, fl, s.open, fin, fout);
                    std::mem::swap(&mut self.current, self.spare.as_mut().expect("the host's second buffer"));
                }
                (_, _, _, Some(g)) => {
                    let (pass, pending) = self.next_pass(s.scheme);
                    self.pass(g, s, pass, all, true)?;
                    self.stream_pending = pending;
                }
                _ => return Err(crate::array::mixed_backends()),
            }
        }
        Ok(())
    }

    /// The device pass a step makes now, and whether a streaming is pending after it.
    fn next_pass(&self, scheme: Scheme) -> (Pass, bool) {
        // set_scheme settles, so push never finds a streaming pending.
        match (scheme, self.stream_pending) {
            (Scheme::Push, _) => (Pass::Push, false),
            (Scheme::Pull, false) => (Pass::Collide, true),
            (Scheme::Pull, true) => (Pass::Pull, true),
            (Scheme::InPlace, false) => (Pass::Even, true),
            (Scheme::InPlace, true) => (Pass::Odd, false),
        }
    }

    /// One device step of a two-buffer scheme over the sites `edges`, then
    /// `Gpu::fork_side`, then the sites `inner`, the other sites left as they
    /// are: side work (`Gpu::on_side`) the caller queues next overlaps the
    /// inner sites' step.
    fn step_edges_first(&mut self, s: &Setting, edges: &[(usize, usize)], inner: (usize, usize)) -> Result<()> {
        let (Some(g), Some(Buffer::Device(_))) = (s.gpu, &self.spare) else {
            return Err(Error::internal("stepping the edges first needs a two-buffer scheme on the device"));
        };
        let (pass, pending) = self.next_pass(s.scheme);
        for &range in edges.iter().filter(|r| r.1 > 0) {
            self.pass(g, s, pass, range, false)?;
        }
        g.fork_side()?;
        if inner.1 > 0 {
            self.pass(g, s, pass, inner, false)?;
        }
        std::mem::swap(&mut self.current, self.spare.as_mut().expect("the second buffer"));
        self.stream_pending = pending;
        Ok(())
    }

    /// Carries out a pending streaming.
    fn settle(&mut self, s: &Setting) -> Result<()> {
        if let (true, Some(g)) = (self.stream_pending, s.gpu) {
            let pass = if s.scheme == Scheme::InPlace { Pass::Settle } else { Pass::Stream };
            self.pass(g, s, pass, (0, s.p.sites()), true)?;
            self.stream_pending = false;
        }
        Ok(())
    }

    /// The populations after streaming of sites first..first+count-1:
    /// `current`, or, with the pull scheme's streaming pending, `spare`
    /// streamed into (the state is unchanged); the in-place scheme settles.
    fn streamed(&mut self, s: &Setting, range: (usize, usize)) -> Result<&Buffer<T>> {
        match (self.stream_pending, s.gpu, s.scheme) {
            (true, Some(g), Scheme::Pull) => {
                self.pass(g, s, Pass::Stream, range, false)?;
                Ok(self.spare.as_ref().expect("the pull scheme's second buffer"))
            }
            _ => {
                self.settle(s)?;
                Ok(&self.current)
            }
        }
    }

    /// The caller's layout (direction fastest, f64) into the storage of
    /// the sites first..first+count-1: populations after streaming, so the
    /// other sites are settled first (all of them overwritten: no pass).
    fn upload(&mut self, s: &Setting, (first, count): (usize, usize), caller: &[f64]) -> Result<()> {
        let whole = count == s.p.sites();
        if !whole {
            self.settle(s)?;
        }
        let mut soa = host_vec(count * Q, T::POISON, "lattice populations (staging)")?;
        for site in 0..count {
            for i in 0..Q {
                soa[i * count + site] = T::store(caller[site * Q + i], W[i]);
            }
        }
        self.set_raw_sites(s.gpu, (first, count), ALL_DIRECTIONS, &soa)?;
        if whole {
            self.stream_pending = false;
        }
        Ok(())
    }

    /// The populations after streaming of the sites first..first+count-1 in the caller's layout.
    fn download(&mut self, s: &Setting, (first, count): (usize, usize), caller: &mut [f64]) -> Result<()> {
        let n = s.p.sites();
        let fetched;
        let soa: &[T] = match (self.streamed(s, (first, count))?, s.gpu) {
            (Buffer::Host(f), _) => f,
            (Buffer::Device(f), Some(g)) => {
                let mut h = host_vec(n * Q, T::POISON, "lattice populations (staging)")?;
                g.download(f, 0, &mut h)?;
                fetched = h;
                &fetched
            }
            _ => return Err(crate::array::mixed_backends()),
        };
        for site in 0..count {
            for i in 0..Q {
                caller[site * Q + i] = soa[i * n + first + site].load(W[i]);
            }
        }
        Ok(())
    }

    fn body_force(&mut self, s: &Setting, body: &SiteList, own: (usize, usize)) -> Result<[f64; 3]> {
        match (self.streamed(s, (0, s.p.sites()))?, s.flags, s.gpu, &body.device) {
            (Buffer::Host(f), Buffer::Host(fl), _, _) => Ok(cpu::body_force(s.p, fl, f, &body.sites, own)),
            (Buffer::Device(f), Buffer::Device(fl), Some(g), Some(b)) => {
                cuda::body_force(g, s.p, fl, f, (b, body.sites.len()), own)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    /// The stored populations of sites first..first+count-1 in the
    /// directions of the bit mask `dirs`, a run of count each (in increasing
    /// direction), into `out`, as they stand: after streaming, or
    /// post-collision while a streaming is pending.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
    fn raw_sites(&mut self, gpu: Option<&Gpu>, (first, count): (usize, usize), dirs: u32, out: &mut [T]) -> Result<()> {
        check_runs(out.len(), count, dirs)?;
        match (&mut self.current, gpu) {
            (Buffer::Host(f), _) => {
                let n = f.len() / Q;
                for (run, i) in directions(dirs).enumerate() {
                    out[run * count..(run + 1) * count].copy_from_slice(&f[i * n + first..i * n + first + count]);
                }
                Ok(())
            }
            (Buffer::Device(f), Some(g)) => {
                let mut packed = g.alloc::<T>(out.len().max(1))?;
                cuda::planes(g, f, &mut packed, (first, count), dirs, false)?;
                g.download(&packed, 0, out)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    /// Overwrites the stored populations of sites first..first+count-1 in
    /// the directions of `dirs` with `raw` (the layout of `raw_sites`).
    fn set_raw_sites(&mut self, gpu: Option<&Gpu>, (first, count): (usize, usize), dirs: u32, raw: &[T]) -> Result<()> {
        check_runs(raw.len(), count, dirs)?;
        match (&mut self.current, gpu) {
            (Buffer::Host(f), _) => {
                let n = f.len() / Q;
                for (run, i) in directions(dirs).enumerate() {
                    f[i * n + first..i * n + first + count].copy_from_slice(&raw[run * count..(run + 1) * count]);
                }
                Ok(())
            }
            (Buffer::Device(f), Some(g)) => {
                let mut packed = g.alloc::<T>(raw.len().max(1))?;
                g.upload(raw, &mut packed, 0)?;
                cuda::planes(g, f, &mut packed, (first, count), dirs, true)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }

    fn fields(&mut self, s: &Setting, first: usize, rho: &mut [f64], u: &mut [f64]) -> Result<()> {
        match (self.streamed(s, (first, rho.len()))?, s.flags, s.gpu) {
            (Buffer::Host(f), Buffer::Host(fl), _) => {
                cpu::fields(s.p, fl, f, first, rho, u);
                Ok(())
            }
            (Buffer::Device(f), Buffer::Device(fl), Some(g)) => cuda::fields(g, s.p, fl, f, first, rho, u),
            _ => Err(crate::array::mixed_backends()),
        }
    }
}

impl Lattice {
    /// An nx x ny x nz lattice, all fluid, at rest with density 1.
    pub fn new(ctx: Arc<Context>, dims: [i64; 3], precision: Precision, tau: f64, periodic: i32) -> Result<Lattice> {
        let dims = [positive("nx", dims[0])?, positive("ny", dims[1])?, positive("nz", dims[2])?];
        if !(tau > 0.5 && tau.is_finite()) {
            return Err(Error::invalid(format!("tau = {tau}: BGK needs a finite tau > 0.5 (viscosity (tau - 1/2)/3 > 0)")));
        }
        if periodic & !7 != 0 {
            return Err(Error::invalid(format!("periodic = {periodic}: only the bits PERIODIC_X|Y|Z (1, 2, 4) are defined")));
        }
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= i32::MAX as usize)
            .ok_or_else(|| Error::unsupported(format!("{dims:?}: lattices of 2^31 sites or more are not supported")))?;
        let params = Params { dims, periodic, tau, force: [0.0; 3], wall_velocity: [0.0; 3], magic: 0.0 };
        let gpu = ctx.gpu();
        let flags = match gpu {
            Some(g) => {
                let mut b = g.alloc::<u8>(n)?;
                g.fill_bytes(&mut b, FLUID)?;
                cuda::mark_bulk(g, &params, &mut b)?;
                Buffer::Device(b)
            }
            None => Buffer::Host(host_vec(n, FLUID, "lattice flags")?),
        };
        let open = Open::new(gpu, &[])?;
        let mut storage = match precision {
            Precision::F16 => Storage::F16(new_populations(gpu, n)?),
            Precision::F32 => Storage::F32(new_populations(gpu, n)?),
            Precision::F64 => Storage::F64(new_populations(gpu, n)?),
        };
        with_populations!(&mut storage, p => p.equilibrium(gpu, n, 1.0, [0.0; 3]))?;
        Ok(Lattice {
            ctx,
            state: Mutex::new(State { params, flags, open, body: None, storage, block: None, scheme: Scheme::InPlace }),
        })
    }

    /// Refused once a call that panicked holding it may have left it half-changed (`error::locked`).
    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        crate::error::locked(&self.state, "the lattice")
    }

    /// The state for reading its fixed figures (parameters, sizes) even so.
    fn peek(&self) -> std::sync::MutexGuard<'_, State> {
        crate::error::peek(&self.state)
    }

    pub fn params(&self) -> Params {
        self.peek().params
    }

    /// Threads per block of the CUDA step (for `fegpu bench lbm`'s comparison;
    /// f16's in-place steps over pairs of sites take at most 128).
    pub fn set_block(&self, block: u32) -> Result<()> {
        if !(32..=256).contains(&block) || !block.is_multiple_of(32) {
            return Err(Error::invalid(format!("block = {block}: a multiple of 32 up to 256")));
        }
        self.state()?.block = Some(block);
        Ok(())
    }

    /// The CUDA step's streaming scheme (for `fegpu bench lbm` and the tests).
    pub fn set_scheme(&self, scheme: Scheme) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        st.settle(gpu)?;
        with_populations!(&mut st.storage, p => p.use_scheme(gpu, scheme))?;
        st.scheme = scheme;
        Ok(())
    }

    /// One flag per site (x fastest); values FLUID, WALL, MOVING_WALL,
    /// VELOCITY_BC, PRESSURE_BC. The open boundary sites start at rho 1,
    /// u 0 (`set_boundary_values` prescribes theirs).
    pub fn set_flags(&self, flags: &[u8]) -> Result<()> {
        let mut st = self.state()?;
        check_flags(flags, st.params.sites())?;
        let gpu = self.ctx.gpu();
        st.settle(gpu)?;
        let open = Open::new(gpu, flags)?;
        let State { params, flags: current, open: current_open, .. } = &mut *st;
        match (current, gpu) {
            (Buffer::Host(h), _) => h.copy_from_slice(flags),
            (Buffer::Device(d), Some(g)) => {
                g.upload(flags, d, 0)?;
                cuda::mark_bulk(g, params, d)?
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        *current_open = open;
        Ok(())
    }

    /// The prescribed (rho, ux, uy, uz) of every open boundary site (flags
    /// VELOCITY_BC and PRESSURE_BC), 4 values a site, the sites in
    /// increasing order (x fastest): a velocity site uses u, a pressure site
    /// rho (its pressure is rho / 3).
    pub fn set_boundary_values(&self, values: &[f64]) -> Result<()> {
        let mut st = self.state()?;
        check_boundary_values(values, st.open.list.sites.len())?;
        let gpu = self.ctx.gpu();
        st.settle(gpu)?;
        st.open.table.copy_from_slice(values);
        match gpu {
            Some(g) => st.open.upload(g),
            None => Ok(()),
        }
    }

    pub fn set_force(&self, force: [f64; 3]) -> Result<()> {
        self.state()?.params.force = lattice_force(force)?;
        Ok(())
    }

    /// TRT collision with magic parameter `magic` > 0 (3/16 puts halfway
    /// bounce-back walls exactly midway for Poiseuille flow; 1/4 is the most
    /// stable), or BGK again with 0.
    pub fn set_trt(&self, magic: f64) -> Result<()> {
        if !(magic >= 0.0 && magic.is_finite()) {
            return Err(Error::invalid(format!("magic = {magic}: TRT needs a finite magic parameter > 0 (0 selects BGK)")));
        }
        self.state()?.params.magic = magic;
        Ok(())
    }

    pub fn set_wall_velocity(&self, u: [f64; 3]) -> Result<()> {
        let u = lattice_velocity("wall_velocity", u)?;
        let mut st = self.state()?;
        st.settle(self.ctx.gpu())?;
        st.params.wall_velocity = u;
        Ok(())
    }

    /// Every site (walls included) at the equilibrium of (rho, u).
    pub fn init_equilibrium(&self, rho: f64, u: [f64; 3]) -> Result<()> {
        if !(rho > 0.0 && rho.is_finite()) {
            return Err(Error::invalid(format!("rho = {rho}: must be finite and > 0")));
        }
        lattice_velocity("u", u)?;
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let p = st.storage.precision();
        if let Some(i) = (0..Q).find(|&i| !p.holds(cpu::equilibrium_of(i, rho, u), W[i])) {
            return Err(Error::invalid(format!(
                "rho = {rho}: its equilibrium population f({i}) = {:e} is beyond what {} storage holds",
                cpu::equilibrium_of(i, rho, u),
                p.name()
            )));
        }
        let n = st.params.sites();
        with_populations!(&mut st.storage, p => p.equilibrium(gpu, n, rho, u))
    }

    /// The caller's populations, f(0:18, nx, ny, nz), direction fastest.
    pub fn set_populations(&self, f: &[f64]) -> Result<()> {
        let params = self.params();
        let [nx, ny, _] = params.dims;
        check_populations(f, params.sites(), [nx, ny])?;
        self.set_populations_of(0, f)
    }

    /// The populations of the sites from `first` on (f.len() / 19 of
    /// them), checked by the caller.
    pub(crate) fn set_populations_of(&self, first: usize, f: &[f64]) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let p = st.storage.precision();
        if let Some(k) = (0..f.len()).find(|&k| !p.holds(f[k], W[k % Q])) {
            // named in the caller's array (a distributed rank's starts at its own planes)
            let [nx, ny, _] = st.params.dims;
            let at = population_at(k, [nx, ny]);
            return Err(Error::invalid(format!("{at} = {:e}: beyond what {} storage holds", f[k], p.name())));
        }
        let (s, storage) = st.split(gpu);
        with_populations!(storage, p => p.upload(&s, (first, f.len() / Q), f))
    }

    pub fn populations(&self, f: &mut [f64]) -> Result<()> {
        let n = self.params().sites();
        if f.len() != n * Q {
            return Err(Error::size(format!("f: room for {} values, the lattice has {n} sites x 19 directions", f.len())));
        }
        self.populations_of(0, f)
    }

    /// The populations after streaming of the sites from `first` on (f.len() / 19 of them).
    pub(crate) fn populations_of(&self, first: usize, f: &mut [f64]) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let (s, storage) = st.split(gpu);
        with_populations!(storage, p => p.download(&s, (first, f.len() / Q), f))
    }

    /// `count` collide-and-stream steps, queued without waiting for the device.
    pub fn step(&self, count: u64) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let (s, storage) = st.split(gpu);
        with_populations!(storage, p => p.step(&s, count))
    }

    /// One step of the sites `edges`, then `Gpu::fork_side`, then the sites
    /// `inner`, the others left as they are: a split lattice's owned planes,
    /// whose swap (side work the caller queues next, then joins) overwrites
    /// the ghost planes while the inner planes step. CUDA with a two-buffer
    /// scheme only.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
    pub(crate) fn step_edges_first(&self, edges: &[(usize, usize)], inner: (usize, usize)) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let (s, storage) = st.split(gpu);
        with_populations!(storage, p => p.step_edges_first(&s, edges, inner))
    }

    /// The body whose force `body_force` reports: one value per site (x
    /// fastest), nonzero where the site belongs to it. Only its wall sites
    /// (FLUID and open boundary sites are passed over) feel a force.
    pub fn set_body(&self, body: &[u8]) -> Result<()> {
        let n = self.params().sites();
        if body.len() != n {
            return Err(Error::size(format!("body: {} values for {n} sites", body.len())));
        }
        let list = SiteList::new(self.ctx.gpu(), n, |s| body[s] != 0)?;
        self.state()?.body = Some(list);
        Ok(())
    }

    /// The force the fluid exerts on the body (`set_body`) by momentum
    /// exchange over the links from fluid sites into its wall sites, from
    /// the populations of the last step: sum of c_i (post_i + bounced-back
    /// population) over the links. At a moving wall Ladd's term uses the
    /// fluid site's present density. In lattice units (mass 1 = density 1
    /// in one site; force per step).
    pub fn body_force(&self) -> Result<[f64; 3]> {
        self.body_force_from(0, self.params().sites())
    }

    /// `body_force` over the links from the fluid sites first..end-1 only.
    pub(crate) fn body_force_from(&self, first: usize, end: usize) -> Result<[f64; 3]> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let body = st.body.take().ok_or_else(|| Error::invalid("no body: give its sites with set_body first"))?;
        let (s, storage) = st.split(gpu);
        let force = with_populations!(storage, p => p.body_force(&s, &body, (first, end)));
        st.body = Some(body);
        force
    }

    /// The stored populations of `count` sites from `first` in the
    /// directions of the bit mask `dirs` into `out` (a run of count a
    /// direction; bytes of the storage type, 8-byte aligned), in the state
    /// they stand in: a split lattice's planes, sent to the neighbouring rank.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
    pub(crate) fn pack_sites(&self, (first, count): (usize, usize), dirs: u32, out: &mut [u8]) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        with_populations!(&mut st.storage, p => p.raw_sites(gpu, (first, count), dirs, typed_mut(out)?))
    }

    /// `pack_sites` on the device, into device memory at `address` (a
    /// neighbouring rank's, mapped), or with `unpack` the reverse: queued,
    /// not waited for.
    ///
    /// # Safety
    /// `address` must hold count x (directions in `dirs`) stored populations.
    #[cfg(feature = "mpi")]
    pub(crate) unsafe fn planes_at(&self, (first, count): (usize, usize), dirs: u32, address: u64, unpack: bool) -> Result<()> {
        let g = self.ctx.device()?;
        let mut st = self.state()?;
        let len = count * dirs.count_ones() as usize;
        with_populations!(&mut st.storage, p => match &mut p.current {
            // SAFETY: as the caller guarantees.
            Buffer::Device(f) => {
                let mut there = unsafe { g.view_at(address, len) };
                cuda::planes(g, f, &mut there, (first, count), dirs, unpack)
            }
            Buffer::Host(_) => Err(crate::array::mixed_backends()),
        })
    }

    /// Overwrites `count` sites from `first` in the directions of `dirs`
    /// with what `pack_sites` of a lattice of the same storage and state gave.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
    pub(crate) fn unpack_sites(&self, (first, count): (usize, usize), dirs: u32, raw: &[u8]) -> Result<()> {
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        with_populations!(&mut st.storage, p => p.set_raw_sites(gpu, (first, count), dirs, typed(raw)?))
    }

    /// How many open boundary sites (VELOCITY_BC, PRESSURE_BC) lie in sites
    /// first..end-1: how many of `set_boundary_values`' sites they hold.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
    pub(crate) fn open_sites_between(&self, first: usize, end: usize) -> usize {
        let st = self.peek();
        let sites = &st.open.list.sites;
        sites.partition_point(|&s| (s as usize) < end) - sites.partition_point(|&s| (s as usize) < first)
    }

    /// Bytes a stored population takes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // used by the split lattice (src/dist/lattice.rs)
    pub(crate) fn population_bytes(&self) -> usize {
        self.peek().storage.precision().bytes()
    }

    /// The sites (first, count) of the z-slab z_first..z_first+z_count-1 (0-based planes).
    pub fn slab(&self, z_first: i64, z_count: i64) -> Result<(usize, usize)> {
        let [nx, ny, nz] = self.params().dims;
        if z_first < 0 || z_count < 1 || z_first.saturating_add(z_count) > nz as i64 {
            return Err(Error::invalid(format!(
                "z_first = {z_first}, z_count = {z_count}: the slab must lie within the lattice's {nz} planes"
            )));
        }
        Ok((nx * ny * z_first as usize, nx * ny * z_count as usize))
    }

    /// Density (rho) and velocity (u, 3 per site) of the z-slab z_first..z_first+z_count-1 (0-based).
    pub fn fields(&self, z_first: i64, z_count: i64, rho: &mut [f64], u: &mut [f64]) -> Result<()> {
        self.fields_written(z_first, z_count, rho, u)?;
        diverged(z_first, self.params().dims, rho, u)
    }

    /// `fields` without the divergence check (a split lattice names the global plane itself).
    pub(crate) fn fields_written(&self, z_first: i64, z_count: i64, rho: &mut [f64], u: &mut [f64]) -> Result<()> {
        let (first, count) = self.slab(z_first, z_count)?;
        if rho.len() != count || u.len() != 3 * count {
            return Err(Error::size(format!(
                "rho/u: room for {}/{} values, the slab has {count} sites (rho {count}, u 3 x {count})",
                rho.len(),
                u.len()
            )));
        }
        let gpu = self.ctx.gpu();
        let mut st = self.state()?;
        let (s, storage) = st.split(gpu);
        with_populations!(storage, p => p.fields(&s, first, rho, u))
    }
}

/// A Breakdown naming the first site of the slab (planes from `z_first`)
/// whose density or velocity is not finite: the run diverged (the fields
/// stay written, NaN and all, for the caller to look at).
pub(crate) fn diverged(z_first: i64, [nx, ny, _]: [usize; 3], rho: &[f64], u: &[f64]) -> Result<()> {
    let Some(k) = (0..rho.len()).find(|&k| !(rho[k].is_finite() && u[3 * k..3 * k + 3].iter().all(|v| v.is_finite()))) else {
        return Ok(());
    };
    let (x, y, z) = (k % nx, k / nx % ny, z_first + (k / (nx * ny)) as i64);
    Err(Error::new(
        ErrorKind::Breakdown,
        format!(
            "the lattice diverged: rho = {}, u = {:?} at site (x, y, z) = ({x}, {y}, {z}) (0-based; ({}, {}, {}) \
             1-based): lower the force or the velocities, or raise tau",
            rho[k],
            &u[3 * k..3 * k + 3],
            x + 1,
            y + 1,
            z + 1
        ),
    ))
}

/// What the C and Fortran surfaces call on a lattice: one process's
/// (`Lattice`), or one split over MPI ranks in z-slabs
/// (`dist::DistLattice`), whose calls are collective and whose sites,
/// flags, populations and fields are the rank's own planes.
pub trait LatticeApi: Send + Sync {
    /// (nx, ny, nz) of the whole lattice (a split one's too).
    fn dims(&self) -> [usize; 3];
    /// The sites (first, count) of planes z_first..z_first+z_count-1
    /// (0-based, global), checked against the planes this process holds.
    fn slab(&self, z_first: i64, z_count: i64) -> Result<(usize, usize)>;
    fn set_flags(&self, flags: &[u8]) -> Result<()>;
    fn set_boundary_values(&self, values: &[f64]) -> Result<()>;
    fn set_force(&self, force: [f64; 3]) -> Result<()>;
    fn set_trt(&self, magic: f64) -> Result<()>;
    fn set_wall_velocity(&self, u: [f64; 3]) -> Result<()>;
    fn init_equilibrium(&self, rho: f64, u: [f64; 3]) -> Result<()>;
    fn set_populations(&self, f: &[f64]) -> Result<()>;
    fn populations(&self, f: &mut [f64]) -> Result<()>;
    fn step(&self, count: u64) -> Result<()>;
    fn fields(&self, z_first: i64, z_count: i64, rho: &mut [f64], u: &mut [f64]) -> Result<()>;
    fn set_body(&self, body: &[u8]) -> Result<()>;
    fn body_force(&self) -> Result<[f64; 3]>;
}

/// The trait's methods, each the inherent method of the same name.
macro_rules! inherent {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> $ret { Lattice::$name(self, $($arg),*) })*
    };
}

impl LatticeApi for Lattice {
    fn dims(&self) -> [usize; 3] {
        self.params().dims
    }
    inherent! {
        slab(z_first: i64, z_count: i64) -> Result<(usize, usize)>;
        set_flags(flags: &[u8]) -> Result<()>;
        set_boundary_values(values: &[f64]) -> Result<()>;
        set_force(force: [f64; 3]) -> Result<()>;
        set_trt(magic: f64) -> Result<()>;
        set_wall_velocity(u: [f64; 3]) -> Result<()>;
        init_equilibrium(rho: f64, u: [f64; 3]) -> Result<()>;
        set_populations(f: &[f64]) -> Result<()>;
        populations(f: &mut [f64]) -> Result<()>;
        step(count: u64) -> Result<()>;
        fields(z_first: i64, z_count: i64, rho: &mut [f64], u: &mut [f64]) -> Result<()>;
        set_body(body: &[u8]) -> Result<()>;
        body_force() -> Result<[f64; 3]>;
    }
}
