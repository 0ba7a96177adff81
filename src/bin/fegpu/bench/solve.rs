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
    let t = mm::read_matrix(&o.matrix)?;
    let (rp, ci, v) = t.to_csr()?;
    let pattern = sparse::build_pattern(t.nrows, t.ncols, &rp, &ci, 0)?;
    let n = pattern.nrows;
    println!("{}: {} x {}, {} stored entries", o.matrix.display(), n, pattern.ncols, pattern.nnz());
    // the values in stored order (sorted, duplicates summed), the pattern taking them so
    let (v, pattern) = (sparse::stored_values(&pattern, 1, &v)?, pattern.in_stored_order());
    let ones = vec![1.0; n];
    let mut a_times_ones = vec![0.0; n];
    sparse::cpu::spmv(&pattern, &v, 1.0, &ones, 0.0, &mut a_times_ones);
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
    let b_host = match &o.rhs {
        Some(p) => {
            let b = mm::read_vector(p)?;
            if b.len() != n {
                return Err(Error::size(format!("{}: {} values for {n} rows", p.display(), b.len())));
            }
            b
        }
        // b = A*1: the exact solution is all ones
        None => a_times_ones,
    };
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
    let status = match outcome_status(&outcome) {
        Ok(()) => "converged".to_string(),
        Err(e) => format!("{} ({})", fegpu::ffi::status::status_name(e.kind.into()), e.message),
    };
    println!("method {:?}, preconditioner {:?}, tol {:e}, maxit {}", o.method, o.precond, o.tol, o.maxit);
    println!("status: {status}");
    println!("iterations: {}", outcome.iterations);
    println!("relative residual (iteration): {:e}", outcome.relative_residual);
    println!("true relative residual ||b - Ax||/||b||: {true_rel:e}");
    if o.rhs.is_none() {
        let err = xh.iter().map(|x: &f64| (x - 1.0).powi(2)).sum::<f64>().sqrt() / (n as f64).sqrt();
        println!("error ||x - 1||/||1||: {err:e}");
    }
    println!("times: upload {:.3} ms, setup {:.3} ms, solve {:.3} ms", upload_s * 1e3, setup_s * 1e3, solve_s * 1e3);
    if let Some(p) = &o.output {
        mm::write_vector(p, &xh)?;
        println!("solution written to {}", p.display());
    }
    Ok(true_rel <= o.tol)
}
