//! A D3Q19 lattice split over ranks in z-slabs, as a legacy MPI code
//! splits its grid: each rank owns the planes z_first..z_first+planes-1 of
//! the nx x ny x nz lattice and holds them in a local lattice with one
//! ghost plane below and one above. After every call that changes the
//! populations (a step, new flags, boundary values, populations) each rank
//! copies its lowest and highest owned planes, in storage form and in the
//! state they stand in, into its neighbours' ghost planes: all 19
//! populations on the CPU, whose step pushes, and on CUDA, whose step
//! pulls, the 5 that stream across. A site's step
//! reads only its own plane and the next ones, so every owned site steps
//! exactly as in the one-process lattice (bit for bit on the CPU backend);
//! what the local step writes into the ghost planes is overwritten by the
//! next swap. Where the z axis is not periodic, the ghost planes beyond the
//! end ranks are resting walls, which bounce back as the lattice's end
//! faces do.
//!
//! On CUDA, where the ranks share one node, the swap goes device to device
//! (`team.rs` `PlaneSwap`, CUDA IPC) and overlaps the step: the bordering
//! planes step first, then the swap runs on a second stream of high
//! priority while the planes between step, and the host waits for neither.
//! (The ghost planes are not stepped there: no owned site reads what a
//! step would write into them.) Elsewhere the swap goes through
//! page-locked host buffers and MPI after the whole step.
//!
//! The local lattice streams by pull on CUDA (push on the CPU): its state
//! between calls depends only on the calls made, all collective, so every
//! rank's ghost planes hold their neighbour's state in the same form. (The
//! in-place scheme settles on a read, which a rank may make alone.)

use super::team::{self, PlaneSwap};
use super::Comm;
use crate::context::Context;
use crate::error::{positive, Error, Result};
use crate::gpu::{Gpu, Pinned};
use crate::lbm::{
    check_boundary_values, check_flags, check_populations, directions_along_z, lattice_force, lattice_velocity, Lattice,
    LatticeApi, Precision, Scheme, ALL_DIRECTIONS, PERIODIC_Z, Q, WALL,
};
use std::sync::{Arc, Mutex};

/// How the ghost planes travel between ranks (reported to the caller).
pub const EXCHANGE_PATH: &str = "MPI point-to-point through host buffers";

pub struct DistLattice {
    pub comm: Arc<Comm>,
    local: Lattice,
    /// nx, ny, nz of the whole lattice.
    pub dims: [usize; 3],
    /// This rank's first owned plane (0-based) and how many it owns.
    pub z_first: usize,
    pub planes: usize,
    /// The ranks whose planes border this rank's below and above (None: an
    /// end of a non-periodic z axis).
    neighbours: (Option<usize>, Option<usize>),
    /// Host buffers of the population swap.
    staging: Mutex<Staging>,
    /// The swap device to device (CUDA, the ranks on one node), or why not.
    device_swap: std::result::Result<PlaneSwap, String>,
}

/// The host side of the population swap: the planes sent down and up and
/// those received from below and above, `bytes` each; page-locked on CUDA
/// so the copies run at full speed. Whole 8-byte words, so they hold any
/// storage type aligned.
struct Staging {
    bytes: usize,
    words: [HostWords; 4],
}

enum HostWords {
    Pinned(Pinned<u64>),
    Plain(Vec<u64>),
}

impl HostWords {
    fn new(gpu: Option<&Gpu>, bytes: usize) -> Result<HostWords> {
        let words = bytes.div_ceil(8).max(1);
        Ok(match gpu {
            Some(g) => HostWords::Pinned(g.pinned::<u64>(words)?),
            None => HostWords::Plain(vec![0; words]),
        })
    }

    /// The first `bytes` bytes.
    fn bytes(&mut self, bytes: usize) -> Result<&mut [u8]> {
        let words: &mut [u64] = match self {
            HostWords::Pinned(p) => p.as_mut_slice()?,
            HostWords::Plain(v) => v,
        };
        if bytes > 8 * words.len() {
            return Err(Error::internal(format!("{bytes} bytes asked of a {}-word staging buffer", words.len())));
        }
        // SAFETY: u64 words viewed as their bytes, `bytes` of them within.
        Ok(unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), bytes) })
    }
}

