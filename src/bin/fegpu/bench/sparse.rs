//! `fegpu bench spmv` and `fegpu bench solve`: SpMV per kernel shape and
//! Krylov iterations, with bytes counted, the copy ceiling measured in the
//! same run, and the result checked against the CPU reference.

use super::{describe, open_context, time};
use fegpu::array::{Array, Storage};
use fegpu::context::Context;
use fegpu::error::Result;
use fegpu::gpu::{DeviceBuffer, Gpu};
use fegpu::sparse::solver::{IluSweeps, Method, Precond, Settings, Solver};
use fegpu::sparse::{self, cpu, cuda, gallery, Buffer, Csr, DevicePattern};
use std::sync::Arc;
use std::time::Instant;

/// The benchmark's matrices: name and CSR arrays.
/// The caller's file is read first, so a bad one fails before any work.
pub fn matrices(real: Option<&std::path::Path>) -> Result<Vec<(String, usize, gallery::CsrArrays)>> {
    let real = match real {
        Some(p) => {
            let t = sparse::mm::read_matrix(p)?;
            Some((p.file_stem().unwrap_or_default().to_string_lossy().into_owned(), t.nrows, t.to_csr()?))
        }
        None => None,
    };
    let mut v = vec![
        ("laplacian7 128^3".to_string(), 128usize.pow(3), gallery::laplacian7(128)),
        ("laplacian27 96^3".to_string(), 96usize.pow(3), gallery::laplacian27(96)),
    ];
    v.extend(real);
    Ok(v)
}

/// A product's operands: x (also returned on the host) and y poisoned with NaN.
fn product_operands(ctx: &Arc<Context>, n: usize) -> Result<(Vec<f64>, Array, Array)> {
    let xh: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1000) as f64 / 1000.0).collect();
    let x = Array::new(ctx.clone(), n, 1, Some(&xh))?;
    let y = Array::new(ctx.clone(), n, 1, Some(&vec![f64::NAN; n]))?;
    Ok((xh, x, y))
}

/// Runs `f` with A's pattern and values, x and y as they lie on the device,
/// to time kernels directly; nothing on the CPU backend.
fn on_device(
    ctx: &Arc<Context>,
    a: &Csr,
    x: &Array,
    y: &Array,
    f: impl FnOnce(&Gpu, &DevicePattern, &DeviceBuffer<f64>, &DeviceBuffer<f64>, &DeviceBuffer<f64>) -> Result<()>,
) -> Result<()> {
    let (Some(g), Some(dp)) = (ctx.gpu(), a.device.as_ref()) else { return Ok(()) };
    let vals = a.values()?;
    let (gx, gy) = (x.lock("x")?, y.lock("y")?);
    match (&vals.data, &*gx, &*gy) {
        (Buffer::Device(v), Storage::F64(Buffer::Device(xd)), Storage::F64(Buffer::Device(yd))) => f(g, dp, v, xd, yd),
        _ => Ok(()),
    }
}

fn make(ctx: &Arc<Context>, n: usize, (rp, ci, v): &gallery::CsrArrays) -> Result<Arc<Csr>> {
    Ok(Arc::new(Csr::new(ctx.clone(), sparse::build_pattern(n, n, rp, ci, 0)?, v)?))
}

/// Device-to-device copy bandwidth (read + write) of a 1 GiB buffer: the ceiling.
fn copy_ceiling(ctx: &Arc<Context>) -> Result<f64> {
    let n = 1 << 27;
    let a = Array::new::<f64>(ctx.clone(), n, 1, None)?;
    let b = Array::new::<f64>(ctx.clone(), n, 1, None)?;
    let t = time(ctx, 10, || fegpu::dense::copy(&a, &b, None))?;
    Ok(2.0 * (n * 8) as f64 / t / 1e9)
}

fn spmv_bytes(n: usize, nnz: usize) -> f64 {
    (12 * nnz + 4 * (n + 1) + 16 * n) as f64
}

