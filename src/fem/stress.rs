//! Thermal stress with age and creep, as the concrete-dam codes compute it,
//! step after step on the device beside the heat stepper: the temperature
//! increments and the autogenous volume change load the structure as initial
//! strains; each element's modulus follows its age (the exponential or the
//! hyperbolic law); creep follows a Dirichlet-series compliance
//! C(t, tau) = sum_j (f_j + g_j tau^-q_j) (1 - e^(-r_j (t - tau))), whose
//! exponential kernels let each step need only the previous state (Zhu
//! Bofang's incremental method; the stress increment acts at the middle of
//! the step). Per step: the load and each element's effective modulus
//! (kernels/fem.cu `thermal_stress`), the matrix gathered from unit-modulus
//! element matrices scaled per element (`assemble_scaled`), CG for the
//! displacement increment, then the stresses and creep state at the Gauss
//! points. 3-D sets (tet4, hex8).

use super::{cpu, cuda, ElementSet, Problem};
use crate::array::{Array, Buffer};
use crate::error::{Error, ErrorKind, Result};
use crate::sparse::solver::{outcome_status, Method, Outcome, Precond, Solver};
use crate::sparse::{self, f64_buf, Csr};
use std::sync::{Arc, Mutex};

/// Values per material law before the creep terms: the modulus law, E0, a,
/// b, alpha, and the autogenous strain's g_inf, c, d.
pub const LAW_HEAD: usize = 8;
/// Values per creep term: f, g, q, r.
pub const LAW_TERM: usize = 4;

/// Values per material law with `terms` creep terms.
pub fn law_stride(terms: usize) -> usize {
    LAW_HEAD + LAW_TERM * terms
}

pub struct ThermalStress {
    pub set: Arc<ElementSet>,
    laws: Vec<f64>,
    terms: usize,
    cast: Vec<f64>,
    /// Each material's youngest element (the latest cast).
    youngest: Vec<usize>,
    laws_d: Buffer<f64>,
    nu: Buffer<f64>,
    cast_d: Buffer<f64>,
    /// Unit-modulus element stiffness matrices (entry-major).
    ke: Buffer<f64>,
    fixed: Vec<i64>,
    points: usize,
    state: Mutex<State>,
}

/// What a step advances (t, the previous temperatures, the stresses and
/// creep state, u) and its scratch (f, du, moduli, the matrix, the solver).
struct State {
    t: f64,
    t_old: Buffer<f64>,
    stress: Buffer<f64>,
    w: Buffer<f64>,
    u: Array,
    ebar: Buffer<f64>,
    f: Array,
    du: Array,
    k: Arc<Csr>,
    /// CG with Jacobi over k, made at the first step (k has values then).
    solver: Option<Solver>,
}

