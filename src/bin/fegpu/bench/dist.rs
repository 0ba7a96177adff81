//! `mpiexec -n N fegpu bench dist [options]`: what a distributed run costs
//! beside the one-process run of the same work, timed on rank 0 in the
//! same job (issues #21 and #24). Three sections, all by default
//! (`--only solve,lattice,ebe` picks some):
//! - solve: a Krylov method over a distributed matrix, rows split into
//!   contiguous slabs: the 7-point Laplacian (`--system laplacian --grid n`:
//!   n^3 rows, or n^3 a rank stacked along z with `--weak`) or the clamped
//!   hex8 elasticity block (`--system elasticity --grid m`: m^3 elements, a
//!   node's three dofs on one rank; per-rank AMG gets its rows' rigid-body
//!   modes). `--method cg|bicgstab|gmres|cgs`, `--precond
//!   none|jacobi|ilu0|amg` (ILU(0) and AMG as block-Jacobi over the ranks).
//!   `--iterations k` times k iterations against an unreachable tolerance;
//!   `--tol t` adds a solve to t from x = 0 (setup, iterations, time to
//!   solution). The one-process figures: the whole system (or, with
//!   `--weak`, one rank's n^3 share) on rank 0's GPU;
//! - lattice: a D3Q19 step (f32) of an m^3 lattice split in z-slabs
//!   (`--lattice m`; `--lattice-weak`: m^3 a rank), beside its ghost-plane
//!   swap and the one-process step of the same (or, weak, one rank's) lattice;
//! - ebe: an element-by-element CG iteration (hex8 elasticity, an e^3 block
//!   split in layers of elements, `--ebe e`) beside the one-process one.

use fegpu::amg::rigid_body_modes;
use fegpu::array::Array;
use fegpu::context::Context;
use fegpu::dist::{matrix::Rows, Comm, DistCsr, DistLattice, DistSolver};
use fegpu::error::Result;
use fegpu::krylov::GlobalSum;
use fegpu::lbm::{Lattice, LatticeApi, Precision, Scheme};
use fegpu::sparse::solver::{Method, Precond, Settings, Solver};
use fegpu::sparse::{build_pattern, gallery, Csr};
use mpi::traits::*;
use std::sync::Arc;
use std::time::Instant;

struct Options {
    elasticity: bool,
    n: usize,
    weak: bool,
    method: Method,
    precond: Precond,
    iterations: i64,
    tol: Option<f64>,
    sections: Vec<String>,
    lattice: usize,
    lattice_weak: bool,
    steps: usize,
    ebe: usize,
}

fn options(args: &[String]) -> Result<Options> {
    let mut o = Options {
        elasticity: false,
        n: 128,
        weak: false,
        method: Method::Cg,
        precond: Precond::Jacobi,
        iterations: 200,
        tol: None,
        sections: ["solve", "lattice", "ebe"].map(String::from).to_vec(),
        lattice: 256,
        lattice_weak: false,
        steps: 50,
        ebe: 48,
    };
    let bad = |what: String| fegpu::Error::invalid(format!("bench dist: {what}"));
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut text = || it.next().cloned().ok_or_else(|| bad(format!("{a} wants a value")));
        let count = |v: String| v.parse::<usize>().map_err(|_| bad(format!("{a} wants a count")));
        match a.as_str() {
            "--system" => {
                o.elasticity = match text()?.as_str() {
                    "laplacian" => false,
                    "elasticity" => true,
                    s => return Err(bad(format!("--system {s}: expected laplacian or elasticity"))),
                }
            }
            "--grid" => o.n = count(text()?)?,
            "--weak" => o.weak = true,
            "--method" => o.method = super::method_named(&text()?, Method::DEFAULT_RESTART).map_err(bad)?,
            "--precond" => o.precond = super::precond_named(&text()?).map_err(bad)?,
            "--iterations" => o.iterations = count(text()?)? as i64,
            "--tol" => o.tol = Some(text()?.parse().map_err(|_| bad("--tol wants a number".into()))?),
            "--only" => o.sections = text()?.split(',').map(String::from).collect(),
            "--lattice" => o.lattice = count(text()?)?,
            "--lattice-weak" => o.lattice_weak = true,
            "--steps" => o.steps = count(text()?)?,
            "--ebe" => o.ebe = count(text()?)?,
            other => return Err(bad(format!("unknown option {other}"))),
        }
    }
    if o.elasticity && o.weak {
        return Err(bad("--weak stacks Laplacian cubes; the elasticity block is timed for strong scaling only".into()));
    }
    Ok(o)
}

