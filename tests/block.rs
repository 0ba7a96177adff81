//! Block CSR (BSR) through the C ABI: the product against the blocks
//! multiplied out here, block Jacobi against each block's own solve, block
//! ILU(0) against point ILU(0) on the same matrix with every block entry
//! stored (the two factorisations are equal in exact arithmetic: point
//! elimination inside a dense pivot block is its LU), block size 1 against
//! CSR, and the refusals. The backend under test is FEGPU_BACKEND's.

mod common;
use common::*;
use fegpu::ffi::array::*;
use fegpu::ffi::context::*;
use fegpu::ffi::fegpu_context_t;
use fegpu::ffi::sparse::*;
use fegpu::sparse::solver::{Method, Precond, Settings, Solver};
use fegpu::*;
use std::ffi::CString;

/// A block matrix on the host, 0-based: block rows of sorted block columns,
/// k x k blocks column-major.
struct Blocks {
    nb: usize,
    k: usize,
    rp: Vec<i32>,
    ci: Vec<i32>,
    v: Vec<f64>,
}

impl Blocks {
    /// A random nonsymmetric block pattern (a diagonal block and up to four
    /// others per row) with diagonal blocks dominant enough for any pivot order.
    fn random(nb: usize, k: usize, rng: &mut Rng) -> Blocks {
        let (mut rp, mut ci) = (vec![0i32], Vec::new());
        for i in 0..nb {
            let mut row = vec![i as i32];
            for _ in 0..4 {
                let j = ((rng.next_f64() + 1.0) * 0.5 * nb as f64) as usize % nb;
                if !row.contains(&(j as i32)) {
                    row.push(j as i32);
                }
            }
            row.sort();
            ci.extend(row);
            rp.push(ci.len() as i32);
        }
        let mut v = rng.vec_f64(ci.len() * k * k);
        for i in 0..nb {
            let s = (rp[i]..rp[i + 1]).find(|&s| ci[s as usize] == i as i32).unwrap() as usize;
            for d in 0..k {
                v[(s * k + d) * k + d] += 6.0 * k as f64;
            }
        }
        Blocks { nb, k, rp, ci, v }
    }

    fn at(&self, s: usize, i: usize, j: usize) -> f64 {
        self.v[(s * self.k + j) * self.k + i]
    }

    fn mv(&self, x: &[f64]) -> Vec<f64> {
        let k = self.k;
        let mut y = vec![0.0; self.nb * k];
        for bi in 0..self.nb {
            for s in self.rp[bi] as usize..self.rp[bi + 1] as usize {
                let bj = self.ci[s] as usize;
                for i in 0..k {
                    for j in 0..k {
                        y[bi * k + i] += self.at(s, i, j) * x[bj * k + j];
                    }
                }
            }
        }
        y
    }

    /// Every block entry as a point CSR entry (zeros included), 0-based.
    fn point(&self) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
        let (mut rp, mut ci, mut v) = (vec![0i32], Vec::new(), Vec::new());
        for bi in 0..self.nb {
            for i in 0..self.k {
                for s in self.rp[bi] as usize..self.rp[bi + 1] as usize {
                    for j in 0..self.k {
                        ci.push(self.ci[s] * self.k as i32 + j as i32);
                        v.push(self.at(s, i, j));
                    }
                }
                rp.push(ci.len() as i32);
            }
        }
        (rp, ci, v)
    }

    fn create(&self, ctx: fegpu_context_t) -> u64 {
        let mut a = 0;
        let (nb, nnzb) = (self.nb as i64, self.ci.len() as i64);
        ok(unsafe {
            fegpu_bsr_create_i32(ctx, nb, nb, self.k as i64, nnzb, self.rp.as_ptr(), self.ci.as_ptr(), self.v.as_ptr(), 0, &mut a)
        });
        a
    }
}

fn create_point(ctx: fegpu_context_t, (rp, ci, v): &(Vec<i32>, Vec<i32>, Vec<f64>)) -> u64 {
    let (n, mut a) = (rp.len() as i64 - 1, 0);
    ok(unsafe { fegpu_csr_create_i32(ctx, n, n, ci.len() as i64, rp.as_ptr(), ci.as_ptr(), v.as_ptr(), 0, &mut a) });
    a
}

