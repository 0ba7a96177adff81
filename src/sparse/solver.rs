//! Preconditioned CG and BiCGSTAB. The set-up (initial residual, first
//! direction) is written once over `Ops`; the iterations run on the host for
//! the CPU reference, and on the device for CUDA, where the scalars stay too
//! (kernels/sparse.cu): an iteration is replayed as a CUDA graph with no host
//! round-trip, and the host looks at the scalars every few iterations.

use super::{cpu, cuda, f64_buf, Csr};
use crate::array::{Array, Buffer};
use crate::error::{Error, Result, FEGPU_ERR_BREAKDOWN, FEGPU_ERR_NOT_CONVERGED};
use crate::gpu::{DeviceBuffer, Gpu, Graph};
use crate::registry::{Handle, Kind, Object};
use std::sync::{Arc, Mutex};

pub const FEGPU_METHOD_CG: i32 = 1;
pub const FEGPU_METHOD_BICGSTAB: i32 = 2;
pub const FEGPU_PRECOND_NONE: i32 = 0;
pub const FEGPU_PRECOND_JACOBI: i32 = 1;
pub const FEGPU_PRECOND_ILU0: i32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Cg,
    Bicgstab,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precond {
    None,
    Jacobi,
    Ilu0,
}

impl Method {
    pub fn from_code(c: i32) -> Result<Method> {
        match c {
            FEGPU_METHOD_CG => Ok(Method::Cg),
            FEGPU_METHOD_BICGSTAB => Ok(Method::Bicgstab),
            _ => Err(Error::invalid(format!("method = {c}: expected FEGPU_METHOD_CG (1) or FEGPU_METHOD_BICGSTAB (2)"))),
        }
    }
}

impl Precond {
    pub fn from_code(c: i32) -> Result<Precond> {
        match c {
            FEGPU_PRECOND_NONE => Ok(Precond::None),
            FEGPU_PRECOND_JACOBI => Ok(Precond::Jacobi),
            FEGPU_PRECOND_ILU0 => Ok(Precond::Ilu0),
            _ => Err(Error::invalid(format!(
                "precond = {c}: expected FEGPU_PRECOND_NONE (0), FEGPU_PRECOND_JACOBI (1) or FEGPU_PRECOND_ILU0 (2)"
            ))),
        }
    }
}

/// Work vectors of the solvers.
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
}
pub const SLOTS: usize = 12;

/// What the algorithms need from a backend.
pub trait Ops {
    /// y = A x
    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()>;
    /// (a.b, c.d), reductions finished where the vectors live.
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)>;
    /// w = a*x + b*y + c*w
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()>;
    /// z = M^-1 r
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()>;
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
    /// Runs the method's iterations where the vectors live, from the state
    /// `start` that the set-up left; None: the caller iterates on the host.
    fn iterate_on_device(&mut self, _method: Method, _start: &Start, _history: &mut Vec<f64>) -> Option<Result<Outcome>> {
        None
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
}

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
    Outcome { converged: false, iterations, relative_residual: relres, breakdown: Some(why) }
}

fn done(converged: bool, iterations: i64, relres: f64) -> Outcome {
    Outcome { converged, iterations, relative_residual: relres, breakdown: None }
}

/// r = b - A x; returns ||b||.
fn initial_residual(ops: &mut dyn Ops) -> Result<f64> {
    ops.spmv(Slot::X, Slot::Q)?;
    ops.update(Slot::R, 1.0, Slot::B, -1.0, Some(Slot::Q), 0.0)?;
    Ok(dot(ops, Slot::B, Slot::B)?.sqrt())
}