pub fn run(args: &[String]) -> Result<()> {
    let o = options(args)?;
    let universe = mpi::initialize().ok_or_else(|| fegpu::Error::invalid("MPI was initialised already"))?;
    let world = universe.world();
    let comm = Arc::new(Comm::world(&world));
    let device = fegpu::dist::device_for(&comm, -1);
    let ctx = Arc::new(fegpu::context::Context::new(fegpu::context::Request::Auto, device)?);
    if comm.rank == 0 {
        println!("backend: {} ({} ranks)", super::describe(&ctx), comm.size);
    }
    // a fixed number of repetitions, all ranks together
    let per_call = |f: &dyn Fn() -> Result<()>, reps: usize| -> Result<f64> {
        f()?;
        world.barrier();
        let t = Instant::now();
        for _ in 0..reps {
            f()?;
        }
        world.barrier();
        Ok(t.elapsed().as_secs_f64() * 1e3 / reps as f64)
    };
    let on = |s: &str| o.sections.iter().any(|x| x == s);
    if on("solve") {
        solve_section(&world, &comm, &ctx, &o, &per_call)?;
    }
    if on("lattice") {
        lattice_step(&world, &comm, &ctx, &o, &per_call)?;
    }
    if on("ebe") {
        ebe_iteration(&world, &comm, &ctx, o.ebe, o.iterations)?;
    }
    Ok(())
}

/// Milliseconds a call of the closure takes, over the given repetitions, all ranks together.
type Timer<'a> = &'a dyn Fn(&dyn Fn() -> Result<()>, usize) -> Result<f64>;

/// A square system as CSR arrays (0-based), its right-hand side, and, for
/// elasticity, the node coordinates (3 a node, a node's dofs consecutive).
struct System {
    rp: Vec<i64>,
    ci: Vec<i64>,
    v: Vec<f64>,
    b: Vec<f64>,
    coords: Option<Vec<f64>>,
    name: String,
}

impl System {
    fn rows(&self) -> usize {
        self.rp.len() - 1
    }

    /// Rows first..end as a rank passes them.
    fn slab(&self, first: usize, end: usize) -> (Vec<i64>, std::ops::Range<usize>) {
        let rp = self.rp[first..=end].iter().map(|&p| p - self.rp[first]).collect();
        (rp, self.rp[first] as usize..self.rp[end] as usize)
    }

    /// The AMG options for rows first..end: three dofs a node and the
    /// nodes' rigid-body modes for elasticity.
    fn settings(&self, first: usize, end: usize) -> Result<Settings> {
        let mut s = Settings::from_env();
        if let Some(c) = &self.coords {
            s.amg.block_size = 3;
            s.amg.near_null_space = Some(rigid_body_modes(3, &c[first..end])?);
        }
        Ok(s)
    }
}

fn laplacian(dims: [usize; 3]) -> System {
    let (rp, ci, v) = gallery::laplacian7_box(dims);
    let b = vec![1.0; rp.len() - 1];
    let name = format!("7-point Laplacian {}x{}x{}", dims[0], dims[1], dims[2]);
    System { rp, ci, v, b, coords: None, name }
}

/// The clamped hex8 elasticity block, assembled on this rank's device.
fn elasticity(ctx: &Arc<Context>, m: usize) -> Result<System> {
    let (a, b, coords) = fegpu::fem::gallery::clamped_block(ctx, m, false)?;
    let p = &a.pattern;
    let (rp, ci) = (p.row_ptr.iter().map(|&k| k as i64).collect(), p.col.iter().map(|&c| c as i64).collect());
    let v = a.download_values()?;
    Ok(System { rp, ci, v, b, coords: Some(coords), name: format!("hex8 elasticity {m}^3 elements") })
}