impl DistLattice {
    /// Collective: every rank passes the same lattice and its own slab; the
    /// slabs, in rank order, must tile the nz planes.
    pub fn new(
        comm: Arc<Comm>,
        ctx: Arc<Context>,
        dims: [i64; 3],
        (z_first, planes): (i64, i64),
        precision: Precision,
        tau: f64,
        periodic: i32,
    ) -> Result<DistLattice> {
        let same = [dims[0] as f64, dims[1] as f64, dims[2] as f64, tau, periodic as f64, precision.bytes() as f64];
        comm.same_everywhere("(nx, ny, nz, tau, periodic, storage bytes)", &same)?;
        let [firsts, counts] = comm.gather_all([z_first, planes]);
        comm.agree(tiles(&firsts, &counts, dims[2], comm.rank))?;
        let dims = [positive("nx", dims[0])?, positive("ny", dims[1])?, positive("nz", dims[2])?];
        let (z_first, planes) = (z_first as usize, planes as usize);
        let (rank, size) = (comm.rank, comm.size);
        let wraps = periodic & PERIODIC_Z != 0;
        let below = if rank > 0 { Some(rank - 1) } else { wraps.then_some(size - 1) };
        let above = if rank + 1 < size { Some(rank + 1) } else { wraps.then_some(0) };
        let local = comm.agree((|| {
            let local_dims = [dims[0] as i64, dims[1] as i64, planes as i64 + 2];
            let l = Lattice::new(ctx.clone(), local_dims, precision, tau, periodic & !PERIODIC_Z)?;
            if ctx.gpu().is_some() {
                l.set_scheme(Scheme::Pull)?;
            }
            Ok(l)
        })())?;
        let plane = dims[0] * dims[1];
        let bytes = plane * local.population_bytes() * swapped_directions(ctx.gpu().is_some(), 1).count_ones() as usize;
        let words = comm.agree((|| {
            let w = |_| HostWords::new(ctx.gpu(), bytes);
            Ok([w(0)?, w(1)?, w(2)?, w(3)?])
        })())?;
        let device_swap = match (team::unsuitable(&comm, ctx.gpu()), ctx.gpu()) {
            (None, Some(g)) => PlaneSwap::new(&comm, g, (below, above), bytes).map_err(|e| format!("CUDA IPC: {}", e.message)),
            (Some(why), Some(_)) => Err(why),
            (_, None) => Err(String::new()), // the CPU backend: host arrays and MPI
        };
        let d = DistLattice {
            comm,
            local,
            dims,
            z_first,
            planes,
            neighbours: (below, above),
            staging: Mutex::new(Staging { bytes, words }),
            device_swap,
        };
        d.set_flags(&vec![0; plane * planes])?;
        Ok(d)
    }

    fn plane(&self) -> usize {
        self.dims[0] * self.dims[1]
    }

    /// This rank's own sites in the local lattice: (first, count).
    fn own(&self) -> (usize, usize) {
        (self.plane(), self.plane() * self.planes)
    }

    /// The own planes that border the neighbours (the lowest and highest;
    /// one when the rank owns one) and those between, as (first, count) sites.
    fn edges_and_inner(&self) -> ([(usize, usize); 2], (usize, usize)) {
        let plane = self.plane();
        let highest = if self.planes > 1 { (plane * self.planes, plane) } else { (0, 0) };
        ([(plane, plane), highest], (2 * plane, plane * self.planes.saturating_sub(2)))
    }

    /// Swaps boundary planes with the neighbours: `lowest` and `highest`
    /// are this rank's own first and last planes; returns what the
    /// neighbours sent, for the ghost planes below and above (None: no
    /// neighbour there).
    fn swap<T: mpi::traits::Equivalence + Clone + Default>(
        &self,
        lowest: &[T],
        highest: &[T],
        lengths: (usize, usize),
    ) -> (Option<Vec<T>>, Option<Vec<T>>) {
        let (below, above) = self.neighbours;
        let mut from_below = vec![T::default(); if below.is_some() { lengths.0 } else { 0 }];
        let mut from_above = vec![T::default(); if above.is_some() { lengths.1 } else { 0 }];
        self.comm.swap_planes(self.neighbours, (lowest, highest), (&mut from_below, &mut from_above));
        (below.map(|_| from_below), above.map(|_| from_above))
    }