/// The context, the title line and the copy ceiling measured first.
pub(super) fn start(what: &str) -> Result<(Arc<Context>, f64)> {
    let ctx = open_context()?;
    println!("fegpu bench {what} on {}", describe(&ctx));
    let ceiling = copy_ceiling(&ctx)?;
    println!("device-to-device copy ceiling: {ceiling:.0} GB/s");
    Ok((ctx, ceiling))
}

pub fn spmv(real: Option<&std::path::Path>) -> Result<()> {
    let (ctx, ceiling) = start("spmv")?;
    println!("bytes = 12 nnz + 4 (n+1) + 8 n (x) + 8 n (y): each read or written once");
    println!("  {:<20} {:>9} {:>10} {:<10} {:>9} {:>9} {:>8}", "matrix", "rows", "nnz", "kernel", "ms", "GB/s", "of copy");
    for (name, n, arrays) in matrices(real)? {
        let a = make(&ctx, n, &arrays)?;
        let nnz = a.pattern.nnz();
        let (xh, x, y) = product_operands(&ctx, n)?;
        let bytes = spmv_bytes(n, nnz);
        let mut rows = Vec::new();
        on_device(&ctx, &a, &x, &y, |g, dp, v, xd, yd| {
            for tpr in [1u32, 2, 4, 8, 16, 32] {
                let t = time(&ctx, 20, || cuda::spmv_with(g, dp, tpr, n, v, 1.0, xd, 0.0, yd, None))?;
                rows.push((format!("tpr {tpr}"), t));
            }
            Ok(())
        })?;
        let t = time(&ctx, 20, || sparse::spmv(&a, 1.0, &x, 0.0, &y))?;
        rows.push((format!("default({})", a.device.as_ref().map_or(0, |d| d.threads_per_row)), t));
        // the timed result must be right
        let mut got = vec![0.0; n];
        y.download(0, &mut got, "y")?;
        let mut want = vec![0.0; n];
        cpu::spmv(&a.pattern, &a.download_values()?, 1.0, &xh, 0.0, &mut want);
        let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
        for (what, t) in rows {
            let gbs = bytes / t / 1e9;
            println!("  {name:<20} {n:>9} {nnz:>10} {what:<10} {:>9.4} {gbs:>9.1} {:>7.1}%", t * 1e3, 100.0 * gbs / ceiling);
        }
        println!("  {name:<20} max |y - y_cpu| = {err:.2e}");
    }
    Ok(())
}

/// Seconds per iteration of `method` over `iters` iterations (tolerance unreachable).
fn per_iteration(ctx: &Arc<Context>, a: &Arc<Csr>, method: Method, precond: Precond, iters: i64) -> Result<(f64, f64)> {
    let n = a.pattern.nrows;
    let bh: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 31) % 17) as f64 / 17.0).collect();
    let b = Array::new(ctx.clone(), n, 1, Some(&bh))?;
    let x = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    let t = Instant::now();
    let s = Solver::new(a.clone(), method, precond)?;
    let setup = t.elapsed().as_secs_f64();
    s.solve(&b, &x, 1e-30, 2)?; // warm-up: kernels compiled, caches hot
    x.upload(0, &vec![0.0; n], "x")?;
    let t = Instant::now();
    let (o, _, _) = s.solve(&b, &x, 1e-30, iters)?;
    Ok((t.elapsed().as_secs_f64() / o.iterations.max(1) as f64, setup))
}

