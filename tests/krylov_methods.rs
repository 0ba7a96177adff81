//! GMRES(m), BiCG and CGS through the C ABI against serial references
//! written here from the textbooks (Saad's GMRES with modified Gram-Schmidt
//! run twice and Givens rotations; the Templates book's BiCG and CGS; an IKJ ILU(0)
//! whose transposed solves run column by column), on real nonsymmetric
//! matrices and a generated convection-diffusion operator: the reference
//! backend's iteration counts and solutions equal the serial ones, the
//! backend under test (CUDA on the GPU machine) follows the reference.

mod common;
use common::*;
use fegpu::ffi::array::*;
use fegpu::ffi::context::*;
use fegpu::ffi::fegpu_context_t;
use fegpu::ffi::sparse::*;
use fegpu::*;
use std::ffi::CString;
use std::path::PathBuf;

/// A CSR matrix on the host, 0-based, columns sorted within rows.
struct Host {
    n: usize,
    rp: Vec<usize>,
    ci: Vec<usize>,
    v: Vec<f64>,
}

impl Host {
    fn download(a: u64) -> Host {
        let (mut n, mut m, mut nnz) = (0, 0, 0);
        ok(unsafe { fegpu_csr_info(a, &mut n, &mut m, &mut nnz) });
        let (mut rp, mut ci, mut v) = (vec![0i64; n as usize + 1], vec![0i64; nnz as usize], vec![0.0; nnz as usize]);
        ok(unsafe { fegpu_csr_download(a, rp.as_mut_ptr(), ci.as_mut_ptr(), v.as_mut_ptr(), 0) });
        let us = |x: Vec<i64>| x.into_iter().map(|k| k as usize).collect();
        Host { n: n as usize, rp: us(rp), ci: us(ci), v }
    }
    fn mv(&self, x: &[f64]) -> Vec<f64> {
        (0..self.n).map(|i| (self.rp[i]..self.rp[i + 1]).map(|k| self.v[k] * x[self.ci[k]]).sum()).collect()
    }
    fn mtv(&self, x: &[f64]) -> Vec<f64> {
        let mut y = vec![0.0; self.n];
        for (i, xi) in x.iter().enumerate() {
            for k in self.rp[i]..self.rp[i + 1] {
                y[self.ci[k]] += self.v[k] * xi;
            }
        }
        y
    }
    fn diag(&self, i: usize) -> usize {
        (self.rp[i]..self.rp[i + 1]).find(|&k| self.ci[k] == i).expect("a diagonal entry")
    }
}

enum Pc {
    None,
    Jacobi(Vec<f64>),
    /// ILU(0) factors in A's pattern (unit L below the diagonal, U on and above).
    Ilu(Vec<f64>),
}

