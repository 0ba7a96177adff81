//! The distributed CSR matrix: each rank passes the rows it owns (a
//! contiguous global range) with global column indices, as PETSc's
//! MatCreateMPIAIJWithArrays and hypre's IJ interface take them. fegpu
//! splits them into the diagonal block (owned columns, numbered locally) and
//! the halo block (columns other ranks own, numbered by the ascending list
//! `halo_cols`), and builds the exchange plan once: which owned x values each
//! neighbour needs, which halo values each neighbour sends.
//!
//! The product y = A x posts the halo exchange, runs the diagonal block's
//! product while the messages travel, then adds the halo block's. On the
//! CPU backend the vectors are the rank's host arrays. On CUDA, where the
//! ranks share one node, a device-driven iteration's products go device to
//! device (`team.rs`); otherwise, and for a product called alone, the values
//! to send are gathered on the device (kernels/vector.cu `gather`), staged
//! through the host for MPI, and the halo uploaded for the second product.

use super::comm::{runs, Comm};
use super::team::{self, Team};
use crate::array::cuda::Reduce;
use crate::array::{mixed_backends, Array, Buffer};
use crate::context::Context;
use crate::error::{at, Error, Result};
use crate::gpu::nccl::{self, Nccl};
use crate::gpu::{Borrowed, DeviceBuffer, Gpu};
use crate::krylov::Operator;
use crate::sparse::{build_pattern, check_vector, cpu, cuda, f64_buf, Csr, Index};
use std::sync::{Arc, Mutex};

/// How the halo values travel between ranks where no team is built.
pub const EXCHANGE_PATH: &str = "MPI point-to-point through host buffers";

pub struct DistCsr {
    pub comm: Arc<Comm>,
    pub n_global: usize,
    /// Where every rank's rows start, and the end (size + 1 entries, 0-based).
    pub starts: Vec<usize>,
    /// Owned rows x owned columns, numbered locally: the diagonal block,
    /// which block-Jacobi preconditioners are built from.
    pub own: Arc<Csr>,
    /// The halo block: owned rows x halo columns, kept over its rows with
    /// entries only (the rows next to other ranks), which are `halo_rows`
    /// (None: the rank needs no other rank's values).
    pub halo: Option<Csr>,
    halo_rows: Vec<i32>,
    /// The halo columns' global numbers, ascending (so grouped by owner).
    pub halo_cols: Vec<usize>,
    /// Caller's entries, in their order, that belong to each block.
    own_entries: Vec<usize>,
    halo_entries: Vec<usize>,
    /// (rank, count): the halo arrives in runs, one per neighbour.
    recv_from: Vec<(usize, usize)>,
    /// (rank, count): owned x values sent to each neighbour, in runs.
    send_to: Vec<(usize, usize)>,
    /// The local rows whose x values are sent, run by run.
    send_rows: Vec<i32>,
    /// Host buffers of the exchange: values to send, halo received.
    staging: Mutex<(Vec<f64>, Vec<f64>)>,
    /// CUDA: the send rows, the gathered values, the halo.
    device: Option<DeviceExchange>,
}

struct DeviceExchange {
    send_rows: DeviceBuffer<i32>,
    send: DeviceBuffer<f64>,
    halo_rows: DeviceBuffer<i32>,
    /// CG's p.q over the diagonal block, before the halo block's share.
    own_pq: DeviceBuffer<f64>,
    halo: Mutex<Halo>,
    /// How the halo travels (declared after `halo`, which may live in a
    /// team's region, so dropped after it).
    path: Path,
}

/// A matrix's device-side exchange path.
enum Path {
    /// CUDA IPC within the node: device-driven iterations, reductions on the device.
    Team(Team),
    /// NCCL between the ranks' GPUs, the iterations driven by the host; why no team.
    Nccl(Nccl, String),
    /// Page-locked host buffers and MPI, and why.
    Host(String),
}

impl DeviceExchange {
    fn team(&self) -> Option<&Team> {
        match &self.path {
            Path::Team(t) => Some(t),
            _ => None,
        }
    }
}

