//! The Krylov methods, written once: CG and BiCGSTAB (here), GMRES(m)
//! (`gmres.rs`), BiCG and CGS (`lanczos.rs`) over an `Operator` (y = A x)
//! and a `Preconditioner` (z = M^-1 r), through `Ops`, the vector algebra of
//! the backend the vectors live on. The CPU reference iterates on the host
//! (`cpu.rs`); CUDA (`cuda.rs`) runs CG and BiCGSTAB on the device with the
//! scalars kept there, one iteration replayed as a CUDA graph, the host
//! looking at the scalars every few iterations; GMRES, BiCG and CGS iterate
//! on the host over device vectors. Operators: CSR matrices
//! (`sparse`), element-by-element products (`fem::ebe`); preconditioners:
//! the identity and Jacobi (here), ILU(0) (`sparse`); a preconditioner
//! applied split (`Split`, `run_split`: multicolour ILU(0) by Eisenstat's
//! trick) makes the method's operator M_L^-1 A M_R^-1. A distributed solve
//! (`crate::dist`) runs the same methods through `Reduced`, which finishes
//! every reduction over the ranks with one `GlobalSum` call.

pub mod cpu;
pub mod cuda;
mod gmres;
mod lanczos;

use crate::array::Buffer;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{DeviceBuffer, Gpu};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Cg,
    Bicgstab,
    /// GMRES restarted every `restart` iterations, right-preconditioned.
    Gmres {
        restart: usize,
    },
    /// BiCG: needs the products with A^T and M^-T.
    Bicg,
    Cgs,
}

impl Method {
    /// GMRES's restart length when the caller names none (PETSc's and cupyx's is 30 too).
    pub const DEFAULT_RESTART: usize = 30;
    /// The largest GMRES restart taken: the basis holds restart + 1 vectors
    /// and the Hessenberg matrix restart^2 values.
    pub const MAX_RESTART: usize = 10_000;

    pub fn name(self) -> &'static str {
        match self {
            Method::Cg => "CG",
            Method::Bicgstab => "BiCGSTAB",
            Method::Gmres { .. } => "GMRES",
            Method::Bicg => "BiCG",
            Method::Cgs => "CGS",
        }
    }

    /// The method's number (the C API's FEGPU_METHOD_* code).
    pub fn id(self) -> i64 {
        match self {
            Method::Cg => 1,
            Method::Bicgstab => 2,
            Method::Gmres { .. } => 3,
            Method::Bicg => 4,
            Method::Cgs => 5,
        }
    }

    /// Whether the method multiplies by A^T and applies M^-T.
    pub fn needs_transpose(self) -> bool {
        self == Method::Bicg
    }
}

/// The method's name, GMRES with its restart: GMRES(30).
impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::Gmres { restart } => write!(f, "GMRES({restart})"),
            other => write!(f, "{}", other.name()),
        }
    }
}

/// y = A x where the vectors live: the CPU reference's host loop calls
/// `apply_host`, the CUDA loop `apply_device` (and captures it in a graph).
pub trait Operator {
    fn apply_host(&self, x: &[f64], y: &mut [f64]) -> Result<()>;
    /// With `sc`, the product does nothing once a device-driven solve has stopped.
    fn apply_device(&self, g: &Gpu, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()>;
    /// q = A p with CG's p.q reduced in the same pass, where the operator has
    /// such a kernel; None: the product and the reduction run apart.
    fn apply_pq_device(
        &self,
        _g: &Gpu,
        _p: &DeviceBuffer<f64>,
        _q: &DeviceBuffer<f64>,
        _reduce: &crate::array::cuda::Reduce,
        _sc: &DeviceBuffer<f64>,
    ) -> Option<Result<()>> {
        None
    }
    /// The operator as a CSR matrix on the device, for the small-system
    /// iteration (`cuda::BlockCsr`); None: not a CSR matrix.
    fn block_csr(&self) -> Option<cuda::BlockCsr<'_>> {
        None
    }
    /// A distributed operator's team table (kernels/common.cuh), whose ranks
    /// sum a device-driven iteration's reductions on the device; 0: none.
    fn device_team(&self, _g: &Gpu) -> u64 {
        0
    }
}