/// A solve from the given x to a tolerance within maxit: (iterations, setup s).
type SolveFn<'a> = &'a dyn Fn(&Array, f64, i64) -> Result<(i64, f64)>;

/// ms an iteration; with a tolerance, (iterations, setup s, solve ms).
type Timings = (f64, Option<(i64, f64, f64)>);

/// Per iteration (an unreachable tolerance) and, with a tolerance, the
/// solve from x = 0: (ms an iteration, Some((iterations, setup s, solve ms))).
/// `built`: the seconds the solver's construction took (its preconditioner's
/// setup), to which a first solve's own setup is added.
fn timings(solve: SolveFn, built: f64, x: &Array, zero: &[f64], o: &Options, together: &dyn Fn()) -> Result<Timings> {
    let to_tol = match o.tol {
        Some(tol) => {
            x.upload(0, zero, "x")?;
            together();
            let (its, setup) = solve(x, tol, 100_000)?;
            // the preconditioner built: the solve alone
            x.upload(0, zero, "x")?;
            together();
            let t = Instant::now();
            solve(x, tol, 100_000)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            Some((its, built + setup, ms))
        }
        None => None,
    };
    solve(x, 1e-300, 2)?;
    together();
    let t = Instant::now();
    solve(x, 1e-300, o.iterations)?;
    Ok((t.elapsed().as_secs_f64() * 1e3 / o.iterations as f64, to_tol))
}

fn print_timings(who: &str, (per_it, to_tol): Timings) {
    print!("{who}: {per_it:.4} ms/iteration");
    if let Some((its, setup, ms)) = to_tol {
        print!(
            "; to tolerance: {its} iterations, setup {setup:.3} s, solve {ms:.2} ms, time to solution {:.3} s",
            setup + ms / 1e3
        );
    }
    println!();
}

fn solve_section(
    world: &mpi::topology::SimpleCommunicator,
    comm: &Arc<Comm>,
    ctx: &Arc<Context>,
    o: &Options,
    per_call: Timer,
) -> Result<()> {
    let (rank, size) = (comm.rank, comm.size);
    let sys = match (o.elasticity, o.weak) {
        (true, _) => elasticity(ctx, o.n)?,
        (false, true) => laplacian([o.n, o.n, o.n * size]),
        (false, false) => laplacian([o.n; 3]),
    };
    let rows = sys.rows();
    // slabs; elasticity keeps a node's three dofs together
    let unit = if o.elasticity { 3 } else { 1 };
    let (first, end) = (rows / unit * rank / size * unit, rows / unit * (rank + 1) / size * unit);
    let (my_rp, entries) = sys.slab(first, end);
    let a = Arc::new(DistCsr::new(
        comm.clone(),
        ctx.clone(),
        &Rows {
            n_global: rows as i64,
            first_row: first as i64,
            row_ptr: &my_rp,
            col: &sys.ci[entries.clone()],
            values: &sys.v[entries],
            base: 0,
        },
    )?);
    let n = end - first;
    let zero = vec![0.0; n];
    let b = Array::new(ctx.clone(), n, 1, Some(&sys.b[first..end]))?;
    let x = Array::new(ctx.clone(), n, 1, Some(&zero[..]))?;
    let clock = Instant::now();
    let solver = DistSolver::new(a.clone(), o.method, o.precond, sys.settings(first, end)?)?;
    let built = clock.elapsed().as_secs_f64();
    let what = format!("{} ({})", o.method, o.precond);
    let dist = timings(
        &|x, tol, maxit| solver.solve(Some(&b), Some(x), tol, maxit).map(|(out, _, setup)| (out.iterations, setup)),
        built,
        &x,
        &zero,
        o,
        &|| world.barrier(),
    )?;
    let spmv = per_call(&|| a.spmv(Some(&b), Some(&x)), 20)?;
    let reduce = per_call(&|| comm.sum(&mut [1.0, 2.0]), 1000)?;
    let (sent, received) = a.halo_values();
    if rank == 0 {
        println!("{}: {}", sys.name, a.describe());
        print_timings(&format!("distributed, {size} ranks, {what}"), dist);
        println!(
            "  a product called alone (host-staged) {spmv:.4} ms; host allreduce of 2 doubles {:.2} us; halo per product on rank 0: \
             {sent} values out, {received} in",
            reduce * 1e3
        );
    }
    drop((solver, a, b, x));
    world.barrier();
    if rank == 0 {
        // the one-process run: the whole system, or with --weak one rank's cube
        let one = if o.weak { laplacian([o.n; 3]) } else { sys };
        let rows = one.rows();
        let settings = one.settings(0, rows)?;
        let m = Arc::new(Csr::new(ctx.clone(), build_pattern(rows, rows, &one.rp, &one.ci, 0)?, &one.v)?);
        let clock = Instant::now();
        let solver = Solver::with_settings(m, o.method, o.precond, settings)?;
        let built = clock.elapsed().as_secs_f64();
        let zero = vec![0.0; rows];
        let b = Array::new(ctx.clone(), rows, 1, Some(&one.b[..]))?;
        let x = Array::new(ctx.clone(), rows, 1, Some(&zero[..]))?;
        let single = timings(
            &|x, tol, maxit| {
                let setup = solver.prepare()?;
                solver.solve(&b, x, tol, maxit).map(|out| (out.0.iterations, setup))
            },
            built,
            &x,
            &zero,
            o,
            &|| {},
        )?;
        print_timings(&format!("one process, {}, {what}", one.name), single);
        let scale = if o.weak { "weak-scaling efficiency" } else { "speed-up" };
        println!("  per iteration: distributed / one process = {:.3} ({scale} {:.3})", dist.0 / single.0, single.0 / dist.0);
        if let (Some(d), Some(s)) = (dist.1, single.1) {
            println!("  time to solution: {scale} {:.3}", (s.1 + s.2 / 1e3) / (d.1 + d.2 / 1e3));
        }
    }
    world.barrier();
    Ok(())
}