/// The halo on the device: the rank's own buffer, or part of its team region.
enum Halo {
    Own(DeviceBuffer<f64>),
    Shared(Borrowed<f64>),
}

impl Halo {
    fn buffer(&mut self) -> &mut DeviceBuffer<f64> {
        match self {
            Halo::Own(b) => b,
            Halo::Shared(b) => b,
        }
    }
}

/// The caller's rows, as its index type gave them.
pub struct Rows<'a, I: Index> {
    pub n_global: i64,
    pub first_row: i64,
    pub row_ptr: &'a [I],
    pub col: &'a [I],
    pub values: &'a [f64],
    pub base: i64,
}

impl DistCsr {
    /// Collective: every rank passes its rows; all ranks succeed or all fail.
    pub fn new<I: Index>(comm: Arc<Comm>, ctx: Arc<Context>, rows: &Rows<I>) -> Result<DistCsr> {
        let starts = comm.agree(layout(&comm, rows))?;
        let (first, nrows, n_global) = (starts[comm.rank], starts[comm.rank + 1] - starts[comm.rank], starts[comm.size]);
        let split = comm.agree(split(rows, first, nrows, n_global))?;
        // ask each halo column's owner for it; answer what the others ask
        let owner = |g: usize| starts.partition_point(|&s| s <= g) - 1;
        let mut counts = vec![0i32; comm.size];
        split.halo_cols.iter().for_each(|&g| counts[owner(g)] += 1);
        let wanted: Vec<i64> = split.halo_cols.iter().map(|&g| g as i64).collect();
        let (asked, asked_counts) = comm.all_to_all(&wanted, &counts);
        let (recv_from, send_to) = (runs(&counts, 1), runs(&asked_counts, 1));
        let send_rows: Vec<i32> = asked.iter().map(|&g| (g as usize - first) as i32).collect();
        let built = (|| {
            let own = Arc::new(Csr::new(ctx.clone(), split.own, &pick(rows.values, &split.own_entries))?);
            let halo = match split.halo {
                Some(p) => Some(Csr::new(ctx.clone(), p, &pick(rows.values, &split.halo_entries))?),
                None => None,
            };
            let device = match ctx.gpu() {
                None => None,
                Some(g) => Some((
                    cuda::upload(g, &send_rows)?,
                    g.alloc(send_rows.len().max(1))?,
                    cuda::upload(g, &split.halo_rows)?,
                    g.zeros::<f64>(1)?,
                )),
            };
            Ok((own, halo, device))
        })();
        let (own, halo, device) = comm.agree(built)?;
        // asked on every rank, on a GPU or not (a collective)
        let route = team::route(&comm, ctx.gpu());
        let device = match device {
            None => None,
            Some(buffers) => Some(device_exchange(&comm, &ctx, buffers, route, &recv_from, &send_to, split.halo_cols.len())?),
        };
        let staging = Mutex::new((vec![0.0; send_rows.len()], vec![0.0; split.halo_cols.len()]));
        Ok(DistCsr {
            comm,
            n_global,
            starts,
            own,
            halo,
            halo_rows: split.halo_rows,
            halo_cols: split.halo_cols,
            own_entries: split.own_entries,
            halo_entries: split.halo_entries,
            recv_from,
            send_to,
            send_rows,
            staging,
            device,
        })
    }

    pub fn first_row(&self) -> usize {
        self.starts[self.comm.rank]
    }

    pub fn local_rows(&self) -> usize {
        self.own.pattern.nrows
    }

    /// The entries the rank passed (before duplicates were merged).
    pub fn caller_nnz(&self) -> usize {
        self.own_entries.len() + self.halo_entries.len()
    }

    /// Neighbours this rank receives from and sends to.
    pub fn neighbours(&self) -> (usize, usize) {
        (self.recv_from.len(), self.send_to.len())
    }

    /// Values sent and received per product, over all neighbours.
    pub fn halo_values(&self) -> (usize, usize) {
        (self.send_rows.len(), self.halo_cols.len())
    }

