//! `fegpu bench amg`: smoothed-aggregation AMG against Jacobi-CG and
//! ILU(0)-BiCGSTAB on the systems the legacy codes solve (Poisson, porous
//! flow with high-contrast permeability, hex8 elasticity with and without
//! rigid-body modes, convection-diffusion): iterations, setup, values-only
//! re-setup, solve and time to solution, all to ||r||/||b|| <= 1e-8; the
//! V-cycle's cost in SpMVs of the finest matrix.

use super::{describe, open_context, time};
use fegpu::amg::{rigid_body_modes, Aggregation, Cycle, Options, Smoother};
use fegpu::array::Array;
use fegpu::context::Context;
use fegpu::error::Result;
use fegpu::sparse::solver::{Method, Precond, Settings, Solver};
use fegpu::sparse::{self, gallery, Csr};
use std::sync::Arc;
use std::time::Instant;

const TOL: f64 = 1e-8;
/// The elements a side of `fegpu bench fem`'s elasticity block (985,527 dofs),
/// the system issue 19 times reuse on.
const FEM_BENCH_BLOCK: usize = 68;

/// A system: its matrix, right-hand side, whether it is SPD, and the AMG options it wants.
struct System {
    name: String,
    a: Arc<Csr>,
    b: Vec<f64>,
    spd: bool,
    amg: Options,
    /// Also time ILU(0)-BiCGSTAB and the Gauss-Seidel smoother (off for the
    /// largest system, where they only repeat the smaller one's story slowly).
    every_solver: bool,
}

fn csr(ctx: &Arc<Context>, n: usize, (rp, ci, v): gallery::CsrArrays) -> Result<Arc<Csr>> {
    Ok(Arc::new(Csr::new(ctx.clone(), sparse::build_pattern(n, n, &rp, &ci, 0)?, &v)?))
}

/// b = A * (a smooth field + noise): every mode present, no exact solution to luck into.
fn rhs(a: &Csr) -> Result<Vec<f64>> {
    let n = a.pattern.nrows;
    let x: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 7919) % 1000) as f64 / 1000.0).collect();
    let mut b = vec![0.0; n];
    sparse::cpu::spmv(&a.pattern, &a.download_values()?, 1.0, &x, 0.0, &mut b);
    Ok(b)
}

fn scalar(ctx: &Arc<Context>, name: String, n: usize, arrays: gallery::CsrArrays, spd: bool) -> Result<System> {
    let a = csr(ctx, n, arrays)?;
    let b = rhs(&a)?;
    Ok(System { name, a, b, spd, amg: Options::default(), every_solver: true })
}

/// Hex8 elasticity on an m^3 block clamped at x = 0 (`fem::gallery`);
/// `stiff`: the upper half 1000 times stiffer; `modes`: rigid-body modes given.
fn elasticity(ctx: &Arc<Context>, m: usize, stiff: bool, modes: bool) -> Result<System> {
    let (a, bh, coords) = fegpu::fem::gallery::clamped_block(ctx, m, stiff)?;
    let amg = Options {
        block_size: 3,
        near_null_space: if modes { Some(rigid_body_modes(3, &coords)?) } else { None },
        ..Options::default()
    };
    let name = format!(
        "hex8 elasticity {m}^3{}{}{}",
        if stiff { ", E ratio 1000" } else { "" },
        if modes { ", rigid-body modes" } else { ", no modes" },
        if m == FEM_BENCH_BLOCK { " (fegpu bench fem's system)" } else { "" }
    );
    Ok(System { name, a, b: bh, spd: true, amg, every_solver: m != FEM_BENCH_BLOCK })
}