/// Preconditioned conjugate gradients (SPD A).
pub fn cg(ops: &mut dyn Ops, precond: Precond, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let bnorm = initial_residual(ops)?;
    let z = if precond == Precond::None { Slot::R } else { Slot::Z };
    let rr = dot(ops, Slot::R, Slot::R)?;
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
pub fn bicgstab(ops: &mut dyn Ops, precond: Precond, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<Outcome> {
    let bnorm = initial_residual(ops)?;
    let (phat, shat) = if precond == Precond::None { (Slot::P, Slot::S) } else { (Slot::Phat, Slot::Shat) };
    let rr = dot(ops, Slot::R, Slot::R)?;
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
        if snorm <= tol {
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
        if let Some(o) = record(history, "BiCGSTAB", it, relres, tol) {
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
    let k = v.iter().position(|x| !x.is_finite()).unwrap_or(0);
    Err(Error::invalid(format!("{arg}[{k}] = {}: {arg} must be finite", v.get(k).copied().unwrap_or(max))))
}

/// The power of two that brings max |b| near 1 when it lies so far out that
/// squares could underflow or overflow (as LAPACK's scaled nrm2 guards
/// against); 1 otherwise, so ordinary systems are computed unchanged.
pub(crate) fn equilibration(bmax: f64) -> f64 {
    const SAFE: std::ops::RangeInclusive<f64> = 1.0e-150..=1.0e150;
    if SAFE.contains(&bmax) {
        return 1.0;
    }
    let (_, exponent) = frexp(bmax);
    2f64.powi(-exponent)
}

/// x = m 2^e with 0.5 <= m < 1, for finite positive x.
fn frexp(x: f64) -> (f64, i32) {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        let (m, e2) = frexp(x * 2f64.powi(64));
        return (m, e2 - 64);
    }
    (f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52)), e - 1022)
}

/// The method, then the true residual ||b - A x|| / ||b|| recomputed from
/// scratch. b and the guess x are checked finite first; b = 0 exactly gives
/// x = 0; a b whose norm would under- or overflow is scaled by a power of two
/// (exact) for the iterations and x scaled back.
pub fn run(ops: &mut dyn Ops, method: Method, precond: Precond, tol: f64, maxit: i64, history: &mut Vec<f64>) -> Result<(Outcome, f64)> {
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
    let scale = equilibration(bmax);
    if scale != 1.0 {
        ops.update(Slot::B, 0.0, Slot::X, 0.0, None, scale)?;
        ops.update(Slot::X, 0.0, Slot::B, 0.0, None, scale)?;
    }
    let bnorm = dot(ops, Slot::B, Slot::B)?.sqrt();
    let out = match method {
        Method::Cg => cg(ops, precond, tol, maxit, history)?,
        Method::Bicgstab => bicgstab(ops, precond, tol, maxit, history)?,
    };
    ops.spmv(Slot::X, Slot::Q)?;
    ops.update(Slot::T, 1.0, Slot::B, -1.0, Some(Slot::Q), 0.0)?;
    let true_rel = dot(ops, Slot::T, Slot::T)?.sqrt() / bnorm;
    if scale != 1.0 {
        ops.update(Slot::X, 0.0, Slot::B, 0.0, None, 1.0 / scale)?;
    }
    Ok((out, true_rel))
}

/// Rows grouped into dependency levels for the triangular sweeps: a row's
/// lower (upper) neighbours are all in earlier levels.
pub struct Levels {
    pub lower_rows: Vec<i32>,
    pub lower_ptr: Vec<usize>,
    pub upper_rows: Vec<i32>,
    pub upper_ptr: Vec<usize>,
}

fn group_by_level(level: &[usize]) -> (Vec<i32>, Vec<usize>) {
    let nlev = level.iter().copied().max().map_or(0, |m| m + 1);
    let mut ptr = vec![0usize; nlev + 1];
    for &l in level {
        ptr[l + 1] += 1;
    }
    for i in 0..nlev {
        ptr[i + 1] += ptr[i];
    }
    let mut fill = ptr.clone();
    let mut rows = vec![0i32; level.len()];
    for (r, &l) in level.iter().enumerate() {
        rows[fill[l]] = r as i32;
        fill[l] += 1;
    }
    (rows, ptr)
}

pub fn levels(p: &super::Pattern) -> Levels {
    let n = p.nrows;
    let mut lo = vec![0usize; n];
    for i in 0..n {
        let (s, d) = (p.row_ptr[i] as usize, p.diag[i] as usize);
        lo[i] = p.col[s..d].iter().map(|&k| lo[k as usize] + 1).max().unwrap_or(0);
    }
    let mut up = vec![0usize; n];
    for i in (0..n).rev() {
        let (d, e) = (p.diag[i] as usize, p.row_ptr[i + 1] as usize);
        up[i] = p.col[d + 1..e].iter().map(|&k| up[k as usize] + 1).max().unwrap_or(0);
    }
    let (lower_rows, lower_ptr) = group_by_level(&lo);
    let (upper_rows, upper_ptr) = group_by_level(&up);
    Levels { lower_rows, lower_ptr, upper_rows, upper_ptr }
}

/// Preconditioner data and work vectors, where the backend keeps them.
#[allow(clippy::large_enum_variant)] // one per solver
enum Work {
    Cpu {
        vecs: Vec<Vec<f64>>,
        dinv: Vec<f64>,
        lu: Vec<f64>,
    },
    Cuda {
        vecs: Vec<DeviceBuffer<f64>>,
        dinv: DeviceBuffer<f64>,
        lu: DeviceBuffer<f64>,
        reduce: cuda::Reduce,
        lower: Option<cuda::DeviceLevels>,
        upper: Option<cuda::DeviceLevels>,
        /// The scalars of the device-driven iterations (cuda::scalar).
        scalars: DeviceBuffer<f64>,
        /// One iteration, captured on the first solve and replayed after.
        iteration: Option<Graph>,
    },
}

struct State {
    work: Work,
    /// The matrix values version the preconditioner was built from.
    built_for: Option<u64>,
    history: Vec<f64>,
}

pub struct Solver {
    pub csr: Arc<Csr>,
    pub method: Method,
    pub precond: Precond,
    state: Mutex<State>,
}

impl Object for Solver {
    const KIND: Kind = Kind::Solver;
}

pub fn get(h: Handle, arg: &str) -> Result<Arc<Solver>> {
    crate::registry::get::<Solver>(h, arg)
}

impl Solver {
    /// Structural setup (diagonal check, levels, workspace) and the first factorisation.
    pub fn new(csr: Arc<Csr>, method: Method, precond: Precond) -> Result<Solver> {
        let p = &csr.pattern;
        if p.nrows != p.ncols {
            return Err(Error::size(format!("A is {} x {}: the solvers need a square matrix", p.nrows, p.ncols)));
        }
        if precond != Precond::None {
            if let Some(r) = p.diag.iter().position(|&d| d < 0) {
                let what = if precond == Precond::Ilu0 { "ILU(0)" } else { "Jacobi" };
                return Err(Error::new(
                    FEGPU_ERR_BREAKDOWN,
                    format!("{what}: {} has no diagonal entry (a zero pivot)", cpu::row_name(r)),
                ));
            }
        }
        let n = p.nrows;
        let work = match csr.ctx.gpu() {
            None => Work::Cpu { vecs: vec![vec![0.0; n]; SLOTS], dinv: Vec::new(), lu: Vec::new() },
            Some(g) => {
                let (lower, upper) = if precond == Precond::Ilu0 {
                    let lv = levels(p);
                    (
                        Some(cuda::DeviceLevels::new(g, &lv.lower_rows, &lv.lower_ptr)?),
                        Some(cuda::DeviceLevels::new(g, &lv.upper_rows, &lv.upper_ptr)?),
                    )
                } else {
                    (None, None)
                };
                Work::Cuda {
                    vecs: work_vectors(g, n)?,
                    dinv: g.alloc(if precond == Precond::Jacobi { n.max(1) } else { 1 })?,
                    lu: g.alloc(if precond == Precond::Ilu0 { p.nnz().max(1) } else { 1 })?,
                    reduce: cuda::Reduce::new(g)?,
                    lower,
                    upper,
                    scalars: g.alloc(cuda::Scalar::LEN)?,
                    iteration: None,
                }
            }
        };
        let s = Solver {
            csr,
            method,
            precond,
            state: Mutex::new(State { work, built_for: None, history: Vec::new() }),
        };
        s.refresh(&mut s.lock())?;
        Ok(s)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rebuilds the preconditioner when the matrix values changed since the
    /// last build; returns the seconds spent (0 when the build was current).
    fn refresh(&self, st: &mut State) -> Result<f64> {
        let vals = self.csr.values();
        if st.built_for == Some(vals.version) {
            return Ok(0.0);
        }
        let t = std::time::Instant::now();
        let p = &self.csr.pattern;
        st.built_for = None; // a failed build leaves no stale factor in use
        match (&mut st.work, &vals.data) {
            (Work::Cpu { dinv, lu, .. }, Buffer::Host(v)) => match self.precond {
                Precond::None => {}
                Precond::Jacobi => *dinv = jacobi_inverse(p, v)?,
                Precond::Ilu0 => {
                    let mut f = v.clone();
                    cpu::ilu0(p, &mut f)?;
                    *lu = f;
                }
            },
            (Work::Cuda { dinv, lu, lower, .. }, Buffer::Device(v)) => {
                let g = self.csr.ctx.gpu().expect("device work without a GPU");
                let dp = self.csr.device.as_ref().expect("device pattern");
                match self.precond {
                    Precond::None => {}
                    Precond::Jacobi => {
                        // the diagonal comes back once per refresh to be checked and inverted
                        let host = self.csr.values_on_host(&vals.data)?;
                        let d = jacobi_inverse(p, &host)?;
                        g.upload(&d, dinv, 0)?;
                    }
                    Precond::Ilu0 => {
                        g.copy(v, lu)?;
                        cuda::ilu0(g, dp, lower.as_ref().expect("levels"), lu, &p.diag)?;
                    }
                }
            }
            _ => return Err(Error::new(crate::FEGPU_ERR_INTERNAL, "solver and matrix on different backends")),
        }
        st.built_for = Some(vals.version);
        Ok(t.elapsed().as_secs_f64())
    }

    /// Solves A x = b: `x` holds the initial guess on entry and the iterate on
    /// return. Returns the outcome (the caller turns it into a status with
    /// `outcome_status`), the true relative residual, and the seconds spent
    /// rebuilding the preconditioner first (0 when it was current).
    pub fn solve(&self, b: &Array, x: &Array, tol: f64, maxit: i64) -> Result<(Outcome, f64, f64)> {
        let n = self.csr.pattern.nrows;
        super::check_vector(&self.csr, b, n, "b")?;
        super::check_vector(&self.csr, x, n, "x")?;
        if std::ptr::eq(b, x) {
            return Err(Error::invalid("b and x are the same array"));
        }
        if tol <= 0.0 || !tol.is_finite() {
            return Err(Error::invalid(format!("tol = {tol}: must be positive and finite")));
        }
        if maxit < 0 {
            return Err(Error::invalid(format!("maxit = {maxit}: must be >= 0")));
        }
        let mut st = self.lock();
        let setup = self.refresh(&mut st)?;
        let vals = self.csr.values();
        let st = &mut *st;
        st.history.clear();
        let (mut gb, mut gx) = crate::array::lock_pair(b, x, "b", "x")?;
        let (bb, xb) = (f64_buf(&mut gb), f64_buf(&mut gx));
        let p = &self.csr.pattern;
        match (&mut st.work, &vals.data, bb, xb) {
            (Work::Cpu { vecs, dinv, lu }, Buffer::Host(v), Buffer::Host(bh), Buffer::Host(xh)) => {
                vecs[Slot::B as usize].copy_from_slice(bh);
                vecs[Slot::X as usize].copy_from_slice(xh);
                let apply = |x: &[f64], y: &mut [f64]| cpu::spmv(p, v, 1.0, x, 0.0, y);
                let mut ops = CpuOps { apply: &apply, p: Some(p), vecs, dinv, lu, precond: self.precond };
                let (out, true_rel) = run(&mut ops, self.method, self.precond, tol, maxit, &mut st.history)?;
                xh.copy_from_slice(&ops.vecs[Slot::X as usize]);
                Ok((out, true_rel, setup))
            }
            (Work::Cuda { vecs, dinv, lu, reduce, lower, upper, scalars, iteration }, Buffer::Device(v), Buffer::Device(bd), Buffer::Device(xd)) => {
                let g = self.csr.ctx.gpu().expect("device work without a GPU");
                g.copy(bd, &mut vecs[Slot::B as usize])?;
                g.copy(xd, &mut vecs[Slot::X as usize])?;
                let dp = self.csr.device.as_ref().expect("device pattern");
                let (lower, upper) = (lower.as_ref(), upper.as_ref());
                let op = DeviceOp::Csr { dp, v };
                let mut ops = CudaOps { g, op, n, vecs, dinv, lu, reduce, lower, upper, precond: self.precond, looping: Some((scalars, iteration)) };
                let (out, true_rel) = run(&mut ops, self.method, self.precond, tol, maxit, &mut st.history)?;
                g.copy(&ops.vecs[Slot::X as usize], xd)?;
                g.synchronize("solve")?;
                Ok((out, true_rel, setup))
            }
            _ => Err(Error::new(crate::FEGPU_ERR_INTERNAL, "solver, matrix and vectors on different backends")),
        }
    }

    pub fn history(&self) -> Vec<f64> {
        self.lock().history.clone()
    }

}

/// The solvers' work vectors on the device (SLOTS of n, zeroed).
pub(crate) fn work_vectors(g: &Gpu, n: usize) -> Result<Vec<DeviceBuffer<f64>>> {
    (0..SLOTS)
        .map(|_| {
            let mut v = g.alloc::<f64>(n.max(1))?;
            g.fill_bytes(&mut v, 0)?;
            Ok(v)
        })
        .collect()
}

/// The status a finished solve reports.
pub fn outcome_status(o: &Outcome) -> Result<()> {
    match (&o.breakdown, o.converged) {
        (Some(why), _) => Err(Error::new(FEGPU_ERR_BREAKDOWN, why.clone())),
        (None, true) => Ok(()),
        (None, false) => Err(Error::new(
            FEGPU_ERR_NOT_CONVERGED,
            format!("no convergence in {} iterations: relative residual {:e}", o.iterations, o.relative_residual),
        )),
    }
}

fn jacobi_inverse(p: &super::Pattern, v: &[f64]) -> Result<Vec<f64>> {
    (0..p.nrows)
        .map(|r| {
            let d = v[p.diag[r] as usize];
            if d == 0.0 {
                Err(Error::new(FEGPU_ERR_BREAKDOWN, format!("Jacobi: zero diagonal at {}", cpu::row_name(r))))
            } else {
                Ok(1.0 / d)
            }
        })
        .collect()
}

/// The solvers' operations on the host, for any operator `apply` (y = A x).
pub(crate) struct CpuOps<'a> {
    pub apply: &'a dyn Fn(&[f64], &mut [f64]),
    /// The matrix pattern, for ILU(0).
    pub p: Option<&'a super::Pattern>,
    pub vecs: &'a mut Vec<Vec<f64>>,
    pub dinv: &'a [f64],
    pub lu: &'a [f64],
    pub precond: Precond,
}

impl CpuOps<'_> {
    /// Takes slot `w` out so it can be written while others are read.
    fn with_out<T>(&mut self, w: Slot, f: impl FnOnce(&mut Vec<f64>, &Vec<Vec<f64>>) -> T) -> T {
        let mut out = std::mem::take(&mut self.vecs[w as usize]);
        let r = f(&mut out, self.vecs);
        self.vecs[w as usize] = out;
        r
    }
}