    /// New values for the same rows, in the caller's original order.
    /// Collective; validated on every rank first, so a refused update
    /// changes nothing anywhere.
    pub fn update_values(&self, values: &[f64]) -> Result<()> {
        let checked = if values.len() != self.caller_nnz() {
            Err(Error::size(format!("values has {} entries; this rank's rows have {}", values.len(), self.caller_nnz())))
        } else {
            check_finite(values, self.first_row())
        };
        self.comm.agree(checked)?;
        let updated = self.own.update_values(&pick(values, &self.own_entries)).and_then(|()| match &self.halo {
            Some(h) => h.update_values(&pick(values, &self.halo_entries)),
            None => Ok(()),
        });
        self.comm.agree(updated)
    }

    /// y = A x over the rank's rows, with the diagonal block's values `own`
    /// (for a solver that already holds them) or its own lock on them.
    pub fn product<'a>(&'a self, own: &'a Buffer<f64>) -> Product<'a> {
        Product { a: self, own }
    }

    /// y = A x over the rank's rows (x, y its parts; None on a rank owning
    /// no rows, which takes part in no exchange). Collective.
    pub fn spmv(&self, x: Option<&Array>, y: Option<&Array>) -> Result<()> {
        let n = self.local_rows();
        let checked = match (x, y) {
            (Some(x), Some(y)) => check_vector(&self.own, x, n, "x")
                .and_then(|()| check_vector(&self.own, y, n, "y"))
                .and_then(|()| crate::array::distinct(&[(x, "x"), (y, "y")])),
            (None, None) if n == 0 => Ok(()),
            _ => Err(Error::invalid(format!("x and y must both be given: this rank owns {n} rows"))),
        };
        self.comm.agree(checked)?;
        let (Some(x), Some(y)) = (x, y) else { return Ok(()) };
        let values = self.own.values()?;
        let op = self.product(&values.data);
        let (mut gx, mut gy) = crate::array::lock_pair(x, y, "x", "y")?;
        match (f64_buf(&mut gx), f64_buf(&mut gy)) {
            (Buffer::Host(xh), Buffer::Host(yh)) => op.apply_host(xh, yh),
            (Buffer::Device(xd), Buffer::Device(yd)) => {
                let g = self.own.ctx.device()?;
                op.apply_device(g, xd, yd, None)?;
                g.synchronize("fegpu_dist_csr_spmv")
            }
            _ => Err(mixed_backends()),
        }
    }

    /// Ranks, this rank's rows and halo, and the exchange path.
    pub fn describe(&self) -> String {
        let (first, n) = (self.first_row(), self.local_rows());
        format!(
            "{} rows over {} ranks; rank {} owns rows {first}..{} ({n}, {} entries), receives {} halo values from {} ranks, \
             sends {} to {}; exchange: {}",
            self.n_global,
            self.comm.size,
            self.comm.rank,
            first + n,
            self.own.pattern.nnz() + self.halo.as_ref().map_or(0, |h| h.pattern.nnz()),
            self.halo_cols.len(),
            self.recv_from.len(),
            self.send_rows.len(),
            self.send_to.len(),
            self.exchange_path()
        )
    }

    /// How the halo and the reductions of a device-driven solve travel.
    pub fn exchange_path(&self) -> String {
        match self.device.as_ref().map(|dx| &dx.path) {
            Some(Path::Team(_)) => "device to device through CUDA IPC within the node (reductions summed on the device); \
                                    a product called alone: MPI through host buffers"
                .into(),
            Some(Path::Nccl(_, why)) => {
                format!("device to device through NCCL (no CUDA IPC team: {why}); reductions through MPI from the host")
            }
            Some(Path::Host(why)) => format!("{EXCHANGE_PATH} (no device-direct path: {why})"),
            None => EXCHANGE_PATH.into(),
        }
    }

