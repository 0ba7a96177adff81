//! Element-by-element CG: the element matrices act as the operator
//! (`EbeOperator`: gather, multiply by K^e, scatter), never assembled;
//! Jacobi from the element diagonals; Dirichlet dofs masked so the iteration
//! is the one the assembled matrix with `fegpu_csr_apply_dirichlet` would
//! run. The CG itself is the Krylov room's (host loop on the CPU,
//! device-driven on CUDA). A distributed solve (`crate::dist::ebe`) runs
//! the same steps over the rank's elements, its vectors holding owned dofs
//! and zero at the dofs other ranks own, through `SharedDofs`.

use super::{cpu, cuda, DeviceSet, ElementSet};
use crate::array::{mixed_backends, Array, Buffer};
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{DeviceBuffer, Gpu, Graph};
use crate::krylov::{cpu::CpuOps, cuda::CudaOps, GlobalSum, Jacobi, Method, Operator, Outcome, Reduced, Slot, SLOTS};
use crate::sparse::{cuda as sparse_cuda, f64_buf};
use std::sync::{Arc, Mutex};

/// The dofs a rank of a distributed solve shares with other ranks: every
/// dof is owned by one rank; a rank's other dofs ("ghosts") are zero in the
/// solver's vectors, so the Krylov methods' sums over a rank's entries,
/// summed over the ranks, count every dof once. The element products give
/// partial sums at shared dofs, which `sum_to_owners` completes.
pub trait SharedDofs: GlobalSum + Send + Sync {
    /// The local dofs another rank owns.
    fn ghosts(&self) -> &[usize];
    /// Copies every owned value to the ranks that hold the dof as a ghost. Collective.
    fn fill_ghosts(&self, v: &mut [f64]) -> Result<()>;
    /// Adds every ghost's value to its owner's, then zeroes the ghosts. Collective.
    fn sum_to_owners(&self, v: &mut [f64]) -> Result<()>;
    fn fill_ghosts_device(&self, g: &Gpu, v: &DeviceBuffer<f64>) -> Result<()>;
    fn sum_to_owners_device(&self, g: &Gpu, v: &DeviceBuffer<f64>) -> Result<()>;
    fn zero_ghosts_device(&self, g: &Gpu, v: &DeviceBuffer<f64>) -> Result<()>;
    /// `local`'s verdict on every rank, refusing `scalars` that differ
    /// between ranks (a collective call's arguments). Collective.
    fn agree(&self, local: Result<()>, scalars: &[f64]) -> Result<()>;
    /// The ranks, this rank's dofs and neighbours, the exchange path.
    fn describe(&self) -> String;
}

/// The solver's vectors and Jacobi data on the host.
struct HostWork {
    vecs: Vec<Vec<f64>>,
    fixed: Vec<u8>,
    values: Vec<f64>,
    diag: Vec<f64>,
    dinv: Buffer<f64>,
}

/// The same on the device, with the reduction scratch and the captured iteration.
struct DeviceWork {
    vecs: Vec<DeviceBuffer<f64>>,
    fixed: DeviceBuffer<u8>,
    values: DeviceBuffer<f64>,
    diag: DeviceBuffer<f64>,
    dinv: Buffer<f64>,
    reduce: crate::array::cuda::Reduce,
    scalars: DeviceBuffer<f64>,
    iteration: Option<Graph>,
}

/// The one place the solver's backend is decided: at creation.
enum Work {
    Cpu(HostWork),
    Cuda(Box<DeviceWork>),
}

struct State {
    work: Work,
    /// The element-matrix version the diagonal was built from.
    built_for: Option<u64>,
    history: Vec<f64>,
}

pub struct EbeSolver {
    pub set: Arc<ElementSet>,
    /// K^e recomputed in every product instead of read from storage.
    pub on_the_fly: bool,
    /// Some: this rank's part of a distributed solve.
    pub shared: Option<Arc<dyn SharedDofs>>,
    state: Mutex<State>,
}