impl Pc {
    fn new(a: &Host, kind: i32) -> Pc {
        match kind {
            FEGPU_PRECOND_JACOBI => Pc::Jacobi((0..a.n).map(|i| 1.0 / a.v[a.diag(i)]).collect()),
            FEGPU_PRECOND_ILU0 => {
                let mut lu = a.v.clone();
                for i in 0..a.n {
                    for kk in a.rp[i]..a.diag(i) {
                        let k = a.ci[kk];
                        lu[kk] /= lu[a.diag(k)];
                        for jj in kk + 1..a.rp[i + 1] {
                            if let Some(p) = (a.diag(k) + 1..a.rp[k + 1]).find(|&p| a.ci[p] == a.ci[jj]) {
                                lu[jj] -= lu[kk] * lu[p];
                            }
                        }
                    }
                }
                Pc::Ilu(lu)
            }
            _ => Pc::None,
        }
    }
    /// M^-1 r, or M^-T r when `transposed`.
    fn apply(&self, a: &Host, r: &[f64], transposed: bool) -> Vec<f64> {
        match self {
            Pc::None => r.to_vec(),
            Pc::Jacobi(d) => r.iter().zip(d).map(|(r, d)| r * d).collect(),
            Pc::Ilu(lu) if !transposed => {
                let mut z = r.to_vec();
                for i in 0..a.n {
                    z[i] -= (a.rp[i]..a.diag(i)).map(|k| lu[k] * z[a.ci[k]]).sum::<f64>();
                }
                for i in (0..a.n).rev() {
                    z[i] = (z[i] - (a.diag(i) + 1..a.rp[i + 1]).map(|k| lu[k] * z[a.ci[k]]).sum::<f64>()) / lu[a.diag(i)];
                }
                z
            }
            Pc::Ilu(lu) => {
                // U^T y = r forward, then L^T z = y backward, each row of U (L)
                // scattering its finished unknown into the later (earlier) ones
                let mut z = r.to_vec();
                for i in 0..a.n {
                    z[i] /= lu[a.diag(i)];
                    for k in a.diag(i) + 1..a.rp[i + 1] {
                        z[a.ci[k]] -= lu[k] * z[i];
                    }
                }
                for i in (0..a.n).rev() {
                    for k in a.rp[i]..a.diag(i) {
                        z[a.ci[k]] -= lu[k] * z[i];
                    }
                }
                z
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}
fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
}
fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// Right-preconditioned GMRES(m), Saad's algorithm 9.5 with modified
/// Gram-Schmidt (run twice); x0 = 0. Returns (iterations, x).
fn gmres_ref(a: &Host, pc: &Pc, b: &[f64], m: usize, tol: f64, maxit: usize) -> (usize, Vec<f64>) {
    let bnorm = norm(b);
    let mut x = vec![0.0; a.n];
    let mut r = b.to_vec();
    let mut it = 0;
    loop {
        let beta = norm(&r);
        if beta / bnorm <= tol || it >= maxit {
            return (it, x);
        }
        let mut v = vec![r.iter().map(|r| r / beta).collect::<Vec<_>>()];
        let (mut h, mut cs, mut sn) = (Vec::<Vec<f64>>::new(), Vec::<f64>::new(), Vec::<f64>::new());
        let mut g = vec![0.0; m + 1];
        g[0] = beta;
        let mut converged = false;
        while h.len() < m && it < maxit {
            let j = h.len();
            it += 1;
            let mut w = a.mv(&pc.apply(a, &v[j], false));
            let mut col = vec![0.0; j + 2];
            // modified Gram-Schmidt, twice: once loses orthogonality over
            // orsirr_1's stagnating cycles (3992 iterations against 2999)
            for _ in 0..2 {
                for (i, vi) in v.iter().enumerate() {
                    let c = dot(&w, vi);
                    col[i] += c;
                    axpy(&mut w, -c, vi);
                }
            }
            col[j + 1] = norm(&w);
            for i in 0..j {
                let t = cs[i] * col[i] + sn[i] * col[i + 1];
                col[i + 1] = -sn[i] * col[i] + cs[i] * col[i + 1];
                col[i] = t;
            }
            let d = (col[j] * col[j] + col[j + 1] * col[j + 1]).sqrt();
            let (c, s) = (col[j] / d, col[j + 1] / d);
            col[j] = d;
            g[j + 1] = -s * g[j];
            g[j] *= c;
            cs.push(c);
            sn.push(s);
            let hn = norm(&w);
            v.push(w.iter().map(|w| w / hn).collect());
            h.push(col);
            if g[j + 1].abs() / bnorm <= tol {
                converged = true;
                break;
            }
        }
        let k = h.len();
        let mut y = g[..k].to_vec();
        for i in (0..k).rev() {
            y[i] = (y[i] - (i + 1..k).map(|l| h[l][i] * y[l]).sum::<f64>()) / h[i][i];
        }
        let mut t = vec![0.0; a.n];
        for (i, yi) in y.iter().enumerate() {
            axpy(&mut t, *yi, &v[i]);
        }
        axpy(&mut x, 1.0, &pc.apply(a, &t, false));
        if converged || it >= maxit {
            return (it, x);
        }
        let ax = a.mv(&x);
        r = b.iter().zip(&ax).map(|(b, q)| b - q).collect();
    }
}

/// Preconditioned BiCG (Templates, fig. 2.8), x0 = 0.
fn bicg_ref(a: &Host, pc: &Pc, b: &[f64], tol: f64, maxit: usize) -> (usize, Vec<f64>) {
    let bnorm = norm(b);
    let (mut x, mut r, mut rt) = (vec![0.0; a.n], b.to_vec(), b.to_vec());
    let (mut p, mut pt) = (vec![0.0; a.n], vec![0.0; a.n]);
    let mut rho_prev = 1.0;
    for it in 1..=maxit {
        let (z, zt) = (pc.apply(a, &r, false), pc.apply(a, &rt, true));
        let rho = dot(&z, &rt);
        let beta = if it == 1 { 0.0 } else { rho / rho_prev };
        p = z.iter().zip(&p).map(|(z, p)| z + beta * p).collect();
        pt = zt.iter().zip(&pt).map(|(z, p)| z + beta * p).collect();
        let (q, qt) = (a.mv(&p), a.mtv(&pt));
        let alpha = rho / dot(&pt, &q);
        axpy(&mut x, alpha, &p);
        axpy(&mut r, -alpha, &q);
        axpy(&mut rt, -alpha, &qt);
        if norm(&r) / bnorm <= tol {
            return (it, x);
        }
        rho_prev = rho;
    }
    (maxit, x)
}

/// Preconditioned CGS (Templates, fig. 2.9), x0 = 0.
fn cgs_ref(a: &Host, pc: &Pc, b: &[f64], tol: f64, maxit: usize) -> (usize, Vec<f64>) {
    let bnorm = norm(b);
    let (mut x, mut r, rt) = (vec![0.0; a.n], b.to_vec(), b.to_vec());
    let (mut p, mut q) = (vec![0.0; a.n], vec![0.0; a.n]);
    let mut rho_prev = 1.0;
    for it in 1..=maxit {
        let rho = dot(&rt, &r);
        let u: Vec<f64> = if it == 1 {
            p = r.clone();
            r.clone()
        } else {
            let beta = rho / rho_prev;
            let u: Vec<f64> = r.iter().zip(&q).map(|(r, q)| r + beta * q).collect();
            p = (0..a.n).map(|i| u[i] + beta * (q[i] + beta * p[i])).collect();
            u
        };
        let vhat = a.mv(&pc.apply(a, &p, false));
        let alpha = rho / dot(&rt, &vhat);
        q = u.iter().zip(&vhat).map(|(u, v)| u - alpha * v).collect();
        let uhat = pc.apply(a, &u.iter().zip(&q).map(|(u, q)| u + q).collect::<Vec<_>>(), false);
        axpy(&mut x, alpha, &uhat);
        axpy(&mut r, -alpha, &a.mv(&uhat));
        if norm(&r) / bnorm <= tol {
            return (it, x);
        }
        rho_prev = rho;
    }
    (maxit, x)
}

fn matrices() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/matrices")
}

fn read_mm(ctx: fegpu_context_t, name: &str) -> u64 {
    let path = CString::new(matrices().join(format!("{name}.mtx")).to_str().unwrap()).unwrap();
    let mut a = 0;
    ok(unsafe { fegpu_csr_read_mm(ctx, path.as_ptr(), &mut a) });
    a
}

fn csr(ctx: fegpu_context_t, (rp, ci, v): &(Vec<i64>, Vec<i64>, Vec<f64>)) -> u64 {
    let n = rp.len() as i64 - 1;
    let mut a = 0;
    ok(unsafe { fegpu_csr_create_i64(ctx, n, n, v.len() as i64, rp.as_ptr(), ci.as_ptr(), v.as_ptr(), 0, &mut a) });
    a
}

struct Run {
    status: fegpu_status,
    info: fegpu_solve_info,
    x: Vec<f64>,
}

/// `method` (code, restart): with a restart, GMRES(restart) through fegpu_solver_create_gmres.
fn run(
    ctx: fegpu_context_t,
    a: u64,
    (method, restart): (i32, Option<i32>),
    precond: i32,
    b: &[f64],
    tol: f64,
    maxit: i64,
) -> Run {
    let n = b.len();
    let mut s = 0;
    match restart {
        Some(m) => ok(unsafe { fegpu_solver_create_gmres(a, precond, m, &mut s) }),
        None => ok(unsafe { fegpu_solver_create(a, method, precond, &mut s) }),
    }
    let (db, dx) = (create_f64(ctx, n, 1, b), create_f64(ctx, n, 1, &vec![f64::NAN; n]));
    ok(unsafe { fegpu_array_upload_f64(dx, vec![0.0; n].as_ptr(), n as i64) });
    let mut info = fegpu_solve_info::default();
    let status = unsafe { fegpu_solver_solve(s, db, dx, tol, maxit, &mut info) };
    let mut count = 0;
    ok(unsafe { fegpu_solver_history(s, std::ptr::null_mut(), 0, &mut count) });
    assert_eq!(count, info.iterations + 1, "one history entry per iteration and the initial residual");
    ok(fegpu_solver_destroy(s));
    Run { status, info, x: download_f64(dx, n) }
}

fn reference_context() -> fegpu_context_t {
    fegpu::ffi::registry::insert(std::sync::Arc::new(fegpu::context::Context::cpu_reference()), 0)
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / scale
}

#[test]
fn gmres_bicg_cgs_equal_the_serial_references_and_the_backend_follows() {
    let (ctx, reference) = (context(), reference_context());
    let cd = fegpu::sparse::gallery::convection_diffusion(10, 2.0);
    let tol = 1e-8;
    let pcs = [FEGPU_PRECOND_NONE, FEGPU_PRECOND_JACOBI, FEGPU_PRECOND_ILU0];
    for name in ["sherman5", "orsirr_1", "convection-diffusion 10^3"] {
        let (a, ar) = match name {
            "convection-diffusion 10^3" => (csr(ctx, &cd), csr(reference, &cd)),
            _ => (read_mm(ctx, name), read_mm(reference, name)),
        };
        let host = Host::download(ar);
        let mut rng = Rng::new(seed());
        let b = rng.vec_f64(host.n);
        for precond in pcs {
            let pc = Pc::new(&host, precond);
            // unpreconditioned BiCG and CGS wander on the real matrices (thousands of
            // iterations, rounding-dominated): compared only where they converge briskly
            let lanczos = precond == FEGPU_PRECOND_ILU0 || name.starts_with("convection");
            let mut cases = vec![(FEGPU_METHOD_GMRES, Some(30)), (FEGPU_METHOD_GMRES, Some(5))];
            if lanczos {
                cases.extend([(FEGPU_METHOD_BICG, None), (FEGPU_METHOD_CGS, None)]);
            }
            for (method, restart) in cases {
                let maxit = 4000;
                let (want_it, want_x) = match method {
                    FEGPU_METHOD_GMRES => gmres_ref(&host, &pc, &b, restart.unwrap() as usize, tol, maxit),
                    FEGPU_METHOD_BICG => bicg_ref(&host, &pc, &b, tol, maxit),
                    _ => cgs_ref(&host, &pc, &b, tol, maxit),
                };
                let what = format!("{name}: method {method} restart {restart:?} precond {precond}");
                if want_it == maxit {
                    continue; // unpreconditioned restarted GMRES stalling on a real matrix
                }
                // twice the limit: a run near the reference's end may need a few more
                let mine = run(reference, ar, (method, restart), precond, &b, tol, 2 * maxit as i64);
                assert_eq!(mine.status, FEGPU_OK, "{what}: {}", last_message());
                // the same iterations up to rounding (reduction order, Gram-Schmidt
                // variant: the reference reorthogonalises always, fegpu where the
                // DGKS test asks), which long stagnating restarted runs amplify
                // (unpreconditioned GMRES(30) on orsirr_1: 2,999 to 5,146 iterations
                // for the reference's 3,479): those are held to converging in 2x
                let (got, want) = (mine.info.iterations, want_it as i64);
                let margin = if method == FEGPU_METHOD_CGS {
                    // CGS squares BiCG's residual polynomial: on sherman5 with ILU(0) a
                    // random b now and then gives 34 iterations for the reference's 29
                    2 + want / 5
                } else if want <= 300 {
                    1 + want / 50
                } else if want <= 1000 {
                    want / 5
                } else {
                    want
                };
                assert!((got - want).abs() <= margin, "{what}: {got} iterations, the serial reference {want}");
                assert!(
                    mine.info.true_relative_residual <= 10.0 * tol,
                    "{what}: true residual {:e}",
                    mine.info.true_relative_residual
                );
                let d = max_diff(&mine.x, &want_x);
                assert!(d <= 1e-4, "{what}: x differs from the reference's by {d:e} (relative to max |x|)");
                // the backend under test against the reference backend
                let dev = run(ctx, a, (method, restart), precond, &b, tol, 2 * maxit as i64);
                assert_eq!(dev.status, FEGPU_OK, "{what} (backend): {}", last_message());
                let (got, want) = (dev.info.iterations, mine.info.iterations);
                let margin = if want <= 300 {
                    2 + want / 20
                } else if want <= 1000 {
                    want / 5
                } else {
                    want
                };
                assert!((got - want).abs() <= margin, "{what}: backend {got} iterations, reference {want}");
                assert!(dev.info.true_relative_residual <= 10.0 * tol, "{what} (backend)");
            }
        }
    }
    ok(fegpu_context_destroy(ctx));
    ok(fegpu_context_destroy(reference));
}

#[test]
fn gmres_with_a_full_basis_solves_in_at_most_n_iterations() {
    // in exact arithmetic GMRES(m >= n) ends by iteration n; a random well-conditioned system
    let ctx = context();
    let n = 40;
    let mut rng = Rng::new(seed());
    let mut dense = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            dense[i * n + j] = rng.next_f64() + if i == j { 8.0 } else { 0.0 };
        }
    }
    let rp: Vec<i64> = (0..=n as i64).map(|i| i * n as i64).collect();
    let ci: Vec<i64> = (0..n * n).map(|k| (k % n) as i64).collect();
    let a = csr(ctx, &(rp, ci, dense.clone()));
    let x_true = rng.vec_f64(n);
    let b: Vec<f64> = (0..n).map(|i| (0..n).map(|j| dense[i * n + j] * x_true[j]).sum()).collect();
    let r = run(ctx, a, (FEGPU_METHOD_GMRES, Some(n as i32)), FEGPU_PRECOND_NONE, &b, 1e-12, 1000);
    assert_eq!(r.status, FEGPU_OK, "{}", last_message());
    assert!(r.info.iterations <= n as i64, "{} iterations for n = {n}", r.info.iterations);
    assert!(max_diff(&r.x, &x_true) < 1e-9);
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn breakdowns_and_bad_arguments_are_reported() {
    let ctx = context();
    // the 2 x 2 exchange matrix with b = e1: (r~, A p) = 0 at the first step of
    // BiCG and CGS; GMRES meets no such wall and solves it in two iterations
    let swap = csr(ctx, &(vec![0, 1, 2], vec![1, 0], vec![1.0, 1.0]));
    let b = [1.0, 0.0];
    // (BiCGSTAB's (r0, v) too: on CUDA through the one-block small-system iteration)
    let cases = [
        (FEGPU_METHOD_BICG, ["BiCG", "(p~, A p) = 0"]),
        (FEGPU_METHOD_CGS, ["CGS", "(r~, A p) = 0"]),
        (FEGPU_METHOD_BICGSTAB, ["BiCGSTAB", "(r0, v) = 0"]),
    ];
    for (method, words) in cases {
        let mut s = 0;
        ok(unsafe { fegpu_solver_create(swap, method, FEGPU_PRECOND_NONE, &mut s) });
        let (db, dx) = (create_f64(ctx, 2, 1, &b), create_f64(ctx, 2, 1, &[0.0, 0.0]));
        let mut info = fegpu_solve_info::default();
        expect_err(unsafe { fegpu_solver_solve(s, db, dx, 1e-10, 50, &mut info) }, FEGPU_ERR_BREAKDOWN, &words);
        assert_eq!(download_f64(dx, 2), vec![0.0, 0.0], "a breakdown at the first step leaves x as it was");
    }
    let r = run(ctx, swap, (FEGPU_METHOD_GMRES, Some(10)), FEGPU_PRECOND_NONE, &b, 1e-12, 50);
    assert_eq!(r.status, FEGPU_OK, "{}", last_message());
    assert!(r.info.iterations == 2 && max_diff(&r.x, &[0.0, 1.0]) < 1e-14, "{:?} {:?}", r.info, r.x);
    // A r0 = 0 (a singular A, b in its null space's complement's orthogonal): GMRES's Hessenberg column vanishes
    let singular = csr(ctx, &(vec![0, 1, 2], vec![0, 1], vec![1.0, 0.0]));
    let mut s = 0;
    ok(unsafe { fegpu_solver_create_gmres(singular, FEGPU_PRECOND_NONE, 4, &mut s) });
    let (db, dx) = (create_f64(ctx, 2, 1, &[0.0, 1.0]), create_f64(ctx, 2, 1, &[0.0, 0.0]));
    let mut info = fegpu_solve_info::default();
    expect_err(unsafe { fegpu_solver_solve(s, db, dx, 1e-10, 50, &mut info) }, FEGPU_ERR_BREAKDOWN, &["GMRES", "Hessenberg"]);
    // singular and inconsistent, [[1, 1], [1, 1]] x = (1, 5): the second column
    // vanishes only to rounding, which once reported convergence (true residual 1)
    let ones = csr(ctx, &(vec![0, 2, 4], vec![0, 1, 0, 1], vec![1.0; 4]));
    ok(unsafe { fegpu_solver_create_gmres(ones, FEGPU_PRECOND_NONE, 10, &mut s) });
    let (db, dx) = (create_f64(ctx, 2, 1, &[1.0, 5.0]), create_f64(ctx, 2, 1, &[0.0, 0.0]));
    let status = unsafe { fegpu_solver_solve(s, db, dx, 1e-8, 50, &mut info) };
    assert_ne!(status, FEGPU_OK, "no x solves it: {:?}", info);
    expect_err(status, FEGPU_ERR_BREAKDOWN, &["GMRES", "Hessenberg"]);
    // refused arguments name themselves
    expect_err(
        unsafe { fegpu_solver_create_gmres(swap, FEGPU_PRECOND_NONE, 0, &mut s) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["restart = 0"],
    );
    expect_err(
        unsafe { fegpu_solver_create(swap, 9, FEGPU_PRECOND_NONE, &mut s) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["method = 9", "_CGS"],
    );
    let lap = csr(ctx, &fegpu::sparse::gallery::laplacian7(4));
    expect_err(
        unsafe { fegpu_solver_create(lap, FEGPU_METHOD_BICG, FEGPU_PRECOND_AMG, &mut s) },
        FEGPU_ERR_UNSUPPORTED,
        &["BiCG", "AMG"],
    );
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn bicg_follows_new_values_in_a_newton_loop() {
    // A^T and the transposed ILU(0) factors are rebuilt from each update: x = 1/step exactly
    let ctx = context();
    let n = 8;
    let (rp, ci, v) = fegpu::sparse::gallery::convection_diffusion(n, 3.0);
    let nn = n * n * n;
    let a = csr(ctx, &(rp, ci, v.clone()));
    let ones = Host::download(a).mv(&vec![1.0; nn]);
    for (method, restart) in [(FEGPU_METHOD_BICG, None), (FEGPU_METHOD_GMRES, Some(10)), (FEGPU_METHOD_CGS, None)] {
        let mut s = 0;
        match restart {
            Some(m) => ok(unsafe { fegpu_solver_create_gmres(a, FEGPU_PRECOND_ILU0, m, &mut s) }),
            None => ok(unsafe { fegpu_solver_create(a, method, FEGPU_PRECOND_ILU0, &mut s) }),
        }
        let (db, dx) = (create_f64(ctx, nn, 1, &ones), create_f64(ctx, nn, 1, &vec![0.0; nn]));
        for step in 1..=3 {
            let scaled: Vec<f64> = v.iter().enumerate().map(|(k, x)| x * (step as f64 + 0.01 * (k % 3) as f64)).collect();
            ok(unsafe { fegpu_csr_update_values(a, scaled.as_ptr(), scaled.len() as i64) });
            let host = Host::download(a);
            let want = host.mv(&vec![1.0; nn]);
            ok(unsafe { fegpu_array_upload_f64(db, want.as_ptr(), nn as i64) });
            ok(unsafe { fegpu_array_upload_f64(dx, vec![0.0; nn].as_ptr(), nn as i64) });
            let mut info = fegpu_solve_info::default();
            ok(unsafe { fegpu_solver_solve(s, db, dx, 1e-11, 500, &mut info) });
            let x = download_f64(dx, nn);
            assert!(x.iter().all(|x| (x - 1.0).abs() < 1e-8), "method {method} step {step}");
        }
        ok(fegpu_solver_destroy(s));
    }
    ok(fegpu_context_destroy(ctx));
}

/// Iterations of `method` with `precond` on `arrays` through the Rust API
/// (Ilu0Jacobi's sweep count is not in the C codes), x checked against the
/// known exact solution (all ones).
fn rust_solve(
    ctx: &std::sync::Arc<fegpu::context::Context>,
    arrays: &(Vec<i64>, Vec<i64>, Vec<f64>),
    method: fegpu::sparse::solver::Method,
    precond: fegpu::sparse::solver::Precond,
) -> i64 {
    rust_solve_with(ctx, arrays, method, precond, fegpu::sparse::solver::Settings::default())
}

fn rust_solve_with(
    ctx: &std::sync::Arc<fegpu::context::Context>,
    arrays: &(Vec<i64>, Vec<i64>, Vec<f64>),
    method: fegpu::sparse::solver::Method,
    precond: fegpu::sparse::solver::Precond,
    settings: fegpu::sparse::solver::Settings,
) -> i64 {
    use fegpu::array::Array;
    use fegpu::sparse::solver::Solver;
    use fegpu::sparse::{build_pattern, Csr};
    let n = arrays.0.len() - 1;
    let a = std::sync::Arc::new(Csr::new(ctx.clone(), build_pattern(n, n, &arrays.0, &arrays.1, 0).unwrap(), &arrays.2).unwrap());
    let ones = vec![1.0; n];
    let mut bh = vec![0.0; n];
    fegpu::sparse::cpu::spmv(&a.pattern, &a.download_values().unwrap(), 1.0, &ones, 0.0, &mut bh);
    let b = Array::new(ctx.clone(), n, 1, Some(&bh)).unwrap();
    let x = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n])).unwrap();
    let s = Solver::with_settings(a, method, precond, settings).unwrap();
    let (o, true_rel, _) = s.solve(&b, &x, 1e-10, 2000).unwrap();
    assert!(o.converged && true_rel <= 1e-9, "{method:?} {precond:?}: {o:?}");
    let mut xh = vec![0.0f64; n];
    x.download(0, &mut xh, "x").unwrap();
    assert!(xh.iter().all(|v| (v - 1.0).abs() < 1e-6), "{method:?} {precond:?}: x is not all ones");
    o.iterations
}