    /// The halo block `h` (self.halo, its device values `values`) over its
    /// rows, as the device kernels take it.
    fn rows_block<'a>(&'a self, h: &'a Csr, values: &'a Buffer<f64>, dx: &'a DeviceExchange) -> Result<cuda::RowsBlock<'a>> {
        Ok(cuda::RowsBlock {
            count: self.halo_rows.len(),
            rows: &dx.halo_rows,
            dp: h.device.as_ref().ok_or_else(mixed_backends)?,
            values: values.device()?,
        })
    }

    /// Sends the owned values others need (`send`, gathered), receives the
    /// halo into the staging buffer, running `meanwhile` as they travel.
    fn exchange(&self, staging: &mut (Vec<f64>, Vec<f64>), meanwhile: impl FnOnce() -> Result<()>) -> Result<()> {
        let (send, halo) = staging;
        self.comm.exchange(send, &self.send_to, halo, &self.recv_from, meanwhile)
    }
}

/// The distributed product as the Krylov methods' operator.
pub struct Product<'a> {
    a: &'a DistCsr,
    own: &'a Buffer<f64>,
}

impl Operator for Product<'_> {
    fn apply_host(&self, x: &[f64], y: &mut [f64]) -> Result<()> {
        let a = self.a;
        let mut staging = a.staging.lock().unwrap_or_else(|p| p.into_inner());
        for (s, &r) in staging.0.iter_mut().zip(&a.send_rows) {
            *s = x[r as usize];
        }
        let own = self.own.host()?;
        a.exchange(&mut staging, || {
            cpu::spmv(&a.own.pattern, own, 1.0, x, 0.0, y);
            Ok(())
        })?;
        if let Some(h) = &a.halo {
            cpu::spmv_rows_add(&h.pattern, h.values()?.data.host()?, &a.halo_rows, &staging.1, y);
        }
        Ok(())
    }

    fn apply_device(&self, g: &Gpu, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let a = self.a;
        let dx = a.device.as_ref().ok_or_else(mixed_backends)?;
        if let (Some(team), Some(sc)) = (dx.team(), sc) {
            return self.apply_in_team(g, team, x, y, sc);
        }
        if let Path::Nccl(nccl, _) = &dx.path {
            return self.apply_through_nccl(g, nccl, x, y, sc);
        }
        let mut staging = a.staging.lock().unwrap_or_else(|p| p.into_inner());
        if !a.send_rows.is_empty() {
            crate::array::cuda::gather(g, a.send_rows.len(), x, &dx.send_rows, &dx.send)?;
            g.download(&dx.send, 0, &mut staging.0)?;
        }
        // the diagonal block's product runs on the device while the halo travels
        self.own_product(g, x, y, sc)?;
        a.exchange(&mut staging, || Ok(()))?;
        let mut halo = dx.halo.lock().unwrap_or_else(|p| p.into_inner());
        if a.halo.is_some() {
            g.upload(&staging.1, halo.buffer(), 0)?;
        }
        self.halo_product(g, halo.buffer(), y, sc)
    }

    fn device_team(&self, g: &Gpu) -> u64 {
        self.a.device.as_ref().and_then(|dx| dx.team()).map_or(0, |t| t.address(g))
    }

    /// In a team, where the diagonal block's rows are short (as one
    /// process fuses them: sparse::solver's CsrOperator) and the rank owns rows.
    fn apply_pq_device(
        &self,
        g: &Gpu,
        p: &DeviceBuffer<f64>,
        q: &DeviceBuffer<f64>,
        reduce: &Reduce,
        sc: &DeviceBuffer<f64>,
    ) -> Option<Result<()>> {
        let team = self.a.device.as_ref()?.team()?;
        let dp = self.a.own.device.as_ref()?;
        if dp.threads_per_row > cuda::FUSED_PQ_MAX_TPR || self.a.local_rows() == 0 {
            return None;
        }
        Some(self.apply_pq_in_team(g, team, p, q, reduce, sc))
    }
}