/// The split lattice's step against the one-process step, MLUPS over the
/// whole lattice.
fn lattice_step(
    world: &mpi::topology::SimpleCommunicator,
    comm: &Arc<Comm>,
    ctx: &Arc<Context>,
    o: &Options,
    per_step: Timer,
) -> Result<()> {
    let (rank, size, n, steps) = (comm.rank, comm.size, o.lattice, o.steps);
    let nz = if o.lattice_weak { n * size } else { n };
    let (z_first, z_end) = (nz * rank / size, nz * (rank + 1) / size);
    let dims = [n as i64, n as i64, nz as i64];
    let split =
        DistLattice::new(comm.clone(), ctx.clone(), dims, ((z_first) as i64, (z_end - z_first) as i64), Precision::F32, 0.6, 7)?;
    let mlups = |ms: f64, z: usize| (n * n * z) as f64 / (ms * 1e3);
    let sync = || ctx.gpu().map_or(Ok(()), |g| g.synchronize("bench dist"));
    // the steps queued in one call, as the one-process steps below (a call
    // waits for its swaps at the end: step by step, that wait would count too)
    let step = per_step(&|| split.step(steps as u64).and_then(|()| sync()), 1)? / steps as f64;
    let swap = per_step(&|| split.exchange(), steps)?;
    if rank == 0 {
        println!("{}", split.describe());
        println!(
            "split lattice, {size} ranks: {step:.3} ms/step ({:.0} MLUPS over the {n}x{n}x{nz} lattice), of which the ghost-plane swap {swap:.3} ms",
            mlups(step, nz)
        );
        // the one-process step of the same lattice, or with --lattice-weak of one rank's cube
        let one = Lattice::new(ctx.clone(), [n as i64; 3], Precision::F32, 0.6, 7)?;
        let z = if o.lattice_weak { n } else { nz };
        for scheme in [Scheme::InPlace, Scheme::Pull] {
            one.set_scheme(scheme)?;
            one.step(2)?;
            sync()?;
            let t = Instant::now();
            one.step(steps as u64)?;
            sync()?;
            let ms = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
            let ratio = if o.lattice_weak {
                format!("weak-scaling efficiency {:.3}", ms / step)
            } else {
                format!("speed-up {:.3}", ms / step)
            };
            println!("one process {n}^3, {scheme:?}: {ms:.3} ms/step ({:.0} MLUPS); {ratio}", mlups(ms, z));
        }
    }
    world.barrier();
    Ok(())
}