pub fn solve(real: Option<&std::path::Path>) -> Result<()> {
    let (ctx, ceiling) = start("solve")?;
    println!("minimum bytes per iteration (every vector pass fused): CG = SpMV + 64 n, BiCGSTAB = 2 SpMV + 120 n");
    println!(
        "  {:<22} {:<9} {:<7} {:>9} {:>10} {:>11} {:>10}",
        "matrix", "method", "precond", "iters", "ms/iter", "roofline ms", "of roof"
    );
    let mut list = matrices(real)?;
    list.push(("convdiff 128^3".into(), 128usize.pow(3), gallery::convection_diffusion(128, 1.0)));
    for (name, n, arrays) in list {
        let a = make(&ctx, n, &arrays)?;
        let nnz = a.pattern.nnz();
        let spmv_b = spmv_bytes(n, nnz);
        let spd = !name.starts_with("convdiff") && !name.starts_with("sherman");
        let mut cases = vec![(Method::Bicgstab, Precond::None, 2.0 * spmv_b + 120.0 * n as f64)];
        if spd {
            cases.insert(0, (Method::Cg, Precond::None, spmv_b + 64.0 * n as f64));
        }
        cases.push((Method::Bicgstab, Precond::Ilu0, f64::NAN));
        // host-driven over device vectors: per iteration against CuPy's (peers.py)
        for m in [Method::Gmres { restart: 30 }, Method::Bicg, Method::Cgs] {
            cases.push((m, Precond::None, f64::NAN));
        }
        for (m, p, bytes) in cases {
            let iters = if p == Precond::Ilu0 { 20 } else { 200 };
            let (t, setup) = per_iteration(&ctx, &a, m, p, iters)?;
            let roof = bytes / (ceiling * 1e9);
            let frac = if roof.is_nan() { "-".to_string() } else { format!("{:.0}%", 100.0 * roof / t) };
            println!(
                "  {name:<22} {:<9} {:<7} {iters:>9} {:>10.4} {:>11.4} {frac:>10}{}",
                m.name(),
                p.to_string(),
                t * 1e3,
                roof * 1e3,
                if p == Precond::Ilu0 { format!("   (ILU(0) setup {:.1} ms)", setup * 1e3) } else { String::new() }
            );
        }
    }
    Ok(())
}

/// Seconds per iteration (20 iterations) and the iterations and seconds to
/// 1e-8 of BiCGSTAB with `precond` and `settings`, b = A*1.
fn ilu_solve(ctx: &Arc<Context>, a: &Arc<Csr>, precond: Precond, settings: Settings) -> Result<(f64, i64, f64)> {
    let n = a.rows();
    let s = Solver::with_settings(a.clone(), Method::Bicgstab, precond, settings)?;
    let ones = vec![1.0; n];
    let mut bh = vec![0.0; n];
    sparse::block::cpu::spmv(&a.pattern, a.block, &a.download_values()?, 1.0, &ones, 0.0, &mut bh);
    let b = Array::new(ctx.clone(), n, 1, Some(&bh))?;
    let x = Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?;
    s.solve(&b, &x, 1e-30, 2)?; // warm-up
    x.upload(0, &vec![0.0; n], "x")?;
    let t = Instant::now();
    let (o, _, _) = s.solve(&b, &x, 1e-30, 20)?;
    let per_it = t.elapsed().as_secs_f64() / o.iterations.max(1) as f64;
    x.upload(0, &vec![0.0; n], "x")?;
    let t = Instant::now();
    let (o, _, _) = s.solve(&b, &x, 1e-8, 20_000)?;
    Ok((per_it, o.iterations, t.elapsed().as_secs_f64()))
}