impl Ops for CpuOps<'_> {
    fn amax(&mut self, v: Slot) -> Result<f64> {
        Ok(self.vecs[v as usize].iter().fold(0.0, |m: f64, x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x.abs()) }))
    }
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>> {
        Ok(self.vecs[v as usize].clone())
    }
    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()> {
        let apply = self.apply;
        self.with_out(y, |out, vecs| apply(&vecs[x as usize], out));
        Ok(())
    }
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)> {
        let v = &self.vecs;
        let first = cpu::dot(&v[a as usize], &v[b as usize]);
        Ok((first, cd.map_or(0.0, |(c, d)| cpu::dot(&v[c as usize], &v[d as usize]))))
    }
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()> {
        // x or y may be w itself: read them from the written vector's old copy
        let old = if Some(w) == y || w == x { Some(self.vecs[w as usize].clone()) } else { None };
        self.with_out(w, |out, vecs| {
            let pick = |s: Slot| if s == w { old.as_deref().unwrap() } else { &vecs[s as usize][..] };
            cpu::update(out, a, pick(x), b, y.map(pick), c)
        });
        Ok(())
    }
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()> {
        if r == z {
            return Ok(()); // no preconditioner: z is r itself
        }
        let (p, dinv, lu, pc) = (self.p, self.dinv, self.lu, self.precond);
        self.with_out(z, |out, vecs| {
            let rv = &vecs[r as usize];
            match pc {
                Precond::None => out.copy_from_slice(rv),
                Precond::Jacobi => out.iter_mut().zip(rv).zip(dinv).for_each(|((o, r), d)| *o = d * r),
                Precond::Ilu0 => cpu::ilu0_apply(p.expect("ILU(0) needs a matrix"), lu, rv, out),
            }
        });
        Ok(())
    }
}

