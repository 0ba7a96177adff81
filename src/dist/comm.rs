//! fegpu's duplicate of the caller's communicator: agreement on errors,
//! the halo exchange, the reductions.

use crate::error::{Error, ErrorKind, Result};
use mpi::collective::SystemOperation;
use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// fegpu's own duplicate of the caller's communicator.
pub struct Comm {
    comm: SimpleCommunicator,
    pub rank: usize,
    pub size: usize,
}

// SAFETY: an MPI communicator handle is a plain value; fegpu's objects are
// used by one thread at a time per rank (the calls are collective), and
// MPI_THREAD_FUNNELED callers make every call from their main thread.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

/// Tag of the halo exchanges on fegpu's communicator.
const HALO_TAG: i32 = 7301;

impl Comm {
    /// Duplicates the communicator whose Fortran handle is `handle` (what
    /// `MPI_Comm_c2f` gives in C, the integer of `use mpi`, `%MPI_VAL` of
    /// mpi_f08's `type(MPI_Comm)`). Collective.
    pub fn from_fortran(handle: i32) -> Result<Comm> {
        // SAFETY: MPI_Initialized may be called at any time; f2c maps any
        // integer to a handle or to null.
        unsafe {
            let mut up = 0;
            ffi::MPI_Initialized(&mut up);
            let mut down = 0;
            ffi::MPI_Finalized(&mut down);
            if up == 0 || down != 0 {
                return Err(Error::invalid(
                    "MPI is not initialised (or already finalised): call MPI_Init before fegpu's distributed calls",
                ));
            }
            let raw = ffi::MPI_Comm_f2c(handle);
            if raw.0.is_null() || raw == ffi::RSMPI_COMM_NULL {
                return Err(Error::new(
                    ErrorKind::InvalidHandle,
                    format!("comm = {handle}: not a communicator (MPI_COMM_NULL or not a Fortran handle from MPI_Comm_c2f)"),
                ));
            }
            // under MPI_ERRORS_RETURN a handle f2c let through fails here
            // (under the default MPI_ERRORS_ARE_FATAL, MPI itself stops)
            let mut dup = ffi::RSMPI_COMM_NULL;
            if ffi::MPI_Comm_dup(raw, &mut dup) != 0 || dup == ffi::RSMPI_COMM_NULL {
                return Err(Error::new(
                    ErrorKind::InvalidHandle,
                    format!("comm = {handle}: MPI_Comm_dup refused it (not a communicator)"),
                ));
            }
            Ok(Comm::own(SimpleCommunicator::from_raw(dup)))
        }
    }

    /// The world of an MPI program fegpu itself runs (the `fegpu` command).
    pub fn world(world: &SimpleCommunicator) -> Comm {
        Comm::own(world.duplicate())
    }

    fn own(comm: SimpleCommunicator) -> Comm {
        let (rank, size) = (comm.rank() as usize, comm.size() as usize);
        Comm { comm, rank, size }
    }

    /// The rank's index among the ranks on its node (for the device choice).
    pub fn node_rank(&self) -> usize {
        self.comm.split_shared(self.rank as i32).rank() as usize
    }

    /// The number of ranks on this rank's node.
    pub fn node_size(&self) -> usize {
        self.comm.split_shared(self.rank as i32).size() as usize
    }

    /// Every rank's `values`, each in rank order, in one collective.
    pub fn gather_all<const K: usize>(&self, values: [i64; K]) -> [Vec<i64>; K] {
        let mut all = vec![0i64; self.size * K];
        self.comm.all_gather_into(&values[..], &mut all[..]);
        std::array::from_fn(|j| all.iter().skip(j).step_by(K).copied().collect())
    }