/// `fegpu bench ilu [A.mtx]`: ILU(0) on the device, the synchronisation-free
/// sweeps (one launch per sweep) against the level-by-level sweeps, and the approximate
/// variant whose triangular solves are 1, 2 or 3 Jacobi sweeps, in one run:
/// the apply (both triangles) against the exact apply's bytes at the copy
/// ceiling, the factorisation, and ILU(0)-BiCGSTAB per iteration and to 1e-8
/// beside unpreconditioned BiCGSTAB. The exact schedules' z must agree
/// bit for bit. FEGPU_BENCH_CHUNKS=1024,4096 adds the synchronisation-free
/// sweeps at those chunk sizes, FEGPU_BENCH_BOXES=128x128x8,... 7-point
/// Laplacians on those boxes; FEGPU_BENCH_QUICK=1 times the applies only;
/// FEGPU_BENCH_SWEEPS=windows,multicolour the rows so labelled only.
pub fn ilu(real: Option<&std::path::Path>) -> Result<()> {
    let (ctx, ceiling) = start("ilu")?;
    println!("apply bytes = 12 nnz (factors and columns) + 4 (n+1) + 4 n (diagonal) + 8 n (r) + 16 n (z out, in, out): the floor at the copy ceiling");
    println!(
        "  {:<18} {:>8} {:<17} {:>9} {:>9} {:>10} {:>10} {:>7} {:>10}",
        "matrix", "rows", "sweeps", "apply ms", "floor ms", "factor ms", "ms/iter", "iters", "solve ms"
    );
    let mut list = matrices(real)?;
    // the caller's matrix joins the small systems' table where it is one
    let small_real = list.last().filter(|(_, n, _)| real.is_some() && *n <= 50_000).map(|(m, _, a)| (m.clone(), a.clone()));
    list.insert(1, ("convdiff 128^3".into(), 128usize.pow(3), gallery::convection_diffusion(128, 1.0)));
    if std::env::var("FEGPU_BENCH_SMALL").is_ok() {
        list.clear(); // the small systems' table alone
    }
    // FEGPU_BENCH_BOXES=128x128x1,128x128x32: 7-point Laplacians on those boxes too (the walk's cost a plane)
    for b in std::env::var("FEGPU_BENCH_BOXES").unwrap_or_default().split(',').filter(|b| !b.is_empty()) {
        let d: Vec<usize> = b.split('x').filter_map(|v| v.parse().ok()).collect();
        if let [nx, ny, nz] = d[..] {
            list.push((format!("laplacian7 {b}"), nx * ny * nz, gallery::laplacian7_box([nx, ny, nz])));
        }
    }
    for (name, n, arrays) in list {
        let a = make(&ctx, n, &arrays)?;
        let nnz = a.pattern.nnz();
        let floor = (12 * nnz + 4 * (n + 1) + 28 * n) as f64 / (ceiling * 1e9);
        let r: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 31) % 17) as f64 / 17.0).collect();
        let ra = Array::new(ctx.clone(), n, 1, Some(&r))?;
        let mut zs: Vec<Vec<f64>> = Vec::new();
        // the plane pipeline (7-point) and the grid walk where the matrix is a box stencil's (the default there), the chunks, the levels
        let p = &a.pattern;
        let walk = fegpu::sparse::grid_walk::GridWalk::find(&p.row_ptr, &p.col, &p.diag);
        let piped = walk.filter(|w| w.pipelines(&p.row_ptr, &p.col, &p.diag).is_some());
        let mut variants: Vec<_> = piped
            .map(|w| (format!("pipeline {}x{}x{}", w.nx, w.ny, w.nz), Precond::Ilu0, IluSweeps::Pipeline))
            .into_iter()
            .chain(piped.into_iter().flat_map(|_| bench_runs()).map(|r| {
                let label = r.map_or("windows".to_string(), |r| format!("windows, {r} runs"));
                (label, Precond::Ilu0, IluSweeps::Windows { runs: r })
            }))
            .chain(walk.map(|w| (format!("walk {}x{}x{}", w.nx, w.ny, w.nz), Precond::Ilu0, IluSweeps::GridWalk)))
            .collect();
        variants.push((
            "chunks".to_string(),
            Precond::Ilu0,
            IluSweeps::SyncFree { rows: Some(fegpu::sparse::cuda::sweep_chunk(n)) },
        ));
        variants.push(("levels".to_string(), Precond::Ilu0, IluSweeps::Levels));
        // FEGPU_BENCH_CHUNKS=4096,16384: the sync-free sweeps at those chunk sizes too
        for rows in std::env::var("FEGPU_BENCH_CHUNKS").unwrap_or_default().split(',').filter_map(|c| c.parse().ok()) {
            variants.push((format!("sync-free {rows}"), Precond::Ilu0, IluSweeps::SyncFree { rows: Some(rows) }));
        }
        variants.push(("multicolour".to_string(), Precond::Ilu0Multicolour { split: false }, IluSweeps::Levels));
        variants.push(("multicolour split".to_string(), Precond::Ilu0Multicolour { split: true }, IluSweeps::Levels));
        let quick = std::env::var("FEGPU_BENCH_QUICK").is_ok(); // experiments: applies only
        for k in (1..=3).filter(|_| !quick) {
            variants.push((format!("jacobi x{k}"), Precond::Ilu0Jacobi { sweeps: k }, IluSweeps::Levels));
        }
        // FEGPU_BENCH_SWEEPS=windows,multicolour: only the rows whose label starts so
        let only = std::env::var("FEGPU_BENCH_SWEEPS").ok();
        let wanted = |label: &str| only.as_deref().is_none_or(|o| o.split(',').any(|w| label.starts_with(w)));
        for (label, precond, sweeps) in variants.into_iter().filter(|v| wanted(&v.0)) {
            let made = Instant::now();
            let s = match Solver::with_settings(
                a.clone(),
                Method::Bicgstab,
                precond,
                Settings { ilu_sweeps: sweeps, ..Default::default() },
            ) {
                // the split form where this matrix's graph has triangles
                Err(e) if e.kind == fegpu::error::ErrorKind::Unsupported => {
                    println!("  {name:<18} {n:>8} {label:<17} refused: {}", e.message);
                    continue;
                }
                s => s?,
            };
            let za = Array::new(ctx.clone(), n, 1, Some(&vec![f64::NAN; n]))?;
            let apply = time(&ctx, 20, || s.precondition(&ra, &za).map(|_| ()))?;
            let mut z = vec![0.0; n];
            za.download(0, &mut z, "z")?;
            // the windows: their plans and how far z is from the exact schedule's (to rounding, not bit for bit)
            let note = match s.ilu_plans()? {
                Some([l, u]) if matches!(sweeps, IluSweeps::Windows { .. }) => {
                    let scale = zs.first().map_or(1.0, |e| e.iter().fold(0.0f64, |m, v| m.max(v.abs())));
                    let diff = zs.first().map_or(f64::NAN, |e| e.iter().zip(&z).fold(0.0f64, |m, (a, b)| m.max((a - b).abs())));
                    format!(
                        "   (windows {} / {} planes, runs {} / {}; max |z - z_exact| / max |z| = {:.1e})",
                        l[0],
                        u[0],
                        l[1],
                        u[1],
                        diff / scale
                    )
                }
                _ if matches!(precond, Precond::Ilu0Multicolour { .. }) => {
                    let summary = s.ilu_summary().unwrap_or_default();
                    format!("   ({}; solver made in {:.1} ms)", summary.trim_end(), made.elapsed().as_secs_f64() * 1e3)
                }
                _ => {
                    if precond == Precond::Ilu0 {
                        zs.push(z);
                    }
                    String::new()
                }
            };
            if quick {
                println!("  {name:<18} {n:>8} {label:<17} {:>9.4} {:>9.4}{note}", apply * 1e3, floor * 1e3);
                continue;
            }
            // the factorisation alone: new values (the same ones) make the next apply refactor
            a.update_values(&a.download_values()?)?;
            let factor = s.precondition(&ra, &za)?;
            let (per_it, iters, solve) = ilu_solve(&ctx, &a, precond, Settings { ilu_sweeps: sweeps, ..Default::default() })?;
            println!(
                "  {name:<18} {n:>8} {label:<17} {:>9.4} {:>9.4} {:>10.2} {:>10.4} {iters:>7} {:>10.2}{note}",
                apply * 1e3,
                floor * 1e3,
                factor * 1e3,
                per_it * 1e3,
                solve * 1e3
            );
        }
        let same = zs.iter().all(|z| z.iter().zip(&zs[0]).all(|(a, b)| a.to_bits() == b.to_bits()));
        if quick {
            println!("  (z of the exact schedules {})", if same { "bitwise equal" } else { "DIFFER" });
            continue;
        }
        let (b, x) = (Array::new(ctx.clone(), n, 1, Some(&r))?, Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n]))?);
        let s = Solver::new(a.clone(), Method::Bicgstab, Precond::None)?;
        s.solve(&b, &x, 1e-30, 2)?;
        x.upload(0, &vec![0.0; n], "x")?;
        let t = Instant::now();
        let (o, _, _) = s.solve(&b, &x, 1e-8, 20_000)?;
        println!(
            "  {name:<18} {n:>8} {:<17} {:>9} {:>9} {:>10} {:>10} {:>7} {:>10.2}   (z of the exact schedules {})",
            "no precond",
            "-",
            "-",
            "-",
            "-",
            o.iterations,
            t.elapsed().as_secs_f64() * 1e3,
            if same { "bitwise equal" } else { "DIFFER" }
        );
    }
    if std::env::var("FEGPU_BENCH_QUICK").is_ok() {
        return Ok(());
    }
    small_systems(&ctx, small_real.as_ref().map(|(m, a)| (m.as_str(), a)))
}