/// The operator of a device solve.
pub(crate) enum DeviceOp<'a> {
    Csr { dp: &'a super::DevicePattern, v: &'a DeviceBuffer<f64> },
    /// Element by element from the stored K^e, the `fixed` dofs masked as
    /// Dirichlet conditions on the assembled matrix would (y = diag x there).
    Ebe { set: &'a crate::fem::ElementSet, device: &'a crate::fem::DeviceSet, ke: &'a DeviceBuffer<f64>, fixed: &'a DeviceBuffer<u8>, diag: &'a DeviceBuffer<f64> },
    /// The same with K^e recomputed from the geometry in every product.
    EbeOnTheFly { set: &'a crate::fem::ElementSet, device: &'a crate::fem::DeviceSet, props: &'a DeviceBuffer<f64>, fixed: &'a DeviceBuffer<u8>, diag: &'a DeviceBuffer<f64> },
}

impl DeviceOp<'_> {
    /// y = A x (with `sc`: skipped once a device-driven solve has stopped).
    fn apply(&self, g: &Gpu, n: usize, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        match *self {
            DeviceOp::Csr { dp, v } => cuda::spmv_with(g, dp, dp.threads_per_row, n, v, 1.0, x, 0.0, y, sc),
            DeviceOp::Ebe { set, device, ke, fixed, diag } => crate::fem::cuda::ebe_apply(g, set, device, ke, Some((fixed, diag)), x, y, sc),
            DeviceOp::EbeOnTheFly { set, device, props, fixed, diag } => {
                crate::fem::cuda::ebe_otf(g, set, device, props, Some((fixed, diag)), x, y, None, sc)
            }
        }
    }
}