/// The system as raw little-endian arrays for the pyamg peer
/// (peers/amg_pyamg.py): k.meta (name, rows, SPD, block size, vectors),
/// k.rp (i32), k.ci (i32), k.v, k.b and k.nns (f64).
fn write_system(dir: &std::path::Path, k: usize, sys: &System) -> Result<()> {
    let io = |e: std::io::Error| fegpu::Error::invalid(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(io)?;
    let put = |ext: &str, bytes: Vec<u8>| std::fs::write(dir.join(format!("{k}.{ext}")), bytes).map_err(io);
    let p = &sys.a.pattern;
    let nns = sys.amg.near_null_space.as_ref();
    let meta = format!("{}\n{}\n{}\n{}\n{}\n", sys.name, p.nrows, sys.spd as i32, sys.amg.block_size, nns.map_or(0, |b| b.count));
    put("meta", meta.into_bytes())?;
    put("rp", p.row_ptr.iter().flat_map(|x| x.to_le_bytes()).collect())?;
    put("ci", p.col.iter().flat_map(|x| x.to_le_bytes()).collect())?;
    put("v", sys.a.download_values()?.iter().flat_map(|x| x.to_le_bytes()).collect())?;
    put("b", sys.b.iter().flat_map(|x| x.to_le_bytes()).collect())?;
    put("nns", nns.map_or(Vec::new(), |b| b.vectors.iter().flat_map(|x| x.to_le_bytes()).collect()))
}

/// One solve's figures.
struct Run {
    iterations: i64,
    setup_s: f64,
    solve_s: f64,
    converged: bool,
}

/// Creates the solver (its setup timed), solves once to warm up (kernels
/// compiled, the iteration captured), then solves again from x = 0, timed.
fn run(ctx: &Arc<Context>, sys: &System, method: Method, precond: Precond) -> Result<(Run, Solver)> {
    let n = sys.b.len();
    let b = Array::new(ctx.clone(), n, 1, Some(&sys.b))?;
    let x = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    let settings = Settings { amg: sys.amg.clone(), ..Settings::from_env() };
    let clock = Instant::now();
    let s = Solver::with_settings(sys.a.clone(), method, precond, settings)?;
    if let Some(g) = ctx.gpu() {
        g.synchronize("setup")?;
    }
    let setup_s = clock.elapsed().as_secs_f64();
    s.solve(&b, &x, TOL, 20_000)?;
    x.upload(0, &vec![0.0; n], "x")?;
    let clock = Instant::now();
    let (out, true_rel, _) = s.solve(&b, &x, TOL, 20_000)?;
    let solve_s = clock.elapsed().as_secs_f64();
    Ok((Run { iterations: out.iterations, setup_s, solve_s, converged: out.converged && true_rel <= 10.0 * TOL }, s))
}

/// The values-only re-setup after new values (the same values written
/// again: a Newton or time step's refresh), then the solve; (re-setup, solve).
fn resolve(ctx: &Arc<Context>, sys: &System, s: &Solver) -> Result<(f64, f64)> {
    let n = sys.b.len();
    let values = sys.a.download_values()?;
    sys.a.update_values(&values)?;
    let b = Array::new(ctx.clone(), n, 1, Some(&sys.b))?;
    let x = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    let clock = Instant::now();
    let (_, _, resetup_s) = s.solve(&b, &x, TOL, 20_000)?;
    Ok((resetup_s, clock.elapsed().as_secs_f64() - resetup_s))
}

fn print_run(what: &str, r: &Run) {
    println!(
        "    {what:<24} {:>6} {:>10.1} {:>10.1} {:>12.1}{}",
        r.iterations,
        r.setup_s * 1e3,
        r.solve_s * 1e3,
        (r.setup_s + r.solve_s) * 1e3,
        if r.converged { "" } else { "  (not converged)" }
    );
}

/// What every AMG variant of a system is timed against.
struct Timing<'a> {
    krylov: Method,
    jacobi: &'a Run,
    /// A right-hand side and an output for timing one V-cycle alone.
    r: &'a Array,
    z: &'a Array,
    /// One SpMV of the finest matrix.
    spmv_s: f64,
    /// The same, replayed as a CUDA graph (on a GPU).
    spmv_graph_s: Option<f64>,
}

/// Seconds of `record`'s work captured once as a CUDA graph and replayed
/// (as a solve replays its iteration: no launch gaps), None without a GPU.
fn graph_time(ctx: &Context, what: &str, record: impl FnOnce() -> Result<()>) -> Result<Option<f64>> {
    let Some(g) = ctx.gpu() else { return Ok(None) };
    let graph = g.capture(what, record)?;
    Ok(Some(time(ctx, 10, || g.replay(what, &graph))?))
}

