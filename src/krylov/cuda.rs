//! The Krylov methods' operations on the device: vector algebra with the
//! reductions finished there, and the device-driven iterations: the scalars
//! stay in device memory (kernels/sparse.cu's `Scalar` layout), one
//! iteration is captured as a CUDA graph and replayed, and the host reads
//! the scalars every few iterations (kernels queued past the end do nothing).

use super::{broke, done, Method, Operator, Ops, Outcome, Preconditioner, Slot, Start, SLOTS};
use crate::array::cuda::{self, Reduce, BLOCK};
use crate::array::Buffer;
use crate::error::{Error, Result};
use crate::gpu::{arg_or_null, DeviceBuffer, Gpu, Graph, KernelArg};

/// kernels/krylov.cu after the shared prelude.
pub const SOURCE: &str = concat!(
    include_str!("../../kernels/one_kernel.cuh"),
    include_str!("../../kernels/common.cuh"),
    include_str!("../../kernels/krylov.cu")
);

/// Where the solver scalars of a device-driven iteration live in `sc`
/// (kernels/common.cuh `Scalar`).
pub(crate) struct Scalar;

/// cbindgen:ignore
impl Scalar {
    pub const BNORM: usize = 0;
    pub const TOL: usize = 1;
    pub const MAXIT: usize = 2;
    pub const STATUS: usize = 3;
    pub const ITER: usize = 4;
    pub const RR: usize = 5;
    pub const RZ: usize = 6;
    pub const RHO: usize = 9;
    pub const RHO_PREV: usize = 10;
    pub const ALPHA: usize = 11;
    pub const OMEGA: usize = 12;
    pub const VALUE: usize = 13;
    /// A distributed solve's team table address, as the f64 of the same bits (0: none).
    pub const TEAM: usize = 14;
    /// BiCGSTAB's half-step exit tests ||s|| against this: TOL, or -1 (none) for a split solve.
    pub const HALF_TOL: usize = 15;
    /// Relative residuals of the last HIST_LEN iterations, at HIST + iteration % HIST_LEN.
    pub const HIST: usize = 16;
    pub const HIST_LEN: usize = 64;
    pub const LEN: usize = Self::HIST + Self::HIST_LEN;
}

/// How a device-driven solve stands (kernels/common.cuh `Status`).
pub(crate) struct Status;

/// cbindgen:ignore
impl Status {
    pub const RUNNING: f64 = 0.0;
    pub const CONVERGED: f64 = 1.0;
    pub const MAXITER: f64 = 2.0;
    pub const BREAK_NAN: f64 = 4.0;
    pub const BREAK_PQ: f64 = 5.0;
    pub const BREAK_RHO: f64 = 6.0;
    pub const BREAK_RV: f64 = 7.0;
    pub const BREAK_TT: f64 = 8.0;
    pub const BREAK_OMEGA: f64 = 9.0;
    pub const TEAM_LOST: f64 = 10.0;
}

/// A CSR matrix on the device as the small-system iteration reads it, or
/// with `block` > 1 a BSR matrix of block x block blocks, its pattern over
/// block rows (`host_row_ptr`: the host's copy of its row pointers, to size
/// a cluster's shared memory).
#[derive(Clone, Copy)]
pub struct BlockCsr<'a> {
    pub block: usize,
    pub host_row_ptr: &'a [i32],
    pub row_ptr: &'a DeviceBuffer<i32>,
    pub col: &'a DeviceBuffer<i32>,
    pub diag: &'a DeviceBuffer<i32>,
    pub values: &'a DeviceBuffer<f64>,
}

/// A preconditioner the small-system iteration applies itself
/// (kernels/krylov.cu `bicgstab_block`, its `kind`).
pub enum BlockPrecond<'a> {
    Identity,
    Diagonal(&'a DeviceBuffer<f64>),
    /// ILU(0)'s factors in the operator's own pattern (its row_ptr is checked
    /// to be the operator's), each triangle `sweeps` Jacobi sweeps through two scratch vectors.
    IluSweeps {
        factors: BlockCsr<'a>,
        sweeps: usize,
        scratch: (&'a DeviceBuffer<f64>, &'a DeviceBuffer<f64>),
    },
}