/// The solvers' operations on the device.
pub(crate) struct CudaOps<'a> {
    pub g: &'a Gpu,
    pub op: DeviceOp<'a>,
    pub n: usize,
    pub vecs: &'a mut Vec<DeviceBuffer<f64>>,
    pub dinv: &'a DeviceBuffer<f64>,
    pub lu: &'a DeviceBuffer<f64>,
    pub reduce: &'a mut cuda::Reduce,
    pub lower: Option<&'a cuda::DeviceLevels>,
    pub upper: Option<&'a cuda::DeviceLevels>,
    pub precond: Precond,
    /// The scalars of the device-driven iterations and the captured iteration.
    pub looping: Option<(&'a mut DeviceBuffer<f64>, &'a mut Option<Graph>)>,
}

impl CudaOps<'_> {
    /// z = M^-1 r; with `sc`, skipped once a device-driven solve has stopped.
    fn precond_guarded(&self, r: Slot, z: Slot, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        if r == z {
            return Ok(()); // no preconditioner: z is r itself
        }
        let (g, n, v) = (self.g, self.n, &self.vecs);
        match self.precond {
            Precond::None => cuda::update(g, n, &v[z as usize], 1.0, &v[r as usize], 0.0, None, 0.0),
            Precond::Jacobi => cuda::scale(g, n, self.dinv, &v[r as usize], &v[z as usize], sc),
            Precond::Ilu0 => {
                let (lower, upper) = (self.lower.expect("levels"), self.upper.expect("levels"));
                let DeviceOp::Csr { dp, .. } = self.op else { unreachable!("ILU(0) is built for matrices only") };
                cuda::ilu0_apply(g, dp, lower, upper, self.lu, &v[r as usize], &v[z as usize], sc)
            }
        }
    }

    /// Queues one iteration of `method` whose scalars are in `sc` (captured
    /// into a graph: launches only).
    fn queue_iteration(&self, method: Method, sc: &DeviceBuffer<f64>) -> Result<()> {
        let (g, n, reduce) = (self.g, self.n, &*self.reduce);
        let v = |s: Slot| Some(&self.vecs[s as usize]);
        let spmv = |x: Slot, y: Slot| self.op.apply(g, n, &self.vecs[x as usize], &self.vecs[y as usize], Some(sc));
        let step = |name, vectors: &[Option<&DeviceBuffer<f64>>], flag, reduces: bool| {
            cuda::solver_kernel(g, name, n, vectors, flag, reduces.then_some(reduce), sc)
        };
        use Slot::*;
        match method {
            Method::Cg => {
                match self.op {
                    DeviceOp::Csr { dp, v: values } if dp.threads_per_row <= cuda::FUSED_PQ_MAX_TPR => {
                        cuda::spmv_pq(g, dp, n, values, &self.vecs[P as usize], &self.vecs[Q as usize], reduce, sc)?
                    }
                    _ => {
                        spmv(P, Q)?;
                        step("cg_pq", &[v(P), v(Q)], None, true)?;
                    }
                }
                let z = match self.precond {
                    Precond::None => {
                        step("cg_step", &[v(P), v(Q), v(X), v(R), None, None], Some(0), true)?;
                        R
                    }
                    Precond::Jacobi => {
                        step("cg_step", &[v(P), v(Q), v(X), v(R), Some(self.dinv), v(Z)], Some(0), true)?;
                        Z
                    }
                    Precond::Ilu0 => {
                        step("cg_step", &[v(P), v(Q), v(X), v(R), None, None], Some(1), true)?;
                        self.precond_guarded(R, Z, Some(sc))?;
                        step("cg_rz", &[v(R), v(Z)], None, true)?;
                        Z
                    }
                };
                step("cg_direction", &[v(z), v(P)], None, false)
            }
            Method::Bicgstab => {
                let (phat, shat) = if self.precond == Precond::None { (P, S) } else { (Phat, Shat) };
                step("bicg_direction", &[v(R), v(V), v(P)], None, false)?;
                self.precond_guarded(P, phat, Some(sc))?;
                spmv(phat, V)?;
                step("bicg_alpha", &[v(Rhat), v(V)], None, true)?;
                step("bicg_s", &[v(R), v(V), v(S)], None, true)?;
                self.precond_guarded(S, shat, Some(sc))?;
                spmv(shat, T)?;
                step("bicg_omega", &[v(T), v(S)], None, true)?;
                step("bicg_update", &[v(phat), v(shat), v(S), v(T), v(Rhat), v(X), v(R)], None, true)
            }
        }
    }
}