    /// The directions of the populations a ghost plane needs from the
    /// neighbour beyond it, for a neighbour lying `side` (-1 below, +1
    /// above): on the CPU, whose step pushes, all 19 (the ghost site
    /// collides and pushes into the owned plane); on CUDA, whose step pulls,
    /// only the 5 that stream from the ghost plane into the owned one.
    fn directions_from(&self, side: i32) -> u32 {
        swapped_directions(self.local.ctx.gpu().is_some(), side)
    }

    /// Copies the lowest and highest owned planes' populations (those the
    /// neighbours' ghost planes need) into the neighbours' ghost planes.
    /// Collective.
    pub fn exchange(&self) -> Result<()> {
        self.exchange_after(Ok(()))?;
        self.check_swaps()
    }

    /// An error on every rank if a device-to-device swap gave up waiting
    /// for a neighbour (waits for the queued swaps).
    fn check_swaps(&self) -> Result<()> {
        match &self.device_swap {
            Ok(swap) => self.comm.agree(self.local.ctx.device().and_then(|g| swap.check(g, self.neighbours))),
            Err(_) => Ok(()),
        }
    }

    /// `exchange` after a local step whose outcome is `done`, agreed on
    /// with the packing in one reduction. Device to device, it is queued
    /// only: nothing waits on the host.
    fn exchange_after(&self, done: Result<()>) -> Result<()> {
        if let Ok(swap) = &self.device_swap {
            return self.comm.agree(done.and_then(|()| self.swap_on_device(swap)));
        }
        let (plane, top) = (self.plane(), self.plane() * self.planes);
        let (downward, upward) = (self.directions_from(1), self.directions_from(-1));
        let mut staging = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = staging.bytes;
        let views = staging.words.each_mut().map(|w| w.bytes(bytes));
        let packed = done.and_then(|()| {
            let [down, up, from_below, from_above] = views;
            let (down, up) = (down?, up?);
            self.local.pack_sites((plane, plane), downward, down)?;
            self.local.pack_sites((top, plane), upward, up)?;
            Ok([down, up, from_below?, from_above?])
        });
        let [down, up, from_below, from_above] = self.comm.agree(packed)?;
        self.comm.swap_planes(self.neighbours, (&*down, &*up), (&mut *from_below, &mut *from_above));
        let (below, above) = self.neighbours;
        let stored = (|| {
            if below.is_some() {
                self.local.unpack_sites((0, plane), upward, from_below)?;
            }
            if above.is_some() {
                self.local.unpack_sites((top + plane, plane), downward, from_above)?;
            }
            Ok(())
        })();
        self.comm.agree(stored)
    }

    /// Queues the swap device to device (`PlaneSwap`): the bordering planes
    /// written into the neighbours' slots once they have taken the last
    /// ones, then theirs copied from this rank's slots into the ghost planes.
    fn swap_on_device(&self, swap: &PlaneSwap) -> Result<()> {
        let g = self.local.ctx.device()?;
        let (plane, top) = (self.plane(), self.plane() * self.planes);
        let (downward, upward) = (self.directions_from(1), self.directions_from(-1));
        let (below, above) = self.neighbours;
        swap.wait_taken(g)?;
        // SAFETY: the slots hold a plane's message of these directions (PlaneSwap::new's `message`).
        unsafe {
            if let Some(slot) = swap.send.0 {
                self.local.planes_at((plane, plane), downward, slot, false)?;
            }
            if let Some(slot) = swap.send.1 {
                self.local.planes_at((top, plane), upward, slot, false)?;
            }
            swap.post_sent(g)?;
            swap.wait_arrived(g)?;
            if below.is_some() {
                self.local.planes_at((0, plane), upward, swap.receive.0, true)?;
            }
            if above.is_some() {
                self.local.planes_at((top + plane, plane), downward, swap.receive.1, true)?;
            }
        }
        swap.post_taken(g)
    }