/// What `bicgstab_block` and `bicgstab_cluster` take for the preconditioner:
/// kind 0 (none), 1 (diagonal inverse `m`) or 2 (ILU(0)'s factors `m`,
/// `sweeps` Jacobi sweeps a triangle through `scratch`, one block's only).
struct SmallKind<'a> {
    kind: i32,
    m: &'a DeviceBuffer<f64>,
    sweeps: i32,
    scratch: (&'a DeviceBuffer<f64>, &'a DeviceBuffer<f64>),
}

/// BiCGSTAB runs as one block, one launch an iteration, up to this many
/// rows (Settings::small_system_rows) where the cluster below is not taken
/// (before sm_90, or a system that does not fit its shared memory).
/// Measured on the H200 with Jacobi-swept ILU(0) (BENCHMARKS.md): 0.028 ms an
/// iteration at 1,000 rows against the grid's 0.054; 0.06 at 2,744 against
/// the grid's 0.055: one multiprocessor's loads then cost more.
pub const SMALL_SYSTEM_ROWS: usize = 1_500;

/// Up to this many rows, BiCGSTAB's iteration runs as one thread-block
/// cluster with the system in its shared memory (`bicgstab_cluster`, sm_90
/// on; Settings::cluster_system_rows), where it fits a cluster of 8 blocks
/// (a 7-point operator: about 7,500 rows), before the one block: measured on
/// the H200 (BENCHMARKS.md), its solves take 0.23 ms at 216 rows against the
/// block's 0.24, 0.33 at 1,000 against 0.37, and 1.8-1.9x the grid's
/// kernels' speed from 2,744 to 5,832 rows and on sherman5. Elsewhere the
/// block or the grid's kernels run.
pub const CLUSTER_SYSTEM_ROWS: usize = 50_000;

/// A BSR matrix runs as one cluster up to this many rows at most (its
/// blocks are read from the L2, a thread a block row): measured on the
/// H100 (BENCHMARKS.md, `fegpu bench block`), 1.2-1.5x the grid's kernels
/// an iteration from 1,024 to 5,488 rows, 1.05x at 6,912 (4 x 4 blocks),
/// 0.81x at 11,664.
pub const BSR_CLUSTER_ROWS: usize = 8_000;

/// A cluster's layout for `bicgstab_cluster` (k = 1) or
/// `bicgstab_cluster_bsr_k{k}` over `row_ptr`'s (block) rows: blocks, rows
/// a block (scalar rows, k a block row), entries a block at most, and the
/// dynamic shared memory a block (kernels/krylov.cu). A CSR matrix's values
/// are copied in (the fewest blocks that hold them); a BSR matrix's stay in
/// global memory, so eight blocks read them.
fn cluster_shared(row_ptr: &[i32], k: usize, factors: bool, room: usize) -> Option<(u32, usize, usize, usize)> {
    const VECTORS: usize = 12; // SMALL_VECTORS
    let nb = row_ptr.len().checked_sub(1)?;
    let (choices, copied): (&[usize], usize) = if k == 1 { (&[2, 4, 8], 1 + factors as usize) } else { (&[8], 0) };
    choices.iter().find_map(|&blocks| {
        let block_rows = nb.div_ceil(blocks);
        let at = |q: usize| row_ptr[(q * block_rows).min(nb)];
        let entries = (0..blocks).map(|q| (at(q + 1) - at(q)) as usize).max().unwrap_or(0);
        let bytes = 8 * (VECTORS * k * block_rows + entries * copied) + 4 * (2 * block_rows + 1 + entries);
        (bytes <= room).then_some((blocks as u32, k * block_rows, entries, bytes))
    })
}