/// Element-by-element CG (Jacobi) on an m^3 hex8 elasticity block clamped
/// at z = 0, each rank holding a contiguous run of element layers, against
/// the one-process EBE iteration on rank 0.
fn ebe_iteration(
    world: &mpi::topology::SimpleCommunicator,
    comm: &Arc<Comm>,
    ctx: &Arc<Context>,
    m: usize,
    iterations: i64,
) -> Result<()> {
    use fegpu::fem::{ebe::EbeSolver, gallery::hex_block, Element, ElementSet, Problem};
    let (rank, size) = (comm.rank, comm.size);
    let layer = (m + 1) * (m + 1);
    let (coords, conn) = hex_block(m);
    let set_of = |coords: &[f64], conn: &[i64]| -> Result<Arc<ElementSet>> {
        let set = super::fem::set_of(ctx, Element::Hex8, Problem::Elastic3d, coords, conn, 2)?;
        set.integrate()?;
        Ok(Arc::new(set))
    };
    let clamped = |nodes: usize| -> Vec<i64> { (0..3 * layer.min(nodes)).map(|d| d as i64).collect() };
    // together: every rank times the same solve (the one-process one runs on rank 0 alone)
    let time = |solve: &dyn Fn(&Array, &Array) -> Result<()>, dofs: usize, together: bool| -> Result<f64> {
        let load: Vec<f64> = (0..dofs).map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5).collect();
        let (b, x) = (Array::new(ctx.clone(), dofs, 1, Some(&load))?, Array::new(ctx.clone(), dofs, 1, Some(&vec![0.0; dofs]))?);
        solve(&b, &x)?;
        if together {
            world.barrier();
        }
        let t = Instant::now();
        solve(&b, &x)?;
        Ok(t.elapsed().as_secs_f64() * 1e3 / iterations as f64)
    };
    // this rank's layers k0..k1 of elements and nodes k0..=k1 (global node = local + k0 layers)
    let (k0, k1) = (m * rank / size, m * (rank + 1) / size);
    let local_coords = &coords[3 * k0 * layer..3 * (k1 + 1) * layer];
    let local_conn: Vec<i64> = conn[8 * k0 * m * m..8 * k1 * m * m].iter().map(|&v| v - (k0 * layer) as i64).collect();
    let global: Vec<i64> = (0..(k1 - k0 + 1) * layer).map(|l| (l + k0 * layer) as i64).collect();
    let set = set_of(local_coords, &local_conn)?;
    let fixed = if k0 == 0 { clamped(set.nodes) } else { Vec::new() };
    let split = fegpu::dist::ebe::create(comm.clone(), set.clone(), &global, 0, (&fixed, 0, &vec![0.0; fixed.len()]), false)?;
    let dofs = set.dofs();
    let ms = time(&|b, x| split.solve(b, x, 1e-300, iterations).map(|_| ()), dofs, true)?;
    if rank == 0 {
        println!("{}", split.shared.as_ref().map_or(String::new(), |s| s.describe()));
        println!("element by element, {m}^3 hex8 elasticity, {size} ranks: CG (Jacobi) {ms:.4} ms/iteration");
        let whole = set_of(&coords, &conn)?;
        let fixed = clamped(whole.nodes);
        let one = EbeSolver::new(whole.clone(), &fixed, 0, &vec![0.0; fixed.len()], false)?;
        let single = time(&|b, x| one.solve(b, x, 1e-300, iterations).map(|_| ()), whole.dofs(), false)?;
        println!("one process: element by element {single:.4} ms/iteration; distributed / one process = {:.2}", ms / single);
    }
    world.barrier();
    Ok(())
}