/// z = M^-1 r where the vectors live.
pub trait Preconditioner {
    /// M = I: the methods then use r itself as z and never call `apply_*`.
    fn is_identity(&self) -> bool {
        false
    }
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()>;
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()>;
    /// M^-1 as a diagonal on the device (Jacobi): CG's fused step applies it itself.
    fn inverse_diagonal_device(&self) -> Option<&DeviceBuffer<f64>> {
        None
    }
    /// The preconditioner in a form the small-system iteration applies
    /// itself (`cuda::BlockPrecond`); None: it has none.
    fn block_form(&self) -> Option<cuda::BlockPrecond<'_>> {
        None
    }
}

/// No preconditioning.
pub struct Identity;

impl Preconditioner for Identity {
    fn is_identity(&self) -> bool {
        true
    }
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()> {
        z.copy_from_slice(r);
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, _sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        crate::array::cuda::update(g, r.len(), z, 1.0, r, 0.0, None, 0.0)
    }
    fn block_form(&self) -> Option<cuda::BlockPrecond<'_>> {
        Some(cuda::BlockPrecond::Identity)
    }
}

/// Jacobi: M = diag(A), kept as its inverse where the backend works.
pub struct Jacobi<'a> {
    pub inverse: &'a Buffer<f64>,
}

impl Preconditioner for Jacobi<'_> {
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()> {
        z.iter_mut().zip(r).zip(self.inverse.host()?).for_each(|((z, r), d)| *z = d * r);
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        crate::array::cuda::scale(g, r.len(), self.inverse.device()?, r, z, sc)
    }
    fn inverse_diagonal_device(&self) -> Option<&DeviceBuffer<f64>> {
        self.inverse.device().ok()
    }
    fn block_form(&self) -> Option<cuda::BlockPrecond<'_>> {
        self.inverse.device().ok().map(cuda::BlockPrecond::Diagonal)
    }
}

/// Work vectors of the solvers: twelve named ones, then GMRES's basis
/// vectors, allocated when a GMRES solve first asks for them (`Ops::reserve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    X,
    B,
    R,
    Rhat,
    P,
    Phat,
    V,
    S,
    Shat,
    T,
    Z,
    Q,
    Basis(usize),
}
/// The named slots.
pub const SLOTS: usize = 12;

impl Slot {
    /// Where the slot is in the backend's list of vectors.
    pub fn index(self) -> usize {
        use Slot::*;
        match self {
            X => 0,
            B => 1,
            R => 2,
            Rhat => 3,
            P => 4,
            Phat => 5,
            V => 6,
            S => 7,
            Shat => 8,
            T => 9,
            Z => 10,
            Q => 11,
            Basis(k) => SLOTS + k,
        }
    }
}