impl Product<'_> {
    /// The product inside a device-driven iteration whose ranks form a team:
    /// the halo sent device to device while the diagonal block's product runs.
    fn apply_in_team(
        &self,
        g: &Gpu,
        team: &Team,
        x: &DeviceBuffer<f64>,
        y: &DeviceBuffer<f64>,
        sc: &DeviceBuffer<f64>,
    ) -> Result<()> {
        let a = self.a;
        let dx = a.device.as_ref().ok_or_else(mixed_backends)?;
        if !a.send_rows.is_empty() {
            team.send(g, x, &dx.send_rows, a.send_rows.len(), sc)?;
        }
        self.own_product(g, x, y, Some(sc))?;
        if a.halo.is_some() {
            team.wait(g, sc)?;
        }
        let mut halo = dx.halo.lock().unwrap_or_else(|p| p.into_inner());
        self.halo_product(g, halo.buffer(), y, Some(sc))
    }

    /// The product with the halo through NCCL on the side stream while the
    /// diagonal block's product runs on the main one.
    fn apply_through_nccl(
        &self,
        g: &Gpu,
        nccl: &Nccl,
        x: &DeviceBuffer<f64>,
        y: &DeviceBuffer<f64>,
        sc: Option<&DeviceBuffer<f64>>,
    ) -> Result<()> {
        let a = self.a;
        let dx = a.device.as_ref().ok_or_else(mixed_backends)?;
        if !a.send_rows.is_empty() {
            crate::array::cuda::gather(g, a.send_rows.len(), x, &dx.send_rows, &dx.send)?;
        }
        let mut halo = dx.halo.lock().unwrap_or_else(|p| p.into_inner());
        let halo = halo.buffer();
        g.fork_side()?;
        g.on_side(|| nccl.exchange(g, &dx.send, &a.send_to, halo, &a.recv_from))?;
        self.own_product(g, x, y, sc)?;
        g.join_side()?;
        self.halo_product(g, halo, y, sc)
    }

    /// y = D x, the diagonal block's product over the rank's rows.
    fn own_product(&self, g: &Gpu, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let n = self.a.local_rows();
        if n == 0 {
            return Ok(());
        }
        let dp = self.a.own.device.as_ref().ok_or_else(mixed_backends)?;
        cuda::spmv_with(g, dp, dp.threads_per_row, n, self.own.device()?, 1.0, x, 0.0, y, sc)
    }

    /// y += H halo over the halo block's rows (nothing without a halo).
    fn halo_product(
        &self,
        g: &Gpu,
        halo: &DeviceBuffer<f64>,
        y: &DeviceBuffer<f64>,
        sc: Option<&DeviceBuffer<f64>>,
    ) -> Result<()> {
        let (a, Some(h)) = (self.a, &self.a.halo) else { return Ok(()) };
        let dx = a.device.as_ref().ok_or_else(mixed_backends)?;
        let values = h.values()?;
        cuda::spmv_rows_add(g, &a.rows_block(h, &values.data, dx)?, halo, y, sc)
    }

    /// apply_in_team with CG's p.q reduced in the same passes: the diagonal
    /// block's product sums its share, the halo block's adds its own and
    /// sums over the team.
    fn apply_pq_in_team(
        &self,
        g: &Gpu,
        team: &Team,
        p: &DeviceBuffer<f64>,
        q: &DeviceBuffer<f64>,
        reduce: &Reduce,
        sc: &DeviceBuffer<f64>,
    ) -> Result<()> {
        let a = self.a;
        let dx = a.device.as_ref().ok_or_else(mixed_backends)?;
        let dp = a.own.device.as_ref().ok_or_else(mixed_backends)?;
        if !a.send_rows.is_empty() {
            team.send(g, p, &dx.send_rows, a.send_rows.len(), sc)?;
        }
        cuda::spmv_pq(g, dp, a.local_rows(), self.own.device()?, p, q, reduce, sc, Some(&dx.own_pq))?;
        match &a.halo {
            Some(h) => {
                team.wait(g, sc)?;
                let mut halo = dx.halo.lock().unwrap_or_else(|p| p.into_inner());
                let values = h.values()?;
                let block = a.rows_block(h, &values.data, dx)?;
                cuda::spmv_rows_add_pq(g, Some((&block, halo.buffer())), p, q, &dx.own_pq, reduce, sc)
            }
            None => cuda::spmv_rows_add_pq(g, None, p, q, &dx.own_pq, reduce, sc),
        }
    }
}