    /// A result every rank agrees on: Ok on all ranks only if Ok on all. A
    /// rank whose own step failed returns its error; the others return the
    /// lowest failing rank's, its message prefixed with that rank.
    pub fn agree<T>(&self, local: Result<T>) -> Result<T> {
        let mine = if local.is_err() { self.rank as i32 } else { self.size as i32 };
        let mut first = 0i32;
        self.comm.all_reduce_into(&mine, &mut first, SystemOperation::min());
        if first == self.size as i32 {
            return local;
        }
        // the failing rank's kind and message, broadcast from it
        let root = self.comm.process_at_rank(first);
        let (mut kind, mut text) = match &local {
            Err(e) if self.rank as i32 == first => (kind_index(e.kind), e.message.clone().into_bytes()),
            _ => (0, Vec::new()),
        };
        let mut len = text.len() as i64;
        root.broadcast_into(&mut kind);
        root.broadcast_into(&mut len);
        text.resize(len as usize, 0);
        root.broadcast_into(&mut text[..]);
        match local {
            Err(e) => Err(e),
            Ok(_) => Err(Error::new(KINDS[kind as usize], format!("rank {first}: {}", String::from_utf8_lossy(&text)))),
        }
    }

    /// Rank 0's `bytes` on every rank.
    pub(super) fn broadcast_from_first(&self, bytes: &mut [u8]) {
        self.comm.process_at_rank(0).broadcast_into(bytes);
    }

    /// Sends `send` (runs of `send_to` counts, rank by rank) and receives
    /// `recv` (runs of `recv_from`), running `meanwhile` while the messages
    /// are in flight.
    pub(super) fn exchange(
        &self,
        send: &[f64],
        send_to: &[(usize, usize)],
        recv: &mut [f64],
        recv_from: &[(usize, usize)],
        meanwhile: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        mpi::request::scope(|scope| {
            let mut pending = Vec::with_capacity(send_to.len() + recv_from.len());
            let mut rest = recv;
            for &(r, count) in recv_from {
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(count);
                rest = tail;
                let p = self.comm.process_at_rank(r as i32);
                pending.push(mpi::request::WaitGuard::from(p.immediate_receive_into_with_tag(scope, part, HALO_TAG)));
            }
            let mut at = 0;
            let mut sends = Vec::with_capacity(send_to.len());
            for &(r, count) in send_to {
                let p = self.comm.process_at_rank(r as i32);
                sends.push(mpi::request::WaitGuard::from(p.immediate_send_with_tag(scope, &send[at..at + count], HALO_TAG)));
                at += count;
            }
            let result = meanwhile();
            drop(pending);
            drop(sends);
            result
        })
    }

    /// The nearest-neighbour swap of a split lattice: sends `down` to rank
    /// `below` and `up` to rank `above`, and receives into `from_below`
    /// what `below` sent up and into `from_above` what `above` sent down
    /// (None: no neighbour that side). One tag a direction, so a rank that
    /// is both neighbours (two ranks, or one, around a periodic axis) gets
    /// each plane in its place.
    pub(super) fn swap_planes<T: Equivalence>(
        &self,
        (below, above): (Option<usize>, Option<usize>),
        (down, up): (&[T], &[T]),
        (from_below, from_above): (&mut [T], &mut [T]),
    ) {
        const UP: i32 = 7302;
        const DOWN: i32 = 7303;
        mpi::request::scope(|scope| {
            let mut pending = Vec::with_capacity(4);
            if let Some(r) = below {
                let p = self.comm.process_at_rank(r as i32);
                pending.push(mpi::request::WaitGuard::from(p.immediate_receive_into_with_tag(scope, from_below, UP)));
                pending.push(mpi::request::WaitGuard::from(p.immediate_send_with_tag(scope, down, DOWN)));
            }
            if let Some(r) = above {
                let p = self.comm.process_at_rank(r as i32);
                pending.push(mpi::request::WaitGuard::from(p.immediate_receive_into_with_tag(scope, from_above, DOWN)));
                pending.push(mpi::request::WaitGuard::from(p.immediate_send_with_tag(scope, up, UP)));
            }
        });
    }

    /// Refuses, on every rank, values that differ between ranks (a
    /// collective call's scalars must be the same everywhere): `what`
    /// names them.
    pub fn same_everywhere(&self, what: &str, values: &[f64]) -> Result<()> {
        let mine: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        let mut all = vec![0u64; mine.len() * self.size];
        self.comm.all_gather_into(&mine[..], &mut all[..]);
        match all.chunks(mine.len().max(1)).position(|theirs| theirs != &all[..mine.len()]) {
            Some(r) if !mine.is_empty() => {
                let show = |c: &[u64]| c.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>();
                Err(Error::invalid(format!(
                    "{what} = {:?} on rank {r} but {:?} on rank 0: a collective call takes the same values on every rank",
                    show(&all[r * mine.len()..(r + 1) * mine.len()]),
                    show(&all[..mine.len()])
                )))
            }
            _ => Ok(()),
        }
    }