/// The plane pipeline's runs in the windows rows: FEGPU_BENCH_RUNS=4,8 (a
/// row each), else the picked ones.
fn bench_runs() -> Vec<Option<usize>> {
    let asked: Vec<Option<usize>> =
        std::env::var("FEGPU_BENCH_RUNS").unwrap_or_default().split(',').filter_map(|c| c.parse().ok()).map(Some).collect();
    if asked.is_empty() {
        vec![None]
    } else {
        asked
    }
}

/// BiCGSTAB with Jacobi-swept ILU(0) (2 sweeps) on n^3 convection-diffusion
/// grids of 216 to 32,768 rows and on sherman5 when it is the caller's
/// matrix: as one block a launch, as one cluster with the system in shared
/// memory (where it fits eight blocks; else the grid's kernels run) and as
/// the grid's kernels, per iteration and to 1e-8 from b = A*1 (the crossovers
/// that set Settings::small_system_rows and cluster_system_rows).
fn small_systems(ctx: &Arc<Context>, real: Option<(&str, &gallery::CsrArrays)>) -> Result<()> {
    println!(
        "small systems: BiCGSTAB, ILU(0) with 2 Jacobi sweeps, an iteration as one block, one cluster or the grid's kernels"
    );
    println!(
        "  {:<18} {:>8} {:>12} {:>14} {:>12} {:>7} {:>12} {:>14} {:>12}",
        "matrix", "rows", "block ms/it", "cluster ms/it", "grid ms/it", "iters", "block solve", "cluster solve", "grid solve"
    );
    let mut list: Vec<(String, usize, gallery::CsrArrays)> = [6usize, 8, 10, 14, 18, 22, 27, 32]
        .into_iter()
        .map(|m| (format!("convdiff {m}^3"), m * m * m, gallery::convection_diffusion(m, 2.0)))
        .collect();
    if let Some((name, arrays)) = real {
        list.push((name.to_string(), arrays.0.len() - 1, arrays.clone()));
    }
    for (name, n, arrays) in list {
        let a = make(ctx, n, &arrays)?;
        let precond = Precond::Ilu0Jacobi { sweeps: 2 };
        let run = |block: usize, cluster: usize| {
            let settings = Settings { small_system_rows: block, cluster_system_rows: cluster, ..Default::default() };
            ilu_solve(ctx, &a, precond, settings)
        };
        let (block, iters, block_solve) = run(usize::MAX, 0)?;
        let (cluster, _, cluster_solve) = run(0, usize::MAX)?;
        let (grid, _, grid_solve) = run(0, 0)?;
        println!(
            "  {name:<18} {n:>8} {:>12.4} {:>14.4} {:>12.4} {iters:>7} {:>12.3} {:>14.3} {:>12.3}",
            block * 1e3,
            cluster * 1e3,
            grid * 1e3,
            block_solve * 1e3,
            cluster_solve * 1e3,
            grid_solve * 1e3
        );
    }
    Ok(())
}