/// Runs `method` from `start` on the device: its scalars go to `scalars`,
/// `queue` queues one iteration (captured into `graph` on the first
/// solve, replayed after), and the host reads the scalars every few
/// iterations. Any operator whose iteration `queue` can queue uses it.
pub fn device_loop(g: &Gpu, scalars: &mut DeviceBuffer<f64>, graph: &mut Option<Graph>, method: Method, start: &Start, history: &mut Vec<f64>, queue: &dyn Fn(&DeviceBuffer<f64>) -> Result<()>) -> Result<Outcome> {
    use cuda::{Scalar as S, Status as status};
    let name = match method {
        Method::Cg => "CG",
        Method::Bicgstab => "BiCGSTAB",
    };
    let mut relres = start.rr.sqrt() / start.bnorm;
    if start.maxit == 0 {
        return Ok(done(false, 0, relres));
    }
    let mut sc = [0.0f64; S::LEN];
    (sc[S::BNORM], sc[S::TOL], sc[S::MAXIT]) = (start.bnorm, start.tol, start.maxit as f64);
    (sc[S::STATUS], sc[S::ITER], sc[S::RR], sc[S::RZ]) = (status::RUNNING, 0.0, start.rr, start.rz);
    (sc[S::RHO], sc[S::RHO_PREV], sc[S::ALPHA], sc[S::OMEGA]) = (start.rz, 1.0, 1.0, 1.0);
    g.upload(&sc, scalars, 0)?;
    let replayed = match graph.take() {
        Some(graph) => graph,
        None => g.capture(name, || queue(scalars))?,
    };
    let graph = &*graph.insert(replayed);
    let mut batch = 1;
    let mut seen = 0usize;
    loop {
        let t = std::time::Instant::now();
        for _ in 0..batch {
            g.replay(name, graph)?;
        }
        g.download(scalars, 0, &mut sc)?;
        let per_iteration = t.elapsed().as_secs_f64() / batch as f64;
        let it = sc[S::ITER] as usize;
        for k in seen + 1..=it {
            relres = sc[S::HIST + k % S::HIST_LEN];
            history.push(relres);
        }
        seen = it;
        let (it, value) = (it as i64, sc[S::VALUE]);
        let next = it + 1;
        let outcome = match sc[S::STATUS] {
            status::RUNNING => {
                batch = next_batch(history, start.tol, per_iteration).min((start.maxit - it) as usize);
                continue;
            }
            status::CONVERGED => done(true, it, relres),
            status::MAXITER => done(false, it, relres),
            status::BREAK_NAN => broke(it, relres, format!("{name}: the residual is not finite at iteration {it}")),
            status::BREAK_PQ => broke(it, relres, format!("CG: p.Ap = {value:e} at iteration {next}: A is not positive definite")),
            status::BREAK_RHO => broke(it, relres, format!("BiCGSTAB: rho = (r0, r) = {value:e} at iteration {next}")),
            status::BREAK_RV => broke(it, relres, format!("BiCGSTAB: (r0, v) = {value:e} at iteration {next}")),
            status::BREAK_TT => broke(it, relres, format!("BiCGSTAB: (t, t) = {value:e} at iteration {next}")),
            status::BREAK_OMEGA => broke(it, relres, format!("BiCGSTAB: omega = (t, s)/(t, t) = 0 at iteration {it}")),
            other => return Err(Error::new(crate::FEGPU_ERR_INTERNAL, format!("{name}: unknown device status {other}"))),
        };
        return Ok(outcome);
    }
}