/// Queues one kernel of a device-driven iteration: (n, vectors..., [flag,]
/// [partial, counter,] sc), over the reduction's grid.
pub fn solver_kernel(
    g: &Gpu,
    name: &'static str,
    n: usize,
    vectors: &[Option<&DeviceBuffer<f64>>],
    flag: Option<i32>,
    reduce: Option<&Reduce>,
    sc: &DeviceBuffer<f64>,
) -> Result<()> {
    let f = g.kernel("krylov", SOURCE, name)?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64);
    for &v in vectors {
        arg_or_null(&mut l, v);
    }
    if let Some(flag) = &flag {
        l.arg(flag);
    }
    if let Some(r) = reduce {
        l.arg(&r.partial).arg(&r.counter);
    }
    l.arg(sc);
    g.launch(name, l, (Reduce::blocks(n) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// The solvers' work vectors on the device (SLOTS of n, zeroed).
pub(crate) fn work_vectors(g: &Gpu, n: usize) -> Result<Vec<DeviceBuffer<f64>>> {
    (0..SLOTS).map(|_| g.zeros::<f64>(n.max(1))).collect()
}

/// The solvers' operations on the device.
pub struct CudaOps<'a> {
    pub g: &'a Gpu,
    pub op: &'a dyn Operator,
    pub pc: &'a dyn Preconditioner,
    /// A^T and M^T, for BiCG.
    pub transposed: Option<(&'a dyn Operator, &'a dyn Preconditioner)>,
    pub n: usize,
    pub vecs: &'a mut Vec<DeviceBuffer<f64>>,
    pub reduce: &'a mut Reduce,
    /// The scalars of the device-driven iterations and the captured iteration.
    pub looping: Option<(&'a mut DeviceBuffer<f64>, &'a mut Option<Graph>)>,
    /// GMRES's basis as one table (set by `reserve`).
    pub basis: Option<cuda::VectorTable>,
    /// BiCGSTAB up to small_rows.0 rows runs as one block (`bicgstab_block`),
    /// up to small_rows.1 as one cluster (`bicgstab_cluster`), where the
    /// operator and preconditioner allow; 0: never.
    pub small_rows: (usize, usize),
    /// A split preconditioner's M_L (`super::Split::left`).
    pub left: Option<&'a dyn Operator>,
}

fn no_basis() -> Error {
    Error::new(crate::error::ErrorKind::Internal, "the basis is used before Ops::reserve")
}

impl CudaOps<'_> {
    /// Queues BiCGSTAB's iteration as one cluster or one block when the
    /// system is small and the operator and preconditioner have block forms;
    /// false: not queued.
    fn queue_block_iteration(&self, sc: &DeviceBuffer<f64>) -> Result<bool> {
        if self.n > self.small_rows.0.max(self.small_rows.1) {
            return Ok(false);
        }
        let (Some(a), Some(pc)) = (self.op.block_csr(), self.pc.block_form()) else { return Ok(false) };
        let Some(kind) = self.small_kind(&a, pc) else { return Ok(false) };
        let cluster_rows = if a.block > 1 { self.small_rows.1.min(BSR_CLUSTER_ROWS) } else { self.small_rows.1 };
        if self.n <= cluster_rows && self.queue_cluster_iteration(&a, &kind, sc)? {
            return Ok(true);
        }
        // the one block reads CSR only
        if self.n > self.small_rows.0 || a.block > 1 {
            return Ok(false);
        }
        let SmallKind { kind, m, sweeps, scratch: (sa, sb) } = kind;
        use Slot::*;
        let v = |s: Slot| &self.vecs[s.index()];
        let (phat, shat) = if kind == 0 { (P, S) } else { (Phat, Shat) };
        let f = self.g.kernel("krylov", SOURCE, "bicgstab_block")?;
        let n = self.n as i32;
        let mut l = self.g.launcher(&f);
        l.arg(&n).arg(a.row_ptr).arg(a.col).arg(a.values).arg(a.diag).arg(&kind).arg(m).arg(&sweeps).arg(sa).arg(sb);
        for s in [X, R, Rhat, P, phat, V, S, shat, T] {
            l.arg(v(s));
        }
        l.arg(sc);
        self.g.launch("bicgstab_block", l, (1, 1, 1), (1024, 1, 1), 0)?;
        Ok(true)
    }

    /// The small-system kernels' `kind`, `m` and `sweeps` for `pc` over A
    /// (None: ILU(0)'s factors not in A's own pattern); pointers a kind does
    /// not read are a placeholder.
    fn small_kind<'a>(&'a self, a: &BlockCsr<'_>, pc: BlockPrecond<'a>) -> Option<SmallKind<'a>> {
        let none = &self.vecs[Slot::Q.index()];
        Some(match pc {
            BlockPrecond::Identity => SmallKind { kind: 0, m: none, sweeps: 0, scratch: (none, none) },
            BlockPrecond::Diagonal(d) => SmallKind { kind: 1, m: d, sweeps: 0, scratch: (none, none) },
            BlockPrecond::IluSweeps { factors, sweeps, scratch } if std::ptr::eq(factors.row_ptr, a.row_ptr) => {
                SmallKind { kind: 2, m: factors.values, sweeps: sweeps as i32, scratch }
            }
            BlockPrecond::IluSweeps { .. } => return None,
        })
    }

    /// Queues BiCGSTAB's iteration as one cluster with the system in its
    /// shared memory (sm_90 on) where it fits eight blocks; false: not queued.
    /// A BSR matrix takes no diagonal (its block Jacobi has no block form).
    fn queue_cluster_iteration(&self, a: &BlockCsr<'_>, kind: &SmallKind<'_>, sc: &DeviceBuffer<f64>) -> Result<bool> {
        if self.g.info.compute_capability.0 < 9 || self.g.info.driver_version < 12000 || (a.block > 1 && kind.kind == 1) {
            return Ok(false);
        }
        let &SmallKind { kind, m, sweeps, .. } = kind;
        let name = match a.block {
            1 => "bicgstab_cluster".to_string(),
            k => format!("bicgstab_cluster_bsr_k{k}"),
        };
        let f = self.g.kernel("krylov", SOURCE, &name)?;
        let room = self.g.shared_room(&f, &name)?;
        let Some((blocks, rows, entries, bytes)) = cluster_shared(a.host_row_ptr, a.block, kind == 2, room) else {
            return Ok(false);
        };
        let f = self.g.kernel_with_shared("krylov", SOURCE, &name, bytes)?;
        let (n, rows, entries) = (self.n as i32, rows as i32, entries as i32);
        use Slot::*;
        let v = |s: Slot| &self.vecs[s.index()];
        let mut l = self.g.overlapped(&f);
        l.value(&n).value(&rows).value(&entries).buffer(a.row_ptr).buffer(a.col).buffer(a.values).buffer(a.diag);
        l.value(&kind).buffer(m).value(&sweeps).value(&CLUSTER_ITERATIONS);
        for s in [X, R, Rhat, P, V] {
            l.buffer(v(s));
        }
        l.buffer(sc);
        self.g.launch_cluster(&name, &l, blocks, 1024, bytes as u32)?;
        Ok(true)
    }

    /// z = M^-1 r; with `sc`, skipped once a device-driven solve has stopped.
    fn precondition(&self, r: Slot, z: Slot, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        if r == z {
            return Ok(()); // no preconditioner: z is r itself
        }
        self.pc.apply_device(self.g, &self.vecs[r.index()], &self.vecs[z.index()], sc)
    }

    /// Queues one iteration of `method` whose scalars are in `sc` (captured
    /// into a graph: launches only).
    fn queue_iteration(&self, method: Method, sc: &DeviceBuffer<f64>) -> Result<()> {
        let (g, n, reduce) = (self.g, self.n, &*self.reduce);
        let v = |s: Slot| Some(&self.vecs[s.index()]);
        let spmv = |x: Slot, y: Slot| self.op.apply_device(g, &self.vecs[x.index()], &self.vecs[y.index()], Some(sc));
        let step = |name, vectors: &[Option<&DeviceBuffer<f64>>], flag, reduces: bool| {
            solver_kernel(g, name, n, vectors, flag, reduces.then_some(reduce), sc)
        };
        use Slot::*;
        match method {
            Method::Cg => {
                match self.op.apply_pq_device(g, &self.vecs[P.index()], &self.vecs[Q.index()], reduce, sc) {
                    Some(fused) => fused?,
                    None => {
                        spmv(P, Q)?;
                        step("cg_pq", &[v(P), v(Q)], None, true)?;
                    }
                }
                // cg_step applies no preconditioner (flag 0) or a diagonal one
                // itself; flag 1 leaves z = M^-1 r to the preconditioner
                let z = if self.pc.is_identity() {
                    step("cg_step", &[v(P), v(Q), v(X), v(R), None, None], Some(0), true)?;
                    R
                } else if let Some(dinv) = self.pc.inverse_diagonal_device() {
                    step("cg_step", &[v(P), v(Q), v(X), v(R), Some(dinv), v(Z)], Some(0), true)?;
                    Z
                } else {
                    step("cg_step", &[v(P), v(Q), v(X), v(R), None, None], Some(1), true)?;
                    self.precondition(R, Z, Some(sc))?;
                    step("cg_rz", &[v(R), v(Z)], None, true)?;
                    Z
                };
                step("cg_direction", &[v(z), v(P)], None, false)
            }
            Method::Bicgstab if self.queue_block_iteration(sc)? => Ok(()),
            Method::Bicgstab => {
                let (phat, shat) = if self.pc.is_identity() { (P, S) } else { (Phat, Shat) };
                step("bicg_direction", &[v(R), v(V), v(P)], None, false)?;
                self.precondition(P, phat, Some(sc))?;
                spmv(phat, V)?;
                step("bicg_alpha", &[v(Rhat), v(V)], None, true)?;
                step("bicg_s", &[v(R), v(V), v(S)], None, true)?;
                self.precondition(S, shat, Some(sc))?;
                spmv(shat, T)?;
                step("bicg_omega", &[v(T), v(S)], None, true)?;
                step("bicg_update", &[v(phat), v(shat), v(S), v(T), v(Rhat), v(X), v(R)], None, true)
            }
            // these iterate on the host (iterate_on_device is CG's and BiCGSTAB's)
            Method::Gmres { .. } | Method::Bicg | Method::Cgs => {
                Err(Error::new(crate::error::ErrorKind::Internal, format!("{} has no device-driven iteration", method.name())))
            }
        }
    }
}