/// A 7-point block pattern on n^3 cells with k x k blocks: random values,
/// diagonal blocks made dominant (a Newton Jacobian's shape, not its numbers).
fn block_grid(ctx: &Arc<Context>, n: usize, k: usize) -> Result<Arc<Csr>> {
    let (rp, ci, _) = gallery::laplacian7(n);
    let p = sparse::build_pattern(n * n * n, n * n * n, &rp, &ci, 0)?;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut v: Vec<f64> = (0..p.nnz() * k * k)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect();
    for (r, &d) in p.diag.iter().enumerate() {
        for i in 0..k {
            v[(d as usize * k + i) * k + i] += 8.0 * k as f64 + (r % 7) as f64;
        }
    }
    Ok(Arc::new(Csr::with_blocks(ctx.clone(), p, k, &v)?))
}

/// The convection-diffusion operator on n^3 cells coupling k unknowns a
/// cell: each entry times the k x k block with 1 on the diagonal and 0.2 / k
/// off it (a Newton Jacobian's iteration counts, 11 to 19 at these sizes).
fn coupled_convection_diffusion(ctx: &Arc<Context>, n: usize, k: usize) -> Result<Arc<Csr>> {
    let (rp, ci, v) = gallery::convection_diffusion(n, 2.0);
    let p = sparse::build_pattern(n * n * n, n * n * n, &rp, &ci, 0)?;
    let coupling = |i: usize, j: usize| if i == j { 1.0 } else { 0.2 / k as f64 };
    let blocks: Vec<f64> = v.iter().flat_map(|&a| (0..k * k).map(move |t| a * coupling(t % k, t / k))).collect();
    Ok(Arc::new(Csr::with_blocks(ctx.clone(), p, k, &blocks)?))
}

