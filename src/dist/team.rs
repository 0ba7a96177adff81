//! The device-direct path of a distributed matrix on CUDA: when every rank
//! is on one node (each its own GPU, or sharing GPUs under MPS), each rank
//! exports a region of device memory (CUDA IPC) and maps all the others'.
//! A product then writes the values each neighbour needs straight into the
//! neighbour's halo (kernels/krylov.cu `halo_send`), and a device-driven CG or BiCGSTAB
//! sums every reduction over the ranks on the device (kernels/common.cuh
//! `team_sums`): the scalars never visit the host, and an iteration replays
//! as a CUDA graph, as in one process. Elsewhere the halo goes through host
//! buffers and MPI, and the reductions through MPI_Allreduce.

use super::comm::Comm;
use crate::error::Result;
use crate::gpu::{Borrowed, DeviceBuffer, Gpu, KernelArg, PeerRegion, SharedRegion, HANDLE_BYTES};
use crate::krylov::cuda::SOURCE;

/// kernels/common.cuh's TEAM_RING and TeamWord.
const RING: usize = 4;
const MAIL_BYTES: usize = 32;
const REGION_WORD: usize = 8;

/// FEGPU_DIST_EXCHANGE=host keeps the halo and the reductions on the host
/// path; =nccl sends a matrix's halo through NCCL even within a node.
pub const EXCHANGE_VAR: &str = "FEGPU_DIST_EXCHANGE";

pub struct Team {
    /// The team table (kernels/common.cuh `TeamWord`).
    table: DeviceBuffer<u64>,
    /// halo_send's count of finished blocks.
    counter: DeviceBuffer<u32>,
    /// Held for the team's life: the other ranks' regions mapped here, and
    /// this rank's own (dropped last: the table and the halo point into it).
    _peers: Vec<PeerRegion>,
    _region: SharedRegion,
}

/// How a distributed object's device buffers may travel between its ranks.
pub enum Route {
    /// Device to device through CUDA IPC within the node (a team).
    Team,
    /// Through NCCL, for objects that have such a path; the reason there is
    /// no team (the ranks span several nodes, or FEGPU_DIST_EXCHANGE=nccl).
    Nccl(String),
    /// Through the host, and why.
    Host(String),
}

/// Collective: the route the ranks' placement allows (each may still fail
/// to build, then the host path is taken). FEGPU_DIST_EXCHANGE is read on
/// every rank and must agree: mpiexec may not pass it to other nodes.
pub fn route(comm: &Comm, g: Option<&Gpu>) -> Route {
    let asked = match std::env::var(EXCHANGE_VAR).as_deref() {
        Ok("host") => 1,
        Ok("nccl") => 2,
        _ => 0,
    };
    let on_gpu = g.map_or([-1, 0], |g| [g.info.ordinal as i64, i64::from(g.mps_enabled())]);
    let [devices, mps, asks] = comm.gather_all([on_gpu[0], on_gpu[1], asked]);
    if let Some(r) = asks.iter().position(|&a| a != asks[0]) {
        return Route::Host(format!("{EXCHANGE_VAR} differs between rank 0 and rank {r} (pass it to every rank: mpiexec -x)"));
    }
    if asked == 1 {
        return Route::Host(format!("{EXCHANGE_VAR}=host"));
    }
    if devices.contains(&-1) {
        return Route::Host("not every rank is on a GPU".into());
    }
    let one_node = comm.node_size() == comm.size;
    let shared = one_node && (1..devices.len()).any(|r| devices[..r].contains(&devices[r]));
    if asked == 2 {
        return match shared {
            true => Route::Host(format!("{EXCHANGE_VAR}=nccl, but ranks share a GPU, which NCCL refuses")),
            false => Route::Nccl(format!("{EXCHANGE_VAR}=nccl")),
        };
    }
    if !one_node {
        return Route::Nccl("the ranks span several nodes".into());
    }
    if shared && mps.contains(&0) {
        return Route::Host("ranks share a GPU without MPS, so their kernels would take turns".into());
    }
    Route::Team
}

/// Why the ranks cannot form a team (None: they can try).
pub fn unsuitable(comm: &Comm, g: Option<&Gpu>) -> Option<String> {
    match route(comm, g) {
        Route::Team => None,
        Route::Nccl(why) | Route::Host(why) => Some(why),
    }
}