/// The device side of the exchange on the route the ranks allow: a team,
/// NCCL, or the host-staged path, saying why (a team or an NCCL
/// communicator that cannot be built leaves the host path, on every rank).
fn device_exchange(
    comm: &Comm,
    ctx: &Context,
    (send_rows, send, halo_rows, own_pq): (DeviceBuffer<i32>, DeviceBuffer<f64>, DeviceBuffer<i32>, DeviceBuffer<f64>),
    route: team::Route,
    recv_from: &[(usize, usize)],
    send_to: &[(usize, usize)],
    halo_len: usize,
) -> Result<DeviceExchange> {
    let g = ctx.device()?;
    let own_halo = || -> Result<Halo> { Ok(Halo::Own(comm.agree(g.alloc(halo_len.max(1)))?)) };
    let (halo, path) = match route {
        team::Route::Team => match Team::new(comm, g, recv_from, send_to, halo_len) {
            Ok((team, halo)) => (Halo::Shared(halo), Path::Team(team)),
            Err(e) => (own_halo()?, Path::Host(format!("CUDA IPC: {}", e.message))),
        },
        team::Route::Nccl(no_team) => match nccl_communicator(comm, g) {
            Ok(nccl) => (own_halo()?, Path::Nccl(nccl, no_team)),
            Err(e) => (own_halo()?, Path::Host(format!("{no_team}, and {}", e.message))),
        },
        team::Route::Host(why) => (own_halo()?, Path::Host(why)),
    };
    Ok(DeviceExchange { send_rows, send, halo_rows, own_pq, halo: Mutex::new(halo), path })
}

/// Collective: the ranks' NCCL communicator, from an id rank 0 makes and
/// broadcasts over MPI; every rank gets one or none does.
fn nccl_communicator(comm: &Comm, g: &Gpu) -> Result<Nccl> {
    comm.agree(nccl::present())?;
    let mut id = comm.agree(if comm.rank == 0 { nccl::unique_id() } else { Ok([0; nccl::ID_BYTES]) })?;
    comm.broadcast_from_first(&mut id);
    comm.agree(g.nccl(&id, comm.rank, comm.size))
}

fn pick(values: &[f64], entries: &[usize]) -> Vec<f64> {
    entries.iter().map(|&k| values[k]).collect()
}

fn check_finite(values: &[f64], first_row: usize) -> Result<()> {
    crate::sparse::check_finite(values).map_err(|e| e.within(&format!("the rows from global row {first_row}")))
}

/// Every rank's first row, checked to tile 0..n_global in rank order with
/// neither gap nor overlap; the same verdict on every rank.
fn layout<I: Index>(comm: &Comm, rows: &Rows<I>) -> Result<Vec<usize>> {
    let nrows = rows.row_ptr.len() as i64 - 1;
    let [firsts, counts, globals] = comm.gather_all([rows.first_row - rows.base, nrows, rows.n_global]);
    if let Some(r) = globals.iter().position(|&n| n != globals[0]) {
        return Err(Error::invalid(format!(
            "n_global differs over the ranks: {} on rank 0, {} on rank {r}",
            globals[0], globals[r]
        )));
    }
    let n_global = globals[0];
    if n_global <= 0 {
        return Err(Error::invalid(format!("n_global = {n_global}: must be positive")));
    }
    let mut starts = Vec::with_capacity(comm.size + 1);
    let mut next = 0i64;
    for r in 0..comm.size {
        if counts[r] < 0 {
            return Err(Error::invalid(format!("rank {r} passes {} rows: must be >= 0", counts[r])));
        }
        let first = firsts[r];
        if counts[r] > 0 && first != next {
            let what = if first < next { "overlap" } else { "leave a gap" };
            return Err(Error::invalid(format!(
                "rank {r}'s rows start at global row {} but the rows before it end at {}: the ranks' row ranges {what} \
                 (each rank owns a contiguous range, in rank order)",
                first + rows.base,
                next - 1 + rows.base
            )));
        }
        starts.push(next as usize);
        next += counts[r];
    }
    if next != n_global {
        return Err(Error::invalid(format!("the ranks own {next} rows in all but n_global = {n_global}")));
    }
    starts.push(next as usize);
    Ok(starts)
}