impl ThermalStress {
    /// For a 3-D elasticity set (of its props (E, nu) only nu is used: the
    /// moduli follow the laws): `laws` holds LAW_HEAD + LAW_TERM terms values per material,
    /// `cast` each element's casting time, `t0` the start time (every
    /// element cast before it), `temperature` the nodes' temperatures at t0,
    /// `fixed` the dofs (counted from `base`) held at zero displacement.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        set: Arc<ElementSet>,
        laws: &[f64],
        terms: usize,
        cast: &[f64],
        t0: f64,
        temperature: &[f64],
        fixed: &[i64],
        base: i64,
    ) -> Result<ThermalStress> {
        set.element.linear_only("thermal stress")?;
        if set.problem != Problem::Elastic3d {
            return Err(Error::new(ErrorKind::Unsupported, "thermal stress is computed on 3-D elasticity sets (tet4, hex8)"));
        }
        let materials = set.materials()?.props.len() / 2;
        let stride = law_stride(terms);
        if terms > 8 {
            return Err(Error::invalid(format!("n_terms = {terms}: at most 8 creep terms")));
        }
        if laws.len() != stride * materials {
            return Err(Error::size(format!(
                "laws has {} values; {LAW_HEAD} + {LAW_TERM} x {terms} terms = {stride} per material x {materials} materials are needed",
                laws.len()
            )));
        }
        check_laws(laws, stride, terms)?;
        if cast.len() != set.elements {
            return Err(Error::size(format!("cast has {} values; the set has {} elements", cast.len(), set.elements)));
        }
        if temperature.len() != set.nodes {
            return Err(Error::size(format!("temperature has {} values; the set has {} nodes", temperature.len(), set.nodes)));
        }
        for (name, v) in [("cast", cast), ("temperature", temperature)] {
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(Error::invalid(format!("{} = {}: must be finite", crate::error::at(name, i), v[i])));
            }
        }
        if !t0.is_finite() {
            return Err(Error::invalid(format!("t0 = {t0}: must be finite")));
        }
        set.check_nodes_used("the thermal stress solve")?;
        let fixed: Vec<i64> = super::dof_list(set.dofs(), fixed, base, "fixed")?.into_iter().map(|d| d as i64).collect();
        set.check_geometry()?;
        let pattern = set.assembly_pattern()?;
        let nu: Vec<f64> = set.materials()?.props.chunks(2).map(|p| p[1]).collect();
        let unit: Vec<f64> = nu.iter().flat_map(|&n| [1.0, n]).collect();
        let ke = set.stiffness_with(&unit)?;
        let points = cpu::points(set.element, set.order).len();
        let mut youngest: Vec<Option<usize>> = vec![None; materials];
        for (e, &m) in set.material.iter().enumerate() {
            let slot = &mut youngest[m as usize];
            if slot.is_none_or(|y| cast[e] > cast[y]) {
                *slot = Some(e);
            }
        }
        let n = set.dofs();
        let zeros = |len: usize| set.resident(vec![0.0; len]);
        let array = || Array::new(set.ctx.clone(), n, 1, Some(&vec![0.0; n]));
        let k = Arc::new(pattern.with_values(&vec![0.0; pattern.pattern.nnz()])?);
        let state = State {
            t: t0,
            t_old: set.resident(temperature.to_vec())?,
            stress: zeros(6 * points * set.elements)?,
            w: zeros((6 * points * terms * set.elements).max(1))?,
            u: array()?,
            ebar: zeros(set.elements)?,
            f: array()?,
            du: array()?,
            solver: None,
            k,
        };
        Ok(ThermalStress {
            laws_d: set.resident(laws.to_vec())?,
            nu: set.resident(nu)?,
            cast_d: set.resident(cast.to_vec())?,
            laws: laws.to_vec(),
            terms,
            cast: cast.to_vec(),
            youngest: youngest.into_iter().flatten().collect(),
            ke,
            fixed,
            points,
            set,
            state: Mutex::new(state),
        })
    }

    /// Refused once a call that panicked holding it may have left it half-changed (`error::locked`).
    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        crate::error::locked(&self.state, "the stress stepper")
    }

    /// One step of dt to the temperatures `temperature` (nodes, where the
    /// set lives: the heat stepper's array), with an optional increment of
    /// nodal loads (dofs). A failed step leaves the state as it was.
    pub fn step(&self, dt: f64, temperature: &Array, load: Option<&Array>, tol: f64, maxit: i64) -> Result<Outcome> {
        super::check_dt(dt)?;
        sparse::check_array(&self.set.ctx, temperature, self.set.nodes, "T")?;
        if let Some(l) = load {
            sparse::check_array(&self.set.ctx, l, self.set.dofs(), "load")?;
        }
        // checked here, not left to the solve: a NaN at nodes whose dofs are
        // all fixed never reaches the solve's b, yet the update pass would
        // write it into the stresses
        temperature.check_finite("T")?;
        if let Some(l) = load {
            l.check_finite("load")?;
        }
        let mut st = self.state()?;
        let st = &mut *st;
        // T's guard for the whole step, so the commit at its end (t_old =
        // T) does not wait on, or fail at, T's lock after u has moved
        let mut gt = temperature.lock("T")?;
        let tn = f64_buf(&mut gt);
        let stride = law_stride(self.terms);
        // every element cast, with a positive modulus, at the step's middle:
        // each material's youngest element decides (the laws grow with age)
        let middle = st.t + 0.5 * dt;
        for &e in &self.youngest {
            let (m, c) = (self.set.material[e] as usize, self.cast[e]);
            let modulus = cpu::law_modulus(&self.laws[m * stride..], middle - c);
            if middle - c <= 0.0 || modulus.is_nan() || modulus <= 0.0 {
                return Err(Error::invalid(format!(
                    "element {} (cast at {c}) has age {} and modulus {modulus} at t = {middle}, the step's middle: \
                     leave elements not yet cast out of the set",
                    e + 1,
                    middle - c
                )));
            }
        }
        st.f.zero()?;
        self.pass(st, dt, tn, false)?;
        if let Some(l) = load {
            crate::array::vector::vector_axpby(1.0, l, 1.0, &st.f)?;
        }
        st.k.rewrite_values(|v| self.set.gather_scaled(&self.ke, &st.ebar, v))?;
        sparse::apply_dirichlet(&st.k, &self.fixed, 0, &vec![0.0; self.fixed.len()], &st.f)?;
        st.du.zero()?;
        if st.solver.is_none() {
            st.solver = Some(Solver::new(st.k.clone(), Method::Cg, Precond::Jacobi)?);
        }
        let (outcome, _, _) = st.solver.as_ref().expect("made above").solve(&st.f, &st.du, tol, maxit)?;
        outcome_status(&outcome)?;
        self.pass(st, dt, tn, true)?;
        crate::array::vector::vector_axpby(1.0, &st.du, 1.0, &st.u)?;
        match (&mut st.t_old, &*tn) {
            (Buffer::Host(old), Buffer::Host(new)) => old.copy_from_slice(new),
            (Buffer::Device(old), Buffer::Device(new)) => self.set.ctx.device()?.copy(new, old)?,
            _ => return Err(crate::array::mixed_backends()),
        }
        st.t += dt;
        Ok(outcome)
    }

    /// The load pass (update false: f and the moduli) or the update pass
    /// (stresses and creep state from du).
    /// `temperature`: T's values (the step holds its guard).
    fn pass(&self, st: &mut State, dt: f64, temperature: &Buffer<f64>, update: bool) -> Result<()> {
        let set = &self.set;
        let stride = law_stride(self.terms);
        let (mut gf, mut gd) = (st.f.lock("the stepper's load")?, st.du.lock("the stepper's increment")?);
        match (temperature, f64_buf(&mut gf), f64_buf(&mut gd), &mut st.stress, &mut st.w, &mut st.ebar, &st.t_old) {
            (
                Buffer::Host(tn),
                Buffer::Host(f),
                Buffer::Host(du),
                Buffer::Host(stress),
                Buffer::Host(w),
                Buffer::Host(eb),
                Buffer::Host(to),
            ) => {
                let (Buffer::Host(laws), Buffer::Host(nu), Buffer::Host(cast)) = (&self.laws_d, &self.nu, &self.cast_d) else {
                    return Err(crate::array::mixed_backends());
                };
                let pass = cpu::StressPass { laws, stride, terms: self.terms, nu, cast, t: st.t, dt, t_new: tn, t_old: to };
                cpu::thermal_stress(set, &pass, stress, w, eb, f, update.then_some(&du[..]));
            }
            (
                Buffer::Device(tn),
                Buffer::Device(f),
                Buffer::Device(du),
                Buffer::Device(stress),
                Buffer::Device(w),
                Buffer::Device(eb),
                Buffer::Device(to),
            ) => {
                let (Buffer::Device(laws), Buffer::Device(nu), Buffer::Device(cast), Some(d)) =
                    (&self.laws_d, &self.nu, &self.cast_d, &set.device)
                else {
                    return Err(crate::array::mixed_backends());
                };
                let b = cuda::StressBuffers {
                    laws,
                    stride,
                    terms: self.terms,
                    nu,
                    cast,
                    t: st.t,
                    dt,
                    t_new: tn,
                    t_old: to,
                    stress,
                    w,
                    ebar: eb,
                };
                let g = set.ctx.device()?;
                if update {
                    cuda::thermal_stress(g, set, d, &b, None, Some(du))?
                } else {
                    cuda::thermal_stress(g, set, d, &b, Some(f), None)?
                }
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(())
    }

    /// The time reached.
    pub fn time(&self) -> f64 {
        crate::error::peek(&self.state).t
    }

    /// The Gauss-point stresses (6 per point: xx yy zz xy yz zx, points x
    /// elements, element after element) or with `nodal` the nodes' averages
    /// of the element means (6 x nodes).
    pub fn stresses(&self, nodal: bool, out: &mut [f64]) -> Result<()> {
        let (ne, np) = (self.set.elements, self.points);
        let want = if nodal { 6 * self.set.nodes } else { 6 * np * ne };
        if out.len() != want {
            return Err(Error::size(format!("the output has {} values; {want} are needed", out.len())));
        }
        let st = self.state()?;
        let download = |b: &Buffer<f64>, len: usize| -> Result<Vec<f64>> {
            Ok(match b {
                Buffer::Host(h) => h[..len].to_vec(),
                Buffer::Device(d) => {
                    let mut h = vec![0.0; len];
                    self.set.ctx.device()?.download(d, 0, &mut h)?;
                    h
                }
            })
        };
        if !nodal {
            let stress = download(&st.stress, 6 * np * ne)?;
            for (k, column) in stress.chunks(ne).enumerate() {
                column.iter().enumerate().for_each(|(e, &v)| out[e * 6 * np + k] = v);
            }
            return Ok(());
        }
        let nodes = self.set.nodes;
        let (sums, count) = match (&st.stress, &self.set.device) {
            (Buffer::Host(stress), _) => {
                let (mut sums, mut count) = (vec![0.0; 6 * nodes], vec![0.0; nodes]);
                cpu::stress_to_nodes(&self.set, np, stress, &mut sums, &mut count);
                (sums, count)
            }
            (Buffer::Device(stress), Some(d)) => {
                let g = self.set.ctx.device()?;
                let (sums, count) = (g.zeros::<f64>(6 * nodes)?, g.zeros::<f64>(nodes)?);
                cuda::stress_to_nodes(g, &self.set, d, np, stress, &sums, &count)?;
                (download(&Buffer::Device(sums), 6 * nodes)?, download(&Buffer::Device(count), nodes)?)
            }
            _ => return Err(crate::array::mixed_backends()),
        };
        for v in 0..nodes {
            (0..6).for_each(|k| out[6 * v + k] = sums[6 * v + k] / count[v]);
        }
        Ok(())
    }

    /// The displacements accumulated since t0 (dofs).
    pub fn displacements(&self, out: &mut [f64]) -> Result<()> {
        let want = self.set.dofs();
        if out.len() != want {
            return Err(Error::size(format!("the output has {} values; {want} are needed (one a dof)", out.len())));
        }
        self.state()?.u.download(0, out, "u")
    }
}

/// Each material's law: a known modulus law with E0 > 0, the rest finite
/// and the rates and exponents >= 0 (creep rates > 0).
fn check_laws(laws: &[f64], stride: usize, terms: usize) -> Result<()> {
    for (m, p) in laws.chunks(stride).enumerate() {
        let bad = |what: &str| Err(Error::invalid(format!("{} = {p:?}: {what}", crate::error::column("laws", m, stride))));
        if p.iter().any(|v| !v.is_finite()) {
            return bad("every value must be finite");
        }
        if ![0.0, 1.0, 2.0].contains(&p[0]) {
            return bad("its first value is the modulus law: 0 exponential, 1 hyperbolic, 2 constant");
        }
        if p[1] <= 0.0 || p[2] < 0.0 || p[3] < 0.0 || p[6] < 0.0 || p[7] < 0.0 {
            return bad("E0 must be > 0; a, b, c and d >= 0");
        }
        if (0..terms).any(|j| {
            let c = &p[LAW_HEAD + LAW_TERM * j..LAW_HEAD + LAW_TERM * (j + 1)];
            c[0] < 0.0 || c[1] < 0.0 || c[2] < 0.0 || c[3] <= 0.0
        }) {
            return bad("creep terms need f, g, q >= 0 and r > 0");
        }
    }
    Ok(())
}