/// What the algorithms need from a backend.
pub trait Ops {
    /// y = A x
    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()>;
    /// y = a x with another operator than the method's (a split
    /// preconditioner's maps, A itself beside the split operator).
    fn apply(&mut self, a: &dyn Operator, x: Slot, y: Slot) -> Result<()>;
    /// Slot `v` from a vector kept where the backend keeps its own.
    fn load(&mut self, v: Slot, from: &Buffer<f64>) -> Result<()>;
    /// (a.b, c.d), reductions finished where the vectors live.
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)>;
    /// w = a*x + b*y + c*w
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()>;
    /// z = M^-1 r
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()>;
    /// M = I: the methods use r itself where z would be.
    fn identity_precond(&self) -> bool;
    /// y = A^T x (BiCG); an error where the solve has no transpose.
    fn spmv_transpose(&mut self, _x: Slot, _y: Slot) -> Result<()> {
        Err(no_transpose())
    }
    /// z = M^-T r (BiCG); an error where the solve has no transpose.
    fn precond_transpose(&mut self, _r: Slot, _z: Slot) -> Result<()> {
        Err(no_transpose())
    }
    /// Makes `Slot::Basis(0..count)` available (zeroed when new).
    fn reserve(&mut self, count: usize) -> Result<()>;
    /// Basis(i) . Basis(k-1) for i < k (the last: the newest vector's
    /// squared norm); backends read the basis in one pass.
    fn basis_dots(&mut self, k: usize) -> Result<Vec<f64>> {
        let w = Slot::Basis(k - 1);
        let mut out = vec![0.0; k];
        for i in (0..k).step_by(2) {
            let (a, b) = self.dots(Slot::Basis(i), w, (i + 1 < k).then_some((Slot::Basis(i + 1), w)))?;
            out[i] = a;
            if i + 1 < k {
                out[i + 1] = b;
            }
        }
        Ok(out)
    }
    /// w = c w + sum_i h[i] Basis(i) (w not among those Basis(i)).
    fn basis_combine(&mut self, w: Slot, c: f64, h: &[f64]) -> Result<()> {
        for (i, &hi) in h.iter().enumerate() {
            self.update(w, hi, Slot::Basis(i), 0.0, None, if i == 0 { c } else { 1.0 })?;
        }
        Ok(())
    }
    /// Basis(k) -= sum_{i<k} h[i] Basis(i), h the projections `basis_dots`
    /// just returned; returns its squared norm after (backends fuse it).
    fn basis_subtract(&mut self, k: usize, h: &[f64]) -> Result<f64> {
        let minus: Vec<f64> = h.iter().map(|c| -c).collect();
        self.basis_combine(Slot::Basis(k), 1.0, &minus)?;
        Ok(self.dots(Slot::Basis(k), Slot::Basis(k), None)?.0)
    }
    /// max |v_i| of slot `v` (NaN when any element is NaN).
    fn amax(&mut self, v: Slot) -> Result<f64>;
    /// Slot `v` on the host (error paths only: to name an offending element).
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>>;
    /// w = a*x + b*y + c*w, returning (w.w, w.u) (w.u = 0 without u);
    /// backends fuse the passes.
    #[allow(clippy::too_many_arguments)]
    fn update_dots(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64, u: Option<Slot>) -> Result<(f64, f64)> {
        self.update(w, a, x, b, y, c)?;
        self.dots(w, w, u.map(|u| (w, u)))
    }
    /// With a split preconditioner (`Split::left`, which the backend holds):
    /// the tolerance on the split residual ||R|| / ||B|| that stands for
    /// `tol` on the caller's, ||M_L R|| / ||M_L B||, at their present ratio
    /// (slots Q and Z are scratch); None without one.
    fn split_tolerance(&mut self, _tol: f64) -> Result<Option<f64>> {
        Ok(None)
    }
    /// Whether the backend holds a split preconditioner's M_L (`split_tolerance` answers).
    fn is_split(&self) -> bool {
        false
    }
    /// Runs the method's iterations where the vectors live, from the state
    /// `start` that the set-up left; None: the caller iterates on the host.
    fn iterate_on_device(&mut self, _method: Method, _start: &Start, _history: &mut Vec<f64>) -> Option<Result<Outcome>> {
        None
    }
}

/// A solve's stopping arguments, checked: tol positive and finite, maxit >= 0.
pub fn check_stopping(tol: f64, maxit: i64) -> Result<()> {
    if tol <= 0.0 || !tol.is_finite() {
        return Err(Error::invalid(format!("tol = {tol}: must be positive and finite")));
    }
    if maxit < 0 {
        return Err(Error::invalid(format!("maxit = {maxit}: must be >= 0")));
    }
    Ok(())
}

fn no_transpose() -> Error {
    Error::unsupported("BiCG needs A^T and M^-T, which this solve does not have: use BiCGSTAB, CGS or GMRES")
}

/// Reductions over the ranks of a distributed solve (`crate::dist`): the
/// Krylov room stays free of any transport.
pub trait GlobalSum {
    /// Sums each element of `v` over the ranks, in place, in one call.
    fn sum(&self, v: &mut [f64]) -> Result<()>;
    /// The largest of each element of `v` over the ranks, in place.
    fn max(&self, v: &mut [f64]) -> Result<()>;
}

/// The operations of a distributed solve: the rank's own `inner` operations
/// on its rows, each reduction then summed over the ranks (a dot pair in one
/// call). The iterations run on the host, which holds the global scalars,
/// unless the ranks form a team (`crate::dist`), whose device-driven
/// iterations sum their reductions on the device.
pub struct Reduced<'a> {
    pub inner: &'a mut dyn Ops,
    pub global: &'a dyn GlobalSum,
}