struct Solved {
    status: fegpu_status,
    iterations: i64,
    x: Vec<f64>,
}

fn solve(ctx: fegpu_context_t, a: u64, b: &[f64], method: i32, precond: i32, tol: f64) -> Solved {
    let n = b.len();
    let mut s = 0;
    ok(unsafe { fegpu_solver_create(a, method, precond, &mut s) });
    let (db, dx) = (create_f64(ctx, n, 1, b), create_f64(ctx, n, 1, &vec![0.0; n]));
    let mut info = fegpu_solve_info::default();
    let status = unsafe { fegpu_solver_solve(s, db, dx, tol, 2000, &mut info) };
    let x = download_f64(dx, n);
    for h in [db, dx] {
        ok(fegpu_array_destroy(h));
    }
    ok(fegpu_solver_destroy(s));
    Solved { status, iterations: info.iterations, x }
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[test]
fn the_product_multiplies_the_blocks() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    for k in [2, 3, 4, 5, 8] {
        let m = Blocks::random(300 + 7 * k, k, &mut rng);
        let a = m.create(ctx);
        let n = m.nb * k;
        let (mut rows, mut cols, mut nnz) = (0, 0, 0);
        ok(unsafe { fegpu_csr_info(a, &mut rows, &mut cols, &mut nnz) });
        assert_eq!((rows, cols, nnz), (n as i64, n as i64, (m.ci.len() * k * k) as i64));
        let (mut bs, mut nbr) = (0, 0);
        ok(unsafe { fegpu_bsr_info(a, &mut bs, &mut nbr, std::ptr::null_mut(), std::ptr::null_mut()) });
        assert_eq!((bs, nbr), (k as i64, m.nb as i64));
        let x = rng.vec_f64(n);
        let y0 = rng.vec_f64(n);
        let (dx, dy) = (create_f64(ctx, n, 1, &x), create_f64(ctx, n, 1, &vec![f64::NAN; n]));
        ok(fegpu_csr_spmv(a, 1.0, dx, 0.0, dy)); // beta = 0: the NaN poison is not read
        let want = m.mv(&x);
        assert!(max_rel_diff(&download_f64(dy, n), &want) < 1e-14, "k = {k}");
        let dy = create_f64(ctx, n, 1, &y0);
        ok(fegpu_csr_spmv(a, -2.0, dx, 0.5, dy));
        let want: Vec<f64> = want.iter().zip(&y0).map(|(w, y)| -2.0 * w + 0.5 * y).collect();
        assert!(max_rel_diff(&download_f64(dy, n), &want) < 1e-14, "k = {k}, alpha and beta");
        // new values for the same pattern change the product
        let v2: Vec<f64> = m.v.iter().map(|v| 2.0 * v).collect();
        ok(unsafe { fegpu_csr_update_values(a, v2.as_ptr(), v2.len() as i64) });
        ok(fegpu_csr_spmv(a, 1.0, dx, 0.0, dy));
        let want2: Vec<f64> = m.mv(&x).iter().map(|w| 2.0 * w).collect();
        assert!(max_rel_diff(&download_f64(dy, n), &want2) < 1e-14, "k = {k}, updated");
        ok(fegpu_csr_destroy(a));
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn block_jacobi_solves_each_diagonal_block() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    let m = Blocks::random(200, 3, &mut rng);
    let a = m.create(ctx);
    let n = m.nb * 3;
    // D, the block diagonal alone
    let mut d = Blocks { nb: m.nb, k: 3, rp: (0..=m.nb as i32).collect(), ci: (0..m.nb as i32).collect(), v: Vec::new() };
    for bi in 0..m.nb {
        let s = (m.rp[bi]..m.rp[bi + 1]).find(|&s| m.ci[s as usize] == bi as i32).unwrap() as usize;
        d.v.extend_from_slice(&m.v[s * 9..(s + 1) * 9]);
    }
    // BiCGSTAB with block Jacobi on D itself converges in one iteration
    let da = d.create(ctx);
    let b = rng.vec_f64(n);
    let r = solve(ctx, da, &b, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_JACOBI, 1e-12);
    assert_eq!((r.status, r.iterations), (FEGPU_OK, 1), "block Jacobi is D's exact inverse");
    assert!(max_rel_diff(&d.mv(&r.x), &b) < 1e-13);
    // and on the coupled matrix it preconditions a solve to the right answer
    let blockwise = solve(ctx, a, &b, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_JACOBI, 1e-10);
    assert_eq!(blockwise.status, FEGPU_OK);
    assert!(max_rel_diff(&m.mv(&blockwise.x), &b) < 1e-9);
    for h in [a, da] {
        ok(fegpu_csr_destroy(h));
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn block_ilu0_equals_point_ilu0_on_the_full_blocks() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    // sherman5 (oil reservoir, 3 unknowns per cell) and random block matrices
    let sherman5 = {
        let path = CString::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/matrices/sherman5.mtx")).unwrap();
        let mut a = 0;
        ok(unsafe { fegpu_csr_read_mm(ctx, path.as_ptr(), &mut a) });
        let (mut n, mut nnz) = (0, 0);
        ok(unsafe { fegpu_csr_info(a, &mut n, std::ptr::null_mut(), &mut nnz) });
        let (mut rp, mut ci, mut v) = (vec![0i64; n as usize + 1], vec![0i64; nnz as usize], vec![0.0; nnz as usize]);
        ok(unsafe { fegpu_csr_download(a, rp.as_mut_ptr(), ci.as_mut_ptr(), v.as_mut_ptr(), 0) });
        ok(fegpu_csr_destroy(a));
        // regroup into 3 x 3 blocks here, independently of the library's from_point
        let nb = n as usize / 3;
        let mut rows: Vec<std::collections::BTreeMap<i32, [f64; 9]>> = vec![Default::default(); nb];
        for r in 0..n as usize {
            for e in rp[r] as usize..rp[r + 1] as usize {
                let c = ci[e] as usize;
                rows[r / 3].entry((c / 3) as i32).or_insert([0.0; 9])[(c % 3) * 3 + r % 3] = v[e];
            }
        }
        let mut m = Blocks { nb, k: 3, rp: vec![0], ci: Vec::new(), v: Vec::new() };
        for row in rows {
            for (c, b) in row {
                m.ci.push(c);
                m.v.extend_from_slice(&b);
            }
            m.rp.push(m.ci.len() as i32);
        }
        m
    };
    let cases = [
        ("sherman5", sherman5),
        ("random k=2", Blocks::random(500, 2, &mut rng)),
        ("random k=4", Blocks::random(300, 4, &mut rng)),
    ];
    for (name, m) in cases {
        let n = m.nb * m.k;
        let b = m.mv(&vec![1.0; n]);
        let (a, point) = (m.create(ctx), create_point(ctx, &m.point()));
        for method in [FEGPU_METHOD_BICGSTAB, FEGPU_METHOD_GMRES, FEGPU_METHOD_CGS] {
            let blockwise = solve(ctx, a, &b, method, FEGPU_PRECOND_ILU0, 1e-10);
            let pointwise = solve(ctx, point, &b, method, FEGPU_PRECOND_ILU0, 1e-10);
            assert_eq!((blockwise.status, pointwise.status), (FEGPU_OK, FEGPU_OK), "{name} method {method}");
            assert!(
                (blockwise.iterations - pointwise.iterations).abs() <= 1,
                "{name} method {method}: block ILU(0) {} iterations, point ILU(0) {}",
                blockwise.iterations,
                pointwise.iterations
            );
            assert!(max_rel_diff(&blockwise.x, &pointwise.x) < 1e-5, "{name} method {method}");
        }
        ok(fegpu_csr_destroy(a));
        ok(fegpu_csr_destroy(point));
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn jacobi_swept_block_ilu0_approaches_the_exact_one() {
    // the sweeps are truncated Neumann series of the triangular solves: on a
    // matrix with a short dependency chain enough sweeps reproduce them exactly
    let ctx = context();
    let mut rng = Rng::new(seed());
    let m = Blocks::random(300, 3, &mut rng);
    let a = m.create(ctx);
    let n = m.nb * 3;
    let b = m.mv(&vec![1.0; n]);
    let exact = solve(ctx, a, &b, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0, 1e-10);
    let swept = solve(ctx, a, &b, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0_JACOBI, 1e-10);
    assert_eq!((exact.status, swept.status), (FEGPU_OK, FEGPU_OK));
    assert!(max_rel_diff(&swept.x, &vec![1.0; n]) < 1e-6, "2 sweeps still solve the system");
    let (iterations, x) = solve_with(ctx, a, &b, Precond::Ilu0Jacobi { sweeps: 300 }, Settings::default());
    assert!((iterations - exact.iterations).abs() <= 1, "as many sweeps as block rows: the exact triangular solves");
    assert!(max_rel_diff(&x, &exact.x) < 1e-8);
    ok(fegpu_csr_destroy(a));
    ok(fegpu_context_destroy(ctx));
}

/// BiCGSTAB with `precond` and `settings` through the Rust API (the ABI
/// takes the default settings): iterations and x.
fn solve_with(ctx: fegpu_context_t, a: u64, b: &[f64], precond: Precond, settings: Settings) -> (i64, Vec<f64>) {
    let n = b.len();
    let csr = fegpu::ffi::registry::get::<fegpu::sparse::Csr>(a, "A").unwrap();
    let solver = Solver::with_settings(csr, Method::Bicgstab, precond, settings).unwrap();
    let (db, dx) = (create_f64(ctx, n, 1, b), create_f64(ctx, n, 1, &vec![0.0; n]));
    let array = |h| fegpu::ffi::registry::get::<fegpu::array::Array>(h, "array").unwrap();
    let (out, _, _) = solver.solve(&array(db), &array(dx), 1e-10, 2000).unwrap();
    (out.iterations, download_f64(dx, n))
}

#[test]
fn small_block_systems_iterate_as_one_cluster_like_the_grid_path() {
    // BiCGSTAB over a BSR matrix up to Settings::cluster_system_rows runs as
    // one thread-block cluster (CUDA, sm_90; a thread a block row), forced
    // off (0) on the grid's kernels: on both, the CPU reference's iterations
    // within rounding's margin, and x = 1. Sizes: a 2 x 2 system of 5,880
    // rows, block rows not a multiple of the cluster's 8 blocks, and fewer
    // block rows than blocks.
    let ctx = context();
    let mut cpu = 0;
    ok(unsafe { fegpu_context_create(FEGPU_BACKEND_CPU, 0, &mut cpu) });
    let mut rng = Rng::new(seed());
    for (k, nb) in [(2, 2940), (3, 501), (4, 700), (8, 150), (2, 5)] {
        let m = Blocks::random(nb, k, &mut rng);
        let (a, reference) = (m.create(ctx), m.create(cpu));
        let b = m.mv(&vec![1.0; nb * k]);
        for precond in [Precond::None, Precond::Ilu0Jacobi { sweeps: 2 }, Precond::Ilu0Jacobi { sweeps: 3 }] {
            let (want, _) = solve_with(cpu, reference, &b, precond, Settings::default());
            for (path, cluster) in [("one cluster", usize::MAX), ("grid", 0)] {
                let settings = Settings { cluster_system_rows: cluster, ..Settings::default() };
                let (got, x) = solve_with(ctx, a, &b, precond, settings);
                let what = format!("k = {k}, {nb} block rows, {precond:?}, {path}");
                assert!((got - want).abs() <= 2 + want / 20, "{what}: {got} iterations, the reference {want}");
                assert!(max_rel_diff(&x, &vec![1.0; nb * k]) < 1e-6, "{what}: x = 1");
            }
        }
        ok(fegpu_csr_destroy(a));
        ok(fegpu_csr_destroy(reference));
    }
    ok(fegpu_context_destroy(cpu));
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn the_device_factorisation_is_the_host_one() {
    // up to Settings::host_factor_rows a device solver factors on the host;
    // 0 forces the level-by-level kernels, which must give the same factors
    let ctx = context();
    let mut rng = Rng::new(seed());
    for k in [2, 3, 5] {
        let m = Blocks::random(400, k, &mut rng);
        let a = m.create(ctx);
        let b = rng.vec_f64(m.nb * k);
        for precond in [Precond::Ilu0, Precond::Ilu0Jacobi { sweeps: 2 }] {
            let host = solve_with(ctx, a, &b, precond, Settings::default());
            let device = solve_with(ctx, a, &b, precond, Settings { host_factor_rows: 0, ..Settings::default() });
            assert!((host.0 - device.0).abs() <= 1, "k = {k} {precond:?}: {} vs {} iterations", host.0, device.0);
            assert!(max_rel_diff(&device.1, &host.1) < 1e-8, "k = {k} {precond:?}");
        }
        ok(fegpu_csr_destroy(a));
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn block_size_one_is_csr() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    let m = Blocks::random(400, 1, &mut rng);
    let (a, point) = (m.create(ctx), create_point(ctx, &m.point()));
    let b = rng.vec_f64(m.nb);
    for precond in [FEGPU_PRECOND_NONE, FEGPU_PRECOND_JACOBI, FEGPU_PRECOND_ILU0] {
        let (x, y) = (
            solve(ctx, a, &b, FEGPU_METHOD_BICGSTAB, precond, 1e-10),
            solve(ctx, point, &b, FEGPU_METHOD_BICGSTAB, precond, 1e-10),
        );
        assert_eq!((x.status, x.iterations), (y.status, y.iterations), "precond {precond}");
        assert_eq!(x.x, y.x, "precond {precond}: the same kernels");
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn newton_steps_refactor_the_blocks() {
    // values refreshed in place each step: the solve after an update equals
    // a fresh solver's on a fresh matrix with those values
    let ctx = context();
    let mut rng = Rng::new(seed());
    let m = Blocks::random(600, 2, &mut rng);
    let a = m.create(ctx);
    let n = m.nb * 2;
    let b = rng.vec_f64(n);
    let mut s = 0;
    ok(unsafe { fegpu_solver_create(a, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0, &mut s) });
    let (db, dx) = (create_f64(ctx, n, 1, &b), create_f64(ctx, n, 1, &vec![0.0; n]));
    for step in 0..3 {
        let v = m.v.iter().map(|v| v * (1.0 + 0.2 * step as f64 * rng.next_f64())).collect();
        let next = Blocks { nb: m.nb, k: 2, rp: m.rp.clone(), ci: m.ci.clone(), v };
        ok(unsafe { fegpu_csr_update_values(a, next.v.as_ptr(), next.v.len() as i64) });
        ok(unsafe { fegpu_array_upload_f64(dx, vec![0.0; n].as_ptr(), n as i64) });
        let mut info = fegpu_solve_info::default();
        ok(unsafe { fegpu_solver_solve(s, db, dx, 1e-10, 500, &mut info) });
        assert!(info.setup_seconds > 0.0, "step {step}: the factors were rebuilt");
        let fresh = next.create(ctx);
        let want = solve(ctx, fresh, &b, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0, 1e-10);
        assert_eq!(info.iterations, want.iterations, "step {step}");
        assert!(max_rel_diff(&download_f64(dx, n), &want.x) < 1e-12, "step {step}");
        assert!(max_rel_diff(&next.mv(&want.x), &b) < 1e-8, "step {step}");
        ok(fegpu_csr_destroy(fresh));
    }
    ok(fegpu_solver_destroy(s));
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn bad_block_input_is_refused_by_name() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    let m = Blocks::random(50, 2, &mut rng);
    let (nb, nnzb) = (m.nb as i64, m.ci.len() as i64);
    let (rp, ci, v) = (m.rp.as_ptr(), m.ci.as_ptr(), m.v.as_ptr());
    let mut a = 0;
    for k in [0, 9, -1] {
        expect_err(
            unsafe { fegpu_bsr_create_i32(ctx, nb, nb, k, nnzb, rp, ci, v, 0, &mut a) },
            FEGPU_ERR_INVALID_ARGUMENT,
            &["block_size"],
        );
    }
    expect_err(
        unsafe { fegpu_bsr_create_i32(ctx, -3, nb, 2, nnzb, rp, ci, v, 0, &mut a) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["nb_rows"],
    );
    expect_err(unsafe { fegpu_bsr_create_i32(ctx, nb, nb, 2, -1, rp, ci, v, 0, &mut a) }, FEGPU_ERR_INVALID_ARGUMENT, &["nnzb"]);
    expect_err(
        unsafe { fegpu_bsr_create_i32(ctx, nb, nb, 2, nnzb, rp, ci, std::ptr::null(), 0, &mut a) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["values"],
    );
    let mut nan = m.v.clone();
    nan[4 * 7 + 3] = f64::NAN;
    expect_err(
        unsafe { fegpu_bsr_create_i32(ctx, nb, nb, 2, nnzb, rp, ci, nan.as_ptr(), 0, &mut a) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["values[31]"],
    );
    assert_eq!(a, 0, "nothing was created");

    // a singular pivot block is named, block Jacobi and block ILU(0) alike
    let mut sing = Blocks { v: m.v.clone(), rp: m.rp.clone(), ci: m.ci.clone(), ..m };
    // block row 0: no earlier row updates its pivot, so ILU(0) meets it singular too
    let s = (sing.rp[0]..sing.rp[1]).find(|&s| sing.ci[s as usize] == 0).unwrap() as usize;
    sing.v[s * 4..s * 4 + 4].copy_from_slice(&[1.0, 2.0, 2.0, 4.0]);
    let a = sing.create(ctx);
    let mut s = 0;
    expect_err(
        unsafe { fegpu_solver_create(a, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_JACOBI, &mut s) },
        FEGPU_ERR_BREAKDOWN,
        &["block Jacobi", "block row 0 (0-based; 1 1-based)"],
    );
    for precond in [FEGPU_PRECOND_ILU0, FEGPU_PRECOND_ILU0_JACOBI] {
        let r = unsafe { fegpu_solver_create(a, FEGPU_METHOD_BICGSTAB, precond, &mut s) };
        expect_err(r, FEGPU_ERR_BREAKDOWN, &["block ILU(0)", "block row 0"]);
    }
    ok(fegpu_csr_destroy(a));

    // what a block matrix does not serve is refused, naming the way out
    let a = sing.create(ctx);
    for (method, precond, word) in
        [(FEGPU_METHOD_BICG, FEGPU_PRECOND_NONE, "BiCG"), (FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_AMG, "AMG")]
    {
        expect_err(unsafe { fegpu_solver_create(a, method, precond, &mut s) }, FEGPU_ERR_UNSUPPORTED, &[word, "2 x 2 block"]);
    }
    let mut out = [0i64; 1];
    expect_err(
        unsafe { fegpu_csr_download(a, out.as_mut_ptr(), out.as_mut_ptr(), std::ptr::null_mut(), 0) },
        FEGPU_ERR_UNSUPPORTED,
        &["fegpu_csr_download"],
    );
    // a wrong count of new values changes nothing
    expect_err(
        unsafe { fegpu_csr_update_values(a, sing.v.as_ptr(), nnzb) },
        FEGPU_ERR_SIZE_MISMATCH,
        &[&format!("{}", nnzb * 4)],
    );
    // a vector of block rows instead of rows is a size mismatch
    let rows = 2 * nb as usize;
    let (x, y) = (create_f64(ctx, rows, 1, &vec![1.0; rows]), create_f64(ctx, nb as usize, 1, &vec![0.0; nb as usize]));
    expect_err(fegpu_csr_spmv(a, 1.0, x, 0.0, y), FEGPU_ERR_SIZE_MISMATCH, &["y"]);
    ok(fegpu_csr_destroy(a));
    ok(fegpu_context_destroy(ctx));
}