/// Small block systems (a Newton loop's sizes: grids of 512 to 5,832
/// cells, 2 to 4 unknowns a cell): BiCGSTAB with the Jacobi-swept
/// block ILU(0) as one cluster (a thread a block row; where it fits, else
/// the grid's kernels run) and as the grid's kernels, per iteration and to
/// 1e-8 (the crossover that sets krylov::cuda::BSR_CLUSTER_ROWS).
fn small_block_systems(ctx: &Arc<Context>) -> Result<()> {
    println!("small block systems: BiCGSTAB, block ILU(0) with 2 Jacobi sweeps, as one cluster or the grid's kernels");
    println!(
        "  {:<14} {:>8} {:>14} {:>12} {:>7} {:>14} {:>12}",
        "grid", "rows", "cluster ms/it", "grid ms/it", "iters", "cluster solve", "grid solve"
    );
    for (n, k) in [(8usize, 2usize), (12, 2), (14, 2), (18, 2), (12, 3), (12, 4)] {
        let a = coupled_convection_diffusion(ctx, n, k)?;
        let run = |cluster: usize| {
            let settings = Settings { cluster_system_rows: cluster, ..Default::default() };
            ilu_solve(ctx, &a, Precond::Ilu0Jacobi { sweeps: 2 }, settings)
        };
        let ((cluster, iters, cluster_solve), (grid, _, grid_solve)) = (run(usize::MAX)?, run(0)?);
        println!(
            "  {:<14} {:>8} {:>14.4} {:>12.4} {iters:>7} {:>14.3} {:>12.3}",
            format!("{n}^3 x {k}"),
            n * n * n * k,
            cluster * 1e3,
            grid * 1e3,
            cluster_solve * 1e3,
            grid_solve * 1e3
        );
    }
    Ok(())
}