/// Where the products take K^e from.
enum Source<'a> {
    Stored(&'a Buffer<f64>),
    OnTheFly(&'a super::Materials),
}

/// K^e on the device: stored, or recomputed from the materials' properties.
#[derive(Clone, Copy)]
enum DeviceMatrices<'a> {
    Stored(&'a DeviceBuffer<f64>),
    OnTheFly(&'a DeviceBuffer<f64>),
}

/// K applied element by element, the `fixed` dofs masked as Dirichlet
/// conditions on the assembled matrix would be (y = diag x there): the
/// Krylov methods' operator. Holds the parts of the backend the set lives on.
struct EbeOperator<'a> {
    set: &'a ElementSet,
    host: Option<(cpu::ElementMatrices<'a>, &'a [u8], &'a [f64])>,
    device: Option<(&'a DeviceSet, DeviceMatrices<'a>, &'a DeviceBuffer<u8>, &'a DeviceBuffer<f64>)>,
    /// A distributed solve's sharing, with x's copy whose ghosts it fills.
    shared: Option<(&'a dyn SharedDofs, Ghosted)>,
}

/// x with the ghosts' values filled in, where the backend keeps it.
enum Ghosted {
    Host(Mutex<Vec<f64>>),
    Device(DeviceBuffer<f64>),
}

impl Operator for EbeOperator<'_> {
    fn apply_host(&self, x: &[f64], y: &mut [f64]) -> Result<()> {
        let (matrices, fixed, diag) = self.host.as_ref().ok_or_else(mixed_backends)?;
        match &self.shared {
            None => cpu::ebe_apply(self.set, matrices, Some(fixed), diag, x, y),
            Some((s, Ghosted::Host(full))) => {
                let mut full = full.lock().unwrap_or_else(|p| p.into_inner());
                full.copy_from_slice(x);
                s.fill_ghosts(&mut full)?;
                cpu::ebe_apply(self.set, matrices, Some(fixed), diag, &full, y);
                s.sum_to_owners(y)?;
            }
            Some(_) => return Err(mixed_backends()),
        }
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let (device, matrices, fixed, diag) = self.device.ok_or_else(mixed_backends)?;
        let x = match &self.shared {
            None => x,
            Some((s, Ghosted::Device(full))) => {
                crate::array::cuda::update(g, self.set.dofs(), full, 1.0, x, 0.0, None, 0.0)?;
                s.fill_ghosts_device(g, full)?;
                full
            }
            Some(_) => return Err(mixed_backends()),
        };
        match matrices {
            DeviceMatrices::Stored(ke) => cuda::ebe_apply(g, self.set, device, ke, Some((fixed, diag)), x, y, sc)?,
            DeviceMatrices::OnTheFly(props) => cuda::ebe_otf(g, self.set, device, props, Some((fixed, diag)), x, y, None, sc)?,
        }
        match &self.shared {
            Some((s, _)) => s.sum_to_owners_device(g, y),
            None => Ok(()),
        }
    }
}

impl EbeSolver {
    /// A solver for the set's element matrices with x[dofs[i]] = values[i]
    /// (dofs counted from `base`, distinct); `on_the_fly`: recompute K^e in
    /// every product (no stored matrices needed).
    pub fn new(set: Arc<ElementSet>, dofs: &[i64], base: i64, values: &[f64], on_the_fly: bool) -> Result<EbeSolver> {
        let (fixed, g) = constraints(&set, dofs, base, values)?;
        EbeSolver::with_constraints(set, fixed, g, on_the_fly, None)
    }

    /// The solver for constraint flags and values per dof (`constraints`),
    /// one rank's part of a distributed solve with `shared`.
    pub fn with_constraints(
        set: Arc<ElementSet>,
        fixed: Vec<u8>,
        g: Vec<f64>,
        on_the_fly: bool,
        shared: Option<Arc<dyn SharedDofs>>,
    ) -> Result<EbeSolver> {
        if on_the_fly {
            set.element.linear_only("element-by-element CG with K^e on the fly")?;
        }
        set.check_nodes_used("element-by-element CG")?;
        let n = set.dofs();
        let work = match set.ctx.gpu() {
            None => Work::Cpu(HostWork {
                vecs: vec![vec![0.0; n]; SLOTS],
                fixed,
                values: g,
                diag: vec![0.0; n],
                dinv: Buffer::Host(vec![0.0; n]),
            }),
            Some(gpu) => Work::Cuda(Box::new(DeviceWork {
                vecs: crate::krylov::cuda::work_vectors(gpu, n)?,
                fixed: sparse_cuda::upload(gpu, &fixed)?,
                values: sparse_cuda::upload(gpu, &g)?,
                diag: gpu.alloc(n)?,
                dinv: Buffer::Device(gpu.alloc(n)?),
                reduce: crate::array::cuda::Reduce::new(gpu)?,
                scalars: gpu.alloc(crate::krylov::cuda::Scalar::LEN)?,
                iteration: None,
            })),
        };
        Ok(EbeSolver { set, on_the_fly, shared, state: Mutex::new(State { work, built_for: None, history: Vec::new() }) })
    }

    fn check(&self, v: &Array, arg: &str) -> Result<()> {
        if !Arc::ptr_eq(&v.ctx, &self.set.ctx) {
            return Err(Error::invalid(format!("{arg} belongs to another context than the element set")));
        }
        if v.dtype != crate::array::Dtype::F64 {
            return Err(Error::invalid(format!("{arg} holds {} elements; the solver uses f64", v.dtype.name())));
        }
        if v.len() != self.set.dofs() {
            return Err(Error::size(format!("{arg} has {} elements; the set has {} dofs", v.len(), self.set.dofs())));
        }
        Ok(())
    }

    /// Solves K x = b under the Dirichlet conditions by Jacobi-preconditioned
    /// CG: `x` holds the initial guess on entry and the iterate on return; `b`
    /// is not changed. Returns the outcome and the true relative residual.
    pub fn solve(&self, b: &Array, x: &Array, tol: f64, maxit: i64) -> Result<(Outcome, f64)> {
        let checked = (|| {
            self.check(b, "b")?;
            self.check(x, "x")?;
            if std::ptr::eq(b, x) {
                return Err(Error::invalid("b and x are the same array"));
            }
            crate::krylov::check_stopping(tol, maxit)?;
            if !self.on_the_fly {
                self.set.with_stiffness(|_, _| Ok(()))?;
            }
            Ok(())
        })();
        // what one rank refuses, every rank refuses before iterating
        match &self.shared {
            Some(s) => s.agree(checked, &[tol, maxit as f64])?,
            None => checked?,
        }
        let set = &*self.set;
        let mut st = crate::error::locked(&self.state, "the EBE solver")?;
        let (mut gb, mut gx) = crate::array::lock_pair(b, x, "b", "x")?;
        let (bb, xb) = (f64_buf(&mut gb), f64_buf(&mut gx));
        if self.on_the_fly {
            let m = set.materials()?;
            self.solve_with(&mut st, Source::OnTheFly(&m), None, bb, xb, tol, maxit)
        } else {
            set.with_stiffness(|ke, version| self.solve_with(&mut st, Source::Stored(ke), Some(version), bb, xb, tol, maxit))
        }
    }

    /// The solve from K^e's `source`; the Jacobi diagonal is rebuilt when
    /// `version` (of the stored matrices) changed, or every time on the fly.
    /// The solver's work decides the backend; b, x and K^e must be on it.
    #[allow(clippy::too_many_arguments)]
    fn solve_with(
        &self,
        st: &mut State,
        source: Source,
        version: Option<u64>,
        b: &mut Buffer<f64>,
        x: &mut Buffer<f64>,
        tol: f64,
        maxit: i64,
    ) -> Result<(Outcome, f64)> {
        st.history.clear();
        let mut stale = version.is_none() || st.built_for != version;
        if let Some(s) = &self.shared {
            // the diagonal's rebuild exchanges values: every rank rebuilds when one must
            let mut any = [f64::from(u8::from(stale))];
            s.max(&mut any)?;
            stale = any[0] > 0.0;
        }
        let State { work, built_for, history } = st;
        let out = match (work, b, x) {
            (Work::Cpu(w), Buffer::Host(b), Buffer::Host(x)) => {
                let matrices = match source {
                    Source::Stored(Buffer::Host(ke)) => cpu::ElementMatrices::Stored(ke),
                    Source::OnTheFly(m) => cpu::ElementMatrices::OnTheFly(&m.props),
                    Source::Stored(Buffer::Device(_)) => return Err(mixed_backends()),
                };
                self.solve_host(w, matrices, stale, b, x, tol, maxit, history)
            }
            (Work::Cuda(w), Buffer::Device(b), Buffer::Device(x)) => {
                let matrices = match &source {
                    Source::Stored(Buffer::Device(ke)) => DeviceMatrices::Stored(ke),
                    Source::OnTheFly(m) => DeviceMatrices::OnTheFly(m.device.as_ref().ok_or_else(mixed_backends)?),
                    Source::Stored(Buffer::Host(_)) => return Err(mixed_backends()),
                };
                self.solve_device(w, matrices, stale, b, x, tol, maxit, history)
            }
            _ => Err(mixed_backends()),
        };
        // a failed call may have left the diagonal half-built: rebuild next time
        if out.is_ok() {
            *built_for = version;
        }
        out
    }

    /// The host solve: b with the conditions folded in, then the Krylov host loop.
    #[allow(clippy::too_many_arguments)]
    fn solve_host(
        &self,
        w: &mut HostWork,
        matrices: cpu::ElementMatrices,
        stale: bool,
        b: &[f64],
        x: &mut [f64],
        tol: f64,
        maxit: i64,
        history: &mut Vec<f64>,
    ) -> Result<(Outcome, f64)> {
        let set = &*self.set;
        let shared = self.shared.as_deref();
        let ghosts = shared.map_or(&[][..], |s| s.ghosts());
        let HostWork { vecs, fixed, values, diag, dinv } = w;
        if stale {
            cpu::ebe_diagonal(set, &matrices, diag);
            let built = match shared {
                Some(s) => {
                    s.sum_to_owners(diag).and_then(|()| s.agree(inverse(diag, ghosts).map(|d| *dinv = Buffer::Host(d)), &[]))
                }
                None => inverse(diag, ghosts).map(|d| *dinv = Buffer::Host(d)),
            };
            built?;
        }
        // b with the conditions: free rows lose K g, fixed rows get diag g
        let mut t = vec![0.0; values.len()];
        cpu::ebe_apply(set, &matrices, None, diag, values, &mut t);
        let rhs = &mut vecs[Slot::B.index()];
        for i in 0..t.len() {
            rhs[i] = b[i] - t[i];
        }
        if let Some(s) = shared {
            s.sum_to_owners(rhs)?;
        }
        for i in (0..t.len()).filter(|&i| fixed[i] != 0) {
            rhs[i] = diag[i] * values[i];
        }
        vecs[Slot::X.index()].copy_from_slice(x);
        ghosts.iter().for_each(|&i| vecs[Slot::X.index()][i] = 0.0);
        let shared_op = shared.map(|s| (s, Ghosted::Host(Mutex::new(vec![0.0; x.len()]))));
        let op = EbeOperator { set, host: Some((matrices, &fixed[..], &diag[..])), device: None, shared: shared_op };
        let mut ops = CpuOps { op: &op, pc: &Jacobi { inverse: dinv }, transposed: None, vecs, left: None };
        let out = match shared {
            None => crate::krylov::run(&mut ops, Method::Cg, tol, maxit, history)?,
            Some(s) => crate::krylov::run(&mut Reduced { inner: &mut ops, global: s }, Method::Cg, tol, maxit, history)?,
        };
        x.copy_from_slice(&ops.vecs[Slot::X.index()]);
        if let Some(s) = shared {
            s.fill_ghosts(x)?;
        }
        Ok(out)
    }

    /// The device solve: the same steps with every vector on the device and
    /// the device-driven Krylov loop.
    #[allow(clippy::too_many_arguments)]
    fn solve_device(
        &self,
        w: &mut DeviceWork,
        matrices: DeviceMatrices,
        stale: bool,
        b: &DeviceBuffer<f64>,
        x: &mut DeviceBuffer<f64>,
        tol: f64,
        maxit: i64,
        history: &mut Vec<f64>,
    ) -> Result<(Outcome, f64)> {
        let set = &*self.set;
        let shared = self.shared.as_deref();
        let ghosts = shared.map_or(&[][..], |s| s.ghosts());
        let g = set.ctx.device()?;
        let device = set.device.as_ref().ok_or_else(mixed_backends)?;
        let DeviceWork { vecs, fixed, values, diag, dinv, reduce, scalars, iteration } = w;
        let n = set.dofs();
        if stale {
            match matrices {
                DeviceMatrices::Stored(ke) => cuda::ebe_diagonal(g, set, device, ke, diag)?,
                DeviceMatrices::OnTheFly(props) => cuda::ebe_otf(g, set, device, props, None, values, values, Some(diag), None)?,
            }
            if let Some(s) = shared {
                s.sum_to_owners_device(g, diag)?;
            }
            let mut host = vec![0.0; n];
            g.download(diag, 0, &mut host)?;
            let inv = inverse(&host, ghosts);
            let inv = match shared {
                Some(s) => s.agree(inv.as_ref().map(|_| ()).map_err(Error::clone), &[]).and(inv),
                None => inv,
            }?;
            if let Buffer::Device(d) = dinv {
                g.upload(&inv, d, 0)?;
            }
        }
        // t = K g, unmasked: the conditions' pull on the free rows
        let t = &vecs[Slot::T.index()];
        match matrices {
            DeviceMatrices::Stored(ke) => cuda::ebe_apply(g, set, device, ke, None, values, t, None)?,
            DeviceMatrices::OnTheFly(props) => cuda::ebe_otf(g, set, device, props, None, values, t, None, None)?,
        }
        g.copy(b, &mut vecs[Slot::B.index()])?;
        if let Some(s) = shared {
            // b - t summed at the owners first; the conditions then take t as zero
            let (t, rhs) = (&vecs[Slot::T.index()], &vecs[Slot::B.index()]);
            crate::array::cuda::update(g, n, rhs, -1.0, t, 0.0, None, 1.0)?;
            s.sum_to_owners_device(g, rhs)?;
            g.fill_bytes(&mut vecs[Slot::T.index()], 0)?;
        }
        cuda::dirichlet_rhs(g, n, fixed, values, diag, &vecs[Slot::T.index()], &vecs[Slot::B.index()])?;
        g.copy(x, &mut vecs[Slot::X.index()])?;
        let shared_op = match shared {
            Some(s) => {
                s.zero_ghosts_device(g, &vecs[Slot::X.index()])?;
                Some((s, Ghosted::Device(g.alloc(n)?)))
            }
            None => None,
        };
        let op = EbeOperator { set, host: None, device: Some((device, matrices, &*fixed, &*diag)), shared: shared_op };
        // a distributed solve iterates on the host, which holds the global scalars
        let looping = if shared.is_none() { Some((scalars, iteration)) } else { None };
        let mut ops = CudaOps {
            g,
            op: &op,
            pc: &Jacobi { inverse: dinv },
            transposed: None,
            n,
            vecs,
            reduce,
            looping,
            basis: None,
            small_rows: (0, 0),
            left: None,
        };
        let out = match shared {
            None => crate::krylov::run(&mut ops, Method::Cg, tol, maxit, history)?,
            Some(s) => crate::krylov::run(&mut Reduced { inner: &mut ops, global: s }, Method::Cg, tol, maxit, history)?,
        };
        g.copy(&ops.vecs[Slot::X.index()], x)?;
        if let Some(s) = shared {
            s.fill_ghosts_device(g, x)?;
        }
        g.synchronize("solve")?;
        Ok(out)
    }

    pub fn history(&self) -> Vec<f64> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).history.clone()
    }
}

/// The flags (1: fixed) and values per dof of x[dofs[i]] = values[i]
/// (dofs counted from `base`, distinct, values finite).
pub fn constraints(set: &ElementSet, dofs: &[i64], base: i64, values: &[f64]) -> Result<(Vec<u8>, Vec<f64>)> {
    crate::sparse::dirichlet_conditions(set.dofs(), "dofs", dofs, base, values)
}

/// 1 / diag, refusing a zero (a dof no element touches, or a singular set);
/// 0 at the `ghosts`, whose entries the solver keeps zero.
fn inverse(diag: &[f64], ghosts: &[usize]) -> Result<Vec<f64>> {
    let mut ghost = vec![false; diag.len()];
    ghosts.iter().for_each(|&i| ghost[i] = true);
    diag.iter()
        .enumerate()
        .map(|(i, &d)| {
            if ghost[i] {
                Ok(0.0)
            } else if d == 0.0 || !d.is_finite() {
                Err(Error::new(
                    ErrorKind::Breakdown,
                    format!("Jacobi: the diagonal of dof {i} (0-based) is {d}: no element stiffens it"),
                ))
            } else {
                Ok(1.0 / d)
            }
        })
        .collect()
}