impl Team {
    /// Collective: the regions exported and mapped, the table written.
    /// `recv_from` and `send_to` are the matrix's exchange runs (rank,
    /// count), `halo_len` its halo's length. Returns the team and the halo,
    /// which lives in the rank's region so that neighbours can write it.
    pub fn new(
        comm: &Comm,
        g: &Gpu,
        recv_from: &[(usize, usize)],
        send_to: &[(usize, usize)],
        halo_len: usize,
    ) -> Result<(Team, Borrowed<f64>)> {
        let (rank, size) = (comm.rank, comm.size);
        let flags_at = RING * size * MAIL_BYTES;
        let halo_at = (flags_at + 8 * size).next_multiple_of(256);
        let everyone: Vec<usize> = (0..size).collect();
        let (region, peers, bases) = regions(comm, g, halo_at + 8 * halo_len.max(1), &everyone)?;
        // each source learns where its run starts in this rank's halo
        let mut counts = vec![0i32; size];
        let mut starts = Vec::with_capacity(recv_from.len());
        let mut at = 0;
        for &(r, count) in recv_from {
            counts[r] = 1;
            starts.push(at as i64);
            at += count;
        }
        let (offsets, _) = comm.all_to_all(&starts, &counts);
        let mut table = vec![rank as u64, size as u64, 0, 0, 0, send_to.len() as u64, recv_from.len() as u64];
        table.push(region.address() + flags_at as u64);
        table.extend(&bases);
        debug_assert_eq!(table.len(), REGION_WORD + size);
        let mut first = 0;
        for (&(d, count), &offset) in send_to.iter().zip(&offsets) {
            table.push(bases[d] + (halo_at + 8 * offset as usize) as u64);
            table.push(bases[d] + (flags_at + 8 * rank) as u64);
            table.extend([first as u64, count as u64]);
            first += count;
        }
        table.extend(recv_from.iter().map(|&(r, _)| r as u64));
        let built = (|| Ok((crate::sparse::cuda::upload(g, &table)?, g.zeros::<u32>(1)?)))();
        let (table, counter) = comm.agree(built)?;
        let halo = region.view::<f64>(g, halo_at, halo_len.max(1));
        Ok((Team { table, counter, _peers: peers, _region: region }, halo))
    }

    /// The table's address, which device-driven iterations keep in their
    /// scalars (`Scalar::TEAM`).
    pub fn address(&self, g: &Gpu) -> u64 {
        g.address(&self.table)
    }

    /// Queues the gather of x[rows] into the neighbours' halos (`count`
    /// values in all), counted in their flags; nothing once `sc` says stop.
    pub fn send(
        &self,
        g: &Gpu,
        x: &DeviceBuffer<f64>,
        rows: &DeviceBuffer<i32>,
        count: usize,
        sc: &DeviceBuffer<f64>,
    ) -> Result<()> {
        let f = g.kernel("krylov", SOURCE, "halo_send")?;
        let mut l = g.launcher(&f);
        l.arg(&self.table).arg(x).arg(rows).arg(&self.counter).arg(sc);
        g.launch("halo_send", l, (count.div_ceil(256).clamp(1, 264) as u32, 1, 1), (256, 1, 1), 0)
    }

    /// Queues the wait for every source's halo of this product.
    pub fn wait(&self, g: &Gpu, sc: &DeviceBuffer<f64>) -> Result<()> {
        let f = g.kernel("krylov", SOURCE, "halo_wait")?;
        let mut l = g.launcher(&f);
        l.arg(&self.table).arg(sc);
        g.launch("halo_wait", l, (1, 1, 1), (1, 1, 1), 0)
    }
}

/// This rank's region of `bytes` (zeroed) and the regions of `ranks`
/// mapped here, with their addresses in `ranks`' order (this rank's own
/// where it names itself). Collective: every rank builds or none does, so
/// a failure anywhere stops every rank before the next collective.
fn regions(comm: &Comm, g: &Gpu, bytes: usize, ranks: &[usize]) -> Result<(SharedRegion, Vec<PeerRegion>, Vec<u64>)> {
    let mut region = comm.agree(g.shared_region(bytes))?;
    let handle = comm.agree(region.handle())?;
    let words: [i64; HANDLE_BYTES / 8] =
        std::array::from_fn(|k| i64::from_le_bytes(handle[8 * k..8 * k + 8].try_into().unwrap_or_default()));
    let handles = comm.gather_all(words);
    let mut others: Vec<usize> = ranks.iter().copied().filter(|&r| r != comm.rank).collect();
    others.sort_unstable();
    others.dedup();
    let peers = comm.agree(
        others
            .iter()
            .map(|&r| {
                let mut h = [0u8; HANDLE_BYTES];
                for (k, w) in handles.iter().enumerate() {
                    h[8 * k..8 * k + 8].copy_from_slice(&w[r].to_le_bytes());
                }
                g.open_peer_region(&h, comm.rank)
            })
            .collect::<Result<Vec<_>>>(),
    )?;
    // the ranks this one maps map it too (every rank, or both neighbours)
    region.mapped_by(&others);
    let address = |r: usize| match others.binary_search(&r) {
        Ok(k) => peers[k].address(),
        Err(_) => region.address(),
    };
    let bases = ranks.iter().map(|&r| address(r)).collect();
    Ok((region, peers, bases))
}

/// A channel (kernels/krylov.cu `team_post`, `team_wait`): messages
/// counted in flags, each flag in the region of the rank it tells.
struct Channel(DeviceBuffer<u64>);

impl Channel {
    /// Posts count in `flags`; waits pass when every flag has reached the
    /// count less `lag`.
    fn new(g: &Gpu, lag: u64, flags: &[u64]) -> Result<Channel> {
        let mut table = vec![0, flags.len() as u64, lag, 0];
        table.extend(flags);
        Ok(Channel(crate::sparse::cuda::upload(g, &table)?))
    }