/// The rank's rows split into the two blocks' patterns.
struct Split {
    own: crate::sparse::Pattern,
    halo: Option<crate::sparse::Pattern>,
    /// The rows with halo entries, the halo pattern's rows.
    halo_rows: Vec<i32>,
    halo_cols: Vec<usize>,
    own_entries: Vec<usize>,
    halo_entries: Vec<usize>,
}

fn split<I: Index>(rows: &Rows<I>, first: usize, nrows: usize, n_global: usize) -> Result<Split> {
    let (rp, col, base) = (rows.row_ptr, rows.col, rows.base);
    if base != 0 && base != 1 {
        return Err(Error::invalid(format!("index_base = {base}: must be 0 or 1")));
    }
    let nnz = rp[nrows].to_i64().saturating_sub(base);
    if rp[0].to_i64() != base || (0..nrows).any(|r| rp[r + 1].to_i64() < rp[r].to_i64()) || nnz != col.len() as i64 {
        return Err(Error::invalid(format!(
            "row_ptr of the rows from global row {}: must start at index_base, never decrease and end at nnz + index_base = {}",
            first as i64 + base,
            col.len() as i64 + base
        )));
    }
    if rows.values.len() != col.len() {
        return Err(Error::size(format!("values has {} entries but col_ind has {}", rows.values.len(), col.len())));
    }
    check_finite(rows.values, first)?;
    let mut halo_cols = Vec::new();
    for (k, &c) in col.iter().enumerate() {
        let g = c.to_i64().saturating_sub(base);
        if g < 0 || g >= n_global as i64 {
            return Err(Error::invalid(format!(
                "{} = {} (rows from global row {}): outside the global columns {base}..{}",
                at("col_ind", k),
                c.to_i64(),
                first as i64 + base,
                n_global as i64 - 1 + base
            )));
        }
        let g = g as usize;
        if g < first || g >= first + nrows {
            halo_cols.push(g);
        }
    }
    halo_cols.sort_unstable();
    halo_cols.dedup();
    let (mut own_rp, mut own_col, mut own_entries) = (vec![0i64], Vec::new(), Vec::new());
    let (mut halo_rp, mut halo_col, mut halo_entries, mut halo_rows) = (vec![0i64], Vec::new(), Vec::new(), Vec::new());
    for r in 0..nrows {
        for k in (rp[r].to_i64() - base) as usize..(rp[r + 1].to_i64() - base) as usize {
            let g = (col[k].to_i64() - base) as usize;
            if g >= first && g < first + nrows {
                own_col.push((g - first) as i64);
                own_entries.push(k);
            } else {
                halo_col.push(halo_cols.binary_search(&g).unwrap_or_else(|_| unreachable!("collected above")) as i64);
                halo_entries.push(k);
            }
        }
        own_rp.push(own_col.len() as i64);
        if halo_col.len() as i64 > halo_rp[halo_rp.len() - 1] {
            halo_rp.push(halo_col.len() as i64);
            halo_rows.push(r as i32);
        }
    }
    let own = build_pattern(nrows, nrows, &own_rp, &own_col, 0)?;
    let halo = match halo_rows.len() {
        0 => None,
        m => Some(build_pattern(m, halo_cols.len(), &halo_rp, &halo_col, 0)?),
    };
    Ok(Split { own, halo, halo_rows, halo_cols, own_entries, halo_entries })
}