#[test]
fn jacobi_swept_ilu0_tends_to_ilu0_and_the_backend_follows_the_reference() {
    use fegpu::sparse::solver::{Method, Precond};
    let (ctx, reference) = (
        std::sync::Arc::new(fegpu::context::Context::new(fegpu::context::Request::Auto, 0).unwrap()),
        std::sync::Arc::new(fegpu::context::Context::cpu_reference()),
    );
    // a 10^3 upwind grid: the lower and upper dependency graphs are 28 levels
    // deep, so 28 Jacobi sweeps solve each triangle exactly (L_s is nilpotent)
    let arrays = fegpu::sparse::gallery::convection_diffusion(10, 2.0);
    for method in [Method::Bicgstab, Method::Gmres { restart: 30 }, Method::Bicg, Method::Cgs] {
        let exact = rust_solve(&reference, &arrays, method, Precond::Ilu0);
        let swept = rust_solve(&reference, &arrays, method, Precond::Ilu0Jacobi { sweeps: 28 });
        assert!((exact - swept).abs() <= 1, "{method:?}: ILU(0) {exact} iterations, 28 sweeps {swept}");
        for sweeps in [1, 2, 3] {
            let want = rust_solve(&reference, &arrays, method, Precond::Ilu0Jacobi { sweeps });
            let got = rust_solve(&ctx, &arrays, method, Precond::Ilu0Jacobi { sweeps });
            assert!((got - want).abs() <= 2 + want / 20, "{method:?} {sweeps} sweeps: backend {got}, reference {want}");
            let none = rust_solve(&reference, &arrays, method, Precond::None);
            assert!(want < none, "{method:?} {sweeps} sweeps: {want} iterations, unpreconditioned {none}");
        }
    }
    let arrays = fegpu::sparse::gallery::laplacian7(4);
    let n = arrays.0.len() - 1;
    let a = std::sync::Arc::new(
        fegpu::sparse::Csr::new(
            reference.clone(),
            fegpu::sparse::build_pattern(n, n, &arrays.0, &arrays.1, 0).unwrap(),
            &arrays.2,
        )
        .unwrap(),
    );
    let e =
        fegpu::sparse::solver::Solver::new(a, Method::Cgs, Precond::Ilu0Jacobi { sweeps: 0 }).err().expect("0 sweeps refused");
    assert!(e.message.contains("sweeps = 0"), "{}", e.message);
}