/// `fegpu bench block`: block CSR on 7-point grids with 2, 3 and 4 unknowns a
/// cell: the SpMV against its bytes at the copy ceiling and against the CSR
/// SpMV of the same matrix with every block entry stored; block Jacobi and
/// block ILU(0) (apply, device factorisation) and BiCGSTAB with them per
/// iteration and to 1e-8, beside point ILU(0) on the CSR form. The values are
/// random with dominant diagonal blocks: the per-iteration costs are a
/// Jacobian's, the iteration counts are not (BENCHMARKS.md has the Newton loop's).
pub fn block() -> Result<()> {
    let (ctx, ceiling) = start("block")?;
    small_block_systems(&ctx)?;
    println!("bytes = nnzb (8 k^2 + 4) + 4 (nb+1) + 16 nb k: each read or written once");
    println!(
        "  {:<14} {:>8} {:<22} {:>9} {:>8} {:>8} {:>7} {:>10}",
        "grid", "rows", "operation", "ms", "GB/s", "of copy", "iters", "solve ms"
    );
    for (n, k) in [(100usize, 2usize), (80, 3), (64, 4)] {
        let a = block_grid(&ctx, n, k)?;
        let (nb, nnzb) = (a.pattern.nrows, a.pattern.nnz());
        let rows = nb * k;
        let name = format!("{n}^3 x {k}");
        let (xh, x, y) = product_operands(&ctx, rows)?;
        let bytes = (nnzb * (8 * k * k + 4) + 4 * (nb + 1) + 16 * nb * k) as f64;
        let report = |what: &str, t: f64, bytes: f64, iters: &str, solve: &str| {
            let gbs = bytes / t / 1e9;
            println!(
                "  {name:<14} {rows:>8} {what:<22} {:>9.4} {gbs:>8.1} {:>7.1}% {iters:>7} {solve:>10}",
                t * 1e3,
                100.0 * gbs / ceiling
            );
        };
        on_device(&ctx, &a, &x, &y, |g, dp, v, xd, yd| {
            for tpr in [1u32, 2, 4, 8] {
                let t = time(&ctx, 20, || sparse::block::cuda::spmv_lanes(g, dp, nb, k, tpr, v, 1.0, (xd, 0.0, yd), None))?;
                report(&format!("BSR SpMV, {tpr} lanes"), t, bytes, "", "");
            }
            Ok(())
        })?;
        let t = time(&ctx, 20, || sparse::spmv(&a, 1.0, &x, 0.0, &y))?;
        report("BSR SpMV (default)", t, bytes, "", "");
        let mut got = vec![0.0; rows];
        y.download(0, &mut got, "y")?;
        let (values, mut want) = (a.download_values()?, vec![0.0; rows]);
        sparse::block::cpu::spmv(&a.pattern, k, &values, 1.0, &xh, 0.0, &mut want);
        let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
        let (prp, pci, pv) = sparse::block::to_point(&a.pattern, k, &values);
        let point = Arc::new(Csr::new(ctx.clone(), sparse::build_pattern(rows, rows, &prp, &pci, 0)?, &pv)?);
        let t = time(&ctx, 20, || sparse::spmv(&point, 1.0, &x, 0.0, &y))?;
        report("CSR SpMV (same matrix)", t, bytes, "", "");
        let cases = [
            ("block Jacobi", &a, Precond::Jacobi),
            ("block ILU(0)", &a, Precond::Ilu0),
            ("block ILU(0) Jacobi x2", &a, Precond::Ilu0Jacobi { sweeps: 2 }),
            ("point ILU(0) (CSR)", &point, Precond::Ilu0),
            ("no precond", &a, Precond::None),
        ];
        for (label, m, precond) in cases {
            let settings = Settings { host_factor_rows: 0, ..Default::default() };
            if precond != Precond::None {
                let s = Solver::with_settings(m.clone(), Method::Bicgstab, precond, settings.clone())?;
                let z = Array::new(ctx.clone(), rows, 1, Some(&vec![f64::NAN; rows]))?;
                let apply = time(&ctx, 10, || s.precondition(&x, &z).map(|_| ()))?;
                m.update_values(&m.download_values()?)?;
                let factor = s.precondition(&x, &z)?;
                // block Jacobi reads its inverted blocks and r, writes z; ILU(0) the whole factor (the matrix's bytes)
                let read = if precond == Precond::Jacobi { (nb * (8 * k * k + 16 * k)) as f64 } else { bytes };
                report(&format!("{label} apply"), apply, read, "", "");
                println!("  {name:<14} {rows:>8} {:<22} {:>9.4}", format!("{label} factor"), factor * 1e3);
            }
            let (per_it, iters, solve) = ilu_solve(&ctx, m, precond, settings)?;
            report(&format!("BiCGSTAB + {label}"), per_it, f64::NAN, &iters.to_string(), &format!("{:.2}", solve * 1e3));
        }
        println!("  {name:<14} BSR SpMV: max |y - y_cpu| = {err:.2e}");
    }
    Ok(())
}