/// Runs `method` from `start` on the device: its scalars go to `scalars`,
/// `queue` queues one iteration (captured into `graph` on the first
/// solve, replayed after), and the host reads the scalars every few
/// iterations. Any operator whose iteration `queue` can queue uses it;
/// `team` (nonzero: a distributed solve's team table) sums the reductions over the ranks.
/// A split solve's `retarget` gives the tolerance on the split residual
/// that stands for start.tol on the caller's at their present ratio: asked
/// at the looks near the end (within NEAR_END of the tolerance) and at a
/// convergence, which it confirms or resumes from (BiCGSTAB takes no
/// half-step exit there: its s is not confirmed).
#[allow(clippy::too_many_arguments)]
pub fn device_loop(
    g: &Gpu,
    (scalars, graph): (&mut DeviceBuffer<f64>, &mut Option<Graph>),
    method: Method,
    start: &Start,
    history: &mut Vec<f64>,
    team: u64,
    queue: &dyn Fn(&DeviceBuffer<f64>) -> Result<()>,
    mut retarget: Option<&mut dyn FnMut(f64) -> Result<f64>>,
) -> Result<Outcome> {
    use self::{Scalar as S, Status as status};
    let name = method.name();
    let mut relres = start.rr.sqrt() / start.bnorm;
    if start.maxit == 0 {
        return Ok(done(false, 0, relres));
    }
    let mut sc = [0.0f64; S::LEN];
    (sc[S::BNORM], sc[S::TOL], sc[S::MAXIT]) = (start.bnorm, start.tol, start.maxit as f64);
    (sc[S::STATUS], sc[S::ITER], sc[S::RR], sc[S::RZ]) = (status::RUNNING, 0.0, start.rr, start.rz);
    (sc[S::RHO], sc[S::RHO_PREV], sc[S::ALPHA], sc[S::OMEGA]) = (start.rz, 1.0, 1.0, 1.0);
    sc[S::TEAM] = f64::from_bits(team);
    sc[S::HALF_TOL] = if retarget.is_some() { -1.0 } else { start.tol };
    g.upload(&sc, scalars, 0)?;
    let replayed = match graph.take() {
        Some(graph) => graph,
        None => g.capture(name, || queue(scalars))?,
    };
    let graph = &*graph.insert(replayed);
    // replays of the graph before the next look
    let mut batch = 1usize;
    let mut seen = 0usize;
    let mut target = start.tol;
    loop {
        let t = std::time::Instant::now();
        for _ in 0..batch {
            g.replay(name, graph)?;
        }
        g.download(scalars, 0, &mut sc)?;
        let it = sc[S::ITER] as usize;
        let ran = it - seen;
        for k in seen + 1..=it {
            relres = sc[S::HIST + k % S::HIST_LEN];
            history.push(relres);
        }
        seen = it;
        let (it, value) = (it as i64, sc[S::VALUE]);
        let next = it + 1;
        let outcome = match sc[S::STATUS] {
            status::RUNNING => {
                // the iterations a replay runs (several for bicgstab_cluster)
                let per_replay = (ran / batch).max(1);
                let per_iteration = t.elapsed().as_secs_f64() / ran.max(1) as f64;
                if let Some(retarget) = retarget.as_mut().filter(|_| relres <= super::NEAR_END * target) {
                    let new = retarget(start.tol)?;
                    if new != target {
                        target = new;
                        g.upload(&[target], scalars, S::TOL)?;
                    }
                }
                let most = (MAX_BATCH * per_replay).min(S::HIST_LEN);
                let wanted = next_batch(history, target, per_iteration, most).min((start.maxit - it) as usize);
                batch = wanted.div_ceil(per_replay);
                continue;
            }
            status::CONVERGED => {
                // a split solve's stop, not borne out on the caller's residual: on, to what stands for it
                let caller = match retarget.as_mut().filter(|_| it < start.maxit) {
                    Some(retarget) => retarget(start.tol)?,
                    None => relres,
                };
                if relres > caller {
                    target = caller;
                    g.upload(&[target, start.maxit as f64, Status::RUNNING], scalars, S::TOL)?;
                    batch = 1;
                    continue;
                }
                done(true, it, relres)
            }
            status::MAXITER => done(false, it, relres),
            status::BREAK_NAN => broke(it, relres, format!("{name}: the residual is not finite at iteration {it}")),
            status::BREAK_PQ => {
                broke(it, relres, format!("CG: p.Ap = {value:e} at iteration {next}: A is not positive definite"))
            }
            status::BREAK_RHO => broke(it, relres, format!("BiCGSTAB: rho = (r0, r) = {value:e} at iteration {next}")),
            status::BREAK_RV => broke(it, relres, format!("BiCGSTAB: (r0, v) = {value:e} at iteration {next}")),
            status::BREAK_TT => broke(it, relres, format!("BiCGSTAB: (t, t) = {value:e} at iteration {next}")),
            status::BREAK_OMEGA => broke(it, relres, format!("BiCGSTAB: omega = (t, s)/(t, t) = 0 at iteration {it}")),
            status::TEAM_LOST => {
                let why = format!(
                    "{name}: rank {value} of the distributed solve did not answer for a minute at iteration {next}; \
                     the solve gave up (has that rank failed or left the solve?)"
                );
                return Err(Error::new(crate::error::ErrorKind::Device, why));
            }
            other => return Err(Error::new(crate::error::ErrorKind::Internal, format!("{name}: unknown device status {other}"))),
        };
        return Ok(outcome);
    }
}