#[test]
fn small_systems_iterate_as_one_block_or_one_cluster_like_the_grid_path() {
    // BiCGSTAB up to Settings::cluster_system_rows runs as one cluster with
    // the system in shared memory (CUDA; sm_90), else up to small_system_rows
    // as one block a launch; forced off (0) it runs the usual kernels: the
    // same iterations to rounding, and the CPU reference's, and x = 1
    use fegpu::sparse::solver::{Method, Precond, Settings};
    let ctx = std::sync::Arc::new(fegpu::context::Context::new(fegpu::context::Request::Auto, 0).unwrap());
    let reference = std::sync::Arc::new(fegpu::context::Context::cpu_reference());
    let t = fegpu::sparse::mm::read_matrix(&matrices().join("sherman5.mtx")).unwrap();
    let systems = [
        ("convection-diffusion 12^3", fegpu::sparse::gallery::convection_diffusion(12, 2.0)),
        ("convection-diffusion 18^3 (8 blocks a cluster)", fegpu::sparse::gallery::convection_diffusion(18, 2.0)),
        ("sherman5", t.to_csr().unwrap()),
    ];
    let paths = [("one block", usize::MAX, 0), ("one cluster", 0, usize::MAX), ("grid", 0, 0)];
    for (name, arrays) in &systems {
        for precond in [Precond::None, Precond::Jacobi, Precond::Ilu0Jacobi { sweeps: 2 }, Precond::Ilu0Jacobi { sweeps: 3 }] {
            if *name == "sherman5" && precond == Precond::None {
                continue; // 2,600 erratic iterations: rounding decides the count
            }
            let want = rust_solve(&reference, arrays, Method::Bicgstab, precond);
            for (path, block, cluster) in paths {
                let settings = Settings { small_system_rows: block, cluster_system_rows: cluster, ..Settings::default() };
                let got = rust_solve_with(&ctx, arrays, Method::Bicgstab, precond, settings);
                assert!((got - want).abs() <= 2 + want / 20, "{name} {precond:?} {path}: {got} iterations, the reference {want}");
            }
        }
    }
    // a breakdown in the cluster is reported as on the grid: (r0, A p) = 0 on the exchange matrix
    let a = std::sync::Arc::new(
        fegpu::sparse::Csr::new(ctx.clone(), fegpu::sparse::build_pattern(2, 2, &[0, 1, 2], &[1, 0], 0).unwrap(), &[1.0, 1.0])
            .unwrap(),
    );
    let (b, x) = (
        fegpu::array::Array::new(ctx.clone(), 2, 1, Some(&[1.0, 0.0])).unwrap(),
        fegpu::array::Array::new(ctx.clone(), 2, 1, Some(&[0.0, 0.0])).unwrap(),
    );
    for (path, block, cluster) in paths {
        let settings = Settings { small_system_rows: block, cluster_system_rows: cluster, ..Settings::default() };
        let s = fegpu::sparse::solver::Solver::with_settings(a.clone(), Method::Bicgstab, Precond::None, settings).unwrap();
        let (o, _, _) = s.solve(&b, &x, 1e-10, 50).unwrap();
        let why = o.breakdown.as_deref().unwrap_or("none");
        assert!(why.contains("(r0, v) = 0"), "{path}: breakdown {why:?}");
    }
}
