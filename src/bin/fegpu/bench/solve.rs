//! `fegpu solve A.mtx [b.mtx] ...`: a Matrix Market system through the solvers.

use fegpu::array::Array;
use fegpu::error::{Error, Result};
use fegpu::sparse::solver::{outcome_status, Method, Precond, Settings, Solver};
use fegpu::sparse::{self, mm, Csr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

pub struct Options {
    pub matrix: PathBuf,
    pub rhs: Option<PathBuf>,
    pub method: Method,
    pub precond: Precond,
    pub tol: f64,
    pub maxit: i64,
    pub output: Option<PathBuf>,
    /// What --precond amg is built with.
    pub amg: fegpu::amg::Options,
    /// Unknowns per node (--block-size): the matrix is read as block CSR of
    /// these blocks, or, for AMG, aggregated node by node.
    pub block: usize,
}

/// Runs the solve and prints what happened. Ok(true) when the true residual meets tol.
pub fn run(o: &Options) -> Result<bool> {
    let ctx = super::open_context()?;
    println!("fegpu solve on {}", super::describe(&ctx));
    let (pattern, v, b_host) = read_system(o)?;
    let n = pattern.nrows;
    println!("{}: {} x {}, {} stored entries", o.matrix.display(), n, pattern.ncols, pattern.nnz());
    let mut amg = o.amg.clone();
    let (pattern, v, block) = match (o.block, o.precond) {
        (1, _) => (pattern, v, 1),
        (k, Precond::Amg) => {
            amg.block_size = k;
            (pattern, v, 1)
        }
        (k, _) => {
            let (bp, bv) = sparse::block::from_point(&pattern, &v, k)?;
            println!("as {k} x {k} blocks: {} block rows, {} stored blocks", bp.nrows, bp.nnz());
            (bp, bv, k)
        }
    };
    let clock = Instant::now();
    let a = Arc::new(Csr::with_blocks(ctx.clone(), pattern, block, &v)?);
    let b = Array::new(ctx.clone(), n, 1, Some(&b_host))?;
    let x = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    if let Some(g) = ctx.gpu() {
        g.synchronize("upload")?;
    }
    let upload_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let s = Solver::with_settings(a.clone(), o.method, o.precond, Settings { amg, ..Settings::from_env() })?;
    let setup_s = clock.elapsed().as_secs_f64();
    if let Some(summary) = s.amg_summary() {
        print!("{summary}");
    }
    let clock = Instant::now();
    let (outcome, true_rel, _) = s.solve(&b, &x, o.tol, o.maxit)?;
    let solve_s = clock.elapsed().as_secs_f64();
    let mut xh = vec![0.0; n];
    x.download(0, &mut xh, "x")?;
    println!("method {}, preconditioner {}, tol {:e}, maxit {}", o.method, o.precond, o.tol, o.maxit);
    if let Some(line) = s.ilu_summary() {
        print!("{line}");
    }
    report(o, &outcome, true_rel, &xh, [upload_s, setup_s, solve_s]);
    if let Some(p) = &o.output {
        mm::write_vector(p, &xh)?;
        println!("solution written to {}", p.display());
    }
    Ok(true_rel <= o.tol)
}

/// The outcome as `fegpu solve` prints it: status, iterations, residuals,
/// the error against x = 1 when b was A*1, and the times (s).
fn report(o: &Options, outcome: &fegpu::sparse::solver::Outcome, true_rel: f64, x: &[f64], [upload, setup, solve]: [f64; 3]) {
    let status = match outcome_status(outcome) {
        Ok(()) => "converged".to_string(),
        Err(e) => format!("{} ({})", fegpu::ffi::status::status_name(e.kind.into()), e.message),
    };
    println!("status: {status}");
    println!("iterations: {}", outcome.iterations);
    println!("relative residual (iteration): {:e}", outcome.relative_residual);
    println!("true relative residual ||b - Ax||/||b||: {true_rel:e}");
    if o.rhs.is_none() {
        let err = x.iter().map(|x: &f64| (x - 1.0).powi(2)).sum::<f64>().sqrt() / (x.len() as f64).sqrt();
        println!("error ||x - 1||/||1||: {err:e}");
    }
    println!("times: upload {:.3} ms, setup {:.3} ms, solve {:.3} ms", upload * 1e3, setup * 1e3, solve * 1e3);
}

/// Whether this process was started by an MPI launcher (mpiexec, srun):
/// then `fegpu solve` in an MPI build solves over the job's ranks.
pub fn under_mpi_launcher() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"].iter().any(|v| std::env::var_os(v).is_some())
}