/// Iterations to queue before the next look at the device's scalars: about
/// as many as the recent residual decrease says remain (so few run past the
/// end, doing nothing), at most 32, and no more than 3 ms of iterations (a
/// look, some 30 us, then costs under 1%; long iterations are looked at each time).
fn next_batch(history: &[f64], tol: f64, per_iteration: f64) -> usize {
    let cap = (3e-3 / per_iteration).clamp(1.0, 32.0);
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
        let (scalars, graph) = self.looping.take().expect("the device loop runs once per solve");
        let out = device_loop(self.g, &mut *scalars, &mut *graph, method, start, history, &|sc| self.queue_iteration(method, sc));
        self.looping = Some((scalars, graph));
        Some(out)
    }

    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()> {
        self.op.apply(self.g, self.n, &self.vecs[x as usize], &self.vecs[y as usize], None)
    }
    fn amax(&mut self, v: Slot) -> Result<f64> {
        cuda::amax(self.g, self.n, &self.vecs[v as usize])
    }
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>> {
        let mut h = crate::error::host_vec(self.n, 0.0, "solver vector")?;
        self.g.download(&self.vecs[v as usize], 0, &mut h)?;
        Ok(h)
    }
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)> {
        let v = &self.vecs;
        let cd = cd.map(|(c, d)| (&v[c as usize], &v[d as usize]));
        self.reduce.dots(self.g, self.n, &v[a as usize], &v[b as usize], cd)
    }
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()> {
        let v = &self.vecs;
        cuda::update(self.g, self.n, &v[w as usize], a, &v[x as usize], b, y.map(|s| &v[s as usize]), c)
    }
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()> {
        self.precond_guarded(r, z, None)
    }
}