/// The most replays of an iteration's graph between two looks at the scalars.
const MAX_BATCH: usize = 32;

/// Iterations of `bicgstab_cluster` a launch (it loads the system once a
/// launch; one that finds the solve stopped ends at once): MAX_BATCH of
/// them would pass the history ring, so `device_loop` queues fewer.
const CLUSTER_ITERATIONS: i32 = 8;

/// Iterations to queue before the next look at the device's scalars: about
/// as many as the recent residual decrease says remain (so few run past the
/// end, doing nothing), at most `most`, and no more than 3 ms of iterations (a
/// look, some 30 us, then costs under 1%; long iterations are looked at each time).
fn next_batch(history: &[f64], tol: f64, per_iteration: f64, most: usize) -> usize {
    let cap = (3e-3 / per_iteration).clamp(1.0, most as f64);
    let recent = &history[history.len().saturating_sub(8)..];
    let (first, last) = (recent[0], recent[recent.len() - 1]);
    let rate = (last.ln() - first.ln()) / (recent.len() - 1).max(1) as f64;
    if rate.is_nan() || rate >= 0.0 {
        return cap as usize;
    }
    ((tol.ln() - last.ln()) / rate).ceil().clamp(1.0, cap) as usize
}

impl Ops for CudaOps<'_> {
    fn iterate_on_device(&mut self, method: Method, start: &Start, history: &mut Vec<f64>) -> Option<Result<Outcome>> {
        // None: the iterations run on the host (a distributed solve whose ranks form no team)
        let (scalars, graph) = self.looping.take()?;
        let team = self.op.device_team(self.g);
        let queue = |sc: &DeviceBuffer<f64>| self.queue_iteration(method, sc);
        // a split solve's tolerance, retargeted at the looks (its own reduction scratch: `reduce` is the iteration's)
        let (g, n, v) = (self.g, self.n, &self.vecs);
        let mut retarget = self.left.map(|left| {
            let mut own = None;
            move |tol: f64| -> Result<f64> {
                let reduce = match &mut own {
                    Some(r) => r,
                    None => own.insert(Reduce::new(g)?),
                };
                let at = |s: Slot| &v[s.index()];
                left.apply_device(g, at(Slot::R), at(Slot::Q), None)?;
                left.apply_device(g, at(Slot::B), at(Slot::Z), None)?;
                let caller = reduce.dots(g, n, at(Slot::Q), at(Slot::Q), Some((at(Slot::Z), at(Slot::Z))))?;
                let split = reduce.dots(g, n, at(Slot::R), at(Slot::R), Some((at(Slot::B), at(Slot::B))))?;
                Ok(super::split_target(tol, split, caller))
            }
        });
        let retarget = retarget.as_mut().map(|f| f as &mut dyn FnMut(f64) -> Result<f64>);
        let out = device_loop(self.g, (&mut *scalars, &mut *graph), method, start, history, team, &queue, retarget);
        self.looping = Some((scalars, graph));
        Some(out)
    }
    fn split_tolerance(&mut self, tol: f64) -> Result<Option<f64>> {
        let Some(left) = self.left else { return Ok(None) };
        super::split_tolerance(self, left, tol).map(Some)
    }
    fn is_split(&self) -> bool {
        self.left.is_some()
    }

    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()> {
        self.apply(self.op, x, y)
    }
    fn apply(&mut self, a: &dyn Operator, x: Slot, y: Slot) -> Result<()> {
        a.apply_device(self.g, &self.vecs[x.index()], &self.vecs[y.index()], None)
    }
    fn load(&mut self, v: Slot, from: &Buffer<f64>) -> Result<()> {
        self.g.copy(from.device()?, &mut self.vecs[v.index()])
    }
    fn amax(&mut self, v: Slot) -> Result<f64> {
        cuda::amax(self.g, self.n, &self.vecs[v.index()])
    }
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>> {
        let mut h = crate::error::host_vec(self.n, 0.0, "solver vector")?;
        self.g.download(&self.vecs[v.index()], 0, &mut h)?;
        Ok(h)
    }
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)> {
        let v = &self.vecs;
        let cd = cd.map(|(c, d)| (&v[c.index()], &v[d.index()]));
        self.reduce.dots(self.g, self.n, &v[a.index()], &v[b.index()], cd)
    }
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()> {
        let v = &self.vecs;
        cuda::update(self.g, self.n, &v[w.index()], a, &v[x.index()], b, y.map(|s| &v[s.index()]), c)
    }
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()> {
        self.precondition(r, z, None)
    }
    fn identity_precond(&self) -> bool {
        self.pc.is_identity()
    }
    fn spmv_transpose(&mut self, x: Slot, y: Slot) -> Result<()> {
        let (op, _) = self.transposed.ok_or_else(super::no_transpose)?;
        self.apply(op, x, y)
    }
    fn precond_transpose(&mut self, r: Slot, z: Slot) -> Result<()> {
        let (_, pc) = self.transposed.ok_or_else(super::no_transpose)?;
        pc.apply_device(self.g, &self.vecs[r.index()], &self.vecs[z.index()], None)
    }
    fn reserve(&mut self, count: usize) -> Result<()> {
        // the whole basis checked before its first vector: one at a time they all fit
        // (free memory 0: not known, and the allocations below report their own failure)
        let missing = (SLOTS + count).saturating_sub(self.vecs.len()) as u128 * self.n.max(1) as u128 * 8;
        let free = self.g.free_memory() as u128;
        if free > 0 && missing > free {
            return Err(Error::out_of_memory(format!(
                "GMRES basis ({count} vectors of {}): {:.1} GiB more, the device has {:.1} GiB free",
                self.n,
                crate::error::gib(missing),
                crate::error::gib(free)
            )));
        }
        while self.vecs.len() < SLOTS + count {
            self.vecs.push(self.g.zeros::<f64>(self.n.max(1))?);
        }
        let basis: Vec<_> = self.vecs[SLOTS..SLOTS + count].iter().collect();
        self.basis = Some(cuda::VectorTable::new(self.g, &basis)?);
        Ok(())
    }
    fn basis_dots(&mut self, k: usize) -> Result<Vec<f64>> {
        let table = self.basis.as_mut().ok_or_else(no_basis)?;
        table.dots(self.g, self.n, k, &self.vecs[Slot::Basis(k - 1).index()])
    }
    fn basis_combine(&mut self, w: Slot, c: f64, h: &[f64]) -> Result<()> {
        let table = self.basis.as_mut().ok_or_else(no_basis)?;
        table.combine(self.g, self.n, &self.vecs[w.index()], c, h)
    }
    fn basis_subtract(&mut self, k: usize, h: &[f64]) -> Result<f64> {
        let table = self.basis.as_mut().ok_or_else(no_basis)?;
        table.subtract(self.g, self.n, &self.vecs[Slot::Basis(k).index()], h)
    }
}