/// `mpiexec -n N fegpu solve ...`: rank 0 reads the system and sends each
/// rank its contiguous block of rows; the ranks solve with the distributed
/// solver and rank 0 prints what the one-process solve prints, with the
/// ranks and the exchange path. Every rank returns the same verdict.
#[cfg(feature = "mpi")]
pub fn run_distributed(o: &Options) -> Result<bool> {
    use fegpu::dist::{matrix::Rows, Comm, DistCsr, DistSolver};
    use mpi::traits::*;
    let universe = mpi::initialize().ok_or_else(|| Error::invalid("MPI was initialised already"))?;
    let world = universe.world();
    let comm = Arc::new(Comm::world(&world));
    let (rank, size) = (comm.rank, comm.size);
    let root = world.process_at_rank(0);
    if o.block != 1 {
        return Err(Error::unsupported("--block-size is not offered over the ranks yet: run fegpu solve in one process"));
    }
    // rank 0 reads; a failure there is every rank's (agree), and the sizes travel by broadcast
    let read = comm.agree(if rank == 0 { read_square_system(o).map(Some) } else { Ok(None) })?;
    let mut n = read.as_ref().map_or(0, |(rp, _, _, _)| rp.len() as i64 - 1);
    root.broadcast_into(&mut n);
    let n = n as usize;
    let (first, end) = (n * rank / size, n * (rank + 1) / size);
    let (mut rp, mut ci, mut v, mut b) = (vec![0i64; end - first + 1], Vec::new(), Vec::new(), vec![0.0; end - first]);
    if let Some((all_rp, all_ci, all_v, all_b)) = &read {
        for r in (0..size).rev() {
            let (f, e) = (n * r / size, n * (r + 1) / size);
            let (s, t) = (all_rp[f] as usize, all_rp[e] as usize);
            let my_rp: Vec<i64> = all_rp[f..=e].iter().map(|&p| p - all_rp[f]).collect();
            if r == 0 {
                (rp, ci, v, b) = (my_rp, all_ci[s..t].to_vec(), all_v[s..t].to_vec(), all_b[f..e].to_vec());
            } else {
                let p = world.process_at_rank(r as i32);
                p.send(&my_rp[..]);
                p.send(&all_ci[s..t]);
                p.send(&all_v[s..t]);
                p.send(&all_b[f..e]);
            }
        }
    } else {
        world.process_at_rank(0).receive_into(&mut rp[..]);
        let nnz = rp[end - first] as usize;
        (ci, v) = (vec![0i64; nnz], vec![0.0; nnz]);
        root.receive_into(&mut ci[..]);
        root.receive_into(&mut v[..]);
        root.receive_into(&mut b[..]);
    }
    let device = fegpu::dist::device_for(&comm, -1);
    let ctx = comm.agree(fegpu::context::Context::new(fegpu::context::Request::Auto, device).map(Arc::new))?;
    if rank == 0 {
        println!("fegpu solve over {size} ranks; rank 0 on {}", super::describe(&ctx));
        println!("{}: {n} x {n}, read on rank 0 and split into {size} blocks of rows", o.matrix.display());
    }
    let clock = Instant::now();
    let rows = Rows { n_global: n as i64, first_row: first as i64, row_ptr: &rp, col: &ci, values: &v, base: 0 };
    let a = Arc::new(DistCsr::new(comm.clone(), ctx.clone(), &rows)?);
    let arrays = comm.agree((|| {
        if end == first {
            return Ok(None); // a rank owning no rows passes no vectors
        }
        Ok(Some((
            Array::new(ctx.clone(), end - first, 1, Some(&b))?,
            Array::new(ctx.clone(), end - first, 1, Some(&vec![0.0; end - first]))?,
        )))
    })())?;
    let upload_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let s = DistSolver::new(a.clone(), o.method, o.precond, Settings { amg: o.amg.clone(), ..Settings::from_env() })?;
    let setup_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let (bx, xx) = (arrays.as_ref().map(|(b, _)| b), arrays.as_ref().map(|(_, x)| x));
    let (outcome, true_rel, _) = s.solve(bx, xx, o.tol, o.maxit)?;
    let solve_s = clock.elapsed().as_secs_f64();
    let mut x = vec![0.0; end - first];
    if let Some(xa) = xx {
        comm.agree(xa.download(0, &mut x, "x"))?;
    } else {
        comm.agree(Ok(()))?;
    }
    // every rank's x on rank 0, for the error and the output file
    let x_all = comm.gather_all_varcount(&x);
    if rank == 0 {
        println!("{}", a.describe());
        println!("method {}, preconditioner {} (over the ranks), tol {:e}, maxit {}", o.method, o.precond, o.tol, o.maxit);
        report(o, &outcome, true_rel, &x_all, [upload_s, setup_s, solve_s]);
    }
    let written = match (&o.output, rank) {
        (Some(p), 0) => mm::write_vector(p, &x_all).map(|()| println!("solution written to {}", p.display())),
        _ => Ok(()),
    };
    comm.agree(written)?;
    Ok(true_rel <= o.tol)
}