    /// A per-site byte array of the own planes (flags, a body mask) with
    /// the neighbours' bordering planes around it; `beyond` fills a ghost
    /// plane with no neighbour.
    fn with_ghosts(&self, own: &[u8], beyond: u8) -> Vec<u8> {
        let plane = self.plane();
        let (below, above) = self.swap(&own[..plane], &own[own.len() - plane..], (plane, plane));
        let mut local = below.unwrap_or_else(|| vec![beyond; plane]);
        local.extend_from_slice(own);
        local.extend(above.unwrap_or_else(|| vec![beyond; plane]));
        local
    }

    /// A description: the ranks, this rank's planes and the exchange path.
    pub fn describe(&self) -> String {
        let [nx, ny, nz] = self.dims;
        format!(
            "{nx} x {ny} x {nz} lattice over {} ranks; rank {} owns planes {}..{} ({} planes), swaps {} bytes a plane with \
             {} below and {} above, each way; exchange: {}",
            self.comm.size,
            self.comm.rank,
            self.z_first + 1,
            self.z_first + self.planes,
            self.planes,
            self.local.population_bytes() * self.plane() * self.directions_from(1).count_ones() as usize,
            side(self.neighbours.0),
            side(self.neighbours.1),
            match &self.device_swap {
                Ok(_) => "device to device through CUDA IPC within the node".into(),
                Err(why) if why.is_empty() => EXCHANGE_PATH.to_string(),
                Err(why) => format!("{EXCHANGE_PATH} (no device-direct path: {why})"),
            }
        )
    }
}

/// `DistLattice::directions_from`, on CUDA or not.
fn swapped_directions(cuda: bool, side: i32) -> u32 {
    if cuda {
        directions_along_z(-side)
    } else {
        ALL_DIRECTIONS
    }
}

fn side(neighbour: Option<usize>) -> String {
    neighbour.map_or("the wall".into(), |r| format!("rank {r}"))
}

/// The slabs (first planes, counts, in rank order) tile 0..nz.
fn tiles(firsts: &[i64], counts: &[i64], nz: i64, rank: usize) -> Result<()> {
    let mut next = 0;
    for (r, (&f, &c)) in firsts.iter().zip(counts).enumerate() {
        if c < 1 {
            return Err(Error::invalid(format!("rank {r} owns {c} planes: every rank owns at least one (nz_own >= 1)")));
        }
        if f != next {
            let mine = if r == rank { " (this rank)" } else { "" };
            return Err(Error::invalid(format!(
                "rank {r}{mine} starts at plane {} but the ranks before it end at plane {next}: the slabs, in rank order, \
                 must tile planes 1..nz with no gap or overlap",
                f + 1
            )));
        }
        // counts past nz are refused below, not wrapped
        next = f.saturating_add(c);
    }
    if next != nz {
        return Err(Error::invalid(format!("the slabs cover planes 1..{next}, the lattice has nz = {nz}")));
    }
    Ok(())
}

impl LatticeApi for DistLattice {
    fn dims(&self) -> [usize; 3] {
        self.dims
    }
    fn slab(&self, z_first: i64, z_count: i64) -> Result<(usize, usize)> {
        let (first, last) = (self.z_first as i64, (self.z_first + self.planes) as i64);
        if z_first < first || z_count < 1 || z_first.saturating_add(z_count) > last {
            return Err(Error::invalid(format!(
                "z_first = {}, z_count = {z_count}: the slab must lie within this rank's planes {}..{last}",
                z_first + 1,
                first + 1
            )));
        }
        Ok((self.plane() * (z_first - first) as usize, self.plane() * z_count as usize))
    }

    fn set_flags(&self, flags: &[u8]) -> Result<()> {
        self.comm.agree(check_flags(flags, self.own().1))?;
        let local = self.with_ghosts(flags, WALL);
        self.comm.agree(self.local.set_flags(&local))?;
        self.exchange()
    }