    /// Every rank's `mine`, one after another in rank order (the lengths may differ).
    pub fn gather_all_varcount(&self, mine: &[f64]) -> Vec<f64> {
        let [counts] = self.gather_all([mine.len() as i64]);
        let counts: Vec<i32> = counts.iter().map(|&c| c as i32).collect();
        let at = offsets(&counts);
        let mut all = vec![0.0; counts.iter().map(|&c| c as usize).sum()];
        {
            let mut into = mpi::datatype::PartitionMut::new(&mut all[..], &counts[..], &at[..]);
            self.comm.all_gather_varcount_into(mine, &mut into);
        }
        all
    }

    /// Each rank sends `counts[r]` items of `send` to rank r (in rank
    /// order) and gets back what every rank sent it, with the counts.
    pub(super) fn all_to_all(&self, send: &[i64], counts: &[i32]) -> (Vec<i64>, Vec<i32>) {
        let mut recv_counts = vec![0i32; self.size];
        self.comm.all_to_all_into(counts, &mut recv_counts[..]);
        let (send_at, recv_at) = (offsets(counts), offsets(&recv_counts));
        let mut recv = vec![0i64; recv_counts.iter().map(|&c| c as usize).sum()];
        {
            let sp = mpi::datatype::Partition::new(send, counts, &send_at[..]);
            let mut rp = mpi::datatype::PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_at[..]);
            self.comm.all_to_all_varcount_into(&sp, &mut rp);
        }
        (recv, recv_counts)
    }
}

impl crate::krylov::GlobalSum for Comm {
    fn sum(&self, v: &mut [f64]) -> Result<()> {
        let local = v.to_vec();
        self.comm.all_reduce_into(&local[..], v, SystemOperation::sum());
        Ok(())
    }
    fn max(&self, v: &mut [f64]) -> Result<()> {
        let local = v.to_vec();
        self.comm.all_reduce_into(&local[..], v, SystemOperation::max());
        Ok(())
    }
}

/// The (rank, length) runs of an exchange from per-rank item counts (what
/// `all_to_all` sent or received), each item `per` values; ranks with none left out.
pub(super) fn runs(counts: &[i32], per: usize) -> Vec<(usize, usize)> {
    counts.iter().enumerate().filter(|(_, &n)| n > 0).map(|(r, &n)| (r, n as usize * per)).collect()
}

/// Where each run starts when runs of these lengths follow one another.
fn offsets(counts: &[i32]) -> Vec<i32> {
    counts.iter().scan(0, |s, &n| Some(std::mem::replace(s, *s + n))).collect()
}

/// Error kinds in the order `agree` sends them.
const KINDS: [ErrorKind; 11] = [
    ErrorKind::InvalidArgument,
    ErrorKind::InvalidHandle,
    ErrorKind::SizeMismatch,
    ErrorKind::OutOfDeviceMemory,
    ErrorKind::Device,
    ErrorKind::NotConverged,
    ErrorKind::Breakdown,
    ErrorKind::Unsupported,
    ErrorKind::Internal,
    ErrorKind::NoDevice,
    ErrorKind::OutOfMemory,
];

fn kind_index(kind: ErrorKind) -> i32 {
    KINDS.iter().position(|&k| k == kind).unwrap_or(8) as i32
}

/// The device a rank's context takes when the caller leaves it to fegpu
/// (device < 0): its rank on the node modulo the devices visible, so ranks
/// spread over a node's GPUs and several may share one.
pub fn device_for(comm: &Comm, device: i64) -> i64 {
    if device >= 0 {
        return device;
    }
    let count = crate::gpu::Gpu::device_count().unwrap_or(0).max(1);
    (comm.node_rank() % count) as i64
}