impl Ops for Reduced<'_> {
    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()> {
        self.inner.spmv(x, y)
    }
    fn apply(&mut self, a: &dyn Operator, x: Slot, y: Slot) -> Result<()> {
        self.inner.apply(a, x, y)
    }
    fn load(&mut self, v: Slot, from: &Buffer<f64>) -> Result<()> {
        self.inner.load(v, from)
    }
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)> {
        let (ab, cd) = self.inner.dots(a, b, cd)?;
        let mut v = [ab, cd];
        self.global.sum(&mut v)?;
        Ok((v[0], v[1]))
    }
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()> {
        self.inner.update(w, a, x, b, y, c)
    }
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()> {
        self.inner.precond(r, z)
    }
    fn identity_precond(&self) -> bool {
        self.inner.identity_precond()
    }
    // no transposed product: the rank's own one would miss the halo's
    // reverse exchange, so BiCG is refused over the ranks
    fn reserve(&mut self, count: usize) -> Result<()> {
        self.inner.reserve(count)
    }
    fn basis_dots(&mut self, k: usize) -> Result<Vec<f64>> {
        let mut d = self.inner.basis_dots(k)?;
        self.global.sum(&mut d)?;
        Ok(d)
    }
    fn basis_combine(&mut self, w: Slot, c: f64, h: &[f64]) -> Result<()> {
        self.inner.basis_combine(w, c, h)
    }
    fn amax(&mut self, v: Slot) -> Result<f64> {
        let local = self.inner.amax(v)?;
        // a NaN on any rank must give NaN, which a max does not carry: a flag beside the value does
        let mut m = [f64::from(u8::from(local.is_nan())), if local.is_nan() { 0.0 } else { local }];
        self.global.max(&mut m)?;
        Ok(if m[0] > 0.0 { f64::NAN } else { m[1] })
    }
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>> {
        self.inner.fetch(v)
    }
    // only where the ranks form a team, which sums the reductions on the device
    fn iterate_on_device(&mut self, method: Method, start: &Start, history: &mut Vec<f64>) -> Option<Result<Outcome>> {
        self.inner.iterate_on_device(method, start, history)
    }
    fn update_dots(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64, u: Option<Slot>) -> Result<(f64, f64)> {
        let (ww, wu) = self.inner.update_dots(w, a, x, b, y, c, u)?;
        let mut v = [ww, wu];
        self.global.sum(&mut v)?;
        Ok((v[0], v[1]))
    }
}

/// The state after a method's set-up: ||b||, the tolerance and iteration
/// limit, (r, r), and (r, z) for CG or rho = (r0, r) for BiCGSTAB.
pub struct Start {
    pub bnorm: f64,
    pub tol: f64,
    pub maxit: i64,
    pub rr: f64,
    pub rz: f64,
}

/// How a solve ended (the status code says the same).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub converged: bool,
    pub iterations: i64,
    /// ||r|| / ||b|| of the recursively updated residual at the end.
    pub relative_residual: f64,
    /// Why it stopped early, when it broke down.
    pub breakdown: Option<String>,
    /// The true relative residual where the iterations' met the tolerance
    /// and it did not (more than TRUE_RESIDUAL_SLACK times): not converged.
    pub unmet: Option<f64>,
}

/// How far above the tolerance the true relative residual of a solve the
/// iterations call converged may lie before the solve is reported as not
/// converged (rounding parts the two on ill-conditioned or badly scaled systems).
pub const TRUE_RESIDUAL_SLACK: f64 = 100.0;

/// Records an iteration's residual; Some(outcome) when the method stops there.
fn record(history: &mut Vec<f64>, method: &str, it: i64, relres: f64, tol: f64) -> Option<Outcome> {
    history.push(relres);
    if !relres.is_finite() {
        return Some(broke(it, relres, format!("{method}: the residual is not finite at iteration {it}")));
    }
    (relres <= tol).then(|| done(true, it, relres))
}

fn dot(ops: &mut dyn Ops, a: Slot, b: Slot) -> Result<f64> {
    Ok(ops.dots(a, b, None)?.0)
}

fn broke(iterations: i64, relres: f64, why: String) -> Outcome {
    Outcome { converged: false, iterations, relative_residual: relres, breakdown: Some(why), unmet: None }
}

fn done(converged: bool, iterations: i64, relres: f64) -> Outcome {
    Outcome { converged, iterations, relative_residual: relres, breakdown: None, unmet: None }
}

/// r = b - A x; returns ||b|| and r.r (one pass for both).
fn initial_residual(ops: &mut dyn Ops) -> Result<(f64, f64)> {
    ops.spmv(Slot::X, Slot::Q)?;
    ops.update(Slot::R, 1.0, Slot::B, -1.0, Some(Slot::Q), 0.0)?;
    let (bb, rr) = ops.dots(Slot::B, Slot::B, Some((Slot::R, Slot::R)))?;
    Ok((bb.sqrt(), rr))
}