/// The system as `fegpu solve` reads it: the matrix's pattern and values
/// in stored order (rows sorted, duplicates summed), and b (A*1 when no
/// b.mtx is given: the exact solution is then all ones).
fn read_system(o: &Options) -> Result<(sparse::Pattern, Vec<f64>, Vec<f64>)> {
    let t = mm::read_matrix(&o.matrix)?;
    // before anything of the declared size is allocated (a 70-byte file may declare 10^8 rows)
    if t.rows.len() < t.nrows {
        return Err(Error::invalid(format!(
            "{}: {} entries for {} rows: some rows are empty, so A is singular",
            o.matrix.display(),
            t.rows.len(),
            t.nrows
        )));
    }
    // (A * 1 below would read past a wide matrix's columns)
    if t.nrows != t.ncols {
        return Err(Error::size(format!("{}: {} x {}: the solvers need a square matrix", o.matrix.display(), t.nrows, t.ncols)));
    }
    let (rp, ci, v) = t.to_csr()?;
    let pattern = sparse::build_pattern(t.nrows, t.ncols, &rp, &ci, 0)?;
    let (v, pattern) = (sparse::stored_values(&pattern, 1, &v)?, pattern.in_stored_order());
    let n = pattern.nrows;
    let b = match &o.rhs {
        Some(p) => {
            let b = mm::read_vector(p)?;
            if b.len() != n {
                return Err(Error::size(format!("{}: {} values for {n} rows", p.display(), b.len())));
            }
            b
        }
        None => {
            let mut a_times_ones = vec![0.0; n];
            sparse::cpu::spmv(&pattern, &v, 1.0, &vec![1.0; n], 0.0, &mut a_times_ones);
            a_times_ones
        }
    };
    Ok((pattern, v, b))
}

/// Row pointers, columns and values (0-based CSR), and b, as rank 0 sends them.
#[cfg(feature = "mpi")]
type System = (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>);

/// The square system `read_system` gives, as int64 CSR arrays.
#[cfg(feature = "mpi")]
fn read_square_system(o: &Options) -> Result<System> {
    let (pattern, v, b) = read_system(o)?;
    let rp: Vec<i64> = pattern.row_ptr.iter().map(|&p| p as i64).collect();
    let ci: Vec<i64> = pattern.col.iter().map(|&c| c as i64).collect();
    Ok((rp, ci, v, b))
}