    fn queue(&self, g: &Gpu, name: &'static str) -> Result<()> {
        let f = g.kernel("krylov", SOURCE, name)?;
        let mut l = g.launcher(&f);
        l.arg(&self.0);
        g.launch(name, l, (1, 1, 1), (1, 1, 1), 0)
    }

    /// Which flag a wait gave up on (1-based; 0: none), waiting for the device.
    fn lost(&self, g: &Gpu) -> Result<u64> {
        let mut word = [0u64];
        g.download(&self.0, 3, &mut word)?;
        Ok(word[0])
    }
}

/// The split lattice's ghost-plane swap device to device: each rank's
/// region holds two slots, for the planes its neighbours below and above
/// send, and four flags: a slot's message arrived (from below, from
/// above), and a message of its own was taken from the neighbour's slot
/// (by below, by above). A step's swap: wait until the neighbours have
/// taken the last planes, write the bordering planes into their slots,
/// post; wait for theirs, copy them into the ghost planes, post.
pub struct PlaneSwap {
    /// (below's slot for this rank's lowest plane, above's slot for its highest).
    pub send: (Option<u64>, Option<u64>),
    /// This rank's slots: what below sent, what above sent.
    pub receive: (u64, u64),
    arrived: (Channel, Channel),
    taken: (Channel, Channel),
    _peers: Vec<PeerRegion>,
    _region: SharedRegion,
}

impl PlaneSwap {
    /// Collective. `neighbours`: the ranks below and above (None: a wall);
    /// `message`: the bytes of a plane's message.
    pub fn new(comm: &Comm, g: &Gpu, (below, above): (Option<usize>, Option<usize>), message: usize) -> Result<PlaneSwap> {
        const SLOTS_AT: usize = 256;
        let slot = message.next_multiple_of(256);
        let (mine, b, a) = (comm.rank, below.unwrap_or(comm.rank), above.unwrap_or(comm.rank));
        let (region, peers, bases) = regions(comm, g, SLOTS_AT + 2 * slot, &[mine, b, a])?;
        let (here, below_at, above_at) = (bases[0], bases[1], bases[2]);
        // flags: 0 from below arrived, 1 from above arrived, 2 taken by below, 3 taken by above
        let flag = |base: u64, k: u64| base + 8 * k;
        let pick =
            |pairs: [(Option<usize>, u64); 2]| pairs.iter().filter(|(r, _)| r.is_some()).map(|&(_, f)| f).collect::<Vec<_>>();
        let built = (|| {
            let arrived = (
                Channel::new(g, 0, &pick([(below, flag(below_at, 1)), (above, flag(above_at, 0))]))?,
                Channel::new(g, 0, &pick([(below, flag(here, 0)), (above, flag(here, 1))]))?,
            );
            let taken = (
                Channel::new(g, 0, &pick([(below, flag(below_at, 3)), (above, flag(above_at, 2))]))?,
                Channel::new(g, 1, &pick([(below, flag(here, 2)), (above, flag(here, 3))]))?,
            );
            Ok((arrived, taken))
        })();
        let (arrived, taken) = comm.agree(built)?;
        let at = SLOTS_AT as u64;
        Ok(PlaneSwap {
            send: (below.map(|_| below_at + at + slot as u64), above.map(|_| above_at + at)),
            receive: (here + at, here + at + slot as u64),
            arrived,
            taken,
            _peers: peers,
            _region: region,
        })
    }

    /// Queues the wait until the neighbours have taken this rank's last planes.
    pub fn wait_taken(&self, g: &Gpu) -> Result<()> {
        self.taken.1.queue(g, "team_wait")
    }

    /// Queues the post that this rank's planes are in the neighbours' slots.
    pub fn post_sent(&self, g: &Gpu) -> Result<()> {
        self.arrived.0.queue(g, "team_post")
    }

    /// Queues the wait for the neighbours' planes in this rank's slots.
    pub fn wait_arrived(&self, g: &Gpu) -> Result<()> {
        self.arrived.1.queue(g, "team_wait")
    }

    /// Queues the post that this rank has taken its neighbours' planes.
    pub fn post_taken(&self, g: &Gpu) -> Result<()> {
        self.taken.0.queue(g, "team_post")
    }

    /// After the queued swaps: an error if a wait gave up on a neighbour
    /// that did not answer for a minute.
    pub fn check(&self, g: &Gpu, (below, above): (Option<usize>, Option<usize>)) -> Result<()> {
        let sides: Vec<usize> = [below, above].into_iter().flatten().collect();
        for ch in [&self.arrived.1, &self.taken.1] {
            let lost = ch.lost(g)?;
            if lost > 0 {
                let r = sides.get(lost as usize - 1).copied().unwrap_or(usize::MAX);
                return Err(crate::error::Error::new(
                    crate::error::ErrorKind::Device,
                    format!("the ghost-plane swap waited a minute for rank {r}, which never answered (has it failed or left the step?)"),
                ));
            }
        }
        Ok(())
    }
}