/// Preconditioned conjugate gradients (SPD A).
pub fn cg(ops: &mut dyn Ops, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let (bnorm, rr) = initial_residual(ops)?;
    let z = if ops.identity_precond() { Slot::R } else { Slot::Z };
    let mut relres = rr.sqrt() / bnorm;
    history.push(relres);
    if relres <= tol {
        return Ok(done(true, 0, relres));
    }
    ops.precond(Slot::R, z)?;
    let mut rz = dot(ops, Slot::R, z)?;
    ops.update(Slot::P, 1.0, z, 0.0, None, 0.0)?;
    if let Some(out) = ops.iterate_on_device(Method::Cg, &Start { bnorm, tol, maxit, rr, rz }, history) {
        return out;
    }
    for it in 1..=maxit {
        ops.spmv(Slot::P, Slot::Q)?;
        let pq = dot(ops, Slot::P, Slot::Q)?;
        if pq <= 0.0 || !pq.is_finite() {
            return Ok(broke(it - 1, relres, format!("CG: p.Ap = {pq:e} at iteration {it}: A is not positive definite")));
        }
        let alpha = rz / pq;
        ops.update(Slot::X, alpha, Slot::P, 0.0, None, 1.0)?;
        ops.update(Slot::R, -alpha, Slot::Q, 0.0, None, 1.0)?;
        ops.precond(Slot::R, z)?;
        let (rz_new, rr) = ops.dots(Slot::R, z, Some((Slot::R, Slot::R)))?;
        relres = rr.sqrt() / bnorm;
        if let Some(o) = record(history, "CG", it, relres, tol) {
            return Ok(o);
        }
        let beta = rz_new / rz;
        rz = rz_new;
        ops.update(Slot::P, 1.0, z, 0.0, None, beta)?;
    }
    Ok(done(false, maxit, relres))
}

/// Preconditioned BiCGSTAB (van der Vorst; the Templates book's form).
pub fn bicgstab(ops: &mut dyn Ops, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let (bnorm, rr) = initial_residual(ops)?;
    let (phat, shat) = if ops.identity_precond() { (Slot::P, Slot::S) } else { (Slot::Phat, Slot::Shat) };
    let mut relres = rr.sqrt() / bnorm;
    history.push(relres);
    if relres <= tol {
        return Ok(done(true, 0, relres));
    }
    ops.update(Slot::Rhat, 1.0, Slot::R, 0.0, None, 0.0)?;
    let (mut rho_prev, mut alpha, mut omega) = (1.0f64, 1.0f64, 1.0f64);
    // rho = (r0, r): (r, r) at first, as r0 = r; then alongside each residual update
    let mut rho = rr;
    if let Some(out) = ops.iterate_on_device(Method::Bicgstab, &Start { bnorm, tol, maxit, rr, rz: rho }, history) {
        return out;
    }
    // the tolerance the residual is held to: tol, or near the end of a split
    // solve, what stands for it on the caller's residual (checked after whole
    // steps only: a split solve takes no half-step exit, its s unconfirmed)
    let mut target = tol;
    let split = ops.is_split();
    for it in 1..=maxit {
        if rho == 0.0 || !rho.is_finite() {
            return Ok(broke(it - 1, relres, format!("BiCGSTAB: rho = (r0, r) = {rho:e} at iteration {it}")));
        }
        if it == 1 {
            ops.update(Slot::P, 1.0, Slot::R, 0.0, None, 0.0)?;
        } else {
            let beta = (rho / rho_prev) * (alpha / omega);
            ops.update(Slot::P, 1.0, Slot::R, -beta * omega, Some(Slot::V), beta)?;
        }
        ops.precond(Slot::P, phat)?;
        ops.spmv(phat, Slot::V)?;
        let rv = dot(ops, Slot::Rhat, Slot::V)?;
        if rv == 0.0 || !rv.is_finite() {
            return Ok(broke(it - 1, relres, format!("BiCGSTAB: (r0, v) = {rv:e} at iteration {it}")));
        }
        alpha = rho / rv;
        let snorm = ops.update_dots(Slot::S, 1.0, Slot::R, -alpha, Some(Slot::V), 0.0, None)?.0.sqrt() / bnorm;
        if snorm <= target && !split {
            ops.update(Slot::X, alpha, phat, 0.0, None, 1.0)?;
            history.push(snorm);
            return Ok(done(true, it, snorm));
        }
        ops.precond(Slot::S, shat)?;
        ops.spmv(shat, Slot::T)?;
        let (ts, tt) = ops.dots(Slot::T, Slot::S, Some((Slot::T, Slot::T)))?;
        if tt == 0.0 || !tt.is_finite() {
            return Ok(broke(it - 1, relres, format!("BiCGSTAB: (t, t) = {tt:e} at iteration {it}")));
        }
        omega = ts / tt;
        ops.update(Slot::X, alpha, phat, omega, Some(shat), 1.0)?;
        let (rr, rho_next) = ops.update_dots(Slot::R, 1.0, Slot::S, -omega, Some(Slot::T), 0.0, Some(Slot::Rhat))?;
        relres = rr.sqrt() / bnorm;
        if relres <= NEAR_END * target {
            target = ops.split_tolerance(tol)?.unwrap_or(target);
        }
        if let Some(o) = record(history, "BiCGSTAB", it, relres, target) {
            return Ok(o);
        }
        if omega == 0.0 {
            return Ok(broke(it, relres, format!("BiCGSTAB: omega = (t, s)/(t, t) = 0 at iteration {it}")));
        }
        rho_prev = rho;
        rho = rho_next;
    }
    Ok(done(false, maxit, relres))
}