    fn set_boundary_values(&self, values: &[f64]) -> Result<()> {
        // the local lattice's open sites, plane by plane: ghost, own planes, ghost
        let (plane, (first, count)) = (self.plane(), self.own());
        let open = |from: usize, to: usize| self.local.open_sites_between(from, to);
        let (ghost_below, ghost_above) = (open(0, plane), open(first + count, first + count + plane));
        self.comm.agree(check_boundary_values(values, open(first, first + count)))?;
        // the open sites of the lowest and highest owned planes, 4 values each
        let lowest = 4 * open(first, first + plane);
        let highest = 4 * open(first + count - plane, first + count);
        let (below, above) = self.swap(&values[..lowest], &values[values.len() - highest..], (4 * ghost_below, 4 * ghost_above));
        let mut table = below.unwrap_or_default();
        table.extend_from_slice(values);
        table.extend(above.unwrap_or_default());
        self.comm.agree(self.local.set_boundary_values(&table))?;
        self.exchange()
    }

    fn set_force(&self, force: [f64; 3]) -> Result<()> {
        self.comm.agree(lattice_force(force).map(|_| ()))?;
        self.comm.same_everywhere("force", &force)?;
        self.local.set_force(force)
    }

    fn set_trt(&self, magic: f64) -> Result<()> {
        self.comm.same_everywhere("magic", &[magic])?;
        self.comm.agree(self.local.set_trt(magic))
    }

    fn set_wall_velocity(&self, u: [f64; 3]) -> Result<()> {
        self.comm.agree(lattice_velocity("wall_velocity", u).map(|_| ()))?;
        self.comm.same_everywhere("wall_velocity", &u)?;
        self.comm.agree(self.local.set_wall_velocity(u))?;
        self.exchange()
    }

    fn init_equilibrium(&self, rho: f64, u: [f64; 3]) -> Result<()> {
        self.comm.same_everywhere("(rho, u)", &[rho, u[0], u[1], u[2]])?;
        self.comm.agree(self.local.init_equilibrium(rho, u))?;
        self.exchange()
    }

    fn set_populations(&self, f: &[f64]) -> Result<()> {
        self.comm.agree(check_populations(f, self.own().1, [self.dims[0], self.dims[1]]))?;
        self.comm.agree(self.local.set_populations_of(self.own().0, f))?;
        self.exchange()
    }

    fn populations(&self, f: &mut [f64]) -> Result<()> {
        let n = self.own().1;
        if f.len() != n * Q {
            return Err(Error::size(format!(
                "f: room for {} values, this rank's planes have {n} sites x 19 directions",
                f.len()
            )));
        }
        self.local.populations_of(self.own().0, f)
    }

    fn step(&self, count: u64) -> Result<()> {
        self.comm.same_everywhere("steps", &[count as f64])?;
        for _ in 0..count {
            match (&self.device_swap, self.local.ctx.gpu()) {
                // device to device, the swap overlaps the inner planes' step
                (Ok(swap), Some(g)) => {
                    let (edges, inner) = self.edges_and_inner();
                    let stepped = self.local.step_edges_first(&edges, inner);
                    let swapped = self.comm.agree(stepped.and_then(|()| g.on_side(|| self.swap_on_device(swap))));
                    g.join_side()?;
                    swapped?;
                }
                _ => self.exchange_after(self.local.step(1))?,
            }
        }
        self.check_swaps()
    }

    fn fields(&self, z_first: i64, z_count: i64, rho: &mut [f64], u: &mut [f64]) -> Result<()> {
        self.slab(z_first, z_count)?;
        // the local lattice's planes start one ghost plane below; it checks rho's and u's sizes
        self.local.fields_written(z_first - self.z_first as i64 + 1, z_count, rho, u)?;
        crate::lbm::diverged(z_first, self.dims(), rho, u)
    }

    fn set_body(&self, body: &[u8]) -> Result<()> {
        let n = self.own().1;
        let size = if body.len() == n { Ok(()) } else { Err(Error::size(format!("body: {} values for {n} sites", body.len()))) };
        self.comm.agree(size)?;
        // the ghost planes' body sites too: a link from an owned fluid site may end there
        let local = self.with_ghosts(body, 0);
        self.comm.agree(self.local.set_body(&local))
    }

    fn body_force(&self) -> Result<[f64; 3]> {
        let (first, count) = self.own();
        let mut force = self.comm.agree(self.local.body_force_from(first, first + count))?;
        crate::krylov::GlobalSum::sum(&*self.comm, &mut force)?;
        Ok(force)
    }
}
