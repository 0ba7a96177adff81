//! `mpiexec -n N fegpu bench dist [--grid n] [--iterations k] [--lattice m] [--steps s] [--ebe e]`:
//! a distributed CG iteration (Jacobi) on the 7-point n^3 Laplacian, the
//! rows split into contiguous slabs over the ranks, beside what it is made
//! of (the distributed product, a global reduction) and, on rank 0, the
//! one-process iteration on the whole matrix in the same run; then a D3Q19
//! step (f32) of an m^3 lattice split in z-slabs, beside its ghost-plane
//! swap and, on rank 0, the one-process step; then an element-by-element
//! CG iteration (hex8 elasticity, an e^3 block split in layers of elements)
//! beside the one-process EBE iteration.

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

pub fn run(args: &[String]) -> Result<()> {
    let (mut n, mut iterations, mut lattice, mut steps, mut ebe) = (128usize, 200i64, 256usize, 50usize, 48usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse::<usize>().ok());
        match a.as_str() {
            "--grid" => n = value().unwrap_or(n),
            "--iterations" => iterations = value().map_or(iterations, |v| v as i64),
            "--lattice" => lattice = value().unwrap_or(lattice),
            "--steps" => steps = value().unwrap_or(steps),
            "--ebe" => ebe = value().unwrap_or(ebe),
            other => return Err(fegpu::Error::invalid(format!("bench dist: unknown option {other}"))),
        }
    }
    let universe = mpi::initialize().ok_or_else(|| fegpu::Error::invalid("MPI was initialised already"))?;
    let world = universe.world();
    let comm = Arc::new(Comm::world(&world));
    let (rank, size) = (comm.rank, comm.size);
    let device = fegpu::dist::device_for(&comm, -1);
    let ctx = Arc::new(fegpu::context::Context::new(fegpu::context::Request::Auto, device)?);
    let (rp, ci, v) = gallery::laplacian7(n);
    let rows = rp.len() - 1;
    let (first, last) = (rows * rank / size, rows * (rank + 1) / size);
    let my_rp: Vec<i64> = rp[first..=last].iter().map(|&p| p - rp[first]).collect();
    let (s, e) = (rp[first] as usize, rp[last] as usize);
    let a = Arc::new(DistCsr::new(
        comm.clone(),
        ctx.clone(),
        &Rows { n_global: rows as i64, first_row: first as i64, row_ptr: &my_rp, col: &ci[s..e], values: &v[s..e], base: 0 },
    )?);
    let ones = vec![1.0; last - first];
    let b = Array::new(ctx.clone(), last - first, 1, Some(&ones[..]))?;
    let x = Array::new(ctx.clone(), last - first, 1, Some(&vec![0.0; last - first][..]))?;
    let solver = DistSolver::new(a.clone(), Method::Cg, Precond::Jacobi, Settings::from_env())?;
    // a fixed number of iterations: a tolerance no iteration reaches
    let per_iteration = |f: &dyn Fn() -> Result<()>, reps: usize| -> Result<f64> {
        f()?;
        world.barrier();
        let t = Instant::now();
        for _ in 0..reps {
            f()?;
        }
        world.barrier();
        Ok(t.elapsed().as_secs_f64() * 1e3 / reps as f64)
    };
    let cg = per_iteration(&|| solver.solve(Some(&b), Some(&x), 1e-300, iterations).map(|_| ()), 1)? / iterations as f64;
    let spmv = per_iteration(&|| a.spmv(Some(&b), Some(&x)), 50)?;
    let reduce = per_iteration(&|| comm.sum(&mut [1.0, 2.0]), 1000)?;
    let (sent, received) = a.halo_values();
    if rank == 0 {
        println!("{}", a.describe());
        println!("backend: {}", super::describe(&ctx));
        println!(
            "distributed, {size} ranks: CG (Jacobi) {cg:.4} ms/iteration; SpMV {spmv:.4} ms; allreduce of 2 doubles {:.2} us; \
             halo per SpMV on rank 0: {sent} values out, {received} in",
            reduce * 1e3
        );
    }
    world.barrier();
    if rank == 0 {
        // the one-process iteration: the whole matrix in this rank's context
        let m = Arc::new(Csr::new(ctx.clone(), build_pattern(rows, rows, &rp, &ci, 0)?, &v)?);
        let one = Solver::with_settings(m, Method::Cg, Precond::Jacobi, Settings::from_env())?;
        let ones = vec![1.0; rows];
        let (b, x) =
            (Array::new(ctx.clone(), rows, 1, Some(&ones[..]))?, Array::new(ctx.clone(), rows, 1, Some(&vec![0.0; rows][..]))?);
        one.solve(&b, &x, 1e-300, iterations)?;
        let t = Instant::now();
        one.solve(&b, &x, 1e-300, iterations)?;
        let single = t.elapsed().as_secs_f64() * 1e3 / iterations as f64;
        println!("one process: CG (Jacobi) {single:.4} ms/iteration; distributed / one process = {:.2}", cg / single);
    }
    world.barrier();
    lattice_step(&world, &comm, &ctx, lattice, steps, &per_iteration)?;
    ebe_iteration(&world, &comm, &ctx, ebe, iterations)
}

/// Milliseconds a call of the closure takes, over the given repetitions, all ranks together.
type Timer<'a> = &'a dyn Fn(&dyn Fn() -> Result<()>, usize) -> Result<f64>;

/// The split lattice's step against the one-process step, MLUPS over the
/// whole lattice.
fn lattice_step(
    world: &mpi::topology::SimpleCommunicator,
    comm: &Arc<Comm>,
    ctx: &Arc<Context>,
    n: usize,
    steps: usize,
    per_step: Timer,
) -> Result<()> {
    let (rank, size) = (comm.rank, comm.size);
    let (z_first, z_end) = (n * rank / size, n * (rank + 1) / size);
    let dims = [n as i64; 3];
    let split =
        DistLattice::new(comm.clone(), ctx.clone(), dims, ((z_first) as i64, (z_end - z_first) as i64), Precision::F32, 0.6, 7)?;
    let mlups = |ms: f64| (n * n * n) as f64 / (ms * 1e3);
    let sync = || ctx.gpu().map_or(Ok(()), |g| g.synchronize("bench dist"));
    let step = per_step(&|| split.step(1).and_then(|()| sync()), steps)?;
    let swap = per_step(&|| split.exchange(), steps)?;
    if rank == 0 {
        println!("{}", split.describe());
        println!(
            "split lattice, {size} ranks: {step:.3} ms/step ({:.0} MLUPS over the {n}^3 lattice), of which the ghost-plane swap {swap:.3} ms",
            mlups(step)
        );
        let one = Lattice::new(ctx.clone(), dims, Precision::F32, 0.6, 7)?;
        for scheme in [Scheme::InPlace, Scheme::Pull] {
            one.set_scheme(scheme)?;
            one.step(2)?;
            sync()?;
            let t = Instant::now();
            one.step(steps as u64)?;
            sync()?;
            let ms = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
            println!("one process, {scheme:?}: {ms:.3} ms/step ({:.0} MLUPS); split / one process = {:.2}", mlups(ms), step / ms);
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