/// Refuses a non-finite `slot` by name, pointing at its first bad element.
fn check_finite(ops: &mut dyn Ops, slot: Slot, max: f64, arg: &str) -> Result<()> {
    if max.is_finite() {
        return Ok(());
    }
    let v = ops.fetch(slot)?;
    match v.iter().position(|x| !x.is_finite()) {
        Some(k) => Err(Error::invalid(format!("{} = {}: {arg} must be finite", crate::error::at(arg, k), v[k]))),
        // a distributed solve: the element is in another rank's part
        None => Err(Error::invalid(format!("{arg} holds {max} in another rank's rows: {arg} must be finite"))),
    }
}

/// The method, then the true residual ||b - A x|| / ||b|| recomputed from
/// scratch. b and the guess x are checked finite first; b = 0 exactly gives
/// x = 0; a b whose norm would under- or overflow is scaled by a power of two
/// (exact) for the iterations and x scaled back (a guess the scale would
/// carry past 1e150 is replaced by 0). Where the method broke down or its
/// residual parted from the true one, and A's size (|A b| / |b|) put its
/// dot products past under- or overflow, it runs again from x = 0 with b
/// scaled to A's size, so 1e-170 A is solved as A is.
pub fn run(ops: &mut dyn Ops, method: Method, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<(Outcome, f64)> {
    let bmax = ops.amax(Slot::B)?;
    check_finite(ops, Slot::B, bmax, "b")?;
    let xmax = ops.amax(Slot::X)?;
    check_finite(ops, Slot::X, xmax, "x")?;
    if bmax == 0.0 {
        // b = 0: x = 0 at once, whatever the guess.
        ops.update(Slot::X, 0.0, Slot::B, 0.0, None, 0.0)?;
        history.push(0.0);
        return Ok((done(true, 0, 0.0), 0.0));
    }
    let scale = crate::array::vector::equilibration(bmax);
    if scale != 1.0 {
        ops.update(Slot::B, 0.0, Slot::X, 0.0, None, scale)?;
        // a guess that the scale would carry past the safe range is so far
        // above b that A x would overflow: the iterations start from 0 instead
        let keep = xmax * scale <= 1e150;
        ops.update(Slot::X, 0.0, Slot::B, 0.0, None, if keep { scale } else { 0.0 })?;
    }
    let mut result = iterate(ops, method, tol, maxit, history)?;
    let mut again = 1.0;
    if result.0.breakdown.is_some() || result.0.unmet.is_some() {
        if let Some(extra) = operator_scale(ops, bmax * scale)? {
            ops.update(Slot::B, 0.0, Slot::X, 0.0, None, extra)?;
            ops.update(Slot::X, 0.0, Slot::B, 0.0, None, 0.0)?;
            history.clear();
            result = iterate(ops, method, tol, maxit, history)?;
            again = extra;
        }
    }
    for s in [again, scale] {
        if s != 1.0 {
            ops.update(Slot::X, 0.0, Slot::B, 0.0, None, 1.0 / s)?;
        }
    }
    Ok(result)
}

/// A preconditioner M = M_L M_R applied split: the method iterates, with
/// no preconditioner, on M_L^-1 A M_R^-1 y = M_L^-1 b (the Ops' operator),
/// and x = M_R^-1 y. Where M_L^-1 A M_R^-1 is cheaper than M^-1 and A apart
/// (Eisenstat's trick: sparse::multicolour), an iteration costs less.
pub struct Split<'a> {
    /// A itself: the caller's residual is checked with it.
    pub a: &'a dyn Operator,
    /// b -> M_L^-1 b
    pub left_inverse: &'a dyn Operator,
    /// x -> M_R x
    pub right: &'a dyn Operator,
    /// y -> M_R^-1 y
    pub right_inverse: &'a dyn Operator,
    /// r -> M_L r, up to a permutation: the split residual to the caller's
    /// (the backends' `split_tolerance`).
    pub left: &'a dyn Operator,
}

