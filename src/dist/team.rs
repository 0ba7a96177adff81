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

/// FEGPU_DIST_EXCHANGE=host keeps the halo and the reductions on the host path.
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

/// Why a matrix's ranks cannot go device to device (None: they can try).
pub fn unsuitable(comm: &Comm, g: Option<&Gpu>) -> Option<String> {
    if std::env::var(EXCHANGE_VAR).is_ok_and(|v| v == "host") {
        return Some(format!("{EXCHANGE_VAR}=host"));
    }
    let [devices, mps] = comm.gather_all(g.map_or([-1, 0], |g| [g.info.ordinal as i64, i64::from(g.mps_enabled())]));
    if devices.contains(&-1) {
        return Some("not every rank is on a GPU".into());
    }
    if comm.node_size() != comm.size {
        return Some("the ranks span several nodes".into());
    }
    let shared = (1..devices.len()).any(|r| devices[..r].contains(&devices[r]));
    if shared && mps.contains(&0) {
        return Some("ranks share a GPU without MPS, so their kernels would take turns".into());
    }
    None
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
        // every rank builds or none does: a failure anywhere stops every rank before the next collective
        let region = comm.agree(g.shared_region(halo_at + 8 * halo_len.max(1)))?;
        let handle = comm.agree(region.handle())?;
        let words: [i64; HANDLE_BYTES / 8] =
            std::array::from_fn(|k| i64::from_le_bytes(handle[8 * k..8 * k + 8].try_into().unwrap_or_default()));
        let handles = comm.gather_all(words);
        let peers = comm.agree(
            (0..size)
                .filter(|&r| r != rank)
                .map(|r| {
                    let mut h = [0u8; HANDLE_BYTES];
                    for (k, w) in handles.iter().enumerate() {
                        h[8 * k..8 * k + 8].copy_from_slice(&w[r].to_le_bytes());
                    }
                    g.open_peer_region(&h)
                })
                .collect::<Result<Vec<_>>>(),
        )?;
        let mut bases: Vec<u64> = peers.iter().map(PeerRegion::address).collect();
        bases.insert(rank, region.address());
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