/// AMG with `amg` on the system: setup and solve, the hierarchy reused
/// (re-setup and solve), the ratios to Jacobi, one V-cycle's cost in
/// SpMVs and the hierarchy's summary; `label` names the variant.
fn amg_rows(ctx: &Arc<Context>, sys: &System, t: &Timing, label: &str, amg: Options) -> Result<()> {
    let cycle = amg.cycle.name();
    let variant = System { name: sys.name.clone(), a: sys.a.clone(), b: sys.b.clone(), amg, ..*sys };
    let (amg, solver) = run(ctx, &variant, t.krylov, Precond::Amg)?;
    print_run(&format!("AMG-{}{label}", t.krylov.name()), &amg);
    // the first setup's phases (the summary below shows the re-setup's)
    if let Some(line) = solver.amg_summary().and_then(|s| s.lines().find(|l| l.contains("setup:")).map(str::to_owned)) {
        println!("    first setup:{}", line.split_once(':').map_or("", |p| p.1));
    }
    let (resetup_s, resolve_s) = resolve(ctx, &variant, &solver)?;
    println!(
        "    {:<24} {:>6} {:>10.1} {:>10.1} {:>12.1}   (re-setup / setup {:.2})",
        "AMG, hierarchy reused",
        "",
        resetup_s * 1e3,
        resolve_s * 1e3,
        (resetup_s + resolve_s) * 1e3,
        resetup_s / amg.setup_s
    );
    let best_one = t.jacobi.setup_s + t.jacobi.solve_s;
    println!(
        "    vs Jacobi: solve {:.1}x, from scratch {:.1}x, reused {:.1}x",
        t.jacobi.solve_s / amg.solve_s,
        best_one / (amg.setup_s + amg.solve_s),
        best_one / (resetup_s + resolve_s)
    );
    let cycle_s = time(ctx, 10, || solver.precondition(t.r, t.z).map(|_| ()))?;
    println!(
        "    {cycle}-cycle {:.3} ms = {:.1} SpMVs of the finest matrix ({:.3} ms); per AMG iteration {:.3} ms",
        cycle_s * 1e3,
        cycle_s / t.spmv_s,
        t.spmv_s * 1e3,
        amg.solve_s / amg.iterations.max(1) as f64 * 1e3
    );
    // as a solve's captured iteration runs it: a small system's launches no longer count
    if let (Some(graph_s), Some(spmv_graph_s)) =
        (graph_time(ctx, "a cycle", || solver.queue_precondition(t.r, t.z))?, t.spmv_graph_s)
    {
        println!(
            "    {cycle}-cycle replayed as a CUDA graph {:.3} ms = {:.1} SpMVs replayed so ({:.3} ms)",
            graph_s * 1e3,
            graph_s / spmv_graph_s,
            spmv_graph_s * 1e3
        );
    }
    if let Some(summary) = solver.amg_summary() {
        summary.lines().for_each(|l| println!("    {l}"));
    }
    Ok(())
}