/// Within this factor of its tolerance a split solve's residual is held to
/// the tolerance that stands for the caller's (`Ops::split_tolerance`).
pub const NEAR_END: f64 = 10.0;

/// The tolerance on a split residual ||r|| / ||b|| (squares rr, bb) that
/// stands for `tol` on the caller's, whose squares are qq and zz: tol
/// scaled by their ratio; tol where the ratio is not a finite positive number.
pub fn split_target(tol: f64, (rr, bb): (f64, f64), (qq, zz): (f64, f64)) -> f64 {
    let ratio = ((rr / bb) / (qq / zz)).sqrt();
    if ratio.is_finite() && ratio > 0.0 {
        tol * ratio
    } else {
        tol
    }
}

/// `Ops::split_tolerance` of a backend holding M_L = `left`.
pub fn split_tolerance(ops: &mut dyn Ops, left: &dyn Operator, tol: f64) -> Result<f64> {
    ops.apply(left, Slot::R, Slot::Q)?;
    ops.apply(left, Slot::B, Slot::Z)?;
    let caller = ops.dots(Slot::Q, Slot::Q, Some((Slot::Z, Slot::Z)))?;
    Ok(split_target(tol, ops.dots(Slot::R, Slot::R, Some((Slot::B, Slot::B)))?, caller))
}

/// The most times a split solve runs its method (`run_split`).
pub const SPLIT_ROUNDS: usize = 4;

/// `run` over a split preconditioner: slots B and X hold the caller's b
/// (also in `b`) and guess on entry, X the solution on return. The method
/// stops on the split system's residual, ||M_L^-1 (b - A x)|| / ||M_L^-1 b||;
/// the caller's ||b - A x|| / ||b|| is then computed with A, and where it is
/// above tol the method runs again from x (the recursive residual can part
/// from the true one by much: 8e-10 against 6e-8 on the 128^3
/// convection-diffusion grid), its tolerance lowered by the ratio and a
/// half more (BiCGSTAB: held to what stands for tol, as in the first run),
/// within maxit iterations in all. Returns the last run's outcome over all
/// the iterations, and the caller's relative residual.
pub fn run_split(
    ops: &mut dyn Ops,
    split: &Split,
    b: &Buffer<f64>,
    method: Method,
    tol: f64,
    maxit: i64,
    history: &mut Vec<f64>,
) -> Result<(Outcome, f64)> {
    // the caller's b and guess named as such, before M_L^-1 and M_R touch them
    for (slot, name) in [(Slot::B, "b"), (Slot::X, "x")] {
        let max = ops.amax(slot)?;
        check_finite(ops, slot, max, name)?;
    }
    let (mut split_tol, mut used, mut round) = (tol, 0i64, 0);
    loop {
        round += 1;
        if round > 1 {
            ops.load(Slot::B, b)?;
        }
        for (map, slot) in [(split.left_inverse, Slot::B), (split.right, Slot::X)] {
            ops.apply(map, slot, Slot::Q)?;
            ops.update(slot, 1.0, Slot::Q, 0.0, None, 0.0)?;
        }
        let (mut out, _) = run(ops, method, split_tol, maxit - used, history)?;
        ops.apply(split.right_inverse, Slot::X, Slot::Q)?;
        ops.update(Slot::X, 1.0, Slot::Q, 0.0, None, 0.0)?;
        // ||b - A x|| / ||b||, b scaled by a power of two to keep the squares in range
        ops.load(Slot::B, b)?;
        ops.apply(split.a, Slot::X, Slot::Q)?;
        let s = crate::array::vector::equilibration(ops.amax(Slot::B)?);
        ops.update(Slot::T, s, Slot::B, -s, Some(Slot::Q), 0.0)?;
        ops.update(Slot::B, 0.0, Slot::X, 0.0, None, s)?;
        let (tt, bb) = ops.dots(Slot::T, Slot::T, Some((Slot::B, Slot::B)))?;
        let true_rel = if bb == 0.0 { tt.sqrt() } else { tt.sqrt() / bb.sqrt() };
        out.iterations += used;
        used = out.iterations;
        let again = out.converged && true_rel > tol && used < maxit && round < SPLIT_ROUNDS;
        if !again {
            bear_out(&mut out, true_rel, tol);
            return Ok((out, true_rel));
        }
        // BiCGSTAB holds its residual to what stands for tol itself (`Ops::split_tolerance`); the others need it lowered
        if method != Method::Bicgstab {
            split_tol *= 0.5 * tol / true_rel;
        }
    }
}

/// The method from the x and b in place, and the true relative residual;
/// a convergence the true residual does not bear out is none.
fn iterate(ops: &mut dyn Ops, method: Method, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<(Outcome, f64)> {
    let mut out = match method {
        Method::Cg => cg(ops, tol, maxit, history)?,
        Method::Bicgstab => bicgstab(ops, tol, maxit, history)?,
        Method::Gmres { restart } => gmres::gmres(ops, restart, tol, maxit, history)?,
        Method::Bicg => lanczos::bicg(ops, tol, maxit, history)?,
        Method::Cgs => lanczos::cgs(ops, tol, maxit, history)?,
    };
    ops.spmv(Slot::X, Slot::Q)?;
    ops.update(Slot::T, 1.0, Slot::B, -1.0, Some(Slot::Q), 0.0)?;
    let (tt, bb) = ops.dots(Slot::T, Slot::T, Some((Slot::B, Slot::B)))?;
    let true_rel = tt.sqrt() / bb.sqrt();
    bear_out(&mut out, true_rel, tol);
    Ok((out, true_rel))
}

/// A convergence the true relative residual does not bear out (more than
/// TRUE_RESIDUAL_SLACK times tol, or NaN) becomes none.
fn bear_out(out: &mut Outcome, true_rel: f64, tol: f64) {
    let within = true_rel <= TRUE_RESIDUAL_SLACK * tol; // false for NaN too
    if out.converged && !within {
        (out.converged, out.unmet) = (false, Some(true_rel));
    }
}

/// The power of two to scale b (whose largest entry is `bmax`) by so that
/// the methods' dot products (|b|^2, |A| |b|^2, |A|^2 |b|^2) stay within
/// 2^-830..2^830, when they do not; |A| is estimated as |A b| / |b| (Q
/// holds A b after). None: no scaling helps (they are within, or A b = 0).
fn operator_scale(ops: &mut dyn Ops, bmax: f64) -> Result<Option<f64>> {
    ops.spmv(Slot::B, Slot::Q)?;
    let a = ops.amax(Slot::Q)? / bmax;
    if a == 0.0 || a.is_nan() {
        return Ok(None);
    }
    let (lb, la) = (bmax.log2(), a.log2().min(1023.0));
    let safe = |e: f64| e.abs() <= 830.0;
    if safe(2.0 * lb) && safe(la + 2.0 * lb) && safe(2.0 * (la + lb)) {
        return Ok(None);
    }
    // b's size to |A|^-1/2: the three products near |A|^-1, 1 and |A|
    let k = (-la / 2.0).round() - lb.round();
    Ok(Some(2f64.powi((k as i32).clamp(-1022, 1022))))
}

/// The status a finished solve reports.
pub fn outcome_status(o: &Outcome) -> Result<()> {
    match (&o.breakdown, o.converged) {
        (Some(why), _) => Err(Error::new(ErrorKind::Breakdown, why.clone())),
        (None, true) => Ok(()),
        (None, false) if o.unmet.is_some() => Err(Error::new(
            ErrorKind::NotConverged,
            format!(
                "the iterations' residual {:e} met the tolerance after {} iterations, but the true residual \
                 ||b - A x|| / ||b|| = {:e} is more than {TRUE_RESIDUAL_SLACK} times the tolerance: rounding parted them \
                 (an ill-conditioned or badly scaled system)",
                o.relative_residual,
                o.iterations,
                o.unmet.unwrap_or(f64::NAN)
            ),
        )),
        (None, false) => Err(Error::new(
            ErrorKind::NotConverged,
            format!("no convergence in {} iterations: relative residual {:e}", o.iterations, o.relative_residual),
        )),
    }
}