pub fn run_all() -> Result<()> {
    let ctx = open_context()?;
    println!("fegpu bench amg on {}", describe(&ctx));
    let full = ctx.gpu().is_some();
    let (poisson, porous, elastic, convection): (usize, usize, usize, usize) =
        if full { (128, 96, 48, 64) } else { (24, 20, 10, 16) };
    println!("tolerance {TOL:e}; times in ms; setup includes the upload of the hierarchy; a warm-up solve first");
    let mut systems = Vec::new();
    // FEGPU_BENCH_AMG_LAPLACIAN=256: Laplacians of those sizes too (at 256^3 a level's aggregates pass the
    // device's product bitmap, so the setup's finest products fall back to the host)
    let larger = std::env::var("FEGPU_BENCH_AMG_LAPLACIAN").unwrap_or_default();
    for n in [poisson / 4, poisson / 2, poisson].into_iter().chain(larger.split(',').filter_map(|s| s.trim().parse().ok())) {
        let sys = scalar(&ctx, format!("laplacian7 {n}^3"), n * n * n, gallery::laplacian7(n), true)?;
        systems.push(System { every_solver: n <= poisson, ..sys });
    }
    let k = gallery::lognormal_permeability(porous, 1e6, 7);
    systems.push(scalar(
        &ctx,
        format!("porous flow {porous}^3 log-normal 1e6"),
        porous.pow(3),
        gallery::porous_flow(porous, &k),
        true,
    )?);
    let k = gallery::layered_permeability(porous, 1e6, 11);
    systems.push(scalar(
        &ctx,
        format!("porous flow {porous}^3 layered 1e6"),
        porous.pow(3),
        gallery::porous_flow(porous, &k),
        true,
    )?);
    // the nearest found to the layered row: 8-cell layers varied inside, only z = 0 fixed
    let k = gallery::layered_varied_permeability(porous, 1e6, 8, 1.25, 7);
    let mut z0 = [false; 6];
    z0[4] = true;
    systems.push(scalar(
        &ctx,
        format!("porous flow {porous}^3 varied layers 1e6, z = 0 fixed"),
        porous.pow(3),
        gallery::porous_flow_fixed(porous, &k, &z0),
        true,
    )?);
    systems.push(elasticity(&ctx, elastic, false, true)?);
    systems.push(elasticity(&ctx, elastic, false, false)?);
    systems.push(elasticity(&ctx, elastic, true, true)?);
    if full {
        systems.push(elasticity(&ctx, FEM_BENCH_BLOCK, false, true)?);
    }
    systems.push(scalar(
        &ctx,
        format!("convection-diffusion {convection}^3, cell Peclet 100"),
        convection.pow(3),
        gallery::convection_diffusion(convection, 100.0),
        false,
    )?);
    // FEGPU_BENCH_AMG=word,word: only the systems whose names hold one of them
    if let Ok(only) = std::env::var("FEGPU_BENCH_AMG") {
        systems.retain(|s| only.split(',').any(|w| s.name.contains(w.trim())));
    }
    let dump = std::env::var_os("FEGPU_AMG_DUMP").map(std::path::PathBuf::from);
    let mut dumped = 0;
    for sys in &systems {
        // the peer takes the table's systems (not the largest: pyamg would take minutes on it)
        if let (Some(dir), true) = (&dump, sys.every_solver) {
            write_system(dir, dumped, sys)?;
            dumped += 1;
        }
        let n = sys.b.len();
        println!("\n  {}: {n} rows, {} nonzeros", sys.name, sys.a.pattern.nnz());
        println!("    {:<24} {:>6} {:>10} {:>10} {:>12}", "solver", "its", "setup", "solve", "to solution");
        let krylov = if sys.spd { Method::Cg } else { Method::Bicgstab };
        let (jacobi, _) = run(&ctx, sys, krylov, Precond::Jacobi)?;
        print_run(&format!("Jacobi-{}", krylov.name()), &jacobi);
        if sys.every_solver {
            let (ilu, _) = run(&ctx, sys, Method::Bicgstab, Precond::Ilu0)?;
            print_run("ILU(0)-BiCGSTAB", &ilu);
        }
        // one V-cycle against one SpMV of the finest matrix, on their own
        let r = Array::new(ctx.clone(), n, 1, Some(&sys.b))?;
        let z = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
        let spmv_s = time(&ctx, 10, || sparse::spmv(&sys.a, 1.0, &r, 0.0, &z))?;
        let spmv_graph_s = graph_time(&ctx, "an SpMV", || sparse::spmv(&sys.a, 1.0, &r, 0.0, &z))?;
        let timing = Timing { krylov, jacobi: &jacobi, r: &r, z: &z, spmv_s, spmv_graph_s };
        amg_rows(&ctx, sys, &timing, "", sys.amg.clone())?;
        // the same hierarchy, the cycle over f32 copies of its matrices
        let single = Options { f32_cycle: true, ..sys.amg.clone() };
        amg_rows(&ctx, sys, &timing, ", f32 cycle", single)?;
        if sys.spd {
            // the W-cycle: fewer iterations where the coarse levels are weak, each
            // dearer; the hybrid cycle: its second visits on the cheap levels alone
            for (label, cycle, f32_cycle) in
                [(", W-cycle", Cycle::W, false), (", W-cycle, f32", Cycle::W, true), (", hybrid cycle, f32", Cycle::Hybrid, true)]
            {
                amg_rows(&ctx, sys, &timing, label, Options { cycle, f32_cycle, ..sys.amg.clone() })?;
            }
        }
        if sys.spd && sys.amg.block_size == 1 {
            // the parallel aggregation: a scalar system's whole structure built on the device
            for (label, cycle) in [(", parallel aggregation, f32", Cycle::V), (", parallel, hybrid cycle, f32", Cycle::Hybrid)] {
                let parallel = Options { cycle, f32_cycle: true, aggregation: Aggregation::Parallel, ..sys.amg.clone() };
                amg_rows(&ctx, sys, &timing, label, parallel)?;
            }
        }
        if !sys.every_solver {
            continue;
        }
        // the same hierarchy smoothed by symmetric Gauss-Seidel, pyamg's smoother
        let amg = Options { smoother: Some(Smoother::GaussSeidel { sweeps: 1 }), ..sys.amg.clone() };
        let gs_sys = System { name: sys.name.clone(), a: sys.a.clone(), b: sys.b.clone(), amg, ..*sys };
        let (gs, gs_solver) = run(&ctx, &gs_sys, krylov, Precond::Amg)?;
        print_run(&format!("AMG-{}, Gauss-Seidel", krylov.name()), &gs);
        let gs_cycle_s = time(&ctx, 10, || gs_solver.precondition(&r, &z).map(|_| ()))?;
        println!(
            "    Gauss-Seidel V-cycle {:.3} ms = {:.1} SpMVs; vs Jacobi: solve {:.1}x, from scratch {:.1}x",
            gs_cycle_s * 1e3,
            gs_cycle_s / spmv_s,
            jacobi.solve_s / gs.solve_s,
            (jacobi.setup_s + jacobi.solve_s) / (gs.setup_s + gs.solve_s)
        );
    }
    Ok(())
}
